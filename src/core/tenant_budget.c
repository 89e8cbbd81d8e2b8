/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a pod's tenant does to its placement (accelfit/tenant_budget.h): its
 * classes, spot capacity and a hard budget narrow the plan before filter, as
 * explicit policy; a soft budget only lowers scores after prioritize. The
 * tenant's spend comes from the caller, so the server and the simulator decide
 * with the same code from their own books. Pure: nothing is looked up or kept.
 */
#include "accelfit/tenant_budget.h"

#include <stdio.h>
#include <string.h>
#include "accelfit/banned.h"

/* "nvidia-a100, nvidia-h100" for a class mask. */
static void class_list(uint32_t mask, char *out, size_t n)
{
    size_t used = 0;

    out[0] = '\0';
    for (int c = 0; c < AF_CLASS__COUNT && used < n; c++) {
        int w;
        if (!(mask & (1u << c)))
            continue;
        w = snprintf(out + used, n - used, "%s%s", used ? ", " : "",
                     af_class_name((enum af_class)c));
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* "$31.20/h of $30.00/h spent" and the like: the tenant's standing, for reasons. Over
 * means spend > budget, as /costs' "over" and `accelfit costs` say it; spend equal to the
 * budget is at it. */
static void standing(const struct af_tenant_decision *td, const char *mode, char *out, size_t n)
{
    const struct af_tenant *t = td->t;

    if (td->spend_usd_hr > t->budget_usd_hr)
        snprintf(out, n, "tenant %s over its %s budget: $%.2f/h of $%.2f/h spent", t->name, mode,
                 td->spend_usd_hr, t->budget_usd_hr);
    else if (td->spend_usd_hr == t->budget_usd_hr)
        snprintf(out, n, "tenant %s at its %s budget: $%.2f/h of $%.2f/h spent", t->name, mode,
                 td->spend_usd_hr, t->budget_usd_hr);
    else
        snprintf(out, n, "tenant %s's %s budget: $%.2f/h of $%.2f/h spent", t->name, mode,
                 td->spend_usd_hr, t->budget_usd_hr);
}

bool af_tenant_needs_spend(const struct af_policy *pol, int tenant)
{
    return pol && tenant >= 0 && (size_t)tenant < pol->n_tenants &&
           pol->tenants[tenant].has_budget;
}

void af_tenant_steer(const struct af_policy *pol, const struct af_pod_info *pod,
                     double spend_usd_hr, bool spend_known, struct af_plan *plan,
                     struct af_tenant_decision *td)
{
    const struct af_tenant *t;
    char why[AF_REASON_MAX], list[200];
    size_t used = 0;

    memset(td, 0, sizeof(*td));
    td->tenant = af_tenant_of(pol, pod, &td->how);
    if (td->tenant < 0)
        return;
    t = td->t = &pol->tenants[td->tenant];
    if (spend_known) {
        td->spend_usd_hr = spend_usd_hr;
        td->spend_known = true;
    }
    if (t->classes) {
        class_list(t->classes, list, sizeof(list));
        snprintf(why, sizeof(why), "tenant %.63s may use only %.150s", t->name, list);
        af_plan_restrict(plan, t->classes, why);
        used += (size_t)snprintf(td->effect + used, sizeof(td->effect) - used,
                                 "classes limited to the tenant's; ");
    }
    if (t->spot_only) {
        snprintf(why, sizeof(why), "tenant %.63s runs on spot capacity only", t->name);
        af_plan_require_spot(plan, why);
        used += (size_t)snprintf(td->effect + used, sizeof(td->effect) - used,
                                 "spot nodes only; ");
    }
    if (t->has_budget) {
        double left = t->budget_usd_hr - td->spend_usd_hr;
        char room[64];
        bool hard = t->over_budget == AF_OVER_BUDGET_HARD;
        if (left >= 0)
            snprintf(room, sizeof(room), "$%.2f/h left", left);
        else
            snprintf(room, sizeof(room), "already $%.2f/h over", -left);
        if (hard) {
            standing(td, "hard", why, sizeof(why));
            af_plan_limit_cost(plan, t->premium, left, why);
        }
        td->soft = !hard;
        snprintf(td->effect + used, sizeof(td->effect) - used,
                 "%s budget: premium nodes where the pod's share would pass $%.2f/h %s (%s)",
                 hard ? "hard" : "soft", t->budget_usd_hr, hard ? "are refused" : "score lower",
                 room);
    } else if (used >= 2) {
        td->effect[used - 2] = '\0';   /* no trailing "; " */
    } else {
        snprintf(td->effect, sizeof(td->effect), "no budget, no limits");
    }
}

static bool premium_node(const struct af_tenant *t, const struct af_node_info *n)
{
    return n && n->cls > AF_CLASS_UNKNOWN && n->cls < AF_CLASS__COUNT &&
           (t->premium & (1u << n->cls)) && n->price_known;
}

void af_tenant_rank(const struct af_tenant_decision *td, const struct af_pod_info *pod,
                    const struct af_node_view *views, size_t n, struct af_node_decision *dec)
{
    int with_room[AF_CLASS__COUNT];
    char stand[AF_REASON_MAX];

    if (!td->soft || !td->t || !pod)
        return;
    memset(with_room, 0, sizeof(with_room));
    for (size_t i = 0; i < n; i++)
        if (dec[i].verdict == AF_VERDICT_PASS && dec[i].has_room && views[i].info &&
            views[i].info->cls > AF_CLASS_UNKNOWN && views[i].info->cls < AF_CLASS__COUNT)
            with_room[views[i].info->cls]++;
    standing(td, "soft", stand, sizeof(stand));
    for (size_t i = 0; i < n; i++) {
        const struct af_node_info *info = views[i].info;
        struct af_node_decision *d = &dec[i];
        char was[AF_REASON_MAX];
        double add;
        bool last;

        if (d->verdict != AF_VERDICT_PASS || !premium_node(td->t, info))
            continue;
        add = af_pod_share_usd(&pod->requests, info);
        if (!(td->spend_usd_hr + add > td->t->budget_usd_hr))
            continue;
        last = d->has_room && with_room[info->cls] == 1;
        d->score = last ? 0 : d->score / 2;
        memcpy(was, d->reason, sizeof(was));
        af_reasonf(d->reason, "%.80s; %.100s; this node would add $%.2f/h: %s", was, stand, add,
                   last ? "last of its class with room, left to tenants within budget (score 0)"
                        : "score halved");
    }
}

double af_tenant_committed_usd(const struct af_tenant_decision *td, const struct af_pod_info *pod,
                               const struct af_node_view *views, size_t n,
                               const struct af_node_decision *dec)
{
    double least = -1;

    if (!td->t || !pod || !td->t->has_budget || td->t->over_budget != AF_OVER_BUDGET_HARD)
        return 0;
    for (size_t i = 0; i < n; i++) {
        double share;
        if (dec[i].verdict != AF_VERDICT_PASS || !premium_node(td->t, views[i].info))
            continue;
        share = af_pod_share_usd(&pod->requests, views[i].info);
        if (least < 0 || share < least)
            least = share;
    }
    return least > 0 ? least : 0;
}
