/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_costs: spend and idle cost (af_costs_compute) at EKS scale, in process.
 *
 * Builds N nodes (p4d, g5.12xlarge, trn1, CPU; a third of them spot, in 40 node groups)
 * and P bound pods in 200 namespaces, under a policy of 50 tenants owning 2 namespaces
 * each (the other namespaces fall to the default tenant, half of those by label), then
 * times one full computation: what the service pays once per cache change, and never
 * per request. Usage: bench_costs [nodes] [pods] [rounds]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accelfit/cache.h"
#include "accelfit/config.h"
#include "accelfit/costs.h"
#include "accelfit/util.h"

static double now_ms(void)
{
    return (double)af_now_ns() / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static struct af_policy *tenants_policy(void)
{
    struct af_buf b = AF_BUF_INIT(0);
    struct af_policy *p = NULL;
    struct af_error err;

    af_assert(af_buf_add(&b, af_embedded_policy_yaml, af_embedded_policy_yaml_len) == 0);
    af_assert(af_buf_puts(&b, "\ntenants:\n") == 0);
    for (int t = 0; t < 50; t++)
        af_assert(af_buf_printf(&b,
                                "  - name: team-%d\n    namespaces: [ns-%d, ns-%d]\n"
                                "    budget_usd_per_hour: 100\n    over_budget: hard\n",
                                t, 2 * t, 2 * t + 1) == 0);
    memset(&err, 0, sizeof(err));
    if (af_policy_load_mem(&p, "bench", b.buf, b.len, &err) != 0) {
        fprintf(stderr, "bench_costs: %s\n", err.text);
        exit(1);
    }
    af_buf_release(&b);
    return p;
}

int main(int argc, char **argv)
{
    int n_nodes = argc > 1 ? atoi(argv[1]) : 5000;   /* NOLINT: bench arguments */
    int n_pods = argc > 2 ? atoi(argv[2]) : 150000;
    int rounds = argc > 3 ? atoi(argv[3]) : 20;
    static const struct {
        const char *type;
        enum af_class cls;
        enum af_res res;
        int devices;
        double price;
    } kinds[] = {
        {"p4d.24xlarge", AF_CLASS_NVIDIA_A100, AF_RES_GPU, 8, 21.957642},
        {"g5.12xlarge", AF_CLASS_NVIDIA_A10G, AF_RES_GPU, 4, 5.672},
        {"trn1.32xlarge", AF_CLASS_TRAINIUM1, AF_RES_NEURON, 16, 21.5},
        {"m6i.4xlarge", AF_CLASS_CPU, AF_RES_PODS, 0, 0.768},
    };
    struct af_policy *pol = tenants_policy();
    struct af_cache *cache = af_cache_new();
    struct af_snapshot *snap;
    double *ms, t0, sum = 0;
    char name[64];

    for (int i = 0; i < n_nodes; i++) {
        struct af_node_info *n = af_node_info_new();
        int k = i % 4;
        snprintf(name, sizeof(name), "node-%06d", i);
        n->name = af_xstrdup(name);
        n->instance_type = af_xstrdup(kinds[k].type);
        n->cls = kinds[k].cls;
        n->spot = i % 3 == 0;
        n->price_known = true;
        n->hourly_usd = kinds[k].price * (n->spot ? 0.4 : 1);
        snprintf(name, sizeof(name), "group-%d", i % 40);
        n->node_group = af_xstrdup(name);
        n->allocatable.v[AF_RES_CPU] = 96000;
        n->allocatable.v[AF_RES_MEMORY] = 1100ll << 30;
        n->allocatable.v[AF_RES_PODS] = 110;
        if (kinds[k].devices)
            n->allocatable.v[kinds[k].res] = kinds[k].devices;
        af_cache_upsert_node(cache, n);
    }
    for (int i = 0; i < n_pods; i++) {
        struct af_pod_info *p = af_pod_info_new();
        int node = i % n_nodes, k = node % 4;
        snprintf(name, sizeof(name), "ns-%d", i % 200);
        p->ns = af_xstrdup(name);
        snprintf(name, sizeof(name), "worker-%d", i);
        p->name = af_xstrdup(name);
        snprintf(name, sizeof(name), "pod-uid-%08d", i);
        p->uid = af_xstrdup(name);
        snprintf(name, sizeof(name), "node-%06d", node);
        p->node_name = af_xstrdup(name);
        if (i % 2)
            p->tenant = af_xasprintf("team-%d", i % 50);
        p->requests.v[AF_RES_CPU] = 500;
        p->requests.v[AF_RES_MEMORY] = 2ll << 30;
        if (kinds[k].devices && (i / n_nodes) < kinds[k].devices / 2)
            p->requests.v[kinds[k].res] = 1;
        af_cache_upsert_pod(cache, p);
    }
    af_cache_set_synced(cache, true);
    snap = af_cache_snapshot(cache);
    ms = af_xcalloc((size_t)rounds, sizeof(*ms));
    for (int r = 0; r < rounds; r++) {
        struct af_costs *c;
        t0 = now_ms();
        c = af_costs_compute(pol, snap->nodes, snap->n_nodes, snap->pods, snap->n_pods);
        ms[r] = now_ms() - t0;
        sum += c->spend_usd_hr;
        af_costs_unref(c);
    }
    qsort(ms, (size_t)rounds, sizeof(*ms), cmp_double);
    printf("bench_costs: %d nodes, %d pods, 50 tenants, 200 namespaces, %d rounds\n", n_nodes,
           n_pods, rounds);
    printf("  af_costs_compute p50 %.2f ms, p99 %.2f ms (spend $%.2f/h)\n", ms[rounds / 2],
           ms[rounds - 1 - rounds / 100], sum / rounds);
    af_free(ms);
    af_snapshot_unref(snap);
    af_cache_free(cache);
    af_policy_free(pol);
    return 0;
}
