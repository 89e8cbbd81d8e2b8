/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_apiserver: `accelfit serve --kubeconfig` against a real kube-apiserver v1.26
 * (with etcd), as bench_live does against the test API server: how long the first sync
 * takes and how much memory the live cache holds, with the objects a real API server
 * sends (its JSON, its paging of a list at resourceVersion=0 from the watch cache, its
 * three watches).
 *
 * It starts the control plane of tests/e2e (AF_E2E_K8S, default build/k8s: prepared
 * by ./run.sh test from $KUBE_BIN_DIR or the project's bundle), creates NODES nodes
 * cloned from the five EKS-like templates (p4d, g5, trn1, inf2, c6i; status included)
 * and PODS pods bound to them round robin, shaped as a Deployment's (a ReplicaSet owner,
 * generateName, pod-template-hash; a tenant label on one in five, intent annotations on
 * three in ten; 20 namespaces), then starts the accelfit binary next to this program and
 * measures:
 *   sync     from exec to the first 200 from /readyz (nodes, pods and managed pods listed)
 *   steady   its VmRSS 3 s after sync; peak: its VmHWM
 * It also times POST /filter of 500 candidate names against the live cache (p50, p99).
 *
 * Objects are created by parallel POSTs (libcurl multi, 48 at a time, bearer token of the
 * control plane's admin), not kubectl: 150,000 pods one by one would take most of an hour.
 *
 * Usage: bench_apiserver [NODES PODS [ACCELFIT...]]   (default 5000 10000)
 * Each further argument is another accelfit binary (an older build) measured in turn against
 * the same objects after the one next to this program; AF_BENCH_ROUNDS=N alternates them N
 * times.
 * Takes the e2e suite's lock ($TMPDIR/accelfit-e2e.lock: one control plane a machine, its
 * ports are fixed) and stops the control plane at the end.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accelfit/util.h"
#include "proc.h"

static char k8s[PATH_MAX];
static char tmp[] = "/tmp/af-bench-apiserver-XXXXXX";

static double now_s(void)
{
    return (double)af_now_ns() / 1e9;
}

static void die(const char *what)
{
    fprintf(stderr, "bench_apiserver: %s\n", what);
    exit(1);
}

static void sh(const char *fmt, ...) AF_PRINTF(1, 2);
static void sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (system(cmd) != 0) {
        fprintf(stderr, "bench_apiserver: failed: %s\n", cmd);
        exit(1);
    }
}

/* The warnings and errors of a run's log, on stderr: a relist or a skipped object explains
 * a slow sync. */
static void log_problems(const char *log)
{
    char line[1024];
    int shown = 0;
    FILE *f = fopen(log, "r");

    if (!f)
        return;
    while (fgets(line, sizeof(line), f) && shown < 10)
        if (strstr(line, "warn") || strstr(line, "error") || strstr(line, "WARN") ||
            strstr(line, "ERROR")) {
            fprintf(stderr, "bench_apiserver: %s: %s", log, line);
            shown++;
        }
    fclose(f);
}

static size_t sink(char *p, size_t sz, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return sz * n;
}

/* ---- creating objects fast: POSTs in parallel -------------------------------------------- */

#define IN_FLIGHT 48

struct post {
    CURL *h;
    char *body;
    char url[160];
};

struct poster {
    CURLM *m;
    struct curl_slist *hdr;
    char ca[PATH_MAX + 16];
    struct post slot[IN_FLIGHT];
    int free_slots[IN_FLIGHT], n_free;
    long done, failed;
};

static void poster_init(struct poster *p)
{
    char path[PATH_MAX + 32], tok[256] = "", auth[300];
    FILE *f;

    memset(p, 0, sizeof(*p));
    snprintf(path, sizeof(path), "%s/run/admin.token", k8s);
    if (!(f = fopen(path, "r")) || !fgets(tok, sizeof(tok), f))
        die("cannot read the admin token of the control plane");
    fclose(f);
    tok[strcspn(tok, "\r\n")] = 0;
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", tok);
    p->hdr = curl_slist_append(NULL, auth);
    p->hdr = curl_slist_append(p->hdr, "Content-Type: application/json");
    snprintf(p->ca, sizeof(p->ca), "%s/run/pki/ca.crt", k8s);
    p->m = curl_multi_init();
    for (int i = 0; i < IN_FLIGHT; i++) {
        p->slot[i].h = curl_easy_init();
        p->free_slots[p->n_free++] = i;
    }
}

/* Waits for POSTs until at most `keep` are in flight. */
static void poster_drain(struct poster *p, int keep)
{
    while (IN_FLIGHT - p->n_free > keep) {
        int running, left;
        CURLMsg *msg;

        curl_multi_perform(p->m, &running);
        while ((msg = curl_multi_info_read(p->m, &left))) {
            long st = 0;
            int i;
            if (msg->msg != CURLMSG_DONE)
                continue;
            for (i = 0; i < IN_FLIGHT && p->slot[i].h != msg->easy_handle; i++)
                ;
            curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &st);
            if (msg->data.result != CURLE_OK || (st != 201 && st != 409)) {
                if (p->failed++ < 5)
                    fprintf(stderr, "bench_apiserver: POST %s: %s, HTTP %ld\n", p->slot[i].url,
                            curl_easy_strerror(msg->data.result), st);
            }
            curl_multi_remove_handle(p->m, msg->easy_handle);
            af_free(p->slot[i].body);
            p->slot[i].body = NULL;
            p->free_slots[p->n_free++] = i;
            p->done++;
        }
        if (IN_FLIGHT - p->n_free > keep)
            curl_multi_poll(p->m, NULL, 0, 1000, NULL);
    }
}

/* POSTs `body` (steals it) to `path` of the API server, once a slot is free. */
static void poster_post(struct poster *p, const char *path, char *body)
{
    struct post *s;

    poster_drain(p, IN_FLIGHT - 1);
    s = &p->slot[p->free_slots[--p->n_free]];
    s->body = body;
    snprintf(s->url, sizeof(s->url), "https://127.0.0.1:6443%s", path);
    curl_easy_reset(s->h);
    curl_easy_setopt(s->h, CURLOPT_URL, s->url);
    curl_easy_setopt(s->h, CURLOPT_HTTPHEADER, p->hdr);
    curl_easy_setopt(s->h, CURLOPT_CAINFO, p->ca);
    curl_easy_setopt(s->h, CURLOPT_POSTFIELDS, s->body);
    curl_easy_setopt(s->h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(s->h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(s->h, CURLOPT_TIMEOUT, 120L);
    curl_multi_add_handle(p->m, s->h);
}

static void poster_finish(struct poster *p)
{
    poster_drain(p, 0);
    for (int i = 0; i < IN_FLIGHT; i++)
        curl_easy_cleanup(p->slot[i].h);
    curl_multi_cleanup(p->m);
    curl_slist_free_all(p->hdr);
    if (p->failed)
        die("some objects could not be created");
}

#define NAMESPACES 20
#define OWNERS_PER_NS 50

/*
 * The nodes (one JSON object a line, from write_objects) and PODS pods, as a Deployment
 * makes them: ReplicaSet owners of ~150 replicas, a tenant label on one pod in five,
 * accelfit's intent annotations on three in ten (the requests of an ML workload on the
 * accelerator nodes, of a web service on the others).
 */
static void create_objects(int nodes, int pods)
{
    static const char *const ann[] = {
        "", "\"annotations\":{\"accelfit.io/workload\":\"inference\","
            "\"accelfit.io/model-params\":\"7B\"},",
        "\"annotations\":{\"accelfit.io/workload\":\"training\",\"accelfit.io/objective\":"
        "\"cost\",\"accelfit.io/framework\":\"pytorch\"},",
    };
    struct poster p;
    char path[PATH_MAX + 32], *line = NULL;
    size_t cap = 0;
    ssize_t len;
    FILE *f;

    poster_init(&p);
    for (int i = 0; i < NAMESPACES; i++)
        poster_post(&p, "/api/v1/namespaces",
                    af_xasprintf("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":"
                                 "{\"name\":\"bench-%02d\"}}", i));
    poster_drain(&p, 0);
    snprintf(path, sizeof(path), "%s/nodes.jsonl", tmp);
    if (!(f = fopen(path, "r")))
        die("no nodes.jsonl");
    while ((len = getline(&line, &cap, f)) > 0)
        poster_post(&p, "/api/v1/nodes", af_xstrndup(line, (size_t)len));
    fclose(f);
    free(line);
    for (int i = 0; i < pods; i++) {
        int ns = i % NAMESPACES, owner = (i / NAMESPACES) % OWNERS_PER_NS;
        char url[64];
        snprintf(url, sizeof(url), "/api/v1/namespaces/bench-%02d/pods", ns);
        poster_post(&p, url, af_xasprintf(
            "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{"
            "\"name\":\"svc-%02d-5f8d9c%04x-%05x\",\"generateName\":\"svc-%02d-5f8d9c%04x-\","
            "\"labels\":{\"app\":\"svc-%02d\",\"pod-template-hash\":\"5f8d9c%04x\"%s},%s"
            "\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"ReplicaSet\","
            "\"name\":\"svc-%02d-5f8d9c%04x\",\"uid\":\"6b1f5c1e-0000-4000-8000-%012x\","
            "\"controller\":true,\"blockOwnerDeletion\":true}]},"
            "\"spec\":{\"nodeName\":\"bench-node-%05d\",\"containers\":[{\"name\":\"app\","
            "\"image\":\"registry.k8s.io/pause:3.9\",\"resources\":{\"requests\":{"
            "\"cpu\":\"%dm\",\"memory\":\"%dMi\"}}},{\"name\":\"sidecar\","
            "\"image\":\"registry.k8s.io/pause:3.9\",\"resources\":{\"requests\":{"
            "\"cpu\":\"50m\",\"memory\":\"64Mi\"}}}]}}",
            owner, ns * 97 + owner, i, owner, ns * 97 + owner, owner, ns * 97 + owner,
            i % 5 == 0 ? ",\"accelfit.io/tenant\":\"team-a\"" : "", ann[i % 10 < 3 ? 1 + i % 2 : 0],
            owner, ns * 97 + owner, ns * 97 + owner, i % nodes, 100 + 50 * (i % 4),
            128 << (i % 3)));
        if (i && i % 20000 == 0)
            fprintf(stderr, "bench_apiserver: %d pods created\n", i);
    }
    poster_finish(&p);
}

static long http(CURL *h, const char *url, const char *body)
{
    long st = 0;

    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
    if (body) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    } else {
        curl_easy_setopt(h, CURLOPT_HTTPGET, 1L);
    }
    if (curl_easy_perform(h) != CURLE_OK)
        return -1;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    return st;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/*
 * NODES clones of the templates (names bench-node-N) and PODS pods bound to them, as
 * Lists for kubectl create; node status goes in with the objects (a Node's status is
 * kept on create).
 */
static void write_objects(int nodes, int pods)
{
    /* the templates as JSON, read back from the API server */
    sh("'%s/bin/kubectl' --kubeconfig '%s/admin.kubeconfig' get nodes -o json >'%s/tmpl.json'",
       k8s, k8s, tmp);
    sh("python3 - '%s' %d %d <<'EOF'\n"
       "import json, sys, copy\n"
       "d, nodes, pods = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])\n"
       "t = {n['metadata']['name']: n for n in json.load(open(d + '/tmpl.json'))['items']}\n"
       "order = %s\n"
       "out = []\n"
       "for i in range(nodes):\n"
       "    n = copy.deepcopy(t[order[i %% len(order)]])\n"
       "    m = n['metadata']\n"
       "    for k in ('uid', 'resourceVersion', 'creationTimestamp', 'managedFields'):\n"
       "        m.pop(k, None)\n"
       "    m['name'] = 'bench-node-%%05d' %% i\n"
       "    m['labels']['kubernetes.io/hostname'] = m['name']\n"
       "    out.append(n)\n"
       "with open(d + '/nodes.jsonl', 'w') as f:\n"
       "    for n in out:\n"
       "        f.write(json.dumps(n) + '\\n')\n"
       "EOF",
       tmp, nodes, pods,
       "['ip-10-0-1-11.us-west-2.compute.internal', 'ip-10-0-2-12.us-west-2.compute.internal', "
       "'ip-10-0-3-13.us-west-2.compute.internal', 'ip-10-0-1-14.us-west-2.compute.internal', "
       "'ip-10-0-2-15.us-west-2.compute.internal']");
}

int main(int argc, char **argv)
{
    int nodes = argc > 2 ? atoi(argv[1]) : 5000, pods = argc > 2 ? atoi(argv[2]) : 10000;
    char *self = af_xstrdup(argv[0]), *bins[8], *env = getenv("AF_E2E_K8S");
    const char *r_env = getenv("AF_BENCH_ROUNDS");
    int n_bins = 0, rounds = r_env && atoi(r_env) > 0 ? atoi(r_env) : 1;
    char apiserver[PATH_MAX + 32], listen[64], url[128];
    double t0, sync_s, sync_cpu, *lat;
    long rss, hwm;
    pid_t pid;
    CURL *h;
    int port = 18731, n_lat = 400;

    snprintf(k8s, sizeof(k8s), "%s", env && *env ? env : AF_SOURCE_DIR "/build/k8s");
    snprintf(apiserver, sizeof(apiserver), "%s/bin/kube-apiserver", k8s);
    if (access(apiserver, X_OK) != 0) {
        printf("== bench_apiserver: skipped: no control plane in %s (./run.sh test prepares it "
               "from KUBE_BIN_DIR)\n", k8s);
        return 0;
    }
    if (nodes < 5 || pods < 0)
        die("usage: bench_apiserver [NODES PODS [ACCELFIT...]]");
    if (!mkdtemp(tmp))
        die("mkdtemp");
    /* One control plane a machine (fixed ports): wait for the e2e suite, or another bench,
     * as check_e2e does; the lock goes with this process. */
    {
        const char *td = getenv("TMPDIR");
        char lock[PATH_MAX];
        int fd;
        snprintf(lock, sizeof(lock), "%s/accelfit-e2e.lock", td && *td ? td : "/tmp");
        fd = open(lock, O_CREAT | O_RDWR | O_CLOEXEC, 0666);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
            printf("bench_apiserver: another run holds %s; waiting for it\n", lock);
            fflush(stdout);
            (void)flock(fd, LOCK_EX);
        }
    }
    bins[n_bins++] = af_xasprintf("%s/accelfit", dirname(self));
    for (int i = 3; i < argc && n_bins < (int)AF_ARRAY_SIZE(bins); i++)
        bins[n_bins++] = argv[i];   /* other builds to compare, on the same objects */
    printf("== bench_apiserver: accelfit serve --kubeconfig against kube-apiserver v1.26, "
           "%d nodes, %d pods\n", nodes, pods);
    fflush(stdout);
    sh("'%s/down.sh' --clean >'%s/cp.log' 2>&1; '%s/up.sh' >>'%s/cp.log' 2>&1 && "
       "'%s/nodes.sh' create >>'%s/cp.log' 2>&1", k8s, tmp, k8s, tmp, k8s, tmp);
    write_objects(nodes, pods);
    t0 = now_s();
    create_objects(nodes, pods);
    printf("objects created in %.1f s (%d nodes, %d pods; not part of any number below)\n",
           now_s() - t0, nodes, pods);
    fflush(stdout);

    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    h = curl_easy_init();
    lat = af_xcalloc((size_t)n_lat, sizeof(double));
    printf("| accelfit | nodes | pods | sync | its CPU | steady RSS | peak RSS | filter p50 (500 "
           "names) | filter p99 |\n|---|---|---|---|---|---|---|---|---|\n");
    fflush(stdout);
    /* each binary in turn, ROUNDS times, alternating, against the same objects */
    for (int round = 0; round < rounds; round++) {
        for (int b_i = 0; b_i < n_bins; b_i++) {
            const char *bin = bins[b_i];
            t0 = now_s();
            pid = fork();
            if (pid == 0) {
                char *kc = af_xasprintf("%s/admin.kubeconfig", k8s);
                char *log = af_xasprintf("%s/accelfit-%d.log", tmp, b_i);
                if (!freopen(log, "w", stdout) || dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
                    _exit(127);
                execl(bin, bin, "serve", "--kubeconfig", kc, "--listen", listen, (char *)NULL);
                _exit(127);
            }
            snprintf(url, sizeof(url), "http://%s/readyz", listen);
            while (http(h, url, NULL) != 200) {
                if (now_s() - t0 > 600)
                    die("accelfit never became ready");
                usleep(20000);
            }
            sync_s = now_s() - t0;
            sync_cpu = bench_cpu_s(pid);
            sleep(3);
            bench_mem_kb(pid, &rss, &hwm);

            /* filter against the live cache: 500 candidate names */
            {
                struct af_buf b = AF_BUF_INIT(0);
                char furl[128];
                af_assert(!af_buf_puts(&b, "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\","
                                           "\"uid\":\"u\"},\"spec\":{\"containers\":[{\"name\":\"c\","
                                           "\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"1\"}}}]}},"
                                           "\"Nodes\":null,\"NodeNames\":["));
                for (int i = 0; i < 500 && i < nodes; i++)
                    af_assert(!af_buf_printf(&b, "%s\"bench-node-%05d\"", i ? "," : "", i));
                af_assert(!af_buf_puts(&b, "]}"));
                snprintf(furl, sizeof(furl), "http://%s/filter", listen);
                for (int i = 0; i < n_lat; i++) {
                    double a = now_s();
                    if (http(h, furl, b.buf) != 200)
                        die("filter failed");
                    lat[i] = (now_s() - a) * 1e6;
                }
                af_buf_release(&b);
                qsort(lat, (size_t)n_lat, sizeof(double), cmp_double);
            }
            printf("| %s | %d | %d | %.2f s | %.2f s | %.1f MiB | %.1f MiB | %.0f µs | %.0f µs |\n",
                   bin, nodes, pods, sync_s, sync_cpu, (double)rss / 1024, (double)hwm / 1024,
                   lat[n_lat / 2], lat[n_lat * 99 / 100]);
            fflush(stdout);
            kill(pid, SIGTERM);
            waitpid(pid, NULL, 0);
            {
                char *log = af_xasprintf("%s/accelfit-%d.log", tmp, b_i);
                log_problems(log);
                af_free(log);
            }
        }
    }
    curl_easy_cleanup(h);
    sh("'%s/down.sh' --clean >>'%s/cp.log' 2>&1; rm -rf '%s'", k8s, tmp, tmp);
    af_free(lat);
    af_free(bins[0]);
    af_free(self);
    return 0;
}
