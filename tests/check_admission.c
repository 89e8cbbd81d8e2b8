/* SPDX-License-Identifier: Apache-2.0 */
/*
 * admission: the mutating webhook for variant rollouts (src/codec/admission.c,
 * jsonpatch.c, variant.c and affinity.c; src/service/mutate.c), fed the AdmissionReview requests a real kube-apiserver
 * v1.26 sent (tests/fixtures/admission/). Every answer must be a valid
 * AdmissionReview v1 with the request's uid; every patch must apply, by the
 * strict RFC 6902 apply of tests/support (independent of the codec's), to the
 * object exactly as received, and the patched pod must pass what the API
 * server checks of the fields the webhook touches (tests/support/apiserver_rules.h),
 * with no source accelerator left and the variant's images, env, tolerations
 * and annotations in place. Everything accelfit cannot decide is answered
 * allowed, unchanged; only what is not an AdmissionReview is a 400.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/decide.h"
#include "accelfit/dra.h"
#include "accelfit/metrics.h"
#include "accelfit/service.h"
#include "accelfit/webhook.h"
#include "accelfit/prefer.h"
#include "accelfit/rollout.h"
#include "accelfit/rollout_state.h"
#include "accelfit/tenant_budget.h"
#include "accelfit/util.h"
#include "support/apiserver_rules.h"
#include "support/policy.h"
#include "support/support.h"

#define ADM "tests/fixtures/admission/"
#define REQ_A ADM "ignore/patch/a-gpu-inference/webhook-request.json"
#define REQ_B ADM "ignore/patch/b-replicaset-owned/webhook-request.json"
#define REQ_C ADM "ignore/patch/c-job-owned/webhook-request.json"
#define REQ_E ADM "ignore/patch/e-generatename/webhook-request.json"
#define REQ_DRY ADM "ignore/patch/a-gpu-inference-dry-run-server/webhook-request.json"

#define NEURON_IMAGE                                                                               \
    "public.ecr.aws/neuron/pytorch-inference-neuronx:2.1.2-neuronx-py310-sdk2.18.2-ubuntu20.04"

/* ---- the service --------------------------------------------------------------------------- */

static struct af_config_holder holder;
static struct af_publisher pub;
static struct af_service svc;
static bool service_up;

/* Room on both sides: A10G (g5.12xlarge, 4 GPUs), L4 and Inferentia2 (inf2.24xlarge, 6 devices). */
static const char cluster_yaml[] =
    "apiVersion: v1\nkind: List\nitems:\n"
    "- {apiVersion: v1, kind: Node, metadata: {name: g5-a, labels: "
    "{node.kubernetes.io/instance-type: g5.12xlarge}}, status: {allocatable: {cpu: 47, memory: "
    "180Gi, pods: 110, nvidia.com/gpu: 4}}}\n"
    "- {apiVersion: v1, kind: Node, metadata: {name: g6-a, labels: "
    "{node.kubernetes.io/instance-type: g6.12xlarge}}, status: {allocatable: {cpu: 47, memory: "
    "180Gi, pods: 110, nvidia.com/gpu: 4}}}\n"
    "- {apiVersion: v1, kind: Node, metadata: {name: inf2-a, labels: "
    "{node.kubernetes.io/instance-type: inf2.24xlarge}}, status: {allocatable: {cpu: 95, "
    "memory: 370Gi, pods: 110, aws.amazon.com/neuron: 6, aws.amazon.com/neuroncore: 12}}}\n"
    "- {apiVersion: v1, kind: Node, metadata: {name: inf2-b, labels: "
    "{node.kubernetes.io/instance-type: inf2.24xlarge}}, status: {allocatable: {cpu: 95, "
    "memory: 370Gi, pods: 110, aws.amazon.com/neuron: 6, aws.amazon.com/neuroncore: 12}}}\n";

/* The variant rollout of most tests: every managed pod of `default` from A10G/L4 to inf2. */
#define VARIANT_ROLLOUT(name, share)                                                               \
    "  - name: " name "\n"                                                                         \
    "    selector: {namespace: default}\n"                                                         \
    "    source: [nvidia-a10g, nvidia-l4]\n"                                                       \
    "    target: [inferentia2]\n"                                                                  \
    "    share: " share "\n"                                                                       \
    "    variant:\n"                                                                               \
    "      images: {\"*\": \"" NEURON_IMAGE "\"}\n"                                                \
    "      resources: {aws.amazon.com/neuron: 1}\n"                                                \
    "      env: {NEURON_RT_NUM_CORES: \"2\", MODEL_NAME: llama-2-7b-neuron}\n"                     \
    "      tolerations: [{key: aws.amazon.com/neuron, operator: Exists, effect: NoSchedule}]\n"   \
    "      annotations: {accelfit.io/neuron-ready: \"true\"}\n"

/*
 * A service whose policy is the default one plus `rollouts` (a `rollouts:` section, or
 * NULL for none), loaded from a file as `accelfit serve --policy` does, over the cluster
 * above; `synced` marks the snapshot, `state` gives it rollout state.
 */
static void service_with_policy(const char *extra, bool synced, bool state);

/* A cluster file's text to use instead of cluster_yaml, DRA objects and all (NULL: none). */
static const char *cluster_text;

static void service_with(const char *rollouts, bool synced, bool state)
{
    char *section = rollouts ? af_xasprintf("\nrollouts:\n%s", rollouts) : NULL;

    service_with_policy(section, synced, state);
    af_free(section);
}

/* The same with `extra` (any sections, or NULL) appended to the default policy. */
static void service_with_policy(const char *extra, bool synced, bool state)
{
    char *path = af_test_policy_file(extra ? extra : "");
    struct af_config *cfg = NULL;
    struct af_cache *cache;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_config_load(&cfg, NULL, path, &err) == 0, "policy: %d:%d: %s", err.line,
                  err.column, err.text);
    af_free(path);
    af_config_holder_init(&holder, cfg);
    af_publisher_init(&pub);
    memset(&svc, 0, sizeof(svc));
    svc.config = &holder;
    svc.pub = &pub;
    svc.metrics = af_metrics_new();
    svc.rollouts = state ? af_rollouts_new() : NULL;
    cache = af_cache_new();
    {
        const char *text = cluster_text ? cluster_text : cluster_yaml;
        struct af_dra *dra = NULL;
        ck_assert_int_eq(af_codec_decode_cluster(cfg, "cluster.yaml", text, strlen(text),
                                                 af_cache_upsert_item, cache, &err),
                         0);
        ck_assert_int_eq(af_codec_cluster_dra("cluster.yaml", text, strlen(text), &dra, &err), 0);
        if (dra)
            (void)af_cache_set_dra(cache, dra);
    }
    af_cache_set_synced(cache, synced);
    af_publisher_publish(&pub, af_cache_snapshot(cache));
    af_cache_free(cache);
    service_up = true;
}

static void teardown(void)
{
    cluster_text = NULL;
    if (!service_up)
        return;
    af_rollouts_free(svc.rollouts);
    af_metrics_free(svc.metrics);
    af_publisher_destroy(&pub);
    af_config_holder_destroy(&holder);
    service_up = false;
}

/* The policy in force, to adjust by hand what the loader would refuse. Borrowed. */
static struct af_policy *policy(void)
{
    struct af_config *c = af_config_holder_get(&holder);
    struct af_policy *p = c->policy;

    af_config_unref(c);
    return p;
}

/* ---- answers ------------------------------------------------------------------------------- */

struct answer {
    int status;
    json_t *body;          /* the whole answer */
    json_t *patch;         /* decoded response.patch, or NULL */
    json_t *warnings;      /* borrowed from body, or NULL */
};

static void answer_clear(struct answer *a)
{
    json_decref(a->body);
    json_decref(a->patch);
    memset(a, 0, sizeof(*a));
}

/* Whether any warning holds `needle`. */
static bool warned(const struct answer *a, const char *needle)
{
    size_t i;
    json_t *w;

    json_array_foreach(a->warnings, i, w) {
        if (strstr(json_string_value(w), needle))
            return true;
    }
    return false;
}

/*
 * Posts `body` through af_webhook_mutate. A 200 must be an AdmissionReview v1 response
 * with `uid` (when given), allowed true, a patch only with patchType JSONPatch, in
 * standard base64, holding a JSON array, and string warnings; a 400 must be
 * {"error": "..."}.
 */
static struct answer post(const char *body, size_t len, const char *uid)
{
    struct af_buf out = AF_BUF_INIT(4u << 20);
    struct answer a;
    json_error_t e;
    json_t *resp, *v;
    const char *key;
    size_t i;

    memset(&a, 0, sizeof(a));
    a.status = af_webhook_mutate(&svc, body, len, &out);
    a.body = json_loadb(out.buf ? out.buf : "", out.len, 0, &e);
    ck_assert_msg(a.body != NULL, "answer is not JSON: %s", out.buf ? out.buf : "(empty)");
    af_buf_release(&out);
    if (a.status == 400) {
        ck_assert(json_is_object(a.body));
        ck_assert(json_is_string(json_object_get(a.body, "error")));
        ck_assert_uint_gt(json_string_length(json_object_get(a.body, "error")), 10);
        return a;
    }
    ck_assert_int_eq(a.status, 200);
    ck_assert_str_eq(json_string_value(json_object_get(a.body, "apiVersion")),
                     "admission.k8s.io/v1");
    ck_assert_str_eq(json_string_value(json_object_get(a.body, "kind")), "AdmissionReview");
    resp = json_object_get(a.body, "response");
    ck_assert(json_is_object(resp));
    json_object_foreach(resp, key, v) {
        ck_assert_msg(!strcmp(key, "uid") || !strcmp(key, "allowed") || !strcmp(key, "patch") ||
                          !strcmp(key, "patchType") || !strcmp(key, "warnings"),
                      "unexpected response.%s", key);
    }
    ck_assert(json_is_string(json_object_get(resp, "uid")));
    if (uid)
        ck_assert_str_eq(json_string_value(json_object_get(resp, "uid")), uid);
    ck_assert(json_is_true(json_object_get(resp, "allowed")));
    v = json_object_get(resp, "patch");
    if (v) {
        size_t n;
        char *raw;
        ck_assert_str_eq(json_string_value(json_object_get(resp, "patchType")), "JSONPatch");
        ck_assert(json_is_string(v));
        raw = af_test_base64_decode(json_string_value(v), &n);
        ck_assert_msg(raw != NULL, "patch is not standard base64");
        a.patch = json_loadb(raw, n, 0, &e);
        ck_assert_msg(json_is_array(a.patch), "patch is not a JSON array: %s", raw);
        ck_assert_uint_gt(json_array_size(a.patch), 0);
        af_free(raw);
    } else {
        ck_assert_ptr_null(json_object_get(resp, "patchType"));
    }
    a.warnings = json_object_get(resp, "warnings");
    if (a.warnings) {
        ck_assert(json_is_array(a.warnings));
        ck_assert_uint_gt(json_array_size(a.warnings), 0);
        json_array_foreach(a.warnings, i, v) {
            ck_assert(json_is_string(v));
            ck_assert_uint_lt(json_string_length(v), 256);
            ck_assert(!strncmp(json_string_value(v), "accelfit: ", 10));
        }
    }
    return a;
}

static struct answer post_file(const char *rel, json_t **request)
{
    size_t len;
    char *body = af_test_read(rel, &len);
    json_error_t e;
    json_t *req = json_loadb(body, len, 0, &e);
    struct answer a;

    ck_assert_ptr_nonnull(req);
    a = post(body, len, json_string_value(json_object_get(json_object_get(req, "request"), "uid")));
    af_free(body);
    if (request)
        *request = req;
    else
        json_decref(req);
    return a;
}

/* ---- what the API server checks of a patched pod --------------------------------------------- */

static json_t *container(json_t *pod, const char *list, size_t i)
{
    return json_array_get(json_object_get(json_object_get(pod, "spec"), list), i);
}

static json_t *obj_of(json_t *request)
{
    return json_object_get(json_object_get(request, "request"), "object");
}

static const char *annotation(json_t *pod, const char *key)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), key));
}

/* The API server's validation of what the webhook touches (support/apiserver_rules.h). */
static void assert_pod_valid(json_t *pod)
{
    char why[300] = "";

    ck_assert_msg(af_test_pod_valid(pod, why, sizeof(why)), "%s", why);
}

/* A pod rewritten by VARIANT_ROLLOUT for the target, named `rollout`. */
static void assert_target_pod(json_t *pod, const char *rollout)
{
    json_t *spec = json_object_get(pod, "spec"), *c, *t;
    size_t i, k;
    bool tol = false;

    assert_pod_valid(pod);
    json_array_foreach(json_object_get(spec, "containers"), i, c) {
        json_t *res = json_object_get(c, "resources");
        bool env_cores = false, env_model = false;
        json_t *e;
        ck_assert_str_eq(json_string_value(json_object_get(c, "image")), NEURON_IMAGE);
        ck_assert_ptr_null(json_object_get(json_object_get(res, "requests"), "nvidia.com/gpu"));
        ck_assert_ptr_null(json_object_get(json_object_get(res, "limits"), "nvidia.com/gpu"));
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(res, "requests"),
                                                           "aws.amazon.com/neuron")),
                         "1");
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(res, "limits"),
                                                           "aws.amazon.com/neuron")),
                         "1");
        json_array_foreach(json_object_get(c, "env"), k, e) {
            const char *n = json_string_value(json_object_get(e, "name"));
            const char *v = json_string_value(json_object_get(e, "value"));
            if (!strcmp(n, "NEURON_RT_NUM_CORES")) {
                ck_assert(!env_cores);
                ck_assert_str_eq(v, "2");
                env_cores = true;
            }
            if (!strcmp(n, "MODEL_NAME")) {
                ck_assert(!env_model);
                ck_assert_str_eq(v, "llama-2-7b-neuron");
                env_model = true;
            }
        }
        ck_assert(env_cores && env_model);
    }
    json_array_foreach(json_object_get(spec, "tolerations"), i, t) {
        const char *key = json_string_value(json_object_get(t, "key"));
        if (key && !strcmp(key, "aws.amazon.com/neuron")) {
            ck_assert(!tol);
            ck_assert_str_eq(json_string_value(json_object_get(t, "operator")), "Exists");
            ck_assert_str_eq(json_string_value(json_object_get(t, "effect")), "NoSchedule");
            tol = true;
        }
    }
    ck_assert(tol);
    ck_assert_str_eq(annotation(pod, "accelfit.io/rollout"), rollout);
    ck_assert_str_eq(annotation(pod, "accelfit.io/rollout-side"), "target");
    ck_assert_str_eq(annotation(pod, "accelfit.io/neuron-ready"), "true");
}

/* The patch changes nothing but the two rollout annotations. */
static void assert_annotations_only(json_t *request, json_t *patch, const char *rollout,
                                    const char *side)
{
    char why[300] = "";
    json_t *obj = obj_of(request), *patched = af_test_jsonpatch_apply(obj, patch, why, sizeof(why)), *op;
    size_t i;

    ck_assert_msg(patched != NULL, "patch does not apply: %s", why);
    json_array_foreach(patch, i, op) {
        ck_assert(!strncmp(json_string_value(json_object_get(op, "path")),
                           "/metadata/annotations", 21));
    }
    ck_assert(json_equal(json_object_get(patched, "spec"), json_object_get(obj, "spec")));
    ck_assert_str_eq(annotation(patched, "accelfit.io/rollout"), rollout);
    ck_assert_str_eq(annotation(patched, "accelfit.io/rollout-side"), side);
    ck_assert_ptr_null(annotation(patched, "accelfit.io/neuron-ready"));
    json_decref(patched);
}

/* ---- the RFC 6902 apply against what the API server did -------------------------------------- */

START_TEST(test_apply_agrees_with_the_api_server)
{
    static const char *const refused[] = {
        ADM "ignore/bad-patch/a-gpu-inference/webhook-patch.json",
        ADM "ignore/bad-patch-remove-missing-key/a-gpu-inference/webhook-patch.json",
        ADM "ignore/bad-patch-bad-index/a-gpu-inference/webhook-patch.json",
        /* The API server's json-patch v4 took this replace as an add and then refused
         * the pod (a limit missing); RFC 6902 refuses it outright. Either way: no pod. */
        ADM "ignore/bad-patch-replace-missing-key/a-gpu-inference/webhook-patch.json",
    };
    size_t len;
    char *text = af_test_read(REQ_A, &len), why[300];
    json_t *req = json_loadb(text, len, 0, NULL), *patch, *patched, *stored;
    json_t *pc, *sc;

    af_free(text);
    text = af_test_read(ADM "ignore/patch/a-gpu-inference/webhook-patch.json", &len);
    patch = json_loadb(text, len, 0, NULL);
    af_free(text);
    text = af_test_read(ADM "ignore/patch/a-gpu-inference/pod-stored.json", &len);
    stored = json_loadb(text, len, 0, NULL);
    af_free(text);
    ck_assert(req && patch && stored);
    patched = af_test_jsonpatch_apply(obj_of(req), patch, why, sizeof(why));
    ck_assert_msg(patched != NULL, "%s", why);
    /* What the API server stored after the recorded patch, field by field. */
    pc = json_array_get(json_object_get(json_object_get(patched, "spec"), "containers"), 0);
    sc = json_array_get(json_object_get(json_object_get(stored, "spec"), "containers"), 0);
    ck_assert(json_equal(json_object_get(pc, "image"), json_object_get(sc, "image")));
    ck_assert(json_equal(json_object_get(pc, "resources"), json_object_get(sc, "resources")));
    ck_assert(json_equal(json_object_get(json_object_get(patched, "spec"), "tolerations"),
                         json_object_get(json_object_get(stored, "spec"), "tolerations")));
    ck_assert(json_equal(json_object_get(json_object_get(patched, "metadata"), "annotations"),
                         json_object_get(json_object_get(stored, "metadata"), "annotations")));
    json_decref(patched);
    json_decref(patch);
    json_decref(stored);
    for (size_t i = 0; i < AF_ARRAY_SIZE(refused); i++) {
        text = af_test_read(refused[i], &len);
        patch = json_loadb(text, len, 0, NULL);
        af_free(text);
        patched = af_test_jsonpatch_apply(obj_of(req), patch, why, sizeof(why));
        ck_assert_msg(patched == NULL, "%s applied", refused[i]);
        json_decref(patch);
    }
    json_decref(req);
}
END_TEST

/* ---- every recorded request ------------------------------------------------------------------ */

static const char *const recorded[] = {
    "fail/500/a-gpu-inference",
    "fail/bad-patch-bad-index/a-gpu-inference",
    "fail/bad-patch-remove-missing-key/a-gpu-inference",
    "fail/bad-patch-replace-missing-key/a-gpu-inference",
    "fail/bad-patch/a-gpu-inference",
    "fail/deny-nocode/a-gpu-inference",
    "fail/deny/a-gpu-inference",
    "fail/garbage/a-gpu-inference",
    "fail/no-allowed/a-gpu-inference",
    "fail/no-patchtype/a-gpu-inference",
    "fail/no-typemeta/a-gpu-inference",
    "fail/slow/a-gpu-inference",
    "fail/wrong-kind/a-gpu-inference",
    "fail/wrong-uid/a-gpu-inference",
    "ignore/500/a-gpu-inference",
    "ignore/allow/a-gpu-inference",
    "ignore/allow/b-replicaset-owned",
    "ignore/allow/c-job-owned",
    "ignore/allow/e-generatename",
    "ignore/bad-patch-bad-index/a-gpu-inference",
    "ignore/bad-patch-remove-missing-key/a-gpu-inference",
    "ignore/bad-patch-replace-missing-key/a-gpu-inference",
    "ignore/bad-patch/a-gpu-inference",
    "ignore/deny-nocode/a-gpu-inference",
    "ignore/deny/a-gpu-inference",
    "ignore/garbage/a-gpu-inference",
    "ignore/no-allowed/a-gpu-inference",
    "ignore/no-patchtype/a-gpu-inference",
    "ignore/no-typemeta/a-gpu-inference",
    "ignore/patch-warn/a-gpu-inference",
    "ignore/patch/a-gpu-inference",
    "ignore/patch/a-gpu-inference-dry-run-server",
    "ignore/patch/a-gpu-inference-kubectl-apply",
    "ignore/patch/b-replicaset-owned",
    "ignore/patch/c-job-owned",
    "ignore/patch/e-generatename",
    "ignore/slow/a-gpu-inference",
    "ignore/wrong-kind/a-gpu-inference",
    "ignore/wrong-uid/a-gpu-inference",
};

/* Each recorded request, its pod sent to the target: a patch that applies and yields a pod
 * the API server takes, with the variant in place (a dry run: shown as written). */
START_TEST(test_recorded_request_is_patched_for_the_target)
{
    char rel[256], why[300] = "";
    json_t *req, *patched;
    struct answer a;

    service_with(VARIANT_ROLLOUT("llm-to-inf2", "1.0"), true, true);
    snprintf(rel, sizeof(rel), ADM "%s/webhook-request.json", recorded[_i]);
    a = post_file(rel, &req);
    ck_assert_msg(a.patch != NULL, "%s: no patch", recorded[_i]);
    ck_assert_ptr_null(a.warnings);
    patched = af_test_jsonpatch_apply(obj_of(req), a.patch, why, sizeof(why));
    ck_assert_msg(patched != NULL, "%s: %s", recorded[_i], why);
    assert_target_pod(patched, "llm-to-inf2");
    /* Untouched: the labels, the other annotations, cpu and memory. */
    ck_assert(json_equal(json_object_get(json_object_get(patched, "metadata"), "labels"),
                         json_object_get(json_object_get(obj_of(req), "metadata"), "labels")));
    ck_assert_ptr_nonnull(annotation(patched, "accelfit.io/workload"));
    ck_assert(json_equal(
        json_object_get(json_object_get(json_object_get(container(patched, "containers", 0),
                                                        "resources"),
                                        "requests"),
                        "cpu"),
        json_object_get(json_object_get(json_object_get(container(obj_of(req), "containers", 0),
                                                        "resources"),
                                        "requests"),
                        "cpu")));
    json_decref(patched);
    answer_clear(&a);
    json_decref(req);
}
END_TEST

/* The patch for pod (a), op by op: only what must change, parents as they are, keys escaped. */
START_TEST(test_patch_is_minimal_and_escaped)
{
    json_t *req, *op;
    struct answer a;
    size_t i;
    bool removed_req = false, removed_lim = false, ann = false;

    service_with(VARIANT_ROLLOUT("llm-to-inf2", "1.0"), true, true);
    a = post_file(REQ_A, &req);
    ck_assert_ptr_nonnull(a.patch);
    json_array_foreach(a.patch, i, op) {
        const char *name = json_string_value(json_object_get(op, "op"));
        const char *path = json_string_value(json_object_get(op, "path"));
        if (!strcmp(path, "/spec/containers/0/resources/requests/nvidia.com~1gpu"))
            removed_req = !strcmp(name, "remove");
        if (!strcmp(path, "/spec/containers/0/resources/limits/nvidia.com~1gpu"))
            removed_lim = !strcmp(name, "remove");
        if (!strcmp(path, "/metadata/annotations/accelfit.io~1rollout-side"))
            ann = !strcmp(name, "add") &&
                  !strcmp(json_string_value(json_object_get(op, "value")), "target");
        /* MODEL_NAME exists (index 0): replaced in place, not appended a second time. */
        if (!strcmp(path, "/spec/containers/0/env/0"))
            ck_assert_str_eq(name, "replace");
        ck_assert_msg(strcmp(path, "/metadata/annotations") && strcmp(path, "/spec/tolerations"),
                      "%s replaces a parent that exists", path);
    }
    ck_assert(removed_req && removed_lim && ann);
    answer_clear(&a);
    json_decref(req);
}
END_TEST

/* generateName: no name until after admission; the pod still decodes, decides and patches. */
START_TEST(test_generatename_pod_is_patched)
{
    size_t len;
    char *body = af_test_read(REQ_E, &len), why[300];
    struct af_admission *adm = NULL;
    struct af_error err;
    json_t *req, *patched;
    struct answer a;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_codec_decode_admission(body, len, &adm, &err), 0);
    /* No name yet: rollout_state's anonymous unit (name ""), never the prefix. */
    ck_assert_str_eq(af_admission_generate_name(adm), "llm-infer-");
    ck_assert_str_eq(af_admission_pod(adm)->ns, "default");
    ck_assert_str_eq(af_admission_pod(adm)->name, "");
    ck_assert(af_admission_pod(adm)->managed);
    af_admission_free(adm);
    af_free(body);

    service_with(VARIANT_ROLLOUT("llm-to-inf2", "1.0"), true, true);
    a = post_file(REQ_E, &req);
    ck_assert_ptr_nonnull(a.patch);
    patched = af_test_jsonpatch_apply(obj_of(req), a.patch, why, sizeof(why));
    ck_assert_msg(patched != NULL, "%s", why);
    assert_target_pod(patched, "llm-to-inf2");
    ck_assert_ptr_null(json_object_get(json_object_get(patched, "metadata"), "name"));
    json_decref(patched);
    answer_clear(&a);
    json_decref(req);
}
END_TEST

/* The namespace comes from the request when the object has none. */
START_TEST(test_namespace_from_the_request)
{
    size_t len;
    char *text = af_test_read(REQ_A, &len), *body;
    json_t *req = json_loadb(text, len, 0, NULL);
    struct af_admission *adm = NULL;
    struct af_error err;

    json_object_set_new(json_object_get(req, "request"), "namespace", json_string("ml"));
    json_object_del(json_object_get(obj_of(req), "metadata"), "namespace");
    body = json_dumps(req, JSON_COMPACT);
    ck_assert_int_eq(af_codec_decode_admission(body, strlen(body), &adm, &err), 0);
    ck_assert_str_eq(af_admission_pod(adm)->ns, "ml");
    ck_assert_str_eq(af_admission_pod(adm)->name, "llm-infer");
    ck_assert_ptr_null(af_admission_generate_name(adm));
    ck_assert(af_admission_pod(adm)->managed);
    af_admission_free(adm);
    free(body);
    af_free(text);
    json_decref(req);
}
END_TEST

/* A second pod of the Job: the recorded pod with another name and uid. */
static char *job_mate(const char *name, const char *uid)
{
    size_t len;
    char *text = af_test_read(REQ_C, &len), *body, *out;
    json_t *req = json_loadb(text, len, 0, NULL);

    json_object_set_new(json_object_get(req, "request"), "uid", json_string(uid));
    json_object_set_new(json_object_get(req, "request"), "name", json_string(name));
    json_object_set_new(json_object_get(obj_of(req), "metadata"), "name", json_string(name));
    body = json_dumps(req, JSON_COMPACT);
    out = af_xstrdup(body);
    free(body);
    af_free(text);
    json_decref(req);
    return out;
}

/* All pods of one Job are one unit: at share 0.5 the first unit takes the source (ties
 * go to the source), and the Job's second pod must follow it, not be counted as a new
 * unit (which the share would send to the target). A different unit then takes the
 * target. */
START_TEST(test_job_pods_get_the_same_side)
{
    char *mate = job_mate("finetune-llama-9kq4z", "11111111-2222-4333-8444-555555555555");
    json_t *req;
    struct answer a;

    service_with(VARIANT_ROLLOUT("llm-to-inf2", "0.5"), true, true);
    a = post_file(REQ_C, &req);
    ck_assert_ptr_nonnull(a.patch);
    assert_annotations_only(req, a.patch, "llm-to-inf2", "source");
    answer_clear(&a);
    json_decref(req);

    a = post(mate, strlen(mate), "11111111-2222-4333-8444-555555555555");
    ck_assert_ptr_nonnull(a.patch);
    {
        size_t len;
        char *text = af_test_read(REQ_C, &len);
        req = json_loadb(text, len, 0, NULL);
        af_free(text);
    }
    assert_annotations_only(req, a.patch, "llm-to-inf2", "source");
    answer_clear(&a);
    json_decref(req);

    a = post_file(REQ_B, &req);   /* a Deployment replica: its own unit */
    ck_assert_ptr_nonnull(a.patch);
    {
        char why[300];
        json_t *patched = af_test_jsonpatch_apply(obj_of(req), a.patch, why, sizeof(why));
        ck_assert_msg(patched != NULL, "%s", why);
        assert_target_pod(patched, "llm-to-inf2");
        json_decref(patched);
    }
    answer_clear(&a);
    json_decref(req);
    af_free(mate);
}
END_TEST

/* The source side is annotated too (so the cache can count it), and nothing else. */
START_TEST(test_source_side_gets_only_annotations)
{
    json_t *req;
    struct answer a;

    service_with(VARIANT_ROLLOUT("llm-to-inf2", "0"), true, true);
    a = post_file(REQ_A, &req);
    ck_assert_ptr_nonnull(a.patch);
    ck_assert_ptr_null(a.warnings);
    assert_annotations_only(req, a.patch, "llm-to-inf2", "source");
    answer_clear(&a);
    json_decref(req);
}
END_TEST

/* A placement rollout (A10G to L4, the same pod): annotations only, also on the target. */
START_TEST(test_placement_rollout_gets_only_annotations)
{
    json_t *req;
    struct answer a;

    service_with("  - name: a10g-to-l4\n    selector: {namespace: default}\n"
                 "    source: [nvidia-a10g]\n    target: [nvidia-l4]\n    share: 1.0\n",
                 true, true);
    a = post_file(REQ_A, &req);
    ck_assert_ptr_nonnull(a.patch);
    assert_annotations_only(req, a.patch, "a10g-to-l4", "target");
    answer_clear(&a);
    json_decref(req);
}
END_TEST

/* A dry run (kubectl create --dry-run=server) is decided and patched like a create, and
 * nothing is remembered: at share 0.5 the next real unit is still the first one counted
 * (the source), and only the one after goes to the target. */
START_TEST(test_dry_run_is_decided_but_not_remembered)
{
    json_t *req, *patched;
    struct answer a;
    char why[300];

    service_with(VARIANT_ROLLOUT("llm-to-inf2", "0.5"), true, true);
    a = post_file(REQ_DRY, &req);
    ck_assert_ptr_nonnull(a.patch);
    assert_annotations_only(req, a.patch, "llm-to-inf2", "source");
    answer_clear(&a);
    json_decref(req);

    a = post_file(REQ_B, &req);
    ck_assert_ptr_nonnull(a.patch);
    assert_annotations_only(req, a.patch, "llm-to-inf2", "source");
    answer_clear(&a);
    json_decref(req);

    a = post_file(REQ_C, &req);
    ck_assert_ptr_nonnull(a.patch);
    patched = af_test_jsonpatch_apply(obj_of(req), a.patch, why, sizeof(why));
    ck_assert_msg(patched != NULL, "%s", why);
    ck_assert_str_eq(annotation(patched, "accelfit.io/rollout-side"), "target");
    assert_pod_valid(patched);
    json_decref(patched);
    answer_clear(&a);
    json_decref(req);
}
END_TEST

/* No target node has room for the rewritten pod (200 cpus): the unit falls back to the
 * source (fallback: source), annotated so, and a warning says why. */
START_TEST(test_target_without_room_falls_back_to_the_source)
{
    size_t len;
    char *body = af_test_read(REQ_A, &len), *at = strstr(body, "\"cpu\":\"4\"");
    char *big;
    json_t *req;
    struct answer a;

    ck_assert_ptr_nonnull(at);
    big = af_xasprintf("%.*s\"cpu\":\"200\"%s", (int)(at - body), body, at + 9);
    req = json_loads(big, 0, NULL);
    ck_assert_ptr_nonnull(req);
    service_with(VARIANT_ROLLOUT("llm-to-inf2", "1.0"), true, true);
    a = post(big, strlen(big), "258d26af-f1fc-4cef-a27c-15c950bf945b");
    ck_assert_ptr_nonnull(a.patch);
    ck_assert(warned(&a, "no target node has room"));
    assert_annotations_only(req, a.patch, "llm-to-inf2", "source");
    answer_clear(&a);
    json_decref(req);
    af_free(big);
    af_free(body);
}
END_TEST

/*
 * A pod whose nodeName, nodeSelector or required node affinity admits no inferentia2 node is
 * not rewritten into one that can never be scheduled: at share 1.0 its unit stays on the
 * source, counted with the fallbacks, and the warning says which constraint. Preferred
 * affinity and constraints an inf2 node meets leave it to the share (the target).
 */
static const struct {
    const char *key;      /* a field of the pod's spec */
    const char *json;     /* its value */
    const char *side;     /* the side the unit gets */
    const char *warn;     /* what a warning must say (NULL: no pinned warning) */
} pinned[] = {
    {"nodeSelector", "{\"node.kubernetes.io/instance-type\":\"g5.12xlarge\"}", "source",
     "nodeSelector node.kubernetes.io/instance-type=g5.12xlarge admits no inferentia2 node"},
    {"nodeSelector", "{\"node.kubernetes.io/instance-type\":\"inf2.24xlarge\"}", "target", NULL},
    {"affinity",
     "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":"
     "[{\"matchExpressions\":[{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":\"In\","
     "\"values\":[\"g5.12xlarge\",\"g6.12xlarge\"]}]}]}}}",
     "source", "required node affinity node.kubernetes.io/instance-type In g5.12xlarge,g6.12xlarge"},
    {"affinity",
     "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":"
     "[{\"matchExpressions\":[{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":\"In\","
     "\"values\":[\"g5.12xlarge\"]}]},{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":"
     "\"In\",\"values\":[\"inf2-b\"]}]}]}}}",
     "target", NULL},
    {"affinity",
     "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":"
     "[{\"matchExpressions\":[{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":"
     "\"NotIn\",\"values\":[\"inf2.24xlarge\"]}]}]}}}",
     "source", "admits no inferentia2 node"},
    {"affinity",
     "{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":100,"
     "\"preference\":{\"matchExpressions\":[{\"key\":\"node.kubernetes.io/instance-type\","
     "\"operator\":\"In\",\"values\":[\"g5.12xlarge\"]}]}}]}}",
     "target", NULL},
};

START_TEST(test_pinned_pod_stays_on_the_source)
{
    size_t len;
    char *text = af_test_read(REQ_A, &len), *body;
    json_t *req = json_loadb(text, len, 0, NULL), *patched;
    struct af_config *cfg;
    struct af_snapshot *snap;
    struct af_rollout_status st;
    struct answer a;
    char why[300];

    service_with(VARIANT_ROLLOUT("llm-to-inf2", "1.0"), true, true);
    json_object_set_new(json_object_get(obj_of(req), "spec"), pinned[_i].key,
                        json_loads(pinned[_i].json, 0, NULL));
    body = json_dumps(req, JSON_COMPACT);
    a = post(body, strlen(body), NULL);
    ck_assert_ptr_nonnull(a.patch);
    patched = af_test_jsonpatch_apply(obj_of(req), a.patch, why, sizeof(why));
    ck_assert_msg(patched != NULL, "%s", why);
    ck_assert_str_eq(annotation(patched, "accelfit.io/rollout-side"), pinned[_i].side);
    if (pinned[_i].warn) {
        ck_assert_msg(warned(&a, pinned[_i].warn), "no warning says '%s': %s", pinned[_i].warn,
                      json_dumps(a.warnings, 0));
        assert_annotations_only(req, a.patch, "llm-to-inf2", "source");
    } else {
        ck_assert(!warned(&a, "admits no"));
        assert_target_pod(patched, "llm-to-inf2");
    }
    cfg = af_config_holder_get(&holder);
    snap = af_publisher_acquire(&pub);
    af_rollouts_status(svc.rollouts, cfg, snap, af_wall_time(), 0, &st);
    ck_assert_int_eq((int)st.fallbacks, pinned[_i].warn ? 1 : 0);
    af_snapshot_unref(snap);
    af_config_unref(cfg);
    json_decref(patched);
    answer_clear(&a);
    free(body);
    json_decref(req);
    af_free(text);
}
END_TEST

/*
 * DRA pods through the webhook, on the mixed cluster of tests/fixtures/clusters (a DRA A100
 * node, a DRA trn2.48xlarge node with 16 Neuron devices, templates in namespace ml): a
 * rollout from A100 to Trainium2 whose variant swaps the pod's claim template. At share 1.0
 * a pod whose claim comes from one-a100 is rewritten to four-neurons; it stays on the source,
 * counted with the fallbacks, when the template it would get is not in the cluster, when the
 * target has no devices for it, and when its nodeSelector admits no trn2 node.
 */
static char *review_in(const char *ns, const char *pod);
static const char *claim_template(json_t *pod, size_t i);
static bool has_env(json_t *c, const char *name);

static const struct {
    const char *to;          /* the variant's target template */
    const char *selector;    /* the pod's nodeSelector value (instance type), or NULL */
    const char *side;
    const char *warn;        /* what a warning says; NULL: none expected */
} dra_rollout[] = {
    {"four-neurons", NULL, "target", NULL},
    {"eight-neurons", NULL, "source",
     "its claim gpu would be made from template ml/eight-neurons, which the cluster does not "
     "have"},
    {"thirty-two-neurons", NULL, "source", "no target node has room"},
    {"four-neurons", "p4d.24xlarge", "source", "admits no trainium2 node"},
};

/* A template of 32 Neuron devices: more than any node of the cluster has. */
static const char more_neurons[] =
    "- apiVersion: resource.k8s.io/v1\n"
    "  kind: ResourceClaimTemplate\n"
    "  metadata: {name: thirty-two-neurons, namespace: ml}\n"
    "  spec: {spec: {devices: {requests: [{name: neurons, exactly: {deviceClassName: "
    "neuron.aws.com, allocationMode: ExactCount, count: 32}}]}}}\n";

START_TEST(test_dra_pod_swaps_its_claim_template_when_it_can_run)
{
    size_t len;
    char *file = af_test_read("tests/fixtures/clusters/dra-mixed.yaml", &len);
    char *text = af_xasprintf("%s%s", file, more_neurons);
    char *rollout = af_xasprintf("  - name: a100-to-trn2\n"
                                 "    selector: {namespace: ml}\n"
                                 "    source: [nvidia-a100]\n"
                                 "    target: [trainium2]\n"
                                 "    share: 1.0\n"
                                 "    variant:\n"
                                 "      claimTemplates: {one-a100: %s}\n"
                                 "      env: {NEURON_RT_VISIBLE_CORES: \"0-7\"}\n",
                                 dra_rollout[_i].to);
    char *sel = dra_rollout[_i].selector
                    ? af_xasprintf(",\"nodeSelector\":{\"node.kubernetes.io/instance-type\":"
                                   "\"%s\"}",
                                   dra_rollout[_i].selector)
                    : af_xstrdup("");
    char *pod = af_xasprintf(
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"infer-0\","
        "\"namespace\":\"ml\",\"labels\":{\"accelfit.io/managed\":\"true\"}},\"spec\":{"
        "\"containers\":[{\"name\":\"server\",\"image\":\"llm:cuda\",\"resources\":{"
        "\"requests\":{\"cpu\":\"4\"},\"claims\":[{\"name\":\"gpu\"}]}}],\"resourceClaims\":[{"
        "\"name\":\"gpu\",\"resourceClaimTemplateName\":\"one-a100\"}]%s}}",
        sel);
    char *body = review_in("ml", pod), why[300];
    json_t *obj = json_loads(pod, 0, NULL), *patched;
    struct af_config *cfg;
    struct af_snapshot *snap;
    struct af_rollout_status st;
    struct answer a;
    bool target = !strcmp(dra_rollout[_i].side, "target");

    cluster_text = text;
    service_with(rollout, true, true);
    a = post(body, strlen(body), "u-1");
    ck_assert_ptr_nonnull(a.patch);
    patched = af_test_jsonpatch_apply(obj, a.patch, why, sizeof(why));
    ck_assert_msg(patched != NULL, "%s", why);
    assert_pod_valid(patched);
    ck_assert_str_eq(annotation(patched, "accelfit.io/rollout-side"), dra_rollout[_i].side);
    ck_assert_str_eq(claim_template(patched, 0), target ? dra_rollout[_i].to : "one-a100");
    ck_assert(has_env(container(patched, "containers", 0), "NEURON_RT_VISIBLE_CORES") == target);
    if (dra_rollout[_i].warn)
        ck_assert_msg(warned(&a, dra_rollout[_i].warn), "no warning says '%s': %s",
                      dra_rollout[_i].warn, json_dumps(a.warnings, 0));
    else
        ck_assert_ptr_null(a.warnings);
    cfg = af_config_holder_get(&holder);
    snap = af_publisher_acquire(&pub);
    af_rollouts_status(svc.rollouts, cfg, snap, af_wall_time(), 0, &st);
    ck_assert_int_eq((int)st.fallbacks, target ? 0 : 1);
    af_snapshot_unref(snap);
    af_config_unref(cfg);
    json_decref(patched);
    json_decref(obj);
    answer_clear(&a);
    af_free(body);
    af_free(pod);
    af_free(sel);
    af_free(rollout);
    af_free(text);
    af_free(file);
}
END_TEST

static void nobody(void *ud)
{
    (void)ud;
}

/*
 * A replica whose rollout state is shared but not read yet (a restart: the state object holds
 * the stage) is not ready for the webhook: /readyz answers 503 saying so, and a review is
 * allowed unchanged with a warning rather than decided as a rollout just begun would. Once
 * read (or AF_ROLLOUT_STATE_READ_GRACE_S later) it is ready and decides.
 */
START_TEST(test_unread_rollout_state_is_not_ready)
{
    struct af_buf out = AF_BUF_INIT(1u << 16);
    json_t *req;
    struct answer a;

    service_with(VARIANT_ROLLOUT("llm-to-inf2", "1.0"), true, true);
    af_rollouts_set_observer(svc.rollouts, nobody, NULL);
    ck_assert_int_eq(af_service_readyz(&svc, &out), 503);
    ck_assert_msg(strstr(out.buf, "rollout state not read yet"), "%s", out.buf);
    a = post_file(REQ_A, &req);
    ck_assert_ptr_null(a.patch);
    ck_assert(warned(&a, "not applied: rollout state not read yet"));
    answer_clear(&a);
    json_decref(req);
    ck_assert(!af_rollouts_state_unread(svc.rollouts,
                                        af_wall_time() + AF_ROLLOUT_STATE_READ_GRACE_S + 1));

    af_rollouts_absorb(svc.rollouts, NULL, 0);   /* read: no object yet */
    af_buf_reset(&out);
    ck_assert_int_eq(af_service_readyz(&svc, &out), 200);
    a = post_file(REQ_A, &req);
    ck_assert_ptr_nonnull(a.patch);
    ck_assert(!warned(&a, "not read"));
    answer_clear(&a);
    json_decref(req);
    af_buf_release(&out);
}
END_TEST

/* ---- allowed, unchanged ---------------------------------------------------------------------- */

enum unchanged_case { NO_MATCH, NO_ROLLOUTS, NO_STATE, NOT_SYNCED, UNMANAGED };

/* Each answered allowed with no patch; `warn` is what a warning must say (NULL: none). */
static const struct {
    enum unchanged_case c;
    const char *warn;
} unchanged[] = {
    {NO_MATCH, NULL},
    {NO_ROLLOUTS, NULL},
    {NO_STATE, "no rollout state"},
    {NOT_SYNCED, "not applied"},
    {UNMANAGED, NULL},
};

START_TEST(test_undecided_pod_is_allowed_unchanged)
{
    size_t len;
    char *body = af_test_read(REQ_A, &len);
    struct answer a;

    switch (unchanged[_i].c) {
    case NO_MATCH:
        service_with("  - name: ml-only\n    selector: {namespace: ml}\n"
                     "    source: [nvidia-a10g]\n    target: [nvidia-l4]\n    share: 1.0\n",
                     true, true);
        break;
    case NO_ROLLOUTS:
        service_with(NULL, true, true);
        break;
    case NO_STATE:
        service_with(VARIANT_ROLLOUT("llm-to-inf2", "1.0"), true, false);
        break;
    case NOT_SYNCED:
        service_with(VARIANT_ROLLOUT("llm-to-inf2", "1.0"), false, true);
        break;
    case UNMANAGED: {
        /* The objectSelector keeps such pods away; if one comes anyway, it is left alone. */
        static const char label[] = "\"accelfit.io/managed\":\"true\",";
        char *at = strstr(body, label);
        ck_assert_ptr_nonnull(at);
        memmove(at, at + strlen(label), strlen(at + strlen(label)) + 1);
        len -= strlen(label);
        service_with(VARIANT_ROLLOUT("llm-to-inf2", "1.0"), true, true);
        break;
    }
    }
    a = post(body, len, NULL);
    ck_assert_int_eq(a.status, 200);
    ck_assert_ptr_null(a.patch);
    if (unchanged[_i].warn)
        ck_assert_msg(warned(&a, unchanged[_i].warn), "no warning saying '%s'",
                      unchanged[_i].warn);
    else
        ck_assert_ptr_null(a.warnings);
    answer_clear(&a);
    af_free(body);
}
END_TEST

/* Two rollouts take the pod (the loader refuses that; a hand-made policy can): the first
 * applies, and a warning names both. */
START_TEST(test_two_rollouts_first_wins_with_a_warning)
{
    struct af_policy *p;
    json_t *req, *patched;
    struct answer a;
    char why[300];

    service_with("  - name: first\n    selector: {namespace: default, matchLabels: "
                 "{app.kubernetes.io/name: llm-infer}}\n    source: [nvidia-a10g, nvidia-l4]\n"
                 "    target: [inferentia2]\n    share: 1.0\n    variant:\n"
                 "      images: {\"*\": \"" NEURON_IMAGE "\"}\n"
                 "      resources: {aws.amazon.com/neuron: 1}\n"
                 "      env: {NEURON_RT_NUM_CORES: \"2\", MODEL_NAME: llama-2-7b-neuron}\n"
                 "      tolerations: [{key: aws.amazon.com/neuron, operator: Exists, effect: "
                 "NoSchedule}]\n"
                 "      annotations: {accelfit.io/neuron-ready: \"true\"}\n"
                 "  - name: second\n    selector: {namespace: default, matchLabels: "
                 "{app.kubernetes.io/name: other}}\n    source: [nvidia-a10g]\n"
                 "    target: [nvidia-l4]\n    share: 1.0\n",
                 true, true);
    p = policy();
    ck_assert_uint_eq(p->n_rollouts, 2);
    af_free(p->rollouts[1].match_labels[0].value);
    p->rollouts[1].match_labels[0].value = af_xstrdup("llm-infer");
    a = post_file(REQ_A, &req);
    ck_assert_ptr_nonnull(a.patch);
    ck_assert(warned(&a, "first and second"));
    patched = af_test_jsonpatch_apply(obj_of(req), a.patch, why, sizeof(why));
    ck_assert_msg(patched != NULL, "%s", why);
    assert_target_pod(patched, "first");
    json_decref(patched);
    answer_clear(&a);
    json_decref(req);
}
END_TEST

/* A variant the codec cannot apply safely: created as written, and a warning says why. */
enum bad_variant { UNKNOWN_RESOURCE, NOT_A_NUMBER, MISSING_CONTAINER, CPU_SOURCE };
static const struct {
    enum bad_variant c;
    const char *warn;
} bad_variants[] = {
    {UNKNOWN_RESOURCE, "example.com/fpga"},
    {NOT_A_NUMBER, "whole number"},
    {MISSING_CONTAINER, "'trainer'"},
    {CPU_SOURCE, "source"},
};

START_TEST(test_bad_variant_allows_unchanged)
{
    struct af_variant *v;
    struct af_policy *p;
    json_t *req;
    struct answer a;

    service_with(VARIANT_ROLLOUT("llm-to-inf2", "1.0"), true, true);
    p = policy();
    v = p->rollouts[0].variant;
    switch (bad_variants[_i].c) {
    case UNKNOWN_RESOURCE:
        af_free(v->resources[0].key);
        v->resources[0].key = af_xstrdup("example.com/fpga");
        break;
    case NOT_A_NUMBER:
        af_free(v->resources[0].value);
        v->resources[0].value = af_xstrdup("1.5");
        break;
    case MISSING_CONTAINER:
        af_free(v->images[0].key);
        v->images[0].key = af_xstrdup("trainer");
        break;
    case CPU_SOURCE:
        /* Sources whose pods request no accelerator: nothing for the variant to replace. */
        p->rollouts[0].source = 1u << AF_CLASS_CPU;
        break;
    }
    a = post_file(REQ_A, &req);
    ck_assert_ptr_null(a.patch);
    ck_assert_msg(warned(&a, bad_variants[_i].warn), "no warning saying '%s'",
                  bad_variants[_i].warn);
    ck_assert(warned(&a, "created as written"));
    answer_clear(&a);
    json_decref(req);
}
END_TEST

/*
 * A pod of 1,000 containers: its rewrite for the target would be a patch over the
 * 512 KiB limit. The pod is created as written, and the answer says why in its warnings
 * (it used to say nothing, and the log "why" was empty).
 */
START_TEST(test_a_patch_over_the_limit_is_said_not_dropped)
{
    size_t len;
    char *text = af_test_read(REQ_A, &len), *body;
    json_t *req = json_loadb(text, len, 0, NULL), *cs, *c0;
    struct answer a;

    ck_assert_ptr_nonnull(req);
    cs = json_object_get(json_object_get(obj_of(req), "spec"), "containers");
    c0 = json_deep_copy(json_array_get(cs, 0));
    json_array_clear(cs);
    for (int i = 0; i < 1000; i++) {
        json_t *c = json_deep_copy(c0);
        char name[32];
        snprintf(name, sizeof(name), "c%d", i);
        json_object_set_new(c, "name", json_string(name));
        json_array_append_new(cs, c);
    }
    json_decref(c0);
    body = json_dumps(req, JSON_COMPACT);
    service_with(VARIANT_ROLLOUT("llm-to-inf2", "1.0"), true, true);
    a = post(body, strlen(body), NULL);
    ck_assert_ptr_null(a.patch);
    ck_assert_msg(warned(&a, "would exceed 512 KiB, the limit of a patch") &&
                      warned(&a, "created as written"),
                  "no warning says why: %s", json_dumps(a.warnings, 0));
    answer_clear(&a);
    free(body);   /* jansson's */
    json_decref(req);
    af_free(text);
}
END_TEST

/* ---- the codec on pods the recordings do not have -------------------------------------------- */

static struct af_variant test_variant;
static struct af_pair tv_images[] = {{(char *)"*", (char *)NEURON_IMAGE}};
static struct af_pair tv_res[] = {{(char *)"aws.amazon.com/neuron", (char *)"2"}};
static struct af_pair tv_env[] = {{(char *)"NEURON_RT_NUM_CORES", (char *)"4"}};
static struct af_toleration tv_tol[] = {
    {(char *)"aws.amazon.com/neuron", (char *)"Exists", NULL, (char *)"NoSchedule"}};
static struct af_pair tv_ann[] = {{(char *)"example.com/team", (char *)"ml"}};

static const struct af_variant *variant(void)
{
    test_variant.images = tv_images;
    test_variant.n_images = 1;
    test_variant.resources = tv_res;
    test_variant.n_resources = 1;
    test_variant.env = tv_env;
    test_variant.n_env = 1;
    test_variant.tolerations = tv_tol;
    test_variant.n_tolerations = 1;
    test_variant.annotations = tv_ann;
    test_variant.n_annotations = 1;
    return &test_variant;
}

static char *review_in(const char *ns, const char *pod);

static char *review(const char *pod)
{
    return review_in("ml", pod);
}

/* The same in namespace `ns`. */
static char *review_in(const char *ns, const char *pod)
{
    return af_xasprintf("{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\","
                        "\"request\":{\"uid\":\"u-1\",\"kind\":{\"group\":\"\",\"version\":\"v1\","
                        "\"kind\":\"Pod\"},\"resource\":{\"group\":\"\",\"version\":\"v1\","
                        "\"resource\":\"pods\"},\"namespace\":\"%s\",\"operation\":\"CREATE\","
                        "\"object\":%s,\"oldObject\":null,\"dryRun\":false}}\n",
                        ns, pod);
}

/*
 * Patches `pod` for the target with the test variant from A10G, applies the patch with
 * the test's own apply, and returns the result (NULL when the codec refused: `warn` then
 * holds its warning).
 */
static struct af_resources patched_requests;

static json_t *patch_pod_with(const char *pod, const struct af_variant *v, uint32_t source,
                              char *warn, size_t wlen);

static json_t *patch_pod(const char *pod, uint32_t source, char *warn, size_t wlen)
{
    return patch_pod_with(pod, variant(), source, warn, wlen);
}

/* The same with variant `v` (its annotations must hold example.com/team: ml). */
static json_t *patch_pod_with(const char *pod, const struct af_variant *v, uint32_t source,
                              char *warn, size_t wlen)
{
    char *body = review(pod);
    struct af_admission *adm = NULL;
    struct af_error err;
    struct af_buf patch = AF_BUF_INIT(1u << 20);
    struct af_warnings w;
    struct af_mutation m = {"r1", AF_SIDE_TARGET, v, source, NULL};
    json_t *obj, *ops, *out = NULL;
    char why[300] = "";
    int rc;

    memset(&w, 0, sizeof(w));
    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_codec_decode_admission(body, strlen(body), &adm, &err) == 0, "%s", err.text);
    memset(&patched_requests, 0, sizeof(patched_requests));
    rc = af_codec_admission_patch(adm, &m, &patch, &patched_requests, &w);
    snprintf(warn, wlen, "%s", w.n ? w.text[0] : "");
    if (rc) {
        ck_assert_int_eq(rc, AF_EINVAL);
        ck_assert_uint_eq(patch.len, 0);
        ck_assert_uint_gt(w.n, 0);
    } else {
        obj = json_loads(pod, 0, NULL);
        ops = json_loadb(patch.buf, patch.len, 0, NULL);
        ck_assert(json_is_array(ops));
        out = af_test_jsonpatch_apply(obj, ops, why, sizeof(why));
        ck_assert_msg(out != NULL, "%s: %s", why, patch.buf);
        assert_pod_valid(out);
        ck_assert_str_eq(annotation(out, "accelfit.io/rollout"), "r1");
        ck_assert_str_eq(annotation(out, "accelfit.io/rollout-side"), "target");
        ck_assert_str_eq(annotation(out, "example.com/team"), "ml");
        json_decref(obj);
        json_decref(ops);
    }
    af_buf_release(&patch);
    af_admission_free(adm);
    af_free(body);
    return out;
}

#define A10G (1u << AF_CLASS_NVIDIA_A10G)
#define INF1 (1u << AF_CLASS_INFERENTIA1)

static const char *res_of(json_t *c, const char *map, const char *key)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(c, "resources"), map), key));
}

/* No annotations, no limits map, no env, no tolerations: each parent created whole. */
START_TEST(test_missing_parents_are_created)
{
    char warn[AF_WARNING_LEN];
    json_t *out = patch_pod(
        "{\"metadata\":{\"name\":\"p\",\"labels\":{\"accelfit.io/managed\":\"true\"}},\"spec\":{"
        "\"containers\":[{\"name\":\"c\",\"image\":\"cuda\",\"resources\":{\"requests\":{"
        "\"nvidia.com/gpu\":\"1\"}}}]}}",
        A10G, warn, sizeof(warn));
    json_t *c;

    ck_assert_ptr_nonnull(out);
    c = container(out, "containers", 0);
    ck_assert_str_eq(json_string_value(json_object_get(c, "image")), NEURON_IMAGE);
    ck_assert_str_eq(res_of(c, "requests", "aws.amazon.com/neuron"), "2");
    ck_assert_str_eq(res_of(c, "limits", "aws.amazon.com/neuron"), "2");
    ck_assert_ptr_null(res_of(c, "requests", "nvidia.com/gpu"));
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(c, "env"), 0), "value")),
                     "4");
    ck_assert_uint_eq(json_array_size(json_object_get(json_object_get(out, "spec"), "tolerations")),
                      1);
    /* What the target must have room for: the rewritten pod's requests. */
    ck_assert_int_eq(patched_requests.v[AF_RES_NEURON], 2);
    ck_assert_int_eq(patched_requests.v[AF_RES_GPU], 0);
    json_decref(out);
}
END_TEST

/* Init containers: one that requests a GPU is rewritten (and takes the "*" image); one that
 * does not (a model download) keeps its image; a sidecar app container takes "*". MIG and
 * shared GPUs count as the source's accelerator too. */
START_TEST(test_init_containers_and_every_gpu_resource)
{
    char warn[AF_WARNING_LEN];
    json_t *out = patch_pod(
        "{\"metadata\":{\"name\":\"p\",\"labels\":{\"accelfit.io/managed\":\"true\"},"
        "\"annotations\":{\"x\":\"y\"}},\"spec\":{\"initContainers\":["
        "{\"name\":\"fetch\",\"image\":\"aws-cli\"},"
        "{\"name\":\"warm\",\"image\":\"cuda\",\"resources\":{\"limits\":{"
        "\"nvidia.com/mig-1g.5gb\":\"1\"},\"requests\":{\"nvidia.com/mig-1g.5gb\":\"1\"}}}],"
        "\"containers\":[{\"name\":\"main\",\"image\":\"cuda\",\"env\":[{\"name\":"
        "\"NEURON_RT_NUM_CORES\",\"valueFrom\":{\"fieldRef\":{\"fieldPath\":\"x\"}}}],"
        "\"resources\":{\"requests\":{\"cpu\":\"2\",\"nvidia.com/gpu\":\"1\","
        "\"nvidia.com/gpu.shared\":\"1\"},\"limits\":{\"nvidia.com/gpu\":\"1\","
        "\"nvidia.com/gpu.shared\":\"1\"}}},{\"name\":\"side\",\"image\":\"envoy\"}],"
        "\"tolerations\":[{\"key\":\"aws.amazon.com/neuron\",\"operator\":\"Exists\","
        "\"effect\":\"NoSchedule\"}]}}",
        A10G, warn, sizeof(warn));
    json_t *c;

    ck_assert_ptr_nonnull(out);
    c = container(out, "initContainers", 0);
    ck_assert_str_eq(json_string_value(json_object_get(c, "image")), "aws-cli");
    ck_assert_ptr_null(json_object_get(c, "resources"));
    c = container(out, "initContainers", 1);
    ck_assert_str_eq(json_string_value(json_object_get(c, "image")), NEURON_IMAGE);
    ck_assert_ptr_null(res_of(c, "requests", "nvidia.com/mig-1g.5gb"));
    ck_assert_str_eq(res_of(c, "limits", "aws.amazon.com/neuron"), "2");
    c = container(out, "containers", 0);
    ck_assert_str_eq(res_of(c, "requests", "cpu"), "2");
    ck_assert_ptr_null(res_of(c, "limits", "nvidia.com/gpu.shared"));
    ck_assert_str_eq(res_of(c, "requests", "aws.amazon.com/neuron"), "2");
    /* valueFrom replaced by the value */
    ck_assert_uint_eq(json_array_size(json_object_get(c, "env")), 1);
    ck_assert_ptr_null(json_object_get(json_array_get(json_object_get(c, "env"), 0), "valueFrom"));
    c = container(out, "containers", 1);
    ck_assert_str_eq(json_string_value(json_object_get(c, "image")), NEURON_IMAGE);
    ck_assert_ptr_null(json_object_get(c, "env"));
    /* the toleration was there: not added twice */
    ck_assert_uint_eq(json_array_size(json_object_get(json_object_get(out, "spec"), "tolerations")),
                      1);
    ck_assert_str_eq(annotation(out, "x"), "y");
    /* effective requests: the app container's 2 devices (an init container's 2 run before) */
    ck_assert_int_eq(patched_requests.v[AF_RES_NEURON], 2);
    ck_assert_int_eq(patched_requests.v[AF_RES_GPU] + patched_requests.v[AF_RES_MIG] +
                         patched_requests.v[AF_RES_GPU_SHARED],
                     0);
    json_decref(out);
}
END_TEST

/* inf1 to inf2 (Neuron to Neuron): aws.amazon.com/neuron stays a key, with the new amount,
 * and aws.amazon.com/neuroncore (the source's too) goes. */
START_TEST(test_same_resource_key_is_replaced)
{
    char warn[AF_WARNING_LEN];
    json_t *out = patch_pod(
        "{\"metadata\":{\"name\":\"p\",\"labels\":{\"accelfit.io/managed\":\"true\"}},\"spec\":{"
        "\"containers\":[{\"name\":\"c\",\"image\":\"neuron1\",\"resources\":{\"requests\":{"
        "\"aws.amazon.com/neuron\":\"1\",\"aws.amazon.com/neuroncore\":\"4\"},\"limits\":{"
        "\"aws.amazon.com/neuron\":\"1\",\"aws.amazon.com/neuroncore\":\"4\"}}}]}}",
        INF1, warn, sizeof(warn));
    json_t *c;

    ck_assert_msg(out != NULL, "%s", warn);
    c = container(out, "containers", 0);
    ck_assert_str_eq(res_of(c, "requests", "aws.amazon.com/neuron"), "2");
    ck_assert_str_eq(res_of(c, "limits", "aws.amazon.com/neuron"), "2");
    ck_assert_ptr_null(res_of(c, "limits", "aws.amazon.com/neuroncore"));
    json_decref(out);
}
END_TEST

/* A pod that requests no accelerator of the source: not rewritten (nothing would make it
 * run on the target), and the warning says so. A nodeSelector kept is warned about. */
START_TEST(test_pod_without_a_source_accelerator_is_refused)
{
    char warn[AF_WARNING_LEN];
    json_t *out = patch_pod(
        "{\"metadata\":{\"name\":\"p\",\"labels\":{\"accelfit.io/managed\":\"true\"}},\"spec\":{"
        "\"containers\":[{\"name\":\"c\",\"image\":\"x\",\"resources\":{\"requests\":{"
        "\"cpu\":\"1\",\"nvidia.com/gpu\":\"0\"}}}]}}",
        A10G, warn, sizeof(warn));

    ck_assert_ptr_null(out);
    ck_assert_ptr_nonnull(strstr(warn, "no container requests an accelerator"));
}
END_TEST

/* A pod bound at creation (spec.nodeName) cannot move to a target node: not rewritten. */
START_TEST(test_pod_with_a_node_name_is_refused)
{
    char warn[AF_WARNING_LEN];
    json_t *out = patch_pod(
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeName\":\"g5-a\",\"containers\":[{"
        "\"name\":\"c\",\"image\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"},"
        "\"requests\":{\"nvidia.com/gpu\":\"1\"}}}]}}",
        A10G, warn, sizeof(warn));

    ck_assert_ptr_null(out);
    ck_assert_ptr_nonnull(strstr(warn, "spec.nodeName"));
}
END_TEST

START_TEST(test_node_selector_kept_is_warned)
{
    char *body = review(
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"nodeSelector\":{"
        "\"node.kubernetes.io/instance-type\":\"g5.xlarge\"},\"containers\":[{\"name\":\"c\","
        "\"image\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"},\"requests\":{"
        "\"nvidia.com/gpu\":\"1\"}}}]}}");
    struct af_admission *adm = NULL;
    struct af_error err;
    struct af_buf patch = AF_BUF_INIT(1u << 20);
    struct af_warnings w;
    struct af_mutation m = {"r1", AF_SIDE_TARGET, variant(), A10G, NULL};

    memset(&w, 0, sizeof(w));
    ck_assert_int_eq(af_codec_decode_admission(body, strlen(body), &adm, &err), 0);
    ck_assert_int_eq(af_codec_admission_patch(adm, &m, &patch, NULL, &w), 0);
    ck_assert_uint_gt(patch.len, 0);
    ck_assert_uint_eq(w.n, 1);
    ck_assert_ptr_nonnull(strstr(w.text[0], "nodeSelector"));
    af_buf_release(&patch);
    af_admission_free(adm);
    af_free(body);
}
END_TEST

/* ---- DRA: a variant that swaps the claim template ------------------------------------------- */

static struct af_variant claims_variant;
static struct af_pair cv_templates[] = {{(char *)"one-a100", (char *)"four-neurons"}};

/* The test variant with claim templates: without its resources (`res` false) or with them. */
static const struct af_variant *variant_claims(bool res)
{
    claims_variant = *variant();
    claims_variant.claim_templates = cv_templates;
    claims_variant.n_claim_templates = 1;
    if (!res) {
        claims_variant.resources = NULL;
        claims_variant.n_resources = 0;
    }
    return &claims_variant;
}

#define A100 (1u << AF_CLASS_NVIDIA_A100)

static const char *claim_template(json_t *pod, size_t i)
{
    json_t *c = json_array_get(json_object_get(json_object_get(pod, "spec"), "resourceClaims"), i);
    json_t *src = json_object_get(c, "source");

    return json_string_value(json_object_get(json_is_object(src) ? src : c,
                                             "resourceClaimTemplateName"));
}

static bool has_env(json_t *c, const char *name)
{
    size_t i;
    json_t *e;

    json_array_foreach(json_object_get(c, "env"), i, e) {
        if (!strcmp(json_string_value(json_object_get(e, "name")), name))
            return true;
    }
    return false;
}

/*
 * A claim pod, as 1.34 writes it (resourceClaimTemplateName) and as 1.26 keeps it (under
 * source:): its claim made from one-a100 is made from four-neurons instead, its other claim
 * (a named one) stays; the container that names the swapped claim gets the variant's env
 * and keeps its resources (the claim holds its devices: no Neuron extended resource is
 * added); a container that names no claim gets no env.
 */
static const char *const claim_shapes[] = {
    "{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"one-a100\"}",
    "{\"name\":\"gpu\",\"source\":{\"resourceClaimTemplateName\":\"one-a100\"}}",
};

START_TEST(test_claim_template_is_swapped_for_the_target)
{
    char warn[AF_WARNING_LEN];
    char *pod = af_xasprintf(
        "{\"metadata\":{\"name\":\"p\",\"labels\":{\"accelfit.io/managed\":\"true\"}},"
        "\"spec\":{\"containers\":[{\"name\":\"server\",\"image\":\"cuda\",\"resources\":{"
        "\"requests\":{\"cpu\":\"4\"},\"claims\":[{\"name\":\"gpu\"}]}},{\"name\":\"proxy\","
        "\"image\":\"envoy\"}],\"resourceClaims\":[%s,{\"name\":\"shared\","
        "\"resourceClaimName\":\"shared-gpu\"}]}}",
        claim_shapes[_i]);
    json_t *out = patch_pod_with(pod, variant_claims(false), A100, warn, sizeof(warn));
    json_t *server, *proxy;

    ck_assert_msg(out != NULL, "refused: %s", warn);
    ck_assert_str_eq(claim_template(out, 0), "four-neurons");
    ck_assert_ptr_null(claim_template(out, 1));
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(
                         json_object_get(out, "spec"), "resourceClaims"), 1),
                         "resourceClaimName")),
                     "shared-gpu");
    server = container(out, "containers", 0);
    proxy = container(out, "containers", 1);
    ck_assert(has_env(server, "NEURON_RT_NUM_CORES"));
    ck_assert(!has_env(proxy, "NEURON_RT_NUM_CORES"));
    ck_assert_ptr_null(res_of(server, "requests", "aws.amazon.com/neuron"));
    ck_assert_ptr_null(json_object_get(json_object_get(server, "resources"), "limits"));
    ck_assert_str_eq(json_string_value(json_object_get(server, "image")), NEURON_IMAGE);
    ck_assert_uint_eq(json_array_size(json_object_get(json_object_get(out, "spec"), "tolerations")),
                      1);
    ck_assert_int_eq(patched_requests.v[AF_RES_NEURON], 0);
    ck_assert_int_eq(patched_requests.v[AF_RES_CPU], 4000);
    json_decref(out);
    af_free(pod);
}
END_TEST

/*
 * What a claim-template variant is not applied to: a pod whose claims come from another
 * template, or a device-plugin pod (a variant without resources has nothing to put in place
 * of nvidia.com/gpu). A variant with both swaps both in a pod that has both.
 */
START_TEST(test_claim_template_variant_needs_a_claim_it_swaps)
{
    char warn[AF_WARNING_LEN];
    json_t *out;

    out = patch_pod_with(
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\","
        "\"image\":\"x\",\"resources\":{\"claims\":[{\"name\":\"gpu\"}]}}],\"resourceClaims\":"
        "[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"two-gpus\"}]}}",
        variant_claims(false), A100, warn, sizeof(warn));
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(warn, "no claim of the pod is made from a template the variant swaps"),
                  "%s", warn);
    out = patch_pod_with(
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\","
        "\"image\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"},\"requests\":{"
        "\"nvidia.com/gpu\":\"1\"}}}]}}",
        variant_claims(false), A100, warn, sizeof(warn));
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(warn, "nothing for the variant to replace"), "%s", warn);
    out = patch_pod_with(
        "{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"name\":\"c\","
        "\"image\":\"x\",\"resources\":{\"limits\":{\"nvidia.com/gpu\":\"1\"},\"requests\":{"
        "\"nvidia.com/gpu\":\"1\"}}},{\"name\":\"d\",\"image\":\"x\",\"resources\":{"
        "\"claims\":[{\"name\":\"gpu\"}]}}],\"resourceClaims\":[{\"name\":\"gpu\","
        "\"resourceClaimTemplateName\":\"one-a100\"}]}}",
        variant_claims(true), A100, warn, sizeof(warn));
    ck_assert_msg(out != NULL, "refused: %s", warn);
    ck_assert_str_eq(res_of(container(out, "containers", 0), "limits", "aws.amazon.com/neuron"),
                     "2");
    ck_assert_ptr_null(res_of(container(out, "containers", 1), "limits", "aws.amazon.com/neuron"));
    ck_assert_str_eq(claim_template(out, 0), "four-neurons");
    json_decref(out);
}
END_TEST

/* Annotations already as they should be: nothing to patch, no patch sent. */
START_TEST(test_nothing_to_change_sends_no_patch)
{
    char *body = review("{\"metadata\":{\"name\":\"p\",\"annotations\":{"
                        "\"accelfit.io/rollout\":\"r1\",\"accelfit.io/rollout-side\":\"source\"}},"
                        "\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\"}]}}");
    struct af_admission *adm = NULL;
    struct af_error err;
    struct af_buf patch = AF_BUF_INIT(1u << 20), out = AF_BUF_INIT(1u << 20);
    struct af_warnings w;
    struct af_mutation m = {"r1", AF_SIDE_SOURCE, NULL, A10G, NULL};

    memset(&w, 0, sizeof(w));
    ck_assert_int_eq(af_codec_decode_admission(body, strlen(body), &adm, &err), 0);
    ck_assert_int_eq(af_codec_admission_patch(adm, &m, &patch, NULL, &w), 0);
    ck_assert_uint_eq(patch.len, 0);
    ck_assert_int_eq(af_codec_encode_admission("u-1", patch.buf, patch.len, &w, &out), 0);
    ck_assert_str_eq(out.buf, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":"
                              "\"AdmissionReview\",\"response\":{\"uid\":\"u-1\","
                              "\"allowed\":true}}");
    af_buf_release(&out);
    af_buf_release(&patch);
    af_admission_free(adm);
    af_free(body);
}
END_TEST

/* ---- bad input: a clear 400, or allowed unchanged; never a crash ----------------------------- */

#define POD_OK                                                                                     \
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\",\"labels\":{\"accelfit.io/managed\":" \
    "\"true\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"image\":\"x\",\"resources\":{"         \
    "\"requests\":{\"nvidia.com/gpu\":\"1\"},\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]}}"
#define REVIEW(req)                                                                                \
    "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\",\"request\":" req "}"
#define KIND_POD "\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"}"
#define RES_PODS "\"resource\":{\"group\":\"\",\"version\":\"v1\",\"resource\":\"pods\"}"

static const struct {
    const char *name;
    const char *body;
    int status;            /* 400, or 200 allowed unchanged */
    const char *says;      /* in the error, or a warning */
} bad[] = {
    {"empty", "", 400, "not JSON"},
    {"not JSON", "this is not json\n", 400, "not JSON"},
    {"array", "[]", 400, "expected an object"},
    {"ExtenderArgs", "{\"Pod\":" POD_OK ",\"Nodes\":null,\"NodeNames\":[\"a\"]}", 400,
     "AdmissionReview"},
    {"no apiVersion", "{\"kind\":\"AdmissionReview\",\"request\":{}}", 400, "apiVersion"},
    {"v1beta1",
     "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1beta1\",\"request\":{"
     "\"uid\":\"u\"}}",
     400, "admission.k8s.io/v1"},
    {"no request", "{\"kind\":\"AdmissionReview\",\"apiVersion\":\"admission.k8s.io/v1\"}", 400,
     "request"},
    {"no uid", REVIEW("{" KIND_POD "," RES_PODS ",\"operation\":\"CREATE\",\"object\":" POD_OK "}"),
     400, "request.uid"},
    {"uid not a string", REVIEW("{\"uid\":7," KIND_POD "," RES_PODS ",\"operation\":\"CREATE\","
                                "\"object\":" POD_OK "}"),
     400, "request.uid"},
    {"NUL in uid", REVIEW("{\"uid\":\"a\\u0000b\"," KIND_POD "," RES_PODS ",\"operation\":"
                          "\"CREATE\",\"object\":" POD_OK "}"),
     400, "NUL"},
    {"object null", REVIEW("{\"uid\":\"u\"," KIND_POD "," RES_PODS ",\"operation\":\"CREATE\","
                           "\"object\":null}"),
     400, "request.object"},
    {"object a Deployment", REVIEW("{\"uid\":\"u\"," KIND_POD "," RES_PODS ",\"operation\":"
                                   "\"CREATE\",\"object\":{\"kind\":\"Deployment\",\"apiVersion\":"
                                   "\"apps/v1\",\"metadata\":{\"name\":\"d\"}}}"),
     400, "v1 Pod"},
    {"no kind",
     REVIEW("{\"uid\":\"u\"," RES_PODS ",\"operation\":\"CREATE\",\"object\":" POD_OK "}"), 400,
     "request.kind"},
    {"dryRun a string", REVIEW("{\"uid\":\"u\"," KIND_POD "," RES_PODS ",\"operation\":\"CREATE\","
                               "\"dryRun\":\"yes\",\"object\":" POD_OK "}"),
     400, "dryRun"},
    {"no name", REVIEW("{\"uid\":\"u\"," KIND_POD "," RES_PODS ",\"namespace\":\"default\","
                       "\"operation\":\"CREATE\",\"object\":{\"metadata\":{}}}"),
     400, "generateName"},
    {"namespaces differ", REVIEW("{\"uid\":\"u\"," KIND_POD "," RES_PODS ",\"namespace\":\"ml\","
                                 "\"operation\":\"CREATE\",\"object\":" POD_OK "}"),
     400, "differs"},
    {"bad quantity", REVIEW("{\"uid\":\"u\"," KIND_POD "," RES_PODS ",\"operation\":\"CREATE\","
                            "\"object\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\"},"
                            "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":"
                            "{\"nvidia.com/gpu\":\"lots\"}}}]}}}"),
     400, "quantity"},
    {"UPDATE", REVIEW("{\"uid\":\"u\"," KIND_POD "," RES_PODS ",\"operation\":\"UPDATE\","
                      "\"object\":" POD_OK ",\"oldObject\":" POD_OK "}"),
     200, "only Pod CREATE"},
    {"a Deployment", REVIEW("{\"uid\":\"u\",\"kind\":{\"group\":\"apps\",\"version\":\"v1\","
                            "\"kind\":\"Deployment\"},\"resource\":{\"group\":\"apps\",\"version\":"
                            "\"v1\",\"resource\":\"deployments\"},\"operation\":\"CREATE\","
                            "\"object\":{}}"),
     200, "apps/v1/Deployment"},
    {"a subresource", REVIEW("{\"uid\":\"u\"," KIND_POD "," RES_PODS ",\"subResource\":\"status\","
                             "\"operation\":\"CREATE\",\"object\":" POD_OK "}"),
     200, "status"},
    {"containers not an array", REVIEW("{\"uid\":\"u\"," KIND_POD "," RES_PODS ",\"operation\":"
                                       "\"CREATE\",\"object\":{\"metadata\":{\"name\":\"p\","
                                       "\"namespace\":\"default\",\"labels\":{"
                                       "\"accelfit.io/managed\":\"true\"}},\"spec\":{"
                                       "\"containers\":{}}}}"),
     200, "no containers"},
    {"extra fields", REVIEW("{\"uid\":\"u\"," KIND_POD "," RES_PODS ",\"operation\":\"CREATE\","
                            "\"future\":[1,{\"x\":null}],\"object\":" POD_OK "}"),
     200, NULL},
};

START_TEST(test_bad_input_is_refused_or_allowed)
{
    struct answer a;

    service_with(VARIANT_ROLLOUT("llm-to-inf2", "1.0"), true, true);
    a = post(bad[_i].body, strlen(bad[_i].body), bad[_i].status == 200 ? "u" : NULL);
    ck_assert_msg(a.status == bad[_i].status, "%s: status %d", bad[_i].name, a.status);
    if (a.status == 400) {
        ck_assert_msg(strstr(json_string_value(json_object_get(a.body, "error")), bad[_i].says),
                      "%s: error '%s' does not say '%s'", bad[_i].name,
                      json_string_value(json_object_get(a.body, "error")), bad[_i].says);
    } else if (bad[_i].says) {
        ck_assert_ptr_null(a.patch);
        ck_assert_msg(warned(&a, bad[_i].says), "%s: no warning saying '%s'", bad[_i].name,
                      bad[_i].says);
    } else {
        ck_assert_ptr_nonnull(a.patch);   /* extra fields do not get in the way */
    }
    answer_clear(&a);
}
END_TEST

/* Every prefix of a real request (cut anywhere, as a broken client might) and every byte
 * flipped to a quote or a brace: a 400 or an allowed answer, never a crash. */
START_TEST(test_truncated_and_corrupted_requests_never_crash)
{
    size_t len;
    char *body = af_test_read(REQ_A, &len);
    static const char flips[] = {'"', '{', ']', '\\', 0x7f};

    service_with(VARIANT_ROLLOUT("llm-to-inf2", "1.0"), true, true);
    for (size_t n = 0; n < len; n += 7) {
        struct answer a = post(body, n, NULL);
        ck_assert(a.status == 400 || a.status == 200);
        answer_clear(&a);
    }
    for (size_t n = 0; n < len; n += 13) {
        char *copy = af_xstrndup(body, len);
        struct answer a;
        copy[n] = flips[n % sizeof(flips)];
        a = post(copy, len, NULL);
        ck_assert(a.status == 400 || a.status == 200);
        answer_clear(&a);
        af_free(copy);
    }
    af_free(body);
}
END_TEST

/* The answer does not fit the caller's buffer: a small allowed answer, or a 500. */
START_TEST(test_small_output_buffer)
{
    size_t len;
    char *body = af_test_read(REQ_A, &len);
    struct af_buf out = AF_BUF_INIT(300);
    int status;

    service_with(VARIANT_ROLLOUT("llm-to-inf2", "1.0"), true, true);
    status = af_webhook_mutate(&svc, body, len, &out);
    ck_assert_int_eq(status, 200);
    ck_assert_ptr_null(strstr(out.buf, "\"patch\""));
    ck_assert_ptr_nonnull(strstr(out.buf, "\"allowed\":true"));
    ck_assert_ptr_nonnull(strstr(out.buf, "258d26af-f1fc-4cef-a27c-15c950bf945b"));
    af_buf_release(&out);
    af_free(body);
}
END_TEST

/* ---- preferences: node affinity from the plan (accelfit/prefer.h) ------------------------------- */

/* A managed pod of namespace `ns` asking for `gpus` NVIDIA GPUs, with `annotations` (JSON
 * object text or "{}") and `affinity` (JSON text, or NULL for none). New string. */
static char *gpu_pod(const char *ns, int gpus, const char *annotations, const char *affinity,
                     bool managed)
{
    return af_xasprintf(
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":"
        "\"%s\",\"labels\":{%s},\"annotations\":%s},\"spec\":{%s%s%s\"containers\":[{\"name\":"
        "\"c\",\"image\":\"x\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"%d\"},"
        "\"limits\":{\"nvidia.com/gpu\":\"%d\"}}}]}}",
        ns, managed ? "\"accelfit.io/managed\":\"true\"" : "", annotations,
        affinity ? "\"affinity\":" : "", affinity ? affinity : "", affinity ? "," : "", gpus,
        gpus);
}

static struct af_config *prefer_cfg;

/* The config of the default policy with `extra` appended (prefer_cfg, freed by teardown). */
static void prefer_config(const char *extra)
{
    char *path = af_test_policy_file(extra);
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_config_load(&prefer_cfg, NULL, path, &err) == 0, "policy: %d:%d: %s",
                  err.line, err.column, err.text);
    af_free(path);
}

static void prefer_teardown(void)
{
    af_config_unref(prefer_cfg);
    prefer_cfg = NULL;
    teardown();
}

/* The preferences of `pod` (JSON text) under prefer_cfg, planned as filter plans it (the
 * tenant's restrictions too), with `room` as af_prefer_room's answer. */
static void prefs_of(const char *ns, const char *pod, const char *room,
                     struct af_preferences *out)
{
    char *body = review_in(ns, pod);
    struct af_admission *adm = NULL;
    struct af_error err;
    struct af_plan *plan = af_xmalloc(sizeof(*plan));
    struct af_tenant_decision td;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_codec_decode_admission(body, strlen(body), &adm, &err) == 0, "%s", err.text);
    af_plan_pod(prefer_cfg->policy, prefer_cfg->catalog, af_admission_pod(adm), plan);
    af_tenant_steer(prefer_cfg->policy, af_admission_pod(adm), 0, true, plan, &td);
    af_prefer_build(prefer_cfg->policy, prefer_cfg->catalog, plan, af_admission_pod(adm), room,
                    out);
    af_free(plan);
    af_admission_free(adm);
    af_free(body);
}

static bool term_has(const struct af_prefer_term *t, const char *v)
{
    for (size_t i = 0; i < t->n_values; i++)
        if (!strcmp(t->values[i], v))
            return true;
    return false;
}

static bool not_in_has(const struct af_preferences *p, const char *v)
{
    for (size_t i = 0; i < p->n_not_in; i++)
        if (!strcmp(p->not_in[i], v))
            return true;
    return false;
}

/* What filter knows narrows, what the rule ranks is preferred: a 13B model on one GPU. */
START_TEST(test_prefer_terms_follow_the_plan)
{
    struct af_preferences p;
    char *pod = gpu_pod("ml", 1, "{\"accelfit.io/workload\":\"inference\",\"accelfit.io/"
                        "model-params\":\"13B\",\"accelfit.io/objective\":\"performance\"}",
                        NULL, true);

    prefer_config("\npreferences: {enabled: true, required: true}\n");
    prefs_of("ml", pod, NULL, &p);
    ck_assert_str_eq(p.key, "karpenter.k8s.aws/instance-family");
    ck_assert(!p.spot);
    /* inference-performance: L40S, A10G, A100, H100, L4; 13B at fp16 needs 29 GiB, which
     * one A10G or L4 (24 GiB) cannot hold: those tiers are not preferred */
    ck_assert_uint_eq(p.n_terms, 3);
    ck_assert_int_eq(p.terms[0].cls, AF_CLASS_NVIDIA_L40S);
    ck_assert_int_eq(p.terms[0].weight, 100);
    ck_assert(term_has(&p.terms[0], "g6e"));
    ck_assert_int_eq(p.terms[1].cls, AF_CLASS_NVIDIA_A100);
    ck_assert_int_eq(p.terms[1].weight, 90);
    ck_assert(term_has(&p.terms[1], "p4d") && term_has(&p.terms[1], "p4de"));
    ck_assert_int_eq(p.terms[2].cls, AF_CLASS_NVIDIA_H100);
    ck_assert_int_eq(p.terms[2].weight, 80);
    for (size_t i = 0; i < p.n_terms; i++)
        ck_assert(!term_has(&p.terms[i], "g5") && !term_has(&p.terms[i], "g6"));
    /* required: the families whose devices cannot hold the model, and only those */
    ck_assert(not_in_has(&p, "g5") && not_in_has(&p, "g6") && not_in_has(&p, "g4dn"));
    ck_assert(!not_in_has(&p, "g6e") && !not_in_has(&p, "p4d") && !not_in_has(&p, "p5"));
    ck_assert(!not_in_has(&p, "inf2") && !not_in_has(&p, "c6i"));   /* other kinds: requests */

    /* a node with room in a tier filter accepts: no preference, the knowledge stays */
    prefs_of("ml", pod, "g6e-a", &p);
    ck_assert_uint_eq(p.n_terms, 0);
    ck_assert_ptr_nonnull(strstr(p.why, "g6e-a"));
    ck_assert(not_in_has(&p, "g5"));
    af_free(pod);
}
END_TEST

/* An unannotated pod: the rule is a guess, so it ranks and nothing is required. */
START_TEST(test_prefer_guesses_rank_and_never_require)
{
    struct af_preferences p;
    char *pod = gpu_pod("ml", 1, "{}", NULL, true);

    prefer_config("\npreferences: {enabled: true, required: true, when: always}\n");
    prefs_of("ml", pod, "g5-a", &p);   /* when: always: room does not matter */
    ck_assert_uint_ge(p.n_terms, 3);
    ck_assert_int_eq(p.terms[0].cls, AF_CLASS_NVIDIA_A10G);   /* inference-default */
    ck_assert(term_has(&p.terms[0], "g5"));
    for (size_t i = 1; i < p.n_terms; i++)
        ck_assert_int_lt(p.terms[i].weight, p.terms[i - 1].weight);
    ck_assert_uint_eq(p.n_not_in, 0);
    af_free(pod);
}
END_TEST

/* The tenant's explicit policy: its classes bound the terms, spot capacity joins each. */
START_TEST(test_prefer_tenant_classes_and_spot)
{
    struct af_preferences p;
    char *pod = gpu_pod("batch", 1, "{\"accelfit.io/workload\":\"inference\"}", NULL, true);

    prefer_config("\ntenants:\n  - name: batch\n    namespaces: [batch]\n    capacity: spot\n"
                  "    classes: [nvidia-l4, nvidia-t4, cpu]\n"
                  "preferences: {enabled: true, required: true, key: instance-type, "
                  "tenants: [batch]}\n");
    prefs_of("batch", pod, NULL, &p);
    ck_assert_str_eq(p.key, "node.kubernetes.io/instance-type");
    ck_assert(p.spot);
    ck_assert_uint_eq(p.n_terms, 2);
    ck_assert_int_eq(p.terms[0].cls, AF_CLASS_NVIDIA_L4);
    ck_assert(term_has(&p.terms[0], "g6.xlarge"));
    ck_assert_int_eq(p.terms[1].cls, AF_CLASS_NVIDIA_T4);
    ck_assert(term_has(&p.terms[1], "g4dn.xlarge"));
    /* the classes the tenant may not use are known: required away */
    ck_assert(not_in_has(&p, "g5.xlarge") && not_in_has(&p, "p4d.24xlarge"));
    ck_assert(!not_in_has(&p, "g6.xlarge"));
    af_free(pod);
}
END_TEST

/* Which pods: enabled, managed, and in a listed namespace or tenant. */
START_TEST(test_prefer_selects_managed_pods_of_its_lists)
{
    static const struct {
        const char *policy, *ns;
        bool managed, want;
    } cases[] = {
        {"", "ml", true, false},   /* off by default */
        {"\npreferences: {enabled: true}\n", "ml", true, true},
        {"\npreferences: {enabled: true}\n", "ml", false, false},
        {"\npreferences: {enabled: true, namespaces: [serving]}\n", "ml", true, false},
        {"\npreferences: {enabled: true, namespaces: [serving]}\n", "serving", true, true},
        {"\ntenants: [{name: research, namespaces: [ml]}]\n"
         "preferences: {enabled: true, tenants: [research]}\n", "ml", true, true},
        {"\ntenants: [{name: research, namespaces: [ml]}]\n"
         "preferences: {enabled: true, tenants: [research]}\n", "web", true, false},
    };

    for (size_t i = 0; i < AF_ARRAY_SIZE(cases); i++) {
        char *pod = gpu_pod(cases[i].ns, 1, "{}", NULL, cases[i].managed);
        char *body = review_in(cases[i].ns, pod);
        struct af_admission *adm = NULL;
        struct af_error err;

        memset(&err, 0, sizeof(err));
        prefer_config(cases[i].policy);
        ck_assert_int_eq(af_codec_decode_admission(body, strlen(body), &adm, &err), 0);
        ck_assert_msg(af_prefer_selects(prefer_cfg->policy, af_admission_pod(adm)) ==
                          cases[i].want, "case %zu", i);
        af_admission_free(adm);
        af_config_unref(prefer_cfg);
        prefer_cfg = NULL;
        af_free(body);
        af_free(pod);
    }
}
END_TEST

START_TEST(test_prefer_policy_errors_name_the_line)
{
    static const char *const wrong[] = {
        "\npreferences: {enabled: yes please}\n",
        "\npreferences: {when: sometimes}\n",
        "\npreferences: {key: zone}\n",
        "\npreferences: {tenants: [nobody]}\n",
        "\npreferences: {namespaces: [Not_A_Name]}\n",
        "\npreferences: {enable: true}\n",
    };

    for (size_t i = 0; i < AF_ARRAY_SIZE(wrong); i++) {
        struct af_policy *p = NULL;
        struct af_error err;
        memset(&err, 0, sizeof(err));
        ck_assert_msg(af_test_policy_load_with(wrong[i], &p, &err) != 0, "%s loaded", wrong[i]);
        ck_assert_int_eq(err.line, af_test_policy_lines() + 2);
        ck_assert_ptr_nonnull(strstr(err.text, "preferences"));
    }
}
END_TEST

/* Two tiers and a NotIn, as af_prefer_build would give them. */
static const struct af_preferences *sample_prefs(bool required)
{
    static struct af_preferences p;

    memset(&p, 0, sizeof(p));
    p.key = AF_PREFER_LABEL_FAMILY;
    p.terms[0] = (struct af_prefer_term){100, 0, AF_CLASS_NVIDIA_A10G, {"g5"}, 1};
    p.terms[1] = (struct af_prefer_term){90, 1, AF_CLASS_NVIDIA_L4, {"g6", "gr6"}, 2};
    p.n_terms = 2;
    if (required) {
        p.not_in[0] = "g4dn";
        p.not_in[1] = "p3";
        p.n_not_in = 2;
    }
    return &p;
}

/* Whatever affinity the pod has, it keeps it all and gains ours. */
static const struct {
    const char *affinity;              /* the pod's spec.affinity, or NULL */
    int pod_preferred, pod_terms;      /* the pod's own preferred and required terms */
    bool refused, skipped;             /* refused: pod as written; skipped: required not added */
} merges[] = {
    {NULL, 0, 0, false, false},
    {"null", 0, 0, false, false},
    {"{}", 0, 0, false, false},
    {"{\"podAntiAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":1,"
     "\"podAffinityTerm\":{\"topologyKey\":\"kubernetes.io/hostname\"}}]}}", 0, 0, false, false},
    {"{\"nodeAffinity\":null}", 0, 0, false, false},
    {"{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":100,"
     "\"preference\":{\"matchExpressions\":[{\"key\":\"topology.kubernetes.io/zone\","
     "\"operator\":\"In\",\"values\":[\"us-west-2a\"]}]}}]}}", 1, 0, false, false},
    {"{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":"
     "[{\"matchExpressions\":[{\"key\":\"kubernetes.io/arch\",\"operator\":\"In\",\"values\":"
     "[\"amd64\"]}]},{\"matchFields\":[{\"key\":\"metadata.name\",\"operator\":\"In\",\"values\":"
     "[\"n1\"]}]}]}}}", 0, 2, false, false},
    {"{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{\"nodeSelectorTerms\":"
     "[]},\"preferredDuringSchedulingIgnoredDuringExecution\":[]}}", 0, 0, false, true},
    {"[]", 0, 0, true, false},
    {"{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":{}}}", 0, 0, true,
     false},
};

static const char *const pk = "preferredDuringSchedulingIgnoredDuringExecution";
static const char *const rk = "requiredDuringSchedulingIgnoredDuringExecution";

START_TEST(test_affinity_merges_with_what_the_pod_has)
{
    const struct af_preferences *p = sample_prefs(true);
    char *pod = gpu_pod("ml", 1, "{}", merges[_i].affinity, true);
    char *body = review(pod), why[300] = "";
    struct af_admission *adm = NULL;
    struct af_error err;
    struct af_buf patch = AF_BUF_INIT(1u << 20);
    struct af_warnings w;
    json_t *obj = json_loads(pod, 0, NULL), *ops, *out, *na, *pref, *terms, *t;
    size_t i;
    int rc;

    memset(&w, 0, sizeof(w));
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_codec_decode_admission(body, strlen(body), &adm, &err), 0);
    rc = af_codec_admission_affinity(adm, p, &patch, &w);
    if (merges[_i].refused) {
        ck_assert_int_eq(rc, AF_EINVAL);
        ck_assert_uint_eq(patch.len, 0);
        ck_assert_uint_eq(w.n, 1);
        ck_assert_ptr_nonnull(strstr(w.text[0], "without node preferences"));
        goto done;
    }
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(w.n, merges[_i].skipped ? 1 : 0);
    ops = json_loadb(patch.buf, patch.len, 0, NULL);
    out = af_test_jsonpatch_apply(obj, ops, why, sizeof(why));
    ck_assert_msg(out != NULL, "%s: %s", why, patch.buf);
    assert_pod_valid(out);
    na = json_object_get(json_object_get(json_object_get(out, "spec"), "affinity"),
                         "nodeAffinity");
    /* preferred: the pod's first, with their weights, then ours heaviest first */
    pref = json_object_get(na, pk);
    ck_assert_uint_eq(json_array_size(pref), (size_t)merges[_i].pod_preferred + 2);
    t = json_array_get(pref, (size_t)merges[_i].pod_preferred);
    ck_assert_int_eq(json_integer_value(json_object_get(t, "weight")), 100);
    t = json_array_get(json_object_get(json_object_get(t, "preference"), "matchExpressions"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(t, "key")),
                     "karpenter.k8s.aws/instance-family");
    ck_assert_str_eq(json_string_value(json_object_get(t, "operator")), "In");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(t, "values"), 0)), "g5");
    t = json_array_get(pref, (size_t)merges[_i].pod_preferred + 1);
    ck_assert_int_eq(json_integer_value(json_object_get(t, "weight")), 90);
    if (merges[_i].pod_preferred)
        ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(pref, 0), "weight")),
                         100);
    /* required: every term of the pod ANDs our NotIn; none added or lost */
    terms = json_object_get(json_object_get(na, rk), "nodeSelectorTerms");
    if (merges[_i].skipped) {
        ck_assert_uint_eq(json_array_size(terms), 0);
    } else {
        ck_assert_uint_eq(json_array_size(terms),
                          merges[_i].pod_terms ? (size_t)merges[_i].pod_terms : 1);
        json_array_foreach(terms, i, t) {
            json_t *me = json_object_get(t, "matchExpressions");
            json_t *last = json_array_get(me, json_array_size(me) - 1);
            ck_assert_str_eq(json_string_value(json_object_get(last, "operator")), "NotIn");
            ck_assert_uint_eq(json_array_size(json_object_get(last, "values")), 2);
        }
        if (merges[_i].pod_terms) {
            t = json_array_get(terms, 0);
            ck_assert_uint_eq(json_array_size(json_object_get(t, "matchExpressions")), 2);
            ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(
                                 t, "matchExpressions"), 0), "key")), "kubernetes.io/arch");
            ck_assert_ptr_nonnull(json_object_get(json_array_get(terms, 1), "matchFields"));
        }
    }
    json_decref(ops);
    json_decref(out);
done:
    json_decref(obj);
    af_buf_release(&patch);
    af_admission_free(adm);
    af_free(body);
    af_free(pod);
}
END_TEST

START_TEST(test_affinity_refuses_a_bound_pod_and_sends_nothing_empty)
{
    struct af_preferences none;
    const char *bound = "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"},"
                        "\"spec\":{\"nodeName\":\"n1\",\"containers\":[{\"name\":\"c\"}]}}";
    char *body = review(bound);
    struct af_admission *adm = NULL;
    struct af_error err;
    struct af_buf patch = AF_BUF_INIT(1u << 20);
    struct af_warnings w;

    memset(&w, 0, sizeof(w));
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_codec_decode_admission(body, strlen(body), &adm, &err), 0);
    ck_assert_int_eq(af_codec_admission_affinity(adm, sample_prefs(false), &patch, &w), AF_EINVAL);
    ck_assert_uint_eq(patch.len, 0);
    ck_assert_ptr_nonnull(strstr(w.text[0], "spec.nodeName"));
    memset(&none, 0, sizeof(none));
    none.key = AF_PREFER_LABEL_FAMILY;
    memset(&w, 0, sizeof(w));
    ck_assert_int_eq(af_codec_admission_affinity(adm, &none, &patch, &w), 0);
    ck_assert_uint_eq(patch.len, 0);
    ck_assert_uint_eq(w.n, 0);
    af_buf_release(&patch);
    af_admission_free(adm);
    af_free(body);
}
END_TEST

/* Through POST /mutate: a pod larger than any node of the cluster waits for a new node, so
 * it is told which; a pod that fits an existing node is not; nor is a pod not selected. */
START_TEST(test_mutate_prefers_only_when_no_node_has_room)
{
    static const char *const ann = "{\"accelfit.io/workload\":\"inference\"}";
    char *big = gpu_pod("ml", 8, ann, NULL, true), *small = gpu_pod("ml", 1, ann, NULL, true);
    char *plain = gpu_pod("ml", 8, ann, NULL, false);
    char *body;
    struct answer a;
    json_t *obj, *out, *pref;
    char why[300] = "";

    service_with_policy("\npreferences: {enabled: true}\n", true, true);
    /* g5-a and g6-a hold 4 GPUs each: 8 fit no node of the cluster */
    body = review(big);
    a = post(body, strlen(body), "u-1");
    ck_assert_ptr_nonnull(a.patch);
    obj = json_loads(big, 0, NULL);
    out = af_test_jsonpatch_apply(obj, a.patch, why, sizeof(why));
    ck_assert_msg(out != NULL, "%s", why);
    assert_pod_valid(out);
    pref = json_object_get(json_object_get(json_object_get(json_object_get(out, "spec"),
                                                           "affinity"), "nodeAffinity"), pk);
    ck_assert_uint_ge(json_array_size(pref), 2);
    /* inference-default's first tier, A10G: g5 has an 8-GPU size (g5.48xlarge) */
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(json_array_get(
                         json_object_get(json_object_get(json_array_get(pref, 0), "preference"),
                                         "matchExpressions"), 0), "values"), 0)), "g5");
    json_decref(out);
    json_decref(obj);
    answer_clear(&a);
    af_free(body);

    body = review(small);   /* room on g5-a */
    a = post(body, strlen(body), "u-1");
    ck_assert_ptr_null(a.patch);
    ck_assert_ptr_null(a.warnings);
    answer_clear(&a);
    af_free(body);

    body = review(plain);   /* not labelled accelfit.io/managed */
    a = post(body, strlen(body), "u-1");
    ck_assert_ptr_null(a.patch);
    answer_clear(&a);
    af_free(body);
    af_free(big), af_free(small), af_free(plain);
}
END_TEST

/* Preferences are off by default: a managed pod in no rollout is created as written. */
START_TEST(test_mutate_without_preferences_changes_nothing)
{
    char *pod = gpu_pod("ml", 8, "{}", NULL, true), *body = review(pod);
    struct answer a;

    service_with_policy(NULL, true, true);
    a = post(body, strlen(body), "u-1");
    ck_assert_ptr_null(a.patch);
    ck_assert_ptr_null(a.warnings);
    answer_clear(&a);
    af_free(body);
    af_free(pod);
}
END_TEST

static Suite *af_admission_suite(void)
{
    Suite *s = suite_create("admission");
    TCase *tc = tcase_create("apply");

    tcase_add_test(tc, test_apply_agrees_with_the_api_server);
    suite_add_tcase(s, tc);

    tc = tcase_create("recorded");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_loop_test(tc, test_recorded_request_is_patched_for_the_target, 0,
                        (int)AF_ARRAY_SIZE(recorded));
    tcase_add_test(tc, test_patch_is_minimal_and_escaped);
    tcase_add_test(tc, test_generatename_pod_is_patched);
    tcase_add_test(tc, test_namespace_from_the_request);
    tcase_add_test(tc, test_job_pods_get_the_same_side);
    tcase_add_test(tc, test_source_side_gets_only_annotations);
    tcase_add_test(tc, test_placement_rollout_gets_only_annotations);
    tcase_add_test(tc, test_dry_run_is_decided_but_not_remembered);
    tcase_add_test(tc, test_target_without_room_falls_back_to_the_source);
    tcase_add_loop_test(tc, test_pinned_pod_stays_on_the_source, 0, (int)AF_ARRAY_SIZE(pinned));
    tcase_add_test(tc, test_unread_rollout_state_is_not_ready);
    tcase_add_loop_test(tc, test_dra_pod_swaps_its_claim_template_when_it_can_run, 0,
                        (int)AF_ARRAY_SIZE(dra_rollout));
    suite_add_tcase(s, tc);

    tc = tcase_create("unchanged");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_loop_test(tc, test_undecided_pod_is_allowed_unchanged, 0,
                        (int)AF_ARRAY_SIZE(unchanged));
    tcase_add_test(tc, test_two_rollouts_first_wins_with_a_warning);
    tcase_add_loop_test(tc, test_bad_variant_allows_unchanged, 0, (int)AF_ARRAY_SIZE(bad_variants));
    tcase_add_test(tc, test_a_patch_over_the_limit_is_said_not_dropped);
    suite_add_tcase(s, tc);

    tc = tcase_create("codec");
    tcase_add_test(tc, test_missing_parents_are_created);
    tcase_add_test(tc, test_init_containers_and_every_gpu_resource);
    tcase_add_test(tc, test_same_resource_key_is_replaced);
    tcase_add_test(tc, test_pod_without_a_source_accelerator_is_refused);
    tcase_add_test(tc, test_pod_with_a_node_name_is_refused);
    tcase_add_test(tc, test_node_selector_kept_is_warned);
    tcase_add_test(tc, test_nothing_to_change_sends_no_patch);
    tcase_add_loop_test(tc, test_claim_template_is_swapped_for_the_target, 0,
                        (int)AF_ARRAY_SIZE(claim_shapes));
    tcase_add_test(tc, test_claim_template_variant_needs_a_claim_it_swaps);
    suite_add_tcase(s, tc);

    tc = tcase_create("preferences");
    tcase_add_checked_fixture(tc, NULL, prefer_teardown);
    tcase_add_test(tc, test_prefer_terms_follow_the_plan);
    tcase_add_test(tc, test_prefer_guesses_rank_and_never_require);
    tcase_add_test(tc, test_prefer_tenant_classes_and_spot);
    tcase_add_test(tc, test_prefer_selects_managed_pods_of_its_lists);
    tcase_add_test(tc, test_prefer_policy_errors_name_the_line);
    tcase_add_loop_test(tc, test_affinity_merges_with_what_the_pod_has, 0,
                        (int)AF_ARRAY_SIZE(merges));
    tcase_add_test(tc, test_affinity_refuses_a_bound_pod_and_sends_nothing_empty);
    tcase_add_test(tc, test_mutate_prefers_only_when_no_node_has_room);
    tcase_add_test(tc, test_mutate_without_preferences_changes_nothing);
    suite_add_tcase(s, tc);

    tc = tcase_create("bad-input");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_add_loop_test(tc, test_bad_input_is_refused_or_allowed, 0, (int)AF_ARRAY_SIZE(bad));
    tcase_add_test(tc, test_truncated_and_corrupted_requests_never_crash);
    tcase_add_test(tc, test_small_output_buffer);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    af_log_level = AF_LOG_ERROR;   /* the corrupted requests would log a warning each */
    return af_test_run(af_admission_suite());
}
