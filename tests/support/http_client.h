/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Black-box HTTP test helpers: run `accelfit serve` as a child process on a
 * free loopback port, wait until it answers /healthz, and talk to it with
 * libcurl (one easy handle per connection, so keep-alive can be observed).
 */
#ifndef AF_TEST_HTTP_CLIENT_H
#define AF_TEST_HTTP_CLIENT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct af_test_server {
    pid_t pid;
    int port;
    bool tls;
    char base[128];        /* "http://127.0.0.1:PORT" or "https://..." */
    char log_path[512];    /* the child's stdout and stderr (see af_test_temp_path) */
};

/* A free TCP port on 127.0.0.1 (bound then released). */
int af_test_free_port(void);

/*
 * Starts AF_BINARY with "serve --listen 127.0.0.1:PORT" followed by `args`
 * (NULL-terminated). `tls` makes the base URL https. Waits up to 15 s for
 * GET /healthz to answer 200 (with TLS: without verifying the certificate,
 * using `client_cert`/`client_key` when given); aborts the test otherwise.
 * The server's output goes to a temporary file, deleted when the test passes
 * and kept, with its path printed, when it fails (af_test_temp_path).
 */
void af_test_server_start(struct af_test_server *s, const char *const *args, bool tls,
                          const char *client_cert, const char *client_key);
/* The same on a given port (0: a free one), e.g. to restart a server where its clients are. */
void af_test_server_start_on(struct af_test_server *s, int port, const char *const *args,
                             bool tls, const char *client_cert, const char *client_key);
/* SIGTERM, then waits (20 s, longer than the server's own 10 s bound on its shutdown, so a
 * server that overruns it is seen ending by SIGALRM, 142). Returns the exit status
 * (128+signal when killed). */
int af_test_server_stop(struct af_test_server *s);
/* The child's log so far (caller frees). */
char *af_test_server_log(const struct af_test_server *s);

struct af_test_resp {
    int curl_rc;           /* CURLE_OK or the failure */
    long status;
    char *body;            /* NUL-terminated, caller frees via af_test_resp_free */
    size_t len;
    long connects;         /* CURLINFO_NUM_CONNECTS: 0 when the connection was reused */
    long http_version;     /* CURL_HTTP_VERSION_1_1, CURL_HTTP_VERSION_2_0 ... */
    char content_type[128];
    char allow[64];        /* the Allow header, if any */
    long long content_length;   /* the Content-Length header; -1 when absent */
};

/*
 * One request on `c` (reused across calls for keep-alive). `method` NULL is
 * GET; "HEAD" asks without reading a body (CURLOPT_NOBODY). `headers` is NULL
 * or a NULL-terminated list of "Name: value".
 * Returns r->curl_rc.
 */
int af_test_http(CURL *c, const char *method, const char *url, const char *body, size_t len,
                 const char *const *headers, struct af_test_resp *r);
void af_test_resp_free(struct af_test_resp *r);

/* ---- raw HTTP/1.1 on a plain socket (what libcurl will not send: pipelines, odd framing) ---- */

#define AF_TEST_RAW_MAX 8

struct af_test_raw {
    int count;                         /* complete answers read */
    int status[AF_TEST_RAW_MAX];
    bool close[AF_TEST_RAW_MAX];       /* the answer said "Connection: close" */
    char ctype[AF_TEST_RAW_MAX][64];   /* its Content-Type */
    char *body[AF_TEST_RAW_MAX];       /* NUL-terminated */
    size_t len[AF_TEST_RAW_MAX];
    bool eof;                          /* the server closed the connection (FIN or reset) */
    bool timed_out;                    /* neither `want` answers nor a close within the time */
};

/* A connected TCP socket to 127.0.0.1:port. */
int af_test_raw_connect(int port);
/*
 * Writes `len` bytes of `data` in one write on a new connection to `port`,
 * then reads answers until `want` complete ones arrived, the server closed,
 * or `timeout_ms` passed. Returns r->count.
 */
int af_test_raw_exchange(int port, const void *data, size_t len, int want, int timeout_ms,
                         struct af_test_raw *r);
/* How a raw exchange sends its bytes (all false/0: one write, plain TCP). */
struct af_test_raw_opts {
    bool tls;              /* TLS over the socket (the server's certificate is not verified) */
    bool half_close;       /* shut down the sending side after the request (TLS: close_notify) */
    size_t slow_chunk;     /* write this many bytes at a time ... */
    int slow_gap_ms;       /* ... this long apart */
    bool head;             /* the requests are HEAD: answers have no body */
    const char *then;      /* written on the same connection once the first answer is read */
    size_t then_len;
};
int af_test_raw_exchange_opt(int port, const void *data, size_t len,
                             const struct af_test_raw_opts *o, int want, int timeout_ms,
                             struct af_test_raw *r);
void af_test_raw_free(struct af_test_raw *r);

#endif
