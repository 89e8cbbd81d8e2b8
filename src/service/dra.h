/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's use of DRA (accelfit/dra.h): a pod's claims become the devices it requests,
 * and a node that cannot give them is rejected. src/service only.
 */
#ifndef AF_SERVICE_DRA_H
#define AF_SERVICE_DRA_H

#include "accelfit/cache.h"
#include "accelfit/decide.h"
#include "accelfit/dra.h"
#include "accelfit/util.h"

/*
 * The pod decisions judge: `pod` itself when it names no claims, else a copy in `ar` whose
 * requests have the devices its unallocated claims still need (and its MIG profile when a
 * selector names one). *dm gets the demand (zeroed when none). Cannot fail.
 */
const struct af_pod_info *af__service_dra_pod(struct af_arena *ar, const struct af_snapshot *snap,
                                              const struct af_pod_info *pod,
                                              struct af_dra_demand *dm);

/* Which candidates cannot give the pod's claims their devices, and why. */
struct af__dra_check {
    size_t n;
    bool *fails;                /* per candidate; NULL when the pod has no claims */
    char (*why)[AF_REASON_MAX];
};

/*
 * Before af_filter: asks each candidate whether its free devices satisfy the pod's claims
 * (af_dra_node_fits), and gives each one that cannot no room in `views` (the request's own
 * copies), so that the core's tiered fallback looks past it as past a full node. Nothing
 * when the pod has no claims. Cannot fail.
 */
void af__service_dra_check(struct af_arena *ar, const struct af_snapshot *snap,
                           const struct af_dra_demand *dm, const struct af_pod_info *pod,
                           const char *const *names, struct af_node_view *views, size_t n,
                           struct af__dra_check *out);
/*
 * After af_filter: each candidate the check refused fails with its DRA reason; `sum` (may be
 * NULL) is kept in step.
 */
void af__service_dra_reasons(const struct af__dra_check *chk, struct af_node_decision *dec,
                             struct af_filter_summary *sum);

/*
 * The DRA gauges of /metrics, from `snap` (may be NULL: zeros): objects cached per kind, the
 * pods that name claims (pending, bound), the devices DRA nodes have and allocated claims
 * hold per resource, the nodes that have devices of one kind from a device plugin and DRA
 * both, and the index's bytes. Returns 0, or AF_ETOOBIG when `o` is full.
 */
int af__service_render_dra(const struct af_snapshot *snap, struct af_buf *o);

#endif
