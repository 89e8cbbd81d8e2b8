/* SPDX-License-Identifier: Apache-2.0 */
/*
 * prices: hourly EC2 prices learnt while accelfit runs (docs/pricing.md), beside the
 * catalog's us-east-1 on-demand list prices.
 *
 * A price book holds, per region, the on-demand price of each instance type (AWS Pricing
 * API, GetProducts) and, per availability zone, the current spot price of each type (EC2
 * DescribeSpotPriceHistory), each with the time it was read. It also keeps, per source
 * (kind and region), when it was last read, how many prices that gave and the last error,
 * which /readyz, /metrics and /explain show.
 *
 * A book is built by one thread (af_prices_new, the setters, af_prices_freeze), then
 * published and never changed again: readers on any thread share it by reference count.
 * A refresh of one source builds a new book from the last (af_prices_copy without that
 * source's entries), so what the other sources said stays. Pure: no I/O, no clock (times
 * are given), no locks except the holder's.
 */
#ifndef AF_PRICES_H
#define AF_PRICES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#include "accelfit/util.h"

enum af_price_kind {
    AF_PRICE_ON_DEMAND = 0,   /* keyed by region ("eu-west-1") */
    AF_PRICE_SPOT,            /* keyed by availability zone ("eu-west-1a") */
    AF_PRICE__KINDS
};

/* One source of a book: a kind of price for one region (spot: every zone of the region). */
struct af_price_source {
    enum af_price_kind kind;
    char region[32];
    double read_at;           /* unix time of the last successful read; 0: never */
    double tried_at;          /* unix time of the last attempt, successful or not */
    size_t n_prices;          /* prices the last successful read gave */
    char error[256];          /* the last attempt's error ("" when it succeeded) */
};

struct af_prices;

struct af_prices *af_prices_new(void);
/* A new, unfrozen book with every price and source of `p` (NULL: empty) except the
 * prices of source (kind, region) when `region` is not NULL. */
struct af_prices *af_prices_copy(const struct af_prices *p, enum af_price_kind kind,
                                 const char *region);
/* A new, unfrozen book with every price and source of `p` (NULL: empty) except those of
 * `region`, of both kinds (its on-demand prices, its zones' spot prices, its sources). */
struct af_prices *af_prices_copy_without_region(const struct af_prices *p, const char *region);
/*
 * Adds a price: `where` is the region (on-demand) or the zone (spot), `usd_hr` finite,
 * > 0 and <= AF_PRICE_MAX_USD_HR, `as_of` the unix time it was read. A second price for
 * the same key replaces the first. AF_EINVAL for a bad price or key, or a frozen book.
 */
int af_prices_set(struct af_prices *p, enum af_price_kind kind, const char *where,
                  const char *instance_type, double usd_hr, double as_of) AF_MUST_CHECK;
/* Records what the last attempt at source (kind, region) gave; replaces its record. */
void af_prices_set_source(struct af_prices *p, const struct af_price_source *src);
/* Ends building: lookups work from here on, setters refuse. */
void af_prices_freeze(struct af_prices *p);

/* The price of `instance_type` at `where` (region or zone) and when it was read; false
 * when the book (NULL is fine) has none. */
bool af_prices_get(const struct af_prices *p, enum af_price_kind kind, const char *where,
                   const char *instance_type, double *usd_hr, double *as_of);
/* Its sources, in the order they were first recorded. */
const struct af_price_source *af_prices_sources(const struct af_prices *p, size_t *n);
/* Total prices in the book. */
size_t af_prices_count(const struct af_prices *p);

struct af_prices *af_prices_ref(struct af_prices *p);   /* NULL is fine */
void af_prices_unref(struct af_prices *p);              /* NULL is fine */

/* The current book, swapped by the thread that reads AWS; read by any thread. */
struct af_prices_holder {
    pthread_mutex_t lock;
    struct af_prices *current;    /* protected by ->lock; NULL until the first book */
};

void af_prices_holder_init(struct af_prices_holder *h);
void af_prices_holder_destroy(struct af_prices_holder *h);
struct af_prices *af_prices_holder_get(struct af_prices_holder *h);          /* new ref */
void af_prices_holder_swap(struct af_prices_holder *h, struct af_prices *p);  /* steals p */

#endif
