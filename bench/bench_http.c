/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_http: filter and prioritize over real HTTP, the way kube-scheduler
 * calls them (POST, names mode, one keep-alive connection, filter then
 * prioritize for each pod).
 *
 * The server runs in process on its own thread (af_http_run on 127.0.0.1),
 * the client is libcurl on the main thread. Two clusters:
 *   demo   the embedded demo cluster (20 nodes) with the recorded
 *          kube-scheduler request (tests/fixtures/kube-scheduler/, 2 candidates)
 *   5k     a generated cluster of 5,000 nodes across GPU, Neuron and CPU
 *          classes with 15,000 pods, written to a temporary JSON file and
 *          loaded like `serve --cluster`; 500 candidate names per request
 * For each: latency p50/p99/max and requests/s per verb as the client sees
 * them, the same calls without HTTP (af_service_handle) for the server-side
 * cost, and the resident memory of the process.
 *
 * Usage: bench_http [requests-per-verb]   (default 5000)
 *        bench_http --service-only [requests-per-verb]
 *            only the 5k cluster, only af_service_handle (no HTTP, no demo
 *            cluster): a quiet loop to profile the server's own work under
 *            perf or callgrind.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/http.h"
#include "accelfit/metrics.h"
#include "accelfit/service.h"
#include "accelfit/util.h"

#define N_NODES 5000
#define N_PODS 15000
#define N_CANDIDATES 500

static const char gpu_pod[] =
    "{\"metadata\":{\"name\":\"bench-0\",\"namespace\":\"default\",\"uid\":\"bench-uid\","
    "\"annotations\":{\"accelfit.io/workload\":\"inference\"}},\"spec\":{\"containers\":[{"
    "\"name\":\"main\",\"image\":\"x\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"1\","
    "\"cpu\":\"4\",\"memory\":\"16Gi\"},\"limits\":{\"nvidia.com/gpu\":\"1\"}}}]},"
    "\"status\":{\"phase\":\"Pending\"}}";

/* ---- the generated cluster ----------------------------------------------------------------- */

struct ntype {
    const char *type;
    int gpus, neuron, cores;
    const char *cpu, *mem;
};

static const struct ntype ntypes[] = {
    {"p4d.24xlarge", 8, 0, 0, "95690m", "1176466116Ki"},
    {"p5.48xlarge", 8, 0, 0, "191450m", "2097152000Ki"},
    {"g5.xlarge", 1, 0, 0, "3920m", "15432508Ki"},
    {"g5.12xlarge", 4, 0, 0, "47810m", "193000000Ki"},
    {"g6.xlarge", 1, 0, 0, "3920m", "15432508Ki"},
    {"g4dn.xlarge", 1, 0, 0, "3920m", "15432508Ki"},
    {"trn1.32xlarge", 0, 16, 32, "127610m", "520643584Ki"},
    {"inf2.xlarge", 0, 1, 2, "3920m", "15432508Ki"},
    {"inf2.24xlarge", 0, 6, 12, "95690m", "371000000Ki"},
    {"c6i.4xlarge", 0, 0, 0, "15890m", "31550284Ki"},
    {"m6i.4xlarge", 0, 0, 0, "15890m", "63100568Ki"},
};

static void node_name(char *buf, size_t n, int i)
{
    snprintf(buf, n, "ip-10-%d-%d-%d.us-west-2.compute.internal", 1 + i / 65536, (i / 256) % 256,
             i % 256);
}

static void put(struct af_buf *b, const char *s)
{
    if (af_buf_puts(b, s) != 0)
        af_assert(!"cluster file too large");
}

static char *write_cluster(void)
{
    struct af_buf b = AF_BUF_INIT(0);
    char *path = af_xasprintf("/tmp/accelfit-bench-cluster-%d.json", (int)getpid());
    FILE *f;

    put(&b, "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[");
    for (int i = 0; i < N_NODES; i++) {
        const struct ntype *t = &ntypes[i % AF_ARRAY_SIZE(ntypes)];
        char name[96], *s;
        node_name(name, sizeof(name), i);
        s = af_xasprintf(
            "%s{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"labels\":{"
            "\"kubernetes.io/arch\":\"amd64\",\"kubernetes.io/hostname\":\"%s\","
            "\"node.kubernetes.io/instance-type\":\"%s\",\"karpenter.sh/capacity-type\":\"%s\","
            "\"topology.kubernetes.io/zone\":\"us-west-2%c\"}},\"status\":{\"allocatable\":{"
            "\"cpu\":\"%s\",\"memory\":\"%s\",\"pods\":\"110\",\"nvidia.com/gpu\":\"%d\","
            "\"aws.amazon.com/neuron\":\"%d\",\"aws.amazon.com/neuroncore\":\"%d\"}}}",
            i ? "," : "", name, name, t->type, i % 4 == 3 ? "spot" : "on-demand", 'a' + i % 3,
            t->cpu, t->mem, t->gpus, t->neuron, t->cores);
        put(&b, s);
        af_free(s);
    }
    for (int p = 0; p < N_PODS; p++) {
        int node = (p * 7919) % N_NODES;
        const struct ntype *t = &ntypes[node % AF_ARRAY_SIZE(ntypes)];
        char name[96], extra[96], *s;
        node_name(name, sizeof(name), node);
        extra[0] = '\0';
        if (t->gpus && p % 2 == 0)
            snprintf(extra, sizeof(extra), ",\"nvidia.com/gpu\":\"1\"");
        else if (t->neuron && p % 2 == 0)
            snprintf(extra, sizeof(extra), ",\"aws.amazon.com/neuron\":\"1\"");
        s = af_xasprintf(
            ",{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"worker-%d\","
            "\"namespace\":\"team-%d\",\"uid\":\"pod-uid-%08d\",\"labels\":{\"app\":\"w\"}},"
            "\"spec\":{\"nodeName\":\"%s\",\"containers\":[{\"name\":\"main\",\"image\":\"x\","
            "\"resources\":{\"requests\":{\"cpu\":\"500m\",\"memory\":\"1Gi\"%s}}}]},"
            "\"status\":{\"phase\":\"Running\"}}",
            p, p % 40, p, name, extra);
        put(&b, s);
        af_free(s);
    }
    put(&b, "]}\n");
    f = fopen(path, "w");
    af_assert(f != NULL);
    af_assert(fwrite(b.buf, 1, b.len, f) == b.len);
    fclose(f);
    af_buf_release(&b);
    return path;
}

/* {"Pod":..., "Nodes":null, "NodeNames":[500 names spread over the cluster]} */
static char *big_request(unsigned seed)
{
    struct af_buf b = AF_BUF_INIT(0);

    put(&b, "{\"Pod\":");
    put(&b, gpu_pod);
    put(&b, ",\"Nodes\":null,\"NodeNames\":[");
    for (int i = 0; i < N_CANDIDATES; i++) {
        char name[96];
        seed = seed * 1103515245u + 12345u;
        node_name(name, sizeof(name), (int)((seed >> 8) % N_NODES));
        put(&b, i ? ",\"" : "\"");
        put(&b, name);
        put(&b, "\"");
    }
    put(&b, "]}");
    return af_buf_detach(&b, NULL);
}

/* ---- the service and the server thread ------------------------------------------------------- */

struct bench_server {
    struct af_config_holder holder;
    struct af_publisher pub;
    struct af_service svc;
    struct af_http_options opt;
    char listen[64];
    volatile sig_atomic_t stop;
    pthread_t thread;
    int port;
};

static void load_cluster(struct bench_server *s, const char *name, const char *text, size_t len)
{
    struct af_config *cfg = af_config_holder_get(&s->holder);
    struct af_cache *cache = af_cache_new();
    struct af_error err;
    int rc;

    memset(&err, 0, sizeof(err));
    rc = af_codec_decode_cluster(cfg, name, text, len, af_cache_upsert_item, cache, &err);
    if (rc != 0) {
        char msg[1024];
        af_error_format(&err, msg, sizeof(msg));
        fprintf(stderr, "bench_http: cannot load %s: %s\n", name, msg);
        exit(1);
    }
    af_cache_set_synced(cache, true);
    af_publisher_publish(&s->pub, af_cache_snapshot(cache));
    af_cache_free(cache);
    af_config_unref(cfg);
}

static void *serve_thread(void *ud)
{
    struct bench_server *s = ud;

    if (af_http_run(&s->opt, &s->svc, &s->stop) != 0) {
        fprintf(stderr, "bench_http: server failed\n");
        exit(1);
    }
    return NULL;
}

static int free_port(void)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    af_assert(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    af_assert(getsockname(fd, (struct sockaddr *)&sa, &sl) == 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static void server_start(struct bench_server *s)
{
    struct af_config *cfg = NULL;
    struct af_error err;

    memset(s, 0, sizeof(*s));
    memset(&err, 0, sizeof(err));
    if (af_config_load(&cfg, NULL, NULL, &err) != 0) {
        fprintf(stderr, "bench_http: cannot load the embedded config: %s\n", err.text);
        exit(1);
    }
    af_config_holder_init(&s->holder, cfg);
    af_publisher_init(&s->pub);
    s->svc.config = &s->holder;
    s->svc.pub = &s->pub;
    s->svc.metrics = af_metrics_new();
    s->svc.when_not_ready = AF_NOT_READY_REJECT;
    s->port = free_port();
    snprintf(s->listen, sizeof(s->listen), "127.0.0.1:%d", s->port);
    s->opt.listen = s->listen;
    s->opt.max_body = 16u << 20;
    s->opt.read_timeout_s = 10;
}

static void server_run(struct bench_server *s)
{
    af_assert(pthread_create(&s->thread, NULL, serve_thread, s) == 0);
}

static void server_stop(struct bench_server *s)
{
    s->stop = 1;
    pthread_join(s->thread, NULL);
    af_metrics_free(s->svc.metrics);
    af_publisher_destroy(&s->pub);
    af_config_holder_destroy(&s->holder);
}

/* ---- measuring ------------------------------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void report(const char *what, uint64_t *ns, size_t n, uint64_t wall_ns)
{
    qsort(ns, n, sizeof(*ns), cmp_u64);
    printf("  %-28s p50 %8.1f us   p99 %8.1f us   max %8.1f us   %9.0f req/s\n", what,
           (double)ns[n / 2] / 1e3, (double)ns[(n * 99) / 100] / 1e3, (double)ns[n - 1] / 1e3,
           (double)n / ((double)wall_ns / 1e9));
}

static size_t sink(char *p, size_t sz, size_t n, void *ud)
{
    size_t *total = ud;
    (void)p;
    *total += sz * n;
    return sz * n;
}

static void rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];

    if (!f)
        return;
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, "VmRSS:", 6) || !strncmp(line, "VmHWM:", 6)) {
            line[strcspn(line, "\n")] = '\0';
            printf("  %s\n", line);
        }
    fclose(f);
}

/* Filter then prioritize, `n` times each, over one keep-alive connection. */
static void drive(struct bench_server *s, const char *label, char *const *bodies, size_t nbodies,
                  size_t n)
{
    CURL *c = curl_easy_init();
    struct curl_slist *h = NULL;
    char url_f[128], url_p[128];
    uint64_t *tf = af_xcalloc(n, sizeof(*tf)), *tp = af_xcalloc(n, sizeof(*tp));
    uint64_t wall_f = 0, wall_p = 0;
    size_t received = 0;
    long connects_total = 0;

    snprintf(url_f, sizeof(url_f), "http://%s/filter", s->listen);
    snprintf(url_p, sizeof(url_p), "http://%s/prioritize", s->listen);
    h = curl_slist_append(h, "Content-Type: application/json");
    h = curl_slist_append(h, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &received);
    curl_easy_setopt(c, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    for (size_t i = 0; i < n + 100; i++) {
        const char *body = bodies[i % nbodies];
        for (int v = 0; v < 2; v++) {
            uint64_t t0 = af_now_ns(), dt;
            long status = 0, conns = 0;
            curl_easy_setopt(c, CURLOPT_URL, v ? url_p : url_f);
            curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
            if (curl_easy_perform(c) != CURLE_OK) {
                fprintf(stderr, "bench_http: request failed\n");
                exit(1);
            }
            dt = af_now_ns() - t0;
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
            curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &conns);
            af_assert(status == 200);
            if (i < 100)
                continue;   /* warm-up */
            connects_total += conns;
            if (v) {
                tp[i - 100] = dt;
                wall_p += dt;
            } else {
                tf[i - 100] = dt;
                wall_f += dt;
            }
        }
    }
    printf("%s: %zu requests per verb over HTTP/1.1 keep-alive (%ld reconnects)\n", label, n,
           connects_total);
    report("filter (http)", tf, n, wall_f);
    report("prioritize (http)", tp, n, wall_p);

    /* The same calls without HTTP: what the server thread spends per request. */
    for (int v = 0; v < 2; v++) {
        uint64_t wall = 0;
        for (size_t i = 0; i < n; i++) {
            struct af_buf out = AF_BUF_INIT(64u << 20);
            const char *body = bodies[i % nbodies];
            uint64_t t0 = af_now_ns(), dt;
            int st = af_service_handle(&s->svc, v ? AF_VERB_PRIORITIZE : AF_VERB_FILTER, body,
                                       strlen(body), &out);
            dt = af_now_ns() - t0;
            af_assert(st == 200);
            af_buf_release(&out);
            (v ? tp : tf)[i] = dt;
            wall += dt;
        }
        report(v ? "prioritize (service only)" : "filter (service only)", v ? tp : tf, n, wall);
    }
    rss();
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    af_free(tf);
    af_free(tp);
}

static void wait_healthy(struct bench_server *s)
{
    char url[128];

    snprintf(url, sizeof(url), "http://%s/healthz", s->listen);
    for (int i = 0; i < 200; i++) {
        CURL *c = curl_easy_init();
        long status = 0;
        size_t got = 0;
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, sink);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &got);
        if (curl_easy_perform(c) == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
        if (status == 200)
            return;
        usleep(20000);
    }
    fprintf(stderr, "bench_http: server did not come up\n");
    exit(1);
}

/* The service-only loop over the 5k bodies, for profiling. */
static void service_only(struct bench_server *s, char *const *bodies, size_t nbodies, size_t n)
{
    uint64_t *tf = af_xcalloc(n, sizeof(*tf)), *tp = af_xcalloc(n, sizeof(*tp));

    for (int v = 0; v < 2; v++) {
        uint64_t wall = 0;
        for (size_t i = 0; i < n; i++) {
            struct af_buf out = AF_BUF_INIT(64u << 20);
            const char *body = bodies[i % nbodies];
            uint64_t t0 = af_now_ns(), dt;
            int st = af_service_handle(&s->svc, v ? AF_VERB_PRIORITIZE : AF_VERB_FILTER, body,
                                       strlen(body), &out);
            dt = af_now_ns() - t0;
            af_assert(st == 200);
            af_buf_release(&out);
            (v ? tp : tf)[i] = dt;
            wall += dt;
        }
        report(v ? "prioritize (service only)" : "filter (service only)", v ? tp : tf, n, wall);
    }
    rss();
    af_free(tf);
    af_free(tp);
}

int main(int argc, char **argv)
{
    bool only_service = argc > 1 && !strcmp(argv[1], "--service-only");
    size_t n;
    struct bench_server s;
    struct af_buf fixture = AF_BUF_INIT(1u << 20);
    char *bodies[8];
    uint64_t t0;

    if (only_service) {
        argc--;
        argv++;
    }
    n = argc > 1 ? (size_t)strtoul(argv[1], NULL, 10) : 5000;
    if (n < 100)
        n = 100;
    af_log_level = AF_LOG_WARN;
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_ALL);

    /* (a) the demo cluster with the recorded kube-scheduler request */
    if (only_service)
        goto big;
    server_start(&s);
    load_cluster(&s, "<embedded demo cluster>", af_embedded_demo_cluster_yaml,
                 af_embedded_demo_cluster_yaml_len);
    server_run(&s);
    wait_healthy(&s);
    if (af_buf_read_file(&fixture, "tests/fixtures/kube-scheduler/filter-nodecache-true.json") == 0) {
        bodies[0] = af_buf_detach(&fixture, NULL);
    } else {
        bodies[0] = af_xasprintf("{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":["
                                 "\"ip-10-0-1-40.us-west-2.compute.internal\","
                                 "\"ip-10-0-1-10.us-west-2.compute.internal\"]}",
                                 gpu_pod);
    }
    drive(&s, "demo cluster (20 nodes, 24 pods), recorded request, 2 candidates", bodies, 1, n);
    af_free(bodies[0]);
    server_stop(&s);

    /* (b) 5,000 nodes, 15,000 pods, 500 candidates per request */
big:
    {
        char *path = write_cluster();
        struct af_buf file = AF_BUF_INIT(0);
        server_start(&s);
        t0 = af_now_ns();
        af_assert(af_buf_read_file(&file, path) == 0);
        load_cluster(&s, path, file.buf, file.len);
        printf("\nloaded %d nodes and %d pods from %s (%.1f MiB) in %.0f ms\n", N_NODES, N_PODS,
               path, (double)file.len / (1 << 20), (double)(af_now_ns() - t0) / 1e6);
        af_buf_release(&file);
        unlink(path);
        af_free(path);
        for (size_t i = 0; i < AF_ARRAY_SIZE(bodies); i++)
            bodies[i] = big_request((unsigned)(i * 7 + 1));
        if (only_service) {
            printf("5,000-node cluster, 500 candidate names per request, service only\n");
            service_only(&s, bodies, AF_ARRAY_SIZE(bodies), n);
            af_metrics_free(s.svc.metrics);
            af_publisher_destroy(&s.pub);
            af_config_holder_destroy(&s.holder);
        } else {
            server_run(&s);
            wait_healthy(&s);
            drive(&s, "5,000-node cluster, 500 candidate names per request", bodies,
                  AF_ARRAY_SIZE(bodies), n);
            server_stop(&s);
        }
        for (size_t i = 0; i < AF_ARRAY_SIZE(bodies); i++)
            af_free(bodies[i]);
    }
    curl_global_cleanup();
    return 0;
}
