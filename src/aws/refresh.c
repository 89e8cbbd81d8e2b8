/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The refresh thread of aws.h: it keeps a price book current for the regions the cluster
 * is in. Every loop it asks which regions to price, reads each source (kind, region) that
 * is due, and publishes a new book per read: a copy of the current one without that
 * source's prices plus what was read, or, when the read failed, the current prices with the
 * error in the source record. Then it sleeps until the next source is due, a kick or a
 * stop, at most 10 seconds, so that a node in a new region is priced soon.
 *
 * A node may set its own labels, so the regions are bounded (docs/pricing.md, "Bounds"): a
 * name that is not an AWS region's (af__aws_region_valid) is ignored, at most MAX_REGIONS
 * are read, and a region no node has named for three spot refresh intervals is forgotten:
 * no longer read, and its prices and source records leave the book.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "aws/internal.h"
#include "accelfit/banned.h"

#define MAX_REGIONS 32
#define FORGET_AFTER_REFRESHES 3.0
#define MAX_SLEEP_S 10.0
#define FIRST_REGION_POLL_S 2.0

struct region_state {
    char name[32];
    double due[AF_PRICE__KINDS];   /* monotonic seconds */
    double seen;                   /* when a node (or the fallback) last named it */
};

struct af_aws_pricing {
    pthread_t thread;
    struct af__aws_stop stop;
    struct af_aws_options opt;     /* strings below are owned copies */
    char *region;
    char **types;
    struct af_prices_holder *holder;
    af_aws_regions_fn regions_fn;
    void *regions_ud;
    af_aws_updated_fn updated_fn;
    void *updated_ud;
    struct region_state *regions;  /* refresh thread only */
    size_t n_regions, cap_regions;
    size_t refused;                /* names refused at the last look (logged on change) */
};

static double mono_s(void)
{
    return (double)af_now_ns() / 1e9;
}

struct sink {
    struct af_prices *book;
    size_t n;
};

static void sink_add(void *ud, enum af_price_kind kind, const char *where, const char *type,
                     double usd_hr, double as_of)
{
    struct sink *s = ud;

    if (af_prices_set(s->book, kind, where, type, usd_hr, as_of) == 0)
        s->n++;
}

/* Reads one source and publishes the result; false when the read failed. */
static bool refresh(struct af_aws_pricing *ap, struct af__aws *c, enum af_price_kind kind,
                    const char *region)
{
    struct af_prices *cur = af_prices_holder_get(ap->holder);
    struct sink s = {af_prices_copy(cur, kind, region), 0};
    struct af_price_source src = {.kind = kind};
    const struct af_price_source *old;
    size_t n_old;
    char err[sizeof(src.error)] = "";
    int rc;

    old = af_prices_sources(cur, &n_old);
    for (size_t i = 0; i < n_old; i++)
        if (old[i].kind == kind && !strcmp(old[i].region, region))
            src = old[i];
    snprintf(src.region, sizeof(src.region), "%s", region);
    if (kind == AF_PRICE_RESERVATIONS)
        rc = af__aws_read_reservations(c, region, s.book, &s.n, err, sizeof(err));
    else
        rc = kind == AF_PRICE_ON_DEMAND
                 ? af__aws_read_on_demand(c, region, ap->opt.instance_types, sink_add, &s, err,
                                          sizeof(err))
                 : af__aws_read_spot(c, region, ap->opt.instance_types, sink_add, &s, err,
                                     sizeof(err));
    if (rc == AF_ECANCELED) {
        af_prices_unref(s.book);
        af_prices_unref(cur);
        return false;
    }
    src.tried_at = af_wall_time();
    if (rc) {
        af_prices_unref(s.book);
        s.book = af_prices_copy(cur, kind, NULL);
        snprintf(src.error, sizeof(src.error), "%s", err);
        AF_LOG(AF_LOG_WARN, "cannot read aws prices, keeping the last ones", "error", err, NULL);
    } else {
        src.read_at = src.tried_at;
        src.n_prices = s.n;
        src.error[0] = '\0';
        AF_LOG(AF_LOG_INFO, "read aws prices", "source", af_price_kind_name(kind), "region",
               region, NULL);
    }
    af_prices_set_source(s.book, &src);
    af_prices_holder_swap(ap->holder, s.book);
    if (ap->updated_fn)
        ap->updated_fn(ap->updated_ud, s.book);
    af_prices_unref(cur);
    return rc == 0;
}

bool af__aws_region_valid(const char *name)
{
    const char *p = name;
    int words = 0, digits = 0;

    /* "us-east-1", "us-gov-west-1", "ap-southeast-2", "us-isob-east-1": two letters, one
     * to three words, a number */
    if (!(p[0] >= 'a' && p[0] <= 'z' && p[1] >= 'a' && p[1] <= 'z' && p[2] == '-'))
        return false;
    p += 3;
    for (;;) {
        const char *w = p;
        while (*p >= 'a' && *p <= 'z')
            p++;
        if (p == w)
            break;
        if (*p != '-' || p - w > 12)
            return false;
        p++;
        words++;
    }
    while (*p >= '0' && *p <= '9' && digits < 3) {
        p++;
        digits++;
    }
    return words >= 1 && words <= 3 && digits >= 1 && digits <= 2 && *p == '\0';
}

/* Forgets region i: no longer read, its prices and sources out of the book. */
static void forget_region(struct af_aws_pricing *ap, size_t i)
{
    struct af_prices *cur = af_prices_holder_get(ap->holder);
    struct af_prices *next = af_prices_copy_without_region(cur, ap->regions[i].name);

    AF_LOG(AF_LOG_INFO, "aws region no node is in any more: prices forgotten", "region",
           ap->regions[i].name, NULL);
    af_prices_freeze(next);
    af_prices_holder_swap(ap->holder, next);
    if (ap->updated_fn)
        ap->updated_fn(ap->updated_ud, next);
    af_prices_unref(cur);
    ap->regions[i] = ap->regions[--ap->n_regions];
}

static void note_regions(struct af_aws_pricing *ap)
{
    char names[MAX_REGIONS * 2][32];
    size_t n = ap->regions_fn ? ap->regions_fn(ap->regions_ud, names, AF_ARRAY_SIZE(names)) : 0;
    double now = mono_s(), forget_s = FORGET_AFTER_REFRESHES * ap->opt.spot_refresh_s;
    size_t refused = 0, full = 0, valid = 0;

    if (n > AF_ARRAY_SIZE(names))
        n = AF_ARRAY_SIZE(names);
    for (size_t i = 0; i < n; i++) {
        names[i][sizeof(names[i]) - 1] = '\0';
        if (af__aws_region_valid(names[i]))
            valid++;
        else if (names[i][0])
            refused++;
    }
    /* until a node names a region, the fallback one is priced */
    if (!valid && ap->region && af__aws_region_valid(ap->region) && n < AF_ARRAY_SIZE(names)) {
        snprintf(names[n], sizeof(names[n]), "%s", ap->region);
        n++;
    }
    for (size_t i = 0; i < n; i++) {
        size_t k;

        if (!af__aws_region_valid(names[i]))
            continue;
        for (k = 0; k < ap->n_regions; k++)
            if (!strcmp(ap->regions[k].name, names[i]))
                break;
        if (k < ap->n_regions) {
            ap->regions[k].seen = now;
            continue;
        }
        if (ap->n_regions >= MAX_REGIONS) {
            full++;
            continue;
        }
        AF_GROW(ap->regions, ap->cap_regions, ap->n_regions + 1);
        memset(&ap->regions[ap->n_regions], 0, sizeof(ap->regions[0]));
        memcpy(ap->regions[ap->n_regions].name, names[i], sizeof(names[i]));
        ap->regions[ap->n_regions].seen = now;
        ap->n_regions++;
    }
    if (refused + full != ap->refused && refused + full) {
        char a[24], b[24];

        snprintf(a, sizeof(a), "%zu", refused);
        snprintf(b, sizeof(b), "%zu", full);
        AF_LOG(AF_LOG_WARN, "node regions not priced from aws", "not_aws_regions", a,
               "over_the_cap", b, NULL);
    }
    ap->refused = refused + full;
    for (size_t i = ap->n_regions; i-- > 0;)
        if (now - ap->regions[i].seen > forget_s)
            forget_region(ap, i);
}

static void *run(void *arg)
{
    struct af_aws_pricing *ap = arg;
    /* capacity reservations as often as spot prices: a Capacity Block's end matters within
     * minutes, and a new reservation should be seen soon */
    const double every[AF_PRICE__KINDS] = {ap->opt.on_demand_refresh_s, ap->opt.spot_refresh_s,
                                           ap->opt.spot_refresh_s};
    struct af__aws c;

    af__aws_init(&c, &ap->opt, &ap->stop);
    while (!atomic_load(&ap->stop.stop)) {
        double sleep_s = MAX_SLEEP_S;

        note_regions(ap);
        for (size_t i = 0; i < ap->n_regions && !atomic_load(&ap->stop.stop); i++)
            for (int k = 0; k < AF_PRICE__KINDS && !atomic_load(&ap->stop.stop); k++) {
                struct region_state *r = &ap->regions[i];

                if (r->due[k] > mono_s())
                    continue;
                r->due[k] = mono_s() + (refresh(ap, &c, k, r->name) ? every[k] : ap->opt.retry_s);
            }
        for (size_t i = 0; i < ap->n_regions; i++)
            for (int k = 0; k < AF_PRICE__KINDS; k++)
                if (ap->regions[i].due[k] - mono_s() < sleep_s)
                    sleep_s = ap->regions[i].due[k] - mono_s();
        /* No region known yet (the cluster not listed, no fallback region): ask again soon,
         * so that the first prices do not wait a whole minute after the first list. */
        if (ap->n_regions == 0)
            sleep_s = FIRST_REGION_POLL_S;
        if (sleep_s > 0)
            af__aws_wait(&ap->stop, sleep_s, true);
    }
    af__aws_release(&c);
    return NULL;
}

int af_aws_pricing_start(struct af_aws_pricing **out, const struct af_aws_options *opt,
                         struct af_prices_holder *holder, af_aws_regions_fn regions,
                         void *regions_ud, af_aws_updated_fn updated, void *updated_ud)
{
    struct af_aws_pricing *ap = af_xcalloc(1, sizeof(*ap));
    size_t n_types = 0;
    int rc;

    ap->opt = *opt;
    ap->opt.on_demand_refresh_s = opt->on_demand_refresh_s > 0 ? opt->on_demand_refresh_s : 86400;
    ap->opt.spot_refresh_s = opt->spot_refresh_s > 0 ? opt->spot_refresh_s : 300;
    ap->opt.retry_s = opt->retry_s > 0 ? opt->retry_s : 60;
    ap->region = af_xstrdup(af__aws_default_region(opt->region));
    ap->opt.region = ap->region;
    while (opt->instance_types && opt->instance_types[n_types])
        n_types++;
    if (opt->instance_types) {
        ap->types = af_xcalloc(n_types + 1, sizeof(*ap->types));
        for (size_t i = 0; i < n_types; i++)
            ap->types[i] = af_xstrdup(opt->instance_types[i]);
        ap->opt.instance_types = (const char *const *)ap->types;
    }
    ap->holder = holder;
    ap->regions_fn = regions;
    ap->regions_ud = regions_ud;
    ap->updated_fn = updated;
    ap->updated_ud = updated_ud;
    af__aws_stop_init(&ap->stop);
    rc = pthread_create(&ap->thread, NULL, run, ap);
    if (rc) {
        ap->thread = 0;
        af_aws_pricing_stop(ap);
        *out = NULL;
        return AF_ESYS(rc);
    }
    *out = ap;
    return 0;
}

void af_aws_pricing_kick(struct af_aws_pricing *ap)
{
    pthread_mutex_lock(&ap->stop.lock);
    ap->stop.kick = true;
    pthread_cond_broadcast(&ap->stop.cond);
    pthread_mutex_unlock(&ap->stop.lock);
}

void af_aws_pricing_stop(struct af_aws_pricing *ap)
{
    if (!ap)
        return;
    pthread_mutex_lock(&ap->stop.lock);
    atomic_store(&ap->stop.stop, true);
    pthread_cond_broadcast(&ap->stop.cond);
    pthread_mutex_unlock(&ap->stop.lock);
    if (ap->thread)
        pthread_join(ap->thread, NULL);
    af__aws_stop_destroy(&ap->stop);
    for (size_t i = 0; ap->types && ap->types[i]; i++)
        af_free(ap->types[i]);
    af_free(ap->types);
    af_free(ap->region);
    af_free(ap->regions);
    af_free(ap);
}
