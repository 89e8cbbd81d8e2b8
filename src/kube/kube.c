/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube: credentials, the reflector (LIST + WATCH of Nodes and Pods with
 * libcurl) and Event posting.
 *
 * Threads (all joined by af_kube_stop):
 *   reflector x2   one per kind (nodes, pods), each with its own curl easy
 *                  handle; it decodes outside any lock and applies a batch of
 *                  events to the shared af_cache under ->cache_lock
 *   publisher      coalesces "dirty" signals for publish_interval_s, builds a
 *                  snapshot under ->cache_lock and swaps it into the publisher
 *   events         drains the Event queue, POSTs core/v1 Events
 *
 * The cache is written only while holding ->cache_lock; the lock is never
 * held across network I/O or JSON decoding.
 */
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accelfit/codec.h"
#include "accelfit/kube.h"
#include "accelfit/util.h"

extern char **environ;

#define MAX_EVENT_BYTES (16u << 20)        /* one watch event */
#define MAX_LIST_BYTES ((size_t)2 << 30)   /* one LIST page (rv=0 ignores limit) */
#define TOKEN_FILE_MAX_AGE_NS (60ull * 1000000000ull)
#define EVENT_QUEUE_MAX 256
#define EVENT_DEDUP_WINDOW_S 600.0
#define EVENT_DEDUP_MAX 4096
#define EXEC_TIMEOUT_NS (60ull * 1000000000ull)

void af_kube_options_default(struct af_kube_options *o)
{
    memset(o, 0, sizeof(*o));
    o->page_size = 500;
    o->watch_timeout_min_s = 300;
    o->backoff_initial_s = 0.8;
    o->backoff_max_s = 30;
    o->publish_interval_s = 0.05;
    o->events_per_minute = 60;
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

/* ---- pending Events ---------------------------------------------------------------------- */

struct ev_item {
    char *ns, *pod, *uid, *type, *reason, *message;
    int count;
    double first, last;
};

struct ev_seen {
    uint64_t hash;
    double first;
};

struct af_kube;

struct reflector {
    struct af_kube *k;
    enum af_kind kind;
    pthread_t thread;
    CURL *h;
    char *rv;                  /* last seen resourceVersion */
    bool listed;               /* a full list of this kind was applied */
    bool up;
    /* per-transfer state */
    struct af_buf body;        /* LIST body / error body */
    struct af_buf line;        /* partial watch line */
    bool streaming;            /* 200 watch: parse lines */
    bool expired;              /* in-band ERROR 410 */
    bool failed;               /* other in-band ERROR or oversize event */
    long http_status;
    uint64_t events;           /* events seen on this watch */
};

struct af_kube {
    struct af_kube_conn *conn;
    struct af_kube_options opt;
    struct af_config_holder *cfg;
    struct af_publisher *pub;
    struct af_cache_status *st;
    struct af_cache_status own_st;   /* used when the caller passes no status */
    atomic_bool stop;
    double low_speed_time;
    char *base_url;            /* scheme://host:port[/prefix] used in URLs */
    struct curl_slist *connect_to;

    /* stop / dirty signalling */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool dirty;                /* protected by ->lock */
    uint64_t dirty_since;      /* protected by ->lock */

    pthread_mutex_t cache_lock;
    struct af_cache *cache;    /* protected by ->cache_lock */

    /* credentials, protected by ->cred_lock */
    pthread_mutex_t cred_lock;
    unsigned cred_gen;
    char *file_token;
    uint64_t file_token_read_ns;
    bool exec_valid;
    char *exec_token, *exec_cert, *exec_key;
    double exec_expiry;        /* wall seconds; 0 = none given */

    struct reflector refl[2];
    pthread_t publisher;

    /* events, protected by ->ev_lock */
    pthread_t ev_thread;
    pthread_mutex_t ev_lock;
    pthread_cond_t ev_cond;
    struct ev_item queue[EVENT_QUEUE_MAX];
    size_t q_head, q_len;
    struct ev_seen *seen;
    size_t n_seen;
    double tokens;
    double tokens_at;
};

/* ---- small helpers ----------------------------------------------------------------------- */

static double rand01(void)
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

static char *trim_dup(const char *s, size_t n)
{
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    while (n && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')) {
        s++;
        n--;
    }
    return af_xstrndup(s, n);
}

/* RFC 3339 ("2026-11-22T04:00:00Z", "...T04:00:00.123+02:00") to Unix seconds; < 0 on error. */
static double parse_rfc3339(const char *s)
{
    struct tm tm;
    int y, mo, d, h, mi, sec, n = 0;
    double frac = 0;
    memset(&tm, 0, sizeof(tm));
    if (!s || sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &sec, &n) != 6)
        return -1;
    s += n;
    if (*s == '.') {
        char *end;
        frac = strtod(s, &end);
        s = end;
    }
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    double t = (double)timegm(&tm) + frac;
    if (*s == 'Z' || *s == 'z')
        return t;
    int oh, om;
    if ((*s == '+' || *s == '-') && sscanf(s + 1, "%2d:%2d", &oh, &om) == 2)
        return t - (*s == '+' ? 1 : -1) * (oh * 3600.0 + om * 60.0);
    return -1;
}

static void rfc3339_now(char *out, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* ---- credentials -------------------------------------------------------------------------- */

struct creds {
    char *token;
    char *cert_pem;
    char *key_pem;
    unsigned gen;
};

static void creds_clear(struct creds *c)
{
    free(c->token);
    free(c->cert_pem);
    free(c->key_pem);
    memset(c, 0, sizeof(*c));
}

/*
 * A string field of an ExecCredential's status, or NULL. A value holding "\u0000" is
 * NULL too, and logged: a token or key cut short at the NUL would be sent as a different
 * credential than the plugin meant.
 */
static const char *cred_field(json_t *status, const char *name, const char *command)
{
    json_t *v = json_object_get(status, name);
    const char *s = json_string_value(v);

    if (s && strlen(s) != json_string_length(v)) {
        AF_LOG(AF_LOG_ERROR, "exec credential field holds \\u0000 (NUL); ignored", "command",
               command, "field", name, NULL);
        return NULL;
    }
    return s;
}

/* Runs the exec plugin; fills the exec_* fields. Called with cred_lock held. */
static int run_exec_plugin(struct af_kube *k)
{
    struct af_kube_exec *e = k->conn->exec;
    size_t nenv = 0, nargs = 0;
    int pipefd[2];
    pid_t pid;
    int rc;

    while (e->args && e->args[nargs])
        nargs++;
    for (char **p = environ; p && *p; p++)
        nenv++;
    size_t nextra = 0;
    while (e->env && e->env[nextra])
        nextra++;
    char **argv = af_xcalloc(nargs + 2, sizeof(char *));
    argv[0] = e->command;
    for (size_t i = 0; i < nargs; i++)
        argv[i + 1] = e->args[i];
    char **envp = af_xcalloc(nenv + nextra + 2, sizeof(char *));
    size_t ne = 0;
    for (char **p = environ; p && *p; p++) {
        if (!strncmp(*p, "KUBERNETES_EXEC_INFO=", 21))
            continue;
        bool overridden = false;
        for (size_t i = 0; i < nextra; i++) {
            const char *eq = strchr(e->env[i], '=');
            size_t kl = eq ? (size_t)(eq - e->env[i]) : strlen(e->env[i]);
            if (!strncmp(*p, e->env[i], kl) && (*p)[kl] == '=')
                overridden = true;
        }
        if (!overridden)
            envp[ne++] = *p;
    }
    for (size_t i = 0; i < nextra; i++)
        envp[ne++] = e->env[i];
    const char *apiv = e->api_version ? e->api_version : "client.authentication.k8s.io/v1";
    char *info = af_xasprintf("KUBERNETES_EXEC_INFO={\"apiVersion\":\"%s\",\"kind\":"
                              "\"ExecCredential\",\"spec\":{\"interactive\":false}}",
                              apiv);
    envp[ne++] = info;

    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        rc = AF_EIO;
        goto out_noproc;
    }
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pipefd[1], 1);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    int serr = posix_spawnp(&pid, e->command, &fa, NULL, argv, envp);
    posix_spawn_file_actions_destroy(&fa);
    close(pipefd[1]);
    if (serr != 0) {
        close(pipefd[0]);
        AF_LOG(AF_LOG_ERROR, "exec credential plugin failed to start", "command", e->command,
               "error", strerror(serr), NULL);
        rc = AF_EIO;
        goto out_noproc;
    }
    struct af_buf out = AF_BUF_INIT(1 << 20);
    char tmp[4096];
    uint64_t deadline = af_now_ns() + EXEC_TIMEOUT_NS;
    bool killed = false;
    for (;;) {
        struct pollfd pfd = {pipefd[0], POLLIN, 0};
        int pr = poll(&pfd, 1, 200);
        if (atomic_load(&k->stop) || af_now_ns() > deadline) {
            kill(pid, SIGKILL); /* our own child */
            killed = true;
            break;
        }
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            continue;
        ssize_t r = read(pipefd[0], tmp, sizeof(tmp));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (af_buf_add(&out, tmp, (size_t)r))
            break;
    }
    close(pipefd[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    rc = AF_EIO;
    if (killed) {
        AF_LOG(AF_LOG_ERROR, "exec credential plugin timed out or was canceled", "command",
               e->command, NULL);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        AF_LOG(AF_LOG_ERROR, "exec credential plugin failed", "command", e->command, NULL);
    } else {
        json_error_t jerr;
        /* JSON_ALLOW_NUL: a "\u0000" in a field we do not read must not void the
         * credential; the fields we do read are refused one by one (cred_field). */
        json_t *root = json_loadb(out.buf ? out.buf : "", out.len, JSON_ALLOW_NUL, &jerr);
        json_t *st = json_object_get(root, "status");
        const char *tok = cred_field(st, "token", e->command);
        const char *cert = cred_field(st, "clientCertificateData", e->command);
        const char *key = cred_field(st, "clientKeyData", e->command);
        const char *exp = cred_field(st, "expirationTimestamp", e->command);
        if (!root) {
            char where[64];
            snprintf(where, sizeof(where), "line %d column %d", jerr.line, jerr.column);
            AF_LOG(AF_LOG_ERROR, "exec credential plugin printed no JSON", "command",
                   e->command, "error", jerr.text, "at", where, NULL);
        } else if (!st || (!tok && !(cert && key))) {
            AF_LOG(AF_LOG_ERROR, "exec credential plugin printed no usable ExecCredential",
                   "command", e->command, NULL);
        } else {
            free(k->exec_token);
            free(k->exec_cert);
            free(k->exec_key);
            k->exec_token = af_xstrdup(tok);
            k->exec_cert = af_xstrdup(cert);
            k->exec_key = af_xstrdup(key);
            k->exec_expiry = exp ? parse_rfc3339(exp) : 0;
            if (exp && k->exec_expiry < 0) {
                AF_LOG(AF_LOG_WARN, "exec credential expirationTimestamp unparsable", "value",
                       exp, NULL);
                k->exec_expiry = 0;
            }
            k->exec_valid = true;
            rc = 0;
            AF_LOG(AF_LOG_DEBUG, "exec credential refreshed", "command", e->command, NULL);
        }
        json_decref(root);
    }
    af_buf_release(&out);
out_noproc:
    free(info);
    free(argv);
    free(envp);
    return rc;
}

static void read_token_file(struct af_kube *k)
{
    struct af_buf b = AF_BUF_INIT(1 << 20);
    int rc = af_buf_read_file(&b, k->conn->token_file);
    k->file_token_read_ns = af_now_ns();
    if (rc) {
        AF_LOG(AF_LOG_WARN, "cannot read token file", "path", k->conn->token_file, "error",
               af_strerror(rc), NULL);
    } else {
        free(k->file_token);
        k->file_token = trim_dup(b.buf ? b.buf : "", b.len);
    }
    af_buf_release(&b);
}

static void creds_get(struct af_kube *k, struct creds *c)
{
    memset(c, 0, sizeof(*c));
    pthread_mutex_lock(&k->cred_lock);
    if (k->conn->exec) {
        /* re-run 10 s before expiry */
        if (!k->exec_valid || (k->exec_expiry > 0 && af_wall_time() >= k->exec_expiry - 10))
            (void)run_exec_plugin(k);
        if (k->exec_valid) {
            c->token = af_xstrdup(k->exec_token);
            c->cert_pem = af_xstrdup(k->exec_cert);
            c->key_pem = af_xstrdup(k->exec_key);
        }
    }
    if (!c->token && k->conn->token_file) {
        if (!k->file_token || af_now_ns() - k->file_token_read_ns >= TOKEN_FILE_MAX_AGE_NS)
            read_token_file(k);
        c->token = af_xstrdup(k->file_token);
    }
    if (!c->token && k->conn->token)
        c->token = af_xstrdup(k->conn->token);
    c->gen = k->cred_gen;
    pthread_mutex_unlock(&k->cred_lock);
}

/* After a 401 with credentials of generation `gen`: force a refresh (once per generation). */
static void creds_invalidate(struct af_kube *k, unsigned gen)
{
    pthread_mutex_lock(&k->cred_lock);
    if (gen == k->cred_gen) {
        k->cred_gen++;
        k->exec_valid = false;
        k->file_token_read_ns = 0;
        free(k->file_token);
        k->file_token = NULL;
        AF_LOG(AF_LOG_INFO, "unauthorized; refreshing credentials", NULL);
    }
    pthread_mutex_unlock(&k->cred_lock);
}

/* ---- HTTP -------------------------------------------------------------------------------------- */

static int xferinfo_cb(void *ud, curl_off_t dlt, curl_off_t dln, curl_off_t ult, curl_off_t uln)
{
    struct af_kube *k = ud;
    return atomic_load(&k->stop) ? 1 : 0;
}

/* Sets the common options on `h` for `path_query`. Returns the header list to free. */
static struct curl_slist *http_setup(struct af_kube *k, CURL *h, const char *path_query,
                                     const struct creds *c, char **urlp)
{
    struct af_kube_conn *cn = k->conn;
    struct curl_slist *hdr = NULL;
    curl_easy_reset(h);
    *urlp = af_xasprintf("%s%s", k->base_url, path_query);
    curl_easy_setopt(h, CURLOPT_URL, *urlp);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_2TLS);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, (long)(k->low_speed_time + 0.5));
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, k);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "accelfit/" AF_VERSION);
    if (k->connect_to)
        curl_easy_setopt(h, CURLOPT_CONNECT_TO, k->connect_to);
    if (cn->insecure) {
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 0L);
        curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 0L);
    } else if (cn->ca_pem) {
        struct curl_blob blob = {cn->ca_pem, strlen(cn->ca_pem), CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_CAINFO_BLOB, &blob);
    } else if (cn->ca_file) {
        curl_easy_setopt(h, CURLOPT_CAINFO, cn->ca_file);
    }
    const char *cert = c->cert_pem ? c->cert_pem : cn->client_cert_pem;
    const char *key = c->key_pem ? c->key_pem : cn->client_key_pem;
    if (cert) {
        struct curl_blob blob = {(void *)cert, strlen(cert), CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_SSLCERT_BLOB, &blob);
        curl_easy_setopt(h, CURLOPT_SSLCERTTYPE, "PEM");
    } else if (cn->client_cert_file) {
        curl_easy_setopt(h, CURLOPT_SSLCERT, cn->client_cert_file);
    }
    if (key) {
        struct curl_blob blob = {(void *)key, strlen(key), CURL_BLOB_COPY};
        curl_easy_setopt(h, CURLOPT_SSLKEY_BLOB, &blob);
        curl_easy_setopt(h, CURLOPT_SSLKEYTYPE, "PEM");
    } else if (cn->client_key_file) {
        curl_easy_setopt(h, CURLOPT_SSLKEY, cn->client_key_file);
    }
    hdr = curl_slist_append(hdr, "Accept: application/json");
    hdr = curl_slist_append(hdr, "Accept-Encoding: identity");
    if (c->token && *c->token) {
        char *a = af_xasprintf("Authorization: Bearer %s", c->token);
        hdr = curl_slist_append(hdr, a);
        free(a);
    }
    return hdr;
}

/* ---- reflector ---------------------------------------------------------------------------------- */

static const char *kind_path(enum af_kind kind)
{
    return kind == AF_KIND_NODE ? "/api/v1/nodes" : "/api/v1/pods";
}

static const char *kind_name(enum af_kind kind)
{
    return kind == AF_KIND_NODE ? "nodes" : "pods";
}

#define POD_FIELD_SELECTOR "fieldSelector=status.phase%21%3DSucceeded%2Cstatus.phase%21%3DFailed"

static size_t body_cb(char *ptr, size_t size, size_t nmemb, void *ud)
{
    struct reflector *r = ud;
    size_t n = size * nmemb;
    if (af_buf_add(&r->body, ptr, n)) {
        r->failed = true;
        return 0;
    }
    return n;
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
    bool all = k->refl[0].up && k->refl[1].up;
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
    struct curl_slist *hdr = http_setup(k, r->h, pq, c, &url);
    curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, body_cb);
    curl_easy_setopt(r->h, CURLOPT_WRITEDATA, r);
    CURLcode cc = curl_easy_perform(r->h);
    curl_slist_free_all(hdr);
    free(url);
    r->http_status = 0;
    curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->http_status);
    if (atomic_load(&k->stop))
        return AF_ECANCELED;
    if (cc != CURLE_OK) {
        AF_LOG(AF_LOG_WARN, "list failed", "kind", kind_name(r->kind), "error",
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
    af_cache_begin_resync(k->cache, r->kind);
    pthread_mutex_unlock(&k->cache_lock);
    for (;;) {
        struct af_buf pq = AF_BUF_INIT(0);
        struct creds c;
        bool sel = r->kind == AF_KIND_POD;
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
        if (!rc && sel)
            rc = af_buf_puts(&pq, POD_FIELD_SELECTOR "&");
        af_assert(rc == 0);
        pq.buf[--pq.len] = '\0'; /* trailing & or ? */
        creds_get(k, &c);
        rc = do_get(r, pq.buf, &c);
        af_buf_release(&pq);
        if (!rc && r->http_status == 401)
            creds_invalidate(k, c.gen);
        creds_clear(&c);
        if (rc)
            break;
        if (r->http_status == 410 && cont && !retried_full) {
            /* continue token expired: one full (unpaginated) consistent list */
            AF_LOG(AF_LOG_INFO, "continue token expired; full list", "kind", kind_name(r->kind),
                   NULL);
            free(cont);
            cont = NULL;
            retried_full = true;
            limit = 0;
            rv0 = "";
            pthread_mutex_lock(&k->cache_lock);
            af_cache_begin_resync(k->cache, r->kind);
            pthread_mutex_unlock(&k->cache_lock);
            continue;
        }
        if (r->http_status != 200) {
            char st[16];
            snprintf(st, sizeof(st), "%ld", r->http_status);
            AF_LOG(AF_LOG_WARN, "list failed", "kind", kind_name(r->kind), "status", st, NULL);
            rc = status_to_rc(r->http_status);
            break;
        }
        struct list_items li = {0};
        struct af_error err;
        memset(&err, 0, sizeof(err));
        char *page_rv = NULL;
        free(cont);
        cont = NULL;
        struct af_config *cfg = af_config_holder_get(k->cfg);
        size_t skipped = 0;
        rc = af_codec_decode_list_skip(cfg, r->body.buf, r->body.len, list_item_cb, &li,
                                       &page_rv, &cont, &skipped, &err);
        af_config_unref(cfg);
        if (!rc && skipped) {
            char n[24];
            snprintf(n, sizeof(n), "%zu", skipped);
            AF_LOG(AF_LOG_WARN, "skipped undecodable objects in list", "kind",
                   kind_name(r->kind), "count", n, "first", err.text, NULL);
        }
        af_buf_release(&r->body);
        pthread_mutex_lock(&k->cache_lock);
        for (size_t i = 0; i < li.n_nodes; i++)
            af_cache_upsert_node(k->cache, li.nodes[i]);
        for (size_t i = 0; i < li.n_pods; i++)
            af_cache_upsert_pod(k->cache, li.pods[i]);
        update_counts(k);
        pthread_mutex_unlock(&k->cache_lock);
        free(li.nodes);
        free(li.pods);
        if (rc) {
            AF_LOG(AF_LOG_ERROR, "cannot decode list", "kind", kind_name(r->kind), "error",
                   err.text, NULL);
            free(page_rv);
            break;
        }
        if (page_rv) {
            free(rv);
            rv = page_rv;
        }
        if (!cont || !*cont)
            break;
        mark_dirty(k);
    }
    if (!rc) {
        free(r->rv);
        r->rv = rv ? rv : af_xstrdup("");
        rv = NULL;
        pthread_mutex_lock(&k->cache_lock);
        af_cache_end_resync(k->cache, r->kind);
        r->listed = true;
        if (k->refl[0].listed && k->refl[1].listed && !atomic_load(&k->st->synced)) {
            af_cache_set_synced(k->cache, true);
            atomic_store(&k->st->synced, true);
        }
        update_counts(k);
        pthread_mutex_unlock(&k->cache_lock);
        atomic_store(&k->st->last_sync_ns, af_now_ns());
        /* every completed full list counts, the initial one of each kind included */
        atomic_fetch_add(&k->st->relists, 1);
        AF_LOG(AF_LOG_INFO, "listed", "kind", kind_name(r->kind), "resourceVersion", r->rv,
               NULL);
        mark_dirty(k);
    }
    free(cont);
    free(rv);
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
            AF_LOG(AF_LOG_ERROR, "undecodable watch event skipped", "kind", kind_name(r->kind),
                   "error", err.text, NULL);
            af_watch_event_clear(ev);
            continue;
        }
        nev++;
        if (ev->type == AF_WATCH_ERROR) {
            if (ev->status_code == 410) {
                r->expired = true;
            } else {
                char code[16];
                snprintf(code, sizeof(code), "%d", ev->status_code);
                AF_LOG(AF_LOG_WARN, "watch error event", "kind", kind_name(r->kind), "code",
                       code, "message", ev->status_message ? ev->status_message : "", NULL);
                r->failed = true;
            }
            break;
        }
        if (nev == AF_ARRAY_SIZE(evs))
            break; /* apply this batch; the rest is handled by the next call */
    }
    if (cfg)
        af_config_unref(cfg);

    if (nev) {
        uint64_t applied = 0;
        pthread_mutex_lock(&k->cache_lock);
        for (size_t i = 0; i < nev; i++) {
            struct af_watch_event *ev = &evs[i];
            switch (ev->type) {
            case AF_WATCH_ADDED:
            case AF_WATCH_MODIFIED:
                if (ev->node)
                    af_cache_upsert_node(k->cache, af_node_info_ref(ev->node));
                if (ev->pod)
                    af_cache_upsert_pod(k->cache, af_pod_info_ref(ev->pod));
                applied++;
                break;
            case AF_WATCH_DELETED:
                if (ev->node)
                    af_cache_delete_node(k->cache, ev->node->name);
                if (ev->pod)
                    af_cache_delete_pod(k->cache, ev->pod->ns, ev->pod->name);
                applied++;
                break;
            case AF_WATCH_BOOKMARK:
                atomic_store(&k->st->last_sync_ns, af_now_ns());
                break;
            case AF_WATCH_ERROR:
                break;
            }
            if (ev->type != AF_WATCH_ERROR && ev->rv && *ev->rv) {
                free(r->rv);
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
               kind_name(r->kind), NULL);
        r->failed = true;
        return 0;
    }
    if (memchr(ptr, '\n', n))
        process_lines(r);
    return (r->failed || r->expired) ? 0 : n;
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
    int timeout = tmin + (int)(rand01() * tmin);
    char *pq = af_xasprintf("%s?watch=true&resourceVersion=%s&allowWatchBookmarks=true"
                            "&timeoutSeconds=%d%s",
                            kind_path(r->kind), r->rv ? r->rv : "", timeout,
                            r->kind == AF_KIND_POD ? "&" POD_FIELD_SELECTOR : "");
    struct creds c;
    char *url;
    uint64_t t0 = af_now_ns();

    creds_get(k, &c);
    af_buf_reset(&r->body);
    af_buf_reset(&r->line);
    r->streaming = r->expired = r->failed = false;
    r->http_status = 0;
    r->events = 0;
    struct curl_slist *hdr = http_setup(k, r->h, pq, &c, &url);
    curl_easy_setopt(r->h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(r->h, CURLOPT_WRITEFUNCTION, watch_cb);
    curl_easy_setopt(r->h, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(r->h, CURLOPT_HEADERFUNCTION, header_cb);
    curl_easy_setopt(r->h, CURLOPT_HEADERDATA, r);
    CURLcode cc = curl_easy_perform(r->h);
    curl_slist_free_all(hdr);
    free(url);
    free(pq);
    set_up(r, false);
    if (!r->http_status)
        curl_easy_getinfo(r->h, CURLINFO_RESPONSE_CODE, &r->http_status);
    unsigned gen = c.gen;
    creds_clear(&c);
    af_buf_release(&r->line);
    *short_watch = af_now_ns() - t0 < 1000000000ull && r->events == 0;

    if (atomic_load(&k->stop))
        return AF_ECANCELED;
    if (r->expired) {
        AF_LOG(AF_LOG_INFO, "watch expired (410); relisting", "kind", kind_name(r->kind), NULL);
        return AF_EEXPIRED;
    }
    if (r->http_status && r->http_status != 200) {
        char st[16];
        snprintf(st, sizeof(st), "%ld", r->http_status);
        AF_LOG(AF_LOG_WARN, "watch failed", "kind", kind_name(r->kind), "status", st, NULL);
        if (r->http_status == 401)
            creds_invalidate(k, gen);
        return status_to_rc(r->http_status);
    }
    if (r->failed)
        return AF_EIO;
    if (cc != CURLE_OK) {
        AF_LOG(AF_LOG_WARN, "watch interrupted", "kind", kind_name(r->kind), "error",
               curl_easy_strerror(cc), NULL);
        return AF_ECONN;
    }
    return 0;
}

static void *reflector_main(void *arg)
{
    struct reflector *r = arg;
    struct af_kube *k = r->k;
    double backoff = k->opt.backoff_initial_s;
    uint64_t last_trouble = af_now_ns();
    bool need_list = true;
    bool first_list = true;
    bool watched = false;
    int unauth_retries = 0;

    while (!atomic_load(&k->stop)) {
        int rc, short_watch = 0;
        if (need_list) {
            rc = do_list(r, first_list ? "0" : "");
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
        uint64_t now = af_now_ns();
        if (now - last_trouble > 120ull * 1000000000ull)
            backoff = k->opt.backoff_initial_s;
        last_trouble = now;
        double d = backoff * rand01();
        backoff *= 2;
        if (backoff > k->opt.backoff_max_s)
            backoff = k->opt.backoff_max_s;
        unauth_retries = 0;
        if (!sleep_stop(k, d))
            break;
    }
    return NULL;
}

/* ---- publisher ------------------------------------------------------------------------------ */

static void *publisher_main(void *arg)
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
        pthread_mutex_lock(&k->cache_lock);
        struct af_snapshot *s = af_cache_snapshot(k->cache);
        pthread_mutex_unlock(&k->cache_lock);
        af_publisher_publish(k->pub, s);
        pthread_mutex_lock(&k->lock);
    }
    pthread_mutex_unlock(&k->lock);
    return NULL;
}

/* ---- events --------------------------------------------------------------------------------- */

static uint64_t ev_hash(const char *uid, const char *reason, const char *message)
{
    uint64_t h = 1469598103934665603ull;
    const char *parts[3] = {uid ? uid : "", reason ? reason : "", message ? message : ""};
    for (int i = 0; i < 3; i++) {
        for (const char *s = parts[i]; *s; s++) {
            h ^= (unsigned char)*s;
            h *= 1099511628211ull;
        }
        h ^= 0xff;
        h *= 1099511628211ull;
    }
    return h;
}

static void ev_item_free(struct ev_item *e)
{
    free(e->ns);
    free(e->pod);
    free(e->uid);
    free(e->type);
    free(e->reason);
    free(e->message);
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

static void fmt_time(double t, char *out, size_t n)
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void post_one(struct af_kube *k, CURL *h, struct ev_item *e)
{
    char first[32], last[32], now[32];
    fmt_time(e->first, first, sizeof(first));
    fmt_time(e->last, last, sizeof(last));
    rfc3339_now(now, sizeof(now));
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
    free(name);
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
        creds_get(k, &c);
        struct curl_slist *hdr = http_setup(k, h, path, &c, &url);
        hdr = curl_slist_append(hdr, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard_cb);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 10000L);
        CURLcode cc = curl_easy_perform(h);
        long st = 0;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &st);
        curl_slist_free_all(hdr);
        free(url);
        free(path);
        unsigned gen = c.gen;
        creds_clear(&c);
        if (cc == CURLE_OK && st >= 200 && st < 300) {
            atomic_fetch_add(&k->st->events_posted, 1);
            break;
        }
        if (cc == CURLE_OK && st == 401 && attempt == 0) {
            creds_invalidate(k, gen);
            continue;
        }
        char sts[16];
        snprintf(sts, sizeof(sts), "%ld", st);
        AF_LOG(AF_LOG_WARN, "event post failed", "pod", e->pod, "reason", e->reason, "status",
               sts, "error", curl_easy_strerror(cc), NULL);
        atomic_fetch_add(&k->st->events_dropped, 1);
        break;
    }
    free(body);
}

static void *events_main(void *arg)
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
        ev_item_free(&e);
        pthread_mutex_lock(&k->ev_lock);
    }
    pthread_mutex_unlock(&k->ev_lock);
    curl_easy_cleanup(h);
    return NULL;
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
            free(*scheme);
            return AF_EINVAL;
        }
        *host = af_xstrndup(p, (size_t)(rb - p + 1));
        colon = (rb + 1 < end && rb[1] == ':') ? rb + 1 : NULL;
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        *host = af_xstrndup(p, (size_t)((colon ? colon : end) - p));
    }
    *port = colon ? atoi(colon + 1) : (!strcmp(*scheme, "http") ? 80 : 443);
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
        free(ct);
    } else {
        k->base_url = af_xasprintf("%s://%s:%d%s", scheme, host, port, prefix);
    }
    free(scheme);
    free(host);
    free(prefix);
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
    atomic_store(&st->synced, false);
    atomic_store(&st->watch_up, false);
    atomic_store(&st->down_since_ns, af_now_ns());

    for (int i = 0; i < 2; i++) {
        struct reflector *r = &k->refl[i];
        r->k = k;
        r->kind = (enum af_kind)i;
        r->h = curl_easy_init();
        af_assert(r->h);
        af_buf_init(&r->body, MAX_LIST_BYTES);
        af_buf_init(&r->line, MAX_EVENT_BYTES);
    }
    pthread_create(&k->publisher, NULL, publisher_main, k);
    pthread_create(&k->ev_thread, NULL, events_main, k);
    for (int i = 0; i < 2; i++)
        pthread_create(&k->refl[i].thread, NULL, reflector_main, &k->refl[i]);
    *out = k;
    return 0;
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
    for (int i = 0; i < 2; i++)
        pthread_join(k->refl[i].thread, NULL);
    pthread_join(k->publisher, NULL);
    pthread_join(k->ev_thread, NULL);
    for (int i = 0; i < 2; i++) {
        curl_easy_cleanup(k->refl[i].h);
        af_buf_release(&k->refl[i].body);
        af_buf_release(&k->refl[i].line);
        free(k->refl[i].rv);
    }
    for (size_t i = 0; i < k->q_len; i++)
        ev_item_free(&k->queue[(k->q_head + i) % EVENT_QUEUE_MAX]);
    free(k->seen);
    af_cache_free(k->cache);
    free(k->file_token);
    free(k->exec_token);
    free(k->exec_cert);
    free(k->exec_key);
    free(k->base_url);
    curl_slist_free_all(k->connect_to);
    af_kube_conn_free(k->conn);
    pthread_mutex_destroy(&k->lock);
    pthread_cond_destroy(&k->cond);
    pthread_mutex_destroy(&k->cache_lock);
    pthread_mutex_destroy(&k->cred_lock);
    pthread_mutex_destroy(&k->ev_lock);
    pthread_cond_destroy(&k->ev_cond);
    free(k);
}
