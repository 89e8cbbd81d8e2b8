/* SPDX-License-Identifier: Apache-2.0 */
/*
 * inflight: spend a hard budget has committed and the cache cannot show yet
 * (src/budget/inflight.c). A tenant's spend comes from the cache's snapshot, and a
 * pod filter passed shows up there only once its bind has come back through the
 * watch and a new snapshot has been published; until then every pod of the same
 * tenant would see the same spend, so a Job's replicas filtered together would
 * pass together and overshoot the budget. The server therefore charges each such
 * pod to its tenant here when filter passes it (af_budget_charge, accelfit/budget.h)
 * and adds the tenant's charges to the snapshot's spend at the next decision, the
 * way rollouts count units "decided and not yet seen" (accelfit/rollout_state.h).
 *
 * A charge belongs to one pod (namespace and name; a different uid under the same
 * name is a new pod): filtering the pod again replaces its charge, and a pod's own
 * charge never counts against it. It ends when a snapshot shows the pod bound to a
 * node (its spend is then the snapshot's) or finished, or AF_INFLIGHT_TTL_S after the
 * pod was first charged (the pod was deleted, or kube-scheduler placed it nowhere, or
 * keeps retrying it because another plugin refuses it: a retry keeps the first time). At most
 * AF_INFLIGHT_MAX charges are kept: beyond, the oldest gives way.
 *
 * Thread-safe (one mutex). Times are the caller's, in seconds of a monotonic clock.
 */
#ifndef AF_INFLIGHT_H
#define AF_INFLIGHT_H

#include <stddef.h>

#include "accelfit/cache.h"
#include "accelfit/model.h"

#define AF_INFLIGHT_TTL_S 120.0
#define AF_INFLIGHT_MAX 4096

struct af_inflight;

struct af_inflight *af_inflight_new(void);
void af_inflight_free(struct af_inflight *f);   /* NULL is fine */

/*
 * The charges of tenant `tenant` (its name) in flight at `now`, `pod`'s own left out
 * (`pod` may be NULL). First ends the charges `snap` settles (may be NULL: none) and those
 * older than the TTL. `f` NULL: 0. Cannot fail.
 */
double af_inflight_sum(struct af_inflight *f, const struct af_snapshot *snap, const char *tenant,
                       const struct af_pod_info *pod, double now);

/*
 * Charges `usd_hr` to tenant `tenant` for `pod` at `now`, replacing the pod's earlier
 * charge; `usd_hr` 0 (or less) only ends it. A pod without a namespace or name, or `f`
 * NULL, is not charged. Cannot fail.
 */
void af_inflight_charge(struct af_inflight *f, const char *tenant, const struct af_pod_info *pod,
                        double usd_hr, double now);

/* Charges kept now (some may be settled or expired at the next sum). */
size_t af_inflight_count(struct af_inflight *f);

#endif
