/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tenants' budgets at decision time and the cost reports (accelfit/budget.h).
 * The costs of one snapshot under one config come from the memo the service
 * keeps (src/budget/memo.c). At decision time the service looks the pod's
 * tenant's spend up in that memo, adds the charges of the tenant's pods filter
 * passed and the snapshot does not show yet (kept with the memo,
 * accelfit/inflight.h), and hands it to the core (af_tenant_steer,
 * accelfit/tenant_budget.h), which decides what the tenant's policy does to the
 * pod. The /costs document, its table twin in `accelfit costs`, /explain's
 * tenant object and the tenant and idle-cost gauges are rendered here.
 */
#include "accelfit/budget.h"
#include "accelfit/metrics.h"
#include "accelfit/service.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "accelfit/inflight.h"
#include "accelfit/tenant.h"
#include "accelfit/tenant_budget.h"
#include "accelfit/banned.h"

/* ---- decisions --------------------------------------------------------------------------------------- */

static double now_s(void)
{
    return (double)af_now_ns() / 1e9;
}

static struct af_inflight *inflight_of(struct af_service *svc)
{
    return svc ? af_costs_memo_inflight(svc->costs) : NULL;
}

void af_budget_steer(struct af_service *svc, struct af_config *cfg, struct af_snapshot *snap,
                     const struct af_pod_info *pod, unsigned flags, struct af_plan *plan,
                     struct af_tenant_decision *td)
{
    const struct af_policy *pol = cfg ? cfg->policy : NULL;
    int tenant = af_tenant_of(pol, pod, NULL);
    double spend = 0;
    bool known = false;

    /* The spend only when the decision needs it (or /explain shows it): a policy without
     * budgets costs filter nothing. */
    if (tenant >= 0 && snap && (af_tenant_needs_spend(pol, tenant) || (flags & AF_BUDGET_SPEND))) {
        struct af_costs *c = af_costs_memo_get(svc ? svc->costs : NULL, cfg, snap);
        if ((size_t)tenant < c->n_tenants)
            spend = c->tenants[tenant].spend_usd_hr;
        af_costs_unref(c);
        /* plus what filter passed for the tenant's other pods and `snap` does not show yet */
        spend += af_inflight_sum(inflight_of(svc), snap, pol->tenants[tenant].name, pod, now_s());
        known = true;
    }
    af_tenant_steer(pol, pod, spend, known, plan, td);
}

void af_budget_charge(struct af_service *svc, const struct af_pod_info *pod,
                      const struct af_tenant_decision *td, const struct af_node_view *views,
                      size_t n, const struct af_node_decision *dec)
{
    if (!td->t || !td->t->has_budget || td->t->over_budget != AF_OVER_BUDGET_HARD)
        return;
    /* 0 (no premium node passed) ends an earlier charge of the pod's */
    af_inflight_charge(inflight_of(svc), td->t->name, pod,
                       af_tenant_committed_usd(td, pod, views, n, dec), now_s());
}

/* ---- JSON ------------------------------------------------------------------------------------------------ */

/* Dollars per hour to a tenth of a cent and a bit: 4 decimals, no trailing zeros. */
/* Dollars per hour: four decimals (a hundredth of a cent) are all a report needs. */
static double usd(double v)
{
    return round(v * 10000.0) / 10000.0;
}

static void num(struct af_jw *w, const char *k, double v)
{
    af_jw_num(w, k, usd(v), 10);
}

/* The same in Prometheus' text format. */
static int usd_text(struct af_buf *o, double v)
{
    return af_buf_json_num(o, usd(v), 10);
}

/* `v` when `known`, else null. */
static void num_or_null(struct af_jw *w, const char *k, bool known, double v)
{
    if (known)
        num(w, k, v);
    else
        af_jw_null(w, k);
}

static void class_array(struct af_jw *w, const char *k, uint32_t mask)
{
    af_jw_open(w, k, '[');
    for (int c = 0; c < AF_CLASS__COUNT; c++)
        if (mask & (1u << c))
            af_jw_str(w, NULL, af_class_name((enum af_class)c));
    af_jw_close(w, ']');
}

static const char *slot_name(int slot)
{
    return slot >= AF_CLASS__COUNT ? "unknown" : af_class_name((enum af_class)slot);
}

int af_budget_explain_json(const struct af_tenant_decision *td, struct af_buf *out)
{
    const struct af_tenant *t = td->t;
    struct af_jw w = AF_JW_INIT(out);

    if (!t)
        return af_buf_puts(out, "null");
    af_jw_open(&w, NULL, '{');
    af_jw_str(&w, "name", t->name);
    af_jw_str(&w, "matched_by", af_tenant_match_name(td->how));
    num_or_null(&w, "budget_usd_hr", t->has_budget, t->budget_usd_hr);
    af_jw_str(&w, "over_budget", t->has_budget ? af_over_budget_name(t->over_budget) : NULL);
    num_or_null(&w, "spend_usd_hr", td->spend_known, td->spend_usd_hr);
    class_array(&w, "premium_classes", t->premium);
    if (t->classes)
        class_array(&w, "classes", t->classes);
    else
        af_jw_null(&w, "classes");
    af_jw_str(&w, "capacity", t->spot_only ? "spot" : "any");
    af_jw_str(&w, "effect", td->effect);
    af_jw_close(&w, '}');
    return af_jw_error(&w);
}

static void render_tenants(struct af_jw *w, const struct af_costs *c, const struct af_policy *pol)
{
    af_jw_open(w, "tenants", '[');
    for (size_t i = 0; i < c->n_tenants && pol && i < pol->n_tenants; i++) {
        const struct af_tenant *t = &pol->tenants[i];
        const struct af_cost_tenant *ct = &c->tenants[i];

        af_jw_open(w, NULL, '{');
        af_jw_str(w, "name", t->name);
        num_or_null(w, "budget_usd_hr", t->has_budget, t->budget_usd_hr);
        af_jw_str(w, "over_budget", t->has_budget ? af_over_budget_name(t->over_budget) : NULL);
        num(w, "spend_usd_hr", ct->spend_usd_hr);
        num_or_null(w, "remaining_usd_hr", t->has_budget, t->budget_usd_hr - ct->spend_usd_hr);
        af_jw_bool(w, "over", t->has_budget && ct->spend_usd_hr > t->budget_usd_hr);
        af_jw_int(w, "pods", ct->pods);
        num(w, "prepaid_usd_hr", ct->prepaid_usd_hr);
        af_jw_int(w, "prepaid_pods", ct->prepaid_pods);
        af_jw_open(w, "by_class", '{');
        for (int s = 0; s < AF_COSTS_CLASSES; s++)
            if (ct->by_class[s] > 0)
                num(w, slot_name(s), ct->by_class[s]);
        af_jw_close(w, '}');
        af_jw_close(w, '}');
    }
    af_jw_close(w, ']');
}

static void render_namespaces(struct af_jw *w, const struct af_costs *c,
                              const struct af_policy *pol)
{
    af_jw_open(w, "namespaces", '[');
    for (size_t i = 0; i < c->n_ns; i++) {
        const struct af_cost_ns *e = &c->ns[i];

        af_jw_open(w, NULL, '{');
        af_jw_str(w, "name", e->ns);
        af_jw_str(w, "tenant",
                  pol && e->owned && e->tenant >= 0 && (size_t)e->tenant < pol->n_tenants
                      ? pol->tenants[e->tenant].name
                      : NULL);
        num(w, "spend_usd_hr", e->spend_usd_hr);
        af_jw_int(w, "pods", e->pods);
        af_jw_close(w, '}');
    }
    af_jw_close(w, ']');
}

static void render_classes(struct af_jw *w, const struct af_costs *c)
{
    af_jw_open(w, "classes", '[');
    for (int s = 0; s < AF_COSTS_CLASSES; s++) {
        const struct af_cost_class *cl = &c->classes[s];

        if (!cl->nodes)
            continue;
        af_jw_open(w, NULL, '{');
        af_jw_str(w, "class", slot_name(s));
        af_jw_int(w, "nodes", cl->nodes);
        num(w, "price_usd_hr", cl->price_usd_hr);
        num(w, "spend_usd_hr", cl->spend_usd_hr);
        num(w, "idle_usd_hr", cl->idle_usd_hr);
        af_jw_int(w, "devices", (long long)cl->devices);
        af_jw_int(w, "idle_devices", (long long)cl->idle_devices);
        af_jw_close(w, '}');
    }
    af_jw_close(w, ']');
}

static void render_idle(struct af_jw *w, const struct af_costs *c)
{
    af_jw_open(w, "idle", '[');
    for (size_t i = 0; i < c->n_groups; i++) {
        const struct af_cost_group *g = &c->groups[i];

        af_jw_open(w, NULL, '{');
        af_jw_str(w, "node_group", g->group);
        af_jw_str(w, "class", slot_name(g->cls));
        af_jw_int(w, "nodes", g->nodes);
        af_jw_int(w, "devices", (long long)g->devices);
        af_jw_int(w, "idle_devices", (long long)g->idle_devices);
        num(w, "idle_usd_hr", g->idle_usd_hr);
        af_jw_close(w, '}');
    }
    af_jw_close(w, ']');
}

/* Prepaid capacity: the totals, then one row per prepaid node, by reservation. */
static void render_prepaid(struct af_jw *w, const struct af_costs *c, double now)
{
    af_jw_open(w, "prepaid", '{');
    num(w, "rate_usd_hr", c->prepaid_usd_hr);
    num(w, "used_usd_hr", c->prepaid_used_usd_hr);
    num(w, "idle_usd_hr", c->prepaid_idle_usd_hr);
    af_jw_int(w, "devices", (long long)c->prepaid_devices);
    af_jw_int(w, "idle_devices", (long long)c->prepaid_idle_devices);
    af_jw_open(w, "reservations", '[');
    for (size_t i = 0; i < c->n_prepaid; i++) {
        const struct af_cost_prepaid *r = &c->prepaid[i];

        af_jw_open(w, NULL, '{');
        af_jw_str(w, "reservation", r->reservation);
        af_jw_str(w, "type", af_prepaid_name(r->type));
        af_jw_str(w, "node", r->node);
        af_jw_str(w, "class", slot_name(r->cls));
        af_jw_int(w, "devices", (long long)r->devices);
        af_jw_int(w, "used_devices", (long long)(r->devices - r->idle_devices));
        af_jw_int(w, "idle_devices", (long long)r->idle_devices);
        num_or_null(w, "rate_usd_hr", r->rate_known, r->rate_usd_hr);
        num_or_null(w, "used_usd_hr", r->rate_known, r->used_usd_hr);
        num_or_null(w, "idle_usd_hr", r->rate_known, r->idle_usd_hr);
        if (r->end > 0) {
            char at[AF_RFC3339_LEN];
            af_format_rfc3339(r->end, at, sizeof(at));
            af_jw_str(w, "ends_at", at);
            af_jw_int(w, "ends_in_seconds", (long long)floor(r->end - now));
        } else {
            af_jw_null(w, "ends_at");
            af_jw_null(w, "ends_in_seconds");
        }
        af_jw_close(w, '}');
    }
    af_jw_close(w, ']');
    af_jw_close(w, '}');
}

int af_costs_render_json(const struct af_costs *c, const struct af_policy *pol,
                         const struct af_snapshot *snap, struct af_buf *out)
{
    struct af_jw w = AF_JW_INIT(out);

    af_jw_open(&w, NULL, '{');
    af_jw_int(&w, "snapshot_generation", (long long)snap->generation);
    af_jw_str(&w, "resource_version", snap->resource_version[0] ? snap->resource_version : NULL);
    af_jw_str(&w, "policy", pol ? pol->source : NULL);
    af_jw_open(&w, "total", '{');
    num(&w, "price_usd_hr", c->price_usd_hr);
    num(&w, "spend_usd_hr", c->spend_usd_hr);
    num(&w, "idle_usd_hr", c->idle_usd_hr);
    af_jw_int(&w, "pods", c->pods_counted);
    af_jw_int(&w, "pods_on_unpriced_nodes", c->pods_unpriced);
    af_jw_int(&w, "unpriced_nodes", c->unpriced_nodes);
    af_jw_close(&w, '}');
    render_tenants(&w, c, pol);
    render_namespaces(&w, c, pol);
    render_classes(&w, c);
    render_idle(&w, c);
    render_prepaid(&w, c, af_wall_time());
    af_jw_close(&w, '}');
    return af_jw_end(&w);
}

int af_service_costs(struct af_service *svc, struct af_buf *out)
{
    size_t base = out->len;
    struct af_snapshot *snap = af_publisher_acquire(svc->pub);
    struct af_config *cfg = af_config_holder_get(svc->config);
    struct af_costs *c;
    int status = 200;

    if (!snap) {
        status = 503;
        if (af_buf_puts(out, "{\"error\":\"no cluster snapshot yet: the cache has not "
                             "listed nodes and pods\"}\n") != 0)
            status = 500;
        goto done;
    }
    c = af_costs_memo_get(svc->costs, cfg, snap);
    if (af_costs_render_json(c, cfg->policy, snap, out) != 0) {
        out->len = base;
        if (out->buf)
            out->buf[base] = '\0';
        if (af_buf_puts(out, "{\"error\":\"cost report too large\"}\n") != 0)
            out->len = base;
        status = 500;
    }
    af_costs_unref(c);
done:
    af_snapshot_unref(snap);
    af_config_unref(cfg);
    return status;
}

/* ---- metrics ------------------------------------------------------------------------------------------ */

/* accelfit_tenant_budget_hard: 1 for a hard budget, 0 for a soft one (tenants with one), so
 * an alert can tell a tenant whose premium pods are refused from one that only ranks lower. */
static int render_budget_modes(const struct af_policy *pol, struct af_buf *o)
{
    int rc = af_metrics_header(o, "accelfit_tenant_budget_hard", "gauge",
                               "1 when the tenant's budget is hard (premium nodes refused "
                               "over it), 0 when soft (tenants with a budget).");

    for (size_t i = 0; i < pol->n_tenants && !rc; i++) {
        if (!pol->tenants[i].has_budget)
            continue;
        rc = af_buf_puts(o, "accelfit_tenant_budget_hard{tenant=\"");
        if (!rc)
            rc = af_metrics_label(o, pol->tenants[i].name);
        if (!rc)
            rc = af_buf_printf(o, "\"} %d\n", pol->tenants[i].over_budget == AF_OVER_BUDGET_HARD);
    }
    return rc;
}

int af_budget_render_metrics(struct af_service *svc, struct af_config *cfg, struct af_buf *o)
{
    struct af_snapshot *snap = svc ? af_publisher_acquire(svc->pub) : NULL;
    const struct af_policy *pol = cfg ? cfg->policy : NULL;
    struct af_costs *c;
    double other[AF_COSTS_CLASSES];
    int rc = 0;

    if (!snap || !pol)
        goto done;
    c = af_costs_memo_get(svc->costs, cfg, snap);
    rc = af_metrics_header(o, "accelfit_tenant_spend_dollars_per_hour", "gauge",
                           "What each tenant's running pods cost: their share of their nodes' "
                           "hourly prices.");
    for (size_t i = 0; i < c->n_tenants && i < pol->n_tenants && !rc; i++) {
        rc = af_buf_puts(o, "accelfit_tenant_spend_dollars_per_hour{tenant=\"");
        if (!rc)
            rc = af_metrics_label(o, pol->tenants[i].name);
        if (!rc)
            rc = af_buf_puts(o, "\"} ");
        if (!rc)
            rc = usd_text(o, c->tenants[i].spend_usd_hr);
        if (!rc)
            rc = af_buf_puts(o, "\n");
    }
    if (!rc)
        rc = af_metrics_header(o, "accelfit_tenant_budget_dollars_per_hour", "gauge",
                               "Each tenant's budget from the policy (tenants with one).");
    for (size_t i = 0; i < pol->n_tenants && !rc; i++) {
        if (!pol->tenants[i].has_budget)
            continue;
        rc = af_buf_puts(o, "accelfit_tenant_budget_dollars_per_hour{tenant=\"");
        if (!rc)
            rc = af_metrics_label(o, pol->tenants[i].name);
        if (!rc)
            rc = af_buf_puts(o, "\"} ");
        if (!rc)
            rc = usd_text(o, pol->tenants[i].budget_usd_hr);
        if (!rc)
            rc = af_buf_puts(o, "\n");
    }
    if (!rc)
        rc = render_budget_modes(pol, o);
    if (!rc)
        rc = af_metrics_header(o, "accelfit_idle_cost_dollars_per_hour", "gauge",
                               "Allocatable accelerators no pod requested, at their share of "
                               "the node price, by class and node group.");
    memset(other, 0, sizeof(other));
    for (size_t i = 0; i < c->n_groups && !rc; i++) {
        const struct af_cost_group *g = &c->groups[i];
        if (i + AF_CLASS__COUNT + 1 >= AF_BUDGET_MAX_GROUP_SERIES) {
            other[g->cls] += g->idle_usd_hr;   /* past the bound: summed per class */
            continue;
        }
        rc = af_buf_printf(o, "accelfit_idle_cost_dollars_per_hour{class=\"%s\",node_group=\"",
                           slot_name(g->cls));
        if (!rc)
            rc = af_metrics_label(o, g->group ? g->group : "");
        if (!rc)
            rc = af_buf_puts(o, "\"} ");
        if (!rc)
            rc = usd_text(o, g->idle_usd_hr);
        if (!rc)
            rc = af_buf_puts(o, "\n");
    }
    for (int s = 0; s < AF_COSTS_CLASSES && !rc; s++)
        if (other[s] > 0) {
            rc = af_buf_printf(o,
                               "accelfit_idle_cost_dollars_per_hour{class=\"%s\","
                               "node_group=\"" AF_BUDGET_OTHER_GROUPS "\"} ",
                               slot_name(s));
            if (!rc)
                rc = usd_text(o, other[s]);
            if (!rc)
                rc = af_buf_puts(o, "\n");
        }
    af_costs_unref(c);
done:
    af_snapshot_unref(snap);
    return rc;
}
