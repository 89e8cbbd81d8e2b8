/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http: the transport kube-scheduler, the API server's webhook calls, kubelet's probes and
 * Prometheus talk to. libwebsockets: HTTP/1.1 keep-alive (and h2 over TLS), body caps,
 * read timeout, TLS with optional client certificates (reloaded when the files change),
 * an optional plain-HTTP health listener. It routes each request to the service
 * (service.h) or the webhook (webhook.h) and sends what they answer. src/http/.
 */
#ifndef AF_HTTP_H
#define AF_HTTP_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

#include "accelfit/util.h"

struct af_service;

struct af_http_options {
    const char *listen;            /* "127.0.0.1:8888", ":8888", "[::1]:8888" */
    const char *url_prefix;        /* e.g. "/sched"; NULL or "" for none */
    size_t max_body;               /* 413 beyond; default 16 MiB */
    int read_timeout_s;            /* slow clients are dropped; default 10 */
    const char *tls_cert_file;     /* reloaded when it changes on disk */
    const char *tls_key_file;
    const char *client_ca_file;    /* require and verify client certificates */
    const char *health_listen;     /* NULL, or a second, plain-HTTP listener serving only
                                    * /healthz, /readyz and /metrics (kubelet, Prometheus) */
    char *error;                   /* NULL, or where af_http_run writes one line saying why
                                    * it failed (which address, which file) */
    size_t error_len;
};

/* Longest request target (path and query) and header value accepted: 414 and 431 beyond. */
#define AF_HTTP_MAX_URI 8192
#define AF_HTTP_MAX_FIELD 8192

/*
 * "127.0.0.1:8888", "[::1]:8888", ":8888" (every interface), "localhost:8888" (the one
 * name accepted, as 127.0.0.1; no other name is looked up): numeric host (empty for any)
 * and port. Returns 0, or AF_EINVAL with `why` (may be NULL) saying which part is wrong
 * and how to write it.
 */
int af_http_parse_listen(const char *listen, char *host, size_t hostlen, int *port, bool *v6,
                         char *why, size_t whylen) AF_MUST_CHECK;

/*
 * Loads the TLS files of `opt` as the server will (certificate chain, private
 * key, client CA) and checks that the key matches the certificate. Returns 0
 * (also when TLS is off), or AF_EINVAL with one line in `why` naming the flag,
 * the file and the problem.
 */
int af_http_check_tls(const struct af_http_options *opt, char *why, size_t whylen) AF_MUST_CHECK;

/*
 * Runs until *stop becomes non-zero. Returns 0, AF_EINVAL for a configuration
 * the server cannot use (bad TLS files, an address in use or not local: see
 * opt->error), or another negative AF_E*.
 */
int af_http_run(const struct af_http_options *opt, struct af_service *svc,
                volatile sig_atomic_t *stop) AF_MUST_CHECK;

#endif
