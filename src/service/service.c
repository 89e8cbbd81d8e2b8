/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The extender's handlers without a transport: a verb and a request body in,
 * an HTTP status and a response body out. Each call takes a reference on the
 * current config and snapshot, builds the candidate views in a per-request
 * arena, hands them to the decision core (af_plan_pod, af_filter,
 * af_prioritize) and encodes what it says. No decision logic lives here. This
 * file has what the verbs (verbs.c, explain.c) share: the candidates of a
 * request, the error answers, and the service's part of the decision order,
 * rollout steering among it: a pod of a placement rollout has its plan restricted to the
 * classes of the side its unit was given (src/rollouts/ decides;
 * af_plan_restrict makes it explicit policy for filter). The server and the
 * benchmarks call it directly, so it has no idea which connection a request
 * came from.
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

const char *af__service_verdict_name(enum af_verdict v)
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

/* A 400 whose message is `err`, prefixed as every accelfit error is. */
int af__service_bad_query(struct af_buf *out, size_t base, const char *err)
{
    char text[460];

    snprintf(text, sizeof(text), "accelfit: %s", err);
    af_service_error_body(out, base, text);
    return 400;
}

/* ---- rollout steering ----------------------------------------------------------------------- */

void af__service_candidates(struct af_arena *ar, const struct af_ext_args *args,
                            const struct af_snapshot *snap, struct af__candidates *c)
{
    bool nodes_mode = af_ext_args_nodes_mode(args);

    const struct af_node_view **found;

    c->n = af_ext_args_count(args);
    /* every entry is written below: not zeroed first */
    c->views = af_arena_alloc_uninit(ar, (c->n + 1) * sizeof(*c->views));
    c->names = af_arena_alloc_uninit(ar, (c->n + 1) * sizeof(*c->names));
    found = af_arena_alloc_uninit(ar, (c->n + 1) * sizeof(*found));
    for (size_t i = 0; i < c->n; i++)
        c->names[i] = af_ext_args_name(args, i);
    af_snapshot_find_nodes(snap, c->names, c->n, found);   /* NULL names find nothing */
    for (size_t i = 0; i < c->n; i++) {
        const char *name = c->names[i];
        const struct af_node_view *v = found[i];

        c->names[i] = name ? name : "";
        if (nodes_mode) {
            /* The request's own Node object, with the allocation the cache knows. */
            memset(&c->views[i], 0, sizeof(c->views[i]));
            c->views[i].info = af_ext_args_node(args, i);
            if (v) {
                c->views[i].used = v->used;
                c->views[i].npods = v->npods;
            }
        } else if (v) {
            c->views[i] = *v;
        } else {
            memset(&c->views[i], 0, sizeof(c->views[i]));   /* not in the cache: no info */
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

void af__service_request_error(struct af_buf *errbuf, const char *what, const struct af_error *err,
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
