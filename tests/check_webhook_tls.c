/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The admission webhook as the API server meets it: `accelfit serve` on HTTPS
 * (--tls-cert-file, --tls-private-key-file) with a certificate signed by a
 * throwaway CA made here with openssl, called the way a kube-apiserver v1.26
 * calls a webhook: POST /mutate?timeout=5s, Content-Type application/json,
 * HTTP/1.1 offered by ALPN, the serving certificate verified against the CA
 * (the webhook's caBundle), no client certificate. Each AdmissionReview the
 * API server recorded (tests/fixtures/admission/) goes in; each answer must be
 * an AdmissionReview v1 for the request's uid that allows the pod, and its
 * JSONPatch must apply to the object as received, give a pod that passes the
 * API server's validation of what changed (tests/support/apiserver_rules.h),
 * carry the rollout's variant (target) or only the two rollout annotations
 * (source), and change nothing else.
 */
#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accelfit/util.h"
#include "support/apiserver_rules.h"
#include "support/http_client.h"
#include "support/support.h"

#define ADM "tests/fixtures/admission"
#define NEURON_IMAGE "111122223333.dkr.ecr.us-east-1.amazonaws.com/llm-infer:1.4.0-neuronx"
#define ROLLOUT "llm-infer-to-inf2"

/* ---- the server ------------------------------------------------------------------------------ */

static char *dir;   /* the CA, the serving certificate and the policy; removed when a test passes */

static char *in_dir(const char *name)
{
    return af_xasprintf("%s/%s", dir, name);
}

/* A CA, and a serving certificate it signed for the webhook's Service name and 127.0.0.1. */
static void make_certs(void)
{
    dir = af_test_temp_path("webhook-tls");
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    af_test_make_cert(dir, "tls", "DNS:accelfit.accelfit.svc,IP:127.0.0.1");
}

static void drop_dir_name(void)
{
    af_free(dir);   /* the directory itself goes when the test passes (af_test_temp_path) */
    dir = NULL;
}

/*
 * `accelfit serve --demo` on HTTPS with the default policy and one variant rollout of every
 * managed pod in `default` from A10G to Inferentia2 at `share`.
 */
static void start(struct af_test_server *s, const char *share)
{
    size_t len;
    char *policy = in_dir("policy.yaml"), *crt = in_dir("tls.crt"), *key = in_dir("tls.key");
    char *base = af_test_read("policies/default.yaml", &len);
    const char *args[] = {"--demo", "--policy", policy, "--tls-cert-file", crt,
                          "--tls-private-key-file", key, NULL};
    FILE *f = fopen(policy, "w");

    ck_assert_ptr_nonnull(f);
    fprintf(f,
            "%s\nrollouts:\n"
            "  - name: " ROLLOUT "\n"
            "    selector: {namespace: default}\n"
            "    source: [nvidia-a10g]\n"
            "    target: [inferentia2]\n"
            "    share: %s\n"
            "    variant:\n"
            "      images: {\"*\": \"" NEURON_IMAGE "\"}\n"
            "      resources: {aws.amazon.com/neuron: 1}\n"
            "      env: {NEURON_RT_NUM_CORES: \"2\"}\n"
            "      tolerations: [{key: aws.amazon.com/neuron, operator: Exists, effect: "
            "NoSchedule}]\n"
            "      annotations: {accelfit.io/neuron-ready: \"true\"}\n",
            base, share);
    ck_assert_int_eq(fclose(f), 0);
    af_test_server_start(s, args, true, NULL, NULL);
    af_free(base);
    af_free(policy);
    af_free(crt);
    af_free(key);
}

/* A handle that calls the way the API server does: the CA verified, HTTP/1.1, no client cert. */
static CURL *apiserver_client(void)
{
    CURL *c = curl_easy_init();
    char *ca = in_dir("ca.crt");

    ck_assert_ptr_nonnull(c);
    curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(c, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    af_free(ca);   /* libcurl keeps its own copy */
    return c;
}

/* ---- the recorded requests ------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* tests/fixtures/admission/{ignore,fail}/MODE/POD/webhook-request.json, sorted. */
static char **recorded(size_t *n)
{
    static const char *const policies[] = {"fail", "ignore"};
    char **v = NULL;
    size_t cap = 0, k = 0;

    for (size_t p = 0; p < AF_ARRAY_SIZE(policies); p++) {
        char *rel = af_xasprintf(ADM "/%s", policies[p]);
        DIR *modes = opendir(af_test_path(rel));
        struct dirent *m;
        ck_assert_msg(modes != NULL, "cannot open %s", rel);
        for (m = readdir(modes); m; m = readdir(modes)) {
            char *mrel = af_xasprintf("%s/%s", rel, m->d_name);
            DIR *pods = m->d_name[0] == '.' ? NULL : opendir(af_test_path(mrel));
            struct dirent *e;
            for (e = pods ? readdir(pods) : NULL; e; e = readdir(pods)) {
                char *req = af_xasprintf("%s/%s/webhook-request.json", mrel, e->d_name);
                if (e->d_name[0] != '.' && access(af_test_path(req), R_OK) == 0) {
                    AF_GROW(v, cap, k + 1);
                    v[k++] = req;
                } else {
                    af_free(req);
                }
            }
            if (pods)
                closedir(pods);
            af_free(mrel);
        }
        closedir(modes);
        af_free(rel);
    }
    qsort(v, k, sizeof(char *), cmp_str);
    *n = k;
    return v;
}

/* ---- checks on one answer -------------------------------------------------------------------- */

static json_t *at(json_t *v, const char *a, const char *b)
{
    return json_object_get(json_object_get(v, a), b);
}

static const char *annotation(json_t *pod, const char *key)
{
    return json_string_value(json_object_get(at(pod, "metadata", "annotations"), key));
}

/*
 * `pod` without what a webhook may change here (annotations; each container's image,
 * resources and env; tolerations): what must be equal before and after the patch.
 */
static json_t *unchangeable(json_t *pod)
{
    static const char *const lists[] = {"containers", "initContainers"};
    json_t *copy = json_deep_copy(pod), *c;
    size_t i;

    json_object_del(json_object_get(copy, "metadata"), "annotations");
    json_object_del(json_object_get(copy, "spec"), "tolerations");
    for (size_t l = 0; l < AF_ARRAY_SIZE(lists); l++) {
        json_array_foreach(at(copy, "spec", lists[l]), i, c) {
            json_object_del(c, "image");
            json_object_del(c, "resources");
            json_object_del(c, "env");
        }
    }
    return copy;
}

/* A container's resources or env (new reference) without what the variant changes. */
static json_t *without_variant(json_t *v)
{
    static const char *const maps[] = {"requests", "limits"};
    json_t *c = json_deep_copy(v);   /* NULL stays NULL */

    if (json_is_object(c)) {
        for (size_t m = 0; m < AF_ARRAY_SIZE(maps); m++) {
            json_object_del(json_object_get(c, maps[m]), "nvidia.com/gpu");
            json_object_del(json_object_get(c, maps[m]), "aws.amazon.com/neuron");
        }
    } else if (json_is_array(c)) {
        for (size_t k = json_array_size(c); k-- > 0;) {
            const char *name = json_string_value(json_object_get(json_array_get(c, k), "name"));
            if (name && !strcmp(name, "NEURON_RT_NUM_CORES"))
                json_array_remove(c, k);
        }
        if (!json_array_size(c)) {   /* an env list the variant created */
            json_decref(c);
            c = NULL;
        }
    }
    return c;
}

/* A container's resources (or env) as they were, but for what the variant changes. */
static void assert_same_but(const char *rel, size_t i, json_t *now, json_t *was)
{
    json_t *a = without_variant(now), *b = without_variant(was);

    ck_assert_msg((!a && !b) || json_equal(a, b), "%s: containers[%zu] changed beyond the variant",
                  rel, i);
    json_decref(a);
    json_decref(b);
}

/* Every container of a pod the variant rewrote for Inferentia2. */
static void assert_variant(const char *rel, json_t *before, json_t *pod)
{
    json_t *c, *e, *t;
    size_t i, k;
    bool tol = false;

    json_array_foreach(at(pod, "spec", "containers"), i, c) {
        json_t *req = at(c, "resources", "requests"), *lim = at(c, "resources", "limits");
        json_t *was = json_array_get(at(before, "spec", "containers"), i);
        bool cores = false;
        ck_assert_str_eq(json_string_value(json_object_get(c, "image")), NEURON_IMAGE);
        ck_assert_msg(!json_object_get(req, "nvidia.com/gpu") &&
                          !json_object_get(lim, "nvidia.com/gpu"),
                      "%s: containers[%zu] still asks for nvidia.com/gpu", rel, i);
        ck_assert_str_eq(json_string_value(json_object_get(req, "aws.amazon.com/neuron")), "1");
        ck_assert_str_eq(json_string_value(json_object_get(lim, "aws.amazon.com/neuron")), "1");
        assert_same_but(rel, i, json_object_get(c, "resources"),
                        json_object_get(was, "resources"));
        assert_same_but(rel, i, json_object_get(c, "env"), json_object_get(was, "env"));
        json_array_foreach(json_object_get(c, "env"), k, e) {
            if (!strcmp(json_string_value(json_object_get(e, "name")), "NEURON_RT_NUM_CORES")) {
                ck_assert_msg(!cores, "%s: NEURON_RT_NUM_CORES twice", rel);
                ck_assert_str_eq(json_string_value(json_object_get(e, "value")), "2");
                cores = true;
            }
        }
        ck_assert_msg(cores, "%s: containers[%zu] has no NEURON_RT_NUM_CORES", rel, i);
    }
    json_array_foreach(at(pod, "spec", "tolerations"), i, t) {
        const char *key = json_string_value(json_object_get(t, "key"));
        tol |= key && !strcmp(key, "aws.amazon.com/neuron") &&
               !strcmp(json_string_value(json_object_get(t, "operator")), "Exists") &&
               !strcmp(json_string_value(json_object_get(t, "effect")), "NoSchedule");
    }
    ck_assert_msg(tol, "%s: no aws.amazon.com/neuron toleration", rel);
    ck_assert_str_eq(annotation(pod, "accelfit.io/neuron-ready"), "true");
}

/*
 * Posts the recorded request `rel` as the API server does and checks the answer; `side` is
 * the side every pod must get ("target": the variant; "source": the annotations only).
 */
static void post_recorded(CURL *c, const struct af_test_server *s, const char *rel,
                          const char *side)
{
    static const char *const headers[] = {"Content-Type: application/json",
                                          "Accept: application/json, */*", NULL};
    size_t len, plen;
    char *body = af_test_read(rel, &len), *url = af_xasprintf("%s/mutate?timeout=5s", s->base);
    char why[512] = "", *raw;
    json_t *review = json_loadb(body, len, 0, NULL), *obj, *answer, *resp, *patch, *pod, *a, *b;
    struct af_test_resp r;

    ck_assert_ptr_nonnull(review);
    obj = at(review, "request", "object");
    af_test_http(c, "POST", url, body, len, headers, &r);
    ck_assert_msg(r.curl_rc == CURLE_OK, "%s: curl %d over TLS", rel, r.curl_rc);
    ck_assert_int_eq(r.http_version, CURL_HTTP_VERSION_1_1);
    ck_assert_msg(r.status == 200, "%s: %ld %s", rel, r.status, r.body);
    ck_assert_str_eq(r.content_type, "application/json");
    answer = json_loads(r.body, 0, NULL);
    ck_assert_msg(answer != NULL, "%s: the answer is not JSON: %s", rel, r.body);
    ck_assert_str_eq(json_string_value(json_object_get(answer, "apiVersion")),
                     "admission.k8s.io/v1");
    ck_assert_str_eq(json_string_value(json_object_get(answer, "kind")), "AdmissionReview");
    resp = json_object_get(answer, "response");
    ck_assert(json_equal(json_object_get(resp, "uid"), at(review, "request", "uid")));
    ck_assert(json_is_true(json_object_get(resp, "allowed")));
    ck_assert_msg(!json_object_get(resp, "warnings"), "%s: warned: %s", rel, r.body);
    ck_assert_str_eq(json_string_value(json_object_get(resp, "patchType")), "JSONPatch");
    raw = af_test_base64_decode(json_string_value(json_object_get(resp, "patch")), &plen);
    ck_assert_msg(raw != NULL, "%s: response.patch is not standard base64", rel);
    patch = json_loadb(raw, plen, 0, NULL);
    ck_assert_msg(json_is_array(patch), "%s: the patch is not a JSON array: %s", rel, raw);

    pod = af_test_jsonpatch_apply(obj, patch, why, sizeof(why));
    ck_assert_msg(pod != NULL, "%s: the API server would refuse the patch: %s", rel, why);
    ck_assert_msg(af_test_pod_valid(pod, why, sizeof(why)), "%s: the patched pod is invalid: %s",
                  rel, why);
    a = unchangeable(obj);
    b = unchangeable(pod);
    ck_assert_msg(json_equal(a, b), "%s: the patch changes more than it may", rel);
    ck_assert_str_eq(annotation(pod, "accelfit.io/rollout"), ROLLOUT);
    ck_assert_str_eq(annotation(pod, "accelfit.io/rollout-side"), side);
    if (!strcmp(side, "target")) {
        assert_variant(rel, obj, pod);
    } else {
        ck_assert_msg(json_equal(json_object_get(pod, "spec"), json_object_get(obj, "spec")),
                      "%s: a source pod's spec changed", rel);
        ck_assert_ptr_null(annotation(pod, "accelfit.io/neuron-ready"));
    }
    json_decref(a);
    json_decref(b);
    json_decref(pod);
    json_decref(patch);
    af_free(raw);
    json_decref(answer);
    json_decref(review);
    af_test_resp_free(&r);
    af_free(url);
    af_free(body);
}

static void run_all(const char *share, const char *side)
{
    struct af_test_server s;
    size_t n;
    char **reqs = recorded(&n), *metrics, want[128];
    CURL *c;
    struct af_test_resp r;

    ck_assert_uint_eq(n, 39);   /* tests/fixtures/admission/README.md */
    start(&s, share);
    c = apiserver_client();
    for (size_t i = 0; i < n; i++)
        post_recorded(c, &s, reqs[i], side);
    /* Each call counted under its own verb. */
    metrics = af_xasprintf("%s/metrics", s.base);
    af_test_http(c, NULL, metrics, NULL, 0, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    snprintf(want, sizeof(want), "accelfit_requests_total{verb=\"mutate\",code=\"200\"} %zu\n", n);
    ck_assert_msg(strstr(r.body, want) != NULL, "no '%s' in /metrics", want);
    af_test_resp_free(&r);
    af_free(metrics);
    curl_easy_cleanup(c);
    ck_assert_int_eq(af_test_server_stop(&s), 0);
    for (size_t i = 0; i < n; i++)
        af_free(reqs[i]);
    af_free(reqs);
}

START_TEST(test_recorded_reviews_get_the_variant_over_tls)
{
    run_all("1.0", "target");
}
END_TEST

START_TEST(test_recorded_reviews_get_annotations_only_on_the_source)
{
    run_all("0", "source");
}
END_TEST

/*
 * The API server calls https://accelfit.accelfit.svc:PORT (the Service) and checks the name
 * against the certificate; another name fails the handshake, as it would for the API server.
 */
START_TEST(test_the_certificate_is_what_the_api_server_verifies)
{
    struct af_test_server s;
    struct curl_slist *names = NULL;
    struct af_test_resp r;
    char entry[128], *url;
    CURL *c;

    start(&s, "1.0");
    c = apiserver_client();
    snprintf(entry, sizeof(entry), "accelfit.accelfit.svc:%d:127.0.0.1", s.port);
    names = curl_slist_append(names, entry);
    snprintf(entry, sizeof(entry), "accelfit.elsewhere.svc:%d:127.0.0.1", s.port);
    names = curl_slist_append(names, entry);
    curl_easy_setopt(c, CURLOPT_RESOLVE, names);
    url = af_xasprintf("https://accelfit.accelfit.svc:%d/healthz", s.port);
    af_test_http(c, NULL, url, NULL, 0, NULL, &r);
    ck_assert_int_eq(r.curl_rc, CURLE_OK);
    ck_assert_int_eq(r.status, 200);
    af_test_resp_free(&r);
    af_free(url);
    url = af_xasprintf("https://accelfit.elsewhere.svc:%d/healthz", s.port);
    af_test_http(c, NULL, url, NULL, 0, NULL, &r);
    ck_assert_int_eq(r.curl_rc, CURLE_PEER_FAILED_VERIFICATION);
    af_test_resp_free(&r);
    af_free(url);
    curl_easy_cleanup(c);
    curl_slist_free_all(names);
    ck_assert_int_eq(af_test_server_stop(&s), 0);
}
END_TEST

/* ---- the validation itself refuses what the API server refuses -------------------------------- */

static const struct {
    const char *path;   /* a JSONPatch op applied to the recorded pod a-gpu-inference */
    const char *why;    /* part of the reason */
} invalid[] = {
    {"{\"op\":\"remove\",\"path\":\"/spec/containers/0/resources/limits/nvidia.com~1gpu\"}",
     "Limit must be set"},
    {"{\"op\":\"replace\",\"path\":\"/spec/containers/0/resources/limits/nvidia.com~1gpu\","
     "\"value\":\"2\"}",
     "must be equal to nvidia.com/gpu limit"},
    {"{\"op\":\"replace\",\"path\":\"/spec/containers/0/resources/requests/nvidia.com~1gpu\","
     "\"value\":\"500m\"}",
     "must be an integer"},
    {"{\"op\":\"add\",\"path\":\"/spec/containers/0/resources/requests/gpu\",\"value\":\"1\"}",
     "requests[gpu]"},
    {"{\"op\":\"add\",\"path\":\"/spec/containers/0/env\",\"value\":[{\"name\":\"1X\"}]}",
     "env[0].name"},
    {"{\"op\":\"replace\",\"path\":\"/spec/containers/0/image\",\"value\":\"\"}", "image"},
    {"{\"op\":\"replace\",\"path\":\"/spec/containers/0/image\",\"value\":\"img \"}",
     "whitespace"},
    {"{\"op\":\"add\",\"path\":\"/spec/tolerations/-\",\"value\":{\"key\":\"k\",\"operator\":"
     "\"Exists\",\"value\":\"v\"}}",
     "value must be empty"},
    {"{\"op\":\"add\",\"path\":\"/spec/tolerations/-\",\"value\":{\"key\":\"k\",\"effect\":"
     "\"Sometimes\"}}",
     "Unsupported value"},
    {"{\"op\":\"add\",\"path\":\"/spec/tolerations/-\",\"value\":{\"key\":\"k\",\"effect\":"
     "\"NoSchedule\",\"tolerationSeconds\":5}}",
     "NoExecute"},
    {"{\"op\":\"add\",\"path\":\"/spec/tolerations/-\",\"value\":{\"operator\":\"Equal\"}}",
     "key` is empty"},
    {"{\"op\":\"add\",\"path\":\"/metadata/annotations/bad key\",\"value\":\"x\"}",
     "annotations"},
    {"{\"op\":\"add\",\"path\":\"/metadata/annotations/Example.com~1k\",\"value\":\"x\"}",
     "annotations"},
};

START_TEST(test_validation_refuses_what_the_api_server_refuses)
{
    size_t len;
    char *text = af_test_read(ADM "/ignore/patch/a-gpu-inference/webhook-request.json", &len);
    char *op = af_xasprintf("[%s]", invalid[_i].path), why[512] = "";
    json_t *review = json_loadb(text, len, 0, NULL), *patch = json_loads(op, 0, NULL), *pod;

    ck_assert(review && patch);
    ck_assert_msg(af_test_pod_valid(at(review, "request", "object"), why, sizeof(why)), "%s",
                  why);
    pod = af_test_jsonpatch_apply(at(review, "request", "object"), patch, why, sizeof(why));
    ck_assert_msg(pod != NULL, "%s", why);
    ck_assert_msg(!af_test_pod_valid(pod, why, sizeof(why)), "%s passed", invalid[_i].path);
    ck_assert_msg(strstr(why, invalid[_i].why), "'%s' does not say '%s'", why, invalid[_i].why);
    json_decref(pod);
    json_decref(patch);
    json_decref(review);
    af_free(op);
    af_free(text);
}
END_TEST

/* What the API server stored after a patch it accepted passes too. */
START_TEST(test_the_stored_pod_is_valid)
{
    size_t len;
    char *text = af_test_read(ADM "/ignore/patch/a-gpu-inference/pod-stored.json", &len);
    char why[512] = "";
    json_t *pod = json_loadb(text, len, 0, NULL);

    ck_assert_ptr_nonnull(pod);
    ck_assert_msg(af_test_pod_valid(pod, why, sizeof(why)), "%s", why);
    json_decref(pod);
    af_free(text);
}
END_TEST

static Suite *af_webhook_tls_suite(void)
{
    Suite *s = suite_create("webhook_tls");
    TCase *tc = tcase_create("apiserver");

    tcase_add_checked_fixture(tc, make_certs, drop_dir_name);
    tcase_add_test(tc, test_recorded_reviews_get_the_variant_over_tls);
    tcase_add_test(tc, test_recorded_reviews_get_annotations_only_on_the_source);
    tcase_add_test(tc, test_the_certificate_is_what_the_api_server_verifies);
    suite_add_tcase(s, tc);

    tc = tcase_create("rules");
    tcase_add_loop_test(tc, test_validation_refuses_what_the_api_server_refuses, 0,
                        (int)AF_ARRAY_SIZE(invalid));
    tcase_add_test(tc, test_the_stored_pod_is_valid);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_webhook_tls_suite());
}
