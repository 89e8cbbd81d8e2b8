/* SPDX-License-Identifier: Apache-2.0 */
/* util: bounded buffers, quantities, model-size counts, error formatting. */
#include <string.h>

#include "accelfit/model.h"
#include "accelfit/util.h"
#include "support/support.h"

static const struct {
    const char *in;
    int64_t scale;
    int64_t want;
    int ok;
} quantity_cases[] = {
    {"500m", 1000, 500, 1},       {"4", 1000, 4000, 1},         {"16Gi", 1, 17179869184LL, 1},
    {"1.5", 1000, 1500, 1},       {"2e3", 1, 2000, 1},          {"128974848", 1, 128974848, 1},
    {"129M", 1, 129000000, 1},    {"100Ki", 1, 102400, 1},      {"0.1", 1000, 100, 1},
    {"1m", 1, 1, 1},              {"", 1, 0, 0},                {"abc", 1, 0, 0},
    {"5Qi", 1, 0, 0},             {"1e99", 1, 0, 0},
};

START_TEST(test_quantity_parses_kubernetes_suffixes)
{
    int64_t v = -1;
    int rc = af_parse_quantity(quantity_cases[_i].in, quantity_cases[_i].scale, &v);
    if (quantity_cases[_i].ok) {
        ck_assert_int_eq(rc, 0);
        ck_assert_int_eq(v, quantity_cases[_i].want);
    } else {
        ck_assert_int_ne(rc, 0);
    }
}
END_TEST

static const struct {
    const char *in;
    double want;
    int ok;
} count_cases[] = {
    {"70B", 70e9, 1}, {"350M", 350e6, 1}, {"13e9", 13e9, 1}, {"7000000000", 7e9, 1},
    {"1.5k", 1500, 1}, {"7b", 7e9, 1},    {"", 0, 0},        {"B", 0, 0},
    {"-3B", 0, 0},     {"7BB", 0, 0},     {"seven", 0, 0},
};

START_TEST(test_count_parses_model_sizes)
{
    double v = 0;
    int rc = af_parse_count(count_cases[_i].in, &v);
    if (count_cases[_i].ok) {
        ck_assert_int_eq(rc, 0);
        ck_assert_double_eq_tol(v, count_cases[_i].want, 1);
    } else {
        ck_assert_int_ne(rc, 0);
    }
}
END_TEST

START_TEST(test_buf_refuses_to_pass_its_cap)
{
    struct af_buf b = AF_BUF_INIT(8);
    ck_assert_int_eq(af_buf_add(&b, "12345", 5), 0);
    ck_assert_int_eq(af_buf_add(&b, "6789", 4), AF_ETOOBIG);
    ck_assert_str_eq(b.buf, "12345");
    ck_assert_int_eq(af_buf_add(&b, "678", 3), 0);
    ck_assert_uint_eq(b.len, 8);
    af_buf_release(&b);
}
END_TEST

START_TEST(test_buf_json_string_escapes_control_bytes)
{
    struct af_buf b = AF_BUF_INIT(0);
    ck_assert_int_eq(af_buf_json_str(&b, "a\"b\\c\n\x01"), 0);
    ck_assert_str_eq(b.buf, "\"a\\\"b\\\\c\\n\\u0001\"");
    af_buf_release(&b);
}
END_TEST

START_TEST(test_error_format_names_file_line_column)
{
    struct af_error e;
    char out[600];
    af_error_set(&e, AF_EPARSE, "p.yaml", 3, 7, "bad %s", "thing");
    af_error_format(&e, out, sizeof(out));
    ck_assert_str_eq(out, "p.yaml:3:7: bad thing");
}
END_TEST

START_TEST(test_class_from_accelerator_names)
{
    static const struct {
        const char *in;
        enum af_class want;
    } c[] = {
        {"NVIDIA-A100-SXM4-40GB", AF_CLASS_NVIDIA_A100}, {"a10g", AF_CLASS_NVIDIA_A10G},
        {"Tesla-T4", AF_CLASS_NVIDIA_T4},                {"NVIDIA-L40S", AF_CLASS_NVIDIA_L40S},
        {"l4", AF_CLASS_NVIDIA_L4},                      {"H100", AF_CLASS_NVIDIA_H100},
        {"inferentia2", AF_CLASS_INFERENTIA2},           {"Inferentia", AF_CLASS_INFERENTIA1},
        {"trainium2", AF_CLASS_TRAINIUM2},               {"aws-trainium", AF_CLASS_TRAINIUM1},
        {"nvidia-v100", AF_CLASS_NVIDIA_V100},           {"mystery", AF_CLASS_UNKNOWN},
    };
    for (size_t i = 0; i < AF_ARRAY_SIZE(c); i++)
        ck_assert_msg(af_class_from_accel_name(c[i].in) == c[i].want, "%s", c[i].in);
}
END_TEST

static Suite *af_util_suite(void)
{
    Suite *s = suite_create("util");
    TCase *tc = tcase_create("util");
    tcase_add_loop_test(tc, test_quantity_parses_kubernetes_suffixes, 0,
                        AF_ARRAY_SIZE(quantity_cases));
    tcase_add_loop_test(tc, test_count_parses_model_sizes, 0, AF_ARRAY_SIZE(count_cases));
    tcase_add_test(tc, test_buf_refuses_to_pass_its_cap);
    tcase_add_test(tc, test_buf_json_string_escapes_control_bytes);
    tcase_add_test(tc, test_error_format_names_file_line_column);
    tcase_add_test(tc, test_class_from_accelerator_names);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_util_suite());
}
