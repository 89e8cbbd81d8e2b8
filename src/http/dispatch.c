/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requests into calls of the one service interface (accelfit/http.h): the route
 * and method decided by connection.c, the query string and the body in; the
 * service's status and body out, through respond.c. Nothing here decides
 * anything about a pod; the handlers live in src/service/ and know no transport.
 *
 * libwebsockets 4.1.6 hands out the query string split at '&', each piece
 * %-decoded; the service reads every query with one parser (af_query_parse), so
 * the pieces are encoded and joined again here (query_string). Test:
 * test_every_route_reads_its_query_one_way (tests/check_http.c); what lws refuses
 * before this code runs (a bad %-escape) is in
 * test_bad_percent_escape_is_refused_by_libwebsockets.
 */
#include <malloc.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/budget.h"
#include "accelfit/codec.h"
#include "http/internal.h"
#include "accelfit/banned.h"

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
    char *frag, e_probe[2];
    int ok = 0;

    if (lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS) <= 0)
        return af_xstrdup("");   /* no query: what every extender call sends */
    frag = af_xmalloc(AF_HTTP_MAX_URI + 1);

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

#define HTTP_ANSWER_RESERVE_MAX (64 * 1024)

/* "GET /explain": the route as messages about its query name it. */
static void route_name(const struct pss *p, char *out, size_t n)
{
    snprintf(out, n, "%s /%s", p->method == M_POST ? "POST" : "GET",
             p->route == R_ROLLOUT_ACK ? "rollouts/ack" : af__http_route_verb_name(p->route));
}

/* Routes that take no query parameters: 0, or the 400 already answered (a parameter). */
static int no_query(struct server *s, struct lws *wsi, struct pss *p, const char *q, int *rc)
{
    char where[64];
    int status;

    if (!*q)
        return 0;   /* nothing to check, and nothing to name */
    route_name(p, where, sizeof(where));
    af__http_resp_begin(s, p);
    status = af_service_check_query(where, q, &p->resp);
    if (status)
        *rc = af__http_respond(s, wsi, p, status, "application/json");
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
        af__http_resp_text(s, p, "ok\n");
        return af__http_respond(s, wsi, p, 200, "text/plain; charset=utf-8");
    case R_READYZ:
        if (no_query(s, wsi, p, q, &rc))
            return rc;
        af__http_resp_begin(s, p);
        return af__http_respond(s, wsi, p, af_service_readyz(svc, &p->resp),
                                "text/plain; charset=utf-8");
    case R_METRICS:
        if (no_query(s, wsi, p, q, &rc))
            return rc;
        af__http_resp_begin(s, p);
        if (af_service_render_metrics(svc, &p->resp) != 0)
            return af__http_respond_error(s, wsi, p, 500, "metrics too large");
        return af__http_respond(s, wsi, p, 200, "text/plain; version=0.0.4; charset=utf-8");
    case R_EXPLAIN:
        af__http_resp_begin(s, p);
        return af__http_respond(s, wsi, p, af_service_explain_query(svc, q, &p->resp),
                                "application/json");
    case R_RECOMMEND:
        af__http_resp_begin(s, p);
        return af__http_respond(s, wsi, p, af_service_recommend(svc, q, NULL, 0, &p->resp),
                                "application/json");
    case R_ROLLOUTS:
        if (no_query(s, wsi, p, q, &rc))
            return rc;
        af__http_resp_begin(s, p);
        return af__http_respond(s, wsi, p, af_service_rollouts(svc, &p->resp), "application/json");
    case R_COSTS:
        if (no_query(s, wsi, p, q, &rc))
            return rc;
        af__http_resp_begin(s, p);
        return af__http_respond(s, wsi, p, af_service_costs(svc, &p->resp), "application/json");
    default:
        break;
    }
    return af__http_respond_error(s, wsi, p, 404, "not found");
}

static int answer_post(struct server *s, struct lws *wsi, struct pss *p, const char *q)
{
    int verb = af__http_route_verb(p->route), status, rc = 0;
    const char *body = p->body.buf ? p->body.buf : "";
    size_t values = af_codec_json_values(body, p->body.len);

    /* refused before a tree is built: a body of mostly brackets costs far more than its size */
    if (values > af__http_max_values(p->body.len)) {
        char msg[192];

        snprintf(msg, sizeof(msg),
                 "request body holds %zu JSON values in %zu bytes; at most %zu are read "
                 "(one per %d bytes, plus %d)",
                 values, p->body.len, af__http_max_values(p->body.len),
                 HTTP_BODY_BYTES_PER_VALUE, HTTP_BODY_FREE_VALUES);
        return af__http_respond_error(s, wsi, p, 413, msg);
    }

    switch (p->route) {
    case R_RECOMMEND:
        af__http_resp_begin(s, p);
        return af__http_respond(s, wsi, p,
                                af_service_recommend(s->svc, q, body, p->body.len, &p->resp),
                                "application/json");
    case R_MUTATE: {
        /* The API server adds ?timeout=5s; only the body matters, so the query is not read.
         * The handler may rewind its buffer to answer without a patch, so it gets one of its
         * own. */
        struct af_buf answer = AF_BUF_INIT(s->max_response);
        struct af_deferred later;

        af__http_deferred_prepare(s, &later);
        status = af_webhook_mutate_deferred(s->svc, body, p->body.len, &answer, &later);
        if (status == AF_WEBHOOK_DEFERRED) {
            /* a new unit's side is being claimed: the answer comes through `later` */
            af_buf_release(&answer);
            af__http_park(s, wsi, p, &later);
            return 0;
        }
        af__http_deferred_unused(s, &later);
        af__http_resp_begin(s, p);
        if (af_buf_add(&p->resp, answer.buf ? answer.buf : "", answer.len) != 0) {
            af_buf_release(&answer);
            return af__http_respond_error(s, wsi, p, 500, "admission answer too large");
        }
        af_buf_release(&answer);
        return af__http_respond(s, wsi, p, status, "application/json");
    }
    case R_ROLLOUT_ACK:
        af__http_resp_begin(s, p);
        return af__http_respond(s, wsi, p, af_service_rollout_ack_query(s->svc, q, &p->resp),
                                "application/json");
    default:
        break;
    }

    if (no_query(s, wsi, p, q, &rc))   /* the extender verbs take everything in the body */
        return rc;
    af__http_resp_begin(s, p);
    /* The answer in one allocation, most times: at 100 candidates a filter answer is about
     * twice the names' bytes (their reasons), up to a bound so that a Nodes-mode body (3 kB
     * a node, a short answer) does not reserve its own size again. */
    size_t answer = p->body.len * 2 + 4096;
    af_buf_reserve(&p->resp, answer < HTTP_ANSWER_RESERVE_MAX ? answer : HTTP_ANSWER_RESERVE_MAX);
    status = af_service_handle_stats(s->svc, (enum af_verb)verb, p->body.buf ? p->body.buf : "",
                                     p->body.len, &p->resp, &p->st);
    return af__http_respond(s, wsi, p, status, "application/json");
}

/* Everything is known (headers, and the body if any): answer. */
int af__http_dispatch(struct server *s, struct lws *wsi, struct pss *p)
{
    if (p->pending_status == 404)
        return af__http_respond_error(s, wsi, p, 404, "not found");
    if (p->pending_status == 405)
        return af__http_respond_error(s, wsi, p, 405, "method not allowed");
    char *q = query_string(wsi);
    int rc = p->method == M_POST ? answer_post(s, wsi, p, q) : answer_get(s, wsi, p, q);

    af_free(q);
    /* the tree of a large body is freed by now: give its pages back rather than keep them */
    if (p->body.len > HTTP_TRIM_AFTER_BODY)
        malloc_trim(0);
    return rc;
}

int af__http_too_big(struct server *s, struct lws *wsi, struct pss *p)
{
    char msg[128];

    snprintf(msg, sizeof(msg), "request body exceeds %zu bytes", af__http_route_max_body(s, p->route));
    p->discard = true;
    p->close_after = true;   /* the rest of the body is never read... */
    p->linger = !p->h2;      /* ...but dropped for a moment, so the client reads this answer */
    return af__http_respond_error(s, wsi, p, 413, msg);
}
