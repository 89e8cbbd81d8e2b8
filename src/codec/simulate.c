/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulator's inputs: a cluster file with what kube-scheduler's filters read
 * (node labels and taints, pod tolerations and nodeSelector, which the cache does
 * not keep), a trace of pod arrivals, and the pods of a real cluster turned into a
 * trace (--workload-from-cluster). A trace entry becomes a Pod object and goes
 * through the same decoder as the API server's pods (af__codec_pod_from_json), so
 * requests, intent annotations, tenant and rollout fields mean what they mean to
 * the server.
 */
#include "accelfit/simulate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accelfit/codec.h"
#include "accelfit/decide.h"
#include "accelfit/prices.h"
#include "codec/internal.h"
#include "accelfit/banned.h"

/* ---- releasing -------------------------------------------------------------------------- */

static void pairs_free(struct af_pair *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        af_free(p[i].key);
        af_free(p[i].value);
    }
    af_free(p);
}

static void sim_pod_release(struct af_sim_pod *p)
{
    af_pod_info_unref(p->info);
    af_free(p->tenant);
    pairs_free(p->node_selector, p->n_node_selector);
    for (size_t i = 0; i < p->n_tolerations; i++) {
        af_free(p->tolerations[i].key);
        af_free(p->tolerations[i].op);
        af_free(p->tolerations[i].value);
        af_free(p->tolerations[i].effect);
    }
    af_free(p->tolerations);
    memset(p, 0, sizeof(*p));
}

void af_sim_node_release(struct af_sim_node *n)
{
    af_node_info_unref(n->info);
    pairs_free(n->labels, n->n_labels);
    for (size_t t = 0; t < n->n_taints; t++) {
        af_free(n->taints[t].key);
        af_free(n->taints[t].value);
        af_free(n->taints[t].effect);
    }
    af_free(n->taints);
    memset(n, 0, sizeof(*n));
}

void af_sim_cluster_release(struct af_sim_cluster *c)
{
    for (size_t i = 0; i < c->n_nodes; i++)
        af_sim_node_release(&c->nodes[i]);
    af_free(c->nodes);
    for (size_t i = 0; i < c->n_bound; i++)
        sim_pod_release(&c->bound[i]);
    af_free(c->bound);
    af_overlays_unref(c->overlays);
    memset(c, 0, sizeof(*c));
}

void af_sim_cluster_drop_pods(struct af_sim_cluster *c)
{
    for (size_t i = 0; i < c->n_bound; i++)
        sim_pod_release(&c->bound[i]);
    af_free(c->bound);
    c->bound = NULL;
    c->n_bound = 0;
}

void af_sim_trace_release(struct af_sim_trace *t)
{
    for (size_t i = 0; i < t->n_pods; i++)
        sim_pod_release(&t->pods[i]);
    af_free(t->pods);
    memset(t, 0, sizeof(*t));
}

/* ---- small readers ------------------------------------------------------------------------ */

double af_sim_parse_duration(const char *s)
{
    double v;

    return af_parse_duration(s, AF_DURATION_SECONDS | AF_DURATION_FRACTIONS, AF_SIM_MAX_SECONDS,
                             &v)
               ? -1
               : v;
}

/* A time or a duration: a JSON number (seconds) or a duration string; -1 when neither. */
static double seconds(json_t *v)
{
    if (json_is_number(v))
        return json_number_value(v) >= 0 && json_number_value(v) <= AF_SIM_MAX_SECONDS
                   ? json_number_value(v)
                   : -1;
    return af_sim_parse_duration(af__codec_str(v));
}

static char *scalar_dup(json_t *v)
{
    char buf[64];

    if (json_is_string(v))
        return af__codec_str(v) ? af_xstrdup(af__codec_str(v)) : NULL;
    if (json_is_true(v))
        return af_xstrdup("true");
    if (json_is_false(v))
        return af_xstrdup("false");
    if (json_is_integer(v)) {
        snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
        return af_xstrdup(buf);
    }
    if (json_is_real(v)) {
        snprintf(buf, sizeof(buf), "%.15g", json_real_value(v));
        return af_xstrdup(buf);
    }
    return NULL;
}

static struct af_pair *pairs(json_t *map, size_t *n)
{
    struct af_pair *p;
    const char *key;
    json_t *v;

    *n = 0;
    if (!json_is_object(map) || !json_object_size(map))
        return NULL;
    p = af_xcalloc(json_object_size(map), sizeof(*p));
    json_object_foreach(map, key, v) {
        char *text = scalar_dup(v);
        if (!text)
            continue;
        p[*n].key = af_xstrdup(key);
        p[*n].value = text;
        (*n)++;
    }
    return p;
}

static void node_taints(json_t *spec, struct af_sim_node *n)
{
    json_t *arr = af__codec_get(spec, "taints"), *t;
    size_t i;

    if (!json_is_array(arr) || !json_array_size(arr))
        return;
    n->taints = af_xcalloc(json_array_size(arr), sizeof(*n->taints));
    json_array_foreach(arr, i, t) {
        const char *key = af__codec_get_str(t, "key"), *effect = af__codec_get_str(t, "effect");
        if (!key || !effect)
            continue;
        n->taints[n->n_taints].key = af_xstrdup(key);
        n->taints[n->n_taints].value = scalar_dup(af__codec_get(t, "value"));
        n->taints[n->n_taints].effect = af_xstrdup(effect);
        n->n_taints++;
    }
}

static int pod_tolerations(json_t *arr, const char *where, struct af_sim_pod *p,
                           struct af_error *err)
{
    size_t i;
    json_t *t;

    if (!arr || json_is_null(arr))
        return 0;
    if (!json_is_array(arr))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "%s: tolerations: expected a list, got %s",
                            where, af__codec_type_name(arr));
    p->tolerations = af_xcalloc(json_array_size(arr) + 1, sizeof(*p->tolerations));
    json_array_foreach(arr, i, t) {
        struct af_toleration *o = &p->tolerations[p->n_tolerations];
        const char *op = af__codec_get_str(t, "operator");
        if (!json_is_object(t))
            return af_error_set(err, AF_ETYPE, "", 0, 0,
                                "%s: tolerations[%zu]: expected an object, got %s", where, i,
                                af__codec_type_name(t));
        if (op && strcmp(op, "Exists") && strcmp(op, "Equal"))
            return af_error_set(err, AF_EINVAL, "", 0, 0,
                                "%s: tolerations[%zu].operator: expected Exists or Equal, got "
                                "'%.40s'",
                                where, i, op);
        p->n_tolerations++;
        o->key = scalar_dup(af__codec_get(t, "key"));
        o->op = af_xstrdup(op ? op : "Equal");
        o->value = scalar_dup(af__codec_get(t, "value"));
        o->effect = scalar_dup(af__codec_get(t, "effect"));
    }
    return 0;
}

static int cmp_node(const void *a, const void *b)
{
    return strcmp(((const struct af_sim_node *)a)->info->name,
                  ((const struct af_sim_node *)b)->info->name);
}

static const struct af_sim_node *find_node(const struct af_sim_cluster *c, const char *name)
{
    struct af_node_info key_info = {.name = (char *)name};
    struct af_sim_node key = {.info = &key_info};

    return c->n_nodes ? bsearch(&key, c->nodes, c->n_nodes, sizeof(key), cmp_node) : NULL;
}

/* The fields of a pod the simulator reads besides its record. Steals `info`. */
static int sim_pod_fill(json_t *obj, const char *where, struct af_pod_info *info,
                        struct af_sim_pod *out, struct af_error *err)
{
    json_t *spec = af__codec_get(obj, "spec");

    memset(out, 0, sizeof(*out));
    out->info = info;
    out->duration = -1;
    out->tenant = af_xstrdup(info->tenant ? info->tenant : info->ns);
    out->node_selector = pairs(af__codec_get(spec, "nodeSelector"), &out->n_node_selector);
    return pod_tolerations(af__codec_get(spec, "tolerations"), where, out, err);
}

/* ---- documents ------------------------------------------------------------------------------ */

/* JSON text or YAML (by the first non-space byte) to a new json_t. */
static int load_doc(const char *name, const char *text, size_t len, json_t **root,
                    struct af_error *err)
{
    struct af_buf js = AF_BUF_INIT(len < (SIZE_MAX - (64u << 20)) / 4 ? 4 * len + (64u << 20)
                                                                       : SIZE_MAX);
    size_t i = 0;
    int rc;

    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
        i++;
    if (i < len && (text[i] == '{' || text[i] == '['))
        rc = af__codec_load(text, len, name, root, err);
    else {
        rc = af_yaml_to_json(name, text, len, &js, err);
        if (!rc)
            rc = af__codec_load(js.buf ? js.buf : "null", js.buf ? js.len : 4, name, root, err);
    }
    af_buf_release(&js);
    if (rc && err && !err->file[0])
        snprintf(err->file, sizeof(err->file), "%s", name);
    return rc;
}

static double item_time(json_t *obj, const char *field)
{
    return af_parse_rfc3339(af__codec_get_str(af__codec_get(obj, "metadata"), field));
}

/* When a finished pod stopped: the latest terminated.finishedAt of its containers; -1. */
static double finished_at(json_t *status)
{
    json_t *cs = af__codec_get(status, "containerStatuses"), *c;
    double last = -1;
    size_t i;

    json_array_foreach(json_is_array(cs) ? cs : NULL, i, c) {
        double t = af_parse_rfc3339(af__codec_get_str(
            af__codec_get(af__codec_get(c, "state"), "terminated"), "finishedAt"));
        if (t > last)
            last = t;
    }
    return last;
}

static int trace_finish(const char *name, struct af_sim_trace *t, double end,
                        struct af_error *err);

struct cluster_pod {
    struct af_sim_pod pod;
    double created, started, finished;   /* unix seconds, -1 unknown */
};

int af_codec_decode_sim_cluster(const struct af_config *cfg, const char *name, const char *text,
                                size_t len, struct af_sim_cluster *out, struct af_sim_trace *trace,
                                struct af_error *err)
{
    json_t *root = NULL, *items, *it;
    struct cluster_pod *pods = NULL;
    size_t n_pods = 0, cap_pods = 0, cap_nodes = 0, cap_bound = 0, cap_trace = 0, i;
    double first = -1, last = -1;
    int rc;

    memset(out, 0, sizeof(*out));
    if (trace)
        memset(trace, 0, sizeof(*trace));
    rc = load_doc(name, text, len, &root, err);
    if (rc)
        return rc;
    items = json_is_array(root) ? root : af__codec_get(root, "items");
    if (json_is_object(root) && !items &&
        (af__codec_get_str(root, "kind") && (!strcmp(af__codec_get_str(root, "kind"), "Node") ||
                                             !strcmp(af__codec_get_str(root, "kind"), "Pod")))) {
        items = json_array();
        json_array_append(items, root);
        json_decref(root);
        root = items;
    }
    if (!json_is_array(items)) {
        rc = af_error_set(err, AF_ETYPE, name, 0, 0,
                          "expected a List of Nodes and Pods (kubectl get nodes,pods -A -o json)");
        goto done;
    }
    json_array_foreach(items, i, it) {
        const char *kind = af__codec_get_str(it, "kind");
        char at[64];
        af__codec_path_index(at, sizeof(at), "items", i);
        if (kind && !strcmp(kind, "Node")) {
            struct af_node_info *info;
            struct af_sim_node *n;
            rc = af__codec_node_from_json(cfg, it, at, &info, err);
            if (rc)
                goto done;
            AF_GROW(out->nodes, cap_nodes, out->n_nodes + 1);
            n = &out->nodes[out->n_nodes++];
            memset(n, 0, sizeof(*n));
            n->info = info;
            n->labels = pairs(af__codec_get(af__codec_get(it, "metadata"), "labels"), &n->n_labels);
            node_taints(af__codec_get(it, "spec"), n);
        } else if (kind && !strcmp(kind, "Pod")) {
            struct af_pod_info *info;
            struct cluster_pod *cp;
            json_t *status = af__codec_get(it, "status");
            rc = af__codec_pod_from_json(it, at, &info, err);
            if (rc)
                goto done;
            AF_GROW(pods, cap_pods, n_pods + 1);
            cp = &pods[n_pods++];
            rc = sim_pod_fill(it, at, info, &cp->pod, err);
            if (rc)
                goto done;
            cp->created = item_time(it, "creationTimestamp");
            cp->started = af_parse_rfc3339(af__codec_get_str(status, "startTime"));
            cp->finished = info->terminal ? finished_at(status) : -1;
            for (int k = 0; k < 3; k++) {
                double t = k == 0 ? cp->created : k == 1 ? cp->started : cp->finished;
                if (t >= 0 && (first < 0 || t < first))
                    first = t;
                if (t > last)
                    last = t;
            }
        }
    }
    rc = af__codec_file_overlays(items, &out->overlays, err);
    if (rc)
        goto done;
    if (out->overlays) {
        /* the nodes priced again as the file's NodeOverlays price them (docs/pricing.md) */
        struct af_price_inputs in = {.overlays = out->overlays};
        for (i = 0; i < out->n_nodes; i++)
            af_node_price(cfg ? cfg->catalog : NULL, cfg ? cfg->policy : NULL, &in,
                          out->nodes[i].info);
    }
    if (out->n_nodes)
        qsort(out->nodes, out->n_nodes, sizeof(*out->nodes), cmp_node);
    for (i = 0; i + 1 < out->n_nodes; i++)
        if (!strcmp(out->nodes[i].info->name, out->nodes[i + 1].info->name)) {
            rc = af_error_set(err, AF_EINVAL, name, 0, 0, "node '%.200s' is listed twice",
                              out->nodes[i].info->name);
            goto done;
        }
    if (trace && first >= 0 && last - first > AF_SIM_MAX_SECONDS) {
        rc = af_error_set(err, AF_EINVAL, name, 0, 0,
                          "the pods' times span more than 100 years, the limit of a trace");
        goto done;
    }
    if (trace && n_pods > AF_SIM_MAX_PODS) {
        rc = af_error_set(err, AF_ETOOBIG, name, 0, 0,
                          "%zu pods: a trace holds at most %d, the limit", n_pods,
                          AF_SIM_MAX_PODS);
        goto done;
    }
    for (i = 0; i < n_pods; i++) {
        struct cluster_pod *cp = &pods[i];
        struct af_pod_info *info = cp->pod.info;
        bool on_node = info->node_name && find_node(out, info->node_name);

        if (trace && !info->system && !(info->terminal && cp->finished < 0)) {
            /* A pod the file gives no times for was there from the start; a finished one
             * without them cannot be replayed and is left out. */
            struct af_sim_pod *tp;
            double created = cp->created >= 0 ? cp->created : first >= 0 ? first : 0;
            double begin = cp->started >= 0 ? cp->started : created;
            AF_GROW(trace->pods, cap_trace, trace->n_pods + 1);
            tp = &trace->pods[trace->n_pods++];
            *tp = cp->pod;
            tp->arrival = first >= 0 ? created - first : 0;
            tp->duration = cp->finished >= 0 ? fmax(0, cp->finished - begin) : -1;
            /* The trace places it anew: forget where the cluster put it. */
            af_free(info->node_name);
            info->node_name = NULL;
            info->terminal = false;
            info->failed = false;
            memset(&cp->pod, 0, sizeof(cp->pod));
            continue;
        }
        if (on_node && !info->terminal && (!trace || info->system)) {
            AF_GROW(out->bound, cap_bound, out->n_bound + 1);
            out->bound[out->n_bound] = cp->pod;
            out->bound[out->n_bound].preexisting = true;
            out->n_bound++;
            memset(&cp->pod, 0, sizeof(cp->pod));
            continue;
        }
        sim_pod_release(&cp->pod);
    }
    rc = 0;
    if (trace) {
        trace->start_unix = first >= 0 ? first : 0;
        rc = trace_finish(name, trace, last > first ? last - first : 3600, err);
    }
done:
    for (size_t k = 0; k < n_pods; k++)
        if (pods[k].pod.info)
            sim_pod_release(&pods[k].pod);
    af_free(pods);
    json_decref(root);
    if (rc) {
        af_sim_cluster_release(out);
        if (trace)
            af_sim_trace_release(trace);
    }
    return rc;
}

/* ---- traces ----------------------------------------------------------------------------------- */

static const char *const entry_keys[] = {
    "name",     "namespace", "at",          "duration",     "tenant",   "owner",   "labels",
    "annotations", "requests", "tolerations", "nodeSelector", "replicas", "every", NULL,
};

/* Replica r of an entry as a Pod object (new). */
static json_t *entry_pod(json_t *e, const char *name, const char *owner)
{
    json_t *pod = json_object(), *meta = json_object(), *spec = json_object();
    json_t *labels = json_is_object(af__codec_get(e, "labels"))
                         ? json_deep_copy(af__codec_get(e, "labels"))
                         : json_object();
    json_t *requests = af__codec_get(e, "requests"), *limits = json_object(), *c = json_object();
    const char *ns = af__codec_get_str(e, "namespace"), *tenant = af__codec_get_str(e, "tenant");
    const char *key;
    json_t *v;

    json_object_set_new(pod, "kind", json_string("Pod"));
    json_object_set_new(meta, "name", json_string(name));
    json_object_set_new(meta, "namespace", json_string(ns && *ns ? ns : "default"));
    if (tenant)
        json_object_set_new(labels, "accelfit.io/tenant", json_string(tenant));
    json_object_set_new(meta, "labels", labels);
    if (json_is_object(af__codec_get(e, "annotations")))
        json_object_set(meta, "annotations", af__codec_get(e, "annotations"));
    if (owner) {
        const char *slash = strchr(owner, '/');
        json_t *ref = json_object(), *refs = json_array();
        char *kind = af_xstrndup(owner, (size_t)(slash - owner));
        json_object_set_new(ref, "kind", json_string(kind));
        json_object_set_new(ref, "name", json_string(slash + 1));
        json_object_set_new(ref, "controller", json_true());
        json_array_append_new(refs, ref);
        json_object_set_new(meta, "ownerReferences", refs);
        af_free(kind);
    }
    json_object_set_new(pod, "metadata", meta);
    /* Extended resources must have limits equal to requests; the API server would insist. */
    json_object_foreach(json_is_object(requests) ? requests : NULL, key, v) {
        if (strcmp(key, "cpu") && strcmp(key, "memory"))
            json_object_set(limits, key, v);
    }
    {
        json_t *res = json_object();
        if (json_is_object(requests))
            json_object_set(res, "requests", requests);
        json_object_set_new(res, "limits", limits);
        json_object_set_new(c, "name", json_string("main"));
        json_object_set_new(c, "resources", res);
    }
    json_object_set_new(spec, "containers", json_pack("[o]", c));
    json_object_set_new(pod, "spec", spec);
    json_object_set_new(pod, "status", json_pack("{s:s}", "phase", "Pending"));
    return pod;
}

static int trace_entry(json_t *e, const char *where, double every_default,
                       struct af_sim_trace *out, size_t *cap, struct af_error *err)
{
    const char *name = af__codec_get_str(e, "name"), *owner = af__codec_get_str(e, "owner");
    json_t *v;
    double at = 0, duration = -1, every = every_default;
    long long replicas = 1;
    const char *key;
    int rc = 0;

    if (!json_is_object(e))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "%s: expected an object, got %s", where,
                            af__codec_type_name(e));
    json_object_foreach(e, key, v) {
        size_t k;
        for (k = 0; entry_keys[k] && strcmp(entry_keys[k], key); k++)
            ;
        if (!entry_keys[k])
            return af_error_set(err, AF_EINVAL, "", 0, 0,
                                "%s: unknown key '%.60s' (known: name, namespace, at, duration, "
                                "tenant, owner, labels, annotations, requests, tolerations, "
                                "nodeSelector, replicas, every)",
                                where, key);
    }
    if (!name || !*name)
        return af_error_set(err, AF_EINVAL, "", 0, 0, "%s: name: missing", where);
    if ((v = af__codec_get(e, "at")) != NULL && (at = seconds(v)) < 0)
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "%s (%.60s): at: expected seconds or a duration like 1h30m, at most "
                            "100 years",
                            where, name);
    if ((v = af__codec_get(e, "duration")) != NULL && !json_is_null(v) &&
        (duration = seconds(v)) < 0)
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "%s (%.60s): duration: expected seconds or a duration like 1h30m, "
                            "at most 100 years",
                            where, name);
    if ((v = af__codec_get(e, "every")) != NULL && (every = seconds(v)) < 0)
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "%s (%.60s): every: expected seconds or a duration like 10m, at most "
                            "100 years",
                            where, name);
    if ((v = af__codec_get(e, "replicas")) != NULL) {
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 100000)
            return af_error_set(err, AF_EINVAL, "", 0, 0,
                                "%s (%.60s): replicas: expected an integer from 1 to 100000",
                                where, name);
        replicas = json_integer_value(v);
    }
    if (at + (double)(replicas - 1) * every > AF_SIM_MAX_SECONDS)
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "%s (%.60s): the last replica would arrive after 100 years (at + "
                            "(replicas - 1) x every), the limit of a trace",
                            where, name);
    /* A trace with an end (out->end, set before its entries) holds no arrival after it. */
    if (out->end > 0 && at > out->end)
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "%s (%.60s): at: %.0f s is after the trace's end (end: %.0f s); "
                            "nothing would run it",
                            where, name, at, out->end);
    if (out->end > 0 && at + (double)(replicas - 1) * every > out->end)
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "%s (%.60s): replicas: the last of %lld would arrive at %.0f s, "
                            "after the trace's end (end: %.0f s)",
                            where, name, replicas, at + (double)(replicas - 1) * every, out->end);
    if ((size_t)replicas > AF_SIM_MAX_PODS - out->n_pods)
        return af_error_set(err, AF_ETOOBIG, "", 0, 0,
                            "%s (%.60s): the trace would hold more than %d pods (all entries' "
                            "replicas together), the limit",
                            where, name, AF_SIM_MAX_PODS);
    if (owner && (!strchr(owner, '/') || strchr(owner, '/') == owner || !strchr(owner, '/')[1]))
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "%s (%.60s): owner: expected KIND/NAME (Job/train, ReplicaSet/web-5d8)",
                            where, name);
    if ((v = af__codec_get(e, "requests")) != NULL && !json_is_object(v))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "%s (%.60s): requests: expected a map, got %s",
                            where, name, af__codec_type_name(v));
    for (long long r = 0; r < replicas; r++) {
        char pname[256], at_where[300];
        json_t *pod;
        struct af_pod_info *info;
        struct af_sim_pod *sp;
        if (replicas > 1)
            snprintf(pname, sizeof(pname), "%.200s-%lld", name, r);
        else
            snprintf(pname, sizeof(pname), "%.240s", name);
        snprintf(at_where, sizeof(at_where), "%s (%.200s)", where, pname);
        pod = entry_pod(e, pname, owner);
        rc = af__codec_pod_from_json(pod, at_where, &info, err);
        if (!rc) {
            AF_GROW(out->pods, *cap, out->n_pods + 1);
            sp = &out->pods[out->n_pods++];
            rc = sim_pod_fill(pod, at_where, info, sp, err);
            if (!rc) {
                json_t *tol = af__codec_get(e, "tolerations");
                pairs_free(sp->node_selector, sp->n_node_selector);
                sp->node_selector = pairs(af__codec_get(e, "nodeSelector"), &sp->n_node_selector);
                rc = pod_tolerations(tol, at_where, sp, err);
                sp->arrival = at + (double)r * every;
                sp->duration = duration;
            }
        }
        json_decref(pod);
        if (rc)
            return rc;
    }
    return 0;
}

static int cmp_pod_name(const void *a, const void *b)
{
    const struct af_sim_pod *const *x = a, *const *y = b;
    int c = strcmp((*x)->info->ns, (*y)->info->ns);
    return c ? c : strcmp((*x)->info->name, (*y)->info->name);
}

/* Sorts by arrival (file order among equals), checks names are unique, sets the end. */
static int trace_finish(const char *name, struct af_sim_trace *t, double end,
                        struct af_error *err)
{
    struct af_sim_pod **byname;
    double last = 0;
    int rc = 0;

    /* A stable merge sort of indices by arrival (qsort is not stable). */
    {
        struct af_sim_pod *sorted = af_xmalloc((t->n_pods + 1) * sizeof(*sorted));
        size_t *idx = af_xmalloc((t->n_pods + 1) * sizeof(*idx));
        for (size_t i = 0; i < t->n_pods; i++)
            idx[i] = i;
        for (size_t w = 1; w < t->n_pods; w *= 2) {
            size_t *tmp = af_xmalloc((t->n_pods + 1) * sizeof(*tmp));
            for (size_t lo = 0; lo < t->n_pods; lo += 2 * w) {
                size_t mid = lo + w < t->n_pods ? lo + w : t->n_pods;
                size_t hi = lo + 2 * w < t->n_pods ? lo + 2 * w : t->n_pods;
                size_t a = lo, b = mid, o = lo;
                while (a < mid || b < hi)
                    tmp[o++] = (b >= hi || (a < mid && t->pods[idx[a]].arrival <=
                                                           t->pods[idx[b]].arrival))
                                   ? idx[a++]
                                   : idx[b++];
            }
            af_free(idx);
            idx = tmp;
        }
        for (size_t i = 0; i < t->n_pods; i++)
            sorted[i] = t->pods[idx[i]];
        af_free(t->pods);
        af_free(idx);
        t->pods = sorted;
    }
    byname = af_xmalloc((t->n_pods + 1) * sizeof(*byname));
    for (size_t i = 0; i < t->n_pods; i++) {
        byname[i] = &t->pods[i];
        if (t->pods[i].arrival > last)
            last = t->pods[i].arrival;
        if (t->pods[i].duration >= 0 && t->pods[i].arrival + t->pods[i].duration > last)
            last = t->pods[i].arrival + t->pods[i].duration;
    }
    if (t->n_pods)
        qsort(byname, t->n_pods, sizeof(*byname), cmp_pod_name);
    for (size_t i = 0; i + 1 < t->n_pods; i++)
        if (!cmp_pod_name(&byname[i], &byname[i + 1])) {
            rc = af_error_set(err, AF_EINVAL, name, 0, 0,
                              "pod %.100s/%.150s appears twice (names must be unique)",
                              byname[i]->info->ns, byname[i]->info->name);
            break;
        }
    af_free(byname);
    t->end = end > 0 ? end : last > 0 ? last : 3600;
    return rc;
}

/*
 * A trace error found on the JSON tree names its place as a path ("pods[3] (web): at: ...",
 * "pods[0]: unknown key 'start'", "end: ..."): turn that into the line and column of the
 * text, as the policy's errors have, with af_yaml_locate. The deepest step that exists wins.
 */
static void locate_error(const char *text, size_t len, struct af_error *err)
{
    static const char word[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-";
    char path[256] = "";
    const char *m = err->text;
    size_t used = 0;
    int line = 0, col = 0;

    if (!err || err->line)
        return;
    if (!strncmp(m, "pods[", 5) && strchr(m, ']')) {
        size_t n = (size_t)(strchr(m, ']') - m) + 1;
        used = (size_t)snprintf(path, sizeof(path), "%.*s", (int)n, m);
        m += n;
        if (!strncmp(m, " (", 2) && strchr(m, ')'))
            m = strchr(m, ')') + 1;
        /* A request the pod decoder refused is the entry's requests.KEY */
        if (!strncmp(m, ".spec.containers[0].resources.", 30)) {
            size_t k;
            m += 30;
            k = strcspn(m, ":");
            snprintf(path + used, sizeof(path) - used, ".%.*s", (int)k, m);
            m = "";
        }
        if (*m == ':')
            m++;
        while (*m == ' ')
            m++;
    }
    for (;;) {
        size_t k;
        if (!strncmp(m, "unknown key '", 13)) {
            m += 13;
            k = strcspn(m, "'");
        } else {
            k = strspn(m, word);
            if (!k || m[k] != ':')
                break;
        }
        if (used < sizeof(path))
            used += (size_t)snprintf(path + used, sizeof(path) - used, "%s%.*s", used ? "." : "",
                                     (int)k, m);
        if (m[k] != ':')
            break;
        m += k + 1;
        while (*m == ' ')
            m++;
    }
    while (path[0]) {
        char *cut;
        if (af_yaml_locate(text, len, path, &line, &col) == 0) {
            err->line = line;
            err->column = col;
            return;
        }
        cut = strrchr(path, '.');
        if (!cut && path[strlen(path) - 1] == ']')
            cut = strrchr(path, '[');
        if (!cut)
            break;
        *cut = '\0';
    }
}

int af_codec_decode_trace(const char *name, const char *text, size_t len,
                          struct af_sim_trace *out, struct af_error *err)
{
    json_t *root = NULL, *arr, *v;
    size_t cap = 0, i;
    double end = -1;
    int rc = 0;

    memset(out, 0, sizeof(*out));
    out->start_unix = 1795132800;   /* 2026-11-20T00:00:00Z unless the trace says */
    {
        size_t k = 0;
        while (k < len && (text[k] == ' ' || text[k] == '\t' || text[k] == '\n' || text[k] == '\r'))
            k++;
        if (k < len && text[k] == '{' && !memmem(text, len, "\"pods\"", 6)) {
            /* JSON Lines: one pod entry per line. */
            size_t line = 0, pos = 0;
            while (pos < len && !rc) {
                const char *nl = memchr(text + pos, '\n', len - pos);
                size_t end_pos = nl ? (size_t)(nl - text) : len, s = pos;
                line++;
                while (s < end_pos && (text[s] == ' ' || text[s] == '\t' || text[s] == '\r'))
                    s++;
                if (s < end_pos) {
                    char where[64];
                    rc = af__codec_load(text + s, end_pos - s, name, &v, err);
                    if (rc) {
                        err->line = (int)line;
                    } else {
                        snprintf(where, sizeof(where), "line %zu", line);
                        rc = trace_entry(v, where, 0, out, &cap, err);
                        json_decref(v);
                    }
                }
                pos = end_pos + 1;
            }
            goto finish;
        }
    }
    rc = load_doc(name, text, len, &root, err);
    if (rc)
        goto finish;
    if (!json_is_object(root)) {
        rc = af_error_set(err, AF_ETYPE, name, 0, 0,
                          "a trace is a map with pods: [...] (or JSON Lines), got %s",
                          af__codec_type_name(root));
        goto finish;
    }
    {
        const char *key;
        json_object_foreach(root, key, v) {
            if (strcmp(key, "apiVersion") && strcmp(key, "kind") && strcmp(key, "start") &&
                strcmp(key, "end") && strcmp(key, "pods")) {
                rc = af_error_set(err, AF_EINVAL, name, 0, 0,
                                  "unknown key '%.60s' (known: apiVersion, kind, start, end, pods)",
                                  key);
                goto finish;
            }
        }
    }
    if ((v = af__codec_get(root, "start")) != NULL) {
        out->start_unix = af_parse_rfc3339(af__codec_str(v));
        if (out->start_unix < 0) {
            rc = af_error_set(err, AF_EINVAL, name, 0, 0,
                              "start: expected an RFC 3339 time in UTC like 2026-11-20T00:00:00Z");
            goto finish;
        }
    }
    if ((v = af__codec_get(root, "end")) != NULL && ((end = seconds(v)) <= 0)) {
        rc = af_error_set(err, AF_EINVAL, name, 0, 0,
                          "end: expected a positive number of seconds or a duration like 24h, "
                          "at most 100 years");
        goto finish;
    }
    out->end = end;   /* entries are checked against it; trace_finish sets it for good */
    arr = af__codec_get(root, "pods");
    if (!json_is_array(arr)) {
        rc = af_error_set(err, AF_ETYPE, name, 0, 0, "pods: expected a list, got %s",
                          arr ? af__codec_type_name(arr) : "nothing");
        goto finish;
    }
    json_array_foreach(arr, i, v) {
        char where[48];
        snprintf(where, sizeof(where), "pods[%zu]", i);
        rc = trace_entry(v, where, 0, out, &cap, err);
        if (rc)
            break;
    }
    if (rc)
        goto located;
finish:
    if (!rc)
        rc = trace_finish(name, out, end, err);
located:
    if (rc && root && err)
        locate_error(text, len, err);
    if (rc) {
        if (err && !err->file[0])
            snprintf(err->file, sizeof(err->file), "%s", name);
        af_sim_trace_release(out);
    }
    json_decref(root);
    return rc;
}
