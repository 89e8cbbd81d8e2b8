/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The HTTP front end on libwebsockets: af_http_run. One lws service thread (the
 * caller) runs every connection of two listeners: the API (--listen, TLS when
 * configured) and, with --health-listen, a plain-HTTP vhost serving only /healthz,
 * /readyz and /metrics, so kubelet probes and Prometheus need no client certificate
 * (test_health_listener_serves_probes_without_client_certificates,
 * tests/check_http.c). Connections stay alive longer than Go's 90 s idle timeout,
 * so the server never closes a connection the scheduler is about to reuse
 * (test_keepalive_reuses_the_connection).
 *
 * The rest of the transport: connection.c (the state machine, the lws callback),
 * dispatch.c (requests into calls of the service), respond.c (sending answers),
 * deferred.c (answers a worker thread finishes),
 * routes.c, limits.c (the URL and header caps), raw.c (what lws cannot parse as
 * HTTP) and tls.c (the TLS files and their reload).
 *
 * What libwebsockets 4.1.6 does that this file works around:
 * - It can stall an h2 stream whose request body spans many TLS records, so ALPN
 *   offers http/1.1 only and kube-scheduler's Go client (h2 and http/1.1) keeps to
 *   HTTP/1.1 keep-alive (test_tls_http11_and_h2,
 *   test_large_nodes_mode_request_over_tls, tests/check_http.c).
 * - It does not say why a listener could not be made: the bind is tried again
 *   here to name the reason (test_address_in_use_exits_2_naming_it,
 *   test_bad_listen_names_the_wrong_part, tests/check_http.c; test_parse_listen,
 *   tests/check_service.c).
 * - Its own log lines go to accelfit's log at debug level, so what matters to an
 *   operator is said once, by accelfit, in its own words.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/internal.h"
#include "accelfit/banned.h"

#define KEEPALIVE_IDLE_S 120              /* > Go's IdleConnTimeout (90 s) */
/*
 * lws keeps a request's URL and header lines in one area of this size per
 * connection while it parses them; a request that overflows it is closed by
 * lws without an answer (docs/http-api.md). The URL and each header value
 * are capped below it (token limits, limits.c), so one oversized field gets 414 or 431.
 */
#define HEAD_AREA (32u * 1024u)
#define RAW_PROTOCOL "accelfit-raw"

/* ---- logging bridge ---------------------------------------------------------------------------- */

/*
 * libwebsockets' own lines (bind errors, TLS loading, parser complaints about
 * a client) go to accelfit's log at debug level: what matters to an operator
 * is said once, by accelfit, in its own words.
 */
static void lws_emit(int level, const char *line)
{
    char msg[512];
    size_t n;

    (void)level;
    snprintf(msg, sizeof(msg), "%s", line);
    n = strlen(msg);
    while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    AF_LOG(AF_LOG_DEBUG, "libwebsockets", "message", msg, NULL);
}

static const struct lws_protocols protocols[] = {
    {"http", af__http_callback, sizeof(struct pss), 65536, 0, NULL, 1u << 20},
    {RAW_PROTOCOL, af__http_raw_callback, sizeof(struct rawss), 4096, 0, NULL, 0},
    {NULL, NULL, 0, 0, 0, NULL, 0},
};

/* ---- running ----------------------------------------------------------------------------------------- */

static void check_stop(lws_sorted_usec_list_t *sul)
{
    struct server *s = lws_container_of(sul, struct server, sul);

    if (*s->stop)
        lws_cancel_service(s->ctx);
    else
        lws_sul_schedule(s->ctx, 0, &s->sul, check_stop, 100 * LWS_US_PER_MS);
}

/* Sets `why` (when given) and returns AF_EINVAL. */
static int listen_bad(char *why, size_t n, const char *fmt, ...) AF_PRINTF(3, 4);
static int listen_bad(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;

    if (why && n) {
        va_start(ap, fmt);
        vsnprintf(why, n, fmt, ap);
        va_end(ap);
    }
    return AF_EINVAL;
}

int af_http_parse_listen(const char *listen, char *host, size_t hostlen, int *port, bool *v6,
                         char *why, size_t whylen)
{
    const char *colon;
    int64_t p;

    *v6 = false;
    host[0] = '\0';
    if (!listen || !*listen)
        return listen_bad(why, whylen, "the address is empty; write ADDR:PORT, e.g. "
                                       "127.0.0.1:8888, or :8888 for every interface");
    if (listen[0] == '[') {
        const char *close = strchr(listen, ']');
        if (!close)
            return listen_bad(why, whylen, "'[' is not closed; write an IPv6 address as "
                                           "[ADDR]:PORT, e.g. [::1]:8888");
        if (close[1] != ':')
            return listen_bad(why, whylen, "no port after ']'; write [ADDR]:PORT, e.g. [::1]:8888");
        if ((size_t)(close - listen - 1) >= hostlen)
            return listen_bad(why, whylen, "the address is too long");
        memcpy(host, listen + 1, (size_t)(close - listen - 1));
        host[close - listen - 1] = '\0';
        colon = close + 1;
        *v6 = true;
    } else {
        colon = strrchr(listen, ':');
        if (!colon)
            return listen_bad(why, whylen, "no port; write ADDR:PORT, e.g. %.60s:8888",
                              listen);
        if ((size_t)(colon - listen) >= hostlen)
            return listen_bad(why, whylen, "the address is too long");
        memcpy(host, listen, (size_t)(colon - listen));
        host[colon - listen] = '\0';
    }
    if (af_parse_int64(colon + 1, 1, 65535, &p) != 0)
        return listen_bad(why, whylen, "the port '%.20s' is not a whole number from 1 to 65535",
                          colon + 1);
    *port = (int)p;
    if (!strcmp(host, "localhost"))
        snprintf(host, hostlen, "127.0.0.1");
    if (host[0]) {
        unsigned char tmp[sizeof(struct in6_addr)];
        if (!*v6 && strchr(host, ':'))
            return listen_bad(why, whylen,
                              "the IPv6 address '%.60s' needs brackets: [%.60s]:%d", host, host,
                              *port);
        if (*v6 ? inet_pton(AF_INET6, host, tmp) != 1 : inet_pton(AF_INET, host, tmp) != 1)
            return listen_bad(why, whylen,
                              "the address '%.60s' is not a numeric %s address (names other "
                              "than localhost are not looked up; leave it empty, as in :%d, for "
                              "every interface)",
                              host, *v6 ? "IPv6" : "IPv4", *port);
    }
    return 0;
}

/* Sets opt->error, if the caller gave a buffer. */
static void fail_msg(const struct af_http_options *opt, const char *fmt, ...) AF_PRINTF(2, 3);
static void fail_msg(const struct af_http_options *opt, const char *fmt, ...)
{
    va_list ap;

    if (!opt->error || !opt->error_len)
        return;
    va_start(ap, fmt);
    vsnprintf(opt->error, opt->error_len, fmt, ap);
    va_end(ap);
}

/*
 * lws says only that it could not make a listener; bind the address once
 * more to learn why (errno), or 0 when it binds fine now.
 */
static int bind_errno(const char *host, int port, bool v6)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    int fd, one = 1, err = 0;

    memset(&ss, 0, sizeof(ss));
    if (v6 || !host[0]) {
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_port = htons((uint16_t)port);
        if (host[0] && inet_pton(AF_INET6, host, &a->sin6_addr) != 1)
            return EINVAL;
        sl = sizeof(*a);
    } else {
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
            return EINVAL;
        sl = sizeof(*a);
    }
    fd = socket(ss.ss_family, SOCK_STREAM, 0);
    if (fd < 0 && !host[0]) {   /* no IPv6 here: lws listens on IPv4 */
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        memset(&ss, 0, sizeof(ss));
        a->sin_family = AF_INET;
        a->sin_port = htons((uint16_t)port);
        sl = sizeof(*a);
        fd = socket(AF_INET, SOCK_STREAM, 0);
    }
    if (fd < 0)
        return errno;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, (struct sockaddr *)&ss, sl) != 0 || listen(fd, 1) != 0)
        err = errno;
    close(fd);
    return err;
}

static const char *bind_reason(int err)
{
    switch (err) {
    case EADDRINUSE:
        return "address already in use (another process is listening there)";
    case EADDRNOTAVAIL:
        return "no such address on this host";
    case EACCES:
        return "permission denied (ports below 1024 need privileges)";
    case 0:
        return "libwebsockets could not create the listener (--log-level debug shows its log)";
    default:
        return strerror(err);
    }
}

/* One listener: the API (`health` false) or the health vhost. NULL, with opt->error set. */
static struct lws_vhost *make_vhost(struct server *s, const char *flag, const char *listen,
                                    bool health)
{
    const struct af_http_options *opt = s->opt;
    struct lws_context_creation_info info;
    struct lws_vhost *vh;
    char host[128], why[200];
    int port = 0;
    bool v6 = false;

    if (af_http_parse_listen(listen, host, sizeof(host), &port, &v6, why, sizeof(why)) != 0) {
        fail_msg(opt, "%s '%s': %s", flag, listen ? listen : "", why);
        return NULL;
    }
    memset(&info, 0, sizeof(info));
    info.port = port;
    info.iface = host[0] ? host : NULL;
    info.protocols = protocols;
    info.user = s;
    /* Not a host name any client sends as SNI, so lws's SNI vhost switch never picks it. */
    info.vhost_name = health ? "accelfit-health.invalid" : "accelfit.invalid";
    info.options = LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND |
                   LWS_SERVER_OPTION_FALLBACK_TO_APPLY_LISTEN_ACCEPT_CONFIG;
    if (host[0] && !v6)
        info.options |= LWS_SERVER_OPTION_DISABLE_IPV6;
    /* what lws cannot parse as HTTP goes to af__http_raw_callback (raw.c) */
    info.listen_accept_role = "raw-skt";
    info.listen_accept_protocol = RAW_PROTOCOL;
    info.keepalive_timeout = KEEPALIVE_IDLE_S;
    info.timeout_secs = (unsigned int)(s->read_timeout_ns / 1000000000ull);
    info.timeout_secs_ah_idle = info.timeout_secs;
    if (!health && opt->tls_cert_file) {
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
        info.ssl_cert_filepath = opt->tls_cert_file;
        info.ssl_private_key_filepath = opt->tls_key_file;
        info.ssl_options_set = SSL_OP_NO_TLSv1 | SSL_OP_NO_TLSv1_1;
        /*
         * ALPN offers http/1.1 only. libwebsockets 4.1.6 can stall an h2
         * stream whose request body spans many TLS records (a Nodes-mode
         * filter of a few hundred KiB never completes), so kube-scheduler's
         * Go client, which offers h2 and http/1.1, is steered to HTTP/1.1
         * keep-alive. The h2 paths above stay for a fixed lws.
         */
        info.alpn = "http/1.1";
        if (opt->client_ca_file) {
            info.ssl_ca_filepath = opt->client_ca_file;
            info.options |= LWS_SERVER_OPTION_REQUIRE_VALID_OPENSSL_CLIENT_CERT;
        }
    }
    vh = lws_create_vhost(s->ctx, &info);
    if (!vh)
        fail_msg(opt, "cannot listen on %s (%s): %s", listen, flag,
                 bind_reason(bind_errno(host, port, v6)));
    return vh;
}

int af_http_run(const struct af_http_options *opt, struct af_service *svc,
                volatile sig_atomic_t *stop)
{
    struct lws_context_creation_info info;
    struct server s;
    char why[600];
    int rc = 0;

    memset(&s, 0, sizeof(s));
    s.opt = opt;
    s.svc = svc;
    s.stop = stop;
    s.max_body = opt->max_body ? opt->max_body : (16u << 20);
    s.max_response = 2 * s.max_body + (16u << 20);
    s.read_timeout_ns = (uint64_t)(opt->read_timeout_s > 0 ? opt->read_timeout_s : 10) * 1000000000ull;
    if (opt->error && opt->error_len)
        opt->error[0] = '\0';
    if (opt->url_prefix && *opt->url_prefix) {
        const char *pre = opt->url_prefix;
        size_t n;
        if (pre[0] != '/') {
            fail_msg(opt, "--url-prefix must start with '/': '%s'", pre);
            return AF_EINVAL;
        }
        n = strlen(pre);
        while (n > 1 && pre[n - 1] == '/')
            n--;
        if (n >= sizeof(s.prefix)) {
            fail_msg(opt, "--url-prefix is longer than %zu bytes", sizeof(s.prefix) - 1);
            return AF_EINVAL;
        }
        if (!(n == 1 && pre[0] == '/')) {
            memcpy(s.prefix, pre, n);
            s.prefix[n] = '\0';
            s.prefix_len = n;
        }
    }
    if (af_http_check_tls(opt, why, sizeof(why)) != 0) {
        fail_msg(opt, "%s", why);
        return AF_EINVAL;
    }
    if (opt->tls_cert_file)
        /* before lws reads them: a change after is seen */
        af__http_tls_sig_read(opt, &s.tls_loaded);
    s.tls_seen = s.tls_loaded;
    af__http_init_limits(&s.limits);

    lws_set_log_level(af_log_level <= AF_LOG_DEBUG ? (LLL_ERR | LLL_WARN | LLL_NOTICE) : 0,
                      lws_emit);
    memset(&info, 0, sizeof(info));
    info.port = CONTEXT_PORT_NO_LISTEN;
    info.protocols = protocols;
    info.user = &s;
    info.options = LWS_SERVER_OPTION_EXPLICIT_VHOSTS;
    if (opt->tls_cert_file)
        info.options |= LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT;
    info.max_http_header_data2 = HEAD_AREA;
    info.token_limits = &s.limits;
    /* lws re-arms a body's timeout after each chunk from the context's timeout_secs (5 s
     * unless set), not the vhost's: --read-timeout must be the context's too. */
    info.timeout_secs = (unsigned int)(s.read_timeout_ns / 1000000000ull);
    info.timeout_secs_ah_idle = info.timeout_secs;
    info.pt_serv_buf_size = 65536;
    info.count_threads = 1;
    af__http_deferred_init(&s);
    s.ctx = lws_create_context(&info);
    if (!s.ctx) {
        af__http_deferred_release(&s);
        fail_msg(opt, "cannot start libwebsockets (--log-level debug shows its log)");
        return AF_ECONN;
    }
    s.api_vh = make_vhost(&s, "--listen", opt->listen, false);
    if (s.api_vh && opt->health_listen) {
        s.health_vh = make_vhost(&s, "--health-listen", opt->health_listen, true);
        if (!s.health_vh)
            s.api_vh = NULL;
    }
    if (!s.api_vh) {
        af__http_deferred_release(&s);
        lws_context_destroy(s.ctx);
        return AF_EINVAL;
    }
    AF_LOG(AF_LOG_INFO, "listening", "listen", opt->listen, "tls",
           opt->tls_cert_file ? (opt->client_ca_file ? "mutual" : "on") : "off", "url_prefix",
           s.prefix_len ? s.prefix : "", "health_listen",
           opt->health_listen ? opt->health_listen : "", NULL);
    lws_sul_schedule(s.ctx, 0, &s.sul, check_stop, 100 * LWS_US_PER_MS);
    if (opt->tls_cert_file)
        lws_sul_schedule(s.ctx, 0, &s.tls_sul, af__http_tls_check, TLS_CHECK_US);
    while (!*stop) {
        if (lws_service(s.ctx, 0) < 0) {
            rc = AF_EIO;
            break;
        }
    }
    lws_sul_schedule(s.ctx, 0, &s.sul, check_stop, LWS_SET_TIMER_USEC_CANCEL);
    if (opt->tls_cert_file)
        lws_sul_schedule(s.ctx, 0, &s.tls_sul, af__http_tls_check, LWS_SET_TIMER_USEC_CANCEL);
    af__http_deferred_release(&s);   /* before the context goes: no wake-up reaches it */
    lws_context_destroy(s.ctx);
    af_free(s.parked);
    SSL_CTX_free(s.tls_ctx);
    AF_LOG(AF_LOG_INFO, "stopped serving", NULL);
    return rc;
}
