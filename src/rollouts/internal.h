/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rollouts' state shared by its parts (not a public interface):
 *   rollouts.c  the state: its records made, found and freed; a rollout's hash
 *   census.c    the census of one snapshot; what it settles among the decisions
 *   brake.c     the brake: halts, and the pods an acknowledgment forgave
 *   decide.c    room on the target, deciding a unit's side, claims and reserves
 *   shared.c    the records replicas share through the API server
 *   status.c    a rollout's status, and GET /rollouts rendered
 *   steer.c     a plan steered to its unit's side
 * One mutex (af_rollouts.lock) guards everything below it; the functions here that
 * take a struct af_rollouts are called with it held. rollouts.c and shared.c call
 * each other (a track is created from the shared record, a record from a track).
 */
#ifndef AF_ROLLOUTS_INTERNAL_H
#define AF_ROLLOUTS_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "accelfit/rollout_state.h"

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
    struct af_index ix;                 /* the units by key */
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

/* A unit of one rollout, unique across namespaces: "rollout\x1fnamespace/Job/NAME", in
 * `out` of af__rollouts_key_size(...) bytes. */
static inline size_t af__rollouts_key_size(const char *rollout, const char *ns, const char *unit)
{
    return strlen(rollout) + strlen(ns ? ns : "") + strlen(unit) + 3;
}
static inline char *af__rollouts_key_write(char *out, const char *rollout, const char *ns,
                                           const char *unit)
{
    size_t rl = strlen(rollout), nl = strlen(ns ? ns : "");

    memcpy(out, rollout, rl);
    out[rl] = '\x1f';
    memcpy(out + rl + 1, ns ? ns : "", nl);
    out[rl + 1 + nl] = '/';
    memcpy(out + rl + nl + 2, unit, strlen(unit) + 1);
    return out;
}

static inline uint32_t af__rollouts_hash_str(const char *s)
{
    return af_hash_str(AF_HASH_INIT, s);
}

static inline bool af__rollouts_anonymous(const struct af_pod_info *pod)
{
    return !(pod->job_name && *pod->job_name) && !(pod->name && *pod->name);
}

/* ---- rollouts.c: the state --------------------------------------------------------------- */

/* The policy's rollout, hashed: a change begins it again. */
uint64_t af__rollouts_rollout_hash(const struct af_rollout *r);
/* Tells the observer (af_rollouts_set_observer) that the shared state changed. */
void af__rollouts_changed(struct af_rollouts *rs);
void af__rollouts_culprits_clear(struct culprits *c);
void af__rollouts_culprits_add(struct culprits *c, const char *key, int restarts);
const struct culprit *af__rollouts_culprits_find(const struct culprits *c, const char *key);
/* Appends a pending entry of rollout `rollout` for unit `key` (steals it; NULL: anonymous),
 * decided and last used at `decided`, and returns it (valid until the next append or
 * removal). */
struct pending *af__rollouts_pending_add(struct af_rollouts *rs, const char *rollout, char *key,
                                         enum af_rollout_side side, double decided);
/* Drops pending entry `i`; its ledger entry, if any, is retired (not absorbed again). */
void af__rollouts_pending_remove(struct af_rollouts *rs, size_t i);
void af__rollouts_retired_expire(struct af_rollouts *rs, double now);
void af__rollouts_readiness_free(struct readiness *v, size_t n);
void af__rollouts_census_release(struct census *c);
struct track *af__rollouts_track_find(struct af_rollouts *rs, const char *name);
/* The record the API server last gave for rollout `name`, or NULL. */
const struct af_rollout_record *af__rollouts_remote_find(const struct af_rollouts *rs,
                                                         const char *name);
/* The track of rollout `r`, created when first seen (from the shared record when it is of
 * this generation) and begun again when it changed. */
struct track *af__rollouts_track_sync(struct af_rollouts *rs, const struct af_rollout *r,
                                      double now);
/* Forgets the rollouts the policy no longer has, and their decisions. */
void af__rollouts_tracks_prune(struct af_rollouts *rs, const struct af_policy *pol);

/* ---- census.c ---------------------------------------------------------------------------- */

const struct unit *af__rollouts_census_find(const struct census *c, const char *key);
/* Whether a pod of the census names ledger entry `id` (the pod of that decision is seen). */
bool af__rollouts_census_has_claim(const struct census *c, const char *id);
/* The pending decision of `key` (NULL: none). */
struct pending *af__rollouts_pending_find(struct af_rollouts *rs, const char *key);
void af__rollouts_pending_expire(struct af_rollouts *rs, double now);
/*
 * Makes rs->census the census of (cfg, snap). The census it replaces goes to `old`, for
 * the caller to release once it has dropped the lock: that may be the last reference on
 * a snapshot of 150,000 pods.
 */
void af__rollouts_census_ensure(struct af_rollouts *rs, const struct af_config *cfg,
                                const struct af_snapshot *snap, double now, struct census *old);

/* ---- brake.c ----------------------------------------------------------------------------- */

/* Evaluates the brake of rollout `i` at `now`: halts it when a target pod fails. */
void af__rollouts_brake(struct af_rollouts *rs, size_t i, double now);
/* Forgiven pods that are gone, or healthy again, need no memory: a new failure of theirs
 * is a new failure. */
void af__rollouts_forgiven_prune(struct af_rollouts *rs, size_t i);

/* ---- decide.c ---------------------------------------------------------------------------- */

/* Units per side: the census's plus the decisions not yet seen (but `skip`'s own). */
int af__rollouts_count_units(struct af_rollouts *rs, size_t i, const struct pending *skip,
                             struct af_rollout_count *c);

/* ---- shared.c ---------------------------------------------------------------------------- */

/*
 * Merges the shared record `rec` (NULL: none) into track `t` when it is of the track's
 * generation: the earliest began, the latest halt and acknowledgement, the forgiven pods.
 * An acknowledgement made elsewhere forgives the pods failing here, as one made here does.
 */
void af__rollouts_apply_record(struct af_rollouts *rs, struct track *t,
                               const struct af_rollout_record *rec);

#endif
