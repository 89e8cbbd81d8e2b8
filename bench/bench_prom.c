/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_prom: the memory and time of reading the largest Prometheus answer accelfit
 * accepts. It builds a valid /api/v1/query vector answer just under the reader's byte
 * cap (64 MiB: dcgm-exporter-shaped series, Hostname, gpu, UUID, modelName, pod labels),
 * parses it with af_prom_build_add and finishes the snapshot, and prints the series
 * kept, the time, and the process's peak resident memory (getrusage ru_maxrss, which
 * includes the answer's own bytes). The shipped pod's memory limit is 1 GiB. With
 * "small", the series are as short as a mapped series gets ({"metric":{"Hostname":"n1"},
 * "value":[1,"1"]}), the most series per byte.
 * Usage: bench_prom [MiB [small]]   (default 63)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "accelfit/prom.h"
#include "accelfit/utilization.h"
#include "accelfit/util.h"

static long peak_kib(void)
{
    struct rusage ru;

    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? (size_t)atoi(argv[1]) : 63;
    size_t target = mib << 20, series = 0;
    int small = argc > 2 && !strcmp(argv[2], "small");
    struct af_buf body = AF_BUF_INIT(0);
    struct af_utilization_policy up;
    struct af_prom_build *b;
    struct af_utilization_snapshot *s;
    char why[300];
    long before;
    uint64_t t0;
    int rc;

    af_utilization_policy_defaults(&up);
    af_assert(af_buf_puts(&body, "{\"status\":\"success\",\"data\":{\"resultType\":\"vector\","
                                 "\"result\":[") == 0);
    while (body.len + 400 < target) {
        if (small) {
            af_assert(af_buf_printf(&body, "%s{\"metric\":{\"Hostname\":\"n%zu\"},"
                                           "\"value\":[1795414896,\"%zu\"]}",
                                    series ? "," : "", series, series % 101) == 0);
            series++;
            continue;
        }
        af_assert(af_buf_printf(&body,
                                "%s{\"metric\":{\"__name__\":\"DCGM_FI_DEV_GPU_UTIL\","
                                "\"Hostname\":\"ip-10-%zu-%zu-%zu.us-west-2.compute.internal\","
                                "\"gpu\":\"%zu\",\"UUID\":\"GPU-%08zx-1c2d-3e4f-5a6b-7c8d9e0f1a2b\","
                                "\"modelName\":\"NVIDIA A10G\",\"pod\":\"web-%zu\","
                                "\"namespace\":\"team-a\"},\"value\":[1795414896.123,\"%zu\"]}",
                                series ? "," : "", series / 65536 % 256, series / 256 % 256,
                                series % 256, series % 8, series, series, series % 101) == 0);
        series++;
    }
    af_assert(af_buf_puts(&body, "]}}") == 0);
    before = peak_kib();
    t0 = af_now_ns();
    b = af_prom_build_new();
    rc = af_prom_build_add(b, &up, AF_UM_GPU_UTIL, body.buf, body.len, why, sizeof(why));
    s = af_prom_build_finish(b, NULL, up.idle_below);
    printf("prometheus answer: %.1f MiB, %zu series: rc %d, %zu nodes kept, %.2f s\n",
           (double)body.len / 1048576.0, series, rc, s->n_nodes, (double)(af_now_ns() - t0) / 1e9);
    printf("  peak RSS %.0f MiB (%.0f MiB before parsing: the answer's bytes and the program)\n",
           (double)peak_kib() / 1024.0, (double)before / 1024.0);
    af_utilization_snapshot_unref(s);
    af_buf_release(&body);
    af_utilization_policy_release(&up);
    return rc ? 1 : 0;
}
