/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The costs memo warmed off the request path (accelfit/budget.h,
 * af_costs_memo_warm) through the publisher's on_publish hook (accelfit/cache.h):
 * the hook sees each snapshot before it becomes current; the warm-up leaves the
 * memo holding the new snapshot's costs before any request can take it; a request
 * that took the previous snapshot just before the publish still gets that
 * snapshot's costs, and does not push the newer ones out; every answer equals a
 * fresh computation of its own (snapshot, config); a config swap is never answered
 * with the old config's costs.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/budget.h"
#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/costs.h"
#include "accelfit/util.h"
#include "support/support.h"

#define CLUSTER "tests/fixtures/tenants/small-cluster.yaml"
#define POLICY "policies/examples/multi-tenant.yaml"

static struct af_config *load_config(const char *policy)
{
    struct af_config *cfg = NULL;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_config_load(&cfg, NULL, policy ? af_test_path(policy) : NULL, &err) == 0,
                  "%s", err.text);
    return cfg;
}

static struct af_cache *load_cluster(struct af_config *cfg)
{
    struct af_cache *cache = af_cache_new();
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_codec_load_cluster_file(cfg, af_test_path(CLUSTER), af_cache_upsert_item, cache, &err) == 0,
                  "%s", err.text);
    af_cache_set_synced(cache, true);
    return cache;
}

/* `c` equals a fresh computation of `snap` under `cfg` (total and per tenant). */
static void assert_costs_of(const struct af_costs *c, struct af_config *cfg,
                            const struct af_snapshot *snap)
{
    struct af_costs *want = af_costs_compute(cfg->policy, snap->nodes, snap->n_nodes, snap->pods,
                                             snap->n_pods);

    ck_assert_uint_eq(c->n_tenants, want->n_tenants);
    ck_assert_double_eq_tol(c->spend_usd_hr, want->spend_usd_hr, 1e-9);
    ck_assert_double_eq_tol(c->idle_usd_hr, want->idle_usd_hr, 1e-9);
    for (size_t i = 0; i < c->n_tenants; i++)
        ck_assert_double_eq_tol(c->tenants[i].spend_usd_hr, want->tenants[i].spend_usd_hr, 1e-9);
    af_costs_unref(want);
}

/* What the hook saw: the snapshot it was given, what requests would have taken at that
 * moment, and the given snapshot's references before and after the warm-up. */
struct seen {
    struct af_publisher *pub;
    struct af_costs_memo *memo;
    struct af_config *cfg;
    int calls;
    struct af_snapshot *given, *current_then;
    int refs_before, refs_after;
};

static void warm_hook(void *ud, struct af_snapshot *s)
{
    struct seen *w = ud;

    w->calls++;
    w->given = s;
    w->current_then = af_publisher_acquire(w->pub);
    af_snapshot_unref(w->current_then);   /* the publisher still holds it: compared only */
    w->refs_before = atomic_load(&s->refcnt);
    af_costs_memo_warm(w->memo, w->cfg, s);
    w->refs_after = atomic_load(&s->refcnt);
}

START_TEST(test_the_memo_is_warm_before_requests_take_a_snapshot)
{
    struct af_config *cfg = load_config(POLICY);
    struct af_cache *cache = load_cluster(cfg);
    struct af_costs_memo *memo = af_costs_memo_new();
    struct af_publisher pub;
    struct seen w = {&pub, memo, cfg, 0, NULL, NULL, 0, 0};
    struct af_snapshot *s1, *s2;
    struct af_costs *c1, *c1b, *c2, *c2b;

    af_publisher_init(&pub);
    pub.on_publish = warm_hook;
    pub.on_publish_ud = &w;
    s1 = af_cache_snapshot(cache);
    af_publisher_publish(&pub, s1);
    ck_assert_int_eq(w.calls, 1);
    ck_assert_ptr_eq(w.given, s1);
    ck_assert_ptr_null(w.current_then);   /* not yet current while warmed */
    ck_assert_int_eq(w.refs_after, w.refs_before + 1);   /* the memo holds its costs */

    /* a request on s1 */
    s1 = af_publisher_acquire(&pub);
    c1 = af_costs_memo_get(memo, cfg, s1);
    assert_costs_of(c1, cfg, s1);

    /* the cluster changes: a pod leaves; s2's costs are there before s2 is current */
    ck_assert_uint_gt(s1->n_pods, 0);
    char name[AF_POD_TEXT_MAX];
    af_cache_delete_pod(cache, s1->pods[0]->ns, af_pod_brief_name(s1->pods[0], name));
    af_publisher_publish(&pub, af_cache_snapshot(cache));
    ck_assert_int_eq(w.calls, 2);
    ck_assert_ptr_eq(w.current_then, s1);
    ck_assert_int_eq(w.refs_after, w.refs_before + 1);
    s2 = af_publisher_acquire(&pub);
    ck_assert_ptr_eq(s2, w.given);

    /* the request that took s1 before the publish still gets s1's costs, the same ones */
    c1b = af_costs_memo_get(memo, cfg, s1);
    ck_assert_ptr_eq(c1b, c1);
    /* and s2's are the warmed ones, not pushed out by it: one object for every request */
    c2 = af_costs_memo_get(memo, cfg, s2);
    c2b = af_costs_memo_get(memo, cfg, s2);
    ck_assert_ptr_eq(c2, c2b);
    assert_costs_of(c2, cfg, s2);
    ck_assert(fabs(c2->spend_usd_hr - c1->spend_usd_hr) > 1e-6);   /* the pod's share left */

    /* warming again what the memo holds changes nothing */
    af_costs_memo_warm(memo, cfg, s2);
    af_costs_unref(c2b);
    c2b = af_costs_memo_get(memo, cfg, s2);
    ck_assert_ptr_eq(c2, c2b);

    af_costs_unref(c1);
    af_costs_unref(c1b);
    af_costs_unref(c2);
    af_costs_unref(c2b);
    af_snapshot_unref(s1);
    af_snapshot_unref(s2);
    af_publisher_destroy(&pub);
    af_costs_memo_free(memo);
    af_cache_free(cache);
    af_config_unref(cfg);
}
END_TEST

START_TEST(test_a_new_config_is_never_answered_with_the_old_ones_costs)
{
    struct af_config *teams = load_config(POLICY);
    struct af_config *plain = load_config(NULL);   /* the embedded policy: one tenant */
    struct af_cache *cache = load_cluster(teams);
    struct af_costs_memo *memo = af_costs_memo_new();
    struct af_snapshot *s = af_cache_snapshot(cache);
    struct af_costs *c;

    af_costs_memo_warm(memo, teams, s);
    c = af_costs_memo_get(memo, plain, s);
    ck_assert_uint_eq(c->n_tenants, 1);
    assert_costs_of(c, plain, s);
    af_costs_unref(c);
    c = af_costs_memo_get(memo, teams, s);
    ck_assert_uint_eq(c->n_tenants, teams->policy->n_tenants);
    assert_costs_of(c, teams, s);
    af_costs_unref(c);
    af_costs_memo_warm(NULL, teams, s);   /* no memo, no snapshot: nothing */
    af_costs_memo_warm(memo, teams, NULL);

    af_snapshot_unref(s);
    af_costs_memo_free(memo);
    af_cache_free(cache);
    af_config_unref(teams);
    af_config_unref(plain);
}
END_TEST

static Suite *costs_memo_suite(void)
{
    Suite *s = suite_create("costs_memo");
    TCase *tc = tcase_create("memo");

    tcase_add_test(tc, test_the_memo_is_warm_before_requests_take_a_snapshot);
    tcase_add_test(tc, test_a_new_config_is_never_answered_with_the_old_ones_costs);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(costs_memo_suite());
}
