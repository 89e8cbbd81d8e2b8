/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube overlays: Karpenter's NodeOverlays (karpenter.sh/v1alpha1), which say what an
 * instance type really costs, so that accelfit ranks types as Karpenter does
 * (docs/pricing.md#karpenter-nodeoverlays).
 *
 * One thread, its own curl handle and the transport of every request (transport.c):
 *   discovery  GET /apis/karpenter.sh/v1alpha1; while the API server does not serve
 *              nodeoverlays (no CRD: the common case), nothing is priced by overlays, nothing
 *              is logged as an error, and it asks again every OVERLAY_DISCOVERY_S (one
 *              small GET, so that a CRD installed later is seen within seconds)
 *   list       LIST the NodeOverlays, decode them (af_codec_decode_overlays), and hand the
 *              set to the cache, which prices every node again (af__kube_set_overlays)
 *   watch      WATCH from the list's resourceVersion; any change ends the watch and lists
 *              again (overlays are few: a list is cheaper than keeping a second copy
 *              right); a 410 lists again; bookmarks only move the resourceVersion on
 * The backoff and the wait for stop are the reflector's (af__kube_backoff, reflector.c).
 */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/kube.h"
#include "accelfit/prices.h"
#include "accelfit/util.h"

#include "kube/internal.h"
#include "accelfit/banned.h"

#define OVERLAY_GV "/apis/karpenter.sh/v1alpha1"
#define OVERLAY_PATH "/apis/karpenter.sh/v1alpha1/nodeoverlays"
#define OVERLAY_DISCOVERY_S 15.0
#define OVERLAY_TIMEOUT_MS 10000L
#define OVERLAY_WATCH_BYTES (1u << 20)

struct overlay_watch {
    CURL *h;
    struct af_buf line;
    bool changed;              /* an ADDED, MODIFIED or DELETED: list again */
    bool expired;              /* 410: list again from now */
    char rv[64];
};

/* Lists the overlays and hands them to the cache; 0, or -1 (try again after a backoff). */
static int list(struct af_kube *k, CURL *h, struct overlay_watch *w)
{
    long status = 0;
    json_t *doc = NULL;
    char *text;
    struct af_overlays *o = NULL;
    struct af_error err;
    const char *rv;
    size_t changed;
    int rc = af__kube_request(k, h, "GET", OVERLAY_PATH, NULL, OVERLAY_TIMEOUT_MS, &status, &doc);

    if (rc || status != 200 || !doc) {
        char st[16];
        snprintf(st, sizeof(st), "%ld", status);
        if (!rc)
            AF_LOG(AF_LOG_WARN, "cannot list NodeOverlays", "status", st, NULL);
        json_decref(doc);
        return -1;
    }
    rv = json_string_value(json_object_get(json_object_get(doc, "metadata"), "resourceVersion"));
    snprintf(w->rv, sizeof(w->rv), "%s", rv ? rv : "");
    text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    rc = text ? af_codec_decode_overlays(text, strlen(text), &o, &err) : AF_EPARSE;
    af_free(text);
    if (rc) {
        AF_LOG(AF_LOG_WARN, "cannot read NodeOverlays", "error", err.text, NULL);
        return -1;
    }
    {
        char n[24];
        snprintf(n, sizeof(n), "%zu", o->n);
        changed = af__kube_set_overlays(k, o);
        snprintf(n + strlen(n), sizeof(n) - strlen(n), "/%zu", changed);
        AF_LOG(AF_LOG_INFO, "NodeOverlays read (overlays/nodes priced anew)", "count", n, NULL);
    }
    return 0;
}

static size_t watch_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct overlay_watch *w = ud;
    size_t n = size * nmemb, start = 0;
    long status = 0;

    curl_easy_getinfo(w->h, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200)
        return n;
    if (af_buf_add(&w->line, ptr, n))
        return 0;
    for (;;) {
        char *nl = memchr(w->line.buf + start, '\n', w->line.len - start);
        json_t *ev, *obj;
        const char *type, *rv;
        if (!nl)
            break;
        ev = json_loadb(w->line.buf + start, (size_t)(nl - (w->line.buf + start)), 0, NULL);
        obj = json_object_get(ev, "object");
        type = json_string_value(json_object_get(ev, "type"));
        rv = json_string_value(json_object_get(json_object_get(obj, "metadata"),
                                               "resourceVersion"));
        if (type && !strcmp(type, "ERROR"))
            w->expired = true;   /* 410 or another error: list again */
        else if (type && strcmp(type, "BOOKMARK"))
            w->changed = true;
        if (type && !strcmp(type, "BOOKMARK") && rv)
            snprintf(w->rv, sizeof(w->rv), "%s", rv);
        json_decref(ev);
        start = (size_t)(nl - w->line.buf) + 1;
    }
    memmove(w->line.buf, w->line.buf + start, w->line.len - start);
    w->line.len -= start;
    w->line.buf[w->line.len] = '\0';
    return w->changed || w->expired ? 0 : n;
}

/* Watches from w->rv until a change, an error or the watch's timeout; the HTTP status. */
static long watch(struct af_kube *k, struct overlay_watch *w)
{
    int tmin = k->opt.watch_timeout_min_s > 0 ? k->opt.watch_timeout_min_s : 300;
    char *pq = af_xasprintf("%s?watch=true&allowWatchBookmarks=true&timeoutSeconds=%d"
                            "&resourceVersion=%s",
                            OVERLAY_PATH, tmin + (int)(af__kube_rand01() * tmin), w->rv);

    af_buf_reset(&w->line);
    w->changed = w->expired = false;
    return af__kube_get_stream(k, w->h, pq, watch_cb, w);
}

void *af__kube_overlays_main(void *arg)
{
    struct af_kube *k = arg;
    struct af_kube_backoff bo;
    struct overlay_watch w = {.h = curl_easy_init()};
    bool have = false, said = false;

    af_assert(w.h);
    af_buf_init(&w.line, OVERLAY_WATCH_BYTES);
    af__kube_backoff_init(&bo, k);
    while (!atomic_load(&k->stop)) {
        int s = af__kube_served(k, w.h, OVERLAY_GV, "nodeoverlays", OVERLAY_TIMEOUT_MS);
        long status;

        if (s <= 0) {
            if (s == 0 && have) {
                /* the CRD went away: its overlays price nothing any more */
                (void)af__kube_set_overlays(k, NULL);
                have = false;
            }
            if (s == 0 && !said) {
                AF_LOG(AF_LOG_INFO, "no NodeOverlays served (karpenter.sh/v1alpha1); asking "
                                    "again every 15 s", NULL);
                said = true;
            }
            if (s == 0 ? !af__kube_sleep(k, OVERLAY_DISCOVERY_S) : !af__kube_backoff_sleep(&bo, k))
                break;
            continue;
        }
        said = false;
        if (list(k, w.h, &w)) {
            if (!af__kube_backoff_sleep(&bo, k))
                break;
            continue;
        }
        have = true;
        do {
            status = watch(k, &w);
        } while (!atomic_load(&k->stop) && status == 200 && !w.changed && !w.expired);
        if (status != 200 && status != 410 && !atomic_load(&k->stop) &&
            !af__kube_backoff_sleep(&bo, k))
            break;
    }
    curl_easy_cleanup(w.h);
    af_buf_release(&w.line);
    return NULL;
}
