/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Filter and prioritize: the verdict and the 0..10 score of each candidate
 * node for one pod, from the pod's plan (its usable tiers) and the cached
 * allocation of each node.
 *
 * Filter has two hard rules. The node's class must be one of the plan's tiers
 * (else FailedAndUnresolvable: no preemption makes an A10G node a Trainium
 * node). And tiered fallback: the best tier that has room on some candidate
 * wins; better tiers without room and worse tiers are rejected in FailedNodes,
 * naming the node that made the difference. Prioritize blends the tier, the
 * node's utilization after placement (bin-pack or spread) and the marginal
 * cost of the pod there.
 *
 * Pure: no I/O, no allocation, deterministic. The caller provides out[].
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/decide.h"

/* "nvidia-a10g", or "backfill on nvidia-a10g" for the backfill tier. */
static void tier_label(const struct af_plan *plan, int tier, enum af_class node_cls, char *buf,
                       size_t n)
{
    if (plan->backfill && tier == (int)plan->sel.n_tiers - 1)
        snprintf(buf, n, "backfill on %s", af_class_name(node_cls));
    else
        snprintf(buf, n, "%s", af_class_name(plan->sel.tiers[tier].cls));
}

/* "nvidia-a10g, nvidia-l4, nvidia-t4" in tier order. */
static void tier_list(const struct af_plan *plan, char *buf, size_t n)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < plan->sel.n_tiers && used < n; i++) {
        const char *name = plan->backfill && i == plan->sel.n_tiers - 1
                               ? "any accelerator (backfill)"
                               : af_class_name(plan->sel.tiers[i].cls);
        int w = snprintf(buf + used, n - used, "%s%s", i ? ", " : "", name);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (!plan->sel.n_tiers)
        snprintf(buf, n, "none");
}

static void not_in_tiers(const struct af_policy *pol, const struct af_plan *plan,
                         enum af_class cls, char *out, size_t n)
{
    enum af_accel_kind kind = af_class_kind(cls);
    char list[160];

    if (plan->requested == AF_ACCEL_NONE && kind != AF_ACCEL_NONE) {
        snprintf(out, n, "CPU-only pod kept off accelerator node (%s); policy filter.cpu_backfill "
                         "is %s",
                 af_class_name(cls), pol && pol->cpu_backfill ? "on but this tier is excluded"
                                                              : "off");
        return;
    }
    if (plan->requested == AF_ACCEL_GPU && kind != AF_ACCEL_GPU) {
        snprintf(out, n, "pod requests nvidia.com/gpu; this node (%s) has no NVIDIA GPU",
                 af_class_name(cls));
        return;
    }
    if (plan->requested == AF_ACCEL_NEURON && kind != AF_ACCEL_NEURON) {
        snprintf(out, n, "pod requests Neuron devices; this node (%s) has none",
                 af_class_name(cls));
        return;
    }
    if (plan->requested == AF_ACCEL_NEURON) {
        for (size_t i = 0; i < plan->sel.n_tiers; i++) {
            enum af_class t = plan->sel.tiers[i].cls;
            if (af_class_kind(t) != AF_ACCEL_NEURON)
                continue;
            if (af_class_neuron_core_version(t) != af_class_neuron_core_version(cls)) {
                snprintf(out, n,
                         "this node (%s) runs NeuronCore-v%d; the pod's Neuron tiers run "
                         "NeuronCore-v%d (%s), and an artifact runs only on its own generation",
                         af_class_name(cls), af_class_neuron_core_version(cls),
                         af_class_neuron_core_version(t), af_class_name(t));
                return;
            }
            break;
        }
    }
    tier_list(plan, list, sizeof(list));
    snprintf(out, n, "class %s is not among this pod's tiers: %s (rule %s)", af_class_name(cls),
             list, plan->sel.rule ? plan->sel.rule : "none matched");
}

static bool fits_pods(const struct af_node_view *v)
{
    int64_t cap = v->info->allocatable.v[AF_RES_PODS];
    return cap <= 0 || v->npods < cap;
}

/* Why the pod does not fit on a node it could otherwise use. */
static void no_room(const struct af_pod_info *pod, const struct af_node_view *v, char *out,
                    size_t n)
{
    enum af_res r = AF_RES_CPU;

    if (v->info->unschedulable) {
        snprintf(out, n, "node is cordoned (spec.unschedulable)");
        return;
    }
    if (!af_res_fits(&pod->requests, &v->info->allocatable, &v->used, &r)) {
        int64_t free_ = v->info->allocatable.v[r] - v->used.v[r];
        char want[32], have[32], total[32];
        af_res_format(r, pod->requests.v[r], want, sizeof(want));
        af_res_format(r, free_ < 0 ? 0 : free_, have, sizeof(have));
        af_res_format(r, v->info->allocatable.v[r], total, sizeof(total));
        snprintf(out, n, "no room for %s: the pod requests %s, %s free of %s allocatable",
                 af_res_name(r), want, have, total);
        return;
    }
    snprintf(out, n, "no room: %d pods already, %lld allocatable", v->npods,
             (long long)v->info->allocatable.v[AF_RES_PODS]);
}

/*
 * Most reasons depend only on the node's class (and, for a passing node, whether it has
 * room), not on the node: with hundreds of candidates of a few classes they are written
 * once per class and copied. A memo lives on the stack of one af_filter call.
 */
struct reason_memo {
    bool have[AF_CLASS__COUNT];
    char text[AF_CLASS__COUNT][AF_REASON_MAX];
};

static void memo_copy(char *dst, const char *src)
{
    memcpy(dst, src, strlen(src) + 1);
}

void af_filter(const struct af_policy *pol, const struct af_plan *plan,
               const struct af_pod_info *pod, const struct af_node_view *nodes,
               const char *const *names, size_t n, struct af_node_decision *out,
               struct af_filter_summary *sum)
{
    int best = -1, best_any = -1;
    size_t best_node = 0;
    struct reason_memo not_in, pass[2], worse;

    memset(not_in.have, 0, sizeof(not_in.have));
    memset(pass[0].have, 0, sizeof(pass[0].have));
    memset(pass[1].have, 0, sizeof(pass[1].have));
    memset(worse.have, 0, sizeof(worse.have));

    if (sum)
        memset(sum, 0, sizeof(*sum));
    /* Pass 1: class and room. */
    for (size_t i = 0; i < n; i++) {
        const struct af_node_info *info = nodes[i].info;
        struct af_node_decision *d = &out[i];

        memset(d, 0, sizeof(*d));
        d->name = names ? names[i] : info ? info->name : "";
        d->tier = -1;
        if (!info) {
            d->verdict = AF_VERDICT_FAILED;
            snprintf(d->reason, sizeof(d->reason), "node not in accelfit's cache yet");
            continue;
        }
        if (info->cls <= AF_CLASS_UNKNOWN || info->cls >= AF_CLASS__COUNT) {
            d->verdict = AF_VERDICT_UNRESOLVABLE;
            snprintf(d->reason, sizeof(d->reason),
                     "hardware class unknown (%s): label the node with a catalog "
                     "node.kubernetes.io/instance-type or an accelerator name",
                     info->class_source ? info->class_source : "no labels");
            continue;
        }
        d->tier = plan->tier_of[info->cls];
        if (d->tier < 0) {
            d->verdict = AF_VERDICT_UNRESOLVABLE;
            if (!not_in.have[info->cls]) {
                not_in_tiers(pol, plan, info->cls, not_in.text[info->cls], AF_REASON_MAX);
                not_in.have[info->cls] = true;
            }
            memo_copy(d->reason, not_in.text[info->cls]);
            continue;
        }
        d->has_room = !info->unschedulable &&
                      af_res_fits(&pod->requests, &info->allocatable, &nodes[i].used, NULL) &&
                      fits_pods(&nodes[i]);
        if (d->has_room && (best < 0 || d->tier < best)) {
            best = d->tier;
            best_node = i;
        }
        if (best_any < 0 || d->tier < best_any)
            best_any = d->tier;
    }
    if (best < 0) {
        best = best_any;
        for (size_t i = 0; i < n; i++)
            if (out[i].tier == best && best >= 0) {
                best_node = i;
                break;
            }
    }

    /* Pass 2: tiered fallback. */
    /* The tier is a function of the class (plan->tier_of), so the class keys the memos. */
    for (size_t i = 0; i < n; i++) {
        struct af_node_decision *d = &out[i];
        enum af_class cls;
        char mine[64], theirs[64];

        if (d->tier < 0)
            continue;
        cls = nodes[i].info->cls;
        if (d->tier == best) {
            struct reason_memo *m = &pass[d->has_room ? 1 : 0];
            d->verdict = AF_VERDICT_PASS;
            if (!m->have[cls]) {
                tier_label(plan, d->tier, cls, mine, sizeof(mine));
                snprintf(m->text[cls], AF_REASON_MAX, "tier %d (%s): rule %s%s", d->tier + 1,
                         mine, plan->sel.rule ? plan->sel.rule : "fallback",
                         d->has_room ? ""
                                     : "; the cache shows no room, the scheduler's view decides");
                m->have[cls] = true;
            }
            memo_copy(d->reason, m->text[cls]);
        } else if (d->tier < best) {
            d->verdict = AF_VERDICT_FAILED;
            no_room(pod, &nodes[i], d->reason, sizeof(d->reason));
        } else {
            d->verdict = AF_VERDICT_FAILED;
            if (!worse.have[cls]) {
                char *r = worse.text[cls];
                tier_label(plan, d->tier, cls, mine, sizeof(mine));
                tier_label(plan, best, nodes[best_node].info->cls, theirs, sizeof(theirs));
                if (out[best_node].has_room)
                    snprintf(r, AF_REASON_MAX,
                             "tier %d (%s) has room on %s; this node is tier %d (%s)", best + 1,
                             theirs, out[best_node].name, d->tier + 1, mine);
                else
                    snprintf(r, AF_REASON_MAX,
                             "tier %d (%s) comes first and no candidate has room; this node is "
                             "tier %d (%s)",
                             best + 1, theirs, d->tier + 1, mine);
                worse.have[cls] = true;
            }
            memo_copy(d->reason, worse.text[cls]);
        }
    }
    if (!sum)
        return;
    for (size_t i = 0; i < n; i++) {
        if (out[i].verdict == AF_VERDICT_PASS)
            sum->passed++;
        else if (out[i].verdict == AF_VERDICT_UNRESOLVABLE)
            sum->unresolvable++;
        else
            sum->failed++;
    }
    sum->best_tier = best;
    sum->fallback = best > 0;
}

/* ---- prioritize ----------------------------------------------------------------------------- */

/* The resource whose allocation the score looks at. */
static enum af_res main_resource(const struct af_plan *plan, const struct af_pod_info *pod)
{
    if (plan->requested == AF_ACCEL_GPU)
        return AF_RES_GPU;
    if (plan->requested == AF_ACCEL_NEURON) {
        if (pod->requests.v[AF_RES_NEURON] > 0)
            return AF_RES_NEURON;
        if (pod->requests.v[AF_RES_NEURONDEVICE] > 0)
            return AF_RES_NEURONDEVICE;
        return AF_RES_NEURONCORE;
    }
    return AF_RES_CPU;
}

static double clamp01(double v)
{
    return v < 0 ? 0 : v > 1 ? 1 : v;
}

/* The pod's share of the node's price: the largest fraction it takes of any resource. */
static bool marginal(const struct af_pod_info *pod, const struct af_node_view *v, double *usd)
{
    double share = 0;

    if (!v->info->price_known)
        return false;
    if (v->npods == 0) {
        *usd = v->info->hourly_usd;
        return true;
    }
    for (int r = 0; r < AF_RES__COUNT; r++) {
        double f;
        if (r == AF_RES_PODS || pod->requests.v[r] <= 0)
            continue;
        f = v->info->allocatable.v[r] > 0
                ? (double)pod->requests.v[r] / (double)v->info->allocatable.v[r]
                : 1.0;
        if (f > share)
            share = f;
    }
    *usd = v->info->hourly_usd * clamp01(share);
    return true;
}

void af_prioritize(const struct af_policy *pol, const struct af_plan *plan,
                   const struct af_pod_info *pod, const struct af_node_view *nodes,
                   const char *const *names, size_t n, struct af_node_decision *out)
{
    enum af_res res = main_resource(plan, pod);
    double wt = pol ? pol->w_tier : 1, wu = pol ? pol->w_util : 1, wc = pol ? pol->w_cost : 1;
    bool spread = pol && pol->strategy == AF_STRATEGY_SPREAD;
    double cheapest = -1, wsum;
    int n_tiers = (int)plan->sel.n_tiers;

    if (!(wt >= 0) || !(wu >= 0) || !(wc >= 0) || !(wt + wu + wc > 0))
        wt = wu = wc = 1;
    wsum = wt + wu + wc;

    af_filter(pol, plan, pod, nodes, names, n, out, NULL);
    for (size_t i = 0; i < n; i++) {
        struct af_node_decision *d = &out[i];
        const struct af_node_view *v = &nodes[i];
        double alloc;

        if (d->verdict != AF_VERDICT_PASS)
            continue;
        d->s_tier = n_tiers > 0 ? (double)(n_tiers - d->tier) / n_tiers : 0;
        alloc = (double)v->info->allocatable.v[res];
        d->util_after = alloc > 0 ? clamp01(((double)v->used.v[res] + (double)pod->requests.v[res]) /
                                            alloc)
                                  : 1.0;
        d->s_util = spread ? 1.0 - d->util_after : d->util_after;
        /* A node the cache shows as full only passes because the scheduler's view decides;
         * bin-packing must not rank it above a node that has room. */
        if (!d->has_room)
            d->s_util = 0;
        d->marginal_known = marginal(pod, v, &d->marginal_usd_hr);
        if (d->marginal_known && (cheapest < 0 || d->marginal_usd_hr < cheapest))
            cheapest = d->marginal_usd_hr;
    }
    for (size_t i = 0; i < n; i++) {
        struct af_node_decision *d = &out[i];
        double s;
        long score;

        if (d->verdict != AF_VERDICT_PASS) {
            d->score = 0;
            continue;
        }
        if (!d->marginal_known)
            d->s_cost = 0;
        else if (d->marginal_usd_hr <= 0)
            d->s_cost = 1;
        else
            d->s_cost = clamp01(cheapest / d->marginal_usd_hr);
        s = 10.0 * (wt * d->s_tier + wu * d->s_util + wc * d->s_cost) / wsum;
        score = lround(s);
        d->score = score < 0 ? 0 : score > 10 ? 10 : (int)score;
    }
}
