/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the transport share (src/http only): the server and the
 * per-transaction state, the routes, and the functions one file calls in another.
 * The calls go one way: server.c uses connection.c, limits.c, raw.c and tls.c;
 * connection.c uses dispatch.c, respond.c, routes.c, limits.c, raw.c and tls.c;
 * dispatch.c uses respond.c, deferred.c and routes.c; respond.c uses routes.c and deferred.c;
 * deferred.c uses respond.c. <libwebsockets.h>
 * and OpenSSL stay in this directory.
 */
#ifndef AF_HTTP_INTERNAL_H
#define AF_HTTP_INTERNAL_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <libwebsockets.h>
#include <openssl/ssl.h>

#include "accelfit/http.h"
#include "accelfit/metrics.h"
#include "accelfit/service.h"
#include "accelfit/webhook.h"

#define TLS_CHECK_US (2 * LWS_US_PER_SEC)  /* how often the TLS files are looked at */

enum route {
    R_NONE = 0,
    R_FILTER,
    R_PRIORITIZE,
    R_EXPLAIN,
    R_PREEMPT,
    R_RECOMMEND,
    R_ROLLOUTS,
    R_ROLLOUT_ACK,
    R_MUTATE,
    R_COSTS,
    R_HEALTHZ,
    R_READYZ,
    R_METRICS,
};

enum method { M_GET = 0, M_HEAD, M_POST, M_OTHER };

/* What stat(2) said about one TLS file: a change in any field is a change of the file. */
struct file_sig {
    int err;
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime;
};

/* The three TLS files (cert, key, client CA) as last looked at. */
struct tls_sig {
    struct file_sig f[3];
};

struct server {
    const struct af_http_options *opt;
    struct af_service *svc;
    struct lws_context *ctx;
    struct lws_vhost *api_vh;
    struct lws_vhost *health_vh;   /* NULL without --health-listen */
    char prefix[256];
    size_t prefix_len;
    size_t max_body;
    size_t max_response;
    uint64_t read_timeout_ns;
    volatile sig_atomic_t *stop;
    lws_sorted_usec_list_t sul;
    struct lws_token_limits limits;
    /* TLS reload (service thread only) */
    SSL_CTX *lws_ssl_ctx;          /* the API vhost's, made by lws; borrowed */
    SSL_CTX *tls_ctx;              /* the last reloaded files, or NULL: lws's is current */
    struct tls_sig tls_loaded;     /* the files the current certificate came from */
    struct tls_sig tls_seen;       /* at the previous check */
    lws_sorted_usec_list_t tls_sul;
    /* deferred answers (deferred.c); the registry is the service thread's only */
    struct mailbox *mb;
    uint64_t next_ticket;
    struct parked *parked;
    size_t n_parked, cap_parked;
};

/* The deferred answers of one server (deferred.c). */
struct mailbox;
struct parked;

/* Per HTTP transaction (per stream on h2). lws zeroes it when the wsi binds. */
struct pss {
    bool active;            /* a request is in progress */
    bool expect_body;
    bool discard;           /* read the body but do not keep it (answer already decided) */
    bool responded;
    bool close_after;
    bool linger;            /* h1: the body is left unread; read and drop it after the answer */
    bool lingering;         /* h1: answered and closing: input is dropped until EOF or `deadline` */
    bool pipelined;         /* h1: more input arrived before this answer went out */
    bool zero_post;         /* h1 POST with "Content-Length: 0": lws reports its empty body */
    bool h2;
    bool health;            /* on the --health-listen vhost */
    enum route route;
    enum method method;
    int pending_status;     /* answer to send once the body is read (404, 405) */
    uint64_t t0;
    uint64_t deadline;
    size_t discarded;
    struct af_buf body;
    /* the response: RESERVE bytes, then the body */
    struct af_buf resp;
    int status;
    const char *ctype;
    const char *allow;
    bool hdr_sent;
    size_t sent;
    /* for the log line */
    struct af_request_stats st;
    /* h2 requests without a body length: answer when the stream ends or soon after */
    lws_sorted_usec_list_t sul;
    struct lws *wsi;
    struct lws_context *ctx;
    bool sul_armed;
    /* the answer is deferred: a worker finishes it (deferred.c) */
    uint64_t ticket;        /* 0: not parked */
    struct server *srv;     /* set while parked */
};

/* Per connection handed to RAW_PROTOCOL: the answer, once decided. */
struct rawss {
    size_t len;
    unsigned char out[LWS_PRE + 512];
};

/* ---- routes.c: the route table ---------------------------------------------------------- */

/* The route `path` names (after --url-prefix); R_NONE when none, or when `health` and
 * the route is not a probe or a scrape. */
enum route af__http_match_route(struct server *s, const char *path, bool health);
/* "filter", "readyz", ...: the verb label of log lines; "other" for R_NONE. Static. */
const char *af__http_route_verb_name(enum route r);
/* The af_verb the metrics count the route under, or -1. */
int af__http_route_verb(enum route r);

/* ---- respond.c: sending the answer ------------------------------------------------------ */

/* Ends the transaction's state (and its timer); the pss is zeroed. */
void af__http_pss_reset(struct pss *p);
/* Starts p->resp: room for the headers, then the body is appended. */
void af__http_resp_begin(struct server *s, struct pss *p);
void af__http_resp_text(struct server *s, struct pss *p, const char *text);
/* The answer in p->resp is complete: sends it now or when it is due. What the lws
 * callback returns (-1 closes the connection). */
int af__http_respond(struct server *s, struct lws *wsi, struct pss *p, int status,
                     const char *ctype);
int af__http_respond_error(struct server *s, struct lws *wsi, struct pss *p, int status,
                           const char *msg);
/* From LWS_CALLBACK_HTTP_WRITEABLE: the answer over h1, or its next part over h2. */
int af__http_send_h1(struct server *s, struct lws *wsi, struct pss *p);
int af__http_send_h2(struct server *s, struct lws *wsi, struct pss *p);

/* ---- deferred.c: answers a worker thread finishes ------------------------------------------ */

void af__http_deferred_init(struct server *s);
/* The server stops: answers still to come are dropped when they come. */
void af__http_deferred_release(struct server *s);
/* A mailbox slot for one answer (`later`, for the service), before the service is called. */
void af__http_deferred_prepare(struct server *s, struct af_deferred *later);
/* The service answered at once: the slot is not used. */
void af__http_deferred_unused(struct server *s, const struct af_deferred *later);
/* The service will answer through `later`: the transaction waits for it. */
void af__http_park(struct server *s, struct lws *wsi, struct pss *p,
                   const struct af_deferred *later);
/* The transaction ends (answered, or its connection closed): forget it. */
void af__http_unpark(struct pss *p);
/* LWS_CALLBACK_EVENT_WAIT_CANCELLED: send the answers that came. */
void af__http_deferred_drain(struct server *s);

/* ---- dispatch.c: requests into calls of the service -------------------------------------- */

/* Everything is known (headers, and the body if any): answer. */
int af__http_dispatch(struct server *s, struct lws *wsi, struct pss *p);
/* 413, the rest of the body discarded and the connection closed after the answer. */
int af__http_too_big(struct server *s, struct lws *wsi, struct pss *p);

/* ---- connection.c ----------------------------------------------------------------------- */

/* An h1 answer that leaves the body unread is out: the connection reads and drops input
 * for at most HTTP_LINGER_S (or until the client closes) before it closes. */
#define HTTP_LINGER_S 2
int af__http_linger(struct lws *wsi, struct pss *p);

/* ---- limits.c: the URL, header and body caps ----------------------------------------------- */

/* The body caps per route (docs/http-api.md, "Limits"), each at most --max-body: an
 * AdmissionReview carries one object the API server took (at most 3 MiB) and its envelope;
 * the extender verbs take --max-body (kube-scheduler's ExtenderArgs); the other routes small
 * JSON. And a body may hold at most one JSON value per HTTP_BODY_BYTES_PER_VALUE bytes
 * (plus HTTP_BODY_FREE_VALUES), counted before any tree is built. */
#define HTTP_MAX_ADMISSION_BODY ((3u << 20) + (512u << 10))
#define HTTP_MAX_SMALL_BODY (64u << 10)
#define HTTP_BODY_BYTES_PER_VALUE 16
#define HTTP_BODY_FREE_VALUES 4096
/* After a body larger than this, the memory its tree took is returned to the system. */
#define HTTP_TRIM_AFTER_BODY (1u << 20)

/* The largest body route `r` reads. */
size_t af__http_route_max_body(const struct server *s, enum route r);
/* The most JSON values a body of `len` bytes may hold. */
size_t af__http_max_values(size_t len);

void af__http_init_limits(struct lws_token_limits *l);
bool af__http_uri_too_long(struct lws *wsi);
int af__http_field_too_long(struct lws *wsi);
void af__http_token_name(int t, char *out, size_t outlen);

/* ---- connection.c, raw.c: the lws protocols ----------------------------------------------- */

int af__http_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                      size_t len);
int af__http_raw_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user,
                          void *in, size_t len);
/* A token character (RFC 9110): a method, an Upgrade value. */
bool af__http_is_tchar(unsigned char c);

/* ---- tls.c: the TLS files ----------------------------------------------------------------- */

/* The API vhost's SSL_CTX, made by lws: new connections switch to reloaded files in it. */
void af__http_tls_hook(struct server *s, SSL_CTX *lws_ctx);
void af__http_tls_sig_read(const struct af_http_options *opt, struct tls_sig *t);
/* The timer that looks at the TLS files every TLS_CHECK_US (s->tls_sul). */
void af__http_tls_check(lws_sorted_usec_list_t *sul);

#endif
