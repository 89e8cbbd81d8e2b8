/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every kind of client, on every listener and route: after each exchange the
 * server is alive and answering. Clients that close their connection
 * (kubelet's probes send "Connection: close"), speak HTTP/1.0, half-close,
 * pipeline, write slowly, reuse a connection, or ask to upgrade it (websocket,
 * h2c, anything else; alone and after a first request on the same
 * connection), over plain HTTP, TLS and the plain health listener. The suite
 * runs under ASan + UBSan too (./run.sh test), where a use after free or a
 * NULL dereference in any of these paths ends the server and fails the test.
 */
#include <check.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accelfit/util.h"
#include "support/http_client.h"
#include "support/support.h"

/* One listener under test: its port and whether it speaks TLS. */
struct listener {
    const char *name;
    int port;
    bool tls;
    bool health_only;   /* the --health-listen vhost: /healthz, /readyz, /metrics */
};

struct route {
    const char *method, *target;
    const char *body_file;   /* relative to the source tree; NULL: no body */
    bool health;             /* served on the health listener too */
};

static const struct route routes[] = {
    {"GET", "/healthz", NULL, true},
    {"GET", "/readyz", NULL, true},
    {"GET", "/metrics", NULL, true},
    {"HEAD", "/healthz", NULL, true},
    {"GET", "/costs", NULL, false},
    {"GET", "/rollouts", NULL, false},
    {"GET", "/recommend?workload=inference&model-params=7B", NULL, false},
    {"GET", "/explain?pod=ml-inference/no-such-pod", NULL, false},
    {"POST", "/filter", "tests/fixtures/kube-scheduler/filter-nodecache-true.json", false},
    {"POST", "/prioritize", "tests/fixtures/kube-scheduler/prioritize-nodecache-true.json", false},
    {"POST", "/explain", "tests/fixtures/kube-scheduler/filter-nodecache-true.json", false},
    {"POST", "/mutate", "docs/examples/rollout/llm-infer-replica.json", false},
    {"POST", "/preempt", NULL, false},
    {"GET", "/no-such-route", NULL, true},
};

enum shape {
    S_CLOSE,        /* Connection: close */
    S_HTTP10,       /* HTTP/1.0, no Connection header */
    S_PROBE,        /* exactly what kubelet's HTTP probe sends */
    S_HALF_CLOSE,   /* keep-alive request, then the client shuts its sending side */
    S_PIPELINE,     /* the request twice in one write */
    S_KEEPALIVE,    /* the request, its answer, the request again on the connection */
    S_SLOW,         /* the request a few bytes at a time */
    S_UP_WS,        /* Upgrade: websocket */
    S_UP_H2C,       /* Upgrade: h2c, as curl --http2 sends it */
    S_UP_OTHER,     /* Upgrade: foo */
    S_UP_WS_2ND,    /* a plain request, then one with Upgrade: websocket */
    S_UP_H2C_2ND,
    S_UP_OTHER_2ND, /* (the first request is the same request without Upgrade) */
    S_EXPECT,       /* Expect: 100-continue, the body sent once the server says continue */
    S_COUNT
};

static const char *const shape_names[S_COUNT] = {
    "Connection: close", "HTTP/1.0",          "kube-probe",       "half-close",
    "pipelined",         "keep-alive reuse",  "slow writes",      "Upgrade: websocket",
    "Upgrade: h2c",      "Upgrade: foo",      "then Upgrade: websocket",
    "then Upgrade: h2c", "then Upgrade: foo", "Expect: 100-continue",
};

static struct af_test_server srv;
static struct listener listeners[3];
static char *cert_dir;

/* The request bytes of `r` in shape `sh` (upgrade shapes: the upgrading request). */
static char *build(const struct listener *l, const struct route *r, enum shape sh, size_t *len)
{
    struct af_buf b = AF_BUF_INIT(0);
    char *body = NULL;
    size_t blen = 0;
    const char *version = sh == S_HTTP10 ? "HTTP/1.0" : "HTTP/1.1";

    if (r->body_file)
        body = af_test_read(r->body_file, &blen);
    else if (!strcmp(r->method, "POST"))
        body = af_xstrdup("{}"), blen = 2;
    ck_assert_int_eq(af_buf_printf(&b, "%s %s %s\r\n", r->method, r->target, version), 0);
    if (sh != S_HTTP10)
        ck_assert_int_eq(af_buf_printf(&b, "Host: 127.0.0.1:%d\r\n", l->port), 0);
    switch (sh) {
    case S_CLOSE:
        ck_assert_int_eq(af_buf_puts(&b, "Connection: close\r\n"), 0);
        break;
    case S_PROBE:
        ck_assert_int_eq(af_buf_puts(&b, "User-Agent: kube-probe/1.26\r\nAccept: */*\r\n"
                                         "Connection: close\r\n"), 0);
        break;
    case S_UP_WS:
    case S_UP_WS_2ND:
        ck_assert_int_eq(af_buf_puts(&b, "Connection: Upgrade\r\nUpgrade: websocket\r\n"
                                         "Sec-WebSocket-Version: 13\r\n"
                                         "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"), 0);
        break;
    case S_UP_H2C:
    case S_UP_H2C_2ND:
        ck_assert_int_eq(af_buf_puts(&b, "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\n"
                                         "HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\n"), 0);
        break;
    case S_UP_OTHER:
    case S_UP_OTHER_2ND:
        ck_assert_int_eq(af_buf_puts(&b, "Connection: Upgrade\r\nUpgrade: foo\r\n"), 0);
        break;
    case S_EXPECT:
        ck_assert_int_eq(af_buf_puts(&b, "Expect: 100-continue\r\n"), 0);
        break;
    default:
        break;
    }
    if (body) {
        ck_assert_int_eq(af_buf_printf(&b, "Content-Type: application/json\r\n"
                                           "Content-Length: %zu\r\n", blen), 0);
    }
    ck_assert_int_eq(af_buf_puts(&b, "\r\n"), 0);
    if (body)
        ck_assert_int_eq(af_buf_add(&b, body, blen), 0);
    af_free(body);
    *len = b.len;
    return b.buf;
}

static bool server_alive(void)
{
    int status;
    return waitpid(srv.pid, &status, WNOHANG) == 0;
}

/* A fresh request on a new connection is answered 200: the server is up and serving. */
static void assert_serving(const struct listener *l, const char *after)
{
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    struct af_test_raw_opts o = {.tls = l->tls};
    struct af_test_raw r;

    ck_assert_msg(server_alive(), "the server died after %s (log: %s)", after, srv.log_path);
    af_test_raw_exchange_opt(l->port, req, sizeof(req) - 1, &o, 1, 10000, &r);
    ck_assert_msg(r.count == 1 && r.status[0] == 200,
                  "after %s, /healthz on %s got %d answers (first %d)", after, l->name, r.count,
                  r.count ? r.status[0] : 0);
    af_test_raw_free(&r);
}

static void exchange(const struct listener *l, const struct route *r, enum shape sh)
{
    struct af_test_raw_opts o = {.tls = l->tls};
    struct af_test_raw a;
    size_t len, len2 = 0;
    char *req = NULL, *first = NULL, *what;
    int want = 1;

    o.head = !strcmp(r->method, "HEAD");
    what = af_xasprintf("%s %s as '%s' on %s", r->method, r->target, shape_names[sh], l->name);
    switch (sh) {
    case S_HALF_CLOSE:
        o.half_close = true;
        req = build(l, r, S_KEEPALIVE, &len);
        break;
    case S_PIPELINE: {
        char *one = build(l, r, S_KEEPALIVE, &len);
        req = af_xmalloc(2 * len);
        memcpy(req, one, len);
        memcpy(req + len, one, len);
        len *= 2;
        af_free(one);
        want = 2;
        break;
    }
    case S_KEEPALIVE:
        req = build(l, r, S_KEEPALIVE, &len);
        o.then = req;
        o.then_len = len;
        want = 2;
        break;
    case S_SLOW:
        req = build(l, r, S_KEEPALIVE, &len);
        o.slow_chunk = 97;
        o.slow_gap_ms = 1;
        break;
    case S_UP_WS_2ND:
    case S_UP_H2C_2ND:
    case S_UP_OTHER_2ND:
        first = build(l, r, S_KEEPALIVE, &len);
        req = build(l, r, sh, &len2);
        o.then = req;
        o.then_len = len2;
        want = 2;
        break;
    case S_EXPECT:
        req = build(l, r, sh, &len);
        first = strstr(req, "\r\n\r\n");
        if (!strcmp(r->method, "POST")) {
            /* the head alone; the body once "100 Continue" has come */
            size_t head = (size_t)(first - req) + 4;
            o.then = req + head;
            o.then_len = len - head;
            first = af_xmalloc(head);
            memcpy(first, req, head);
            len = head;
            want = 2;
        } else {
            first = NULL;
        }
        break;
    default:
        req = build(l, r, sh, &len);
        break;
    }
    af_test_raw_exchange_opt(l->port, first ? first : req, len, &o, want, 15000, &a);
    ck_assert_msg(!a.timed_out || a.count > 0, "%s: no answer and no close", what);
    for (int i = 0; i < a.count; i++)
        ck_assert_msg(a.status[i] >= 100 && a.status[i] < 600 && a.status[i] != 500,
                      "%s: answer %d is %d", what, i + 1, a.status[i]);
    switch (sh) {
    case S_CLOSE:
    case S_HTTP10:
    case S_PROBE:
    case S_SLOW:
        /* every client that waits for its answer gets it, and the connection ends */
        ck_assert_msg(a.count == 1, "%s: %d answers", what, a.count);
        if (sh != S_SLOW)
            ck_assert_msg(a.close[0] || a.eof || a.count == 1, "%s: not closed", what);
        break;
    case S_KEEPALIVE:
        ck_assert_msg(a.count == 2, "%s: %d answers on a reused connection", what, a.count);
        break;
    case S_EXPECT:
        /* the body is asked for at once (curl would wait a second), then answered */
        ck_assert_msg(a.count == want, "%s: %d answers", what, a.count);
        if (want == 2)
            ck_assert_msg(a.status[0] == 100, "%s: first answer %d", what, a.status[0]);
        break;
    case S_UP_WS:
    case S_UP_H2C:
    case S_UP_WS_2ND:
    case S_UP_H2C_2ND:
        /* HTTP/1.1 only: never 101; the upgrade is refused with a reason */
        for (int i = 0; i < a.count; i++)
            ck_assert_msg(a.status[i] != 101, "%s: switched protocols", what);
        ck_assert_msg(a.count == want, "%s: %d answers", what, a.count);
        ck_assert_int_eq(a.status[want - 1], 400);
        if (!o.head)
            ck_assert_msg(strstr(a.body[want - 1], "HTTP/1.1") != NULL, "%s: %s", what,
                          a.body[want - 1]);
        break;
    default:
        break;
    }
    af_test_raw_free(&a);
    af_free(req);
    af_free(first);
    assert_serving(l, what);
    af_free(what);
}

static void start_server(void)
{
    int hport = af_test_free_port();
    char hlisten[64];
    char *crt, *key;

    cert_dir = af_test_temp_path("certs");
    ck_assert_int_eq(mkdir(cert_dir, 0700), 0);
    af_test_make_cert(cert_dir, "srv", "IP:127.0.0.1,DNS:localhost");
    crt = af_xasprintf("%s/srv.crt", cert_dir);
    key = af_xasprintf("%s/srv.key", cert_dir);
    snprintf(hlisten, sizeof(hlisten), "127.0.0.1:%d", hport);
    {
        const char *const args[] = {"--demo", "--tls-cert-file", crt, "--tls-private-key-file",
                                    key, "--health-listen", hlisten, NULL};
        af_test_server_start(&srv, args, true, NULL, NULL);
    }
    listeners[0] = (struct listener){"the TLS API listener", srv.port, true, false};
    listeners[1] = (struct listener){"the health listener", hport, false, true};
    af_free(crt);
    af_free(key);
}

static void stop_server(void)
{
    int rc = af_test_server_stop(&srv);
    ck_assert_msg(rc == 0, "the server exited %d on SIGTERM (log: %s)", rc, srv.log_path);
    af_free(cert_dir);
}

/* One test per shape; each runs every route on both listeners of one TLS server... */
START_TEST(test_every_client_shape_on_tls_and_health_listeners)
{
    enum shape sh = (enum shape)_i;

    start_server();
    for (int li = 0; li < 2; li++)
        for (size_t ri = 0; ri < AF_ARRAY_SIZE(routes); ri++)
            if (!listeners[li].health_only || routes[ri].health)
                exchange(&listeners[li], &routes[ri], sh);
    stop_server();
}
END_TEST

/* ... and on a plain API listener, where h2c could be honoured. */
START_TEST(test_every_client_shape_on_the_plain_listener)
{
    enum shape sh = (enum shape)_i;
    const char *const args[] = {"--demo", NULL};
    struct listener l;

    af_test_server_start(&srv, args, false, NULL, NULL);
    l = (struct listener){"the plain API listener", srv.port, false, false};
    for (size_t ri = 0; ri < AF_ARRAY_SIZE(routes); ri++)
        exchange(&l, &routes[ri], sh);
    ck_assert_int_eq(af_test_server_stop(&srv), 0);
}
END_TEST

/* curl and Python's urllib, as a person would try them (both close or speak HTTP/1.0). */
START_TEST(test_real_clients_leave_the_server_up)
{
    const char *const args[] = {"--demo", NULL};
    struct listener l;
    char *cmd;
    static const char *const clients[] = {
        "curl -sS -o /dev/null -H 'Connection: close' http://127.0.0.1:%d/healthz",
        "curl -sS -o /dev/null -0 http://127.0.0.1:%d/metrics",
        "curl -sS -o /dev/null --http2 http://127.0.0.1:%d/readyz",
        "curl -sS -o /dev/null -H 'Connection: close' -XPOST --data-binary "
        "@" AF_SOURCE_DIR "/tests/fixtures/kube-scheduler/filter-nodecache-true.json "
        "http://127.0.0.1:%d/filter",
        "python3 -c 'import urllib.request as u; u.urlopen(\"http://127.0.0.1:%d/healthz\").read()'",
    };

    af_test_server_start(&srv, args, false, NULL, NULL);
    l = (struct listener){"the plain API listener", srv.port, false, false};
    for (size_t i = 0; i < AF_ARRAY_SIZE(clients); i++) {
        cmd = af_xasprintf(clients[i], srv.port);
        (void)!system(cmd);   /* h2c is refused with 400; what matters is what follows */
        assert_serving(&l, cmd);
        af_free(cmd);
    }
    ck_assert_int_eq(af_test_server_stop(&srv), 0);
}
END_TEST

static Suite *af_clients_suite(void)
{
    Suite *s = suite_create("clients");
    TCase *tc = tcase_create("shapes");

    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, test_every_client_shape_on_tls_and_health_listeners, 0, S_COUNT);
    tcase_add_loop_test(tc, test_every_client_shape_on_the_plain_listener, 0, S_COUNT);
    tcase_add_test(tc, test_real_clients_leave_the_server_up);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_clients_suite());
}
