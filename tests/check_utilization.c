/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Live utilization without a Prometheus: the policy's utilization: section (defaults,
 * every key, errors at line and column), Prometheus API answers into snapshots (the
 * real answers recorded from Prometheus 2.42.0, error answers, unmapped series,
 * idle runs carried across rounds), and the pure scoring: prefer-idle and trust-free
 * ranking, stale, missing and degraded data leaving scores exactly as on allocation,
 * saturated shared GPUs, the filter post-pass and its reason, and the waste report; and
 * the serve flags, and a Prometheus that accepts connections and never answers.
 */
#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "accelfit/config.h"
#include "accelfit/decide.h"
#include "accelfit/prom.h"
#include "accelfit/utilization.h"
#include "support/http_client.h"
#include "support/policy.h"
#include "support/support.h"

#define T0 1795414896.0

/* ---- policy ---------------------------------------------------------------------------------- */

START_TEST(test_policy_defaults_without_a_section)
{
    struct af_policy *p;
    struct af_error err;

    ck_assert_int_eq(af_test_policy_load_with("", &p, &err), 0);
    ck_assert(!p->util.present);
    ck_assert_str_eq(p->util.q[AF_UM_GPU_UTIL].expr, "DCGM_FI_DEV_GPU_UTIL");
    ck_assert(fabs(p->util.q[AF_UM_GPU_UTIL].scale - 0.01) < 1e-12);
    ck_assert_str_eq(p->util.node_labels[0], "node");
    ck_assert_str_eq(p->util.node_labels[1], "Hostname");
    ck_assert_int_eq(p->util.mode, AF_UTILIZATION_MODE_STRATEGY);
    ck_assert(p->util.max_gpu_util < 0);
    af_policy_free(p);
}
END_TEST

START_TEST(test_policy_section_is_read)
{
    struct af_policy *p;
    struct af_error err;
    static const char yaml[] = "utilization:\n"
                               "  interval: 5s\n"
                               "  staleness: 1m\n"
                               "  node_labels: [exported_node, Hostname]\n"
                               "  queries:\n"
                               "    gpu_util: {query: 'DCGM_FI_DEV_GPU_UTIL_RATIO', scale: 1}\n"
                               "    cpu_util: null\n"
                               "  scoring: {mode: trust-free, weight: 0.5, saturated_above: 80}\n"
                               "  filter: {max_gpu_util: 95}\n"
                               "  waste: {idle_below: 10, window: 15m}\n";
    int rc = af_test_policy_load_with(yaml, &p, &err);

    ck_assert_msg(rc == 0, "%s", err.text);
    ck_assert(p->util.present);
    ck_assert(p->util.interval_s == 5 && p->util.staleness_s == 60);
    ck_assert_int_eq(p->util.n_node_labels, 2);
    ck_assert_str_eq(p->util.node_labels[0], "exported_node");
    ck_assert_str_eq(p->util.q[AF_UM_GPU_UTIL].expr, "DCGM_FI_DEV_GPU_UTIL_RATIO");
    ck_assert(p->util.q[AF_UM_GPU_UTIL].scale == 1);
    ck_assert_ptr_null(p->util.q[AF_UM_CPU_UTIL].expr);
    ck_assert_ptr_nonnull(p->util.q[AF_UM_NEURONCORE_UTIL].expr);   /* untouched default */
    ck_assert_int_eq(p->util.mode, AF_UTILIZATION_MODE_TRUST_FREE);
    ck_assert(fabs(p->util.weight - 0.5) < 1e-12);
    ck_assert(fabs(p->util.saturated_above - 0.8) < 1e-12);
    ck_assert(fabs(p->util.max_gpu_util - 0.95) < 1e-12);
    ck_assert(fabs(p->util.idle_below - 0.1) < 1e-12);
    ck_assert(p->util.waste_window_s == 900);
    af_policy_free(p);
}
END_TEST

static const struct {
    const char *yaml;
    int line, column;     /* relative to the section's first line (1) */
    const char *text;
} bad_cases[] = {
    {"utilization:\n  intervall: 5s\n", 2, 3, "unknown key 'intervall'"},
    {"utilization:\n  interval: 5\n", 2, 13, "must be a duration"},
    {"utilization:\n  scoring: {mode: fastest}\n", 2, 19,
     "unknown utilization.scoring.mode 'fastest'"},
    {"utilization:\n  scoring: {weight: 2}\n", 2, 21,
     "'utilization.scoring.weight' must be between 0 and 1, not '2'"},
    {"utilization:\n  filter: {max_gpu_util: 120}\n", 2, 26,
     "'utilization.filter.max_gpu_util' must be between 0 and 100, not '120'"},
    {"utilization:\n  queries: {gpu_utilization: x}\n", 2, 13, "unknown key 'gpu_utilization'"},
    {"utilization:\n  queries: {gpu_util: {query: x, scale: 0}}\n", 2, 41, "must be positive"},
    {"utilization:\n  node_labels: [\"bad-label\"]\n", 2, 17, "Prometheus label names"},
    {"utilization:\n  interval: 30s\n  staleness: 10s\n", 3, 14, "every answer would be stale"},
};

START_TEST(test_policy_errors_point_at_the_text)
{
    struct af_policy *p = NULL;
    struct af_error err;
    int rc = af_test_policy_load_with(bad_cases[_i].yaml, &p, &err);

    ck_assert_msg(rc != 0, "case %d loaded", _i);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(err.text, bad_cases[_i].text), "case %d: '%s'", _i, err.text);
    ck_assert_int_eq(err.line, af_test_policy_lines() + bad_cases[_i].line);
    ck_assert_int_eq(err.column, bad_cases[_i].column);
}
END_TEST

/* ---- answers into snapshots ------------------------------------------------------------------ */

static struct af_utilization_policy up;

static void setup(void)
{
    af_utilization_policy_defaults(&up);
}

static void teardown(void)
{
    af_utilization_policy_release(&up);
}

static struct af_utilization_snapshot *build(const char *const *answers, const int *metrics, size_t n,
                                      const struct af_utilization_snapshot *prev)
{
    struct af_prom_build *b = af_prom_build_new();
    char why[300];

    for (size_t i = 0; i < n; i++)
        ck_assert_msg(af_prom_build_add(b, &up, (enum af_utilization_metric)metrics[i], answers[i],
                                        strlen(answers[i]), why, sizeof(why)) == 0,
                      "%s", why);
    return af_prom_build_finish(b, prev, up.idle_below);
}

START_TEST(test_real_answer_maps_hostname_to_nodes)
{
    char *body = af_test_read("tests/fixtures/metrics/prometheus-query-response.json", NULL);
    const char *answers[] = {body};
    int metrics[] = {AF_UM_GPU_UTIL};
    struct af_utilization_snapshot *s = build(answers, metrics, 1, NULL);
    const struct af_utilization_node *n = af_utilization_find(s, "ip-10-0-1-10.us-west-2.compute.internal");
    struct af_utilization_stat st;

    ck_assert_int_eq(s->n_nodes, 3);
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(n->n, 1);
    ck_assert(fabs(n->samples[0].value - 0.465) < 1e-9);   /* "46.5" percent */
    ck_assert(n->samples[0].ts == T0);
    ck_assert_ptr_null(af_utilization_find(s, "ip-10-0-9-99.us-west-2.compute.internal"));
    af_utilization_node_stat(&up, af_utilization_find(s, "ip-10-0-1-40.us-west-2.compute.internal"),
                      AF_UM_GPU_UTIL, T0 + 3, &st);
    ck_assert_int_eq(st.devices, 1);
    ck_assert(fabs(st.mean - 0.92) < 1e-9);
    ck_assert(st.age_s == 3);
    af_utilization_node_stat(&up, n, AF_UM_GPU_UTIL, T0 + up.staleness_s + 1, &st);
    ck_assert_int_eq(st.devices, 0);
    ck_assert(st.stale);
    af_utilization_snapshot_unref(s);
    af_free(body);
}
END_TEST

START_TEST(test_servicemonitor_labels_still_say_who_holds_the_gpu)
{
    char *body = af_test_read(
        "tests/fixtures/metrics/prometheus-query-response-servicemonitor-labels.json", NULL);
    const char *answers[] = {body};
    int metrics[] = {AF_UM_GPU_UTIL};
    struct af_utilization_snapshot *s = build(answers, metrics, 1, NULL);
    const struct af_utilization_node *n = af_utilization_find(s, "ip-10-0-1-40.us-west-2.compute.internal");

    /* Hostname wins over instance (the exporter pod's IP:port) */
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(s->n_nodes, 1);
    ck_assert(n->samples[0].held);                    /* exported_pod */
    ck_assert_str_eq(n->samples[0].device, "0");      /* gpu="0" */
    af_utilization_snapshot_unref(s);
    af_free(body);
}
END_TEST

START_TEST(test_bad_answers_are_refused_and_bad_series_dropped)
{
    struct af_prom_build *b = af_prom_build_new();
    struct af_utilization_snapshot *s;
    char why[300];
    const char *err = "{\"status\":\"error\",\"errorType\":\"bad_data\",\"error\":\"1:5: parse "
                      "error: unexpected identifier\"}";
    const char *mixed =
        "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
        "{\"metric\":{\"instance\":\"10.0.1.7:9100\"},\"value\":[1795414896,\"0.5\"]},"
        "{\"metric\":{\"job\":\"x\"},\"value\":[1795414896,\"0.5\"]},"
        "{\"metric\":{\"node\":\"n1\"},\"value\":[1795414896,\"NaN\"]},"
        "{\"metric\":{\"node\":\"n2\"},\"value\":[1795414896,\"0.25\"]}]}}";

    ck_assert_int_eq(af_prom_build_add(b, &up, AF_UM_CPU_UTIL, err, strlen(err), why, sizeof(why)),
                     AF_EPARSE);
    ck_assert_msg(strstr(why, "bad_data") && strstr(why, "parse error"), "%s", why);
    ck_assert_int_eq(af_prom_build_add(b, &up, AF_UM_CPU_UTIL, "<html>", 6, why, sizeof(why)),
                     AF_EPARSE);
    ck_assert_ptr_nonnull(strstr(why, "not JSON"));
    ck_assert_int_eq(af_prom_build_add(b, &up, AF_UM_CPU_UTIL, mixed, strlen(mixed), why,
                                       sizeof(why)),
                     0);
    s = af_prom_build_finish(b, NULL, up.idle_below);
    /* instance loses its port; no label: counted; NaN: that series only */
    ck_assert_int_eq(s->n_nodes, 2);
    ck_assert_ptr_nonnull(af_utilization_find(s, "10.0.1.7"));
    ck_assert_ptr_nonnull(af_utilization_find(s, "n2"));
    ck_assert_ptr_null(af_utilization_find(s, "n1"));
    ck_assert_int_eq(s->unmapped, 1);
    af_utilization_snapshot_unref(s);
}
END_TEST

/*
 * Samples out of their metric's range or timestamped in the future are dropped and
 * counted, not used as they are: -1e5 % and 500 % GPU utilization, an hour ahead of the
 * reader's clock. A hair past 100 % (rate() rounding) is clamped to 1. Memory cannot be
 * negative.
 */
START_TEST(test_out_of_range_and_future_samples_are_dropped_and_counted)
{
    struct af_prom_build *b = af_prom_build_new();
    struct af_utilization_snapshot *s;
    char why[300], *gpu, *fb;

    gpu = af_xasprintf(
        "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
        "{\"metric\":{\"Hostname\":\"neg\"},\"value\":[%.0f,\"-1e5\"]},"
        "{\"metric\":{\"Hostname\":\"over\"},\"value\":[%.0f,\"500\"]},"
        "{\"metric\":{\"Hostname\":\"hair\"},\"value\":[%.0f,\"100.4\"]},"
        "{\"metric\":{\"Hostname\":\"future\"},\"value\":[%.0f,\"50\"]},"
        "{\"metric\":{\"Hostname\":\"ok\"},\"value\":[%.0f,\"50\"]}]}}",
        T0, T0, T0, T0 + 3600, T0);
    fb = af_xasprintf("{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
                      "{\"metric\":{\"Hostname\":\"ok\",\"gpu\":\"0\"},\"value\":[%.0f,\"-3\"]}]}}",
                      T0);
    af_prom_build_set_now(b, T0 + 1);
    ck_assert_int_eq(af_prom_build_add(b, &up, AF_UM_GPU_UTIL, gpu, strlen(gpu), why, sizeof(why)),
                     0);
    ck_assert_int_eq(af_prom_build_add(b, &up, AF_UM_GPU_FB_USED, fb, strlen(fb), why, sizeof(why)),
                     0);
    s = af_prom_build_finish(b, NULL, up.idle_below);
    ck_assert_ptr_null(af_utilization_find(s, "neg"));
    ck_assert_ptr_null(af_utilization_find(s, "over"));
    ck_assert_ptr_null(af_utilization_find(s, "future"));
    ck_assert_ptr_nonnull(af_utilization_find(s, "hair"));
    ck_assert(af_utilization_find(s, "hair")->samples[0].value == 1.0);
    ck_assert_int_eq(af_utilization_find(s, "ok")->n, 1);   /* its negative memory dropped */
    ck_assert_uint_eq(s->discarded[AF_UTILIZATION_DISCARD_RANGE], 3);
    ck_assert_uint_eq(s->discarded[AF_UTILIZATION_DISCARD_FUTURE], 1);
    ck_assert_uint_eq(s->discarded[AF_UTILIZATION_DISCARD_OVER_LIMIT], 0);
    af_utilization_snapshot_unref(s);
    af_free(gpu);
    af_free(fb);
}
END_TEST

/* A round keeps at most AF_UTILIZATION_MAX_SERIES series, whatever the answer holds: the rest
 * are counted, and the memory a round takes is bounded. */
START_TEST(test_a_round_keeps_a_bounded_number_of_series)
{
    struct af_buf body = AF_BUF_INIT(0);
    struct af_prom_build *b = af_prom_build_new();
    struct af_utilization_snapshot *s;
    char why[300];

    ck_assert_int_eq(af_buf_puts(&body, "{\"status\":\"success\",\"data\":{\"resultType\":"
                                        "\"vector\",\"result\":["),
                     0);
    for (int i = 0; i < AF_UTILIZATION_MAX_SERIES + 5; i++)
        ck_assert_int_eq(af_buf_printf(&body, "%s{\"metric\":{\"Hostname\":\"n%d\"},"
                                              "\"value\":[%.0f,\"1\"]}",
                                       i ? "," : "", i, T0),
                         0);
    ck_assert_int_eq(af_buf_puts(&body, "]}}"), 0);
    ck_assert_int_eq(af_prom_build_add(b, &up, AF_UM_GPU_UTIL, body.buf, body.len, why,
                                       sizeof(why)),
                     0);
    s = af_prom_build_finish(b, NULL, up.idle_below);
    ck_assert_uint_eq(s->n_nodes, AF_UTILIZATION_MAX_SERIES);
    ck_assert_uint_eq(s->discarded[AF_UTILIZATION_DISCARD_OVER_LIMIT], 5);
    af_utilization_snapshot_unref(s);
    af_buf_release(&body);
}
END_TEST

/* What the in-place reader refuses, with a position, as a JSON parser would. */
static const struct {
    const char *body;
    const char *why;
} not_json_cases[] = {
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":[]}", "not JSON"},
    {"{\"status\":\"success\"} x", "not JSON: end of file expected (line 1, column 22)"},
    {"{\"status\":\"success\",\"status\":\"success\"}", "duplicate key 'status'"},
    {"{\"status\":\"succ\\u00", "not JSON: invalid \\u escape"},
    {"{\"status\":\"success\",\n\"data\":[01]}", "(line 2, column 10)"},
    {"{\"status\":\"success\",\"data\":{\"resultType\":\"scalar\",\"result\":[1,\"2\"]}}",
     "expected data.resultType vector or matrix with a result array, got scalar"},
};

START_TEST(test_answers_that_are_not_json_are_refused_with_a_position)
{
    struct af_prom_build *b = af_prom_build_new();
    char why[300];

    ck_assert_int_eq(af_prom_build_add(b, &up, AF_UM_CPU_UTIL, not_json_cases[_i].body,
                                       strlen(not_json_cases[_i].body), why, sizeof(why)),
                     AF_EPARSE);
    ck_assert_msg(strstr(why, not_json_cases[_i].why), "got '%s'", why);
    af_utilization_snapshot_unref(af_prom_build_finish(b, NULL, 0));
}
END_TEST

/* Shapes a parser reading in place must take as a tree reader did: keys in any order,
 * a series whose points are not a list (dropped alone), escapes in label values. */
START_TEST(test_answers_in_any_key_order_and_odd_series)
{
    static const char body[] =
        "{\"data\":{\"result\":[{\"values\":null,\"metric\":{\"Hostname\":\"n\"}},"
        "{\"values\":[[1795414896,\"0.5\"]],\"metric\":{\"Hostname\":\"m\\u00e9\"}},"
        "{\"metric\":{\"Hostname\":7},\"values\":[[1795414896,\"0.5\"]]}],"
        "\"resultType\":\"matrix\"},\"status\":\"success\"}";
    struct af_prom_build *b = af_prom_build_new();
    struct af_utilization_snapshot *s;
    char why[300];

    ck_assert_msg(af_prom_build_add(b, &up, AF_UM_CPU_UTIL, body, strlen(body), why,
                                    sizeof(why)) == 0,
                  "%s", why);
    s = af_prom_build_finish(b, NULL, up.idle_below);
    ck_assert_uint_eq(s->n_nodes, 1);
    ck_assert_ptr_nonnull(af_utilization_find(s, "m\xc3\xa9"));
    ck_assert_uint_eq(s->unmapped, 1);   /* a number is no node name */
    af_utilization_snapshot_unref(s);
}
END_TEST

static char *gpu_answer(const char *node, const char *gpu, const char *pod, double pct, double ts)
{
    return af_xasprintf("{\"status\":\"success\",\"data\":{\"resultType\":\"vector\",\"result\":["
                        "{\"metric\":{\"Hostname\":\"%s\",\"gpu\":\"%s\"%s%s%s},"
                        "\"value\":[%.0f,\"%g\"]}]}}",
                        node, gpu, pod ? ",\"pod\":\"" : "", pod ? pod : "", pod ? "\"" : "",
                        ts, pct);
}

START_TEST(test_idle_runs_carry_over_rounds)
{
    char *a = gpu_answer("n1", "0", "nb", 0, T0), *b = gpu_answer("n1", "0", "nb", 1, T0 + 60),
         *c = gpu_answer("n1", "0", "nb", 50, T0 + 120);
    const char *r1[] = {a}, *r2[] = {b}, *r3[] = {c};
    int m[] = {AF_UM_GPU_UTIL};
    struct af_utilization_snapshot *s1 = build(r1, m, 1, NULL), *s2 = build(r2, m, 1, s1),
                            *s3 = build(r3, m, 1, s2);

    ck_assert(af_utilization_find(s1, "n1")->samples[0].idle_since == T0);
    ck_assert(af_utilization_find(s2, "n1")->samples[0].idle_since == T0);   /* still idle since T0 */
    ck_assert(af_utilization_find(s3, "n1")->samples[0].idle_since == 0);    /* busy again */
    af_utilization_snapshot_unref(s1);
    af_utilization_snapshot_unref(s2);
    af_utilization_snapshot_unref(s3);
    af_free(a);
    af_free(b);
    af_free(c);
}
END_TEST

START_TEST(test_matrix_answer_gives_the_trailing_idle_run)
{
    const char *body =
        "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[{\"metric\":"
        "{\"Hostname\":\"n1\",\"gpu\":\"2\",\"pod\":\"nb\"},\"values\":[[1795413000,\"80\"],"
        "[1795413300,\"0\"],[1795413600,\"1\"],[1795413900,\"0\"]]}]}}";
    const char *answers[] = {body};
    int m[] = {AF_UM_GPU_UTIL};
    struct af_utilization_snapshot *s = build(answers, m, 1, NULL);
    const struct af_utilization_sample *smp = &af_utilization_find(s, "n1")->samples[0];

    ck_assert(smp->ts == 1795413900 && smp->value == 0);
    ck_assert(smp->idle_since == 1795413300);
    af_utilization_snapshot_unref(s);
}
END_TEST

/* ---- scoring --------------------------------------------------------------------------------- */

static struct af_config *cfg;
static struct af_policy *pol;

static void score_setup(void)
{
    struct af_error err = {0};

    ck_assert_msg(af_config_load(&cfg, NULL, NULL, &err) == 0, "%s", err.text);
    ck_assert_int_eq(af_test_policy_load_with("utilization:\n"
                                              "  scoring: {mode: prefer-idle, weight: 0.5}\n"
                                              "  filter: {max_gpu_util: 80}\n"
                                              "  waste: {window: 30m}\n",
                                              &pol, &err),
                     0);
}

static void score_teardown(void)
{
    af_policy_free(pol);
    af_config_unref(cfg);
}

#define N 3

struct bed {
    struct af_node_info *info[N];
    struct af_node_view v[N];
    const char *names[N];
    struct af_node_decision d[N];
    struct af_pod_info *pod;
    struct af_plan plan;
};

/* Three equal g5.xlarge-like nodes with one A10G each; a 1-GPU pod. */
static void bed_init(struct bed *b, bool shared)
{
    static const char *const names[N] = {"n1", "n2", "n3"};

    memset(b, 0, sizeof(*b));
    for (int i = 0; i < N; i++) {
        struct af_node_info *n = af_node_info_new();
        n->name = af_xstrdup(names[i]);
        n->cls = AF_CLASS_NVIDIA_A10G;
        n->kind = AF_ACCEL_GPU;
        n->class_source = "test";
        n->allocatable.v[AF_RES_CPU] = 4000;
        n->allocatable.v[AF_RES_MEMORY] = 16LL << 30;
        n->allocatable.v[AF_RES_GPU] = 1;
        n->allocatable.v[AF_RES_PODS] = 58;
        n->gpu_shared = shared;
        n->price_known = true;
        n->hourly_usd = 1.006;
        b->info[i] = n;
        b->v[i].info = n;
        b->names[i] = names[i];
    }
    b->pod = af_pod_info_new();
    b->pod->ns = af_xstrdup("default");
    b->pod->name = af_xstrdup("p");
    b->pod->requests.v[AF_RES_CPU] = 1000;
    b->pod->requests.v[AF_RES_MEMORY] = 1LL << 30;
    b->pod->requests.v[AF_RES_GPU] = 1;
    af_plan_pod(pol, cfg->catalog, b->pod, &b->plan);
}

static void bed_release(struct bed *b)
{
    for (int i = 0; i < N; i++)
        af_node_info_unref(b->info[i]);
    af_pod_info_unref(b->pod);
}

/* n1 busy (90 %), n2 idle (2 %), n3 no series; all at T0. */
static struct af_utilization_snapshot *busy_idle_missing(void)
{
    char *a = gpu_answer("n1", "0", "x", 90, T0), *b = gpu_answer("n2", "0", "y", 2, T0);
    const char *answers[] = {a, b};
    int m[] = {AF_UM_GPU_UTIL, AF_UM_GPU_UTIL};
    struct af_utilization_snapshot *s;

    s = build(answers, m, 2, NULL);
    af_free(a);
    af_free(b);
    return s;
}

START_TEST(test_prefer_idle_ranks_the_idle_node_first)
{
    struct bed b;
    struct af_utilization_snapshot *s = busy_idle_missing();

    bed_init(&b, false);
    af_prioritize(pol, &b.plan, b.pod, b.v, b.names, N, b.d);
    ck_assert_int_eq(b.d[0].score, b.d[1].score);   /* equal on allocation */
    af_utilization_score(pol, &b.plan, b.pod, b.v, N, s, T0 + 5, b.d);
    ck_assert_int_eq(b.d[0].live_state, AF_LIVE_USED);
    ck_assert_int_eq(b.d[1].live_state, AF_LIVE_USED);
    ck_assert_int_gt(b.d[1].score, b.d[0].score);
    ck_assert(fabs(b.d[1].s_live - 0.98) < 1e-9);
    ck_assert(b.d[0].live_age_s == 5);
    /* a node without series is scored on allocation exactly */
    ck_assert_int_eq(b.d[2].live_state, AF_LIVE_NO_DATA);
    ck_assert_int_eq(b.d[2].score, b.d[2].score_alloc);
    bed_release(&b);
    af_utilization_snapshot_unref(s);
}
END_TEST

START_TEST(test_stale_or_degraded_data_leaves_allocation_scores)
{
    struct bed b;
    struct af_utilization_snapshot *s = busy_idle_missing();
    int alloc[N];

    bed_init(&b, false);
    af_prioritize(pol, &b.plan, b.pod, b.v, b.names, N, b.d);
    for (int i = 0; i < N; i++)
        alloc[i] = b.d[i].score;
    af_utilization_score(pol, &b.plan, b.pod, b.v, N, s, T0 + pol->util.staleness_s + 1, b.d);
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(b.d[i].score, alloc[i]);
    ck_assert_int_eq(b.d[0].live_state, AF_LIVE_STALE);

    af_prioritize(pol, &b.plan, b.pod, b.v, b.names, N, b.d);
    s->ok = false;
    af_utilization_score(pol, &b.plan, b.pod, b.v, N, s, T0, b.d);
    for (int i = 0; i < N; i++) {
        ck_assert_int_eq(b.d[i].score, alloc[i]);
        ck_assert_int_eq(b.d[i].live_state, AF_LIVE_DEGRADED);
    }
    bed_release(&b);
    af_utilization_snapshot_unref(s);
}
END_TEST

START_TEST(test_trust_free_distrusts_a_busy_unallocated_gpu)
{
    struct bed b;
    /* n1: its one GPU is free on allocation but 85 % busy with no pod label; n2 idle. */
    char *a = gpu_answer("n1", "0", NULL, 85, T0), *c = gpu_answer("n2", "0", NULL, 0, T0);
    const char *answers[] = {a, c};
    int m[] = {AF_UM_GPU_UTIL, AF_UM_GPU_UTIL};
    struct af_utilization_snapshot *s;

    s = build(answers, m, 2, NULL);
    pol->util.mode = AF_UTILIZATION_MODE_TRUST_FREE;
    bed_init(&b, false);
    af_prioritize(pol, &b.plan, b.pod, b.v, b.names, N, b.d);
    af_utilization_score(pol, &b.plan, b.pod, b.v, N, s, T0, b.d);
    ck_assert(b.d[0].s_live == 0);
    ck_assert(b.d[1].s_live == 1);
    ck_assert_int_gt(b.d[1].score, b.d[0].score);
    bed_release(&b);
    af_utilization_snapshot_unref(s);
    af_free(a);
    af_free(c);
}
END_TEST

START_TEST(test_shared_gpus_saturated_are_penalized_and_filtered)
{
    struct bed b;
    struct af_utilization_snapshot *s = busy_idle_missing();
    struct af_node_view scratch[N];
    struct af_filter_summary sum;

    bed_init(&b, true);   /* time-sliced GPUs */
    af_prioritize(pol, &b.plan, b.pod, b.v, b.names, N, b.d);
    af_utilization_score(pol, &b.plan, b.pod, b.v, N, s, T0 + 7, b.d);
    ck_assert_int_eq(b.d[0].live_state, AF_LIVE_SATURATED);
    ck_assert(b.d[0].s_live == 0);

    memset(&sum, 0, sizeof(sum));
    af_utilization_filter(pol, &b.plan, b.pod, b.v, b.names, N, s, T0 + 7, scratch, b.d, &sum);
    ck_assert_int_eq(b.d[0].verdict, AF_VERDICT_FAILED);
    ck_assert_int_eq(b.d[0].live_state, AF_LIVE_REFUSED);
    ck_assert_msg(strstr(b.d[0].reason, "measured at 90%") &&
                      strstr(b.d[0].reason, "max_gpu_util 80%") && strstr(b.d[0].reason, "7s ago"),
                  "%s", b.d[0].reason);
    ck_assert_int_eq(b.d[1].verdict, AF_VERDICT_PASS);
    ck_assert_int_eq(b.d[2].verdict, AF_VERDICT_PASS);   /* no data: not refused */
    ck_assert_int_eq(sum.passed, 2);
    ck_assert_int_eq(sum.failed, 1);

    /* a pod that does not share GPUs is not filtered by it */
    bed_release(&b);
    bed_init(&b, false);
    memset(&sum, 0, sizeof(sum));
    af_utilization_filter(pol, &b.plan, b.pod, b.v, b.names, N, s, T0 + 7, scratch, b.d, &sum);
    ck_assert_int_eq(sum.passed, 3);
    bed_release(&b);
    af_utilization_snapshot_unref(s);
}
END_TEST

/* A pod that states its workload: the saturated tier-1 node counts as full, so filter
 * falls back to the next tier instead of holding the pod for a node it refuses. */
START_TEST(test_refused_node_lets_tiered_fallback_move_on)
{
    struct bed b;
    struct af_utilization_snapshot *s = busy_idle_missing();
    struct af_node_view scratch[N];
    struct af_filter_summary sum;

    bed_init(&b, true);
    b.info[1]->cls = AF_CLASS_NVIDIA_L4;
    b.info[2]->cls = AF_CLASS_NVIDIA_L4;
    b.pod->ann.workload = af_xstrdup("inference");
    af_plan_pod(pol, cfg->catalog, b.pod, &b.plan);
    ck_assert(b.plan.stated);

    memset(&sum, 0, sizeof(sum));
    af_filter(pol, &b.plan, b.pod, b.v, b.names, N, b.d, &sum);
    ck_assert_int_eq(b.d[0].verdict, AF_VERDICT_PASS);   /* without live data: A10G first */
    ck_assert_int_eq(b.d[1].verdict, AF_VERDICT_FAILED);

    memset(&sum, 0, sizeof(sum));
    af_utilization_filter(pol, &b.plan, b.pod, b.v, b.names, N, s, T0, scratch, b.d, &sum);
    ck_assert_int_eq(b.d[0].verdict, AF_VERDICT_FAILED);
    ck_assert_int_eq(b.d[0].live_state, AF_LIVE_REFUSED);
    ck_assert_int_eq(b.d[1].verdict, AF_VERDICT_PASS);
    ck_assert_int_eq(b.d[2].verdict, AF_VERDICT_PASS);
    ck_assert(sum.fallback);
    ck_assert_int_eq(sum.passed, 2);
    bed_release(&b);
    af_utilization_snapshot_unref(s);
}
END_TEST

START_TEST(test_waste_counts_allocated_gpus_idle_for_the_window)
{
    struct bed b;
    const char *body =
        "{\"status\":\"success\",\"data\":{\"resultType\":\"matrix\",\"result\":[{\"metric\":"
        "{\"Hostname\":\"n1\",\"gpu\":\"0\",\"pod\":\"nb\"},\"values\":[[1795412000,\"0\"],"
        "[1795414896,\"1\"]]},{\"metric\":{\"Hostname\":\"n2\",\"gpu\":\"0\",\"pod\":\"nb2\"},"
        "\"values\":[[1795412000,\"90\"],[1795414000,\"0\"],[1795414896,\"0\"]]}]}}";
    const char *answers[] = {body};
    int m[] = {AF_UM_GPU_UTIL};
    struct af_utilization_snapshot *s = build(answers, m, 1, NULL);
    struct af_utilization_waste w;

    bed_init(&b, false);
    b.v[0].used.v[AF_RES_GPU] = 1;
    b.v[1].used.v[AF_RES_GPU] = 1;
    /* n1: idle for 48 minutes, allocated: one GPU wasted, the node's whole price */
    ck_assert(af_utilization_waste(pol, &b.v[0], af_utilization_find(s, "n1"), T0, &w));
    ck_assert_int_eq(w.idle_allocated, 1);
    ck_assert(w.price_known && fabs(w.usd_per_hour - 1.006) < 1e-9);
    /* n2: idle for 15 minutes only */
    ck_assert(af_utilization_waste(pol, &b.v[1], af_utilization_find(s, "n2"), T0, &w));
    ck_assert_int_eq(w.idle_allocated, 0);
    /* n1 again, with nothing allocated: idle, but no waste */
    b.v[0].used.v[AF_RES_GPU] = 0;
    ck_assert(af_utilization_waste(pol, &b.v[0], af_utilization_find(s, "n1"), T0, &w));
    ck_assert_int_eq(w.idle_allocated, 0);
    /* n3 has no series */
    ck_assert(!af_utilization_waste(pol, &b.v[2], af_utilization_find(s, "n3"), T0, &w));
    bed_release(&b);
    af_utilization_snapshot_unref(s);
}
END_TEST

/* ---- serve flags ----------------------------------------------------------------------------- */

static const struct {
    const char *args[6];
    const char *text;
} flag_cases[] = {
    {{"--prometheus", "ftp://prometheus:9090"}, "--prometheus must be an http:// or https:// URL"},
    {{"--prometheus", "http://127.0.0.1:1", "--prometheus-bearer-token-file", "/nonexistent/token"},
     "cannot read --prometheus-bearer-token-file '/nonexistent/token'"},
    {{"--prometheus-ca-file", "ca.pem"}, "the --prometheus-* options need --prometheus URL"},
    {{"--prometheus", "http://127.0.0.1:1", "--metrics-file", "x.json"},
     "--prometheus and --metrics-file exclude each other"},
    {{"--metrics-file", "tests/fixtures/metrics/prometheus-query-response.json"},
     "expected an object with \"queries\""},
    {{"--prometheus", "http://127.0.0.1:1", "--prometheus-interval", "0"},
     "--prometheus-interval must be 1..3600 seconds"},
    /* the embedded policy's utilization.staleness is 120 s: every sample would go stale */
    {{"--prometheus", "http://127.0.0.1:1", "--prometheus-interval", "300"},
     "--prometheus-interval 300s is longer than utilization.staleness (120s) of <embedded>"},
};

START_TEST(test_bad_prometheus_flags_exit_2_with_one_line)
{
    const char *argv[12] = {"accelfit", "serve", "--demo", "--listen", "127.0.0.1:1"};
    char *out = NULL, *err = NULL;
    int n = 5, rc;

    for (int i = 0; flag_cases[_i].args[i]; i++)
        argv[n++] = flag_cases[_i].args[i];
    argv[n] = NULL;
    ck_assert_int_eq(chdir(AF_SOURCE_DIR), 0);
    rc = af_test_exec(argv, NULL, &out, &err);
    ck_assert_msg(rc == 2, "case %d: exit %d: %s", _i, rc, err);
    ck_assert_msg(strstr(err, flag_cases[_i].text), "case %d: %s", _i, err);
    ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "case %d: not one line: %s", _i, err);
    af_free(out);
    af_free(err);
}
END_TEST

/* ---- a Prometheus that never answers ------------------------------------------------------ */

/*
 * A listening socket nobody reads: connections complete (the kernel's backlog) and the
 * query then waits for an answer that never comes. The reader's timeout turns that into
 * a degraded source while requests are answered from allocation.
 */
START_TEST(test_a_silent_prometheus_times_out_into_degraded)
{
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char url[64], ready[200];
    char *policy = af_test_policy_file("utilization: {interval: 1s, timeout: 1s, staleness: 5s, "
                                       "retry_max: 1s}\n");
    const char *args[] = {"--demo", "--policy", policy, "--prometheus", url, NULL};
    struct af_test_server srv;
    CURL *c = curl_easy_init();
    bool degraded = false;

    ck_assert_int_ge(fd, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(fd, 16), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));

    af_test_server_start(&srv, args, false, NULL, NULL);
    snprintf(ready, sizeof(ready), "%s/readyz", srv.base);
    for (int i = 0; i < 300 && !degraded; i++) {
        struct af_test_resp r;
        af_test_http(c, NULL, ready, NULL, 0, NULL, &r);
        ck_assert_int_eq(r.status, 200);   /* degraded is not unready */
        degraded = r.body &&
                   strstr(r.body, "utilization: degraded: query gpu_util: cannot query") &&
                   strstr(r.body, "timed out");
        af_test_resp_free(&r);
        if (!degraded)
            usleep(100000);
    }
    ck_assert_msg(degraded, "/readyz never said the silent Prometheus timed out");
    {
        char *body = af_test_read("tests/fixtures/metrics/prioritize-a10g-inference.json", NULL);
        struct af_test_resp r;
        char purl[200];
        snprintf(purl, sizeof(purl), "%s/prioritize", srv.base);
        af_test_http(c, "POST", purl, body, strlen(body), NULL, &r);
        ck_assert_int_eq(r.status, 200);
        af_test_resp_free(&r);
        af_free(body);
    }
    ck_assert_int_eq(af_test_server_stop(&srv), 0);
    curl_easy_cleanup(c);
    close(fd);
    af_free(policy);
}
END_TEST

/*
 * SIGTERM while a query waits on a Prometheus that never answers (its timeout a minute
 * away): the query ends on the stop and the server exits 0, not by the SIGALRM (142) of
 * its 10 s shutdown bound.
 */
START_TEST(test_sigterm_during_a_slow_prometheus_exits_0)
{
    struct sockaddr_in a;
    socklen_t alen = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char url[64], ready[200];
    char *policy = af_test_policy_file("utilization: {interval: 1s, timeout: 60s}\n");
    const char *args[] = {"--demo", "--policy", policy, "--prometheus", url, NULL};
    struct af_test_server srv;
    CURL *c = curl_easy_init();
    struct af_test_resp r;

    ck_assert_int_ge(fd, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    ck_assert_int_eq(listen(fd, 16), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&a, &alen), 0);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));

    af_test_server_start(&srv, args, false, NULL, NULL);
    /* Serving: the reader's first round began at start and waits on the silent socket. */
    snprintf(ready, sizeof(ready), "%s/readyz", srv.base);
    af_test_http(c, NULL, ready, NULL, 0, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    af_test_resp_free(&r);
    ck_assert_int_eq(af_test_server_stop(&srv), 0);
    curl_easy_cleanup(c);
    close(fd);
    af_free(policy);
}
END_TEST

Suite *af_utilization_suite(void);
Suite *af_utilization_suite(void)
{
    Suite *s = suite_create("utilization");
    TCase *tc = tcase_create("policy");
    TCase *tp = tcase_create("answers");
    TCase *ts = tcase_create("scoring");

    tcase_add_test(tc, test_policy_defaults_without_a_section);
    tcase_add_test(tc, test_policy_section_is_read);
    tcase_add_loop_test(tc, test_policy_errors_point_at_the_text, 0,
                        (int)AF_ARRAY_SIZE(bad_cases));
    suite_add_tcase(s, tc);
    tcase_add_checked_fixture(tp, setup, teardown);
    tcase_add_test(tp, test_real_answer_maps_hostname_to_nodes);
    tcase_add_test(tp, test_servicemonitor_labels_still_say_who_holds_the_gpu);
    tcase_add_test(tp, test_bad_answers_are_refused_and_bad_series_dropped);
    tcase_add_test(tp, test_idle_runs_carry_over_rounds);
    tcase_add_test(tp, test_matrix_answer_gives_the_trailing_idle_run);
    tcase_add_test(tp, test_out_of_range_and_future_samples_are_dropped_and_counted);
    tcase_add_test(tp, test_a_round_keeps_a_bounded_number_of_series);
    tcase_add_test(tp, test_answers_in_any_key_order_and_odd_series);
    tcase_add_loop_test(tp, test_answers_that_are_not_json_are_refused_with_a_position, 0,
                        (int)AF_ARRAY_SIZE(not_json_cases));
    suite_add_tcase(s, tp);
    tcase_add_checked_fixture(ts, setup, teardown);
    tcase_add_checked_fixture(ts, score_setup, score_teardown);
    tcase_add_test(ts, test_prefer_idle_ranks_the_idle_node_first);
    tcase_add_test(ts, test_stale_or_degraded_data_leaves_allocation_scores);
    tcase_add_test(ts, test_trust_free_distrusts_a_busy_unallocated_gpu);
    tcase_add_test(ts, test_shared_gpus_saturated_are_penalized_and_filtered);
    tcase_add_test(ts, test_refused_node_lets_tiered_fallback_move_on);
    tcase_add_test(ts, test_waste_counts_allocated_gpus_idle_for_the_window);
    suite_add_tcase(s, ts);
    {
        TCase *tf = tcase_create("flags");
        tcase_add_loop_test(tf, test_bad_prometheus_flags_exit_2_with_one_line, 0,
                            (int)AF_ARRAY_SIZE(flag_cases));
        tcase_add_test(tf, test_a_silent_prometheus_times_out_into_degraded);
        tcase_add_test(tf, test_sigterm_during_a_slow_prometheus_exits_0);
        suite_add_tcase(s, tf);
    }
    return s;
}

int main(void)
{
    return af_test_run(af_utilization_suite());
}
