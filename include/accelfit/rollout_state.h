/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rollout_state: what a running accelfit remembers about rollouts between
 * requests — units decided and not yet seen in the cache, when each rollout
 * began (each stage's start follows from it: af_rollout_stage_start), and which
 * rollouts the brake has halted and why. The API
 * server stays the shared state: every count is taken from the cache (pods
 * annotated with the side they were given, or bound to a node of a side's
 * class); this memory only covers the seconds before the cache catches up.
 *
 * Thread-safe: the HTTP workers call it concurrently (one mutex). What it
 * derives from a snapshot (units per side, target pods, target nodes) is
 * computed once per snapshot and policy and kept, with a reference on both,
 * until the next one comes.
 *
 * The brake, evaluated at each decision and status: a target pod (its unit on
 * the target side) halts the rollout when it ended Failed, when its containers
 * restarted brake_restarts times or more, or when it has not been Ready for
 * brake_not_ready_s: counted from when this process saw it turn NotReady after
 * seeing it Ready, else from its start (so a long-running pod's readiness blip
 * is not ten minutes of failure, and a pod that never became Ready is caught).
 * A halt lasts until af_rollouts_ack or a change of the rollout in the policy.
 *
 * A rollout begins when this process first sees it; a change to its fields in
 * the policy (a hash of them) begins it again: stages from the first, the brake
 * released and the target pods failing at that moment forgiven. When the state is
 * shared (af_rollouts_set_observer, src/kube/state.c), a rollout's begin, halt,
 * acknowledgement and forgiven pods are records every replica merges into its own
 * (af_rollouts_absorb): a restarted replica resumes the stage and the halt, and no
 * halt is made here before the shared state was read once (for at most
 * AF_ROLLOUT_STATE_READ_GRACE_S). Without it (--demo,
 * --cluster) nothing is persisted: a restart begins every rollout again.
 */
#ifndef AF_ROLLOUT_STATE_H
#define AF_ROLLOUT_STATE_H

#include "accelfit/cache.h"
#include "accelfit/config.h"
#include "accelfit/rollout.h"
#include "accelfit/select.h"
#include "accelfit/util.h"

struct af_rollouts;

struct af_rollouts *af_rollouts_new(void);
void af_rollouts_free(struct af_rollouts *rs);   /* NULL is fine */

struct af_rollout_decision {
    int rollout;                       /* index into cfg->policy->rollouts; -1: not in one */
    enum af_rollout_side side;
    bool fallback;                     /* the share asked for the target, which had no room */
    /* The pod's nodeName, nodeSelector or required node affinity admits no node of the
     * target's classes: the unit stays on the source (counted with the fallbacks). */
    bool pinned;
    /* The variant cannot make the pod run on the target (AF_ROLLOUTS_NO_TARGET: a DRA claim
     * template it swaps in that the cluster does not have): the unit stays on the source
     * (counted with the fallbacks). */
    bool unfit;
    bool halted;                       /* the brake is on: the target takes no new units */
    double share;                      /* target share in force */
    struct af_rollout_count count;     /* what the decision counted (before this unit) */
    bool recalled;                     /* the side given earlier (annotation, cache, memory) */
    char unit[160];
    char reason[AF_REASON_MAX];
};

/*
 * Decides the side of the pod's unit, or recalls the side already given to it (an
 * annotation on the pod, a unit-mate in the cache, or a decision not yet seen).
 * `now` is the wall clock in seconds; `snap` may be NULL (nothing counted). A pod
 * that is in no rollout (not managed, or no selector matches) gets rollout -1 and
 * nothing is remembered. Cannot fail.
 *
 * How it counts: for each managed pod of the rollout in the snapshot, its unit's side
 * is its accelfit.io/rollout-side annotation, else the side whose classes hold the
 * class of the node it is bound to, else (pending and unannotated) this process's own
 * decision; units are counted, not pods (a unit with pods on both sides counts on the
 * target). A terminal pod counts only as part of a Job or pod group (a finished Job
 * still took its share; a Deployment's Failed replica is replaced by a new unit).
 *
 * A decision is remembered until the cache shows the unit with a side, or until it
 * has gone unused for AF_ROLLOUT_PENDING_TTL_S. A recalled decision for the target
 * whose unit is not on the target yet is made again when the brake is on, or when the
 * target has no room and the rollout falls back to the source.
 *
 * A pod without a name (at admission, under generateName) is an anonymous unit of
 * its own: pass NULL or "" as its name, never the generateName prefix. Its decision is
 * counted until a unit of that rollout and side the cache had not shown before
 * appears (its pod, named by then), or the TTL.
 *
 * Room, for the fallback: some node of a target class in the snapshot, not cordoned,
 * with room for the requests in allocatable - used (and a free pod slot).
 */
void af_rollouts_decide(struct af_rollouts *rs, const struct af_config *cfg,
                        const struct af_snapshot *snap, const struct af_pod_info *pod, double now,
                        struct af_rollout_decision *out);

enum af_rollouts_flags {
    AF_ROLLOUTS_PEEK = 1 << 0,   /* decide without remembering anything (/explain) */
    /* the pod cannot take the target (the webhook found the variant's rewrite would not run):
     * a new unit the share sends there stays on the source, counted with the fallbacks, as a
     * pinned one does; a unit already on a side keeps it */
    AF_ROLLOUTS_NO_TARGET = 1 << 1,
};

#define AF_ROLLOUT_PENDING_TTL_S 300.0

/*
 * af_rollouts_decide with the requests the pod will have on the target side, for the
 * room check: a variant rollout's rewritten requests (NULL: for a placement rollout the
 * pod's own; for a variant rollout the pod's requests with its accelerator resources
 * replaced by the variant's, as if one container requested an accelerator). `flags`:
 * af_rollouts_flags. Cannot fail.
 */
void af_rollouts_decide_for(struct af_rollouts *rs, const struct af_config *cfg,
                           const struct af_snapshot *snap, const struct af_pod_info *pod,
                           const struct af_resources *target_requests, double now, unsigned flags,
                           struct af_rollout_decision *out);

/*
 * Acknowledges the brake of rollout `name`: new units may go to the target again. The
 * target pods that were failing when the brake was last evaluated are forgiven (they
 * halt the rollout again only if they restart `brake_restarts` more times); a pod that
 * starts failing later halts it again. Shared (af_rollouts_set_observer), the acknowledgement
 * and the forgiven pods reach the other replicas and survive a restart; in memory only, a
 * restarted accelfit halts again on pods that are still failing. Returns 0 (also when the rollout
 * is not halted), or AF_ENOENT when no decision or render has seen a rollout of that name.
 */
int af_rollouts_ack(struct af_rollouts *rs, const char *name) AF_MUST_CHECK;

/* One rollout's state, as /rollouts and /metrics show it. */
struct af_rollout_status {
    double share;                      /* target share in force */
    int stage;                         /* 0-based; -1 without stages or before the first */
    double stage_began;                /* unix seconds; 0 when stage is -1 */
    double achieved;                   /* target / (target + source); 0 without units */
    int target, source;                /* units counted, as a decision counts them */
    int pending;                       /* of those, decided here and not yet in the cache */
    uint64_t fallbacks;                /* units this process sent to the source for lack of
                                        * target room (since it started) */
    bool halted;
    char halt_reason[AF_REASON_MAX];   /* "" when not halted */
    double began;                      /* unix seconds */
};

/*
 * The state of rollout `i` of cfg->policy (evaluating the brake at `now`, as a decision
 * would). `snap` may be NULL. Cannot fail.
 */
void af_rollouts_status(struct af_rollouts *rs, const struct af_config *cfg,
                        const struct af_snapshot *snap, double now, size_t i,
                        struct af_rollout_status *out);

/*
 * GET /rollouts: every rollout's state as JSON (appended to `out`):
 * {"rollouts":[{"name","kind":"placement"|"variant","selector":{...},"source":[classes],
 * "target":[classes],"fallback","share":{"target","achieved","stage","stage_began"},
 * "units":{"target","source","pending"},"fallbacks","halted","halt_reason","began",
 * "brake":{...}}]}. Times are RFC 3339 (UTC). Returns 0 or AF_ETOOBIG (out's cap).
 */
int af_rollouts_render(struct af_rollouts *rs, const struct af_config *cfg,
                       const struct af_snapshot *snap, double now, struct af_buf *out) AF_MUST_CHECK;

/*
 * The rollout decision for `pod` (rd->rollout -1 when it is in none, or when `rs` is
 * NULL) and, for a placement rollout, `plan` restricted to the classes of the side its
 * unit was given (af_plan_restrict, with the reason). A variant rollout is decided by the
 * admission webhook, which rewrote the pod for its side: its requests already pick the
 * side, so the plan is left alone and the decision is only read (PEEK); a pod without
 * the side annotation runs as written. What the server's filter, prioritize, preempt
 * and /explain, and the simulator, call before af_filter. Cannot fail.
 */
struct af_plan;
void af_rollouts_steer(struct af_rollouts *rs, const struct af_config *cfg,
                       const struct af_snapshot *snap, const struct af_pod_info *pod, double now,
                       unsigned flags, struct af_plan *plan, struct af_rollout_decision *rd);

/* ---- the claim ledger: one share, whichever replica answers (docs/rollouts.md) -------------- */

/* The ConfigMap, beside AF_ROLLOUT_STATE_OBJECT, that holds the ledger. */
#define AF_ROLLOUT_CLAIMS_OBJECT "accelfit-rollout-claims"
/* Entries of the ledger written and read at most (the newest; a ConfigMap < 1 MiB). */
#define AF_ROLLOUT_CLAIMS_MAX 2000
/* An entry's time is taken as at most this far ahead of the reader's clock. */
#define AF_ROLLOUT_CLAIM_SKEW_S 30.0
/* Decisions not yet seen that one replica counts at most: ledger entries past it wait. */
#define AF_ROLLOUT_PENDING_MAX (4 * AF_ROLLOUT_CLAIMS_MAX)

/*
 * af_rollouts_decide_for for a decision that is about to be claimed in the ledger (`flags`:
 * af_rollouts_flags, PEEK ignored; AF_ROLLOUTS_NO_TARGET when the pod cannot take the target):
 * when the unit is new (not recalled: no annotation, no unit-mate in the cache, no
 * decision remembered), the decision is remembered under ledger entry `id` and *claim is
 * filled with it; returns true then. Returns false (claim zeroed) for a recalled side, a pod
 * in no rollout, or no side. Cannot fail.
 */
bool af_rollouts_decide_claim(struct af_rollouts *rs, const struct af_config *cfg,
                              const struct af_snapshot *snap, const struct af_pod_info *pod,
                              const struct af_resources *target_requests, double now,
                              unsigned flags, const char *id, struct af_rollout_decision *out,
                              struct af_rollout_claim *claim);

/* Forgets the decision made under ledger entry `id` (its write was refused: it will be
 * decided again), and the fallback it counted. Nothing when there is none. Cannot fail. */
void af_rollouts_unclaim(struct af_rollouts *rs, const char *id);

/* A reserve (af_rollout_claim.reserve) is taken by a pod within this long of its claim, by
 * the replica that claimed it; after that it is given back (released) unused. */
#define AF_ROLLOUT_RESERVE_LEASE_S 10.0
/* Reserves a replica claims of one rollout in one write, when it holds none: the webhook
 * answers that many new units from them before one of them may wait for a write again. A
 * block starts at AF_ROLLOUT_RESERVE_BLOCK; the next is twice as large when one was used up
 * within AF_ROLLOUT_RESERVE_FAST_S (up to AF_ROLLOUT_RESERVE_BLOCK_MAX), so that at a high
 * rate of creates the write of a block is rare beside the creates it serves, and half as
 * large (not below the first) when one lasted four times that or was given back unused. */
#define AF_ROLLOUT_RESERVE_BLOCK 16
#define AF_ROLLOUT_RESERVE_BLOCK_MAX 128
#define AF_ROLLOUT_RESERVE_FAST_S 2.0
/* A reserve no pod has taken is counted by every replica this long at most (the lease, and
 * room for the clocks' skew and a stopped replica). */
#define AF_ROLLOUT_RESERVE_TTL_S 60.0

/*
 * Claims a reserve of rollout `rollout` under ledger entry `id`: the side the next new unit
 * would get now (the source while the rollout is halted), remembered as a decision not yet
 * seen, so that every later decision counts it, and *claim filled. False (claim zeroed)
 * when cfg has no rollout of that name. Cannot fail.
 */
bool af_rollouts_reserve(struct af_rollouts *rs, const struct af_config *cfg,
                         const struct af_snapshot *snap, const char *rollout, double now,
                         const char *id, struct af_rollout_claim *claim);

/*
 * Gives `pod`, a new anonymous unit (no name, no Job, no pod group: a ReplicaSet's
 * replica), the side of this replica's reserve `id` of the rollout's `generation`: the
 * decision into *out, and true. False (nothing changed) when there is no such reserve, the
 * pod is not anonymous or in another rollout, the generation or the share in force changed
 * since it was claimed (a stage began), or the reserve is
 * for the target and the pod cannot go there now (halted, its constraints admit no target
 * node, no room when the rollout falls back to the source). Cannot fail.
 */
bool af_rollouts_take_reserve(struct af_rollouts *rs, const struct af_config *cfg,
                              const struct af_snapshot *snap, const struct af_pod_info *pod,
                              const struct af_resources *target_requests, double now,
                              const char *id, uint64_t generation,
                              struct af_rollout_decision *out);

/* Forgets reserve `id` no pod took (it is given back in the ledger): retired, not counted.
 * Nothing when there is none. Cannot fail. */
void af_rollouts_release(struct af_rollouts *rs, const char *id);

/*
 * The ledger as read (`v`, borrowed, `n` entries): each entry this replica does not count
 * yet becomes a decision not yet seen, counted by every later decision as if made here
 * (unless its unit is in the cache with a side already, its rollout is not one this replica
 * runs, it is of another generation of the rollout, or AF_ROLLOUT_PENDING_MAX decisions are
 * pending already). An entry's time is taken as at most AF_ROLLOUT_CLAIM_SKEW_S ahead of
 * `now`, so that none lives longer than the TTL. keep[i] (n of them) says whether entry i
 * should stay in the ledger: false once older than AF_ROLLOUT_PENDING_TTL_S or no longer
 * counted here (its unit seen in the cache, or expired). A reserve's entry lives
 * AF_ROLLOUT_RESERVE_TTL_S instead; a released one ends the reserve it names here and stays
 * that long, so that every replica reads it. Linear in n and the decisions pending (ids and
 * units are looked up in hash sets). Cannot fail.
 */
void af_rollouts_absorb_claims(struct af_rollouts *rs, const struct af_rollout_claim *v,
                               size_t n, double now, bool *keep);

/* ---- the state replicas share (src/kube/state.c keeps it in the API server) ------------- */

/* The ConfigMap, in accelfit's namespace, that holds it. */
#define AF_ROLLOUT_STATE_OBJECT "accelfit-rollouts"
/* Shared, the brake halts nothing until the shared state was read once (a halt could undo an
 * acknowledgement made elsewhere), or this long after sharing began (it cannot be read). */
#define AF_ROLLOUT_STATE_READ_GRACE_S 30.0
/* Why a replica that has not read it yet is not ready for the webhook (/readyz, warnings). */
#define AF_ROLLOUT_STATE_UNREAD                                                                    \
    "rollout state not read yet: ConfigMap " AF_ROLLOUT_STATE_OBJECT " (at most 30 s)"

/*
 * Calls `fn(ud)` (NULL: nobody) on every change of what replicas share: a rollout begun or
 * begun again, halted, acknowledged, pods forgiven. It is called with the state's lock held,
 * from request threads: it must only wake someone (af_kube_state_notify), never block.
 */
void af_rollouts_set_observer(struct af_rollouts *rs, void (*fn)(void *ud), void *ud);

/*
 * True while the state is shared and not read once yet, for at most
 * AF_ROLLOUT_STATE_READ_GRACE_S after sharing began (wall clock `now`): a replica that
 * decided now would decide as a rollout just begun would (the first stage), so it is not
 * ready for the webhook. NULL is fine (false). Cannot fail.
 */
bool af_rollouts_state_unread(struct af_rollouts *rs, double now);

/*
 * Every rollout of cfg->policy (begun now when not seen before), as records at `now`: a new
 * array in *out (af_free), its length returned. Cannot fail.
 */
size_t af_rollouts_export(struct af_rollouts *rs, const struct af_config *cfg, double now,
                          struct af_rollout_record **out);

/*
 * What the API server holds (every record, `v` borrowed): kept, and merged into each
 * rollout of the same generation (af_rollout_record_merge): the earliest begin, the latest
 * halt and acknowledgement, the forgiven pods; an acknowledgement made elsewhere forgives
 * the pods failing here. A rollout seen later starts from its record. Cannot fail.
 */
void af_rollouts_absorb(struct af_rollouts *rs, const struct af_rollout_record *v, size_t n);

#endif
