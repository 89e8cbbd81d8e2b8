/* SPDX-License-Identifier: Apache-2.0 */
/*
 * decide: what the extender answers, computed purely.
 *
 *   classify   labels + allocatable + annotations -> node class, price, spot
 *   requests   containers, init containers, sidecars, overhead -> effective request
 *   intent     pod annotations + requests -> workload profile (with notes on what
 *              was malformed or inferred)
 *   plan       profile -> tiers (via af_select) restricted to what the pod's
 *              requests can use
 *   filter     plan + candidate nodes -> verdict and reason per node
 *   prioritize plan + candidate nodes -> 0..10 score per node, with its parts
 *
 * No I/O, no locks, no clock, no logging. Reasons are written into the output
 * structs; the caller turns them into FailedNodes, logs and /explain.
 */
#ifndef AF_DECIDE_H
#define AF_DECIDE_H

#include <stddef.h>
#include <string.h>

#include "accelfit/config.h"
#include "accelfit/model.h"
#include "accelfit/select.h"

struct af_kv {
    const char *key;
    const char *value;
};

/* ---- classification -------------------------------------------------------------- */

/*
 * Fills out->cls, class_source, spot, price_known, hourly_usd, price_source,
 * instance_type and node_group (new strings, or left NULL) from the node's labels,
 * annotations and allocatable resources, trying in order:
 *   node.kubernetes.io/instance-type (and beta.kubernetes.io/instance-type) in the catalog,
 *   karpenter.k8s.aws/instance-gpu-name, karpenter.k8s.aws/instance-accelerator-name,
 *   eks.amazonaws.com/instance-gpu-name, nvidia.com/gpu.product,
 *   k8s.amazonaws.com/accelerator, accelerator, hardware-type,
 *   allocatable nvidia.com/gpu / aws.amazon.com/neuron* (an accelerator whose model
 *   or NeuronCore generation no label names is not guessed: class stays
 *   AF_CLASS_UNKNOWN, class_source "allocatable ..."),
 *   otherwise cpu. A generation-less Neuron name ("inferentia") is settled by the
 *   instance family label when there is one.
 * Capacity type from karpenter.sh/capacity-type or eks.amazonaws.com/capacityType
 * ("spot"/"SPOT"); region and zone from topology.kubernetes.io/{region,zone}. Price:
 * af_node_price with no live prices.
 * Cannot fail.
 */
void af_node_classify(const struct af_catalog *cat, const struct af_policy *pol,
                      const struct af_kv *labels, size_t n_labels,
                      const struct af_kv *annotations, size_t n_annotations,
                      struct af_node_info *out);

/*
 * Where a node's price comes from (af_node_info.price_source):
 *   annotation         accelfit.io/hourly-price on the node, taken as it is (spot or not)
 *   aws-spot           its zone's spot price for its type, read from AWS (prices.h)
 *   aws                its region's on-demand price, read from AWS
 *   aws-catalog-spot   on spot: the region's on-demand price from AWS less the
 *   aws-policy-spot      catalog's (or the policy's default) spot discount of the type
 *   catalog            the catalog's on-demand list price (af_catalog.price_region; when
 *                      the node runs elsewhere, price_other_region says so)
 *   catalog-spot       on spot: that list price less the catalog's spot discount
 *   policy             on spot: that list price less the policy's default_spot_discount_pct
 *   unknown            none of these: the node has no price
 * On spot with no discount known, the on-demand price stands (source aws or catalog).
 */
#define AF_PRICE_SOURCE_ANNOTATION "annotation"
#define AF_PRICE_SOURCE_AWS_SPOT "aws-spot"
#define AF_PRICE_SOURCE_AWS "aws"
#define AF_PRICE_SOURCE_AWS_CATALOG_SPOT "aws-catalog-spot"
#define AF_PRICE_SOURCE_AWS_POLICY_SPOT "aws-policy-spot"
#define AF_PRICE_SOURCE_CATALOG "catalog"
#define AF_PRICE_SOURCE_CATALOG_SPOT "catalog-spot"
#define AF_PRICE_SOURCE_POLICY_SPOT "policy"
#define AF_PRICE_SOURCE_UNKNOWN "unknown"
/* Then, on what those give (docs/pricing.md#what-the-cluster-really-pays):
 *   overlay            a Karpenter NodeOverlay's price or priceAdjustment (price_by: its name)
 *   savings-plan       a discount of the policy's prices.discounts (price_by: its name)
 *   prepaid            an ODCR or Capacity Block: 0 (prices.prepaid marginal, the default),
 *                      or its rate (amortized); rate_usd_hr and rate_source keep the rate */
#define AF_PRICE_SOURCE_OVERLAY "overlay"
#define AF_PRICE_SOURCE_SAVINGS_PLAN "savings-plan"
#define AF_PRICE_SOURCE_PREPAID "prepaid"

struct af_prices;
struct af_overlays;

/* What prices nodes beyond their own records; any member may be NULL. */
struct af_price_inputs {
    const struct af_prices *live;          /* prices read from AWS */
    const struct af_overlays *overlays;    /* Karpenter NodeOverlays of the cluster */
};

/*
 * Prices a classified node (price_known, hourly_usd, price_source, price_as_of,
 * price_other_region, rate_*, price_by, reservation_end) from what classification kept of
 * it (instance_type, spot, region, zone, annotated_usd, labels, prepaid), the prices read
 * from AWS and the NodeOverlays (`in`; NULL when none), the policy's discounts and prepaid
 * mode, and the catalog, in the order of the sources above. af_node_classify calls it with
 * no inputs; new inputs re-price every node with it (af_cache_reprice). Cannot fail.
 */
void af_node_price(const struct af_catalog *cat, const struct af_policy *pol,
                   const struct af_price_inputs *in, struct af_node_info *n);

/*
 * One sentence for people on where a node's price comes from and how old it is, as of unix
 * time `now`: "eu-west-1a spot price from AWS, read 4 min ago", "us-east-1 on-demand list
 * price of the catalog (2026-07-20); the node runs in eu-west-1, whose price is not known",
 * "no price: ...". Always NUL-terminated.
 */
void af_node_price_reason(const struct af_node_info *n, const struct af_catalog *cat,
                          const struct af_policy *pol, double now, char *buf, size_t len);

/* ---- effective requests ------------------------------------------------------------ */

struct af_container_req {
    struct af_resources req;
    bool restartable;          /* init container with restartPolicy: Always (sidecar) */
};

/*
 * The scheduler's effective request (docs/extender-protocol.md §3): sum of app
 * containers and sidecars, max with each init container's usage (its request
 * plus the sidecars started before it), plus overhead (may be NULL).
 * Cannot fail.
 */
void af_effective_requests(const struct af_container_req *containers, size_t n_containers,
                           const struct af_container_req *inits, size_t n_inits,
                           const struct af_resources *overhead, struct af_resources *out);

/* ---- intent and plan ------------------------------------------------------------------ */

#define AF_NOTE_MAX 8
#define AF_PLAN_RESTRICTIONS 4                 /* restrictions kept with their reasons */

/*
 * What accelfit knows and what it only prefers, for one pod. Knowledge narrows
 * (filter refuses): the requests (`requested`, `devices`), physics (`need_gib`
 * against the devices the pod gets on a node, times `instances`), stated intent
 * (`stated`: the workload is annotated, so tiered fallback applies; a stated
 * NeuronCore generation) and explicit policy (a strict rule, filter.cpu_backfill, a
 * rollout's restriction to one side's classes: af_plan_restrict).
 * Guesses rank (prioritize orders): an inferred workload, the rule's tiers for it.
 */
/* The pod annotations accelfit reads, as bits of af_plan.bad_annotations. */
#define AF_PLAN_ANNOTATIONS 9
/* "accelfit.io/workload" for bit 0, ...; NULL past the last. Cannot fail. */
const char *af_plan_annotation(int i);

struct af_plan {
    struct af_profile profile;
    enum af_accel_kind requested;              /* accelerator kind the requests ask for */
    bool workload_inferred;
    bool stated;                               /* accelfit.io/workload given: tiers filter */
    int64_t devices;                           /* devices (GPUs, MIG slices, Neuron devices) requested */
    int64_t neuron_cores;                      /* aws.amazon.com/neuroncore requested */
    int neuron_gen;                            /* NeuronCore generation: stated, or the preferred one */
    bool neuron_gen_stated;                    /* accelfit.io/neuron-core-version given */
    int instances;                             /* instances the job may span (the model is split) */
    bool instances_stated;
    double need_gib;                           /* memory the model needs; 0 when unknown */
    char notes[AF_NOTE_MAX][AF_REASON_MAX];    /* malformed annotations, inferences */
    int n_notes;
    uint32_t bad_annotations;                  /* bit i: af_plan_annotation(i) was malformed */
    int n_bad_notes;                           /* notes[0 .. n_bad_notes - 1] say which, how */
    struct af_selection sel;                   /* tiers usable by this pod, best first */
    int tier_of[AF_CLASS__COUNT];              /* class -> tier (for allowed families), -1 if none */
    int other_of[AF_CLASS__COUNT];             /* class -> added tier for the rest of it, -1 if none */
    int unknown_tier;                          /* tier of a node of the requested kind whose model is unknown */
    bool backfill;                             /* last tier is the CPU-backfill tier */
    /* An explicit restriction (af_plan_restrict): only these classes may be used. */
    bool restricted;
    uint32_t allowed;                          /* bit (1u << class) */
    char restrict_why[AF_REASON_MAX];          /* the last restriction's why (see restrictions) */
    /* An explicit cost limit (af_plan_limit_cost): on a priced node of a class in
     * `limit_classes`, a pod whose share of the price exceeds `limit_usd_hr` is refused. */
    uint32_t limit_classes;                    /* bit (1u << class); 0: no limit */
    double limit_usd_hr;
    char limit_why[AF_REASON_MAX];
    /* Explicit policy (af_plan_require_spot): only spot nodes may be used. */
    bool spot_only;
    char spot_why[AF_REASON_MAX];
    /* Each explicit restriction on its own (a rollout's side, a tenant's classes), so a
     * refusal quotes the one that excludes the node's class (af_plan_restrict_why). */
    struct af_plan_restriction {
        uint32_t classes;                      /* bit (1u << class) */
        char why[AF_REASON_MAX];
    } restrictions[AF_PLAN_RESTRICTIONS];
    int n_restrictions;
    /* Set by the caller for the filter answer: a node without room is refused with its
     * cause (the resource and what the pod requests, the node's tier), the same text for
     * every such node, not with the node's own free amounts (/explain keeps those).
     * kube-scheduler counts identical reasons in the pod's FailedScheduling event. */
    bool brief_reasons;
    /* The unix time the caller decides at (0: not known; a Capacity Block's end is then not
     * judged). Set by the caller after af_plan_pod: the core reads no clock. */
    double now;
};

/* Resolves the pod's intent and its usable tiers. Cannot fail. */
void af_plan_pod(const struct af_policy *pol, const struct af_catalog *cat,
                 const struct af_pod_info *pod, struct af_plan *out);

/*
 * Restricts the plan to the classes in `classes` (bit 1u << class) as explicit policy:
 * a rollout steering the pod's unit to one side. af_plan_node_tier then gives -1 for a
 * node of any other class (or of an unknown class), so filter refuses it
 * FailedAndUnresolvable with `why` and the node's class, and prioritize scores it 0.
 * A second call narrows further (the intersection); each call's classes and `why` are kept
 * (the first AF_PLAN_RESTRICTIONS; `restrict_why` is the last). Cannot fail.
 */
void af_plan_restrict(struct af_plan *plan, uint32_t classes, const char *why);

/*
 * Why a node of class `cls` is outside the plan's explicit restrictions: the reason of the
 * first restriction that excludes the class (an unknown class is outside every one), or
 * NULL when none does. Cannot fail.
 */
const char *af_plan_restrict_why(const struct af_plan *plan, enum af_class cls);

/*
 * A cost ceiling as explicit policy (a tenant's hard budget, accelfit/tenant.h): on a node
 * of a class in `classes` whose price is known, filter refuses the pod
 * FailedAndUnresolvable when its share of the node's price (af_pod_share_usd) is more than
 * `usd_hr`, quoting `why` and the amount. A node whose price is unknown is not refused
 * (nothing is known against it). A second call replaces the first. Cannot fail.
 */
void af_plan_limit_cost(struct af_plan *plan, uint32_t classes, double usd_hr, const char *why);

/* Only spot nodes, as explicit policy: filter refuses every other node FailedAndUnresolvable
 * quoting `why`. Cannot fail. */
void af_plan_require_spot(struct af_plan *plan, const char *why);

/*
 * The pod's share of the node's hourly price: price x the largest fraction it requests of
 * any resource the node offers (a resource the node does not offer counts as all of it),
 * clamped to the whole price. 0 when the price is unknown. What a running pod costs in a
 * tenant's spend (accelfit/tenant.h) and, on a node that already runs workload pods, its
 * marginal cost in prioritize. Cannot fail.
 */
double af_pod_share_usd(const struct af_resources *requests, const struct af_node_info *node);

/*
 * Physics, as filter judges it: whether the model fits in what the pod gets on `node` (the
 * devices it requests x the memory of one of the node's devices, x the instances the job
 * may span; host memory for a CPU pod). True when the model's size or the node's device
 * memory is unknown. Filter refuses a node where it is false; the admission preferences
 * (accelfit/prefer.h) leave out the instance types where it is false. Cannot fail.
 */
bool af_plan_model_fits(const struct af_plan *plan, const struct af_pod_info *pod,
                        const struct af_node_info *node);

/*
 * Whether the pod cannot finish on `node` before its Capacity Block (or other reservation
 * with an end) ends: the time left (*left_s) is less than the policy's
 * capacity_block_end_margin plus the pod's expected run time (af_pod_info.expected_s; 0 when
 * not known, so a pod of unknown length still avoids a block's last margin). False when
 * the node has no known end or plan->now is 0. Prioritize ranks such a node below every
 * other node that passes. Cannot fail.
 */
bool af_plan_block_ends(const struct af_policy *pol, const struct af_plan *plan,
                        const struct af_pod_info *pod, const struct af_node_info *node,
                        double *left_s);

/* The tier of `node` for this plan (index into plan->sel.tiers), -1 when none. */
int af_plan_node_tier(const struct af_plan *plan, const struct af_node_info *node);

/* A tier's name for people: its class ("nvidia-a10g") or what an added tier holds. */
const char *af_plan_tier_name(const struct af_plan *plan, int tier);

/* ---- filter and prioritize ----------------------------------------------------------- */

enum af_verdict { AF_VERDICT_PASS = 0, AF_VERDICT_FAILED, AF_VERDICT_UNRESOLVABLE };

struct af_node_decision {
    const char *name;                  /* borrowed: the candidate name */
    enum af_verdict verdict;
    int tier;                          /* index into plan->sel.tiers, -1 when none */
    bool has_room;                     /* the pod's requests fit in the cached allocation */
    char reason[AF_REASON_MAX];        /* why it failed, or why it passed */
    /* prioritize */
    int score;                         /* 0..10 */
    double s_tier, s_util, s_cost;     /* parts in [0,1] before weights */
    double util_after;                 /* allocation fraction of the scored resource */
    double marginal_usd_hr;            /* the pod's share of the node's price */
    bool marginal_known;
    /* live utilization (accelfit/utilization.h, af_utilization_score); zero when not configured */
    int live_state;                    /* enum af_live_state */
    int live_metric;                   /* enum af_utilization_metric judged */
    double live_util, live_max;        /* mean and max over the node's devices, 0..1 */
    double live_age_s;                 /* age of the oldest sample used */
    int live_devices, live_idle;       /* devices measured, of which idle */
    double s_live;                     /* the live part in [0,1] */
    int score_alloc;                   /* the score on allocation alone */
    int prepaid_level;                 /* ranked above its tier's pay-as-you-go nodes: 1 an
                                        * empty prepaid node, 2 one in use (above 1); 0 not */
};

/* A decision with nothing decided: all zero, its reason "" (the 240 bytes of reason text
 * are not cleared: a candidate costs a store, not a page of them). */
static inline void af_node_decision_clear(struct af_node_decision *d)
{
    size_t rest = offsetof(struct af_node_decision, reason) + sizeof(d->reason);

    memset(d, 0, offsetof(struct af_node_decision, reason));
    d->reason[0] = '\0';
    memset((char *)d + rest, 0, sizeof(*d) - rest);
}

struct af_filter_summary {
    int passed;
    int failed;
    int unresolvable;
    int best_tier;                     /* tier chosen, -1 when none */
    bool fallback;                     /* best_tier > 0: a better tier had no room */
};

/*
 * Candidates: nodes[i].info == NULL means the name is not known to the cache
 * (the verdict is FAILED with a reason, so preemption can still consider it).
 * `names[i]` is the candidate's name as the request gave it.
 * out[] has n entries, in input order. Cannot fail.
 */
void af_filter(const struct af_policy *pol, const struct af_plan *plan,
               const struct af_pod_info *pod, const struct af_node_view *nodes,
               const char *const *names, size_t n, struct af_node_decision *out,
               struct af_filter_summary *sum);

/*
 * Scores every candidate 0..10 (verdict and tier are filled too, as filter
 * would; reasons are left empty: af_filter writes them). Deterministic. Cannot fail.
 */
void af_prioritize(const struct af_policy *pol, const struct af_plan *plan,
                   const struct af_pod_info *pod, const struct af_node_view *nodes,
                   const char *const *names, size_t n, struct af_node_decision *out);

/* ---- the decision order ------------------------------------------------------------------ */

/*
 * Every decision about a pod — kube-scheduler's filter, prioritize and preempt, /explain, the
 * webhook's preferences, and the simulator's side for accelfit — takes the same steps in the
 * same order, here and only here (src/core/decide.c):
 *
 *   1. plan      af_plan_pod: what the pod needs and its tiers; plan->now, the caller's clock
 *                (a Capacity Block's end is judged against it)
 *   2. rollout   the unit's side restricts the plan. First of the restrictions: a side is
 *                decided once per unit, and what narrows later (a budget) must never move a
 *                unit off the side the ledger counts it on
 *   3. tenant    the tenant's classes and hard budget restrict the plan (af_tenant_steer); a
 *                soft budget is only kept, for step 6
 *   4. filter    af_filter, or the caller's filter with live utilization
 *   5. score     af_prioritize (prepaid capacity first within a tier, a reservation that
 *                ends before the pod could finish last), then the live-utilization part
 *   6. rank      a soft budget lowers premium nodes' scores: after 5, since it lowers what 5
 *                gave
 *
 * What needs state the core does not keep — the rollouts' ledger, the tenants' books, a
 * utilization snapshot — is the caller's, as hooks; a NULL hook is a step not taken.
 */
struct af_tenant_decision;

struct af_decide_hooks {
    void *ud;
    /* 1: the plan in place of af_plan_pod (the same plan: a memo of it); NULL: af_plan_pod */
    void (*plan)(void *ud, const struct af_policy *pol, const struct af_catalog *cat,
                 const struct af_pod_info *pod, struct af_plan *plan);
    /* 2: restrict `plan` to the pod's rollout side */
    void (*rollout)(void *ud, const struct af_pod_info *pod, struct af_plan *plan);
    /* 3: the tenant's steer into `td` (af_tenant_steer with the caller's books) */
    void (*tenant)(void *ud, const struct af_pod_info *pod, struct af_plan *plan,
                   struct af_tenant_decision *td);
    /* 4: filter in place of af_filter (live utilization) */
    void (*filter)(void *ud, const struct af_plan *plan, const struct af_pod_info *pod,
                   const struct af_node_view *nodes, const char *const *names, size_t n,
                   struct af_node_decision *out, struct af_filter_summary *sum);
    /* 5: after af_prioritize, the live part of the scores */
    void (*score)(void *ud, const struct af_plan *plan, const struct af_pod_info *pod,
                  const struct af_node_view *nodes, size_t n, struct af_node_decision *out);
};

/* Steps 1-3 into `plan` and `td` (zeroed first: a tenant-less decision ranks nothing).
 * `h` may be NULL. Cannot fail. */
void af_decide_plan(const struct af_policy *pol, const struct af_catalog *cat,
                    const struct af_pod_info *pod, double now, const struct af_decide_hooks *h,
                    struct af_plan *plan, struct af_tenant_decision *td);
/* Step 4 for a plan from af_decide_plan. */
void af_decide_filter(const struct af_policy *pol, const struct af_plan *plan,
                      const struct af_pod_info *pod, const struct af_node_view *nodes,
                      const char *const *names, size_t n, const struct af_decide_hooks *h,
                      struct af_node_decision *out, struct af_filter_summary *sum);
/* Steps 5 and 6 for a plan and tenant decision from af_decide_plan. */
void af_decide_prioritize(const struct af_policy *pol, const struct af_plan *plan,
                          const struct af_pod_info *pod, const struct af_node_view *nodes,
                          const char *const *names, size_t n, const struct af_decide_hooks *h,
                          const struct af_tenant_decision *td, struct af_node_decision *out);

#endif
