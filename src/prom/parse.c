/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prometheus HTTP API answers into a utilization snapshot. An instant query answers
 * {"status":"success","data":{"resultType":"vector","result":[{"metric":{...},
 * "value":[<unix time>,"<value>"]}]}}; a range query the same with "matrix" and
 * "values". Each series is mapped to a Kubernetes node by the first of the policy's
 * node labels it carries (an "instance" loses its ":port"), to a device by the device
 * labels it carries, and to "held by a pod" by the pod labels. A series no label maps
 * is counted and dropped; a value that is not a number drops that series only. The
 * snapshot keeps, per node, the last value and timestamp of each series, sorted by
 * node name for af_util_find, all in one arena.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/utilization.h"

struct pending {
    char *node;                /* arena */
    struct af_util_sample s;
};

struct af_util_build {
    struct af_arena arena;     /* node names; handed to the snapshot */
    struct pending *v;
    size_t n, cap;
    size_t unmapped;
};

struct af_util_build *af_util_build_new(void)
{
    return af_xcalloc(1, sizeof(struct af_util_build));
}

/* The node a series belongs to, or NULL. */
static const char *series_node(const struct af_util_policy *up, json_t *metric, char *buf,
                               size_t n)
{
    for (int i = 0; i < up->n_node_labels; i++) {
        const char *v = json_string_value(json_object_get(metric, up->node_labels[i]));
        size_t len;
        if (!v || !*v)
            continue;
        len = strlen(v);
        if (!strcmp(up->node_labels[i], "instance")) {
            /* "10.0.1.10:9100" -> "10.0.1.10"; "[fd00::1]:9100" -> "fd00::1" */
            const char *colon = strrchr(v, ':');
            if (v[0] == '[' && colon && colon > v && colon[-1] == ']') {
                v++;
                len = (size_t)(colon - 1 - v);
            } else if (colon && !strchr(v, ']') && colon == strchr(v, ':') &&
                       strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
                len = (size_t)(colon - v);
            }
        }
        if (len == 0 || len >= n)
            continue;
        memcpy(buf, v, len);
        buf[len] = '\0';
        return buf;
    }
    return NULL;
}

static void series_device(const struct af_util_policy *up, json_t *metric, char *out, size_t n)
{
    size_t used = 0;

    out[0] = '\0';
    for (int i = 0; i < up->n_device_labels && used < n; i++) {
        const char *v = json_string_value(json_object_get(metric, up->device_labels[i]));
        if (v && *v)
            used += (size_t)snprintf(out + used, n - used, "%s%s", used ? "/" : "", v);
    }
}

static bool series_held(const struct af_util_policy *up, enum af_util_metric m, json_t *metric)
{
    /* neuron-monitor has a NeuronCore series only while a runtime holds the core */
    if (m == AF_UM_NEURONCORE_UTIL)
        return true;
    for (int i = 0; i < up->n_pod_labels; i++) {
        const char *v = json_string_value(json_object_get(metric, up->pod_labels[i]));
        if (v && *v)
            return true;
    }
    return false;
}

/* One [<time>, "<value>"] point. */
static bool point(json_t *p, double scale, double *ts, double *value)
{
    const char *s;
    char *end;

    if (!json_is_array(p) || json_array_size(p) != 2 || !json_is_number(json_array_get(p, 0)))
        return false;
    s = json_string_value(json_array_get(p, 1));
    if (!s)
        return false;
    *ts = json_number_value(json_array_get(p, 0));
    *value = strtod(s, &end) * scale;
    return end != s && !*end && isfinite(*value) && isfinite(*ts) && *ts > 0;
}

int af_util_build_add(struct af_util_build *b, const struct af_util_policy *up,
                      enum af_util_metric m, const char *body, size_t len, char *why,
                      size_t whylen)
{
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr), *data, *result, *r;
    const char *status, *type;
    double scale = up->q[m].scale > 0 ? up->q[m].scale : 1;
    bool matrix;
    size_t i;
    int rc = AF_EPARSE;

    if (!root) {
        snprintf(why, whylen, "not JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                 jerr.column);
        return AF_EPARSE;
    }
    status = json_string_value(json_object_get(root, "status"));
    if (!status || strcmp(status, "success")) {
        const char *et = json_string_value(json_object_get(root, "errorType"));
        const char *e = json_string_value(json_object_get(root, "error"));
        snprintf(why, whylen, "status %.20s: %.40s: %.200s", status ? status : "missing",
                 et ? et : "?", e ? e : "no error text");
        goto out;
    }
    data = json_object_get(root, "data");
    type = json_string_value(json_object_get(data, "resultType"));
    result = json_object_get(data, "result");
    if (!type || !json_is_array(result) || (strcmp(type, "vector") && strcmp(type, "matrix"))) {
        snprintf(why, whylen, "expected data.resultType vector or matrix with a result array%s%s",
                 type ? ", got " : "", type ? type : "");
        goto out;
    }
    matrix = !strcmp(type, "matrix");
    json_array_foreach(result, i, r) {
        json_t *metric = json_object_get(r, "metric");
        char node[256];
        struct pending *p;
        double ts, value, idle_since = 0;

        if (!json_is_object(metric))
            continue;
        if (matrix) {
            json_t *vals = json_object_get(r, "values");
            size_t k = json_array_size(vals);
            if (!k || !point(json_array_get(vals, k - 1), scale, &ts, &value))
                continue;
            /* the trailing run below idle_below: idle since its first point */
            while (k-- > 0) {
                double t, x;
                if (!point(json_array_get(vals, k), scale, &t, &x) || !(x < up->idle_below))
                    break;
                idle_since = t;
            }
        } else if (!point(json_object_get(r, "value"), scale, &ts, &value)) {
            continue;
        }
        if (!series_node(up, metric, node, sizeof(node))) {
            b->unmapped++;
            continue;
        }
        AF_GROW(b->v, b->cap, b->n + 1);
        p = &b->v[b->n++];
        memset(p, 0, sizeof(*p));
        p->node = af_arena_strdup(&b->arena, node);
        p->s.metric = (uint8_t)m;
        p->s.held = series_held(up, m, metric);
        series_device(up, metric, p->s.device, sizeof(p->s.device));
        p->s.value = value;
        p->s.ts = ts;
        p->s.idle_since = idle_since;
    }
    rc = 0;
out:
    json_decref(root);
    return rc;
}

static int cmp_pending(const void *a, const void *b)
{
    const struct pending *x = a, *y = b;
    int c = strcmp(x->node, y->node);

    if (c)
        return c;
    if (x->s.metric != y->s.metric)
        return x->s.metric < y->s.metric ? -1 : 1;
    return strcmp(x->s.device, y->s.device);
}

/* The same series in the previous snapshot, or NULL. */
static const struct af_util_sample *previous(const struct af_util_snapshot *prev,
                                             const char *node, const struct af_util_sample *s)
{
    const struct af_util_node *pn = af_util_find(prev, node);

    for (size_t i = 0; pn && i < pn->n; i++)
        if (pn->samples[i].metric == s->metric && !strcmp(pn->samples[i].device, s->device))
            return &pn->samples[i];
    return NULL;
}

struct af_util_snapshot *af_util_build_finish(struct af_util_build *b,
                                              const struct af_util_snapshot *prev,
                                              double idle_below)
{
    struct af_util_snapshot *s = af_xcalloc(1, sizeof(*s));
    size_t nodes = 0;

    atomic_init(&s->refcnt, 1);
    s->ok = true;
    s->unmapped = b->unmapped;
    if (b->n)
        qsort(b->v, b->n, sizeof(*b->v), cmp_pending);
    for (size_t i = 0; i < b->n; i++)
        nodes += i == 0 || strcmp(b->v[i].node, b->v[i - 1].node);
    s->nodes = af_arena_alloc(&b->arena, (nodes + 1) * sizeof(*s->nodes));
    for (size_t i = 0; i < b->n;) {
        struct af_util_node *n = &s->nodes[s->n_nodes++];
        size_t j = i;
        while (j < b->n && !strcmp(b->v[j].node, b->v[i].node))
            j++;
        n->name = b->v[i].node;
        n->n = j - i;
        n->samples = af_arena_alloc(&b->arena, n->n * sizeof(*n->samples));
        for (size_t k = 0; k < n->n; k++) {
            struct af_util_sample *smp = &n->samples[k];
            const struct af_util_sample *old;
            struct af_util_agg *a;
            *smp = b->v[i + k].s;
            a = &n->agg[smp->metric];
            if (a->devices < UINT16_MAX) {
                bool idle = smp->value < idle_below;
                a->devices++;
                a->idle += idle;
                a->held += smp->held;
                a->busy_unheld += !idle && !smp->held;
                a->sum += smp->value;
                if (a->devices == 1 || smp->value > a->max)
                    a->max = smp->value;
                if (a->oldest_ts == 0 || smp->ts < a->oldest_ts)
                    a->oldest_ts = smp->ts;
            }
            if (!(smp->value < idle_below)) {
                smp->idle_since = 0;
                continue;
            }
            /* Idle now: idle since the earlier of what this answer shows and what the last
             * round saw, if that one was idle too. */
            old = previous(prev, n->name, smp);
            if (old && old->idle_since > 0 &&
                (smp->idle_since == 0 || old->idle_since < smp->idle_since))
                smp->idle_since = old->idle_since;
            if (smp->idle_since == 0)
                smp->idle_since = smp->ts;
        }
        i = j;
    }
    s->index_size = 16;
    while (s->index_size < 2 * s->n_nodes)
        s->index_size *= 2;
    s->index = af_arena_alloc(&b->arena, s->index_size * sizeof(*s->index));
    for (size_t i = 0; i < s->n_nodes; i++) {
        uint32_t h = af__util_hash(s->nodes[i].name);
        size_t pos = h & (s->index_size - 1);
        while (s->index[pos])
            pos = (pos + 1) & (s->index_size - 1);
        s->index[pos] = (uint64_t)h << 32 | (uint64_t)(i + 1);
    }
    s->arena = b->arena;
    af_free(b->v);
    af_free(b);
    return s;
}
