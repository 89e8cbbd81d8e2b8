/* SPDX-License-Identifier: Apache-2.0 */
/*
 * accelfit simulate: the books on a tiny trace whose every dollar is worked out
 * by hand below; kube-scheduler's scores against upstream's arithmetic by hand;
 * numFeasibleNodesToFind; the lower bound against both schedulers on random
 * traces; the HTML report's shape and numbers; the scan missing a cheaper node;
 * a real cluster's pods as a trace; and the command line, bad input included.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/config.h"
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

/*
 * Four nodes with prices set by annotation (so the arithmetic below does not depend on
 * the catalog): two CPU nodes, one A10G, one 8 x A100; the GPU nodes are tainted.
 */
#define NODE(name, type, price, cpu, mem, gpu, taint)                                            \
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"" name "\",\"labels\":{\"node.kubernetes.io/"  \
    "instance-type\":\"" type "\"},\"annotations\":{\"accelfit.io/hourly-price\":\"" price      \
    "\"}},\"spec\":{" taint "},\"status\":{\"allocatable\":{\"cpu\":\"" cpu "\",\"memory\":\"" \
    mem "\",\"pods\":\"110\"" gpu "}}}"
#define GPU_TAINT "\"taints\":[{\"key\":\"nvidia.com/gpu\",\"value\":\"true\",\"effect\":\"NoSchedule\"}]"

static const char tiny_cluster[] =
    "{\"kind\":\"List\",\"items\":["
    NODE("cpu-small", "m5.xlarge", "0.20", "4", "16Gi", "", "") ","
    NODE("cpu-big", "c6i.4xlarge", "0.70", "16", "32Gi", "", "") ","
    NODE("gpu-a10g", "g5.xlarge", "1.00", "4", "16Gi", ",\"nvidia.com/gpu\":\"1\"", GPU_TAINT) ","
    NODE("gpu-a100", "p4d.24xlarge", "32.00", "96", "1152Gi", ",\"nvidia.com/gpu\":\"8\"",
         GPU_TAINT)
    "]}";

/*
 * The trace, 10 hours:
 *   prep      2 cpu, 4Gi, 0h-4h (team-a)
 *   infer     1 GPU, 2 cpu, 8Gi, inference, 1h-6h (team-b)
 *   prep2     15 cpu, 4Gi, arrives 2h, runs 1h (team-a)
 *   too-big   20 cpu: no node holds it (team-a)
 *
 * kube-scheduler (LeastAllocated + BalancedAllocation + 3 x TaintToleration):
 *   prep   cpu-small 62 + 87 + 300 = 449, cpu-big 87 + 100 + 300 = 487 -> cpu-big
 *   infer  gpu-a10g 50 + 100 + 300 = 450, gpu-a100 98 + 99 + 300 = 497 -> gpu-a100
 *   prep2  cpu-big has 14 cpu left: waits until prep leaves at 4h, runs 4h-5h on cpu-big
 *   cost   cpu-big 5h x 0.70 = 3.50, gpu-a100 5h x 32 = 160.00: 163.50
 *   idle   gpu-a100: 7 of 8 GPUs idle for 5h: 32 x 7/8 x 5 = 140.00
 * accelfit (its score x 5 x 10 added):
 *   prep   cpu-small (bin-packs, cheapest): 4h x 0.20 = 0.80
 *   infer  gpu-a10g (tier 1 has room: the A100 is refused): 5h x 1.00 = 5.00
 *   prep2  cpu-big at 2h, 1h: 0.70
 *   cost   6.50; idle 0
 * lower bound (mean fraction of what the node is for, cheapest node):
 *   prep   cpu-small (2/4 + 4/16)/2 x 0.20 = 0.075/h x 4h = 0.30
 *   infer  gpu-a10g 1/1 x 1.00 x 5h = 5.00
 *   prep2  cpu-big (15/16 + 4/32)/2 x 0.70 = 0.371875/h x 1h = 0.371875
 *   total  5.671875
 * tenants (largest fraction x price x time):
 *   team-a accelfit 0.5 x 0.20 x 4 + 15/16 x 0.70 x 1 = 0.40 + 0.65625 = 1.05625
 *          kube     0.125 x 0.70 x 4 + 0.65625 = 1.00625
 *   team-b accelfit 1 x 1.00 x 5 = 5.00; kube 1/8 x 32 x 5 = 20.00
 * waiting: too-big 8h on both sides; prep2 2h under kube.
 */
static const char tiny_trace[] =
    "end: 10h\n"
    "pods:\n"
    "  - {name: prep, namespace: a, tenant: team-a, at: 0, duration: 4h,\n"
    "     annotations: {accelfit.io/workload: preprocessing}, requests: {cpu: 2, memory: 4Gi}}\n"
    "  - name: infer\n"
    "    namespace: b\n"
    "    tenant: team-b\n"
    "    at: 1h\n"
    "    duration: 5h\n"
    "    annotations: {accelfit.io/workload: inference, accelfit.io/model-params: 1B}\n"
    "    requests: {cpu: 2, memory: 8Gi, nvidia.com/gpu: 1}\n"
    "    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n"
    "  - {name: prep2, namespace: a, tenant: team-a, at: 2h, duration: 1h,\n"
    "     annotations: {accelfit.io/workload: preprocessing}, requests: {cpu: 15, memory: 4Gi}}\n"
    "  - {name: too-big, namespace: a, tenant: team-a, at: 2h, duration: 1h,\n"
    "     requests: {cpu: 20, memory: 4Gi}}\n";

static void load_tiny(struct af_sim_cluster *cl, struct af_sim_trace *tr)
{
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_codec_decode_sim_cluster(cfg, "tiny", tiny_cluster, strlen(tiny_cluster), cl,
                                              NULL, &err) == 0,
                  "%s", err.text);
    ck_assert_msg(af_codec_decode_trace("tiny.yaml", tiny_trace, strlen(tiny_trace), tr, &err) == 0,
                  "%s", err.text);
}

static double cents(double usd)
{
    return round(usd * 100) / 100;
}

static const struct af_sim_tenant *tenant(const struct af_sim_result *r, const char *name)
{
    for (size_t i = 0; i < r->n_tenants; i++)
        if (!strcmp(r->tenants[i].name, name))
            return &r->tenants[i];
    ck_abort_msg("no tenant %s", name);
    return NULL;
}

static const struct af_sim_placement *placed(const struct af_sim_result *r, int side,
                                             const char *name)
{
    for (size_t i = 0; i < r->n_pods; i++)
        if (!strcmp(r->placements[side][i].name, name))
            return &r->placements[side][i];
    ck_abort_msg("no pod %s", name);
    return NULL;
}

START_TEST(test_tiny_trace_costs_to_the_cent)
{
    struct af_sim_cluster cl;
    struct af_sim_trace tr;
    struct af_sim_result r;
    struct af_sim_options opt = AF_SIM_OPTIONS_INIT;
    const struct af_sim_side_stats *a, *k, *b;

    load_tiny(&cl, &tr);
    af_sim_run(cfg, &cl, &tr, &opt, &r);
    a = &r.side[AF_SIM_ACCELFIT];
    k = &r.side[AF_SIM_KUBE];
    b = &r.side[AF_SIM_BOUND];

    ck_assert_str_eq(placed(&r, AF_SIM_KUBE, "prep")->node, "cpu-big");
    ck_assert_str_eq(placed(&r, AF_SIM_KUBE, "infer")->node, "gpu-a100");
    ck_assert_str_eq(placed(&r, AF_SIM_ACCELFIT, "prep")->node, "cpu-small");
    ck_assert_str_eq(placed(&r, AF_SIM_ACCELFIT, "infer")->node, "gpu-a10g");
    ck_assert_double_eq_tol(placed(&r, AF_SIM_KUBE, "prep2")->placed_at, 4 * 3600.0, 1e-6);
    ck_assert_double_eq_tol(placed(&r, AF_SIM_ACCELFIT, "prep2")->placed_at, 2 * 3600.0, 1e-6);
    ck_assert_ptr_null(placed(&r, AF_SIM_ACCELFIT, "too-big")->node);

    ck_assert_double_eq(cents(k->cost_usd), 163.50);
    ck_assert_double_eq(cents(a->cost_usd), 6.50);
    ck_assert_double_eq(cents(b->cost_usd), 5.67);
    ck_assert_double_eq_tol(b->cost_usd, 5.671875, 1e-9);
    ck_assert_double_eq(cents(k->cost_by_class[AF_CLASS_CPU]), 3.50);
    ck_assert_double_eq(cents(k->cost_by_class[AF_CLASS_NVIDIA_A100]), 160.00);
    ck_assert_double_eq(cents(a->cost_by_class[AF_CLASS_CPU]), 1.50);
    ck_assert_double_eq(cents(a->cost_by_class[AF_CLASS_NVIDIA_A10G]), 5.00);
    ck_assert_double_eq(cents(k->idle_accel_usd), 140.00);
    ck_assert_double_eq(cents(a->idle_accel_usd), 0.00);

    ck_assert_double_eq(cents(tenant(&r, "team-a")->spend_usd[AF_SIM_ACCELFIT]), 1.06);
    ck_assert_double_eq(cents(tenant(&r, "team-a")->spend_usd[AF_SIM_KUBE]), 1.01);
    ck_assert_double_eq(cents(tenant(&r, "team-b")->spend_usd[AF_SIM_ACCELFIT]), 5.00);
    ck_assert_double_eq(cents(tenant(&r, "team-b")->spend_usd[AF_SIM_KUBE]), 20.00);
    ck_assert_double_lt(tenant(&r, "team-a")->budget_usd_hr, 0);
    ck_assert(!r.tenants_from_policy);   /* the default policy lists no tenants */

    ck_assert_int_eq(a->placed, 3);
    ck_assert_int_eq(k->placed, 3);
    ck_assert_int_eq(a->waited, 1);
    ck_assert_int_eq(k->waited, 2);
    ck_assert_int_eq(a->unplaced, 1);
    ck_assert_int_eq(k->unplaced, 1);
    ck_assert_double_eq_tol(a->wait_hours, 8.0, 1e-9);
    ck_assert_double_eq_tol(k->wait_hours, 10.0, 1e-9);
    ck_assert_int_eq(a->first_tier, 3);
    ck_assert_int_eq(k->fallbacks, 1);   /* the inference pod on the A100 */
    ck_assert_double_eq_tol(a->pod_hours, 10.0, 1e-9);

    /* The trace comes back unbound, ready for another run. */
    for (size_t i = 0; i < tr.n_pods; i++)
        ck_assert_ptr_null(tr.pods[i].info->node_name);
    af_sim_result_release(&r);
    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
}
END_TEST

/* ---- the kube-scheduler model ------------------------------------------------------------ */

static struct af_sim_pod *pod_of(struct af_sim_trace *tr, const char *name)
{
    for (size_t i = 0; i < tr->n_pods; i++)
        if (!strcmp(tr->pods[i].info->name, name))
            return &tr->pods[i];
    ck_abort_msg("no pod %s", name);
    return NULL;
}

static struct af_ks_node ks_node(const struct af_sim_cluster *cl, struct af_node_view *v,
                                 const char *name)
{
    struct af_ks_node k = {0};
    for (size_t i = 0; i < cl->n_nodes; i++)
        if (!strcmp(cl->nodes[i].info->name, name)) {
            memset(v, 0, sizeof(*v));
            v->info = cl->nodes[i].info;
            k.node = &cl->nodes[i];
            k.view = v;
            return k;
        }
    ck_abort_msg("no node %s", name);
    return k;
}

START_TEST(test_least_allocated_and_balanced_by_hand)
{
    struct af_sim_cluster cl;
    struct af_sim_trace tr;
    struct af_node_view v;
    struct af_ks_node n;
    struct af_sim_pod *prep, *infer;

    load_tiny(&cl, &tr);
    prep = pod_of(&tr, "prep");
    infer = pod_of(&tr, "infer");

    /* cpu (4000-2000)*100/4000 = 50, memory (16-4)*100/16 = 75: (50+75)/2 = 62. */
    n = ks_node(&cl, &v, "cpu-small");
    ck_assert_int_eq(af_ks_least_allocated(prep, &n), 62);
    /* fractions 0.5 and 0.25: (1 - 0.25/2) * 100 = 87. */
    ck_assert_int_eq(af_ks_balanced(prep, &n), 87);
    n = ks_node(&cl, &v, "cpu-big");
    ck_assert_int_eq(af_ks_least_allocated(prep, &n), 87);
    ck_assert_int_eq(af_ks_balanced(prep, &n), 100);
    ck_assert_int_eq(af_ks_filter(prep, &n), AF_KS_FIT);
    /* With 14 cpu already requested, 15 more do not fit. */
    v.used.v[AF_RES_CPU] = 14000;
    ck_assert_int_eq(af_ks_filter(pod_of(&tr, "prep2"), &n), AF_KS_RESOURCES);
    /* LeastAllocated counts the node's non-zero requests: 6 cpu, 8Gi already there. */
    v.used.v[AF_RES_CPU] = 0;
    n.nonzero_cpu = 6000;
    n.nonzero_mem = 8LL << 30;
    /* cpu (16-8)*100/16 = 50, memory (32-12)*100/32 = 62: 56. */
    ck_assert_int_eq(af_ks_least_allocated(prep, &n), 56);

    /* cpu (96000-2000)*100/96000 = 97, memory (1152-8)*100/1152 = 99: 98. */
    n = ks_node(&cl, &v, "gpu-a100");
    ck_assert_int_eq(af_ks_least_allocated(infer, &n), 98);
    ck_assert_int_eq(af_ks_balanced(infer, &n), 99);
    ck_assert_int_eq(af_ks_filter(infer, &n), AF_KS_FIT);
    /* The CPU pod does not tolerate the GPU taint. */
    ck_assert_int_eq(af_ks_filter(prep, &n), AF_KS_TAINT);
    n = ks_node(&cl, &v, "gpu-a10g");
    ck_assert_int_eq(af_ks_least_allocated(infer, &n), 50);
    ck_assert_int_eq(af_ks_balanced(infer, &n), 100);
    /* The CPU node has no GPU for it. */
    n = ks_node(&cl, &v, "cpu-big");
    ck_assert_int_eq(af_ks_filter(infer, &n), AF_KS_RESOURCES);

    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
}
END_TEST

START_TEST(test_pod_without_requests_is_scored_as_100m_and_200mi)
{
    static const char trace[] = "pods: [{name: bare}]\n";
    struct af_sim_cluster cl;
    struct af_sim_trace tr, bare;
    struct af_node_view v;
    struct af_ks_node n;
    struct af_error err;

    load_tiny(&cl, &tr);
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_codec_decode_trace("t", trace, strlen(trace), &bare, &err), 0);
    n = ks_node(&cl, &v, "cpu-small");
    /* cpu (4000-100)*100/4000 = 97, memory (16384-200)*100/16384 = 98: 97. */
    ck_assert_int_eq(af_ks_least_allocated(&bare.pods[0], &n), 97);
    /* BalancedAllocation uses the actual requests: nothing, fractions 0 and 0. */
    ck_assert_int_eq(af_ks_balanced(&bare.pods[0], &n), 100);
    /* No end, no durations: an hour. */
    ck_assert_double_eq(bare.end, 3600);
    af_sim_trace_release(&bare);
    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
}
END_TEST

static const struct {
    int percentage, nodes, want;
} feasible_cases[] = {
    {0, 50, 50},       /* fewer than 100 nodes: all of them */
    {0, 100, 100},     /* 50% of 100 is 50, but never fewer than 100 */
    {0, 500, 230},     /* 50 - 4 = 46% */
    {0, 1000, 420},    /* 50 - 8 = 42% */
    {0, 5000, 500},    /* 50 - 40 = 10% */
    {0, 6000, 300},    /* 50 - 48 = 2%, raised to 5% */
    {10, 5000, 500},
    {1, 500, 100},     /* 5 nodes, raised to 100 */
    {100, 5000, 5000},
    {30, 99, 99},
};

START_TEST(test_num_feasible_nodes_to_find)
{
    ck_assert_int_eq(af_ks_feasible_to_find(feasible_cases[_i].percentage, feasible_cases[_i].nodes),
                     feasible_cases[_i].want);
}
END_TEST

/* ---- the lower bound ------------------------------------------------------------------------- */

static void random_cluster(struct af_buf *b, int nodes, unsigned *seed)
{
    static const char *const types[][4] = {
        {"m5.xlarge", "4", "16Gi", ""},
        {"c6i.4xlarge", "16", "32Gi", ""},
        {"g5.xlarge", "4", "16Gi", "1"},
        {"g5.12xlarge", "48", "192Gi", "4"},
        {"p4d.24xlarge", "96", "1152Gi", "8"},
        {"g4dn.xlarge", "4", "16Gi", "1"},
    };

    ck_assert_int_eq(af_buf_puts(b, "{\"kind\":\"List\",\"items\":["), 0);
    for (int i = 0; i < nodes; i++) {
        int t = rand_r(seed) % (int)AF_ARRAY_SIZE(types);
        bool spot = rand_r(seed) % 4 == 0;
        ck_assert_int_eq(
            af_buf_printf(b,
                          "%s{\"kind\":\"Node\",\"metadata\":{\"name\":\"n%03d\",\"labels\":{"
                          "\"node.kubernetes.io/instance-type\":\"%s\"%s}},\"status\":{"
                          "\"allocatable\":{\"cpu\":\"%s\",\"memory\":\"%s\",\"pods\":\"110\"%s%s%s}}}",
                          i ? "," : "", i, types[t][0],
                          spot ? ",\"karpenter.sh/capacity-type\":\"spot\"" : "", types[t][1],
                          types[t][2], *types[t][3] ? ",\"nvidia.com/gpu\":\"" : "", types[t][3],
                          *types[t][3] ? "\"" : ""),
            0);
    }
    ck_assert_int_eq(af_buf_puts(b, "]}"), 0);
}

static void random_trace(struct af_buf *b, int pods, unsigned *seed)
{
    static const char *const kinds[] = {"training", "inference", "preprocessing", "batch-inference"};

    ck_assert_int_eq(af_buf_puts(b, "end: 12h\npods:\n"), 0);
    for (int i = 0; i < pods; i++) {
        int gpus = rand_r(seed) % 3 == 0 ? 0 : 1 + rand_r(seed) % 4;
        const char *kind = !gpus ? kinds[2] : rand_r(seed) % 2 ? kinds[1] : kinds[0];
        char gpu[32] = "";
        if (gpus)
            snprintf(gpu, sizeof(gpu), ", nvidia.com/gpu: %d", gpus);
        ck_assert_int_eq(
            af_buf_printf(b,
                          "  - {name: p%d, tenant: t%d, at: %d, duration: %d, annotations: "
                          "{accelfit.io/workload: %s}, requests: {cpu: %d, memory: %dGi%s}}\n",
                          i, rand_r(seed) % 3, rand_r(seed) % 36000, 600 + rand_r(seed) % 20000,
                          kind, 1 + rand_r(seed) % 12, 1 + rand_r(seed) % 48, gpu),
            0);
    }
}

START_TEST(test_lower_bound_never_above_either_scheduler)
{
    unsigned seed = 1000u + (unsigned)_i;
    struct af_buf cb = AF_BUF_INIT(0), tb = AF_BUF_INIT(0);
    struct af_sim_cluster cl;
    struct af_sim_trace tr;
    struct af_sim_result r;
    struct af_sim_options opt = AF_SIM_OPTIONS_INIT;
    struct af_error err;

    random_cluster(&cb, 6 + _i * 3, &seed);
    random_trace(&tb, 20 + _i * 10, &seed);
    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_codec_decode_sim_cluster(cfg, "c", cb.buf, cb.len, &cl, NULL, &err) == 0, "%s",
                  err.text);
    ck_assert_msg(af_codec_decode_trace("t", tb.buf, tb.len, &tr, &err) == 0, "%s", err.text);
    opt.percentage_of_nodes_to_score = _i % 2 ? 0 : 50;
    af_sim_run(cfg, &cl, &tr, &opt, &r);
    ck_assert_double_gt(r.side[AF_SIM_BOUND].cost_usd, 0);
    ck_assert_double_le(r.side[AF_SIM_BOUND].cost_usd, r.side[AF_SIM_ACCELFIT].cost_usd + 1e-9);
    ck_assert_double_le(r.side[AF_SIM_BOUND].cost_usd, r.side[AF_SIM_KUBE].cost_usd + 1e-9);
    /* Per class the series add up to the totals. */
    for (int s = 0; s < AF_SIM__SIDES; s++) {
        double sum = 0;
        for (int i = 0; i < r.buckets * AF_SIM_CLASSES; i++)
            sum += r.side[s].cost_series[i];
        ck_assert_double_eq_tol(sum, r.side[s].cost_usd, 1e-6);
    }
    af_sim_result_release(&r);
    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
    af_buf_release(&cb);
    af_buf_release(&tb);
}
END_TEST

/* ---- the scan ----------------------------------------------------------------------------------- */

START_TEST(test_scan_cut_short_misses_the_cheap_node)
{
    /* 300 CPU nodes at $1/h and one at $0.10/h that sorts last: kube-scheduler looks for
     * 100 feasible nodes (10% of 301 is 30, raised to 100), so the first pod never sees it. */
    struct af_buf cb = AF_BUF_INIT(0);
    static const char trace[] = "pods: [{name: a, requests: {cpu: 1, memory: 1Gi}, "
                                "annotations: {accelfit.io/workload: preprocessing}}]\n";
    struct af_sim_cluster cl;
    struct af_sim_trace tr;
    struct af_sim_result r;
    struct af_sim_options opt = AF_SIM_OPTIONS_INIT;
    struct af_error err;

    ck_assert_int_eq(af_buf_puts(&cb, "{\"kind\":\"List\",\"items\":["), 0);
    for (int i = 0; i <= 300; i++)
        ck_assert_int_eq(af_buf_printf(&cb,
                                       "%s{\"kind\":\"Node\",\"metadata\":{\"name\":\"%s%03d\","
                                       "\"labels\":{\"node.kubernetes.io/instance-type\":"
                                       "\"m5.xlarge\"},\"annotations\":{\"accelfit.io/hourly-price\":"
                                       "\"%s\"}},\"status\":{\"allocatable\":{\"cpu\":\"4\","
                                       "\"memory\":\"16Gi\",\"pods\":\"110\"}}}",
                                       i ? "," : "", i == 300 ? "z-cheap" : "node", i,
                                       i == 300 ? "0.10" : "1.00"),
                         0);
    ck_assert_int_eq(af_buf_puts(&cb, "]}"), 0);
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_codec_decode_sim_cluster(cfg, "c", cb.buf, cb.len, &cl, NULL, &err), 0);
    ck_assert_int_eq(af_codec_decode_trace("t", trace, strlen(trace), &tr, &err), 0);

    opt.percentage_of_nodes_to_score = 10;
    af_sim_run(cfg, &cl, &tr, &opt, &r);
    ck_assert_int_eq(r.feasible_to_find, 100);
    ck_assert_double_eq(r.side[AF_SIM_KUBE].nodes_examined_avg, 100);
    ck_assert_int_eq(r.side[AF_SIM_ACCELFIT].scan_cut, 1);
    ck_assert_int_eq(r.side[AF_SIM_ACCELFIT].cheapest_missed, 1);
    ck_assert_str_ne(r.placements[AF_SIM_ACCELFIT][0].node, "z-cheap300");
    af_sim_result_release(&r);

    opt.percentage_of_nodes_to_score = 100;
    af_sim_run(cfg, &cl, &tr, &opt, &r);
    ck_assert_int_eq(r.side[AF_SIM_ACCELFIT].scan_cut, 0);
    ck_assert_str_eq(r.placements[AF_SIM_ACCELFIT][0].node, "z-cheap300");
    ck_assert_double_eq(r.side[AF_SIM_KUBE].nodes_examined_avg, 301);
    af_sim_result_release(&r);
    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
    af_buf_release(&cb);
}
END_TEST

/* ---- rollouts ------------------------------------------------------------------------------ */

START_TEST(test_rollout_share_is_steered_over_hours)
{
    /* Two 4-GPU A10G nodes and two 4-GPU T4 nodes; half of a Deployment's replicas go to
     * T4. Replicas come an hour apart, long after the brake's 10 minutes: placed pods are
     * Ready, so the brake stays off and the share holds. kube-scheduler knows nothing of it. */
    static const char cluster[] =
        "{\"kind\":\"List\",\"items\":["
        NODE("a10g-1", "g5.12xlarge", "5.67", "48", "192Gi", ",\"nvidia.com/gpu\":\"4\"", "") ","
        NODE("a10g-2", "g5.12xlarge", "5.67", "48", "192Gi", ",\"nvidia.com/gpu\":\"4\"", "") ","
        NODE("t4-1", "g4dn.12xlarge", "3.91", "48", "192Gi", ",\"nvidia.com/gpu\":\"4\"", "") ","
        NODE("t4-2", "g4dn.12xlarge", "3.91", "48", "192Gi", ",\"nvidia.com/gpu\":\"4\"", "")
        "]}";
    static const char trace[] =
        "end: 12h\n"
        "pods:\n"
        "  - {name: web, namespace: shop, owner: ReplicaSet/web-1, replicas: 8, every: 1h,\n"
        "     labels: {app: web, accelfit.io/managed: \"true\"},\n"
        "     annotations: {accelfit.io/workload: inference},\n"
        "     requests: {cpu: 2, memory: 8Gi, nvidia.com/gpu: 1}}\n";
    static const char rollout[] =
        "\nrollouts:\n"
        "  - name: web-to-t4\n"
        "    selector: {namespace: shop, matchLabels: {app: web}}\n"
        "    source: [nvidia-a10g]\n"
        "    target: [nvidia-t4]\n"
        "    share: 0.5\n";
    char dir[] = "/tmp/af-sim-policy-XXXXXX";
    char *path, *policy;
    size_t len;
    struct af_config *rcfg = NULL;
    struct af_sim_cluster cl;
    struct af_sim_trace tr;
    struct af_sim_result r;
    struct af_error err;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    path = af_xasprintf("%s/policy.yaml", dir);
    policy = af_test_read("policies/default.yaml", &len);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(policy, 1, len, f), len);
    ck_assert_uint_eq(fwrite(rollout, 1, strlen(rollout), f), strlen(rollout));
    ck_assert_int_eq(fclose(f), 0);
    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_config_load(&rcfg, NULL, path, &err) == 0, "%s", err.text);
    ck_assert_int_eq(af_codec_decode_sim_cluster(rcfg, "c", cluster, strlen(cluster), &cl, NULL,
                                                 &err),
                     0);
    ck_assert_int_eq(af_codec_decode_trace("t", trace, strlen(trace), &tr, &err), 0);
    af_sim_run(rcfg, &cl, &tr, NULL, &r);
    ck_assert_uint_eq(r.n_rollouts, 1);
    ck_assert_int_eq(r.rollouts[0].target_pods[AF_SIM_ACCELFIT], 4);
    ck_assert_int_eq(r.rollouts[0].source_pods[AF_SIM_ACCELFIT], 4);
    ck_assert_int_eq(r.rollouts[0].target_pods[AF_SIM_KUBE] + r.rollouts[0].source_pods[AF_SIM_KUBE],
                     8);
    /* At the end half the running replicas are on the target. */
    ck_assert_double_eq_tol(r.rollouts[0].achieved[AF_SIM_ACCELFIT][r.buckets - 1], 0.5, 1e-9);
    af_sim_result_release(&r);
    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
    af_config_unref(rcfg);
    unlink(path);
    rmdir(dir);
    af_free(path);
    free(policy);
}
END_TEST

/* ---- tenants ------------------------------------------------------------------------------ */

/* policies/default.yaml with `extra` appended, loaded from a file as `--policy` loads it. */
static struct af_config *load_policy_with(const char *extra)
{
    char dir[] = "/tmp/af-sim-tenants-XXXXXX";
    char *path, *policy;
    size_t len;
    struct af_config *c = NULL;
    struct af_error err;
    FILE *f;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    path = af_xasprintf("%s/policy.yaml", dir);
    policy = af_test_read("policies/default.yaml", &len);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_uint_eq(fwrite(policy, 1, len, f), len);
    ck_assert_uint_eq(fwrite(extra, 1, strlen(extra), f), strlen(extra));
    ck_assert_int_eq(fclose(f), 0);
    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_config_load(&c, NULL, path, &err) == 0, "%s", err.text);
    unlink(path);
    rmdir(dir);
    af_free(path);
    free(policy);
    return c;
}

/*
 * One tenant, research (namespace ml), on a CPU node at $4.00/h and an 8 x A100 node at
 * $32.00/h:
 *   prep    14 of 16 cpu, 0h-3h: share 14/16 x 4.00 = $3.50/h
 *   train   2 of 8 GPUs (12 of 96 cpu, 96 of 1152 Gi), arrives 1h, runs 2h:
 *           share 2/8 x 32.00 = $8.00/h
 * With a hard budget of $10/h, train at 1h would take research to 3.50 + 8.00 = $11.50/h:
 * the A100 node is refused (every tier of a training pod is premium) and train waits
 * until prep leaves the CPU node at 3h (a node train could never use: the tenant's spend
 * is what changed), then runs 3h-5h. Spend: 3.50 x 3 + 8.00 x 2 = $26.50, at most
 * $8.00/h. Without a budget train runs 1h-3h, next to prep: the same $26.50, at most
 * $11.50/h. kube-scheduler knows nothing of budgets: train runs 1h-3h there, $11.50/h
 * for 2 hours over $10.
 */
static const char budget_cluster[] =
    "{\"kind\":\"List\",\"items\":["
    NODE("cpu-big", "c6i.4xlarge", "4.00", "16", "32Gi", "", "") ","
    NODE("gpu-a100", "p4d.24xlarge", "32.00", "96", "1152Gi", ",\"nvidia.com/gpu\":\"8\"",
         GPU_TAINT)
    "]}";
static const char budget_trace[] =
    "end: 8h\n"
    "pods:\n"
    "  - {name: prep, namespace: ml, at: 0, duration: 3h,\n"
    "     annotations: {accelfit.io/workload: preprocessing}, requests: {cpu: 14, memory: 8Gi}}\n"
    "  - {name: train, namespace: ml, at: 1h, duration: 2h,\n"
    "     annotations: {accelfit.io/workload: training},\n"
    "     requests: {cpu: 12, memory: 96Gi, nvidia.com/gpu: 2},\n"
    "     tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]}\n";

/* An inf2.24xlarge (6 Inferentia2 devices of 2 NeuronCore-v2, $12.00/h) with two pods of
 * 4 NeuronCores for 2 hours: 8 cores sit on 4 devices, so 2 of 6 are idle, $12.00 x 2/6 x
 * 2 h = $8.00 of idle accelerators on either side (there is one node to choose). */
static const char inf2_cluster[] =
    "{\"kind\":\"List\",\"items\":["
    NODE("inf2-big", "inf2.24xlarge", "12.00", "96", "370Gi",
         ",\"aws.amazon.com/neuron\":\"6\",\"aws.amazon.com/neuroncore\":\"12\"", "")
    "]}";
static const char inf2_trace[] =
    "end: 4h\n"
    "pods:\n"
    "  - {name: llm-a, namespace: serve, at: 0, duration: 2h,\n"
    "     annotations: {accelfit.io/neuron-ready: \"true\"},\n"
    "     requests: {cpu: 8, memory: 32Gi, aws.amazon.com/neuroncore: 4}}\n"
    "  - {name: llm-b, namespace: serve, at: 0, duration: 2h,\n"
    "     annotations: {accelfit.io/neuron-ready: \"true\"},\n"
    "     requests: {cpu: 8, memory: 32Gi, aws.amazon.com/neuroncore: 4}}\n";

START_TEST(test_neuroncore_pods_hold_their_devices)
{
    struct af_sim_cluster cl;
    struct af_sim_trace tr;
    struct af_sim_result r;
    struct af_sim_options opt = AF_SIM_OPTIONS_INIT;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_codec_decode_sim_cluster(cfg, "inf2", inf2_cluster, strlen(inf2_cluster), &cl,
                                              NULL, &err) == 0,
                  "%s", err.text);
    ck_assert_msg(af_codec_decode_trace("inf2.yaml", inf2_trace, strlen(inf2_trace), &tr, &err) == 0,
                  "%s", err.text);
    af_sim_run(cfg, &cl, &tr, &opt, &r);
    for (int s = AF_SIM_ACCELFIT; s <= AF_SIM_KUBE; s++) {
        ck_assert_str_eq(placed(&r, s, "llm-a")->node, "inf2-big");
        ck_assert_str_eq(placed(&r, s, "llm-b")->node, "inf2-big");
        ck_assert_double_eq(cents(r.side[s].idle_accel_usd), 8.00);
    }
    af_sim_result_release(&r);
    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
}
END_TEST

/* The placements borrow names from the cluster and the trace: the caller releases them. */
static void run_budget_trace(const char *tenants, struct af_sim_cluster *cl,
                             struct af_sim_trace *tr, struct af_sim_result *r)
{
    struct af_config *c = load_policy_with(tenants);
    struct af_sim_options opt = AF_SIM_OPTIONS_INIT;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_codec_decode_sim_cluster(c, "c", budget_cluster, strlen(budget_cluster), cl,
                                              NULL, &err) == 0,
                  "%s", err.text);
    ck_assert_msg(af_codec_decode_trace("t", budget_trace, strlen(budget_trace), tr, &err) == 0,
                  "%s", err.text);
    opt.check_spend = true;
    af_sim_run(c, cl, tr, &opt, r);
    ck_assert_int_gt(r->spend_checks, 0);
    ck_assert_int_eq(r->spend_mismatches, 0);
    af_config_unref(c);
}

START_TEST(test_hard_budget_refuses_premium_until_spend_drops)
{
    struct af_sim_cluster cl;
    struct af_sim_trace tr;
    struct af_sim_result r;
    const struct af_sim_tenant *t;
    const struct af_sim_placement *pl;
    struct af_buf text = AF_BUF_INIT(0), json = AF_BUF_INIT(0);

    run_budget_trace("\ntenants:\n"
                     "  - name: research\n"
                     "    namespaces: [ml]\n"
                     "    budget_usd_per_hour: 10\n"
                     "    over_budget: hard\n",
                     &cl, &tr, &r);
    ck_assert(r.tenants_from_policy);
    /* The default tenant has no pods here: only research is listed. */
    ck_assert_uint_eq(r.n_tenants, 1);
    t = tenant(&r, "research");
    ck_assert_double_eq(t->budget_usd_hr, 10);
    ck_assert(t->hard);

    pl = placed(&r, AF_SIM_ACCELFIT, "train");
    ck_assert_str_eq(pl->node, "gpu-a100");
    ck_assert_double_eq_tol(pl->placed_at, 3 * 3600.0, 1e-6);   /* refused at 1h */
    ck_assert_int_eq(r.side[AF_SIM_ACCELFIT].waited, 1);
    ck_assert_double_eq_tol(t->spend_usd[AF_SIM_ACCELFIT], 26.50, 1e-9);
    ck_assert_double_eq_tol(t->peak_usd_hr[AF_SIM_ACCELFIT], 8.00, 1e-9);
    ck_assert_double_eq_tol(t->over_hours[AF_SIM_ACCELFIT], 0, 1e-9);
    /* kube-scheduler alone places it at once and runs over the budget. */
    pl = placed(&r, AF_SIM_KUBE, "train");
    ck_assert_str_eq(pl->node, "gpu-a100");
    ck_assert_double_eq_tol(pl->placed_at, 1 * 3600.0, 1e-6);
    ck_assert_double_eq_tol(t->spend_usd[AF_SIM_KUBE], 26.50, 1e-9);
    ck_assert_double_eq_tol(t->peak_usd_hr[AF_SIM_KUBE], 11.50, 1e-9);
    ck_assert_double_eq_tol(t->over_hours[AF_SIM_KUBE], 2.0, 1e-9);

    ck_assert_int_eq(af_sim_render_text(&r, &text), 0);
    ck_assert_ptr_nonnull(strstr(text.buf, "tenants (the policy's)"));
    ck_assert_ptr_nonnull(strstr(text.buf, "research: budget $10.00/h, hard"));
    ck_assert_ptr_nonnull(strstr(text.buf, "  peak spend                          $8.00/h"
                                           "         $11.50/h              -\n"));
    ck_assert_ptr_nonnull(strstr(text.buf, "  hours over budget                       0.0"
                                           "              2.0              -\n"));
    ck_assert_int_eq(af_sim_render_json(&r, &json), 0);
    ck_assert_ptr_nonnull(strstr(json.buf, "\"tenants_from\":\"policy\""));
    ck_assert_ptr_nonnull(strstr(json.buf, "\"budget_usd_per_hour\":10.00,\"over_budget\":\"hard\""));
    ck_assert_ptr_nonnull(strstr(json.buf, "\"peak_usd_per_hour\":{\"accelfit\":8.00,"
                                           "\"kube_scheduler\":11.50}"));
    ck_assert_ptr_nonnull(strstr(json.buf, "\"hours_over_budget\":{\"accelfit\":0.0,"
                                           "\"kube_scheduler\":2.0}"));
    {
        /* one object with no key twice: every JSON reader keeps the same fields */
        json_error_t je;
        json_t *doc = json_loads(json.buf, JSON_REJECT_DUPLICATES, &je);
        json_t *pl0;
        ck_assert_msg(doc != NULL, "%s at %d:%d", je.text, je.line, je.column);
        ck_assert_int_eq(json_integer_value(json_object_get(doc, "pods")), (json_int_t)r.n_pods);
        ck_assert_uint_eq(json_array_size(json_object_get(doc, "placements")), r.n_pods);
        pl0 = json_array_get(json_object_get(doc, "placements"), 0);
        ck_assert_ptr_nonnull(json_object_get(pl0, "accelfit"));
        json_decref(doc);
    }
    af_buf_release(&text);
    af_buf_release(&json);
    af_sim_result_release(&r);
    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
}
END_TEST

START_TEST(test_without_a_budget_the_premium_node_is_taken_at_once)
{
    struct af_sim_cluster cl;
    struct af_sim_trace tr;
    struct af_sim_result r;
    const struct af_sim_tenant *t;
    const struct af_sim_placement *pl;

    run_budget_trace("\ntenants:\n"
                     "  - name: research\n"
                     "    namespaces: [ml]\n",
                     &cl, &tr, &r);
    ck_assert(r.tenants_from_policy);
    t = tenant(&r, "research");
    ck_assert_double_lt(t->budget_usd_hr, 0);
    pl = placed(&r, AF_SIM_ACCELFIT, "train");
    ck_assert_str_eq(pl->node, "gpu-a100");
    ck_assert_double_eq_tol(pl->placed_at, 1 * 3600.0, 1e-6);
    ck_assert_int_eq(r.side[AF_SIM_ACCELFIT].waited, 0);
    ck_assert_double_eq_tol(t->spend_usd[AF_SIM_ACCELFIT], 26.50, 1e-9);
    ck_assert_double_eq_tol(t->peak_usd_hr[AF_SIM_ACCELFIT], 11.50, 1e-9);
    ck_assert_double_eq_tol(t->over_hours[AF_SIM_ACCELFIT], 0, 1e-9);
    af_sim_result_release(&r);
    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
}
END_TEST

/*
 * The books the budget reads, kept as pods bind and leave, against af_costs_compute over
 * a snapshot of the cache (what the server computes) at every decision of both schedulers:
 * the demo day on the demo cluster with its running pods (DaemonSet pods included), under
 * the demo policy's tenants, and under a policy without tenants (the total only).
 */
START_TEST(test_running_spend_equals_costs_compute)
{
    char *cluster_text, *trace_text;
    size_t clen, tlen;
    struct af_config *pcfg = NULL;
    struct af_error err;

    cluster_text = af_test_read("manifests/demo-cluster.yaml", &clen);
    trace_text = af_test_read("examples/traces/demo-day.yaml", &tlen);
    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_config_load(&pcfg, NULL, af_test_path("examples/traces/demo-policy.yaml"),
                                 &err) == 0,
                  "%s", err.text);
    for (int pass = 0; pass < 2; pass++) {
        struct af_config *c = pass ? cfg : pcfg;
        struct af_sim_cluster cl;
        struct af_sim_trace tr;
        struct af_sim_result r;
        struct af_sim_options opt = AF_SIM_OPTIONS_INIT;

        ck_assert_msg(af_codec_decode_sim_cluster(c, "demo", cluster_text, clen, &cl, NULL,
                                                  &err) == 0,
                      "%s", err.text);
        ck_assert_uint_gt(cl.n_bound, 0);
        ck_assert_msg(af_codec_decode_trace("day", trace_text, tlen, &tr, &err) == 0, "%s",
                      err.text);
        opt.check_spend = true;
        af_sim_run(c, &cl, &tr, &opt, &r);
        ck_assert_int_eq(r.tenants_from_policy, pass == 0);
        /* per tenant and in total, at every decision: hundreds of comparisons */
        ck_assert_int_gt(r.spend_checks, 2 * (long)tr.n_pods);
        ck_assert_int_eq(r.spend_mismatches, 0);
        af_sim_result_release(&r);
        af_sim_trace_release(&tr);
        af_sim_cluster_release(&cl);
    }
    af_config_unref(pcfg);
    free(cluster_text);
    free(trace_text);
}
END_TEST

/* ---- the report ------------------------------------------------------------------------------------ */

static const char *const void_tags[] = {"meta", "br", NULL};   /* HTML's; SVG's close with /> */

/* Tags balance (void and self-closed ones aside), no scripts, nothing fetched. */
static void assert_well_formed(const char *html)
{
    const char *stack[64];
    int depth = 0;

    ck_assert_ptr_nonnull(strstr(html, "<!DOCTYPE html>"));
    ck_assert_ptr_null(strstr(html, "<script"));
    ck_assert_ptr_null(strstr(html, "http://"));
    ck_assert_ptr_null(strstr(html, "https://"));
    ck_assert_ptr_null(strstr(html, "src="));
    ck_assert_ptr_null(strstr(html, "href="));
    for (const char *p = strchr(html, '<'); p; p = strchr(p + 1, '<')) {
        const char *end = strchr(p, '>'), *name = p + 1;
        size_t n;
        bool closing = *name == '/', self = end && end[-1] == '/', is_void = false;
        ck_assert_ptr_nonnull(end);
        if (*name == '!')
            continue;
        if (closing)
            name++;
        n = strcspn(name, " >/");
        for (int v = 0; void_tags[v]; v++)
            is_void |= strlen(void_tags[v]) == n && !strncmp(void_tags[v], name, n);
        if (closing) {
            ck_assert_msg(depth > 0, "unexpected </%.*s>", (int)n, name);
            depth--;
            ck_assert_msg(!strncmp(stack[depth], name, n) && strcspn(stack[depth], " >/") == n,
                          "</%.*s> closes <%.*s>", (int)n, name,
                          (int)strcspn(stack[depth], " >/"), stack[depth]);
        } else if (!self && !is_void) {
            ck_assert_int_lt(depth, 64);
            stack[depth++] = name;
        }
    }
    ck_assert_int_eq(depth, 0);
}

START_TEST(test_html_report_is_well_formed_and_holds_the_table)
{
    struct af_sim_cluster cl;
    struct af_sim_trace tr;
    struct af_sim_result r;
    struct af_buf html = AF_BUF_INIT(0), text = AF_BUF_INIT(0);
    char *line, *save = NULL;
    int money = 0;

    load_tiny(&cl, &tr);
    af_sim_run(cfg, &cl, &tr, NULL, &r);
    ck_assert_int_eq(af_sim_render_html(&r, "tiny <test> & co", &html), 0);
    ck_assert_int_eq(af_sim_render_text(&r, &text), 0);
    assert_well_formed(html.buf);
    ck_assert_ptr_nonnull(strstr(html.buf, "tiny &lt;test&gt; &amp; co"));
    ck_assert_ptr_nonnull(strstr(html.buf, "<svg"));
    /* Every dollar amount the table prints is on the page. */
    for (line = strtok_r(text.buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        for (char *d = strchr(line, '$'); d; d = strchr(d + 1, '$')) {
            char amount[48];
            size_t n = strspn(d + 1, "0123456789,.");
            snprintf(amount, sizeof(amount), "$%.*s", (int)n, d + 1);
            ck_assert_msg(strstr(html.buf, amount), "%s (table line '%s') not in the report",
                          amount, line);
            money++;
        }
    }
    ck_assert_int_ge(money, 10);
    ck_assert_ptr_nonnull(strstr(html.buf, "$163.50"));
    ck_assert_ptr_nonnull(strstr(html.buf, "$6.50"));
    af_buf_release(&html);
    af_buf_release(&text);
    af_sim_result_release(&r);
    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
}
END_TEST

/* ---- inputs ------------------------------------------------------------------------------------------ */

START_TEST(test_cluster_pods_become_a_trace)
{
    static const char dump[] =
        "{\"kind\":\"List\",\"items\":["
        NODE("cpu-small", "m5.xlarge", "0.20", "4", "16Gi", "", "") ","
        "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"done\",\"namespace\":\"x\","
        "\"creationTimestamp\":\"2026-11-20T10:00:00Z\"},\"spec\":{\"nodeName\":\"cpu-small\","
        "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\"}}}]},"
        "\"status\":{\"phase\":\"Succeeded\",\"startTime\":\"2026-11-20T10:00:30Z\","
        "\"containerStatuses\":[{\"state\":{\"terminated\":{\"finishedAt\":"
        "\"2026-11-20T11:00:30Z\"}}}]}},"
        "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"running\",\"namespace\":\"x\","
        "\"creationTimestamp\":\"2026-11-20T12:00:00Z\"},\"spec\":{\"nodeName\":\"cpu-small\","
        "\"containers\":[{\"name\":\"c\"}]},\"status\":{\"phase\":\"Running\","
        "\"startTime\":\"2026-11-20T12:00:05Z\"}},"
        "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"ds\",\"namespace\":\"kube-system\","
        "\"creationTimestamp\":\"2026-11-20T09:00:00Z\",\"ownerReferences\":[{\"kind\":"
        "\"DaemonSet\",\"name\":\"d\",\"controller\":true}]},\"spec\":{\"nodeName\":\"cpu-small\","
        "\"containers\":[{\"name\":\"c\"}]},\"status\":{\"phase\":\"Running\"}},"
        "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"untimed\",\"namespace\":\"x\"},\"spec\":{"
        "\"nodeName\":\"cpu-small\",\"containers\":[{\"name\":\"c\"}]},\"status\":{\"phase\":"
        "\"Running\"}},"
        "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"gone\",\"namespace\":\"x\"},\"spec\":{"
        "\"containers\":[{\"name\":\"c\"}]},\"status\":{\"phase\":\"Succeeded\"}}"
        "]}";
    struct af_sim_cluster cl;
    struct af_sim_trace tr;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_codec_decode_sim_cluster(cfg, "dump", dump, strlen(dump), &cl, &tr, &err) == 0,
                  "%s", err.text);
    ck_assert_uint_eq(cl.n_bound, 1);   /* the DaemonSet pod stays where it runs */
    ck_assert_str_eq(cl.bound[0].info->name, "ds");
    /* The finished pod without times is left out; the running one without them was
     * there from the start. */
    ck_assert_uint_eq(tr.n_pods, 3);
    ck_assert_str_eq(tr.pods[0].info->name, "untimed");
    ck_assert_double_eq(tr.pods[0].arrival, 0);
    ck_assert_double_lt(tr.pods[0].duration, 0);
    ck_assert_str_eq(tr.pods[1].info->name, "done");
    ck_assert_ptr_null(tr.pods[1].info->node_name);
    ck_assert_double_eq(tr.pods[1].arrival, 3600);          /* t = 0 is 09:00, the earliest */
    ck_assert_double_eq(tr.pods[1].duration, 3600);         /* started 10:00:30, finished 11:00:30 */
    ck_assert_str_eq(tr.pods[2].info->name, "running");
    ck_assert_double_eq(tr.pods[2].arrival, 3 * 3600);
    ck_assert_double_lt(tr.pods[2].duration, 0);            /* until the end */
    ck_assert_double_eq(tr.end, 3 * 3600 + 5);              /* the latest time the file shows */
    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
}
END_TEST

START_TEST(test_durations_parse)
{
    ck_assert_double_eq(af_sim_parse_duration("90"), 90);
    ck_assert_double_eq(af_sim_parse_duration("90s"), 90);
    ck_assert_double_eq(af_sim_parse_duration("15m"), 900);
    ck_assert_double_eq(af_sim_parse_duration("1h30m"), 5400);
    ck_assert_double_eq(af_sim_parse_duration("2d"), 172800);
    ck_assert_double_eq(af_sim_parse_duration("1.5h"), 5400);
    ck_assert_double_lt(af_sim_parse_duration("1h30"), 0);
    ck_assert_double_lt(af_sim_parse_duration("-5m"), 0);
    ck_assert_double_lt(af_sim_parse_duration("5 m"), 0);
    ck_assert_double_lt(af_sim_parse_duration("h"), 0);
    ck_assert_double_lt(af_sim_parse_duration(""), 0);
    ck_assert_double_eq(af_sim_parse_duration("36524d"), 36524 * 86400.0);
    ck_assert_double_lt(af_sim_parse_duration("36526d"), 0);
    ck_assert_double_lt(af_sim_parse_duration("1e308"), 0);
}
END_TEST

START_TEST(test_json_lines_trace)
{
    static const char lines[] =
        "{\"name\":\"b\",\"at\":\"10m\",\"requests\":{\"cpu\":\"1\"}}\n"
        "\n"
        "{\"name\":\"a\",\"at\":60,\"duration\":\"1h\",\"owner\":\"Job/x\",\"replicas\":2}\n";
    struct af_sim_trace tr;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_codec_decode_trace("t.jsonl", lines, strlen(lines), &tr, &err) == 0, "%s",
                  err.text);
    ck_assert_uint_eq(tr.n_pods, 3);
    ck_assert_str_eq(tr.pods[0].info->name, "a-0");
    ck_assert_str_eq(tr.pods[0].info->owner_kind, "Job");
    ck_assert_str_eq(tr.pods[1].info->name, "a-1");
    ck_assert_str_eq(tr.pods[2].info->name, "b");
    ck_assert_double_eq(tr.end, 3660);
    af_sim_trace_release(&tr);
}
END_TEST

static const struct {
    const char *trace;
    const char *want;   /* in the one-line error */
} bad_traces[] = {
    {"pods: [{name: a, duration: soon}]\n", "t.yaml:1:18: pods[0] (a): duration: expected seconds"},
    {"pods: [{name: a, colour: red}]\n", "t.yaml:1:18: pods[0]: unknown key 'colour'"},
    {"pods:\n  - name: a\n  - name: b\n    start: 0\n", "t.yaml:4:5: pods[1]: unknown key 'start'"},
    {"end: 24h\npods:\n  - name: b\n    at: soon\n", "t.yaml:4:5: pods[0] (b): at: expected"},
    {"pods: []\nend: -1\n", "t.yaml:2:1: end: expected a positive number"},
    {"pods: [{name: a, requests: 5}]\n", "t.yaml:1:18: pods[0] (a): requests: expected a map"},
    {"pods: [{at: 5}]\n", "pods[0]: name: missing"},
    {"pods: [{name: a}, {name: a}]\n", "pod default/a appears twice"},
    {"pods: [{name: a, requests: {cpu: lots}}]\n", "pods[0] (a)"},
    {"pods:\n  - name: a\n    requests:\n      cpu: \"1\"\n      memory: 6Gii\n",
     "t.yaml:5:7: pods[0] (a)"},
    /* An arrival after the trace's end would be counted nowhere: refused, with its line. */
    {"end: 24h\npods:\n  - name: a\n  - name: late\n    at: 30h\n",
     "t.yaml:5:5: pods[1] (late): at: 108000 s is after the trace's end (end: 86400 s)"},
    {"end: 24h\npods:\n  - name: a\n    replicas: 30\n    every: 1h\n",
     "t.yaml:4:5: pods[0] (a): replicas: the last of 30 would arrive at 104400 s, after the "
     "trace's end"},
    {"pods: [{name: a, owner: Job}]\n", "owner: expected KIND/NAME"},
    {"pods: [{name: a, replicas: 0}]\n", "replicas: expected an integer"},
    {"pods: [{name: a, tolerations: [{operator: Maybe}]}]\n", "operator: expected Exists or Equal"},
    {"pods: {name: a}\n", "pods: expected a list"},
    {"start: yesterday\npods: []\n", "t.yaml:1:1: start: expected an RFC 3339 time"},
    {"pods: [{name: a}\n", "t.yaml:"},
    {"{\"name\":\"a\"}\n{\"name\":\n", "t.yaml"},
    /* Times are bounded: a hundred years at most, each and together. */
    {"pods: [{name: a, at: 1e308, duration: 1e308}]\n", "pods[0] (a): at: expected seconds or a duration like 1h30m, at most 100 years"},
    {"{\"name\":\"a\",\"at\":1,\"duration\":1e308}\n", "line 1 (a): duration: expected seconds or a duration like 1h30m, at most 100 years"},
    {"pods: [{name: a}, {name: b, every: 1e308, replicas: 2}]\n", "pods[1] (b): every: expected seconds"},
    {"pods: [{name: a, duration: 36600d}]\n", "pods[0] (a): duration: expected seconds"},
    {"end: 1e308\npods: [{name: a}]\n", "end: expected a positive number of seconds or a duration like 24h, at most 100 years"},
    {"pods: [{name: a, at: 36000d, every: 1000d, replicas: 100}]\n", "pods[0] (a): the last replica would arrive after 100 years"},
    /* One anchor aliased: the pods of all entries together are bounded. */
    {"pods: [&e {name: a, replicas: 100000}, *e, *e, *e]\n", "pods[2] (a): the trace would hold more than 200000 pods"},
};

START_TEST(test_bad_trace_exits_2_with_one_line)
{
    char path[] = "/tmp/af-sim-trace-XXXXXX";
    int fd = mkstemp(path);
    char *out = NULL, *err = NULL;
    const char *argv[] = {"accelfit", "simulate", "--demo", "--workload", NULL, NULL};
    int rc;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, bad_traces[_i].trace, strlen(bad_traces[_i].trace)),
                     (ssize_t)strlen(bad_traces[_i].trace));
    close(fd);
    /* Name the file t.yaml in a private directory so the message can be matched. */
    {
        char dir[] = "/tmp/af-sim-dir-XXXXXX";
        char *named;
        ck_assert_ptr_nonnull(mkdtemp(dir));
        named = af_xasprintf("%s/t.yaml", dir);
        ck_assert_int_eq(rename(path, named), 0);
        argv[4] = named;
        rc = af_test_exec(argv, NULL, &out, &err);
        ck_assert_int_eq(rc, 2);
        ck_assert_str_eq(out, "");
        ck_assert_msg(strstr(err, bad_traces[_i].want), "got: %s", err);
        ck_assert_ptr_eq(strchr(err, '\n'), err + strlen(err) - 1);
        unlink(named);
        rmdir(dir);
        af_free(named);
    }
    free(out);
    free(err);
}
END_TEST

/*
 * 10,000 entries of 100,000 replicas each (1 MB of JSON Lines) would be 10^9 pods: the
 * decoder stops at the entry that passes the trace's bound, before making its pods.
 */
START_TEST(test_trace_pods_are_bounded_in_total)
{
    struct af_buf b = AF_BUF_INIT(0);
    struct af_sim_trace tr;
    struct af_error err;
    int rc;

    for (int i = 0; i < 10000; i++)
        ck_assert_int_eq(af_buf_printf(&b, "{\"name\":\"p%d\",\"replicas\":100000}\n", i), 0);
    memset(&err, 0, sizeof(err));
    rc = af_codec_decode_trace("t.jsonl", b.buf, b.len, &tr, &err);
    ck_assert_int_eq(rc, AF_ETOOBIG);
    ck_assert_msg(strstr(err.text, "line 3 (p2): the trace would hold more than 200000 pods"),
                  "got '%s'", err.text);
    ck_assert_uint_eq(tr.n_pods, 0);
    af_buf_release(&b);
}
END_TEST

/*
 * A trace at the bounds (arrivals and durations of nearly a hundred years on priced
 * nodes): every number of the table and of --output json is finite, and the JSON parses.
 */
static void assert_numbers_finite(json_t *j, const char *path)
{
    const char *k;
    json_t *v;
    size_t i;

    if (json_is_real(j))
        ck_assert_msg(isfinite(json_real_value(j)), "%s is %g", path, json_real_value(j));
    json_object_foreach(j, k, v) assert_numbers_finite(v, k);
    json_array_foreach(j, i, v) assert_numbers_finite(v, path);
}

/* A CPU-only cluster of the usual Karpenter mix (c6i.8xlarge, m7i.2xlarge, Graviton m7g on
 * spot and c7g): every node has its catalog price, so every side of the replay costs
 * something, and accelfit packs the four pods on the c6i.8xlarge for the hour: $1.36. */
START_TEST(test_cpu_and_graviton_nodes_are_priced)
{
    const char *argv[] = {"accelfit",
                          "simulate",
                          "--cluster",
                          af_test_path("docs/examples/cpu-mix-cluster.yaml"),
                          "--workload-from-cluster",
                          "--output",
                          "json",
                          NULL};
    char *out = NULL, *err = NULL;
    json_error_t jerr;
    json_t *j, *s;

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    j = json_loads(out, 0, &jerr);
    ck_assert_msg(j != NULL, "not JSON: %s: %.300s", jerr.text, out);
    s = json_object_get(j, "schedulers");
    ck_assert_int_eq(json_integer_value(json_object_get(j, "nodes")), 4);
    ck_assert_double_eq_tol(
        json_real_value(json_object_get(json_object_get(s, "accelfit"), "cost_usd")), 1.36, 1e-9);
    ck_assert_double_gt(
        json_number_value(json_object_get(json_object_get(s, "kube_scheduler"), "cost_usd")), 1.36);
    ck_assert_double_gt(
        json_number_value(json_object_get(json_object_get(s, "lower_bound"), "cost_usd")), 0);
    json_decref(j);
    free(out);
    free(err);
}
END_TEST

START_TEST(test_a_trace_at_the_bounds_prints_finite_numbers)
{
    static const char trace[] =
        "pods:\n"
        "  - {name: a, at: 3155000000, duration: 3155000000, requests: {nvidia.com/gpu: 1}}\n"
        "  - {name: b, at: 0, duration: 36500d, requests: {cpu: 1}}\n";
    char *dir = af_test_temp_path("bounds");   /* kept only if the test fails */
    char *path, *out = NULL, *err = NULL;
    const char *argv[] = {"accelfit", "simulate", "--demo", "--empty", "--workload", NULL, NULL,
                          NULL, NULL};
    json_error_t jerr;
    json_t *j;
    FILE *f;

    ck_assert_int_eq(mkdir(dir, 0700), 0);
    path = af_xasprintf("%s/t.yaml", dir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(trace, f);
    fclose(f);
    argv[5] = path;
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    ck_assert_msg(!strstr(out, " inf") && !strstr(out, " nan") && !strstr(out, "-nan") &&
                      !strstr(out, ".-"),
                  "%s", out);
    free(out);
    free(err);
    argv[6] = "--output";
    argv[7] = "json";
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    j = json_loads(out, 0, &jerr);
    ck_assert_msg(j != NULL, "not JSON: %s: %.300s", jerr.text, out);
    assert_numbers_finite(j, "");
    json_decref(j);
    free(out);
    free(err);
    af_free(path);
    af_free(dir);
}
END_TEST

START_TEST(test_demo_day_through_the_binary)
{
    char dir[] = "/tmp/af-sim-report-XXXXXX";
    char *report, *out = NULL, *err = NULL, *json = NULL, *html;
    const char *argv[] = {"accelfit", "simulate", "--demo", "--empty", "--workload",
                          af_test_path("examples/traces/demo-day.yaml"), "--policy",
                          af_test_path("examples/traces/demo-policy.yaml"), "--report", NULL,
                          NULL, NULL, NULL};
    size_t len;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    report = af_xasprintf("%s/report.html", dir);
    argv[9] = report;
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    ck_assert_str_eq(err, "");
    ck_assert_ptr_nonnull(strstr(out, "kube-scheduler"));
    ck_assert_ptr_nonnull(strstr(out, "rollout detector-to-t4"));
    /* kube-scheduler placed the detector's pods on classes of neither side: the table and
     * the page say so in the same words, not "none placed" */
    ck_assert_ptr_nonnull(strstr(out, "  kube-scheduler: none on the target or source classes "
                                      "(its pods went to other classes, or were not placed)"));
    ck_assert_ptr_null(strstr(out, "none placed"));
    ck_assert_ptr_nonnull(strstr(out, "tenants (the policy's)"));
    ck_assert_ptr_nonnull(strstr(out, "team-llm: budget $60.00/h, hard"));
    ck_assert_ptr_nonnull(strstr(out, "team-vision: budget $10.00/h, soft"));
    ck_assert_ptr_nonnull(strstr(out, "report: "));
    {
        FILE *f = fopen(report, "r");
        ck_assert_ptr_nonnull(f);
        html = af_xcalloc(1, 1 << 20);
        len = fread(html, 1, (1 << 20) - 1, f);
        fclose(f);
        ck_assert_uint_gt(len, 1000);
        assert_well_formed(html);
        ck_assert_ptr_nonnull(strstr(html, "team-llm: budget $60.00/h, hard"));
        ck_assert_ptr_nonnull(strstr(html, "hours over budget"));
        ck_assert_ptr_nonnull(strstr(html, "kube-scheduler: none on the target or source classes"));
        af_free(html);
    }
    free(out);
    free(err);
    /* The JSON for scripts holds the same totals as the table. */
    argv[8] = "--output";
    argv[9] = "json";
    ck_assert_int_eq(af_test_exec(argv, NULL, &json, &err), 0);
    ck_assert_ptr_nonnull(strstr(json, "\"schedulers\":{\"accelfit\":{\"cost_usd\":"));
    ck_assert_ptr_nonnull(strstr(json, "\"placements\":[{\"namespace\":"));
    ck_assert_ptr_nonnull(strstr(json, "\"tenants_from\":\"policy\""));
    ck_assert_ptr_nonnull(strstr(json, "{\"name\":\"team-llm\","));
    free(json);
    free(err);
    unlink(report);
    rmdir(dir);
    af_free(report);
}
END_TEST

/* A day on a cluster with a Capacity Block, an ODCR, overlaid and discounted on-demand
 * nodes and spot (examples/prepaid): priced at what a pod adds, the prepaid capacity is
 * used first, so the day costs less than with every node at its rate (as before prepaid
 * capacity was known: prices.prepaid amortized), and far less than kube-scheduler alone;
 * the 8 h job that arrives at 16:00 does not take the block that ends at 20:00. */
static double cost_of(const char *out, int side)
{
    const char *at = strstr(out, "cost over the trace");
    double v[3] = {-1, -1, -1};
    char a[32], b[32], c[32];

    ck_assert_ptr_nonnull(at);
    ck_assert_int_eq(sscanf(at + strlen("cost over the trace"), " %31s %31s %31s", a, b, c), 3);
    for (int i = 0; i < 3; i++) {
        char *s = i == 0 ? a : i == 1 ? b : c, *w = s;
        for (char *r = s; *r; r++)
            if (*r != '$' && *r != ',')
                *w++ = *r;
        *w = '\0';
        v[i] = strtod(s, NULL);
    }
    return v[side];
}

START_TEST(test_prepaid_day_costs_what_the_cluster_pays)
{
    char *out = NULL, *err = NULL, *amortized = NULL, *policy, *text;
    char dir[] = "/tmp/af-sim-prepaid-XXXXXX";
    const char *argv[] = {"accelfit", "simulate", "--cluster",
                          af_test_path("examples/prepaid/cluster.yaml"), "--workload",
                          af_test_path("examples/prepaid/day.yaml"), "--policy",
                          af_test_path("examples/prepaid/policy.yaml"), "--output", "json", NULL};
    size_t len;
    FILE *f;

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    /* the long job is not on the block, the 7 h pre-training runs are */
    ck_assert_msg(strstr(out, "\"name\":\"llm-long-run\",\"accelfit\":{\"node\":\"p5-od-"),
                  "%s", out);
    ck_assert_msg(strstr(out, "\"name\":\"llm-pretrain-0\",\"accelfit\":{\"node\":\"p5-block-"),
                  "%s", out);
    ck_assert_msg(strstr(out, "\"name\":\"llm-pretrain-1\",\"accelfit\":{\"node\":\"p5-block-"),
                  "%s", out);
    free(out);
    free(err);
    argv[8] = NULL;
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    ck_assert_ptr_nonnull(strstr(out, "prepaid capacity idle"));
    ck_assert_msg(cost_of(out, 0) < cost_of(out, 1) / 2, "%s", out);
    /* every node at its rate, as if the reservations were bought by the hour */
    ck_assert_ptr_nonnull(mkdtemp(dir));
    text = af_test_read("examples/prepaid/policy.yaml", &len);
    policy = af_xasprintf("%s/amortized.yaml", dir);
    f = fopen(policy, "w");
    ck_assert_ptr_nonnull(f);
    {
        char *at = strstr(text, "prepaid: marginal");
        ck_assert_ptr_nonnull(at);
        fprintf(f, "%.*sprepaid: amortized%s", (int)(at - text), text, at + strlen("prepaid: marginal"));
    }
    fclose(f);
    argv[7] = policy;
    ck_assert_int_eq(af_test_exec(argv, NULL, &amortized, &err), 0);
    ck_assert_msg(cost_of(out, 0) + 100 < cost_of(amortized, 0), "marginal %g, amortized %g",
                  cost_of(out, 0), cost_of(amortized, 0));
    unlink(policy);
    rmdir(dir);
    af_free(policy);
    af_free(text);
    free(out);
    free(amortized);
    free(err);
}
END_TEST

START_TEST(test_usage_errors)
{
    static const char *const cases[][6] = {
        {"accelfit", "simulate", "--workload", "x", NULL},
        {"accelfit", "simulate", "--demo", NULL},
        {"accelfit", "simulate", "--demo", "--workload-from-cluster", "--workload", "x"},
        {"accelfit", "simulate", "--demo", "--workload-from-cluster", "--output", "xml"},
        {"accelfit", "simulate", "--demo", "--workload-from-cluster", "--percentage-of-nodes-to-score", "101"},
        {"accelfit", "simulate", "--demo", "--frobnicate", NULL},
    };
    for (size_t i = 0; i < AF_ARRAY_SIZE(cases); i++) {
        char *out = NULL, *err = NULL;
        ck_assert_int_eq(af_test_exec(cases[i], NULL, &out, &err), 2);
        ck_assert_str_eq(out, "");
        ck_assert_ptr_nonnull(strstr(err, "accelfit simulate: "));
        free(out);
        free(err);
    }
}
END_TEST

START_TEST(test_help)
{
    const char *argv[] = {"accelfit", "simulate", "--help", NULL};
    char *out = NULL, *err = NULL;

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    ck_assert_str_eq(err, "");
    ck_assert_ptr_nonnull(strstr(out, "usage: accelfit simulate"));
    ck_assert_ptr_nonnull(strstr(out, "--percentage-of-nodes-to-score N"));
    ck_assert_ptr_nonnull(strstr(out, "--workload-from-cluster"));
    ck_assert_ptr_nonnull(strstr(out, "--report FILE.html"));
    ck_assert_ptr_null(strstr(out, "%%"));
    free(out);
    free(err);
}
END_TEST

static Suite *af_simulate_suite(void)
{
    Suite *s = suite_create("simulate");
    TCase *tc = tcase_create("accounting");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_tiny_trace_costs_to_the_cent);
    tcase_add_test(tc, test_neuroncore_pods_hold_their_devices);
    tcase_add_loop_test(tc, test_lower_bound_never_above_either_scheduler, 0, 8);
    tcase_add_test(tc, test_scan_cut_short_misses_the_cheap_node);
    tcase_add_test(tc, test_rollout_share_is_steered_over_hours);
    tcase_add_test(tc, test_hard_budget_refuses_premium_until_spend_drops);
    tcase_add_test(tc, test_without_a_budget_the_premium_node_is_taken_at_once);
    tcase_add_test(tc, test_running_spend_equals_costs_compute);
    tcase_add_test(tc, test_html_report_is_well_formed_and_holds_the_table);
    suite_add_tcase(s, tc);

    tc = tcase_create("kube_scheduler_model");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_least_allocated_and_balanced_by_hand);
    tcase_add_test(tc, test_pod_without_requests_is_scored_as_100m_and_200mi);
    tcase_add_loop_test(tc, test_num_feasible_nodes_to_find, 0, (int)AF_ARRAY_SIZE(feasible_cases));
    suite_add_tcase(s, tc);

    tc = tcase_create("inputs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_cluster_pods_become_a_trace);
    tcase_add_test(tc, test_durations_parse);
    tcase_add_test(tc, test_json_lines_trace);
    tcase_add_loop_test(tc, test_bad_trace_exits_2_with_one_line, 0, (int)AF_ARRAY_SIZE(bad_traces));
    tcase_add_test(tc, test_demo_day_through_the_binary);
    tcase_add_test(tc, test_prepaid_day_costs_what_the_cluster_pays);
    tcase_add_test(tc, test_trace_pods_are_bounded_in_total);
    tcase_add_test(tc, test_a_trace_at_the_bounds_prints_finite_numbers);
    tcase_add_test(tc, test_cpu_and_graviton_nodes_are_priced);
    tcase_add_test(tc, test_usage_errors);
    tcase_add_test(tc, test_help);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_simulate_suite());
}
