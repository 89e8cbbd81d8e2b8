/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The service's gauges on GET /metrics, read at scrape time: node counts by
 * class from the current snapshot, the cache gauges from the shared
 * af_cache_status, and the state of each rollout of the policy
 * (accelfit_rollout_*, labelled by rollout name: as many series as the policy
 * has rollouts, so the label set stays bounded), and the policy's generation,
 * hash and reloads (reload.c). metrics.c renders the
 * counters first and knows nothing of any of this.
 */
#include "accelfit/metrics.h"
#include "accelfit/service.h"
#include "accelfit/webhook.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/reload.h"
#include "accelfit/budget.h"
#include "accelfit/rollout_state.h"

#include "service/dra.h"
#include "accelfit/banned.h"

static const char *class_label(int c)
{
    return c == AF_CLASS__COUNT ? "unknown" : af_class_name((enum af_class)c);
}

static int render_cluster(struct af_service *svc, struct af_buf *o)
{
    struct af_snapshot *snap = svc ? af_publisher_acquire(svc->pub) : NULL;
    size_t by_class[AF_CLASS__COUNT + 1];
    struct af_cache_status *st = svc ? svc->status : NULL;
    const char *why = NULL;
    bool ready = svc ? af_service_ready(svc, &why) : false;
    int rc;

    memset(by_class, 0, sizeof(by_class));
    for (size_t i = 0; snap && i < snap->n_nodes; i++) {
        const struct af_node_info *n = snap->nodes[i].info;
        int c = n ? (int)n->cls : -1;
        by_class[(c < 0 || c >= AF_CLASS__COUNT) ? AF_CLASS__COUNT : c]++;
    }
    rc = af_metrics_header(o, "accelfit_nodes", "gauge", "Nodes in the current snapshot, by class.");
    for (int c = 0; c <= AF_CLASS__COUNT && !rc; c++)
        rc = af_buf_printf(o, "accelfit_nodes{class=\"%s\"} %zu\n", class_label(c), by_class[c]);
    if (!rc)
        rc = af_metrics_header(o, "accelfit_ready", "gauge",
                    "1 when filter answers from a synced, fresh cache (as /readyz).");
    if (!rc)
        rc = af_buf_printf(o, "accelfit_ready %d\n", ready ? 1 : 0);
    if (!rc)
        rc = af_metrics_header(o, "accelfit_cache_synced", "gauge",
                    "1 once the first full list of nodes and pods has been applied.");
    if (!rc)
        rc = af_buf_printf(o, "accelfit_cache_synced %d\n",
                           st ? (atomic_load(&st->synced) ? 1 : 0)
                              : (snap && snap->synced ? 1 : 0));
    if (!rc)
        rc = af_metrics_header(o, "accelfit_cache_objects", "gauge",
                    "Objects in the cluster cache, by kind.");
    if (!rc)
        rc = af_buf_printf(o,
                           "accelfit_cache_objects{kind=\"node\"} %llu\n"
                           "accelfit_cache_objects{kind=\"pod\"} %llu\n",
                           (unsigned long long)(st ? atomic_load(&st->nodes)
                                                   : (snap ? snap->n_nodes : 0)),
                           (unsigned long long)(st ? atomic_load(&st->pods)
                                                   : (snap ? snap->n_pods : 0)));
    if (!rc)
        rc = af_metrics_header(o, "accelfit_snapshot_generation", "gauge",
                    "Generation of the snapshot requests are answered from.");
    if (!rc)
        rc = af_buf_printf(o, "accelfit_snapshot_generation %llu\n",
                           (unsigned long long)(snap ? snap->generation : 0));
    if (st && !rc) {
        uint64_t now = af_now_ns(), last = atomic_load(&st->last_sync_ns);
        double age = (last && now > last) ? (double)(now - last) / 1e9 : 0.0;
        struct {
            const char *name, *type, *help;
            uint64_t v;
        } rows[] = {
            {"accelfit_watch_up", "gauge", "1 while a watch stream is open.",
             atomic_load(&st->watch_up) ? 1u : 0u},
            {"accelfit_watch_restarts_total", "counter", "Watch streams restarted.",
             atomic_load(&st->watch_restarts)},
            {"accelfit_relists_total", "counter",
             "Full relists (initial list, 410 Expired, policy reload).", atomic_load(&st->relists)},
            {"accelfit_events_applied_total", "counter", "Watch events applied to the cache.",
             atomic_load(&st->events_applied)},
            {"accelfit_events_posted_total", "counter", "Kubernetes Events posted on pods.",
             atomic_load(&st->events_posted)},
            {"accelfit_events_dropped_total", "counter",
             "Kubernetes Events dropped (queue full or over budget).",
             atomic_load(&st->events_dropped)},
            {"accelfit_snapshots_published_total", "counter",
             "Snapshots built and published from the watch.",
             atomic_load(&st->snapshots_published)},
            {"accelfit_snapshot_build_microseconds_total", "counter",
             "Time spent building and publishing those snapshots.",
             atomic_load(&st->snapshot_build_ns) / 1000},
            {"accelfit_snapshot_build_max_microseconds", "gauge",
             "Longest snapshot build and publish so far.",
             atomic_load(&st->snapshot_build_max_ns) / 1000},
        };
        rc = af_metrics_header(o, "accelfit_cache_last_sync_age_seconds", "gauge",
                    "Seconds since the last full list or bookmark (0 before the first).");
        if (!rc)
            rc = af_buf_printf(o, "accelfit_cache_last_sync_age_seconds %.3f\n", age);
        for (size_t i = 0; i < AF_ARRAY_SIZE(rows) && !rc; i++) {
            rc = af_metrics_header(o, rows[i].name, rows[i].type, rows[i].help);
            if (!rc)
                rc = af_buf_printf(o, "%s %llu\n", rows[i].name, (unsigned long long)rows[i].v);
        }
    }
    af_snapshot_unref(snap);
    return rc;
}

static int rollout_row(struct af_buf *o, const char *metric, const char *name, const char *side,
                       double v)
{
    int rc = af_buf_printf(o, "%s{rollout=\"", metric);

    if (!rc)
        rc = af_metrics_label(o, name);
    if (!rc && side)
        rc = af_buf_printf(o, "\",side=\"%s", side);
    if (!rc)
        rc = af_buf_printf(o, "\"} %.6g\n", isfinite(v) ? v : 0.0);
    return rc;
}

/* The state of every rollout of the policy (none without svc->rollouts). */
static int render_rollouts(struct af_service *svc, struct af_config *cfg, struct af_buf *o)
{
    static const struct {
        const char *name, *type, *help;
    } metric[] = {
        {"accelfit_rollout_target_share", "gauge",
         "Share of units the rollout wants on its target now."},
        {"accelfit_rollout_achieved_share", "gauge",
         "Share of the rollout's units on its target (cache, plus decided and not yet seen)."},
        {"accelfit_rollout_units", "gauge", "Units of the rollout by side (target, source)."},
        {"accelfit_rollout_fallbacks_total", "counter",
         "Units sent to the source because no target node had room."},
        {"accelfit_rollout_halted", "gauge", "1 while the rollout's brake halts new target units."},
    };
    struct af_snapshot *snap;
    struct af_rollout_status *st;
    size_t n;
    double now;
    int rc = 0;

    if (!svc || !svc->rollouts)
        return 0;
    n = cfg && cfg->policy ? cfg->policy->n_rollouts : 0;
    if (!n)
        return 0;
    snap = af_publisher_acquire(svc->pub);
    now = af_wall_time();
    st = af_xcalloc(n, sizeof(*st));
    for (size_t i = 0; i < n; i++)
        af_rollouts_status(svc->rollouts, cfg, snap, now, i, &st[i]);
    for (size_t k = 0; k < AF_ARRAY_SIZE(metric) && !rc; k++) {
        rc = af_metrics_header(o, metric[k].name, metric[k].type, metric[k].help);
        for (size_t i = 0; i < n && !rc; i++) {
            const char *name = cfg->policy->rollouts[i].name;
            switch (k) {
            case 0:
                rc = rollout_row(o, metric[k].name, name, NULL, st[i].share);
                break;
            case 1:
                rc = rollout_row(o, metric[k].name, name, NULL, st[i].achieved);
                break;
            case 2:
                rc = rollout_row(o, metric[k].name, name, "target", st[i].target);
                if (!rc)
                    rc = rollout_row(o, metric[k].name, name, "source", st[i].source);
                break;
            case 3:
                rc = rollout_row(o, metric[k].name, name, NULL, (double)st[i].fallbacks);
                break;
            default:
                rc = rollout_row(o, metric[k].name, name, NULL, st[i].halted ? 1 : 0);
                break;
            }
        }
    }
    af_free(st);
    af_snapshot_unref(snap);
    return rc;
}

/* The claim worker's counts (docs/rollouts.md), with an API server only. */
static int render_claims(struct af_service *svc, struct af_buf *o)
{
    struct af_claims_stats st;
    int rc;

    if (!svc->claims)
        return 0;
    af_claims_stats(svc->claims, &st);
    rc = af_metrics_header(o, "accelfit_rollout_claims_total", "counter",
                           "New rollout units by how their side was decided: written to the "
                           "API server's claim ledger first, claimed ahead in it (a reserve: "
                           "answered at once), or by this replica alone (the ledger could not "
                           "be written in time: the share may drift).");
    if (!rc)
        rc = af_buf_printf(o, "accelfit_rollout_claims_total{result=\"written\"} %llu\n"
                              "accelfit_rollout_claims_total{result=\"ahead\"} %llu\n"
                              "accelfit_rollout_claims_total{result=\"local\"} %llu\n",
                           (unsigned long long)st.written, (unsigned long long)st.ahead,
                           (unsigned long long)st.local);
    if (!rc)
        rc = af_metrics_header(o, "accelfit_rollout_claim_conflicts_total", "counter",
                               "Claim ledger writes refused because another replica wrote "
                               "first (decided again).");
    if (!rc)
        rc = af_buf_printf(o, "accelfit_rollout_claim_conflicts_total %llu\n",
                           (unsigned long long)st.conflicts);
    if (!rc)
        rc = af_metrics_header(o, "accelfit_rollout_claim_writes_total", "counter",
                               "Claim ledger writes that succeeded: one per batch of units "
                               "and block of reserves.");
    if (!rc)
        rc = af_buf_printf(o, "accelfit_rollout_claim_writes_total %llu\n",
                           (unsigned long long)st.writes);
    return rc;
}

int af_service_render_metrics(struct af_service *svc, struct af_buf *out)
{
    /* One config for the whole scrape: a reload does not mix two in one answer. */
    struct af_config *cfg = svc->config ? af_config_holder_get(svc->config) : NULL;
    int rc = af_metrics_render(svc->metrics, out);

    if (!rc)
        rc = render_cluster(svc, out);
    if (!rc)
        rc = render_rollouts(svc, cfg, out);
    if (!rc)
        rc = render_claims(svc, out);
    if (!rc) {
        struct af_snapshot *snap = af_publisher_acquire(svc->pub);
        rc = af__service_render_dra(snap, out);   /* service/dra.c */
        af_snapshot_unref(snap);
    }
    if (!rc)
        rc = af_reload_render_metrics(svc->reload, cfg, out);
    if (!rc)
        rc = af_budget_render_metrics(svc, cfg, out);   /* tenants and idle cost (budget.c) */
    if (!rc)
        rc = af_service_render_utilization(svc, cfg, out);
    if (!rc)
        rc = af_service_render_prices(svc, cfg, out);
    af_config_unref(cfg);
    return rc;
}
