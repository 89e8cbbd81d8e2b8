/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_cache: the cluster cache at EKS scale, in process.
 *
 * Synthesizes N nodes and P pods (default 5,000 and 150,000) as NodeList /
 * PodList JSON pages of 500 items and as watch events, then measures:
 *   - initial sync: decode (codec) + apply (cache, resync) + first snapshot
 *   - watch events applied per second (decode + apply; MODIFIED pods that
 *     move between nodes, plus ADDED/DELETED churn)
 *   - snapshot build time p50 / p99 (after each batch of 100 events)
 *   - re-pricing every node when a new price book comes (--aws-pricing): p50 / p99 of
 *     af_cache_reprice with books that change every node's price, and of the snapshot after
 *   - resident memory (VmRSS, VmHWM from /proc/self/status)
 * Usage: bench_cache [nodes] [pods]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/prices.h"
#include "accelfit/util.h"

static const char *const types[] = {"p4d.24xlarge", "g5.12xlarge", "trn1.32xlarge",
                                    "inf2.24xlarge", "m6i.4xlarge", "g6.xlarge"};

static void node_json(struct af_buf *b, int i)
{
    const char *t = types[i % 6];
    int gpus = (i % 6 == 0) ? 8 : (i % 6 == 1) ? 4 : (i % 6 == 5) ? 1 : 0;
    int neuron = (i % 6 == 2) ? 16 : (i % 6 == 3) ? 6 : 0;
    int rc = af_buf_printf(
        b,
        "{\"metadata\":{\"name\":\"ip-10-%d-%d-%d.us-west-2.compute.internal\",\"uid\":"
        "\"node-uid-%08d\",\"resourceVersion\":\"%d\",\"labels\":{\"kubernetes.io/arch\":"
        "\"amd64\",\"node.kubernetes.io/instance-type\":\"%s\",\"karpenter.sh/capacity-type\":"
        "\"%s\",\"topology.kubernetes.io/region\":\"us-west-2\",\"topology.kubernetes.io/zone\":"
        "\"us-west-2%c\",\"kubernetes.io/hostname\":"
        "\"ip-10-%d-%d-%d\"}},\"spec\":{\"providerID\":\"aws:///us-west-2a/i-%08x\"},"
        "\"status\":{\"capacity\":{\"cpu\":\"96\",\"memory\":\"1176466116Ki\",\"pods\":\"110\","
        "\"nvidia.com/gpu\":\"%d\",\"aws.amazon.com/neuron\":\"%d\"},\"allocatable\":{\"cpu\":"
        "\"95690m\",\"memory\":\"1176466116Ki\",\"pods\":\"110\",\"nvidia.com/gpu\":\"%d\","
        "\"aws.amazon.com/neuron\":\"%d\"},\"conditions\":[{\"type\":\"Ready\",\"status\":"
        "\"True\"}]}}",
        i / 65536, (i / 256) % 256, i % 256, i, 100 + i, t, i % 3 ? "on-demand" : "spot",
        'a' + i % 3, i / 65536, (i / 256) % 256, i % 256, (unsigned)i, gpus, neuron, gpus,
        neuron);
    af_assert(rc == 0);
}

static void pod_json(struct af_buf *b, int i, int node, int rv, int cpu_m)
{
    int rc = af_buf_printf(
        b,
        "{\"metadata\":{\"name\":\"worker-%d\",\"namespace\":\"team-%d\",\"uid\":"
        "\"pod-uid-%08d\",\"resourceVersion\":\"%d\",\"labels\":{\"app\":\"trainer\","
        "\"accelfit.io/tenant\":\"t%d\"},\"annotations\":{\"accelfit.io/workload\":\"training\","
        "\"accelfit.io/model-params\":\"7B\"},\"ownerReferences\":[{\"apiVersion\":\"batch/v1\","
        "\"kind\":\"Job\",\"name\":\"job-%d\",\"uid\":\"job-uid-%d\",\"controller\":true}]},"
        "\"spec\":{\"nodeName\":\"ip-10-%d-%d-%d.us-west-2.compute.internal\",\"containers\":[{"
        "\"name\":\"main\",\"image\":\"nvcr.io/nvidia/pytorch:24.01-py3\",\"resources\":{"
        "\"requests\":{\"cpu\":\"%dm\",\"memory\":\"2Gi\"},\"limits\":{\"memory\":\"2Gi\"}}}],"
        "\"initContainers\":[{\"name\":\"init\",\"image\":\"busybox\",\"resources\":{"
        "\"requests\":{\"cpu\":\"100m\"}}}],\"schedulerName\":\"default-scheduler\"},"
        "\"status\":{\"phase\":\"Running\",\"qosClass\":\"Burstable\"}}",
        i, i % 40, i, rv, i % 40, i / 10, i / 10, node / 65536, (node / 256) % 256, node % 256,
        cpu_m);
    af_assert(rc == 0);
}

struct sink {
    struct af_cache *c;
};

static void apply_item(void *ud, struct af_node_info *n, struct af_pod_info *p)
{
    struct sink *s = ud;
    if (n)
        af_cache_upsert_node(s->c, n);
    if (p)
        af_cache_upsert_pod(s->c, p);
}

static void mem_kib(long *rss, long *hwm)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");
    *rss = *hwm = -1;
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        sscanf(line, "VmRSS: %ld", rss);
        sscanf(line, "VmHWM: %ld", hwm);
    }
    fclose(f);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int nn = argc > 1 ? atoi(argv[1]) : 5000;
    int np = argc > 2 ? atoi(argv[2]) : 150000;
    const int page = 500;
    struct af_config *cfg;
    struct af_error err;
    struct af_buf b = AF_BUF_INIT(0);
    uint64_t t_decode_apply = 0, t_gen = 0;
    int rv = 1000;

    if (nn <= 0 || np < 0) {
        fprintf(stderr, "usage: bench_cache [nodes] [pods]\n");
        return 2;
    }
    af_log_level = AF_LOG_WARN;
    if (af_config_load(&cfg, NULL, NULL, &err)) {
        fprintf(stderr, "config: %s\n", err.text);
        return 1;
    }
    struct af_cache *c = af_cache_new();
    struct sink sink = {c};
    long rss0, hwm0;
    mem_kib(&rss0, &hwm0);

    /* ---- initial sync: pages of 500, as the paginated LIST delivers them ---- */
    uint64_t t0 = af_now_ns();
    af_cache_begin_resync(c, AF_KIND_NODE);
    af_cache_begin_resync(c, AF_KIND_POD);
    size_t list_bytes = 0;
    for (int kind = 0; kind < 2; kind++) {
        int total = kind == 0 ? nn : np;
        for (int start = 0; start < total; start += page) {
            uint64_t g0 = af_now_ns();
            af_buf_reset(&b);
            int rc = af_buf_printf(&b, "{\"kind\":\"%s\",\"apiVersion\":\"v1\",\"metadata\":{"
                                       "\"resourceVersion\":\"%d\"},\"items\":[",
                                   kind == 0 ? "NodeList" : "PodList", rv);
            af_assert(rc == 0);
            for (int i = start; i < start + page && i < total; i++) {
                if (i > start)
                    af_assert(af_buf_puts(&b, ",") == 0);
                if (kind == 0)
                    node_json(&b, i);
                else
                    pod_json(&b, i, i % nn, rv, 500 + i % 7);
            }
            af_assert(af_buf_puts(&b, "]}") == 0);
            list_bytes += b.len;
            uint64_t g1 = af_now_ns();
            t_gen += g1 - g0;
            if (af_codec_decode_list(cfg, b.buf, b.len, apply_item, &sink, NULL, NULL, &err)) {
                fprintf(stderr, "decode: %s\n", err.text);
                return 1;
            }
            t_decode_apply += af_now_ns() - g1;
        }
    }
    af_cache_end_resync(c, AF_KIND_NODE);
    af_cache_end_resync(c, AF_KIND_POD);
    af_cache_set_synced(c, true);
    uint64_t s0 = af_now_ns();
    struct af_snapshot *snap = af_cache_snapshot(c);
    uint64_t t_first_snap = af_now_ns() - s0;
    uint64_t t_sync = af_now_ns() - t0 - t_gen;
    long rss_sync, hwm_sync;
    mem_kib(&rss_sync, &hwm_sync);
    af_assert(snap->n_nodes == (size_t)nn && snap->n_pods == (size_t)np);

    /* ---- watch events: pods move, get resized, churn (ADDED/DELETED) ---- */
    const int batches = 400, per_batch = 100;
    uint64_t *snap_ns = calloc((size_t)batches, sizeof(uint64_t));
    uint64_t t_events = 0;
    size_t n_events = 0;
    struct af_buf ev = AF_BUF_INIT(0);
    unsigned seed = 7;
    for (int bi = 0; bi < batches; bi++) {
        /* generate a batch of event lines (not timed) */
        af_buf_reset(&ev);
        for (int j = 0; j < per_batch; j++) {
            seed = seed * 1103515245u + 12345u;
            int i = (int)((seed >> 4) % (unsigned)np);
            int kind = (int)((seed >> 24) % 10);
            const char *type = kind < 8 ? "MODIFIED" : kind < 9 ? "DELETED" : "ADDED";
            af_assert(af_buf_printf(&ev, "{\"type\":\"%s\",\"object\":", type) == 0);
            pod_json(&ev, i, (int)((seed >> 8) % (unsigned)nn), ++rv, 100 + (int)(seed % 900));
            af_assert(af_buf_puts(&ev, "}\n") == 0);
        }
        uint64_t e0 = af_now_ns();
        const char *p = ev.buf, *end = ev.buf + ev.len;
        while (p < end) {
            const char *nl = memchr(p, '\n', (size_t)(end - p));
            struct af_watch_event we;
            if (af_codec_decode_watch_event(cfg, AF_KIND_POD, p, (size_t)(nl - p), &we, &err)) {
                fprintf(stderr, "watch decode: %s\n", err.text);
                return 1;
            }
            if (we.type == AF_WATCH_DELETED)
                af_cache_delete_pod(c, we.pod->ns, we.pod->name);
            else
                af_cache_upsert_pod(c, af_pod_info_ref(we.pod));
            af_watch_event_clear(&we);
            n_events++;
            p = nl + 1;
        }
        uint64_t e1 = af_now_ns();
        t_events += e1 - e0;
        struct af_snapshot *ns = af_cache_snapshot(c);
        snap_ns[bi] = af_now_ns() - e1;
        af_snapshot_unref(snap); /* as publishing does: the old one goes */
        snap = ns;
    }
    qsort(snap_ns, (size_t)batches, sizeof(uint64_t), cmp_u64);

    /* ---- a new price book: every node priced again (two books, alternately) ---- */
    enum { REPRICES = 40 };
    uint64_t reprice_ns[REPRICES], resnap_ns[REPRICES];
    struct af_prices *books[2];
    for (int k = 0; k < 2; k++) {
        books[k] = af_prices_new();
        for (size_t t = 0; t < AF_ARRAY_SIZE(types); t++) {
            af_assert(af_prices_set(books[k], AF_PRICE_ON_DEMAND, "us-west-2", types[t],
                                    1.0 + (double)t + 0.01 * k, 1) == 0);
            for (char z = 'a'; z <= 'c'; z++) {
                char zone[16];
                snprintf(zone, sizeof(zone), "us-west-2%c", z);
                af_assert(af_prices_set(books[k], AF_PRICE_SPOT, zone, types[t],
                                        0.4 + (double)t + 0.01 * k, 1) == 0);
            }
        }
        af_prices_freeze(books[k]);
    }
    size_t repriced = 0;
    for (int r = 0; r < REPRICES; r++) {
        uint64_t r0 = af_now_ns();
        struct af_price_inputs in = {.live = books[r % 2]};
        repriced += af_cache_reprice(c, cfg->catalog, cfg->policy, &in);
        uint64_t r1 = af_now_ns();
        struct af_snapshot *ns = af_cache_snapshot(c);
        resnap_ns[r] = af_now_ns() - r1;
        reprice_ns[r] = r1 - r0;
        af_snapshot_unref(snap);
        snap = ns;
    }
    af_assert(repriced == (size_t)REPRICES * (size_t)nn);
    qsort(reprice_ns, REPRICES, sizeof(uint64_t), cmp_u64);
    qsort(resnap_ns, REPRICES, sizeof(uint64_t), cmp_u64);
    af_prices_unref(books[0]);
    af_prices_unref(books[1]);
    long rss_end, hwm_end;
    mem_kib(&rss_end, &hwm_end);

    printf("accelfit cache benchmark: %d nodes, %d pods (%zu pods in cache at end)\n", nn, np,
           af_cache_pod_count(c));
    printf("%-44s %14s\n", "metric", "value");
    printf("%-44s %14.1f\n", "list JSON synthesized (MiB)", (double)list_bytes / 1048576.0);
    printf("%-44s %14.3f\n", "initial sync: decode+apply+snapshot (s)", (double)t_sync / 1e9);
    printf("%-44s %14.3f\n", "  of which decode+apply (s)", (double)t_decode_apply / 1e9);
    printf("%-44s %14.2f\n", "  of which first snapshot (ms)", (double)t_first_snap / 1e6);
    printf("%-44s %14.0f\n", "watch events applied per second (decode+apply)",
           (double)n_events / ((double)t_events / 1e9));
    printf("%-44s %14.2f\n", "snapshot build p50 (ms)", (double)snap_ns[batches / 2] / 1e6);
    printf("%-44s %14.2f\n", "snapshot build p99 (ms)",
           (double)snap_ns[(batches * 99) / 100] / 1e6);
    printf("%-44s %14.2f\n", "re-price every node p50 (ms)", (double)reprice_ns[REPRICES / 2] / 1e6);
    printf("%-44s %14.2f\n", "re-price every node p99 (ms)",
           (double)reprice_ns[(REPRICES * 99) / 100] / 1e6);
    printf("%-44s %14.2f\n", "  snapshot after it p50 (ms)", (double)resnap_ns[REPRICES / 2] / 1e6);
    printf("%-44s %14.1f\n", "VmRSS before (MiB)", (double)rss0 / 1024.0);
    printf("%-44s %14.1f\n", "VmRSS after sync, 1 snapshot held (MiB)", (double)rss_sync / 1024.0);
    printf("%-44s %14.1f\n", "VmRSS after events (MiB)", (double)rss_end / 1024.0);
    printf("%-44s %14.1f\n", "VmHWM peak (MiB)", (double)hwm_end / 1024.0);

    af_snapshot_unref(snap);
    af_cache_free(c);
    af_config_unref(cfg);
    af_buf_release(&b);
    af_buf_release(&ev);
    free(snap_ns);
    return 0;
}
