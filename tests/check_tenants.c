/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Tenants and costs: the policy's `tenants:` section (errors at their line and
 * column), which tenant a pod belongs to, spend and idle cost on a small cluster
 * worked out by hand (tests/fixtures/tenants/README.md), and budgets at decision
 * time through the service as kube-scheduler drives it: bound pods arrive and
 * leave between requests (cache upserts and deletes, then a new snapshot), and
 * each filter, prioritize and /explain answers from the cluster as it is then.
 * Prepaid capacity (docs/examples/prepaid-cluster.yaml): tenants' spend is what decisions
 * charge (0 on a prepaid node under marginal pricing, the rate's share under amortized), the
 * share of prepaid rates beside it, and each reservation's devices and rate used and idle.
 * Then the real binary: `accelfit serve` answering GET /costs and /metrics,
 * `accelfit costs` printing the same figures (and its --report page), and `accelfit serve --kubeconfig`
 * watching tests/apiserver/fake_apiserver.py while a tenant's pod arrives (its
 * hard budget then refuses the A100) and leaves (the A100 is open again).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "accelfit/budget.h"
#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/costs.h"
#include "accelfit/metrics.h"
#include "accelfit/service.h"
#include "accelfit/inflight.h"
#include "accelfit/tenant.h"
#include "accelfit/util.h"
#include "support/fake_api.h"
#include "support/html.h"
#include "support/http_client.h"
#include "support/support.h"

#define CLUSTER "tests/fixtures/tenants/small-cluster.yaml"

/* Dollars to whole cents, as the hand computations state them. */
static long cents(double usd)
{
    return lround(usd * 100.0);
}

/* The embedded default policy with tests/fixtures/tenants/tenants.yaml appended, written
 * to a file the tests and the binary load. Caller frees the path. */
static char *policy_file(void)
{
    size_t len;
    char *tenants = af_test_read("tests/fixtures/tenants/tenants.yaml", &len);
    char *path = af_xasprintf("/tmp/af-check-tenants-policy-%d.yaml", (int)getpid());
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    fwrite(af_embedded_policy_yaml, 1, af_embedded_policy_yaml_len, f);
    fputs("\n", f);
    fwrite(tenants, 1, len, f);
    fclose(f);
    af_free(tenants);
    return path;
}

static int load_policy_text(const char *yaml, struct af_policy **out, struct af_error *err)
{
    return af_policy_load_mem(out, "tenants.yaml", yaml, strlen(yaml), err);
}

/* ---- the policy section --------------------------------------------------------------------- */

START_TEST(test_example_policy_loads_with_default_last)
{
    struct af_config *cfg = NULL;
    struct af_error err;
    const struct af_policy *p;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&cfg, NULL,
                                    af_test_path("policies/examples/multi-tenant.yaml"), &err),
                     0);
    p = cfg->policy;
    ck_assert_uint_eq(p->n_tenants, 4);
    ck_assert_str_eq(p->tenants[0].name, "research");
    ck_assert(p->tenants[0].has_budget);
    ck_assert_int_eq(p->tenants[0].over_budget, AF_OVER_BUDGET_HARD);
    ck_assert_uint_eq(p->tenants[0].premium & (1u << AF_CLASS_NVIDIA_A10G), 0);
    ck_assert_uint_ne(p->tenants[0].premium & (1u << AF_CLASS_NVIDIA_A100), 0);
    ck_assert_str_eq(p->tenants[1].name, "production");
    ck_assert_int_eq(p->tenants[1].over_budget, AF_OVER_BUDGET_SOFT);
    /* default premium: every accelerator class, never cpu */
    ck_assert_uint_ne(p->tenants[1].premium & (1u << AF_CLASS_NVIDIA_T4), 0);
    ck_assert_uint_eq(p->tenants[1].premium & (1u << AF_CLASS_CPU), 0);
    ck_assert(p->tenants[2].spot_only);
    ck_assert_str_eq(p->tenants[3].name, AF_TENANT_DEFAULT);
    ck_assert(p->tenants[3].has_budget);
    ck_assert_uint_eq(p->n_tenant_ns, 5);
    af_config_unref(cfg);
}
END_TEST

START_TEST(test_policy_without_tenants_has_an_unlimited_default)
{
    struct af_config *cfg = NULL;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&cfg, NULL, NULL, &err), 0);
    ck_assert_uint_eq(cfg->policy->n_tenants, 1);
    ck_assert_str_eq(cfg->policy->tenants[0].name, AF_TENANT_DEFAULT);
    ck_assert(!cfg->policy->tenants[0].has_budget);
    af_config_unref(cfg);
}
END_TEST

static const struct bad_case {
    const char *yaml;
    int line, column;
    const char *want;
} bad_cases[] = {
    {"tenants:\n  - name: a\n    classes: [nvidia-a100, tpu-v5]\n", 3, 28, "unknown class 'tpu-v5'"},
    {"tenants:\n  - name: a\n    budget_usd_per_hour: -5\n", 3, 26,
     "'budget_usd_per_hour' of tenant 'a' is out of range: it must be between 0 and 1000000 "
     "dollars per hour, not '-5'"},
    {"tenants:\n  - name: a\n    budget_usd_per_hour: 1e400\n", 3, 26,
     "'budget_usd_per_hour' of tenant 'a' is out of range: it must be between 0 and 1000000 "
     "dollars per hour, not '1e400'"},
    {"tenants:\n  - name: a\n    budget_usd_per_hour: 1e-400\n", 3, 26,
     "'budget_usd_per_hour' is out of range: '1e-400' is too close to 0 to be held; write 0"},
    {"tenants:\n  - name: a\n    budget_usd_per_hour: lots\n", 3, 26,
     "'budget_usd_per_hour' must be a number, not 'lots'"},
    {"tenants:\n  - name: a\n    namespaces: [ml]\n  - name: b\n    namespaces: [web, ml]\n", 5,
     23, "namespace 'ml' is claimed by tenants 'a' and 'b'"},
    {"tenants:\n  - name: a\n    over_budget: hard\n", 3, 18,
     "tenant 'a' sets 'over_budget' but no 'budget_usd_per_hour'"},
    {"tenants:\n  - name: a\n    budget_usd_per_hour: 5\n    over_budget: strict\n", 4, 18,
     "'over_budget' must be soft"},
    {"tenants:\n  - name: default\n    namespaces: [web]\n", 3, 17,
     "the default tenant takes the pods no other tenant matches"},
    {"tenants:\n  - name: a\n  - name: a\n", 3, 11, "tenant 'a' is listed twice"},
    {"tenants:\n  - name: a\n    classes: [cpu]\n    premium_classes: [nvidia-a100]\n", 4, 22,
     "premium class 'nvidia-a100' of tenant 'a' is not among its 'classes'"},
    {"tenants:\n  - name: a\n    capacity: reserved\n", 3, 15, "'capacity' must be spot"},
    {"tenants:\n  - name: Research\n", 2, 11, "tenant name 'Research' must be lowercase"},
    {"tenants:\n  - name: a\n    budget: 5\n", 3, 5, "unknown key 'budget'"},
    {"tenants:\n  - name: a\n    namespaces: [Web_1]\n", 3, 18, "namespace 'Web_1' of tenant"},
};

START_TEST(test_policy_errors_point_at_the_text)
{
    const struct bad_case *c = &bad_cases[_i];
    char *yaml = af_xasprintf("%s\n%s", af_embedded_policy_yaml, c->yaml);
    struct af_policy *p = NULL;
    struct af_error err;
    int base = 0;

    for (const char *s = af_embedded_policy_yaml; *s; s++)
        base += *s == '\n';
    memset(&err, 0, sizeof(err));
    ck_assert_int_ne(load_policy_text(yaml, &p, &err), 0);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(err.text, c->want), "error '%s' lacks '%s'", err.text, c->want);
    /* the appended text starts after the embedded policy's lines and one blank line */
    ck_assert_int_eq(err.line, base + 1 + c->line);
    ck_assert_int_eq(err.column, c->column);
    af_free(yaml);
}
END_TEST

/* ---- matching ----------------------------------------------------------------------------- */

START_TEST(test_namespace_wins_over_label_and_label_over_default)
{
    char *path = policy_file();
    struct af_config *cfg = NULL;
    struct af_error err;
    struct af_pod_info pod;
    enum af_tenant_match how;
    const struct af_policy *p;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&cfg, NULL, path, &err), 0);
    p = cfg->policy;
    memset(&pod, 0, sizeof(pod));
    pod.ns = "ml-training";
    pod.tenant = "batch";
    ck_assert_str_eq(p->tenants[af_tenant_of(p, &pod, &how)].name, "research");
    ck_assert_int_eq(how, AF_TENANT_BY_NAMESPACE);
    pod.ns = "web";
    ck_assert_str_eq(p->tenants[af_tenant_of(p, &pod, &how)].name, "batch");
    ck_assert_int_eq(how, AF_TENANT_BY_LABEL);
    pod.tenant = "nobody";
    ck_assert_str_eq(p->tenants[af_tenant_of(p, &pod, &how)].name, "default");
    ck_assert_int_eq(how, AF_TENANT_BY_DEFAULT);
    pod.tenant = NULL;
    pod.ns = "inference";
    ck_assert_str_eq(p->tenants[af_tenant_of(p, &pod, &how)].name, "production");
    af_config_unref(cfg);
    unlink(path);
    af_free(path);
}
END_TEST

/* ---- fixture: cache, publisher and service over the test policy --------------------------------- */

static struct af_cache *cache;
static struct af_publisher pub;
static struct af_config_holder holder;
static struct af_service svc;
static struct af_config *cfg;      /* borrowed from `holder` */
static char *policy_path;

static void publish(void)
{
    af_publisher_publish(&pub, af_cache_snapshot(cache));
}

static void load_yaml(const char *name, const char *yaml)
{
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_codec_decode_cluster(cfg, name, yaml, strlen(yaml), af_cache_upsert_item, cache, &err) == 0,
                  "%s", err.text);
}

static void setup(void)
{
    struct af_error err;
    struct af_config *c = NULL;
    char *text;
    size_t len;

    policy_path = policy_file();
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&c, NULL, policy_path, &err), 0);
    cfg = c;
    af_config_holder_init(&holder, c);
    af_publisher_init(&pub);
    cache = af_cache_new();
    text = af_test_read(CLUSTER, &len);
    load_yaml(CLUSTER, text);
    af_free(text);
    af_cache_set_synced(cache, true);
    publish();
    memset(&svc, 0, sizeof(svc));
    svc.config = &holder;
    svc.pub = &pub;
    svc.metrics = af_metrics_new();
    svc.costs = af_costs_memo_new();
    svc.when_not_ready = AF_NOT_READY_REJECT;
}

static void teardown(void)
{
    af_costs_memo_free(svc.costs);
    af_metrics_free(svc.metrics);
    af_cache_free(cache);
    af_publisher_destroy(&pub);
    af_config_holder_destroy(&holder);
    unlink(policy_path);
    af_free(policy_path);
}

/* A bound pod arrives: `gpus` A100s or A10Gs and `cpu` cores on `node`. */
static void arrive(const char *ns, const char *name, const char *node, int gpus, int cpu)
{
    char *yaml = af_xasprintf(
        "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n"
        "  metadata: {name: %s, namespace: %s, uid: %s-%s}\n"
        "  spec:\n    nodeName: %s\n    containers:\n    - name: c\n      resources:\n"
        "        requests: {cpu: \"%d\", nvidia.com/gpu: \"%d\"}\n"
        "        limits: {nvidia.com/gpu: \"%d\"}\n"
        "  status: {phase: Running}\n",
        name, ns, ns, name, node, cpu, gpus, gpus);
    load_yaml("arriving pod", yaml);
    af_free(yaml);
    publish();
}

static void leave(const char *ns, const char *name)
{
    af_cache_delete_pod(cache, ns, name);
    publish();
}

static const char *const all_nodes = "[\"p4d-1\", \"g5-big-1\", \"g5-spot-1\", \"cpu-1\"]";

/* Annotations: a training pod (tiered fallback: only the best tier with room passes), and
 * a pod that states no workload but a 20B model served for performance (tiers only rank:
 * A100 first of the classes here, then L40S; two A10Gs are too small for it). */
#define TRAINING "\"accelfit.io/workload\": \"training\""
#define BIG_MODEL "\"accelfit.io/objective\": \"performance\", \"accelfit.io/model-params\": \"20B\""

/* A pending pod `name` of `ns` asking for `gpus` GPUs with annotations `ann` (JSON), with
 * the uid arrive() gives it once bound. Caller frees. */
static char *named_pod_json(const char *ns, const char *name, int gpus, const char *ann)
{
    return af_xasprintf(
        "{\"metadata\": {\"name\": \"%s\", \"namespace\": \"%s\", \"uid\": \"%s-%s\","
        " \"annotations\": {%s}},"
        " \"spec\": {\"containers\": [{\"name\": \"c\", \"resources\": {\"requests\":"
        " {\"cpu\": \"1\", \"nvidia.com/gpu\": \"%d\"}, \"limits\": {\"nvidia.com/gpu\": \"%d\"}}}]}}",
        name, ns, ns, name, ann, gpus, gpus);
}

static char *pod_json(const char *ns, int gpus, const char *ann)
{
    return named_pod_json(ns, "new-0", gpus, ann);
}

/* ExtenderArgs naming every node, for pod `name`. Caller frees. */
static char *named_args_for(const char *ns, const char *name, int gpus, const char *ann)
{
    char *pod = named_pod_json(ns, name, gpus, ann), *s;

    s = af_xasprintf("{\"Pod\": %s, \"NodeNames\": %s}", pod, all_nodes);
    af_free(pod);
    return s;
}

/* ExtenderArgs naming every node, for a pod "new-0". Caller frees. */
static char *args_for(const char *ns, int gpus, const char *ann)
{
    return named_args_for(ns, "new-0", gpus, ann);
}

static json_t *call(enum af_verb verb, const char *body)
{
    struct af_buf out = AF_BUF_INIT(0);
    json_t *j;
    json_error_t je;

    ck_assert_int_eq(af_service_handle(&svc, verb, body, strlen(body), &out), 200);
    j = json_loadb(out.buf, out.len, 0, &je);
    ck_assert_msg(j != NULL, "not JSON: %s", out.buf);
    af_buf_release(&out);
    return j;
}

static bool passes(json_t *filter, const char *node)
{
    size_t i;
    json_t *v;

    json_array_foreach(json_object_get(filter, "NodeNames"), i, v)
        if (!strcmp(json_string_value(v), node))
            return true;
    return false;
}

/* The reason filter gave `node`, "" when it passed. */
static const char *refusal(json_t *filter, const char *node)
{
    json_t *r = json_object_get(json_object_get(filter, "FailedAndUnresolvableNodes"), node);

    if (!r)
        r = json_object_get(json_object_get(filter, "FailedNodes"), node);
    return r ? json_string_value(r) : "";
}

static int score_of(json_t *prio, const char *node)
{
    size_t i;
    json_t *v;

    json_array_foreach(prio, i, v)
        if (!strcmp(json_string_value(json_object_get(v, "Host")), node))
            return (int)json_integer_value(json_object_get(v, "Score"));
    ck_abort_msg("no score for %s", node);
    return -1;
}

static const char *top_node(json_t *prio)
{
    size_t i;
    json_t *v;
    const char *best = NULL;
    json_int_t bs = -1;

    json_array_foreach(prio, i, v) {
        json_int_t s = json_integer_value(json_object_get(v, "Score"));
        if (s > bs) {
            bs = s;
            best = json_string_value(json_object_get(v, "Host"));
        }
    }
    return best;
}

static double tenant_spend(const char *name)
{
    struct af_snapshot *snap = af_publisher_acquire(&pub);
    struct af_costs *c = af_costs_memo_get(svc.costs, cfg, snap);
    double v = -1;

    for (size_t i = 0; i < cfg->policy->n_tenants; i++)
        if (!strcmp(cfg->policy->tenants[i].name, name))
            v = c->tenants[i].spend_usd_hr;
    af_costs_unref(c);
    af_snapshot_unref(snap);
    return v;
}

/* ---- spend and idle cost, by hand ------------------------------------------------------------ */

START_TEST(test_spend_equals_the_hand_computed_figures)
{
    struct af_snapshot *snap = af_publisher_acquire(&pub);
    struct af_costs *c = af_costs_memo_get(svc.costs, cfg, snap);

    /* tests/fixtures/tenants/README.md works these out */
    ck_assert_int_eq(cents(tenant_spend("research")), 1106);     /* 10.978821 + 0.085 */
    ck_assert_int_eq(cents(tenant_spend("production")), 367);    /* 1.00 + 2.50 + 0.17 */
    ck_assert_int_eq(cents(tenant_spend("batch")), 40);          /* 1.006 x 0.4 spot */
    ck_assert_int_eq(cents(tenant_spend("default")), 2);         /* 0.1/96 x 21.957642 */
    ck_assert_int_eq(cents(c->spend_usd_hr), 1516);
    ck_assert_int_eq(c->pods_counted, 7);                        /* the pending pod costs 0 */
    ck_assert_double_eq_tol(c->classes[AF_CLASS_NVIDIA_A100].spend_usd_hr, 10.978821 + 0.022873,
                            1e-5);
    /* by namespace: web's pod is production's by its label; ml-training holds both research pods */
    ck_assert_uint_eq(c->n_ns, 5);
    ck_assert_str_eq(c->ns[3].ns, "ml-training");
    ck_assert_int_eq(cents(c->ns[3].spend_usd_hr), 1106);
    ck_assert(c->ns[3].owned);
    ck_assert_str_eq(c->ns[4].ns, "web");                     /* owned by no tenant */
    ck_assert(!c->ns[4].owned);
    ck_assert_int_eq(cents(c->ns[4].spend_usd_hr), 17);
    af_costs_unref(c);
    af_snapshot_unref(snap);
}
END_TEST

START_TEST(test_idle_cost_of_a_half_used_p4d)
{
    struct af_snapshot *snap = af_publisher_acquire(&pub);
    struct af_costs *c = af_costs_memo_get(svc.costs, cfg, snap);
    const struct af_cost_group *p4d = NULL;

    for (size_t i = 0; i < c->n_groups; i++)
        if (c->groups[i].group && !strcmp(c->groups[i].group, "gpu-p4d"))
            p4d = &c->groups[i];
    ck_assert_ptr_nonnull(p4d);
    ck_assert_int_eq(p4d->cls, AF_CLASS_NVIDIA_A100);
    ck_assert_int_eq((int)p4d->devices, 8);
    ck_assert_int_eq((int)p4d->idle_devices, 4);
    /* 21.957642 x 4/8 = 10.978821, but the pods pay 11.001694 of 21.957642: 10.955948 */
    ck_assert_int_eq(cents(p4d->idle_usd_hr), 1096);
    /* 4.00 x 1/4 = 1.00, but chat-1's CPUs make the pods pay 3.50 of 4.00: 0.50 */
    ck_assert_int_eq(cents(c->classes[AF_CLASS_NVIDIA_A10G].idle_usd_hr), 50);
    ck_assert_int_eq(cents(c->idle_usd_hr), 1146);
    ck_assert_int_eq(cents(c->classes[AF_CLASS_CPU].idle_usd_hr), 0);   /* no accelerators */
    af_costs_unref(c);
    af_snapshot_unref(snap);

    /* two more A100s requested: a quarter of the p4d idle */
    arrive("ml-training", "train-1", "p4d-1", 2, 8);
    snap = af_publisher_acquire(&pub);
    c = af_costs_memo_get(svc.costs, cfg, snap);
    /* 21.957642 x 2/8 = 5.489411, but the pods pay 10.978821 + 5.489411 + 0.022873: 5.466537 */
    ck_assert_int_eq(cents(c->classes[AF_CLASS_NVIDIA_A100].idle_usd_hr), 547);
    af_costs_unref(c);
    af_snapshot_unref(snap);
}
END_TEST

/* NeuronCores occupy Neuron devices: on an inf2.24xlarge (6 devices of 2 NeuronCore-v2
 * each, 12 cores, $12.00/h by annotation) two pods of 4 cores and one of 1 device hold
 * 8 / 2 + 1 = 5 devices, so 1 of 6 is idle: $12.00 x 1/6 = $2.00/h. The pods pay 4/12 +
 * 4/12 + 1/6 of the price, $10.00/h, which leaves exactly those $2.00/h unpaid. */
START_TEST(test_neuroncore_pods_hold_neuron_devices)
{
    static const char yaml[] =
        "apiVersion: v1\nkind: List\nitems:\n"
        "- apiVersion: v1\n  kind: Node\n  metadata:\n    name: inf2-big\n    labels:\n"
        "      node.kubernetes.io/instance-type: inf2.24xlarge\n"
        "      eks.amazonaws.com/nodegroup: neuron-big\n"
        "    annotations: {accelfit.io/hourly-price: \"12.00\"}\n"
        "  status:\n    allocatable: {cpu: \"96\", memory: 370Gi, pods: \"110\",\n"
        "      aws.amazon.com/neuron: \"6\", aws.amazon.com/neuroncore: \"12\"}\n"
        "- apiVersion: v1\n  kind: Pod\n  metadata: {name: llm-a, namespace: web, uid: llm-a}\n"
        "  spec:\n    nodeName: inf2-big\n    containers:\n    - name: c\n      resources:\n"
        "        requests: {cpu: \"8\", aws.amazon.com/neuroncore: \"4\"}\n"
        "        limits: {aws.amazon.com/neuroncore: \"4\"}\n  status: {phase: Running}\n"
        "- apiVersion: v1\n  kind: Pod\n  metadata: {name: llm-b, namespace: web, uid: llm-b}\n"
        "  spec:\n    nodeName: inf2-big\n    containers:\n    - name: c\n      resources:\n"
        "        requests: {cpu: \"8\", aws.amazon.com/neuroncore: \"4\"}\n"
        "        limits: {aws.amazon.com/neuroncore: \"4\"}\n  status: {phase: Running}\n"
        "- apiVersion: v1\n  kind: Pod\n  metadata: {name: sd-c, namespace: web, uid: sd-c}\n"
        "  spec:\n    nodeName: inf2-big\n    containers:\n    - name: c\n      resources:\n"
        "        requests: {cpu: \"4\", aws.amazon.com/neuron: \"1\"}\n"
        "        limits: {aws.amazon.com/neuron: \"1\"}\n  status: {phase: Running}\n";
    struct af_snapshot *snap;
    struct af_costs *c;
    const struct af_cost_group *g = NULL;

    load_yaml("inf2 cluster", yaml);
    publish();
    snap = af_publisher_acquire(&pub);
    c = af_costs_memo_get(svc.costs, cfg, snap);
    for (size_t i = 0; i < c->n_groups; i++)
        if (c->groups[i].group && !strcmp(c->groups[i].group, "neuron-big"))
            g = &c->groups[i];
    ck_assert_ptr_nonnull(g);
    ck_assert_int_eq(g->cls, AF_CLASS_INFERENTIA2);
    ck_assert_int_eq((int)g->devices, 6);
    ck_assert_int_eq((int)g->idle_devices, 1);
    ck_assert_int_eq(cents(g->idle_usd_hr), 200);
    af_costs_unref(c);
    af_snapshot_unref(snap);
}
END_TEST

START_TEST(test_costs_are_computed_once_per_snapshot)
{
    struct af_snapshot *snap = af_publisher_acquire(&pub);
    struct af_costs *a = af_costs_memo_get(svc.costs, cfg, snap), *b;

    b = af_costs_memo_get(svc.costs, cfg, snap);
    ck_assert_ptr_eq(a, b);          /* the same computation, not a new one */
    af_costs_unref(b);
    af_snapshot_unref(snap);
    arrive("batch", "etl-1", "g5-big-1", 1, 1);
    snap = af_publisher_acquire(&pub);
    b = af_costs_memo_get(svc.costs, cfg, snap);
    ck_assert_ptr_ne(a, b);          /* a new snapshot: computed again */
    ck_assert_int_eq(cents(b->spend_usd_hr - a->spend_usd_hr), 100);
    af_costs_unref(a);
    af_costs_unref(b);
    af_snapshot_unref(snap);
}
END_TEST

/* ---- budgets at decision time ----------------------------------------------------------------- */

START_TEST(test_hard_budget_refuses_premium_nodes_until_pods_leave)
{
    char *body = args_for("ml-training", 1, TRAINING);
    json_t *f;

    /* research spends $11.06/h of $15; one A100 adds 21.957642/8 = $2.74/h: allowed */
    f = call(AF_VERB_FILTER, body);
    ck_assert_msg(passes(f, "p4d-1"), "%s", refusal(f, "p4d-1"));
    json_decref(f);

    /* two more A100s of research start: $16.55/h, over the budget */
    arrive("ml-training", "train-1", "p4d-1", 2, 8);
    ck_assert_int_eq(cents(tenant_spend("research")), 1655);
    f = call(AF_VERB_FILTER, body);
    ck_assert(!passes(f, "p4d-1"));
    ck_assert_str_eq(refusal(f, "p4d-1"),
                     "tenant research over its hard budget: $16.55/h of $15.00/h spent; "
                     "p4d.24xlarge would add $2.74/h");
    /* the A100 was tier 1; the cheap class is open and now wins */
    ck_assert(passes(f, "g5-big-1"));
    json_decref(f);
    /* preemption would not help: evicting on the p4d does not lower research's spend */
    {
        char *pod = pod_json("ml-training", 1, TRAINING);
        char *pre = af_xasprintf("{\"Pod\": %s, \"NodeNameToMetaVictims\": {"
                                 "\"p4d-1\": {\"Pods\": [{\"UID\": \"x\"}]},"
                                 " \"g5-big-1\": {\"Pods\": [{\"UID\": \"y\"}]}}}",
                                 pod);
        json_t *kept = call(AF_VERB_PREEMPT, pre);
        json_t *victims = json_object_get(kept, "NodeNameToMetaVictims");
        ck_assert_ptr_null(json_object_get(victims, "p4d-1"));
        ck_assert_ptr_nonnull(json_object_get(victims, "g5-big-1"));
        json_decref(kept);
        af_free(pre);
        af_free(pod);
    }
    /* another tenant (production, $3.67/h of a soft $30) keeps the A100 */
    {
        char *other = args_for("inference", 1, TRAINING);
        f = call(AF_VERB_FILTER, other);
        ck_assert(passes(f, "p4d-1"));
        json_decref(f);
        af_free(other);
    }

    /* the pods leave: the A100 is open again */
    leave("ml-training", "train-1");
    f = call(AF_VERB_FILTER, body);
    ck_assert_msg(passes(f, "p4d-1"), "%s", refusal(f, "p4d-1"));
    json_decref(f);
    af_free(body);
}
END_TEST

START_TEST(test_soft_budget_only_lowers_scores)
{
    char *body = args_for("ml-training", 1, TRAINING);
    json_t *f, *p;
    int before, after;

    cfg->policy->tenants[0].over_budget = AF_OVER_BUDGET_SOFT;
    p = call(AF_VERB_PRIORITIZE, body);
    before = score_of(p, "p4d-1");
    json_decref(p);

    arrive("ml-training", "train-1", "p4d-1", 2, 8);
    f = call(AF_VERB_FILTER, body);
    ck_assert(passes(f, "p4d-1"));                 /* soft: nothing is refused */
    json_decref(f);
    p = call(AF_VERB_PRIORITIZE, body);
    after = score_of(p, "p4d-1");
    /* the p4d is the last A100 node with room: left to tenants within budget */
    ck_assert_int_eq(after, 0);
    ck_assert_int_gt(before, after);
    json_decref(p);

    /* a second A100 node with room: each premium node only scores half */
    load_yaml("second p4d", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n"
                            "  metadata:\n    name: p4d-2\n    labels:\n"
                            "      node.kubernetes.io/instance-type: p4d.24xlarge\n"
                            "  status:\n    allocatable: {cpu: \"96\", memory: 1100Gi, "
                            "nvidia.com/gpu: \"8\", pods: \"110\"}\n");
    publish();
    {
        char *pod = pod_json("ml-training", 1, TRAINING);
        char *two = af_xasprintf("{\"Pod\": %s, \"NodeNames\": [\"p4d-1\", \"p4d-2\"]}", pod);
        json_t *p2;
        char *mine = pod_json("inference", 1, TRAINING);   /* production: within budget */
        char *theirs = af_xasprintf("{\"Pod\": %s, \"NodeNames\": [\"p4d-1\", \"p4d-2\"]}",
                                    mine);
        json_t *full = call(AF_VERB_PRIORITIZE, theirs);
        p2 = call(AF_VERB_PRIORITIZE, two);
        ck_assert_int_gt(score_of(full, "p4d-1"), 1);
        ck_assert_int_eq(score_of(p2, "p4d-1"), score_of(full, "p4d-1") / 2);
        json_decref(p2);
        json_decref(full);
        af_free(theirs);
        af_free(mine);
        af_free(two);
        af_free(pod);
    }

    leave("ml-training", "train-1");
    p = call(AF_VERB_PRIORITIZE, body);
    ck_assert_int_gt(score_of(p, "p4d-1"), 0);
    json_decref(p);
    af_free(body);
}
END_TEST

START_TEST(test_under_budget_tenant_wins_the_last_a100)
{
    char *research, *production, *pod;
    json_t *pr, *pp;

    /* an L40S node: the second choice for a 20B model; the p4d is the last A100 node */
    load_yaml("l40s", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Node\n"
                      "  metadata:\n    name: l40s-1\n    labels:\n"
                      "      node.kubernetes.io/instance-type: g6e.12xlarge\n"
                      "  status:\n    allocatable: {cpu: \"48\", memory: 360Gi, "
                      "nvidia.com/gpu: \"4\", pods: \"110\"}\n");
    /* research over its (now soft) budget, production well within its own */
    cfg->policy->tenants[0].over_budget = AF_OVER_BUDGET_SOFT;
    arrive("ml-training", "train-1", "p4d-1", 2, 8);
    pod = pod_json("ml-training", 2, BIG_MODEL);
    research = af_xasprintf("{\"Pod\": %s, \"NodeNames\": [\"p4d-1\", \"l40s-1\", \"g5-big-1\"]}",
                            pod);
    af_free(pod);
    pod = pod_json("inference", 2, BIG_MODEL);
    production = af_xasprintf(
        "{\"Pod\": %s, \"NodeNames\": [\"p4d-1\", \"l40s-1\", \"g5-big-1\"]}", pod);
    af_free(pod);

    pr = call(AF_VERB_PRIORITIZE, research);
    pp = call(AF_VERB_PRIORITIZE, production);
    /* both rank the A100 first on their own; only the one under budget still does */
    ck_assert_str_eq(top_node(pp), "p4d-1");
    ck_assert_int_eq(score_of(pr, "p4d-1"), 0);
    ck_assert_str_eq(top_node(pr), "l40s-1");
    json_decref(pr);
    json_decref(pp);

    /* with room in its budget, research ranks the A100 first too */
    cfg->policy->tenants[0].budget_usd_hr = 25;
    pr = call(AF_VERB_PRIORITIZE, research);
    ck_assert_str_eq(top_node(pr), "p4d-1");
    json_decref(pr);

    /* hard: the same contest is decided in filter */
    cfg->policy->tenants[0].budget_usd_hr = 15;
    cfg->policy->tenants[0].over_budget = AF_OVER_BUDGET_HARD;
    pr = call(AF_VERB_FILTER, research);
    pp = call(AF_VERB_FILTER, production);
    ck_assert(!passes(pr, "p4d-1"));
    ck_assert(passes(pr, "l40s-1"));
    ck_assert(passes(pp, "p4d-1"));
    json_decref(pr);
    json_decref(pp);
    af_free(research);
    af_free(production);
}
END_TEST

START_TEST(test_spot_only_tenant_and_allowed_classes)
{
    char *body = args_for("batch", 1, TRAINING);
    json_t *f = call(AF_VERB_FILTER, body);

    /* batch: spot only, A10G and CPU only */
    ck_assert(passes(f, "g5-spot-1") || strstr(refusal(f, "g5-spot-1"), "no room"));
    ck_assert(!passes(f, "g5-big-1"));
    /* g5-big-1 has no capacity-type label: not known to be spot, and not called on-demand */
    ck_assert_str_eq(refusal(f, "g5-big-1"),
                     "tenant batch runs on spot capacity only; this node (nvidia-a10g) has no "
                     "capacity-type label (karpenter.sh/capacity-type, "
                     "eks.amazonaws.com/capacityType) saying spot");
    ck_assert(!passes(f, "p4d-1"));
    ck_assert_ptr_nonnull(strstr(refusal(f, "p4d-1"), "tenant batch may use only nvidia-a10g, cpu"));
    json_decref(f);
    af_free(body);
}
END_TEST

START_TEST(test_explain_shows_tenant_budget_spend_and_effect)
{
    char *body = args_for("ml-training", 1, TRAINING);
    json_t *e, *t, *nodes, *v;
    size_t i;
    bool seen = false;

    arrive("ml-training", "train-1", "p4d-1", 2, 8);
    e = call(AF_VERB_EXPLAIN, body);
    t = json_object_get(e, "tenant");
    ck_assert_str_eq(json_string_value(json_object_get(t, "name")), "research");
    ck_assert_str_eq(json_string_value(json_object_get(t, "matched_by")), "namespace");
    ck_assert_double_eq(json_number_value(json_object_get(t, "budget_usd_hr")), 15);
    ck_assert_str_eq(json_string_value(json_object_get(t, "over_budget")), "hard");
    ck_assert_int_eq(cents(json_number_value(json_object_get(t, "spend_usd_hr"))), 1655);
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(t, "effect")), "refused"));
    nodes = json_object_get(e, "nodes");
    json_array_foreach(nodes, i, v)
        if (!strcmp(json_string_value(json_object_get(v, "name")), "p4d-1")) {
            ck_assert_str_eq(json_string_value(json_object_get(v, "verdict")), "unresolvable");
            ck_assert_ptr_nonnull(
                strstr(json_string_value(json_object_get(v, "reason")), "$16.55/h of $15.00/h"));
            seen = true;
        }
    ck_assert(seen);
    json_decref(e);

    /* soft: the reason says why the score is lower */
    cfg->policy->tenants[0].over_budget = AF_OVER_BUDGET_SOFT;
    e = call(AF_VERB_EXPLAIN, body);
    seen = false;
    json_array_foreach(json_object_get(e, "nodes"), i, v)
        if (!strcmp(json_string_value(json_object_get(v, "name")), "p4d-1")) {
            ck_assert_str_eq(json_string_value(json_object_get(v, "verdict")), "pass");
            ck_assert_int_eq(json_integer_value(json_object_get(v, "score")), 0);
            ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(v, "reason")),
                                         "over its soft budget"));
            seen = true;
        }
    ck_assert(seen);
    json_decref(e);
    af_free(body);
}
END_TEST

/* Two replicas filtered back to back, before any bind reaches the cache: the first one's
 * share is charged to the tenant until it is seen bound, so the second cannot pass too. */
START_TEST(test_hard_budget_holds_against_a_burst)
{
    char *first = named_args_for("ml-training", "burst-0", 1, TRAINING);
    char *second = named_args_for("ml-training", "burst-1", 1, TRAINING);
    json_t *f;

    /* research spends $11.06/h of $15; one A100 adds 21.957642/8 = $2.74/h */
    f = call(AF_VERB_FILTER, first);
    ck_assert_msg(passes(f, "p4d-1"), "%s", refusal(f, "p4d-1"));
    json_decref(f);
    /* the same snapshot: $11.06 + $2.74 charged for burst-0 = $13.81; + $2.74 passes $15 */
    f = call(AF_VERB_FILTER, second);
    ck_assert(!passes(f, "p4d-1"));
    ck_assert_str_eq(refusal(f, "p4d-1"),
                     "tenant research's hard budget: $13.81/h of $15.00/h spent; "
                     "p4d.24xlarge would add $2.74/h");
    json_decref(f);
    /* kube-scheduler asks again for burst-0: its own charge does not count against it */
    f = call(AF_VERB_FILTER, first);
    ck_assert_msg(passes(f, "p4d-1"), "%s", refusal(f, "p4d-1"));
    json_decref(f);

    /* burst-0 shows up bound: the snapshot has its spend, the charge ends (not counted twice) */
    arrive("ml-training", "burst-0", "p4d-1", 1, 1);
    ck_assert_int_eq(cents(tenant_spend("research")), 1381);
    f = call(AF_VERB_FILTER, second);
    ck_assert_str_eq(refusal(f, "p4d-1"),
                     "tenant research's hard budget: $13.81/h of $15.00/h spent; "
                     "p4d.24xlarge would add $2.74/h");
    json_decref(f);
    /* burst-0 finishes and leaves: burst-1 passes */
    leave("ml-training", "burst-0");
    f = call(AF_VERB_FILTER, second);
    ck_assert_msg(passes(f, "p4d-1"), "%s", refusal(f, "p4d-1"));
    json_decref(f);
    af_free(first);
    af_free(second);
}
END_TEST

/* The charges by themselves: per pod, replaced when the pod is filtered again (keeping
 * its first time), ended by the TTL or by a snapshot that shows the pod bound. */
START_TEST(test_inflight_charges_end_when_seen_or_old)
{
    struct af_inflight *f = af_inflight_new();
    struct af_snapshot *snap = af_publisher_acquire(&pub);
    struct af_pod_info a = {.ns = "ml-training", .name = "a", .uid = "ua"};
    struct af_pod_info b = {.ns = "ml-training", .name = "b", .uid = "ml-training-b"};
    struct af_pod_info a2 = {.ns = "ml-training", .name = "a", .uid = "ua-new"};

    af_inflight_charge(f, "research", &a, 2.0, 100.0);
    af_inflight_charge(f, "research", &a, 3.0, 110.0);   /* filtered again: replaced */
    af_inflight_charge(f, "research", &b, 4.0, 120.0);
    af_inflight_charge(f, "production", &b, 0, 120.0);  /* 0: no charge (ends b's too) */
    ck_assert_uint_eq(af_inflight_count(f), 1);
    af_inflight_charge(f, "research", &b, 4.0, 120.0);
    ck_assert_double_eq_tol(af_inflight_sum(f, snap, "research", NULL, 130.0), 7.0, 1e-9);
    ck_assert_double_eq_tol(af_inflight_sum(f, snap, "research", &a, 130.0), 4.0, 1e-9);
    /* a new pod under a's name is another pod: a's charge counts against it */
    ck_assert_double_eq_tol(af_inflight_sum(f, snap, "research", &a2, 130.0), 7.0, 1e-9);
    ck_assert_double_eq_tol(af_inflight_sum(f, snap, "production", NULL, 130.0), 0, 1e-9);
    /* a's charge counts from its first filter (100), not its retry (110): a pod that keeps
     * being retried and never binds stops holding the budget after the TTL; b's (120) is
     * still held */
    ck_assert_double_eq_tol(af_inflight_sum(f, snap, "research", NULL, 100.0 + AF_INFLIGHT_TTL_S + 1),
                            4.0, 1e-9);
    af_snapshot_unref(snap);
    /* b shows up bound */
    arrive("ml-training", "b", "p4d-1", 1, 1);
    snap = af_publisher_acquire(&pub);
    ck_assert_double_eq_tol(af_inflight_sum(f, snap, "research", NULL, 232.0), 0, 1e-9);
    ck_assert_uint_eq(af_inflight_count(f), 0);
    af_snapshot_unref(snap);
    af_inflight_free(f);
}
END_TEST

START_TEST(test_costs_document_and_gauges_follow_the_cluster)
{
    struct af_buf out = AF_BUF_INIT(0);
    json_t *j, *t;

    ck_assert_int_eq(af_service_costs(&svc, &out), 200);
    j = json_loads(out.buf, 0, NULL);
    ck_assert_ptr_nonnull(j);
    t = json_array_get(json_object_get(j, "tenants"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(t, "name")), "research");
    ck_assert_int_eq(cents(json_number_value(json_object_get(t, "spend_usd_hr"))), 1106);
    ck_assert_int_eq(cents(json_number_value(json_object_get(t, "remaining_usd_hr"))), 394);
    ck_assert(json_is_false(json_object_get(t, "over")));
    json_decref(j);
    af_buf_reset(&out);

    ck_assert_int_eq(af_service_render_metrics(&svc, &out), 0);
    ck_assert_ptr_nonnull(
        strstr(out.buf, "accelfit_tenant_spend_dollars_per_hour{tenant=\"research\"} 11.0638\n"));
    ck_assert_ptr_nonnull(
        strstr(out.buf, "accelfit_tenant_budget_dollars_per_hour{tenant=\"research\"} 15\n"));
    ck_assert_ptr_null(strstr(out.buf, "accelfit_tenant_budget_dollars_per_hour{tenant=\"batch\"}"));
    /* the mode, for alerts: research's budget is hard, production's soft, batch has none */
    ck_assert_ptr_nonnull(strstr(out.buf, "accelfit_tenant_budget_hard{tenant=\"research\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(out.buf, "accelfit_tenant_budget_hard{tenant=\"production\"} 0\n"));
    ck_assert_ptr_null(strstr(out.buf, "accelfit_tenant_budget_hard{tenant=\"batch\"}"));
    ck_assert_ptr_nonnull(strstr(out.buf, "accelfit_idle_cost_dollars_per_hour{class=\"nvidia-a100\","
                                          "node_group=\"gpu-p4d\"} 10.9559\n"));
    af_buf_reset(&out);

    arrive("ml-training", "train-1", "p4d-1", 2, 8);
    ck_assert_int_eq(af_service_costs(&svc, &out), 200);
    j = json_loads(out.buf, 0, NULL);
    t = json_array_get(json_object_get(j, "tenants"), 0);
    ck_assert_int_eq(cents(json_number_value(json_object_get(t, "spend_usd_hr"))), 1655);
    ck_assert(json_is_true(json_object_get(t, "over")));
    json_decref(j);
    af_buf_release(&out);
}
END_TEST

/* Past the series bound, node groups are summed under a value no node group can have: a
 * real node group named "other" keeps its own series, and no series is written twice. */
START_TEST(test_idle_gauge_past_the_bound_never_takes_a_group_name)
{
    struct af_buf yaml = AF_BUF_INIT(0), out = AF_BUF_INIT(0);
    const char *p, *line;
    int others = 0, rest = 0;

    ck_assert_int_eq(af_buf_puts(&yaml, "apiVersion: v1\nkind: List\nitems:\n"), 0);
    /* "other" sorts before every "zNN": it is among the first series, the zNN past the bound */
    for (int i = -1; i < AF_BUDGET_MAX_GROUP_SERIES; i++) {
        char group[16];
        if (i < 0)
            snprintf(group, sizeof(group), "other");
        else
            snprintf(group, sizeof(group), "z%02d", i);
        ck_assert_int_eq(af_buf_printf(&yaml,
                                       "- apiVersion: v1\n  kind: Node\n  metadata:\n"
                                       "    name: n-%s\n    labels:\n"
                                       "      node.kubernetes.io/instance-type: p4d.24xlarge\n"
                                       "      eks.amazonaws.com/nodegroup: %s\n"
                                       "  status:\n    allocatable: {cpu: \"96\", memory: 1100Gi, "
                                       "nvidia.com/gpu: \"8\", pods: \"110\"}\n",
                                       group, group),
                         0);
    }
    load_yaml("many node groups", yaml.buf);
    publish();
    ck_assert_int_eq(af_service_render_metrics(&svc, &out), 0);
    for (p = out.buf; (line = strstr(p, "accelfit_idle_cost_dollars_per_hour{class=\"nvidia-a100\","
                                        "node_group=\"")) != NULL;
         p = line + 1) {
        const char *v = line + strlen("accelfit_idle_cost_dollars_per_hour{class=\"nvidia-a100\","
                                      "node_group=\"");
        others += !strncmp(v, "other\"}", 7);
        rest += !strncmp(v, "_other_\"}", 9);
    }
    ck_assert_int_eq(others, 1);   /* the node group named "other", once */
    ck_assert_int_eq(rest, 1);     /* the groups past the bound, summed */
    af_buf_release(&out);
    af_buf_release(&yaml);
}
END_TEST


/* ---- prepaid capacity ---------------------------------------------------------------------- */

#define PREPAID_CLUSTER "docs/examples/prepaid-cluster.yaml"
#define MULTI_TENANT "policies/examples/multi-tenant.yaml"

/* docs/examples/prepaid-cluster.yaml's costs under policies/examples/multi-tenant.yaml, with
 * `prepaid_line` ("  prepaid: amortized\n", or "" for the default) in its prices: section.
 * *snap_out keeps the strings the costs borrow; caller unrefs both. */
static struct af_costs *prepaid_costs(const char *prepaid_line, struct af_snapshot **snap_out)
{
    size_t len;
    char *pol = af_test_read(MULTI_TENANT, &len), *text, *yaml;
    const char *at = strstr(pol, "prices:\n");
    struct af_config *c = NULL;
    struct af_cache *k = af_cache_new();
    struct af_error err;
    struct af_snapshot *snap;
    struct af_costs *costs;

    ck_assert_ptr_nonnull(at);
    text = af_xasprintf("%.*sprices:\n%s%s", (int)(at - pol), pol, prepaid_line,
                        at + strlen("prices:\n"));
    memset(&err, 0, sizeof(err));
    if (af_config_load_mem(&c, "<embedded>", af_embedded_catalog_yaml,
                           af_embedded_catalog_yaml_len, MULTI_TENANT, text, strlen(text),
                           &err) != 0)
        ck_abort_msg("policy: %s", err.text);
    yaml = af_test_read(PREPAID_CLUSTER, &len);
    ck_assert_msg(af_codec_decode_cluster(c, PREPAID_CLUSTER, yaml, len, af_cache_upsert_item, k,
                                          &err) == 0,
                  "%s", err.text);
    snap = af_cache_snapshot(k);
    costs = af_costs_compute(c->policy, snap->nodes, snap->n_nodes, snap->pods, snap->n_pods);
    *snap_out = snap;
    af_cache_free(k);
    af_config_unref(c);
    af_free(yaml);
    af_free(text);
    af_free(pol);
    return costs;
}

/* Tenants 0..3 of multi-tenant.yaml: research, production, batch, default. */
enum { RESEARCH, PRODUCTION, BATCH, DEFAULT_TENANT };

/*
 * Worked by hand. The Capacity Block's p5.48xlarge has the rate $31.46/h (annotation);
 * train-0 takes 2 of its 8 GPUs (more than 24 of 191.45 cores or 256 of 2000 GiB): 1/4,
 * $7.865/h; 6 GPUs idle, $23.595/h. The ODCR's g6e.12xlarge are $10.49264/h (catalog):
 * chat-0 takes all of one, the other sits empty. embed-0 takes 1 of the on-demand g5's 4
 * GPUs (more than 8 of 47.81 cores, 32 of 180 GiB): $5.672 x 1/4 = $1.418/h.
 */
START_TEST(test_prepaid_marginal_costs_tenants_nothing_and_reports_the_rate)
{
    struct af_snapshot *snap;
    struct af_costs *c = prepaid_costs("", &snap);
    const struct af_cost_prepaid *r;

    /* decisions charge 0 on prepaid nodes: so does spend, and the budget sees it */
    ck_assert_double_eq_tol(c->tenants[RESEARCH].spend_usd_hr, 0, 1e-9);
    ck_assert_double_eq_tol(c->tenants[RESEARCH].prepaid_usd_hr, 7.865, 1e-6);
    ck_assert_int_eq(c->tenants[RESEARCH].prepaid_pods, 1);
    ck_assert_double_eq_tol(c->tenants[PRODUCTION].spend_usd_hr, 1.418, 1e-6);
    ck_assert_double_eq_tol(c->tenants[PRODUCTION].prepaid_usd_hr, 10.49264, 1e-6);
    ck_assert_int_eq(c->tenants[PRODUCTION].pods, 2);
    ck_assert_double_eq_tol(c->tenants[BATCH].prepaid_usd_hr, 0, 1e-9);
    /* the nodes cost their rates: 31.46 + 2 x 10.49264 + 5.672 + 0.68 */
    ck_assert_double_eq_tol(c->price_usd_hr, 58.79728, 1e-6);
    ck_assert_double_eq_tol(c->classes[AF_CLASS_NVIDIA_H100].price_usd_hr, 31.46, 1e-6);
    /* idle at the rate, not at the 0 a pod would add */
    ck_assert_double_eq_tol(c->classes[AF_CLASS_NVIDIA_H100].idle_usd_hr, 23.595, 1e-6);
    ck_assert_double_eq_tol(c->classes[AF_CLASS_NVIDIA_L40S].idle_usd_hr, 10.49264, 1e-6);
    ck_assert_int_eq((int)c->classes[AF_CLASS_NVIDIA_L40S].idle_devices, 4);

    /* per reservation, by id then node */
    ck_assert_uint_eq(c->n_prepaid, 3);
    ck_assert_double_eq_tol(c->prepaid_usd_hr, 31.46 + 2 * 10.49264, 1e-6);
    ck_assert_double_eq_tol(c->prepaid_used_usd_hr, 7.865 + 10.49264, 1e-6);
    ck_assert_double_eq_tol(c->prepaid_idle_usd_hr, 23.595 + 10.49264, 1e-6);
    ck_assert_int_eq((int)c->prepaid_devices, 16);
    ck_assert_int_eq((int)c->prepaid_idle_devices, 10);
    r = &c->prepaid[0];
    ck_assert_str_eq(r->reservation, "cr-0a17d0c5");
    ck_assert_str_eq(r->node, "ip-10-2-0-20.ec2.internal");
    ck_assert_int_eq(r->type, AF_PREPAID_ODCR);
    ck_assert_int_eq((int)r->idle_devices, 0);
    ck_assert_double_eq_tol(r->used_usd_hr, 10.49264, 1e-6);
    ck_assert_double_eq(r->end, 0);   /* an ODCR without an end */
    r = &c->prepaid[1];
    ck_assert_str_eq(r->node, "ip-10-2-0-21.ec2.internal");
    ck_assert_int_eq((int)r->idle_devices, 4);
    ck_assert_double_eq_tol(r->idle_usd_hr, 10.49264, 1e-6);
    r = &c->prepaid[2];
    ck_assert_str_eq(r->reservation, "cr-0e45b10c");
    ck_assert_int_eq(r->type, AF_PREPAID_BLOCK);
    ck_assert_int_eq(r->cls, AF_CLASS_NVIDIA_H100);
    ck_assert_int_eq((int)r->devices, 8);
    ck_assert_int_eq((int)r->idle_devices, 6);
    ck_assert_double_eq_tol(r->used_usd_hr, 7.865, 1e-6);
    ck_assert_double_eq_tol(r->idle_usd_hr, 23.595, 1e-6);
    ck_assert_double_eq(r->end, af_parse_rfc3339("2030-01-01T00:00:00Z"));
    af_costs_unref(c);
    af_snapshot_unref(snap);
}
END_TEST

/* Under `prices.prepaid: amortized` decisions charge the rate: spend is the same share, the
 * prepaid figures do not change, and no dollar is counted twice. */
START_TEST(test_prepaid_amortized_charges_the_share_of_the_rate)
{
    struct af_snapshot *snap;
    struct af_costs *c = prepaid_costs("  prepaid: amortized\n", &snap);

    ck_assert_double_eq_tol(c->tenants[RESEARCH].spend_usd_hr, 7.865, 1e-6);
    ck_assert_double_eq_tol(c->tenants[RESEARCH].prepaid_usd_hr, 7.865, 1e-6);
    ck_assert_double_eq_tol(c->tenants[PRODUCTION].spend_usd_hr, 1.418 + 10.49264, 1e-6);
    ck_assert_double_eq_tol(c->price_usd_hr, 58.79728, 1e-6);
    ck_assert_double_eq_tol(c->classes[AF_CLASS_NVIDIA_H100].idle_usd_hr, 23.595, 1e-6);
    ck_assert_double_eq_tol(c->prepaid_idle_usd_hr, 23.595 + 10.49264, 1e-6);
    ck_assert(c->spend_usd_hr + c->idle_usd_hr <= c->price_usd_hr + 1e-9);
    af_costs_unref(c);
    af_snapshot_unref(snap);
}
END_TEST

/* ---- the binary ---------------------------------------------------------------------------------- */

START_TEST(test_serve_answers_costs_and_metrics)
{
    char *policy = policy_file();
    const char *const args[] = {"--cluster", af_test_path(CLUSTER), "--policy", policy, NULL};
    struct af_test_server s;
    struct af_test_resp r;
    CURL *c = curl_easy_init();
    char url[256];
    json_t *j;

    af_test_server_start(&s, args, false, NULL, NULL);
    snprintf(url, sizeof(url), "%s/costs", s.base);
    ck_assert_int_eq(af_test_http(c, NULL, url, NULL, 0, NULL, &r), CURLE_OK);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.content_type, "application/json");
    j = json_loads(r.body, 0, NULL);
    ck_assert_int_eq(cents(json_number_value(
                         json_object_get(json_object_get(j, "total"), "idle_usd_hr"))),
                     1146);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(j, "idle"), 1), "node_group")),
                     "gpu-p4d");
    json_decref(j);
    af_test_resp_free(&r);
    ck_assert_int_eq(af_test_http(c, "POST", url, "{}", 2, NULL, &r), CURLE_OK);
    ck_assert_int_eq(r.status, 405);
    af_test_resp_free(&r);
    snprintf(url, sizeof(url), "%s/metrics", s.base);
    ck_assert_int_eq(af_test_http(c, NULL, url, NULL, 0, NULL, &r), CURLE_OK);
    ck_assert_ptr_nonnull(
        strstr(r.body, "accelfit_tenant_spend_dollars_per_hour{tenant=\"production\"} 3.67\n"));
    af_test_resp_free(&r);
    curl_easy_cleanup(c);
    ck_assert_int_eq(af_test_server_stop(&s), 0);
    unlink(policy);
    af_free(policy);
}
END_TEST

START_TEST(test_costs_command_prints_the_same_figures)
{
    char *policy = policy_file();
    char *out = NULL, *err = NULL;
    const char *const table[] = {"accelfit", "costs", "--cluster", af_test_path(CLUSTER),
                                 "--policy", policy, NULL};
    const char *const js[] = {"accelfit", "costs", "--cluster", af_test_path(CLUSTER),
                              "--policy", policy, "--output", "json", NULL};
    const char *const bad[] = {"accelfit", "costs", "--demo", "--output", "csv", NULL};
    json_t *j;

    ck_assert_int_eq(af_test_exec(table, NULL, &out, &err), 0);
    ck_assert_msg(strstr(out, "research                  15.00  hard      11.06       3.94     2\n"),
                  "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "gpu-p4d              nvidia-a100        4 of 8      10.96\n"));
    af_free(out);
    af_free(err);
    ck_assert_int_eq(af_test_exec(js, NULL, &out, &err), 0);
    j = json_loads(out, 0, NULL);
    ck_assert_int_eq(cents(json_number_value(
                         json_object_get(json_object_get(j, "total"), "spend_usd_hr"))),
                     1516);
    json_decref(j);
    af_free(out);
    af_free(err);
    ck_assert_int_eq(af_test_exec(bad, NULL, &out, &err), 2);
    ck_assert_ptr_nonnull(strstr(err, "--output must be table or json, not 'csv'"));
    ck_assert_str_eq(out, "");
    af_free(out);
    af_free(err);
    unlink(policy);
    af_free(policy);
}
END_TEST

/*
 * An API server nobody listens on: `accelfit costs` says so at once, in one line naming the
 * server and the error, as kubectl does, instead of retrying until --timeout.
 */
START_TEST(test_costs_against_an_unreachable_api_server_fails_fast)
{
    char *kc = af_test_temp_path("kubeconfig");
    int port = af_test_free_port();
    char *text = af_xasprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster: "
                              "{server: \"https://127.0.0.1:%d\"}\nusers:\n- name: u\n  user: "
                              "{token: abc}\ncontexts:\n- name: x\n  context: {cluster: c, "
                              "user: u}\ncurrent-context: x\n", port);
    char *want = af_xasprintf("accelfit costs: cannot reach the API server https://127.0.0.1:%d: ",
                              port);
    const char *const argv[] = {"accelfit", "costs", "--kubeconfig", kc, "--timeout", "20", NULL};
    char *out = NULL, *err = NULL;
    FILE *f = fopen(kc, "w");

    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 1);
    ck_assert_msg(!strncmp(err, want, strlen(want)) && strstr(err, "onnect") &&
                      strchr(err, '\n') == err + strlen(err) - 1,
                  "%s", err);
    ck_assert_str_eq(out, "");
    af_free(out), af_free(err), af_free(text), af_free(want), af_free(kc);
}
END_TEST

/* The table, the JSON and the --report page say the same of prepaid capacity; a report that
 * cannot be written is an error naming the file, after the table. */
START_TEST(test_costs_command_reports_prepaid_capacity_and_the_page)
{
    char dir[] = "/tmp/af-costs-report-XXXXXX";
    char *report, *out = NULL, *err = NULL, *html, *cellv;
    const char *argv[] = {"accelfit", "costs", "--cluster", af_test_path(PREPAID_CLUSTER),
                          "--policy", af_test_path(MULTI_TENANT), "--report", NULL, NULL, NULL,
                          NULL};
    size_t len;
    json_t *j, *r;

    ck_assert_ptr_nonnull(mkdtemp(dir));
    report = af_xasprintf("%s/costs.html", dir);
    argv[7] = report;
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    ck_assert_msg(strstr(out, "prepaid: 3 nodes reserved at $52.45/h, paid whether used or not: "
                              "$18.36/h used, $34.09/h idle (10 of 16 devices idle)\n"),
                  "%s", out);
    ck_assert_msg(strstr(out, "research                 100.00  hard       0.00     100.00     1"
                              "         7.87\n"),
                  "%s", out);
    ck_assert_msg(strstr(out, "cr-0a17d0c5          odcr           nvidia-l40s     0    4      "
                              "0.00     10.49        -  ip-10-2-0-21.ec2.internal\n"),
                  "%s", out);
    ck_assert_msg(strstr(out, "cr-0e45b10c          capacity-block nvidia-h100     2    6      "
                              "7.87     23.59 "),
                  "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "report: "));
    af_free(out), af_free(err);

    /* the page: well formed, self-contained, the table's figures */
    {
        struct af_buf page = AF_BUF_INIT(0);
        ck_assert_int_eq(af_buf_read_file(&page, report), 0);
        html = af_buf_detach(&page, &len);
    }
    af_test_html_well_formed(html);
    cellv = af_test_html_cell(html, "tenants", "research", 3);   /* spend */
    ck_assert_str_eq(cellv, "0.00");
    af_free(cellv);
    cellv = af_test_html_cell(html, "tenants", "research", 6);   /* prepaid */
    ck_assert_str_eq(cellv, "7.87");
    af_free(cellv);
    cellv = af_test_html_cell(html, "tenants", "production", 4);   /* left */
    ck_assert_str_eq(cellv, "28.58");
    af_free(cellv);
    cellv = af_test_html_cell(html, "classes", "nvidia-h100", 4);   /* idle $/h */
    ck_assert_str_eq(cellv, "23.59");
    af_free(cellv);
    cellv = af_test_html_cell(html, "groups", "inference-odcr", 2);
    ck_assert_str_eq(cellv, "4 of 8");
    af_free(cellv);
    cellv = af_test_html_cell(html, "prepaid", "cr-0e45b10c", 5);   /* idle devices */
    ck_assert_str_eq(cellv, "6");
    af_free(cellv);
    cellv = af_test_html_cell(html, "prepaid", "cr-0e45b10c", 8);   /* idle $/h */
    ck_assert_str_eq(cellv, "23.59");
    af_free(cellv);
    cellv = af_test_html_cell(html, "prepaid", "cr-0e45b10c", 9);   /* ends in: days away */
    ck_assert_msg(cellv && strchr(cellv, 'd'), "%s", cellv ? cellv : "(none)");
    af_free(cellv);
    ck_assert_ptr_nonnull(strstr(html, "3 nodes reserved at $52.45/h"));
    af_free(html);

    /* JSON: the rows of GET /costs */
    argv[6] = "--output";
    argv[7] = "json";
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    j = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(j);
    r = json_array_get(json_object_get(json_object_get(j, "prepaid"), "reservations"), 2);
    ck_assert_str_eq(json_string_value(json_object_get(r, "reservation")), "cr-0e45b10c");
    ck_assert_str_eq(json_string_value(json_object_get(r, "type")), "capacity-block");
    ck_assert_int_eq(json_integer_value(json_object_get(r, "idle_devices")), 6);
    ck_assert_int_eq(cents(json_number_value(json_object_get(r, "idle_usd_hr"))), 2360);
    ck_assert_str_eq(json_string_value(json_object_get(r, "ends_at")), "2030-01-01T00:00:00Z");
    ck_assert_int_gt(json_integer_value(json_object_get(r, "ends_in_seconds")), 0);
    r = json_array_get(json_object_get(json_object_get(j, "prepaid"), "reservations"), 0);
    ck_assert(json_is_null(json_object_get(r, "ends_at")));
    r = json_array_get(json_object_get(j, "tenants"), 0);
    ck_assert_int_eq(cents(json_number_value(json_object_get(r, "spend_usd_hr"))), 0);
    ck_assert_int_eq(cents(json_number_value(json_object_get(r, "prepaid_usd_hr"))), 787);
    json_decref(j);
    af_free(out), af_free(err);

    /* a report that cannot be written */
    argv[6] = "--report";
    argv[7] = "/nonexistent-dir/costs.html";
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 1);
    ck_assert_msg(strstr(err, "accelfit costs: cannot write the report '/nonexistent-dir/costs.html': "
                              "No such file or directory"),
                  "%s", err);
    af_free(out), af_free(err);

    unlink(report);
    rmdir(dir);
    af_free(report);
}
END_TEST

/* ---- the real server, watching a (fake) API server while pods arrive and leave -------------- */

#define P4D "ip-10-0-1-10.us-west-2.compute.internal"   /* recorded p4d.24xlarge, 2 GPUs used */
#define G5 "ip-10-0-1-40.us-west-2.compute.internal"    /* recorded g5.2xlarge, 1 GPU free */

/* research's spend as GET /costs reports it, in cents; -1 when not there. */
static long costs_research(CURL *c, const struct af_test_server *s)
{
    struct af_test_resp r;
    char url[256];
    json_t *j, *t;
    size_t i;
    long v = -1;

    snprintf(url, sizeof(url), "%s/costs", s->base);
    ck_assert_int_eq(af_test_http(c, NULL, url, NULL, 0, NULL, &r), CURLE_OK);
    j = json_loads(r.body ? r.body : "", 0, NULL);
    json_array_foreach(json_object_get(j, "tenants"), i, t)
        if (!strcmp(json_string_value(json_object_get(t, "name")), "research"))
            v = cents(json_number_value(json_object_get(t, "spend_usd_hr")));
    json_decref(j);
    af_test_resp_free(&r);
    return v;
}

/* Polls GET /costs until research spends `want` cents (the watch delivers the change). */
static void await_research(CURL *c, const struct af_test_server *s, long want)
{
    long got = -1;

    for (int i = 0; i < 1200 && got != want; i++) {   /* up to a minute on a slow machine */
        got = costs_research(c, s);
        if (got != want)
            usleep(50000);
    }
    ck_assert_int_eq(got, want);
}

static json_t *http_filter(CURL *c, const struct af_test_server *s, const char *body)
{
    struct af_test_resp r;
    char url[256];
    json_t *j;

    snprintf(url, sizeof(url), "%s/filter", s->base);
    ck_assert_int_eq(af_test_http(c, "POST", url, body, strlen(body), NULL, &r), CURLE_OK);
    ck_assert_int_eq(r.status, 200);
    j = json_loads(r.body, 0, NULL);
    ck_assert_ptr_nonnull(j);
    af_test_resp_free(&r);
    return j;
}

START_TEST(test_watching_server_refuses_premium_while_over_hard_budget)
{
    static const char tenants[] = "\ntenants:\n  - name: research\n    namespaces: [research]\n"
                                  "    budget_usd_per_hour: 10\n    over_budget: hard\n"
                                  "    premium_classes: [nvidia-a100]\n";
    struct af_test_fake_api f;
    struct af_test_server s;
    char *path = af_xasprintf("/tmp/af-check-tenants-watch-%d.yaml", (int)getpid());
    char *pod = pod_json("research", 1, TRAINING);
    char *body = af_xasprintf("{\"Pod\": %s, \"NodeNames\": [\"" P4D "\", \"" G5 "\"]}", pod);
    FILE *fp;
    CURL *c;
    json_t *j;

    if (!af_test_fake_api_start(&f))
        goto out;   /* no python3 or openssl here: nothing to talk to */
    fp = fopen(path, "w");
    ck_assert_ptr_nonnull(fp);
    fwrite(af_embedded_policy_yaml, 1, af_embedded_policy_yaml_len, fp);
    fputs(tenants, fp);
    fclose(fp);
    {
        const char *const args[] = {"--kubeconfig", f.kubeconfig, "--policy", path, NULL};
        af_test_server_start(&s, args, false, NULL, NULL);
    }
    c = curl_easy_init();
    await_research(c, &s, 0);

    /* research spends nothing: one A100 (21.957642 / 8 = $2.74/h) is within $10 */
    j = http_filter(c, &s, body);
    ck_assert_msg(passes(j, P4D), "%s", refusal(j, P4D));
    json_decref(j);

    /* four A100s of research start: $10.98/h, over its hard budget */
    af_test_fake_api_do(&f, "add_pod",
                        "{\"ns\": \"research\", \"name\": \"train-0\", \"node\": \"" P4D
                        "\", \"gpus\": 4, \"cpu\": \"8\"}");
    await_research(c, &s, 1098);
    j = http_filter(c, &s, body);
    ck_assert(!passes(j, P4D));
    ck_assert_str_eq(refusal(j, P4D), "tenant research over its hard budget: $10.98/h of "
                                      "$10.00/h spent; p4d.24xlarge would add $2.74/h");
    ck_assert(passes(j, G5));   /* the A10G, a cheaper class, stays open */
    json_decref(j);
    /* `accelfit costs --kubeconfig` lists the same cluster once and says the same */
    {
        const char *const argv[] = {"accelfit", "costs", "--kubeconfig", f.kubeconfig,
                                    "--policy", path, NULL};
        char *out = NULL, *err = NULL;
        ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
        ck_assert_msg(strstr(out, "research                  10.00  hard      10.98      -0.98     1"
                                  "  over budget\n"),
                      "%s", out);
        af_free(out);
        af_free(err);
    }
    /* and, with no source flag, finds the cluster as serve and kubectl do ($KUBECONFIG) */
    {
        const char *const argv[] = {"accelfit", "costs", "--policy", path, NULL};
        char *out = NULL, *err = NULL;
        setenv("KUBECONFIG", f.kubeconfig, 1);
        ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
        unsetenv("KUBECONFIG");
        ck_assert_msg(strstr(out, "research                  10.00  hard      10.98      -0.98     1"
                                  "  over budget\n"),
                      "%s %s", out, err);
        af_free(out);
        af_free(err);
    }

    /* credentials the API server refuses: said at once, with the server, not retried */
    {
        const char *const argv[] = {"accelfit", "costs", "--kubeconfig", f.kubeconfig,
                                    "--policy", path, "--timeout", "30", NULL};
        char *out = NULL, *err = NULL;
        af_test_fake_api_do(&f, "token", "{\"token\": \"another\"}");
        ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 1);
        af_test_fake_api_do(&f, "token", "{\"token\": \"token-1\"}");
        ck_assert_msg(strstr(err, "accelfit costs: the API server https://127.0.0.1:") &&
                          strstr(err, "refused the credentials (401 Unauthorized)") &&
                          strchr(err, '\n') == err + strlen(err) - 1,
                      "%s", err);
        af_free(out);
        af_free(err);
    }

    /* the pod leaves: the A100 is open again */
    af_test_fake_api_do(&f, "delete_pod", "{\"ns\": \"research\", \"name\": \"train-0\"}");
    await_research(c, &s, 0);
    j = http_filter(c, &s, body);
    ck_assert_msg(passes(j, P4D), "%s", refusal(j, P4D));
    json_decref(j);

    curl_easy_cleanup(c);
    ck_assert_int_eq(af_test_server_stop(&s), 0);
    af_test_fake_api_stop(&f);
    unlink(path);
out:
    af_free(body);
    af_free(pod);
    af_free(path);
}
END_TEST

static Suite *af_tenants_suite(void)
{
    Suite *s = suite_create("tenants");
    TCase *tc = tcase_create("policy");

    tcase_add_test(tc, test_example_policy_loads_with_default_last);
    tcase_add_test(tc, test_policy_without_tenants_has_an_unlimited_default);
    tcase_add_loop_test(tc, test_policy_errors_point_at_the_text, 0, (int)AF_ARRAY_SIZE(bad_cases));
    tcase_add_test(tc, test_namespace_wins_over_label_and_label_over_default);
    suite_add_tcase(s, tc);

    tc = tcase_create("costs");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_spend_equals_the_hand_computed_figures);
    tcase_add_test(tc, test_idle_cost_of_a_half_used_p4d);
    tcase_add_test(tc, test_costs_are_computed_once_per_snapshot);
    tcase_add_test(tc, test_neuroncore_pods_hold_neuron_devices);
    suite_add_tcase(s, tc);

    tc = tcase_create("prepaid");
    tcase_add_test(tc, test_prepaid_marginal_costs_tenants_nothing_and_reports_the_rate);
    tcase_add_test(tc, test_prepaid_amortized_charges_the_share_of_the_rate);
    suite_add_tcase(s, tc);

    tc = tcase_create("budgets");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_hard_budget_refuses_premium_nodes_until_pods_leave);
    tcase_add_test(tc, test_soft_budget_only_lowers_scores);
    tcase_add_test(tc, test_under_budget_tenant_wins_the_last_a100);
    tcase_add_test(tc, test_spot_only_tenant_and_allowed_classes);
    tcase_add_test(tc, test_explain_shows_tenant_budget_spend_and_effect);
    tcase_add_test(tc, test_hard_budget_holds_against_a_burst);
    tcase_add_test(tc, test_inflight_charges_end_when_seen_or_old);
    tcase_add_test(tc, test_costs_document_and_gauges_follow_the_cluster);
    tcase_add_test(tc, test_idle_gauge_past_the_bound_never_takes_a_group_name);
    suite_add_tcase(s, tc);

    tc = tcase_create("binary");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_serve_answers_costs_and_metrics);
    tcase_add_test(tc, test_costs_command_prints_the_same_figures);
    tcase_add_test(tc, test_costs_against_an_unreachable_api_server_fails_fast);
    tcase_add_test(tc, test_costs_command_reports_prepaid_capacity_and_the_page);
    suite_add_tcase(s, tc);

    tc = tcase_create("watch");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_watching_server_refuses_premium_while_over_hard_budget);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_tenants_suite());
}
