/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Hot reload of the policy (include/accelfit/reload.h). Through the real
 * binary: a ConfigMap-style `..data` symlink swap is picked up and the new
 * policy answers; a bad policy is rejected with file:line:column in the log,
 * counted, and the old one keeps answering; SIGHUP reloads a plain rewrite
 * when nothing is watched; SIGHUP with the embedded policy only says so. In
 * process: a filter thread hammering the service while the holder flips
 * between two configs 1,000 times gets, every time, exactly one config's
 * answer; and af_reload_now's results and metrics for a good, an unchanged,
 * a bad and a catalog change.
 *
 * Waiting for the watcher polls with a generous deadline (the reload is
 * asynchronous); nothing here asserts how long anything takes.
 */
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/metrics.h"
#include "accelfit/service.h"
#include "accelfit/reload.h"
#include "accelfit/util.h"
#include "support/http_client.h"
#include "support/support.h"

#define BEHAVIOUR_FIXTURE "tests/fixtures/clusters/behaviour.yaml"
#define WAIT_S 60   /* a deadline for broken builds, not a timing assertion */

/*
 * Two policies that answer the same pod differently: A allows only A10G, B only L4
 * (strict), so of the candidates fb-a10g-free and fb-l4-free exactly one passes.
 */
#define POLICY(cls)                                                                                \
    "apiVersion: accelfit.io/v1\nkind: Policy\nrules:\n  - name: only-" cls "\n"                \
    "    match: {}\n    tiers: [nvidia-" cls "]\n    strict: true\n"                             \
    "    reason: \"reload test: " cls " only\"\n"
static const char policy_a[] = POLICY("a10g");
static const char policy_b[] = POLICY("l4");
/* Line 3, column 1: a key the policy does not have. */
static const char policy_bad[] = "apiVersion: accelfit.io/v1\nkind: Policy\nrulez: []\n";

static const char filter_body[] =
    "{\"Pod\":{\"metadata\":{\"name\":\"p\",\"namespace\":\"default\",\"uid\":\"u1\","
    "\"annotations\":{\"accelfit.io/workload\":\"inference\"}},\"spec\":{\"containers\":[{"
    "\"name\":\"c\",\"resources\":{\"requests\":{\"nvidia.com/gpu\":\"1\",\"cpu\":\"1\","
    "\"memory\":\"1Gi\"}}}]}},\"Nodes\":null,\"NodeNames\":[\"fb-a10g-free\",\"fb-l4-free\"]}";

/* ---- files ------------------------------------------------------------------------------------ */

static void write_file(const char *path, const char *text)
{
    char *tmp = af_xasprintf("%s.tmp", path);
    FILE *f = fopen(tmp, "w");

    ck_assert_msg(f != NULL, "cannot write %s", tmp);
    ck_assert_int_eq(fputs(text, f) >= 0, 1);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(rename(tmp, path), 0);   /* whole, as an editor saves it */
    af_free(tmp);
}

static char *make_tmpdir(void)
{
    char tmpl[] = "/tmp/af_check_reload_XXXXXX";

    ck_assert_ptr_nonnull(mkdtemp(tmpl));
    return af_xstrdup(tmpl);
}

static void remove_tree(const char *dir)
{
    char *cmd = af_xasprintf("rm -rf '%s'", dir);

    ck_assert_int_eq(system(cmd), 0);
    af_free(cmd);
}

/*
 * A ConfigMap volume as the kubelet lays it out: the data in a timestamped
 * directory, `..data` a symlink to it, and policy.yaml a symlink through `..data`.
 * Each call publishes `text` the kubelet's way: a new directory, a `..data_tmp`
 * symlink renamed over `..data`, the old directory removed.
 */
static void configmap_publish(const char *dir, int version, const char *text)
{
    char *ts = af_xasprintf("..2026_11_23_10_%02d_00.00000000%d", version, version);
    char *data_dir = af_xasprintf("%s/%s", dir, ts);
    char *file = af_xasprintf("%s/policy.yaml", data_dir);
    char *tmp_link = af_xasprintf("%s/..data_tmp", dir);
    char *link = af_xasprintf("%s/..data", dir);
    char *top = af_xasprintf("%s/policy.yaml", dir);
    char old[512];
    ssize_t n = readlink(link, old, sizeof(old) - 1);

    ck_assert_int_eq(mkdir(data_dir, 0755), 0);
    write_file(file, text);
    ck_assert_int_eq(symlink(ts, tmp_link), 0);
    ck_assert_int_eq(rename(tmp_link, link), 0);
    if (n > 0) {
        char *old_dir;
        old[n] = '\0';
        old_dir = af_xasprintf("%s/%s", dir, old);
        remove_tree(old_dir);
        af_free(old_dir);
    }
    if (access(top, F_OK) != 0)
        ck_assert_int_eq(symlink("..data/policy.yaml", top), 0);
    af_free(ts);
    af_free(data_dir);
    af_free(file);
    af_free(tmp_link);
    af_free(link);
    af_free(top);
}

/* ---- the server -------------------------------------------------------------------------------- */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

/* The value of the sample line starting with `series` (name and labels) in /metrics. */
static double metric(const struct af_test_server *s, const char *series)
{
    CURL *c = curl_easy_init();
    char *u = af_xasprintf("%s/metrics", s->base);
    struct af_test_resp r;
    size_t n = strlen(series);
    double v = -1;

    ck_assert_int_eq(af_test_http(c, NULL, u, NULL, 0, NULL, &r), CURLE_OK);
    ck_assert_int_eq(r.status, 200);
    for (const char *line = r.body; line && *line && v < 0;) {
        const char *nl = strchr(line, '\n');
        if (!strncmp(line, series, n) && line[n] == ' ')
            v = strtod(line + n + 1, NULL);
        line = nl ? nl + 1 : NULL;
    }
    ck_assert_msg(v >= 0, "no series %s in /metrics", series);
    af_test_resp_free(&r);
    af_free(u);
    curl_easy_cleanup(c);
    return v;
}

/* Polls /metrics until `series` reaches `want` (or the deadline fails the test). */
static void wait_metric(const struct af_test_server *s, const char *series, double want)
{
    double v = -1;

    for (int i = 0; i < WAIT_S * 20; i++) {
        v = metric(s, series);
        if (v >= want)
            return;
        sleep_ms(50);
    }
    ck_abort_msg("%s stayed %g, wanted %g", series, v, want);
}

/* POST /explain: the policy object, and which candidates filter passes ("a10g", "l4"). */
static void explain(const struct af_test_server *s, long long *generation, char *sha,
                    char *passed, size_t passed_len)
{
    CURL *c = curl_easy_init();
    char *u = af_xasprintf("%s/explain", s->base);
    struct af_test_resp r;
    json_error_t e;
    json_t *j, *pol, *node;
    size_t i;

    ck_assert_int_eq(af_test_http(c, "POST", u, filter_body, strlen(filter_body), NULL, &r),
                     CURLE_OK);
    ck_assert_int_eq(r.status, 200);
    j = json_loadb(r.body, r.len, 0, &e);
    ck_assert_msg(j != NULL, "not JSON: %s", r.body);
    pol = json_object_get(j, "policy");
    *generation = json_integer_value(json_object_get(pol, "generation"));
    snprintf(sha, 65, "%s", json_string_value(json_object_get(pol, "sha256")));
    passed[0] = '\0';
    json_array_foreach(json_object_get(j, "nodes"), i, node)
        if (!strcmp(json_string_value(json_object_get(node, "verdict")), "pass"))
            snprintf(passed + strlen(passed), passed_len - strlen(passed), "%s%s",
                     passed[0] ? "," : "",
                     strstr(json_string_value(json_object_get(node, "name")), "a10g") ? "a10g"
                                                                                      : "l4");
    json_decref(j);
    af_test_resp_free(&r);
    af_free(u);
    curl_easy_cleanup(c);
}

static void start(struct af_test_server *s, const char *policy, bool watch)
{
    const char *args[] = {"--cluster", af_test_path(BEHAVIOUR_FIXTURE), "--policy", policy,
                          watch ? NULL : "--no-watch-policy", NULL};

    af_test_server_start(s, args, false, NULL, NULL);
}

START_TEST(test_configmap_symlink_swap_is_picked_up_and_a_bad_policy_is_kept_out)
{
    char *dir = make_tmpdir();
    char *policy = af_xasprintf("%s/policy.yaml", dir);
    char sha_a[65], sha[65], passed[64], *log, *where;
    struct af_test_server s;
    long long gen;

    configmap_publish(dir, 1, policy_a);
    start(&s, policy, true);
    explain(&s, &gen, sha_a, passed, sizeof(passed));
    ck_assert_int_eq(gen, 1);
    ck_assert_str_eq(passed, "a10g");

    /* The kubelet's swap: the file itself is never written. */
    configmap_publish(dir, 2, policy_b);
    wait_metric(&s, "accelfit_policy_generation", 2);
    explain(&s, &gen, sha, passed, sizeof(passed));
    ck_assert_int_eq(gen, 2);
    ck_assert_str_ne(sha, sha_a);
    ck_assert_str_eq(passed, "l4");   /* policy B answers */
    ck_assert_int_eq(metric(&s, "accelfit_policy_reloads_total{result=\"ok\"}"), 1);

    /* A bad policy: rejected, counted, logged with where; B keeps answering. */
    configmap_publish(dir, 3, policy_bad);
    wait_metric(&s, "accelfit_policy_reloads_total{result=\"error\"}", 1);
    ck_assert_int_eq(metric(&s, "accelfit_policy_generation"), 2);
    ck_assert_int_eq(metric(&s, "accelfit_policy_last_reload_success"), 0);
    explain(&s, &gen, sha, passed, sizeof(passed));
    ck_assert_int_eq(gen, 2);
    ck_assert_str_eq(passed, "l4");
    log = af_test_server_log(&s);
    where = af_xasprintf("%s:3:1: unknown key 'rulez'", policy);
    ck_assert_msg(strstr(log, "level=error") && strstr(log, where), "log lacks %s:\n%s", where,
                  log);

    /* Fixed again: generation 3, and the failure gauge clears. */
    configmap_publish(dir, 4, policy_a);
    wait_metric(&s, "accelfit_policy_generation", 3);
    ck_assert_int_eq(metric(&s, "accelfit_policy_last_reload_success"), 1);
    explain(&s, &gen, sha, passed, sizeof(passed));
    ck_assert_str_eq(sha, sha_a);
    ck_assert_str_eq(passed, "a10g");

    ck_assert_int_eq(af_test_server_stop(&s), 0);
    free(log);
    af_free(where);
    remove_tree(dir);
    af_free(policy);
    af_free(dir);
}
END_TEST

START_TEST(test_sighup_reloads_a_plain_rewrite)
{
    char *dir = make_tmpdir();
    char *policy = af_xasprintf("%s/policy.yaml", dir);
    char sha[65], passed[64];
    struct af_test_server s;
    long long gen;

    write_file(policy, policy_a);
    start(&s, policy, false);   /* --no-watch-policy: only SIGHUP can reload */
    write_file(policy, policy_b);
    ck_assert_int_eq(kill(s.pid, SIGHUP), 0);
    wait_metric(&s, "accelfit_policy_generation", 2);
    explain(&s, &gen, sha, passed, sizeof(passed));
    ck_assert_str_eq(passed, "l4");

    /* The same bytes again: nothing swapped, and the log says so, not only /metrics. */
    ck_assert_int_eq(kill(s.pid, SIGHUP), 0);
    wait_metric(&s, "accelfit_policy_reloads_total{result=\"unchanged\"}", 1);
    ck_assert_int_eq(metric(&s, "accelfit_policy_generation"), 2);
    {
        char *log = af_test_server_log(&s);
        ck_assert_msg(strstr(log, "policy unchanged: the files hold the running policy; nothing "
                                  "swapped"),
                      "log:\n%s", log);
        free(log);
    }
    ck_assert_int_eq(af_test_server_stop(&s), 0);
    remove_tree(dir);
    af_free(policy);
    af_free(dir);
}
END_TEST

START_TEST(test_sighup_with_the_embedded_policy_says_there_is_nothing_to_reload)
{
    const char *args[] = {"--demo", NULL};
    struct af_test_server s;
    char *log = NULL;

    af_test_server_start(&s, args, false, NULL, NULL);
    ck_assert_int_eq(kill(s.pid, SIGHUP), 0);
    for (int i = 0; i < WAIT_S * 20; i++) {
        free(log);
        log = af_test_server_log(&s);
        if (strstr(log, "nothing to reload"))
            break;
        sleep_ms(50);
    }
    ck_assert_msg(strstr(log, "nothing to reload"), "log:\n%s", log);
    ck_assert_int_eq(metric(&s, "accelfit_policy_generation"), 1);   /* still serving */
    ck_assert_int_eq(af_test_server_stop(&s), 0);
    free(log);
}
END_TEST

/* ---- in process ---------------------------------------------------------------------------- */

static struct af_config_holder holder;
static struct af_publisher pub;
static struct af_service svc;

static struct af_config *config_of(const char *policy)
{
    struct af_config *cfg = NULL;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load_mem(&cfg, "<embedded>", af_embedded_catalog_yaml,
                                        af_embedded_catalog_yaml_len, "test.yaml", policy,
                                        strlen(policy), &err),
                     0);
    return cfg;
}

/* The service over the behaviour cluster, answering with `cfg` (stolen). */
static void setup_service(struct af_config *cfg)
{
    size_t len;
    char *text = af_test_read(BEHAVIOUR_FIXTURE, &len);
    struct af_cache *cache = af_cache_new();
    struct af_error err;

    memset(&err, 0, sizeof(err));
    af_config_holder_init(&holder, cfg);
    af_publisher_init(&pub);
    memset(&svc, 0, sizeof(svc));
    svc.config = &holder;
    svc.pub = &pub;
    svc.metrics = af_metrics_new();
    ck_assert_int_eq(af_codec_decode_cluster(cfg, "behaviour.yaml", text, len, af_cache_upsert_item, cache,
                                             &err),
                     0);
    af_cache_set_synced(cache, true);
    af_publisher_publish(&pub, af_cache_snapshot(cache));
    af_cache_free(cache);
    af_free(text);
}

static void teardown_service(void)
{
    af_metrics_free(svc.metrics);
    af_publisher_destroy(&pub);
    af_config_holder_destroy(&holder);
}

static char *filter_answer(void)
{
    struct af_buf out = AF_BUF_INIT(1u << 20);
    char *s;

    ck_assert_int_eq(af_service_handle(&svc, AF_VERB_FILTER, filter_body, strlen(filter_body),
                                       &out),
                     200);
    s = af_xstrdup(out.buf);
    af_buf_release(&out);
    return s;
}

#define FLIPS 1000

struct hammer {
    const char *answer_a, *answer_b;
    atomic_bool stop;
    atomic_uint_fast64_t done;    /* requests answered */
    uint64_t seen_a, seen_b, other;
    char *first_other;
};

static void *hammer_main(void *arg)
{
    struct hammer *h = arg;

    while (!atomic_load(&h->stop)) {
        char *got = filter_answer();
        if (!strcmp(got, h->answer_a)) {
            h->seen_a++;
        } else if (!strcmp(got, h->answer_b)) {
            h->seen_b++;
        } else {
            if (!h->other++)
                h->first_other = af_xstrdup(got);
        }
        af_free(got);
        atomic_fetch_add(&h->done, 1);
    }
    return NULL;
}

/* Waits until the hammer has finished two more requests: the second began after this call. */
static void wait_two_requests(struct hammer *h)
{
    uint64_t start = atomic_load(&h->done);

    while (atomic_load(&h->done) < start + 2)
        sched_yield();
}

START_TEST(test_every_answer_is_one_configs_while_the_policy_flips)
{
    struct af_config *a = config_of(policy_a), *b = config_of(policy_b);
    struct hammer h;
    char *answer_a, *answer_b;
    pthread_t t;

    setup_service(af_config_ref(a));
    answer_a = filter_answer();
    af_config_holder_set(&holder, af_config_ref(b));
    answer_b = filter_answer();
    ck_assert_str_ne(answer_a, answer_b);
    ck_assert_ptr_nonnull(strstr(answer_a, "\"NodeNames\":[\"fb-a10g-free\"]"));
    ck_assert_ptr_nonnull(strstr(answer_b, "\"NodeNames\":[\"fb-l4-free\"]"));

    memset(&h, 0, sizeof(h));
    h.answer_a = answer_a;
    h.answer_b = answer_b;
    atomic_init(&h.stop, false);
    atomic_init(&h.done, 0);
    ck_assert_int_eq(pthread_create(&t, NULL, hammer_main, &h), 0);
    for (int i = 0; i < FLIPS; i++) {
        /* Each flip drops the holder's reference: a config a request still holds must
         * stay whole until that request lets go (ASan would see it otherwise). */
        af_config_holder_set(&holder, af_config_ref(i % 2 ? b : a));
        if (i % 100 < 2)
            wait_two_requests(&h);   /* a request surely ran under this config, A or B */
    }
    atomic_store(&h.stop, true);
    ck_assert_int_eq(pthread_join(t, NULL), 0);

    ck_assert_msg(h.other == 0, "%llu answers matched neither policy, e.g. %s",
                  (unsigned long long)h.other, h.first_other ? h.first_other : "");
    ck_assert_uint_gt(h.seen_a, 0);
    ck_assert_uint_gt(h.seen_b, 0);
    af_free(answer_a);
    af_free(answer_b);
    af_config_unref(a);
    af_config_unref(b);
    teardown_service();
}
END_TEST

static bool metrics_show(const char *line)
{
    struct af_buf out = AF_BUF_INIT(1u << 20);
    bool found;

    ck_assert_int_eq(af_service_render_metrics(&svc, &out), 0);
    found = strstr(out.buf, line) != NULL;
    if (!found)
        fprintf(stderr, "/metrics lacks '%s':\n%s\n", line, out.buf);
    af_buf_release(&out);
    return found;
}

START_TEST(test_reload_now_results_and_metrics)
{
    char *dir = make_tmpdir();
    char *policy = af_xasprintf("%s/policy.yaml", dir);
    char *catalog = af_xasprintf("%s/catalog.yaml", dir);
    char *info;
    struct af_reload_options ro;
    struct af_reload *r = NULL;
    struct af_config *cfg = NULL, *cur;
    struct af_error err;
    char *catalog_text = af_xmalloc(af_embedded_catalog_yaml_len + 32);

    /* The catalog as a file too: a change to it alone is a reload. */
    memcpy(catalog_text, af_embedded_catalog_yaml, af_embedded_catalog_yaml_len);
    catalog_text[af_embedded_catalog_yaml_len] = '\0';
    write_file(catalog, catalog_text);
    write_file(policy, policy_a);
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&cfg, catalog, policy, &err), 0);
    setup_service(cfg);
    memset(&ro, 0, sizeof(ro));
    ro.policy_path = policy;
    ro.catalog_path = catalog;
    ro.watch = false;
    ck_assert_int_eq(af_reload_start(&r, &holder, &ro), 0);
    svc.reload = r;

    ck_assert_int_eq(af_reload_now(r), AF_RELOAD_UNCHANGED);
    write_file(policy, policy_b);
    ck_assert_int_eq(af_reload_now(r), AF_RELOAD_OK);
    cur = af_config_holder_get(&holder);
    ck_assert_uint_eq(cur->generation, 2);
    ck_assert_str_eq(cur->policy->rules[0].name, "only-l4");
    info = af_xasprintf("accelfit_policy_info{source=\"%s\",hash=\"%s\",catalog_source=\"%s\","
                        "catalog_hash=\"%s\"} 1\n",
                        policy, cur->policy_sha256, catalog, cur->catalog_sha256);
    af_config_unref(cur);
    ck_assert(metrics_show(info));
    ck_assert(metrics_show("accelfit_policy_generation 2\n"));

    write_file(policy, policy_bad);
    ck_assert_int_eq(af_reload_now(r), AF_RELOAD_ERROR);
    ck_assert(metrics_show("accelfit_policy_generation 2\n"));
    ck_assert(metrics_show(info));   /* the old config, untouched */
    ck_assert(metrics_show("accelfit_policy_last_reload_success 0\n"));

    /* A policy naming a family the catalog lacks is refused as at startup. */
    write_file(policy, "apiVersion: accelfit.io/v1\nkind: Policy\nrules:\n  - name: x\n"
                       "    tiers: [{class: nvidia-l4, families: [zz9]}]\n    reason: why\n");
    ck_assert_int_eq(af_reload_now(r), AF_RELOAD_ERROR);

    write_file(policy, policy_b);
    strcat(catalog_text, "\n# edited\n");
    write_file(catalog, catalog_text);
    ck_assert_int_eq(af_reload_now(r), AF_RELOAD_OK);   /* the catalog's bytes changed */
    ck_assert(metrics_show("accelfit_policy_generation 3\n"));
    ck_assert(metrics_show("accelfit_policy_reloads_total{result=\"ok\"} 2\n"));
    ck_assert(metrics_show("accelfit_policy_reloads_total{result=\"unchanged\"} 1\n"));
    ck_assert(metrics_show("accelfit_policy_reloads_total{result=\"error\"} 2\n"));
    ck_assert(metrics_show("accelfit_policy_last_reload_success 1\n"));

    af_reload_stop(r);
    teardown_service();
    af_free(info);
    af_free(catalog_text);
    remove_tree(dir);
    af_free(policy);
    af_free(catalog);
    af_free(dir);
}
END_TEST

/* af_reload_now with the log (stderr) captured into *log (caller frees). */
static enum af_reload_result reload_logged(struct af_reload *r, char **log)
{
    char *path = af_test_temp_path("reload-log");
    int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY, 0600), saved;
    enum af_reload_result res;
    size_t len;

    ck_assert_int_ge(fd, 0);
    fflush(stderr);
    saved = dup(2);
    ck_assert_int_ge(saved, 0);
    ck_assert_int_ge(dup2(fd, 2), 0);
    res = af_reload_now(r);
    fflush(stderr);
    ck_assert_int_ge(dup2(saved, 2), 0);
    close(saved);
    close(fd);
    {
        FILE *f = fopen(path, "r");
        struct af_buf b = AF_BUF_INIT(1u << 20);
        char chunk[4096];
        ck_assert_ptr_nonnull(f);
        while ((len = fread(chunk, 1, sizeof(chunk), f)) > 0)
            ck_assert_int_eq(af_buf_add(&b, chunk, len), 0);
        fclose(f);
        *log = af_buf_detach(&b, NULL);
        if (!*log)
            *log = af_xstrdup("");
    }
    af_free(path);
    return res;
}

/*
 * Every outcome is logged at info: a policy fixed back to the one serving, after a rejected
 * edit, says so (the last line no longer says "rejected").
 */
START_TEST(test_every_reload_outcome_is_logged)
{
    char *dir = make_tmpdir();
    char *policy = af_xasprintf("%s/policy.yaml", dir);
    char *log = NULL;
    struct af_reload_options ro;
    struct af_reload *r = NULL;
    struct af_config *cfg = NULL;
    struct af_error err;
    int level = af_log_level;

    write_file(policy, policy_a);
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&cfg, NULL, policy, &err), 0);
    setup_service(cfg);
    memset(&ro, 0, sizeof(ro));
    ro.policy_path = policy;
    ro.watch = false;
    ck_assert_int_eq(af_reload_start(&r, &holder, &ro), 0);
    af_log_level = AF_LOG_INFO;

    write_file(policy, policy_bad);
    ck_assert_int_eq(reload_logged(r, &log), AF_RELOAD_ERROR);
    ck_assert_msg(strstr(log, "rejected"), "%s", log);
    af_free(log);
    write_file(policy, policy_a);
    ck_assert_int_eq(reload_logged(r, &log), AF_RELOAD_UNCHANGED);
    ck_assert_msg(strstr(log, "policy accepted"), "nothing logged after the fix: '%s'", log);
    af_free(log);
    write_file(policy, policy_b);
    ck_assert_int_eq(reload_logged(r, &log), AF_RELOAD_OK);
    ck_assert_msg(strstr(log, "policy reloaded"), "%s", log);
    af_free(log);

    af_log_level = level;
    af_reload_stop(r);
    teardown_service();
    remove_tree(dir);
    af_free(policy);
    af_free(dir);
}
END_TEST

/*
 * What is not a readable regular file at the policy path is refused at once, with its
 * cause: a FIFO is never opened for a blocking read (a reloader waiting on it would be
 * wedged for good), and a directory or a symlink loop says so rather than "input/output
 * error". af_reload_now returns, counts an error, and the old config keeps serving.
 */
static const struct {
    const char *what;
    const char *want;
} unreadable_cases[] = {
    {"fifo", "cannot read policy: not a regular file"},
    {"dir", "cannot read policy: is a directory"},
    {"loop", "cannot read policy: too many levels of symbolic links"},
};

START_TEST(test_a_policy_path_that_is_no_regular_file_is_refused_with_its_cause)
{
    char *dir = make_tmpdir();
    char *policy = af_xasprintf("%s/policy.yaml", dir);
    char *other = af_xasprintf("%s/other.yaml", dir);
    struct af_reload_options ro;
    struct af_reload *r = NULL;
    struct af_config *cfg = NULL, *bad = NULL;
    struct af_error err;

    write_file(policy, policy_a);
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&cfg, NULL, policy, &err), 0);
    setup_service(cfg);
    memset(&ro, 0, sizeof(ro));
    ro.policy_path = policy;
    ck_assert_int_eq(af_reload_start(&r, &holder, &ro), 0);
    svc.reload = r;

    ck_assert_int_eq(unlink(policy), 0);
    if (!strcmp(unreadable_cases[_i].what, "fifo")) {
        ck_assert_int_eq(mkfifo(policy, 0600), 0);
    } else if (!strcmp(unreadable_cases[_i].what, "dir")) {
        ck_assert_int_eq(mkdir(policy, 0700), 0);
    } else {
        ck_assert_int_eq(symlink("other.yaml", policy), 0);
        ck_assert_int_eq(symlink("policy.yaml", other), 0);
    }
    memset(&err, 0, sizeof(err));
    ck_assert_int_ne(af_config_load(&bad, NULL, policy, &err), 0);
    ck_assert_msg(strstr(err.text, unreadable_cases[_i].want), "got '%s'", err.text);
    ck_assert_ptr_null(bad);
    ck_assert_int_eq(af_reload_now(r), AF_RELOAD_ERROR);
    ck_assert(metrics_show("accelfit_policy_generation 1\n"));
    ck_assert(metrics_show("accelfit_policy_reloads_total{result=\"error\"} 1\n"));

    af_reload_stop(r);
    teardown_service();
    remove_tree(dir);
    af_free(policy);
    af_free(other);
    af_free(dir);
}
END_TEST

static Suite *reload_suite(void)
{
    Suite *s = suite_create("reload");
    TCase *tc = tcase_create("server");

    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_configmap_symlink_swap_is_picked_up_and_a_bad_policy_is_kept_out);
    tcase_add_test(tc, test_sighup_reloads_a_plain_rewrite);
    tcase_add_test(tc, test_sighup_with_the_embedded_policy_says_there_is_nothing_to_reload);
    suite_add_tcase(s, tc);
    tc = tcase_create("in_process");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_every_answer_is_one_configs_while_the_policy_flips);
    tcase_add_test(tc, test_reload_now_results_and_metrics);
    tcase_add_test(tc, test_every_reload_outcome_is_logged);
    tcase_add_loop_test(tc, test_a_policy_path_that_is_no_regular_file_is_refused_with_its_cause, 0,
                        AF_ARRAY_SIZE(unreadable_cases));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    return af_test_run(reload_suite());
}
