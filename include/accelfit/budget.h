/* SPDX-License-Identifier: Apache-2.0 */
/*
 * budget: tenants' budgets at decision time, and the cost reports (GET /costs,
 * `accelfit costs`, the accelfit_tenant_* and accelfit_idle_cost_* gauges).
 * The server's side of accelfit/costs.h and accelfit/tenant_budget.h: the memo in
 * src/budget/memo.c, the decisions and reports in src/service/costs.c.
 *
 * Costs are computed once per (snapshot, config): a struct af_costs_memo keeps
 * the last two results with references on the snapshot and config each was
 * computed from, and recomputes only for a pair it does not hold, so filter,
 * prioritize, /explain, /costs and /metrics reuse one computation between cache
 * changes. `serve` computes each new snapshot's before publishing it
 * (af_costs_memo_warm) when the policy has a budget, so the first filter after
 * a change does not.
 *
 * What a pod's tenant does to its plan (classes, spot capacity, a hard budget's
 * cost ceiling before filter; a soft budget's ranking after prioritize) is
 * decided in the core (accelfit/tenant_budget.h); af_budget_steer only supplies
 * the tenant's spend: the memo's, plus what filter passed for a hard budget and the
 * cache does not show yet (af_budget_charge, accelfit/inflight.h).
 */
#ifndef AF_BUDGET_H
#define AF_BUDGET_H

#include "accelfit/cache.h"
#include "accelfit/costs.h"
#include "accelfit/decide.h"
#include "accelfit/tenant_budget.h"

/* ---- the memo --------------------------------------------------------------------------------- */

struct af_costs_memo;
struct af_service;
struct af_inflight;

struct af_costs_memo *af_costs_memo_new(void);
void af_costs_memo_free(struct af_costs_memo *m);   /* NULL is fine */

/*
 * The costs of `snap` under `cfg`'s policy: a new reference the caller drops with
 * af_costs_unref. From the memo when it holds this (snapshot, config) pair, else
 * computed and kept (the memo holds references on both until two newer pairs are).
 * `m` may be NULL: computed for this call only. Cannot fail.
 */
struct af_costs *af_costs_memo_get(struct af_costs_memo *m, struct af_config *cfg,
                                   struct af_snapshot *snap);
/*
 * Computes the costs of `snap` under `cfg` into the memo ahead of the requests that
 * will ask for them (af_publisher's on_publish, before `snap` is published), unless
 * the memo holds them already. The computation runs outside the memo's lock, so
 * requests on the snapshot still current keep finding theirs meanwhile, and after
 * the publish too (the memo keeps the pair before); a request that gets to a pair
 * first computes it itself, as without warming. NULL `m` or `snap`: nothing.
 */
void af_costs_memo_warm(struct af_costs_memo *m, struct af_config *cfg, struct af_snapshot *snap);
/* The hard budgets' charges kept with the memo (accelfit/inflight.h): borrowed; NULL for a
 * NULL `m`. Cannot fail. */
struct af_inflight *af_costs_memo_inflight(struct af_costs_memo *m);

/* ---- decisions ------------------------------------------------------------------------------------ */

/* af_budget_steer flags: look the tenant's spend up even when it has no budget (/explain). */
#define AF_BUDGET_SPEND (1u << 0)

/*
 * af_tenant_steer with the tenant's spend from the costs of `snap` (svc->costs memo;
 * `svc` may be NULL: computed for this call), plus the charges af_budget_charge made for
 * the tenant's other pods that `snap` does not show placed yet. The spend is looked up when the tenant has
 * a budget, or with AF_BUDGET_SPEND, so a policy without budgets costs filter nothing;
 * with `snap` NULL it is unknown. `td` is always filled; the soft budget is then
 * af_tenant_rank's. Cannot fail.
 */
void af_budget_steer(struct af_service *svc, struct af_config *cfg, struct af_snapshot *snap,
                     const struct af_pod_info *pod, unsigned flags, struct af_plan *plan,
                     struct af_tenant_decision *td);

/*
 * After filter: when the pod's tenant has a hard budget, charges it what the answer `dec`
 * commits (af_tenant_committed_usd) until a snapshot shows the pod bound or
 * AF_INFLIGHT_TTL_S passes (accelfit/inflight.h, kept in svc->costs), so af_budget_steer
 * counts it for the tenant's other pods in the meantime. Filtering the pod again replaces
 * its charge. Nothing when `svc` or svc->costs is NULL. Cannot fail.
 */
void af_budget_charge(struct af_service *svc, const struct af_pod_info *pod,
                      const struct af_tenant_decision *td, const struct af_node_view *views,
                      size_t n, const struct af_node_decision *dec);

/* The "tenant" object of /explain (or null when the policy has no tenants). */
int af_budget_explain_json(const struct af_tenant_decision *td, struct af_buf *out) AF_MUST_CHECK;

/* ---- reports ---------------------------------------------------------------------------------------- */

/*
 * The /costs document (docs/http-api.md#get-costs): totals, tenants, namespaces, classes
 * and idle cost by node group, as of `snap` (its generation and the API server's
 * resourceVersion, null for a static cluster). Returns 0 or AF_ETOOBIG.
 */
int af_costs_render_json(const struct af_costs *c, const struct af_policy *pol,
                         const struct af_snapshot *snap, struct af_buf *out) AF_MUST_CHECK;

/* GET /costs: 200 with the document; 503 with {"error": ...} before the first snapshot;
 * 500 when the body is too large. */
int af_service_costs(struct af_service *svc, struct af_buf *out);

/*
 * The gauges accelfit_tenant_spend_dollars_per_hour{tenant}, ..._budget_...{tenant} (tenants
 * with a budget) and accelfit_idle_cost_dollars_per_hour{class,node_group}: at most
 * AF_TENANTS_MAX tenants and AF_BUDGET_MAX_GROUP_SERIES idle series (further node groups
 * are summed per class under node_group=AF_BUDGET_OTHER_GROUPS), under `cfg` (the config
 * the scrape took; borrowed). Returns 0 or AF_ETOOBIG.
 */
#define AF_BUDGET_MAX_GROUP_SERIES 64
/* Node groups are Kubernetes label values, which begin and end with a letter or digit:
 * no node group can be named this. */
#define AF_BUDGET_OTHER_GROUPS "_other_"
int af_budget_render_metrics(struct af_service *svc, struct af_config *cfg,
                             struct af_buf *o) AF_MUST_CHECK;

#endif
