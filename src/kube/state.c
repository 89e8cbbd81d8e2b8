/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube state: the rollouts' shared state in one ConfigMap of accelfit's namespace
 * (accelfit-rollouts: one key per rollout, its record as indented JSON), so that
 * every replica, and a replica after a restart, decides from the same stage, halt
 * and acknowledgement (docs/rollouts.md).
 *
 * Two threads, each with its own curl handle and the transport of every request
 * (transport.c: credentials, TLS, the stop flag):
 *   watcher  WATCHes the one object (fieldSelector metadata.name), from the last
 *            resourceVersion seen, or from none (the API server then sends the object
 *            as it is, ADDED) after a 410 or at start; each version it sees goes to
 *            ops.absorb and wakes the writer
 *   writer   woken by af_kube_state_notify (never blocking: requests only signal) or
 *            every STATE_TICK_S: merges this replica's records (ops.export) into the
 *            object's (af_rollout_record_merge) and, when that changes anything, PUTs
 *            it with the resourceVersion it merged into (optimistic concurrency: a 409
 *            Conflict reads the object again and merges again), or POSTs it when it
 *            does not exist. Keys of rollouts this replica does not run are kept as
 *            the text they were read as, never parsed nor rewritten.
 * The backoff and the wait for stop are the reflector's (af__kube_backoff, reflector.c).
 *
 * Whoever may write ConfigMaps in the namespace may write the object, so what it holds is
 * bounded (docs/rollouts.md, "Bounds"): a record is made only of the key of a rollout this
 * replica runs (at most as many as its policy has), the other keys cost their text; an
 * object is read up to STATE_READ_MAX, well past what the API server stores, so one that
 * grew too large can still be read; and an object whose data would pass the ConfigMap
 * limit is never written: the keys of unknown rollouts are dropped first (logged).
 */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accelfit/kube.h"
#include "accelfit/rollout.h"
#include "accelfit/util.h"

#include "kube/internal.h"
#include "accelfit/banned.h"

#define STATE_TICK_S 30.0
#define STATE_READ_MAX (4u << 20)      /* an answer: the API server takes 3 MiB at most */
#define STATE_DATA_MAX ((1u << 20) - (16u << 10))   /* a ConfigMap's data is at most 1 MiB */
#define STATE_WRITE_ATTEMPTS 8
#define STATE_TIMEOUT_MS 10000L
#define CONFLICT 1                     /* write_round: read again, merge again */

struct af_kube_state {
    struct af_kube *k;
    struct af_kube_state_ops ops;
    char *ns, *name;
    char *obj_path;                    /* /api/v1/namespaces/NS/configmaps/NAME */
    char *coll_path;                   /* /api/v1/namespaces/NS/configmaps */
    pthread_t watcher, writer;
    CURL *wh, *rh;

    pthread_mutex_t lock;              /* guards what follows */
    pthread_cond_t cond;
    bool dirty;
    /* the object as last seen (watch, GET or our own write) */
    bool known;                        /* seen: `exists` and the records are its */
    bool exists;
    char *rv;
    struct af_rollout_record *remote;  /* of the rollouts this replica runs */
    size_t n_remote;
    struct other_key *others;          /* the other keys, as read */
    size_t n_others;
    char *watch_rv;                    /* where the watch resumes; NULL: from now, ADDED first */
    struct af_buf line;                /* the watch's partial line (watcher only) */
    bool watch_expired;                /* an in-band 410: watch again at once, from now */
    bool watch_failed;                 /* another in-band error: back off, then watch again */
};

/* A key of the object that is not a rollout this replica runs: kept as read. */
struct other_key {
    char *key, *text;
};

static void others_free(struct other_key *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        af_free(v[i].key);
        af_free(v[i].text);
    }
    af_free(v);
}

/* ---- records as JSON ------------------------------------------------------------------------ */

static void rfc3339(double t, char *out, size_t n)
{
    if (t > 0)
        af_format_rfc3339(t, out, n);
    else
        snprintf(out, n, "-");
}

static void set_time(json_t *o, const char *key, double t)
{
    char text[40];

    if (t > 0) {
        rfc3339(t, text, sizeof(text));
        json_object_set_new(o, key, json_string(text));
    } else {
        json_object_set_new(o, key, json_null());
    }
}

/* One record as the text of its key: the shared fields, and readable ones for people. */
static char *record_text(const struct af_rollout_record *r)
{
    json_t *o = json_object(), *fv = json_array();
    bool halted = r->halted_at > r->acked_at;
    char gen[24], *text;

    snprintf(gen, sizeof(gen), "%016llx", (unsigned long long)r->generation);
    json_object_set_new(o, "rollout", json_string(r->name));
    json_object_set_new(o, "generation", json_string(gen));
    json_object_set_new(o, "stage", r->stage >= 0 ? json_integer(r->stage + 1) : json_null());
    json_object_set_new(o, "share", json_real(isfinite(r->share) ? r->share : 0));
    set_time(o, "began", r->began);
    set_time(o, "stageBegan", r->stage >= 0 ? r->stage_began : 0);
    set_time(o, "nextStage", r->next_stage);
    json_object_set_new(o, "halted", json_boolean(halted));
    json_object_set_new(o, "haltReason", r->halt_reason[0] ? json_string(r->halt_reason) : json_null());
    json_object_set_new(o, "haltPod", r->halt_pod[0] ? json_string(r->halt_pod) : json_null());
    set_time(o, "haltedAt", r->halted_at);
    set_time(o, "acknowledgedAt", r->acked_at);
    for (size_t i = 0; i < r->n_forgiven; i++)
        json_array_append_new(fv, json_pack("{s:s,s:i}", "pod", r->forgiven[i].pod, "restarts",
                                            r->forgiven[i].restarts));
    json_object_set_new(o, "forgiven", fv);
    /* exact times, which the readable ones round */
    json_object_set_new(o, "unix", json_pack("{s:f,s:f,s:f}", "began", r->began, "haltedAt",
                                             r->halted_at, "acknowledgedAt", r->acked_at));
    text = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(o);
    return text;
}

static void copy_str(char *dst, size_t n, json_t *v)
{
    const char *s = json_string_value(v);

    snprintf(dst, n, "%s", s ? s : "");
}

/* One key's text back into a record; false when it is not one (it is then kept, unread). */
static bool record_parse(const char *key, const char *text, struct af_rollout_record *r)
{
    json_t *o = json_loads(text, 0, NULL), *u, *f;
    const char *gen;
    size_t i;
    bool ok = false;

    memset(r, 0, sizeof(*r));
    r->stage = -1;
    gen = json_string_value(json_object_get(o, "generation"));
    u = json_object_get(o, "unix");
    if (!json_is_object(o) || !gen || !json_is_object(u) || strlen(key) >= sizeof(r->name))
        goto out;
    snprintf(r->name, sizeof(r->name), "%s", key);
    r->generation = strtoull(gen, NULL, 16);
    /* the stage people read (1-based, null before the rollout began), read back so that a
     * record written as it is compares equal to it and is not written again */
    if (json_is_integer(json_object_get(o, "stage")))
        r->stage = (int)json_integer_value(json_object_get(o, "stage")) - 1;
    r->began = json_number_value(json_object_get(u, "began"));
    r->halted_at = json_number_value(json_object_get(u, "haltedAt"));
    r->acked_at = json_number_value(json_object_get(u, "acknowledgedAt"));
    copy_str(r->halt_reason, sizeof(r->halt_reason), json_object_get(o, "haltReason"));
    copy_str(r->halt_pod, sizeof(r->halt_pod), json_object_get(o, "haltPod"));
    json_array_foreach(json_object_get(o, "forgiven"), i, f) {
        if (r->n_forgiven >= AF_ROLLOUT_FORGIVEN_MAX)
            break;
        copy_str(r->forgiven[r->n_forgiven].pod, sizeof(r->forgiven[0].pod),
                 json_object_get(f, "pod"));
        r->forgiven[r->n_forgiven].restarts = (int)json_integer_value(json_object_get(f, "restarts"));
        r->n_forgiven++;
    }
    ok = isfinite(r->began) && isfinite(r->halted_at) && isfinite(r->acked_at);
out:
    json_decref(o);
    return ok;
}

static bool runs(const struct af_rollout_record *local, size_t n_local, const char *name)
{
    for (size_t i = 0; i < n_local; i++)
        if (!strcmp(local[i].name, name))
            return true;
    return false;
}

/*
 * The records of a ConfigMap object (its data) of the rollouts in `local` (a new array, at
 * most n_local long); every other string key goes to *others as read (a new array).
 */
static struct af_rollout_record *object_records(json_t *obj, const struct af_rollout_record *local,
                                                size_t n_local, size_t *n,
                                                struct other_key **others, size_t *n_others)
{
    json_t *data = json_object_get(obj, "data"), *v;
    struct af_rollout_record *out = af_xcalloc(n_local + 1, sizeof(*out));
    const char *key;
    size_t cap = 0;

    *n = 0;
    *others = NULL;
    *n_others = 0;
    json_object_foreach(data, key, v) {
        if (!json_is_string(v))
            continue;
        if (*n < n_local && runs(local, n_local, key) &&
            record_parse(key, json_string_value(v), &out[*n])) {
            (*n)++;
            continue;
        }
        AF_GROW(*others, cap, *n_others + 1);
        (*others)[*n_others].key = af_xstrdup(key);
        (*others)[(*n_others)++].text = af_xstrdup(json_string_value(v));
    }
    return out;
}

/* Takes what the API server says the object is (obj NULL: it does not exist); `wake`: the
 * writer compares it with this replica's state (a version it did not write itself). */
static void learn(struct af_kube_state *s, json_t *obj, bool wake)
{
    struct af_rollout_record *local = NULL, *recs = NULL;
    struct other_key *others = NULL;
    size_t n = 0, n_others = 0, n_local = 0;
    const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"),
                                                       "resourceVersion"));

    if (obj) {
        n_local = s->ops.export(s->ops.ud, af_wall_time(), &local);
        recs = object_records(obj, local, n_local, &n, &others, &n_others);
        af_free(local);
    }
    pthread_mutex_lock(&s->lock);
    af_free(s->remote);
    af_free(s->rv);
    others_free(s->others, s->n_others);
    s->others = others;
    s->n_others = n_others;
    s->remote = af_xcalloc(n + 1, sizeof(*s->remote));
    if (n)
        memcpy(s->remote, recs, n * sizeof(*recs));
    s->n_remote = n;
    s->rv = rv ? af_xstrdup(rv) : NULL;
    s->exists = obj != NULL;
    s->known = true;
    if (wake) {
        s->dirty = true;
        pthread_cond_broadcast(&s->cond);
    }
    pthread_mutex_unlock(&s->lock);
    s->ops.absorb(s->ops.ud, recs, n);   /* also none: the state was read */
    af_free(recs);
}

/* ---- requests ---------------------------------------------------------------------------- */

static size_t body_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct af_buf *b = ud;
    size_t n = size * nmemb;

    return af_buf_add(b, ptr, n) ? 0 : n;
}

int af__kube_request(struct af_kube *k, CURL *h, const char *method, const char *path,
                     const char *body, long timeout_ms, long *status, json_t **out)
{
    struct af_buf b = AF_BUF_INIT(STATE_READ_MAX);
    int rc = AF_ECONN;

    *out = NULL;
    *status = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        struct creds c;
        char *url;
        struct curl_slist *hdr;
        CURLcode cc;

        af_buf_reset(&b);
        af__kube_creds_get(k, &c);
        hdr = af__kube_http_setup(k, h, path, &c, &url);
        if (body) {
            hdr = curl_slist_append(hdr, "Content-Type: application/json");
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
            if (!strcmp(method, "PUT"))
                curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, "PUT");
        }
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, body_cb);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 1L);
        cc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
        curl_slist_free_all(hdr);
        af_free(url);
        if (atomic_load(&k->stop)) {
            af__kube_creds_clear(&c);
            rc = AF_ECANCELED;
            break;
        }
        if (cc == CURLE_OK && *status == 401 && attempt == 0) {
            af__kube_creds_invalidate(k, c.gen);
            af__kube_creds_clear(&c);
            continue;
        }
        af__kube_creds_clear(&c);
        if (cc != CURLE_OK) {
            AF_LOG(AF_LOG_WARN, "API server request failed", "method", method, "path", path,
                   "error", curl_easy_strerror(cc), NULL);
            break;
        }
        *out = b.len ? json_loadb(b.buf, b.len, 0, NULL) : NULL;
        rc = 0;
        break;
    }
    af_buf_release(&b);
    return rc;
}

int af__kube_served(struct af_kube *k, CURL *h, const char *group_version,
                    const char *resource, long timeout_ms)
{
    long status = 0;
    json_t *doc = NULL, *res, *r;
    size_t i;
    int yes = 0;

    if (af__kube_request(k, h, "GET", group_version, NULL, timeout_ms, &status, &doc))
        return -1;
    if (status != 200) {
        json_decref(doc);
        return status == 404 ? 0 : -1;
    }
    res = json_object_get(doc, "resources");
    json_array_foreach(json_is_array(res) ? res : NULL, i, r) {
        const char *name = json_string_value(json_object_get(r, "name"));
        if (name && !strcmp(name, resource))
            yes = 1;
    }
    json_decref(doc);
    return yes;
}

static void log_status(const char *what, long status)
{
    char st[16];

    snprintf(st, sizeof(st), "%ld", status);
    AF_LOG(AF_LOG_WARN, what, "status", st, NULL);
}

/* ---- the writer ----------------------------------------------------------------------------- */

void af__kube_configmap_paths(CURL *h, const char *ns, const char *name, char **coll,
                              char **obj)
{
    char *ens = curl_easy_escape(h, ns, 0), *ename = curl_easy_escape(h, name, 0);

    *coll = af_xasprintf("/api/v1/namespaces/%s/configmaps", ens);
    *obj = af_xasprintf("%s/%s", *coll, ename);
    curl_free(ens);
    curl_free(ename);
}

json_t *af__kube_configmap_json(const char *ns, const char *name, const char *about)
{
    return json_pack("{s:s,s:s,s:{s:s,s:s,s:{s:s},s:{s:s}}}", "apiVersion", "v1", "kind",
                     "ConfigMap", "metadata", "name", name, "namespace", ns, "labels",
                     "app.kubernetes.io/name", "accelfit", "annotations", "accelfit.io/about",
                     about);
}

/* The object to write: the records `v`, and the other keys `o` as they were read. *size is the
 * size of its data as the API server counts it (keys and values). */
static json_t *object_json(struct af_kube_state *s, const struct af_rollout_record *v, size_t n,
                           const struct other_key *o, size_t n_o, const char *rv, size_t *size)
{
    json_t *data = json_object();
    json_t *obj = af__kube_configmap_json(s->ns, s->name,
                                          "the state of accelfit's rollouts, one key per "
                                          "rollout, shared by its replicas (docs/rollouts.md); "
                                          "written by accelfit");

    *size = 0;
    for (size_t i = 0; i < n_o; i++) {
        if (json_object_get(data, o[i].key))
            continue;
        json_object_set_new(data, o[i].key, json_string(o[i].text));
        *size += strlen(o[i].key) + strlen(o[i].text);
    }
    for (size_t i = 0; i < n; i++) {
        char *text = record_text(&v[i]);
        if (json_object_get(data, v[i].name))   /* a key read as text replaced by its record */
            *size -= strlen(v[i].name) + strlen(json_string_value(json_object_get(data, v[i].name)));
        json_object_set_new(data, v[i].name, json_string(text));
        *size += strlen(v[i].name) + strlen(text);
        af_free(text);
    }
    json_object_set_new(obj, "data", data);
    if (rv)
        json_object_set_new(json_object_get(obj, "metadata"), "resourceVersion", json_string(rv));
    return obj;
}

/*
 * One round: the object as known (read when not), merged with this replica's records,
 * written when that changes it. Returns 0 (nothing left to write), CONFLICT (read again
 * and merge again: a conflict), or an error.
 */
static int write_round(struct af_kube_state *s)
{
    struct af_rollout_record *local = NULL, *merged = NULL;
    struct other_key *others = NULL;
    size_t n_local, n_merged = 0, n_others = 0, size = 0;
    bool known, exists, change = false;
    char *rv = NULL, *text = NULL;
    json_t *obj = NULL, *ans = NULL;
    long status = 0;
    int rc;

    pthread_mutex_lock(&s->lock);
    known = s->known;
    pthread_mutex_unlock(&s->lock);
    if (!known) {
        rc = af__kube_request(s->k, s->rh, "GET", s->obj_path, NULL, STATE_TIMEOUT_MS, &status, &ans);
        if (rc)
            goto out;
        if (status != 200 && status != 404) {
            log_status("cannot read the rollout state object", status);
            rc = AF_EHTTP;
            goto out;
        }
        learn(s, status == 200 ? ans : NULL, false);
        json_decref(ans);
        ans = NULL;
    }
    n_local = s->ops.export(s->ops.ud, af_wall_time(), &local);
    pthread_mutex_lock(&s->lock);
    exists = s->exists;
    rv = s->rv ? af_xstrdup(s->rv) : NULL;
    merged = af_xcalloc(s->n_remote + n_local + 1, sizeof(*merged));
    for (size_t i = 0; i < s->n_remote; i++)
        merged[n_merged++] = s->remote[i];
    others = af_xcalloc(s->n_others + 1, sizeof(*others));
    for (size_t i = 0; i < s->n_others; i++) {
        others[i].key = af_xstrdup(s->others[i].key);
        others[i].text = af_xstrdup(s->others[i].text);
    }
    n_others = s->n_others;
    pthread_mutex_unlock(&s->lock);
    for (size_t i = 0; i < n_local; i++) {
        size_t j;
        for (j = 0; j < n_merged; j++)
            if (!strcmp(merged[j].name, local[i].name))
                break;
        if (j == n_merged) {
            merged[n_merged++] = local[i];
            change = true;
            continue;
        }
        /* what people read moves on with the stage */
        change = change || af_rollout_record_differs(&merged[j], &local[i]) ||
                 (merged[j].generation == local[i].generation &&
                  merged[j].stage < local[i].stage);
        af_rollout_record_merge(&merged[j], &local[i], &merged[j]);
    }
    rc = 0;
    if (exists && !change)
        goto out;
    obj = object_json(s, merged, n_merged, others, n_others, exists ? rv : NULL, &size);
    if (size > STATE_DATA_MAX && n_others) {
        char sz[24], keys[24];

        snprintf(sz, sizeof(sz), "%zu", size);
        snprintf(keys, sizeof(keys), "%zu", n_others);
        AF_LOG(AF_LOG_WARN, "rollout state object too large, dropping the keys of rollouts not "
               "run here", "bytes", sz, "keys", keys, NULL);
        json_decref(obj);
        obj = object_json(s, merged, n_merged, NULL, 0, exists ? rv : NULL, &size);
    }
    if (size > STATE_DATA_MAX) {
        char sz[24];

        snprintf(sz, sizeof(sz), "%zu", size);
        AF_LOG(AF_LOG_ERROR, "rollout state too large to write", "bytes", sz, NULL);
        rc = 0;
        goto out;
    }
    text = json_dumps(obj, JSON_COMPACT);
    rc = af__kube_request(s->k, s->rh, exists ? "PUT" : "POST",
                          exists ? s->obj_path : s->coll_path, text, STATE_TIMEOUT_MS, &status,
                          &ans);
    if (rc)
        goto out;
    if (status == 200 || status == 201) {
        learn(s, ans, false);   /* what we wrote */
    } else if (status == 409 || status == 404) {
        /* someone wrote first (or it was deleted, or created): read it again, merge again */
        pthread_mutex_lock(&s->lock);
        s->known = false;
        pthread_mutex_unlock(&s->lock);
        rc = CONFLICT;
    } else {
        log_status("cannot write the rollout state object", status);
        rc = AF_EHTTP;
    }
out:
    json_decref(ans);
    json_decref(obj);
    af_free(text);
    af_free(rv);
    af_free(local);
    af_free(merged);
    others_free(others, n_others);
    return rc;
}

static void *writer_main(void *arg)
{
    struct af_kube_state *s = arg;
    struct af_kube *k = s->k;
    struct af_kube_backoff bo;

    af__kube_backoff_init(&bo, k);
    while (!atomic_load(&k->stop)) {
        int rc = 0;

        pthread_mutex_lock(&s->lock);
        /* stop is checked under the lock af__kube_state_stop broadcasts with */
        if (!s->dirty && !atomic_load(&k->stop)) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += (time_t)STATE_TICK_S;
            pthread_cond_timedwait(&s->cond, &s->lock, &ts);
        }
        s->dirty = false;
        pthread_mutex_unlock(&s->lock);
        if (atomic_load(&k->stop))
            break;
        for (int i = 0; i < STATE_WRITE_ATTEMPTS; i++) {
            rc = write_round(s);
            if (rc != CONFLICT)
                break;
        }
        if (rc == AF_ECANCELED)
            break;
        if (rc) {
            pthread_mutex_lock(&s->lock);
            s->dirty = true;   /* try again after the backoff */
            s->known = false;
            pthread_mutex_unlock(&s->lock);
            if (!af__kube_backoff_sleep(&bo, k))
                break;
        }
    }
    return NULL;
}

/* ---- the watcher --------------------------------------------------------------------------- */

static void watch_line(struct af_kube_state *s, const char *p, size_t n)
{
    json_t *ev = json_loadb(p, n, 0, NULL), *obj = json_object_get(ev, "object");
    const char *type = json_string_value(json_object_get(ev, "type"));
    const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"),
                                                       "resourceVersion"));

    if (!type) {
        AF_LOG(AF_LOG_WARN, "undecodable rollout state watch event skipped", NULL);
    } else if (!strcmp(type, "ERROR")) {
        /* 410: watch again at once, from now; another error ends this watch, and the loop
         * backs off before the next (a struggling API server is not hammered) */
        if (json_integer_value(json_object_get(obj, "code")) == 410)
            s->watch_expired = true;
        else
            s->watch_failed = true;
    } else {
        if (!strcmp(type, "ADDED") || !strcmp(type, "MODIFIED"))
            learn(s, obj, true);
        else if (!strcmp(type, "DELETED"))
            learn(s, NULL, true);
        if (rv && *rv) {
            af_free(s->watch_rv);
            s->watch_rv = af_xstrdup(rv);
        }
    }
    json_decref(ev);
}

static size_t watch_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct af_kube_state *s = ud;
    size_t n = size * nmemb, start = 0;
    long status = 0;

    curl_easy_getinfo(s->wh, CURLINFO_RESPONSE_CODE, &status);
    if (status != 200)
        return n;
    if (af_buf_add(&s->line, ptr, n))
        return 0;
    for (;;) {
        char *nl = memchr(s->line.buf + start, '\n', s->line.len - start);
        if (!nl)
            break;
        if (nl > s->line.buf + start)
            watch_line(s, s->line.buf + start, (size_t)(nl - (s->line.buf + start)));
        start = (size_t)(nl - s->line.buf) + 1;
    }
    memmove(s->line.buf, s->line.buf + start, s->line.len - start);
    s->line.len -= start;
    s->line.buf[s->line.len] = '\0';
    return s->watch_expired || s->watch_failed ? 0 : n;
}

static void *watcher_main(void *arg)
{
    struct af_kube_state *s = arg;
    struct af_kube *k = s->k;
    struct af_kube_backoff bo;

    af__kube_backoff_init(&bo, k);
    while (!atomic_load(&k->stop)) {
        int tmin = k->opt.watch_timeout_min_s > 0 ? k->opt.watch_timeout_min_s : 300;
        char *esc = curl_easy_escape(s->wh, s->name, 0);
        char *pq = af_xasprintf("%s?fieldSelector=metadata.name%%3D%s&watch=true"
                                "&allowWatchBookmarks=true&timeoutSeconds=%d%s%s",
                                s->coll_path, esc, tmin + (int)(af__kube_rand01() * tmin),
                                s->watch_rv ? "&resourceVersion=" : "",
                                s->watch_rv ? s->watch_rv : "");
        struct creds c;
        char *url;
        struct curl_slist *hdr;
        CURLcode cc;
        long status = 0;
        uint64_t t0 = af_now_ns();

        curl_free(esc);
        af__kube_creds_get(k, &c);
        af_buf_reset(&s->line);
        s->watch_expired = s->watch_failed = false;
        hdr = af__kube_http_setup(k, s->wh, pq, &c, &url);
        curl_easy_setopt(s->wh, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(s->wh, CURLOPT_WRITEFUNCTION, watch_cb);
        curl_easy_setopt(s->wh, CURLOPT_WRITEDATA, s);
        cc = curl_easy_perform(s->wh);
        curl_easy_getinfo(s->wh, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(hdr);
        af_free(url);
        af_free(pq);
        if (atomic_load(&k->stop)) {
            af__kube_creds_clear(&c);
            break;
        }
        if (status == 401)
            af__kube_creds_invalidate(k, c.gen);
        af__kube_creds_clear(&c);
        if (s->watch_expired || status == 410) {
            af_free(s->watch_rv);
            s->watch_rv = NULL;
            if (s->watch_expired)
                continue;
        }
        if (status == 200 && cc == CURLE_OK && af_now_ns() - t0 > 1000000000ull)
            continue;   /* the watch's timeout: watch again */
        if (status != 200 && status)
            log_status("rollout state watch failed", status);
        if (!af__kube_backoff_sleep(&bo, k))
            break;
    }
    return NULL;
}

/* ---- start, stop, notify --------------------------------------------------------------------- */

int af_kube_state_start(struct af_kube *k, const char *ns, const char *name,
                        const struct af_kube_state_ops *ops)
{
    struct af_kube_state *s;

    if (!k || !ns || !*ns || !name || !*name || !ops || !ops->export || !ops->absorb ||
        k->state)
        return AF_EINVAL;
    s = af_xcalloc(1, sizeof(*s));
    s->k = k;
    s->ops = *ops;
    s->ns = af_xstrdup(ns);
    s->name = af_xstrdup(name);
    s->wh = curl_easy_init();
    s->rh = curl_easy_init();
    af_assert(s->wh && s->rh);
    af__kube_configmap_paths(s->rh, ns, name, &s->coll_path, &s->obj_path);
    af_buf_init(&s->line, MAX_EVENT_BYTES);
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->cond, NULL);
    s->dirty = true;   /* read it, and create it when it is not there */
    k->state = s;
    pthread_create(&s->writer, NULL, writer_main, s);
    pthread_create(&s->watcher, NULL, watcher_main, s);
    AF_LOG(AF_LOG_INFO, "rollout state kept in the API server", "namespace", ns, "configmap",
           name, NULL);
    return 0;
}

void af_kube_state_notify(struct af_kube *k)
{
    struct af_kube_state *s = k ? k->state : NULL;

    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->dirty = true;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
}

/* Called by af_kube_stop once ->stop is set. */
void af__kube_state_stop(struct af_kube *k)
{
    struct af_kube_state *s = k->state;

    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    pthread_join(s->writer, NULL);
    pthread_join(s->watcher, NULL);
    curl_easy_cleanup(s->wh);
    curl_easy_cleanup(s->rh);
    af_buf_release(&s->line);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    af_free(s->remote);
    others_free(s->others, s->n_others);
    af_free(s->rv);
    af_free(s->watch_rv);
    af_free(s->ns);
    af_free(s->name);
    af_free(s->coll_path);
    af_free(s->obj_path);
    af_free(s);
    k->state = NULL;
}
