/* SPDX-License-Identifier: Apache-2.0 */
/*
 * aws: EC2 prices read from AWS while accelfit runs (docs/pricing.md), into the price
 * book of accelfit/prices.h.
 *
 * Two sources per region: on-demand prices from the AWS Pricing API (GetProducts, the
 * filters Karpenter uses: shared tenancy, Linux, no pre-installed software, capacity
 * "Used") and the newest spot price per zone and instance type from EC2
 * DescribeSpotPriceHistory. Requests are signed with SigV4 by libcurl; credentials come as
 * EKS gives them to a pod, in this order: IRSA (AWS_ROLE_ARN + AWS_WEB_IDENTITY_TOKEN_FILE,
 * exchanged with STS AssumeRoleWithWebIdentity), EKS Pod Identity
 * (AWS_CONTAINER_CREDENTIALS_FULL_URI + AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE), then
 * static keys (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN). Temporary
 * credentials are renewed before they expire and once after an answer saying they have;
 * the token file is read again at every exchange. Endpoints follow the SDKs' variables
 * (AWS_ENDPOINT_URL, AWS_ENDPOINT_URL_PRICING, AWS_ENDPOINT_URL_EC2, AWS_ENDPOINT_URL_STS)
 * and AWS_CA_BUNDLE names extra CAs. The environment is read when a reader starts.
 *
 * Nothing here runs on a request path: af_aws_pricing_start runs one thread that refreshes
 * the prices and swaps new books into a holder; af_aws_read is the one-shot read of
 * `accelfit prices`.
 */
#ifndef AF_AWS_H
#define AF_AWS_H

#include <stdbool.h>
#include <stddef.h>

#include "accelfit/prices.h"
#include "accelfit/util.h"

/* What to read and how; a zero field takes its default. */
struct af_aws_options {
    const char *region;             /* fallback region; NULL: $AWS_REGION, $AWS_DEFAULT_REGION */
    double on_demand_refresh_s;     /* on-demand prices of a region read again; 0: 86400 */
    double spot_refresh_s;          /* spot prices of a region read again; 0: 300 */
    double retry_s;                 /* a source that failed is tried again; 0: 60 */
    double timeout_s;               /* one HTTP request, connection included; 0: 30 */
    double backoff_s;               /* first wait after a throttled answer, doubled; 0: 1 */
    int max_retries;                /* throttled answers retried per request; 0: 4 */
    double credentials_margin_s;    /* temporary credentials renewed this early; 0: 300 */
    const char *const *instance_types;   /* NULL-terminated; NULL: every type */
};

/* What af_aws_read reads. */
enum af_aws_read_flags {
    AF_AWS_ON_DEMAND = 1 << 0,
    AF_AWS_SPOT = 1 << 1,
    AF_AWS_RESERVATIONS = 1 << 2,   /* EC2 DescribeCapacityReservations: prepaid capacity's end */
};

/* ---- one-shot read -------------------------------------------------------------------- */

/* One price read: `where` is the region (on-demand) or the zone (spot); borrowed, valid
 * during the call. */
typedef void (*af_aws_price_fn)(void *ud, enum af_price_kind kind, const char *where,
                                const char *instance_type, double usd_hr, double as_of);

/*
 * Reads the prices `what` says of `region` (NULL: the fallback region of `opt`) now, on
 * the calling thread, and calls `fn` once per price: on-demand prices first, then the
 * newest spot price per zone and type. Returns 0, or a negative AF_E* with a message in
 * `err` ("pricing GetProducts eu-west-1: ThrottlingException: Rate exceeded (HTTP 400)",
 * "no AWS credentials: ..."); prices given before a failure were given. AF_EINVAL when no
 * region is known.
 */
int af_aws_read(const struct af_aws_options *opt, const char *region, unsigned what,
                af_aws_price_fn fn, void *ud, char *err, size_t errlen) AF_MUST_CHECK;

/*
 * Reads the prices `what` says of `region` (NULL: the fallback region of `opt`) into `book`,
 * which is being built, with one set of credentials, and records each source (kind, region)
 * read: when it was tried and, on success, read and how many prices it gave, else its
 * error. A source that fails does not stop the other. Returns 0, or the first failure's
 * error with its message in `err`.
 */
int af_aws_read_into(struct af_prices *book, const struct af_aws_options *opt,
                     const char *region, unsigned what, char *err, size_t errlen) AF_MUST_CHECK;

/* af_aws_read_into a new frozen book (caller unrefs); *out is NULL on any failure. */
int af_aws_read_book(struct af_prices **out, const struct af_aws_options *opt,
                     const char *region, unsigned what, char *err,
                     size_t errlen) AF_MUST_CHECK;

/* ---- the refresh thread ----------------------------------------------------------------- */

/*
 * Fills `out` (at most `max` names of at most 31 bytes) with the regions the cluster's
 * nodes are in; returns how many. Called on the refresh thread.
 */
typedef size_t (*af_aws_regions_fn)(void *ud, char (*out)[32], size_t max);
/* Called on the refresh thread after each new book was swapped into the holder;
 * `book` is borrowed for the call. */
typedef void (*af_aws_updated_fn)(void *ud, struct af_prices *book);

struct af_aws_pricing;

/*
 * Starts the thread that keeps `holder` current. Each loop (at least every 10 s; every 2 s
 * while no region is known) it asks `regions` (NULL, or
 * none given: the fallback region of `opt`) which regions to price; a region seen for the
 * first time is read at once, then its on-demand prices every on_demand_refresh_s and its
 * spot prices every spot_refresh_s (a failed source: every retry_s). A region once seen
 * stays. Each read builds a new book from the holder's (af_prices_copy): on success
 * without that source's old prices, on failure with them and the error in the source
 * record; swaps it in and calls `updated` (may be NULL). `opt` and what it points to are
 * copied. Returns 0, or AF_ESYS(errno) when the thread cannot start.
 */
int af_aws_pricing_start(struct af_aws_pricing **out, const struct af_aws_options *opt,
                         struct af_prices_holder *holder, af_aws_regions_fn regions,
                         void *regions_ud, af_aws_updated_fn updated,
                         void *updated_ud) AF_MUST_CHECK;
/* Makes the thread ask for the regions now (a node in a new region appeared). Any thread. */
void af_aws_pricing_kick(struct af_aws_pricing *ap);
/* Stops the thread, interrupting a wait or a request within about a second, joins it and
 * frees `ap`. NULL is fine. */
void af_aws_pricing_stop(struct af_aws_pricing *ap);

#endif
