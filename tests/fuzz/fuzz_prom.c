/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prometheus HTTP API answers on arbitrary bytes: af_prom_build_add must accept or
 * refuse each (never crash), and whatever it accepted must make a snapshot that keeps
 * its invariants: nodes sorted and each found by af_utilization_find, every value and
 * timestamp finite, each metric's precomputed sums matching its samples; and the bounds:
 * a utilization within [0, 1], memory within [0, 2^60], no sample more than
 * AF_UTILIZATION_FUTURE_SKEW_S ahead of the clock given, at most AF_UTILIZATION_MAX_SERIES series. The
 * first byte picks the metric, so every scale and the Neuron "held" rule are reached.
 */
#include <math.h>
#include <string.h>

#include "accelfit/prom.h"
#include "accelfit/utilization.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct af_utilization_policy up;
    static bool init;
    struct af_prom_build *b;
    struct af_utilization_snapshot *s;
    char why[300];
    int m, rc;

    if (!init) {
        af_utilization_policy_defaults(&up);
        init = true;
    }
    if (size < 1)
        return 0;
    m = data[0] % AF_UM__COUNT;
    b = af_prom_build_new();
    af_prom_build_set_now(b, 1795414896.0);
    rc = af_prom_build_add(b, &up, (enum af_utilization_metric)m, (const char *)data + 1, size - 1, why,
                           sizeof(why));
    FUZZ_CHECK(rc == 0 || (rc == AF_EPARSE && why[0]), "rc %d", rc);
    s = af_prom_build_finish(b, NULL, up.idle_below);
    FUZZ_CHECK(s->n_nodes <= AF_UTILIZATION_MAX_SERIES, "%zu nodes kept", s->n_nodes);
    for (size_t i = 0; i < s->n_nodes; i++) {
        const struct af_utilization_node *n = &s->nodes[i];
        int devices = 0;
        FUZZ_CHECK(i == 0 || strcmp(s->nodes[i - 1].name, n->name) < 0, "nodes not sorted");
        FUZZ_CHECK(af_utilization_find(s, n->name) == n, "node %zu not found by name", i);
        for (size_t k = 0; k < n->n; k++) {
            const struct af_utilization_sample *x = &n->samples[k];
            bool util = x->metric == AF_UM_GPU_UTIL || x->metric == AF_UM_NEURONCORE_UTIL ||
                        x->metric == AF_UM_CPU_UTIL;
            FUZZ_CHECK(isfinite(x->value) && isfinite(x->ts), "sample not finite");
            FUZZ_CHECK(x->value >= 0 && x->value <= (util ? 1 : 1152921504606846976.0),
                       "sample %g out of range", x->value);
            FUZZ_CHECK(x->ts <= 1795414896.0 + AF_UTILIZATION_FUTURE_SKEW_S, "sample from %.0f", x->ts);
            devices += n->samples[k].metric == m;
        }
        FUZZ_CHECK(n->agg[m].devices == (devices < UINT16_MAX ? devices : UINT16_MAX),
                   "sums of %d samples say %d", devices,
                   n->agg[m].devices);
    }
    af_utilization_snapshot_unref(s);
    return 0;
}
