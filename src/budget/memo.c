/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The tenants' costs memo (accelfit/budget.h): the costs of one snapshot under
 * one config are computed once (af_costs_compute, in the core) and kept in a
 * small mutex-guarded memo with references on both, so requests between two
 * cache changes share them. The memo also keeps the hard budgets' charges not
 * yet seen in a snapshot (accelfit/inflight.h, inflight.c).
 */
#include "accelfit/budget.h"

#include <pthread.h>

#include "accelfit/inflight.h"
#include "accelfit/banned.h"

/* ---- the memo ------------------------------------------------------------------------------------ */

/* One computed pair: the costs of `snap` under `cfg`, with a reference on each. */
struct memo_entry {
    struct af_snapshot *snap;
    struct af_config *cfg;
    struct af_costs *costs;
};

/*
 * The pair last computed and the one before it: a request that took the current snapshot
 * just before a publish (and the warm-up, which installs the next pair first) still finds
 * its pair, rather than computing it again and pushing out the newer one.
 */
struct af_costs_memo {
    pthread_mutex_t lock;
    struct memo_entry cur, prev;   /* protected by ->lock */
    struct af_inflight *inflight;  /* hard budgets' charges not yet seen; its own lock */
};

struct af_costs_memo *af_costs_memo_new(void)
{
    struct af_costs_memo *m = af_xcalloc(1, sizeof(*m));

    pthread_mutex_init(&m->lock, NULL);
    m->inflight = af_inflight_new();
    return m;
}

static void entry_release(struct memo_entry *e)
{
    af_costs_unref(e->costs);
    af_snapshot_unref(e->snap);
    af_config_unref(e->cfg);
}

void af_costs_memo_free(struct af_costs_memo *m)
{
    if (!m)
        return;
    entry_release(&m->cur);
    entry_release(&m->prev);
    af_inflight_free(m->inflight);
    pthread_mutex_destroy(&m->lock);
    af_free(m);
}

static struct af_costs *compute(struct af_config *cfg, struct af_snapshot *snap)
{
    return af_costs_compute(cfg ? cfg->policy : NULL, snap ? snap->nodes : NULL,
                            snap ? snap->n_nodes : 0, snap ? snap->pods : NULL,
                            snap ? snap->n_pods : 0);
}

/* Under ->lock: the memo's costs of the pair (borrowed), or NULL. */
static struct af_costs *memo_find(struct af_costs_memo *m, struct af_config *cfg,
                                  struct af_snapshot *snap)
{
    if (m->cur.costs && m->cur.snap == snap && m->cur.cfg == cfg)
        return m->cur.costs;
    if (m->prev.costs && m->prev.snap == snap && m->prev.cfg == cfg)
        return m->prev.costs;
    return NULL;
}

/* Under ->lock: `c` (stolen) becomes the current pair, the current one the previous; the
 * pair pushed out goes to *out, released by the caller once the lock is dropped. */
static void memo_put(struct af_costs_memo *m, struct af_config *cfg, struct af_snapshot *snap,
                     struct af_costs *c, struct memo_entry *out)
{
    *out = m->prev;
    m->prev = m->cur;
    m->cur.costs = c;
    m->cur.snap = af_snapshot_ref(snap);
    m->cur.cfg = cfg ? af_config_ref(cfg) : NULL;
}

struct af_costs *af_costs_memo_get(struct af_costs_memo *m, struct af_config *cfg,
                                   struct af_snapshot *snap)
{
    struct memo_entry out = {0};
    struct af_costs *c;

    if (!m)
        return compute(cfg, snap);
    /* Computed under the lock: two requests after one change compute once, not twice. */
    pthread_mutex_lock(&m->lock);
    c = memo_find(m, cfg, snap);
    if (!c) {
        c = compute(cfg, snap);
        memo_put(m, cfg, snap, c, &out);
    }
    c = af_costs_ref(c);
    pthread_mutex_unlock(&m->lock);
    entry_release(&out);
    return c;
}

void af_costs_memo_warm(struct af_costs_memo *m, struct af_config *cfg, struct af_snapshot *snap)
{
    struct memo_entry out = {0};
    struct af_costs *c;
    bool have;

    if (!m || !snap)
        return;
    pthread_mutex_lock(&m->lock);
    have = memo_find(m, cfg, snap) != NULL;
    pthread_mutex_unlock(&m->lock);
    if (have)
        return;
    c = compute(cfg, snap);   /* unlocked: requests on the current snapshot find theirs */
    pthread_mutex_lock(&m->lock);
    if (memo_find(m, cfg, snap))
        out.costs = c;   /* a request got there first */
    else
        memo_put(m, cfg, snap, c, &out);
    pthread_mutex_unlock(&m->lock);
    entry_release(&out);
}

struct af_inflight *af_costs_memo_inflight(struct af_costs_memo *m)
{
    return m ? m->inflight : NULL;
}
