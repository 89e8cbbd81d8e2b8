/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_simulate: `accelfit simulate` at scale, in process.
 *
 * Synthesizes a cluster of N nodes (default 1,000: CPU, A10G, T4, A100, inf2 and trn1
 * instance types, a quarter spot, GPU and Neuron nodes tainted) and a trace of P pods
 * (default 10,000) arriving over 24 hours (CPU preprocessing, 1-GPU inference, 4- and
 * 8-GPU training, Neuron inference; each runs 10 minutes to 6 hours), decodes both
 * through the codec as the command does, and times af_sim_run: both schedulers and the
 * lower bound, with kube-scheduler's adaptive percentageOfNodesToScore and with 100%,
 * then again under a policy whose tenants (the trace's seven namespaces) have $250/h
 * budgets, hard and soft alternately.
 * Usage: bench_simulate [nodes] [pods]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/simulate.h"
#include "accelfit/util.h"

static const struct {
    const char *type, *cpu, *mem, *accel, *taint;
} types[] = {
    {"m6i.4xlarge", "15890m", "60Gi", "", ""},
    {"c6i.8xlarge", "31850m", "60Gi", "", ""},
    {"g5.xlarge", "3920m", "14Gi", ",\"nvidia.com/gpu\":\"1\"", "nvidia.com/gpu"},
    {"g5.12xlarge", "47810m", "186Gi", ",\"nvidia.com/gpu\":\"4\"", "nvidia.com/gpu"},
    {"g4dn.xlarge", "3920m", "14Gi", ",\"nvidia.com/gpu\":\"1\"", "nvidia.com/gpu"},
    {"p4d.24xlarge", "95690m", "1100Gi", ",\"nvidia.com/gpu\":\"8\"", "nvidia.com/gpu"},
    {"inf2.xlarge", "3920m", "14Gi", ",\"aws.amazon.com/neuron\":\"1\"", "aws.amazon.com/neuron"},
    {"trn1.32xlarge", "127610m", "490Gi", ",\"aws.amazon.com/neuron\":\"16\"",
     "aws.amazon.com/neuron"},
};

static void cluster(struct af_buf *b, int nodes)
{
    af_assert(!af_buf_puts(b, "{\"kind\":\"List\",\"items\":["));
    for (int i = 0; i < nodes; i++) {
        /* Mostly CPU and small GPU nodes, a few big ones. */
        static const int mix[] = {0, 0, 1, 2, 2, 3, 4, 0, 6, 2, 0, 5, 1, 2, 7, 6};
        int t = mix[i % 16];
        char taint[160] = "";
        if (*types[t].taint)
            snprintf(taint, sizeof(taint),
                     "\"taints\":[{\"key\":\"%s\",\"value\":\"true\",\"effect\":\"NoSchedule\"}]",
                     types[t].taint);
        af_assert(!af_buf_printf(
            b,
            "%s{\"kind\":\"Node\",\"metadata\":{\"name\":\"node-%05d\",\"labels\":{"
            "\"node.kubernetes.io/instance-type\":\"%s\",\"karpenter.sh/capacity-type\":\"%s\"}},"
            "\"spec\":{%s},\"status\":{\"allocatable\":{\"cpu\":\"%s\",\"memory\":\"%s\","
            "\"pods\":\"110\"%s}}}",
            i ? "," : "", i, types[t].type, i % 4 ? "on-demand" : "spot", taint, types[t].cpu,
            types[t].mem, types[t].accel));
    }
    af_assert(!af_buf_puts(b, "]}"));
}

static void trace(struct af_buf *b, int pods)
{
    unsigned seed = 42;

    for (int i = 0; i < pods; i++) {
        int kind = rand_r(&seed) % 10, at = rand_r(&seed) % 86400;
        int dur = 600 + rand_r(&seed) % 21000;
        const char *req, *ann, *tol = "";
        switch (kind) {
        case 0: case 1: case 2: case 3:
            req = "{\"cpu\":\"2\",\"memory\":\"4Gi\"}";
            ann = "preprocessing";
            break;
        case 4: case 5: case 6:
            req = "{\"cpu\":\"2\",\"memory\":\"8Gi\",\"nvidia.com/gpu\":\"1\"}";
            ann = "inference";
            tol = "nvidia.com/gpu";
            break;
        case 7:
            req = rand_r(&seed) % 2 ? "{\"cpu\":\"16\",\"memory\":\"64Gi\",\"nvidia.com/gpu\":\"4\"}"
                                    : "{\"cpu\":\"32\",\"memory\":\"256Gi\",\"nvidia.com/gpu\":\"8\"}";
            ann = "training";
            tol = "nvidia.com/gpu";
            break;
        default:
            req = "{\"cpu\":\"2\",\"memory\":\"8Gi\",\"aws.amazon.com/neuron\":\"1\"}";
            ann = "inference";
            tol = "aws.amazon.com/neuron";
            break;
        }
        af_assert(!af_buf_printf(
            b,
            "{\"name\":\"pod-%05d\",\"namespace\":\"team-%d\",\"at\":%d,\"duration\":%d,"
            "\"annotations\":{\"accelfit.io/workload\":\"%s\"},\"requests\":%s%s%s%s}\n",
            i, i % 7, at, dur, ann, req, *tol ? ",\"tolerations\":[{\"key\":\"" : "", tol,
            *tol ? "\",\"operator\":\"Exists\"}]" : ""));
    }
}

int main(int argc, char **argv)
{
    int nodes = argc > 1 ? atoi(argv[1]) : 1000, pods = argc > 2 ? atoi(argv[2]) : 10000;
    struct af_buf cb = AF_BUF_INIT(0), tb = AF_BUF_INIT(0);
    struct af_config *cfg = NULL;
    struct af_sim_cluster cl;
    struct af_sim_trace tr;
    struct af_error err;
    uint64_t t0;

    memset(&err, 0, sizeof(err));
    af_assert(af_config_load(&cfg, NULL, NULL, &err) == 0);
    cluster(&cb, nodes);
    trace(&tb, pods);
    t0 = af_now_ns();
    af_assert(af_codec_decode_sim_cluster(cfg, "bench", cb.buf, cb.len, &cl, NULL, &err) == 0);
    af_assert(af_codec_decode_trace("bench", tb.buf, tb.len, &tr, &err) == 0);
    printf("== bench_simulate: %d nodes, %d pods over 24 h\n", nodes, pods);
    printf("decode cluster and trace:        %8.1f ms\n", (double)(af_now_ns() - t0) / 1e6);
    for (int pct = 0; pct <= 100; pct += 100) {
        struct af_sim_options opt = AF_SIM_OPTIONS_INIT;
        struct af_sim_result r;
        double ms;
        opt.percentage_of_nodes_to_score = pct;
        t0 = af_now_ns();
        af_sim_run(cfg, &cl, &tr, &opt, &r);
        ms = (double)(af_now_ns() - t0) / 1e6;
        printf("simulate, percentage %-3s        %8.1f ms  (%.0f us per pod and scheduler; "
               "accelfit $%.0f, kube-scheduler $%.0f, bound $%.0f; examined %.0f nodes per "
               "pod, %d placements missed a cheaper node)\n",
               pct ? "100" : "0", ms, ms * 1000.0 / (2.0 * pods),
               r.side[AF_SIM_ACCELFIT].cost_usd, r.side[AF_SIM_KUBE].cost_usd,
               r.side[AF_SIM_BOUND].cost_usd, r.side[AF_SIM_KUBE].nodes_examined_avg,
               r.side[AF_SIM_ACCELFIT].cheapest_missed);
        af_sim_result_release(&r);
    }
    /* The same under tenants with budgets (the trace's seven namespaces, hard and soft
     * alternately): accelfit's side decides with each tenant's running spend. */
    {
        struct af_buf pb = AF_BUF_INIT(0);
        struct af_config *tcfg = NULL;
        struct af_sim_options opt = AF_SIM_OPTIONS_INIT;
        struct af_sim_result r;
        double ms, over[2] = {0, 0};
        af_assert(!af_buf_add(&pb, af_embedded_policy_yaml, af_embedded_policy_yaml_len));
        af_assert(!af_buf_puts(&pb, "\ntenants:\n"));
        for (int t = 0; t < 7; t++)
            af_assert(!af_buf_printf(&pb,
                                     "  - {name: team-%d, namespaces: [team-%d], "
                                     "budget_usd_per_hour: 250, over_budget: %s}\n",
                                     t, t, t % 2 ? "soft" : "hard"));
        af_assert(af_config_load_mem(&tcfg, "<embedded>", af_embedded_catalog_yaml,
                                     af_embedded_catalog_yaml_len, "bench-tenants", pb.buf, pb.len,
                                     &err) == 0);
        t0 = af_now_ns();
        af_sim_run(tcfg, &cl, &tr, &opt, &r);
        ms = (double)(af_now_ns() - t0) / 1e6;
        for (size_t i = 0; i < r.n_tenants; i++)
            for (int s = 0; s < 2; s++)
                over[s] += r.tenants[i].over_hours[s];
        printf("simulate, 7 tenants at $250/h    %8.1f ms  (%.0f us per pod and scheduler; "
               "accelfit $%.0f, %d pods waited; tenant-hours over budget: accelfit %.1f, "
               "kube-scheduler %.1f)\n",
               ms, ms * 1000.0 / (2.0 * pods), r.side[AF_SIM_ACCELFIT].cost_usd,
               r.side[AF_SIM_ACCELFIT].waited, over[0], over[1]);
        af_sim_result_release(&r);
        af_config_unref(tcfg);
        af_buf_release(&pb);
    }
    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
    af_config_unref(cfg);
    af_buf_release(&cb);
    af_buf_release(&tb);
    return 0;
}
