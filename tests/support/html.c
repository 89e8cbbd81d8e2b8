/* SPDX-License-Identifier: Apache-2.0 */
#include "support/html.h"

#include <check.h>
#include <stdbool.h>
#include <string.h>

#include "accelfit/util.h"

static const char *const void_tags[] = {"meta", "br", NULL};   /* HTML's; SVG's close with /> */

void af_test_html_well_formed(const char *html)
{
    const char *stack[64];
    int depth = 0;

    ck_assert_ptr_nonnull(strstr(html, "<!DOCTYPE html>"));
    ck_assert_ptr_null(strstr(html, "<script"));
    ck_assert_ptr_null(strstr(html, "http://"));
    ck_assert_ptr_null(strstr(html, "https://"));
    ck_assert_ptr_null(strstr(html, "src="));
    ck_assert_ptr_null(strstr(html, "href="));
    for (const char *p = strchr(html, '<'); p; p = strchr(p + 1, '<')) {
        const char *end = strchr(p, '>'), *name = p + 1;
        size_t n;
        bool closing = *name == '/', self = end && end[-1] == '/', is_void = false;
        ck_assert_ptr_nonnull(end);
        if (*name == '!')
            continue;
        if (closing)
            name++;
        n = strcspn(name, " >/");
        for (int v = 0; void_tags[v]; v++)
            is_void |= strlen(void_tags[v]) == n && !strncmp(void_tags[v], name, n);
        if (closing) {
            ck_assert_msg(depth > 0, "unexpected </%.*s>", (int)n, name);
            depth--;
            ck_assert_msg(!strncmp(stack[depth], name, n) && strcspn(stack[depth], " >/") == n,
                          "</%.*s> closes <%.*s>", (int)n, name,
                          (int)strcspn(stack[depth], " >/"), stack[depth]);
        } else if (!self && !is_void) {
            ck_assert_int_lt(depth, 64);
            stack[depth++] = name;
        }
    }
    ck_assert_int_eq(depth, 0);
}

/* The text between `from` and `to`, tags left out. */
static char *text_of(const char *from, const char *to)
{
    struct af_buf b = AF_BUF_INIT(0);
    bool in_tag = false;

    for (const char *p = from; p < to; p++) {
        if (*p == '<')
            in_tag = true;
        else if (*p == '>')
            in_tag = false;
        else if (!in_tag)
            ck_assert_int_eq(af_buf_add(&b, p, 1), 0);
    }
    return b.buf ? af_buf_detach(&b, NULL) : af_xstrdup("");
}

char *af_test_html_cell(const char *html, const char *table_id, const char *row, int col)
{
    char *open = af_xasprintf("<table id=\"%s\"", table_id);
    const char *t = strstr(html, open), *end, *tr;

    af_free(open);
    if (!t || !(end = strstr(t, "</table>")))
        return NULL;
    for (tr = strstr(t, "<tr"); tr && tr < end; tr = strstr(tr + 1, "<tr")) {
        const char *row_end = strstr(tr, "</tr>"), *c = tr, *th, *th_end;
        char *label;
        bool match;
        if (!row_end || !(th = strstr(tr, "<th")) || th > row_end || !(th_end = strstr(th, "</th>")))
            continue;
        label = text_of(strchr(th, '>') + 1, th_end);
        match = !strcmp(label, row);
        af_free(label);
        if (!match)
            continue;
        if (col == 0)
            return text_of(strchr(th, '>') + 1, th_end);
        c = th_end;
        for (int k = 0; k < col; k++) {
            c = strstr(c + 1, "<td");
            if (!c || c > row_end)
                return NULL;
        }
        return text_of(strchr(c, '>') + 1, strstr(c, "</td>"));
    }
    return NULL;
}
