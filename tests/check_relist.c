/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A live cluster's nodes after a policy or catalog reload (docs/policy.md,
 * "Reloading the policy"): `accelfit serve --kubeconfig --catalog --policy`
 * against tests/apiserver/fake_apiserver.py, which sends no node after its
 * first answers unless told to. A price fixed in the catalog file and a new
 * prices.default_spot_discount_pct in the policy file both reach the nodes
 * already cached (POST /explain shows them); the nodes are listed again, the
 * pods are not; the watch goes on afterwards (a later change to a node
 * arrives); and a pod's tenant follows the new policy with no list at all
 * (GET /costs).
 *
 * Everything asynchronous is polled with a generous deadline; nothing here
 * asserts how long anything takes.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accelfit/util.h"
#include "support/fake_api.h"
#include "support/http_client.h"
#include "support/support.h"

#define POLLS 1200   /* 50 ms apart: a minute, a deadline for broken builds only */
#define G5 "ip-10-0-1-40.us-west-2.compute.internal"   /* g5.2xlarge, on-demand */
#define SPOT "spot-p4d"                                 /* added: p4d.24xlarge, spot */
#define P4D_USD 21.957642   /* the catalog's on-demand price; the type has no spot discount */

static const char explain_body[] =
    "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\",\"uid\":\"u1\"},"
    "\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{\"requests\":{"
    "\"nvidia.com/gpu\":\"1\",\"cpu\":\"1\",\"memory\":\"1Gi\"}}}]}},"
    "\"NodeNames\":[\"" G5 "\",\"" SPOT "\"]}";

/* Writes `text` to `path` whole (a temporary file renamed over it, as an editor saves). */
static void write_file(const char *path, const char *text)
{
    char *tmp = af_xasprintf("%s.tmp", path);
    FILE *f = fopen(tmp, "w");

    ck_assert_msg(f != NULL, "cannot write %s", tmp);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(rename(tmp, path), 0);
    af_free(tmp);
}

/* `text` with the first `from` at or after `after` replaced by `to`. Caller frees. */
static char *replace_after(const char *text, const char *after, const char *from, const char *to)
{
    const char *a = strstr(text, after);
    const char *at;

    ck_assert_msg(a != NULL, "'%s' not found", after);
    at = strstr(a, from);
    ck_assert_msg(at != NULL, "'%s' not found after '%s'", from, after);
    return af_xasprintf("%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
}

struct node_seen {
    bool known;
    double usd;
    char source[32];
    char cls[32];
};

static const char *str_of(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* The node `name` as POST /explain shows it. */
static struct node_seen explain_node(CURL *c, const struct af_test_server *s, const char *name)
{
    struct node_seen n = {0};
    struct af_test_resp r;
    char url[256];
    json_t *j, *it;
    size_t i;

    snprintf(url, sizeof(url), "%s/explain", s->base);
    ck_assert_int_eq(af_test_http(c, "POST", url, explain_body, strlen(explain_body), NULL, &r),
                     CURLE_OK);
    ck_assert_msg(r.status == 200, "/explain: %ld %s", r.status, r.body ? r.body : "");
    j = json_loads(r.body, 0, NULL);
    ck_assert_ptr_nonnull(j);
    json_array_foreach(json_object_get(j, "nodes"), i, it) {
        const char *nm = json_string_value(json_object_get(it, "name"));
        if (!nm || strcmp(nm, name) || !json_is_true(json_object_get(it, "known")))
            continue;
        n.known = true;
        n.usd = json_number_value(json_object_get(it, "node_hourly_usd"));
        snprintf(n.source, sizeof(n.source), "%s", str_of(it, "price_source"));
        snprintf(n.cls, sizeof(n.cls), "%s", str_of(it, "class"));
    }
    json_decref(j);
    af_test_resp_free(&r);
    return n;
}

/* Polls /explain until `name` is priced `usd` from `source`; fails showing what it was. */
static void await_price(CURL *c, const struct af_test_server *s, const char *name, double usd,
                        const char *source)
{
    struct node_seen n = {0};

    for (int i = 0; i < POLLS; i++) {
        n = explain_node(c, s, name);
        /* the JSON rounds dollars */
        if (n.known && fabs(n.usd - usd) < 1e-4 && !strcmp(n.source, source))
            return;
        usleep(50000);
    }
    ck_abort_msg("%s: want $%.6f/h from %s, have %s $%.6f/h from %s", name, usd, source,
                 n.known ? "known" : "unknown", n.usd, n.source);
}

/* How many LISTs (not watches) of `kind_path` the fake API server has answered. */
static int lists_of(CURL *c, const struct af_test_fake_api *f, const char *kind_path)
{
    struct af_test_resp r;
    char url[128];
    json_t *j, *it;
    size_t i;
    int n = 0;

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/requests", f->admin_port);
    ck_assert_int_eq(af_test_http(c, NULL, url, NULL, 0, NULL, &r), CURLE_OK);
    j = json_loads(r.body ? r.body : "", 0, NULL);
    ck_assert_ptr_nonnull(j);
    json_array_foreach(j, i, it) {
        const char *p = json_string_value(json_object_get(it, "path"));
        size_t len = strlen(kind_path);
        if (p && !strncmp(p, kind_path, len) && (p[len] == '?' || !p[len]) &&
            !strstr(p, "watch=true"))
            n++;
    }
    json_decref(j);
    af_test_resp_free(&r);
    return n;
}

/* The running pods GET /costs counts for tenant `name` (-1 when there is no such tenant). */
static long tenant_pods(CURL *c, const struct af_test_server *s, const char *name)
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
        if (!strcmp(json_string_value(json_object_get(t, "name")), name))
            v = (long)json_integer_value(json_object_get(t, "pods"));
    /* watching an API server: the report says which resourceVersion it is as of */
    if (json_object_get(j, "tenants"))
        ck_assert_msg(json_is_string(json_object_get(j, "resource_version")), "%s", r.body);
    json_decref(j);
    af_test_resp_free(&r);
    return v;
}

START_TEST(test_a_reload_reprices_the_cached_nodes_of_a_live_cluster)
{
    struct af_test_fake_api f;
    struct af_test_server s;
    size_t len;
    char *catalog = af_test_read("policies/catalog.yaml", &len);
    char *policy = af_test_read("policies/default.yaml", &len);
    char *dir = af_test_temp_path("files");
    char *cat_path = af_xasprintf("%s/catalog.yaml", dir);
    char *pol_path = af_xasprintf("%s/policy.yaml", dir);
    char *text, *text2;
    CURL *c;
    int node_lists, pod_lists;
    long default_pods;

    if (!af_test_fake_api_start(&f))
        goto out;   /* no python3 or openssl here: nothing to talk to */
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    write_file(cat_path, catalog);
    write_file(pol_path, policy);
    {
        const char *const args[] = {"--kubeconfig", f.kubeconfig, "--catalog", cat_path,
                                    "--policy",     pol_path,     NULL};
        af_test_server_start(&s, args, false, NULL, NULL);
    }
    c = curl_easy_init();

    /* as listed at startup; a spot node added over the watch takes the policy's 60 % */
    await_price(c, &s, G5, 1.212, "catalog");
    ck_assert_str_eq(explain_node(c, &s, G5).cls, "nvidia-a10g");
    af_test_fake_api_do(&f, "add_node",
                        "{\"name\": \"" SPOT "\", \"instance_type\": \"p4d.24xlarge\", "
                        "\"gpus\": 8, \"labels\": {\"karpenter.sh/capacity-type\": \"spot\"}}");
    await_price(c, &s, SPOT, P4D_USD * 0.4, "policy");
    node_lists = lists_of(c, &f, "/api/v1/nodes");
    /* both pod sets (managed and not) have had their first list, however busy the machine */
    ck_assert(AF_TEST_WAIT_FOR(30, lists_of(c, &f, "/api/v1/pods") >= 2));
    pod_lists = lists_of(c, &f, "/api/v1/pods");

    /* a price fixed in the catalog: the g5 node already cached follows it */
    text = replace_after(catalog, "- name: g5.2xlarge\n", "price_on_demand_usd_hr: 1.212",
                         "price_on_demand_usd_hr: 2.5");
    write_file(cat_path, text);
    af_free(text);
    await_price(c, &s, G5, 2.5, "catalog");
    ck_assert_str_eq(explain_node(c, &s, G5).cls, "nvidia-a10g");

    /* the policy's spot discount: the spot node already cached follows it */
    text = replace_after(policy, "prices:", "default_spot_discount_pct: 60",
                         "default_spot_discount_pct: 30");
    write_file(pol_path, text);
    await_price(c, &s, SPOT, P4D_USD * 0.7, "policy");
    await_price(c, &s, G5, 2.5, "catalog");   /* and the catalog's price stays */

    /* the nodes were listed again, once a reload at least; the pods never */
    ck_assert_int_ge(lists_of(c, &f, "/api/v1/nodes"), node_lists + 2);
    ck_assert_int_eq(lists_of(c, &f, "/api/v1/pods"), pod_lists);

    /* the watch goes on after the lists: the spot node turning on-demand arrives */
    af_test_fake_api_do(&f, "modify_node",
                        "{\"name\": \"" SPOT "\", "
                        "\"labels\": {\"karpenter.sh/capacity-type\": \"on-demand\"}}");
    await_price(c, &s, SPOT, P4D_USD, "catalog");

    /* pods: their tenant is the policy's, per request; a tenant for namespace default
     * takes its pods with nothing listed */
    default_pods = tenant_pods(c, &s, "default");
    ck_assert_int_gt(default_pods, 0);
    ck_assert_int_eq(tenant_pods(c, &s, "research"), -1);
    text2 = af_xasprintf("%s\ntenants:\n  - name: research\n    namespaces: [default]\n"
                         "    budget_usd_per_hour: 100\n",
                         text);
    af_free(text);
    write_file(pol_path, text2);
    af_free(text2);
    for (int i = 0; i < POLLS && tenant_pods(c, &s, "research") != default_pods; i++)
        usleep(50000);
    ck_assert_int_eq(tenant_pods(c, &s, "research"), default_pods);
    ck_assert_int_eq(lists_of(c, &f, "/api/v1/pods"), pod_lists);

    curl_easy_cleanup(c);
    ck_assert_int_eq(af_test_server_stop(&s), 0);
    af_test_fake_api_stop(&f);
out:
    af_free(catalog);
    af_free(policy);
    af_free(cat_path);
    af_free(pol_path);
    af_free(dir);
}
END_TEST

static Suite *relist_suite(void)
{
    Suite *s = suite_create("relist");
    TCase *tc = tcase_create("live");

    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, test_a_reload_reprices_the_cached_nodes_of_a_live_cluster);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(relist_suite());
}
