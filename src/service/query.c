/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The query string of every route, read one way: "a=1&b=2" as a browser or curl sends it
 * (application/x-www-form-urlencoded: '+' is a space, %XX a byte). Empty pieces are
 * skipped, as every HTTP stack does ("a=1&&b=2", "&a=1", a bare "?"); a parameter given
 * twice, one the route does not take, a bad escape or too many parameters is an error that
 * names the parameter and the route, so a request is never answered for a question it did
 * not ask. Transport-free: the server hands in the query as sent, tests call it directly.
 */
#include "accelfit/service.h"

#include <stdio.h>
#include <string.h>
#include "accelfit/banned.h"

static int hexval(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Decodes one form-urlencoded component in place; false on a bad '%' (or an encoded NUL). */
static bool form_decode(char *s)
{
    char *out = s;

    for (; *s; s++) {
        if (*s == '+') {
            *out++ = ' ';
        } else if (*s == '%') {
            int hi = hexval(s[1]), lo = hi >= 0 ? hexval(s[2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                return false;
            *out++ = (char)(hi * 16 + lo);
            s += 2;
        } else {
            *out++ = *s;
        }
    }
    *out = '\0';
    return true;
}

/* Parameter names compare with '-' and '_' alike (model-params is model_params). */
static bool same_key(const char *a, const char *b)
{
    for (; *a && *b; a++, b++) {
        char x = *a == '_' ? '-' : *a, y = *b == '_' ? '-' : *b;
        if (x != y)
            return false;
    }
    return *a == *b;
}

static void list_known(char *out, size_t n, const char *const *known)
{
    size_t used = 0;

    out[0] = '\0';
    for (size_t i = 0; known[i] && used < n; i++)
        used += (size_t)snprintf(out + used, n - used, "%s%s", i ? ", " : "", known[i]);
}

int af_query_parse(struct af_query *q, const char *raw, const char *route,
                   const char *const *known, char *err, size_t errlen)
{
    char *save = NULL, *piece;
    int rc = 0;

    memset(q, 0, sizeof(*q));
    q->store = af_xstrdup(raw ? raw : "");
    for (piece = strtok_r(q->store, "&", &save); piece; piece = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(piece, '=');
        struct af_query_param *p;

        if (eq)
            *eq = '\0';
        if (!form_decode(piece) || (eq && !form_decode(eq + 1))) {
            snprintf(err, errlen,
                     "%s: query parameter '%.60s' has a bad %% escape (write a byte as %%XX, "
                     "two hex digits, not %%00)",
                     route, piece);
            rc = AF_EINVAL;
            break;
        }
        if (!*piece) {
            snprintf(err, errlen, "%s: a query parameter has no name ('=%.60s')", route,
                     eq ? eq + 1 : "");
            rc = AF_EINVAL;
            break;
        }
        if (known) {
            size_t k = 0;
            while (known[k] && !same_key(known[k], piece))
                k++;
            if (!known[k]) {
                char names[300];
                if (known[0]) {
                    list_known(names, sizeof(names), known);
                    snprintf(err, errlen, "%s: unknown query parameter '%.60s' (known: %s)",
                             route, piece, names);
                } else {
                    snprintf(err, errlen, "%s: unknown query parameter '%.60s' (%s takes none)",
                             route, piece, route);
                }
                rc = AF_EINVAL;
                break;
            }
        }
        if (af_query_get(q, piece)) {
            snprintf(err, errlen,
                     "%s: query parameter '%.60s' is given twice; give it once", route, piece);
            rc = AF_EINVAL;
            break;
        }
        if (q->n == AF_QUERY_MAX_PARAMS) {
            snprintf(err, errlen, "%s: more than %d query parameters", route,
                     AF_QUERY_MAX_PARAMS);
            rc = AF_EINVAL;
            break;
        }
        p = &q->p[q->n++];
        p->key = piece;
        p->value = eq ? eq + 1 : "";
        p->bare = !eq;
    }
    if (rc)
        af_query_release(q);
    return rc;
}

const char *af_query_get(const struct af_query *q, const char *key)
{
    for (size_t i = 0; i < q->n; i++)
        if (same_key(q->p[i].key, key))
            return q->p[i].value;
    return NULL;
}

void af_query_release(struct af_query *q)
{
    af_free(q->store);
    memset(q, 0, sizeof(*q));
}
