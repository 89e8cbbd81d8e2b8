/* SPDX-License-Identifier: Apache-2.0 */
/*
 * utilization: what the accelerators are actually doing, next to what is allocated.
 *
 *   policy    the `utilization:` section (src/config/utilization.c): the PromQL queries,
 *             how a series names its node and device, staleness, how live data enters
 *             scoring, optional filter thresholds, what counts as idle waste
 *   snapshot  an immutable, reference-counted set of samples per node (last value and
 *             its timestamp per node, metric and device), built off the request path by
 *             the Prometheus reader (src/prom/prom.c) or from a recorded file, and
 *             published by pointer swap like the cluster snapshot (accelfit/cache.h)
 *   scoring   pure functions (src/core/utilization.c): the live part of a node's score,
 *             the optional filter post-pass, and allocated-but-idle waste. No I/O, no
 *             clock: the caller passes `now`.
 *
 * Live data only ranks and refuses where the policy says so. Missing, stale or wrong
 * data for a node leaves that node scored on allocation exactly as without it; a
 * Prometheus that cannot be reached leaves every node so.
 *
 * Units inside: utilizations are fractions 0..1, memory is bytes, times are Unix seconds.
 */
#ifndef AF_UTILIZATION_H
#define AF_UTILIZATION_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accelfit/util.h"

/* ---- what is measured --------------------------------------------------------------------- */

#define AF_UTILIZATION_METRIC_MAP(XX)                                                        \
    XX(GPU_UTIL, "gpu_util", "DCGM_FI_DEV_GPU_UTIL", 0.01)                              \
    XX(GPU_FB_USED, "gpu_fb_used", "DCGM_FI_DEV_FB_USED", 1048576.0)                    \
    XX(GPU_FB_FREE, "gpu_fb_free", "DCGM_FI_DEV_FB_FREE", 1048576.0)                    \
    XX(NEURONCORE_UTIL, "neuroncore_util", "neuroncore_utilization_ratio", 1.0)         \
    XX(NEURON_MEM_USED, "neuron_mem_used",                                              \
       "neuron_runtime_memory_used_bytes{memory_location=\"neuron_device\"}", 1.0)      \
    XX(CPU_UTIL, "cpu_util",                                                            \
       "1 - avg by (node, instance) (rate(node_cpu_seconds_total{mode=\"idle\"}[2m]))", 1.0)

enum af_utilization_metric {
#define XX(id, name, query, scale) AF_UM_##id,
    AF_UTILIZATION_METRIC_MAP(XX)
#undef XX
    AF_UM__COUNT
};

/* "gpu_util"; NULL out of range. Static. */
const char *af_utilization_metric_name(enum af_utilization_metric m);
/* -1 when `s` names no metric. */
int af_utilization_metric_parse(const char *s);

/* ---- policy ------------------------------------------------------------------------------- */

enum af_utilization_mode {
    AF_UTILIZATION_MODE_OFF = 0,        /* collect and show, do not change scores */
    AF_UTILIZATION_MODE_STRATEGY,       /* prefer-idle under spread, trust-free under binpack */
    AF_UTILIZATION_MODE_PREFER_IDLE,    /* rank nodes whose accelerators are idle first */
    AF_UTILIZATION_MODE_TRUST_FREE,     /* rank nodes whose free devices are measured idle first */
};

#define AF_UTILIZATION_MAX_LABELS 8
#define AF_UTILIZATION_LABEL_MAX 64

struct af_utilization_query {
    char *expr;                /* PromQL; NULL: not queried */
    double scale;              /* value x scale = fraction (utilization) or bytes (memory) */
};

struct af_utilization_policy {
    bool present;              /* the policy has a utilization: section */
    struct af_utilization_query q[AF_UM__COUNT];
    /* The labels that name a series' node, tried in order ("instance" loses its :port). */
    char node_labels[AF_UTILIZATION_MAX_LABELS][AF_UTILIZATION_LABEL_MAX];
    int n_node_labels;
    /* The labels whose values, joined by '/', name the device ("0", "0/7" for a MIG
     * instance); a series with none of them is the whole node. */
    char device_labels[AF_UTILIZATION_MAX_LABELS][AF_UTILIZATION_LABEL_MAX];
    int n_device_labels;
    /* The labels that say a pod holds a GPU (dcgm-exporter in Kubernetes mode). */
    char pod_labels[AF_UTILIZATION_MAX_LABELS][AF_UTILIZATION_LABEL_MAX];
    int n_pod_labels;
    double interval_s;         /* between query rounds */
    double timeout_s;          /* per query */
    double staleness_s;        /* samples older than this are not used */
    double retry_max_s;        /* backoff cap after failed rounds */
    enum af_utilization_mode mode;
    double weight;             /* share of the final score live data takes, 0..1 */
    double saturated_above;    /* shared GPUs at or above this (fraction) are saturated */
    double max_gpu_util;       /* filter: shared-GPU pods refuse nodes at or above; < 0 off */
    double idle_below;         /* a device below this (fraction) is idle */
    double waste_window_s;     /* idle this long while allocated: waste */
};

/* The defaults (also without a utilization: section): every query of the map above. */
void af_utilization_policy_defaults(struct af_utilization_policy *up);
void af_utilization_policy_release(struct af_utilization_policy *up);

/* ---- bounds on what an answer brings ------------------------------------------------------- */

/*
 * Samples a round drops, by reason, counted in the snapshot and in
 * accelfit_utilization_samples_discarded_total: a value outside its metric's range (a
 * utilization beyond [0, 1] by more than 0.05, which is clamped, or memory beyond
 * [0, 2^60] bytes), a timestamp more than AF_UTILIZATION_FUTURE_SKEW_S ahead of the reader's
 * clock, and the series of a round past AF_UTILIZATION_MAX_SERIES, which bounds the memory a
 * round takes whatever Prometheus answers (a 64 MiB answer is about 1.1 million series).
 */
enum af_utilization_discard {
    AF_UTILIZATION_DISCARD_RANGE = 0,
    AF_UTILIZATION_DISCARD_FUTURE,
    AF_UTILIZATION_DISCARD_OVER_LIMIT,
    AF_UTILIZATION_DISCARD__COUNT
};
#define AF_UTILIZATION_FUTURE_SKEW_S 60.0
#define AF_UTILIZATION_MAX_SERIES 200000

/* "out_of_range", "future", "over_limit". Static. */
const char *af_utilization_discard_name(enum af_utilization_discard d);

/* ---- snapshot (immutable after publish) ---------------------------------------------------- */

struct af_utilization_sample {
    uint8_t metric;            /* enum af_utilization_metric */
    bool held;                 /* a pod label says a pod holds this GPU (dcgm only) */
    char device[40];           /* "" for a node-level series */
    double value;              /* scaled: fraction or bytes */
    double ts;                 /* sample time */
    double idle_since;         /* 0 when not idle; else since when the value stayed below
                                * idle_below, as far as the reader has seen */
};

/* One metric of one node over all its samples, summed when the snapshot is built, so a
 * request reads one record instead of walking the samples (idle as of idle_below). */
struct af_utilization_agg {
    uint16_t devices, idle, held, busy_unheld;
    double sum, max;
    double oldest_ts;          /* 0: no sample of this metric */
};

struct af_utilization_node {
    const char *name;          /* the Kubernetes node name */
    struct af_utilization_sample *samples;
    size_t n;
    struct af_utilization_agg agg[AF_UM__COUNT];
};

struct af_utilization_snapshot {
    atomic_int refcnt;
    bool ok;                   /* the last round answered; false: degraded */
    bool frozen;               /* a recorded file: ages are as recorded, never grow */
    char source[200];          /* "prometheus http://..." or "file demo.json" */
    char error[300];           /* why the last round failed ("" when ok) */
    double taken;              /* when the round finished (frozen: the newest sample) */
    double last_ok;            /* when a round last answered, 0 never */
    uint64_t rounds, failures; /* rounds tried, rounds failed */
    size_t unmapped;           /* series no node label named */
    size_t discarded[AF_UTILIZATION_DISCARD__COUNT];        /* samples this round dropped */
    uint64_t discarded_total[AF_UTILIZATION_DISCARD__COUNT];   /* the same since the start */
    size_t n_nodes;
    struct af_utilization_node *nodes;   /* sorted by name */
    struct af_index index;     /* the nodes by name (the FNV-1a of the name) */
    struct af_arena arena;     /* owns every string and array above */
};

struct af_utilization_snapshot *af_utilization_snapshot_ref(struct af_utilization_snapshot *s);
void af_utilization_snapshot_unref(struct af_utilization_snapshot *s);   /* NULL is fine */
/* By hash (the request path looks up every candidate). Borrowed, valid until unref;
 * NULL when the node has no series. */
const struct af_utilization_node *af_utilization_find(const struct af_utilization_snapshot *s, const char *name);
/* The time ages are measured against: `wall_now`, or `taken` for a frozen snapshot. */
double af_utilization_now(const struct af_utilization_snapshot *s, double wall_now);
/* ---- scoring (pure) -------------------------------------------------------------------------- */

/* What live data did for one node (af_node_decision.live_state). */
enum af_live_state {
    AF_LIVE_OFF = 0,           /* no utilization source configured */
    AF_LIVE_USED,              /* fresh data entered the score */
    AF_LIVE_SHOWN,             /* fresh data, mode off: shown, not scored */
    AF_LIVE_SATURATED,         /* shared GPUs saturated: live part 0 */
    AF_LIVE_NO_DATA,           /* no series for this node and metric */
    AF_LIVE_STALE,             /* the newest sample is older than staleness */
    AF_LIVE_DEGRADED,          /* the source is down: allocation only */
    AF_LIVE_REFUSED,           /* the filter post-pass refused the node */
};

const char *af_live_state_name(enum af_live_state s);   /* "used", ... Static. */

/* One metric of one node, summarized over its devices. */
struct af_utilization_stat {
    int devices;               /* fresh device samples */
    int idle;                  /* of which idle (below idle_below) */
    int held;                  /* held by a pod (pod label; every Neuron series) */
    int idle_held;             /* idle and held */
    int idle_window;           /* idle for the whole waste window */
    int idle_waste;            /* idle for the window and held */
    int busy_unheld;           /* not idle and held by no pod */
    double mean, max, sum;
    double age_s;              /* age of the oldest sample used */
    bool stale;                /* samples exist but all are older than staleness */
};

/* Summarizes metric `m` of `node` (NULL is fine: devices 0). Cannot fail. */
void af_utilization_node_stat(const struct af_utilization_policy *up, const struct af_utilization_node *node,
                       enum af_utilization_metric m, double now, struct af_utilization_stat *out);

struct af_plan;
struct af_pod_info;
struct af_node_view;
struct af_node_decision;
struct af_filter_summary;
struct af_policy;

/*
 * After af_prioritize: for every passing candidate, mixes the live part into the score
 * as the policy's utilization.scoring says, and fills the live_* fields of `out` (also
 * for failed nodes, for /explain). `us` NULL means no source: nothing changes.
 * A snapshot that is not ok marks every node degraded and changes no score. Cannot fail.
 */
void af_utilization_score(const struct af_policy *pol, const struct af_plan *plan,
                   const struct af_pod_info *pod, const struct af_node_view *nodes, size_t n,
                   const struct af_utilization_snapshot *us, double now, struct af_node_decision *out);

/*
 * Filter with the policy's live thresholds (utilization.filter): af_filter, but a node
 * whose fresh measurement crosses a threshold for this pod counts as having no room (so
 * tiered fallback moves on) and fails with a reason stating the measured value and its
 * age. `scratch` holds n views (the caller's memory). Without thresholds, fresh data or
 * a pod they apply to, exactly af_filter. Cannot fail.
 */
void af_utilization_filter(const struct af_policy *pol, const struct af_plan *plan,
                    const struct af_pod_info *pod, const struct af_node_view *nodes,
                    const char *const *names, size_t n, const struct af_utilization_snapshot *us,
                    double now, struct af_node_view *scratch, struct af_node_decision *out,
                    struct af_filter_summary *sum);

/* True when the policy asks af_utilization_filter for anything. */
bool af_utilization_filters(const struct af_policy *pol);

/* Allocated but idle on one node: devices (or NeuronCores) and what they cost. */
struct af_utilization_waste {
    enum af_utilization_metric metric;   /* GPU_UTIL or NEURONCORE_UTIL */
    int idle_allocated;        /* held, allocated and idle for the whole window */
    int allocated;             /* devices (NeuronCores) the cache shows allocated */
    double usd_per_hour;       /* the node's price x idle_allocated / allocatable; 0 unknown */
    bool price_known;
};

/* False when the node has no accelerator series to judge. Cannot fail otherwise. */
bool af_utilization_waste(const struct af_policy *pol, const struct af_node_view *v,
                   const struct af_utilization_node *node, double now, struct af_utilization_waste *out);

#endif
