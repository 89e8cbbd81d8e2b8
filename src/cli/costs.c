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
#include "accelfit/util.h"
#include "cli/cli.h"

static const char usage[] =
    "usage: accelfit costs [--cluster FILE | --demo | --kubeconfig FILE | --in-cluster]\n"
    "                      [options]\n"
    "\n"
    "Prints what the cluster's running pods cost per hour (each pod pays its share of\n"
    "its node's price: the largest fraction it requests of any resource), by tenant,\n"
    "namespace and class, against each tenant's budget, and the idle cost: allocatable\n"
    "accelerators no pod requested, at their share of the node price.\n"
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
    "  --aws-pricing      charge nodes AWS's prices, read once: the on-demand price of each\n"
    "                     node's region and the spot price of each spot node's zone\n"
    "                     (docs/pricing.md: credentials as accelfit serve --aws-pricing);\n"
    "                     a region AWS does not answer for keeps the catalog's prices\n"
    "  --aws-region R     the region to read when no node names one (default $AWS_REGION)\n"
    "  -h, --help         show this help\n"
    "\n"
    "Exit status: 0, 1 when the cluster cannot be read, 2 on bad usage or input.\n";

struct costs_opts {
    const char *cluster, *kubeconfig, *context, *policy, *catalog;
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
        af_log_level = level;
        if (rc != 0) {
            fprintf(stderr, "accelfit costs: %s\n", why);
            rc = 1;
            goto out;
        }
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

static void print_table(const struct af_costs *c, const struct af_policy *pol, uint64_t gen)
{
    char a[32], b[32], d[32];
    int nodes = 0, priced = 0;

    for (int s = 0; s < AF_COSTS_CLASSES; s++) {
        nodes += c->classes[s].nodes;
        priced += c->classes[s].priced_nodes;
    }
    printf("cluster: %d nodes cost $%s/h; running pods use $%s/h; idle accelerators $%s/h "
           "(snapshot %llu)\n",
           nodes, money(a, sizeof(a), c->price_usd_hr), money(b, sizeof(b), c->spend_usd_hr),
           money(d, sizeof(d), c->idle_usd_hr), (unsigned long long)gen);
    if (priced < nodes || c->pods_unpriced)
        printf("unpriced: %d nodes (their %d pods are not counted)\n", nodes - priced,
               c->pods_unpriced);

    printf("\n%-20s %10s %5s %10s %10s %5s\n", "TENANT", "BUDGET $/h", "MODE", "SPEND $/h",
           "LEFT $/h", "PODS");
    for (size_t i = 0; pol && i < pol->n_tenants && i < c->n_tenants; i++) {
        const struct af_tenant *t = &pol->tenants[i];
        double spend = c->tenants[i].spend_usd_hr;
        printf("%-20s %10s %5s %10s %10s %5d%s\n", t->name,
               t->has_budget ? money(a, sizeof(a), t->budget_usd_hr) : "-",
               t->has_budget ? af_over_budget_name(t->over_budget) : "-",
               money(b, sizeof(b), spend),
               t->has_budget ? money(d, sizeof(d), t->budget_usd_hr - spend) : "-",
               c->tenants[i].pods, t->has_budget && spend > t->budget_usd_hr ? "  over budget" : "");
    }

    printf("\n%-20s %-20s %10s %5s\n", "NAMESPACE", "OWNED BY", "SPEND $/h", "PODS");
    for (size_t i = 0; i < c->n_ns; i++) {
        const struct af_cost_ns *e = &c->ns[i];
        printf("%-20s %-20s %10s %5d\n", e->ns,
               pol && e->owned && e->tenant >= 0 && (size_t)e->tenant < pol->n_tenants
                   ? pol->tenants[e->tenant].name
                   : "-",
               money(a, sizeof(a), e->spend_usd_hr), e->pods);
    }

    printf("\n%-12s %5s %10s %10s %10s %12s\n", "CLASS", "NODES", "PRICE $/h", "SPEND $/h",
           "IDLE $/h", "IDLE DEVICES");
    for (int s = 0; s < AF_COSTS_CLASSES; s++) {
        const struct af_cost_class *cl = &c->classes[s];
        char dev[32];
        if (!cl->nodes)
            continue;
        if (cl->devices)
            snprintf(dev, sizeof(dev), "%lld of %lld", (long long)cl->idle_devices,
                     (long long)cl->devices);
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
        snprintf(dev, sizeof(dev), "%lld of %lld", (long long)g->idle_devices,
                 (long long)g->devices);
        printf("%-20s %-12s %12s %10s\n", g->group ? g->group : "-", slot_name(g->cls), dev,
               money(a, sizeof(a), g->idle_usd_hr));
    }
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
        print_table(c, cfg->policy, snap->generation);
        if (o->aws_pricing)
            print_price_sources(snap);
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
