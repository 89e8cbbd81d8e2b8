/* SPDX-License-Identifier: Apache-2.0 */
/*
 * YAML to JSON, so the rest of accelfit (which reads Kubernetes objects with
 * jansson) can take cluster files in the YAML that `kubectl get -o yaml`
 * prints. Plain scalars that spell a number, a boolean or null keep that type;
 * quoted scalars stay strings, as Kubernetes reads them ("4" is a string).
 * A stream of several documents becomes a `kind: List` with the documents as
 * items, the shape kubectl uses for several objects; an empty stream (nothing
 * but comments) is JSON null, as an empty YAML document reads.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "accelfit/config.h"

#define MAX_DEPTH 128

struct conv {
    yaml_document_t *doc;
    const char *name;
    struct af_error *err;
    struct af_buf *out;
};

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
}

/* A number exactly as JSON spells it: -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)? */
static bool json_number(const char *s)
{
    if (*s == '-')
        s++;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        while (*s >= '0' && *s <= '9')
            s++;
    else
        return false;
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return !*s;
}

/* A YAML 1.2 core-schema float or decimal int: [-+]?(.d+|d+(.d*)?)([eE][-+]?d+)? */
static bool yaml_number(const char *s)
{
    bool digits = false;

    if (*s == '-' || *s == '+')
        s++;
    while (*s >= '0' && *s <= '9') {
        s++;
        digits = true;
    }
    if (*s == '.') {
        s++;
        while (*s >= '0' && *s <= '9') {
            s++;
            digits = true;
        }
    }
    if (!digits)
        return false;
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (!all_digits(s))
            return false;
        return true;
    }
    return !*s;
}

/* Appends the shortest %g form of `v` that reads back the same. */
static int put_double(struct af_buf *b, double v)
{
    char tmp[40];

    for (int prec = 15; prec <= 17; prec++) {
        snprintf(tmp, sizeof(tmp), "%.*g", prec, v);
        if (strtod(tmp, NULL) == v)
            break;
    }
    return af_buf_puts(b, tmp);
}

static int put_string(struct af_buf *b, const unsigned char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    int rc = af_buf_add(b, "\"", 1);

    for (size_t i = 0; !rc && i < len; i++) {
        unsigned char c = s[i];
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            rc = af_buf_add(b, esc, 2);
        } else if (c == '\n') {
            rc = af_buf_add(b, "\\n", 2);
        } else if (c == '\t') {
            rc = af_buf_add(b, "\\t", 2);
        } else if (c == '\r') {
            rc = af_buf_add(b, "\\r", 2);
        } else if (c < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            rc = af_buf_add(b, esc, 6);
        } else {
            rc = af_buf_add(b, &c, 1);
        }
    }
    if (!rc)
        rc = af_buf_add(b, "\"", 1);
    return rc;
}

static int put_scalar(struct conv *cv, const yaml_node_t *n)
{
    const char *s = (const char *)n->data.scalar.value;
    size_t len = n->data.scalar.length;
    char *end;
    double v;

    if (n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE &&
        n->data.scalar.style != YAML_ANY_SCALAR_STYLE)
        return put_string(cv->out, n->data.scalar.value, len);
    if (strlen(s) != len)
        return put_string(cv->out, n->data.scalar.value, len);
    if (!*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL"))
        return af_buf_puts(cv->out, "null");
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"))
        return af_buf_puts(cv->out, "true");
    if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE"))
        return af_buf_puts(cv->out, "false");
    if (json_number(s))
        return af_buf_puts(cv->out, s);
    if (yaml_number(s)) {
        /* "+1", "1.", ".5", "1e3" without a mantissa dot: normalize for JSON.
         * Leading zeros ("0755") mean octal to some YAML readers and decimal
         * to others, so those stay strings rather than guess. */
        const char *digits = (*s == '+' || *s == '-') ? s + 1 : s;
        if (digits[0] == '0' && digits[1] >= '0' && digits[1] <= '9')
            return put_string(cv->out, n->data.scalar.value, len);
        errno = 0;
        v = strtod(s, &end);
        if (!*end && errno != ERANGE && isfinite(v))
            return put_double(cv->out, v);
    }
    return put_string(cv->out, n->data.scalar.value, len);
}

static int put_node(struct conv *cv, const yaml_node_t *n, int depth)
{
    int rc = 0;

    if (depth > MAX_DEPTH)
        return af_error_set(cv->err, AF_ETOOBIG, cv->name, (int)n->start_mark.line + 1,
                            (int)n->start_mark.column + 1,
                            "YAML nested deeper than %d levels (or an alias refers to itself)",
                            MAX_DEPTH);
    switch (n->type) {
    case YAML_SCALAR_NODE:
        rc = put_scalar(cv, n);
        break;
    case YAML_SEQUENCE_NODE:
        rc = af_buf_add(cv->out, "[", 1);
        for (yaml_node_item_t *it = n->data.sequence.items.start;
             !rc && it < n->data.sequence.items.top; it++) {
            if (it != n->data.sequence.items.start)
                rc = af_buf_add(cv->out, ",", 1);
            if (!rc)
                rc = put_node(cv, yaml_document_get_node(cv->doc, *it), depth + 1);
        }
        if (!rc)
            rc = af_buf_add(cv->out, "]", 1);
        break;
    case YAML_MAPPING_NODE:
        rc = af_buf_add(cv->out, "{", 1);
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
             !rc && p < n->data.mapping.pairs.top; p++) {
            const yaml_node_t *k = yaml_document_get_node(cv->doc, p->key);
            if (p != n->data.mapping.pairs.start)
                rc = af_buf_add(cv->out, ",", 1);
            if (rc)
                break;
            if (k->type != YAML_SCALAR_NODE)
                return af_error_set(cv->err, AF_EPARSE, cv->name, (int)k->start_mark.line + 1,
                                    (int)k->start_mark.column + 1,
                                    "mapping keys must be scalars to become JSON");
            rc = put_string(cv->out, k->data.scalar.value, k->data.scalar.length);
            if (!rc)
                rc = af_buf_add(cv->out, ":", 1);
            if (!rc)
                rc = put_node(cv, yaml_document_get_node(cv->doc, p->value), depth + 1);
        }
        if (!rc)
            rc = af_buf_add(cv->out, "}", 1);
        break;
    default:
        rc = af_buf_puts(cv->out, "null");
        break;
    }
    if (rc == AF_ETOOBIG && cv->err && !cv->err->text[0])
        af_error_set(cv->err, rc, cv->name, 0, 0, "JSON output exceeds %zu bytes", cv->out->cap);
    return rc;
}

int af_yaml_to_json(const char *name, const char *yaml, size_t len, struct af_buf *out,
                    struct af_error *err)
{
    struct af_buf items = AF_BUF_INIT(out->cap);
    yaml_parser_t parser;
    yaml_document_t doc;
    size_t n_docs = 0;
    int rc = 0;

    if (err)
        err->text[0] = '\0';
    if (!yaml_parser_initialize(&parser))
        return af_error_set(err, AF_EPARSE, name, 0, 0, "cannot initialize the YAML parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    for (;;) {
        struct conv cv = {&doc, name, err, &items};
        yaml_node_t *root;

        if (!yaml_parser_load(&parser, &doc)) {
            rc = af_error_set(err, AF_EPARSE, name, (int)parser.problem_mark.line + 1,
                              (int)parser.problem_mark.column + 1, "malformed YAML: %s%s%s%s",
                              parser.problem ? parser.problem : "syntax error",
                              parser.context ? " (" : "", parser.context ? parser.context : "",
                              parser.context ? ")" : "");
            goto out;
        }
        root = yaml_document_get_root_node(&doc);
        if (!root) {
            yaml_document_delete(&doc);
            break;
        }
        if (n_docs)
            rc = af_buf_add(&items, ",", 1);
        if (!rc)
            rc = put_node(&cv, root, 0);
        yaml_document_delete(&doc);
        if (rc)
            goto out;
        n_docs++;
    }
    if (!n_docs)
        rc = af_buf_puts(out, "null"); /* an empty stream is one empty (null) document */
    else if (n_docs == 1)
        rc = af_buf_add(out, items.buf, items.len);
    else
        rc = af_buf_printf(out, "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[%s]}",
                           items.buf);
    if (rc)
        af_error_set(err, rc, name, 0, 0, "JSON output exceeds %zu bytes", out->cap);
out:
    af_buf_release(&items);
    yaml_parser_delete(&parser);
    return rc;
}
