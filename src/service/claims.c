/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The claim worker: one share, whichever replica answers (docs/rollouts.md). The webhook
 * parks an admission review whose pod is a new unit of a rollout (mutate.c); this thread
 * takes the parked reviews in batches and commits them to the claim ledger in the API
 * server (src/kube/claims.c): it absorbs the ledger's entries (every replica's recent
 * decisions) into the rollouts' memory, decides each unit counting them, and writes the
 * ledger with the new entries under optimistic concurrency. A conflict undoes the batch's
 * decisions and decides again from the ledger read again, so decisions are serialized by
 * the API server and each one counts every decision committed before it, on any replica.
 *
 * The answer goes back through the transport's mailbox (struct af_deferred) only after the
 * write succeeded; when the ledger cannot be written before the claim's deadline (the API
 * server down or slow), the unit keeps the side decided locally, the answer carries a
 * warning that the share may drift, and it is counted (af_claims_stats, /metrics). The HTTP
 * thread never waits for any of it.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "accelfit/kube.h"
#include "accelfit/rollout_state.h"

#include "service/internal.h"

#define CLAIMS_BATCH 64       /* reviews committed in one write at most */
#define CLAIMS_MAX AF_ROLLOUT_CLAIMS_MAX   /* ledger entries kept at most (the newest) */

struct af_claims {
    struct af_service *svc;
    struct af_kube_claims *kc;
    double timeout_s;
    char replica[24];         /* this process's part of every entry id */
    uint64_t seq;             /* worker only */
    pthread_t thread;
    pthread_mutex_t lock;     /* guards what follows */
    pthread_cond_t cond;
    bool stop;
    struct af__mutate_job *head, **tail;
    _Atomic uint64_t written, local, conflicts;
};

struct batch {
    struct af_claims *c;
    struct af__mutate_job *jobs[CLAIMS_BATCH];
    size_t n;
};

static int claim_cmp_at(const void *a, const void *b)
{
    const struct af_rollout_claim *x = a, *y = b;

    return (x->at > y->at) - (x->at < y->at);
}

/* ops.next: absorb the ledger, decide the batch, the ledger to write. */
static size_t batch_next(void *ud, const struct af_rollout_claim *v, size_t n,
                         struct af_rollout_claim **out)
{
    struct batch *b = ud;
    struct af_claims *c = b->c;
    bool *keep = af_xcalloc(n + 1, sizeof(*keep));
    struct af_rollout_claim *w = af_xcalloc(n + b->n + 1, sizeof(*w));
    size_t m = 0;

    af_rollouts_absorb_claims(c->svc->rollouts, v, n, af_wall_time(), keep);
    for (size_t i = 0; i < n; i++)
        if (keep[i])
            w[m++] = v[i];
    for (size_t i = 0; i < b->n; i++) {
        struct af__mutate_job *j = b->jobs[i];
        snprintf(j->id, sizeof(j->id), "%s-%llu", c->replica, (unsigned long long)++c->seq);
        af__mutate_claim_decide(c->svc, j);
        if (j->claimed)
            w[m++] = j->claim;
    }
    if (m > CLAIMS_MAX) {   /* the oldest go first */
        qsort(w, m, sizeof(*w), claim_cmp_at);
        memmove(w, w + (m - CLAIMS_MAX), CLAIMS_MAX * sizeof(*w));
        m = CLAIMS_MAX;
    }
    af_free(keep);
    *out = w;
    return m;
}

/* ops.undo: the write was refused; forget the batch's decisions. */
static void batch_undo(void *ud)
{
    struct batch *b = ud;

    atomic_fetch_add(&b->c->conflicts, 1);
    for (size_t i = 0; i < b->n; i++)
        if (b->jobs[i]->claimed)
            af_rollouts_unclaim(b->c->svc->rollouts, b->jobs[i]->id);
}

/* Answers the job through its mailbox and frees it. */
static void answer(struct af__mutate_job *j, bool local)
{
    struct af_buf out = AF_BUF_INIT(0);
    int status;

    if (local)
        af_warnings_add(&j->w, "accelfit: the rollout's claim could not be written to the API "
                               "server in time; the side was decided by this replica alone and "
                               "the rollout's share may drift");
    status = af__mutate_answer(j->a, &j->patch, &j->w, &out);
    j->later.done(j->later.ud, j->later.ticket, status, &out);   /* steals out */
    af_buf_release(&j->patch);
    af_admission_free(j->a);
    af_free(j);
}

static void run_batch(struct af_claims *c, struct batch *b)
{
    struct af_kube_claims_ops ops = {b, batch_next, batch_undo};
    double left = c->timeout_s - (double)(af_now_ns() - b->jobs[0]->t0) / 1e9;
    int rc = left > 0.05 ? af_kube_claims_commit(c->kc, &ops, left) : AF_ETIMEDOUT;

    for (size_t i = 0; i < b->n; i++) {
        struct af__mutate_job *j = b->jobs[i];
        if (!j->decided)   /* the ledger was never read: decided here alone */
            af__mutate_local_decide(c->svc, j);
        if (rc == 0) {
            atomic_fetch_add(&c->written, j->claimed);
        } else {
            atomic_fetch_add(&c->local, 1);
            AF_LOG(AF_LOG_WARN, "rollout claim not written: decided locally", "error",
                   af_strerror(rc), NULL);
        }
        answer(j, rc != 0);
    }
}

static void *worker_main(void *arg)
{
    struct af_claims *c = arg;

    for (;;) {
        struct batch b;
        bool stop;

        memset(&b, 0, sizeof(b));
        b.c = c;
        pthread_mutex_lock(&c->lock);
        while (!c->stop && !c->head)
            pthread_cond_wait(&c->cond, &c->lock);
        while (c->head && b.n < CLAIMS_BATCH) {
            b.jobs[b.n++] = c->head;
            c->head = c->head->next;
        }
        if (!c->head)
            c->tail = &c->head;
        stop = c->stop;
        pthread_mutex_unlock(&c->lock);
        if (b.n && !stop) {
            run_batch(c, &b);
            continue;
        }
        for (size_t i = 0; i < b.n; i++) {   /* stopping: answer locally */
            af__mutate_local_decide(c->svc, b.jobs[i]);
            answer(b.jobs[i], true);
        }
        if (stop && !b.n)
            break;
    }
    return NULL;
}

void af__claims_enqueue(struct af_claims *c, struct af__mutate_job *job)
{
    job->next = NULL;
    pthread_mutex_lock(&c->lock);
    *c->tail = job;
    c->tail = &job->next;
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

struct af_claims *af_claims_start(struct af_service *svc, struct af_kube_claims *kc,
                                  double timeout_s)
{
    struct af_claims *c = af_xcalloc(1, sizeof(*c));
    uint64_t h = af_now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)time(NULL);

    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    c->svc = svc;
    c->kc = kc;
    c->timeout_s = timeout_s;
    snprintf(c->replica, sizeof(c->replica), "r%08llx", (unsigned long long)(h & 0xffffffffull));
    c->tail = &c->head;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cond, NULL);
    pthread_create(&c->thread, NULL, worker_main, c);
    return c;
}

void af_claims_stop(struct af_claims *c)
{
    if (!c)
        return;
    pthread_mutex_lock(&c->lock);
    c->stop = true;
    pthread_cond_broadcast(&c->cond);
    pthread_mutex_unlock(&c->lock);
    pthread_join(c->thread, NULL);
    af_kube_claims_free(c->kc);
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cond);
    af_free(c);
}

void af_claims_stats(struct af_claims *c, struct af_claims_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (!c)
        return;
    out->written = atomic_load(&c->written);
    out->local = atomic_load(&c->local);
    out->conflicts = atomic_load(&c->conflicts);
}
