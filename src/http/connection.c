/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The connection state machine: the lws callback of the "http" protocol. Each
 * transaction (each stream on h2) has its state in a struct pss that lws zeroes when
 * the wsi binds: a request begins at LWS_CALLBACK_HTTP (route, method, limits,
 * Content-Length), its body is read into a buffer capped at --max-body, and once it
 * is complete dispatch.c answers it; LWS_CALLBACK_HTTP_WRITEABLE sends (respond.c).
 * Accepted sockets get TCP_NODELAY (see respond.c for why latency rules).
 *
 * Untrusted input is bounded: a Content-Length over --max-body is answered 413 at
 * once (and the connection closed, since the body is not read), a body that grows
 * past it likewise, and a client that sends headers and then trickles the body is
 * dropped after --read-timeout seconds (test_body_over_max_body_is_413,
 * test_slow_sender_is_dropped, test_idle_keepalive_connection_survives_the_read_timeout,
 * tests/check_http.c). A connection closed with input unread makes the kernel answer
 * with a reset, which can discard the 413 before a client still sending has read it;
 * so, as nginx's lingering close and Go's net/http do, the connection first reads and
 * drops the rest for up to HTTP_LINGER_S (test_client_still_sending_reads_its_413).
 *
 * What libwebsockets 4.1.6 does that this file works around:
 * - It cannot read a chunked request body: one is answered 411 at once, before
 *   its chunks are parsed as headers, and the connection closed
 *   (test_chunked_request_body_is_411_at_once, tests/check_http.c).
 * - It follows LWS_CALLBACK_HTTP of a "Content-Length: 0" POST with an empty body
 *   and its completion of its own, which must not read as a pipelined request
 *   (the empty filter of test_pipelined_requests_never_wedge_the_server).
 * - It offers the bytes that follow a request before its answer is out, as a
 *   repeated HTTP_BODY_COMPLETION or more body; such a connection is answered with
 *   "Connection: close" (the pipelining workaround of respond.c, and its tests).
 * - It does not answer "Expect: 100-continue", so a client waiting for leave to
 *   send its body would wait; this file answers it (the Expect client of
 *   tests/check_clients.c).
 * - It asks before an Upgrade (websocket, h2c) and, for one it does not know, has
 *   already answered 403 and let go of the headers: accelfit refuses every upgrade
 *   with 400 JSON, or hangs up after lws's 403 (the upgrading clients of
 *   tests/check_clients.c).
 * - It accepts a client certificate OpenSSL could not verify against
 *   --client-ca-file unless told otherwise: OpenSSL's verdict is passed through
 *   (test_client_ca_requires_a_client_certificate, tests/check_http.c).
 * - On h2 it does not say whether a request without a length ends its stream with
 *   the headers or with an empty DATA frame after them: such a request waits for
 *   the end of the stream or H2_EMPTY_BODY_WAIT_US (h2 is not offered by ALPN while
 *   lws 4.1.6 stalls h2 bodies, so no test reaches it; see make_vhost, server.c).
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "http/internal.h"
#include "accelfit/banned.h"

#define TIMEOUT_BODY (PENDING_TIMEOUT_USER_REASON_BASE + 1)
#define H2_EMPTY_BODY_WAIT_US (20 * LWS_US_PER_MS)

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

/* An h2 request without a length whose stream has not ended yet: assume no body. */
static void empty_body_due(lws_sorted_usec_list_t *sul)
{
    struct pss *p = lws_container_of(sul, struct pss, sul);
    struct server *s = lws_context_user(p->ctx);

    struct lws *wsi = p->wsi;   /* an answer sent at once resets *p */

    p->sul_armed = false;
    if (!p->active || p->responded || p->body.len || p->discarded)
        return;
    if (af__http_dispatch(s, wsi, p) < 0)
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

    af__http_pss_reset(p);
    p->active = true;
    p->t0 = af_now_ns();
    p->h2 = lws_get_network_wsi(wsi) != wsi;
    p->health = s->health_vh && lws_get_vhost(wsi) == s->health_vh;
    p->method = get_method(wsi);
    p->route = af__http_match_route(s, path ? path : "", p->health);
    p->st.candidates = -1;
    p->st.passed = -1;

    /* lws truncated the field and skipped the rest of its line: answer, and drop what follows. */
    if (af__http_uri_too_long(wsi)) {
        char msg[96];
        snprintf(msg, sizeof(msg), "request URI exceeds %d bytes", AF_HTTP_MAX_URI);
        p->close_after = true;
        return af__http_respond_error(s, wsi, p, 414, msg);
    }
    {
        int t = af__http_field_too_long(wsi);
        if (t >= 0) {
            char name[64], msg[160];
            af__http_token_name(t, name, sizeof(name));
            snprintf(msg, sizeof(msg), "header %s exceeds %d bytes", name, AF_HTTP_MAX_FIELD);
            p->close_after = true;
            return af__http_respond_error(s, wsi, p, 431, msg);
        }
    }
    if (lws_hdr_copy(wsi, clbuf, (int)sizeof(clbuf), WSI_TOKEN_HTTP_CONTENT_LENGTH) > 0 &&
        af_parse_int64(clbuf, 0, INT64_MAX, &cl) != 0) {
        p->close_after = true;
        return af__http_respond_error(s, wsi, p, 400, "bad Content-Length");
    }
    if (!p->h2 && lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_TRANSFER_ENCODING) > 0) {
        /* lws 4.1.6 cannot read a chunked body: refuse it now, before it is parsed as headers. */
        p->close_after = true;
        return af__http_respond_error(
            s, wsi, p, 411, "chunked request bodies are not supported; send Content-Length");
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

    if (cl > 0 && (uint64_t)cl > af__http_route_max_body(s, p->route))
        return af__http_too_big(s, wsi, p);

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
        return af__http_dispatch(s, wsi, p);

    if (p->pending_status || p->method != M_POST)
        p->discard = true;
    else {
        af_buf_init(&p->body, af__http_route_max_body(s, p->route));
        if (cl > 0)   /* h2 may send no length: then the body grows as it comes */
            af_buf_reserve(&p->body, (size_t)cl);   /* at most the limit, checked above */
    }
    p->deadline = p->t0 + s->read_timeout_ns;
    lws_set_timeout(wsi, TIMEOUT_BODY, (int)(s->read_timeout_ns / 1000000000ull));
    return p->h2 ? 0 : send_continue(wsi);
}

static int on_body(struct server *s, struct lws *wsi, struct pss *p, const void *in, size_t len)
{
    uint64_t now = af_now_ns();

    if (!p->active || p->responded || p->ticket)
        return 0;   /* after a 413 on h2, or while the answer is deferred: drop the rest */
    if (now >= p->deadline) {
        AF_LOG(AF_LOG_WARN, "dropping slow client", "verb", af__http_route_verb_name(p->route),
               NULL);
        return -1;
    }
    /* lws may re-arm its own timeouts on data; ours counts from the headers. */
    lws_set_timeout(wsi, TIMEOUT_BODY, (int)((p->deadline - now + 999999999ull) / 1000000000ull));
    if (p->discard) {
        p->discarded += len;
        if (p->discarded > af__http_route_max_body(s, p->route))
            return af__http_too_big(s, wsi, p);
        return 0;
    }
    if (af_buf_add(&p->body, in, len) != 0)
        return af__http_too_big(s, wsi, p);
    return 0;
}

/*
 * lws offers input for after the answer still to be sent (see respond.c): the
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
        if (!af__http_is_tchar((unsigned char)*c) && *c != '/')
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

int af__http_linger(struct lws *wsi, struct pss *p)
{
    p->lingering = true;
    p->deadline = af_now_ns() + HTTP_LINGER_S * 1000000000ull;
    lws_set_timeout(wsi, TIMEOUT_BODY, HTTP_LINGER_S);
    return 0;
}

/* Input while lingering: dropped, until the whole body came (closed then) or time is up. */
static int linger_input(struct lws *wsi, struct pss *p, bool complete)
{
    uint64_t now = af_now_ns();

    if (complete || now >= p->deadline)
        return -1;
    /* lws may re-arm its own timeouts on data; the linger counts from the answer. */
    lws_set_timeout(wsi, TIMEOUT_BODY, (int)((p->deadline - now + 999999999ull) / 1000000000ull));
    return 0;
}

/* ---- the lws callback ---------------------------------------------------------------------------------- */

int af__http_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                    size_t len)
{
    struct lws_context *ctx = lws_get_context(wsi);
    struct server *s = ctx ? lws_context_user(ctx) : NULL;
    struct pss *p = user;

    switch (reason) {
    case LWS_CALLBACK_OPENSSL_LOAD_EXTRA_SERVER_VERIFY_CERTS:
        /* `user` is the API vhost's SSL_CTX, made by lws: reloads hook into it. */
        if (s && user && !s->lws_ssl_ctx)
            af__http_tls_hook(s, user);
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
        if (!s || !p || p->lingering)
            return -1;
        return begin_request(s, wsi, p, in);
    case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
        if (s)
            af__http_deferred_drain(s);
        return 0;
    case LWS_CALLBACK_HTTP_BODY:
        if (!s || !p)
            return -1;
        if (p->lingering)
            return linger_input(wsi, p, false);
        if (len && p->active && (p->responded || p->ticket) && !p->h2 && !p->close_after)
            pipelined_input(s, wsi, p);
        return on_body(s, wsi, p, in, len);
    case LWS_CALLBACK_HTTP_BODY_COMPLETION:
        if (!s || !p)
            return -1;
        if (p->lingering)
            return linger_input(wsi, p, true);
        if (p->active && (p->responded || p->ticket) && !p->h2 && !p->zero_post) {
            /*
             * The body was complete already: lws offers more input, which
             * can only be a pipelined request (see respond.c). Not so the one
             * completion lws reports itself after a "Content-Length: 0" POST.
             */
            pipelined_input(s, wsi, p);
            return 0;
        }
        p->zero_post = false;
        if (p->ticket)
            return 0;   /* the answer is deferred, and its timeout set */
        lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
        if (!p->active || p->responded)
            return 0;
        /* lws reports an empty h2 body complete before a trailing empty DATA frame. */
        if (p->sul_armed && !p->body.len && !p->discarded)
            return 0;
        return af__http_dispatch(s, wsi, p);
    case LWS_CALLBACK_HTTP_CONFIRM_UPGRADE:
        return refuse_upgrade(wsi);
    case LWS_CALLBACK_HTTP_WRITEABLE:
        if (!s || !p || !p->active || !p->responded)
            return 0;
        return p->h2 ? af__http_send_h2(s, wsi, p) : af__http_send_h1(s, wsi, p);
    case LWS_CALLBACK_CLOSED_HTTP:
    case LWS_CALLBACK_HTTP_DROP_PROTOCOL:
        if (p)
            af__http_pss_reset(p);
        return 0;
    default:
        break;
    }
    return lws_callback_http_dummy(wsi, reason, user, in, len);
}
