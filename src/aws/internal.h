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
#include <stdint.h>

#include "accelfit/aws.h"
#include "accelfit/prices.h"
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

/* ---- XML ---------------------------------------------------------------------------------- */

/* Called at the end of every element with its path from the root ("/A/B/item/spotPrice",
 * namespaces dropped) and its own text (at most 64 KiB). */
typedef void (*af__xml_fn)(void *ud, const char *path, const char *text);
/* Parses a document (no DOCTYPE, depth at most 32). Returns 0 or AF_EPARSE with `err`. */
int af__xml_parse(const char *doc, size_t len, af__xml_fn fn, void *ud, char *err,
                  size_t errlen) AF_MUST_CHECK;

/* The code and message of an AWS error document (JSON __type/message, or XML Error/Code and
 * Error/Message), each "" when the body is neither. Cannot fail. */
void af__aws_error_parse(const char *doc, size_t len, char *code, size_t code_len, char *msg,
                         size_t msg_len);
/* Takes the credentials of an STS AssumeRoleWithWebIdentity answer into c->creds. Returns 0,
 * or AF_EPARSE with `err` (starting with `what`) when the answer is not XML or lacks one. */
int af__aws_sts_take(struct af__aws *c, const char *what, const char *doc, size_t len, char *err,
                     size_t errlen) AF_MUST_CHECK;

/* Whether `name` is shaped as an AWS region's ("us-east-1", "us-gov-west-1"). */
bool af__aws_region_valid(const char *name);

/* ---- the reads ------------------------------------------------------------------------------ */

/*
 * The bounds of one read (docs/pricing.md, "Bounds"): at most AF__AWS_MAX_PAGES pages (a read
 * that would need more fails: its answer is not taken as complete), all of them within
 * AF__AWS_READ_DEADLINE_PAGES times the page timeout, at most AF__AWS_MAX_PRICES prices from
 * the on-demand documents, and of spot at most AF__AWS_MAX_SPOT_ITEMS items in all pages and
 * AF__AWS_MAX_SPOT_PAIRS distinct (zone, type) pairs, kept de-duplicated as they come.
 */
#define AF__AWS_MAX_PAGES 100
#define AF__AWS_READ_DEADLINE_PAGES 5
#define AF__AWS_MAX_PRICES 20000
#define AF__AWS_MAX_SPOT_ITEMS 200000
#define AF__AWS_MAX_SPOT_PAIRS 20000

/*
 * One page of a GetProducts answer: each price of its PriceList documents goes to fn (*n
 * counts them; more than AF__AWS_MAX_PRICES fails), and *next is set to its NextToken (a new
 * string, NULL when none). Returns 0, or AF_EPARSE/AF_ETOOBIG with `err` starting with `what`.
 */
int af__aws_products_page(const char *what, const char *doc, size_t len, const char *region,
                          const char *const *types, double now, af_aws_price_fn fn, void *ud,
                          size_t *n, char **next, char *err, size_t errlen) AF_MUST_CHECK;

/* A spot read in progress: the newest item of each (zone, type) of the pages read so far. */
struct af__spot_item {
    char zone[32];
    char type[64];
    char price[32];
    double ts;
    bool bad_ts;
};
struct af__spot_read {
    const char *const *types;   /* borrowed; NULL: every type */
    struct af__spot_item *items;
    size_t n, cap;
    struct af_index ix;         /* the items by (zone, type) */
    size_t ix_cap;              /* the items it was sized for */
    size_t seen;                /* items in all pages */
    struct af__spot_item cur;
    char root[64];
    char *next;                 /* the last page's nextToken; NULL: none */
    char bad[192];              /* the first refusal; "" while none */
};
/* Adds one page of a DescribeSpotPriceHistory answer (sets r->next). Returns 0, or AF_EPARSE
 * (not the answer, an item without a zone, type, price or timestamp) or AF_ETOOBIG (over the
 * bounds above) with `err` starting with `what`. */
int af__aws_spot_page(struct af__spot_read *r, const char *what, const char *doc, size_t len,
                      char *err, size_t errlen) AF_MUST_CHECK;
/* Gives fn each pair's price (a zero price skipped), by zone and type; returns how many. */
size_t af__aws_spot_emit(struct af__spot_read *r, af_aws_price_fn fn, void *ud);
void af__aws_spot_release(struct af__spot_read *r);

int af__aws_read_on_demand(struct af__aws *c, const char *region,
                           const char *const *types, af_aws_price_fn fn, void *ud, char *err,
                           size_t errlen) AF_MUST_CHECK;
int af__aws_read_spot(struct af__aws *c, const char *region, const char *const *types,
                      af_aws_price_fn fn, void *ud, char *err, size_t errlen) AF_MUST_CHECK;

/*
 * One page of a DescribeCapacityReservations answer: its active reservations into `book`
 * (unfrozen; *n counts them) and *next its nextToken (a new string, NULL when none). Returns
 * 0, or AF_EPARSE/AF_ETOOBIG with `err` starting with `what` (src/aws/reservations.c).
 */
int af__aws_reservations_page(const char *what, const char *doc, size_t len, const char *region,
                              struct af_prices *book, size_t *n, char **next, char *err,
                              size_t errlen) AF_MUST_CHECK;
/* Every active capacity reservation of `region` into `book`; *n how many. Bounded as the
 * price reads are. 0, or an error with `err`. */
int af__aws_read_reservations(struct af__aws *c, const char *region, struct af_prices *book,
                              size_t *n, char *err, size_t errlen) AF_MUST_CHECK;

#endif
