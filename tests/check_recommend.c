/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `accelfit recommend` and `accelfit check-policy` commands through the
 * real binary: every decision case of tests/fixtures/decisions.yaml with
 * --output json, the JSON shape, the table, the help, and bad input (exit 2,
 * nothing on stdout, one line on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "accelfit/config.h"
#include "support/support.h"

static json_t *cases;

static void setup(void)
{
    struct af_buf json = AF_BUF_INIT(0);
    struct af_error err;
    json_error_t jerr;
    size_t len;
    char *yaml = af_test_read("tests/fixtures/decisions.yaml", &len);

    ck_assert_int_eq(af_yaml_to_json("decisions.yaml", yaml, len, &json, &err), 0);
    cases = json_loads(json.buf, 0, &jerr);
    ck_assert_ptr_nonnull(cases);
    af_buf_release(&json);
    free(yaml);
}

static void teardown(void)
{
    json_decref(cases);
    cases = NULL;
}

static int count_lines(const char *s)
{
    int n = 0;

    for (; *s; s++)
        if (*s == '\n')
            n++;
    return n;
}

static bool in_list(const json_t *list, const char *cls)
{
    for (size_t i = 0; i < json_array_size(list); i++)
        if (!strcmp(json_string_value(json_array_get(list, i)), cls))
            return true;
    return false;
}

/* Checks the shape every --output json answer has. */
static void assert_json_shape(const json_t *j)
{
    const json_t *tiers = json_object_get(j, "tiers");

    ck_assert(json_is_object(j));
    ck_assert(json_is_array(tiers));
    ck_assert(json_is_object(json_object_get(j, "profile")));
    ck_assert(json_is_string(json_object_get(j, "rule")) ||
              json_is_null(json_object_get(j, "rule")));
    ck_assert(json_is_number(json_object_get(j, "memory_needed_gib")) ||
              json_is_null(json_object_get(j, "memory_needed_gib")));
    ck_assert(json_is_array(json_object_get(j, "dropped")));
    for (size_t i = 0; i < json_array_size(tiers); i++) {
        const json_t *t = json_array_get(tiers, i), *reasons = json_object_get(t, "reasons");
        const json_t *usd = json_object_get(t, "hourly_usd");
        ck_assert_int_eq(json_integer_value(json_object_get(t, "rank")), (json_int_t)i + 1);
        ck_assert(json_is_string(json_object_get(t, "class")));
        ck_assert(json_is_string(json_object_get(t, "instance_type")));
        ck_assert_int_ge(json_integer_value(json_object_get(t, "instances")), 1);
        ck_assert(json_is_number(usd) || json_is_null(usd));
        /* what the workload pays: priced exactly when the tier is, never above its price */
        ck_assert_int_eq(json_is_number(json_object_get(t, "workload_usd")), json_is_number(usd));
        if (json_is_number(usd))
            ck_assert(json_number_value(json_object_get(t, "workload_usd")) <=
                      json_number_value(usd) + 1e-9);
        ck_assert(json_is_number(json_object_get(t, "accelerator_memory_gib")));
        ck_assert(json_is_array(reasons));
        ck_assert_uint_ge(json_array_size(reasons), 3);
        for (size_t k = 0; k < json_array_size(reasons); k++)
            ck_assert(json_is_string(json_array_get(reasons, k)));
    }
    for (size_t i = 0; i < json_array_size(json_object_get(j, "dropped")); i++) {
        const json_t *d = json_array_get(json_object_get(j, "dropped"), i);
        ck_assert(json_is_string(json_object_get(d, "class")));
        ck_assert(json_is_string(json_object_get(d, "reason")));
    }
}

/* Runs `accelfit recommend ARGS... --output json`; returns the parsed answer. */
static json_t *recommend_json(const json_t *args)
{
    const char *argv[64];
    size_t n = 0;
    char *out = NULL, *err = NULL;
    json_error_t jerr;
    json_t *j;
    int rc;

    argv[n++] = "accelfit";
    argv[n++] = "recommend";
    for (size_t i = 0; i < json_array_size(args) && n < 60; i++)
        argv[n++] = json_string_value(json_array_get(args, i));
    argv[n++] = "--output";
    argv[n++] = "json";
    argv[n] = NULL;
    rc = af_test_exec(argv, NULL, &out, &err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert_str_eq(err, "");
    j = json_loads(out, 0, &jerr);
    ck_assert_msg(j != NULL, "not one JSON object: %s", jerr.text);
    free(out);
    free(err);
    assert_json_shape(j);
    return j;
}

START_TEST(test_decision_case_through_the_binary)
{
    json_t *c = json_array_get(json_object_get(cases, "cases"), (size_t)_i);
    json_t *expect = json_object_get(c, "expect"), *v, *j, *tiers, *first;
    const char *name = json_string_value(json_object_get(c, "name")), *cls;

    j = recommend_json(json_object_get(c, "args"));
    tiers = json_object_get(j, "tiers");
    ck_assert_msg(json_array_size(tiers) > 0, "%s: no tiers", name);
    first = json_array_get(tiers, 0);
    cls = json_string_value(json_object_get(first, "class"));
    v = json_object_get(expect, "first_in");
    if (v)
        ck_assert_msg(in_list(v, cls), "%s: first tier is %s", name, cls);
    v = json_object_get(expect, "first_not_in");
    if (v)
        ck_assert_msg(!in_list(v, cls), "%s: first tier is %s", name, cls);
    v = json_object_get(expect, "never");
    for (size_t i = 0; v && i < json_array_size(tiers); i++) {
        const char *c2 = json_string_value(json_object_get(json_array_get(tiers, i), "class"));
        ck_assert_msg(!in_list(v, c2), "%s: tier %zu is %s", name, i + 1, c2);
    }
    v = json_object_get(expect, "min_accel_memory_gib");
    if (v)
        ck_assert(json_number_value(json_object_get(first, "accelerator_memory_gib")) >=
                  json_number_value(v));
    v = json_object_get(expect, "min_instances");
    if (v)
        ck_assert_int_ge(json_integer_value(json_object_get(first, "instances")),
                         json_integer_value(v));
    json_decref(j);
}
END_TEST

START_TEST(test_json_answer_for_70b_training_on_trainium)
{
    json_t *args = json_pack("[sssssssss]", "--workload", "training", "--model-params", "70B",
                             "--objective", "cost", "--framework", "pytorch", "--neuron-ready");
    json_t *j = recommend_json(args), *first = json_array_get(json_object_get(j, "tiers"), 0);
    json_t *prof = json_object_get(j, "profile");

    ck_assert_str_eq(json_string_value(json_object_get(j, "rule")), "training-large-cost-neuron");
    ck_assert_str_eq(json_string_value(json_object_get(first, "class")), "trainium1");
    ck_assert_str_eq(json_string_value(json_object_get(first, "instance_type")), "trn1.32xlarge");
    ck_assert_int_eq(json_integer_value(json_object_get(first, "instances")), 3);
    ck_assert_double_eq_tol(json_number_value(json_object_get(first, "hourly_usd")), 64.5, 1e-9);
    /* split across three instances: the job pays for them whole */
    ck_assert_double_eq_tol(json_number_value(json_object_get(first, "workload_usd")), 64.5, 1e-9);
    ck_assert_double_eq_tol(json_number_value(json_object_get(first, "accelerator_memory_gib")),
                            1536, 1e-9);
    ck_assert(json_number_value(json_object_get(j, "memory_needed_gib")) > 1173);
    ck_assert_str_eq(json_string_value(json_object_get(prof, "workload")), "training");
    ck_assert_double_eq(json_number_value(json_object_get(prof, "model_params")), 70e9);
    ck_assert(json_is_true(json_object_get(prof, "neuron_ready")));
    /* trn2.48xlarge has no catalog price: null, not 0. */
    ck_assert(json_is_null(
        json_object_get(json_array_get(json_object_get(j, "tiers"), 1), "hourly_usd")));
    json_decref(j);
    json_decref(args);
}
END_TEST

START_TEST(test_table_output_lists_tiers_and_drops)
{
    const char *argv[] = {"accelfit",       "recommend", "--workload", "inference",
                          "--model-params", "70B",       NULL};
    char *out = NULL, *err = NULL;

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    ck_assert_str_eq(err, "");
    ck_assert_ptr_nonnull(strstr(out, "RANK  CLASS"));
    ck_assert_ptr_nonnull(strstr(out, "g5.48xlarge"));
    ck_assert_ptr_nonnull(strstr(out, "dropped:"));
    ck_assert_ptr_nonnull(strstr(out, "nvidia-t4"));
    ck_assert_ptr_nonnull(strstr(out, "      - "));
    free(out);
    free(err);
}
END_TEST

/* Objective cost reorders the rule's tiers: the table shows what the workload pays (the
 * order's figure) and no reason of rank 1 speaks of the class the rule put first. */
START_TEST(test_cost_order_shows_its_figure_and_reasons_match_the_rank)
{
    const char *argv[] = {"accelfit", "recommend", "--workload", "inference", "--model-params",
                          "70B", "--objective", "cost", NULL};
    char *out = NULL, *err = NULL, *rank2;

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    ck_assert_ptr_nonnull(strstr(out, "RANK  CLASS        INSTANCE        COUNT     $/HOUR   "
                                      "PAYS $/H          MEMORY\n"));
    ck_assert_ptr_nonnull(strstr(out, "   1  nvidia-a100  p4de.24xlarge       1      27.45       "
                                      "6.86   640 GiB accel\n"));
    rank2 = strstr(out, "\n   2  ");
    ck_assert_ptr_nonnull(rank2);
    *rank2 = '\0';   /* rank 1's lines only */
    ck_assert_ptr_nonnull(strstr(out, "      - objective cost: of the tiers of rule "
                                      "inference-default, the workload pays least here "
                                      "($6.86/h); the rule's first choice, nvidia-a10g, is "
                                      "rank 4\n"));
    ck_assert_ptr_null(strstr(out, "A10G"));
    *rank2 = '\n';
    ck_assert_ptr_nonnull(strstr(rank2, "      - the first choice of rule inference-default; "
                                        "objective cost ranks it 4: the workload pays $16.29/h "
                                        "here"));
    free(out);
    free(err);
}
END_TEST

/* No class of the rule holds the model: the classes of the catalog that do are named, with
 * their instances and prices, and the exit status still says the rule has nothing. */
START_TEST(test_too_large_for_the_rule_names_classes_that_hold_it)
{
    const char *argv[] = {"accelfit", "recommend", "--workload", "inference", "--model-params",
                          "300B", NULL, NULL, NULL};
    char *out = NULL, *err = NULL;
    json_t *j, *o;

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 3);
    ck_assert_ptr_nonnull(strstr(out, "outside rule inference-default, these classes of the "
                                      "catalog hold the model"));
    ck_assert_ptr_nonnull(strstr(out, "      nvidia-h200  p5en.48xlarge       1      63.30"));
    ck_assert_ptr_nonnull(strstr(out, "      nvidia-b200  p6-b200.48xlarge"));
    free(out);
    free(err);
    argv[6] = "--output";
    argv[7] = "json";
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 3);
    j = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(json_array_size(json_object_get(j, "tiers")), 0);
    o = json_array_get(json_object_get(j, "outside_rule"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(o, "class")), "nvidia-h200");
    ck_assert_str_eq(json_string_value(json_object_get(o, "instance_type")), "p5en.48xlarge");
    json_decref(j);
    free(out);
    free(err);
}
END_TEST

/* One convention for machine output: --output json everywhere, --json short for it. */
static const char *const json_alias_cmds[][12] = {
    {"recommend", "--workload", "inference", "--model-params", "7B", NULL},
    {"costs", "--demo", NULL},
    {"simulate", "--demo", "--workload", AF_SOURCE_DIR "/examples/traces/demo-day.yaml", NULL},
};

START_TEST(test_json_is_short_for_output_json)
{
    const char *a[16], *b[16];
    char *out_a = NULL, *out_b = NULL, *err = NULL;
    size_t n = 1;

    a[0] = b[0] = "accelfit";
    for (size_t k = 0; json_alias_cmds[_i][k]; k++, n++)
        a[n] = b[n] = json_alias_cmds[_i][k];
    a[n] = "--output";
    a[n + 1] = "json";
    a[n + 2] = NULL;
    b[n] = "--json";
    b[n + 1] = NULL;
    ck_assert_int_eq(af_test_exec(a, NULL, &out_a, &err), 0);
    af_free(err);
    ck_assert_int_eq(af_test_exec(b, NULL, &out_b, &err), 0);
    af_free(err);
    ck_assert_msg(out_a[0] == '{', "%s", out_a);
    ck_assert_str_eq(out_a, out_b);
    af_free(out_a);
    af_free(out_b);
}
END_TEST

/* prices takes --output as the others do (its --json stays): a bad format is usage. */
START_TEST(test_prices_takes_output)
{
    const char *argv[] = {"accelfit", "prices", "--output", "yaml", NULL};
    char *out = NULL, *err = NULL;

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 2);
    ck_assert_msg(strstr(err, "--output must be table or json, not 'yaml'"), "%s", err);
    af_free(out);
    af_free(err);
}
END_TEST

/* check-policy --output json: the policy, or where it is wrong, for a machine (CI). */
START_TEST(test_check_policy_json)
{
    const char *ok[] = {"accelfit", "check-policy", "--output", "json", NULL};
    char *path = af_test_temp_path("bad-policy.yaml");
    const char *bad[] = {"accelfit", "check-policy", "--policy", path, "--json", NULL};
    char *out = NULL, *err = NULL;
    json_t *j, *e;
    FILE *f;

    ck_assert_int_eq(af_test_exec(ok, NULL, &out, &err), 0);
    j = json_loads(out, 0, NULL);
    ck_assert_msg(j && json_is_true(json_object_get(j, "ok")), "%s", out);
    ck_assert_uint_gt(json_array_size(json_object_get(j, "rules")), 5);
    ck_assert_str_eq(json_string_value(json_object_get(j, "policy")), "<embedded>");
    json_decref(j);
    af_free(out), af_free(err);

    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("apiVersion: accelfit.io/v1\nkind: Policy\nscoring:\n  weights: {tier: -1}\n", f);
    fclose(f);
    ck_assert_int_eq(af_test_exec(bad, NULL, &out, &err), 2);
    j = json_loads(out, 0, NULL);
    e = json_object_get(j, "error");
    ck_assert_msg(j && json_is_false(json_object_get(j, "ok")), "%s", out);
    ck_assert_str_eq(json_string_value(json_object_get(e, "file")), path);
    ck_assert_int_eq(json_integer_value(json_object_get(e, "line")), 4);
    ck_assert_int_eq(json_integer_value(json_object_get(e, "column")), 19);
    ck_assert_str_eq(json_string_value(json_object_get(e, "message")),
                     "'scoring.weights.tier' must be between 0 and 1000000, not '-1'");
    json_decref(j);
    af_free(out), af_free(err), af_free(path);
}
END_TEST

/* Multi-node inference and fp8 weights, as a pod can state them (accelfit.io/instances,
 * accelfit.io/precision): 405B fp16 fits no single instance; over two it does, and fp8
 * halves what 70B needs. */
START_TEST(test_instances_and_fp8)
{
    const char *one[] = {"accelfit", "recommend", "--workload", "inference", "--model-params",
                         "405B", "--output", "json", NULL};
    const char *two[] = {"accelfit", "recommend", "--workload", "inference", "--model-params",
                         "405B", "--instances", "2", "--output", "json", NULL};
    const char *fp8[] = {"accelfit", "recommend", "--workload", "inference", "--model-params",
                         "70B", "--precision", "fp8", "--output", "json", NULL};
    char *out = NULL, *err = NULL;
    json_t *j, *t;

    ck_assert_int_eq(af_test_exec(one, NULL, &out, &err), 3);   /* nothing holds it */
    af_free(out), af_free(err);
    ck_assert_int_eq(af_test_exec(two, NULL, &out, &err), 0);
    j = json_loads(out, 0, NULL);
    t = json_array_get(json_object_get(j, "tiers"), 0);
    ck_assert_msg(t && json_integer_value(json_object_get(t, "instances")) == 2, "%s", out);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "profile"),
                                                        "instances")), 2);
    json_decref(j);
    af_free(out), af_free(err);
    ck_assert_int_eq(af_test_exec(fp8, NULL, &out, &err), 0);
    j = json_loads(out, 0, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "profile"),
                                                       "precision")), "fp8");
    ck_assert_msg(json_real_value(json_object_get(j, "memory_needed_gib")) < 80, "%s", out);
    json_decref(j);
    af_free(out), af_free(err);
}
END_TEST

START_TEST(test_help_prints_usage_and_examples)
{
    const char *argv[] = {"accelfit", "recommend", "--help", NULL};
    char *out = NULL, *err = NULL;

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    ck_assert_ptr_nonnull(strstr(out, "usage: accelfit recommend"));
    ck_assert_ptr_nonnull(strstr(out, "--model-params"));
    ck_assert_ptr_nonnull(strstr(out, "examples:"));
    ck_assert_str_eq(err, "");
    free(out);
    free(err);
}
END_TEST

static char bad_yaml_path[64];

static void setup_bad_file(void)
{
    FILE *f;
    int fd;

    snprintf(bad_yaml_path, sizeof(bad_yaml_path), "/tmp/af_check_recommend_XXXXXX");
    fd = mkstemp(bad_yaml_path);
    ck_assert_int_ge(fd, 0);
    f = fdopen(fd, "w");
    fputs("apiVersion: accelfit.io/v1\nkind: Policy\nrules:\n  - name: [x\n", f);
    fclose(f);
}

static void teardown_bad_file(void)
{
    unlink(bad_yaml_path);
}

#define BAD_FILE "@bad"

static const char *const bad_inputs[][12] = {
    {"--bogus", NULL},
    {"--model-params", "7B", NULL},
    {"--workload", NULL},
    {"--workload", "gaming", NULL},
    {"--workload", "training", "--model-params", "seventy", NULL},
    {"--workload", "training", "--model-params", "-7B", NULL},
    {"--workload", "training", "--model-params", "0", NULL},
    {"--workload", "inference", "--latency-slo-ms", "-5", NULL},
    {"--workload", "inference", "--latency-slo-ms", "2.5", NULL},
    {"--workload", "inference", "--latency-slo-ms", "ten", NULL},
    {"--workload", "inference", "--objective", "cheap", NULL},
    {"--workload", "inference", "--framework", "caffe", NULL},
    {"--workload", "inference", "--precision", "fp4", NULL},
    {"--workload", "inference", "--instances", "0", NULL},
    {"--workload", "inference", "--instances", "two", NULL},
    {"--workload", "inference", "--output", "xml", NULL},
    {"--workload", "inference", "--catalog", "/nonexistent/catalog.yaml", NULL},
    {"--workload", "inference", "--policy", "/nonexistent/policy.yaml", NULL},
    {"--workload", "inference", "--policy", BAD_FILE, NULL},
    {"--workload", "inference", "--catalog", BAD_FILE, NULL},
    {"--workload", "inference", "stray", NULL},
    {"--neuron-ready=yes", "--workload", "inference", NULL},
};

START_TEST(test_bad_input_exits_2_with_one_line)
{
    const char *argv[16];
    char *out = NULL, *err = NULL;
    size_t n = 0;
    int rc;

    argv[n++] = "accelfit";
    argv[n++] = "recommend";
    for (size_t i = 0; bad_inputs[_i][i]; i++)
        argv[n++] = strcmp(bad_inputs[_i][i], BAD_FILE) ? bad_inputs[_i][i] : bad_yaml_path;
    argv[n] = NULL;
    rc = af_test_exec(argv, NULL, &out, &err);
    ck_assert_msg(rc == 2, "case %d: exit %d", _i, rc);
    ck_assert_msg(out[0] == '\0', "case %d: stdout '%s'", _i, out);
    ck_assert_msg(count_lines(err) == 1, "case %d: stderr '%s'", _i, err);
    ck_assert_msg(!strncmp(err, "accelfit recommend: ", 20), "case %d: stderr '%s'", _i, err);
    free(out);
    free(err);
}
END_TEST

START_TEST(test_malformed_policy_error_has_position)
{
    const char *argv[] = {"accelfit", "recommend",   "--workload", "training",
                          "--policy", bad_yaml_path, NULL};
    char *out = NULL, *err = NULL, want[128];

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 2);
    snprintf(want, sizeof(want), "accelfit recommend: %s:5:1: malformed YAML", bad_yaml_path);
    ck_assert_msg(!strncmp(err, want, strlen(want)), "got '%s'", err);
    free(out);
    free(err);
}
END_TEST

START_TEST(test_check_policy_summarizes_the_default)
{
    const char *argv[] = {"accelfit", "check-policy", NULL};
    char *out = NULL, *err = NULL;

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    ck_assert_ptr_nonnull(strstr(out, "policy <embedded>: ok"));
    ck_assert_ptr_nonnull(strstr(out, "1368 instance types"));
    ck_assert_ptr_nonnull(strstr(out, "weights tier 0.50, utilization 0.30, cost 0.20"));
    ck_assert_ptr_nonnull(strstr(out, "training-large-cost-neuron"));
    ck_assert_ptr_null(strstr(out, "warning"));
    ck_assert_str_eq(err, "");
    free(out);
    free(err);
}
END_TEST

START_TEST(test_check_policy_reads_files)
{
    char pol[4096], cat[4096];
    const char *argv[] = {"accelfit", "check-policy", "--policy", pol, "--catalog", cat, NULL};
    char *out = NULL, *err = NULL;

    snprintf(pol, sizeof(pol), "%s", af_test_path("policies/default.yaml"));
    snprintf(cat, sizeof(cat), "%s", af_test_path("policies/catalog.yaml"));
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    ck_assert_ptr_nonnull(strstr(out, pol));
    free(out);
    free(err);
}
END_TEST

START_TEST(test_check_policy_reports_file_line_column)
{
    const char *argv[] = {"accelfit", "check-policy", "--policy", bad_yaml_path, NULL};
    char *out = NULL, *err = NULL, want[128];

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 2);
    ck_assert_str_eq(out, "");
    snprintf(want, sizeof(want), "accelfit check-policy: %s:5:1: ", bad_yaml_path);
    ck_assert_msg(!strncmp(err, want, strlen(want)), "got '%s'", err);
    ck_assert_int_eq(count_lines(err), 1);
    free(out);
    free(err);
}
END_TEST

/* A path that is not a readable file says what it is, with the path. */
START_TEST(test_file_errors_name_the_path_and_what_is_wrong)
{
    static const struct {
        const char *argv[12];
        const char *want;
    } fcases[] = {
        {{"accelfit", "check-policy", "--policy", "/", NULL},
         "accelfit check-policy: /: cannot read policy: is a directory, not a file\n"},
        {{"accelfit", "check-policy", "--policy", "/nonexistent/p.yaml", NULL},
         "accelfit check-policy: /nonexistent/p.yaml: cannot read policy: no such file\n"},
        {{"accelfit", "check-policy", "--catalog", "/", NULL},
         "accelfit check-policy: /: cannot read catalog: is a directory, not a file\n"},
        {{"accelfit", "simulate", "--demo", "--workload", "/", NULL},
         "accelfit simulate: cannot read '/': is a directory, not a file\n"},
        {{"accelfit", "simulate", "--demo", "--empty", "--workload", NULL, "--report",
          "/nonexistent-dir/r.html", NULL},
         "accelfit simulate: cannot write the report '/nonexistent-dir/r.html': No such file or "
         "directory (give --report a file in a directory that exists and you may write to)\n"},
    };
    for (size_t i = 0; i < AF_ARRAY_SIZE(fcases); i++) {
        const char *argv[12];
        char *out = NULL, *err = NULL;
        memcpy(argv, fcases[i].argv, sizeof(argv));
        for (size_t k = 0; k < 11; k++)
            if (!argv[k] && argv[k + 1] && k > 0 && !strcmp(argv[k - 1], "--workload"))
                argv[k] = af_test_path("examples/traces/demo-day.yaml");
        ck_assert_int_ne(af_test_exec(argv, NULL, &out, &err), 0);
        ck_assert_str_eq(err, fcases[i].want);
        free(out);
        free(err);
    }
}
END_TEST

START_TEST(test_check_policy_warns_about_workloads_without_an_answer)
{
    char path[] = "/tmp/af_check_recommend_pol_XXXXXX";
    const char *argv[] = {"accelfit", "check-policy", "--policy", path, NULL};
    char *out = NULL, *err = NULL;
    int fd = mkstemp(path);
    FILE *f;

    ck_assert_int_ge(fd, 0);
    f = fdopen(fd, "w");
    fputs("apiVersion: accelfit.io/v1\nkind: Policy\nrules:\n  - name: big-training\n"
          "    match: {workload: training, min_params: 7B}\n    tiers: [nvidia-h100]\n"
          "    reason: why\n",
          f);
    fclose(f);
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    ck_assert_ptr_nonnull(strstr(out, "1 rule, 1368 instance types"));
    ck_assert_ptr_nonnull(
        strstr(out, "warning: no rule matches training when only the workload is known"));
    ck_assert_ptr_nonnull(strstr(out, "warning: no rule matches classical-ml"));
    unlink(path);
    free(out);
    free(err);
}
END_TEST

START_TEST(test_check_policy_rejects_unknown_flag)
{
    const char *argv[] = {"accelfit", "check-policy", "--strict", NULL};
    char *out = NULL, *err = NULL;

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 2);
    ck_assert_str_eq(out, "");
    ck_assert_int_eq(count_lines(err), 1);
    free(out);
    free(err);
}
END_TEST

static Suite *af_recommend_suite(void)
{
    Suite *s = suite_create("recommend");
    TCase *tc = tcase_create("decisions");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_decision_case_through_the_binary, 0, 12);
    suite_add_tcase(s, tc);

    tc = tcase_create("output");
    tcase_add_test(tc, test_json_answer_for_70b_training_on_trainium);
    tcase_add_test(tc, test_table_output_lists_tiers_and_drops);
    tcase_add_test(tc, test_help_prints_usage_and_examples);
    tcase_add_test(tc, test_check_policy_summarizes_the_default);
    tcase_add_test(tc, test_check_policy_reads_files);
    tcase_add_test(tc, test_check_policy_rejects_unknown_flag);
    tcase_add_test(tc, test_check_policy_warns_about_workloads_without_an_answer);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad_input");
    tcase_add_checked_fixture(tc, setup_bad_file, teardown_bad_file);
    tcase_add_loop_test(tc, test_bad_input_exits_2_with_one_line, 0,
                        (int)AF_ARRAY_SIZE(bad_inputs));
    tcase_add_test(tc, test_malformed_policy_error_has_position);
    tcase_add_test(tc, test_check_policy_reports_file_line_column);
    tcase_add_test(tc, test_cost_order_shows_its_figure_and_reasons_match_the_rank);
    tcase_add_test(tc, test_too_large_for_the_rule_names_classes_that_hold_it);
    tcase_add_test(tc, test_file_errors_name_the_path_and_what_is_wrong);
    tcase_add_loop_test(tc, test_json_is_short_for_output_json, 0,
                        (int)AF_ARRAY_SIZE(json_alias_cmds));
    tcase_add_test(tc, test_prices_takes_output);
    tcase_add_test(tc, test_check_policy_json);
    tcase_add_test(tc, test_instances_and_fp8);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_recommend_suite());
}
