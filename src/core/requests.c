/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The effective request of a pod, computed the way kube-scheduler does it
 * (component-helpers PodRequests; docs/extender-protocol.md §3): app containers
 * and sidecars add up, each plain init container runs alone next to the
 * sidecars started before it, the pod needs the larger of the two, and the
 * runtime overhead comes on top. Sums saturate rather than overflow.
 */
#include <string.h>

#include "accelfit/decide.h"
#include "accelfit/banned.h"

static int64_t sat_add(int64_t a, int64_t b)
{
    if (b > 0 && a > INT64_MAX - b)
        return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b)
        return INT64_MIN;
    return a + b;
}

void af_effective_requests(const struct af_container_req *containers, size_t n_containers,
                           const struct af_container_req *inits, size_t n_inits,
                           const struct af_resources *overhead, struct af_resources *out)
{
    for (int r = 0; r < AF_RES__COUNT; r++) {
        int64_t apps = 0, sidecars = 0, init_max = 0;

        for (size_t i = 0; i < n_containers; i++)
            apps = sat_add(apps, containers[i].req.v[r]);
        for (size_t i = 0; i < n_inits; i++) {
            int64_t usage;
            if (inits[i].restartable) {
                apps = sat_add(apps, inits[i].req.v[r]);
                sidecars = sat_add(sidecars, inits[i].req.v[r]);
                usage = sidecars;
            } else {
                usage = sat_add(inits[i].req.v[r], sidecars);
            }
            if (usage > init_max)
                init_max = usage;
        }
        int64_t eff = apps > init_max ? apps : init_max;
        if (overhead)
            eff = sat_add(eff, overhead->v[r]);
        out->v[r] = eff;
    }
}
