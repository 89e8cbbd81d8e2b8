/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rollouts, the pure part: which rollout a pod belongs to (namespace,
 * matchLabels, controller; a Deployment reaches its pods through ReplicaSets
 * named "<deployment>-<pod-template-hash>"), which unit it is part of (its
 * Job or pod group, else itself), the share in force at a given time (stages
 * advance by start time and minimum duration) and the side a new unit takes
 * (the one that keeps the target's share of units closest to that share).
 * The memory between requests (decisions not yet seen, the brake) lives in
 * src/rollouts/; everything here is a function of its arguments.
 *
 * Pure: no I/O, no allocation, no clock (`now` is passed in).
 */
#include "accelfit/rollout.h"

#include <stdio.h>
#include <string.h>

#include "accelfit/config.h"
#include "accelfit/banned.h"

const char *af_rollout_side_name(enum af_rollout_side s)
{
    switch (s) {
    case AF_SIDE_SOURCE:
        return "source";
    case AF_SIDE_TARGET:
        return "target";
    case AF_SIDE_NONE:
        break;
    }
    return "none";
}

/*
 * A ReplicaSet `rs` of the Deployment `deploy`: the Deployment controller names it
 * "<deploy>-<pod-template-hash>" and labels its pods with that hash. With the label the
 * name must be exactly that; without it the suffix must be one dash-free word, so
 * Deployment "web" does not claim the ReplicaSets of Deployment "web-api".
 */
static bool deployment_owns(const char *deploy, const char *rs, const char *hash)
{
    size_t n = strlen(deploy);

    if (strncmp(deploy, rs, n) || rs[n] != '-' || !rs[n + 1])
        return false;
    if (hash)
        return !strcmp(rs + n + 1, hash);
    return strchr(rs + n + 1, '-') == NULL;
}

static bool owner_matches(const struct af_rollout *r, const struct af_pod_info *pod)
{
    if (!r->owner_kind)
        return true;
    if (!pod->owner_kind || !pod->owner_name)
        return false;
    if (!strcmp(r->owner_kind, "Deployment")) {
        if (strcmp(pod->owner_kind, "ReplicaSet"))
            return false;
        return !r->owner_name ||
               deployment_owns(r->owner_name, pod->owner_name,
                               af_pod_label(pod, "pod-template-hash"));
    }
    if (strcmp(r->owner_kind, pod->owner_kind))
        return false;
    return !r->owner_name || !strcmp(r->owner_name, pod->owner_name);
}

static bool selector_matches(const struct af_rollout *r, const struct af_pod_info *pod)
{
    if (r->ns && (!pod->ns || strcmp(r->ns, pod->ns)))
        return false;
    for (size_t i = 0; i < r->n_match_labels; i++) {
        const char *v = af_pod_label(pod, r->match_labels[i].key);
        if (!v || !r->match_labels[i].value || strcmp(v, r->match_labels[i].value))
            return false;
    }
    return owner_matches(r, pod);
}

int af_rollout_match(const struct af_policy *pol, const struct af_pod_info *pod)
{
    if (!pol || !pod || !pod->managed)
        return -1;
    for (size_t i = 0; i < pol->n_rollouts; i++)
        if (selector_matches(&pol->rollouts[i], pod))
            return (int)i;
    return -1;
}

/* snprintf(out, n, "%s%s", a, b) for n > 0, without printf: a census writes one per
 * managed pod on every snapshot. */
static void join2(char *out, size_t n, const char *a, const char *b)
{
    size_t al = strlen(a), bl = strlen(b);

    if (al > n - 1)
        al = n - 1;
    if (bl > n - 1 - al)
        bl = n - 1 - al;
    memcpy(out, a, al);
    memcpy(out + al, b, bl);
    out[al + bl] = '\0';
}

void af_rollout_unit(const struct af_pod_info *pod, char *out, size_t n)
{
    const char *job = pod ? pod->job_name : NULL;

    if (!n)
        return;
    /* The codec keeps a controller Job as its bare name and a pod group as "PodGroup/NAME"
     * (object names cannot contain '/'). */
    if (job && *job && !strncmp(job, "PodGroup/", 9))
        join2(out, n, "", job);
    else if (job && *job)
        join2(out, n, "Job/", job);
    else if (pod && pod->name && *pod->name)
        join2(out, n, "Pod/", pod->name);
    else if (pod && pod->generate_name && *pod->generate_name)
        /* at admission, before the API server names it: as it will be known, and its owner */
        snprintf(out, n, "Pod/%.60s*%s%.40s%s%.60s", pod->generate_name,
                 pod->owner_kind ? " of " : "", pod->owner_kind ? pod->owner_kind : "",
                 pod->owner_kind ? "/" : "", pod->owner_kind && pod->owner_name ? pod->owner_name : "");
    else if (pod && pod->owner_kind && pod->owner_name)
        snprintf(out, n, "a new Pod of %.40s/%.60s", pod->owner_kind, pod->owner_name);
    else
        snprintf(out, n, "a Pod not named yet");
}

static double clamp_share(double s)
{
    return s > 0 ? (s < 1 ? s : 1) : 0;   /* NaN becomes 0 */
}

double af_rollout_stage_start(const struct af_rollout *r, double began_unix, int stage)
{
    double t;

    if (!r->n_stages || stage < 0 || (size_t)stage >= r->n_stages)
        return 0;
    t = began_unix > r->stages[0].start_unix ? began_unix : r->stages[0].start_unix;
    for (int i = 1; i <= stage; i++) {
        double next = t + r->stages[i - 1].min_duration_s;
        if (r->stages[i].start_unix > next)
            next = r->stages[i].start_unix;
        t = next;
    }
    return t;
}

double af_rollout_share(const struct af_rollout *r, double began_unix, double now, int *stage)
{
    int s = -1;

    if (!r->n_stages) {
        if (stage)
            *stage = -1;
        return clamp_share(r->share);
    }
    /* Each stage begins when the previous one has run its minimum duration and its own
     * start time (if any) has come; the last one lasts. */
    for (size_t i = 0; i < r->n_stages; i++) {
        if (now < af_rollout_stage_start(r, began_unix, (int)i))
            break;
        s = (int)i;
    }
    if (stage)
        *stage = s;
    return s < 0 ? 0 : clamp_share(r->stages[s].share);
}

enum af_rollout_side af_rollout_choose(double share, const struct af_rollout_count *c)
{
    double t = c->target > 0 ? c->target : 0, total = t + (c->source > 0 ? c->source : 0);

    /*
     * After the unit there are total + 1 units. The target's count is closer to
     * share x (total + 1) with the unit when |t + 1 - x| < |t - x|, that is x > t + 1/2;
     * at x == t + 1/2 (a tie, within rounding) the source wins.
     */
    return clamp_share(share) * (total + 1) > t + 0.5 + 1e-9 ? AF_SIDE_TARGET : AF_SIDE_SOURCE;
}

/* ---- records shared between replicas ------------------------------------------------------- */

static void forgiven_union(struct af_rollout_record *out, const struct af_rollout_record *x)
{
    for (size_t i = 0; i < x->n_forgiven; i++) {
        size_t j;
        for (j = 0; j < out->n_forgiven; j++)
            if (!strcmp(out->forgiven[j].pod, x->forgiven[i].pod))
                break;
        if (j < out->n_forgiven) {
            if (x->forgiven[i].restarts > out->forgiven[j].restarts)
                out->forgiven[j].restarts = x->forgiven[i].restarts;
        } else if (out->n_forgiven < AF_ROLLOUT_FORGIVEN_MAX) {
            out->forgiven[out->n_forgiven++] = x->forgiven[i];
        }
    }
}

void af_rollout_record_merge(const struct af_rollout_record *a, const struct af_rollout_record *b,
                             struct af_rollout_record *out)
{
    struct af_rollout_record m;

    if (a->generation != b->generation) {
        bool b_newer = b->began > a->began || (b->began == a->began && b->generation > a->generation);
        *out = b_newer ? *b : *a;
        return;
    }
    m = *b;
    m.began = a->began < b->began ? a->began : b->began;
    if (a->halted_at > b->halted_at) {
        m.halted_at = a->halted_at;
        memcpy(m.halt_reason, a->halt_reason, sizeof(m.halt_reason));
        memcpy(m.halt_pod, a->halt_pod, sizeof(m.halt_pod));
    }
    m.acked_at = a->acked_at > b->acked_at ? a->acked_at : b->acked_at;
    m.n_forgiven = 0;
    forgiven_union(&m, a);
    forgiven_union(&m, b);
    *out = m;
}

bool af_rollout_record_differs(const struct af_rollout_record *a,
                               const struct af_rollout_record *b)
{
    struct af_rollout_record m;

    af_rollout_record_merge(a, b, &m);
    if (m.generation != a->generation || m.began != a->began || m.halted_at != a->halted_at ||
        m.acked_at != a->acked_at || m.n_forgiven != a->n_forgiven)
        return true;
    for (size_t i = 0; i < m.n_forgiven; i++)
        if (strcmp(m.forgiven[i].pod, a->forgiven[i].pod) ||
            m.forgiven[i].restarts != a->forgiven[i].restarts)
            return true;
    return false;
}
