/* SPDX-License-Identifier: Apache-2.0 */
/*
 * monitoring: the alerting and recording rules and the Grafana dashboard of
 * manifests/monitoring, checked with the real tools. `promtool check rules` accepts the plain
 * rules file and the PrometheusRule's groups; `promtool test rules` runs
 * tests/fixtures/monitoring/rules.test.yaml, which must hold, for every alert, a case where it
 * fires and one where it stays silent (and a wrong expectation must make promtool fail). The
 * PrometheusRule holds exactly the plain file's groups. Every alert has a severity, a summary
 * and a runbook_url naming its section of docs/operations.md, which exists. Every dashboard
 * query parses (promtool, as a recording rule), names only metrics, and the dashboard ships in
 * a ConfigMap with the Grafana sidecar's label. That every named metric exists in a real
 * accelfit's /metrics, and that a real Prometheus answers every query, is tests/e2e's part.
 *
 * Needs promtool (Debian: prometheus, which scripts/install-deps.sh installs): without it the
 * suite exits 77 (skipped), or fails when CI=true.
 */
#include <check.h>
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accelfit/util.h"
#include "support/monitoring.h"
#include "support/support.h"

static const char *promtool;

/* Runs `promtool ARGS` in `dir` (NULL: the source tree); its output in *out. Exit status. */
static int run_promtool(char **out, const char *dir, const char *args)
{
    char *cmd = af_xasprintf("cd '%s' && '%s' %s 2>&1", dir ? dir : AF_SOURCE_DIR, promtool, args);
    struct af_buf b = AF_BUF_INIT(16u << 20);
    char chunk[4096];
    size_t n;
    FILE *p = popen(cmd, "r");
    int st;

    ck_assert_ptr_nonnull(p);
    while ((n = fread(chunk, 1, sizeof(chunk), p)) > 0)
        ck_assert_int_eq(af_buf_add(&b, chunk, n), 0);
    st = pclose(p);
    *out = b.buf ? af_buf_detach(&b, NULL) : af_xstrdup("");
    af_free(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_msg(f != NULL, "cannot write %s", path);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* The alert names of the rules file, in order. */
static json_t *alert_names(void)
{
    json_t *q = af_test_monitoring_queries(), *names = json_array(), *v;
    size_t i;

    json_array_foreach(q, i, v)
        if (!strcmp(json_string_value(json_object_get(v, "kind")), "alert"))
            json_array_append(names, json_object_get(v, "name"));
    json_decref(q);
    return names;
}

START_TEST(test_promtool_accepts_the_rules_file)
{
    char *out;
    int rc = run_promtool(&out, NULL, "check rules " AF_TEST_RULES);

    ck_assert_msg(rc == 0, "%s", out);
    ck_assert_msg(strstr(out, "SUCCESS: 28 rules found"), "%s", out);
    af_free(out);
}
END_TEST

/* The PrometheusRule holds the plain file's groups, and promtool accepts them from it. */
START_TEST(test_prometheusrule_holds_the_same_groups)
{
    json_t *plain = af_test_load_doc(AF_TEST_RULES);
    json_t *cr = af_test_load_doc("manifests/monitoring/prometheusrule.yaml");
    json_t *spec = json_object_get(cr, "spec");
    char *path = af_test_temp_path("crd-rules.json"), *text, *out, *args;
    int rc;

    ck_assert_str_eq(json_string_value(json_object_get(cr, "kind")), "PrometheusRule");
    ck_assert_str_eq(json_string_value(json_object_get(cr, "apiVersion")), "monitoring.coreos.com/v1");
    ck_assert_msg(json_equal(json_object_get(plain, "groups"), json_object_get(spec, "groups")),
                  "prometheusrule.yaml's spec.groups differ from accelfit.rules.yaml's groups");
    text = json_dumps(spec, JSON_INDENT(1));
    write_text(path, text);
    args = af_xasprintf("check rules '%s'", path);
    rc = run_promtool(&out, NULL, args);
    ck_assert_msg(rc == 0, "%s", out);
    free(text);
    af_free(out), af_free(args), af_free(path);
    json_decref(plain);
    json_decref(cr);
}
END_TEST

START_TEST(test_promtool_unit_tests_pass)
{
    char *out;
    int rc = run_promtool(&out, AF_SOURCE_DIR "/tests/fixtures/monitoring", "test rules rules.test.yaml");

    ck_assert_msg(rc == 0 && strstr(out, "SUCCESS"), "%s", out);
    af_free(out);
}
END_TEST

/* The unit tests can fail: one expectation changed (the over-budget tenant's spend in the
 * summary) and promtool says which alert differs. */
START_TEST(test_a_wrong_expectation_fails)
{
    char *text = af_test_read("tests/fixtures/monitoring/rules.test.yaml", NULL);
    char *dir = af_test_temp_path("unit"), *path, *out, *hit;
    int rc;

    ck_assert_int_eq(mkdir(dir, 0700), 0);
    path = af_xasprintf("%s/rules.test.yaml", dir);
    hit = strstr(text, "spends $75.00/h");
    ck_assert_ptr_nonnull(hit);
    hit[9] = '6';   /* $76.00 */
    hit = strstr(text, "../../../manifests/");
    ck_assert_ptr_nonnull(hit);
    {
        char *fixed = af_xasprintf("%.*s%s/manifests/%s", (int)(hit - text), text, AF_SOURCE_DIR,
                                   hit + strlen("../../../manifests/"));
        write_text(path, fixed);
        af_free(fixed);
    }
    rc = run_promtool(&out, dir, "test rules rules.test.yaml");
    ck_assert_msg(rc != 0, "promtool passed a wrong expectation:\n%s", out);
    ck_assert_msg(strstr(out, "alertname: AccelfitTenantOverBudgetHard"), "%s", out);
    af_free(out), af_free(path), af_free(dir), af_free(text);
}
END_TEST

/* Every alert has a case where it fires and one where it is silent. */
START_TEST(test_every_alert_fires_and_stays_silent_in_the_unit_tests)
{
    json_t *names = alert_names(), *tests = af_test_load_doc("tests/fixtures/monitoring/rules.test.yaml");
    json_t *name, *t, *a;
    size_t i, j, k;

    ck_assert_uint_ge(json_array_size(names), 19);
    json_array_foreach(names, i, name) {
        int firing = 0, silent = 0;
        json_array_foreach(json_object_get(tests, "tests"), j, t)
            json_array_foreach(json_object_get(t, "alert_rule_test"), k, a) {
                if (strcmp(json_string_value(json_object_get(a, "alertname")), json_string_value(name)))
                    continue;
                if (json_array_size(json_object_get(a, "exp_alerts")))
                    firing++;
                else
                    silent++;
            }
        ck_assert_msg(firing && silent, "%s: %d firing and %d silent cases in rules.test.yaml",
                      json_string_value(name), firing, silent);
    }
    json_decref(names);
    json_decref(tests);
}
END_TEST

/* Severity, summary, and a runbook_url whose section of docs/operations.md exists and says
 * what the alert means, the query that shows why, and what to do. */
START_TEST(test_every_alert_has_a_runbook)
{
    json_t *rules = af_test_load_doc(AF_TEST_RULES), *g, *r;
    char *ops = af_test_read("docs/operations.md", NULL);
    size_t i, j;

    json_array_foreach(json_object_get(rules, "groups"), i, g)
        json_array_foreach(json_object_get(g, "rules"), j, r) {
            const char *alert = json_string_value(json_object_get(r, "alert"));
            const char *sev, *url;
            char *want, *heading, *section;
            const char *end;
            if (!alert)
                continue;
            sev = json_string_value(json_object_get(json_object_get(r, "labels"), "severity"));
            ck_assert_msg(sev && (!strcmp(sev, "critical") || !strcmp(sev, "warning") ||
                                  !strcmp(sev, "info")), "%s: severity %s", alert, sev);
            ck_assert_msg(json_string_length(json_object_get(json_object_get(r, "annotations"), "summary")) > 20,
                          "%s: no summary", alert);
            url = json_string_value(json_object_get(json_object_get(r, "annotations"), "runbook_url"));
            want = af_xasprintf("docs/operations.md#%s", alert);
            for (char *c = want; *c; c++)
                *c = (char)tolower((unsigned char)*c);
            ck_assert_msg(url && !strcmp(url, want), "%s: runbook_url %s, want %s", alert, url, want);
            heading = af_xasprintf("\n### %s\n", alert);
            section = strstr(ops, heading);
            ck_assert_msg(section, "docs/operations.md has no section '### %s'", alert);
            section += strlen(heading);
            end = strstr(section, "\n### ");
            section = end ? af_xstrndup(section, (size_t)(end - section)) : af_xstrdup(section);
            ck_assert_msg(strstr(section, "**What it means.**") && strstr(section, "```promql") &&
                              strstr(section, "**What to do.**"),
                          "%s: its runbook lacks what it means, a query or what to do", alert);
            af_free(section);
            af_free(want), af_free(heading);
        }
    json_decref(rules);
    af_free(ops);
}
END_TEST

/* The dashboard: every panel has queries that parse (promtool, as recording rules) and name
 * metrics; rows and a data source variable; the ConfigMap carries the sidecar's label. */
START_TEST(test_dashboard_queries_parse_and_ship_in_a_configmap)
{
    json_t *dash = af_test_load_doc(AF_TEST_DASHBOARD), *q = af_test_monitoring_queries(), *p, *v;
    json_t *kust = af_test_load_doc("manifests/monitoring/kustomization.yaml"), *gen;
    struct af_buf rules = AF_BUF_INIT(0);
    char *path = af_test_temp_path("panels.rules.json"), *out, *args;
    size_t i, panels = 0, queries = 0;
    int rc;

    ck_assert_str_eq(json_string_value(json_object_get(dash, "uid")), "accelfit");
    json_array_foreach(json_object_get(dash, "panels"), i, p) {
        if (!strcmp(json_string_value(json_object_get(p, "type")), "row"))
            continue;
        panels++;
        ck_assert_msg(json_array_size(json_object_get(p, "targets")) > 0, "panel %s has no query",
                      json_string_value(json_object_get(p, "title")));
        ck_assert_str_eq(json_string_value(json_object_get(json_object_get(p, "datasource"), "uid")),
                         "${datasource}");
    }
    ck_assert_uint_ge(panels, 15);
    ck_assert_int_eq(af_buf_puts(&rules, "{\"groups\": [{\"name\": \"panels\", \"rules\": ["), 0);
    json_array_foreach(q, i, v) {
        json_t *names;
        char *e;
        if (strcmp(json_string_value(json_object_get(v, "kind")), "panel"))
            continue;
        names = af_test_metric_names(json_string_value(json_object_get(v, "expr")));
        ck_assert_msg(json_array_size(names) > 0, "panel %s: no metric in %s",
                      json_string_value(json_object_get(v, "name")),
                      json_string_value(json_object_get(v, "expr")));
        json_decref(names);
        e = json_dumps(json_object_get(v, "expr"), JSON_ENCODE_ANY);
        ck_assert_int_eq(af_buf_printf(&rules, "%s{\"record\": \"panel:q%zu\", \"expr\": %s}",
                                       queries ? ", " : "", queries, e), 0);
        free(e);
        queries++;
    }
    ck_assert_int_eq(af_buf_puts(&rules, "]}]}\n"), 0);
    write_text(path, rules.buf);
    args = af_xasprintf("check rules '%s'", path);
    rc = run_promtool(&out, NULL, args);
    ck_assert_msg(rc == 0, "%s", out);

    gen = json_array_get(json_object_get(kust, "configMapGenerator"), 0);
    ck_assert_str_eq(json_string_value(json_object_get(gen, "name")), "accelfit-dashboard");
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(json_object_get(gen, "options"),
                                                                       "labels"), "grafana_dashboard")), "1");
    af_buf_release(&rules);
    af_free(out), af_free(args), af_free(path);
    json_decref(dash), json_decref(q), json_decref(kust);
}
END_TEST

/* The scan of PromQL for metric names: selectors, ranges and functions, not labels. */
START_TEST(test_metric_names_of_an_expression)
{
    json_t *n = af_test_metric_names(
        "sum by (verb, le) (rate(accelfit_request_duration_seconds_bucket{verb=~\"accelfit_x\"}[5m]))"
        " / on (job) accelfit_ready and up{job=\"accelfit\"} > accelfit:tenant_spend:max");
    char *s = json_dumps(n, JSON_COMPACT);

    ck_assert_str_eq(s, "[\"accelfit_request_duration_seconds_bucket\",\"accelfit_ready\",\"up\"]");
    free(s);
    json_decref(n);
}
END_TEST

static Suite *monitoring_suite(void)
{
    Suite *s = suite_create("monitoring");
    TCase *tc = tcase_create("promtool");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_promtool_accepts_the_rules_file);
    tcase_add_test(tc, test_prometheusrule_holds_the_same_groups);
    tcase_add_test(tc, test_promtool_unit_tests_pass);
    tcase_add_test(tc, test_a_wrong_expectation_fails);
    tcase_add_test(tc, test_every_alert_fires_and_stays_silent_in_the_unit_tests);
    tcase_add_test(tc, test_every_alert_has_a_runbook);
    tcase_add_test(tc, test_dashboard_queries_parse_and_ship_in_a_configmap);
    tcase_add_test(tc, test_metric_names_of_an_expression);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    static const char *const candidates[] = {"/usr/bin/promtool", "/usr/local/bin/promtool"};
    bool ci = getenv("CI") && !strcmp(getenv("CI"), "true");

    for (size_t i = 0; i < AF_ARRAY_SIZE(candidates) && !promtool; i++)
        if (access(candidates[i], X_OK) == 0)
            promtool = candidates[i];
    if (!promtool) {
        printf("check_monitoring: %s: no promtool (/usr/bin/promtool); scripts/install-deps.sh "
               "installs the Debian package 'prometheus'\n", ci ? "FAILED" : "SKIPPED");
        return ci ? 1 : 77;
    }
    return af_test_run(monitoring_suite());
}
