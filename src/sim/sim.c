/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulator's engine: replays a trace on a cluster once per scheduler and
 * keeps the books. Each run owns a struct af_cache that pods are bound into and
 * deleted from as they come and go; every decision takes a fresh snapshot of it,
 * as the server does for every request. accelfit's decisions go through the
 * server's own functions (af_plan_pod, af_rollouts_steer, af_filter,
 * af_prioritize); kube-scheduler's through the model in kubesched.c, which also
 * supplies the feasible candidates accelfit sees. Money is integrated between
 * events from per-class rates that change only when a node gains its first pod or
 * loses its last, so a run costs O(events x decision), not O(time).
 */
#include "accelfit/simulate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/cache.h"
#include "accelfit/costs.h"
#include "accelfit/decide.h"
#include "accelfit/prefer.h"
#include "accelfit/rollout_state.h"
#include "accelfit/tenant_budget.h"
#include "accelfit/banned.h"

const char *af_sim_side_name(enum af_sim_side s)
{
    switch (s) {
    case AF_SIM_ACCELFIT: return "accelfit";
    case AF_SIM_KUBE: return "kube-scheduler";
    case AF_SIM_BOUND: return "lower bound";
    default: return "?";
    }
}

const char *af_sim_class_name(int slot)
{
    return slot >= 0 && slot < AF_CLASS__COUNT ? af_class_name((enum af_class)slot) : "unknown";
}

static int class_slot(const struct af_node_info *n)
{
    return n->cls >= 0 && n->cls < AF_CLASS__COUNT ? (int)n->cls : AF_CLASS__COUNT;
}

/* What running a node adds to the bill by the hour: its price, and nothing for prepaid
 * capacity (an ODCR or Capacity Block is paid whether it runs work or not, the same on
 * every side; what it leaves idle is counted apart, at its rate). */
static double node_price(const struct af_node_info *n)
{
    return n->price_known && n->prepaid == AF_PREPAID_NONE ? n->hourly_usd : 0;
}

/* ---- one run ------------------------------------------------------------------------------- */

struct departure {
    double t;
    size_t pod;
};

struct run {
    const struct af_config *cfg;
    const struct af_sim_cluster *cl;
    const struct af_sim_options *opt;
    struct af_sim_result *res;
    struct af_sim_side_stats *st;
    enum af_sim_side side;
    double start_unix, horizon;
    struct af_cache *cache;
    struct af_rollouts *rollouts;
    size_t n_nodes;                    /* every node ever: the cluster's, then launched ones */
    struct af_sim_node *nodes;         /* the cluster's (borrowed), launched (info owned) */
    size_t cap_nodes;
    size_t n_live;                     /* nodes not removed */
    bool *launched;                    /* per node: launched by the autoscaler */
    bool *gone;                        /* per node: removed (consolidated) */
    double *empty_since;               /* per launched node: empty since, < 0 when not empty */
    size_t *pos;                       /* per node: its index in a snapshot of the cache */
    size_t *order;                     /* live nodes by name (the snapshot's order) */
    int n_launches;
    bool *provisioned;                 /* per pod: a node was launched for it */
    bool *limit_blocked;               /* per pod: only NodePool limits kept a launch from it */
    size_t *pool_of;                   /* per launched node: its NodePool */
    struct af_resources *pool_used;    /* per NodePool: what its nodes still there allocate */
    struct af_preferences *prefs;      /* scratch for the webhook's preferences */
    /* per node */
    int64_t *nz_cpu, *nz_mem;
    int *workload;                     /* pods that are not DaemonSet or mirror pods */
    struct af_node_view *own;          /* the allocation as this run keeps it (the cache's too) */
    /* per pod (all: the cluster's bound pods first, then the trace's) */
    size_t n_all, n_bound;
    struct af_sim_pod **all;           /* borrowed from af_sim_run */
    int *node_of;                      /* -1 when not placed */
    int *last_node;                    /* where it was placed, -1 never */
    int *tier_of;                      /* its node's tier in accelfit's plan, -1 */
    int *rollout_of;                   /* index into the policy's rollouts, -1 */
    const int *tenant_of;              /* index into res->tenants */
    double *placed_at, *ran, *share_rate;
    /* per tenant of res->tenants */
    const int *policy_tenant;          /* index into the policy's tenants, -1 (the trace's) */
    double *tenant_rate;               /* spend now, $/hour: the books af_tenant_steer reads */
    int *tenant_pods;                  /* running pods */
    double *min_premium;               /* per pod: its smallest share of a premium node of its
                                        * tenant, < 0 until computed (waiting pods only) */
    /* departures: a binary heap by time */
    struct departure *heap;
    size_t n_heap, cap_heap;
    /* waiting pods in arrival order */
    size_t *waiting;
    double *wait_since;
    size_t n_waiting;
    /* rates and the clock */
    double rate[AF_SIM_CLASSES];       /* $/hour of paid nodes per class */
    int busy[AF_SIM_CLASSES];          /* paid nodes per class */
    double idle_rate;
    double prepaid_idle_rate;          /* $/hour of prepaid capacity left idle, at its rate */
    double t;
    int next_bucket;
    int *rollout_target, *rollout_source;   /* running pods per rollout */
    size_t next_start;                 /* kube-scheduler's nextStartNodeIndex */
    bool last_cut;                     /* the last decision's scan stopped early */
    bool *cut;                         /* per waiting pod: its last scan stopped early */
    long decisions;
    double examined, feasible;
    /* scratch for one decision */
    struct af_ks_node *ks;
    size_t *cand;
    struct af_node_view *views;
    const char **names;
    struct af_node_decision *dec, *pdec;
    int64_t *score;
    int *prefer;
};

static void heap_push(struct run *r, double t, size_t pod)
{
    size_t i;

    AF_GROW(r->heap, r->cap_heap, r->n_heap + 1);
    i = r->n_heap++;
    while (i > 0 && r->heap[(i - 1) / 2].t > t) {
        r->heap[i] = r->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    r->heap[i].t = t;
    r->heap[i].pod = pod;
}

static struct departure heap_pop(struct run *r)
{
    struct departure top = r->heap[0], last = r->heap[--r->n_heap];
    size_t i = 0;

    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= r->n_heap)
            break;
        if (c + 1 < r->n_heap && r->heap[c + 1].t < r->heap[c].t)
            c++;
        if (r->heap[c].t >= last.t)
            break;
        r->heap[i] = r->heap[c];
        i = c;
    }
    if (r->n_heap)
        r->heap[i] = last;
    return top;
}

/* A node's contribution to the rates, added (sign 1) or taken away (-1). */
static void node_rates(struct run *r, size_t i, int sign)
{
    const struct af_node_info *n = r->nodes[i].info;
    int slot = class_slot(n);
    int64_t held, dev = af_costs_devices(n, &r->own[i].used, &held);   /* as /costs counts */

    /* Prepaid capacity is paid all along: its idle devices are money on the floor. */
    if (n->prepaid != AF_PREPAID_NONE && n->rate_known && !r->launched[i]) {
        double idle = dev > 0 ? (double)(dev - held) / (double)dev : r->workload[i] > 0 ? 0 : 1;
        r->prepaid_idle_rate += sign * n->rate_usd_hr * idle;
    }
    /* A cluster node is paid while it runs work; a launched one from launch to removal. */
    if (r->launched[i] ? r->gone[i] : r->workload[i] <= 0)
        return;
    r->rate[slot] += sign * node_price(n);
    r->busy[slot] += sign;
    if (dev > 0 && held < dev)
        r->idle_rate += sign * node_price(n) * (double)(dev - held) / (double)dev;
}

static void sample_rollouts(struct run *r, int bucket)
{
    for (size_t k = 0; k < r->res->n_rollouts; k++) {
        int t = r->rollout_target[k], s = r->rollout_source[k];
        r->res->rollouts[k].achieved[r->side][bucket] = t + s ? (double)t / (t + s) : -1;
    }
}

/* Integrates the rates from r->t to `t`, bucket by bucket (the last takes what is left). */
static void advance(struct run *r, double t)
{
    int nb = r->res->buckets;

    if (r->t < t) {
        double dt = (t - r->t) / 3600.0;
        for (size_t i = 0; i < r->res->n_tenants; i++) {
            struct af_sim_tenant *tn = &r->res->tenants[i];
            tn->spend_usd[r->side] += r->tenant_rate[i] * dt;
            /* to a millionth of a dollar: the books' rounding is not an overrun */
            if (tn->budget_usd_hr >= 0 && r->tenant_rate[i] > tn->budget_usd_hr + 1e-6)
                tn->over_hours[r->side] += dt;
        }
    }
    while (r->t < t) {
        int b = r->next_bucket;
        double edge = b < nb - 1 ? (b + 1) * r->res->bucket_seconds : INFINITY;
        double upto = t < edge ? t : edge, dt = (upto - r->t) / 3600.0;
        for (int c = 0; c < AF_SIM_CLASSES; c++) {
            double usd = r->rate[c] * dt;
            r->st->cost_usd += usd;
            r->st->cost_by_class[c] += usd;
            r->st->node_hours_by_class[c] += r->busy[c] * dt;
            r->st->cost_series[(size_t)b * AF_SIM_CLASSES + c] += usd;
        }
        r->st->idle_accel_usd += r->idle_rate * dt;
        r->st->prepaid_idle_usd += r->prepaid_idle_rate * dt;
        r->t = upto;
        if (upto >= edge) {
            sample_rollouts(r, b);
            r->next_bucket++;
        }
    }
}

static void rollout_count(struct run *r, size_t p, size_t node, int delta, bool placement)
{
    int k = r->rollout_of[p];
    enum af_class cls = r->nodes[node].info->cls;
    const struct af_rollout *ro;

    if (k < 0 || cls < 0)
        return;
    ro = &r->cfg->policy->rollouts[k];
    if (ro->target & (1u << cls)) {
        r->rollout_target[k] += delta;
        if (placement)
            r->res->rollouts[k].target_pods[r->side]++;
    } else if (ro->source & (1u << cls)) {
        r->rollout_source[k] += delta;
        if (placement)
            r->res->rollouts[k].source_pods[r->side]++;
    }
}

/* The pod's share joins (sign 1) or leaves (-1) its tenant's spend rate. */
static void tenant_count(struct run *r, size_t p, int sign)
{
    int k = r->tenant_of[p];
    struct af_sim_tenant *tn = &r->res->tenants[k];

    r->tenant_pods[k] += sign;
    r->tenant_rate[k] += sign * r->share_rate[p];
    if (!r->tenant_pods[k])
        r->tenant_rate[k] = 0;   /* no pods, no rounding left over */
    if (r->tenant_rate[k] > tn->peak_usd_hr[r->side])
        tn->peak_usd_hr[r->side] = r->tenant_rate[k];
}

static void bind(struct run *r, size_t p, size_t node, int tier)
{
    struct af_sim_pod *sp = r->all[p];
    struct af_pod_info *info = sp->info;
    const struct af_node_info *n = r->nodes[node].info;

    node_rates(r, node, -1);
    if (!sp->preexisting) {
        /* Bound, started and Ready: what the cache would show of a running pod (the
         * rollout brake reads readiness and start time). */
        af_free(info->node_name);
        info->node_name = af_xstrdup(n->name);
        info->ready = true;
        info->started_unix = r->start_unix + r->t;
    }
    af_cache_upsert_pod(r->cache, af_pod_info_ref(info));
    r->nz_cpu[node] += info->requests.v[AF_RES_CPU] > 0 ? info->requests.v[AF_RES_CPU]
                                                          : AF_KS_DEFAULT_MILLI_CPU;
    r->nz_mem[node] += info->requests.v[AF_RES_MEMORY] > 0 ? info->requests.v[AF_RES_MEMORY]
                                                             : AF_KS_DEFAULT_MEMORY;
    if (!info->system)
        r->workload[node]++;
    r->empty_since[node] = -1;
    for (int k = 0; k < AF_RES__COUNT; k++)
        r->own[node].used.v[k] += info->requests.v[k];
    r->own[node].npods++;
    r->own[node].nsystem += info->system;
    node_rates(r, node, 1);
    r->node_of[p] = (int)node;
    r->last_node[p] = (int)node;
    r->tier_of[p] = tier;
    r->placed_at[p] = r->t;
    r->share_rate[p] = af_pod_share_usd(&info->requests, n);
    tenant_count(r, p, 1);
    rollout_count(r, p, node, 1, !sp->preexisting);
    if (!sp->preexisting) {
        int slot = class_slot(n);
        r->st->placed++;
        r->st->placed_by_class[slot]++;
        if (tier == 0)
            r->st->first_tier++;
        else if (tier > 0)
            r->st->fallbacks++;
        else
            r->st->outside++;
        if (sp->duration >= 0 && r->t + sp->duration < r->horizon)
            heap_push(r, r->t + sp->duration, p);
    }
}

static void leave(struct run *r, size_t p)
{
    struct af_pod_info *info = r->all[p]->info;
    size_t node = (size_t)r->node_of[p];

    node_rates(r, node, -1);
    af_cache_delete_pod(r->cache, info->ns, info->name);
    r->nz_cpu[node] -= info->requests.v[AF_RES_CPU] > 0 ? info->requests.v[AF_RES_CPU]
                                                          : AF_KS_DEFAULT_MILLI_CPU;
    r->nz_mem[node] -= info->requests.v[AF_RES_MEMORY] > 0 ? info->requests.v[AF_RES_MEMORY]
                                                             : AF_KS_DEFAULT_MEMORY;
    if (!info->system)
        r->workload[node]--;
    for (int k = 0; k < AF_RES__COUNT; k++)
        r->own[node].used.v[k] -= info->requests.v[k];
    r->own[node].npods--;
    r->own[node].nsystem -= info->system;
    node_rates(r, node, 1);
    if (r->launched[node] && !r->own[node].npods)
        r->empty_since[node] = r->t;
    tenant_count(r, p, -1);
    rollout_count(r, p, node, -1, false);
    r->ran[p] = r->t - r->placed_at[p];
    r->node_of[p] = -1;
    if (!r->all[p]->preexisting) {
        af_free(info->node_name);
        info->node_name = NULL;
        info->ready = false;
        info->started_unix = 0;
    }
}

/* kube-scheduler's total for candidate j of r->cand[0..n): its plugins, weighted. */
static void ks_scores(struct run *r, const struct af_sim_pod *pod, size_t n)
{
    int max_prefer = 0, *prefer = r->prefer;

    for (size_t j = 0; j < n; j++) {
        prefer[j] = af_ks_intolerable_prefer(pod, &r->ks[r->cand[j]]);
        if (prefer[j] > max_prefer)
            max_prefer = prefer[j];
    }
    for (size_t j = 0; j < n; j++) {
        const struct af_ks_node *k = &r->ks[r->cand[j]];
        /* TaintToleration normalizes in reverse: the fewest intolerable taints score 100. */
        int64_t taint = max_prefer ? AF_KS_MAX_NODE_SCORE -
                                         (int64_t)prefer[j] * AF_KS_MAX_NODE_SCORE / max_prefer
                                   : AF_KS_MAX_NODE_SCORE;
        r->score[j] = af_ks_least_allocated(pod, k) + af_ks_balanced(pod, k) + 3 * taint;
    }
}

/*
 * af_sim_options.check_spend: the books against af_costs_compute over a snapshot of the
 * cache, as the server computes spend: each tenant (the policy's) and the total.
 */
static void check_spend(struct run *r)
{
    struct af_snapshot *snap = af_cache_snapshot(r->cache);
    struct af_costs *c = af_costs_compute(r->cfg->policy, snap->nodes, snap->n_nodes, snap->pods,
                                          snap->n_pods);
    double total = 0;

    for (size_t i = 0; i < r->res->n_tenants; i++) {
        int k = r->policy_tenant[i];
        total += r->tenant_rate[i];
        if (k < 0 || (size_t)k >= c->n_tenants)
            continue;
        r->res->spend_checks++;
        if (fabs(c->tenants[k].spend_usd_hr - r->tenant_rate[i]) > 1e-6)
            r->res->spend_mismatches++;
    }
    r->res->spend_checks++;
    if (fabs(c->spend_usd_hr - total) > 1e-6)
        r->res->spend_mismatches++;
    af_costs_unref(c);
    af_snapshot_unref(snap);
}

/* Tries to place pod p now. Returns true when it was placed. */
/* The simulator's part of the decision order (accelfit/decide.h): the run's rollouts
 * (step 2) and the tenants' books of this moment (3, equal to af_costs_compute's). */
struct sim_decide {
    struct run *r;
    const struct af_snapshot *snap;
    size_t p;
    struct af_rollout_decision rd;
};

static void sim_rollout(void *ud, const struct af_pod_info *pod, struct af_plan *plan)
{
    struct sim_decide *d = ud;

    af_rollouts_steer(d->r->rollouts, d->r->cfg, d->snap, pod, d->r->start_unix + d->r->t, 0,
                      plan, &d->rd);
}

static void sim_tenant(void *ud, const struct af_pod_info *pod, struct af_plan *plan,
                       struct af_tenant_decision *td)
{
    struct sim_decide *d = ud;

    af_tenant_steer(d->r->cfg->policy, pod, d->r->tenant_rate[d->r->tenant_of[d->p]],
                    d->r->res->tenants_from_policy, plan, td);
}

static bool decide(struct run *r, size_t p)
{
    struct af_sim_pod *pod = r->all[p];
    /* accelfit reads a snapshot of its cache, as the server does for each request; the
     * model of kube-scheduler reads the run's own books, which hold the same numbers. */
    struct af_snapshot *snap = r->side == AF_SIM_ACCELFIT ? af_cache_snapshot(r->cache) : NULL;
    const struct af_node_view *nv = snap ? snap->nodes : r->own;
    int want = af_ks_feasible_to_find(r->opt->percentage_of_nodes_to_score, (int)r->n_live);
    size_t n = 0, examined = 0, steps = 0, best = SIZE_MAX, pass = 0;
    struct af_plan plan, open_plan;
    int tier;
    bool placed = false;

    if (r->opt->check_spend)
        check_spend(r);
    af_assert(!snap || snap->n_nodes == r->n_live);
    for (size_t i = 0; i < r->n_nodes; i++) {
        r->ks[i].node = &r->nodes[i];
        r->ks[i].view = snap && !r->gone[i] ? &nv[r->pos[i]] : &r->own[i];
        r->ks[i].nonzero_cpu = r->nz_cpu[i];
        r->ks[i].nonzero_mem = r->nz_mem[i];
    }
    /* The scan: round robin from where the last cycle stopped, until `want` fit. */
    for (size_t j = 0; j < r->n_nodes && (int)n < want; j++) {
        size_t i = (r->next_start + j) % r->n_nodes;
        steps++;
        if (r->gone[i])
            continue;   /* removed by the autoscaler: not in the node list */
        examined++;
        if (af_ks_filter(pod, &r->ks[i]) == AF_KS_FIT)
            r->cand[n++] = i;
    }
    if (r->n_nodes)
        r->next_start = (r->next_start + steps) % r->n_nodes;
    r->decisions++;
    r->examined += (double)examined;
    r->feasible += (double)n;
    r->last_cut = examined < r->n_live;
    if (r->last_cut)
        r->st->scan_cut++;

    if (r->side == AF_SIM_ACCELFIT) {
        struct sim_decide d = {r, snap, p, {0}};
        struct af_decide_hooks h = {.ud = &d, .rollout = sim_rollout, .tenant = sim_tenant};
        struct af_tenant_decision td;
        /* the plan without the steps, for the books (which tier it landed on) */
        af_plan_pod(r->cfg->policy, r->cfg->catalog, pod->info, &open_plan);
        af_decide_plan(r->cfg->policy, r->cfg->catalog, pod->info, r->start_unix + r->t, &h,
                       &plan, &td);
        for (size_t j = 0; j < n; j++) {
            r->views[j] = snap->nodes[r->pos[r->cand[j]]];
            r->names[j] = r->views[j].info->name;
        }
        af_decide_filter(r->cfg->policy, &plan, pod->info, r->views, r->names, n, &h, r->dec,
                         NULL);
        /* kube-scheduler sends prioritize only the nodes filter kept. */
        for (size_t j = 0; j < n; j++)
            if (r->dec[j].verdict == AF_VERDICT_PASS)
                r->cand[pass++] = r->cand[j];
        n = pass;
        ks_scores(r, pod, n);
        for (size_t j = 0; j < n; j++) {
            r->views[j] = snap->nodes[r->pos[r->cand[j]]];
            r->names[j] = r->views[j].info->name;
        }
        af_decide_prioritize(r->cfg->policy, &plan, pod->info, r->views, r->names, n, &h, &td,
                             r->pdec);
        for (size_t j = 0; j < n; j++)
            r->score[j] += (int64_t)r->pdec[j].score * r->opt->extender_weight *
                           (AF_KS_MAX_NODE_SCORE / 10);
    } else {
        ks_scores(r, pod, n);
    }
    for (size_t j = 0; j < n; j++)
        if (best == SIZE_MAX || r->score[j] > r->score[best])
            best = j;
    if (best != SIZE_MAX) {
        size_t node = r->cand[best];
        if (r->side == AF_SIM_ACCELFIT && examined < r->n_live) {
            /* Would accelfit have picked a cheaper node had kube-scheduler scanned them all? */
            double chosen = r->pdec[best].marginal_usd_hr, cheapest = chosen;
            size_t m = 0;
            for (size_t i = 0; i < r->n_nodes; i++)
                if (!r->gone[i] && af_ks_filter(pod, &r->ks[i]) == AF_KS_FIT) {
                    r->views[m] = snap->nodes[r->pos[i]];
                    r->names[m] = r->views[m].info->name;
                    m++;
                }
            af_prioritize(r->cfg->policy, &plan, pod->info, r->views, r->names, m, r->dec);
            for (size_t j = 0; j < m; j++)
                if (r->dec[j].verdict == AF_VERDICT_PASS && r->dec[j].marginal_known &&
                    r->dec[j].marginal_usd_hr < cheapest)
                    cheapest = r->dec[j].marginal_usd_hr;
            if (cheapest < chosen - 1e-9)
                r->st->cheapest_missed++;
        }
        if (r->side != AF_SIM_ACCELFIT)   /* only for the books: which tier it landed on */
            af_plan_pod(r->cfg->policy, r->cfg->catalog, pod->info, &open_plan);
        tier = af_plan_node_tier(&open_plan, r->nodes[node].info);
        if (!pod->preexisting && !af_plan_model_fits(&open_plan, pod->info, r->nodes[node].info))
            r->st->misfit++;
        af_snapshot_unref(snap);
        snap = NULL;
        bind(r, p, node, tier);
        placed = true;
    }
    af_snapshot_unref(snap);
    return placed;
}

/* The hard budget of pod p's tenant, NULL when it has none (or the trace's tenants). */
static const struct af_tenant *hard_budget(const struct run *r, size_t p)
{
    int k = r->tenant_of[p], pk = r->policy_tenant[k];
    const struct af_tenant *t = pk >= 0 ? &r->cfg->policy->tenants[pk] : NULL;

    return t && t->has_budget && t->over_budget == AF_OVER_BUDGET_HARD ? t : NULL;
}

static bool premium_for(const struct af_tenant *t, const struct af_node_info *n)
{
    return n->price_known && n->cls > AF_CLASS_UNKNOWN && n->cls < AF_CLASS__COUNT &&
           (t->premium & (1u << n->cls));
}

/* Whether pod p's hard budget surely refuses `node` at its tenant's spend now (with a
 * millionth of a dollar to spare, so that no node the filter would take is skipped). */
static bool budget_refuses(const struct run *r, size_t p, size_t node)
{
    const struct af_tenant *t = hard_budget(r, p);
    const struct af_node_info *n = r->nodes[node].info;

    return t && premium_for(t, n) &&
           r->tenant_rate[r->tenant_of[p]] + af_pod_share_usd(&r->all[p]->info->requests, n) >
               t->budget_usd_hr + 1e-6;
}

/*
 * Whether pod p's tenant's spend has come down far enough that its hard budget may now let
 * it onto a premium node it refused before: spend + the pod's smallest share of a premium
 * node of the cluster that could hold it empty (kube-scheduler's filters) within the budget
 * (to a millionth of a dollar, so that no pod the filter would take is skipped).
 */
static bool budget_may_admit(struct run *r, size_t p)
{
    const struct af_tenant *t = hard_budget(r, p);

    if (!t)
        return false;
    if (r->min_premium[p] < 0) {
        double best = INFINITY;
        struct af_node_view empty;
        for (size_t i = 0; i < r->n_nodes; i++) {
            const struct af_node_info *n = r->nodes[i].info;
            struct af_ks_node k = {&r->nodes[i], &empty, 0, 0};
            if (r->gone[i])
                continue;
            memset(&empty, 0, sizeof(empty));
            empty.info = n;
            if (premium_for(t, n) && af_ks_filter(r->all[p], &k) == AF_KS_FIT)
                best = fmin(best, af_pod_share_usd(&r->all[p]->info->requests, n));
        }
        r->min_premium[p] = best;
    }
    return r->tenant_rate[r->tenant_of[p]] + r->min_premium[p] <= t->budget_usd_hr + 1e-6;
}

/*
 * After a pod of tenant `tenant` left `node`, the waiting pods try again, in arrival
 * order. Only that node and that tenant's spend changed, so a pod whose last scan saw
 * every node and that does not fit on this one now (or, on accelfit's side, whose hard
 * budget still refuses it) cannot be placed either (its last attempt stands) and is
 * skipped, unless it is that tenant's and the lower spend may now let its hard budget
 * admit it to a premium node elsewhere.
 */
static void retry_waiting(struct run *r, size_t node, int tenant)
{
    bool budget = r->side == AF_SIM_ACCELFIT;
    size_t keep = 0;
    struct af_ks_node k = {&r->nodes[node], &r->own[node], r->nz_cpu[node], r->nz_mem[node]};

    for (size_t w = 0; w < r->n_waiting; w++) {
        size_t p = r->waiting[w];
        bool could = r->cut[w] ||
                     (af_ks_filter(r->all[p], &k) == AF_KS_FIT &&
                      !(budget && budget_refuses(r, p, node))) ||
                     (budget && r->tenant_of[p] == tenant && budget_may_admit(r, p));
        if (could && decide(r, p)) {
            r->st->wait_hours += (r->t - r->wait_since[w]) / 3600.0;
            /* This node changed again: the next pods see it as it is now. */
            k.nonzero_cpu = r->nz_cpu[node];
            k.nonzero_mem = r->nz_mem[node];
            continue;
        }
        if (could)
            r->cut[w] = r->last_cut;
        r->waiting[keep] = p;
        r->wait_since[keep] = r->wait_since[w];
        r->cut[keep] = r->cut[w];
        keep++;
    }
    r->n_waiting = keep;
}

/* ---- the autoscaler (docs/simulate.md, "Autoscaling") ------------------------------------------- */

/* The snapshot's order: live nodes sorted by name, as the cache sorts them. One node changed,
 * so an insertion sort over the nearly sorted order is linear. */
static void reindex(struct run *r)
{
    size_t m = 0;

    for (size_t i = 0; i < r->n_nodes; i++)
        if (!r->gone[i])
            r->order[m++] = i;
    for (size_t k = 1; k < m; k++) {
        size_t v = r->order[k], j = k;
        while (j > 0 && strcmp(r->nodes[r->order[j - 1]].info->name, r->nodes[v].info->name) > 0) {
            r->order[j] = r->order[j - 1];
            j--;
        }
        r->order[j] = v;
    }
    for (size_t k = 0; k < m; k++)
        r->pos[r->order[k]] = k;
    r->n_live = m;
}

#define GROW_TO(arr, n) (arr) = af_xrealloc((arr), ((n) + 1) * sizeof(*(arr)))

/* Room for one more node in every per-node array. */
static void grow_nodes(struct run *r)
{
    size_t n = r->n_nodes + 1;

    if (n <= r->cap_nodes)
        return;
    n = r->cap_nodes * 2 > n ? r->cap_nodes * 2 : n;
    GROW_TO(r->nodes, n);
    GROW_TO(r->launched, n);
    GROW_TO(r->gone, n);
    GROW_TO(r->empty_since, n);
    GROW_TO(r->pos, n);
    GROW_TO(r->order, n);
    GROW_TO(r->pool_of, n);
    GROW_TO(r->nz_cpu, n);
    GROW_TO(r->nz_mem, n);
    GROW_TO(r->workload, n);
    GROW_TO(r->own, n);
    GROW_TO(r->ks, n);
    GROW_TO(r->cand, n);
    GROW_TO(r->views, n);
    GROW_TO(r->names, n);
    GROW_TO(r->prefer, n);
    GROW_TO(r->dec, n);
    GROW_TO(r->pdec, n);
    GROW_TO(r->score, n);
    r->cap_nodes = n;
}

static bool name_taken(const struct run *r, const char *name)
{
    for (size_t i = 0; i < r->n_nodes; i++)
        if (!strcmp(r->nodes[i].info->name, name))
            return true;
    return false;
}

/* Launches a node of offering `o` now (no launch latency): paid from this moment. */
static size_t launch(struct run *r, const struct af_sim_offering *o)
{
    const struct af_sim_offerings *of = r->opt->autoscale;
    char name[256];
    size_t i;

    do
        snprintf(name, sizeof(name), "%s-%05d", of->pools->pools[o->pool].name, ++r->n_launches);
    while (name_taken(r, name));
    grow_nodes(r);
    i = r->n_nodes++;
    r->nodes[i] = o->node;   /* labels and taints borrowed from the offering */
    r->nodes[i].info = af_sim_offering_node(r->cfg, o, name);
    r->launched[i] = true;
    r->pool_of[i] = o->pool;
    for (int k = 0; k < AF_RES__COUNT; k++)
        r->pool_used[o->pool].v[k] += r->nodes[i].info->allocatable.v[k];
    r->gone[i] = false;
    r->empty_since[i] = r->t;
    r->nz_cpu[i] = r->nz_mem[i] = 0;
    r->workload[i] = 0;
    memset(&r->own[i], 0, sizeof(r->own[i]));
    r->own[i].info = r->nodes[i].info;
    af_cache_upsert_node(r->cache, af_node_info_ref(r->nodes[i].info));
    reindex(r);
    node_rates(r, i, 1);
    r->st->launched++;
    r->st->launched_by_class[class_slot(r->nodes[i].info)]++;
    return i;
}

/* Removes launched node i (empty): unpaid from now, gone from the cache. */
static void consolidate(struct run *r, size_t i)
{
    node_rates(r, i, -1);
    r->gone[i] = true;
    r->empty_since[i] = -1;
    for (int k = 0; k < AF_RES__COUNT; k++)
        r->pool_used[r->pool_of[i]].v[k] -= r->nodes[i].info->allocatable.v[k];
    af_cache_delete_node(r->cache, r->nodes[i].info->name);
    reindex(r);
    r->st->consolidated++;
}

/* When the next empty launched node is due for removal, and which; INFINITY when none. */
static double next_consolidation(const struct run *r, size_t *which)
{
    double best = INFINITY;

    for (size_t i = r->cl->n_nodes; i < r->n_nodes; i++)
        if (!r->gone[i] && r->empty_since[i] >= 0 &&
            r->empty_since[i] + r->opt->consolidate_after < best) {
            best = r->empty_since[i] + r->opt->consolidate_after;
            *which = i;
        }
    return best;
}

/*
 * Pod p fits no node: the provisioner launches one for it (af_sim_provision), with, on
 * accelfit's side, the preferences the webhook would write for it now (af_prefer_for on
 * the plan filter would use: af_plan_pod, then the tenant's classes and budget; pods in a
 * rollout get none, as the webhook gives them none), and the scheduler then places it.
 * A pod gets one launch; one that only NodePool limits kept from a launch is tried again
 * when a removal frees room under them (retry_limited). Returns true when it was placed.
 */
static bool provision(struct run *r, size_t p)
{
    const struct af_sim_offerings *of = r->opt->autoscale;
    struct af_sim_pod *pod = r->all[p];
    const struct af_preferences *prefs = NULL;
    int relaxed = 0;
    long o;

    if (!of || r->provisioned[p])
        return false;
    if (r->side == AF_SIM_ACCELFIT && r->rollout_of[p] < 0 &&
        af_prefer_selects(r->cfg->policy, pod->info)) {
        struct af_snapshot *snap = af_cache_snapshot(r->cache);
        struct af_plan plan;
        struct af_tenant_decision td;
        struct sim_decide d = {r, snap, p, {0}};
        /* as the webhook plans: the tenant's steer, no rollout side (a unit of a rollout is
         * not given preferences) */
        struct af_decide_hooks h = {.ud = &d, .tenant = sim_tenant};
        af_decide_plan(r->cfg->policy, r->cfg->catalog, pod->info, r->start_unix + r->t, &h,
                       &plan, &td);
        (void)af_prefer_for(r->cfg->policy, r->cfg->catalog, &plan, pod->info, snap->nodes,
                            snap->n_nodes, r->dec, r->prefs);
        af_snapshot_unref(snap);
        prefs = r->prefs;
    }
    o = af_sim_provision(of, pod, prefs, r->pool_used, &relaxed);
    if (o < 0) {
        r->limit_blocked[p] = af_sim_provision(of, pod, prefs, NULL, NULL) >= 0;
        return false;
    }
    r->provisioned[p] = true;
    r->limit_blocked[p] = false;
    launch(r, &of->v[o]);
    if (prefs && (size_t)relaxed < prefs->n_terms)
        r->st->launched_preferred++;
    return decide(r, p);
}

/* Whether some offering of `pool` could hold pod p now, within the pool's limits. */
static bool pool_could_hold(const struct run *r, size_t pool, size_t p)
{
    const struct af_sim_offerings *of = r->opt->autoscale;

    for (size_t i = 0; i < of->n; i++)
        if (of->v[i].pool == pool && af_sim_offering_holds(of, i, r->all[p], r->pool_used))
            return true;
    return false;
}

/* A removal freed room under the limits of `pool`: waiting pods that only limits kept from
 * a launch, and that an offering of that pool could now hold, are provisioned again, in
 * arrival order. */
static void retry_limited(struct run *r, size_t pool)
{
    size_t keep = 0;

    for (size_t w = 0; w < r->n_waiting; w++) {
        size_t p = r->waiting[w];
        if (r->limit_blocked[p] && pool_could_hold(r, pool, p) && provision(r, p)) {
            r->st->wait_hours += (r->t - r->wait_since[w]) / 3600.0;
            continue;
        }
        r->waiting[keep] = p;
        r->wait_since[keep] = r->wait_since[w];
        r->cut[keep] = r->cut[w];
        keep++;
    }
    r->n_waiting = keep;
}

static void run_side(struct run *r, struct af_sim_trace *tr)
{
    size_t next = 0, n_trace = tr->n_pods;

    /* Prepaid nodes start all idle; node_rates follows each change from here. */
    r->prepaid_idle_rate = 0;
    for (size_t i = 0; i < r->cl->n_nodes; i++) {
        const struct af_node_info *n = r->nodes[i].info;
        if (n->prepaid != AF_PREPAID_NONE && n->rate_known) {
            r->prepaid_idle_rate += n->rate_usd_hr;
            r->res->has_prepaid = true;
        }
    }
    for (size_t p = 0; p < r->n_bound; p++) {
        /* Bound where the cluster file shows them; the node is known to exist. */
        const char *name = r->all[p]->info->node_name;
        size_t lo = 0, hi = r->cl->n_nodes;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            int c = strcmp(r->nodes[mid].info->name, name);
            if (c == 0) {
                lo = mid;
                break;
            }
            if (c < 0)
                lo = mid + 1;
            else
                hi = mid;
        }
        af_assert(lo < r->cl->n_nodes && !strcmp(r->nodes[lo].info->name, name));
        bind(r, p, lo, -1);
    }
    for (;;) {
        double t_arr = next < n_trace ? tr->pods[next].arrival : INFINITY;
        double t_dep = r->n_heap ? r->heap[0].t : INFINITY;
        double t = t_arr < t_dep ? t_arr : t_dep;
        size_t empty = 0;
        /* Arrivals and departures at the same moment come first: an empty node may be used. */
        double t_cons = r->opt->autoscale ? next_consolidation(r, &empty) : INFINITY;
        if (t_cons < t)
            t = t_cons;
        if (!(t < r->horizon))
            break;
        advance(r, t);
        if (t == t_cons && t < t_arr && t < t_dep) {
            consolidate(r, empty);
            if (r->opt->autoscale->pools->pools[r->pool_of[empty]].limited)
                retry_limited(r, r->pool_of[empty]);
        } else if (t_dep <= t_arr) {
            struct departure d = heap_pop(r);
            size_t node = (size_t)r->node_of[d.pod];
            leave(r, d.pod);
            retry_waiting(r, node, r->tenant_of[d.pod]);
        } else {
            size_t p = r->n_bound + next++;
            if (!decide(r, p) && !provision(r, p)) {
                r->st->waited++;
                r->waiting[r->n_waiting] = p;
                r->cut[r->n_waiting] = r->last_cut;
                r->wait_since[r->n_waiting++] = r->t;
            }
        }
    }
    advance(r, r->horizon);
    while (r->next_bucket < r->res->buckets)
        sample_rollouts(r, r->next_bucket++);
    for (size_t p = 0; p < r->n_all; p++)
        if (r->node_of[p] >= 0)
            r->ran[p] = r->horizon - r->placed_at[p];
    for (size_t w = 0; w < r->n_waiting; w++) {
        r->st->unplaced++;
        r->st->wait_hours += (r->horizon - r->wait_since[w]) / 3600.0;
    }
    if (r->decisions) {
        r->st->nodes_examined_avg = r->examined / (double)r->decisions;
        r->st->feasible_avg = r->feasible / (double)r->decisions;
    }
}

/* ---- tenants -------------------------------------------------------------------------------- */

static size_t tenant_index(struct af_sim_result *res, const char *name, size_t *cap)
{
    size_t lo = 0, hi = res->n_tenants;

    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(res->tenants[mid].name, name);
        if (!c)
            return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    AF_GROW(res->tenants, *cap, res->n_tenants + 1);
    memmove(&res->tenants[lo + 1], &res->tenants[lo], (res->n_tenants - lo) * sizeof(*res->tenants));
    memset(&res->tenants[lo], 0, sizeof(res->tenants[lo]));
    res->tenants[lo].name = af_xstrdup(name);
    res->tenants[lo].budget_usd_hr = -1;
    res->n_tenants++;
    return lo;
}

/* The tenant a pod's spend goes to: the policy's (af_tenant_of, as the server assigns it)
 * when the policy lists tenants, else the trace's. Borrowed from the policy or the pod. */
static const char *tenant_name(const struct af_policy *pol, bool from_policy,
                               const struct af_sim_pod *sp, int *policy_index)
{
    int k = from_policy ? af_tenant_of(pol, sp->info, NULL) : -1;

    *policy_index = k;
    if (k >= 0)
        return pol->tenants[k].name;
    return sp->tenant ? sp->tenant : "";
}

/*
 * Fills out->tenants (with the policy's budgets) for every pod of `all` and returns each
 * pod's index into it, and *policy_tenant each tenant's index into the policy's (-1).
 * Two passes: the sorted inserts of the first move indices around.
 */
static int *tenants_init(const struct af_config *cfg, struct af_sim_pod *const *all, size_t n_all,
                         struct af_sim_result *out, int **policy_tenant)
{
    const struct af_policy *pol = cfg->policy;
    size_t cap = 0;
    int *of = af_xmalloc((n_all + 1) * sizeof(*of));

    out->tenants_from_policy = af_tenants_listed(pol);
    for (size_t p = 0; p < n_all; p++) {
        int k;
        tenant_index(out, tenant_name(pol, out->tenants_from_policy, all[p], &k), &cap);
    }
    *policy_tenant = af_xmalloc((out->n_tenants + 1) * sizeof(**policy_tenant));
    for (size_t i = 0; i < out->n_tenants; i++)
        (*policy_tenant)[i] = -1;
    for (size_t p = 0; p < n_all; p++) {
        int k;
        size_t i = tenant_index(out, tenant_name(pol, out->tenants_from_policy, all[p], &k), &cap);
        of[p] = (int)i;
        if (k >= 0) {
            const struct af_tenant *t = &pol->tenants[k];
            (*policy_tenant)[i] = k;
            out->tenants[i].budget_usd_hr = t->has_budget ? t->budget_usd_hr : -1;
            out->tenants[i].hard = t->has_budget && t->over_budget == AF_OVER_BUDGET_HARD;
        }
    }
    return of;
}

/* ---- the lower bound ------------------------------------------------------------------------ */

static bool accel_res(int r)
{
    return r != AF_RES_CPU && r != AF_RES_MEMORY && r != AF_RES_PODS;
}

/*
 * The cheapest rate a node of the cluster (or, autoscaling, one the provisioner could
 * launch) could run the pod at, packed perfectly: the
 * node's price times the pod's fraction of what the node is for — the mean of its
 * fractions of the node's accelerator resources, or of cpu and memory on a node without
 * accelerators. On one node these fractions sum to at most 1 over all its pods, so no
 * placement pays less. -1 when no node can hold the pod even empty. *slot_out: its class.
 */
static double bound_rate(const struct af_sim_cluster *cl, const struct af_sim_offerings *of,
                         const struct af_sim_pod *pod, int *slot_out)
{
    double best = -1;
    struct af_node_view empty;
    size_t n_of = of ? of->n : 0;

    for (size_t i = 0; i < cl->n_nodes + n_of; i++) {
        const struct af_sim_node *sn = i < cl->n_nodes ? &cl->nodes[i] : &of->v[i - cl->n_nodes].node;
        const struct af_node_info *n = sn->info;
        struct af_ks_node k = {sn, &empty, 0, 0};
        bool accel = false;
        double sum = 0, rate;
        int m = 0;

        memset(&empty, 0, sizeof(empty));
        empty.info = n;
        if (!n->price_known || af_ks_filter(pod, &k) != AF_KS_FIT)
            continue;
        for (int r = 0; r < AF_RES__COUNT; r++)
            accel |= accel_res(r) && n->allocatable.v[r] > 0;
        for (int r = 0; r < AF_RES__COUNT; r++) {
            if (r == AF_RES_PODS || n->allocatable.v[r] <= 0 || accel_res(r) != accel)
                continue;
            sum += (double)pod->info->requests.v[r] / (double)n->allocatable.v[r];
            m++;
        }
        rate = m ? n->hourly_usd * sum / m : 0;
        if (best < 0 || rate < best) {
            best = rate;
            *slot_out = class_slot(n);
        }
    }
    return best;
}

/* ---- the whole comparison ----------------------------------------------------------------------- */

static void run_init(struct run *r, const struct af_config *cfg, const struct af_sim_cluster *cl,
                     struct af_sim_trace *tr, const struct af_sim_options *opt,
                     struct af_sim_result *res, enum af_sim_side side, struct af_sim_pod **all,
                     const int *tenant_of, const int *policy_tenant)
{
    size_t n = cl->n_nodes;

    memset(r, 0, sizeof(*r));
    r->cfg = cfg;
    r->cl = cl;
    r->opt = opt;
    r->res = res;
    r->side = side;
    r->st = &res->side[side];
    r->start_unix = tr->start_unix;
    r->horizon = tr->end;
    r->n_nodes = r->n_live = r->cap_nodes = n;
    r->nodes = af_xcalloc(n + 1, sizeof(*r->nodes));
    if (n)
        memcpy(r->nodes, cl->nodes, n * sizeof(*r->nodes));
    r->launched = af_xcalloc(n + 1, sizeof(*r->launched));
    r->gone = af_xcalloc(n + 1, sizeof(*r->gone));
    r->empty_since = af_xmalloc((n + 1) * sizeof(*r->empty_since));
    r->pos = af_xmalloc((n + 1) * sizeof(*r->pos));
    r->order = af_xmalloc((n + 1) * sizeof(*r->order));
    r->pool_of = af_xcalloc(n + 1, sizeof(*r->pool_of));
    r->pool_used = af_xcalloc((opt->autoscale ? opt->autoscale->pools->n : 0) + 1,
                              sizeof(*r->pool_used));
    for (size_t i = 0; i < n; i++) {
        r->empty_since[i] = -1;
        r->pos[i] = r->order[i] = i;   /* the cluster's nodes are sorted by name */
    }
    r->prefs = af_xcalloc(1, sizeof(*r->prefs));
    r->cache = af_cache_new();
    r->rollouts = side == AF_SIM_ACCELFIT ? af_rollouts_new() : NULL;
    for (size_t i = 0; i < n; i++)
        af_cache_upsert_node(r->cache, af_node_info_ref(cl->nodes[i].info));
    af_cache_set_synced(r->cache, true);
    r->nz_cpu = af_xcalloc(n + 1, sizeof(*r->nz_cpu));
    r->nz_mem = af_xcalloc(n + 1, sizeof(*r->nz_mem));
    r->workload = af_xcalloc(n + 1, sizeof(*r->workload));
    r->n_bound = cl->n_bound;
    r->n_all = cl->n_bound + tr->n_pods;
    r->all = all;
    r->node_of = af_xmalloc((r->n_all + 1) * sizeof(*r->node_of));
    r->last_node = af_xmalloc((r->n_all + 1) * sizeof(*r->last_node));
    r->tier_of = af_xmalloc((r->n_all + 1) * sizeof(*r->tier_of));
    r->rollout_of = af_xmalloc((r->n_all + 1) * sizeof(*r->rollout_of));
    r->provisioned = af_xcalloc(r->n_all + 1, sizeof(*r->provisioned));
    r->limit_blocked = af_xcalloc(r->n_all + 1, sizeof(*r->limit_blocked));
    for (size_t p = 0; p < r->n_all; p++) {
        r->node_of[p] = r->last_node[p] = r->tier_of[p] = -1;
        r->rollout_of[p] = cfg->policy ? af_rollout_match(cfg->policy, r->all[p]->info) : -1;
    }
    r->placed_at = af_xcalloc(r->n_all + 1, sizeof(double));
    r->ran = af_xcalloc(r->n_all + 1, sizeof(double));
    r->share_rate = af_xcalloc(r->n_all + 1, sizeof(double));
    r->tenant_of = tenant_of;
    r->policy_tenant = policy_tenant;
    r->tenant_rate = af_xcalloc(res->n_tenants + 1, sizeof(double));
    r->tenant_pods = af_xcalloc(res->n_tenants + 1, sizeof(int));
    r->min_premium = af_xmalloc((r->n_all + 1) * sizeof(double));
    for (size_t p = 0; p < r->n_all; p++)
        r->min_premium[p] = -1;
    r->waiting = af_xmalloc((r->n_all + 1) * sizeof(*r->waiting));
    r->wait_since = af_xmalloc((r->n_all + 1) * sizeof(*r->wait_since));
    r->cut = af_xcalloc(r->n_all + 1, sizeof(*r->cut));
    r->own = af_xcalloc(n + 1, sizeof(*r->own));
    for (size_t i = 0; i < n; i++)
        r->own[i].info = cl->nodes[i].info;
    r->rollout_target = af_xcalloc(res->n_rollouts + 1, sizeof(int));
    r->rollout_source = af_xcalloc(res->n_rollouts + 1, sizeof(int));
    r->ks = af_xcalloc(n + 1, sizeof(*r->ks));
    r->cand = af_xmalloc((n + 1) * sizeof(*r->cand));
    r->views = af_xcalloc(n + 1, sizeof(*r->views));
    r->names = af_xcalloc(n + 1, sizeof(*r->names));
    r->prefer = af_xcalloc(n + 1, sizeof(*r->prefer));
    r->dec = af_xmalloc((n + 1) * sizeof(*r->dec));
    r->pdec = af_xmalloc((n + 1) * sizeof(*r->pdec));
    r->score = af_xmalloc((n + 1) * sizeof(*r->score));
}

/* After a run: the cache and the rollout memory let go of every record, and the trace's
 * pods go back unbound for the next run. The books stay. */
static void run_finish(struct run *r)
{
    af_cache_free(r->cache);
    r->cache = NULL;
    af_rollouts_free(r->rollouts);
    r->rollouts = NULL;
    for (size_t p = r->n_bound; p < r->n_all; p++) {
        af_free(r->all[p]->info->node_name);
        r->all[p]->info->node_name = NULL;
        r->all[p]->info->ready = false;
        r->all[p]->info->started_unix = 0;
    }
}

static void run_release(struct run *r)
{
    for (size_t i = r->cl->n_nodes; i < r->n_nodes; i++)
        af_node_info_unref(r->nodes[i].info);
    af_free(r->nodes);
    af_free(r->launched);
    af_free(r->gone);
    af_free(r->empty_since);
    af_free(r->pos);
    af_free(r->order);
    af_free(r->pool_of);
    af_free(r->pool_used);
    af_free(r->provisioned);
    af_free(r->limit_blocked);
    af_free(r->prefs);
    af_free(r->nz_cpu);
    af_free(r->nz_mem);
    af_free(r->workload);
    af_free(r->node_of);
    af_free(r->last_node);
    af_free(r->tier_of);
    af_free(r->rollout_of);
    af_free(r->placed_at);
    af_free(r->ran);
    af_free(r->share_rate);
    af_free(r->tenant_rate);
    af_free(r->tenant_pods);
    af_free(r->min_premium);
    af_free(r->heap);
    af_free(r->waiting);
    af_free(r->wait_since);
    af_free(r->cut);
    af_free(r->own);
    af_free(r->rollout_target);
    af_free(r->rollout_source);
    af_free(r->ks);
    af_free(r->cand);
    af_free(r->views);
    af_free(r->names);
    af_free(r->dec);
    af_free(r->pdec);
    af_free(r->score);
    af_free(r->prefer);
}

void af_sim_run(const struct af_config *cfg, const struct af_sim_cluster *cluster,
                struct af_sim_trace *trace, const struct af_sim_options *opt,
                struct af_sim_result *out)
{
    struct af_sim_options defaults = AF_SIM_OPTIONS_INIT;
    struct run runs[2];
    size_t n_all = cluster->n_bound + trace->n_pods;
    struct af_sim_pod **all = af_xmalloc((n_all + 1) * sizeof(*all));
    int *tenant_of, *policy_tenant;
    size_t names_cap = 0;
    int nb;

    if (!opt)
        opt = &defaults;
    nb = opt->buckets > 0 ? opt->buckets : 1;
    memset(out, 0, sizeof(*out));
    out->n_nodes = cluster->n_nodes;
    out->n_pods = trace->n_pods;
    out->n_bound = cluster->n_bound;
    out->horizon = trace->end;
    out->percentage = opt->percentage_of_nodes_to_score;
    out->feasible_to_find = af_ks_feasible_to_find(opt->percentage_of_nodes_to_score,
                                                   (int)cluster->n_nodes);
    out->buckets = nb;
    out->bucket_seconds = trace->end / nb;
    out->autoscale = opt->autoscale != NULL;
    out->consolidate_after = opt->consolidate_after;
    for (int s = 0; s < AF_SIM__SIDES; s++)
        out->side[s].cost_series = af_xcalloc((size_t)nb * AF_SIM_CLASSES, sizeof(double));
    out->n_rollouts = cfg->policy ? cfg->policy->n_rollouts : 0;
    out->rollouts = af_xcalloc(out->n_rollouts + 1, sizeof(*out->rollouts));
    for (size_t k = 0; k < out->n_rollouts; k++) {
        const struct af_rollout *ro = &cfg->policy->rollouts[k];
        out->rollouts[k].name = af_xstrdup(ro->name);
        out->rollouts[k].target = ro->target;
        out->rollouts[k].share = af_rollout_share(ro, trace->start_unix, trace->start_unix, NULL);
        for (int s = 0; s < AF_SIM__SIDES; s++) {
            out->rollouts[k].achieved[s] = af_xmalloc((size_t)nb * sizeof(double));
            for (int b = 0; b < nb; b++)
                out->rollouts[k].achieved[s][b] = -1;
        }
    }

    /* Every pod, as the runs number them: the cluster's bound pods, then the trace's. */
    for (size_t p = 0; p < cluster->n_bound; p++)
        all[p] = &cluster->bound[p];
    for (size_t p = 0; p < trace->n_pods; p++)
        all[cluster->n_bound + p] = &trace->pods[p];
    tenant_of = tenants_init(cfg, all, n_all, out, &policy_tenant);

    for (int s = 0; s < 2; s++) {
        run_init(&runs[s], cfg, cluster, trace, opt, out, (enum af_sim_side)s, all, tenant_of,
                 policy_tenant);
        run_side(&runs[s], trace);
        run_finish(&runs[s]);
    }

    /* Work, per side (tenants' spend was integrated as the runs went); the lower bound
     * from both runs' times. */
    for (size_t p = 0; p < n_all; p++) {
        const struct af_sim_pod *sp = all[p];
        size_t t = (size_t)tenant_of[p];
        int slot = AF_CLASS__COUNT;
        double lb_rate, lb_time;
        if (sp->info->system)
            continue;
        for (int s = 0; s < 2; s++)
            out->side[s].pod_hours += runs[s].ran[p] / 3600.0;
        lb_rate = bound_rate(cluster, opt->autoscale, sp, &slot);
        lb_time = fmin(runs[0].ran[p], runs[1].ran[p]);
        if (lb_rate >= 0 && lb_time > 0) {
            struct af_sim_side_stats *b = &out->side[AF_SIM_BOUND];
            double from = sp->preexisting ? 0 : sp->arrival, to = fmin(from + lb_time, trace->end);
            double usd = lb_rate * lb_time / 3600.0;
            b->cost_usd += usd;
            b->cost_by_class[slot] += usd;
            b->pod_hours += lb_time / 3600.0;
            out->tenants[t].spend_usd[AF_SIM_BOUND] += usd;
            if (!sp->preexisting) {
                b->placed++;
                b->placed_by_class[slot]++;
            }
            /* Spread over the buckets the pod's window covers. */
            for (int k = (int)(from / out->bucket_seconds); k < nb && k * out->bucket_seconds < to;
                 k++) {
                double lo = fmax(from, k * out->bucket_seconds);
                double hi = fmin(to, (k + 1) * out->bucket_seconds);
                if (k == nb - 1)
                    hi = to;
                if (hi > lo)
                    b->cost_series[(size_t)k * AF_SIM_CLASSES + slot] += lb_rate * (hi - lo) / 3600.0;
            }
        }
    }
    for (int s = 0; s < 2; s++) {
        out->placements[s] = af_xcalloc(trace->n_pods + 1, sizeof(*out->placements[s]));
        for (size_t i = 0; i < trace->n_pods; i++) {
            struct af_sim_placement *pl = &out->placements[s][i];
            size_t p = runs[s].n_bound + i;
            int node = runs[s].last_node[p];
            pl->ns = trace->pods[i].info->ns;
            pl->name = trace->pods[i].info->name;
            pl->node = node >= 0 ? runs[s].nodes[node].info->name : NULL;
            if (node >= (int)cluster->n_nodes) {   /* launched: the name outlives the run */
                char *name = af_xstrdup(pl->node);
                AF_GROW(out->launched_names, names_cap, out->n_launched_names + 1);
                out->launched_names[out->n_launched_names++] = name;
                pl->node = name;
            }
            pl->cls = node >= 0 ? class_slot(runs[s].nodes[node].info) : -1;
            pl->tier = runs[s].tier_of[p];
            pl->placed_at = node >= 0 ? runs[s].placed_at[p] : 0;
            pl->ran = runs[s].ran[p];
        }
        run_release(&runs[s]);
    }
    af_free(all);
    af_free(tenant_of);
    af_free(policy_tenant);
}

void af_sim_result_release(struct af_sim_result *r)
{
    for (int s = 0; s < AF_SIM__SIDES; s++)
        af_free(r->side[s].cost_series);
    for (size_t t = 0; t < r->n_tenants; t++)
        af_free(r->tenants[t].name);
    af_free(r->tenants);
    for (size_t k = 0; k < r->n_rollouts; k++) {
        af_free(r->rollouts[k].name);
        for (int s = 0; s < AF_SIM__SIDES; s++)
            af_free(r->rollouts[k].achieved[s]);
    }
    af_free(r->rollouts);
    af_free(r->placements[0]);
    af_free(r->placements[1]);
    for (size_t i = 0; i < r->n_launched_names; i++)
        af_free(r->launched_names[i]);
    af_free(r->launched_names);
    memset(r, 0, sizeof(*r));
}
