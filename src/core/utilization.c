/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Live utilization in decisions, computed purely: how a node's measured accelerator
 * (or CPU) use turns into the live part of its score, the optional filter post-pass for
 * shared GPUs, and allocated-but-idle waste. The samples come from an immutable
 * snapshot the Prometheus reader built off the request path; `now` comes from the
 * caller. A node without fresh data is scored on allocation exactly as without a
 * source, so one wrong or missing series only ever affects its own node.
 */
#include "accelfit/utilization.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/config.h"
#include "accelfit/decide.h"
#include "accelfit/banned.h"

/* ---- names and policy defaults --------------------------------------------------------------- */

static const char *const metric_names[] = {
#define XX(id, name, query, scale) name,
    AF_UTILIZATION_METRIC_MAP(XX)
#undef XX
};

const char *af_utilization_metric_name(enum af_utilization_metric m)
{
    return (int)m >= 0 && m < AF_UM__COUNT ? metric_names[m] : NULL;
}

const char *af_utilization_discard_name(enum af_utilization_discard d)
{
    static const char *const names[AF_UTILIZATION_DISCARD__COUNT] = {"out_of_range", "future",
                                                              "over_limit"};
    return (int)d >= 0 && d < AF_UTILIZATION_DISCARD__COUNT ? names[d] : "unknown";
}

int af_utilization_metric_parse(const char *s)
{
    for (int i = 0; s && i < AF_UM__COUNT; i++)
        if (!strcmp(s, metric_names[i]))
            return i;
    return -1;
}

const char *af_live_state_name(enum af_live_state s)
{
    switch (s) {
    case AF_LIVE_OFF:
        return "off";
    case AF_LIVE_USED:
        return "used";
    case AF_LIVE_SHOWN:
        return "shown";
    case AF_LIVE_SATURATED:
        return "saturated";
    case AF_LIVE_NO_DATA:
        return "no-data";
    case AF_LIVE_STALE:
        return "stale";
    case AF_LIVE_DEGRADED:
        return "degraded";
    case AF_LIVE_REFUSED:
        return "refused";
    }
    return "off";
}

static void set_labels(char (*dst)[AF_UTILIZATION_LABEL_MAX], int *n, const char *const *src)
{
    *n = 0;
    for (; *src && *n < AF_UTILIZATION_MAX_LABELS; src++)
        snprintf(dst[(*n)++], AF_UTILIZATION_LABEL_MAX, "%s", *src);
}

void af_utilization_policy_defaults(struct af_utilization_policy *up)
{
    static const char *const node_labels[] = {"node", "Hostname", "hostname", "instance", NULL};
    static const char *const device_labels[] = {"gpu", "GPU_I_ID", "neuroncore", "runtime_tag",
                                                NULL};
    static const char *const pod_labels[] = {"pod", "exported_pod", NULL};
    static const char *const queries[] = {
#define XX(id, name, query, scale) query,
        AF_UTILIZATION_METRIC_MAP(XX)
#undef XX
    };
    static const double scales[] = {
#define XX(id, name, query, scale) scale,
        AF_UTILIZATION_METRIC_MAP(XX)
#undef XX
    };

    memset(up, 0, sizeof(*up));
    for (int m = 0; m < AF_UM__COUNT; m++) {
        up->q[m].expr = af_xstrdup(queries[m]);
        up->q[m].scale = scales[m];
    }
    set_labels(up->node_labels, &up->n_node_labels, node_labels);
    set_labels(up->device_labels, &up->n_device_labels, device_labels);
    set_labels(up->pod_labels, &up->n_pod_labels, pod_labels);
    up->interval_s = 15;
    up->timeout_s = 5;
    up->staleness_s = 120;
    up->retry_max_s = 120;
    up->mode = AF_UTILIZATION_MODE_STRATEGY;
    up->weight = 0.3;
    up->saturated_above = 0.9;
    up->max_gpu_util = -1;
    up->idle_below = 0.05;
    up->waste_window_s = 1800;
}

void af_utilization_policy_release(struct af_utilization_policy *up)
{
    if (!up)
        return;
    for (int m = 0; m < AF_UM__COUNT; m++) {
        af_free(up->q[m].expr);
        up->q[m].expr = NULL;
    }
}

/* ---- snapshot -------------------------------------------------------------------------------- */

struct af_utilization_snapshot *af_utilization_snapshot_ref(struct af_utilization_snapshot *s)
{
    if (s)
        atomic_fetch_add(&s->refcnt, 1);
    return s;
}

void af_utilization_snapshot_unref(struct af_utilization_snapshot *s)
{
    if (!s || atomic_fetch_sub(&s->refcnt, 1) != 1)
        return;
    af_arena_release(&s->arena);
    af_free(s);
}

const struct af_utilization_node *af_utilization_find(const struct af_utilization_snapshot *s, const char *name)
{
    uint32_t h, i;
    size_t walk;

    if (!s || !name)
        return NULL;
    h = af_hash_str(AF_HASH_INIT, name);
    walk = af_index_start(&s->index, h);
    while (af_index_next(&s->index, h, &walk, &i))
        if (!strcmp(s->nodes[i].name, name))
            return &s->nodes[i];
    return NULL;
}

double af_utilization_now(const struct af_utilization_snapshot *s, double wall_now)
{
    return s && s->frozen ? s->taken : wall_now;
}

/* ---- per-node summary ------------------------------------------------------------------------ */

void af_utilization_node_stat(const struct af_utilization_policy *up, const struct af_utilization_node *node,
                       enum af_utilization_metric m, double now, struct af_utilization_stat *out)
{
    bool seen = false;

    memset(out, 0, sizeof(*out));
    for (size_t i = 0; node && i < node->n; i++) {
        const struct af_utilization_sample *s = &node->samples[i];
        double age = now - s->ts;
        bool idle;

        if (s->metric != m)
            continue;
        seen = true;
        if (age > up->staleness_s || !isfinite(s->value))
            continue;
        if (age < 0)
            age = 0;
        idle = s->value < up->idle_below;
        out->devices++;
        out->held += s->held;
        out->sum += s->value;
        if (out->devices == 1 || s->value > out->max)
            out->max = s->value;
        if (age > out->age_s)
            out->age_s = age;
        if (idle) {
            out->idle++;
            out->idle_held += s->held;
            if (s->idle_since > 0 && now - s->idle_since >= up->waste_window_s) {
                out->idle_window++;
                out->idle_waste += s->held;
            }
        } else if (!s->held) {
            out->busy_unheld++;
        }
    }
    out->mean = out->devices ? out->sum / out->devices : 0;
    out->stale = seen && out->devices == 0;
}

/*
 * af_utilization_node_stat for the request path: when every sample of the metric is fresh, the
 * sums made at build time (the window counts, which only the waste report reads, stay 0).
 */
static void quick_stat(const struct af_utilization_policy *up, const struct af_utilization_node *node,
                       enum af_utilization_metric m, double now, struct af_utilization_stat *out)
{
    const struct af_utilization_agg *a = node ? &node->agg[m] : NULL;

    if (!a || !a->devices || now - a->oldest_ts > up->staleness_s) {
        af_utilization_node_stat(up, node, m, now, out);
        return;
    }
    memset(out, 0, sizeof(*out));
    out->devices = a->devices;
    out->idle = a->idle;
    out->held = a->held;
    out->busy_unheld = a->busy_unheld;
    out->sum = a->sum;
    out->max = a->max;
    out->mean = a->sum / a->devices;
    out->age_s = now > a->oldest_ts ? now - a->oldest_ts : 0;
}

/* ---- scoring --------------------------------------------------------------------------------- */

static double clamp01(double v)
{
    return v < 0 ? 0 : v > 1 ? 1 : v;
}

/* The metric that describes what this pod would use. */
static int judged_metric(const struct af_plan *plan)
{
    switch (plan->requested) {
    case AF_ACCEL_GPU:
        return AF_UM_GPU_UTIL;
    case AF_ACCEL_NEURON:
        return AF_UM_NEURONCORE_UTIL;
    case AF_ACCEL_NONE:
        return AF_UM_CPU_UTIL;
    case AF_ACCEL_AMD:
        break;
    }
    return -1;
}

/* Devices of the measured kind the node has and the cache shows allocated (NeuronCores for
 * Neuron, GPUs otherwise). */
static void device_counts(const struct af_node_view *v, enum af_utilization_metric m, int64_t *capacity,
                          int64_t *allocated)
{
    const struct af_resources *a = &v->info->allocatable, *u = &v->used;

    if (m == AF_UM_NEURONCORE_UTIL) {
        int64_t cpd = af_class_neuron_cores_per_device(v->info->cls);
        int64_t devs = a->v[AF_RES_NEURON] > a->v[AF_RES_NEURONDEVICE] ? a->v[AF_RES_NEURON]
                                                                        : a->v[AF_RES_NEURONDEVICE];
        *capacity = a->v[AF_RES_NEURONCORE] > 0 ? a->v[AF_RES_NEURONCORE] : devs * cpd;
        *allocated = u->v[AF_RES_NEURONCORE] +
                     (u->v[AF_RES_NEURON] + u->v[AF_RES_NEURONDEVICE]) * cpd;
    } else {
        *capacity = a->v[AF_RES_GPU];
        *allocated = u->v[AF_RES_GPU];
    }
    if (*allocated < 0)
        *allocated = 0;
}

/* A pod that shares the node's GPUs: it asks for shared GPUs, or the node time-slices. */
static bool shares_gpus(const struct af_pod_info *pod, const struct af_node_info *info)
{
    return pod && (pod->requests.v[AF_RES_GPU_SHARED] > 0 ||
                   (pod->requests.v[AF_RES_GPU] > 0 && info && info->gpu_shared));
}

static enum af_utilization_mode effective_mode(const struct af_policy *pol)
{
    if (pol->util.mode != AF_UTILIZATION_MODE_STRATEGY)
        return pol->util.mode;
    return pol->strategy == AF_STRATEGY_SPREAD ? AF_UTILIZATION_MODE_PREFER_IDLE : AF_UTILIZATION_MODE_TRUST_FREE;
}

/*
 * The live part of one node's score in [0,1]:
 *   prefer-idle  1 - mean utilization of the devices (CPU: of the node);
 *   trust-free   the share of the devices the cache shows free that are measured free:
 *                a device in use that no allocation explains (busy without a pod label,
 *                a NeuronCore held by a runtime beyond the allocated ones) takes a free
 *                device away. CPU: 1 - utilization, as prefer-idle.
 */
static double live_part(enum af_utilization_mode mode, enum af_utilization_metric m,
                        const struct af_node_view *v, const struct af_utilization_stat *st)
{
    int64_t capacity, allocated, free_devs, phantom;

    if (m == AF_UM_CPU_UTIL || mode == AF_UTILIZATION_MODE_PREFER_IDLE)
        return clamp01(1.0 - st->mean);
    device_counts(v, m, &capacity, &allocated);
    if (capacity <= 0)   /* MIG slices or shared GPUs only: no whole devices to count */
        return clamp01(1.0 - st->mean);
    free_devs = capacity - allocated;
    if (free_devs <= 0)
        return 0;
    if (m == AF_UM_NEURONCORE_UTIL)
        phantom = st->devices - allocated;   /* a series exists only for a held core */
    else if (st->held > 0)
        phantom = st->busy_unheld;           /* busy, and no pod label says whose */
    else
        phantom = (st->devices - st->idle) - allocated;   /* no pod labels at all */
    if (phantom < 0)
        phantom = 0;
    return clamp01(1.0 - (double)phantom / (double)free_devs);
}

void af_utilization_score(const struct af_policy *pol, const struct af_plan *plan,
                   const struct af_pod_info *pod, const struct af_node_view *nodes, size_t n,
                   const struct af_utilization_snapshot *us, double now, struct af_node_decision *out)
{
    const struct af_utilization_policy *up;
    enum af_utilization_mode mode;
    double wt, wu, wc, wsum, w;
    int m;

    if (!us || !pol)
        return;
    up = &pol->util;
    mode = effective_mode(pol);
    m = judged_metric(plan);
    wt = pol->w_tier;
    wu = pol->w_util;
    wc = pol->w_cost;
    if (!(wt >= 0) || !(wu >= 0) || !(wc >= 0) || !(wt + wu + wc > 0))
        wt = wu = wc = 1;
    wsum = wt + wu + wc;
    w = clamp01(up->weight);

    for (size_t i = 0; i < n; i++) {
        struct af_node_decision *d = &out[i];
        const struct af_node_view *v = &nodes[i];
        struct af_utilization_stat st;
        double base, final;
        long score;

        d->score_alloc = d->score;
        d->live_metric = m;
        if (!us->ok) {
            d->live_state = AF_LIVE_DEGRADED;
            continue;
        }
        if (m < 0 || !v->info) {
            d->live_state = AF_LIVE_NO_DATA;
            continue;
        }
        quick_stat(up, af_utilization_find(us, v->info->name), (enum af_utilization_metric)m, now, &st);
        if (st.devices == 0) {
            d->live_state = st.stale ? AF_LIVE_STALE : AF_LIVE_NO_DATA;
            continue;
        }
        d->live_util = st.mean;
        d->live_max = st.max;
        d->live_age_s = st.age_s;
        d->live_devices = st.devices;
        d->live_idle = st.idle;
        if (m == AF_UM_GPU_UTIL && shares_gpus(pod, v->info) && st.max >= up->saturated_above) {
            d->s_live = 0;
            d->live_state = AF_LIVE_SATURATED;
        } else {
            d->s_live = live_part(mode, (enum af_utilization_metric)m, v, &st);
            d->live_state = mode == AF_UTILIZATION_MODE_OFF ? AF_LIVE_SHOWN : AF_LIVE_USED;
        }
        if (mode == AF_UTILIZATION_MODE_OFF || d->verdict != AF_VERDICT_PASS)
            continue;
        base = (wt * d->s_tier + wu * d->s_util + wc * d->s_cost) / wsum;
        final = (1.0 - w) * base + w * d->s_live;
        score = lround(10.0 * final);
        d->score = score < 0 ? 0 : score > 10 ? 10 : (int)score;
    }
}

/* ---- filter post-pass ------------------------------------------------------------------------ */

bool af_utilization_filters(const struct af_policy *pol)
{
    return pol && pol->util.max_gpu_util >= 0;
}

/* Fresh GPU stats of node i when the threshold applies to this pod there; false otherwise. */
static bool over_threshold(const struct af_policy *pol, const struct af_plan *plan,
                           const struct af_pod_info *pod, const struct af_node_view *v,
                           const struct af_utilization_snapshot *us, double now, struct af_utilization_stat *st)
{
    if (!v->info || plan->requested != AF_ACCEL_GPU || !shares_gpus(pod, v->info))
        return false;
    quick_stat(&pol->util, af_utilization_find(us, v->info->name), AF_UM_GPU_UTIL, now, st);
    return st->devices > 0 && st->max >= pol->util.max_gpu_util;
}

void af_utilization_filter(const struct af_policy *pol, const struct af_plan *plan,
                    const struct af_pod_info *pod, const struct af_node_view *nodes,
                    const char *const *names, size_t n, const struct af_utilization_snapshot *us,
                    double now, struct af_node_view *scratch, struct af_node_decision *out,
                    struct af_filter_summary *sum)
{
    struct af_utilization_stat st;
    bool any = false;

    if (!us || !us->ok || !af_utilization_filters(pol) || plan->requested != AF_ACCEL_GPU) {
        af_filter(pol, plan, pod, nodes, names, n, out, sum);
        return;
    }
    /* A node over the threshold has no room for this pod: tiered fallback moves on. */
    for (size_t i = 0; i < n; i++) {
        scratch[i] = nodes[i];
        if (over_threshold(pol, plan, pod, &nodes[i], us, now, &st)) {
            scratch[i].used.v[AF_RES_GPU] = nodes[i].info->allocatable.v[AF_RES_GPU];
            scratch[i].used.v[AF_RES_GPU_SHARED] = nodes[i].info->allocatable.v[AF_RES_GPU_SHARED];
            any = true;
        }
    }
    af_filter(pol, plan, pod, any ? scratch : nodes, names, n, out, sum);
    for (size_t i = 0; any && i < n; i++) {
        struct af_node_decision *d = &out[i];
        /* Only a node made full above (or full already) can be over the threshold. */
        if (d->verdict == AF_VERDICT_UNRESOLVABLE || !nodes[i].info ||
            scratch[i].used.v[AF_RES_GPU] < nodes[i].info->allocatable.v[AF_RES_GPU] ||
            !over_threshold(pol, plan, pod, &nodes[i], us, now, &st))
            continue;
        if (d->verdict == AF_VERDICT_PASS && sum) {
            sum->passed--;
            sum->failed++;
        }
        d->verdict = AF_VERDICT_FAILED;
        d->has_room = false;
        d->live_state = AF_LIVE_REFUSED;
        d->live_metric = AF_UM_GPU_UTIL;
        d->live_util = st.mean;
        d->live_max = st.max;
        d->live_age_s = st.age_s;
        d->live_devices = st.devices;
        d->live_idle = st.idle;
        snprintf(d->reason, sizeof(d->reason),
                 "shared GPUs measured at %.0f%% (utilization.filter.max_gpu_util %.0f%%), "
                 "%.0fs ago",
                 st.max * 100, pol->util.max_gpu_util * 100, st.age_s);
    }
}

/* ---- waste ----------------------------------------------------------------------------------- */

bool af_utilization_waste(const struct af_policy *pol, const struct af_node_view *v,
                   const struct af_utilization_node *node, double now, struct af_utilization_waste *out)
{
    struct af_utilization_stat st;
    int64_t capacity, allocated, idle;

    memset(out, 0, sizeof(*out));
    if (!pol || !v->info || !node)
        return false;
    if (v->info->kind == AF_ACCEL_GPU)
        out->metric = AF_UM_GPU_UTIL;
    else if (v->info->kind == AF_ACCEL_NEURON)
        out->metric = AF_UM_NEURONCORE_UTIL;
    else
        return false;
    af_utilization_node_stat(&pol->util, node, out->metric, now, &st);
    if (st.devices == 0)
        return false;
    device_counts(v, out->metric, &capacity, &allocated);
    /* Held devices idle for the window; without pod labels (held 0) every device idle that
     * long may be one of the allocated ones, so the count is an upper bound. */
    idle = st.held > 0 || out->metric == AF_UM_NEURONCORE_UTIL ? st.idle_waste : st.idle_window;
    out->allocated = (int)(allocated > INT32_MAX ? INT32_MAX : allocated);
    out->idle_allocated = (int)(idle < allocated ? idle : allocated);
    out->price_known = v->info->price_known && capacity > 0;
    if (out->price_known)
        out->usd_per_hour = v->info->hourly_usd * (double)out->idle_allocated / (double)capacity;
    return true;
}
