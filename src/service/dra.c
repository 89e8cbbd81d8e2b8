/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DRA in the request path (service/dra.h): the pending pod's claims resolved against the
 * snapshot's DRA objects into the devices it requests, so that filter, prioritize and
 * /explain judge it as they judge a pod with device-plugin requests (classes, tiers, memory
 * physics, room, cost); then each passing node is asked whether its free devices match the
 * claims' device classes and selectors. No decision logic lives here (src/core/dra.c).
 */
#include <stdio.h>
#include <string.h>

#include "service/dra.h"

const struct af_pod_info *af__service_dra_pod(struct af_arena *ar, const struct af_snapshot *snap,
                                              const struct af_pod_info *pod,
                                              struct af_dra_demand *dm)
{
    struct af_pod_info *p;

    memset(dm, 0, sizeof(*dm));
    if (!pod || !pod->n_claims)
        return pod;
    af_dra_pod_demand(snap ? snap->dra : NULL, pod, dm);
    /* A copy for this request only: nobody takes a reference to it or frees it. */
    p = af_arena_alloc(ar, sizeof(*p));
    memcpy(p, pod, sizeof(*p));
    atomic_init(&p->refcnt, 1);
    for (int r = 0; r < AF_RES__COUNT; r++)
        p->requests.v[r] += dm->need.v[r];
    if (dm->need.v[AF_RES_MIG] > 0 && pod->requests.v[AF_RES_MIG] == 0)
        p->mig = dm->mig;
    return p;
}

void af__service_dra_filter(const struct af_snapshot *snap, const struct af_dra_demand *dm,
                            const char *const *names, size_t n, struct af_node_decision *dec,
                            struct af_filter_summary *sum)
{
    if (!dm->n)
        return;
    for (size_t i = 0; i < n; i++) {
        char why[AF_REASON_MAX - 24];
        if (dec[i].verdict != AF_VERDICT_PASS)
            continue;
        if (af_dra_node_fits(snap ? snap->dra : NULL, dm, names[i], why, sizeof(why)))
            continue;
        dec[i].verdict = AF_VERDICT_FAILED;
        snprintf(dec[i].reason, sizeof(dec[i].reason), "accelfit: DRA: %s", why);
        if (sum) {
            sum->passed--;
            sum->failed++;
        }
    }
}
