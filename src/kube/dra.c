/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube dra: the Dynamic Resource Allocation objects of resource.k8s.io/v1 (Kubernetes 1.34+):
 * ResourceSlices, ResourceClaims, ResourceClaimTemplates and DeviceClasses
 * (docs/decisions.md#8-accelerators-allocated-by-dra). One thread per kind, each with its own
 * curl handle:
 *   discovery  GET /apis/resource.k8s.io/v1; while the API server does not serve the kind
 *              (a cluster before 1.34: the common case), nothing changes, nothing is logged
 *              as an error, and it asks again every DRA_DISCOVERY_S
 *   list       LIST the kind in pages (limit DRA_PAGE), decode each object into a compact
 *              record (accelfit/dra.h; the JSON is dropped), and replace the kind's table
 *   watch      WATCH from the list's resourceVersion with bookmarks, applying each ADDED,
 *              MODIFIED and DELETED to the table as it comes; a 410 (in-band or status)
 *              lists again
 * A fifth thread turns the four tables into a new index (af_dra_build) at most every
 * DRA_COALESCE_S after a change, which the cache takes (af_cache_set_dra: the nodes get their
 * devices, running pods their claims' devices) and the next snapshot publishes. The backoff
 * and the wait for stop are the reflector's.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/dra.h"
#include "accelfit/kube.h"
#include "accelfit/util.h"

#include "kube/internal.h"
#include "accelfit/banned.h"

#define DRA_GV "/apis/resource.k8s.io/v1"
#define DRA_DISCOVERY_S 60.0
#define DRA_TIMEOUT_MS 30000L
#define DRA_PAGE 200
#define DRA_PAGE_BYTES (64u << 20)     /* one page of a list */
#define DRA_EVENT_BYTES (16u << 20)    /* one watch event */
#define DRA_COALESCE_S 0.1             /* changes gathered into one index */

static const char *const dra_resources[AF_DRA_KINDS] = {
    [AF_DRA_SLICE] = "resourceslices",
    [AF_DRA_CLAIM] = "resourceclaims",
    [AF_DRA_TEMPLATE] = "resourceclaimtemplates",
    [AF_DRA_CLASS] = "deviceclasses",
};

/* One kind's objects: records by namespace/name (watch thread of the kind writes, under
 * dra_lock; the rebuild reads all four under it). */
struct dra_table {
    size_t n, cap;
    struct af_dra_obj *objs;
};

struct dra_shared {
    pthread_mutex_t lock;
    struct dra_table t[AF_DRA_KINDS];     /* protected by ->lock */
    pthread_cond_t cond;
    bool dirty;                          /* a table changed since the last index; ->lock */
    pthread_t publisher;
};

struct dra_watch {
    struct af_kube *k;
    enum af_dra_kind kind;
    pthread_t thread;
    CURL *h;
    struct af_buf line;
    bool expired;              /* 410 or another in-band error: list again */
    char rv[64];
};

static struct dra_shared *shared_of(struct af_kube *k)
{
    return k->dra;
}

static bool same_key(const struct af_dra_obj *a, const struct af_dra_obj *b)
{
    const char *an = af_dra_obj_ns(a), *bn = af_dra_obj_ns(b);
    return !strcmp(af_dra_obj_name(a), af_dra_obj_name(b)) &&
           !strcmp(an ? an : "", bn ? bn : "");
}

static void table_clear(struct dra_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        af_dra_obj_clear(&t->objs[i]);
    af_free(t->objs);
    memset(t, 0, sizeof(*t));
}

/* Takes `o` into the table (replacing the record of the same name) or, `del`, drops it. */
static void table_apply(struct dra_table *t, struct af_dra_obj *o, bool del)
{
    for (size_t i = 0; i < t->n; i++) {
        if (!same_key(&t->objs[i], o))
            continue;
        af_dra_obj_clear(&t->objs[i]);
        if (del) {
            t->objs[i] = t->objs[--t->n];
            af_dra_obj_clear(o);
        } else {
            t->objs[i] = *o;
            memset(o, 0, sizeof(*o));
        }
        return;
    }
    if (del) {
        af_dra_obj_clear(o);
        return;
    }
    af_grow((void **)&t->objs, &t->cap, t->n + 1, sizeof(*t->objs));
    t->objs[t->n++] = *o;
    memset(o, 0, sizeof(*o));
}

/* Says a table changed: the publisher builds a new index within DRA_COALESCE_S. */
static void changed(struct af_kube *k)
{
    struct dra_shared *sh = shared_of(k);

    pthread_mutex_lock(&sh->lock);
    sh->dirty = true;
    pthread_cond_signal(&sh->cond);
    pthread_mutex_unlock(&sh->lock);
}

/* Builds the index of the four tables and hands it to the cache. */
static void publish(struct af_kube *k)
{
    struct dra_shared *sh = shared_of(k);
    struct af_dra_slice **sl;
    struct af_dra_claim **cl, **tp;
    struct af_dra_class **dc;
    struct af_dra *d;

    pthread_mutex_lock(&sh->lock);
    sl = af_xmalloc((sh->t[AF_DRA_SLICE].n + 1) * sizeof(*sl));
    cl = af_xmalloc((sh->t[AF_DRA_CLAIM].n + 1) * sizeof(*cl));
    tp = af_xmalloc((sh->t[AF_DRA_TEMPLATE].n + 1) * sizeof(*tp));
    dc = af_xmalloc((sh->t[AF_DRA_CLASS].n + 1) * sizeof(*dc));
    for (size_t i = 0; i < sh->t[AF_DRA_SLICE].n; i++)
        sl[i] = sh->t[AF_DRA_SLICE].objs[i].slice;
    for (size_t i = 0; i < sh->t[AF_DRA_CLAIM].n; i++)
        cl[i] = sh->t[AF_DRA_CLAIM].objs[i].claim;
    for (size_t i = 0; i < sh->t[AF_DRA_TEMPLATE].n; i++)
        tp[i] = sh->t[AF_DRA_TEMPLATE].objs[i].claim;
    for (size_t i = 0; i < sh->t[AF_DRA_CLASS].n; i++)
        dc[i] = sh->t[AF_DRA_CLASS].objs[i].cls;
    d = af_dra_build(sl, sh->t[AF_DRA_SLICE].n, cl, sh->t[AF_DRA_CLAIM].n, tp,
                     sh->t[AF_DRA_TEMPLATE].n, dc, sh->t[AF_DRA_CLASS].n);
    pthread_mutex_unlock(&sh->lock);
    af_free(sl);
    af_free(cl);
    af_free(tp);
    af_free(dc);
    (void)af__kube_set_dra(k, d);
}

/* The publisher: after a change, waits DRA_COALESCE_S for more (an index of 5,000 nodes of 8
 * devices takes tens of milliseconds to build: not once per event), then builds one. */
static void *publisher_main(void *arg)
{
    struct af_kube *k = arg;
    struct dra_shared *sh = shared_of(k);

    pthread_mutex_lock(&sh->lock);
    while (!atomic_load(&k->stop)) {
        struct timespec until;
        if (!sh->dirty) {
            clock_gettime(CLOCK_REALTIME, &until);
            until.tv_nsec += 200000000L;
            if (until.tv_nsec >= 1000000000L) {
                until.tv_sec++;
                until.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&sh->cond, &sh->lock, &until);
            continue;
        }
        pthread_mutex_unlock(&sh->lock);
        if (!af__kube_sleep(k, DRA_COALESCE_S)) {
            pthread_mutex_lock(&sh->lock);
            break;
        }
        pthread_mutex_lock(&sh->lock);
        sh->dirty = false;
        pthread_mutex_unlock(&sh->lock);
        publish(k);
        pthread_mutex_lock(&sh->lock);
    }
    pthread_mutex_unlock(&sh->lock);
    return NULL;
}

static size_t page_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct af_buf *b = ud;
    size_t n = size * nmemb;

    return af_buf_add(b, ptr, n) ? 0 : n;
}

/* GET `pq` into `b`; the HTTP status (0 when there was no answer). */
static long get(struct af_kube *k, CURL *h, const char *pq, struct af_buf *b)
{
    struct creds c;
    char *url;
    struct curl_slist *hdr;
    long status = 0;

    af_buf_reset(b);
    af__kube_creds_get(k, &c);
    hdr = af__kube_http_setup(k, h, pq, &c, &url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, page_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, DRA_TIMEOUT_MS);
    if (curl_easy_perform(h) == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (status == 401)
        af__kube_creds_invalidate(k, c.gen);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 0L);
    curl_slist_free_all(hdr);
    af_free(url);
    af__kube_creds_clear(&c);
    return status;
}

static void list_cb(void *ud, struct af_dra_obj *o)
{
    table_apply(ud, o, false);
}

/* Lists the kind in pages into a new table that replaces the old; 0, or -1 (try again). */
static int list(struct dra_watch *w)
{
    struct af_kube *k = w->k;
    struct dra_table fresh = {0};
    struct af_buf b = AF_BUF_INIT(DRA_PAGE_BYTES);
    char *cont = NULL, *rv = NULL;
    size_t skipped = 0;
    int rc = -1;

    for (;;) {
        char *esc = cont ? curl_easy_escape(w->h, cont, 0) : NULL;
        char *pq = af_xasprintf("%s/%s?limit=%d%s%s", DRA_GV, dra_resources[w->kind], DRA_PAGE,
                                esc ? "&continue=" : "", esc ? esc : "");
        long status = get(k, w->h, pq, &b);
        struct af_error err;
        int drc;

        curl_free(esc);
        af_free(pq);
        af_free(cont);
        cont = NULL;
        if (status != 200) {
            char st[16];
            snprintf(st, sizeof(st), "%ld", status);
            if (!atomic_load(&k->stop))
                AF_LOG(AF_LOG_WARN, "cannot list DRA objects", "kind",
                       af_dra_kind_name(w->kind), "status", st, NULL);
            goto out;
        }
        af_free(rv);
        rv = NULL;
        drc = af_codec_decode_dra_list(w->kind, b.buf, b.len, list_cb, &fresh, &rv, &cont,
                                       &skipped, &err);
        if (drc) {
            AF_LOG(AF_LOG_WARN, "cannot read DRA objects", "kind", af_dra_kind_name(w->kind),
                   "error", err.text, NULL);
            goto out;
        }
        if (!cont)
            break;
    }
    snprintf(w->rv, sizeof(w->rv), "%s", rv ? rv : "");
    {
        struct dra_shared *sh = shared_of(k);
        char n[48];
        pthread_mutex_lock(&sh->lock);
        table_clear(&sh->t[w->kind]);
        sh->t[w->kind] = fresh;
        memset(&fresh, 0, sizeof(fresh));
        pthread_mutex_unlock(&sh->lock);
        snprintf(n, sizeof(n), "%zu", sh->t[w->kind].n);
        AF_LOG(AF_LOG_INFO, "DRA objects listed", "kind", af_dra_kind_name(w->kind), "count", n,
               NULL);
        if (skipped) {
            snprintf(n, sizeof(n), "%zu", skipped);
            AF_LOG(AF_LOG_WARN, "DRA objects left out (not objects, or without a name)", "kind",
                   af_dra_kind_name(w->kind), "count", n, NULL);
        }
    }
    changed(k);
    rc = 0;
out:
    table_clear(&fresh);
    af_free(cont);
    af_free(rv);
    af_buf_release(&b);
    return rc;
}

static size_t watch_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct dra_watch *w = ud;
    struct dra_shared *sh = shared_of(w->k);
    size_t n = size * nmemb, start = 0;
    long status = 0;

    curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200)
        return n;
    if (af_buf_add(&w->line, ptr, n)) {
        w->expired = true;   /* an event larger than any object: list again */
        return 0;
    }
    for (;;) {
        char *nl = memchr(w->line.buf + start, '\n', w->line.len - start);
        struct af_dra_event ev;
        struct af_error err;
        if (!nl)
            break;
        if (af_codec_decode_dra_event(w->kind, w->line.buf + start,
                                      (size_t)(nl - (w->line.buf + start)), &ev, &err)) {
            AF_LOG(AF_LOG_WARN, "cannot read a DRA watch event", "kind",
                   af_dra_kind_name(w->kind), "error", err.text, NULL);
        } else if (ev.type == AF_DRA_EV_ERROR) {
            w->expired = true;
        } else {
            if (ev.rv[0])
                snprintf(w->rv, sizeof(w->rv), "%s", ev.rv);
            if (ev.type != AF_DRA_EV_BOOKMARK) {
                pthread_mutex_lock(&sh->lock);
                table_apply(&sh->t[w->kind], &ev.obj, ev.type == AF_DRA_EV_DELETED);
                sh->dirty = true;
                pthread_cond_signal(&sh->cond);
                pthread_mutex_unlock(&sh->lock);
            }
        }
        af_dra_obj_clear(&ev.obj);
        start = (size_t)(nl - w->line.buf) + 1;
        if (w->expired)
            break;
    }
    memmove(w->line.buf, w->line.buf + start, w->line.len - start);
    w->line.len -= start;
    w->line.buf[w->line.len] = '\0';
    return w->expired ? 0 : n;
}

/* Watches from w->rv until an error or the watch's timeout; the HTTP status. */
static long watch(struct dra_watch *w)
{
    struct af_kube *k = w->k;
    int tmin = k->opt.watch_timeout_min_s > 0 ? k->opt.watch_timeout_min_s : 300;
    char *pq = af_xasprintf("%s/%s?watch=true&allowWatchBookmarks=true&timeoutSeconds=%d"
                            "&resourceVersion=%s",
                            DRA_GV, dra_resources[w->kind],
                            tmin + (int)(af__kube_rand01() * tmin), w->rv);

    af_buf_reset(&w->line);
    w->expired = false;
    return af__kube_get_stream(k, w->h, pq, watch_cb, w);
}

static void *dra_main(void *arg)
{
    struct dra_watch *w = arg;
    struct af_kube *k = w->k;
    struct af_kube_backoff bo;
    bool have = false, said = false;

    af_buf_init(&w->line, DRA_EVENT_BYTES);
    af__kube_backoff_init(&bo, k);
    while (!atomic_load(&k->stop)) {
        int s = af__kube_served(k, w->h, DRA_GV, dra_resources[w->kind], DRA_TIMEOUT_MS);
        long status;

        if (s <= 0) {
            if (s == 0 && have) {
                /* the API went away: its objects count no more */
                struct dra_shared *sh = shared_of(k);
                pthread_mutex_lock(&sh->lock);
                table_clear(&sh->t[w->kind]);
                pthread_mutex_unlock(&sh->lock);
                changed(k);
                have = false;
            }
            if (s == 0 && !said) {
                if (w->kind == AF_DRA_SLICE)   /* one line for the four kinds */
                    AF_LOG(AF_LOG_INFO, "no DRA objects served (resource.k8s.io/v1); asking "
                                        "again every minute", NULL);
                said = true;
            }
            if (s == 0 ? !af__kube_sleep(k, DRA_DISCOVERY_S) : !af__kube_backoff_sleep(&bo, k))
                break;
            continue;
        }
        said = false;
        if (list(w)) {
            if (!af__kube_backoff_sleep(&bo, k))
                break;
            continue;
        }
        have = true;
        do {
            status = watch(w);
        } while (!atomic_load(&k->stop) && status == 200 && !w->expired);
        if (status != 200 && status != 410 && !atomic_load(&k->stop) &&
            !af__kube_backoff_sleep(&bo, k))
            break;
    }
    af_buf_release(&w->line);
    return NULL;
}

void af__kube_dra_start(struct af_kube *k)
{
    struct dra_shared *sh = af_xcalloc(1, sizeof(*sh));
    struct dra_watch *ws = af_xcalloc(AF_DRA_KINDS, sizeof(*ws));

    pthread_mutex_init(&sh->lock, NULL);
    pthread_cond_init(&sh->cond, NULL);
    k->dra = sh;
    k->dra_watches = ws;
    pthread_create(&sh->publisher, NULL, publisher_main, k);
    for (int i = 0; i < AF_DRA_KINDS; i++) {
        ws[i].k = k;
        ws[i].kind = (enum af_dra_kind)i;
        ws[i].h = curl_easy_init();
        af_assert(ws[i].h);
        pthread_create(&ws[i].thread, NULL, dra_main, &ws[i]);
    }
}

void af__kube_dra_stop(struct af_kube *k)
{
    struct dra_watch *ws = k->dra_watches;
    struct dra_shared *sh = k->dra;

    if (!ws)
        return;
    for (int i = 0; i < AF_DRA_KINDS; i++) {
        pthread_join(ws[i].thread, NULL);
        curl_easy_cleanup(ws[i].h);
    }
    pthread_mutex_lock(&sh->lock);
    pthread_cond_broadcast(&sh->cond);
    pthread_mutex_unlock(&sh->lock);
    pthread_join(sh->publisher, NULL);
    pthread_cond_destroy(&sh->cond);
    for (int i = 0; i < AF_DRA_KINDS; i++)
        table_clear(&sh->t[i]);
    pthread_mutex_destroy(&sh->lock);
    af_free(sh);
    af_free(ws);
    k->dra = NULL;
    k->dra_watches = NULL;
}
