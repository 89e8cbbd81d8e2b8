/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /explain: what filter and prioritize would do with a pod, and why, without
 * remembering anything (the rollouts are only peeked at, the tenant's budget
 * not charged). POSTed the ExtenderArgs kube-scheduler sends, or asked for a
 * pod of the cache by name (a bound pod is judged without its own usage). The
 * document names the config that answered, the pod's plan, its rollout and
 * tenant, live utilization, DRA, and every candidate's verdict and score.
 */
#include "accelfit/service.h"

#include <math.h>
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

/* What /explain cannot see; kube-scheduler applies these before it calls the extender. */
#define EXPLAIN_SCOPE_CAVEAT                                                                   \
    "taints, tolerations, node affinity and other kube-scheduler plugins are not evaluated by " \
    "/explain: kube-scheduler applies them before it calls the extender, so a node shown as "  \
    "pass here may still be excluded by them"

/* ---- explain ------------------------------------------------------------------------------------ */

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
    struct af__candidates c;
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

/* What filter and prioritize would do with the pod, remembering nothing: /explain's answer
 * before it is rendered. */
struct explain_out {
    struct af_plan *plan;
    struct af_node_decision *fdec, *pdec;       /* filter's and prioritize's, per candidate */
    struct af_filter_summary sum;
    struct af_tenant_decision bd;
    struct af__decide_ctx dc;                   /* dc.rd: the rollout's decision */
    struct af_utilization_snapshot *us;         /* a reference, or NULL */
    double now;                                 /* the live utilization's */
};

/* Decides as filter and prioritize would, in `ar`; d->us is the caller's to release. */
static void explain_decide(struct af_service *svc, struct af_config *cfg, struct af_arena *ar,
                           const struct explain_in *in, struct explain_out *d)
{
    struct af_decide_hooks h;

    d->plan = af_arena_alloc(ar, sizeof(*d->plan));
    d->fdec = af_arena_alloc(ar, (in->c.n + 1) * sizeof(*d->fdec));
    d->pdec = af_arena_alloc(ar, (in->c.n + 1) * sizeof(*d->pdec));
    d->us = af_prom_acquire(svc->util);
    d->now = af_utilization_now(d->us, af_wall_time());
    /* what filter and prioritize would do, remembering nothing */
    d->dc = (struct af__decide_ctx){
        .svc = svc, .cfg = cfg, .snap = in->snap, .ar = ar, .us = d->us,
        .rollout_flags = AF_ROLLOUTS_PEEK, .budget_flags = AF_BUDGET_SPEND, .dra = &in->dra,
        /* the DRA check marks copies: prioritize judges the views as sent */
        .own_views = af_arena_alloc(ar, (in->c.n + 1) * sizeof(*in->c.views))};
    memcpy(d->dc.own_views, in->c.views, in->c.n * sizeof(*in->c.views));

    memset(&d->sum, 0, sizeof(d->sum));
    af_decide_plan(cfg->policy, cfg->catalog, in->pod, af_wall_time(),
                   af__service_hooks(&d->dc, &h), d->plan, &d->bd);
    af_decide_filter(cfg->policy, d->plan, in->pod, in->c.views, in->c.names, in->c.n, &h,
                     d->fdec, &d->sum);
    af_decide_prioritize(cfg->policy, d->plan, in->pod, in->c.views, in->c.names, in->c.n, &h,
                         &d->bd, d->pdec);
    af_tenant_rank(&d->bd, in->pod, in->c.views, in->c.n, d->fdec);   /* its reasons too */
}

static void render_summary(struct af_jw *w, const struct explain_in *in,
                           const struct explain_out *d)
{
    const struct af_plan *plan = d->plan;

    af_jw_open(w, "summary", '{');
    af_jw_int(w, "candidates", (long long)in->c.n);
    af_jw_int(w, "passed", d->sum.passed);
    af_jw_int(w, "failed", d->sum.failed);
    af_jw_int(w, "unresolvable", d->sum.unresolvable);
    if (d->sum.best_tier >= 0 && (size_t)d->sum.best_tier < plan->sel.n_tiers) {
        af_jw_int(w, "best_tier", plan->sel.tiers[d->sum.best_tier].rank);
        af_jw_str(w, "best_class", af__service_tier_name(plan, d->sum.best_tier));
    } else {
        af_jw_null(w, "best_tier");
        af_jw_null(w, "best_class");
    }
    af_jw_bool(w, "fallback", d->sum.fallback);
    af_jw_close(w, '}');
}

/* What the cache knows of candidate node `ni`: its class, memory, price and DRA devices. */
static void render_node_info(struct af_jw *w, const struct af_config *cfg,
                             const struct explain_in *in, const struct af_node_info *ni)
{
    af_jw_str(w, "class_source", ni->class_source);
    if (ni->dev_mem_gib_hi > 0) {
        af_jw_num(w, "device_memory_gib", ni->dev_mem_gib_hi, 6);
        af_jw_str(w, "device_memory_source", ni->dev_mem_source);
    }
    af_jw_bool(w, "spot", ni->spot);
    if (ni->price_known)
        af_jw_num(w, "node_hourly_usd", ni->hourly_usd, 6);
    else
        af_jw_null(w, "node_hourly_usd");
    af_jw_str(w, "price_source", ni->price_source);
    {
        char why[512];
        double wall = af_wall_time();
        af_node_price_reason(ni, cfg->catalog, cfg->policy, wall, why, sizeof(why));
        af_jw_str(w, "price_reason", why);
        if (ni->price_known && ni->price_as_of > 0)
            af_jw_int(w, "price_age_s", (long long)(wall - ni->price_as_of));
        else
            af_jw_null(w, "price_age_s");
    }
    af_jw_str(w, "region", ni->region);
    af_jw_str(w, "zone", ni->zone);
    if (ni->price_annotation_bad)
        af_jw_str(w, "price_note",
                  "annotation accelfit.io/hourly-price is not a decimal price; ignored");
    if (ni->dra_driver)
        render_dra_node(w, in, ni);
}

/* Candidate `i`: the node, filter's verdict and prioritize's score. */
static void render_node(struct af_jw *w, const struct af_config *cfg,
                        const struct explain_in *in, const struct explain_out *d, size_t i)
{
    const struct af_node_info *ni = in->c.views[i].info;
    const struct af_node_decision *f = &d->fdec[i], *p = &d->pdec[i];
    const struct af_plan *plan = d->plan;

    af_jw_open(w, NULL, '{');
    af_jw_str(w, "name", in->c.names[i]);
    af_jw_bool(w, "known", ni != NULL);
    af_jw_str(w, "class", ni ? af_class_name(ni->cls) : NULL);
    af_jw_str(w, "instance_type", ni ? ni->instance_type : NULL);
    if (ni)
        render_node_info(w, cfg, in, ni);
    af_jw_str(w, "verdict", af__service_verdict_name(f->verdict));
    if (f->tier >= 0 && (size_t)f->tier < plan->sel.n_tiers)
        af_jw_int(w, "tier", plan->sel.tiers[f->tier].rank);
    else
        af_jw_null(w, "tier");
    af_jw_bool(w, "has_room", f->has_room);
    af_jw_str(w, "reason", f->reason);
    af_jw_int(w, "score", p->score);
    af_jw_num(w, "s_tier", p->s_tier, 6);
    af_jw_num(w, "s_util", p->s_util, 6);
    af_jw_num(w, "s_cost", p->s_cost, 6);
    af_jw_num(w, "util_after", p->util_after, 6);
    if (p->marginal_known)
        af_jw_num(w, "marginal_usd_hr", p->marginal_usd_hr, 6);
    else
        af_jw_null(w, "marginal_usd_hr");
    if (d->us)
        render_live(w, cfg, &in->c.views[i], f->live_state == AF_LIVE_REFUSED ? f : p, d->us,
                    d->now);
    af_jw_close(w, '}');
}

/* The explanation of what explain_decide decided. Returns 0, or AF_ETOOBIG. */
static int render_explain(struct af_service *svc, struct af_config *cfg,
                          const struct explain_in *in, const struct explain_out *d,
                          struct af_buf *out)
{
    struct af_jw w = AF_JW_INIT(out);
    char podname[600];

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
    render_plan(&w, d->plan);
    render_rollout(&w, cfg, &d->dc.rd);
    {
        struct af_buf *tenant = af_jw_value(&w, "tenant");
        if (tenant)
            af_jw_done(&w, af_budget_explain_json(&d->bd, tenant));
    }
    render_utilization(&w, cfg, svc, d->us, d->now);
    if (in->dra.n)
        render_dra(&w, in);
    render_summary(&w, in, d);
    af_jw_open(&w, "nodes", '[');
    for (size_t i = 0; i < in->c.n; i++)
        render_node(&w, cfg, in, d, i);
    af_jw_close(&w, ']');
    af_jw_close(&w, '}');
    return af_jw_end(&w);
}

/* /explain's answer for `in`, decided and rendered. Returns 0, or AF_ETOOBIG. */
static int explain(struct af_service *svc, struct af_config *cfg, struct af_arena *ar,
                   const struct explain_in *in, struct af_buf *out)
{
    struct explain_out d;
    int rc;

    explain_decide(svc, cfg, ar, in, &d);
    rc = render_explain(svc, cfg, in, &d, out);
    af_utilization_snapshot_unref(d.us);
    return rc;
}

int af__service_explain(struct af_service *svc, struct af_config *cfg, const char *body, size_t len,
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
        af__service_request_error(&msg, "cannot decode ExtenderArgs", &err, rc, len);
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
    in.ready = af__service_snapshot_ready(svc, in.snap, &in.why);
    af__service_candidates(&ar, args, in.snap, &in.c);
    st->candidates = (int)in.c.n;
    if (explain(svc, cfg, &ar, &in, out) != 0) {
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
    in.ready = af__service_snapshot_ready(svc, in.snap, &in.why);
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
    if (explain(svc, cfg, &ar, &in, out) != 0) {
        af_service_error_body(out, base, "accelfit: explanation too large");
        status = 500;
    }
done:
    af_snapshot_unref((struct af_snapshot *)in.snap);
    af_arena_release(&ar);
    af_config_unref(cfg);
    return status;
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
        return af__service_bad_query(out, base, err);
    v = af_query_get(&q, "pod");
    slash = v ? strchr(v, '/') : NULL;
    if (!v || !slash || slash == v || !slash[1] || (size_t)(slash - v) >= sizeof(ns)) {
        snprintf(err, sizeof(err),
                 "GET /explain: %s%.80s%s; expected ?pod=NAMESPACE/NAME (or POST the "
                 "ExtenderArgs kube-scheduler sends)",
                 !v ? "the query has no 'pod'" : "pod='", v ? v : "",
                 v ? "' is not NAMESPACE/NAME" : "");
        af_query_release(&q);
        return af__service_bad_query(out, base, err);
    }
    memcpy(ns, v, (size_t)(slash - v));
    ns[slash - v] = '\0';
    status = af_service_explain_pod(svc, ns, slash + 1, out);
    af_query_release(&q);
    return status;
}
