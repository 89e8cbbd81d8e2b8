/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube transport: credentials (a static token, a token file re-read at least
 * every minute and after a 401, exec credential plugins with their expiry) and
 * the libcurl options every request to the API server shares (TLS, client
 * certificates, bearer token, timeouts, stop).
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

#include "accelfit/kube.h"
#include "accelfit/util.h"

#include "kube/internal.h"
#include "accelfit/banned.h"

extern char **environ;

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

void af__kube_creds_clear(struct creds *c)
{
    af_free(c->token);
    af_free(c->cert_pem);
    af_free(c->key_pem);
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
            af_free(k->exec_token);
            af_free(k->exec_cert);
            af_free(k->exec_key);
            k->exec_token = af_xstrdup(tok);
            k->exec_cert = af_xstrdup(cert);
            k->exec_key = af_xstrdup(key);
            k->exec_expiry = exp ? af_parse_rfc3339(exp) : 0;
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
    af_free(info);
    af_free(argv);
    af_free(envp);
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
        af_free(k->file_token);
        k->file_token = trim_dup(b.buf ? b.buf : "", b.len);
    }
    af_buf_release(&b);
}

void af__kube_creds_get(struct af_kube *k, struct creds *c)
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
void af__kube_creds_invalidate(struct af_kube *k, unsigned gen)
{
    pthread_mutex_lock(&k->cred_lock);
    if (gen == k->cred_gen) {
        k->cred_gen++;
        k->exec_valid = false;
        k->file_token_read_ns = 0;
        af_free(k->file_token);
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
struct curl_slist *af__kube_http_setup(struct af_kube *k, CURL *h, const char *path_query,
                                     const struct creds *c, char **urlp)
{
    return af__kube_http_setup_accept(k, h, path_query, c, urlp, "application/json");
}

struct curl_slist *af__kube_http_setup_accept(struct af_kube *k, CURL *h, const char *path_query,
                                              const struct creds *c, char **urlp,
                                              const char *accept)
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
    {
        char *a = af_xasprintf("Accept: %s", accept);
        hdr = curl_slist_append(hdr, a);
        af_free(a);
    }
    hdr = curl_slist_append(hdr, "Accept-Encoding: identity");
    if (c->token && *c->token) {
        char *a = af_xasprintf("Authorization: Bearer %s", c->token);
        hdr = curl_slist_append(hdr, a);
        af_free(a);
    }
    return hdr;
}

long af__kube_get_stream(struct af_kube *k, CURL *h, char *path_query,
                         size_t (*cb)(char *, size_t, size_t, void *), void *ud)
{
    struct creds c;
    char *url;
    struct curl_slist *hdr;
    long status = 0;

    af__kube_creds_get(k, &c);
    hdr = af__kube_http_setup(k, h, path_query, &c, &url);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, cb);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, ud);
    (void)curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    if (status == 401)
        af__kube_creds_invalidate(k, c.gen);
    curl_slist_free_all(hdr);
    af_free(url);
    af_free(path_query);
    af__kube_creds_clear(&c);
    return status;
}
