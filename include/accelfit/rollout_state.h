/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rollout_state: what a running accelfit remembers about rollouts between
 * requests — units decided and not yet seen in the cache, when each rollout
 * (and stage) began, and which rollouts the brake has halted and why. The API
 * server stays the shared state: every count is taken from the cache (pods
 * annotated with the side they were given, or bound to a node of a side's
 * class); this memory only covers the seconds before the cache catches up.
 *
 * Thread-safe: the HTTP workers call it concurrently.
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
    bool halted;                       /* the brake is on: the target takes no new units */
    double share;                      /* target share in force */
    struct af_rollout_count count;     /* what the decision counted (before this unit) */
    char unit[160];
    char reason[AF_REASON_MAX];
};

/*
 * Decides the side of the pod's unit, or recalls the side already given to it (an
 * annotation on the pod, a unit-mate in the cache, or a decision not yet seen).
 * `now` is the wall clock in seconds. Cannot fail.
 */
void af_rollouts_decide(struct af_rollouts *rs, const struct af_config *cfg,
                        const struct af_snapshot *snap, const struct af_pod_info *pod, double now,
                        struct af_rollout_decision *out);

/* Acknowledges the brake of rollout `name`: new units may go to the target again. */
int af_rollouts_ack(struct af_rollouts *rs, const char *name) AF_MUST_CHECK;

/* GET /rollouts: every rollout's state as JSON (appended to `out`). */
int af_rollouts_render(struct af_rollouts *rs, const struct af_config *cfg,
                       const struct af_snapshot *snap, double now, struct af_buf *out) AF_MUST_CHECK;

#endif
