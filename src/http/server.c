/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP front end on libwebsockets. One lws service thread (the caller of
 * af_http_run) runs every connection: it reads a request body into a buffer
 * capped at --max-body, hands it to the transport-free service, and answers.
 *
 * Latency matters more than anything here (BENCHMARKS.md): a real
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
 * an h1 answer goes out after the service pass that read the request, at the
 * start of the next one (a zero-delay timer, which lws runs before it polls)
 * when lws then holds no buffered input, else from LWS_CALLBACK_HTTP_WRITEABLE
 * one poll later; and if lws hands the connection more input before then
 * (pipelined bytes show up as a repeated HTTP_BODY_COMPLETION, or, for a
 * request without a body, as input buffered in lws), the answer carries
 * "Connection: close" and the connection is closed after it. The client
 * retries the rest on a new connection; clients that wait for each answer
 * keep their connection. (The price: a client that half-closes right after a
 * request with a body may get no answer, as lws closes on that end of input
 * before the answer is written.)
 *
 * Requests lws refuses before this code runs. lws parses the request line
 * and headers itself, and answers what it cannot parse with its own 403 HTML
 * page or by closing the connection. Where it offers a way out, this file
 * takes it: an unknown method or a line that is not HTTP at all makes lws hand
 * the raw bytes to the "accelfit-raw" protocol (the vhost's listen-accept
 * fallback), which answers 400 JSON; the URL and each header value are capped
 * with token limits, so lws truncates them instead of failing and
 * begin_request answers 414 or 431. What is left (a bad %-escape, a header
 * block larger than HEAD_AREA) is in docs/http-api.md, Known limitations.
 *
 * Two listeners share the one service thread: the API (--listen, TLS when
 * configured) and, with --health-listen, a plain-HTTP vhost serving only
 * /healthz, /readyz and /metrics, so kubelet probes and Prometheus need no
 * client certificate. The TLS files are checked every TLS_CHECK_US from the
 * event loop; a changed, complete and valid set becomes a new SSL_CTX that
 * new connections switch to in their ClientHello (open connections keep
 * theirs); a set that cannot be used is logged once and the old one stays.
 */
#include "accelfit/http.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libwebsockets.h>

#include "accelfit/budget.h"

#define HDR_ROOM 512                      /* response headers are built in this much */
#define RESERVE (LWS_PRE + HDR_ROOM)      /* kept free in front of every response body */
#define H2_CHUNK 16384                    /* default SETTINGS_MAX_FRAME_SIZE */
#define TIMEOUT_BODY (PENDING_TIMEOUT_USER_REASON_BASE + 1)
#define KEEPALIVE_IDLE_S 120              /* > Go's IdleConnTimeout (90 s) */
/*
 * lws keeps a request's URL and header lines in one area of this size per
 * connection while it parses them; a request that overflows it is closed by
 * lws without an answer (docs/http-api.md). The URL and each header value
 * are capped below it (token limits), so one oversized field gets 414 or 431.
 */
#define HEAD_AREA (32u * 1024u)
#define TLS_CHECK_US (2 * LWS_US_PER_SEC)  /* how often the TLS files are looked at */
#define RAW_PROTOCOL "accelfit-raw"
#define TLS_FILE_MAX (1u << 20)

enum route {
    R_NONE = 0,
    R_FILTER,
    R_PRIORITIZE,
    R_EXPLAIN,
    R_PREEMPT,
    R_RECOMMEND,
    R_ROLLOUTS,
    R_ROLLOUT_ACK,
    R_MUTATE,
    R_COSTS,
    R_HEALTHZ,
    R_READYZ,
    R_METRICS,
};

enum method { M_GET = 0, M_HEAD, M_POST, M_OTHER };

/* What stat(2) said about one TLS file: a change in any field is a change of the file. */
struct file_sig {
    int err;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

/* The three TLS files (cert, key, client CA) as last looked at. */
struct tls_sig {
    struct file_sig f[3];
};

struct server {
    const struct af_http_options *opt;
    struct af_service *svc;
    struct lws_context *ctx;
    struct lws_vhost *api_vh;
    struct lws_vhost *health_vh;   /* NULL without --health-listen */
    char prefix[256];
    size_t prefix_len;
    size_t max_body;
    size_t max_response;
    uint64_t read_timeout_ns;
    volatile sig_atomic_t *stop;
    lws_sorted_usec_list_t sul;
    struct lws_token_limits limits;
    /* TLS reload (service thread only) */
    SSL_CTX *lws_ssl_ctx;          /* the API vhost's, made by lws; borrowed */
    SSL_CTX *tls_ctx;              /* the last reloaded files, or NULL: lws's is current */
    struct tls_sig tls_loaded;     /* the files the current certificate came from */
    struct tls_sig tls_seen;       /* at the previous check */
    lws_sorted_usec_list_t tls_sul;
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
    bool health;            /* on the --health-listen vhost */
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
    case R_RECOMMEND:
        return "recommend";
    case R_ROLLOUTS:
    case R_ROLLOUT_ACK:
        return "rollouts";
    case R_MUTATE:
        return "mutate";
    case R_COSTS:
        return "costs";
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
    case R_MUTATE:
        return AF_VERB_MUTATE;
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

/*
 * libwebsockets' own lines (bind errors, TLS loading, parser complaints about
 * a client) go to accelfit's log at debug level: what matters to an operator
 * is said once, by accelfit, in its own words.
 */
static void lws_emit(int level, const char *line)
{
    char msg[512];
    size_t n;

    (void)level;
    snprintf(msg, sizeof(msg), "%s", line);
    n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    AF_LOG(AF_LOG_DEBUG, "libwebsockets", "message", msg, NULL);
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

    if (!p->h2 && p->status == 431) {
        /* lws 4.1.6 knows no reason phrase for 431 and would send an empty one. */
        static const char line[] = "HTTP/1.1 431 Request Header Fields Too Large";
        if (lws_add_http_header_by_name(wsi, NULL, (const unsigned char *)line,
                                        (int)sizeof(line) - 1, pp, end))
            return -1;
    } else if (lws_add_http_header_status(wsi, (unsigned int)p->status, pp, end)) {
        return -1;
    }
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
    /*
     * HEAD: the headers GET would send, Content-Length included, and not one
     * byte more, or the client would read the body as its next answer.
     */
    if (lws_write(wsi, body - hlen, hlen + (p->method == M_HEAD ? 0 : blen), LWS_WRITE_HTTP) < 0)
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
        bool end_stream = !blen || p->method == M_HEAD;   /* HEAD: headers only */

        if (add_headers(wsi, p, blen, &hp, end) || lws_finalize_http_header(wsi, &hp, end))
            return -1;
        if (lws_write(wsi, start, (size_t)(hp - start),
                      (enum lws_write_protocol)(LWS_WRITE_HTTP_HEADERS |
                                                (end_stream ? LWS_WRITE_H2_STREAM_END : 0))) < 0)
            return -1;
        p->hdr_sent = true;
        log_request(s, p);
        if (!end_stream) {
            lws_callback_on_writable(wsi);
            return 0;
        }
        blen = 0;
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

/*
 * h1: the answer is due, at the start of the service pass after the one that read the
 * request, before lws polls (see the top). By then lws has put any bytes that followed
 * the request in the same read on its buffer list; holding none, it has nothing a
 * request could be parsed from, and the answer goes now. Holding some (this
 * connection's pipelined bytes, or another's), the writeable callback already asked for
 * answers after lws has offered them, as it always did.
 */
static void answer_due(lws_sorted_usec_list_t *sul)
{
    struct pss *p = lws_container_of(sul, struct pss, sul);
    struct server *s = lws_context_user(p->ctx);

    struct lws *wsi = p->wsi;   /* send_h1 resets *p, wsi included */

    p->sul_armed = false;
    if (!p->active || !p->responded || lws_service_adjust_timeout(p->ctx, 1, 0) == 0)
        return;
    if (send_h1(s, wsi, p) < 0)
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
}

/* The response in p->resp is complete: send it (h1 now or next pass, h2 when writeable). */
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
    if (!p->h2 && !p->sul_armed) {
        p->wsi = wsi;
        p->ctx = lws_get_context(wsi);
        p->sul_armed = true;
        lws_sul_schedule(p->ctx, 0, &p->sul, answer_due, 0);
    }
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

/*
 * The query string as sent ("a=1&b=2", form-urlencoded; "" when none), rebuilt from lws's
 * fragments: lws splits the query at '&' and decodes each piece, so each is encoded again
 * and every route reads its query with the one parser, af_query_parse. An empty piece
 * ("a=1&&b=2") is an empty fragment (length 0) and is left out; -1 from
 * lws_hdr_copy_fragment means no more (a fragment is never longer than the URI). New; the caller frees it. Cannot fail: the URI is
 * capped at AF_HTTP_MAX_URI before this is called.
 */
static char *query_string(struct lws *wsi)
{
    static const char hex[] = "0123456789ABCDEF";
    struct af_buf q = AF_BUF_INIT(0);
    char *frag = af_xmalloc(AF_HTTP_MAX_URI + 1), e_probe[2];
    int ok = 0;

    for (int i = 0; !ok; i++) {
        int len = lws_hdr_copy_fragment(wsi, frag, AF_HTTP_MAX_URI + 1, WSI_TOKEN_HTTP_URI_ARGS, i);
        bool in_value = false;
        if (len < 0)
            break;
        /* lws ends an empty last piece ("?", "?a=1&") with the '/' it puts at the end of an
         * empty path: that "/" is an empty piece too. */
        if (len == 0 || (len == 1 && frag[0] == '/' &&
                         lws_hdr_fragment_length(wsi, WSI_TOKEN_HTTP_URI_ARGS, i + 1) <= 0 &&
                         lws_hdr_copy_fragment(wsi, e_probe, sizeof(e_probe),
                                               WSI_TOKEN_HTTP_URI_ARGS, i + 1) < 0))
            continue;
        if (q.len)
            ok |= af_buf_add(&q, "&", 1);
        for (int k = 0; k < len; k++) {
            unsigned char c = (unsigned char)frag[k];
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            if (c == '=' && !in_value) {
                in_value = true;
                ok |= af_buf_add(&q, "=", 1);
            } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                       (c >= '0' && c <= '9') || (c && strchr("-._~/:", c))) {
                ok |= af_buf_add(&q, &frag[k], 1);
            } else {
                ok |= af_buf_add(&q, e, 3);
            }
        }
    }
    af_free(frag);
    if (ok || !q.len) {
        af_buf_release(&q);
        return af_xstrdup("");
    }
    return af_buf_detach(&q, NULL);
}

/* "GET /explain": the route as messages about its query name it. */
static void route_name(const struct pss *p, char *out, size_t n)
{
    snprintf(out, n, "%s /%s", p->method == M_POST ? "POST" : "GET",
             p->route == R_ROLLOUT_ACK ? "rollouts/ack" : route_verb_name(p->route));
}

/* Routes that take no query parameters: 0, or the 400 already answered (a parameter). */
static int no_query(struct server *s, struct lws *wsi, struct pss *p, const char *q, int *rc)
{
    char where[64];
    int status;

    route_name(p, where, sizeof(where));
    resp_begin(s, p);
    status = af_service_check_query(where, q, &p->resp);
    if (status)
        *rc = respond(s, wsi, p, status, "application/json");
    return status;
}

static int answer_get(struct server *s, struct lws *wsi, struct pss *p, const char *q)
{
    struct af_service *svc = s->svc;
    int rc = 0;

    switch (p->route) {
    case R_HEALTHZ:
        if (no_query(s, wsi, p, q, &rc))
            return rc;
        resp_text(s, p, "ok\n");
        return respond(s, wsi, p, 200, "text/plain; charset=utf-8");
    case R_READYZ: {
        const char *why = NULL;
        char text[900], live[500];
        bool ok;
        if (no_query(s, wsi, p, q, &rc))
            return rc;
        ok = af_service_ready(svc, &why);
        af_service_utilization_status(svc, live, sizeof(live));   /* detail, never 503 */
        if (ok)
            snprintf(text, sizeof(text), "ok\n%s", live);
        else
            snprintf(text, sizeof(text), "not ready: %s\n%s", why ? why : "", live);
        resp_text(s, p, text);
        return respond(s, wsi, p, ok ? 200 : 503, "text/plain; charset=utf-8");
    }
    case R_METRICS:
        if (no_query(s, wsi, p, q, &rc))
            return rc;
        resp_begin(s, p);
        if (af_service_render_metrics(svc, &p->resp) != 0)
            return respond_error(s, wsi, p, 500, "metrics too large");
        return respond(s, wsi, p, 200, "text/plain; version=0.0.4; charset=utf-8");
    case R_EXPLAIN:
        resp_begin(s, p);
        return respond(s, wsi, p, af_service_explain_query(svc, q, &p->resp), "application/json");
    case R_RECOMMEND:
        resp_begin(s, p);
        return respond(s, wsi, p, af_service_recommend(svc, q, NULL, 0, &p->resp),
                       "application/json");
    case R_ROLLOUTS:
        if (no_query(s, wsi, p, q, &rc))
            return rc;
        resp_begin(s, p);
        return respond(s, wsi, p, af_service_rollouts(svc, &p->resp), "application/json");
    case R_COSTS:
        if (no_query(s, wsi, p, q, &rc))
            return rc;
        resp_begin(s, p);
        return respond(s, wsi, p, af_service_costs(svc, &p->resp), "application/json");
    default:
        break;
    }
    return respond_error(s, wsi, p, 404, "not found");
}

static int answer_post(struct server *s, struct lws *wsi, struct pss *p, const char *q)
{
    int verb = route_verb(p->route), status, rc = 0;
    const char *body = p->body.buf ? p->body.buf : "";

    switch (p->route) {
    case R_RECOMMEND:
        resp_begin(s, p);
        return respond(s, wsi, p, af_service_recommend(s->svc, q, body, p->body.len, &p->resp),
                       "application/json");
    case R_MUTATE: {
        /* The API server adds ?timeout=5s; only the body matters, so the query is not read.
         * The handler may rewind its buffer to answer without a patch, so it gets one of its
         * own. */
        struct af_buf answer = AF_BUF_INIT(s->max_response);
        status = af_service_mutate(s->svc, body, p->body.len, &answer);
        resp_begin(s, p);
        if (af_buf_add(&p->resp, answer.buf ? answer.buf : "", answer.len) != 0) {
            af_buf_release(&answer);
            return respond_error(s, wsi, p, 500, "admission answer too large");
        }
        af_buf_release(&answer);
        return respond(s, wsi, p, status, "application/json");
    }
    case R_ROLLOUT_ACK:
        resp_begin(s, p);
        return respond(s, wsi, p, af_service_rollout_ack_query(s->svc, q, &p->resp),
                       "application/json");
    default:
        break;
    }

    if (no_query(s, wsi, p, q, &rc))   /* the extender verbs take everything in the body */
        return rc;
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
    char *q = query_string(wsi);
    int rc = p->method == M_POST ? answer_post(s, wsi, p, q) : answer_get(s, wsi, p, q);

    af_free(q);
    return rc;
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
    if (m == LWSHUMETH_HEAD)
        return M_HEAD;
    if (m == LWSHUMETH_POST)
        return M_POST;
    if (m == LWSHUMETH_COLON_PATH) {
        char mb[16];
        if (lws_hdr_copy(wsi, mb, (int)sizeof(mb), WSI_TOKEN_HTTP_COLON_METHOD) > 0) {
            if (!strcmp(mb, "GET"))
                return M_GET;
            if (!strcmp(mb, "HEAD"))
                return M_HEAD;
            if (!strcmp(mb, "POST"))
                return M_POST;
        }
    }
    return M_OTHER;
}

static enum route match_route(struct server *s, const char *path, bool health)
{
    static const struct {
        const char *path;
        enum route r;
    } table[] = {
        {"/filter", R_FILTER},   {"/prioritize", R_PRIORITIZE}, {"/explain", R_EXPLAIN},
        {"/preempt", R_PREEMPT}, {"/healthz", R_HEALTHZ},       {"/readyz", R_READYZ},
        {"/metrics", R_METRICS}, {"/recommend", R_RECOMMEND},   {"/rollouts", R_ROLLOUTS},
        {"/rollouts/ack", R_ROLLOUT_ACK}, {"/mutate", R_MUTATE}, {"/costs", R_COSTS},
    };

    if (s->prefix_len && !strncmp(path, s->prefix, s->prefix_len) && path[s->prefix_len] == '/')
        path += s->prefix_len;
    for (size_t i = 0; i < AF_ARRAY_SIZE(table); i++) {
        if (strcmp(path, table[i].path))
            continue;
        /* The health listener has no client certificates: probes and scrapes only. */
        if (health && table[i].r != R_HEALTHZ && table[i].r != R_READYZ &&
            table[i].r != R_METRICS)
            return R_NONE;
        return table[i].r;
    }
    return R_NONE;
}

/* The URI tokens lws may have stored the request target in (one per method). */
static const enum lws_token_indexes uri_tokens[] = {
    WSI_TOKEN_GET_URI,    WSI_TOKEN_POST_URI,   WSI_TOKEN_OPTIONS_URI,
    WSI_TOKEN_PUT_URI,    WSI_TOKEN_PATCH_URI,  WSI_TOKEN_DELETE_URI,
    WSI_TOKEN_HEAD_URI,   WSI_TOKEN_HTTP_COLON_PATH, WSI_TOKEN_HTTP_URI_ARGS,
};

static bool is_uri_token(int t)
{
    for (size_t i = 0; i < AF_ARRAY_SIZE(uri_tokens); i++)
        if ((int)uri_tokens[i] == t)
            return true;
    return false;
}

/*
 * Every token is capped one byte over the limit (token_limits), where lws
 * stops storing it and skips the rest of the line rather than fail: a value
 * longer than the limit shows up here as one of exactly limit + 1 bytes.
 */
static void init_limits(struct lws_token_limits *l)
{
    for (int t = 0; t < WSI_TOKEN_COUNT; t++)
        l->token_limit[t] = (unsigned short)((is_uri_token(t) ? AF_HTTP_MAX_URI
                                                              : AF_HTTP_MAX_FIELD) + 1);
}

/* The request target (path and query, as lws decoded them) is longer than AF_HTTP_MAX_URI. */
static bool uri_too_long(struct lws *wsi)
{
    int total = 0;

    for (size_t i = 0; i < AF_ARRAY_SIZE(uri_tokens); i++)
        total += lws_hdr_total_length(wsi, uri_tokens[i]);
    return total > AF_HTTP_MAX_URI;
}

/* The first header (all lines of one name, as lws joins them) over AF_HTTP_MAX_FIELD, or -1. */
static int field_too_long(struct lws *wsi)
{
    for (int t = 0; t < (int)_WSI_TOKEN_CLIENT_SENT_PROTOCOLS; t++)
        if (!is_uri_token(t) && t != WSI_TOKEN_HTTP &&
            lws_hdr_total_length(wsi, (enum lws_token_indexes)t) > AF_HTTP_MAX_FIELD)
            return t;
    return -1;
}

/* "user-agent:" -> "user-agent", for an error message. */
static void token_name(int t, char *out, size_t outlen)
{
    const unsigned char *n = lws_token_to_string((enum lws_token_indexes)t);
    size_t len = n ? strcspn((const char *)n, ":") : 0;

    snprintf(out, outlen, "%.*s", (int)len, n ? (const char *)n : "");
}

#define H2_EMPTY_BODY_WAIT_US (20 * LWS_US_PER_MS)

static int dispatch(struct server *s, struct lws *wsi, struct pss *p);

/* An h2 request without a length whose stream has not ended yet: assume no body. */
static void empty_body_due(lws_sorted_usec_list_t *sul)
{
    struct pss *p = lws_container_of(sul, struct pss, sul);
    struct server *s = lws_context_user(p->ctx);

    struct lws *wsi = p->wsi;   /* an answer sent at once resets *p */

    p->sul_armed = false;
    if (!p->active || p->responded || p->body.len || p->discarded)
        return;
    if (dispatch(s, wsi, p) < 0)
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
}

/*
 * A client that sent "Expect: 100-continue" waits for leave to send its body (curl does
 * for bodies over 1 MiB, and for a second before it gives up waiting); lws does not answer
 * it, so accelfit does, before reading the body. Any other expectation is ignored, as
 * RFC 9110 allows for a server that never sends 417.
 */
static int send_continue(struct lws *wsi)
{
    static const char line[] = "HTTP/1.1 100 Continue\r\n\r\n";
    unsigned char out[LWS_PRE + sizeof(line)];
    char expect[32];

    if (lws_hdr_copy(wsi, expect, (int)sizeof(expect), WSI_TOKEN_HTTP_EXPECT) <= 0 ||
        strcasecmp(expect, "100-continue"))
        return 0;
    memcpy(out + LWS_PRE, line, sizeof(line) - 1);
    return lws_write(wsi, out + LWS_PRE, sizeof(line) - 1, LWS_WRITE_HTTP) < 0 ? -1 : 0;
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
    p->health = s->health_vh && lws_get_vhost(wsi) == s->health_vh;
    p->method = get_method(wsi);
    p->route = match_route(s, path ? path : "", p->health);
    p->st.candidates = -1;
    p->st.passed = -1;

    /* lws truncated the field and skipped the rest of its line: answer, and drop what follows. */
    if (uri_too_long(wsi)) {
        char msg[96];
        snprintf(msg, sizeof(msg), "request URI exceeds %d bytes", AF_HTTP_MAX_URI);
        p->close_after = true;
        return respond_error(s, wsi, p, 414, msg);
    }
    {
        int t = field_too_long(wsi);
        if (t >= 0) {
            char name[64], msg[160];
            token_name(t, name, sizeof(name));
            snprintf(msg, sizeof(msg), "header %s exceeds %d bytes", name, AF_HTTP_MAX_FIELD);
            p->close_after = true;
            return respond_error(s, wsi, p, 431, msg);
        }
    }
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
    case R_ROLLOUT_ACK:
    case R_MUTATE:
        needs_post = true;
        allows_post = true;
        p->allow = "POST";
        break;
    case R_RECOMMEND:
        allows_get = allows_post = true;
        p->allow = "GET, HEAD, POST";
        break;
    case R_ROLLOUTS:
    case R_COSTS:
        allows_get = true;
        p->allow = "GET, HEAD";
        break;
    case R_EXPLAIN:
        allows_get = allows_post = true;
        p->allow = "GET, HEAD, POST";
        break;
    case R_HEALTHZ:
    case R_READYZ:
    case R_METRICS:
        allows_get = true;
        p->allow = "GET, HEAD";
        break;
    case R_NONE:
        p->pending_status = 404;
        break;
    }
    if (p->route != R_NONE && !(((p->method == M_GET || p->method == M_HEAD) && allows_get) ||
                                (p->method == M_POST && allows_post)))
        p->pending_status = 405;
    if (p->pending_status != 405)
        p->allow = NULL;
    (void)needs_post;

    if (cl > 0 && (uint64_t)cl > s->max_body)
        return too_big(s, wsi, p);

    p->expect_body = cl > 0;
    if (p->h2 && cl <= 0 && p->method != M_GET && p->method != M_HEAD) {
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
    return p->h2 ? 0 : send_continue(wsi);
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

/* A token character (RFC 9110): a method, an Upgrade value. */
static bool is_tchar(unsigned char c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/*
 * A request asks to leave HTTP/1.1 (an Upgrade header): lws 4.1.6 asks before it
 * upgrades, and accelfit speaks HTTP/1.1 only, so it never agrees. For an Upgrade
 * lws does not know (neither websocket nor h2c) lws has already answered 403 and
 * let go of the request's headers, `in` pointing into them, and reads them again
 * if told to go on: hang up instead (lws's 403 is on its way). websocket and h2c
 * are refused with 400 JSON saying so, and the connection closed, since a body
 * the request may carry is never read.
 */
static int refuse_upgrade(struct lws *wsi)
{
    unsigned char out[LWS_PRE + 512];
    char up[32], msg[192], body[256];
    int blen, n;

    if (lws_hdr_total_length(wsi, WSI_TOKEN_UPGRADE) <= 0) {
        AF_LOG(AF_LOG_INFO, "request", "verb", "other", "status", "403", "error",
               "unknown Upgrade header: refused by libwebsockets; connection closed", NULL);
        return -1;
    }
    if (lws_hdr_copy(wsi, up, (int)sizeof(up), WSI_TOKEN_UPGRADE) <= 0)
        snprintf(up, sizeof(up), "?");
    for (char *c = up; *c; c++)
        if (!is_tchar((unsigned char)*c) && *c != '/')
            *c = '?';   /* no JSON escaping needed below */
    snprintf(msg, sizeof(msg),
             "upgrade to '%s' is not supported: accelfit speaks HTTP/1.1; send the request "
             "without an Upgrade header", up);
    AF_LOG(AF_LOG_INFO, "request", "verb", "other", "status", "400", "error", msg, NULL);
    blen = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", msg);
    n = snprintf((char *)out + LWS_PRE, sizeof(out) - LWS_PRE,
                 "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                 "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
                 blen, lws_hdr_total_length(wsi, WSI_TOKEN_HEAD_URI) > 0 ? "" : body);
    if (n > 0 && (size_t)n < sizeof(out) - LWS_PRE)
        (void)lws_write(wsi, out + LWS_PRE, (size_t)n, LWS_WRITE_HTTP);
    return -1;
}

static void tls_hook(struct server *s, SSL_CTX *lws_ctx);

/* ---- the lws callback ---------------------------------------------------------------------------------- */

static int callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    struct lws_context *ctx = lws_get_context(wsi);
    struct server *s = ctx ? lws_context_user(ctx) : NULL;
    struct pss *p = user;

    switch (reason) {
    case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS:
        /* `user` is the API vhost's SSL_CTX, made by lws: reloads hook into it. */
        if (s && user && !s->lws_ssl_ctx)
            tls_hook(s, user);
        return 0;
    case LWS_CALLBACK_OPENSSL_PERFORM_CLIENT_CERT_VERIFICATION:
        /*
         * lws asks about every client certificate and, unless told otherwise,
         * accepts it even when OpenSSL could not verify it against
         * --client-ca-file: pass OpenSSL's verdict (len) through. 0 accepts.
         */
        if (!len)
            AF_LOG(AF_LOG_INFO, "client certificate refused", "why",
                   X509_verify_cert_error_string(
                       X509_STORE_CTX_get_error((X509_STORE_CTX *)user)), NULL);
        return len ? 0 : 1;
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
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        return refuse_upgrade(wsi);
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


/* ---- what lws could not parse as HTTP --------------------------------------------------------- */

/* Per connection handed to RAW_PROTOCOL: the answer, once decided. */
struct rawss {
    size_t len;
    unsigned char out[LWS_PRE + 512];
};

/*
 * lws gave up on these bytes (an unknown method, a line that is not HTTP) or
 * was asked to CONNECT: say which, in the JSON every other error uses. The
 * method is a token (RFC 9110), so it needs no JSON escaping.
 */
static size_t malformed_answer(const unsigned char *in, size_t len, char *out, size_t outlen)
{
    char msg[160], body[256];
    size_t n = 0;
    int blen;

    while (n < len && n < 32 && is_tchar(in[n]))
        n++;
    if (n > 0 && n < len && in[n] == ' ')
        snprintf(msg, sizeof(msg), "unsupported method '%.*s': accelfit answers GET, HEAD and POST",
                 (int)n, (const char *)in);
    else
        snprintf(msg, sizeof(msg), "malformed request line: expected METHOD /path HTTP/1.1");
    AF_LOG(AF_LOG_INFO, "request", "verb", "other", "status", "400", "error", msg, NULL);
    blen = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", msg);
    return (size_t)snprintf(out, outlen,
                            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                            "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
                            blen, body);
}

static int raw_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                        size_t len)
{
    struct rawss *r = user;

    switch (reason) {
    case LWS_CALLBACK_RAW_RX:
        /* The first bytes decide; anything after them is never read (the answer closes). */
        if (r && !r->len && in && len) {
            r->len = malformed_answer(in, len, (char *)r->out + LWS_PRE, sizeof(r->out) - LWS_PRE);
            lws_callback_on_writable(wsi);
        }
        return 0;
    case LWS_CALLBACK_RAW_WRITEABLE:
        if (!r || !r->len)
            return 0;
        if (lws_write(wsi, r->out + LWS_PRE, r->len, LWS_WRITE_RAW) < 0)
            return -1;
        return -1;   /* close: the rest of the input is not HTTP we can follow */
    default:
        break;
    }
    return 0;
}

static const struct lws_protocols protocols[] = {
    {"http", callback, sizeof(struct pss), 65536, 0, NULL, 1u << 20},
    {RAW_PROTOCOL, raw_callback, sizeof(struct rawss), 4096, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ---- TLS files: checked at start, reloaded when they change ------------------------------------ */

/* What the three files hold, parsed. */
struct tls_material {
    X509 *cert;
    STACK_OF(X509) *chain;   /* the certificates after the first in --tls-cert-file */
    EVP_PKEY *key;
    X509_STORE *ca;          /* NULL without --client-ca-file */
};

static void tls_material_release(struct tls_material *m)
{
    X509_free(m->cert);
    sk_X509_pop_free(m->chain, X509_free);
    EVP_PKEY_free(m->key);
    X509_STORE_free(m->ca);
    memset(m, 0, sizeof(*m));
}

/* A passphrase prompt on the terminal would hang a daemon: encrypted keys are refused. */
static int no_passphrase(char *buf, int size, int rwflag, void *u)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)u;
    return -1;
}

/* Reads `path` into `b`; on failure says why in `why`, naming `flag`. */
static int read_pem(const char *flag, const char *path, struct af_buf *b, char *why, size_t whylen)
{
    FILE *f = fopen(path, "rb");
    char chunk[8192];
    size_t n;
    int rc = 0;

    if (!f) {
        snprintf(why, whylen, "cannot read %s '%s': %s", flag, path, strerror(errno));
        return AF_EINVAL;
    }
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0 && !rc)
        if (af_buf_add(b, chunk, n) != 0) {
            snprintf(why, whylen, "%s '%s' is larger than %u bytes", flag, path, TLS_FILE_MAX);
            rc = AF_EINVAL;
        }
    if (!rc && ferror(f)) {
        snprintf(why, whylen, "cannot read %s '%s': %s", flag, path, strerror(errno));
        rc = AF_EINVAL;
    }
    fclose(f);
    return rc;
}

/* Every PEM certificate in `b`, in order (a new stack, possibly empty). */
static STACK_OF(X509) *pem_certs(const struct af_buf *b)
{
    STACK_OF(X509) *sk = sk_X509_new_null();
    BIO *bio = BIO_new_mem_buf(b->buf ? b->buf : "", (int)b->len);
    X509 *x;

    while (sk && bio && (x = PEM_read_bio_X509(bio, NULL, no_passphrase, NULL)) != NULL)
        if (!sk_X509_push(sk, x))
            X509_free(x);
    BIO_free(bio);
    ERR_clear_error();   /* the end of the input reads as "no start line" */
    return sk;
}

static int load_cert(const struct af_http_options *opt, struct tls_material *m, char *why,
                     size_t whylen)
{
    struct af_buf b = AF_BUF_INIT(TLS_FILE_MAX);
    int rc = read_pem("--tls-cert-file", opt->tls_cert_file, &b, why, whylen);

    if (!rc) {
        m->chain = pem_certs(&b);
        if (!m->chain || sk_X509_num(m->chain) == 0) {
            snprintf(why, whylen,
                     "--tls-cert-file '%s' holds no PEM certificate "
                     "(-----BEGIN CERTIFICATE-----)", opt->tls_cert_file);
            rc = AF_EINVAL;
        } else {
            m->cert = sk_X509_shift(m->chain);
        }
    }
    af_buf_release(&b);
    return rc;
}

static int load_key(const struct af_http_options *opt, struct tls_material *m, char *why,
                    size_t whylen)
{
    struct af_buf b = AF_BUF_INIT(TLS_FILE_MAX);
    int rc = read_pem("--tls-private-key-file", opt->tls_key_file, &b, why, whylen);
    BIO *bio;

    if (rc)
        goto out;
    bio = BIO_new_mem_buf(b.buf ? b.buf : "", (int)b.len);
    m->key = bio ? PEM_read_bio_PrivateKey(bio, NULL, no_passphrase, NULL) : NULL;
    BIO_free(bio);
    ERR_clear_error();
    if (!m->key) {
        bool enc = false;
        for (size_t i = 0; b.buf && i + 9 <= b.len && !enc; i++)
            enc = !memcmp(b.buf + i, "ENCRYPTED", 9);
        snprintf(why, whylen, "--tls-private-key-file '%s' %s", opt->tls_key_file,
                 enc ? "is encrypted; accelfit needs an unencrypted PEM key"
                     : "holds no PEM private key (-----BEGIN PRIVATE KEY-----)");
        rc = AF_EINVAL;
    } else if (X509_check_private_key(m->cert, m->key) != 1) {
        ERR_clear_error();
        snprintf(why, whylen, "--tls-private-key-file '%s' does not match the certificate in "
                 "--tls-cert-file '%s'", opt->tls_key_file, opt->tls_cert_file);
        rc = AF_EINVAL;
    }
out:
    af_buf_release(&b);
    return rc;
}

static int load_ca(const struct af_http_options *opt, struct tls_material *m, char *why,
                   size_t whylen)
{
    struct af_buf b = AF_BUF_INIT(TLS_FILE_MAX);
    STACK_OF(X509) *sk = NULL;
    int rc = read_pem("--client-ca-file", opt->client_ca_file, &b, why, whylen);

    if (!rc) {
        sk = pem_certs(&b);
        m->ca = X509_STORE_new();
        for (int i = 0; m->ca && sk && i < sk_X509_num(sk); i++)
            X509_STORE_add_cert(m->ca, sk_X509_value(sk, i));
        ERR_clear_error();   /* a certificate listed twice */
        if (!sk || sk_X509_num(sk) == 0 || !m->ca) {
            snprintf(why, whylen,
                     "--client-ca-file '%s' holds no PEM certificate "
                     "(-----BEGIN CERTIFICATE-----)", opt->client_ca_file);
            rc = AF_EINVAL;
        }
    }
    sk_X509_pop_free(sk, X509_free);
    af_buf_release(&b);
    return rc;
}

/* Loads and checks everything TLS needs. On failure `why` names the flag, the file, the problem. */
static int tls_material_load(const struct af_http_options *opt, struct tls_material *m, char *why,
                             size_t whylen)
{
    int rc;

    memset(m, 0, sizeof(*m));
    rc = load_cert(opt, m, why, whylen);
    if (!rc)
        rc = load_key(opt, m, why, whylen);
    if (!rc && opt->client_ca_file)
        rc = load_ca(opt, m, why, whylen);
    if (rc)
        tls_material_release(m);
    return rc;
}

int af_http_check_tls(const struct af_http_options *opt, char *why, size_t whylen)
{
    struct tls_material m;

    why[0] = '\0';
    if (!opt->tls_cert_file && !opt->tls_key_file) {
        if (!opt->client_ca_file)
            return 0;
        snprintf(why, whylen, "--client-ca-file needs --tls-cert-file and --tls-private-key-file");
        return AF_EINVAL;
    }
    if (!opt->tls_cert_file || !opt->tls_key_file) {
        snprintf(why, whylen, "--tls-cert-file and --tls-private-key-file go together");
        return AF_EINVAL;
    }
    if (tls_material_load(opt, &m, why, whylen) != 0)
        return AF_EINVAL;
    tls_material_release(&m);
    return 0;
}

/* Offers http/1.1 only, as the lws context does (see af_http_run). */
static int alpn_http11(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned int inlen, void *arg)
{
    static const unsigned char ours[] = "\x08http/1.1";
    unsigned char *sel = NULL;

    (void)ssl;
    (void)arg;
    if (SSL_select_next_proto(&sel, outlen, ours, sizeof(ours) - 1, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    return SSL_TLSEXT_ERR_OK;
}

/* Keeps lws's SNI vhost switch (on the session context) from undoing the reload. */
static int servername_keep(SSL *ssl, int *al, void *arg)
{
    (void)ssl;
    (void)al;
    (void)arg;
    return SSL_TLSEXT_ERR_OK;
}

/*
 * An SSL_CTX serving `m`: what new connections switch to. Connection settings
 * lws fixed at SSL_new (protocol versions, verify mode, its verify callback)
 * stay with each connection; certificate, key, chain, client CA store, ALPN
 * and SNI are read from this context. Steals m->ca. NULL on failure.
 */
static SSL_CTX *tls_ctx_new(struct tls_material *m)
{
    SSL_CTX *c = SSL_CTX_new(TLS_server_method());
    bool ok = c != NULL;

    if (ok)
        ok = SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION) == 1 &&
             SSL_CTX_use_certificate(c, m->cert) == 1 && SSL_CTX_use_PrivateKey(c, m->key) == 1 &&
             SSL_CTX_check_private_key(c) == 1 &&
             SSL_CTX_set_session_id_context(c, (const unsigned char *)"accelfit", 8) == 1;
    for (int i = 0; ok && i < sk_X509_num(m->chain); i++)
        ok = SSL_CTX_add1_chain_cert(c, sk_X509_value(m->chain, i)) == 1;
    if (ok && m->ca) {
        SSL_CTX_set_cert_store(c, m->ca);
        m->ca = NULL;
        SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    }
    if (ok) {
        SSL_CTX_set_alpn_select_cb(c, alpn_http11, NULL);
        SSL_CTX_set_tlsext_servername_callback(c, servername_keep);
    }
    if (!ok) {
        ERR_clear_error();
        SSL_CTX_free(c);
        c = NULL;
    }
    return c;
}

/* Every new TLS connection on the API vhost: serve the newest files. */
static int client_hello(SSL *ssl, int *al, void *arg)
{
    struct server *s = arg;

    (void)al;
    if (s->tls_ctx && SSL_get_SSL_CTX(ssl) != s->tls_ctx)
        SSL_set_SSL_CTX(ssl, s->tls_ctx);
    return SSL_CLIENT_HELLO_SUCCESS;
}

static void tls_hook(struct server *s, SSL_CTX *lws_ctx)
{
    s->lws_ssl_ctx = lws_ctx;
    SSL_CTX_set_client_hello_cb(lws_ctx, client_hello, s);
}

static void file_sig_read(const char *path, struct file_sig *f)
{
    struct stat st;

    memset(f, 0, sizeof(*f));
    if (!path)
        return;
    if (stat(path, &st) != 0) {
        f->err = errno;
        return;
    }
    f->dev = st.st_dev;
    f->ino = st.st_ino;
    f->size = st.st_size;
    f->mtime = st.st_mtim;
}

static void tls_sig_read(const struct af_http_options *opt, struct tls_sig *t)
{
    file_sig_read(opt->tls_cert_file, &t->f[0]);
    file_sig_read(opt->tls_key_file, &t->f[1]);
    file_sig_read(opt->client_ca_file, &t->f[2]);
}

static bool tls_sig_eq(const struct tls_sig *a, const struct tls_sig *b)
{
    for (int i = 0; i < 3; i++) {
        const struct file_sig *x = &a->f[i], *y = &b->f[i];
        if (x->err != y->err || x->dev != y->dev || x->ino != y->ino || x->size != y->size ||
            x->mtime.tv_sec != y->mtime.tv_sec || x->mtime.tv_nsec != y->mtime.tv_nsec)
            return false;
    }
    return true;
}

/* The certificate's subject and expiry, for the log line that says what is served now. */
static void cert_describe(X509 *x, char *subject, size_t sublen, char *until, size_t untillen)
{
    BIO *bio = BIO_new(BIO_s_mem());
    int n;

    subject[0] = until[0] = '\0';
    X509_NAME_oneline(X509_get_subject_name(x), subject, (int)sublen);
    if (bio && ASN1_TIME_print(bio, X509_get0_notAfter(x)) == 1) {
        n = BIO_read(bio, until, (int)untillen - 1);
        until[n > 0 ? n : 0] = '\0';
    }
    BIO_free(bio);
}

static void tls_reload(struct server *s)
{
    const struct af_http_options *opt = s->opt;
    struct tls_material m;
    char why[600], subject[256], until[64];
    SSL_CTX *c;

    if (tls_material_load(opt, &m, why, sizeof(why)) != 0) {
        AF_LOG(AF_LOG_ERROR, "TLS files changed but cannot be used; still serving the previous "
               "certificate", "why", why, NULL);
        return;
    }
    cert_describe(m.cert, subject, sizeof(subject), until, sizeof(until));
    c = tls_ctx_new(&m);
    tls_material_release(&m);
    if (!c) {
        AF_LOG(AF_LOG_ERROR, "TLS files changed but cannot be used; still serving the previous "
               "certificate", "why", "OpenSSL refused the certificate or key", NULL);
        return;
    }
    SSL_CTX_free(s->tls_ctx);   /* connections made with it hold their own reference */
    s->tls_ctx = c;
    AF_LOG(AF_LOG_INFO, "reloaded TLS files: new connections get the new certificate", "cert",
           opt->tls_cert_file, "subject", subject, "not_after", until, "client_ca",
           opt->client_ca_file ? opt->client_ca_file : "", NULL);
}

/*
 * Every TLS_CHECK_US: when the files differ from the loaded ones and have not
 * changed since the previous look (a writer may be half way through, e.g.
 * the certificate written but not yet its key), load them once. Whatever the
 * outcome, those files are not tried again until they change again, so a
 * bad set is reported once.
 */
static void tls_check(lws_sorted_usec_list_t *sul)
{
    struct server *s = lws_container_of(sul, struct server, tls_sul);
    struct tls_sig now;

    tls_sig_read(s->opt, &now);
    if (!tls_sig_eq(&now, &s->tls_loaded) && tls_sig_eq(&now, &s->tls_seen)) {
        s->tls_loaded = now;
        if (s->lws_ssl_ctx)
            tls_reload(s);
        else
            AF_LOG(AF_LOG_ERROR, "TLS files changed, but libwebsockets did not hand over its "
                   "TLS context; restart to serve them", NULL);
    }
    s->tls_seen = now;
    lws_sul_schedule(s->ctx, 0, &s->tls_sul, tls_check, TLS_CHECK_US);
}

/* ---- running ----------------------------------------------------------------------------------------- */

static void check_stop(lws_sorted_usec_list_t *sul)
{
    struct server *s = lws_container_of(sul, struct server, sul);

    if (*s->stop)
        lws_cancel_service(s->ctx);
    else
        lws_sul_schedule(s->ctx, 0, &s->sul, check_stop, 100 * LWS_US_PER_MS);
}

/* Sets `why` (when given) and returns AF_EINVAL. */
static int listen_bad(char *why, size_t n, const char *fmt, ...) AF_PRINTF(3, 4);
static int listen_bad(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;

    if (why && n) {
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
    }
    return AF_EINVAL;
}

int af_http_parse_listen(const char *listen, char *host, size_t hostlen, int *port, bool *v6,
                         char *why, size_t whylen)
{
    const char *colon;
    int64_t p;

    *v6 = false;
    host[0] = '\0';
    if (!listen || !*listen)
        return listen_bad(why, whylen, "the address is empty; write ADDR:PORT, e.g. "
                                       "127.0.0.1:8888, or :8888 for every interface");
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (!close)
            return listen_bad(why, whylen, "'[' is not closed; write an IPv6 address as "
                                           "[ADDR]:PORT, e.g. [::1]:8888");
        if (close[1] != ':')
            return listen_bad(why, whylen, "no port after ']'; write [ADDR]:PORT, e.g. [::1]:8888");
        if ((size_t)(close - listen - 1) >= hostlen)
            return listen_bad(why, whylen, "the address is too long");
        memcpy(host, listen + 1, (size_t)(close - listen - 1));
        host[close - listen - 1] = '\0';
        colon = close + 1;
        *v6 = true;
    } else {
        colon = strrchr(listen, ':');
        if (!colon)
            return listen_bad(why, whylen, "no port; write ADDR:PORT, e.g. %.60s:8888",
                              listen);
        if ((size_t)(colon - listen) >= hostlen)
            return listen_bad(why, whylen, "the address is too long");
        memcpy(host, listen, (size_t)(colon - listen));
        host[colon - listen] = '\0';
    }
    if (af_parse_int64(colon + 1, 1, 65535, &p) != 0)
        return listen_bad(why, whylen, "the port '%.20s' is not a whole number from 1 to 65535",
                          colon + 1);
    *port = (int)p;
    if (!strcmp(host, "localhost"))
        snprintf(host, hostlen, "127.0.0.1");
    if (host[0]) {
        unsigned char tmp[sizeof(struct in6_addr)];
        if (!*v6 && strchr(host, ':'))
            return listen_bad(why, whylen,
                              "the IPv6 address '%.60s' needs brackets: [%.60s]:%d", host, host,
                              *port);
        if (*v6 ? inet_pton(AF_INET6, host, tmp) != 1 : inet_pton(AF_INET, host, tmp) != 1)
            return listen_bad(why, whylen,
                              "the address '%.60s' is not a numeric %s address (names other "
                              "than localhost are not looked up; leave it empty, as in :%d, for "
                              "every interface)",
                              host, *v6 ? "IPv6" : "IPv4", *port);
    }
    return 0;
}

/* Sets opt->error, if the caller gave a buffer. */
static void fail_msg(const struct af_http_options *opt, const char *fmt, ...) AF_PRINTF(2, 3);
static void fail_msg(const struct af_http_options *opt, const char *fmt, ...)
{
    va_list ap;

    if (!opt->error || !opt->error_len)
        return;
    va_start(ap, fmt);
    vsnprintf(opt->error, opt->error_len, fmt, ap);
    va_end(ap);
}

/*
 * lws says only that it could not make a listener; bind the address once
 * more to learn why (errno), or 0 when it binds fine now.
 */
static int bind_errno(const char *host, int port, bool v6)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int fd, one = 1, err = 0;

    memset(&ss, 0, sizeof(ss));
    if (v6 || !host[0]) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        if (host[0] && inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
            return EINVAL;
        sl = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
            return EINVAL;
        sl = sizeof(*a);
    }
    fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0 && !host[0]) {   /* no IPv6 here: lws listens on IPv4 */
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        memset(&ss, 0, sizeof(ss));
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        sl = sizeof(*a);
        fd = socket(AF_INET, SOCK_STREAM, 0);
    }
    if (fd < 0)
        return errno;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 1) != 0)
        err = errno;
    close(fd);
    return err;
}

static const char *bind_reason(int err)
{
    switch (err) {
    case EADDRINUSE:
        return "address already in use (another process is listening there)";
    case EADDRNOTAVAIL:
        return "no such address on this host";
    case EACCES:
        return "permission denied (ports below 1024 need privileges)";
    case 0:
        return "libwebsockets could not create the listener (--log-level debug shows its log)";
    default:
        return strerror(err);
    }
}

/* One listener: the API (`health` false) or the health vhost. NULL, with opt->error set. */
static struct lws_vhost *make_vhost(struct server *s, const char *flag, const char *listen,
                                    bool health)
{
    const struct af_http_options *opt = s->opt;
    struct lws_context_creation_info info;
    struct lws_vhost *vh;
    char host[128], why[200];
    int port = 0;
    bool v6 = false;

    if (af_http_parse_listen(listen, host, sizeof(host), &port, &v6, why, sizeof(why)) != 0) {
        fail_msg(opt, "%s '%s': %s", flag, listen ? listen : "", why);
        return NULL;
    }
    memset(&info, 0, sizeof(info));
    info.port = port;
    info.iface = host[0] ? host : NULL;
    info.protocols = protocols;
    info.user = s;
    /* Not a host name any client sends as SNI, so lws's SNI vhost switch never picks it. */
    info.vhost_name = health ? "accelfit-health.invalid" : "accelfit.invalid";
    info.options = LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND |
                   LWS_SERVER_OPTION_FALLBACK_TO_APPLY_LISTEN_ACCEPT_CONFIG;
    if (host[0] && !v6)
        info.options |= LWS_SERVER_OPTION_DISABLE_IPV6;
    /* what lws cannot parse as HTTP goes to raw_callback (see the top) */
    info.listen_accept_role = "raw-skt";
    info.listen_accept_protocol = RAW_PROTOCOL;
    info.keepalive_timeout = KEEPALIVE_IDLE_S;
    info.timeout_secs = (unsigned int)(s->read_timeout_ns / 1000000000ull);
    info.timeout_secs_ah_idle = info.timeout_secs;
    if (!health && opt->tls_cert_file) {
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
        info.ssl_cert_filepath = opt->tls_cert_file;
        info.ssl_private_key_filepath = opt->tls_key_file;
        info.ssl_options_set = SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1;
        /*
         * ALPN offers http/1.1 only. libwebsockets 4.1.6 can stall an h2
         * stream whose request body spans many TLS records (a Nodes-mode
         * filter of a few hundred KiB never completes), so kube-scheduler's
         * Go client, which offers h2 and http/1.1, is steered to HTTP/1.1
         * keep-alive. The h2 paths above stay for a fixed lws.
         */
        info.alpn = "http/1.1";
        if (opt->client_ca_file) {
            info.ssl_ca_filepath = opt->client_ca_file;
            info.options |= LWS_SERVER_OPTION_REQUIRE_VALID_OPENSSL_CLIENT_CERT;
        }
    }
    vh = lws_create_vhost(s->ctx, &info);
    if (!vh)
        fail_msg(opt, "cannot listen on %s (%s): %s", listen, flag,
                 bind_reason(bind_errno(host, port, v6)));
    return vh;
}

int af_http_run(const struct af_http_options *opt, struct af_service *svc,
                volatile sig_atomic_t *stop)
{
    struct lws_context_creation_info info;
    struct server s;
    char why[600];
    int rc = 0;

    memset(&s, 0, sizeof(s));
    s.opt = opt;
    s.svc = svc;
    s.stop = stop;
    s.max_body = opt->max_body ? opt->max_body : (16u << 20);
    s.max_response = 2 * s.max_body + (16u << 20);
    s.read_timeout_ns = (uint64_t)(opt->read_timeout_s > 0 ? opt->read_timeout_s : 10) * 1000000000ull;
    if (opt->error && opt->error_len)
        opt->error[0] = '\0';
    if (opt->url_prefix && *opt->url_prefix) {
        const char *pre = opt->url_prefix;
        size_t n;
        if (pre[0] != '/') {
            fail_msg(opt, "--url-prefix must start with '/': '%s'", pre);
            return AF_EINVAL;
        }
        n = strlen(pre);
        while (n > 1 && pre[n - 1] == '/')
            n--;
        if (n >= sizeof(s.prefix)) {
            fail_msg(opt, "--url-prefix is longer than %zu bytes", sizeof(s.prefix) - 1);
            return AF_EINVAL;
        }
        if (!(n == 1 && pre[0] == '/')) {
            memcpy(s.prefix, pre, n);
            s.prefix[n] = '\0';
            s.prefix_len = n;
        }
    }
    if (af_http_check_tls(opt, why, sizeof(why)) != 0) {
        fail_msg(opt, "%s", why);
        return AF_EINVAL;
    }
    if (opt->tls_cert_file)
        tls_sig_read(opt, &s.tls_loaded);   /* before lws reads them: a change after is seen */
    s.tls_seen = s.tls_loaded;
    init_limits(&s.limits);

    lws_set_log_level(af_log_level <= AF_LOG_DEBUG ? (LLL_ERR | LLL_WARN | LLL_NOTICE) : 0,
                      lws_emit);
    memset(&info, 0, sizeof(info));
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = protocols;
    info.user = &s;
    info.options = LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
    if (opt->tls_cert_file)
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    info.max_http_header_data2 = HEAD_AREA;
    info.token_limits = &s.limits;
    info.pt_serv_buf_size = 65536;
    info.count_threads = 1;
    s.ctx = lws_create_context(&info);
    if (!s.ctx) {
        fail_msg(opt, "cannot start libwebsockets (--log-level debug shows its log)");
        return AF_ECONN;
    }
    s.api_vh = make_vhost(&s, "--listen", opt->listen, false);
    if (s.api_vh && opt->health_listen) {
        s.health_vh = make_vhost(&s, "--health-listen", opt->health_listen, true);
        if (!s.health_vh)
            s.api_vh = NULL;
    }
    if (!s.api_vh) {
        lws_context_destroy(s.ctx);
        return AF_EINVAL;
    }
    AF_LOG(AF_LOG_INFO, "listening", "listen", opt->listen, "tls",
           opt->tls_cert_file ? (opt->client_ca_file ? "mutual" : "on") : "off", "url_prefix",
           s.prefix_len ? s.prefix : "", "health_listen",
           opt->health_listen ? opt->health_listen : "", NULL);
    lws_sul_schedule(s.ctx, 0, &s.sul, check_stop, 100 * LWS_US_PER_MS);
    if (opt->tls_cert_file)
        lws_sul_schedule(s.ctx, 0, &s.tls_sul, tls_check, TLS_CHECK_US);
    while (!*stop) {
        if (lws_service(s.ctx, 0) < 0) {
            rc = AF_EIO;
            break;
        }
    }
    lws_sul_schedule(s.ctx, 0, &s.sul, check_stop, LWS_SET_TIMER_USEC_CANCEL);
    if (opt->tls_cert_file)
        lws_sul_schedule(s.ctx, 0, &s.tls_sul, tls_check, LWS_SET_TIMER_USEC_CANCEL);
    lws_context_destroy(s.ctx);
    SSL_CTX_free(s.tls_ctx);
    AF_LOG(AF_LOG_INFO, "stopped serving", NULL);
    return rc;
}
