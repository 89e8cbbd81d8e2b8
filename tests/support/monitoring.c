/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The expressions of manifests/monitoring (monitoring.h): the rules file parsed with the
 * project's YAML reader, the dashboard with jansson, and a scan of PromQL for the metric
 * names it reads (identifiers followed by a selector, a range or an operator, not label
 * names or values, which only ever follow '{' or a quote).
 */
#include "support/monitoring.h"

#include <check.h>
#include <ctype.h>
#include <string.h>

#include "accelfit/config.h"
#include "accelfit/util.h"
#include "support/support.h"

json_t *af_test_load_doc(const char *relpath)
{
    size_t len;
    char *text = af_test_read(relpath, &len);
    struct af_buf out = AF_BUF_INIT(64u << 20);
    struct af_error err = {0};
    json_error_t jerr;
    json_t *doc;

    if (strlen(relpath) > 5 && !strcmp(relpath + strlen(relpath) - 5, ".json")) {
        doc = json_loadb(text, len, 0, &jerr);
        ck_assert_msg(doc != NULL, "%s:%d:%d: %s", relpath, jerr.line, jerr.column, jerr.text);
    } else {
        int rc = af_yaml_to_json(relpath, text, len, &out, &err);
        ck_assert_msg(rc == 0, "%s:%d:%d: %s", relpath, err.line, err.column, err.text);
        doc = json_loadb(out.buf, out.len, 0, &jerr);
        ck_assert_msg(doc != NULL, "%s: %s", relpath, jerr.text);
        if (json_is_array(doc)) {
            json_t *first = json_incref(json_array_get(doc, 0));
            json_decref(doc);
            doc = first;
        }
    }
    af_buf_release(&out);
    af_free(text);
    return doc;
}

static void add(json_t *all, const char *kind, const char *name, const char *expr, const char *ref)
{
    json_t *q = json_pack("{s:s, s:s, s:s}", "kind", kind, "name", name ? name : "", "expr",
                          expr ? expr : "");
    if (ref)
        json_object_set_new(q, "ref", json_string(ref));
    json_array_append_new(all, q);
}

json_t *af_test_monitoring_queries(void)
{
    json_t *rules = af_test_load_doc(AF_TEST_RULES), *dash = af_test_load_doc(AF_TEST_DASHBOARD);
    json_t *all = json_array(), *g, *r, *p, *t;
    size_t i, j;

    json_array_foreach(json_object_get(rules, "groups"), i, g)
        json_array_foreach(json_object_get(g, "rules"), j, r) {
            const char *alert = json_string_value(json_object_get(r, "alert"));
            const char *rec = json_string_value(json_object_get(r, "record"));
            add(all, alert ? "alert" : "record", alert ? alert : rec,
                json_string_value(json_object_get(r, "expr")), NULL);
        }
    json_array_foreach(json_object_get(dash, "panels"), i, p)
        json_array_foreach(json_object_get(p, "targets"), j, t)
            add(all, "panel", json_string_value(json_object_get(p, "title")),
                json_string_value(json_object_get(t, "expr")),
                json_string_value(json_object_get(t, "refId")));
    json_decref(rules);
    json_decref(dash);
    return all;
}

static bool ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == ':';
}

json_t *af_test_metric_names(const char *expr)
{
    json_t *names = json_array();
    const char *p = expr;
    bool in_braces = false;

    while (*p) {
        if (*p == '"') {   /* a label value */
            for (p++; *p && *p != '"'; p++)
                if (*p == '\\' && p[1])
                    p++;
            p += *p == '"';
            continue;
        }
        if (*p == '{' || *p == '}') {
            in_braces = *p == '{';
            p++;
            continue;
        }
        if (!in_braces && ident_char(*p) && (p == expr || !ident_char(p[-1]))) {
            const char *s = p;
            while (ident_char(*p))
                p++;
            size_t n = (size_t)(p - s);
            bool metric = (n > 9 && !strncmp(s, "accelfit_", 9)) ||
                          (n > 10 && !strncmp(s, "apiserver_", 10)) ||
                          (n == 2 && !strncmp(s, "up", 2) && *p == '{');
            if (metric) {
                char *name = af_xstrndup(s, n);
                json_t *v;
                size_t i;
                bool seen = false;
                json_array_foreach(names, i, v)
                    seen = seen || !strcmp(json_string_value(v), name);
                if (!seen)
                    json_array_append_new(names, json_string(name));
                af_free(name);
            }
            continue;
        }
        p++;
    }
    return names;
}
