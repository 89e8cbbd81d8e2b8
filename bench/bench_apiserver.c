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
 * and PODS pods bound to them round robin, then starts the accelfit binary next to this
 * program and measures:
 *   sync     from exec to the first 200 from /readyz (nodes, pods and managed pods listed)
 *   steady   its VmRSS 3 s after sync; peak: its VmHWM
 * It also times POST /filter of 500 candidate names against the live cache (p50, p99).
 *
 * Usage: bench_apiserver [NODES PODS]   (default 5000 10000)
 * Needs the ports of the control plane (6443, 2379, 2380) free; stops it at the end.
 */
#include <curl/curl.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accelfit/util.h"

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

static void mem_kb(pid_t pid, long *rss, long *hwm)
{
    char path[64], line[256];
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    *rss = *hwm = 0;
    if (!(f = fopen(path, "r")))
        return;
    while (fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "VmRSS:", 6))
            *rss = atol(line + 6);
        else if (!strncmp(line, "VmHWM:", 6))
            *hwm = atol(line + 6);
    }
    fclose(f);
}

static size_t sink(char *p, size_t sz, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return sz * n;
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
       "json.dump({'apiVersion': 'v1', 'kind': 'List', 'items': out}, open(d + '/nodes.json', 'w'))\n"
       "out = []\n"
       "for i in range(pods):\n"
       "    out.append({'apiVersion': 'v1', 'kind': 'Pod', 'metadata': {'name': 'bench-pod-%%06d' %% i,\n"
       "        'namespace': 'default', 'labels': {'app': 'bench-%%d' %% (i %% 50)}},\n"
       "        'spec': {'nodeName': 'bench-node-%%05d' %% (i %% nodes), 'containers': [{'name': 'c',\n"
       "        'image': 'registry.k8s.io/pause:3.9', 'resources': {'requests': {'cpu': '100m',\n"
       "        'memory': '128Mi'}}}]}})\n"
       "json.dump({'apiVersion': 'v1', 'kind': 'List', 'items': out}, open(d + '/pods.json', 'w'))\n"
       "EOF",
       tmp, nodes, pods,
       "['ip-10-0-1-11.us-west-2.compute.internal', 'ip-10-0-2-12.us-west-2.compute.internal', "
       "'ip-10-0-3-13.us-west-2.compute.internal', 'ip-10-0-1-14.us-west-2.compute.internal', "
       "'ip-10-0-2-15.us-west-2.compute.internal']");
}

int main(int argc, char **argv)
{
    int nodes = argc > 2 ? atoi(argv[1]) : 5000, pods = argc > 2 ? atoi(argv[2]) : 10000;
    char *self = af_xstrdup(argv[0]), *bin, *env = getenv("AF_E2E_K8S");
    char apiserver[PATH_MAX + 32], listen[64], url[128];
    double t0, sync_s, *lat;
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
        die("usage: bench_apiserver [NODES PODS]");
    if (!mkdtemp(tmp))
        die("mkdtemp");
    bin = af_xasprintf("%s/accelfit", dirname(self));
    printf("== bench_apiserver: accelfit serve --kubeconfig against kube-apiserver v1.26, "
           "%d nodes, %d pods\n", nodes, pods);
    fflush(stdout);
    sh("'%s/down.sh' --clean >'%s/cp.log' 2>&1; '%s/up.sh' >>'%s/cp.log' 2>&1 && "
       "'%s/nodes.sh' create >>'%s/cp.log' 2>&1", k8s, tmp, k8s, tmp, k8s, tmp);
    write_objects(nodes, pods);
    t0 = now_s();
    sh("'%s/bin/kubectl' --kubeconfig '%s/admin.kubeconfig' create -f '%s/nodes.json' >/dev/null",
       k8s, k8s, tmp);
    sh("'%s/bin/kubectl' --kubeconfig '%s/admin.kubeconfig' create -f '%s/pods.json' >/dev/null",
       k8s, k8s, tmp);
    fprintf(stderr, "bench_apiserver: objects created in %.1f s\n", now_s() - t0);

    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    t0 = now_s();
    pid = fork();
    if (pid == 0) {
        char *kc = af_xasprintf("%s/admin.kubeconfig", k8s);
        char *log = af_xasprintf("%s/accelfit.log", tmp);
        if (!freopen(log, "w", stdout) || dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
            _exit(127);
        execl(bin, bin, "serve", "--kubeconfig", kc, "--listen", listen, (char *)NULL);
        _exit(127);
    }
    h = curl_easy_init();
    snprintf(url, sizeof(url), "http://%s/readyz", listen);
    while (http(h, url, NULL) != 200) {
        if (now_s() - t0 > 600)
            die("accelfit never became ready");
        usleep(20000);
    }
    sync_s = now_s() - t0;
    sleep(3);
    mem_kb(pid, &rss, &hwm);

    /* filter against the live cache: 500 candidate names */
    lat = af_xcalloc((size_t)n_lat, sizeof(double));
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
    printf("| nodes | pods | sync | steady RSS | peak RSS | filter p50 (500 names) | filter p99 |\n"
           "|---|---|---|---|---|---|---|\n"
           "| %d | %d | %.2f s | %.1f MiB | %.1f MiB | %.0f µs | %.0f µs |\n",
           nodes, pods, sync_s, (double)rss / 1024, (double)hwm / 1024, lat[n_lat / 2],
           lat[n_lat * 99 / 100]);
    fflush(stdout);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    curl_easy_cleanup(h);
    sh("'%s/down.sh' --clean >>'%s/cp.log' 2>&1; rm -rf '%s'", k8s, tmp, tmp);
    af_free(lat);
    af_free(bin);
    af_free(self);
    return 0;
}
