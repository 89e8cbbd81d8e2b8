/* SPDX-License-Identifier: Apache-2.0 */
/* cache: incremental usage, resync sweep, snapshots, publisher. */
#include <stdio.h>
#include <string.h>

#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/decide.h"
#include "accelfit/prices.h"
#include "accelfit/util.h"
#include "support/support.h"

static struct af_node_info *mknode(const char *name, int64_t cpu_m, int64_t gpus)
{
    struct af_node_info *n = af_node_info_new();
    n->name = af_xstrdup(name);
    n->allocatable.v[AF_RES_CPU] = cpu_m;
    n->allocatable.v[AF_RES_GPU] = gpus;
    n->allocatable.v[AF_RES_PODS] = 110;
    return n;
}

static struct af_pod_info *mkpod(const char *ns, const char *name, const char *node,
                                 int64_t cpu_m, int64_t gpus, bool terminal)
{
    struct af_pod_info *p = af_pod_info_new();
    p->ns = af_xstrdup(ns);
    p->name = af_xstrdup(name);
    p->uid = af_xasprintf("uid-%s-%s", ns, name);
    p->node_name = af_xstrdup(node);
    p->terminal = terminal;
    p->requests.v[AF_RES_CPU] = cpu_m;
    p->requests.v[AF_RES_GPU] = gpus;
    return p;
}

/* Invariant: a snapshot's per-node usage equals the sum over its pods, and every
 * node and pod is found through the indexes. */
static void check_snapshot_consistent(const struct af_snapshot *s)
{
    for (size_t i = 0; i < s->n_nodes; i++) {
        struct af_resources sum = {{0}};
        int np = 0;
        if (i > 0)
            ck_assert_int_lt(strcmp(s->nodes[i - 1].info->name, s->nodes[i].info->name), 0);
        ck_assert_ptr_eq(af_snapshot_find_node(s, s->nodes[i].info->name), &s->nodes[i]);
        {
            const char *names[3] = {s->nodes[i].info->name, NULL, "no-such-node"};
            const struct af_node_view *found[3];
            af_snapshot_find_nodes(s, names, 3, found);
            ck_assert_ptr_eq(found[0], &s->nodes[i]);
            ck_assert_ptr_null(found[1]);
            ck_assert_ptr_null(found[2]);
        }
        for (size_t j = 0; j < s->n_pods; j++) {
            const struct af_pod_brief *p = s->pods[j];
            if (p->node_name && !strcmp(p->node_name, s->nodes[i].info->name)) {
                struct af_resources req;
                af_pod_brief_requests(p, &req);
                for (int r = 0; r < AF_RES__COUNT; r++)
                    sum.v[r] += req.v[r];
                np++;
            }
        }
        ck_assert_int_eq(np, s->nodes[i].npods);
        for (int r = 0; r < AF_RES__COUNT; r++)
            ck_assert_int_eq(sum.v[r], s->nodes[i].used.v[r]);
    }
    for (size_t j = 0; j < s->n_pods; j++) {
        ck_assert(!s->pods[j]->terminal);
        char name[AF_POD_TEXT_MAX];
        ck_assert_ptr_eq(af_snapshot_find_pod(s, s->pods[j]->ns, af_pod_brief_name(s->pods[j], name)),
                         s->pods[j]);
    }
}

static const struct af_node_view *snap_node(struct af_cache *c, struct af_snapshot **out,
                                            const char *name)
{
    *out = af_cache_snapshot(c);
    check_snapshot_consistent(*out);
    return af_snapshot_find_node(*out, name);
}

/* A pod as the API server sends it: owned by a ReplicaSet, labelled with a tenant,
 * with intent annotations and two containers. */
static struct af_pod_info *decoded_pod(const char *name, const char *node)
{
    static unsigned uids = 0xabc0;
    char json[2048];
    struct af_pod_info *p = NULL;
    struct af_error err;

    snprintf(json, sizeof(json),
             "{\"metadata\":{\"name\":\"%s\",\"namespace\":\"ml\","
             "\"uid\":\"6b1f5c1e-a0b9-4c2d-8e3f-%012x\","
             "\"generateName\":\"infer-7d9f-\",\"labels\":{\"accelfit.io/tenant\":\"team-a\"},"
             "\"annotations\":{\"accelfit.io/workload\":\"inference\","
             "\"accelfit.io/model-params\":\"7B\",\"accelfit.io/instances\":\"2\"},"
             "\"ownerReferences\":[{\"kind\":\"ReplicaSet\",\"name\":\"infer-7d9f\","
             "\"controller\":true}]},"
             "\"spec\":{\"nodeName\":\"%s\",\"containers\":["
             "{\"name\":\"a\",\"resources\":{\"requests\":{\"cpu\":\"1500m\",\"memory\":\"2Gi\","
             "\"nvidia.com/gpu\":\"1\"}}},"
             "{\"name\":\"b\",\"resources\":{\"requests\":{\"cpu\":\"250m\"}}}]},"
             "\"status\":{\"phase\":\"Running\"}}",
             name, ++uids, node);
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_codec_decode_pod(json, strlen(json), &p, &err), 0);
    return p;
}

static void assert_same_str(const char *a, const char *b)
{
    if (!a || !b)
        ck_assert_ptr_eq(a, b);
    else
        ck_assert_str_eq(a, b);
}

/* What explain, costs and tenants read of a cached pod is what the API server said, though
 * the cache keeps only a brief of it. */
START_TEST(test_cached_pod_reads_as_decoded)
{
    struct af_cache *c = af_cache_new();
    struct af_pod_info *want = decoded_pod("infer-7d9f-abcde", "n1");
    struct af_pod_kept tmp;
    const struct af_pod_info *got;
    struct af_snapshot *s;

    af_cache_upsert_node(c, mknode("n1", 8000, 4));
    af_cache_upsert_pod(c, af_pod_info_ref(want));
    s = af_cache_snapshot(c);
    got = af_pod_brief_info(af_snapshot_find_pod(s, "ml", "infer-7d9f-abcde"), &tmp);
    ck_assert_ptr_nonnull(got);
    assert_same_str(got->ns, want->ns);
    assert_same_str(got->name, want->name);
    assert_same_str(got->uid, want->uid);
    assert_same_str(got->node_name, want->node_name);
    assert_same_str(got->tenant, "team-a");
    assert_same_str(got->owner_kind, "ReplicaSet");
    assert_same_str(got->owner_name, "infer-7d9f");
    assert_same_str(got->generate_name, "infer-7d9f-");
    assert_same_str(got->ann.workload, "inference");
    assert_same_str(got->ann.model_params, "7B");
    assert_same_str(got->ann.instances, "2");
    assert_same_str(got->ann.objective, NULL);
    assert_same_str(got->ann.precision, NULL);
    ck_assert_int_eq(got->terminal, want->terminal);
    ck_assert_int_eq(got->system, want->system);
    ck_assert_mem_eq(&got->requests, &want->requests, sizeof(want->requests));
    ck_assert_int_eq(got->requests.v[AF_RES_CPU], 1750);
    ck_assert_int_eq(af_snapshot_find_node(s, "n1")->used.v[AF_RES_GPU], 1);
    af_snapshot_unref(s);
    af_pod_info_unref(want);
    af_cache_free(c);
}
END_TEST

/* 1,000 replicas on one node keep one copy of what they repeat (namespace, node, owner,
 * tenant, annotations), and a pod that says more than a brief holds keeps its record. */
START_TEST(test_pods_share_what_they_repeat)
{
    struct af_cache *c = af_cache_new();
    struct af_pod_info *m = decoded_pod("managed-0", "n1");
    struct af_snapshot *s;

    af_cache_upsert_node(c, mknode("n1", 1000000, 0));
    for (int i = 0; i < 1000; i++) {
        char name[32];
        snprintf(name, sizeof(name), "infer-7d9f-%05d", i);
        af_cache_upsert_pod(c, decoded_pod(name, "n1"));
    }
    m->managed = true;
    af_cache_upsert_pod(c, m);
    s = af_cache_snapshot(c);
    ck_assert_uint_eq(s->n_pods, 1001);
    for (size_t i = 1; i < s->n_pods; i++) {
        char name[AF_POD_TEXT_MAX];
        const struct af_pod_brief *a = s->pods[0], *b = s->pods[i];
        ck_assert_ptr_eq(a->ns, b->ns);
        ck_assert_ptr_eq(a->node_name, b->node_name);
        ck_assert_ptr_eq(a->owner_name, b->owner_name);
        ck_assert_ptr_eq(a->tenant, b->tenant);
        ck_assert_ptr_eq(a->ann, b->ann);
        ck_assert(!af_pod_brief_name_is(a, b == a ? "" : af_pod_brief_name(b, name)));
        ck_assert((b->full != NULL) == af_pod_brief_name_is(b, "managed-0"));
    }
    ck_assert_uint_eq(s->n_managed, 1);
    ck_assert_ptr_eq(s->managed[0], af_snapshot_find_pod(s, "ml", "managed-0")->full);
    ck_assert_int_eq(af_snapshot_find_node(s, "n1")->used.v[AF_RES_CPU], 1001 * 1750);
    af_snapshot_unref(s);
    af_cache_free(c);
}
END_TEST

START_TEST(test_usage_follows_add_modify_bind_delete)
{
    struct af_cache *c = af_cache_new();
    struct af_snapshot *s;
    const struct af_node_view *v;

    af_cache_upsert_node(c, mknode("n1", 8000, 8));
    af_cache_upsert_node(c, mknode("n2", 8000, 8));
    af_cache_upsert_pod(c, mkpod("default", "p1", NULL, 1000, 1, false));   /* unbound */
    v = snap_node(c, &s, "n1");
    ck_assert_int_eq(v->npods, 0);
    ck_assert_int_eq(s->n_pods, 1);
    af_snapshot_unref(s);

    af_cache_upsert_pod(c, mkpod("default", "p1", "n1", 1000, 1, false));   /* bind */
    af_cache_upsert_pod(c, mkpod("default", "p2", "n1", 500, 2, false));
    v = snap_node(c, &s, "n1");
    ck_assert_int_eq(v->npods, 2);
    ck_assert_int_eq(v->used.v[AF_RES_CPU], 1500);
    ck_assert_int_eq(v->used.v[AF_RES_GPU], 3);
    af_snapshot_unref(s);

    af_cache_upsert_pod(c, mkpod("default", "p2", "n2", 700, 4, false));    /* moved + resized */
    v = snap_node(c, &s, "n1");
    ck_assert_int_eq(v->used.v[AF_RES_CPU], 1000);
    ck_assert_int_eq(v->used.v[AF_RES_GPU], 1);
    ck_assert_int_eq(af_snapshot_find_node(s, "n2")->used.v[AF_RES_GPU], 4);
    af_snapshot_unref(s);

    af_cache_upsert_pod(c, mkpod("default", "p1", "n1", 1000, 1, true));    /* terminal */
    ck_assert_int_eq(af_cache_pod_count(c), 1);
    af_cache_delete_pod(c, "default", "p2");
    af_cache_delete_pod(c, "default", "nope");
    v = snap_node(c, &s, "n2");
    ck_assert_int_eq(v->npods, 0);
    ck_assert_int_eq(v->used.v[AF_RES_CPU], 0);
    ck_assert_int_eq(s->n_pods, 0);
    ck_assert_ptr_null(af_snapshot_find_pod(s, "default", "p1"));
    af_snapshot_unref(s);
    af_cache_free(c);
}
END_TEST

START_TEST(test_node_arriving_after_its_pods_sees_usage)
{
    struct af_cache *c = af_cache_new();
    struct af_snapshot *s;

    af_cache_upsert_pod(c, mkpod("a", "p1", "late", 250, 0, false));
    af_cache_upsert_pod(c, mkpod("a", "p2", "late", 250, 1, false));
    s = af_cache_snapshot(c);
    ck_assert_int_eq(s->n_nodes, 0);       /* no phantom in a snapshot */
    ck_assert_int_eq(af_cache_node_count(c), 0);
    af_snapshot_unref(s);
    af_cache_upsert_node(c, mknode("late", 4000, 1));
    const struct af_node_view *v = snap_node(c, &s, "late");
    ck_assert_int_eq(v->npods, 2);
    ck_assert_int_eq(v->used.v[AF_RES_CPU], 500);
    af_snapshot_unref(s);
    /* node deleted while pods remain, then it comes back: usage is still right */
    af_cache_delete_node(c, "late");
    ck_assert_int_eq(af_cache_node_count(c), 0);
    af_cache_upsert_node(c, mknode("late", 4000, 1));
    v = snap_node(c, &s, "late");
    ck_assert_int_eq(v->npods, 2);
    af_snapshot_unref(s);
    af_cache_free(c);
}
END_TEST

START_TEST(test_resync_sweeps_what_was_not_relisted)
{
    struct af_cache *c = af_cache_new();
    struct af_snapshot *s;

    for (int i = 0; i < 50; i++) {
        char nn[32], pn[32];
        snprintf(nn, sizeof(nn), "n%02d", i);
        snprintf(pn, sizeof(pn), "p%02d", i);
        af_cache_upsert_node(c, mknode(nn, 1000, 0));
        af_cache_upsert_pod(c, mkpod("ns", pn, nn, 10, 0, false));
    }
    af_cache_begin_resync(c, AF_KIND_NODE);
    af_cache_begin_resync(c, AF_KIND_POD);
    for (int i = 0; i < 50; i += 2) {
        char nn[32], pn[32];
        snprintf(nn, sizeof(nn), "n%02d", i);
        snprintf(pn, sizeof(pn), "p%02d", i);
        af_cache_upsert_node(c, mknode(nn, 1000, 0));
        af_cache_upsert_pod(c, mkpod("ns", pn, nn, 20, 0, false));
    }
    af_cache_end_resync(c, AF_KIND_NODE);
    af_cache_end_resync(c, AF_KIND_POD);
    ck_assert_int_eq(af_cache_node_count(c), 25);
    ck_assert_int_eq(af_cache_pod_count(c), 25);
    s = af_cache_snapshot(c);
    check_snapshot_consistent(s);
    ck_assert_ptr_null(af_snapshot_find_node(s, "n01"));
    ck_assert_int_eq(af_snapshot_find_node(s, "n02")->used.v[AF_RES_CPU], 20);
    af_snapshot_unref(s);
    af_cache_free(c);
}
END_TEST

static struct af_pod_info *mkmanaged(const char *name, const char *node, bool failed)
{
    struct af_pod_info *p = mkpod("ml", name, node, 100, 1, failed);
    p->managed = true;
    p->failed = failed;
    return p;
}

static bool managed_has(const struct af_snapshot *s, const char *name, bool failed)
{
    for (size_t i = 0; i < s->n_managed; i++)
        if (!strcmp(s->managed[i]->name, name))
            return s->managed[i]->failed == failed;
    return false;
}

/*
 * The live cache hears of pods from two watches, split by the managed label
 * (cache.h). A managed pod that fails stays listed for the brake; a pod whose
 * label changes arrives in one watch and leaves the other in either order, and
 * a relist of one set never sweeps the other's pods.
 */
START_TEST(test_two_pod_sets_delete_and_resync_apart)
{
    struct af_cache *c = af_cache_new();
    struct af_snapshot *s;
    struct af_pod_info *plain;

    af_cache_upsert_node(c, mknode("n1", 8000, 8));
    af_cache_upsert_pod(c, mkmanaged("m1", "n1", false));
    af_cache_upsert_pod(c, mkpod("ml", "u1", "n1", 100, 0, false));
    /* m1 fails: the managed watch says MODIFIED; usage drops, the brake still sees it */
    af_cache_upsert_pod(c, mkmanaged("m1", "n1", true));
    s = af_cache_snapshot(c);
    ck_assert_ptr_null(af_snapshot_find_pod(s, "ml", "m1"));
    ck_assert(managed_has(s, "m1", true));
    ck_assert_int_eq(af_snapshot_find_node(s, "n1")->used.v[AF_RES_GPU], 0);
    af_snapshot_unref(s);

    /* u1 gains the label: the managed watch's ADDED may come before the other's DELETED */
    plain = mkmanaged("u1", "n1", false);
    af_cache_upsert_pod(c, plain);
    af_cache_delete_pod_in(c, AF_PODS_UNMANAGED, "ml", "u1");
    s = af_cache_snapshot(c);
    ck_assert_ptr_nonnull(af_snapshot_find_pod(s, "ml", "u1"));
    ck_assert(managed_has(s, "u1", false));
    af_snapshot_unref(s);
    /* ... and loses it again, the DELETED of the managed watch last */
    af_cache_upsert_pod(c, mkpod("ml", "u1", "n1", 100, 0, false));
    af_cache_delete_pod_in(c, AF_PODS_MANAGED, "ml", "u1");
    s = af_cache_snapshot(c);
    ck_assert_ptr_nonnull(af_snapshot_find_pod(s, "ml", "u1"));
    ck_assert(!managed_has(s, "u1", false));
    af_snapshot_unref(s);

    /* u3 is modified (rv 10), then labelled (rv 11); the managed watch's ADDED (rv 11)
     * comes first, then the other watch's stale MODIFIED (rv 10) and its DELETED (rv 11) */
    plain = mkmanaged("u3", "n1", false);
    plain->rv = 11;
    af_cache_upsert_pod(c, plain);
    plain = mkpod("ml", "u3", "n1", 100, 0, false);
    plain->rv = 10;
    af_cache_upsert_pod(c, plain);
    af_cache_delete_pod_in(c, AF_PODS_UNMANAGED, "ml", "u3");
    s = af_cache_snapshot(c);
    ck_assert_ptr_nonnull(af_snapshot_find_pod(s, "ml", "u3"));
    ck_assert(managed_has(s, "u3", false));
    af_snapshot_unref(s);
    af_cache_delete_pod(c, "ml", "u3");

    /* a relist of the unmanaged set that does not carry m1 or u2 keeps m1, drops u2 */
    af_cache_upsert_pod(c, mkpod("ml", "u2", "n1", 100, 0, false));
    af_cache_begin_resync_pods(c, AF_PODS_UNMANAGED);
    af_cache_upsert_pod(c, mkpod("ml", "u1", "n1", 100, 0, false));
    af_cache_end_resync_pods(c, AF_PODS_UNMANAGED);
    s = af_cache_snapshot(c);
    ck_assert(managed_has(s, "m1", true));
    ck_assert_ptr_nonnull(af_snapshot_find_pod(s, "ml", "u1"));
    ck_assert_ptr_null(af_snapshot_find_pod(s, "ml", "u2"));
    check_snapshot_consistent(s);
    af_snapshot_unref(s);
    /* a relist of the managed set without m1 (deleted meanwhile) drops it, keeps u1 */
    af_cache_begin_resync_pods(c, AF_PODS_MANAGED);
    af_cache_end_resync_pods(c, AF_PODS_MANAGED);
    s = af_cache_snapshot(c);
    ck_assert_int_eq(s->n_managed, 0);
    ck_assert_ptr_nonnull(af_snapshot_find_pod(s, "ml", "u1"));
    af_snapshot_unref(s);
    af_cache_free(c);
}
END_TEST

START_TEST(test_snapshot_is_immutable_while_cache_changes)
{
    struct af_cache *c = af_cache_new();
    af_cache_upsert_node(c, mknode("n1", 1000, 0));
    af_cache_upsert_pod(c, mkpod("ns", "p", "n1", 100, 0, false));
    af_cache_set_synced(c, true);
    struct af_snapshot *s1 = af_cache_snapshot(c);
    const struct af_pod_brief *p1 = af_snapshot_find_pod(s1, "ns", "p");
    for (int i = 0; i < 2000; i++) {
        char pn[32];
        snprintf(pn, sizeof(pn), "q%d", i);
        af_cache_upsert_pod(c, mkpod("ns", pn, "n1", 1, 0, false));
    }
    af_cache_delete_pod(c, "ns", "p");
    af_cache_delete_node(c, "n1");
    struct af_snapshot *s2 = af_cache_snapshot(c);
    ck_assert(s1->synced);
    ck_assert_uint_gt(s2->generation, s1->generation);
    ck_assert_int_eq(s1->n_pods, 1);
    ck_assert_ptr_eq(af_snapshot_find_pod(s1, "ns", "p"), p1);
    ck_assert(af_pod_brief_name_is(p1, "p"));
    ck_assert_int_eq(af_snapshot_find_node(s1, "n1")->used.v[AF_RES_CPU], 100);
    ck_assert_int_eq(s2->n_pods, 2000);
    ck_assert_int_eq(s2->n_nodes, 0);
    check_snapshot_consistent(s1);
    check_snapshot_consistent(s2);
    af_cache_free(c);               /* snapshots outlive the cache */
    ck_assert_str_eq(s1->nodes[0].info->name, "n1");
    af_snapshot_unref(s1);
    af_snapshot_unref(s2);
}
END_TEST

/* A new price book re-prices cached nodes; a snapshot taken before keeps the old prices. */
START_TEST(test_reprice_replaces_records_snapshots_keep_theirs)
{
    struct af_instance_type types[] = {
        {.name = "m7g.large", .cls = AF_CLASS_CPU, .price_usd_hr = 0.0816, .spot_discount_pct = -1}};
    struct af_catalog cat = {types, 1, "<test>", "us-east-1", 0, NULL, {0}};
    struct af_policy pol = {.default_spot_discount_pct = -1};
    struct af_kv labels[] = {{"node.kubernetes.io/instance-type", "m7g.large"},
                             {"topology.kubernetes.io/region", "eu-west-1"}};
    struct af_cache *c = af_cache_new();
    struct af_node_info *a = mknode("a", 2000, 0), *b = mknode("b", 2000, 0);
    struct af_prices *live = af_prices_new();

    af_node_classify(&cat, &pol, labels, 2, NULL, 0, a);
    af_node_classify(&cat, &pol, labels, 1, NULL, 0, b);   /* no region */
    af_cache_upsert_node(c, a);
    af_cache_upsert_node(c, b);
    af_cache_upsert_pod(c, mkpod("ns", "p", "a", 500, 0, false));
    struct af_snapshot *s1 = af_cache_snapshot(c);
    ck_assert_int_eq(af_prices_set(live, AF_PRICE_ON_DEMAND, "eu-west-1", "m7g.large", 0.0892, 5), 0);
    af_prices_freeze(live);

    ck_assert_uint_eq(af_cache_reprice(c, &cat, &pol, &(struct af_price_inputs){.live = live}), 1);   /* only a is in eu-west-1 */
    ck_assert_uint_eq(af_cache_reprice(c, &cat, &pol, &(struct af_price_inputs){.live = live}), 0);   /* nothing changes twice */
    struct af_snapshot *s2 = af_cache_snapshot(c);
    ck_assert_str_eq(af_snapshot_find_node(s1, "a")->info->price_source, "catalog");
    ck_assert_double_eq(af_snapshot_find_node(s1, "a")->info->hourly_usd, 0.0816);
    ck_assert_str_eq(af_snapshot_find_node(s2, "a")->info->price_source, "aws");
    ck_assert_double_eq(af_snapshot_find_node(s2, "a")->info->hourly_usd, 0.0892);
    ck_assert_int_eq(af_snapshot_find_node(s2, "a")->used.v[AF_RES_CPU], 500);   /* usage stays */
    ck_assert_str_eq(af_snapshot_find_node(s2, "b")->info->price_source, "catalog");
    /* the book gone (AWS's prices dropped): back to the catalog */
    ck_assert_uint_eq(af_cache_reprice(c, &cat, &pol, NULL), 1);
    af_snapshot_unref(s1);
    af_snapshot_unref(s2);
    af_prices_unref(live);
    af_cache_free(c);
}
END_TEST

START_TEST(test_snapshot_carries_the_newest_resource_version)
{
    struct af_cache *c = af_cache_new();
    struct af_snapshot *s;

    s = af_cache_snapshot(c);
    ck_assert_str_eq(s->resource_version, "");   /* a static cluster has none */
    af_snapshot_unref(s);
    af_cache_note_resource_version(c, "1009");
    af_cache_note_resource_version(c, "998");    /* the pods' list came back older */
    s = af_cache_snapshot(c);
    ck_assert_str_eq(s->resource_version, "1009");
    af_snapshot_unref(s);
    af_cache_note_resource_version(c, "10010");  /* numerically newer, not by strcmp */
    s = af_cache_snapshot(c);
    ck_assert_str_eq(s->resource_version, "10010");
    af_snapshot_unref(s);
    af_cache_note_resource_version(c, "");       /* nothing to note */
    af_cache_note_resource_version(c, "opaque-x");   /* not a number: the last one seen */
    s = af_cache_snapshot(c);
    ck_assert_str_eq(s->resource_version, "opaque-x");
    af_snapshot_unref(s);
    af_cache_free(c);
}
END_TEST

START_TEST(test_publisher_refcounts)
{
    struct af_publisher pub;
    struct af_cache *c = af_cache_new();
    struct af_node_info *n = mknode("n1", 1000, 0), *n2 = mknode("n1", 2000, 0);
    af_cache_upsert_node(c, af_node_info_ref(n));
    af_publisher_init(&pub);
    ck_assert_ptr_null(af_publisher_acquire(&pub));
    af_publisher_publish(&pub, af_cache_snapshot(c));
    struct af_snapshot *held = af_publisher_acquire(&pub);
    ck_assert_int_eq(atomic_load(&held->refcnt), 2);
    ck_assert_int_eq(atomic_load(&n->refcnt), 3);  /* mine, cache, the snapshots' node set */
    af_publisher_publish(&pub, af_cache_snapshot(c));
    /* replaced while a request holds it: retired, not freed, and never freed by the request */
    ck_assert_int_eq(atomic_load(&held->refcnt), 2);
    ck_assert_int_eq(af_snapshot_find_node(held, "n1")->info->allocatable.v[AF_RES_CPU], 1000);
    ck_assert_ptr_eq(held->node_set, af_publisher_acquire(&pub)->node_set);   /* shared */
    af_snapshot_unref(pub.current);
    af_snapshot_unref(held);
    ck_assert_int_eq(atomic_load(&n->refcnt), 3);   /* no node changed: still one set */
    /* the next publish frees it, on the publishing thread; an unheld one goes at once */
    af_publisher_publish(&pub, af_cache_snapshot(c));
    ck_assert_int_eq(atomic_load(&n->refcnt), 3);
    af_publisher_publish(&pub, af_cache_snapshot(c));
    ck_assert_int_eq(atomic_load(&n->refcnt), 3);
    ck_assert_uint_eq(pub.n_retired, 0);

    /* a new record: a held snapshot keeps the old one, and lets it go with its set */
    held = af_publisher_acquire(&pub);
    af_cache_upsert_node(c, af_node_info_ref(n2));
    ck_assert_int_eq(atomic_load(&n->refcnt), 2);   /* mine, the held snapshots' set */
    af_publisher_publish(&pub, af_cache_snapshot(c));
    ck_assert_int_eq(af_snapshot_find_node(held, "n1")->info->allocatable.v[AF_RES_CPU], 1000);
    ck_assert_int_eq(af_snapshot_find_node(pub.current, "n1")->info->allocatable.v[AF_RES_CPU],
                     2000);
    af_snapshot_unref(held);
    af_publisher_publish(&pub, af_cache_snapshot(c));
    ck_assert_int_eq(atomic_load(&n->refcnt), 1);
    ck_assert_int_eq(atomic_load(&n2->refcnt), 3);  /* mine, cache, the new set */
    af_publisher_destroy(&pub);
    af_cache_free(c);
    ck_assert_int_eq(atomic_load(&n2->refcnt), 1);
    af_node_info_unref(n);
    af_node_info_unref(n2);
}
END_TEST

/* Requests that hold snapshots through many publishes: at most AF_PUBLISHER_RETIRED are
 * kept for the publisher to free; the rest are freed by their last holder; nothing leaks. */
START_TEST(test_publisher_retires_held_snapshots)
{
    struct af_publisher pub;
    struct af_snapshot *held[12];
    struct af_cache *c = af_cache_new();
    struct af_node_info *n = mknode("n1", 1000, 0);
    af_cache_upsert_node(c, af_node_info_ref(n));
    af_publisher_init(&pub);
    af_publisher_publish(&pub, af_cache_snapshot(c));
    for (size_t i = 0; i < AF_ARRAY_SIZE(held); i++) {
        held[i] = af_publisher_acquire(&pub);
        af_publisher_publish(&pub, af_cache_snapshot(c));
        ck_assert_uint_le(pub.n_retired, AF_PUBLISHER_RETIRED);
    }
    ck_assert_uint_eq(pub.n_retired, AF_PUBLISHER_RETIRED);
    for (size_t i = 0; i < AF_ARRAY_SIZE(held); i++)
        af_snapshot_unref(held[i]);
    af_publisher_publish(&pub, af_cache_snapshot(c));
    ck_assert_uint_eq(pub.n_retired, 0);
    ck_assert_int_eq(atomic_load(&n->refcnt), 3);   /* mine, cache, current snapshot */
    af_publisher_destroy(&pub);
    af_cache_free(c);
    ck_assert_int_eq(atomic_load(&n->refcnt), 1);
    af_node_info_unref(n);
}
END_TEST

/* Random operations against a naive model. */
START_TEST(test_random_operations_match_model)
{
    enum { NN = 20, NP = 300 };
    struct {
        int node;   /* -1 unbound */
        int cpu;
        bool present;
    } model[NP];
    bool node_present[NN] = {0};
    struct af_cache *c = af_cache_new();
    unsigned seed = 12345;
    memset(model, 0, sizeof(model));
    for (int step = 0; step < 20000; step++) {
        seed = seed * 1103515245u + 12345u;
        unsigned r = (seed >> 8);
        int op = (int)(r % 10), i = (int)((r / 10) % NP), nidx = (int)((r / 3000) % NN);
        char pn[16], nn[16];
        snprintf(pn, sizeof(pn), "p%d", i);
        snprintf(nn, sizeof(nn), "n%d", nidx);
        if (op < 5) {
            int cpu = (int)(r % 97) + 1;
            bool bound = (r & 0x10000) != 0;
            af_cache_upsert_pod(c, mkpod("ns", pn, bound ? nn : NULL, cpu, 0, false));
            model[i].present = true;
            model[i].node = bound ? nidx : -1;
            model[i].cpu = cpu;
        } else if (op < 6) {
            af_cache_upsert_pod(c, mkpod("ns", pn, nn, 1, 0, true));
            model[i].present = false;
        } else if (op < 7) {
            af_cache_delete_pod(c, "ns", pn);
            model[i].present = false;
        } else if (op < 9) {
            af_cache_upsert_node(c, mknode(nn, 1000, 0));
            node_present[nidx] = true;
        } else {
            af_cache_delete_node(c, nn);
            node_present[nidx] = false;
        }
        if (step % 1000 == 999) {
            struct af_snapshot *s = af_cache_snapshot(c);
            check_snapshot_consistent(s);
            size_t np = 0;
            for (int k = 0; k < NP; k++)
                np += model[k].present;
            ck_assert_int_eq(s->n_pods, np);
            for (int k = 0; k < NN; k++) {
                snprintf(nn, sizeof(nn), "n%d", k);
                const struct af_node_view *v = af_snapshot_find_node(s, nn);
                ck_assert_int_eq(v != NULL, node_present[k]);
                if (!v)
                    continue;
                int64_t used = 0;
                for (int q = 0; q < NP; q++)
                    if (model[q].present && model[q].node == k)
                        used += model[q].cpu;
                ck_assert_int_eq(v->used.v[AF_RES_CPU], used);
            }
            af_snapshot_unref(s);
        }
    }
    af_cache_free(c);
}
END_TEST

/*
 * The batch lookup finds what the single one finds, hundreds at a time, also for names
 * whose 32-bit FNV-1a hashes are equal ("costarring" and "liquid", "declinate" and
 * "macallums"): the first entry with the hash is not taken on trust.
 */
START_TEST(test_batch_lookup_matches_single_lookups)
{
    static const char *const twins[] = {"liquid", "declinate", "macallums"};
    const char *names[700];
    const struct af_node_view *found[700];
    char buf[600][16];
    struct af_cache *c = af_cache_new();
    struct af_snapshot *s;
    size_t n = 0;

    for (int i = 0; i < 500; i++) {
        snprintf(buf[i], sizeof(buf[i]), "node-%d", i);
        af_cache_upsert_node(c, mknode(buf[i], 1000, 0));
    }
    for (size_t i = 0; i < AF_ARRAY_SIZE(twins); i++)
        af_cache_upsert_node(c, mknode(twins[i], 1000, 0));
    s = af_cache_snapshot(c);
    for (int i = 0; i < 600; i++) {
        if (i >= 500)
            snprintf(buf[i], sizeof(buf[i]), "absent-%d", i);
        names[n++] = buf[(i * 7) % 600];   /* known and absent names, mixed */
    }
    names[n++] = "costarring";   /* absent, with the hash of "liquid" */
    names[n++] = "liquid";
    names[n++] = "macallums";
    names[n++] = "declinate";
    names[n++] = NULL;
    af_snapshot_find_nodes(s, names, n, found);
    for (size_t i = 0; i < n; i++) {
        ck_assert_ptr_eq(found[i], names[i] ? af_snapshot_find_node(s, names[i]) : NULL);
        if (found[i])
            ck_assert_str_eq(found[i]->info->name, names[i]);
    }
    ck_assert_ptr_null(found[n - 5]);
    ck_assert_ptr_nonnull(found[n - 4]);
    ck_assert_ptr_nonnull(found[n - 3]);
    ck_assert_ptr_nonnull(found[n - 2]);
    af_snapshot_find_nodes(NULL, names, 3, found);
    ck_assert_ptr_null(found[0]);
    af_snapshot_unref(s);
    af_cache_free(c);
}
END_TEST

Suite *af_cache_suite(void);
Suite *af_cache_suite(void)
{
    Suite *s = suite_create("cache");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, test_usage_follows_add_modify_bind_delete);
    tcase_add_test(tc, test_reprice_replaces_records_snapshots_keep_theirs);
    tcase_add_test(tc, test_batch_lookup_matches_single_lookups);
    tcase_add_test(tc, test_node_arriving_after_its_pods_sees_usage);
    tcase_add_test(tc, test_snapshot_carries_the_newest_resource_version);
    tcase_add_test(tc, test_resync_sweeps_what_was_not_relisted);
    tcase_add_test(tc, test_two_pod_sets_delete_and_resync_apart);
    tcase_add_test(tc, test_snapshot_is_immutable_while_cache_changes);
    tcase_add_test(tc, test_publisher_refcounts);
    tcase_add_test(tc, test_publisher_retires_held_snapshots);
    tcase_add_test(tc, test_random_operations_match_model);
    tcase_add_test(tc, test_cached_pod_reads_as_decoded);
    tcase_add_test(tc, test_pods_share_what_they_repeat);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_cache_suite());
}
