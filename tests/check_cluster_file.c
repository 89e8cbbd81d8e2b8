/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cluster files (`accelfit serve --cluster FILE`): every way a file can be wrong
 * is reported on one line that names the file, what was expected and what was
 * found (line and column for malformed JSON and YAML), with exit status 2.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/util.h"
#include "support/support.h"

static char dir[64];

static const char *tpath(const char *name)
{
    static char bufs[4][256];
    static int i;
    char *b = bufs[i++ % 4];
    snprintf(b, 256, "%s/%s", dir, name);
    return b;
}

static void put(const char *name, const char *text)
{
    FILE *f = fopen(tpath(name), "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/af-cluster-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

static const struct {
    const char *file;       /* created under the temp dir unless `missing`/`directory` */
    const char *text;       /* NULL: not created (missing), "" written as an empty file */
    bool directory;
    const char *want[3];    /* substrings of the one error line, after "FILE" */
} cases[] = {
    {"missing.yaml", NULL, false, {"missing.yaml: no such file", "expected a JSON or YAML List"}},
    {"adir", NULL, true, {"adir: is a directory", "expected a file holding"}},
    {"empty.yaml", "", false, {"empty.yaml: the file is empty", "expected a JSON or YAML List"}},
    {"blank.json", "\n  \n", false, {"blank.json: the file is empty"}},
    {"bad.yaml", "kind: List\nitems:\n- kind: Node\n  metadata: {name: a\n", false,
     {"bad.yaml:5:1: malformed YAML", "flow mapping"}},
    {"flow.yaml", "{kind: List, items: [\n", false, {"flow.yaml:2:1: malformed YAML"}},
    {"bad.json", "{\"kind\": \"List\",\n \"items\": [\n  {\"kind\": \"Node\",}\n]}\n", false,
     {"bad.json:3:19: malformed JSON", "expected a JSON or YAML List"}},
    {"deploy.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n", false,
     {"deploy.yaml: expected kind List, NodeList, PodList, Node or Pod, found kind 'Deployment'"}},
    {"nodee.yaml", "apiVersion: v1\nkind: Nodee\nmetadata: {name: a}\n", false,
     {"nodee.yaml: expected kind List, NodeList, PodList, Node or Pod, found kind 'Nodee'; did "
      "you mean Node?"}},
    {"map.yaml", "nodes: []\n", false, {"map.yaml: expected a JSON or YAML List",
                                          "found a mapping with neither kind nor items"}},
    {"scalar.yaml", "hello\n", false, {"scalar.yaml: expected a JSON or YAML List",
                                         "found a string"}},
    {"comments.yaml", "# nothing here yet\n", false, {"comments.yaml: the file holds no document"}},
};

START_TEST(test_bad_cluster_file_says_file_expected_found)
{
    const char *path = tpath(cases[_i].file);
    char *out = NULL, *err = NULL;

    if (cases[_i].directory)
        ck_assert_int_eq(mkdir(path, 0700), 0);
    else if (cases[_i].text)
        put(cases[_i].file, cases[_i].text);
    const char *argv[] = {"accelfit", "serve", "--cluster", path, "--listen", "127.0.0.1:1", NULL};
    int rc = af_test_exec(argv, NULL, &out, &err);
    ck_assert_msg(rc == 2, "exit %d, stderr: %s", rc, err);
    ck_assert_msg(strstr(err, "accelfit serve: cannot load cluster: ") == err, "got: %s", err);
    ck_assert_msg(strchr(err, '\n') == err + strlen(err) - 1, "not one line: %s", err);
    ck_assert_msg(strstr(err, dir), "file not named: %s", err);
    for (size_t k = 0; k < 3 && cases[_i].want[k]; k++)
        ck_assert_msg(strstr(err, cases[_i].want[k]), "want '%s', got: %s", cases[_i].want[k],
                      err);
    free(out);
    free(err);
}
END_TEST

/* How lists are asked for is one of the two encodings kube-scheduler names the same way;
 * anything else is refused before anything starts, naming both. */
START_TEST(test_bad_kube_api_content_type_is_refused)
{
    char *out = NULL, *err = NULL;
    const char *argv[] = {"accelfit", "serve", "--kubeconfig", "/nonexistent",
                          "--kube-api-content-type=application/yaml", NULL};

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 2);
    ck_assert_msg(strstr(err, "--kube-api-content-type must be application/vnd.kubernetes.protobuf "
                              "or application/json: 'application/yaml'"),
                  "%s", err);
    free(out);
    free(err);
}
END_TEST

/* An item of a kind accelfit does not read is skipped with a warning naming it and its
 * place; a misspelled Node or Pod says what it likely meant. Never silently 0 nodes. */
START_TEST(test_unknown_item_kinds_are_named)
{
    const char *path = tpath("typo.yaml");
    char *out = NULL, *err = NULL;
    const char *argv[] = {"accelfit", "costs", "--cluster", path, NULL};

    put("typo.yaml", "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Nodee\n"
                     "  metadata: {name: a}\n- kind: Service\n  metadata: {name: s}\n");
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    ck_assert_msg(strstr(err, "skipped=2"), "%s", err);
    ck_assert_msg(strstr(err, "items[0].kind: unknown kind 'Nodee'; did you mean Node?"), "%s",
                  err);
    free(out);
    free(err);
}
END_TEST

static void count(void *ud, struct af_node_info *node, struct af_pod_info *pod)
{
    int *n = ud;
    (*n)++;
    af_node_info_unref(node);
    af_pod_info_unref(pod);
}

/* A YAML file in flow style starts like JSON; it is read as the YAML it is. */
START_TEST(test_yaml_flow_style_file_loads)
{
    struct af_config *cfg = NULL;
    struct af_error err = {0};
    int n = 0;

    ck_assert_int_eq(af_config_load(&cfg, NULL, NULL, &err), 0);
    put("flow.yaml", "{kind: List, items: [{kind: Node, metadata: {name: a}},\n"
                     "  {kind: Pod, metadata: {name: p, namespace: d}}]}\n");
    ck_assert_msg(af_codec_load_cluster_file(cfg, tpath("flow.yaml"), count, &n, &err) == 0, "%s",
                  err.text);
    ck_assert_int_eq(n, 2);
    af_config_unref(cfg);
}
END_TEST

Suite *af_cluster_file_suite(void);
Suite *af_cluster_file_suite(void)
{
    Suite *s = suite_create("cluster_file");
    TCase *tc = tcase_create("errors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_bad_cluster_file_says_file_expected_found, 0,
                        (int)AF_ARRAY_SIZE(cases));
    tcase_add_test(tc, test_yaml_flow_style_file_loads);
    tcase_add_test(tc, test_unknown_item_kinds_are_named);
    tcase_add_test(tc, test_bad_kube_api_content_type_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_cluster_file_suite());
}
