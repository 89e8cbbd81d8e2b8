/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The census of one snapshot under one policy: each unit's side, the target
 * pods the brake watches (with the clock of their readiness) and the nodes of
 * the target classes, worked out once per published snapshot and held with a
 * reference on both; and what a new census settles among the decisions not yet
 * seen in the cache.
 */
#include <stdlib.h>
#include <string.h>

#include "rollouts/internal.h"
#include "accelfit/banned.h"

/* ---- the census of one snapshot ------------------------------------------------------------ */

static bool class_in(uint32_t mask, enum af_class c)
{
    return c > AF_CLASS_UNKNOWN && c < AF_CLASS__COUNT && (mask & (1u << c));
}

/* The position of the unit of `key` (hash h), or SIZE_MAX. */
static size_t census_lookup(const struct census *c, const char *key, uint32_t h)
{
    size_t walk = af_index_start(&c->ix, h);
    uint32_t i;

    while (af_index_next(&c->ix, h, &walk, &i))
        if (!strcmp(c->units[i].key, key))
            return i;
    return SIZE_MAX;
}

const struct unit *af__rollouts_census_find(const struct census *c, const char *key)
{
    size_t i = census_lookup(c, key, af__rollouts_hash_str(key));

    return i == SIZE_MAX ? NULL : &c->units[i];
}

/* The unit of `key` (arena string), added with no side when new. */
static struct unit *census_unit(struct census *c, const char *key, int rollout)
{
    uint32_t h = af__rollouts_hash_str(key);
    size_t i = census_lookup(c, key, h);

    if (i != SIZE_MAX)
        return &c->units[i];
    c->units[c->n_units] = (struct unit){key, rollout, AF_SIDE_NONE, false};
    af_index_add(&c->ix, h, c->n_units);
    return &c->units[c->n_units++];
}

/* The side a pod shows: its annotation, else the class of the node it is bound to. */
static enum af_rollout_side pod_side(const struct af_rollout *r, const struct af_pod_info *pod,
                                     const struct af_snapshot *snap)
{
    const struct af_node_view *v;

    if (pod->rollout_side && !strcmp(pod->rollout_side, "target"))
        return AF_SIDE_TARGET;
    if (pod->rollout_side && !strcmp(pod->rollout_side, "source"))
        return AF_SIDE_SOURCE;
    if (!pod->node_name || !*pod->node_name || !snap)
        return AF_SIDE_NONE;
    v = af_snapshot_find_node(snap, pod->node_name);
    if (!v)
        return AF_SIDE_NONE;
    if (class_in(r->target, v->info->cls))
        return AF_SIDE_TARGET;
    if (class_in(r->source, v->info->cls))
        return AF_SIDE_SOURCE;
    return AF_SIDE_NONE;
}

static int readiness_cmp(const void *a, const void *b)
{
    return strcmp(((const struct readiness *)a)->key, ((const struct readiness *)b)->key);
}

/*
 * The NotReady clock of each target pod. A pod this process saw Ready and now sees
 * NotReady has been NotReady since that census; one never seen Ready counts from its
 * start (a pod that never became Ready is what the brake is for), so a long-running
 * pod's readiness blip does not look like ten minutes of failure.
 */
static void census_readiness(struct af_rollouts *rs, struct census *c, double now)
{
    size_t n = 0, k = 0;
    struct readiness *next;

    for (size_t i = 0; i < c->n_r; i++)
        n += c->r[i].n_tpods;
    next = af_xcalloc(n + 1, sizeof(*next));
    for (size_t i = 0; i < c->n_r; i++) {
        struct crollout *cr = &c->r[i];
        for (size_t j = 0; j < cr->n_tpods; j++) {
            const struct af_pod_info *p = cr->tpods[j];
            struct readiness key, *old, *e = &next[k++];
            e->key = af_xasprintf("%s/%s/%s", p->ns ? p->ns : "", p->name ? p->name : "",
                                  p->uid ? p->uid : "");
            key.key = e->key;
            old = rs->n_ready ? bsearch(&key, rs->ready, rs->n_ready, sizeof(key), readiness_cmp)
                              : NULL;
            e->was_ready = p->ready;
            if (!p->ready)
                e->since = old ? (old->was_ready ? now : old->since) : 0;
            cr->tsince[j] = e->since;
        }
    }
    qsort(next, k, sizeof(*next), readiness_cmp);
    af__rollouts_readiness_free(rs->ready, rs->n_ready);
    rs->ready = next;
    rs->n_ready = k;
}

static int cmp_claim(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether a pod of the census names ledger entry `id` (the pod of that decision is seen). */
bool af__rollouts_census_has_claim(const struct census *c, const char *id)
{
    return c->n_claims && bsearch(&id, c->claims, c->n_claims, sizeof(*c->claims), cmp_claim);
}

static void census_build(struct af_rollouts *rs, struct census *c, const struct af_config *cfg,
                         const struct af_snapshot *snap, double now)
{
    const struct af_policy *pol = cfg->policy;
    size_t nm = snap ? snap->n_managed : 0;
    int *which;
    enum af_rollout_side *side;

    memset(c, 0, sizeof(*c));   /* the arena too: AF_ARENA_INIT is all zeros */
    c->cfg = af_config_ref((struct af_config *)cfg);
    c->snap = af_snapshot_ref((struct af_snapshot *)snap);
    c->n_r = pol ? pol->n_rollouts : 0;
    c->r = af_arena_alloc(&c->ar, (c->n_r + 1) * sizeof(*c->r));
    for (size_t i = 0; i < c->n_r; i++)
        c->r[i].track = af__rollouts_track_sync(rs, &pol->rollouts[i], now);
    c->units = af_xmalloc((nm + 1) * sizeof(*c->units));
    af_index_init(&c->ix, nm, NULL);
    c->claims = af_xmalloc((nm + 1) * sizeof(*c->claims));
    if (!snap || !c->n_r)
        return;

    /* The nodes of each rollout's target classes. */
    for (size_t i = 0; i < c->n_r; i++) {
        struct crollout *cr = &c->r[i];
        uint32_t mask = pol->rollouts[i].target;
        for (size_t n = 0; n < snap->n_nodes; n++)
            cr->n_tnodes += class_in(mask, snap->nodes[n].info->cls);
        cr->tnodes = af_arena_alloc(&c->ar, (cr->n_tnodes + 1) * sizeof(*cr->tnodes));
        cr->n_tnodes = 0;
        for (size_t n = 0; n < snap->n_nodes; n++)
            if (class_in(mask, snap->nodes[n].info->cls))
                cr->tnodes[cr->n_tnodes++] = &snap->nodes[n];
    }

    /* The managed pods: each one's rollout and side, its unit's side, the target pods. */
    which = af_arena_alloc(&c->ar, (nm + 1) * sizeof(*which));
    side = af_arena_alloc(&c->ar, (nm + 1) * sizeof(*side));
    for (size_t m = 0; m < nm; m++) {
        const struct af_pod_info *p = snap->managed[m];
        const struct af_rollout *r;
        char unit[160], *key;
        struct unit *u;

        which[m] = af_rollout_match(pol, p);
        if (which[m] < 0)
            continue;
        r = &pol->rollouts[which[m]];
        side[m] = pod_side(r, p, snap);
        if (p->rollout_claim && *p->rollout_claim && side[m] != AF_SIDE_NONE)
            c->claims[c->n_claims++] = p->rollout_claim;
        if (side[m] == AF_SIDE_TARGET)
            c->r[which[m]].n_tpods++;
        /* A finished Job took its share; a Deployment's Failed replica is replaced. */
        if (af__rollouts_anonymous(p) || (p->terminal && !(p->job_name && *p->job_name)))
            continue;
        af_rollout_unit(p, unit, sizeof(unit));
        key = af__rollouts_key_write(
            af_arena_alloc_uninit(&c->ar, af__rollouts_key_size(r->name, p->ns, unit)), r->name,
            p->ns, unit);
        u = census_unit(c, key, which[m]);
        /* a unit with pods on both sides counts on the target */
        if (side[m] == AF_SIDE_TARGET || u->side == AF_SIDE_NONE)
            u->side = side[m];
        u->claimed |= p->rollout_claim && *p->rollout_claim;
    }
    if (c->n_claims)
        qsort(c->claims, c->n_claims, sizeof(*c->claims), cmp_claim);
    for (size_t i = 0; i < c->n_r; i++) {
        struct crollout *cr = &c->r[i];
        cr->tpods = af_arena_alloc(&c->ar, (cr->n_tpods + 1) * sizeof(*cr->tpods));
        cr->tsince = af_arena_alloc(&c->ar, (cr->n_tpods + 1) * sizeof(*cr->tsince));
        cr->n_tpods = 0;
    }
    for (size_t m = 0; m < nm; m++)
        if (which[m] >= 0 && side[m] == AF_SIDE_TARGET) {
            struct crollout *cr = &c->r[which[m]];
            cr->tpods[cr->n_tpods++] = snap->managed[m];
        }
    for (size_t u = 0; u < c->n_units; u++) {
        struct crollout *cr = &c->r[c->units[u].rollout];
        cr->target += c->units[u].side == AF_SIDE_TARGET;
        cr->source += c->units[u].side == AF_SIDE_SOURCE;
    }
    census_readiness(rs, c, now);
    /* The brake looks at every target pod on every decision: keep only those that could
     * hold it back (Failed, restarted, not Ready). A healthy pod can fail none of its
     * conditions; when it turns, the snapshot changes and a new census sees it. */
    for (size_t i = 0; i < c->n_r; i++) {
        struct crollout *cr = &c->r[i];
        size_t k = 0;
        for (size_t j = 0; j < cr->n_tpods; j++) {
            const struct af_pod_info *p = cr->tpods[j];
            if (!(p->failed || p->restarts > 0 || !p->ready))
                continue;
            cr->tsince[k] = cr->tsince[j];
            cr->tpods[k++] = p;
        }
        cr->n_tpods = k;
    }
}

/* The pending decision of `key` (NULL: none). */
struct pending *af__rollouts_pending_find(struct af_rollouts *rs, const char *key)
{
    for (size_t i = 0; i < rs->n_pending; i++)
        if (rs->pending[i].key && !strcmp(rs->pending[i].key, key))
            return &rs->pending[i];
    return NULL;
}

/*
 * What a new census settles: named decisions whose unit now shows a side are done;
 * each unit of a side that `next` shows and `prev` did not, and that no named
 * decision explains, is taken to be the pod of the oldest anonymous decision of its
 * rollout and side (the webhook decided it before the pod had a name).
 */
static void pending_settle(struct af_rollouts *rs, const struct census *prev,
                           const struct census *next)
{
    bool anon = false;

    /* a decision whose pod names its ledger entry is seen, named or not */
    for (size_t i = rs->n_pending; i-- > 0;)
        if (rs->pending[i].claim && af__rollouts_census_has_claim(next, rs->pending[i].claim))
            af__rollouts_pending_remove(rs, i);
    for (size_t i = 0; i < rs->n_pending; i++)
        anon |= rs->pending[i].key == NULL;
    for (size_t u = 0; anon && prev && u < next->n_units; u++) {
        const struct unit *nu = &next->units[u];
        const struct unit *pu = af__rollouts_census_find(prev, nu->key);
        const char *name = next->cfg->policy->rollouts[nu->rollout].name;
        size_t oldest = (size_t)-1;

        if (nu->side == AF_SIDE_NONE || (pu && pu->side != AF_SIDE_NONE) || nu->claimed ||
            af__rollouts_pending_find(rs, nu->key))
            continue;   /* a claimed unit settles its own entry, above */
        for (size_t i = 0; i < rs->n_pending; i++) {
            const struct pending *e = &rs->pending[i];
            if (!e->key && e->side == nu->side && !strcmp(e->rollout, name) &&
                (oldest == (size_t)-1 || e->decided < rs->pending[oldest].decided))
                oldest = i;
        }
        if (oldest != (size_t)-1)
            af__rollouts_pending_remove(rs, oldest);
    }
    for (size_t i = rs->n_pending; i-- > 0;) {
        const struct unit *nu =
            rs->pending[i].key ? af__rollouts_census_find(next, rs->pending[i].key) : NULL;
        if (nu && nu->side != AF_SIDE_NONE)
            af__rollouts_pending_remove(rs, i);
    }
}

void af__rollouts_pending_expire(struct af_rollouts *rs, double now)
{
    for (size_t i = rs->n_pending; i-- > 0;)
        if (now - rs->pending[i].used >
            (rs->pending[i].reserve ? AF_ROLLOUT_RESERVE_TTL_S : AF_ROLLOUT_PENDING_TTL_S))
            af__rollouts_pending_remove(rs, i);
}

/*
 * Makes rs->census the census of (cfg, snap). The census it replaces goes to `old`, for
 * the caller to release once it has dropped the lock: that may be the last reference on
 * a snapshot of 150,000 pods.
 */
void af__rollouts_census_ensure(struct af_rollouts *rs, const struct af_config *cfg,
                                const struct af_snapshot *snap, double now, struct census *old)
{
    struct census next;

    if (rs->have_census && rs->census.snap == snap && rs->census.cfg == cfg)
        return;
    /* A request still holding the config a reload replaced is answered from its own
     * census, but does not make the state forget the newer policy's rollouts. */
    if (rs->have_census && rs->census.cfg != cfg &&
        cfg->generation >= rs->census.cfg->generation)
        af__rollouts_tracks_prune(rs, cfg->policy);
    census_build(rs, &next, cfg, snap, now);
    pending_settle(rs, rs->have_census ? &rs->census : NULL, &next);
    if (rs->have_census)
        *old = rs->census;
    rs->census = next;
    rs->have_census = true;
}
