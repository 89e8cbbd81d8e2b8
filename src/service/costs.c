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
static int num(struct af_buf *o, double v)
{
    double r = round(v * 10000.0) / 10000.0;

    return af_buf_json_num(o, r, 10);
}

static int key(struct af_buf *o, bool *first, const char *k)
{
    int rc = af_buf_puts(o, *first ? "" : ",");

    *first = false;
    if (!rc)
        rc = af_buf_json_str(o, k);
    if (!rc)
        rc = af_buf_puts(o, ":");
    return rc;
}

static int kstr(struct af_buf *o, bool *first, const char *k, const char *v)
{
    int rc = key(o, first, k);

    if (!rc)
        rc = v ? af_buf_json_str(o, v) : af_buf_puts(o, "null");
    return rc;
}

static int knum(struct af_buf *o, bool *first, const char *k, double v)
{
    int rc = key(o, first, k);

    return rc ? rc : num(o, v);
}

static int kint(struct af_buf *o, bool *first, const char *k, long long v)
{
    int rc = key(o, first, k);

    return rc ? rc : af_buf_printf(o, "%lld", v);
}

static int kraw(struct af_buf *o, bool *first, const char *k, const char *raw)
{
    int rc = key(o, first, k);

    return rc ? rc : af_buf_puts(o, raw);
}

static int class_array(struct af_buf *o, bool *first, const char *k, uint32_t mask)
{
    int rc = key(o, first, k);
    bool one = true;

    if (!rc)
        rc = af_buf_puts(o, "[");
    for (int c = 0; c < AF_CLASS__COUNT && !rc; c++)
        if (mask & (1u << c)) {
            rc = af_buf_puts(o, one ? "" : ",");
            if (!rc)
                rc = af_buf_json_str(o, af_class_name((enum af_class)c));
            one = false;
        }
    return rc ? rc : af_buf_puts(o, "]");
}

static const char *slot_name(int slot)
{
    return slot >= AF_CLASS__COUNT ? "unknown" : af_class_name((enum af_class)slot);
}

int af_budget_explain_json(const struct af_tenant_decision *td, struct af_buf *out)
{
    const struct af_tenant *t = td->t;
    bool f = true;
    int rc;

    if (!t)
        return af_buf_puts(out, "null");
    rc = af_buf_puts(out, "{");
    if (!rc)
        rc = kstr(out, &f, "name", t->name);
    if (!rc)
        rc = kstr(out, &f, "matched_by", af_tenant_match_name(td->how));
    if (!rc && t->has_budget)
        rc = knum(out, &f, "budget_usd_hr", t->budget_usd_hr);
    else if (!rc)
        rc = kraw(out, &f, "budget_usd_hr", "null");
    if (!rc)
        rc = kstr(out, &f, "over_budget",
                  t->has_budget ? af_over_budget_name(t->over_budget) : NULL);
    if (!rc && td->spend_known)
        rc = knum(out, &f, "spend_usd_hr", td->spend_usd_hr);
    else if (!rc)
        rc = kraw(out, &f, "spend_usd_hr", "null");
    if (!rc)
        rc = class_array(out, &f, "premium_classes", t->premium);
    if (!rc && t->classes)
        rc = class_array(out, &f, "classes", t->classes);
    else if (!rc)
        rc = kraw(out, &f, "classes", "null");
    if (!rc)
        rc = kstr(out, &f, "capacity", t->spot_only ? "spot" : "any");
    if (!rc)
        rc = kstr(out, &f, "effect", td->effect);
    return rc ? rc : af_buf_puts(out, "}");
}

static int render_tenants(const struct af_costs *c, const struct af_policy *pol, struct af_buf *o)
{
    int rc = af_buf_puts(o, "[");

    for (size_t i = 0; i < c->n_tenants && pol && i < pol->n_tenants && !rc; i++) {
        const struct af_tenant *t = &pol->tenants[i];
        const struct af_cost_tenant *ct = &c->tenants[i];
        bool f = true, fc = true;

        rc = af_buf_puts(o, i ? ",{" : "{");
        if (!rc)
            rc = kstr(o, &f, "name", t->name);
        if (!rc && t->has_budget)
            rc = knum(o, &f, "budget_usd_hr", t->budget_usd_hr);
        else if (!rc)
            rc = kraw(o, &f, "budget_usd_hr", "null");
        if (!rc)
            rc = kstr(o, &f, "over_budget",
                      t->has_budget ? af_over_budget_name(t->over_budget) : NULL);
        if (!rc)
            rc = knum(o, &f, "spend_usd_hr", ct->spend_usd_hr);
        if (!rc && t->has_budget)
            rc = knum(o, &f, "remaining_usd_hr", t->budget_usd_hr - ct->spend_usd_hr);
        else if (!rc)
            rc = kraw(o, &f, "remaining_usd_hr", "null");
        if (!rc)
            rc = kraw(o, &f, "over",
                      t->has_budget && ct->spend_usd_hr > t->budget_usd_hr ? "true" : "false");
        if (!rc)
            rc = kint(o, &f, "pods", ct->pods);
        if (!rc)
            rc = knum(o, &f, "prepaid_usd_hr", ct->prepaid_usd_hr);
        if (!rc)
            rc = kint(o, &f, "prepaid_pods", ct->prepaid_pods);
        if (!rc)
            rc = key(o, &f, "by_class");
        if (!rc)
            rc = af_buf_puts(o, "{");
        for (int s = 0; s < AF_COSTS_CLASSES && !rc; s++)
            if (ct->by_class[s] > 0)
                rc = knum(o, &fc, slot_name(s), ct->by_class[s]);
        if (!rc)
            rc = af_buf_puts(o, "}}");
    }
    return rc ? rc : af_buf_puts(o, "]");
}

static int render_namespaces(const struct af_costs *c, const struct af_policy *pol,
                             struct af_buf *o)
{
    int rc = af_buf_puts(o, "[");

    for (size_t i = 0; i < c->n_ns && !rc; i++) {
        const struct af_cost_ns *e = &c->ns[i];
        bool f = true;
        rc = af_buf_puts(o, i ? ",{" : "{");
        if (!rc)
            rc = kstr(o, &f, "name", e->ns);
        if (!rc)
            rc = kstr(o, &f, "tenant",
                      pol && e->owned && e->tenant >= 0 && (size_t)e->tenant < pol->n_tenants
                          ? pol->tenants[e->tenant].name
                          : NULL);
        if (!rc)
            rc = knum(o, &f, "spend_usd_hr", e->spend_usd_hr);
        if (!rc)
            rc = kint(o, &f, "pods", e->pods);
        if (!rc)
            rc = af_buf_puts(o, "}");
    }
    return rc ? rc : af_buf_puts(o, "]");
}

static int render_classes(const struct af_costs *c, struct af_buf *o)
{
    int rc = af_buf_puts(o, "[");
    bool one = true;

    for (int s = 0; s < AF_COSTS_CLASSES && !rc; s++) {
        const struct af_cost_class *cl = &c->classes[s];
        bool f = true;
        if (!cl->nodes)
            continue;
        rc = af_buf_puts(o, one ? "{" : ",{");
        one = false;
        if (!rc)
            rc = kstr(o, &f, "class", slot_name(s));
        if (!rc)
            rc = kint(o, &f, "nodes", cl->nodes);
        if (!rc)
            rc = knum(o, &f, "price_usd_hr", cl->price_usd_hr);
        if (!rc)
            rc = knum(o, &f, "spend_usd_hr", cl->spend_usd_hr);
        if (!rc)
            rc = knum(o, &f, "idle_usd_hr", cl->idle_usd_hr);
        if (!rc)
            rc = kint(o, &f, "devices", (long long)cl->devices);
        if (!rc)
            rc = kint(o, &f, "idle_devices", (long long)cl->idle_devices);
        if (!rc)
            rc = af_buf_puts(o, "}");
    }
    return rc ? rc : af_buf_puts(o, "]");
}

static int render_idle(const struct af_costs *c, struct af_buf *o)
{
    int rc = af_buf_puts(o, "[");

    for (size_t i = 0; i < c->n_groups && !rc; i++) {
        const struct af_cost_group *g = &c->groups[i];
        bool f = true;
        rc = af_buf_puts(o, i ? ",{" : "{");
        if (!rc)
            rc = kstr(o, &f, "node_group", g->group);
        if (!rc)
            rc = kstr(o, &f, "class", slot_name(g->cls));
        if (!rc)
            rc = kint(o, &f, "nodes", g->nodes);
        if (!rc)
            rc = kint(o, &f, "devices", (long long)g->devices);
        if (!rc)
            rc = kint(o, &f, "idle_devices", (long long)g->idle_devices);
        if (!rc)
            rc = knum(o, &f, "idle_usd_hr", g->idle_usd_hr);
        if (!rc)
            rc = af_buf_puts(o, "}");
    }
    return rc ? rc : af_buf_puts(o, "]");
}

/* Prepaid capacity: the totals, then one row per prepaid node, by reservation. */
static int render_prepaid(const struct af_costs *c, double now, struct af_buf *o)
{
    bool f = true;
    int rc = af_buf_puts(o, "{");

    if (!rc)
        rc = knum(o, &f, "rate_usd_hr", c->prepaid_usd_hr);
    if (!rc)
        rc = knum(o, &f, "used_usd_hr", c->prepaid_used_usd_hr);
    if (!rc)
        rc = knum(o, &f, "idle_usd_hr", c->prepaid_idle_usd_hr);
    if (!rc)
        rc = kint(o, &f, "devices", (long long)c->prepaid_devices);
    if (!rc)
        rc = kint(o, &f, "idle_devices", (long long)c->prepaid_idle_devices);
    if (!rc)
        rc = key(o, &f, "reservations");
    if (!rc)
        rc = af_buf_puts(o, "[");
    for (size_t i = 0; i < c->n_prepaid && !rc; i++) {
        const struct af_cost_prepaid *r = &c->prepaid[i];
        bool g = true;
        rc = af_buf_puts(o, i ? ",{" : "{");
        if (!rc)
            rc = kstr(o, &g, "reservation", r->reservation);
        if (!rc)
            rc = kstr(o, &g, "type", af_prepaid_name(r->type));
        if (!rc)
            rc = kstr(o, &g, "node", r->node);
        if (!rc)
            rc = kstr(o, &g, "class", slot_name(r->cls));
        if (!rc)
            rc = kint(o, &g, "devices", (long long)r->devices);
        if (!rc)
            rc = kint(o, &g, "used_devices", (long long)(r->devices - r->idle_devices));
        if (!rc)
            rc = kint(o, &g, "idle_devices", (long long)r->idle_devices);
        if (!rc && r->rate_known)
            rc = knum(o, &g, "rate_usd_hr", r->rate_usd_hr);
        else if (!rc)
            rc = kraw(o, &g, "rate_usd_hr", "null");
        if (!rc && r->rate_known)
            rc = knum(o, &g, "used_usd_hr", r->used_usd_hr);
        else if (!rc)
            rc = kraw(o, &g, "used_usd_hr", "null");
        if (!rc && r->rate_known)
            rc = knum(o, &g, "idle_usd_hr", r->idle_usd_hr);
        else if (!rc)
            rc = kraw(o, &g, "idle_usd_hr", "null");
        if (!rc && r->end > 0) {
            char at[AF_RFC3339_LEN];
            af_format_rfc3339(r->end, at, sizeof(at));
            rc = kstr(o, &g, "ends_at", at);
            if (!rc)
                rc = kint(o, &g, "ends_in_seconds", (long long)floor(r->end - now));
        } else if (!rc) {
            rc = kraw(o, &g, "ends_at", "null");
            if (!rc)
                rc = kraw(o, &g, "ends_in_seconds", "null");
        }
        if (!rc)
            rc = af_buf_puts(o, "}");
    }
    if (!rc)
        rc = af_buf_puts(o, "]");
    return rc ? rc : af_buf_puts(o, "}");
}

int af_costs_render_json(const struct af_costs *c, const struct af_policy *pol,
                         const struct af_snapshot *snap, struct af_buf *out)
{
    bool f = true, ft = true;
    int rc = af_buf_puts(out, "{");

    if (!rc)
        rc = kint(out, &f, "snapshot_generation", (long long)snap->generation);
    if (!rc)
        rc = kstr(out, &f, "resource_version",
                  snap->resource_version[0] ? snap->resource_version : NULL);
    if (!rc)
        rc = kstr(out, &f, "policy", pol ? pol->source : NULL);
    if (!rc)
        rc = key(out, &f, "total");
    if (!rc)
        rc = af_buf_puts(out, "{");
    if (!rc)
        rc = knum(out, &ft, "price_usd_hr", c->price_usd_hr);
    if (!rc)
        rc = knum(out, &ft, "spend_usd_hr", c->spend_usd_hr);
    if (!rc)
        rc = knum(out, &ft, "idle_usd_hr", c->idle_usd_hr);
    if (!rc)
        rc = kint(out, &ft, "pods", c->pods_counted);
    if (!rc)
        rc = kint(out, &ft, "pods_on_unpriced_nodes", c->pods_unpriced);
    if (!rc)
        rc = kint(out, &ft, "unpriced_nodes", c->unpriced_nodes);
    if (!rc)
        rc = af_buf_puts(out, "}");
    if (!rc)
        rc = key(out, &f, "tenants");
    if (!rc)
        rc = render_tenants(c, pol, out);
    if (!rc)
        rc = key(out, &f, "namespaces");
    if (!rc)
        rc = render_namespaces(c, pol, out);
    if (!rc)
        rc = key(out, &f, "classes");
    if (!rc)
        rc = render_classes(c, out);
    if (!rc)
        rc = key(out, &f, "idle");
    if (!rc)
        rc = render_idle(c, out);
    if (!rc)
        rc = key(out, &f, "prepaid");
    if (!rc)
        rc = render_prepaid(c, af_wall_time(), out);
    return rc ? rc : af_buf_puts(out, "}\n");
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
            rc = num(o, c->tenants[i].spend_usd_hr);
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
            rc = num(o, pol->tenants[i].budget_usd_hr);
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
            rc = num(o, g->idle_usd_hr);
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
                rc = num(o, other[s]);
            if (!rc)
                rc = af_buf_puts(o, "\n");
        }
    af_costs_unref(c);
done:
    af_snapshot_unref(snap);
    return rc;
}
