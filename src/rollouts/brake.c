/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The brake: a rollout halts when a pod on its target side fails as the policy
 * says (Failed, restarts, not Ready for too long); an acknowledgment forgives
 * the pods failing then, and only what they do afterwards counts again.
 */
#include <stdio.h>
#include <string.h>

#include "rollouts/internal.h"
#include "accelfit/banned.h"

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

/* "namespace/name": a pod's key among the culprits and the forgiven. */
static void pod_key(const struct af_pod_info *p, char *key, size_t n)
{
    snprintf(key, n, "%s/%s", p->ns ? p->ns : "", p->name ? p->name : "");
}

/* Evaluates the brake of rollout `i` at `now`: halts it when a target pod fails. */
void af__rollouts_brake(struct af_rollouts *rs, size_t i, double now)
{
    const struct census *c = &rs->census;
    const struct af_rollout *r = &c->cfg->policy->rollouts[i];
    const struct crollout *cr = &c->r[i];
    struct track *t = cr->track;
    char first[AF_REASON_MAX] = "";
    size_t n = 0;

    af__rollouts_culprits_clear(&t->culprits);
    for (size_t j = 0; j < cr->n_tpods; j++) {
        const struct af_pod_info *p = cr->tpods[j];
        char key[300], why[AF_REASON_MAX];
        const struct culprit *f = NULL;
        /* Every decision of the rollout runs this over its target pods: a pod's key is
         * written only when there are forgiven pods to look it up in, or it fails. */
        key[0] = '\0';
        if (t->forgiven.n) {
            pod_key(p, key, sizeof(key));
            f = af__rollouts_culprits_find(&t->forgiven, key);
        }
        if (!failing(r, p, cr->tsince[j], f, now, why, sizeof(why)))
            continue;
        if (!key[0])
            pod_key(p, key, sizeof(key));
        af__rollouts_culprits_add(&t->culprits, key, p->restarts);
        if (!n++)
            memcpy(first, why, sizeof(first));
    }
    if (t->forgive_next) {
        /* the policy changed: what fails now is what the change answered */
        for (size_t j = 0; j < t->culprits.n; j++)
            af__rollouts_culprits_add(&t->forgiven, t->culprits.v[j].key,
                                      t->culprits.v[j].restarts);
        if (t->culprits.n)
            af__rollouts_changed(rs);
        af__rollouts_culprits_clear(&t->culprits);
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
    af__rollouts_changed(rs);
    if (n > 1)
        snprintf(t->halt_reason, sizeof(t->halt_reason), "%.190s; and %zu more", first, n - 1);
    else
        memcpy(t->halt_reason, first, sizeof(t->halt_reason));
    AF_LOG(AF_LOG_WARN, "rollout halted: no new units go to the target until acknowledged",
           "rollout", r->name, "reason", t->halt_reason, NULL);
}

/* Forgiven pods that are gone, or healthy again, need no memory: a new failure of theirs
 * is a new failure. */
void af__rollouts_forgiven_prune(struct af_rollouts *rs, size_t i)
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
