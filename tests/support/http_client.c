/* SPDX-License-Identifier: Apache-2.0 */
/* Child-process accelfit server and a libcurl client for the HTTP suites. */
#include "support/http_client.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/ssl.h>

#include "accelfit/util.h"
#include "support/support.h"

int af_test_free_port(void)
{
    struct sockaddr_in sa;
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;

    ck_assert_int_ge(fd, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

char *af_test_server_log(const struct af_test_server *s)
{
    struct af_buf b = AF_BUF_INIT(16u << 20);

    if (af_buf_read_file(&b, s->log_path) != 0)
        return af_xstrdup("");
    return af_buf_detach(&b, NULL);
}

struct sink {
    struct af_buf body;
    char *ctype;
    size_t ctype_len;
    char *allow;
    size_t allow_len;
};

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
    struct sink *k = ud;

    if (af_buf_add(&k->body, p, sz * n) != 0)
        return 0;
    return sz * n;
}

static void header_value(const char *line, size_t n, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name), v;

    if (n <= nl || strncasecmp(line, name, nl) != 0 || line[nl] != ':')
        return;
    v = nl + 1;
    while (v < n && line[v] == ' ')
        v++;
    while (n > v && (line[n - 1] == '\r' || line[n - 1] == '\n'))
        n--;
    snprintf(out, outlen, "%.*s", (int)(n - v), line + v);
}

static size_t on_header(char *p, size_t sz, size_t n, void *ud)
{
    struct af_test_resp *r = ud;

    header_value(p, sz * n, "content-type", r->content_type, sizeof(r->content_type));
    header_value(p, sz * n, "allow", r->allow, sizeof(r->allow));
    {
        char cl[32] = "";
        header_value(p, sz * n, "content-length", cl, sizeof(cl));
        if (cl[0])
            r->content_length = strtoll(cl, NULL, 10);
    }
    return sz * n;
}

int af_test_http(CURL *c, const char *method, const char *url, const char *body, size_t len,
                 const char *const *headers, struct af_test_resp *r)
{
    struct sink k;
    struct curl_slist *hl = NULL;

    memset(r, 0, sizeof(*r));
    r->content_length = -1;
    memset(&k, 0, sizeof(k));
    af_buf_init(&k.body, 256u << 20);
    for (size_t i = 0; headers && headers[i]; i++)
        hl = curl_slist_append(hl, headers[i]);
    /* libcurl would wait for "100 Continue" on big bodies; kube-scheduler never sends Expect. */
    hl = curl_slist_append(hl, "Expect:");
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &k);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (!method || !strcmp(method, "GET")) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, NULL);
    } else if (!strcmp(method, "HEAD")) {
        curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, NULL);
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    } else {
        curl_easy_setopt(c, CURLOPT_NOBODY, 0L);
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? len : 0));
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, strcmp(method, "POST") ? method : NULL);
    }
    r->curl_rc = (int)curl_easy_perform(c);
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_easy_getinfo(c, CURLINFO_NUM_CONNECTS, &r->connects);
    curl_easy_getinfo(c, CURLINFO_HTTP_VERSION, &r->http_version);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
    curl_slist_free_all(hl);
    r->body = af_buf_detach(&k.body, &r->len);
    if (!r->body)
        r->body = af_xstrdup("");
    return r->curl_rc;
}

void af_test_resp_free(struct af_test_resp *r)
{
    af_free(r->body);
    r->body = NULL;
}

static bool child_exited(pid_t pid, int *status)
{
    return waitpid(pid, status, WNOHANG) == pid;
}

/*
 * The servers this process started. A failing test never reaches af_test_server_stop; with
 * CK_FORK Check kills the test's process group, without it the servers are killed at exit.
 */
static struct {
    pid_t owner, pid;
} started[256];
static size_t n_started;

static void kill_started(void)
{
    for (size_t i = 0; i < n_started; i++) {
        int status;
        if (started[i].owner != getpid() || started[i].pid <= 0 ||
            child_exited(started[i].pid, &status))
            continue;
        kill(started[i].pid, SIGKILL);
        waitpid(started[i].pid, &status, 0);
    }
}

/* `pid` was reaped: never signal it again (the number may be reused). */
static void forget_started(pid_t pid)
{
    for (size_t i = 0; i < n_started; i++)
        if (started[i].pid == pid)
            started[i].pid = 0;
}

static void remember_started(pid_t pid)
{
    static bool registered;

    if (!registered) {
        atexit(kill_started);
        registered = true;
    }
    if (n_started < AF_ARRAY_SIZE(started)) {
        started[n_started].owner = getpid();
        started[n_started].pid = pid;
        n_started++;
    }
}

void af_test_server_start(struct af_test_server *s, const char *const *args, bool tls,
                          const char *client_cert, const char *client_key)
{
    af_test_server_start_on(s, 0, args, tls, client_cert, client_key);
}

void af_test_server_start_on(struct af_test_server *s, int port, const char *const *args,
                             bool tls, const char *client_cert, const char *client_key)
{
    const char *argv[64];
    char listen[64];
    size_t n = 0;
    int status = 0;

    memset(s, 0, sizeof(s[0]));
    s->port = port ? port : af_test_free_port();
    s->tls = tls;
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", s->port);
    snprintf(s->base, sizeof(s->base), "%s://127.0.0.1:%d", tls ? "https" : "http", s->port);
    {
        char *log = af_test_temp_path("server-%d.log", s->port);
        snprintf(s->log_path, sizeof(s->log_path), "%s", log);
        af_free(log);
    }
    argv[n++] = "accelfit";
    argv[n++] = "serve";
    argv[n++] = "--listen";
    argv[n++] = listen;
    for (size_t i = 0; args && args[i] && n < AF_ARRAY_SIZE(argv) - 1; i++)
        argv[n++] = args[i];
    argv[n] = NULL;

    s->pid = fork();
    ck_assert_int_ge(s->pid, 0);
    if (s->pid == 0) {
        int fd = open(s->log_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 2);
            dup2(fd, 1);
            close(fd);
        }
        execv(AF_BINARY, (char *const *)argv);
        _exit(127);
    }
    remember_started(s->pid);
    for (int tries = 0; tries < 300; tries++) {
        CURL *c = curl_easy_init();
        struct af_test_resp r;
        char url[192];

        snprintf(url, sizeof(url), "%s/healthz", s->base);
        if (tls) {
            curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
            curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
            if (client_cert) {
                curl_easy_setopt(c, CURLOPT_SSLCERT, client_cert);
                curl_easy_setopt(c, CURLOPT_SSLKEY, client_key);
            }
        }
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 500L);
        af_test_http(c, NULL, url, NULL, 0, NULL, &r);
        curl_easy_cleanup(c);
        if (r.curl_rc == CURLE_OK && r.status == 200) {
            af_test_resp_free(&r);
            return;
        }
        af_test_resp_free(&r);
        if (child_exited(s->pid, &status)) {
            char *log = af_test_server_log(s);
            forget_started(s->pid);
            s->pid = 0;
            ck_abort_msg("accelfit serve exited (status %d) before answering: %s", status, log);
        }
        usleep(50000);
    }
    {
        char *log = af_test_server_log(s);
        ck_abort_msg("accelfit serve did not answer /healthz within 15 s: %s", log);
    }
}

int af_test_server_stop(struct af_test_server *s)
{
    int status = 0;

    if (s->pid <= 0)
        return -1;
    kill(s->pid, SIGTERM);
    for (int i = 0; i < 800; i++) {
        if (child_exited(s->pid, &status)) {
            forget_started(s->pid);
            s->pid = 0;
            if (WIFSIGNALED(status))
                return 128 + WTERMSIG(status);
            return WEXITSTATUS(status);
        }
        usleep(25000);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
    forget_started(s->pid);
    s->pid = 0;
    return 128 + SIGKILL;
}

/* ---- raw HTTP/1.1 ---------------------------------------------------------------------------- */

int af_test_raw_connect(int port)
{
    struct sockaddr_in sa;
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    ck_assert_int_ge(fd, 0);
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

static const char *find_crlfcrlf(const char *p, size_t n)
{
    for (size_t i = 0; i + 4 <= n; i++)
        if (!memcmp(p + i, "\r\n\r\n", 4))
            return p + i;
    return NULL;
}

/*
 * Takes complete answers off the front of `b` (kept NUL-terminated past its
 * length) into `r`; returns false on a malformed one.
 */
static bool raw_parse(struct af_buf *b, struct af_test_raw *r, bool head)
{
    for (;;) {
        const char *end, *line;
        size_t hlen, clen = 0, total;
        bool have_len = false, close_hdr = false;
        char ctype[64] = "";
        int status, minor;

        if (!b->len || r->count >= AF_TEST_RAW_MAX)
            return true;
        end = find_crlfcrlf(b->buf, b->len);
        if (!end)
            return true;
        hlen = (size_t)(end - b->buf) + 4;
        /* lws answers a request whose version it never parsed as HTTP/1.0 */
        if (sscanf(b->buf, "HTTP/1.%d %d ", &minor, &status) != 2)
            return false;
        if (status >= 100 && status < 200) {
            /* an interim answer (100 Continue): headers only, counted as an answer */
            r->status[r->count] = status;
            r->body[r->count] = af_xstrdup("");
            r->count++;
            memmove(b->buf, b->buf + hlen, b->len - hlen + 1);
            b->len -= hlen;
            continue;
        }
        for (line = strstr(b->buf, "\r\n"); line && line < end; line = strstr(line + 2, "\r\n")) {
            const char *h = line + 2;
            if (!strncasecmp(h, "content-length:", 15)) {
                clen = strtoul(h + 15, NULL, 10);
                have_len = true;
            } else if (!strncasecmp(h, "connection:", 11)) {
                const char *v = h + 11;
                while (*v == ' ')
                    v++;
                close_hdr = !strncasecmp(v, "close", 5);
            } else if (!strncasecmp(h, "content-type:", 13)) {
                const char *v = h + 13;
                while (*v == ' ')
                    v++;
                snprintf(ctype, sizeof(ctype), "%.*s", (int)strcspn(v, "\r"), v);
            }
        }
        if (!have_len)
            return false;
        if (head)
            clen = 0;   /* the length GET would have, and no body */
        total = hlen + clen;
        if (b->len < total)
            return true;
        r->status[r->count] = status;
        r->close[r->count] = close_hdr;
        memcpy(r->ctype[r->count], ctype, sizeof(ctype));
        r->body[r->count] = af_xmalloc(clen + 1);
        memcpy(r->body[r->count], b->buf + hlen, clen);
        r->body[r->count][clen] = '\0';
        r->len[r->count] = clen;
        r->count++;
        memmove(b->buf, b->buf + total, b->len - total + 1);
        b->len -= total;
    }
}

/* The client's end of a raw exchange: a socket, and a TLS session over it when asked. */
struct raw_conn {
    int fd;
    SSL_CTX *ctx;
    SSL *ssl;
};

static void raw_conn_open(struct raw_conn *c, int port, bool tls)
{
    memset(c, 0, sizeof(*c));
    c->fd = af_test_raw_connect(port);
    if (!tls)
        return;
    c->ctx = SSL_CTX_new(TLS_client_method());
    ck_assert_ptr_nonnull(c->ctx);
    SSL_CTX_set_verify(c->ctx, SSL_VERIFY_NONE, NULL);
    c->ssl = SSL_new(c->ctx);
    ck_assert_ptr_nonnull(c->ssl);
    SSL_set_fd(c->ssl, c->fd);
    ck_assert_msg(SSL_connect(c->ssl) == 1, "TLS handshake with 127.0.0.1:%d failed", port);
}

static ssize_t raw_conn_write(struct raw_conn *c, const void *data, size_t len)
{
    if (c->ssl)
        return SSL_write(c->ssl, data, (int)len);
    return write(c->fd, data, len);
}

static ssize_t raw_conn_read(struct raw_conn *c, void *buf, size_t len)
{
    if (c->ssl) {
        int n = SSL_read(c->ssl, buf, (int)len);
        return n > 0 ? n : 0;   /* a close, clean or not, ends the exchange */
    }
    return read(c->fd, buf, len);
}

static void raw_conn_close(struct raw_conn *c)
{
    if (c->ssl)
        SSL_free(c->ssl);
    if (c->ctx)
        SSL_CTX_free(c->ctx);
    close(c->fd);
}

int af_test_raw_exchange_opt(int port, const void *data, size_t len,
                             const struct af_test_raw_opts *o, int want, int timeout_ms,
                             struct af_test_raw *r)
{
    static const struct af_test_raw_opts plain;
    struct af_buf in = AF_BUF_INIT(64u << 20);
    uint64_t deadline = af_now_ns() + (uint64_t)timeout_ms * 1000000ull;
    struct raw_conn c;
    bool then_sent = false;

    if (!o)
        o = &plain;
    memset(r, 0, sizeof(*r));
    raw_conn_open(&c, port, o->tls);
    for (size_t off = 0; off < len;) {
        size_t n = o->slow_chunk && o->slow_chunk < len - off ? o->slow_chunk : len - off;
        ssize_t put = raw_conn_write(&c, (const char *)data + off, n);
        if (put <= 0)
            break;   /* the server closed early: what it answered is still read */
        off += (size_t)put;
        if (o->slow_chunk && off < len)
            usleep((useconds_t)o->slow_gap_ms * 1000u);
    }
    if (o->half_close) {
        if (c.ssl)
            (void)SSL_shutdown(c.ssl);
        shutdown(c.fd, SHUT_WR);
    }
    while (r->count < want) {
        char chunk[65536];
        uint64_t now = af_now_ns();
        struct pollfd pfd = {c.fd, POLLIN, 0};
        ssize_t got;

        if (now >= deadline) {
            r->timed_out = true;
            break;
        }
        if ((!c.ssl || !SSL_pending(c.ssl)) &&
            poll(&pfd, 1, (int)((deadline - now) / 1000000ull) + 1) <= 0)
            continue;
        got = raw_conn_read(&c, chunk, sizeof(chunk));
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            r->eof = true;
            break;
        }
        ck_assert_int_eq(af_buf_add(&in, chunk, (size_t)got), 0);
        ck_assert_int_eq(af_buf_add(&in, "", 1), 0);   /* a NUL past the end */
        in.len--;
        ck_assert_msg(raw_parse(&in, r, o->head), "malformed answer: %.200s", in.buf);
        if (o->then && !then_sent && r->count >= 1) {
            then_sent = true;
            if (raw_conn_write(&c, o->then, o->then_len) <= 0)
                break;
        }
    }
    raw_conn_close(&c);
    af_buf_release(&in);
    return r->count;
}

int af_test_raw_exchange(int port, const void *data, size_t len, int want, int timeout_ms,
                         struct af_test_raw *r)
{
    return af_test_raw_exchange_opt(port, data, len, NULL, want, timeout_ms, r);
}

void af_test_raw_free(struct af_test_raw *r)
{
    for (int i = 0; i < r->count; i++)
        af_free(r->body[i]);
    memset(r, 0, sizeof(*r));
}
