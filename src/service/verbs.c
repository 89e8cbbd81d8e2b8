/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verbs kube-scheduler calls, and the entry point that hands each verb to
 * its handler (/explain to explain.c): filter, prioritize and preempt. Each decodes
 * its request, answers by the when-not-ready mode while the snapshot cannot be
 * decided on, else runs the decision order (accelfit/decide.h) with the
 * service's hooks and encodes what it says; filter also counts its decisions
 * and posts the Events of events.c. Preempt reads filter's verdicts: only a
 * candidate no eviction can make fit is dropped.
 */
#include "accelfit/metrics.h"
#include "accelfit/service.h"

#include <stdio.h>
#include <string.h>

#include "accelfit/budget.h"
#include "accelfit/codec.h"
#include "accelfit/decide.h"
#include "accelfit/rollout_state.h"
#include "accelfit/prom.h"
#include "accelfit/utilization.h"
#include "service/internal.h"

#include "service/dra.h"
#include "service/handlers.h"
#include "accelfit/banned.h"

/* ---- helpers --------------------------------------------------------------------------------- */

static void set_reason(struct af_node_decision *d, const char *reason)
{
    snprintf(d->reason, sizeof(d->reason), "%s", reason);
}

/* The request log names the pod a verb was about. */
static void stats_pod(struct af_request_stats *st, const struct af_pod_info *pod)
{
    if (st && pod)
        snprintf(st->pod, sizeof(st->pod), "%.120s/%.120s", pod->ns ? pod->ns : "",
                 pod->name ? pod->name : "");
}

/* Filter answer carrying only Error (the request could not be used). */
static void filter_error(struct af_buf *out, size_t base, const char *msg)
{
    out->len = base;
    if (out->buf)
        out->buf[base] = '\0';
    if (af_codec_encode_filter(NULL, NULL, 0, msg, out) != 0) {
        out->len = base;
        if (out->buf)
            out->buf[base] = '\0';
        /* Last resort: the smallest valid answer. */
        if (af_buf_puts(out, "{\"Error\":\"accelfit: response too large\"}") != 0)
            AF_LOG(AF_LOG_ERROR, "cannot encode filter error", "error", msg, NULL);
    }
}

/* ---- filter ------------------------------------------------------------------------------------ */

/* The decisions counted by class and verdict: one metrics update per pair, not per node. */
static void count_decisions(struct af_metrics *m, const struct af__candidates *c,
                            const struct af_node_decision *dec)
{
    /* [class + 1] (AF_CLASS_UNKNOWN is -1), then one for names not in the cache */
    uint32_t n[AF_CLASS__COUNT + 2][AF_VERDICT_UNRESOLVABLE + 1];

    memset(n, 0, sizeof(n));
    for (size_t i = 0; i < c->n; i++) {
        const struct af_node_info *ni = c->views[i].info;
        int k = !ni ? AF_CLASS__COUNT + 1
                    : ni->cls >= AF_CLASS_UNKNOWN && ni->cls < AF_CLASS__COUNT ? ni->cls + 1 : 0;
        n[k][dec[i].verdict]++;
    }
    for (int k = 0; k < AF_CLASS__COUNT + 2; k++)
        for (int v = 0; v <= AF_VERDICT_UNRESOLVABLE; v++)
            if (n[k][v])
                af_metrics_count_decisions(
                    m, k == AF_CLASS__COUNT + 1 ? "unknown" : af_class_name(k - 1),
                    af__service_verdict_name((enum af_verdict)v), n[k][v]);
}

static int do_filter(struct af_service *svc, struct af_config *cfg, const char *body, size_t len,
                     struct af_buf *out, struct af_request_stats *st)
{
    size_t base = out->len;
    struct af_error err;
    struct af_ext_args *args = NULL;
    struct af_snapshot *snap = NULL;
    struct af_arena *ar = af_arena_of_thread(AF_ARENA_REQUEST);
    struct af_buf msg = AF_BUF_INIT(1024);
    struct af__candidates c;
    struct af_node_decision *dec = NULL;
    const char *why = NULL;
    int rc;

    memset(&err, 0, sizeof(err));
    rc = len ? af_codec_decode_args(cfg, body, len, &args, &err) : AF_EPARSE;
    if (rc != 0) {
        af__service_request_error(&msg, "cannot decode ExtenderArgs", &err, rc, len);
        AF_LOG(AF_LOG_WARN, "bad filter request", "error", msg.buf ? msg.buf : "", NULL);
        filter_error(out, base, msg.buf ? msg.buf : "accelfit: cannot decode ExtenderArgs");
        goto done;
    }
    if (af_ext_args_count(args) > AF_SERVICE_MAX_CANDIDATES) {
        filter_error(out, base, "accelfit: too many candidate nodes in one request");
        goto done;
    }
    snap = af_publisher_acquire(svc->pub);
    af__service_candidates(ar, args, snap, &c);
    st->candidates = (int)c.n;
    stats_pod(st, af_ext_args_pod(args));
    /* Not zeroed: af_filter initializes every entry, so zeroing them first (some 150 KiB at
     * 500 candidates) would be wasted; the not-ready path zeroes its own. */
    dec = af_arena_alloc_uninit(ar, (c.n + 1) * sizeof(*dec));

    if (!af__service_snapshot_ready(svc, snap, &why)) {
        st->not_ready = true;
        AF_LOG(AF_LOG_DEBUG, "filter while not ready", "why", why, NULL);
        if (svc->when_not_ready == AF_NOT_READY_ERROR) {
            char text[300];
            snprintf(text, sizeof(text), "accelfit: %s", why);
            filter_error(out, base, text);
            goto done;
        }
        memset(dec, 0, (c.n + 1) * sizeof(*dec));
        for (size_t i = 0; i < c.n; i++) {
            char text[AF_REASON_MAX];
            dec[i].name = c.names[i];
            dec[i].tier = -1;
            /* Say what is true: not synced yet, or synced and then gone stale. */
            if (svc->when_not_ready == AF_NOT_READY_ALLOW_ALL) {
                dec[i].verdict = AF_VERDICT_PASS;
                snprintf(text, sizeof(text), "accelfit: %s; allowing every node", why);
            } else {
                dec[i].verdict = AF_VERDICT_FAILED;
                snprintf(text, sizeof(text), "accelfit: %s", why);
            }
            set_reason(&dec[i], text);
        }
        st->passed = svc->when_not_ready == AF_NOT_READY_ALLOW_ALL ? (int)c.n : 0;
    } else {
        struct af_dra_demand dm;
        const struct af_pod_info *pod = af__service_dra_pod(ar, snap, af_ext_args_pod(args), &dm);
        /* not zeroed: af_decide_plan writes all of it (a copy, or af_plan_pod) */
        struct af_plan *plan = af_arena_alloc_uninit(ar, sizeof(*plan));
        struct af_filter_summary sum;
        struct af__decide_ctx dc = {.svc = svc, .cfg = cfg, .snap = snap, .ar = ar,
                                    .dra = &dm, .own_views = c.views};
        struct af_decide_hooks h;
        struct af_tenant_decision bd;

        memset(&sum, 0, sizeof(sum));
        af_decide_plan(cfg->policy, cfg->catalog, pod, af_wall_time(), af__service_hooks(&dc, &h), plan, &bd);
        af__service_warn_bad_annotations(svc, pod, plan);
        plan->brief_reasons = true;   /* one text per cause: the scheduler's event counts them */
        af_decide_filter(cfg->policy, plan, pod, c.views, c.names, c.n, &h, dec, &sum);
        af_budget_charge(svc, pod, &bd, c.views, c.n, dec);   /* until the pod is seen */
        st->passed = sum.passed;
        st->fallback = sum.fallback;
        if (svc->metrics) {
            count_decisions(svc->metrics, &c, dec);
            if (sum.fallback)
                af_metrics_count_fallback(svc->metrics);
        }
        if (c.n && sum.passed == 0)
            af__service_post_all_rejected(svc, pod, dec, c.n);
        else if (sum.fallback)
            af__service_post_fallback(svc, pod, plan, &sum);
    }
    rc = af_codec_encode_filter(args, dec, c.n, NULL, out);
    if (rc != 0) {
        AF_LOG(AF_LOG_ERROR, "cannot encode filter result", "error", af_strerror(rc), NULL);
        filter_error(out, base, "accelfit: cannot encode the filter result (too large)");
    }
done:
    af_buf_release(&msg);
    af_arena_reset(ar);
    af_snapshot_unref(snap);
    af_ext_args_free(args);
    return 200;
}

/* ---- prioritize -------------------------------------------------------------------------------- */

static int do_prioritize(struct af_service *svc, struct af_config *cfg, const char *body,
                         size_t len, struct af_buf *out, struct af_request_stats *st)
{
    size_t base = out->len;
    struct af_error err;
    struct af_ext_args *args = NULL;
    struct af_snapshot *snap = NULL;
    struct af_arena *ar = af_arena_of_thread(AF_ARENA_REQUEST);
    struct af_buf msg = AF_BUF_INIT(1024);
    struct af__candidates c;
    struct af_node_decision *dec = NULL;
    int rc, status = 200;

    memset(&err, 0, sizeof(err));
    rc = len ? af_codec_decode_args(cfg, body, len, &args, &err) : AF_EPARSE;
    if (rc != 0) {
        af__service_request_error(&msg, "cannot decode ExtenderArgs", &err, rc, len);
        AF_LOG(AF_LOG_WARN, "bad prioritize request", "error", msg.buf ? msg.buf : "", NULL);
        af_service_error_body(out, base, msg.buf ? msg.buf : "cannot decode ExtenderArgs");
        status = 400;
        goto done;
    }
    if (af_ext_args_count(args) > AF_SERVICE_MAX_CANDIDATES) {
        af_service_error_body(out, base, "accelfit: too many candidate nodes in one request");
        status = 400;
        goto done;
    }
    snap = af_publisher_acquire(svc->pub);
    af__service_candidates(ar, args, snap, &c);
    st->candidates = (int)c.n;
    stats_pod(st, af_ext_args_pod(args));
    /* not zeroed: af_prioritize initializes every entry */
    dec = af_arena_alloc_uninit(ar, (c.n + 1) * sizeof(*dec));
    if (!af__service_snapshot_ready(svc, snap, NULL)) {
        /* Neutral: every candidate scores 0 until the cache is usable. */
        st->not_ready = true;
        memset(dec, 0, (c.n + 1) * sizeof(*dec));
        for (size_t i = 0; i < c.n; i++) {
            dec[i].name = c.names[i];
            dec[i].tier = -1;
        }
    } else {
        struct af_dra_demand dm;
        const struct af_pod_info *pod = af__service_dra_pod(ar, snap, af_ext_args_pod(args), &dm);
        struct af_plan *plan = af_arena_alloc_uninit(ar, sizeof(*plan));   /* as in filter */
        struct af__decide_ctx dc = {.svc = svc, .cfg = cfg, .snap = snap, .ar = ar,
                                .us = af_prom_acquire(svc->util)};
        struct af_decide_hooks h;
        struct af_tenant_decision bd;

        af_decide_plan(cfg->policy, cfg->catalog, pod, af_wall_time(), af__service_hooks(&dc, &h), plan, &bd);
        af__service_warn_bad_annotations(svc, pod, plan);
        af_decide_prioritize(cfg->policy, plan, pod, c.views, c.names, c.n, &h, &bd, dec);
        af_utilization_snapshot_unref(dc.us);
    }
    rc = af_codec_encode_priorities(args, dec, c.n, out);
    if (rc != 0) {
        af_service_error_body(out, base, "accelfit: cannot encode the priorities (too large)");
        status = 500;
    }
done:
    af_buf_release(&msg);
    af_arena_reset(ar);
    af_snapshot_unref(snap);
    af_ext_args_free(args);
    return status;
}

/* ---- preempt ------------------------------------------------------------------------------------ */

/*
 * ProcessPreemption: kube-scheduler has chosen victims on each candidate node
 * and asks which candidates to keep before it evicts anything. A candidate is
 * kept unless accelfit's filter would refuse the pod there for a reason no
 * eviction changes (FailedAndUnresolvable: hardware that can never take the
 * pod, such as a class outside its tiers).
 * FAILED (no room, a better tier first) is what preemption changes, so it is
 * kept, and so is a name the cache does not know (filter fails it, it does not
 * rule it out). Victims go back as given. While not ready the when-not-ready
 * mode decides as for filter: reject keeps nothing (filter would refuse every
 * node), allow-all keeps everything, error answers 503 (the result has no
 * Error field).
 */
static int do_preempt(struct af_service *svc, struct af_config *cfg, const char *body, size_t len,
                      struct af_buf *out, struct af_request_stats *st)
{
    size_t base = out->len, n;
    struct af_error err;
    struct af_preempt_args *args = NULL;
    struct af_snapshot *snap = NULL;
    struct af_arena ar = AF_ARENA_INIT;
    struct af_buf msg = AF_BUF_INIT(1024);
    struct af_node_view *views;
    const char **names;
    bool *keep;
    struct af_node_decision *dec = NULL;
    const char *why = NULL;
    int rc, status = 200, kept = 0;

    memset(&err, 0, sizeof(err));
    rc = len ? af_codec_decode_preempt_args(body, len, &args, &err) : AF_EPARSE;
    if (rc != 0) {
        af__service_request_error(&msg, "cannot decode ExtenderPreemptionArgs", &err, rc, len);
        AF_LOG(AF_LOG_WARN, "bad preempt request", "error", msg.buf ? msg.buf : "", NULL);
        af_service_error_body(out, base, msg.buf ? msg.buf : "cannot decode ExtenderPreemptionArgs");
        status = 400;
        goto done;
    }
    n = af_preempt_args_count(args);
    if (n > AF_SERVICE_MAX_CANDIDATES) {
        af_service_error_body(out, base, "accelfit: too many candidate nodes in one request");
        status = 400;
        goto done;
    }
    st->candidates = (int)n;
    stats_pod(st, af_preempt_args_pod(args));
    snap = af_publisher_acquire(svc->pub);
    views = af_arena_alloc(&ar, (n + 1) * sizeof(*views));
    names = af_arena_alloc(&ar, (n + 1) * sizeof(*names));
    keep = af_arena_alloc(&ar, (n + 1) * sizeof(*keep));
    for (size_t i = 0; i < n; i++) {
        const struct af_node_view *v;
        names[i] = af_preempt_args_name(args, i);
        v = snap ? af_snapshot_find_node(snap, names[i]) : NULL;
        if (v)
            views[i] = *v;
    }
    if (!af__service_snapshot_ready(svc, snap, &why)) {
        st->not_ready = true;
        AF_LOG(AF_LOG_DEBUG, "preempt while not ready", "why", why, NULL);
        if (svc->when_not_ready == AF_NOT_READY_ERROR) {
            char text[300];
            snprintf(text, sizeof(text), "accelfit: %s", why);
            af_service_error_body(out, base, text);
            status = 503;
            goto done;
        }
        for (size_t i = 0; i < n; i++)
            keep[i] = svc->when_not_ready == AF_NOT_READY_ALLOW_ALL;
    } else {
        const struct af_pod_info *pod = af_preempt_args_pod(args);
        struct af_plan *plan = af_arena_alloc(&ar, sizeof(*plan));

        struct af__decide_ctx dc = {.svc = svc, .cfg = cfg, .snap = snap, .ar = &ar};
        struct af_decide_hooks h;
        struct af_tenant_decision bd;

        dec = af_xmalloc((n + 1) * sizeof(*dec));   /* af_filter initializes every entry */
        /* the side filter steered the unit to (evicting elsewhere would not help it), and the
         * tenant's budget (nor would evicting for a node it refuses); live utilization does
         * not refuse here: evicting is judged on what is allocated */
        af_decide_plan(cfg->policy, cfg->catalog, pod, af_wall_time(), af__service_hooks(&dc, &h), plan, &bd);
        h.filter = NULL;
        af_decide_filter(cfg->policy, plan, pod, views, names, n, &h, dec, NULL);
        for (size_t i = 0; i < n; i++) {
            keep[i] = dec[i].verdict != AF_VERDICT_UNRESOLVABLE;
            if (!keep[i])
                AF_LOG(AF_LOG_DEBUG, "preempt drops candidate", "node", names[i], "reason",
                       dec[i].reason, NULL);
        }
    }
    for (size_t i = 0; i < n; i++)
        kept += keep[i];
    st->passed = kept;
    rc = af_codec_encode_preempt(args, keep, out);
    if (rc != 0) {
        AF_LOG(AF_LOG_ERROR, "cannot encode preemption result", "error", af_strerror(rc), NULL);
        af_service_error_body(out, base, "accelfit: cannot encode the preemption result (too large)");
        status = 500;
    }
done:
    af_free(dec);
    af_buf_release(&msg);
    af_arena_release(&ar);
    af_snapshot_unref(snap);
    af_preempt_args_free(args);
    return status;
}

/* ---- entry points ------------------------------------------------------------------------------ */

int af_service_handle_stats(struct af_service *svc, enum af_verb verb, const char *body,
                            size_t len, struct af_buf *out, struct af_request_stats *st)
{
    struct af_request_stats local;
    struct af_config *cfg;
    int status;

    if (!st)
        st = &local;
    st->candidates = -1;
    st->passed = -1;
    st->not_ready = false;
    st->fallback = false;
    cfg = af_config_holder_get(svc->config);
    switch (verb) {
    case AF_VERB_FILTER:
        status = do_filter(svc, cfg, body, len, out, st);
        break;
    case AF_VERB_PRIORITIZE:
        status = do_prioritize(svc, cfg, body, len, out, st);
        break;
    case AF_VERB_EXPLAIN:
        status = af__service_explain(svc, cfg, body, len, out, st);
        break;
    case AF_VERB_PREEMPT:
        status = do_preempt(svc, cfg, body, len, out, st);
        break;
    default:
        af_service_error_body(out, out->len, "unknown verb");
        status = 404;
        break;
    }
    af_config_unref(cfg);
    return status;
}

int af_service_handle(struct af_service *svc, enum af_verb verb, const char *body, size_t len,
                      struct af_buf *out)
{
    return af_service_handle_stats(svc, verb, body, len, out, NULL);
}
