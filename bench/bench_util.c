/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_util: request latency with live utilization off and on.
 *
 * A cluster of 5,000 A10G/A100 GPU nodes (one workload pod on every other node) is
 * built in a cache; a utilization snapshot with one DCGM_FI_DEV_GPU_UTIL series per
 * GPU (25,000 series) is written as a recorded Prometheus answer and loaded the way
 * `serve --metrics-file` loads it. Filter and prioritize of a 1-GPU pod with 500
 * candidate names then run through af_service_handle (the server's whole work
 * without the transport) three ways: no utilization source; the source on with
 * prefer-idle scoring; and on with the shared-GPU filter post-pass asked for too.
 * The request path reads the published snapshot and does no I/O, so the three
 * should cost the same up to the few lookups per candidate.
 *
 * Usage: bench_util [requests-per-verb [candidates]]   (default 2000 and 500)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accelfit/cache.h"
#include "accelfit/config.h"
#include "accelfit/metrics.h"
#include "accelfit/service.h"
#include "accelfit/prom.h"
#include "accelfit/utilization.h"
#include "accelfit/util.h"

#define N_NODES 5000
static int n_candidates = 500;

static void node_name(char *buf, size_t n, int i)
{
    snprintf(buf, n, "ip-10-%d-%d-%d.us-west-2.compute.internal", 1 + i / 65536, (i / 256) % 256,
             i % 256);
}

static struct af_snapshot *build_cluster(void)
{
    struct af_cache *c = af_cache_new();
    struct af_snapshot *s;

    for (int i = 0; i < N_NODES; i++) {
        struct af_node_info *n = af_node_info_new();
        char name[96];
        bool big = i % 5 == 0;
        node_name(name, sizeof(name), i);
        n->name = af_xstrdup(name);
        n->cls = big ? AF_CLASS_NVIDIA_A100 : AF_CLASS_NVIDIA_A10G;
        n->kind = AF_ACCEL_GPU;
        n->class_source = "bench";
        n->allocatable.v[AF_RES_CPU] = big ? 95000 : 15000;
        n->allocatable.v[AF_RES_MEMORY] = (big ? 1100LL : 60LL) << 30;
        n->allocatable.v[AF_RES_GPU] = big ? 8 : 4;
        n->allocatable.v[AF_RES_PODS] = 110;
        n->price_known = true;
        n->hourly_usd = big ? 21.96 : 5.67;
        n->gpu_shared = i % 3 == 0;
        af_cache_upsert_node(c, n);
        if (i % 2 == 0) {
            struct af_pod_info *p = af_pod_info_new();
            char pname[64];
            snprintf(pname, sizeof(pname), "w-%d", i);
            p->ns = af_xstrdup("default");
            p->name = af_xstrdup(pname);
            p->uid = af_xstrdup(pname);
            p->node_name = af_xstrdup(name);
            p->requests.v[AF_RES_GPU] = 1;
            p->requests.v[AF_RES_CPU] = 2000;
            p->requests.v[AF_RES_MEMORY] = 8LL << 30;
            af_cache_upsert_pod(c, p);
        }
    }
    af_cache_set_synced(c, true);
    s = af_cache_snapshot(c);
    af_cache_free(c);
    return s;
}

/* {"queries":{"gpu_util": <a vector answer, one series per GPU>}} in a temporary file. */
static char *write_metrics(void)
{
    static char path[] = "/tmp/bench-util-XXXXXX";
    struct af_buf b = AF_BUF_INIT(0);
    int fd = mkstemp(path);
    unsigned seed = 7;
    FILE *f;

    if (fd < 0 || af_buf_puts(&b, "{\"queries\":{\"gpu_util\":{\"status\":\"success\",\"data\":"
                                  "{\"resultType\":\"vector\",\"result\":["))
        abort();
    for (int i = 0; i < N_NODES; i++) {
        char name[96];
        node_name(name, sizeof(name), i);
        for (int g = 0; g < (i % 5 == 0 ? 8 : 4); g++) {
            seed = seed * 1103515245u + 12345u;
            if (af_buf_printf(&b,
                              "%s{\"metric\":{\"Hostname\":\"%s\",\"gpu\":\"%d\",\"modelName\":"
                              "\"NVIDIA A10G\"%s},\"value\":[1795414896,\"%u\"]}",
                              i || g ? "," : "", name, g,
                              g == 0 && i % 2 == 0 ? ",\"pod\":\"w\"" : "", (seed >> 8) % 100))
                abort();
        }
    }
    if (af_buf_puts(&b, "]}}}}"))
        abort();
    f = fdopen(fd, "w");
    if (!f || fwrite(b.buf, 1, b.len, f) != b.len || fclose(f))
        abort();
    af_buf_release(&b);
    return path;
}

static char *request(unsigned seed)
{
    struct af_buf b = AF_BUF_INIT(0);

    if (af_buf_puts(&b, "{\"Pod\":{\"metadata\":{\"name\":\"bench-0\",\"namespace\":\"default\","
                        "\"uid\":\"u\",\"annotations\":{\"accelfit.io/workload\":\"inference\"}},"
                        "\"spec\":{\"containers\":[{\"name\":\"m\",\"resources\":{\"requests\":"
                        "{\"nvidia.com/gpu\":\"1\",\"cpu\":\"2\",\"memory\":\"8Gi\"}}}]}},"
                        "\"Nodes\":null,\"NodeNames\":["))
        abort();
    for (int i = 0; i < n_candidates; i++) {
        char name[96];
        seed = seed * 1103515245u + 12345u;
        node_name(name, sizeof(name), (int)((seed >> 8) % N_NODES));
        if (af_buf_printf(&b, "%s\"%s\"", i ? "," : "", name))
            abort();
    }
    if (af_buf_puts(&b, "]}"))
        abort();
    return af_buf_detach(&b, NULL);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void run(struct af_service *svc, const char *label, char *const *bodies, size_t nb,
                size_t n)
{
    static const struct {
        enum af_verb verb;
        const char *name;
    } verbs[] = {{AF_VERB_FILTER, "filter"}, {AF_VERB_PRIORITIZE, "prioritize"}};
    uint64_t *ns = calloc(n, sizeof(*ns));
    struct af_buf out = AF_BUF_INIT(0);

    for (size_t v = 0; v < AF_ARRAY_SIZE(verbs); v++) {
        for (size_t i = 0; i < n; i++) {
            uint64_t t0 = af_now_ns();
            af_buf_reset(&out);
            if (af_service_handle(svc, verbs[v].verb, bodies[i % nb], strlen(bodies[i % nb]),
                                  &out) != 200)
                abort();
            ns[i] = af_now_ns() - t0;
        }
        qsort(ns, n, sizeof(*ns), cmp_u64);
        printf("  %-34s %-10s p50 %7.1f us   p99 %7.1f us\n", label, verbs[v].name,
               (double)ns[n / 2] / 1e3, (double)ns[(n * 99) / 100] / 1e3);
    }
    af_buf_release(&out);
    free(ns);
}

static struct af_config *config(const char *extra)
{
    struct af_buf b = AF_BUF_INIT(0);
    struct af_config *c = NULL;
    struct af_error err = {0};

    if (af_config_load(&c, NULL, NULL, &err))
        abort();
    if (extra) {
        af_policy_free(c->policy);
        if (af_buf_add(&b, af_embedded_policy_yaml, af_embedded_policy_yaml_len) ||
            af_buf_puts(&b, extra) ||
            af_policy_load_mem(&c->policy, "bench", b.buf, b.len, &err)) {
            fprintf(stderr, "bench_util: %s\n", err.text);
            abort();
        }
    }
    af_buf_release(&b);
    return c;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 2000;
    struct af_publisher pub;
    struct af_config_holder off, on, onf;
    struct af_service svc;
    struct af_prom *prom = NULL;
    struct af_prom_options po;
    char *bodies[8], why[300], *metrics;

    if (argc > 2)
        n_candidates = (int)strtol(argv[2], NULL, 10);
    if (n < 100)
        n = 100;
    if (n_candidates < 1 || n_candidates > N_NODES)
        n_candidates = 500;
    af_log_level = AF_LOG_WARN;
    af_publisher_init(&pub);
    af_publisher_publish(&pub, build_cluster());
    for (size_t i = 0; i < AF_ARRAY_SIZE(bodies); i++)
        bodies[i] = request((unsigned)i + 1);
    af_config_holder_init(&off, config(NULL));
    af_config_holder_init(&on, config("utilization: {scoring: {mode: prefer-idle}}\n"));
    af_config_holder_init(&onf, config("utilization: {scoring: {mode: prefer-idle}, "
                                       "filter: {max_gpu_util: 90}}\n"));
    metrics = write_metrics();
    memset(&po, 0, sizeof(po));
    po.metrics_file = metrics;
    if (af_prom_start(&prom, &po, &on, why, sizeof(why))) {
        fprintf(stderr, "bench_util: %s\n", why);
        return 1;
    }
    unlink(metrics);

    printf("bench_util: %d GPU nodes, %d candidates per request, %zu requests per verb\n",
           N_NODES, n_candidates, n);
    memset(&svc, 0, sizeof(svc));
    svc.pub = &pub;
    svc.config = &off;
    run(&svc, "utilization off", bodies, AF_ARRAY_SIZE(bodies), n);
    svc.config = &on;
    run(&svc, "policy with utilization:, no source", bodies, AF_ARRAY_SIZE(bodies), n);
    svc.util = prom;
    run(&svc, "utilization on (prefer-idle)", bodies, AF_ARRAY_SIZE(bodies), n);
    svc.config = &onf;
    run(&svc, "on + filter max_gpu_util", bodies, AF_ARRAY_SIZE(bodies), n);

    af_prom_stop(prom);
    af_config_holder_destroy(&off);
    af_config_holder_destroy(&on);
    af_config_holder_destroy(&onf);
    af_publisher_destroy(&pub);
    for (size_t i = 0; i < AF_ARRAY_SIZE(bodies); i++)
        af_free(bodies[i]);
    return 0;
}
