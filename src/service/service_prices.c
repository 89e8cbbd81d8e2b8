/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prices on /readyz and /metrics (docs/pricing.md): where the prices nodes are charged at
 * come from and how old they are. The catalog's list prices always stand behind; with
 * prices read from AWS (svc->prices), each source (on-demand or spot, per region) says
 * how many prices it gave, when it was last read and its last error. A source that fails
 * never makes the server not ready: its last prices stay, then the catalog's. Read at
 * scrape time; series are bounded by the price sources (two per region) and the
 * AF_PRICE_SOURCE_* names.
 */
#include "accelfit/metrics.h"
#include "accelfit/service.h"

#include <stdio.h>
#include <string.h>

#include "accelfit/costs.h"
#include "accelfit/decide.h"
#include "accelfit/prices.h"
#include "accelfit/banned.h"

static const char *kind_name(enum af_price_kind k)
{
    return af_price_kind_name(k);
}

void af_service_prices_status(struct af_service *svc, const struct af_catalog *cat, char *out,
                              size_t n)
{
    struct af_prices *p = svc && svc->prices ? af_prices_holder_get(svc->prices) : NULL;
    const struct af_price_source *src;
    size_t n_src, used = 0;
    double now = af_wall_time();
    char age[32];

    out[0] = '\0';
    af_format_age(cat && cat->prices_as_of > 0 ? now - cat->prices_as_of : 0, age, sizeof(age));
    used += (size_t)snprintf(out, n, "prices: catalog %s on-demand list prices%s%s%s\n",
                             cat && cat->price_region ? cat->price_region : "us-east-1",
                             cat && cat->prices_as_of > 0 ? ", " : "",
                             cat && cat->prices_as_of > 0 ? age : "",
                             cat && cat->prices_as_of > 0 ? " old" : "");
    if (svc && svc->prices && !p && used < n)
        used += (size_t)snprintf(out + used, n - used,
                                 "prices: aws: nothing read yet; nodes are charged at the "
                                 "catalog's prices\n");
    src = af_prices_sources(p, &n_src);
    for (size_t i = 0; i < n_src && used < n; i++) {
        const struct af_price_source *s = &src[i];
        char read[48] = "never read", line[512];
        size_t len;
        if (s->read_at > 0) {
            af_format_age(now - s->read_at, age, sizeof(age));
            snprintf(read, sizeof(read), "read %s ago", age);
        }
        bool resv = s->kind == AF_PRICE_RESERVATIONS, same = false;
        /* an error every source shares (no credentials) is said in full once */
        for (size_t j = 0; j < i && s->error[0] && !same; j++)
            same = !strcmp(src[j].error, s->error);
        if (s->error[0])
            snprintf(line, sizeof(line), "prices: aws %s %s: degraded: %s; %s%s\n",
                     kind_name(s->kind), s->region, same ? "the error above" : s->error, read,
                     s->read_at > 0 ? (resv ? ", those reservations stay" : ", those prices stay")
                     : resv         ? "; prepaid nodes keep the ends their annotations give"
                                    : "; nodes keep the catalog's prices");
        else
            snprintf(line, sizeof(line), "prices: aws %s %s: %zu %s, %s\n", kind_name(s->kind),
                     s->region, s->n_prices, resv ? "reservations" : "prices", read);
        len = strlen(line);
        if (line[len - 1] != '\n')
            line[len - 1] = '\n';
        /* whole lines only: what does not fit is counted (the metrics have every source) */
        if (used + len + 80 >= n) {
            snprintf(out + used, n - used, "prices: aws: %zu more sources not shown here\n",
                     n_src - i);
            break;
        }
        memcpy(out + used, line, len + 1);
        used += len;
    }
    af_prices_unref(p);
}

/*
 * Prepaid capacity by node: accelerators (a CPU node counts as one) and their rate left
 * idle, so that avg_over_time(accelfit_prepaid_idle_accelerators[1d]) * 24 is the
 * accelerator-hours a reservation sat idle over the last day.
 */
static int render_prepaid(struct af_buf *o, const struct af_snapshot *snap)
{
    static const char *const names[] = {"accelfit_prepaid_accelerators",
                                        "accelfit_prepaid_idle_accelerators",
                                        "accelfit_prepaid_idle_usd_per_hour"};
    static const char *const helps[] = {
        "Accelerators of a prepaid node (an ODCR or Capacity Block; a CPU node counts 1).",
        "Of those, accelerators no pod holds.",
        "The reservation's rate of its idle accelerators: money paid for nothing, by the hour."};
    int rc = 0;

    for (int k = 0; k < 3 && !rc; k++) {
        rc = af_metrics_header(o, names[k], "gauge", helps[k]);
        for (size_t i = 0; snap && i < snap->n_nodes && !rc; i++) {
            const struct af_node_view *v = &snap->nodes[i];
            const struct af_node_info *ni = v->info;
            int64_t held, dev;
            double idle;
            if (!ni || ni->prepaid == AF_PREPAID_NONE)
                continue;
            dev = af_costs_devices(ni, &v->used, &held);
            if (dev <= 0) {
                dev = 1;
                held = v->npods - v->nsystem > 0;
            }
            idle = (double)(dev - held);
            rc = af_buf_printf(o, "%s{node=\"", names[k]);
            if (!rc)
                rc = af_metrics_label(o, ni->name);
            if (!rc)
                rc = af_buf_printf(o, "\",reservation=\"");
            if (!rc)
                rc = af_metrics_label(o, ni->reservation_id ? ni->reservation_id : "");
            if (!rc)
                rc = af_buf_printf(o, "\",type=\"%s\"} ", af_prepaid_name(ni->prepaid));
            if (!rc)
                rc = k == 0   ? af_buf_printf(o, "%lld\n", (long long)dev)
                     : k == 1 ? af_buf_printf(o, "%.0f\n", idle)
                              : af_buf_printf(o, "%.4f\n", ni->rate_known
                                                              ? ni->rate_usd_hr * idle / dev
                                                              : 0);
        }
    }
    return rc;
}

/* Nodes of the snapshot by where their price comes from. */
static int render_node_sources(struct af_buf *o, const struct af_snapshot *snap)
{
    static const char *const sources[] = {
        AF_PRICE_SOURCE_ANNOTATION,       AF_PRICE_SOURCE_AWS_SPOT,
        AF_PRICE_SOURCE_AWS,              AF_PRICE_SOURCE_AWS_CATALOG_SPOT,
        AF_PRICE_SOURCE_AWS_POLICY_SPOT,  AF_PRICE_SOURCE_CATALOG,
        AF_PRICE_SOURCE_CATALOG_SPOT,     AF_PRICE_SOURCE_POLICY_SPOT,
        AF_PRICE_SOURCE_OVERLAY,          AF_PRICE_SOURCE_SAVINGS_PLAN,
        AF_PRICE_SOURCE_PREPAID,          AF_PRICE_SOURCE_UNKNOWN};
    size_t count[AF_ARRAY_SIZE(sources)] = {0}, other_region = 0;
    int rc;

    for (size_t i = 0; snap && i < snap->n_nodes; i++) {
        const struct af_node_info *ni = snap->nodes[i].info;
        size_t k = AF_ARRAY_SIZE(sources) - 1;
        for (size_t j = 0; ni && ni->price_source && j < AF_ARRAY_SIZE(sources); j++)
            if (!strcmp(ni->price_source, sources[j]))
                k = j;
        count[k]++;
        other_region += ni && ni->price_other_region;
    }
    rc = af_metrics_header(o, "accelfit_nodes_by_price_source", "gauge",
                           "Nodes in the current snapshot by where their price comes from "
                           "(docs/pricing.md); unknown: no price.");
    for (size_t j = 0; j < AF_ARRAY_SIZE(sources) && !rc; j++)
        rc = af_buf_printf(o, "accelfit_nodes_by_price_source{source=\"%s\"} %zu\n", sources[j],
                           count[j]);
    if (!rc)
        rc = af_metrics_header(o, "accelfit_nodes_priced_from_other_region", "gauge",
                               "Nodes charged at the catalog's list price of another region, "
                               "no price of their own region being known.");
    if (!rc)
        rc = af_buf_printf(o, "accelfit_nodes_priced_from_other_region %zu\n", other_region);
    if (!rc)
        rc = render_prepaid(o, snap);
    return rc;
}

int af_service_render_prices(struct af_service *svc, const struct af_config *cfg,
                             struct af_buf *o)
{
    struct af_snapshot *snap = svc ? af_publisher_acquire(svc->pub) : NULL;
    struct af_prices *p = svc && svc->prices ? af_prices_holder_get(svc->prices) : NULL;
    const struct af_catalog *cat = cfg ? cfg->catalog : NULL;
    const struct af_price_source *src;
    double now = af_wall_time();
    size_t n_src;
    int rc = render_node_sources(o, snap);

    if (!rc && cat && cat->prices_as_of > 0)
        rc = af_metrics_header(o, "accelfit_catalog_prices_age_seconds", "gauge",
                               "Age of the catalog's list prices (its prices_as_of).");
    if (!rc && cat && cat->prices_as_of > 0)
        rc = af_buf_printf(o, "accelfit_catalog_prices_age_seconds %.0f\n",
                           now - cat->prices_as_of);
    src = af_prices_sources(p, &n_src);
    if (!rc && n_src) {
        static const struct {
            const char *name, *help;
        } g[] = {
            {"accelfit_aws_prices", "Prices the last successful read of a source gave."},
            {"accelfit_aws_prices_age_seconds",
             "Seconds since a source was last read successfully (absent: never)."},
            {"accelfit_aws_prices_up", "1 when the last attempt at a source succeeded."},
        };
        for (size_t k = 0; k < AF_ARRAY_SIZE(g) && !rc; k++) {
            rc = af_metrics_header(o, g[k].name, "gauge", g[k].help);
            for (size_t i = 0; i < n_src && !rc; i++) {
                const struct af_price_source *s = &src[i];
                if (k == 1 && s->read_at <= 0)
                    continue;
                rc = af_buf_printf(o, "%s{kind=\"%s\",region=\"", g[k].name, kind_name(s->kind));
                if (!rc)
                    rc = af_metrics_label(o, s->region);
                if (!rc)
                    rc = k == 0   ? af_buf_printf(o, "\"} %zu\n", s->n_prices)
                         : k == 1 ? af_buf_printf(o, "\"} %.0f\n", now - s->read_at)
                                  : af_buf_printf(o, "\"} %d\n", s->error[0] ? 0 : 1);
            }
        }
    }
    af_prices_unref(p);
    af_snapshot_unref(snap);
    return rc;
}
