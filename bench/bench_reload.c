/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_reload: what a policy reload costs, and whether requests notice.
 *
 * In process, with the shipped catalog and default policy as files and the
 * embedded demo cluster:
 *   - reload: af_reload_now with the policy file alternating between two
 *     versions (the shipped policy, and the same with one comment line
 *     added, so every reload swaps), p50/p99/max;
 *   - unchanged: af_reload_now when nothing changed (read, parse, hash);
 *   - filter: af_service_handle filter on the demo cluster, p50/p99/max,
 *     first quiet, then while another thread reloads back to back.
 * Usage: bench_reload [reloads] [requests]   (default 500 and 20000)
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/metrics.h"
#include "accelfit/service.h"
#include "accelfit/reload.h"
#include "accelfit/util.h"

#define FILTER_BODY "tests/fixtures/kube-scheduler/filter-nodecache-true.json"

static char dir[] = "/tmp/bench_reload_XXXXXX";
static char policy_path[64], catalog_path[64];

static void write_file(const char *path, const char *text, size_t len, const char *extra)
{
    char tmp[80];
    FILE *f;

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    af_assert(f != NULL);
    af_assert(fwrite(text, 1, len, f) == len && fputs(extra, f) >= 0);
    af_assert(fclose(f) == 0 && rename(tmp, path) == 0);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *ns, size_t n, double unit, const char *uname)
{
    qsort(ns, n, sizeof(*ns), cmp_u64);
    printf("  %-34s p50 %8.2f %s   p99 %8.2f %s   max %8.2f %s   (%zu)\n", what,
           (double)ns[n / 2] / unit, uname, (double)ns[n * 99 / 100] / unit, uname,
           (double)ns[n - 1] / unit, uname, n);
}

struct reloader_loop {
    struct af_reload *r;
    atomic_bool stop;
    size_t swaps;
};

static void *reload_loop(void *arg)
{
    struct reloader_loop *l = arg;

    while (!atomic_load(&l->stop)) {
        write_file(policy_path, af_embedded_policy_yaml, af_embedded_policy_yaml_len,
                   l->swaps % 2 ? "" : "\n# b\n");
        af_assert(af_reload_now(l->r) == AF_RELOAD_OK);
        l->swaps++;
    }
    return NULL;
}

static void filter_run(struct af_service *svc, const struct af_buf *body, uint64_t *ns, size_t n)
{
    struct af_buf out = AF_BUF_INIT(1u << 20);

    for (size_t i = 0; i < n; i++) {
        uint64_t t0 = af_now_ns();
        af_assert(af_service_handle(svc, AF_VERB_FILTER, body->buf, body->len, &out) == 200);
        ns[i] = af_now_ns() - t0;
        af_buf_reset(&out);
    }
    af_buf_release(&out);
}

int main(int argc, char **argv)
{
    size_t reloads = argc > 1 ? (size_t)atol(argv[1]) : 500;
    size_t requests = argc > 2 ? (size_t)atol(argv[2]) : 20000;
    struct af_buf body = AF_BUF_INIT(1u << 20);
    struct af_config *cfg = NULL;
    struct af_config_holder holder;
    struct af_publisher pub;
    struct af_service svc;
    struct af_reload_options ro;
    struct af_reload *r = NULL;
    struct af_cache *cache;
    struct af_error err;
    struct reloader_loop loop;
    pthread_t t;
    uint64_t *ns;

    if (reloads < 2 || requests < 2) {
        fprintf(stderr, "usage: bench_reload [reloads >= 2] [requests >= 2]\n");
        return 2;
    }
    if (af_buf_read_file(&body, FILTER_BODY) != 0) {
        fprintf(stderr, "bench_reload: run from the repository root (needs %s)\n", FILTER_BODY);
        return 2;
    }
    af_log_level = AF_LOG_WARN;   /* a line per reload would be the benchmark */
    af_assert(mkdtemp(dir) != NULL);
    snprintf(policy_path, sizeof(policy_path), "%s/policy.yaml", dir);
    snprintf(catalog_path, sizeof(catalog_path), "%s/catalog.yaml", dir);
    write_file(policy_path, af_embedded_policy_yaml, af_embedded_policy_yaml_len, "");
    write_file(catalog_path, af_embedded_catalog_yaml, af_embedded_catalog_yaml_len, "");

    memset(&err, 0, sizeof(err));
    af_assert(af_config_load(&cfg, catalog_path, policy_path, &err) == 0);
    af_config_holder_init(&holder, cfg);
    af_publisher_init(&pub);
    cache = af_cache_new();
    af_assert(af_codec_decode_cluster(cfg, "demo", af_embedded_demo_cluster_yaml,
                                      af_embedded_demo_cluster_yaml_len, af_cache_upsert_item, cache,
                                      &err) == 0);
    af_cache_set_synced(cache, true);
    af_publisher_publish(&pub, af_cache_snapshot(cache));
    af_cache_free(cache);
    memset(&svc, 0, sizeof(svc));
    svc.config = &holder;
    svc.pub = &pub;
    svc.metrics = af_metrics_new();
    memset(&ro, 0, sizeof(ro));
    ro.policy_path = policy_path;
    ro.catalog_path = catalog_path;
    af_assert(af_reload_start(&r, &holder, &ro) == 0);

    printf("bench_reload: shipped catalog (%zu bytes) and policy (%zu bytes) as files, demo "
           "cluster\n", af_embedded_catalog_yaml_len, af_embedded_policy_yaml_len);
    ns = af_xcalloc(reloads > requests ? reloads : requests, sizeof(*ns));
    for (size_t i = 0; i < reloads; i++) {
        uint64_t t0;
        write_file(policy_path, af_embedded_policy_yaml, af_embedded_policy_yaml_len,
                   i % 2 ? "" : "\n# b\n");
        t0 = af_now_ns();
        af_assert(af_reload_now(r) == AF_RELOAD_OK);
        ns[i] = af_now_ns() - t0;
    }
    report("reload (swapped)", ns, reloads, 1e6, "ms");
    for (size_t i = 0; i < reloads; i++) {
        uint64_t t0 = af_now_ns();
        af_assert(af_reload_now(r) == AF_RELOAD_UNCHANGED);
        ns[i] = af_now_ns() - t0;
    }
    report("reload (unchanged)", ns, reloads, 1e6, "ms");

    filter_run(&svc, &body, ns, requests);
    report("filter, quiet", ns, requests, 1e3, "us");
    memset(&loop, 0, sizeof(loop));
    loop.r = r;
    atomic_init(&loop.stop, false);
    af_assert(pthread_create(&t, NULL, reload_loop, &loop) == 0);
    filter_run(&svc, &body, ns, requests);
    atomic_store(&loop.stop, true);
    af_assert(pthread_join(t, NULL) == 0);
    report("filter, reloading back to back", ns, requests, 1e3, "us");
    printf("  (%zu reloads during the second run)\n", loop.swaps);

    af_reload_stop(r);
    af_free(ns);
    af_metrics_free(svc.metrics);
    af_publisher_destroy(&pub);
    af_config_holder_destroy(&holder);
    af_buf_release(&body);
    unlink(policy_path);
    unlink(catalog_path);
    rmdir(dir);
    return 0;
}
