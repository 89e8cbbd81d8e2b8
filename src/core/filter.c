/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Filter and prioritize: the verdict and the 0..10 score of each candidate
 * node for one pod, from the pod's plan (its usable tiers) and the cached
 * allocation of each node.
 *
 * Filter has two hard rules. The node's class must be one of the plan's tiers,
 * within the plan's explicit restriction if it has one (else
 * FailedAndUnresolvable: no preemption makes an A10G node a Trainium node). And tiered fallback: the best tier that has room on some candidate
 * wins; better tiers without room and worse tiers are rejected in FailedNodes,
 * naming the node that made the difference. Prioritize blends the tier, the
 * node's utilization after placement (bin-pack or spread) and the marginal
 * cost of the pod there.
 *
 * Pure: no I/O, no allocation, deterministic. The caller provides out[].
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/decide.h"
#include "accelfit/banned.h"

/* "nvidia-a10g", or "backfill on nvidia-a10g" for an added tier. */
static void tier_label(const struct af_plan *plan, int tier, enum af_class node_cls, char *buf,
                       size_t n)
{
    const struct af_tier *t = &plan->sel.tiers[tier];

    if (t->group && node_cls > AF_CLASS_UNKNOWN)
        snprintf(buf, n, "%s: %s", t->group, af_class_name(node_cls));
    else
        snprintf(buf, n, "%s", af_plan_tier_name(plan, tier));
}

/* "nvidia-a10g, nvidia-l4, any other NVIDIA GPU class" in tier order. */
static void tier_list(const struct af_plan *plan, char *buf, size_t n)
{
    size_t used = 0;

    buf[0] = '\0';
    for (size_t i = 0; i < plan->sel.n_tiers && used < n; i++) {
        int w = snprintf(buf + used, n - used, "%s%s", i ? ", " : "",
                         af_plan_tier_name(plan, (int)i));
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (!plan->sel.n_tiers)
        snprintf(buf, n, "none");
}

/* Why a node the pod's requests or the policy rule out is refused (no tier). The text
 * depends on the node's class alone, and on its family too when *by_family is set. */
static void no_tier(const struct af_policy *pol, const struct af_plan *plan,
                    const struct af_node_info *node, char *out, size_t n, bool *by_family)
{
    enum af_accel_kind kind = node->cls > AF_CLASS_UNKNOWN ? af_class_kind(node->cls) : node->kind;
    char list[160];

    *by_family = false;
    if (plan->requested == AF_ACCEL_NONE && kind != AF_ACCEL_NONE) {
        if (pol && pol->cpu_backfill == AF_CPU_BACKFILL_NEVER)
            snprintf(out, n,
                     "CPU-only pod kept off accelerator node (%s): policy filter.cpu_backfill "
                     "is never",
                     af_class_name(node->cls));
        else if (pol && pol->cpu_backfill == AF_CPU_BACKFILL_ON)
            snprintf(out, n,
                     "CPU-only pod kept off accelerator node (%s): policy filter.cpu_backfill "
                     "is on but rule %s is strict",
                     af_class_name(node->cls), plan->sel.rule ? plan->sel.rule : "?");
        else
            snprintf(out, n,
                     "CPU-only pod kept off accelerator node (%s): it states its workload "
                     "(accelfit.io/workload: %s) and policy filter.cpu_backfill is off; set it "
                     "to true to let CPU work use spare accelerator nodes last",
                     af_class_name(node->cls), af_workload_name(plan->profile.workload));
        return;
    }
    if (kind != plan->requested) {
        snprintf(out, n, "pod requests %s devices; this node (%s) has none",
                 af_accel_kind_name(plan->requested), af_class_name(node->cls));
        return;
    }
    if (plan->requested == AF_ACCEL_NEURON && plan->neuron_gen_stated &&
        af_class_neuron_core_version(node->cls) != plan->neuron_gen) {
        snprintf(out, n,
                 "this node (%s) runs NeuronCore-v%d; the pod's artifact is compiled for "
                 "NeuronCore-v%d (accelfit.io/neuron-core-version) and runs only there",
                 af_class_name(node->cls), af_class_neuron_core_version(node->cls),
                 plan->neuron_gen);
        return;
    }
    if (af_plan_restrict_why(plan, node->cls)) {
        /* explicit policy (af_plan_restrict): a rollout's side, a tenant's classes */
        snprintf(out, n, "%.180s; this node is %s", af_plan_restrict_why(plan, node->cls),
                 af_class_name(node->cls));
        return;
    }
    tier_list(plan, list, sizeof(list));
    *by_family = true;
    snprintf(out, n, "class %s%s%s is not among the tiers of strict rule %s: %s",
             af_class_name(node->cls), node->family ? ", family " : "",
             node->family ? node->family : "", plan->sel.rule ? plan->sel.rule : "?", list);
}


/*
 * Physics: the most memory the pod can have on this node is the devices it requests
 * times the memory of one of the node's devices (the top of the range when only the
 * class is known), times the instances the job may span. A model larger than that
 * cannot run here, whatever else happens. Unknown model size or device memory: no
 * refusal. Returns true (with the arithmetic in `out`) when it does not fit.
 */
/* GiB with one decimal, more when that would print `a` and a different `b` alike. */
static void gib_pair(double a, double b, char *sa, char *sb, size_t n)
{
    for (int prec = 1; prec <= 6; prec++) {
        snprintf(sa, n, "%.*f", prec, a);
        snprintf(sb, n, "%.*f", prec, b);
        if (strcmp(sa, sb) || a == b)
            return;
    }
}

/*
 * How many of the node's devices (or NeuronCores) of `per` GiB each the model would need on
 * each instance, into `out` ("; it would need 2 of this node's 8 devices"); false (and ""
 * in `out`) when that is not a count a pod can request (host memory, MIG slices).
 */
static bool devices_needed(const struct af_plan *plan, const struct af_pod_info *pod,
                           const struct af_node_info *node, double per, char *out, size_t n)
{
    static const enum af_res devs[] = {AF_RES_GPU, AF_RES_NEURON, AF_RES_NEURONDEVICE,
                                       AF_RES_AMD_GPU};
    bool cores = !(plan->devices > 0);
    int64_t have = 0;
    double want;

    out[0] = '\0';
    if (plan->requested == AF_ACCEL_NONE || pod->requests.v[AF_RES_MIG] > 0 || !(per > 0))
        return false;
    if (cores)
        have = node->allocatable.v[AF_RES_NEURONCORE];
    else
        for (size_t i = 0; i < AF_ARRAY_SIZE(devs); i++)
            if (node->allocatable.v[devs[i]] > have)
                have = node->allocatable.v[devs[i]];
    want = ceil(plan->need_gib / plan->instances / per - 1e-9);
    if (!(want >= 1) || want > 1e6)
        return false;
    if (have > 0 && want <= (double)have)
        snprintf(out, n, "; it would need %.0f of this node's %lld %s", want, (long long)have,
                 cores ? "NeuronCores" : "devices");
    else if (have > 0)
        snprintf(out, n, "; it would need %.0f %s, more than this node's %lld", want,
                 cores ? "NeuronCores" : "devices", (long long)have);
    else
        snprintf(out, n, "; it would need %.0f %s", want, cores ? "NeuronCores" : "devices");
    return true;
}

static bool does_not_fit(const struct af_plan *plan, const struct af_pod_info *pod,
                         const struct af_node_info *node, char *out, size_t n)
{
    const double gib = 1024.0 * 1024.0 * 1024.0;
    char params[24], what[96], need[24], got[24], more[96] = "";
    double per, units, cap;

    if (!(plan->need_gib > 0))
        return false;
    if (plan->requested == AF_ACCEL_NONE) {
        /* CPU inference and backfill: host memory, the node's allocatable at most. */
        char alloc[32];
        per = (double)node->allocatable.v[AF_RES_MEMORY] / gib;
        units = 1;
        af_res_format(AF_RES_MEMORY, node->allocatable.v[AF_RES_MEMORY], alloc, sizeof(alloc));
        snprintf(what, sizeof(what), "host memory (%s allocatable)", alloc);
    } else if (pod->requests.v[AF_RES_MIG] > 0 && pod->mig.gb > 0) {
        per = (double)pod->mig.gb * 1e9 / gib;
        units = (double)pod->requests.v[AF_RES_MIG];
        snprintf(what, sizeof(what), "%.0f x MIG %ug.%ugb slice (%.1f GiB each)", units,
                 pod->mig.g, pod->mig.gb, per);
    } else if (node->dev_mem_gib_hi > 0 && plan->devices > 0) {
        per = node->dev_mem_gib_hi;
        units = (double)plan->devices;
        snprintf(what, sizeof(what), "%.0f x %s device (%.1f GiB each, %s)", units,
                 af_class_name(node->cls), per,
                 node->dev_mem_source ? node->dev_mem_source : "catalog");
    } else if (node->dev_mem_gib_hi > 0 && plan->neuron_cores > 0 &&
               af_class_neuron_cores_per_device(node->cls) > 0) {
        per = node->dev_mem_gib_hi / af_class_neuron_cores_per_device(node->cls);
        units = (double)plan->neuron_cores;
        snprintf(what, sizeof(what), "%.0f x NeuronCore of %s (%.1f GiB each)", units,
                 af_class_name(node->cls), per);
    } else {
        return false;
    }
    cap = per * units * plan->instances;
    if (plan->need_gib <= cap)
        return false;
    af_format_count(plan->profile.model_params, params, sizeof(params));
    gib_pair(plan->need_gib, cap, need, got, sizeof(need));
    if (devices_needed(plan, pod, node, per, more, sizeof(more)) && plan->instances > 1)
        return snprintf(out, n,
                 "model does not fit: %s %s needs %s GiB; the pod gets %s here, %.1f GiB, "
                 "x %d instances = %s GiB%s",
                 params, af_workload_name(plan->profile.workload), need, what,
                 per * units, plan->instances, got, more) >= 0;
    if (more[0])
        return snprintf(out, n, "model does not fit: %s %s needs %s GiB; the pod gets %s here, "
                                "%s GiB%s",
                        params, af_workload_name(plan->profile.workload), need, what, got,
                        more) >= 0;
    /* (a reason longer than `out` is cut short; the snprintf value only says it did) */
    if (plan->instances > 1)
        return snprintf(out, n,
                 "model does not fit: %s %s needs %s GiB; the pod gets %s here, %.1f GiB, "
                 "x %d instances = %s GiB",
                 params, af_workload_name(plan->profile.workload), need, what,
                 per * units, plan->instances, got) >= 0;
    return snprintf(out, n, "model does not fit: %s %s needs %s GiB; the pod gets %s here, "
                            "%s GiB",
                    params, af_workload_name(plan->profile.workload), need, what, got) >= 0;
}

bool af_plan_model_fits(const struct af_plan *plan, const struct af_pod_info *pod,
                        const struct af_node_info *node)
{
    char why[AF_REASON_MAX];

    return !does_not_fit(plan, pod, node, why, sizeof(why));
}

/*
 * Explicit limits the caller set on the plan (af_plan_require_spot, af_plan_limit_cost):
 * an on-demand node when only spot may be used; a priced node of a limited class where
 * the pod's share of the price is more than the limit. Returns true with the reason.
 */
static bool over_limits(const struct af_plan *plan, const struct af_pod_info *pod,
                        const struct af_node_info *node, char *out, size_t n)
{
    double add;

    if (plan->spot_only && !node->spot) {
        snprintf(out, n,
                 node->capacity_known
                     ? "%.180s; this node (%s) is on-demand"
                     : "%.180s; this node (%s) has no capacity-type label "
                       "(karpenter.sh/capacity-type, eks.amazonaws.com/capacityType) saying spot",
                 plan->spot_why,
                 af_class_name(node->cls));
        return true;
    }
    if (node->cls <= AF_CLASS_UNKNOWN || node->cls >= AF_CLASS__COUNT ||
        !(plan->limit_classes & (1u << node->cls)) || !node->price_known)
        return false;
    add = af_pod_share_usd(&pod->requests, node);
    if (!(add > plan->limit_usd_hr))
        return false;
    snprintf(out, n, "%.170s; %s would add $%.2f/h", plan->limit_why,
             node->instance_type ? node->instance_type : af_class_name(node->cls), add);
    return true;
}

static bool fits_pods(const struct af_node_view *v)
{
    int64_t cap = v->info->allocatable.v[AF_RES_PODS];
    return cap <= 0 || v->npods < cap;
}

/* The node advertises the MIG profile the pod requests, with enough slices. */
static bool mig_fits(const struct af_pod_info *pod, const struct af_node_info *node, bool *offered)
{
    *offered = true;
    if (pod->requests.v[AF_RES_MIG] <= 0)
        return true;
    for (int i = 0; i < node->n_mig; i++)
        if (node->mig[i].g == pod->mig.g && node->mig[i].gb == pod->mig.gb)
            return node->mig_count[i] >= pod->requests.v[AF_RES_MIG];
    *offered = false;
    return false;
}

/*
 * A request larger than the node's whole allocatable (a MIG node asked for whole GPUs,
 * 8 GPUs asked of a 1-GPU node): no eviction makes room, so it is not a question of room.
 * Returns the first such resource, -1 when there is none.
 */
static int exceeds_node(const struct af_pod_info *pod, const struct af_node_info *node)
{
    for (int r = 0; r < AF_RES__COUNT; r++)
        if (r != AF_RES_PODS && r != AF_RES_MIG && pod->requests.v[r] > node->allocatable.v[r])
            return r;
    return -1;
}

static void exceeds_reason(const struct af_pod_info *pod, const struct af_node_info *node,
                           enum af_res r, char *out, size_t n)
{
    char want[32], have[32];

    af_res_format(r, pod->requests.v[r], want, sizeof(want));
    af_res_format(r, node->allocatable.v[r], have, sizeof(have));
    snprintf(out, n, "the pod requests %s %s; this node (%s) has %s allocatable in all", want,
             af_res_name(r), af_class_name(node->cls), have);
}

static bool has_room(const struct af_pod_info *pod, const struct af_node_view *v)
{
    bool offered;

    return !v->info->unschedulable &&
           af_res_fits(&pod->requests, &v->info->allocatable, &v->used, NULL) && fits_pods(v) &&
           mig_fits(pod, v->info, &offered);
}

/* Why a node has no room: a resource (enum af_res), or one of these. */
enum { ROOM_CORDONED = AF_RES__COUNT, ROOM_PODS, ROOM_MIG };

static int room_cause(const struct af_pod_info *pod, const struct af_node_view *v)
{
    enum af_res r = AF_RES_CPU;

    if (v->info->unschedulable)
        return ROOM_CORDONED;
    if (!af_res_fits(&pod->requests, &v->info->allocatable, &v->used, &r))
        return (int)r;
    if (!fits_pods(v))
        return ROOM_PODS;
    return ROOM_MIG;
}

/*
 * Why the pod does not fit on a node it could otherwise use. `tier` set (brief): the
 * cause, what the pod requests and the node's tier, the same for every node of that tier
 * and class; NULL: with the node's own amounts.
 */
static void no_room(const struct af_pod_info *pod, const struct af_node_view *v, int cause,
                    const char *tier, char *out, size_t n)
{
    if (cause == ROOM_CORDONED) {
        snprintf(out, n, "node is cordoned (spec.unschedulable)");
    } else if (cause == ROOM_PODS) {
        if (tier)
            snprintf(out, n, "no room: the node has as many pods as it allows; %s", tier);
        else
            snprintf(out, n, "no room: %d pods already, %lld allocatable", v->npods,
                     (long long)v->info->allocatable.v[AF_RES_PODS]);
    } else if (cause == ROOM_MIG) {
        snprintf(out, n, "no room: fewer than %lld MIG %ug.%ugb slices on the node",
                 (long long)pod->requests.v[AF_RES_MIG], pod->mig.g, pod->mig.gb);
    } else {
        enum af_res r = (enum af_res)cause;
        int64_t free_ = v->used.v[r] < 0 || v->used.v[r] > v->info->allocatable.v[r]
                            ? 0
                            : v->info->allocatable.v[r] - v->used.v[r];
        char want[32], have[32], total[32];
        af_res_format(r, pod->requests.v[r], want, sizeof(want));
        if (tier) {
            snprintf(out, n, "no room for %s: the pod requests %s; %s", af_res_name(r), want,
                     tier);
            return;
        }
        af_res_format(r, free_ < 0 ? 0 : free_, have, sizeof(have));
        af_res_format(r, v->info->allocatable.v[r], total, sizeof(total));
        snprintf(out, n, "no room for %s: the pod requests %s, %s free of %s allocatable",
                 af_res_name(r), want, have, total);
    }
}

/*
 * Most reasons depend only on the node's class (and, for a passing node, whether it has
 * room), not on the node: with hundreds of candidates of a few classes they are written
 * once per class and copied. A memo lives on the stack of one af_filter call; the slot
 * past the last class stands for nodes whose class is unknown.
 */
#define MEMO_SLOTS (AF_CLASS__COUNT + 1)

struct reason_memo {
    bool have[MEMO_SLOTS];
    int key[MEMO_SLOTS];            /* what else the text depends on: a tier, a cause */
    int64_t amount[MEMO_SLOTS];     /* and an amount of the node's */
    char text[MEMO_SLOTS][AF_REASON_MAX];
};

static int memo_slot(const struct af_node_info *n)
{
    return n->cls > AF_CLASS_UNKNOWN && n->cls < AF_CLASS__COUNT ? (int)n->cls : AF_CLASS__COUNT;
}

static void memo_copy(char *dst, const char *src)
{
    memcpy(dst, src, strlen(src) + 1);
}

/*
 * af_filter's verdicts, with the reasons people read when `reasons` is set. Prioritize
 * needs only verdicts and tiers: without reasons it formats nothing per node (the
 * reasons of nodes without room, one snprintf and three amounts each, were a third of a
 * filter-and-prioritize cycle at 500 candidates).
 */
bool af_plan_block_ends(const struct af_policy *pol, const struct af_plan *plan,
                        const struct af_pod_info *pod, const struct af_node_info *node,
                        double *left_s)
{
    double margin = pol ? pol->block_end_margin_s : 1800;

    if (plan->now <= 0 || !node || node->reservation_end <= 0)
        return false;
    *left_s = node->reservation_end - plan->now;
    return *left_s < margin + (pod ? pod->expected_s : 0);
}

/* "1h50m" for people. */
static void hm(double s, char *buf, size_t len)
{
    if (s <= 0)
        snprintf(buf, len, "0m");
    else if (s < 3600)
        snprintf(buf, len, "%dm", (int)(s / 60));
    else
        snprintf(buf, len, "%dh%02dm", (int)(s / 3600), (int)(s / 60) % 60);
}

/* Appends why a passing node near its reservation's end ranks last. */
static void block_note(const struct af_policy *pol, const struct af_plan *plan,
                       const struct af_pod_info *pod, const struct af_node_info *node, char *buf,
                       size_t len)
{
    double left;
    char l[24], r[24], m[24];
    size_t used = strlen(buf);

    if (!af_plan_block_ends(pol, plan, pod, node, &left) || used + 1 >= len)
        return;
    hm(left, l, sizeof(l));
    hm(pod->expected_s, r, sizeof(r));
    hm(pol ? pol->block_end_margin_s : 1800, m, sizeof(m));
    if (pod->expected_s > 0)
        snprintf(buf + used, len - used,
                 "; %s%s%s %s in %s; the pod runs up to %s (%s), with %s to drain: ranked "
                 "below nodes where it can finish",
                 node->prepaid == AF_PREPAID_BLOCK ? "capacity block" : "capacity reservation",
                 node->reservation_id ? " " : "", node->reservation_id ? node->reservation_id : "",
                 left > 0 ? "ends" : "ended",
                 l, r, pod->expected_source ? pod->expected_source : "", m);
    else
        snprintf(buf + used, len - used,
                 "; %s%s%s %s in %s, within the last %s before its end: ranked below nodes "
                 "that stay",
                 node->prepaid == AF_PREPAID_BLOCK ? "capacity block" : "capacity reservation",
                 node->reservation_id ? " " : "", node->reservation_id ? node->reservation_id : "",
                 left > 0 ? "ends" : "ended",
                 l, m);
}

static void filter_nodes(const struct af_policy *pol, const struct af_plan *plan,
                         const struct af_pod_info *pod, const struct af_node_view *nodes,
                         const char *const *names, size_t n, struct af_node_decision *out,
                         struct af_filter_summary *sum, bool reasons)
{
    int best = -1, best_any = -1;
    size_t best_node = 0;
    struct reason_memo pass[2], worse, refused, room, over;
    const char *refused_family[MEMO_SLOTS];
    bool refused_by_family[MEMO_SLOTS];

    memset(pass[0].have, 0, sizeof(pass[0].have));
    memset(pass[1].have, 0, sizeof(pass[1].have));
    memset(worse.have, 0, sizeof(worse.have));
    memset(refused.have, 0, sizeof(refused.have));
    memset(room.have, 0, sizeof(room.have));
    memset(over.have, 0, sizeof(over.have));

    if (sum)
        memset(sum, 0, sizeof(*sum));
    /* Pass 1: what is known (requests, physics, explicit policy), then room. */
    for (size_t i = 0; i < n; i++) {
        const struct af_node_info *info = nodes[i].info;
        struct af_node_decision *d = &out[i];
        bool offered;
        int r;

        af_node_decision_clear(d);
        d->name = names ? names[i] : info ? info->name : "";
        d->tier = -1;
        if (!info) {
            d->verdict = AF_VERDICT_FAILED;
            snprintf(d->reason, sizeof(d->reason), "node not in accelfit's cache yet");
            continue;
        }
        d->tier = af_plan_node_tier(plan, info);
        if (d->tier < 0) {
            /* The reason depends on the node's class, and for some texts its family: written
             * once per class, or per class and family (nodes of unknown class differ in
             * kind: each is written). */
            int slot = memo_slot(info);
            d->verdict = AF_VERDICT_UNRESOLVABLE;
            if (!reasons)
                continue;
            if (slot == AF_CLASS__COUNT || !refused.have[slot] ||
                (refused_by_family[slot] &&
                 strcmp(refused_family[slot] ? refused_family[slot] : "",
                        info->family ? info->family : ""))) {
                no_tier(pol, plan, info, refused.text[slot], sizeof(refused.text[slot]),
                        &refused_by_family[slot]);
                refused.have[slot] = true;
                refused_family[slot] = info->family;
            }
            memo_copy(d->reason, refused.text[slot]);
            continue;
        }
        if ((r = exceeds_node(pod, info)) >= 0) {
            /* The text depends on the class, the resource and the node's allocatable of it:
             * nodes of one instance type share it. */
            int slot = memo_slot(info);
            d->verdict = AF_VERDICT_UNRESOLVABLE;
            d->tier = -1;
            if (!reasons)
                continue;
            if (!over.have[slot] || over.key[slot] != r ||
                over.amount[slot] != info->allocatable.v[r]) {
                exceeds_reason(pod, info, (enum af_res)r, over.text[slot],
                               sizeof(over.text[slot]));
                over.have[slot] = true;
                over.key[slot] = r;
                over.amount[slot] = info->allocatable.v[r];
            }
            memo_copy(d->reason, over.text[slot]);
            continue;
        }
        if (!mig_fits(pod, info, &offered) && !offered) {
            d->verdict = AF_VERDICT_UNRESOLVABLE;
            d->tier = -1;
            snprintf(d->reason, sizeof(d->reason),
                     "the pod requests MIG %ug.%ugb slices; this node offers none of that profile",
                     pod->mig.g, pod->mig.gb);
            continue;
        }
        if (does_not_fit(plan, pod, info, d->reason, sizeof(d->reason)) ||
            over_limits(plan, pod, info, d->reason, sizeof(d->reason))) {
            d->verdict = AF_VERDICT_UNRESOLVABLE;
            d->tier = -1;
            continue;
        }
        d->has_room = has_room(pod, &nodes[i]);
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

    /*
     * Pass 2. A pod that states its workload gets tiered fallback: the best tier with
     * room wins, the others wait. A pod that does not has only a guessed rule, and a
     * guess ranks (prioritize) but never refuses: every node it can use passes.
     */
    for (size_t i = 0; i < n; i++) {
        struct af_node_decision *d = &out[i];
        int slot;
        char mine[64], theirs[64];

        if (d->tier < 0)
            continue;
        slot = memo_slot(nodes[i].info);
        if (d->tier == best || !plan->stated) {
            struct reason_memo *m = &pass[d->has_room ? 1 : 0];
            d->verdict = AF_VERDICT_PASS;
            if (!reasons)
                continue;
            if (nodes[i].info->unschedulable) {   /* not the memo's: said per node */
                tier_label(plan, d->tier, nodes[i].info->cls, mine, sizeof(mine));
                snprintf(d->reason, sizeof(d->reason),
                         "tier %d (%s): rule %s%s; the node is cordoned (spec.unschedulable), "
                         "the scheduler's view decides",
                         d->tier + 1, mine, plan->sel.rule ? plan->sel.rule : "none",
                         plan->stated ? "" : ", inferred: ranks, does not filter");
                continue;
            }
            /* The text depends on the class, the tier and room: once per class and tier. */
            if (!m->have[slot] || m->key[slot] != d->tier) {
                tier_label(plan, d->tier, nodes[i].info->cls, mine, sizeof(mine));
                snprintf(m->text[slot], AF_REASON_MAX, "tier %d (%s): rule %s%s%s", d->tier + 1,
                         mine, plan->sel.rule ? plan->sel.rule : "none",
                         plan->stated ? "" : ", inferred: ranks, does not filter",
                         d->has_room ? "" : "; the cache shows no room, the scheduler's view "
                                            "decides");
                m->have[slot] = true;
                m->key[slot] = d->tier;
            }
            memo_copy(d->reason, m->text[slot]);
            block_note(pol, plan, pod, nodes[i].info, d->reason, sizeof(d->reason));
        } else if (d->tier < best) {
            int cause, key;

            d->verdict = AF_VERDICT_FAILED;
            if (!reasons)
                continue;
            cause = room_cause(pod, &nodes[i]);
            if (!plan->brief_reasons) {
                no_room(pod, &nodes[i], cause, NULL, d->reason, sizeof(d->reason));
                continue;
            }
            /* Brief: the same text for every node of this class and tier, per cause. */
            key = d->tier * (ROOM_MIG + 1) + cause;
            if (!room.have[slot] || room.key[slot] != key) {
                char label[96];
                tier_label(plan, d->tier, nodes[i].info->cls, mine, sizeof(mine));
                snprintf(label, sizeof(label), "tier %d (%s)", d->tier + 1, mine);
                no_room(pod, &nodes[i], cause, label, room.text[slot], sizeof(room.text[slot]));
                room.have[slot] = true;
                room.key[slot] = key;
            }
            memo_copy(d->reason, room.text[slot]);
        } else {
            d->verdict = AF_VERDICT_FAILED;
            if (!reasons)
                continue;
            if (!worse.have[slot]) {
                char *r = worse.text[slot];
                tier_label(plan, d->tier, nodes[i].info->cls, mine, sizeof(mine));
                tier_label(plan, best, nodes[best_node].info->cls, theirs, sizeof(theirs));
                if (out[best_node].has_room)
                    af_reasonf(r,
                             "tier %d (%.48s) has room on %.80s; this node is tier %d (%.48s)",
                             best + 1, theirs, out[best_node].name, d->tier + 1, mine);
                else
                    af_reasonf(r,
                             "accelfit's cache shows no candidate with room, so it kept the "
                             "best tier present, tier %d (%.48s), and left the choice among its "
                             "nodes to kube-scheduler; this node is tier %d (%.48s)",
                             best + 1, theirs, d->tier + 1, mine);
                worse.have[slot] = true;
            }
            memo_copy(d->reason, worse.text[slot]);
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
    /* Only a pod that states its workload falls back: for the others tiers only rank. */
    sum->fallback = best > 0 && plan->stated;
}

void af_filter(const struct af_policy *pol, const struct af_plan *plan,
               const struct af_pod_info *pod, const struct af_node_view *nodes,
               const char *const *names, size_t n, struct af_node_decision *out,
               struct af_filter_summary *sum)
{
    filter_nodes(pol, plan, pod, nodes, names, n, out, sum, true);
}

/* ---- prioritize ----------------------------------------------------------------------------- */

/* The resource whose allocation the score looks at. */
static enum af_res main_resource(const struct af_plan *plan, const struct af_pod_info *pod)
{
    static const enum af_res gpus[] = {AF_RES_GPU, AF_RES_GPU_SHARED, AF_RES_MIG};

    if (plan->requested == AF_ACCEL_GPU) {
        for (size_t i = 0; i < AF_ARRAY_SIZE(gpus); i++)
            if (pod->requests.v[gpus[i]] > 0)
                return gpus[i];
        return AF_RES_GPU;
    }
    if (plan->requested == AF_ACCEL_AMD)
        return AF_RES_AMD_GPU;
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

double af_pod_share_usd(const struct af_resources *requests, const struct af_node_info *node)
{
    double share = 0;

    if (!node->price_known)
        return 0;
    for (int r = 0; r < AF_RES__COUNT; r++) {
        double f;
        if (r == AF_RES_PODS || requests->v[r] <= 0)
            continue;
        f = node->allocatable.v[r] > 0
                ? (double)requests->v[r] / (double)node->allocatable.v[r]
                : 1.0;
        if (f > share)
            share = f;
    }
    return node->hourly_usd * clamp01(share);
}

/*
 * The marginal cost of the pod on this node: its share of the price, except that the
 * first workload pod on a node pays the whole node (it is what keeps the node up);
 * DaemonSet and mirror pods run on every node and do not count.
 */
static bool marginal(const struct af_pod_info *pod, const struct af_node_view *v, double *usd)
{
    if (!v->info->price_known)
        return false;
    *usd = v->npods - v->nsystem <= 0 ? v->info->hourly_usd
                                       : af_pod_share_usd(&pod->requests, v->info);
    return true;
}

/*
 * Within tier t, raises the passing nodes of level >= `upper` above those below it: the
 * upper ones shift together, so that the lowest lands just above the best of the rest and
 * their own order stays; where 10 is too low a ceiling for that, the others above the
 * lowest upper one come down to just below it.
 */
static void raise_above(struct af_node_decision *out, size_t n, int t, int upper)
{
    int lo = 11, hi = -1, best = -1, to;

    for (size_t i = 0; i < n; i++) {
        if (out[i].verdict != AF_VERDICT_PASS || out[i].tier != t)
            continue;
        if (out[i].prepaid_level >= upper) {
            lo = out[i].score < lo ? out[i].score : lo;
            hi = out[i].score > hi ? out[i].score : hi;
        } else if (out[i].score > best) {
            best = out[i].score;
        }
    }
    if (hi < 0 || best < 0 || lo > best)
        return;
    to = best + 1;
    if (to + (hi - lo) > 10)
        to = 10 - (hi - lo);
    for (size_t i = 0; i < n; i++) {
        if (out[i].verdict != AF_VERDICT_PASS || out[i].tier != t)
            continue;
        if (out[i].prepaid_level >= upper)
            out[i].score += to - lo;
        else if (out[i].score >= to)
            out[i].score = to > 0 ? to - 1 : 0;
    }
}

/*
 * Prepaid capacity first (docs/pricing.md#how-a-zero-price-ranks): the pod adds nothing on
 * a prepaid node (prices.prepaid: marginal), so within one tier a prepaid node with room
 * ranks above every pay-as-you-go node, whatever their utilization, and one already in use
 * above an empty one (whole prepaid nodes stay whole for the jobs that need them); across
 * tiers the blend decides as for any price (a zero price is the best cost term, never a
 * better tier). prices.keep_prepaid_whole: an empty prepaid node is lifted only for a pod
 * that takes at least that share of its main resource. A node whose reservation ends
 * before the pod could finish is never lifted.
 */
static void prepaid_first(const struct af_policy *pol, const struct af_plan *plan,
                          const struct af_pod_info *pod, const struct af_node_view *nodes,
                          size_t n, struct af_node_decision *out, enum af_res res)
{
    int n_tiers = (int)plan->sel.n_tiers;
    bool any = false;

    if (pol && pol->prepaid != AF_PREPAID_MARGINAL)
        return;
    for (size_t i = 0; i < n; i++) {
        const struct af_node_view *v = &nodes[i];
        double left, alloc, share;
        bool used;

        if (out[i].verdict != AF_VERDICT_PASS || v->info->prepaid == AF_PREPAID_NONE ||
            !out[i].has_room || af_plan_block_ends(pol, plan, pod, v->info, &left))
            continue;
        alloc = (double)v->info->allocatable.v[res];
        share = alloc > 0 ? (double)pod->requests.v[res] / alloc : 1.0;
        used = v->npods - v->nsystem > 0;
        if (!used && pol && share < pol->keep_prepaid_whole)
            continue;
        out[i].prepaid_level = used ? 2 : 1;
        any = true;
    }
    for (int t = 0; any && t < n_tiers; t++) {
        raise_above(out, n, t, 1);
        raise_above(out, n, t, 2);
    }
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

    filter_nodes(pol, plan, pod, nodes, names, n, out, NULL, false);
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
        /* The cheapest *paid* placement sets the scale: a free node scores 1 on its own
         * and must not turn every other node's cost term into 0. */
        if (d->marginal_known && d->marginal_usd_hr > 0 &&
            (cheapest < 0 || d->marginal_usd_hr < cheapest))
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
        else if (d->marginal_usd_hr <= 0 || cheapest <= 0)
            d->s_cost = 1;
        else
            d->s_cost = clamp01(cheapest / d->marginal_usd_hr);
        s = 10.0 * (wt * d->s_tier + wu * d->s_util + wc * d->s_cost) / wsum;
        score = lround(s);
        d->score = score < 0 ? 0 : score > 10 ? 10 : (int)score;
    }
    prepaid_first(pol, plan, pod, nodes, n, out, res);
    /* A CPU-only pod on accelerator nodes (backfill, or not stated): they rank below every
     * other node that passes, whatever their price, so accelerators stay for accelerator
     * work while a CPU node can take the pod. */
    if (plan->backfill) {
        int last = n_tiers - 1, floor_ = 11;
        for (size_t i = 0; i < n; i++)
            if (out[i].verdict == AF_VERDICT_PASS && out[i].tier != last && out[i].score < floor_)
                floor_ = out[i].score;
        for (size_t i = 0; floor_ <= 10 && i < n; i++)
            if (out[i].verdict == AF_VERDICT_PASS && out[i].tier == last &&
                out[i].score >= floor_)
                out[i].score = floor_ > 0 ? floor_ - 1 : 0;
    }
    /* Last: a node whose reservation ends before the pod could finish (or within the
     * drain margin) ranks below every node where it can, whatever else it has for it. */
    {
        int floor_ = 11;
        double left;
        for (size_t i = 0; i < n; i++)
            if (out[i].verdict == AF_VERDICT_PASS &&
                !af_plan_block_ends(pol, plan, pod, nodes[i].info, &left) &&
                out[i].score < floor_)
                floor_ = out[i].score;
        for (size_t i = 0; floor_ <= 10 && i < n; i++)
            if (out[i].verdict == AF_VERDICT_PASS &&
                af_plan_block_ends(pol, plan, pod, nodes[i].info, &left) &&
                out[i].score >= floor_)
                out[i].score = floor_ > 0 ? floor_ - 1 : 0;
    }
}
