/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers over libyaml's document API for the catalog and policy loaders:
 * loading one document with the parser's own diagnostics, typed scalar
 * readers, and strict key checks. Every failure names the file, line and
 * column of the node at fault, because a policy is written by hand and a
 * message without a position sends people hunting.
 */
#include "config/yamlnode.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/model.h"
#include "accelfit/banned.h"

void af__yalias_init(struct af__yalias *a, const yaml_document_t *doc, const char *file,
                     struct af_error *err)
{
    memset(a, 0, sizeof(*a));
    a->doc = doc;
    a->file = file;
    a->err = err;
    a->home = af_xcalloc((size_t)(doc->nodes.top - doc->nodes.start) + 1, sizeof(*a->home));
}

void af__yalias_release(struct af__yalias *a)
{
    af_free(a->home);
    a->home = NULL;
}

int af__yalias_follow(struct af__yalias *a, const yaml_node_t *n, const void *slot, bool *copy)
{
    size_t i = (size_t)(n - a->doc->nodes.start);
    int line = (int)n->start_mark.line + 1, column = (int)n->start_mark.column + 1;

    if (!a->home[i]) {
        a->home[i] = slot;
    } else if (a->home[i] != slot) {
        *copy = true;
        if (++a->aliases > AF__YAML_MAX_ALIAS_EXPANSIONS)
            return af_error_set(a->err, AF_ETOOBIG, a->file, line, column,
                                "more than %d alias expansions, the limit (it stops "
                                "\"billion laughs\" documents); this anchor was being expanded",
                                AF__YAML_MAX_ALIAS_EXPANSIONS);
    }
    if (*copy && ++a->copies > AF__YAML_MAX_ALIAS_NODES)
        return af_error_set(a->err, AF_ETOOBIG, a->file, line, column,
                            "aliases copy more than %d nodes, the limit (it stops \"billion "
                            "laughs\" documents); this node was being copied",
                            AF__YAML_MAX_ALIAS_NODES);
    return 0;
}

int af__yalias_too_deep(struct af__yalias *a, const yaml_node_t *n)
{
    return af_error_set(a->err, AF_ETOOBIG, a->file, (int)n->start_mark.line + 1,
                        (int)n->start_mark.column + 1,
                        "YAML nested deeper than %d levels (or an alias refers to itself)",
                        AF__YAML_MAX_DEPTH);
}

/* Visits what a loader could walk from `n`, as af__yalias counts it. */
static int walk(struct af__yalias *a, yaml_document_t *doc, const yaml_node_t *n,
                const void *slot, bool copy, int depth)
{
    int rc = af__yalias_follow(a, n, slot, &copy);

    if (!rc && depth > AF__YAML_MAX_DEPTH)
        rc = af__yalias_too_deep(a, n);
    if (rc)
        return rc;
    if (n->type == YAML_SEQUENCE_NODE) {
        for (yaml_node_item_t *it = n->data.sequence.items.start;
             !rc && it < n->data.sequence.items.top; it++)
            rc = walk(a, doc, yaml_document_get_node(doc, *it), it, copy, depth + 1);
    } else if (n->type == YAML_MAPPING_NODE) {
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
             !rc && p < n->data.mapping.pairs.top; p++) {
            rc = walk(a, doc, yaml_document_get_node(doc, p->key), &p->key, copy, depth + 1);
            if (!rc)
                rc = walk(a, doc, yaml_document_get_node(doc, p->value), &p->value, copy,
                          depth + 1);
        }
    }
    return rc;
}

/* The next document of `parser` into *d: 0 (d->loaded false at the end of the stream),
 * or an error as af__ydoc_load gives it. */
static int load_next(yaml_parser_t *parser, struct af__ydoc *d, const char *file,
                     struct af_error *err)
{
    static const char root_slot;   /* the slot that leads to the root */
    struct af__yalias a;
    yaml_node_t *root;
    int rc = 0;

    memset(d, 0, sizeof(*d));
    d->file = file;
    d->err = err;
    if (!yaml_parser_load(parser, &d->doc)) {
        const char *problem = parser->problem ? parser->problem : "malformed YAML";
        if (parser->context)
            return af_error_set(err, AF_EPARSE, file, (int)parser->problem_mark.line + 1,
                                (int)parser->problem_mark.column + 1, "malformed YAML: %s (%s)",
                                problem, parser->context);
        return af_error_set(err, AF_EPARSE, file, (int)parser->problem_mark.line + 1,
                            (int)parser->problem_mark.column + 1, "malformed YAML: %s", problem);
    }
    d->loaded = true;
    root = yaml_document_get_root_node(&d->doc);
    if (root) {
        af__yalias_init(&a, &d->doc, file, err);
        rc = walk(&a, &d->doc, root, &root_slot, false, 0);
        af__yalias_release(&a);
        if (rc)
            af__ydoc_release(d);
    }
    return rc;
}

int af__ydoc_load(struct af__ydoc *d, const char *file, const char *yaml, size_t len,
                  struct af_error *err)
{
    yaml_parser_t parser;
    int rc;

    memset(d, 0, sizeof(*d));
    if (!yaml_parser_initialize(&parser))
        return af_error_set(err, AF_EPARSE, file, 0, 0, "cannot initialize the YAML parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    rc = load_next(&parser, d, file, err);
    yaml_parser_delete(&parser);
    return rc;
}

int af__ydoc_each(const char *file, const char *yaml, size_t len, struct af_error *err,
                  int (*cb)(void *ud, struct af__ydoc *d), void *ud)
{
    yaml_parser_t parser;
    struct af__ydoc d;
    int rc = 0;

    if (!yaml_parser_initialize(&parser))
        return af_error_set(err, AF_EPARSE, file, 0, 0, "cannot initialize the YAML parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)yaml, len);
    for (;;) {
        rc = load_next(&parser, &d, file, err);
        if (rc)
            break;
        if (!af__ydoc_root(&d)) {   /* the end of the stream */
            af__ydoc_release(&d);
            break;
        }
        rc = cb(ud, &d);
        af__ydoc_release(&d);
        if (rc)
            break;
    }
    yaml_parser_delete(&parser);
    return rc;
}

void af__ydoc_release(struct af__ydoc *d)
{
    if (d->loaded)
        yaml_document_delete(&d->doc);
    d->loaded = false;
}

yaml_node_t *af__ydoc_root(struct af__ydoc *d)
{
    return d->loaded ? yaml_document_get_root_node(&d->doc) : NULL;
}

yaml_node_t *af__ydoc_node(struct af__ydoc *d, int id)
{
    return d->loaded ? yaml_document_get_node(&d->doc, id) : NULL;
}

int af__ydoc_err(struct af__ydoc *d, const yaml_node_t *n, int code, const char *fmt, ...)
{
    char text[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    if (!n)
        return af_error_set(d->err, code, d->file, 0, 0, "%s", text);
    return af_error_set(d->err, code, d->file, (int)n->start_mark.line + 1,
                        (int)n->start_mark.column + 1, "%s", text);
}

bool af__ynode_is_quoted(const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE)
        return false;
    /* libyaml tags every untagged scalar !!str, so only the style tells. */
    return n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE &&
           n->data.scalar.style != YAML_ANY_SCALAR_STYLE;
}

bool af__ynode_is_null(const yaml_node_t *n)
{
    const char *s;

    if (!n || n->type != YAML_SCALAR_NODE || af__ynode_is_quoted(n))
        return false;
    s = (const char *)n->data.scalar.value;
    return !*s || !strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL");
}

const char *af__ynode_str(const yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE)
        return NULL;
    return (const char *)n->data.scalar.value;
}

static const char *kind_name(const yaml_node_t *n)
{
    if (!n)
        return "nothing";
    switch (n->type) {
    case YAML_MAPPING_NODE:
        return "a mapping";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_SCALAR_NODE:
        return af__ynode_is_null(n) ? "null" : "a scalar";
    default:
        return "nothing";
    }
}

int af__ynode_expect(struct af__ydoc *d, const yaml_node_t *n, yaml_node_type_t type,
                     const char *what)
{
    const char *want = type == YAML_MAPPING_NODE    ? "a mapping"
                       : type == YAML_SEQUENCE_NODE ? "a list"
                                                    : "a scalar";
    if (n && n->type == type)
        return 0;
    return af__ydoc_err(d, n, AF_ETYPE, "'%s' must be %s, not %s", what, want, kind_name(n));
}

int af__ynode_string(struct af__ydoc *d, const yaml_node_t *n, const char *what, const char **out)
{
    if (!n || n->type != YAML_SCALAR_NODE || af__ynode_is_null(n))
        return af__ydoc_err(d, n, AF_ETYPE, "'%s' must be a string, not %s", what, kind_name(n));
    *out = (const char *)n->data.scalar.value;
    return 0;
}

int af__ynode_double(struct af__ydoc *d, const yaml_node_t *n, const char *what, double min,
                     double max, double *out)
{
    const char *s = af__ynode_str(n);
    char *end;
    double v;

    if (!s || af__ynode_is_quoted(n) || af__ynode_is_null(n))
        return af__ydoc_err(d, n, AF_ETYPE, "'%s' must be a number, not %s", what,
                            s && af__ynode_is_quoted(n) ? "a quoted string" : kind_name(n));
    errno = 0;
    v = strtod(s, &end);
    if (end == s || *end || isnan(v) || (isinf(v) && errno != ERANGE))
        return af__ydoc_err(d, n, AF_ETYPE, "'%s' must be a number, not '%s'", what, s);
    if (errno == ERANGE && isfinite(v))
        /* a number, only closer to 0 than a double can hold (1e-400) */
        return af__ydoc_err(d, n, AF_ERANGE,
                            "'%s' is out of range: '%s' is too close to 0 to be held; write 0 "
                            "or a number of at least 1e-300 in size",
                            what, s);
    /* outside [min, max], or too large for a double (1e400, which strtod makes inf) */
    if (!(v >= min && v <= max))
        return af__ydoc_err(d, n, AF_ERANGE,
                            "'%s' is out of range: it must be between %.15g and %.15g, not '%s'",
                            what, min, max, s);
    *out = v;
    return 0;
}

int af__ynode_range(struct af__ydoc *d, const yaml_node_t *n, const char *what, double lo,
                    bool lo_open, double hi, bool hi_open, double *out)
{
    double v = 0;
    int rc = af__ynode_double(d, n, what, -INFINITY, INFINITY, &v);   /* 1e-400: its message */

    if (rc)
        return rc;
    if ((lo_open ? v > lo : v >= lo) && (hi_open ? v < hi : v <= hi)) {
        *out = v;
        return 0;
    }
    if (!lo_open && !hi_open)
        return af__ydoc_err(d, n, AF_ERANGE, "'%s' must be between %.15g and %.15g, not '%s'",
                            what, lo, hi, af__ynode_str(n));
    return af__ydoc_err(d, n, AF_ERANGE, "'%s' must be %s %.15g and %s %.15g, not '%s'", what,
                        lo_open ? "greater than" : "at least", lo,
                        hi_open ? "less than" : "at most", hi, af__ynode_str(n));
}

int af__ynode_int(struct af__ydoc *d, const yaml_node_t *n, const char *what, long min, long max,
                  int *out)
{
    const char *s = af__ynode_str(n);
    char *end;
    long v;

    if (!s || af__ynode_is_quoted(n) || af__ynode_is_null(n))
        return af__ydoc_err(d, n, AF_ETYPE, "'%s' must be an integer, not %s", what,
                            s && af__ynode_is_quoted(n) ? "a quoted string" : kind_name(n));
    errno = 0;
    v = strtol(s, &end, 10);
    if (end == s || *end || errno == ERANGE)
        return af__ydoc_err(d, n, AF_ETYPE, "'%s' must be an integer, not '%s'", what, s);
    if (v < min || v > max)
        return af__ydoc_err(d, n, AF_EINVAL, "'%s' must be between %ld and %ld, not %ld", what, min,
                            max, v);
    *out = (int)v;
    return 0;
}

int af__ynode_bool_quiet(const yaml_node_t *n, bool *out)
{
    const char *s = af__ynode_str(n);

    if (s && !af__ynode_is_quoted(n)) {
        if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE")) {
            *out = true;
            return 0;
        }
        if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "FALSE")) {
            *out = false;
            return 0;
        }
    }
    return AF_ETYPE;
}

int af__ynode_bool(struct af__ydoc *d, const yaml_node_t *n, const char *what, bool *out)
{
    const char *s = af__ynode_str(n);

    if (af__ynode_bool_quiet(n, out) == 0)
        return 0;
    if (s)
        return af__ydoc_err(d, n, AF_ETYPE, "'%s' must be true or false, not '%s'", what, s);
    return af__ydoc_err(d, n, AF_ETYPE, "'%s' must be true or false, not %s", what, kind_name(n));
}

/* FNV-1a: a policy is written by its operator, not by an attacker, so a
 * fixed, simple hash is enough to keep probe sequences short. */
static size_t str_hash(const char *s)
{
    uint64_t h = af_fnv64(AF_FNV64_INIT, s, strlen(s));

    return (size_t)(h ^ (h >> 32));
}

void af__strset_init(struct af__strset *s, size_t expected)
{
    size_t cap = 16;

    while (cap / 2 < expected)
        cap *= 2;
    s->keys = af_xcalloc(cap, sizeof(s->keys[0]));
    s->vals = af_xcalloc(cap, sizeof(s->vals[0]));
    s->mask = cap - 1;
    s->n = 0;
}

void af__strset_release(struct af__strset *s)
{
    af_free(s->keys);
    af_free(s->vals);
    memset(s, 0, sizeof(*s));
}

/* Slot of `key`, or of the empty slot where it would go. */
static size_t strset_slot(const struct af__strset *s, const char *key)
{
    size_t i = str_hash(key) & s->mask;

    while (s->keys[i] && strcmp(s->keys[i], key))
        i = (i + 1) & s->mask;
    return i;
}

static void strset_grow(struct af__strset *s)
{
    struct af__strset bigger;
    size_t old_cap = s->mask + 1;

    af__strset_init(&bigger, old_cap);   /* twice the slots: half full after the move */
    for (size_t i = 0; i < old_cap; i++) {
        if (s->keys[i]) {
            size_t j = strset_slot(&bigger, s->keys[i]);
            bigger.keys[j] = s->keys[i];
            bigger.vals[j] = s->vals[i];
            bigger.n++;
        }
    }
    af__strset_release(s);
    *s = bigger;
}

bool af__strset_add(struct af__strset *s, const char *key, size_t val, size_t *prev)
{
    size_t i = strset_slot(s, key);

    if (s->keys[i]) {
        if (prev)
            *prev = s->vals[i];
        return false;
    }
    if ((s->n + 1) * 2 > s->mask + 1) {
        strset_grow(s);
        i = strset_slot(s, key);
    }
    s->keys[i] = key;
    s->vals[i] = val;
    s->n++;
    return true;
}

bool af__strset_find(const struct af__strset *s, const char *key, size_t *val)
{
    size_t i = strset_slot(s, key);

    if (!s->keys[i])
        return false;
    *val = s->vals[i];
    return true;
}

/* Mappings this small are checked pair by pair, without a table. */
#define DUPS_SMALL 8

int af__ymap_check_dups(struct af__ydoc *d, const yaml_node_t *map)
{
    const yaml_node_pair_t *start = map->data.mapping.pairs.start;
    const yaml_node_pair_t *top = map->data.mapping.pairs.top;
    const yaml_node_pair_t *a, *b;
    struct af__strset seen;
    int rc = 0;

    if (top - start <= DUPS_SMALL) {
        for (a = start; a < top; a++) {
            const yaml_node_t *ka = af__ydoc_node(d, a->key);
            const char *sa = af__ynode_str(ka);
            if (!sa)
                return af__ydoc_err(d, ka, AF_ETYPE, "mapping keys must be scalars");
            for (b = start; b < a; b++)
                if (!strcmp(sa, af__ynode_str(af__ydoc_node(d, b->key))))
                    return af__ydoc_err(d, ka, AF_EINVAL, "duplicate key '%s'", sa);
        }
        return 0;
    }
    af__strset_init(&seen, (size_t)(top - start));
    for (a = start; a < top; a++) {
        const yaml_node_t *ka = af__ydoc_node(d, a->key);
        const char *sa = af__ynode_str(ka);
        if (!sa) {
            rc = af__ydoc_err(d, ka, AF_ETYPE, "mapping keys must be scalars");
            break;
        }
        if (!af__strset_add(&seen, sa, 0, NULL)) {
            rc = af__ydoc_err(d, ka, AF_EINVAL, "duplicate key '%s'", sa);
            break;
        }
    }
    af__strset_release(&seen);
    return rc;
}

int af__ymap_check_keys(struct af__ydoc *d, const yaml_node_t *map, const char *where,
                        const char *const *known)
{
    const yaml_node_pair_t *p;
    int rc = af__ymap_check_dups(d, map);

    if (rc)
        return rc;
    for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const yaml_node_t *k = af__ydoc_node(d, p->key);
        const char *s = af__ynode_str(k);
        bool ok = false;
        for (size_t i = 0; known[i]; i++)
            if (!strcmp(s, known[i]))
                ok = true;
        if (!ok) {
            char list[256] = "";
            size_t used = 0;
            for (size_t i = 0; known[i] && used < sizeof(list); i++)
                used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%s", i ? ", " : "",
                                         known[i]);
            return af__ydoc_err(d, k, AF_EINVAL, "unknown key '%s' in %s (known: %s)", s, where,
                                list);
        }
    }
    return 0;
}

int af__ymap_expect(struct af__ydoc *d, const yaml_node_t *n, const char *what,
                    const char *const *known)
{
    int rc = af__ynode_expect(d, n, YAML_MAPPING_NODE, what);

    if (!rc)
        rc = af__ymap_check_keys(d, n, what, known);
    return rc;
}

size_t af__yseq_len(const yaml_node_t *seq)
{
    return (size_t)(seq->data.sequence.items.top - seq->data.sequence.items.start);
}

int af__ynode_classes(struct af__ydoc *d, const yaml_node_t *v, const char *what,
                      const char *holder, const char *name, bool one_ok, uint32_t other,
                      uint32_t *out)
{
    bool seq = v && v->type == YAML_SEQUENCE_NODE;
    size_t n = seq ? af__yseq_len(v) : 1;
    uint32_t mask = 0;

    if (!seq && !(one_ok && v && v->type == YAML_SCALAR_NODE))
        return af__ynode_expect(d, v, YAML_SEQUENCE_NODE, what);
    if (!n)
        return af__ydoc_err(d, v, AF_EINVAL, "'%s' of %s '%s' must name at least one class",
                            what, holder, name);
    for (size_t i = 0; i < n; i++) {
        const yaml_node_t *e = seq ? af__ydoc_node(d, v->data.sequence.items.start[i]) : v;
        const char *s = NULL;
        enum af_class c;
        int rc = af__ynode_string(d, e, what, &s);
        if (rc)
            return rc;
        c = af_class_parse(s);
        if (c == AF_CLASS_UNKNOWN)
            return af__ydoc_err(d, e, AF_EINVAL, "unknown class '%s' in %s (known: %s)", s, what,
                                af_class_names_list());
        if (mask & (1u << c))
            return af__ydoc_err(d, e, AF_EINVAL, "class '%s' appears twice in %s of %s '%s'", s,
                                what, holder, name);
        if (other & (1u << c))
            return af__ydoc_err(d, e, AF_EINVAL,
                                "class '%s' is both a source and a target of %s '%s': the two "
                                "sides must not overlap (a unit on it would count on both)",
                                s, holder, name);
        mask |= 1u << c;
    }
    *out = mask;
    return 0;
}

yaml_node_t *af__ymap_get(struct af__ydoc *d, const yaml_node_t *map, const char *key)
{
    const yaml_node_pair_t *p;

    if (!map || map->type != YAML_MAPPING_NODE)
        return NULL;
    for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        const char *s = af__ynode_str(af__ydoc_node(d, p->key));
        if (s && !strcmp(s, key))
            return af__ydoc_node(d, p->value);
    }
    return NULL;
}
