/* SPDX-License-Identifier: Apache-2.0 */
/*
 * cache: the cluster as accelfit knows it.
 *
 * One writer (the watch thread, or the static loader) owns a `struct af_cache`
 * and applies node and pod upserts and deletes to it, keeping each node's
 * allocation current incrementally. After a batch it builds an immutable,
 * reference-counted `struct af_snapshot` and publishes it; readers (the HTTP
 * thread) acquire the current snapshot, hold it for one request, and release
 * it. The only lock is the publisher's tiny mutex around the pointer swap.
 */
#ifndef AF_CACHE_H
#define AF_CACHE_H

#include <pthread.h>
#include <stdatomic.h>

#include "accelfit/model.h"
#include "accelfit/util.h"

/* ---- snapshot (immutable after publish) --------------------------------------------- */

struct af_node_set;   /* node records shared by snapshots (cache.c) */

struct af_snapshot {
    atomic_int refcnt;
    uint64_t generation;
    bool synced;                       /* a full list of nodes and pods has been applied */
    /* The API server's resourceVersion this picture is as of: the newest applied by a list
     * or watch event of either kind (resourceVersions come from one etcd revision counter);
     * "" for a static cluster. */
    char resource_version[32];
    size_t n_nodes;
    struct af_node_view *nodes;        /* sorted by name; the infos are node_set's, or (NULL
                                        * node_set: a snapshot made by hand) each holds a ref */
    struct af_node_set *node_set;      /* holds a ref; NULL or the cache's records */
    size_t n_pods;
    struct af_pod_brief **pods;        /* non-terminal pods, each holds a ref (model.h: what
                                        * is kept of a pod; af_pod_brief_info for the rest) */
    /* Pods labelled accelfit.io/managed (rollouts), terminal ones included (the brake
     * reads Failed pods); each holds a ref; in no particular order. The cache keeps them
     * apart as they come and go, so listing them costs O(managed), not O(pods). */
    size_t n_managed;
    struct af_pod_info **managed;
    /* hash indexes: the nodes' (af_index: a lookup reads only the node it finds; node_set's
     * when there is one) and the pods' (open addressing, a power-of-two size, slot + 1: the
     * cache's own, copied) */
    struct af_index node_index;
    uint32_t *pod_index;
    size_t pod_index_size;
    /* DRA objects (accelfit/dra.h) as of this snapshot, NULL when the cluster has none;
     * holds a ref. The nodes' allocatable has their devices, and `used` the devices
     * allocated claims hold, of the kinds only DRA counts on the node. */
    struct af_dra *dra;
};

/* Borrowed, valid until the snapshot is released; NULL when absent. */
const struct af_node_view *af_snapshot_find_node(const struct af_snapshot *s, const char *name);
/*
 * out[i] = af_snapshot_find_node(s, names[i]) for n names (a NULL name finds nothing),
 * in passes that each start every lookup's next memory access before waiting on any:
 * hundreds of lookups in a large snapshot cost about one cache miss, not hundreds.
 */
void af_snapshot_find_nodes(const struct af_snapshot *s, const char *const *names, size_t n,
                            const struct af_node_view **out);
const struct af_pod_brief *af_snapshot_find_pod(const struct af_snapshot *s, const char *ns,
                                                const char *name);
struct af_snapshot *af_snapshot_ref(struct af_snapshot *s);
void af_snapshot_unref(struct af_snapshot *s);     /* NULL is fine */

/* ---- the mutable cache (writer thread only) ------------------------------------------ */

struct af_cache;

struct af_cache *af_cache_new(void);
void af_cache_free(struct af_cache *c);            /* NULL is fine */

/* Each steals the caller's reference. A terminal pod is removed (a managed one stays
 * listed in af_snapshot.managed until it is deleted). */
void af_cache_upsert_node(struct af_cache *c, struct af_node_info *n);
void af_cache_upsert_pod(struct af_cache *c, struct af_pod_info *p);
/* Both of the above for a decoder's item callback (af_item_cb): `cache` is the struct af_cache. */
void af_cache_upsert_item(void *cache, struct af_node_info *node, struct af_pod_info *pod);
/*
 * Prices every cached node again (af_node_price) with `in` (NULL: none), after a new price
 * book or new NodeOverlays came: a node whose price changes gets a new record, so snapshots
 * taken before keep theirs. Returns how many changed.
 */
struct af_policy;
struct af_price_inputs;
size_t af_cache_reprice(struct af_cache *c, const struct af_catalog *cat,
                        const struct af_policy *pol, const struct af_price_inputs *in);
/*
 * Takes `d` (steals the reference; NULL: no DRA objects) as the DRA objects the cluster has,
 * and gives every cached node its DRA devices again (af_dra_node_info); nodes upserted later
 * get them as they come. Returns how many node records changed.
 */
struct af_dra;
size_t af_cache_set_dra(struct af_cache *c, struct af_dra *d);
void af_cache_delete_node(struct af_cache *c, const char *name);
void af_cache_delete_pod(struct af_cache *c, const char *ns, const char *name);

/*
 * A live cluster's pods come as two disjoint sets, split by the label
 * accelfit.io/managed: "true", each listed and watched on its own (src/kube):
 * the managed ones whatever their phase (the brake reads Failed pods, a
 * rollout counts a finished Job's), the rest only while not terminal. A pod
 * whose label changes leaves one watch and enters the other, and the two are
 * not ordered, so a delete or relist of one set never removes a record the
 * other set put there, and an upsert from one set older (af_pod_info.rv) than
 * the other set's record is dropped. AF_PODS_ALL is every pod (a file, a
 * single source).
 */
enum af_pod_set { AF_PODS_ALL = 0, AF_PODS_UNMANAGED = 1, AF_PODS_MANAGED = 2 };
void af_cache_delete_pod_in(struct af_cache *c, enum af_pod_set set, const char *ns,
                            const char *name);
void af_cache_begin_resync_pods(struct af_cache *c, enum af_pod_set set);
void af_cache_end_resync_pods(struct af_cache *c, enum af_pod_set set);

/*
 * Relist: objects of `kind` upserted between begin and end are kept; the
 * others are deleted at end (they vanished while the watch was down). For
 * pods, the same as the _pods functions above with AF_PODS_ALL.
 */
void af_cache_begin_resync(struct af_cache *c, enum af_kind kind);
void af_cache_end_resync(struct af_cache *c, enum af_kind kind);
void af_cache_set_synced(struct af_cache *c, bool synced);
/* Notes a resourceVersion the cache now reflects (a list, a watch event); the newest
 * (numerically, when both are numbers) becomes the snapshots' resource_version. */
void af_cache_note_resource_version(struct af_cache *c, const char *rv);

size_t af_cache_node_count(const struct af_cache *c);
size_t af_cache_pod_count(const struct af_cache *c);
size_t af_cache_managed_count(const struct af_cache *c);   /* managed pods, terminal included */

/* Builds a new snapshot of the current state (refcnt 1). Cannot fail. */
struct af_snapshot *af_cache_snapshot(struct af_cache *c);

/* ---- publishing ------------------------------------------------------------------------ */

/*
 * Freeing a snapshot is O(nodes + pods) (a reference on every record), so it never
 * happens on a request: a replaced snapshot that a request still holds is kept here,
 * retired, and freed by the publishing thread on a later publish once no request holds
 * it any more (at most AF_PUBLISHER_RETIRED are kept; beyond that the oldest is left to
 * its last holder).
 */
#define AF_PUBLISHER_RETIRED 8

struct af_publisher {
    pthread_mutex_t lock;
    struct af_snapshot *current;       /* protected by ->lock */
    struct af_snapshot *retired[AF_PUBLISHER_RETIRED];   /* protected by ->lock */
    size_t n_retired;
    /*
     * Optional (NULL after init; set before the first publish): called by
     * af_publisher_publish with each snapshot (borrowed) just before it becomes
     * current, on the publishing thread, so what every request would otherwise
     * compute first of a new snapshot is ready when requests get it (the service
     * warms its costs memo: af_costs_memo_warm). Requests keep the previous snapshot
     * meanwhile.
     */
    void (*on_publish)(void *ud, struct af_snapshot *s);
    void *on_publish_ud;
};

void af_publisher_init(struct af_publisher *p);
void af_publisher_destroy(struct af_publisher *p);   /* releases current and retired */
/* Steals `s`; calls ->on_publish, then makes `s` current; the previous snapshot is
 * released now when no request holds it, else retired (above). */
void af_publisher_publish(struct af_publisher *p, struct af_snapshot *s);
/* New reference to the current snapshot, or NULL before the first publish. */
struct af_snapshot *af_publisher_acquire(struct af_publisher *p);

/* ---- status shared with /readyz and /metrics -------------------------------------------- */

struct af_cache_status {
    atomic_bool synced;                /* first full list applied */
    atomic_bool watch_up;              /* a watch stream is open right now */
    atomic_uint_least64_t down_since_ns;     /* monotonic; 0 when up */
    atomic_uint_least64_t last_event_ns;
    atomic_uint_least64_t last_sync_ns;      /* last full list or bookmark */
    atomic_uint_least64_t events_applied;
    atomic_uint_least64_t relists;
    atomic_uint_least64_t watch_restarts;
    atomic_uint_least64_t nodes;
    atomic_uint_least64_t pods;
    atomic_uint_least64_t events_posted;
    atomic_uint_least64_t events_dropped;
    /* Snapshots built and published by the watch path, and the writer thread's time
     * spent building them (under the cache lock) and publishing them. */
    atomic_uint_least64_t snapshots_published;
    atomic_uint_least64_t snapshot_build_ns;
    atomic_uint_least64_t snapshot_build_max_ns;
};

#endif
