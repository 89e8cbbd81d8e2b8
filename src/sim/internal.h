/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers the simulator's two renderers share (report.c defines them, html.c uses
 * them), so the table and the HTML page print the same rows with the same numbers.
 */
#ifndef AF_SIM_INTERNAL_H
#define AF_SIM_INTERNAL_H

#include "accelfit/simulate.h"

/* "$1,234.56" (to the cent; "-$0.50" below zero). Cannot fail. */
void af__sim_money(double usd, char *out, size_t n);
/* One line on kube-scheduler's scan for this cluster. */
void af__sim_scan_text(const struct af_sim_result *r, char *out, size_t n);
/* One line on the autoscaler (af_sim_result.autoscale): latency and removal delay. */
void af__sim_autoscale_text(const struct af_sim_result *r, char *out, size_t n);
/* One line comparing the costs. */
void af__sim_summary(const struct af_sim_result *r, char *out, size_t n);

/* The comparison's rows: a label, whether it is a detail of the row above, one cell per side. */
typedef void (*af__sim_row_cb)(void *ud, const char *label, bool indent, char cell[][64]);
void af__sim_rows(const struct af_sim_result *r, af__sim_row_cb cb, void *ud);

/* The tenants' part: a title ("tenants (the policy's)"), one label per tenant ("team-llm:
 * budget $30.00/h, hard"), then its rows: spend, average and peak rates, hours over budget. */
const char *af__sim_tenants_title(const struct af_sim_result *r);
void af__sim_tenant_label(const struct af_sim_tenant *t, char *out, size_t n);
void af__sim_tenant_rows(const struct af_sim_result *r, size_t i, af__sim_row_cb cb, void *ud);
/* A rollout's placements on one side: "1 of 4 on target (25%)", or that none went to the
 * target or source classes (the pods may have gone to other classes). Cannot fail. */
void af__sim_rollout_share(const struct af_sim_rollout_stats *ro, int side, char *out, size_t n);
/* Dollars per hour over the whole trace. */
double af__sim_tenant_average(const struct af_sim_result *r, const struct af_sim_tenant *t,
                              int side);

#endif
