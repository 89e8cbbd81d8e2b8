/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_dra: Dynamic Resource Allocation objects at EKS scale, in process.
 *
 * Synthesizes N nodes (default 5,000) each with one ResourceSlice of D devices (default 8) in
 * the NVIDIA DRA driver's published shape (every attribute it publishes, tests/fixtures/dra),
 * as list pages of 200 like the watch thread reads them, and C allocated claims (default half
 * the devices, one device each, each reserved for one pod), then measures:
 *   - decode: list pages to compact records (af_codec_decode_dra_list)
 *   - index: af_dra_build of all records (what each change costs the watch thread)
 *   - memory: VmRSS before and after (records and index; the JSON is freed), and
 *     af_dra_bytes, the records' own accounting
 *   - the request path: a template pod's demand and af_dra_node_fits on 500 candidate nodes
 * Usage: bench_dra [nodes] [devices-per-node]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/dra.h"
#include "accelfit/util.h"

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kb = 0;

    while (f && fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmRSS:", 6))
            kb = atol(line + 6);
    if (f)
        fclose(f);
    return kb;
}

static void slice_json(struct af_buf *b, int node, int devs)
{
    af_assert(af_buf_printf(b,
                            "{\"metadata\":{\"name\":\"ip-10-0-%d-%d.ec2.internal-gpu.nvidia.com-"
                            "x%05d\",\"resourceVersion\":\"%d\"},\"spec\":{\"driver\":"
                            "\"gpu.nvidia.com\",\"nodeName\":\"ip-10-0-%d-%d.ec2.internal\","
                            "\"pool\":{\"name\":\"ip-10-0-%d-%d.ec2.internal\",\"generation\":1,"
                            "\"resourceSliceCount\":1},\"devices\":[",
                            node / 256, node % 256, node, 1000 + node, node / 256, node % 256,
                            node / 256, node % 256) == 0);
    for (int d = 0; d < devs; d++)
        af_assert(af_buf_printf(
                      b,
                      "%s{\"name\":\"gpu-%d\",\"attributes\":{\"addressingMode\":{\"string\":"
                      "\"None\"},\"architecture\":{\"string\":\"Ampere\"},\"brand\":{\"string\":"
                      "\"Nvidia\"},\"cudaComputeCapability\":{\"version\":\"8.0.0\"},"
                      "\"cudaDriverVersion\":{\"version\":\"12.8.0\"},\"driverVersion\":"
                      "{\"version\":\"570.133.20\"},\"productName\":{\"string\":\"NVIDIA "
                      "A100-SXM4-40GB\"},\"resource.kubernetes.io/pciBusID\":{\"string\":"
                      "\"0000:%02x:00.0\"},\"resource.kubernetes.io/pcieRoot\":{\"string\":"
                      "\"pci0000:%02x\"},\"type\":{\"string\":\"gpu\"},\"uuid\":{\"string\":"
                      "\"GPU-%08x-0000-0000-0000-%012d\"}},\"capacity\":{\"memory\":{\"value\":"
                      "\"40Gi\"}}}",
                      d ? "," : "", d, 0x10 + d, 0x10 + d, (unsigned)node, d) == 0);
    af_assert(af_buf_printf(b, "]}}") == 0);
}

static void claim_json(struct af_buf *b, int i, int node, int dev)
{
    af_assert(af_buf_printf(
                  b,
                  "{\"metadata\":{\"name\":\"job-%d-gpu\",\"namespace\":\"team-%d\",\"uid\":"
                  "\"claim-%08d\"},\"spec\":{\"devices\":{\"requests\":[{\"name\":\"gpu\","
                  "\"exactly\":{\"deviceClassName\":\"gpu.nvidia.com\",\"allocationMode\":"
                  "\"ExactCount\",\"count\":1}}]}},\"status\":{\"allocation\":{\"devices\":"
                  "{\"results\":[{\"request\":\"gpu\",\"driver\":\"gpu.nvidia.com\",\"pool\":"
                  "\"ip-10-0-%d-%d.ec2.internal\",\"device\":\"gpu-%d\"}]},\"nodeSelector\":"
                  "{\"nodeSelectorTerms\":[{\"matchFields\":[{\"key\":\"metadata.name\","
                  "\"operator\":\"In\",\"values\":[\"ip-10-0-%d-%d.ec2.internal\"]}]}]}},"
                  "\"reservedFor\":[{\"resource\":\"pods\",\"name\":\"job-%d\",\"uid\":"
                  "\"pod-%08d\"}]}}",
                  i, i % 40, i, node / 256, node % 256, dev, node / 256, node % 256, i, i) == 0);
}

struct sink {
    struct af_dra_slice **slices;
    struct af_dra_claim **claims;
    size_t n_slices, n_claims, cap_s, cap_c;
};

static void take(void *ud, struct af_dra_obj *o)
{
    struct sink *k = ud;
    if (o->slice) {
        af_grow((void **)&k->slices, &k->cap_s, k->n_slices + 1, sizeof(*k->slices));
        k->slices[k->n_slices++] = o->slice;
    } else {
        af_grow((void **)&k->claims, &k->cap_c, k->n_claims + 1, sizeof(*k->claims));
        k->claims[k->n_claims++] = o->claim;
    }
    memset(o, 0, sizeof(*o));
}

/* Decodes `n` objects of `kind` in list pages of 200; the seconds spent decoding. */
static double decode_pages(enum af_dra_kind kind, int n, int devs, struct sink *k)
{
    struct af_buf page = AF_BUF_INIT(0);
    double spent = 0;

    for (int first = 0; first < n; first += 200) {
        uint64_t t0;
        struct af_error err;
        size_t skipped = 0;
        af_buf_reset(&page);
        af_assert(af_buf_printf(&page, "{\"kind\":\"List\",\"metadata\":{\"resourceVersion\":"
                                       "\"5\"},\"items\":[") == 0);
        for (int i = first; i < n && i < first + 200; i++) {
            if (i > first)
                af_assert(af_buf_add(&page, ",", 1) == 0);
            if (kind == AF_DRA_SLICE)
                slice_json(&page, i, devs);
            else
                claim_json(&page, i, i / devs % (n / devs ? n / devs : 1), i % devs);
        }
        af_assert(af_buf_printf(&page, "]}") == 0);
        t0 = af_now_ns();
        af_assert(af_codec_decode_dra_list(kind, page.buf, page.len, take, k, NULL, NULL,
                                           &skipped, &err) == 0);
        spent += (af_now_ns() - t0) / 1e9;
    }
    af_buf_release(&page);
    return spent;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    int nodes = argc > 1 ? atoi(argv[1]) : 5000;
    int devs = argc > 2 ? atoi(argv[2]) : 8;
    int claims = nodes * devs / 2;
    struct sink k = {0};
    long rss0, rss1, rss2;
    double t_slices, t_claims, build_ms[5];
    struct af_dra *d = NULL;
    struct af_dra_class *cls = NULL;

    if (nodes <= 0 || devs <= 0) {
        fprintf(stderr, "usage: bench_dra [nodes] [devices-per-node]\n");
        return 2;
    }
    cls = af_dra_class_new();
    cls->name = af_xstrdup("gpu.nvidia.com");
    af_dra_selector_parse(&cls->sel, "device.driver == 'gpu.nvidia.com' && "
                                     "device.attributes['gpu.nvidia.com'].type == 'gpu'");
    rss0 = rss_kb();
    t_slices = decode_pages(AF_DRA_SLICE, nodes, devs, &k);
    t_claims = decode_pages(AF_DRA_CLAIM, claims, devs, &k);
    rss1 = rss_kb();
    for (int r = 0; r < 5; r++) {
        uint64_t t0 = af_now_ns();
        struct af_dra *n = af_dra_build(k.slices, k.n_slices, k.claims, k.n_claims, NULL, 0,
                                        &cls, 1);
        build_ms[r] = (af_now_ns() - t0) / 1e6;
        af_dra_unref(d);
        d = n;
    }
    qsort(build_ms, 5, sizeof(build_ms[0]), cmp_d);
    rss2 = rss_kb();

    printf("== bench_dra: %d nodes x %d devices (%zu slices), %zu allocated claims\n", nodes,
           devs, k.n_slices, k.n_claims);
    printf("decode slices      %8.1f ms  (%.1f us per slice)\n", t_slices * 1e3,
           t_slices * 1e6 / nodes);
    printf("decode claims      %8.1f ms  (%.1f us per claim)\n", t_claims * 1e3,
           t_claims * 1e6 / (claims ? claims : 1));
    printf("index (build)      %8.1f ms  median of 5, max %.1f ms\n", build_ms[2], build_ms[4]);
    printf("memory             %8.1f MiB VmRSS for the records (%.1f MiB with the index); "
           "af_dra_bytes %.1f MiB\n",
           (rss1 - rss0) / 1024.0, (rss2 - rss0) / 1024.0, af_dra_bytes(d) / 1048576.0);
    {
        /* the request path: a pod whose template asks for 2 GPUs, 500 candidates */
        struct af_dra_claim *t = af_dra_claim_new();
        struct af_pod_info *pod = af_pod_info_new();
        struct af_dra *dt;
        struct af_dra_demand dm;
        double per[21];
        char why[256];
        int passed = 0;

        t->ns = af_xstrdup("team-1");
        t->name = af_xstrdup("two-gpus");
        t->n_requests = 1;
        t->requests = af_xcalloc(1, sizeof(*t->requests));
        t->requests[0].name = af_xstrdup("gpus");
        t->requests[0].n_choices = 1;
        t->requests[0].choices = af_xcalloc(1, sizeof(*t->requests[0].choices));
        t->requests[0].choices[0].name = af_xstrdup("gpus");
        t->requests[0].choices[0].device_class = af_xstrdup("gpu.nvidia.com");
        t->requests[0].choices[0].count = 2;
        dt = af_dra_build(k.slices, k.n_slices, k.claims, k.n_claims, &t, 1, &cls, 1);
        af_dra_claim_unref(t);
        pod->ns = af_xstrdup("team-1");
        pod->name = af_xstrdup("p");
        pod->n_claims = 1;
        pod->claims = af_xcalloc(1, sizeof(*pod->claims));
        pod->claims[0].name = af_xstrdup("g");
        pod->claims[0].tmpl = af_xstrdup("two-gpus");
        for (int r = 0; r < 21; r++) {
            uint64_t t0 = af_now_ns();
            af_dra_pod_demand(dt, pod, &dm);
            passed = 0;
            for (int i = 0; i < 500; i++) {
                char name[64];
                int node = (i * 7919 + r) % nodes;
                snprintf(name, sizeof(name), "ip-10-0-%d-%d.ec2.internal", node / 256, node % 256);
                passed += af_dra_node_fits(dt, &dm, name, why, sizeof(why));
            }
            per[r] = (af_now_ns() - t0) / 1e3;
        }
        qsort(per, 21, sizeof(per[0]), cmp_d);
        printf("request path       %8.1f us  per pod: demand + DRA check of 500 candidates "
               "(median of 21; %d passed)\n",
               per[10], passed);
        af_pod_info_unref(pod);
        af_dra_unref(dt);
    }
    af_dra_unref(d);
    for (size_t i = 0; i < k.n_slices; i++)
        af_dra_slice_unref(k.slices[i]);
    for (size_t i = 0; i < k.n_claims; i++)
        af_dra_claim_unref(k.claims[i]);
    af_dra_class_unref(cls);
    free(k.slices);
    free(k.claims);
    return 0;
}
