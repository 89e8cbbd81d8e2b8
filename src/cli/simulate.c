/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `accelfit simulate`: replays a trace of pods on a cluster with accelfit and with
 * kube-scheduler alone, and prints what each would pay (src/sim does the work).
 * Inputs are read whole before anything is printed, so bad input is one line on
 * stderr and exit status 2, never a half-printed comparison.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/simulate.h"
#include "accelfit/util.h"
#include "cli/cli.h"
#include "accelfit/banned.h"

static const char usage[] =
    "usage: accelfit simulate (--cluster FILE | --demo) (--workload TRACE | --workload-from-cluster)\n"
    "                         [options]\n"
    "\n"
    "Replays a trace of pod arrivals and departures on a cluster twice, side by side: with\n"
    "accelfit (kube-scheduler's filters, then accelfit's own filter and prioritize, the code\n"
    "the server runs, with its score added at the extender weight) and with kube-scheduler's\n"
    "default scoring alone (LeastAllocated, BalancedAllocation, taints and tolerations,\n"
    "nodeSelector; no cost or hardware class). Also computes a lower bound: every pod on the\n"
    "cheapest node that can hold it, packed perfectly. Prints, for each: cost over the trace\n"
    "(a node is paid while a pod runs on it) in total and per class, pods on their first-tier\n"
    "class, fallbacks, pods that waited and for how long, rollout shares, idle accelerator\n"
    "cost, and each tenant's spend against its budget (average and peak $/h, hours over).\n"
    "With a policy that lists tenants, pods go to tenants as the server assigns them and\n"
    "accelfit's side applies their classes and budgets; kube-scheduler knows no budgets.\n"
    "Nothing is contacted: the cluster is a file.\n"
    "\n"
    "inputs:\n"
    "  --cluster FILE            nodes (and running pods) as `kubectl get nodes,pods -A -o json`\n"
    "                            prints, JSON or YAML; pods bound to a node stay for the trace\n"
    "  --demo                    the embedded demo cluster (manifests/demo-cluster.yaml)\n"
    "  --empty                   start with no pods: the cluster's running pods are left out\n"
    "                            (with --workload-from-cluster, DaemonSet pods still run)\n"
    "  --workload TRACE          the trace: YAML or JSON with pods: [...], or JSON Lines\n"
    "                            (docs/simulate.md; examples/traces/demo-day.yaml); every time\n"
    "                            in it at most 100 years, at most 200,000 pods in all\n"
    "  --workload-from-cluster   replay the cluster file's own pods instead: each arrives at its\n"
    "                            creationTimestamp and runs as long as its status says\n"
    "  --policy FILE             policy YAML (default: the built-in policy); its rollouts and\n"
    "                            tenants steer accelfit's side\n"
    "  --catalog FILE            instance catalog YAML (default: the built-in catalog)\n"
    "\n"
    "autoscaling (docs/simulate.md, \"Autoscaling\"):\n"
    "  --autoscale NODEPOOLS     Karpenter v1 NodePools (YAML; examples/karpenter-nodepools.yaml):\n"
    "                            a pod that fits no node launches the cheapest instance type of\n"
    "                            the heaviest NodePool that holds it (its requests, nodeSelector,\n"
    "                            tolerations; on accelfit's side first with the preferences the\n"
    "                            webhook would write, relaxed one at a time); launched nodes are\n"
    "                            paid from launch until removed empty\n"
    "  --consolidate-after DURATION\n"
    "                            how long a launched node stays empty before it is removed\n"
    "                            (default 30s)\n"
    "  --relax-preferences ORDER lightest-first (default: every preferred term required, the\n"
    "                            lightest relaxed first, as Karpenter's docs say) or\n"
    "                            heaviest-first (the heaviest term alone required, dropped first,\n"
    "                            as Karpenter's code does)\n"
    "  --no-nodes                with --autoscale: start with no nodes at all (the cluster\n"
    "                            still names the input, its nodes are left out)\n"
    "\n"
    "the model of kube-scheduler:\n"
    "  --percentage-of-nodes-to-score N\n"
    "                            kube-scheduler's percentageOfNodesToScore: 0 (default) is its\n"
    "                            adaptive rule, 50 - nodes/125 percent, at least 5% and 100\n"
    "                            nodes; 1..100 a fixed share. Shows nodes examined per pod and\n"
    "                            how often accelfit then misses a cheaper node\n"
    "  --extender-weight N       the weight of accelfit's extenders entry (default 5, as in\n"
    "                            manifests/base/kube-scheduler-config.yaml)\n"
    "\n"
    "output:\n"
    "  --output FORMAT           table (default) or json; --json is short for --output json\n"
    "  --report FILE.html        also write a self-contained HTML page with charts: cost over\n"
    "                            time per class, placements by class, rollout share over time\n"
    "  --buckets N               points of the time series in the report (default 96)\n"
    "  -h, --help                show this help\n"
    "\n"
    "examples:\n"
    "  accelfit simulate --demo --empty --workload examples/traces/demo-day.yaml \\\n"
    "      --policy examples/traces/demo-policy.yaml --report report.html\n"
    "  kubectl get nodes,pods -A -o json > cluster.json\n"
    "  accelfit simulate --cluster cluster.json --workload-from-cluster --output json\n"
    "\n"
    "exit status: 0 done, 1 the report cannot be written, 2 bad usage or bad input (one line\n"
    "on stderr).\n";

static const char cmd[] = "simulate";

static int int_flag(const char *name, const char *v, int64_t min, int64_t max, int *out)
{
    int64_t x;

    if (af_parse_int64(v, min, max, &x))
        return af_cli_fail(cmd, "%s: expected an integer from %lld to %lld, got '%s'", name,
                           (long long)min, (long long)max, v);
    *out = (int)x;
    return 0;
}

static int read_input(const char *path, struct af_buf *b)
{
    int rc = af_buf_read_file(b, path);
    if (rc)
        return af_cli_fail(cmd, "cannot read '%s': %s", path, af_strerror(rc));
    return 0;
}

static int decode_error(const struct af_error *err)
{
    char msg[1024];

    af_error_format(err, msg, sizeof(msg));
    return af_cli_fail(cmd, "%s", msg);
}

int af_cmd_simulate(int argc, char **argv)
{
    const char *cluster = NULL, *workload = NULL, *policy = NULL, *catalog = NULL;
    const char *output = "table", *report = NULL, *v = NULL, *autoscale = NULL;
    const char *relax = "lightest-first";
    struct af_sim_nodepools pools;
    struct af_sim_offerings offers;
    bool demo = false, from_cluster = false, empty = false, no_nodes = false;
    struct af_sim_options opt = AF_SIM_OPTIONS_INIT;
    struct af_config *cfg = NULL;
    struct af_sim_cluster cl;
    struct af_sim_trace tr;
    struct af_sim_result res;
    struct af_buf cfile = AF_BUF_INIT(0), tfile = AF_BUF_INIT(0), out = AF_BUF_INIT(0);
    struct af_error err;
    int rc = 0;

    memset(&cl, 0, sizeof(cl));
    memset(&pools, 0, sizeof(pools));
    memset(&offers, 0, sizeof(offers));
    memset(&tr, 0, sizeof(tr));
    memset(&res, 0, sizeof(res));
    memset(&err, 0, sizeof(err));
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 0;
        }
        if (af_cli_flag(argc, argv, &i, "--demo", NULL) == 1) {
            demo = true;
            continue;
        }
        if (af_cli_flag(argc, argv, &i, "--empty", NULL) == 1) {
            empty = true;
            continue;
        }
        if (af_cli_flag(argc, argv, &i, "--no-nodes", NULL) == 1) {
            no_nodes = true;
            continue;
        }
        if (af_cli_flag(argc, argv, &i, "--workload-from-cluster", NULL) == 1) {
            from_cluster = true;
            continue;
        }
        if (af_cli_flag(argc, argv, &i, "--json", NULL) == 1) {   /* --output json */
            output = "json";
            continue;
        }
        v = NULL;
        if ((m = af_cli_flag(argc, argv, &i, "--cluster", &v)) == 1)
            cluster = v;
        else if (m == 0 && (m = af_cli_flag(argc, argv, &i, "--workload", &v)) == 1)
            workload = v;
        else if (m == 0 && (m = af_cli_flag(argc, argv, &i, "--policy", &v)) == 1)
            policy = v;
        else if (m == 0 && (m = af_cli_flag(argc, argv, &i, "--catalog", &v)) == 1)
            catalog = v;
        else if (m == 0 && (m = af_cli_flag(argc, argv, &i, "--output", &v)) == 1)
            output = v;
        else if (m == 0 && (m = af_cli_flag(argc, argv, &i, "--report", &v)) == 1)
            report = v;
        else if (m == 0 && (m = af_cli_flag(argc, argv, &i, "--autoscale", &v)) == 1)
            autoscale = v;
        else if (m == 0 && (m = af_cli_flag(argc, argv, &i, "--relax-preferences", &v)) == 1)
            relax = v;
        else if (m == 0 && (m = af_cli_flag(argc, argv, &i, "--consolidate-after", &v)) == 1) {
            opt.consolidate_after = af_sim_parse_duration(v);
            if (opt.consolidate_after < 0)
                return af_cli_fail(cmd, "%s: expected a duration (30s, 5m, 1h), got '%s'", a, v);
        }
        else if (m == 0 &&
                 (m = af_cli_flag(argc, argv, &i, "--percentage-of-nodes-to-score", &v)) == 1) {
            if (int_flag(a, v, 0, 100, &opt.percentage_of_nodes_to_score))
                return 2;
        } else if (m == 0 && (m = af_cli_flag(argc, argv, &i, "--extender-weight", &v)) == 1) {
            if (int_flag(a, v, 1, 1000, &opt.extender_weight))
                return 2;
        } else if (m == 0 && (m = af_cli_flag(argc, argv, &i, "--buckets", &v)) == 1) {
            if (int_flag(a, v, 1, 2000, &opt.buckets))
                return 2;
        }
        if (m == -1)
            return af_cli_fail(cmd, "%s needs a value (see accelfit simulate --help)", a);
        if (m == 0)
            return af_cli_fail(cmd, "unknown %s '%s' (see accelfit simulate --help)",
                               a[0] == '-' ? "option" : "argument", a);
    }
    if (!!cluster + demo != 1)
        return af_cli_fail(cmd, "give the cluster: --cluster FILE or --demo (one of them)");
    if (!!workload + from_cluster != 1)
        return af_cli_fail(cmd, "give the pods: --workload TRACE or --workload-from-cluster (one "
                                "of them)");
    if (no_nodes && (!autoscale || from_cluster))
        return af_cli_fail(cmd, "--no-nodes needs --autoscale and --workload (it starts with no "
                                "nodes at all)");
    if (strcmp(relax, "lightest-first") && strcmp(relax, "heaviest-first"))
        return af_cli_fail(cmd, "--relax-preferences: expected lightest-first or heaviest-first, "
                                "got '%s'",
                           relax);
    if (strcmp(output, "table") && strcmp(output, "json"))
        return af_cli_fail(cmd, "--output: expected table or json, got '%s'", output);

    rc = af_cli_load_config(cmd, catalog, policy, &cfg);
    if (rc)
        goto done;
    if (demo) {
        rc = af_codec_decode_sim_cluster(cfg, "<embedded demo cluster>",
                                         af_embedded_demo_cluster_yaml,
                                         af_embedded_demo_cluster_yaml_len, &cl,
                                         from_cluster ? &tr : NULL, &err);
    } else {
        rc = read_input(cluster, &cfile);
        if (rc)
            goto done;
        rc = af_codec_decode_sim_cluster(cfg, cluster, cfile.buf ? cfile.buf : "", cfile.len, &cl,
                                         from_cluster ? &tr : NULL, &err);
        if (!rc)   /* DRA: nodes' devices from ResourceSlices, pods' from their claims */
            rc = af_sim_apply_dra(cluster, cfile.buf ? cfile.buf : "", cfile.len, &cl,
                                  from_cluster ? &tr : NULL, NULL, &err);
    }
    if (rc) {
        rc = decode_error(&err);
        goto done;
    }
    if (empty)
        af_sim_cluster_drop_pods(&cl);
    if (no_nodes)
        af_sim_cluster_release(&cl);   /* the autoscaler starts from nothing */
    if (!cl.n_nodes && !autoscale) {
        rc = af_cli_fail(cmd, "the cluster '%s' has no nodes",
                         demo ? "<embedded demo cluster>" : cluster);
        goto done;
    }
    if (workload) {
        rc = read_input(workload, &tfile);
        if (rc)
            goto done;
        rc = af_codec_decode_trace(workload, tfile.buf ? tfile.buf : "", tfile.len, &tr, &err);
        if (rc) {
            rc = decode_error(&err);
            goto done;
        }
    }

    if (autoscale) {
        struct af_buf pfile = AF_BUF_INIT(0);
        rc = read_input(autoscale, &pfile);
        if (!rc) {
            rc = af_sim_nodepools_load(autoscale, pfile.buf ? pfile.buf : "", pfile.len, &pools,
                                       &err);
            if (rc)
                rc = decode_error(&err);
        }
        af_buf_release(&pfile);
        if (rc)
            goto done;
        af_sim_offerings_build(cfg, &pools, &offers);
        if (!strcmp(relax, "heaviest-first"))
            offers.relax = AF_SIM_RELAX_HEAVIEST_FIRST;
        opt.autoscale = &offers;
    }
    af_sim_run(cfg, &cl, &tr, &opt, &res);
    if (report) {
        struct af_buf html = AF_BUF_INIT(0);
        char title[600];
        FILE *f;
        int why;
        snprintf(title, sizeof(title), "cluster %s, %s%s%s",
                 demo ? "--demo" : cluster, workload ? "trace " : "its own pods",
                 workload ? workload : "", policy ? ", policy " : "");
        if (policy)
            snprintf(title + strlen(title), sizeof(title) - strlen(title), "%s", policy);
        if (af_sim_render_html(&res, title, &html))
            af_assert(!"unbounded buffer refused output");
        errno = 0;
        f = fopen(report, "w");
        why = f ? 0 : errno;
        if (f && fwrite(html.buf, 1, html.len, f) != html.len) {
            why = errno ? errno : EIO;
            fclose(f);
        } else if (f && fclose(f)) {
            why = errno ? errno : EIO;
        }
        if (why) {
            fprintf(stderr,
                    "accelfit simulate: cannot write the report '%s': %s (give --report a file "
                    "in a directory that exists and you may write to)\n",
                    report, strerror(why));
            af_buf_release(&html);
            rc = 1;
            goto done;
        }
        af_buf_release(&html);
    }
    if (!strcmp(output, "json") ? af_sim_render_json(&res, &out) : af_sim_render_text(&res, &out))
        af_assert(!"unbounded buffer refused output");
    fwrite(out.buf, 1, out.len, stdout);
    if (report && strcmp(output, "json"))
        printf("\nreport: %s\n", report);
done:
    af_sim_result_release(&res);
    af_sim_offerings_release(&offers);
    af_sim_nodepools_release(&pools);
    af_sim_trace_release(&tr);
    af_sim_cluster_release(&cl);
    af_config_unref(cfg);
    af_buf_release(&cfile);
    af_buf_release(&tfile);
    af_buf_release(&out);
    return rc;
}
