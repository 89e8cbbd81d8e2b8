/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_load: accelfit's filter and prioritize latency as a ratio to a floor, so the
 * number means the same on any machine.
 *
 * For caches of 100, 1,000 and 5,000 nodes (30 pods per node: 150,000 at the top) it
 * writes a cluster file, starts the real `accelfit serve --cluster FILE` on loopback and,
 * next to it, a floor: a minimal libwebsockets server that reads each whole request and
 * answers the bytes accelfit answered to the same request (captured first). A load client (plain sockets, several keep-alive connections used in turn, one
 * request in flight, as kube-scheduler calls an extender) replays filter and prioritize requests
 * shaped like the recorded kube-scheduler v1.26 bodies (tests/fixtures/kube-scheduler/:
 * its Pod with managedFields, the same headers) naming 100 and 500 candidates, in both
 * nodeCacheCapable modes (names, or whole Node objects), against the floor and
 * accelfit in turn, request by request. It prints p50 and p99 of each, accelfit's as a
 * multiple of the floor's, and the mean size of accelfit's answer.
 *
 * Usage: bench_load [--quick] [--nodes N] [--candidates N] [--names] [--connections N]
 *                   [--requests N]
 *   --quick          caches of 100 and 1,000 nodes only, fewer requests
 *   --nodes N        one cache of N nodes only (e.g. 5000: the target's rows)
 *   --candidates N   requests naming N candidates only (default: 100, then 500)
 *   --names          names mode (nodeCacheCapable: true) only
 *   --connections N  concurrent keep-alive connections (default 2)
 *   --requests N     requests per verb and target in names mode (default 2000; Nodes mode
 *                    sends a quarter as many at 500 candidates)
 * The accelfit binary is the one next to this program (build-bench/accelfit).
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <libwebsockets.h>

#include "accelfit/util.h"
#include "floor.h"

/* ---- the cluster ---------------------------------------------------------------------------- */

static const struct {
    const char *type, *cpu, *mem, *accel;
} types[] = {
    {"p4d.24xlarge", "95690m", "1176466116Ki", ",\"nvidia.com/gpu\":\"8\""},
    {"g5.2xlarge", "7910m", "31550284Ki", ",\"nvidia.com/gpu\":\"1\""},
    {"g5.12xlarge", "47810m", "195826304Ki", ",\"nvidia.com/gpu\":\"4\""},
    {"g6.xlarge", "3920m", "15136328Ki", ",\"nvidia.com/gpu\":\"1\""},
    {"trn1.32xlarge", "127610m", "520643584Ki",
     ",\"aws.amazon.com/neuron\":\"16\",\"aws.amazon.com/neuroncore\":\"32\""},
    {"inf2.xlarge", "3920m", "15432508Ki",
     ",\"aws.amazon.com/neuron\":\"1\",\"aws.amazon.com/neuroncore\":\"2\""},
    {"c6i.4xlarge", "15890m", "31550284Ki", ""},
    {"m6i.8xlarge", "31850m", "127336172Ki", ""},
};

static void node_name(char *out, size_t n, int i)
{
    snprintf(out, n, "ip-10-%d-%d-%d.us-west-2.compute.internal", i / 65536, (i / 256) % 256,
             i % 256);
}

/* A Node as the API server sends it (labels, annotations, managedFields, status), ~3 KB. */
static void node_json(struct af_buf *b, int i, bool kind)
{
    int t = i % (int)AF_ARRAY_SIZE(types);
    char name[80];

    node_name(name, sizeof(name), i);
    af_assert(!af_buf_printf(
        b,
        "{%s\"metadata\":{\"name\":\"%s\",\"uid\":\"a482977a-baf8-43bf-ac08-%012d\","
        "\"resourceVersion\":\"%d\",\"creationTimestamp\":\"2026-11-22T02:22:26Z\",\"labels\":{"
        "\"beta.kubernetes.io/arch\":\"amd64\",\"beta.kubernetes.io/instance-type\":\"%s\","
        "\"beta.kubernetes.io/os\":\"linux\",\"eks.amazonaws.com/capacityType\":\"%s\","
        "\"eks.amazonaws.com/nodegroup\":\"ng-%d\",\"failure-domain.beta.kubernetes.io/region\":"
        "\"us-west-2\",\"failure-domain.beta.kubernetes.io/zone\":\"us-west-2%c\","
        "\"karpenter.sh/capacity-type\":\"%s\",\"kubernetes.io/arch\":\"amd64\","
        "\"kubernetes.io/hostname\":\"%s\",\"kubernetes.io/os\":\"linux\","
        "\"node.kubernetes.io/instance-type\":\"%s\",\"topology.kubernetes.io/region\":"
        "\"us-west-2\",\"topology.kubernetes.io/zone\":\"us-west-2%c\"},\"annotations\":{"
        "\"alpha.kubernetes.io/provided-node-ip\":\"10.0.%d.%d\",\"node.alpha.kubernetes.io/ttl\":"
        "\"0\",\"volumes.kubernetes.io/controller-managed-attach-detach\":\"true\"},"
        "\"managedFields\":[{\"manager\":\"kubelet\",\"operation\":\"Update\",\"apiVersion\":\"v1\","
        "\"time\":\"2026-11-22T02:22:26Z\",\"fieldsType\":\"FieldsV1\",\"fieldsV1\":{"
        "\"f:metadata\":{\"f:annotations\":{\".\":{},\"f:alpha.kubernetes.io/provided-node-ip\":{},"
        "\"f:node.alpha.kubernetes.io/ttl\":{}},\"f:labels\":{\".\":{},\"f:kubernetes.io/arch\":{},"
        "\"f:kubernetes.io/hostname\":{},\"f:kubernetes.io/os\":{}}},\"f:spec\":{"
        "\"f:providerID\":{},\"f:taints\":{}}}},{\"manager\":\"kubelet\",\"operation\":\"Update\","
        "\"apiVersion\":\"v1\",\"time\":\"2026-11-22T02:22:30Z\",\"fieldsType\":\"FieldsV1\","
        "\"fieldsV1\":{\"f:status\":{\"f:allocatable\":{},\"f:capacity\":{},\"f:conditions\":{}}},"
        "\"subresource\":\"status\"}]},\"spec\":{\"providerID\":\"aws:///us-west-2a/i-%017x\"},"
        "\"status\":{\"capacity\":{\"cpu\":\"%s\",\"memory\":\"%s\",\"pods\":\"110\"%s},"
        "\"allocatable\":{\"cpu\":\"%s\",\"memory\":\"%s\",\"pods\":\"110\"%s},\"conditions\":["
        "{\"type\":\"Ready\",\"status\":\"True\",\"lastHeartbeatTime\":\"2026-11-22T02:22:30Z\","
        "\"lastTransitionTime\":\"2026-11-22T02:22:30Z\",\"reason\":\"KubeletReady\","
        "\"message\":\"kubelet is posting ready status\"}],\"addresses\":[{\"type\":"
        "\"InternalIP\",\"address\":\"10.0.%d.%d\"},{\"type\":\"Hostname\",\"address\":\"%s\"}],"
        "\"nodeInfo\":{\"kubeletVersion\":\"v1.30.2-eks-1552ad0\",\"containerRuntimeVersion\":"
        "\"containerd://1.7.11\",\"osImage\":\"Amazon Linux 2\",\"architecture\":\"amd64\","
        "\"operatingSystem\":\"linux\",\"kernelVersion\":\"5.10.219-208.866.amzn2.x86_64\"}}}",
        kind ? "\"kind\":\"Node\"," : "", name, i, 100 + i, types[t].type, i % 4 ? "ON_DEMAND" : "SPOT", t, 'a' + i % 3,
        i % 4 ? "on-demand" : "spot", name, types[t].type, 'a' + i % 3, (i / 256) % 256, i % 256,
        (unsigned)i, types[t].cpu, types[t].mem, types[t].accel, types[t].cpu, types[t].mem,
        types[t].accel, (i / 256) % 256, i % 256, name));
}

static void write_cluster(const char *path, int nodes, int pods)
{
    struct af_buf b = AF_BUF_INIT(0);
    FILE *f;

    af_assert(!af_buf_puts(&b, "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":["));
    for (int i = 0; i < nodes; i++) {
        if (i)
            af_assert(!af_buf_puts(&b, ","));
        node_json(&b, i, true);
    }
    for (int i = 0; i < pods; i++) {
        char name[80];
        int node = i % nodes;
        node_name(name, sizeof(name), node);
        af_assert(!af_buf_printf(
            &b,
            ",{\"kind\":\"Pod\",\"metadata\":{\"name\":\"worker-%d\",\"namespace\":\"team-%d\","
            "\"uid\":\"pod-%d\",\"labels\":{\"app\":\"w%d\"},\"ownerReferences\":[{\"kind\":"
            "\"ReplicaSet\",\"name\":\"w%d-5d8f\",\"controller\":true}]},\"spec\":{\"nodeName\":"
            "\"%s\",\"containers\":[{\"name\":\"main\",\"resources\":{\"requests\":{\"cpu\":"
            "\"100m\",\"memory\":\"256Mi\"}}}]},\"status\":{\"phase\":\"Running\"}}",
            i, i % 20, i, i % 50, i % 50, name));
    }
    af_assert(!af_buf_puts(&b, "]}"));
    f = fopen(path, "w");
    af_assert(f && fwrite(b.buf, 1, b.len, f) == b.len && fclose(f) == 0);
    af_buf_release(&b);
}

/* The recorded Pod of tests/fixtures/kube-scheduler/filter-nodecache-true.json. */
static char *fixture_pod(const char *srcdir)
{
    struct af_buf b = AF_BUF_INIT(0);
    char *path = af_xasprintf("%s/tests/fixtures/kube-scheduler/filter-nodecache-true.json",
                              srcdir);
    const char *start, *end;
    char *pod;

    if (af_buf_read_file(&b, path)) {
        fprintf(stderr, "bench_load: cannot read %s\n", path);
        exit(1);
    }
    start = strstr(b.buf, "{\"Pod\":");
    end = strstr(b.buf, ",\"Nodes\":");
    af_assert(start && end && end > start);
    pod = af_xstrndup(start + 7, (size_t)(end - start - 7));
    af_free(path);
    af_buf_release(&b);
    return pod;
}

/* ExtenderArgs naming `n` candidates (a random set), as names or as whole Nodes. */
static char *request_body(const char *pod, int nodes, int n, bool names, unsigned *seed,
                          size_t *len)
{
    struct af_buf b = AF_BUF_INIT(0);
    int *pick = af_xmalloc(sizeof(int) * (size_t)nodes);

    for (int i = 0; i < nodes; i++)
        pick[i] = i;
    for (int i = 0; i < n; i++) {   /* a partial Fisher-Yates shuffle */
        int j = i + (int)(rand_r(seed) % (unsigned)(nodes - i)), t = pick[i];
        pick[i] = pick[j];
        pick[j] = t;
    }
    af_assert(!af_buf_printf(&b, "{\"Pod\":%s,", pod));
    {
        /* Another pod each time, as each scheduling cycle has (its UID differs): accelfit
         * keeps the last Pod it decoded for the prioritize call of the same cycle, and
         * this load must not be served from that. */
        char *uid = strstr(b.buf, "\"uid\":\"");
        af_assert(uid && strlen(uid) > 16);
        snprintf(uid + 7, 9, "%08x", rand_r(seed));
        uid[15] = '-';
    }
    if (names) {
        af_assert(!af_buf_puts(&b, "\"Nodes\":null,\"NodeNames\":["));
        for (int i = 0; i < n; i++) {
            char name[80];
            node_name(name, sizeof(name), pick[i]);
            af_assert(!af_buf_printf(&b, "%s\"%s\"", i ? "," : "", name));
        }
        af_assert(!af_buf_puts(&b, "]}"));
    } else {
        af_assert(!af_buf_puts(&b, "\"Nodes\":{\"metadata\":{},\"items\":["));
        for (int i = 0; i < n; i++) {
            if (i)
                af_assert(!af_buf_puts(&b, ","));
            node_json(&b, pick[i], false);
        }
        af_assert(!af_buf_puts(&b, "]},\"NodeNames\":null}"));
    }
    af_free(pick);
    return af_buf_detach(&b, len);
}

/* ---- HTTP on plain sockets ------------------------------------------------------------------- */

static int connect_to(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0)
        return -1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a))) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool write_all(int fd, const struct iovec *iov, int n)
{
    struct iovec v[4];
    memcpy(v, iov, sizeof(*iov) * (size_t)n);
    while (n > 0) {
        ssize_t w = writev(fd, v, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        while (n > 0 && (size_t)w >= v[0].iov_len) {
            w -= (ssize_t)v[0].iov_len;
            memmove(v, v + 1, sizeof(*v) * (size_t)(n - 1));
            n--;
        }
        if (n > 0) {
            v[0].iov_base = (char *)v[0].iov_base + w;
            v[0].iov_len -= (size_t)w;
        }
    }
    return true;
}

/* Reads one HTTP message (headers + Content-Length body) into *b; false on EOF or error.
 * *status gets the status code of a response (0 for a request). */
static bool read_message(int fd, struct af_buf *b, size_t *header_end, size_t *body_len,
                         int *status)
{
    size_t need = 0;

    af_buf_reset(b);
    *header_end = 0;
    for (;;) {
        char tmp[65536];
        ssize_t r;
        if (*header_end && b->len >= need)
            break;
        r = read(fd, tmp, sizeof(tmp));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        af_assert(!af_buf_add(b, tmp, (size_t)r));
        if (!*header_end) {
            char *e = memmem(b->buf, b->len, "\r\n\r\n", 4);
            if (e) {
                char *cl = strcasestr(b->buf, "\r\nContent-Length:");
                *header_end = (size_t)(e - b->buf) + 4;
                *body_len = cl && cl < e ? strtoul(cl + 17, NULL, 10) : 0;
                need = *header_end + *body_len;
                if (status)
                    *status = !strncmp(b->buf, "HTTP/1.1 ", 9) ? atoi(b->buf + 9) : 0;
            }
        }
    }
    return true;
}

/* ---- the floor ------------------------------------------------------------------------------- */

/*
 * The floor: a minimal libwebsockets HTTP/1.1 server (one context, one vhost, the lws
 * version accelfit links) that reads each whole request and answers, with accelfit's
 * status, headers' shape and Content-Type, the very bytes accelfit answered to the same
 * request: the client asks for "/VERB/K", K the request body's index, and the floor
 * holds accelfit's answers to them (captured before it is forked). What is left between
 * the two is accelfit's work: decode, decide, encode.
 */
static char **floor_answers;
static size_t *floor_lens;
static int floor_n;

struct floor_pss {
    int k;
};

static int floor_cb(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    struct floor_pss *pss = user;

    switch (reason) {
    case LWS_CALLBACK_HTTP: {
        const char *slash = in ? strrchr((const char *)in, '/') : NULL;
        pss->k = slash ? (int)strtol(slash + 1, NULL, 10) : 0;
        if (pss->k < 0 || pss->k >= floor_n)
            pss->k = 0;
        return 0;
    }
    case LWS_CALLBACK_HTTP_BODY:
        return 0;
    case LWS_CALLBACK_HTTP_BODY_COMPLETION: {
        size_t blen = floor_lens[pss->k];
        unsigned char *buf = af_xmalloc(LWS_PRE + 512 + blen), *start = buf + LWS_PRE, *p = start;
        int rc;
        if (lws_add_http_common_headers(wsi, HTTP_STATUS_OK, "application/json", blen, &p,
                                        start + 512) ||
            lws_finalize_http_header(wsi, &p, start + 512)) {
            af_free(buf);
            return -1;
        }
        memcpy(p, floor_answers[pss->k], blen);
        p += blen;
        rc = lws_write(wsi, start, (size_t)(p - start), LWS_WRITE_HTTP) < 0;
        af_free(buf);
        if (rc)
            return -1;
        return lws_http_transaction_completed(wsi) ? -1 : 0;
    }
    default:
        break;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}

static pid_t start_floor(int port, char **answers, size_t *lens, int n)
{
    pid_t pid = fork();

    af_assert(pid >= 0);
    if (pid == 0) {
        static const struct lws_protocols protocols[] = {
            {"http", floor_cb, sizeof(struct floor_pss), 0, 0, NULL, 0},
            {NULL, NULL, 0, 0, 0, NULL, 0},
        };

        floor_answers = answers;
        floor_lens = lens;
        floor_n = n;
        bench_floor_serve(port, protocols, 0);
    }
    return pid;
}

/* ---- accelfit ---------------------------------------------------------------------------------- */

static int free_port(void)
{
    struct sockaddr_in a = {.sin_family = AF_INET};
    socklen_t al = sizeof(a);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    af_assert(!bind(fd, (struct sockaddr *)&a, sizeof(a)));
    af_assert(!getsockname(fd, (struct sockaddr *)&a, &al));
    port = ntohs(a.sin_port);
    close(fd);
    return port;
}

static bool ready(int port)
{
    static const char req[] = "GET /readyz HTTP/1.1\r\nHost: x\r\n\r\n";
    struct af_buf b = AF_BUF_INIT(0);
    struct iovec v = {(void *)req, sizeof(req) - 1};
    size_t he, bl;
    int fd = connect_to(port), status = 0;
    bool ok;

    if (fd < 0)
        return false;
    ok = write_all(fd, &v, 1) && read_message(fd, &b, &he, &bl, &status) && status == 200;
    close(fd);
    af_buf_release(&b);
    return ok;
}

static pid_t start_accelfit(const char *bin, const char *cluster, int port, double *load_s)
{
    char listen[64];
    struct timespec t0, t1;
    pid_t pid;

    snprintf(listen, sizeof(listen), "127.0.0.1:%d", port);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pid = fork();
    af_assert(pid >= 0);
    if (pid == 0) {
        execl(bin, bin, "serve", "--cluster", cluster, "--listen", listen, "--log-level", "warn",
              (char *)NULL);
        perror("bench_load: cannot run accelfit");
        _exit(127);
    }
    for (int i = 0; i < 1200 && !ready(port); i++) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            fprintf(stderr, "bench_load: accelfit exited while loading %s\n", cluster);
            exit(1);
        }
        usleep(50000);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    *load_s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    return pid;
}

/* CPU time a process has used, all its threads, in ns (/proc/PID/task/TID/schedstat). */
static uint64_t proc_cpu_ns(pid_t pid)
{
    char path[64];
    DIR *d;
    struct dirent *e;
    uint64_t sum = 0;

    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    if (!(d = opendir(path)))
        return 0;
    while ((e = readdir(d))) {
        char f[400];
        unsigned long long ns;
        FILE *fp;
        if (e->d_name[0] == '.')
            continue;
        snprintf(f, sizeof(f), "%s/%s/schedstat", path, e->d_name);
        if ((fp = fopen(f, "r"))) {
            if (fscanf(fp, "%llu", &ns) == 1)
                sum += ns;
            fclose(fp);
        }
    }
    closedir(d);
    return sum;
}

/* ---- the load ----------------------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

struct stats {
    double p50, p99;
    int failures;
    size_t bytes;   /* mean answer body */
};

/* accelfit's answer to each body (the floor answers the same bytes), on one connection. */
static void capture_answers(int port, const char *verb, char **bodies, size_t *lens, int n,
                            char **answers, size_t *alens)
{
    struct af_buf b = AF_BUF_INIT(0);
    int fd = connect_to(port);

    af_assert(fd >= 0);
    for (int k = 0; k < n; k++) {
        char head[256];
        struct iovec v[2];
        size_t he, bl;
        int status = 0;
        int hl = snprintf(head, sizeof(head),
                          "POST /%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Length: %zu\r\n"
                          "Content-Type: application/json\r\n\r\n",
                          verb, port, lens[k]);
        v[0].iov_base = head;
        v[0].iov_len = (size_t)hl;
        v[1].iov_base = bodies[k];
        v[1].iov_len = lens[k];
        af_assert(write_all(fd, v, 2) && read_message(fd, &b, &he, &bl, &status) &&
                  status == 200);
        answers[k] = af_xmalloc(bl + 1);
        memcpy(answers[k], b.buf + he, bl);
        alens[k] = bl;
    }
    close(fd);
    af_buf_release(&b);
}

/* The floor serving accelfit's answers to `bodies` for `verb`, listening when this returns. */
static pid_t floor_for(int port, const char *verb, char **bodies, size_t *lens, int n,
                       int *floor_port)
{
    char *answers[8];
    size_t alens[8];
    pid_t pid;
    int fd;

    af_assert(n <= 8);
    capture_answers(port, verb, bodies, lens, n, answers, alens);
    *floor_port = free_port();
    pid = start_floor(*floor_port, answers, alens, n);
    for (int i = 0; i < 500 && (fd = connect_to(*floor_port)) < 0; i++)
        usleep(10000);
    af_assert(fd >= 0);
    close(fd);
    for (int k = 0; k < n; k++)
        af_free(answers[k]);
    return pid;
}

static void floor_stop(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

/*
 * `n` requests to each of two servers, one at a time, round robin over `conns` keep-alive
 * connections to each: what kube-scheduler does (a pool of connections, one extender call
 * in flight per scheduling cycle). The two take turns request by request, so a busy
 * moment on a shared machine falls on both alike and their ratio holds. With
 * `close_each`, every request goes on a new connection with "Connection: close", as
 * kubelet's probes and curl-like clients send them, and its time includes the connect.
 */
static void run_load(const int port[2], const char *verb, char **bodies, size_t *lens,
                     int n_bodies, int conns, int n, bool close_each, struct stats out[2])
{
    int *fd = af_xcalloc((size_t)conns * 2, sizeof(*fd)), m[2] = {0, 0};
    double *lat[2];
    struct af_buf b = AF_BUF_INIT(0);

    for (int t = 0; t < 2; t++) {
        lat[t] = af_xcalloc((size_t)n + 1, sizeof(double));
        memset(&out[t], 0, sizeof(out[t]));
        for (int c = 0; c < conns; c++) {
            fd[t * conns + c] = connect_to(port[t]);
            af_assert(fd[t * conns + c] >= 0);
        }
    }
    for (int i = 0; i < 2 * n; i++) {
        int t = i % 2, c = t * conns + (i / 2) % conns, k = (i / 2) % n_bodies, status = 0;
        char head[256];
        struct iovec v[2];
        struct timespec t0, t1;
        size_t he, bl;
        char path[64];
        /* the floor (t 0) is told which body this is, to answer accelfit's answer to it */
        if (t == 0)
            snprintf(path, sizeof(path), "%s/%d", verb, k);
        else
            snprintf(path, sizeof(path), "%s", verb);
        int hl = snprintf(head, sizeof(head),
                          "POST /%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: "
                          "Go-http-client/1.1\r\nContent-Length: %zu\r\nContent-Type: "
                          "application/json\r\nAccept-Encoding: gzip\r\n%s\r\n",
                          path, port[t], lens[k], close_each ? "Connection: close\r\n" : "");
        v[0].iov_base = head;
        v[0].iov_len = (size_t)hl;
        v[1].iov_base = bodies[k];
        v[1].iov_len = lens[k];
        clock_gettime(CLOCK_MONOTONIC, &t0);
        if (close_each) {
            close(fd[c]);
            fd[c] = connect_to(port[t]);
            af_assert(fd[c] >= 0);
        }
        if (!write_all(fd[c], v, 2) || !read_message(fd[c], &b, &he, &bl, &status) ||
            status != 200) {
            out[t].failures++;
            close(fd[c]);
            fd[c] = connect_to(port[t]);
            af_assert(fd[c] >= 0);
            continue;
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);
        lat[t][m[t]++] =
            (double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3;
        out[t].bytes += bl;
    }
    for (int t = 0; t < 2; t++) {
        qsort(lat[t], (size_t)m[t], sizeof(double), cmp_double);
        out[t].p50 = m[t] ? lat[t][m[t] / 2] : 0;
        out[t].p99 = m[t] ? lat[t][(size_t)m[t] * 99 / 100] : 0;
        out[t].bytes = m[t] ? out[t].bytes / (size_t)m[t] : 0;
        af_free(lat[t]);
    }
    for (int c = 0; c < 2 * conns; c++)
        close(fd[c]);
    af_free(fd);
    af_buf_release(&b);
}

static void fmt_us(double us, char *out, size_t n)
{
    if (us >= 1000)
        snprintf(out, n, "%.2f ms", us / 1000);
    else
        snprintf(out, n, "%.0f µs", us);
}

int main(int argc, char **argv)
{
    int sizes[] = {100, 1000, 5000};
    int conns = 2, requests = 2000, n_sizes = 3, floor_port, only_cands = 0;
    bool names_only = false;
    char *self = af_xstrdup(argv[0]), *bin, *srcdir, tmpdir[] = "/tmp/af-bench-load-XXXXXX";
    char *pod;
    pid_t floor_pid;

    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick")) {
            n_sizes = 2;
            requests = 500;
        } else if (!strcmp(argv[i], "--nodes") && i + 1 < argc) {
            sizes[0] = atoi(argv[++i]);
            n_sizes = 1;
        } else if (!strcmp(argv[i], "--candidates") && i + 1 < argc) {
            only_cands = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--names")) {
            names_only = true;
        } else if (!strcmp(argv[i], "--connections") && i + 1 < argc) {
            conns = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--requests") && i + 1 < argc) {
            requests = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: bench_load [--quick] [--nodes N] [--candidates N] [--names] "
                            "[--connections N] [--requests N]\n");
            return 2;
        }
    }
    if (conns < 1 || requests < 8 || sizes[0] < 100 || only_cands < 0) {
        fprintf(stderr, "bench_load: need at least one connection and one request each\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    bin = af_xasprintf("%s/accelfit", dirname(self));
    srcdir = getenv("AF_SOURCE_DIR") ? af_xstrdup(getenv("AF_SOURCE_DIR")) : af_xstrdup(".");
    pod = fixture_pod(srcdir);
    af_assert(mkdtemp(tmpdir));

    printf("== bench_load: accelfit serve vs a floor (a minimal libwebsockets server that "
           "reads the request and answers accelfit's own answer to it); %d keep-alive "
           "connections, one request in flight\n\n",
           conns);
    printf("| cache | candidates | mode | verb | floor p50 | floor p99 | accelfit p50 | "
           "accelfit p99 | p50 ratio | p99 ratio | floor CPU | accelfit CPU | CPU ratio | "
           "answer |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    fflush(stdout);
    for (int si = 0; si < n_sizes; si++) {
        int nodes = sizes[si], pods = nodes * 30, port = free_port();
        char *cluster = af_xasprintf("%s/cluster-%d.json", tmpdir, nodes);
        double load_s;
        pid_t pid;

        write_cluster(cluster, nodes, pods);
        pid = start_accelfit(bin, cluster, port, &load_s);
        fprintf(stderr, "bench_load: %d nodes, %d pods loaded in %.1f s\n", nodes, pods, load_s);
        for (int ci = 0; ci < (only_cands ? 1 : 2); ci++) {
            int cands = only_cands ? only_cands : ci ? 500 : 100;
            if (cands > nodes)
                continue;
            for (int mode = 0; mode < (names_only ? 1 : 2); mode++) {
                bool names = mode == 0;
                int n_bodies = 8, per = requests;
                char *bodies[8];
                size_t lens[8];
                unsigned seed = (unsigned)(nodes * 31 + cands);
                if (!names && cands == 500)
                    per /= 4;
                for (int k = 0; k < n_bodies; k++)
                    bodies[k] = request_body(pod, nodes, cands, names, &seed, &lens[k]);
                for (int v = 0; v < 2; v++) {
                    const char *verb = v ? "prioritize" : "filter";
                    floor_pid = floor_for(port, verb, bodies, lens, n_bodies, &floor_port);
                    const int ports[2] = {floor_port, port};
                    struct stats fa[2], f, a;
                    char c[4][24];
                    /* Warm both up, then measure both, taking turns. */
                    uint64_t cpu0[2], cpu1[2];
                    run_load(ports, verb, bodies, lens, n_bodies, conns, 40, false, fa);
                    cpu0[0] = proc_cpu_ns(floor_pid);
                    cpu0[1] = proc_cpu_ns(pid);
                    run_load(ports, verb, bodies, lens, n_bodies, conns, per, false, fa);
                    cpu1[0] = proc_cpu_ns(floor_pid);
                    cpu1[1] = proc_cpu_ns(pid);
                    floor_stop(floor_pid);
                    f = fa[0];
                    a = fa[1];
                    fmt_us(f.p50, c[0], sizeof(c[0]));
                    fmt_us(f.p99, c[1], sizeof(c[1]));
                    fmt_us(a.p50, c[2], sizeof(c[2]));
                    fmt_us(a.p99, c[3], sizeof(c[3]));
                    double fcpu = (double)(cpu1[0] - cpu0[0]) / 1e3 / per,
                           acpu = (double)(cpu1[1] - cpu0[1]) / 1e3 / per;
                    printf("| %d nodes, %d pods | %d | %s | %s | %s | %s | %s | %s | **%.2f×** | "
                           "%.2f× | %.0f µs | %.0f µs | %.2f× | %.1f kB |%s\n",
                           nodes, pods, cands, names ? "names" : "Nodes", verb, c[0], c[1], c[2],
                           c[3], a.p50 / f.p50, a.p99 / f.p99, fcpu, acpu,
                           fcpu > 0 ? acpu / fcpu : 0, (double)a.bytes / 1000,
                           f.failures + a.failures ? " (failed requests!)" : "");
                    fflush(stdout);
                }
                /* A client that closes each connection: the answer as it is served then. */
                if (names) {
                    floor_pid = floor_for(port, "filter", bodies, lens, n_bodies, &floor_port);
                    const int ports[2] = {floor_port, port};
                    struct stats fa[2];
                    char c[4][24];
                    run_load(ports, "filter", bodies, lens, n_bodies, conns, per / 4, true, fa);
                    floor_stop(floor_pid);
                    fmt_us(fa[0].p50, c[0], sizeof(c[0]));
                    fmt_us(fa[0].p99, c[1], sizeof(c[1]));
                    fmt_us(fa[1].p50, c[2], sizeof(c[2]));
                    fmt_us(fa[1].p99, c[3], sizeof(c[3]));
                    printf("| %d nodes, %d pods | %d | names, Connection: close | filter | %s | "
                           "%s | %s | %s | **%.2f×** | %.2f× | | | | %.1f kB |%s\n",
                           nodes, pods, cands, c[0], c[1], c[2], c[3], fa[1].p50 / fa[0].p50,
                           fa[1].p99 / fa[0].p99, (double)fa[1].bytes / 1000,
                           fa[0].failures + fa[1].failures ? " (failed requests!)" : "");
                    fflush(stdout);
                }
                for (int k = 0; k < n_bodies; k++)
                    af_free(bodies[k]);
            }
        }
        kill(pid, SIGTERM);
        waitpid(pid, NULL, 0);
        unlink(cluster);
        af_free(cluster);
    }
    rmdir(tmpdir);
    af_free(pod);
    af_free(bin);
    af_free(srcdir);
    af_free(self);
    return 0;
}
