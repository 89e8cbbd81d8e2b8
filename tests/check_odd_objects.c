/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Odd objects, from the API server and in cluster files: a "\u0000" in a
 * string, a node named twice, a node whose accelfit.io/hourly-price is not a
 * price. One bad object never keeps the rest of the cluster out, and nothing
 * is dropped silently: the log says what was skipped or replaced, /explain
 * says what was ignored.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "support/http_client.h"
#include "support/support.h"

static char *write_temp(const char *text)
{
    char *path = strdup("/tmp/af-cluster-XXXXXX.json");
    int fd = mkstemps(path, 5);
    size_t len = strlen(text);

    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, len), (ssize_t)len);
    close(fd);
    return path;
}

#define NODE(name, anns, itype)                                                                    \
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"" name "\",\"annotations\":{" anns "},"          \
    "\"labels\":{\"node.kubernetes.io/instance-type\":\"" itype "\"}},\"status\":{"                \
    "\"allocatable\":{\"cpu\":\"4\",\"memory\":\"16Gi\",\"pods\":\"110\","                        \
    "\"nvidia.com/gpu\":\"1\"}}}"

static const char cluster[] =
    "{\"kind\":\"List\",\"items\":["
    NODE("twice", "", "g4dn.xlarge") ","
    NODE("twice", "", "g5.xlarge") ","
    NODE("badprice", "\"accelfit.io/hourly-price\":\"0x10\"", "g5.xlarge") ","
    NODE("nul\\u0000name", "", "g5.xlarge") ","
    "{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\",\"namespace\":\"t\",\"annotations\":{"
    "\"accelfit.io/workload\":\"inference\"}},\"spec\":{\"containers\":[{\"name\":\"c\","
    "\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"1\"}}}]},\"status\":{\"phase\":"
    "\"Pending\"}}]}";

START_TEST(test_odd_cluster_file_is_loaded_and_reported)
{
    char *path = write_temp(cluster);
    const char *const args[] = {"--cluster", path, NULL};
    struct af_test_server s;
    struct af_test_resp r;
    CURL *c = curl_easy_init();
    char url[256], *log;
    json_t *resp, *nodes, *n;
    size_t i;
    bool saw_badprice = false, saw_twice = false;

    af_test_server_start(&s, args, false, NULL, NULL);
    snprintf(url, sizeof(url), "%s/explain?pod=t/p", s.base);
    ck_assert_int_eq(af_test_http(c, NULL, url, NULL, 0, NULL, &r), CURLE_OK);
    ck_assert_int_eq(r.status, 200);
    resp = json_loads(r.body, 0, NULL);
    ck_assert_ptr_nonnull(resp);
    nodes = json_object_get(resp, "nodes");
    /* the NUL-named node was skipped; the other two (one of them named twice) are there */
    ck_assert_int_eq(json_array_size(nodes), 2);
    json_array_foreach(nodes, i, n) {
        const char *name = json_string_value(json_object_get(n, "name"));
        if (!strcmp(name, "badprice")) {
            saw_badprice = true;
            ck_assert_str_eq(json_string_value(json_object_get(n, "price_source")), "catalog");
            ck_assert(strstr(json_string_value(json_object_get(n, "price_note")),
                             "accelfit.io/hourly-price") != NULL);
        }
        if (!strcmp(name, "twice")) {
            saw_twice = true;
            /* the later object wins */
            ck_assert_str_eq(json_string_value(json_object_get(n, "instance_type")), "g5.xlarge");
            ck_assert_str_eq(json_string_value(json_object_get(n, "class_source")),
                             "node.kubernetes.io/instance-type");
        }
    }
    ck_assert(saw_badprice && saw_twice);
    json_decref(resp);
    af_test_resp_free(&r);

    log = af_test_server_log(&s);
    ck_assert_msg(strstr(log, "names a node twice") && strstr(log, "twice"), "%s", log);
    ck_assert_msg(strstr(log, "node price annotation ignored"), "%s", log);
    ck_assert_msg(strstr(log, "skipped objects that could not be decoded"), "%s", log);
    free(log);
    af_test_server_stop(&s);
    curl_easy_cleanup(c);
    unlink(path);
    free(path);
}
END_TEST

START_TEST(test_json_logs_write_numbers_as_numbers)
{
    const char *const args[] = {"--demo", "--log-format", "json", "--log-level", "debug", NULL};
    struct af_test_server s;
    struct af_test_resp r;
    CURL *c = curl_easy_init();
    size_t len;
    char url[256], *log, *line, *next;
    char *body = af_test_read("tests/fixtures/kube-scheduler/filter-nodecache-true.json", &len);
    bool saw_request = false;

    af_test_server_start(&s, args, false, NULL, NULL);
    snprintf(url, sizeof(url), "%s/filter", s.base);
    ck_assert_int_eq(af_test_http(c, "POST", url, body, len, NULL, &r), CURLE_OK);
    af_test_resp_free(&r);
    af_test_server_stop(&s);
    log = af_test_server_log(&s);
    for (line = log; line && *line; line = next) {
        json_t *j;
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        j = json_loads(line, 0, NULL);
        ck_assert_msg(j != NULL, "not JSON: %s", line);
        if (!strcmp(json_string_value(json_object_get(j, "msg")), "request")) {
            saw_request = true;
            ck_assert(json_is_integer(json_object_get(j, "status")));
            ck_assert(json_is_integer(json_object_get(j, "candidates")));
            ck_assert(json_is_boolean(json_object_get(j, "not_ready")));
        }
        if (json_object_get(j, "listen"))
            ck_assert(json_is_string(json_object_get(j, "listen")));
        json_decref(j);
    }
    ck_assert(saw_request);
    free(log);
    free(body);
    curl_easy_cleanup(c);
}
END_TEST

/* The routes added for the recommender, rollouts and the webhook answer over HTTP. */
START_TEST(test_recommend_rollouts_and_mutate_routes)
{
    const char *const args[] = {"--demo", NULL};
    const char *const argv[] = {"accelfit", "recommend", "--workload", "classical-ml",
                                "--output", "json", NULL};
    struct af_test_server s;
    struct af_test_resp r;
    CURL *c = curl_easy_init();
    char url[256], *out = NULL, *err = NULL;

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    af_test_server_start(&s, args, false, NULL, NULL);
    snprintf(url, sizeof(url), "%s/recommend?workload=classical-ml", s.base);
    ck_assert_int_eq(af_test_http(c, NULL, url, NULL, 0, NULL, &r), CURLE_OK);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, out);
    af_test_resp_free(&r);
    snprintf(url, sizeof(url), "%s/recommend", s.base);
    ck_assert_int_eq(af_test_http(c, "POST", url, "{\"workload\":\"classical-ml\"}", 27, NULL, &r),
                     CURLE_OK);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(r.body, out);
    af_test_resp_free(&r);
    snprintf(url, sizeof(url), "%s/rollouts", s.base);
    ck_assert_int_eq(af_test_http(c, NULL, url, NULL, 0, NULL, &r), CURLE_OK);
    ck_assert_int_eq(r.status, 200);
    ck_assert(strstr(r.body, "\"rollouts\"") != NULL);
    af_test_resp_free(&r);
    snprintf(url, sizeof(url), "%s/mutate?timeout=5s", s.base);
    ck_assert_int_eq(af_test_http(c, "POST", url, "{}", 2, NULL, &r), CURLE_OK);
    ck_assert_int_eq(r.status, 400);
    ck_assert(strstr(r.body, "AdmissionReview") != NULL);
    af_test_resp_free(&r);
    af_test_server_stop(&s);
    curl_easy_cleanup(c);
    free(out);
    free(err);
}
END_TEST

static void count_item(void *ud, struct af_node_info *node, struct af_pod_info *pod)
{
    size_t *n = ud;

    if (node)
        n[0]++;
    if (pod)
        n[1]++;
    af_node_info_unref(node);
    af_pod_info_unref(pod);
}

START_TEST(test_nul_in_one_object_does_not_fail_a_list_page)
{
    /* A LIST page as the API server sends it: one node's label holds \u0000 (the label is
     * ignored, the node kept), another's name does (that node is skipped and counted); a
     * pod's annotation holds one. jansson with flags 0 rejected the whole page, so the
     * cache never synced and every pod was refused. */
    static const char page[] =
        "{\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"42\"},"
        "\"items\":[{\"metadata\":{\"name\":\"a\",\"labels\":{\"team\":\"x\\u0000y\"}}},"
        "{\"metadata\":{\"name\":\"b\\u0000c\"}},"
        "{\"metadata\":{\"name\":\"d\"}}]}";
    static const char pods_page[] =
        "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"43\"},\"items\":["
        "{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\",\"annotations\":{"
        "\"accelfit.io/workload\":\"train\\u0000ing\"}},\"spec\":{\"containers\":[]}}]}";
    struct af_config *cfg = NULL;
    struct af_error err = {0};
    size_t n[2] = {0, 0}, skipped = 0;
    char *rv = NULL, *cont = NULL;

    ck_assert_int_eq(af_config_load(&cfg, NULL, NULL, &err), 0);
    ck_assert_msg(af_codec_decode_list_skip(cfg, page, strlen(page), count_item, n, &rv, &cont,
                                            &skipped, &err) == 0,
                  "%s", err.text);
    ck_assert_uint_eq(n[0], 2);
    ck_assert_uint_eq(skipped, 1);
    ck_assert_str_eq(rv, "42");
    free(rv);
    rv = NULL;
    skipped = 0;
    ck_assert_int_eq(af_codec_decode_list_skip(cfg, pods_page, strlen(pods_page), count_item, n,
                                               &rv, &cont, &skipped, &err),
                     0);
    ck_assert_uint_eq(n[1], 1);
    ck_assert_uint_eq(skipped, 0);
    free(rv);
    af_config_unref(cfg);
}
END_TEST

Suite *af_odd_objects_suite(void);
Suite *af_odd_objects_suite(void)
{
    Suite *s = suite_create("odd-objects");
    TCase *tc = tcase_create("odd-objects");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_nul_in_one_object_does_not_fail_a_list_page);
    tcase_add_test(tc, test_odd_cluster_file_is_loaded_and_reported);
    tcase_add_test(tc, test_json_logs_write_numbers_as_numbers);
    tcase_add_test(tc, test_recommend_rollouts_and_mutate_routes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_odd_objects_suite());
}
