/* SPDX-License-Identifier: Apache-2.0 */
/*
 * simulate --autoscale: the provisioner against cases written from Karpenter's documented
 * behaviour (the cheapest instance type of the allowed ones that satisfies the pod; the
 * heaviest NodePool first; taints and tolerations; preferences required first and relaxed;
 * empty nodes removed after consolidateAfter; a pod nothing can hold stays pending), the
 * NodePools loader, and one run of the binary on the shipped NodePools.
 */
#include <check.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/prefer.h"
#include "accelfit/simulate.h"
#include "support/support.h"

static struct af_config *cfg;

static void setup(void)
{
    struct af_error err;
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&cfg, NULL, NULL, &err), 0);
}

static void teardown(void)
{
    af_config_unref(cfg);
    cfg = NULL;
}

#define POOL(name, weight, reqs, taints)                                                       \
    "---\napiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: " name "}\nspec:\n" \
    "  weight: " weight "\n  template:\n    spec:\n      requirements:\n" reqs taints
#define REQ(key, op, values) "        - {key: " key ", operator: " op ", values: " values "}\n"
#define GPU_TAINTS "      taints: [{key: nvidia.com/gpu, value: \"true\", effect: NoSchedule}]\n"
#define FAMILY "karpenter.k8s.aws/instance-family"
#define CAPACITY "karpenter.sh/capacity-type"

static const char trace_text[] =
    "end: 10h\n"
    "pods:\n"
    "  - {name: one-gpu, namespace: a, requests: {cpu: 2, memory: 8Gi, nvidia.com/gpu: 1},\n"
    "     tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]}\n"
    "  - {name: four-gpu, namespace: a, requests: {cpu: 8, memory: 32Gi, nvidia.com/gpu: 4},\n"
    "     tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]}\n"
    "  - {name: untolerated, namespace: a, requests: {cpu: 2, memory: 8Gi, nvidia.com/gpu: 1}}\n"
    "  - {name: huge, namespace: a, requests: {cpu: 2, memory: 8Gi, nvidia.com/gpu: 64},\n"
    "     tolerations: [{operator: Exists}]}\n"
    "  - {name: cpu, namespace: a, requests: {cpu: 2, memory: 4Gi}}\n";

struct fixture {
    struct af_sim_nodepools np;
    struct af_sim_offerings of;
    struct af_sim_trace tr;
};

static void load(struct fixture *f, const char *pools)
{
    struct af_error err;

    memset(f, 0, sizeof(*f));
    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_sim_nodepools_load("pools.yaml", pools, strlen(pools), &f->np, &err) == 0,
                  "%s", err.text);
    af_sim_offerings_build(cfg, &f->np, &f->of);
    ck_assert_msg(af_codec_decode_trace("t.yaml", trace_text, strlen(trace_text), &f->tr, &err) ==
                      0,
                  "%s", err.text);
}

static void release(struct fixture *f)
{
    af_sim_offerings_release(&f->of);
    af_sim_nodepools_release(&f->np);
    af_sim_trace_release(&f->tr);
}

static const struct af_sim_pod *pod(struct fixture *f, const char *name)
{
    for (size_t i = 0; i < f->tr.n_pods; i++)
        if (!strcmp(f->tr.pods[i].info->name, name))
            return &f->tr.pods[i];
    ck_abort_msg("no pod %s", name);
    return NULL;
}

static const char *launch(struct fixture *f, const char *name, const struct af_preferences *p,
                          int *relaxed)
{
    long o = af_sim_provision(&f->of, pod(f, name), p, NULL, relaxed);
    return o < 0 ? NULL : f->of.v[o].type->name;
}

/* The cheapest on-demand catalog type of `families` with at least `gpus` GPUs. */
static const char *cheapest(const char *const *families, int gpus)
{
    const struct af_instance_type *best = NULL;

    for (size_t i = 0; i < cfg->catalog->n_types; i++) {
        const struct af_instance_type *t = &cfg->catalog->types[i];
        bool in = false;
        for (const char *const *f = families; *f; f++)
            in |= t->family && !strcmp(t->family, *f);
        if (in && t->accel_count >= gpus && t->price_usd_hr >= 0 &&
            (!best || t->price_usd_hr < best->price_usd_hr))
            best = t;
    }
    ck_assert_ptr_nonnull(best);
    return best->name;
}

/* Karpenter: "launches the cheapest instance type that satisfies the pod's requirements". */
START_TEST(test_cheapest_type_that_satisfies_the_requests)
{
    static const char *const families[] = {"g5", "g4dn", "p4d", NULL};
    struct fixture f;

    load(&f, POOL("gpu", "10", REQ(FAMILY, "In", "[g5, g4dn, p4d]") REQ(CAPACITY, "In",
                                                                        "[on-demand]"),
                  GPU_TAINTS));
    ck_assert_str_eq(launch(&f, "one-gpu", NULL, NULL), cheapest(families, 1));
    ck_assert_str_eq(launch(&f, "one-gpu", NULL, NULL), "g4dn.xlarge");
    ck_assert_str_eq(launch(&f, "four-gpu", NULL, NULL), cheapest(families, 4));
    /* The pool allows no CPU family: a CPU pod gets nothing here. */
    ck_assert_ptr_null(launch(&f, "cpu", NULL, NULL));
    release(&f);
}
END_TEST

/* Spot, where the pool allows it, priced as a spot node of the cluster is (the catalog's spot
 * estimate, else the policy's default discount): cheaper, so chosen. */
START_TEST(test_spot_offering_priced_at_the_catalog_estimate)
{
    struct fixture f;
    long o;

    load(&f, POOL("gpu", "10", REQ(FAMILY, "In", "[g4dn]") REQ(CAPACITY, "In", "[spot, on-demand]"),
                  GPU_TAINTS));
    o = af_sim_provision(&f.of, pod(&f, "one-gpu"), NULL, NULL, NULL);
    ck_assert_int_ge(o, 0);
    ck_assert(f.of.v[o].spot);
    /* The catalog's spot discount for the type, else the policy's default one. */
    ck_assert_msg(!strcmp(f.of.v[o].node.info->price_source, "catalog-spot") ||
                      !strcmp(f.of.v[o].node.info->price_source, "policy"),
                  "%s", f.of.v[o].node.info->price_source);
    ck_assert(f.of.v[o].node.info->hourly_usd < f.of.v[o].type->price_usd_hr);
    release(&f);
    /* No capacity-type requirement: Karpenter's default, on-demand only. */
    load(&f, POOL("gpu", "10", REQ(FAMILY, "In", "[g4dn]"), GPU_TAINTS));
    for (size_t i = 0; i < f.of.n; i++)
        ck_assert(!f.of.v[i].spot);
    release(&f);
}
END_TEST

/* Karpenter: NodePools are tried by weight, the heaviest first, even when a lighter one
 * has a cheaper type; a pool whose taints the pod does not tolerate is passed over. */
START_TEST(test_pool_weight_orders_and_taints_must_be_tolerated)
{
    struct fixture f;

    load(&f, POOL("cheap", "1", REQ(FAMILY, "In", "[g4dn]"), GPU_TAINTS)
                 POOL("heavy", "60", REQ(FAMILY, "In", "[g5]"), GPU_TAINTS)
                     POOL("heaviest-tainted", "90", REQ(FAMILY, "In", "[g6]"),
                          "      taints: [{key: dedicated, value: x, effect: NoSchedule}]\n"));
    ck_assert_str_eq(f.np.pools[0].name, "heaviest-tainted");
    ck_assert_str_eq(launch(&f, "one-gpu", NULL, NULL), "g5.xlarge");
    /* No toleration for nvidia.com/gpu: neither GPU pool can take it. */
    ck_assert_ptr_null(launch(&f, "untolerated", NULL, NULL));
    release(&f);
}
END_TEST

static void term(struct af_preferences *p, size_t k, int weight, const char *a, const char *b)
{
    memset(&p->terms[k], 0, sizeof(p->terms[k]));
    p->terms[k].weight = weight;
    p->terms[k].values[p->terms[k].n_values++] = a;
    if (b)
        p->terms[k].values[p->terms[k].n_values++] = b;
}

/*
 * Karpenter's scheduling docs, "Preferences": "Karpenter starts by treating preferred
 * affinities as required affinities when constructing requirements for a pod. When these
 * requirements cannot be met, the pod's preferences are relaxed one-at-a-time by ascending
 * weight (lowest weight is relaxed first), and the remaining requirements are tried again."
 */
START_TEST(test_preferences_required_then_relaxed_lightest_first)
{
    struct fixture f;
    struct af_preferences p;
    int relaxed = -1;

    load(&f, POOL("gpu", "10", REQ(FAMILY, "In", "[g4dn, g5, g6]") REQ(CAPACITY, "In",
                                                                       "[on-demand]"),
                  GPU_TAINTS));
    ck_assert_int_eq(f.of.relax, AF_SIM_RELAX_LIGHTEST_FIRST);
    memset(&p, 0, sizeof(p));
    p.key = AF_PREFER_LABEL_FAMILY;
    /* Both required: only g5 is in both, though g6 is cheaper and in the heavier one. */
    term(&p, 0, 100, "g5", "g6");
    term(&p, 1, 50, "g5", "g4dn");
    p.n_terms = 2;
    ck_assert_str_eq(launch(&f, "one-gpu", &p, &relaxed), "g5.xlarge");
    ck_assert_int_eq(relaxed, 0);
    /* Nothing meets both: the lightest goes first, the heavier one stays required. */
    term(&p, 1, 50, "g4dn", NULL);
    ck_assert_str_eq(launch(&f, "one-gpu", &p, &relaxed), "g6.xlarge");
    ck_assert_int_eq(relaxed, 1);
    /* The heaviest names a family no pool allows: all relaxed, the pod as written (a T4). */
    term(&p, 0, 100, "p5", NULL);
    term(&p, 1, 50, "p5", "g5");
    ck_assert_str_eq(launch(&f, "one-gpu", &p, &relaxed), "g4dn.xlarge");
    ck_assert_int_eq(relaxed, 2);
    /* A required NotIn is never relaxed. */
    p.n_terms = 0;
    p.not_in[0] = "g4dn";
    p.n_not_in = 1;
    ck_assert_str_eq(launch(&f, "one-gpu", &p, NULL), "g6.xlarge");
    /* Spot asked with the terms: only a spot offering meets them; none here, so relaxed. */
    p.n_not_in = 0;
    term(&p, 0, 100, "g5", NULL);
    p.n_terms = 1;
    p.spot = true;
    ck_assert_str_eq(launch(&f, "one-gpu", &p, &relaxed), "g4dn.xlarge");
    ck_assert_int_eq(relaxed, 1);
    release(&f);
}
END_TEST

/* Karpenter's code (requirements.go: "Select heaviest preference and treat as a requirement.
 * An outer loop will iteratively unconstrain them if unsatisfiable"): one term at a time,
 * the heaviest; dropped when nothing meets it (--relax-preferences heaviest-first). */
START_TEST(test_preferences_heaviest_first_as_the_code_does)
{
    struct fixture f;
    struct af_preferences p;
    int relaxed = -1;

    load(&f, POOL("gpu", "10", REQ(FAMILY, "In", "[g4dn, g5, g6]"), GPU_TAINTS));
    f.of.relax = AF_SIM_RELAX_HEAVIEST_FIRST;
    memset(&p, 0, sizeof(p));
    p.key = AF_PREFER_LABEL_FAMILY;
    term(&p, 0, 100, "g5", "g6");
    term(&p, 1, 50, "g5", "g4dn");
    p.n_terms = 2;
    /* Only the heaviest is required: its cheapest, g6 (the docs' rule gives g5). */
    ck_assert_str_eq(launch(&f, "one-gpu", &p, &relaxed), "g6.xlarge");
    ck_assert_int_eq(relaxed, 0);
    /* The heaviest unmeetable: the next heaviest alone (the docs' rule gives none). */
    term(&p, 0, 100, "p5", NULL);
    term(&p, 1, 50, "g5", NULL);
    ck_assert_str_eq(launch(&f, "one-gpu", &p, &relaxed), "g5.xlarge");
    ck_assert_int_eq(relaxed, 1);
    release(&f);
}
END_TEST

/* Karpenter's spec.limits: a pool whose nodes would pass a limit launches nothing more;
 * what a removed node allocated is free again. */
START_TEST(test_pool_limits_stop_launches)
{
    struct fixture f;
    struct af_resources used[2];

    load(&f, POOL("gpu", "10", REQ(FAMILY, "In", "[g4dn]") REQ(CAPACITY, "In", "[on-demand]"),
                  GPU_TAINTS "  limits: {nvidia.com/gpu: \"2\", cpu: 1000}\n"));
    ck_assert_int_eq(f.np.pools[0].limits.v[AF_RES_GPU], 2);
    ck_assert_int_eq(f.np.pools[0].limits.v[AF_RES_CPU], 1000 * 1000);
    memset(used, 0, sizeof(used));
    ck_assert_int_ge(af_sim_provision(&f.of, pod(&f, "one-gpu"), NULL, used, NULL), 0);
    /* Four GPUs in one node would pass the limit of two. */
    ck_assert_int_lt(af_sim_provision(&f.of, pod(&f, "four-gpu"), NULL, used, NULL), 0);
    used[0].v[AF_RES_GPU] = 2;
    ck_assert_int_lt(af_sim_provision(&f.of, pod(&f, "one-gpu"), NULL, used, NULL), 0);
    used[0].v[AF_RES_GPU] = 1;
    ck_assert_int_ge(af_sim_provision(&f.of, pod(&f, "one-gpu"), NULL, used, NULL), 0);
    release(&f);
}
END_TEST

/*
 * Limits free up when a node is removed, and Karpenter then launches for the pods they held
 * back. A CPU pool limited to 4 vCPUs: a (2 cpu, 0-1h) gets an m5.large (2 vCPUs); b (3 cpu,
 * from 10m) needs an m5.xlarge (4), which would pass the limit, so it waits; a leaves at 1h,
 * b does not fit the m5.large, which is removed at 1h00m30s: b's m5.xlarge then.
 */
START_TEST(test_limits_freed_by_a_removal_launch_again)
{
    static const char t[] = "end: 4h\npods:\n"
                            "  - {name: a, namespace: x, at: 0, duration: 1h, requests: {cpu: 2}}\n"
                            "  - {name: b, namespace: x, at: 10m, duration: 1h, requests: {cpu: 3}}\n";
    const char *pools = POOL("cpu", "1", REQ(FAMILY, "In", "[m5]") REQ(CAPACITY, "In", "[on-demand]"),
                             "  limits: {cpu: \"4\"}\n");
    struct af_sim_nodepools np;
    struct af_sim_offerings of;
    struct af_sim_trace tr;
    struct af_sim_cluster cl;
    struct af_sim_result res;
    struct af_sim_options opt = AF_SIM_OPTIONS_INIT;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_sim_nodepools_load("p", pools, strlen(pools), &np, &err), 0);
    af_sim_offerings_build(cfg, &np, &of);
    ck_assert_int_eq(af_codec_decode_trace("t", t, strlen(t), &tr, &err), 0);
    memset(&cl, 0, sizeof(cl));
    opt.autoscale = &of;
    af_sim_run(cfg, &cl, &tr, &opt, &res);
    for (int s = 0; s < 2; s++) {
        ck_assert_int_eq(res.side[s].launched, 2);
        ck_assert_int_eq(res.side[s].unplaced, 0);
        ck_assert_double_eq_tol(res.placements[s][1].placed_at, 3630, 1e-6);
        ck_assert_str_ne(res.placements[s][0].node, res.placements[s][1].node);
    }
    af_sim_result_release(&res);
    af_sim_trace_release(&tr);
    af_sim_offerings_release(&of);
    af_sim_nodepools_release(&np);
}
END_TEST

START_TEST(test_a_pod_nothing_can_hold_stays_pending)
{
    struct fixture f;
    struct af_sim_cluster cl;
    struct af_sim_result res;
    struct af_sim_options opt = AF_SIM_OPTIONS_INIT;

    load(&f, POOL("gpu", "10", REQ(FAMILY, "In", "[g4dn, g5, p4d]"), GPU_TAINTS));
    ck_assert_ptr_null(launch(&f, "huge", NULL, NULL));
    memset(&cl, 0, sizeof(cl));
    opt.autoscale = &f.of;
    af_sim_run(cfg, &cl, &f.tr, &opt, &res);
    for (int s = 0; s < 2; s++) {
        /* one-gpu and four-gpu get a node each; untolerated, huge and cpu wait. */
        ck_assert_int_eq(res.side[s].launched, 2);
        ck_assert_int_eq(res.side[s].placed, 2);
        ck_assert_int_eq(res.side[s].unplaced, 3);
    }
    {
        /* The table, JSON and HTML report carry the autoscaler's rows. */
        struct af_buf b = AF_BUF_INIT(0);
        ck_assert_int_eq(af_sim_render_html(&res, "t", &b), 0);
        ck_assert_ptr_nonnull(strstr(b.buf, "nodes launched"));
        ck_assert_ptr_nonnull(strstr(b.buf, "launched nodes removed after 30s empty"));
        af_buf_reset(&b);
        ck_assert_int_eq(af_sim_render_text(&res, &b), 0);
        ck_assert_ptr_nonnull(strstr(b.buf, "removed empty"));
        af_buf_reset(&b);
        ck_assert_int_eq(af_sim_render_json(&res, &b), 0);
        ck_assert_ptr_nonnull(strstr(b.buf, "\"launched\":2,"));
        af_buf_release(&b);
    }
    af_sim_result_release(&res);
    release(&f);
}
END_TEST

/*
 * Karpenter's consolidateAfter: a node empty that long is removed, and is paid until then.
 * One CPU pool; a pod 0h-1h, a second 1h00m20s-2h (the node still there: reused), a third
 * at 5h for 1h (a new node). Node 1: 0 to 2h00m30s; node 2: 5h to 6h00m30s.
 */
START_TEST(test_empty_node_removed_after_the_delay)
{
    static const char t[] = "end: 10h\npods:\n"
                            "  - {name: a, namespace: x, at: 0, duration: 1h, requests: {cpu: 1}}\n"
                            "  - {name: b, namespace: x, at: 3620, duration: 3580, requests: {cpu: 1}}\n"
                            "  - {name: c, namespace: x, at: 5h, duration: 1h, requests: {cpu: 1}}\n";
    struct af_sim_nodepools np;
    struct af_sim_offerings of;
    struct af_sim_trace tr;
    struct af_sim_cluster cl;
    struct af_sim_result res;
    struct af_sim_options opt = AF_SIM_OPTIONS_INIT;
    struct af_error err;
    const char *pools = POOL("cpu", "1", REQ(FAMILY, "In", "[m5]") REQ(CAPACITY, "In", "[on-demand]"), "");
    double price;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_sim_nodepools_load("p", pools, strlen(pools), &np, &err), 0);
    af_sim_offerings_build(cfg, &np, &of);
    ck_assert_str_eq(of.v[0].type->name, "m5.large");
    price = of.v[0].node.info->hourly_usd;
    ck_assert_int_eq(af_codec_decode_trace("t", t, strlen(t), &tr, &err), 0);
    memset(&cl, 0, sizeof(cl));
    opt.autoscale = &of;
    ck_assert(opt.consolidate_after == 30);
    af_sim_run(cfg, &cl, &tr, &opt, &res);
    for (int s = 0; s < 2; s++) {
        ck_assert_int_eq(res.side[s].launched, 2);
        ck_assert_int_eq(res.side[s].consolidated, 2);
        ck_assert_str_eq(res.placements[s][0].node, res.placements[s][1].node);
        ck_assert_str_ne(res.placements[s][0].node, res.placements[s][2].node);
        ck_assert_msg(fabs(res.side[s].cost_usd - price * (2 + 30.0 / 3600 + 1 + 30.0 / 3600)) <
                          1e-6,
                      "%f", res.side[s].cost_usd);
    }
    af_sim_result_release(&res);
    /* A longer delay keeps the node through the gap: one launch, paid 0h to 6h00m30s. */
    opt.consolidate_after = 4 * 3600;
    af_sim_run(cfg, &cl, &tr, &opt, &res);
    ck_assert_int_eq(res.side[0].launched, 1);
    ck_assert_int_eq(res.side[0].consolidated, 0);   /* still empty at the end: kept to 10h */
    ck_assert(fabs(res.side[0].cost_usd - price * 10) < 1e-6);
    af_sim_result_release(&res);
    af_sim_trace_release(&tr);
    af_sim_offerings_release(&of);
    af_sim_nodepools_release(&np);
}
END_TEST

/*
 * Random days on the shipped NodePools with the demo policy (preferences, tenants with
 * budgets, a spot-only tenant), from no nodes and from the demo cluster: the lower bound
 * stays below both schedulers, the series add up, and every tenant's spend the books keep
 * equals af_costs_compute over the cache, launched and removed nodes included.
 */
START_TEST(test_random_days_keep_the_books)
{
    static const char *const ns[] = {"serving", "vision", "batch", "ml-data"};
    static const char *const kinds[] = {"inference", "training", "batch-inference"};
    static const char *const params[] = {"1B", "7B", "13B", "70B"};
    unsigned seed = 77u + (unsigned)_i;
    struct af_buf tb = AF_BUF_INIT(0);
    struct af_sim_cluster cl;
    struct af_sim_trace tr;
    struct af_sim_result r;
    struct af_sim_nodepools np;
    struct af_sim_offerings of;
    struct af_sim_options opt = AF_SIM_OPTIONS_INIT;
    struct af_config *pcfg = NULL;
    struct af_error err;
    size_t clen, plen;
    char *ctext = af_test_read("manifests/demo-cluster.yaml", &clen);
    char *ptext = af_test_read("examples/karpenter-nodepools.yaml", &plen);

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_config_load(&pcfg, NULL, af_test_path("examples/traces/demo-policy.yaml"),
                                 &err) == 0,
                  "%s", err.text);
    ck_assert_int_eq(af_sim_nodepools_load("np", ptext, plen, &np, &err), 0);
    af_sim_offerings_build(pcfg, &np, &of);
    ck_assert_int_eq(af_buf_puts(&tb, "end: 12h\npods:\n"), 0);
    for (int i = 0; i < 40; i++) {
        int gpus = rand_r(&seed) % 4 == 0 ? 0 : 1 + rand_r(&seed) % 4;
        char gpu[40] = "";
        if (gpus)
            snprintf(gpu, sizeof(gpu), ", nvidia.com/gpu: %d", gpus);
        ck_assert_int_eq(
            af_buf_printf(&tb,
                          "  - {name: p%d, namespace: %s, labels: {accelfit.io/managed: \"true\"}, "
                          "at: %d, duration: %d, annotations: {accelfit.io/workload: %s, "
                          "accelfit.io/model-params: %s}, requests: {cpu: %d, memory: %dGi%s}, "
                          "tolerations: [{operator: Exists}]}\n",
                          i, ns[rand_r(&seed) % 4], rand_r(&seed) % 30000,
                          rand_r(&seed) % 5 ? 60 + rand_r(&seed) % 9000 : 30,
                          gpus ? kinds[rand_r(&seed) % 3] : "preprocessing",
                          params[rand_r(&seed) % 4], 1 + rand_r(&seed) % 8,
                          1 + rand_r(&seed) % 32, gpu),
            0);
    }
    ck_assert_msg(af_codec_decode_sim_cluster(pcfg, "c", ctext, clen, &cl, NULL, &err) == 0, "%s",
                  err.text);
    af_sim_cluster_drop_pods(&cl);
    if (_i % 2)
        af_sim_cluster_release(&cl);   /* from no nodes */
    ck_assert_msg(af_codec_decode_trace("t", tb.buf, tb.len, &tr, &err) == 0, "%s", err.text);
    opt.autoscale = &of;
    opt.check_spend = true;
    opt.consolidate_after = _i < 2 ? 30 : 600;
    af_sim_run(pcfg, &cl, &tr, &opt, &r);
    if (_i % 2)   /* from no nodes, every pod placed ran on a launched node */
        ck_assert_int_gt(r.side[AF_SIM_KUBE].launched, 0);
    ck_assert_int_gt(r.spend_checks, 0);
    ck_assert_int_eq(r.spend_mismatches, 0);
    ck_assert_double_le(r.side[AF_SIM_BOUND].cost_usd, r.side[AF_SIM_ACCELFIT].cost_usd + 1e-9);
    ck_assert_double_le(r.side[AF_SIM_BOUND].cost_usd, r.side[AF_SIM_KUBE].cost_usd + 1e-9);
    for (int s = 0; s < AF_SIM__SIDES; s++) {
        double sum = 0;
        for (int i = 0; i < r.buckets * AF_SIM_CLASSES; i++)
            sum += r.side[s].cost_series[i];
        ck_assert_double_eq_tol(sum, r.side[s].cost_usd, 1e-6);
        if (s < 2)
            ck_assert_int_le(r.side[s].consolidated, r.side[s].launched);
    }
    af_sim_result_release(&r);
    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
    af_sim_offerings_release(&of);
    af_sim_nodepools_release(&np);
    af_config_unref(pcfg);
    af_buf_release(&tb);
    free(ctext);
    free(ptext);
}
END_TEST

START_TEST(test_shipped_nodepools_load_in_weight_order)
{
    static const char *const order[] = {"gpu-inference", "gpu-training", "gpu-inference-spot",
                                         "cpu", "inferentia", "trainium"};
    struct af_sim_nodepools np;
    struct af_error err;
    size_t len;
    char *text = af_test_read("examples/karpenter-nodepools.yaml", &len);

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_sim_nodepools_load("np", text, len, &np, &err) == 0, "%s", err.text);
    ck_assert_uint_eq(np.n, AF_ARRAY_SIZE(order));
    for (size_t i = 0; i < np.n; i++)
        ck_assert_str_eq(np.pools[i].name, order[i]);
    ck_assert_uint_eq(np.pools[0].n_taints, 1);
    af_sim_nodepools_release(&np);
    free(text);
}
END_TEST

static const struct {
    const char *yaml;
    const char *want;
} bad_pools[] = {
    {POOL("p", "1", REQ("example.com/rack", "In", "[a]"), ""),
     "pools.yaml:10:17: requirement key 'example.com/rack' is not modelled"},
    {POOL("p", "1", "        - {key: karpenter.k8s.aws/instance-generation, operator: Gt, values: ['4']}\n", ""),
     "pools.yaml:10:66: operator 'Gt' is not modelled"},
    {POOL("p", "101", REQ(FAMILY, "In", "[g5]"), ""), "pools.yaml:6:11: "},
    {"---\napiVersion: karpenter.sh/v1beta1\nkind: NodePool\nmetadata: {name: p}\n",
     "pools.yaml:2:13: NodePool apiVersion 'karpenter.sh/v1beta1'"},
    {"apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass\n", "no NodePool"},
    {POOL("p", "1", REQ(FAMILY, "In", "[g5]"), "  limits: {ephemeral-storage: 1Ti}\n"),
     "pools.yaml:11:12: limit 'ephemeral-storage' is not modelled"},
    {POOL("p", "1", REQ(FAMILY, "In", "[g5]"), "  limits: {cpu: lots}\n"),
     "pools.yaml:11:17: limit cpu: 'lots' is not a quantity"},
    {POOL("p", "1", REQ(FAMILY, "In", "[g5]"), "      taints: [{key: a, effect: Sometimes}]\n"),
     "pools.yaml:11:33: taint effect 'Sometimes'"},
};

START_TEST(test_bad_nodepools_name_line_and_column)
{
    struct af_sim_nodepools np;
    struct af_error err;
    char msg[1024];

    memset(&err, 0, sizeof(err));
    ck_assert_int_ne(af_sim_nodepools_load("pools.yaml", bad_pools[_i].yaml,
                                           strlen(bad_pools[_i].yaml), &np, &err),
                     0);
    af_error_format(&err, msg, sizeof(msg));
    ck_assert_msg(strstr(msg, bad_pools[_i].want), "got '%s', want '%s'", msg, bad_pools[_i].want);
}
END_TEST

/* The shipped NodePools and the autoscaled demo day, through the binary (docs/simulate.md). */
START_TEST(test_autoscaled_day_through_the_binary)
{
    const char *argv[] = {"accelfit", "simulate", "--demo", "--no-nodes", "--workload",
                          af_test_path("examples/traces/autoscale-day.yaml"), "--policy",
                          af_test_path("examples/traces/demo-policy.yaml"), "--autoscale",
                          af_test_path("examples/karpenter-nodepools.yaml"), "--output", "json",
                          NULL};
    char *out = NULL, *err = NULL;
    json_t *j, *a, *k;
    json_error_t je;

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    j = json_loads(out, 0, &je);
    ck_assert_msg(j, "%s", je.text);
    a = json_object_get(json_object_get(j, "schedulers"), "accelfit");
    k = json_object_get(json_object_get(j, "schedulers"), "kube_scheduler");
    /* The 13B model: accelfit's tiers name classes that hold it, and the preference makes
     * Karpenter launch one (an L40S); Karpenter alone launches the cheapest GPU (a T4). */
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(a, "launched_by_class"), "nvidia-l40s")),
                     2);
    ck_assert_ptr_null(json_object_get(json_object_get(k, "launched_by_class"), "nvidia-l40s"));
    ck_assert_int_gt(json_integer_value(json_object_get(a, "launched_for_a_preference")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(k, "launched_for_a_preference")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(a, "unplaced")), 0);
    /* ... on which the 13B model does not fit: counted, and the headline says the two sides
     * did not do the same work */
    ck_assert_int_eq(json_integer_value(json_object_get(a, "model_misfits")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(k, "model_misfits")), 2);
    ck_assert_msg(strstr(json_string_value(json_object_get(j, "summary")) ?: "",
                         "but not for the same work: kube-scheduler placed 2 pods where the "
                         "model does not fit"),
                  "%s", json_string_value(json_object_get(j, "summary")));
    /* team-batch may use spot only: its preference names spot, which only the spot pool
     * meets; Karpenter alone takes the heavier on-demand pool. */
    for (size_t i = 0; i < json_array_size(json_object_get(j, "placements")); i++) {
        json_t *p = json_array_get(json_object_get(j, "placements"), i);
        const char *name = json_string_value(json_object_get(p, "name"));
        const char *an = json_string_value(json_object_get(json_object_get(p, "accelfit"), "node"));
        const char *kn =
            json_string_value(json_object_get(json_object_get(p, "kube_scheduler"), "node"));
        if (strncmp(name, "embed-batch-", 12))
            continue;
        ck_assert_msg(!strncmp(an, "gpu-inference-spot-", 19), "%s on %s", name, an);
        ck_assert_msg(strncmp(kn, "gpu-inference-spot-", 19), "%s on %s", name, kn);
    }
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(j, "autoscale"), "consolidate_after_s")),
                     30);
    json_decref(j);
    free(out);
    free(err);
}
END_TEST

START_TEST(test_usage)
{
    const char *argv[] = {"accelfit", "simulate", "--demo", "--no-nodes", "--workload-from-cluster",
                          NULL};
    const char *argv2[] = {"accelfit", "simulate", "--demo", "--workload", "x", "--autoscale", "x",
                           "--consolidate-after", "soon", NULL};
    const char *argv3[] = {"accelfit", "simulate", "--demo", "--workload", "x", "--autoscale", "x",
                           "--relax-preferences", "random", NULL};
    char *out = NULL, *err = NULL;

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 2);
    ck_assert_ptr_nonnull(strstr(err, "--no-nodes needs --autoscale"));
    free(out);
    free(err);
    ck_assert_int_eq(af_test_exec(argv2, NULL, &out, &err), 2);
    ck_assert_ptr_nonnull(strstr(err, "--consolidate-after: expected a duration"));
    free(out);
    free(err);
    ck_assert_int_eq(af_test_exec(argv3, NULL, &out, &err), 2);
    ck_assert_ptr_nonnull(strstr(err, "--relax-preferences: expected lightest-first"));
    free(out);
    free(err);
}
END_TEST

static Suite *af_autoscale_suite(void)
{
    Suite *s = suite_create("autoscale");
    TCase *tc = tcase_create("provisioner");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_cheapest_type_that_satisfies_the_requests);
    tcase_add_test(tc, test_spot_offering_priced_at_the_catalog_estimate);
    tcase_add_test(tc, test_pool_weight_orders_and_taints_must_be_tolerated);
    tcase_add_test(tc, test_preferences_required_then_relaxed_lightest_first);
    tcase_add_test(tc, test_preferences_heaviest_first_as_the_code_does);
    tcase_add_test(tc, test_pool_limits_stop_launches);
    tcase_add_test(tc, test_limits_freed_by_a_removal_launch_again);
    tcase_add_test(tc, test_a_pod_nothing_can_hold_stays_pending);
    tcase_add_test(tc, test_empty_node_removed_after_the_delay);
    tcase_add_loop_test(tc, test_random_days_keep_the_books, 0, 4);
    suite_add_tcase(s, tc);

    tc = tcase_create("inputs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_shipped_nodepools_load_in_weight_order);
    tcase_add_loop_test(tc, test_bad_nodepools_name_line_and_column, 0,
                        (int)AF_ARRAY_SIZE(bad_pools));
    tcase_add_test(tc, test_autoscaled_day_through_the_binary);
    tcase_add_test(tc, test_usage);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_autoscale_suite());
}
