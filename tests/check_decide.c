/* SPDX-License-Identifier: Apache-2.0 */
/*
 * decide: node classification (every label scheme), spot and annotated
 * prices, effective requests, the pod's plan (annotations, inference of the
 * workload, tiers restricted to what the requests can use), filter verdicts
 * with tiered fallback, and prioritize scores. Uses the embedded catalog and
 * policy, so the tests also pin the shipped defaults' behaviour.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/config.h"
#include "accelfit/decide.h"
#include "accelfit/prices.h"
#include "support/support.h"

static struct af_config *cfg;

static void setup(void)
{
    struct af_error err = {0};
    ck_assert_msg(af_config_load(&cfg, NULL, NULL, &err) == 0, "%s", err.text);
}

static void teardown(void)
{
    af_config_unref(cfg);
    cfg = NULL;
}

/* ---- classification ------------------------------------------------------------------------ */

#define MAX_KV 4

static const struct {
    struct af_kv labels[MAX_KV];
    int64_t gpu, neuron;
    enum af_class want;
    const char *source;
} class_cases[] = {
    {{{"node.kubernetes.io/instance-type", "p4d.24xlarge"}}, 8, 0, AF_CLASS_NVIDIA_A100,
     "node.kubernetes.io/instance-type"},
    {{{"beta.kubernetes.io/instance-type", "g5.xlarge"}}, 1, 0, AF_CLASS_NVIDIA_A10G,
     "beta.kubernetes.io/instance-type"},
    {{{"node.kubernetes.io/instance-type", "trn1.32xlarge"}}, 0, 16, AF_CLASS_TRAINIUM1,
     "node.kubernetes.io/instance-type"},
    {{{"node.kubernetes.io/instance-type", "inf2.24xlarge"}}, 0, 6, AF_CLASS_INFERENTIA2,
     "node.kubernetes.io/instance-type"},
    {{{"node.kubernetes.io/instance-type", "m5.xlarge"}}, 0, 0, AF_CLASS_CPU,
     "node.kubernetes.io/instance-type"},
    /* The catalog's answer beats a conflicting accelerator label. */
    {{{"node.kubernetes.io/instance-type", "g5.xlarge"},
      {"karpenter.k8s.aws/instance-gpu-name", "h100"}},
     1, 0, AF_CLASS_NVIDIA_A10G, "node.kubernetes.io/instance-type"},
    /* An instance type the catalog lacks falls through to the next scheme. */
    {{{"node.kubernetes.io/instance-type", "p9.96xlarge"},
      {"karpenter.k8s.aws/instance-gpu-name", "h100"}},
     8, 0, AF_CLASS_NVIDIA_H100, "karpenter.k8s.aws/instance-gpu-name"},
    {{{"karpenter.k8s.aws/instance-accelerator-name", "inferentia"},
      {"karpenter.k8s.aws/instance-family", "inf2"}},
     0, 1, AF_CLASS_INFERENTIA2, "karpenter.k8s.aws/instance-accelerator-name"},
    {{{"karpenter.k8s.aws/instance-accelerator-name", "trainium"}}, 0, 16, AF_CLASS_TRAINIUM1,
     "karpenter.k8s.aws/instance-accelerator-name"},
    {{{"eks.amazonaws.com/instance-gpu-name", "l40s"}}, 4, 0, AF_CLASS_NVIDIA_L40S,
     "eks.amazonaws.com/instance-gpu-name"},
    {{{"nvidia.com/gpu.product", "NVIDIA-A100-SXM4-80GB"}}, 8, 0, AF_CLASS_NVIDIA_A100,
     "nvidia.com/gpu.product"},
    {{{"nvidia.com/gpu.product", "Tesla-T4"}}, 1, 0, AF_CLASS_NVIDIA_T4, "nvidia.com/gpu.product"},
    {{{"k8s.amazonaws.com/accelerator", "nvidia-tesla-v100"}}, 1, 0, AF_CLASS_NVIDIA_V100,
     "k8s.amazonaws.com/accelerator"},
    {{{"accelerator", "nvidia-a100"}, {"hardware-type", "nvidia-gpu"}}, 8, 0,
     AF_CLASS_NVIDIA_A100, "accelerator"},
    {{{"hardware-type", "aws-trainium"}}, 0, 16, AF_CLASS_TRAINIUM1, "hardware-type"},
    /* AWS's example node groups label inf2 nodes aws-inferentia (docs/decision-framework.md). */
    {{{"accelerator", "aws-inferentia"}}, 0, 1, AF_CLASS_INFERENTIA2, "accelerator"},
    {{{"hardware-type", "aws-inferentia"}, {"karpenter.k8s.aws/instance-family", "inf1"}}, 0, 1,
     AF_CLASS_INFERENTIA1, "hardware-type"},
    {{{"karpenter.k8s.aws/instance-accelerator-name", "inferentia"},
      {"node.kubernetes.io/instance-type", "inf2.96xlarge-new"}},
     0, 1, AF_CLASS_INFERENTIA2, "karpenter.k8s.aws/instance-accelerator-name"},
    /* An accelerator of unknown model is not guessed at. */
    {{{"hardware-type", "nvidia-gpu"}}, 1, 0, AF_CLASS_UNKNOWN,
     "allocatable nvidia.com/gpu (model unknown)"},
    {{{"kubernetes.io/os", "linux"}}, 0, 2, AF_CLASS_UNKNOWN,
     "allocatable aws.amazon.com/neuron* (generation unknown)"},
    {{{"kubernetes.io/os", "linux"}}, 0, 0, AF_CLASS_CPU, "no accelerator label or resource"},
};

static size_t n_kv(const struct af_kv *kv)
{
    size_t n = 0;
    while (n < MAX_KV && kv[n].key)
        n++;
    return n;
}

START_TEST(test_classify_label_schemes)
{
    struct af_node_info *n = af_node_info_new();

    n->allocatable.v[AF_RES_GPU] = class_cases[_i].gpu;
    n->allocatable.v[AF_RES_NEURON] = class_cases[_i].neuron;
    af_node_classify(cfg->catalog, cfg->policy, class_cases[_i].labels,
                     n_kv(class_cases[_i].labels), NULL, 0, n);
    ck_assert_msg(n->cls == class_cases[_i].want, "got %s, want %s", af_class_name(n->cls),
                  af_class_name(class_cases[_i].want));
    ck_assert_str_eq(n->class_source, class_cases[_i].source);
    ck_assert_ptr_nonnull(n->price_source);
    af_node_info_unref(n);
}
END_TEST

static const struct {
    struct af_kv labels[MAX_KV];
    const char *price_annotation;
    bool spot;
    int price; /* 0 unknown, 1 on-demand, 2 spot-discounted, 3 annotation */
    double annotated;
} price_cases[] = {
    {{{"node.kubernetes.io/instance-type", "g5.xlarge"}}, NULL, false, 1, 0},
    {{{"node.kubernetes.io/instance-type", "g5.xlarge"}, {"karpenter.sh/capacity-type", "spot"}},
     NULL, true, 2, 0},
    {{{"node.kubernetes.io/instance-type", "g5.xlarge"},
      {"eks.amazonaws.com/capacityType", "SPOT"}},
     NULL, true, 2, 0},
    {{{"node.kubernetes.io/instance-type", "g5.xlarge"},
      {"eks.amazonaws.com/capacityType", "ON_DEMAND"}, {"karpenter.sh/capacity-type", "on-demand"}},
     NULL, false, 1, 0},
    {{{"node.kubernetes.io/instance-type", "g5.xlarge"}, {"karpenter.sh/capacity-type", "spot"}},
     "0.42", true, 3, 0.42},
    {{{"node.kubernetes.io/instance-type", "g5.xlarge"}}, "not-a-price", false, 1, 0},
    {{{"node.kubernetes.io/instance-type", "g5.xlarge"}}, "-3", false, 1, 0},
    {{{"karpenter.k8s.aws/instance-gpu-name", "a10g"}}, NULL, false, 0, 0},
    {{{"karpenter.k8s.aws/instance-gpu-name", "a10g"}}, "1.25", false, 3, 1.25},
};

START_TEST(test_classify_spot_and_price)
{
    struct af_node_info *n = af_node_info_new();
    struct af_kv ann[1] = {{"accelfit.io/hourly-price", price_cases[_i].price_annotation}};
    const struct af_instance_type *t = af_catalog_find(cfg->catalog, "g5.xlarge");
    double d;

    ck_assert_ptr_nonnull(t);
    ck_assert(t->price_usd_hr > 0);
    af_node_classify(cfg->catalog, cfg->policy, price_cases[_i].labels,
                     n_kv(price_cases[_i].labels), ann, price_cases[_i].price_annotation ? 1 : 0,
                     n);
    ck_assert_int_eq(n->spot, price_cases[_i].spot);
    switch (price_cases[_i].price) {
    case 0:
        ck_assert(!n->price_known);
        break;
    case 1:
        ck_assert(n->price_known);
        ck_assert_double_eq_tol(n->hourly_usd, t->price_usd_hr, 1e-9);
        ck_assert_str_eq(n->price_source, "catalog");
        break;
    case 2:
        d = t->spot_discount_pct >= 0 ? t->spot_discount_pct
                                      : cfg->policy->default_spot_discount_pct;
        ck_assert(n->price_known);
        ck_assert(d > 0);
        ck_assert_double_eq_tol(n->hourly_usd, t->price_usd_hr * (1 - d / 100), 1e-9);
        ck_assert_str_eq(n->price_source, t->spot_discount_pct >= 0 ? "catalog-spot" : "policy");
        break;
    default:
        ck_assert(n->price_known);
        ck_assert_double_eq_tol(n->hourly_usd, price_cases[_i].annotated, 1e-9);
        ck_assert_str_eq(n->price_source, "annotation");
    }
    af_node_info_unref(n);
}
END_TEST

/*
 * Nodes of the usual Karpenter CPU mix (c6i, m7i, Graviton m7g and c7g) and of the types
 * accelfit has no class for are priced from the catalog; an unclassified type says so
 * instead of being classed by its family, and a type without a price says it has none.
 */
static const struct {
    struct af_kv labels[MAX_KV];
    int64_t gpu;
    enum af_class want;
    const char *source;
    double price; /* < 0: unknown */
    const char *price_source;
} priced_cases[] = {
    {{{"node.kubernetes.io/instance-type", "c6i.8xlarge"}}, 0, AF_CLASS_CPU,
     "node.kubernetes.io/instance-type", 1.36, "catalog"},
    {{{"node.kubernetes.io/instance-type", "m7i.2xlarge"}}, 0, AF_CLASS_CPU,
     "node.kubernetes.io/instance-type", 0.4032, "catalog"},
    {{{"karpenter.k8s.aws/instance-family", "m7g"}, {"karpenter.k8s.aws/instance-size", "large"}},
     0, AF_CLASS_CPU, "karpenter.k8s.aws/instance-family and instance-size", 0.0816, "catalog"},
    {{{"node.kubernetes.io/instance-type", "c7g.xlarge"}}, 0, AF_CLASS_CPU,
     "node.kubernetes.io/instance-type", 0.145, "catalog"},
    /* Spot: the policy's default discount (60%) when the catalog has none for the type. */
    {{{"node.kubernetes.io/instance-type", "c7g.xlarge"}, {"karpenter.sh/capacity-type", "spot"}},
     0, AF_CLASS_CPU, "node.kubernetes.io/instance-type", 0.145 * 0.4, "policy"},
    {{{"node.kubernetes.io/instance-type", "g5g.xlarge"}}, 1, AF_CLASS_NVIDIA_T4,
     "node.kubernetes.io/instance-type", 0.42, "catalog"},
    {{{"node.kubernetes.io/instance-type", "g7e.2xlarge"}}, 1, AF_CLASS_UNKNOWN,
     "allocatable nvidia.com/gpu (model unknown)", 3.36312, "catalog"},
    {{{"node.kubernetes.io/instance-type", "g6f.large"}}, 0, AF_CLASS_CPU,
     "catalog: unclassified accelerator (no accelfit class) and no accelerator resource", 0.202,
     "catalog"},
    {{{"node.kubernetes.io/instance-type", "dl2q.24xlarge"}}, 0, AF_CLASS_CPU,
     "catalog: unclassified accelerator (no accelfit class) and no accelerator resource", -1,
     "unknown"},
};

START_TEST(test_classify_prices_every_catalog_type)
{
    struct af_node_info *n = af_node_info_new();

    n->allocatable.v[AF_RES_GPU] = priced_cases[_i].gpu;
    af_node_classify(cfg->catalog, cfg->policy, priced_cases[_i].labels,
                     n_kv(priced_cases[_i].labels), NULL, 0, n);
    ck_assert_msg(n->cls == priced_cases[_i].want, "got %s, want %s", af_class_name(n->cls),
                  af_class_name(priced_cases[_i].want));
    ck_assert_str_eq(n->class_source, priced_cases[_i].source);
    ck_assert_str_eq(n->price_source, priced_cases[_i].price_source);
    if (priced_cases[_i].price < 0) {
        ck_assert(!n->price_known);
    } else {
        ck_assert(n->price_known);
        ck_assert_double_eq_tol(n->hourly_usd, priced_cases[_i].price, 1e-9);
    }
    af_node_info_unref(n);
}
END_TEST

START_TEST(test_classify_catalog_spot_discount_wins_over_policy)
{
    struct af_instance_type types[] = {
        {.name = "x1.big", .cls = AF_CLASS_NVIDIA_L4, .price_usd_hr = 10, .spot_discount_pct = 30},
        {.name = "x2.big", .cls = AF_CLASS_NVIDIA_L4, .price_usd_hr = 10, .spot_discount_pct = -1},
    };
    struct af_catalog cat = {types, 2, "<test>", "us-east-1", 0, NULL, {0}};
    struct af_policy pol = {.default_spot_discount_pct = 50};
    struct af_kv l1[] = {{"node.kubernetes.io/instance-type", "x1.big"},
                         {"karpenter.sh/capacity-type", "spot"}};
    struct af_kv l2[] = {{"node.kubernetes.io/instance-type", "x2.big"},
                         {"karpenter.sh/capacity-type", "spot"}};
    struct af_node_info *a = af_node_info_new(), *b = af_node_info_new();

    af_node_classify(&cat, &pol, l1, 2, NULL, 0, a);
    af_node_classify(&cat, &pol, l2, 2, NULL, 0, b);
    ck_assert_double_eq_tol(a->hourly_usd, 7, 1e-9);
    ck_assert_str_eq(a->price_source, "catalog-spot");
    ck_assert_double_eq_tol(b->hourly_usd, 5, 1e-9);
    ck_assert_str_eq(b->price_source, "policy");
    ck_assert_str_eq(b->instance_type, "x2.big");
    af_node_info_unref(a);
    af_node_info_unref(b);
}
END_TEST

/* A node of eu-west-1 priced as each price source says, with and without prices from AWS. */
START_TEST(test_price_sources_in_order_and_their_reasons)
{
    struct af_instance_type types[] = {
        {.name = "g5.xlarge", .cls = AF_CLASS_NVIDIA_A10G, .price_usd_hr = 1.006, .spot_discount_pct = 60},
        {.name = "m7g.large", .cls = AF_CLASS_CPU, .price_usd_hr = 0.0816, .spot_discount_pct = -1},
        {.name = "x9.big", .cls = AF_CLASS_CPU, .price_usd_hr = -1, .spot_discount_pct = -1},
    };
    struct af_catalog cat = {types, 3, "<test>", "us-east-1", 1784554470 /* 2026-07-20T13:34:30Z */,
                             NULL, {0}};
    struct af_policy pol = {.default_spot_discount_pct = 50};
    const double now = 1784554470 + 10 * 86400;
    struct af_kv spot[] = {{"node.kubernetes.io/instance-type", "g5.xlarge"},
                           {"karpenter.sh/capacity-type", "spot"},
                           {"topology.kubernetes.io/region", "eu-west-1"},
                           {"topology.kubernetes.io/zone", "eu-west-1b"}};
    struct af_kv od[] = {{"node.kubernetes.io/instance-type", "m7g.large"},
                         {"eks.amazonaws.com/capacityType", "ON_DEMAND"},
                         {"failure-domain.beta.kubernetes.io/region", "eu-west-1"}};
    struct af_kv odd[] = {{"node.kubernetes.io/instance-type", "x9.big"}};
    struct af_node_info *a = af_node_info_new(), *b = af_node_info_new(), *c = af_node_info_new();
    struct af_prices *live = af_prices_new();
    char why[512];

    af_node_classify(&cat, &pol, spot, 4, NULL, 0, a);
    af_node_classify(&cat, &pol, od, 3, NULL, 0, b);
    af_node_classify(&cat, &pol, odd, 1, NULL, 0, c);
    ck_assert_str_eq(a->region, "eu-west-1");
    ck_assert_str_eq(a->zone, "eu-west-1b");
    ck_assert_str_eq(b->region, "eu-west-1");   /* the beta label */

    /* no live prices: the catalog's us-east-1 list price, and it says the node is elsewhere */
    ck_assert_str_eq(a->price_source, "catalog-spot");
    ck_assert_double_eq_tol(a->hourly_usd, 1.006 * 0.4, 1e-9);
    ck_assert(a->price_other_region);
    af_node_price_reason(a, &cat, &pol, now, why, sizeof(why));
    ck_assert_str_eq(why, "us-east-1 on-demand list price of g5.xlarge in the catalog of "
                          "2026-07-20, 10 days old less the catalog's 60% spot discount of "
                          "g5.xlarge; the node runs in eu-west-1, whose price is not known");
    ck_assert_str_eq(b->price_source, "catalog");
    ck_assert(!c->price_known);
    af_node_price_reason(c, &cat, &pol, now, why, sizeof(why));
    ck_assert_str_eq(why, "no price: the catalog has no price of x9.big, AWS gave none and the "
                          "node has no accelfit.io/hourly-price");

    /* the region's on-demand prices from AWS; no spot price of eu-west-1b yet */
    ck_assert_int_eq(af_prices_set(live, AF_PRICE_ON_DEMAND, "eu-west-1", "g5.xlarge", 1.123, now - 60), 0);
    ck_assert_int_eq(af_prices_set(live, AF_PRICE_ON_DEMAND, "eu-west-1", "m7g.large", 0.0892, now - 60), 0);
    ck_assert_int_eq(af_prices_set(live, AF_PRICE_SPOT, "eu-west-1a", "g5.xlarge", 0.41, now - 30), 0);
    af_prices_freeze(live);
    af_node_price(&cat, &pol, &(struct af_price_inputs){.live = live}, a);
    af_node_price(&cat, &pol, &(struct af_price_inputs){.live = live}, b);
    ck_assert_str_eq(a->price_source, "aws-catalog-spot");
    ck_assert_double_eq_tol(a->hourly_usd, 1.123 * 0.4, 1e-9);
    ck_assert(!a->price_other_region);
    ck_assert_str_eq(b->price_source, "aws");
    ck_assert_double_eq_tol(b->hourly_usd, 0.0892, 1e-12);
    ck_assert_double_eq(b->price_as_of, now - 60);
    af_node_price_reason(b, &cat, &pol, now, why, sizeof(why));
    ck_assert_str_eq(why, "on-demand price of m7g.large in eu-west-1 from AWS, read 60 s ago");

    /* the zone's own spot price wins */
    {
        struct af_prices *next = af_prices_copy(live, AF_PRICE_SPOT, "eu-west-1");
        af_prices_unref(live);
        live = next;
    }
    ck_assert_int_eq(af_prices_set(live, AF_PRICE_SPOT, "eu-west-1b", "g5.xlarge", 0.3871, now - 300), 0);
    af_prices_freeze(live);
    af_node_price(&cat, &pol, &(struct af_price_inputs){.live = live}, a);
    ck_assert_str_eq(a->price_source, "aws-spot");
    ck_assert_double_eq_tol(a->hourly_usd, 0.3871, 1e-12);
    af_node_price_reason(a, &cat, &pol, now, why, sizeof(why));
    ck_assert_str_eq(why, "spot price of g5.xlarge in eu-west-1b from AWS, read 5 min ago");

    /* an annotation beats every source */
    a->annotated_usd = 0.25;
    af_node_price(&cat, &pol, &(struct af_price_inputs){.live = live}, a);
    ck_assert_str_eq(a->price_source, "annotation");
    ck_assert_double_eq(a->hourly_usd, 0.25);
    af_prices_unref(live);
    af_node_info_unref(a);
    af_node_info_unref(b);
    af_node_info_unref(c);
}
END_TEST

/* ---- effective requests ------------------------------------------------------------------------ */

#define R(cpu, mem) {{cpu, mem, 0, 0, 0, 0, 0}}
#define C(cpu, mem) {R(cpu, mem), false}
#define S(cpu, mem) {R(cpu, mem), true}
#define MAXC 4

static const struct {
    const char *name;
    struct af_container_req apps[MAXC];
    size_t n_apps;
    struct af_container_req inits[MAXC];
    size_t n_inits;
    bool overhead;
    int64_t want_cpu, want_mem;
} req_cases[] = {
    {"apps add up", {C(1000, 100), C(2000, 200)}, 2, {C(0, 0)}, 0, false, 3000, 300},
    {"a big init container wins", {C(1000, 100), C(2000, 200)}, 2, {C(5000, 50)}, 1, false,
     5000, 300},
    {"init containers run one at a time", {C(1000, 100)}, 1, {C(2000, 0), C(3000, 0)}, 2,
     false, 3000, 100},
    /* sidecar (1) started before init (3): init usage 3+1 = 4; apps 2+1 = 3 */
    {"sidecar before init", {C(2000, 0)}, 1, {S(1000, 0), C(3000, 0)}, 2, false, 4000,
     0},
    /* init (3) before sidecar (1): init usage 3, sidecar usage 1; apps 2+1 = 3 */
    {"sidecar after init", {C(2000, 0)}, 1, {C(3000, 0), S(1000, 0)}, 2, false, 3000,
     0},
    {"two sidecars accumulate", {C(500, 0)}, 1,
     {S(1000, 0), S(1000, 0), C(2500, 0)}, 3, false, 4500, 0},
    {"overhead on top", {C(1000, 100)}, 1, {C(4000, 0)}, 1, true, 4250, 164},
    {"nothing requested", {C(0, 0)}, 0, {C(0, 0)}, 0, true, 250, 64},
    {"saturates instead of overflowing", {C(INT64_MAX, 0), C(INT64_MAX, 0)}, 2, {C(0, 0)},
     0, false, INT64_MAX, 0},
};

START_TEST(test_effective_requests)
{
    struct af_resources overhead = R(250, 64), out;

    memset(&out, 0xff, sizeof(out));
    af_effective_requests(req_cases[_i].apps, req_cases[_i].n_apps, req_cases[_i].inits,
                          req_cases[_i].n_inits, req_cases[_i].overhead ? &overhead : NULL, &out);
    ck_assert_msg(out.v[AF_RES_CPU] == req_cases[_i].want_cpu, "%s: cpu %lld",
                  req_cases[_i].name, (long long)out.v[AF_RES_CPU]);
    ck_assert_int_eq(out.v[AF_RES_MEMORY], req_cases[_i].want_mem);
    ck_assert_int_eq(out.v[AF_RES_GPU], 0);
}
END_TEST

/* ---- plans ----------------------------------------------------------------------------------- */

struct pod_spec {
    int64_t cpu, gpu, neuron, neuroncore;
    const char *workload, *params, *objective, *slo, *framework, *neuron_ready, *precision;
    const char *neuron_gen, *instances;
};

static struct af_pod_info *mkpod(const struct pod_spec *s)
{
    struct af_pod_info *p = af_pod_info_new();

    p->ns = af_xstrdup("default");
    p->name = af_xstrdup("p");
    p->requests.v[AF_RES_CPU] = s->cpu ? s->cpu : 1000;
    p->requests.v[AF_RES_MEMORY] = 1LL << 30;
    p->requests.v[AF_RES_GPU] = s->gpu;
    p->requests.v[AF_RES_NEURON] = s->neuron;
    p->requests.v[AF_RES_NEURONCORE] = s->neuroncore;
    p->ann.workload = af_xstrdup(s->workload);
    p->ann.model_params = af_xstrdup(s->params);
    p->ann.objective = af_xstrdup(s->objective);
    p->ann.latency_slo_ms = af_xstrdup(s->slo);
    p->ann.framework = af_xstrdup(s->framework);
    p->ann.neuron_ready = af_xstrdup(s->neuron_ready);
    p->ann.precision = af_xstrdup(s->precision);
    p->ann.neuron_core_version = af_xstrdup(s->neuron_gen);
    p->ann.instances = af_xstrdup(s->instances);
    return p;
}

static bool has_note(const struct af_plan *p, const char *needle)
{
    for (int i = 0; i < p->n_notes; i++)
        if (strstr(p->notes[i], needle))
            return true;
    return false;
}

static void check_plan_invariants(const struct af_plan *p)
{
    ck_assert_int_ge(p->sel.n_tiers, 1);
    for (size_t i = 0; i < p->sel.n_tiers; i++) {
        enum af_class c = p->sel.tiers[i].cls;
        ck_assert_int_eq(p->sel.tiers[i].rank, (int)i + 1);
        if (c != AF_CLASS_UNKNOWN)
            ck_assert_int_eq(p->tier_of[c], (int)i);
        else
            ck_assert_ptr_nonnull(p->sel.tiers[i].group);
    }
    for (int c = 0; c < AF_CLASS__COUNT; c++) {
        enum af_accel_kind k = af_class_kind((enum af_class)c);
        if (p->tier_of[c] < 0)
            continue;
        ck_assert_int_lt(p->tier_of[c], (int)p->sel.n_tiers);
        /* Whatever the rules say, the requests decide what a pod can use. */
        if (p->requested == AF_ACCEL_GPU)
            ck_assert_int_eq(k, AF_ACCEL_GPU);
        if (p->requested == AF_ACCEL_NEURON)
            ck_assert_int_eq(k, AF_ACCEL_NEURON);
        if (p->requested == AF_ACCEL_NONE && !p->backfill)
            ck_assert_int_eq(k, AF_ACCEL_NONE);
    }
}

static const struct {
    const char *name;
    struct pod_spec pod;
    enum af_cpu_backfill backfill_policy;
    const char *note;             /* a note that must be present, or NULL */
    enum af_workload workload;
    bool inferred;
    enum af_class first;          /* the rank-1 class */
    enum af_class absent;         /* a class that must have no tier (UNKNOWN: skip) */
    const char *dropped_reason;   /* substring of some dropped entry, or NULL */
    const char *accel_tier;       /* the last tier, taking accelerator nodes for a CPU pod */
} plan_cases[] = {
    {"malformed model size is ignored with a note",
     {.gpu = 1, .workload = "training", .params = "huge"}, false,
     "annotation accelfit.io/model-params: cannot parse model size 'huge': write a parameter "
     "count as 70B", AF_WORKLOAD_TRAINING, false,
     AF_CLASS_NVIDIA_A100, AF_CLASS_UNKNOWN, NULL, NULL},
    {"malformed latency and neuron-ready are ignored",
     {.gpu = 1, .workload = "inference", .slo = "-5", .neuron_ready = "yes"}, false,
     "annotation accelfit.io/latency-slo-ms='-5' is not a positive integer", AF_WORKLOAD_INFERENCE,
     false, AF_CLASS_NVIDIA_A10G, AF_CLASS_UNKNOWN, NULL, NULL},
    {"unknown workload word is ignored and the workload inferred",
     {.gpu = 1, .workload = "gaming"}, false, "annotation accelfit.io/workload='gaming'",
     AF_WORKLOAD_INFERENCE, true, AF_CLASS_NVIDIA_A10G, AF_CLASS_UNKNOWN, NULL, NULL},
    {"GPU pod without annotations is inference", {.gpu = 1}, false,
     "inferred inference from the nvidia.com/gpu request", AF_WORKLOAD_INFERENCE, true,
     AF_CLASS_NVIDIA_A10G, AF_CLASS_INFERENTIA2, NULL, NULL},
    {"CPU pod without annotations is preprocessing, accelerator nodes ranked last",
     {.cpu = 2000}, false, "inferred preprocessing", AF_WORKLOAD_PREPROCESSING, true,
     AF_CLASS_CPU, AF_CLASS_UNKNOWN, NULL, "accelerator nodes, last"},
    {"CPU pod stating its workload stays off accelerator nodes",
     {.cpu = 2000, .workload = "preprocessing"}, false, NULL, AF_WORKLOAD_PREPROCESSING, false,
     AF_CLASS_CPU, AF_CLASS_NVIDIA_T4, NULL, NULL},
    {"CPU pod without annotations, filter.cpu_backfill: never: no accelerator tier",
     {.cpu = 2000}, AF_CPU_BACKFILL_NEVER, "inferred preprocessing", AF_WORKLOAD_PREPROCESSING,
     true, AF_CLASS_CPU, AF_CLASS_NVIDIA_T4, NULL, NULL},
    {"GPU pod never gets Neuron tiers, even when the rule ranks them first",
     {.gpu = 1, .workload = "inference", .objective = "cost", .framework = "pytorch",
      .neuron_ready = "true"},
     false, NULL, AF_WORKLOAD_INFERENCE, false, AF_CLASS_NVIDIA_A10G, AF_CLASS_INFERENTIA2,
     "the pod requests nvidia.com/gpu, which inferentia2 nodes do not have", NULL},
    {"Neuron pod keeps to Neuron classes",
     {.neuron = 1, .workload = "training", .params = "70B", .objective = "cost",
      .framework = "pytorch"},
     false, "without accelfit.io/neuron-ready: taken as Neuron-ready", AF_WORKLOAD_TRAINING,
     false, AF_CLASS_TRAINIUM1, AF_CLASS_NVIDIA_A100, "which nvidia-a100 nodes do not have", NULL},
    {"Neuron inference pod drops GPU tiers",
     {.neuroncore = 2, .workload = "inference", .objective = "cost", .framework = "pytorch",
      .neuron_ready = "true"},
     false, NULL, AF_WORKLOAD_INFERENCE, false, AF_CLASS_INFERENTIA2, AF_CLASS_NVIDIA_A10G,
     "which nvidia-a10g nodes do not have", NULL},
    {"Neuron pod whose rule has no Neuron tier falls back to any Neuron class",
     {.neuron = 1, .workload = "inference", .neuron_ready = "false"}, false,
     "can serve a pod that requests aws.amazon.com/neuron", AF_WORKLOAD_INFERENCE, false,
     AF_CLASS_UNKNOWN, AF_CLASS_NVIDIA_A10G, NULL, NULL},
    {"CPU pod annotated as training gets only cpu", {.workload = "training", .params = "7B"},
     false, "can serve a pod that requests no accelerator", AF_WORKLOAD_TRAINING, false,
     AF_CLASS_UNKNOWN, AF_CLASS_NVIDIA_A100,
     "CPU-only pod (no accelerator requested): nvidia-a100 is an accelerator class", NULL},
    {"GPU pod annotated classical-ml falls back to any GPU class",
     {.gpu = 1, .workload = "classical-ml"}, false, "can serve a pod that requests nvidia.com/gpu",
     AF_WORKLOAD_CLASSICAL_ML, false, AF_CLASS_UNKNOWN, AF_CLASS_CPU,
     "the pod requests nvidia.com/gpu, which cpu nodes do not have", NULL},
    {"Neuron pod with a malformed neuron-ready is Neuron-ready, as if unannotated",
     {.neuron = 1, .workload = "training", .params = "70B", .objective = "cost",
      .framework = "pytorch", .neuron_ready = "yes"},
     false, "without accelfit.io/neuron-ready: taken as Neuron-ready", AF_WORKLOAD_TRAINING,
     false, AF_CLASS_TRAINIUM1, AF_CLASS_NVIDIA_H100, "which nvidia-h100 nodes do not have", NULL},
    {"CPU pod with backfill gets a last accelerator tier", {.cpu = 500}, true, NULL,
     AF_WORKLOAD_PREPROCESSING, true, AF_CLASS_CPU, AF_CLASS_UNKNOWN, NULL,
     "backfill onto accelerator nodes"},
};

START_TEST(test_plan_cases)
{
    struct af_policy pol = *cfg->policy; /* shallow copy: only a flag changes */
    struct af_pod_info *pod = mkpod(&plan_cases[_i].pod);
    struct af_plan plan;
    bool found = plan_cases[_i].dropped_reason == NULL;

    pol.cpu_backfill = plan_cases[_i].backfill_policy;
    af_plan_pod(&pol, cfg->catalog, pod, &plan);
    check_plan_invariants(&plan);
    if (plan_cases[_i].note)
        ck_assert_msg(has_note(&plan, plan_cases[_i].note), "%s: no note '%s' (first: '%s')",
                      plan_cases[_i].name, plan_cases[_i].note, plan.notes[0]);
    ck_assert_int_eq(plan.profile.workload, plan_cases[_i].workload);
    ck_assert_int_eq(plan.workload_inferred, plan_cases[_i].inferred);
    ck_assert_msg(plan.sel.tiers[0].cls == plan_cases[_i].first, "%s: first tier %s",
                  plan_cases[_i].name, af_plan_tier_name(&plan, 0));
    if (plan_cases[_i].absent != AF_CLASS_UNKNOWN)
        ck_assert_int_eq(plan.tier_of[plan_cases[_i].absent], -1);
    for (size_t i = 0; !found && i < plan.sel.n_dropped; i++)
        found = strstr(plan.sel.dropped[i].reason, plan_cases[_i].dropped_reason) != NULL;
    ck_assert_msg(found, "%s: no dropped reason '%s'", plan_cases[_i].name,
                  plan_cases[_i].dropped_reason);
    ck_assert_int_eq(plan.backfill, plan_cases[_i].accel_tier != NULL);
    if (plan.backfill) {
        int last = (int)plan.sel.n_tiers - 1;
        ck_assert_int_eq(plan.tier_of[AF_CLASS_NVIDIA_A100], last);
        ck_assert_int_eq(plan.tier_of[AF_CLASS_INFERENTIA2], last);
        ck_assert_int_lt(plan.tier_of[AF_CLASS_CPU], last);
        ck_assert_str_eq(af_plan_tier_name(&plan, last), plan_cases[_i].accel_tier);
    }
    if (!strcmp(plan_cases[_i].name, "malformed model size is ignored with a note"))
        ck_assert(plan.profile.model_params == 0);
    af_pod_info_unref(pod);
}
END_TEST

/* ---- filter ------------------------------------------------------------------------------------ */

struct node_spec {
    const char *name;
    enum af_class cls;
    int64_t gpu, neuron, cpu;
    int64_t used_gpu, used_neuron, used_cpu;
    int npods, nsystem;
    double price;
    bool unknown_price, unschedulable;
};

#define MAXN 6

struct bed {
    struct af_node_info *infos[MAXN];
    struct af_node_view views[MAXN];
    const char *names[MAXN];
    struct af_node_decision out[MAXN];
    size_t n;
};

static void bed_add(struct bed *b, const struct node_spec *s)
{
    struct af_node_info *n = NULL;
    struct af_node_view *v = &b->views[b->n];

    if (s->cls != (enum af_class)-2) {
        n = af_node_info_new();
        n->name = af_xstrdup(s->name);
        n->cls = s->cls;
        n->class_source = "test";
        /* "c6i-a" is a c6i node: tiers with families look at it. */
        n->family = af_xstrndup(s->name, strcspn(s->name, "-"));
        n->allocatable.v[AF_RES_CPU] = s->cpu ? s->cpu : 64000;
        n->allocatable.v[AF_RES_MEMORY] = 256LL << 30;
        n->allocatable.v[AF_RES_GPU] = s->gpu;
        n->allocatable.v[AF_RES_NEURON] = s->neuron;
        n->allocatable.v[AF_RES_PODS] = 110;
        n->unschedulable = s->unschedulable;
        n->price_known = !s->unknown_price;
        n->hourly_usd = s->price;
        n->kind = af_res_accel_kind(&n->allocatable);
    }
    memset(v, 0, sizeof(*v));
    v->info = n;
    v->used.v[AF_RES_GPU] = s->used_gpu;
    v->used.v[AF_RES_NEURON] = s->used_neuron;
    v->used.v[AF_RES_CPU] = s->used_cpu;
    v->npods = s->npods;
    v->nsystem = s->nsystem;
    b->infos[b->n] = n;
    b->names[b->n] = s->name;
    b->n++;
}

static void bed_release(struct bed *b)
{
    for (size_t i = 0; i < b->n; i++)
        af_node_info_unref(b->infos[i]);
}

#define NOT_CACHED ((enum af_class)-2)

struct verdict_want {
    enum af_verdict verdict;
    const char *reason; /* substring */
};

static const struct {
    const char *name;
    struct pod_spec pod;
    enum af_cpu_backfill backfill;
    struct node_spec nodes[MAXN];
    struct verdict_want want[MAXN];
    int best_tier;
    bool fallback;
    bool strict;                  /* every rule of the policy strict */
} filter_cases[] = {
    {"tier 1 with room rejects tier 3 naming tier 1",
     {.gpu = 1, .workload = "inference"},
     false,
     {{"g5-a", AF_CLASS_NVIDIA_A10G, .gpu = 1, .npods = 1, .price = 1},
      {"g4dn-a", AF_CLASS_NVIDIA_T4, .gpu = 1, .npods = 1, .price = 0.5}},
     {{AF_VERDICT_PASS, "tier 1 (nvidia-a10g): rule inference-default"},
      {AF_VERDICT_FAILED, "tier 1 (nvidia-a10g) has room on g5-a; this node is tier 3 (nvidia-t4)"}},
     0,
     false,
     false},
    {"an unannotated pod is ranked, never filtered, by its guessed tiers",
     {.gpu = 1},
     false,
     {{"g5-a", AF_CLASS_NVIDIA_A10G, .gpu = 1, .npods = 1, .price = 1},
      {"g4dn-a", AF_CLASS_NVIDIA_T4, .gpu = 1, .npods = 1, .price = 0.5},
      {"p5-a", AF_CLASS_NVIDIA_H100, .gpu = 8, .npods = 1, .price = 55}},
     {{AF_VERDICT_PASS, "tier 1 (nvidia-a10g): rule inference-default, inferred"},
      {AF_VERDICT_PASS, "tier 3 (nvidia-t4)"},
      {AF_VERDICT_PASS, "(any other NVIDIA GPU class: nvidia-h100)"}},
     0,
     false,
     false},
    {"objective cost: a 1-GPU pod pays an eighth of an idle spot p4d, less than a p5",
     {.gpu = 1, .workload = "batch-inference", .params = "350M", .objective = "cost"},
     false,
     {{"p4d-a", AF_CLASS_NVIDIA_A100, .gpu = 8, .npods = 1, .price = 8.78},
      {"p5-a", AF_CLASS_NVIDIA_H100, .gpu = 8, .npods = 1, .price = 55.04}},
     {{AF_VERDICT_PASS, "tier 5 (nvidia-a100)"},
      {AF_VERDICT_FAILED, "tier 5 (nvidia-a100) has room on p4d-a; this node is tier 7 (nvidia-h100)"}},
     4,
     true,
     false},
    {"objective cost, model size unknown: the pod's one-GPU request sets its share",
     {.gpu = 1, .workload = "batch-inference", .objective = "cost"},
     false,
     {{"p4d-a", AF_CLASS_NVIDIA_A100, .gpu = 8, .npods = 1, .price = 8.78},
      {"p5-a", AF_CLASS_NVIDIA_H100, .gpu = 8, .npods = 1, .price = 55.04}},
     {{AF_VERDICT_PASS, "tier 5 (nvidia-a100)"},
      {AF_VERDICT_FAILED, "tier 5 (nvidia-a100) has room on p4d-a; this node is tier 7 (nvidia-h100)"}},
     4,
     true,
     false},
    {"tier 1 full lets tier 3 pass",
     {.gpu = 1, .workload = "inference"},
     false,
     {{"g5-a", AF_CLASS_NVIDIA_A10G, .gpu = 1, .used_gpu = 1, .npods = 1, .price = 1},
      {"g4dn-a", AF_CLASS_NVIDIA_T4, .gpu = 1, .npods = 1, .price = 0.5},
      {"g4dn-b", AF_CLASS_NVIDIA_T4, .gpu = 1, .used_gpu = 1, .npods = 1, .price = 0.5}},
     {{AF_VERDICT_FAILED, "no room for nvidia.com/gpu: the pod requests 1, 0 free of 1 allocatable"},
      {AF_VERDICT_PASS, "tier 3 (nvidia-t4)"},
      {AF_VERDICT_PASS, "the cache shows no room"}},
     2,
     true,
     false},
    {"cordoned tier 1 node has no room",
     {.gpu = 1, .workload = "inference"},
     false,
     {{"g5-a", AF_CLASS_NVIDIA_A10G, .gpu = 1, .npods = 1, .price = 1, .unschedulable = true},
      {"l4-a", AF_CLASS_NVIDIA_L4, .gpu = 1, .npods = 1, .price = 1}},
     {{AF_VERDICT_FAILED, "node is cordoned"}, {AF_VERDICT_PASS, "tier 2 (nvidia-l4)"}},
     1,
     true,
     false},
    {"CPU pod that states its workload is kept off GPU nodes as unresolvable",
     {.cpu = 1000, .workload = "preprocessing"},
     false,
     {{"c6i-a", AF_CLASS_CPU, .npods = 1, .price = 0.68},
      {"p4d-a", AF_CLASS_NVIDIA_A100, .gpu = 8, .npods = 1, .price = 32}},
     {{AF_VERDICT_PASS, "tier 1 (cpu)"},
      {AF_VERDICT_UNRESOLVABLE,
       "CPU-only pod kept off accelerator node (nvidia-a100): it states its workload "
       "(accelfit.io/workload: preprocessing) and policy filter.cpu_backfill is off"}},
     0,
     false,
     false},
    {"un-annotated CPU pod passes GPU nodes, ranked last (a guess ranks, never refuses)",
     {.cpu = 1000},
     false,
     {{"c6i-a", AF_CLASS_CPU, .npods = 1, .price = 0.68},
      {"p4d-a", AF_CLASS_NVIDIA_A100, .gpu = 8, .npods = 1, .price = 32}},
     {{AF_VERDICT_PASS, "tier 1 (cpu)"},
      {AF_VERDICT_PASS, "(accelerator nodes, last: nvidia-a100)"}},
     0,
     false,
     false},
    {"un-annotated CPU pod with filter.cpu_backfill: never is kept off GPU nodes",
     {.cpu = 1000},
     AF_CPU_BACKFILL_NEVER,
     {{"c6i-a", AF_CLASS_CPU, .npods = 1, .price = 0.68},
      {"p4d-a", AF_CLASS_NVIDIA_A100, .gpu = 8, .npods = 1, .price = 32}},
     {{AF_VERDICT_PASS, "tier 1 (cpu)"},
      {AF_VERDICT_UNRESOLVABLE,
       "CPU-only pod kept off accelerator node (nvidia-a100): policy filter.cpu_backfill "
       "is never"}},
     0,
     false,
     false},
    {"CPU pod backfills a GPU node only when no CPU node has room",
     {.cpu = 8000, .workload = "preprocessing"},
     true,
     {{"c6i-a", AF_CLASS_CPU, .cpu = 16000, .used_cpu = 12000, .npods = 3, .price = 0.68},
      {"p4d-a", AF_CLASS_NVIDIA_A100, .gpu = 8, .npods = 1, .price = 32}},
     {{AF_VERDICT_FAILED, "no room for cpu: the pod requests 8"},
      {AF_VERDICT_PASS, "(backfill onto accelerator nodes: nvidia-a100)"}},
     2,
     true,
     false},
    {"amounts in reasons are exact Kubernetes quantities, never rounded alike",
     {.cpu = 95710, .workload = "preprocessing"},
     false,
     {{"c6i-a", AF_CLASS_CPU, .cpu = 95690, .npods = 1, .price = 0.68},
      {"c6i-b", AF_CLASS_CPU, .cpu = 96000, .used_cpu = 1000, .npods = 1, .price = 0.68},
      {"c6i-c", AF_CLASS_CPU, .cpu = 128000, .npods = 1, .price = 0.9}},
     {{AF_VERDICT_UNRESOLVABLE, "the pod requests 95710m cpu; this node (cpu) has 95690m "
                                "allocatable in all"},
      {AF_VERDICT_PASS, "tier 1 (cpu)"},
      {AF_VERDICT_PASS, "tier 1 (cpu)"}},
     0,
     false,
     false},
    {"no candidate has room: the best tier present passes, and the reason says so",
     {.gpu = 1, .workload = "inference"},
     false,
     {{"g5-a", AF_CLASS_NVIDIA_A10G, .gpu = 1, .used_gpu = 1, .npods = 1, .price = 1},
      {"g4dn-a", AF_CLASS_NVIDIA_T4, .gpu = 1, .used_gpu = 1, .npods = 1, .price = 0.5}},
     {{AF_VERDICT_PASS, "the cache shows no room, the scheduler's view decides"},
      {AF_VERDICT_FAILED, "accelfit's cache shows no candidate with room, so it kept the best "
                          "tier present, tier 1 (nvidia-a10g), and left the choice among its "
                          "nodes to kube-scheduler; this node is tier 3 (nvidia-t4)"}},
     0,
     false,
     false},
    {"no candidate has room and one is cordoned: its reason says cordoned, not no room",
     {.gpu = 1, .workload = "inference"},
     false,
     {{"g5-a", AF_CLASS_NVIDIA_A10G, .gpu = 1, .npods = 1, .price = 1, .unschedulable = true},
      {"g5-b", AF_CLASS_NVIDIA_A10G, .gpu = 1, .used_gpu = 1, .npods = 1, .price = 1}},
     {{AF_VERDICT_PASS, "the node is cordoned (spec.unschedulable), the scheduler's view decides"},
      {AF_VERDICT_PASS, "the cache shows no room, the scheduler's view decides"}},
     0,
     false,
     false},
    {"a tier's families are enforced: other CPU families come after",
     {.cpu = 1000, .workload = "preprocessing"},
     false,
     {{"m7g-a", AF_CLASS_CPU, .npods = 1, .price = 0.6},
      {"c6i-a", AF_CLASS_CPU, .npods = 1, .price = 0.68}},
     {{AF_VERDICT_FAILED, "tier 1 (cpu) has room on c6i-a; this node is tier 2 (any other CPU "
                          "node: cpu)"},
      {AF_VERDICT_PASS, "tier 1 (cpu)"}},
     0,
     false,
     false},
    {"Neuron pod: other NeuronCore generations wait behind its preferred one",
     {.neuron = 1, .workload = "inference", .objective = "cost", .framework = "pytorch",
      .neuron_ready = "true"},
     false,
     {{"inf2-a", AF_CLASS_INFERENTIA2, .neuron = 1, .npods = 1, .price = 0.76},
      {"trn2-a", AF_CLASS_TRAINIUM2, .neuron = 16, .npods = 1, .price = 40},
      {"inf1-a", AF_CLASS_INFERENTIA1, .neuron = 1, .npods = 1, .price = 0.23},
      {"g5-a", AF_CLASS_NVIDIA_A10G, .gpu = 1, .npods = 1, .price = 1},
      {"trn1-a", AF_CLASS_TRAINIUM1, .neuron = 16, .npods = 1, .price = 21}},
     {{AF_VERDICT_PASS, "tier 1 (inferentia2): rule inference-cost-neuron"},
      {AF_VERDICT_FAILED, "this node is tier 4 (other NeuronCore generations: trainium2)"},
      {AF_VERDICT_FAILED, "this node is tier 4 (other NeuronCore generations: inferentia1)"},
      {AF_VERDICT_UNRESOLVABLE, "pod requests AWS Neuron devices; this node (nvidia-a10g) has none"},
      {AF_VERDICT_FAILED, "tier 1 (inferentia2) has room on inf2-a; this node is tier 2 "
                          "(trainium1)"}},
     0,
     false,
     false},
    {"Neuron pod with a stated NeuronCore generation runs only there",
     {.neuron = 1, .workload = "inference", .objective = "cost", .framework = "pytorch",
      .neuron_ready = "true", .neuron_gen = "1"},
     false,
     {{"inf2-a", AF_CLASS_INFERENTIA2, .neuron = 1, .npods = 1, .price = 0.76},
      {"trn2-a", AF_CLASS_TRAINIUM2, .neuron = 16, .npods = 1, .price = 40},
      {"inf1-a", AF_CLASS_INFERENTIA1, .neuron = 1, .npods = 1, .price = 0.23}},
     {{AF_VERDICT_UNRESOLVABLE, "this node (inferentia2) runs NeuronCore-v2; the pod's artifact "
                                "is compiled for NeuronCore-v1"},
      {AF_VERDICT_UNRESOLVABLE, "this node (trainium2) runs NeuronCore-v3"},
      {AF_VERDICT_PASS, "(any other Neuron class: inferentia1)"}},
     0,
     false,
     false},
    {"unannotated Neuron pod may use every Neuron node, inf1 and trn2 included",
     {.neuron = 1},
     false,
     {{"trn1-a", AF_CLASS_TRAINIUM1, .neuron = 16, .npods = 1, .price = 21},
      {"trn2-a", AF_CLASS_TRAINIUM2, .neuron = 16, .npods = 1, .price = 40},
      {"inf1-a", AF_CLASS_INFERENTIA1, .neuron = 1, .npods = 1, .price = 0.23}},
     {{AF_VERDICT_PASS, "tier 2 (any other Neuron class: trainium1)"},
      {AF_VERDICT_PASS, "tier 3 (other NeuronCore generations: trainium2)"},
      {AF_VERDICT_PASS, "tier 3 (other NeuronCore generations: inferentia1)"}},
     1,
     false,
     false},
    {"GPU pod on a Neuron node, an unknown node and a GPU node of unknown model",
     {.gpu = 1},
     false,
     {{"trn1-a", AF_CLASS_TRAINIUM1, .neuron = 16, .npods = 1, .price = 21},
      {.name = "ghost", .cls = NOT_CACHED},
      {"mystery", AF_CLASS_UNKNOWN, .gpu = 1},
      {"p4d-a", AF_CLASS_NVIDIA_A100, .gpu = 8, .npods = 1, .price = 32}},
     {{AF_VERDICT_UNRESOLVABLE, "pod requests NVIDIA GPU devices; this node (trainium1) has none"},
      {AF_VERDICT_FAILED, "node not in accelfit's cache yet"},
      {AF_VERDICT_PASS, "(any other NVIDIA GPU class)"},
      {AF_VERDICT_PASS, "tier 5 (nvidia-a100)"}},
     4,
     false,
     false},
    {"a rule's tiers are preferences: classes it does not name come last",
     {.gpu = 1, .workload = "inference"},
     false,
     {{"p3-a", AF_CLASS_NVIDIA_V100, .gpu = 1, .npods = 1, .price = 3},
      {"h200-a", AF_CLASS_NVIDIA_H200, .gpu = 8, .npods = 1, .price = 80}},
     {{AF_VERDICT_PASS, "tier 6 (any other NVIDIA GPU class: nvidia-v100)"},
      {AF_VERDICT_PASS, "tier 6 (any other NVIDIA GPU class: nvidia-h200)"}},
     5,
     true,
     false},
    {"a strict rule refuses the classes it does not name, and names its tiers",
     {.gpu = 1, .workload = "inference"},
     false,
     {{"p3-a", AF_CLASS_NVIDIA_V100, .gpu = 1, .npods = 1, .price = 3},
      {"g5-a", AF_CLASS_NVIDIA_A10G, .gpu = 1, .npods = 1, .price = 1}},
     {{AF_VERDICT_UNRESOLVABLE, "class nvidia-v100, family p3 is not among the tiers of strict "
                                "rule inference-default: nvidia-a10g, nvidia-l4, nvidia-t4, "
                                "nvidia-l40s, nvidia-a100"},
      {AF_VERDICT_PASS, "tier 1 (nvidia-a10g)"}},
     0,
     false,
     true},
    {"a strict rule binds only a pod that states its workload",
     {.gpu = 1},
     false,
     {{"p3-a", AF_CLASS_NVIDIA_V100, .gpu = 1, .npods = 1, .price = 3}},
     {{AF_VERDICT_PASS, "(any other NVIDIA GPU class: nvidia-v100)"}},
     5,
     false,
     true},
};

static const struct {
    enum af_res r;
    int64_t v;
    const char *want;
} res_format_cases[] = {
    {AF_RES_CPU, 95710, "95710m"},
    {AF_RES_CPU, 95690, "95690m"},
    {AF_RES_CPU, 4000, "4"},
    {AF_RES_CPU, 500, "500m"},
    {AF_RES_CPU, 0, "0"},
    {AF_RES_MEMORY, 1000LL << 30, "1000Gi"},
    {AF_RES_MEMORY, 1150LL << 30, "1150Gi"},
    {AF_RES_MEMORY, 1536LL << 20, "1536Mi"},
    {AF_RES_MEMORY, 2LL << 40, "2Ti"},
    {AF_RES_MEMORY, (16LL << 30) + 1, "17179869185"},
    {AF_RES_MEMORY, 1500000000LL, "1500M"},
    {AF_RES_MEMORY, 4096, "4Ki"},
    {AF_RES_MEMORY, 1000, "1k"},
    {AF_RES_MEMORY, 999, "999"},
    {AF_RES_MEMORY, -(3LL << 30), "-3Gi"},
    {AF_RES_GPU, 8, "8"},
};

/* Every resource amount a person reads is exact, in the form kubectl prints. */
START_TEST(test_res_format_is_exact)
{
    char out[32];

    af_res_format(res_format_cases[_i].r, res_format_cases[_i].v, out, sizeof(out));
    ck_assert_str_eq(out, res_format_cases[_i].want);
}
END_TEST

START_TEST(test_filter_cases)
{
    struct af_policy pol = *cfg->policy;
    struct af_pod_info *pod = mkpod(&filter_cases[_i].pod);
    struct af_plan plan;
    struct af_filter_summary sum;
    struct bed b = {0};
    int passed = 0, failed = 0, unres = 0;

    struct af_rule rules[64];

    pol.cpu_backfill = filter_cases[_i].backfill;
    if (filter_cases[_i].strict) {
        ck_assert_uint_le(pol.n_rules, AF_ARRAY_SIZE(rules));
        memcpy(rules, pol.rules, pol.n_rules * sizeof(rules[0]));
        for (size_t r = 0; r < pol.n_rules; r++)
            rules[r].strict = true;
        pol.rules = rules;
    }
    af_plan_pod(&pol, cfg->catalog, pod, &plan);
    for (size_t i = 0; i < MAXN && filter_cases[_i].nodes[i].name; i++)
        bed_add(&b, &filter_cases[_i].nodes[i]);
    af_filter(&pol, &plan, pod, b.views, b.names, b.n, b.out, &sum);
    for (size_t i = 0; i < b.n; i++) {
        const struct verdict_want *w = &filter_cases[_i].want[i];
        ck_assert_str_eq(b.out[i].name, b.names[i]);
        ck_assert_msg(b.out[i].verdict == w->verdict, "%s: %s verdict %d: %s",
                      filter_cases[_i].name, b.names[i], b.out[i].verdict, b.out[i].reason);
        ck_assert_msg(strstr(b.out[i].reason, w->reason), "%s: %s reason '%s', want '%s'",
                      filter_cases[_i].name, b.names[i], b.out[i].reason, w->reason);
        passed += b.out[i].verdict == AF_VERDICT_PASS;
        failed += b.out[i].verdict == AF_VERDICT_FAILED;
        unres += b.out[i].verdict == AF_VERDICT_UNRESOLVABLE;
    }
    ck_assert_int_eq(sum.passed, passed);
    ck_assert_int_eq(sum.failed, failed);
    ck_assert_int_eq(sum.unresolvable, unres);
    ck_assert_int_eq(sum.best_tier, filter_cases[_i].best_tier);
    ck_assert_int_eq(sum.fallback, filter_cases[_i].fallback);
    bed_release(&b);
    af_pod_info_unref(pod);
}
END_TEST

/*
 * A refused node's reason is written once per class and kept for the next node of that
 * class, or of that class and family when the text names the family: each node among
 * many reads exactly what it reads alone. CPU nodes of two families, in turn, for a GPU
 * pod; then GPU nodes of one class (V100) and two families that a strict rule leaves out.
 */
START_TEST(test_filter_reasons_among_many_read_as_alone)
{
    static const struct node_spec cpu[] = {
        {"c6i-a", AF_CLASS_CPU, .cpu = 16000, .price = 0.7},
        {"m6i-b", AF_CLASS_CPU, .cpu = 32000, .price = 1.5},
        {"c6i-c", AF_CLASS_CPU, .cpu = 16000, .price = 0.7},
        {"m6i-d", AF_CLASS_CPU, .cpu = 32000, .price = 1.5},
    };
    static const struct node_spec v100[] = {
        {"p3-a", AF_CLASS_NVIDIA_V100, .gpu = 1, .price = 3},
        {"xp3-b", AF_CLASS_NVIDIA_V100, .gpu = 1, .price = 3},
        {"p3-c", AF_CLASS_NVIDIA_V100, .gpu = 1, .price = 3},
        {"g5-d", AF_CLASS_NVIDIA_A10G, .gpu = 1, .price = 1},
    };
    const struct node_spec *beds[] = {cpu, v100};
    struct pod_spec ps = {.gpu = 1, .workload = "inference"};
    struct af_policy pol = *cfg->policy;
    struct af_rule rules[64];

    ck_assert_uint_le(pol.n_rules, AF_ARRAY_SIZE(rules));
    memcpy(rules, pol.rules, pol.n_rules * sizeof(rules[0]));
    for (size_t r = 0; r < pol.n_rules; r++)
        rules[r].strict = true;
    pol.rules = rules;
    for (size_t k = 0; k < AF_ARRAY_SIZE(beds); k++) {
        struct af_pod_info *pod = mkpod(&ps);
        struct af_plan plan;
        struct bed all = {0};
        size_t refused = 0;

        af_plan_pod(&pol, cfg->catalog, pod, &plan);
        for (size_t i = 0; i < 4; i++)
            bed_add(&all, &beds[k][i]);
        af_filter(&pol, &plan, pod, all.views, all.names, all.n, all.out, NULL);
        for (size_t i = 0; i < all.n; i++) {
            struct bed one = {0};
            if (all.out[i].verdict != AF_VERDICT_UNRESOLVABLE)
                continue;
            refused++;
            bed_add(&one, &beds[k][i]);
            af_filter(&pol, &plan, pod, one.views, one.names, 1, one.out, NULL);
            ck_assert_str_eq(all.out[i].reason, one.out[0].reason);
            bed_release(&one);
        }
        ck_assert_uint_ge(refused, 3);
        bed_release(&all);
        af_pod_info_unref(pod);
    }
}
END_TEST

/*
 * The filter answer's reasons (plan.brief_reasons): every tier-1 node short of GPUs gets the
 * same text whatever its own free amount, so kube-scheduler's event counts them in one line;
 * verdicts and tiers are those of the detailed reasons /explain shows.
 */
START_TEST(test_filter_brief_reasons_name_the_cause_once)
{
    static const struct node_spec nodes[] = {
        {"g5-a", AF_CLASS_NVIDIA_A10G, .gpu = 1, .used_gpu = 1, .npods = 1, .price = 1},
        {"g5-b", AF_CLASS_NVIDIA_A10G, .gpu = 4, .used_gpu = 4, .npods = 3, .price = 5},
        {"g5-c", AF_CLASS_NVIDIA_A10G, .gpu = 4, .npods = 110, .price = 5},
        {"g5-d", AF_CLASS_NVIDIA_A10G, .gpu = 1, .npods = 1, .price = 1, .unschedulable = true},
        {"g4dn-a", AF_CLASS_NVIDIA_T4, .gpu = 1, .npods = 1, .price = 0.5},
    };
    struct pod_spec ps = {.gpu = 1, .workload = "inference"};
    struct af_pod_info *pod = mkpod(&ps);
    struct af_plan plan;
    struct af_node_decision brief[MAXN];
    struct bed b = {0};

    for (size_t i = 0; i < AF_ARRAY_SIZE(nodes); i++)
        bed_add(&b, &nodes[i]);
    af_plan_pod(cfg->policy, cfg->catalog, pod, &plan);
    af_filter(cfg->policy, &plan, pod, b.views, b.names, b.n, b.out, NULL);
    plan.brief_reasons = true;
    af_filter(cfg->policy, &plan, pod, b.views, b.names, b.n, brief, NULL);
    for (size_t i = 0; i < b.n; i++) {
        ck_assert_int_eq(brief[i].verdict, b.out[i].verdict);
        ck_assert_int_eq(brief[i].tier, b.out[i].tier);
    }
    ck_assert_int_eq(b.out[0].verdict, AF_VERDICT_FAILED);
    ck_assert_str_eq(b.out[0].reason,
                     "no room for nvidia.com/gpu: the pod requests 1, 0 free of 1 allocatable");
    ck_assert_str_eq(b.out[1].reason,
                     "no room for nvidia.com/gpu: the pod requests 1, 0 free of 4 allocatable");
    ck_assert_str_eq(b.out[2].reason, "no room: 110 pods already, 110 allocatable");
    ck_assert_str_eq(brief[0].reason,
                     "no room for nvidia.com/gpu: the pod requests 1; tier 1 (nvidia-a10g)");
    ck_assert_str_eq(brief[1].reason, brief[0].reason);
    ck_assert_str_eq(brief[2].reason,
                     "no room: the node has as many pods as it allows; tier 1 (nvidia-a10g)");
    ck_assert_str_eq(brief[3].reason, "node is cordoned (spec.unschedulable)");
    ck_assert_int_eq(brief[4].verdict, AF_VERDICT_PASS);
    ck_assert_str_eq(brief[4].reason, b.out[4].reason);
    bed_release(&b);
    af_pod_info_unref(pod);
}
END_TEST

/* ---- prioritize ----------------------------------------------------------------------------------- */

static const struct {
    const char *name;
    struct pod_spec pod;
    enum af_strategy strategy;
    struct node_spec nodes[MAXN];
    const char *winner; /* the node that must score strictly highest */
} prio_cases[] = {
    {"cheaper node wins among equals", {.gpu = 1}, AF_STRATEGY_BINPACK,
     {{"pricey", AF_CLASS_NVIDIA_A10G, .gpu = 1, .npods = 1, .price = 2.0},
      {"cheap", AF_CLASS_NVIDIA_A10G, .gpu = 1, .npods = 1, .price = 1.0}},
     "cheap"},
    {"spot beats on-demand", {.gpu = 1}, AF_STRATEGY_BINPACK,
     {{"on-demand", AF_CLASS_NVIDIA_A10G, .gpu = 1, .npods = 1, .price = 1.006},
      {"spot", AF_CLASS_NVIDIA_A10G, .gpu = 1, .npods = 1, .price = 1.006 * 0.4}},
     "spot"},
    {"binpack prefers the fuller node", {.gpu = 1}, AF_STRATEGY_BINPACK,
     {{"empty", AF_CLASS_NVIDIA_A10G, .gpu = 4, .npods = 1, .price = 5.672},
      {"half", AF_CLASS_NVIDIA_A10G, .gpu = 4, .used_gpu = 2, .npods = 3, .price = 5.672}},
     "half"},
    {"spread prefers the emptier node", {.gpu = 1}, AF_STRATEGY_SPREAD,
     {{"half", AF_CLASS_NVIDIA_A10G, .gpu = 4, .used_gpu = 2, .npods = 3, .price = 5.672},
      {"empty", AF_CLASS_NVIDIA_A10G, .gpu = 4, .npods = 1, .price = 5.672}},
     "empty"},
    {"the first pod on an empty node pays for the whole node", {.gpu = 1}, AF_STRATEGY_SPREAD,
     {{"vacant", AF_CLASS_NVIDIA_A10G, .gpu = 4, .npods = 0, .price = 5.672},
      {"busy", AF_CLASS_NVIDIA_A10G, .gpu = 4, .used_gpu = 1, .npods = 2, .price = 5.672}},
     "busy"},
    {"a node with only DaemonSet and mirror pods is empty", {.gpu = 1}, AF_STRATEGY_SPREAD,
     {{"daemons-only", AF_CLASS_NVIDIA_A10G, .gpu = 4, .npods = 3, .nsystem = 3, .price = 5.672},
      {"busy", AF_CLASS_NVIDIA_A10G, .gpu = 4, .used_gpu = 1, .npods = 4, .nsystem = 3,
       .price = 5.672}},
     "busy"},
    {"one free node does not zero the cost term of the others", {.gpu = 1}, AF_STRATEGY_BINPACK,
     {{"free", AF_CLASS_NVIDIA_T4, .gpu = 1, .used_gpu = 1, .npods = 1, .price = 0},
      {"cheap", AF_CLASS_NVIDIA_A10G, .gpu = 4, .used_gpu = 1, .npods = 2, .price = 1},
      {"pricey", AF_CLASS_NVIDIA_A10G, .gpu = 4, .used_gpu = 1, .npods = 2, .price = 8}},
     "cheap"},
    {"better tier wins", {.gpu = 1}, AF_STRATEGY_BINPACK,
     {{"t4", AF_CLASS_NVIDIA_T4, .gpu = 1, .used_gpu = 1, .npods = 1, .price = 0.5},
      {"l4", AF_CLASS_NVIDIA_L4, .gpu = 1, .npods = 1, .price = 0.8},
      {"a10g", AF_CLASS_NVIDIA_A10G, .gpu = 1, .used_gpu = 1, .npods = 1, .price = 1}},
     "l4"},
    {"binpack never prefers a node the cache shows full", {.gpu = 1}, AF_STRATEGY_BINPACK,
     {{"full", AF_CLASS_NVIDIA_A10G, .gpu = 4, .used_gpu = 4, .npods = 4, .price = 5.672},
      {"roomy", AF_CLASS_NVIDIA_A10G, .gpu = 4, .used_gpu = 2, .npods = 3, .price = 5.672}},
     "roomy"},
    {"unknown price scores no cost points", {.cpu = 1000}, AF_STRATEGY_BINPACK,
     {{"unpriced", AF_CLASS_CPU, .cpu = 16000, .npods = 1, .unknown_price = true},
      {"priced", AF_CLASS_CPU, .cpu = 16000, .npods = 1, .price = 0.68}},
     "priced"},
};

START_TEST(test_prioritize_cases)
{
    struct af_policy pol = *cfg->policy;
    struct af_pod_info *pod = mkpod(&prio_cases[_i].pod);
    struct af_plan plan;
    struct bed b = {0};
    size_t win = 0;

    pol.strategy = prio_cases[_i].strategy;
    af_plan_pod(&pol, cfg->catalog, pod, &plan);
    for (size_t i = 0; i < MAXN && prio_cases[_i].nodes[i].name; i++)
        bed_add(&b, &prio_cases[_i].nodes[i]);
    af_prioritize(&pol, &plan, pod, b.views, b.names, b.n, b.out);
    for (size_t i = 0; i < b.n; i++) {
        ck_assert_int_ge(b.out[i].score, 0);
        ck_assert_int_le(b.out[i].score, 10);
        ck_assert(b.out[i].s_tier >= 0 && b.out[i].s_tier <= 1);
        ck_assert(b.out[i].s_util >= 0 && b.out[i].s_util <= 1);
        ck_assert(b.out[i].s_cost >= 0 && b.out[i].s_cost <= 1);
        if (b.out[i].verdict != AF_VERDICT_PASS)
            ck_assert_int_eq(b.out[i].score, 0);
        if (!strcmp(b.names[i], prio_cases[_i].winner))
            win = i;
    }
    for (size_t i = 0; i < b.n; i++)
        if (i != win)
            ck_assert_msg(b.out[win].score > b.out[i].score, "%s: %s scored %d, %s scored %d",
                          prio_cases[_i].name, b.names[win], b.out[win].score, b.names[i],
                          b.out[i].score);
    bed_release(&b);
    af_pod_info_unref(pod);
}
END_TEST

START_TEST(test_prioritize_is_deterministic_and_scores_parts)
{
    struct pod_spec ps = {.gpu = 1};
    struct af_pod_info *pod = mkpod(&ps);
    struct af_plan plan;
    struct bed b = {0};
    struct af_node_decision again[MAXN];
    struct node_spec a = {"a", AF_CLASS_NVIDIA_A10G, .gpu = 4, .used_gpu = 1, .npods = 2,
                          .price = 4};
    struct node_spec c = {"c", AF_CLASS_NVIDIA_A10G, .gpu = 1, .npods = 0, .price = 1};
    const struct af_policy *pol = cfg->policy;
    double w = pol->w_tier + pol->w_util + pol->w_cost;

    af_plan_pod(pol, cfg->catalog, pod, &plan);
    bed_add(&b, &a);
    bed_add(&b, &c);
    af_prioritize(pol, &plan, pod, b.views, b.names, b.n, b.out);
    af_prioritize(pol, &plan, pod, b.views, b.names, b.n, again);
    for (size_t i = 0; i < b.n; i++)
        ck_assert_int_eq(b.out[i].score, again[i].score);
    /* a: share 1/4 of $4 = $1; c: empty, whole $1. Both marginal $1. */
    ck_assert(b.out[0].marginal_known);
    ck_assert_double_eq_tol(b.out[0].marginal_usd_hr, 1.0, 1e-9);
    ck_assert_double_eq_tol(b.out[1].marginal_usd_hr, 1.0, 1e-9);
    ck_assert_double_eq_tol(b.out[0].util_after, 0.5, 1e-9);
    ck_assert_double_eq_tol(b.out[1].util_after, 1.0, 1e-9);
    ck_assert_double_eq_tol(b.out[0].s_tier, 1.0, 1e-9);
    ck_assert_int_eq(b.out[0].score,
                     (int)lround(10 * (pol->w_tier + pol->w_util * 0.5 + pol->w_cost) / w));
    bed_release(&b);
    af_pod_info_unref(pod);
}
END_TEST

Suite *af_decide_suite(void);
Suite *af_decide_suite(void)
{
    Suite *s = suite_create("decide");
    TCase *tc = tcase_create("decide");

    tcase_add_unchecked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_classify_label_schemes, 0, AF_ARRAY_SIZE(class_cases));
    tcase_add_loop_test(tc, test_classify_spot_and_price, 0, AF_ARRAY_SIZE(price_cases));
    tcase_add_loop_test(tc, test_classify_prices_every_catalog_type, 0,
                        (int)AF_ARRAY_SIZE(priced_cases));
    tcase_add_test(tc, test_classify_catalog_spot_discount_wins_over_policy);
    tcase_add_test(tc, test_price_sources_in_order_and_their_reasons);
    tcase_add_loop_test(tc, test_effective_requests, 0, AF_ARRAY_SIZE(req_cases));
    tcase_add_loop_test(tc, test_plan_cases, 0, AF_ARRAY_SIZE(plan_cases));
    tcase_add_loop_test(tc, test_res_format_is_exact, 0, (int)AF_ARRAY_SIZE(res_format_cases));
    tcase_add_loop_test(tc, test_filter_cases, 0, AF_ARRAY_SIZE(filter_cases));
    tcase_add_test(tc, test_filter_brief_reasons_name_the_cause_once);
    tcase_add_test(tc, test_filter_reasons_among_many_read_as_alone);
    tcase_add_loop_test(tc, test_prioritize_cases, 0, AF_ARRAY_SIZE(prio_cases));
    tcase_add_test(tc, test_prioritize_is_deterministic_and_scores_parts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void){return af_test_run(af_decide_suite());}
