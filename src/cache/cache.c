/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache: the mutable cluster state (writer thread only), immutable snapshots
 * and the publisher.
 *
 * Layout: nodes and pods live in dense arrays of small slots (swap-remove on
 * delete), each indexed by an open-addressing table of uint32 slot numbers
 * (linear probing, backward-shift deletion, no tombstones). Only the
 * refcounted af_node_info records and af_pod_brief records (model.h) are kept,
 * never the Kubernetes objects: a pod is briefed as it is upserted, its names
 * shared through the cache's string table, so 150,000 pods cost what they say
 * and not what they repeat. A node slot can exist without a node record ("phantom")
 * while pods bound to that name arrive before the node does, so usage is
 * always current when the node shows up.
 *
 * A snapshot copies the node slots that have a record (sorted by name; the
 * sorted order is cached and only recomputed when the node set changes) and
 * the pod pointer array, taking one reference per record, and builds its own
 * hash indexes from the hashes stored in the slots: O(nodes log nodes + pods).
 *
 * Pods labelled accelfit.io/managed (rollouts) are also kept in a second table
 * of the same shape, terminal ones included (the brake reads Failed pods,
 * which the main table drops), so a snapshot lists them in O(managed pods)
 * and a request never scans every pod to find them.
 */
#include "accelfit/cache.h"

#include <stdlib.h>
#include <string.h>

#include "accelfit/decide.h"
#include "accelfit/dra.h"
#include "accelfit/strtab.h"
#include "accelfit/util.h"
#include "accelfit/banned.h"

/* ---- hashing ------------------------------------------------------------------------------ */

static uint32_t hash_node(const char *name)
{
    return af_hash_str(AF_HASH_INIT, name);
}

static uint32_t hash_pod(const char *ns, const char *name)
{
    return af_hash_str(af_hash_str(AF_HASH_INIT, ns), name);
}

static bool streq(const char *a, const char *b)
{
    if (!a)
        a = "";
    if (!b)
        b = "";
    return strcmp(a, b) == 0;
}

/* ---- open-addressing index (values are slot + 1; 0 = empty) ------------------------------ */

/* Not an af_index: this one grows and removes (backward shift) as events come, and keeps 4
 * bytes an entry, the hash being in the slot: at 150,000 pods an af_index would be twice the
 * size, and every snapshot copies the pods' index. */

struct index {
    uint32_t *t;
    size_t size;   /* power of two */
    size_t count;
};

typedef bool (*idx_eq_fn)(const void *ctx, uint32_t slot, const void *key);
typedef uint32_t (*idx_hash_fn)(const void *ctx, uint32_t slot);

static void idx_rebuild(struct index *ix, size_t need, const void *ctx, idx_hash_fn hf, size_t n)
{
    size_t size = af_table_size(need);

    af_free(ix->t);
    ix->t = af_xcalloc(size, sizeof(uint32_t));
    ix->size = size;
    ix->count = n;
    for (size_t i = 0; i < n; i++) {
        size_t pos = hf(ctx, (uint32_t)i) & (size - 1);
        while (ix->t[pos])
            pos = (pos + 1) & (size - 1);
        ix->t[pos] = (uint32_t)i + 1;
    }
}

/* Position of the table entry holding a slot matching key, or (size_t)-1. */
static size_t idx_find(const struct index *ix, uint32_t h, const void *ctx, idx_eq_fn eq,
                       const void *key)
{
    if (!ix->size)
        return (size_t)-1;
    for (size_t pos = h & (ix->size - 1);; pos = (pos + 1) & (ix->size - 1)) {
        uint32_t v = ix->t[pos];
        if (!v)
            return (size_t)-1;
        if (eq(ctx, v - 1, key))
            return pos;
    }
}

/* Position of the entry holding exactly `slot` (hash h). */
static size_t idx_find_slot(const struct index *ix, uint32_t h, uint32_t slot)
{
    for (size_t pos = h & (ix->size - 1);; pos = (pos + 1) & (ix->size - 1)) {
        af_assert(ix->t[pos] != 0);
        if (ix->t[pos] == slot + 1)
            return pos;
    }
}

static void idx_insert(struct index *ix, uint32_t h, uint32_t slot)
{
    size_t pos = h & (ix->size - 1);
    while (ix->t[pos])
        pos = (pos + 1) & (ix->size - 1);
    ix->t[pos] = slot + 1;
    ix->count++;
}

/* Backward-shift deletion for linear probing. */
static void idx_remove_at(struct index *ix, size_t pos, const void *ctx, idx_hash_fn hf)
{
    size_t mask = ix->size - 1;
    size_t hole = pos;
    ix->t[hole] = 0;
    ix->count--;
    for (size_t j = (hole + 1) & mask; ix->t[j]; j = (j + 1) & mask) {
        size_t home = hf(ctx, ix->t[j] - 1) & mask;
        /* Move entry j into the hole when its home is not in (hole, j]. */
        bool in_range = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!in_range) {
            ix->t[hole] = ix->t[j];
            ix->t[j] = 0;
            hole = j;
        }
    }
}

/* ---- the cache ------------------------------------------------------------------------------ */

struct node_slot {
    char *name;                   /* owned */
    struct af_node_info *info;    /* NULL: phantom (pods bound before the node arrived) */
    struct af_resources used;
    int npods;
    int nsystem;               /* DaemonSet and mirror pods among them */
    struct af_resources dra_held;   /* of `used`: devices its pods' DRA claims hold */
    uint32_t hash;
    uint32_t mark;
};

struct pod_slot {
    uint32_t hash;
    uint32_t mark;
};

/* Pods by namespace and name: a dense array (swap-remove) and its index. */
struct pod_table {
    struct af_pod_brief **pods;   /* dense, parallel to meta; each holds a ref */
    struct pod_slot *meta;
    size_t n, cap;
    struct index ix;
};

struct af_cache {                 /* watch thread only */
    struct node_slot *nodes;
    size_t n_nodes, cap_nodes;
    struct index node_ix;
    size_t n_node_infos;          /* slots with a record */

    struct pod_table pods;        /* non-terminal pods: usage, lookups */
    struct pod_table managed;     /* pods labelled accelfit.io/managed, terminal ones too */
    struct af_strtab *strings;    /* the briefs' shared strings */

    /* resync marks: [AF_KIND_NODE], then per pod set ([AF_PODS_UNMANAGED], [AF_PODS_MANAGED]) */
    uint32_t epoch[3];
    bool resyncing[3];
    bool synced;
    uint64_t generation;
    char resource_version[32];

    struct af_dra *dra;           /* DRA objects (af_cache_set_dra); NULL when none */

    /* cached sorted order of node slots with a record */
    uint32_t *sorted;
    size_t n_sorted;
    bool sorted_dirty;
    /* the records in that order, with their index, as the snapshots share them; NULL
     * when a record or the order changed since the last snapshot */
    struct af_node_set *node_set;
};

/*
 * The node records of a sorted order and their name index, shared by every snapshot
 * taken while no node changes: pods come and go many times a second, nodes seldom, and
 * a snapshot then takes one reference for all the records instead of one each (and
 * builds no index): at 5,000 nodes, 10,000 atomic operations on as many cache lines, 20
 * times a second while pods are bound.
 */
struct af_node_set {
    atomic_int refcnt;
    size_t n;
    struct af_index index;                 /* name -> position */
    struct af_node_info *infos[];          /* each holds a ref */
};

static void node_set_unref(struct af_node_set *ns)
{
    if (!ns || atomic_fetch_sub_explicit(&ns->refcnt, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < ns->n; i++)
        af_node_info_unref(ns->infos[i]);
    af_index_release(&ns->index);
    af_free(ns);
}

/* A record or the order changed: the next snapshot builds a new set. */
static void node_set_drop(struct af_cache *c)
{
    node_set_unref(c->node_set);
    c->node_set = NULL;
}

struct node_key {
    const char *name;
};
struct pod_key {
    const char *ns, *name;
};

static bool node_eq(const void *ctx, uint32_t slot, const void *key)
{
    const struct af_cache *c = ctx;
    return strcmp(c->nodes[slot].name, ((const struct node_key *)key)->name) == 0;
}

static uint32_t node_h(const void *ctx, uint32_t slot)
{
    return ((const struct af_cache *)ctx)->nodes[slot].hash;
}

static bool pod_eq(const void *ctx, uint32_t slot, const void *key)
{
    const struct pod_table *t = ctx;
    const struct pod_key *k = key;
    const struct af_pod_brief *p = t->pods[slot];
    return af_pod_brief_name_is(p, k->name) && streq(p->ns, k->ns);
}

static uint32_t pod_h(const void *ctx, uint32_t slot)
{
    return ((const struct pod_table *)ctx)->meta[slot].hash;
}

struct af_cache *af_cache_new(void)
{
    struct af_cache *c = af_xcalloc(1, sizeof(*c));
    c->epoch[0] = c->epoch[1] = c->epoch[2] = 1;
    c->sorted_dirty = true;
    c->strings = af_strtab_new();
    idx_rebuild(&c->node_ix, 8, c, node_h, 0);
    idx_rebuild(&c->pods.ix, 8, &c->pods, pod_h, 0);
    idx_rebuild(&c->managed.ix, 8, &c->managed, pod_h, 0);
    return c;
}

static void table_release(struct pod_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        af_pod_brief_unref(t->pods[i]);
    af_free(t->pods);
    af_free(t->meta);
    af_free(t->ix.t);
}

void af_cache_free(struct af_cache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_nodes; i++) {
        af_free(c->nodes[i].name);
        af_node_info_unref(c->nodes[i].info);
    }
    table_release(&c->pods);
    table_release(&c->managed);
    af_strtab_free(c->strings);
    af_free(c->nodes);
    af_free(c->node_ix.t);
    af_free(c->sorted);
    node_set_drop(c);
    af_dra_unref(c->dra);
    af_free(c);
}

/* ---- nodes ---- */

static long node_lookup(const struct af_cache *c, const char *name, uint32_t h)
{
    struct node_key k = {name};
    size_t pos = idx_find(&c->node_ix, h, c, node_eq, &k);
    return pos == (size_t)-1 ? -1 : (long)(c->node_ix.t[pos] - 1);
}

static uint32_t node_slot_get(struct af_cache *c, const char *name)
{
    uint32_t h = hash_node(name);
    long s = node_lookup(c, name, h);
    if (s >= 0)
        return (uint32_t)s;
    if ((c->node_ix.count + 1) * 2 > c->node_ix.size)
        idx_rebuild(&c->node_ix, c->n_nodes + 1, c, node_h, c->n_nodes);
    AF_GROW(c->nodes, c->cap_nodes, c->n_nodes + 1);
    struct node_slot *ns = &c->nodes[c->n_nodes];
    memset(ns, 0, sizeof(*ns));
    ns->name = af_xstrdup(name);
    ns->hash = h;
    idx_insert(&c->node_ix, h, (uint32_t)c->n_nodes);
    return (uint32_t)c->n_nodes++;
}

static void node_slot_remove(struct af_cache *c, uint32_t slot)
{
    struct node_slot *ns = &c->nodes[slot];
    size_t pos = idx_find_slot(&c->node_ix, ns->hash, slot);
    idx_remove_at(&c->node_ix, pos, c, node_h);
    af_free(ns->name);
    af_node_info_unref(ns->info);
    uint32_t last = (uint32_t)(c->n_nodes - 1);
    if (slot != last) {
        size_t lpos = idx_find_slot(&c->node_ix, c->nodes[last].hash, last);
        c->nodes[slot] = c->nodes[last];
        c->node_ix.t[lpos] = slot + 1;
    }
    c->n_nodes--;
    c->sorted_dirty = true;
    node_set_drop(c);
}

/* Drops a phantom slot once nothing refers to it. */
static void node_slot_maybe_gc(struct af_cache *c, uint32_t slot)
{
    if (!c->nodes[slot].info && c->nodes[slot].npods == 0)
        node_slot_remove(c, slot);
}

void af_cache_upsert_node(struct af_cache *c, struct af_node_info *n)
{
    if (!n)
        return;
    if (!n->name) {
        af_node_info_unref(n);
        return;
    }
    if (c->dra || n->dra_driver) {
        /* its DRA devices (af_cache_set_dra) */
        struct af_node_info *withdra = af_dra_node_info(c->dra, n);
        if (withdra) {
            af_node_info_unref(n);
            n = withdra;
        }
    }
    uint32_t s = node_slot_get(c, n->name);
    struct node_slot *ns = &c->nodes[s];
    if (!ns->info) {
        c->n_node_infos++;
        c->sorted_dirty = true;
    }
    af_node_info_unref(ns->info);
    ns->info = n;
    ns->mark = c->epoch[AF_KIND_NODE];
    node_set_drop(c);
}

/* True when two records of one node carry the same price. */
static bool same_price(const struct af_node_info *a, const struct af_node_info *b)
{
    return a->price_known == b->price_known && a->hourly_usd == b->hourly_usd &&
           a->price_as_of == b->price_as_of && a->price_other_region == b->price_other_region &&
           !strcmp(a->price_source, b->price_source) && a->rate_known == b->rate_known &&
           a->rate_usd_hr == b->rate_usd_hr && a->reservation_end == b->reservation_end &&
           !strcmp(a->price_by ? a->price_by : "", b->price_by ? b->price_by : "");
}

size_t af_cache_reprice(struct af_cache *c, const struct af_catalog *cat,
                        const struct af_policy *pol, const struct af_price_inputs *in)
{
    size_t changed = 0;

    for (size_t i = 0; i < c->n_nodes; i++) {
        struct af_node_info *old = c->nodes[i].info, *n;
        if (!old)
            continue;
        n = af_node_info_copy(old);
        af_node_price(cat, pol, in, n);
        if (same_price(old, n)) {
            af_node_info_unref(n);
            continue;
        }
        c->nodes[i].info = n;   /* records are shared by snapshots: replace, never change */
        af_node_info_unref(old);
        node_set_drop(c);
        changed++;
    }
    return changed;
}

static void pod_account(struct af_cache *c, const struct af_pod_brief *p, int sign);
static void managed_set(struct af_cache *c, const char *ns, const char *name, uint32_t h,
                        struct af_pod_brief *p);
static struct af_pod_info *pod_with_dra(struct af_cache *c, struct af_pod_info *p, bool *copied);

size_t af_cache_set_dra(struct af_cache *c, struct af_dra *d)
{
    size_t changed = 0;

    af_dra_unref(c->dra);
    c->dra = d;
    /* pods whose claims hold other devices now: new records, accounted again */
    for (size_t i = 0; i < c->pods.n; i++) {
        struct af_pod_brief *old = c->pods.pods[i], *n;
        struct af_pod_info *full = old->full, *nfull;
        bool copied;
        if (!full || !full->n_claims)
            continue;
        af_pod_info_ref(full);   /* never changed in place: snapshots may hold it */
        nfull = pod_with_dra(c, full, &copied);
        af_pod_info_unref(full);
        if (!copied)
            continue;
        n = af_pod_brief_new(nfull, c->strings);
        pod_account(c, n, +1);
        pod_account(c, old, -1);
        c->pods.pods[i] = n;
        if (n->managed)
            managed_set(c, n->ns, full->name, c->pods.meta[i].hash, n);
        af_pod_brief_unref(old);
    }
    for (size_t i = 0; i < c->n_nodes; i++) {
        struct af_node_info *old = c->nodes[i].info, *n;
        if (!old)
            continue;
        n = af_dra_node_info(d, old);
        if (!n)
            continue;
        c->nodes[i].info = n;   /* records are shared by snapshots: replace, never change */
        af_node_info_unref(old);
        node_set_drop(c);
        changed++;
    }
    return changed;
}

void af_cache_upsert_item(void *cache, struct af_node_info *node, struct af_pod_info *pod)
{
    if (node)
        af_cache_upsert_node(cache, node);
    if (pod)
        af_cache_upsert_pod(cache, pod);
}

void af_cache_delete_node(struct af_cache *c, const char *name)
{
    if (!name)
        return;
    long s = node_lookup(c, name, hash_node(name));
    if (s < 0 || !c->nodes[s].info)
        return;
    af_node_info_unref(c->nodes[s].info);
    c->nodes[s].info = NULL;
    c->n_node_infos--;
    c->sorted_dirty = true;
    node_set_drop(c);
    node_slot_maybe_gc(c, (uint32_t)s);
}

/* ---- pods ---- */

/* The pod set a record belongs to, by its managed label (cache.h). */
static enum af_pod_set pod_set_of(const struct af_pod_brief *p)
{
    return p->managed ? AF_PODS_MANAGED : AF_PODS_UNMANAGED;
}

static bool set_covers(enum af_pod_set set, const struct af_pod_brief *p)
{
    return set == AF_PODS_ALL || set == pod_set_of(p);
}

static uint32_t pod_mark(const struct af_cache *c, const struct af_pod_brief *p)
{
    return c->epoch[pod_set_of(p)];
}

static bool pod_counts(const struct af_pod_brief *p)
{
    return p && !p->terminal && p->node_name && *p->node_name;
}

static void pod_account(struct af_cache *c, const struct af_pod_brief *p, int sign)
{
    if (!pod_counts(p))
        return;
    uint32_t s = node_slot_get(c, p->node_name);
    struct node_slot *ns = &c->nodes[s];
    /* Wrapping (unsigned) arithmetic: absurd requests must not be undefined behaviour,
     * and removing a pod must exactly undo adding it. */
    for (int i = 0, k = 0; i < AF_RES__COUNT; i++)
        if (p->req_mask & (1u << i)) {
            ns->used.v[i] = (int64_t)((uint64_t)ns->used.v[i] + (uint64_t)(sign * p->req[k++]));
        }
    for (int i = 0; p->full && i < AF_RES__COUNT; i++)
        ns->dra_held.v[i] += sign * p->full->dra.v[i];
    ns->npods += sign;
    if (p->system)
        ns->nsystem += sign;
    af_assert(ns->npods >= 0 && ns->nsystem >= 0);
    if (sign < 0)
        node_slot_maybe_gc(c, s);
}

static long table_lookup(const struct pod_table *t, const char *ns, const char *name, uint32_t h,
                         size_t *posp)
{
    struct pod_key k = {ns, name};
    size_t pos = idx_find(&t->ix, h, t, pod_eq, &k);
    if (posp)
        *posp = pos;
    return pos == (size_t)-1 ? -1 : (long)(t->ix.t[pos] - 1);
}

/* Removes the pod in `slot` (index entry at `pos`) and returns its reference. */
static struct af_pod_brief *table_take(struct pod_table *t, uint32_t slot, size_t pos)
{
    struct af_pod_brief *p = t->pods[slot];
    uint32_t last = (uint32_t)(t->n - 1);

    idx_remove_at(&t->ix, pos, t, pod_h);
    if (slot != last) {
        size_t lpos = idx_find_slot(&t->ix, t->meta[last].hash, last);
        t->pods[slot] = t->pods[last];
        t->meta[slot] = t->meta[last];
        t->ix.t[lpos] = slot + 1;
    }
    t->n--;
    return p;
}

/* Appends `p` (steals the reference), known to be absent. */
static void table_append(struct pod_table *t, struct af_pod_brief *p, uint32_t h, uint32_t mark)
{
    size_t cap = t->cap;

    if ((t->ix.count + 1) * 2 > t->ix.size)
        idx_rebuild(&t->ix, t->n + 1, t, pod_h, t->n);
    AF_GROW(t->pods, t->cap, t->n + 1);
    if (t->cap != cap)
        t->meta = af_xrealloc(t->meta, t->cap * sizeof(*t->meta));
    t->pods[t->n] = p;
    t->meta[t->n].hash = h;
    t->meta[t->n].mark = mark;
    idx_insert(&t->ix, h, (uint32_t)t->n);
    t->n++;
}

/* After a list: the dense arrays grew by doubling, up to twice what the pods need; give
 * back what an eighth more than their count leaves free (watch events grow them again). */
static void table_fit(struct pod_table *t)
{
    size_t want = t->n + t->n / 8 + 16;

    if (t->cap <= want + want / 4)
        return;
    t->pods = af_xrealloc(t->pods, want * sizeof(*t->pods));
    t->meta = af_xrealloc(t->meta, want * sizeof(*t->meta));
    t->cap = want;
}

static void pod_slot_remove(struct af_cache *c, uint32_t slot, size_t pos)
{
    struct af_pod_brief *p = table_take(&c->pods, slot, pos);

    pod_account(c, p, -1);
    af_pod_brief_unref(p);
}

/* The managed table follows every upsert: `p` (borrowed) replaces the entry of its name,
 * or removes it when `p` is no longer managed or is NULL (deleted). */
static void managed_set(struct af_cache *c, const char *ns, const char *name, uint32_t h,
                        struct af_pod_brief *p)
{
    size_t pos;
    long s = table_lookup(&c->managed, ns, name, h, &pos);

    if (p && p->managed) {
        af_pod_brief_ref(p);
        if (s >= 0) {
            af_pod_brief_unref(c->managed.pods[s]);
            c->managed.pods[s] = p;
            c->managed.meta[s].mark = pod_mark(c, p);
        } else {
            table_append(&c->managed, p, h, pod_mark(c, p));
        }
    } else if (s >= 0) {
        af_pod_brief_unref(table_take(&c->managed, (uint32_t)s, pos));
    }
}

void af_cache_delete_pod_in(struct af_cache *c, enum af_pod_set set, const char *ns,
                            const char *name)
{
    size_t pos;
    uint32_t h = hash_pod(ns, name);
    long s = table_lookup(&c->pods, ns, name, h, &pos);
    if (s >= 0 && set_covers(set, c->pods.pods[s]))
        pod_slot_remove(c, (uint32_t)s, pos);
    if (set != AF_PODS_UNMANAGED)
        managed_set(c, ns, name, h, NULL);
}

void af_cache_delete_pod(struct af_cache *c, const char *ns, const char *name)
{
    af_cache_delete_pod_in(c, AF_PODS_ALL, ns, name);
}

/*
 * The devices `p`'s allocated DRA claims hold (af_dra_pod_demand's `held`: a claim shared by
 * several pods counts on the first it is reserved for), as the part `dra` of its requests:
 * `p` itself when that is what it says, else `p` changed in place when nobody else holds it,
 * else a changed copy (the caller's reference to `p` is then still the caller's).
 */
static struct af_pod_info *pod_with_dra(struct af_cache *c, struct af_pod_info *p, bool *copied)
{
    struct af_dra_demand dm;
    struct af_pod_info *n = p;

    *copied = false;
    if (!p->n_claims && !c->dra)
        return p;
    af_dra_pod_demand(c->dra, p, &dm);
    if (!memcmp(&dm.held, &p->dra, sizeof(dm.held)))
        return p;
    if (atomic_load(&p->refcnt) != 1) {
        n = af_pod_info_copy(p);
        *copied = true;
    }
    for (int i = 0; i < AF_RES__COUNT; i++)
        n->requests.v[i] += dm.held.v[i] - p->dra.v[i];
    n->dra = dm.held;
    return n;
}

void af_cache_upsert_pod(struct af_cache *c, struct af_pod_info *full)
{
    struct af_pod_brief *p;

    if (!full)
        return;
    if (!full->name) {
        af_pod_info_unref(full);
        return;
    }
    if (full->n_claims) {
        bool copied;
        struct af_pod_info *n = pod_with_dra(c, full, &copied);
        if (copied)
            af_pod_info_unref(full);
        full = n;
    }
    /* what is kept: the brief, and the whole record only when it says more */
    p = af_pod_brief_new(full, c->strings);   /* `full` may be gone now */
    char namebuf[AF_POD_TEXT_MAX];
    const char *name = af_pod_brief_name(p, namebuf);
    uint32_t h = hash_pod(p->ns, name);
    size_t pos, mpos;
    long s = table_lookup(&c->pods, p->ns, name, h, &pos);

    /* An event the other set's watch sent before the one this record came from (the
     * pod's label changed and the two watches are not ordered): it is old news. Only
     * watch events carry a resourceVersion; a list's pods skip the look. */
    if (p->rv) {
        long m = s >= 0 ? -1 : table_lookup(&c->managed, p->ns, name, h, &mpos);
        const struct af_pod_brief *cur = s >= 0   ? c->pods.pods[s]
                                         : m >= 0 ? c->managed.pods[m]
                                                  : NULL;
        if (cur && cur->rv && pod_set_of(cur) != pod_set_of(p) && p->rv < cur->rv) {
            af_pod_brief_unref(p);
            return;
        }
    }
    managed_set(c, p->ns, name, h, p);
    if (p->terminal) {
        if (s >= 0)
            pod_slot_remove(c, (uint32_t)s, pos);
        af_pod_brief_unref(p);
        return;
    }
    if (s >= 0) {
        struct af_pod_brief *old = c->pods.pods[s];
        /* Account the new state first so a phantom node slot is not dropped
         * and recreated when the pod stays on the same node. */
        pod_account(c, p, +1);
        pod_account(c, old, -1);
        af_pod_brief_unref(old);
        c->pods.pods[s] = p;
        c->pods.meta[s].mark = pod_mark(c, p);
        return;
    }
    table_append(&c->pods, p, h, pod_mark(c, p));
    pod_account(c, p, +1);
}

/* ---- resync ---- */

static void epoch_bump(struct af_cache *c, int i)
{
    c->epoch[i]++;
    if (c->epoch[i] == 0)
        c->epoch[i] = 1;
    c->resyncing[i] = true;
}

void af_cache_begin_resync_pods(struct af_cache *c, enum af_pod_set set)
{
    if (set != AF_PODS_MANAGED)
        epoch_bump(c, AF_PODS_UNMANAGED);
    if (set != AF_PODS_UNMANAGED)
        epoch_bump(c, AF_PODS_MANAGED);
}

/* Removes the records of `t` whose set is being resynced and that the relist did not mark. */
static void sweep_pods(struct af_cache *c, struct pod_table *t, const bool ending[3])
{
    for (size_t i = t->n; i-- > 0;) {
        if (i >= t->n)
            continue;
        const struct af_pod_brief *p = t->pods[i];
        enum af_pod_set set = pod_set_of(p);
        if (!ending[set] || t->meta[i].mark == c->epoch[set])
            continue;
        size_t pos = idx_find_slot(&t->ix, t->meta[i].hash, (uint32_t)i);
        if (t == &c->pods)
            pod_slot_remove(c, (uint32_t)i, pos);
        else
            af_pod_brief_unref(table_take(t, (uint32_t)i, pos));
    }
}

void af_cache_end_resync_pods(struct af_cache *c, enum af_pod_set set)
{
    bool ending[3] = {false, false, false};

    for (int i = AF_PODS_UNMANAGED; i <= AF_PODS_MANAGED; i++) {
        if ((set == AF_PODS_ALL || (int)set == i) && c->resyncing[i]) {
            ending[i] = true;
            c->resyncing[i] = false;
        }
    }
    if (!ending[AF_PODS_UNMANAGED] && !ending[AF_PODS_MANAGED])
        return;
    sweep_pods(c, &c->pods, ending);
    sweep_pods(c, &c->managed, ending);
    table_fit(&c->pods);
    table_fit(&c->managed);
}

void af_cache_begin_resync(struct af_cache *c, enum af_kind kind)
{
    if (kind == AF_KIND_POD)
        af_cache_begin_resync_pods(c, AF_PODS_ALL);
    else
        epoch_bump(c, AF_KIND_NODE);
}

void af_cache_end_resync(struct af_cache *c, enum af_kind kind)
{
    uint32_t e = c->epoch[AF_KIND_NODE];

    if (kind == AF_KIND_POD) {
        af_cache_end_resync_pods(c, AF_PODS_ALL);
        return;
    }
    if (!c->resyncing[AF_KIND_NODE])
        return;
    c->resyncing[AF_KIND_NODE] = false;
    for (size_t i = c->n_nodes; i-- > 0;) {
        if (i >= c->n_nodes)
            continue;
        struct node_slot *ns = &c->nodes[i];
        if (ns->info && ns->mark != e)
            af_cache_delete_node(c, ns->name);
    }
}

void af_cache_set_synced(struct af_cache *c, bool synced)
{
    c->synced = synced;
}

size_t af_cache_node_count(const struct af_cache *c)
{
    return c->n_node_infos;
}

size_t af_cache_pod_count(const struct af_cache *c)
{
    return c->pods.n;
}

size_t af_cache_managed_count(const struct af_cache *c)
{
    return c->managed.n;
}

/* ---- snapshots ------------------------------------------------------------------------------ */

/* per thread: two caches may build snapshots at once on different threads */
static _Thread_local const struct af_cache *sort_ctx;
static int cmp_slot_name(const void *a, const void *b)
{
    return strcmp(sort_ctx->nodes[*(const uint32_t *)a].name,
                  sort_ctx->nodes[*(const uint32_t *)b].name);
}

static void refresh_sorted(struct af_cache *c)
{
    if (!c->sorted_dirty)
        return;
    af_free(c->sorted);
    c->sorted = af_xmalloc((c->n_node_infos + 1) * sizeof(uint32_t));
    c->n_sorted = 0;
    for (size_t i = 0; i < c->n_nodes; i++)
        if (c->nodes[i].info)
            c->sorted[c->n_sorted++] = (uint32_t)i;
    af_assert(c->n_sorted == c->n_node_infos);
    sort_ctx = c; /* qsort_r is not C11 */
    qsort(c->sorted, c->n_sorted, sizeof(uint32_t), cmp_slot_name);
    sort_ctx = NULL;
    c->sorted_dirty = false;
}

void af_cache_note_resource_version(struct af_cache *c, const char *rv)
{
    char *end_new, *end_old;
    unsigned long long n, o;

    if (!rv || !*rv || strlen(rv) >= sizeof(c->resource_version))
        return;
    n = strtoull(rv, &end_new, 10);
    o = strtoull(c->resource_version, &end_old, 10);
    /* resourceVersions are opaque to clients, but the API server's are etcd revisions:
     * keep the newest when both are numbers, else the last one seen */
    if (!*end_new && !*end_old && c->resource_version[0] && n < o)
        return;
    memcpy(c->resource_version, rv, strlen(rv) + 1);
}

struct af_snapshot *af_cache_snapshot(struct af_cache *c)
{
    struct af_snapshot *s = af_xcalloc(1, sizeof(*s));
    atomic_init(&s->refcnt, 1);
    s->generation = ++c->generation;
    s->synced = c->synced;
    memcpy(s->resource_version, c->resource_version, sizeof(s->resource_version));

    refresh_sorted(c);
    if (!c->node_set) {
        struct af_node_set *set = af_xmalloc(sizeof(*set) + c->n_sorted * sizeof(set->infos[0]));
        atomic_init(&set->refcnt, 1);
        set->n = c->n_sorted;
        af_index_init(&set->index, set->n, NULL);
        for (size_t i = 0; i < set->n; i++) {
            const struct node_slot *ns = &c->nodes[c->sorted[i]];
            set->infos[i] = af_node_info_ref(ns->info);
            af_index_add(&set->index, ns->hash, i);
        }
        c->node_set = set;
    }
    atomic_fetch_add_explicit(&c->node_set->refcnt, 1, memory_order_relaxed);
    s->node_set = c->node_set;
    s->node_index = c->node_set->index;   /* borrowed from the set */
    s->n_nodes = c->n_sorted;
    s->nodes = af_xcalloc(s->n_nodes + 1, sizeof(*s->nodes));
    for (size_t i = 0; i < s->n_nodes; i++) {
        const struct node_slot *ns = &c->nodes[c->sorted[i]];
        s->nodes[i].info = c->node_set->infos[i];
        s->nodes[i].used = ns->used;
        if (c->dra && ns->info->dra_driver) {
            /* devices allocated claims hold that no pod of the node counts (claims allocated
             * before their pod is bound, or reserved for none), of the kinds DRA alone
             * counts on this node */
            const struct af_dra_node *dn = af_dra_find_node(c->dra, ns->info->name);
            for (int r = 0; dn && r < AF_RES__COUNT; r++)
                if (ns->info->dra_added.v[r] > 0 && dn->allocated.v[r] > ns->dra_held.v[r])
                    s->nodes[i].used.v[r] += dn->allocated.v[r] - ns->dra_held.v[r];
        }
        s->nodes[i].npods = ns->npods;
        s->nodes[i].nsystem = ns->nsystem;
    }

    s->n_pods = c->pods.n;
    s->pods = af_xmalloc((s->n_pods + 1) * sizeof(*s->pods));
    for (size_t i = 0; i < s->n_pods; i++)
        s->pods[i] = af_pod_brief_ref(c->pods.pods[i]);
    /* The cache's own index has the snapshot's layout (slot + 1 into the same dense
     * order, the same hash, linear probing): copied, not rebuilt. */
    s->pod_index_size = c->pods.ix.size;
    s->pod_index = af_xmalloc(s->pod_index_size * sizeof(uint32_t));
    memcpy(s->pod_index, c->pods.ix.t, s->pod_index_size * sizeof(uint32_t));

    s->dra = af_dra_ref(c->dra);
    s->n_managed = c->managed.n;
    s->managed = af_xmalloc((s->n_managed + 1) * sizeof(*s->managed));
    for (size_t i = 0; i < s->n_managed; i++)
        s->managed[i] = af_pod_info_ref(c->managed.pods[i]->full);
    return s;
}

const struct af_node_view *af_snapshot_find_node(const struct af_snapshot *s, const char *name)
{
    uint32_t h, i;
    size_t walk;

    if (!s || !name)
        return NULL;
    h = hash_node(name);
    walk = af_index_start(&s->node_index, h);
    while (af_index_next(&s->node_index, h, &walk, &i))
        if (!strcmp(s->nodes[i].info->name, name))
            return &s->nodes[i];
    return NULL;
}

#define FIND_BATCH 64   /* lookups in flight per batch (hashes on the stack) */

void af_snapshot_find_nodes(const struct af_snapshot *s, const char *const *names, size_t n,
                            const struct af_node_view **out)
{
    uint32_t h[FIND_BATCH];
    struct af_index ix;   /* a copy the stores to out[] cannot be feared to change */

    if (!s || !s->node_index.t) {
        for (size_t i = 0; i < n; i++)
            out[i] = NULL;
        return;
    }
    ix = s->node_index;
    for (size_t base = 0; base < n; base += FIND_BATCH) {
        size_t m = n - base < FIND_BATCH ? n - base : FIND_BATCH;

        /* 1: the index entries */
        for (size_t i = 0; i < m; i++) {
            h[i] = names[base + i] ? hash_node(names[base + i]) : 0;
            af_index_prefetch(&ix, h[i]);
        }
        /* 2: the first entry with the name's hash: its node view, probably the one */
        for (size_t i = 0; i < m; i++) {
            const struct af_node_view *v = NULL;
            size_t walk = af_index_start(&ix, h[i]);
            uint32_t at;
            if (names[base + i] && af_index_next(&ix, h[i], &walk, &at))
                v = &s->nodes[at];
            out[base + i] = v;
            if (v)
                __builtin_prefetch(v);
        }
        /* 3: the node itself, for its name */
        for (size_t i = 0; i < m; i++)
            if (out[base + i])
                __builtin_prefetch(out[base + i]->info);
        for (size_t i = 0; i < m; i++)
            if (out[base + i])
                __builtin_prefetch(out[base + i]->info->name);
        /* 4: the names compared; another name with the same hash takes the plain lookup */
        for (size_t i = 0; i < m; i++)
            if (out[base + i] && strcmp(out[base + i]->info->name, names[base + i]))
                out[base + i] = af_snapshot_find_node(s, names[base + i]);
    }
}

const struct af_pod_brief *af_snapshot_find_pod(const struct af_snapshot *s, const char *ns,
                                                const char *name)
{
    if (!s || !name || !s->pod_index_size)
        return NULL;
    size_t mask = s->pod_index_size - 1;
    for (size_t pos = hash_pod(ns, name) & mask;; pos = (pos + 1) & mask) {
        uint32_t v = s->pod_index[pos];
        if (!v)
            return NULL;
        const struct af_pod_brief *p = s->pods[v - 1];
        if (af_pod_brief_name_is(p, name) && streq(p->ns, ns))
            return p;
    }
}

struct af_snapshot *af_snapshot_ref(struct af_snapshot *s)
{
    if (s)
        atomic_fetch_add_explicit(&s->refcnt, 1, memory_order_relaxed);
    return s;
}

void af_snapshot_unref(struct af_snapshot *s)
{
    if (!s || atomic_fetch_sub_explicit(&s->refcnt, 1, memory_order_acq_rel) != 1)
        return;
    if (s->node_set) {
        node_set_unref(s->node_set);   /* the records and the index are the set's */
    } else {
        for (size_t i = 0; i < s->n_nodes; i++)
            af_node_info_unref((struct af_node_info *)s->nodes[i].info);
        af_index_release(&s->node_index);
    }
    for (size_t i = 0; i < s->n_pods; i++)
        af_pod_brief_unref(s->pods[i]);
    for (size_t i = 0; i < s->n_managed; i++)
        af_pod_info_unref(s->managed[i]);
    af_free(s->nodes);
    af_free(s->pods);
    af_free(s->managed);
    af_free(s->pod_index);
    af_dra_unref(s->dra);
    af_free(s);
}

/* ---- publisher ---------------------------------------------------------------------------------- */

void af_publisher_init(struct af_publisher *p)
{
    pthread_mutex_init(&p->lock, NULL);
    p->current = NULL;
    p->n_retired = 0;
    p->on_publish = NULL;
    p->on_publish_ud = NULL;
}

void af_publisher_destroy(struct af_publisher *p)
{
    af_snapshot_unref(p->current);
    p->current = NULL;
    for (size_t i = 0; i < p->n_retired; i++)
        af_snapshot_unref(p->retired[i]);
    p->n_retired = 0;
    pthread_mutex_destroy(&p->lock);
}

void af_publisher_publish(struct af_publisher *p, struct af_snapshot *s)
{
    struct af_snapshot *drop[AF_PUBLISHER_RETIRED + 1];
    size_t n_drop = 0, w = 0;

    if (p->on_publish && s)
        p->on_publish(p->on_publish_ud, s);   /* not under the lock: requests go on */
    pthread_mutex_lock(&p->lock);
    if (p->current) {
        if (p->n_retired == AF_PUBLISHER_RETIRED) {
            /* a request has held the oldest through 8 publishes: it frees it */
            drop[n_drop++] = p->retired[0];
            memmove(p->retired, p->retired + 1, (AF_PUBLISHER_RETIRED - 1) * sizeof(*p->retired));
            p->n_retired--;
        }
        p->retired[p->n_retired++] = p->current;
    }
    p->current = s;
    /* Retired snapshots no request holds (only this list's reference is left; nothing
     * can take a new one) are freed here, on the publishing thread. */
    for (size_t i = 0; i < p->n_retired; i++) {
        if (atomic_load(&p->retired[i]->refcnt) == 1)
            drop[n_drop++] = p->retired[i];
        else
            p->retired[w++] = p->retired[i];
    }
    p->n_retired = w;
    pthread_mutex_unlock(&p->lock);
    for (size_t i = 0; i < n_drop; i++)
        af_snapshot_unref(drop[i]);   /* outside the lock: freeing 150k refs is not "tiny" */
}

struct af_snapshot *af_publisher_acquire(struct af_publisher *p)
{
    struct af_snapshot *s;
    pthread_mutex_lock(&p->lock);
    s = af_snapshot_ref(p->current);
    pthread_mutex_unlock(&p->lock);
    return s;
}
