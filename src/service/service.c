/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The extender's handlers without a transport: a verb and a request body in,
 * an HTTP status and a response body out. Each call takes a reference on the
 * current config and snapshot, builds the candidate views in a per-request
 * arena, hands them to the decision core (af_plan_pod, af_filter,
 * af_prioritize) and encodes what it says. No decision logic lives here; what
 * this file adds is readiness (the when-not-ready modes), metrics, Kubernetes
 * Events, the preempt verb's reading of filter verdicts, the /explain
 * rendering, and rollout steering: a pod of a placement rollout has its plan
 * restricted to the classes of the side its unit was given (rollouts.c
 * decides; af_plan_restrict makes it explicit policy for filter). The
 * server and the benchmarks call it directly, so it has no idea which
 * connection a request came from.
 */
#include "accelfit/metrics.h"
#include "accelfit/service.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/budget.h"
#include "accelfit/codec.h"
#include "accelfit/decide.h"
#include "accelfit/kube.h"
#include "accelfit/rollout_state.h"
#include "accelfit/prom.h"
#include "accelfit/utilization.h"
#include "service/internal.h"

#include "service/dra.h"
#include "accelfit/banned.h"


/* What /explain cannot see; kube-scheduler applies these before it calls the extender. */
#define EXPLAIN_SCOPE_CAVEAT                                                                   \
    "taints, tolerations, node affinity and other kube-scheduler plugins are not evaluated by " \
    "/explain: kube-scheduler applies them before it calls the extender, so a node shown as "  \
    "pass here may still be excluded by them"

/* ---- readiness ------------------------------------------------------------------------------ */

static bool snapshot_ready(struct af_service *svc, const struct af_snapshot *snap, const char **why)
{
    const char *reason = NULL;

    if (!snap) {
        reason = "no cluster snapshot published yet";
    } else if (!snap->synced) {
        reason = "cache not synced: the first full list has not been applied";
    } else if (svc->status) {
        if (!atomic_load(&svc->status->synced)) {
            reason = "cache not synced: the first full list has not been applied";
        } else if (svc->max_staleness_ns && !atomic_load(&svc->status->watch_up)) {
            uint64_t since = atomic_load(&svc->status->down_since_ns);
            uint64_t now = af_now_ns();
            if (since && now > since && now - since > svc->max_staleness_ns)
                reason = "cache stale: the watch has been down longer than --max-staleness";
        }
    }
    if (why)
        *why = reason ? reason : "ready";
    return reason == NULL;
}

bool af_service_ready(struct af_service *svc, const char **why)
{
    struct af_snapshot *snap = af_publisher_acquire(svc->pub);
    bool ok = snapshot_ready(svc, snap, why);

    af_snapshot_unref(snap);
    return ok;
}

int af_service_readyz(struct af_service *svc, struct af_buf *out)
{
    const char *why = NULL;
    char live[500], prices[1500];
    struct af_config *cfg = af_config_holder_get(svc->config);
    bool ok = af_service_ready(svc, &why);

    if (ok && cfg && cfg->policy && cfg->policy->n_rollouts &&
        af_rollouts_state_unread(svc->rollouts, af_wall_time())) {
        ok = false;
        why = AF_ROLLOUT_STATE_UNREAD;
    }
    af_service_utilization_status(svc, live, sizeof(live));
    af_service_prices_status(svc, cfg ? cfg->catalog : NULL, prices, sizeof(prices));
    af_config_unref(cfg);
    if (af_buf_printf(out, "%s%s\n%s%s", ok ? "ok" : "not ready: ", ok ? "" : why ? why : "",
                      live, prices) != 0)
        AF_LOG(AF_LOG_ERROR, "cannot build the /readyz answer", NULL);
    return ok ? 200 : 503;
}

/* ---- helpers --------------------------------------------------------------------------------- */

static const char *verdict_name(enum af_verdict v)
{
    switch (v) {
    case AF_VERDICT_PASS:
        return "pass";
    case AF_VERDICT_FAILED:
        return "failed";
    case AF_VERDICT_UNRESOLVABLE:
        return "unresolvable";
    }
    return "failed";
}

static const char *accel_kind_name(enum af_accel_kind k)
{
    switch (k) {
    case AF_ACCEL_GPU:
        return "gpu";
    case AF_ACCEL_NEURON:
        return "neuron";
    case AF_ACCEL_AMD:
        return "amd";
    case AF_ACCEL_NONE:
        break;
    }
    return "none";
}

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

/* ---- rollout steering ----------------------------------------------------------------------- */

/* The candidates of a decoded request as the core wants them (arena memory). */
struct candidates {
    size_t n;
    struct af_node_view *views;
    const char **names;
};

static void build_candidates(struct af_arena *ar, const struct af_ext_args *args,
                             const struct af_snapshot *snap, struct candidates *c)
{
    bool nodes_mode = af_ext_args_nodes_mode(args);

    const struct af_node_view **found;

    c->n = af_ext_args_count(args);
    c->views = af_arena_alloc(ar, (c->n + 1) * sizeof(*c->views));
    c->names = af_arena_alloc(ar, (c->n + 1) * sizeof(*c->names));
    found = af_arena_alloc(ar, (c->n + 1) * sizeof(*found));
    for (size_t i = 0; i < c->n; i++)
        c->names[i] = af_ext_args_name(args, i);
    af_snapshot_find_nodes(snap, c->names, c->n, found);   /* NULL names find nothing */
    for (size_t i = 0; i < c->n; i++) {
        const char *name = c->names[i];
        const struct af_node_view *v = found[i];

        c->names[i] = name ? name : "";
        if (nodes_mode) {
            /* The request's own Node object, with the allocation the cache knows. */
            c->views[i].info = af_ext_args_node(args, i);
            if (v) {
                c->views[i].used = v->used;
                c->views[i].npods = v->npods;
            }
        } else if (v) {
            c->views[i] = *v;
        }
    }
}

/*
 * The service's part of the decision order (accelfit/decide.h): the rollouts' ledger
 * (step 2), the tenants' books (3), and live utilization (4, 5) from the reader's current
 * snapshot; reading it takes a reference, and no request ever waits for Prometheus.
 */
static void hook_plan(void *ud, const struct af_policy *pol, const struct af_catalog *cat,
                      const struct af_pod_info *pod, struct af_plan *plan)
{
    struct af__decide_ctx *d = ud;

    af__plan_memo_plan(d->svc ? d->svc->plans : NULL, d->cfg, pol, cat, pod, plan);
}

static void hook_rollout(void *ud, const struct af_pod_info *pod, struct af_plan *plan)
{
    struct af__decide_ctx *d = ud;

    af_rollouts_steer(d->svc->rollouts, d->cfg, d->snap, pod, af_wall_time(), d->rollout_flags,
                      plan, &d->rd);
}

static void hook_tenant(void *ud, const struct af_pod_info *pod, struct af_plan *plan,
                        struct af_tenant_decision *td)
{
    struct af__decide_ctx *d = ud;

    af_budget_steer(d->svc, (struct af_config *)d->cfg, (struct af_snapshot *)d->snap, pod,
                    d->budget_flags, plan, td);
}

static void hook_filter(void *ud, const struct af_plan *plan, const struct af_pod_info *pod,
                        const struct af_node_view *nodes, const char *const *names, size_t n,
                        struct af_node_decision *out, struct af_filter_summary *sum)
{
    struct af__decide_ctx *d = ud;
    const struct af_policy *pol = d->cfg->policy;
    struct af_utilization_snapshot *us = af_utilization_filters(pol) ? af_prom_acquire(d->svc->util) : NULL;
    struct af__dra_check chk = {0};

    /* a pod's DRA claims: a node whose free devices cannot give them has no room, so the
     * core's tiered fallback looks past it as past a full node (service/dra.h) */
    if (d->dra && d->own_views) {
        af__service_dra_check(d->ar, d->snap, d->dra, pod, names, d->own_views, n, &chk);
        nodes = d->own_views;
    }
    if (us)
        af_utilization_filter(pol, plan, pod, nodes, names, n, us, af_utilization_now(us, af_wall_time()),
                       af_arena_alloc(d->ar, (n + 1) * sizeof(*nodes)), out, sum);
    else
        af_filter(pol, plan, pod, nodes, names, n, out, sum);
    af_utilization_snapshot_unref(us);
    if (d->dra && d->own_views)
        af__service_dra_reasons(&chk, out, sum);
}

static void hook_score(void *ud, const struct af_plan *plan, const struct af_pod_info *pod,
                       const struct af_node_view *nodes, size_t n, struct af_node_decision *out)
{
    struct af__decide_ctx *d = ud;

    if (d->us)
        af_utilization_score(d->cfg->policy, plan, pod, nodes, n, d->us,
                      af_utilization_now(d->us, af_wall_time()), out);
}

const struct af_decide_hooks *af__service_hooks(struct af__decide_ctx *d,
                                                struct af_decide_hooks *h)
{
    *h = (struct af_decide_hooks){.ud = d, .plan = hook_plan, .rollout = hook_rollout,
                                  .tenant = hook_tenant,
                                  .filter = hook_filter, .score = hook_score};
    return h;
}

static void request_error(struct af_buf *errbuf, const char *what, const struct af_error *err,
                          int rc, size_t len)
{
    char text[1024];

    if (len == 0) {
        snprintf(text, sizeof(text), "accelfit: %s: empty request body", what);
    } else if (err->text[0]) {
        char where[700];
        af_error_format(err, where, sizeof(where));
        snprintf(text, sizeof(text), "accelfit: %s: %s", what, where);
    } else {
        snprintf(text, sizeof(text), "accelfit: %s: %s", what, af_strerror(rc));
    }
    af_buf_reset(errbuf);
    if (af_buf_puts(errbuf, text) != 0)
        af_buf_reset(errbuf);
}

/* An error body for 4xx/5xx answers: {"error":"..."}. */
void af_service_error_body(struct af_buf *out, size_t base, const char *msg)
{
    out->len = base;
    if (out->buf)
        out->buf[base] = '\0';
    if (af_buf_puts(out, "{\"error\":") != 0 || af_buf_json_str(out, msg) != 0 ||
        af_buf_puts(out, "}\n") != 0) {
        out->len = base;
        if (out->buf)
            out->buf[base] = '\0';
    }
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

/* ---- events ------------------------------------------------------------------------------------ */

static void post_all_rejected(struct af_service *svc, const struct af_pod_info *pod,
                              const struct af_node_decision *d, size_t n)
{
    char msg[1024];
    size_t used = 0;
    const char *distinct[3];
    int counts[3] = {0, 0, 0};
    size_t nd = 0, others = 0;

    if (!svc->kube || !pod || !pod->name || n == 0)
        return;
    for (size_t i = 0; i < n; i++) {
        size_t j;
        for (j = 0; j < nd; j++)
            if (!strcmp(distinct[j], d[i].reason))
                break;
        if (j < nd) {
            counts[j]++;
        } else if (nd < AF_ARRAY_SIZE(distinct)) {
            distinct[nd] = d[i].reason;
            counts[nd++] = 1;
        } else {
            others++;
        }
    }
    used = (size_t)snprintf(msg, sizeof(msg), "0/%zu nodes passed accelfit:", n);
    for (size_t j = 0; j < nd && used < sizeof(msg); j++)
        used += (size_t)snprintf(msg + used, sizeof(msg) - used, "%s %d x %s", j ? ";" : "",
                                 counts[j], distinct[j]);
    if (others && used < sizeof(msg))
        snprintf(msg + used, sizeof(msg) - used, "; %zu more", others);
    af_kube_post_event(svc->kube, pod->ns, pod->name, pod->uid, "Warning",
                       "AccelfitNoSuitableNode", msg);
}

/*
 * A pod whose accelfit annotations could not be read is placed as if they were absent; its
 * owner learns it from a Warning Event on the pod, once per pod, and the count goes to
 * accelfit_malformed_annotations_total (af_metrics_first_bad_annotations).
 */
static void warn_bad_annotations(struct af_service *svc, const struct af_pod_info *pod,
                                 const struct af_plan *plan)
{
    char msg[1024], key[600];
    size_t used = 0;

    if (!pod || !pod->name || !plan->bad_annotations)
        return;
    snprintf(key, sizeof(key), "%s", pod->uid && *pod->uid ? pod->uid : "");
    if (!key[0])
        snprintf(key, sizeof(key), "%s/%s", pod->ns ? pod->ns : "", pod->name);
    if (!af_metrics_first_bad_annotations(svc->metrics, key, plan->bad_annotations) ||
        !svc->kube)
        return;
    for (int i = 0; i < plan->n_bad_notes && used < sizeof(msg); i++)
        used += (size_t)snprintf(msg + used, sizeof(msg) - used, "%s%s", i ? "; " : "",
                                 plan->notes[i]);
    if (used < sizeof(msg))
        snprintf(msg + used, sizeof(msg) - used,
                 ". accelfit places the pod as if the annotation were absent; correct the "
                 "value in the pod template");
    af_kube_post_event(svc->kube, pod->ns, pod->name, pod->uid, "Warning",
                       "AccelfitBadAnnotation", msg);
}

/* A tier's name for people: its class, or what an added tier stands for. */
static const char *tier_name(const struct af_plan *plan, int tier)
{
    return af_plan_tier_name(plan, tier);
}

static void post_fallback(struct af_service *svc, const struct af_pod_info *pod,
                          const struct af_plan *plan, const struct af_filter_summary *sum)
{
    char msg[512];

    if (!svc->kube || !pod || !pod->name || sum->best_tier <= 0 ||
        (size_t)sum->best_tier >= plan->sel.n_tiers)
        return;
    snprintf(msg, sizeof(msg),
             "no candidate of tier 1 (%s) has room; falling back to tier %d (%s)",
             tier_name(plan, 0), sum->best_tier + 1, tier_name(plan, sum->best_tier));
    af_kube_post_event(svc->kube, pod->ns, pod->name, pod->uid, "Normal", "AccelfitFallback",
                       msg);
}

/* ---- filter ------------------------------------------------------------------------------------ */

/* The decisions counted by class and verdict: one metrics update per pair, not per node. */
static void count_decisions(struct af_metrics *m, const struct candidates *c,
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
                    verdict_name((enum af_verdict)v), n[k][v]);
}

static int do_filter(struct af_service *svc, struct af_config *cfg, const char *body, size_t len,
                     struct af_buf *out, struct af_request_stats *st)
{
    size_t base = out->len;
    struct af_error err;
    struct af_ext_args *args = NULL;
    struct af_snapshot *snap = NULL;
    struct af_arena ar = AF_ARENA_INIT;
    struct af_buf msg = AF_BUF_INIT(1024);
    struct candidates c;
    struct af_node_decision *dec = NULL;
    const char *why = NULL;
    int rc;

    memset(&err, 0, sizeof(err));
    rc = len ? af_codec_decode_args(cfg, body, len, &args, &err) : AF_EPARSE;
    if (rc != 0) {
        request_error(&msg, "cannot decode ExtenderArgs", &err, rc, len);
        AF_LOG(AF_LOG_WARN, "bad filter request", "error", msg.buf ? msg.buf : "", NULL);
        filter_error(out, base, msg.buf ? msg.buf : "accelfit: cannot decode ExtenderArgs");
        goto done;
    }
    if (af_ext_args_count(args) > AF_SERVICE_MAX_CANDIDATES) {
        filter_error(out, base, "accelfit: too many candidate nodes in one request");
        goto done;
    }
    snap = af_publisher_acquire(svc->pub);
    build_candidates(&ar, args, snap, &c);
    st->candidates = (int)c.n;
    stats_pod(st, af_ext_args_pod(args));
    /* Not from the arena: af_filter initializes every entry, so zeroing them first (some
     * 150 KiB at 500 candidates) would be wasted; the not-ready path zeroes its own. */
    dec = af_xmalloc((c.n + 1) * sizeof(*dec));

    if (!snapshot_ready(svc, snap, &why)) {
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
        const struct af_pod_info *pod = af__service_dra_pod(&ar, snap, af_ext_args_pod(args), &dm);
        struct af_plan *plan = af_arena_alloc(&ar, sizeof(*plan));
        struct af_filter_summary sum;
        struct af__decide_ctx dc = {.svc = svc, .cfg = cfg, .snap = snap, .ar = &ar,
                                    .dra = &dm, .own_views = c.views};
        struct af_decide_hooks h;
        struct af_tenant_decision bd;

        memset(&sum, 0, sizeof(sum));
        af_decide_plan(cfg->policy, cfg->catalog, pod, af_wall_time(), af__service_hooks(&dc, &h), plan, &bd);
        warn_bad_annotations(svc, pod, plan);
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
            post_all_rejected(svc, pod, dec, c.n);
        else if (sum.fallback)
            post_fallback(svc, pod, plan, &sum);
    }
    rc = af_codec_encode_filter(args, dec, c.n, NULL, out);
    if (rc != 0) {
        AF_LOG(AF_LOG_ERROR, "cannot encode filter result", "error", af_strerror(rc), NULL);
        filter_error(out, base, "accelfit: cannot encode the filter result (too large)");
    }
done:
    af_free(dec);
    af_buf_release(&msg);
    af_arena_release(&ar);
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
    struct af_arena ar = AF_ARENA_INIT;
    struct af_buf msg = AF_BUF_INIT(1024);
    struct candidates c;
    struct af_node_decision *dec = NULL;
    int rc, status = 200;

    memset(&err, 0, sizeof(err));
    rc = len ? af_codec_decode_args(cfg, body, len, &args, &err) : AF_EPARSE;
    if (rc != 0) {
        request_error(&msg, "cannot decode ExtenderArgs", &err, rc, len);
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
    build_candidates(&ar, args, snap, &c);
    st->candidates = (int)c.n;
    stats_pod(st, af_ext_args_pod(args));
    dec = af_xmalloc((c.n + 1) * sizeof(*dec));   /* af_prioritize initializes every entry */
    if (!snapshot_ready(svc, snap, NULL)) {
        /* Neutral: every candidate scores 0 until the cache is usable. */
        st->not_ready = true;
        memset(dec, 0, (c.n + 1) * sizeof(*dec));
        for (size_t i = 0; i < c.n; i++) {
            dec[i].name = c.names[i];
            dec[i].tier = -1;
        }
    } else {
        struct af_dra_demand dm;
        const struct af_pod_info *pod = af__service_dra_pod(&ar, snap, af_ext_args_pod(args), &dm);
        struct af_plan *plan = af_arena_alloc(&ar, sizeof(*plan));
        struct af__decide_ctx dc = {.svc = svc, .cfg = cfg, .snap = snap, .ar = &ar,
                                .us = af_prom_acquire(svc->util)};
        struct af_decide_hooks h;
        struct af_tenant_decision bd;

        af_decide_plan(cfg->policy, cfg->catalog, pod, af_wall_time(), af__service_hooks(&dc, &h), plan, &bd);
        warn_bad_annotations(svc, pod, plan);
        af_decide_prioritize(cfg->policy, plan, pod, c.views, c.names, c.n, &h, &bd, dec);
        af_utilization_snapshot_unref(dc.us);
    }
    rc = af_codec_encode_priorities(dec, c.n, out);
    if (rc != 0) {
        af_service_error_body(out, base, "accelfit: cannot encode the priorities (too large)");
        status = 500;
    }
done:
    af_free(dec);
    af_buf_release(&msg);
    af_arena_release(&ar);
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
        request_error(&msg, "cannot decode ExtenderPreemptionArgs", &err, rc, len);
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
    if (!snapshot_ready(svc, snap, &why)) {
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

/* ---- explain ------------------------------------------------------------------------------------ */

static void render_profile(struct af_jw *w, const struct af_plan *plan)
{
    const struct af_profile *p = &plan->profile;

    af_jw_open(w, "profile", '{');
    if ((int)p->workload >= 0)
        af_jw_str(w, "workload", af_workload_name(p->workload));
    else
        af_jw_null(w, "workload");
    af_jw_bool(w, "workload_inferred", plan->workload_inferred);
    if (p->model_params > 0)
        af_jw_num(w, "model_params", p->model_params, 6);
    else
        af_jw_null(w, "model_params");
    af_jw_str(w, "objective", af_objective_name(p->objective));
    if (p->latency_slo_ms > 0)
        af_jw_int(w, "latency_slo_ms", p->latency_slo_ms);
    else
        af_jw_null(w, "latency_slo_ms");
    if ((int)p->framework >= 0)
        af_jw_str(w, "framework", af_framework_name(p->framework));
    else
        af_jw_null(w, "framework");
    af_jw_bool(w, "neuron_ready", p->neuron_ready);
    if ((int)p->precision >= 0)
        af_jw_str(w, "precision", af_precision_name(p->precision));
    else
        af_jw_null(w, "precision");
    af_jw_close(w, '}');
}

static void render_plan(struct af_jw *w, const struct af_plan *plan)
{
    render_profile(w, plan);
    af_jw_str(w, "requested_accelerator", accel_kind_name(plan->requested));
    af_jw_str(w, "rule", plan->sel.rule);
    af_jw_open(w, "notes", '[');
    for (int i = 0; i < plan->n_notes && i < AF_NOTE_MAX; i++)
        af_jw_str(w, NULL, plan->notes[i]);
    af_jw_close(w, ']');
    if (plan->sel.memory_needed_gib > 0)
        af_jw_num(w, "memory_needed_gib", plan->sel.memory_needed_gib, 6);
    else
        af_jw_null(w, "memory_needed_gib");
    af_jw_bool(w, "workload_stated", plan->stated);
    af_jw_bool(w, "strict", plan->sel.strict && plan->stated);
    af_jw_int(w, "max_instances", plan->instances);
    af_jw_bool(w, "instances_stated", plan->instances_stated);
    if (plan->requested == AF_ACCEL_NEURON) {
        af_jw_int(w, "neuron_core_version", plan->neuron_gen);
        af_jw_bool(w, "neuron_core_version_stated", plan->neuron_gen_stated);
    }
    af_jw_open(w, "tiers", '[');
    for (size_t i = 0; i < plan->sel.n_tiers && i < AF_ARRAY_SIZE(plan->sel.tiers); i++) {
        const struct af_tier *t = &plan->sel.tiers[i];
        af_jw_open(w, NULL, '{');
        af_jw_int(w, "rank", t->rank);
        af_jw_str(w, "class", t->group ? t->group : af_class_name(t->cls));
        af_jw_str(w, "instance", t->instance ? t->instance->name : NULL);
        af_jw_int(w, "instances", t->instances);
        if (t->price_known)
            af_jw_num(w, "hourly_usd", t->hourly_usd, 6);
        else
            af_jw_null(w, "hourly_usd");
        af_jw_bool(w, "backfill", plan->backfill && i + 1 == plan->sel.n_tiers);
        af_jw_bool(w, "added", t->group != NULL);
        af_jw_open(w, "reasons", '[');
        for (int r = 0; r < t->n_reasons && r < AF_TIER_REASONS; r++)
            af_jw_str(w, NULL, t->reasons[r]);
        af_jw_close(w, ']');
        af_jw_close(w, '}');
    }
    af_jw_close(w, ']');
    af_jw_open(w, "dropped", '[');
    for (size_t i = 0; i < plan->sel.n_dropped && i < AF_ARRAY_SIZE(plan->sel.dropped); i++) {
        af_jw_open(w, NULL, '{');
        af_jw_str(w, "class", af_class_name(plan->sel.dropped[i].cls));
        af_jw_str(w, "reason", plan->sel.dropped[i].reason);
        af_jw_close(w, '}');
    }
    af_jw_close(w, ']');
}

struct explain_in {
    const struct af_pod_info *pod;
    struct af_pod_kept kept;  /* a cached pod's record when it has no whole one (model.h) */
    struct candidates c;
    bool ready;
    const char *why;
    const struct af_snapshot *snap;
    /* GET ?pod= of a bound pod: its node, with the pod's own usage taken off (NULL if none) */
    const struct af_node_view *own;
    bool own_node_missing;    /* bound to a node the cache does not have */
    struct af_dra_demand dra; /* its claims (af__service_dra_pod) */
};

/* "cpu 1, memory 1Gi, nvidia.com/gpu 1": the non-zero requests, for people. */
static void format_requests(const struct af_resources *r, char *out, size_t n)
{
    size_t used = 0;

    out[0] = '\0';
    for (int i = 0; i < AF_RES__COUNT && used < n; i++) {
        char v[32];
        int w;
        if (i == AF_RES_PODS || r->v[i] == 0)
            continue;
        af_res_format((enum af_res)i, r->v[i], v, sizeof(v));
        w = snprintf(out + used, n - used, "%s%s %s", used ? ", " : "", af_res_name((enum af_res)i),
                     v);
        if (w < 0)
            break;
        used += (size_t)w;
    }
    if (!out[0])
        snprintf(out, n, "none");
}

/* "own_usage_subtracted" and "caveats": what the answer leaves out or adjusts. */
static void render_scope(struct af_jw *w, const struct explain_in *in)
{
    char text[AF_REASON_MAX + 256];

    if (in->own) {
        af_jw_open(w, "own_usage_subtracted", '{');
        af_jw_str(w, "node", in->own->info->name);
        af_jw_int(w, "pods", 1);
        af_jw_open(w, "requests", '{');
        for (int i = 0; i < AF_RES__COUNT; i++) {
            char v[32];
            if (i == AF_RES_PODS || in->pod->requests.v[i] == 0)
                continue;
            af_res_format((enum af_res)i, in->pod->requests.v[i], v, sizeof(v));
            af_jw_str(w, af_res_name((enum af_res)i), v);
        }
        af_jw_close(w, '}');
        af_jw_close(w, '}');
    } else {
        af_jw_null(w, "own_usage_subtracted");
    }
    af_jw_open(w, "caveats", '[');
    af_jw_str(w, NULL, EXPLAIN_SCOPE_CAVEAT);
    if (in->own) {
        char req[160];
        format_requests(&in->pod->requests, req, sizeof(req));
        snprintf(text, sizeof(text),
                 "the pod is bound to %s: its own requests (%s) and its pod count were "
                 "subtracted from that node's usage before deciding, so the node is judged as "
                 "if the pod were not on it yet",
                 in->own->info->name, req);
        af_jw_str(w, NULL, text);
    } else if (in->own_node_missing) {
        snprintf(text, sizeof(text),
                 "the pod is bound to %s, which is not in accelfit's cache: nothing was "
                 "subtracted",
                 in->pod->node_name);
        af_jw_str(w, NULL, text);
    }
    af_jw_close(w, ']');
}

/* "rollout": the pod's rollout, its unit, the side and why (null when in none). */
static void render_rollout(struct af_jw *w, const struct af_config *cfg,
                           const struct af_rollout_decision *rd)
{
    const struct af_rollout *r;

    if (rd->rollout < 0) {
        af_jw_null(w, "rollout");
        return;
    }
    r = &cfg->policy->rollouts[rd->rollout];
    af_jw_open(w, "rollout", '{');
    af_jw_str(w, "name", r->name);
    af_jw_str(w, "kind", r->variant ? "variant" : "placement");
    af_jw_str(w, "unit", rd->unit);
    if (rd->side != AF_SIDE_NONE)
        af_jw_str(w, "side", af_rollout_side_name(rd->side));
    else
        af_jw_null(w, "side");
    af_jw_bool(w, "restricts_filter", !r->variant && rd->side != AF_SIDE_NONE);
    af_jw_bool(w, "fallback", rd->fallback);
    af_jw_bool(w, "pinned", rd->pinned);
    af_jw_bool(w, "halted", rd->halted);
    af_jw_num(w, "share", rd->share, 6);
    af_jw_open(w, "counted", '{');
    af_jw_int(w, "target", rd->count.target);
    af_jw_int(w, "source", rd->count.source);
    af_jw_close(w, '}');
    af_jw_str(w, "reason", rd->reason);
    af_jw_close(w, '}');
}

/* "utilization": where live data comes from and whether it is used (null without a source). */
static void render_utilization(struct af_jw *w, const struct af_config *cfg, struct af_service *svc,
                               const struct af_utilization_snapshot *us, double now)
{
    static const char *const modes[] = {"off", "strategy", "prefer-idle", "trust-free"};
    const struct af_utilization_policy *up = &cfg->policy->util;
    char text[400];

    if (!svc->util) {
        af_jw_null(w, "utilization");
        return;
    }
    af_jw_open(w, "utilization", '{');
    af_jw_str(w, "source", us ? us->source : NULL);
    if (!us) {
        af_jw_str(w, "state", "degraded");
        af_jw_str(w, "error", "no answer from Prometheus yet");
    } else {
        af_jw_str(w, "state", us->ok ? "live" : "degraded");
        af_jw_str(w, "error", us->ok ? NULL : us->error);
    }
    if (!us || !us->ok) {
        snprintf(text, sizeof(text),
                 "live utilization is not available: every node is scored on allocation only");
        af_jw_str(w, "effect", text);
    }
    af_jw_str(w, "mode", modes[up->mode]);
    af_jw_num(w, "weight", up->weight, 6);
    af_jw_num(w, "staleness_s", up->staleness_s, 6);
    if (us && us->last_ok > 0)
        af_jw_num(w, "last_answer_age_s", now - us->last_ok, 6);
    else
        af_jw_null(w, "last_answer_age_s");
    af_jw_int(w, "nodes_with_data", us ? (long long)us->n_nodes : 0);
    af_jw_close(w, '}');
}

/* A node's "live": the measured values, their age, what they did to the score, and
 * allocated-but-idle waste. */
static void render_live(struct af_jw *w, const struct af_config *cfg, const struct af_node_view *v,
                        const struct af_node_decision *d, const struct af_utilization_snapshot *us,
                        double now)
{
    struct af_utilization_waste waste;
    const char *metric = af_utilization_metric_name((enum af_utilization_metric)d->live_metric);

    af_jw_open(w, "live", '{');
    af_jw_str(w, "state", af_live_state_name((enum af_live_state)d->live_state));
    af_jw_str(w, "metric", d->live_metric >= 0 ? metric : NULL);
    if (d->live_devices > 0) {
        af_jw_num(w, "util_pct", d->live_util * 100, 6);
        af_jw_num(w, "max_pct", d->live_max * 100, 6);
        af_jw_int(w, "devices", d->live_devices);
        af_jw_int(w, "idle", d->live_idle);
        af_jw_num(w, "age_s", d->live_age_s, 6);
        af_jw_num(w, "s_live", d->s_live, 6);
    }
    if (d->verdict == AF_VERDICT_PASS) {
        af_jw_int(w, "score_allocation", d->score_alloc);
        af_jw_int(w, "score_change", d->score - d->score_alloc);
    }
    if (v->info && af_utilization_waste(cfg->policy, v, af_utilization_find(us, v->info->name), now, &waste)) {
        af_jw_open(w, "waste", '{');
        af_jw_int(w, "idle_allocated", waste.idle_allocated);
        af_jw_int(w, "allocated", waste.allocated);
        af_jw_str(w, "unit", waste.metric == AF_UM_NEURONCORE_UTIL ? "neuroncore" : "gpu");
        if (waste.price_known)
            af_jw_num(w, "usd_per_hour", waste.usd_per_hour, 6);
        else
            af_jw_null(w, "usd_per_hour");
        af_jw_close(w, '}');
    }
    af_jw_close(w, '}');
}

/* The pod's claims: what each is, what it asks for, which selectors were read. */
static void render_dra(struct af_jw *w, const struct explain_in *in)
{
    const struct af_dra_demand *dm = &in->dra;
    char text[256];

    af_jw_open(w, "dra", '{');
    af_jw_open(w, "claims", '[');
    for (size_t i = 0; i < dm->n; i++) {
        const struct af_dra_pod_claim *pc = &dm->claims[i];
        const struct af_dra_claim *src = pc->claim ? pc->claim : pc->tmpl;
        af_jw_open(w, NULL, '{');
        af_jw_str(w, "name", pc->ref);
        af_jw_str(w, pc->from_template ? "template" : "claim", pc->claim_name);
        if (pc->claim && pc->from_template)
            af_jw_str(w, "claim", pc->claim->name);
        af_jw_str(w, "state", pc->missing ? "missing"
                           : pc->claim && pc->claim->allocated ? "allocated"
                                                               : "pending");
        if (pc->claim && pc->claim->allocated) {
            af_jw_int(w, "reserved_for", (long long)pc->claim->n_reserved);
            af_jw_bool(w, "counted_on_this_pod", pc->counted);
        }
        af_jw_open(w, "requests", '[');
        for (size_t k = 0; src && k < src->n_requests; k++) {
            const struct af_dra_request *q = &src->requests[k];
            af_jw_open(w, NULL, '{');
            af_jw_str(w, "name", q->name);
            af_jw_bool(w, "first_available", q->first_available);
            af_jw_open(w, "choices", '[');
            for (size_t m = 0; m < q->n_choices; m++) {
                const struct af_dra_choice *ch = &q->choices[m];
                int res = af_dra_class_res(af_dra_find_class(in->snap ? in->snap->dra : NULL,
                                                             ch->device_class),
                                           ch->device_class);
                af_jw_open(w, NULL, '{');
                af_jw_str(w, "device_class", ch->device_class);
                af_jw_str(w, "counts_as", res >= 0 ? af_res_name((enum af_res)res) : NULL);
                if (ch->all)
                    af_jw_str(w, "count", "All");
                else
                    af_jw_int(w, "count", (long long)ch->count);
                af_jw_int(w, "selector_terms_read", (long long)ch->sel.n_terms);
                af_jw_int(w, "selector_terms_unknown", ch->sel.unknown);
                af_jw_close(w, '}');
            }
            af_jw_close(w, ']');
            af_jw_close(w, '}');
        }
        af_jw_close(w, ']');
        af_jw_close(w, '}');
    }
    af_jw_close(w, ']');
    format_requests(&dm->need, text, sizeof(text));
    af_jw_str(w, "needs", text);
    af_jw_str(w, "allocated_on", dm->alloc_node);
    if (dm->skipped)
        af_jw_int(w, "claims_not_read", (long long)dm->skipped);
    af_jw_close(w, '}');
}

/* A node's DRA devices, and whether its device plugin advertises the same kind. */
static void render_dra_node(struct af_jw *w, const struct explain_in *in,
                            const struct af_node_info *ni)
{
    const struct af_dra_node *dn = af_dra_find_node(in->snap ? in->snap->dra : NULL, ni->name);
    char text[256];

    af_jw_open(w, "dra", '{');
    af_jw_str(w, "driver", ni->dra_driver);
    format_requests(&ni->dra_devices, text, sizeof(text));
    af_jw_str(w, "devices", text);
    if (dn) {
        format_requests(&dn->allocated, text, sizeof(text));
        af_jw_str(w, "allocated", text);
    }
    af_jw_bool(w, "device_plugin_too", ni->dra_both);
    if (ni->dra_both)
        af_jw_str(w, "note", "the device plugin advertises the same kind; its allocatable is "
                          "counted, the DRA devices are not counted again");
    af_jw_close(w, '}');
}

static int render_explain(struct af_service *svc, struct af_config *cfg, struct af_arena *ar,
                          const struct explain_in *in, struct af_buf *out)
{
    struct af_plan *plan = af_arena_alloc(ar, sizeof(*plan));
    struct af_node_decision *fdec = af_arena_alloc(ar, (in->c.n + 1) * sizeof(*fdec));
    struct af_node_decision *pdec = af_arena_alloc(ar, (in->c.n + 1) * sizeof(*pdec));
    struct af_filter_summary sum;
    struct af_tenant_decision bd;
    struct af_jw w = AF_JW_INIT(out);
    char podname[600];
    struct af_utilization_snapshot *us = af_prom_acquire(svc->util);
    double now = af_utilization_now(us, af_wall_time());
    /* what filter and prioritize would do, remembering nothing */
    struct af__decide_ctx dc = {.svc = svc, .cfg = cfg, .snap = in->snap, .ar = ar, .us = us,
                            .rollout_flags = AF_ROLLOUTS_PEEK, .budget_flags = AF_BUDGET_SPEND,
                            .dra = &in->dra,
                            /* the DRA check marks copies: prioritize judges the views as sent */
                            .own_views = af_arena_alloc(ar, (in->c.n + 1) * sizeof(*in->c.views))};
    struct af_decide_hooks h;

    memcpy(dc.own_views, in->c.views, in->c.n * sizeof(*in->c.views));

    memset(&sum, 0, sizeof(sum));
    af_decide_plan(cfg->policy, cfg->catalog, in->pod, af_wall_time(), af__service_hooks(&dc, &h), plan, &bd);
    af_decide_filter(cfg->policy, plan, in->pod, in->c.views, in->c.names, in->c.n, &h, fdec,
                     &sum);
    af_decide_prioritize(cfg->policy, plan, in->pod, in->c.views, in->c.names, in->c.n, &h, &bd,
                         pdec);
    af_tenant_rank(&bd, in->pod, in->c.views, in->c.n, fdec);   /* its reasons too */

    snprintf(podname, sizeof(podname), "%s/%s", in->pod->ns ? in->pod->ns : "",
             in->pod->name ? in->pod->name : "");
    af_jw_open(&w, NULL, '{');
    af_jw_str(&w, "pod", podname);
    af_jw_str(&w, "node_name", in->pod->node_name);
    af_jw_bool(&w, "ready", in->ready);
    if (!in->ready)
        af_jw_str(&w, "not_ready_reason", in->why);
    if (in->snap)
        af_jw_int(&w, "snapshot_generation", (long long)in->snap->generation);
    else
        af_jw_null(&w, "snapshot_generation");
    af_jw_open(&w, "policy", '{');   /* which config answered: a reload changes it */
    af_jw_str(&w, "source", cfg->policy ? cfg->policy->source : NULL);
    af_jw_int(&w, "generation", (long long)cfg->generation);
    af_jw_str(&w, "sha256", cfg->policy_sha256);
    af_jw_str(&w, "catalog", cfg->catalog ? cfg->catalog->source : NULL);
    af_jw_str(&w, "catalog_sha256", cfg->catalog_sha256);
    af_jw_close(&w, '}');
    render_scope(&w, in);
    render_plan(&w, plan);
    render_rollout(&w, cfg, &dc.rd);
    {
        struct af_buf *tenant = af_jw_value(&w, "tenant");
        if (tenant)
            af_jw_done(&w, af_budget_explain_json(&bd, tenant));
    }
    render_utilization(&w, cfg, svc, us, now);
    if (in->dra.n)
        render_dra(&w, in);
    af_jw_open(&w, "summary", '{');
    af_jw_int(&w, "candidates", (long long)in->c.n);
    af_jw_int(&w, "passed", sum.passed);
    af_jw_int(&w, "failed", sum.failed);
    af_jw_int(&w, "unresolvable", sum.unresolvable);
    if (sum.best_tier >= 0 && (size_t)sum.best_tier < plan->sel.n_tiers) {
        af_jw_int(&w, "best_tier", plan->sel.tiers[sum.best_tier].rank);
        af_jw_str(&w, "best_class", tier_name(plan, sum.best_tier));
    } else {
        af_jw_null(&w, "best_tier");
        af_jw_null(&w, "best_class");
    }
    af_jw_bool(&w, "fallback", sum.fallback);
    af_jw_close(&w, '}');
    af_jw_open(&w, "nodes", '[');
    for (size_t i = 0; i < in->c.n; i++) {
        const struct af_node_info *ni = in->c.views[i].info;
        const struct af_node_decision *f = &fdec[i], *p = &pdec[i];

        af_jw_open(&w, NULL, '{');
        af_jw_str(&w, "name", in->c.names[i]);
        af_jw_bool(&w, "known", ni != NULL);
        af_jw_str(&w, "class", ni ? af_class_name(ni->cls) : NULL);
        af_jw_str(&w, "instance_type", ni ? ni->instance_type : NULL);
        if (ni) {
            af_jw_str(&w, "class_source", ni->class_source);
            if (ni->dev_mem_gib_hi > 0) {
                af_jw_num(&w, "device_memory_gib", ni->dev_mem_gib_hi, 6);
                af_jw_str(&w, "device_memory_source", ni->dev_mem_source);
            }
            af_jw_bool(&w, "spot", ni->spot);
            if (ni->price_known)
                af_jw_num(&w, "node_hourly_usd", ni->hourly_usd, 6);
            else
                af_jw_null(&w, "node_hourly_usd");
            af_jw_str(&w, "price_source", ni->price_source);
            {
                char why[512];
                double wall = af_wall_time();
                af_node_price_reason(ni, cfg->catalog, cfg->policy, wall, why, sizeof(why));
                af_jw_str(&w, "price_reason", why);
                if (ni->price_known && ni->price_as_of > 0)
                    af_jw_int(&w, "price_age_s", (long long)(wall - ni->price_as_of));
                else
                    af_jw_null(&w, "price_age_s");
            }
            af_jw_str(&w, "region", ni->region);
            af_jw_str(&w, "zone", ni->zone);
            if (ni->price_annotation_bad)
                af_jw_str(&w, "price_note",
                       "annotation accelfit.io/hourly-price is not a decimal price; ignored");
            if (ni->dra_driver)
                render_dra_node(&w, in, ni);
        }
        af_jw_str(&w, "verdict", verdict_name(f->verdict));
        if (f->tier >= 0 && (size_t)f->tier < plan->sel.n_tiers)
            af_jw_int(&w, "tier", plan->sel.tiers[f->tier].rank);
        else
            af_jw_null(&w, "tier");
        af_jw_bool(&w, "has_room", f->has_room);
        af_jw_str(&w, "reason", f->reason);
        af_jw_int(&w, "score", p->score);
        af_jw_num(&w, "s_tier", p->s_tier, 6);
        af_jw_num(&w, "s_util", p->s_util, 6);
        af_jw_num(&w, "s_cost", p->s_cost, 6);
        af_jw_num(&w, "util_after", p->util_after, 6);
        if (p->marginal_known)
            af_jw_num(&w, "marginal_usd_hr", p->marginal_usd_hr, 6);
        else
            af_jw_null(&w, "marginal_usd_hr");
        if (us)
            render_live(&w, cfg, &in->c.views[i], f->live_state == AF_LIVE_REFUSED ? f : p, us,
                        now);
        af_jw_close(&w, '}');
    }
    af_jw_close(&w, ']');
    af_jw_close(&w, '}');
    af_utilization_snapshot_unref(us);
    return af_jw_end(&w);
}

static int do_explain(struct af_service *svc, struct af_config *cfg, const char *body, size_t len,
                      struct af_buf *out, struct af_request_stats *st)
{
    size_t base = out->len;
    struct af_error err;
    struct af_ext_args *args = NULL;
    struct af_arena ar = AF_ARENA_INIT;
    struct af_buf msg = AF_BUF_INIT(1024);
    struct explain_in in;
    int rc, status = 200;

    memset(&err, 0, sizeof(err));
    memset(&in, 0, sizeof(in));
    rc = len ? af_codec_decode_args(cfg, body, len, &args, &err) : AF_EPARSE;
    if (rc != 0) {
        request_error(&msg, "cannot decode ExtenderArgs", &err, rc, len);
        af_service_error_body(out, base, msg.buf ? msg.buf : "cannot decode ExtenderArgs");
        status = 400;
        goto done;
    }
    if (af_ext_args_count(args) > AF_SERVICE_MAX_CANDIDATES) {
        af_service_error_body(out, base, "accelfit: too many candidate nodes in one request");
        status = 400;
        goto done;
    }
    in.snap = af_publisher_acquire(svc->pub);
    in.pod = af__service_dra_pod(&ar, in.snap, af_ext_args_pod(args), &in.dra);
    in.ready = snapshot_ready(svc, in.snap, &in.why);
    build_candidates(&ar, args, in.snap, &in.c);
    st->candidates = (int)in.c.n;
    if (render_explain(svc, cfg, &ar, &in, out) != 0) {
        af_service_error_body(out, base, "accelfit: explanation too large");
        status = 500;
    }
done:
    af_snapshot_unref((struct af_snapshot *)in.snap);
    af_buf_release(&msg);
    af_arena_release(&ar);
    af_ext_args_free(args);
    return status;
}

/*
 * Takes a bound pod's own effective requests and its pod count off its node's
 * usage, with the cache's wrapping arithmetic so it exactly undoes what the
 * cache added.
 */
static void subtract_own_usage(struct af_node_view *v, const struct af_pod_info *pod)
{
    for (int i = 0; i < AF_RES__COUNT; i++)
        v->used.v[i] = (int64_t)((uint64_t)v->used.v[i] - (uint64_t)pod->requests.v[i]);
    if (v->npods > 0)
        v->npods--;
}

int af_service_explain_pod(struct af_service *svc, const char *ns, const char *name,
                           struct af_buf *out)
{
    size_t base = out->len;
    struct af_config *cfg = af_config_holder_get(svc->config);
    struct af_arena ar = AF_ARENA_INIT;
    struct explain_in in;
    int status = 200;

    memset(&in, 0, sizeof(in));
    in.snap = af_publisher_acquire(svc->pub);
    in.ready = snapshot_ready(svc, in.snap, &in.why);
    if (!in.snap) {
        af_service_error_body(out, base, "no cluster snapshot published yet");
        status = 503;
        goto done;
    }
    in.pod = af_pod_brief_info(af_snapshot_find_pod(in.snap, ns, name), &in.kept);
    if (!in.pod) {
        char text[600];
        snprintf(text, sizeof(text), "pod '%s/%s' is not in the cache", ns, name);
        af_service_error_body(out, base, text);
        status = 404;
        goto done;
    }
    in.c.n = in.snap->n_nodes;
    in.c.views = in.snap->nodes;
    in.c.names = af_arena_alloc(&ar, (in.c.n + 1) * sizeof(*in.c.names));
    for (size_t i = 0; i < in.c.n; i++)
        in.c.names[i] = in.snap->nodes[i].info->name;
    if (in.pod->node_name && *in.pod->node_name && !in.pod->terminal) {
        /* A bound pod is in its node's usage already: judge the node without it. */
        const struct af_node_view *mine = af_snapshot_find_node(in.snap, in.pod->node_name);
        if (mine && mine >= in.snap->nodes && mine < in.snap->nodes + in.snap->n_nodes) {
            size_t k = (size_t)(mine - in.snap->nodes);
            struct af_node_view *views = af_arena_alloc(&ar, (in.c.n + 1) * sizeof(*views));
            memcpy(views, in.snap->nodes, in.c.n * sizeof(*views));
            subtract_own_usage(&views[k], in.pod);
            in.c.views = views;
            in.own = &views[k];
        } else {
            in.own_node_missing = true;
        }
    }
    in.pod = af__service_dra_pod(&ar, in.snap, in.pod, &in.dra);
    if (render_explain(svc, cfg, &ar, &in, out) != 0) {
        af_service_error_body(out, base, "accelfit: explanation too large");
        status = 500;
    }
done:
    af_snapshot_unref((struct af_snapshot *)in.snap);
    af_arena_release(&ar);
    af_config_unref(cfg);
    return status;
}

/* A 400 whose message is `err`, prefixed as every accelfit error is. */
static int bad_query(struct af_buf *out, size_t base, const char *err)
{
    char text[460];

    snprintf(text, sizeof(text), "accelfit: %s", err);
    af_service_error_body(out, base, text);
    return 400;
}

int af_service_explain_query(struct af_service *svc, const char *query, struct af_buf *out)
{
    static const char *const known[] = {"pod", NULL};
    size_t base = out->len;
    struct af_query q;
    char err[400], ns[300];
    const char *v, *slash;
    int status;

    if (af_query_parse(&q, query, "GET /explain", known, err, sizeof(err)) != 0)
        return bad_query(out, base, err);
    v = af_query_get(&q, "pod");
    slash = v ? strchr(v, '/') : NULL;
    if (!v || !slash || slash == v || !slash[1] || (size_t)(slash - v) >= sizeof(ns)) {
        snprintf(err, sizeof(err),
                 "GET /explain: %s%.80s%s; expected ?pod=NAMESPACE/NAME (or POST the "
                 "ExtenderArgs kube-scheduler sends)",
                 !v ? "the query has no 'pod'" : "pod='", v ? v : "",
                 v ? "' is not NAMESPACE/NAME" : "");
        af_query_release(&q);
        return bad_query(out, base, err);
    }
    memcpy(ns, v, (size_t)(slash - v));
    ns[slash - v] = '\0';
    status = af_service_explain_pod(svc, ns, slash + 1, out);
    af_query_release(&q);
    return status;
}

/* ---- GET /rollouts, POST /rollouts/NAME/ack ------------------------------------------------- */

int af_service_rollouts(struct af_service *svc, struct af_buf *out)
{
    size_t base = out->len;
    struct af_config *cfg = af_config_holder_get(svc->config);
    struct af_snapshot *snap = af_publisher_acquire(svc->pub);
    int status = 200;

    if (!svc->rollouts) {
        af_service_error_body(out, base, "accelfit: this server keeps no rollout state");
        status = 503;
    } else if (af_rollouts_render(svc->rollouts, cfg, snap, af_wall_time(), out) != 0) {
        af_service_error_body(out, base, "accelfit: the rollouts are too large to render");
        status = 500;
    }
    af_snapshot_unref(snap);
    af_config_unref(cfg);
    return status;
}

int af_service_rollout_ack(struct af_service *svc, const char *name, struct af_buf *out)
{
    size_t base = out->len;
    struct af_config *cfg = af_config_holder_get(svc->config);
    struct af_snapshot *snap = NULL;
    struct af_rollout_status st;
    struct af_jw w = AF_JW_INIT(out);
    size_t i, n = cfg->policy ? cfg->policy->n_rollouts : 0;
    int status = 200;

    for (i = 0; name && i < n; i++)
        if (!strcmp(cfg->policy->rollouts[i].name, name))
            break;
    if (!name || i == n) {
        char text[200];
        snprintf(text, sizeof(text), "accelfit: no rollout '%.100s' in the policy",
                 name ? name : "");
        af_service_error_body(out, base, text);
        status = 404;
        goto done;
    }
    if (!svc->rollouts) {
        af_service_error_body(out, base, "accelfit: this server keeps no rollout state");
        status = 503;
        goto done;
    }
    /* Evaluate the brake first, so the acknowledgment covers what is failing right now. */
    snap = af_publisher_acquire(svc->pub);
    af_rollouts_status(svc->rollouts, cfg, snap, af_wall_time(), i, &st);
    if (af_rollouts_ack(svc->rollouts, name) != 0)
        AF_LOG(AF_LOG_ERROR, "cannot acknowledge rollout", "rollout", name, NULL);
    af_jw_open(&w, NULL, '{');
    af_jw_str(&w, "rollout", name);
    af_jw_bool(&w, "acknowledged", true);
    af_jw_bool(&w, "was_halted", st.halted);
    af_jw_str(&w, "halt_reason", st.halted ? st.halt_reason : NULL);
    af_jw_close(&w, '}');
    if (af_jw_end(&w)) {
        af_service_error_body(out, base, "accelfit: response too large");
        status = 500;
    }
done:
    af_snapshot_unref(snap);
    af_config_unref(cfg);
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
        status = do_explain(svc, cfg, body, len, out, st);
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

int af_service_rollout_ack_query(struct af_service *svc, const char *query, struct af_buf *out)
{
    static const char *const known[] = {"name", NULL};
    size_t base = out->len;
    struct af_query q;
    char err[400];
    const char *v;
    int status;

    if (af_query_parse(&q, query, "POST /rollouts/ack", known, err, sizeof(err)) != 0)
        return bad_query(out, base, err);
    v = af_query_get(&q, "name");
    if (!v || !*v) {
        af_query_release(&q);
        return bad_query(out, base,
                         "POST /rollouts/ack: the query names no rollout; expected "
                         "?name=ROLLOUT (GET /rollouts lists them)");
    }
    status = af_service_rollout_ack(svc, v, out);
    af_query_release(&q);
    return status;
}

/* ---- recommend ---------------------------------------------------------------------------------- */

struct recommend_in {
    struct af_profile profile;
    char err[320];
};

static int recommend_param(void *ud, const char *key, const char *value)
{
    struct recommend_in *in = ud;

    return af_profile_set(&in->profile, key, value, in->err, sizeof(in->err));
}

/* The query's parameters through recommend_param; a bare name is a switch: ?neuron-ready. */
static int recommend_query(struct recommend_in *in, const char *query)
{
    struct af_query q;
    int rc = af_query_parse(&q, query, "GET /recommend", NULL, in->err, sizeof(in->err));

    for (size_t i = 0; !rc && i < q.n; i++)
        rc = recommend_param(in, q.p[i].key, q.p[i].bare ? "true" : q.p[i].value);
    af_query_release(&q);   /* nothing to release after a parse error; harmless */
    return rc;
}

/* True when `query` holds at least one parameter (empty pieces do not count). */
static bool has_query(const char *query)
{
    for (; query && *query; query++)
        if (*query != '&')
            return true;
    return false;
}

int af_service_recommend(struct af_service *svc, const char *query, const char *body, size_t len,
                         struct af_buf *out)
{
    size_t base = out->len;
    struct af_config *cfg = af_config_holder_get(svc->config);
    struct af_selection *sel = NULL;
    struct recommend_in in;
    struct af_buf json = AF_BUF_INIT(0);
    struct af_error err;
    int rc, status = 200;

    memset(&in, 0, sizeof(in));
    memset(&err, 0, sizeof(err));
    af_profile_init(&in.profile);
    if (body && len && has_query(query)) {
        snprintf(in.err, sizeof(in.err),
                 "POST /recommend has parameters both in its query ('%.80s') and in its body; "
                 "send them in one place",
                 query);
        rc = AF_EINVAL;
    } else if (body && len) {
        rc = af_codec_decode_params(body, len, recommend_param, &in, &err);
        if (rc && !in.err[0])
            af_error_format(&err, in.err, sizeof(in.err));
    } else {
        rc = recommend_query(&in, query);
    }
    if (!rc)
        rc = af_profile_check(&in.profile, in.err, sizeof(in.err));
    if (rc) {
        char text[400];
        snprintf(text, sizeof(text), "accelfit: %s", in.err);
        af_service_error_body(out, base, text);
        status = 400;
        goto done;
    }
    sel = af_xmalloc(sizeof(*sel));
    af_select(cfg->policy, cfg->catalog, &in.profile, false, sel);
    af_recommend_json(&in.profile, cfg, sel, &json);
    if (af_buf_add(out, json.buf, json.len)) {
        af_service_error_body(out, base, "accelfit: the recommendation is too large");
        status = 500;
    }
done:
    af_buf_release(&json);
    af_free(sel);
    af_config_unref(cfg);
    return status;
}
