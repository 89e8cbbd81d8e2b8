/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The price book (accelfit/prices.h): prices in one array, found through an open-addressing
 * hash of (kind, where, instance type), so that a second price for a key replaces the first
 * while the book is built and a lookup is one probe sequence once it is published. Sources
 * are few (two per region), so they are a plain array searched in order. A book is shared
 * by reference count once frozen; the holder swaps the current book under its mutex. Pure:
 * no I/O, no clock.
 */
#include "accelfit/prices.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "accelfit/model.h"
#include "accelfit/banned.h"

#define WHERE_MAX 64
#define TYPE_MAX 64

struct entry {
    enum af_price_kind kind;
    char where[WHERE_MAX];
    char type[TYPE_MAX];
    double usd_hr;
    double as_of;
};

struct af_prices {
    atomic_int refs;
    bool frozen;
    struct entry *entries;
    size_t n, cap;
    uint32_t *slots;            /* index + 1 into entries; 0: empty */
    size_t n_slots;             /* a power of two, at least twice n */
    struct af_price_source *sources;
    size_t n_sources, cap_sources;
    struct af_reservation *resv;    /* few (an account's reservations): searched in order */
    size_t n_resv, cap_resv;
};

static uint32_t hash_key(enum af_price_kind kind, const char *where, const char *type)
{
    return af_hash_str(af_hash_str(AF_HASH_INIT ^ (uint32_t)kind, where), type);
}

/* The slot holding the key, or the empty slot where it would go. */
static uint32_t *find_slot(const struct af_prices *p, enum af_price_kind kind, const char *where,
                           const char *type)
{
    size_t mask = p->n_slots - 1, i = hash_key(kind, where, type) & mask;

    for (;; i = (i + 1) & mask) {
        uint32_t *s = &p->slots[i];
        const struct entry *e;

        if (!*s)
            return s;
        e = &p->entries[*s - 1];
        if (e->kind == kind && !strcmp(e->where, where) && !strcmp(e->type, type))
            return s;
    }
}

static void rehash(struct af_prices *p, size_t n_slots)
{
    af_free(p->slots);
    p->n_slots = n_slots;
    p->slots = af_xcalloc(n_slots, sizeof(*p->slots));
    for (size_t i = 0; i < p->n; i++) {
        const struct entry *e = &p->entries[i];
        *find_slot(p, e->kind, e->where, e->type) = (uint32_t)(i + 1);
    }
}

struct af_prices *af_prices_new(void)
{
    struct af_prices *p = af_xcalloc(1, sizeof(*p));

    atomic_init(&p->refs, 1);
    rehash(p, 16);
    return p;
}

/*
 * True when price key `where` belongs to source (kind, region): an on-demand price's key
 * is its region; a spot price's is a zone of the region, the region's name followed by a
 * letter ("eu-west-1a") or by a Local Zone's suffix ("us-east-1-bos-1a").
 */
static bool in_source(const struct entry *e, enum af_price_kind kind, const char *region)
{
    size_t n = strlen(region);

    if (e->kind != kind)
        return false;
    if (kind == AF_PRICE_ON_DEMAND)
        return !strcmp(e->where, region);
    return !strncmp(e->where, region, n) &&
           ((e->where[n] >= 'a' && e->where[n] <= 'z') || e->where[n] == '-');
}

static void add_entry(struct af_prices *p, const struct entry *e)
{
    uint32_t *slot;

    if ((p->n + 1) * 2 > p->n_slots)
        rehash(p, p->n_slots * 2);
    slot = find_slot(p, e->kind, e->where, e->type);
    if (*slot) {
        p->entries[*slot - 1] = *e;
        return;
    }
    AF_GROW(p->entries, p->cap, p->n + 1);
    p->entries[p->n++] = *e;
    *slot = (uint32_t)p->n;
}

struct af_prices *af_prices_copy(const struct af_prices *p, enum af_price_kind kind,
                                 const char *region)
{
    struct af_prices *c = af_prices_new();

    if (!p)
        return c;
    for (size_t i = 0; i < p->n; i++)
        if (!region || !in_source(&p->entries[i], kind, region))
            add_entry(c, &p->entries[i]);
    for (size_t i = 0; i < p->n_resv; i++)
        if (!region || kind != AF_PRICE_RESERVATIONS || strcmp(p->resv[i].region, region)) {
            AF_GROW(c->resv, c->cap_resv, c->n_resv + 1);
            c->resv[c->n_resv++] = p->resv[i];   /* checked when it was set */
        }
    for (size_t i = 0; i < p->n_sources; i++)
        af_prices_set_source(c, &p->sources[i]);
    return c;
}

const char *af_price_kind_name(enum af_price_kind k)
{
    switch (k) {
    case AF_PRICE_ON_DEMAND: return "on-demand";
    case AF_PRICE_SPOT: return "spot";
    case AF_PRICE_RESERVATIONS: return "reservations";
    default: return "?";
    }
}

struct af_prices *af_prices_copy_without_region(const struct af_prices *p, const char *region)
{
    struct af_prices *c = af_prices_new();

    if (!p)
        return c;
    for (size_t i = 0; i < p->n; i++)
        if (!in_source(&p->entries[i], p->entries[i].kind, region))
            add_entry(c, &p->entries[i]);
    for (size_t i = 0; i < p->n_resv; i++)
        if (strcmp(p->resv[i].region, region)) {
            AF_GROW(c->resv, c->cap_resv, c->n_resv + 1);
            c->resv[c->n_resv++] = p->resv[i];
        }
    for (size_t i = 0; i < p->n_sources; i++)
        if (strcmp(p->sources[i].region, region))
            af_prices_set_source(c, &p->sources[i]);
    return c;
}

static bool key_ok(const char *s, size_t max)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n >= max)
        return false;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] <= ' ' || (unsigned char)s[i] >= 0x7f)
            return false;
    return true;
}

int af_prices_set(struct af_prices *p, enum af_price_kind kind, const char *where,
                  const char *instance_type, double usd_hr, double as_of)
{
    struct entry e = {.kind = kind, .usd_hr = usd_hr, .as_of = as_of};

    if (p->frozen || (unsigned)kind >= AF_PRICE__KINDS || !key_ok(where, sizeof(e.where)) ||
        !key_ok(instance_type, sizeof(e.type)) || !isfinite(usd_hr) || usd_hr <= 0 ||
        usd_hr > AF_PRICE_MAX_USD_HR || !isfinite(as_of))
        return AF_EINVAL;
    memcpy(e.where, where, strlen(where) + 1);
    memcpy(e.type, instance_type, strlen(instance_type) + 1);
    add_entry(p, &e);
    return 0;
}

int af_prices_set_reservation(struct af_prices *p, const struct af_reservation *r)
{
    size_t i;

    if (p->frozen || !key_ok(r->id, sizeof(r->id)) || !key_ok(r->region, sizeof(r->region)) ||
        !key_ok(r->zone, sizeof(r->zone)) ||
        (r->instance_type[0] && !key_ok(r->instance_type, sizeof(r->instance_type))) ||
        !isfinite(r->end) || r->end < 0 || !isfinite(r->as_of))
        return AF_EINVAL;
    for (i = 0; i < p->n_resv; i++)
        if (!strcmp(p->resv[i].id, r->id))
            break;
    if (i == p->n_resv) {
        if (p->n_resv >= AF_RESERVATIONS_MAX)
            return AF_ETOOBIG;
        AF_GROW(p->resv, p->cap_resv, p->n_resv + 1);
        p->n_resv++;
    }
    p->resv[i] = *r;
    return 0;
}

const struct af_reservation *af_prices_reservation(const struct af_prices *p, const char *id)
{
    for (size_t i = 0; p && id && i < p->n_resv; i++)
        if (!strcmp(p->resv[i].id, id))
            return &p->resv[i];
    return NULL;
}

const struct af_reservation *af_prices_reservation_in(const struct af_prices *p, const char *zone,
                                                     const char *instance_type)
{
    const struct af_reservation *one = NULL;

    for (size_t i = 0; p && zone && instance_type && i < p->n_resv; i++) {
        if (strcmp(p->resv[i].zone, zone) || strcmp(p->resv[i].instance_type, instance_type))
            continue;
        if (one)
            return NULL;
        one = &p->resv[i];
    }
    return one;
}

void af_prices_set_source(struct af_prices *p, const struct af_price_source *src)
{
    size_t i;

    af_assert(!p->frozen);
    for (i = 0; i < p->n_sources; i++)
        if (p->sources[i].kind == src->kind && !strcmp(p->sources[i].region, src->region))
            break;
    if (i == p->n_sources) {
        AF_GROW(p->sources, p->cap_sources, p->n_sources + 1);
        p->n_sources++;
    }
    p->sources[i] = *src;
    p->sources[i].region[sizeof(src->region) - 1] = '\0';
    p->sources[i].error[sizeof(src->error) - 1] = '\0';
}

void af_prices_freeze(struct af_prices *p)
{
    p->frozen = true;
}

bool af_prices_get(const struct af_prices *p, enum af_price_kind kind, const char *where,
                   const char *instance_type, double *usd_hr, double *as_of)
{
    const uint32_t *slot;
    const struct entry *e;

    if (!p || !where || !instance_type)
        return false;
    slot = find_slot(p, kind, where, instance_type);
    if (!*slot)
        return false;
    e = &p->entries[*slot - 1];
    if (usd_hr)
        *usd_hr = e->usd_hr;
    if (as_of)
        *as_of = e->as_of;
    return true;
}

const struct af_price_source *af_prices_sources(const struct af_prices *p, size_t *n)
{
    *n = p ? p->n_sources : 0;
    return p ? p->sources : NULL;
}

size_t af_prices_count(const struct af_prices *p)
{
    return p ? p->n : 0;
}

struct af_prices *af_prices_ref(struct af_prices *p)
{
    if (p)
        atomic_fetch_add(&p->refs, 1);
    return p;
}

void af_prices_unref(struct af_prices *p)
{
    if (!p || atomic_fetch_sub(&p->refs, 1) != 1)
        return;
    af_free(p->entries);
    af_free(p->slots);
    af_free(p->sources);
    af_free(p->resv);
    af_free(p);
}

void af_prices_holder_init(struct af_prices_holder *h)
{
    pthread_mutex_init(&h->lock, NULL);
    h->current = NULL;
}

void af_prices_holder_destroy(struct af_prices_holder *h)
{
    af_prices_unref(h->current);
    h->current = NULL;
    pthread_mutex_destroy(&h->lock);
}

struct af_prices *af_prices_holder_get(struct af_prices_holder *h)
{
    struct af_prices *p;

    pthread_mutex_lock(&h->lock);
    p = af_prices_ref(h->current);
    pthread_mutex_unlock(&h->lock);
    return p;
}

void af_prices_holder_swap(struct af_prices_holder *h, struct af_prices *p)
{
    struct af_prices *old;

    if (p)
        af_prices_freeze(p);
    pthread_mutex_lock(&h->lock);
    old = h->current;
    h->current = p;
    pthread_mutex_unlock(&h->lock);
    af_prices_unref(old);
}
