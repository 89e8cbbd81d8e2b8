/* SPDX-License-Identifier: Apache-2.0 */
/*
 * POST /mutate without a transport: the mutating admission webhook that applies
 * variant rollouts (GPU to Inferentia or Trainium) as pods are created. An
 * AdmissionReview in; the pod's rollout and side from rollout_state; a JSONPatch
 * built and checked by the codec; the AdmissionReview response out.
 *
 * The webhook runs with failurePolicy: Ignore, and pods must be created as
 * written whenever accelfit cannot decide: no rollout state, the cache not
 * ready, a pod in no rollout, or anything going wrong is answered allowed with
 * no patch (and, where a person should know, a warning kubectl prints). Only a
 * body that is not an AdmissionReview is answered 400, which the API server
 * treats as a failed call (the failure policy applies). The target side of a
 * variant rollout gets the variant's rewrite; the source side and placement
 * rollouts get only the two annotations that let the cache count the unit. A
 * dry run is decided and patched like a create, without anything remembered
 * (AF_ROLLOUTS_PEEK).
 *
 * With a claim worker (svc->claims: an API server and a state namespace) and a transport
 * that can defer its answer, a pod that is a new unit of a rollout is not decided here: a
 * probe (a PEEK that decides nothing) finds that its side is not recalled, and the review
 * is parked for the worker (claims.c), which decides it counting every replica's recent
 * decisions and writes its claim before the answer goes out, with the ledger entry's id in
 * annotation accelfit.io/rollout-claim. Everything else is answered at once, as above.
 *
 * A variant that swaps DRA claim templates is applied only when every template the pod would
 * be given is in the cluster (the snapshot's DRA objects, in the pod's namespace): otherwise a
 * new unit stays on the source, counted with the fallbacks, and the warning names the
 * template (AF_ROLLOUTS_NO_TARGET). The devices the target templates ask for are the target
 * requests the room check counts.
 *
 * A pod in no rollout that the policy's preferences select (accelfit/prefer.h) gets
 * node affinity from its plan, planned as filter plans it (af_plan_pod, then its
 * tenant's restrictions), so the node an autoscaler launches for the preference is
 * one filter accepts first. Under `when: no-room` the whole cluster is filtered for
 * the pod first, and a node with room means no preference.
 */
#include "accelfit/service.h"
#include "accelfit/webhook.h"

#include <stdio.h>
#include <string.h>

#include "accelfit/budget.h"
#include "accelfit/codec.h"
#include "accelfit/dra.h"
#include "accelfit/prefer.h"
#include "accelfit/rollout.h"
#include "accelfit/rollout_state.h"

#include "service/internal.h"
#include "accelfit/banned.h"

/* A JSONPatch larger than this is not sent (the pod is created as written). */
#define MUTATE_MAX_PATCH (512u * 1024u)

static int bad_request(const struct af_error *err, struct af_buf *out)
{
    char msg[600];
    int rc;

    af_error_format(err, msg, sizeof(msg));
    AF_LOG(AF_LOG_WARN, "cannot decode admission review", "error", msg, NULL);
    af_buf_reset(out);
    rc = af_buf_puts(out, "{\"error\":");
    if (!rc)
        rc = af_buf_json_str(out, msg);
    if (!rc)
        rc = af_buf_puts(out, "}");
    if (rc) {
        af_buf_reset(out);
        if (af_buf_puts(out, "{\"error\":\"malformed AdmissionReview\"}"))
            af_buf_reset(out);
    }
    return 400;
}

/* The index of a second rollout the pod matches after `first`, or -1. */
static int second_match(const struct af_policy *pol, int first, const struct af_pod_info *pod)
{
    struct af_policy rest;
    int r;

    if (first < 0 || (size_t)first + 1 >= pol->n_rollouts)
        return -1;
    rest = *pol;   /* af_rollout_match is pure: a view of the rollouts after `first` */
    rest.rollouts = pol->rollouts + first + 1;
    rest.n_rollouts = pol->n_rollouts - (size_t)first - 1;
    r = af_rollout_match(&rest, pod);
    return r < 0 ? -1 : first + 1 + r;
}

static void add_all(struct af_warnings *w, const struct af_warnings *from)
{
    for (size_t i = 0; i < from->n; i++)
        af_warnings_add(w, "%s", from->text[i]);
}

static const char *pod_label(const struct af_admission *a, const struct af_pod_info *pod)
{
    return pod->name && *pod->name ? pod->name : af_admission_generate_name(a);
}

/* "gpu: one-a100 -> four-neurons, ...": the claims of `pod` the variant makes from another
 * template, for the log; "" when none. */
static void swaps_text(const struct af_pod_info *pod, const struct af_variant *v, char *out,
                       size_t n)
{
    size_t at = 0;

    out[0] = '\0';
    for (int i = 0; i < pod->n_claims && at < n; i++)
        for (size_t k = 0; pod->claims[i].tmpl && k < v->n_claim_templates && at < n; k++)
            if (!strcmp(v->claim_templates[k].key, pod->claims[i].tmpl))
                at += (size_t)snprintf(out + at, n - at, "%s%s: %s -> %s", at ? ", " : "",
                                       pod->claims[i].name, pod->claims[i].tmpl,
                                       v->claim_templates[k].value);
}

/*
 * DRA: the pod on the target side of a variant that swaps claim templates. `req` (the
 * rewritten pod's requests) gets the devices the target templates ask for, so that the room
 * check counts them. Returns false with `why` when a template the pod would be given is not in
 * the cluster (in the pod's namespace, as the API server looks it up): its claim could never
 * be made and the pod would never start, so the unit stays on the source.
 */
static bool variant_claims(const struct af_snapshot *snap, const struct af_pod_info *pod,
                           const struct af_variant *v, struct af_resources *req, char *why,
                           size_t n)
{
    const struct af_dra *d = snap ? snap->dra : NULL;
    struct af_pod_claim_ref refs[AF_POD_CLAIMS_MAX];
    struct af_pod_info p;
    struct af_dra_demand dm;
    bool swapped = false;

    if (!v->n_claim_templates || !pod->n_claims)
        return true;
    for (int i = 0; i < pod->n_claims && i < AF_POD_CLAIMS_MAX; i++) {
        const char *to = NULL;
        refs[i] = pod->claims[i];
        for (size_t k = 0; pod->claims[i].tmpl && k < v->n_claim_templates; k++)
            if (!strcmp(v->claim_templates[k].key, pod->claims[i].tmpl))
                to = v->claim_templates[k].value;
        if (!to)
            continue;
        if (!af_dra_find_template(d, pod->ns, to)) {
            snprintf(why, n, "its claim %.40s would be made from template %.40s/%.60s, which "
                     "the cluster does not have%s",
                     pod->claims[i].name, pod->ns, to, d ? "" : " (no resource.k8s.io/v1)");
            return false;
        }
        refs[i].tmpl = (char *)to;
        refs[i].generated = NULL;
        swapped = true;
    }
    if (!swapped)
        return true;
    memcpy(&p, pod, sizeof(p));   /* a view with the target's claims; never referenced */
    p.claims = refs;
    af_dra_pod_demand(d, &p, &dm);
    for (int r = 0; r < AF_RES__COUNT; r++)
        req->v[r] += dm.need.v[r];
    return true;
}

/*
 * Preferences for a pod in no rollout (accelfit/prefer.h): its plan, the tenant's
 * restrictions, the cluster's room, the affinity patch into `patch`. Anything that goes
 * wrong leaves the pod as written, with a warning when a person should know.
 */
static void prefer(struct af_service *svc, struct af_config *cfg, const struct af_admission *a,
                   const struct af_pod_info *pod, struct af_buf *patch, struct af_warnings *w)
{
    const struct af_policy *pol = cfg->policy;
    struct af_snapshot *snap = NULL;
    struct af_plan *plan = NULL;
    struct af_node_decision *scratch = NULL;
    struct af_preferences *prefs = NULL;
    struct af_tenant_decision td;
    const char *why = NULL;
    char first[AF_REASON_MAX] = "";

    if (!af_prefer_selects(pol, pod))
        return;
    if (!af_service_ready(svc, &why) || !(snap = af_publisher_acquire(svc->pub))) {
        af_warnings_add(w, "accelfit: node preferences not written: %.80s; pod created as "
                           "written",
                        why ? why : "no cluster snapshot");
        goto out;
    }
    plan = af_xmalloc(sizeof(*plan));
    prefs = af_xmalloc(sizeof(*prefs));
    {
        /* as filter plans (the decision order, accelfit/decide.h), without a rollout's side:
         * preferences are for the pods rollouts do not steer */
        struct af__decide_ctx dc = {.svc = svc, .cfg = cfg, .snap = snap};
        struct af_decide_hooks h;
        (void)af__service_hooks(&dc, &h);
        h.rollout = NULL;
        af_decide_plan(pol, cfg->catalog, pod, af_wall_time(), &h, plan, &td);
    }
    scratch = af_xmalloc((snap->n_nodes + 1) * sizeof(*scratch));
    (void)af_prefer_for(pol, cfg->catalog, plan, pod, snap->nodes, snap->n_nodes, scratch,
                        prefs);
    if (af_codec_admission_affinity(a, prefs, patch, w)) {
        af_buf_reset(patch);
        AF_LOG(AF_LOG_WARN, "pod not given node preferences", "namespace", pod->ns, "pod",
               pod_label(a, pod), "why", w->n ? w->text[w->n - 1] : "", NULL);
        goto out;
    }
    if (!prefs->n_terms && !prefs->n_not_in) {
        AF_LOG(AF_LOG_DEBUG, "pod given no node preferences", "namespace", pod->ns, "pod",
               pod_label(a, pod), "why", prefs->why, NULL);
        goto out;
    }
    if (prefs->n_terms)
        snprintf(first, sizeof(first), "%s (%zu values, weight %d)",
                 af_class_name(prefs->terms[0].cls), prefs->terms[0].n_values,
                 prefs->terms[0].weight);
    AF_LOG(AF_LOG_INFO, "pod given node preferences", "namespace", pod->ns, "pod",
           pod_label(a, pod), "rule", plan->sel.rule ? plan->sel.rule : "none", "first",
           first, "terms", prefs->n_terms ? "yes" : "no", "required",
           prefs->n_not_in ? "yes" : "no", "why", prefs->why, NULL);
out:
    af_free(scratch);
    af_free(prefs);
    af_free(plan);
    af_snapshot_unref(snap);
}

/*
 * Decides the pod's side and builds the patch into `patch` (left empty: no change).
 * Everything that goes wrong ends as allowed-unchanged, with a warning when a person
 * should know.
 */
static void decide(struct af_service *svc, const struct af_admission *a, struct af_buf *patch,
                   struct af_warnings *w, struct af__mutate_job *job)
{
    const struct af_pod_info *pod = af_admission_pod(a);
    struct af_config *cfg = af_config_holder_get(svc->config);
    const struct af_policy *pol = cfg ? cfg->policy : NULL;
    struct af_snapshot *snap = NULL;
    struct af_buf target = AF_BUF_INIT(MUTATE_MAX_PATCH);
    struct af_resources target_req;
    struct af_warnings tw;
    struct af_rollout_decision d;
    const struct af_rollout *r;
    struct af_mutation m;
    const char *why = NULL;
    char unfit[2 * AF_REASON_MAX] = "";
    unsigned flags = 0;
    int k, other;

    memset(&tw, 0, sizeof(tw));
    memset(&target_req, 0, sizeof(target_req));
    if (!pod || !pol)
        goto out;
    k = pol->n_rollouts ? af_rollout_match(pol, pod) : -1;
    if (k < 0) {
        if (!job || job->phase != AF__CLAIM_PROBE)
            prefer(svc, cfg, a, pod, patch, w);   /* in no rollout: preferences, if any */
        goto out;
    }
    r = &pol->rollouts[k];
    if (!svc->rollouts) {
        af_warnings_add(w, "accelfit: rollout %.63s not applied: this accelfit keeps no "
                        "rollout state; pod created as written",
                        r->name);
        goto out;
    }
    if (!af_service_ready(svc, &why) || !(snap = af_publisher_acquire(svc->pub))) {
        af_warnings_add(w, "accelfit: rollout %.63s not applied: %.80s; pod created as written",
                        r->name, why ? why : "no cluster snapshot");
        goto out;
    }
    if (af_rollouts_state_unread(svc->rollouts, af_wall_time())) {
        af_warnings_add(w, "accelfit: rollout %.63s not applied: %s; pod created as written",
                        r->name, AF_ROLLOUT_STATE_UNREAD);
        goto out;
    }
    other = second_match(pol, k, pod);
    if (other >= 0)
        af_warnings_add(w, "accelfit: the pod matches rollouts %.63s and %.63s; the first, "
                        "%.63s, applies",
                        r->name, pol->rollouts[other].name, r->name);
    if (r->variant) {
        /* The rewrite comes first: a pod the variant cannot be applied to is not sent to
         * the target (nor counted there), and the rewritten requests are what the target
         * must have room for. */
        memset(&m, 0, sizeof(m));
        m.rollout = r->name;
        m.side = AF_SIDE_TARGET;
        m.variant = r->variant;
        m.source = r->source;
        m.claim = job && job->phase == AF__CLAIM_DECIDE ? job->id : NULL;
        if (af_codec_admission_patch(a, &m, &target, &target_req, &tw)) {
            add_all(w, &tw);
            AF_LOG(AF_LOG_WARN, "pod not mutated", "rollout", r->name, "namespace", pod->ns,
                   "pod", pod_label(a, pod), "why", tw.n ? tw.text[tw.n - 1] : "", NULL);
            goto out;
        }
        if (!variant_claims(snap, pod, r->variant, &target_req, unfit, sizeof(unfit)))
            flags |= AF_ROLLOUTS_NO_TARGET;
    }
    if (job && job->phase == AF__CLAIM_PROBE) {
        uint64_t gen = 0;

        /* Only a new unit waits for the ledger; a recalled side is answered now. */
        af_rollouts_decide_for(svc->rollouts, cfg, snap, pod, r->variant ? &target_req : NULL,
                              af_wall_time(), flags | AF_ROLLOUTS_PEEK, &d);
        job->wants = !af_admission_dry_run(a) && d.rollout == k && !d.recalled &&
                     (d.side == AF_SIDE_SOURCE || d.side == AF_SIDE_TARGET);
        /* A new anonymous unit (a ReplicaSet's replica) takes this replica's reserve, a
         * side claimed in the ledger ahead of it, and needs no write of its own. A named
         * unit waits for its claim: the ledger names it, so that no replica decides it
         * twice; so does one that cannot take the target (its variant's claim template is
         * not in the cluster), whose claim is decided knowing it. */
        if (!job->wants || (flags & AF_ROLLOUTS_NO_TARGET) || (pod->job_name && *pod->job_name) ||
            (pod->name && *pod->name) ||
            !af__claims_take(svc->claims, r->name, job->id, sizeof(job->id), &gen))
            goto out;   /* the probe decides nothing: the answer is decided after it */
        if (!af_rollouts_take_reserve(svc->rollouts, cfg, snap, pod,
                                      r->variant ? &target_req : NULL, af_wall_time(), job->id,
                                      gen, &d)) {
            af__claims_give_back(svc->claims, r->name, job->id, gen);
            goto out;
        }
        job->wants = false;
        job->reserved = job->claimed = true;
        af__claims_count_ahead(svc->claims);
        if (d.side == AF_SIDE_TARGET && r->variant) {
            /* the rewrite again, now naming the reserve's entry */
            af_buf_reset(&target);
            memset(&tw, 0, sizeof(tw));
            m.claim = job->id;
            if (af_codec_admission_patch(a, &m, &target, &target_req, &tw)) {
                add_all(w, &tw);
                goto out;
            }
        }
    } else if (job && job->phase == AF__CLAIM_DECIDE) {
        job->claimed = af_rollouts_decide_claim(svc->rollouts, cfg, snap, pod,
                                                r->variant ? &target_req : NULL, af_wall_time(),
                                                flags, job->id, &d, &job->claim);
    } else {
        /* A dry run is decided as a create would be, and nothing is remembered. */
        af_rollouts_decide_for(svc->rollouts, cfg, snap, pod, r->variant ? &target_req : NULL,
                              af_wall_time(),
                              flags | (af_admission_dry_run(a) ? AF_ROLLOUTS_PEEK : 0), &d);
    }
    if (d.rollout < 0)
        goto out;
    if (d.rollout != k) {
        AF_LOG(AF_LOG_ERROR, "rollout decision names another rollout than the pod matches",
               "rollout", r->name, "pod", pod_label(a, pod), NULL);
        af_warnings_add(w, "accelfit: internal error deciding rollout %.63s; pod created as "
                        "written",
                        r->name);
        goto out;
    }
    if (d.side != AF_SIDE_SOURCE && d.side != AF_SIDE_TARGET) {
        af_warnings_add(w, "accelfit: rollout %.63s decided no side (%.120s); pod created as "
                        "written",
                        r->name, d.reason);
        goto out;
    }
    if (d.side == AF_SIDE_TARGET && (flags & AF_ROLLOUTS_NO_TARGET)) {
        /* a unit already on the target: its pods take the variant or nothing */
        af_warnings_add(w, "accelfit: rollout %.63s: the unit is on the target, but %.150s; "
                        "pod created as written",
                        r->name, unfit);
        AF_LOG(AF_LOG_WARN, "pod not mutated", "rollout", r->name, "namespace", pod->ns, "pod",
               pod_label(a, pod), "why", unfit, NULL);
        goto out;
    }
    if (d.unfit && d.side == AF_SIDE_SOURCE) {
        af_warnings_add(w, "accelfit: rollout %.63s keeps the pod on the source: %.170s",
                        r->name, unfit);
        AF_LOG(AF_LOG_INFO, "pod kept on the source: the variant cannot make it run on the "
               "target", "rollout", r->name, "namespace", pod->ns, "pod", pod_label(a, pod),
               "why", unfit, NULL);
    } else if (d.pinned && d.side == AF_SIDE_SOURCE) {
        af_warnings_add(w, "accelfit: %.250s", d.reason);
        AF_LOG(AF_LOG_INFO, "pod kept on the source: its node constraints admit no target node",
               "rollout", r->name, "namespace", pod->ns, "pod", pod_label(a, pod), "why",
               d.reason, NULL);
    } else if (d.halted && d.side == AF_SIDE_SOURCE)
        af_warnings_add(w, "accelfit: rollout %.63s is halted by its brake; the pod stays on "
                        "the source",
                        r->name);
    else if (d.fallback && d.side == AF_SIDE_SOURCE)
        af_warnings_add(w, "accelfit: rollout %.63s: no target node has room; the pod stays "
                        "on the source",
                        r->name);
    else if (d.fallback)
        af_warnings_add(w, "accelfit: rollout %.63s: no target node has room yet; the pod "
                        "waits for one (fallback: wait)",
                        r->name);
    if (d.side == AF_SIDE_TARGET && r->variant) {
        if (af_buf_add(patch, target.buf ? target.buf : "", target.len)) {
            af_warnings_add(w, "accelfit: rollout %.63s: the patch was too large; pod created "
                            "as written",
                            r->name);
            goto out;
        }
        add_all(w, &tw);
    } else {
        memset(&m, 0, sizeof(m));
        m.rollout = r->name;
        m.side = d.side;
        m.source = r->source;
        m.claim = job && job->claimed ? job->id : NULL;
        if (af_codec_admission_patch(a, &m, patch, NULL, w)) {
            af_buf_reset(patch);
            AF_LOG(AF_LOG_WARN, "pod not annotated", "rollout", r->name, "namespace", pod->ns,
                   "pod", pod_label(a, pod), "why", w->n ? w->text[w->n - 1] : "", NULL);
            goto out;
        }
    }
    if (d.side == AF_SIDE_TARGET && r->variant && r->variant->n_claim_templates) {
        char swaps[512];
        swaps_text(pod, r->variant, swaps, sizeof(swaps));
        if (swaps[0])
            AF_LOG(AF_LOG_INFO, "pod's claims made from the target's templates", "rollout",
                   r->name, "namespace", pod->ns, "pod", pod_label(a, pod), "claims", swaps,
                   NULL);
    }
    AF_LOG(AF_LOG_INFO, "pod mutated", "rollout", r->name, "side", af_rollout_side_name(d.side),
           "variant", d.side == AF_SIDE_TARGET && r->variant ? "true" : "false", "namespace",
           pod->ns, "pod", pod_label(a, pod), "unit", d.unit, "dry_run",
           af_admission_dry_run(a) ? "true" : "false", "reason", d.reason, NULL);
out:
    af_buf_release(&target);
    af_snapshot_unref(snap);
    af_config_unref(cfg);
}

void af__mutate_claim_decide(struct af_service *svc, struct af__mutate_job *job)
{
    af_buf_reset(&job->patch);
    memset(&job->w, 0, sizeof(job->w));
    job->claimed = false;
    job->phase = AF__CLAIM_DECIDE;
    decide(svc, job->a, &job->patch, &job->w, job);
    job->decided = true;
}

bool af__mutate_try_reserve(struct af_service *svc, struct af__mutate_job *job)
{
    af_buf_reset(&job->patch);
    memset(&job->w, 0, sizeof(job->w));
    job->claimed = job->reserved = false;
    job->phase = AF__CLAIM_PROBE;
    decide(svc, job->a, &job->patch, &job->w, job);
    if (job->reserved)
        job->decided = true;
    return job->reserved;
}

void af__mutate_local_decide(struct af_service *svc, struct af__mutate_job *job)
{
    af_buf_reset(&job->patch);
    memset(&job->w, 0, sizeof(job->w));
    job->phase = AF__CLAIM_NONE;
    decide(svc, job->a, &job->patch, &job->w, NULL);
    job->decided = true;
}

int af__mutate_answer(const struct af_admission *a, const struct af_buf *patch,
                      struct af_warnings *w, struct af_buf *out)
{
    int rc, status = 200;

    rc = af_codec_encode_admission(af_admission_uid(a), patch->buf, patch->len, w, out);
    if (rc) {
        /* The answer did not fit `out`: the same answer without the patch is small. */
        memset(w, 0, sizeof(*w));
        af_warnings_add(w, "accelfit: the answer was too large; pod created as written");
        rc = af_codec_encode_admission(af_admission_uid(a), NULL, 0, w, out);
        if (rc)
            rc = af_codec_encode_admission(af_admission_uid(a), NULL, 0, NULL, out);
        if (rc) {
            af_buf_reset(out);
            if (af_buf_puts(out, "{\"error\":\"response too large\"}"))
                af_buf_reset(out);
            status = 500;
        }
    }
    return status;
}

int af_webhook_mutate_deferred(struct af_service *svc, const char *body, size_t len, struct af_buf *out,
                         const struct af_deferred *later)
{
    struct af_admission *a = NULL;
    struct af_buf patch = AF_BUF_INIT(MUTATE_MAX_PATCH);
    struct af_warnings w;
    struct af_error err;
    struct af__mutate_job *job = NULL;
    int rc, status = 200;

    memset(&err, 0, sizeof(err));
    memset(&w, 0, sizeof(w));
    rc = af_codec_decode_admission(body, len, &a, &err);
    if (rc == AF_EUNSUPPORTED) {
        /* A review accelfit should not have been sent: let it through untouched. */
        af_warnings_add(&w, "accelfit: %.200s; allowed unchanged", err.text);
    } else if (rc) {
        status = bad_request(&err, out);
        goto out;
    } else if (svc->claims && later) {
        job = af_xcalloc(1, sizeof(*job));
        job->phase = AF__CLAIM_PROBE;
        decide(svc, a, &patch, &w, job);
        if (job->reserved) {   /* answered from a reserve: no write waited for */
            af_free(job);
            status = af__mutate_answer(a, &patch, &w, out);
            goto out;
        }
        if (job->wants) {
            job->a = a;
            job->later = *later;
            job->t0 = af_now_ns();
            af_buf_init(&job->patch, MUTATE_MAX_PATCH);
            a = NULL;
            af__claims_enqueue(svc->claims, job);   /* steals the job */
            status = AF_WEBHOOK_DEFERRED;
            goto out;
        }
        af_free(job);
        af_buf_reset(&patch);
        memset(&w, 0, sizeof(w));
        decide(svc, a, &patch, &w, NULL);
    } else {
        decide(svc, a, &patch, &w, NULL);
    }
    status = af__mutate_answer(a, &patch, &w, out);
out:
    af_buf_release(&patch);
    af_admission_free(a);
    return status;
}

int af_webhook_mutate(struct af_service *svc, const char *body, size_t len, struct af_buf *out)
{
    return af_webhook_mutate_deferred(svc, body, len, out, NULL);
}
