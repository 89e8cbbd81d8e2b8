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
 *
 * This file keeps the state itself: its records, made, found and freed, and the
 * hash of a policy's rollout that begins it again when it changes. The census is
 * census.c, the brake brake.c, deciding decide.c, the shared records shared.c,
 * status and rendering status.c, steering a plan steer.c (rollouts/internal.h).
 */
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "rollouts/internal.h"
#include "accelfit/banned.h"

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

uint64_t af__rollouts_rollout_hash(const struct af_rollout *r)
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

void af__rollouts_changed(struct af_rollouts *rs)
{
    if (rs->on_change)
        rs->on_change(rs->change_ud);
}

void af__rollouts_culprits_clear(struct culprits *c)
{
    for (size_t i = 0; i < c->n; i++)
        af_free(c->v[i].key);
    c->n = 0;
}

void af__rollouts_culprits_add(struct culprits *c, const char *key, int restarts)
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

const struct culprit *af__rollouts_culprits_find(const struct culprits *c, const char *key)
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
    af__rollouts_culprits_clear(&t->culprits);
    af__rollouts_culprits_clear(&t->forgiven);
    af_free(t->culprits.v);
    af_free(t->forgiven.v);
    af_free(t->name);
    af_free(t);
}

struct pending *af__rollouts_pending_add(struct af_rollouts *rs, const char *rollout, char *key,
                                         enum af_rollout_side side, double decided)
{
    struct pending *e;

    AF_GROW(rs->pending, rs->cap_pending, rs->n_pending + 1);
    e = &rs->pending[rs->n_pending++];
    memset(e, 0, sizeof(*e));
    e->rollout = af_xstrdup(rollout);
    e->key = key;
    e->side = side;
    e->decided = e->used = decided;
    return e;
}

void af__rollouts_pending_remove(struct af_rollouts *rs, size_t i)
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

void af__rollouts_retired_expire(struct af_rollouts *rs, double now)
{
    for (size_t i = rs->n_retired; i-- > 0;) {
        if (now - rs->retired[i].decided <= 2 * AF_ROLLOUT_PENDING_TTL_S)
            continue;
        af_free(rs->retired[i].claim);
        rs->retired[i] = rs->retired[--rs->n_retired];
    }
}

void af__rollouts_readiness_free(struct readiness *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        af_free(v[i].key);
    af_free(v);
}

void af__rollouts_census_release(struct census *c)
{
    af_snapshot_unref(c->snap);
    af_config_unref(c->cfg);
    af_arena_release(&c->ar);
    af_free(c->units);
    af_index_release(&c->ix);
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
        af__rollouts_census_release(&rs->census);
    for (size_t i = 0; i < rs->n_tracks; i++)
        track_free(rs->tracks[i]);
    af_free(rs->tracks);
    while (rs->n_pending)
        af__rollouts_pending_remove(rs, rs->n_pending - 1);
    af_free(rs->pending);
    af__rollouts_retired_expire(rs, INFINITY);
    af_free(rs->retired);
    af__rollouts_readiness_free(rs->ready, rs->n_ready);
    af_free(rs->remote);
    pthread_mutex_destroy(&rs->lock);
    af_free(rs);
}

struct track *af__rollouts_track_find(struct af_rollouts *rs, const char *name)
{
    for (size_t i = 0; i < rs->n_tracks; i++)
        if (!strcmp(rs->tracks[i]->name, name))
            return rs->tracks[i];
    return NULL;
}

/* The record the API server last gave for rollout `name`, or NULL. */
const struct af_rollout_record *af__rollouts_remote_find(const struct af_rollouts *rs,
                                                         const char *name)
{
    for (size_t i = 0; i < rs->n_remote; i++)
        if (!strcmp(rs->remote[i].name, name))
            return &rs->remote[i];
    return NULL;
}

/* The track of rollout `r`, created when first seen (from the shared record when it is of
 * this generation) and begun again when it changed. */
struct track *af__rollouts_track_sync(struct af_rollouts *rs, const struct af_rollout *r,
                                      double now)
{
    uint64_t h = af__rollouts_rollout_hash(r);
    struct track *t = af__rollouts_track_find(rs, r->name);

    if (!t) {
        t = af_xcalloc(1, sizeof(*t));
        t->name = af_xstrdup(r->name);
        t->hash = h;
        t->began = now;
        AF_GROW(rs->tracks, rs->cap_tracks, rs->n_tracks + 1);
        rs->tracks[rs->n_tracks++] = t;
        af__rollouts_apply_record(rs, t, af__rollouts_remote_find(rs, r->name));
        af__rollouts_changed(rs);
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
        af__rollouts_culprits_clear(&t->culprits);
        af__rollouts_culprits_clear(&t->forgiven);
        af__rollouts_changed(rs);
    }
    return t;
}

/* Forgets the rollouts the policy no longer has, and their decisions. */
void af__rollouts_tracks_prune(struct af_rollouts *rs, const struct af_policy *pol)
{
    for (size_t i = rs->n_tracks; i-- > 0;) {
        bool keep = false;
        for (size_t j = 0; pol && j < pol->n_rollouts && !keep; j++)
            keep = !strcmp(pol->rollouts[j].name, rs->tracks[i]->name);
        if (keep)
            continue;
        for (size_t p = rs->n_pending; p-- > 0;)
            if (!strcmp(rs->pending[p].rollout, rs->tracks[i]->name))
                af__rollouts_pending_remove(rs, p);
        track_free(rs->tracks[i]);
        rs->tracks[i] = rs->tracks[--rs->n_tracks];
    }
}
