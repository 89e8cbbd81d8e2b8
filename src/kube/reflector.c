/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube reflector: one thread per kind (nodes, and pods as two sets: cache.h) LISTs (paginated, 410 on a
 * continue token answered with one full list) and WATCHes (bookmarks, in-band
 * 410, backoff with full jitter), applying what it decodes to the shared cache
 * under ->cache_lock; the publisher thread coalesces changes and publishes
 * snapshots. The lock is never held across network I/O or JSON decoding.
 */
#include <curl/curl.h>
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accelfit/codec.h"
#include "accelfit/decide.h"
#include "accelfit/kube.h"
#include "accelfit/util.h"

#include "kube/internal.h"
#include "accelfit/banned.h"

double af__kube_rand01(void)
{
    static _Thread_local unsigned seed;
    if (!seed)
        seed = (unsigned)af_now_ns() ^ (unsigned)(uintptr_t)&seed;
    return (double)rand_r(&seed) / ((double)RAND_MAX + 1.0);
}

/* Sleeps up to `s` seconds; returns false when stop was requested. */
static bool sleep_stop(struct af_kube *k, double s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long ns = (long long)ts.tv_nsec + (long long)(s * 1e9);
    ts.tv_sec += (time_t)(ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    pthread_mutex_lock(&k->lock);
    while (!atomic_load(&k->stop)) {
        if (pthread_cond_timedwait(&k->cond, &k->lock, &ts) == ETIMEDOUT)
            break;
    }
    pthread_mutex_unlock(&k->lock);
    return !atomic_load(&k->stop);
}

void af__kube_backoff_init(struct af_kube_backoff *b, struct af_kube *k)
{
    b->next = k->opt.backoff_initial_s;
    b->last_trouble = af_now_ns();
}

bool af__kube_backoff_sleep(struct af_kube_backoff *b, struct af_kube *k)
{
    uint64_t now = af_now_ns();
    double d;

    if (now - b->last_trouble > 120ull * 1000000000ull)
        b->next = k->opt.backoff_initial_s;
    b->last_trouble = now;
    d = b->next * af__kube_rand01();
    b->next *= 2;
    if (b->next > k->opt.backoff_max_s)
        b->next = k->opt.backoff_max_s;
    return sleep_stop(k, d);
}

static void mark_dirty(struct af_kube *k);

bool af__kube_sleep(struct af_kube *k, double s)
{
    return sleep_stop(k, s);
}

/* Prices a node about to be cached with the book of ->live and the NodeOverlays of
 * ->overlays, when there are any, under the config it was decoded with; under ->cache_lock. */
static void price_node(struct af_kube *k, const struct af_config *cfg, struct af_node_info *n)
{
    struct af_price_inputs in = {.live = k->live, .overlays = k->overlays};

    if (k->live || k->overlays)
        af_node_price(cfg->catalog, cfg->policy, &in, n);
}

/* Under ->cache_lock: prices every cached node with ->live and ->overlays. */
static size_t reprice_locked(struct af_kube *k, const struct af_config *cfg)
{
    struct af_price_inputs in = {.live = k->live, .overlays = k->overlays};

    af_assert_held(&k->cache_lock);
    return af_cache_reprice(k->cache, cfg->catalog, cfg->policy, &in);
}

size_t af_kube_reprice(struct af_kube *k)
{
    struct af_prices *p;
    struct af_config *cfg;
    size_t changed;

    if (!k || !k->opt.prices)
        return 0;
    p = af_prices_holder_get(k->opt.prices);
    cfg = af_config_holder_get(k->cfg);
    pthread_mutex_lock(&k->cache_lock);
    af_prices_unref(k->live);
    k->live = p;
    changed = reprice_locked(k, cfg);
    pthread_mutex_unlock(&k->cache_lock);
    af_config_unref(cfg);
    if (changed)
        mark_dirty(k);
    return changed;
}

size_t af__kube_set_overlays(struct af_kube *k, struct af_overlays *o)
{
    struct af_config *cfg = af_config_holder_get(k->cfg);
    size_t changed;

    pthread_mutex_lock(&k->cache_lock);
    af_overlays_unref(k->overlays);
    k->overlays = o;
    changed = reprice_locked(k, cfg);
    pthread_mutex_unlock(&k->cache_lock);
    af_config_unref(cfg);
    if (changed)
        mark_dirty(k);
    return changed;
}

size_t af__kube_set_dra(struct af_kube *k, struct af_dra *d)
{
    size_t changed;

    pthread_mutex_lock(&k->cache_lock);
    changed = af_cache_set_dra(k->cache, d);
    pthread_mutex_unlock(&k->cache_lock);
    mark_dirty(k);   /* the snapshot carries the claims even when no node changed */
    return changed;
}

static void mark_dirty(struct af_kube *k)
{
    pthread_mutex_lock(&k->lock);
    if (!k->dirty) {
        k->dirty = true;
        k->dirty_since = af_now_ns();
        pthread_cond_broadcast(&k->cond);
    }
    pthread_mutex_unlock(&k->lock);
}

/* ---- reflector ---------------------------------------------------------------------------------- */

static const char *kind_path(enum af_kind kind)
{
    return kind == AF_KIND_NODE ? "/api/v1/nodes" : "/api/v1/pods";
}

/* What the log calls the objects a reflector keeps. */
static const char *refl_name(const struct reflector *r)
{
    if (r->kind == AF_KIND_NODE)
        return "nodes";
    return r->set == AF_PODS_MANAGED ? "managed pods" : "pods";
}

/*
 * The selectors of a reflector's list and watch, each followed by '&'. Pods come
 * as two disjoint sets (cache.h): those not labelled accelfit.io/managed=true
 * while they are not terminal (a pod that turns Succeeded or Failed leaves the
 * field selector, which the API server's watch says with DELETED), and the
 * managed ones whatever their phase, so the brake sees a Failed pod and a
 * rollout counts a finished Job. Terminal pods of the first set are never sent:
 * a cluster's finished pods cost nothing here.
 */
static const char *refl_selectors(const struct reflector *r)
{
    if (r->kind == AF_KIND_NODE)
        return "";
    if (r->set == AF_PODS_MANAGED)
        return "labelSelector=accelfit.io%2Fmanaged%3Dtrue&";
    return "labelSelector=accelfit.io%2Fmanaged%21%3Dtrue&"
           "fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed&";
}

/* The cache's resync of what this reflector keeps. */
static void refl_resync(struct reflector *r, bool begin)
{
    struct af_cache *c = r->k->cache;

    if (r->kind == AF_KIND_NODE)
        (begin ? af_cache_begin_resync : af_cache_end_resync)(c, AF_KIND_NODE);
    else
        (begin ? af_cache_begin_resync_pods : af_cache_end_resync_pods)(c, r->set);
}

struct list_items {
    struct af_node_info **nodes;
    size_t n_nodes, cap_nodes;
    struct af_pod_info **pods;
    size_t n_pods, cap_pods;
};

static void list_item_cb(void *ud, struct af_node_info *node, struct af_pod_info *pod)
{
    struct list_items *li = ud;
    if (node) {
        AF_GROW(li->nodes, li->cap_nodes, li->n_nodes + 1);
        li->nodes[li->n_nodes++] = node;
    }
    if (pod) {
        AF_GROW(li->pods, li->cap_pods, li->n_pods + 1);
        li->pods[li->n_pods++] = pod;
    }
}

static void update_counts(struct af_kube *k);

/* Applies the decoded items to the cache (one lock for the batch) and empties the batch. */
static void apply_items(struct reflector *r, struct list_items *li)
{
    struct af_kube *k = r->k;
    struct af_config *cfg;
    if (!li->n_nodes && !li->n_pods)
        return;
    cfg = af_config_holder_get(k->cfg);
    pthread_mutex_lock(&k->cache_lock);
    for (size_t i = 0; i < li->n_nodes; i++) {
        price_node(k, cfg, li->nodes[i]);
        af_cache_upsert_node(k->cache, li->nodes[i]);
    }
    for (size_t i = 0; i < li->n_pods; i++)
        af_cache_upsert_pod(k->cache, li->pods[i]);
    update_counts(k);
    pthread_mutex_unlock(&k->cache_lock);
    af_config_unref(cfg);
    li->n_nodes = li->n_pods = 0;
}

#define LIST_APPLY_BATCH 256

/*
 * LIST bodies are decoded as they arrive (af_list_stream) and applied in batches: the
 * page is never held whole. Other answers keep a little of their body for the log.
 */
static size_t body_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct reflector *r = ud;
    size_t n = size * nmemb;
    if (!r->http_status)
        curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->http_status);
    if (r->http_status != 200 || !r->list) {
        if (r->body.len < 4096 &&
            af_buf_add(&r->body, ptr, n < 4096 - r->body.len ? n : 4096 - r->body.len))
            return 0;
        return n;
    }
    (void)af_list_stream_feed(r->list, ptr, n);
    if (r->batch->n_nodes + r->batch->n_pods >= LIST_APPLY_BATCH)
        apply_items(r, r->batch);
    return n;
}

static void update_counts(struct af_kube *k)
{
    atomic_store(&k->st->nodes, af_cache_node_count(k->cache));
    atomic_store(&k->st->pods, af_cache_pod_count(k->cache));
}

static void set_up(struct reflector *r, bool up)
{
    struct af_kube *k = r->k;
    pthread_mutex_lock(&k->lock);
    r->up = up;
    bool all = true;
    for (size_t i = 0; i < AF_ARRAY_SIZE(k->refl); i++)
        all = all && k->refl[i].up;
    atomic_store(&k->st->watch_up, all);
    if (all)
        atomic_store(&k->st->down_since_ns, 0);
    else if (!atomic_load(&k->st->down_since_ns))
        atomic_store(&k->st->down_since_ns, af_now_ns());
    pthread_mutex_unlock(&k->lock);
}

/* Performs a GET into r->body. Returns 0 with r->http_status set, AF_ECANCELED or AF_ECONN. */
static int do_get(struct reflector *r, const char *pq, struct creds *c)
{
    struct af_kube *k = r->k;
    char *url;
    af_buf_reset(&r->body);
    r->failed = false;
    r->http_status = 0;
    /* protobuf when the API server has it: it writes a large list faster and smaller
     * (codec/proto.c, docs/cluster.md); a server without it answers JSON, which the stream
     * reads as well */
    struct curl_slist *hdr = af__kube_http_setup_accept(
        k, r->h, pq, c, &url,
        k->opt.protobuf ? "application/vnd.kubernetes.protobuf, application/json"
                        : "application/json");
    curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, body_cb);
    curl_easy_setopt(r->h, CURLOPT_WRITEDATA, r);
    CURLcode cc = curl_easy_perform(r->h);
    curl_slist_free_all(hdr);
    af_free(url);
    r->http_status = 0;
    curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->http_status);
    if (atomic_load(&k->stop))
        return AF_ECANCELED;
    if (cc != CURLE_OK) {
        AF_LOG(AF_LOG_WARN, "list failed", "kind", refl_name(r), "error",
               r->failed ? "response too large" : curl_easy_strerror(cc), NULL);
        return AF_ECONN;
    }
    return 0;
}

static int status_to_rc(long st)
{
    if (st == 401)
        return AF_EUNAUTH;
    if (st == 410)
        return AF_EEXPIRED;
    return AF_EHTTP;
}

/* LIST (paginated) and resync the cache. `rv0` is "0" for the first list, "" later. */
static int do_list(struct reflector *r, const char *rv0)
{
    struct af_kube *k = r->k;
    char *cont = NULL, *rv = NULL;
    int limit = k->opt.page_size > 0 ? k->opt.page_size : 500;
    bool retried_full = false;
    int rc = 0;

    pthread_mutex_lock(&k->cache_lock);
    refl_resync(r, true);
    pthread_mutex_unlock(&k->cache_lock);
    for (;;) {
        struct af_buf pq = AF_BUF_INIT(0);
        struct creds c;
        rc = af_buf_printf(&pq, "%s?", kind_path(r->kind));
        if (!rc && limit > 0)
            rc = af_buf_printf(&pq, "limit=%d&", limit);
        if (!rc && cont) {
            char *esc = curl_easy_escape(r->h, cont, 0);
            rc = af_buf_printf(&pq, "continue=%s&", esc);
            curl_free(esc);
        } else if (!rc && *rv0) {
            rc = af_buf_printf(&pq, "resourceVersion=%s&", rv0);
        }
        if (!rc)
            rc = af_buf_puts(&pq, refl_selectors(r));
        af_assert(rc == 0);
        pq.buf[--pq.len] = '\0'; /* trailing & or ? */
        struct list_items li = {0};
        struct af_config *cfg = af_config_holder_get(k->cfg);
        af__kube_creds_get(k, &c);
        r->list = af_list_stream_new(cfg, true, list_item_cb, &li);
        r->batch = &li;
        rc = do_get(r, pq.buf, &c);
        af_buf_release(&pq);
        if (!rc && r->http_status == 401)
            af__kube_creds_invalidate(k, c.gen);
        af__kube_creds_clear(&c);
        struct af_error err;
        memset(&err, 0, sizeof(err));
        char *page_rv = NULL;
        size_t skipped = 0;
        int lrc = 0;
        if (!rc && r->http_status == 200) {
            af_free(cont);
            cont = NULL;
            lrc = af_list_stream_finish(r->list, &page_rv, &cont, &skipped, &err);
        }
        r->protobuf = af_list_stream_protobuf(r->list);
        af_list_stream_free(r->list);
        r->list = NULL;
        r->batch = NULL;
        af_config_unref(cfg);
        /* what was decoded is applied, even from a page that then failed (the relist
         * does not complete, so nothing is swept) */
        apply_items(r, &li);
        af_free(li.nodes);
        af_free(li.pods);
        if (rc) {
            af_free(page_rv);
            break;
        }
        if (r->http_status == 410 && cont && !retried_full) {
            /* continue token expired: one full (unpaginated) consistent list */
            AF_LOG(AF_LOG_INFO, "continue token expired; full list", "kind", refl_name(r),
                   NULL);
            af_free(cont);
            cont = NULL;
            retried_full = true;
            limit = 0;
            rv0 = "";
            pthread_mutex_lock(&k->cache_lock);
            refl_resync(r, true);
            pthread_mutex_unlock(&k->cache_lock);
            continue;
        }
        if (r->http_status != 200) {
            char st[16];
            snprintf(st, sizeof(st), "%ld", r->http_status);
            AF_LOG(AF_LOG_WARN, "list failed", "kind", refl_name(r), "status", st, NULL);
            rc = status_to_rc(r->http_status);
            break;
        }
        rc = lrc;
        if (!rc && skipped) {
            char n[24];
            snprintf(n, sizeof(n), "%zu", skipped);
            AF_LOG(AF_LOG_WARN, "skipped undecodable objects in list", "kind",
                   refl_name(r), "count", n, "first", err.text, NULL);
        }
        if (rc) {
            AF_LOG(AF_LOG_ERROR, "cannot decode list", "kind", refl_name(r), "error",
                   err.text, NULL);
            af_free(page_rv);
            break;
        }
        if (page_rv) {
            af_free(rv);
            rv = page_rv;
        }
        if (!cont || !*cont)
            break;
        mark_dirty(k);
    }
    if (!rc) {
        af_free(r->rv);
        r->rv = rv ? rv : af_xstrdup("");
        rv = NULL;
        pthread_mutex_lock(&k->cache_lock);
        refl_resync(r, false);
        af_cache_note_resource_version(k->cache, r->rv);
        r->listed = true;
        bool all = true;
        for (size_t i = 0; i < AF_ARRAY_SIZE(k->refl); i++)
            all = all && k->refl[i].listed;
        if (all && !atomic_load(&k->st->synced)) {
            af_cache_set_synced(k->cache, true);
            atomic_store(&k->st->synced, true);
        }
        update_counts(k);
        pthread_mutex_unlock(&k->cache_lock);
        atomic_store(&k->st->last_sync_ns, af_now_ns());
        /* every completed full list counts, the initial one of each kind included */
        atomic_fetch_add(&k->st->relists, 1);
        AF_LOG(AF_LOG_INFO, "listed", "kind", refl_name(r), "resourceVersion", r->rv,
               "encoding", r->protobuf ? "protobuf" : "json", NULL);
        mark_dirty(k);
#if defined(__GLIBC__) && !AF_SANITIZED
        /* Decoding a list frees as much as it allocates, spread over this thread's arena;
         * give the free pages back rather than keep the peak resident. Not under a
         * sanitizer: its allocator replaces glibc's, which malloc_trim would then initialize
         * on this thread; two reflectors doing so at once leave glibc's arena count one
         * short, and the second thread to exit aborts ("__malloc_arena_thread_freeres:
         * a->attached_threads > 0"). */
        malloc_trim(0);
#endif
    }
    af_free(cont);
    af_free(rv);
    return rc;
}

/* Applies up to one batch of the complete lines in r->line; keeps the rest. */
static void process_batch(struct reflector *r)
{
    struct af_kube *k = r->k;
    char *buf = r->line.buf;
    size_t start = 0, n = r->line.len;
    struct af_watch_event evs[64];
    size_t nev = 0;
    struct af_config *cfg = NULL;

    while (start < n) {
        char *nl = memchr(buf + start, '\n', n - start);
        if (!nl)
            break;
        size_t len = (size_t)(nl - (buf + start));
        const char *s = buf + start;
        start += len + 1;
        while (len && (s[len - 1] == '\r' || s[len - 1] == ' '))
            len--;
        if (!len)
            continue;
        if (!cfg)
            cfg = af_config_holder_get(k->cfg);
        struct af_error err;
        memset(&err, 0, sizeof(err));
        struct af_watch_event *ev = &evs[nev];
        memset(ev, 0, sizeof(*ev));
        if (af_codec_decode_watch_event(cfg, r->kind, s, len, ev, &err)) {
            /* Skipped, not retried: restarting from the same RV would replay the same
             * event forever and leave every other object stale. */
            AF_LOG(AF_LOG_ERROR, "undecodable watch event skipped", "kind", refl_name(r),
                   "error", err.text, NULL);
            af_watch_event_clear(ev);
            continue;
        }
        if (ev->pod && ev->rv)
            ev->pod->rv = strtoull(ev->rv, NULL, 10);
        nev++;
        if (ev->type == AF_WATCH_ERROR) {
            if (ev->status_code == 410) {
                r->expired = true;
            } else {
                char code[16];
                snprintf(code, sizeof(code), "%d", ev->status_code);
                AF_LOG(AF_LOG_WARN, "watch error event", "kind", refl_name(r), "code",
                       code, "message", ev->status_message ? ev->status_message : "", NULL);
                r->failed = true;
            }
            break;
        }
        if (nev == AF_ARRAY_SIZE(evs))
            break; /* apply this batch; the rest is handled by the next call */
    }
    if (nev) {
        uint64_t applied = 0;
        pthread_mutex_lock(&k->cache_lock);
        for (size_t i = 0; i < nev; i++) {
            struct af_watch_event *ev = &evs[i];
            switch (ev->type) {
            case AF_WATCH_ADDED:
            case AF_WATCH_MODIFIED:
                if (ev->node) {
                    price_node(k, cfg, ev->node);   /* decoded: cfg was taken */
                    af_cache_upsert_node(k->cache, af_node_info_ref(ev->node));
                }
                if (ev->pod)
                    af_cache_upsert_pod(k->cache, af_pod_info_ref(ev->pod));
                applied++;
                break;
            case AF_WATCH_DELETED:
                if (ev->node)
                    af_cache_delete_node(k->cache, ev->node->name);
                if (ev->pod)
                    af_cache_delete_pod_in(k->cache, r->set, ev->pod->ns, ev->pod->name);
                applied++;
                break;
            case AF_WATCH_BOOKMARK:
                atomic_store(&k->st->last_sync_ns, af_now_ns());
                break;
            case AF_WATCH_ERROR:
                break;
            }
            if (ev->type != AF_WATCH_ERROR && ev->rv && *ev->rv) {
                af_cache_note_resource_version(k->cache, ev->rv);
                af_free(r->rv);
                r->rv = ev->rv;
                ev->rv = NULL;
            }
        }
        update_counts(k);
        pthread_mutex_unlock(&k->cache_lock);
        for (size_t i = 0; i < nev; i++)
            af_watch_event_clear(&evs[i]);
        r->events += nev;
        if (applied) {
            atomic_fetch_add(&k->st->events_applied, applied);
            atomic_store(&k->st->last_event_ns, af_now_ns());
            mark_dirty(k);
        }
    }
    if (cfg)
        af_config_unref(cfg);
    /* keep the unconsumed tail */
    if (start > 0) {
        memmove(buf, buf + start, n - start);
        r->line.len = n - start;
        buf[r->line.len] = '\0';
    }
}

static void process_lines(struct reflector *r)
{
    while (!r->failed && !r->expired && r->line.len && memchr(r->line.buf, '\n', r->line.len))
        process_batch(r);
}

static size_t watch_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct reflector *r = ud;
    size_t n = size * nmemb;
    if (!r->streaming) {
        curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->http_status);
        if (r->http_status != 200) {
            /* keep a bit of the error body for the log */
            if (r->body.len < 4096 && af_buf_add(&r->body, ptr, n < 4096 ? n : 4096))
                return n;
            return n;
        }
        r->streaming = true;
    }
    if (af_buf_add(&r->line, ptr, n)) {
        AF_LOG(AF_LOG_ERROR, "watch event exceeds limit; restarting watch", "kind",
               refl_name(r), NULL);
        r->failed = true;
        return 0;
    }
    if (memchr(ptr, '\n', n))
        process_lines(r);
    return (r->failed || r->expired) ? 0 : n;
}

/*
 * The watch's progress callback (libcurl calls it at least about once a second, idle or
 * not): ends the transfer on stop, as every transfer's does, and when a relist was asked
 * for (af_kube_reclassify_nodes), so that a quiet watch does not hold it back.
 */
static int watch_xferinfo_cb(void *ud, curl_off_t dlt, curl_off_t dln, curl_off_t ult,
                             curl_off_t uln)
{
    struct reflector *r = ud;
    (void)dlt;
    (void)dln;
    (void)ult;
    (void)uln;
    return atomic_load(&r->k->stop) || atomic_load(&r->relist) ? 1 : 0;
}

static size_t header_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct reflector *r = ud;
    size_t n = size * nmemb;
    if (n <= 2 && (ptr[0] == '\r' || ptr[0] == '\n')) {
        long st = 0;
        curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &st);
        if (st == 200)
            set_up(r, true);
    }
    return n;
}

/* One WATCH from r->rv. 0: ended normally (timeout), else an AF_E* code. */
static int do_watch(struct reflector *r, int *short_watch)
{
    struct af_kube *k = r->k;
    int tmin = k->opt.watch_timeout_min_s > 0 ? k->opt.watch_timeout_min_s : 300;
    int timeout = tmin + (int)(af__kube_rand01() * tmin);
    char *pq = af_xasprintf("%s?%swatch=true&resourceVersion=%s&allowWatchBookmarks=true"
                            "&timeoutSeconds=%d",
                            kind_path(r->kind), refl_selectors(r), r->rv ? r->rv : "", timeout);
    struct creds c;
    char *url;
    uint64_t t0 = af_now_ns();

    af__kube_creds_get(k, &c);
    af_buf_reset(&r->body);
    af_buf_reset(&r->line);
    r->streaming = r->expired = r->failed = false;
    r->http_status = 0;
    r->events = 0;
    struct curl_slist *hdr = af__kube_http_setup(k, r->h, pq, &c, &url);
    curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, watch_cb);
    curl_easy_setopt(r->h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->h, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(r->h, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(r->h, CURLOPT_XFERINFOFUNCTION, watch_xferinfo_cb);
    curl_easy_setopt(r->h, CURLOPT_XFERINFODATA, r);
    CURLcode cc = curl_easy_perform(r->h);
    curl_slist_free_all(hdr);
    af_free(url);
    af_free(pq);
    /* A watch ended to list again (a reload) is no outage: the list that follows is a
     * fresher read than the watch. Only a failure of that list makes the kind down. */
    if (!atomic_load(&r->relist) || atomic_load(&k->stop))
        set_up(r, false);
    if (!r->http_status)
        curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->http_status);
    unsigned gen = c.gen;
    af__kube_creds_clear(&c);
    af_buf_release(&r->line);
    *short_watch = af_now_ns() - t0 < 1000000000ull && r->events == 0;

    if (atomic_load(&k->stop))
        return AF_ECANCELED;
    if (atomic_load(&r->relist)) {
        /* ended to list again (the loop does it at once): whatever else happened to
         * this watch, the list supersedes it */
        *short_watch = 0;
        return 0;
    }
    if (r->expired) {
        AF_LOG(AF_LOG_INFO, "watch expired (410); relisting", "kind", refl_name(r), NULL);
        return AF_EEXPIRED;
    }
    if (r->http_status && r->http_status != 200) {
        char st[16];
        snprintf(st, sizeof(st), "%ld", r->http_status);
        AF_LOG(AF_LOG_WARN, "watch failed", "kind", refl_name(r), "status", st, NULL);
        if (r->http_status == 401)
            af__kube_creds_invalidate(k, gen);
        return status_to_rc(r->http_status);
    }
    if (r->failed)
        return AF_EIO;
    if (cc != CURLE_OK) {
        AF_LOG(AF_LOG_WARN, "watch interrupted", "kind", refl_name(r), "error",
               curl_easy_strerror(cc), NULL);
        return AF_ECONN;
    }
    return 0;
}

void *af__kube_reflector_main(void *arg)
{
    struct reflector *r = arg;
    struct af_kube *k = r->k;
    struct af_kube_backoff bo;
    bool need_list = true;
    bool first_list = true;
    bool watched = false;
    int unauth_retries = 0;

    af__kube_backoff_init(&bo, k);
    while (!atomic_load(&k->stop)) {
        int rc, short_watch = 0;
        if (atomic_exchange(&r->relist, false)) {
            /* After a policy or catalog swap: every node read again under the new config.
             * A list, not a re-classification in place, because the cache keeps only what
             * decisions read of a node, not the labels and annotations classifying it
             * reads (af_kube_reclassify_nodes). A consistent list, as after a 410. */
            if (!need_list)
                AF_LOG(AF_LOG_INFO, "relisting to classify under the new policy", "kind",
                       refl_name(r), NULL);
            need_list = true;
        }
        if (need_list) {
            rc = do_list(r, first_list ? "0" : "");
            if (rc && r->up)
                set_up(r, false);   /* a relist after a reload failed: down from now */
            if (!rc) {
                need_list = false;
                first_list = false;
            }
        } else {
            if (watched)
                atomic_fetch_add(&k->st->watch_restarts, 1);
            watched = true;
            rc = do_watch(r, &short_watch);
            if (rc == AF_EEXPIRED) {
                need_list = true;
                continue; /* relist right away with a consistent read */
            }
            if (!rc && short_watch)
                rc = AF_EIO; /* "very short watch": back off */
        }
        if (rc == AF_ECANCELED)
            break;
        if (rc == AF_EUNAUTH && unauth_retries++ < 1)
            continue; /* credentials were refreshed: retry once at once */
        if (!rc) {
            unauth_retries = 0;
            continue;
        }
        /* back off: full jitter, doubling, reset after 2 min without trouble */
        unauth_retries = 0;
        if (!af__kube_backoff_sleep(&bo, k))
            break;
    }
    return NULL;
}

/* ---- publisher ------------------------------------------------------------------------------ */

void *af__kube_publisher_main(void *arg)
{
    struct af_kube *k = arg;
    pthread_mutex_lock(&k->lock);
    while (!atomic_load(&k->stop)) {
        if (!k->dirty) {
            pthread_cond_wait(&k->cond, &k->lock);
            continue;
        }
        uint64_t due = k->dirty_since + (uint64_t)(k->opt.publish_interval_s * 1e9);
        uint64_t now = af_now_ns();
        if (now < due) {
            pthread_mutex_unlock(&k->lock);
            double left = (double)(due - now) / 1e9;
            (void)sleep_stop(k, left);
            pthread_mutex_lock(&k->lock);
            continue;
        }
        k->dirty = false;
        pthread_mutex_unlock(&k->lock);
        uint64_t t0 = af_now_ns();
        pthread_mutex_lock(&k->cache_lock);
        struct af_snapshot *s = af_cache_snapshot(k->cache);
        pthread_mutex_unlock(&k->cache_lock);
        af_publisher_publish(k->pub, s);
        uint64_t took = af_now_ns() - t0;
        atomic_fetch_add(&k->st->snapshots_published, 1);
        atomic_fetch_add(&k->st->snapshot_build_ns, took);
        if (took > atomic_load(&k->st->snapshot_build_max_ns))
            atomic_store(&k->st->snapshot_build_max_ns, took);
        pthread_mutex_lock(&k->lock);
    }
    pthread_mutex_unlock(&k->lock);
    return NULL;
}
