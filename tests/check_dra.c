/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Dynamic Resource Allocation (accelfit/dra.h): the CEL terms accelfit reads and the ones it
 * leaves unknown; the recorded driver slices (tests/fixtures/dra) as devices of the right
 * resource, class and memory; and decisions on a mixed cluster
 * (tests/fixtures/clusters/dra-mixed.yaml) through the transport-free service: claim pods are
 * placed where their claims' devices are free, a shared claim counts once, a node with both a
 * device plugin and DRA counts its devices once, and /explain shows the claims.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/dra.h"
#include "accelfit/metrics.h"
#include "accelfit/service.h"
#include "accelfit/simulate.h"
#include "accelfit/util.h"
#include "support/fake_api.h"
#include "support/http_client.h"
#include "support/support.h"

#define MIXED "tests/fixtures/clusters/dra-mixed.yaml"
#define A100 "ip-10-0-1-20.ec2.internal"
#define MIG "ip-10-0-2-30.ec2.internal"
#define TRN "ip-10-0-3-40.ec2.internal"

/* ---- records from files -------------------------------------------------------------------- */

struct gather {
    struct af_dra_slice *slices[64];
    struct af_dra_claim *claims[64], *templates[64];
    struct af_dra_class *classes[64];
    size_t n[AF_DRA_KINDS];
};

static void gather_cb(void *ud, struct af_dra_obj *o)
{
    struct gather *g = ud;
    size_t i = g->n[o->kind]++;

    ck_assert_uint_lt(i, 64);
    if (o->kind == AF_DRA_SLICE)
        g->slices[i] = o->slice;
    else if (o->kind == AF_DRA_CLAIM)
        g->claims[i] = o->claim;
    else if (o->kind == AF_DRA_TEMPLATE)
        g->templates[i] = o->claim;
    else
        g->classes[i] = o->cls;
    memset(o, 0, sizeof(*o));
}

static void gather_file(struct gather *g, const char *path)
{
    size_t len;
    char *text = af_test_read(path, &len);
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_codec_decode_cluster_dra(path, text, len, gather_cb, g, &err) == 0, "%s: %s",
                  path, err.text);
    af_free(text);
}

static struct af_dra *build(struct gather *g)
{
    struct af_dra *d = af_dra_build(g->slices, g->n[AF_DRA_SLICE], g->claims, g->n[AF_DRA_CLAIM],
                                    g->templates, g->n[AF_DRA_TEMPLATE], g->classes,
                                    g->n[AF_DRA_CLASS]);
    for (size_t i = 0; i < g->n[AF_DRA_SLICE]; i++)
        af_dra_slice_unref(g->slices[i]);
    for (size_t i = 0; i < g->n[AF_DRA_CLAIM]; i++)
        af_dra_claim_unref(g->claims[i]);
    for (size_t i = 0; i < g->n[AF_DRA_TEMPLATE]; i++)
        af_dra_claim_unref(g->templates[i]);
    for (size_t i = 0; i < g->n[AF_DRA_CLASS]; i++)
        af_dra_class_unref(g->classes[i]);
    memset(g, 0, sizeof(*g));
    return d;
}

/* ---- CEL ---------------------------------------------------------------------------------- */

static const struct {
    const char *expr;
    size_t terms;
    int unknown;
} cel_cases[] = {
    {"device.driver == 'gpu.nvidia.com'", 1, 0},
    {"device.driver == \"neuron.aws.com\"", 1, 0},
    {"device.driver == 'gpu.nvidia.com' && "
     "device.attributes['gpu.nvidia.com'].type == 'mig'", 2, 0},
    {"device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'", 1, 0},
    {"device.attributes['neuron.aws.com'].instanceType == 'trn2.48xlarge'", 1, 0},
    {"(device.attributes['gpu.nvidia.com'].profile == '1g.10gb')", 1, 0},
    /* a disjunction narrows nothing */
    {"device.attributes['gpu.nvidia.com'].profile == '4g.40gb' || "
     "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'", 0, 1},
    /* a term it cannot read is unknown; the one it can still narrows */
    {"device.driver == 'gpu.nvidia.com' && device.capacity['gpu.nvidia.com'].memory.compareTo("
     "quantity('40Gi')) >= 0", 1, 1},
    {"device.attributes['gpu.nvidia.com'].architecture == 'Hopper'", 0, 1},
    {"device.attributes['gpu.nvidia.com'].productName != 'NVIDIA A10'", 0, 1},
    {"'&&' == device.driver", 0, 1},
    {"", 0, 1},
};

START_TEST(test_cel_terms_read_and_unknown)
{
    struct af_dra_selector sel;

    memset(&sel, 0, sizeof(sel));
    af_dra_selector_parse(&sel, cel_cases[_i].expr);
    ck_assert_msg(sel.n_terms == cel_cases[_i].terms && sel.unknown == cel_cases[_i].unknown,
                  "'%s': %zu terms, %d unknown", cel_cases[_i].expr, sel.n_terms, sel.unknown);
    af_dra_selector_clear(&sel);
}
END_TEST

/* ---- recorded slices ------------------------------------------------------------------------ */

START_TEST(test_recorded_slices_are_devices_of_their_class)
{
    struct gather g;
    struct af_dra *d;
    const struct af_dra_node *n;

    memset(&g, 0, sizeof(g));
    gather_file(&g, "tests/fixtures/dra/deviceclasses.yaml");
    gather_file(&g, "tests/fixtures/dra/nvidia-gpu-slice.yaml");
    gather_file(&g, "tests/fixtures/dra/nvidia-mig-slice.yaml");
    gather_file(&g, "tests/fixtures/dra/neuron-slice.yaml");
    ck_assert_uint_eq(g.n[AF_DRA_CLASS], 3);
    ck_assert_uint_eq(g.n[AF_DRA_SLICE], 3);
    d = build(&g);

    n = af_dra_find_node(d, A100);
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(n->devices.v[AF_RES_GPU], 8);
    ck_assert_int_eq(n->cls, AF_CLASS_NVIDIA_A100);
    ck_assert_double_eq_tol(n->dev_mem_gib, 40.0, 0.01);
    ck_assert_str_eq(n->driver, "gpu.nvidia.com");

    n = af_dra_find_node(d, MIG);
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(n->devices.v[AF_RES_MIG], 6);
    ck_assert_int_eq(n->devices.v[AF_RES_GPU], 0);
    ck_assert_int_eq(n->cls, AF_CLASS_NVIDIA_H100);
    ck_assert_int_eq(n->n_mig, 3);   /* 4g.40gb, 3g.40gb, 1g.10gb */

    n = af_dra_find_node(d, TRN);
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(n->devices.v[AF_RES_NEURONDEVICE], 16);
    ck_assert_int_eq(n->cls, AF_CLASS_TRAINIUM2);
    ck_assert_double_eq_tol(n->dev_mem_gib, 96.0, 0.01);

    /* the classes say which devices they select */
    ck_assert_int_eq(af_dra_class_res(af_dra_find_class(d, "mig.nvidia.com"), "mig.nvidia.com"),
                     AF_RES_MIG);
    ck_assert_int_eq(af_dra_class_res(af_dra_find_class(d, "gpu.nvidia.com"), "gpu.nvidia.com"),
                     AF_RES_GPU);
    ck_assert_int_eq(af_dra_class_res(NULL, "neuron.aws.com"), AF_RES_NEURONDEVICE);
    ck_assert_int_eq(af_dra_class_res(NULL, "example.com/fpga"), -1);
    af_dra_unref(d);
}
END_TEST

/* A driver replacing a pool's slices: only the newest generation counts. */
START_TEST(test_older_pool_generation_is_ignored)
{
    static const char text[] =
        "{\"kind\":\"List\",\"items\":["
        "{\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":\"old\"},\"spec\":{\"driver\":"
        "\"gpu.nvidia.com\",\"nodeName\":\"n1\",\"pool\":{\"name\":\"n1\",\"generation\":1},"
        "\"devices\":[{\"name\":\"gpu-0\"},{\"name\":\"gpu-1\"}]}},"
        "{\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":\"new\"},\"spec\":{\"driver\":"
        "\"gpu.nvidia.com\",\"nodeName\":\"n1\",\"pool\":{\"name\":\"n1\",\"generation\":2},"
        "\"devices\":[{\"name\":\"gpu-0\"}]}},"
        "{\"kind\":\"ResourceSlice\",\"metadata\":{\"name\":\"net\"},\"spec\":{\"driver\":"
        "\"dra.net\",\"nodeName\":\"n1\",\"pool\":{\"name\":\"n1\",\"generation\":1},"
        "\"devices\":[{\"name\":\"eth1\"}]}}]}";
    struct gather g;
    struct af_error err;
    struct af_dra *d;
    const struct af_dra_node *n;

    memset(&g, 0, sizeof(g));
    ck_assert_int_eq(af_codec_decode_cluster_dra("t.json", text, strlen(text), gather_cb, &g,
                                                 &err),
                     0);
    d = build(&g);
    n = af_dra_find_node(d, "n1");
    ck_assert_ptr_nonnull(n);
    ck_assert_int_eq(n->devices.v[AF_RES_GPU], 1);
    ck_assert_uint_eq(d->stale_slices, 1);
    ck_assert_uint_eq(d->other_devices, 1);   /* the network device is not an accelerator */
    af_dra_unref(d);
}
END_TEST

/* A DRA object without a name in a cluster file is named with its place. */
START_TEST(test_nameless_slice_in_a_cluster_file_is_an_error)
{
    static const char text[] = "{\"kind\":\"List\",\"items\":[{\"kind\":\"ResourceSlice\","
                               "\"metadata\":{},\"spec\":{}}]}";
    struct gather g;
    struct af_error err;

    memset(&g, 0, sizeof(g));
    memset(&err, 0, sizeof(err));
    ck_assert_int_ne(af_codec_decode_cluster_dra("c.json", text, strlen(text), gather_cb, &g,
                                                 &err),
                     0);
    ck_assert_ptr_nonnull(strstr(err.text, "items[0]"));
    ck_assert_ptr_nonnull(strstr(err.text, "ResourceSlice"));
}
END_TEST

/* ---- decisions on the mixed cluster ------------------------------------------------------- */

static struct af_config_holder holder;
static struct af_publisher pub;
static struct af_service svc;

/* The mixed cluster with `extra` (items of its List, or NULL) appended. */
static void setup_with(const char *extra)
{
    struct af_config *cfg = NULL;
    struct af_error err;
    struct af_cache *cache = af_cache_new();
    struct af_dra *dra = NULL;
    size_t len;
    char *file = af_test_read(MIXED, &len);
    char *text = af_xasprintf("%s%s", file, extra ? extra : "");

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&cfg, NULL, NULL, &err), 0);
    af_config_holder_init(&holder, cfg);
    af_publisher_init(&pub);
    memset(&svc, 0, sizeof(svc));
    svc.config = &holder;
    svc.pub = &pub;
    svc.when_not_ready = AF_NOT_READY_REJECT;
    len = strlen(text);
    ck_assert_msg(af_codec_decode_cluster(cfg, MIXED, text, len, af_cache_upsert_item, cache,
                                          &err) == 0,
                  "%s", err.text);
    ck_assert_msg(af_codec_cluster_dra(MIXED, text, len, &dra, &err) == 0, "%s", err.text);
    ck_assert_ptr_nonnull(dra);
    (void)af_cache_set_dra(cache, dra);
    af_cache_set_synced(cache, true);
    af_publisher_publish(&pub, af_cache_snapshot(cache));
    af_cache_free(cache);
    af_free(text);
    af_free(file);
}

static void setup(void)
{
    setup_with(NULL);
}

static void teardown(void)
{
    af_publisher_destroy(&pub);
    af_config_holder_destroy(&holder);
}

static const char *const all_nodes =
    "[\"dp-a10g\",\"" A100 "\",\"" MIG "\",\"" TRN "\",\"cpu-c6i\",\"both-l4\"]";

/* A pending pod of namespace ml naming `claims` (a JSON array). */
static json_t *call(enum af_verb verb, const char *claims)
{
    char *body = af_xasprintf(
        "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"uid-p\"},"
        "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\","
        "\"memory\":\"1Gi\"}}}],\"resourceClaims\":%s}},\"Nodes\":null,\"NodeNames\":%s}",
        claims, all_nodes);
    struct af_buf out = AF_BUF_INIT(4u << 20);
    struct af_request_stats st;
    json_t *j;

    memset(&st, 0, sizeof(st));
    ck_assert_int_eq(af_service_handle_stats(&svc, verb, body, strlen(body), &out, &st), 200);
    j = json_loadb(out.buf, out.len, 0, NULL);
    ck_assert_msg(j != NULL, "not JSON: %s", out.buf);
    af_buf_release(&out);
    af_free(body);
    return j;
}

/* The NodeNames a filter passed, "a,b" (sorted as sent). */
static void passed(json_t *r, char *out, size_t n)
{
    json_t *names = json_object_get(r, "NodeNames"), *v;
    size_t i, used = 0;

    out[0] = '\0';
    json_array_foreach(names, i, v) {
        used += (size_t)snprintf(out + used, n - used, "%s%s", used ? "," : "",
                                 json_string_value(v));
        if (used >= n)
            break;
    }
}

static const char *failed_reason(json_t *r, const char *node)
{
    const char *s = json_string_value(json_object_get(json_object_get(r, "FailedNodes"), node));
    if (!s)
        s = json_string_value(
            json_object_get(json_object_get(r, "FailedAndUnresolvableNodes"), node));
    return s ? s : "";
}

START_TEST(test_nodes_carry_their_dra_devices_once)
{
    struct af_snapshot *s = af_publisher_acquire(&pub);
    const struct af_node_view *v;

    v = af_snapshot_find_node(s, A100);
    ck_assert_int_eq(v->info->allocatable.v[AF_RES_GPU], 8);
    ck_assert_int_eq(v->used.v[AF_RES_GPU], 1);   /* one claim, shared by two pods */
    ck_assert_int_eq(v->info->cls, AF_CLASS_NVIDIA_A100);
    v = af_snapshot_find_node(s, TRN);
    ck_assert_int_eq(v->info->allocatable.v[AF_RES_NEURONDEVICE], 16);
    v = af_snapshot_find_node(s, MIG);
    ck_assert_int_eq(v->info->allocatable.v[AF_RES_MIG], 6);
    /* device plugin and DRA for the same kind: reported, counted once */
    v = af_snapshot_find_node(s, "both-l4");
    ck_assert_int_eq(v->info->allocatable.v[AF_RES_GPU], 1);
    ck_assert(v->info->dra_both);
    v = af_snapshot_find_node(s, "dp-a10g");
    ck_assert_ptr_null(v->info->dra_driver);
    af_snapshot_unref(s);
}
END_TEST

START_TEST(test_template_pod_goes_where_its_devices_are_free)
{
    char got[512];
    json_t *r = call(AF_VERB_FILTER,
                     "[{\"name\":\"gpus\",\"resourceClaimTemplateName\":\"two-gpus\"}]");

    passed(r, got, sizeof(got));
    ck_assert_str_eq(got, A100);
    /* judged as a pod requesting two GPUs: the device-plugin node has one */
    ck_assert_msg(strstr(failed_reason(r, "dp-a10g"), "requests 2 nvidia.com/gpu") != NULL, "%s",
                  failed_reason(r, "dp-a10g"));
    json_decref(r);
}
END_TEST

START_TEST(test_selector_on_product_narrows)
{
    char got[512];
    json_t *r = call(AF_VERB_FILTER,
                     "[{\"name\":\"g\",\"resourceClaimTemplateName\":\"one-h100\"}]");

    passed(r, got, sizeof(got));
    ck_assert_str_eq(got, "");
    ck_assert_msg(strstr(failed_reason(r, A100), "0 free that match") != NULL, "%s",
                  failed_reason(r, A100));
    json_decref(r);
}
END_TEST

START_TEST(test_first_available_takes_any_alternative_a_node_has)
{
    char got[512];
    json_t *r = call(AF_VERB_FILTER,
                     "[{\"name\":\"g\",\"resourceClaimTemplateName\":\"small-slice\"}]");

    passed(r, got, sizeof(got));
    /* a 1g.10gb MIG slice on the H100 node, or a whole GPU on the A100 and L4 nodes */
    ck_assert_str_eq(got, A100 "," MIG ",both-l4");
    ck_assert_ptr_nonnull(strstr(failed_reason(r, TRN), "or an alternative"));
    json_decref(r);
}
END_TEST

START_TEST(test_neuron_template_goes_to_the_trainium_node)
{
    char got[512];
    json_t *r = call(AF_VERB_FILTER,
                     "[{\"name\":\"n\",\"resourceClaimTemplateName\":\"four-neurons\"}]");

    passed(r, got, sizeof(got));
    ck_assert_str_eq(got, TRN);
    json_decref(r);
}
END_TEST

START_TEST(test_pod_sharing_an_allocated_claim_follows_it)
{
    char got[512];
    json_t *r = call(AF_VERB_FILTER, "[{\"name\":\"g\",\"resourceClaimName\":\"shared-gpu\"}]");

    passed(r, got, sizeof(got));
    ck_assert_str_eq(got, A100);
    ck_assert_ptr_nonnull(strstr(failed_reason(r, MIG), "allocated claim is on node " A100));
    json_decref(r);
}
END_TEST

START_TEST(test_prioritize_prices_the_claimed_devices)
{
    json_t *r = call(AF_VERB_PRIORITIZE,
                     "[{\"name\":\"gpus\",\"resourceClaimTemplateName\":\"two-gpus\"}]");

    ck_assert(json_is_array(r));
    ck_assert_uint_eq(json_array_size(r), 6);
    json_decref(r);
}
END_TEST

START_TEST(test_explain_shows_claims_and_devices)
{
    json_t *r = call(AF_VERB_EXPLAIN,
                     "[{\"name\":\"gpus\",\"resourceClaimTemplateName\":\"two-gpus\"},"
                     "{\"name\":\"x\",\"resourceClaimTemplateName\":\"no-such\"}]");
    json_t *dra = json_object_get(r, "dra"), *c0, *nodes, *n;
    size_t i;
    bool saw_both = false;

    ck_assert_ptr_nonnull(dra);
    ck_assert_str_eq(json_string_value(json_object_get(dra, "needs")), "nvidia.com/gpu 2");
    c0 = json_array_get(json_object_get(dra, "claims"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(c0, "state")), "pending");
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(json_array_get(json_object_get(c0,
                                                                                       "requests"),
                                                                       0),
                                                        "choices"),
                                        0),
                         "counts_as")),
                     "nvidia.com/gpu");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(json_object_get(dra,
                                                                                      "claims"),
                                                                      1),
                                                       "state")),
                     "missing");
    nodes = json_object_get(r, "nodes");
    json_array_foreach(nodes, i, n) {
        json_t *nd = json_object_get(n, "dra");
        if (!strcmp(json_string_value(json_object_get(n, "name")), "both-l4")) {
            ck_assert(json_is_true(json_object_get(nd, "device_plugin_too")));
            saw_both = true;
        }
    }
    ck_assert(saw_both);
    json_decref(r);
}
END_TEST

START_TEST(test_shared_claim_counts_on_its_first_pod)
{
    struct af_snapshot *s = af_publisher_acquire(&pub);
    struct af_pod_kept ta, tb;
    const struct af_pod_info *a = af_pod_brief_info(af_snapshot_find_pod(s, "ml", "share-a"), &ta);
    const struct af_pod_info *b = af_pod_brief_info(af_snapshot_find_pod(s, "ml", "share-b"), &tb);

    ck_assert_int_eq(a->requests.v[AF_RES_GPU], 1);   /* its spend and costs carry the GPU */
    ck_assert_int_eq(a->dra.v[AF_RES_GPU], 1);
    ck_assert_int_eq(b->requests.v[AF_RES_GPU], 0);
    ck_assert_int_eq(af_snapshot_find_node(s, A100)->used.v[AF_RES_GPU], 1);
    af_snapshot_unref(s);
}
END_TEST

/* The GPUs the cached pod `ns`/`name` requests, its claims' included. */
static int64_t pod_gpus(const struct af_snapshot *s, const char *ns, const char *name)
{
    struct af_resources r;

    af_pod_brief_requests(af_snapshot_find_pod(s, ns, name), &r);
    return r.v[AF_RES_GPU];
}

/* The DRA objects change under cached pods and nodes: a claim allocated after its pod was
 * seen moves its devices onto the pod, once; without DRA the nodes have no such devices. */
START_TEST(test_dra_changes_under_cached_pods)
{
    struct af_config *cfg = af_config_holder_get(&holder);
    struct af_cache *cache = af_cache_new();
    struct af_snapshot *s;
    struct af_error err;
    struct gather g;
    size_t len;
    char *text = af_test_read(MIXED, &len);

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_codec_decode_cluster(cfg, MIXED, text, len, af_cache_upsert_item, cache,
                                             &err),
                     0);
    memset(&g, 0, sizeof(g));
    gather_file(&g, MIXED);
    for (size_t i = 0; i < g.n[AF_DRA_CLAIM]; i++)   /* first without the claims */
        af_dra_claim_unref(g.claims[i]);
    g.n[AF_DRA_CLAIM] = 0;
    (void)af_cache_set_dra(cache, build(&g));
    s = af_cache_snapshot(cache);
    ck_assert_int_eq(af_snapshot_find_node(s, A100)->info->allocatable.v[AF_RES_GPU], 8);
    ck_assert_int_eq(af_snapshot_find_node(s, A100)->used.v[AF_RES_GPU], 0);
    ck_assert_int_eq(pod_gpus(s, "ml", "share-a"), 0);

    gather_file(&g, MIXED);
    (void)af_cache_set_dra(cache, build(&g));
    af_snapshot_unref(s);
    s = af_cache_snapshot(cache);
    ck_assert_int_eq(af_snapshot_find_node(s, A100)->used.v[AF_RES_GPU], 1);
    ck_assert_int_eq(pod_gpus(s, "ml", "share-a"), 1);

    (void)af_cache_set_dra(cache, NULL);
    af_snapshot_unref(s);
    s = af_cache_snapshot(cache);
    ck_assert_int_eq(af_snapshot_find_node(s, A100)->info->allocatable.v[AF_RES_GPU], 0);
    ck_assert_int_eq(af_snapshot_find_node(s, A100)->used.v[AF_RES_GPU], 0);
    ck_assert_int_eq(af_snapshot_find_node(s, "both-l4")->info->allocatable.v[AF_RES_GPU], 1);
    ck_assert(!af_snapshot_find_node(s, "both-l4")->info->dra_both);
    ck_assert_int_eq(pod_gpus(s, "ml", "share-a"), 0);
    af_snapshot_unref(s);
    af_cache_free(cache);
    af_config_unref(cfg);
    af_free(text);
}
END_TEST

/*
 * Extended resources served by DRA (Kubernetes 1.34+): a DeviceClass whose extendedResourceName
 * a pod requests, or the class a deviceclass.resource.kubernetes.io/ name names, serves it with
 * its devices. A pending pod asking for example.com/a100 is judged as asking for that many A100
 * GPUs (only the A100 DRA node has them, not the CPU node a name accelfit does not know would
 * leave it free to take); once kube-scheduler has made and allocated its claim
 * (status.extendedResourceClaimStatus), the claim's devices are what it holds, counted once
 * even for a name accelfit tracks (nvidia.com/gpu).
 */
static const char ext_items[] =
    "- apiVersion: resource.k8s.io/v1\n"
    "  kind: DeviceClass\n"
    "  metadata: {name: a100.example.com}\n"
    "  spec:\n"
    "    extendedResourceName: example.com/a100\n"
    "    selectors:\n"
    "    - cel: {expression: \"device.driver == 'gpu.nvidia.com' && "
    "device.attributes['gpu.nvidia.com'].type == 'gpu'\"}\n"
    "- apiVersion: resource.k8s.io/v1\n"
    "  kind: ResourceClaim\n"
    "  metadata: {name: ext-bound-extended-resources-x7k2q, namespace: ml, uid: claim-ext}\n"
    "  spec: {devices: {requests: [{name: container-0-request-0, exactly: {deviceClassName: "
    "gpu.nvidia.com, allocationMode: ExactCount, count: 2}}]}}\n"
    "  status:\n"
    "    allocation: {devices: {results: [\n"
    "      {request: container-0-request-0, driver: gpu.nvidia.com, pool: " A100 ", device: gpu-1},\n"
    "      {request: container-0-request-0, driver: gpu.nvidia.com, pool: " A100 ", device: gpu-2}"
    "]}}\n"
    "    reservedFor: [{resource: pods, name: ext-bound, uid: uid-ext-bound}]\n"
    "- apiVersion: v1\n"
    "  kind: Pod\n"
    "  metadata: {name: ext-bound, namespace: ml, uid: uid-ext-bound}\n"
    "  spec:\n"
    "    nodeName: " A100 "\n"
    "    containers:\n"
    "    - name: c\n"
    "      image: x\n"
    "      resources:\n"
    "        requests: {cpu: '1', nvidia.com/gpu: '2'}\n"
    "        limits: {nvidia.com/gpu: '2'}\n"
    "  status:\n"
    "    phase: Running\n"
    "    extendedResourceClaimStatus:\n"
    "      resourceClaimName: ext-bound-extended-resources-x7k2q\n"
    "      requestMappings: [{containerName: c, resourceName: nvidia.com/gpu, "
    "requestName: container-0-request-0}]\n";

/* A filter of a pending pod of namespace ml whose one container requests `res` (JSON). */
static json_t *call_requests(const char *res)
{
    char *body = af_xasprintf(
        "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"uid-p\"},"
        "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":%s,"
        "\"limits\":%s}}]}},\"Nodes\":null,\"NodeNames\":%s}",
        res, res, all_nodes);
    struct af_buf out = AF_BUF_INIT(4u << 20);
    struct af_request_stats st;
    json_t *j;

    memset(&st, 0, sizeof(st));
    ck_assert_int_eq(af_service_handle_stats(&svc, AF_VERB_FILTER, body, strlen(body), &out, &st),
                     200);
    j = json_loadb(out.buf, out.len, 0, NULL);
    ck_assert_msg(j != NULL, "not JSON: %s", out.buf);
    af_buf_release(&out);
    af_free(body);
    return j;
}

START_TEST(test_extended_resource_is_served_by_its_device_class)
{
    char got[512];
    struct af_snapshot *s;
    const struct af_pod_info *p;
    json_t *r;

    teardown();
    setup_with(ext_items);
    r = call_requests("{\"cpu\":\"1\",\"example.com/a100\":\"2\"}");
    passed(r, got, sizeof(got));
    ck_assert_str_eq(got, A100);
    json_decref(r);
    r = call_requests("{\"cpu\":\"1\",\"deviceclass.resource.kubernetes.io/neuron.aws.com\":\"4\"}");
    passed(r, got, sizeof(got));
    ck_assert_str_eq(got, TRN);
    json_decref(r);
    /* nine A100s: one more than the node has */
    r = call_requests("{\"cpu\":\"1\",\"example.com/a100\":\"9\"}");
    passed(r, got, sizeof(got));
    ck_assert_str_eq(got, "");
    json_decref(r);
    /* a name no class serves asks for nothing accelfit can count */
    r = call_requests("{\"cpu\":\"1\",\"example.com/fpga\":\"1\"}");
    passed(r, got, sizeof(got));
    ck_assert_ptr_nonnull(strstr(got, "cpu-c6i"));
    json_decref(r);

    s = af_publisher_acquire(&pub);
    ck_assert_ptr_nonnull(af_snapshot_find_pod(s, "ml", "ext-bound"));
    p = af_snapshot_find_pod(s, "ml", "ext-bound")->full;   /* not plain: kept whole */
    ck_assert_ptr_nonnull(p);
    ck_assert(p->ext_claim);
    ck_assert_int_eq(p->requests.v[AF_RES_GPU], 2);   /* the claim's two, not four */
    ck_assert_int_eq(p->dra.v[AF_RES_GPU], 2);
    /* the shared claim's one and this pod's two */
    ck_assert_int_eq(af_snapshot_find_node(s, A100)->used.v[AF_RES_GPU], 3);
    af_snapshot_unref(s);
}
END_TEST

/* /metrics names what DRA holds: objects per kind, the pods that name claims, the devices per
 * resource and the ones allocated claims hold, the nodes counted once for having both. */
START_TEST(test_metrics_name_the_dra_state)
{
    static const char *const want[] = {
        "accelfit_dra_objects{kind=\"resourceslice\"} 4\n",
        "accelfit_dra_objects{kind=\"resourceclaim\"} 1\n",
        "accelfit_dra_objects{kind=\"resourceclaimtemplate\"} 5\n",
        "accelfit_dra_objects{kind=\"deviceclass\"} 3\n",
        "accelfit_dra_claim_pods{state=\"pending\"} 0\n",
        "accelfit_dra_claim_pods{state=\"bound\"} 2\n",
        "accelfit_dra_devices{resource=\"nvidia.com/gpu\",state=\"total\"} 9\n",
        "accelfit_dra_devices{resource=\"nvidia.com/gpu\",state=\"allocated\"} 1\n",
        "accelfit_dra_devices{resource=\"aws.amazon.com/neurondevice\",state=\"total\"} 16\n",
        "accelfit_dra_devices{resource=\"nvidia.com/mig-*\",state=\"total\"} 6\n",
        "accelfit_dra_nodes_with_device_plugin_too 1\n",
        "# TYPE accelfit_dra_index_bytes gauge\naccelfit_dra_index_bytes ",
    };
    struct af_buf out = AF_BUF_INIT(4u << 20);

    svc.metrics = af_metrics_new();
    ck_assert_int_eq(af_service_render_metrics(&svc, &out), 0);
    for (size_t i = 0; i < AF_ARRAY_SIZE(want); i++)
        ck_assert_msg(strstr(out.buf, want[i]), "no '%s' in:\n%s", want[i], out.buf);
    ck_assert_ptr_null(strstr(out.buf, "accelfit_dra_index_bytes 0\n"));
    af_buf_release(&out);
    af_metrics_free(svc.metrics);
    svc.metrics = NULL;
}
END_TEST

/* `accelfit simulate --cluster` reads the same objects: the DRA nodes have their devices, a pod
 * the devices its claims hold, and a node with both a device plugin and DRA counts them once. */
START_TEST(test_simulate_reads_claims_from_a_cluster_file)
{
    struct af_config *cfg = af_config_holder_get(&holder);
    struct af_sim_cluster cl;
    struct af_sim_trace tr;
    struct af_error err;
    size_t len, devices = 0;
    char *text = af_test_read(MIXED, &len);
    int a100 = -1, both = -1;

    memset(&cl, 0, sizeof(cl));
    memset(&tr, 0, sizeof(tr));
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_codec_decode_sim_cluster(cfg, MIXED, text, len, &cl, &tr, &err), 0);
    ck_assert_msg(af_sim_apply_dra(MIXED, text, len, &cl, &tr, &devices, &err) == 0, "%s",
                  err.text);
    ck_assert_uint_eq(devices, 8 + 6 + 16 + 1);
    for (size_t i = 0; i < cl.n_nodes; i++) {
        if (!strcmp(cl.nodes[i].info->name, A100))
            a100 = (int)i;
        if (!strcmp(cl.nodes[i].info->name, "both-l4"))
            both = (int)i;
    }
    ck_assert_int_ge(a100, 0);
    ck_assert_int_eq(cl.nodes[a100].info->allocatable.v[AF_RES_GPU], 8);
    ck_assert_int_eq(cl.nodes[both].info->allocatable.v[AF_RES_GPU], 1);
    ck_assert_uint_eq(tr.n_pods, 2);
    /* the shared claim's GPU, once */
    ck_assert_int_eq(tr.pods[0].info->requests.v[AF_RES_GPU] +
                         tr.pods[1].info->requests.v[AF_RES_GPU],
                     1);
    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
    af_config_unref(cfg);
    af_free(text);
}
END_TEST

/* A node the claim's selectors exclude has no room for the pod, as a full node has none: the
 * tiered fallback looks past it to a tier whose nodes have the devices. */
START_TEST(test_tiered_fallback_looks_past_nodes_the_claim_excludes)
{
    char *body = af_xasprintf(
        "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"u\","
        "\"annotations\":{\"accelfit.io/workload\":\"inference\",\"accelfit.io/model-params\":"
        "\"7B\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":"
        "{\"cpu\":\"1\",\"memory\":\"1Gi\"}}}],\"resourceClaims\":[{\"name\":\"g\","
        "\"resourceClaimTemplateName\":\"one-a100\"}]}},\"Nodes\":null,\"NodeNames\":%s}",
        all_nodes);
    struct af_buf out = AF_BUF_INIT(4u << 20);
    struct af_request_stats st;
    json_t *r;
    char got[512];

    memset(&st, 0, sizeof(st));
    ck_assert_int_eq(af_service_handle_stats(&svc, AF_VERB_FILTER, body, strlen(body), &out, &st),
                     200);
    r = json_loadb(out.buf, out.len, 0, NULL);
    passed(r, got, sizeof(got));
    ck_assert_str_eq(got, A100);
    ck_assert_msg(strstr(failed_reason(r, "both-l4"), "accelfit: DRA: ") != NULL, "%s",
                  failed_reason(r, "both-l4"));
    json_decref(r);
    af_buf_release(&out);
    af_free(body);
}
END_TEST

/* The ways a pod names its claims, each read as kube-scheduler 1.34 sends it. */
static const struct {
    const char *what, *claims, *status, *want;
} naming_cases[] = {
    {"a template", "[{\"name\":\"g\",\"resourceClaimTemplateName\":\"two-gpus\"}]", NULL, A100},
    {"the claim made from its template (status.resourceClaimStatuses), allocated",
     "[{\"name\":\"g\",\"resourceClaimTemplateName\":\"two-gpus\"}]",
     "{\"resourceClaimStatuses\":[{\"name\":\"g\",\"resourceClaimName\":\"shared-gpu\"}]}",
     A100},
    {"the claim made from its template, not yet in the cache: the template",
     "[{\"name\":\"g\",\"resourceClaimTemplateName\":\"four-neurons\"}]",
     "{\"resourceClaimStatuses\":[{\"name\":\"g\",\"resourceClaimName\":\"p-g-x7k2\"}]}", TRN},
    {"the v1alpha2 shape (source:)",
     "[{\"name\":\"g\",\"source\":{\"resourceClaimTemplateName\":\"four-neurons\"}}]", NULL, TRN},
    {"a claim the cluster does not have: unknown never narrows",
     "[{\"name\":\"g\",\"resourceClaimName\":\"no-such-claim\"}]", NULL,
     "dp-a10g," A100 "," MIG "," TRN ",cpu-c6i,both-l4"},
    {"two claims: both must fit one node",
     "[{\"name\":\"a\",\"resourceClaimTemplateName\":\"two-gpus\"},"
     "{\"name\":\"b\",\"resourceClaimTemplateName\":\"four-neurons\"}]",
     NULL, ""},
};

START_TEST(test_pods_name_their_claims_every_way)
{
    char *body = af_xasprintf(
        "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"uid-p\"},"
        "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\","
        "\"memory\":\"1Gi\"}}}],\"resourceClaims\":%s},\"status\":%s},\"Nodes\":null,"
        "\"NodeNames\":%s}",
        naming_cases[_i].claims, naming_cases[_i].status ? naming_cases[_i].status : "{}",
        all_nodes);
    struct af_buf out = AF_BUF_INIT(4u << 20);
    struct af_request_stats st;
    json_t *r;
    char got[512];

    memset(&st, 0, sizeof(st));
    ck_assert_int_eq(af_service_handle_stats(&svc, AF_VERB_FILTER, body, strlen(body), &out, &st),
                     200);
    r = json_loadb(out.buf, out.len, 0, NULL);
    passed(r, got, sizeof(got));
    ck_assert_msg(!strcmp(got, naming_cases[_i].want), "%s: passed '%s', not '%s'",
                  naming_cases[_i].what, got, naming_cases[_i].want);
    json_decref(r);
    af_buf_release(&out);
    af_free(body);
}
END_TEST

/* ---- the watch on an API server that serves resource.k8s.io/v1 ---------------------------- */

/* A slice of node `node` with `gpus` NVIDIA GPUs (a JSON object text; caller frees). */
static char *gpu_slice(const char *name, const char *node, int gpus)
{
    struct af_buf b = AF_BUF_INIT(0);
    char *s;

    ck_assert_int_eq(af_buf_printf(&b, "{\"object\": {\"kind\": \"ResourceSlice\", \"metadata\": "
                                       "{\"name\": \"%s\"}, \"spec\": {\"driver\": "
                                       "\"gpu.nvidia.com\", \"nodeName\": \"%s\", \"pool\": "
                                       "{\"name\": \"%s\", \"generation\": 1, "
                                       "\"resourceSliceCount\": 1}, \"devices\": [",
                                   name, node, node),
                     0);
    for (int i = 0; i < gpus; i++)
        ck_assert_int_eq(af_buf_printf(&b, "%s{\"name\": \"gpu-%d\", \"attributes\": {\"type\": "
                                           "{\"string\": \"gpu\"}, \"productName\": {\"string\": "
                                           "\"NVIDIA A10G\"}}}",
                                       i ? ", " : "", i),
                         0);
    ck_assert_int_eq(af_buf_puts(&b, "]}}}"), 0);
    s = af_xstrdup(b.buf);
    af_buf_release(&b);
    return s;
}

/* accelfit's /metrics holds `line`. */
static bool metrics_have(CURL *c, const struct af_test_server *srv, const char *line)
{
    struct af_test_resp r;
    char url[256];
    bool has;

    snprintf(url, sizeof(url), "%s/metrics", srv->base);
    has = af_test_http(c, NULL, url, NULL, 0, NULL, &r) == CURLE_OK && r.status == 200 &&
          r.body && strstr(r.body, line);
    af_test_resp_free(&r);
    return has;
}

/* How many LISTs of ResourceSlices the API server has answered. */
static int slice_lists(const struct af_test_fake_api *api)
{
    json_t *reqs = af_test_fake_api_admin(api, "requests", NULL), *r;
    size_t i;
    int n = 0;

    json_array_foreach(reqs, i, r) {
        const char *path = json_string_value(json_object_get(r, "path"));
        n += path && strstr(path, "/apis/resource.k8s.io/v1/resourceslices?limit=") != NULL;
    }
    json_decref(reqs);
    return n;
}

/*
 * accelfit finds resource.k8s.io/v1 by discovery, lists and watches it: a slice that appears
 * is in /metrics; the API server ends the watch with an in-band ERROR 410 Expired and forgets
 * its history, and accelfit lists again and keeps up: a slice added after the 410 and one
 * deleted are seen.
 */
START_TEST(test_dra_watch_survives_an_in_band_410)
{
    static const char *const extra[] = {"--dra", NULL};
    struct af_test_fake_api api;
    struct af_test_server srv;
    char *a, *b;
    int lists;
    CURL *c;

    if (!af_test_fake_api_start_with(&api, extra))
        return;
    a = gpu_slice("node-a-gpus", "node-a", 4);
    b = gpu_slice("node-b-gpus", "node-b", 2);
    af_test_fake_api_do(&api, "put_dra",
                        "{\"object\": {\"kind\": \"DeviceClass\", \"metadata\": {\"name\": "
                        "\"gpu.nvidia.com\"}, \"spec\": {\"selectors\": [{\"cel\": {\"expression\": "
                        "\"device.driver == 'gpu.nvidia.com'\"}}]}}}");
    af_test_fake_api_do(&api, "put_dra", a);
    {
        const char *const args[] = {"--kubeconfig", api.kubeconfig, NULL};
        af_test_server_start(&srv, args, false, NULL, NULL);
    }
    c = curl_easy_init();
    ck_assert_msg(AF_TEST_WAIT_FOR(60, metrics_have(c, &srv,
                                                    "accelfit_dra_devices{resource=\"nvidia.com/gpu\","
                                                    "state=\"total\"} 4\n")),
                  "the listed slice never showed (log: %s)", srv.log_path);
    ck_assert(AF_TEST_WAIT_FOR(60, metrics_have(c, &srv,
                                                "accelfit_dra_objects{kind=\"deviceclass\"} 1\n")));
    lists = slice_lists(&api);
    ck_assert_int_ge(lists, 1);

    /* the watch ends in an ERROR 410 Expired and the history is gone: only a new list
     * catches up */
    af_test_fake_api_do(&api, "expire_watches", NULL);
    af_test_fake_api_do(&api, "compact", NULL);
    af_test_fake_api_do(&api, "put_dra", b);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, metrics_have(c, &srv,
                                                    "accelfit_dra_devices{resource=\"nvidia.com/gpu\","
                                                    "state=\"total\"} 6\n")),
                  "the slice added after the 410 never showed (log: %s)", srv.log_path);
    ck_assert_int_gt(slice_lists(&api), lists);
    ck_assert(metrics_have(c, &srv, "accelfit_dra_objects{kind=\"resourceslice\"} 2\n"));
    /* and the watch after the new list goes on */
    af_test_fake_api_do(&api, "delete_dra", "{\"kind\": \"ResourceSlice\", \"name\": "
                                            "\"node-a-gpus\"}");
    ck_assert_msg(AF_TEST_WAIT_FOR(60, metrics_have(c, &srv,
                                                    "accelfit_dra_devices{resource=\"nvidia.com/gpu\","
                                                    "state=\"total\"} 2\n")),
                  "the deleted slice is still counted (log: %s)", srv.log_path);

    curl_easy_cleanup(c);
    ck_assert_int_eq(af_test_server_stop(&srv), 0);
    af_test_fake_api_stop(&api);
    af_free(a);
    af_free(b);
}
END_TEST

Suite *af_dra_suite(void)
{
    Suite *s = suite_create("dra");
    TCase *tc = tcase_create("records");

    tcase_add_loop_test(tc, test_cel_terms_read_and_unknown, 0, (int)AF_ARRAY_SIZE(cel_cases));
    tcase_add_test(tc, test_recorded_slices_are_devices_of_their_class);
    tcase_add_test(tc, test_older_pool_generation_is_ignored);
    tcase_add_test(tc, test_nameless_slice_in_a_cluster_file_is_an_error);
    suite_add_tcase(s, tc);

    tc = tcase_create("decisions");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_nodes_carry_their_dra_devices_once);
    tcase_add_test(tc, test_template_pod_goes_where_its_devices_are_free);
    tcase_add_test(tc, test_selector_on_product_narrows);
    tcase_add_test(tc, test_first_available_takes_any_alternative_a_node_has);
    tcase_add_test(tc, test_neuron_template_goes_to_the_trainium_node);
    tcase_add_test(tc, test_pod_sharing_an_allocated_claim_follows_it);
    tcase_add_test(tc, test_prioritize_prices_the_claimed_devices);
    tcase_add_test(tc, test_explain_shows_claims_and_devices);
    tcase_add_test(tc, test_shared_claim_counts_on_its_first_pod);
    tcase_add_test(tc, test_dra_changes_under_cached_pods);
    tcase_add_test(tc, test_simulate_reads_claims_from_a_cluster_file);
    tcase_add_test(tc, test_extended_resource_is_served_by_its_device_class);
    tcase_add_test(tc, test_metrics_name_the_dra_state);
    tcase_add_test(tc, test_tiered_fallback_looks_past_nodes_the_claim_excludes);
    tcase_add_loop_test(tc, test_pods_name_their_claims_every_way, 0,
                        (int)AF_ARRAY_SIZE(naming_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("watch");
    tcase_add_test(tc, test_dra_watch_survives_an_in_band_410);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_dra_suite());
}
