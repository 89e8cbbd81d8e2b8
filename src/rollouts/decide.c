/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Deciding a unit's side: recalled from the pod's annotation, the cache or an
 * earlier decision, else the side furthest below its share, unless the rollout
 * is halted, the target has no room for the pod or its node constraints admit
 * no target node. Also the claim ledger's side of it: decisions claimed under
 * an id, reserves claimed ahead and taken by a pod, and the claims of other
 * replicas absorbed; and the acknowledgment of a halt.
 */
#include "accelfit/placement.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "rollouts/internal.h"
#include "accelfit/banned.h"

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

/* A unit of one rollout, unique across namespaces: "rollout\x1fnamespace/Job/NAME". */
static char *unit_key(const char *rollout, const char *ns, const char *unit)
{
    return af__rollouts_key_write(af_xmalloc(af__rollouts_key_size(rollout, ns, unit)), rollout,
                                  ns, unit);
}

/* Units per side: the census's plus the decisions not yet seen (but `skip`'s own). */
int af__rollouts_count_units(struct af_rollouts *rs, size_t i, const struct pending *skip,
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

/* What decide_locked decides from. */
struct decide_in {
    const struct af_config *cfg;
    const struct af_snapshot *snap;
    const struct af_pod_info *pod;
    const struct af_resources *treq;   /* the pod's requests on the target; NULL: worked out */
    double now;
    unsigned flags;                    /* AF_ROLLOUTS_* */
    const char *claim;                 /* the ledger entry to remember it under; NULL: none */
};

/* The decision for in->pod into `out`; the census it replaces goes to `old`. */
static void decide_locked(struct af_rollouts *rs, const struct decide_in *in,
                          struct af_rollout_decision *out, struct census *old)
{
    const struct af_rollout *r;
    const struct crollout *cr;
    struct track *t;
    struct pending *e = NULL;
    struct af_resources req;
    char *key = NULL, cls[96], stage_text[32] = "";
    enum af_rollout_side side;
    bool anon = af__rollouts_anonymous(in->pod), peek = in->flags & AF_ROLLOUTS_PEEK, room;

    af_assert_held(&rs->lock);
    int stage, i = af_rollout_match(in->cfg->policy, in->pod), total;

    if (i < 0)
        return;
    af__rollouts_census_ensure(rs, in->cfg, in->snap, in->now, old);
    af__rollouts_pending_expire(rs, in->now);
    r = &in->cfg->policy->rollouts[i];
    cr = &rs->census.r[i];
    t = cr->track;
    af__rollouts_forgiven_prune(rs, (size_t)i);
    af__rollouts_brake(rs, (size_t)i, in->now);

    out->rollout = i;
    out->halted = t->halted;
    out->share = af_rollout_share(r, t->began, in->now, &stage);
    if (stage >= 0)
        snprintf(stage_text, sizeof(stage_text), ", stage %d", stage + 1);
    af_rollout_unit(in->pod, out->unit, sizeof(out->unit));
    if (!anon)
        key = unit_key(r->name, in->pod->ns, out->unit);

    /* 1. the pod says (the webhook annotated it) */
    side = parse_side(in->pod->rollout_side);
    if (side != AF_SIDE_NONE) {
        af__rollouts_count_units(rs, (size_t)i, NULL, &out->count);
        out->side = side;
        out->recalled = true;
        af_reasonf(out->reason,
                "rollout %.63s: unit %.100s is on the %s side (annotation "
                "accelfit.io/rollout-side)",
                r->name, out->unit, af_rollout_side_name(side));
        pinned_note(r, cr, in->pod, side, out);
        goto done;
    }
    /* 2. a pod of the unit is in the cache with a side */
    if (key) {
        const struct unit *u = af__rollouts_census_find(&rs->census, key);
        if (u && u->side != AF_SIDE_NONE) {
            af__rollouts_count_units(rs, (size_t)i, NULL, &out->count);
            out->side = u->side;
            out->recalled = true;
            af_reasonf(out->reason,
                    "rollout %.63s: unit %.100s is on the %s side already (a pod of it in the "
                    "cache)",
                    r->name, out->unit, af_rollout_side_name(u->side));
            pinned_note(r, cr, in->pod, u->side, out);
            goto done;
        }
        e = af__rollouts_pending_find(rs, key);
    }
    if (r->variant && in->treq)
        req = *in->treq;
    else
        variant_requests(r, in->pod, &req);
    /* 3. decided earlier and not seen yet: kept, unless it was for a target it cannot take now */
    room = !e || e->side != AF_SIDE_TARGET || target_has_room(cr, &req, in->pod);
    if (e && !(e->side == AF_SIDE_TARGET &&
               (t->halted || (r->fallback == AF_FALLBACK_SOURCE && !room)))) {
        af__rollouts_count_units(rs, (size_t)i, e, &out->count);
        out->side = e->side;
        out->fallback = e->fallback;
        out->recalled = true;
        af_reasonf(out->reason,
                "rollout %.63s: unit %.100s was sent to the %s side %.0f s ago%s (not in the cache "
                "yet)%s",
                r->name, out->unit, af_rollout_side_name(e->side), in->now - e->decided,
                e->fallback ? " for lack of target room" : "",
                room ? "" : "; it waits for room there (fallback: wait)");
        if (!peek)
            e->used = in->now;
        goto done;
    }
    /* 4. a new unit (or one decided again): the side furthest below its share */
    af__rollouts_count_units(rs, (size_t)i, e, &out->count);
    total = out->count.target + out->count.source;
    side = af_rollout_choose(out->share, &out->count);
    if (side == AF_SIDE_TARGET && t->halted) {
        side = AF_SIDE_SOURCE;
        af_reasonf(out->reason,
                "rollout %.63s is halted (%.120s): unit %.60s goes to the source", r->name,
                t->halt_reason, out->unit);
    } else if (side == AF_SIDE_TARGET && (in->flags & AF_ROLLOUTS_NO_TARGET)) {
        side = AF_SIDE_SOURCE;
        out->fallback = true;
        out->unfit = true;
        af_reasonf(out->reason,
                "rollout %.63s: the share sends unit %.80s to the target, but its variant "
                "cannot make the pod run there: it stays on the source",
                r->name, out->unit);
    } else if (side == AF_SIDE_TARGET && target_pinned_away(cr, in->pod)) {
        char what[160];
        side = AF_SIDE_SOURCE;
        out->fallback = true;
        out->pinned = true;
        af_class_mask_names(r->target, cls, sizeof(cls));
        af_placement_describe(in->pod->placement, what, sizeof(what));
        af_reasonf(out->reason,
                "rollout %.63s: the share sends unit %.60s to the target, but its %.150s "
                "admits no %.60s node: it stays on the source",
                r->name, out->unit, what, cls);
    } else if (side == AF_SIDE_TARGET && !target_has_room(cr, &req, in->pod)) {
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
        e = af__rollouts_pending_add(rs, r->name, key, side, in->now);
        key = NULL;
    }
    e->side = side;
    e->fallback = out->fallback;
    e->decided = e->used = in->now;
    if (in->claim) {
        if (e->claim) {   /* decided again: the old entry is not counted here any more */
            size_t at = (size_t)(e - rs->pending);
            af__rollouts_pending_remove(rs, at);   /* retires the old claim */
            e = af__rollouts_pending_add(
                rs, r->name, key ? key : (anon ? NULL : unit_key(r->name, in->pod->ns, out->unit)),
                side, in->now);
            key = NULL;
            e->fallback = out->fallback;
        }
        e->claim = af_xstrdup(in->claim);
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
    decide_locked(rs,
                  &(struct decide_in){.cfg = cfg, .snap = snap, .pod = pod,
                                      .treq = target_requests, .now = now, .flags = flags},
                  out, &old);
    pthread_mutex_unlock(&rs->lock);
    af__rollouts_census_release(&old);
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
    decide_locked(rs,
                  &(struct decide_in){.cfg = cfg, .snap = snap, .pod = pod,
                                      .treq = target_requests, .now = now,
                                      .flags = flags & ~AF_ROLLOUTS_PEEK, .claim = id},
                  out, &old);
    if (out->rollout >= 0 && !out->recalled &&
        (out->side == AF_SIDE_SOURCE || out->side == AF_SIDE_TARGET)) {
        const struct track *t = rs->census.r[out->rollout].track;
        snprintf(claim->id, sizeof(claim->id), "%s", id);
        snprintf(claim->rollout, sizeof(claim->rollout), "%s", t->name);
        claim->generation = t->hash;
        if (!af__rollouts_anonymous(pod))
            snprintf(claim->unit, sizeof(claim->unit), "%s/%s", pod->ns ? pod->ns : "",
                     out->unit);
        claim->side = out->side;
        claim->at = now;
        made = true;
    }
    pthread_mutex_unlock(&rs->lock);
    af__rollouts_census_release(&old);
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
            struct track *t = af__rollouts_track_find(rs, e->rollout);
            if (t && t->fallbacks)
                t->fallbacks--;
        }
        af_free(e->claim);   /* never written: nothing to retire */
        e->claim = NULL;
        af__rollouts_pending_remove(rs, i);
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
    af__rollouts_census_ensure(rs, cfg, snap, now, &old);
    af__rollouts_pending_expire(rs, now);
    t = rs->census.r[i].track;
    af__rollouts_brake(rs, i, now);
    share = af_rollout_share(&cfg->policy->rollouts[i], t->began, now, &stage);
    af__rollouts_count_units(rs, i, NULL, &count);
    /* The side the next new unit would get now; a halted rollout's is the source. What
     * depends on the pod (its room on the target, its node constraints) is judged when a
     * pod takes it (af_rollouts_take_reserve). */
    side = af_rollout_choose(share, &count);
    if (side == AF_SIDE_TARGET && t->halted)
        side = AF_SIDE_SOURCE;
    e = af__rollouts_pending_add(rs, t->name, NULL, side, now);
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
    af__rollouts_census_release(&old);
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
    if (!rs || !cfg || !cfg->policy || !pod || !pod->managed || !af__rollouts_anonymous(pod))
        return false;
    i = af_rollout_match(cfg->policy, pod);
    if (i < 0)
        return false;
    pthread_mutex_lock(&rs->lock);
    af__rollouts_census_ensure(rs, cfg, snap, now, &old);
    af__rollouts_pending_expire(rs, now);
    r = &cfg->policy->rollouts[i];
    cr = &rs->census.r[i];
    t = cr->track;
    af__rollouts_brake(rs, (size_t)i, now);
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
    af__rollouts_count_units(rs, (size_t)i, NULL, &out->count);
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
    af__rollouts_census_release(&old);
    return taken;
}

void af_rollouts_release(struct af_rollouts *rs, const char *id)
{
    pthread_mutex_lock(&rs->lock);
    for (size_t i = rs->n_pending; i-- > 0;)
        if (rs->pending[i].reserve && rs->pending[i].claim && !strcmp(rs->pending[i].claim, id))
            /* retired: the ledger's copy is not absorbed again */
            af__rollouts_pending_remove(rs, i);
    pthread_mutex_unlock(&rs->lock);
}

/* A set of borrowed strings: what af_rollouts_absorb_claims looks up. */
struct strset {
    const char **s;
    size_t n, cap;
    struct af_index ix;
};

static void strset_init(struct strset *set, size_t cap)
{
    set->s = af_xmalloc((cap + 1) * sizeof(*set->s));
    set->n = 0;
    set->cap = cap;
    af_index_init(&set->ix, cap, NULL);
}

static void strset_release(struct strset *set)
{
    af_free(set->s);
    af_index_release(&set->ix);
}

static bool strset_has(const struct strset *set, const char *s)
{
    uint32_t h = af__rollouts_hash_str(s), i;
    size_t walk = af_index_start(&set->ix, h);

    while (af_index_next(&set->ix, h, &walk, &i))
        if (!strcmp(set->s[i], s))
            return true;
    return false;
}

/* Adds `s` (borrowed) unless it is there; the set was sized for it at init. */
static void strset_add(struct strset *set, const char *s)
{
    if (strset_has(set, s))
        return;
    af_assert(set->n < set->cap);
    set->s[set->n] = s;
    af_index_add(&set->ix, af__rollouts_hash_str(s), set->n++);
}

void af_rollouts_absorb_claims(struct af_rollouts *rs, const struct af_rollout_claim *v,
                               size_t n, double now, bool *keep)
{
    struct strset retired, claimed, keys;

    pthread_mutex_lock(&rs->lock);
    af__rollouts_pending_expire(rs, now);
    af__rollouts_retired_expire(rs, now);
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
        const struct track *t = af__rollouts_track_find(rs, c->rollout);
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
                    /* a reserve is anonymous: no key in `keys` */
                    af__rollouts_pending_remove(rs, k);
            continue;
        }
        keep[i] = now - at <= (c->reserve ? AF_ROLLOUT_RESERVE_TTL_S : AF_ROLLOUT_PENDING_TTL_S) &&
                  !strset_has(&retired, c->id) &&
                  !(rs->have_census && af__rollouts_census_has_claim(&rs->census, c->id));
        if (!keep[i] || strset_has(&claimed, c->id) ||
            (c->side != AF_SIDE_SOURCE && c->side != AF_SIDE_TARGET) ||
            !t || t->hash != c->generation ||   /* not a rollout of this generation here */
            rs->n_pending >= AF_ROLLOUT_PENDING_MAX)
            continue;
        if (c->unit[0]) {
            key = af_xasprintf("%s\x1f%s", c->rollout, c->unit);
            u = rs->have_census ? af__rollouts_census_find(&rs->census, key) : NULL;
            if (strset_has(&keys, key)) {   /* decided here too */
                af_free(key);
                continue;
            }
        } else {
            u = NULL;
        }
        e = af__rollouts_pending_add(rs, t->name, key, c->side, at);
        e->claim = af_xstrdup(c->id);
        e->reserve = c->reserve;
        if (u && u->side != AF_SIDE_NONE) {   /* its unit is in the cache already */
            af__rollouts_pending_remove(rs, rs->n_pending - 1);
            keep[i] = false;
            continue;
        }
        strset_add(&claimed, e->claim);
        if (e->key)
            strset_add(&keys, e->key);
    }
    pthread_mutex_unlock(&rs->lock);
    strset_release(&retired);
    strset_release(&claimed);
    strset_release(&keys);
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
    t = af__rollouts_track_find(rs, name);
    if (!t) {
        rc = AF_ENOENT;
    } else if (t->halted) {
        for (size_t j = 0; j < t->culprits.n; j++)
            af__rollouts_culprits_add(&t->forgiven, t->culprits.v[j].key,
                                      t->culprits.v[j].restarts);
        af__rollouts_culprits_clear(&t->culprits);
        t->halted = false;
        t->halt_reason[0] = '\0';
        t->acked_at = af_wall_time();
        if (t->acked_at < t->halted_at)
            t->acked_at = t->halted_at;   /* halted iff halted_at > acked_at */
        af__rollouts_changed(rs);
        AF_LOG(AF_LOG_INFO, "rollout brake acknowledged: new units may go to the target",
               "rollout", name, NULL);
    }
    pthread_mutex_unlock(&rs->lock);
    return rc;
}
