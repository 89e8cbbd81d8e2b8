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
    if (!pod || (!pod->n_claims && !pod->n_ext))
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

void af__service_dra_check(struct af_arena *ar, const struct af_snapshot *snap,
                           const struct af_dra_demand *dm, const struct af_pod_info *pod,
                           const char *const *names, struct af_node_view *views, size_t n,
                           struct af__dra_check *out)
{
    memset(out, 0, sizeof(*out));
    if (!dm->n)
        return;
    out->n = n;
    out->fails = af_arena_alloc(ar, (n + 1) * sizeof(*out->fails));
    out->why = af_arena_alloc(ar, (n + 1) * sizeof(*out->why));
    for (size_t i = 0; i < n; i++) {
        char why[AF_REASON_MAX - 24];
        struct af_node_view *v = &views[i];
        if (af_dra_node_fits(snap ? snap->dra : NULL, dm, names[i], why, sizeof(why)))
            continue;
        out->fails[i] = true;
        snprintf(out->why[i], sizeof(out->why[i]), "accelfit: DRA: %s", why);
        /* no room for what the pod requests, as a full node has none */
        for (int r = 0; v->info && r < AF_RES__COUNT; r++)
            if (pod->requests.v[r] > 0 &&
                v->used.v[r] < v->info->allocatable.v[r] - pod->requests.v[r] + 1)
                v->used.v[r] = v->info->allocatable.v[r] - pod->requests.v[r] + 1;
    }
}

void af__service_dra_reasons(const struct af__dra_check *chk, struct af_node_decision *dec,
                             struct af_filter_summary *sum)
{
    for (size_t i = 0; chk->fails && i < chk->n; i++) {
        if (!chk->fails[i])
            continue;
        if (dec[i].verdict == AF_VERDICT_PASS && sum) {
            sum->passed--;
            sum->failed++;
        }
        if (dec[i].verdict == AF_VERDICT_UNRESOLVABLE)
            continue;   /* the core's reason (a wrong class) says more */
        dec[i].verdict = AF_VERDICT_FAILED;
        snprintf(dec[i].reason, sizeof(dec[i].reason), "%s", chk->why[i]);
    }
}
