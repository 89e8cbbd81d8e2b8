/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transport-free service (af_service_handle and friends) and the metrics
 * renderer, called directly: readiness from a cache status (synced, watch down
 * longer than the staleness bound), the when-not-ready modes, decision
 * counters, and the Prometheus text format. No sockets.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/http.h"
#include "accelfit/metrics.h"
#include "accelfit/service.h"
#include "accelfit/util.h"
#include "support/support.h"

#define KS_DIR "tests/fixtures/kube-scheduler/"

static struct af_config_holder holder;
static struct af_publisher pub;
static struct af_cache_status status;
static struct af_service svc;

/* A service over tests/fixtures/clusters/behaviour.yaml; `synced` marks the snapshot. */
static void setup_with(bool publish, bool synced)
{
    struct af_config *cfg = NULL;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&cfg, NULL, NULL, &err), 0);
    af_config_holder_init(&holder, cfg);
    af_publisher_init(&pub);
    memset(&status, 0, sizeof(status));
    memset(&svc, 0, sizeof(svc));
    svc.config = &holder;
    svc.pub = &pub;
    svc.metrics = af_metrics_new();
    svc.when_not_ready = AF_NOT_READY_REJECT;
    if (publish) {
        size_t len;
        char *text = af_test_read("tests/fixtures/clusters/behaviour.yaml", &len);
        struct af_cache *cache = af_cache_new();
        struct af_config *c = af_config_holder_get(&holder);
        ck_assert_int_eq(af_codec_decode_cluster(c, "behaviour.yaml", text, len, af_cache_upsert_item, cache,
                                                 &err),
                         0);
        af_cache_set_synced(cache, synced);
        af_publisher_publish(&pub, af_cache_snapshot(cache));
        af_cache_free(cache);
        af_config_unref(c);
        af_free(text);
    }
}

static void setup(void)
{
    setup_with(true, true);
}

static void teardown(void)
{
    af_metrics_free(svc.metrics);
    af_publisher_destroy(&pub);
    af_config_holder_destroy(&holder);
}

/* States its workload, so tiered fallback applies (an unannotated pod is only ranked). */
static const char gpu_pod[] =
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\",\"uid\":\"u1\",\"annotations\":{"
    "\"accelfit.io/workload\":\"inference\"}},\"spec\":{"
    "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"1\","
    "\"cpu\":\"1\",\"memory\":\"1Gi\"}}}]}}";

static json_t *call(enum af_verb verb, const char *names, int want_status,
                    struct af_request_stats *st)
{
    char *body = af_xasprintf("{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":%s}", gpu_pod, names);
    struct af_buf out = AF_BUF_INIT(1u << 20);
    json_error_t e;
    json_t *j;
    int rc = af_service_handle_stats(&svc, verb, body, strlen(body), &out, st);

    ck_assert_int_eq(rc, want_status);
    j = json_loadb(out.buf, out.len, 0, &e);
    ck_assert_msg(j != NULL, "not JSON: %s", out.buf);
    af_buf_release(&out);
    af_free(body);
    return j;
}

/* ---- readiness --------------------------------------------------------------------------------- */

START_TEST(test_static_snapshot_is_ready)
{
    const char *why = NULL;

    ck_assert(af_service_ready(&svc, &why));
    ck_assert_str_eq(why, "ready");
}
END_TEST

START_TEST(test_no_snapshot_is_not_ready_and_rejects)
{
    const char *why = NULL;
    struct af_request_stats st;
    json_t *r;

    teardown();
    setup_with(false, false);
    ck_assert(!af_service_ready(&svc, &why));
    ck_assert(strstr(why, "snapshot") != NULL);
    r = call(AF_VERB_FILTER, "[\"fb-a10g-free\",\"cpu-c6i\"]", 200, &st);
    ck_assert(st.not_ready);
    ck_assert_int_eq(st.passed, 0);
    ck_assert_int_eq(json_array_size(json_object_get(r, "NodeNames")), 0);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "FailedNodes"),
                                                       "cpu-c6i")),
                     "accelfit: no cluster snapshot published yet");
    json_decref(r);
}
END_TEST

START_TEST(test_unsynced_snapshot_modes)
{
    struct af_request_stats st;
    json_t *r;

    teardown();
    setup_with(true, false);
    ck_assert(!af_service_ready(&svc, NULL));

    svc.when_not_ready = AF_NOT_READY_ERROR;
    r = call(AF_VERB_FILTER, "[\"fb-a10g-free\"]", 200, &st);
    ck_assert(strstr(json_string_value(json_object_get(r, "Error")), "not synced") != NULL);
    json_decref(r);

    svc.when_not_ready = AF_NOT_READY_ALLOW_ALL;
    r = call(AF_VERB_FILTER, "[\"fb-a10g-free\",\"cpu-c6i\",\"ghost\"]", 200, &st);
    ck_assert_int_eq(json_array_size(json_object_get(r, "NodeNames")), 3);
    ck_assert_int_eq(st.passed, 3);
    json_decref(r);

    /* prioritize is neutral while not ready */
    r = call(AF_VERB_PRIORITIZE, "[\"fb-a10g-free\",\"cpu-c6i\"]", 200, &st);
    ck_assert_int_eq(json_array_size(r), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(r, 0), "Score")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(r, 1), "Score")), 0);
    json_decref(r);
}
END_TEST

START_TEST(test_status_staleness)
{
    const char *why = NULL;
    uint64_t now = af_now_ns();
    struct af_request_stats st;
    json_t *r;

    svc.status = &status;
    svc.max_staleness_ns = 2000000000ull;
    ck_assert(!af_service_ready(&svc, &why));   /* status says not synced yet */
    atomic_store(&status.synced, true);
    atomic_store(&status.watch_up, true);
    ck_assert(af_service_ready(&svc, &why));
    /* watch down for 1 s: still fresh */
    atomic_store(&status.watch_up, false);
    atomic_store(&status.down_since_ns, now - 1000000000ull);
    ck_assert(af_service_ready(&svc, &why));
    /* down for 10 s: stale */
    atomic_store(&status.down_since_ns, now - 10000000000ull);
    ck_assert(!af_service_ready(&svc, &why));
    ck_assert(strstr(why, "stale") != NULL);
    r = call(AF_VERB_FILTER, "[\"fb-a10g-free\"]", 200, &st);
    ck_assert(st.not_ready);
    ck_assert(json_object_get(json_object_get(r, "FailedNodes"), "fb-a10g-free") != NULL);
    json_decref(r);
    /* 0 = never stale */
    svc.max_staleness_ns = 0;
    ck_assert(af_service_ready(&svc, &why));
}
END_TEST

/* ---- decisions and metrics ------------------------------------------------------------------------ */

START_TEST(test_filter_counts_decisions_and_fallbacks)
{
    struct af_request_stats st;
    struct af_buf m = AF_BUF_INIT(1u << 20);
    json_t *r;

    r = call(AF_VERB_FILTER, "[\"fb-a10g-full\",\"fb-l4-free\",\"cpu-c6i\",\"ghost\"]", 200, &st);
    ck_assert_int_eq(st.candidates, 4);
    ck_assert_int_eq(st.passed, 1);
    ck_assert(st.fallback);
    json_decref(r);
    af_metrics_observe_request(svc.metrics, AF_VERB_FILTER, 200, 120000);
    af_metrics_observe_request(svc.metrics, AF_VERB_FILTER, 200, 7000000000ull);
    af_metrics_observe_request(svc.metrics, AF_VERB_PRIORITIZE, 400, 10);
    ck_assert_int_eq(af_service_render_metrics(&svc, &m), 0);
    ck_assert(strstr(m.buf, "accelfit_decisions_total{class=\"nvidia-l4\",verdict=\"pass\"} 1\n"));
    ck_assert(strstr(m.buf, "accelfit_decisions_total{class=\"nvidia-a10g\",verdict=\"failed\"} 1\n"));
    ck_assert(strstr(m.buf, "accelfit_decisions_total{class=\"cpu\",verdict=\"unresolvable\"} 1\n"));
    ck_assert(strstr(m.buf, "accelfit_decisions_total{class=\"unknown\",verdict=\"failed\"} 1\n"));
    ck_assert(strstr(m.buf, "accelfit_fallbacks_total 1\n"));
    ck_assert(strstr(m.buf, "accelfit_requests_total{verb=\"filter\",code=\"200\"} 2\n"));
    ck_assert(strstr(m.buf, "accelfit_requests_total{verb=\"prioritize\",code=\"400\"} 1\n"));
    /* histogram: cumulative buckets, +Inf equals count, 7 s lands above 5 s */
    ck_assert(strstr(m.buf, "accelfit_request_duration_seconds_bucket{verb=\"filter\",le=\"0.00025\"} 1\n"));
    ck_assert(strstr(m.buf, "accelfit_request_duration_seconds_bucket{verb=\"filter\",le=\"5\"} 1\n"));
    ck_assert(strstr(m.buf, "accelfit_request_duration_seconds_bucket{verb=\"filter\",le=\"+Inf\"} 2\n"));
    ck_assert(strstr(m.buf, "accelfit_request_duration_seconds_count{verb=\"filter\"} 2\n"));
    ck_assert(strstr(m.buf, "accelfit_request_duration_seconds_bucket{verb=\"prioritize\",le=\"5e-05\"} 1\n"));
    ck_assert(strstr(m.buf, "accelfit_nodes{class=\"nvidia-a10g\"} 6\n"));
    ck_assert(strstr(m.buf, "accelfit_cache_objects{kind=\"pod\"} 4\n"));
    ck_assert(strstr(m.buf, "# TYPE accelfit_request_duration_seconds histogram\n"));
    ck_assert(strstr(m.buf, "# TYPE accelfit_nodes gauge\n"));
    ck_assert(!strstr(m.buf, "accelfit_watch_restarts_total"));   /* no status: static mode */
    af_buf_release(&m);
}
END_TEST

START_TEST(test_metrics_include_cache_status_when_present)
{
    struct af_buf m = AF_BUF_INIT(1u << 20);

    svc.status = &status;
    atomic_store(&status.synced, true);
    atomic_store(&status.watch_restarts, 3);
    atomic_store(&status.relists, 2);
    atomic_store(&status.events_applied, 1234);
    atomic_store(&status.events_posted, 5);
    atomic_store(&status.nodes, 13);
    atomic_store(&status.last_sync_ns, af_now_ns() - 3000000000ull);
    ck_assert_int_eq(af_service_render_metrics(&svc, &m), 0);
    ck_assert(strstr(m.buf, "accelfit_cache_synced 1\n"));
    ck_assert(strstr(m.buf, "accelfit_watch_restarts_total 3\n"));
    ck_assert(strstr(m.buf, "# TYPE accelfit_watch_restarts_total counter\n"));
    ck_assert(strstr(m.buf, "accelfit_relists_total 2\n"));
    ck_assert(strstr(m.buf, "accelfit_events_applied_total 1234\n"));
    ck_assert(strstr(m.buf, "accelfit_events_posted_total 5\n"));
    ck_assert(strstr(m.buf, "accelfit_cache_objects{kind=\"node\"} 13\n"));
    ck_assert(strstr(m.buf, "accelfit_cache_last_sync_age_seconds 3."));
    af_buf_release(&m);
}
END_TEST

START_TEST(test_metrics_render_respects_the_buffer_cap)
{
    struct af_buf m = AF_BUF_INIT(100);

    ck_assert_int_eq(af_service_render_metrics(&svc, &m), AF_ETOOBIG);
    ck_assert_int_le(m.len, 100);
    af_buf_release(&m);
}
END_TEST

START_TEST(test_explain_pod_from_the_snapshot)
{
    struct af_buf out = AF_BUF_INIT(4u << 20);
    json_t *j, *nodes;

    ck_assert_int_eq(af_service_explain_pod(&svc, "ml", "pending-gpu", &out), 200);
    j = json_loadb(out.buf, out.len, 0, NULL);
    ck_assert(j != NULL);
    nodes = json_object_get(j, "nodes");
    ck_assert_int_eq(json_array_size(nodes), 13);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "summary"),
                                                       "best_class")),
                     "nvidia-a10g");
    json_decref(j);
    af_buf_reset(&out);
    ck_assert_int_eq(af_service_explain_pod(&svc, "ml", "nobody", &out), 404);
    ck_assert(strstr(out.buf, "nobody") != NULL);
    af_buf_release(&out);
}
END_TEST

START_TEST(test_too_many_candidates)
{
    struct af_buf names = AF_BUF_INIT(0), out = AF_BUF_INIT(1u << 20);
    char *body;
    json_t *j;

    ck_assert_int_eq(af_buf_puts(&names, "["), 0);
    for (int i = 0; i <= AF_SERVICE_MAX_CANDIDATES; i++)
        ck_assert_int_eq(af_buf_printf(&names, "%s\"n%d\"", i ? "," : "", i), 0);
    ck_assert_int_eq(af_buf_puts(&names, "]"), 0);
    body = af_xasprintf("{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":%s}", gpu_pod, names.buf);
    ck_assert_int_eq(af_service_handle(&svc, AF_VERB_FILTER, body, strlen(body), &out), 200);
    j = json_loadb(out.buf, out.len, 0, NULL);
    ck_assert(strstr(json_string_value(json_object_get(j, "Error")), "too many") != NULL);
    json_decref(j);
    af_buf_reset(&out);
    ck_assert_int_eq(af_service_handle(&svc, AF_VERB_PRIORITIZE, body, strlen(body), &out), 400);
    af_buf_release(&out);
    af_buf_release(&names);
    af_free(body);
}
END_TEST

START_TEST(test_small_output_cap_still_answers)
{
    /* A response that does not fit its buffer becomes a short filter Error. */
    struct af_buf out = AF_BUF_INIT(200);
    const char *body = "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"d\"}},\"NodeNames\":"
                       "[\"fb-a10g-full\",\"fb-l4-free\",\"cpu-c6i\",\"nr-inf1\",\"nr-inf2\"]}";

    ck_assert_int_eq(af_service_handle(&svc, AF_VERB_FILTER, body, strlen(body), &out), 200);
    ck_assert(out.len > 0 && out.len <= 200);
    ck_assert(strstr(out.buf, "Error") != NULL);
    af_buf_release(&out);
}
END_TEST

/* ---- preempt --------------------------------------------------------------------------------------- */

#define OCCUPANT_UID "00000000-0000-0000-0000-000000000000"

/* ExtenderPreemptionArgs for the GPU pod, victims as UIDs (nodeCacheCapable: true). */
static const char preempt_meta_victims[] =
    "{\"fb-a10g-full\":{\"Pods\":[{\"UID\":\"" OCCUPANT_UID "\"}],\"NumPDBViolations\":1},"
    "\"cpu-c6i\":{\"Pods\":[{\"UID\":\"cpu-victim\"}],\"NumPDBViolations\":0},"
    "\"nr-inf2\":{\"Pods\":[{\"UID\":\"nr-victim\"}],\"NumPDBViolations\":0},"
    "\"ghost\":{\"Pods\":[{\"UID\":\"g1\"},{\"UID\":\"g2\"}],\"NumPDBViolations\":2}}";

static json_t *preempt(const char *body, int want_status, struct af_request_stats *st)
{
    struct af_buf out = AF_BUF_INIT(1u << 20);
    json_t *j;
    int rc = af_service_handle_stats(&svc, AF_VERB_PREEMPT, body, strlen(body), &out, st);

    ck_assert_msg(rc == want_status, "status %d, want %d: %s", rc, want_status, out.buf);
    j = json_loadb(out.buf, out.len, 0, NULL);
    ck_assert_msg(j != NULL, "not JSON: %s", out.buf);
    af_buf_release(&out);
    return j;
}

static json_t *preempt_meta(int want_status, struct af_request_stats *st)
{
    char *body = af_xasprintf("{\"Pod\":%s,\"NodeNameToVictims\":null,"
                              "\"NodeNameToMetaVictims\":%s}",
                              gpu_pod, preempt_meta_victims);
    json_t *j = preempt(body, want_status, st);

    af_free(body);
    return j;
}

START_TEST(test_preempt_drops_unresolvable_nodes_and_keeps_victims)
{
    struct af_request_stats st;
    json_t *r = preempt_meta(200, &st), *m, *v, *pods;

    ck_assert_int_eq(json_object_size(r), 1);
    m = json_object_get(r, "NodeNameToMetaVictims");
    ck_assert(json_is_object(m));
    ck_assert_int_eq(json_object_size(m), 2);
    ck_assert(json_object_get(m, "cpu-c6i") == NULL);    /* no GPU: eviction cannot help */
    ck_assert(json_object_get(m, "nr-inf2") == NULL);
    v = json_object_get(m, "fb-a10g-full");              /* no room now: eviction helps */
    ck_assert_int_eq(json_object_size(v), 2);
    pods = json_object_get(v, "Pods");
    ck_assert_int_eq(json_array_size(pods), 1);
    ck_assert_int_eq(json_object_size(json_array_get(pods, 0)), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(pods, 0), "UID")),
                     OCCUPANT_UID);
    ck_assert_int_eq(json_integer_value(json_object_get(v, "NumPDBViolations")), 1);
    v = json_object_get(m, "ghost");                     /* not cached: accelfit does not know */
    ck_assert_int_eq(json_array_size(json_object_get(v, "Pods")), 2);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(v, "Pods"), 1), "UID")),
                     "g2");
    ck_assert_int_eq(json_integer_value(json_object_get(v, "NumPDBViolations")), 2);
    ck_assert_int_eq(st.candidates, 4);
    ck_assert_int_eq(st.passed, 2);
    ck_assert(!st.not_ready);
    json_decref(r);
}
END_TEST

START_TEST(test_preempt_full_victims_answer_uids)
{
    /* nodeCacheCapable: false sends whole Pods; lowercase keys decode as in Go. */
    char *body = af_xasprintf(
        "{\"pod\":%s,\"nodenametometavictims\":null,\"nodenametovictims\":{"
        "\"fb-l4-free\":{\"pods\":[{\"metadata\":{\"name\":\"v\",\"namespace\":\"d\","
        "\"uid\":\"l4-victim\"},\"spec\":{}}],\"numpdbviolations\":0},"
        "\"nr-trn1\":{\"Pods\":[{\"metadata\":{\"name\":\"w\",\"uid\":\"trn-victim\"}}],"
        "\"NumPDBViolations\":0}}}",
        gpu_pod);
    json_t *r = preempt(body, 200, NULL), *m = json_object_get(r, "NodeNameToMetaVictims");

    ck_assert_int_eq(json_object_size(m), 1);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(json_object_get(m, "fb-l4-free"), "Pods"),
                                        0),
                         "UID")),
                     "l4-victim");
    json_decref(r);
    af_free(body);
}
END_TEST

START_TEST(test_preempt_without_candidates_is_an_empty_map)
{
    char *body = af_xasprintf("{\"Pod\":%s,\"NodeNameToVictims\":null,"
                              "\"NodeNameToMetaVictims\":null}",
                              gpu_pod);
    json_t *r = preempt(body, 200, NULL);

    ck_assert(json_is_object(json_object_get(r, "NodeNameToMetaVictims")));
    ck_assert_int_eq(json_object_size(json_object_get(r, "NodeNameToMetaVictims")), 0);
    json_decref(r);
    af_free(body);
}
END_TEST

static const struct {
    const char *body;
    const char *error_has;
} preempt_bad[] = {
    {"", "empty request body"},
    {"{", "not JSON"},
    {"[]", "expected an object (ExtenderPreemptionArgs)"},
    {"{\"NodeNameToMetaVictims\":{}}", "Pod: missing"},
    {"{\"Pod\":\"x\"}", "Pod: expected an object"},
    {"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNameToMetaVictims\":[]}",
     "NodeNameToMetaVictims: expected an object"},
    {"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNameToMetaVictims\":{\"n\":7}}",
     "NodeNameToMetaVictims[n]: expected an object"},
    {"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNameToMetaVictims\":{\"n\":{\"Pods\":"
     "[{\"UID\":3}]}}}",
     "NodeNameToMetaVictims[n].Pods[0].UID: expected a string"},
    {"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNameToVictims\":{\"n\":{\"Pods\":"
     "{}}}}",
     "NodeNameToVictims[n].Pods: expected an array"},
    {"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNameToVictims\":{\"n\":{\"Pods\":"
     "[],\"NumPDBViolations\":1.5}}}",
     "NumPDBViolations: expected an integer"},
    {"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNameToVictims\":{\"a\":null},"
     "\"NodeNameToMetaVictims\":{\"b\":null}}",
     "both set"},
};

START_TEST(test_preempt_bad_body_is_400)
{
    struct af_request_stats st;
    json_t *r = preempt(preempt_bad[_i].body, 400, &st);
    const char *e = json_string_value(json_object_get(r, "error"));

    ck_assert_msg(e && strstr(e, preempt_bad[_i].error_has), "case %d: error '%s'", _i, e);
    ck_assert(strstr(e, "ExtenderPreemptionArgs") != NULL);
    ck_assert_int_eq(st.candidates, -1);
    json_decref(r);
}
END_TEST

START_TEST(test_preempt_not_ready_follows_the_mode)
{
    struct af_request_stats st;
    json_t *r;

    teardown();
    setup_with(true, false);

    /* reject: filter would refuse every node, so nothing is worth evicting for */
    r = preempt_meta(200, &st);
    ck_assert(st.not_ready);
    ck_assert_int_eq(json_object_size(json_object_get(r, "NodeNameToMetaVictims")), 0);
    json_decref(r);

    svc.when_not_ready = AF_NOT_READY_ALLOW_ALL;
    r = preempt_meta(200, &st);
    ck_assert_int_eq(json_object_size(json_object_get(r, "NodeNameToMetaVictims")), 4);
    ck_assert_int_eq(st.passed, 4);
    json_decref(r);

    /* error: no Error field in ExtenderPreemptionResult, so a failing status */
    svc.when_not_ready = AF_NOT_READY_ERROR;
    r = preempt_meta(503, &st);
    ck_assert(strstr(json_string_value(json_object_get(r, "error")), "not synced") != NULL);
    json_decref(r);
}
END_TEST

START_TEST(test_preempt_requests_are_counted)
{
    struct af_buf m = AF_BUF_INIT(1u << 20);

    af_metrics_observe_request(svc.metrics, AF_VERB_PREEMPT, 200, 1000);
    af_metrics_observe_request(svc.metrics, AF_VERB_PREEMPT, 400, 1000);
    ck_assert_int_eq(af_service_render_metrics(&svc, &m), 0);
    ck_assert(strstr(m.buf, "accelfit_requests_total{verb=\"preempt\",code=\"200\"} 1\n"));
    ck_assert(strstr(m.buf, "accelfit_requests_total{verb=\"preempt\",code=\"400\"} 1\n"));
    ck_assert(strstr(m.buf, "accelfit_request_duration_seconds_count{verb=\"preempt\"} 2\n"));
    af_buf_release(&m);
}
END_TEST

/* ---- explain of a bound pod ------------------------------------------------------------------------ */

static json_t *explain_node(json_t *j, const char *name)
{
    size_t i;
    json_t *n;

    json_array_foreach(json_object_get(j, "nodes"), i, n) {
        if (!strcmp(json_string_value(json_object_get(n, "name")), name))
            return n;
    }
    ck_abort_msg("no node '%s' in the explanation", name);
    return NULL;
}

/*
 * A tier-1 node without room: the filter answer names the cause, the same for every such
 * node (kube-scheduler counts identical reasons in the pod's event); /explain keeps the
 * node's own amounts.
 */
START_TEST(test_filter_reason_names_the_cause_and_explain_the_amounts)
{
    json_t *f, *e;
    const char *want = "no room for nvidia.com/gpu: the pod requests 1; tier 1 (nvidia-a10g)";

    f = call(AF_VERB_FILTER, "[\"fb-a10g-full\",\"fb-l4-free\"]", 200, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(f, "FailedNodes"),
                                                       "fb-a10g-full")),
                     want);
    json_decref(f);
    e = call(AF_VERB_EXPLAIN, "[\"fb-a10g-full\",\"fb-l4-free\"]", 200, NULL);
    ck_assert_str_eq(json_string_value(json_object_get(explain_node(e, "fb-a10g-full"), "reason")),
                     "no room for nvidia.com/gpu: the pod requests 1, 0 free of 1 allocatable");
    json_decref(e);
}
END_TEST

static bool has_caveat(json_t *j, const char *part)
{
    size_t i;
    json_t *c;

    json_array_foreach(json_object_get(j, "caveats"), i, c) {
        if (json_is_string(c) && strstr(json_string_value(c), part))
            return true;
    }
    return false;
}

START_TEST(test_explain_bound_pod_leaves_out_its_own_usage)
{
    struct af_buf out = AF_BUF_INIT(4u << 20);
    json_t *j, *own, *n;

    /* fb-occupant holds fb-a10g-full's only GPU: judged without itself, the node has room. */
    ck_assert_int_eq(af_service_explain_pod(&svc, "default", "fb-occupant", &out), 200);
    j = json_loadb(out.buf, out.len, 0, NULL);
    ck_assert(j != NULL);
    ck_assert_str_eq(json_string_value(json_object_get(j, "node_name")), "fb-a10g-full");
    n = explain_node(j, "fb-a10g-full");
    ck_assert(json_is_true(json_object_get(n, "has_room")));
    own = json_object_get(j, "own_usage_subtracted");
    ck_assert(json_is_object(own));
    ck_assert_str_eq(json_string_value(json_object_get(own, "node")), "fb-a10g-full");
    ck_assert_int_eq(json_integer_value(json_object_get(own, "pods")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(own, "requests"),
                                                       "nvidia.com/gpu")),
                     "1");
    ck_assert(has_caveat(j, "bound to fb-a10g-full"));
    ck_assert(has_caveat(j, "subtracted"));
    json_decref(j);

    /* a pending pod sees the node as occupied, and nothing is subtracted */
    af_buf_reset(&out);
    ck_assert_int_eq(af_service_explain_pod(&svc, "ml", "pending-gpu", &out), 200);
    j = json_loadb(out.buf, out.len, 0, NULL);
    ck_assert(json_is_false(json_object_get(explain_node(j, "fb-a10g-full"), "has_room")));
    ck_assert(json_is_null(json_object_get(j, "own_usage_subtracted")));
    ck_assert(!has_caveat(j, "subtracted"));
    json_decref(j);
    af_buf_release(&out);
}
END_TEST

START_TEST(test_explain_says_what_it_does_not_evaluate)
{
    struct af_buf out = AF_BUF_INIT(4u << 20);
    json_t *j;

    ck_assert_int_eq(af_service_explain_pod(&svc, "ml", "pending-gpu", &out), 200);
    j = json_loadb(out.buf, out.len, 0, NULL);
    ck_assert(has_caveat(j, "taints, tolerations, node affinity"));
    ck_assert(has_caveat(j, "not evaluated"));
    json_decref(j);
    af_buf_release(&out);

    /* POST /explain carries the same note */
    j = call(AF_VERB_EXPLAIN, "[\"fb-a10g-free\"]", 200, NULL);
    ck_assert(has_caveat(j, "taints, tolerations, node affinity"));
    ck_assert(json_is_null(json_object_get(j, "own_usage_subtracted")));
    json_decref(j);
}
END_TEST

/* ---- listen addresses ------------------------------------------------------------------------------ */

static const struct {
    const char *in;
    int ok;
    const char *host;
    int port;
    bool v6;
} listen_cases[] = {
    {"127.0.0.1:8888", 1, "127.0.0.1", 8888, false},
    {":8888", 1, "", 8888, false},
    {"[::1]:9443", 1, "::1", 9443, true},
    {"[::]:80", 1, "::", 80, true},
    {"localhost:1", 1, "127.0.0.1", 1, false},
    {"0.0.0.0:65535", 1, "0.0.0.0", 65535, false},
    {"127.0.0.1", 0, "no port; write ADDR:PORT, e.g. 127.0.0.1:8888", 0, false},
    {"127.0.0.1:0", 0, "the port '0' is not a whole number from 1 to 65535", 0, false},
    {"127.0.0.1:99999", 0, "the port '99999' is not a whole number from 1 to 65535", 0, false},
    {"example.com:80", 0, "the address 'example.com' is not a numeric IPv4 address", 0, false},
    {"[::1:80", 0, "'[' is not closed", 0, false},
    {"::1:80", 0, "the IPv6 address '::1' needs brackets: [::1]:80", 0, false},
    {"", 0, "the address is empty", 0, false},
    {":x", 0, "the port 'x' is not", 0, false},
};

START_TEST(test_parse_listen)
{
    char host[128];
    int port = -1;
    bool v6 = false;
    char why[200] = "";
    int rc = af_http_parse_listen(listen_cases[_i].in, host, sizeof(host), &port, &v6, why,
                                  sizeof(why));

    if (!listen_cases[_i].ok) {
        /* a refusal names the part that is wrong (in `host`'s slot: the reason wanted) */
        ck_assert_msg(rc != 0, "'%s' accepted", listen_cases[_i].in);
        ck_assert_msg(strstr(why, listen_cases[_i].host), "'%s': %s", listen_cases[_i].in, why);
        return;
    }
    ck_assert_msg(rc == 0, "'%s' rejected", listen_cases[_i].in);
    ck_assert_str_eq(host, listen_cases[_i].host);
    ck_assert_int_eq(port, listen_cases[_i].port);
    ck_assert_int_eq(v6, listen_cases[_i].v6);
}
END_TEST

/* ---- recommend --------------------------------------------------------------------------------- */

static const struct {
    const char *query;            /* GET form */
    const char *body;             /* POST form of the same request */
    const char *const argv[16];   /* the CLI's */
    int status;
} rec_cases[] = {
    {"workload=training&model-params=70B&objective=cost&framework=pytorch&neuron-ready",
     "{\"workload\":\"training\",\"model_params\":\"70B\",\"objective\":\"cost\","
     "\"framework\":\"pytorch\",\"neuron_ready\":true}",
     {"accelfit", "recommend", "--workload", "training", "--model-params", "70B", "--objective",
      "cost", "--framework", "pytorch", "--neuron-ready", "--output", "json", NULL},
     200},
    {"workload=inference&model-params=7e9&latency-slo-ms=8",
     "{\"workload\":\"inference\",\"model-params\":7e9,\"latency_slo_ms\":8}",
     {"accelfit", "recommend", "--workload", "inference", "--model-params", "7e9",
      "--latency-slo-ms", "8", "--output", "json", NULL},
     200},
    {"workload=classical-ml", "{\"workload\":\"classical-ml\"}",
     {"accelfit", "recommend", "--workload", "classical-ml", "--output", "json", NULL}, 200},
    {"workload=inference&model-params=huge", "{\"workload\":\"inference\",\"model_params\":\"huge\"}",
     {"accelfit", "recommend", "--workload", "inference", "--model-params", "huge", NULL}, 400},
    {"workload=gaming", "{\"workload\":\"gaming\"}",
     {"accelfit", "recommend", "--workload", "gaming", NULL}, 400},
    {"workload=inference&model-params=0", "{\"workload\":\"inference\",\"model_params\":\"0\"}",
     {"accelfit", "recommend", "--workload", "inference", "--model-params", "0", NULL}, 400},
    {"workload=inference&model-params=1e400",
     "{\"workload\":\"inference\",\"model_params\":\"1e400\"}",
     {"accelfit", "recommend", "--workload", "inference", "--model-params", "1e400", NULL}, 400},
    {"workload=inference&model-params=-5", "{\"workload\":\"inference\",\"model_params\":\"-5\"}",
     {"accelfit", "recommend", "--workload", "inference", "--model-params", "-5", NULL}, 400},
};

/* A model size out of range says the range; one that cannot be read says the form. */
START_TEST(test_recommend_model_size_messages_say_form_and_range)
{
    static const struct {
        const char *value, *want;
    } cases[] = {
        {"0", "model size '0' is out of range: a model has from 1 to 1000T (1e15) parameters"},
        {"-5", "model size '-5' is out of range"},
        {"1e400", "model size '1e400' is out of range"},
        {"700000000000000B", "model size '700000000000000B' is out of range"},
        {"7Q", "cannot parse model size '7Q': write a parameter count as 70B, 350M, 1.5T, 13e9"},
    };
    for (size_t i = 0; i < AF_ARRAY_SIZE(cases); i++) {
        struct af_buf b = AF_BUF_INIT(0);
        char *q = af_xasprintf("workload=inference&model-params=%s", cases[i].value);
        ck_assert_int_eq(af_service_recommend(&svc, q, NULL, 0, &b), 400);
        ck_assert_msg(strstr(b.buf, cases[i].want), "%s", b.buf);
        af_buf_release(&b);
        af_free(q);
    }
}
END_TEST

/* GET and POST answer what the CLI prints; a refusal says what the CLI says. */
START_TEST(test_recommend_answers_what_the_cli_prints)
{
    struct af_buf get = AF_BUF_INIT(0), post = AF_BUF_INIT(0);
    char *out = NULL, *err = NULL;
    int cli = af_test_exec(rec_cases[_i].argv, NULL, &out, &err);

    ck_assert_int_eq(af_service_recommend(&svc, rec_cases[_i].query, NULL, 0, &get),
                     rec_cases[_i].status);
    ck_assert_int_eq(af_service_recommend(&svc, NULL, rec_cases[_i].body,
                                          strlen(rec_cases[_i].body), &post),
                     rec_cases[_i].status);
    if (rec_cases[_i].status == 200) {
        ck_assert_int_eq(cli, 0);
        ck_assert_str_eq(get.buf, out);
        ck_assert_str_eq(post.buf, out);
    } else {
        /* CLI: "accelfit recommend: MESSAGE\n"; server: {"error":"accelfit: MESSAGE"} */
        json_t *g = json_loads(get.buf, 0, NULL), *p = json_loads(post.buf, 0, NULL);
        const char *msg = strchr(err, ':') + 2;
        ck_assert_int_eq(cli, 2);
        err[strcspn(err, "\n")] = '\0';
        ck_assert_str_eq(json_string_value(json_object_get(g, "error")) + 10, msg);
        ck_assert_str_eq(json_string_value(json_object_get(p, "error")) + 10, msg);
        json_decref(g);
        json_decref(p);
    }
    free(out);
    free(err);
    af_buf_release(&get);
    af_buf_release(&post);
}
END_TEST

START_TEST(test_recommend_refuses_what_it_cannot_read)
{
    static const char *const bodies[] = {"[1]", "{\"workload\":[\"x\"]}", "{", "{\"gpus\":4}"};
    static const char *const queries[] = {"model-params=7B", "workload=training&x%zz=1",
                                          "workload=training&size=7B"};
    for (size_t i = 0; i < AF_ARRAY_SIZE(bodies); i++) {
        struct af_buf b = AF_BUF_INIT(0);
        json_t *j;
        ck_assert_int_eq(af_service_recommend(&svc, NULL, bodies[i], strlen(bodies[i]), &b), 400);
        j = json_loads(b.buf, 0, NULL);
        ck_assert_ptr_nonnull(json_string_value(json_object_get(j, "error")));
        json_decref(j);
        af_buf_release(&b);
    }
    for (size_t i = 0; i < AF_ARRAY_SIZE(queries); i++) {
        struct af_buf b = AF_BUF_INIT(0);
        ck_assert_int_eq(af_service_recommend(&svc, queries[i], NULL, 0, &b), 400);
        ck_assert_msg(strstr(b.buf, i == 0 ? "workload is required"
                                    : i == 1 ? "bad % escape"
                                             : "unknown parameter 'size'"),
                      "%s", b.buf);
        af_buf_release(&b);
    }
}
END_TEST

/* ---- query strings ------------------------------------------------------------------------ */

static const struct {
    const char *raw;
    const char *err_has;   /* NULL: parses */
    size_t n;
    const char *key, *value;   /* the last parameter */
} query_parse_cases[] = {
    {"", NULL, 0, NULL, NULL},
    {NULL, NULL, 0, NULL, NULL},
    {"&&&", NULL, 0, NULL, NULL},
    {"a=1&&b=2", NULL, 2, "b", "2"},
    {"&a=1", NULL, 1, "a", "1"},
    {"a=1&", NULL, 1, "a", "1"},
    {"a=x%26y%3Dz+w", NULL, 1, "a", "x&y=z w"},
    {"b", NULL, 1, "b", ""},
    {"a=1=2", NULL, 1, "a", "1=2"},
    {"a=1&a=2", "'a' is given twice", 0, NULL, NULL},
    {"a=1&a=2&b", "'a' is given twice", 0, NULL, NULL},
    {"a=%zz", "bad % escape", 0, NULL, NULL},
    {"a=%00", "bad % escape", 0, NULL, NULL},
    {"=1", "has no name", 0, NULL, NULL},
    {"c=1", "GET /x: unknown query parameter 'c' (known: a, b)", 0, NULL, NULL},
    {"a&b&a&b&a&b&a&b&a&b&a&b&a&b&a&b", "given twice", 0, NULL, NULL},
};

START_TEST(test_query_parse)
{
    static const char *const known[] = {"a", "b", NULL};
    struct af_query q;
    char err[400] = "";
    int rc = af_query_parse(&q, query_parse_cases[_i].raw, "GET /x",
                            known, err, sizeof(err));

    if (query_parse_cases[_i].err_has) {
        ck_assert_int_eq(rc, AF_EINVAL);
        ck_assert_msg(strstr(err, query_parse_cases[_i].err_has), "%s", err);
        ck_assert_int_eq(q.n, 0);
    } else {
        ck_assert_msg(rc == 0, "%s", err);
        ck_assert_int_eq(q.n, query_parse_cases[_i].n);
        if (q.n) {
            ck_assert_str_eq(q.p[q.n - 1].key, query_parse_cases[_i].key);
            ck_assert_str_eq(q.p[q.n - 1].value, query_parse_cases[_i].value);
            ck_assert_str_eq(af_query_get(&q, query_parse_cases[_i].key),
                             query_parse_cases[_i].value);
        }
    }
    af_query_release(&q);
}
END_TEST

START_TEST(test_query_too_many_parameters)
{
    struct af_query q;
    char err[400] = "", raw[400] = "";

    for (int i = 0; i <= AF_QUERY_MAX_PARAMS; i++)
        snprintf(raw + strlen(raw), sizeof(raw) - strlen(raw), "p%d=1&", i);
    ck_assert_int_eq(af_query_parse(&q, raw, "GET /x", NULL, err, sizeof(err)), AF_EINVAL);
    ck_assert_msg(strstr(err, "more than 16 query parameters"), "%s", err);
}
END_TEST

Suite *af_service_suite(void);
Suite *af_service_suite(void)
{
    Suite *s = suite_create("service");
    TCase *tc = tcase_create("service");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_static_snapshot_is_ready);
    tcase_add_test(tc, test_no_snapshot_is_not_ready_and_rejects);
    tcase_add_test(tc, test_unsynced_snapshot_modes);
    tcase_add_test(tc, test_status_staleness);
    tcase_add_test(tc, test_filter_counts_decisions_and_fallbacks);
    tcase_add_test(tc, test_metrics_include_cache_status_when_present);
    tcase_add_test(tc, test_metrics_render_respects_the_buffer_cap);
    tcase_add_test(tc, test_explain_pod_from_the_snapshot);
    tcase_add_test(tc, test_too_many_candidates);
    tcase_add_test(tc, test_small_output_cap_still_answers);
    suite_add_tcase(s, tc);

    tc = tcase_create("preempt");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_preempt_drops_unresolvable_nodes_and_keeps_victims);
    tcase_add_test(tc, test_preempt_full_victims_answer_uids);
    tcase_add_test(tc, test_preempt_without_candidates_is_an_empty_map);
    tcase_add_loop_test(tc, test_preempt_bad_body_is_400, 0, (int)AF_ARRAY_SIZE(preempt_bad));
    tcase_add_test(tc, test_preempt_not_ready_follows_the_mode);
    tcase_add_test(tc, test_preempt_requests_are_counted);
    suite_add_tcase(s, tc);

    tc = tcase_create("explain");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_explain_bound_pod_leaves_out_its_own_usage);
    tcase_add_test(tc, test_filter_reason_names_the_cause_and_explain_the_amounts);
    tcase_add_test(tc, test_explain_says_what_it_does_not_evaluate);
    suite_add_tcase(s, tc);

    tc = tcase_create("recommend");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_recommend_answers_what_the_cli_prints, 0,
                        (int)AF_ARRAY_SIZE(rec_cases));
    tcase_add_test(tc, test_recommend_refuses_what_it_cannot_read);
    tcase_add_test(tc, test_recommend_model_size_messages_say_form_and_range);
    suite_add_tcase(s, tc);

    tc = tcase_create("query");
    tcase_add_loop_test(tc, test_query_parse, 0, (int)AF_ARRAY_SIZE(query_parse_cases));
    tcase_add_test(tc, test_query_too_many_parameters);
    suite_add_tcase(s, tc);

    tc = tcase_create("listen");
    tcase_add_loop_test(tc, test_parse_listen, 0, (int)AF_ARRAY_SIZE(listen_cases));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_service_suite());
}
