/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes objects from JSON (jansson): Node and Pod into the core's
 * records, Lists (NodeList, PodList, kind: List), watch events and cluster
 * files. Decoding is defensive: input comes from the network, so a wrong type
 * anywhere is either an error that names the field or is ignored with a sane
 * default, never a crash. "\u0000" is accepted by the parser, but a string
 * holding it reads as absent (C strings cannot carry it); duplicate keys are
 * accepted (the last one wins, as in Go).
 *
 * The functions named af__codec_* are shared with the codec's other files
 * (codec/internal.h): list_stream.c decodes each list item with them, and whole
 * lists (af_codec_decode_list) are decoded there; this file uses only scan.c's
 * cutter of unread members. json_t never leaves src/codec.
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "accelfit/codec.h"
#include "accelfit/decide.h"
#include "accelfit/placement.h"

#include "accelfit/prices.h"
#include "codec/internal.h"
#include "accelfit/banned.h"

/* ---- small helpers -------------------------------------------------------------------- */

const char *af__codec_type_name(const json_t *v)
{
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    default:
        return "null";
    }
}

int af__codec_load(const char *text, size_t len, const char *what, json_t **out,
                   struct af_error *err)
{
    return af__codec_load_flags(text, len, JSON_ALLOW_NUL, what, out, err);
}

int af__codec_load_flags(const char *text, size_t len, size_t flags, const char *what,
                         json_t **out, struct af_error *err)
{
    struct af__codec_perr perr;
    json_t *root;
    int line, col;

    *out = NULL;
    if (!text)
        return af_error_set(err, AF_EINVAL, "", 0, 0, "%s: no input", what);
    /* Duplicate keys allowed (last wins). "\u0000" is allowed so that one odd string
     * cannot fail a whole LIST page; a string holding a NUL then reads as absent
     * (get_str), so the object that needs it fails alone and is skipped. */
    root = af__codec_parse(text, len, flags, &perr);
    if (!root) {
        af__codec_line_col(text, perr.offset, &line, &col);
        return af_error_set(err, AF_EPARSE, "", line, col, "%s is not JSON: %s at line %d column %d",
                            what, perr.text, line, col);
    }
    *out = root;
    return 0;
}

json_t *af__codec_get(json_t *obj, const char *key)
{
    return json_is_object(obj) ? json_object_get(obj, key) : NULL;
}

/* A string's text, or NULL when it is not a string or holds a NUL (which C cannot carry). */
const char *af__codec_str(json_t *v)
{
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    return s && strlen(s) == json_string_length(v) ? s : NULL;
}

const char *af__codec_get_str(json_t *obj, const char *key)
{
    return af__codec_str(af__codec_get(obj, key));
}


static char *dup_str(json_t *obj, const char *key)
{
    const char *s = af__codec_get_str(obj, key);
    return s ? af_xstrdup(s) : NULL;
}

/*
 * A quantity: a string ("500m", "16Gi") or, from YAML, a plain number.
 * Returns 0, or AF_EINVAL when malformed, negative or out of range.
 */
static int quantity(json_t *v, int64_t scale, int64_t *out)
{
    const int64_t limit = INT64_MAX / 4;

    if (json_is_string(v)) {
        int64_t q;
        if (!af__codec_str(v) || af_parse_quantity(af__codec_str(v), scale, &q) || q < 0 || q > limit)
            return AF_EINVAL;
        *out = q;
        return 0;
    }
    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);
        if (i < 0 || i > limit / scale)
            return AF_EINVAL;
        *out = (int64_t)i * scale;
        return 0;
    }
    if (json_is_real(v)) {
        double d = json_real_value(v) * (double)scale;
        if (!isfinite(d) || d < 0 || d > (double)limit)
            return AF_EINVAL;
        *out = (int64_t)ceil(d - 1e-6);
        if (*out < 0)
            *out = 0;
        return 0;
    }
    return AF_EINVAL;
}

static const char *quantity_text(json_t *v, char *buf, size_t cap)
{
    if (json_is_string(v))
        snprintf(buf, cap, "'%.60s'", json_string_value(v));
    else
        snprintf(buf, cap, "a %s", af__codec_type_name(v));
    return buf;
}

/*
 * Reads the tracked resources of a resource map ({"cpu":"4",...}) into `r`,
 * setting bit i of *seen for each one present. Untracked names are ignored; a
 * map that is not an object is ignored. Errors name the field.
 */
static int resources(json_t *map, const char *where, struct af_resources *r, unsigned *seen,
                     struct af_error *err)
{
    const char *key;
    json_t *v;
    unsigned found = 0;

    if (!json_is_object(map))
        return 0;
    json_object_foreach(map, key, v) {
        int i = af_res_parse(key);
        int64_t q;
        char buf[96];
        if (i < 0)
            continue;
        if (quantity(v, i == AF_RES_CPU ? 1000 : 1, &q))
            return af_error_set(err, AF_EINVAL, "", 0, 0,
                                "%s.%s: expected a non-negative quantity, got %s", where, key,
                                quantity_text(v, buf, sizeof(buf)));
        /* MIG slices of every profile share one slot; quantities are capped well
         * below INT64_MAX / 4, so a handful of profiles cannot overflow. */
        if (i == AF_RES_MIG && (found & (1u << i)))
            r->v[i] += q;
        else
            r->v[i] = q;
        found |= 1u << i;
        if (seen)
            *seen |= 1u << i;
    }
    return 0;
}

/*
 * The text of a scalar: strings as they are; booleans and numbers (a YAML
 * cluster file with `accelfit.io/neuron-ready: true` unquoted) as they would
 * have been written. NULL for null, objects and arrays.
 */
static const char *scalar_text(json_t *v, char *buf, size_t cap)
{
    if (json_is_string(v))
        return af__codec_str(v);
    if (json_is_true(v))
        return "true";
    if (json_is_false(v))
        return "false";
    if (json_is_integer(v)) {
        snprintf(buf, cap, "%lld", (long long)json_integer_value(v));
        return buf;
    }
    if (json_is_real(v)) {
        snprintf(buf, cap, "%.15g", json_real_value(v));
        return buf;
    }
    return NULL;
}

#define SCALAR_MAX 40

/*
 * String pairs of a map, for the classifier; values that are not scalars are
 * skipped. *bufs holds the text of converted scalars. Caller frees both.
 */
static struct af_kv *kv_list(json_t *map, size_t *n, char **bufs)
{
    struct af_kv *kv;
    const char *key;
    json_t *v;
    size_t i = 0;

    *n = 0;
    *bufs = NULL;
    if (!json_is_object(map) || json_object_size(map) == 0)
        return NULL;
    kv = af_xcalloc(json_object_size(map), sizeof(*kv));
    *bufs = af_xcalloc(json_object_size(map), SCALAR_MAX);
    json_object_foreach(map, key, v) {
        const char *text = scalar_text(v, *bufs + i * SCALAR_MAX, SCALAR_MAX);
        if (!text)
            continue;
        kv[i].key = key;
        kv[i].value = text;
        i++;
    }
    *n = i;
    return kv;
}

static char *dup_scalar(json_t *obj, const char *key)
{
    char buf[SCALAR_MAX];
    const char *s = scalar_text(af__codec_get(obj, key), buf, sizeof(buf));
    return s ? af_xstrdup(s) : NULL;
}

/* ---- Node ------------------------------------------------------------------------------- */

static char *packed_labels(json_t *labels);

/* The MIG profiles a node advertises (mixed strategy: nvidia.com/mig-1g.5gb: 7). */
static void node_mig_profiles(json_t *alloc, struct af_node_info *n)
{
    const char *key;
    json_t *v;

    n->n_mig = 0;
    if (!json_is_object(alloc))
        return;
    json_object_foreach(alloc, key, v) {
        struct af_mig_profile m;
        int64_t q;
        if (n->n_mig >= AF_NODE_MIG_MAX)
            break;
        if (af_res_parse(key) != AF_RES_MIG || !af_mig_profile_parse(key, &m) ||
            quantity(v, 1, &q) || q <= 0)
            continue;
        n->mig[n->n_mig] = m;
        n->mig_count[n->n_mig] = q;
        n->n_mig++;
    }
}

int af__codec_node_from_json(const struct af_config *cfg, json_t *obj, const char *where,
                             struct af_node_info **out, struct af_error *err)
{
    struct af_node_info *n;
    struct af_kv *labels, *anns;
    char *lbufs, *abufs;
    size_t n_labels, n_anns;
    json_t *meta, *spec, *status;
    const char *name;
    char at[160];
    int rc;

    *out = NULL;
    if (!json_is_object(obj))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "%s: expected an object, got %s",
                            where && *where ? where : "node", af__codec_type_name(obj));
    meta = af__codec_get(obj, "metadata");
    name = af__codec_get_str(meta, "name");
    if (!name || !*name) {
        af__codec_path(at, sizeof(at), where, "metadata.name");
        return af_error_set(err, AF_EINVAL, "", 0, 0, "%s: missing", at);
    }
    n = af_node_info_new();
    n->name = af_xstrdup(name);
    spec = af__codec_get(obj, "spec");
    n->unschedulable = json_is_true(af__codec_get(spec, "unschedulable"));
    status = af__codec_get(obj, "status");
    af__codec_path(at, sizeof(at), where, "status.allocatable");
    rc = resources(af__codec_get(status, "allocatable"), at, &n->allocatable, NULL, err);
    if (rc) {
        af_node_info_unref(n);
        return rc;
    }
    node_mig_profiles(af__codec_get(status, "allocatable"), n);
    n->labels = packed_labels(af__codec_get(meta, "labels"));
    labels = kv_list(af__codec_get(meta, "labels"), &n_labels, &lbufs);
    anns = kv_list(af__codec_get(meta, "annotations"), &n_anns, &abufs);
    af_node_classify(cfg ? cfg->catalog : NULL, cfg ? cfg->policy : NULL, labels, n_labels, anns,
                     n_anns, n);
    af_free(labels);
    af_free(anns);
    af_free(lbufs);
    af_free(abufs);
    *out = n;
    return 0;
}

int af_codec_decode_node(const struct af_config *cfg, const char *json, size_t len,
                         struct af_node_info **out, struct af_error *err)
{
    json_t *root;
    int rc;

    *out = NULL;
    rc = af__codec_load(json, len, "node", &root, err);
    if (rc)
        return rc;
    rc = af__codec_node_from_json(cfg, root, "", out, err);
    json_decref(root);
    return rc;
}

/* ---- Pod -------------------------------------------------------------------------------- */

/* One container's requests, a limit standing in for a missing request (API defaulting). */
static int container_req(json_t *c, const char *where, struct af_container_req *out,
                         struct af_error *err)
{
    json_t *res = af__codec_get(c, "resources");
    struct af_resources lim = {{0}};
    unsigned have_req = 0, have_lim = 0;
    char at[200];
    int rc;

    memset(out, 0, sizeof(*out));
    af__codec_path(at, sizeof(at), where, "resources.requests");
    rc = resources(af__codec_get(res, "requests"), at, &out->req, &have_req, err);
    if (rc)
        return rc;
    af__codec_path(at, sizeof(at), where, "resources.limits");
    rc = resources(af__codec_get(res, "limits"), at, &lim, &have_lim, err);
    if (rc)
        return rc;
    for (int i = 0; i < AF_RES__COUNT; i++)
        if ((have_lim & (1u << i)) && !(have_req & (1u << i)))
            out->req.v[i] = lim.v[i];
    {
        const char *rp = af__codec_get_str(c, "restartPolicy");
        out->restartable = rp && !strcmp(rp, "Always");
    }
    return 0;
}

static int containers(json_t *arr, const char *where, struct af_container_req **out, size_t *n,
                      struct af_error *err)
{
    size_t i, k = 0;
    json_t *c;

    *out = NULL;
    *n = 0;
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return 0;
    *out = af_xcalloc(json_array_size(arr), sizeof(**out));
    json_array_foreach(arr, i, c) {
        char at[160];
        int rc;
        if (!json_is_object(c))
            continue;
        af__codec_path_index(at, sizeof(at), where, i);
        rc = container_req(c, at, &(*out)[k], err);
        if (rc) {
            af_free(*out);
            *out = NULL;
            return rc;
        }
        k++;
    }
    *n = k;
    return 0;
}

static const struct {
    const char *key;
    size_t off;
} pod_annotations[] = {
    {"accelfit.io/workload", offsetof(struct af_pod_annotations, workload)},
    {"accelfit.io/model-params", offsetof(struct af_pod_annotations, model_params)},
    {"accelfit.io/objective", offsetof(struct af_pod_annotations, objective)},
    {"accelfit.io/latency-slo-ms", offsetof(struct af_pod_annotations, latency_slo_ms)},
    {"accelfit.io/framework", offsetof(struct af_pod_annotations, framework)},
    {"accelfit.io/neuron-ready", offsetof(struct af_pod_annotations, neuron_ready)},
    {"accelfit.io/precision", offsetof(struct af_pod_annotations, precision)},
    {"accelfit.io/neuron-core-version", offsetof(struct af_pod_annotations, neuron_core_version)},
    {"accelfit.io/instances", offsetof(struct af_pod_annotations, instances)},
};

/* "key\0value\0...\0\0" of a label map; NULL for none. */
static char *packed_labels(json_t *labels)
{
    struct af_buf b = AF_BUF_INIT(0);
    const char *key;
    json_t *v;
    char buf[SCALAR_MAX];

    if (!json_is_object(labels) || !json_object_size(labels))
        return NULL;
    json_object_foreach(labels, key, v) {
        const char *text = scalar_text(v, buf, sizeof(buf));
        if (!text)
            continue;
        if (af_buf_add(&b, key, strlen(key) + 1) || af_buf_add(&b, text, strlen(text) + 1))
            af_assert(!"unbounded buffer refused output");
    }
    if (af_buf_add(&b, "", 1))
        af_assert(!"unbounded buffer refused output");
    return af_buf_detach(&b, NULL);
}

/* One requirement of a nodeSelectorTerm (matchExpressions or, `field`, matchFields). */
static void match_expr(json_t *e, bool field, struct af_match_expr *out)
{
    static const char *const ops[] = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"};
    const char *op = af__codec_get_str(e, "operator"), *key = af__codec_get_str(e, "key");
    json_t *values = af__codec_get(e, "values"), *v;
    size_t i;

    out->key = af_xstrdup(key ? key : "");
    out->field = field;
    out->op = AF_MATCH_UNKNOWN;
    for (i = 0; op && i < AF_ARRAY_SIZE(ops); i++)
        if (!strcmp(op, ops[i]))
            out->op = (enum af_match_op)i;
    out->values = af_xcalloc(json_array_size(values) + 1, sizeof(*out->values));
    json_array_foreach(json_is_array(values) ? values : NULL, i, v) {
        char buf[SCALAR_MAX];
        const char *text = scalar_text(v, buf, sizeof(buf));
        if (text)
            out->values[out->n_values++] = af_xstrdup(text);
    }
}

/* spec.nodeName, spec.nodeSelector and the required node affinity (NULL: none of them). */
static struct af_placement *pod_placement(json_t *spec)
{
    json_t *sel = af__codec_get(spec, "nodeSelector"), *terms, *t, *v;
    json_t *req = af__codec_get(af__codec_get(af__codec_get(spec, "affinity"), "nodeAffinity"),
                                "requiredDuringSchedulingIgnoredDuringExecution");
    const char *node = af__codec_get_str(spec, "nodeName"), *key;
    struct af_placement *p;
    size_t i;

    if ((!node || !*node) && (!json_is_object(sel) || !json_object_size(sel)) &&
        !json_is_object(req))
        return NULL;
    p = af_xcalloc(1, sizeof(*p));
    if (node && *node)
        p->node_name = af_xstrdup(node);
    if (json_is_object(sel) && json_object_size(sel)) {
        p->selector = af_xcalloc(json_object_size(sel), sizeof(*p->selector));
        json_object_foreach(sel, key, v) {
            char buf[SCALAR_MAX];
            const char *text = scalar_text(v, buf, sizeof(buf));
            struct af_match_expr *e = &p->selector[p->n_selector++];
            e->key = af_xstrdup(key);
            e->op = AF_MATCH_IN;
            e->values = af_xcalloc(1, sizeof(*e->values));
            e->values[0] = af_xstrdup(text ? text : "");
            e->n_values = 1;
        }
    }
    if (json_is_object(req)) {
        p->has_required = true;
        terms = af__codec_get(req, "nodeSelectorTerms");
        p->terms = af_xcalloc(json_array_size(terms) + 1, sizeof(*p->terms));
        json_array_foreach(json_is_array(terms) ? terms : NULL, i, t) {
            json_t *ex = af__codec_get(t, "matchExpressions"), *fs = af__codec_get(t, "matchFields");
            struct af_match_term *term = &p->terms[p->n_terms++];
            size_t k;
            json_t *e;
            term->exprs = af_xcalloc(json_array_size(ex) + json_array_size(fs) + 1,
                                     sizeof(*term->exprs));
            json_array_foreach(json_is_array(ex) ? ex : NULL, k, e)
                match_expr(e, false, &term->exprs[term->n_exprs++]);
            json_array_foreach(json_is_array(fs) ? fs : NULL, k, e)
                match_expr(e, true, &term->exprs[term->n_exprs++]);
        }
    }
    return p;
}

/*
 * What rollouts read, kept only for pods that opt in (label accelfit.io/managed:
 * "true"), so the cache does not carry every pod's labels: the labels (selectors),
 * the unit (controller Job or pod group), the side the webhook chose, and the status
 * the brake watches.
 */
static void pod_rollout_fields(json_t *meta, json_t *status, struct af_pod_info *p)
{
    json_t *labels = af__codec_get(meta, "labels"), *conds, *cs;
    const char *managed = af__codec_get_str(labels, "accelfit.io/managed"), *group, *start;
    size_t i;
    json_t *c;

    if (!managed || strcmp(managed, "true"))
        return;
    p->managed = true;
    p->labels = packed_labels(labels);
    if (p->owner_kind && !strcmp(p->owner_kind, "Job") && p->owner_name)
        p->job_name = af_xstrdup(p->owner_name);
    else if ((group = af__codec_get_str(labels, "scheduling.x-k8s.io/pod-group")) != NULL && *group)
        p->job_name = af_xasprintf("PodGroup/%s", group);
    p->rollout_side = dup_scalar(af__codec_get(meta, "annotations"), "accelfit.io/rollout-side");
    p->rollout_claim = dup_scalar(af__codec_get(meta, "annotations"), "accelfit.io/rollout-claim");
    p->failed = p->terminal && !strcmp(af__codec_get_str(status, "phase") ? af__codec_get_str(status, "phase") : "",
                                       "Failed");
    conds = af__codec_get(status, "conditions");
    json_array_foreach(json_is_array(conds) ? conds : NULL, i, c) {
        const char *type = af__codec_get_str(c, "type"), *st = af__codec_get_str(c, "status");
        if (type && st && !strcmp(type, "Ready"))
            p->ready = !strcmp(st, "True");
    }
    cs = af__codec_get(status, "containerStatuses");
    json_array_foreach(json_is_array(cs) ? cs : NULL, i, c) {
        json_t *n = af__codec_get(c, "restartCount");
        if (json_is_integer(n) && json_integer_value(n) > 0 && json_integer_value(n) < 1000000)
            p->restarts += (int)json_integer_value(n);
    }
    start = af__codec_get_str(status, "startTime");
    if (start && af_parse_rfc3339(start) > 0)
        p->started_unix = af_parse_rfc3339(start);
}

/*
 * How long the pod is expected to run: accelfit.io/expected-duration ("6h", "1h30m"),
 * else spec.activeDeadlineSeconds (the most it may run). A malformed annotation is noted
 * and leaves the deadline to speak.
 */
static void pod_expected_duration(json_t *meta, json_t *spec, struct af_pod_info *p)
{
    const char *ann = af__codec_get_str(af__codec_get(meta, "annotations"),
                                        "accelfit.io/expected-duration");
    json_t *dl = af__codec_get(spec, "activeDeadlineSeconds");
    double s;

    if (ann && af_parse_duration(ann, 0, AF_DURATION_MAX_S, &s) == 0 && s > 0) {
        p->expected_s = s;
        p->expected_source = "annotation accelfit.io/expected-duration";
        return;
    }
    p->expected_bad = ann != NULL;
    if (json_is_integer(dl) && json_integer_value(dl) > 0 &&
        json_integer_value(dl) <= (json_int_t)AF_DURATION_MAX_S) {
        p->expected_s = (double)json_integer_value(dl);
        p->expected_source = "spec.activeDeadlineSeconds";
    }
}

/* The MIG profile the pod's containers name first ("nvidia.com/mig-1g.5gb"). */
static void pod_mig_profile(json_t *spec, struct af_pod_info *p)
{
    static const char *const lists[] = {"containers", "initContainers"};
    static const char *const kinds[] = {"requests", "limits"};

    for (size_t l = 0; l < AF_ARRAY_SIZE(lists); l++) {
        size_t i;
        json_t *c;
        json_t *arr = af__codec_get(spec, lists[l]);
        if (!json_is_array(arr))
            continue;
        json_array_foreach(arr, i, c) {
            for (size_t k = 0; k < AF_ARRAY_SIZE(kinds); k++) {
                const char *key;
                json_t *v;
                json_t *map = af__codec_get(af__codec_get(c, "resources"), kinds[k]);
                if (!json_is_object(map))
                    continue;
                json_object_foreach(map, key, v) {
                    if (af_res_parse(key) == AF_RES_MIG && af_mig_profile_parse(key, &p->mig))
                        return;
                }
            }
        }
    }
}

static int pod_requests(json_t *spec, const char *where, struct af_resources *out,
                        struct af_error *err)
{
    struct af_container_req *apps = NULL, *inits = NULL;
    size_t n_apps = 0, n_inits = 0;
    struct af_resources overhead = {{0}}, podlevel = {{0}};
    unsigned have_pod = 0;
    char at[160];
    int rc;

    af__codec_path(at, sizeof(at), where, "spec.containers");
    rc = containers(af__codec_get(spec, "containers"), at, &apps, &n_apps, err);
    if (rc)
        goto out;
    af__codec_path(at, sizeof(at), where, "spec.initContainers");
    rc = containers(af__codec_get(spec, "initContainers"), at, &inits, &n_inits, err);
    if (rc)
        goto out;
    af__codec_path(at, sizeof(at), where, "spec.overhead");
    rc = resources(af__codec_get(spec, "overhead"), at, &overhead, NULL, err);
    if (rc)
        goto out;
    /* Pod-level resources (PodLevelResources) replace the aggregate for cpu and memory. */
    af__codec_path(at, sizeof(at), where, "spec.resources.requests");
    rc = resources(af__codec_get(af__codec_get(spec, "resources"), "requests"), at, &podlevel, &have_pod, err);
    if (rc)
        goto out;
    af_effective_requests(apps, n_apps, inits, n_inits, NULL, out);
    if (have_pod & (1u << AF_RES_CPU))
        out->v[AF_RES_CPU] = podlevel.v[AF_RES_CPU];
    if (have_pod & (1u << AF_RES_MEMORY))
        out->v[AF_RES_MEMORY] = podlevel.v[AF_RES_MEMORY];
    for (int i = 0; i < AF_RES__COUNT; i++)
        out->v[i] = out->v[i] > INT64_MAX - overhead.v[i] ? INT64_MAX : out->v[i] + overhead.v[i];
out:
    af_free(apps);
    af_free(inits);
    return rc;
}

int af__codec_pod_from_json(json_t *obj, const char *where, struct af_pod_info **out,
                            struct af_error *err)
{
    struct af_pod_info *p;
    json_t *meta, *spec, *owners, *anns;
    const char *name, *ns, *phase;
    char at[160];
    int rc;

    *out = NULL;
    if (!json_is_object(obj))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "%s: expected an object, got %s",
                            where && *where ? where : "pod", af__codec_type_name(obj));
    meta = af__codec_get(obj, "metadata");
    name = af__codec_get_str(meta, "name");
    if (!name || !*name) {
        af__codec_path(at, sizeof(at), where, "metadata.name");
        return af_error_set(err, AF_EINVAL, "", 0, 0, "%s: missing", at);
    }
    p = af_pod_info_new();
    p->name = af_xstrdup(name);
    ns = af__codec_get_str(meta, "namespace");
    p->ns = af_xstrdup(ns && *ns ? ns : "default");
    p->uid = dup_str(meta, "uid");
    p->generate_name = dup_str(meta, "generateName");
    p->tenant = dup_scalar(af__codec_get(meta, "labels"), "accelfit.io/tenant");

    owners = af__codec_get(meta, "ownerReferences");
    if (json_is_array(owners)) {
        size_t i;
        json_t *o;
        json_array_foreach(owners, i, o) {
            if (!json_is_true(af__codec_get(o, "controller")))
                continue;
            p->owner_kind = dup_str(o, "kind");
            p->owner_name = dup_str(o, "name");
            break;
        }
    }
    anns = af__codec_get(meta, "annotations");
    /* DaemonSet and mirror (static) pods run on every node; they do not make a node busy. */
    p->system = (p->owner_kind && !strcmp(p->owner_kind, "DaemonSet")) ||
                af__codec_get(anns, "kubernetes.io/config.mirror") != NULL;
    for (size_t i = 0; i < AF_ARRAY_SIZE(pod_annotations); i++) {
        char **slot = (char **)((char *)&p->ann + pod_annotations[i].off);
        *slot = dup_scalar(anns, pod_annotations[i].key);
    }

    spec = af__codec_get(obj, "spec");
    {
        const char *node = af__codec_get_str(spec, "nodeName");
        if (node && *node)
            p->node_name = af_xstrdup(node);
    }
    rc = pod_requests(spec, where, &p->requests, err);
    if (rc) {
        af_pod_info_unref(p);
        return rc;
    }
    if (p->requests.v[AF_RES_MIG] > 0)
        pod_mig_profile(spec, p);
    phase = af__codec_get_str(af__codec_get(obj, "status"), "phase");
    p->terminal = phase && (!strcmp(phase, "Succeeded") || !strcmp(phase, "Failed"));
    pod_rollout_fields(meta, af__codec_get(obj, "status"), p);   /* reads p->terminal */
    pod_expected_duration(meta, spec, p);
    af__codec_pod_claims(spec, af__codec_get(obj, "status"), p);   /* DRA (dra.c) */
    af__codec_pod_ext(spec, af__codec_get(obj, "status"), p);
    if (p->managed)
        p->placement = pod_placement(spec);
    *out = p;
    return 0;
}

int af_codec_decode_pod(const char *json, size_t len, struct af_pod_info **out,
                        struct af_error *err)
{
    json_t *root;
    int rc;

    *out = NULL;
    rc = af__codec_load(json, len, "pod", &root, err);
    if (rc)
        return rc;
    rc = af__codec_pod_from_json(root, "", out, err);
    json_decref(root);
    return rc;
}

/* ---- Lists ------------------------------------------------------------------------------ */

/* Decodes the items of `arr`; `def_kind` applies to items without a kind. */
/*
 * With `skipped` NULL the first undecodable item fails the whole list (cluster
 * files: the user should fix the file). Otherwise such items are skipped and
 * counted, and `err` keeps the first item's error (API server lists: one odd
 * object must not keep the cache from syncing).
 */
/* Where an item's error goes: the caller's `err` for the first skipped item only. */
static struct af_error *item_err(const size_t *skipped, struct af_error *err)
{
    static _Thread_local struct af_error scratch;
    return (!skipped || *skipped == 0) ? err : &scratch;
}

/* Edit distance of a and b, capped at 3 (enough to tell a typo from another word). */
static int near(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    int d[24][24];

    if (n > 22 || m > 22)
        return 3;
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int sub = d[i - 1][j - 1] + (tolower((unsigned char)a[i - 1]) !=
                                         tolower((unsigned char)b[j - 1]));
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[n][m] < 3 ? d[n][m] : 3;
}

const char *af__codec_kind_hint(const char *kind)
{
    static const char *const kinds[] = {"Node", "Pod", "NodeList", "PodList", "List"};

    for (size_t i = 0; kind && i < AF_ARRAY_SIZE(kinds); i++)
        if (near(kind, kinds[i]) <= (strlen(kinds[i]) > 4 ? 2 : 1))
            return kinds[i];
    return NULL;
}

int af__codec_list_item(const struct af_config *cfg, json_t *it, const char *where,
                        const char *def_kind, af_item_cb cb, void *ud, struct af_error *err)
{
    const char *kind = af__codec_get_str(it, "kind");
    int rc = 0;

    if (!kind)
        kind = def_kind;
    if (!kind)
        return 0;
    if (!strcmp(kind, "Node")) {
        struct af_node_info *n;
        rc = af__codec_node_from_json(cfg, it, where, &n, err);
        if (!rc)
            cb(ud, n, NULL);
    } else if (!strcmp(kind, "Pod")) {
        struct af_pod_info *p;
        rc = af__codec_pod_from_json(it, where, &p, err);
        if (!rc)
            cb(ud, NULL, p);
    }
    return rc;
}

/* A cluster file's item is a Node or a Pod; any other kind (or none) is named with its
 * place, and a misspelled one with what it likely meant, so the file's owner sees it. */
static int file_item_kind(json_t *it, const char *where, const char *def_kind,
                          struct af_error *err)
{
    const char *kind = af__codec_get_str(it, "kind");
    const char *hint;

    if (!kind)
        kind = def_kind;
    if (!kind)
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "%s: no kind; write kind: Node or kind: Pod (accelfit reads only "
                            "those)",
                            where);
    if (!strcmp(kind, "Node") || !strcmp(kind, "Pod") || !strcmp(kind, "NodeOverlay"))
        return 0;   /* NodeOverlays price the file's nodes (af_codec_decode_cluster) */
    if (af_dra_kind_parse(kind) >= 0)
        return 0;   /* DRA objects: read by af_codec_decode_cluster_dra (dra.c) */
    hint = af__codec_kind_hint(kind);
    if (hint)
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "%s.kind: unknown kind '%.60s'; did you mean %s?", where, kind, hint);
    return af_error_set(err, AF_EUNSUPPORTED, "", 0, 0,
                        "%s.kind: a %.60s, not a Node or Pod (accelfit reads only those)", where,
                        kind);
}

static int list_items(const struct af_config *cfg, json_t *arr, const char *where,
                      const char *def_kind, af_item_cb cb, void *ud, size_t *skipped,
                      struct af_error *err)
{
    size_t i;
    json_t *it;

    if (json_is_null(arr) || !arr)
        return 0;
    if (!json_is_array(arr))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "%s: expected an array, got %s", where,
                            af__codec_type_name(arr));
    json_array_foreach(arr, i, it) {
        char at[96];
        int rc;
        af__codec_path_index(at, sizeof(at), where, i);
        rc = file_item_kind(it, at, def_kind, item_err(skipped, err));
        if (!rc)
            rc = af__codec_list_item(cfg, it, at, def_kind, cb, ud, item_err(skipped, err));
        if (rc && !skipped)
            return rc;
        if (rc)
            (*skipped)++;
    }
    return 0;
}

int af__codec_list_kind(json_t *root, const char **def_kind, struct af_error *err)
{
    const char *kind = af__codec_get_str(root, "kind");

    *def_kind = NULL;
    if (kind && !strcmp(kind, "Status")) {
        /* The API server answered with an error instead of a list (410 Expired on a stale
         * continue token or resourceVersion). */
        json_t *code = af__codec_get(root, "code");
        json_int_t c = json_is_integer(code) ? json_integer_value(code) : 0;
        const char *reason = af__codec_get_str(root, "reason");
        const char *msg = af__codec_get_str(root, "message");
        return af_error_set(err, c == 410 ? AF_EEXPIRED : AF_EHTTP, "", 0, 0,
                            "list: the API server returned Status %lld %.40s: %.200s",
                            (long long)c, reason ? reason : "", msg ? msg : "");
    }
    if (kind && strcmp(kind, "NodeList") && strcmp(kind, "PodList") && strcmp(kind, "List") &&
        strcmp(kind, "Node") && strcmp(kind, "Pod"))
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "kind: expected NodeList, PodList or List, got '%.60s'", kind);
    if (kind && !strcmp(kind, "NodeList"))
        *def_kind = "Node";
    else if (kind && !strcmp(kind, "PodList"))
        *def_kind = "Pod";
    return 0;
}

/* A list already parsed (cluster files): its items, or the root itself when it is a
 * Node or Pod. API server lists are streamed instead (list_stream.c). */
static int decode_list_json(const struct af_config *cfg, json_t *root, af_item_cb cb, void *ud,
                            size_t *skipped, struct af_error *err)
{
    const char *kind, *def_kind;
    int rc;

    if (json_is_array(root))
        return list_items(cfg, root, "items", NULL, cb, ud, skipped, err);
    if (!json_is_object(root))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "list: expected an object, got %s",
                            af__codec_type_name(root));
    rc = af__codec_list_kind(root, &def_kind, err);
    if (rc)
        return rc;
    kind = af__codec_get_str(root, "kind");
    if (kind && (!strcmp(kind, "Node") || !strcmp(kind, "Pod"))) {
        rc = af__codec_list_item(cfg, root, "items[0]", NULL, cb, ud, item_err(skipped, err));
        if (rc && skipped) {
            (*skipped)++;
            rc = 0;
        }
        return rc;
    }
    return list_items(cfg, af__codec_get(root, "items"), "items", def_kind, cb, ud, skipped, err);
}

/* ---- watch events ----------------------------------------------------------------------- */

void af_watch_event_clear(struct af_watch_event *ev)
{
    if (!ev)
        return;
    af_node_info_unref(ev->node);
    af_pod_info_unref(ev->pod);
    af_free(ev->rv);
    af_free(ev->status_reason);
    af_free(ev->status_message);
    memset(ev, 0, sizeof(*ev));
}

int af_codec_decode_watch_event(const struct af_config *cfg, enum af_kind kind, const char *json,
                                size_t len, struct af_watch_event *ev, struct af_error *err)
{
    static const char *const types[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};
    json_t *root, *obj;
    const char *type, *okind, *want = kind == AF_KIND_NODE ? "Node" : "Pod";
    int rc = 0, t = -1;
    struct af_arena arena = AF_ARENA_INIT, *prev;

    memset(ev, 0, sizeof(*ev));
    prev = af__codec_arena_enter(&arena);
    /* parsed without what is never read (a third of a Node, a fifth of a Pod) */
    rc = af__codec_load_flags(json, len, JSON_ALLOW_NUL | AF__PARSE_SKIP_UNREAD, "watch event",
                              &root, err);
    if (rc) {
        af__codec_arena_leave(&arena, prev);
        af_arena_release(&arena);
        return rc;
    }
    if (!json_is_object(root)) {
        rc = af_error_set(err, AF_ETYPE, "", 0, 0, "watch event: expected an object, got %s",
                          af__codec_type_name(root));
        goto out;
    }
    type = af__codec_get_str(root, "type");
    for (size_t i = 0; type && i < AF_ARRAY_SIZE(types); i++)
        if (!strcmp(type, types[i]))
            t = (int)i;
    if (t < 0) {
        rc = type ? af_error_set(err, AF_EINVAL, "", 0, 0, "type: unknown watch event type '%.40s'",
                                 type)
                  : af_error_set(err, AF_EINVAL, "", 0, 0, "type: missing");
        goto out;
    }
    ev->type = (enum af_watch_type)t;
    obj = af__codec_get(root, "object");
    if (!json_is_object(obj)) {
        rc = af_error_set(err, AF_ETYPE, "", 0, 0, "object: expected an object, got %s",
                          af__codec_type_name(obj));
        goto out;
    }
    {
        const char *rv = af__codec_get_str(af__codec_get(obj, "metadata"), "resourceVersion");
        ev->rv = rv && *rv ? af_xstrdup(rv) : NULL;
    }
    if (ev->type == AF_WATCH_BOOKMARK)
        goto out;
    if (ev->type == AF_WATCH_ERROR) {
        json_t *code = af__codec_get(obj, "code");
        ev->status_code = json_is_integer(code) && json_integer_value(code) >= 0 &&
                                  json_integer_value(code) < 1000
                              ? (int)json_integer_value(code)
                              : 0;
        ev->status_reason = dup_str(obj, "reason");
        ev->status_message = dup_str(obj, "message");
        goto out;
    }
    okind = af__codec_get_str(obj, "kind");
    if (okind && strcmp(okind, want)) {
        rc = af_error_set(err, AF_EINVAL, "", 0, 0, "object.kind: expected %s, got '%.40s'", want,
                          okind);
        goto out;
    }
    if (kind == AF_KIND_NODE)
        rc = af__codec_node_from_json(cfg, obj, "object", &ev->node, err);
    else
        rc = af__codec_pod_from_json(obj, "object", &ev->pod, err);
out:
    if (rc)
        af_watch_event_clear(ev);
    json_decref(root);
    af__codec_arena_leave(&arena, prev);
    af_arena_release(&arena);
    return rc;
}

/* ---- cluster files ---------------------------------------------------------------------- */

#define CLUSTER_EXPECTED "a JSON or YAML List of Nodes and Pods, as `kubectl get nodes,pods -A -o json` prints"

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = s ? strlen(s) : 0, m = strlen(suffix);
    return n >= m && !strcasecmp(s + n - m, suffix);
}

/* JSON text to a tree; a syntax error names the file, line and column. */
static int cluster_json(const char *name, const char *text, size_t len, json_t **out,
                        struct af_error *err)
{
    struct af__codec_perr perr;
    int line, col;

    *out = af__codec_parse(text, len, JSON_ALLOW_NUL, &perr);
    if (*out)
        return 0;
    af__codec_line_col(text, perr.offset, &line, &col);
    return af_error_set(err, AF_EPARSE, name, line, col,
                        "malformed JSON: %s (expected " CLUSTER_EXPECTED ")", perr.text);
}

/* YAML text to a tree through af_yaml_to_json; a syntax error names line and column. */
static int cluster_yaml(const char *name, const char *text, size_t len, json_t **out,
                        struct af_error *err)
{
    /* YAML aliases can make a small file expand: the JSON may be at most a few
     * times the YAML (plus a floor for tiny files). */
    struct af_buf js = AF_BUF_INIT(len < (SIZE_MAX - (64u << 20)) / 4 ? 4 * len + (64u << 20)
                                                                       : SIZE_MAX);
    int rc = af_yaml_to_json(name, text, len, &js, err);

    *out = NULL;
    if (!rc) {
        struct af__codec_perr perr;
        *out = af__codec_parse(js.buf ? js.buf : "null", js.buf ? js.len : 4,
                               JSON_ALLOW_NUL | JSON_DECODE_ANY, &perr);
        if (!*out)   /* the converter writes valid JSON; this is a bug if it happens */
            rc = af_error_set(err, AF_EPARSE, name, 0, 0, "internal: YAML converted to bad "
                              "JSON: %s", perr.text);
    }
    af_buf_release(&js);
    return rc;
}

/* What the top of a cluster file must be: a list of objects, a List, a Node or a Pod. */
static int cluster_shape(const char *name, json_t *root, struct af_error *err)
{
    const char *kind;

    if (json_is_null(root))
        return af_error_set(err, AF_EINVAL, name, 0, 0,
                            "the file holds no document (expected " CLUSTER_EXPECTED ")");
    if (json_is_array(root))
        return 0;
    if (!json_is_object(root))
        return af_error_set(err, AF_ETYPE, name, 0, 0, "expected " CLUSTER_EXPECTED ", found a %s",
                            af__codec_type_name(root));
    kind = af__codec_get_str(root, "kind");
    if (!kind && !af__codec_get(root, "items"))
        return af_error_set(err, AF_EINVAL, name, 0, 0,
                            "expected " CLUSTER_EXPECTED ", found a mapping with neither kind "
                            "nor items");
    if (kind && strcmp(kind, "List") && strcmp(kind, "NodeList") && strcmp(kind, "PodList") &&
        strcmp(kind, "Node") && strcmp(kind, "Pod"))
        return af_error_set(err, AF_EINVAL, name, 0, 0,
                            "expected kind List, NodeList, PodList, Node or Pod, found kind "
                            "'%.60s'%s%s%s",
                            kind, af__codec_kind_hint(kind) ? "; did you mean " : "",
                            af__codec_kind_hint(kind) ? af__codec_kind_hint(kind) : "",
                            af__codec_kind_hint(kind) ? "?" : "");
    return 0;
}

/* A cluster file's nodes priced with its NodeOverlays before they reach the caller. */
struct overlaid {
    af_item_cb cb;
    void *ud;
    const struct af_config *cfg;
    const struct af_overlays *ovs;
};

static void overlaid_item(void *ud, struct af_node_info *node, struct af_pod_info *pod)
{
    struct overlaid *o = ud;

    if (node) {
        struct af_price_inputs in = {.overlays = o->ovs};
        af_node_price(o->cfg ? o->cfg->catalog : NULL, o->cfg ? o->cfg->policy : NULL, &in,
                      node);
    }
    o->cb(o->ud, node, pod);
}

/* The Karpenter NodeOverlays among a cluster file's items (kubectl get
 * nodes,pods,nodeoverlays -A -o json); *out NULL when there are none. */
int af__codec_file_overlays(json_t *root, struct af_overlays **out, struct af_error *err)
{
    json_t *items = json_is_array(root) ? root : af__codec_get(root, "items"), *it;
    struct af_overlay *v = NULL;
    size_t i, n = 0, cap = 0;

    *out = NULL;
    json_array_foreach(json_is_array(items) ? items : NULL, i, it) {
        const char *kind = af__codec_get_str(it, "kind");
        char at[48];
        int rc;
        if (!kind || strcmp(kind, "NodeOverlay"))
            continue;
        af__codec_path_index(at, sizeof(at), "items", i);
        AF_GROW(v, cap, n + 1);
        rc = af__codec_overlay_from_json(it, at, &v[n], err);
        if (rc) {
            for (size_t k = 0; k < n; k++)
                af_overlay_release(&v[k]);
            af_free(v);
            return rc;
        }
        n++;
    }
    if (n)
        *out = af_overlays_new(v, n);
    return 0;
}

int af__codec_cluster_root(const char *name, const char *text, size_t len, json_t **out,
                           struct af_error *err)
{
    json_t *root = NULL;
    size_t i = 0;
    int rc;

    *out = NULL;
    if (!name)
        name = "cluster";
    if (!text)
        return af_error_set(err, AF_EINVAL, name, 0, 0, "no input");
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
        i++;
    if (i == len)
        return af_error_set(err, AF_EINVAL, name, 0, 0,
                            "the file is empty (expected " CLUSTER_EXPECTED ")");
    if (ends_with(name, ".json")) {
        rc = cluster_json(name, text, len, &root, err);
    } else if (text[i] == '{' || text[i] == '[') {
        /* JSON, or YAML in flow style, which starts the same way: a file not named .json
         * that is not JSON is read as the YAML it may be (YAML is a superset of JSON). */
        struct af_error jerr = {0};
        rc = cluster_json(name, text, len, &root, &jerr);
        if (rc)
            rc = cluster_yaml(name, text, len, &root, err);
    } else {
        rc = cluster_yaml(name, text, len, &root, err);
    }
    if (!rc)
        rc = cluster_shape(name, root, err);
    if (rc) {
        json_decref(root);
        return rc;
    }
    *out = root;
    return 0;
}

int af_codec_decode_cluster(const struct af_config *cfg, const char *name, const char *text,
                            size_t len, af_item_cb cb, void *ud, struct af_error *err)
{
    struct af_overlays *ovs = NULL;
    struct overlaid wrap;
    struct af_error first = {0};
    json_t *root = NULL;
    size_t skipped = 0;
    int rc;

    if (!name)
        name = "cluster";
    rc = af__codec_cluster_root(name, text, len, &root, err);
    if (!rc) {
        rc = af__codec_file_overlays(root, &ovs, err);
        if (rc && err && !err->file[0])
            snprintf(err->file, sizeof(err->file), "%s", name);
    }
    if (!rc && ovs) {
        wrap = (struct overlaid){cb, ud, cfg, ovs};
        cb = overlaid_item;
        ud = &wrap;
    }
    if (!rc) {
        rc = decode_list_json(cfg, root, cb, ud, &skipped, &first);
        if (rc && err) {
            *err = first;
            if (!err->file[0])
                snprintf(err->file, sizeof(err->file), "%s", name);
        }
        /* One odd object must not keep the rest of the cluster out: skip it, loudly. */
        if (!rc && skipped) {
            char msg[600], count[24];
            af_error_format(&first, msg, sizeof(msg));
            snprintf(count, sizeof(count), "%zu", skipped);
            AF_LOG(AF_LOG_WARN, "cluster file: skipped objects that could not be decoded", "file",
                   name, "skipped", count, "first", msg, NULL);
        }
    }
    json_decref(root);
    af_overlays_unref(ovs);
    return rc;
}

int af_codec_load_cluster_file(const struct af_config *cfg, const char *path, af_item_cb cb,
                               void *ud, struct af_error *err)
{
    struct af_buf file = AF_BUF_INIT(AF_CLUSTER_FILE_MAX);
    struct stat st;
    int rc;

    if (stat(path, &st) != 0) {
        rc = af_errno_from_sys(errno);
        return af_error_set(err, rc, path, 0, 0, "%s (expected " CLUSTER_EXPECTED ")",
                            rc == AF_ENOENT ? "no such file" : af_strerror(rc));
    }
    if (S_ISDIR(st.st_mode))
        return af_error_set(err, AF_EINVAL, path, 0, 0,
                            "is a directory (expected a file holding " CLUSTER_EXPECTED ")");
    rc = af_buf_read_file(&file, path);
    if (rc == AF_ETOOBIG)
        rc = af_error_set(err, rc, path, 0, 0, "larger than %zu MiB, the limit for a cluster file",
                          (size_t)AF_CLUSTER_FILE_MAX >> 20);
    else if (rc)
        rc = af_error_set(err, rc, path, 0, 0, "cannot read: %s", af_strerror(rc));
    if (!rc)
        rc = af_codec_decode_cluster(cfg, path, file.buf ? file.buf : "", file.len, cb, ud, err);
    af_buf_release(&file);
    return rc;
}
