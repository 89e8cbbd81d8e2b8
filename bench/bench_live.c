/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_live: `accelfit serve --kubeconfig` against the test API server, as in
 * production: the live list/watch path, not a cluster file.
 *
 * For each point (nodes, pods) it starts tests/apiserver/fake_apiserver.py with
 * --synthetic-nodes/--synthetic-pods (EKS-shaped objects: the label set,
 * managedFields, images, conditions; see tests/apiserver/synthetic.py) over
 * HTTPS, then the accelfit binary next to this program as a separate process
 * (so the generator's memory does not count), and measures:
 *   sync      from exec to the first 200 from /readyz (both lists applied)
 *   peak      the serve process's VmHWM at the end of the point
 *   steady    its VmRSS 3 s after sync
 * and, with churn, while the server sends pod deletes and binds over the watch
 * at a fixed rate, POST /filter latency (p50, p99, max; 500 candidate nodes,
 * names mode) and the publisher's snapshot build cost (from /metrics).
 *
 * With --budget, accelfit serves a policy whose tenant "research" owns the filtered
 * pod's namespace and has a budget, so every filter reads the tenants' spend (the
 * costs of the current snapshot, src/budget/memo.c).
 *
 * Usage: bench_live [--budget] [NODES PODS [CHURN_SECONDS]]
 *   default: 1,000/2,000, then 5,000/10,000 and 5,000/150,000 each with 10 s of churn.
 * Run from anywhere; needs python3 and openssl.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accelfit/config.h"
#include "accelfit/util.h"
#include "proc.h"

#define CHURN_RATE 200   /* pod events per second during churn */
#define CANDIDATES 500

static char dir[64];
static char policy[96];   /* --budget: the policy file; empty: the embedded policy */

static double now_s(void)
{
    return (double)af_now_ns() / 1e9;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_live: %s\n", what);
    exit(1);
}

static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t n = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) || getsockname(fd, (void *)&a, &n))
        die("cannot find a free port");
    close(fd);
    return ntohs(a.sin_port);
}

/* ---- HTTP with libcurl ---------------------------------------------------------------------- */

static size_t collect(char *p, size_t sz, size_t n, void *ud)
{
    if (af_buf_add(ud, p, sz * n))
        return 0;
    return sz * n;
}

/* GET (body NULL) or POST `url`; the response goes to `out` (reset first). Returns the status. */
static long http(CURL *h, const char *url, const char *body, struct af_buf *out)
{
    long st = 0;
    af_buf_reset(out);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    if (curl_easy_perform(h) != CURLE_OK)
        return 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    return st;
}

/* A counter or gauge from a /metrics text; -1 when absent. */
static double metric(const char *text, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (!strncmp(p, name, n) && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    }
    return -1;
}

/* ---- processes ------------------------------------------------------------------------------- */

struct apiserver {
    pid_t pid;
    int in_fd;
    int port, admin_port;
};

static void apiserver_start(struct apiserver *s, int nodes, int pods)
{
    int in[2], out[2];
    char n[32], p[32], crt[128], key[128];
    snprintf(n, sizeof(n), "%d", nodes);
    snprintf(p, sizeof(p), "%d", pods);
    snprintf(crt, sizeof(crt), "%s/srv.crt", dir);
    snprintf(key, sizeof(key), "%s/srv.key", dir);
    if (pipe2(in, O_CLOEXEC) || pipe2(out, O_CLOEXEC))
        die("pipe");
    s->pid = fork();
    if (s->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        execlp("python3", "python3", AF_SOURCE_DIR "/tests/apiserver/fake_apiserver.py",
               "--cert", crt, "--key", key, "--token", "bench-token", "--bookmark-interval",
               "60", "--synthetic-nodes", n, "--synthetic-pods", p, "--rv0-ignores-limit",
               (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    s->in_fd = in[1];
    char line[128];
    size_t len = 0;
    while (len + 1 < sizeof(line)) {
        ssize_t r = read(out[0], line + len, 1);
        if (r <= 0 || line[len] == '\n')
            break;
        len++;
    }
    line[len] = '\0';
    close(out[0]);
    if (sscanf(line, "READY %d %d", &s->port, &s->admin_port) != 2)
        die("the test API server did not start (python3 and tests/apiserver needed)");
}

static void apiserver_stop(struct apiserver *s)
{
    close(s->in_fd);
    kill(s->pid, SIGTERM);
    waitpid(s->pid, NULL, 0);
}

static pid_t serve_start(const char *accelfit, const char *kubeconfig, int port)
{
    char listen[64];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        if (policy[0])
            execl(accelfit, accelfit, "serve", "--kubeconfig", kubeconfig, "--listen", listen,
                  "--log-level", "warn", "--policy", policy, (char *)NULL);
        else
            execl(accelfit, accelfit, "serve", "--kubeconfig", kubeconfig, "--listen", listen,
                  "--log-level", "warn", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* ---- one point ------------------------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The recorded kube-scheduler filter body with CANDIDATES synthetic node names. */
static char *filter_body(int nodes)
{
    json_error_t e;
    json_t *args = json_load_file(AF_SOURCE_DIR "/tests/fixtures/kube-scheduler/"
                                  "filter-nodecache-true.json", 0, &e);
    if (!args)
        die("cannot read tests/fixtures/kube-scheduler/filter-nodecache-true.json");
    json_t *names = json_array();
    for (int k = 0; k < CANDIDATES; k++) {
        int i = (int)((long)k * nodes / CANDIDATES);
        char name[96];
        /* tests/apiserver/synthetic.py node_name() */
        snprintf(name, sizeof(name), "ip-10-%d-%d-%d.us-west-2.compute.internal", i / 65536,
                 (i / 256) % 256, i % 256);
        json_array_append_new(names, json_string(name));
    }
    json_object_set_new(args, "NodeNames", names);
    char *s = json_dumps(args, JSON_COMPACT);
    json_decref(args);
    return s;
}

static void run_point(const char *accelfit, int nodes, int pods, double churn_s)
{
    struct apiserver srv;
    struct af_buf resp = AF_BUF_INIT(0);
    char kc[128], url[128], admin[128];
    CURL *h = curl_easy_init();
    long rss, hwm, steady_rss;
    double t0, sync_s = -1, sync_cpu = 0;

    printf("\n== %d nodes, %d pods%s\n", nodes, pods, churn_s > 0 ? ", then churn" : "");
    fflush(stdout);
    double g0 = now_s();
    apiserver_start(&srv, nodes, pods);
    printf("test API server rendered the objects in %.1f s\n", now_s() - g0);

    snprintf(kc, sizeof(kc), "%s/kubeconfig", dir);
    FILE *f = fopen(kc, "w");
    if (!f)
        die("cannot write the kubeconfig");
    fprintf(f,
            "apiVersion: v1\nkind: Config\ncurrent-context: bench\n"
            "clusters:\n- name: bench\n  cluster:\n    server: https://127.0.0.1:%d\n"
            "    certificate-authority: ca.crt\n"
            "contexts:\n- name: bench\n  context: {cluster: bench, user: bench}\n"
            "users:\n- name: bench\n  user: {token: bench-token}\n",
            srv.port);
    fclose(f);

    int port = free_port();
    t0 = now_s();
    pid_t pid = serve_start(accelfit, kc, port);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/readyz", port);
    while (now_s() - t0 < 300) {
        if (http(h, url, NULL, &resp) == 200) {
            sync_s = now_s() - t0;
            sync_cpu = bench_cpu_s(pid);
            break;
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            die("accelfit serve exited during the initial sync");
        sleep_s(0.02);
    }
    if (sync_s < 0)
        die("accelfit did not become ready within 300 s");
    sleep_s(3);
    bench_mem_kb(pid, &steady_rss, &hwm);

    /* bytes the server sent for the lists, as a sanity check of the object sizes */
    snprintf(admin, sizeof(admin), "http://127.0.0.1:%d/stats", srv.admin_port);
    printf("sync %.2f s (accelfit used %.2f s of CPU); resident "
           "after sync: steady %.1f MiB, peak (VmHWM) %.1f MiB (peak/steady %.2f)\n",
           sync_s, sync_cpu, steady_rss / 1024.0, hwm / 1024.0, (double)hwm / (double)steady_rss);

    if (churn_s > 0) {
        char *body = filter_body(nodes);
        char filter[128], metrics[128], churn[64];
        size_t cap = 1 << 16, n = 0;
        double *lat = af_xmalloc(cap * sizeof(double));
        snprintf(filter, sizeof(filter), "http://127.0.0.1:%d/filter", port);
        snprintf(metrics, sizeof(metrics), "http://127.0.0.1:%d/metrics", port);
        if (http(h, metrics, NULL, &resp) != 200)
            die("GET /metrics failed");
        double ev0 = metric(resp.buf, "accelfit_events_applied_total");
        double pub0 = metric(resp.buf, "accelfit_snapshots_published_total");
        double us0 = metric(resp.buf, "accelfit_snapshot_build_microseconds_total");
        snprintf(admin, sizeof(admin), "http://127.0.0.1:%d/churn", srv.admin_port);
        snprintf(churn, sizeof(churn), "{\"rate\":%d}", CHURN_RATE);
        if (http(h, admin, churn, &resp) != 200)
            die("cannot start churn");
        for (int k = 0; k < 50; k++)   /* warm-up */
            (void)http(h, filter, body, &resp);
        double end = now_s() + churn_s;
        while (now_s() < end && n < cap) {
            double a = now_s();
            long st = http(h, filter, body, &resp);
            lat[n++] = now_s() - a;
            if (st != 200)
                die("POST /filter failed during churn");
        }
        (void)http(h, admin, "{\"rate\":0}", &resp);
        sleep_s(0.5);
        if (http(h, metrics, NULL, &resp) != 200)
            die("GET /metrics failed");
        double ev = metric(resp.buf, "accelfit_events_applied_total") - ev0;
        double pubs = metric(resp.buf, "accelfit_snapshots_published_total") - pub0;
        double us = metric(resp.buf, "accelfit_snapshot_build_microseconds_total") - us0;
        double max_us = metric(resp.buf, "accelfit_snapshot_build_max_microseconds");
        qsort(lat, n, sizeof(double), cmp_double);
        printf("churn %.0f s at %d pod events/s: %.0f watch events applied, %.0f snapshots "
               "published, build+publish mean %.2f ms (max since start %.2f ms)\n",
               churn_s, CHURN_RATE, ev, pubs, pubs > 0 ? us / pubs / 1000 : 0, max_us / 1000);
        printf("POST /filter (%d candidates, names mode) during churn: %zu requests, p50 %.3f ms, "
               "p99 %.3f ms, p99.9 %.3f ms, max %.3f ms\n",
               CANDIDATES, n, lat[n / 2] * 1e3, lat[n * 99 / 100] * 1e3,
               lat[n * 999 / 1000] * 1e3, lat[n - 1] * 1e3);
        bench_mem_kb(pid, &rss, &hwm);
        printf("resident after churn: %.1f MiB, peak (VmHWM) %.1f MiB\n", rss / 1024.0,
               hwm / 1024.0);
        free(lat);
        free(body);
    }
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    apiserver_stop(&srv);
    af_buf_release(&resp);
    curl_easy_cleanup(h);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    char self[PATH_MAX], accelfit[PATH_MAX + 16], cmd[1024];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        die("cannot find this program's path");
    self[n] = '\0';
    *strrchr(self, '/') = '\0';
    snprintf(accelfit, sizeof(accelfit), "%s/accelfit", self);
    if (access(accelfit, X_OK))
        die("the accelfit binary is not next to bench_live (build the whole project)");

    snprintf(dir, sizeof(dir), "/tmp/af-bench-live-XXXXXX");
    if (!mkdtemp(dir))
        die("mkdtemp");
    snprintf(cmd, sizeof(cmd),
             "cd '%s' && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
             "-nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=af-bench-ca >/dev/null 2>&1 && "
             "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "
             "srv.key -out srv.csr -subj /CN=127.0.0.1 >/dev/null 2>&1 && "
             "printf 'subjectAltName=IP:127.0.0.1\\n' > ext && "
             "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out "
             "srv.crt -days 2 -extfile ext >/dev/null 2>&1",
             dir);
    if (system(cmd) != 0)
        die("openssl could not make the test certificates");
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);

    printf("bench_live: accelfit serve --kubeconfig against tests/apiserver (the live "
           "list/watch path)\n");
    if (argc >= 2 && !strcmp(argv[1], "--budget")) {
        /* the embedded policy and a tenant with a budget owning the filtered pod's
         * namespace ("default"): filter then reads the tenants' spend */
        snprintf(policy, sizeof(policy), "%s/policy.yaml", dir);
        FILE *pf = fopen(policy, "w");
        if (!pf)
            die("cannot write the policy");
        fwrite(af_embedded_policy_yaml, 1, af_embedded_policy_yaml_len, pf);
        fputs("\ntenants:\n  - name: research\n    namespaces: [default]\n"
              "    budget_usd_per_hour: 1000000\n    over_budget: hard\n"
              "    premium_classes: [nvidia-a100]\n",
              pf);
        fclose(pf);
        printf("policy: the embedded one and tenant research (namespace default) with a hard "
               "budget\n");
        argc--;
        argv++;
    }
    if (argc >= 3) {
        run_point(accelfit, atoi(argv[1]), atoi(argv[2]), argc >= 4 ? atof(argv[3]) : 0);
    } else {
        run_point(accelfit, 1000, 2000, 0);
        run_point(accelfit, 5000, 10000, 10);
        run_point(accelfit, 5000, 150000, 10);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_live: could not remove %s\n", dir);
    curl_global_cleanup();
    return 0;
}
