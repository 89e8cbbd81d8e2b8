/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of src/aws share: one client (credentials, endpoints, a curl handle) used
 * by one thread at a time, the stop signal that interrupts its waits and requests, a
 * bounded XML reader over expat, and the two price reads.
 */
#ifndef AF_AWS_INTERNAL_H
#define AF_AWS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "accelfit/aws.h"
#include "accelfit/util.h"

/* An answer page is at most this large (a GetProducts page of 100 price documents is
 * about 1 MiB). */
#define AF__AWS_MAX_BODY (16u << 20)

/* Stops a reader: waits end early, requests are aborted from curl's progress callback. */
struct af__aws_stop {
    pthread_mutex_t lock;
    pthread_cond_t cond;   /* signalled on stop and kick */
    atomic_bool stop;
    bool kick;             /* protected by ->lock */
};

void af__aws_stop_init(struct af__aws_stop *s);
void af__aws_stop_destroy(struct af__aws_stop *s);
/* Waits `seconds` or until stopped (or kicked, when `kick` is true: consumes the kick).
 * Returns false when stopped. */
bool af__aws_wait(struct af__aws_stop *s, double seconds, bool kick);

enum af__aws_creds_mode { AF__CREDS_NONE = 0, AF__CREDS_IRSA, AF__CREDS_POD, AF__CREDS_STATIC };

struct af__aws {
    double timeout_s, backoff_s, margin_s;
    int max_retries;
    char region[32];                 /* the fallback region ("" when none) */
    char *endpoint[4];               /* per enum af__aws_service; NULL: the default */
    char *ca_bundle;
    enum af__aws_creds_mode mode;
    char *role_arn, *token_file, *session_name;    /* IRSA */
    char *container_uri, *container_token_file, *container_token;   /* Pod Identity */
    struct {
        char *akid, *secret, *token;
        double expires;              /* unix time; 0: does not expire */
        bool valid;
    } creds;
    void *curl;                      /* CURL *, kept for keep-alive */
    struct af__aws_stop *stop;       /* borrowed; may be NULL */
    /* Static credentials from a shared file: "profile P of FILE", for messages. Without
     * credentials, what the shared files said (a profile that uses credential_process). */
    char creds_from[300];
};

enum af__aws_service { AF__AWS_PRICING = 0, AF__AWS_EC2, AF__AWS_STS, AF__AWS_POD };

/* `region`, else $AWS_REGION, else $AWS_DEFAULT_REGION; NULL when none is set. */
const char *af__aws_default_region(const char *region);

/* Reads the environment. Cannot fail: missing credentials are reported by the first call. */
void af__aws_init(struct af__aws *c, const struct af_aws_options *opt, struct af__aws_stop *stop);
void af__aws_release(struct af__aws *c);

/* The URL for `service` in `region`: the override of the environment, or AWS's. Caller frees. */
char *af__aws_url(const struct af__aws *c, enum af__aws_service service, const char *region);

struct af__aws_req {
    const char *what;           /* "pricing GetProducts eu-west-1": the start of messages */
    enum af__aws_service service;
    const char *region;         /* the signing region */
    const char *url;
    const char *content_type;
    const char *target;         /* X-Amz-Target, or NULL */
    const char *body;
};

/*
 * POSTs a signed request and puts a 200 answer's body in `out` (reset first). Throttled
 * answers are retried with backoff; an answer saying the credentials expired renews them
 * once and retries. Returns 0, or a negative AF_E* with the message in `err`.
 */
int af__aws_call(struct af__aws *c, const struct af__aws_req *rq, struct af_buf *out, char *err,
                 size_t errlen);

/* Formats `err` and returns `code`. */
int af__aws_fail(char *err, size_t errlen, int code, const char *fmt, ...) AF_PRINTF(4, 5);

/* An ISO 8601 UTC time ("2024-05-08T19:10:27Z", "2014-01-06T04:32:53.000Z") as unix time. */
int af__aws_parse_time(const char *s, double *out) AF_MUST_CHECK;

/* ---- XML ---------------------------------------------------------------------------------- */

/* Called at the end of every element with its path from the root ("/A/B/item/spotPrice",
 * namespaces dropped) and its own text (at most 64 KiB). */
typedef void (*af__xml_fn)(void *ud, const char *path, const char *text);
/* Parses a document (no DOCTYPE, depth at most 32). Returns 0 or AF_EPARSE with `err`. */
int af__xml_parse(const char *doc, size_t len, af__xml_fn fn, void *ud, char *err,
                  size_t errlen) AF_MUST_CHECK;

/* ---- the reads ------------------------------------------------------------------------------ */

int af__aws_read_on_demand(struct af__aws *c, const char *region,
                           const char *const *types, af_aws_price_fn fn, void *ud, char *err,
                           size_t errlen) AF_MUST_CHECK;
int af__aws_read_spot(struct af__aws *c, const char *region, const char *const *types,
                      af_aws_price_fn fn, void *ud, char *err, size_t errlen) AF_MUST_CHECK;

#endif
