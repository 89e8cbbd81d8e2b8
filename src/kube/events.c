/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube events: core/v1 Events on pods, queued without blocking (deduplicated
 * per (pod uid, reason, message) for 10 minutes, a token bucket of
 * events_per_minute, a bounded queue) and POSTed from their own thread.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accelfit/kube.h"
#include "accelfit/util.h"

#include "kube/internal.h"
#include "accelfit/banned.h"

/* ---- events --------------------------------------------------------------------------------- */

static uint64_t ev_hash(const char *uid, const char *reason, const char *message)
{
    uint64_t h = AF_FNV64_INIT;
    const char *parts[3] = {uid ? uid : "", reason ? reason : "", message ? message : ""};

    for (int i = 0; i < 3; i++)
        h = af_fnv64(h, parts[i], strlen(parts[i]) + 1);   /* the terminator separates */
    return h;
}

void af__kube_ev_item_free(struct ev_item *e)
{
    af_free(e->ns);
    af_free(e->pod);
    af_free(e->uid);
    af_free(e->type);
    af_free(e->reason);
    af_free(e->message);
    memset(e, 0, sizeof(*e));
}

void af_kube_post_event(struct af_kube *k, const char *ns, const char *pod, const char *uid,
                        const char *type, const char *reason, const char *message)
{
    if (!k || !pod || !reason)
        return;
    double now = af_wall_time();
    uint64_t h = ev_hash(uid, reason, message);
    pthread_mutex_lock(&k->ev_lock);
    /* dedup: drop expired entries, then look for this key */
    size_t w = 0;
    bool dup = false;
    for (size_t i = 0; i < k->n_seen; i++) {
        if (now - k->seen[i].first >= EVENT_DEDUP_WINDOW_S)
            continue;
        k->seen[w++] = k->seen[i];
        if (k->seen[i].hash == h)
            dup = true;
    }
    k->n_seen = w;
    if (dup) {
        /* counted in the window, posted once (docs/cluster.md) */
        for (size_t i = 0; i < k->q_len; i++) {
            struct ev_item *q = &k->queue[(k->q_head + i) % EVENT_QUEUE_MAX];
            if (ev_hash(q->uid, q->reason, q->message) == h) {
                q->count++;
                q->last = now;
            }
        }
        pthread_mutex_unlock(&k->ev_lock);
        return;
    }
    /* token bucket */
    double rate = k->opt.events_per_minute > 0 ? k->opt.events_per_minute : 60;
    k->tokens += (now - k->tokens_at) * rate / 60.0;
    if (k->tokens > rate)
        k->tokens = rate;
    k->tokens_at = now;
    if (k->tokens < 1 || k->q_len >= EVENT_QUEUE_MAX || k->n_seen >= EVENT_DEDUP_MAX) {
        pthread_mutex_unlock(&k->ev_lock);
        atomic_fetch_add(&k->st->events_dropped, 1);
        return;
    }
    k->tokens -= 1;
    k->seen[k->n_seen].hash = h;
    k->seen[k->n_seen].first = now;
    k->n_seen++;
    struct ev_item *e = &k->queue[(k->q_head + k->q_len) % EVENT_QUEUE_MAX];
    e->ns = af_xstrdup(ns && *ns ? ns : "default");
    e->pod = af_xstrdup(pod);
    e->uid = af_xstrdup(uid);
    e->type = af_xstrdup(type && *type ? type : "Normal");
    e->reason = af_xstrdup(reason);
    e->message = af_xstrdup(message ? message : "");
    e->count = 1;
    e->first = e->last = now;
    k->q_len++;
    pthread_cond_signal(&k->ev_cond);
    pthread_mutex_unlock(&k->ev_lock);
}

static size_t discard_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    return size * nmemb;
}

static void post_one(struct af_kube *k, CURL *h, struct ev_item *e)
{
    char first[32], last[32], now[32];
    af_format_rfc3339(e->first, first, sizeof(first));
    af_format_rfc3339(e->last, last, sizeof(last));
    af_format_rfc3339(af_wall_time(), now, sizeof(now));
    char *name = af_xasprintf("%s.%llx", e->pod, (unsigned long long)af_now_ns());
    json_t *ev = json_pack("{s:s,s:s,s:{s:s,s:s},s:{s:s,s:s,s:s,s:s},s:s,s:s,s:s,s:{s:s},"
                           "s:s,s:s,s:i,s:s,s:s}",
                           "apiVersion", "v1", "kind", "Event", "metadata", "name", name,
                           "namespace", e->ns, "involvedObject", "kind", "Pod", "apiVersion",
                           "v1", "name", e->pod, "namespace", e->ns, "reason", e->reason,
                           "message", e->message, "type", e->type, "source", "component",
                           "accelfit", "firstTimestamp", first, "lastTimestamp", last, "count",
                           e->count, "reportingComponent", "accelfit", "reportingInstance",
                           "accelfit");
    if (ev && e->uid)
        json_object_set_new(json_object_get(ev, "involvedObject"), "uid",
                            json_string(e->uid));
    char *body = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    af_free(name);
    if (!body) {
        atomic_fetch_add(&k->st->events_dropped, 1);
        return;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        struct creds c;
        char *url;
        char *pq = curl_easy_escape(h, e->ns, 0);
        char *path = af_xasprintf("/api/v1/namespaces/%s/events", pq);
        curl_free(pq);
        af__kube_creds_get(k, &c);
        struct curl_slist *hdr = af__kube_http_setup(k, h, path, &c, &url);
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard_cb);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
        CURLcode cc = curl_easy_perform(h);
        long st = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
        curl_slist_free_all(hdr);
        af_free(url);
        af_free(path);
        unsigned gen = c.gen;
        af__kube_creds_clear(&c);
        if (cc == CURLE_OK && st >= 200 && st < 300) {
            atomic_fetch_add(&k->st->events_posted, 1);
            break;
        }
        if (cc == CURLE_OK && st == 401 && attempt == 0) {
            af__kube_creds_invalidate(k, gen);
            continue;
        }
        char sts[16];
        snprintf(sts, sizeof(sts), "%ld", st);
        AF_LOG(AF_LOG_WARN, "event post failed", "pod", e->pod, "reason", e->reason, "status",
               sts, "error", curl_easy_strerror(cc), NULL);
        atomic_fetch_add(&k->st->events_dropped, 1);
        break;
    }
    af_free(body);
}

void *af__kube_events_main(void *arg)
{
    struct af_kube *k = arg;
    CURL *h = curl_easy_init();
    af_assert(h);
    pthread_mutex_lock(&k->ev_lock);
    while (!atomic_load(&k->stop)) {
        if (!k->q_len) {
            pthread_cond_wait(&k->ev_cond, &k->ev_lock);
            continue;
        }
        struct ev_item e = k->queue[k->q_head];
        memset(&k->queue[k->q_head], 0, sizeof(e));
        k->q_head = (k->q_head + 1) % EVENT_QUEUE_MAX;
        k->q_len--;
        pthread_mutex_unlock(&k->ev_lock);
        post_one(k, h, &e);
        af__kube_ev_item_free(&e);
        pthread_mutex_lock(&k->ev_lock);
    }
    pthread_mutex_unlock(&k->ev_lock);
    curl_easy_cleanup(h);
    return NULL;
}
