/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Karpenter NodeOverlays as prices see them (accelfit/prices.h): parsing their price
 * fields, ordering them as Karpenter does, and matching their requirements against a
 * node's labels. Pure: no I/O, no clock, no locks.
 */
#include "accelfit/prices.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/model.h"
#include "accelfit/banned.h"

/* Digits with an optional fraction ("12", "0.5", ".5" when `lead_optional`); its value. */
static int decimal(const char *s, bool lead_optional, double *out)
{
    const char *p = s;
    int digits = 0, frac = 0;

    while (*p >= '0' && *p <= '9')
        p++, digits++;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9')
            p++, frac++;
        if (!frac)
            return -1;
    }
    if (*p || (!digits && !(lead_optional && frac)) || p - s > 24)
        return -1;
    *out = strtod(s, NULL);
    return 0;
}

int af_overlay_parse_price(const char *s, double *usd)
{
    double v;

    if (!s || decimal(s, false, &v) || v > AF_PRICE_MAX_USD_HR)
        return -1;
    *usd = v;
    return 0;
}

int af_overlay_parse_adjustment(const char *s, enum af_overlay_price *mode, double *value)
{
    char num[32];
    size_t n;
    double v;
    bool pct;

    if (!s || (s[0] != '+' && s[0] != '-'))
        return -1;
    n = strlen(s + 1);
    pct = n > 0 && s[n] == '%';
    if (pct)
        n--;
    if (n == 0 || n >= sizeof(num))
        return -1;
    memcpy(num, s + 1, n);
    num[n] = '\0';
    if (decimal(num, true, &v))
        return -1;
    /* Karpenter's pattern: a decrease is at most 100%; an increase has no bound. */
    if (pct && s[0] == '-' && v > 100)
        return -1;
    if (!pct && v > AF_PRICE_MAX_USD_HR)
        return -1;
    *mode = pct ? AF_OVERLAY_PCT : AF_OVERLAY_ADD;
    *value = s[0] == '-' ? -v : v;
    return 0;
}

/* Karpenter's order: higher weight first; of equal weights, the later name first. */
static int by_precedence(const void *a, const void *b)
{
    const struct af_overlay *x = a, *y = b;

    if (x->weight != y->weight)
        return x->weight > y->weight ? -1 : 1;
    return -strcmp(x->name ? x->name : "", y->name ? y->name : "");
}

struct af_overlays *af_overlays_new(struct af_overlay *v, size_t n)
{
    struct af_overlays *o = af_xcalloc(1, sizeof(*o));

    atomic_init(&o->refs, 1);
    o->v = v;
    o->n = n;
    if (n > 1)
        qsort(v, n, sizeof(*v), by_precedence);
    return o;
}

struct af_overlays *af_overlays_ref(struct af_overlays *o)
{
    if (o)
        atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
    return o;
}

void af_overlay_release(struct af_overlay *ov)
{
    for (size_t i = 0; i < ov->n_reqs; i++) {
        struct af_overlay_req *r = &ov->reqs[i];
        for (size_t k = 0; k < r->n_values; k++)
            af_free(r->values[k]);
        af_free(r->values);
        af_free(r->key);
    }
    af_free(ov->reqs);
    af_free(ov->name);
    memset(ov, 0, sizeof(*ov));
}

void af_overlays_unref(struct af_overlays *o)
{
    if (!o || atomic_fetch_sub_explicit(&o->refs, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < o->n; i++)
        af_overlay_release(&o->v[i]);
    af_free(o->v);
    af_free(o);
}

/* Gt/Lt/Gte/Lte compare integers, as Kubernetes node selectors do; a label that is not an
 * integer does not match. */
static bool compare(const char *label, const char *bound, enum af_overlay_op op)
{
    char *end;
    long long a, b;

    errno = 0;
    a = strtoll(label, &end, 10);
    if (errno || end == label || *end)
        return false;
    b = strtoll(bound, &end, 10);
    if (errno || end == bound || *end)
        return false;
    switch (op) {
    case AF_OVERLAY_GT: return a > b;
    case AF_OVERLAY_LT: return a < b;
    case AF_OVERLAY_GTE: return a >= b;
    default: return a <= b;
    }
}

static bool req_holds(const struct af_overlay_req *r, const char *packed)
{
    const char *v = af_packed_get(packed, r->key);
    bool in = false;

    switch (r->op) {
    case AF_OVERLAY_EXISTS:
        return v != NULL;
    case AF_OVERLAY_DOES_NOT_EXIST:
        return v == NULL;
    case AF_OVERLAY_IN:
    case AF_OVERLAY_NOT_IN:
        for (size_t i = 0; v && i < r->n_values && !in; i++)
            in = !strcmp(v, r->values[i]);
        return r->op == AF_OVERLAY_IN ? in : !in;
    default:
        return v && r->n_values == 1 && compare(v, r->values[0], r->op);
    }
}

const struct af_overlay *af_overlays_match(const struct af_overlays *o, const char *packed)
{
    for (size_t i = 0; o && i < o->n; i++) {
        const struct af_overlay *ov = &o->v[i];
        size_t k;

        if (ov->mode == AF_OVERLAY_NO_PRICE)
            continue;
        for (k = 0; k < ov->n_reqs; k++)
            if (!req_holds(&ov->reqs[k], packed))
                break;
        if (k == ov->n_reqs)
            return ov;
    }
    return NULL;
}

double af_overlay_apply(const struct af_overlay *ov, double usd)
{
    double v;

    switch (ov->mode) {
    case AF_OVERLAY_PRICE: v = ov->value; break;
    case AF_OVERLAY_ADD: v = usd + ov->value; break;
    case AF_OVERLAY_PCT: v = usd * (1.0 + ov->value / 100.0); break;
    default: v = usd; break;
    }
    return v > 0 ? v : 0;
}

void af_overlay_describe(const struct af_overlay *ov, char *buf, size_t len)
{
    switch (ov->mode) {
    case AF_OVERLAY_PRICE: snprintf(buf, len, "price %g", ov->value); break;
    case AF_OVERLAY_ADD: snprintf(buf, len, "priceAdjustment %+g", ov->value); break;
    case AF_OVERLAY_PCT: snprintf(buf, len, "priceAdjustment %+g%%", ov->value); break;
    default: snprintf(buf, len, "no price"); break;
    }
}
