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
 *
 * Reserves: so that most new units need no write at all, the worker keeps one side claimed
 * ahead per rollout (a reserve, af_rollout_claim.reserve), written with the batch that
 * needed it or on its own. The webhook gives the reserve to the next new anonymous unit of
 * that rollout and answers at once (mutate.c), and the worker claims the next reserve in
 * the background. Every replica counts a reserve as a unit decided, so the decisions stay
 * the ones a single replica makes, in the ledger's order; only the reserves no pod has taken
 * yet (one per replica) make the difference (docs/rollouts.md). A reserve not taken within
 * AF_ROLLOUT_RESERVE_LEASE_S, or that its pod could not take, is given back: its entry is
 * rewritten as released, which ends it on every replica, and so is every reserve a stopping
 * replica holds.
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

#include "accelfit/banned.h"

#define CLAIMS_BATCH 64       /* reviews committed in one write at most */
#define CLAIMS_MAX AF_ROLLOUT_CLAIMS_MAX   /* ledger entries kept at most (the newest) */
#define CLAIMS_RESERVES 64    /* rollouts this replica keeps a reserve for at most */
#define CLAIMS_STOP_S 1.0     /* a stopping replica's last write: its reserves given back */
#define BLOCK_MAX AF_ROLLOUT_RESERVE_BLOCK_MAX

/* The reserves this replica holds of one rollout: a block claimed in one write, taken
 * oldest first, so that those left are always one run of the ledger's order. */
struct reserve {
    char rollout[64];
    uint64_t generation;
    double at;                /* wall clock of its claim */
    char id[BLOCK_MAX][48];
    size_t head, n;           /* the oldest left, how many are left */
};

/* How many reserves the next block of a rollout holds (rollout_state.h). */
struct pace {
    char rollout[64];
    size_t block;
};

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
    struct reserve held[CLAIMS_RESERVES];   /* written, no pod took them yet */
    size_t n_held;
    struct pace pace[CLAIMS_RESERVES];
    size_t n_pace;
    char want[CLAIMS_RESERVES][64];         /* rollouts whose reserve was taken: claim one */
    size_t n_want;
    struct af_rollout_claim *gone;          /* reserves to give back with the next write */
    size_t n_gone, cap_gone;
    _Atomic uint64_t written, local, conflicts, reserved, ahead, writes;
};

struct batch {
    struct af_claims *c;
    struct af__mutate_job *jobs[CLAIMS_BATCH];
    size_t n;
    char want[CLAIMS_RESERVES][64];         /* rollouts to claim a reserve of */
    size_t n_want;
    struct af_rollout_claim *gone;          /* owned: given back by this write */
    size_t n_gone;
    struct af_rollout_claim *made;   /* owned: the reserves this attempt claimed */
    size_t n_made;
};

static void want_add(char (*v)[64], size_t *n, const char *rollout)
{
    for (size_t i = 0; i < *n; i++)
        if (!strcmp(v[i], rollout))
            return;
    if (*n < CLAIMS_RESERVES)
        snprintf(v[(*n)++], 64, "%s", rollout);
}

/* Whether this replica holds a reserve of `rollout` (under c->lock). */
static bool holds(const struct af_claims *c, const char *rollout)
{
    for (size_t i = 0; i < c->n_held; i++)
        if (!strcmp(c->held[i].rollout, rollout))
            return true;
    return false;
}

/* The size of the next block of `rollout` (under c->lock). */
static size_t pace_get_locked(const struct af_claims *c, const char *rollout)
{
    for (size_t i = 0; i < c->n_pace; i++)
        if (!strcmp(c->pace[i].rollout, rollout))
            return c->pace[i].block;
    return AF_ROLLOUT_RESERVE_BLOCK;
}

/* A block of `rollout` of `size` reserves ended: used up after `lasted` seconds, or given
 * back unused (lasted < 0). The next is twice or half as large (under c->lock). */
static void pace_note_locked(struct af_claims *c, const char *rollout, size_t size,
                             double lasted)
{
    size_t next = size, i;

    if (lasted >= 0 && lasted < AF_ROLLOUT_RESERVE_FAST_S)
        next = size * 2 < BLOCK_MAX ? size * 2 : BLOCK_MAX;
    else if (lasted < 0 || lasted > 4 * AF_ROLLOUT_RESERVE_FAST_S)
        next = size / 2 > AF_ROLLOUT_RESERVE_BLOCK ? size / 2 : AF_ROLLOUT_RESERVE_BLOCK;
    for (i = 0; i < c->n_pace && strcmp(c->pace[i].rollout, rollout); i++)
        ;
    if (i == c->n_pace) {
        if (c->n_pace == CLAIMS_RESERVES)
            return;
        snprintf(c->pace[c->n_pace++].rollout, sizeof(c->pace[0].rollout), "%s", rollout);
    }
    c->pace[i].block = next;
}

static void give_back_locked(struct af_claims *c, size_t i);

/* Block i is past its lease: given back, and the next block of its rollout is smaller
 * (under c->lock). */
static void lease_over_locked(struct af_claims *c, size_t i)
{
    pace_note_locked(c, c->held[i].rollout, c->held[i].head + c->held[i].n, -1);
    give_back_locked(c, i);
}

/* Reserve `id` to be given back with the next write (under c->lock). */
static void give_back_id_locked(struct af_claims *c, const char *rollout, const char *id,
                                uint64_t generation)
{
    struct af_rollout_claim *g;

    AF_GROW(c->gone, c->cap_gone, c->n_gone + 1);
    g = &c->gone[c->n_gone++];
    memset(g, 0, sizeof(*g));
    snprintf(g->id, sizeof(g->id), "%s", id);
    snprintf(g->rollout, sizeof(g->rollout), "%s", rollout);
    g->generation = generation;
    g->reserve = true;
    g->released = true;
    af_rollouts_release(c->svc->rollouts, id);
}

/* Every reserve of block i to be given back with the next write (under c->lock). */
static void give_back_locked(struct af_claims *c, size_t i)
{
    struct reserve *r = &c->held[i];

    for (size_t k = 0; k < r->n; k++)
        give_back_id_locked(c, r->rollout, r->id[r->head + k], r->generation);
    c->held[i] = c->held[--c->n_held];
}

bool af__claims_take(struct af_claims *c, const char *rollout, char *id, size_t id_size,
                     uint64_t *generation)
{
    double now = af_wall_time();
    bool got = false;

    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n_held; i++) {
        if (strcmp(c->held[i].rollout, rollout))
            continue;
        if (now - c->held[i].at < AF_ROLLOUT_RESERVE_LEASE_S) {
            struct reserve *r = &c->held[i];
            snprintf(id, id_size, "%s", r->id[r->head++]);
            *generation = r->generation;
            if (--r->n == 0) {
                pace_note_locked(c, rollout, r->head, now - r->at);
                c->held[i] = c->held[--c->n_held];
            }
            got = true;
        } else {
            lease_over_locked(c, i);
        }
        break;
    }
    /* The next block is claimed once this one is used up (none left: the reserves this
     * replica holds stay one run of the ledger, docs/rollouts.md). */
    if (!holds(c, rollout)) {
        want_add(c->want, &c->n_want, rollout);
        pthread_cond_signal(&c->cond);
    }
    pthread_mutex_unlock(&c->lock);
    return got;
}

void af__claims_count_ahead(struct af_claims *c)
{
    atomic_fetch_add(&c->ahead, 1);
}

void af__claims_give_back(struct af_claims *c, const char *rollout, const char *id,
                          uint64_t generation)
{
    pthread_mutex_lock(&c->lock);
    give_back_id_locked(c, rollout, id, generation);
    /* and the rest of its block, claimed under the same conditions (a share, a brake) */
    for (size_t i = 0; i < c->n_held; i++)
        if (!strcmp(c->held[i].rollout, rollout)) {
            give_back_locked(c, i);
            break;
        }
    pthread_cond_signal(&c->cond);
    pthread_mutex_unlock(&c->lock);
}

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
    /* room for a block of reserves per rollout wanted, and per unit of the batch (each may
     * want its rollout's) */
    struct af_rollout_claim *w = af_xcalloc(
        n + b->n + b->n_gone + (b->n_want + b->n) * BLOCK_MAX + 1, sizeof(*w));
    size_t m = 0;

    af_rollouts_absorb_claims(c->svc->rollouts, v, n, af_wall_time(), keep);
    for (size_t i = 0; i < n; i++) {
        bool given_back = false;
        for (size_t g = 0; g < b->n_gone && !given_back; g++)
            given_back = !strcmp(b->gone[g].id, v[i].id);
        if (keep[i] && !given_back)
            w[m++] = v[i];
    }
    for (size_t g = 0; g < b->n_gone; g++) {
        w[m] = b->gone[g];
        w[m++].at = af_wall_time();
    }
    for (size_t i = 0; i < b->n; i++) {
        struct af__mutate_job *j = b->jobs[i];
        snprintf(j->id, sizeof(j->id), "%s-%llu", c->replica, (unsigned long long)++c->seq);
        af__mutate_claim_decide(c->svc, j);
        if (j->claimed) {
            w[m++] = j->claim;
            want_add(b->want, &b->n_want, j->claim.rollout);
        }
    }
    /* The reserves, after the batch's units: the newest decisions of the ledger, each
     * counting those before it. */
    b->n_made = 0;
    if (b->n_want) {
        struct af_config *cfg = af_config_holder_get(c->svc->config);
        struct af_snapshot *snap = af_publisher_acquire(c->svc->pub);
        af_free(b->made);
        b->made = af_xcalloc(b->n_want * BLOCK_MAX + 1, sizeof(*b->made));
        for (size_t i = 0; cfg && snap && i < b->n_want; i++) {
            size_t block;
            bool held;

            pthread_mutex_lock(&c->lock);
            held = holds(c, b->want[i]);
            block = pace_get_locked(c, b->want[i]);
            pthread_mutex_unlock(&c->lock);
            for (size_t k = 0; !held && k < block; k++) {
                struct af_rollout_claim *r = &b->made[b->n_made];
                char id[48];

                snprintf(id, sizeof(id), "%s-%llu", c->replica, (unsigned long long)++c->seq);
                if (!af_rollouts_reserve(c->svc->rollouts, cfg, snap, b->want[i],
                                         af_wall_time(), id, r))
                    break;
                w[m++] = *r;
                b->n_made++;
            }
        }
        af_snapshot_unref(snap);
        af_config_unref(cfg);
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
    for (size_t i = 0; i < b->n_made; i++)
        af_rollouts_unclaim(b->c->svc->rollouts, b->made[i].id);
    b->n_made = 0;
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

static void run_batch(struct af_claims *c, struct batch *b, double timeout_s)
{
    struct af_kube_claims_ops ops = {b, batch_next, batch_undo};
    double left = b->n ? c->timeout_s - (double)(af_now_ns() - b->jobs[0]->t0) / 1e9
                       : timeout_s;
    int rc = left > 0.05 ? af_kube_claims_commit(c->kc, &ops, left) : AF_ETIMEDOUT;

    if (rc == 0)
        atomic_fetch_add(&c->writes, 1);

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
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < b->n_made; i++) {
        struct reserve *r = NULL;
        if (rc != 0) {   /* perhaps written: given back with the next write */
            give_back_id_locked(c, b->made[i].rollout, b->made[i].id, b->made[i].generation);
            continue;
        }
        atomic_fetch_add(&c->reserved, 1);
        /* one block per rollout: want_add and holds() saw to it; made[] is in order */
        for (size_t h = 0; h < c->n_held && !r; h++)
            if (!strcmp(c->held[h].rollout, b->made[i].rollout))
                r = &c->held[h];
        if (!r) {
            r = &c->held[c->n_held++];
            memset(r, 0, sizeof(*r));
            snprintf(r->rollout, sizeof(r->rollout), "%s", b->made[i].rollout);
            r->generation = b->made[i].generation;
            r->at = b->made[i].at;
        }
        if (r->head + r->n < BLOCK_MAX)
            snprintf(r->id[r->head + r->n++], sizeof(r->id[0]), "%s", b->made[i].id);
    }
    if (rc != 0) {   /* the reserves to give back wait for the next write */
        for (size_t g = 0; g < b->n_gone; g++) {
            AF_GROW(c->gone, c->cap_gone, c->n_gone + 1);
            c->gone[c->n_gone++] = b->gone[g];
        }
    }
    pthread_mutex_unlock(&c->lock);
    af_free(b->gone);
    af_free(b->made);
    b->gone = NULL;
    b->made = NULL;
    b->n_gone = b->n_made = 0;
}

/* Under c->lock: what the next batch writes besides its reviews (reserves wanted, given
 * back), moved to `b`; reserves past their lease are given back first. */
static void batch_take_work(struct af_claims *c, struct batch *b, double now)
{
    for (size_t i = c->n_held; i-- > 0;)
        if (now - c->held[i].at >= AF_ROLLOUT_RESERVE_LEASE_S)
            lease_over_locked(c, i);
    b->n_want = 0;
    for (size_t i = 0; i < c->n_want; i++)
        if (!holds(c, c->want[i]))
            snprintf(b->want[b->n_want++], sizeof(b->want[0]), "%s", c->want[i]);
    c->n_want = 0;
    b->gone = c->gone;
    b->n_gone = c->n_gone;
    c->gone = NULL;
    c->n_gone = c->cap_gone = 0;
}

static void *worker_main(void *arg)
{
    struct af_claims *c = arg;

    for (;;) {
        struct batch b;
        bool stop;
        struct timespec until;

        memset(&b, 0, sizeof(b));
        b.c = c;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;   /* a reserve's lease is checked every second */
        pthread_mutex_lock(&c->lock);
        while (!c->stop && !c->head && !c->n_want && !c->n_gone) {
            bool stale = false;
            for (size_t i = 0; i < c->n_held; i++)
                stale |= af_wall_time() - c->held[i].at >= AF_ROLLOUT_RESERVE_LEASE_S;
            if (stale)
                break;
            if (pthread_cond_timedwait(&c->cond, &c->lock, &until)) {
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += 1;
            }
        }
        while (c->head && b.n < CLAIMS_BATCH) {
            b.jobs[b.n++] = c->head;
            c->head = c->head->next;
        }
        if (!c->head)
            c->tail = &c->head;
        stop = c->stop;
        if (stop) {   /* every reserve held is given back by the last write */
            while (c->n_held)
                give_back_locked(c, 0);
            c->n_want = 0;
        }
        batch_take_work(c, &b, af_wall_time());
        pthread_mutex_unlock(&c->lock);
        if (!stop) {
            /* A review queued while its rollout's reserve was on its way takes it now
             * rather than claim a unit behind it (docs/rollouts.md: the bound). */
            size_t k = 0;
            for (size_t i = 0; i < b.n; i++) {
                if (af__mutate_try_reserve(c->svc, b.jobs[i]))
                    answer(b.jobs[i], false);
                else
                    b.jobs[k++] = b.jobs[i];
            }
            b.n = k;
        }
        if (!stop && (b.n || b.n_want || b.n_gone)) {
            run_batch(c, &b, c->timeout_s);
            continue;
        }
        for (size_t i = 0; i < b.n; i++) {   /* stopping: answer locally */
            af__mutate_local_decide(c->svc, b.jobs[i]);
            answer(b.jobs[i], true);
        }
        b.n = 0;
        if (stop) {
            if (b.n_gone)
                run_batch(c, &b, CLAIMS_STOP_S);
            af_free(b.gone);
            pthread_mutex_lock(&c->lock);
            bool more = c->head != NULL;
            pthread_mutex_unlock(&c->lock);
            if (!more)
                break;
            continue;
        }
        af_free(b.gone);
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
    af_free(c->gone);
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
    out->writes = atomic_load(&c->writes);
    out->reserved = atomic_load(&c->reserved);
    out->ahead = atomic_load(&c->ahead);
}
