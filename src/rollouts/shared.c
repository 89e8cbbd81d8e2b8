/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The state replicas share through the API server (src/kube/state.c): each
 * rollout's record exported for it to write, and the records it reads merged
 * in, so an acknowledgment on one replica releases the brake on the others and
 * a restart resumes the stage.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "rollouts/internal.h"
#include "accelfit/banned.h"

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
void af__rollouts_apply_record(struct af_rollouts *rs, struct track *t,
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
        if (!af__rollouts_culprits_find(&t->forgiven, m.forgiven[i].pod))
            af__rollouts_culprits_add(&t->forgiven, m.forgiven[i].pod, m.forgiven[i].restarts);
    t->halted = t->halted_at > t->acked_at;
    if (was && !t->halted) {
        for (size_t j = 0; j < t->culprits.n; j++)
            af__rollouts_culprits_add(&t->forgiven, t->culprits.v[j].key,
                                      t->culprits.v[j].restarts);
        af__rollouts_culprits_clear(&t->culprits);
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
        (void)af__rollouts_track_sync(rs, &pol->rollouts[i], now);
    *out = af_xcalloc(rs->n_tracks + 1, sizeof(**out));
    for (size_t i = 0; i < rs->n_tracks; i++) {
        const struct track *t = rs->tracks[i];
        struct af_rollout_record *rec = &(*out)[n++];
        track_record(t, rec);
        for (size_t j = 0; pol && j < pol->n_rollouts; j++) {
            const struct af_rollout *r = &pol->rollouts[j];
            if (strcmp(r->name, t->name) || af__rollouts_rollout_hash(r) != t->hash)
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
        af__rollouts_apply_record(rs, rs->tracks[i],
                                  af__rollouts_remote_find(rs, rs->tracks[i]->name));
    pthread_mutex_unlock(&rs->lock);
}
