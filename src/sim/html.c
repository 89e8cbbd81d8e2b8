/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The simulator's report as one self-contained HTML page: the comparison table
 * (the rows af_sim_render_text prints, from the same function), tenant spend,
 * and charts drawn as inline SVG — cost per hour over time by class for each
 * scheduler and the lower bound, placements by class, and each rollout's share
 * on its target over time, on the page of accelfit/page.h: no scripts, no fonts or
 * styles fetched, so the file can be mailed and opened offline.
 */
#include "accelfit/simulate.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/page.h"
#include "sim/internal.h"
#include "accelfit/banned.h"

/* One colour per class slot (the last for unknown). */
static const char *const palette[AF_SIM_CLASSES] = {
    "#9edae5", /* t4 */ "#17becf", /* a10g */ "#aec7e8", /* l4 */ "#8c564b", /* l40s */
    "#c49c94", /* v100 */ "#1f77b4", /* a100 */ "#393b79", /* h100 */ "#9467bd", /* h200 */
    "#c5b0d5", /* b200 */ "#ff7f0e", /* trainium1 */ "#d62728", /* trainium2 */
    "#98df8a", /* inferentia1 */ "#2ca02c", /* inferentia2 */ "#e377c2", /* amd */
    "#7f7f7f", /* cpu */ "#c7c7c7", /* unknown */
};

static const char *const side_color[AF_SIM__SIDES] = {"#e6550d", "#3182bd", "#31a354"};

/* The page of accelfit/page.h (shared with `accelfit costs --report`), by short names here. */
static void put(struct af_page *p, const char *s)
{
    af_page_put(p, s);
}

static void AF_PRINTF(2, 3) putf(struct af_page *p, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    af_page_vputf(p, fmt, ap);
    va_end(ap);
}

static void esc(struct af_page *p, const char *s)
{
    af_page_esc(p, s);
}

static double nice_step(double max, int ticks)
{
    return af_page_nice_step(max, ticks);
}

/* ---- the table -------------------------------------------------------------------------- */

static void table_row(void *ud, const char *label, bool indent, char cell[][64])
{
    struct af_page *p = ud;

    put(p, indent ? "<tr class=\"sub\"><th>" : "<tr><th>");
    esc(p, label);
    put(p, "</th>");
    for (int s = 0; s < AF_SIM__SIDES; s++) {
        put(p, "<td>");
        esc(p, cell[s]);
        put(p, "</td>");
    }
    put(p, "</tr>\n");
}

/* ---- charts ------------------------------------------------------------------------------- */

#define CW 360   /* chart width */
#define CH 220   /* chart height */
#define ML 56    /* margins */
#define MB 28
#define MT 10
#define MR 10

static void axes(struct af_page *p, double ymax, double step, const char *yfmt, double hours)
{
    double xstep = nice_step(hours > 0 ? hours : 1, 6);
    int pw = CW - ML - MR, ph = CH - MT - MB;

    for (double y = 0; y <= ymax + 1e-9; y += step) {
        double py = MT + ph - ph * y / ymax;
        putf(p, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"grid\"/>", ML, py,
             CW - MR, py);
        putf(p, "<text x=\"%d\" y=\"%.1f\" class=\"yl\">", ML - 4, py + 4);
        putf(p, yfmt, y);
        put(p, "</text>");
    }
    for (double x = 0; x <= hours + 1e-9; x += xstep) {
        double px = ML + pw * x / hours;
        putf(p, "<text x=\"%.1f\" y=\"%d\" class=\"xl\">%gh</text>", px, CH - 8, x);
    }
    putf(p, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" class=\"axis\"/>", ML, MT + ph, CW - MR,
         MT + ph);
}

/* Stacked bars: dollars per hour by class in each bucket, for one side. */
static void cost_chart(struct af_page *p, const struct af_sim_result *r, int side, double ymax)
{
    const struct af_sim_side_stats *s = &r->side[side];
    double hours = r->horizon / 3600.0, bh = r->bucket_seconds / 3600.0;
    double step = nice_step(ymax, 4);
    int pw = CW - ML - MR, ph = CH - MT - MB;
    char total[48];

    ymax = ceil(ymax / step) * step;
    af__sim_money(s->cost_usd, total, sizeof(total));
    putf(p, "<figure><figcaption><b>%s</b> &mdash; %s over the trace</figcaption>",
         af_sim_side_name((enum af_sim_side)side), total);
    putf(p,
         "<svg viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" "
         "shape-rendering=\"crispEdges\">",
         CW, CH, CW, CH);
    axes(p, ymax, step, "$%g/h", hours);
    for (int b = 0; b < r->buckets; b++) {
        double y = 0, x = ML + pw * (double)b / r->buckets, w = (double)pw / r->buckets;
        for (int c = 0; c < AF_SIM_CLASSES; c++) {
            double v = s->cost_series[(size_t)b * AF_SIM_CLASSES + c] / bh, h;
            if (v <= 0)
                continue;
            h = ph * v / ymax;
            putf(p,
                 "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\">"
                 "<title>%s %.2f $/h</title></rect>",
                 x, MT + ph - ph * y / ymax - h, w + 0.6, h, palette[c], af_sim_class_name(c), v);
            y += v;
        }
    }
    put(p, "</svg></figure>\n");
}

static void legend(struct af_page *p, const struct af_sim_result *r)
{
    put(p, "<div class=\"legend\">");
    for (int c = 0; c < AF_SIM_CLASSES; c++) {
        bool used = false;
        for (int s = 0; s < AF_SIM__SIDES; s++)
            used |= r->side[s].cost_by_class[c] > 0 || r->side[s].placed_by_class[c] > 0;
        if (!used)
            continue;
        putf(p, "<span><i style=\"background:%s\"></i>%s</span>", palette[c],
             af_sim_class_name(c));
    }
    put(p, "</div>\n");
}

/* Horizontal bars: pods placed per class, one bar per side. */
static void placements_chart(struct af_page *p, const struct af_sim_result *r)
{
    int rows = 0, max = 1, y = 8;

    for (int c = 0; c < AF_SIM_CLASSES; c++) {
        bool used = false;
        for (int s = 0; s < AF_SIM__SIDES; s++) {
            used |= r->side[s].placed_by_class[c] > 0;
            if (r->side[s].placed_by_class[c] > max)
                max = r->side[s].placed_by_class[c];
        }
        rows += used;
    }
    putf(p, "<svg viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">", 480,
         rows * 40 + 16, 480, rows * 40 + 16);
    for (int c = 0; c < AF_SIM_CLASSES; c++) {
        bool used = false;
        for (int s = 0; s < AF_SIM__SIDES; s++)
            used |= r->side[s].placed_by_class[c] > 0;
        if (!used)
            continue;
        putf(p, "<text x=\"110\" y=\"%d\" class=\"yl\">%s</text>", y + 16, af_sim_class_name(c));
        for (int s = 0; s < AF_SIM__SIDES; s++) {
            int v = r->side[s].placed_by_class[c];
            double w = (480 - 160.0) * v / max;
            putf(p,
                 "<rect x=\"116\" y=\"%d\" width=\"%.1f\" height=\"10\" fill=\"%s\">"
                 "<title>%s: %d</title></rect><text x=\"%.1f\" y=\"%d\" class=\"v\">%d</text>",
                 y + s * 11, w, side_color[s], af_sim_side_name((enum af_sim_side)s), v,
                 120 + w, y + s * 11 + 9, v);
        }
        y += 40;
    }
    put(p, "</svg>\n");
}

static void rollout_chart(struct af_page *p, const struct af_sim_result *r, size_t k)
{
    const struct af_sim_rollout_stats *ro = &r->rollouts[k];
    double hours = r->horizon / 3600.0;
    int pw = CW - ML - MR, ph = CH - MT - MB;
    char targets[200];

    af_class_mask_names(ro->target, targets, sizeof(targets));
    put(p, "<figure><figcaption>rollout <b>");
    esc(p, ro->name);
    putf(p, "</b>: share of its running pods on %s (target %.0f%%)<br>", targets,
         100 * ro->share);
    for (int s = 0; s < 2; s++) {
        char share[160];
        af__sim_rollout_share(ro, s, share, sizeof(share));
        putf(p, "%s%s: ", s ? "; " : "", af_sim_side_name((enum af_sim_side)s));
        esc(p, share);
    }
    put(p, "</figcaption>");
    putf(p, "<svg viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\">", CW, CH, CW, CH);
    axes(p, 1.0, 0.25, "%g", hours);
    putf(p, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" class=\"target\"/>", ML,
         MT + ph - ph * ro->share, CW - MR, MT + ph - ph * ro->share);
    for (int s = 0; s < 2; s++) {
        bool open = false;
        for (int b = 0; b < r->buckets; b++) {
            double v = ro->achieved[s][b], x = ML + pw * (b + 1.0) / r->buckets;
            if (v < 0) {
                if (open)
                    put(p, "\"/>");
                open = false;
                continue;
            }
            if (!open)
                putf(p, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
                     side_color[s]);
            putf(p, "%.1f,%.1f ", x, MT + ph - ph * v);
            open = true;
        }
        if (open)
            put(p, "\"/>");
    }
    put(p, "</svg></figure>\n");
}

/* ---- the page ------------------------------------------------------------------------------ */

int af_sim_render_html(const struct af_sim_result *r, const char *title, struct af_buf *out)
{
    struct af_page p = {out, 0};
    char line[400];
    double ymax = 0;

    af_page_begin(&p, "accelfit simulate", title);
    putf(&p, "<p class=\"meta\">%zu nodes, %zu pods in the trace, %zu already running; %.1f hours. ",
         r->n_nodes, r->n_pods, r->n_bound, r->horizon / 3600.0);
    af__sim_scan_text(r, line, sizeof(line));
    esc(&p, line);
    if (r->autoscale) {
        put(&p, ". ");
        af__sim_autoscale_text(r, line, sizeof(line));
        esc(&p, line);
    }
    put(&p, ".</p>\n<p class=\"summary\" id=\"summary\">");
    af__sim_summary(r, line, sizeof(line));
    esc(&p, line);
    put(&p, "</p>\n<div class=\"row\"><div>\n<table id=\"comparison\"><thead><tr><th></th>");
    for (int s = 0; s < AF_SIM__SIDES; s++)
        putf(&p, "<th style=\"color:%s\">%s</th>", side_color[s],
             af_sim_side_name((enum af_sim_side)s));
    put(&p, "</tr></thead><tbody>\n");
    af__sim_rows(r, table_row, &p);
    put(&p, "</tbody></table>\n</div><div>\n");
    put(&p, "<h2 class=\"first\">Pods placed, by class</h2>\n<div class=\"legend\">");
    for (int s = 0; s < AF_SIM__SIDES; s++)
        putf(&p, "<span><i style=\"background:%s\"></i>%s</span>", side_color[s],
             af_sim_side_name((enum af_sim_side)s));
    put(&p, "</div>\n");
    placements_chart(&p, r);

    put(&p, "</div></div>\n");

    put(&p, "<h2>Cost per hour over the trace, by class</h2>\n");
    legend(&p, r);
    for (int s = 0; s < AF_SIM__SIDES; s++)
        for (int b = 0; b < r->buckets; b++) {
            double v = 0;
            for (int c = 0; c < AF_SIM_CLASSES; c++)
                v += r->side[s].cost_series[(size_t)b * AF_SIM_CLASSES + c];
            v /= r->bucket_seconds / 3600.0;
            if (v > ymax)
                ymax = v;
        }
    if (ymax <= 0)
        ymax = 1;
    for (int s = 0; s < AF_SIM__SIDES; s++)
        cost_chart(&p, r, s, ymax);

    put(&p, "<div class=\"row\">");
    if (r->n_rollouts) {
        put(&p, "<div><h2>Rollouts</h2>\n<div class=\"legend\">");
        for (int s = 0; s < 2; s++)
            putf(&p, "<span><i style=\"background:%s\"></i>%s</span>", side_color[s],
                 af_sim_side_name((enum af_sim_side)s));
        put(&p, "<span>- - - target share</span></div>\n");
        for (size_t k = 0; k < r->n_rollouts; k++)
            rollout_chart(&p, r, k);
        put(&p, "</div>");
    }

    if (r->n_tenants) {
        put(&p, "<div><h2>Tenant spend</h2>\n<table id=\"tenants\"><thead><tr><th>");
        esc(&p, af__sim_tenants_title(r));
        put(&p, "</th>");
        for (int s = 0; s < AF_SIM__SIDES; s++)
            putf(&p, "<th style=\"color:%s\">%s</th>", side_color[s],
                 af_sim_side_name((enum af_sim_side)s));
        put(&p, "</tr></thead><tbody>\n");
        for (size_t i = 0; i < r->n_tenants; i++) {
            af__sim_tenant_label(&r->tenants[i], line, sizeof(line));
            put(&p, "<tr><th colspan=\"4\">");
            esc(&p, line);
            put(&p, "</th></tr>\n");
            af__sim_tenant_rows(r, i, table_row, &p);
        }
        put(&p, "</tbody></table>\n<p class=\"note\">");
        put(&p, r->tenants_from_policy
                    ? "Tenants are the policy's (a pod's namespace, else its accelfit.io/tenant "
                      "label, else default). accelfit's side applies their classes and budgets "
                      "as the server does, with the spend of that moment; kube-scheduler knows "
                      "nothing of budgets, and the lower bound ignores them."
                    : "Tenants are the trace's (a pod's accelfit.io/tenant label, else its "
                      "namespace): the policy has no tenants section, so no budgets.");
        put(&p, " Spend is each running pod's share of its node's price.</p></div>");
    }
    put(&p, "</div>\n<p class=\"note\">A node is paid while a pod that is not a DaemonSet or mirror pod "
            "runs on it. The lower bound prices each pod at the cheapest node that could hold "
            "it, packed perfectly, for the time both schedulers ran it: no scheduler can pay "
            "less for that work. kube-scheduler is modelled (docs/simulate.md says what the "
            "model leaves out); accelfit's decisions are the server's own code.</p>\n");
    return af_page_end(&p);
}
