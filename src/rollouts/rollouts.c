/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a running accelfit remembers about rollouts (include/accelfit/rollout_state.h):
 * the units it decided and has not yet seen in its cache, when each rollout
 * began, the brake (halts, their reasons, the pods forgiven by an
 * acknowledgment), and when it saw each target pod turn NotReady.
 *
 * The API server stays the shared state. Every count starts from the cache:
 * the managed pods of the snapshot (af_snapshot.managed), each unit on the
 * side its pods' rollout-side annotation, or their node's class, says. What a
 * snapshot tells (units per side, the target pods the brake watches, the
 * nodes of the target classes for the room check) is worked out once per
 * snapshot and policy, in a "census" that holds a reference on both, so a
 * filter call does not walk the managed pods again. The decisions kept in
 * memory only bridge the time until the cache shows their pods with a side.
 *
 * One mutex guards everything: decisions are short, and the census is rebuilt
 * at most once per published snapshot.
 *
 * What replicas must agree on (when each rollout began, its halt, its
 * acknowledgement, the pods acknowledgements forgave) is also a record per rollout
 * (af_rollout_record) that the API server keeps (src/kube/state.c): every change
 * here calls the observer, which only wakes the thread that writes it, and every
 * version the API server sends is merged in (af_rollouts_absorb), so an ack on one
 * replica releases the brake on the others and a restart resumes the stage.
 */
#include "accelfit/rollout_state.h"

#include "accelfit/decide.h"
#include "accelfit/placement.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "accelfit/banned.h"

/* ---- small helpers ------------------------------------------------------------------------ */

static uint32_t hash_str(const char *s)
{
    return af_fnv32_str(AF_FNV32_INIT, s);
}

static bool class_in(uint32_t mask, enum af_class c)
{
    return c > AF_CLASS_UNKNOWN && c < AF_CLASS__COUNT && (mask & (1u << c));
}

/* A unit of one rollout, unique across namespaces: "rollout\x1fnamespace/Job/NAME". */
static char *unit_key(const char *rollout, const char *ns, const char *unit)
{
    return af_xasprintf("%s\x1f%s/%s", rollout, ns ? ns : "", unit);
}

static bool anonymous(const struct af_pod_info *pod)
{
    return !(pod->job_name && *pod->job_name) && !(pod->name && *pod->name);
}

/* ---- the policy's rollout, hashed: a change begins it again ---------------------------- */

static uint64_t mix_str(uint64_t h, const char *s)
{
    /* NULL and "" differ; the terminator separates fields */
    return s ? af_fnv64(h, s, strlen(s) + 1) : af_fnv64(h, "\xff", 1);
}

static uint64_t mix_pairs(uint64_t h, const struct af_pair *v, size_t n)
{
    h = af_fnv64(h, &n, sizeof(n));
    for (size_t i = 0; i < n; i++)
        h = mix_str(mix_str(h, v[i].key), v[i].value);
    return h;
}

static uint64_t rollout_hash(const struct af_rollout *r)
{
    uint64_t h = AF_FNV64_INIT;
    int fb = (int)r->fallback;

    h = mix_str(h, r->name);
    h = mix_str(h, r->ns);
    h = mix_pairs(h, r->match_labels, r->n_match_labels);
    h = mix_str(mix_str(h, r->owner_kind), r->owner_name);
    h = af_fnv64(af_fnv64(h, &r->source, sizeof(r->source)), &r->target, sizeof(r->target));
    h = af_fnv64(h, &r->share, sizeof(r->share));
    h = af_fnv64(h, &r->n_stages, sizeof(r->n_stages));
    for (size_t i = 0; i < r->n_stages; i++)
        h = af_fnv64(h, &r->stages[i], sizeof(r->stages[i]));
    h = af_fnv64(h, &fb, sizeof(fb));
    h = af_fnv64(h, &r->brake_not_ready_s, sizeof(r->brake_not_ready_s));
    h = af_fnv64(h, &r->brake_restarts, sizeof(r->brake_restarts));
    h = af_fnv64(h, &r->brake_on_failed, sizeof(r->brake_on_failed));
    if (r->variant) {
        const struct af_variant *v = r->variant;
        h = mix_pairs(h, v->images, v->n_images);
        h = mix_pairs(h, v->resources, v->n_resources);
        h = mix_pairs(h, v->env, v->n_env);
        h = mix_pairs(h, v->annotations, v->n_annotations);
        if (v->n_claim_templates)   /* only then: the hash of a rollout without them stays */
            h = mix_pairs(h, v->claim_templates, v->n_claim_templates);
        h = af_fnv64(h, &v->n_tolerations, sizeof(v->n_tolerations));
        for (size_t i = 0; i < v->n_tolerations; i++) {
            const struct af_toleration *t = &v->tolerations[i];
            h = mix_str(mix_str(mix_str(mix_str(h, t->key), t->op), t->value), t->effect);
        }
    } else {
        h = af_fnv64(h, "placement", 9);
    }
    return h;
}

/* ---- state -------------------------------------------------------------------------------- */

/* A target pod the brake holds against the rollout, or forgave. */
struct culprit {
    char *key;                  /* "namespace/name" */
    int restarts;               /* when it was seen failing */
};

struct culprits {
    struct culprit *v;
    size_t n, cap;
};

/* One rollout of the policy, by name. */
struct track {
    char *name;
    uint64_t hash;                      /* of the policy's fields */
    double began;
    bool halted;                        /* halted_at > acked_at */
    char halt_reason[AF_REASON_MAX];
    char halt_pod[256];                 /* "namespace/name" of the first culprit */
    double halted_at, acked_at;         /* 0: never */
    uint64_t fallbacks;
    bool forgive_next;                  /* the policy changed: who fails now is forgiven */
    struct culprits culprits;           /* target pods failing at the last evaluation */
    struct culprits forgiven;           /* acknowledged */
};

/* A unit decided and not yet seen with a side. */
struct pending {
    char *rollout;                      /* name */
    char *key;                          /* unit_key(); NULL: anonymous */
    enum af_rollout_side side;
    bool fallback;
    double decided, used;               /* `now` of the decision, of its last use */
    char *claim;                        /* its entry in the claim ledger; NULL: none */
    bool reserve;                       /* a reserve no pod has taken (yet): counted for
                                         * AF_ROLLOUT_RESERVE_TTL_S at most */
    double share;                       /* a reserve of this replica's: the share it was for */
};

/* A ledger entry no longer counted here (its unit seen, or expired): not absorbed again. */
struct retired {
    char *claim;
    double decided;
};

/* When a target pod was seen to turn NotReady (sorted by key). */
struct readiness {
    char *key;                          /* "namespace/name/uid" */
    bool was_ready;                     /* Ready at the last census */
    double since;                       /* seen turning NotReady then; 0: its clock is its start */
};

/* A unit as one snapshot shows it. */
struct unit {
    const char *key;                    /* arena */
    uint32_t hash;
    int rollout;
    enum af_rollout_side side;
    bool claimed;                       /* a pod of it names its claim ledger entry */
};

struct crollout {
    struct track *track;                /* borrowed from the state */
    int target, source;                 /* units with a side */
    const struct af_pod_info **tpods;   /* pods on the target side that are Failed, restarted
                                         * or not Ready: the brake's */
    double *tsince;                     /* parallel: when each turned NotReady (0: unknown) */
    size_t n_tpods;
    const struct af_node_view **tnodes; /* nodes of a target class: room */
    size_t n_tnodes;
};

struct census {
    struct af_snapshot *snap;           /* a reference, or NULL */
    struct af_config *cfg;              /* a reference */
    struct af_arena ar;
    struct crollout *r;                 /* one per rollout of cfg->policy */
    size_t n_r;
    struct unit *units;
    size_t n_units;
    uint32_t *ix;                       /* slot + 1; open addressing */
    size_t ix_size;
    const char **claims;                /* the claim annotations of its pods, sorted */
    size_t n_claims;
};

struct af_rollouts {
    pthread_mutex_t lock;
    /* everything below is protected by ->lock */
    bool have_census;
    struct census census;
    struct track **tracks;
    size_t n_tracks, cap_tracks;
    struct pending *pending;
    size_t n_pending, cap_pending;
    struct retired *retired;
    size_t n_retired, cap_retired;
    struct readiness *ready;
    size_t n_ready;
    /* the shared state: who to tell of a change, what the API server last said */
    void (*on_change)(void *ud);
    void *change_ud;
    struct af_rollout_record *remote;
    size_t n_remote;
    bool absorbed;                      /* the API server's state was read once */
    double shared_since;                /* wall clock when the observer was set */
};

static void changed(struct af_rollouts *rs)
{
    if (rs->on_change)
        rs->on_change(rs->change_ud);
}

static void culprits_clear(struct culprits *c)
{
    for (size_t i = 0; i < c->n; i++)
        af_free(c->v[i].key);
    c->n = 0;
}

static void culprits_add(struct culprits *c, const char *key, int restarts)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->v[i].key, key)) {
            c->v[i].restarts = restarts;   /* forgiven again: from its count now */
            return;
        }
    AF_GROW(c->v, c->cap, c->n + 1);
    c->v[c->n].key = af_xstrdup(key);
    c->v[c->n].restarts = restarts;
    c->n++;
}

static const struct culprit *culprits_find(const struct culprits *c, const char *key)
{
    for (size_t i = 0; i < c->n; i++)
        if (!strcmp(c->v[i].key, key))
            return &c->v[i];
    return NULL;
}

static void track_free(struct track *t)
{
    if (!t)
        return;
    culprits_clear(&t->culprits);
    culprits_clear(&t->forgiven);
    af_free(t->culprits.v);
    af_free(t->forgiven.v);
    af_free(t->name);
    af_free(t);
}

static void pending_remove(struct af_rollouts *rs, size_t i)
{
    struct pending *e = &rs->pending[i];

    if (e->claim) {
        AF_GROW(rs->retired, rs->cap_retired, rs->n_retired + 1);
        rs->retired[rs->n_retired].claim = e->claim;
        rs->retired[rs->n_retired++].decided = e->decided;
        e->claim = NULL;
    }
    af_free(e->rollout);
    af_free(e->key);
    rs->pending[i] = rs->pending[--rs->n_pending];
}

static void retired_expire(struct af_rollouts *rs, double now)
{
    for (size_t i = rs->n_retired; i-- > 0;) {
        if (now - rs->retired[i].decided <= 2 * AF_ROLLOUT_PENDING_TTL_S)
            continue;
        af_free(rs->retired[i].claim);
        rs->retired[i] = rs->retired[--rs->n_retired];
    }
}

static void readiness_free(struct readiness *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        af_free(v[i].key);
    af_free(v);
}

static void census_release(struct census *c)
{
    af_snapshot_unref(c->snap);
    af_config_unref(c->cfg);
    af_arena_release(&c->ar);
    af_free(c->units);
    af_free(c->ix);
    af_free(c->claims);
    memset(c, 0, sizeof(*c));
}

struct af_rollouts *af_rollouts_new(void)
{
    struct af_rollouts *rs = af_xcalloc(1, sizeof(*rs));

    pthread_mutex_init(&rs->lock, NULL);
    return rs;
}

void af_rollouts_free(struct af_rollouts *rs)
{
    if (!rs)
        return;
    if (rs->have_census)
        census_release(&rs->census);
    for (size_t i = 0; i < rs->n_tracks; i++)
        track_free(rs->tracks[i]);
    af_free(rs->tracks);
    while (rs->n_pending)
        pending_remove(rs, rs->n_pending - 1);
    af_free(rs->pending);
    retired_expire(rs, INFINITY);
    af_free(rs->retired);
    readiness_free(rs->ready, rs->n_ready);
    af_free(rs->remote);
    pthread_mutex_destroy(&rs->lock);
    af_free(rs);
}

static struct track *track_find(struct af_rollouts *rs, const char *name)
{
    for (size_t i = 0; i < rs->n_tracks; i++)
        if (!strcmp(rs->tracks[i]->name, name))
            return rs->tracks[i];
    return NULL;
}

static void apply_record(struct af_rollouts *rs, struct track *t,
                         const struct af_rollout_record *rec);

/* The record the API server last gave for rollout `name`, or NULL. */
static const struct af_rollout_record *remote_find(const struct af_rollouts *rs, const char *name)
{
    for (size_t i = 0; i < rs->n_remote; i++)
        if (!strcmp(rs->remote[i].name, name))
            return &rs->remote[i];
    return NULL;
}

/* The track of rollout `r`, created when first seen (from the shared record when it is of
 * this generation) and begun again when it changed. */
static struct track *track_sync(struct af_rollouts *rs, const struct af_rollout *r, double now)
{
    uint64_t h = rollout_hash(r);
    struct track *t = track_find(rs, r->name);

    if (!t) {
        t = af_xcalloc(1, sizeof(*t));
        t->name = af_xstrdup(r->name);
        t->hash = h;
        t->began = now;
        AF_GROW(rs->tracks, rs->cap_tracks, rs->n_tracks + 1);
        rs->tracks[rs->n_tracks++] = t;
        apply_record(rs, t, remote_find(rs, r->name));
        changed(rs);
    } else if (t->hash != h) {
        AF_LOG(AF_LOG_INFO, "rollout changed in the policy: it begins again", "rollout", r->name,
               NULL);
        t->hash = h;
        t->began = now;
        t->halted = false;
        t->halt_reason[0] = '\0';
        t->halt_pod[0] = '\0';
        t->halted_at = t->acked_at = 0;
        t->forgive_next = true;
        culprits_clear(&t->culprits);
        culprits_clear(&t->forgiven);
        changed(rs);
    }
    return t;
}

/* Forgets the rollouts the policy no longer has, and their decisions. */
static void tracks_prune(struct af_rollouts *rs, const struct af_policy *pol)
{
    for (size_t i = rs->n_tracks; i-- > 0;) {
        bool keep = false;
        for (size_t j = 0; pol && j < pol->n_rollouts && !keep; j++)
            keep = !strcmp(pol->rollouts[j].name, rs->tracks[i]->name);
        if (keep)
            continue;
        for (size_t p = rs->n_pending; p-- > 0;)
            if (!strcmp(rs->pending[p].rollout, rs->tracks[i]->name))
                pending_remove(rs, p);
        track_free(rs->tracks[i]);
        rs->tracks[i] = rs->tracks[--rs->n_tracks];
    }
}

/* ---- the census of one snapshot ------------------------------------------------------------ */

static const struct unit *census_find(const struct census *c, const char *key)
{
    uint32_t h;

    if (!c->ix_size)
        return NULL;
    h = hash_str(key);
    for (size_t pos = h & (c->ix_size - 1);; pos = (pos + 1) & (c->ix_size - 1)) {
        uint32_t v = c->ix[pos];
        if (!v)
            return NULL;
        if (c->units[v - 1].hash == h && !strcmp(c->units[v - 1].key, key))
            return &c->units[v - 1];
    }
}

/* The unit of `key` (arena string), added with no side when new. */
static struct unit *census_unit(struct census *c, const char *key, int rollout)
{
    uint32_t h = hash_str(key);
    size_t pos;

    for (pos = h & (c->ix_size - 1); c->ix[pos]; pos = (pos + 1) & (c->ix_size - 1)) {
        struct unit *u = &c->units[c->ix[pos] - 1];
        if (u->hash == h && !strcmp(u->key, key))
            return u;
    }
    c->units[c->n_units] = (struct unit){key, h, rollout, AF_SIDE_NONE, false};
    c->ix[pos] = (uint32_t)++c->n_units;
    return &c->units[c->n_units - 1];
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
    readiness_free(rs->ready, rs->n_ready);
    rs->ready = next;
    rs->n_ready = k;
}

static int cmp_claim(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Whether a pod of the census names ledger entry `id` (the pod of that decision is seen). */
static bool census_has_claim(const struct census *c, const char *id)
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
        c->r[i].track = track_sync(rs, &pol->rollouts[i], now);
    c->units = af_xmalloc((nm + 1) * sizeof(*c->units));
    c->ix_size = af_table_size(nm);
    c->ix = af_xcalloc(c->ix_size, sizeof(*c->ix));
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
        if (anonymous(p) || (p->terminal && !(p->job_name && *p->job_name)))
            continue;
        af_rollout_unit(p, unit, sizeof(unit));
        key = af_arena_printf(&c->ar, "%s\x1f%s/%s", r->name, p->ns ? p->ns : "", unit);
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
static struct pending *pending_find(struct af_rollouts *rs, const char *key)
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
        if (rs->pending[i].claim && census_has_claim(next, rs->pending[i].claim))
            pending_remove(rs, i);
    for (size_t i = 0; i < rs->n_pending; i++)
        anon |= rs->pending[i].key == NULL;
    for (size_t u = 0; anon && prev && u < next->n_units; u++) {
        const struct unit *nu = &next->units[u];
        const struct unit *pu = census_find(prev, nu->key);
        const char *name = next->cfg->policy->rollouts[nu->rollout].name;
        size_t oldest = (size_t)-1;

        if (nu->side == AF_SIDE_NONE || (pu && pu->side != AF_SIDE_NONE) || nu->claimed ||
            pending_find(rs, nu->key))
            continue;   /* a claimed unit settles its own entry, above */
        for (size_t i = 0; i < rs->n_pending; i++) {
            const struct pending *e = &rs->pending[i];
            if (!e->key && e->side == nu->side && !strcmp(e->rollout, name) &&
                (oldest == (size_t)-1 || e->decided < rs->pending[oldest].decided))
                oldest = i;
        }
        if (oldest != (size_t)-1)
            pending_remove(rs, oldest);
    }
    for (size_t i = rs->n_pending; i-- > 0;) {
        const struct unit *nu = rs->pending[i].key ? census_find(next, rs->pending[i].key) : NULL;
        if (nu && nu->side != AF_SIDE_NONE)
            pending_remove(rs, i);
    }
}

static void pending_expire(struct af_rollouts *rs, double now)
{
    for (size_t i = rs->n_pending; i-- > 0;)
        if (now - rs->pending[i].used >
            (rs->pending[i].reserve ? AF_ROLLOUT_RESERVE_TTL_S : AF_ROLLOUT_PENDING_TTL_S))
            pending_remove(rs, i);
}

/*
 * Makes rs->census the census of (cfg, snap). The census it replaces goes to `old`, for
 * the caller to release once it has dropped the lock: that may be the last reference on
 * a snapshot of 150,000 pods.
 */
static void census_ensure(struct af_rollouts *rs, const struct af_config *cfg,
                          const struct af_snapshot *snap, double now, struct census *old)
{
    struct census next;

    if (rs->have_census && rs->census.snap == snap && rs->census.cfg == cfg)
        return;
    /* A request still holding the config a reload replaced is answered from its own
     * census, but does not make the state forget the newer policy's rollouts. */
    if (rs->have_census && rs->census.cfg != cfg &&
        cfg->generation >= rs->census.cfg->generation)
        tracks_prune(rs, cfg->policy);
    census_build(rs, &next, cfg, snap, now);
    pending_settle(rs, rs->have_census ? &rs->census : NULL, &next);
    if (rs->have_census)
        *old = rs->census;
    rs->census = next;
    rs->have_census = true;
}

/* ---- the brake ------------------------------------------------------------------------------ */

/* Why target pod `p` holds the rollout back, or false. */
static bool failing(const struct af_rollout *r, const struct af_pod_info *p, double since,
                    const struct culprit *forgiven, double now, char *why, size_t n)
{
    const char *ns = p->ns ? p->ns : "", *name = p->name ? p->name : "";
    double clock = since > 0 ? since : p->started_unix;

    if (forgiven) {
        /* acknowledged: only restarts beyond those it had then count again */
        if (r->brake_restarts > 0 && p->restarts - forgiven->restarts >= r->brake_restarts) {
            snprintf(why, n, "target pod %.60s/%.80s restarted %d more times after the brake was "
                             "acknowledged (brake: restarts %d)",
                     ns, name, p->restarts - forgiven->restarts, r->brake_restarts);
            return true;
        }
        return false;
    }
    if (r->brake_on_failed && p->failed) {
        snprintf(why, n, "target pod %.60s/%.80s ended Failed (brake: failed)", ns, name);
        return true;
    }
    if (r->brake_restarts > 0 && p->restarts >= r->brake_restarts) {
        snprintf(why, n, "target pod %.60s/%.80s restarted %d times (brake: restarts %d)", ns, name,
                 p->restarts, r->brake_restarts);
        return true;
    }
    if (r->brake_not_ready_s > 0 && !p->terminal && !p->ready && clock > 0 &&
        now - clock >= r->brake_not_ready_s) {
        snprintf(why, n,
                 "target pod %.60s/%.80s not Ready for %.0f s %s (brake: not_ready_for %d s)", ns,
                 name, now - clock, since > 0 ? "since it turned NotReady" : "after it started",
                 r->brake_not_ready_s);
        return true;
    }
    return false;
}

/* Evaluates the brake of rollout `i` at `now`: halts it when a target pod fails. */
static void brake(struct af_rollouts *rs, size_t i, double now)
{
    const struct census *c = &rs->census;
    const struct af_rollout *r = &c->cfg->policy->rollouts[i];
    const struct crollout *cr = &c->r[i];
    struct track *t = cr->track;
    char first[AF_REASON_MAX] = "";
    size_t n = 0;

    culprits_clear(&t->culprits);
    for (size_t j = 0; j < cr->n_tpods; j++) {
        const struct af_pod_info *p = cr->tpods[j];
        char key[300], why[AF_REASON_MAX];
        const struct culprit *f = NULL;
        snprintf(key, sizeof(key), "%s/%s", p->ns ? p->ns : "", p->name ? p->name : "");
        f = culprits_find(&t->forgiven, key);
        if (!failing(r, p, cr->tsince[j], f, now, why, sizeof(why)))
            continue;
        culprits_add(&t->culprits, key, p->restarts);
        if (!n++)
            memcpy(first, why, sizeof(first));
    }
    if (t->forgive_next) {
        /* the policy changed: what fails now is what the change answered */
        for (size_t j = 0; j < t->culprits.n; j++)
            culprits_add(&t->forgiven, t->culprits.v[j].key, t->culprits.v[j].restarts);
        if (t->culprits.n)
            changed(rs);
        culprits_clear(&t->culprits);
        t->forgive_next = false;
        return;
    }
    if (!n || t->halted)
        return;
    /* Shared, and the API server not read yet (a replica starting): the acknowledgements
     * and forgiven pods are not known here, so a halt now could undo one. Not for long:
     * a replica that cannot read it (no RBAC, no API server) still brakes on its own. */
    if (rs->on_change && !rs->absorbed &&
        af_wall_time() - rs->shared_since < AF_ROLLOUT_STATE_READ_GRACE_S)
        return;
    t->halted = true;
    /* after the last acknowledgement, whatever the clocks of the replicas that made it */
    t->halted_at = now > t->acked_at ? now : t->acked_at + 0.001;
    snprintf(t->halt_pod, sizeof(t->halt_pod), "%s", t->culprits.v[0].key);
    changed(rs);
    if (n > 1)
        snprintf(t->halt_reason, sizeof(t->halt_reason), "%.190s; and %zu more", first, n - 1);
    else
        memcpy(t->halt_reason, first, sizeof(t->halt_reason));
    AF_LOG(AF_LOG_WARN, "rollout halted: no new units go to the target until acknowledged",
           "rollout", r->name, "reason", t->halt_reason, NULL);
}

/* Forgiven pods that are gone, or healthy again, need no memory: a new failure of theirs
 * is a new failure. */
static void forgiven_prune(struct af_rollouts *rs, size_t i)
{
    const struct crollout *cr = &rs->census.r[i];
    struct culprits *f = &cr->track->forgiven;

    for (size_t k = f->n; k-- > 0;) {
        bool present = false;
        for (size_t j = 0; j < cr->n_tpods && !present; j++) {
            const struct af_pod_info *p = cr->tpods[j];
            size_t nl = strlen(p->ns ? p->ns : "");
            present = !strncmp(f->v[k].key, p->ns ? p->ns : "", nl) && f->v[k].key[nl] == '/' &&
                      !strcmp(f->v[k].key + nl + 1, p->name ? p->name : "");
        }
        if (!present) {
            af_free(f->v[k].key);
            f->v[k] = f->v[--f->n];
        }
    }
}

/* ---- room ----------------------------------------------------------------------------------- */

/* The requests the pod will have on the target: a variant's accelerator resources in place
 * of the pod's, as if one container requested an accelerator. */
static void variant_requests(const struct af_rollout *r, const struct af_pod_info *pod,
                             struct af_resources *out)
{
    static const enum af_res accel[] = {AF_RES_GPU,        AF_RES_NEURON, AF_RES_NEURONDEVICE,
                                        AF_RES_NEURONCORE, AF_RES_GPU_SHARED, AF_RES_MIG,
                                        AF_RES_AMD_GPU};

    *out = pod->requests;
    if (!r->variant)
        return;
    for (size_t i = 0; i < AF_ARRAY_SIZE(accel); i++)
        out->v[accel[i]] = 0;
    for (size_t i = 0; i < r->variant->n_resources; i++) {
        int k = af_res_parse(r->variant->resources[i].key);
        int64_t v;
        if (k >= 0 && r->variant->resources[i].value &&
            af_parse_int64(r->variant->resources[i].value, 0, INT32_MAX, &v) == 0)
            out->v[k] += v;
    }
}

static bool node_has_room(const struct af_node_view *v, const struct af_resources *req,
                          const struct af_pod_info *pod)
{
    const struct af_node_info *n = v->info;
    int64_t pods = n->allocatable.v[AF_RES_PODS];

    if (n->unschedulable || (pods > 0 && v->npods >= pods) ||
        !af_placement_admits(pod->placement, n) ||
        !af_res_fits(req, &n->allocatable, &v->used, NULL))
        return false;
    if (req->v[AF_RES_MIG] > 0) {
        for (int i = 0; i < n->n_mig; i++)
            if (n->mig[i].g == pod->mig.g && n->mig[i].gb == pod->mig.gb)
                return n->mig_count[i] >= req->v[AF_RES_MIG];
        return false;
    }
    return true;
}

static bool target_has_room(const struct crollout *cr, const struct af_resources *req,
                            const struct af_pod_info *pod)
{
    for (size_t i = 0; i < cr->n_tnodes; i++)
        if (node_has_room(cr->tnodes[i], req, pod))
            return true;
    return false;
}

/* True when the pod's nodeName, nodeSelector or required node affinity admits none of the
 * target's nodes (and there are some to judge by: with none in the cache, an autoscaler may
 * still launch one, and room decides). */
static bool target_pinned_away(const struct crollout *cr, const struct af_pod_info *pod)
{
    if (!af_placement_constrains(pod->placement) || !cr->n_tnodes)
        return false;
    for (size_t i = 0; i < cr->n_tnodes; i++)
        if (af_placement_admits(pod->placement, cr->tnodes[i]->info))
            return false;
    return true;
}

/* A unit recalled on the source whose pod could not take the target anyway says why. */
static void pinned_note(const struct af_rollout *r, const struct crollout *cr,
                        const struct af_pod_info *pod, enum af_rollout_side side,
                        struct af_rollout_decision *out)
{
    char what[160], cls[96];
    size_t at = strlen(out->reason);

    if (side != AF_SIDE_SOURCE || !target_pinned_away(cr, pod))
        return;
    out->pinned = true;
    af_placement_describe(pod->placement, what, sizeof(what));
    af_class_mask_names(r->target, cls, sizeof(cls));
    snprintf(out->reason + at, sizeof(out->reason) - at,
             "; its %.150s admits no %.60s node, so it stays there", what, cls);
}

/* ---- deciding ------------------------------------------------------------------------------ */

/* Units per side: the census's plus the decisions not yet seen (but `skip`'s own). */
static int count_units(struct af_rollouts *rs, size_t i, const struct pending *skip,
                       struct af_rollout_count *c)
{
    const struct crollout *cr = &rs->census.r[i];
    int pending = 0;

    c->target = cr->target;
    c->source = cr->source;
    c->fallbacks = (int)cr->track->fallbacks;
    for (size_t k = 0; k < rs->n_pending; k++) {
        const struct pending *e = &rs->pending[k];
        if (e == skip || strcmp(e->rollout, cr->track->name))
            continue;
        c->target += e->side == AF_SIDE_TARGET;
        c->source += e->side == AF_SIDE_SOURCE;
        pending++;
    }
    return pending;
}

static enum af_rollout_side parse_side(const char *s)
{
    if (s && !strcmp(s, "target"))
        return AF_SIDE_TARGET;
    if (s && !strcmp(s, "source"))
        return AF_SIDE_SOURCE;
    return AF_SIDE_NONE;
}

static void decide_locked(struct af_rollouts *rs, const struct af_config *cfg,
                          const struct af_snapshot *snap, const struct af_pod_info *pod,
                          const struct af_resources *treq, double now, unsigned flags,
                          const char *claim, struct af_rollout_decision *out, struct census *old)
{
    const struct af_rollout *r;
    const struct crollout *cr;
    struct track *t;
    struct pending *e = NULL;
    struct af_resources req;
    char *key = NULL, cls[96], stage_text[32] = "";
    enum af_rollout_side side;
    bool anon = anonymous(pod), peek = flags & AF_ROLLOUTS_PEEK, room;

    af_assert_held(&rs->lock);
    int stage, i = af_rollout_match(cfg->policy, pod), total;

    if (i < 0)
        return;
    census_ensure(rs, cfg, snap, now, old);
    pending_expire(rs, now);
    r = &cfg->policy->rollouts[i];
    cr = &rs->census.r[i];
    t = cr->track;
    forgiven_prune(rs, (size_t)i);
    brake(rs, (size_t)i, now);

    out->rollout = i;
    out->halted = t->halted;
    out->share = af_rollout_share(r, t->began, now, &stage);
    if (stage >= 0)
        snprintf(stage_text, sizeof(stage_text), ", stage %d", stage + 1);
    af_rollout_unit(pod, out->unit, sizeof(out->unit));
    if (!anon)
        key = unit_key(r->name, pod->ns, out->unit);

    /* 1. the pod says (the webhook annotated it) */
    side = parse_side(pod->rollout_side);
    if (side != AF_SIDE_NONE) {
        count_units(rs, (size_t)i, NULL, &out->count);
        out->side = side;
        out->recalled = true;
        af_reasonf(out->reason,
                "rollout %.63s: unit %.100s is on the %s side (annotation "
                "accelfit.io/rollout-side)",
                r->name, out->unit, af_rollout_side_name(side));
        pinned_note(r, cr, pod, side, out);
        goto done;
    }
    /* 2. a pod of the unit is in the cache with a side */
    if (key) {
        const struct unit *u = census_find(&rs->census, key);
        if (u && u->side != AF_SIDE_NONE) {
            count_units(rs, (size_t)i, NULL, &out->count);
            out->side = u->side;
            out->recalled = true;
            af_reasonf(out->reason,
                    "rollout %.63s: unit %.100s is on the %s side already (a pod of it in the "
                    "cache)",
                    r->name, out->unit, af_rollout_side_name(u->side));
            pinned_note(r, cr, pod, u->side, out);
            goto done;
        }
        e = pending_find(rs, key);
    }
    if (r->variant && treq)
        req = *treq;
    else
        variant_requests(r, pod, &req);
    /* 3. decided earlier and not seen yet: kept, unless it was for a target it cannot take now */
    room = !e || e->side != AF_SIDE_TARGET || target_has_room(cr, &req, pod);
    if (e && !(e->side == AF_SIDE_TARGET &&
               (t->halted || (r->fallback == AF_FALLBACK_SOURCE && !room)))) {
        count_units(rs, (size_t)i, e, &out->count);
        out->side = e->side;
        out->fallback = e->fallback;
        out->recalled = true;
        af_reasonf(out->reason,
                "rollout %.63s: unit %.100s was sent to the %s side %.0f s ago%s (not in the cache "
                "yet)%s",
                r->name, out->unit, af_rollout_side_name(e->side), now - e->decided,
                e->fallback ? " for lack of target room" : "",
                room ? "" : "; it waits for room there (fallback: wait)");
        if (!peek)
            e->used = now;
        goto done;
    }
    /* 4. a new unit (or one decided again): the side furthest below its share */
    count_units(rs, (size_t)i, e, &out->count);
    total = out->count.target + out->count.source;
    side = af_rollout_choose(out->share, &out->count);
    if (side == AF_SIDE_TARGET && t->halted) {
        side = AF_SIDE_SOURCE;
        af_reasonf(out->reason,
                "rollout %.63s is halted (%.120s): unit %.60s goes to the source", r->name,
                t->halt_reason, out->unit);
    } else if (side == AF_SIDE_TARGET && (flags & AF_ROLLOUTS_NO_TARGET)) {
        side = AF_SIDE_SOURCE;
        out->fallback = true;
        out->unfit = true;
        af_reasonf(out->reason,
                "rollout %.63s: the share sends unit %.80s to the target, but its variant "
                "cannot make the pod run there: it stays on the source",
                r->name, out->unit);
    } else if (side == AF_SIDE_TARGET && target_pinned_away(cr, pod)) {
        char what[160];
        side = AF_SIDE_SOURCE;
        out->fallback = true;
        out->pinned = true;
        af_class_mask_names(r->target, cls, sizeof(cls));
        af_placement_describe(pod->placement, what, sizeof(what));
        af_reasonf(out->reason,
                "rollout %.63s: the share sends unit %.60s to the target, but its %.150s "
                "admits no %.60s node: it stays on the source",
                r->name, out->unit, what, cls);
    } else if (side == AF_SIDE_TARGET && !target_has_room(cr, &req, pod)) {
        af_class_mask_names(r->target, cls, sizeof(cls));
        if (r->fallback == AF_FALLBACK_SOURCE) {
            side = AF_SIDE_SOURCE;
            out->fallback = true;
            af_reasonf(out->reason,
                    "rollout %.63s: the share sends unit %.80s to the target, but no %.60s node "
                    "has room for it: it takes the source (fallback)",
                    r->name, out->unit, cls);
        } else {
            af_reasonf(out->reason,
                    "rollout %.63s: unit %.80s goes to the target and waits for room on %.60s "
                    "(fallback: wait)",
                    r->name, out->unit, cls);
        }
    } else {
        af_class_mask_names(side == AF_SIDE_TARGET ? r->target : r->source, cls, sizeof(cls));
        af_reasonf(out->reason,
                "rollout %.63s: unit %.80s goes to the %s (%.60s): %d of %d units on the target, "
                "share %.2f%s",
                r->name, out->unit, af_rollout_side_name(side), cls, out->count.target, total,
                out->share, stage_text);
    }
    out->side = side;
    if (peek)
        goto done;
    if (out->fallback && !(e && e->fallback))
        t->fallbacks++;
    if (!e) {
        AF_GROW(rs->pending, rs->cap_pending, rs->n_pending + 1);
        e = &rs->pending[rs->n_pending++];
        memset(e, 0, sizeof(*e));
        e->rollout = af_xstrdup(r->name);
        e->key = key;
        key = NULL;
    }
    e->side = side;
    e->fallback = out->fallback;
    e->decided = e->used = now;
    if (claim) {
        if (e->claim) {   /* decided again: the old entry is not counted here any more */
            size_t at = (size_t)(e - rs->pending);
            pending_remove(rs, at);   /* retires the old claim */
            AF_GROW(rs->pending, rs->cap_pending, rs->n_pending + 1);
            e = &rs->pending[rs->n_pending++];
            memset(e, 0, sizeof(*e));
            e->rollout = af_xstrdup(r->name);
            e->key = key ? key : (anon ? NULL : unit_key(r->name, pod->ns, out->unit));
            key = NULL;
            e->side = side;
            e->fallback = out->fallback;
            e->decided = e->used = now;
        }
        e->claim = af_xstrdup(claim);
    }
done:
    af_free(key);
}

void af_rollouts_decide_for(struct af_rollouts *rs, const struct af_config *cfg,
                           const struct af_snapshot *snap, const struct af_pod_info *pod,
                           const struct af_resources *target_requests, double now, unsigned flags,
                           struct af_rollout_decision *out)
{
    struct census old;

    memset(out, 0, sizeof(*out));
    memset(&old, 0, sizeof(old));
    out->rollout = -1;
    out->side = AF_SIDE_NONE;
    if (!rs || !cfg || !cfg->policy || !cfg->policy->n_rollouts || !pod || !pod->managed)
        return;
    pthread_mutex_lock(&rs->lock);
    decide_locked(rs, cfg, snap, pod, target_requests, now, flags, NULL, out, &old);
    pthread_mutex_unlock(&rs->lock);
    census_release(&old);
}

bool af_rollouts_decide_claim(struct af_rollouts *rs, const struct af_config *cfg,
                              const struct af_snapshot *snap, const struct af_pod_info *pod,
                              const struct af_resources *target_requests, double now,
                              unsigned flags, const char *id, struct af_rollout_decision *out,
                              struct af_rollout_claim *claim)
{
    struct census old;
    bool made = false;

    memset(out, 0, sizeof(*out));
    memset(&old, 0, sizeof(old));
    memset(claim, 0, sizeof(*claim));
    out->rollout = -1;
    out->side = AF_SIDE_NONE;
    if (!rs || !cfg || !cfg->policy || !cfg->policy->n_rollouts || !pod || !pod->managed)
        return false;
    pthread_mutex_lock(&rs->lock);
    decide_locked(rs, cfg, snap, pod, target_requests, now, flags & ~AF_ROLLOUTS_PEEK, id, out,
                  &old);
    if (out->rollout >= 0 && !out->recalled &&
        (out->side == AF_SIDE_SOURCE || out->side == AF_SIDE_TARGET)) {
        const struct track *t = rs->census.r[out->rollout].track;
        snprintf(claim->id, sizeof(claim->id), "%s", id);
        snprintf(claim->rollout, sizeof(claim->rollout), "%s", t->name);
        claim->generation = t->hash;
        if (!anonymous(pod))
            snprintf(claim->unit, sizeof(claim->unit), "%s/%s", pod->ns ? pod->ns : "",
                     out->unit);
        claim->side = out->side;
        claim->at = now;
        made = true;
    }
    pthread_mutex_unlock(&rs->lock);
    census_release(&old);
    return made;
}

void af_rollouts_unclaim(struct af_rollouts *rs, const char *id)
{
    pthread_mutex_lock(&rs->lock);
    for (size_t i = rs->n_pending; i-- > 0;) {
        struct pending *e = &rs->pending[i];
        if (!e->claim || strcmp(e->claim, id))
            continue;
        if (e->fallback) {
            struct track *t = track_find(rs, e->rollout);
            if (t && t->fallbacks)
                t->fallbacks--;
        }
        af_free(e->claim);   /* never written: nothing to retire */
        e->claim = NULL;
        pending_remove(rs, i);
    }
    pthread_mutex_unlock(&rs->lock);
}

bool af_rollouts_reserve(struct af_rollouts *rs, const struct af_config *cfg,
                         const struct af_snapshot *snap, const char *rollout, double now,
                         const char *id, struct af_rollout_claim *claim)
{
    struct census old;
    struct af_rollout_count count;
    const struct track *t;
    struct pending *e;
    enum af_rollout_side side;
    double share;
    int stage;
    size_t i;

    memset(claim, 0, sizeof(*claim));
    memset(&old, 0, sizeof(old));
    if (!rs || !cfg || !cfg->policy || !rollout)
        return false;
    for (i = 0; i < cfg->policy->n_rollouts; i++)
        if (!strcmp(cfg->policy->rollouts[i].name, rollout))
            break;
    if (i == cfg->policy->n_rollouts)
        return false;
    pthread_mutex_lock(&rs->lock);
    census_ensure(rs, cfg, snap, now, &old);
    pending_expire(rs, now);
    t = rs->census.r[i].track;
    brake(rs, i, now);
    share = af_rollout_share(&cfg->policy->rollouts[i], t->began, now, &stage);
    count_units(rs, i, NULL, &count);
    /* The side the next new unit would get now; a halted rollout's is the source. What
     * depends on the pod (its room on the target, its node constraints) is judged when a
     * pod takes it (af_rollouts_take_reserve). */
    side = af_rollout_choose(share, &count);
    if (side == AF_SIDE_TARGET && t->halted)
        side = AF_SIDE_SOURCE;
    AF_GROW(rs->pending, rs->cap_pending, rs->n_pending + 1);
    e = &rs->pending[rs->n_pending++];
    memset(e, 0, sizeof(*e));
    e->rollout = af_xstrdup(t->name);
    e->side = side;
    e->decided = e->used = now;
    e->claim = af_xstrdup(id);
    e->reserve = true;
    e->share = share;
    snprintf(claim->id, sizeof(claim->id), "%s", id);
    snprintf(claim->rollout, sizeof(claim->rollout), "%s", t->name);
    claim->generation = t->hash;
    claim->side = side;
    claim->at = now;
    claim->reserve = true;
    pthread_mutex_unlock(&rs->lock);
    census_release(&old);
    return true;
}

bool af_rollouts_take_reserve(struct af_rollouts *rs, const struct af_config *cfg,
                              const struct af_snapshot *snap, const struct af_pod_info *pod,
                              const struct af_resources *target_requests, double now,
                              const char *id, uint64_t generation,
                              struct af_rollout_decision *out)
{
    struct census old;
    const struct af_rollout *r;
    const struct crollout *cr;
    struct track *t;
    struct pending *e = NULL;
    struct af_resources req;
    char cls[96], stage_text[32] = "";
    int i, stage;
    bool taken = false;

    memset(out, 0, sizeof(*out));
    memset(&old, 0, sizeof(old));
    out->rollout = -1;
    out->side = AF_SIDE_NONE;
    if (!rs || !cfg || !cfg->policy || !pod || !pod->managed || !anonymous(pod))
        return false;
    i = af_rollout_match(cfg->policy, pod);
    if (i < 0)
        return false;
    pthread_mutex_lock(&rs->lock);
    census_ensure(rs, cfg, snap, now, &old);
    pending_expire(rs, now);
    r = &cfg->policy->rollouts[i];
    cr = &rs->census.r[i];
    t = cr->track;
    brake(rs, (size_t)i, now);
    for (size_t k = 0; k < rs->n_pending; k++)
        if (rs->pending[k].reserve && rs->pending[k].claim && !strcmp(rs->pending[k].claim, id))
            e = &rs->pending[k];
    out->share = af_rollout_share(r, t->began, now, &stage);
    /* a reserve is for the share it was claimed at: a stage begun since wants new ones */
    if (!e || strcmp(e->rollout, r->name) || t->hash != generation ||
        fabs(out->share - e->share) > 1e-9)
        goto out;
    if (r->variant && target_requests)
        req = *target_requests;
    else
        variant_requests(r, pod, &req);
    /* A target reserve is for a pod the target can take now: not while halted, not for a
     * pod whose constraints admit no target node, not without room when the rollout falls
     * back to the source. Such a pod is decided as any new unit; the reserve is given back. */
    if (e->side == AF_SIDE_TARGET &&
        (t->halted || target_pinned_away(cr, pod) ||
         (r->fallback == AF_FALLBACK_SOURCE && !target_has_room(cr, &req, pod))))
        goto out;
    out->rollout = i;
    out->halted = t->halted;
    if (stage >= 0)
        snprintf(stage_text, sizeof(stage_text), ", stage %d", stage + 1);
    af_rollout_unit(pod, out->unit, sizeof(out->unit));
    count_units(rs, (size_t)i, NULL, &out->count);
    out->side = e->side;
    af_class_mask_names(e->side == AF_SIDE_TARGET ? r->target : r->source, cls, sizeof(cls));
    af_reasonf(out->reason,
            "rollout %.63s: unit %.80s goes to the %s (%.60s), claimed ahead: %d of %d units on "
            "the target, share %.2f%s",
            r->name, out->unit, af_rollout_side_name(e->side), cls, out->count.target,
            out->count.target + out->count.source, out->share, stage_text);
    e->reserve = false;   /* a decision now, remembered as long as any */
    e->decided = e->used = now;
    taken = true;
out:
    if (!taken) {
        memset(out, 0, sizeof(*out));
        out->rollout = -1;
        out->side = AF_SIDE_NONE;
    }
    pthread_mutex_unlock(&rs->lock);
    census_release(&old);
    return taken;
}

void af_rollouts_release(struct af_rollouts *rs, const char *id)
{
    pthread_mutex_lock(&rs->lock);
    for (size_t i = rs->n_pending; i-- > 0;)
        if (rs->pending[i].reserve && rs->pending[i].claim && !strcmp(rs->pending[i].claim, id))
            pending_remove(rs, i);   /* retired: the ledger's copy is not absorbed again */
    pthread_mutex_unlock(&rs->lock);
}

/* A set of borrowed strings, open addressing: what af_rollouts_absorb_claims looks up. */
struct strset {
    const char **slot;
    size_t size;
};

static void strset_init(struct strset *set, size_t n)
{
    set->size = af_table_size(n + 1);
    set->slot = af_xcalloc(set->size, sizeof(*set->slot));
}

/* The slot of `s`: its own, or the empty one it would take. */
static size_t strset_slot(const struct strset *set, const char *s)
{
    size_t pos = hash_str(s) & (set->size - 1);

    while (set->slot[pos] && strcmp(set->slot[pos], s))
        pos = (pos + 1) & (set->size - 1);
    return pos;
}

static bool strset_has(const struct strset *set, const char *s)
{
    return set->slot[strset_slot(set, s)] != NULL;
}

/* Adds `s` (borrowed); the set was sized for it at init. */
static void strset_add(struct strset *set, const char *s)
{
    set->slot[strset_slot(set, s)] = s;
}

void af_rollouts_absorb_claims(struct af_rollouts *rs, const struct af_rollout_claim *v,
                               size_t n, double now, bool *keep)
{
    struct strset retired, claimed, keys;

    pthread_mutex_lock(&rs->lock);
    pending_expire(rs, now);
    retired_expire(rs, now);
    strset_init(&retired, rs->n_retired);
    for (size_t i = 0; i < rs->n_retired; i++)
        strset_add(&retired, rs->retired[i].claim);
    strset_init(&claimed, rs->n_pending + n);
    strset_init(&keys, rs->n_pending + n);
    for (size_t i = 0; i < rs->n_pending; i++) {
        if (rs->pending[i].claim)
            strset_add(&claimed, rs->pending[i].claim);
        if (rs->pending[i].key)
            strset_add(&keys, rs->pending[i].key);
    }
    for (size_t i = 0; i < n; i++) {
        const struct af_rollout_claim *c = &v[i];
        const struct track *t = track_find(rs, c->rollout);
        double at = fmin(c->at, now + AF_ROLLOUT_CLAIM_SKEW_S);
        const struct unit *u;
        struct pending *e;
        char *key = NULL;

        if (c->released) {
            /* A reserve given back: no longer counted anywhere; the mark stays as long as
             * the reserve could have been counted, so that every replica reads it. */
            keep[i] = now - at <= AF_ROLLOUT_RESERVE_TTL_S;
            for (size_t k = rs->n_pending; k-- > 0;)
                if (rs->pending[k].reserve && rs->pending[k].claim &&
                    !strcmp(rs->pending[k].claim, c->id))
                    pending_remove(rs, k);   /* a reserve is anonymous: no key in `keys` */
            continue;
        }
        keep[i] = now - at <= (c->reserve ? AF_ROLLOUT_RESERVE_TTL_S : AF_ROLLOUT_PENDING_TTL_S) &&
                  !strset_has(&retired, c->id) &&
                  !(rs->have_census && census_has_claim(&rs->census, c->id));
        if (!keep[i] || strset_has(&claimed, c->id) ||
            (c->side != AF_SIDE_SOURCE && c->side != AF_SIDE_TARGET) ||
            !t || t->hash != c->generation ||   /* not a rollout of this generation here */
            rs->n_pending >= AF_ROLLOUT_PENDING_MAX)
            continue;
        if (c->unit[0]) {
            key = af_xasprintf("%s\x1f%s", c->rollout, c->unit);
            u = rs->have_census ? census_find(&rs->census, key) : NULL;
            if (strset_has(&keys, key)) {   /* decided here too */
                af_free(key);
                continue;
            }
        } else {
            u = NULL;
        }
        AF_GROW(rs->pending, rs->cap_pending, rs->n_pending + 1);
        e = &rs->pending[rs->n_pending++];
        memset(e, 0, sizeof(*e));
        e->rollout = af_xstrdup(t->name);
        e->key = key;
        e->side = c->side;
        e->decided = e->used = at;
        e->claim = af_xstrdup(c->id);
        e->reserve = c->reserve;
        if (u && u->side != AF_SIDE_NONE) {   /* its unit is in the cache already */
            pending_remove(rs, rs->n_pending - 1);
            keep[i] = false;
            continue;
        }
        strset_add(&claimed, e->claim);
        if (e->key)
            strset_add(&keys, e->key);
    }
    pthread_mutex_unlock(&rs->lock);
    af_free(retired.slot);
    af_free(claimed.slot);
    af_free(keys.slot);
}

void af_rollouts_decide(struct af_rollouts *rs, const struct af_config *cfg,
                        const struct af_snapshot *snap, const struct af_pod_info *pod, double now,
                        struct af_rollout_decision *out)
{
    af_rollouts_decide_for(rs, cfg, snap, pod, NULL, now, 0, out);
}

int af_rollouts_ack(struct af_rollouts *rs, const char *name)
{
    struct track *t;
    int rc = 0;

    if (!rs || !name)
        return AF_EINVAL;
    pthread_mutex_lock(&rs->lock);
    t = track_find(rs, name);
    if (!t) {
        rc = AF_ENOENT;
    } else if (t->halted) {
        for (size_t j = 0; j < t->culprits.n; j++)
            culprits_add(&t->forgiven, t->culprits.v[j].key, t->culprits.v[j].restarts);
        culprits_clear(&t->culprits);
        t->halted = false;
        t->halt_reason[0] = '\0';
        t->acked_at = af_wall_time();
        if (t->acked_at < t->halted_at)
            t->acked_at = t->halted_at;   /* halted iff halted_at > acked_at */
        changed(rs);
        AF_LOG(AF_LOG_INFO, "rollout brake acknowledged: new units may go to the target",
               "rollout", name, NULL);
    }
    pthread_mutex_unlock(&rs->lock);
    return rc;
}

/* ---- the shared state ----------------------------------------------------------------------- */

static void track_record(const struct track *t, struct af_rollout_record *rec)
{
    memset(rec, 0, sizeof(*rec));
    snprintf(rec->name, sizeof(rec->name), "%s", t->name);
    rec->generation = t->hash;
    rec->began = t->began;
    rec->halted_at = t->halted_at;
    rec->acked_at = t->acked_at;
    snprintf(rec->halt_reason, sizeof(rec->halt_reason), "%s",
             t->halted_at > 0 ? t->halt_reason : "");
    snprintf(rec->halt_pod, sizeof(rec->halt_pod), "%s", t->halt_pod);
    for (size_t i = 0; i < t->forgiven.n && rec->n_forgiven < AF_ROLLOUT_FORGIVEN_MAX; i++) {
        snprintf(rec->forgiven[rec->n_forgiven].pod, sizeof(rec->forgiven[0].pod), "%s",
                 t->forgiven.v[i].key);
        rec->forgiven[rec->n_forgiven++].restarts = t->forgiven.v[i].restarts;
    }
    rec->stage = -1;
}

/*
 * Merges the shared record `rec` (NULL: none) into track `t` when it is of the track's
 * generation: the earliest began, the latest halt and acknowledgement, the forgiven pods.
 * An acknowledgement made elsewhere forgives the pods failing here, as one made here does.
 */
static void apply_record(struct af_rollouts *rs, struct track *t,
                         const struct af_rollout_record *rec)
{
    struct af_rollout_record mine, m;
    bool was = t->halted;

    (void)rs;
    if (!rec || rec->generation != t->hash)
        return;
    track_record(t, &mine);
    af_rollout_record_merge(&mine, rec, &m);
    t->began = m.began;
    if (m.halted_at > t->halted_at) {
        t->halted_at = m.halted_at;
        snprintf(t->halt_reason, sizeof(t->halt_reason), "%s", m.halt_reason);
        snprintf(t->halt_pod, sizeof(t->halt_pod), "%s", m.halt_pod);
    }
    t->acked_at = m.acked_at;
    for (size_t i = 0; i < m.n_forgiven; i++)
        if (!culprits_find(&t->forgiven, m.forgiven[i].pod))
            culprits_add(&t->forgiven, m.forgiven[i].pod, m.forgiven[i].restarts);
    t->halted = t->halted_at > t->acked_at;
    if (was && !t->halted) {
        for (size_t j = 0; j < t->culprits.n; j++)
            culprits_add(&t->forgiven, t->culprits.v[j].key, t->culprits.v[j].restarts);
        culprits_clear(&t->culprits);
        t->halt_reason[0] = '\0';
        AF_LOG(AF_LOG_INFO, "rollout brake acknowledged (by another replica)", "rollout",
               t->name, NULL);
    } else if (!was && t->halted) {
        AF_LOG(AF_LOG_WARN, "rollout halted (by another replica): no new units go to the target "
               "until acknowledged", "rollout", t->name, "reason", t->halt_reason, NULL);
    }
}

void af_rollouts_set_observer(struct af_rollouts *rs, void (*fn)(void *ud), void *ud)
{
    pthread_mutex_lock(&rs->lock);
    rs->on_change = fn;
    rs->change_ud = ud;
    rs->shared_since = af_wall_time();
    pthread_mutex_unlock(&rs->lock);
}

bool af_rollouts_state_unread(struct af_rollouts *rs, double now)
{
    bool unread;

    if (!rs)
        return false;
    pthread_mutex_lock(&rs->lock);
    unread = rs->on_change && !rs->absorbed &&
             now - rs->shared_since < AF_ROLLOUT_STATE_READ_GRACE_S;
    pthread_mutex_unlock(&rs->lock);
    return unread;
}

size_t af_rollouts_export(struct af_rollouts *rs, const struct af_config *cfg, double now,
                          struct af_rollout_record **out)
{
    const struct af_policy *pol = cfg ? cfg->policy : NULL;
    size_t n = 0;

    pthread_mutex_lock(&rs->lock);
    /* every rollout of the policy has its record, asked about or not */
    for (size_t i = 0; pol && i < pol->n_rollouts; i++)
        (void)track_sync(rs, &pol->rollouts[i], now);
    *out = af_xcalloc(rs->n_tracks + 1, sizeof(**out));
    for (size_t i = 0; i < rs->n_tracks; i++) {
        const struct track *t = rs->tracks[i];
        struct af_rollout_record *rec = &(*out)[n++];
        track_record(t, rec);
        for (size_t j = 0; pol && j < pol->n_rollouts; j++) {
            const struct af_rollout *r = &pol->rollouts[j];
            if (strcmp(r->name, t->name) || rollout_hash(r) != t->hash)
                continue;
            rec->share = af_rollout_share(r, t->began, now, &rec->stage);
            rec->stage_began = af_rollout_stage_start(r, t->began, rec->stage);
            if (r->n_stages && rec->stage + 1 < (int)r->n_stages)
                rec->next_stage = af_rollout_stage_start(r, t->began, rec->stage + 1);
        }
    }
    pthread_mutex_unlock(&rs->lock);
    return n;
}

void af_rollouts_absorb(struct af_rollouts *rs, const struct af_rollout_record *v, size_t n)
{
    pthread_mutex_lock(&rs->lock);
    af_free(rs->remote);
    rs->remote = af_xcalloc(n + 1, sizeof(*rs->remote));
    if (n)
        memcpy(rs->remote, v, n * sizeof(*v));
    rs->n_remote = n;
    rs->absorbed = true;
    for (size_t i = 0; i < rs->n_tracks; i++)
        apply_record(rs, rs->tracks[i], remote_find(rs, rs->tracks[i]->name));
    pthread_mutex_unlock(&rs->lock);
}

/* ---- status and rendering ------------------------------------------------------------------- */

static void status_locked(struct af_rollouts *rs, const struct af_config *cfg,
                          const struct af_snapshot *snap, double now, size_t i,
                          struct af_rollout_status *out, struct census *old)
{
    const struct af_rollout *r = &cfg->policy->rollouts[i];
    struct af_rollout_count c;
    struct track *t;
    int all;

    af_assert_held(&rs->lock);
    census_ensure(rs, cfg, snap, now, old);
    pending_expire(rs, now);
    forgiven_prune(rs, i);
    brake(rs, i, now);
    t = rs->census.r[i].track;
    out->pending = count_units(rs, i, NULL, &c);
    out->target = c.target;
    out->source = c.source;
    all = c.target + c.source;
    out->achieved = all ? (double)c.target / all : 0;
    out->share = af_rollout_share(r, t->began, now, &out->stage);
    out->stage_began = af_rollout_stage_start(r, t->began, out->stage);
    out->fallbacks = t->fallbacks;
    out->halted = t->halted;
    memcpy(out->halt_reason, t->halt_reason, sizeof(out->halt_reason));
    out->began = t->began;
}

void af_rollouts_status(struct af_rollouts *rs, const struct af_config *cfg,
                        const struct af_snapshot *snap, double now, size_t i,
                        struct af_rollout_status *out)
{
    struct census old;

    memset(out, 0, sizeof(*out));
    memset(&old, 0, sizeof(old));
    out->stage = -1;
    if (!rs || !cfg || !cfg->policy || i >= cfg->policy->n_rollouts)
        return;
    pthread_mutex_lock(&rs->lock);
    status_locked(rs, cfg, snap, now, i, out, &old);
    pthread_mutex_unlock(&rs->lock);
    census_release(&old);
}

/* A JSON writer with a sticky error (first failure wins). */
struct out {
    struct af_buf *b;
    int err;
};

static void put(struct out *o, const char *s)
{
    if (!o->err)
        o->err = af_buf_puts(o->b, s);
}

static void put_str(struct out *o, const char *s)
{
    if (!o->err)
        o->err = s ? af_buf_json_str(o->b, s) : af_buf_puts(o->b, "null");
}

static void put_fmt(struct out *o, const char *fmt, ...) AF_PRINTF(2, 3);

static void put_fmt(struct out *o, const char *fmt, ...)
{
    char text[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    put(o, text);
}

static void put_time(struct out *o, double t)
{
    char text[AF_RFC3339_LEN];

    if (!(t > 0)) {
        put(o, "null");
        return;
    }
    af_format_rfc3339(t, text, sizeof(text));
    put_str(o, text);
}

static void put_classes(struct out *o, uint32_t mask)
{
    bool first = true;

    put(o, "[");
    for (int c = 0; c < AF_CLASS__COUNT; c++) {
        if (!(mask & (1u << c)))
            continue;
        if (!first)
            put(o, ",");
        put_str(o, af_class_name((enum af_class)c));
        first = false;
    }
    put(o, "]");
}

static void put_selector(struct out *o, const struct af_rollout *r)
{
    put(o, "{\"namespace\":");
    put_str(o, r->ns);
    put(o, ",\"matchLabels\":{");
    for (size_t i = 0; i < r->n_match_labels; i++) {
        if (i)
            put(o, ",");
        put_str(o, r->match_labels[i].key);
        put(o, ":");
        put_str(o, r->match_labels[i].value);
    }
    put(o, "},\"owner\":");
    if (r->owner_kind) {
        put(o, "{\"kind\":");
        put_str(o, r->owner_kind);
        put(o, ",\"name\":");
        put_str(o, r->owner_name);
        put(o, "}");
    } else {
        put(o, "null");
    }
    put(o, "}");
}

static double finite_or_0(double v)
{
    return isfinite(v) ? v : 0;
}

int af_rollouts_render(struct af_rollouts *rs, const struct af_config *cfg,
                       const struct af_snapshot *snap, double now, struct af_buf *out)
{
    size_t base = out->len, n = cfg && cfg->policy ? cfg->policy->n_rollouts : 0;
    struct out o = {out, 0};

    put(&o, "{\"rollouts\":[");
    for (size_t i = 0; i < n && !o.err; i++) {
        const struct af_rollout *r = &cfg->policy->rollouts[i];
        struct af_rollout_status st;

        af_rollouts_status(rs, cfg, snap, now, i, &st);
        put(&o, i ? ",{\"name\":" : "{\"name\":");
        put_str(&o, r->name);
        put(&o, ",\"kind\":");
        put_str(&o, r->variant ? "variant" : "placement");
        put(&o, ",\"selector\":");
        put_selector(&o, r);
        put(&o, ",\"source\":");
        put_classes(&o, r->source);
        put(&o, ",\"target\":");
        put_classes(&o, r->target);
        put(&o, ",\"fallback\":");
        put_str(&o, r->fallback == AF_FALLBACK_WAIT ? "wait" : "source");
        {
            char a[AF_JSON_NUM_MAX], b[AF_JSON_NUM_MAX];
            put_fmt(&o, ",\"share\":{\"target\":%s,\"achieved\":%s,\"stage\":",
                    af_fmt_json_num(a, finite_or_0(st.share), 6),
                    af_fmt_json_num(b, finite_or_0(st.achieved), 6));
        }
        if (st.stage >= 0) {
            put_fmt(&o, "%d,\"stage_began\":", st.stage);
            put_time(&o, st.stage_began);
        } else {
            put(&o, "null,\"stage_began\":null");
        }
        put_fmt(&o, "},\"units\":{\"target\":%d,\"source\":%d,\"pending\":%d},\"fallbacks\":%llu,"
                    "\"halted\":%s,\"halt_reason\":",
                st.target, st.source, st.pending, (unsigned long long)st.fallbacks,
                st.halted ? "true" : "false");
        put_str(&o, st.halted ? st.halt_reason : NULL);
        put(&o, ",\"began\":");
        put_time(&o, st.began);
        put_fmt(&o, ",\"brake\":{\"not_ready_for_s\":%d,\"restarts\":%d,\"failed\":%s}}",
                r->brake_not_ready_s, r->brake_restarts, r->brake_on_failed ? "true" : "false");
    }
    put(&o, "]}\n");
    if (o.err) {
        out->len = base;
        if (out->buf)
            out->buf[base] = '\0';
    }
    return o.err;
}

/* ---- steering a plan --------------------------------------------------------------------- */

/*
 * The rollout decision for `pod` (rd->rollout -1 when it is in none) and, for a
 * placement rollout, the plan restricted to the classes of its unit's side. A variant
 * rollout is decided by the admission webhook, which rewrote the pod for its side:
 * its requests already pick the side, so the plan is left alone and the decision is
 * only read (an unannotated pod runs as written and is not decided here).
 */
/* A variant pod the webhook has not seen: when its node constraints would keep it on the
 * source, /explain says so (a decision that remembers nothing). */
static void pinned_explain(struct af_rollouts *rs, const struct af_config *cfg,
                           const struct af_snapshot *snap, const struct af_pod_info *pod,
                           double now, int i, struct af_rollout_decision *rd)
{
    struct af_rollout_decision d;
    size_t at = strlen(rd->reason);

    if (!af_placement_constrains(pod->placement))
        return;
    af_rollouts_decide_for(rs, cfg, snap, pod, NULL, now, AF_ROLLOUTS_PEEK, &d);
    if (d.rollout != i || !d.pinned)
        return;
    rd->pinned = true;
    snprintf(rd->reason + at, sizeof(rd->reason) - at, "; the webhook would keep it there: %s",
             d.reason);
}

void af_rollouts_steer(struct af_rollouts *rs, const struct af_config *cfg,
                       const struct af_snapshot *snap, const struct af_pod_info *pod, double now,
                       unsigned flags, struct af_plan *plan, struct af_rollout_decision *rd)
{
    const struct af_rollout *r;
    char why[AF_REASON_MAX], cls[200];
    int i;

    memset(rd, 0, sizeof(*rd));
    rd->rollout = -1;
    if (!rs || !pod || !pod->managed || !cfg->policy || !cfg->policy->n_rollouts)
        return;
    i = af_rollout_match(cfg->policy, pod);
    if (i < 0)
        return;
    r = &cfg->policy->rollouts[i];
    if (r->variant && !pod->rollout_side) {
        rd->rollout = i;
        af_rollout_unit(pod, rd->unit, sizeof(rd->unit));
        snprintf(rd->reason, sizeof(rd->reason),
                 "variant rollout %.63s: the pod carries no accelfit.io/rollout-side annotation "
                 "(the webhook did not rewrite it): it runs as written",
                 r->name);
        pinned_explain(rs, cfg, snap, pod, now, i, rd);
        return;
    }
    af_rollouts_decide_for(rs, cfg, snap, pod, NULL, now,
                          r->variant ? flags | AF_ROLLOUTS_PEEK : flags, rd);
    if (rd->rollout < 0 || r->variant || rd->side == AF_SIDE_NONE)
        return;
    af_class_mask_names(rd->side == AF_SIDE_TARGET ? r->target : r->source, cls, sizeof(cls));
    snprintf(why, sizeof(why), "rollout %.63s steers unit %.70s to its %s side (%.60s)", r->name,
             rd->unit, af_rollout_side_name(rd->side), cls);
    af_plan_restrict(plan, rd->side == AF_SIDE_TARGET ? r->target : r->source, why);
}
