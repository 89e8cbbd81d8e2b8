/* SPDX-License-Identifier: Apache-2.0 */
/*
 * End to end, on a real control plane: kube-apiserver, etcd and kube-scheduler
 * v1.26 on loopback (tests/e2e/controlplane/; README.md there), running what
 * accelfit ships. Each phase renders manifests/ (the base, then the TLS
 * overlay) with kubectl kustomize and applies it to the API server; runs the
 * rendered KubeSchedulerConfiguration in the real kube-scheduler, as the
 * ServiceAccount the manifests create, with its RBAC; and starts accelfit with
 * the args of the rendered Deployment, in-cluster, with a token of its own
 * ServiceAccount. What a loopback test must change, and only that, is
 * rewritten: in-cluster Service names become 127.0.0.1 and a port, mounted
 * files become files of a temporary folder, cert-manager's part (its
 * resources and the webhook's caBundle) is played by a test CA, the webhook
 * fails closed, and the watch is called stale after 5 s instead of 30.
 *
 * There is no kubelet and no controller-manager: pods are bound and never run,
 * the test creates a Deployment's or a Job's pods itself (with their owners),
 * and plays the kubelet by writing pod status.
 *
 * The control plane's binaries come from $AF_E2E_K8S (default build/k8s:
 * bin/kube-apiserver, bin/kube-scheduler, bin/kubectl and the scripts of
 * tests/e2e/controlplane), which ./run.sh test prepares from $KUBE_BIN_DIR or
 * the project's k8s bundle. Without them the suite says so and is skipped
 * (exit 77), unless CI=true, when that is a failure. Fixed ports (6443, 2379,
 * 10259): one run at a time (ctest RUN_SERIAL).
 */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accelfit/rollout_state.h"
#include "accelfit/util.h"
#include "support/burst.h"
#include "support/fake_aws.h"
#include "support/monitoring.h"
#include "support/http_client.h"
#include "support/support.h"

#define NODE_P4D "ip-10-0-1-11.us-west-2.compute.internal"
#define NODE_G5 "ip-10-0-2-12.us-west-2.compute.internal"
#define NODE_TRN1 "ip-10-0-3-13.us-west-2.compute.internal"
#define NODE_INF2 "ip-10-0-1-14.us-west-2.compute.internal"
#define NODE_C6I "ip-10-0-2-15.us-west-2.compute.internal"
#define SCHEDULER_PORT 10259

static char k8s[PATH_MAX];      /* the control plane's folder */
static char *work;              /* this phase's files: the "container filesystem", logs */
static bool tls_phase;
static struct af_test_server acc;    /* accelfit */
static const char *acc_args[48];     /* its args, as rendered and rewritten */
static char *acc_arg_store[48];
static int health_port;
static pid_t sched_pid;
static const char *extra_acc_args[8];   /* appended to the rendered args (NULL-terminated) */

/* ---- processes and files ------------------------------------------------------------------ */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Runs `sh -c CMD`; its stdout in *out when out is not NULL (caller frees). Exit status. */
static int run(char **out, const char *fmt, ...) AF_PRINTF(2, 3);
static int run(char **out, const char *fmt, ...)
{
    va_list ap;
    char *cmd;
    FILE *f;
    struct af_buf b = AF_BUF_INIT(256u << 20);
    char chunk[65536];
    size_t n;
    int st;

    va_start(ap, fmt);
    cmd = af_xvasprintf(fmt, ap);
    va_end(ap);
    f = popen(cmd, "r");
    ck_assert_msg(f != NULL, "cannot run %s", cmd);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        ck_assert_int_eq(af_buf_add(&b, chunk, n), 0);
    st = pclose(f);
    af_free(cmd);
    if (out)
        *out = af_buf_detach(&b, NULL) ?: af_xstrdup("");
    af_buf_release(&b);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static void must(int rc, const char *what)
{
    ck_assert_msg(rc == 0, "%s failed (%d); logs in %s", what, rc, work);
}

static void write_file(const char *path, const char *text, size_t len)
{
    char *tmp = af_xasprintf("%s.tmp", path);
    FILE *f;
    char *dir = af_xstrdup(path), *slash = strrchr(dir, '/');

    if (slash) {
        *slash = '\0';
        must(run(NULL, "mkdir -p '%s'", dir), "mkdir");
    }
    f = fopen(tmp, "w");
    ck_assert_msg(f != NULL, "cannot write %s", tmp);
    ck_assert_int_eq(fwrite(text, 1, len, f), len);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(rename(tmp, path), 0);   /* whole, as a ConfigMap volume swaps it */
    af_free(tmp);
    af_free(dir);
}

/* kubectl of the control plane, as admin; `args` appended. */
static int kubectl(char **out, const char *fmt, ...) AF_PRINTF(2, 3);
static int kubectl(char **out, const char *fmt, ...)
{
    va_list ap;
    char *args;
    int rc;

    va_start(ap, fmt);
    args = af_xvasprintf(fmt, ap);
    va_end(ap);
    rc = run(out, "'%s/bin/kubectl' --kubeconfig '%s/admin.kubeconfig' %s 2>>'%s/kubectl.log'",
             k8s, k8s, args, work);
    af_free(args);
    return rc;
}

static json_t *kubectl_json(const char *fmt, ...) AF_PRINTF(1, 2);
static json_t *kubectl_json(const char *fmt, ...)
{
    va_list ap;
    char *args, *out;
    json_t *j;
    json_error_t e;

    va_start(ap, fmt);
    args = af_xvasprintf(fmt, ap);
    va_end(ap);
    must(kubectl(&out, "%s -o json", args), args);
    j = json_loads(out, 0, &e);
    ck_assert_msg(j != NULL, "kubectl %s: not JSON: %s", args, e.text);
    af_free(out);
    af_free(args);
    return j;
}

/* Creates the objects of `j` (an object or a List) with kubectl create; steals `j`. */
static int kubectl_create(json_t *j)
{
    char *path = af_xasprintf("%s/create-%d.json", work, rand());
    char *text = json_dumps(j, JSON_COMPACT);
    int rc;

    write_file(path, text, strlen(text));
    rc = kubectl(NULL, "create -f '%s' >/dev/null", path);
    unlink(path);
    free(text);
    af_free(path);
    json_decref(j);
    return rc;
}

/* GET on accelfit's health listener (or the API listener when api): status, body in *body. */
static long acc_get(bool api, const char *path, char **body)
{
    CURL *c = curl_easy_init();
    struct af_test_resp r;
    char *url = api ? af_xasprintf("%s%s", acc.base, path)
                    : af_xasprintf("http://127.0.0.1:%d%s", health_port, path);
    long st;

    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    af_test_http(c, NULL, url, NULL, 0, NULL, &r);
    st = r.curl_rc ? -1 : r.status;
    if (body)
        *body = af_xstrdup(r.body ? r.body : "");
    af_test_resp_free(&r);
    curl_easy_cleanup(c);
    af_free(url);
    return st;
}

static bool ready(void)
{
    return acc_get(false, "/readyz", NULL) == 200;
}

/* A gauge or counter of accelfit's /metrics (the first series whose line starts with `series`). */
static double metric(const char *series)
{
    char *body = NULL, *at;
    double v = -1;

    if (acc_get(false, "/metrics", &body) == 200) {
        /* a sample line: the series at the start of a line, then its labels or a space */
        for (at = strstr(body, series); at; at = strstr(at + 1, series)) {
            char next = at[strlen(series)];
            if ((at == body || at[-1] == '\n') && (next == ' ' || next == '{'))
                break;
        }
        if (at) {
            at += strlen(series);
            while (*at && *at != ' ')
                at++;
            v = strtod(at, NULL);
        }
    }
    af_free(body);
    return v;
}

/* ---- the control plane and what the manifests ship -------------------------------------- */

static void control_plane_up(void)
{
    must(run(NULL, "'%s/down.sh' --clean >'%s/down.log' 2>&1; '%s/up.sh' >'%s/up.log' 2>&1",
             k8s, work, k8s, work), "starting etcd and kube-apiserver (up.sh)");
    must(run(NULL, "'%s/nodes.sh' create >'%s/nodes.log' 2>&1", k8s, work),
         "creating the EKS-like nodes (nodes.sh create)");
}

/* The rendered manifests, applied, less cert-manager's kinds (no cert-manager here). */
static void apply_manifests(const char *dir)
{
    char *yaml, *path = af_xasprintf("%s/rendered.yaml", work);
    struct af_buf keep = AF_BUF_INIT(0);

    must(run(&yaml, "'%s/bin/kubectl' kustomize '%s/%s' 2>'%s/kustomize.log'", k8s,
             AF_SOURCE_DIR, dir, work), "kubectl kustomize");
    for (char *p = yaml; p && *p;) {
        char *next = strstr(p, "\n---\n");
        if (next)
            *next = '\0';
        if (!strstr(p, "apiVersion: cert-manager.io/"))
            ck_assert_int_eq(af_buf_printf(&keep, "%s\n---\n", p), 0);
        p = next ? next + 5 : NULL;
    }
    write_file(path, keep.buf, keep.len);
    must(kubectl(NULL, "apply -f '%s' >'%s/apply.log'", path, work),
         "kubectl apply of the rendered manifests");
    af_buf_release(&keep);
    af_free(yaml);
    af_free(path);
}

static char *sa_token(const char *name)
{
    char *tok;
    must(kubectl(&tok, "-n accelfit create token %s --duration=2h", name), "create token");
    tok[strcspn(tok, "\r\n")] = '\0';
    return tok;
}

/* A path of the containers' filesystem, under this phase's folder. */
static char *in_container(const char *path)
{
    return af_xasprintf("%s/root%s", work, path);
}

/* One ConfigMap key, as text (caller frees). */
static char *configmap_key(const char *name, const char *key)
{
    json_t *cm = kubectl_json("-n accelfit get configmap %s", name);
    const char *v = json_string_value(json_object_get(json_object_get(cm, "data"), key));
    char *text;

    ck_assert_msg(v != NULL, "ConfigMap %s has no key %s", name, key);
    text = af_xstrdup(v);
    json_decref(cm);
    return text;
}

/* Replaces every `from` in *s with `to`. */
static void replace_all(char **s, const char *from, const char *to)
{
    struct af_buf b = AF_BUF_INIT(0);
    const char *p = *s, *hit;

    while ((hit = strstr(p, from)) != NULL) {
        ck_assert_int_eq(af_buf_add(&b, p, (size_t)(hit - p)), 0);
        ck_assert_int_eq(af_buf_puts(&b, to), 0);
        p = hit + strlen(from);
    }
    ck_assert_int_eq(af_buf_puts(&b, p), 0);
    af_free(*s);
    *s = af_buf_detach(&b, NULL);
}

/* The mountPath of the volume of container `c` that the value of flag `arg` is a file of. */
static const char *mounted(json_t *c, const char *arg)
{
    const char *eq = strchr(arg, '=');
    json_t *vm;
    size_t i;

    if (!eq)
        return NULL;
    json_array_foreach(json_object_get(c, "volumeMounts"), i, vm) {
        const char *mp = json_string_value(json_object_get(vm, "mountPath"));
        if (mp && !strncmp(eq + 1, mp, strlen(mp)) && eq[1 + strlen(mp)] == '/')
            return mp;
    }
    return NULL;
}

/* accelfit as the rendered Deployment runs it, on a free port (or `port`). */
static void start_accelfit(int port)
{
    json_t *dep = kubectl_json("-n accelfit get deployment accelfit");
    json_t *c0 = json_array_get(json_object_get(json_object_get(json_object_get(
                 json_object_get(dep, "spec"), "template"), "spec"), "containers"), 0);
    json_t *args = json_object_get(c0, "args");
    size_t n = 0, i;
    json_t *a;

    for (i = 0; i < AF_ARRAY_SIZE(acc_arg_store); i++)
        af_free(acc_arg_store[i]), acc_arg_store[i] = NULL;
    json_array_foreach(args, i, a) {
        const char *s = json_string_value(a), *m;
        char *v;

        ck_assert_ptr_nonnull(s);
        if (!strncmp(s, "--listen=", 9))
            continue;   /* af_test_server_start_on listens on 127.0.0.1 */
        if (!strncmp(s, "--health-listen=", 16))
            v = af_xasprintf("--health-listen=127.0.0.1:%d", health_port);
        else if (!strncmp(s, "--prometheus=", 13))
            v = af_xstrdup("--prometheus=http://127.0.0.1:9");   /* none here: degraded */
        else if ((m = mounted(c0, s)) != NULL) {
            const char *eq = strchr(s, '=');
            v = af_xasprintf("%.*s%s/root%s", (int)(eq - s + 1), s, work, eq + 1);
        } else
            v = af_xstrdup(s);
        ck_assert_uint_lt(n, AF_ARRAY_SIZE(acc_args) - 3);
        acc_arg_store[n] = v;
        acc_args[n++] = v;
    }
    acc_arg_store[n] = af_xstrdup("--max-staleness=5");
    acc_args[n] = acc_arg_store[n];
    n++;
    for (const char *const *e = extra_acc_args; *e; e++) {
        ck_assert_uint_lt(n, AF_ARRAY_SIZE(acc_args) - 1);
        acc_arg_store[n] = af_xstrdup(*e);
        acc_args[n] = acc_arg_store[n];
        n++;
    }
    acc_args[n] = NULL;
    json_decref(dep);
    af_test_server_start_on(&acc, port, acc_args, tls_phase, NULL, NULL);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, ready()), "accelfit never became ready (log: %s)", acc.log_path);
}

static void start_scheduler(void)
{
    char *cfg = configmap_key("accelfit-scheduler-config", "kube-scheduler-config.yaml");
    char *url = af_xasprintf("%s://127.0.0.1:%d", tls_phase ? "https" : "http", acc.port);
    char *kc = af_xasprintf("%s/scheduler.kubeconfig", work);
    char *tok = sa_token("accelfit-scheduler");
    char *kctext = af_xasprintf(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n"
        "    server: https://127.0.0.1:6443\n    certificate-authority: %s/run/pki/ca.crt\n"
        "users:\n- name: accelfit-scheduler\n  user:\n    token: %s\ncontexts:\n- name: e2e\n"
        "  context: {cluster: e2e, user: accelfit-scheduler}\ncurrent-context: e2e\n",
        k8s, tok);
    char *path = af_xasprintf("%s/kube-scheduler-config.yaml", work);
    char *client = af_xasprintf("kind: KubeSchedulerConfiguration\nclientConnection:\n"
                                "  kubeconfig: %s\n", kc);
    char *ca = in_container("/etc/accelfit-scheduler/tls/ca.crt");

    write_file(kc, kctext, strlen(kctext));
    replace_all(&cfg, "http://accelfit.accelfit.svc:8888", url);
    replace_all(&cfg, "https://accelfit.accelfit.svc:8888", url);
    replace_all(&cfg, "/etc/accelfit-scheduler/tls/ca.crt", ca);
    replace_all(&cfg, "kind: KubeSchedulerConfiguration\n", client);
    write_file(path, cfg, strlen(cfg));

    sched_pid = fork();
    ck_assert_int_ge(sched_pid, 0);
    if (sched_pid == 0) {
        char *log = af_xasprintf("%s/scheduler.log", work);
        char *bin = af_xasprintf("%s/bin/kube-scheduler", k8s);
        char *cfgarg = af_xasprintf("--config=%s", path);
        char *authn = af_xasprintf("--authentication-kubeconfig=%s/run/scheduler.kubeconfig", k8s);
        char *authz = af_xasprintf("--authorization-kubeconfig=%s/run/scheduler.kubeconfig", k8s);
        FILE *f = freopen(log, "a", stdout);
        (void)f;
        dup2(STDOUT_FILENO, STDERR_FILENO);
        setpgid(0, 0);
        execl(bin, bin, cfgarg, authn, authz, "--bind-address=127.0.0.1", "--v=2", (char *)NULL);
        _exit(127);
    }
    ck_assert_msg(AF_TEST_WAIT_FOR(60, run(NULL, "curl -skf https://127.0.0.1:%d/healthz >/dev/null",
                                   SCHEDULER_PORT) == 0),
                  "kube-scheduler never answered /healthz (log: %s/scheduler.log)", work);
    af_free(cfg), af_free(url), af_free(kc), af_free(tok), af_free(kctext), af_free(path);
    af_free(client), af_free(ca);
}

static void stop_scheduler(void)
{
    int st;
    if (sched_pid <= 0)
        return;
    kill(-sched_pid, SIGTERM);
    waitpid(sched_pid, &st, 0);
    sched_pid = 0;
}

/* cert-manager's part: a CA and a serving certificate, where the Deployment mounts them. */
static void make_serving_cert(void)
{
    char *dir = af_xasprintf("%s/pki", work);
    char *tls = in_container("/etc/accelfit/tls");
    char *sched = in_container("/etc/accelfit-scheduler/tls");

    must(run(NULL, "mkdir -p '%s' '%s' '%s'", dir, tls, sched), "mkdir");
    af_test_make_cert(dir, "srv", "IP:127.0.0.1,DNS:accelfit.accelfit.svc");
    must(run(NULL, "cp '%1$s/srv.crt' '%2$s/tls.crt' && cp '%1$s/srv.key' '%2$s/tls.key' && "
                   "cp '%1$s/ca.crt' '%3$s/ca.crt'", dir, tls, sched), "copying certificates");
    af_free(dir), af_free(tls), af_free(sched);
}

/* The rendered webhook, pointed at this accelfit (url, the test CA) and failing closed. */
static void register_webhook(void)
{
    char *ca, *patch;

    must(run(&ca, "base64 -w0 '%s/pki/ca.crt'", work), "base64");
    patch = af_xasprintf(
        "[{\"op\":\"replace\",\"path\":\"/webhooks/0/clientConfig\",\"value\":"
        "{\"url\":\"https://127.0.0.1:%d/mutate\",\"caBundle\":\"%s\"}},"
        "{\"op\":\"replace\",\"path\":\"/webhooks/0/failurePolicy\",\"value\":\"Fail\"}]",
        acc.port, ca);
    must(kubectl(NULL, "patch mutatingwebhookconfiguration accelfit --type=json -p '%s' >/dev/null",
                 patch), "patching the webhook");
    af_free(ca), af_free(patch);
}

static void phase_setup(const char *manifests)
{
    char *sa, *tok, *ns, *policy, *policy_path, *ca;

    work = af_test_temp_path("e2e-%s", tls_phase ? "tls" : "base");
    ck_assert_int_eq(mkdir(work, 0700), 0);
    fprintf(stderr, "e2e: %s phase, files in %s\n", manifests, work);
    control_plane_up();
    apply_manifests(manifests);

    /* the ServiceAccount's token, where a pod would have it */
    sa = in_container("/var/run/secrets/kubernetes.io/serviceaccount");
    tok = sa_token("accelfit");
    ns = af_xasprintf("%s/namespace", sa);
    policy_path = af_xasprintf("%s/token", sa);
    write_file(policy_path, tok, strlen(tok));
    write_file(ns, "accelfit", 8);
    ca = af_xasprintf("%s/ca.crt", sa);
    must(run(NULL, "cp '%s/run/pki/ca.crt' '%s'", k8s, ca), "copying the cluster CA");
    setenv("AF_SERVICEACCOUNT_DIR", sa, 1);
    setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
    setenv("KUBERNETES_SERVICE_PORT", "6443", 1);
    af_free(policy_path);

    /* the policy ConfigMap, mounted as a directory */
    policy = configmap_key("accelfit-policy", "policy.yaml");
    policy_path = in_container("/etc/accelfit/policy/policy.yaml");
    write_file(policy_path, policy, strlen(policy));

    if (tls_phase)
        make_serving_cert();
    health_port = af_test_free_port();
    start_accelfit(0);
    start_scheduler();
    if (tls_phase)
        register_webhook();
    af_free(sa), af_free(tok), af_free(ns), af_free(policy), af_free(policy_path), af_free(ca);
}

static void phase_teardown(void)
{
    stop_scheduler();
    if (acc.pid)
        ck_assert_int_eq(af_test_server_stop(&acc), 0);
    run(NULL, "'%s/down.sh' --clean >>'%s/down.log' 2>&1", k8s, work);
    for (size_t i = 0; i < AF_ARRAY_SIZE(acc_arg_store); i++)
        af_free(acc_arg_store[i]), acc_arg_store[i] = NULL;
    af_free(work);
    work = NULL;
}

static void base_setup(void)
{
    tls_phase = false;
    phase_setup("manifests");
}

static void tls_setup(void)
{
    tls_phase = true;
    phase_setup("manifests/overlays/tls");
}

/* ---- pods ------------------------------------------------------------------------------------ */

static void delete_pods(const char *ns);

struct podspec {
    const char *name;           /* or generateName when it ends in '-' */
    const char *device;         /* "nvidia.com/gpu", "aws.amazon.com/neuron" or NULL */
    const char *annotations;    /* JSON object text, or NULL */
    const char *labels;         /* JSON object text, or NULL */
    const char *owner_kind, *owner_name;
    int devices;                /* of `device`; 0: 1 */
    const char *node_selector;  /* JSON object text, or NULL */
};

static json_t *pod_json(const char *ns, const struct podspec *p)
{
    json_t *pod, *res, *tol = json_array(), *meta;
    size_t len = strlen(p->name);

    res = json_pack("{s:s, s:s}", "cpu", "100m", "memory", "128Mi");
    if (p->device) {
        char count[16];
        snprintf(count, sizeof(count), "%d", p->devices > 0 ? p->devices : 1);
        json_object_set_new(res, p->device, json_string(count));
        json_array_append_new(tol, json_pack("{s:s, s:s, s:s}", "key", p->device, "operator",
                                             "Exists", "effect", "NoSchedule"));
    }
    meta = json_pack("{s:s}", "namespace", ns);
    json_object_set_new(meta, len && p->name[len - 1] == '-' ? "generateName" : "name",
                        json_string(p->name));
    if (p->annotations)
        json_object_set_new(meta, "annotations", json_loads(p->annotations, 0, NULL));
    if (p->labels)
        json_object_set_new(meta, "labels", json_loads(p->labels, 0, NULL));
    if (p->owner_kind)
        json_object_set_new(meta, "ownerReferences",
                            json_pack("[{s:s, s:s, s:s, s:s, s:b, s:b}]", "apiVersion",
                                      strcmp(p->owner_kind, "Job") ? "apps/v1" : "batch/v1",
                                      "kind", p->owner_kind, "name", p->owner_name, "uid",
                                      "00000000-0000-4000-8000-000000000001", "controller", 1,
                                      "blockOwnerDeletion", 1));
    pod = json_pack("{s:s, s:s, s:o, s:{s:s, s:[{s:s, s:s, s:{s:O, s:o}}], s:o}}", "apiVersion",
                    "v1", "kind", "Pod", "metadata", meta, "spec", "schedulerName",
                    "accelfit-scheduler", "containers", "name", "server", "image",
                    "registry.k8s.io/pause:3.9", "resources", "requests", res, "limits", res,
                    "tolerations", tol);
    json_decref(res);
    ck_assert_ptr_nonnull(pod);
    if (p->node_selector)
        json_object_set_new(json_object_get(pod, "spec"), "nodeSelector",
                            json_loads(p->node_selector, 0, NULL));
    return pod;
}

static void create_pod(const char *ns, const struct podspec *p)
{
    must(kubectl_create(pod_json(ns, p)), p->name);
}

static char *node_of(const char *ns, const char *pod)
{
    char *out = NULL;
    if (kubectl(&out, "-n %s get pod %s -o jsonpath='{.spec.nodeName}'", ns, pod) != 0)
        out[0] = '\0';
    return out;
}

/* The node the scheduler bound `pod` to, within 60 s (caller frees). */
static char *bound_node(const char *ns, const char *pod)
{
    char *node = NULL;
    for (int i = 0; i < 600; i++) {
        af_free(node);
        node = node_of(ns, pod);
        if (node[0])
            return node;
        sleep_ms(100);
    }
    ck_abort_msg("pod %s/%s was never bound (scheduler log: %s/scheduler.log)", ns, pod, work);
    return node;
}

static void make_namespace(const char *ns)
{
    must(kubectl(NULL, "create namespace %s >/dev/null", ns), "create namespace");
}

/*
 * A node like `tmpl` named `name`, of instance type `type` with `devices` of the
 * template's accelerator resource (0: as the template). Labels naming the instance
 * type and its device count follow; status as the template's.
 */
static void clone_node(const char *tmpl, const char *name, const char *type, int devices)
{
    json_t *n = kubectl_json("get node %s", tmpl);
    json_t *meta = json_object_get(n, "metadata"), *labels = json_object_get(meta, "labels");
    json_t *status = json_deep_copy(json_object_get(n, "status"));
    static const char *const keep[] = {"name", "labels", "annotations"};
    static const char *const devs[] = {"nvidia.com/gpu", "aws.amazon.com/neuron"};
    const char *key;
    json_t *v, *tmp;
    char *patch, *count = af_xasprintf("%d", devices);

    json_object_foreach_safe(meta, tmp, key, v) {
        bool k = false;
        for (size_t i = 0; i < AF_ARRAY_SIZE(keep); i++)
            k = k || !strcmp(key, keep[i]);
        if (!k)
            json_object_del(meta, key);
    }
    json_object_del(n, "status");
    json_object_set_new(meta, "name", json_string(name));
    json_object_set_new(labels, "kubernetes.io/hostname", json_string(name));
    json_object_set_new(labels, "node.kubernetes.io/instance-type", json_string(type));
    json_object_set_new(labels, "beta.kubernetes.io/instance-type", json_string(type));
    json_object_set_new(labels, "karpenter.k8s.aws/instance-size",
                        json_string(strchr(type, '.') + 1));
    if (devices) {
        for (const char *const *l = (const char *const[]){"karpenter.k8s.aws/instance-gpu-count",
                                                          "karpenter.k8s.aws/instance-accelerator-count",
                                                          "nvidia.com/gpu.count", NULL};
             *l; l++)
            if (json_object_get(labels, *l))
                json_object_set_new(labels, *l, json_string(count));
        for (size_t i = 0; i < AF_ARRAY_SIZE(devs); i++) {
            json_t *cap = json_object_get(status, "capacity");
            json_t *alloc = json_object_get(status, "allocatable");
            if (json_object_get(cap, devs[i])) {
                json_object_set_new(cap, devs[i], json_string(count));
                json_object_set_new(alloc, devs[i], json_string(count));
                json_object_set_new(cap, "pods", json_string("250"));
                json_object_set_new(alloc, "pods", json_string("250"));
            }
        }
    }
    json_object_del(status, "addresses");
    must(kubectl_create(n), "create node");
    tmp = json_pack("{s:o}", "status", status);
    patch = json_dumps(tmp, JSON_COMPACT);
    must(kubectl(NULL, "patch node %s --subresource=status --type=merge -p '%s' >/dev/null", name,
                 patch), "patch node status");
    free(patch);
    json_decref(tmp);
    af_free(count);
}

/* ---- base phase -------------------------------------------------------------------------------- */

/* Each probe of the rendered Deployment, sent as kubelet sends it, on the port it names. */
START_TEST(test_probes_as_kubelet_sends_them)
{
    json_t *dep = kubectl_json("-n accelfit get deployment accelfit");
    json_t *c0 = json_array_get(json_object_get(json_object_get(json_object_get(
                 json_object_get(dep, "spec"), "template"), "spec"), "containers"), 0);
    static const char *const probes[] = {"startupProbe", "readinessProbe", "livenessProbe"};

    for (size_t i = 0; i < AF_ARRAY_SIZE(probes); i++) {
        json_t *get = json_object_get(json_object_get(c0, probes[i]), "httpGet");
        const char *path = json_string_value(json_object_get(get, "path"));
        const char *portname = json_string_value(json_object_get(get, "port"));
        json_t *p;
        size_t j;
        int port = 0;

        ck_assert_msg(path && portname, "%s has no httpGet with a named port", probes[i]);
        json_array_foreach(json_object_get(c0, "ports"), j, p) {
            if (!strcmp(json_string_value(json_object_get(p, "name")), portname)) {
                int cport = (int)json_integer_value(json_object_get(p, "containerPort"));
                /* the container's ports, where this accelfit listens */
                port = cport == 8080 ? health_port : acc.port;
            }
        }
        ck_assert_int_ne(port, 0);
        for (int k = 0; k < 20; k++) {
            char *req = af_xasprintf("GET %s HTTP/1.1\r\nHost: 10.0.1.23:%d\r\n"
                                     "User-Agent: kube-probe/1.26\r\nAccept: */*\r\n"
                                     "Connection: close\r\n\r\n", path, port);
            struct af_test_raw_opts o = {.tls = port == acc.port && tls_phase};
            struct af_test_raw r;
            af_test_raw_exchange_opt(port, req, strlen(req), &o, 1, 5000, &r);
            ck_assert_msg(r.count == 1 && r.status[0] == 200, "%s %s: %d answers, status %d",
                          probes[i], path, r.count, r.count ? r.status[0] : 0);
            af_test_raw_free(&r);
            af_free(req);
        }
    }
    ck_assert_msg(ready(), "accelfit stopped answering after the probes (log: %s)", acc.log_path);
    json_decref(dep);
}
END_TEST

/* Annotated and un-annotated GPU, Neuron and CPU pods, placed by the real scheduler. */
START_TEST(test_placements_on_an_eks_node_mix)
{
    static const struct {
        struct podspec pod;
        const char *want;   /* NULL: any node of `any` */
        const char *any[3];
    } cases[] = {
        {{.name = "infer-7b", .device = "nvidia.com/gpu",
          .annotations = "{\"accelfit.io/workload\":\"inference\","
                         "\"accelfit.io/model-params\":\"7B\"}"},
         NODE_G5, {NULL}},
        {{.name = "train-13b", .device = "nvidia.com/gpu",
          .annotations = "{\"accelfit.io/workload\":\"training\","
                         "\"accelfit.io/model-params\":\"13B\"}"},
         NODE_P4D, {NULL}},
        {{.name = "gpu-plain", .device = "nvidia.com/gpu"}, NULL, {NODE_P4D, NODE_G5}},
        {{.name = "neuron-infer", .device = "aws.amazon.com/neuron",
          .annotations = "{\"accelfit.io/workload\":\"inference\",\"accelfit.io/objective\":"
                         "\"cost\",\"accelfit.io/neuron-ready\":\"true\"}"},
         NODE_INF2, {NULL}},
        {{.name = "neuron-train", .device = "aws.amazon.com/neuron",
          .annotations = "{\"accelfit.io/workload\":\"training\",\"accelfit.io/objective\":"
                         "\"cost\",\"accelfit.io/framework\":\"pytorch\","
                         "\"accelfit.io/neuron-ready\":\"true\"}"},
         NODE_TRN1, {NULL}},
        {{.name = "cpu-plain"}, NODE_C6I, {NULL}},
        {{.name = "cpu-prep", .annotations = "{\"accelfit.io/workload\":\"preprocessing\"}"},
         NODE_C6I, {NULL}},
    };
    double nodes0;

    make_namespace("e2e-place");
    for (size_t i = 0; i < AF_ARRAY_SIZE(cases); i++) {
        char *node;
        create_pod("e2e-place", &cases[i].pod);
        node = bound_node("e2e-place", cases[i].pod.name);
        if (cases[i].want) {
            ck_assert_msg(!strcmp(node, cases[i].want), "%s went to %s, not %s",
                          cases[i].pod.name, node, cases[i].want);
        } else {
            bool ok = false;
            for (size_t j = 0; j < AF_ARRAY_SIZE(cases[i].any) && cases[i].any[j]; j++)
                ok = ok || !strcmp(node, cases[i].any[j]);
            ck_assert_msg(ok, "%s went to %s", cases[i].pod.name, node);
        }
        af_free(node);
    }

    /* The A10G node is full; a node added now is seen and used for the next such pod. */
    nodes0 = metric("accelfit_cache_objects{kind=\"node\"}");
    clone_node(NODE_G5, "ip-10-0-2-99.us-west-2.compute.internal", "g5.2xlarge", 0);
    ck_assert_msg(AF_TEST_WAIT_FOR(30, metric("accelfit_cache_objects{kind=\"node\"}") == nodes0 + 1),
                  "accelfit never saw the new node (%g nodes)",
                  metric("accelfit_cache_objects{kind=\"node\"}"));
    {
        struct podspec p = cases[0].pod;
        char *node;
        p.name = "infer-7b-2";
        create_pod("e2e-place", &p);
        node = bound_node("e2e-place", p.name);
        ck_assert_str_eq(node, "ip-10-0-2-99.us-west-2.compute.internal");
        af_free(node);
    }
    delete_pods("e2e-place");
    must(kubectl(NULL, "delete node ip-10-0-2-99.us-west-2.compute.internal >/dev/null"),
         "delete node");
}
END_TEST

/* ---- what the cluster really pays ------------------------------------------------------------ */

#define POOL "{\"e2e.accelfit.io/pool\": \"prepaid\"}"

/* A node of the test's own pool: `type` with `gpus` GPUs, its capacity labels and
 * annotations (kubectl label / annotate arguments, "" for none). */
static void pool_node(const char *name, const char *type, int gpus, const char *labels,
                      const char *annotations)
{
    char family[32];

    snprintf(family, sizeof(family), "%.*s", (int)(strchr(type, '.') - type), type);
    clone_node(NODE_P4D, name, type, gpus);
    must(kubectl(NULL, "label node %s --overwrite e2e.accelfit.io/pool=prepaid "
                       "karpenter.k8s.aws/instance-family=%s %s >/dev/null",
                 name, family, labels),
         "label node");
    if (*annotations)
        must(kubectl(NULL, "annotate node %s --overwrite %s >/dev/null", name, annotations),
             "annotate node");
}

/* Creates pod `name` in e2e-prepaid and returns the node the real scheduler bound it to. */
static char *place(const char *name, int gpus, const char *annotations, const char *selector)
{
    struct podspec p = {.name = name, .device = "nvidia.com/gpu", .devices = gpus,
                        .annotations = annotations, .node_selector = selector};

    create_pod("e2e-prepaid", &p);
    return bound_node("e2e-prepaid", name);
}

static void apply_text(const char *yaml)
{
    char *path = af_xasprintf("%s/apply-%d.yaml", work, rand());

    write_file(path, yaml, strlen(yaml));
    must(kubectl(NULL, "apply -f '%s' >/dev/null", path), "kubectl apply");
    unlink(path);
    af_free(path);
}

/* True when /metrics counts `n` nodes priced by a NodeOverlay. */
static bool overlay_nodes(double n)
{
    return metric("accelfit_nodes_by_price_source{source=\"overlay\"}") == n;
}

/*
 * Nodes labelled as Karpenter and EKS label prepaid capacity (a p5.48xlarge Capacity
 * Block, an ODCR p4d), on-demand p5, p4d and g6e, a spot g5; NodeOverlays served by the real
 * API server as Karpenter's CRD serves them; pods scheduled by the real kube-scheduler with
 * the shipped config (docs/pricing.md#what-the-cluster-really-pays).
 */
START_TEST(test_prepaid_capacity_and_overlays_on_the_real_scheduler)
{
    char ends[64], ann[160], *node, *crd;
    time_t end = time(NULL) + 2 * 3600;   /* the block ends in two hours */
    struct tm tm;

    gmtime_r(&end, &tm);
    strftime(ends, sizeof(ends), "%Y-%m-%dT%H:%M:%SZ", &tm);
    crd = af_xasprintf("%s/tests/fixtures/karpenter/nodeoverlays-crd.yaml", AF_SOURCE_DIR);
    must(kubectl(NULL, "apply -f '%s' >/dev/null", crd), "install the NodeOverlay CRD");
    must(kubectl(NULL, "wait --for=condition=Established crd/nodeoverlays.karpenter.sh "
                       "--timeout=60s >/dev/null"),
         "NodeOverlay CRD established");
    af_free(crd);
    snprintf(ann, sizeof(ann), "accelfit.io/capacity-reservation-end=%s", ends);
    pool_node("cb-p5", "p5.48xlarge", 8,
              "karpenter.sh/capacity-type=reserved "
              "karpenter.k8s.aws/capacity-reservation-type=capacity-block "
              "karpenter.k8s.aws/capacity-reservation-id=cr-0b10c000000000001",
              ann);
    pool_node("od-p5", "p5.48xlarge", 8, "karpenter.sh/capacity-type=on-demand", "");
    pool_node("odcr-p4d", "p4d.24xlarge", 8,
              "karpenter.sh/capacity-type=reserved "
              "karpenter.k8s.aws/capacity-reservation-type=default "
              "karpenter.k8s.aws/capacity-reservation-id=cr-0dc00000000000002",
              "");
    pool_node("od-p4d", "p4d.24xlarge", 8, "karpenter.sh/capacity-type=on-demand", "");
    pool_node("g6e-a", "g6e.12xlarge", 4,
              "karpenter.sh/capacity-type=on-demand karpenter.sh/nodepool=pool-a", "");
    pool_node("g6e-b", "g6e.12xlarge", 4,
              "karpenter.sh/capacity-type=on-demand karpenter.sh/nodepool=pool-b", "");
    pool_node("spot-g5", "g5.12xlarge", 4, "karpenter.sh/capacity-type=spot", "");
    make_namespace("e2e-prepaid");
    ck_assert_msg(AF_TEST_WAIT_FOR(30, metric("accelfit_nodes_by_price_source{source=\"prepaid\"}") == 2),
                  "accelfit never priced the two reserved nodes as prepaid (%g)",
                  metric("accelfit_nodes_by_price_source{source=\"prepaid\"}"));

    /* 1. Training that suits both H100 nodes goes to the paid-for block, not to on-demand
     *    at $55/h; then the next one joins it there. */
    node = place("train-short", 1,
                 "{\"accelfit.io/workload\": \"training\", \"accelfit.io/model-params\": \"1B\", "
                 "\"accelfit.io/objective\": \"performance\"}",
                 POOL);
    ck_assert_str_eq(node, "cb-p5");
    af_free(node);
    /* 2. A Job that runs six hours avoids the block that ends in two, and says why. */
    node = place("train-6h", 1,
                 "{\"accelfit.io/workload\": \"training\", \"accelfit.io/model-params\": \"1B\", "
                 "\"accelfit.io/objective\": \"performance\", "
                 "\"accelfit.io/expected-duration\": \"6h\"}",
                 POOL);
    ck_assert_str_eq(node, "od-p5");
    af_free(node);
    /* 3. An A100 pod without annotations: the ODCR before the on-demand p4d. */
    node = place("a100-plain", 8, NULL,
                 "{\"e2e.accelfit.io/pool\": \"prepaid\", "
                 "\"node.kubernetes.io/instance-type\": \"p4d.24xlarge\"}");
    ck_assert_str_eq(node, "odcr-p4d");
    af_free(node);
    delete_pods("e2e-prepaid");

    /* 4. A NodeOverlay changes the order as it changes Karpenter's: the same g6e costs four
     *    times as much in pool-a, then in pool-b, and the pod goes to the other pool. */
    for (int k = 0; k < 2; k++) {
        const char *dear = k == 0 ? "a" : "b", *cheap = k == 0 ? "g6e-b" : "g6e-a";
        char *yaml = af_xasprintf("apiVersion: karpenter.sh/v1alpha1\nkind: NodeOverlay\n"
                                  "metadata: {name: pool-%s-dear}\nspec:\n  weight: 10\n"
                                  "  priceAdjustment: \"+300%%\"\n  requirements:\n"
                                  "    - {key: karpenter.sh/nodepool, operator: In, values: "
                                  "[pool-%s]}\n",
                                  dear, dear);
        char pod[16];
        apply_text(yaml);
        af_free(yaml);
        /* the CRD came after accelfit: its discovery sees it within 15 s */
        ck_assert_msg(AF_TEST_WAIT_FOR(60, overlay_nodes(1)), "accelfit never applied pool-%s-dear",
                      dear);
        snprintf(pod, sizeof(pod), "l40s-%d", k);
        node = place(pod, 1, NULL,
                     "{\"e2e.accelfit.io/pool\": \"prepaid\", "
                     "\"node.kubernetes.io/instance-type\": \"g6e.12xlarge\"}");
        ck_assert_str_eq(node, cheap);
        af_free(node);
        delete_pods("e2e-prepaid");
        must(kubectl(NULL, "delete nodeoverlay pool-%s-dear >/dev/null", dear), "delete overlay");
        ck_assert_msg(AF_TEST_WAIT_FOR(30, overlay_nodes(0)), "the overlay's price outlived it");
    }
    must(kubectl(NULL, "delete node cb-p5 od-p5 odcr-p4d od-p4d g6e-a g6e-b spot-g5 "
                       ">/dev/null"),
         "delete the pool's nodes");
}
END_TEST

/*
 * The API server goes away under a live accelfit and comes back: readiness turns
 * stale, nothing crashes, and the cache converges to what the API server says.
 */
START_TEST(test_api_server_restart_under_a_live_accelfit)
{
    double relists0 = metric("accelfit_relists_total"), nodes;
    char *pid = NULL;

    ck_assert(ready());
    must(run(&pid, "cat '%s/run/apiserver.pid'", k8s), "apiserver pid");
    /* killed: a graceful stop holds open watches for up to a minute */
    ck_assert_int_eq(kill((pid_t)atoi(pid), SIGKILL), 0);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, !ready()), "/readyz never went stale with the API server down");
    ck_assert_msg(acc_get(false, "/healthz", NULL) == 200, "accelfit is not alive");
    /* up.sh stops what is left (etcd, keeping its data) and starts both again */
    must(run(NULL, "'%s/up.sh' >>'%s/up.log' 2>&1", k8s, work), "restarting the API server");
    ck_assert_msg(AF_TEST_WAIT_FOR(90, ready()), "accelfit never became ready again (log: %s)",
                  acc.log_path);
    /* changes after the restart arrive; so does a node removed */
    clone_node(NODE_C6I, "ip-10-0-2-77.us-west-2.compute.internal", "c6i.4xlarge", 0);
    must(kubectl(NULL, "delete node " NODE_TRN1 " >/dev/null"), "delete node");
    {
        /* as many as the API server holds (a test before may have left some) */
        char *count = NULL;
        double want;
        must(kubectl(&count, "get nodes --no-headers | wc -l"), "count nodes");
        want = strtod(count, NULL);
        af_free(count);
        ck_assert_msg(AF_TEST_WAIT_FOR(60, (nodes = metric("accelfit_cache_objects{kind=\"node\"}")) == want),
                      "accelfit holds %g nodes, the API server %g", nodes, want);
    }
    ck_assert_msg(metric("accelfit_relists_total") > relists0, "no relist after the restart");
    ck_assert_int_eq(waitpid(acc.pid, NULL, WNOHANG), 0);
    af_free(pid);
}
END_TEST

/* ---- TLS phase: the webhook ----------------------------------------------------------------- */

static const char rollout_policy[] =
    "\nrollouts:\n"
    "  - name: llm-to-inf2\n"
    "    selector: {namespace: e2e-roll, matchLabels: {app: llm}, owner: {kind: Deployment, name: llm}}\n"
    "    source: [nvidia-a10g]\n"
    "    target: [inferentia2]\n"
    "    stages: [{share: 0.3}]\n"
    "    fallback: source\n"
    "    variant:\n"
    "      resources: {aws.amazon.com/neuron: 1}\n"
    "      tolerations: [{key: aws.amazon.com/neuron, operator: Exists, effect: NoSchedule}]\n"
    "      annotations: {accelfit.io/neuron-ready: \"true\"}\n"
    "    brake: {failed: true}\n"
    "  - name: jobs-to-inf2\n"
    "    selector: {namespace: e2e-jobs, owner: {kind: Job}}\n"
    "    source: [nvidia-a10g]\n"
    "    target: [inferentia2]\n"
    "    stages: [{share: 0.3}]\n"
    "    fallback: source\n"
    "    variant:\n"
    "      resources: {aws.amazon.com/neuron: 1}\n"
    "      tolerations: [{key: aws.amazon.com/neuron, operator: Exists, effect: NoSchedule}]\n"
    "    brake: {failed: true}\n"
    "  - name: pin-to-inf2\n"
    "    selector: {namespace: e2e-pin}\n"
    "    source: [nvidia-a10g]\n"
    "    target: [inferentia2]\n"
    "    share: 1.0\n"
    "    fallback: wait\n"
    "    variant:\n"
    "      resources: {aws.amazon.com/neuron: 1}\n"
    "      tolerations: [{key: aws.amazon.com/neuron, operator: Exists, effect: NoSchedule}]\n"
    "    brake: {failed: true}\n"
    "  - name: staged-to-inf2\n"
    "    selector: {namespace: e2e-stage}\n"
    "    source: [nvidia-a10g]\n"
    "    target: [inferentia2]\n"
    "    stages: [{share: 0}, {share: 1.0, after: 20s}]\n"
    "    fallback: wait\n"
    "    variant:\n"
    "      resources: {aws.amazon.com/neuron: 1}\n"
    "      tolerations: [{key: aws.amazon.com/neuron, operator: Exists, effect: NoSchedule}]\n"
    "    brake: {failed: true}\n"
    "  - name: dra-to-trn2\n"
    "    selector: {namespace: ml, matchLabels: {app: dra-swap}}\n"
    "    source: [nvidia-a100]\n"
    "    target: [trainium2]\n"
    "    share: 1.0\n"
    "    variant:\n"
    "      claimTemplates: {two-gpus: four-neurons, one-a100: eight-neurons}\n"
    "      env: {NEURON_RT_VISIBLE_CORES: \"0-7\"}\n"
    "  - name: burst-to-inf2\n"
    "    selector: {namespace: e2e-burst}\n"
    "    source: [nvidia-a10g]\n"
    "    target: [inferentia2]\n"
    "    share: 0.05\n"
    "    fallback: wait\n"
    "    variant:\n"
    "      resources: {aws.amazon.com/neuron: 1}\n"
    "      tolerations: [{key: aws.amazon.com/neuron, operator: Exists, effect: NoSchedule}]\n";

/* The policy ConfigMap gains the rollouts; accelfit reloads it. */
static void install_rollout_policy(void)
{
    char *policy = configmap_key("accelfit-policy", "policy.yaml");
    char *path = in_container("/etc/accelfit/policy/policy.yaml");
    char *text = af_xasprintf("%s%s", policy, rollout_policy);
    char *body = NULL;

    write_file(path, text, strlen(text));
    ck_assert_msg(AF_TEST_WAIT_FOR(30, (af_free(body), acc_get(true, "/rollouts", &body) == 200 &&
                                                   strstr(body, "jobs-to-inf2") != NULL)),
                  "the rollouts never appeared in /rollouts (log: %s)", acc.log_path);
    af_free(body), af_free(policy), af_free(path), af_free(text);
}

struct census {
    int total, bound, target, source, none;
    int target_wrong, source_wrong;   /* bound outside their side's class */
};

/* The pods of `ns` whose names start with `prefix`: sides and where they are bound. */
static struct census census(const char *ns, const char *prefix)
{
    json_t *list = kubectl_json("-n %s get pods", ns), *nodes = kubectl_json("get nodes"), *p, *n;
    json_t *types = json_object();
    struct census c = {0};
    size_t i;

    json_array_foreach(json_object_get(nodes, "items"), i, n) {
        json_t *meta = json_object_get(n, "metadata");
        json_object_set(types, json_string_value(json_object_get(meta, "name")),
                        json_object_get(json_object_get(meta, "labels"),
                                        "node.kubernetes.io/instance-type"));
    }
    json_array_foreach(json_object_get(list, "items"), i, p) {
        json_t *meta = json_object_get(p, "metadata");
        const char *name = json_string_value(json_object_get(meta, "name"));
        const char *side = json_string_value(json_object_get(
            json_object_get(meta, "annotations"), "accelfit.io/rollout-side"));
        const char *node = json_string_value(json_object_get(json_object_get(p, "spec"),
                                                             "nodeName"));
        const char *type = node ? json_string_value(json_object_get(types, node)) : NULL;

        if (strncmp(name, prefix, strlen(prefix)))
            continue;
        c.total++;
        if (!side)
            c.none++;
        else if (!strcmp(side, "target"))
            c.target++;
        else
            c.source++;
        if (node) {
            c.bound++;
            if (side && !strcmp(side, "target") && (!type || strncmp(type, "inf2.", 5)))
                c.target_wrong++;
            if ((!side || strcmp(side, "target")) && (!type || strncmp(type, "g5.", 3)))
                c.source_wrong++;
        }
    }
    json_decref(types);
    json_decref(nodes);
    json_decref(list);
    return c;
}

/* Removes every pod of `ns` at once (no kubelet will confirm a graceful delete). */
static void delete_pods(const char *ns)
{
    must(kubectl(NULL, "-n %s delete pods --all --force --grace-period=0 >/dev/null 2>&1", ns),
         "deleting pods");
}

/* Rollout `name` as /rollouts shows it (caller decrefs; NULL when absent). */
static json_t *rollout_state(const char *name)
{
    char *body = NULL;
    json_t *j, *r, *found = NULL;
    size_t i;

    if (acc_get(true, "/rollouts", &body) == 200 && (j = json_loads(body, 0, NULL)) != NULL) {
        json_array_foreach(json_object_get(j, "rollouts"), i, r)
            if (!strcmp(json_string_value(json_object_get(r, "name")) ?: "", name))
                found = json_incref(r);
        json_decref(j);
    }
    af_free(body);
    return found;
}

static bool halted(const char *name)
{
    json_t *r = rollout_state(name);
    bool h = r && json_is_true(json_object_get(r, "halted"));
    json_decref(r);
    return h;
}

/* The units /rollouts counts on `side` of rollout `name`; -1 when it does not say. */
static int units(const char *name, const char *side)
{
    json_t *r = rollout_state(name);
    json_t *v = json_object_get(json_object_get(r, "units"), side);
    int n = json_is_integer(v) ? (int)json_integer_value(v) : -1;
    json_decref(r);
    return n;
}

/* `n` replicas of the rollout's Deployment, created as its ReplicaSet creates them. */
static void create_replicas(int n, bool managed)
{
    json_t *list = json_pack("{s:s, s:s, s:[]}", "apiVersion", "v1", "kind", "List", "items");
    struct podspec p = {
        .name = managed ? "llm-6d4f9b7c8d-" : "plain-6d4f9b7c8d-",
        .device = "nvidia.com/gpu",
        .annotations = "{\"accelfit.io/workload\":\"inference\"}",
        .labels = managed ? "{\"app\":\"llm\",\"accelfit.io/managed\":\"true\"}"
                          : "{\"app\":\"llm\"}",
        .owner_kind = "ReplicaSet",
        .owner_name = "llm-6d4f9b7c8d",
    };

    for (int i = 0; i < n; i++)
        json_array_append_new(json_object_get(list, "items"), pod_json("e2e-roll", &p));
    must(kubectl_create(list), "creating replicas through the webhook");
}

static bool all_bound(const char *ns, const char *prefix, int want)
{
    struct census c = census(ns, prefix);
    return c.total == want && c.bound == want;
}

START_TEST(test_variant_rollout_through_the_real_webhook)
{
    struct census c;

    /* room for every replica on either side: 80 A10G, 36 Inferentia2 devices */
    for (int i = 0; i < 10; i++) {
        char name[64];
        snprintf(name, sizeof(name), "ip-10-0-4-%d.us-west-2.compute.internal", 10 + i);
        clone_node(NODE_G5, name, "g5.48xlarge", 8);
    }
    for (int i = 0; i < 3; i++) {
        char name[64];
        snprintf(name, sizeof(name), "ip-10-0-5-%d.us-west-2.compute.internal", 10 + i);
        clone_node(NODE_INF2, name, "inf2.48xlarge", 12);
    }
    install_rollout_policy();
    make_namespace("e2e-roll");

    /* half the replicas; accelfit restarts; the other half: the share holds over both */
    create_replicas(50, true);
    create_replicas(5, false);
    ck_assert_msg(AF_TEST_WAIT_FOR(120, all_bound("e2e-roll", "llm-", 50)), "replicas not bound");
    af_test_server_stop(&acc);
    start_accelfit(acc.port);
    create_replicas(50, true);
    ck_assert_msg(AF_TEST_WAIT_FOR(120, all_bound("e2e-roll", "llm-", 100)), "replicas not bound");
    c = census("e2e-roll", "llm-");
    ck_assert_msg(c.target >= 29 && c.target <= 31 && c.source == 100 - c.target,
                  "%d on the target, %d on the source, %d undecided", c.target, c.source, c.none);
    ck_assert_msg(!c.target_wrong && !c.source_wrong,
                  "%d target pods off inf2, %d source pods off g5", c.target_wrong,
                  c.source_wrong);
    /* pods without the managed label are left as written */
    ck_assert_msg(AF_TEST_WAIT_FOR(60, all_bound("e2e-roll", "plain-", 5)), "plain pods not bound");
    c = census("e2e-roll", "plain-");
    ck_assert_int_eq(c.none, 5);

    /* a target pod fails: the brake halts the rollout, and no later replica is rewritten */
    {
        json_t *list = kubectl_json("-n e2e-roll get pods"), *p;
        size_t i;
        const char *victim = NULL;
        json_array_foreach(json_object_get(list, "items"), i, p) {
            const char *side = json_string_value(json_object_get(json_object_get(
                json_object_get(p, "metadata"), "annotations"), "accelfit.io/rollout-side"));
            if (side && !strcmp(side, "target"))
                victim = json_string_value(json_object_get(json_object_get(p, "metadata"),
                                                           "name"));
            if (victim)
                break;
        }
        ck_assert_ptr_nonnull(victim);
        must(kubectl(NULL, "-n e2e-roll patch pod %s --subresource=status --type=merge "
                           "-p '{\"status\":{\"phase\":\"Failed\"}}' >/dev/null", victim),
             "setting a target pod Failed");
        json_decref(list);
    }
    ck_assert_msg(AF_TEST_WAIT_FOR(30, halted("llm-to-inf2")), "the rollout did not halt");
    c = census("e2e-roll", "llm-");
    {
        int before = c.target;
        create_replicas(10, true);
        ck_assert_msg(AF_TEST_WAIT_FOR(60, census("e2e-roll", "llm-").total == 110), "replicas missing");
        c = census("e2e-roll", "llm-");
        ck_assert_msg(c.target == before, "%d replicas went to the target after the halt",
                      c.target - before);
    }
    delete_pods("e2e-roll");
}
END_TEST

/* Every pod of one Job is on one side: a Job is one unit of the share. */
START_TEST(test_a_jobs_pods_are_one_unit)
{
    json_t *list = json_pack("{s:s, s:s, s:[]}", "apiVersion", "v1", "kind", "List", "items");
    int target_jobs = 0;

    make_namespace("e2e-jobs");
    for (int j = 0; j < 10; j++) {
        char job[32], gen[40];
        snprintf(job, sizeof(job), "train-%d", j);
        snprintf(gen, sizeof(gen), "train-%d-", j);
        for (int k = 0; k < 3; k++) {
            struct podspec p = {.name = gen, .device = "nvidia.com/gpu",
                                .annotations = "{\"accelfit.io/workload\":\"inference\"}",
                                .labels = "{\"accelfit.io/managed\":\"true\"}",
                                .owner_kind = "Job", .owner_name = job};
            json_array_append_new(json_object_get(list, "items"), pod_json("e2e-jobs", &p));
        }
    }
    must(kubectl_create(list), "creating the Jobs' pods");
    ck_assert_msg(AF_TEST_WAIT_FOR(120, all_bound("e2e-jobs", "train-", 30)), "Job pods not bound");
    for (int j = 0; j < 10; j++) {
        char prefix[32];
        struct census c;
        snprintf(prefix, sizeof(prefix), "train-%d-", j);
        c = census("e2e-jobs", prefix);
        ck_assert_int_eq(c.total, 3);
        ck_assert_msg(c.target == 0 || c.target == 3, "Job %d split: %d of 3 on the target", j,
                      c.target);
        ck_assert_msg(!c.target_wrong && !c.source_wrong, "Job %d bound off its side", j);
        target_jobs += c.target == 3;
    }
    ck_assert_msg(target_jobs == 3, "%d of 10 Jobs on the target at share 0.3", target_jobs);

    /* Every Job finishes (its pods Succeeded): a finished Job still counts toward the share. */
    {
        json_t *pods = kubectl_json("-n e2e-jobs get pods"), *p;
        double live = metric("accelfit_cache_objects{kind=\"pod\"}");
        size_t i;
        ck_assert_msg(AF_TEST_WAIT_FOR(30, units("jobs-to-inf2", "target") == 3),
                      "/rollouts counts %d target units", units("jobs-to-inf2", "target"));
        json_array_foreach(json_object_get(pods, "items"), i, p)
            must(kubectl(NULL, "-n e2e-jobs patch pod %s --subresource=status --type=merge -p "
                               "'{\"status\":{\"phase\":\"Succeeded\"}}' >/dev/null",
                         json_string_value(json_object_get(json_object_get(p, "metadata"),
                                                           "name"))),
                 "setting a pod Succeeded");
        json_decref(pods);
        /* the cache has seen them end: they left the pods that hold resources */
        ck_assert_msg(AF_TEST_WAIT_FOR(60, metric("accelfit_cache_objects{kind=\"pod\"}") == live - 30),
                      "accelfit holds %g live pods, not %g",
                      metric("accelfit_cache_objects{kind=\"pod\"}"), live - 30);
        ck_assert_int_eq(units("jobs-to-inf2", "target"), 3);
        ck_assert_int_eq(units("jobs-to-inf2", "source"), 7);
    }
}
END_TEST

/*
 * Preferences on admission through the real API server: a managed pod created through the
 * rendered webhook is stored with node affinity from its plan, merged into its own. A 13B
 * model on one GPU (inference-performance: L40S, A10G, A100, H100, L4): A10G and L4 cannot
 * hold it, so with `required: true` their families are required away; while the p4d (A100)
 * has room nothing is preferred (when: no-room); with the p4d cordoned no node filter
 * accepts has room, and the pod is stored with the tiers that hold the model preferred,
 * heaviest first, after its own preferred term, and the NotIn ANDed into its own required
 * term: what Karpenter would read.
 */
START_TEST(test_preferences_through_the_real_webhook)
{
    static const char prefer_policy[] =
        "\npreferences:\n  enabled: true\n  namespaces: [e2e-pref]\n  when: no-room\n"
        "  required: true\n";
    static const char own_affinity[] =
        "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
        "\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"kubernetes.io/os\","
        "\"operator\":\"In\",\"values\":[\"linux\"]}]}]},"
        "\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":5,\"preference\":{"
        "\"matchExpressions\":[{\"key\":\"topology.kubernetes.io/zone\",\"operator\":\"In\","
        "\"values\":[\"us-west-2a\"]}]}}]}}";
    static const char *const pk = "preferredDuringSchedulingIgnoredDuringExecution";
    static const char *const names[] = {"roomy", "waiting"};
    char *policy = configmap_key("accelfit-policy", "policy.yaml");
    char *path = in_container("/etc/accelfit/policy/policy.yaml");
    char *text = af_xasprintf("%s%s", policy, prefer_policy);
    char *dry = af_xasprintf("%s/dry-run-pod.json", work), *out = NULL, *pod_text;
    double gen = metric("accelfit_policy_generation");
    struct podspec p = {
        .device = "nvidia.com/gpu",
        .annotations = "{\"accelfit.io/workload\":\"inference\",\"accelfit.io/model-params\":"
                       "\"13B\",\"accelfit.io/objective\":\"performance\"}",
        .labels = "{\"accelfit.io/managed\":\"true\"}",
    };
    json_t *pods[2];

    write_file(path, text, strlen(text));
    ck_assert_msg(AF_TEST_WAIT_FOR(30, metric("accelfit_policy_generation") > gen),
                  "the policy with preferences was not reloaded (log: %s)", acc.log_path);
    make_namespace("e2e-pref");
    for (int i = 0; i < 2; i++) {
        json_t *pod;
        p.name = names[i];
        pod = pod_json("e2e-pref", &p);
        json_object_set_new(json_object_get(pod, "spec"), "affinity",
                            json_loads(own_affinity, 0, NULL));
        if (i == 1) {
            /* no room anywhere that filter accepts: the p4d cordoned, seen by the cache
             * once a dry run through the webhook shows the preferences */
            must(kubectl(NULL, "cordon " NODE_P4D " >/dev/null"), "cordon");
            pod_text = json_dumps(pod, JSON_COMPACT);
            write_file(dry, pod_text, strlen(pod_text));
            free(pod_text);
            ck_assert_msg(AF_TEST_WAIT_FOR(30, (af_free(out), out = NULL,
                                        kubectl(&out, "create --dry-run=server -o json -f '%s'",
                                                dry) == 0 && strstr(out, "\"weight\": 100"))),
                          "no preferences in a dry run with the p4d cordoned: %s", out);
        }
        must(kubectl_create(pod), names[i]);
        pods[i] = kubectl_json("-n e2e-pref get pod %s", names[i]);
    }
    must(kubectl(NULL, "uncordon " NODE_P4D " >/dev/null"), "uncordon");

    for (int i = 0; i < 2; i++) {
        json_t *na = json_object_get(json_object_get(json_object_get(pods[i], "spec"),
                                                     "affinity"), "nodeAffinity");
        json_t *pref = json_object_get(na, pk);
        json_t *terms = json_object_get(json_object_get(na, "requiredDuringSchedulingIgnoredDuring"
                                                            "Execution"), "nodeSelectorTerms");
        json_t *me = json_object_get(json_array_get(terms, 0), "matchExpressions");
        json_t *notin = json_array_get(me, 1), *v;
        bool g5 = false, p4d = false;
        size_t k;

        /* the pod's own terms are kept, first */
        ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(pref, 0), "weight")), 5);
        ck_assert_uint_eq(json_array_size(terms), 1);
        ck_assert_str_eq(json_string_value(json_object_get(json_array_get(me, 0), "key")),
                         "kubernetes.io/os");
        /* knowledge: the families that cannot hold 13B on one device, required away */
        ck_assert_uint_eq(json_array_size(me), 2);
        ck_assert_str_eq(json_string_value(json_object_get(notin, "key")),
                         "karpenter.k8s.aws/instance-family");
        ck_assert_str_eq(json_string_value(json_object_get(notin, "operator")), "NotIn");
        json_array_foreach(json_object_get(notin, "values"), k, v) {
            g5 = g5 || !strcmp(json_string_value(v), "g5");
            p4d = p4d || !strcmp(json_string_value(v), "p4d");
        }
        ck_assert_msg(g5 && !p4d, "NotIn should hold g5 and not p4d");
        if (i == 0) {
            ck_assert_uint_eq(json_array_size(pref), 1);   /* room on the p4d: no preference */
        } else {
            json_t *t1 = json_array_get(pref, 1), *t2 = json_array_get(pref, 2);
            json_t *e1 = json_array_get(json_object_get(json_object_get(t1, "preference"),
                                                        "matchExpressions"), 0);
            json_t *e2 = json_array_get(json_object_get(json_object_get(t2, "preference"),
                                                        "matchExpressions"), 0);
            ck_assert_uint_ge(json_array_size(pref), 3);
            ck_assert_int_eq(json_integer_value(json_object_get(t1, "weight")), 100);
            ck_assert_int_eq(json_integer_value(json_object_get(t2, "weight")), 90);
            ck_assert_str_eq(json_string_value(json_object_get(e1, "key")),
                             "karpenter.k8s.aws/instance-family");
            ck_assert_str_eq(json_string_value(json_array_get(json_object_get(e1, "values"), 0)),
                             "g6e");   /* L40S, tier 1 */
            p4d = false;
            json_array_foreach(json_object_get(e2, "values"), k, v)
                p4d = p4d || !strcmp(json_string_value(v), "p4d");
            ck_assert_msg(p4d, "tier 2 (A100) should prefer p4d");
        }
        json_decref(pods[i]);
    }
    delete_pods("e2e-pref");
    af_free(policy), af_free(path), af_free(text), af_free(dry), af_free(out);
}
END_TEST

/* The rollout's state object, as kubectl reads it: the record of `name` (new; NULL: none). */
static json_t *state_record(const char *name)
{
    char *out = NULL;
    json_t *cm, *rec = NULL;
    const char *text;

    if (kubectl(&out, "-n accelfit get configmap accelfit-rollouts -o json") == 0 &&
        (cm = json_loads(out, 0, NULL)) != NULL) {
        text = json_string_value(json_object_get(json_object_get(cm, "data"), name));
        rec = text ? json_loads(text, 0, NULL) : NULL;
        json_decref(cm);
    }
    af_free(out);
    return rec;
}

static bool state_halted(const char *name, bool want)
{
    json_t *rec = state_record(name);
    bool ok = rec && json_is_boolean(json_object_get(rec, "halted")) &&
              json_is_true(json_object_get(rec, "halted")) == want;

    json_decref(rec);
    return ok;
}

/* /rollouts' "began" of rollout `name` (caller frees; "" when not there). */
static char *rollout_began(const char *name)
{
    char *body = NULL, *began = NULL;
    json_t *j, *r;
    size_t i;

    if (acc_get(true, "/rollouts", &body) == 200 && (j = json_loads(body, 0, NULL)) != NULL) {
        json_array_foreach(json_object_get(j, "rollouts"), i, r)
            if (!strcmp(json_string_value(json_object_get(r, "name")) ?: "", name))
                began = af_xstrdup(json_string_value(json_object_get(r, "began")) ?: "");
        json_decref(j);
    }
    af_free(body);
    return began ? began : af_xstrdup("");
}

/*
 * The halt of the variant rollout (its failed pod deleted since, so nothing here could halt
 * it again) and its begin are in the ConfigMap accelfit keeps with its ServiceAccount's
 * RBAC, readable with kubectl; both survive a restart of accelfit, and an ack reaches it.
 */
START_TEST(test_rollout_state_survives_a_restart)
{
    char *yaml = NULL, *began, *after = NULL;
    CURL *c;
    struct af_test_resp r;
    char *url;

    ck_assert_msg(AF_TEST_WAIT_FOR(30, state_halted("llm-to-inf2", true)),
                  "the halt never reached ConfigMap accelfit-rollouts (log: %s)", acc.log_path);
    must(kubectl(&yaml, "-n accelfit get configmap accelfit-rollouts -o yaml"), "get -o yaml");
    ck_assert_msg(strstr(yaml, "llm-to-inf2") && strstr(yaml, "\"halted\": true") &&
                      strstr(yaml, "\"haltReason\": ") && strstr(yaml, "\"stage\": 1"),
                  "kubectl get -o yaml does not tell the stage and the halt:\n%s", yaml);
    began = rollout_began("llm-to-inf2");
    ck_assert(began[0]);
    sleep_ms(1100);   /* a restart that began it again would show another second */

    af_test_server_stop(&acc);
    start_accelfit(acc.port);
    ck_assert_msg(AF_TEST_WAIT_FOR(30, halted("llm-to-inf2")), "the halt did not survive the restart");
    ck_assert_msg(AF_TEST_WAIT_FOR(30, (af_free(after), after = rollout_began("llm-to-inf2"),
                                !strcmp(after, began))),
                  "began %s before the restart, %s after", began, after);

    /* acknowledged: the state object says so, for every replica */
    c = curl_easy_init();
    url = af_xasprintf("%s/rollouts/ack?name=llm-to-inf2", acc.base);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    af_test_http(c, "POST", url, "", 0, NULL, &r);
    ck_assert_int_eq(r.status, 200);
    af_test_resp_free(&r);
    curl_easy_cleanup(c);
    ck_assert_msg(AF_TEST_WAIT_FOR(30, state_halted("llm-to-inf2", false)),
                  "the ack never reached ConfigMap accelfit-rollouts");
    ck_assert(!halted("llm-to-inf2"));
    af_free(url), af_free(yaml), af_free(began), af_free(after);
}
END_TEST

/* ---- one share, whichever replica answers ---------------------------------------------------- */

#define BURST 100
#define BURST_ROUNDS 5

static bool health_ready(int port)
{
    CURL *c = curl_easy_init();
    struct af_test_resp r;
    char *url = af_xasprintf("http://127.0.0.1:%d/readyz", port);
    bool ok;

    af_test_http(c, NULL, url, NULL, 0, NULL, &r);
    ok = !r.curl_rc && r.status == 200;
    af_test_resp_free(&r);
    curl_easy_cleanup(c);
    af_free(url);
    return ok;
}

/* Another replica: accelfit's args as rendered, with a health listener of its own, and
 * `extra` (NULL or one more argument). */
static void start_replica_with(struct af_test_server *s, int port, int hport, const char *extra)
{
    const char *args[AF_ARRAY_SIZE(acc_args) + 1];
    char *hl = af_xasprintf("--health-listen=127.0.0.1:%d", hport);
    size_t n = 0;

    for (size_t i = 0; acc_args[i]; i++)
        args[n++] = strncmp(acc_args[i], "--health-listen=", 16) ? acc_args[i] : hl;
    if (extra)
        args[n++] = extra;
    args[n] = NULL;
    af_test_server_start_on(s, port, args, tls_phase, NULL, NULL);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, health_ready(hport)), "the second replica never became "
                  "ready (log: %s)", s->log_path);
    af_free(hl);
}

static void start_second_replica(struct af_test_server *s, int port, int hport)
{
    start_replica_with(s, port, hport, NULL);
}

/* Entries of rollout `name` in the claim ledger, as kubectl reads it, but reserves given back
 * (side "released"); -1 when unreadable. */
static int ledger_entries(const char *name)
{
    char *out = NULL;
    json_t *cm, *v;
    const char *key;
    int n = -1;

    if (kubectl(&out, "-n accelfit get configmap accelfit-rollout-claims -o json") == 0 &&
        (cm = json_loads(out, 0, NULL)) != NULL) {
        n = 0;
        json_object_foreach(json_object_get(cm, "data"), key, v) {
            json_t *e = json_loads(json_string_value(v) ?: "", 0, NULL);
            n += !strcmp(json_string_value(json_object_get(e, "rollout")) ?: "", name) &&
                 strcmp(json_string_value(json_object_get(e, "side")) ?: "", "released");
            json_decref(e);
        }
        json_decref(cm);
    }
    af_free(out);
    return n;
}

/*
 * Two replicas, as the Deployment runs them (its args, its ServiceAccount's RBAC), answer a
 * burst of 100 AdmissionReviews split between them, both restarted between its five rounds:
 * the target gets what one replica alone gives (5 at 5%), within one unit, every side
 * claimed in ConfigMap accelfit-rollout-claims before its answer, none decided locally.
 */
START_TEST(test_burst_through_two_replicas_keeps_one_share)
{
    struct af_test_server two;
    struct af_test_burst_client cl[BURST_ROUNDS][AF_TEST_BURST_CLIENTS];
    size_t len;
    char *body = af_test_read("docs/examples/rollout/llm-infer-replica.json", &len);
    struct af_test_burst_sum *sum = af_xcalloc(1, sizeof(*sum));
    int hport = af_test_free_port(), want = af_test_single_replica_target(0.05, BURST), n;

    replace_all(&body, "\"ml\"", "\"e2e-burst\"");
    start_second_replica(&two, 0, hport);
    for (int round = 0; round < BURST_ROUNDS; round++) {
        if (round) {   /* both forget what they decided, and read the ledger instead */
            af_test_server_stop(&acc);
            start_accelfit(acc.port);
            af_test_server_stop(&two);
            start_second_replica(&two, two.port, hport);
        }
        af_test_burst(&acc, &two, body, BURST / BURST_ROUNDS, cl[round]);
        af_test_burst_add(sum, cl[round]);
    }
    fprintf(stderr, "e2e: claims burst of %d through two replicas (both restarted %d times): "
            "%d target, %d source (one replica alone: %d); webhook latency p50 %.2f ms, "
            "p99 %.2f ms\n", BURST, BURST_ROUNDS - 1, sum->target, sum->source, want,
            af_test_percentile(sum->ms, sum->n_ms, 50), af_test_percentile(sum->ms, sum->n_ms, 99));
    ck_assert_int_eq(sum->failed, 0);
    ck_assert_int_eq(sum->target + sum->source, BURST);
    ck_assert_msg(sum->local == 0, "%d units decided without the ledger (log: %s)", sum->local,
                  acc.log_path);
    ck_assert_msg(abs(sum->target - want) <= 1,
                  "%d units on the target; one replica alone gives %d", sum->target, want);
    /* every decision of the burst, each once, and the reserves the two replicas hold (a
     * block each at most, of up to AF_ROLLOUT_RESERVE_BLOCK_MAX, docs/rollouts.md) */
    n = ledger_entries("burst-to-inf2");
    ck_assert_msg(n >= BURST && n <= BURST + 2 * AF_ROLLOUT_RESERVE_BLOCK_MAX,
                  "%d ledger entries for %d units", n, BURST);
    ck_assert_int_eq(af_test_server_stop(&two), 0);
    af_free(body);
    af_free(sum);
}
END_TEST

/* ---- monitoring: a real Prometheus with the rules the manifests install ---------------------- */

static struct af_test_fake_aws aws;
static pid_t prom_pid;
static int prom_port;
static char *prom_dir;

/* The Prometheus Operator's CRDs the monitoring overlay needs (ServiceMonitor and
 * PrometheusRule), as the Operator's bundle defines their names and versions. */
static const char operator_crds[] = "tests/fixtures/monitoring/operator-crds.yaml";

/* GET `path` of the test's Prometheus; the parsed answer (caller decrefs) or NULL. */
static json_t *prom_get(const char *path)
{
    CURL *c = curl_easy_init();
    struct af_test_resp r;
    char *url = af_xasprintf("http://127.0.0.1:%d%s", prom_port, path);
    json_t *j = NULL;

    af_test_http(c, NULL, url, NULL, 0, NULL, &r);
    if (!r.curl_rc && r.status == 200)
        j = json_loads(r.body, 0, NULL);
    af_test_resp_free(&r);
    curl_easy_cleanup(c);
    af_free(url);
    return j;
}

/* The instant result of `expr` (borrowed from *holder, which the caller decrefs), or NULL. */
static json_t *prom_query(const char *expr, json_t **holder)
{
    CURL *c = curl_easy_init();
    char *q = curl_easy_escape(c, expr, 0), *path = af_xasprintf("/api/v1/query?query=%s", q);

    *holder = prom_get(path);
    curl_free(q);
    curl_easy_cleanup(c);
    af_free(path);
    return *holder ? json_object_get(json_object_get(*holder, "data"), "result") : NULL;
}

/* How many series `expr` returns now (-1: the query failed). */
static int prom_count(const char *expr)
{
    json_t *h, *res = prom_query(expr, &h);
    int n = res ? (int)json_array_size(res) : -1;
    json_decref(h);
    return n;
}

/* The rules of the applied PrometheusRule, as a rules file, and a Prometheus scraping this
 * accelfit's health port and the API server every second with them. */
static void start_prometheus(void)
{
    json_t *rule = kubectl_json("-n accelfit get prometheusrule accelfit");
    char *rules = json_dumps(json_object_get(rule, "spec"), JSON_INDENT(1));
    char *cfg, *cfgflag, *data, *listen, *log, *path;

    ck_assert_msg(access("/usr/bin/prometheus", X_OK) == 0,
                  "no /usr/bin/prometheus: scripts/install-deps.sh installs the package 'prometheus'");
    prom_dir = af_xasprintf("%s/prometheus", work);
    must(run(NULL, "mkdir -p '%s/data'", prom_dir), "mkdir");
    path = af_xasprintf("%s/rules.json", prom_dir);
    write_file(path, rules, strlen(rules));
    af_free(path);
    prom_port = af_test_free_port();
    cfg = af_xasprintf(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "rule_files: [%s/rules.json]\n"
        "scrape_configs:\n"
        "  - job_name: accelfit\n"
        "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
        "  - job_name: apiserver\n"
        "    scheme: https\n"
        "    authorization: {credentials_file: %s/run/admin.token}\n"
        "    tls_config: {ca_file: %s/run/pki/ca.crt}\n"
        "    static_configs: [{targets: ['127.0.0.1:6443']}]\n",
        prom_dir, health_port, k8s, k8s);
    path = af_xasprintf("%s/prometheus.yml", prom_dir);
    write_file(path, cfg, strlen(cfg));
    af_free(path);
    cfgflag = af_xasprintf("--config.file=%s/prometheus.yml", prom_dir);
    data = af_xasprintf("--storage.tsdb.path=%s/data", prom_dir);
    listen = af_xasprintf("--web.listen-address=127.0.0.1:%d", prom_port);
    log = af_xasprintf("%s/prometheus.log", prom_dir);
    prom_pid = fork();
    ck_assert_int_ge(prom_pid, 0);
    if (prom_pid == 0) {
        FILE *f = freopen(log, "a", stdout);
        (void)f;
        dup2(STDOUT_FILENO, STDERR_FILENO);
        setpgid(0, 0);
        execl("/usr/bin/prometheus", "prometheus", cfgflag, data, listen, "--log.level=warn",
              (char *)NULL);
        _exit(127);
    }
    ck_assert_msg(AF_TEST_WAIT_FOR(60, prom_count("up{job=\"accelfit\"} == 1") == 1),
                  "Prometheus never scraped accelfit (log: %s)", log);
    af_free(cfg), af_free(cfgflag), af_free(data), af_free(listen), af_free(log);
    free(rules);
    json_decref(rule);
}

static void monitoring_setup(void)
{
    static const char *const args[] = {"--aws-pricing", "--aws-spot-refresh=60", NULL};

    ck_assert_msg(af_test_fake_aws_start(&aws), "the fake AWS needs python3 and openssl");
    af_test_fake_aws_static_keys(&aws);
    af_test_fake_aws_do(&aws, "on_demand",
                        "{\"region\": \"us-west-2\", \"prices\": {\"p4d.24xlarge\": \"33.5000000000\", "
                        "\"g5.2xlarge\": \"1.2120000000\", \"g5.48xlarge\": \"16.2880000000\", "
                        "\"trn1.32xlarge\": \"21.5000000000\", \"inf2.xlarge\": \"0.7582000000\", "
                        "\"inf2.48xlarge\": \"12.9813000000\", \"c6i.4xlarge\": \"0.6800000000\"}}");
    af_test_fake_aws_do(&aws, "spot",
                        "{\"region\": \"us-west-2\", \"items\": [{\"zone\": \"us-west-2b\", "
                        "\"type\": \"g5.2xlarge\", \"price\": \"0.4800\", \"ago\": 60}]}");
    memcpy(extra_acc_args, args, sizeof(args));
    tls_phase = true;
    phase_setup("manifests/overlays/tls");
    /* what `kubectl apply -k manifests/monitoring` installs, with the CRDs it needs */
    must(kubectl(NULL, "apply -f '%s/%s' >/dev/null", AF_SOURCE_DIR, operator_crds),
         "creating the Prometheus Operator's CRDs");
    must(kubectl(NULL, "wait --for condition=established --timeout=60s "
                       "crd/servicemonitors.monitoring.coreos.com crd/prometheusrules.monitoring.coreos.com "
                       ">/dev/null"), "waiting for the CRDs");
    apply_manifests("manifests/monitoring");
    start_prometheus();
}

static void monitoring_teardown(void)
{
    int st;
    if (prom_pid > 0) {
        kill(-prom_pid, SIGTERM);
        waitpid(prom_pid, &st, 0);
        prom_pid = 0;
    }
    af_free(prom_dir);
    prom_dir = NULL;
    phase_teardown();
    extra_acc_args[0] = NULL;
    af_test_fake_aws_stop(&aws);
}

/* A pod of `ns` bound to `node` with `gpus` GPUs, as if scheduled and running. */
static void create_bound_pod(const char *ns, const char *name, const char *node, int gpus)
{
    json_t *pod = json_pack(
        "{s:s, s:s, s:{s:s, s:s}, s:{s:s, s:[{s:s, s:s, s:{s:{s:i}, s:{s:i}}}]}}", "apiVersion", "v1",
        "kind", "Pod", "metadata", "name", name, "namespace", ns, "spec", "nodeName", node,
        "containers", "name", "c", "image", "registry.k8s.io/pause:3.9", "resources", "requests",
        "nvidia.com/gpu", gpus, "limits", "nvidia.com/gpu", gpus);
    must(kubectl_create(pod), "creating a bound pod");
    must(kubectl(NULL, "-n %s patch pod %s --subresource=status --type=merge "
                       "-p '{\"status\":{\"phase\":\"Running\"}}' >/dev/null", ns, name),
         "setting the pod Running");
}

/* The alerts the conditions of the test must raise, and those that may or may not (the
 * machine's load decides): every other alert's expression must return nothing. */
static const char *const must_fire[] = {"AccelfitRolloutHalted", "AccelfitTenantOverBudgetHard",
                                        "AccelfitAWSPricesFailing", "AccelfitPrepaidCapacityIdle",
                                        "AccelfitUtilizationDown" /* --prometheus: nothing there */};
static const char *const may_fire[] = {"AccelfitRolloutClaimsLocal", "AccelfitExtenderSlow"};

static bool listed(const char *const *names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(names[i], name))
            return true;
    return false;
}

/* True once every must_fire alert's expression returns a series. */
static bool conditions_visible(json_t *queries)
{
    json_t *q;
    size_t i;

    json_array_foreach(queries, i, q)
        if (listed(must_fire, AF_ARRAY_SIZE(must_fire), json_string_value(json_object_get(q, "name"))) &&
            prom_count(json_string_value(json_object_get(q, "expr"))) <= 0)
            return false;
    return true;
}

/* True when Prometheus lists `alert` in `state` ("firing", "pending"). */
static bool alert_in_state(const char *alert, const char *state)
{
    json_t *j = prom_get("/api/v1/alerts"), *a;
    size_t i;
    bool found = false;

    json_array_foreach(json_object_get(json_object_get(j, "data"), "alerts"), i, a)
        found = found || (!strcmp(json_string_value(json_object_get(json_object_get(a, "labels"),
                                                                    "alertname")) ?: "", alert) &&
                          !strcmp(json_string_value(json_object_get(a, "state")) ?: "", state));
    json_decref(j);
    return found;
}

/* Whether every panel query returns data; the first that does not in *missing. */
static bool panels_answer(json_t *queries, const char **missing)
{
    json_t *q;
    size_t i;

    json_array_foreach(queries, i, q) {
        if (strcmp(json_string_value(json_object_get(q, "kind")), "panel"))
            continue;
        if (prom_count(json_string_value(json_object_get(q, "expr"))) <= 0) {
            *missing = json_string_value(json_object_get(q, "name"));
            return false;
        }
    }
    return true;
}

/*
 * A real Prometheus scrapes a real accelfit on the real control plane, with the rules the
 * monitoring overlay installed: a rollout halted by its brake, a tenant over its hard budget, an
 * idle Capacity Block and an AWS spot price source that stops answering make exactly their
 * alerts' expressions return series; every metric a rule or panel names is in /metrics; every
 * panel query returns data; then
 * the webhook fails open (failurePolicy Ignore, accelfit unreachable) and the API server's
 * counter raises AccelfitWebhookFailingOpen.
 */
START_TEST(test_alerts_and_panels_on_a_real_prometheus)
{
    json_t *queries = af_test_monitoring_queries(), *q;
    double started = (double)time(NULL);
    const char *missing = "";
    char *metrics = NULL, *api_metrics = NULL;
    struct census c;
    size_t i;

    /* a rollout, its replicas through the webhook, a target pod failing: halted */
    clone_node(NODE_G5, "ip-10-0-4-10.us-west-2.compute.internal", "g5.48xlarge", 8);
    clone_node(NODE_INF2, "ip-10-0-5-10.us-west-2.compute.internal", "inf2.48xlarge", 12);
    install_rollout_policy();
    make_namespace("e2e-roll");
    create_replicas(10, true);
    ck_assert_msg(AF_TEST_WAIT_FOR(120, all_bound("e2e-roll", "llm-", 10)), "replicas not bound");
    c = census("e2e-roll", "llm-");
    ck_assert_int_ge(c.target, 1);
    {
        json_t *list = kubectl_json("-n e2e-roll get pods"), *p;
        const char *victim = NULL;
        json_array_foreach(json_object_get(list, "items"), i, p) {
            const char *side = json_string_value(json_object_get(json_object_get(
                json_object_get(p, "metadata"), "annotations"), "accelfit.io/rollout-side"));
            if (!victim && side && !strcmp(side, "target"))
                victim = json_string_value(json_object_get(json_object_get(p, "metadata"), "name"));
        }
        ck_assert_ptr_nonnull(victim);
        must(kubectl(NULL, "-n e2e-roll patch pod %s --subresource=status --type=merge "
                           "-p '{\"status\":{\"phase\":\"Failed\"}}' >/dev/null", victim),
             "setting a target pod Failed");
        json_decref(list);
    }
    ck_assert_msg(AF_TEST_WAIT_FOR(30, halted("llm-to-inf2")), "the rollout did not halt");

    /* research (hard budget, $60/h in the base policy) runs two p4d nodes' worth: $67/h */
    clone_node(NODE_P4D, "ip-10-0-6-10.us-west-2.compute.internal", "p4d.24xlarge", 8);
    make_namespace("research");
    create_bound_pod("research", "train-a", NODE_P4D, 8);
    create_bound_pod("research", "train-b", "ip-10-0-6-10.us-west-2.compute.internal", 8);

    /* a Capacity Block nobody uses (cordoned, so no pod lands there): its idle accelerators
     * are in /metrics and on the dashboard, and AccelfitPrepaidCapacityIdle's expression holds */
    clone_node(NODE_P4D, "ip-10-0-7-10.us-west-2.compute.internal", "p4d.24xlarge", 8);
    must(kubectl(NULL, "label node ip-10-0-7-10.us-west-2.compute.internal --overwrite "
                       "karpenter.sh/capacity-type=reserved "
                       "karpenter.k8s.aws/capacity-reservation-type=capacity-block "
                       "karpenter.k8s.aws/capacity-reservation-id=cr-0e2e0b10c >/dev/null"),
         "labelling the prepaid node");
    must(kubectl(NULL, "cordon ip-10-0-7-10.us-west-2.compute.internal >/dev/null"),
         "cordoning the prepaid node");

    /* AWS spot prices were read; now every EC2 call is throttled: the spot source fails */
    ck_assert_msg(AF_TEST_WAIT_FOR(60, metric("accelfit_aws_prices_age_seconds") >= 0),
                  "no AWS price was ever read (log: %s)", acc.log_path);
    af_test_fake_aws_do(&aws, "fault", "{\"kind\": \"throttle\", \"service\": \"ec2\", \"count\": 1000000}");

    /* the expressions of the alerts these conditions raise return series; the rest nothing */
    ck_assert_msg(AF_TEST_WAIT_FOR(300, conditions_visible(queries)),
                  "not every expected alert's expression returned data (Prometheus: %s)", prom_dir);
    json_array_foreach(queries, i, q) {
        const char *name = json_string_value(json_object_get(q, "name"));
        const char *expr = json_string_value(json_object_get(q, "expr"));
        int n;
        if (strcmp(json_string_value(json_object_get(q, "kind")), "alert"))
            continue;
        n = prom_count(expr);
        ck_assert_msg(n >= 0, "%s: the query failed: %s", name, expr);
        if (listed(must_fire, AF_ARRAY_SIZE(must_fire), name))
            ck_assert_msg(n > 0, "%s returned nothing", name);
        else if (!listed(may_fire, AF_ARRAY_SIZE(may_fire), name))
            ck_assert_msg(n == 0, "%s returned %d series though nothing is wrong there: %s", name,
                          n, expr);
    }
    /* the rule itself is evaluated: no `for`, it fires */
    ck_assert_msg(AF_TEST_WAIT_FOR(30, alert_in_state("AccelfitRolloutHalted", "firing")),
                  "Prometheus does not list AccelfitRolloutHalted as firing");

    /* every panel query answers (rates need two scrapes in their window) */
    ck_assert_msg(AF_TEST_WAIT_FOR(120, panels_answer(queries, &missing)),
                  "the panel '%s' has no data", missing);

    /* the dashboard as a picture, from the same queries (docs/operations.md shows one) */
    {
        const char *out = getenv("AF_DASHBOARD_SVG");
        char *svg = out ? af_xstrdup(out) : af_xasprintf("%s/dashboard.svg", work);
        char *log = NULL;
        int rc = run(&log, "python3 '%s/scripts/render-dashboard.py' --prometheus http://127.0.0.1:%d "
                           "--dashboard '%s/%s' --start %.0f --end %.0f --out '%s' 2>&1",
                     AF_SOURCE_DIR, prom_port, AF_SOURCE_DIR, AF_TEST_DASHBOARD, started,
                     (double)time(NULL), svg);
        char *text = NULL;
        ck_assert_msg(rc == 0, "render-dashboard.py: %s", log);
        must(run(&text, "cat '%s'", svg), "reading the picture");
        ck_assert_msg(strstr(text, "Spend vs budget") && strstr(text, "class=\"series\""),
                      "the picture has no panels");
        af_free(text), af_free(log), af_free(svg);
    }
    /* the webhook fails open: Ignore, and nothing answers where it points */
    must(kubectl(NULL, "patch mutatingwebhookconfiguration accelfit --type=json -p '["
                       "{\"op\":\"replace\",\"path\":\"/webhooks/0/failurePolicy\",\"value\":\"Ignore\"},"
                       "{\"op\":\"replace\",\"path\":\"/webhooks/0/clientConfig/url\","
                       "\"value\":\"https://127.0.0.1:9/mutate\"}]' >/dev/null"),
         "failurePolicy Ignore");
    create_replicas(1, true);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, prom_count("ALERTS{alertname=\"AccelfitWebhookFailingOpen\"}") > 0),
                  "AccelfitWebhookFailingOpen did not fire");

    /* every metric named is exported: accelfit's by accelfit, apiserver_* by the API server */
    ck_assert_int_eq(acc_get(false, "/metrics", &metrics), 200);
    must(kubectl(&api_metrics, "get --raw /metrics"), "the API server's /metrics");
    json_array_foreach(queries, i, q) {
        json_t *names = af_test_metric_names(json_string_value(json_object_get(q, "expr"))), *n;
        size_t k;
        json_array_foreach(names, k, n) {
            const char *name = json_string_value(n);
            const char *body = !strncmp(name, "apiserver_", 10) ? api_metrics : metrics;
            char *line;
            const char *at;
            bool found = false;
            if (!strcmp(name, "up"))
                continue;   /* Prometheus's own */
            line = af_xasprintf("\n%s", name);
            for (at = strstr(body, line); at && !found; at = strstr(at + 1, line))
                found = at[strlen(line)] == '{' || at[strlen(line)] == ' ';
            ck_assert_msg(found, "%s '%s' reads %s, which is not in %s's /metrics",
                          json_string_value(json_object_get(q, "kind")),
                          json_string_value(json_object_get(q, "name")), name,
                          body == metrics ? "accelfit" : "the API server");
            af_free(line);
        }
        json_decref(names);
    }

    delete_pods("e2e-roll");
    delete_pods("research");
    af_free(metrics), af_free(api_metrics);
    json_decref(queries);
}
END_TEST

/* ---- pods that say where they run, and a restart mid-rollout ------------------------------- */

/* Creates `pod` (steals it) through the webhook; kubectl's output, warnings included, in *out. */
static int kubectl_create_said(json_t *pod, char **out)
{
    char *path = af_xasprintf("%s/create-%d.json", work, rand());
    char *text = json_dumps(pod, JSON_COMPACT);
    int rc;

    write_file(path, text, strlen(text));
    rc = run(out, "'%s/bin/kubectl' --kubeconfig '%s/admin.kubeconfig' create -f '%s' 2>&1", k8s,
             k8s, path);
    unlink(path);
    free(text);
    af_free(path);
    json_decref(pod);
    return rc;
}

static const char *pod_side(const char *ns, const char *name, char **owned)
{
    must(kubectl(owned, "-n %s get pod %s -o jsonpath='{.metadata.annotations."
                        "accelfit\\.io/rollout-side}'", ns, name), "get the pod's side");
    return *owned;
}

/* The rollout's fallbacks as /rollouts counts them (-1: not there). */
static int fallbacks(const char *name)
{
    json_t *r = rollout_state(name);
    json_t *v = json_object_get(r, "fallbacks");
    int n = json_is_integer(v) ? (int)json_integer_value(v) : -1;

    json_decref(r);
    return n;
}

/*
 * Pods of a rollout at share 1.0 to inf2 (fallback: wait) that say where they must run,
 * created through the real API server and webhook: a nodeSelector or required node affinity
 * that admits no inf2 node keeps the unit on the source, bound to an A10G node, counted as a
 * fallback, with the constraint named in kubectl's warning and in /explain; a preferred
 * affinity for g5, a required affinity that admits inf2 too, and a nodeSelector an inf2 node
 * carries leave it to the share (the target); a pod created with nodeName is left as written.
 */
START_TEST(test_a_pinned_pod_stays_on_the_source)
{
    static const struct {
        const char *name, *key, *json, *side, *warn;
    } cases[] = {
        {"sel-g5", "nodeSelector", "{\"node.kubernetes.io/instance-type\":\"g5.48xlarge\"}",
         "source", "nodeSelector node.kubernetes.io/instance-type=g5.48xlarge admits no "
                   "inferentia2 node: it stays on the source"},
        {"req-g5", "affinity",
         "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
         "\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"node.kubernetes.io/"
         "instance-type\",\"operator\":\"In\",\"values\":[\"g5.48xlarge\",\"g5.12xlarge\"]}]}]}}}",
         "source", "required node affinity node.kubernetes.io/instance-type In g5.48xlarge"},
        {"req-not-inf2", "affinity",
         "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
         "\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"node.kubernetes.io/"
         "instance-type\",\"operator\":\"NotIn\",\"values\":[\"inf2.48xlarge\",\"inf2.xlarge\"]}]}]}}}",
         "source", "admits no inferentia2 node"},
        {"pref-g5", "affinity",
         "{\"nodeAffinity\":{\"preferredDuringSchedulingIgnoredDuringExecution\":[{\"weight\":"
         "100,\"preference\":{\"matchExpressions\":[{\"key\":\"node.kubernetes.io/instance-type\","
         "\"operator\":\"In\",\"values\":[\"g5.48xlarge\"]}]}}]}}",
         "target", NULL},
        {"req-either", "affinity",
         "{\"nodeAffinity\":{\"requiredDuringSchedulingIgnoredDuringExecution\":{"
         "\"nodeSelectorTerms\":[{\"matchExpressions\":[{\"key\":\"node.kubernetes.io/"
         "instance-type\",\"operator\":\"In\",\"values\":[\"g5.48xlarge\"]}]},{\"matchExpressions\":"
         "[{\"key\":\"node.kubernetes.io/instance-type\",\"operator\":\"In\",\"values\":"
         "[\"inf2.48xlarge\"]}]}]}}}",
         "target", NULL},
        {"sel-inf2", "nodeSelector", "{\"node.kubernetes.io/instance-type\":\"inf2.48xlarge\"}",
         "target", NULL},
    };
    int pinned = 0;
    char *body = NULL, *out = NULL, *side = NULL, *node;

    make_namespace("e2e-pin");
    for (size_t i = 0; i < AF_ARRAY_SIZE(cases); i++) {
        struct podspec p = {.name = cases[i].name, .device = "nvidia.com/gpu",
                            .annotations = "{\"accelfit.io/workload\":\"inference\"}",
                            .labels = "{\"accelfit.io/managed\":\"true\"}"};
        json_t *pod = pod_json("e2e-pin", &p);
        json_object_set_new(json_object_get(pod, "spec"), cases[i].key,
                            json_loads(cases[i].json, 0, NULL));
        af_free(out);
        ck_assert_msg(kubectl_create_said(pod, &out) == 0, "%s: %.1500s", cases[i].name, out);
        if (cases[i].warn)
            ck_assert_msg(strstr(out, cases[i].warn), "%s: kubectl printed no warning '%s':\n%.1500s",
                          cases[i].name, cases[i].warn, out);
        else
            ck_assert_msg(!strstr(out, "admits no"), "%s: %.1500s", cases[i].name, out);
        pinned += cases[i].warn != NULL;
        af_free(side);
        ck_assert_str_eq(pod_side("e2e-pin", cases[i].name, &side), cases[i].side);
        node = bound_node("e2e-pin", cases[i].name);
        ck_assert_msg(!strncmp(node, cases[i].warn ? "ip-10-0-4-" : "ip-10-0-5-", 10) ||
                          !strcmp(node, cases[i].warn ? NODE_G5 : NODE_INF2),
                      "%s bound to %s", cases[i].name, node);
        af_free(node);
    }
    ck_assert_msg(AF_TEST_WAIT_FOR(30, fallbacks("pin-to-inf2") == pinned),
                  "/rollouts counts %d fallbacks, not %d", fallbacks("pin-to-inf2"), pinned);
    ck_assert_int_eq(units("pin-to-inf2", "source"), pinned);

    /* /explain of the pod as stored says why it is on the source */
    ck_assert_int_eq(acc_get(true, "/explain?pod=e2e-pin/sel-g5", &body), 200);
    {
        json_t *ex = json_loads(body, 0, NULL), *ro = json_object_get(ex, "rollout");
        ck_assert_msg(json_is_true(json_object_get(ro, "pinned")) &&
                          strstr(json_string_value(json_object_get(ro, "reason")) ?: "",
                                 "admits no inferentia2 node"),
                      "%.1500s", json_string_value(json_object_get(ro, "reason")) ?: body);
        json_decref(ex);
    }

    /* bound at creation: never rewritten, counted where it runs */
    {
        struct podspec p = {.name = "named", .device = "nvidia.com/gpu",
                            .labels = "{\"accelfit.io/managed\":\"true\"}"};
        json_t *pod = pod_json("e2e-pin", &p);
        json_object_set_new(json_object_get(pod, "spec"), "nodeName", json_string(NODE_G5));
        af_free(out);
        ck_assert_int_eq(kubectl_create_said(pod, &out), 0);
        ck_assert_msg(strstr(out, "spec.nodeName"), "%.1500s", out);
        af_free(side);
        ck_assert_str_eq(pod_side("e2e-pin", "named", &side), "");
        ck_assert_msg(AF_TEST_WAIT_FOR(30, units("pin-to-inf2", "source") == pinned + 1),
                      "the bound pod is not counted on the source");
    }
    af_free(body), af_free(out), af_free(side);
    delete_pods("e2e-pin");
}
END_TEST

/* The share of rollout `name` in force, as /rollouts says (-1: not there). */
static double share_in_force(const char *name)
{
    json_t *r = rollout_state(name);
    json_t *v = json_object_get(json_object_get(r, "share"), "target");
    double share = json_is_number(v) ? json_number_value(v) : -1;

    json_decref(r);
    return share;
}

/*
 * A staged rollout (share 0, then 1.0 after 20 s) well into its second stage: accelfit
 * restarts, and the first new units it answers the moment it says it is ready go to the
 * target, as the stage the state object records says, not to the source as a rollout just
 * begun would send them.
 */
START_TEST(test_a_restarted_replica_decides_at_the_recorded_stage)
{
    struct af_test_burst_client cl[AF_TEST_BURST_CLIENTS];
    struct af_test_burst_sum *sum = af_xcalloc(1, sizeof(*sum));
    size_t len;
    char *body = af_test_read("docs/examples/rollout/llm-infer-replica.json", &len);
    char *began;
    json_t *r;

    replace_all(&body, "\"ml\"", "\"e2e-stage\"");
    ck_assert_msg(AF_TEST_WAIT_FOR(60, share_in_force("staged-to-inf2") == 1.0),
                  "staged-to-inf2 never reached its second stage");
    began = rollout_began("staged-to-inf2");
    ck_assert_msg(AF_TEST_WAIT_FOR(30, (r = state_record("staged-to-inf2")) != NULL),
                  "the rollout's begin never reached the state object");
    json_decref(r);
    for (int round = 0; round < 3; round++) {
        char *now;
        af_test_server_stop(&acc);
        start_accelfit(acc.port);   /* returns as soon as /readyz says 200 */
        af_test_burst(&acc, &acc, body, 4, cl);
        af_test_burst_add(sum, cl);
        now = rollout_began("staged-to-inf2");
        ck_assert_msg(!strcmp(now, began), "began %s before the restart, %s after", began, now);
        af_free(now);
    }
    ck_assert_int_eq(sum->failed, 0);
    ck_assert_msg(sum->target == 12, "%d of 12 new units went to the source after a restart "
                  "(log: %s)", sum->source, acc.log_path);
    af_free(body), af_free(began), af_free(sum);
}
END_TEST

/* ---- the suite ------------------------------------------------------------------------------------ */

/* ---- DRA: claims and slices served by the real API server ------------------------------------- */

#define DRA_A100 "ip-10-0-1-20.ec2.internal"
#define DRA_MIG "ip-10-0-2-30.ec2.internal"
#define DRA_TRN "ip-10-0-3-40.ec2.internal"

/* A copy of node `tmpl` named `name` of `type`, without device-plugin devices: a DRA node. */
static void clone_dra_node(const char *tmpl, const char *name, const char *type)
{
    clone_node(tmpl, name, type, 0);
    must(kubectl(NULL, "patch node %s --subresource=status --type=merge -p "
                       "'{\"status\":{\"capacity\":{\"nvidia.com/gpu\":null,"
                       "\"aws.amazon.com/neuron\":null,\"aws.amazon.com/neuroncore\":null,"
                       "\"aws.amazon.com/neurondevice\":null},\"allocatable\":{"
                       "\"nvidia.com/gpu\":null,\"aws.amazon.com/neuron\":null,"
                       "\"aws.amazon.com/neuroncore\":null,\"aws.amazon.com/neurondevice\":null}}}'"
                       " >/dev/null",
                 name),
         "patch a DRA node's status");
}

/* The resource.k8s.io/v1 CRDs, established, then the fixtures of tests/fixtures/dra `files`. */
static void dra_crds_and_objects(const char *const *files)
{
    must(kubectl(NULL, "apply -f '%s/tests/fixtures/dra/crds.yaml' >/dev/null", AF_SOURCE_DIR),
         "create the resource.k8s.io/v1 CRDs");
    must(kubectl(NULL, "wait --for condition=established --timeout=60s "
                       "crd/resourceslices.resource.k8s.io crd/resourceclaims.resource.k8s.io "
                       "crd/resourceclaimtemplates.resource.k8s.io "
                       "crd/deviceclasses.resource.k8s.io >/dev/null"),
         "wait for the DRA CRDs");
    for (; *files; files++)
        must(kubectl(NULL, "apply -f '%s/tests/fixtures/dra/%s.yaml' >/dev/null", AF_SOURCE_DIR,
                     *files),
             *files);
}

/* POST `body` to accelfit's `path`; the parsed answer (NULL when not 200 or not JSON). */
static json_t *post_to(const char *base, const char *path, const char *body)
{
    CURL *c = curl_easy_init();
    struct af_test_resp r;
    char *url = af_xasprintf("%s%s", base, path);
    json_t *j = NULL;

    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    af_test_http(c, "POST", url, body, strlen(body), NULL, &r);
    if (!r.curl_rc && r.status == 200 && r.body)
        j = json_loads(r.body, 0, NULL);
    af_test_resp_free(&r);
    curl_easy_cleanup(c);
    af_free(url);
    return j;
}

static json_t *acc_post(const char *path, const char *body)
{
    return post_to(acc.base, path, body);
}

/* The ExtenderArgs a 1.34 kube-scheduler sends for a pod of namespace ml naming `claims`. */
static char *dra_args(const char *claims)
{
    return af_xasprintf(
        "{\"Pod\":{\"metadata\":{\"name\":\"dra-p\",\"namespace\":\"ml\",\"uid\":\"uid-dra-p\"},"
        "\"spec\":{\"schedulerName\":\"accelfit-scheduler\",\"containers\":[{\"name\":\"c\","
        "\"resources\":{\"requests\":{\"cpu\":\"1\",\"memory\":\"1Gi\"}}}],"
        "\"resourceClaims\":%s}},\"Nodes\":null,\"NodeNames\":[\"" DRA_A100 "\",\"" DRA_MIG
        "\",\"" DRA_TRN "\",\"" NODE_G5 "\",\"" NODE_C6I "\",\"" NODE_P4D "\"]}",
        claims);
}

/* The nodes a filter of such a pod passes, "a,b" in the order sent (new; "?" on no answer). */
static char *dra_passed(const char *claims)
{
    char *body = dra_args(claims);
    json_t *r = acc_post("/filter", body), *v;
    struct af_buf out = AF_BUF_INIT(0);
    size_t i;
    char *s;

    af_free(body);
    if (!r)
        return af_xstrdup("?");
    json_array_foreach(json_object_get(r, "NodeNames"), i, v)
        ck_assert_int_eq(af_buf_printf(&out, "%s%s", i ? "," : "", json_string_value(v)), 0);
    json_decref(r);
    s = af_xstrdup(out.buf ? out.buf : "");
    af_buf_release(&out);
    return s;
}

static bool dra_passes(const char *claims, const char *want, char **last)
{
    af_free(*last);
    *last = dra_passed(claims);
    return !strcmp(*last, want);
}

#define TWO_GPUS "[{\"name\":\"g\",\"resourceClaimTemplateName\":\"two-gpus\"}]"
#define NEURONS "[{\"name\":\"n\",\"resourceClaimTemplateName\":\"four-neurons\"}]"

/*
 * A mixed cluster on the real API server: device-plugin GPU nodes (the EKS-like ones), DRA GPU,
 * MIG and Neuron nodes whose devices only ResourceSlices publish, a CPU node. accelfit finds
 * the DRA API by discovery, lists and watches it, and places claim pods by their claims; a
 * slice that goes away while pods are scheduled takes its devices with it, and comes back.
 */
START_TEST(test_dra_claims_on_a_mixed_cluster)
{
    char *last = NULL;
    json_t *r;

    clone_dra_node(NODE_P4D, DRA_A100, "p4d.24xlarge");
    clone_dra_node(NODE_P4D, DRA_MIG, "p5.48xlarge");
    clone_dra_node(NODE_TRN1, DRA_TRN, "trn2.48xlarge");
    make_namespace("ml");
    dra_crds_and_objects((const char *const[]){"deviceclasses", "nvidia-gpu-slice",
                                               "nvidia-mig-slice", "neuron-slice", "claims",
                                               NULL});

    /* accelfit asks for the API once a minute until it is served, then lists and watches */
    ck_assert_msg(AF_TEST_WAIT_FOR(150, dra_passes(TWO_GPUS, DRA_A100, &last)),
                  "a two-GPU template pod passed '%s', not the A100 DRA node", last);
    ck_assert_msg(AF_TEST_WAIT_FOR(30, dra_passes(NEURONS, DRA_TRN, &last)),
                  "a four-Neuron template pod passed '%s'", last);
    ck_assert_msg(AF_TEST_WAIT_FOR(30, dra_passes("[{\"name\":\"g\",\"resourceClaimName\":"
                                                  "\"shared-gpu\"}]",
                                                  DRA_A100, &last)),
                  "a pod sharing the allocated claim passed '%s'", last);
    ck_assert_msg(AF_TEST_WAIT_FOR(30, dra_passes("[{\"name\":\"g\",\"resourceClaimTemplate"
                                                  "Name\":\"small-slice\"}]",
                                                  DRA_A100 "," DRA_MIG, &last)),
                  "a firstAvailable pod passed '%s'", last);
    ck_assert_msg(AF_TEST_WAIT_FOR(30, dra_passes("[{\"name\":\"g\",\"resourceClaimTemplate"
                                                  "Name\":\"one-h100\"}]",
                                                  "", &last)),
                  "a pod asking for a whole H100 passed '%s'", last);

    /* /explain says what the claims are and what the node has */
    {
        char *body = dra_args(TWO_GPUS);
        r = acc_post("/explain", body);
        af_free(body);
        ck_assert_ptr_nonnull(r);
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(r, "dra"), "needs")),
                         "nvidia.com/gpu 2");
        json_decref(r);
    }

    /* the Neuron node's slice goes away while pods are scheduled, then comes back */
    must(kubectl(NULL, "delete resourceslice ip-10-0-3-40.ec2.internal-neuron.aws.com-t2n9c "
                       ">/dev/null"),
         "delete the Neuron slice");
    ck_assert_msg(AF_TEST_WAIT_FOR(30, dra_passes(NEURONS, "", &last)),
                  "with its slice gone the Neuron node still passed: '%s'", last);
    must(kubectl(NULL, "apply -f '%s/tests/fixtures/dra/neuron-slice.yaml' >/dev/null",
                 AF_SOURCE_DIR),
         "re-create the Neuron slice");
    ck_assert_msg(AF_TEST_WAIT_FOR(30, dra_passes(NEURONS, DRA_TRN, &last)),
                  "the Neuron slice came back but the pod passed '%s'", last);

    af_free(last);
    must(kubectl(NULL, "delete -f '%s/tests/fixtures/dra/claims.yaml' >/dev/null", AF_SOURCE_DIR),
         "delete the claims");
    for (const char *const *n = (const char *const[]){DRA_A100, DRA_MIG, DRA_TRN, NULL}; *n; n++)
        must(kubectl(NULL, "delete node %s >/dev/null", *n), "delete a DRA node");
    must(kubectl(NULL, "delete -f '%s/tests/fixtures/dra/crds.yaml' >/dev/null", AF_SOURCE_DIR),
         "delete the DRA CRDs");
}
END_TEST

/* ---- DRA pods through the real webhook ------------------------------------------------------ */

/* A pod of namespace ml in rollout dra-to-trn2 whose claim `g` is made from `tmpl`, written as
 * the v1.26 API server takes it (source:), named by its one container. */
static json_t *dra_swap_pod(const char *name, const char *tmpl)
{
    return json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s}}, s:{s:s, s:[{s:s, s:s, s:{s:{s:s}, "
                     "s:[{s:s}]}}], s:[{s:s, s:{s:s}}]}}",
                     "apiVersion", "v1", "kind", "Pod", "metadata", "name", name, "namespace",
                     "ml", "labels", "accelfit.io/managed", "true", "app", "dra-swap", "spec",
                     "schedulerName", "accelfit-scheduler", "containers", "name", "server",
                     "image", "registry.k8s.io/pause:3.9", "resources", "requests", "cpu",
                     "100m", "claims", "name", "g", "resourceClaims", "name", "g", "source",
                     "resourceClaimTemplateName", tmpl);
}

/* kubectl's output (warnings included) for a server-side dry run of `pod` (steals it). */
static char *dry_run(json_t *pod)
{
    char *path = af_xasprintf("%s/dry-%d.json", work, rand());
    char *text = json_dumps(pod, JSON_COMPACT), *out = NULL;

    write_file(path, text, strlen(text));
    (void)run(&out, "'%s/bin/kubectl' --kubeconfig '%s/admin.kubeconfig' create --dry-run=server "
                    "-o jsonpath='side={.metadata.annotations.accelfit\\.io/rollout-side}' -f "
                    "'%s' 2>&1",
              k8s, k8s, path);
    unlink(path);
    free(text);
    af_free(path);
    json_decref(pod);
    return out;
}

static bool dry_run_says(const char *want, char **last)
{
    af_free(*last);
    *last = dry_run(dra_swap_pod("swap-dry", "two-gpus"));
    return strstr(*last, want) != NULL;
}

/* Whether accelfit's log holds `needle`. */
static bool log_has(const char *needle)
{
    struct af_buf b = AF_BUF_INIT(0);
    bool has = !af_buf_read_file(&b, acc.log_path) && b.buf && strstr(b.buf, needle);

    af_buf_release(&b);
    return has;
}

/*
 * A DRA pod through the real API server and webhook (rollout dra-to-trn2: A100 to Trainium2 at
 * share 1.0, its variant swapping claim templates): with no resource.k8s.io/v1 served, the
 * template it would get is not known and the pod stays on the source; once the CRDs serve the
 * v1 objects and accelfit's reflector has the templates and the Neuron node's slice, the pod's
 * claim is made from the Neuron template (said in accelfit's log: the v1.26 API server then
 * drops spec.resourceClaims, its DRA gate being off), the container that names the claim gets
 * the variant's env, and the pod is on the target; a pod whose template would be one the
 * cluster does not have stays on the source, counted as a fallback, the template named in
 * kubectl's warning.
 */
START_TEST(test_dra_pod_takes_its_target_template_through_the_real_webhook)
{
    char *out = NULL, *side = NULL, *last = NULL;
    json_t *pod;
    size_t i;
    bool env = false;

    install_rollout_policy();   /* the preferences test left a policy without rollouts */
    make_namespace("ml");
    ck_assert_msg(dry_run_says("side=source", &last) &&
                      strstr(last, "ml/four-neurons, which the cluster does not have "
                                   "(no resource.k8s.io/v1)"),
                  "before the DRA API is served: %.1500s", last);
    dra_crds_and_objects((const char *const[]){"deviceclasses", "neuron-slice", "claims", NULL});
    clone_dra_node(NODE_P4D, DRA_A100, "p4d.24xlarge");
    clone_dra_node(NODE_TRN1, DRA_TRN, "trn2.48xlarge");
    /* accelfit asks for the API once a minute until it is served */
    ck_assert_msg(AF_TEST_WAIT_FOR(150, dry_run_says("side=target", &last)),
                  "the pod never went to the target: %.1500s (log: %s)", last, acc.log_path);

    ck_assert_msg(kubectl_create_said(dra_swap_pod("swap-0", "two-gpus"), &out) == 0, "%.1500s",
                  out);
    ck_assert_msg(!strstr(out, "Warning"), "%.1500s", out);
    ck_assert_str_eq(pod_side("ml", "swap-0", &side), "target");
    pod = kubectl_json("-n ml get pod swap-0");
    {
        json_t *c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
        json_t *e;
        json_array_foreach(json_object_get(c, "env"), i, e) {
            env = env || !strcmp(json_string_value(json_object_get(e, "name")) ?: "",
                                 "NEURON_RT_VISIBLE_CORES");
        }
    }
    json_decref(pod);
    ck_assert_msg(env, "swap-0 has no NEURON_RT_VISIBLE_CORES");
    ck_assert_msg(AF_TEST_WAIT_FOR(10, log_has("\"claims\":\"g: two-gpus -> four-neurons\"") ||
                                           log_has("claims=\"g: two-gpus -> four-neurons\"")),
                  "accelfit's log does not say the claim was made from four-neurons (log: %s)",
                  acc.log_path);

    af_free(out);
    ck_assert_msg(kubectl_create_said(dra_swap_pod("swap-missing", "one-a100"), &out) == 0,
                  "%.1500s", out);
    ck_assert_msg(strstr(out, "keeps the pod on the source: its claim g would be made from "
                              "template ml/eight-neurons, which the cluster does not have"),
                  "%.1500s", out);
    af_free(side);
    ck_assert_str_eq(pod_side("ml", "swap-missing", &side), "source");
    ck_assert_msg(AF_TEST_WAIT_FOR(30, fallbacks("dra-to-trn2") == 1),
                  "/rollouts counts %d fallbacks, not 1", fallbacks("dra-to-trn2"));

    af_free(out), af_free(side), af_free(last);
    delete_pods("ml");
    must(kubectl(NULL, "delete -f '%s/tests/fixtures/dra/claims.yaml' >/dev/null", AF_SOURCE_DIR),
         "delete the claims");
    for (const char *const *n = (const char *const[]){DRA_A100, DRA_TRN, NULL}; *n; n++)
        must(kubectl(NULL, "delete node %s >/dev/null", *n), "delete a DRA node");
    must(kubectl(NULL, "delete -f '%s/tests/fixtures/dra/crds.yaml' >/dev/null", AF_SOURCE_DIR),
         "delete the DRA CRDs");
}
END_TEST

/* ---- lists in protobuf ----------------------------------------------------------------------- */

/* Whether the filter and prioritize answers of the servers at a and b agree for `args`. */
static bool answers_agree(const char *a, const char *b, const char *args)
{
    static const char *const verbs[] = {"/filter", "/prioritize"};
    bool same = true;

    for (size_t i = 0; i < AF_ARRAY_SIZE(verbs) && same; i++) {
        json_t *x = post_to(a, verbs[i], args), *y = post_to(b, verbs[i], args);
        same = x && y && json_equal(x, y);
        json_decref(x);
        json_decref(y);
    }
    return same;
}

/*
 * The real API server lists nodes and pods to accelfit in protobuf (docs/cluster.md), and
 * what accelfit decodes is what it decodes from the same lists in JSON: a replica started
 * with --kube-api-content-type application/json answers filter and prioritize as the one
 * reading protobuf does, for a GPU pod while pods hold GPUs on the nodes; `accelfit costs
 * --kubeconfig` reports what it reports from kubectl's JSON of the cluster.
 */
START_TEST(test_lists_read_alike_in_protobuf_and_json)
{
    struct af_test_server js;
    struct podspec pod = {.name = "probe", .device = "nvidia.com/gpu",
                          .annotations = "{\"accelfit.io/workload\":\"inference\","
                                         "\"accelfit.io/model-params\":\"7B\"}"};
    const char *nodes[] = {NODE_P4D, NODE_G5, NODE_TRN1, NODE_INF2, NODE_C6I};
    int hport = af_test_free_port();
    json_t *args, *names = json_array();
    struct af_buf log = AF_BUF_INIT(0);
    char *text;

    make_namespace("e2e-enc");
    create_bound_pod("e2e-enc", "held-p4d", NODE_P4D, 7);
    create_bound_pod("e2e-enc", "held-g5", NODE_G5, 1);
    for (size_t i = 0; i < AF_ARRAY_SIZE(nodes); i++)
        json_array_append_new(names, json_string(nodes[i]));
    args = json_pack("{s:o, s:n, s:o}", "Pod", pod_json("e2e-enc", &pod), "Nodes", "NodeNames",
                     names);
    text = json_dumps(args, JSON_COMPACT);
    start_replica_with(&js, 0, hport, "--kube-api-content-type=application/json");
    ck_assert_msg(AF_TEST_WAIT_FOR(30, answers_agree(acc.base, js.base, text)),
                  "the replica reading JSON answers otherwise (logs: %s, %s)", acc.log_path,
                  js.log_path);
    {
        /* the held GPUs count: the p4d has one left, the g5 none */
        json_t *f = post_to(acc.base, "/filter", text);
        char *dump = json_dumps(f, JSON_COMPACT);
        ck_assert_msg(f && strstr(dump, NODE_P4D) && strstr(dump, NODE_G5), "%s", dump);
        ck_assert_msg(json_object_get(json_object_get(f, "FailedNodes"), NODE_G5) &&
                      !json_object_get(json_object_get(f, "FailedNodes"), NODE_P4D),
                      "filter: %s", dump);
        free(dump);
        json_decref(f);
    }
    {
        /* `accelfit costs --kubeconfig` lists once, in protobuf too: it reports what it
         * reports from kubectl's JSON of the same cluster */
        char *live = NULL, *file = NULL;
        must(kubectl(NULL, "get nodes,pods -A -o json >'%s/cluster.json'", work), "kubectl get");
        must(run(&live, "'%s' costs --kubeconfig '%s/admin.kubeconfig' 2>>'%s/costs.log'",
                 AF_BINARY, k8s, work), "accelfit costs --kubeconfig");
        must(run(&file, "'%s' costs --cluster '%s/cluster.json'", AF_BINARY, work),
             "accelfit costs --cluster");
        ck_assert_msg(strstr(live, "NAMESPACE") && strstr(live, "e2e-enc"), "%s", live);
        ck_assert_str_eq(live, file);
        af_free(live);
        af_free(file);
    }
    /* the log says so, in either log format */
    ck_assert_msg(log_has("\"encoding\":\"protobuf\"") || log_has("encoding=protobuf"),
                  "the real API server's lists were not read as protobuf (log: %s)",
                  acc.log_path);
    ck_assert_int_eq(af_buf_read_file(&log, js.log_path), 0);
    ck_assert_msg(log.buf && (strstr(log.buf, "\"encoding\":\"json\"") ||
                              strstr(log.buf, "encoding=json")) &&
                      !strstr(log.buf, "protobuf\""),
                  "log: %s", js.log_path);
    ck_assert_int_eq(af_test_server_stop(&js), 0);
    af_buf_release(&log);
    free(text);
    json_decref(args);
    delete_pods("e2e-enc");
}
END_TEST

static Suite *e2e_suite(void)
{
    Suite *s = suite_create("e2e");
    TCase *tc = tcase_create("base");

    tcase_add_unchecked_fixture(tc, base_setup, phase_teardown);
    tcase_add_test(tc, test_probes_as_kubelet_sends_them);
    tcase_add_test(tc, test_placements_on_an_eks_node_mix);
    tcase_add_test(tc, test_lists_read_alike_in_protobuf_and_json);
    tcase_add_test(tc, test_dra_claims_on_a_mixed_cluster);
    /* before the restart: kube-scheduler leaves when it loses its lease to the outage */
    tcase_add_test(tc, test_prepaid_capacity_and_overlays_on_the_real_scheduler);
    tcase_add_test(tc, test_api_server_restart_under_a_live_accelfit);
    suite_add_tcase(s, tc);

    tc = tcase_create("tls");
    tcase_add_unchecked_fixture(tc, tls_setup, phase_teardown);
    tcase_add_test(tc, test_probes_as_kubelet_sends_them);
    tcase_add_test(tc, test_variant_rollout_through_the_real_webhook);
    tcase_add_test(tc, test_a_jobs_pods_are_one_unit);
    tcase_add_test(tc, test_rollout_state_survives_a_restart);
    tcase_add_test(tc, test_burst_through_two_replicas_keeps_one_share);
    tcase_add_test(tc, test_a_pinned_pod_stays_on_the_source);
    tcase_add_test(tc, test_a_restarted_replica_decides_at_the_recorded_stage);
    tcase_add_test(tc, test_preferences_through_the_real_webhook);
    tcase_add_test(tc, test_dra_pod_takes_its_target_template_through_the_real_webhook);
    suite_add_tcase(s, tc);

    tc = tcase_create("monitoring");
    tcase_add_unchecked_fixture(tc, monitoring_setup, monitoring_teardown);
    tcase_add_test(tc, test_alerts_and_panels_on_a_real_prometheus);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const char *dir = getenv("AF_E2E_K8S");
    char bin[PATH_MAX + 32];
    bool ci = getenv("CI") && !strcmp(getenv("CI"), "true");

    snprintf(k8s, sizeof(k8s), "%s", dir && *dir ? dir : AF_SOURCE_DIR "/build/k8s");
    snprintf(bin, sizeof(bin), "%s/bin/kube-apiserver", k8s);
    if (access(bin, X_OK) != 0 || system("command -v etcd >/dev/null") != 0) {
        printf("e2e: skipped: no Kubernetes control plane in %s (bin/kube-apiserver, "
               "bin/kube-scheduler, bin/kubectl) or no etcd; KUBE_BIN_DIR=DIR ./run.sh test "
               "runs it (README.md, End-to-end tests)\n", k8s);
        return ci ? 1 : 77;
    }
    /* One control plane a machine (fixed ports): a second run of this suite waits for the
     * first instead of failing on a port in use. */
    {
        const char *tmp = getenv("TMPDIR");
        char lock[PATH_MAX];
        int fd;
        snprintf(lock, sizeof(lock), "%s/accelfit-e2e.lock", tmp && *tmp ? tmp : "/tmp");
        fd = open(lock, O_CREAT | O_RDWR | O_CLOEXEC, 0666);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0) {
            printf("e2e: another run of this suite holds %s; waiting for it\n", lock);
            fflush(stdout);
            (void)flock(fd, LOCK_EX);
        }
    }
    /* The processes each phase starts belong to this process, not to a forked test. */
    setenv("CK_FORK", "no", 1);
    return af_test_run(e2e_suite());
}
