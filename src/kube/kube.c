/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube: options, start and stop. The parts (kube/internal.h): transport.c
 * (credentials, libcurl setup), reflector.c (LIST + WATCH, publisher) and
 * events.c (Event posting).
 *
 * Threads (all joined by af_kube_stop):
 *   reflector x3   nodes, pods, managed pods (cache.h), each with its own curl easy
 *                  handle; it decodes outside any lock and applies a batch of
 *                  events to the shared af_cache under ->cache_lock
 *   publisher      coalesces "dirty" signals for publish_interval_s, builds a
 *                  snapshot under ->cache_lock and swaps it into the publisher
 *   events         drains the Event queue, POSTs core/v1 Events
 *   overlays       Karpenter's NodeOverlays, when the API server serves them (overlays.c)
 *   state x2       (af_kube_state_start) the rollouts' shared state: its watch and its
 *                  writer (state.c)
 *
 * The cache is written only while holding ->cache_lock; the lock is never
 * held across network I/O or JSON decoding.
 */
#include <curl/curl.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/kube.h"
#include "accelfit/util.h"

#include "kube/internal.h"
#include "accelfit/banned.h"

void af_kube_options_default(struct af_kube_options *o)
{
    memset(o, 0, sizeof(*o));
    o->page_size = 500;
    o->watch_timeout_min_s = 300;
    o->backoff_initial_s = 0.8;
    o->backoff_max_s = 30;
    o->publish_interval_s = 0.05;
    o->events_per_minute = 60;
    o->overlays = true;
    o->protobuf = true;
}

/* Test/diagnostic knobs read from the environment at start (documented in docs/cluster.md). */
static double env_double(const char *name, double def)
{
    const char *s = getenv(name);
    char *end;
    if (!s || !*s)
        return def;
    double v = strtod(s, &end);
    return (*end || v <= 0) ? def : v;
}

/* ---- start / stop ----------------------------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* "https://host:port" -> host, port; handles [v6]. */
/*
 * "https://host:6443/k8s/clusters/c-1/" -> scheme, host, port and the path
 * prefix ("/k8s/clusters/c-1"; "" when none): API servers behind a proxy keep
 * their path, and every request path is appended to it.
 */
static int split_server(const char *server, char **scheme, char **host, int *port,
                        char **prefix)
{
    const char *p = strstr(server, "://");
    if (!p)
        return AF_EINVAL;
    *scheme = af_xstrndup(server, (size_t)(p - server));
    p += 3;
    const char *end = p + strcspn(p, "/");
    const char *colon = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', (size_t)(end - p));
        if (!rb) {
            af_free(*scheme);
            return AF_EINVAL;
        }
        *host = af_xstrndup(p, (size_t)(rb - p + 1));
        colon = (rb + 1 < end && rb[1] == ':') ? rb + 1 : NULL;
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        *host = af_xstrndup(p, (size_t)((colon ? colon : end) - p));
    }
    *port = !strcmp(*scheme, "http") ? 80 : 443;
    if (colon) {
        char digits[8] = "";
        int64_t v;
        size_t len = (size_t)(end - colon - 1);
        if (len < sizeof(digits))
            memcpy(digits, colon + 1, len);
        if (len >= sizeof(digits) || af_parse_int64(digits, 1, 65535, &v) != 0) {
            af_free(*scheme);
            af_free(*host);
            *scheme = *host = NULL;
            return AF_EINVAL;
        }
        *port = (int)v;
    }
    {
        size_t n = strcspn(end, "?#");
        while (n > 0 && end[n - 1] == '/')
            n--;
        *prefix = af_xstrndup(end, n);
    }
    return 0;
}

int af_kube_start(struct af_kube **out, struct af_kube_conn *conn,
                  const struct af_kube_options *opt, struct af_config_holder *cfg,
                  struct af_publisher *pub, struct af_cache_status *st)
{
    struct af_kube *k;
    char *scheme = NULL, *host = NULL, *prefix = NULL;
    int port = 0;

    *out = NULL;
    if (!conn || !conn->server || !pub || !cfg ||
        split_server(conn->server, &scheme, &host, &port, &prefix)) {
        af_kube_conn_free(conn);
        return AF_EINVAL;
    }
    pthread_once(&curl_once, curl_init_once);
    k = af_xcalloc(1, sizeof(*k));
    k->conn = conn;
    if (opt)
        k->opt = *opt;
    else
        af_kube_options_default(&k->opt);
    if (k->opt.backoff_initial_s <= 0)
        k->opt.backoff_initial_s = 0.8;
    if (k->opt.backoff_max_s < k->opt.backoff_initial_s)
        k->opt.backoff_max_s = k->opt.backoff_initial_s;
    if (k->opt.publish_interval_s < 0)
        k->opt.publish_interval_s = 0;
    k->cfg = cfg;
    k->pub = pub;
    k->st = st ? st : &k->own_st;
    st = k->st;
    k->low_speed_time = env_double("AF_KUBE_LOW_SPEED_TIME", 90);
    if (conn->tls_server_name && *conn->tls_server_name) {
        /* Verify (and send SNI for) tls-server-name, connect to the real host. */
        k->base_url = af_xasprintf("%s://%s:%d%s", scheme, conn->tls_server_name, port, prefix);
        char *ct = af_xasprintf("%s:%d:%s:%d", conn->tls_server_name, port, host, port);
        k->connect_to = curl_slist_append(NULL, ct);
        af_free(ct);
    } else {
        k->base_url = af_xasprintf("%s://%s:%d%s", scheme, host, port, prefix);
    }
    af_free(scheme);
    af_free(host);
    af_free(prefix);
    atomic_init(&k->stop, false);
    pthread_mutex_init(&k->lock, NULL);
    pthread_cond_init(&k->cond, NULL);
    pthread_mutex_init(&k->cache_lock, NULL);
    pthread_mutex_init(&k->cred_lock, NULL);
    pthread_mutex_init(&k->ev_lock, NULL);
    pthread_cond_init(&k->ev_cond, NULL);
    k->seen = af_xcalloc(EVENT_DEDUP_MAX, sizeof(*k->seen));
    k->tokens = k->opt.events_per_minute > 0 ? k->opt.events_per_minute : 60;
    k->tokens_at = af_wall_time();
    k->cache = af_cache_new();
    k->live = k->opt.prices ? af_prices_holder_get(k->opt.prices) : NULL;
    atomic_store(&st->synced, false);
    atomic_store(&st->watch_up, false);
    atomic_store(&st->down_since_ns, af_now_ns());

    for (size_t i = 0; i < AF_ARRAY_SIZE(k->refl); i++) {
        struct reflector *r = &k->refl[i];
        r->k = k;
        r->kind = i == AF_KIND_NODE ? AF_KIND_NODE : AF_KIND_POD;
        r->set = i == AF_KIND_NODE ? AF_PODS_ALL : i == AF_KIND_POD ? AF_PODS_UNMANAGED
                                                                    : AF_PODS_MANAGED;
        atomic_init(&r->relist, false);
        r->h = curl_easy_init();
        af_assert(r->h);
        af_buf_init(&r->body, 64u << 10);
        af_buf_init(&r->line, MAX_EVENT_BYTES);
    }
    pthread_create(&k->publisher, NULL, af__kube_publisher_main, k);
    pthread_create(&k->ev_thread, NULL, af__kube_events_main, k);
    for (size_t i = 0; i < AF_ARRAY_SIZE(k->refl); i++)
        pthread_create(&k->refl[i].thread, NULL, af__kube_reflector_main, &k->refl[i]);
    if (k->opt.overlays)
        pthread_create(&k->overlays_thread, NULL, af__kube_overlays_main, k);
    af__kube_dra_start(k);
    *out = k;
    return 0;
}

void af_kube_reclassify_nodes(struct af_kube *k)
{
    /* the node reflector's watch sees this within about a second (its progress
     * callback) and its loop lists again (reflector.c) */
    if (k)
        atomic_store(&k->refl[AF_KIND_NODE].relist, true);
}

void af_kube_stop(struct af_kube *k)
{
    if (!k)
        return;
    atomic_store(&k->stop, true);
    pthread_mutex_lock(&k->lock);
    pthread_cond_broadcast(&k->cond);
    pthread_mutex_unlock(&k->lock);
    pthread_mutex_lock(&k->ev_lock);
    pthread_cond_broadcast(&k->ev_cond);
    pthread_mutex_unlock(&k->ev_lock);
    for (size_t i = 0; i < AF_ARRAY_SIZE(k->refl); i++)
        pthread_join(k->refl[i].thread, NULL);
    af__kube_state_stop(k);
    if (k->opt.overlays)
        pthread_join(k->overlays_thread, NULL);
    af__kube_dra_stop(k);
    pthread_join(k->publisher, NULL);
    pthread_join(k->ev_thread, NULL);
    for (size_t i = 0; i < AF_ARRAY_SIZE(k->refl); i++) {
        curl_easy_cleanup(k->refl[i].h);
        af_buf_release(&k->refl[i].body);
        af_buf_release(&k->refl[i].line);
        af_free(k->refl[i].rv);
    }
    for (size_t i = 0; i < k->q_len; i++)
        af__kube_ev_item_free(&k->queue[(k->q_head + i) % EVENT_QUEUE_MAX]);
    af_free(k->seen);
    af_cache_free(k->cache);
    af_prices_unref(k->live);
    af_overlays_unref(k->overlays);
    af_free(k->file_token);
    af_free(k->exec_token);
    af_free(k->exec_cert);
    af_free(k->exec_key);
    af_free(k->base_url);
    curl_slist_free_all(k->connect_to);
    af_kube_conn_free(k->conn);
    pthread_mutex_destroy(&k->lock);
    pthread_cond_destroy(&k->cond);
    pthread_mutex_destroy(&k->cache_lock);
    pthread_mutex_destroy(&k->cred_lock);
    pthread_mutex_destroy(&k->ev_lock);
    pthread_cond_destroy(&k->ev_cond);
    af_free(k);
}
