/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the cluster really pays (docs/pricing.md#what-the-cluster-really-pays): prepaid
 * capacity (ODCRs, Capacity Blocks) from Karpenter's, EKS's and accelfit's labels and
 * annotations, priced at what a pod adds; Karpenter NodeOverlays; Savings Plans and
 * negotiated discounts; and how prioritize ranks them, with the embedded catalog and policy.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/decide.h"
#include "accelfit/prices.h"
#include "accelfit/util.h"
#include "support/fake_api.h"
#include "support/http_client.h"
#include "support/support.h"

#define NOW 1.8e9   /* 2027-01-15: the unix time decisions are made at */

static struct af_config *load(const char *policy_extra)
{
    struct af_config *cfg = NULL;
    struct af_error err;

    if (!policy_extra) {
        ck_assert_int_eq(af_config_load(&cfg, NULL, NULL, &err), 0);
        return cfg;
    }
    {
        /* the embedded policy with its prices: section replaced */
        const char *pol = af_embedded_policy_yaml;
        const char *at = strstr(pol, "prices:\n  default_spot_discount_pct: 60\n");
        char *text;
        ck_assert_ptr_nonnull(at);
        text = af_xasprintf("%.*sprices:\n  default_spot_discount_pct: 60\n%s%s",
                            (int)(at - pol), pol, policy_extra,
                            at + strlen("prices:\n  default_spot_discount_pct: 60\n"));
        if (af_config_load_mem(&cfg, "<embedded>", af_embedded_catalog_yaml,
                               af_embedded_catalog_yaml_len, "test-policy.yaml", text,
                               strlen(text), &err) != 0)
            ck_abort_msg("policy: %s", err.text);
        af_free(text);
    }
    return cfg;
}

/* A node of `type` with `gpus` GPUs (0: a CPU node), extra labels and annotations as JSON
 * members ("" for none). */
static struct af_node_info *node(const struct af_config *cfg, const char *name, const char *type,
                                 int gpus, const char *labels, const char *anns)
{
    struct af_node_info *n = NULL;
    struct af_error err;
    char dev[48] = "";
    char *json;

    if (gpus)
        snprintf(dev, sizeof(dev), ",\"nvidia.com/gpu\":\"%d\"", gpus);
    json = af_xasprintf(
        "{\"metadata\":{\"name\":\"%s\",\"labels\":{\"node.kubernetes.io/instance-type\":\"%s\""
        "%s%s},\"annotations\":{%s}},\"status\":{\"allocatable\":{\"cpu\":\"190\","
        "\"memory\":\"2000Gi\",\"pods\":\"110\"%s}}}",
        name, type, *labels ? "," : "", labels, anns, dev);

    ck_assert_int_eq(af_codec_decode_node(cfg, json, strlen(json), &n, &err), 0);
    free(json);
    return n;
}

static struct af_pod_info *pod(const char *anns, int gpus, const char *extra_spec)
{
    struct af_pod_info *p = NULL;
    struct af_error err;
    char *json = af_xasprintf(
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"ml\",\"uid\":\"u1\",\"annotations\":{%s}},"
        "\"spec\":{%s\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\","
        "\"nvidia.com/gpu\":\"%d\"}}}]}}",
        anns, extra_spec, gpus);

    ck_assert_int_eq(af_codec_decode_pod(json, strlen(json), &p, &err), 0);
    free(json);
    return p;
}

/* Prioritize over `n` nodes (no pods on them unless `busy` says so); scores into out. */
static void rank(const struct af_config *cfg, const struct af_pod_info *p,
                 struct af_node_info **nodes, const int *busy, size_t n,
                 struct af_node_decision *out)
{
    struct af_node_view v[8];
    struct af_plan plan;

    memset(v, 0, sizeof(v));
    for (size_t i = 0; i < n; i++) {
        v[i].info = nodes[i];
        if (busy && busy[i]) {
            v[i].npods = 1;
            v[i].used.v[AF_RES_GPU] = busy[i];
        }
    }
    af_plan_pod(cfg->policy, cfg->catalog, p, &plan);
    plan.now = NOW;
    af_prioritize(cfg->policy, &plan, p, v, NULL, n, out);
    af_filter(cfg->policy, &plan, p, v, NULL, n, out + n, NULL);
}

START_TEST(test_prepaid_from_every_label_scheme)
{
    struct af_config *cfg = load(NULL);
    struct af_node_info *k = node(cfg, "karpenter-block", "p5.48xlarge", 8,
                                  "\"karpenter.sh/capacity-type\":\"reserved\","
                                  "\"karpenter.k8s.aws/capacity-reservation-type\":\"capacity-block\","
                                  "\"karpenter.k8s.aws/capacity-reservation-id\":\"cr-0b10c\"",
                                  "");
    struct af_node_info *o = node(cfg, "karpenter-odcr", "p4d.24xlarge", 8,
                                  "\"karpenter.sh/capacity-type\":\"reserved\","
                                  "\"karpenter.k8s.aws/capacity-reservation-type\":\"default\","
                                  "\"karpenter.k8s.aws/capacity-reservation-id\":\"cr-0dc12\"",
                                  "");
    struct af_node_info *e = node(cfg, "mng-block", "p5.48xlarge", 8,
                                  "\"eks.amazonaws.com/capacityType\":\"CAPACITY_BLOCK\"",
                                  "\"accelfit.io/capacity-reservation-id\":\"cr-0e45\","
                                  "\"accelfit.io/capacity-reservation-end\":\"2027-01-15T10:00:00Z\"");
    struct af_node_info *a = node(cfg, "self-managed", "g6e.12xlarge", 4, "",
                                  "\"accelfit.io/capacity-reservation-id\":\"cr-0aa\"");
    struct af_node_info *od = node(cfg, "on-demand", "p5.48xlarge", 8,
                                   "\"karpenter.sh/capacity-type\":\"on-demand\"", "");
    char why[1024];

    ck_assert_int_eq(k->prepaid, AF_PREPAID_BLOCK);
    ck_assert_str_eq(k->reservation_id, "cr-0b10c");
    ck_assert_str_eq(k->price_source, "prepaid");
    ck_assert(k->price_known);
    ck_assert_double_eq(k->hourly_usd, 0);              /* marginal: a pod adds nothing */
    ck_assert(k->rate_known);
    ck_assert_double_eq_tol(k->rate_usd_hr, od->hourly_usd, 1e-9);   /* its rate: the list price */
    ck_assert_str_eq(k->rate_source, "catalog");
    ck_assert_int_eq(o->prepaid, AF_PREPAID_ODCR);
    ck_assert_int_eq(e->prepaid, AF_PREPAID_BLOCK);
    ck_assert_str_eq(e->reservation_id, "cr-0e45");
    ck_assert_double_eq(e->reservation_end, af_parse_rfc3339("2027-01-15T10:00:00Z"));
    ck_assert_str_eq(e->reservation_end_source, "annotation");
    ck_assert_int_eq(a->prepaid, AF_PREPAID_RESERVED);
    ck_assert_double_eq(a->hourly_usd, 0);
    ck_assert_int_eq(od->prepaid, AF_PREPAID_NONE);
    ck_assert_str_eq(od->price_source, "catalog");

    af_node_price_reason(e, cfg->catalog, cfg->policy, af_parse_rfc3339("2027-01-15T08:10:00Z"),
                         why, sizeof(why));
    ck_assert_msg(strstr(why, "prepaid capacity-block cr-0e45 (label "
                              "eks.amazonaws.com/capacityType=CAPACITY_BLOCK), ends in 1h50m "
                              "(annotation): a pod adds nothing here"),
                  "%s", why);
    ck_assert_msg(strstr(why, "on-demand list price of p5.48xlarge"), "%s", why);
    af_node_info_unref(k);
    af_node_info_unref(o);
    af_node_info_unref(e);
    af_node_info_unref(a);
    af_node_info_unref(od);
    af_config_unref(cfg);
}
END_TEST

START_TEST(test_prepaid_amortized_keeps_the_rate)
{
    struct af_config *cfg = load("  prepaid: amortized\n");
    struct af_node_info *k = node(cfg, "b", "p5.48xlarge", 8,
                                  "\"karpenter.sh/capacity-type\":\"reserved\"", "");

    ck_assert_str_eq(k->price_source, "prepaid");
    ck_assert_double_eq_tol(k->hourly_usd, k->rate_usd_hr, 1e-9);
    ck_assert(k->hourly_usd > 50);
    af_node_info_unref(k);
    af_config_unref(cfg);
}
END_TEST

/* A pod that suits the prepaid node and pay-as-you-go ones goes to the prepaid one first,
 * packed into one already in use before an empty one. */
START_TEST(test_prepaid_fills_first_then_the_cheapest)
{
    struct af_config *cfg = load(NULL);
    struct af_node_info *nodes[4] = {
        node(cfg, "od-p5", "p5.48xlarge", 8, "\"karpenter.sh/capacity-type\":\"on-demand\"", ""),
        node(cfg, "block-p5", "p5.48xlarge", 8, "\"karpenter.sh/capacity-type\":\"reserved\"", ""),
        node(cfg, "odcr-p5", "p5.48xlarge", 8, "\"karpenter.sh/capacity-type\":\"reserved\"", ""),
        node(cfg, "od-p5b", "p5.48xlarge", 8, "\"karpenter.sh/capacity-type\":\"on-demand\"", ""),
    };
    int busy[4] = {2, 0, 2, 0};
    struct af_pod_info *p = pod("\"accelfit.io/workload\":\"training\","
                                "\"accelfit.io/model-params\":\"13B\"", 2, "");
    struct af_node_decision d[8];

    rank(cfg, p, nodes, busy, 4, d);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(d[i].verdict, AF_VERDICT_PASS);
    ck_assert_msg(d[2].score > d[1].score, "prepaid in use %d, empty %d", d[2].score, d[1].score);
    ck_assert_msg(d[1].score > d[0].score && d[1].score > d[3].score,
                  "prepaid %d, on-demand %d %d", d[1].score, d[0].score, d[3].score);
    ck_assert(d[1].prepaid_level == 1 && d[2].prepaid_level == 2 && d[0].prepaid_level == 0);
    for (int i = 0; i < 4; i++)
        af_node_info_unref(nodes[i]);
    af_pod_info_unref(p);
    af_config_unref(cfg);
}
END_TEST

/* prices.keep_prepaid_whole: a small pod does not break up an empty prepaid node. */
START_TEST(test_keep_prepaid_whole)
{
    struct af_config *cfg = load("  keep_prepaid_whole: 0.5\n");
    struct af_node_info *nodes[2] = {
        node(cfg, "od", "p5.48xlarge", 8, "", ""),
        node(cfg, "block", "p5.48xlarge", 8, "\"karpenter.sh/capacity-type\":\"reserved\"", ""),
    };
    struct af_pod_info *small = pod("", 1, ""), *big = pod("", 8, "");
    struct af_node_decision d[4];

    rank(cfg, small, nodes, NULL, 2, d);
    ck_assert_int_eq(d[1].prepaid_level, 0);
    rank(cfg, big, nodes, NULL, 2, d);
    ck_assert_int_eq(d[1].prepaid_level, 1);
    ck_assert_int_gt(d[1].score, d[0].score);
    af_node_info_unref(nodes[0]);
    af_node_info_unref(nodes[1]);
    af_pod_info_unref(small);
    af_pod_info_unref(big);
    af_config_unref(cfg);
}
END_TEST

/* A long job avoids a block that ends before it could finish, and says why; a pod of
 * unknown length avoids only the block's last margin. */
START_TEST(test_block_end_ranks_below)
{
    struct af_config *cfg = load(NULL);
    char *end = af_xasprintf("\"accelfit.io/capacity-reservation-end\":\"%s\"",
                             "2027-01-15T10:00:00Z");
    double t_end = af_parse_rfc3339("2027-01-15T10:00:00Z");
    struct af_node_info *nodes[2] = {
        node(cfg, "od", "p5.48xlarge", 8, "", ""),
        node(cfg, "block", "p5.48xlarge", 8,
             "\"eks.amazonaws.com/capacityType\":\"CAPACITY_BLOCK\"", end),
    };
    struct af_pod_info *longjob = pod("\"accelfit.io/expected-duration\":\"6h\"", 8, "");
    struct af_pod_info *deadline = pod("", 8, "\"activeDeadlineSeconds\":1800,");
    struct af_pod_info *unknown = pod("", 8, "");
    struct af_node_decision d[4];
    struct af_plan plan;
    double left;

    ck_assert_double_eq(longjob->expected_s, 6 * 3600);
    ck_assert_double_eq(deadline->expected_s, 1800);
    ck_assert_str_eq(deadline->expected_source, "spec.activeDeadlineSeconds");
    /* NOW is 2027-01-15T08:00:00Z: two hours left */
    ck_assert_double_eq(t_end - NOW, 7200);
    rank(cfg, longjob, nodes, NULL, 2, d);
    ck_assert_int_lt(d[1].score, d[0].score);
    ck_assert_msg(strstr(d[3].reason, "capacity block ends in 2h00m; the pod runs up to "
                                      "6h00m (annotation accelfit.io/expected-duration)"),
                  "%s", d[3].reason);
    rank(cfg, deadline, nodes, NULL, 2, d);   /* 30 min + 30 min margin < 2 h: the block */
    ck_assert_int_gt(d[1].score, d[0].score);
    rank(cfg, unknown, nodes, NULL, 2, d);
    ck_assert_int_gt(d[1].score, d[0].score);
    af_plan_pod(cfg->policy, cfg->catalog, unknown, &plan);
    plan.now = t_end - 600;                   /* ten minutes left: within the margin */
    ck_assert(af_plan_block_ends(cfg->policy, &plan, unknown, nodes[1], &left));
    ck_assert_double_eq(left, 600);
    free(end);
    af_node_info_unref(nodes[0]);
    af_node_info_unref(nodes[1]);
    af_pod_info_unref(longjob);
    af_pod_info_unref(deadline);
    af_pod_info_unref(unknown);
    af_config_unref(cfg);
}
END_TEST

static struct af_overlay mkov(const char *name, int weight, const char *key, const char *value,
                              enum af_overlay_price mode, double v)
{
    struct af_overlay o = {.name = af_xstrdup(name), .weight = weight, .mode = mode, .value = v};

    if (key) {
        o.reqs = af_xcalloc(1, sizeof(*o.reqs));
        o.n_reqs = 1;
        o.reqs[0].key = af_xstrdup(key);
        o.reqs[0].op = AF_OVERLAY_IN;
        o.reqs[0].values = af_xcalloc(1, sizeof(char *));
        o.reqs[0].values[0] = af_xstrdup(value);
        o.reqs[0].n_values = 1;
    }
    return o;
}

START_TEST(test_overlay_parsing)
{
    enum af_overlay_price m;
    double v;

    ck_assert_int_eq(af_overlay_parse_adjustment("+10%", &m, &v), 0);
    ck_assert(m == AF_OVERLAY_PCT && v == 10);
    ck_assert_int_eq(af_overlay_parse_adjustment("-15.5%", &m, &v), 0);
    ck_assert(m == AF_OVERLAY_PCT && v == -15.5);
    ck_assert_int_eq(af_overlay_parse_adjustment("-0.50", &m, &v), 0);
    ck_assert(m == AF_OVERLAY_ADD && v == -0.5);
    ck_assert_int_eq(af_overlay_parse_adjustment("+.5", &m, &v), 0);
    ck_assert_int_eq(af_overlay_parse_adjustment("-100%", &m, &v), 0);
    ck_assert_int_eq(af_overlay_parse_adjustment("-101%", &m, &v), -1);
    ck_assert_int_eq(af_overlay_parse_adjustment("10%", &m, &v), -1);    /* a sign is needed */
    ck_assert_int_eq(af_overlay_parse_adjustment("+1e3", &m, &v), -1);
    ck_assert_int_eq(af_overlay_parse_adjustment("+", &m, &v), -1);
    ck_assert_int_eq(af_overlay_parse_price("5.00", &v), 0);
    ck_assert_double_eq(v, 5);
    ck_assert_int_eq(af_overlay_parse_price("-5", &v), -1);
    ck_assert_int_eq(af_overlay_parse_price("5.", &v), -1);
}
END_TEST

/* Karpenter's precedence (weight, then the later name) and the price it gives. */
START_TEST(test_overlays_price_as_karpenter_does)
{
    struct af_config *cfg = load(NULL);
    struct af_overlay *v = af_xcalloc(4, sizeof(*v));
    struct af_overlays *ovs;
    struct af_node_info *g = node(cfg, "g", "g6e.12xlarge", 4,
                                  "\"karpenter.k8s.aws/instance-family\":\"g6e\"", "");
    struct af_node_info *p = node(cfg, "p", "p4d.24xlarge", 8,
                                  "\"karpenter.k8s.aws/instance-family\":\"p4d\"", "");
    double g_list = g->hourly_usd, p_list = p->hourly_usd;
    struct af_price_inputs in;
    char why[1024];

    v[0] = mkov("a-g6e-up", 10, "karpenter.k8s.aws/instance-family", "g6e", AF_OVERLAY_PCT, 20);
    v[1] = mkov("b-g6e-down", 10, "karpenter.k8s.aws/instance-family", "g6e", AF_OVERLAY_PCT, -20);
    v[2] = mkov("capacity-only", 100, "karpenter.k8s.aws/instance-family", "p4d",
                AF_OVERLAY_NO_PRICE, 0);
    v[3] = mkov("p4d-flat", 1, "karpenter.k8s.aws/instance-family", "p4d", AF_OVERLAY_PRICE, 9.5);
    ovs = af_overlays_new(v, 4);
    in = (struct af_price_inputs){.overlays = ovs};
    af_node_price(cfg->catalog, cfg->policy, &in, g);
    af_node_price(cfg->catalog, cfg->policy, &in, p);
    /* equal weights: the later name wins, as Karpenter orders them */
    ck_assert_str_eq(g->price_source, "overlay");
    ck_assert_str_eq(g->price_by, "b-g6e-down");
    ck_assert_double_eq_tol(g->hourly_usd, g_list * 0.8, 1e-9);
    /* a capacity-only overlay has no say on prices */
    ck_assert_str_eq(p->price_by, "p4d-flat");
    ck_assert_double_eq(p->hourly_usd, 9.5);
    ck_assert(p_list > 9.5);
    af_node_price_reason(p, cfg->catalog, cfg->policy, NOW, why, sizeof(why));
    ck_assert_msg(strstr(why, "NodeOverlay p4d-flat: 9.5 $/h"), "%s", why);
    /* without the overlays, list prices again */
    af_node_price(cfg->catalog, cfg->policy, NULL, p);
    ck_assert_double_eq(p->hourly_usd, p_list);
    ck_assert_ptr_null(p->price_by);
    af_overlays_unref(ovs);
    af_node_info_unref(g);
    af_node_info_unref(p);
    af_config_unref(cfg);
}
END_TEST

START_TEST(test_savings_plans_and_discounts)
{
    struct af_config *cfg = load("  discounts:\n"
                                 "    - {name: ec2-instance-sp-p5, percent: 40, families: [p5]}\n"
                                 "    - {name: l40s-deal, percent: 25, classes: [nvidia-l40s]}\n"
                                 "    - {name: compute-sp, percent: 10}\n");
    struct af_node_info *p5 = node(cfg, "p5", "p5.48xlarge", 8, "", "");
    struct af_node_info *g6e = node(cfg, "g6e", "g6e.12xlarge", 4, "", "");
    struct af_node_info *m7 = node(cfg, "m7", "m7i.large", 0, "", "");
    struct af_node_info *spot = node(cfg, "spot", "g6e.12xlarge", 4,
                                     "\"karpenter.sh/capacity-type\":\"spot\"", "");
    struct af_config *plain = load(NULL);
    struct af_node_info *p5l = node(plain, "p5", "p5.48xlarge", 8, "", "");
    char why[1024];

    ck_assert_str_eq(p5->price_source, "savings-plan");
    ck_assert_str_eq(p5->price_by, "ec2-instance-sp-p5");
    ck_assert_double_eq_tol(p5->hourly_usd, p5l->hourly_usd * 0.6, 1e-9);
    ck_assert_str_eq(g6e->price_by, "l40s-deal");
    ck_assert_str_eq(m7->price_by, "compute-sp");
    ck_assert_ptr_null(spot->price_by);               /* discounts are of on-demand usage */
    af_node_price_reason(p5, cfg->catalog, cfg->policy, NOW, why, sizeof(why));
    ck_assert_msg(strstr(why, "discount ec2-instance-sp-p5:"), "%s", why);
    af_node_info_unref(p5);
    af_node_info_unref(g6e);
    af_node_info_unref(m7);
    af_node_info_unref(spot);
    af_node_info_unref(p5l);
    af_config_unref(cfg);
    af_config_unref(plain);
}
END_TEST

START_TEST(test_pricing_policy_errors)
{
    static const struct {
        const char *extra, *msg;
    } bad[] = {
        {"  prepaid: free\n", "'prices.prepaid' must be marginal or amortized, not 'free'"},
        {"  capacity_block_end_margin: soon\n", "'prices.capacity_block_end_margin' must be a duration"},
        {"  discounts:\n    - {name: a, percent: 100}\n", "must be in [0, 100), not 100"},
        {"  discounts:\n    - {percent: 10}\n", "has no 'name'"},
        {"  discounts:\n    - {name: a, percent: 10}\n    - {name: a, percent: 5}\n",
         "discount 'a' is named twice"},
        {"  discounts:\n    - {name: a, percent: 10, classes: [nvidia-x]}\n", "nvidia-x"},
    };
    for (size_t i = 0; i < AF_ARRAY_SIZE(bad); i++) {
        const char *pol = af_embedded_policy_yaml;
        const char *at = strstr(pol, "prices:\n  default_spot_discount_pct: 60\n");
        const char *rest = at + strlen("prices:\n  default_spot_discount_pct: 60\n");
        char *text = af_xasprintf("%.*sprices:\n  default_spot_discount_pct: 60\n%s%s",
                                  (int)(at - pol), pol, bad[i].extra, rest);
        struct af_config *cfg = NULL;
        struct af_error err;
        ck_assert_int_ne(af_config_load_mem(&cfg, "<embedded>", af_embedded_catalog_yaml,
                                            af_embedded_catalog_yaml_len, "p.yaml", text,
                                            strlen(text), &err),
                         0);
        ck_assert_msg(strstr(err.text, bad[i].msg), "%zu: %s", i, err.text);
        ck_assert_int_gt(err.line, 0);
        af_free(text);
    }
}
END_TEST

/* ---- live: a NodeOverlay and prepaid labels through the API server -------------------- */

static char *call(CURL *c, const struct af_test_server *s, const char *path, const char *body)
{
    struct af_test_resp r;
    char url[256], *out;

    snprintf(url, sizeof(url), "%s%s", s->base, path);
    ck_assert_int_eq(af_test_http(c, body ? "POST" : NULL, url, body, body ? strlen(body) : 0,
                                  NULL, &r),
                     CURLE_OK);
    out = af_xstrdup(r.body ? r.body : "");
    af_test_resp_free(&r);
    return out;
}

#define P4D "ip-10-0-1-10.us-west-2.compute.internal"
#define EXPLAIN                                                                              \
    "{\"Pod\": {\"metadata\": {\"name\": \"p\", \"namespace\": \"default\"}, \"spec\": "      \
    "{\"containers\": [{\"name\": \"c\", \"resources\": {\"requests\": {\"cpu\": \"1\"}}}]}}, " \
    "\"NodeNames\": [\"" P4D "\", \"block-1\"]}"

/* What /explain says of node `name`: its price source, price and reason, into the buffers. */
static bool explain_node(CURL *c, const struct af_test_server *s, const char *name,
                         char *source, double *usd, char *reason, size_t len)
{
    char *b = call(c, s, "/explain", EXPLAIN);
    json_t *j = json_loads(b, 0, NULL), *n;
    size_t i;
    bool found = false;

    json_array_foreach(json_object_get(j, "nodes"), i, n) {
        const char *nm = json_string_value(json_object_get(n, "name"));
        if (!nm || strcmp(nm, name))
            continue;
        snprintf(source, 32, "%s", json_string_value(json_object_get(n, "price_source"))
                                       ? json_string_value(json_object_get(n, "price_source"))
                                       : "");
        *usd = json_number_value(json_object_get(n, "node_hourly_usd"));
        snprintf(reason, len, "%s", json_string_value(json_object_get(n, "price_reason"))
                                        ? json_string_value(json_object_get(n, "price_reason"))
                                        : "");
        found = true;
    }
    json_decref(j);
    af_free(b);
    return found;
}

static bool priced_by(CURL *c, const struct af_test_server *s, const char *name,
                      const char *want_source, double want_usd)
{
    char src[32] = "", why[1024];
    double usd = -1;

    return explain_node(c, s, name, src, &usd, why, sizeof(why)) && !strcmp(src, want_source) &&
           fabs(usd - want_usd) < 1e-9;
}

START_TEST(test_live_overlays_and_prepaid_nodes)
{
    static const char *const extra[] = {"--nodeoverlays", NULL};
    struct af_test_fake_api api;
    struct af_test_server s;
    char src[32], why[1024], *b;
    double usd;
    CURL *c;

    if (!af_test_fake_api_start_with(&api, extra))
        return;
    af_test_fake_api_do(&api, "add_node",
                        "{\"name\": \"block-1\", \"instance_type\": \"p4d.24xlarge\", \"gpus\": 8, "
                        "\"labels\": {\"karpenter.sh/capacity-type\": \"reserved\", "
                        "\"karpenter.k8s.aws/capacity-reservation-type\": \"capacity-block\", "
                        "\"karpenter.k8s.aws/capacity-reservation-id\": \"cr-0b10c\"}}");
    {
        const char *const args[] = {"--kubeconfig", api.kubeconfig, NULL};
        af_test_server_start(&s, args, false, NULL, NULL);
    }
    c = curl_easy_init();
    /* the reserved node costs a pod nothing; the on-demand one its list price */
    ck_assert(AF_TEST_WAIT_FOR(60, priced_by(c, &s, "block-1", "prepaid", 0)));
    ck_assert(explain_node(c, &s, "block-1", src, &usd, why, sizeof(why)));
    ck_assert_msg(strstr(why, "prepaid capacity-block cr-0b10c (label "
                              "karpenter.sh/capacity-type=reserved)"), "%s", why);
    ck_assert(explain_node(c, &s, P4D, src, &usd, why, sizeof(why)));
    ck_assert_str_eq(src, "catalog");

    /* a NodeOverlay appears: the p4d nodes are priced as Karpenter would price them */
    af_test_fake_api_do(&api, "put_nodeoverlay",
                        "{\"object\": {\"metadata\": {\"name\": \"p4d-contract\"}, \"spec\": "
                        "{\"weight\": 10, \"price\": \"9.50\", \"requirements\": [{\"key\": "
                        "\"node.kubernetes.io/instance-type\", \"operator\": \"In\", "
                        "\"values\": [\"p4d.24xlarge\"]}]}}}");
    ck_assert(AF_TEST_WAIT_FOR(60, priced_by(c, &s, P4D, "overlay", 9.5)));
    ck_assert(explain_node(c, &s, P4D, src, &usd, why, sizeof(why)));
    ck_assert_msg(strstr(why, "NodeOverlay p4d-contract: 9.5 $/h, on "), "%s", why);
    /* the prepaid node keeps 0, with the overlay's rate as its rate */
    ck_assert(explain_node(c, &s, "block-1", src, &usd, why, sizeof(why)));
    ck_assert_str_eq(src, "prepaid");
    ck_assert_msg(strstr(why, "its rate NodeOverlay p4d-contract: 9.5 $/h"), "%s", why);
    b = call(c, &s, "/metrics", NULL);
    ck_assert_msg(strstr(b, "accelfit_nodes_by_price_source{source=\"overlay\"} 1\n") &&
                      strstr(b, "accelfit_nodes_by_price_source{source=\"prepaid\"} 1\n") &&
                      strstr(b, "accelfit_prepaid_idle_accelerators{node=\"block-1\","
                                "reservation=\"cr-0b10c\",type=\"capacity-block\"} 8\n") &&
                      strstr(b, "accelfit_prepaid_idle_usd_per_hour{node=\"block-1\","
                                "reservation=\"cr-0b10c\",type=\"capacity-block\"} 9.5000\n"),
                  "%s", b);
    af_free(b);
    /* and it goes away again */
    af_test_fake_api_do(&api, "delete_nodeoverlay", "{\"name\": \"p4d-contract\"}");
    ck_assert(AF_TEST_WAIT_FOR(60, explain_node(c, &s, P4D, src, &usd, why, sizeof(why)) &&
                                       !strcmp(src, "catalog")));
    curl_easy_cleanup(c);
    ck_assert_int_eq(af_test_server_stop(&s), 0);
    af_test_fake_api_stop(&api);
}
END_TEST

Suite *af_pricing_suite(void);
Suite *af_pricing_suite(void)
{
    Suite *s = suite_create("pricing");
    TCase *tc = tcase_create("core");

    tcase_add_test(tc, test_prepaid_from_every_label_scheme);
    tcase_add_test(tc, test_prepaid_amortized_keeps_the_rate);
    tcase_add_test(tc, test_prepaid_fills_first_then_the_cheapest);
    tcase_add_test(tc, test_keep_prepaid_whole);
    tcase_add_test(tc, test_block_end_ranks_below);
    tcase_add_test(tc, test_overlay_parsing);
    tcase_add_test(tc, test_overlays_price_as_karpenter_does);
    tcase_add_test(tc, test_savings_plans_and_discounts);
    tcase_add_test(tc, test_pricing_policy_errors);
    suite_add_tcase(s, tc);
    tc = tcase_create("live");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_live_overlays_and_prepaid_nodes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_pricing_suite());
}
