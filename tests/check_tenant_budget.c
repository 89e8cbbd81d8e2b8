/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The core's tenant decisions (accelfit/tenant_budget.h) with no server around: the
 * spend is whatever the caller says, so the same pod on the same node is refused or
 * admitted by a hard budget as the given spend moves, a soft budget halves scores (and
 * zeroes the last node of a class with room), and a tenant's classes restrict.
 */
#include <stdlib.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/decide.h"
#include "accelfit/tenant_budget.h"
#include "support/support.h"

static struct af_config *cfg;

static const char tenants[] = "\ntenants:\n"
                              "  - name: research\n"
                              "    namespaces: [ml]\n"
                              "    budget_usd_per_hour: 10\n"
                              "    over_budget: hard\n"
                              "  - name: vision\n"
                              "    namespaces: [vision]\n"
                              "    budget_usd_per_hour: 10\n"
                              "  - name: batch\n"
                              "    namespaces: [batch]\n"
                              "    classes: [nvidia-t4, cpu]\n";

static void setup(void)
{
    struct af_buf policy = AF_BUF_INIT(0);
    struct af_error err;

    ck_assert_int_eq(af_buf_add(&policy, af_embedded_policy_yaml, af_embedded_policy_yaml_len), 0);
    ck_assert_int_eq(af_buf_puts(&policy, tenants), 0);
    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_config_load_mem(&cfg, "<embedded>", af_embedded_catalog_yaml,
                                     af_embedded_catalog_yaml_len, "tenants.yaml", policy.buf,
                                     policy.len, &err) == 0,
                  "%s", err.text);
    af_buf_release(&policy);
}

static void teardown(void)
{
    af_config_unref(cfg);
    cfg = NULL;
}

/* An 8 x A100 node at $32.00/h (by annotation), tainted as EKS taints GPU nodes. */
static struct af_node_info *a100(const char *name)
{
    char *json = af_xasprintf(
        "{\"kind\":\"Node\",\"metadata\":{\"name\":\"%s\",\"labels\":{\"node.kubernetes.io/"
        "instance-type\":\"p4d.24xlarge\"},\"annotations\":{\"accelfit.io/hourly-price\":"
        "\"32.00\"}},\"status\":{\"allocatable\":{\"cpu\":\"96\",\"memory\":\"1152Gi\","
        "\"pods\":\"110\",\"nvidia.com/gpu\":\"8\"}}}",
        name);
    struct af_node_info *n = NULL;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_codec_decode_node(cfg, json, strlen(json), &n, &err) == 0, "%s", err.text);
    ck_assert_int_eq(n->cls, AF_CLASS_NVIDIA_A100);
    af_free(json);
    return n;
}

/* A training pod asking for 2 of the node's 8 GPUs: its share is 2/8 x $32 = $8.00/h. */
static struct af_pod_info *trainer(const char *ns)
{
    char *json = af_xasprintf(
        "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"train\",\"namespace\":\"%s\","
        "\"annotations\":{\"accelfit.io/workload\":\"training\"}},\"spec\":{\"containers\":"
        "[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"12\",\"memory\":\"96Gi\","
        "\"nvidia.com/gpu\":\"2\"},\"limits\":{\"nvidia.com/gpu\":\"2\"}}}]}}",
        ns);
    struct af_pod_info *p = NULL;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_codec_decode_pod(json, strlen(json), &p, &err) == 0, "%s", err.text);
    af_free(json);
    return p;
}

START_TEST(test_hard_budget_follows_the_spend_it_is_given)
{
    struct af_node_info *n = a100("a100-1");
    struct af_pod_info *pod = trainer("ml");
    struct af_node_view v = {n, {{0}}, 0, 0};
    const char *name = n->name;
    struct af_node_decision d;
    struct af_tenant_decision td;
    struct af_plan plan;

    ck_assert_double_eq_tol(af_pod_share_usd(&pod->requests, n), 8.00, 1e-9);
    ck_assert(af_tenant_needs_spend(cfg->policy, af_tenant_of(cfg->policy, pod, NULL)));

    /* $3.50 spent: 3.50 + 8.00 passes $10, refused for good */
    af_plan_pod(cfg->policy, cfg->catalog, pod, &plan);
    af_tenant_steer(cfg->policy, pod, 3.50, true, &plan, &td);
    ck_assert_str_eq(td.t->name, "research");
    ck_assert_int_eq(td.how, AF_TENANT_BY_NAMESPACE);
    ck_assert(!td.soft);
    ck_assert_ptr_nonnull(strstr(td.effect, "hard budget"));
    af_filter(cfg->policy, &plan, pod, &v, &name, 1, &d, NULL);
    ck_assert_int_eq(d.verdict, AF_VERDICT_UNRESOLVABLE);
    ck_assert_msg(strstr(d.reason, "tenant research's hard budget: $3.50/h of $10.00/h spent"),
                  "%s", d.reason);

    /* $1.50 spent: 1.50 + 8.00 stays within $10 */
    af_plan_pod(cfg->policy, cfg->catalog, pod, &plan);
    af_tenant_steer(cfg->policy, pod, 1.50, true, &plan, &td);
    af_filter(cfg->policy, &plan, pod, &v, &name, 1, &d, NULL);
    ck_assert_msg(d.verdict == AF_VERDICT_PASS, "%s", d.reason);

    /* exactly $10.00 spent: at the budget, not over it (/costs' "over" is spend > budget) */
    af_plan_pod(cfg->policy, cfg->catalog, pod, &plan);
    af_tenant_steer(cfg->policy, pod, 10.00, true, &plan, &td);
    af_filter(cfg->policy, &plan, pod, &v, &name, 1, &d, NULL);
    ck_assert_int_eq(d.verdict, AF_VERDICT_UNRESOLVABLE);
    ck_assert_msg(strstr(d.reason, "tenant research at its hard budget: $10.00/h of $10.00/h spent"),
                  "%s", d.reason);
    /* a cent past it: over */
    af_plan_pod(cfg->policy, cfg->catalog, pod, &plan);
    af_tenant_steer(cfg->policy, pod, 10.01, true, &plan, &td);
    af_filter(cfg->policy, &plan, pod, &v, &name, 1, &d, NULL);
    ck_assert_msg(strstr(d.reason, "tenant research over its hard budget: $10.01/h of $10.00/h spent"),
                  "%s", d.reason);

    af_pod_info_unref(pod);
    af_node_info_unref(n);
}
END_TEST

START_TEST(test_soft_budget_halves_and_keeps_the_last_node_for_others)
{
    struct af_node_info *n1 = a100("a100-1"), *n2 = a100("a100-2");
    struct af_pod_info *pod = trainer("vision");
    struct af_node_view v[2] = {{n1, {{0}}, 0, 0}, {n2, {{0}}, 0, 0}};
    const char *names[2] = {n1->name, n2->name};
    struct af_node_decision d[2], before[2];
    struct af_tenant_decision td;
    struct af_plan plan;

    af_plan_pod(cfg->policy, cfg->catalog, pod, &plan);
    af_tenant_steer(cfg->policy, pod, 5.00, true, &plan, &td);   /* 5 + 8 passes 10 */
    ck_assert(td.soft);
    af_filter(cfg->policy, &plan, pod, v, names, 2, d, NULL);
    ck_assert_int_eq(d[0].verdict, AF_VERDICT_PASS);   /* nothing is refused */
    af_prioritize(cfg->policy, &plan, pod, v, names, 2, d);
    memcpy(before, d, sizeof(d));
    ck_assert_int_gt(before[0].score, 1);
    af_tenant_rank(&td, pod, v, 2, d);
    ck_assert_int_eq(d[0].score, before[0].score / 2);
    ck_assert_int_eq(d[1].score, before[1].score / 2);
    ck_assert_ptr_nonnull(strstr(d[0].reason, "score halved"));

    /* one node of the class with room: left to tenants within budget */
    af_prioritize(cfg->policy, &plan, pod, v, names, 1, d);
    af_tenant_rank(&td, pod, v, 1, d);
    ck_assert_int_eq(d[0].score, 0);

    /* within budget: scores stand */
    af_plan_pod(cfg->policy, cfg->catalog, pod, &plan);
    af_tenant_steer(cfg->policy, pod, 1.00, true, &plan, &td);
    af_prioritize(cfg->policy, &plan, pod, v, names, 2, d);
    af_tenant_rank(&td, pod, v, 2, d);
    ck_assert_int_eq(d[0].score, before[0].score);

    af_pod_info_unref(pod);
    af_node_info_unref(n1);
    af_node_info_unref(n2);
}
END_TEST

START_TEST(test_classes_restrict_without_a_budget)
{
    struct af_node_info *n = a100("a100-1");
    struct af_pod_info *pod = trainer("batch"), *other = trainer("elsewhere");
    struct af_node_view v = {n, {{0}}, 0, 0};
    const char *name = n->name;
    struct af_node_decision d;
    struct af_tenant_decision td;
    struct af_plan plan;

    ck_assert(!af_tenant_needs_spend(cfg->policy, af_tenant_of(cfg->policy, pod, NULL)));
    af_plan_pod(cfg->policy, cfg->catalog, pod, &plan);
    af_tenant_steer(cfg->policy, pod, 0, false, &plan, &td);
    ck_assert(!td.spend_known);
    ck_assert_str_eq(td.effect, "classes limited to the tenant's");
    af_filter(cfg->policy, &plan, pod, &v, &name, 1, &d, NULL);
    ck_assert_int_eq(d.verdict, AF_VERDICT_UNRESOLVABLE);
    ck_assert_msg(strstr(d.reason, "tenant batch may use only nvidia-t4, cpu"), "%s", d.reason);

    /* a pod of no listed tenant: the default tenant, no budget, no limits */
    af_plan_pod(cfg->policy, cfg->catalog, other, &plan);
    af_tenant_steer(cfg->policy, other, 0, false, &plan, &td);
    ck_assert_str_eq(td.t->name, "default");
    ck_assert_str_eq(td.effect, "no budget, no limits");
    af_filter(cfg->policy, &plan, other, &v, &name, 1, &d, NULL);
    ck_assert_msg(d.verdict == AF_VERDICT_PASS, "%s", d.reason);

    af_pod_info_unref(pod);
    af_pod_info_unref(other);
    af_node_info_unref(n);
}
END_TEST

static Suite *af_tenant_budget_suite(void)
{
    Suite *s = suite_create("tenant_budget");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_hard_budget_follows_the_spend_it_is_given);
    tcase_add_test(tc, test_soft_budget_halves_and_keeps_the_last_node_for_others);
    tcase_add_test(tc, test_classes_restrict_without_a_budget);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_tenant_budget_suite());
}
