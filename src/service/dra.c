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

#include "accelfit/codec.h"
#include "accelfit/metrics.h"

#include "service/dra.h"
#include "accelfit/banned.h"

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

int af__service_render_dra(const struct af_snapshot *snap, struct af_buf *o)
{
    static const char *const kinds[AF_DRA_KINDS] = {
        [AF_DRA_SLICE] = "resourceslice", [AF_DRA_CLAIM] = "resourceclaim",
        [AF_DRA_TEMPLATE] = "resourceclaimtemplate", [AF_DRA_CLASS] = "deviceclass"};
    const struct af_dra *d = snap ? snap->dra : NULL;
    size_t objs[AF_DRA_KINDS] = {0}, pending = 0, bound = 0, both = 0;
    struct af_resources total = {{0}}, held = {{0}};
    int rc;

    if (d) {
        objs[AF_DRA_SLICE] = d->n_slices;
        objs[AF_DRA_CLAIM] = d->n_claims;
        objs[AF_DRA_TEMPLATE] = d->n_templates;
        objs[AF_DRA_CLASS] = d->n_classes;
        for (size_t i = 0; i < d->n_nodes; i++)
            for (int r = 0; r < AF_RES__COUNT; r++) {
                total.v[r] += d->nodes[i].devices.v[r];
                held.v[r] += d->nodes[i].allocated.v[r];
            }
    }
    for (size_t i = 0; snap && i < snap->n_pods; i++) {
        const struct af_pod_info *p = snap->pods[i]->full;   /* a pod with claims is not plain */
        if (p && (p->n_claims || p->n_ext))
            *(p->node_name ? &bound : &pending) += 1;
    }
    for (size_t i = 0; snap && i < snap->n_nodes; i++)
        both += snap->nodes[i].info && snap->nodes[i].info->dra_both;
    rc = af_metrics_header(o, "accelfit_dra_objects", "gauge",
                           "DRA objects (resource.k8s.io/v1) in the cache, by kind; 0 while the "
                           "API server serves none.");
    for (int k = 0; k < AF_DRA_KINDS && !rc; k++)
        rc = af_buf_printf(o, "accelfit_dra_objects{kind=\"%s\"} %zu\n", kinds[k], objs[k]);
    if (!rc)
        rc = af_metrics_header(o, "accelfit_dra_claim_pods", "gauge",
                               "Pods in the cache that name ResourceClaims or request extended "
                               "resources a DeviceClass may serve, pending or bound.");
    if (!rc)
        rc = af_buf_printf(o,
                           "accelfit_dra_claim_pods{state=\"pending\"} %zu\n"
                           "accelfit_dra_claim_pods{state=\"bound\"} %zu\n",
                           pending, bound);
    if (!rc)
        rc = af_metrics_header(o, "accelfit_dra_devices", "gauge",
                               "Accelerator devices ResourceSlices publish, by the resource "
                               "they count as, and of those the ones allocated claims hold.");
    for (int r = 0; r < AF_RES__COUNT && !rc; r++) {
        if (r == AF_RES_CPU || r == AF_RES_MEMORY || r == AF_RES_PODS)
            continue;
        rc = af_buf_printf(o,
                           "accelfit_dra_devices{resource=\"%s\",state=\"total\"} %lld\n"
                           "accelfit_dra_devices{resource=\"%s\",state=\"allocated\"} %lld\n",
                           af_res_name((enum af_res)r), (long long)total.v[r],
                           af_res_name((enum af_res)r), (long long)held.v[r]);
    }
    if (!rc)
        rc = af_metrics_header(o, "accelfit_dra_nodes_with_device_plugin_too", "gauge",
                               "Nodes with devices of one kind from both a device plugin and "
                               "DRA (counted once: the device plugin's).");
    if (!rc)
        rc = af_buf_printf(o, "accelfit_dra_nodes_with_device_plugin_too %zu\n", both);
    if (!rc)
        rc = af_metrics_header(o, "accelfit_dra_index_bytes", "gauge",
                               "Bytes the DRA objects and their index hold.");
    if (!rc)
        rc = af_buf_printf(o, "accelfit_dra_index_bytes %zu\n", d ? af_dra_bytes(d) : 0);
    return rc;
}
