/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DRA in `accelfit simulate` (docs/simulate.md): the cluster file's ResourceSlices,
 * ResourceClaims, templates and DeviceClasses, applied to the simulated cluster the way the
 * cache applies them to the live one: a node gets its DRA devices as allocatable
 * (af_dra_node_info), a pod the devices its claims hold or still need as requests. The
 * replay then places claim pods by their devices' count and class; the claims' selectors and
 * the node an allocated claim is on are not replayed.
 */
#include <stdlib.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/dra.h"
#include "accelfit/simulate.h"
#include "accelfit/util.h"
#include "accelfit/banned.h"

/* A pod's requests with the devices of its claims: held when allocated, else needed. */
static void pod_devices(const struct af_dra *d, struct af_pod_info *p)
{
    struct af_dra_demand dm;

    if (!p || (!p->n_claims && !p->n_ext))
        return;
    af_dra_pod_demand(d, p, &dm);
    for (int r = 0; r < AF_RES__COUNT; r++) {
        p->requests.v[r] += dm.held.v[r] + dm.need.v[r] - p->dra.v[r];
        p->dra.v[r] = dm.held.v[r] + dm.need.v[r];
    }
    if (dm.need.v[AF_RES_MIG] > 0 && !p->mig.g)
        p->mig = dm.mig;
}

int af_sim_apply_dra(const char *name, const char *text, size_t len, struct af_sim_cluster *cl,
                     struct af_sim_trace *tr, size_t *devices, struct af_error *err)
{
    struct af_dra *d = NULL;
    int rc;

    if (devices)
        *devices = 0;
    rc = af_codec_cluster_dra(name, text, len, &d, err);
    for (size_t i = 0; d && i < cl->n_nodes; i++) {
        struct af_node_info *n = af_dra_node_info(d, cl->nodes[i].info);
        if (!n)
            continue;
        af_node_info_unref(cl->nodes[i].info);   /* the simulator holds the only reference */
        cl->nodes[i].info = n;
    }
    for (size_t i = 0; d && i < cl->n_bound; i++)
        pod_devices(d, cl->bound[i].info);
    for (size_t i = 0; d && tr && i < tr->n_pods; i++)
        pod_devices(d, tr->pods[i].info);
    if (d && devices)
        *devices = d->n_devs;
    af_dra_unref(d);
    return rc;
}
