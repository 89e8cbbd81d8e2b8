/* SPDX-License-Identifier: Apache-2.0 */
/* util: bounded buffers, quantities, model-size counts, error formatting. */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

/* The one JSON number writer: never inf or nan (JSON has neither), never "-0". */
static const struct {
    double v;
    int digits, decimals;   /* decimals < 0: af_buf_json_num with `digits` */
    const char *want;
} json_num_cases[] = {
    {1.5, 6, -1, "1.5"},
    {INFINITY, 6, -1, "null"},
    {-INFINITY, 10, -1, "null"},
    {NAN, 6, -1, "null"},
    {-0.0, 6, -1, "0"},
    {1e300, 6, -1, "1e+300"},
    {12.345, 0, 2, "12.35"},
    {-0.001, 0, 2, "0.00"},
    {INFINITY, 0, 2, "null"},
    {NAN, 0, 1, "null"},
    {1e300, 0, 2, "1.0000000000000001e+300"},
};

START_TEST(test_json_numbers_are_always_json)
{
    struct af_buf b = AF_BUF_INIT(0);
    int rc = json_num_cases[_i].decimals < 0
                 ? af_buf_json_num(&b, json_num_cases[_i].v, json_num_cases[_i].digits)
                 : af_buf_json_fixed(&b, json_num_cases[_i].v, json_num_cases[_i].decimals);

    ck_assert_int_eq(rc, 0);
    ck_assert_str_eq(b.buf, json_num_cases[_i].want);
    af_buf_release(&b);
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

/* Room made ahead keeps what the buffer holds, and a buffer it allocates reads as "". */
START_TEST(test_buf_reserve_keeps_the_text)
{
    struct af_buf b = AF_BUF_INIT(8);
    char *before;

    af_buf_reserve(&b, 4096);
    ck_assert_ptr_nonnull(b.buf);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_str_eq(b.buf, "");
    ck_assert_int_eq(af_buf_puts(&b, "abc"), 0);
    before = b.buf;
    ck_assert_int_eq(af_buf_puts(&b, "defgh"), 0);   /* no growing: the room was there */
    ck_assert_ptr_eq(b.buf, before);
    ck_assert_int_eq(af_buf_puts(&b, "i"), AF_ETOOBIG);   /* the cap still holds */
    af_buf_reserve(&b, 100000);
    ck_assert_str_eq(b.buf, "abcdefgh");
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

/*
 * The Kubernetes resource.Quantity grammar, exactly: a sign, digits with an optional
 * fraction, and one suffix (binary SI, decimal SI or an e/E exponent). Sub-unit values
 * round up, away from zero, as Quantity.Value() and MilliValue() do; anything else
 * (hex, inf, nan, blanks, junk, a value past int64 after its suffix) is refused.
 */
static const struct {
    const char *in;
    int64_t scale;
    int64_t want;
    int ok;
} kube_quantity_cases[] = {
    {"1Ei", 1, 1152921504606846976LL, 1},
    {"7Ei", 1, 8070450532247928832LL, 1},
    {"8Ei", 1, 0, 0},
    {"1E", 1, 1000000000000000000LL, 1},
    {"9223372036854775807", 1, INT64_MAX, 1},
    {"9223372036854775808", 1, 0, 0},
    {"9223372036854775807m", 1000, INT64_MAX, 1},
    {"9223372036854775.807", 1000, INT64_MAX, 1},
    {"9223372036854775.808", 1000, 0, 0},
    {"-9223372036854775807", 1, -INT64_MAX, 1},
    {"1e18", 1, 1000000000000000000LL, 1},
    {"1e19", 1, 0, 0},
    {"1e300", 1, 0, 0},
    {"1n", 1000, 1, 1},
    {"1n", 1, 1, 1},
    {"1u", 1000, 1, 1},
    {"1000000n", 1000, 1, 1},
    {"1000001n", 1000, 2, 1},
    {"1.0000001", 1, 2, 1},
    {"0.000000000000000000000000000001", 1, 1, 1},
    {"1e-40", 1000, 1, 1},
    {"0.5Ki", 1, 512, 1},
    {"1.5Ki", 1, 1536, 1},
    {"0.001Ki", 1, 2, 1},
    {"0.0009765625Ki", 1, 1, 1},
    {"-1m", 1, -1, 1},
    {"-0", 1, 0, 1},
    {"+5", 1, 5, 1},
    {".5", 1000, 500, 1},
    {"5.", 1000, 5000, 1},
    {"0e999999", 1, 0, 1},
    {"0.1", 1, 1, 1},
    {"1e-3", 1000, 1, 1},
    {"1e+3", 1, 1000, 1},
    {"1E3", 1, 1000, 1},
    {"000001.500", 1000, 1500, 1},
    {"0x10", 1, 0, 0},
    {"0X1p3", 1, 0, 0},
    {"inf", 1, 0, 0},
    {"Infinity", 1, 0, 0},
    {"nan", 1, 0, 0},
    {".", 1, 0, 0},
    {"+", 1, 0, 0},
    {"-", 1, 0, 0},
    {"1e", 1, 0, 0},
    {"1ee3", 1, 0, 0},
    {"1e3Ki", 1, 0, 0},
    {"1Ki1", 1, 0, 0},
    {"1K", 1, 0, 0},
    {"1.5.5", 1, 0, 0},
    {" 1", 1, 0, 0},
    {"1 ", 1, 0, 0},
    {"1Gi ", 1, 0, 0},
    {"1_000", 1, 0, 0},
    {"--1", 1, 0, 0},
    {"1e1.5", 1, 0, 0},
};

START_TEST(test_quantity_follows_the_kubernetes_grammar)
{
    int64_t v = -12345;
    int rc = af_parse_quantity(kube_quantity_cases[_i].in, kube_quantity_cases[_i].scale, &v);

    if (kube_quantity_cases[_i].ok) {
        ck_assert_msg(rc == 0, "'%s' refused", kube_quantity_cases[_i].in);
        ck_assert_msg(v == kube_quantity_cases[_i].want, "'%s' x %lld: got %lld, want %lld",
                      kube_quantity_cases[_i].in, (long long)kube_quantity_cases[_i].scale,
                      (long long)v, (long long)kube_quantity_cases[_i].want);
    } else {
        ck_assert_msg(rc == AF_EINVAL, "'%s' accepted as %lld", kube_quantity_cases[_i].in,
                      (long long)v);
        ck_assert_msg(v == -12345, "'%s': *out written on failure", kube_quantity_cases[_i].in);
    }
}
END_TEST

/* Model sizes: a plain decimal, an e-exponent or one k/M/B/G/T suffix; the value must fit
 * int64 after the suffix (ok 2: of the form, but out of range: AF_ERANGE). */
static const struct {
    const char *in;
    double want;
    int ok;
} strict_count_cases[] = {
    {"1.5B", 1.5e9, 1},  {"7B", 7e9, 1},        {"13e9", 13e9, 1},     {"350M", 350e6, 1},
    {"1.5k", 1500, 1},   {"2K", 2000, 1},       {"1T", 1e12, 1},       {".5B", 0.5e9, 1},
    {"9e18", 9e18, 1},   {"0", 0, 1},           {"1e300B", 0, 0},      {"1e300", 0, 2},
    {"1e19", 0, 2},      {"10000000T", 0, 2},   {"0x10", 0, 0},        {"0x1p3", 0, 0},
    {"inf", 0, 0},       {"infB", 0, 0},        {"nan", 0, 0},         {"NaN", 0, 0},
    {" 7B", 0, 0},       {"7B ", 0, 0},         {"7 B", 0, 0},         {"+7B", 0, 0},
    {"1e3B", 0, 0},      {"1e", 0, 0},          {".", 0, 0},           {"7Bi", 0, 0},
    {"7Q", 0, 0},        {"1,5B", 0, 0},        {"1e400", 0, 2},       {"-0", 0, 0},
};

START_TEST(test_count_refuses_what_is_not_a_model_size)
{
    double v = -1;
    int rc = af_parse_count(strict_count_cases[_i].in, &v);

    if (strict_count_cases[_i].ok == 1) {
        ck_assert_msg(rc == 0, "'%s' refused", strict_count_cases[_i].in);
        ck_assert_double_eq_tol(v, strict_count_cases[_i].want, 1);
    } else {
        ck_assert_msg(rc == (strict_count_cases[_i].ok == 2 ? AF_ERANGE : AF_EINVAL),
                      "'%s': %d (%g)", strict_count_cases[_i].in, rc, v);
        ck_assert_msg(v == -1, "'%s': *out written on failure", strict_count_cases[_i].in);
    }
}
END_TEST

/* Plain decimals (prices and the like): no hex, no inf or nan, range-checked. */
static const struct {
    const char *in;
    double min, max, want;
    int ok;
} decimal_cases[] = {
    {"32.77", 0, 1e6, 32.77, 1}, {"0.5", 0, 1e6, 0.5, 1},     {"0", 0, 1e6, 0, 1},
    {"1e3", 0, 1e6, 1000, 1},    {"2.5E-1", 0, 1e6, 0.25, 1}, {".5", 0, 1e6, 0.5, 1},
    {"5.", 0, 1e6, 5, 1},        {"-1", -5, 5, -1, 1},        {"+1", -5, 5, 1, 1},
    {"1000000", 0, 1e6, 1e6, 1}, {"1000000.01", 0, 1e6, 0, 0}, {"-1", 0, 1e6, 0, 0},
    {"0x10", 0, 1e6, 0, 0},      {"0x1p3", 0, 1e6, 0, 0},     {"inf", 0, INFINITY, 0, 0},
    {"nan", 0, 1e6, 0, 0},       {"", 0, 1e6, 0, 0},          {" 1", 0, 1e6, 0, 0},
    {"1 ", 0, 1e6, 0, 0},        {"1.2.3", 0, 1e6, 0, 0},     {"1e", 0, 1e6, 0, 0},
    {"1e999", 0, INFINITY, 0, 0}, {"$5", 0, 1e6, 0, 0},       {"5k", 0, 1e6, 0, 0},
    {".", 0, 1e6, 0, 0},         {"-", -5, 5, 0, 0},
};

START_TEST(test_decimal_is_plain_and_in_range)
{
    double v = -42;
    int rc = af_parse_decimal(decimal_cases[_i].in, decimal_cases[_i].min, decimal_cases[_i].max,
                              &v);

    if (decimal_cases[_i].ok) {
        ck_assert_msg(rc == 0, "'%s' refused", decimal_cases[_i].in);
        ck_assert_double_eq_tol(v, decimal_cases[_i].want, 1e-9);
    } else {
        ck_assert_msg(rc == AF_EINVAL, "'%s' accepted as %g", decimal_cases[_i].in, v);
        ck_assert_msg(v == -42, "'%s': *out written on failure", decimal_cases[_i].in);
    }
}
END_TEST

/* `1e300B` used to become inf, which --output json printed as the non-JSON word inf. */
START_TEST(test_recommend_refuses_an_overflowing_model_size)
{
    const char *argv[] = {"accelfit", "recommend", "--workload", "training", "--model-params",
                          "1e300B", "--output", "json", NULL};
    char *out = NULL, *err = NULL;
    int rc = af_test_exec(argv, NULL, &out, &err);

    ck_assert_int_ne(rc, 0);
    ck_assert_msg(!strstr(out, "inf"), "stdout: %s", out);
    ck_assert_msg(strstr(err, "'1e300B'"), "stderr does not name the value: %s", err);
    free(out);
    free(err);
}
END_TEST

/* Integers as flags and annotations give them: strtoll's leading blanks are not part of
 * one ("latency-slo-ms: ' 5'" is malformed, as the other parsers say). */
static const struct {
    const char *in;
    int64_t want;
    int ok;
} int64_cases[] = {
    {"5", 5, 1},   {"-5", -5, 1}, {"+5", 5, 1},  {"007", 7, 1}, {" 5", 0, 0},
    {"\t5", 0, 0}, {"\n5", 0, 0}, {"5 ", 0, 0},  {"0x10", 0, 0}, {"", 0, 0},
    {"-", 0, 0},   {"+ 5", 0, 0}, {"99999999999999999999", 0, 0},
};

START_TEST(test_int64_refuses_blanks)
{
    int64_t v = -1;
    int rc = af_parse_int64(int64_cases[_i].in, -100, 100, &v);

    if (int64_cases[_i].ok) {
        ck_assert_msg(rc == 0, "'%s' refused", int64_cases[_i].in);
        ck_assert_int_eq(v, int64_cases[_i].want);
    } else {
        ck_assert_msg(rc == AF_EINVAL, "'%s' accepted as %lld", int64_cases[_i].in,
                      (long long)v);
    }
}
END_TEST

/*
 * One reader of times serves the policy, the catalog, AWS answers, pods and annotations: a
 * time any of them writes reads the same, and what is not RFC 3339 is refused by all alike
 * (the catalog's reader used to take "...Zjunk" and a 13th month).
 */
static const struct {
    const char *in;
    double want;   /* -1: refused */
} time_cases[] = {
    {"2026-11-22T04:00:00Z", 1795320000},
    {"2026-11-22t04:00:00z", 1795320000},
    {"2026-11-22T06:00:00+02:00", 1795320000},
    {"2026-11-21T23:30:00-04:30", 1795320000},
    {"2014-01-06T04:32:53.000Z", 1388982773},
    {"2024-02-29T00:00:00Z", 1709164800},
    {"2026-11-22T04:00:00Zjunk", -1},
    {"2026-13-01T00:00:00Z", -1},
    {"2026-04-31T00:00:00Z", -1},
    {"2025-02-29T00:00:00Z", -1},
    {"2026-11-22T04:00:00", -1},
    {"2026-11-22 04:00:00Z", -1},
    {" 2026-11-22T04:00:00Z", -1},
    {"2026-11-22T24:00:00Z", -1},
    {"2026-11-22T04:00:00+2:00", -1},
    {"1969-12-31T23:59:59Z", -1},
    {"", -1},
};

START_TEST(test_one_time_grammar_for_every_reader)
{
    double t = af_parse_rfc3339(time_cases[_i].in);
    char out[AF_RFC3339_LEN];

    if (time_cases[_i].want < 0) {
        ck_assert_msg(t < 0, "'%s' read as %.0f", time_cases[_i].in, t);
        return;
    }
    ck_assert_msg(fabs(t - time_cases[_i].want) < 1e-6, "'%s' read as %.3f", time_cases[_i].in, t);
    /* written back in UTC, it reads the same (whole seconds) */
    af_format_rfc3339(t, out, sizeof(out));
    ck_assert_double_eq(af_parse_rfc3339(out), floor(time_cases[_i].want));
}
END_TEST

START_TEST(test_times_written_read_back_over_centuries)
{
    char out[AF_RFC3339_LEN];

    for (double t = 0; t < 253402300799.0; t += 86400.0 * 97 + 3671) {
        af_format_rfc3339(t, out, sizeof(out));
        ck_assert_msg(af_parse_rfc3339(out) == floor(t), "%.0f -> %s", t, out);
    }
    af_format_rfc3339(-5, out, sizeof(out));
    ck_assert_str_eq(out, "1970-01-01T00:00:00Z");
}
END_TEST

/* The webhook's patch goes out in base64 and kubeconfigs come in base64: one codec, and what
 * one writes the other reads, including the URL-safe alphabet and missing padding. */
START_TEST(test_base64_round_trips_and_refuses_other_bytes)
{
    struct af_buf b = AF_BUF_INIT(0);
    unsigned char all[256];
    size_t n = 0;
    char *back;

    for (int i = 0; i < 256; i++)
        all[i] = (unsigned char)(255 - i);
    static const char *const rfc4648[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE="};

    for (size_t len = 0; len < AF_ARRAY_SIZE(rfc4648); len++) {   /* RFC 4648 §10 */
        af_buf_reset(&b);
        ck_assert_int_eq(af_buf_base64(&b, "fooba", len), 0);
        ck_assert_int_eq(af_buf_add(&b, "", 1), 0);
        ck_assert_str_eq(b.buf, rfc4648[len]);
    }
    af_buf_reset(&b);
    ck_assert_int_eq(af_buf_base64(&b, all, sizeof(all)), 0);
    ck_assert_int_eq(af_buf_add(&b, "", 1), 0);
    back = af_base64_decode(b.buf, &n);
    ck_assert_uint_eq(n, sizeof(all));
    ck_assert(!memcmp(back, all, n));
    af_free(back);
    back = af_base64_decode("_-8\n", &n);   /* URL-safe, unpadded, a line break */
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq((unsigned char)back[0], 0xff);
    ck_assert_int_eq((unsigned char)back[1], 0xef);
    af_free(back);
    ck_assert_ptr_null(af_base64_decode("Zm9v!", NULL));
    af_buf_release(&b);
}
END_TEST

/* One duration grammar: the policy's strict form (no flags) and the simulator's (bare
 * seconds and fractions). want < 0: refused. */
#define SIM (AF_DURATION_SECONDS | AF_DURATION_FRACTIONS)
static const struct {
    const char *in;
    unsigned flags;
    double want;
} duration_cases[] = {
    {"90s", 0, 90},           {"10m", 0, 600},          {"24h", 0, 86400},
    {"2d", 0, 172800},        {"1h30m", 0, 5400},       {"1d12h", 0, 129600},
    {"0", 0, 0},              {"0s", 0, 0},             {"30m", 0, 1800},
    {"3650d", 0, 3650 * 86400.0},
    {"10", 0, -1},            {"1.5h", 0, -1},          {"3651d", 0, -1},
    {"99999999999s", 0, -1},  {"90", SIM, 90},          {"1.5", SIM, 1.5},
    {"1.5h", SIM, 5400},      {"0h", SIM, 0},           {"1h30", SIM, -1},
    {"1h30", 0, -1},          {"10 m", SIM, -1},        {" 5m", SIM, -1},
    {"-5m", SIM, -1},         {"+5m", SIM, -1},         {"10min", SIM, -1},
    {"m", SIM, -1},           {"h1", SIM, -1},          {"1w", SIM, -1},
    {"", SIM, -1},            {"1.h", SIM, -1},         {".5h", SIM, -1},
    {"1e3s", SIM, -1},        {"0x10s", SIM, -1},       {"1e308", SIM, -1},
    {"inf", SIM, -1},         {"nan", SIM, -1},         {"5mm", SIM, -1},
};

START_TEST(test_one_duration_grammar)
{
    double v = -7;
    int rc = af_parse_duration(duration_cases[_i].in, duration_cases[_i].flags,
                               AF_DURATION_MAX_S, &v);

    if (duration_cases[_i].want < 0) {
        ck_assert_msg(rc == AF_EINVAL, "'%s' was taken", duration_cases[_i].in);
        ck_assert(v == -7);   /* *out left alone */
    } else {
        ck_assert_msg(rc == 0, "'%s' was refused", duration_cases[_i].in);
        ck_assert(v == duration_cases[_i].want);
    }
}
END_TEST

START_TEST(test_duration_bound_is_the_callers)
{
    double v;

    ck_assert_int_eq(af_parse_duration("2h", 0, 7200, &v), 0);
    ck_assert(v == 7200);
    ck_assert_int_eq(af_parse_duration("2h1s", 0, 7200, &v), AF_EINVAL);
    ck_assert_int_eq(af_parse_duration(NULL, 0, 7200, &v), AF_EINVAL);
    ck_assert_int_eq(af_parse_duration("36524d", SIM, 36525 * 86400.0, &v), 0);
}
END_TEST
#undef SIM

/* The index finds every key added, under a hash shared by many keys too, and says when a
 * key is absent; a zeroed index is empty; an arena's index needs no release. */
static bool index_find(const struct af_index *ix, char (*keys)[16], uint32_t h, const char *key,
                       uint32_t *at)
{
    size_t walk = af_index_start(ix, h);

    while (af_index_next(ix, h, &walk, at))
        if (!strcmp(keys[*at], key))
            return true;
    return false;
}

/* The table hash spreads node names of every length over an index's slots (its low bits,
 * where a probe starts), reads every byte, and tells chained fields apart. */
START_TEST(test_hash_spreads_names_and_reads_every_byte)
{
    enum { N = 20000, SLOTS = 1u << 16 };
    static uint8_t used[SLOTS];
    char name[80], other[80];
    size_t taken = 0;

    memset(used, 0, sizeof(used));
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "ip-10-%d-%d-%d.us-west-2.compute.internal", i / 65536,
                 (i / 256) % 256, i % 256);
        taken += !used[af_hash_str(AF_HASH_INIT, name) & (SLOTS - 1)]++;
    }
    /* uniform hashing fills 1 - e^(-N/SLOTS) of the slots: 26.3%, 17,236 of 65,536 */
    ck_assert_uint_gt(taken, 16800);
    /* a change in any one byte, at any length, changes the hash */
    for (size_t len = 1; len < 40; len++) {
        memset(name, 'a', len);
        name[len] = '\0';
        for (size_t at = 0; at < len; at++) {
            memcpy(other, name, len + 1);
            other[at] = 'b';
            ck_assert_uint_ne(af_hash_str(AF_HASH_INIT, name), af_hash_str(AF_HASH_INIT, other));
        }
        ck_assert_uint_ne(af_hash_bytes(AF_HASH_INIT, name, len),
                          af_hash_bytes(AF_HASH_INIT, name, len - 1));
    }
    ck_assert_uint_eq(af_hash_str(AF_HASH_INIT, NULL), af_hash_str(AF_HASH_INIT, ""));
    ck_assert_uint_ne(af_hash_str(af_hash_str(AF_HASH_INIT, "ab"), "c"),
                      af_hash_str(af_hash_str(AF_HASH_INIT, "a"), "bc"));
}
END_TEST

START_TEST(test_index_finds_what_was_added_and_nothing_else)
{
    static char keys[1000][16];
    struct af_index ix = {0}, small = {0};
    struct af_arena ar = AF_ARENA_INIT;
    uint32_t at;
    size_t walk = af_index_start(&ix, 7);

    ck_assert(!af_index_next(&ix, 7, &walk, &at));
    ck_assert_uint_eq(af_index_bytes(&ix), 0);
    af_index_init(&ix, AF_ARRAY_SIZE(keys), NULL);
    ck_assert_uint_eq(af_index_bytes(&ix), 2048 * sizeof(uint64_t));
    for (size_t i = 0; i < AF_ARRAY_SIZE(keys); i++) {
        snprintf(keys[i], sizeof(keys[i]), "node-%zu", i);
        /* one key in ten shares the hash 42: long probes over collisions */
        af_index_add(&ix, i % 10 ? af_hash_str(AF_HASH_INIT, keys[i]) : 42, i);
    }
    for (size_t i = 0; i < AF_ARRAY_SIZE(keys); i++) {
        ck_assert(index_find(&ix, keys, i % 10 ? af_hash_str(AF_HASH_INIT, keys[i]) : 42,
                             keys[i], &at));
        ck_assert_uint_eq(at, i);
    }
    ck_assert(!index_find(&ix, keys, 42, "node-1", &at));   /* its hash is not 42 */
    ck_assert(!index_find(&ix, keys, af_hash_str(AF_HASH_INIT, "node-1000"), "node-1000", &at));
    walk = af_index_start(&ix, 42);
    for (size_t n = 0; af_index_next(&ix, 42, &walk, &at); n++) {
        ck_assert_uint_eq(at % 10, 0);
        ck_assert_uint_lt(n, 100);
    }
    af_index_release(&ix);
    ck_assert_ptr_null(ix.t);

    af_index_init(&small, 0, &ar);   /* sized 16 for none, from the arena */
    ck_assert_uint_eq(small.mask, 15);
    af_index_add(&small, 0xffffffffu, 0);
    af_index_add(&small, 0xffffffffu, 1);   /* wraps around the table's end */
    walk = af_index_start(&small, 0xffffffffu);
    ck_assert(af_index_next(&small, 0xffffffffu, &walk, &at) && at == 0);
    ck_assert(af_index_next(&small, 0xffffffffu, &walk, &at) && at == 1);
    ck_assert(!af_index_next(&small, 0xffffffffu, &walk, &at));
    af_arena_release(&ar);
}
END_TEST

/*
 * A thread's arena is kept between uses: after a reset the next request's temporaries come
 * from the same memory, with no malloc; an outsized chunk is not kept; another thread and
 * another use have arenas of their own.
 */
static void *other_thread_arena(void *unused)
{
    (void)unused;
    return af_arena_of_thread(AF_ARENA_REQUEST);
}

START_TEST(test_thread_arenas_are_kept_between_uses)
{
    struct af_arena *req = af_arena_of_thread(AF_ARENA_REQUEST), *big = &(struct af_arena){0};
    unsigned char *p, *q, *z;
    pthread_t t;
    void *theirs;

    ck_assert_ptr_eq(req, af_arena_of_thread(AF_ARENA_REQUEST));
    ck_assert_ptr_ne(req, af_arena_of_thread(AF_ARENA_TREE));
    p = af_arena_alloc_uninit(req, 40000);
    ck_assert_uint_eq((uintptr_t)p % 16, 0);
    memset(p, 0xab, 40000);
    af_arena_reset(req);
    q = af_arena_alloc_uninit(req, 40000);
    ck_assert_ptr_eq(p, q);                          /* the same chunk again */
    af_arena_reset(req);
    z = af_arena_alloc(req, 1000);
    for (int i = 0; i < 1000; i++)
        ck_assert_uint_eq(z[i], 0);                  /* zeroed, where 0xab was */
    af_arena_reset(req);

    ck_assert_int_eq(pthread_create(&t, NULL, other_thread_arena, NULL), 0);
    ck_assert_int_eq(pthread_join(t, &theirs), 0);
    ck_assert_ptr_ne(theirs, req);

    af_arena_alloc_uninit(big, 3u << 20);            /* over 1 MiB: released by reset */
    ck_assert_ptr_nonnull(big->head);
    af_arena_reset(big);
    ck_assert_ptr_null(big->head);
    af_arena_alloc_uninit(big, 1000);
    af_arena_reset(big);
    ck_assert_ptr_nonnull(big->head);                /* a chunk of the usual size is kept */
    af_arena_release(big);
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
    tcase_add_loop_test(tc, test_json_numbers_are_always_json, 0,
                        (int)AF_ARRAY_SIZE(json_num_cases));
    tcase_add_test(tc, test_buf_json_string_escapes_control_bytes);
    tcase_add_test(tc, test_error_format_names_file_line_column);
    tcase_add_test(tc, test_class_from_accelerator_names);
    tcase_add_loop_test(tc, test_quantity_follows_the_kubernetes_grammar, 0,
                        AF_ARRAY_SIZE(kube_quantity_cases));
    tcase_add_loop_test(tc, test_count_refuses_what_is_not_a_model_size, 0,
                        AF_ARRAY_SIZE(strict_count_cases));
    tcase_add_loop_test(tc, test_decimal_is_plain_and_in_range, 0, AF_ARRAY_SIZE(decimal_cases));
    tcase_add_test(tc, test_recommend_refuses_an_overflowing_model_size);
    tcase_add_loop_test(tc, test_int64_refuses_blanks, 0, AF_ARRAY_SIZE(int64_cases));
    tcase_add_loop_test(tc, test_one_time_grammar_for_every_reader, 0, AF_ARRAY_SIZE(time_cases));
    tcase_add_test(tc, test_times_written_read_back_over_centuries);
    tcase_add_test(tc, test_base64_round_trips_and_refuses_other_bytes);
    tcase_add_test(tc, test_hash_spreads_names_and_reads_every_byte);
    tcase_add_test(tc, test_index_finds_what_was_added_and_nothing_else);
    tcase_add_test(tc, test_thread_arenas_are_kept_between_uses);
    tcase_add_test(tc, test_buf_reserve_keeps_the_text);
    tcase_add_loop_test(tc, test_one_duration_grammar, 0, AF_ARRAY_SIZE(duration_cases));
    tcase_add_test(tc, test_duration_bound_is_the_callers);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_util_suite());
}
