/* SPDX-License-Identifier: Apache-2.0 */
/*
 * simulate: what accelfit would save on a cluster, before anyone installs it.
 *
 * A trace of pod arrivals (time, requests, intent annotations, labels, owner,
 * tenant, how long each runs) is replayed against a cluster twice, side by side:
 *
 *   accelfit        kube-scheduler's filters (the model below) find the feasible
 *                   nodes, accelfit's own af_plan_pod, rollout steering
 *                   (af_rollouts_steer), the tenant's classes and budget
 *                   (af_tenant_steer, af_tenant_rank, with the tenant's spend at that
 *                   moment), af_filter and af_prioritize decide among them, and
 *                   kube-scheduler adds the extender's score x weight x 10 to its own
 *                   plugin scores, as a scheduler configured with accelfit does;
 *   kube-scheduler  the same model alone (src/sim/kubesched.c): NodeUnschedulable,
 *                   NodeResourcesFit, TaintToleration and nodeSelector as filters;
 *                   LeastAllocated, BalancedAllocation and TaintToleration as scores;
 *                   percentageOfNodesToScore as upstream computes it. It knows
 *                   nothing of cost or hardware class.
 *
 * Each side keeps its own struct af_cache, updated as pods bind and leave, so the
 * decisions read the same snapshots the server reads. A pod that fits nowhere
 * waits and is tried again whenever a pod leaves; its run starts when it is placed.
 * Everything ends at the trace's end (the horizon): what still runs is cut there.
 *
 * Money: a node is paid (its hourly price) while at least one pod that is not a
 * DaemonSet or mirror pod is on it. A pod's spend (tenants) is its share of its
 * node's price (af_pod_share_usd) while it runs, as af_costs_compute counts it.
 * Idle accelerator cost is, on a paid node, the price of its accelerators no pod
 * requested.
 *
 * Tenants: with a policy that lists tenants (af_tenants_listed), each pod belongs to
 * the tenant af_tenant_of gives, as in the server, and accelfit's side decides with
 * that tenant's spend kept as pods bind and leave; kube-scheduler's side and the lower
 * bound know no budgets. Otherwise pods are grouped by the trace's tenant field.
 *
 * Autoscaling (af_sim_options.autoscale, docs/simulate.md "Autoscaling"): a pod that fits
 * no node makes a provisioner modelled on Karpenter launch one (af_sim_provision), on
 * accelfit's side with the preferred node affinity the webhook would write for it
 * (af_prefer_for); a launched node is paid from launch until it has been empty for
 * consolidate_after seconds and is removed. No launch latency, no batching.
 *
 * The lower bound: for each pod, the cheapest rate any node of the cluster could
 * run it at if pods packed perfectly — the node's price times the pod's fraction of
 * what the node is for (the mean of its fractions of the node's accelerator
 * resources on an accelerator node, of cpu and memory on a CPU node; the fractions
 * of all pods on one node sum to at most 1 in every resource, so these means do
 * too) — times the shorter of its run times under the two schedulers. No placement of the work
 * both schedulers ran can cost less, so the bound is never above either cost.
 */
#ifndef AF_SIMULATE_H
#define AF_SIMULATE_H

#include "accelfit/config.h"
#include "accelfit/model.h"
#include "accelfit/rollout.h"
#include "accelfit/util.h"

/* ---- the inputs ------------------------------------------------------------------------ */

struct af_sim_taint {
    char *key;
    char *value;                       /* may be NULL */
    char *effect;                      /* "NoSchedule", "PreferNoSchedule", "NoExecute" */
};

/* A node with what kube-scheduler's filters read besides the record the cache keeps. */
struct af_sim_node {
    struct af_node_info *info;         /* one reference */
    struct af_pair *labels;
    size_t n_labels;
    struct af_sim_taint *taints;
    size_t n_taints;
};

/*
 * One pod of a trace. `info` holds its requests, intent annotations, labels (for a
 * managed pod), owner and tenant label; the simulator sets info->node_name, ready and
 * started_unix while the pod is bound and clears them after (no cache or snapshot holds
 * it then).
 */
struct af_sim_pod {
    double arrival;                    /* seconds after the trace's start */
    double duration;                   /* seconds it runs once placed; < 0: until the end */
    struct af_pod_info *info;          /* one reference */
    char *tenant;                      /* label accelfit.io/tenant, else the namespace */
    struct af_pair *node_selector;
    size_t n_node_selector;
    struct af_toleration *tolerations;
    size_t n_tolerations;
    bool preexisting;                  /* bound in the cluster file: runs from 0 where it is */
};

struct af_sim_cluster {
    struct af_sim_node *nodes;         /* sorted by name */
    size_t n_nodes;
    struct af_sim_pod *bound;          /* pods the cluster file shows bound to one of its nodes */
    size_t n_bound;
    struct af_overlays *overlays;      /* the file's Karpenter NodeOverlays; NULL: none */
};

struct af_sim_trace {
    double start_unix;                 /* wall time of t = 0 (rollout stages read it) */
    double end;                        /* the horizon, seconds; > 0 */
    struct af_sim_pod *pods;           /* sorted by arrival (stable) */
    size_t n_pods;
};

void af_sim_cluster_release(struct af_sim_cluster *c);   /* zeroes it; cannot fail */
void af_sim_node_release(struct af_sim_node *n);         /* zeroes it; cannot fail */
/* Forgets the cluster's bound pods (--empty): the trace starts on idle nodes. */
void af_sim_cluster_drop_pods(struct af_sim_cluster *c);
void af_sim_trace_release(struct af_sim_trace *t);       /* zeroes it; cannot fail */

/* ---- decoding (src/codec/simulate.c; the decoders are in accelfit/codec.h) ------------------ */

/*
 * The DRA objects of the cluster file `text` (ResourceSlices, ResourceClaims, templates,
 * DeviceClasses; accelfit/dra.h), applied to `cl` and, when not NULL, `tr`: nodes get their
 * DRA devices as allocatable, pods naming claims the devices those hold (allocated) or still
 * need (their first choices) as requests. *devices (may be NULL) gets the DRA devices found.
 * Returns 0 (also when the file has none), or the file's error in `err`.
 */
int af_sim_apply_dra(const char *name, const char *text, size_t len, struct af_sim_cluster *cl,
                     struct af_sim_trace *tr, size_t *devices, struct af_error *err) AF_MUST_CHECK;

/*
 * The bounds of a trace, so that a replay's memory, time and every number it prints stay
 * finite: every time and duration in a trace (an entry's `at`, `duration` and `every`, a
 * replica's arrival, the trace's `end`) is at most AF_SIM_MAX_SECONDS, a hundred years;
 * a trace holds at most AF_SIM_MAX_PODS pods, all its entries' replicas together (and so
 * does the trace --workload-from-cluster makes). Past either, decoding fails naming the
 * entry.
 */
#define AF_SIM_MAX_SECONDS (100.0 * 365.25 * 86400)
#define AF_SIM_MAX_PODS 200000

/* A duration of the simulator's files and flags ("90", "90s", "15m", "1h30m", "2d", "1.5h"):
 * af_parse_duration's grammar with bare seconds and fractions. Seconds; -1 when it is not a
 * duration or is longer than AF_SIM_MAX_SECONDS. */
double af_sim_parse_duration(const char *s);

/* ---- the autoscaler (src/config/nodepools.c, src/sim/autoscale.c) --------------------------------- */

/*
 * Karpenter v1 NodePools (kind NodePool, apiVersion karpenter.sh/v1), as much of them as
 * the provisioner models (docs/simulate.md, "Autoscaling"): spec.weight, the template's
 * requirements on the keys below with In or NotIn, its taints and labels. Other documents of
 * the file (an EC2NodeClass) are skipped; a NodePool field the model would have to read and
 * cannot (another requirement key or operator, a malformed value) fails with file:line:column.
 */
enum af_sim_req_key {
    AF_SIM_REQ_FAMILY = 0,             /* karpenter.k8s.aws/instance-family */
    AF_SIM_REQ_TYPE,                   /* node.kubernetes.io/instance-type */
    AF_SIM_REQ_CAPACITY,               /* karpenter.sh/capacity-type */
    AF_SIM_REQ_CATEGORY,               /* karpenter.k8s.aws/instance-category: "g" of g5 */
    AF_SIM_REQ_GENERATION,             /* karpenter.k8s.aws/instance-generation: "5" of g5 */
    AF_SIM_REQ_ARCH,                   /* kubernetes.io/arch: every catalog type is amd64 */
    AF_SIM_REQ_OS,                     /* kubernetes.io/os: every node is linux */
    AF_SIM_REQ_ZONE,                   /* topology.kubernetes.io/zone: zones are not modelled,
                                        * every offering is in every zone */
};

struct af_sim_requirement {
    enum af_sim_req_key key;
    bool not_in;                       /* NotIn, else In */
    char **values;
    size_t n_values;
};

struct af_sim_nodepool {
    char *name;
    int weight;                        /* spec.weight, 0 when absent */
    struct af_sim_requirement *reqs;
    size_t n_reqs;
    struct af_sim_taint *taints;
    size_t n_taints;
    struct af_pair *labels;            /* spec.template.metadata.labels */
    size_t n_labels;
    struct af_resources limits;        /* spec.limits */
    uint32_t limited;                  /* resources with a limit: bit 1u << enum af_res */
};

struct af_sim_nodepools {
    struct af_sim_nodepool *pools;     /* by weight, heaviest first; equal weights by name */
    size_t n;
};

int af_sim_nodepools_load(const char *name, const char *text, size_t len,
                          struct af_sim_nodepools *out, struct af_error *err) AF_MUST_CHECK;
void af_sim_nodepools_release(struct af_sim_nodepools *np);   /* zeroes it */

/*
 * What the provisioner can launch: one offering per NodePool, catalog instance type with a
 * known price and capacity type (on-demand, spot) the pool's requirements allow, as the node
 * Karpenter would create: labels instance-type, instance-family, capacity-type, nodepool and
 * the template's; the pool's taints; allocatable the type's vCPUs, memory and devices
 * (nothing reserved), 110 pods; priced by af_node_classify as any catalog node (spot at the
 * catalog's spot estimate). Ordered by pool (heaviest first), then price, then type name.
 */
struct af_sim_offering {
    struct af_sim_node node;           /* owned */
    size_t pool;                       /* index into the NodePools */
    const struct af_instance_type *type;
    bool spot;
};

/*
 * How preferred terms are relaxed. Karpenter's scheduling docs ("Preferences"): all preferred
 * terms are treated as required, and relaxed one at a time by ascending weight, the lightest
 * first. Karpenter's code (pkg/scheduling/requirements.go, scheduling/preferences.go) instead
 * requires only the heaviest term and, when nothing meets it, drops it and requires the next
 * heaviest; aws/karpenter-provider-aws#9048 reports the difference. The docs' rule is the
 * default; the code's is a choice (--relax-preferences heaviest-first).
 */
enum af_sim_relax {
    AF_SIM_RELAX_LIGHTEST_FIRST = 0,   /* every term required at once; the lightest dropped first */
    AF_SIM_RELAX_HEAVIEST_FIRST,       /* one term required, the heaviest; dropped first */
};

struct af_sim_offerings {
    struct af_sim_offering *v;
    size_t n;
    const struct af_sim_nodepools *pools;   /* borrowed */
    enum af_sim_relax relax;           /* AF_SIM_RELAX_LIGHTEST_FIRST after building */
};

void af_sim_offerings_build(const struct af_config *cfg, const struct af_sim_nodepools *np,
                            struct af_sim_offerings *out);
void af_sim_offerings_release(struct af_sim_offerings *o);   /* zeroes it */
/* A node record of offering `o` named `name` (a launched node): one reference. */
struct af_node_info *af_sim_offering_node(const struct af_config *cfg,
                                          const struct af_sim_offering *o, const char *name);

struct af_preferences;

/*
 * Karpenter's choice for a pending pod: the preferences' terms are required, then relaxed one
 * at a time as o->relax says, then none; at each step the NodePools in weight order, and in
 * the first pool with an offering that satisfies the pod (af_ks_filter on an empty node of
 * it: requests, nodeSelector, taints vs tolerations), the terms required at that step and the
 * preferences' required NotIn (never relaxed), the cheapest such offering. `pool_used`: per
 * NodePool, what its launched nodes still there allocate (NULL: nothing); an offering that
 * would take its pool past spec.limits is left out, as Karpenter filters instance types by
 * the pool's remaining resources. Returns the offering's index, or -1 when none can hold the
 * pod; *relaxed (may be NULL): terms relaxed to find it. `prefs` may be NULL (the pod as
 * written). Pure.
 */
/* Whether offering i could hold the pod now: af_ks_filter on an empty node of it, and its
 * pool's limits (pool_used as for af_sim_provision, NULL: none). Preferences aside. Pure. */
bool af_sim_offering_holds(const struct af_sim_offerings *o, size_t i,
                           const struct af_sim_pod *pod, const struct af_resources *pool_used);

long af_sim_provision(const struct af_sim_offerings *o, const struct af_sim_pod *pod,
                      const struct af_preferences *prefs, const struct af_resources *pool_used,
                      int *relaxed);

/* ---- the kube-scheduler model (src/sim/kubesched.c) ---------------------------------------- */

/* kube-scheduler's defaults for requests a pod leaves out, when scoring (not when fitting). */
#define AF_KS_DEFAULT_MILLI_CPU 100
#define AF_KS_DEFAULT_MEMORY (200LL * 1024 * 1024)
#define AF_KS_MAX_NODE_SCORE 100

/* What the model needs of one node at the moment of a decision. */
struct af_ks_node {
    const struct af_sim_node *node;
    const struct af_node_view *view;   /* allocation the cache shows */
    int64_t nonzero_cpu;               /* sum of the pods' cpu, 100m for a pod that asks none */
    int64_t nonzero_mem;               /* likewise, 200 MiB */
};

/* Why a node failed kube-scheduler's filters (AF_KS_FIT when it did not). */
enum af_ks_fit {
    AF_KS_FIT = 0,
    AF_KS_UNSCHEDULABLE,               /* spec.unschedulable, not tolerated */
    AF_KS_NODE_SELECTOR,               /* a nodeSelector label does not match */
    AF_KS_TAINT,                       /* a NoSchedule/NoExecute taint is not tolerated */
    AF_KS_RESOURCES,                   /* requests exceed allocatable - used, or no pod slot */
};

/* NodeUnschedulable, NodeAffinity (nodeSelector), TaintToleration, NodeResourcesFit. Pure. */
enum af_ks_fit af_ks_filter(const struct af_sim_pod *pod, const struct af_ks_node *n);

/*
 * NodeResourcesFit's LeastAllocated score (cpu and memory, weight 1 each, 0..100,
 * integer arithmetic as upstream: ((alloc - requested) * 100 / alloc) per resource,
 * averaged), with `requested` the node's non-zero requests plus the pod's. Pure.
 */
int64_t af_ks_least_allocated(const struct af_sim_pod *pod, const struct af_ks_node *n);
/* NodeResourcesBalancedAllocation: (1 - |f_cpu - f_mem| / 2) * 100, fractions of
 * allocatable after the pod (its actual requests), capped at 1. Pure. */
int64_t af_ks_balanced(const struct af_sim_pod *pod, const struct af_ks_node *n);
/* PreferNoSchedule taints the pod does not tolerate (TaintToleration's raw score). */
int af_ks_intolerable_prefer(const struct af_sim_pod *pod, const struct af_ks_node *n);

/*
 * numFeasibleNodesToFind: how many feasible nodes kube-scheduler looks for before it
 * stops filtering. `percentage` 0 is adaptive (50 - nodes/125, at least 5); fewer than
 * 100 nodes are all scanned; never fewer than 100. Pure.
 */
int af_ks_feasible_to_find(int percentage, int n_nodes);

/* ---- running it ------------------------------------------------------------------------------ */

struct af_sim_options {
    int percentage_of_nodes_to_score;  /* 0 adaptive (kube-scheduler's default), 1..100 */
    int extender_weight;               /* the extenders[].weight kube-scheduler gives accelfit */
    int buckets;                       /* points of the time series (>= 1) */
    /* A self-check: at every decision, both sides recompute the spend with af_costs_compute
     * over a snapshot of their cache and compare it with the books (af_sim_result's
     * spend_checks and spend_mismatches). O(pods) per decision. */
    bool check_spend;
    /* Autoscaling (docs/simulate.md): NULL for a fixed cluster. Else a pod that fits no node
     * makes the provisioner launch one (af_sim_provision; on accelfit's side with the
     * preferences the webhook would write), and a launched node empty for
     * `consolidate_after` seconds is removed. */
    const struct af_sim_offerings *autoscale;
    double consolidate_after;
};

#define AF_SIM_CONSOLIDATE_AFTER 30.0
#define AF_SIM_OPTIONS_INIT {0, 5, 96, false, NULL, AF_SIM_CONSOLIDATE_AFTER}

/* The sides of a comparison. */
enum af_sim_side { AF_SIM_ACCELFIT = 0, AF_SIM_KUBE, AF_SIM_BOUND, AF_SIM__SIDES };

/* Per class, with one slot past the last class for nodes of unknown class. */
#define AF_SIM_CLASSES (AF_CLASS__COUNT + 1)

/*
 * A tenant's spend: the sum of its running pods' shares of their nodes' prices
 * (af_pod_share_usd), DaemonSet pods included, as GET /costs counts it. The spend rate
 * changes only when one of its pods binds or leaves.
 */
struct af_sim_tenant {
    char *name;
    double spend_usd[AF_SIM__SIDES];   /* dollars over the trace (the bound: trace work only) */
    double budget_usd_hr;              /* the policy's budget, < 0 when it has none */
    bool hard;                         /* over_budget: hard (else soft) */
    double peak_usd_hr[2];             /* highest spend rate; accelfit, kube-scheduler */
    double over_hours[2];              /* hours the spend rate was above the budget */
};

struct af_sim_rollout_stats {
    char *name;
    uint32_t target;                   /* classes (bit 1u << class) */
    double share;                      /* target share at the start of the trace */
    int target_pods[AF_SIM__SIDES];    /* placements on a target class (bound side: 0) */
    int source_pods[AF_SIM__SIDES];
    double *achieved[AF_SIM__SIDES];   /* per bucket: target / (target + source) running, < 0 none */
};

struct af_sim_side_stats {
    double cost_usd;
    double cost_by_class[AF_SIM_CLASSES];
    double node_hours_by_class[AF_SIM_CLASSES];
    double idle_accel_usd;
    double prepaid_idle_usd;           /* prepaid capacity left idle, at its rate (ODCRs,
                                        * Capacity Blocks: paid whether used or not) */
    double pod_hours;                  /* work done: pod run time, system pods excluded */
    int placed;                        /* trace pods placed (once each) */
    int placed_by_class[AF_SIM_CLASSES];
    int first_tier;                    /* on a node of the first tier of accelfit's plan */
    int fallbacks;                     /* on a lower tier of it */
    int outside;                       /* on a class the plan has no tier for */
    int misfit;                        /* on a node where the devices it gets cannot hold its
                                        * model (af_plan_model_fits): work that would not run */
    int waited;                        /* pods that could not be placed when they arrived */
    int unplaced;                      /* of those, still waiting at the end */
    double wait_hours;                 /* waiting time summed, up to placement or the end */
    /* The scan (percentageOfNodesToScore): nodes examined and feasible found per pod. */
    double nodes_examined_avg;
    double feasible_avg;
    int scan_cut;                      /* pods whose scan stopped before the last node */
    int cheapest_missed;               /* accelfit: placements costing more than its pick
                                        * over every node would have */
    double *cost_series;               /* [bucket * AF_SIM_CLASSES + class], dollars */
    /* Autoscaling: nodes launched (per class), removed empty, launches for a preference. */
    int launched;
    int launched_by_class[AF_SIM_CLASSES];
    int consolidated;
    int launched_preferred;            /* a launch that met a preference term */
};

/* Where one trace pod went under one scheduler. Names are borrowed from the trace and
 * the cluster given to af_sim_run: valid while they are. */
struct af_sim_placement {
    const char *ns, *name;
    const char *node;                  /* NULL: never placed */
    int cls;                           /* class slot of the node, -1 when never placed */
    int tier;                          /* tier of the node in accelfit's plan, -1 none */
    double placed_at;                  /* seconds after the start */
    double ran;                        /* seconds it ran before it left or the end came */
};

struct af_sim_result {
    size_t n_nodes;
    size_t n_pods;                     /* trace pods */
    size_t n_bound;                    /* pre-existing pods */
    double horizon;                    /* seconds */
    int feasible_to_find;              /* af_ks_feasible_to_find for this cluster */
    int percentage;                    /* as given (0 adaptive) */
    int buckets;
    double bucket_seconds;
    struct af_sim_side_stats side[AF_SIM__SIDES];
    struct af_sim_tenant *tenants;     /* sorted by name */
    size_t n_tenants;
    /* true: tenants are the policy's (af_tenant_of: namespace, label, default), with their
     * budgets; false (a policy without a `tenants:` section): the trace's grouping, a pod's
     * accelfit.io/tenant label else its namespace, without budgets. */
    bool tenants_from_policy;
    long spend_checks;                 /* af_sim_options.check_spend: comparisons made */
    long spend_mismatches;             /* and how many differed by more than $0.000001/h */
    struct af_sim_rollout_stats *rollouts;   /* the policy's rollouts, in its order */
    size_t n_rollouts;
    struct af_sim_placement *placements[2];   /* per trace pod, in trace order; accelfit, kube */
    bool autoscale;                    /* af_sim_options.autoscale was given */
    bool has_prepaid;                  /* the cluster has prepaid nodes (ODCRs, blocks) */
    double consolidate_after;
    char **launched_names;             /* names of launched nodes placements point to (owned) */
    size_t n_launched_names;
};

/*
 * Replays `trace` on `cluster` for both schedulers and computes the lower bound.
 * Trace pods are left as they were (node_name NULL). Cannot fail; release *out.
 */
void af_sim_run(const struct af_config *cfg, const struct af_sim_cluster *cluster,
                struct af_sim_trace *trace, const struct af_sim_options *opt,
                struct af_sim_result *out);
void af_sim_result_release(struct af_sim_result *r);   /* zeroes it */

/* A side's name for people: "accelfit", "kube-scheduler", "lower bound". Static. */
const char *af_sim_side_name(enum af_sim_side s);
/* A class slot's name: af_class_name, "unknown" for the last slot. Static. */
const char *af_sim_class_name(int slot);

/* ---- output (src/sim/report.c, src/sim/html.c) ------------------------------------------------ */

/* The comparison as a table for people. Returns 0 or AF_ETOOBIG (out's cap). */
int af_sim_render_text(const struct af_sim_result *r, struct af_buf *out) AF_MUST_CHECK;
/* The same numbers as one JSON object (docs/simulate.md), with every pod's placement. */
int af_sim_render_json(const struct af_sim_result *r, struct af_buf *out) AF_MUST_CHECK;
/* A self-contained HTML page (inline SVG, no scripts, nothing fetched) with the table
 * and charts: cost over time per class for both schedulers, placements by class,
 * rollout share over time. `title` names the inputs. */
int af_sim_render_html(const struct af_sim_result *r, const char *title,
                       struct af_buf *out) AF_MUST_CHECK;

#endif
