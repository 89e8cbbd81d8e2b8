/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Rollouts at run time: the pure core (membership, units, shares and stages,
 * the choice), the cache's list of managed pods, and the server-side state
 * (src/rollouts/) driven through the transport-free service as
 * kube-scheduler would drive it: each arriving replica is filtered, bound to
 * a node of the side it was steered to, and published, in a loop. The
 * rollouts are built by hand into the default policy (the policy's
 * `rollouts:` parser is tested in check_rollout_config).
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/decide.h"
#include "accelfit/metrics.h"
#include "accelfit/service.h"
#include "accelfit/kube.h"
#include "accelfit/rollout.h"
#include "accelfit/rollout_state.h"
#include "accelfit/util.h"
#include "support/fake_api.h"
#include "support/support.h"

#define A10G (1u << AF_CLASS_NVIDIA_A10G)
#define L4 (1u << AF_CLASS_NVIDIA_L4)
#define INF2 (1u << AF_CLASS_INFERENTIA2)

/* ---- fixture: a cache, a publisher and a service over the default policy --------------------- */

static struct af_cache *cache;
static struct af_publisher pub;
static struct af_config_holder holder;
static struct af_service svc;
static struct af_config *cfg;            /* borrowed from `holder` */
static struct af_rollout rollouts[4];    /* cfg->policy->rollouts while a test runs */
static char node_names[8192];            /* JSON array of every node's name */

static void publish(void)
{
    af_publisher_publish(&pub, af_cache_snapshot(cache));
}

static void add_nodes(struct af_buf *b, const char *prefix, const char *itype, int n,
                      const char *res, int count)
{
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(af_buf_printf(b,
                                       "- apiVersion: v1\n  kind: Node\n  metadata:\n"
                                       "    name: %s-%02d\n    labels:\n"
                                       "      node.kubernetes.io/instance-type: %s\n"
                                       "  status:\n    allocatable:\n      cpu: \"190\"\n"
                                       "      memory: 700Gi\n      pods: \"110\"\n"
                                       "      %s: \"%d\"\n",
                                       prefix, i, itype, res, count),
                         0);
}

/* The cluster: `a10g` g5.48xlarge, `l4` g6.48xlarge nodes (8 GPUs unless `l4_gpus`), two
 * inf2.48xlarge; decoded from YAML like a cluster file, then published. */
static void cluster(int a10g, int l4, int l4_gpus)
{
    struct af_buf b = AF_BUF_INIT(0);
    struct af_error err;
    struct af_snapshot *s;
    size_t used = 0;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_buf_puts(&b, "apiVersion: v1\nkind: List\nitems:\n"), 0);
    add_nodes(&b, "a10g", "g5.48xlarge", a10g, "nvidia.com/gpu", 8);
    add_nodes(&b, "l4", "g6.48xlarge", l4, "nvidia.com/gpu", l4_gpus);
    add_nodes(&b, "inf2", "inf2.48xlarge", 2, "aws.amazon.com/neuron", 12);
    ck_assert_int_eq(
        af_codec_decode_cluster(cfg, "rollouts.yaml", b.buf, b.len, af_cache_upsert_item, cache, &err), 0);
    af_buf_release(&b);
    af_cache_set_synced(cache, true);
    publish();
    s = af_publisher_acquire(&pub);
    used = (size_t)snprintf(node_names, sizeof(node_names), "[");
    for (size_t i = 0; i < s->n_nodes; i++)
        used += (size_t)snprintf(node_names + used, sizeof(node_names) - used, "%s\"%s\"",
                                 i ? "," : "", s->nodes[i].info->name);
    snprintf(node_names + used, sizeof(node_names) - used, "]");
    af_snapshot_unref(s);
}

static void setup(void)
{
    struct af_error err;
    struct af_config *c = NULL;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&c, NULL, NULL, &err), 0);
    ck_assert_int_eq((int)c->policy->n_rollouts, 0);
    cfg = c;
    cfg->policy->rollouts = rollouts;
    cfg->policy->n_rollouts = 0;
    memset(rollouts, 0, sizeof(rollouts));
    af_config_holder_init(&holder, c);
    af_publisher_init(&pub);
    cache = af_cache_new();
    memset(&svc, 0, sizeof(svc));
    svc.config = &holder;
    svc.pub = &pub;
    svc.metrics = af_metrics_new();
    svc.rollouts = af_rollouts_new();
    svc.when_not_ready = AF_NOT_READY_REJECT;
}

static void rollout_release(struct af_rollout *r)
{
    af_free(r->name);
    af_free(r->ns);
    for (size_t i = 0; i < r->n_match_labels; i++) {
        af_free(r->match_labels[i].key);
        af_free(r->match_labels[i].value);
    }
    af_free(r->match_labels);
    af_free(r->owner_kind);
    af_free(r->owner_name);
    af_free(r->stages);
    if (r->variant) {
        for (size_t i = 0; i < r->variant->n_resources; i++) {
            af_free(r->variant->resources[i].key);
            af_free(r->variant->resources[i].value);
        }
        af_free(r->variant->resources);
        af_free(r->variant);
    }
    memset(r, 0, sizeof(*r));
}

static void teardown(void)
{
    af_rollouts_free(svc.rollouts);
    af_metrics_free(svc.metrics);
    af_publisher_destroy(&pub);
    af_cache_free(cache);
    for (size_t i = 0; i < AF_ARRAY_SIZE(rollouts); i++)
        rollout_release(&rollouts[i]);
    cfg->policy->rollouts = NULL;   /* not the policy's to free */
    cfg->policy->n_rollouts = 0;
    af_config_holder_destroy(&holder);
}

/* A placement or variant rollout of the pods labelled app=`app` in `ns`, by hand. */
static struct af_rollout *rollout(size_t i, const char *name, const char *ns, const char *app,
                                  uint32_t source, uint32_t target, double share)
{
    struct af_rollout *r = &rollouts[i];

    rollout_release(r);
    r->name = af_xstrdup(name);
    r->ns = af_xstrdup(ns);
    if (app) {
        r->match_labels = af_xcalloc(1, sizeof(*r->match_labels));
        r->match_labels[0].key = af_xstrdup("app");
        r->match_labels[0].value = af_xstrdup(app);
        r->n_match_labels = 1;
    }
    r->source = source;
    r->target = target;
    r->share = share;
    r->fallback = AF_FALLBACK_SOURCE;
    r->brake_not_ready_s = 600;
    r->brake_restarts = 3;
    r->brake_on_failed = true;
    if (cfg->policy->n_rollouts < i + 1)
        cfg->policy->n_rollouts = i + 1;
    return r;
}

/* ---- pods ------------------------------------------------------------------------------------ */

struct podspec {
    const char *ns, *name;
    const char *owner_kind, *owner_name;   /* controller; NULL: none */
    const char *labels;                    /* more labels, a JSON fragment ("\"app\":\"web\"") */
    bool unmanaged;                        /* without accelfit.io/managed: "true" */
    const char *node;                      /* NULL: unbound */
    const char *res;                       /* accelerator resource; NULL: nvidia.com/gpu */
    int count;                             /* of it; 0: 1 */
    const char *side;                      /* accelfit.io/rollout-side annotation */
    const char *claim;                     /* accelfit.io/rollout-claim annotation (with side) */
    const char *phase;                     /* NULL: Running when bound, else Pending */
    bool not_ready;
    int restarts;
    double started;                        /* status.startTime; 0: none */
};

static char *pod_json(const struct podspec *p)
{
    char owner[300] = "", start[80] = "", labels[600], anns[200] = "";
    const char *phase = p->phase ? p->phase : p->node ? "Running" : "Pending";

    if (p->owner_kind)
        snprintf(owner, sizeof(owner),
                 ",\"ownerReferences\":[{\"apiVersion\":\"apps/v1\",\"kind\":\"%s\",\"name\":"
                 "\"%s\",\"uid\":\"o-%s\",\"controller\":true}]",
                 p->owner_kind, p->owner_name, p->owner_name);
    snprintf(labels, sizeof(labels), "{%s%s%s}",
             p->unmanaged ? "" : "\"accelfit.io/managed\":\"true\"",
             p->labels && !p->unmanaged ? "," : "", p->labels ? p->labels : "");
    if (p->side)
        snprintf(anns, sizeof(anns),
                 ",\"annotations\":{\"accelfit.io/rollout-side\":\"%s\"%s%s%s}", p->side,
                 p->claim ? ",\"accelfit.io/rollout-claim\":\"" : "", p->claim ? p->claim : "",
                 p->claim ? "\"" : "");
    if (p->started > 0) {
        time_t t = (time_t)p->started;
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(start, sizeof(start), ",\"startTime\":\"%Y-%m-%dT%H:%M:%SZ\"", &tm);
    }
    return af_xasprintf(
        "{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"%s\","
        "\"namespace\":\"%s\",\"uid\":\"u-%s\",\"labels\":%s%s%s},\"spec\":{%s%s%s"
        "\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{\"cpu\":\"1\","
        "\"memory\":\"1Gi\",\"%s\":\"%d\"},\"limits\":{\"%s\":\"%d\"}}}]},\"status\":{"
        "\"phase\":\"%s\"%s,\"conditions\":[{\"type\":\"Ready\",\"status\":\"%s\"}],"
        "\"containerStatuses\":[{\"name\":\"c\",\"restartCount\":%d}]}}",
        p->name, p->ns ? p->ns : "ml", p->name, labels, owner, anns,
        p->node ? "\"nodeName\":\"" : "",
        p->node ? p->node : "", p->node ? "\"," : "", p->res ? p->res : "nvidia.com/gpu",
        p->count ? p->count : 1, p->res ? p->res : "nvidia.com/gpu", p->count ? p->count : 1, phase,
        start, p->not_ready || !p->node ? "False" : "True", p->restarts);
}

static struct af_pod_info *pod_info(const struct podspec *p)
{
    char *json = pod_json(p);
    struct af_pod_info *pod = NULL;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_codec_decode_pod(json, strlen(json), &pod, &err) == 0, "%s: %s", json,
                  err.text);
    af_free(json);
    /* The codec reads the phase after the rollout fields, so it never sets `failed`
     * (src/codec/objects.c, pod_rollout_fields): set it as it should be. */
    if (p->phase && !strcmp(p->phase, "Failed"))
        pod->failed = true;
    return pod;
}

static void bind_pod(struct podspec p, const char *node)
{
    p.node = node;
    af_cache_upsert_pod(cache, pod_info(&p));
}

/* ---- calling the service --------------------------------------------------------------------- */

static json_t *call(enum af_verb verb, const struct podspec *p, int want)
{
    char *pod = pod_json(p);
    char *body = af_xasprintf("{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":%s}", pod, node_names);
    struct af_buf out = AF_BUF_INIT(1u << 22);
    json_error_t e;
    json_t *j;

    ck_assert_int_eq(af_service_handle(&svc, verb, body, strlen(body), &out), want);
    j = json_loadb(out.buf, out.len, 0, &e);
    ck_assert_msg(j != NULL, "not JSON: %s", out.buf);
    af_buf_release(&out);
    af_free(body);
    af_free(pod);
    return j;
}

static enum af_rollout_side node_side(const struct af_rollout *r, const char *node)
{
    struct af_snapshot *s = af_publisher_acquire(&pub);
    const struct af_node_view *v = af_snapshot_find_node(s, node);
    enum af_rollout_side side = AF_SIDE_NONE;

    ck_assert_ptr_nonnull(v);
    if (r->target & (1u << v->info->cls))
        side = AF_SIDE_TARGET;
    else if (r->source & (1u << v->info->cls))
        side = AF_SIDE_SOURCE;
    af_snapshot_unref(s);
    return side;
}

static bool room_for(const char *node, const struct podspec *p)
{
    struct af_snapshot *s = af_publisher_acquire(&pub);
    const struct af_node_view *v = af_snapshot_find_node(s, node);
    struct af_pod_info *pod = pod_info(p);
    bool ok = v && af_res_fits(&pod->requests, &v->info->allocatable, &v->used, NULL);

    af_pod_info_unref(pod);
    af_snapshot_unref(s);
    return ok;
}

/*
 * Filters the pod as kube-scheduler would, checks that every node that passes is on one
 * side of `r` and that the other side's nodes are refused as FailedAndUnresolvable with
 * the rollout's reason, then binds the pod to the first passing node with room (when
 * `bind`) and publishes (when `pub_after`). Returns the side, NONE when nothing passed.
 */
static enum af_rollout_side place(const struct af_rollout *r, const struct podspec *p, bool bind,
                                  bool pub_after)
{
    json_t *res = call(AF_VERB_FILTER, p, 200);
    json_t *names = json_object_get(res, "NodeNames");
    json_t *unres = json_object_get(res, "FailedAndUnresolvableNodes");
    enum af_rollout_side side = AF_SIDE_NONE;
    const char *chosen = NULL, *key;
    json_t *v;
    size_t i;

    json_array_foreach(names, i, v) {
        enum af_rollout_side s = node_side(r, json_string_value(v));
        ck_assert_int_ne(s, AF_SIDE_NONE);
        if (side == AF_SIDE_NONE)
            side = s;
        ck_assert_msg(s == side, "%s passes on both sides", p->name);
        if (!chosen && room_for(json_string_value(v), p))
            chosen = json_string_value(v);
    }
    json_object_foreach(unres, key, v) {
        if (side != AF_SIDE_NONE && node_side(r, key) != AF_SIDE_NONE) {
            ck_assert_int_ne(node_side(r, key), side);
            ck_assert_msg(strstr(json_string_value(v), "steers unit") != NULL, "%s: %s", key,
                          json_string_value(v));
        }
    }
    if (bind && chosen)
        bind_pod(*p, chosen);
    json_decref(res);
    if (pub_after)
        publish();
    return chosen || !bind ? side : AF_SIDE_NONE;
}

static int pods_on(const struct af_rollout *r, enum af_rollout_side side)
{
    struct af_snapshot *s = af_publisher_acquire(&pub);
    int n = 0;

    for (size_t i = 0; i < s->n_managed; i++)
        if (s->managed[i]->node_name && node_side(r, s->managed[i]->node_name) == side)
            n++;
    af_snapshot_unref(s);
    return n;
}

/* ---- the pure core --------------------------------------------------------------------------- */

START_TEST(test_choose_sends_one_of_four_at_a_quarter)
{
    struct af_rollout_count c = {0, 0, 0};
    int target = 0;

    for (int i = 0; i < 4; i++) {
        if (af_rollout_choose(0.25, &c) == AF_SIDE_TARGET) {
            c.target++;
            target++;
        } else {
            c.source++;
        }
    }
    ck_assert_int_eq(target, 1);
    c = (struct af_rollout_count){0, 0, 0};
    ck_assert_int_eq(af_rollout_choose(0.0, &c), AF_SIDE_SOURCE);
    ck_assert_int_eq(af_rollout_choose(1.0, &c), AF_SIDE_TARGET);
    c.target = 5;
    ck_assert_int_eq(af_rollout_choose(1.0, &c), AF_SIDE_TARGET);
    ck_assert_int_eq(af_rollout_choose(NAN, &c), AF_SIDE_SOURCE);
}
END_TEST

START_TEST(test_match_by_namespace_labels_and_owner)
{
    struct af_rollout *r = rollout(0, "web", "ml", "web", A10G, L4, 0.5);
    struct podspec p = {.ns = "ml", .name = "web-5d4f8-abcde", .owner_kind = "ReplicaSet",
                        .owner_name = "web-5d4f8", .labels = "\"app\":\"web\""};
    struct af_pod_info *pod;

    r->owner_kind = af_xstrdup("Deployment");
    r->owner_name = af_xstrdup("web");
    pod = pod_info(&p);
    ck_assert_int_eq(af_rollout_match(cfg->policy, pod), 0);
    af_pod_info_unref(pod);
    /* the ReplicaSet of Deployment web-api is not web's */
    p.owner_name = "web-api-5d4f8";
    pod = pod_info(&p);
    ck_assert_int_eq(af_rollout_match(cfg->policy, pod), -1);
    af_pod_info_unref(pod);
    /* with the pod-template-hash label the name must be exactly <deployment>-<hash> */
    p.owner_name = "web-5d4f8";
    p.labels = "\"app\":\"web\",\"pod-template-hash\":\"77aa\"";
    pod = pod_info(&p);
    ck_assert_int_eq(af_rollout_match(cfg->policy, pod), -1);
    af_pod_info_unref(pod);
    p.labels = "\"app\":\"web\",\"pod-template-hash\":\"5d4f8\"";
    pod = pod_info(&p);
    ck_assert_int_eq(af_rollout_match(cfg->policy, pod), 0);
    af_pod_info_unref(pod);
    /* another namespace, another label value, no managed label */
    p.ns = "other";
    pod = pod_info(&p);
    ck_assert_int_eq(af_rollout_match(cfg->policy, pod), -1);
    af_pod_info_unref(pod);
    p.ns = "ml";
    p.labels = "\"app\":\"webx\"";
    pod = pod_info(&p);
    ck_assert_int_eq(af_rollout_match(cfg->policy, pod), -1);
    af_pod_info_unref(pod);
    p.labels = "\"app\":\"web\"";
    p.unmanaged = true;
    pod = pod_info(&p);
    ck_assert_int_eq(af_rollout_match(cfg->policy, pod), -1);
    af_pod_info_unref(pod);
}
END_TEST

START_TEST(test_unit_is_job_pod_group_or_pod)
{
    struct podspec p = {.name = "train-a-0-xyz", .owner_kind = "Job", .owner_name = "train-a"};
    struct af_pod_info *pod = pod_info(&p);
    char unit[160];

    af_rollout_unit(pod, unit, sizeof(unit));
    ck_assert_str_eq(unit, "Job/train-a");
    af_pod_info_unref(pod);
    p = (struct podspec){.name = "w-1", .labels = "\"scheduling.x-k8s.io/pod-group\":\"g1\""};
    pod = pod_info(&p);
    af_rollout_unit(pod, unit, sizeof(unit));
    ck_assert_str_eq(unit, "PodGroup/g1");
    af_pod_info_unref(pod);
    p = (struct podspec){.name = "web-1", .owner_kind = "ReplicaSet", .owner_name = "web-5d"};
    pod = pod_info(&p);
    af_rollout_unit(pod, unit, sizeof(unit));
    ck_assert_str_eq(unit, "Pod/web-1");
    af_pod_info_unref(pod);
    /* at admission a Deployment's replica has only generateName: named as it will be known,
     * and by its owner, never "Pod/" */
    pod = af_pod_info_new();
    pod->name = af_xstrdup("");
    pod->generate_name = af_xstrdup("web-5d-");
    pod->owner_kind = af_xstrdup("ReplicaSet");
    pod->owner_name = af_xstrdup("web-5d");
    af_rollout_unit(pod, unit, sizeof(unit));
    ck_assert_str_eq(unit, "Pod/web-5d-* of ReplicaSet/web-5d");
    af_free(pod->generate_name);
    pod->generate_name = NULL;
    af_rollout_unit(pod, unit, sizeof(unit));
    ck_assert_str_eq(unit, "a new Pod of ReplicaSet/web-5d");
    af_pod_info_unref(pod);
    /* a name longer than the room is cut where snprintf cuts it, at every size */
    pod = af_pod_info_new();
    pod->name = af_xmalloc(254);
    memset(pod->name, 'n', 253);
    pod->name[253] = '\0';
    for (size_t n = 1; n <= sizeof(unit); n++) {
        char want[sizeof(unit)];
        memset(unit, '#', sizeof(unit));
        af_rollout_unit(pod, unit, n);
        snprintf(want, n, "Pod/%s", pod->name);
        ck_assert_str_eq(unit, want);
    }
    af_pod_info_unref(pod);
}
END_TEST

START_TEST(test_stages_advance_with_time)
{
    const double t0 = 1.9e9;
    struct af_rollout *r = rollout(0, "staged", "ml", "web", A10G, L4, 0);
    struct podspec p = {.name = "web-1", .labels = "\"app\":\"web\""};
    struct af_pod_info *pod = pod_info(&p);
    struct af_rollout_decision d;
    struct af_rollouts *rs = af_rollouts_new();
    struct af_snapshot *snap;
    int stage;

    r->stages = af_xcalloc(3, sizeof(*r->stages));
    r->n_stages = 3;
    r->stages[0] = (struct af_rollout_stage){0.10, 0, 3600};        /* 1h at least */
    r->stages[1] = (struct af_rollout_stage){0.25, 0, 7200};        /* then 2h at least */
    r->stages[2] = (struct af_rollout_stage){0.50, t0 + 36000, 0};  /* and not before t0+10h */
    ck_assert_double_eq(af_rollout_share(r, t0, t0, &stage), 0.10);
    ck_assert_int_eq(stage, 0);
    ck_assert_double_eq(af_rollout_share(r, t0, t0 + 3599, &stage), 0.10);
    ck_assert_double_eq(af_rollout_share(r, t0, t0 + 3600, &stage), 0.25);
    ck_assert_int_eq(stage, 1);
    ck_assert_double_eq(af_rollout_share(r, t0, t0 + 3 * 3600, &stage), 0.25);   /* start not yet */
    ck_assert_double_eq(af_rollout_share(r, t0, t0 + 36000, &stage), 0.50);
    ck_assert_int_eq(stage, 2);
    ck_assert_double_eq(af_rollout_stage_start(r, t0, 2), t0 + 36000);
    /* a first stage with a start time: nothing goes to the target before it */
    r->stages[0].start_unix = t0 + 60;
    ck_assert_double_eq(af_rollout_share(r, t0, t0 + 59, &stage), 0);
    ck_assert_int_eq(stage, -1);
    ck_assert_double_eq(af_rollout_share(r, t0, t0 + 60, &stage), 0.10);
    r->stages[0].start_unix = 0;

    /* The state: the rollout begins when first seen; the share in force follows `now`. */
    cluster(2, 2, 8);
    snap = af_publisher_acquire(&pub);
    af_rollouts_decide_for(rs, cfg, snap, pod, NULL, t0, AF_ROLLOUTS_PEEK, &d);
    ck_assert_int_eq(d.rollout, 0);
    ck_assert_double_eq(d.share, 0.10);
    af_rollouts_decide_for(rs, cfg, snap, pod, NULL, t0 + 2 * 3600, AF_ROLLOUTS_PEEK, &d);
    ck_assert_double_eq(d.share, 0.25);
    ck_assert(strstr(d.reason, "stage 2") != NULL);
    af_rollouts_decide_for(rs, cfg, snap, pod, NULL, t0 + 11 * 3600, AF_ROLLOUTS_PEEK, &d);
    ck_assert_double_eq(d.share, 0.50);
    af_snapshot_unref(snap);
    af_pod_info_unref(pod);
    af_rollouts_free(rs);
}
END_TEST

START_TEST(test_plan_restriction_refuses_other_classes_for_good)
{
    struct podspec p = {.name = "web-1"};
    struct af_pod_info *pod;
    struct af_plan *plan = af_xmalloc(sizeof(*plan));
    struct af_node_decision dec[3], pri[3];
    struct af_filter_summary sum;
    struct af_snapshot *snap;
    struct af_node_view views[3];
    const char *names[3] = {"a10g-00", "l4-00", "inf2-00"};

    cluster(1, 1, 8);
    snap = af_publisher_acquire(&pub);
    for (int i = 0; i < 3; i++)
        views[i] = *af_snapshot_find_node(snap, names[i]);
    pod = pod_info(&p);
    af_plan_pod(cfg->policy, cfg->catalog, pod, plan);
    ck_assert_int_ge(af_plan_node_tier(plan, views[0].info), 0);
    af_plan_restrict(plan, L4, "rollout r steers unit Pod/web-1 to its target side (nvidia-l4)");
    ck_assert_int_eq(af_plan_node_tier(plan, views[0].info), -1);
    ck_assert_int_ge(af_plan_node_tier(plan, views[1].info), 0);
    af_filter(cfg->policy, plan, pod, views, names, 3, dec, &sum);
    ck_assert_int_eq(dec[0].verdict, AF_VERDICT_UNRESOLVABLE);
    ck_assert_str_eq(dec[0].reason, "rollout r steers unit Pod/web-1 to its target side "
                                    "(nvidia-l4); this node is nvidia-a10g");
    ck_assert_int_eq(dec[1].verdict, AF_VERDICT_PASS);
    /* what the requests rule out keeps its own reason */
    ck_assert_int_eq(dec[2].verdict, AF_VERDICT_UNRESOLVABLE);
    ck_assert(strstr(dec[2].reason, "has none"));
    af_prioritize(cfg->policy, plan, pod, views, names, 3, pri);
    ck_assert_int_eq(pri[0].score, 0);
    ck_assert_int_gt(pri[1].score, 0);
    /* a second restriction narrows: nothing is left */
    af_plan_restrict(plan, A10G, "second");
    ck_assert_int_eq(af_plan_node_tier(plan, views[1].info), -1);
    af_pod_info_unref(pod);
    af_snapshot_unref(snap);
    af_free(plan);
}
END_TEST

START_TEST(test_each_restriction_keeps_its_own_reason)
{
    static const char rollout[] = "rollout r steers unit Pod/web-1 to its target side (nvidia-l4)";
    static const char tenant[] = "tenant team-a may use only nvidia-a10g, nvidia-l4";
    struct podspec p = {.name = "web-1"};
    struct af_pod_info *pod;
    struct af_plan *plan = af_xmalloc(sizeof(*plan));
    struct af_node_decision dec[3];
    struct af_filter_summary sum;
    struct af_snapshot *snap;
    struct af_node_view views[3];
    const char *names[3] = {"a10g-00", "l4-00", "inf2-00"};

    cluster(1, 1, 8);
    snap = af_publisher_acquire(&pub);
    for (int i = 0; i < 3; i++)
        views[i] = *af_snapshot_find_node(snap, names[i]);
    pod = pod_info(&p);

    /* A rollout's side (L4), then a tenant's classes (A10G only): the A10G node is outside
     * the rollout's side and the L4 node outside the tenant's classes; each refusal names
     * the restriction that excludes the node, not the last one applied. */
    af_plan_pod(cfg->policy, cfg->catalog, pod, plan);
    af_plan_restrict(plan, L4, rollout);
    af_plan_restrict(plan, A10G, "tenant team-a may use only nvidia-a10g");
    af_filter(cfg->policy, plan, pod, views, names, 3, dec, &sum);
    ck_assert_int_eq(dec[0].verdict, AF_VERDICT_UNRESOLVABLE);
    ck_assert_str_eq(dec[0].reason, "rollout r steers unit Pod/web-1 to its target side "
                                    "(nvidia-l4); this node is nvidia-a10g");
    ck_assert_int_eq(dec[1].verdict, AF_VERDICT_UNRESOLVABLE);
    ck_assert_str_eq(dec[1].reason,
                     "tenant team-a may use only nvidia-a10g; this node is nvidia-l4");
    ck_assert_str_eq(af_plan_restrict_why(plan, AF_CLASS_UNKNOWN), rollout);

    /* The tenant first (budget.c runs before or after the rollout's steer alike): a node
     * the tenant allows and the rollout does not is the rollout's refusal. */
    af_plan_pod(cfg->policy, cfg->catalog, pod, plan);
    af_plan_restrict(plan, A10G | L4, tenant);
    af_plan_restrict(plan, L4, rollout);
    af_filter(cfg->policy, plan, pod, views, names, 3, dec, &sum);
    ck_assert_int_eq(dec[0].verdict, AF_VERDICT_UNRESOLVABLE);
    ck_assert_str_eq(dec[0].reason, "rollout r steers unit Pod/web-1 to its target side "
                                    "(nvidia-l4); this node is nvidia-a10g");
    ck_assert_int_eq(dec[1].verdict, AF_VERDICT_PASS);
    ck_assert_ptr_null(af_plan_restrict_why(plan, AF_CLASS_NVIDIA_L4));
    ck_assert_str_eq(af_plan_restrict_why(plan, AF_CLASS_NVIDIA_T4), tenant);

    af_pod_info_unref(pod);
    af_snapshot_unref(snap);
    af_free(plan);
}
END_TEST

/* ---- the cache lists managed pods, Failed ones too ------------------------------------------- */

START_TEST(test_cache_keeps_managed_pods_terminal_included)
{
    struct podspec p = {.name = "m1", .labels = "\"app\":\"web\""};
    struct podspec u = {.name = "u1", .unmanaged = true};
    struct af_snapshot *s;

    cluster(1, 1, 8);
    bind_pod(p, "l4-00");
    bind_pod(u, "l4-00");
    ck_assert_uint_eq(af_cache_managed_count(cache), 1);
    p.phase = "Failed";
    bind_pod(p, "l4-00");   /* terminal: out of usage and of pods, still managed */
    s = af_cache_snapshot(cache);
    ck_assert_uint_eq(s->n_managed, 1);
    ck_assert(s->managed[0]->failed && s->managed[0]->terminal);
    ck_assert_ptr_null(af_snapshot_find_pod(s, "ml", "m1"));
    ck_assert_int_eq(af_snapshot_find_node(s, "l4-00")->npods, 1);
    af_snapshot_unref(s);
    /* a label removed: no longer managed */
    p = (struct podspec){.name = "m2", .labels = "\"app\":\"web\""};
    bind_pod(p, "l4-00");
    ck_assert_uint_eq(af_cache_managed_count(cache), 2);
    p.unmanaged = true;
    bind_pod(p, "l4-00");
    ck_assert_uint_eq(af_cache_managed_count(cache), 1);
    /* deleted */
    af_cache_delete_pod(cache, "ml", "m1");
    ck_assert_uint_eq(af_cache_managed_count(cache), 0);
    /* a relist drops what it did not list */
    p = (struct podspec){.name = "m3", .labels = "\"app\":\"web\"", .phase = "Succeeded"};
    bind_pod(p, "l4-00");
    ck_assert_uint_eq(af_cache_managed_count(cache), 1);
    af_cache_begin_resync(cache, AF_KIND_POD);
    af_cache_end_resync(cache, AF_KIND_POD);
    ck_assert_uint_eq(af_cache_managed_count(cache), 0);
}
END_TEST

/* ---- steering through filter ----------------------------------------------------------------- */

START_TEST(test_quarter_placement_rollout_over_100_replicas)
{
    struct af_rollout *r = rollout(0, "web-a10g-to-l4", "ml", "web", A10G, L4, 0.25);
    int target = 0, worst = 0;

    r->owner_kind = af_xstrdup("Deployment");
    r->owner_name = af_xstrdup("web");
    cluster(20, 8, 8);
    for (int i = 0; i < 100; i++) {
        char name[64];
        struct podspec p = {.name = name, .owner_kind = "ReplicaSet", .owner_name = "web-5d4f8",
                            .labels = "\"app\":\"web\",\"pod-template-hash\":\"5d4f8\""};
        enum af_rollout_side side, again;
        json_t *pr;
        size_t k;
        json_t *v;

        snprintf(name, sizeof(name), "web-5d4f8-%05d", i);
        /* filter twice (a retry) and prioritize: the unit keeps its side */
        side = place(r, &p, false, false);
        again = place(r, &p, false, false);
        ck_assert_int_eq(side, again);
        pr = call(AF_VERB_PRIORITIZE, &p, 200);
        json_array_foreach(pr, k, v) {
            const char *host = json_string_value(json_object_get(v, "Host"));
            if (node_side(r, host) != side)
                ck_assert_int_eq(json_integer_value(json_object_get(v, "Score")), 0);
        }
        json_decref(pr);
        ck_assert_int_eq(place(r, &p, true, true), side);
        target += side == AF_SIDE_TARGET;
        if (abs(4 * target - (i + 1)) > worst)
            worst = abs(4 * target - (i + 1));
    }
    ck_assert_int_eq(pods_on(r, AF_SIDE_TARGET), target);
    ck_assert_int_ge(target, 23);
    ck_assert_int_le(target, 27);
    ck_assert_int_le(worst, 4);   /* within one unit of the share all along */
    printf("rollouts: 25%% placement rollout, 100 replicas: %d on the target\n", target);
}
END_TEST

START_TEST(test_job_pods_get_one_side)
{
    struct af_rollout *r = rollout(0, "train", "ml", "train", A10G, L4, 0.5);
    enum af_rollout_side side[2] = {AF_SIDE_NONE, AF_SIDE_NONE};
    const char *jobs[2] = {"train-a", "train-b"};
    struct af_rollout_status st;
    struct af_snapshot *snap;

    cluster(4, 4, 8);
    for (int j = 0; j < 2; j++) {
        for (int i = 0; i < 4; i++) {
            char name[64];
            struct podspec p = {.name = name, .owner_kind = "Job", .owner_name = jobs[j],
                                .labels = "\"app\":\"train\""};
            enum af_rollout_side s;
            snprintf(name, sizeof(name), "%s-%d-x", jobs[j], i);
            /* pods 0 and 1 are decided before either shows in the cache; 2 and 3 after */
            s = place(r, &p, true, i >= 1);
            if (i == 0)
                side[j] = s;
            ck_assert_int_eq(s, side[j]);
        }
    }
    /* two units, not eight pods: one on each side */
    ck_assert_int_ne(side[0], side[1]);
    snap = af_publisher_acquire(&pub);
    af_rollouts_status(svc.rollouts, cfg, snap, af_wall_time(), 0, &st);
    ck_assert_int_eq(st.target, 1);
    ck_assert_int_eq(st.source, 1);
    ck_assert_int_eq(st.pending, 0);
    af_snapshot_unref(snap);
}
END_TEST

START_TEST(test_target_full_falls_back_then_recovers)
{
    struct af_rollout *r = rollout(0, "web", "ml", "web", A10G, L4, 0.5);
    struct af_rollout_status st;
    struct af_snapshot *snap;
    struct af_node_info *extra;
    struct af_error err;
    int target = 0, n = 0, fell = 0;

    cluster(4, 1, 2);   /* the target: one L4 node with 2 GPUs */
    for (; n < 10; n++) {
        char name[32];
        struct podspec p = {.name = name, .labels = "\"app\":\"web\""};
        snprintf(name, sizeof(name), "web-%d", n);
        target += place(r, &p, true, true) == AF_SIDE_TARGET;
    }
    ck_assert_int_eq(target, 2);   /* all the room there is */
    snap = af_publisher_acquire(&pub);
    af_rollouts_status(svc.rollouts, cfg, snap, af_wall_time(), 0, &st);
    fell = (int)st.fallbacks;
    ck_assert_int_ge(fell, 3);
    ck_assert_int_eq(st.target, 2);
    ck_assert_int_eq(st.source, 8);
    af_snapshot_unref(snap);
    {
        /* the reason says so, in /explain */
        struct podspec p = {.name = "web-probe", .labels = "\"app\":\"web\""};
        json_t *e = call(AF_VERB_EXPLAIN, &p, 200);
        json_t *ro = json_object_get(e, "rollout");
        ck_assert_str_eq(json_string_value(json_object_get(ro, "side")), "source");
        ck_assert(json_is_true(json_object_get(ro, "fallback")));
        ck_assert(strstr(json_string_value(json_object_get(ro, "reason")), "fallback") != NULL);
        json_decref(e);
    }

    /* Room returns: a second L4 node with 8 GPUs. The share recovers. */
    memset(&err, 0, sizeof(err));
    {
        const char *node = "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":"
                           "\"l4-99\",\"labels\":{\"node.kubernetes.io/instance-type\":"
                           "\"g6.48xlarge\"}},\"status\":{\"allocatable\":{\"cpu\":\"190\","
                           "\"memory\":\"700Gi\",\"pods\":\"110\",\"nvidia.com/gpu\":\"32\"}}}";
        ck_assert_int_eq(af_codec_decode_node(cfg, node, strlen(node), &extra, &err), 0);
        af_cache_upsert_node(cache, extra);
        publish();
        snprintf(node_names + strlen(node_names) - 1, 16, ",\"l4-99\"]");
    }
    for (int k = 0; k < 6; k++, n++) {
        char name[32];
        struct podspec p = {.name = name, .labels = "\"app\":\"web\""};
        snprintf(name, sizeof(name), "web-%d", n);
        ck_assert_int_eq(place(r, &p, true, true), AF_SIDE_TARGET);   /* catching up */
        target++;
    }
    ck_assert_int_eq(target, 8);
    ck_assert_int_eq(n, 16);   /* 8 of 16 units: the share is back */
    for (int k = 0; k < 8; k++, n++) {
        char name[32];
        struct podspec p = {.name = name, .labels = "\"app\":\"web\""};
        snprintf(name, sizeof(name), "web-%d", n);
        target += place(r, &p, true, true) == AF_SIDE_TARGET;
        ck_assert_int_le(abs(2 * target - (n + 1)), 2);
    }
    snap = af_publisher_acquire(&pub);
    af_rollouts_status(svc.rollouts, cfg, snap, af_wall_time(), 0, &st);
    ck_assert_int_eq((int)st.fallbacks, fell);   /* none since */
    af_snapshot_unref(snap);
}
END_TEST

START_TEST(test_fallback_wait_keeps_the_target)
{
    struct af_rollout *r = rollout(0, "web", "ml", "web", A10G, L4, 1.0);
    struct podspec p = {.name = "web-0", .labels = "\"app\":\"web\""};
    struct podspec q = {.name = "web-1", .labels = "\"app\":\"web\""};
    json_t *res;

    r->fallback = AF_FALLBACK_WAIT;
    cluster(2, 1, 1);
    ck_assert_int_eq(place(r, &p, true, true), AF_SIDE_TARGET);
    /* the target is full: the unit waits there; every A10G node is refused for good */
    res = call(AF_VERB_FILTER, &q, 200);
    ck_assert(json_object_get(json_object_get(res, "FailedAndUnresolvableNodes"), "a10g-00"));
    ck_assert(strstr(json_string_value(json_object_get(
                         json_object_get(res, "FailedAndUnresolvableNodes"), "a10g-00")),
                     "to its target side") != NULL);
    json_decref(res);
    res = call(AF_VERB_EXPLAIN, &q, 200);
    ck_assert(strstr(json_string_value(json_object_get(json_object_get(res, "rollout"), "reason")),
                     "waits for room") != NULL);
    json_decref(res);
}
END_TEST

/* ---- the brake ------------------------------------------------------------------------------- */

static void decide_at(struct af_rollouts *rs, const char *name, double now,
                      struct af_rollout_decision *d)
{
    struct podspec p = {.name = name, .labels = "\"app\":\"web\""};
    struct af_pod_info *pod = pod_info(&p);
    struct af_snapshot *snap = af_publisher_acquire(&pub);

    af_rollouts_decide(rs, cfg, snap, pod, now, d);
    af_snapshot_unref(snap);
    af_pod_info_unref(pod);
}

START_TEST(test_brake_halts_and_resumes_on_ack)
{
    /* in the past: /metrics and the ack evaluate the brake at the wall clock */
    const double t0 = floor(af_wall_time()) - 100000;
    struct af_rollout_decision d;
    struct af_rollout_status st;
    struct podspec bad = {.name = "web-t1", .labels = "\"app\":\"web\"", .not_ready = true,
                          .started = t0};
    struct af_snapshot *snap;
    struct af_buf out = AF_BUF_INIT(1u << 20);
    json_t *j;
    char name[32];
    int seq = 0;

    rollout(0, "web", "ml", "web", A10G, L4, 1.0);
    cluster(4, 4, 8);
    bind_pod(bad, "l4-00");
    publish();
    snprintf(name, sizeof(name), "new-%d", seq++);
    decide_at(svc.rollouts, name, t0 + 100, &d);
    ck_assert(!d.halted);
    ck_assert_int_eq(d.side, AF_SIDE_TARGET);

    /* NotReady 700 s after it started (brake: 600 s): halted, new units take the source */
    snprintf(name, sizeof(name), "new-%d", seq++);
    decide_at(svc.rollouts, name, t0 + 700, &d);
    ck_assert(d.halted);
    ck_assert_int_eq(d.side, AF_SIDE_SOURCE);
    ck_assert_msg(strstr(d.reason, "halted") && strstr(d.reason, "not Ready"), "%s", d.reason);
    /* /rollouts and /metrics say why */
    snap = af_publisher_acquire(&pub);
    ck_assert_int_eq(af_rollouts_render(svc.rollouts, cfg, snap, t0 + 701, &out), 0);
    af_snapshot_unref(snap);
    j = json_loads(out.buf, 0, NULL);
    ck_assert_ptr_nonnull(j);
    {
        json_t *r0 = json_array_get(json_object_get(j, "rollouts"), 0);
        ck_assert(json_is_true(json_object_get(r0, "halted")));
        ck_assert(strstr(json_string_value(json_object_get(r0, "halt_reason")), "web-t1"));
    }
    json_decref(j);
    af_buf_reset(&out);
    ck_assert_int_eq(af_service_render_metrics(&svc, &out), 0);
    ck_assert_msg(strstr(out.buf, "accelfit_rollout_halted{rollout=\"web\"} 1\n"), "%s", out.buf);
    af_buf_reset(&out);

    /* acknowledged: the pod is forgiven, new units go to the target again */
    ck_assert_int_eq(af_service_rollout_ack(&svc, "web", &out), 200);
    j = json_loads(out.buf, 0, NULL);
    ck_assert(json_is_true(json_object_get(j, "was_halted")));
    json_decref(j);
    af_buf_reset(&out);
    ck_assert_int_eq(af_service_rollout_ack(&svc, "nope", &out), 404);
    af_buf_reset(&out);
    snprintf(name, sizeof(name), "new-%d", seq++);
    decide_at(svc.rollouts, name, t0 + 800, &d);
    ck_assert(!d.halted);
    ck_assert_int_eq(d.side, AF_SIDE_TARGET);

    /* restarts: a target pod that restarted 3 times */
    bind_pod((struct podspec){.name = "web-t2", .labels = "\"app\":\"web\"", .restarts = 3,
                              .started = t0},
             "l4-01");
    publish();
    snprintf(name, sizeof(name), "new-%d", seq++);
    decide_at(svc.rollouts, name, t0 + 900, &d);
    ck_assert(d.halted);
    ck_assert_msg(strstr(d.reason, "restarted 3 times"), "%s", d.reason);
    ck_assert_int_eq(af_rollouts_ack(svc.rollouts, "web"), 0);
    ck_assert_int_eq(af_rollouts_ack(svc.rollouts, "nope"), AF_ENOENT);
    snprintf(name, sizeof(name), "new-%d", seq++);
    decide_at(svc.rollouts, name, t0 + 901, &d);
    ck_assert(!d.halted);
    /* ... and then 3 more: halted again */
    bind_pod((struct podspec){.name = "web-t2", .labels = "\"app\":\"web\"", .restarts = 6,
                              .started = t0},
             "l4-01");
    publish();
    snprintf(name, sizeof(name), "new-%d", seq++);
    decide_at(svc.rollouts, name, t0 + 902, &d);
    ck_assert(d.halted);
    ck_assert_msg(strstr(d.reason, "more times"), "%s", d.reason);
    ck_assert_int_eq(af_rollouts_ack(svc.rollouts, "web"), 0);

    /* Failed: the pod has left the pod list, the managed list still has it */
    bind_pod((struct podspec){.name = "web-t3", .labels = "\"app\":\"web\"", .phase = "Failed",
                              .started = t0},
             "l4-02");
    publish();
    snprintf(name, sizeof(name), "new-%d", seq++);
    decide_at(svc.rollouts, name, t0 + 1000, &d);
    ck_assert(d.halted);
    ck_assert_msg(strstr(d.reason, "ended Failed"), "%s", d.reason);
    ck_assert_int_eq(d.side, AF_SIDE_SOURCE);
    snap = af_publisher_acquire(&pub);
    af_rollouts_status(svc.rollouts, cfg, snap, t0 + 1000, 0, &st);
    ck_assert(st.halted);
    af_snapshot_unref(snap);
    ck_assert_int_eq(af_rollouts_ack(svc.rollouts, "web"), 0);
    snprintf(name, sizeof(name), "new-%d", seq++);
    decide_at(svc.rollouts, name, t0 + 1001, &d);
    ck_assert(!d.halted);
    af_buf_release(&out);
}
END_TEST

/* Decides a new unit under `c` (another config than the holder's); returns halted. */
static bool decide_cfg(struct af_config *c, const char *name, double now,
                       struct af_rollout_decision *d)
{
    struct podspec p = {.name = name, .labels = "\"app\":\"web\""};
    struct af_pod_info *pod = pod_info(&p);
    struct af_snapshot *snap = af_publisher_acquire(&pub);

    af_rollouts_decide(svc.rollouts, c, snap, pod, now, d);
    af_snapshot_unref(snap);
    af_pod_info_unref(pod);
    return d->halted;
}

START_TEST(test_brake_ignores_a_readiness_blip_and_resumes_on_policy_change)
{
    struct af_rollout *r = rollout(0, "web", "ml", "web", A10G, L4, 1.0);
    const double t0 = 1.9e9;
    struct af_rollout_decision d;
    struct podspec ok = {.name = "web-t1", .labels = "\"app\":\"web\"", .started = t0};
    struct af_config *c2 = NULL, *c3 = NULL;
    struct af_error err;
    static struct af_rollout r2[1], r3[1];

    cluster(4, 4, 8);
    bind_pod(ok, "l4-00");
    publish();
    decide_at(svc.rollouts, "n-1", t0 + 5000, &d);   /* seen Ready */
    ck_assert(!d.halted);
    ok.not_ready = true;
    bind_pod(ok, "l4-00");
    publish();
    decide_at(svc.rollouts, "n-2", t0 + 5010, &d);   /* NotReady 10 s, started long ago */
    ck_assert(!d.halted);
    decide_at(svc.rollouts, "n-3", t0 + 5700, &d);   /* NotReady for 690 s now */
    ck_assert(d.halted);
    ck_assert_msg(strstr(d.reason, "since it turned NotReady"), "%s", d.reason);

    /* A changed policy (a new config, as a reload makes) begins the rollout again. */
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&c2, NULL, NULL, &err), 0);
    r2[0] = *r;                  /* shares the strings; only the brake differs */
    r2[0].brake_not_ready_s = 1200;
    c2->policy->rollouts = r2;
    c2->policy->n_rollouts = 1;
    ck_assert(!decide_cfg(c2, "n-4", t0 + 5701, &d));   /* resumed */
    ck_assert_int_eq(d.side, AF_SIDE_TARGET);
    /* more time, as the new brake allows; once the pod fails under it, halted again */
    ck_assert(!decide_cfg(c2, "n-5", t0 + 6000, &d));
    ck_assert(decide_cfg(c2, "n-6", t0 + 9000, &d));
    /* Another change (the share) releases it, and forgives what fails at that moment. */
    ck_assert_int_eq(af_config_load(&c3, NULL, NULL, &err), 0);
    r3[0] = r2[0];
    r3[0].share = 0.9;
    c3->policy->rollouts = r3;
    c3->policy->n_rollouts = 1;
    ck_assert(!decide_cfg(c3, "n-7", t0 + 9001, &d));
    ck_assert(!decide_cfg(c3, "n-8", t0 + 20000, &d));
    af_rollouts_free(svc.rollouts);   /* it holds references on c2 and c3 */
    svc.rollouts = NULL;
    c2->policy->rollouts = c3->policy->rollouts = NULL;
    c2->policy->n_rollouts = c3->policy->n_rollouts = 0;
    af_config_unref(c2);
    af_config_unref(c3);
}
END_TEST

/* ---- several replicas ------------------------------------------------------------------------ */

/*
 * Two accelfit replicas (two states) over one cluster picture. Every unit is decided by
 * one of them in turn and bound at once, but the snapshot both read is published only
 * every `lag` units: within a window each replica sees the other's decisions only when
 * the window ends. Returns the largest |target - share x units| seen.
 */
static double two_replicas(double share, int units, int lag)
{
    struct af_rollouts *rs[2] = {af_rollouts_new(), af_rollouts_new()};
    struct af_snapshot *snap = af_publisher_acquire(&pub);
    int target = 0, next_node[2] = {0, 0};
    double worst = 0;

    for (int i = 0; i < units; i++) {
        char name[32], node[32];
        struct podspec p = {.name = name, .labels = "\"app\":\"web\""};
        struct af_pod_info *pod;
        struct af_rollout_decision d;

        snprintf(name, sizeof(name), "rep-%d-%d", lag, i);
        pod = pod_info(&p);
        af_rollouts_decide(rs[i % 2], cfg, snap, pod, 1.9e9 + i, &d);
        af_pod_info_unref(pod);
        ck_assert_int_ne(d.side, AF_SIDE_NONE);
        if (d.side == AF_SIDE_TARGET) {
            snprintf(node, sizeof(node), "l4-%02d", next_node[1]++ / 8);
            target++;
        } else {
            snprintf(node, sizeof(node), "a10g-%02d", next_node[0]++ / 8);
        }
        bind_pod(p, node);
        if ((i + 1) % lag == 0) {
            publish();
            af_snapshot_unref(snap);
            snap = af_publisher_acquire(&pub);
        }
        if (fabs(target - share * (i + 1)) > worst)
            worst = fabs(target - share * (i + 1));
    }
    af_snapshot_unref(snap);
    af_rollouts_free(rs[0]);
    af_rollouts_free(rs[1]);
    return worst;
}

START_TEST(test_two_replicas_stay_within_the_window)
{
    static const int lags[] = {1, 4, 8, 16};

    for (size_t k = 0; k < AF_ARRAY_SIZE(lags); k++) {
        double worst;
        teardown();
        setup();
        rollout(0, "web", "ml", "web", A10G, L4, 0.3);
        cluster(30, 20, 8);
        worst = two_replicas(0.3, 200, lags[k]);
        /* the bound: what the other replica decides in one window, plus one for rounding */
        printf("rollouts: two replicas, share 0.3, 200 units, cache lag %2d units: worst drift "
               "%.1f units (bound %d)\n",
               lags[k], worst, lags[k] / 2 + 1);
        ck_assert_double_le(worst, lags[k] / 2 + 1);
    }
}
END_TEST

/* ---- what rollouts leave alone --------------------------------------------------------------- */

static char *filter_body(bool with_rollouts, const struct podspec *p)
{
    struct af_rollouts *keep = svc.rollouts;
    char *pod = pod_json(p);
    char *body = af_xasprintf("{\"Pod\":%s,\"Nodes\":null,\"NodeNames\":%s}", pod, node_names);
    struct af_buf out = AF_BUF_INIT(1u << 22);

    if (!with_rollouts)
        svc.rollouts = NULL;
    ck_assert_int_eq(af_service_handle(&svc, AF_VERB_FILTER, body, strlen(body), &out), 200);
    svc.rollouts = keep;
    af_free(body);
    af_free(pod);
    return af_buf_detach(&out, NULL);
}

START_TEST(test_pod_in_no_rollout_is_untouched)
{
    struct podspec other = {.name = "api-1", .labels = "\"app\":\"api\""};   /* managed */
    struct podspec elsewhere = {.ns = "prod", .name = "web-1", .labels = "\"app\":\"web\""};
    char *a, *b;

    rollout(0, "web", "ml", "web", A10G, L4, 1.0);
    cluster(2, 2, 8);
    a = filter_body(true, &other);
    b = filter_body(false, &other);
    ck_assert_str_eq(a, b);
    ck_assert(strstr(a, "a10g-00") && !strstr(a, "steers"));
    af_free(a);
    af_free(b);
    a = filter_body(true, &elsewhere);
    b = filter_body(false, &elsewhere);
    ck_assert_str_eq(a, b);
    af_free(a);
    af_free(b);
}
END_TEST

START_TEST(test_unmanaged_pods_are_ignored)
{
    struct podspec u = {.name = "web-u", .labels = "\"app\":\"web\"", .unmanaged = true};
    struct af_rollout_status st;
    struct af_snapshot *snap;
    char *a, *b;

    rollout(0, "web", "ml", "web", A10G, L4, 0.5);
    cluster(2, 2, 8);
    /* an unmanaged pod with the selector's labels is not steered ... */
    a = filter_body(true, &u);
    b = filter_body(false, &u);
    ck_assert_str_eq(a, b);
    af_free(a);
    af_free(b);
    /* ... and unmanaged pods on the target are not counted */
    for (int i = 0; i < 5; i++) {
        char name[32];
        snprintf(name, sizeof(name), "web-u%d", i);
        u.name = name;
        bind_pod(u, "l4-00");
    }
    publish();
    snap = af_publisher_acquire(&pub);
    ck_assert_uint_eq(snap->n_managed, 0);
    af_rollouts_status(svc.rollouts, cfg, snap, af_wall_time(), 0, &st);
    ck_assert_int_eq(st.target + st.source, 0);
    af_snapshot_unref(snap);
}
END_TEST

/* ---- /explain, /rollouts, /metrics ----------------------------------------------------------- */

START_TEST(test_explain_names_the_rollout_and_remembers_nothing)
{
    struct af_rollout *r = rollout(0, "web", "ml", "web", A10G, L4, 1.0);
    struct podspec p = {.name = "web-1", .labels = "\"app\":\"web\""};
    struct af_rollout_status st;
    struct af_snapshot *snap;
    struct af_buf out = AF_BUF_INIT(1u << 22);
    json_t *e, *ro, *j, *r0;

    cluster(2, 2, 8);
    e = call(AF_VERB_EXPLAIN, &p, 200);
    ro = json_object_get(e, "rollout");
    ck_assert_str_eq(json_string_value(json_object_get(ro, "name")), "web");
    ck_assert_str_eq(json_string_value(json_object_get(ro, "unit")), "Pod/web-1");
    ck_assert_str_eq(json_string_value(json_object_get(ro, "side")), "target");
    ck_assert(json_is_true(json_object_get(ro, "restricts_filter")));
    ck_assert(strstr(json_string_value(json_object_get(ro, "reason")), "goes to the target"));
    json_decref(e);
    snap = af_publisher_acquire(&pub);
    af_rollouts_status(svc.rollouts, cfg, snap, af_wall_time(), 0, &st);
    ck_assert_int_eq(st.pending, 0);
    af_snapshot_unref(snap);

    /* bound: GET /explain?pod= recalls the side from the node's class */
    place(r, &p, true, true);
    ck_assert_int_eq(af_service_explain_pod(&svc, "ml", "web-1", &out), 200);
    e = json_loads(out.buf, 0, NULL);
    ro = json_object_get(e, "rollout");
    ck_assert(strstr(json_string_value(json_object_get(ro, "reason")), "already"));
    json_decref(e);
    af_buf_reset(&out);

    ck_assert_int_eq(af_service_rollouts(&svc, &out), 200);
    j = json_loads(out.buf, 0, NULL);
    ck_assert_msg(j != NULL, "%s", out.buf);
    r0 = json_array_get(json_object_get(j, "rollouts"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(r0, "name")), "web");
    ck_assert_str_eq(json_string_value(json_object_get(r0, "kind")), "placement");
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(r0, "target"), 0)),
                     "nvidia-l4");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(r0, "units"), "target")),
                     1);
    ck_assert_double_eq(
        json_number_value(json_object_get(json_object_get(r0, "share"), "achieved")), 1.0);
    ck_assert(json_is_false(json_object_get(r0, "halted")));
    ck_assert(json_is_string(json_object_get(r0, "began")));
    json_decref(j);
    af_buf_reset(&out);

    ck_assert_int_eq(af_service_render_metrics(&svc, &out), 0);
    ck_assert(strstr(out.buf, "accelfit_rollout_target_share{rollout=\"web\"} 1\n"));
    ck_assert(strstr(out.buf, "accelfit_rollout_achieved_share{rollout=\"web\"} 1\n"));
    ck_assert(strstr(out.buf, "accelfit_rollout_units{rollout=\"web\",side=\"target\"} 1\n"));
    ck_assert(strstr(out.buf, "accelfit_rollout_units{rollout=\"web\",side=\"source\"} 0\n"));
    ck_assert(strstr(out.buf, "accelfit_rollout_fallbacks_total{rollout=\"web\"} 0\n"));
    ck_assert(strstr(out.buf, "accelfit_rollout_halted{rollout=\"web\"} 0\n"));
    af_buf_release(&out);
}
END_TEST

/* ---- variant rollouts: the webhook's side ---------------------------------------------------- */

START_TEST(test_variant_rollout_counts_annotations_and_anonymous_units)
{
    struct af_rollout *r = rollout(0, "to-inf2", "ml", "llm", A10G, INF2, 0.5);
    struct af_rollout_decision d;
    struct af_snapshot *snap;
    struct af_rollout_status st;
    struct af_pod_info *pod;
    struct podspec anon = {.name = "", .labels = "\"app\":\"llm\""};
    char *json;
    struct af_error err;

    r->variant = af_xcalloc(1, sizeof(*r->variant));
    r->variant->resources = af_xcalloc(1, sizeof(*r->variant->resources));
    r->variant->resources[0].key = af_xstrdup("aws.amazon.com/neuron");
    r->variant->resources[0].value = af_xstrdup("1");
    r->variant->n_resources = 1;
    cluster(2, 0, 8);
    snap = af_publisher_acquire(&pub);

    /* At admission the pod has no name yet. The room check uses the variant's request
     * (1 Neuron device on inf2), not the pod's nvidia.com/gpu. */
    json = pod_json(&(struct podspec){.name = "x", .labels = "\"app\":\"llm\""});
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_codec_decode_pod(json, strlen(json), &pod, &err), 0);
    af_free(json);
    af_free(pod->name);
    pod->name = af_xstrdup("");
    af_rollouts_decide(svc.rollouts, cfg, snap, pod, 1.9e9, &d);   /* 0 of 0: source */
    ck_assert_int_eq(d.side, AF_SIDE_SOURCE);
    af_rollouts_decide(svc.rollouts, cfg, snap, pod, 1.9e9, &d);   /* 0 of 1: target */
    ck_assert_int_eq(d.side, AF_SIDE_TARGET);
    ck_assert(!d.fallback);
    af_rollouts_decide(svc.rollouts, cfg, snap, pod, 1.9e9, &d);   /* 1 of 2: source */
    ck_assert_int_eq(d.side, AF_SIDE_SOURCE);
    af_rollouts_status(svc.rollouts, cfg, snap, 1.9e9, 0, &st);
    ck_assert_int_eq(st.pending, 3);
    af_snapshot_unref(snap);

    /* The pods appear, named and annotated: they settle the anonymous decisions. */
    anon.name = "llm-a";
    anon.side = "source";
    bind_pod(anon, NULL);
    anon.name = "llm-b";
    anon.side = "target";
    anon.res = "aws.amazon.com/neuron";
    bind_pod(anon, NULL);
    publish();
    snap = af_publisher_acquire(&pub);
    af_rollouts_status(svc.rollouts, cfg, snap, 1.9e9 + 1, 0, &st);
    ck_assert_int_eq(st.pending, 1);
    ck_assert_int_eq(st.target, 1);
    ck_assert_int_eq(st.source, 2);
    /* an annotated pod keeps its side; filter does not restrict a variant rollout */
    {
        struct podspec p = {.name = "llm-b", .labels = "\"app\":\"llm\"", .side = "target",
                            .res = "aws.amazon.com/neuron"};
        struct af_pod_info *b = pod_info(&p);
        json_t *e;
        af_rollouts_decide(svc.rollouts, cfg, snap, b, 1.9e9 + 2, &d);
        ck_assert_int_eq(d.side, AF_SIDE_TARGET);
        ck_assert(strstr(d.reason, "annotation"));
        af_pod_info_unref(b);
        e = call(AF_VERB_EXPLAIN, &p, 200);
        ck_assert(json_is_false(
            json_object_get(json_object_get(e, "rollout"), "restricts_filter")));
        json_decref(e);
    }
    af_snapshot_unref(snap);
    af_pod_info_unref(pod);
}
END_TEST

/* A source pod of the rollout named `name`, annotated with ledger entry `claim`, reaches the
 * cache: the rollout's state on `rs` then. */
static struct af_rollout_status appears(struct af_rollouts *rs, const char *name,
                                        const char *claim, double now)
{
    struct podspec p = {.name = name, .labels = "\"app\":\"llm\"", .side = "source",
                        .claim = claim};
    struct af_snapshot *snap;
    struct af_rollout_status st;

    bind_pod(p, NULL);
    publish();
    snap = af_publisher_acquire(&pub);
    af_rollouts_status(rs, cfg, snap, now, 0, &st);
    af_snapshot_unref(snap);
    return st;
}

/*
 * The claim ledger between two replicas' memories (docs/rollouts.md): a new unit decided
 * under a claim on one is counted by the other once absorbed, exactly once however often
 * the ledger is read, and settled when its pod, named by then, shows its claim in the
 * cache (not by whichever anonymous unit of its side appears first). A refused claim is
 * forgotten.
 */
START_TEST(test_claims_count_on_every_replica_and_settle_by_their_pod)
{
    struct af_rollouts *other = af_rollouts_new();
    struct af_rollout_claim c, seen[2];
    struct af_rollout_decision d;
    struct af_rollout_status st;
    struct af_snapshot *snap;
    struct af_pod_info *pod;
    struct podspec anon = {.name = "", .labels = "\"app\":\"llm\""};
    bool keep[2];

    rollout(0, "to-l4", "ml", "llm", A10G, L4, 0.5);
    cluster(2, 1, 8);
    snap = af_publisher_acquire(&pub);
    anon.name = "x";
    pod = pod_info(&anon);   /* at admission the pod has no name yet */
    af_free(pod->name);
    pod->name = af_xstrdup("");

    /* replica 1 decides an anonymous unit under claim "r1-1": the source (0 of 0) */
    ck_assert(af_rollouts_decide_claim(svc.rollouts, cfg, snap, pod, NULL, 1.9e9, 0, "r1-1", &d,
                                       &c));
    ck_assert_int_eq(d.side, AF_SIDE_SOURCE);
    ck_assert_str_eq(c.id, "r1-1");
    ck_assert_str_eq(c.unit, "");
    /* replica 2, running the rollout too, reads the ledger twice: counted once, and the
     * next unit goes to the target */
    af_rollouts_status(other, cfg, snap, 1.9e9, 0, &st);
    seen[0] = c;
    af_rollouts_absorb_claims(other, seen, 1, 1.9e9 + 1, keep);
    ck_assert(keep[0]);
    af_rollouts_absorb_claims(other, seen, 1, 1.9e9 + 1, keep);
    ck_assert(keep[0]);
    ck_assert(af_rollouts_decide_claim(other, cfg, snap, pod, NULL, 1.9e9 + 1, 0, "r2-1", &d,
                                       &seen[1]));
    ck_assert_msg(d.side == AF_SIDE_TARGET, "%s", d.reason);
    ck_assert_int_eq(d.count.source, 1);
    ck_assert_int_eq(d.count.target, 0);
    /* a refused claim is forgotten: decided again, it is the target again */
    af_rollouts_unclaim(other, "r2-1");
    af_rollouts_status(other, cfg, snap, 1.9e9 + 1, 0, &st);
    ck_assert_int_eq(st.pending, 1);
    af_snapshot_unref(snap);

    /* an unrelated anonymous source pod appears first: it does not settle r1-1 */
    st = appears(other, "llm-z", "r9-1", 1.9e9 + 2);
    ck_assert_int_eq(st.pending, 1);
    ck_assert_int_eq(st.source, 2);
    /* r1-1's pod appears, named by now: settled; the ledger entry can go */
    st = appears(other, "llm-a", "r1-1", 1.9e9 + 3);
    ck_assert_int_eq(st.pending, 0);
    ck_assert_int_eq(st.source, 2);
    snap = af_publisher_acquire(&pub);
    af_rollouts_absorb_claims(other, seen, 1, 1.9e9 + 3, keep);
    ck_assert(!keep[0]);
    /* an entry older than the TTL goes too, and is not counted */
    seen[0].at = 1.9e9 + 3 - AF_ROLLOUT_PENDING_TTL_S - 1;
    snprintf(seen[0].id, sizeof(seen[0].id), "r3-1");
    af_rollouts_absorb_claims(other, seen, 1, 1.9e9 + 3, keep);
    ck_assert(!keep[0]);
    af_rollouts_status(other, cfg, snap, 1.9e9 + 3, 0, &st);
    ck_assert_int_eq(st.pending, 0);
    af_snapshot_unref(snap);
    af_pod_info_unref(pod);
    af_rollouts_free(other);
}
END_TEST

/*
 * Sides claimed ahead (reserves, docs/rollouts.md): a replica's reserves count on every
 * replica as units decided, so the next decision anywhere follows them; a pod takes the
 * oldest and is answered with its side; a target reserve is not given to a pod while the
 * rollout is halted; a reserve given back (its entry rewritten as released) is counted
 * nowhere any more, and an untaken one is counted for AF_ROLLOUT_RESERVE_TTL_S at most.
 */
START_TEST(test_reserves_count_everywhere_until_taken_or_given_back)
{
    struct af_rollouts *other = af_rollouts_new();
    struct af_rollout_claim r[2], gone;
    struct af_rollout_decision d;
    struct af_rollout_status st;
    struct af_snapshot *snap;
    struct af_pod_info *pod;
    struct podspec anon = {.name = "x", .labels = "\"app\":\"llm\""};
    bool keep[2];

    rollout(0, "to-l4", "ml", "llm", A10G, L4, 0.5);
    cluster(2, 1, 8);
    snap = af_publisher_acquire(&pub);
    pod = pod_info(&anon);
    af_free(pod->name);
    pod->name = af_xstrdup("");   /* at admission a ReplicaSet's pod has no name yet */

    /* replica 1 claims two ahead: the source (0 of 0), then the target (1 of 2 at 0.5) */
    ck_assert(af_rollouts_reserve(svc.rollouts, cfg, snap, "to-l4", 1.9e9, "r1-1", &r[0]));
    ck_assert(af_rollouts_reserve(svc.rollouts, cfg, snap, "to-l4", 1.9e9, "r1-2", &r[1]));
    ck_assert_int_eq(r[0].side, AF_SIDE_SOURCE);
    ck_assert_int_eq(r[1].side, AF_SIDE_TARGET);
    ck_assert(r[0].reserve && !r[0].released);
    ck_assert(!af_rollouts_reserve(svc.rollouts, cfg, snap, "no-such", 1.9e9, "r1-3", &gone));
    /* replica 2 reads them: its next new unit counts both (1 of 2) and goes to the source */
    af_rollouts_status(other, cfg, snap, 1.9e9, 0, &st);
    af_rollouts_absorb_claims(other, r, 2, 1.9e9 + 1, keep);
    ck_assert(keep[0] && keep[1]);
    af_rollouts_decide_for(other, cfg, snap, pod, NULL, 1.9e9 + 1, AF_ROLLOUTS_PEEK, &d);
    ck_assert_int_eq(d.count.target, 1);
    ck_assert_int_eq(d.count.source, 1);
    ck_assert_msg(d.side == AF_SIDE_SOURCE, "%s", d.reason);
    /* a pod takes replica 1's oldest reserve: the source, without a new decision */
    ck_assert(af_rollouts_take_reserve(svc.rollouts, cfg, snap, pod, NULL, 1.9e9 + 1, "r1-1",
                                       r[0].generation, &d));
    ck_assert_int_eq(d.side, AF_SIDE_SOURCE);
    ck_assert_msg(strstr(d.reason, "claimed ahead"), "%s", d.reason);
    /* taken once only; a reserve of another generation is not taken */
    ck_assert(!af_rollouts_take_reserve(svc.rollouts, cfg, snap, pod, NULL, 1.9e9 + 1, "r1-1",
                                        r[0].generation, &d));
    ck_assert(!af_rollouts_take_reserve(svc.rollouts, cfg, snap, pod, NULL, 1.9e9 + 1, "r1-2",
                                        r[1].generation + 1, &d));
    /* halted (elsewhere: the shared state says so), the target reserve is not given to a pod */
    {
        struct af_rollout_record *rec = NULL;
        size_t n = af_rollouts_export(svc.rollouts, cfg, 1.9e9 + 1, &rec);
        ck_assert_uint_eq(n, 1);
        rec[0].halted_at = 1.9e9 + 1;
        snprintf(rec[0].halt_reason, sizeof(rec[0].halt_reason), "a target pod failed");
        af_rollouts_absorb(svc.rollouts, rec, n);
        af_free(rec);
    }
    af_rollouts_decide_for(svc.rollouts, cfg, snap, pod, NULL, 1.9e9 + 1, AF_ROLLOUTS_PEEK, &d);
    ck_assert(d.halted);
    ck_assert(!af_rollouts_take_reserve(svc.rollouts, cfg, snap, pod, NULL, 1.9e9 + 1, "r1-2",
                                        r[1].generation, &d));
    /* given back: its entry rewritten as released ends it on replica 2 too */
    af_rollouts_release(svc.rollouts, "r1-2");
    gone = r[1];
    gone.side = AF_SIDE_NONE;
    gone.released = true;
    af_rollouts_absorb_claims(other, &gone, 1, 1.9e9 + 2, keep);
    ck_assert(keep[0]);   /* the mark stays, for the replicas that have not read it */
    af_rollouts_status(other, cfg, snap, 1.9e9 + 2, 0, &st);
    ck_assert_int_eq(st.pending, 1);   /* r1-1 only */
    ck_assert_int_eq(st.target, 0);
    /* an untaken reserve is counted for AF_ROLLOUT_RESERVE_TTL_S, not the decisions' TTL */
    r[0].at = 1.9e9 + 2 - AF_ROLLOUT_RESERVE_TTL_S - 1;
    snprintf(r[0].id, sizeof(r[0].id), "r1-9");
    af_rollouts_absorb_claims(other, r, 1, 1.9e9 + 2, keep);
    ck_assert(!keep[0]);
    af_snapshot_unref(snap);
    af_pod_info_unref(pod);
    af_rollouts_free(other);
}
END_TEST

/*
 * A ledger written by someone else than accelfit (anyone who may write ConfigMaps in its
 * namespace): an entry from far in the future expires like any other, entries of a rollout
 * this replica does not run or of another generation are not counted, and however many
 * entries are read, at most AF_ROLLOUT_PENDING_MAX decisions are pending.
 */
START_TEST(test_hostile_claims_are_bounded_and_expire)
{
    const size_t n = AF_ROLLOUT_PENDING_MAX + 2000;
    struct af_rollout_claim *v = af_xcalloc(n, sizeof(*v));
    bool *keep = af_xcalloc(n, sizeof(*keep));
    struct af_rollout_decision d;
    struct af_rollout_claim c;
    struct af_rollout_status st;
    struct af_snapshot *snap;
    struct af_pod_info *pod;
    struct podspec anon = {.name = "x", .labels = "\"app\":\"llm\""};
    double now = 1.9e9;

    rollout(0, "to-l4", "ml", "llm", A10G, L4, 0.5);
    cluster(2, 1, 8);
    snap = af_publisher_acquire(&pub);
    pod = pod_info(&anon);
    af_free(pod->name);
    pod->name = af_xstrdup("");
    /* the generation of the rollout, as a claim of its own carries it */
    ck_assert(af_rollouts_decide_claim(svc.rollouts, cfg, snap, pod, NULL, now, 0, "own-1", &d,
                                       &c));
    af_rollouts_unclaim(svc.rollouts, "own-1");

    /* one entry from the year 10^292, and one of another generation */
    v[0] = c;
    snprintf(v[0].id, sizeof(v[0].id), "future");
    v[0].at = 1e300;
    v[1] = c;
    snprintf(v[1].id, sizeof(v[1].id), "old-generation");
    v[1].generation = c.generation + 1;
    v[2] = c;
    snprintf(v[2].id, sizeof(v[2].id), "not-a-rollout");
    snprintf(v[2].rollout, sizeof(v[2].rollout), "nobody-runs-this");
    af_rollouts_absorb_claims(svc.rollouts, v, 3, now, keep);
    ck_assert(keep[0]);
    af_rollouts_status(svc.rollouts, cfg, snap, now, 0, &st);
    ck_assert_int_eq(st.pending, 1);   /* only the future one counts */
    /* the future entry is gone once the TTL (and the clock skew allowed) has passed */
    now += AF_ROLLOUT_PENDING_TTL_S + AF_ROLLOUT_CLAIM_SKEW_S + 1;
    af_rollouts_absorb_claims(svc.rollouts, v, 1, now, keep);
    ck_assert(!keep[0]);
    af_rollouts_status(svc.rollouts, cfg, snap, now, 0, &st);
    ck_assert_int_eq(st.pending, 0);

    /* more entries than a replica counts: the pending decisions stay bounded */
    for (size_t i = 0; i < n; i++) {
        v[i] = c;
        snprintf(v[i].id, sizeof(v[i].id), "flood-%zu", i);
        v[i].at = now;
    }
    af_rollouts_absorb_claims(svc.rollouts, v, n, now, keep);
    af_rollouts_status(svc.rollouts, cfg, snap, now, 0, &st);
    ck_assert_int_eq(st.pending, AF_ROLLOUT_PENDING_MAX);
    af_snapshot_unref(snap);
    af_pod_info_unref(pod);
    af_free(keep);
    af_free(v);
}
END_TEST

START_TEST(test_pending_decisions_expire)
{
    struct af_rollout_decision d;
    struct af_rollout_status st;
    struct af_snapshot *snap;

    rollout(0, "web", "ml", "web", A10G, L4, 0.5);
    cluster(2, 2, 8);
    decide_at(svc.rollouts, "web-1", 1.9e9, &d);
    decide_at(svc.rollouts, "web-1", 1.9e9 + 200, &d);   /* a retry: kept and refreshed */
    snap = af_publisher_acquire(&pub);
    af_rollouts_status(svc.rollouts, cfg, snap, 1.9e9 + 400, 0, &st);
    ck_assert_int_eq(st.pending, 1);
    af_rollouts_status(svc.rollouts, cfg, snap, 1.9e9 + 200 + AF_ROLLOUT_PENDING_TTL_S + 1, 0, &st);
    ck_assert_int_eq(st.pending, 0);
    af_snapshot_unref(snap);
}
END_TEST

/* ---- the shared state: records, and the API server holding them ---------------------------- */

/* Merging is the same whichever replica merges, in whichever order. */
START_TEST(test_records_merge_the_same_either_way)
{
    struct af_rollout_record a, b, ab, ba;

    memset(&a, 0, sizeof(a));
    snprintf(a.name, sizeof(a.name), "web");
    a.generation = 7;
    a.began = 1000;
    a.halted_at = 1500;
    snprintf(a.halt_reason, sizeof(a.halt_reason), "target pod ml/w1 ended Failed");
    snprintf(a.halt_pod, sizeof(a.halt_pod), "ml/w1");
    b = a;
    b.began = 1200;            /* a replica that saw it later */
    b.halted_at = 0;
    b.halt_reason[0] = b.halt_pod[0] = '\0';
    b.acked_at = 1600;         /* and acknowledged the halt */
    b.n_forgiven = 1;
    snprintf(b.forgiven[0].pod, sizeof(b.forgiven[0].pod), "ml/w1");
    b.forgiven[0].restarts = 2;

    af_rollout_record_merge(&a, &b, &ab);
    af_rollout_record_merge(&b, &a, &ba);
    ck_assert(ab.began == 1000 && ba.began == 1000);
    ck_assert(ab.halted_at == 1500 && ba.halted_at == 1500);
    ck_assert(ab.acked_at == 1600 && ba.acked_at == 1600);   /* acknowledged: not halted */
    ck_assert_str_eq(ab.halt_pod, "ml/w1");
    ck_assert_str_eq(ba.halt_pod, "ml/w1");
    ck_assert_uint_eq(ab.n_forgiven, 1);
    ck_assert_uint_eq(ba.n_forgiven, 1);
    ck_assert(!af_rollout_record_differs(&ab, &ba));
    ck_assert(af_rollout_record_differs(&a, &b));
    ck_assert(!af_rollout_record_differs(&ab, &a) && !af_rollout_record_differs(&ab, &b));

    /* a new generation (the policy changed the rollout): the one that began later wins whole */
    b.generation = 8;
    b.began = 5000;
    af_rollout_record_merge(&a, &b, &ab);
    af_rollout_record_merge(&b, &a, &ba);
    ck_assert(ab.generation == 8 && ba.generation == 8 && ab.began == 5000 && ba.began == 5000);
    ck_assert(ab.halted_at == 0 && ba.halted_at == 0);
}
END_TEST

/* One accelfit: its rollouts' state and the API server's copy (src/kube/state.c). */
struct replica {
    struct af_rollouts *rs;
    struct af_kube *kube;
    struct af_publisher pub;   /* the fake API server's cluster, not the test's */
};

static size_t replica_export(void *ud, double now, struct af_rollout_record **out)
{
    return af_rollouts_export(ud, cfg, now, out);
}

static void replica_absorb(void *ud, const struct af_rollout_record *v, size_t n)
{
    af_rollouts_absorb(ud, v, n);
}

static void replica_changed(void *ud)
{
    af_kube_state_notify(ud);
}

static void replica_start(struct replica *r, const struct af_test_fake_api *f,
                          struct af_rollouts *rs)
{
    struct af_kube_conn *conn = NULL;
    struct af_error err;
    struct af_kube_state_ops ops = {rs, replica_export, replica_absorb};

    memset(&err, 0, sizeof(err));
    r->rs = rs;
    af_publisher_init(&r->pub);
    ck_assert_int_eq(af_kubeconfig_load(&conn, f->kubeconfig, NULL, &err), 0);
    ck_assert_int_eq(af_kube_start(&r->kube, conn, NULL, &holder, &r->pub, NULL), 0);
    ck_assert_int_eq(af_kube_state_start(r->kube, "accelfit", AF_ROLLOUT_STATE_OBJECT, &ops), 0);
    af_rollouts_set_observer(rs, replica_changed, r->kube);
}

/* Stops its API server client; its rollouts' state is the caller's. */
static void replica_stop(struct replica *r)
{
    af_rollouts_set_observer(r->rs, NULL, NULL);
    af_kube_stop(r->kube);
    af_publisher_destroy(&r->pub);
}

static struct af_rollout_status status_at(struct af_rollouts *rs, double now)
{
    struct af_snapshot *snap = af_publisher_acquire(&pub);
    struct af_rollout_status st;

    af_rollouts_status(rs, cfg, snap, now, 0, &st);
    af_snapshot_unref(snap);
    return st;
}

/* The rollout's key of the state object, as the API server holds it (new; NULL: none). */
static json_t *stored_record(const struct af_test_fake_api *f, const char *name)
{
    json_t *cm = af_test_fake_api_admin(f, "configmap",
                                        "{\"ns\":\"accelfit\",\"name\":\"accelfit-rollouts\"}");
    const char *text = json_string_value(json_object_get(json_object_get(cm, "data"), name));
    json_t *rec = text ? json_loads(text, 0, NULL) : NULL;

    json_decref(cm);
    return rec;
}

static bool stored_halted(const struct af_test_fake_api *f, bool want)
{
    json_t *rec = stored_record(f, "web");
    bool ok = rec && json_is_boolean(json_object_get(rec, "halted")) &&
              json_is_true(json_object_get(rec, "halted")) == want;

    json_decref(rec);
    return ok;
}

/* The state object's resourceVersion (caller frees; "" when there is none). */
static char *stored_version(const struct af_test_fake_api *f)
{
    json_t *cm = af_test_fake_api_admin(f, "configmap",
                                        "{\"ns\":\"accelfit\",\"name\":\"accelfit-rollouts\"}");
    const char *rv = json_string_value(
        json_object_get(json_object_get(cm, "metadata"), "resourceVersion"));
    char *out = af_xstrdup(rv ? rv : "");

    json_decref(cm);
    return out;
}

/* When the stored record says rollout "web" began (unix seconds; -1: no record). */
static double stored_began(const struct af_test_fake_api *f)
{
    json_t *rec = stored_record(f, "web");
    double began = rec ? json_number_value(json_object_get(json_object_get(rec, "unix"), "began"))
                       : -1;

    json_decref(rec);
    return began;
}

/* True when replicas `a` and `b` and the stored record hold one begin (into *began). */
static bool begins_agree(const struct af_test_fake_api *f, struct af_rollouts *a,
                         struct af_rollouts *b, double at, double *began)
{
    double x = status_at(a, at).began, y = status_at(b, at).began;

    *began = x;
    return x == y && stored_began(f) == x;
}

/*
 * Two replicas and restarts, on the fake API server: the rollout's begin, a halt made on
 * one and its acknowledgement made on the other are the same on both, and survive a restart:
 * the stage the rollout is in follows from when it first began, not from the restart.
 */
START_TEST(test_state_is_shared_and_survives_restarts)
{
    /* in the past: the ack is stamped with the wall clock, after every halt here */
    const double t0 = floor(af_wall_time()) - 100000;
    struct af_test_fake_api f = {0};
    struct replica a, b;
    struct af_rollout *r;
    struct af_rollout_decision d;
    struct af_rollout_status st;
    struct podspec bad = {.name = "web-t1", .labels = "\"app\":\"web\"", .not_ready = true,
                          .started = t0};
    json_t *rec;
    double began;

    if (!af_test_fake_api_start(&f))
        return;   /* no python3 or openssl here */
    r = rollout(0, "web", "ml", "web", A10G, L4, 0);
    r->stages = af_xcalloc(2, sizeof(*r->stages));
    r->n_stages = 2;
    r->stages[0].share = 0.5;
    r->stages[1].share = 1.0;
    r->stages[0].min_duration_s = 1000;   /* stage 2 from t0 + 1000 */
    cluster(4, 4, 8);
    bind_pod(bad, "l4-00");
    publish();

    /* replica A saw the rollout begin at t0; B starts later and learns it */
    st = status_at(svc.rollouts, t0);
    ck_assert(st.began == t0);
    replica_start(&a, &f, svc.rollouts);
    replica_start(&b, &f, af_rollouts_new());
    ck_assert_msg(AF_TEST_WAIT_FOR(60, status_at(b.rs, t0 + 300).began == t0), "B never learned the begin");
    ck_assert_int_eq(status_at(b.rs, t0 + 300).stage, 0);
    ck_assert_int_eq(status_at(b.rs, t0 + 1300).stage, 1);

    /* the brake halts on A (not Ready for 700 s); the state object says so, and why */
    decide_at(svc.rollouts, "new-1", t0 + 700, &d);
    ck_assert(d.halted);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, stored_halted(&f, true)), "the halt never reached the API server");
    rec = stored_record(&f, "web");
    ck_assert_str_eq(json_string_value(json_object_get(rec, "haltPod")), "ml/web-t1");
    ck_assert_int_eq(json_integer_value(json_object_get(rec, "stage")), 2);
    json_decref(rec);
    /* B, whose own brake would not halt yet (300 s), is halted by A's record */
    ck_assert_msg(AF_TEST_WAIT_FOR(60, status_at(b.rs, t0 + 300).halted), "B never saw the halt");

    /* A restarts: the halt and the begin are read back */
    replica_stop(&a);
    af_rollouts_free(svc.rollouts);
    svc.rollouts = af_rollouts_new();
    replica_start(&a, &f, svc.rollouts);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, status_at(svc.rollouts, t0 + 300).began == t0), "the begin was lost");
    ck_assert_msg(status_at(svc.rollouts, t0 + 300).halted, "the halt did not survive");
    st = status_at(svc.rollouts, t0 + 1300);
    ck_assert_int_eq(st.stage, 1);

    /* acknowledged on B, where the pod fails: A resumes, and does not halt again on it */
    ck_assert(status_at(b.rs, t0 + 710).halted);
    ck_assert(status_at(svc.rollouts, t0 + 710).halted);
    ck_assert_int_eq(af_rollouts_ack(b.rs, "web"), 0);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, !status_at(svc.rollouts, t0 + 720).halted), "A never saw the ack");
    decide_at(svc.rollouts, "new-2", t0 + 800, &d);
    ck_assert(!d.halted);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, stored_halted(&f, false)), "the ack never reached the API server");

    /* ... nor after a restart */
    replica_stop(&a);
    af_rollouts_free(svc.rollouts);
    svc.rollouts = af_rollouts_new();
    replica_start(&a, &f, svc.rollouts);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, status_at(svc.rollouts, t0 + 300).began == t0), "the begin was lost");
    decide_at(svc.rollouts, "new-3", t0 + 900, &d);
    ck_assert_msg(!d.halted, "%s", d.reason);
    ck_assert_int_eq(status_at(svc.rollouts, t0 + 1300).stage, 1);

    /* the policy changes the rollout (a new generation): it begins again, the same on both */
    r->stages[0].min_duration_s = 2000;
    publish();   /* a census of the changed policy, as after a reload */
    st = status_at(svc.rollouts, t0 + 5000);
    /* begun again: at this call, or at the writer's clock if it saw the change first */
    ck_assert_msg(st.began >= t0 + 5000 && st.stage == 0, "began t0%+.3f, stage %d", st.began - t0, st.stage);
    /* Each replica may begin the new generation at its own clock (a writer that saw the change
     * first stamps the wall clock); the earliest begin stands everywhere once they merge. */
    ck_assert_msg(AF_TEST_WAIT_FOR(60, begins_agree(&f, svc.rollouts, b.rs, t0 + 5000, &began)),
                  "the replicas and the API server do not agree on the new begin");
    ck_assert_msg(began >= t0 + 5000, "began t0%+.3f", began - t0);
    ck_assert_int_eq(status_at(b.rs, began + 100).stage, 0);
    ck_assert_int_eq(status_at(svc.rollouts, began + 100).stage, 0);

    /* agreed, the replicas stop writing: the object's version holds (each write would wake
     * both watches, and a record read back unequal to the one written writes again) */
    {
        char *v1 = stored_version(&f), *v2;
        nanosleep(&(struct timespec){2, 0}, NULL);
        v2 = stored_version(&f);
        ck_assert_msg(!strcmp(v1, v2), "the state object keeps being written: %s -> %s", v1, v2);
        af_free(v1);
        af_free(v2);
    }

    replica_stop(&a);
    replica_stop(&b);
    af_rollouts_free(b.rs);
    af_test_fake_api_stop(&f);
}
END_TEST

/*
 * Another client writes the object while this replica's watch is silent: its write, from the
 * resourceVersion it last saw, gets 409 Conflict; it reads the object again, merges and
 * writes, keeping the other client's key.
 */
START_TEST(test_state_write_conflict_reads_again_and_merges)
{
    const double t0 = floor(af_wall_time()) - 100000;
    struct af_test_fake_api f = {0};
    struct replica a;
    struct af_rollout_decision d;
    struct podspec bad = {.name = "web-t1", .labels = "\"app\":\"web\"", .not_ready = true,
                          .started = t0};
    json_t *cm, *stats, *rec;
    char *other, *body;

    if (!af_test_fake_api_start(&f))
        return;   /* no python3 or openssl here */
    rollout(0, "web", "ml", "web", A10G, L4, 0.5);
    cluster(4, 4, 8);
    bind_pod(bad, "l4-00");
    publish();
    (void)status_at(svc.rollouts, t0);
    replica_start(&a, &f, svc.rollouts);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, stored_halted(&f, false)), "the rollout never reached the API server");
    ck_assert(status_at(svc.rollouts, t0 + 100).began == t0);

    /* the watch goes silent; another client adds a key */
    af_test_fake_api_do(&f, "stall", "{\"seconds\": 20}");
    cm = af_test_fake_api_admin(&f, "configmap",
                                "{\"ns\":\"accelfit\",\"name\":\"accelfit-rollouts\"}");
    rec = stored_record(&f, "web");
    json_object_set_new(rec, "rollout", json_string("other"));
    other = json_dumps(rec, JSON_INDENT(2));
    json_object_set_new(json_object_get(cm, "data"), "other", json_string(other));
    cm = json_pack("{s:o}", "object", cm);
    body = json_dumps(cm, JSON_COMPACT);
    json_decref(cm);
    af_test_fake_api_do(&f, "put_configmap", body);

    /* a halt here: written from the stale resourceVersion, then merged */
    decide_at(svc.rollouts, "new-1", t0 + 700, &d);
    ck_assert(d.halted);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, stored_halted(&f, true)), "the halt never reached the API server");
    json_decref(rec);
    rec = stored_record(&f, "other");
    ck_assert_msg(rec != NULL, "the other client's key was lost");
    stats = af_test_fake_api_admin(&f, "stats", NULL);
    ck_assert_int_ge(json_integer_value(json_object_get(stats, "conflicts")), 1);

    json_decref(stats);
    json_decref(rec);
    free(other);
    free(body);
    replica_stop(&a);
    af_test_fake_api_stop(&f);
}
END_TEST

/* Another client writes the state object: `web` (a record's text, or NULL: none) and `n` keys
 * "k-0"... of text `value`. */
static void put_state(const struct af_test_fake_api *f, const char *web, int n,
                      const char *value)
{
    json_t *data = json_object(), *cm;
    char *body;

    if (web)
        json_object_set_new(data, "web", json_string(web));
    for (int i = 0; i < n; i++) {
        char key[24];
        snprintf(key, sizeof(key), "k-%d", i);
        json_object_set_new(data, key, json_string(value));
    }
    cm = json_pack("{s:{s:{s:s,s:s},s:o}}", "object", "metadata", "name", "accelfit-rollouts",
                   "namespace", "accelfit", "data", data);
    body = json_dumps(cm, JSON_COMPACT);
    af_test_fake_api_do(f, "put_configmap", body);
    free(body);
    json_decref(cm);
}

/* The text of key `key` of the stored object (new; NULL: none). */
static char *stored_text(const struct af_test_fake_api *f, const char *key)
{
    json_t *cm = af_test_fake_api_admin(f, "configmap",
                                        "{\"ns\":\"accelfit\",\"name\":\"accelfit-rollouts\"}");
    const char *text = json_string_value(json_object_get(json_object_get(cm, "data"), key));
    char *out = text ? af_xstrdup(text) : NULL;

    json_decref(cm);
    return out;
}

static bool stored_has(const struct af_test_fake_api *f, const char *key)
{
    char *t = stored_text(f, key);

    af_free(t);
    return t != NULL;
}

/*
 * A state object written by someone else than accelfit (anyone who may write ConfigMaps in its
 * namespace, docs/rollouts.md "Bounds"): keys of rollouts a replica does not run are kept as
 * they were written, never parsed into records nor rewritten; an object too large for the
 * old 1 MiB read (its data within the ConfigMap limit, its JSON over it) is read; and a write
 * that would pass the ConfigMap limit drops the other keys rather than failing for ever.
 */
START_TEST(test_state_object_bounded_under_hostile_keys)
{
    const double t0 = floor(af_wall_time()) - 100000;
    static const char tiny[] = "{\"generation\":\"0\",\"unix\":{}}";
    struct af_test_fake_api f = {0};
    struct replica a, b;
    json_t *rec;
    char *web, *text, escaped[401], plain[401];

    if (!af_test_fake_api_start(&f))
        return;   /* no python3 or openssl here */
    for (int i = 0; i < 400; i++) {
        escaped[i] = i % 2 ? '"' : '\n';   /* two bytes each in JSON */
        plain[i] = 'x';
    }
    escaped[400] = plain[400] = '\0';
    rollout(0, "web", "ml", "web", A10G, L4, 0.5);
    cluster(4, 4, 8);
    publish();
    (void)status_at(svc.rollouts, t0);
    replica_start(&a, &f, svc.rollouts);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, stored_halted(&f, false)), "the rollout never reached the API server");
    replica_stop(&a);
    /* the record as written, begun later than this replica began it */
    rec = stored_record(&f, "web");
    json_object_set_new(json_object_get(rec, "unix"), "began", json_real(t0 + 50));
    web = json_dumps(rec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(rec);

    /* 3,000 keys of no rollout run here: kept byte for byte when the record is written */
    put_state(&f, web, 3000, tiny);
    replica_start(&a, &f, svc.rollouts);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, stored_began(&f) == t0), "the earlier begin was never written");
    text = stored_text(&f, "k-2999");
    ck_assert_ptr_nonnull(text);
    ck_assert_str_eq(text, tiny);
    af_free(text);
    replica_stop(&a);

    /* an object of 0.8 MB of data, 1.6 MB as JSON: read, and its record taken */
    put_state(&f, web, 2000, escaped);
    replica_start(&b, &f, af_rollouts_new());
    ck_assert_msg(AF_TEST_WAIT_FOR(60, status_at(b.rs, t0 + 100).began == t0 + 50),
                  "a replica never read the large object");
    replica_stop(&b);
    af_rollouts_free(b.rs);

    /* other keys filling the ConfigMap: this replica's record is written without them */
    put_state(&f, NULL, 2550, plain);
    replica_start(&a, &f, svc.rollouts);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, stored_has(&f, "web")),
                  "the record was never written beside a full object");
    ck_assert(!stored_has(&f, "k-0"));
    replica_stop(&a);
    free(web);
    af_test_fake_api_stop(&f);
}
END_TEST

Suite *af_rollouts_suite(void);
Suite *af_rollouts_suite(void)
{
    Suite *s = suite_create("rollouts");
    TCase *tc = tcase_create("core");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_choose_sends_one_of_four_at_a_quarter);
    tcase_add_test(tc, test_match_by_namespace_labels_and_owner);
    tcase_add_test(tc, test_unit_is_job_pod_group_or_pod);
    tcase_add_test(tc, test_stages_advance_with_time);
    tcase_add_test(tc, test_plan_restriction_refuses_other_classes_for_good);
    tcase_add_test(tc, test_each_restriction_keeps_its_own_reason);
    suite_add_tcase(s, tc);

    tc = tcase_create("cache");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_cache_keeps_managed_pods_terminal_included);
    suite_add_tcase(s, tc);

    tc = tcase_create("steering");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_quarter_placement_rollout_over_100_replicas);
    tcase_add_test(tc, test_job_pods_get_one_side);
    tcase_add_test(tc, test_target_full_falls_back_then_recovers);
    tcase_add_test(tc, test_fallback_wait_keeps_the_target);
    tcase_add_test(tc, test_pod_in_no_rollout_is_untouched);
    tcase_add_test(tc, test_unmanaged_pods_are_ignored);
    tcase_add_test(tc, test_pending_decisions_expire);
    tcase_add_test(tc, test_hostile_claims_are_bounded_and_expire);
    tcase_add_test(tc, test_claims_count_on_every_replica_and_settle_by_their_pod);
    tcase_add_test(tc, test_reserves_count_everywhere_until_taken_or_given_back);
    suite_add_tcase(s, tc);

    tc = tcase_create("brake");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_brake_halts_and_resumes_on_ack);
    tcase_add_test(tc, test_brake_ignores_a_readiness_blip_and_resumes_on_policy_change);
    suite_add_tcase(s, tc);

    tc = tcase_create("replicas");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_two_replicas_stay_within_the_window);
    tcase_add_test(tc, test_records_merge_the_same_either_way);
    tcase_add_test(tc, test_state_is_shared_and_survives_restarts);
    tcase_add_test(tc, test_state_write_conflict_reads_again_and_merges);
    tcase_add_test(tc, test_state_object_bounded_under_hostile_keys);
    suite_add_tcase(s, tc);

    tc = tcase_create("service");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_explain_names_the_rollout_and_remembers_nothing);
    tcase_add_test(tc, test_variant_rollout_counts_annotations_and_anonymous_units);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_rollouts_suite());
}
