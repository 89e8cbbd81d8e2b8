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
#include "config/yamlnode.h"
#include "accelfit/banned.h"

/*
 * Aliases are capped as in every YAML reader of this module (config/yamlnode.h), and
 * so is the JSON written, whatever cap the caller's buffer has: each node written
 * because of an alias becomes a json_t later, some 100 bytes apiece. Without aliases
 * the JSON is at most about 5 times the YAML ({a, b} becomes {"a":null,"b":null}), so
 * only aliases can reach that limit.
 */
#define MAX_OUTPUT_FLOOR ((size_t)64 << 20)   /* 64 MiB, plus: */
#define MAX_OUTPUT_PER_INPUT_BYTE 8

struct conv {
    yaml_document_t *doc;
    const char *name;
    struct af_error *err;
    struct af_buf *out;
    struct af__yalias alias;
};

/* The document-wide output limit for `len` bytes of YAML, within the caller's `cap`. */
static size_t output_limit(size_t len, size_t cap)
{
    size_t limit = SIZE_MAX;

    if (len <= (SIZE_MAX - MAX_OUTPUT_FLOOR) / MAX_OUTPUT_PER_INPUT_BYTE)
        limit = MAX_OUTPUT_FLOOR + MAX_OUTPUT_PER_INPUT_BYTE * len;
    return cap && cap < limit ? cap : limit;
}

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return false;
    return true;
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
    size_t run = 0;   /* start of the bytes not yet written, which need no escape */
    int rc = af_buf_add(b, "\"", 1);

    for (size_t i = 0; !rc && i < len; i++) {
        unsigned char c = s[i];
        char esc[6] = {'\\', (char)c};
        size_t n = 2;

        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        if (c == '\n')
            esc[1] = 'n';
        else if (c == '\t')
            esc[1] = 't';
        else if (c == '\r')
            esc[1] = 'r';
        else if (c < 0x20) {
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        /* A run at a time: aliases can make this write tens of MiB. */
        rc = af_buf_add(b, s + run, i - run);
        if (!rc)
            rc = af_buf_add(b, esc, n);
        run = i + 1;
    }
    if (!rc)
        rc = af_buf_add(b, s + run, len - run);
    if (!rc)
        rc = af_buf_add(b, "\"", 1);
    return rc;
}

/*
 * A scalar spelled as a JSON number, in a form jansson reads back (the cluster decoder
 * loads this JSON): an integer past int64 becomes a float, as Kubernetes' YAML reader
 * (go-yaml) makes it, and a number past double stays a string, as go-yaml leaves it.
 * Otherwise one such number would fail the whole file at a position in JSON nobody wrote.
 */
static int put_af_is_json_number(struct conv *cv, const yaml_node_t *n, const char *s)
{
    bool integer = !strpbrk(s, ".eE");
    double v;

    errno = 0;
    if (integer) {
        (void)strtoll(s, NULL, 10);
        if (errno != ERANGE)
            return af_buf_puts(cv->out, s);   /* fits json_int_t */
        errno = 0;
    }
    v = strtod(s, NULL);
    if (!isfinite(v))
        return put_string(cv->out, n->data.scalar.value, n->data.scalar.length);
    return integer ? put_double(cv->out, v) : af_buf_puts(cv->out, s);
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
    if (af_is_json_number(s))
        return put_af_is_json_number(cv, n, s);
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

/* `n`, reached through `slot`; `copy`: an ancestor was reached through an alias. */
static int put_node(struct conv *cv, const yaml_node_t *n, const void *slot, bool copy,
                    int depth)
{
    int rc = af__yalias_follow(&cv->alias, n, slot, &copy);

    if (rc)
        return rc;
    if (depth > AF__YAML_MAX_DEPTH)
        return af__yalias_too_deep(&cv->alias, n);
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
                rc = put_node(cv, yaml_document_get_node(cv->doc, *it), it, copy, depth + 1);
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
            {
                bool key_copy = copy;
                rc = af__yalias_follow(&cv->alias, k, &p->key, &key_copy);
            }
            if (!rc)
                rc = put_string(cv->out, k->data.scalar.value, k->data.scalar.length);
            if (!rc)
                rc = af_buf_add(cv->out, ":", 1);
            if (!rc)
                rc = put_node(cv, yaml_document_get_node(cv->doc, p->value), &p->value,
                              copy, depth + 1);
        }
        if (!rc)
            rc = af_buf_add(cv->out, "}", 1);
        break;
    default:
        rc = af_buf_puts(cv->out, "null");
        break;
    }
    if (rc == AF_ETOOBIG && cv->err && !cv->err->text[0])
        af_error_set(cv->err, rc, cv->name, (int)n->start_mark.line + 1,
                     (int)n->start_mark.column + 1,
                     "JSON output would exceed %zu bytes, the limit (the caller's, or %zu MiB "
                     "plus %d bytes per byte of YAML, which only aliases can reach)",
                     cv->out->cap, MAX_OUTPUT_FLOOR >> 20, MAX_OUTPUT_PER_INPUT_BYTE);
    return rc;
}

int af_yaml_to_json(const char *name, const char *yaml, size_t len, struct af_buf *out,
                    struct af_error *err)
{
    struct af_buf items = AF_BUF_INIT(output_limit(len, out->cap));
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
        static const char root_slot;   /* the slot that leads to each document's root */
        struct conv cv = {&doc, name, err, &items, {0}};
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
        af__yalias_init(&cv.alias, &doc, name, err);
        if (n_docs)
            rc = af_buf_add(&items, ",", 1);
        if (!rc)
            rc = put_node(&cv, root, &root_slot, false, 0);
        af__yalias_release(&cv.alias);
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

/* ---- locating a path in the text ---------------------------------------------------------- */

int af_yaml_locate(const char *yaml, size_t len, const char *path, int *line, int *column)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    yaml_node_t *n, *at = NULL;
    const char *p = path;
    int rc = AF_ENOENT;

    if (!yaml || !path || !yaml_parser_initialize(&parser))
        return AF_EINVAL;
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    if (!yaml_parser_load(&parser, &doc)) {
        yaml_parser_delete(&parser);
        return AF_EPARSE;
    }
    n = yaml_document_get_root_node(&doc);
    while (n && *p) {
        if (*p == '[') {   /* [index] of a sequence */
            char *end;
            long i = strtol(p + 1, &end, 10);
            if (*end != ']' || n->type != YAML_SEQUENCE_NODE || i < 0 ||
                i >= n->data.sequence.items.top - n->data.sequence.items.start) {
                n = NULL;
                break;
            }
            n = yaml_document_get_node(&doc, n->data.sequence.items.start[i]);
            at = n;
            p = end + 1;
        } else {           /* key of a mapping, up to '.', '[' or the end */
            size_t k = strcspn(p, ".[");
            yaml_node_pair_t *pair;
            yaml_node_t *found = NULL;
            if (n->type != YAML_MAPPING_NODE) {
                n = NULL;
                break;
            }
            for (pair = n->data.mapping.pairs.start; pair < n->data.mapping.pairs.top; pair++) {
                yaml_node_t *key = yaml_document_get_node(&doc, pair->key);
                if (key && key->type == YAML_SCALAR_NODE && key->data.scalar.length == k &&
                    !memcmp(key->data.scalar.value, p, k)) {
                    at = key;   /* the key itself: where a person reads the entry */
                    found = yaml_document_get_node(&doc, pair->value);
                    break;
                }
            }
            n = found;
            p += k;
        }
        if (*p == '.')
            p++;
    }
    if (n && at && !*p) {
        *line = (int)at->start_mark.line + 1;
        *column = (int)at->start_mark.column + 1;
        rc = 0;
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return rc;
}
