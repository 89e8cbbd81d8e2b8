/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Prometheus reader: a thread of its own that, every utilization.interval, sends
 * the policy's instant queries to /api/v1/query (libcurl, one keep-alive handle),
 * builds a new immutable snapshot from the answers off any lock, and swaps it in
 * under a tiny mutex, exactly as the cluster cache publishes (accelfit/cache.h). The
 * request path only takes a reference; it never waits for Prometheus.
 *
 * A round that fails (connection refused, a timeout, an HTTP error, an answer that is
 * not the API's JSON) publishes a degraded snapshot that says why, and the next round
 * waits twice as long, up to utilization.retry_max, until one answers again. The
 * bearer token file is read every round, so a rotated token is picked up. Stopping does
 * not wait for a slow Prometheus: the round checks the stop flag between queries and
 * curl's progress callback ends a query in flight (within about a second). With
 * --metrics-file a recorded snapshot is loaded once instead, frozen: its ages are as
 * recorded, so a demo shows the same thing every time.
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "accelfit/config.h"
#include "accelfit/prom.h"
#include "accelfit/utilization.h"
#include "accelfit/banned.h"

#define MAX_ANSWER ((size_t)64 << 20)
#define MAX_SECRET 16384

struct af_prom {
    struct af_prom_options opt;    /* strings owned */
    struct af_config_holder *cfg;
    pthread_t thread;
    bool running;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    bool stop;                     /* protected by ->lock */
    atomic_bool stopping;          /* set with ->stop; read by the round without the lock */
    struct af_utilization_snapshot *current;   /* protected by ->lock */
    uint64_t rounds, failures;     /* reader thread only */
    uint64_t discarded[AF_UTILIZATION_DISCARD__COUNT];   /* reader thread only */
    double last_ok;                /* reader thread only */
};

static void publish(struct af_prom *p, struct af_utilization_snapshot *s)
{
    struct af_utilization_snapshot *old;

    pthread_mutex_lock(&p->lock);
    old = p->current;
    p->current = s;
    pthread_mutex_unlock(&p->lock);
    af_utilization_snapshot_unref(old);   /* freed when the last request lets go */
}

struct af_utilization_snapshot *af_prom_acquire(struct af_prom *p)
{
    struct af_utilization_snapshot *s;

    if (!p)
        return NULL;
    pthread_mutex_lock(&p->lock);
    s = af_utilization_snapshot_ref(p->current);
    pthread_mutex_unlock(&p->lock);
    return s;
}

/* A secret file's first line, without the newline. 0, or an AF_E* code. */
static int read_secret(const char *path, char *out, size_t n)
{
    struct af_buf b = AF_BUF_INIT(MAX_SECRET);
    int rc = af_buf_read_file(&b, path);
    size_t len;

    if (!rc) {
        len = b.buf ? strcspn(b.buf, "\r\n") : 0;
        if (len == 0 || len >= n) {
            rc = AF_EINVAL;
        } else {
            memcpy(out, b.buf, len);
            out[len] = '\0';
        }
    }
    af_buf_release(&b);
    return rc;
}

/* ---- one round ------------------------------------------------------------------------------ */

static size_t body_cb(char *data, size_t size, size_t nmemb, void *ud)
{
    return af_buf_add(ud, data, size * nmemb) ? 0 : size * nmemb;
}

/* curl calls it at least about once a second, also while nothing arrives: a query in
 * flight ends at once on stop. */
static int xferinfo_cb(void *ud, curl_off_t dlt, curl_off_t dln, curl_off_t ult, curl_off_t uln)
{
    struct af_prom *p = ud;

    (void)dlt;
    (void)dln;
    (void)ult;
    (void)uln;
    return atomic_load(&p->stopping) ? 1 : 0;
}

/* GET base/api/v1/query?query=EXPR into `body`. 0, or AF_EIO with `why`. */
static int query(struct af_prom *p, CURL *h, const char *expr, double timeout_s,
                 struct af_buf *body, char *why, size_t whylen)
{
    char *esc = curl_easy_escape(h, expr, 0), *url, token[MAX_SECRET], auth[MAX_SECRET + 32];
    char errbuf[CURL_ERROR_SIZE];
    struct curl_slist *hdr = NULL;
    long status = 0;
    CURLcode cc;
    int rc = 0;

    url = af_xasprintf("%s/api/v1/query?query=%s", p->opt.url, esc ? esc : "");
    curl_free(esc);
    af_buf_reset(body);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(timeout_s * 1000));
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, body);
    if (p->opt.bearer_token_file) {
        rc = read_secret(p->opt.bearer_token_file, token, sizeof(token));
        if (rc) {
            snprintf(why, whylen, "cannot read --prometheus-bearer-token-file '%s': %s",
                     p->opt.bearer_token_file, af_strerror(rc));
            goto out;
        }
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        hdr = curl_slist_append(hdr, auth);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    errbuf[0] = '\0';
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    cc = curl_easy_perform(h);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, NULL);
    if (cc != CURLE_OK) {
        /* curl's own words say which (certificate problem, refused, timed out) */
        snprintf(why, whylen, "cannot query %s: %s", p->opt.url,
                 errbuf[0] ? errbuf : curl_easy_strerror(cc));
        rc = AF_EIO;
        goto out;
    }
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200) {
        /* The API's error answers are JSON with errorType and error: show them. */
        char e[208];
        af__prom_answer_error(body->buf ? body->buf : "", body->len, e, sizeof(e));
        snprintf(why, whylen, "HTTP %ld from %s%s%.200s", status, p->opt.url, e[0] ? ": " : "",
                 e);
        rc = AF_EIO;
    }
out:
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hdr);
    af_free(url);
    return rc;
}

static struct af_utilization_snapshot *degraded(const char *why)
{
    struct af_utilization_snapshot *s = af_xcalloc(1, sizeof(*s));

    atomic_init(&s->refcnt, 1);
    s->ok = false;
    snprintf(s->error, sizeof(s->error), "%s", why);
    return s;
}

/* One round of every configured query. Returns the new snapshot (ok or degraded). */
static struct af_utilization_snapshot *round_once(struct af_prom *p, CURL *h,
                                           const struct af_utilization_policy *up,
                                           const struct af_utilization_snapshot *prev)
{
    struct af_prom_build *b = af_prom_build_new();
    struct af_buf body = AF_BUF_INIT(MAX_ANSWER);
    struct af_utilization_snapshot *s;
    char why[300], what[300];

    af_prom_build_set_now(b, af_wall_time());
    why[0] = '\0';
    for (int m = 0; m < AF_UM__COUNT && !why[0]; m++) {
        if (atomic_load(&p->stopping)) {
            snprintf(why, sizeof(why), "stopping");
            break;
        }
        if (!up->q[m].expr)
            continue;
        if (query(p, h, up->q[m].expr, up->timeout_s, &body, what, sizeof(what)) == 0 &&
            af_prom_build_add(b, up, (enum af_utilization_metric)m, body.buf ? body.buf : "", body.len,
                              what, sizeof(what)) == 0)
            continue;
        snprintf(why, sizeof(why), "query %s: %.250s", af_utilization_metric_name((enum af_utilization_metric)m),
                 what);
    }
    af_buf_release(&body);
    s = af_prom_build_finish(b, prev, up->idle_below);
    if (why[0]) {
        af_utilization_snapshot_unref(s);
        s = degraded(why);
    }
    return s;
}

static void configure(struct af_prom *p, CURL *h)
{
    char userpwd[MAX_SECRET];

    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, p);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "accelfit/" AF_VERSION);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, "");
    if (p->opt.ca_file)
        curl_easy_setopt(h, CURLOPT_CAINFO, p->opt.ca_file);
    if (p->opt.basic_auth_file &&
        read_secret(p->opt.basic_auth_file, userpwd, sizeof(userpwd)) == 0) {
        curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
        curl_easy_setopt(h, CURLOPT_USERPWD, userpwd);
    }
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void *reader_main(void *arg)
{
    struct af_prom *p = arg;
    CURL *h = curl_easy_init();
    double backoff = 0;
    /* the last round that answered: idle runs carry over failed rounds */
    struct af_utilization_snapshot *prev = NULL;

    configure(p, h);
    for (;;) {
        struct af_config *cfg = af_config_holder_get(p->cfg);
        const struct af_utilization_policy *up = &cfg->policy->util;
        struct af_utilization_snapshot *s;
        double interval = p->opt.interval_s > 0 ? p->opt.interval_s : up->interval_s, wait;
        struct timespec until;
        bool stop;

        s = round_once(p, h, up, prev);
        if (atomic_load(&p->stopping)) {
            /* a round cut short by the stop says nothing about Prometheus */
            af_utilization_snapshot_unref(s);
            af_config_unref(cfg);
            break;
        }
        p->rounds++;
        if (s->ok) {
            af_utilization_snapshot_unref(prev);
            prev = af_utilization_snapshot_ref(s);
            p->last_ok = af_wall_time();
            if (backoff > 0)
                AF_LOG(AF_LOG_INFO, "prometheus answers again; live utilization resumes", "url",
                       p->opt.url, NULL);
            backoff = 0;
            wait = interval;
        } else {
            p->failures++;
            if (backoff == 0 || p->failures == 1)
                AF_LOG(AF_LOG_WARN, "prometheus round failed; scoring on allocation", "error",
                       s->error, NULL);
            backoff = backoff > 0 ? backoff * 2 : interval;
            if (backoff > up->retry_max_s)
                backoff = up->retry_max_s;
            wait = backoff;
        }
        if (s->ok) {
            for (int d = 0; d < AF_UTILIZATION_DISCARD__COUNT; d++) {
                p->discarded[d] += s->discarded[d];
                if (s->discarded[d] && d == AF_UTILIZATION_DISCARD_OVER_LIMIT) {
                    char lim[24], n[24];
                    snprintf(lim, sizeof(lim), "%d", AF_UTILIZATION_MAX_SERIES);
                    snprintf(n, sizeof(n), "%zu", s->discarded[d]);
                    AF_LOG(AF_LOG_WARN, "prometheus answered more series than accelfit keeps; "
                           "the rest were dropped", "limit", lim, "dropped", n, NULL);
                }
            }
        }
        memcpy(s->discarded_total, p->discarded, sizeof(s->discarded_total));
        s->taken = af_wall_time();
        s->last_ok = p->last_ok;
        s->rounds = p->rounds;
        s->failures = p->failures;
        snprintf(s->source, sizeof(s->source), "prometheus %s", p->opt.url);
        af_config_unref(cfg);
        publish(p, s);

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += (time_t)wait;
        until.tv_nsec += (long)((wait - (double)(time_t)wait) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&p->lock);
        while (!p->stop && pthread_cond_timedwait(&p->wake, &p->lock, &until) != ETIMEDOUT)
            ;
        stop = p->stop;
        pthread_mutex_unlock(&p->lock);
        if (stop)
            break;
    }
    af_utilization_snapshot_unref(prev);
    curl_easy_cleanup(h);
    return NULL;
}

/* ---- a recorded snapshot --------------------------------------------------------------------- */

/*
 * {"recorded": "...", "queries": {"gpu_util": <an /api/v1/query or query_range answer>,
 * ...}}: each answer parsed as a live one would be (in place, af_prom_build_add_file),
 * then frozen at its newest sample.
 */
static int load_file(struct af_prom *p, const struct af_utilization_policy *up, char *why,
                     size_t whylen)
{
    struct af_buf file = AF_BUF_INIT(MAX_ANSWER);
    struct af_prom_build *b = NULL;
    struct af_utilization_snapshot *s;
    char what[300];
    int rc = af_buf_read_file(&file, p->opt.metrics_file);

    if (rc) {
        snprintf(why, whylen, "cannot read --metrics-file '%s': %s", p->opt.metrics_file,
                 af_strerror(rc));
        goto out;
    }
    b = af_prom_build_new();
    rc = af__prom_build_add_file(b, up, file.buf ? file.buf : "", file.len, what, sizeof(what));
    if (rc) {
        snprintf(why, whylen, "--metrics-file '%s': %s", p->opt.metrics_file, what);
        rc = AF_EINVAL;
        goto out;
    }
    s = af_prom_build_finish(b, NULL, up->idle_below);
    b = NULL;
    s->frozen = true;
    for (size_t i = 0; i < s->n_nodes; i++)
        for (size_t k = 0; k < s->nodes[i].n; k++)
            if (s->nodes[i].samples[k].ts > s->taken)
                s->taken = s->nodes[i].samples[k].ts;
    s->last_ok = s->taken;
    s->rounds = 1;
    for (int d = 0; d < AF_UTILIZATION_DISCARD__COUNT; d++)
        s->discarded_total[d] = s->discarded[d];
    snprintf(s->source, sizeof(s->source), "file %s", p->opt.metrics_file);
    publish(p, s);
out:
    if (b)
        af_utilization_snapshot_unref(af_prom_build_finish(b, NULL, 0));
    af_buf_release(&file);
    return rc;
}

/* ---- lifecycle ------------------------------------------------------------------------------- */

static char *dup_opt(const char *s)
{
    return s ? af_xstrdup(s) : NULL;
}

static void prom_free(struct af_prom *p)
{
    af_free((char *)p->opt.url);
    af_free((char *)p->opt.bearer_token_file);
    af_free((char *)p->opt.basic_auth_file);
    af_free((char *)p->opt.ca_file);
    af_free((char *)p->opt.metrics_file);
    af_utilization_snapshot_unref(p->current);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->lock);
    af_free(p);
}

int af_prom_start(struct af_prom **out, const struct af_prom_options *o,
                  struct af_config_holder *cfg, char *why, size_t whylen)
{
    struct af_prom *p = af_xcalloc(1, sizeof(*p));
    char secret[MAX_SECRET];
    struct af_config *c = NULL;
    size_t len;
    int rc = 0;

    *out = NULL;
    why[0] = '\0';
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->wake, NULL);
    atomic_init(&p->stopping, false);
    p->cfg = cfg;
    p->opt = *o;
    p->opt.url = dup_opt(o->url);
    p->opt.bearer_token_file = dup_opt(o->bearer_token_file);
    p->opt.basic_auth_file = dup_opt(o->basic_auth_file);
    p->opt.ca_file = dup_opt(o->ca_file);
    p->opt.metrics_file = dup_opt(o->metrics_file);

    if (o->metrics_file) {
        c = af_config_holder_get(cfg);
        rc = load_file(p, &c->policy->util, why, whylen);
        goto out;
    }
    if (!o->url || (strncmp(o->url, "http://", 7) && strncmp(o->url, "https://", 8))) {
        snprintf(why, whylen, "--prometheus must be an http:// or https:// URL: '%s'",
                 o->url ? o->url : "");
        rc = AF_EINVAL;
        goto out;
    }
    len = strlen(p->opt.url);
    while (len > 8 && p->opt.url[len - 1] == '/')
        ((char *)p->opt.url)[--len] = '\0';
    {
        const struct {
            const char *flag, *path;
        } files[] = {{"--prometheus-bearer-token-file", o->bearer_token_file},
                     {"--prometheus-basic-auth-file", o->basic_auth_file}};
        for (size_t i = 0; i < AF_ARRAY_SIZE(files) && !rc; i++) {
            if (!files[i].path)
                continue;
            rc = read_secret(files[i].path, secret, sizeof(secret));
            if (rc)
                snprintf(why, whylen, "cannot read %s '%s': %s", files[i].flag, files[i].path,
                         rc == AF_EINVAL ? "empty first line" : af_strerror(rc));
        }
        if (!rc && o->basic_auth_file && !strchr(secret, ':')) {
            snprintf(why, whylen, "--prometheus-basic-auth-file '%s' must hold one line "
                     "'user:password'", o->basic_auth_file);
            rc = AF_EINVAL;
        }
        if (rc)
            goto out;
    }
    if (o->ca_file) {
        struct af_buf ca = AF_BUF_INIT(1u << 20);
        rc = af_buf_read_file(&ca, o->ca_file);
        if (!rc && (!ca.buf || !strstr(ca.buf, "-----BEGIN CERTIFICATE-----")))
            rc = AF_EINVAL;
        af_buf_release(&ca);
        if (rc) {
            snprintf(why, whylen, "--prometheus-ca-file '%s' is not a readable PEM certificate "
                     "bundle", o->ca_file);
            goto out;
        }
    }
    pthread_once(&curl_once, curl_init_once);
    if (pthread_create(&p->thread, NULL, reader_main, p) != 0) {
        snprintf(why, whylen, "cannot start the prometheus reader thread");
        rc = AF_EIO;
        goto out;
    }
    p->running = true;
out:
    af_config_unref(c);
    explicit_bzero(secret, sizeof(secret));
    if (rc) {
        prom_free(p);
        return rc == AF_EIO ? AF_EIO : AF_EINVAL;
    }
    *out = p;
    return 0;
}

void af_prom_stop(struct af_prom *p)
{
    if (!p)
        return;
    if (p->running) {
        atomic_store(&p->stopping, true);
        pthread_mutex_lock(&p->lock);
        p->stop = true;
        pthread_cond_signal(&p->wake);
        pthread_mutex_unlock(&p->lock);
        pthread_join(p->thread, NULL);
    }
    prom_free(p);
}
