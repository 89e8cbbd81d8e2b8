/* SPDX-License-Identifier: Apache-2.0 */
/*
 * select: every decision case of tests/fixtures/decisions.yaml through the
 * library API, the memory arithmetic and pricing, the Neuron gate, sizing
 * rules (max_instances, EFA, unknown sizes, CPU families) and the reasons.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "accelfit/config.h"
#include "accelfit/select.h"
#include "support/support.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

static struct af_config *cfg;
static json_t *cases;

static void setup(void)
{
    struct af_buf json = AF_BUF_INIT(0);
    struct af_error err;
    json_error_t jerr;
    size_t len;
    char *yaml;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&cfg, NULL, NULL, &err), 0);
    yaml = af_test_read("tests/fixtures/decisions.yaml", &len);
    ck_assert_msg(af_yaml_to_json("decisions.yaml", yaml, len, &json, &err) == 0, "%s", err.text);
    cases = json_loads(json.buf, 0, &jerr);
    ck_assert_ptr_nonnull(cases);
    af_buf_release(&json);
    free(yaml);
}

static void teardown(void)
{
    af_config_unref(cfg);
    json_decref(cases);
    cfg = NULL;
    cases = NULL;
}

/* Turns `accelfit recommend` flags into a profile, as the CLI does. */
static void profile_from_args(const json_t *args, struct af_profile *p)
{
    af_profile_init(p);
    for (size_t i = 0; i < json_array_size(args); i++) {
        const char *a = json_string_value(json_array_get(args, i));
        const char *v =
            i + 1 < json_array_size(args) ? json_string_value(json_array_get(args, i + 1)) : NULL;
        int64_t slo;
        ck_assert_ptr_nonnull(a);
        if (!strcmp(a, "--neuron-ready")) {
            p->neuron_ready = true;
            continue;
        }
        ck_assert_ptr_nonnull(v);
        i++;
        if (!strcmp(a, "--workload"))
            p->workload = af_workload_parse(v);
        else if (!strcmp(a, "--model-params"))
            ck_assert_int_eq(af_parse_count(v, &p->model_params), 0);
        else if (!strcmp(a, "--objective"))
            p->objective = af_objective_parse(v);
        else if (!strcmp(a, "--framework"))
            p->framework = af_framework_parse(v);
        else if (!strcmp(a, "--precision"))
            p->precision = af_precision_parse(v);
        else if (!strcmp(a, "--latency-slo-ms")) {
            ck_assert_int_eq(af_parse_int64(v, 1, 100000, &slo), 0);
            p->latency_slo_ms = (int)slo;
        } else
            ck_abort_msg("unknown flag %s in fixture", a);
    }
    ck_assert_int_ge(p->workload, 0);
}

static bool in_list(const json_t *list, const char *cls)
{
    for (size_t i = 0; i < json_array_size(list); i++)
        if (!strcmp(json_string_value(json_array_get(list, i)), cls))
            return true;
    return false;
}

/* Invariants of every selection. */
static void assert_sane_selection(const struct af_selection *s)
{
    ck_assert_uint_le(s->n_tiers, AF_CLASS__COUNT);
    for (size_t i = 0; i < s->n_tiers; i++) {
        const struct af_tier *t = &s->tiers[i];
        ck_assert_int_eq(t->rank, (int)i + 1);
        ck_assert_ptr_nonnull(t->instance);
        ck_assert_int_eq(t->instance->cls, t->cls);
        ck_assert_int_ge(t->instances, 1);
        ck_assert_int_ge(t->n_reasons, 3);
        if (t->price_known)
            ck_assert_double_eq_tol(t->hourly_usd, t->instances * t->instance->price_usd_hr, 1e-9);
        ck_assert_double_eq_tol(t->accel_memory_gib,
                                t->instances * af_instance_accel_memory_gib(t->instance), 1e-9);
        if (t->memory_needed_gib > 0 && t->cls != AF_CLASS_CPU)
            ck_assert(t->accel_memory_gib >= t->memory_needed_gib);
        for (size_t j = 0; j < i; j++)
            ck_assert_int_ne(s->tiers[j].cls, t->cls);
        /* What the workload pays is never more than the instances' price; a model split
         * across instances pays for them whole. */
        if (t->price_known) {
            ck_assert(t->workload_usd > 0 || t->hourly_usd == 0);
            ck_assert(t->workload_usd <= t->hourly_usd + 1e-9);
            if (t->instances > 1)
                ck_assert_double_eq_tol(t->workload_usd, t->hourly_usd, 1e-9);
        }
        /* Objective cost: within a kind, cheapest for the workload first. */
        if (s->price_ordered && i > 0 && t->price_known &&
            af_class_kind(s->tiers[i - 1].cls) == af_class_kind(t->cls))
            ck_assert(s->tiers[i - 1].workload_usd <= t->workload_usd + 1e-9);
    }
    for (size_t i = 0; i < s->n_dropped; i++)
        ck_assert(s->dropped[i].reason[0] != '\0');
}

START_TEST(test_decision_case)
{
    json_t *c = json_array_get(json_object_get(cases, "cases"), (size_t)_i);
    json_t *expect = json_object_get(c, "expect"), *v;
    const char *name = json_string_value(json_object_get(c, "name"));
    static struct af_selection s;
    struct af_profile p;

    ck_assert_ptr_nonnull(c);
    profile_from_args(json_object_get(c, "args"), &p);
    af_select(cfg->policy, cfg->catalog, &p, false, &s);
    assert_sane_selection(&s);
    ck_assert_msg(s.rule != NULL && s.n_tiers > 0, "%s: no tiers", name);
    v = json_object_get(expect, "first_in");
    if (v)
        ck_assert_msg(in_list(v, af_class_name(s.tiers[0].cls)), "%s: first tier is %s", name,
                      af_class_name(s.tiers[0].cls));
    v = json_object_get(expect, "first_not_in");
    if (v)
        ck_assert_msg(!in_list(v, af_class_name(s.tiers[0].cls)), "%s: first tier is %s", name,
                      af_class_name(s.tiers[0].cls));
    v = json_object_get(expect, "never");
    for (size_t i = 0; v && i < s.n_tiers; i++)
        ck_assert_msg(!in_list(v, af_class_name(s.tiers[i].cls)), "%s: tier %zu is %s", name, i + 1,
                      af_class_name(s.tiers[i].cls));
    v = json_object_get(expect, "min_accel_memory_gib");
    if (v)
        ck_assert_msg(s.tiers[0].accel_memory_gib >= json_number_value(v), "%s: %g GiB", name,
                      s.tiers[0].accel_memory_gib);
    v = json_object_get(expect, "min_instances");
    if (v)
        ck_assert_int_ge(s.tiers[0].instances, json_integer_value(v));
}
END_TEST

START_TEST(test_fixture_has_the_twelve_cases)
{
    ck_assert_uint_eq(json_array_size(json_object_get(cases, "cases")), 12);
}
END_TEST

/* ---- arithmetic ---------------------------------------------------------------------- */

static void select_for(struct af_selection *s, enum af_workload w, double params,
                       enum af_objective o, enum af_framework f, bool neuron_ready,
                       bool neuron_requested)
{
    struct af_profile p;

    af_profile_init(&p);
    p.workload = w;
    p.model_params = params;
    p.objective = o;
    p.framework = f;
    p.neuron_ready = neuron_ready;
    af_select(cfg->policy, cfg->catalog, &p, neuron_requested, s);
    assert_sane_selection(s);
}

static const struct af_dropped *find_dropped(const struct af_selection *s, enum af_class c)
{
    for (size_t i = 0; i < s->n_dropped; i++)
        if (s->dropped[i].cls == c)
            return &s->dropped[i];
    return NULL;
}

static bool any_reason_has(const struct af_tier *t, const char *needle)
{
    for (int i = 0; i < t->n_reasons; i++)
        if (strstr(t->reasons[i], needle))
            return true;
    return false;
}

START_TEST(test_70b_training_cost_needs_three_trn1_32xlarge)
{
    static struct af_selection s;
    const struct af_tier *t;

    select_for(&s, AF_WORKLOAD_TRAINING, 70e9, AF_OBJECTIVE_COST, AF_FRAMEWORK_PYTORCH, true,
               false);
    t = &s.tiers[0];
    ck_assert_str_eq(s.rule, "training-large-cost-neuron");
    ck_assert_int_eq(t->cls, AF_CLASS_TRAINIUM1);
    ck_assert_double_eq_tol(s.memory_needed_gib, 70e9 * 18 / GIB, 1e-9);
    ck_assert_int_ge(t->instances, 3);
    ck_assert_str_eq(t->instance->name, "trn1.32xlarge");
    ck_assert_int_eq(t->instances, 3);
    ck_assert(t->price_known);
    ck_assert_double_eq_tol(t->hourly_usd, t->instances * 21.50, 1e-9);
    ck_assert_double_eq_tol(t->accel_memory_gib, 1536, 1e-9);
    ck_assert(any_reason_has(t, "1173 GiB"));
    ck_assert(any_reason_has(t, "3 x trn1.32xlarge hold 1536 GiB"));
    ck_assert(any_reason_has(t, "$64.50/h on-demand, us-east-1"));
    /* trn2 has no catalog price: it is still ranked, with the price unknown. */
    ck_assert_int_eq(s.tiers[1].cls, AF_CLASS_TRAINIUM2);
    ck_assert(!s.tiers[1].price_known);
    ck_assert(any_reason_has(&s.tiers[1], "price unknown"));
}
END_TEST

START_TEST(test_multi_instance_needs_efa)
{
    static struct af_selection s;

    /* 37 x trn1.2xlarge would be cheaper than 3 x trn1.32xlarge, but it has no EFA. */
    select_for(&s, AF_WORKLOAD_TRAINING, 70e9, AF_OBJECTIVE_COST, AF_FRAMEWORK_PYTORCH, true,
               false);
    for (size_t i = 0; i < s.n_tiers; i++)
        if (s.tiers[i].instances > 1)
            ck_assert_msg(s.tiers[i].instance->efa, "%s", s.tiers[i].instance->name);
}
END_TEST

START_TEST(test_70b_inference_performance_memory)
{
    static struct af_selection s;
    const struct af_dropped *d;

    select_for(&s, AF_WORKLOAD_INFERENCE, 70e9, AF_OBJECTIVE_PERFORMANCE, AF_FRAMEWORK_PYTORCH,
               false, false);
    ck_assert_double_eq_tol(s.memory_needed_gib, 70e9 * 2 * 1.2 / GIB, 1e-9);
    ck_assert(s.memory_needed_gib >= 140);
    ck_assert(s.tiers[0].accel_memory_gib >= 140);
    ck_assert_int_eq(s.tiers[0].instances, 1);
    ck_assert(any_reason_has(&s.tiers[0], "156 GiB"));

    /* The default inference rule names T4, whose largest instance cannot hold 70B. */
    select_for(&s, AF_WORKLOAD_INFERENCE, 70e9, AF_OBJECTIVE_BALANCED, AF_FRAMEWORK_PYTORCH, false,
               false);
    d = find_dropped(&s, AF_CLASS_NVIDIA_T4);
    ck_assert_ptr_nonnull(d);
    ck_assert_msg(strstr(d->reason, "70B inference needs 156 GiB") != NULL, "%s", d->reason);
    ck_assert_ptr_nonnull(strstr(d->reason, "the largest nvidia-t4 instance"));
}
END_TEST

static const struct {
    enum af_workload w;
    double params;
    enum af_objective o;
} jax_cases[] = {
    {AF_WORKLOAD_TRAINING, 13e9, AF_OBJECTIVE_COST},
    {AF_WORKLOAD_TRAINING, 3e9, AF_OBJECTIVE_COST},
    {AF_WORKLOAD_TRAINING, 0, AF_OBJECTIVE_COST},
    {AF_WORKLOAD_TRAINING, 20e9, AF_OBJECTIVE_BALANCED},
    {AF_WORKLOAD_INFERENCE, 7e9, AF_OBJECTIVE_COST},
    {AF_WORKLOAD_INFERENCE, 0, AF_OBJECTIVE_BALANCED},
    {AF_WORKLOAD_INFERENCE, 1e9, AF_OBJECTIVE_LATENCY},
    {AF_WORKLOAD_BATCH_INFERENCE, 7e9, AF_OBJECTIVE_COST},
};

START_TEST(test_jax_never_gets_neuron)
{
    static struct af_selection s;

    for (int requested = 0; requested < 2; requested++) {
        select_for(&s, jax_cases[_i].w, jax_cases[_i].params, jax_cases[_i].o, AF_FRAMEWORK_JAX,
                   true, requested);
        ck_assert_uint_gt(s.n_tiers, 0);
        for (size_t i = 0; i < s.n_tiers; i++)
            ck_assert_msg(af_class_kind(s.tiers[i].cls) != AF_ACCEL_NEURON, "tier %zu is %s", i + 1,
                          af_class_name(s.tiers[i].cls));
        for (size_t i = 0; i < s.n_dropped; i++)
            if (af_class_kind(s.dropped[i].cls) == AF_ACCEL_NEURON)
                ck_assert_ptr_nonnull(strstr(s.dropped[i].reason, "jax"));
    }
}
END_TEST

START_TEST(test_neuron_gate)
{
    static struct af_selection s;
    const struct af_dropped *d;

    /* Neuron-ready PyTorch inference on a budget: Inferentia2, then Trainium (NeuronCore-v2). */
    select_for(&s, AF_WORKLOAD_INFERENCE, 7e9, AF_OBJECTIVE_COST, AF_FRAMEWORK_PYTORCH, true,
               false);
    ck_assert_int_eq(s.tiers[0].cls, AF_CLASS_INFERENTIA2);
    ck_assert_int_eq(s.tiers[1].cls, AF_CLASS_TRAINIUM1);
    ck_assert(any_reason_has(&s.tiers[0], "NeuronCore-v2"));

    /* Unknown framework: Neuron only when the pod already asks for Neuron devices. */
    select_for(&s, AF_WORKLOAD_INFERENCE, 7e9, AF_OBJECTIVE_COST, AF_FRAMEWORK_UNKNOWN, true,
               false);
    ck_assert_int_eq(s.tiers[0].cls, AF_CLASS_NVIDIA_A10G);
    d = find_dropped(&s, AF_CLASS_INFERENTIA2);
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(strstr(d->reason, "framework unknown"));
    select_for(&s, AF_WORKLOAD_INFERENCE, 7e9, AF_OBJECTIVE_COST, AF_FRAMEWORK_UNKNOWN, true, true);
    ck_assert_int_eq(s.tiers[0].cls, AF_CLASS_INFERENTIA2);

    /* No Neuron artifact: the Neuron tiers are dropped with the reason. */
    select_for(&s, AF_WORKLOAD_TRAINING, 20e9, AF_OBJECTIVE_BALANCED, AF_FRAMEWORK_PYTORCH, false,
               true);
    d = find_dropped(&s, AF_CLASS_TRAINIUM1);
    ck_assert_ptr_nonnull(d);
    ck_assert_ptr_nonnull(strstr(d->reason, "Neuron-compiled"));
}
END_TEST

START_TEST(test_fallback_chain_of_neuron_inference)
{
    static const enum af_class chain[] = {AF_CLASS_INFERENTIA2, AF_CLASS_TRAINIUM1,
                                          AF_CLASS_NVIDIA_A100, AF_CLASS_NVIDIA_A10G};
    static struct af_selection s;

    /* docs/decision-framework.md's example: the rule's chain inferentia2 -> trainium1 ->
     * nvidia-a10g -> nvidia-a100, the GPU tiers in the order of what the model pays: one of
     * the eight A100s of a p4d.24xlarge ($2.74/h) before two of the four A10Gs of a
     * g5.12xlarge ($2.84/h). */
    select_for(&s, AF_WORKLOAD_INFERENCE, 13e9, AF_OBJECTIVE_COST, AF_FRAMEWORK_TENSORFLOW, true,
               false);
    ck_assert_uint_eq(s.n_tiers, AF_ARRAY_SIZE(chain));
    for (size_t i = 0; i < AF_ARRAY_SIZE(chain); i++)
        ck_assert_int_eq(s.tiers[i].cls, chain[i]);
    ck_assert(any_reason_has(&s.tiers[0], "decision framework"));
    ck_assert(any_reason_has(&s.tiers[1], "fallback 1 of rule inference-cost-neuron"));
}
END_TEST

static int tier_of(const struct af_selection *s, enum af_class c)
{
    for (size_t i = 0; i < s->n_tiers; i++)
        if (s->tiers[i].cls == c)
            return (int)i;
    return -1;
}

START_TEST(test_cost_compares_what_a_one_gpu_pod_pays)
{
    static struct af_selection s;
    const struct af_tier *a100, *h100;

    /* The catalog's cheapest H100 instance is a 1-GPU p5.4xlarge ($6.88/h), its cheapest A100
     * one an 8-GPU p4d.24xlarge ($21.96/h); a 1-GPU batch pod pays $2.745/h of the latter. */
    select_for(&s, AF_WORKLOAD_BATCH_INFERENCE, 350e6, AF_OBJECTIVE_COST, AF_FRAMEWORK_UNKNOWN,
               false, false);
    ck_assert_int_ge(tier_of(&s, AF_CLASS_NVIDIA_A100), 0);
    ck_assert_int_ge(tier_of(&s, AF_CLASS_NVIDIA_H100), 0);
    ck_assert_int_lt(tier_of(&s, AF_CLASS_NVIDIA_A100), tier_of(&s, AF_CLASS_NVIDIA_H100));
    ck_assert_int_lt(tier_of(&s, AF_CLASS_NVIDIA_A100), tier_of(&s, AF_CLASS_NVIDIA_V100));
    a100 = &s.tiers[tier_of(&s, AF_CLASS_NVIDIA_A100)];
    h100 = &s.tiers[tier_of(&s, AF_CLASS_NVIDIA_H100)];
    ck_assert_str_eq(a100->instance->name, "p4d.24xlarge");
    ck_assert_double_eq_tol(a100->hourly_usd, 21.96, 0.01);
    ck_assert_double_eq_tol(a100->workload_usd, a100->hourly_usd / 8, 1e-9);
    ck_assert(any_reason_has(a100, "the workload pays for the devices it gets, 1 of 8: $2.7"));
    /* A whole 1-GPU instance: the smaller of two equal shares (not 1 of 8 of a p5.48xlarge). */
    ck_assert_str_eq(h100->instance->name, "p5.4xlarge");
    ck_assert_double_eq_tol(h100->workload_usd, 6.88, 0.01);
    ck_assert_double_eq_tol(h100->workload_usd, h100->hourly_usd, 1e-9);
    ck_assert(!any_reason_has(h100, "the workload pays for the devices it gets"));
}
END_TEST

START_TEST(test_cost_uses_the_pods_device_request)
{
    static struct af_selection s;
    struct af_profile p;

    /* Size unknown: nothing says how many devices the workload gets, so whole instances
     * compare; a pod's request of one GPU says it gets one, and pays its share. */
    af_profile_init(&p);
    p.workload = AF_WORKLOAD_BATCH_INFERENCE;
    p.objective = AF_OBJECTIVE_COST;
    af_select(cfg->policy, cfg->catalog, &p, false, &s);
    assert_sane_selection(&s);
    ck_assert_int_gt(tier_of(&s, AF_CLASS_NVIDIA_A100), tier_of(&s, AF_CLASS_NVIDIA_H100));
    p.devices = 1;
    af_select(cfg->policy, cfg->catalog, &p, false, &s);
    assert_sane_selection(&s);
    ck_assert_int_lt(tier_of(&s, AF_CLASS_NVIDIA_A100), tier_of(&s, AF_CLASS_NVIDIA_H100));
    ck_assert_double_eq_tol(s.tiers[tier_of(&s, AF_CLASS_NVIDIA_A100)].workload_usd,
                            s.tiers[tier_of(&s, AF_CLASS_NVIDIA_A100)].hourly_usd / 8, 1e-9);
    /* Eight GPUs are the whole p4d: 21.96 against a p5.48xlarge's 55.04. */
    p.devices = 8;
    af_select(cfg->policy, cfg->catalog, &p, false, &s);
    assert_sane_selection(&s);
    ck_assert_double_eq_tol(s.tiers[tier_of(&s, AF_CLASS_NVIDIA_A100)].workload_usd,
                            s.tiers[tier_of(&s, AF_CLASS_NVIDIA_A100)].hourly_usd, 1e-9);
}
END_TEST

START_TEST(test_cost_of_a_model_on_whole_nodes_is_the_nodes_price)
{
    static struct af_selection s;
    const struct af_tier *a100, *h100;

    /* 70B training needs 1173 GiB: two whole p4de.24xlarge ($54.89/h) or two whole
     * p5.48xlarge ($110.08/h), compared at the instances' price. */
    select_for(&s, AF_WORKLOAD_TRAINING, 70e9, AF_OBJECTIVE_COST, AF_FRAMEWORK_JAX, false, false);
    ck_assert_int_lt(tier_of(&s, AF_CLASS_NVIDIA_A100), tier_of(&s, AF_CLASS_NVIDIA_H100));
    a100 = &s.tiers[tier_of(&s, AF_CLASS_NVIDIA_A100)];
    h100 = &s.tiers[tier_of(&s, AF_CLASS_NVIDIA_H100)];
    ck_assert_int_eq(a100->instances, 2);
    ck_assert_double_eq_tol(a100->workload_usd, a100->hourly_usd, 1e-9);
    ck_assert_double_eq_tol(h100->workload_usd, h100->hourly_usd, 1e-9);
    ck_assert_double_eq_tol(h100->hourly_usd, 2 * 55.04, 0.01);
}
END_TEST

START_TEST(test_memory_needed)
{
    struct af_profile p;
    const struct af_policy *pol = cfg->policy;

    af_profile_init(&p);
    p.workload = AF_WORKLOAD_INFERENCE;
    ck_assert_double_eq(af_select_memory_needed_gib(pol, &p), 0);
    p.model_params = 7e9;
    ck_assert_double_eq_tol(af_select_memory_needed_gib(pol, &p), 7e9 * 2 * 1.2 / GIB, 1e-12);
    p.precision = AF_PRECISION_INT8;
    ck_assert_double_eq_tol(af_select_memory_needed_gib(pol, &p), 7e9 * 1 * 1.2 / GIB, 1e-12);
    p.precision = AF_PRECISION_FP32;
    ck_assert_double_eq_tol(af_select_memory_needed_gib(pol, &p), 7e9 * 4 * 1.2 / GIB, 1e-12);
    p.workload = AF_WORKLOAD_BATCH_INFERENCE;
    ck_assert_double_eq_tol(af_select_memory_needed_gib(pol, &p), 7e9 * 4 * 1.2 / GIB, 1e-12);
    p.workload = AF_WORKLOAD_TRAINING;
    ck_assert_double_eq_tol(af_select_memory_needed_gib(pol, &p), 7e9 * 18 / GIB, 1e-12);
}
END_TEST

START_TEST(test_unknown_size_gets_the_smallest_instance)
{
    static struct af_selection s;

    select_for(&s, AF_WORKLOAD_INFERENCE, 0, AF_OBJECTIVE_BALANCED, AF_FRAMEWORK_UNKNOWN, false,
               false);
    ck_assert_str_eq(s.rule, "inference-default");
    ck_assert_double_eq(s.memory_needed_gib, 0);
    ck_assert_int_eq(s.tiers[0].cls, AF_CLASS_NVIDIA_A10G);
    ck_assert_str_eq(s.tiers[0].instance->name, "g5.xlarge");
    ck_assert_int_eq(s.tiers[1].cls, AF_CLASS_NVIDIA_L4);
    ck_assert_int_eq(s.tiers[2].cls, AF_CLASS_NVIDIA_T4);
    ck_assert_str_eq(s.tiers[2].instance->name, "g4dn.xlarge");
    for (size_t i = 0; i < s.n_tiers; i++) {
        ck_assert_int_eq(s.tiers[i].instances, 1);
        ck_assert(any_reason_has(&s.tiers[i], "model size unknown"));
    }
    /* Bounded rules never match an unknown size. */
    select_for(&s, AF_WORKLOAD_TRAINING, 0, AF_OBJECTIVE_BALANCED, AF_FRAMEWORK_PYTORCH, false,
               false);
    ck_assert_str_eq(s.rule, "training-default");
    select_for(&s, AF_WORKLOAD_TRAINING, 0, AF_OBJECTIVE_COST, AF_FRAMEWORK_PYTORCH, true, false);
    ck_assert_str_eq(s.rule, "training-cost-neuron");
    ck_assert_int_eq(s.tiers[0].cls, AF_CLASS_TRAINIUM1);
    ck_assert_str_eq(s.tiers[0].instance->name, "trn1.2xlarge");
}
END_TEST

START_TEST(test_cpu_workloads_size_host_memory)
{
    static struct af_selection s;

    select_for(&s, AF_WORKLOAD_CLASSICAL_ML, 0, AF_OBJECTIVE_BALANCED, AF_FRAMEWORK_UNKNOWN, false,
               false);
    ck_assert_uint_eq(s.n_tiers, 1);
    ck_assert_int_eq(s.tiers[0].cls, AF_CLASS_CPU);
    ck_assert_str_eq(s.tiers[0].instance->name, "c5.large");
    ck_assert_double_eq(s.tiers[0].accel_memory_gib, 0);
    /* A memory-bound job (30B x 2 bytes x 1.2 = 67 GiB) moves to r5. */
    select_for(&s, AF_WORKLOAD_PREPROCESSING, 30e9, AF_OBJECTIVE_BALANCED, AF_FRAMEWORK_UNKNOWN,
               false, false);
    ck_assert_str_eq(s.tiers[0].instance->name, "r5.4xlarge");
    ck_assert(any_reason_has(&s.tiers[0], "host memory"));
    /* Beyond the largest allowed family the class is dropped with the arithmetic. */
    select_for(&s, AF_WORKLOAD_PREPROCESSING, 400e9, AF_OBJECTIVE_BALANCED, AF_FRAMEWORK_UNKNOWN,
               false, false);
    ck_assert_uint_eq(s.n_tiers, 0);
    ck_assert_ptr_nonnull(find_dropped(&s, AF_CLASS_CPU));
    ck_assert_ptr_nonnull(strstr(find_dropped(&s, AF_CLASS_CPU)->reason, "r5.24xlarge"));
}
END_TEST

START_TEST(test_no_matching_rule_gives_no_tiers)
{
    static const char pol[] = "apiVersion: accelfit.io/v1\nkind: Policy\nrules:\n"
                              "  - name: only-training\n    match: {workload: training}\n"
                              "    tiers: [nvidia-t4]\n    reason: why\n";
    static struct af_selection s;
    struct af_policy *p = NULL;
    struct af_profile prof;
    struct af_error err;

    ck_assert_int_eq(af_policy_load_mem(&p, "p.yaml", pol, strlen(pol), &err), 0);
    af_profile_init(&prof);
    prof.workload = AF_WORKLOAD_INFERENCE;
    af_select(p, cfg->catalog, &prof, false, &s);
    ck_assert_ptr_null(s.rule);
    ck_assert_uint_eq(s.n_tiers, 0);
    ck_assert_uint_eq(s.n_dropped, 0);
    prof.workload = AF_WORKLOAD_UNKNOWN;
    af_select(p, cfg->catalog, &prof, false, &s);
    ck_assert_ptr_null(s.rule);
    af_policy_free(p);
}
END_TEST

START_TEST(test_max_instances_limits_sharding)
{
    static const char pol[] = "apiVersion: accelfit.io/v1\nkind: Policy\n"
                              "memory: {max_instances: {training: 2}}\nrules:\n"
                              "  - name: t\n    match: {workload: training}\n"
                              "    tiers: [trainium1, nvidia-h100]\n    reason: why\n";
    static struct af_selection s;
    struct af_policy *p = NULL;
    struct af_profile prof;
    struct af_error err;
    const struct af_dropped *d;

    ck_assert_int_eq(af_policy_load_mem(&p, "p.yaml", pol, strlen(pol), &err), 0);
    af_profile_init(&prof);
    prof.workload = AF_WORKLOAD_TRAINING;
    prof.model_params = 70e9;
    prof.framework = AF_FRAMEWORK_PYTORCH;
    prof.neuron_ready = true;
    af_select(p, cfg->catalog, &prof, false, &s);
    ck_assert_uint_eq(s.n_tiers, 1);
    ck_assert_int_eq(s.tiers[0].cls, AF_CLASS_NVIDIA_H100);
    ck_assert_int_eq(s.tiers[0].instances, 2);
    d = find_dropped(&s, AF_CLASS_TRAINIUM1);
    ck_assert_ptr_nonnull(d);
    ck_assert_msg(strstr(d->reason, "max_instances.training is 2") != NULL, "%s", d->reason);
    af_policy_free(p);
}
END_TEST

START_TEST(test_selection_is_deterministic)
{
    static struct af_selection a, b;

    select_for(&a, AF_WORKLOAD_BATCH_INFERENCE, 40e9, AF_OBJECTIVE_BALANCED, AF_FRAMEWORK_PYTORCH,
               false, false);
    select_for(&b, AF_WORKLOAD_BATCH_INFERENCE, 40e9, AF_OBJECTIVE_BALANCED, AF_FRAMEWORK_PYTORCH,
               false, false);
    ck_assert_int_eq(memcmp(&a, &b, sizeof(a)), 0);
}
END_TEST

/*
 * The first reason of rank 1 speaks of rank 1: the rule's reason only when rank 1 is the
 * class the rule lists first; a first choice dropped says why and what to state.
 */
static const struct {
    enum af_workload w;
    double params;
    enum af_objective o;
    const char *want;     /* in rank 1's first reason */
} first_reason_cases[] = {
    {AF_WORKLOAD_INFERENCE, 7e9, AF_OBJECTIVE_COST, "first choice, inferentia2, is out: framework unknown"},
    {AF_WORKLOAD_TRAINING, 70e9, AF_OBJECTIVE_BALANCED, NULL},
    {AF_WORKLOAD_TRAINING, 70e9, AF_OBJECTIVE_COST, "first choice, trainium1, is out: framework unknown"},
    {AF_WORKLOAD_TRAINING, 405e9, AF_OBJECTIVE_COST, "first choice, trainium1, is out: framework unknown"},
};

START_TEST(test_rank_one_reason_speaks_of_rank_one)
{
    struct af_selection *s = af_xmalloc(sizeof(*s));
    const struct af_rule *rule = NULL;

    select_for(s, first_reason_cases[_i].w, first_reason_cases[_i].params,
               first_reason_cases[_i].o, AF_FRAMEWORK_UNKNOWN, true, false);
    ck_assert_uint_gt(s->n_tiers, 0);
    for (size_t r = 0; r < cfg->policy->n_rules; r++)
        if (!strcmp(cfg->policy->rules[r].name, s->rule))
            rule = &cfg->policy->rules[r];
    ck_assert_ptr_nonnull(rule);
    if (s->tiers[0].cls != rule->tiers[0].cls)
        ck_assert_msg(strcmp(s->tiers[0].reasons[0], rule->reason),
                      "rank 1 is %s with the reason of %s: %s", af_class_name(s->tiers[0].cls),
                      af_class_name(rule->tiers[0].cls), rule->reason);
    if (first_reason_cases[_i].want) {
        ck_assert_msg(strstr(s->tiers[0].reasons[0], first_reason_cases[_i].want), "%s",
                      s->tiers[0].reasons[0]);
        ck_assert_msg(strstr(s->tiers[0].reasons[0], "--framework pytorch"), "%s",
                      s->tiers[0].reasons[0]);
    }
    af_free(s);
}
END_TEST

/* The batch-inference rule says the cheapest that holds the model comes first (order:
 * price): whatever the objective, ranks go by what the workload pays within a kind. */
START_TEST(test_batch_inference_is_cheapest_first)
{
    struct af_selection *s = af_xmalloc(sizeof(*s));

    select_for(s, AF_WORKLOAD_BATCH_INFERENCE, 70e9, AF_OBJECTIVE_BALANCED, AF_FRAMEWORK_UNKNOWN,
               false, false);
    ck_assert_uint_gt(s->n_tiers, 2);
    for (size_t i = 1; i < s->n_tiers; i++)
        ck_assert_msg(s->tiers[i - 1].workload_usd <= s->tiers[i].workload_usd,
                      "rank %zu pays %.2f, rank %zu %.2f", i, s->tiers[i - 1].workload_usd, i + 1,
                      s->tiers[i].workload_usd);
    ck_assert_msg(strstr(s->tiers[0].reasons[0], "orders by price"), "%s", s->tiers[0].reasons[0]);
    af_free(s);
}
END_TEST

static Suite *af_select_suite(void)
{
    Suite *s = suite_create("select");
    TCase *tc = tcase_create("decisions");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_fixture_has_the_twelve_cases);
    tcase_add_loop_test(tc, test_decision_case, 0, 12);
    suite_add_tcase(s, tc);

    tc = tcase_create("arithmetic");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_70b_training_cost_needs_three_trn1_32xlarge);
    tcase_add_test(tc, test_multi_instance_needs_efa);
    tcase_add_test(tc, test_70b_inference_performance_memory);
    tcase_add_loop_test(tc, test_jax_never_gets_neuron, 0, (int)AF_ARRAY_SIZE(jax_cases));
    tcase_add_test(tc, test_neuron_gate);
    tcase_add_test(tc, test_fallback_chain_of_neuron_inference);
    tcase_add_test(tc, test_cost_compares_what_a_one_gpu_pod_pays);
    tcase_add_test(tc, test_cost_uses_the_pods_device_request);
    tcase_add_test(tc, test_cost_of_a_model_on_whole_nodes_is_the_nodes_price);
    tcase_add_test(tc, test_memory_needed);
    tcase_add_test(tc, test_unknown_size_gets_the_smallest_instance);
    tcase_add_test(tc, test_cpu_workloads_size_host_memory);
    tcase_add_test(tc, test_no_matching_rule_gives_no_tiers);
    tcase_add_test(tc, test_max_instances_limits_sharding);
    tcase_add_test(tc, test_selection_is_deterministic);
    tcase_add_loop_test(tc, test_rank_one_reason_speaks_of_rank_one, 0,
                        (int)AF_ARRAY_SIZE(first_reason_cases));
    tcase_add_test(tc, test_batch_inference_is_cheapest_first);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_select_suite());
}
