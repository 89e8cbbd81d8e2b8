/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_scheduler: what turning accelfit on costs the real kube-scheduler.
 *
 * On the control plane of tests/e2e (AF_E2E_K8S, default build/k8s: kube-apiserver and
 * kube-scheduler v1.26 with etcd), it creates NODES nodes of an EKS mix (p4d, p5, g5, g6,
 * trn1, inf2, c6i, m6i; cloned from the control plane's templates, status included) and
 * then, round after round, PODS pending pods (GPU, Neuron and CPU, with the tolerations
 * EKS nodes need), and lets kube-scheduler bind them, three ways, in turn:
 *
 *   alone          the shipped KubeSchedulerConfiguration (manifests/base/
 *                  kube-scheduler-config.yaml) without its extenders;
 *   null extender  the same file whole, pointed at an extender that decides nothing
 *                  (every candidate kept, every score 0; the floor section below): what
 *                  the extender protocol itself costs kube-scheduler;
 *   accelfit       the same file whole: the filter entry and the prioritize entry
 *                  (weight as shipped, nodeCacheCapable true) pointed at `accelfit serve
 *                  --kubeconfig`, started from the binary next to this program with the
 *                  shipped arguments that do not need a cluster of their own
 *                  (--url-prefix, --when-not-ready, --log-format).
 *
 * All keep the shipped percentageOfNodesToScore. The pods exist before kube-scheduler
 * starts, so creating them is not part of any number; a watch on the round's namespace
 * stamps each binding as it arrives, and the rate is taken over the middle 80 % of the
 * bindings (10th to 90th), which leaves out the scheduler's start and the stragglers.
 * For the runs with an extender it also reads the extender's CPU seconds (utime + stime
 * of /proc/PID/stat, from its start to the last binding, accelfit's sync included) per
 * bound pod, and its VmRSS at the end; kube-scheduler's CPU seconds are printed for all.
 * It prints three ratios of the medians: accelfit / alone (what turning accelfit on
 * costs), null extender / alone (what any extender costs kube-scheduler: its JSON and HTTP
 * for every candidate, twice a pod), accelfit / null extender (what accelfit's decisions
 * add or save beyond that).
 *
 * Usage: bench_scheduler                         1,000 nodes / 2,000 pods, 3 rounds;
 *                                                5,000 nodes / 10,000 pods, 2 rounds
 *        bench_scheduler NODES PODS [ROUNDS]     one size (ROUNDS default 3)
 *        bench_scheduler N1 P1 R1 N2 P2 R2 ...   several, one after the other
 *        bench_scheduler --stated ...            the GPU pods state their workload
 *                                                (accelfit.io/workload: inference), so that
 *                                                accelfit's filter narrows them to their tier
 *        bench_scheduler --null-extender         the null extender alone, on 127.0.0.1:18741
 * Takes the e2e suite's lock ($TMPDIR/accelfit-e2e.lock: one control plane a machine),
 * needs the control plane's ports free and stops it at the end.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
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
#include "floor.h"
#include "proc.h"

#define ACC_PORT 18741
#define SCHED_PORT 10259

static char k8s[PATH_MAX];
static char tmp[] = "/tmp/af-bench-scheduler-XXXXXX";
static char *acc_bin;
static char *token;
static pid_t running[2];        /* kube-scheduler and accelfit of the current run */
static bool stated;             /* --stated: the GPU pods say accelfit.io/workload: inference */
static bool plane_up;

static double now_s(void)
{
    return (double)af_now_ns() / 1e9;
}

/* Whatever exit: the run's processes and the control plane stop (its ports are shared). */
static void cleanup(void)
{
    for (int i = 0; i < 2; i++)
        if (running[i] > 0) {
            kill(running[i], SIGTERM);
            waitpid(running[i], NULL, 0);
            running[i] = 0;
        }
    if (plane_up) {
        char cmd[PATH_MAX + 64];
        plane_up = false;
        snprintf(cmd, sizeof(cmd), "'%s/down.sh' --clean >/dev/null 2>&1", k8s);
        if (system(cmd) != 0)
            fprintf(stderr, "bench_scheduler: %s failed\n", cmd);
    }
}

static void die(const char *fmt, ...) AF_PRINTF(1, 2);
static void die(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "bench_scheduler: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\n");
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
    if (system(cmd) != 0)
        die("failed: %s", cmd);
}

static size_t sink(char *p, size_t sz, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return sz * n;
}

/* An API request with the admin token (the control plane's CA); returns the status. */
static long api(const char *method, const char *path, const char *body)
{
    CURL *h = curl_easy_init();
    struct curl_slist *hd = NULL;
    char url[512], *auth = af_xasprintf("Authorization: Bearer %s", token);
    char *ca = af_xasprintf("%s/run/pki/ca.crt", k8s);
    long st = 0;

    snprintf(url, sizeof(url), "https://127.0.0.1:6443%s", path);
    hd = curl_slist_append(hd, auth);
    hd = curl_slist_append(hd, "Content-Type: application/json");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CAINFO, ca);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 300L);
    if (body)
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    af_free(auth);
    af_free(ca);
    return st;
}

static bool http_ok(const char *url)
{
    CURL *h = curl_easy_init();
    long st = 0;

    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, sink);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 5L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
    curl_easy_cleanup(h);
    return st == 200;
}

/*
 * The nodes (one List, cut into parts created in parallel) and, per round, the pods: the
 * EKS mix cloned from nodes.sh's five templates, p5, g6 and m6i derived from p4d, g5 and
 * c6i by their instance-type labels, capacity and GPU product.
 */
static void write_objects(int nodes, int pods, int parts)
{
    sh("'%s/bin/kubectl' --kubeconfig '%s/admin.kubeconfig' get nodes -o json >'%s/tmpl.json'",
       k8s, k8s, tmp);
    sh("python3 - '%s' %d %d %d <<'EOF'\n"
       "import json, sys, copy\n"
       "d, nodes, pods, parts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])\n"
       "t = {n['metadata']['labels']['node.kubernetes.io/instance-type']: n\n"
       "     for n in json.load(open(d + '/tmpl.json'))['items']}\n"
       "def derive(src, it, fam, cpu, mem, gpu=None):\n"
       "    n = copy.deepcopy(t[src]); l = n['metadata']['labels']\n"
       "    for k in list(l):\n"
       "        if l[k] == src: l[k] = it\n"
       "    l['karpenter.k8s.aws/instance-family'] = fam\n"
       "    l['karpenter.k8s.aws/instance-cpu'] = str(cpu)\n"
       "    for s in ('capacity', 'allocatable'):\n"
       "        n['status'][s]['cpu'] = str(cpu - 1)\n"
       "        n['status'][s]['memory'] = '%%dGi' %% mem\n"
       "    if gpu:\n"
       "        l['karpenter.k8s.aws/instance-gpu-name'] = gpu[0]\n"
       "        l['nvidia.com/gpu.product'] = gpu[1]\n"
       "    return n\n"
       "t['p5.48xlarge'] = derive('p4d.24xlarge', 'p5.48xlarge', 'p5', 192, 2000,\n"
       "                          ('h100', 'NVIDIA-H100-80GB-HBM3'))\n"
       "t['g6.2xlarge'] = derive('g5.2xlarge', 'g6.2xlarge', 'g6', 8, 32, ('l4', 'NVIDIA-L4'))\n"
       "t['m6i.4xlarge'] = derive('c6i.4xlarge', 'm6i.4xlarge', 'm6i', 16, 64)\n"
       "order = ['p4d.24xlarge', 'p5.48xlarge', 'g5.2xlarge', 'g6.2xlarge', 'trn1.32xlarge',\n"
       "         'inf2.xlarge', 'c6i.4xlarge', 'm6i.4xlarge']\n"
       "out = []\n"
       "for i in range(nodes):\n"
       "    n = copy.deepcopy(t[order[i %% len(order)]])\n"
       "    m = n['metadata']\n"
       "    for k in ('uid', 'resourceVersion', 'creationTimestamp', 'managedFields'):\n"
       "        m.pop(k, None)\n"
       "    m['name'] = 'bench-node-%%05d' %% i\n"
       "    m['labels']['kubernetes.io/hostname'] = m['name']\n"
       "    out.append(n)\n"
       "for p in range(parts):\n"
       "    json.dump({'apiVersion': 'v1', 'kind': 'List', 'items': out[p::parts]},\n"
       "              open('%%s/nodes-%%d.json' %% (d, p), 'w'))\n"
       "# pods: 40 %% one NVIDIA GPU, 25 %% one Neuron device, 35 %% CPU only\n"
       "gpu_tol = {'key': 'nvidia.com/gpu', 'operator': 'Exists', 'effect': 'NoSchedule'}\n"
       "neu_tol = {'key': 'aws.amazon.com/neuron', 'operator': 'Exists', 'effect': 'NoSchedule'}\n"
       "out = []\n"
       "for i in range(pods):\n"
       "    k = i %% 20\n"
       "    req = {'cpu': '500m', 'memory': '1Gi'}\n"
       "    spec = {'schedulerName': 'accelfit-scheduler', 'terminationGracePeriodSeconds': 0}\n"
       "    if k < 8:\n"
       "        req['nvidia.com/gpu'] = '1'; spec['tolerations'] = [gpu_tol]\n"
       "    elif k < 13:\n"
       "        req['aws.amazon.com/neuron'] = '1'; spec['tolerations'] = [neu_tol]\n"
       "    lim = {r: v for r, v in req.items() if r not in ('cpu', 'memory')}\n"
       "    res = {'requests': req}\n"
       "    if lim: res['limits'] = lim\n"
       "    spec['containers'] = [{'name': 'c', 'image': 'registry.k8s.io/pause:3.9',\n"
       "                           'resources': res}]\n"
       "    meta = {'name': 'bench-pod-%%06d' %% i, 'labels': {'app': 'bench-%%d' %% (i %% 50)}}\n"
       "    if %s and k < 8:   # --stated: the GPU pods say what they are\n"
       "        meta['annotations'] = {'accelfit.io/workload': 'inference'}\n"
       "    out.append({'apiVersion': 'v1', 'kind': 'Pod', 'metadata': meta, 'spec': spec})\n"
       "for p in range(parts):\n"
       "    json.dump({'apiVersion': 'v1', 'kind': 'List', 'items': out[p::parts]},\n"
       "              open('%%s/pods-%%d.json' %% (d, p), 'w'))\n"
       "EOF",
       tmp, nodes, pods, parts, stated ? "True" : "False");
}

/* kubectl create of every part of WHAT, in parallel (in namespace NS when given). */
static void create_parts(const char *what, int parts, const char *ns)
{
    sh("cd '%s' && for p in $(seq 0 %d); do '%s/bin/kubectl' --kubeconfig '%s/admin.kubeconfig' "
       "%s%s create -f %s-$p.json >/dev/null & done; wait; "
       "n=$('%s/bin/kubectl' --kubeconfig '%s/admin.kubeconfig' %s%s get %s --no-headers | "
       "wc -l); echo \"$n\" >'%s/count'",
       tmp, parts - 1, k8s, k8s, ns ? "-n " : "", ns ? ns : "", what, k8s, k8s, ns ? "-n " : "",
       ns ? ns : "", what, tmp);
}

static int read_count(void)
{
    char path[PATH_MAX + 16];
    FILE *f;
    int n = -1;

    snprintf(path, sizeof(path), "%s/count", tmp);
    if ((f = fopen(path, "r"))) {
        if (fscanf(f, "%d", &n) != 1)
            n = -1;
        fclose(f);
    }
    return n;
}

/* ---- the watch that stamps bindings ---- */

struct watch {
    char ns[64];
    int pods;
    double *bound_at;      /* per pod index, 0 while unbound */
    int added, bound;
    struct af_buf line;
    pthread_mutex_t mu;
    volatile int stop;
    pthread_t th;
};

static void watch_line(struct watch *w, const char *s, size_t n)
{
    json_t *ev = json_loadb(s, n, 0, NULL), *obj;
    const char *type, *name, *node;
    int idx;

    if (!ev)
        return;
    type = json_string_value(json_object_get(ev, "type"));
    obj = json_object_get(ev, "object");
    name = json_string_value(json_object_get(json_object_get(obj, "metadata"), "name"));
    node = json_string_value(json_object_get(json_object_get(obj, "spec"), "nodeName"));
    if (type && name && sscanf(name, "bench-pod-%d", &idx) == 1 && idx >= 0 && idx < w->pods) {
        pthread_mutex_lock(&w->mu);
        if (!strcmp(type, "ADDED"))
            w->added++;
        if (node && *node && w->bound_at[idx] == 0) {
            w->bound_at[idx] = now_s();
            w->bound++;
        }
        pthread_mutex_unlock(&w->mu);
    }
    json_decref(ev);
}

static size_t watch_body(char *p, size_t sz, size_t n, void *ud)
{
    struct watch *w = ud;
    size_t len = sz * n;

    for (size_t i = 0; i < len; i++) {
        if (p[i] == '\n') {
            watch_line(w, w->line.buf ? w->line.buf : "", w->line.len);
            w->line.len = 0;
        } else {
            af_assert(!af_buf_add(&w->line, p + i, 1));
        }
    }
    return w->stop ? 0 : len;
}

static int watch_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    struct watch *w = ud;

    (void)a, (void)b, (void)c, (void)d;
    return w->stop;
}

static void *watch_main(void *arg)
{
    struct watch *w = arg;
    CURL *h = curl_easy_init();
    struct curl_slist *hd = NULL;
    char url[256], *auth = af_xasprintf("Authorization: Bearer %s", token);
    char *ca = af_xasprintf("%s/run/pki/ca.crt", k8s);

    snprintf(url, sizeof(url),
             "https://127.0.0.1:6443/api/v1/namespaces/%s/pods?watch=1&timeoutSeconds=3600", w->ns);
    hd = curl_slist_append(hd, auth);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_CAINFO, ca);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hd);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, watch_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, w);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, watch_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, w);
    curl_easy_perform(h);
    curl_slist_free_all(hd);
    curl_easy_cleanup(h);
    af_free(auth);
    af_free(ca);
    return NULL;
}

/* ---- kube-scheduler and accelfit ---- */

static pid_t spawn(const char *log, char *const argv[])
{
    pid_t pid = fork();

    if (pid < 0)
        die("fork: %s", strerror(errno));
    if (pid == 0) {
        if (!freopen(log, "a", stdout) || dup2(STDOUT_FILENO, STDERR_FILENO) < 0)
            _exit(127);
        setpgid(0, 0);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

static void stop(pid_t pid)
{
    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "r");
    struct af_buf b = AF_BUF_INIT(0);
    char chunk[4096];
    size_t n;

    if (!f)
        die("cannot read %s", path);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        af_assert(!af_buf_add(&b, chunk, n));
    fclose(f);
    af_assert(!af_buf_add(&b, "", 1));
    return b.buf;
}

static void replace(char **s, const char *from, const char *to)
{
    char *at = strstr(*s, from), *out;

    if (!at)
        die("the shipped scheduler config has no '%s'", from);
    out = af_xasprintf("%.*s%s%s", (int)(at - *s), *s, to, at + strlen(from));
    af_free(*s);
    *s = out;
}

/*
 * The shipped configuration, as the e2e suite runs it: the client's kubeconfig added,
 * accelfit's Service URL replaced by the local one, leader election off (one scheduler,
 * no Lease namespace); without extenders for the run alone.
 */
static char *scheduler_config(bool extenders)
{
    char *cfg = read_text(AF_SOURCE_DIR "/manifests/base/kube-scheduler-config.yaml");
    char *client = af_xasprintf("kind: KubeSchedulerConfiguration\nclientConnection:\n"
                                "  kubeconfig: %s/run/scheduler.kubeconfig\n", k8s);
    char *path = af_xasprintf("%s/scheduler-%s.yaml", tmp, extenders ? "extenders" : "alone");
    char url[64];
    FILE *f;

    snprintf(url, sizeof(url), "http://127.0.0.1:%d", ACC_PORT);
    replace(&cfg, "kind: KubeSchedulerConfiguration\n", client);
    replace(&cfg, "leaderElect: true", "leaderElect: false");
    if (extenders) {
        while (strstr(cfg, "http://accelfit.accelfit.svc:8888"))
            replace(&cfg, "http://accelfit.accelfit.svc:8888", url);
    } else {
        char *ext = strstr(cfg, "\nextenders:");
        if (!ext)
            die("the shipped scheduler config has no extenders");
        ext[1] = 0;
    }
    if (!(f = fopen(path, "w")) || fputs(cfg, f) < 0 || fclose(f) != 0)
        die("cannot write %s", path);
    af_free(cfg);
    af_free(client);
    return path;
}

static pid_t start_scheduler(const char *cfg)
{
    char *log = af_xasprintf("%s/scheduler.log", tmp);
    char *bin = af_xasprintf("%s/bin/kube-scheduler", k8s);
    char *cfgarg = af_xasprintf("--config=%s", cfg);
    char *authn = af_xasprintf("--authentication-kubeconfig=%s/run/scheduler.kubeconfig", k8s);
    char *authz = af_xasprintf("--authorization-kubeconfig=%s/run/scheduler.kubeconfig", k8s);
    char *argv[] = {bin, cfgarg, authn, authz, "--bind-address=127.0.0.1", "--v=1", NULL};
    pid_t pid = spawn(log, argv);
    char url[64];
    double t0 = now_s();

    snprintf(url, sizeof(url), "https://127.0.0.1:%d/healthz", SCHED_PORT);
    while (!http_ok(url)) {
        if (waitpid(pid, NULL, WNOHANG) == pid || now_s() - t0 > 60)
            die("kube-scheduler did not start (log: %s)", log);
        usleep(50000);
    }
    af_free(log), af_free(bin), af_free(cfgarg), af_free(authn), af_free(authz);
    return pid;
}

static pid_t start_accelfit(void)
{
    char *log = af_xasprintf("%s/accelfit.log", tmp);
    char *kc = af_xasprintf("%s/admin.kubeconfig", k8s);
    char listen[64], url[96];
    char *argv[] = {acc_bin, "serve", "--kubeconfig", kc, "--listen", listen,
                    "--url-prefix=/accelfit", "--when-not-ready=reject", "--log-format=json",
                    NULL};
    pid_t pid;
    double t0 = now_s();

    snprintf(listen, sizeof(listen), "127.0.0.1:%d", ACC_PORT);
    snprintf(url, sizeof(url), "http://%s/readyz", listen);
    pid = spawn(log, argv);
    while (!http_ok(url)) {
        if (waitpid(pid, NULL, WNOHANG) == pid || now_s() - t0 > 300)
            die("accelfit never became ready (log: %s)", log);
        usleep(20000);
    }
    af_free(log), af_free(kc);
    return pid;
}

/* ---- the floor: an extender that does nothing ---- */

/*
 * What any extender costs kube-scheduler, whatever it decides: a minimal libwebsockets
 * server on accelfit's port that reads each call whole and answers at once, filter with
 * every candidate kept (NodeNames as sent, no failed nodes) and prioritize with every
 * candidate scored 0. kube-scheduler then encodes, sends and decodes as much as it does
 * with accelfit, and places the pods as alone. The gap between this run and the run
 * alone is the protocol's (kube-scheduler v1.26's JSON and HTTP, per call, for every
 * candidate); the gap between it and accelfit is what accelfit's decisions cost or save.
 */
struct null_pss {
    int verb;                /* 'f' filter, 'p' prioritize, 0 anything else */
    struct af_buf body;
};

/* Appends each name of the request's "NodeNames" array to `out`, framed as
 * `pre` NAME `post`, comma separated. Node names are DNS subdomains: no escapes. The
 * first "NodeNames" key is taken: the bench's pods hold no such string. */
static int null_names(const struct af_buf *in, const char *pre, const char *post,
                      struct af_buf *out)
{
    const char *p = in->buf ? memmem(in->buf, in->len, "\"NodeNames\"", 11) : NULL;
    const char *end = in->buf + in->len;
    bool first = true;

    if (!p)
        return 0;
    for (p += 11; p < end && (*p == ' ' || *p == ':'); p++)
        ;
    if (p == end || *p != '[')
        return 0;   /* null */
    for (p++; p < end && *p != ']';) {
        const char *q;
        if (*p == ',' || *p == ' ' || *p == '\n') {
            p++;
            continue;
        }
        if (*p != '"' || !(q = memchr(p + 1, '"', (size_t)(end - p - 1))))
            return -1;
        if ((!first && af_buf_add(out, ",", 1)) || af_buf_puts(out, pre) ||
            af_buf_add(out, p + 1, (size_t)(q - p - 1)) || af_buf_puts(out, post))
            return -1;
        first = false;
        p = q + 1;
    }
    return 0;
}

static int null_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                   size_t len)
{
    struct null_pss *pss = user;

    switch (reason) {
    case LWS_CALLBACK_HTTP: {
        const char *uri = in ? in : "";
        size_t n = strlen(uri);
        pss->verb = n >= 7 && !strcmp(uri + n - 7, "/filter")       ? 'f'
                    : n >= 11 && !strcmp(uri + n - 11, "/prioritize") ? 'p'
                                                                      : 0;
        af_buf_reset(&pss->body);
        return 0;
    }
    case LWS_CALLBACK_HTTP_BODY:
        return af_buf_add(&pss->body, in, len) ? -1 : 0;
    case LWS_CALLBACK_HTTP_BODY_COMPLETION: {
        enum { ROOM = LWS_PRE + 512 };   /* lws's and the headers', before the body */
        static const char room[ROOM];
        struct af_buf out = AF_BUF_INIT(0);
        unsigned char head[ROOM], *start = head + LWS_PRE, *p = start;
        size_t hlen;
        int rc = 0;

        af_assert(!af_buf_add(&out, room, ROOM));
        if (pss->verb == 'f')
            rc = af_buf_puts(&out, "{\"Nodes\":null,\"NodeNames\":[") ||
                 null_names(&pss->body, "\"", "\"", &out) ||
                 af_buf_puts(&out, "],\"FailedNodes\":{},\"FailedAndUnresolvableNodes\":{},"
                                   "\"Error\":\"\"}");
        else if (pss->verb == 'p')
            rc = af_buf_puts(&out, "[") ||
                 null_names(&pss->body, "{\"Host\":\"", "\",\"Score\":0}", &out) ||
                 af_buf_puts(&out, "]");
        else   /* preempt: no node where eviction helps */
            rc = af_buf_puts(&out, "{\"NodeNameToMetaVictims\":{}}");
        af_buf_reset(&pss->body);
        if (rc || lws_add_http_common_headers(wsi, HTTP_STATUS_OK, "application/json",
                                              out.len - ROOM, &p, start + 512) ||
            lws_finalize_http_header(wsi, &p, start + 512)) {
            af_buf_release(&out);
            return -1;
        }
        /* headers and body in one write, as accelfit answers */
        hlen = (size_t)(p - start);
        memcpy(out.buf + ROOM - hlen, start, hlen);
        rc = lws_write(wsi, (unsigned char *)out.buf + ROOM - hlen, out.len - ROOM + hlen,
                       LWS_WRITE_HTTP) < 0;
        af_buf_release(&out);
        if (rc)
            return -1;
        return lws_http_transaction_completed(wsi) ? -1 : 0;
    }
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
        if (pss)   /* none for a connection that sent no request */
            af_buf_release(&pss->body);
        break;
    default:
        break;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}

/* The null extender's loop, on 127.0.0.1:ACC_PORT (bench_scheduler --null-extender runs
 * it alone). */
static void null_extender_serve(void)
{
    static const struct lws_protocols protocols[] = {
        {"http", null_cb, sizeof(struct null_pss), 0, 0, NULL, 0},
        {NULL, NULL, 0, 0, 0, NULL, 0},
    };

    bench_floor_serve(ACC_PORT, protocols, 65536);   /* reading as accelfit reads */
}

static pid_t start_null_extender(void)
{
    char *log = af_xasprintf("%s/null-extender.log", tmp);
    /* this very program, even if rebuilt since it started */
    char *argv[] = {"/proc/self/exe", "--null-extender", NULL};
    char url[96];
    double t0 = now_s();
    pid_t pid;

    pid = spawn(log, argv);   /* a process of its own, as accelfit is */
    af_free(log);
    /* ready once it accepts connections */
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/", ACC_PORT);
    for (;;) {
        CURL *h = curl_easy_init();
        CURLcode rc;
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_CONNECT_ONLY, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 2L);
        rc = curl_easy_perform(h);
        curl_easy_cleanup(h);
        if (rc == CURLE_OK)
            break;
        if (waitpid(pid, NULL, WNOHANG) == pid || now_s() - t0 > 30) {
            stop(pid);
            die("the null extender did not start on port %d", ACC_PORT);
        }
        usleep(20000);
    }
    return pid;
}

/* ---- one run ---- */

enum kind { ALONE, FLOOR, ACCELFIT };
static const char *const kind_name[] = {"alone", "null extender", "accelfit"};

struct run {
    double pods_s;           /* middle 80 % of the bindings */
    int bound;
    double ext_cpu, sched_cpu;   /* the extender's (accelfit or the floor), kube-scheduler's */
    long ext_rss_kb;
};

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static struct run one_run(int pods, int parts, int round, enum kind kind)
{
    static const char *const ns_part[] = {"alone", "floor", "accelfit"};
    struct watch w = {.pods = pods, .line = AF_BUF_INIT(0), .mu = PTHREAD_MUTEX_INITIALIZER};
    struct run r = {0};
    char *cfg = scheduler_config(kind != ALONE), *body;
    pid_t ext = 0, sched;
    double last = 0, t0, *sorted;
    int seen = -1;

    snprintf(w.ns, sizeof(w.ns), "bench-%d-%s", round, ns_part[kind]);
    body = af_xasprintf("{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{\"name\":\"%s\"}}",
                        w.ns);
    if (api("POST", "/api/v1/namespaces", body) != 201)
        die("cannot create namespace %s", w.ns);
    af_free(body);
    create_parts("pods", parts, w.ns);
    if (read_count() != pods)
        die("%d of %d pods created in %s", read_count(), pods, w.ns);

    w.bound_at = af_xcalloc((size_t)pods, sizeof(double));
    af_assert(!pthread_create(&w.th, NULL, watch_main, &w));
    t0 = now_s();
    for (;;) {   /* the watch's first events: every pod, pending */
        pthread_mutex_lock(&w.mu);
        seen = w.added;
        pthread_mutex_unlock(&w.mu);
        if (seen >= pods)
            break;
        if (now_s() - t0 > 120)
            die("the watch saw %d of %d pods", seen, pods);
        usleep(20000);
    }
    if (kind != ALONE)
        running[1] = ext = kind == ACCELFIT ? start_accelfit() : start_null_extender();
    running[0] = sched = start_scheduler(cfg);

    /* until every pod is bound, or no binding for 30 s (pods that fit nowhere) */
    last = now_s();
    for (;;) {
        int b;
        pthread_mutex_lock(&w.mu);
        b = w.bound;
        pthread_mutex_unlock(&w.mu);
        if (b != seen) {
            seen = b;
            last = now_s();
        }
        if (b >= pods || now_s() - last > 30)
            break;
        usleep(50000);
    }
    r.sched_cpu = bench_cpu_s(sched);
    if (ext) {
        long hwm;
        r.ext_cpu = bench_cpu_s(ext);
        bench_mem_kb(ext, &r.ext_rss_kb, &hwm);
    }
    stop(sched);
    stop(ext);
    running[0] = running[1] = 0;
    w.stop = 1;
    pthread_join(w.th, NULL);

    sorted = af_xcalloc((size_t)pods, sizeof(double));
    for (int i = 0; i < pods; i++)
        if (w.bound_at[i] > 0)
            sorted[r.bound++] = w.bound_at[i];
    qsort(sorted, (size_t)r.bound, sizeof(double), cmp_double);
    if (r.bound >= 10) {
        int lo = r.bound / 10, hi = r.bound * 9 / 10;
        r.pods_s = (hi - lo) / (sorted[hi] - sorted[lo]);
    }
    af_free(sorted);

    /* The next run starts on empty nodes: delete the pods at once (no kubelet confirms).
     * The API server gives one request 60 s; a collection of 10,000 pods on a busy machine
     * can take longer, so ask again until one answer covers what is left. */
    body = af_xasprintf("/api/v1/namespaces/%s/pods?gracePeriodSeconds=0", w.ns);
    for (int tries = 0;; tries++) {
        long st = api("DELETE", body, NULL);
        if (st == 200)
            break;
        if (tries == 20)
            die("cannot delete the pods of %s (HTTP %ld)", w.ns, st);
        sleep(1);
    }
    af_free(body);
    af_free(w.bound_at);
    af_buf_release(&w.line);
    af_free(cfg);
    return r;
}

/* The median of v[0..n), v left as it is. */
static double median(const double *v, int n)
{
    double s[16];

    memcpy(s, v, sizeof(double) * (size_t)n);
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* median(num) / median(den), and lo..hi, the spread of num[r] / den[r] round by round. */
static double ratio_of(const double *num, const double *den, int n, double *lo, double *hi)
{
    *lo = *hi = 0;
    for (int r = 0; r < n; r++) {
        double q = num[r] / den[r];
        *lo = r ? (q < *lo ? q : *lo) : q;
        *hi = r ? (q > *hi ? q : *hi) : q;
    }
    return median(num, n) / median(den, n);
}

static void size_point(int nodes, int pods, int rounds)
{
    int parts = 8;
    double rate[3][16], lo, hi, ratio;
    struct run last = {0};

    printf("== bench_scheduler: %d nodes, %d pending pods (40%% GPU, 25%% Neuron, 35%% CPU), "
           "%d rounds%s\n", nodes, pods, rounds,
           stated ? "; the GPU pods state accelfit.io/workload: inference" : "");
    fflush(stdout);
    sh("'%s/down.sh' --clean >>'%s/cp.log' 2>&1; '%s/up.sh' >>'%s/cp.log' 2>&1 && "
       "'%s/nodes.sh' create >>'%s/cp.log' 2>&1", k8s, tmp, k8s, tmp, k8s, tmp);
    write_objects(nodes, pods, parts);
    /* only the bench's nodes: the templates go */
    sh("'%s/nodes.sh' delete >>'%s/cp.log' 2>&1", k8s, tmp);
    create_parts("nodes", parts, NULL);
    if (read_count() != nodes)
        die("%d of %d nodes created", read_count(), nodes);

    printf("| round | run | pods/s (middle 80%%) | bound | kube-scheduler CPU s | "
           "extender CPU ms/pod | extender RSS |\n|---|---|---|---|---|---|---|\n");
    fflush(stdout);
    for (int r = 0; r < rounds; r++) {
        /* rotate which goes first, so none always meets a warmer API server */
        for (int k = 0; k < 3; k++) {
            enum kind kind = (enum kind)((k + r) % 3);
            struct run x = one_run(pods, parts, r, kind);
            rate[kind][r] = x.pods_s;
            if (kind == ACCELFIT)
                last = x;
            if (kind == ALONE)
                printf("| %d | alone | %.1f | %d | %.1f | | |\n", r + 1, x.pods_s, x.bound,
                       x.sched_cpu);
            else
                printf("| %d | %s | %.1f | %d | %.1f | %.2f | %.1f MiB |\n", r + 1,
                       kind_name[kind], x.pods_s, x.bound, x.sched_cpu,
                       x.bound ? x.ext_cpu * 1000 / x.bound : 0, (double)x.ext_rss_kb / 1024);
            fflush(stdout);
        }
    }
    ratio = ratio_of(rate[ACCELFIT], rate[ALONE], rounds, &lo, &hi);
    printf("%d nodes / %d pods: alone %.1f pods/s, null extender %.1f, with accelfit %.1f "
           "(medians): ratio %.2fx (per round %.2f-%.2fx); accelfit RSS %.1f MiB\n", nodes, pods,
           median(rate[ALONE], rounds), median(rate[FLOOR], rounds),
           median(rate[ACCELFIT], rounds), ratio, lo, hi, (double)last.ext_rss_kb / 1024);
    ratio = ratio_of(rate[FLOOR], rate[ALONE], rounds, &lo, &hi);
    printf("  the protocol alone (null extender / alone): %.2fx (per round %.2f-%.2fx)\n", ratio,
           lo, hi);
    ratio = ratio_of(rate[ACCELFIT], rate[FLOOR], rounds, &lo, &hi);
    printf("  accelfit's decisions (accelfit / null extender): %.2fx (per round %.2f-%.2fx)\n\n",
           ratio, lo, hi);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    char *self = af_xstrdup(argv[0]), *env = getenv("AF_E2E_K8S"), *tk;
    char bin[PATH_MAX + 32], lock[PATH_MAX];
    const char *tmpdir = getenv("TMPDIR");
    int fd;

    if (argc == 2 && !strcmp(argv[1], "--null-extender")) {
        null_extender_serve();   /* the floor alone, on 127.0.0.1:18741, until killed */
        return 0;
    }
    snprintf(k8s, sizeof(k8s), "%s", env && *env ? env : AF_SOURCE_DIR "/build/k8s");
    snprintf(bin, sizeof(bin), "%s/bin/kube-scheduler", k8s);
    if (access(bin, X_OK) != 0 || system("command -v etcd >/dev/null") != 0) {
        printf("== bench_scheduler: skipped: no control plane in %s (bin/kube-apiserver, "
               "bin/kube-scheduler, bin/kubectl) or no etcd. Prepare it with ./run.sh test, or: "
               "mkdir -p build/k8s/bin && ../shared/k8s/install.sh build/k8s && "
               "cp tests/e2e/controlplane/*.sh build/k8s/ (or set AF_E2E_K8S)\n", k8s);
        return 0;
    }
    if (argc >= 2 && !strcmp(argv[1], "--stated")) {
        stated = true;
        argv++, argc--;
    }
    if (argc == 2)
        die("usage: bench_scheduler [--stated] [NODES PODS [ROUNDS]]...");
    /* One control plane a machine (fixed ports): wait for the e2e suite or another bench. */
    snprintf(lock, sizeof(lock), "%s/accelfit-e2e.lock", tmpdir && *tmpdir ? tmpdir : "/tmp");
    fd = open(lock, O_CREAT | O_RDWR | O_CLOEXEC, 0666);
    if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
        printf("bench_scheduler: another run holds %s; waiting for it\n", lock);
        fflush(stdout);
        (void)flock(fd, LOCK_EX);
    }
    if (!mkdtemp(tmp))
        die("mkdtemp: %s", strerror(errno));
    acc_bin = af_xasprintf("%s/accelfit", dirname(self));
    curl_global_init(CURL_GLOBAL_DEFAULT);
    signal(SIGPIPE, SIG_IGN);

    /* the admin token, read once the control plane has made it */
    atexit(cleanup);
    plane_up = true;
    sh("'%s/down.sh' --clean >'%s/cp.log' 2>&1; '%s/up.sh' >>'%s/cp.log' 2>&1", k8s, tmp, k8s, tmp);
    {
        char path[PATH_MAX + 32];
        snprintf(path, sizeof(path), "%s/run/admin.token", k8s);
        tk = read_text(path);
        token = tk;
    }
    if (argc >= 3) {
        /* NODES PODS [ROUNDS], or several NODES PODS ROUNDS triples under one lock */
        for (int a = 1; a + 1 < argc; a += 3) {
            int nodes = atoi(argv[a]), pods = atoi(argv[a + 1]);
            int rounds = a + 2 < argc ? atoi(argv[a + 2]) : 3;
            if (nodes < 8 || pods < 10 || rounds < 1 || rounds > 16)
                die("usage: bench_scheduler [--stated] [NODES PODS [ROUNDS]]... (NODES >= 8, "
                    "PODS >= 10, ROUNDS 1-16)");
            size_point(nodes, pods, rounds);
        }
    } else {
        size_point(1000, 2000, 3);
        size_point(5000, 10000, 2);
    }
    cleanup();
    sh("rm -rf '%s'", tmp);
    af_free(acc_bin);
    af_free(tk);
    af_free(self);
    curl_global_cleanup();
    return 0;
}
