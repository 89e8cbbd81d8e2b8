/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Live utilization against a real Prometheus (the Debian package), end to end:
 *
 *   a small exporter (python3's http.server over a temporary directory) serves the
 *   recorded dcgm-exporter and neuron-monitor expositions of tests/fixtures/metrics,
 *   with the node names of the demo cluster and GPU utilization values this test
 *   rewrites over time; Prometheus scrapes it every second; `accelfit serve --demo
 *   --prometheus URL` reads from that Prometheus.
 *
 * Checked: scores move the way the policy says (prefer-idle: the idle node first, and
 * the other way round once the values swap); a Prometheus stopped mid-run degrades to
 * exactly the allocation scores of a server without --prometheus, with every request
 * answered 200, /readyz 200 saying so and accelfit_utilization_up 0; and a Prometheus
 * started again is used again. A second case puts Prometheus behind its own TLS (a
 * certificate from a test CA) and basic auth: --prometheus-ca-file and the right password
 * read live data; a wrong password or no CA file degrade, saying why. Every wait polls with a generous deadline; nothing is
 * timed. Without the prometheus binary the suite is skipped (exit 77, which ctest
 * reports as skipped), saying how to install it.
 */
#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accelfit/util.h"
#include "support/http_client.h"
#include "support/support.h"

#define SKIP 77
#define DEADLINE_S 40

static const char *const node_a = "ip-10-0-1-42.us-west-2.compute.internal";
static const char *const node_b = "ip-10-0-1-44.us-west-2.compute.internal";
static const char *const node_inf2 = "ip-10-0-3-30.us-west-2.compute.internal";

static char dir[256];
static int prom_port, exporter_port;
static pid_t prom_pid, exporter_pid;

static const char *prometheus_binary(void)
{
    static const char *const candidates[] = {"/usr/bin/prometheus", "/usr/local/bin/prometheus"};

    for (size_t i = 0; i < AF_ARRAY_SIZE(candidates); i++)
        if (access(candidates[i], X_OK) == 0)
            return candidates[i];
    return NULL;
}

static pid_t spawn(const char *const *argv, const char *log)
{
    pid_t pid = fork();

    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
            close(fd);
        }
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    return pid;
}

static void reap(pid_t *pid)
{
    int status;

    if (*pid <= 0)
        return;
    kill(*pid, SIGTERM);
    for (int i = 0; i < 400 && waitpid(*pid, &status, WNOHANG) != *pid; i++)
        usleep(25000);
    if (kill(*pid, 0) == 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, &status, 0);
    }
    *pid = 0;
}

static void write_file(const char *name, const char *text)
{
    char path[512], tmp[520];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", dir, name);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    f = fopen(tmp, "w");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_ge(fputs(text, f), 0);
    ck_assert_int_eq(fclose(f), 0);
    ck_assert_int_eq(rename(tmp, path), 0);   /* a scrape sees the old file or the new one */
}

/*
 * The recorded A10G exposition for `node` with DCGM_FI_DEV_GPU_UTIL set to `util`:
 * every line as dcgm-exporter printed it, except the Hostname and that one value.
 */
static void write_gpu_exposition(const char *file, const char *node, int util)
{
    char *text = af_test_read("tests/fixtures/metrics/dcgm-exporter-a10g-1gpu.prom", NULL);
    struct af_buf out = AF_BUF_INIT(0);
    char *save = NULL;

    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char *host = strstr(line, "Hostname=\"ip-10-0-1-40.us-west-2.compute.internal\"");
        if (host) {
            ck_assert_int_eq(af_buf_add(&out, line, (size_t)(host - line)), 0);
            ck_assert_int_eq(af_buf_printf(&out, "Hostname=\"%s\"", node), 0);
            line = host + strlen("Hostname=\"ip-10-0-1-40.us-west-2.compute.internal\"");
        }
        ck_assert_int_eq(af_buf_printf(&out, "%s\n", line), 0);
    }
    /* Replace the utilization sample's value (the last field of its line). */
    {
        char *p = strstr(out.buf, "\nDCGM_FI_DEV_GPU_UTIL{");
        char *sp, *nl;
        struct af_buf fixed = AF_BUF_INIT(0);
        ck_assert_ptr_nonnull(p);
        nl = strchr(p + 1, '\n');
        ck_assert_ptr_nonnull(nl);
        for (sp = nl; sp > p && *sp != ' '; sp--)
            ;
        ck_assert_int_eq(af_buf_add(&fixed, out.buf, (size_t)(sp - out.buf) + 1), 0);
        ck_assert_int_eq(af_buf_printf(&fixed, "%d%s", util, nl), 0);
        write_file(file, fixed.buf);
        af_buf_release(&fixed);
    }
    af_buf_release(&out);
    af_free(text);
}

static void start_exporter(void)
{
    char port[16], log[300];
    const char *argv[] = {"/usr/bin/python3", "-m", "http.server", port, "--bind", "127.0.0.1",
                          "--directory", dir, NULL};

    exporter_port = af_test_free_port();
    snprintf(port, sizeof(port), "%d", exporter_port);
    snprintf(log, sizeof(log), "%s/exporter.log", dir);
    exporter_pid = spawn(argv, log);
}

static void write_prometheus_config(void)
{
    char cfg[2048];
    char *inf2 = af_test_read("tests/fixtures/metrics/neuron-monitor-inf2.prom", NULL);

    /* neuron-monitor names no node: the scrape adds it, as a relabeling from
     * __meta_kubernetes_pod_node_name does in a cluster. */
    write_file("inf2.txt", inf2);
    af_free(inf2);
    snprintf(cfg, sizeof(cfg),
             "global:\n"
             "  scrape_interval: 1s\n"
             "  evaluation_interval: 1s\n"
             "scrape_configs:\n"
             "  - job_name: dcgm-a\n"
             "    metrics_path: /gpu-a.txt\n"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
             "  - job_name: dcgm-b\n"
             "    metrics_path: /gpu-b.txt\n"
             "    static_configs: [{targets: ['127.0.0.1:%d']}]\n"
             "  - job_name: neuron-monitor\n"
             "    metrics_path: /inf2.txt\n"
             "    static_configs: [{targets: ['127.0.0.1:%d'], labels: {node: '%s'}}]\n",
             exporter_port, exporter_port, exporter_port, node_inf2);
    write_file("prometheus.yml", cfg);
}

static bool web_config;   /* start Prometheus with TLS and basic auth (web.yml) */

static void start_prometheus(void)
{
    char cfgflag[320], data[320], listen[64], log[300], web[320];
    const char *argv[] = {prometheus_binary(), cfgflag, data, listen, "--log.level=warn",
                          "--storage.tsdb.retention.time=1h", web_config ? web : NULL, NULL};

    snprintf(cfgflag, sizeof(cfgflag), "--config.file=%s/prometheus.yml", dir);
    snprintf(data, sizeof(data), "--storage.tsdb.path=%s/data", dir);
    snprintf(listen, sizeof(listen), "--web.listen-address=127.0.0.1:%d", prom_port);
    snprintf(log, sizeof(log), "%s/prometheus.log", dir);
    snprintf(web, sizeof(web), "--web.config.file=%s/web.yml", dir);
    prom_pid = spawn(argv, log);
}

static struct af_test_resp get(CURL *c, const char *url)
{
    struct af_test_resp r;

    af_test_http(c, NULL, url, NULL, 0, NULL, &r);
    return r;
}

/* Polls `url` until its body contains `want` (status 200); fails after the deadline. */
static void wait_for(CURL *c, const char *url, const char *want)
{
    for (int i = 0; i < DEADLINE_S * 10; i++) {
        struct af_test_resp r = get(c, url);
        bool ok = r.curl_rc == CURLE_OK && r.status == 200 && r.body && strstr(r.body, want);
        af_test_resp_free(&r);
        if (ok)
            return;
        usleep(100000);
    }
    ck_abort_msg("%s did not show '%s' within %d s", url, want, DEADLINE_S);
}

/* Score of `node` in a prioritize answer ("Host":"...","Score":N). */
static int score_of(const char *body, const char *node)
{
    char key[200];
    const char *p;

    snprintf(key, sizeof(key), "\"Host\":\"%s\",\"Score\":", node);
    p = strstr(body, key);
    ck_assert_msg(p != NULL, "no score for %s in %.1500s", node, body);
    return (int)strtol(p + strlen(key), NULL, 10);
}

static char *prioritize(CURL *c, const struct af_test_server *s, const char *body, size_t len)
{
    struct af_test_resp r;
    char url[200];
    char *out;

    snprintf(url, sizeof(url), "%s/prioritize", s->base);
    af_test_http(c, "POST", url, body, len, NULL, &r);
    ck_assert_int_eq(r.curl_rc, CURLE_OK);
    ck_assert_msg(r.status == 200, "prioritize answered %ld: %.1500s", r.status, r.body);
    out = af_xstrdup(r.body);
    af_test_resp_free(&r);
    return out;
}

/* Polls until prioritize ranks `first` above `second`. */
static void wait_ranked(CURL *c, const struct af_test_server *s, const char *body, size_t len,
                        const char *first, const char *second)
{
    char *last = NULL;

    for (int i = 0; i < DEADLINE_S * 10; i++) {
        af_free(last);
        last = prioritize(c, s, body, len);
        if (score_of(last, first) > score_of(last, second)) {
            af_free(last);
            return;
        }
        usleep(100000);
    }
    ck_abort_msg("prioritize never ranked %s above %s within %d s; last answer %.1500s", first,
                 second, DEADLINE_S, last);
}

/* The request: a 1-GPU inference pod; candidates the two free A10G nodes. */
static char *request_body(size_t *len)
{
    char *tmpl = af_test_read("tests/fixtures/metrics/prioritize-a10g-inference.json", NULL);
    struct af_buf b = AF_BUF_INIT(0);
    char *names = strstr(tmpl, "\"NodeNames\"");

    ck_assert_ptr_nonnull(names);
    ck_assert_int_eq(af_buf_add(&b, tmpl, (size_t)(names - tmpl)), 0);
    ck_assert_int_eq(af_buf_printf(&b, "\"NodeNames\": [\"%s\", \"%s\"]\n}\n", node_a, node_b), 0);
    af_free(tmpl);
    return af_buf_detach(&b, len);
}

static void write_policy(void)
{
    char *base = af_test_read("policies/default.yaml", NULL);
    struct af_buf b = AF_BUF_INIT(0);

    ck_assert_int_eq(af_buf_puts(&b, base), 0);
    ck_assert_int_eq(af_buf_puts(&b, "\nutilization:\n"
                                     "  interval: 1s\n"
                                     "  timeout: 2s\n"
                                     "  staleness: 10s\n"
                                     "  retry_max: 2s\n"
                                     "  scoring: {mode: prefer-idle, weight: 0.6}\n"),
                     0);
    write_file("policy.yaml", b.buf);
    af_buf_release(&b);
    af_free(base);
}

static void make_dir(void)
{
    snprintf(dir, sizeof(dir), "/tmp/af-prom-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
}

/*
 * In the temporary directory (made when there is none yet): the policy, the exporter
 * (GPU a at 90 %, b at 2 %) and a Prometheus scraping it, ready.
 */
static void start_stack(CURL *c, char *prom_url, size_t ulen, char *policy, size_t plen)
{
    char url[300];

    if (!dir[0])
        make_dir();
    prom_port = af_test_free_port();
    snprintf(prom_url, ulen, "%s://127.0.0.1:%d", web_config ? "https" : "http", prom_port);
    snprintf(policy, plen, "%s/policy.yaml", dir);
    write_policy();
    write_gpu_exposition("gpu-a.txt", node_a, 90);   /* a busy, b idle */
    write_gpu_exposition("gpu-b.txt", node_b, 2);
    start_exporter();
    write_prometheus_config();
    start_prometheus();
    snprintf(url, sizeof(url), "%s://%s127.0.0.1:%d/-/ready", web_config ? "https" : "http",
             web_config ? "accelfit:s3cret@" : "", prom_port);
    wait_for(c, url, "Ready");
}

START_TEST(test_scores_follow_prometheus_and_degrade_when_it_stops)
{
    struct af_test_server live, plain;
    char prom_url[100], policy[300], url[300];
    const char *live_args[] = {"--demo", "--policy", policy, "--prometheus", prom_url,
                               "--log-level", "warn", NULL};
    const char *plain_args[] = {"--demo", "--policy", policy, "--log-level", "warn", NULL};
    CURL *c = curl_easy_init();
    size_t len;
    char *body = request_body(&len), *want, *got;

    start_stack(c, prom_url, sizeof(prom_url), policy, sizeof(policy));

    af_test_server_start(&live, live_args, false, NULL, NULL);
    af_test_server_start(&plain, plain_args, false, NULL, NULL);

    /* 1. prefer-idle: the idle node first, once all three targets have been read (the
     * Neuron series mapped by the label the scrape added) */
    snprintf(url, sizeof(url), "%s/metrics", live.base);
    wait_for(c, url, "accelfit_utilization_nodes{mapped=\"true\"} 3");
    wait_ranked(c, &live, body, len, node_b, node_a);
    snprintf(url, sizeof(url), "%s/readyz", live.base);
    wait_for(c, url, "utilization: live from prometheus");
    {
        struct af_test_resp r;
        snprintf(url, sizeof(url), "%s/explain", live.base);
        af_test_http(c, "POST", url, body, len, NULL, &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_msg(strstr(r.body, "\"state\":\"used\",\"metric\":\"gpu_util\",\"util_pct\":2,"),
                      "explain does not show node b's measured 2%%: %.1500s", r.body);
        ck_assert_ptr_nonnull(strstr(r.body, "\"util_pct\":90,"));
        af_test_resp_free(&r);
    }

    /* 2. the values change: the ranking follows */
    write_gpu_exposition("gpu-a.txt", node_a, 1);
    write_gpu_exposition("gpu-b.txt", node_b, 97);
    wait_ranked(c, &live, body, len, node_a, node_b);

    /* 3. Prometheus stops: allocation scores exactly, no failed request */
    reap(&prom_pid);
    snprintf(url, sizeof(url), "%s/readyz", live.base);
    wait_for(c, url, "utilization: degraded: query gpu_util: cannot query");
    want = prioritize(c, &plain, body, len);
    for (int i = 0; i < 20; i++) {
        got = prioritize(c, &live, body, len);
        ck_assert_str_eq(got, want);
        af_free(got);
    }
    af_free(want);
    {
        struct af_test_resp r;
        snprintf(url, sizeof(url), "%s/readyz", live.base);
        r = get(c, url);
        ck_assert_int_eq(r.status, 200);   /* degraded is not unready */
        ck_assert_ptr_nonnull(strstr(r.body, "scoring on allocation"));
        af_test_resp_free(&r);
        snprintf(url, sizeof(url), "%s/metrics", live.base);
        r = get(c, url);
        ck_assert_ptr_nonnull(strstr(r.body, "\naccelfit_utilization_up 0\n"));
        af_test_resp_free(&r);
        snprintf(url, sizeof(url), "%s/explain", live.base);
        af_test_http(c, "POST", url, body, len, NULL, &r);
        ck_assert_int_eq(r.status, 200);
        ck_assert_ptr_nonnull(strstr(r.body, "\"state\":\"degraded\""));
        ck_assert_ptr_nonnull(strstr(r.body, "every node is scored on allocation only"));
        af_test_resp_free(&r);
    }

    /* 4. Prometheus comes back (same data directory): live scoring resumes */
    start_prometheus();
    snprintf(url, sizeof(url), "%s/readyz", live.base);
    wait_for(c, url, "utilization: live from prometheus");
    wait_ranked(c, &live, body, len, node_a, node_b);
    snprintf(url, sizeof(url), "%s/metrics", live.base);
    wait_for(c, url, "\naccelfit_utilization_up 1\n");

    ck_assert_int_eq(af_test_server_stop(&live), 0);
    ck_assert_int_eq(af_test_server_stop(&plain), 0);
    af_free(body);
    curl_easy_cleanup(c);
}
END_TEST

/*
 * Prometheus's own TLS and basic auth (--web.config.file), with a certificate from a CA
 * of the test's: the CA file and the right password read live data; a wrong password is
 * a degraded source that says 401; no CA file is one that says the certificate is not
 * trusted.
 */
START_TEST(test_tls_and_basic_auth_to_a_protected_prometheus)
{
    struct af_test_server good, bad, untrusted;
    char prom_url[100], policy[300], url[300], good_file[300], bad_file[300], ca[300], *cmd;
    const char *good_args[] = {"--demo", "--policy", policy, "--prometheus", prom_url,
                               "--prometheus-basic-auth-file", good_file,
                               "--prometheus-ca-file", ca, NULL};
    const char *bad_args[] = {"--demo", "--policy", policy, "--prometheus", prom_url,
                              "--prometheus-basic-auth-file", bad_file,
                              "--prometheus-ca-file", ca, NULL};
    const char *untrusted_args[] = {"--demo", "--policy", policy, "--prometheus", prom_url,
                                    "--prometheus-basic-auth-file", good_file, NULL};
    CURL *c = curl_easy_init();

    web_config = true;
    make_dir();
    cmd = af_xasprintf(
        "set -e; cd %s;"
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2"
        " -subj /CN=accelfit-test-ca >/dev/null 2>&1;"
        "openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=127.0.0.1"
        " >/dev/null 2>&1;"
        "printf 'subjectAltName=IP:127.0.0.1\\n' > ext.cnf;"
        "openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt"
        " -days 2 -extfile ext.cnf >/dev/null 2>&1",
        dir);
    ck_assert_msg(system(cmd) == 0, "cannot make certificates: %s", cmd);
    af_free(cmd);
    snprintf(ca, sizeof(ca), "%s/ca.crt", dir);
    cmd = af_xasprintf("tls_server_config:\n"
                       "  cert_file: %s/srv.crt\n"
                       "  key_file: %s/srv.key\n"
                       "basic_auth_users:\n" /* bcrypt (cost 4) of "s3cret" */
                       "  accelfit: $2b$04$os815qlgHnJD3nK88ebuIuTTXXwYha27HbB3nSb99z3NQELwAXigi\n",
                       dir, dir);
    write_file("web.yml", cmd);
    af_free(cmd);
    write_file("good-auth", "accelfit:s3cret\n");
    write_file("bad-auth", "accelfit:wrong\n");
    snprintf(good_file, sizeof(good_file), "%s/good-auth", dir);
    snprintf(bad_file, sizeof(bad_file), "%s/bad-auth", dir);
    curl_easy_setopt(c, CURLOPT_CAINFO, ca);
    start_stack(c, prom_url, sizeof(prom_url), policy, sizeof(policy));

    af_test_server_start(&good, good_args, false, NULL, NULL);
    af_test_server_start(&bad, bad_args, false, NULL, NULL);
    af_test_server_start(&untrusted, untrusted_args, false, NULL, NULL);
    snprintf(url, sizeof(url), "%s/readyz", good.base);
    wait_for(c, url, "utilization: live from prometheus https://");
    snprintf(url, sizeof(url), "%s/readyz", bad.base);
    wait_for(c, url, "utilization: degraded: query gpu_util: HTTP 401");
    snprintf(url, sizeof(url), "%s/readyz", untrusted.base);
    wait_for(c, url, "utilization: degraded: query gpu_util: cannot query https://");
    ck_assert_int_eq(af_test_server_stop(&good), 0);
    ck_assert_int_eq(af_test_server_stop(&bad), 0);
    ck_assert_int_eq(af_test_server_stop(&untrusted), 0);
    curl_easy_cleanup(c);
}
END_TEST

static void teardown(void)
{
    char cmd[400];

    reap(&prom_pid);
    reap(&exporter_pid);
    if (dir[0] && !strncmp(dir, "/tmp/af-prom-test-", 18)) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "check_prom: cannot remove %s\n", dir);
    }
}

Suite *af_prom_suite(void);
Suite *af_prom_suite(void)
{
    Suite *s = suite_create("prom");
    TCase *tc = tcase_create("real-prometheus");
    tcase_add_checked_fixture(tc, NULL, teardown);
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, test_scores_follow_prometheus_and_degrade_when_it_stops);
    tcase_add_test(tc, test_tls_and_basic_auth_to_a_protected_prometheus);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (!prometheus_binary()) {
        printf("check_prom: SKIPPED: no prometheus binary (/usr/bin/prometheus); "
               "scripts/install-deps.sh installs the Debian package 'prometheus'\n");
        return SKIP;
    }
    if (access("/usr/bin/python3", X_OK) != 0) {
        printf("check_prom: SKIPPED: the test exporter needs /usr/bin/python3 "
               "(scripts/install-deps.sh installs it)\n");
        return SKIP;
    }
    return af_test_run(af_prom_suite());
}
