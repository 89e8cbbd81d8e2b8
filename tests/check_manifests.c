/* SPDX-License-Identifier: Apache-2.0 */
/*
 * manifests: the deployment files checked against what the programs they configure do.
 * Every YAML file of manifests/ and examples/ parses; `kubectl kustomize` renders every
 * kustomization under manifests/ and the objects agree on one namespace; the
 * KubeSchedulerConfigurations pass the validation kube-scheduler applies to extenders
 * (docs/extender-protocol.md, KubeSchedulerConfiguration) and differ only in TLS; then, for
 * each deployable kustomization, accelfit is started with the arguments its rendered
 * Deployment gives it (ports and file paths mapped onto this machine, --in-cluster against
 * tests/apiserver/fake_apiserver.py), and every URL, verb, probe and webhook path the
 * rendered objects name is called on it, over TLS with the CA and host name kube-scheduler
 * would verify. The API requests accelfit made are recorded and compared with its
 * ClusterRole, in both directions. The example workloads' annotations are read by accelfit
 * with no note, by the rule their comments name, and their pods belong to the tenant their
 * comments name. The policy ConfigMap passes `accelfit check-policy`, has tenants (GET /costs
 * and /metrics show their budgets) and utilization queries; mounted as the kubelet mounts a
 * ConfigMap (no subPath), an update of it is reloaded without a restart and a broken one is
 * rejected at its line and column while the previous one serves. The rendered --prometheus is
 * pointed at a port nothing listens on: accelfit stays ready, degraded. The examples' policy
 * is the base's plus a rollout. The Dockerfile's COPY and RUN paths exist and its runtime
 * packages are the ones `ldd accelfit` resolves to.
 *
 * Needs kubectl (Debian: kubernetes-client) for the rendering tests; without it they are
 * not run and the suite exits 77, which ctest reports as skipped, not passed. Rendering
 * must print no warning (no deprecated kustomize field); AF_TEST_KUBECTL names more kubectl
 * binaries (colon-separated) that must render the same objects, e.g. an older release.
 */
#include <ctype.h>
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accelfit/config.h"
#include "accelfit/util.h"
#include "support/fake_api.h"
#include "support/http_client.h"
#include "support/support.h"

#define SKIP_STATUS 77
#define NS "accelfit"

/* ---- utilities ------------------------------------------------------------------------------- */

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/af-manifests-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void rm_tmpdir(void)
{
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static const char *tpath(const char *name)
{
    static char buf[8][512];
    static int i;
    i = (i + 1) % 8;
    snprintf(buf[i], sizeof(buf[i]), "%s/%s", tmpdir, name);
    return buf[i];
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s: %s", path, strerror(errno));
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Runs `cmd` with sh; returns its stdout (caller frees) and sets *status to its exit status. */
static char *run_sh(const char *cmd, int *status)
{
    struct af_buf b = AF_BUF_INIT(64u << 20);
    char chunk[8192];
    size_t n;
    FILE *p = popen(cmd, "r");
    int st;

    ck_assert_msg(p != NULL, "cannot run '%s'", cmd);
    while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
        ck_assert_int_eq(af_buf_add(&b, chunk, n), 0);
    st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128;
    if (!b.buf)
        return af_xstrdup("");
    return af_buf_detach(&b, NULL);
}

static bool have_command(const char *name)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
    return system(cmd) == 0;
}

static const char *or_empty(const char *s)
{
    return s ? s : "";
}

/* YAML text to JSON: a stream of several documents becomes an array, one document a
 * one-element array, nothing an empty array. Fails the test with file:line:column. */
static json_t *yaml_docs(const char *name, const char *text)
{
    struct af_buf out = AF_BUF_INIT(64u << 20);
    struct af_error err = {0};
    json_error_t jerr;
    json_t *doc, *items;
    int rc = af_yaml_to_json(name, text, strlen(text), &out, &err);

    ck_assert_msg(rc == 0, "%s:%d:%d: %s", name, err.line, err.column, err.text);
    doc = json_loadb(out.buf, out.len, 0, &jerr);
    af_buf_release(&out);
    ck_assert_msg(doc != NULL, "%s: %s", name, jerr.text);
    if (json_is_null(doc)) {
        json_decref(doc);
        return json_array();
    }
    items = json_object_get(doc, "items");
    if (json_is_array(items) && !json_object_get(doc, "metadata") &&
        !strcmp(or_empty(json_string_value(json_object_get(doc, "kind"))), "List")) {
        json_incref(items);
        json_decref(doc);
        return items;
    }
    items = json_array();
    json_array_append_new(items, doc);
    return items;
}

static json_t *obj_at(json_t *o, const char *path)
{
    char key[128];
    const char *dot;

    while (o && (dot = strchr(path, '.')) != NULL) {
        snprintf(key, sizeof(key), "%.*s", (int)(dot - path), path);
        o = json_object_get(o, key);
        path = dot + 1;
    }
    return json_object_get(o, path);
}

static const char *str_at(json_t *o, const char *path)
{
    return json_string_value(obj_at(o, path));
}

/* The object of `kind` named `name` in a rendered list (borrowed), or NULL. */
static json_t *find_obj(json_t *objs, const char *kind, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o) {
        if (!strcmp(or_empty(str_at(o, "kind")), kind) &&
            (!name || !strcmp(or_empty(str_at(o, "metadata.name")), name)))
            return o;
    }
    return NULL;
}

static json_t *named(json_t *arr, const char *name)
{
    size_t i;
    json_t *o;
    json_array_foreach(arr, i, o) {
        if (!strcmp(or_empty(str_at(o, "name")), name))
            return o;
    }
    return NULL;
}

/* ---- the files ------------------------------------------------------------------------------- */

static json_t *found_files; /* repository-relative paths of a walk */
static const char *walk_suffix;

static int collect(const char *path, const struct stat *st, int flag, struct FTW *f)
{
    size_t n = strlen(path), root = strlen(AF_SOURCE_DIR) + 1, sl = strlen(walk_suffix);
    if (flag == FTW_F && n > sl && !strcmp(path + n - sl, walk_suffix))
        json_array_append_new(found_files, json_string(path + root));
    return 0;
}

/* Repository-relative paths under `dir` whose names end in `suffix` (new reference). */
static json_t *files_under(const char *dir, const char *suffix)
{
    found_files = json_array();
    walk_suffix = suffix;
    ck_assert_int_eq(nftw(af_test_path(dir), collect, 16, FTW_PHYS), 0);
    return found_files;
}

START_TEST(test_every_yaml_file_parses)
{
    static const char *const dirs[] = {"manifests", "examples"};
    static const char *const suffixes[] = {".yaml", ".yml"};
    size_t count = 0;

    for (size_t d = 0; d < 2; d++) {
        for (size_t s = 0; s < 2; s++) {
            json_t *files = files_under(dirs[d], suffixes[s]), *f;
            size_t i;
            json_array_foreach(files, i, f) {
                char *text = af_test_read(json_string_value(f), NULL);
                json_t *docs = yaml_docs(json_string_value(f), text);
                ck_assert_msg(json_array_size(docs) > 0, "%s: no document",
                              json_string_value(f));
                json_decref(docs);
                af_free(text);
                count++;
            }
            json_decref(files);
        }
    }
    /* The base, two overlays, monitoring, examples, the cluster examples. */
    ck_assert_uint_ge(count, 20);
}
END_TEST

/* ---- KubeSchedulerConfiguration validation ------------------------------------------------------
 * What kube-scheduler (v1, strict decoding) refuses at start, and what accelfit needs of it. */

static bool known_key(const char *key, const char *const *keys)
{
    for (size_t i = 0; keys[i]; i++)
        if (!strcmp(key, keys[i]))
            return true;
    return false;
}

static bool problem(char *why, size_t n, const char *fmt, ...) AF_PRINTF(3, 4);
static bool problem(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return false;
}

static bool unknown_keys(json_t *o, const char *where, const char *const *keys, char *why,
                         size_t n)
{
    const char *key;
    json_t *v;
    if (!json_is_object(o))
        return problem(why, n, "%s: not a mapping", where);
    json_object_foreach(o, key, v) {
        if (!known_key(key, keys))
            return problem(why, n, "%s: unknown field \"%s\"", where, key);
    }
    return true;
}

/* k8s.io/apimachinery IsQualifiedName: [prefix/]name, name 1-63 [A-Za-z0-9][-A-Za-z0-9_.]*
 * ending alphanumeric, prefix a DNS subdomain of at most 253. */
static bool qualified_name(const char *s)
{
    const char *slash = strchr(s, '/'), *name = slash ? slash + 1 : s;
    size_t len = strlen(name);

    if (slash) {
        size_t pl = (size_t)(slash - s);
        if (pl == 0 || pl > 253 || strchr(name, '/'))
            return false;
        for (size_t i = 0; i < pl; i++)
            if (!(islower((unsigned char)s[i]) || isdigit((unsigned char)s[i]) || s[i] == '-' ||
                  s[i] == '.'))
                return false;
        if (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[pl - 1]))
            return false;
    }
    if (len == 0 || len > 63 || !isalnum((unsigned char)name[0]) ||
        !isalnum((unsigned char)name[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!(isalnum((unsigned char)name[i]) || name[i] == '-' || name[i] == '_' ||
              name[i] == '.'))
            return false;
    return true;
}

/* Go's time.ParseDuration, for the units a config uses: "1s", "500ms", "1m30s". */
static bool go_duration(const char *s)
{
    static const char *const units[] = {"ns", "us", "ms", "s", "m", "h", NULL};
    if (!*s)
        return false;
    while (*s) {
        size_t digits = strspn(s, "0123456789."), u;
        bool ok = false;
        if (!digits)
            return false;
        s += digits;
        for (u = 0; units[u]; u++) {
            size_t ul = strlen(units[u]);
            if (!strncmp(s, units[u], ul) && !(units[u][ul - 1] == 'm' && s[ul] == 's')) {
                s += ul;
                ok = true;
                break;
            }
        }
        if (!ok)
            return false;
    }
    return true;
}

static const char *const top_keys[] = {
    "apiVersion", "kind", "parallelism", "leaderElection", "clientConnection",
    "healthzBindAddress", "metricsBindAddress", "enableProfiling", "enableContentionProfiling",
    "percentageOfNodesToScore", "podInitialBackoffSeconds", "podMaxBackoffSeconds", "profiles",
    "extenders", "delayCacheUntilActive", NULL};
static const char *const le_keys[] = {"leaderElect", "leaseDuration", "renewDeadline",
                                      "retryPeriod", "resourceLock", "resourceName",
                                      "resourceNamespace", NULL};
static const char *const profile_keys[] = {"schedulerName", "percentageOfNodesToScore",
                                           "plugins", "pluginConfig", NULL};
static const char *const ext_keys[] = {"urlPrefix", "filterVerb", "preemptVerb",
                                       "prioritizeVerb", "weight", "bindVerb", "enableHTTPS",
                                       "tlsConfig", "httpTimeout", "nodeCacheCapable",
                                       "managedResources", "ignorable", NULL};
static const char *const tls_keys[] = {"insecure", "serverName", "certFile", "keyFile",
                                       "caFile", "certData", "keyData", "caData", NULL};
static const char *const mr_keys[] = {"name", "ignoredByScheduler", NULL};

/* The accelerator resources the filter entry must manage. */
static const char *const accel_resources[] = {"nvidia.com/gpu", "aws.amazon.com/neuron",
                                              "aws.amazon.com/neuroncore",
                                              "aws.amazon.com/neurondevice", NULL};

/* kube-scheduler's validation (validateExtenders and the rest of ValidateKubeScheduler-
 * Configuration that these files touch). */
static bool ksc_valid(json_t *c, char *why, size_t n)
{
    json_t *exts = obj_at(c, "extenders"), *profiles = obj_at(c, "profiles"), *e, *p;
    json_t *names = json_object(), *sched = json_object();
    size_t i, j;
    int binders = 0;
    bool ok = false;

    if (strcmp(or_empty(str_at(c, "apiVersion")), "kubescheduler.config.k8s.io/v1") ||
        strcmp(or_empty(str_at(c, "kind")), "KubeSchedulerConfiguration")) {
        problem(why, n, "not a kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration");
        goto out;
    }
    if (!unknown_keys(c, "KubeSchedulerConfiguration", top_keys, why, n))
        goto out;
    if (obj_at(c, "percentageOfNodesToScore")) {
        json_t *pct = obj_at(c, "percentageOfNodesToScore");
        if (!json_is_integer(pct) || json_integer_value(pct) < 0 || json_integer_value(pct) > 100) {
            problem(why, n, "percentageOfNodesToScore: must be an integer in [0, 100]");
            goto out;
        }
    }
    if (obj_at(c, "leaderElection")) {
        json_t *le = obj_at(c, "leaderElection");
        const char *lock = str_at(le, "resourceLock");
        if (!unknown_keys(le, "leaderElection", le_keys, why, n))
            goto out;
        if (lock && strcmp(lock, "leases")) {
            problem(why, n, "leaderElection.resourceLock: '%s' (only leases since 1.28)", lock);
            goto out;
        }
    }
    if (!json_is_array(profiles) || !json_array_size(profiles)) {
        problem(why, n, "profiles: at least one profile is needed");
        goto out;
    }
    json_array_foreach(profiles, i, p) {
        const char *sn = str_at(p, "schedulerName");
        if (!unknown_keys(p, "profiles[]", profile_keys, why, n))
            goto out;
        if (!sn || !*sn || json_object_get(sched, sn)) {
            problem(why, n, "profiles[%zu].schedulerName: empty or duplicate", i);
            goto out;
        }
        json_object_set_new(sched, sn, json_true());
    }
    json_array_foreach(exts, i, e) {
        json_t *mr = obj_at(e, "managedResources"), *r, *w = obj_at(e, "weight");
        const char *timeout = str_at(e, "httpTimeout");
        if (!unknown_keys(e, "extenders[]", ext_keys, why, n))
            goto out;
        if (str_at(e, "prioritizeVerb") && *str_at(e, "prioritizeVerb") &&
            (!json_is_integer(w) || json_integer_value(w) <= 0)) {
            problem(why, n, "extenders[%zu].weight: must have a positive weight applied to it", i);
            goto out;
        }
        if (str_at(e, "bindVerb") && *str_at(e, "bindVerb") && ++binders > 1) {
            problem(why, n, "extenders: only one extender can implement bind (bindVerb)");
            goto out;
        }
        if (timeout && !go_duration(timeout)) {
            problem(why, n, "extenders[%zu].httpTimeout: '%s' is not a duration", i, timeout);
            goto out;
        }
        if (obj_at(e, "tlsConfig")) {
            json_t *t = obj_at(e, "tlsConfig");
            if (!unknown_keys(t, "extenders[].tlsConfig", tls_keys, why, n))
                goto out;
            if (json_is_true(obj_at(t, "insecure")) &&
                (str_at(t, "caFile") || str_at(t, "caData"))) {
                problem(why, n, "extenders[%zu].tlsConfig: insecure with a CA is refused", i);
                goto out;
            }
        }
        json_array_foreach(mr, j, r) {
            const char *name = or_empty(str_at(r, "name"));
            char quota[300];
            if (!unknown_keys(r, "managedResources[]", mr_keys, why, n))
                goto out;
            snprintf(quota, sizeof(quota), "requests.%s", name);
            if (!qualified_name(name) || !strchr(name, '/') || strstr(name, "kubernetes.io/") ||
                !strncmp(name, "requests.", 9) || !qualified_name(quota)) {
                problem(why, n, "extenders[%zu].managedResources[%zu].name: '%s' is an invalid "
                        "extended resource name", i, j, name);
                goto out;
            }
            if (json_object_get(names, name)) {
                problem(why, n, "extenders[%zu].managedResources[%zu].name: duplicate extender "
                        "managed resource name '%s'", i, j, name);
                goto out;
            }
            json_object_set_new(names, name, json_true());
        }
    }
    ok = true;
out:
    json_decref(names);
    json_decref(sched);
    return ok;
}

/* What accelfit's deployment needs beyond kube-scheduler's validation. */
static bool ksc_fits_accelfit(json_t *c, char *why, size_t n)
{
    json_t *exts = obj_at(c, "extenders"), *e, *filter = NULL, *prio = NULL;
    size_t i;

    if (!json_is_integer(obj_at(c, "percentageOfNodesToScore")))
        return problem(why, n, "percentageOfNodesToScore: set it (docs/large-clusters.md)");
    if (!json_is_true(obj_at(c, "leaderElection.leaderElect")) ||
        !str_at(c, "leaderElection.resourceName") ||
        !strcmp(str_at(c, "leaderElection.resourceName"), "kube-scheduler"))
        return problem(why, n, "leaderElection: on, with a Lease of its own");
    json_array_foreach(exts, i, e) {
        const char *url = or_empty(str_at(e, "urlPrefix"));
        bool https = !strncmp(url, "https://", 8);
        if (!https && strncmp(url, "http://", 7))
            return problem(why, n, "extenders[%zu].urlPrefix: '%s' is not http(s)://", i, url);
        if (https != json_is_true(obj_at(e, "enableHTTPS")))
            return problem(why, n, "extenders[%zu]: enableHTTPS and the urlPrefix scheme disagree",
                           i);
        if (https && !str_at(e, "tlsConfig.caFile") && !str_at(e, "tlsConfig.caData"))
            return problem(why, n, "extenders[%zu].tlsConfig: no caFile or caData, so "
                           "kube-scheduler would skip verifying accelfit", i);
        if (!https && obj_at(e, "tlsConfig"))
            return problem(why, n, "extenders[%zu]: tlsConfig on plain HTTP", i);
        if (!json_is_true(obj_at(e, "nodeCacheCapable")))
            return problem(why, n, "extenders[%zu].nodeCacheCapable: must be true", i);
        if (!go_duration(or_empty(str_at(e, "httpTimeout"))))
            return problem(why, n, "extenders[%zu].httpTimeout: set a short one", i);
        if (str_at(e, "filterVerb"))
            filter = e;
        if (str_at(e, "prioritizeVerb"))
            prio = e;
    }
    if (!filter || !prio || filter == prio)
        return problem(why, n, "extenders: one filter entry and one prioritize entry");
    if (json_is_true(obj_at(filter, "ignorable")) || !json_is_true(obj_at(prio, "ignorable")))
        return problem(why, n, "extenders: filter not ignorable, prioritize ignorable");
    if (!str_at(filter, "preemptVerb"))
        return problem(why, n, "extenders: the filter entry needs preemptVerb");
    /* No managedResources sends every pod to filter (the DRA overlay: claim pods name no
     * extended resource); a list must name every device kube-scheduler counts. */
    for (i = 0; obj_at(filter, "managedResources") && accel_resources[i]; i++) {
        json_t *r = named(obj_at(filter, "managedResources"), accel_resources[i]);
        if (!r || json_is_true(obj_at(r, "ignoredByScheduler")))
            return problem(why, n, "filter entry: managedResources lacks %s (counted by "
                           "kube-scheduler too)", accel_resources[i]);
    }
    return true;
}

static json_t *load_ksc(const char *rel)
{
    char *text = af_test_read(rel, NULL);
    json_t *docs = yaml_docs(rel, text), *c = json_incref(json_array_get(docs, 0));
    json_decref(docs);
    af_free(text);
    return c;
}

static const char *const ksc_files[] = {"manifests/base/kube-scheduler-config.yaml",
                                        "manifests/overlays/tls/kube-scheduler-config.yaml",
                                        "manifests/overlays/dra/kube-scheduler-config.yaml"};

START_TEST(test_scheduler_configs_pass_kube_scheduler_validation)
{
    json_t *c = load_ksc(ksc_files[_i]);
    char why[512] = "";
    ck_assert_msg(ksc_valid(c, why, sizeof(why)), "%s: %s", ksc_files[_i], why);
    ck_assert_msg(ksc_fits_accelfit(c, why, sizeof(why)), "%s: %s", ksc_files[_i], why);
    json_decref(c);
}
END_TEST

/* The validation above refuses what kube-scheduler refuses: each case breaks the shipped
 * configuration one way. */
static void m_weight(json_t *c)
{
    json_object_set_new(json_array_get(obj_at(c, "extenders"), 1), "weight", json_integer(0));
}
static void m_dup(json_t *c)
{
    json_object_set(json_array_get(obj_at(c, "extenders"), 1), "managedResources",
                    obj_at(json_array_get(obj_at(c, "extenders"), 0), "managedResources"));
}
static void m_native(json_t *c)
{
    json_array_append_new(obj_at(json_array_get(obj_at(c, "extenders"), 0), "managedResources"),
                          json_pack("{s:s}", "name", "kubernetes.io/gpu"));
}
static void m_unprefixed(json_t *c)
{
    json_array_append_new(obj_at(json_array_get(obj_at(c, "extenders"), 0), "managedResources"),
                          json_pack("{s:s}", "name", "gpu"));
}
static void m_typo(json_t *c)
{
    json_object_set_new(json_array_get(obj_at(c, "extenders"), 0), "nodeCacheCapabel", json_true());
}
static void m_binders(json_t *c)
{
    json_object_set_new(json_array_get(obj_at(c, "extenders"), 0), "bindVerb", json_string("bind"));
    json_object_set_new(json_array_get(obj_at(c, "extenders"), 1), "bindVerb", json_string("bind"));
}
static void m_timeout(json_t *c)
{
    json_object_set_new(json_array_get(obj_at(c, "extenders"), 0), "httpTimeout",
                        json_string("1 second"));
}
static void m_profiles(json_t *c) { json_object_set_new(c, "profiles", json_array()); }
static void m_pct(json_t *c)
{
    json_object_set_new(c, "percentageOfNodesToScore", json_integer(101));
}

static const struct {
    const char *what;
    void (*mutate)(json_t *);
    const char *says;
} invalid_cases[] = {
    {"prioritizeVerb with weight 0", m_weight, "positive weight"},
    {"a managed resource in two extenders", m_dup, "duplicate extender managed resource"},
    {"a kubernetes.io/ resource", m_native, "invalid extended resource name"},
    {"a resource without a domain", m_unprefixed, "invalid extended resource name"},
    {"a misspelt field", m_typo, "unknown field \"nodeCacheCapabel\""},
    {"two binders", m_binders, "only one extender can implement bind"},
    {"a timeout that is not a duration", m_timeout, "is not a duration"},
    {"no profile", m_profiles, "at least one profile"},
    {"percentage over 100", m_pct, "percentageOfNodesToScore"},
};

START_TEST(test_scheduler_validation_refuses_what_kube_scheduler_refuses)
{
    json_t *c = load_ksc(ksc_files[0]);
    char why[512] = "";
    invalid_cases[_i].mutate(c);
    ck_assert_msg(!ksc_valid(c, why, sizeof(why)), "%s: accepted", invalid_cases[_i].what);
    ck_assert_msg(strstr(why, invalid_cases[_i].says), "%s: '%s' does not say '%s'",
                  invalid_cases[_i].what, why, invalid_cases[_i].says);
    json_decref(c);
}
END_TEST

/* accelfit's own checks refuse a CA-less HTTPS entry (kube-scheduler would go insecure). */
START_TEST(test_https_without_ca_is_refused)
{
    json_t *c = load_ksc(ksc_files[1]), *e = json_array_get(obj_at(c, "extenders"), 0);
    char why[512] = "";
    json_object_del(obj_at(e, "tlsConfig"), "caFile");
    ck_assert(ksc_valid(c, why, sizeof(why)));
    ck_assert(!ksc_fits_accelfit(c, why, sizeof(why)));
    ck_assert_msg(strstr(why, "skip verifying"), "%s", why);
    json_decref(c);
}
END_TEST

/* The TLS overlay's configuration is the base's with HTTPS: nothing else may drift. */
START_TEST(test_tls_scheduler_config_differs_only_in_tls)
{
    json_t *base = load_ksc(ksc_files[0]), *tls = load_ksc(ksc_files[1]), *e;
    size_t i;
    json_array_foreach(obj_at(tls, "extenders"), i, e) {
        const char *url = str_at(e, "urlPrefix");
        char *plain;
        ck_assert_msg(url && !strncmp(url, "https://", 8), "extenders[%zu]: not https", i);
        plain = af_xasprintf("http://%s", url + 8);
        json_object_set_new(e, "urlPrefix", json_string(plain));
        af_free(plain);
        json_object_del(e, "enableHTTPS");
        json_object_del(e, "tlsConfig");
    }
    ck_assert_msg(json_equal(base, tls), "%s and %s differ beyond urlPrefix, enableHTTPS and "
                  "tlsConfig", ksc_files[0], ksc_files[1]);
    json_decref(base);
    json_decref(tls);
}
END_TEST

/* The DRA overlay's configuration is the base's without the filter entry's managedResources,
 * which would keep claim pods (no extended resource requested) away from filter. */
START_TEST(test_dra_scheduler_config_sends_every_pod_to_filter)
{
    json_t *base = load_ksc(ksc_files[0]), *dra = load_ksc(ksc_files[2]), *e;
    size_t i;

    json_array_foreach(obj_at(dra, "extenders"), i, e)
        ck_assert_msg(!json_object_get(e, "managedResources"),
                      "%s: extenders[%zu] has managedResources: claim pods would skip it",
                      ksc_files[2], i);
    json_object_del(json_array_get(obj_at(base, "extenders"), 0), "managedResources");
    ck_assert_msg(json_equal(base, dra), "%s and %s differ beyond managedResources",
                  ksc_files[0], ksc_files[2]);
    json_decref(base);
    json_decref(dra);
}
END_TEST

/* ---- the Dockerfile -------------------------------------------------------------------------- */

/* Instructions with continuations joined, comments dropped (new array of strings). */
static json_t *dockerfile_lines(void)
{
    char *text = af_test_read("Dockerfile", NULL), *save = NULL, *line;
    struct af_buf cur = AF_BUF_INIT(0);
    json_t *out = json_array();

    for (line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t n = strlen(line);
        while (*line == ' ')
            line++, n--;
        if (*line == '#' || !n)
            continue;
        bool cont = line[n - 1] == '\\';
        ck_assert_int_eq(af_buf_add(&cur, line, cont ? n - 1 : n), 0);
        ck_assert_int_eq(af_buf_add(&cur, " ", 1), 0);
        if (!cont) {
            ck_assert_int_eq(af_buf_add(&cur, "", 1), 0);
            json_array_append_new(out, json_string(cur.buf));
            af_buf_reset(&cur);
        }
    }
    af_buf_release(&cur);
    af_free(text);
    return out;
}

/* Whitespace-separated words of `s` (new array). */
static json_t *words(const char *s)
{
    json_t *out = json_array();
    while (*s) {
        size_t n;
        s += strspn(s, " \t");
        n = strcspn(s, " \t");
        if (n) {
            char *w = af_xstrndup(s, n);
            json_array_append_new(out, json_string(w));
            af_free(w);
        }
        s += n;
    }
    return out;
}

static bool repo_path_exists(const char *rel)
{
    struct stat st;
    return stat(af_test_path(rel), &st) == 0;
}

static bool in_set(json_t *set, const char *s)
{
    size_t i;
    json_t *v;
    json_array_foreach(set, i, v) {
        if (!strcmp(json_string_value(v), s))
            return true;
    }
    return false;
}

static void add_unique(json_t *set, const char *s)
{
    if (!in_set(set, s))
        json_array_append_new(set, json_string(s));
}

START_TEST(test_dockerfile_paths_exist)
{
    json_t *lines = dockerfile_lines(), *l, *build_dirs = json_array(), *copied = json_array();
    char build_workdir[256] = "", entry[512] = "", user[64] = "";
    int stages = 0;
    size_t i;

    json_array_foreach(lines, i, l) {
        const char *s = json_string_value(l);
        json_t *w = words(s);
        const char *op = json_string_value(json_array_get(w, 0));
        size_t nw = json_array_size(w), k;

        if (!strcmp(op, "FROM")) {
            ck_assert_msg(strstr(s, "debian:bookworm"), "Dockerfile: '%s' is not Debian bookworm",
                          s);
            stages++;
            user[0] = '\0';
        } else if (!strcmp(op, "WORKDIR")) {
            if (stages == 1)
                snprintf(build_workdir, sizeof(build_workdir), "%s",
                         json_string_value(json_array_get(w, 1)));
        } else if (!strcmp(op, "USER")) {
            snprintf(user, sizeof(user), "%s", json_string_value(json_array_get(w, 1)));
        } else if (!strcmp(op, "ENTRYPOINT")) {
            snprintf(entry, sizeof(entry), "%s", s);
        } else if (!strcmp(op, "COPY")) {
            const char *from = NULL;
            size_t first = 1;
            ck_assert_uint_ge(nw, 3);
            if (!strncmp(json_string_value(json_array_get(w, 1)), "--from=", 7)) {
                from = json_string_value(json_array_get(w, 1)) + 7;
                first = 2;
            }
            for (k = first; k + 1 < nw; k++) {
                const char *src = json_string_value(json_array_get(w, k));
                if (!from) {
                    ck_assert_msg(repo_path_exists(src), "Dockerfile: COPY %s: no such path", src);
                    continue;
                }
                /* From the build stage: under its WORKDIR, either copied in or built there. */
                size_t wl = strlen(build_workdir);
                ck_assert_msg(wl && !strncmp(src, build_workdir, wl) && src[wl] == '/',
                              "Dockerfile: COPY --from %s is not under the build stage's WORKDIR",
                              src);
                const char *rel = src + wl + 1;
                bool built = false;
                for (size_t b = 0; b < json_array_size(build_dirs); b++) {
                    const char *bd = json_string_value(json_array_get(build_dirs, b));
                    size_t bl = strlen(bd);
                    if (!strncmp(rel, bd, bl) && rel[bl] == '/')
                        built = true;
                }
                ck_assert_msg(built || repo_path_exists(rel), "Dockerfile: COPY --from %s is "
                              "neither built nor in the repository", src);
            }
            json_array_append(copied, json_array_get(w, nw - 1));
        } else if (!strcmp(op, "RUN")) {
            for (k = 1; k < nw; k++) {
                const char *t = json_string_value(json_array_get(w, k));
                if (!strcmp(t, "-B") && k + 1 < nw)
                    add_unique(build_dirs, json_string_value(json_array_get(w, k + 1)));
            }
            for (k = 1; k < nw; k++) {
                const char *t = json_string_value(json_array_get(w, k));
                bool under_build = false;
                if (!strchr(t, '/') || t[0] == '/' || t[0] == '-' || t[0] == '$' ||
                    t[0] == '"' || strstr(t, "://"))
                    continue;
                for (size_t b = 0; b < json_array_size(build_dirs); b++) {
                    const char *bd = json_string_value(json_array_get(build_dirs, b));
                    if (!strncmp(t, bd, strlen(bd)) && t[strlen(bd)] == '/')
                        under_build = true;
                }
                ck_assert_msg(under_build || repo_path_exists(t),
                              "Dockerfile: RUN names '%s': no such path", t);
            }
        }
        json_decref(w);
    }
    ck_assert_int_eq(stages, 2);
    ck_assert_msg(user[0] && strcmp(user, "root") && strncmp(user, "0", 1),
                  "Dockerfile: the runtime stage must set a non-root USER");
    ck_assert_msg(strstr(entry, "\"serve\"]"), "Dockerfile: ENTRYPOINT must end in serve");
    ck_assert_msg(strstr(entry, "\"/usr/local/bin/accelfit\""), "Dockerfile: ENTRYPOINT binary");
    ck_assert(in_set(copied, "/usr/local/bin/accelfit"));
    json_decref(lines);
    json_decref(build_dirs);
    json_decref(copied);
}
END_TEST

/* "library package" for each library accelfit links: the libraries its ELF header names
 * (readelf), each with the libraries ldd says it loads in turn. Sanitizer runtimes, and what
 * they load, belong to instrumented test builds, not to the image's. ldd names the soname
 * link, which ldconfig may have made; dpkg knows the file it points to, under /lib or /usr/lib
 * depending on the package (merged /usr), so each candidate is asked. Caller frees. */
static char *linked_packages(void)
{
    char *cmd, *out;
    int st;
    cmd = af_xasprintf(
        "set -e; cd '%s'; ldd '%s' > all; "
        "readelf -d '%s' | sed -n 's/.*(NEEDED).*\\[\\(.*\\)\\]/\\1/p' | "
        "grep -v -e libasan -e libubsan -e libtsan | while read -r n; do "
        "p=$(awk -v n=\"$n\" '$1 == n && $3 ~ /^\\// {print $3}' all); echo \"$p\"; "
        "ldd \"$p\" | awk '$2 == \"=>\" && $3 ~ /^\\// {print $3}'; done | sort -u | "
        "while read -r l; do r=$(readlink -f \"$l\"); "
        "echo \"$l $l $r ${r#/usr} /usr$r\"; done > libs; "
        "cut -d' ' -f2- libs | tr ' ' '\\n' | sort -u | xargs dpkg -S 2>/dev/null "
        "| sed 's/:[^:]*: / /' > owners || true; "
        "awk 'NR == FNR {own[$2] = $1; next} "
        "{p = \"\"; for (i = 2; i <= NF && p == \"\"; i++) if ($i in own) p = own[$i]; "
        "print $1, (p == \"\" ? \"?\" : p)}' owners libs",
        tmpdir, AF_BINARY, AF_BINARY);
    out = run_sh(cmd, &st);
    ck_assert_msg(st == 0, "%s: exit %d", cmd, st);
    af_free(cmd);
    return out;
}

/* Every installed package's dependencies, first alternative of each: {package: [deps]}. */
static json_t *installed_depends(void)
{
    int st;
    char *out = run_sh("dpkg-query -W -f='${Package}\t${Pre-Depends}, ${Depends}\n'", &st);
    char *save = NULL, *line;
    json_t *map = json_object();
    ck_assert_int_eq(st, 0);
    for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *tab = strchr(line, '\t'), *dep, *s2 = NULL;
        json_t *deps = json_array();
        if (!tab)
            continue;
        *tab = '\0';
        for (dep = strtok_r(tab + 1, ",", &s2); dep; dep = strtok_r(NULL, ",", &s2)) {
            char name[128];
            size_t n;
            dep += strspn(dep, " ");
            n = strcspn(dep, " |(:");
            if (!n || n >= sizeof(name))
                continue;
            memcpy(name, dep, n);
            name[n] = '\0';
            add_unique(deps, name);
        }
        json_object_set_new(map, line, deps);
    }
    af_free(out);
    return map;
}

START_TEST(test_dockerfile_runtime_packages_are_what_accelfit_links)
{
    json_t *lines = dockerfile_lines(), *listed = json_array(), *linked = json_array();
    json_t *closure = json_array(), *deps, *v;
    char *out, *save = NULL, *lib;
    int froms = 0;
    size_t i;

    if (!have_command("ldd") || !have_command("readelf") || !have_command("dpkg-query")) {
        fprintf(stderr, "check_manifests: ldd, readelf or dpkg missing, runtime packages not "
                        "checked\n");
        json_decref(lines);
        return;
    }
    /* The last stage's apt-get install list. */
    json_array_foreach(lines, i, v) {
        const char *s = json_string_value(v), *inst;
        if (!strncmp(s, "FROM ", 5)) {
            froms++;
            json_array_clear(listed);
        }
        if (!strncmp(s, "RUN ", 4) && (inst = strstr(s, "apt-get install")) != NULL) {
            json_t *w = words(inst + strlen("apt-get install"));
            size_t k;
            json_array_foreach(w, k, v) {
                const char *t = json_string_value(v);
                if (!strcmp(t, "&&"))
                    break;
                if (t[0] != '-')
                    add_unique(listed, t);
            }
            json_decref(w);
        }
    }
    ck_assert_int_eq(froms, 2);
    ck_assert_uint_gt(json_array_size(listed), 0);

    make_tmpdir();
    out = linked_packages();
    for (lib = strtok_r(out, "\n", &save); lib; lib = strtok_r(NULL, "\n", &save)) {
        char *pkg = strchr(lib, ' ');
        ck_assert_ptr_nonnull(pkg);
        *pkg++ = '\0';
        ck_assert_msg(strcmp(pkg, "?"), "no Debian package holds %s", lib);
        add_unique(linked, pkg);
    }
    af_free(out);
    rm_tmpdir();
    ck_assert_uint_ge(json_array_size(linked), 5);

    /* Nothing listed that accelfit does not link. */
    json_array_foreach(listed, i, v) {
        ck_assert_msg(in_set(linked, json_string_value(v)),
                      "Dockerfile installs %s, which accelfit does not link", json_string_value(v));
    }
    /* Everything linked is listed or comes with what is (dpkg dependencies, recursively). */
    deps = installed_depends();
    json_array_extend(closure, listed);
    for (i = 0; i < json_array_size(closure); i++) {
        json_t *d = json_object_get(deps, json_string_value(json_array_get(closure, i))), *x;
        size_t k;
        json_array_foreach(d, k, x)
            add_unique(closure, json_string_value(x));
    }
    json_array_foreach(linked, i, v) {
        ck_assert_msg(in_set(closure, json_string_value(v)),
                      "accelfit links a library of %s, which the runtime stage does not install",
                      json_string_value(v));
    }
    json_decref(lines);
    json_decref(listed);
    json_decref(linked);
    json_decref(closure);
    json_decref(deps);
}
END_TEST

/* ---- the cluster examples -------------------------------------------------------------------- */

/* The catalog's entry for an instance type (`name`) or the first of a family (borrowed). */
static json_t *catalog_entry(json_t *catalog, const char *key, const char *value)
{
    size_t i;
    json_t *e;
    json_array_foreach(obj_at(catalog, "instances"), i, e) {
        if (!strcmp(or_empty(str_at(e, key)), value))
            return e;
    }
    return NULL;
}

/* The taint an accelerator kind's nodes carry: its device plugin's resource name. */
static const char *taint_for(json_t *entry)
{
    const char *kind = str_at(entry, "accelerator.kind");
    if (!kind)
        return NULL;
    return !strcmp(kind, "neuron") ? "aws.amazon.com/neuron" : "nvidia.com/gpu";
}

/* Each node group or NodePool: hardware accelfit's catalog knows, tainted with exactly its
 * accelerator's resource name (none on CPU), and no labels of its own (accelfit reads the ones
 * EKS and Karpenter set). The pods of manifests/examples tolerate only those taints. */
static void check_pool(const char *where, json_t *catalog, json_t *types, const char *key,
                       json_t *taints, json_t *labels, json_t *taint_keys)
{
    size_t i;
    json_t *t;
    const char *want = NULL;

    ck_assert_msg(json_array_size(types) > 0, "%s: no instance types", where);
    ck_assert_msg(!labels || !json_object_size(labels), "%s: accelfit reads the labels EKS "
                  "sets; add none", where);
    json_array_foreach(types, i, t) {
        json_t *e = catalog_entry(catalog, key, json_string_value(t));
        ck_assert_msg(e != NULL, "%s: %s is not in policies/catalog.yaml", where,
                      json_string_value(t));
        if (i == 0)
            want = taint_for(e);
        ck_assert_msg((want == NULL) == (taint_for(e) == NULL) &&
                      (!want || !strcmp(want, taint_for(e))), "%s: mixes accelerator kinds", where);
    }
    ck_assert_uint_eq(json_array_size(taints), want ? 1 : 0);
    if (want) {
        json_t *taint = json_array_get(taints, 0);
        ck_assert_msg(!strcmp(or_empty(str_at(taint, "key")), want) &&
                      !strcmp(or_empty(str_at(taint, "effect")), "NoSchedule"),
                      "%s: taint %s:NoSchedule", where, want);
        add_unique(taint_keys, want);
    }
}

START_TEST(test_cluster_examples_match_what_accelfit_reads)
{
    char *text = af_test_read("policies/catalog.yaml", NULL);
    json_t *docs = yaml_docs("policies/catalog.yaml", text), *catalog = json_array_get(docs, 0);
    json_t *taint_keys = json_array(), *files, *f, *o, *g;
    size_t i, j, k;
    char *ek = af_test_read("examples/eksctl-cluster.yaml", NULL), *kp;
    json_t *eks = yaml_docs("examples/eksctl-cluster.yaml", ek), *karp;

    json_array_foreach(obj_at(json_array_get(eks, 0), "managedNodeGroups"), i, g) {
        json_t *types = obj_at(g, "instanceTypes") ? json_incref(obj_at(g, "instanceTypes"))
                                                   : json_pack("[O]", obj_at(g, "instanceType"));
        json_t *taints = obj_at(g, "taints") ? json_incref(obj_at(g, "taints")) : json_array();
        check_pool(str_at(g, "name"), catalog, types, "name", taints, obj_at(g, "labels"),
                   taint_keys);
        /* Scaling a Neuron group from zero: Cluster Autoscaler must be told its devices. */
        if (json_integer_value(obj_at(g, "minSize")) == 0) {
            ck_assert_msg(json_is_true(obj_at(g, "propagateASGTags")), "%s: propagateASGTags",
                          str_at(g, "name"));
            json_t *e = catalog_entry(catalog, "name", json_string_value(json_array_get(types, 0)));
            if (!strcmp(or_empty(str_at(e, "accelerator.kind")), "neuron"))
                ck_assert_msg(json_object_get(obj_at(g, "tags"), "k8s.io/cluster-autoscaler/"
                                              "node-template/resources/aws.amazon.com/neuron"),
                              "%s: no neuron resources tag", str_at(g, "name"));
        }
        json_decref(taints);
        json_decref(types);
    }
    kp = af_test_read("examples/karpenter-nodepools.yaml", NULL);
    karp = yaml_docs("examples/karpenter-nodepools.yaml", kp);
    json_array_foreach(karp, i, o) {
        json_t *req, *fams = NULL;
        if (strcmp(or_empty(str_at(o, "kind")), "NodePool"))
            continue;
        json_array_foreach(obj_at(o, "spec.template.spec.requirements"), j, req) {
            if (!strcmp(or_empty(str_at(req, "key")), "karpenter.k8s.aws/instance-family"))
                fams = obj_at(req, "values");
        }
        json_t *taints = obj_at(o, "spec.template.spec.taints")
                             ? json_incref(obj_at(o, "spec.template.spec.taints"))
                             : json_array();
        check_pool(str_at(o, "metadata.name"), catalog, fams, "family", taints,
                   obj_at(o, "spec.template.metadata.labels"), taint_keys);
        json_decref(taints);
    }
    ck_assert_uint_eq(json_array_size(taint_keys), 2);

    /* The example workloads tolerate exactly those taints. */
    files = files_under("manifests/examples", ".yaml");
    json_array_foreach(files, i, f) {
        char *t = af_test_read(json_string_value(f), NULL);
        json_t *objs = yaml_docs(json_string_value(f), t), *tol;
        json_array_foreach(objs, j, o) {
            json_array_foreach(obj_at(o, "spec.template.spec.tolerations"), k, tol) {
                ck_assert_msg(in_set(taint_keys, or_empty(str_at(tol, "key"))), "%s: tolerates %s, "
                              "which no node group has", json_string_value(f), str_at(tol, "key"));
            }
            json_array_foreach(
                obj_at(json_array_get(obj_at(o, "rollouts"), 0), "variant.tolerations"), k, tol)
            {
                ck_assert_msg(in_set(taint_keys, or_empty(str_at(tol, "key"))), "%s: the variant "
                              "tolerates %s, which no node group has", json_string_value(f),
                              str_at(tol, "key"));
            }
        }
        json_decref(objs);
        af_free(t);
    }
    json_decref(files);
    json_decref(taint_keys);
    json_decref(docs);
    json_decref(eks);
    json_decref(karp);
    af_free(text);
    af_free(ek);
    af_free(kp);
}
END_TEST

/* ---- rendering ------------------------------------------------------------------------------- */

/* `KUBECTL kustomize dir`, which must succeed and print no warning (a deprecated field). */
static json_t *render_with(const char *dir, const char *kubectl)
{
    char cmd[2048], *out, *err;
    int st;
    json_t *objs;
    snprintf(cmd, sizeof(cmd), "'%s' kustomize '%s' 2>'%s/kustomize.err'", kubectl,
             af_test_path(dir), tmpdir);
    out = run_sh(cmd, &st);
    ck_assert_msg(st == 0, "%s kustomize %s failed (exit %d); see %s/kustomize.err", kubectl,
                  dir, st, tmpdir);
    snprintf(cmd, sizeof(cmd), "cat '%s/kustomize.err'", tmpdir);
    err = run_sh(cmd, &st);
    ck_assert_msg(!err[0], "%s kustomize %s warns:\n%s", kubectl, dir, err);
    af_free(err);
    objs = yaml_docs(dir, out);
    af_free(out);
    ck_assert_uint_gt(json_array_size(objs), 0);
    return objs;
}

static json_t *render(const char *dir)
{
    return render_with(dir, "kubectl");
}

/* Kustomization directories under manifests/ (new array). */
static json_t *kustomizations(void)
{
    json_t *files = files_under("manifests", "/kustomization.yaml"), *dirs = json_array(), *f;
    size_t i;
    json_array_foreach(files, i, f) {
        const char *p = json_string_value(f);
        char *d = af_xstrndup(p, strlen(p) - strlen("/kustomization.yaml"));
        json_array_append_new(dirs, json_string(d));
        af_free(d);
    }
    json_decref(files);
    return dirs;
}

static bool cluster_scoped(const char *kind)
{
    static const char *const kinds[] = {"Namespace", "ClusterRole", "ClusterRoleBinding",
                                        "PriorityClass",
                                        "MutatingWebhookConfiguration",
                                        "ValidatingWebhookConfiguration", NULL};
    return known_key(kind, kinds);
}

/* Every object of accelfit's own in namespace accelfit, and every reference to it too. */
static void check_namespaces(const char *dir, json_t *objs)
{
    size_t i, j;
    json_t *o, *s;
    json_array_foreach(objs, i, o) {
        const char *kind = str_at(o, "kind"), *name = str_at(o, "metadata.name");
        const char *ns = str_at(o, "metadata.namespace");
        bool workload_ns = ns && strcmp(ns, NS) && find_obj(objs, "Namespace", ns) &&
                           !strstr(name, "accelfit");
        if (cluster_scoped(kind)) {
            ck_assert_msg(!ns, "%s: %s/%s is cluster-scoped but names a namespace", dir, kind,
                          name);
        } else if (!strcmp(kind, "RoleBinding") && ns && !strcmp(ns, "kube-system")) {
            /* The one object that must live in kube-system (scheduler-rbac.yaml). */
            ck_assert_str_eq(str_at(o, "roleRef.name"),
                             "extension-apiserver-authentication-reader");
        } else if (!workload_ns) {
            ck_assert_msg(ns && !strcmp(ns, NS), "%s: %s/%s is in namespace '%s', not " NS, dir,
                          kind, name, ns ? ns : "(none)");
        }
        json_array_foreach(obj_at(o, "subjects"), j, s) {
            if (!strcmp(or_empty(str_at(s, "kind")), "ServiceAccount"))
                ck_assert_msg(!strcmp(or_empty(str_at(s, "namespace")), NS), "%s: %s/%s binds a "
                              "service account outside " NS, dir, kind, name);
        }
        json_array_foreach(obj_at(o, "webhooks"), j, s) {
            ck_assert_str_eq(str_at(s, "clientConfig.service.namespace"), NS);
        }
        s = json_object_get(obj_at(o, "metadata.annotations"), "cert-manager.io/inject-ca-from");
        if (s)
            ck_assert_msg(!strncmp(or_empty(json_string_value(s)), NS "/", strlen(NS) + 1),
                          "%s: %s/%s injects a CA from outside " NS, dir, kind, name);
    }
}

START_TEST(test_every_kustomization_renders_in_one_namespace)
{
    json_t *dirs = kustomizations(), *d;
    size_t i;
    make_tmpdir();
    ck_assert_uint_ge(json_array_size(dirs), 5);
    json_array_foreach(dirs, i, d) {
        json_t *objs = render(json_string_value(d));
        /* AF_TEST_KUBECTL: more kubectl binaries (colon-separated, e.g. an older release)
         * that must render the same objects, without a warning either */
        char *more = af_xstrdup(getenv("AF_TEST_KUBECTL") ? getenv("AF_TEST_KUBECTL") : "");
        char *save = NULL;
        for (char *k = strtok_r(more, ":", &save); k; k = strtok_r(NULL, ":", &save)) {
            json_t *other = render_with(json_string_value(d), k);
            ck_assert_msg(json_equal(objs, other), "%s kustomize %s renders other objects", k,
                          json_string_value(d));
            json_decref(other);
        }
        af_free(more);
        check_namespaces(json_string_value(d), objs);
        /* accelfit and its scheduler are on every accelerator pod's scheduling path: they run
         * at a priority above any workload's (a class of the rendered objects, or
         * system-cluster-critical) */
        for (int k = 0; k < 2; k++) {
            json_t *dep = find_obj(objs, "Deployment", k ? "accelfit-scheduler" : "accelfit");
            const char *pc = dep ? str_at(dep, "spec.template.spec.priorityClassName") : NULL;
            json_t *cls = pc ? find_obj(objs, "PriorityClass", pc) : NULL;
            if (!dep)
                continue;
            ck_assert_msg(pc, "%s: Deployment %s has no priorityClassName",
                          json_string_value(d), k ? "accelfit-scheduler" : "accelfit");
            ck_assert_msg(!strcmp(pc, "system-cluster-critical") ||
                              (cls && json_integer_value(json_object_get(cls, "value")) >=
                                          1000000000),
                          "%s: priority class %s is not above every workload",
                          json_string_value(d), pc);
        }
        json_decref(objs);
    }
    json_decref(dirs);
    rm_tmpdir();
}
END_TEST

/* ---- running accelfit as the manifests do ---------------------------------------------------- */

/* The Deployment running accelfit (its image's entrypoint is `accelfit serve`). */
struct deploy {
    json_t *objs;        /* the rendered kustomization */
    json_t *dep, *pod, *ctr;
    json_t *ksc;         /* the KubeSchedulerConfiguration its scheduler reads */
    json_t *sched_ctr, *sched_pod;
    int listen_port, health_port;      /* as the manifests say */
    int local_listen, local_health;    /* where they are on this machine */
    bool tls;
    char ca[512];        /* the CA a client of the TLS listener verifies against */
    json_t *argv;        /* accelfit's arguments, mapped */
    pid_t pid;
    char log[512];
    char policy[512];    /* --policy, mapped: a ConfigMap volume laid out as the kubelet does */
    char prom_url[256];  /* --prometheus as rendered ("" without it) */
};

static int port_of(const char *listen)
{
    const char *colon = strrchr(listen, ':');
    ck_assert_msg(colon && colon[1], "'%s' has no port", listen);
    return atoi(colon + 1);
}

/* A container port by name or number (string or integer) in `ctr`. */
static int container_port(json_t *ctr, json_t *ref)
{
    size_t i;
    json_t *p;
    if (json_is_integer(ref))
        return (int)json_integer_value(ref);
    json_array_foreach(obj_at(ctr, "ports"), i, p) {
        if (!strcmp(or_empty(str_at(p, "name")), or_empty(json_string_value(ref))))
            return (int)json_integer_value(obj_at(p, "containerPort"));
    }
    ck_abort_msg("container %s has no port '%s'", str_at(ctr, "name"), json_string_value(ref));
    return -1;
}

/* The volume mounted at the directory of `path` in `ctr` (borrowed), and the file's name in it. */
static json_t *volume_for(json_t *pod, json_t *ctr, const char *path, const char **file)
{
    size_t i;
    json_t *m;
    const char *slash = strrchr(path, '/');
    json_array_foreach(obj_at(ctr, "volumeMounts"), i, m) {
        const char *mp = or_empty(str_at(m, "mountPath"));
        if (slash && strlen(mp) == (size_t)(slash - path) && !strncmp(mp, path, strlen(mp))) {
            ck_assert_msg(!obj_at(m, "subPath"), "%s: mounted with subPath, never updated", path);
            *file = slash + 1;
            return named(obj_at(pod, "volumes"), str_at(m, "name"));
        }
    }
    ck_abort_msg("no volume of %s is mounted at the directory of %s", str_at(ctr, "name"), path);
    return NULL;
}

static json_t *certificate_for_secret(json_t *objs, const char *secret)
{
    size_t i;
    json_t *o;
    json_array_foreach(objs, i, o) {
        if (!strcmp(or_empty(str_at(o, "kind")), "Certificate") &&
            !strcmp(or_empty(str_at(o, "spec.secretName")), secret))
            return o;
    }
    ck_abort_msg("no cert-manager Certificate writes the Secret %s", secret);
    return NULL;
}

/* Writes the files a Secret volume would hold: tls.crt, tls.key, ca.crt for the Certificate's
 * DNS names. Returns the directory. */
static const char *secret_dir(struct deploy *d, const char *secret)
{
    static char dir[512];
    json_t *cert = certificate_for_secret(d->objs, secret), *n;
    struct af_buf san = AF_BUF_INIT(0);
    size_t i;
    char *cmd;

    snprintf(dir, sizeof(dir), "%s/secret-%s", tmpdir, secret);
    if (access(dir, F_OK) == 0)
        return dir;
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    json_array_foreach(obj_at(cert, "spec.dnsNames"), i, n)
        ck_assert_int_eq(af_buf_printf(&san, "%sDNS:%s", i ? "," : "", json_string_value(n)), 0);
    ck_assert_uint_gt(san.len, 0);
    ck_assert_int_eq(af_buf_add(&san, "", 1), 0);
    af_test_make_cert(tmpdir, "serving", san.buf);
    cmd = af_xasprintf("cp '%s/serving.crt' '%s/tls.crt' && cp '%s/serving.key' '%s/tls.key' && "
                       "cp '%s/ca.crt' '%s/ca.crt'", tmpdir, dir, tmpdir, dir, tmpdir, dir);
    ck_assert_int_eq(system(cmd), 0);
    af_free(cmd);
    af_buf_release(&san);
    return dir;
}

/* Where `path`, as the container sees it, is on this machine: the ConfigMap's key written to a
 * file, or the Secret's generated file. */
static char *map_file(struct deploy *d, json_t *pod, json_t *ctr, const char *path)
{
    const char *file;
    json_t *vol = volume_for(pod, ctr, path, &file);
    if (obj_at(vol, "configMap")) {
        json_t *cm = find_obj(d->objs, "ConfigMap", str_at(vol, "configMap.name"));
        const char *data;
        char *out;
        ck_assert_msg(cm != NULL, "ConfigMap %s is not in the manifests",
                      str_at(vol, "configMap.name"));
        data = json_string_value(json_object_get(obj_at(cm, "data"), file));
        ck_assert_msg(data != NULL, "ConfigMap %s has no key %s", str_at(cm, "metadata.name"),
                      file);
        /* As the kubelet lays a ConfigMap volume out: DIR/..TIMESTAMP/KEY, the symlink
         * DIR/..data -> ..TIMESTAMP, and DIR/KEY -> ..data/KEY (cm_swap updates it). */
        char *dir = af_xasprintf("%s/cm-%s", tmpdir, str_at(cm, "metadata.name"));
        char *in_data = af_xasprintf("%s/..data/%s", dir, file);
        char *link = af_xasprintf("..data/%s", file);
        if (access(dir, F_OK) != 0) {
            char *ts = af_xasprintf("%s/..2026_01_01_00_00_00.000000000", dir);
            char *data_link = af_xasprintf("%s/..data", dir);
            ck_assert_int_eq(mkdir(dir, 0700), 0);
            ck_assert_int_eq(mkdir(ts, 0700), 0);
            ck_assert_int_eq(symlink(strrchr(ts, '/') + 1, data_link), 0);
            af_free(ts);
            af_free(data_link);
        }
        write_file(in_data, data);
        out = af_xasprintf("%s/%s", dir, file);
        unlink(out);
        ck_assert_int_eq(symlink(link, out), 0);
        af_free(dir);
        af_free(in_data);
        af_free(link);
        return out;
    }
    ck_assert_msg(obj_at(vol, "secret") != NULL, "%s: neither a ConfigMap nor a Secret", path);
    if (obj_at(vol, "secret.items")) {
        json_t *it;
        size_t i;
        bool found = false;
        json_array_foreach(obj_at(vol, "secret.items"), i, it) {
            if (!strcmp(or_empty(str_at(it, "path")), file))
                found = true, file = str_at(it, "key");
        }
        ck_assert_msg(found, "%s is not among the Secret's items", path);
    }
    return af_xasprintf("%s/%s", secret_dir(d, str_at(vol, "secret.secretName")), file);
}

static json_t *container_named(json_t *pod, const char *name)
{
    json_t *c = named(obj_at(pod, "containers"), name);
    ck_assert_msg(c != NULL, "no container %s", name);
    return c;
}

/* The accelfit Deployment and the scheduler's, their configuration, and accelfit's arguments
 * mapped onto this machine. */
static void deploy_load(struct deploy *d, const char *dir)
{
    json_t *a, *sdep, *cm;
    size_t i;
    const char *cfg = NULL, *file;

    memset(d, 0, sizeof(*d));
    d->objs = render(dir);
    d->dep = find_obj(d->objs, "Deployment", "accelfit");
    ck_assert_msg(d->dep != NULL, "%s: no Deployment accelfit", dir);
    d->pod = obj_at(d->dep, "spec.template.spec");
    d->ctr = container_named(d->pod, "accelfit");
    d->local_listen = af_test_free_port();
    d->local_health = af_test_free_port();
    d->argv = json_array();
    json_array_append_new(d->argv, json_string("accelfit"));
    json_array_append_new(d->argv, json_string("serve"));
    json_array_foreach(obj_at(d->ctr, "args"), i, a) {
        const char *s = json_string_value(a), *eq = strchr(s, '=');
        char *v = NULL;
        ck_assert_msg(!strncmp(s, "--", 2), "%s: argument '%s' is not a flag", dir, s);
        if (!eq) {
            json_array_append(d->argv, a);
            continue;
        }
        if (!strncmp(s, "--listen=", 9)) {
            d->listen_port = port_of(eq + 1);
            v = af_xasprintf("--listen=127.0.0.1:%d", d->local_listen);
        } else if (!strncmp(s, "--health-listen=", 16)) {
            d->health_port = port_of(eq + 1);
            v = af_xasprintf("--health-listen=127.0.0.1:%d", d->local_health);
        } else if (!strncmp(s, "--prometheus=", 13)) {
            /* Kept to check; here a port nothing listens on, which is what accelfit meets in
             * a cluster without that Prometheus. */
            snprintf(d->prom_url, sizeof(d->prom_url), "%s", eq + 1);
            v = af_xasprintf("--prometheus=http://127.0.0.1:%d", af_test_free_port());
        } else if (!strncmp(s, "--policy=", 9) || !strncmp(s, "--catalog=", 10) ||
                   !strncmp(s, "--tls-", 6) || !strncmp(s, "--client-ca-file=", 17) ||
                   (!strncmp(s, "--prometheus-", 13) && strstr(s, "-file="))) {
            char *local = map_file(d, d->pod, d->ctr, eq + 1);
            v = af_xasprintf("%.*s=%s", (int)(eq - s), s, local);
            if (!strncmp(s, "--policy=", 9))
                snprintf(d->policy, sizeof(d->policy), "%s", local);
            if (!strncmp(s, "--tls-cert-file=", 16)) {
                /* The Secret's ca.crt, beside tls.crt: what the scheduler and webhook trust. */
                d->tls = true;
                snprintf(d->ca, sizeof(d->ca), "%.*s/ca.crt",
                         (int)(strrchr(local, '/') - local), local);
            }
            af_free(local);
        }
        json_array_append_new(d->argv, json_string(v ? v : s));
        af_free(v);
    }
    ck_assert_msg(d->listen_port > 0 && d->health_port > 0, "%s: --listen and --health-listen",
                  dir);

    /* The scheduler: the Deployment whose kube-scheduler reads accelfit-scheduler-config. */
    sdep = find_obj(d->objs, "Deployment", "accelfit-scheduler");
    ck_assert_msg(sdep != NULL, "%s: no Deployment accelfit-scheduler", dir);
    d->sched_pod = obj_at(sdep, "spec.template.spec");
    d->sched_ctr = json_array_get(obj_at(d->sched_pod, "containers"), 0);
    json_array_foreach(obj_at(d->sched_ctr, "command"), i, a) {
        if (!strncmp(json_string_value(a), "--config=", 9))
            cfg = json_string_value(a) + 9;
    }
    ck_assert_msg(cfg != NULL, "%s: kube-scheduler has no --config", dir);
    {
        json_t *vol = volume_for(d->sched_pod, d->sched_ctr, cfg, &file);
        cm = find_obj(d->objs, "ConfigMap", str_at(vol, "configMap.name"));
        ck_assert_ptr_nonnull(cm);
        const char *text = json_string_value(json_object_get(obj_at(cm, "data"), file));
        ck_assert_msg(text != NULL, "ConfigMap %s has no %s", str_at(cm, "metadata.name"), file);
        json_t *docs = yaml_docs(file, text);
        d->ksc = json_incref(json_array_get(docs, 0));
        json_decref(docs);
    }
}

static void deploy_release(struct deploy *d)
{
    json_decref(d->objs);
    json_decref(d->ksc);
    json_decref(d->argv);
}

static void accelfit_start(struct deploy *d, const struct af_test_fake_api *api)
{
    size_t n = json_array_size(d->argv);
    const char **argv = af_xcalloc(n + 1, sizeof(*argv));
    char port[16];
    CURL *c = curl_easy_init();
    bool ready = false;

    for (size_t i = 0; i < n; i++)
        argv[i] = json_string_value(json_array_get(d->argv, i));
    snprintf(d->log, sizeof(d->log), "%s/accelfit.log", tmpdir);
    snprintf(port, sizeof(port), "%d", api->port);
    d->pid = fork();
    ck_assert_int_ge(d->pid, 0);
    if (d->pid == 0) {
        int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(fd, 2);
        setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1", 1);
        setenv("KUBERNETES_SERVICE_PORT", port, 1);
        setenv("AF_SERVICEACCOUNT_DIR", tpath("sa"), 1);
        execv(AF_BINARY, (char *const *)argv);
        _exit(127);
    }
    af_free(argv);
    /* Ready as the startup probe sees it: /readyz on the health port, once the cache synced. */
    for (int i = 0; i < 200 && !ready; i++) {
        struct af_test_resp r = {0};
        char *u = af_xasprintf("http://127.0.0.1:%d/readyz", d->local_health);
        int st;
        ready = af_test_http(c, NULL, u, NULL, 0, NULL, &r) == CURLE_OK && r.status == 200;
        af_test_resp_free(&r);
        af_free(u);
        if (!ready) {
            ck_assert_msg(waitpid(d->pid, &st, WNOHANG) == 0, "accelfit exited; see %s", d->log);
            sleep_ms(100);
        }
    }
    curl_easy_cleanup(c);
    ck_assert_msg(ready, "accelfit never became ready; see %s", d->log);
}

static void accelfit_stop(struct deploy *d)
{
    int st;
    kill(d->pid, SIGTERM);
    waitpid(d->pid, &st, 0);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "accelfit did not stop cleanly");
}

/* "scheme://host:port/path" of a Service in the manifests, checked against the Service and
 * the container: returns the path, sets *https. */
static const char *service_url(struct deploy *d, const char *url, bool *https, char *host,
                               size_t hn, int *port)
{
    const char *p = strstr(url, "://"), *colon, *slash;
    char svc[128], ns[128];
    json_t *s, *sp;
    size_t i;
    bool found = false;

    ck_assert_ptr_nonnull(p);
    *https = !strncmp(url, "https", 5);
    p += 3;
    colon = strchr(p, ':');
    ck_assert_msg(colon, "%s: give the port", url);
    snprintf(host, hn, "%.*s", (int)(colon - p), p);
    *port = atoi(colon + 1);
    slash = strchr(colon, '/');
    ck_assert_msg(sscanf(host, "%127[^.].%127[^.].svc", svc, ns) == 2 &&
                  !strcmp(host + strlen(svc) + 1 + strlen(ns), ".svc"),
                  "%s: the host is not <service>.<namespace>.svc", url);
    ck_assert_str_eq(ns, NS);
    s = find_obj(d->objs, "Service", svc);
    ck_assert_msg(s != NULL, "%s: no Service %s", url, svc);
    json_array_foreach(obj_at(s, "spec.ports"), i, sp) {
        if (json_integer_value(obj_at(sp, "port")) == *port) {
            found = true;
            ck_assert_msg(container_port(d->ctr, obj_at(sp, "targetPort")) == d->listen_port,
                          "%s: Service port %d does not lead to accelfit's --listen port %d", url,
                          *port, d->listen_port);
        }
    }
    ck_assert_msg(found, "%s: Service %s has no port %d", url, svc, *port);
    return slash ? slash : "";
}

/* POST `body` (GET when `method` is NULL) to the URL as kube-scheduler or the API server
 * would: the Service's name and port, connected to accelfit on this machine, TLS verified
 * against the CA for that name. */
static void call_method(struct deploy *d, const char *method, const char *url, const char *body,
                        struct af_test_resp *r)
{
    char host[256], connect_to[400];
    bool https;
    int port;
    const char *path = service_url(d, url, &https, host, sizeof(host), &port);
    struct curl_slist *ct;
    CURL *c = curl_easy_init();
    char *u;

    ck_assert_msg(https == d->tls, "%s: accelfit %s TLS", url,
                  d->tls ? "serves" : "does not serve");
    snprintf(connect_to, sizeof(connect_to), "%s:%d:127.0.0.1:%d", host, port, d->local_listen);
    ct = curl_slist_append(NULL, connect_to);
    curl_easy_setopt(c, CURLOPT_CONNECT_TO, ct);
    if (https)
        curl_easy_setopt(c, CURLOPT_CAINFO, d->ca);
    u = af_xasprintf("%s://%s:%d%s", https ? "https" : "http", host, port, path);
    ck_assert_msg(af_test_http(c, method, u, body, body ? strlen(body) : 0, NULL, r) == CURLE_OK,
                  "%s %s: %s", method ? method : "GET", u, curl_easy_strerror(r->curl_rc));
    af_free(u);
    curl_easy_cleanup(c);
    curl_slist_free_all(ct);
}

static void call(struct deploy *d, const char *url, const char *body, struct af_test_resp *r)
{
    call_method(d, "POST", url, body, r);
}

static json_t *node_names(const struct af_test_fake_api *api)
{
    json_t *dump = af_test_fake_api_admin(api, "dump", NULL);
    json_t *names = json_incref(obj_at(dump, "nodes"));

    json_decref(dump);
    ck_assert_uint_ge(json_array_size(names), 3);
    return names;
}

static json_t *accel_pod(const char *name, const char *resource)
{
    return json_pack("{s:{s:s,s:s,s:s},s:{s:[{s:s,s:{s:{s:s},s:{s:s}}}]}}", "metadata", "name",
                     name, "namespace", "default", "uid", "0b5e8c1e-6a52-4c43-9a65-1f2a9d7c0001",
                     "spec", "containers", "name", "main", "resources", "requests", resource, "1",
                     "limits", resource, "1");
}

/* Every verb of every extender entry, answered as the extender protocol says. */
static void check_extender_verbs(struct deploy *d, json_t *names)
{
    json_t *e, *pod = accel_pod("manifests-gpu", "nvidia.com/gpu");
    size_t i;
    int verbs = 0;

    json_array_foreach(obj_at(d->ksc, "extenders"), i, e) {
        static const char *const keys[] = {"filterVerb", "prioritizeVerb", "preemptVerb",
                                           "bindVerb"};
        for (size_t k = 0; k < 4; k++) {
            const char *verb = str_at(e, keys[k]);
            struct af_test_resp r = {0};
            json_t *args, *ans;
            char *body, *u;
            if (!verb || !*verb)
                continue;
            ck_assert_msg(k < 3, "bindVerb: accelfit does not bind");
            if (k == 2)
                args = json_pack("{s:O,s:n,s:{s:{s:[{s:s}],s:i}}}", "Pod", pod,
                                 "NodeNameToVictims", "NodeNameToMetaVictims",
                                 json_string_value(json_array_get(names, 0)), "Pods", "UID",
                                 "0b5e8c1e-6a52-4c43-9a65-1f2a9d7c0099", "NumPDBViolations", 0);
            else
                args = json_pack("{s:O,s:n,s:O}", "Pod", pod, "Nodes", "NodeNames", names);
            body = json_dumps(args, JSON_COMPACT);
            u = af_xasprintf("%s/%s", str_at(e, "urlPrefix"), verb);
            call(d, u, body, &r);
            ck_assert_msg(r.status == 200, "POST %s: %ld %s", u, r.status, r.body);
            ans = json_loads(r.body, 0, NULL);
            ck_assert_msg(ans != NULL, "POST %s: not JSON: %s", u, r.body);
            if (k == 0) {
                ck_assert_str_eq(or_empty(str_at(ans, "Error")), "");
                size_t placed = json_array_size(obj_at(ans, "NodeNames")) +
                                json_object_size(obj_at(ans, "FailedNodes")) +
                                json_object_size(obj_at(ans, "FailedAndUnresolvableNodes"));
                ck_assert_uint_eq(placed, json_array_size(names));
                ck_assert(json_is_null(obj_at(ans, "Nodes")));
            } else if (k == 1) {
                ck_assert_uint_eq(json_array_size(ans), json_array_size(names));
                ck_assert_ptr_nonnull(str_at(json_array_get(ans, 0), "Host"));
            } else {
                ck_assert(json_is_object(obj_at(ans, "NodeNameToMetaVictims")));
            }
            verbs++;
            json_decref(ans);
            json_decref(args);
            free(body);
            af_free(u);
            af_test_resp_free(&r);
        }
    }
    ck_assert_int_eq(verbs, 3);
    json_decref(pod);
}

static void get_ok(int port, const char *path, const char *want)
{
    CURL *c = curl_easy_init();
    struct af_test_resp r = {0};
    char *u = af_xasprintf("http://127.0.0.1:%d%s", port, path);
    ck_assert_int_eq(af_test_http(c, NULL, u, NULL, 0, NULL, &r), CURLE_OK);
    ck_assert_msg(r.status == 200, "GET %s: %ld", path, r.status);
    if (want)
        ck_assert_msg(strstr(r.body, want), "GET %s: no '%s'", path, want);
    af_test_resp_free(&r);
    af_free(u);
    curl_easy_cleanup(c);
}

/* The kubelet's probes: each on a port accelfit listens on, each answering 200 once ready. */
/* True when GET /readyz on `port` answers 200 with `want` in its body. */
static bool readyz_says(int port, const char *want)
{
    CURL *c = curl_easy_init();
    struct af_test_resp r = {0};
    char *u = af_xasprintf("http://127.0.0.1:%d/readyz", port);
    bool ok = af_test_http(c, NULL, u, NULL, 0, NULL, &r) == CURLE_OK && r.status == 200 &&
              strstr(r.body, want);

    af_test_resp_free(&r);
    af_free(u);
    curl_easy_cleanup(c);
    return ok;
}

static void check_probes(struct deploy *d)
{
    static const char *const probes[] = {"startupProbe", "readinessProbe", "livenessProbe"};
    for (size_t i = 0; i < 3; i++) {
        json_t *p = obj_at(d->ctr, probes[i]);
        int port;
        ck_assert_msg(p && obj_at(p, "httpGet"), "accelfit: %s with httpGet", probes[i]);
        port = container_port(d->ctr, obj_at(p, "httpGet.port"));
        ck_assert_msg(port == d->health_port, "%s: port %d, not the plain health port %d",
                      probes[i], port, d->health_port);
        get_ok(d->local_health, str_at(p, "httpGet.path"), NULL);
    }
    /* Readiness must not follow /readyz (accelfit.yaml explains why); startup must. */
    ck_assert_str_eq(str_at(d->ctr, "startupProbe.httpGet.path"), "/readyz");
    ck_assert_str_eq(str_at(d->ctr, "readinessProbe.httpGet.path"), "/healthz");
}

/* What the hardening in the issue of record asks of the pod. */
static void check_hardening(struct deploy *d)
{
    json_t *sc = obj_at(d->ctr, "securityContext"), *psc = obj_at(d->pod, "securityContext");
    ck_assert(json_is_true(obj_at(psc, "runAsNonRoot")));
    ck_assert_str_eq(str_at(psc, "seccompProfile.type"), "RuntimeDefault");
    ck_assert(json_is_true(obj_at(sc, "readOnlyRootFilesystem")));
    ck_assert(json_is_false(obj_at(sc, "allowPrivilegeEscalation")));
    ck_assert_ptr_nonnull(obj_at(d->ctr, "resources.requests.cpu"));
    ck_assert_ptr_nonnull(obj_at(d->ctr, "resources.limits.memory"));
    ck_assert_int_ge(json_integer_value(obj_at(d->dep, "spec.replicas")), 2);
    ck_assert_ptr_nonnull(obj_at(d->pod, "affinity.podAntiAffinity"));
    ck_assert_ptr_nonnull(find_obj(d->objs, "PodDisruptionBudget", "accelfit"));
}

/* The rollouts' webhook: its Service path answers AdmissionReviews over verified TLS. */
static json_t *review_for(json_t *pod, const char *ns)
{
    char *text = af_test_read(
        "tests/fixtures/admission/ignore/500/a-gpu-inference/webhook-request.json", NULL);
    json_t *rev = json_loads(text, 0, NULL);
    json_t *req = obj_at(rev, "request");
    ck_assert_ptr_nonnull(req);
    json_object_set(req, "object", pod);
    json_object_set_new(req, "namespace", json_string(ns));
    json_object_set(req, "name", obj_at(pod, "metadata.name"));
    af_free(text);
    return rev;
}

static json_t *mutate(struct deploy *d, json_t *wh, json_t *pod, const char *ns)
{
    json_t *rev = review_for(pod, ns), *ans;
    char *body = json_dumps(rev, JSON_COMPACT);
    char *u = af_xasprintf("https://%s.%s.svc:%lld%s", str_at(wh, "clientConfig.service.name"),
                           str_at(wh, "clientConfig.service.namespace"),
                           json_integer_value(obj_at(wh, "clientConfig.service.port")),
                           str_at(wh, "clientConfig.service.path"));
    struct af_test_resp r = {0};
    call(d, u, body, &r);
    ck_assert_msg(r.status == 200, "POST %s: %ld %s", u, r.status, r.body);
    ans = json_loads(r.body, 0, NULL);
    ck_assert_ptr_nonnull(ans);
    ck_assert_str_eq(str_at(ans, "kind"), "AdmissionReview");
    ck_assert_str_eq(str_at(ans, "response.uid"), str_at(rev, "request.uid"));
    ck_assert(json_is_true(obj_at(ans, "response.allowed")));
    af_test_resp_free(&r);
    af_free(u);
    free(body);
    json_decref(rev);
    return ans;
}

static void check_webhooks(struct deploy *d)
{
    json_t *mwc = find_obj(d->objs, "MutatingWebhookConfiguration", NULL), *wh, *cert;
    const char *inject;
    size_t i;

    if (!mwc)
        return;
    inject = json_string_value(json_object_get(obj_at(mwc, "metadata.annotations"),
                                               "cert-manager.io/inject-ca-from"));
    ck_assert_msg(inject != NULL, "the webhook's caBundle is not injected by cert-manager");
    cert = find_obj(d->objs, "Certificate", strchr(inject, '/') + 1);
    ck_assert_msg(cert != NULL, "inject-ca-from %s: no such Certificate", inject);
    /* The CA injected is the CA of the certificate accelfit serves. */
    ck_assert_msg(strstr(d->ca, str_at(cert, "spec.secretName")),
                  "the webhook trusts %s, accelfit serves another certificate", inject);
    json_array_foreach(obj_at(mwc, "webhooks"), i, wh) {
        json_t *pod = accel_pod("manifests-webhook", "nvidia.com/gpu"), *ans;
        ck_assert_str_eq(str_at(wh, "failurePolicy"), "Ignore");
        ck_assert_str_eq(str_at(wh, "sideEffects"), "None");
        ck_assert_int_le(json_integer_value(obj_at(wh, "timeoutSeconds")), 10);
        ck_assert_int_ge(json_integer_value(obj_at(wh, "timeoutSeconds")), 1);
        ck_assert_str_eq(json_string_value(json_object_get(
                             obj_at(wh, "objectSelector.matchLabels"), "accelfit.io/managed")),
                         "true");
        ck_assert(in_set(obj_at(wh, "admissionReviewVersions"), "v1"));
        ck_assert_str_eq(json_string_value(json_array_get(
                             obj_at(json_array_get(obj_at(wh, "rules"), 0), "operations"), 0)),
                         "CREATE");
        ans = mutate(d, wh, pod, "default");
        json_decref(ans);
        json_decref(pod);
    }
}

/* The scheduler trusts the CA of the certificate accelfit serves (tlsConfig.caFile is that
 * Secret's ca.crt, mounted in the scheduler's pod). */
static void check_scheduler_tls(struct deploy *d)
{
    json_t *e;
    size_t i;
    json_array_foreach(obj_at(d->ksc, "extenders"), i, e) {
        const char *ca = str_at(e, "tlsConfig.caFile");
        char *local;
        char cmd[1200];
        if (!d->tls) {
            ck_assert(!ca);
            continue;
        }
        ck_assert_ptr_nonnull(ca);
        local = map_file(d, d->sched_pod, d->sched_ctr, ca);
        snprintf(cmd, sizeof(cmd), "cmp -s '%s' '%s'", local, d->ca);
        ck_assert_msg(system(cmd) == 0, "the scheduler's caFile %s is not the CA of accelfit's "
                      "certificate", ca);
        af_free(local);
    }
}

static void check_monitoring(struct deploy *d)
{
    json_t *objs = render("manifests/monitoring"), *sm = find_obj(objs, "ServiceMonitor", NULL);
    json_t *ep, *svc, *sp;
    size_t i, j;
    ck_assert_ptr_nonnull(sm);
    svc = find_obj(d->objs, "Service", "accelfit");
    json_array_foreach(obj_at(sm, "spec.endpoints"), i, ep) {
        bool found = false;
        json_array_foreach(obj_at(svc, "spec.ports"), j, sp) {
            if (!strcmp(or_empty(str_at(sp, "name")), str_at(ep, "port"))) {
                found = true;
                ck_assert_int_eq(container_port(d->ctr, obj_at(sp, "targetPort")), d->health_port);
            }
        }
        ck_assert_msg(found, "ServiceMonitor: Service accelfit has no port %s", str_at(ep, "port"));
        get_ok(d->local_health, str_at(ep, "path"), "accelfit_build_info");
    }
    json_decref(objs);
}

static char *read_abs(const char *path);
static void cm_swap(const char *file, const char *text);

/* ---- RBAC: what accelfit asked the API server for, against its ClusterRole ------------------- */

/* "resource verb" of one API request ("GET /api/v1/nodes?watch=true" -> "nodes watch"). */
static char *rbac_of(const char *method, const char *path)
{
    char p[1024], *q, *tok[16], *save = NULL;
    int n = 0, first;
    bool watch, core;
    const char *verb;

    snprintf(p, sizeof(p), "%s", path);
    q = strchr(p, '?');
    watch = q && strstr(q, "watch=true");
    if (q)
        *q = '\0';
    for (char *t = strtok_r(p, "/", &save); t && n < 16; t = strtok_r(NULL, "/", &save))
        tok[n++] = t;
    ck_assert_msg(n >= 2 && (!strcmp(tok[0], "api") || !strcmp(tok[0], "apis")), "%s", path);
    core = !strcmp(tok[0], "api");
    /* /api/v1, /apis/GROUP/VERSION: discovery, a non-resource URL every authenticated user
     * may read (the system:discovery ClusterRole), not a resource of the ClusterRole */
    if (n == (core ? 2 : 3))
        return NULL;
    first = core ? 2 : 3;
    if (n - first >= 3 && !strcmp(tok[first], "namespaces"))
        first += 2;
    if (!strcmp(method, "GET"))
        verb = watch ? "watch" : (n - first >= 2 ? "get" : "list");
    else if (!strcmp(method, "POST"))
        verb = "create";
    else if (!strcmp(method, "PUT"))
        verb = "update";
    else if (!strcmp(method, "PATCH"))
        verb = "patch";
    else
        verb = n - first >= 2 ? "delete" : "deletecollection";
    /* Resources of other API groups carry the group: "apps:replicasets list". */
    return af_xasprintf("%s%s%s%s%s %s", core ? "" : tok[1], core ? "" : ":",
                        tok[first], n - first >= 3 ? "/" : "",
                        n - first >= 3 ? tok[first + 2] : "", verb);
}

static json_t *granted(struct deploy *d)
{
    const char *sa = str_at(d->pod, "serviceAccountName");
    json_t *out = json_array(), *o, *s, *rule, *res, *verb;
    size_t i, j, k, l;

    json_array_foreach(d->objs, i, o) {
        const char *role = NULL, *bkind = or_empty(str_at(o, "kind"));
        bool ns_role = !strcmp(bkind, "RoleBinding");
        if (strcmp(bkind, "ClusterRoleBinding") && !ns_role)
            continue;
        /* a RoleBinding grants in its namespace only: accelfit's */
        if (ns_role && strcmp(or_empty(str_at(o, "metadata.namespace")), NS))
            continue;
        json_array_foreach(obj_at(o, "subjects"), j, s) {
            if (!strcmp(or_empty(str_at(s, "name")), sa) &&
                !strcmp(or_empty(str_at(s, "namespace")), NS))
                role = str_at(o, "roleRef.name");
        }
        if (!role)
            continue;
        ck_assert_str_eq(or_empty(str_at(o, "roleRef.kind")), ns_role ? "Role" : "ClusterRole");
        json_t *cr = find_obj(d->objs, ns_role ? "Role" : "ClusterRole", role);
        ck_assert_msg(cr != NULL, "%s %s is not in the manifests", ns_role ? "Role" : "ClusterRole",
                      role);
        json_array_foreach(obj_at(cr, "rules"), j, rule) {
            const char *group;
            json_t *names = obj_at(rule, "resourceNames");
            ck_assert_msg(json_array_size(obj_at(rule, "apiGroups")) == 1,
                          "ClusterRole %s: give each rule one API group", role);
            group = or_empty(json_string_value(json_array_get(obj_at(rule, "apiGroups"), 0)));
            /* Cluster-wide, accelfit lists; in its namespace it names the one object it owns,
             * except to create it (create cannot be restricted by name). */
            ck_assert_msg(!names || ns_role, "resourceNames: accelfit lists");
            if (ns_role) {
                json_t *verb0;
                size_t m;
                bool create = false;
                json_array_foreach(obj_at(rule, "verbs"), m, verb0)
                    create |= !strcmp(or_empty(json_string_value(verb0)), "create");
                const char *name0 = or_empty(json_string_value(json_array_get(names, 0)));
                ck_assert_msg(create ? !names : (json_array_size(names) == 1 &&
                                                 (!strcmp(name0, "accelfit-rollouts") ||
                                                  !strcmp(name0, "accelfit-rollout-claims"))),
                              "Role %s: create without resourceNames, every other verb on "
                              "accelfit-rollouts or accelfit-rollout-claims only", role);
            }
            json_array_foreach(obj_at(rule, "resources"), k, res) {
                json_array_foreach(obj_at(rule, "verbs"), l, verb) {
                    char *g = af_xasprintf("%s%s%s %s", group, *group ? ":" : "",
                                           json_string_value(res), json_string_value(verb));
                    ck_assert_msg(!strchr(g, '*'), "ClusterRole %s: wildcard '%s'", role, g);
                    add_unique(out, g);
                    af_free(g);
                }
            }
        }
    }
    return out;
}

/* API paths named by the API server client, src/kube (string literals starting /api/ or
 * /apis/), as resources, and the HTTP methods it sets on libcurl. Other modules talk to other
 * servers (Prometheus also has /api/v1/...), so only src/kube is read. */
static void code_api_calls(json_t *resources, json_t *methods)
{
    json_t *files = files_under("src/kube", ".c"), *f;
    size_t i;
    json_array_foreach(files, i, f) {
        char *text = af_test_read(json_string_value(f), NULL), *p = text;
        while ((p = strstr(p, "\"/api")) != NULL) {
            char lit[256], *res;
            size_t n = strcspn(p + 1, "\"?");
            if (strncmp(p + 1, "/api/", 5) && strncmp(p + 1, "/apis/", 6)) {
                p++;
                continue;
            }
            snprintf(lit, sizeof(lit), "%.*s", (int)n, p + 1);
            res = rbac_of("GET", lit);
            if (!res) {   /* a group version's discovery */
                p += n;
                continue;
            }
            *strchr(res, ' ') = '\0';
            add_unique(resources, res);
            af_free(res);
            p += n;
        }
        add_unique(methods, "GET");
        if (strstr(text, "CURLOPT_POSTFIELDS") || strstr(text, "CURLOPT_POST,"))
            add_unique(methods, "POST");
        for (p = text; (p = strstr(p, "CURLOPT_CUSTOMREQUEST, \"")) != NULL; p++) {
            char m[16];
            if (sscanf(p + strlen("CURLOPT_CUSTOMREQUEST, \""), "%15[A-Z]", m) == 1)
                add_unique(methods, m);
        }
        af_free(text);
    }
    json_decref(files);
}

static void check_rbac(struct deploy *d, const struct af_test_fake_api *api, json_t *names)
{
    json_t *pod = accel_pod("manifests-neuron", "aws.amazon.com/neuron"), *args, *gpu_nodes;
    json_t *events = NULL, *reqs, *used = json_array(), *methods_seen = json_array();
    json_t *grant = granted(d), *code_res = json_array(), *code_methods = json_array(), *v;
    json_t *discovered = json_array();
    struct af_test_resp r = {0};
    char *body, *u;
    size_t i;

    /* A Neuron pod offered only GPU nodes: every node refused, so accelfit posts an Event. */
    gpu_nodes = json_array();
    {
        char *text = af_test_read("tests/fixtures/apiserver/nodes-list.json", NULL);
        json_t *list = json_loads(text, 0, NULL), *n;
        json_array_foreach(obj_at(list, "items"), i, n) {
            if (json_object_get(obj_at(n, "status.allocatable"), "nvidia.com/gpu") &&
                in_set(names, str_at(n, "metadata.name")))
                json_array_append(gpu_nodes, obj_at(n, "metadata.name"));
        }
        json_decref(list);
        af_free(text);
    }
    ck_assert_uint_gt(json_array_size(gpu_nodes), 0);
    args = json_pack("{s:O,s:n,s:O}", "Pod", pod, "Nodes", "NodeNames", gpu_nodes);
    body = json_dumps(args, JSON_COMPACT);
    u = af_xasprintf("%s/%s", str_at(json_array_get(obj_at(d->ksc, "extenders"), 0), "urlPrefix"),
                     str_at(json_array_get(obj_at(d->ksc, "extenders"), 0), "filterVerb"));
    call(d, u, body, &r);
    ck_assert_int_eq(r.status, 200);
    for (int t = 0; t < 100; t++) {
        json_decref(events);
        events = af_test_fake_api_admin(api, "events", NULL);
        if (json_array_size(events) > 0)
            break;
        sleep_ms(100);
    }
    ck_assert_msg(json_array_size(events) > 0, "accelfit posted no Event; see %s", d->log);

    /* The rollouts' state object: read and created at start, watched, and updated when a
     * rollout appears (a reload adds one). */
    {
        char *text = read_abs(d->policy), *edited;
        json_t *cm = NULL;

        edited = af_xasprintf("%s%s%s  - name: rbac-check\n    selector: {namespace: rbac-check}\n"
                              "    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
                              "    share: 0.5\n", text,
                              text[0] && text[strlen(text) - 1] != '\n' ? "\n" : "",
                              strstr(text, "\nrollouts:\n") ? "" : "rollouts:\n");
        cm_swap(d->policy, edited);
        for (int t = 0; t < 300; t++) {
            json_decref(cm);
            cm = af_test_fake_api_admin(api, "configmap",
                                        "{\"ns\":\"" NS "\",\"name\":\"accelfit-rollouts\"}");
            if (json_object_get(json_object_get(cm, "data"), "rbac-check"))
                break;
            sleep_ms(100);
        }
        ck_assert_msg(json_object_get(json_object_get(cm, "data"), "rbac-check"),
                      "the rollout state object never held the new rollout; see %s", d->log);
        json_decref(cm);
        af_free(edited);
        af_free(text);
    }

    /* the threads that ask for optional groups ask at start; wait until both have asked */
    for (int t = 0;; t++) {
        char *all;
        bool both;
        reqs = af_test_fake_api_admin(api, "requests", NULL);
        all = json_dumps(reqs, JSON_COMPACT);
        both = strstr(all, "/apis/karpenter.sh/v1alpha1\"") &&
               strstr(all, "/apis/resource.k8s.io/v1\"");
        free(all);
        if (both || t == 300)
            break;
        json_decref(reqs);
        sleep_ms(100);
    }
    json_array_foreach(reqs, i, v) {
        char *g = rbac_of(str_at(v, "method"), str_at(v, "path"));
        if (!g) {
            /* accelfit asked whether a group it reads when present (NodeOverlays, DRA) is
             * served; a group this server does not serve leaves its grants unused */
            char grp[128];
            if (sscanf(or_empty(str_at(v, "path")), "/apis/%127[^/]", grp) == 1)
                add_unique(discovered, grp);
            continue;
        }
        /* ConfigMaps: the state object by name (or its field selector), the claim ledger
         * by name (never watched), or their creation */
        if (!strncmp(g, "configmaps ", 11))
            ck_assert_msg(!strcmp(str_at(v, "method"), "POST") ||
                              strstr(str_at(v, "path"), "/configmaps/accelfit-rollouts") ||
                              strstr(str_at(v, "path"), "/configmaps/accelfit-rollout-claims") ||
                              strstr(str_at(v, "path"), "metadata.name%3Daccelfit-rollouts"),
                          "a ConfigMap request not about accelfit-rollouts or its claims: %s %s",
                          str_at(v, "method"), str_at(v, "path"));
        add_unique(used, g);
        add_unique(methods_seen, str_at(v, "method"));
        af_free(g);
    }
    /* Both directions: nothing used that is not granted, nothing granted that is not used. */
    json_array_foreach(used, i, v) {
        ck_assert_msg(in_set(grant, json_string_value(v)), "accelfit needs '%s', which its "
                      "ClusterRole does not grant", json_string_value(v));
    }
    json_array_foreach(grant, i, v) {
        char grp[128] = "";
        bool group_used = false;
        size_t k;
        json_t *uv;
        if (strchr(json_string_value(v), ':') &&
            sscanf(json_string_value(v), "%127[^:]:", grp) == 1 && in_set(discovered, grp)) {
            json_array_foreach(used, k, uv)
                group_used |= !strncmp(json_string_value(uv), grp, strlen(grp)) &&
                              json_string_value(uv)[strlen(grp)] == ':';
            if (!group_used)
                continue;   /* a group this server does not serve (DRA): asked for, not read */
        }
        ck_assert_msg(in_set(used, json_string_value(v)), "the ClusterRole grants '%s', which "
                      "accelfit never uses", json_string_value(v));
    }
    /* And the code names no resource or method this run did not exercise. */
    code_api_calls(code_res, code_methods);
    ck_assert_uint_gt(json_array_size(code_res), 0);
    json_array_foreach(code_res, i, v) {
        bool seen = false;
        size_t k;
        json_t *g;
        json_array_foreach(used, k, g) {
            const char *s = json_string_value(g);
            size_t n = strlen(json_string_value(v));
            seen |= !strncmp(s, json_string_value(v), n) && s[n] == ' ';
        }
        ck_assert_msg(seen, "src/kube names the API resource '%s', which this test never saw "
                      "accelfit use: extend it and the ClusterRole", json_string_value(v));
    }
    json_array_foreach(code_methods, i, v) {
        ck_assert_msg(in_set(methods_seen, json_string_value(v)), "src/kube sends %s requests, "
                      "which this test never saw: extend it and the ClusterRole",
                      json_string_value(v));
    }
    af_test_resp_free(&r);
    free(body);
    af_free(u);
    json_decref(args);
    json_decref(pod);
    json_decref(gpu_nodes);
    json_decref(events);
    json_decref(reqs);
    json_decref(used);
    json_decref(discovered);
    json_decref(methods_seen);
    json_decref(grant);
    json_decref(code_res);
    json_decref(code_methods);
}

/* ---- the example workloads ------------------------------------------------------------------- */

/* What each example's comments say accelfit does with it. */
static const struct {
    const char *name;
    const char *rule;
} example_rules[] = {
    {"llm-pretrain", "training-large-cost-neuron"},
    {"llm-infer", "inference-default"},
    {"feature-prep", "preprocessing"},
};

static size_t b64_decode(const char *in, char *out, size_t cap)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = 0;
    unsigned acc = 0;
    int bits = 0;
    for (; *in && *in != '='; in++) {
        const char *p = strchr(tbl, *in);
        if (!p)
            continue;
        acc = (acc << 6) | (unsigned)(p - tbl);
        bits += 6;
        if (bits >= 8 && n + 1 < cap) {
            bits -= 8;
            out[n++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[n] = '\0';
    return n;
}

/* The tenant named by the comment that opens the example file defining `name`
 * ("# Tenant research: ..."). Caller frees. */
static char *commented_tenant(const char *name)
{
    json_t *files = files_under("manifests/examples", ".yaml"), *f;
    char *needle = af_xasprintf("\n  name: %s\n", name), *tenant = NULL;
    size_t i;
    json_array_foreach(files, i, f) {
        char *text = af_test_read(json_string_value(f), NULL), t[64];
        if (strstr(text, needle) && sscanf(text, "# Tenant %63[a-z0-9-]:", t) == 1)
            tenant = af_xstrdup(t);
        af_free(text);
    }
    ck_assert_msg(tenant != NULL, "the example file defining %s does not open with "
                  "'# Tenant NAME:'", name);
    json_decref(files);
    af_free(needle);
    return tenant;
}

/* The example's pods belong to the tenant its comment names, by their namespace (which the
 * policy's tenant owns, so `accelfit costs` and GET /costs charge the pods to it), and a
 * tenant label on them names the same one. `ans` is accelfit's /explain of a pod. */
static void check_tenant(const char *kind, const char *name, json_t *tmpl, json_t *ans)
{
    char *want = commented_tenant(name);
    const char *label = json_string_value(
        json_object_get(obj_at(tmpl, "metadata.labels"), "accelfit.io/tenant"));
    ck_assert_msg(!strcmp(or_empty(str_at(ans, "tenant.name")), want),
                  "%s %s: accelfit puts its pods in tenant %s, its comment says %s", kind, name,
                  str_at(ans, "tenant.name"), want);
    ck_assert_msg(!strcmp(or_empty(str_at(ans, "tenant.matched_by")), "namespace"),
                  "%s %s: tenant matched by %s: the policy's tenant %s should own its namespace",
                  kind, name, str_at(ans, "tenant.matched_by"), want);
    ck_assert_msg(!label || !strcmp(label, want), "%s %s: label accelfit.io/tenant %s, but its "
                  "namespace belongs to %s", kind, name, label, want);
    af_free(want);
}


#define EXAMPLES_RUNNING "tests/fixtures/manifests/examples-running.yaml"

/* The examples' pods as their controllers create them, running on nodes (EXAMPLES_RUNNING, which
 * docs/deploy-eks.md shows `accelfit costs` on): still the rendered templates, as many as
 * they ask for; and `accelfit costs` with the rendered policy charges each example's pods to
 * the tenant its comment names. */
static void check_examples_costs(struct deploy *d)
{
    char *text = af_test_read(EXAMPLES_RUNNING, NULL), *cmd, *out;
    json_t *items = yaml_docs(EXAMPLES_RUNNING, text), *want = json_object(), *o, *p;
    json_t *costs, *t;
    size_t i, k, total = 0;
    int st;

    json_array_foreach(d->objs, i, o) {
        json_t *tmpl = obj_at(o, "spec.template");
        const char *ns = str_at(o, "metadata.namespace");
        json_int_t n = 1, seen = 0;
        char *tenant;
        if (!tmpl || !str_at(tmpl, "spec.schedulerName"))
            continue;
        if (obj_at(o, "spec.replicas"))
            n = json_integer_value(obj_at(o, "spec.replicas"));
        else if (obj_at(o, "spec.parallelism"))
            n = json_integer_value(obj_at(o, "spec.parallelism"));
        json_array_foreach(items, k, p) {
            if (!strcmp(or_empty(str_at(p, "kind")), "Pod") &&
                !strcmp(or_empty(str_at(p, "metadata.namespace")), ns) &&
                json_equal(obj_at(p, "metadata.labels"), obj_at(tmpl, "metadata.labels")) &&
                json_equal(obj_at(p, "metadata.annotations"),
                           obj_at(tmpl, "metadata.annotations")) &&
                json_equal(obj_at(p, "spec.containers"), obj_at(tmpl, "spec.containers")))
                seen++;
        }
        ck_assert_msg(seen == n, "%s: %lld running pods of %s %s/%s, which asks for %lld: copy "
                      "its rendered template again", EXAMPLES_RUNNING, (long long)seen,
                      str_at(o, "kind"), ns, str_at(o, "metadata.name"), (long long)n);
        tenant = commented_tenant(str_at(o, "metadata.name"));
        json_object_set_new(want, tenant, json_integer(
            json_integer_value(json_object_get(want, tenant)) + n));
        total += (size_t)n;
        af_free(tenant);
    }
    ck_assert_uint_gt(total, 0);
    cmd = af_xasprintf("'%s' costs --cluster '%s' --policy '%s' --output json", AF_BINARY,
                       af_test_path(EXAMPLES_RUNNING), d->policy);
    out = run_sh(cmd, &st);
    ck_assert_msg(st == 0, "%s: exit %d", cmd, st);
    costs = json_loads(out, 0, NULL);
    ck_assert_msg(costs != NULL, "accelfit costs --output json: %s", out);
    ck_assert_int_eq(json_integer_value(obj_at(costs, "total.pods")), (json_int_t)total);
    json_array_foreach(obj_at(costs, "tenants"), i, t) {
        json_int_t n = json_integer_value(json_object_get(want, str_at(t, "name")));
        ck_assert_msg(json_integer_value(obj_at(t, "pods")) == n, "accelfit costs: tenant %s has "
                      "%lld pods, the examples' comments give it %lld", str_at(t, "name"),
                      (long long)json_integer_value(obj_at(t, "pods")), (long long)n);
        ck_assert_msg((json_number_value(obj_at(t, "spend_usd_hr")) > 0) == (n > 0),
                      "tenant %s: spend %g for %lld pods", str_at(t, "name"),
                      json_number_value(obj_at(t, "spend_usd_hr")), (long long)n);
    }
    json_decref(costs);
    json_decref(items);
    json_decref(want);
    af_free(text);
    af_free(cmd);
    af_free(out);
}

static void check_examples(struct deploy *d, json_t *names)
{
    json_t *o, *profiles = obj_at(d->ksc, "profiles"), *mwc;
    size_t i, checked = 0;
    char *policy_path = NULL;
    json_t *policy = NULL;

    mwc = find_obj(d->objs, "MutatingWebhookConfiguration", NULL);
    json_array_foreach(d->objs, i, o) {
        const char *kind = str_at(o, "kind"), *name = str_at(o, "metadata.name");
        json_t *tmpl = obj_at(o, "spec.template"), *pod, *args, *ans, *note, *ann;
        const char *sn = str_at(tmpl, "spec.schedulerName"), *want = NULL, *ns;
        struct af_test_resp r = {0};
        char *body, *u;
        size_t k;

        if (!tmpl || !sn || (strcmp(kind, "Job") && strcmp(kind, "Deployment")))
            continue;
        /* The scheduler the pods name is the one that consults accelfit. */
        ck_assert_msg(!strcmp(str_at(json_array_get(profiles, 0), "schedulerName"), sn),
                      "%s %s: schedulerName %s is not accelfit's scheduler", kind, name, sn);
        for (k = 0; k < AF_ARRAY_SIZE(example_rules); k++)
            if (!strcmp(example_rules[k].name, name))
                want = example_rules[k].rule;
        ck_assert_msg(want != NULL, "%s %s: add it to example_rules", kind, name);
        ns = str_at(o, "metadata.namespace");
        pod = json_deep_copy(tmpl);
        json_object_set_new(obj_at(pod, "metadata"), "name",
                            json_sprintf("%s-7d9f8c6b5d-x2x7k", name));
        json_object_set_new(obj_at(pod, "metadata"), "namespace", json_string(ns));
        json_object_set_new(obj_at(pod, "metadata"), "uid",
                            json_string("5e0c9c1e-0000-4c43-9a65-1f2a9d7c0a01"));
        /* Owned as the Deployment controller owns a replica: through its ReplicaSet. */
        if (!strcmp(kind, "Deployment")) {
            char *rs = af_xasprintf("%s-7d9f8c6b5d", name);
            json_object_set_new(obj_at(pod, "metadata"), "ownerReferences",
                                json_pack("[{s:s,s:s,s:s,s:s,s:b}]", "apiVersion", "apps/v1",
                                          "kind", "ReplicaSet", "name", rs, "uid",
                                          "5e0c9c1e-0000-4c43-9a65-1f2a9d7c0a02", "controller", 1));
            af_free(rs);
        }
        args = json_pack("{s:O,s:n,s:O}", "Pod", pod, "Nodes", "NodeNames", names);
        body = json_dumps(args, JSON_COMPACT);
        u = af_xasprintf("http://127.0.0.1:%d/explain", d->local_listen);
        if (d->tls) {
            /* Straight to the listener: /explain is for people, not in the scheduler config. */
            af_free(u);
            u = af_xasprintf("https://%s.%s.svc:%d/explain", "accelfit", NS, d->listen_port);
            call(d, u, body, &r);
        } else {
            CURL *c = curl_easy_init();
            ck_assert_int_eq(af_test_http(c, "POST", u, body, strlen(body), NULL, &r), CURLE_OK);
            curl_easy_cleanup(c);
        }
        ck_assert_msg(r.status == 200, "%s: /explain %ld %s", name, r.status, r.body);
        ans = json_loads(r.body, 0, NULL);
        ck_assert_ptr_nonnull(ans);
        json_array_foreach(obj_at(ans, "notes"), k, note) {
            ck_assert_msg(!strstr(json_string_value(note), "annotation accelfit.io/"),
                          "%s %s: %s", kind, name, json_string_value(note));
        }
        ann = obj_at(tmpl, "metadata.annotations");
        if (json_object_get(ann, "accelfit.io/workload"))
            ck_assert_msg(json_is_false(obj_at(ans, "profile.workload_inferred")),
                          "%s %s: workload not read", kind, name);
        ck_assert_msg(!strcmp(or_empty(str_at(ans, "rule")), want), "%s %s: rule %s, its comments "
                      "say %s", kind, name, str_at(ans, "rule"), want);
        check_tenant(kind, name, tmpl, ans);
        /* A pod that opts in to rollouts is sent to the webhook and joins its rollout. */
        if (!strcmp(or_empty(json_string_value(json_object_get(obj_at(tmpl, "metadata.labels"),
                                                      "accelfit.io/managed"))), "true")) {
            json_t *rev, *rollout;
            char patch[16384];
            ck_assert_msg(mwc != NULL, "%s %s opts in to rollouts without the webhook", kind, name);
            if (!policy) {
                const char *p = NULL;
                size_t a;
                json_t *arg;
                json_array_foreach(d->argv, a, arg)
                    if (!strncmp(json_string_value(arg), "--policy=", 9))
                        p = json_string_value(arg) + 9;
                ck_assert_ptr_nonnull(p);
                policy_path = af_xstrdup(p);
                struct af_buf pb = AF_BUF_INIT(0);
                ck_assert_int_eq(af_buf_read_file(&pb, policy_path), 0);
                ck_assert_int_eq(af_buf_add(&pb, "", 1), 0);
                json_t *docs = yaml_docs(policy_path, pb.buf);
                policy = json_incref(json_array_get(docs, 0));
                json_decref(docs);
                af_buf_release(&pb);
            }
            rollout = json_array_get(obj_at(policy, "rollouts"), 0);
            ck_assert_msg(rollout != NULL, "%s %s: the policy has no rollout", kind, name);
            rev = mutate(d, json_array_get(obj_at(mwc, "webhooks"), 0), pod, ns);
            ck_assert_msg(str_at(rev, "response.patch"), "%s %s: no patch: the pod joined no "
                          "rollout", kind, name);
            b64_decode(str_at(rev, "response.patch"), patch, sizeof(patch));
            ck_assert_msg(
                strstr(patch, "accelfit.io~1rollout") && strstr(patch, str_at(rollout, "name")),
                "%s %s: not in rollout %s: %s", kind, name, str_at(rollout, "name"), patch);
            json_decref(rev);
        }
        checked++;
        json_decref(ans);
        json_decref(args);
        json_decref(pod);
        free(body);
        af_free(u);
        af_test_resp_free(&r);
    }
    af_free(policy_path);
    json_decref(policy);
    if (find_obj(d->objs, "Namespace", "ml")) {
        ck_assert_uint_eq(checked, AF_ARRAY_SIZE(example_rules));
        check_examples_costs(d);
    }
}

/* ---- the policy: validates, carries tenants and utilization, reloads as the kubelet updates it */

/* A file by its path on this machine (caller frees). */
static char *read_abs(const char *path)
{
    struct af_buf b = AF_BUF_INIT(0);
    ck_assert_msg(af_buf_read_file(&b, path) == 0, "cannot read %s", path);
    ck_assert_int_eq(af_buf_add(&b, "", 1), 0);
    return af_buf_detach(&b, NULL);
}

static json_t *yaml_file(const char *path)
{
    char *text = read_abs(path);
    json_t *docs = yaml_docs(path, text), *p = json_incref(json_array_get(docs, 0));
    ck_assert_msg(json_is_object(p), "%s: not one YAML mapping", path);
    json_decref(docs);
    af_free(text);
    return p;
}

/* GET on accelfit's health port. */
static char *get_health(struct deploy *d, const char *path, long *status)
{
    CURL *c = curl_easy_init();
    struct af_test_resp r = {0};
    char *u = af_xasprintf("http://127.0.0.1:%d%s", d->local_health, path), *body;
    ck_assert_int_eq(af_test_http(c, NULL, u, NULL, 0, NULL, &r), CURLE_OK);
    *status = r.status;
    body = af_xstrdup(r.body ? r.body : "");
    af_test_resp_free(&r);
    af_free(u);
    curl_easy_cleanup(c);
    return body;
}

/* The value of `sample` (a metric name with its labels as accelfit writes them) in /metrics;
 * NAN when there is none. */
static double metric(struct deploy *d, const char *sample)
{
    long st;
    char *text = get_health(d, "/metrics", &st), *p = text;
    size_t n = strlen(sample);
    double v = NAN;
    ck_assert_int_eq(st, 200);
    for (; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (!strncmp(p, sample, n) && p[n] == ' ') {
            v = strtod(p + n + 1, NULL);
            break;
        }
    }
    af_free(text);
    return v;
}

/* Polls /metrics until `sample` is `want` (a generous deadline: nothing here is timed). */
static void wait_metric(struct deploy *d, const char *sample, double want)
{
    double v = NAN;
    for (int i = 0; i < 300; i++) {
        v = metric(d, sample);
        if (v == want)
            return;
        sleep_ms(100);
    }
    ck_abort_msg("%s is %g, not %g; see %s", sample, v, want, d->log);
}

/* Updates the ConfigMap volume of `file` as the kubelet does: a new timestamped directory
 * holding the new text, then a symlink renamed onto ..data. The file itself is never written. */
static void cm_swap(const char *file, const char *text)
{
    static int swaps;
    const char *slash = strrchr(file, '/');
    char *dir = af_xasprintf("%.*s", (int)(slash - file), file);
    char *ts = af_xasprintf("..2026_01_01_00_01_%02d.000000000", ++swaps);
    char *ts_path = af_xasprintf("%s/%s", dir, ts), *in_ts = af_xasprintf("%s%s", ts_path, slash);
    char *tmp = af_xasprintf("%s/..data_tmp", dir), *data = af_xasprintf("%s/..data", dir);

    ck_assert_int_eq(mkdir(ts_path, 0700), 0);
    write_file(in_ts, text);
    ck_assert_int_eq(symlink(ts, tmp), 0);
    ck_assert_int_eq(rename(tmp, data), 0);
    af_free(dir);
    af_free(ts);
    af_free(ts_path);
    af_free(in_ts);
    af_free(tmp);
    af_free(data);
}

/* GET /costs answers with the policy's tenants and their budgets, and /metrics has the same
 * budgets. */
static void check_costs(struct deploy *d, json_t *policy)
{
    struct af_test_resp r = {0};
    char *u = af_xasprintf("%s://%s.%s.svc:%d/costs", d->tls ? "https" : "http", "accelfit", NS,
                           d->listen_port);
    json_t *costs, *t, *ct;
    size_t i, k;

    call_method(d, NULL, u, NULL, &r);
    ck_assert_msg(r.status == 200, "GET /costs: %ld %s", r.status, r.body);
    costs = json_loads(r.body, 0, NULL);
    ck_assert_ptr_nonnull(costs);
    ck_assert_uint_gt(json_array_size(obj_at(policy, "tenants")), 0);
    json_array_foreach(obj_at(policy, "tenants"), i, t) {
        const char *name = str_at(t, "name");
        json_t *budget = obj_at(t, "budget_usd_per_hour");
        bool found = false;
        json_array_foreach(obj_at(costs, "tenants"), k, ct) {
            if (strcmp(or_empty(str_at(ct, "name")), name))
                continue;
            found = true;
            if (budget) {
                char *sample = af_xasprintf("accelfit_tenant_budget_dollars_per_hour{tenant=\"%s\"}",
                                            name);
                ck_assert_msg(json_number_value(obj_at(ct, "budget_usd_hr")) ==
                              json_number_value(budget), "/costs: tenant %s's budget", name);
                ck_assert_msg(metric(d, sample) == json_number_value(budget), "%s", sample);
                af_free(sample);
            }
        }
        ck_assert_msg(found, "/costs has no tenant %s", name);
    }
    /* The policy's tenants, then the default tenant. */
    ck_assert_uint_eq(json_array_size(obj_at(costs, "tenants")),
                      json_array_size(obj_at(policy, "tenants")) + 1);
    json_decref(costs);
    af_test_resp_free(&r);
    af_free(u);
}

/* The rendered policy validates with `accelfit check-policy`, carries tenants and the
 * utilization queries, and is mounted so that it can change: no subPath. An update of the
 * ConfigMap volume is reloaded without a restart (accelfit_policy_generation 2, the new budget
 * in /costs and /metrics); a broken policy is logged with file:line:column, counted
 * (accelfit_policy_last_reload_success 0) and the previous one keeps serving. */
static void check_policy(struct deploy *d)
{
    json_t *m, *policy, *tenant = NULL, *t;
    size_t i;
    int st;
    char *cmd, *out, *text, *p, *edited, *broken, *log, *at;
    double budget;

    ck_assert_msg(d->policy[0], "accelfit runs without --policy: the ConfigMap is not used");
    json_array_foreach(obj_at(d->ctr, "volumeMounts"), i, m)
        ck_assert_msg(!obj_at(m, "subPath"), "volumeMount %s: subPath, which the kubelet never "
                      "updates", str_at(m, "name"));
    cmd = af_xasprintf("'%s' check-policy --policy '%s' 2>&1", AF_BINARY, d->policy);
    out = run_sh(cmd, &st);
    ck_assert_msg(st == 0 && strstr(out, ": ok\n"), "check-policy: %s", out);
    ck_assert_msg(strstr(out, "\n  tenants (docs/policy.md#tenants):\n"), "no tenants: %s", out);
    ck_assert_msg(strstr(out, "\n  live utilization: "), "no utilization: section: %s", out);
    af_free(cmd);
    af_free(out);

    policy = yaml_file(d->policy);
    check_costs(d, policy);
    ck_assert(metric(d, "accelfit_policy_generation") == 1);
    ck_assert(metric(d, "accelfit_policy_last_reload_success") == 1);

    /* A user raises the first budget by $1/h and applies: the kubelet swaps the volume. */
    text = read_abs(d->policy);
    p = strstr(text, "\n    budget_usd_per_hour: ");
    ck_assert_msg(p != NULL, "%s: no tenant with a budget", d->policy);
    p += strlen("\n    budget_usd_per_hour: ");
    budget = strtod(p, NULL);
    edited = af_xasprintf("%.*s%g%s", (int)(p - text), text, budget + 1, p + strcspn(p, " \n"));
    json_array_foreach(obj_at(policy, "tenants"), i, t)
        if (!tenant && obj_at(t, "budget_usd_per_hour"))
            tenant = t;
    json_object_set_new(tenant, "budget_usd_per_hour", json_real(budget + 1));
    cm_swap(d->policy, edited);
    wait_metric(d, "accelfit_policy_generation", 2);
    check_costs(d, policy);

    /* A broken policy: rejected at its line and column; generation 2 keeps serving. */
    broken = af_xasprintf("%srulez: []\n", edited);
    cm_swap(d->policy, broken);
    wait_metric(d, "accelfit_policy_last_reload_success", 0);
    ck_assert(metric(d, "accelfit_policy_generation") == 2);
    ck_assert(metric(d, "accelfit_policy_reloads_total{result=\"error\"}") == 1);
    check_costs(d, policy);
    log = read_abs(d->log);
    at = strstr(log, "policy reload rejected; the previous policy keeps serving");
    ck_assert_msg(at != NULL, "no rejection logged: %s", log);
    at = strstr(at, d->policy);
    ck_assert_msg(at != NULL, "the rejection does not name %s: %s", d->policy, log);
    at += strlen(d->policy);
    ck_assert_msg(at[0] == ':' && isdigit((unsigned char)at[1]) && strchr(at + 1, ':') &&
                  isdigit((unsigned char)strchr(at + 1, ':')[1]),
                  "the rejection gives no line:column: %.80s", at);

    /* Fixed: the same bytes as the serving policy, nothing to swap, success again. */
    cm_swap(d->policy, edited);
    wait_metric(d, "accelfit_policy_last_reload_success", 1);
    ck_assert(metric(d, "accelfit_policy_generation") == 2);

    af_free(log);
    af_free(broken);
    af_free(edited);
    af_free(text);
    json_decref(policy);
}

/* ---- live utilization: degraded, never failed ------------------------------------------------ */

/* The rendered --prometheus is an in-cluster Service URL. accelfit was pointed at a port
 * nothing listens on, which is what it meets in a cluster without that Prometheus: it stays
 * ready, says it is degraded and scores on allocation (check_extender_verbs then checks every
 * verb answers). */
static void check_utilization_degraded(struct deploy *d)
{
    char host[256];
    int port = 0;
    long st = 0;
    char *body = NULL;

    ck_assert_msg(d->prom_url[0], "accelfit runs without --prometheus: the policy's utilization: "
                  "section is never used");
    ck_assert_msg(sscanf(d->prom_url, "http://%255[^:/]:%d", host, &port) == 2 && port > 0 &&
                  strlen(host) > 4 && !strcmp(host + strlen(host) - 4, ".svc"),
                  "--prometheus=%s: not http://<service>.<namespace>.svc:<port>", d->prom_url);
    for (int i = 0; i < 300; i++) {
        af_free(body);
        body = get_health(d, "/readyz", &st);
        if (strstr(body, "\nutilization: degraded: "))
            break;
        sleep_ms(100);
    }
    ck_assert_msg(st == 200 && strstr(body, "\nutilization: degraded: ") &&
                  strstr(body, "scoring on allocation"), "/readyz %ld: %s", st, body);
    ck_assert(metric(d, "accelfit_utilization_up") == 0);
    af_free(body);
}

/* The examples' policy is the base's with a rollout: everything else is the same, so a
 * change to the base's tenants or queries cannot be forgotten in the examples. */
START_TEST(test_examples_policy_is_the_base_plus_a_rollout)
{
    json_t *base = yaml_file(af_test_path("manifests/base/accelfit-policy.yaml"));
    json_t *ex = yaml_file(af_test_path("manifests/examples/policy.yaml"));
    const char *key;
    json_t *v;

    ck_assert_uint_gt(json_array_size(obj_at(ex, "rollouts")), 0);
    ck_assert_ptr_null(obj_at(base, "rollouts"));
    json_object_del(ex, "rollouts");
    json_object_foreach(base, key, v)
        ck_assert_msg(json_equal(v, json_object_get(ex, key)), "manifests/examples/policy.yaml: "
                      "'%s' differs from manifests/base/accelfit-policy.yaml's", key);
    ck_assert_uint_eq(json_object_size(base), json_object_size(ex));
    ck_assert_ptr_nonnull(obj_at(base, "tenants"));
    ck_assert_ptr_nonnull(obj_at(base, "utilization"));
    json_decref(base);
    json_decref(ex);
}
END_TEST

/* ---- the deployable kustomizations, end to end
 * ---------------------------------------------------- */

static const char *const deployables[] = {"manifests", "manifests/overlays/tls",
                                          "manifests/examples", "manifests/overlays/aws-pricing"};

/* The aws-pricing overlay: accelfit reads AWS's prices, as its ServiceAccount's IRSA role lets
 * it; with no credentials here it keeps serving at the catalog's prices and says why. */
static void check_aws_pricing(struct deploy *d)
{
    bool on = false;
    json_t *a;
    size_t i;

    json_array_foreach(obj_at(d->ctr, "args"), i, a)
        on |= !strcmp(json_string_value(a), "--aws-pricing");
    if (!on)
        return;
    ck_assert_str_eq(or_empty(json_string_value(json_object_get(
                         obj_at(find_obj(d->objs, "ServiceAccount", "accelfit"),
                                "metadata.annotations"),
                         "eks.amazonaws.com/role-arn"))),
                     "arn:aws:iam::123456789012:role/accelfit-prices");
    ck_assert(AF_TEST_WAIT_FOR(60, readyz_says(d->local_health, "no AWS credentials")));
    get_ok(d->local_health, "/readyz", "prices: catalog us-east-1 on-demand list prices");
}

START_TEST(test_manifests_run_as_rendered)
{
    struct af_test_fake_api api = {0};
    struct deploy d;
    json_t *names;

    make_tmpdir();
    af_test_make_cert(tmpdir, "api", "IP:127.0.0.1");
    ck_assert_int_eq(mkdir(tpath("sa"), 0700), 0);
    write_file(tpath("sa/token"), "sa-token\n");
    write_file(tpath("sa/namespace"), NS);
    {
        char cmd[700];
        snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", tpath("ca.crt"), tpath("sa/ca.crt"));
        ck_assert_int_eq(system(cmd), 0);
    }
    deploy_load(&d, deployables[_i]);
    check_hardening(&d);
    {
        char why[512] = "";
        ck_assert_msg(ksc_valid(d.ksc, why, sizeof(why)), "%s: %s", deployables[_i], why);
        ck_assert_msg(ksc_fits_accelfit(d.ksc, why, sizeof(why)), "%s: %s", deployables[_i], why);
    }
    {
        /* as with Karpenter's CRD installed: accelfit reads its NodeOverlays */
        static const char *const with_overlays[] = {"--nodeoverlays", NULL};
        af_test_fake_api_spawn(&api, tpath("api.crt"), tpath("api.key"), "sa-token",
                               with_overlays);
    }
    accelfit_start(&d, &api);
    names = node_names(&api);

    check_utilization_degraded(&d);
    check_probes(&d);
    check_aws_pricing(&d);
    check_extender_verbs(&d, names);
    check_scheduler_tls(&d);
    check_webhooks(&d);
    check_examples(&d, names);
    if (_i == 0)
        check_monitoring(&d);
    check_policy(&d);
    check_rbac(&d, &api, names);

    json_decref(names);
    accelfit_stop(&d);
    af_test_fake_api_stop(&api);
    deploy_release(&d);
    rm_tmpdir();
}
END_TEST

/* ---- suite ----------------------------------------------------------------------------------- */

static Suite *manifests_suite(bool kubectl)
{
    Suite *s = suite_create("manifests");
    TCase *files = tcase_create("files"), *rendered = tcase_create("rendered");

    tcase_add_test(files, test_every_yaml_file_parses);
    tcase_add_loop_test(files, test_scheduler_configs_pass_kube_scheduler_validation, 0,
                        AF_ARRAY_SIZE(ksc_files));
    tcase_add_test(files, test_dra_scheduler_config_sends_every_pod_to_filter);
    tcase_add_loop_test(files, test_scheduler_validation_refuses_what_kube_scheduler_refuses, 0,
                        AF_ARRAY_SIZE(invalid_cases));
    tcase_add_test(files, test_https_without_ca_is_refused);
    tcase_add_test(files, test_examples_policy_is_the_base_plus_a_rollout);
    tcase_add_test(files, test_tls_scheduler_config_differs_only_in_tls);
    tcase_add_test(files, test_cluster_examples_match_what_accelfit_reads);
    tcase_add_test(files, test_dockerfile_paths_exist);
    tcase_add_test(files, test_dockerfile_runtime_packages_are_what_accelfit_links);
    suite_add_tcase(s, files);
    if (kubectl) {
        tcase_set_timeout(rendered, 300);
        tcase_add_test(rendered, test_every_kustomization_renders_in_one_namespace);
        tcase_add_loop_test(rendered, test_manifests_run_as_rendered, 0,
                            AF_ARRAY_SIZE(deployables));
        suite_add_tcase(s, rendered);
    }
    return s;
}

int main(void)
{
    bool kubectl = have_command("kubectl");
    bool tools = have_command("python3") && have_command("openssl");
    int rc;

    if (!kubectl || !tools)
        fprintf(stderr, "check_manifests: SKIPPED the rendering tests: %s not found "
                "(scripts/install-deps.sh installs kubernetes-client, python3 and openssl)\n",
                !kubectl ? "kubectl" : "python3 or openssl");
    rc = af_test_run(manifests_suite(kubectl && tools));
    if (rc == 0 && !(kubectl && tools))
        return SKIP_STATUS;
    return rc;
}
