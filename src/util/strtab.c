/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared strings (accelfit/strtab.h). A string is a header with an atomic count right
 * before its bytes, so holders keep a plain `const char *` and anyone can give a
 * reference back without finding a table. The table is open addressing over those
 * pointers (linear probing); it never deletes one entry at a time: when it would grow,
 * it first drops the strings only it still holds (count 1), which only its own thread
 * can raise again, so no other thread needs a lock to let go of a string.
 */
#include "accelfit/strtab.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/util.h"
#include "accelfit/banned.h"

struct rcstr {
    atomic_uint refcnt;
    uint32_t hash;
    size_t len;     /* bytes of s[], its NUL included for a string */
    char s[];
};

static struct rcstr *hdr(const char *s)
{
    return (struct rcstr *)(void *)(s - offsetof(struct rcstr, s));
}

static uint32_t hash_bytes(const char *s, size_t n)
{
    uint32_t h = 2166136261u;   /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

static const char *rcstr_make(const char *s, size_t n, uint32_t h)
{
    struct rcstr *r = af_xmalloc(sizeof(*r) + n);

    atomic_init(&r->refcnt, 1);
    r->hash = h;
    r->len = n;
    memcpy(r->s, s, n);
    return r->s;
}

const char *af_rcstr_new(const char *s)
{
    return s ? rcstr_make(s, strlen(s) + 1, hash_bytes(s, strlen(s) + 1)) : NULL;
}

const char *af_rcstr_new_bytes(const char *s, size_t n)
{
    return rcstr_make(s, n, hash_bytes(s, n));
}

size_t af_rcstr_len(const char *s)
{
    return s ? hdr(s)->len : 0;
}

const char *af_rcstr_ref(const char *s)
{
    if (s)
        atomic_fetch_add_explicit(&hdr(s)->refcnt, 1, memory_order_relaxed);
    return s;
}

void af_rcstr_unref(const char *s)
{
    if (s && atomic_fetch_sub_explicit(&hdr(s)->refcnt, 1, memory_order_acq_rel) == 1)
        af_free(hdr(s));
}

struct af_strtab {
    const char **t;
    size_t size;    /* power of two */
    size_t count;
};

struct af_strtab *af_strtab_new(void)
{
    struct af_strtab *t = af_xcalloc(1, sizeof(*t));
    t->size = 64;
    t->t = af_xcalloc(t->size, sizeof(*t->t));
    return t;
}

void af_strtab_free(struct af_strtab *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->size; i++)
        af_rcstr_unref(t->t[i]);
    af_free(t->t);
    af_free(t);
}

static void put(const char **tab, size_t size, const char *s)
{
    size_t pos = hdr(s)->hash & (size - 1);
    while (tab[pos])
        pos = (pos + 1) & (size - 1);
    tab[pos] = s;
}

/* Drops the strings no one else holds, then sizes the table for what is left. */
static void rehash(struct af_strtab *t)
{
    size_t live = 0, size = 64;
    const char **n;

    for (size_t i = 0; i < t->size; i++) {
        const char *s = t->t[i];
        /* count 1: only this table holds it, and only this thread could take another */
        if (s && atomic_load_explicit(&hdr(s)->refcnt, memory_order_acquire) == 1) {
            af_rcstr_unref(s);
            t->t[i] = NULL;
        } else if (s) {
            live++;
        }
    }
    while (size < (live + 1) * 4)
        size <<= 1;
    n = af_xcalloc(size, sizeof(*n));
    for (size_t i = 0; i < t->size; i++)
        if (t->t[i])
            put(n, size, t->t[i]);
    af_free(t->t);
    t->t = n;
    t->size = size;
    t->count = live;
}

const char *af_strtab_get(struct af_strtab *t, const char *s)
{
    return s ? af_strtab_get_bytes(t, s, strlen(s) + 1) : NULL;
}

const char *af_strtab_get_bytes(struct af_strtab *t, const char *s, size_t n)
{
    uint32_t h;
    size_t pos;

    if (!s)
        return NULL;
    h = hash_bytes(s, n);
    for (pos = h & (t->size - 1); t->t[pos]; pos = (pos + 1) & (t->size - 1)) {
        const struct rcstr *r = hdr(t->t[pos]);
        if (r->hash == h && r->len == n && !memcmp(r->s, s, n))
            return af_rcstr_ref(t->t[pos]);
    }
    if ((t->count + 1) * 2 > t->size) {
        rehash(t);
        pos = h & (t->size - 1);
        while (t->t[pos])
            pos = (pos + 1) & (t->size - 1);
    }
    t->t[pos] = rcstr_make(s, n, h);
    t->count++;
    return af_rcstr_ref(t->t[pos]);
}

size_t af_strtab_count(const struct af_strtab *t)
{
    return t ? t->count : 0;
}
