/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A pod's nodeName, nodeSelector and required node affinity against a node's name and
 * labels, with kube-scheduler's semantics (NodeAffinity and NodeName plugins): the selector's
 * pairs must all match; of the required terms any one must, each term the AND of its
 * requirements; In, NotIn, Exists, DoesNotExist, Gt and Lt (integers) on labels, In and
 * NotIn on the field metadata.name. Pure.
 */
#include "accelfit/placement.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/util.h"
#include "accelfit/banned.h"

static bool parse_long(const char *s, long long *out)
{
    char *end;

    if (!s || !*s)
        return false;
    errno = 0;
    *out = strtoll(s, &end, 10);
    return !errno && !*end;
}

static bool expr_matches(const struct af_match_expr *e, const struct af_node_info *n)
{
    const char *have = e->field ? (strcmp(e->key, "metadata.name") ? NULL : n->name)
                                : af_node_label(n, e->key);
    long long a, b;

    switch (e->op) {
    case AF_MATCH_IN:
    case AF_MATCH_NOT_IN: {
        bool in = false;
        for (size_t i = 0; have && i < e->n_values && !in; i++)
            in = !strcmp(have, e->values[i]);
        return e->op == AF_MATCH_IN ? in : !in;
    }
    case AF_MATCH_EXISTS:
        return have != NULL;
    case AF_MATCH_DOES_NOT_EXIST:
        return have == NULL;
    case AF_MATCH_GT:
    case AF_MATCH_LT:
        if (e->n_values != 1 || !parse_long(have, &a) || !parse_long(e->values[0], &b))
            return false;
        return e->op == AF_MATCH_GT ? a > b : a < b;
    case AF_MATCH_UNKNOWN:
        break;
    }
    return false;
}

bool af_placement_constrains(const struct af_placement *p)
{
    return p && (p->node_name || p->n_selector || p->has_required);
}

bool af_placement_admits(const struct af_placement *p, const struct af_node_info *n)
{
    bool any = false;

    if (!p)
        return true;
    if (p->node_name && strcmp(p->node_name, n->name ? n->name : ""))
        return false;
    for (size_t i = 0; i < p->n_selector; i++)
        if (!expr_matches(&p->selector[i], n))
            return false;
    if (!p->has_required)
        return true;
    for (size_t t = 0; t < p->n_terms && !any; t++) {
        const struct af_match_term *term = &p->terms[t];
        bool all = term->n_exprs > 0;
        for (size_t i = 0; i < term->n_exprs && all; i++)
            all = expr_matches(&term->exprs[i], n);
        any = all;
    }
    return any;
}

static const char *op_name(enum af_match_op op)
{
    static const char *const names[] = {"In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt",
                                        "?"};
    return names[op];
}

void af_placement_describe(const struct af_placement *p, char *out, size_t n)
{
    size_t at = 0;

#define PUT(...)                                                                           \
    do {                                                                                   \
        int w_ = snprintf(out + at, at < n ? n - at : 0, __VA_ARGS__);                     \
        if (w_ > 0)                                                                        \
            at += (size_t)w_;                                                              \
    } while (0)
    if (!n)
        return;
    out[0] = '\0';
    if (!af_placement_constrains(p)) {
        PUT("no node constraint");
        return;
    }
    if (p->node_name)
        PUT("nodeName %s", p->node_name);
    if (p->n_selector) {
        PUT("%snodeSelector ", at ? "; " : "");
        for (size_t i = 0; i < p->n_selector; i++)
            PUT("%s%s=%s", i ? "," : "", p->selector[i].key,
                p->selector[i].n_values ? p->selector[i].values[0] : "");
    }
    if (p->has_required) {
        PUT("%srequired node affinity ", at ? "; " : "");
        for (size_t t = 0; t < p->n_terms; t++) {
            const struct af_match_term *term = &p->terms[t];
            PUT("%s", t ? " or " : "");
            for (size_t i = 0; i < term->n_exprs; i++) {
                const struct af_match_expr *e = &term->exprs[i];
                PUT("%s%s %s", i ? " and " : "", e->key, op_name(e->op));
                for (size_t v = 0; v < e->n_values; v++)
                    PUT("%s%s", v ? "," : " ", e->values[v]);
            }
            if (!term->n_exprs)
                PUT("(an empty term)");
        }
        if (!p->n_terms)
            PUT("(no terms)");
    }
    if (at >= n && n > 4)
        memcpy(out + n - 4, "...", 4);
#undef PUT
}

static void expr_release(struct af_match_expr *e)
{
    af_free(e->key);
    for (size_t i = 0; i < e->n_values; i++)
        af_free(e->values[i]);
    af_free(e->values);
}

static void expr_copy(struct af_match_expr *to, const struct af_match_expr *from)
{
    *to = *from;
    to->key = af_xstrdup(from->key);
    to->values = from->n_values ? af_xcalloc(from->n_values, sizeof(*to->values)) : NULL;
    for (size_t i = 0; i < from->n_values; i++)
        to->values[i] = af_xstrdup(from->values[i]);
}

struct af_placement *af_placement_copy(const struct af_placement *p)
{
    struct af_placement *c;

    if (!p)
        return NULL;
    c = af_xcalloc(1, sizeof(*c));
    *c = *p;
    c->node_name = af_xstrdup(p->node_name);
    c->selector = p->n_selector ? af_xcalloc(p->n_selector, sizeof(*c->selector)) : NULL;
    for (size_t i = 0; i < p->n_selector; i++)
        expr_copy(&c->selector[i], &p->selector[i]);
    c->terms = p->n_terms ? af_xcalloc(p->n_terms, sizeof(*c->terms)) : NULL;
    for (size_t t = 0; t < p->n_terms; t++) {
        c->terms[t].n_exprs = p->terms[t].n_exprs;
        c->terms[t].exprs = p->terms[t].n_exprs
                                ? af_xcalloc(p->terms[t].n_exprs, sizeof(*c->terms[t].exprs))
                                : NULL;
        for (size_t i = 0; i < p->terms[t].n_exprs; i++)
            expr_copy(&c->terms[t].exprs[i], &p->terms[t].exprs[i]);
    }
    return c;
}

void af_placement_free(struct af_placement *p)
{
    if (!p)
        return;
    af_free(p->node_name);
    for (size_t i = 0; i < p->n_selector; i++)
        expr_release(&p->selector[i]);
    af_free(p->selector);
    for (size_t t = 0; t < p->n_terms; t++) {
        for (size_t i = 0; i < p->terms[t].n_exprs; i++)
            expr_release(&p->terms[t].exprs[i]);
        af_free(p->terms[t].exprs);
    }
    af_free(p->terms);
    af_free(p);
}
