/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Steering a plan: a pod of a placement rollout has its plan restricted to the
 * classes of its unit's side; a variant rollout's pod, rewritten by the
 * webhook, is only read.
 */
#include "accelfit/decide.h"
#include "accelfit/placement.h"

#include <stdio.h>
#include <string.h>

#include "rollouts/internal.h"
#include "accelfit/banned.h"

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
