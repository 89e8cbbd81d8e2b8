/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube: kubeconfig parsing, in-cluster config, exec credentials, and the
 * reflector end to end against tests/apiserver/fake_apiserver.py (HTTPS on
 * 127.0.0.1 with a throwaway CA made by the openssl CLI).
 */
#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "accelfit/cache.h"
#include "accelfit/config.h"
#include "accelfit/kube.h"
#include "accelfit/util.h"
#include "support/fake_api.h"
#include "support/support.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/af-kube-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void rm_tmpdir(void)
{
    char cmd[512];
    if (!tmpdir[0])
        return;
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    tmpdir[0] = '\0';
}

static const char *tpath(const char *name)
{
    static char bufs[8][512];
    static int i;
    char *b = bufs[i++ % 8];
    snprintf(b, 512, "%s/%s", tmpdir, name);
    return b;
}

static void write_file(const char *path, const char *text, int mode)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
    chmod(path, (mode_t)mode);
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

/* ---- kubeconfig ------------------------------------------------------------------------------ */

/* base64("PEM-CA\n") etc. */
#define CA_B64 "UEVNLUNBCg=="
#define CERT_B64 "UEVNLUNFUlQK"
#define KEY_B64 "UEVNLUtFWQo="

static const char kc_full[] =
    "apiVersion: v1\n"
    "kind: Config\n"
    "current-context: a\n"
    "clusters:\n"
    "- name: ca\n"
    "  cluster:\n"
    "    server: https://a.example:6443/\n"
    "    certificate-authority-data: " CA_B64 "\n"
    "    tls-server-name: kubernetes.default\n"
    "- name: cb\n"
    "  cluster:\n"
    "    server: https://b.example\n"
    "    certificate-authority: certs/ca.crt\n"
    "    insecure-skip-tls-verify: true\n"
    "contexts:\n"
    "- name: a\n"
    "  context: {cluster: ca, user: ua, namespace: ns}\n"
    "- name: b\n"
    "  context: {cluster: cb, user: ub}\n"
    "- name: c\n"
    "  context: {cluster: cb, user: uc}\n"
    "- name: e\n"
    "  context: {cluster: cb, user: ue}\n"
    "- name: nouser\n"
    "  context: {cluster: cb, user: ghost}\n"
    "- name: nocluster\n"
    "  context: {cluster: ghost, user: ua}\n"
    "users:\n"
    "- name: ua\n"
    "  user:\n"
    "    token: tok-a\n"
    "    client-certificate-data: " CERT_B64 "\n"
    "    client-key-data: " KEY_B64 "\n"
    "- name: ub\n"
    "  user:\n"
    "    tokenFile: tok/file\n"
    "    client-certificate: /abs/cert.pem\n"
    "    client-key: key.pem\n"
    "- name: uc\n"
    "  user:\n"
    "    auth-provider:\n"
    "      name: gcp\n"
    "- name: ue\n"
    "  user:\n"
    "    exec:\n"
    "      apiVersion: client.authentication.k8s.io/v1beta1\n"
    "      command: aws\n"
    "      args: [--region, us-west-2, eks, get-token, --cluster-name, prod]\n"
    "      env:\n"
    "      - name: AWS_PROFILE\n"
    "        value: prod\n";

START_TEST(test_kubeconfig_current_context_fields_and_data)
{
    struct af_kube_conn *c;
    struct af_error err;
    make_tmpdir();
    write_file(tpath("config"), kc_full, 0600);
    ck_assert_int_eq(af_kubeconfig_load(&c, tpath("config"), NULL, &err), 0);
    ck_assert_str_eq(c->server, "https://a.example:6443");
    ck_assert_str_eq(c->ca_pem, "PEM-CA\n");
    ck_assert_str_eq(c->tls_server_name, "kubernetes.default");
    ck_assert_str_eq(c->token, "tok-a");
    ck_assert_str_eq(c->client_cert_pem, "PEM-CERT\n");
    ck_assert_str_eq(c->client_key_pem, "PEM-KEY\n");
    ck_assert(!c->insecure);
    ck_assert_ptr_null(c->exec);
    ck_assert_str_eq(c->context, "a");
    af_kube_conn_free(c);
    rm_tmpdir();
}
END_TEST

START_TEST(test_kubeconfig_named_context_files_relative_to_kubeconfig)
{
    struct af_kube_conn *c;
    struct af_error err;
    char want[600];
    make_tmpdir();
    write_file(tpath("config"), kc_full, 0600);
    ck_assert_int_eq(af_kubeconfig_load(&c, tpath("config"), "b", &err), 0);
    ck_assert_str_eq(c->server, "https://b.example");
    ck_assert(c->insecure);
    snprintf(want, sizeof(want), "%s/certs/ca.crt", tmpdir);
    ck_assert_str_eq(c->ca_file, want);
    snprintf(want, sizeof(want), "%s/tok/file", tmpdir);
    ck_assert_str_eq(c->token_file, want);
    ck_assert_str_eq(c->client_cert_file, "/abs/cert.pem");
    snprintf(want, sizeof(want), "%s/key.pem", tmpdir);
    ck_assert_str_eq(c->client_key_file, want);
    ck_assert_ptr_null(c->token);
    af_kube_conn_free(c);
    rm_tmpdir();
}
END_TEST

START_TEST(test_kubeconfig_exec_plugin_fields)
{
    struct af_kube_conn *c;
    struct af_error err;
    make_tmpdir();
    write_file(tpath("config"), kc_full, 0600);
    ck_assert_int_eq(af_kubeconfig_load(&c, tpath("config"), "e", &err), 0);
    ck_assert_ptr_nonnull(c->exec);
    ck_assert_str_eq(c->exec->command, "aws");
    ck_assert_str_eq(c->exec->api_version, "client.authentication.k8s.io/v1beta1");
    ck_assert_str_eq(c->exec->args[0], "--region");
    ck_assert_str_eq(c->exec->args[5], "prod");
    ck_assert_ptr_null(c->exec->args[6]);
    ck_assert_str_eq(c->exec->env[0], "AWS_PROFILE=prod");
    ck_assert_ptr_null(c->exec->env[1]);
    af_kube_conn_free(c);
    rm_tmpdir();
}
END_TEST

static const struct {
    const char *yaml;       /* NULL: kc_full */
    const char *context;
    int rc;
    const char *text1, *text2;
} bad_cases[] = {
    {NULL, "c", AF_EUNSUPPORTED, "auth-provider", "\"uc\""},
    {NULL, "zzz", AF_ENOENT, "context \"zzz\" not found", NULL},
    {NULL, "nouser", AF_ENOENT, "user \"ghost\"", "not found"},
    {NULL, "nocluster", AF_ENOENT, "cluster \"ghost\"", "not found"},
    {"clusters: []\ncontexts: []\nusers: []\n", NULL, AF_EINVAL, "current-context", NULL},
    {"current-context: x\nclusters:\n- name: c\n  cluster: {server: 'https://h', proxy-url: "
     "'http://p:3128'}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\nusers:\n- name: "
     "u\n  user: {token: t}\n",
     NULL, AF_EUNSUPPORTED, "proxy-url", "\"c\""},
    {"current-context: x\nclusters:\n- name: c\n  cluster: {server: 'https://h'}\ncontexts:\n- "
     "name: x\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {username: admin, "
     "password: secret}\n",
     NULL, AF_EUNSUPPORTED, "username/password", "\"u\""},
    {"current-context: x\nclusters:\n- name: c\n  cluster: {server: 'https://h'}\ncontexts:\n- "
     "name: x\n  context: {cluster: c, user: u}\nusers:\n- name: u\n  user: {token: t, as: "
     "someone}\n",
     NULL, AF_EUNSUPPORTED, "impersonation", "\"u\""},
    {"current-context: x\nclusters:\n- name: c\n  cluster: {server: 'https://h', "
     "certificate-authority-data: '!!!'}\ncontexts:\n- name: x\n  context: {cluster: c, user: "
     "u}\nusers:\n- name: u\n  user: {token: t}\n",
     NULL, AF_EPARSE, "certificate-authority-data", "base64"},
    {"current-context: x\nclusters:\n- name: c\n  cluster: {}\ncontexts:\n- name: x\n  context: "
     "{cluster: c}\n",
     NULL, AF_EINVAL, "has no server", NULL},
    {"current-context: [\n", NULL, AF_EPARSE, "", NULL},
};

START_TEST(test_kubeconfig_errors_name_the_problem)
{
    struct af_kube_conn *c = (struct af_kube_conn *)1;
    struct af_error err;
    memset(&err, 0, sizeof(err));
    make_tmpdir();
    write_file(tpath("config"), bad_cases[_i].yaml ? bad_cases[_i].yaml : kc_full, 0600);
    int rc = af_kubeconfig_load(&c, tpath("config"), bad_cases[_i].context, &err);
    ck_assert_int_eq(rc, bad_cases[_i].rc);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err.text, bad_cases[_i].text1), "got: %s", err.text);
    if (bad_cases[_i].text2)
        ck_assert_msg(strstr(err.text, bad_cases[_i].text2), "got: %s", err.text);
    rm_tmpdir();
}
END_TEST

START_TEST(test_kubeconfig_env_first_of_colon_list)
{
    struct af_kube_conn *c;
    struct af_error err;
    char env[700];
    make_tmpdir();
    write_file(tpath("config"), kc_full, 0600);
    snprintf(env, sizeof(env), "%s:/nonexistent/other", tpath("config"));
    setenv("KUBECONFIG", env, 1);
    ck_assert_int_eq(af_kubeconfig_load(&c, NULL, "b", &err), 0);
    ck_assert_str_eq(c->server, "https://b.example");
    af_kube_conn_free(c);
    setenv("KUBECONFIG", "/nonexistent/kubeconfig", 1);
    ck_assert_int_ne(af_kubeconfig_load(&c, NULL, NULL, &err), 0);
    ck_assert_ptr_nonnull(strstr(err.text, "cannot read kubeconfig"));
    unsetenv("KUBECONFIG");
    rm_tmpdir();
}
END_TEST

START_TEST(test_incluster_joins_host_port_and_finds_token)
{
    struct af_kube_conn *c;
    struct af_error err;
    make_tmpdir();
    unsetenv("KUBERNETES_SERVICE_HOST");
    ck_assert_int_eq(af_kube_incluster(&c, &err), AF_ENOENT);
    setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    setenv("AF_SERVICEACCOUNT_DIR", tmpdir, 1);
    ck_assert_int_ne(af_kube_incluster(&c, &err), 0);   /* no token yet */
    write_file(tpath("token"), "sa-token\n", 0600);
    ck_assert_int_eq(af_kube_incluster(&c, &err), 0);
    ck_assert_str_eq(c->server, "https://[fd00::1]:443");
    ck_assert_str_eq(c->token_file, tpath("token"));
    ck_assert_str_eq(c->ca_file, tpath("ca.crt"));
    af_kube_conn_free(c);
    setenv("KUBERNETES_SERVICE_HOST", "10.100.0.1", 1);
    ck_assert_int_eq(af_kube_incluster(&c, &err), 0);
    ck_assert_str_eq(c->server, "https://10.100.0.1:443");
    af_kube_conn_free(c);
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("AF_SERVICEACCOUNT_DIR");
    rm_tmpdir();
}
END_TEST

/* ---- loading rules (kubectl's): --kubeconfig, KUBECONFIG merged, in-cluster, ~/.kube/config ---- */

/* Two files as `KUBECONFIG=one:two` merges them. */
static const char kc_one[] =
    "current-context: a\n"
    "clusters:\n"
    "- name: shared\n"
    "  cluster: {server: 'https://one.example'}\n"
    "contexts:\n"
    "- name: a\n"
    "  context: {cluster: shared, user: u1}\n"
    "users:\n"
    "- name: u1\n"
    "  user: {token: tok-one}\n";
static const char kc_two[] =
    "current-context: b\n"
    "clusters:\n"
    "- name: shared\n"
    "  cluster: {server: 'https://two.example'}\n"
    "- name: only-two\n"
    "  cluster: {server: 'https://only-two.example'}\n"
    "contexts:\n"
    "- name: a\n"
    "  context: {cluster: only-two, user: u2}\n"
    "- name: b\n"
    "  context: {cluster: shared, user: u2}\n"
    "users:\n"
    "- name: u2\n"
    "  user: {tokenFile: token}\n";

/* A clean environment: HOME, KUBECONFIG, in-cluster variables and the SA dir under tmpdir. */
static void rules_env(void)
{
    make_tmpdir();
    ck_assert_int_eq(mkdir(tpath("home"), 0700), 0);
    ck_assert_int_eq(mkdir(tpath("sa"), 0700), 0);
    ck_assert_int_eq(mkdir(tpath("two"), 0700), 0);
    setenv("HOME", tpath("home"), 1);
    setenv("AF_SERVICEACCOUNT_DIR", tpath("sa"), 1);
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
}

static void rules_env_done(void)
{
    unsetenv("KUBECONFIG");
    unsetenv("KUBERNETES_SERVICE_HOST");
    unsetenv("KUBERNETES_SERVICE_PORT");
    unsetenv("AF_SERVICEACCOUNT_DIR");
    rm_tmpdir();
}

START_TEST(test_kubeconfig_list_merges_first_wins)
{
    struct af_kube_source src = {0};
    struct af_kube_conn *c;
    struct af_error err;
    char env[2048];

    rules_env();
    write_file(tpath("one"), kc_one, 0600);
    write_file(tpath("two/config"), kc_two, 0600);
    /* a missing file in the list is passed over, as kubectl does */
    snprintf(env, sizeof(env), "%s:%s:%s", tpath("one"), tpath("missing"), tpath("two/config"));
    setenv("KUBECONFIG", env, 1);

    /* current-context from the first file that sets it; context a from the first file */
    ck_assert_int_eq(af_kube_conn_resolve(&c, &src, &err), 0);
    ck_assert_str_eq(c->context, "a");
    ck_assert_str_eq(c->server, "https://one.example");
    ck_assert_str_eq(c->token, "tok-one");
    ck_assert_ptr_nonnull(strstr(c->origin, "KUBECONFIG="));
    af_kube_conn_free(c);

    /* a context only the second file has; its cluster "shared" is the first file's (first
     * wins), its user the second file's with tokenFile relative to that file */
    src.context = "b";
    ck_assert_int_eq(af_kube_conn_resolve(&c, &src, &err), 0);
    ck_assert_str_eq(c->context, "b");
    ck_assert_str_eq(c->server, "https://one.example");
    ck_assert_str_eq(c->token_file, tpath("two/token"));
    af_kube_conn_free(c);

    /* in the other order, the second file's values win */
    snprintf(env, sizeof(env), "%s:%s", tpath("two/config"), tpath("one"));
    setenv("KUBECONFIG", env, 1);
    src.context = NULL;
    ck_assert_int_eq(af_kube_conn_resolve(&c, &src, &err), 0);
    ck_assert_str_eq(c->context, "b");
    ck_assert_str_eq(c->server, "https://two.example");
    af_kube_conn_free(c);

    /* --kubeconfig wins over KUBECONFIG */
    src.kubeconfig = tpath("one");
    ck_assert_int_eq(af_kube_conn_resolve(&c, &src, &err), 0);
    ck_assert_str_eq(c->context, "a");
    ck_assert_str_eq(c->server, "https://one.example");
    ck_assert_ptr_nonnull(strstr(c->origin, "--kubeconfig"));
    af_kube_conn_free(c);

    /* no file of the list exists: an error naming the first */
    snprintf(env, sizeof(env), "%s:%s", tpath("nope1"), tpath("nope2"));
    setenv("KUBECONFIG", env, 1);
    src.kubeconfig = NULL;
    ck_assert_int_eq(af_kube_conn_resolve(&c, &src, &err), AF_ENOENT);
    ck_assert_ptr_null(c);
    ck_assert_msg(strstr(err.text, "cannot read kubeconfig"), "got: %s", err.text);
    ck_assert_msg(strstr(err.file, "nope1"), "got: %s", err.file);
    rules_env_done();
}
END_TEST

START_TEST(test_kubeconfig_fallbacks_incluster_then_home)
{
    struct af_kube_source src = {0};
    struct af_kube_conn *c;
    struct af_error err;

    rules_env();
    /* nothing anywhere: the error names every place tried */
    ck_assert_int_eq(af_kube_conn_resolve(&c, &src, &err), AF_ENOENT);
    ck_assert_msg(strstr(err.text, "KUBECONFIG is unset"), "got: %s", err.text);
    ck_assert_msg(strstr(err.text, "KUBERNETES_SERVICE_HOST"), "got: %s", err.text);
    ck_assert_msg(strstr(err.text, "/home/.kube/config does not exist"), "got: %s", err.text);

    /* ~/.kube/config */
    ck_assert_int_eq(mkdir(tpath("home/.kube"), 0700), 0);
    write_file(tpath("home/.kube/config"), kc_two, 0600);
    ck_assert_int_eq(af_kube_conn_resolve(&c, &src, &err), 0);
    ck_assert_str_eq(c->server, "https://two.example");
    ck_assert_ptr_nonnull(strstr(c->origin, "~/.kube/config"));
    af_kube_conn_free(c);

    /* the service host alone is not a pod: the token must be mounted too */
    setenv("KUBERNETES_SERVICE_HOST", "10.100.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "443", 1);
    ck_assert_int_eq(af_kube_conn_resolve(&c, &src, &err), 0);
    ck_assert_str_eq(c->server, "https://two.example");
    af_kube_conn_free(c);

    /* in a pod, in-cluster comes before ~/.kube/config */
    write_file(tpath("sa/token"), "sa-token\n", 0600);
    ck_assert_int_eq(af_kube_conn_resolve(&c, &src, &err), 0);
    ck_assert_str_eq(c->server, "https://10.100.0.1:443");
    ck_assert_str_eq(c->token_file, tpath("sa/token"));
    ck_assert_str_eq(c->origin, "in-cluster");
    af_kube_conn_free(c);

    /* ... but a --context names a kubeconfig entry */
    src.context = "a";
    ck_assert_int_eq(af_kube_conn_resolve(&c, &src, &err), 0);
    ck_assert_str_eq(c->server, "https://only-two.example");
    af_kube_conn_free(c);

    /* and KUBECONFIG comes before in-cluster */
    write_file(tpath("one"), kc_one, 0600);
    setenv("KUBECONFIG", tpath("one"), 1);
    src.context = NULL;
    ck_assert_int_eq(af_kube_conn_resolve(&c, &src, &err), 0);
    ck_assert_str_eq(c->server, "https://one.example");
    af_kube_conn_free(c);

    /* --in-cluster is only in-cluster */
    src.in_cluster = true;
    ck_assert_int_eq(af_kube_conn_resolve(&c, &src, &err), 0);
    ck_assert_str_eq(c->server, "https://10.100.0.1:443");
    af_kube_conn_free(c);
    rules_env_done();
}
END_TEST

/* ---- the fake API server -------------------------------------------------------------------- */

/* Extra arguments for the next rig_setup's server (NULL-terminated), e.g. --synthetic-nodes. */
static const char *const *server_extra;

static const struct {
    const char *name;
    enum af_res res;
} tracked[] = {
    {"cpu", AF_RES_CPU},
    {"memory", AF_RES_MEMORY},
    {"nvidia.com/gpu", AF_RES_GPU},
    {"aws.amazon.com/neuron", AF_RES_NEURON},
    {"aws.amazon.com/neuroncore", AF_RES_NEURONCORE},
};

/* Compares a snapshot with the server's dump; writes the first difference to `why`. */
static bool snapshot_equals_dump(const struct af_snapshot *s, json_t *d, char *why, size_t n)
{
    json_t *nodes = json_object_get(d, "nodes"), *pods = json_object_get(d, "pods");
    json_t *used = json_object_get(d, "used");
    if (!s) {
        snprintf(why, n, "no snapshot yet");
        return false;
    }
    if (!s->synced) {
        snprintf(why, n, "snapshot not synced");
        return false;
    }
    if (s->n_nodes != json_array_size(nodes)) {
        snprintf(why, n, "nodes: have %zu, server %zu", s->n_nodes, json_array_size(nodes));
        return false;
    }
    for (size_t i = 0; i < s->n_nodes; i++) {
        const char *want = json_string_value(json_array_get(nodes, i));
        if (strcmp(s->nodes[i].info->name, want)) {
            snprintf(why, n, "node %zu: have %s, server %s", i, s->nodes[i].info->name, want);
            return false;
        }
        json_t *u = json_object_get(used, want);
        for (size_t r = 0; r < AF_ARRAY_SIZE(tracked); r++) {
            json_int_t w = json_integer_value(json_object_get(u, tracked[r].name));
            if (s->nodes[i].used.v[tracked[r].res] != (int64_t)w) {
                snprintf(why, n, "node %s used %s: have %lld, server %lld", want,
                         tracked[r].name, (long long)s->nodes[i].used.v[tracked[r].res],
                         (long long)w);
                return false;
            }
        }
    }
    if (s->n_pods != json_array_size(pods)) {
        snprintf(why, n, "pods: have %zu, server %zu", s->n_pods, json_array_size(pods));
        return false;
    }
    size_t i;
    json_t *p;
    json_array_foreach(pods, i, p)
    {
        const char *ns = json_string_value(json_object_get(p, "ns"));
        const char *name = json_string_value(json_object_get(p, "name"));
        const char *node = json_string_value(json_object_get(p, "node"));
        const struct af_pod_brief *pi = af_snapshot_find_pod(s, ns, name);
        if (!pi) {
            snprintf(why, n, "pod %s/%s missing", ns, name);
            return false;
        }
        if ((node == NULL) != (pi->node_name == NULL) ||
            (node && strcmp(node, pi->node_name))) {
            snprintf(why, n, "pod %s/%s node: have %s, server %s", ns, name,
                     pi->node_name ? pi->node_name : "-", node ? node : "-");
            return false;
        }
    }
    return true;
}

/* Polls (up to 30 s) until the published snapshot equals the server's objects. */
static void wait_in_sync(const struct af_test_fake_api *srv, struct af_publisher *pub,
                         const char *step)
{
    char why[512] = "";
    for (int i = 0; i < 300; i++) {
        json_t *d = af_test_fake_api_admin(srv, "dump", NULL);
        struct af_snapshot *s = af_publisher_acquire(pub);
        bool eq = snapshot_equals_dump(s, d, why, sizeof(why));
        af_snapshot_unref(s);
        json_decref(d);
        if (eq)
            return;
        sleep_s(0.1);
    }
    ck_abort_msg("after %s: cache never matched the server: %s", step, why);
}

static int count_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static int count_threads(void)
{
    char line[256];
    int n = -1;
    FILE *f = fopen("/proc/self/status", "r");
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n;
}

struct rig {
    struct af_test_fake_api srv;
    struct af_config_holder cfg;
    struct af_publisher pub;
    struct af_cache_status st;
    struct af_kube *k;
    int fds0, threads0;
};

static struct af_kube_conn *test_conn(void)
{
    struct af_kube_conn *c = af_xcalloc(1, sizeof(*c));
    c->server = af_xasprintf("https://127.0.0.1:%d", 0);
    c->ca_file = af_xstrdup(tpath("ca.crt"));
    c->context = af_xstrdup("test");
    return c;
}

static void rig_start(struct rig *r, struct af_kube_conn *conn)
{
    struct af_kube_options opt;
    struct af_config *cfg;
    struct af_error err;
    af_kube_options_default(&opt);
    opt.page_size = 2;
    opt.watch_timeout_min_s = 4;
    opt.backoff_initial_s = 0.05;
    opt.backoff_max_s = 0.4;
    opt.publish_interval_s = 0.01;
    opt.events_per_minute = 600;
    ck_assert_int_eq(af_config_load(&cfg, NULL, NULL, &err), 0);
    af_config_holder_init(&r->cfg, cfg);
    af_publisher_init(&r->pub);
    memset(&r->st, 0, sizeof(r->st));
    free(conn->server);
    /* The server URL carries a proxy path (as Rancher-style API endpoints do): every
     * request must keep it. The fake server answers under it. */
    conn->server = af_xasprintf("https://127.0.0.1:%d/k8s/clusters/c-1/", r->srv.port);
    ck_assert_int_eq(af_kube_start(&r->k, conn, &opt, &r->cfg, &r->pub, &r->st), 0);
}

static void rig_stop(struct rig *r)
{
    uint64_t t0 = af_now_ns();
    af_kube_stop(r->k);
    fprintf(stderr, "af_kube_stop took %.3f s\n", (double)(af_now_ns() - t0) / 1e9);
    af_publisher_destroy(&r->pub);
    af_config_holder_destroy(&r->cfg);
    af_test_fake_api_stop(&r->srv);
    ck_assert_int_eq(count_threads(), r->threads0);
    ck_assert_int_eq(count_fds(), r->fds0);
}

static bool rig_setup(struct rig *r)
{
    if (!af_test_fake_api_available()) {
        fprintf(stderr, "SKIP: python3 not found; end-to-end reflector tests skipped\n");
        return false;
    }
    memset(r, 0, sizeof(*r));
    make_tmpdir();
    af_test_make_cert(tmpdir, "srv", "IP:127.0.0.1,DNS:localhost,DNS:kubernetes.test");
    setenv("AF_KUBE_LOW_SPEED_TIME", "2", 1);
    r->fds0 = count_fds();
    r->threads0 = count_threads();
    af_test_fake_api_spawn(&r->srv, tpath("srv.crt"), tpath("srv.key"), "token-1", server_extra);
    return true;
}

static uint64_t stat_u(_Atomic uint_least64_t *v)
{
    return (uint64_t)atomic_load(v);
}

#define NODE_A "ip-10-0-1-10.us-west-2.compute.internal"
#define NODE_B "ip-10-0-1-40.us-west-2.compute.internal"

START_TEST(test_reflector_stays_equal_to_server_through_faults)
{
    struct rig r;
    if (!rig_setup(&r))
        return;
    write_file(tpath("token"), "token-1\n", 0600);
    struct af_kube_conn *conn = test_conn();
    conn->token_file = af_xstrdup(tpath("token"));
    rig_start(&r, conn);

    wait_in_sync(&r.srv, &r.pub, "initial sync");
    ck_assert(atomic_load(&r.st.synced));
    /* from here on watch events arrive split across chunks and several per chunk */
    af_test_fake_api_do(&r.srv, "fragment", "{\"on\":true}");
    ck_assert_int_eq(stat_u(&r.st.nodes), 5);
    ck_assert_int_eq(stat_u(&r.st.pods), 4);

    /* live changes: add, bind, resize, terminal, delete; a node arriving after its pods */
    af_test_fake_api_do(&r.srv, "add_pod",
                        "{\"ns\":\"team\",\"name\":\"w1\",\"cpu\":\"1500m\",\"gpus\":2}");
    af_test_fake_api_do(&r.srv, "modify_pod",
                        "{\"ns\":\"team\",\"name\":\"w1\",\"node\":\"" NODE_B "\"}");
    af_test_fake_api_do(&r.srv, "add_pod",
                        "{\"ns\":\"team\",\"name\":\"early\",\"node\":\"late-node\","
                        "\"cpu\":\"2\"}");
    af_test_fake_api_do(&r.srv, "add_node",
                        "{\"name\":\"late-node\",\"instance_type\":\"g5.xlarge\"}");
    af_test_fake_api_do(&r.srv, "modify_pod",
                        "{\"ns\":\"default\",\"name\":\"gpu-train-0\",\"phase\":\"Succeeded\"}");
    af_test_fake_api_do(&r.srv, "delete_pod", "{\"ns\":\"default\",\"name\":\"gpu-train-1\"}");
    wait_in_sync(&r.srv, &r.pub, "live changes");
    ck_assert_uint_gt(stat_u(&r.st.events_applied), 0);

    /* watch closed halfway through an event, with a change pending */
    af_test_fake_api_do(&r.srv, "add_pod",
                        "{\"ns\":\"team\",\"name\":\"w2\",\"node\":\"" NODE_A "\",\"cpu\":\"1\"}");
    af_test_fake_api_do(&r.srv, "close_watches", "{}");
    af_test_fake_api_do(&r.srv, "add_pod",
                        "{\"ns\":\"team\",\"name\":\"w3\",\"node\":\"" NODE_A "\",\"cpu\":\"1\"}");
    wait_in_sync(&r.srv, &r.pub, "watch closed mid-object");

    /* in-band ERROR 410 Expired: relist with a consistent read */
    uint64_t relists = stat_u(&r.st.relists);
    af_test_fake_api_do(&r.srv, "compact", "{}");
    af_test_fake_api_do(&r.srv, "expire_watches", "{}");
    af_test_fake_api_do(&r.srv, "delete_pod", "{\"ns\":\"team\",\"name\":\"w2\"}");
    af_test_fake_api_do(&r.srv, "delete_node", "{\"name\":\"" NODE_B "\"}");
    wait_in_sync(&r.srv, &r.pub, "in-band 410");
    for (int i = 0; i < 300 && stat_u(&r.st.relists) < relists + 2; i++)
        sleep_s(0.1);
    ck_assert_uint_ge(stat_u(&r.st.relists), relists + 2);

    /* a relist whose continue token expires: one full list instead */
    af_test_fake_api_do(&r.srv, "expire_continue", "{\"count\":1}");
    af_test_fake_api_do(&r.srv, "add_pod",
                        "{\"ns\":\"team\",\"name\":\"c1\",\"node\":\"" NODE_A "\"}");
    af_test_fake_api_do(&r.srv, "compact", "{}");
    af_test_fake_api_do(&r.srv, "expire_watches", "{}");
    af_test_fake_api_do(&r.srv, "delete_pod", "{\"ns\":\"team\",\"name\":\"w3\"}");
    wait_in_sync(&r.srv, &r.pub, "continue token expired");
    json_t *cs = af_test_fake_api_admin(&r.srv, "stats", NULL);
    ck_assert_int_eq(json_integer_value(json_object_get(cs, "continue_expired")), 1);
    json_decref(cs);

    /* 500s and 429s: back off, re-watch from the last RV */
    af_test_fake_api_do(&r.srv, "fail", "{\"status\":500,\"count\":4}");
    af_test_fake_api_do(&r.srv, "close_watches", "{}");
    af_test_fake_api_do(&r.srv, "add_pod",
                        "{\"ns\":\"team\",\"name\":\"w4\",\"node\":\"" NODE_A "\",\"gpus\":1}");
    wait_in_sync(&r.srv, &r.pub, "HTTP 500");
    af_test_fake_api_do(&r.srv, "fail", "{\"status\":429,\"count\":4}");
    af_test_fake_api_do(&r.srv, "close_watches", "{}");
    af_test_fake_api_do(&r.srv, "modify_node", "{\"name\":\"" NODE_A "\",\"gpus\":7}");
    af_test_fake_api_do(&r.srv, "modify_pod", "{\"ns\":\"team\",\"name\":\"w4\",\"gpus\":3}");
    wait_in_sync(&r.srv, &r.pub, "HTTP 429");

    /* stalled server: the low-speed limit (2 s here; curl averages the speed over ~5 s)
     * notices and the watch restarts */
    uint64_t restarts = stat_u(&r.st.watch_restarts);
    af_test_fake_api_do(&r.srv, "stall", "{\"seconds\":10}");
    af_test_fake_api_do(&r.srv, "add_pod",
                        "{\"ns\":\"team\",\"name\":\"w5\",\"node\":\"" NODE_A
                        "\",\"cpu\":\"250m\"}");
    wait_in_sync(&r.srv, &r.pub, "stall");
    ck_assert_uint_gt(stat_u(&r.st.watch_restarts), restarts);

    /* token rotated: 401 until the token file is re-read */
    write_file(tpath("token"), "token-2\n", 0600);
    af_test_fake_api_do(&r.srv, "token", "{\"token\":\"token-2\"}");
    af_test_fake_api_do(&r.srv, "close_watches", "{}");
    af_test_fake_api_do(&r.srv, "add_pod",
                        "{\"ns\":\"team\",\"name\":\"w6\",\"node\":\"late-node\",\"cpu\":\"1\"}");
    wait_in_sync(&r.srv, &r.pub, "token rotation");

    /* server restart with a new RV history: every old RV is too old */
    af_test_fake_api_do(&r.srv, "restart", "{}");
    af_test_fake_api_do(&r.srv, "delete_pod", "{\"ns\":\"team\",\"name\":\"w5\"}");
    af_test_fake_api_do(&r.srv, "add_node", "{\"name\":\"after-restart\",\"gpus\":4}");
    af_test_fake_api_do(&r.srv, "add_pod",
                        "{\"ns\":\"team\",\"name\":\"w7\",\"node\":\"after-restart\",\"gpus\":4}");
    wait_in_sync(&r.srv, &r.pub, "server restart");

    json_t *stats = af_test_fake_api_admin(&r.srv, "stats", NULL);
    ck_assert_int_gt(json_integer_value(json_object_get(stats, "unauthorized")), 0);
    ck_assert_int_gt(json_integer_value(json_object_get(stats, "failed")), 0);
    /* Every request kept the server URL's proxy path. */
    ck_assert_int_gt(json_integer_value(json_object_get(stats, "prefixed")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(stats, "unprefixed")), 0);
    json_decref(stats);
    rig_stop(&r);
    rm_tmpdir();
}
END_TEST

/* Exec plugin: prints the token found in a file, counts its runs. */
static const char exec_script[] =
    "#!/bin/sh\n"
    "echo run >> \"$RUNS\"\n"
    "case \"$KUBERNETES_EXEC_INFO\" in *ExecCredential*) ;; *) exit 3;; esac\n"
    "[ \"$1\" = get-token ] || exit 4\n"
    "printf '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\","
    "\"status\":{\"token\":\"%s\",\"expirationTimestamp\":\"%s\"}}\\n' "
    "\"$(cat \"$TOKEN_SRC\")\" \"${EXPIRY:-2099-01-01T00:00:00Z}\"\n";

static int count_lines(const char *path)
{
    int n = 0, ch;
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    while ((ch = fgetc(f)) != EOF)
        n += ch == '\n';
    fclose(f);
    return n;
}

START_TEST(test_exec_credential_cached_until_expiry_and_rerun_on_401)
{
    struct rig r;
    if (!rig_setup(&r))
        return;
    write_file(tpath("plugin.sh"), exec_script, 0700);
    write_file(tpath("tok"), "token-1", 0600);
    struct af_kube_conn *conn = test_conn();
    conn->exec = af_xcalloc(1, sizeof(*conn->exec));
    conn->exec->command = af_xstrdup(tpath("plugin.sh"));
    conn->exec->args = af_xcalloc(2, sizeof(char *));
    conn->exec->args[0] = af_xstrdup("get-token");
    conn->exec->env = af_xcalloc(3, sizeof(char *));
    conn->exec->env[0] = af_xasprintf("RUNS=%s", tpath("runs"));
    conn->exec->env[1] = af_xasprintf("TOKEN_SRC=%s", tpath("tok"));
    /* the CA as kubeconfig -data gives it: PEM in memory */
    size_t calen;
    free(conn->ca_file);
    conn->ca_file = NULL;
    FILE *f = fopen(tpath("ca.crt"), "r");
    ck_assert_ptr_nonnull(f);
    conn->ca_pem = af_xcalloc(1, 65536);
    calen = fread(conn->ca_pem, 1, 65535, f);
    fclose(f);
    ck_assert_uint_gt(calen, 0);
    rig_start(&r, conn);
    wait_in_sync(&r.srv, &r.pub, "initial sync with exec credential");
    ck_assert_int_eq(count_lines(tpath("runs")), 1);   /* cached: many requests, one run */

    write_file(tpath("tok"), "token-2", 0600);
    af_test_fake_api_do(&r.srv, "token", "{\"token\":\"token-2\"}");
    af_test_fake_api_do(&r.srv, "close_watches", "{}");
    af_test_fake_api_do(&r.srv, "add_pod",
                        "{\"ns\":\"x\",\"name\":\"after-401\",\"node\":\"" NODE_A "\"}");
    wait_in_sync(&r.srv, &r.pub, "401 with exec credential");
    ck_assert_int_ge(count_lines(tpath("runs")), 2);

    /* Events: deduplicated, posted once, with the Event fields */
    af_kube_post_event(r.k, "x", "after-401", "uid-1", "Warning", "NoFit", "no A100 free");
    af_kube_post_event(r.k, "x", "after-401", "uid-1", "Warning", "NoFit", "no A100 free");
    af_kube_post_event(r.k, "x", "after-401", "uid-1", "Normal", "Placed", "on " NODE_A);
    json_t *evs = NULL;
    for (int i = 0; i < 300; i++) {
        json_decref(evs);
        evs = af_test_fake_api_admin(&r.srv, "events", NULL);
        if (json_array_size(evs) >= 2 && stat_u(&r.st.events_posted) >= 2)
            break;
        sleep_s(0.1);
    }
    ck_assert_int_eq(json_array_size(evs), 2);
    json_t *e0 = json_object_get(json_array_get(evs, 0), "event");
    ck_assert_str_eq(json_string_value(json_object_get(e0, "reason")), "NoFit");
    ck_assert_str_eq(json_string_value(json_object_get(e0, "type")), "Warning");
    ck_assert_str_eq(json_string_value(
                         json_object_get(json_object_get(e0, "involvedObject"), "uid")),
                     "uid-1");
    ck_assert_str_eq(json_string_value(
                         json_object_get(json_object_get(e0, "source"), "component")),
                     "accelfit");
    ck_assert_str_eq(json_string_value(json_object_get(json_array_get(evs, 0), "namespace")),
                     "x");
    json_decref(evs);
    rig_stop(&r);
    rm_tmpdir();
}
END_TEST

START_TEST(test_exec_credential_rerun_once_expired)
{
    struct rig r;
    if (!rig_setup(&r))
        return;
    write_file(tpath("plugin.sh"), exec_script, 0700);
    write_file(tpath("tok"), "token-1", 0600);
    struct af_kube_conn *conn = test_conn();
    conn->exec = af_xcalloc(1, sizeof(*conn->exec));
    conn->exec->command = af_xstrdup(tpath("plugin.sh"));
    conn->exec->args = af_xcalloc(2, sizeof(char *));
    conn->exec->args[0] = af_xstrdup("get-token");
    conn->exec->env = af_xcalloc(4, sizeof(char *));
    conn->exec->env[0] = af_xasprintf("RUNS=%s", tpath("runs"));
    conn->exec->env[1] = af_xasprintf("TOKEN_SRC=%s", tpath("tok"));
    /* already expired (with a zone offset): every request needs a fresh run */
    conn->exec->env[2] = af_xstrdup("EXPIRY=2001-02-03T04:05:06.5+02:00");
    rig_start(&r, conn);
    wait_in_sync(&r.srv, &r.pub, "initial sync with an expired exec credential");
    ck_assert_int_ge(count_lines(tpath("runs")), 4);   /* 2 lists + 2 watches at least */
    rig_stop(&r);
    rm_tmpdir();
}
END_TEST

static size_t collect(char *p, size_t sz, size_t n, void *ud)
{
    struct af_buf *b = ud;
    ck_assert_int_eq(af_buf_add(b, p, sz * n), 0);
    return sz * n;
}

struct raw {
    struct af_buf hdr_names;   /* "Name\n" per header, in order */
    struct af_buf body;        /* still chunk-encoded */
};

static size_t raw_hdr(char *p, size_t sz, size_t n, void *ud)
{
    struct raw *r = ud;
    const char *colon = memchr(p, ':', sz * n);
    if (colon && strncmp(p, "HTTP/", 5)) {
        ck_assert_int_eq(af_buf_add(&r->hdr_names, p, (size_t)(colon - p)), 0);
        ck_assert_int_eq(af_buf_puts(&r->hdr_names, "\n"), 0);
    }
    return sz * n;
}

/* Header names of a recorded response, in order. */
static char *fixture_header_names(const char *rel)
{
    size_t len;
    char *text = af_test_read(rel, &len);
    struct af_buf out = AF_BUF_INIT(0);
    char *save = NULL;
    for (char *line = strtok_r(text, "\r\n", &save); line; line = strtok_r(NULL, "\r\n", &save)) {
        char *colon = strchr(line, ':');
        if (colon && strncmp(line, "HTTP/", 5)) {
            ck_assert_int_eq(af_buf_add(&out, line, (size_t)(colon - line)), 0);
            ck_assert_int_eq(af_buf_puts(&out, "\n"), 0);
        }
    }
    free(text);
    return af_buf_detach(&out, NULL);
}

/* The fake server frames a watch as kube-apiserver v1.26 did in the recording. */
START_TEST(test_fake_apiserver_frames_watch_like_the_recording)
{
    struct rig r;
    if (!rig_setup(&r))
        return;
    struct raw raw = {AF_BUF_INIT(0), AF_BUF_INIT(0)};
    char url[256];
    snprintf(url, sizeof(url),
             "https://127.0.0.1:%d/api/v1/nodes?watch=1&resourceVersion=0&allowWatchBookmarks=true"
             "&timeoutSeconds=1",
             r.srv.port);
    af_test_fake_api_do(&r.srv, "add_node", "{\"name\":\"n-framing\"}");
    CURL *h = curl_easy_init();
    struct curl_slist *hl = curl_slist_append(NULL, "Authorization: Bearer token-1");
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(h, CURLOPT_CAINFO, tpath("ca.crt"));
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(h, CURLOPT_HTTP_TRANSFER_DECODING, 0L);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, raw_hdr);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &raw);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &raw.body);
    ck_assert_int_eq(curl_easy_perform(h), CURLE_OK);
    curl_slist_free_all(hl);
    curl_easy_cleanup(h);

    char *want = fixture_header_names("tests/fixtures/apiserver/nodes-watch.headers.txt");
    ck_assert_str_eq(raw.hdr_names.buf, want);
    free(want);

    /* <hex>\r\n{one event}\n\r\n ... 0\r\n\r\n, every chunk one JSON event */
    const char *p = raw.body.buf, *end = raw.body.buf + raw.body.len;
    int events = 0;
    for (;;) {
        char *after;
        unsigned long n = strtoul(p, &after, 16);
        ck_assert(after[0] == '\r' && after[1] == '\n');
        p = after + 2;
        if (n == 0) {
            ck_assert_int_eq(end - p, 2);
            break;
        }
        ck_assert(p + n + 2 <= end);
        ck_assert(p[0] == '{' && p[n - 1] == '\n' && p[n] == '\r' && p[n + 1] == '\n');
        json_t *ev = json_loadb(p, n, 0, NULL);
        ck_assert_ptr_nonnull(ev);
        ck_assert_ptr_nonnull(json_string_value(json_object_get(ev, "type")));
        json_decref(ev);
        events++;
        p += n + 2;
    }
    ck_assert_int_ge(events, 1);
    af_buf_release(&raw.hdr_names);
    af_buf_release(&raw.body);
    af_test_fake_api_stop(&r.srv);
    rm_tmpdir();
}
END_TEST

START_TEST(test_stop_is_prompt_while_server_stalls)
{
    struct rig r;
    if (!rig_setup(&r))
        return;
    struct af_kube_conn *conn = test_conn();
    conn->token = af_xstrdup("token-1");
    /* verify the certificate as "kubernetes.test" while connecting to 127.0.0.1 */
    conn->tls_server_name = af_xstrdup("kubernetes.test");
    rig_start(&r, conn);
    wait_in_sync(&r.srv, &r.pub, "initial sync");
    af_test_fake_api_do(&r.srv, "stall", "{\"seconds\":60}");
    af_test_fake_api_do(&r.srv, "fail", "{\"status\":503,\"count\":1000}");
    sleep_s(0.5);
    /* no timing assertion beyond Check's test timeout: stop must just return */
    rig_stop(&r);
    rm_tmpdir();
}
END_TEST

/*
 * Policy swaps back to back (af_kube_reclassify_nodes, as each reload calls it) relist the
 * nodes again and again, so the node watch may not run between two lists. A relist asked
 * for is a fresher read than the watch, not an outage: the cache never counts as down
 * meanwhile, so /readyz and /filter never call it stale for it (--max-staleness).
 */
START_TEST(test_relists_asked_for_never_make_the_cache_look_stale)
{
    struct rig r;
    struct af_kube_conn *conn;
    uint64_t relists0;
    bool down_seen = false;

    if (!rig_setup(&r))
        return;
    conn = test_conn();
    conn->token = af_xstrdup("token-1");
    rig_start(&r, conn);
    wait_in_sync(&r.srv, &r.pub, "initial sync");
    for (int i = 0; i < 1200 && !(atomic_load(&r.st.watch_up) && !atomic_load(&r.st.down_since_ns));
         i++)
        sleep_s(0.05);
    ck_assert_msg(atomic_load(&r.st.watch_up), "the watches never came up");
    relists0 = stat_u(&r.st.relists);
    for (int i = 0; i < 60000 && stat_u(&r.st.relists) < relists0 + 5; i++) {
        af_kube_reclassify_nodes(r.k);
        if (atomic_load(&r.st.down_since_ns) || !atomic_load(&r.st.watch_up))
            down_seen = true;
        sleep_s(0.001);
    }
    ck_assert_uint_ge(stat_u(&r.st.relists), relists0 + 5);
    ck_assert_msg(!down_seen, "a relist asked for made the cache count as down");
    rig_stop(&r);
    rm_tmpdir();
}
END_TEST

/* Counts of the cache's snapshot and the server's objects agree (synthetic mode dumps counts). */
static bool counts_match(const struct af_test_fake_api *srv, struct af_publisher *pub,
                         size_t *nodes, size_t *pods)
{
    json_t *d = af_test_fake_api_admin(srv, "dump", NULL);
    struct af_snapshot *s = af_publisher_acquire(pub);
    bool eq = s && s->synced &&
              s->n_nodes == (size_t)json_integer_value(json_object_get(d, "nodes")) &&
              s->n_pods == (size_t)json_integer_value(json_object_get(d, "pods"));
    *nodes = s ? s->n_nodes : 0;
    *pods = s ? s->n_pods : 0;
    af_snapshot_unref(s);
    json_decref(d);
    return eq;
}

/*
 * The first list at resourceVersion=0 answered whole, as a v1.26 API server's watch cache
 * does (limit ignored), with EKS-shaped objects: decoded as it streams in (64 KiB chunks
 * cut items anywhere), then pods deleted and bound over the watch.
 */
START_TEST(test_reflector_streams_a_whole_list_then_churn)
{
    static const char *const extra[] = {"--synthetic-nodes", "60", "--synthetic-pods", "900",
                                        "--rv0-ignores-limit", NULL};
    struct rig r;
    size_t nodes = 0, pods = 0;
    server_extra = extra;
    bool ok = rig_setup(&r);
    server_extra = NULL;
    if (!ok)
        return;
    struct af_kube_conn *conn = test_conn();
    conn->token = af_xstrdup("token-1");
    rig_start(&r, conn);
    for (int i = 0; i < 300 && !counts_match(&r.srv, &r.pub, &nodes, &pods); i++)
        sleep_s(0.1);
    ck_assert_msg(nodes == 60 && pods == 900, "synced %zu nodes, %zu pods", nodes, pods);
    /* one request per reflector (nodes, pods, managed pods): the page size (2) was ignored
     * and the answers streamed whole */
    json_t *st = af_test_fake_api_admin(&r.srv, "stats", NULL);
    ck_assert_int_eq(json_integer_value(json_object_get(st, "list")), 3);
    json_decref(st);

    /* the records are what the objects say: node 1 is a p4d.24xlarge, pod 1 runs on it */
    struct af_snapshot *s = af_publisher_acquire(&r.pub);
    const struct af_node_view *v =
        af_snapshot_find_node(s, "ip-10-0-0-1.us-west-2.compute.internal");
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(v->info->cls, AF_CLASS_NVIDIA_A100);
    ck_assert_int_eq(v->info->allocatable.v[AF_RES_GPU], 8);
    ck_assert_str_eq(v->info->instance_type, "p4d.24xlarge");
    struct af_pod_kept kept;
    const struct af_pod_info *p =
        af_pod_brief_info(af_snapshot_find_pod(s, "ml-training", "worker-0000001"), &kept);
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(p->node_name, "ip-10-0-0-1.us-west-2.compute.internal");
    ck_assert_int_eq(p->requests.v[AF_RES_CPU], 250);
    ck_assert_str_eq(p->owner_kind, "ReplicaSet");
    af_snapshot_unref(s);

    af_test_fake_api_do(&r.srv, "churn", "{\"rate\":200}");
    sleep_s(1.0);
    af_test_fake_api_do(&r.srv, "churn", "{\"rate\":0}");
    for (int i = 0; i < 300 && !counts_match(&r.srv, &r.pub, &nodes, &pods); i++)
        sleep_s(0.1);
    ck_assert_msg(counts_match(&r.srv, &r.pub, &nodes, &pods), "after churn: %zu nodes, %zu pods",
                  nodes, pods);
    ck_assert_uint_ge(stat_u(&r.st.events_applied), 50);
    rig_stop(&r);
    rm_tmpdir();
}
END_TEST

Suite *af_kube_suite(void);
Suite *af_kube_suite(void)
{
    Suite *s = suite_create("kube");
    TCase *tc = tcase_create("kubeconfig");
    tcase_add_test(tc, test_kubeconfig_current_context_fields_and_data);
    tcase_add_test(tc, test_kubeconfig_named_context_files_relative_to_kubeconfig);
    tcase_add_test(tc, test_kubeconfig_exec_plugin_fields);
    tcase_add_loop_test(tc, test_kubeconfig_errors_name_the_problem, 0,
                        (int)AF_ARRAY_SIZE(bad_cases));
    tcase_add_test(tc, test_kubeconfig_env_first_of_colon_list);
    tcase_add_test(tc, test_incluster_joins_host_port_and_finds_token);
    tcase_add_test(tc, test_kubeconfig_list_merges_first_wins);
    tcase_add_test(tc, test_kubeconfig_fallbacks_incluster_then_home);
    suite_add_tcase(s, tc);
    TCase *e2e = tcase_create("reflector");
    tcase_set_timeout(e2e, 300);
    tcase_add_test(e2e, test_reflector_stays_equal_to_server_through_faults);
    tcase_add_test(e2e, test_exec_credential_cached_until_expiry_and_rerun_on_401);
    tcase_add_test(e2e, test_exec_credential_rerun_once_expired);
    tcase_add_test(e2e, test_fake_apiserver_frames_watch_like_the_recording);
    tcase_add_test(e2e, test_stop_is_prompt_while_server_stalls);
    tcase_add_test(e2e, test_relists_asked_for_never_make_the_cache_look_stale);
    tcase_add_test(e2e, test_reflector_streams_a_whole_list_then_churn);
    suite_add_tcase(s, e2e);
    return s;
}

int main(void)
{
    return af_test_run(af_kube_suite());
}
