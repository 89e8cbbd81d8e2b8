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
/*
 * After af_filter: a passing node that cannot give the pod's claims their devices
 * (af_dra_node_fits) fails, with the reason; `sum` (may be NULL) is kept in step. Nothing
 * when the pod has no claims.
 */
void af__service_dra_filter(const struct af_snapshot *snap, const struct af_dra_demand *dm,
                            const char *const *names, size_t n, struct af_node_decision *dec,
                            struct af_filter_summary *sum);

#endif
