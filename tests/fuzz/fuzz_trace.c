/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Trace files for `accelfit simulate` (docs/simulate.md) on arbitrary bytes:
 * af_codec_decode_trace must accept or refuse each (never crash), a refusal must say
 * why, and an accepted trace must keep what the replay relies on: a positive, finite
 * horizon, pods sorted by arrival, finite arrivals at or after the start, durations
 * finite (negative only for "until the end"), and every pod with its object; and the
 * trace's bounds: every arrival and duration at most AF_SIM_MAX_SECONDS (so the horizon
 * at most twice that), at most AF_SIM_MAX_PODS pods.
 */
#include <math.h>

#include "accelfit/codec.h"
#include "accelfit/simulate.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct af_sim_trace t;
    struct af_error err;
    int rc;

    memset(&t, 0, sizeof(t));
    memset(&err, 0, sizeof(err));
    (void)fuzz_config();   /* logging off */
    rc = af_codec_decode_trace("fuzz", (const char *)data, size, &t, &err);
    if (rc != 0) {
        FUZZ_CHECK(rc < 0 && err.text[0], "rc %d without a reason", rc);
        FUZZ_CHECK(t.n_pods == 0 && t.pods == NULL, "a refused trace kept %zu pods", t.n_pods);
        return 0;
    }
    FUZZ_CHECK(isfinite(t.end) && t.end > 0 && t.end <= 2 * AF_SIM_MAX_SECONDS, "horizon %g",
               t.end);
    FUZZ_CHECK(t.n_pods <= AF_SIM_MAX_PODS, "%zu pods", t.n_pods);
    for (size_t i = 0; i < t.n_pods; i++) {
        const struct af_sim_pod *p = &t.pods[i];
        FUZZ_CHECK(p->info != NULL, "pod %zu has no object", i);
        FUZZ_CHECK(isfinite(p->arrival) && p->arrival >= 0, "pod %zu arrives at %g", i,
                   p->arrival);
        FUZZ_CHECK(isfinite(p->duration) && p->duration <= AF_SIM_MAX_SECONDS,
                   "pod %zu runs for %g", i, p->duration);
        FUZZ_CHECK(p->arrival <= AF_SIM_MAX_SECONDS, "pod %zu arrives at %g", i, p->arrival);
        FUZZ_CHECK(i == 0 || t.pods[i - 1].arrival <= p->arrival, "pods %zu and %zu unsorted",
                   i - 1, i);
    }
    af_sim_trace_release(&t);
    return 0;
}
