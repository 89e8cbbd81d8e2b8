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
    AF_PRICE_RESERVATIONS,    /* not prices: the region's capacity reservations and their ends */
    AF_PRICE__KINDS
};

/* "on-demand", "spot", "reservations": how /readyz, /metrics and the CLI name a kind. */
const char *af_price_kind_name(enum af_price_kind k);

/*
 * A capacity reservation of the account (EC2 DescribeCapacityReservations): an ODCR or a
 * Capacity Block, where it is, for which type, and when it ends (docs/pricing.md#prepaid-capacity).
 */
#define AF_RESERVATION_ID_MAX 48
struct af_reservation {
    char id[AF_RESERVATION_ID_MAX];   /* "cr-0123456789abcdef0" */
    char region[32];
    char zone[32];
    char instance_type[64];
    bool block;               /* reservationType capacity-block (else default: an ODCR) */
    double end;               /* endDate, unix time; 0: none (endDateType unlimited) */
    double as_of;             /* when it was read */
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
/* A new, unfrozen book with every price, reservation and source of `p` (NULL: empty) except
 * the prices (or, for AF_PRICE_RESERVATIONS, the reservations) of source (kind, region) when
 * `region` is not NULL. */
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
/* Adds a reservation (a second with the same id replaces the first). AF_EINVAL for a
 * malformed one (an id, region or zone that is empty, too long or has spaces) or a frozen
 * book. At most AF_RESERVATIONS_MAX are kept (AF_ETOOBIG past that). */
#define AF_RESERVATIONS_MAX 10000
int af_prices_set_reservation(struct af_prices *p, const struct af_reservation *r) AF_MUST_CHECK;
/* The reservation `id`, or NULL (the book may be NULL). */
const struct af_reservation *af_prices_reservation(const struct af_prices *p, const char *id);
/* The only reservation of `instance_type` in `zone`, or NULL when there is none or several:
 * what names a node's reservation when its labels name none. */
const struct af_reservation *af_prices_reservation_in(const struct af_prices *p, const char *zone,
                                                     const char *instance_type);
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

/* ---- Karpenter NodeOverlays ------------------------------------------------------------- */

/*
 * What a Karpenter NodeOverlay (karpenter.sh/v1alpha1) says about prices: the instance
 * types its requirements select cost `price`, or their price adjusted by `priceAdjustment`
 * ("+10%", "-15%", "+0.5", "-0.50"). Matched against a node's labels (the labels Karpenter
 * gives the nodes it launches carry the same keys its requirements name). Precedence is
 * Karpenter's (NodeOverlayList.OrderByWeight): the higher weight first, and of equal
 * weights the name later in the alphabet first; the first overlay that matches and sets a
 * price decides. An overlay that sets only capacity has no say on prices.
 */
enum af_overlay_op {
    AF_OVERLAY_IN = 0, AF_OVERLAY_NOT_IN, AF_OVERLAY_EXISTS, AF_OVERLAY_DOES_NOT_EXIST,
    AF_OVERLAY_GT, AF_OVERLAY_LT, AF_OVERLAY_GTE, AF_OVERLAY_LTE,
};
enum af_overlay_price { AF_OVERLAY_NO_PRICE = 0, AF_OVERLAY_PRICE, AF_OVERLAY_ADD, AF_OVERLAY_PCT };

struct af_overlay_req {
    char *key;
    enum af_overlay_op op;
    char **values;
    size_t n_values;
};

struct af_overlay {
    char *name;
    int weight;                     /* 0 when not set */
    struct af_overlay_req *reqs;
    size_t n_reqs;
    enum af_overlay_price mode;
    double value;                   /* the price, the amount added, or the percent */
};

/* A set of overlays, immutable once made and shared by reference count. */
struct af_overlays {
    atomic_int refs;
    struct af_overlay *v;           /* in precedence order */
    size_t n;
};

/* "+10%", "-0.50", "-100%" (Karpenter's pattern): 0 with mode and value, -1 when not one. */
int af_overlay_parse_adjustment(const char *s, enum af_overlay_price *mode, double *value)
    AF_MUST_CHECK;
/* "5.00": 0 with the price, -1 when not one (digits, an optional fraction). */
int af_overlay_parse_price(const char *s, double *usd) AF_MUST_CHECK;
/* Takes the n overlays of `v` (and v itself) and orders them by precedence. */
struct af_overlays *af_overlays_new(struct af_overlay *v, size_t n);
struct af_overlays *af_overlays_ref(struct af_overlays *o);     /* NULL is fine */
void af_overlays_unref(struct af_overlays *o);                  /* NULL is fine */
void af_overlay_release(struct af_overlay *ov);                 /* its fields, not itself */
/* The overlay that prices a node with labels `packed` ("k\0v\0...\0\0"), or NULL. */
const struct af_overlay *af_overlays_match(const struct af_overlays *o, const char *packed);
/* `usd` as the overlay prices it (never below 0). */
double af_overlay_apply(const struct af_overlay *ov, double usd);
/* "price 12.5", "price +10%", "price -0.50": how it prices, for people. */
void af_overlay_describe(const struct af_overlay *ov, char *buf, size_t len);

#endif
