/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A raw-socket fuzzer of the live server: starts `accelfit serve --demo` (best
 * the ASan + UBSan build) with a health listener and sends it mutated
 * requests, made from requests kube-scheduler, kube-apiserver and kubelet send
 * (tests/fixtures), delivered every way a peer can: in one write, a few bytes
 * at a time, pipelined, half-closed, or abandoned mid-request. After every
 * few exchanges it checks that the server is alive and answers /healthz on a
 * new connection; a crash or a hang keeps the inputs of the last round in
 * ARTIFACTS/net-<seed>-<round>-<i> and exits 1.
 *
 *   net_fuzz ACCELFIT SOURCE_DIR [--seconds S | --rounds N] [--seed X] [--artifacts DIR]
 *
 * With --rounds and --seed the inputs are the same on every run (ctest runs a
 * short one as net_fuzz_smoke); ./run.sh fuzz runs it by time with a new seed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ROUND 16            /* exchanges between liveness checks */
#define MAX_INPUT (256u << 10)

struct seed {
    char *data;
    size_t len;
};

static struct seed seeds[64];
static size_t n_seeds;
static uint64_t rng;
static pid_t server;
static int api_port, health_port;

static uint32_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (uint32_t)(rng >> 11);
}

static uint32_t below(uint32_t n)
{
    return n ? rnd() % n : 0;
}

static void die(const char *msg)
{
    fprintf(stderr, "net_fuzz: %s: %s\n", msg, strerror(errno));
    exit(2);
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    char *buf;
    long n;

    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n)
        die("read");
    fclose(f);
    *len = (size_t)n;
    return buf;
}

static void add_seed(const char *text, size_t len)
{
    if (n_seeds < sizeof(seeds) / sizeof(seeds[0])) {
        seeds[n_seeds].data = malloc(len);
        memcpy(seeds[n_seeds].data, text, len);
        seeds[n_seeds].len = len;
        n_seeds++;
    }
}

/* A POST of a fixture body, as kube-scheduler or kube-apiserver sends it. */
static void add_post(const char *src, const char *path, const char *file, const char *extra)
{
    char p[4096], head[1024];
    size_t blen, hlen;
    char *body;

    snprintf(p, sizeof(p), "%s/%s", src, file);
    body = read_file(p, &blen);
    if (!body) {
        fprintf(stderr, "net_fuzz: no %s\n", p);
        exit(2);
    }
    hlen = (size_t)snprintf(head, sizeof(head),
                            "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Type: "
                            "application/json\r\nContent-Length: %zu\r\n\r\n",
                            path, extra, blen);
    {
        char *all = malloc(hlen + blen);
        memcpy(all, head, hlen);
        memcpy(all + hlen, body, blen);
        add_seed(all, hlen + blen);
        free(all);
    }
    free(body);
}

static void load_seeds(const char *src)
{
    static const char *const gets[] = {
        "GET /healthz HTTP/1.1\r\nHost: 10.0.1.23:8080\r\nUser-Agent: kube-probe/1.26\r\n"
        "Accept: */*\r\nConnection: close\r\n\r\n",
        "GET /readyz HTTP/1.0\r\n\r\n",
        "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: text/plain;version=0.0.4\r\n\r\n",
        "HEAD /costs HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /rollouts HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings\r\n"
        "Upgrade: h2c\r\nHTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n\r\n",
        "GET /recommend?workload=inference&model-params=7B&&objective=cost HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /explain?pod=ml%2Finfer HTTP/1.1\r\nHost: x\r\nUpgrade: foo\r\n\r\n",
        "POST /accelfit/preempt HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
        "POST /filter HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof(gets) / sizeof(gets[0]); i++)
        add_seed(gets[i], strlen(gets[i]));
    add_post(src, "/filter", "tests/fixtures/kube-scheduler/filter-nodecache-true.json", "");
    add_post(src, "/accelfit/filter", "tests/fixtures/kube-scheduler/filter-nodecache-false.json",
             "Accept-Encoding: gzip\r\n");
    add_post(src, "/prioritize", "tests/fixtures/kube-scheduler/prioritize-nodecache-true.json",
             "");
    add_post(src, "/explain", "tests/fixtures/kube-scheduler/filter-nodecache-true-neuron.json",
             "Connection: close\r\n");
    add_post(src, "/mutate", "docs/examples/rollout/llm-infer-replica.json", "");
}

/* One mutation of `in` into `out` (capacity MAX_INPUT); returns the new length. */
static size_t mutate(const char *in, size_t len, char *out)
{
    size_t n = len < MAX_INPUT ? len : MAX_INPUT;
    int rounds = 1 + (int)below(4);

    memcpy(out, in, n);
    while (rounds--) {
        size_t at = n ? below((uint32_t)n) : 0;
        switch (below(9)) {
        case 0:   /* flip a bit */
            if (n)
                out[at] ^= (char)(1u << below(8));
            break;
        case 1:   /* an interesting byte */
            if (n) {
                static const char b[] = {'\0', '\r', '\n', ' ', ':', '%', '"', '\\', '{', '\x7f'};
                out[at] = b[below(sizeof(b))];
            }
            break;
        case 2:   /* cut */
            n = at;
            break;
        case 3:   /* delete a run */
            if (n) {
                size_t k = 1 + below(64);
                if (at + k > n)
                    k = n - at;
                memmove(out + at, out + at + k, n - at - k);
                n -= k;
            }
            break;
        case 4:   /* duplicate a run */
            if (n && n < MAX_INPUT / 2) {
                size_t k = 1 + below(256);
                if (at + k > n)
                    k = n - at;
                memmove(out + at + k, out + at, n - at);
                n += k;
            }
            break;
        case 5: { /* a number where one was */
            char num[24];
            int l = snprintf(num, sizeof(num), "%d",
                             below(3) == 0 ? -1 : below(2) ? (int)below(100) : (int)rnd());
            if (n + (size_t)l < MAX_INPUT) {
                memmove(out + at + l, out + at, n - at);
                memcpy(out + at, num, (size_t)l);
                n += (size_t)l;
            }
            break;
        }
        case 6: { /* splice another seed after this one (pipelining) */
            const struct seed *o = &seeds[below((uint32_t)n_seeds)];
            if (n + o->len < MAX_INPUT) {
                memcpy(out + n, o->data, o->len);
                n += o->len;
            }
            break;
        }
        case 7: { /* a header line inserted after the request line */
            static const char *const h[] = {
                "Connection: close\r\n", "Connection: keep-alive\r\n", "Upgrade: h2c\r\n",
                "Upgrade: websocket\r\n", "Content-Length: 99999999\r\n", "Content-Length: 0\r\n",
                "Expect: 100-continue\r\n", "Transfer-Encoding: chunked\r\n", "Host:\r\n",
                "X: \x01\x02\r\n",
            };
            const char *eol = memchr(out, '\n', n);
            const char *line = h[below(sizeof(h) / sizeof(h[0]))];
            size_t l = strlen(line), pos = eol ? (size_t)(eol - out) + 1 : 0;
            if (n + l < MAX_INPUT) {
                memmove(out + pos + l, out + pos, n - pos);
                memcpy(out + pos, line, l);
                n += l;
            }
            break;
        }
        default:  /* unchanged */
            break;
        }
    }
    return n;
}

static int connect_to(int port)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

    if (fd < 0)
        die("socket");
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* Reads what comes within `ms`, until the server closes; returns the bytes read. */
static size_t drain(int fd, int ms, char *keep, size_t keepcap)
{
    char buf[65536];
    size_t total = 0;
    struct timespec t0;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        struct timespec t;
        struct pollfd p = {fd, POLLIN, 0};
        long left;
        ssize_t got;

        clock_gettime(CLOCK_MONOTONIC, &t);
        left = ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        got = read(fd, buf, sizeof(buf));
        if (got <= 0)
            break;
        if (keep && total < keepcap) {
            size_t k = (size_t)got < keepcap - total ? (size_t)got : keepcap - total;
            memcpy(keep + total, buf, k);
        }
        total += (size_t)got;
    }
    return total;
}

/* Sends one input the way `how` says. */
static void deliver(int port, const char *in, size_t len, unsigned how)
{
    int fd = connect_to(port);
    size_t off = 0;

    if (fd < 0)
        return;
    switch (how) {
    case 0:   /* one write, wait for answers */
    case 1:   /* one write, then half-close */
        (void)!write(fd, in, len);
        if (how == 1)
            shutdown(fd, SHUT_WR);
        drain(fd, 100, NULL, 0);
        break;
    case 2:   /* slow: small pieces */
        while (off < len) {
            size_t k = 1 + below(len < 64 ? 8 : 512);
            if (k > len - off)
                k = len - off;
            if (write(fd, in + off, k) <= 0)
                break;
            off += k;
            if (below(4) == 0)
                usleep(1000);
        }
        drain(fd, 100, NULL, 0);
        break;
    case 3:   /* abandoned midway: a reset with the request half sent */
        (void)!write(fd, in, len / 2);
        {
            struct linger lg = {1, 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        }
        break;
    default:  /* the same input three times in one write */
        for (int i = 0; i < 3; i++)
            (void)!write(fd, in, len);
        drain(fd, 100, NULL, 0);
        break;
    }
    close(fd);
}

static bool alive(void)
{
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    char ans[64] = "";
    int status;

    if (waitpid(server, &status, WNOHANG) == server) {
        server = 0;
        fprintf(stderr, "net_fuzz: the server exited (status %d)\n", status);
        return false;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        int port = attempt ? api_port : health_port, fd = connect_to(port);
        if (fd < 0)
            continue;
        (void)!write(fd, req, sizeof(req) - 1);
        drain(fd, 10000, ans, sizeof(ans) - 1);
        close(fd);
        if (!strncmp(ans, "HTTP/1.1 200", 12))
            return true;
    }
    fprintf(stderr, "net_fuzz: the server did not answer /healthz\n");
    return false;
}

static int free_port(void)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || getsockname(fd, (struct sockaddr *)&sa, &sl))
        die("bind");
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

static void start_server(const char *bin)
{
    char listen[64], hlisten[64];

    api_port = free_port();
    health_port = free_port();
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", api_port);
    snprintf(hlisten, sizeof(hlisten), "127.0.0.1:%d", health_port);
    server = fork();
    if (server < 0)
        die("fork");
    if (server == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, STDOUT_FILENO);   /* its log; sanitizer reports go to stderr */
        execl(bin, bin, "serve", "--demo", "--listen", listen, "--health-listen", hlisten,
              "--url-prefix", "/accelfit", "--read-timeout", "2", "--log-level", "error",
              (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 300; i++) {
        int fd = connect_to(health_port);
        if (fd >= 0) {
            close(fd);
            return;
        }
        usleep(50000);
    }
    fprintf(stderr, "net_fuzz: %s never listened\n", bin);
    exit(2);
}

static void keep_round(const char *dir, uint64_t seed, long round, char **inputs,
                       const size_t *lens, int n)
{
    mkdir(dir, 0755);
    for (int i = 0; i < n; i++) {
        char path[4096];
        FILE *f;
        snprintf(path, sizeof(path), "%s/net-%llu-%ld-%d", dir, (unsigned long long)seed, round, i);
        f = fopen(path, "wb");
        if (f) {
            fwrite(inputs[i], 1, lens[i], f);
            fclose(f);
            fprintf(stderr, "net_fuzz: kept %s\n", path);
        }
    }
}

int main(int argc, char **argv)
{
    const char *bin, *src, *artifacts = "build-fuzz/artifacts";
    long seconds = 0, rounds = 0, round;
    uint64_t seed = (uint64_t)time(NULL);
    static char bufs[ROUND][MAX_INPUT];
    char *inputs[ROUND];
    size_t lens[ROUND];
    time_t end;
    unsigned long sent = 0;

    if (argc < 3) {
        fprintf(stderr, "usage: net_fuzz ACCELFIT SOURCE_DIR [--seconds S | --rounds N] "
                        "[--seed X] [--artifacts DIR]\n");
        return 2;
    }
    bin = argv[1];
    src = argv[2];
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seconds"))
            seconds = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--rounds"))
            rounds = atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--seed"))
            seed = strtoull(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--artifacts"))
            artifacts = argv[i + 1];
    }
    if (!seconds && !rounds)
        seconds = 30;
    signal(SIGPIPE, SIG_IGN);
    rng = seed * 2654435761u + 0x9e3779b97f4a7c15ull;
    load_seeds(src);
    start_server(bin);
    end = time(NULL) + seconds;
    for (round = 0; rounds ? round < rounds : time(NULL) < end; round++) {
        for (int i = 0; i < ROUND; i++) {
            const struct seed *s = &seeds[below((uint32_t)n_seeds)];
            inputs[i] = bufs[i];
            lens[i] = mutate(s->data, s->len, bufs[i]);
            deliver(below(2) ? api_port : health_port, inputs[i], lens[i], below(5));
            sent++;
        }
        if (!alive()) {
            keep_round(artifacts, seed, round, inputs, lens, ROUND);
            if (server)
                kill(server, SIGKILL);
            return 1;
        }
    }
    kill(server, SIGTERM);
    {
        int status;
        waitpid(server, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "net_fuzz: the server did not stop cleanly on SIGTERM (status %d)\n",
                    status);
            return 1;
        }
    }
    printf("net_fuzz: %lu inputs in %ld rounds (seed %llu), server alive throughout\n", sent,
           round, (unsigned long long)seed);
    return 0;
}
