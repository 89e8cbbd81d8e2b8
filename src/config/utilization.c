/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The `utilization:` section of a policy: the PromQL queries accelfit sends to
 * Prometheus (each adaptable to a cluster's relabeling), the labels that name a
 * series' node, device and pod, how often to ask and how old an answer may be, and
 * how live utilization enters scoring, filter and the waste report. Every key is
 * optional over the defaults of af_utilization_policy_defaults; every value is checked
 * and a bad one is reported at its line and column. Percentages are written as
 * percent (90) and kept as fractions (0.9).
 */
#include <stdio.h>
#include <string.h>

#include "config/rollout.h"
#include "config/utilization.h"
#include "accelfit/banned.h"

static const char *const section_keys[] = {"interval",      "timeout",   "staleness", "retry_max",
                                           "node_labels",   "device_labels", "pod_labels",
                                           "queries",       "scoring",   "filter",    "waste",
                                           NULL};
static const char *const query_keys[] = {"query", "scale", NULL};
static const char *const scoring_keys[] = {"mode", "weight", "saturated_above", NULL};
static const char *const filter_keys[] = {"max_gpu_util", NULL};
static const char *const waste_keys[] = {"idle_below", "window", NULL};

static int duration(struct af__ydoc *d, yaml_node_t *v, const char *what, double min_s,
                    double *out)
{
    const char *s;
    int rc = af__ynode_string(d, v, what, &s);

    if (rc)
        return rc;
    if (af_parse_duration(s, 0, AF_DURATION_MAX_S, out))
        return af__ydoc_err(d, v, AF_EINVAL,
                            "'%s' must be a duration such as 5s, 2m or 1h (whole numbers, each "
                            "with a unit), not '%s'",
                            what, s);
    if (*out < min_s)
        return af__ydoc_err(d, v, AF_EINVAL, "'%s' must be at least %gs, not '%s'", what, min_s,
                            s);
    return 0;
}

/* A percentage in [0, 100], kept as a fraction. */
static int percent(struct af__ydoc *d, yaml_node_t *v, const char *what, double *out)
{
    double x;
    int rc = af__ynode_range(d, v, what, 0, false, 100, false, &x);   /* a percentage */

    if (rc)
        return rc;
    *out = x / 100;
    return 0;
}

/* A list of Prometheus label names (at most AF_UTILIZATION_MAX_LABELS). */
static int labels(struct af__ydoc *d, yaml_node_t *v, const char *what,
                  char (*dst)[AF_UTILIZATION_LABEL_MAX], int *n)
{
    int rc = af__ynode_expect(d, v, YAML_SEQUENCE_NODE, what), count = 0;

    if (rc)
        return rc;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++) {
        yaml_node_t *e = af__ydoc_node(d, *it);
        const char *s;
        rc = af__ynode_string(d, e, what, &s);
        if (rc)
            return rc;
        if (!*s || strlen(s) >= AF_UTILIZATION_LABEL_MAX || strspn(s, "abcdefghijklmnopqrstuvwxyz"
                                                               "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                               "0123456789_") != strlen(s) ||
            (s[0] >= '0' && s[0] <= '9'))
            return af__ydoc_err(d, e, AF_EINVAL,
                                "'%s' holds Prometheus label names ([a-zA-Z_][a-zA-Z0-9_]*, at "
                                "most %d characters), not '%s'",
                                what, AF_UTILIZATION_LABEL_MAX - 1, s);
        if (count == AF_UTILIZATION_MAX_LABELS)
            return af__ydoc_err(d, e, AF_EINVAL, "'%s' takes at most %d labels", what,
                                AF_UTILIZATION_MAX_LABELS);
        snprintf(dst[count++], AF_UTILIZATION_LABEL_MAX, "%s", s);
    }
    if (count == 0 && strcmp(what, "utilization.pod_labels"))
        return af__ydoc_err(d, v, AF_EINVAL, "'%s' must not be empty", what);
    *n = count;
    return 0;
}

/* One query: a string (PromQL), null or "" (do not ask), or {query, scale}. */
static int load_query(struct af__ydoc *d, yaml_node_t *v, const char *what, struct af_utilization_query *q)
{
    yaml_node_t *x = v;
    const char *s = NULL;
    int rc;

    if (v->type == YAML_MAPPING_NODE) {
        rc = af__ymap_expect(d, v, what, query_keys);
        if (rc)
            return rc;
        x = af__ymap_get(d, v, "query");
        if (!x)
            return af__ydoc_err(d, v, AF_EINVAL, "'%s' needs a 'query'", what);
        if (af__ymap_get(d, v, "scale")) {
            yaml_node_t *sv = af__ymap_get(d, v, "scale");
            rc = af__ynode_double(d, sv, "scale", -1e12, 1e12, &q->scale);
            if (rc)
                return rc;
            if (!(q->scale > 0))
                return af__ydoc_err(d, sv, AF_EINVAL, "'%s.scale' must be positive", what);
        }
    }
    if (x->type != YAML_SCALAR_NODE)
        return af__ydoc_err(d, x, AF_ETYPE, "'%s' must be a PromQL string or {query, scale}",
                            what);
    if (!af__ynode_is_null(x)) {
        s = af__ynode_str(x);
        if (strlen(s) > 4000)
            return af__ydoc_err(d, x, AF_EINVAL, "'%s' is longer than 4000 characters", what);
    }
    af_free(q->expr);
    q->expr = s && *s ? af_xstrdup(s) : NULL;
    return 0;
}

static int load_queries(struct af__ydoc *d, yaml_node_t *map, struct af_utilization_policy *up)
{
    char what[80];
    int rc = af__ynode_expect(d, map, YAML_MAPPING_NODE, "utilization.queries");

    if (!rc)
        rc = af__ymap_check_dups(d, map);
    for (yaml_node_pair_t *pp = map->data.mapping.pairs.start;
         !rc && pp < map->data.mapping.pairs.top; pp++) {
        yaml_node_t *k = af__ydoc_node(d, pp->key);
        int m = af_utilization_metric_parse(af__ynode_str(k));
        if (m < 0) {
            char known[200] = "";
            for (int i = 0; i < AF_UM__COUNT; i++)
                snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s",
                         i ? ", " : "", af_utilization_metric_name((enum af_utilization_metric)i));
            return af__ydoc_err(d, k, AF_EINVAL,
                                "unknown key '%s' in utilization.queries (known: %s)",
                                af__ynode_str(k), known);
        }
        snprintf(what, sizeof(what), "utilization.queries.%s",
                 af_utilization_metric_name((enum af_utilization_metric)m));
        rc = load_query(d, af__ydoc_node(d, pp->value), what, &up->q[m]);
    }
    return rc;
}

static int load_scoring(struct af__ydoc *d, yaml_node_t *map, struct af_utilization_policy *up)
{
    static const struct {
        const char *name;
        enum af_utilization_mode mode;
    } modes[] = {{"off", AF_UTILIZATION_MODE_OFF},
                 {"strategy", AF_UTILIZATION_MODE_STRATEGY},
                 {"prefer-idle", AF_UTILIZATION_MODE_PREFER_IDLE},
                 {"trust-free", AF_UTILIZATION_MODE_TRUST_FREE}};
    yaml_node_t *v;
    int rc = af__ymap_expect(d, map, "utilization.scoring", scoring_keys);

    if (rc)
        return rc;
    v = af__ymap_get(d, map, "mode");
    if (v) {
        const char *s;
        size_t i;
        rc = af__ynode_string(d, v, "utilization.scoring.mode", &s);
        if (rc)
            return rc;
        for (i = 0; i < AF_ARRAY_SIZE(modes) && strcmp(modes[i].name, s); i++)
            ;
        if (i == AF_ARRAY_SIZE(modes))
            return af__ydoc_err(d, v, AF_EINVAL,
                                "unknown utilization.scoring.mode '%s' (known: off, strategy, "
                                "prefer-idle, trust-free)",
                                s);
        up->mode = modes[i].mode;
    }
    v = af__ymap_get(d, map, "weight");
    if (v) {
        /* the share of the score live data takes */
        rc = af__ynode_range(d, v, "utilization.scoring.weight", 0, false, 1, false,
                             &up->weight);
        if (rc)
            return rc;
    }
    v = af__ymap_get(d, map, "saturated_above");
    if (v)
        rc = percent(d, v, "utilization.scoring.saturated_above", &up->saturated_above);
    return rc;
}

int af__utilization_load(struct af__ydoc *d, yaml_node_t *map, struct af_policy *p)
{
    struct af_utilization_policy *up = &p->util;
    const struct {
        const char *key, *what;
        double *out;
    } durations[] = {
        {"interval", "utilization.interval", &up->interval_s},
        {"timeout", "utilization.timeout", &up->timeout_s},
        {"staleness", "utilization.staleness", &up->staleness_s},
        {"retry_max", "utilization.retry_max", &up->retry_max_s},
    };
    const struct {
        const char *key, *what;
        char (*dst)[AF_UTILIZATION_LABEL_MAX];
        int *n;
    } lists[] = {
        {"node_labels", "utilization.node_labels", up->node_labels, &up->n_node_labels},
        {"device_labels", "utilization.device_labels", up->device_labels, &up->n_device_labels},
        {"pod_labels", "utilization.pod_labels", up->pod_labels, &up->n_pod_labels},
    };
    yaml_node_t *v, *x;
    int rc = af__ymap_expect(d, map, "utilization", section_keys);

    if (rc)
        return rc;
    up->present = true;
    for (size_t i = 0; i < AF_ARRAY_SIZE(durations) && !rc; i++) {
        v = af__ymap_get(d, map, durations[i].key);
        if (v)
            rc = duration(d, v, durations[i].what, 1, durations[i].out);
    }
    for (size_t i = 0; i < AF_ARRAY_SIZE(lists) && !rc; i++) {
        v = af__ymap_get(d, map, lists[i].key);
        if (v)
            rc = labels(d, v, lists[i].what, lists[i].dst, lists[i].n);
    }
    v = af__ymap_get(d, map, "queries");
    if (v && !rc)
        rc = load_queries(d, v, up);
    v = af__ymap_get(d, map, "scoring");
    if (v && !rc)
        rc = load_scoring(d, v, up);
    v = af__ymap_get(d, map, "filter");
    if (v && !rc) {
        rc = af__ymap_expect(d, v, "utilization.filter", filter_keys);
        x = rc ? NULL : af__ymap_get(d, v, "max_gpu_util");
        if (x && !af__ynode_is_null(x))
            rc = percent(d, x, "utilization.filter.max_gpu_util", &up->max_gpu_util);
    }
    v = af__ymap_get(d, map, "waste");
    if (v && !rc) {
        rc = af__ymap_expect(d, v, "utilization.waste", waste_keys);
        x = rc ? NULL : af__ymap_get(d, v, "idle_below");
        if (x)
            rc = percent(d, x, "utilization.waste.idle_below", &up->idle_below);
        x = rc ? NULL : af__ymap_get(d, v, "window");
        if (x)
            rc = duration(d, x, "utilization.waste.window", 1, &up->waste_window_s);
    }
    if (!rc && up->staleness_s < up->interval_s) {
        v = af__ymap_get(d, map, "staleness");
        rc = af__ydoc_err(d, v ? v : map, AF_EINVAL,
                          "'utilization.staleness' (%gs) must be at least 'utilization.interval' "
                          "(%gs): every answer would be stale",
                          up->staleness_s, up->interval_s);
    }
    return rc;
}
