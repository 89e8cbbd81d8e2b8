/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sending the answer. The contract: an h1 answer (status line, headers, body) goes
 * out in one lws_write, since a response split over two TCP writes can stall ~40 ms
 * on a delayed ACK while a kube-scheduler waits on every call (BENCHMARKS.md); the
 * request's line is logged and its status counted in the metrics as it goes. The h2
 * paths (headers, then the body in DATA frames within the peer's window, from the
 * writeable callback) are kept for an lws whose h2 request bodies are reliable (ALPN
 * offers http/1.1 only; see make_vhost, server.c).
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
 * request without a body, as input buffered in lws; connection.c notices
 * both), the answer carries "Connection: close" and the connection is closed
 * after it. The client retries the rest on a new connection; clients that wait
 * for each answer keep their connection. (The price: a client that half-closes
 * right after a request with a body may get no answer, as lws closes on that
 * end of input before the answer is written.) Tests:
 * test_pipelined_requests_never_wedge_the_server (tests/check_http.c) and the
 * pipelining and half-closing clients of tests/check_clients.c.
 *
 * Also worked around here: lws 4.1.6 knows no reason phrase for 431 and would
 * send an empty one, so that status line is written by hand
 * (test_431_names_its_reason, tests/check_http.c); and the h1 Content-Length is
 * written as a plain header so lws does no length accounting of its own, which a
 * HEAD answer (the headers of GET, not one body byte) relies on
 * (test_head_answers_like_get_without_a_body, tests/check_http.c).
 */
#include <stdio.h>
#include <string.h>

#include "http/internal.h"
#include "accelfit/banned.h"

#define HDR_ROOM 512                      /* response headers are built in this much */
#define RESERVE (LWS_PRE + HDR_ROOM)      /* kept free in front of every response body */
#define H2_CHUNK 16384                    /* default SETTINGS_MAX_FRAME_SIZE */

static const char zeros[RESERVE];

static void pss_release(struct pss *p)
{
    af_buf_release(&p->body);
    af_buf_release(&p->resp);
}

void af__http_pss_reset(struct pss *p)
{
    if (p->ticket)
        af__http_unpark(p);
    if (p->sul_armed)
        lws_sul_schedule(p->ctx, 0, &p->sul, NULL, LWS_SET_TIMER_USEC_CANCEL);
    pss_release(p);
    memset(p, 0, sizeof(*p));
}

/* Starts the response buffer: RESERVE bytes for headers, then the body is appended. */
void af__http_resp_begin(struct server *s, struct pss *p)
{
    af_buf_release(&p->resp);
    af_buf_init(&p->resp, s->max_response + RESERVE);
    if (af_buf_add(&p->resp, zeros, RESERVE) != 0)
        af_assert(!"response reserve");
}

void af__http_resp_text(struct server *s, struct pss *p, const char *text)
{
    af__http_resp_begin(s, p);
    if (af_buf_puts(&p->resp, text) != 0)
        AF_LOG(AF_LOG_ERROR, "cannot build response", NULL);
}

static void log_request(struct server *s, struct pss *p)
{
    uint64_t ns = af_now_ns() - p->t0;
    char status[16], dur[32], cand[16], passed[16];
    int verb = af__http_route_verb(p->route);
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
    AF_LOG(lvl, "request", "verb", af__http_route_verb_name(p->route), "pod", p->st.pod,
           "status", status, "duration", dur, "candidates", cand, "passed", passed, "proto",
           p->h2 ? "h2" : "http/1.1",
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
int af__http_send_h1(struct server *s, struct lws *wsi, struct pss *p)
{
    unsigned char hdr[HDR_ROOM], *hp = hdr;
    unsigned char *body = (unsigned char *)p->resp.buf + RESERVE;
    size_t blen = p->resp.len - RESERVE, hlen;
    bool close_after, linger;

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
               af__http_route_verb_name(p->route), NULL);
        p->close_after = true;
    }
    close_after = p->close_after;
    linger = p->linger;

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
    af__http_pss_reset(p);
    if (close_after)
        return linger ? af__http_linger(wsi, p) : -1;
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/* h2: headers first, then DATA frames as the peer's window allows. */
int af__http_send_h2(struct server *s, struct lws *wsi, struct pss *p)
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
    af__http_pss_reset(p);
    return lws_http_transaction_completed(wsi) ? -1 : 0;
}

/*
 * h1: the answer is due, at the start of the service pass after the one that read the
 * request, before lws polls (see respond.c). By then lws has put any bytes that followed
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
    if (af__http_send_h1(s, wsi, p) < 0)
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
}

/* The response in p->resp is complete: send it (h1 now or next pass, h2 when writeable). */
int af__http_respond(struct server *s, struct lws *wsi, struct pss *p, int status,
                     const char *ctype)
{
    p->status = status;
    p->ctype = ctype;
    p->responded = true;
    af_buf_release(&p->body);
    /* An answer that closes the connection anyway can go now (see respond.c). */
    if (!p->h2 && p->close_after)
        return af__http_send_h1(s, wsi, p);
    lws_callback_on_writable(wsi);
    if (!p->h2 && !p->sul_armed) {
        p->wsi = wsi;
        p->ctx = lws_get_context(wsi);
        p->sul_armed = true;
        lws_sul_schedule(p->ctx, 0, &p->sul, answer_due, 0);
    }
    return 0;
}

int af__http_respond_error(struct server *s, struct lws *wsi, struct pss *p, int status,
                         const char *msg)
{
    char text[512];

    snprintf(text, sizeof(text), "{\"error\":\"%s\"}\n", msg);
    af__http_resp_text(s, p, text);
    return af__http_respond(s, wsi, p, status, "application/json");
}
