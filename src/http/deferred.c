/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Deferred answers: a request whose answer a worker thread finishes (the webhook's claim
 * of a new unit in the API server, src/service/claims.c) without the one lws service
 * thread waiting for it, so that filter and prioritize calls keep flowing meanwhile.
 *
 * The service gets a struct af_deferred naming the server's mailbox and a ticket. The
 * worker's done() puts the answer in the mailbox under its lock and wakes lws
 * (lws_cancel_service, the one lws call other threads may make); on the service thread,
 * LWS_CALLBACK_EVENT_WAIT_CANCELLED drains the mailbox and sends each answer to the
 * transaction still parked under its ticket. A transaction leaves the registry of parked
 * ones whenever its state is reset (af__http_pss_reset: answered, or its connection
 * closed, which lws 4.1.6 reports as LWS_CALLBACK_CLOSED_HTTP or HTTP_DROP_PROTOCOL), so an
 * answer whose connection went away finds no ticket and is dropped: no wsi is touched
 * after lws freed it (test_connection_closed_while_deferred_is_safe, tests/check_http.c).
 *
 * The mailbox is reference-counted (the server, and each answer still to come): a worker
 * that finishes after the server stopped finds it closed and drops its answer. A parked
 * transaction is dropped after PARK_TIMEOUT_S should no answer come.
 */
#include <string.h>

#include "http/internal.h"
#include "accelfit/banned.h"

#define TIMEOUT_PARKED (PENDING_TIMEOUT_USER_REASON_BASE + 2)
#define PARK_TIMEOUT_S 30

struct done {
    struct done *next;
    uint64_t ticket;
    int status;
    struct af_buf body;
};

struct mailbox {
    pthread_mutex_t lock;
    /* protected by ->lock */
    int refs;                     /* the server's, and one per answer still to come */
    bool open;                    /* false once the server stopped */
    struct lws_context *ctx;      /* woken when an answer comes */
    struct done *head, **tail;
};

struct parked {
    uint64_t ticket;
    struct lws *wsi;
    struct pss *p;
};

static void mailbox_unref_locked(struct mailbox *mb, bool *last)
{
    af_assert_held(&mb->lock);
    *last = --mb->refs == 0;
}

static void mailbox_free(struct mailbox *mb)
{
    while (mb->head) {
        struct done *d = mb->head;
        mb->head = d->next;
        af_buf_release(&d->body);
        af_free(d);
    }
    pthread_mutex_destroy(&mb->lock);
    af_free(mb);
}

/* af_deferred.done: any thread. */
static void mailbox_done(void *ud, uint64_t ticket, int status, struct af_buf *body)
{
    struct mailbox *mb = ud;
    bool last;

    pthread_mutex_lock(&mb->lock);
    if (mb->open) {
        struct done *d = af_xcalloc(1, sizeof(*d));
        d->ticket = ticket;
        d->status = status;
        d->body = *body;
        memset(body, 0, sizeof(*body));
        *mb->tail = d;
        mb->tail = &d->next;
        if (mb->ctx)
            lws_cancel_service(mb->ctx);   /* under the lock: the context outlives `open` */
    }
    mailbox_unref_locked(mb, &last);
    pthread_mutex_unlock(&mb->lock);
    af_buf_release(body);
    if (last)
        mailbox_free(mb);
}

void af__http_deferred_init(struct server *s)
{
    struct mailbox *mb = af_xcalloc(1, sizeof(*mb));

    pthread_mutex_init(&mb->lock, NULL);
    mb->refs = 1;
    mb->open = true;
    mb->tail = &mb->head;
    s->mb = mb;
}

void af__http_deferred_release(struct server *s)
{
    struct mailbox *mb = s->mb;
    bool last;

    if (!mb)
        return;
    pthread_mutex_lock(&mb->lock);
    mb->open = false;
    mb->ctx = NULL;
    mailbox_unref_locked(mb, &last);
    pthread_mutex_unlock(&mb->lock);
    if (last)
        mailbox_free(mb);
    s->mb = NULL;
}

void af__http_deferred_prepare(struct server *s, struct af_deferred *later)
{
    pthread_mutex_lock(&s->mb->lock);
    s->mb->refs++;
    s->mb->ctx = s->ctx;
    pthread_mutex_unlock(&s->mb->lock);
    later->done = mailbox_done;
    later->ud = s->mb;
    later->ticket = ++s->next_ticket;
}

void af__http_deferred_unused(struct server *s, const struct af_deferred *later)
{
    bool last;

    (void)later;
    pthread_mutex_lock(&s->mb->lock);
    mailbox_unref_locked(s->mb, &last);   /* the server's own reference remains */
    pthread_mutex_unlock(&s->mb->lock);
    af_assert(!last);
}

void af__http_park(struct server *s, struct lws *wsi, struct pss *p,
                   const struct af_deferred *later)
{
    AF_GROW(s->parked, s->cap_parked, s->n_parked + 1);
    s->parked[s->n_parked].ticket = later->ticket;
    s->parked[s->n_parked].wsi = wsi;
    s->parked[s->n_parked++].p = p;
    p->ticket = later->ticket;
    p->srv = s;
    af_buf_release(&p->body);
    lws_set_timeout(wsi, TIMEOUT_PARKED, PARK_TIMEOUT_S);
    /* Nothing is read while the answer is parked: libwebsockets would offer bytes pipelined
     * behind the request again on every pass of the loop, which then never sleeps. They
     * are read once the answer is given (deliver), and close the connection after it. */
    if (!p->h2)
        lws_rx_flow_control(wsi, 0);
}

void af__http_unpark(struct pss *p)
{
    struct server *s = p->srv;

    for (size_t i = 0; s && i < s->n_parked; i++) {
        if (s->parked[i].ticket != p->ticket)
            continue;
        s->parked[i] = s->parked[--s->n_parked];
        break;
    }
    p->ticket = 0;
    p->srv = NULL;
}

/* The answer to the transaction parked under `d->ticket`, if it is still there. */
static void deliver(struct server *s, struct done *d)
{
    struct lws *wsi = NULL;
    struct pss *p = NULL;
    int rc;

    for (size_t i = 0; i < s->n_parked; i++) {
        if (s->parked[i].ticket == d->ticket) {
            wsi = s->parked[i].wsi;
            p = s->parked[i].p;
            break;
        }
    }
    if (!p) {
        AF_LOG(AF_LOG_DEBUG, "deferred answer dropped: its connection closed", NULL);
        return;
    }
    af__http_unpark(p);
    lws_set_timeout(wsi, NO_PENDING_TIMEOUT, 0);
    if (!p->h2)
        lws_rx_flow_control(wsi, 1);
    af__http_resp_begin(s, p);
    if (af_buf_add(&p->resp, d->body.buf ? d->body.buf : "", d->body.len) != 0)
        rc = af__http_respond_error(s, wsi, p, 500, "deferred answer too large");
    else
        rc = af__http_respond(s, wsi, p, d->status, "application/json");
    if (rc < 0)
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC);
}

void af__http_deferred_drain(struct server *s)
{
    struct done *d;

    if (!s->mb)
        return;
    pthread_mutex_lock(&s->mb->lock);
    d = s->mb->head;
    s->mb->head = NULL;
    s->mb->tail = &s->mb->head;
    pthread_mutex_unlock(&s->mb->lock);
    while (d) {
        struct done *next = d->next;
        deliver(s, d);
        af_buf_release(&d->body);
        af_free(d);
        d = next;
    }
}
