/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP front end on libwebsockets. One lws service thread (the caller of
 * af_http_run) runs every connection: it reads a request body into a buffer
 * capped at --max-body, hands it to the transport-free service, and answers.
 *
 * Latency matters more than anything here (design.md, Targets): a real
 * kube-scheduler waits on every call, and a response split over two TCP
 * writes can stall ~40 ms on a delayed ACK. So on HTTP/1.1 the status line,
 * headers and body go out in one lws_write, and accepted sockets get
 * TCP_NODELAY too. Connections stay alive longer than Go's 90 s idle timeout,
 * so the server never closes a connection the scheduler is about to reuse.
 * Over TLS, ALPN selects http/1.1 (kube-scheduler's Go client offers h2 and
 * http/1.1; see af_http_run for why not h2). The h2 code paths (answers from
 * the writeable callback, headers then body in frames within the peer's
 * window) are kept for an lws whose h2 request bodies are reliable.
 *
 * Untrusted input is bounded: a Content-Length over --max-body is answered
 * 413 at once (and the connection closed, since the body is not read), a
 * body that grows past it likewise, and a client that sends headers and then
 * trickles the body is dropped after --read-timeout seconds. A chunked
 * request body is answered 411 at once (and the connection closed).
 *
 * HTTP/1.1 pipelining. libwebsockets 4.1.6 keeps the bytes that follow a
 * request in the same read on a per-connection buffer list and parses the
 * next request from there once the transaction completes. For a request with
 * a body parsed that way, lws_http_action() (after LWS_CALLBACK_HTTP) feeds
 * that whole buffered segment, the request's own headers included, to the
 * body parser, and loops "while the buffer list is not empty" on a parser
 * that, once the transaction has completed (LRS_DEFERRING_ACTION), consumes
 * nothing: one bad answer, then a busy loop inside lws_service() that wedges
 * every connection. Nothing in the callback can stop that loop short of
 * closing, so the server never lets a request be parsed from that buffer:
 * h1 answers go out from LWS_CALLBACK_HTTP_WRITEABLE (one poll later), and
 * if lws hands the connection more input before then (pipelined bytes show
 * up as a repeated HTTP_BODY_COMPLETION, or, for a request without a body,
 * as input buffered in lws), the answer carries "Connection: close" and the
 * connection is closed after it. The client retries the rest on a new
 * connection; clients that wait for each answer keep their connection. (The
 * price: a client that half-closes right after a request with a body may get
 * no answer, as lws closes on that end of input before the socket is polled
 * writeable.)
 */
#include "accelfit/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include <libwebsockets.h>

#define HDR_ROOM 512                      /* response headers are built in this much */
#define RESERVE (LWS_PRE + HDR_ROOM)      /* kept free in front of every response body */
#define H2_CHUNK 16384                    /* default SETTINGS_MAX_FRAME_SIZE */
#define TIMEOUT_BODY (PENDING_TIMEOUT_USER_REASON_BASE + 1)
#define KEEPALIVE_IDLE_S 120              /* > Go's IdleConnTimeout (90 s) */

enum route {
    R_NONE = 0,
    R_FILTER,
    R_PRIORITIZE,
    R_EXPLAIN,
    R_PREEMPT,
    R_HEALTHZ,
    R_READYZ,
    R_METRICS,
};

enum method { M_GET = 0, M_POST, M_OTHER };

struct server {
    const struct af_http_options *opt;
    struct af_service *svc;
    struct lws_context *ctx;
    char prefix[256];
    size_t prefix_len;
    size_t max_body;
    size_t max_response;
    uint64_t read_timeout_ns;
    volatile sig_atomic_t *stop;
    lws_sorted_usec_list_t sul;
};

/* Per HTTP transaction (per stream on h2). lws zeroes it when the wsi binds. */
struct pss {
    bool active;            /* a request is in progress */
    bool expect_body;
    bool discard;           /* read the body but do not keep it (answer already decided) */
    bool responded;
    bool close_after;
    bool pipelined;         /* h1: more input arrived before this answer went out */
    bool zero_post;         /* h1 POST with "Content-Length: 0": lws reports its empty body */
    bool h2;
    enum route route;
    enum method method;
    int pending_status;     /* answer to send once the body is read (404, 405) */
    uint64_t t0;
    uint64_t deadline;
    size_t discarded;
    struct af_buf body;
    /* the response: RESERVE bytes, then the body */
    struct af_buf resp;
    int status;
    const char *ctype;
    const char *allow;
    bool hdr_sent;
    size_t sent;
    /* for the log line */
    struct af_request_stats st;
    /* h2 requests without a body length: answer when the stream ends or soon after */
    lws_sorted_usec_list_t sul;
    struct lws *wsi;
    struct lws_context *ctx;
    bool sul_armed;
};

static const char zeros[RESERVE];

static const char *route_verb_name(enum route r)
{
    switch (r) {
    case R_FILTER:
        return "filter";
    case R_PRIORITIZE:
        return "prioritize";
    case R_EXPLAIN:
        return "explain";
    case R_PREEMPT:
        return "preempt";
    case R_HEALTHZ:
        return "healthz";
    case R_READYZ:
        return "readyz";
    case R_METRICS:
        return "metrics";
    case R_NONE:
        break;
    }
    return "other";
}

static int route_verb(enum route r)
{
    switch (r) {
    case R_FILTER:
        return AF_VERB_FILTER;
    case R_PRIORITIZE:
        return AF_VERB_PRIORITIZE;
    case R_EXPLAIN:
        return AF_VERB_EXPLAIN;
    case R_PREEMPT:
        return AF_VERB_PREEMPT;
    default:
        return -1;
    }
}

static void pss_release(struct pss *p)
{
    af_buf_release(&p->body);
    af_buf_release(&p->resp);
}

static void pss_reset(struct pss *p)
{
    if (p->sul_armed)
        lws_sul_schedule(p->ctx, 0, &p->sul, NULL, LWS_SET_TIMER_USEC_CANCEL);
    pss_release(p);
    memset(p, 0, sizeof(*p));
}

/* ---- logging bridge ---------------------------------------------------------------------------- */

static void lws_emit(int level, const char *line)
{
    char msg[512];
    size_t n;

    snprintf(msg, sizeof(msg), "%s", line);
    n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    AF_LOG(level == LLL_ERR ? AF_LOG_ERROR : AF_LOG_WARN, "libwebsockets", "msg", msg, NULL);
}

/* ---- responses ------------------------------------------------------------------------------------ */

/* Starts the response buffer: RESERVE bytes for headers, then the body is appended. */
static void resp_begin(struct server *s, struct pss *p)
{
    af_buf_release(&p->resp);
    af_buf_init(&p->resp, s->max_response + RESERVE);
    if (af_buf_add(&p->resp, zeros, RESERVE) != 0)
        af_assert(!"response reserve");
}

static void resp_text(struct server *s, struct pss *p, const char *text)
{
    resp_begin(s, p);
    if (af_buf_puts(&p->resp, text) != 0)
        AF_LOG(AF_LOG_ERROR, "cannot build response", NULL);
}

static void log_request(struct server *s, struct pss *p)
{
    uint64_t ns = af_now_ns() - p->t0;
    char status[16], dur[32], cand[16], passed[16];
    int verb = route_verb(p->route);
    int lvl = p->status >= 500 ? AF_LOG_ERROR : p->status >= 400 ? AF_LOG_INFO : AF_LOG_DEBUG;

    /* Probes and scrapes are routine whatever they answer (503 from /readyz). */
    if (p->route == R_HEALTHZ || p->route == R_READYZ || p->route == R_METRICS)
        lvl = AF_LOG_DEBUG;

    if (verb >= 0 && s->svc->metrics)
        af_metrics_observe_request(s->svc->metrics, (enum af_verb)verb, p->status, ns);
    if (lvl < af_log_level)
        return;
    snprintf(status, sizeof(status), "%d", p->status);
    snprintf(dur, sizeof(dur), "%.3fms", (double)ns / 1e6);
    snprintf(cand, sizeof(cand), "%d", p->st.candidates);
    snprintf(passed, sizeof(passed), "%d", p->st.passed);
    AF_LOG(lvl, "request", "verb", route_verb_name(p->route), "status", status, "duration", dur,
           "candidates", cand, "passed", passed, "proto", p->h2 ? "h2" : "http/1.1",
           "not_ready", p->st.not_ready ? "true" : "false", NULL);
}

static int add_headers(struct lws *wsi, struct pss *p, size_t blen, unsigned char **pp,
                       unsigned char *end)
{
    char num[32];

    if (lws_add_http_header_status(wsi, (unsigned int)p->status, pp, end))
        return -1;
    if (lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_TYPE,
                                     (const unsigned char *)p->ctype, (int)strlen(p->ctype), pp,
                                     end))
        return -1;
    if (p->h2) {
        if (lws_add_http_header_content_length(wsi, blen, pp, end))
            return -1;
    } else {
        /* Written by hand so lws does no length accounting of its own on h1. */
        int n = snprintf(num, sizeof(num), "%zu", blen);
        if (lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_CONTENT_LENGTH,
                                         (const unsigned char *)num, n, pp, end))
            return -1;
        if (p->close_after &&
            lws_add_http_header_by_token(wsi, WSI_TOKEN_CONNECTION,
                                         (const unsigned char *)"close", 5, pp, end))
            return -1;
    }
    if (p->allow && lws_add_http_header_by_token(wsi, WSI_TOKEN_HTTP_ALLOW,
                                                 (const unsigned char *)p->allow,
                                                 (int)strlen(p->allow), pp, end))
        return -1;
    return 0;
}

/* h1: status line, headers and body in one write. Returns what the callback returns. */
static int send_h1(struct server *s, struct lws *wsi, struct pss *p)
{
    unsigned char hdr[HDR_ROOM], *hp = hdr;
    unsigned char *body = (unsigned char *)p->resp.buf + RESERVE;
    size_t blen = p->resp.len - RESERVE, hlen;
    bool close_after;

    /*
     * A request without a body gets no HTTP_BODY_COMPLETION to reveal what
     * follows it; lws says whether it holds input not yet parsed (for any
     * connection: a false alarm costs one reconnect).
     */
    if (!p->expect_body && !p->pipelined &&
        lws_service_adjust_timeout(lws_get_context(wsi), 1, 0) == 0)
        p->pipelined = true;
    if (p->pipelined && !p->close_after) {
        AF_LOG(AF_LOG_DEBUG, "pipelined request: answering with Connection: close", "verb",
               route_verb_name(p->route), NULL);
        p->close_after = true;
    }
    close_after = p->close_after;

    if (add_headers(wsi, p, blen, &hp, hdr + sizeof(hdr) - 1) ||
        lws_finalize_http_header(wsi, &hp, hdr + sizeof(hdr) - 1)) {
        AF_LOG(AF_LOG_ERROR, "cannot build response headers", NULL);
        return -1;
    }
    hlen = (size_t)(hp - hdr);
    memcpy(body - hlen, hdr, hlen);
    log_request(s, p);
    if (lws_write(wsi, body - hlen, hlen + blen, LWS_WRITE_HTTP) < 0)
        return -1;
    pss_reset(p);
    if (close_after)
        return -1;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* h2: headers first, then DATA frames as the peer's window allows. */
static int send_h2(struct server *s, struct lws *wsi, struct pss *p)
{
    size_t blen = p->resp.len - RESERVE;

    if (!p->hdr_sent) {
        unsigned char hb[LWS_PRE + HDR_ROOM], *start = hb + LWS_PRE, *hp = start;
        unsigned char *end = hb + sizeof(hb) - 1;

        if (add_headers(wsi, p, blen, &hp, end) || lws_finalize_write_http_header(wsi, start, &hp, end))
            return -1;
        p->hdr_sent = true;
        log_request(s, p);
        if (blen) {
            lws_callback_on_writable(wsi);
            return 0;
        }
    }
    if (p->sent < blen) {
        size_t chunk = blen - p->sent;
        lws_fileofs_t allow = lws_get_peer_write_allowance(wsi);
        unsigned char *at = (unsigned char *)p->resp.buf + RESERVE + p->sent;
        bool last;

        if (chunk > H2_CHUNK)
            chunk = H2_CHUNK;
        if (allow == 0) {
            lws_callback_on_writable(wsi);
            return 0;
        }
        if (allow > 0 && (size_t)allow < chunk)
            chunk = (size_t)allow;
        last = p->sent + chunk == blen;
        if (lws_write(wsi, at, chunk, last ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) < 0)
            return -1;
        p->sent += chunk;
        if (!last) {
            lws_callback_on_writable(wsi);
            return 0;
        }
    }
    pss_reset(p);
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* The response in p->resp is complete: send it (h1 now, h2 when writeable). */
static int respond(struct server *s, struct lws *wsi, struct pss *p, int status, const char *ctype)
{
    p->status = status;
    p->ctype = ctype;
    p->responded = true;
    af_buf_release(&p->body);
    /* An answer that closes the connection anyway can go now (see the top). */
    if (!p->h2 && p->close_after)
        return send_h1(s, wsi, p);
    lws_callback_on_writable(wsi);
    return 0;
}

static int respond_error(struct server *s, struct lws *wsi, struct pss *p, int status,
                         const char *msg)
{
    char text[512];

    snprintf(text, sizeof(text), "{\"error\":\"%s\"}\n", msg);
    resp_text(s, p, text);
    return respond(s, wsi, p, status, "application/json");
}

/* ---- dispatch ------------------------------------------------------------------------------------- */

static int answer_get(struct server *s, struct lws *wsi, struct pss *p)
{
    struct af_service *svc = s->svc;

    switch (p->route) {
    case R_HEALTHZ:
        resp_text(s, p, "ok\n");
        return respond(s, wsi, p, 200, "text/plain; charset=utf-8");
    case R_READYZ: {
        const char *why = NULL;
        char text[300];
        bool ok = af_service_ready(svc, &why);
        snprintf(text, sizeof(text), ok ? "ok\n" : "not ready: %s\n", why ? why : "");
        resp_text(s, p, text);
        return respond(s, wsi, p, ok ? 200 : 503, "text/plain; charset=utf-8");
    }
    case R_METRICS:
        resp_begin(s, p);
        if (af_metrics_render(svc->metrics, svc, &p->resp) != 0)
            return respond_error(s, wsi, p, 500, "metrics too large");
        return respond(s, wsi, p, 200, "text/plain; version=0.0.4; charset=utf-8");
    case R_EXPLAIN: {
        char arg[600];
        const char *v = lws_get_urlarg_by_name(wsi, "pod=", arg, (int)sizeof(arg));
        const char *slash = v ? strchr(v, '/') : NULL;
        char ns[300];
        int status;

        if (!v || !slash || slash == v || !slash[1] || (size_t)(slash - v) >= sizeof(ns))
            return respond_error(s, wsi, p, 400, "expected ?pod=NAMESPACE/NAME");
        memcpy(ns, v, (size_t)(slash - v));
        ns[slash - v] = '\0';
        resp_begin(s, p);
        status = af_service_explain_pod(svc, ns, slash + 1, &p->resp);
        return respond(s, wsi, p, status, "application/json");
    }
    default:
        break;
    }
    return respond_error(s, wsi, p, 404, "not found");
}

static int answer_post(struct server *s, struct lws *wsi, struct pss *p)
{
    int verb = route_verb(p->route), status;

    resp_begin(s, p);
    status = af_service_handle_stats(s->svc, (enum af_verb)verb, p->body.buf ? p->body.buf : "",
                                     p->body.len, &p->resp, &p->st);
    return respond(s, wsi, p, status, "application/json");
}

/* Everything is known (headers, and the body if any): answer. */
static int dispatch(struct server *s, struct lws *wsi, struct pss *p)
{
    if (p->pending_status == 404)
        return respond_error(s, wsi, p, 404, "not found");
    if (p->pending_status == 405)
        return respond_error(s, wsi, p, 405, "method not allowed");
    if (p->method == M_POST)
        return answer_post(s, wsi, p);
    return answer_get(s, wsi, p);
}

static int too_big(struct server *s, struct lws *wsi, struct pss *p)
{
    char msg[128];

    snprintf(msg, sizeof(msg), "request body exceeds %zu bytes", s->max_body);
    p->discard = true;
    p->close_after = true;   /* the rest of the body is never read */
    return respond_error(s, wsi, p, 413, msg);
}

/* ---- request start ---------------------------------------------------------------------------------- */

static enum method get_method(struct lws *wsi)
{
    char *uri = NULL;
    int ulen = 0;
    int m = lws_http_get_uri_and_method(wsi, &uri, &ulen);

    if (m == LWSHUMETH_GET)
        return M_GET;
    if (m == LWSHUMETH_POST)
        return M_POST;
    if (m == LWSHUMETH_COLON_PATH) {
        char mb[16];
        if (lws_hdr_copy(wsi, mb, (int)sizeof(mb), WSI_TOKEN_HTTP_COLON_METHOD) > 0) {
            if (!strcmp(mb, "GET"))
                return M_GET;
            if (!strcmp(mb, "POST"))
                return M_POST;
        }
    }
    return M_OTHER;
}

static enum route match_route(struct server *s, const char *path)
{
    static const struct {
        const char *path;
        enum route r;
    } table[] = {
        {"/filter", R_FILTER},   {"/prioritize", R_PRIORITIZE}, {"/explain", R_EXPLAIN},
        {"/preempt", R_PREEMPT}, {"/healthz", R_HEALTHZ},       {"/readyz", R_READYZ},
        {"/metrics", R_METRICS},
    };

    if (s->prefix_len && !strncmp(path, s->prefix, s->prefix_len) && path[s->prefix_len] == '/')
        path += s->prefix_len;
    for (size_t i = 0; i < AF_ARRAY_SIZE(table); i++)
        if (!strcmp(path, table[i].path))
            return table[i].r;
    return R_NONE;
}

#define H2_EMPTY_BODY_WAIT_US (20 * LWS_US_PER_MS)

static int dispatch(struct server *s, struct lws *wsi, struct pss *p);

/* An h2 request without a length whose stream has not ended yet: assume no body. */
static void empty_body_due(lws_sorted_usec_list_t *sul)
{
    struct pss *p = lws_container_of(sul, struct pss, sul);
    struct server *s = lws_context_user(p->ctx);

    p->sul_armed = false;
    if (!p->active || p->responded || p->body.len || p->discarded)
        return;
    if (dispatch(s, p->wsi, p) < 0)
        lws_set_timeout(p->wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
}

static int begin_request(struct server *s, struct lws *wsi, struct pss *p, const char *path)
{
    char clbuf[32];
    int64_t cl = -1;
    bool needs_post = false, allows_get = false, allows_post = false;

    pss_reset(p);
    p->active = true;
    p->t0 = af_now_ns();
    p->h2 = lws_get_network_wsi(wsi) != wsi;
    p->method = get_method(wsi);
    p->route = match_route(s, path ? path : "");
    p->st.candidates = -1;
    p->st.passed = -1;

    if (lws_hdr_copy(wsi, clbuf, (int)sizeof(clbuf), WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0 &&
        af_parse_int64(clbuf, 0, INT64_MAX, &cl) != 0) {
        p->close_after = true;
        return respond_error(s, wsi, p, 400, "bad Content-Length");
    }
    if (!p->h2 && lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0) {
        /* lws 4.1.6 cannot read a chunked body: refuse it now, before it is parsed as headers. */
        p->close_after = true;
        return respond_error(s, wsi, p, 411,
                             "chunked request bodies are not supported; send Content-Length");
    }
    /* lws 4.1.6 follows LWS_CALLBACK_HTTP of such a POST with an empty body and its completion. */
    p->zero_post = !p->h2 && cl == 0 && p->method == M_POST;
    switch (p->route) {
    case R_FILTER:
    case R_PRIORITIZE:
    case R_PREEMPT:
        needs_post = true;
        allows_post = true;
        p->allow = "POST";
        break;
    case R_EXPLAIN:
        allows_get = allows_post = true;
        p->allow = "GET, POST";
        break;
    case R_HEALTHZ:
    case R_READYZ:
    case R_METRICS:
        allows_get = true;
        p->allow = "GET";
        break;
    case R_NONE:
        p->pending_status = 404;
        break;
    }
    if (p->route != R_NONE && !((p->method == M_GET && allows_get) ||
                                (p->method == M_POST && allows_post)))
        p->pending_status = 405;
    if (p->pending_status != 405)
        p->allow = NULL;
    (void)needs_post;

    if (cl > 0 && (uint64_t)cl > s->max_body)
        return too_big(s, wsi, p);

    p->expect_body = cl > 0;
    if (p->h2 && cl <= 0 && p->method != M_GET) {
        /*
         * An h2 request without a positive length may end its stream with
         * the headers or with an empty DATA frame right after them, and lws
         * does not say which. Answering before that frame arrives closes the
         * stream under it (lws then ends the whole connection), and waiting
         * for a body that never comes would hang. So wait for the end of the
         * stream, or a moment, whichever comes first.
         */
        p->expect_body = true;
        p->wsi = wsi;
        p->ctx = lws_get_context(wsi);
        p->sul_armed = true;
        lws_sul_schedule(p->ctx, 0, &p->sul, empty_body_due, H2_EMPTY_BODY_WAIT_US);
    }
    if (!p->expect_body)
        return dispatch(s, wsi, p);

    if (p->pending_status || p->method != M_POST)
        p->discard = true;
    else
        af_buf_init(&p->body, s->max_body);
    p->deadline = p->t0 + s->read_timeout_ns;
    lws_set_timeout(wsi, TIMEOUT_BODY, (int)(s->read_timeout_ns / 1000000000ull));
    return 0;
}

static int on_body(struct server *s, struct lws *wsi, struct pss *p, const void *in, size_t len)
{
    uint64_t now = af_now_ns();

    if (!p->active || p->responded)
        return 0;   /* after a 413 on h2: drop the rest */
    if (now >= p->deadline) {
        AF_LOG(AF_LOG_WARN, "dropping slow client", "verb", route_verb_name(p->route), NULL);
        return -1;
    }
    /* lws may re-arm its own timeouts on data; ours counts from the headers. */
    lws_set_timeout(wsi, TIMEOUT_BODY, (int)((p->deadline - now + 999999999ull) / 1000000000ull));
    if (p->discard) {
        p->discarded += len;
        if (p->discarded > s->max_body)
            return too_big(s, wsi, p);
        return 0;
    }
    if (af_buf_add(&p->body, in, len) != 0)
        return too_big(s, wsi, p);
    return 0;
}

/*
 * lws offers input for after the answer still to be sent (see the top): the
 * answer closes the connection. lws re-offers that input on every service
 * pass until then, so a client that also stops reading (the answer cannot be
 * written) is dropped after --read-timeout rather than kept busy for ever.
 */
static void pipelined_input(struct server *s, struct lws *wsi, struct pss *p)
{
    if (!p->pipelined)
        lws_set_timeout(wsi, TIMEOUT_BODY, (int)(s->read_timeout_ns / 1000000000ull));
    p->pipelined = true;
}

/* ---- the lws callback ---------------------------------------------------------------------------------- */

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    struct lws_context *ctx = lws_get_context(wsi);
    struct server *s = ctx ? lws_context_user(ctx) : NULL;
    struct pss *p = user;

    switch (reason) {
    case LWS_CALLBACK_FILTER_NETWORK_CONNECTION: {
        int fd = (int)(lws_intptr_t)in, one = 1;
        if (fd >= 0 && setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
            AF_LOG(AF_LOG_DEBUG, "cannot set TCP_NODELAY", "error", strerror(errno), NULL);
        return 0;
    }
    case LWS_CALLBACK_HTTP:
        if (!s || !p)
            return -1;
        return begin_request(s, wsi, p, in);
    case LWS_CALLBACK_HTTP_BODY:
        if (!s || !p)
            return -1;
        if (len && p->active && p->responded && !p->h2 && !p->close_after)
            pipelined_input(s, wsi, p);
        return on_body(s, wsi, p, in, len);
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        if (!s || !p)
            return -1;
        if (p->active && p->responded && !p->h2 && !p->zero_post) {
            /*
             * The body was complete already: lws offers more input, which
             * can only be a pipelined request (see the top). Not so the one
             * completion lws reports itself after a "Content-Length: 0" POST.
             */
            pipelined_input(s, wsi, p);
            return 0;
        }
        p->zero_post = false;
        lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
        if (!p->active || p->responded)
            return 0;
        /* lws reports an empty h2 body complete before a trailing empty DATA frame. */
        if (p->sul_armed && !p->body.len && !p->discarded)
            return 0;
        return dispatch(s, wsi, p);
    case LWS_CALLBACK_HTTP_WRITEABLE:
        if (!s || !p || !p->active || !p->responded)
            return 0;
        return p->h2 ? send_h2(s, wsi, p) : send_h1(s, wsi, p);
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
        if (p)
            pss_reset(p);
        return 0;
    default:
        break;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}

static const struct lws_protocols protocols[] = {
    {"http", callback, sizeof(struct pss), 65536, 0, NULL, 1u << 20},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ---- running ----------------------------------------------------------------------------------------- */

static void check_stop(lws_sorted_usec_list_t *sul)
{
    struct server *s = lws_container_of(sul, struct server, sul);

    if (*s->stop)
        lws_cancel_service(s->ctx);
    else
        lws_sul_schedule(s->ctx, 0, &s->sul, check_stop, 100 * LWS_US_PER_MS);
}

int af_http_parse_listen(const char *listen, char *host, size_t hostlen, int *port, bool *v6)
{
    const char *colon;
    int64_t p;

    *v6 = false;
    host[0] = '\0';
    if (!listen || !*listen)
        return AF_EINVAL;
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (!close || close[1] != ':' || (size_t)(close - listen - 1) >= hostlen)
            return AF_EINVAL;
        memcpy(host, listen + 1, (size_t)(close - listen - 1));
        host[close - listen - 1] = '\0';
        colon = close + 1;
        *v6 = true;
    } else {
        colon = strrchr(listen, ':');
        if (!colon || (size_t)(colon - listen) >= hostlen)
            return AF_EINVAL;
        memcpy(host, listen, (size_t)(colon - listen));
        host[colon - listen] = '\0';
    }
    if (af_parse_int64(colon + 1, 1, 65535, &p) != 0)
        return AF_EINVAL;
    *port = (int)p;
    if (!strcmp(host, "localhost"))
        snprintf(host, hostlen, "127.0.0.1");
    if (host[0]) {
        unsigned char tmp[sizeof(struct in6_addr)];
        if (*v6 ? inet_pton(AF_INET6, host, tmp) != 1 : inet_pton(AF_INET, host, tmp) != 1)
            return AF_EINVAL;
    }
    return 0;
}

int af_http_run(const struct af_http_options *opt, struct af_service *svc,
                volatile sig_atomic_t *stop)
{
    struct lws_context_creation_info info;
    struct server s;
    char host[128];
    int port = 0, rc = 0;
    bool v6 = false;

    memset(&s, 0, sizeof(s));
    s.opt = opt;
    s.svc = svc;
    s.stop = stop;
    s.max_body = opt->max_body ? opt->max_body : (16u << 20);
    s.max_response = 2 * s.max_body + (16u << 20);
    s.read_timeout_ns = (uint64_t)(opt->read_timeout_s > 0 ? opt->read_timeout_s : 10) * 1000000000ull;
    if (opt->url_prefix && *opt->url_prefix) {
        const char *pre = opt->url_prefix;
        size_t n;
        if (pre[0] != '/') {
            AF_LOG(AF_LOG_ERROR, "url prefix must start with '/'", "prefix", pre, NULL);
            return AF_EINVAL;
        }
        n = strlen(pre);
        while (n > 1 && pre[n - 1] == '/')
            n--;
        if (n >= sizeof(s.prefix))
            return AF_EINVAL;
        if (!(n == 1 && pre[0] == '/')) {
            memcpy(s.prefix, pre, n);
            s.prefix[n] = '\0';
            s.prefix_len = n;
        }
    }
    if (af_http_parse_listen(opt->listen, host, sizeof(host), &port, &v6) != 0) {
        AF_LOG(AF_LOG_ERROR, "bad listen address", "listen", opt->listen ? opt->listen : "",
               NULL);
        return AF_EINVAL;
    }

    lws_set_log_level(LLL_ERR | LLL_WARN, lws_emit);
    memset(&info, 0, sizeof(info));
    info.port = port;
    info.iface = host[0] ? host : NULL;
    info.protocols = protocols;
    info.user = &s;
    info.vhost_name = "accelfit";
    info.options = LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND;
    if (host[0] && !v6)
        info.options |= LWS_SERVER_OPTION_DISABLE_IPV6;
    info.keepalive_timeout = KEEPALIVE_IDLE_S;
    info.timeout_secs = (unsigned int)(s.read_timeout_ns / 1000000000ull);
    info.timeout_secs_ah_idle = info.timeout_secs;
    info.max_http_header_data = 8192;
    info.pt_serv_buf_size = 65536;
    info.count_threads = 1;
    if (opt->tls_cert_file || opt->tls_key_file) {
        if (!opt->tls_cert_file || !opt->tls_key_file) {
            AF_LOG(AF_LOG_ERROR, "TLS needs both a certificate and a private key", NULL);
            return AF_EINVAL;
        }
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
        info.ssl_cert_filepath = opt->tls_cert_file;
        info.ssl_private_key_filepath = opt->tls_key_file;
        info.ssl_options_set = SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1;
        /*
         * ALPN offers http/1.1 only. libwebsockets 4.1.6 can stall an h2
         * stream whose request body spans many TLS records (a Nodes-mode
         * filter of a few hundred KiB never completes), so kube-scheduler's
         * Go client, which offers h2 and http/1.1, is steered to HTTP/1.1
         * keep-alive. The h2 paths below stay for a fixed lws.
         */
        info.alpn = "http/1.1";
        if (opt->client_ca_file) {
            info.ssl_ca_filepath = opt->client_ca_file;
            info.options |= LWS_SERVER_OPTION_REQUIRE_VALID_OPENSSL_CLIENT_CERT;
        }
    } else if (opt->client_ca_file) {
        AF_LOG(AF_LOG_ERROR, "--client-ca-file needs TLS (--tls-cert-file, --tls-private-key-file)",
               NULL);
        return AF_EINVAL;
    }

    s.ctx = lws_create_context(&info);
    if (!s.ctx) {
        AF_LOG(AF_LOG_ERROR, "cannot listen", "listen", opt->listen, NULL);
        return AF_ECONN;
    }
    AF_LOG(AF_LOG_INFO, "listening", "listen", opt->listen, "tls",
           opt->tls_cert_file ? (opt->client_ca_file ? "mutual" : "on") : "off", "url_prefix",
           s.prefix_len ? s.prefix : "", NULL);
    lws_sul_schedule(s.ctx, 0, &s.sul, check_stop, 100 * LWS_US_PER_MS);
    while (!*stop) {
        if (lws_service(s.ctx, 0) < 0) {
            rc = AF_EIO;
            break;
        }
    }
    lws_sul_schedule(s.ctx, 0, &s.sul, check_stop, LWS_SET_TIMER_USEC_CANCEL);
    lws_context_destroy(s.ctx);
    AF_LOG(AF_LOG_INFO, "stopped serving", NULL);
    return rc;
}
