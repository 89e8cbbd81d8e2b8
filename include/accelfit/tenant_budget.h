/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tenant_budget: what a pod's tenant does to its placement, decided purely
 * (src/core/tenant_budget.c). The server (src/service/costs.c) and `accelfit
 * simulate` (src/sim/sim.c) call the same two functions; each supplies the
 * tenant's spend its own way (the server from the costs of its snapshot, the
 * simulator from its running books), so a budget means one thing in both.
 *
 * Before filter, af_tenant_steer narrows the plan as explicit policy:
 *   classes          af_plan_restrict to the tenant's classes
 *   capacity: spot   af_plan_require_spot
 *   hard budget      af_plan_limit_cost: a premium node where the pod's share of the
 *                    price would take the tenant's spend past its budget is refused
 *                    (FailedAndUnresolvable, naming the tenant, budget and spend)
 * After prioritize, af_tenant_rank applies a soft budget: a passing premium node
 * that would take spend past the budget scores half, and 0 when it is the last
 * candidate of its class with room (left to tenants within budget).
 *
 * A pod "would pass" the budget on a node when spend + af_pod_share_usd(pod, node)
 * is more than the budget. Premium nodes are those of the tenant's premium classes
 * whose price is known. No I/O, no locks, no clock, no logging.
 */
#ifndef AF_TENANT_BUDGET_H
#define AF_TENANT_BUDGET_H

#include "accelfit/config.h"
#include "accelfit/decide.h"
#include "accelfit/tenant.h"

struct af_tenant_decision {
    int tenant;                        /* index into pol->tenants; -1: no tenants */
    const struct af_tenant *t;         /* borrowed from the policy; NULL when tenant < 0 */
    enum af_tenant_match how;
    double spend_usd_hr;               /* the tenant's spend as given */
    bool spend_known;                  /* spend_usd_hr was given */
    bool soft;                         /* a soft budget: af_tenant_rank lowers scores */
    char effect[AF_REASON_MAX];        /* what the tenant's policy does to this pod */
};

/*
 * Whether af_tenant_steer needs the spend of tenant `tenant` (an index from af_tenant_of,
 * -1 for none) to decide: true when the tenant has a budget. Lets a caller skip the
 * lookup for every other pod. Cannot fail.
 */
bool af_tenant_needs_spend(const struct af_policy *pol, int tenant);

/*
 * Finds the pod's tenant (af_tenant_of) and narrows `plan` as its policy says (see
 * above), with `spend_usd_hr` the tenant's current spend when `spend_known` (a budget
 * with an unknown spend counts the spend as 0). `td` is always filled; nothing is
 * kept. Cannot fail.
 */
void af_tenant_steer(const struct af_policy *pol, const struct af_pod_info *pod,
                     double spend_usd_hr, bool spend_known, struct af_plan *plan,
                     struct af_tenant_decision *td);

/*
 * The soft budget over the decisions `dec` for the candidates `views[0..n)` (after
 * prioritize for the scores, or after filter for /explain's reasons): lowers the score
 * of each passing premium node where the pod's share of the price would take the
 * tenant's spend past its budget, and says so in the node's reason. Does nothing for a
 * hard budget or no budget. Cannot fail.
 */
void af_tenant_rank(const struct af_tenant_decision *td, const struct af_pod_info *pod,
                    const struct af_node_view *views, size_t n, struct af_node_decision *dec);

/*
 * What filter's answer `dec` over `views[0..n)` commits a hard-budget tenant to until the
 * pod is seen placed: the smallest share of the price (af_pod_share_usd) among the passing
 * premium nodes, the least the pod adds to the spend if it lands on one (the node it gets is
 * kube-scheduler's choice, so the guess stays on the low side). 0 when no premium node
 * passed, or the tenant has no hard budget. Cannot fail.
 */
double af_tenant_committed_usd(const struct af_tenant_decision *td, const struct af_pod_info *pod,
                               const struct af_node_view *views, size_t n,
                               const struct af_node_decision *dec);

#endif
