/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The decision order (accelfit/decide.h, "the decision order"): the one place the steps of a
 * decision are sequenced. The service's verbs, /explain, the webhook and the simulator call
 * these; what needs their state comes in as hooks. Pure as the rest of the core: the hooks
 * are the callers'.
 */
#include <string.h>

#include "accelfit/decide.h"
#include "accelfit/tenant_budget.h"
#include "accelfit/banned.h"

void af_decide_plan(const struct af_policy *pol, const struct af_catalog *cat,
                    const struct af_pod_info *pod, double now, const struct af_decide_hooks *h,
                    struct af_plan *plan, struct af_tenant_decision *td)
{
    memset(td, 0, sizeof(*td));
    td->tenant = -1;
    if (h && h->plan)                                 /* 1 */
        h->plan(h->ud, pol, cat, pod, plan);
    else
        af_plan_pod(pol, cat, pod, plan);
    plan->now = now;
    if (h && h->rollout)
        h->rollout(h->ud, pod, plan);                 /* 2 */
    if (h && h->tenant)
        h->tenant(h->ud, pod, plan, td);              /* 3 */
}

void af_decide_filter(const struct af_policy *pol, const struct af_plan *plan,
                      const struct af_pod_info *pod, const struct af_node_view *nodes,
                      const char *const *names, size_t n, const struct af_decide_hooks *h,
                      struct af_node_decision *out, struct af_filter_summary *sum)
{
    if (h && h->filter)                               /* 4 */
        h->filter(h->ud, plan, pod, nodes, names, n, out, sum);
    else
        af_filter(pol, plan, pod, nodes, names, n, out, sum);
}

void af_decide_prioritize(const struct af_policy *pol, const struct af_plan *plan,
                          const struct af_pod_info *pod, const struct af_node_view *nodes,
                          const char *const *names, size_t n, const struct af_decide_hooks *h,
                          const struct af_tenant_decision *td, struct af_node_decision *out)
{
    af_prioritize(pol, plan, pod, nodes, names, n, out);   /* 5 */
    if (h && h->score)
        h->score(h->ud, plan, pod, nodes, n, out);
    if (td)
        af_tenant_rank(td, pod, nodes, n, out);             /* 6 */
}
