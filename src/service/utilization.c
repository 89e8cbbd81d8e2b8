/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Live utilization on /readyz and /metrics: whether the Prometheus reader's last round
 * answered (a degraded source is reported, never made a reason to be not ready: accelfit
 * then scores on allocation, as without a source), how old its data is, and per node
 * and class the accelerators that are allocated but idle for the waste window, with
 * what they cost per hour. Read at scrape time from the current cluster and
 * utilization snapshots; series are bounded by the node count.
 */
#include "accelfit/metrics.h"
#include "accelfit/service.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/prom.h"
#include "accelfit/utilization.h"
#include "accelfit/banned.h"

void af_service_utilization_status(struct af_service *svc, char *out, size_t n)
{
    struct af_utilization_snapshot *us;

    out[0] = '\0';
    if (!svc || !svc->util)
        return;
    us = af_prom_acquire(svc->util);
    if (!us)
        snprintf(out, n, "utilization: degraded: no answer from Prometheus yet; scoring on "
                         "allocation\n");
    else if (!us->ok)
        snprintf(out, n, "utilization: degraded: %s; scoring on allocation\n", us->error);
    else
        snprintf(out, n, "utilization: live from %s, %zu nodes, answered %.1fs ago\n",
                 us->source, us->n_nodes,
                 us->frozen ? 0.0 : af_wall_time() - us->last_ok);
    af_utilization_snapshot_unref(us);
}

/*
 * One gauge of the waste report, a series per node whose allocated accelerators idled the
 * whole window: how many (or, with `usd`, what they cost per hour, for nodes with a price).
 */
static int waste_gauge(struct af_buf *o, const char *metric, const char *help, bool usd,
                       const struct af_policy *pol, const struct af_snapshot *snap,
                       const struct af_utilization_snapshot *us, double now)
{
    int rc = af_metrics_header(o, metric, "gauge", help);

    for (size_t i = 0; snap && i < snap->n_nodes && !rc; i++) {
        const struct af_node_view *v = &snap->nodes[i];
        struct af_utilization_waste w;
        double value;
        if (!af_utilization_waste(pol, v, af_utilization_find(us, v->info->name), now, &w) ||
            (usd && !w.price_known))
            continue;
        value = usd ? w.usd_per_hour : w.idle_allocated;
        rc = af_buf_printf(o, "%s{node=\"", metric);
        if (!rc)
            rc = af_metrics_label(o, v->info->name);
        if (!rc)
            rc = af_buf_printf(o, "\",class=\"%s\",unit=\"%s\"} %.6g\n",
                               af_class_name(v->info->cls),
                               w.metric == AF_UM_NEURONCORE_UTIL ? "neuroncore" : "gpu",
                               isfinite(value) ? value : 0.0);
    }
    return rc;
}

int af_service_render_utilization(struct af_service *svc, struct af_config *cfg,
                                  struct af_buf *o)
{
    struct af_utilization_snapshot *us;
    struct af_snapshot *snap;
    double now;
    int rc;

    if (!svc || !svc->util)
        return 0;
    us = af_prom_acquire(svc->util);
    now = af_utilization_now(us, af_wall_time());
    rc = af_metrics_header(o, "accelfit_utilization_up", "gauge",
                           "1 when the last round of utilization queries answered; 0: scoring "
                           "on allocation only.");
    if (!rc)
        rc = af_buf_printf(o, "accelfit_utilization_up %d\n", us && us->ok ? 1 : 0);
    if (!rc)
        rc = af_metrics_header(o, "accelfit_utilization_last_answer_age_seconds", "gauge",
                               "Seconds since Prometheus last answered every query (-1 never).");
    if (!rc)
        rc = af_buf_printf(o, "accelfit_utilization_last_answer_age_seconds %.3f\n",
                           us && us->last_ok > 0 ? now - us->last_ok : -1.0);
    if (!rc)
        rc = af_metrics_header(o, "accelfit_utilization_rounds_total", "counter",
                               "Rounds of utilization queries, by result.");
    if (!rc)
        rc = af_buf_printf(o,
                           "accelfit_utilization_rounds_total{result=\"ok\"} %llu\n"
                           "accelfit_utilization_rounds_total{result=\"error\"} %llu\n",
                           (unsigned long long)(us ? us->rounds - us->failures : 0),
                           (unsigned long long)(us ? us->failures : 0));
    if (!rc)
        rc = af_metrics_header(o, "accelfit_utilization_nodes", "gauge",
                               "Nodes with live utilization series; series no label mapped.");
    if (!rc)
        rc = af_buf_printf(o,
                           "accelfit_utilization_nodes{mapped=\"true\"} %zu\n"
                           "accelfit_utilization_nodes{mapped=\"false\"} %zu\n",
                           us ? us->n_nodes : 0, us ? us->unmapped : 0);
    if (!rc)
        rc = af_metrics_header(o, "accelfit_utilization_samples_discarded_total", "counter",
                               "Samples dropped, by reason: out_of_range (a utilization beyond "
                               "[0, 1], memory beyond [0, 2^60] bytes), future (timestamped "
                               "over a minute ahead), over_limit (series past the round's "
                               "limit).");
    for (int d = 0; d < AF_UTILIZATION_DISCARD__COUNT && !rc; d++)
        rc = af_buf_printf(o, "accelfit_utilization_samples_discarded_total{reason=\"%s\"} %llu\n",
                           af_utilization_discard_name((enum af_utilization_discard)d),
                           (unsigned long long)(us ? us->discarded_total[d] : 0));
    if (rc || !us || !us->ok) {
        af_utilization_snapshot_unref(us);
        return rc;
    }

    if (!cfg) {   /* waste needs the policy */
        af_utilization_snapshot_unref(us);
        return rc;
    }
    snap = af_publisher_acquire(svc->pub);
    rc = waste_gauge(o, "accelfit_idle_allocated_accelerators",
                     "Accelerators (GPUs, NeuronCores) allocated to pods but idle for the whole "
                     "utilization.waste.window, by node and class.",
                     false, cfg->policy, snap, us, now);
    if (!rc)
        rc = waste_gauge(o, "accelfit_idle_allocated_usd_per_hour",
                         "What the idle allocated accelerators cost per hour (their share of the "
                         "node's price), by node and class.",
                         true, cfg->policy, snap, us, now);
    af_snapshot_unref(snap);
    af_utilization_snapshot_unref(us);
    return rc;
}
