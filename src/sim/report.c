/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulator's comparison for people (a table) and for scripts (one JSON
 * object). Both print the same rounded numbers: dollars to the cent, hours to a
 * tenth; the HTML report (html.c) reuses af__sim_money for its own table.
 */
#include "accelfit/simulate.h"

#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "sim/internal.h"
#include "accelfit/banned.h"

void af__sim_money(double usd, char *out, size_t n)
{
    /* From the decimal text, not an integer of cents: any finite amount prints whole. */
    char digits[400], *p = digits;
    size_t len, lead, o = 0;

    if (!isfinite(usd)) {
        snprintf(out, n, "unknown");
        return;
    }
    snprintf(digits, sizeof(digits), "%.2f", fabs(usd));
    len = strcspn(digits, ".");
    lead = len % 3 ? len % 3 : 3;
    if (usd < 0 && strspn(digits, "0.") != strlen(digits) && o + 1 < n)
        out[o++] = '-';
    if (o + 1 < n)
        out[o++] = '$';
    for (size_t i = 0; i < len && o + 1 < n; i++) {
        if (i && (i - lead) % 3 == 0 && i >= lead && o + 1 < n)
            out[o++] = ',';
        out[o++] = *p++;
    }
    snprintf(out + o, n > o ? n - o : 0, "%s", digits + len);
}

void af__sim_scan_text(const struct af_sim_result *r, char *out, size_t n)
{
    if (r->percentage > 0)
        snprintf(out, n, "percentageOfNodesToScore %d: kube-scheduler looks for %d feasible of %zu nodes",
                 r->percentage, r->feasible_to_find, r->n_nodes);
    else
        snprintf(out, n,
                 "percentageOfNodesToScore adaptive: kube-scheduler looks for %d feasible of %zu nodes",
                 r->feasible_to_find, r->n_nodes);
}

/* The rows both the table and the HTML page show: label, then one cell per side. */
void af__sim_rows(const struct af_sim_result *r, af__sim_row_cb cb, void *ud)
{
    char cell[AF_SIM__SIDES][64];
    const struct af_sim_side_stats *s = r->side;
    double nh[2] = {0, 0};

    for (int c = 0; c < AF_SIM_CLASSES; c++) {
        nh[0] += s[0].node_hours_by_class[c];
        nh[1] += s[1].node_hours_by_class[c];
    }

#define ROW(label, indent, fmt_a, fmt_k, fmt_b) \
    do {                                        \
        fmt_a;                                  \
        fmt_k;                                  \
        fmt_b;                                  \
        cb(ud, label, indent, cell);            \
    } while (0)
#define MONEY(side, v) af__sim_money((v), cell[side], sizeof(cell[side]))
#define TEXT(side, ...) snprintf(cell[side], sizeof(cell[side]), __VA_ARGS__)

    ROW("cost over the trace", false, MONEY(0, s[0].cost_usd), MONEY(1, s[1].cost_usd),
        MONEY(2, s[2].cost_usd));
    for (int c = 0; c < AF_SIM_CLASSES; c++) {
        if (s[0].cost_usd == 0 && s[1].cost_usd == 0 && s[2].cost_usd == 0)
            break;
        if (fabs(s[0].cost_by_class[c]) < 0.005 && fabs(s[1].cost_by_class[c]) < 0.005 &&
            fabs(s[2].cost_by_class[c]) < 0.005)
            continue;
        ROW(af_sim_class_name(c), true, MONEY(0, s[0].cost_by_class[c]),
            MONEY(1, s[1].cost_by_class[c]), MONEY(2, s[2].cost_by_class[c]));
    }
    ROW("node-hours paid", false, TEXT(0, "%.1f", nh[0]), TEXT(1, "%.1f", nh[1]), TEXT(2, "-"));
    ROW("idle accelerator cost", false, MONEY(0, s[0].idle_accel_usd),
        MONEY(1, s[1].idle_accel_usd), TEXT(2, "-"));
    if (r->has_prepaid)
        ROW("prepaid capacity idle", false, MONEY(0, s[0].prepaid_idle_usd),
            MONEY(1, s[1].prepaid_idle_usd), TEXT(2, "-"));
    ROW("pods placed", false, TEXT(0, "%d of %zu", s[0].placed, r->n_pods),
        TEXT(1, "%d of %zu", s[1].placed, r->n_pods), TEXT(2, "%d", s[2].placed));
    ROW("on their first-tier class", true, TEXT(0, "%d", s[0].first_tier),
        TEXT(1, "%d", s[1].first_tier), TEXT(2, "-"));
    ROW("on a fallback tier", true, TEXT(0, "%d", s[0].fallbacks), TEXT(1, "%d", s[1].fallbacks),
        TEXT(2, "-"));
    ROW("on a class accelfit refuses", true, TEXT(0, "%d", s[0].outside), TEXT(1, "%d", s[1].outside),
        TEXT(2, "-"));
    ROW("where the model does not fit", true, TEXT(0, "%d", s[0].misfit),
        TEXT(1, "%d", s[1].misfit), TEXT(2, "-"));
    if (r->autoscale) {
        for (int c = 0; c < AF_SIM_CLASSES; c++)
            if (s[0].placed_by_class[c] || s[1].placed_by_class[c] || s[2].placed_by_class[c])
                ROW(af_sim_class_name(c), true, TEXT(0, "%d", s[0].placed_by_class[c]),
                    TEXT(1, "%d", s[1].placed_by_class[c]), TEXT(2, "%d", s[2].placed_by_class[c]));
        ROW("nodes launched", false, TEXT(0, "%d", s[0].launched), TEXT(1, "%d", s[1].launched),
            TEXT(2, "-"));
        for (int c = 0; c < AF_SIM_CLASSES; c++)
            if (s[0].launched_by_class[c] || s[1].launched_by_class[c])
                ROW(af_sim_class_name(c), true, TEXT(0, "%d", s[0].launched_by_class[c]),
                    TEXT(1, "%d", s[1].launched_by_class[c]), TEXT(2, "-"));
        ROW("for a preference", true, TEXT(0, "%d", s[0].launched_preferred),
            TEXT(1, "%d", s[1].launched_preferred), TEXT(2, "-"));
        ROW("removed empty", true, TEXT(0, "%d", s[0].consolidated),
            TEXT(1, "%d", s[1].consolidated), TEXT(2, "-"));
    }
    ROW("pods that waited", false, TEXT(0, "%d", s[0].waited), TEXT(1, "%d", s[1].waited),
        TEXT(2, "-"));
    ROW("still waiting at the end", true, TEXT(0, "%d", s[0].unplaced),
        TEXT(1, "%d", s[1].unplaced), TEXT(2, "-"));
    ROW("pod-hours waited", true, TEXT(0, "%.1f", s[0].wait_hours),
        TEXT(1, "%.1f", s[1].wait_hours), TEXT(2, "-"));
    ROW("pod-hours run", false, TEXT(0, "%.1f", s[0].pod_hours), TEXT(1, "%.1f", s[1].pod_hours),
        TEXT(2, "%.1f", s[2].pod_hours));
    ROW("nodes examined per pod", false, TEXT(0, "%.1f", s[0].nodes_examined_avg),
        TEXT(1, "%.1f", s[1].nodes_examined_avg), TEXT(2, "-"));
    if (s[0].scan_cut || s[1].scan_cut)
        ROW("cheaper node not examined", true, TEXT(0, "%d", s[0].cheapest_missed), TEXT(1, "-"),
            TEXT(2, "-"));
#undef ROW
#undef MONEY
#undef TEXT
}

const char *af__sim_tenants_title(const struct af_sim_result *r)
{
    return r->tenants_from_policy ? "tenants (the policy's)" : "tenants (the trace's)";
}

void af__sim_tenant_label(const struct af_sim_tenant *t, char *out, size_t n)
{
    char budget[48];

    if (t->budget_usd_hr < 0) {
        snprintf(out, n, "%s: no budget", t->name);
        return;
    }
    af__sim_money(t->budget_usd_hr, budget, sizeof(budget));
    snprintf(out, n, "%s: budget %s/h, %s", t->name, budget, t->hard ? "hard" : "soft");
}

double af__sim_tenant_average(const struct af_sim_result *r, const struct af_sim_tenant *t,
                              int side)
{
    return r->horizon > 0 ? t->spend_usd[side] / (r->horizon / 3600.0) : 0;
}

/* "$26.77/h" */
static void rate_cell(double usd_hr, char *out, size_t n)
{
    char money[48];

    af__sim_money(usd_hr, money, sizeof(money));
    snprintf(out, n, "%s/h", money);
}

void af__sim_tenant_rows(const struct af_sim_result *r, size_t i, af__sim_row_cb cb, void *ud)
{
    const struct af_sim_tenant *t = &r->tenants[i];
    char cell[AF_SIM__SIDES][64];

    for (int s = 0; s < AF_SIM__SIDES; s++)
        af__sim_money(t->spend_usd[s], cell[s], sizeof(cell[s]));
    cb(ud, "spend over the trace", true, cell);
    for (int s = 0; s < AF_SIM__SIDES; s++)
        rate_cell(af__sim_tenant_average(r, t, s), cell[s], sizeof(cell[s]));
    cb(ud, "average spend", true, cell);
    for (int s = 0; s < 2; s++)
        rate_cell(t->peak_usd_hr[s], cell[s], sizeof(cell[s]));
    snprintf(cell[AF_SIM_BOUND], sizeof(cell[AF_SIM_BOUND]), "-");
    cb(ud, "peak spend", true, cell);
    if (t->budget_usd_hr < 0)
        return;
    for (int s = 0; s < 2; s++)
        snprintf(cell[s], sizeof(cell[s]), "%.1f", t->over_hours[s]);
    cb(ud, "hours over budget", true, cell);
}

void af__sim_summary(const struct af_sim_result *r, char *out, size_t n)
{
    double a = r->side[AF_SIM_ACCELFIT].cost_usd, k = r->side[AF_SIM_KUBE].cost_usd;
    double b = r->side[AF_SIM_BOUND].cost_usd;
    const struct af_sim_side_stats *sa = &r->side[AF_SIM_ACCELFIT], *sk = &r->side[AF_SIM_KUBE];
    char diff[48], above[48], work[200] = "";

    af__sim_money(fabs(k - a), diff, sizeof(diff));
    af__sim_money(a - b, above, sizeof(above));
    /* The same work on both sides, or the difference in dollars is not the whole story. */
    if (sa->misfit != sk->misfit)
        snprintf(work, sizeof(work), ", but not for the same work: %s placed %d pod%s where the "
                 "model does not fit",
                 sk->misfit > sa->misfit ? "kube-scheduler" : "accelfit",
                 abs(sk->misfit - sa->misfit), abs(sk->misfit - sa->misfit) == 1 ? "" : "s");
    else if (sa->placed != sk->placed)
        snprintf(work, sizeof(work), ", but not for the same work: accelfit placed %d pods, "
                 "kube-scheduler %d", sa->placed, sk->placed);
    if (k > 0 && a <= k)
        snprintf(out, n, "accelfit costs %s less than kube-scheduler alone (%.1f%%)%s; %s above the lower bound",
                 diff, 100.0 * (k - a) / k, work, above);
    else if (k > 0)
        snprintf(out, n, "accelfit costs %s more than kube-scheduler alone (%.1f%%)%s; %s above the lower bound",
                 diff, 100.0 * (a - k) / k, work, above);
    else
        snprintf(out, n, "neither scheduler paid for a node");
}

/* ---- text -------------------------------------------------------------------------------- */

struct text_ctx {
    struct af_buf *out;
    int err;
};

static void text_row(void *ud, const char *label, bool indent, char cell[][64])
{
    struct text_ctx *t = ud;
    char name[64];

    snprintf(name, sizeof(name), "%s%s", indent ? "  " : "", label);
    if (af_buf_printf(t->out, "%-28s %16s %16s %14s\n", name, cell[0], cell[1], cell[2]))
        t->err = AF_ETOOBIG;
}

void af__sim_rollout_share(const struct af_sim_rollout_stats *ro, int side, char *out, size_t n)
{
    int t = ro->target_pods[side], s = ro->source_pods[side];
    if (t + s)
        snprintf(out, n, "%d of %d on target (%.0f%%)", t, t + s, 100.0 * t / (t + s));
    else
        snprintf(out, n, "none on the target or source classes (its pods went to other "
                         "classes, or were not placed)");
}

void af__sim_autoscale_text(const struct af_sim_result *r, char *out, size_t n)
{
    snprintf(out, n,
             "autoscaling: a pod that fits no node launches one (no launch latency); launched "
             "nodes removed after %.0fs empty",
             r->consolidate_after);
}

int af_sim_render_text(const struct af_sim_result *r, struct af_buf *out)
{
    struct text_ctx t = {out, 0};
    char line[400];
    int err = 0;

    af__sim_scan_text(r, line, sizeof(line));
    err |= af_buf_printf(out, "%zu nodes, %zu pods in the trace, %zu already running; %.1f hours\n",
                         r->n_nodes, r->n_pods, r->n_bound, r->horizon / 3600.0);
    err |= af_buf_printf(out, "%s\n", line);
    if (r->autoscale) {
        af__sim_autoscale_text(r, line, sizeof(line));
        err |= af_buf_printf(out, "%s\n", line);
    }
    err |= af_buf_puts(out, "\n");
    err |= af_buf_printf(out, "%-28s %16s %16s %14s\n", "", "accelfit", "kube-scheduler",
                         "lower bound");
    af__sim_rows(r, text_row, &t);
    af__sim_summary(r, line, sizeof(line));
    err |= af_buf_printf(out, "\n%s\n", line);
    if (r->n_tenants) {
        err |= af_buf_printf(out, "\n%-28s %16s %16s %14s\n", af__sim_tenants_title(r),
                             "accelfit", "kube-scheduler", "lower bound");
        for (size_t i = 0; i < r->n_tenants; i++) {
            af__sim_tenant_label(&r->tenants[i], line, sizeof(line));
            err |= af_buf_printf(out, "%s\n", line);
            af__sim_tenant_rows(r, i, text_row, &t);
        }
    }
    for (size_t k = 0; k < r->n_rollouts; k++) {
        const struct af_sim_rollout_stats *ro = &r->rollouts[k];
        char targets[200], a[160], ks[160];
        af_class_mask_names(ro->target, targets, sizeof(targets));
        af__sim_rollout_share(ro, AF_SIM_ACCELFIT, a, sizeof(a));
        af__sim_rollout_share(ro, AF_SIM_KUBE, ks, sizeof(ks));
        err |= af_buf_printf(out,
                             "\nrollout %s (target %s, share %.0f%%)\n  accelfit: %s\n  "
                             "kube-scheduler: %s\n",
                             ro->name, targets, 100.0 * ro->share, a, ks);
    }
    return err || t.err ? AF_ETOOBIG : 0;
}

/* ---- JSON -------------------------------------------------------------------------------- */

static void json_money(struct af_jw *w, const char *key, double usd)
{
    af_jw_fixed(w, key, usd, 2);
}

/* The classes with a count, as an object {"class": n}. */
static void json_counts(struct af_jw *w, const char *key, const int *by_class)
{
    af_jw_open(w, key, '{');
    for (int c = 0; c < AF_SIM_CLASSES; c++)
        if (by_class[c])
            af_jw_int(w, af_sim_class_name(c), by_class[c]);
    af_jw_close(w, '}');
}

static void json_side(struct af_jw *w, const char *key, const struct af_sim_side_stats *s,
                      bool bound, bool autoscale)
{
    af_jw_open(w, key, '{');
    json_money(w, "cost_usd", s->cost_usd);
    af_jw_open(w, "cost_by_class", '{');
    for (int c = 0; c < AF_SIM_CLASSES; c++)
        if (fabs(s->cost_by_class[c]) >= 0.005)
            json_money(w, af_sim_class_name(c), s->cost_by_class[c]);
    af_jw_close(w, '}');
    json_counts(w, "placed_by_class", s->placed_by_class);
    af_jw_int(w, "placed", s->placed);
    af_jw_fixed(w, "pod_hours", s->pod_hours, 1);
    if (!bound) {
        double nh = 0;
        for (int c = 0; c < AF_SIM_CLASSES; c++)
            nh += s->node_hours_by_class[c];
        af_jw_fixed(w, "node_hours", nh, 1);
        json_money(w, "idle_accelerator_usd", s->idle_accel_usd);
        json_money(w, "prepaid_idle_usd", s->prepaid_idle_usd);
        af_jw_int(w, "first_tier", s->first_tier);
        af_jw_int(w, "fallbacks", s->fallbacks);
        af_jw_int(w, "outside_tiers", s->outside);
        af_jw_int(w, "model_misfits", s->misfit);
        af_jw_int(w, "waited", s->waited);
        af_jw_int(w, "unplaced", s->unplaced);
        af_jw_fixed(w, "wait_pod_hours", s->wait_hours, 1);
        af_jw_fixed(w, "nodes_examined_per_pod", s->nodes_examined_avg, 1);
        af_jw_fixed(w, "feasible_per_pod", s->feasible_avg, 1);
        af_jw_int(w, "scan_cut", s->scan_cut);
        af_jw_int(w, "cheapest_missed", s->cheapest_missed);
        if (autoscale) {
            af_jw_int(w, "launched", s->launched);
            json_counts(w, "launched_by_class", s->launched_by_class);
            af_jw_int(w, "launched_for_a_preference", s->launched_preferred);
            af_jw_int(w, "consolidated", s->consolidated);
        }
    }
    af_jw_close(w, '}');
}

static void json_tenant(struct af_jw *w, const struct af_sim_result *r,
                        const struct af_sim_tenant *t, const char *const *keys)
{
    af_jw_open(w, NULL, '{');
    af_jw_str(w, "name", t->name);
    json_money(w, "accelfit_usd", t->spend_usd[0]);
    json_money(w, "kube_scheduler_usd", t->spend_usd[1]);
    json_money(w, "lower_bound_usd", t->spend_usd[2]);
    if (t->budget_usd_hr < 0) {
        af_jw_null(w, "budget_usd_per_hour");
        af_jw_null(w, "over_budget");
    } else {
        json_money(w, "budget_usd_per_hour", t->budget_usd_hr);
        af_jw_str(w, "over_budget", t->hard ? "hard" : "soft");
    }
    af_jw_open(w, "average_usd_per_hour", '{');
    for (int s = 0; s < AF_SIM__SIDES; s++)
        json_money(w, keys[s], af__sim_tenant_average(r, t, s));
    af_jw_close(w, '}');
    af_jw_open(w, "peak_usd_per_hour", '{');
    for (int s = 0; s < 2; s++)
        json_money(w, keys[s], t->peak_usd_hr[s]);
    af_jw_close(w, '}');
    if (t->budget_usd_hr < 0) {
        af_jw_null(w, "hours_over_budget");
    } else {
        af_jw_open(w, "hours_over_budget", '{');
        af_jw_fixed(w, keys[0], t->over_hours[0], 1);
        af_jw_fixed(w, keys[1], t->over_hours[1], 1);
        af_jw_close(w, '}');
    }
    af_jw_close(w, '}');
}

static void json_placement(struct af_jw *w, const char *key, const struct af_sim_placement *pl)
{
    if (!pl->node) {
        af_jw_null(w, key);
        return;
    }
    af_jw_open(w, key, '{');
    af_jw_str(w, "node", pl->node);
    af_jw_str(w, "class", af_sim_class_name(pl->cls));
    af_jw_fixed(w, "placed_h", pl->placed_at / 3600.0, 2);
    af_jw_fixed(w, "ran_h", pl->ran / 3600.0, 2);
    if (pl->tier >= 0)
        af_jw_int(w, "tier", pl->tier + 1);
    else
        af_jw_null(w, "tier");
    af_jw_close(w, '}');
}

int af_sim_render_json(const struct af_sim_result *r, struct af_buf *out)
{
    static const char *const keys[AF_SIM__SIDES] = {"accelfit", "kube_scheduler", "lower_bound"};
    struct af_jw w = AF_JW_INIT(out);
    char line[400];

    af_jw_open(&w, NULL, '{');
    af_jw_int(&w, "nodes", (long long)r->n_nodes);
    af_jw_int(&w, "pods", (long long)r->n_pods);
    af_jw_int(&w, "already_running", (long long)r->n_bound);
    af_jw_fixed(&w, "hours", r->horizon / 3600.0, 2);
    af_jw_open(&w, "scan", '{');
    af_jw_int(&w, "percentage_of_nodes_to_score", r->percentage);
    af_jw_int(&w, "feasible_to_find", r->feasible_to_find);
    af_jw_close(&w, '}');
    af_jw_open(&w, "schedulers", '{');
    for (int s = 0; s < AF_SIM__SIDES; s++)
        json_side(&w, keys[s], &r->side[s], s == AF_SIM_BOUND, r->autoscale);
    af_jw_close(&w, '}');
    if (r->autoscale) {
        af_jw_open(&w, "autoscale", '{');
        af_jw_fixed(&w, "consolidate_after_s", r->consolidate_after, 0);
        af_jw_int(&w, "launch_latency_s", 0);
        af_jw_close(&w, '}');
    }
    json_money(&w, "savings_usd",
               r->side[AF_SIM_KUBE].cost_usd - r->side[AF_SIM_ACCELFIT].cost_usd);
    af__sim_summary(r, line, sizeof(line));
    af_jw_str(&w, "summary", line);
    af_jw_str(&w, "tenants_from", r->tenants_from_policy ? "policy" : "trace");
    af_jw_open(&w, "tenants", '[');
    for (size_t i = 0; i < r->n_tenants; i++)
        json_tenant(&w, r, &r->tenants[i], keys);
    af_jw_close(&w, ']');
    af_jw_open(&w, "rollouts", '[');
    for (size_t k = 0; k < r->n_rollouts; k++) {
        const struct af_sim_rollout_stats *ro = &r->rollouts[k];

        af_jw_open(&w, NULL, '{');
        af_jw_str(&w, "name", ro->name);
        af_jw_fixed(&w, "share", ro->share, 2);
        for (int s = 0; s < 2; s++) {
            af_jw_open(&w, keys[s], '{');
            af_jw_int(&w, "target", ro->target_pods[s]);
            af_jw_int(&w, "source", ro->source_pods[s]);
            af_jw_close(&w, '}');
        }
        af_jw_close(&w, '}');
    }
    af_jw_close(&w, ']');
    af_jw_open(&w, "placements", '[');
    for (size_t i = 0; i < r->n_pods && r->placements[0]; i++) {
        af_jw_open(&w, NULL, '{');
        af_jw_str(&w, "namespace", r->placements[0][i].ns);
        af_jw_str(&w, "name", r->placements[0][i].name);
        for (int s = 0; s < 2; s++)
            json_placement(&w, keys[s], &r->placements[s][i]);
        af_jw_close(&w, '}');
    }
    af_jw_close(&w, ']');
    af_jw_close(&w, '}');
    return af_jw_end(&w) ? AF_ETOOBIG : 0;
}
