/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `accelfit costs`: what a cluster's running pods cost per hour, by tenant,
 * namespace and class, and what its unrequested accelerators cost, as a table
 * for people or as the JSON of GET /costs. The cluster comes from a file
 * (--cluster, --demo) or from one full list of the API server, found as `accelfit
 * serve` and kubectl find it (af_kube_conn_resolve: --in-cluster, --kubeconfig,
 * $KUBECONFIG, in-cluster, ~/.kube/config), through the same reflector `accelfit
 * serve` runs, stopped once synced; the tenants and budgets from --policy
 * (docs/policy.md#tenants).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "accelfit/budget.h"
#include "accelfit/cache.h"
#include "accelfit/config.h"
#include "accelfit/aws.h"
#include "accelfit/costs.h"
#include "accelfit/decide.h"
#include "accelfit/prices.h"
#include "accelfit/kube.h"
#include "accelfit/page.h"
#include "accelfit/util.h"
#include "cli/cli.h"
#include "accelfit/banned.h"

static const char usage[] =
    "usage: accelfit costs [--cluster FILE | --demo | --kubeconfig FILE | --in-cluster]\n"
    "                      [options]\n"
    "\n"
    "Prints what the cluster's running pods cost per hour (each pod pays its share of\n"
    "its node's price: the largest fraction it requests of any resource), by tenant,\n"
    "namespace and class, against each tenant's budget, and the idle cost: allocatable\n"
    "accelerators no pod requested, at their share of the node price. Prepaid capacity\n"
    "(ODCRs, Capacity Blocks) is listed per reservation at its rate, used and idle.\n"
    "\n"
    "options:\n"
    "  --cluster FILE     a JSON or YAML List of Nodes and Pods (kubectl get nodes,pods -A -o yaml)\n"
    "  --demo             the embedded demo cluster (manifests/demo-cluster.yaml)\n"
    "  --kubeconfig FILE  list Nodes and Pods once from the API server of FILE\n"
    "  --in-cluster       use the pod's service account (KUBERNETES_SERVICE_HOST/PORT)\n"
    "                     With none of these, the API server is found as accelfit serve\n"
    "                     and kubectl find it: $KUBECONFIG, in-cluster, ~/.kube/config.\n"
    "  --context NAME     kubeconfig context to use (default: current-context); also\n"
    "                     applies to $KUBECONFIG and ~/.kube/config\n"
    "  --timeout S        give up when the list takes longer than S seconds (default 60);\n"
    "                     an API server that cannot be reached, or that refuses the\n"
    "                     credentials (401, 403), is said at once, with its address\n"
    "  --policy FILE      policy with the tenants (default: the embedded policy: one\n"
    "                     default tenant without a budget)\n"
    "  --catalog FILE     instance catalog (default: the embedded policies/catalog.yaml)\n"
    "  --output FORMAT    table (default) or json (the document of GET /costs); --json is\n"
    "                     short for --output json\n"
    "  --report FILE.html also write a self-contained HTML page: spend per tenant against\n"
    "                     budget, idle accelerator cost per class and node group, prepaid\n"
    "                     capacity used and idle\n"
    "  --aws-pricing      charge nodes AWS's prices, read once: the on-demand price of each\n"
    "                     node's region and the spot price of each spot node's zone\n"
    "                     (docs/pricing.md: credentials as accelfit serve --aws-pricing);\n"
    "                     a region AWS does not answer for keeps the catalog's prices\n"
    "  --aws-region R     the region to read when no node names one (default $AWS_REGION)\n"
    "  -h, --help         show this help\n"
    "\n"
    "Exit status: 0, 1 when the cluster cannot be read or the report written, 2 on bad\n"
    "usage or input.\n";

struct costs_opts {
    const char *cluster, *kubeconfig, *context, *policy, *catalog, *report;
    bool demo, json, in_cluster, aws_pricing;
    struct af_aws_options aws;
    int timeout_s;
};

static int bad(const char *fmt, const char *arg)
{
    fputs("accelfit costs: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs(" (see accelfit costs --help)\n", stderr);
    return 2;
}

/* 1 after --help, 0 to go on, 2 on bad usage. */
static int parse_args(int argc, char **argv, struct costs_opts *o)
{
    int sources = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **slot = NULL;

        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 1;
        }
        if (!strcmp(a, "--demo")) {
            o->demo = true;
            sources++;
            continue;
        }
        if (!strcmp(a, "--aws-pricing")) {
            o->aws_pricing = true;
            continue;
        }
        if (!strcmp(a, "--json")) {   /* --output json, as every command takes it */
            o->json = true;
            continue;
        }
        if (!strcmp(a, "--in-cluster")) {
            o->in_cluster = true;
            sources++;
            continue;
        }
        if (!strcmp(a, "--cluster"))
            slot = &o->cluster;
        else if (!strcmp(a, "--kubeconfig"))
            slot = &o->kubeconfig;
        else if (!strcmp(a, "--context"))
            slot = &o->context;
        else if (!strcmp(a, "--policy"))
            slot = &o->policy;
        else if (!strcmp(a, "--catalog"))
            slot = &o->catalog;
        else if (!strcmp(a, "--aws-region"))
            slot = &o->aws.region;
        else if (!strcmp(a, "--report"))
            slot = &o->report;
        else if (strcmp(a, "--output") && strcmp(a, "--timeout"))
            return bad(a[0] == '-' ? "unknown option '%s'" : "unexpected argument '%s'", a);
        if (!v)
            return bad("option '%s' needs a value", a);
        i++;
        if (slot) {
            *slot = v;
            sources += slot == &o->cluster || slot == &o->kubeconfig;
        } else if (!strcmp(a, "--output")) {
            if (strcmp(v, "table") && strcmp(v, "json"))
                return bad("--output must be table or json, not '%s'", v);
            o->json = !strcmp(v, "json");
        } else {
            int64_t t;
            if (af_parse_int64(v, 1, 3600, &t) != 0)
                return bad("--timeout must be whole seconds from 1 to 3600, not '%s'", v);
            o->timeout_s = (int)t;
        }
    }
    if (sources > 1)
        return bad("%s", "give at most one of --cluster FILE, --demo, --kubeconfig FILE and "
                         "--in-cluster");
    if (o->aws.region && !o->aws_pricing)
        return bad("%s", "--aws-region goes with --aws-pricing");
    if (o->context && (o->cluster || o->demo || o->in_cluster))
        return bad("%s", "--context names a kubeconfig context: it goes with --kubeconfig, or "
                         "with no source flag ($KUBECONFIG, ~/.kube/config)");
    return 0;
}

static int load_file(const struct costs_opts *o, struct af_config *cfg, struct af_snapshot **out)
{
    struct af_cache *cache = af_cli_load_cluster("costs", cfg, o->demo ? NULL : o->cluster);

    if (!cache)
        return 2;
    *out = af_cache_snapshot(cache);
    if (o->aws_pricing) {
        /* AWS's prices of the regions the file's nodes are in, then the nodes priced again */
        struct af_prices *book = af_cli_read_prices("costs", *out, &o->aws);
        struct af_price_inputs in = {.live = book};
        af_cache_reprice(cache, cfg->catalog, cfg->policy, &in);
        af_prices_unref(book);
        af_snapshot_unref(*out);
        *out = af_cache_snapshot(cache);
    }
    af_cache_free(cache);
    return 0;
}

/* One full list through the reflector, then stop: the snapshot it published once synced. */
static int load_kube(const struct costs_opts *o, struct af_config *cfg, struct af_snapshot **out)
{
    struct af_kube_conn *conn = NULL;
    struct af_kube_options kopt;
    struct af_config_holder holder;
    struct af_publisher pub;
    struct af_cache_status st;
    struct af_kube *kube = NULL;
    struct af_error err;
    struct timespec nap = {0, 50 * 1000 * 1000};
    struct af_prices_holder prices;
    uint64_t priced_after = 0;
    bool priced = false;
    int rc, waited_ms = 0;

    struct af_kube_source src = {o->kubeconfig, o->context, o->in_cluster};

    memset(&err, 0, sizeof(err));
    rc = af_kube_conn_resolve(&conn, &src, &err);
    if (rc != 0) {
        char msg[1024];
        af_error_format(&err, msg, sizeof(msg));
        fprintf(stderr, "accelfit costs: %s: %s\n",
                o->in_cluster   ? "cannot configure in-cluster access"
                : o->kubeconfig ? "cannot load kubeconfig"
                                : "no cluster to connect to (--cluster FILE and --demo read "
                                  "one without an API server)",
                msg[0] ? msg : af_strerror(rc));
        return 2;
    }
    memset(&st, 0, sizeof(st));
    af_config_holder_init(&holder, af_config_ref(cfg));
    af_publisher_init(&pub);
    af_kube_options_default(&kopt);
    kopt.overlays = false;   /* one list of nodes and pods: overlays are the server's (docs/pricing.md) */
    if (o->aws_pricing) {
        af_prices_holder_init(&prices);
        kopt.prices = &prices;
    }
    {
        /* One request first, as kubectl makes: an API server that cannot be used is said
         * once, with its address and why, not retried (the reflectors' retries are quiet
         * until it answered). */
        int level = af_log_level;
        char why[600];

        if (af_log_level < AF_LOG_ERROR)
            af_log_level = AF_LOG_ERROR;
        rc = af_kube_start(&kube, conn, &kopt, &holder, &pub, &st);
        if (rc != 0) {
            af_log_level = level;
            fprintf(stderr, "accelfit costs: cannot list the cluster: %s\n", af_strerror(rc));
            rc = 1;
            goto out;
        }
        rc = af_kube_probe(kube, o->timeout_s * 1000L, why, sizeof(why));
        if (rc != 0) {
            /* one line: the watch threads, failing the same way, stop before they could add
             * theirs (the log level comes back after af_kube_stop) */
            af_kube_stop(kube);
            kube = NULL;
            af_log_level = level;
            fprintf(stderr, "accelfit costs: %s\n", why);
            rc = 1;
            goto out;
        }
        af_log_level = level;
    }
    for (;;) {
        struct af_snapshot *s = af_publisher_acquire(&pub);
        if (s && s->synced && !o->aws_pricing) {
            *out = s;
            break;
        }
        if (s && s->synced && !priced) {
            /* listed: read AWS's prices of its regions, and price the nodes again */
            af_prices_holder_swap(&prices, af_cli_read_prices("costs", s, &o->aws));
            priced = true;
            if (af_kube_reprice(kube) == 0) {
                *out = s;
                break;
            }
            {   /* the snapshot current now may predate the new prices: wait for a later one */
                struct af_snapshot *cur = af_publisher_acquire(&pub);
                priced_after = cur ? cur->generation : s->generation;
                af_snapshot_unref(cur);
            }
        } else if (s && priced && s->generation > priced_after) {
            *out = s;   /* published after the new prices */
            break;
        }
        af_snapshot_unref(s);
        if (waited_ms >= o->timeout_s * 1000) {
            fprintf(stderr,
                    "accelfit costs: the API server did not list nodes and pods within %d s\n",
                    o->timeout_s);
            rc = 1;
            break;
        }
        nanosleep(&nap, NULL);
        waited_ms += 50;
    }
out:
    af_kube_stop(kube);
    af_publisher_destroy(&pub);
    af_config_holder_destroy(&holder);
    if (o->aws_pricing)
        af_prices_holder_destroy(&prices);
    return rc;
}

/* ---- the table ------------------------------------------------------------------------------ */

static const char *slot_name(int s)
{
    return s >= AF_CLASS__COUNT ? "unknown" : af_class_name((enum af_class)s);
}

/* Dollars with cents; never "-0.00". */
static const char *money(char *out, size_t n, double v)
{
    if (!isfinite(v)) {
        snprintf(out, n, "unknown");
        return out;
    }
    snprintf(out, n, "%.2f", v);
    if (!strcmp(out, "-0.00"))
        snprintf(out, n, "0.00");
    return out;
}

/* How long until `end` (unix time) from `now`: "45m", "3h20m", "5d4h"; "ended"; "-" unknown. */
static const char *time_left(char *out, size_t n, double end, double now)
{
    long long m;

    if (end <= 0) {
        snprintf(out, n, "-");
        return out;
    }
    if (end <= now) {
        snprintf(out, n, "ended");
        return out;
    }
    m = (long long)((end - now) / 60.0);
    if (m < 60)
        snprintf(out, n, "%lldm", m);
    else if (m < 48 * 60)
        snprintf(out, n, "%lldh%02lldm", m / 60, m % 60);
    else
        snprintf(out, n, "%lldd%lldh", m / (24 * 60), m % (24 * 60) / 60);
    return out;
}

/* "2 of 8": devices idle of those there are. */
static const char *of(char *out, size_t n, int64_t part, int64_t whole)
{
    snprintf(out, n, "%lld of %lld", (long long)part, (long long)whole);
    return out;
}

static int total_nodes(const struct af_costs *c)
{
    int nodes = 0;

    for (int s = 0; s < AF_COSTS_CLASSES; s++)
        nodes += c->classes[s].nodes;
    return nodes;
}

static void print_table(const struct af_costs *c, const struct af_policy *pol, uint64_t gen,
                        double now)
{
    char a[32], b[32], d[32], e[32];
    int nodes = total_nodes(c), priced = 0;

    for (int s = 0; s < AF_COSTS_CLASSES; s++)
        priced += c->classes[s].priced_nodes;
    printf("cluster: %d nodes cost $%s/h; running pods use $%s/h; idle accelerators $%s/h "
           "(snapshot %llu)\n",
           nodes, money(a, sizeof(a), c->price_usd_hr), money(b, sizeof(b), c->spend_usd_hr),
           money(d, sizeof(d), c->idle_usd_hr), (unsigned long long)gen);
    if (c->n_prepaid)
        printf("prepaid: %zu nodes reserved at $%s/h, paid whether used or not: $%s/h used, $%s/h "
               "idle (%s devices idle)\n",
               c->n_prepaid, money(a, sizeof(a), c->prepaid_usd_hr),
               money(b, sizeof(b), c->prepaid_used_usd_hr),
               money(d, sizeof(d), c->prepaid_idle_usd_hr),
               of(e, sizeof(e), c->prepaid_idle_devices, c->prepaid_devices));
    if (priced < nodes || c->pods_unpriced)
        printf("unpriced: %d nodes (their %d pods are not counted)\n", nodes - priced,
               c->pods_unpriced);

    printf("\n%-20s %10s %5s %10s %10s %5s%s\n", "TENANT", "BUDGET $/h", "MODE", "SPEND $/h",
           "LEFT $/h", "PODS", c->n_prepaid ? "  PREPAID $/h" : "");
    for (size_t i = 0; pol && i < pol->n_tenants && i < c->n_tenants; i++) {
        const struct af_tenant *t = &pol->tenants[i];
        double spend = c->tenants[i].spend_usd_hr;
        char pre[48] = "";   /* two spaces and a money() of at most 31 */
        if (c->n_prepaid)
            snprintf(pre, sizeof(pre), "  %11s", money(e, sizeof(e), c->tenants[i].prepaid_usd_hr));
        printf("%-20s %10s %5s %10s %10s %5d%s%s\n", t->name,
               t->has_budget ? money(a, sizeof(a), t->budget_usd_hr) : "-",
               t->has_budget ? af_over_budget_name(t->over_budget) : "-",
               money(b, sizeof(b), spend),
               t->has_budget ? money(d, sizeof(d), t->budget_usd_hr - spend) : "-",
               c->tenants[i].pods, pre,
               t->has_budget && spend > t->budget_usd_hr ? "  over budget" : "");
    }

    printf("\n%-20s %-20s %10s %5s\n", "NAMESPACE", "OWNED BY", "SPEND $/h", "PODS");
    for (size_t i = 0; i < c->n_ns; i++) {
        const struct af_cost_ns *n = &c->ns[i];
        printf("%-20s %-20s %10s %5d\n", n->ns,
               pol && n->owned && n->tenant >= 0 && (size_t)n->tenant < pol->n_tenants
                   ? pol->tenants[n->tenant].name
                   : "-",
               money(a, sizeof(a), n->spend_usd_hr), n->pods);
    }

    printf("\n%-12s %5s %10s %10s %10s %12s\n", "CLASS", "NODES", "PRICE $/h", "SPEND $/h",
           "IDLE $/h", "IDLE DEVICES");
    for (int s = 0; s < AF_COSTS_CLASSES; s++) {
        const struct af_cost_class *cl = &c->classes[s];
        char dev[32];
        if (!cl->nodes)
            continue;
        if (cl->devices)
            of(dev, sizeof(dev), cl->idle_devices, cl->devices);
        else
            snprintf(dev, sizeof(dev), "-");
        printf("%-12s %5d %10s %10s %10s %12s\n", slot_name(s), cl->nodes,
               money(a, sizeof(a), cl->price_usd_hr), money(b, sizeof(b), cl->spend_usd_hr),
               money(d, sizeof(d), cl->idle_usd_hr), dev);
    }

    printf("\n%-20s %-12s %12s %10s\n", "IDLE BY NODE GROUP", "CLASS", "IDLE DEVICES",
           "IDLE $/h");
    for (size_t i = 0; i < c->n_groups; i++) {
        const struct af_cost_group *g = &c->groups[i];
        char dev[32];
        printf("%-20s %-12s %12s %10s\n", g->group ? g->group : "-", slot_name(g->cls),
               of(dev, sizeof(dev), g->idle_devices, g->devices),
               money(a, sizeof(a), g->idle_usd_hr));
    }

    if (!c->n_prepaid)
        return;
    printf("\n%-20s %-14s %-12s %4s %4s %9s %9s %8s  %s\n", "PREPAID CAPACITY", "TYPE", "CLASS",
           "USED", "IDLE", "USED $/h", "IDLE $/h", "ENDS IN", "NODE");
    for (size_t i = 0; i < c->n_prepaid; i++) {
        const struct af_cost_prepaid *r = &c->prepaid[i];
        printf("%-20s %-14s %-12s %4lld %4lld %9s %9s %8s  %s\n",
               r->reservation ? r->reservation : "-", af_prepaid_name(r->type), slot_name(r->cls),
               (long long)(r->devices - r->idle_devices), (long long)r->idle_devices,
               r->rate_known ? money(a, sizeof(a), r->used_usd_hr) : "unknown",
               r->rate_known ? money(b, sizeof(b), r->idle_usd_hr) : "unknown",
               time_left(d, sizeof(d), r->end, now), r->node);
    }
}

/* ---- the report page ---------------------------------------------------------------------- */

static void cell(struct af_page *p, const char *text)
{
    af_page_put(p, "<td>");
    af_page_esc(p, text);
    af_page_put(p, "</td>");
}

static void head_row(struct af_page *p, const char *const *cols, size_t n)
{
    af_page_put(p, "<thead><tr>");
    for (size_t i = 0; i < n; i++) {
        af_page_put(p, "<th>");
        af_page_esc(p, cols[i]);
        af_page_put(p, "</th>");
    }
    af_page_put(p, "</tr></thead><tbody>\n");
}

static void report_tenants(struct af_page *p, const struct af_costs *c, const struct af_policy *pol)
{
    static const char *const cols[] = {"tenant",   "budget $/h", "mode",        "spend $/h",
                                       "left $/h", "pods",       "prepaid $/h", "spend / budget"};
    double scale = 0;
    char a[64], t[160];

    for (size_t i = 0; pol && i < pol->n_tenants && i < c->n_tenants; i++) {
        const struct af_tenant *tn = &pol->tenants[i];
        double v = tn->has_budget && tn->budget_usd_hr > c->tenants[i].spend_usd_hr
                       ? tn->budget_usd_hr
                       : c->tenants[i].spend_usd_hr;
        if (v > scale)
            scale = v;
    }
    af_page_put(p, "<h2>Spend per tenant against budget</h2>\n<table id=\"tenants\">");
    head_row(p, cols, AF_ARRAY_SIZE(cols));
    for (size_t i = 0; pol && i < pol->n_tenants && i < c->n_tenants; i++) {
        const struct af_tenant *tn = &pol->tenants[i];
        double spend = c->tenants[i].spend_usd_hr;
        bool over = tn->has_budget && spend > tn->budget_usd_hr;
        af_page_put(p, over ? "<tr class=\"over\"><th>" : "<tr><th>");
        af_page_esc(p, tn->name);
        af_page_put(p, "</th>");
        cell(p, tn->has_budget ? money(a, sizeof(a), tn->budget_usd_hr) : "-");
        cell(p, tn->has_budget ? af_over_budget_name(tn->over_budget) : "-");
        cell(p, money(a, sizeof(a), spend));
        cell(p, tn->has_budget ? money(a, sizeof(a), tn->budget_usd_hr - spend) : "-");
        snprintf(a, sizeof(a), "%d", c->tenants[i].pods);
        cell(p, a);
        cell(p, money(a, sizeof(a), c->tenants[i].prepaid_usd_hr));
        af_page_put(p, "<td class=\"bar\">");
        if (tn->has_budget)
            snprintf(t, sizeof(t), "%s: $%.2f/h of $%.2f/h%s", tn->name, spend, tn->budget_usd_hr,
                     over ? ", over budget" : "");
        else
            snprintf(t, sizeof(t), "%s: $%.2f/h, no budget", tn->name, spend);
        af_page_bar(p, scale > 0 ? 200.0 * spend / scale : 0,
                    tn->has_budget && scale > 0 ? 200.0 * tn->budget_usd_hr / scale : -1, 200,
                    over ? "#d62728" : "#3182bd", t);
        af_page_put(p, "</td></tr>\n");
    }
    af_page_put(p, "</tbody></table>\n");
}

static void report_idle(struct af_page *p, const struct af_costs *c)
{
    static const char *const cols[] = {"class",    "nodes",    "price $/h",   "spend $/h",
                                       "idle $/h", "idle devices", "of all idle"};
    static const char *const gcols[] = {"node group", "class", "idle devices", "idle $/h"};
    double scale = c->idle_usd_hr;   /* each class's bar: its share of all idle cost */
    char a[64], t[96];

    af_page_put(p, "<h2>Idle accelerator cost per class</h2>\n<table id=\"classes\">");
    head_row(p, cols, AF_ARRAY_SIZE(cols));
    for (int s = 0; s < AF_COSTS_CLASSES; s++) {
        const struct af_cost_class *cl = &c->classes[s];
        if (!cl->nodes)
            continue;
        af_page_put(p, "<tr><th>");
        af_page_esc(p, slot_name(s));
        af_page_put(p, "</th>");
        snprintf(a, sizeof(a), "%d", cl->nodes);
        cell(p, a);
        cell(p, money(a, sizeof(a), cl->price_usd_hr));
        cell(p, money(a, sizeof(a), cl->spend_usd_hr));
        cell(p, money(a, sizeof(a), cl->idle_usd_hr));
        cell(p, cl->devices ? of(a, sizeof(a), cl->idle_devices, cl->devices) : "-");
        af_page_put(p, "<td class=\"bar\">");
        snprintf(t, sizeof(t), "%s: $%.2f/h idle", slot_name(s), cl->idle_usd_hr);
        af_page_bar(p, scale > 0 ? 200.0 * cl->idle_usd_hr / scale : 0, -1, 200, "#e6550d", t);
        af_page_put(p, "</td></tr>\n");
    }
    af_page_put(p, "</tbody></table>\n<h2>Idle accelerators by node group</h2>\n"
                   "<table id=\"groups\">");
    head_row(p, gcols, AF_ARRAY_SIZE(gcols));
    for (size_t i = 0; i < c->n_groups; i++) {
        const struct af_cost_group *g = &c->groups[i];
        af_page_put(p, "<tr><th>");
        af_page_esc(p, g->group ? g->group : "-");
        af_page_put(p, "</th>");
        cell(p, slot_name(g->cls));
        cell(p, of(a, sizeof(a), g->idle_devices, g->devices));
        cell(p, money(a, sizeof(a), g->idle_usd_hr));
        af_page_put(p, "</tr>\n");
    }
    af_page_put(p, "</tbody></table>\n");
}

static void report_prepaid(struct af_page *p, const struct af_costs *c, double now)
{
    static const char *const cols[] = {"reservation", "type",     "class",    "node",
                                       "used",        "idle",     "rate $/h", "used $/h",
                                       "idle $/h",    "ends in"};
    char a[64], b[64], d[64], e[64];

    af_page_put(p, "<h2>Prepaid capacity</h2>\n");
    if (!c->n_prepaid) {
        af_page_put(p, "<p class=\"note\" id=\"prepaid\">No node runs on a Capacity Reservation "
                       "or Capacity Block.</p>\n");
        return;
    }
    af_page_putf(p, "<p class=\"summary\" id=\"prepaid-summary\">%zu nodes reserved at $%s/h, "
                    "paid whether used or not: $%s/h used, $%s/h idle (%s devices idle).</p>\n",
                 c->n_prepaid, money(a, sizeof(a), c->prepaid_usd_hr),
                 money(b, sizeof(b), c->prepaid_used_usd_hr),
                 money(d, sizeof(d), c->prepaid_idle_usd_hr),
                 of(e, sizeof(e), c->prepaid_idle_devices, c->prepaid_devices));
    af_page_put(p, "<table id=\"prepaid\">");
    head_row(p, cols, AF_ARRAY_SIZE(cols));
    for (size_t i = 0; i < c->n_prepaid; i++) {
        const struct af_cost_prepaid *r = &c->prepaid[i];
        af_page_put(p, "<tr><th>");
        af_page_esc(p, r->reservation ? r->reservation : "-");
        af_page_put(p, "</th>");
        cell(p, af_prepaid_name(r->type));
        cell(p, slot_name(r->cls));
        cell(p, r->node);
        snprintf(a, sizeof(a), "%lld", (long long)(r->devices - r->idle_devices));
        cell(p, a);
        snprintf(a, sizeof(a), "%lld", (long long)r->idle_devices);
        cell(p, a);
        cell(p, r->rate_known ? money(a, sizeof(a), r->rate_usd_hr) : "unknown");
        cell(p, r->rate_known ? money(a, sizeof(a), r->used_usd_hr) : "unknown");
        cell(p, r->rate_known ? money(a, sizeof(a), r->idle_usd_hr) : "unknown");
        cell(p, time_left(a, sizeof(a), r->end, now));
        af_page_put(p, "</tr>\n");
    }
    af_page_put(p, "</tbody></table>\n");
}

/* The report as one self-contained page (accelfit/page.h, shared with simulate's). */
static int render_report(const struct af_costs *c, const struct af_policy *pol,
                         const struct af_snapshot *snap, double now, struct af_buf *out)
{
    struct af_page p = {out, 0};
    char a[32], b[32], d[32], when[32], sub[160];
    time_t t = (time_t)now;
    struct tm tm;

    gmtime_r(&t, &tm);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M UTC", &tm);
    snprintf(sub, sizeof(sub), "%s, snapshot %llu", when, (unsigned long long)snap->generation);
    af_page_begin(&p, "accelfit costs", sub);
    af_page_putf(&p, "<p class=\"summary\" id=\"summary\">%d nodes cost $%s/h; running pods use "
                     "$%s/h; idle accelerators $%s/h.</p>\n",
                 total_nodes(c), money(a, sizeof(a), c->price_usd_hr),
                 money(b, sizeof(b), c->spend_usd_hr), money(d, sizeof(d), c->idle_usd_hr));
    report_tenants(&p, c, pol);
    report_idle(&p, c);
    report_prepaid(&p, c, now);
    af_page_put(&p, "<p class=\"note\">Each running pod pays its share of its node's hourly price: "
                    "the largest fraction it requests of any resource the node offers. Idle cost "
                    "is the allocatable accelerators no pod requested, at their share of the "
                    "node's price, at most what the node's pods leave unpaid. A prepaid node "
                    "(a Capacity Reservation or Capacity Block) is paid whether used or not: "
                    "under prices.prepaid: marginal its pods add nothing to their tenant's spend "
                    "and budget, and the prepaid column is their share of its rate; its price "
                    "and idle cost here are at that rate.</p>\n");
    return af_page_end(&p);
}

static int write_report(const char *path, const struct af_costs *c, const struct af_policy *pol,
                        const struct af_snapshot *snap)
{
    struct af_buf page = AF_BUF_INIT(0);
    FILE *f = NULL;
    int rc = render_report(c, pol, snap, af_wall_time(), &page);

    if (rc != 0) {
        fprintf(stderr, "accelfit costs: cannot render the report\n");
        af_buf_release(&page);
        return 1;
    }
    errno = 0;
    f = fopen(path, "w");
    if (f) {
        bool ok = fwrite(page.buf, 1, page.len, f) == page.len;
        int why = errno;
        if (fclose(f) != 0 || !ok) {
            errno = ok ? errno : why;
            f = NULL;
        }
    }
    if (!f) {
        fprintf(stderr,
                "accelfit costs: cannot write the report '%s': %s (give --report a file in a "
                "directory you can write)\n",
                path, strerror(errno ? errno : EIO));
        af_buf_release(&page);
        return 1;
    }
    af_buf_release(&page);
    return 0;
}

/* "prices: 3 nodes at AWS's prices, 2 at the catalog's list prices, ..." */
static void print_price_sources(const struct af_snapshot *snap)
{
    size_t aws = 0, catalog = 0, annotated = 0, unknown = 0;

    for (size_t i = 0; i < snap->n_nodes; i++) {
        const char *src = snap->nodes[i].info->price_source;
        if (!snap->nodes[i].info->price_known)
            unknown++;
        else if (!strncmp(src, "aws", 3))
            aws++;
        else if (!strcmp(src, AF_PRICE_SOURCE_ANNOTATION))
            annotated++;
        else
            catalog++;
    }
    printf("prices: %zu nodes at AWS's prices, %zu at the catalog's list prices, %zu annotated, "
           "%zu unknown (accelfit serve's /explain says each node's source and age)\n",
           aws, catalog, annotated, unknown);
}

static int run(const struct costs_opts *o, struct af_config *cfg, struct af_snapshot *snap)
{
    struct af_costs *c = af_costs_compute(cfg->policy, snap->nodes, snap->n_nodes, snap->pods,
                                          snap->n_pods);
    int rc = 0;

    if (o->json) {
        struct af_buf out = AF_BUF_INIT(0);
        if (af_costs_render_json(c, cfg->policy, snap, &out) != 0) {
            fprintf(stderr, "accelfit costs: cannot render the report\n");
            rc = 1;
        } else {
            fputs(out.buf, stdout);
        }
        af_buf_release(&out);
    } else {
        print_table(c, cfg->policy, snap->generation, af_wall_time());
        if (o->aws_pricing)
            print_price_sources(snap);
    }
    if (!rc && o->report) {
        rc = write_report(o->report, c, cfg->policy, snap);
        if (!rc && !o->json)
            printf("\nreport: %s\n", o->report);
    }
    af_costs_unref(c);
    return rc;
}

int af_cmd_costs(int argc, char **argv)
{
    struct costs_opts o;
    struct af_config *cfg = NULL;
    struct af_snapshot *snap = NULL;
    struct af_error err;
    int rc;

    memset(&o, 0, sizeof(o));
    o.timeout_s = 60;
    rc = parse_args(argc, argv, &o);
    if (rc)
        return rc == 1 ? 0 : rc;
    memset(&err, 0, sizeof(err));
    rc = af_config_load(&cfg, o.catalog, o.policy, &err);
    if (rc != 0) {
        char msg[1024];
        af_error_format(&err, msg, sizeof(msg));
        fprintf(stderr, "accelfit costs: cannot load configuration: %s\n",
                msg[0] ? msg : af_strerror(rc));
        return 2;
    }
    rc = o.cluster || o.demo ? load_file(&o, cfg, &snap) : load_kube(&o, cfg, &snap);
    if (!rc)
        rc = run(&o, cfg, snap);
    af_snapshot_unref(snap);
    af_config_unref(cfg);
    return rc;
}
