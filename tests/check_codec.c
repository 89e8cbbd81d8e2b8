/* SPDX-License-Identifier: Apache-2.0 */
/*
 * codec: ExtenderArgs from the recorded kube-scheduler bodies (both
 * nodeCacheCapable modes), case-insensitive keys and nulls, field-naming
 * errors for bad bodies, the filter and prioritize encoders, apiserver lists
 * and watch streams, and the demo cluster file.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "support/support.h"

/* A tiny hand-made catalog, so these tests do not depend on the shipped one. */
static struct af_instance_type types[] = {
    {.name = "c6i.4xlarge", .cls = AF_CLASS_CPU, .price_usd_hr = 0.68, .spot_discount_pct = -1},
    {.name = "g5.2xlarge", .cls = AF_CLASS_NVIDIA_A10G, .price_usd_hr = 1.212, .spot_discount_pct = 60},
    {.name = "inf2.xlarge", .cls = AF_CLASS_INFERENTIA2, .price_usd_hr = 0.758, .spot_discount_pct = -1},
    {.name = "p4d.24xlarge", .cls = AF_CLASS_NVIDIA_A100, .price_usd_hr = 32.77, .spot_discount_pct = -1},
    {.name = "trn1.32xlarge", .cls = AF_CLASS_TRAINIUM1, .price_usd_hr = 21.5, .spot_discount_pct = -1},
};
static struct af_catalog catalog = {types, AF_ARRAY_SIZE(types), "<test>", "us-east-1", 0, NULL, {0}};
static struct af_policy policy = {.default_spot_discount_pct = 65, .w_tier = 1};
static struct af_config config = {.catalog = &catalog, .policy = &policy};

/* ---- collecting list items ---------------------------------------------------------- */

struct items {
    struct af_node_info *nodes[64];
    size_t n_nodes;
    struct af_pod_info *pods[64];
    size_t n_pods;
};

static void collect(void *ud, struct af_node_info *node, struct af_pod_info *pod)
{
    struct items *it = ud;
    if (node) {
        if (it->n_nodes < AF_ARRAY_SIZE(it->nodes))
            it->nodes[it->n_nodes++] = node;
        else
            af_node_info_unref(node);
    }
    if (pod) {
        if (it->n_pods < AF_ARRAY_SIZE(it->pods))
            it->pods[it->n_pods++] = pod;
        else
            af_pod_info_unref(pod);
    }
}

static void items_release(struct items *it)
{
    for (size_t i = 0; i < it->n_nodes; i++)
        af_node_info_unref(it->nodes[i]);
    for (size_t i = 0; i < it->n_pods; i++)
        af_pod_info_unref(it->pods[i]);
    memset(it, 0, sizeof(*it));
}

static const struct af_node_info *find_node(const struct items *it, const char *name)
{
    for (size_t i = 0; i < it->n_nodes; i++)
        if (!strcmp(it->nodes[i]->name, name))
            return it->nodes[i];
    return NULL;
}

static const struct af_pod_info *find_pod(const struct items *it, const char *name)
{
    for (size_t i = 0; i < it->n_pods; i++)
        if (!strcmp(it->pods[i]->name, name))
            return it->pods[i];
    return NULL;
}

/* ---- ExtenderArgs from kube-scheduler --------------------------------------------------- */

#define P4D "ip-10-0-1-10.us-west-2.compute.internal"
#define G5 "ip-10-0-1-40.us-west-2.compute.internal"
#define TRN1 "ip-10-0-2-20.us-west-2.compute.internal"

static const struct {
    const char *file;
    bool nodes_mode;
    size_t count;
    const char *first, *second;
    const char *pod;
    int64_t gpu, neuron, neuroncore;
} sched_cases[] = {
    {"kube-scheduler/filter-nodecache-false.json", true, 2, P4D, G5, "gpu-train-0", 1, 0, 0},
    {"kube-scheduler/prioritize-nodecache-false.json", true, 2, P4D, G5, "gpu-train-0", 1, 0, 0},
    {"kube-scheduler/filter-nodecache-true.json", false, 2, G5, P4D, "gpu-train-1", 1, 0, 0},
    {"kube-scheduler/prioritize-nodecache-true.json", false, 2, G5, P4D, "gpu-train-1", 1, 0, 0},
    {"kube-scheduler/filter-nodecache-false-neuron.json", true, 1, TRN1, NULL, "neuron-train-0", 0,
     1, 0},
    {"kube-scheduler/filter-nodecache-true-neuron.json", false, 1, TRN1, NULL, "neuron-train-1", 0,
     1, 2},
};

static char *fixture(const char *rel, size_t *len)
{
    char path[256];
    snprintf(path, sizeof(path), "tests/fixtures/%s", rel);
    return af_test_read(path, len);
}

START_TEST(test_args_decode_recorded_scheduler_bodies)
{
    size_t len;
    char *body = fixture(sched_cases[_i].file, &len);
    struct af_ext_args *a = NULL;
    struct af_error err = {0};
    const struct af_pod_info *pod;

    ck_assert_msg(af_codec_decode_args(&config, body, len, &a, &err) == 0, "%s", err.text);
    ck_assert_int_eq(af_ext_args_nodes_mode(a), sched_cases[_i].nodes_mode);
    ck_assert_uint_eq(af_ext_args_count(a), sched_cases[_i].count);
    ck_assert_str_eq(af_ext_args_name(a, 0), sched_cases[_i].first);
    if (sched_cases[_i].second)
        ck_assert_str_eq(af_ext_args_name(a, 1), sched_cases[_i].second);
    ck_assert_ptr_null(af_ext_args_name(a, sched_cases[_i].count));
    pod = af_ext_args_pod(a);
    ck_assert_str_eq(pod->name, sched_cases[_i].pod);
    ck_assert_str_eq(pod->ns, "default");
    ck_assert_ptr_null(pod->node_name);
    ck_assert(!pod->terminal);
    ck_assert_int_eq(pod->requests.v[AF_RES_CPU], 4000);
    ck_assert_int_eq(pod->requests.v[AF_RES_MEMORY], 16LL << 30);
    ck_assert_int_eq(pod->requests.v[AF_RES_GPU], sched_cases[_i].gpu);
    ck_assert_int_eq(pod->requests.v[AF_RES_NEURON], sched_cases[_i].neuron);
    ck_assert_int_eq(pod->requests.v[AF_RES_NEURONCORE], sched_cases[_i].neuroncore);
    if (sched_cases[_i].nodes_mode) {
        const struct af_node_info *n = af_ext_args_node(a, 0);
        ck_assert_ptr_nonnull(n);
        ck_assert_str_eq(n->name, sched_cases[_i].first);
        ck_assert_int_ne(n->cls, AF_CLASS_UNKNOWN);
        ck_assert_int_gt(n->allocatable.v[AF_RES_CPU], 0);
    } else {
        ck_assert_ptr_null(af_ext_args_node(a, 0));
    }
    af_ext_args_free(a);
    free(body);
}
END_TEST

#define MINI_POD                                                                             \
    "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\"},\"spec\":{\"containers\":[{\"name\":" \
    "\"c\",\"resources\":{\"requests\":{\"cpu\":\"500m\"}}}]}}"

static const struct {
    const char *body;
    size_t count;
    bool nodes_mode;
} ci_cases[] = {
    {"{\"pod\":" MINI_POD ",\"nodes\":null,\"nodenames\":[\"a\",\"b\"]}", 2, false},
    {"{\"POD\":" MINI_POD ",\"NODENAMES\":[\"a\"]}", 1, false},
    {"{\"Pod\":" MINI_POD ",\"Nodes\":null,\"NodeNames\":null}", 0, false},
    {"{\"Pod\":" MINI_POD "}", 0, false},
    {"{\"Pod\":" MINI_POD ",\"Nodes\":{\"metadata\":{},\"items\":null},\"NodeNames\":null}", 0, true},
    {"{\"pOd\":" MINI_POD ",\"nOdEs\":{\"metadata\":{},\"items\":[{\"metadata\":{\"name\":\"x\"}}]},"
     "\"nodeNames\":null}",
     1, true},
};

START_TEST(test_args_keys_case_insensitive_and_null_accepted)
{
    struct af_ext_args *a = NULL;
    struct af_error err = {0};
    const char *b = ci_cases[_i].body;

    ck_assert_msg(af_codec_decode_args(&config, b, strlen(b), &a, &err) == 0, "%s", err.text);
    ck_assert_uint_eq(af_ext_args_count(a), ci_cases[_i].count);
    ck_assert_int_eq(af_ext_args_nodes_mode(a), ci_cases[_i].nodes_mode);
    ck_assert_str_eq(af_ext_args_pod(a)->name, "p");
    ck_assert_int_eq(af_ext_args_pod(a)->requests.v[AF_RES_CPU], 500);
    af_ext_args_free(a);
}
END_TEST

static const struct {
    const char *body;
    const char *want;
} bad_cases[] = {
    {"not json", "request body is not JSON: "},
    {"{\"Pod\":", "at line 1 column"},
    {"", "request body is not JSON"},
    {"[]", "request body: expected an object (ExtenderArgs), got array"},
    {"{}", "Pod: missing"},
    {"{\"Pod\":null}", "Pod: missing"},
    {"{\"Pod\":[]}", "Pod: expected an object, got array"},
    {"{\"Pod\":\"x\"}", "Pod: expected an object, got string"},
    {"{\"Pod\":{}}", "Pod.metadata.name: missing"},
    {"{\"Pod\":" MINI_POD ",\"NodeNames\":[\"a\",\"b\",\"c\",1]}",
     "NodeNames[3]: expected a string, got number"},
    {"{\"Pod\":" MINI_POD ",\"NodeNames\":\"a\"}", "NodeNames: expected an array"},
    {"{\"Pod\":" MINI_POD ",\"Nodes\":[]}", "Nodes: expected an object (NodeList) or null, got array"},
    {"{\"Pod\":" MINI_POD ",\"Nodes\":{\"items\":{}}}", "Nodes.items: expected an array, got object"},
    {"{\"Pod\":" MINI_POD ",\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"a\"}},7]}}",
     "Nodes.items[1]: expected an object, got number"},
    {"{\"Pod\":" MINI_POD ",\"Nodes\":{\"items\":[{\"metadata\":{}}]}}",
     "Nodes.items[0].metadata.name: missing"},
    {"{\"Pod\":" MINI_POD ",\"Nodes\":{\"items\":[{\"metadata\":{\"name\":\"a\"},\"status\":{"
     "\"allocatable\":{\"cpu\":\"many\"}}}]}}",
     "Nodes.items[0].status.allocatable.cpu: expected a non-negative quantity, got 'many'"},
    {"{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"resources\":{"
     "\"requests\":{\"cpu\":\"lots\"}}}]}}}",
     "Pod.spec.containers[0].resources.requests.cpu: expected a non-negative quantity"},
    {"{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"resources\":{"
     "\"limits\":{\"nvidia.com/gpu\":1e300}}}]}}}",
     "Pod.spec.containers[0].resources.limits.nvidia.com/gpu: expected a non-negative quantity"},
    {"{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"resources\":{"
     "\"requests\":{\"memory\":\"-1Gi\"}}}]}}}",
     "requests.memory: expected a non-negative quantity"},
    {"{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"initContainers\":[{\"resources\":{"
     "\"requests\":{\"cpu\":[]}}}]}}}",
     "Pod.spec.initContainers[0].resources.requests.cpu: expected a non-negative quantity, got a "
     "array"},
    {"{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"Nodes\":null,\"x\":99999999999999999999999999}",
     "request body is not JSON"},
    {"{\"Pod\":{\"metadata\":{\"name\":\"p\\u0000q\"}}}", "request body is not JSON"},
};

START_TEST(test_args_bad_bodies_name_the_field)
{
    struct af_ext_args *a = NULL;
    struct af_error err = {0};
    const char *b = bad_cases[_i].body;
    int rc = af_codec_decode_args(&config, b, strlen(b), &a, &err);

    ck_assert_int_lt(rc, 0);
    ck_assert_ptr_null(a);
    ck_assert_msg(strstr(err.text, bad_cases[_i].want), "got '%s', want '%s'", err.text,
                  bad_cases[_i].want);
}
END_TEST

/* Wrong types where the API would never send them are ignored, not fatal. */
static const char *const odd_bodies[] = {
    "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"labels\":[],\"annotations\":\"x\","
    "\"ownerReferences\":{}},\"spec\":{\"containers\":{},\"initContainers\":[1,\"x\",null],"
    "\"nodeName\":7,\"overhead\":[]},\"status\":{\"phase\":3}},\"NodeNames\":[]}",
    "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":null},\"spec\":null,\"status\":null},"
    "\"Nodes\":{\"metadata\":null,\"items\":[{\"metadata\":{\"name\":\"n\",\"labels\":{\"a\":1,"
    "\"node.kubernetes.io/instance-type\":{}}},\"spec\":[],\"status\":{\"allocatable\":[]}}]}}",
    "{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"resources\":null},"
    "{\"resources\":{\"requests\":null,\"limits\":\"x\"}}]}},\"NodeNames\":[\"n\"],\"Extra\":{}}",
};

START_TEST(test_args_odd_types_are_ignored)
{
    struct af_ext_args *a = NULL;
    struct af_error err = {0};
    const char *b = odd_bodies[_i];

    ck_assert_msg(af_codec_decode_args(&config, b, strlen(b), &a, &err) == 0, "%s", err.text);
    ck_assert_str_eq(af_ext_args_pod(a)->ns, "default");
    ck_assert_ptr_null(af_ext_args_pod(a)->node_name);
    ck_assert(!af_ext_args_pod(a)->terminal);
    af_ext_args_free(a);
}
END_TEST

/* ---- encoders ------------------------------------------------------------------------- */

static json_t *parse(const struct af_buf *b)
{
    json_error_t je;
    json_t *v = json_loadb(b->buf, b->len, 0, &je);
    ck_assert_msg(v != NULL, "encoder output is not JSON: %s", je.text);
    return v;
}

static void decide(struct af_node_decision *d, const struct af_ext_args *a, size_t i,
                   enum af_verdict v, const char *reason)
{
    memset(&d[i], 0, sizeof(d[i]));
    d[i].name = af_ext_args_name(a, i);
    d[i].verdict = v;
    snprintf(d[i].reason, sizeof(d[i].reason), "%s", reason);
}

START_TEST(test_encode_filter_names_mode)
{
    size_t len;
    char *body = fixture("kube-scheduler/filter-nodecache-true.json", &len);
    struct af_ext_args *a = NULL;
    struct af_error err = {0};
    struct af_node_decision d[2];
    struct af_buf out = AF_BUF_INIT(1 << 20);
    json_t *v;

    ck_assert_int_eq(af_codec_decode_args(&config, body, len, &a, &err), 0);
    decide(d, a, 0, AF_VERDICT_FAILED, "tier 1 (nvidia-a100) has room on " P4D);
    decide(d, a, 1, AF_VERDICT_PASS, "tier 1 (nvidia-a100): rule");
    ck_assert_int_eq(af_codec_encode_filter(a, d, 2, NULL, &out), 0);
    ck_assert_msg(!strncmp(out.buf, "{\"Nodes\":null,\"NodeNames\":[\"" P4D "\"],\"FailedNodes\":{",
                           strlen("{\"Nodes\":null,\"NodeNames\":[\"" P4D "\"],\"FailedNodes\":{")),
                  "%s", out.buf);
    v = parse(&out);
    ck_assert(json_is_null(json_object_get(v, "Nodes")));
    ck_assert_uint_eq(json_array_size(json_object_get(v, "NodeNames")), 1);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(v, "FailedNodes"), G5)),
                     "tier 1 (nvidia-a100) has room on " P4D);
    ck_assert_uint_eq(json_object_size(json_object_get(v, "FailedAndUnresolvableNodes")), 0);
    ck_assert_str_eq(json_string_value(json_object_get(v, "Error")), "");
    json_decref(v);

    /* An error omits every candidate. */
    af_buf_reset(&out);
    ck_assert_int_eq(af_codec_encode_filter(a, d, 2, "cache not synced", &out), 0);
    ck_assert_str_eq(out.buf, "{\"Nodes\":null,\"NodeNames\":null,\"FailedNodes\":{},"
                              "\"FailedAndUnresolvableNodes\":{},\"Error\":\"cache not synced\"}");
    af_buf_reset(&out);
    ck_assert_int_eq(af_codec_encode_filter(NULL, NULL, 0, "request body is not JSON", &out), 0);
    v = parse(&out);
    ck_assert_str_eq(json_string_value(json_object_get(v, "Error")), "request body is not JSON");
    json_decref(v);

    af_buf_release(&out);
    af_ext_args_free(a);
    free(body);
}
END_TEST

START_TEST(test_encode_filter_nodes_mode_echoes_node_objects)
{
    size_t len;
    char *body = fixture("kube-scheduler/filter-nodecache-false.json", &len);
    struct af_ext_args *a = NULL;
    struct af_error err = {0};
    struct af_node_decision d[2];
    struct af_buf out = AF_BUF_INIT(1 << 20);
    json_t *v, *req, *items;

    ck_assert_int_eq(af_codec_decode_args(&config, body, len, &a, &err), 0);
    decide(d, a, 0, AF_VERDICT_PASS, "tier 1");
    /* A reason cut in the middle of a UTF-8 character must still encode. */
    decide(d, a, 1, AF_VERDICT_UNRESOLVABLE, "class nvidia-a10g \xc3");
    ck_assert_int_eq(af_codec_encode_filter(a, d, 2, "", &out), 0);
    v = parse(&out);
    req = json_loadb(body, len, 0, NULL);
    items = json_object_get(json_object_get(v, "Nodes"), "items");
    ck_assert_uint_eq(json_array_size(items), 1);
    ck_assert(json_equal(json_array_get(items, 0),
                         json_array_get(json_object_get(json_object_get(req, "Nodes"), "items"), 0)));
    ck_assert_uint_eq(json_object_size(json_object_get(json_object_get(v, "Nodes"), "metadata")), 0);
    ck_assert(json_is_null(json_object_get(v, "NodeNames")));
    ck_assert_str_eq(
        json_string_value(json_object_get(json_object_get(v, "FailedAndUnresolvableNodes"), G5)),
        "class nvidia-a10g ?");
    ck_assert_uint_eq(json_object_size(json_object_get(v, "FailedNodes")), 0);
    json_decref(req);
    json_decref(v);

    /* Round trip: the answer, wrapped as a new request, decodes to the kept node. */
    {
        struct af_buf again = AF_BUF_INIT(0);
        struct af_ext_args *b = NULL;
        json_t *resp = parse(&out), *newreq = json_object();
        char *txt;
        json_object_set_new(newreq, "Pod", json_loads("{\"metadata\":{\"name\":\"p\"}}", 0, NULL));
        json_object_set(newreq, "Nodes", json_object_get(resp, "Nodes"));
        json_object_set_new(newreq, "NodeNames", json_null());
        txt = json_dumps(newreq, JSON_COMPACT);
        ck_assert_int_eq(af_codec_decode_args(&config, txt, strlen(txt), &b, &err), 0);
        ck_assert_uint_eq(af_ext_args_count(b), 1);
        ck_assert_str_eq(af_ext_args_name(b, 0), P4D);
        ck_assert_int_eq(af_ext_args_node(b, 0)->cls, AF_CLASS_NVIDIA_A100);
        af_ext_args_free(b);
        free(txt);
        json_decref(newreq);
        json_decref(resp);
        af_buf_release(&again);
    }
    af_buf_release(&out);
    af_ext_args_free(a);
    free(body);
}
END_TEST

START_TEST(test_encode_priorities_in_input_order)
{
    struct af_node_decision d[3] = {{.name = "b", .score = 7}, {.name = "a", .score = 0},
                                    {.name = "q\"x", .score = 10}};
    struct af_buf out = AF_BUF_INIT(0);

    ck_assert_int_eq(af_codec_encode_priorities(NULL, d, 3, &out), 0);
    ck_assert_str_eq(out.buf, "[{\"Host\":\"b\",\"Score\":7},{\"Host\":\"a\",\"Score\":0},"
                              "{\"Host\":\"q\\\"x\",\"Score\":10}]");
    af_buf_reset(&out);
    ck_assert_int_eq(af_codec_encode_priorities(NULL, d, 0, &out), 0);
    ck_assert_str_eq(out.buf, "[]");
    af_buf_release(&out);
}
END_TEST

/*
 * The answers, filter and priorities, are written straight into the buffer, byte for byte
 * what jansson's compact dump of the same objects prints: random candidate lists, names
 * that need escapes or are too long for the one-piece path, names given twice, reasons that repeat (the encoder
 * copies the escaped text of recent ones) and reasons that do not. Every other round names
 * only plain nodes, as kube-scheduler does: the names-mode fast path decodes those, and the
 * encoder takes its names as they are, unchecked.
 */
START_TEST(test_encode_matches_jansson_on_random_answers)
{
    static const char *const odd[] = {"q\"x", "back\\slash", "new\nline", "ctl\x01z", "bs\bff\f",
                                       "caf\xc3\xa9", "tab\there", "/slash/"};
    static const char *const reasons[] = {
        "no room for nvidia.com/gpu: the pod requests 1; tier 1 (nvidia-a10g)",
        "tier 1 (nvidia-a10g) has room on n-1; this node is tier 3 (nvidia-t4)",
        "quote \" and backslash \\ and\ncontrol \x02", "caf\xc3\xa9 \xe2\x82\xac", ""};
    char longname[400], scratch[64];
    unsigned seed = 12345;

    memset(longname, 'L', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    for (int round = 0; round < 300; round++) {
        size_t n = (size_t)(rand_r(&seed) % 40);
        json_t *req = json_object(), *list = json_array(), *ref = json_object();
        json_t *pass = json_array(), *failed = json_object(), *unres = json_object(), *prio;
        struct af_node_decision d[40];
        char own[40][48];
        struct af_ext_args *a = NULL;
        struct af_error err = {0};
        struct af_buf out = AF_BUF_INIT(0);
        char *body, *want;
        size_t at;

        for (size_t i = 0; i < n; i++) {
            int k = round % 2 ? 9 + rand_r(&seed) % 3 : rand_r(&seed) % 12;
            const char *name = k < 8 ? odd[k] : k == 8 ? longname : scratch;
            if (k > 8) {
                snprintf(scratch, sizeof(scratch), "ip-10-0-%d.ec2.internal", rand_r(&seed) % 9);
                name = scratch;
            }
            json_array_append_new(list, json_string(name));
        }
        json_object_set_new(req, "Pod", json_pack("{s{ss}}", "metadata", "name", "p"));
        json_object_set_new(req, "Nodes", json_null());
        json_object_set_new(req, "NodeNames", list);
        body = json_dumps(req, JSON_COMPACT);
        ck_assert_int_eq(af_codec_decode_args(&config, body, strlen(body), &a, &err), 0);
        for (size_t i = 0; i < n; i++) {
            const char *name = af_ext_args_name(a, i);
            int r = rand_r(&seed) % 7;
            memset(&d[i], 0, sizeof(d[i]));
            d[i].name = name;
            d[i].verdict = (enum af_verdict)(rand_r(&seed) % 3);
            d[i].score = rand_r(&seed) % 11;
            if (r < 5) {
                snprintf(d[i].reason, sizeof(d[i].reason), "%s", reasons[r]);
            } else {
                snprintf(own[i], sizeof(own[i]), "free %d of %d", rand_r(&seed) % 8, 8);
                snprintf(d[i].reason, sizeof(d[i].reason), "%s", own[i]);
            }
            if (d[i].verdict == AF_VERDICT_PASS)
                json_array_append_new(pass, json_string(name));
            else
                json_object_set_new(d[i].verdict == AF_VERDICT_FAILED ? failed : unres, name,
                                    json_string(d[i].reason));
        }
        json_object_set_new(ref, "Nodes", json_null());
        json_object_set_new(ref, "NodeNames", pass);
        json_object_set_new(ref, "FailedNodes", failed);
        json_object_set_new(ref, "FailedAndUnresolvableNodes", unres);
        json_object_set_new(ref, "Error", json_string(""));
        want = json_dumps(ref, JSON_COMPACT);
        ck_assert_int_eq(af_codec_encode_filter(a, d, n, NULL, &out), 0);
        ck_assert_msg(!strcmp(out.buf, want), "round %d:\n got %s\nwant %s", round, out.buf,
                      want);
        free(want);

        /* the priorities escape names the same one way: jansson's bytes too */
        af_buf_reset(&out);
        ck_assert_int_eq(af_codec_encode_priorities(a, d, n, &out), 0);
        prio = json_array();
        for (size_t i = 0; i < n; i++)
            json_array_append_new(prio, json_pack("{sssI}", "Host", d[i].name, "Score",
                                                  (json_int_t)d[i].score));
        want = json_dumps(prio, JSON_COMPACT);
        for (at = 0; out.buf[at] && out.buf[at] == want[at]; at++)
            ;
        ck_assert_msg(!strcmp(out.buf, want), "round %d: priorities differ from byte %zu: %.60s",
                      round, at, out.buf + at);
        free(want);
        json_decref(prio);
        af_buf_release(&out);
        af_ext_args_free(a);
        free(body);
        json_decref(ref);
        json_decref(req);
    }
}
END_TEST

/*
 * Filter and prioritize of one scheduling cycle carry the same Pod: the second decode
 * reuses the first's result. A different Pod is decoded anew, and the first again after it
 * is still right.
 */
START_TEST(test_same_pod_decoded_once_and_others_anew)
{
    static const char one[] = "{\"Pod\":{\"metadata\":{\"name\":\"a\",\"namespace\":\"ml\"},"
                              "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{"
                              "\"requests\":{\"nvidia.com/gpu\":\"1\"}}}]}},"
                              "\"Nodes\":null,\"NodeNames\":[\"n1\"]}";
    static const char two[] = "{\"Pod\":{\"metadata\":{\"name\":\"b\",\"namespace\":\"ml\"},"
                              "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{"
                              "\"requests\":{\"nvidia.com/gpu\":\"2\"}}}]}},"
                              "\"Nodes\":null,\"NodeNames\":[\"n2\",\"n3\"]}";
    struct af_ext_args *a = NULL, *b = NULL, *c = NULL, *d = NULL;
    struct af_error err = {0};

    ck_assert_int_eq(af_codec_decode_args(&config, one, strlen(one), &a, &err), 0);
    ck_assert_int_eq(af_codec_decode_args(&config, one, strlen(one), &b, &err), 0);
    ck_assert_ptr_eq(af_ext_args_pod(a), af_ext_args_pod(b));
    ck_assert_int_eq(af_codec_decode_args(&config, two, strlen(two), &c, &err), 0);
    ck_assert_str_eq(af_ext_args_pod(c)->name, "b");
    ck_assert_int_eq(af_ext_args_pod(c)->requests.v[AF_RES_GPU], 2);
    ck_assert_uint_eq(af_ext_args_count(c), 2);
    af_ext_args_free(a);
    af_ext_args_free(b);   /* the kept result outlives the requests that shared it */
    ck_assert_int_eq(af_codec_decode_args(&config, one, strlen(one), &d, &err), 0);
    ck_assert_str_eq(af_ext_args_pod(d)->name, "a");
    ck_assert_int_eq(af_ext_args_pod(d)->requests.v[AF_RES_GPU], 1);
    ck_assert_str_eq(af_ext_args_name(d, 0), "n1");
    af_ext_args_free(c);
    af_ext_args_free(d);
}
END_TEST

/* ---- apiserver objects ------------------------------------------------------------------- */

static const struct {
    const char *name;
    enum af_class cls;
    int64_t gpu, neuron;
    double price;
} node_cases[] = {
    {P4D, AF_CLASS_NVIDIA_A100, 8, 0, 32.77},
    {G5, AF_CLASS_NVIDIA_A10G, 1, 0, 1.212},
    {TRN1, AF_CLASS_TRAINIUM1, 0, 16, 21.5},
    {"ip-10-0-2-50.us-west-2.compute.internal", AF_CLASS_CPU, 0, 0, 0.68},
    {"ip-10-0-3-30.us-west-2.compute.internal", AF_CLASS_INFERENTIA2, 0, 1, 0.758},
};

START_TEST(test_nodes_list_classified_by_instance_type)
{
    size_t len;
    char *body = fixture("apiserver/nodes-list.json", &len);
    struct items it = {0};
    struct af_error err = {0};
    char *rv = NULL, *cont = NULL;

    ck_assert_msg(af_codec_decode_list(&config, body, len, collect, &it, &rv, &cont, &err) == 0,
                  "%s", err.text);
    ck_assert_uint_eq(it.n_nodes, 5);
    ck_assert_uint_eq(it.n_pods, 0);
    ck_assert_str_eq(rv, "240");
    ck_assert_ptr_null(cont);
    for (size_t i = 0; i < AF_ARRAY_SIZE(node_cases); i++) {
        const struct af_node_info *n = find_node(&it, node_cases[i].name);
        ck_assert_ptr_nonnull(n);
        ck_assert_int_eq(n->cls, node_cases[i].cls);
        ck_assert_str_eq(n->class_source, "node.kubernetes.io/instance-type");
        ck_assert_int_eq(n->allocatable.v[AF_RES_GPU], node_cases[i].gpu);
        ck_assert_int_eq(n->allocatable.v[AF_RES_NEURON], node_cases[i].neuron);
        ck_assert_int_eq(n->allocatable.v[AF_RES_PODS], 110);
        ck_assert(!n->spot);
        ck_assert(!n->unschedulable);
        ck_assert(n->price_known);
        ck_assert_double_eq_tol(n->hourly_usd, node_cases[i].price, 1e-9);
        ck_assert_str_eq(n->price_source, "catalog");
    }
    ck_assert_int_eq(find_node(&it, P4D)->allocatable.v[AF_RES_CPU], 95690);
    ck_assert_int_eq(find_node(&it, P4D)->allocatable.v[AF_RES_MEMORY], 1176466116LL * 1024);
    ck_assert_int_eq(find_node(&it, TRN1)->allocatable.v[AF_RES_NEURONCORE], 32);
    ck_assert_str_eq(find_node(&it, P4D)->instance_type, "p4d.24xlarge");
    items_release(&it);
    free(rv);
    free(body);

    /* The paged list carries a continue token. */
    body = fixture("apiserver/nodes-list-limit2.json", &len);
    ck_assert_int_eq(af_codec_decode_list(&config, body, len, collect, &it, &rv, &cont, &err), 0);
    ck_assert_uint_eq(it.n_nodes, 2);
    ck_assert_ptr_nonnull(cont);
    ck_assert(!strncmp(cont, "eyJ2Ijoi", 8));
    items_release(&it);
    free(rv);
    free(cont);
    free(body);

    /* A single Node object decodes too. */
    {
        struct af_node_info *n = NULL;
        body = fixture("apiserver/nodes-get.json", &len);
        ck_assert_int_eq(af_codec_decode_node(&config, body, len, &n, &err), 0);
        ck_assert_int_ne(n->cls, AF_CLASS_UNKNOWN);
        af_node_info_unref(n);
        free(body);
    }
}
END_TEST

START_TEST(test_pods_list_requests_and_binding)
{
    size_t len;
    char *body = fixture("apiserver/pods-list.json", &len);
    struct items it = {0};
    struct af_error err = {0};
    char *rv = NULL;
    const struct af_pod_info *p;

    ck_assert_int_eq(af_codec_decode_list(&config, body, len, collect, &it, &rv, NULL, &err), 0);
    ck_assert_uint_eq(it.n_pods, 4);
    ck_assert_uint_eq(it.n_nodes, 0);
    ck_assert_str_eq(rv, "240");
    p = find_pod(&it, "neuron-train-1");
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(p->node_name, TRN1);
    ck_assert_int_eq(p->requests.v[AF_RES_NEURON], 1);
    ck_assert_int_eq(p->requests.v[AF_RES_NEURONCORE], 2);
    ck_assert_int_eq(p->requests.v[AF_RES_CPU], 4000);
    ck_assert_ptr_nonnull(p->uid);
    p = find_pod(&it, "gpu-train-0");
    ck_assert_str_eq(p->node_name, P4D);
    ck_assert_int_eq(p->requests.v[AF_RES_GPU], 1);
    items_release(&it);
    free(rv);
    free(body);

    body = fixture("apiserver/pods-list-fieldselector.json", &len);
    ck_assert_int_eq(af_codec_decode_list(&config, body, len, collect, &it, NULL, NULL, &err), 0);
    ck_assert_uint_eq(it.n_pods, 2);
    items_release(&it);
    free(body);
}
END_TEST

static const struct {
    const char *pod;
    const char *want_err;
    int64_t cpu, mem, gpu;
    const char *owner_kind, *tenant, *workload;
    bool terminal;
} pod_cases[] = {
    /* A limit with no request counts as the request (API defaulting). */
    {"{\"metadata\":{\"name\":\"a\"},\"spec\":{\"containers\":[{\"resources\":{\"limits\":{"
     "\"nvidia.com/gpu\":\"2\",\"cpu\":\"1\"},\"requests\":{\"cpu\":\"250m\"}}}]}}",
     NULL, 250, 0, 2, NULL, NULL, NULL, false},
    /* Sidecar before an init container, overhead on top. */
    {"{\"metadata\":{\"name\":\"b\",\"labels\":{\"accelfit.io/tenant\":\"team-a\"},"
     "\"annotations\":{\"accelfit.io/workload\":\"training\"},\"ownerReferences\":[{\"kind\":"
     "\"ReplicaSet\",\"name\":\"x\"},{\"kind\":\"Job\",\"name\":\"j\",\"controller\":true}]},"
     "\"spec\":{\"initContainers\":[{\"restartPolicy\":\"Always\",\"resources\":{\"requests\":{"
     "\"cpu\":\"1\"}}},{\"resources\":{\"requests\":{\"cpu\":\"3\"}}}],\"containers\":[{"
     "\"resources\":{\"requests\":{\"cpu\":\"2\",\"memory\":\"1Gi\"}}}],\"overhead\":{\"cpu\":"
     "\"100m\",\"memory\":\"64Mi\"}},\"status\":{\"phase\":\"Succeeded\"}}",
     NULL, 4100, (1LL << 30) + (64LL << 20), 0, "Job", "team-a", "training", true},
    /* YAML-style plain numbers as quantities. */
    {"{\"metadata\":{\"name\":\"c\"},\"spec\":{\"containers\":[{\"resources\":{\"requests\":{"
     "\"cpu\":2,\"memory\":1.5,\"nvidia.com/gpu\":1}}}]},\"status\":{\"phase\":\"Failed\"}}",
     NULL, 2000, 2, 1, NULL, NULL, NULL, true},
    {.pod = "{\"metadata\":{\"name\":\"d\"},\"spec\":{\"containers\":[{\"resources\":{"
            "\"requests\":{\"cpu\":\"1Qi\"}}}]}}",
     .want_err = "spec.containers[0].resources.requests.cpu: expected a non-negative quantity, "
                 "got '1Qi'"},
    {.pod = "[1]", .want_err = "pod: expected an object, got array"},
    {.pod = "{", .want_err = "pod is not JSON"},
};

START_TEST(test_pod_decode_cases)
{
    struct af_pod_info *p = NULL;
    struct af_error err = {0};
    const char *s = pod_cases[_i].pod;
    int rc = af_codec_decode_pod(s, strlen(s), &p, &err);

    if (pod_cases[_i].want_err) {
        ck_assert_int_lt(rc, 0);
        ck_assert_ptr_null(p);
        ck_assert_msg(strstr(err.text, pod_cases[_i].want_err), "%s", err.text);
        return;
    }
    ck_assert_msg(rc == 0, "%s", err.text);
    ck_assert_int_eq(p->requests.v[AF_RES_CPU], pod_cases[_i].cpu);
    ck_assert_int_eq(p->requests.v[AF_RES_MEMORY], pod_cases[_i].mem);
    ck_assert_int_eq(p->requests.v[AF_RES_GPU], pod_cases[_i].gpu);
    ck_assert_int_eq(p->terminal, pod_cases[_i].terminal);
    if (pod_cases[_i].owner_kind) {
        ck_assert_str_eq(p->owner_kind, pod_cases[_i].owner_kind);
        ck_assert_str_eq(p->owner_name, "j");
    } else {
        ck_assert_ptr_null(p->owner_kind);
    }
    if (pod_cases[_i].tenant)
        ck_assert_str_eq(p->tenant, pod_cases[_i].tenant);
    else
        ck_assert_ptr_null(p->tenant);
    if (pod_cases[_i].workload)
        ck_assert_str_eq(p->ann.workload, pod_cases[_i].workload);
    else
        ck_assert_ptr_null(p->ann.workload);
    af_pod_info_unref(p);
}
END_TEST

START_TEST(test_mixed_list_and_unknown_kinds)
{
    const char *s = "{\"kind\":\"List\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"\"},"
                    "\"items\":[{\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"labels\":{"
                    "\"karpenter.k8s.aws/instance-gpu-name\":\"h100\",\"karpenter.sh/capacity-type\":"
                    "\"spot\"}},\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"8\"}}},"
                    "{\"kind\":\"Service\",\"metadata\":{\"name\":\"svc\"}},"
                    "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p1\",\"namespace\":\"x\"}},"
                    "{\"metadata\":{\"name\":\"kindless\"}}]}";
    struct items it = {0};
    struct af_error err = {0};
    char *rv = (char *)"sentinel";

    ck_assert_int_eq(af_codec_decode_list(&config, s, strlen(s), collect, &it, &rv, NULL, &err), 0);
    ck_assert_ptr_null(rv);
    ck_assert_uint_eq(it.n_nodes, 1);
    ck_assert_uint_eq(it.n_pods, 1);
    ck_assert_int_eq(it.nodes[0]->cls, AF_CLASS_NVIDIA_H100);
    ck_assert_str_eq(it.nodes[0]->class_source, "karpenter.k8s.aws/instance-gpu-name");
    ck_assert(it.nodes[0]->spot);
    ck_assert_str_eq(it.pods[0]->ns, "x");
    items_release(&it);

    {
        size_t len;
        char *body = fixture("apiserver/list-410-etcd-compacted.json", &len);
        ck_assert_int_eq(af_codec_decode_list(&config, body, len, collect, &it, &rv, NULL, &err),
                         AF_EEXPIRED);
        ck_assert_ptr_null(rv);
        ck_assert(strstr(err.text, "Status 410 Expired: The resourceVersion for the provided list"));
        free(body);
    }
    s = "{\"kind\":\"ConfigMapList\",\"items\":[]}";
    ck_assert_int_lt(af_codec_decode_list(&config, s, strlen(s), collect, &it, NULL, NULL, &err), 0);
    ck_assert(strstr(err.text, "kind: expected NodeList, PodList or List"));
    s = "{\"kind\":\"NodeList\",\"items\":{}}";
    ck_assert_int_lt(af_codec_decode_list(&config, s, strlen(s), collect, &it, NULL, NULL, &err), 0);
    ck_assert(strstr(err.text, "items: expected an array, got object"));
}
END_TEST

START_TEST(test_list_with_a_bad_item_fails_strictly_or_skips_it)
{
    const char *s = "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"7\"},\"items\":["
                    "{\"metadata\":{\"name\":\"good\",\"namespace\":\"a\"}},"
                    "{\"metadata\":{\"name\":\"bad\",\"namespace\":\"a\"},\"spec\":{\"containers\":"
                    "[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"lots\"}}}]}},"
                    "{\"metadata\":{\"name\":\"also-good\",\"namespace\":\"a\"}}]}";
    struct items it = {0};
    struct af_error err = {0};
    char *rv = NULL;
    size_t skipped = 0;

    /* A cluster file with a broken object is an error the user must see. */
    ck_assert_int_lt(af_codec_decode_list(&config, s, strlen(s), collect, &it, NULL, NULL, &err), 0);
    ck_assert_msg(strstr(err.text, "items[1]") != NULL, "%s", err.text);
    items_release(&it);
    memset(&it, 0, sizeof(it));

    /* From the API server, the odd object is skipped and the rest still syncs. */
    ck_assert_int_eq(af_codec_decode_list_skip(&config, s, strlen(s), collect, &it, &rv, NULL,
                                               &skipped, &err), 0);
    ck_assert_uint_eq(skipped, 1);
    ck_assert_uint_eq(it.n_pods, 2);
    ck_assert_str_eq(it.pods[1]->name, "also-good");
    ck_assert_str_eq(rv, "7");
    ck_assert_msg(strstr(err.text, "items[1]") != NULL, "%s", err.text);
    free(rv);
    items_release(&it);
}
END_TEST

/* ---- watch events ------------------------------------------------------------------------- */

static const struct {
    const char *file;
    enum af_kind kind;
    int added, modified, deleted, bookmarks;
    const char *bookmark_rv;
} watch_cases[] = {
    {"apiserver/nodes-watch.jsonl", AF_KIND_NODE, 6, 6, 1, 2, "207"},
    {"apiserver/pods-watch.jsonl", AF_KIND_POD, 6, 9, 2, 2, "232"},
};

START_TEST(test_watch_streams_decode_line_by_line)
{
    size_t len;
    char *body = fixture(watch_cases[_i].file, &len);
    int counts[5] = {0};
    char *line = body, *nl;

    while (line < body + len && (nl = memchr(line, '\n', (size_t)(body + len - line)))) {
        struct af_watch_event ev;
        struct af_error err = {0};
        int rc = af_codec_decode_watch_event(&config, watch_cases[_i].kind, line,
                                             (size_t)(nl - line), &ev, &err);
        ck_assert_msg(rc == 0, "%s", err.text);
        counts[ev.type]++;
        ck_assert_ptr_nonnull(ev.rv);
        if (ev.type == AF_WATCH_BOOKMARK) {
            ck_assert_ptr_null(ev.node);
            ck_assert_ptr_null(ev.pod);
            ck_assert_str_eq(ev.rv, watch_cases[_i].bookmark_rv);
        } else if (watch_cases[_i].kind == AF_KIND_NODE) {
            ck_assert_ptr_nonnull(ev.node);
            ck_assert_ptr_null(ev.pod);
        } else {
            ck_assert_ptr_nonnull(ev.pod);
            ck_assert_ptr_null(ev.node);
        }
        af_watch_event_clear(&ev);
        line = nl + 1;
    }
    ck_assert_int_eq(counts[AF_WATCH_ADDED], watch_cases[_i].added);
    ck_assert_int_eq(counts[AF_WATCH_MODIFIED], watch_cases[_i].modified);
    ck_assert_int_eq(counts[AF_WATCH_DELETED], watch_cases[_i].deleted);
    ck_assert_int_eq(counts[AF_WATCH_BOOKMARK], watch_cases[_i].bookmarks);
    free(body);
}
END_TEST

START_TEST(test_watch_410_is_expired_error)
{
    const char *files[] = {"apiserver/watch-410.json", "apiserver/watch-410-etcd-compacted.json"};
    for (size_t i = 0; i < AF_ARRAY_SIZE(files); i++) {
        size_t len;
        char *body = fixture(files[i], &len);
        struct af_watch_event ev;
        struct af_error err = {0};
        ck_assert_int_eq(af_codec_decode_watch_event(&config, AF_KIND_POD, body, len, &ev, &err), 0);
        ck_assert_int_eq(ev.type, AF_WATCH_ERROR);
        ck_assert_int_eq(ev.status_code, 410);
        ck_assert_str_eq(ev.status_reason, "Expired");
        ck_assert_ptr_nonnull(ev.status_message);
        ck_assert_ptr_null(ev.pod);
        af_watch_event_clear(&ev);
        free(body);
    }
}
END_TEST

static const struct {
    const char *ev;
    const char *want;
} bad_events[] = {
    {"{\"type\":\"EXPLODED\",\"object\":{}}", "type: unknown watch event type 'EXPLODED'"},
    {"{\"object\":{}}", "type: missing"},
    {"{\"type\":\"ADDED\",\"object\":[]}", "object: expected an object, got array"},
    {"{\"type\":\"ADDED\",\"object\":{\"kind\":\"Node\",\"metadata\":{\"name\":\"n\"}}}",
     "object.kind: expected Pod, got 'Node'"},
    {"{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{}}}",
     "object.metadata.name: missing"},
    {"[]", "watch event: expected an object, got array"},
    {"{\"type\":", "watch event is not JSON"},
};

START_TEST(test_watch_bad_events)
{
    struct af_watch_event ev;
    struct af_error err = {0};
    const char *s = bad_events[_i].ev;

    ck_assert_int_lt(af_codec_decode_watch_event(&config, AF_KIND_POD, s, strlen(s), &ev, &err), 0);
    ck_assert_ptr_null(ev.pod);
    ck_assert_ptr_null(ev.rv);
    ck_assert_msg(strstr(err.text, bad_events[_i].want), "%s", err.text);
}
END_TEST

/* ---- the demo cluster ---------------------------------------------------------------------- */

START_TEST(test_demo_cluster_yaml_decodes)
{
    size_t len;
    char *body = af_test_read("manifests/demo-cluster.yaml", &len);
    struct items it = {0};
    struct af_error err = {0};
    const struct af_pod_info *p;
    size_t terminal = 0;

    ck_assert_msg(af_codec_decode_cluster(&config, "demo-cluster.yaml", body, len, collect, &it,
                                          &err) == 0,
                  "%s:%d:%d: %s", err.file, err.line, err.column, err.text);
    ck_assert_uint_ge(it.n_nodes, 18);
    ck_assert_uint_ge(it.n_pods, 22);
    for (size_t i = 0; i < AF_ARRAY_SIZE(node_cases); i++)
        ck_assert_msg(find_node(&it, node_cases[i].name), "%s missing", node_cases[i].name);
    for (size_t i = 0; i < it.n_pods; i++)
        terminal += it.pods[i]->terminal;
    ck_assert_uint_eq(terminal, 1);
    p = find_pod(&it, "tokenizer-backfill-28391042-x7k2p");
    ck_assert_ptr_nonnull(p);
    ck_assert(p->terminal);
    /* Sidecar, init container and overhead (see the comment in the manifest). */
    p = find_pod(&it, "llm-gateway-6c8d9e7f5-m2n3b");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(p->requests.v[AF_RES_CPU], 4750);
    ck_assert_int_eq(p->requests.v[AF_RES_MEMORY], (16LL << 30) + (512LL << 20) + (256LL << 20));
    ck_assert_int_eq(p->requests.v[AF_RES_GPU], 1);
    p = find_pod(&it, "whisper-large-7b8c9d-r4t5y");
    ck_assert_int_eq(p->requests.v[AF_RES_GPU], 1);
    ck_assert_str_eq(find_node(&it, "ip-10-0-1-60.us-west-2.compute.internal")->price_source,
                     "annotation");
    ck_assert(find_node(&it, "ip-10-0-1-61.us-west-2.compute.internal")->unschedulable);
    items_release(&it);
    free(body);
}
END_TEST

START_TEST(test_cluster_json_and_bad_yaml)
{
    const char *js = "  [{\"kind\":\"Node\",\"metadata\":{\"name\":\"a\"}},"
                     "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"b\"}}]";
    struct items it = {0};
    struct af_error err = {0};

    ck_assert_int_eq(af_codec_decode_cluster(&config, "x.json", js, strlen(js), collect, &it, &err), 0);
    ck_assert_uint_eq(it.n_nodes, 1);
    ck_assert_uint_eq(it.n_pods, 1);
    ck_assert_int_eq(it.nodes[0]->cls, AF_CLASS_CPU);
    items_release(&it);

    js = "kind: Node\nmetadata:\n  name: y\nstatus:\n  allocatable:\n    nvidia.com/gpu: 4\n";
    ck_assert_msg(af_codec_decode_cluster(&config, "y.yaml", js, strlen(js), collect, &it, &err) == 0,
                  "%s", err.text);
    ck_assert_uint_eq(it.n_nodes, 1);
    ck_assert_int_eq(it.nodes[0]->allocatable.v[AF_RES_GPU], 4);
    ck_assert_int_eq(it.nodes[0]->cls, AF_CLASS_UNKNOWN);
    items_release(&it);

    /* Unquoted YAML scalars in labels and annotations read as the text they were written as. */
    js = "items:\n"
         "- kind: Node\n  metadata:\n    name: n\n"
         "    labels: {karpenter.k8s.aws/instance-gpu-name: a10g, karpenter.sh/capacity-type: spot}\n"
         "    annotations: {accelfit.io/hourly-price: 0.19}\n"
         "- kind: Pod\n  metadata:\n    name: p\n    labels: {accelfit.io/tenant: 42}\n"
         "    annotations: {accelfit.io/neuron-ready: true, accelfit.io/latency-slo-ms: 200,\n"
         "                  accelfit.io/model-params: 7e9, accelfit.io/objective: [cost]}\n";
    ck_assert_msg(af_codec_decode_cluster(&config, "s.yaml", js, strlen(js), collect, &it, &err) == 0,
                  "%s", err.text);
    ck_assert_int_eq(it.nodes[0]->cls, AF_CLASS_NVIDIA_A10G);
    ck_assert(it.nodes[0]->spot);
    ck_assert_str_eq(it.nodes[0]->price_source, "annotation");
    ck_assert_double_eq_tol(it.nodes[0]->hourly_usd, 0.19, 1e-12);
    ck_assert_str_eq(it.pods[0]->tenant, "42");
    ck_assert_str_eq(it.pods[0]->ann.neuron_ready, "true");
    ck_assert_str_eq(it.pods[0]->ann.latency_slo_ms, "200");
    ck_assert_str_eq(it.pods[0]->ann.model_params, "7000000000");
    ck_assert_ptr_null(it.pods[0]->ann.objective);
    items_release(&it);

    js = "items: [\n  {kind: Pod\n";
    ck_assert_int_lt(af_codec_decode_cluster(&config, "z.yaml", js, strlen(js), collect, &it, &err), 0);
    ck_assert_uint_eq(it.n_pods, 0);
}
END_TEST

/* The shipped catalog classifies every demo node, and a recorded NodeNames request gets a
 * real answer against the demo cluster (codec + plan + filter + encoder). */
START_TEST(test_recorded_request_against_demo_cluster)
{
    struct af_config *real = NULL;
    struct af_error err = {0};
    size_t len, blen;
    char *yaml = af_test_read("manifests/demo-cluster.yaml", &len);
    char *body = fixture("kube-scheduler/filter-nodecache-true.json", &blen);
    struct items it = {0};
    struct af_ext_args *a = NULL;
    struct af_node_view views[2];
    const char *names[2];
    struct af_node_decision d[2];
    struct af_filter_summary sum;
    struct af_plan plan;
    struct af_buf out = AF_BUF_INIT(0);
    json_t *v;
    unsigned seen = 0;

    ck_assert_msg(af_config_load(&real, NULL, NULL, &err) == 0, "%s", err.text);
    ck_assert_int_eq(af_codec_decode_cluster(real, "demo", yaml, len, collect, &it, &err), 0);
    for (size_t i = 0; i < it.n_nodes; i++) {
        ck_assert_msg(it.nodes[i]->cls != AF_CLASS_UNKNOWN, "%s unclassified", it.nodes[i]->name);
        ck_assert_msg(it.nodes[i]->price_known, "%s unpriced", it.nodes[i]->name);
        seen |= 1u << it.nodes[i]->cls;
    }
    ck_assert(seen & (1u << AF_CLASS_NVIDIA_H100));
    ck_assert(seen & (1u << AF_CLASS_NVIDIA_T4));
    ck_assert(seen & (1u << AF_CLASS_TRAINIUM1));
    ck_assert(seen & (1u << AF_CLASS_INFERENTIA2));
    ck_assert(seen & (1u << AF_CLASS_CPU));
    ck_assert(find_node(&it, "ip-10-0-1-41.us-west-2.compute.internal")->hourly_usd <
              find_node(&it, "ip-10-0-1-42.us-west-2.compute.internal")->hourly_usd);

    ck_assert_int_eq(af_codec_decode_args(real, body, blen, &a, &err), 0);
    for (size_t i = 0; i < 2; i++) {
        names[i] = af_ext_args_name(a, i);
        memset(&views[i], 0, sizeof(views[i]));
        views[i].info = find_node(&it, names[i]);
        ck_assert_ptr_nonnull(views[i].info);
        for (size_t k = 0; k < it.n_pods; k++) {
            const struct af_pod_info *p = it.pods[k];
            if (p->terminal || !p->node_name || strcmp(p->node_name, names[i]))
                continue;
            for (int r = 0; r < AF_RES__COUNT; r++)
                views[i].used.v[r] += p->requests.v[r];
            views[i].npods++;
        }
    }
    af_plan_pod(real->policy, real->catalog, af_ext_args_pod(a), &plan);
    af_filter(real->policy, &plan, af_ext_args_pod(a), views, names, 2, d, &sum);
    ck_assert_int_eq(af_codec_encode_filter(a, d, 2, NULL, &out), 0);
    v = parse(&out);
    /* The recorded pod has no accelfit annotations: its inferred tiers only rank, so the
     * g5.2xlarge (tier 1, short of cpu in the cache because of the whisper pod; the
     * scheduler's own fit check decides) and the p4d both pass, and the p4d is the best
     * tier with room. */
    ck_assert_uint_eq(json_array_size(json_object_get(v, "NodeNames")), 2);
    ck_assert_uint_eq(json_object_size(json_object_get(v, "FailedNodes")), 0);
    ck_assert(strstr(d[0].reason, "the cache shows no room") || strstr(d[1].reason,
                                                                       "the cache shows no room"));
    ck_assert(!sum.fallback);   /* nothing was filtered: an unannotated pod only ranks */
    json_decref(v);
    af_buf_release(&out);
    af_ext_args_free(a);
    items_release(&it);
    af_config_unref(real);
    free(body);
    free(yaml);
}
END_TEST

/* ---- the fast path against jansson ------------------------------------------------------ */

/*
 * Bodies with a NUL byte or a backslash before one, and "\u0000"; and bodies whose error
 * hides in a member of the Pod that no decoder reads (managedFields, volumes, env), which
 * the fast path checks without building. The names-mode fast path must accept exactly
 * what the general path (jansson, flags 0) accepts: a body jansson refuses is an error
 * however it is decoded.
 */
#define BODY(lit) {lit, sizeof(lit) - 1}
static const struct {
    const char *body;
    size_t len;
} nul_bodies[] = {
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"x\":\"\\\0\",\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"x\\\0\":1,\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\",\"managedFields\":[\"\\\0\"]}},"
         "\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\",\"managedFields\":{\"k\\\0\":1}}},"
         "\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"x\":\"a\0b\",\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNames\":[\"a\"]}\0"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\\\0\"}},\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\\u0000q\"}},\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNames\":[\"a\\u0000b\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"x\":\"\\u0000\",\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\",\"managedFields\":[\"\\u0000\"]}},"
         "\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"Nodes\":{\"items\":[{\"metadata\":"
         "{\"name\":\"a\\u0000b\"}}]}}"),
    /* Controls that jansson accepts, so both paths must too. */
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"x\":\"\\n\\/\\\\\",\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\",\"managedFields\":[\"\\t\"]}},"
         "\"NodeNames\":[\"a\"]}"),
    /* Errors inside members no decoder reads: refused all the same. */
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"volumes\":[{\"a\":1e400}]}},"
         "\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\"},\"spec\":{\"containers\":[{\"env\":[1,]}]}},"
         "\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\",\"managedFields\":[\"\\ud800\"]}},"
         "\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\",\"managedFields\":[\"\xff\"]}},"
         "\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\",\"managedFields\":[tru]}},"
         "\"NodeNames\":[\"a\"]}"),
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\"}}},\"NodeNames\":[\"a\"]}"),
    /* ... and what jansson accepts there: a quote and brackets inside strings, a number,
     * UTF-8, deep nesting. */
    BODY("{\"Pod\":{\"metadata\":{\"name\":\"p\\\"}]\"},\"spec\":{\"containers\":[{\"env\":"
         "[{\"name\":\"X\",\"value\":\"\xc3\xa9}\"}],\"ports\":[{\"containerPort\":8080}],"
         "\"resources\":{\"requests\":{\"cpu\":\"1\"}}}],\"volumes\":[[[[[[[[{}]]]]]]]]}},"
         "\"NodeNames\":[\"a\"]}"),
};

START_TEST(test_args_fast_path_agrees_with_jansson)
{
    struct af_ext_args *a = NULL;
    struct af_error err = {0};
    json_t *j = json_loadb(nul_bodies[_i].body, nul_bodies[_i].len, 0, NULL);
    int rc = af_codec_decode_args(&config, nul_bodies[_i].body, nul_bodies[_i].len, &a, &err);

    if (j) {
        ck_assert_msg(rc == 0, "body %d: jansson accepts it, the decoder says: %s", _i,
                      err.text);
        ck_assert_uint_eq(af_ext_args_count(a), 1);
        ck_assert_str_eq(af_ext_args_name(a, 0), "a");
    } else {
        ck_assert_msg(rc != 0, "body %d: jansson refuses it, the decoder accepted it", _i);
        ck_assert_ptr_null(a);
    }
    json_decref(j);
    af_ext_args_free(a);
}
END_TEST

/* "\u0000" anywhere in a request is refused with a message that says so and where,
 * whether the string is the Pod's, a node name or a field nobody reads. */
static const char *const nul_escape_bodies[] = {
    "{\"Pod\":{\"metadata\":{\"name\":\"p\\u0000q\"}},\"NodeNames\":[\"a\"]}",
    "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"NodeNames\":[\"a\\u0000b\"]}",
    "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"Extra\":\"\\u0000\",\"NodeNames\":[\"a\"]}",
    "{\"Pod\":{\"metadata\":{\"name\":\"p\"}},\"Nodes\":{\"items\":[{\"metadata\":"
    "{\"name\":\"a\\u0000b\"}}]}}",
};

START_TEST(test_args_nul_escape_is_a_clear_error)
{
    struct af_ext_args *a = NULL;
    struct af_error err = {0};
    const char *b = nul_escape_bodies[_i];
    int rc = af_codec_decode_args(&config, b, strlen(b), &a, &err);

    ck_assert_int_eq(rc, AF_EPARSE);
    ck_assert_ptr_null(a);
    ck_assert_msg(strstr(err.text, "request body is not JSON accelfit accepts: a string holds "
                                   "\\u0000 (NUL) at line 1 column "),
                  "got '%s'", err.text);
}
END_TEST

/*
 * The fast path once replaced each metadata.managedFields value with null in a copy of
 * the Pod's text before jansson read it. A value shorter than "null" ([], {}, 0, "") made
 * the copy longer than its buffer: a heap overflow of up to 3 bytes a cut, found by
 * tests/fuzz/fuzz_args.c. The parser now reads such values in place without building
 * them; the Pod must decode, whatever they hold and however often they are given.
 */
static const char *const short_cut_bodies[] = {
    "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"managedFields\":[]}},\"NodeNames\":[\"a\"]}",
    "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"managedFields\":0,\"managedFields\":{},"
    "\"managedFields\":\"\",\"managedFields\":1}},\"NodeNames\":[\"a\"]}",
    "{\"Pod\":{\"metadata\":{\"managedFields\":[],\"name\":\"p\"},\"metadata\":{\"managedFields\""
    ":0,\"name\":\"p\"},\"metadata\":{\"managedFields\":1,\"managedFields\":2,\"name\":\"p\"}},"
    "\"NodeNames\":[\"a\"]}",
};

/*
 * The server refuses a body denser than one JSON value per 16 bytes before parsing it, and
 * counts values for that on every request: brackets and commas inside strings (escaped
 * quotes and backslashes included) are text, not values, so a pod whose annotations hold
 * JSON is not refused.
 */
START_TEST(test_values_in_strings_are_not_counted)
{
    static const struct {
        const char *text;
        size_t want;
    } cases[] = {
        {"", 1},
        {"{}", 2},
        {"{\"a\":[1,2,3]}", 5},
        {"{\"a\":\"[1,2,{3}]\"}", 2},
        {"{\"a\":\"x\\\"[,{\"}", 2},          /* an escaped quote, then brackets */
        {"{\"a\":\"x\\\\\",\"b\":[]}", 4},   /* an escaped backslash ends the string */
        {"[\"\\\\\\\"[\",{}]", 4},
        {"\"unterminated [,{", 1},
    };

    for (size_t i = 0; i < AF_ARRAY_SIZE(cases); i++)
        ck_assert_msg(af_codec_json_values(cases[i].text, strlen(cases[i].text)) == cases[i].want,
                      "%s: %zu values, want %zu", cases[i].text,
                      af_codec_json_values(cases[i].text, strlen(cases[i].text)), cases[i].want);
}
END_TEST

START_TEST(test_args_short_managed_fields_decode)
{
    struct af_ext_args *a = NULL;
    struct af_error err = {0};
    const char *b = short_cut_bodies[_i];
    /* An exact-size copy, so that ASan sees any read past the body. */
    char *body = af_xmalloc(strlen(b));

    memcpy(body, b, strlen(b));
    ck_assert_msg(af_codec_decode_args(&config, body, strlen(b), &a, &err) == 0, "%s", err.text);
    ck_assert_str_eq(af_ext_args_pod(a)->name, "p");
    ck_assert_uint_eq(af_ext_args_count(a), 1);
    af_ext_args_free(a);
    af_free(body);
}
END_TEST

Suite *af_codec_suite(void);
Suite *af_codec_suite(void)
{
    Suite *s = suite_create("codec");
    TCase *tc = tcase_create("codec");

    tcase_add_loop_test(tc, test_args_decode_recorded_scheduler_bodies, 0,
                        AF_ARRAY_SIZE(sched_cases));
    tcase_add_loop_test(tc, test_args_keys_case_insensitive_and_null_accepted, 0,
                        AF_ARRAY_SIZE(ci_cases));
    tcase_add_loop_test(tc, test_args_bad_bodies_name_the_field, 0, AF_ARRAY_SIZE(bad_cases));
    tcase_add_loop_test(tc, test_args_odd_types_are_ignored, 0, AF_ARRAY_SIZE(odd_bodies));
    tcase_add_test(tc, test_encode_filter_names_mode);
    tcase_add_test(tc, test_encode_filter_nodes_mode_echoes_node_objects);
    tcase_add_test(tc, test_encode_priorities_in_input_order);
    tcase_add_test(tc, test_encode_matches_jansson_on_random_answers);
    tcase_add_test(tc, test_same_pod_decoded_once_and_others_anew);
    tcase_add_test(tc, test_nodes_list_classified_by_instance_type);
    tcase_add_test(tc, test_pods_list_requests_and_binding);
    tcase_add_loop_test(tc, test_pod_decode_cases, 0, AF_ARRAY_SIZE(pod_cases));
    tcase_add_test(tc, test_mixed_list_and_unknown_kinds);
    tcase_add_test(tc, test_list_with_a_bad_item_fails_strictly_or_skips_it);
    tcase_add_loop_test(tc, test_watch_streams_decode_line_by_line, 0, AF_ARRAY_SIZE(watch_cases));
    tcase_add_test(tc, test_watch_410_is_expired_error);
    tcase_add_loop_test(tc, test_watch_bad_events, 0, AF_ARRAY_SIZE(bad_events));
    tcase_add_test(tc, test_demo_cluster_yaml_decodes);
    tcase_add_test(tc, test_cluster_json_and_bad_yaml);
    tcase_add_test(tc, test_recorded_request_against_demo_cluster);
    tcase_add_test(tc, test_values_in_strings_are_not_counted);
    tcase_add_loop_test(tc, test_args_fast_path_agrees_with_jansson, 0,
                        AF_ARRAY_SIZE(nul_bodies));
    tcase_add_loop_test(tc, test_args_nul_escape_is_a_clear_error, 0,
                        AF_ARRAY_SIZE(nul_escape_bodies));
    tcase_add_loop_test(tc, test_args_short_managed_fields_decode, 0,
                        AF_ARRAY_SIZE(short_cut_bodies));
    suite_add_tcase(s, tc);
    return s;
}

int main(void){return af_test_run(af_codec_suite());}
