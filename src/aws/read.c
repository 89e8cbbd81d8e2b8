/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The two price reads (internal.h) and the one-shot read of aws.h.
 *
 * On-demand: Pricing GetProducts (JSON 1.1) with Karpenter's filters, 100 products a page,
 * paged by NextToken. Each PriceList entry is a JSON document in a string; its
 * product.attributes.instanceType names the type, and each price dimension of its
 * terms.OnDemand terms gives pricePerUnit.USD (a zero price, which AWS lists for some
 * products, is skipped). Spot: EC2 DescribeSpotPriceHistory (Query API, XML) for Linux/UNIX
 * from now, which gives the price in force per zone and type, paged by nextToken; items are
 * kept one per pair as they come, the newest timestamp winning. A read that gives no price
 * at all fails: an unknown region reads as empty. Each read is bounded (internal.h): pages,
 * time, prices, items and pairs; a read past a bound fails and the last prices stay.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accelfit/model.h"
#include "aws/internal.h"
#include "accelfit/banned.h"

static bool wanted(const char *const *types, const char *type)
{
    if (!types)
        return true;
    for (size_t i = 0; types[i]; i++)
        if (!strcmp(types[i], type))
            return true;
    return false;
}

static void add_filter(json_t *filters, const char *field, const char *value)
{
    json_array_append_new(filters, json_pack("{s:s, s:s, s:s}", "Type", "TERM_MATCH", "Field",
                                             field, "Value", value));
}

static char *products_request(const char *region, const char *const *types, const char *next)
{
    json_t *filters = json_array(), *req;
    char *s, *out;

    add_filter(filters, "regionCode", region);
    add_filter(filters, "tenancy", "Shared");
    add_filter(filters, "operatingSystem", "Linux");
    add_filter(filters, "preInstalledSw", "NA");
    add_filter(filters, "capacitystatus", "Used");
    add_filter(filters, "marketoption", "OnDemand");
    add_filter(filters, "productFamily", "Compute Instance");
    if (types && types[0] && !types[1])
        add_filter(filters, "instanceType", types[0]);
    req = json_pack("{s:s, s:o, s:s, s:i}", "ServiceCode", "AmazonEC2", "Filters", filters,
                    "FormatVersion", "aws_v1", "MaxResults", 100);
    if (next)
        json_object_set_new(req, "NextToken", json_string(next));
    s = json_dumps(req, JSON_COMPACT);
    out = af_xstrdup(s);
    af_free(s);
    json_decref(req);
    return out;
}

/* The prices of one price document; *n counts them. */
static int price_document(const char *what, size_t idx, const char *doc, const char *region,
                          const char *const *types, double now, af_aws_price_fn fn, void *ud,
                          size_t *n, char *err, size_t errlen)
{
    json_t *j = json_loads(doc, 0, NULL), *terms, *term, *dims, *dim;
    const char *type, *k1, *k2;
    int rc = 0;

    if (!json_is_object(j)) {
        rc = af__aws_fail(err, errlen, AF_EPARSE, "%s: PriceList[%zu] is not a price document",
                          what, idx);
        goto out;
    }
    type = json_string_value(
        json_object_get(json_object_get(json_object_get(j, "product"), "attributes"),
                        "instanceType"));
    if (!type || !wanted(types, type))
        goto out;
    terms = json_object_get(json_object_get(j, "terms"), "OnDemand");
    json_object_foreach(terms, k1, term) {
        dims = json_object_get(term, "priceDimensions");
        json_object_foreach(dims, k2, dim) {
            const char *usd =
                json_string_value(json_object_get(json_object_get(dim, "pricePerUnit"), "USD"));
            double price;

            if (!usd || af_parse_decimal(usd, 0, AF_PRICE_MAX_USD_HR, &price)) {
                rc = af__aws_fail(err, errlen, AF_EPARSE,
                                  "%s: PriceList[%zu] (%s): price '%s' is not a number", what,
                                  idx, type, usd ? usd : "(none)");
                goto out;
            }
            if (price > 0) {
                fn(ud, AF_PRICE_ON_DEMAND, region, type, price, now);
                (*n)++;
            }
        }
    }
out:
    json_decref(j);
    return rc;
}

int af__aws_products_page(const char *what, const char *doc, size_t len, const char *region,
                          const char *const *types, double now, af_aws_price_fn fn, void *ud,
                          size_t *n, char **next, char *err, size_t errlen)
{
    json_t *j = json_loadb(doc ? doc : "", doc ? len : 0, 0, NULL), *list, *v;
    const char *tok;
    size_t i;
    int rc = 0;

    *next = NULL;
    list = json_object_get(j, "PriceList");
    if (!json_is_array(list)) {
        rc = af__aws_fail(err, errlen, AF_EPARSE, "%s: answer %s", what,
                          j ? "without a PriceList" : "is not JSON");
        goto out;
    }
    json_array_foreach(list, i, v) {
        if (!json_is_string(v)) {
            rc = af__aws_fail(err, errlen, AF_EPARSE, "%s: PriceList[%zu] is not a string", what,
                              i);
            goto out;
        }
        rc = price_document(what, i, json_string_value(v), region, types, now, fn, ud, n, err,
                            errlen);
        if (rc)
            goto out;
        if (*n > AF__AWS_MAX_PRICES) {
            rc = af__aws_fail(err, errlen, AF_ETOOBIG, "%s: more than %d prices", what,
                              AF__AWS_MAX_PRICES);
            goto out;
        }
    }
    tok = json_string_value(json_object_get(j, "NextToken"));
    if (tok && *tok)
        *next = af_xstrdup(tok);
out:
    json_decref(j);
    return rc;
}

/* Whether a read that began at `t0` (af_now_ns) has used up its time; says so in `err`. */
static bool past_deadline(const struct af__aws *c, uint64_t t0, const char *what, int pages,
                          int *rc, char *err, size_t errlen)
{
    double limit = AF__AWS_READ_DEADLINE_PAGES * c->timeout_s;

    if ((double)(af_now_ns() - t0) / 1e9 <= limit)
        return false;
    *rc = af__aws_fail(err, errlen, AF_ETIMEDOUT, "%s: not finished within %g s (%d pages read)",
                       what, limit, pages);
    return true;
}

static int too_many_pages(const char *what, char *err, size_t errlen)
{
    return af__aws_fail(err, errlen, AF_ETOOBIG,
                        "%s: more than %d pages (the answer was not taken as complete)", what,
                        AF__AWS_MAX_PAGES);
}

int af__aws_read_on_demand(struct af__aws *c, const char *region, const char *const *types,
                           af_aws_price_fn fn, void *ud, char *err, size_t errlen)
{
    struct af_buf body = AF_BUF_INIT(AF__AWS_MAX_BODY);
    char *what = af_xasprintf("pricing GetProducts %s", region);
    char *url = af__aws_url(c, AF__AWS_PRICING, "us-east-1"), *next = NULL;
    double now = af_wall_time();
    uint64_t t0 = af_now_ns();
    size_t n = 0;
    int rc = 0, pages = 0;

    do {
        char *req = products_request(region, types, next);

        rc = af__aws_call(c,
                          &(struct af__aws_req){.what = what, .service = AF__AWS_PRICING,
                                                .region = "us-east-1", .url = url, .body = req,
                                                .content_type = "application/x-amz-json-1.1",
                                                .target = "AWSPriceListService.GetProducts"},
                          &body, err, errlen);
        af_free(req);
        af_free(next);
        next = NULL;
        if (rc)
            break;
        pages++;
        rc = af__aws_products_page(what, body.buf, body.len, region, types, now, fn, ud, &n,
                                   &next, err, errlen);
        if (rc)
            break;
        if (next && pages >= AF__AWS_MAX_PAGES)
            rc = too_many_pages(what, err, errlen);
        else if (next)
            past_deadline(c, t0, what, pages, &rc, err, errlen);
    } while (!rc && next);
    if (!rc && n == 0)
        rc = af__aws_fail(err, errlen, AF_ENOENT, "%s: no on-demand prices", what);
    af_free(next);
    af_free(url);
    af_free(what);
    af_buf_release(&body);
    return rc;
}

/* ---- spot ------------------------------------------------------------------------------------ */

static uint32_t pair_hash(const char *zone, const char *type)
{
    return af_hash_str(af_hash_str(AF_HASH_INIT, zone), type);
}

/* The item of (zone, type), or NULL. */
static struct af__spot_item *pair_find(struct af__spot_read *r, const char *zone,
                                       const char *type)
{
    uint32_t h = pair_hash(zone, type), i;
    size_t walk = af_index_start(&r->ix, h);

    while (af_index_next(&r->ix, h, &walk, &i))
        if (!strcmp(r->items[i].zone, zone) && !strcmp(r->items[i].type, type))
            return &r->items[i];
    return NULL;
}

static void pairs_grow(struct af__spot_read *r)
{
    af_index_release(&r->ix);
    r->ix_cap = r->ix_cap ? r->ix_cap * 2 : 32;
    af_index_init(&r->ix, r->ix_cap, NULL);
    for (size_t i = 0; i < r->n; i++)
        af_index_add(&r->ix, pair_hash(r->items[i].zone, r->items[i].type), i);
}

static void spot_bad(struct af__spot_read *r, const char *fmt, ...) AF_PRINTF(2, 3);
static void spot_bad(struct af__spot_read *r, const char *fmt, ...)
{
    va_list ap;

    if (r->bad[0])
        return;
    va_start(ap, fmt);
    vsnprintf(r->bad, sizeof(r->bad), fmt, ap);
    va_end(ap);
}

/* An item has ended: kept when it is the newest of its pair so far. */
static void spot_item_end(struct af__spot_read *r)
{
    struct af__spot_item *it = &r->cur, *old;
    double price;

    if (r->bad[0])
        return;
    if (++r->seen > AF__AWS_MAX_SPOT_ITEMS) {
        spot_bad(r, "more than %d items", AF__AWS_MAX_SPOT_ITEMS);
        return;
    }
    if (!it->zone[0] || !it->type[0] || it->bad_ts ||
        af_parse_decimal(it->price, 0, AF_PRICE_MAX_USD_HR, &price)) {
        spot_bad(r, "item %zu (%s %s) has no zone, type, price or timestamp", r->seen - 1,
                 it->zone, it->type);
        return;
    }
    if (!wanted(r->types, it->type))
        return;
    if (r->n + 1 > r->ix_cap)
        pairs_grow(r);
    old = pair_find(r, it->zone, it->type);
    if (old) {   /* a pair seen before: the newest price wins */
        if (it->ts >= old->ts)
            *old = *it;
        return;
    }
    if (r->n >= AF__AWS_MAX_SPOT_PAIRS) {
        spot_bad(r, "more than %d zone and instance type pairs", AF__AWS_MAX_SPOT_PAIRS);
        return;
    }
    AF_GROW(r->items, r->cap, r->n + 1);
    r->items[r->n] = *it;
    af_index_add(&r->ix, pair_hash(it->zone, it->type), r->n++);
}

static void spot_cb(void *ud, const char *path, const char *text)
{
    static const char item[] = "/DescribeSpotPriceHistoryResponse/spotPriceHistorySet/item";
    struct af__spot_read *r = ud;
    const char *leaf = strrchr(path, '/');

    if (!leaf)
        return;
    leaf++;
    if (!strchr(path + 1, '/')) {
        snprintf(r->root, sizeof(r->root), "%s", path + 1);
    } else if (!strcmp(path, "/DescribeSpotPriceHistoryResponse/nextToken")) {
        af_free(r->next);
        r->next = *text ? af_xstrdup(text) : NULL;
    } else if (!strcmp(path, item)) {
        spot_item_end(r);
        memset(&r->cur, 0, sizeof(r->cur));
    } else if (!strncmp(path, item, sizeof(item) - 1) && path[sizeof(item) - 1] == '/') {
        if (!strcmp(leaf, "availabilityZone"))
            snprintf(r->cur.zone, sizeof(r->cur.zone), "%s", text);
        else if (!strcmp(leaf, "instanceType"))
            snprintf(r->cur.type, sizeof(r->cur.type), "%s", text);
        else if (!strcmp(leaf, "spotPrice"))
            snprintf(r->cur.price, sizeof(r->cur.price), "%s", text);
        else if (!strcmp(leaf, "timestamp"))
            r->cur.bad_ts = (r->cur.ts = af_parse_rfc3339(text)) < 0;
    }
}

int af__aws_spot_page(struct af__spot_read *r, const char *what, const char *doc, size_t len,
                      char *err, size_t errlen)
{
    int rc;

    af_free(r->next);
    r->next = NULL;
    r->root[0] = '\0';
    memset(&r->cur, 0, sizeof(r->cur));
    rc = af__xml_parse(doc ? doc : "", doc ? len : 0, spot_cb, r, err, errlen);
    if (rc) {
        char why[256];
        snprintf(why, sizeof(why), "%s", err);
        return af__aws_fail(err, errlen, rc, "%s: %s", what, why);
    }
    if (strcmp(r->root, "DescribeSpotPriceHistoryResponse"))
        return af__aws_fail(err, errlen, AF_EPARSE,
                            "%s: answer is not a DescribeSpotPriceHistoryResponse", what);
    if (r->bad[0])
        return af__aws_fail(err, errlen, strstr(r->bad, "more than") ? AF_ETOOBIG : AF_EPARSE,
                            "%s: %s", what, r->bad);
    return 0;
}

static int item_cmp(const void *a, const void *b)
{
    const struct af__spot_item *x = a, *y = b;
    int c = strcmp(x->zone, y->zone);

    return c ? c : strcmp(x->type, y->type);
}

size_t af__aws_spot_emit(struct af__spot_read *r, af_aws_price_fn fn, void *ud)
{
    size_t emitted = 0;

    if (r->n)   /* an empty read has no array: qsort must not be given NULL */
        qsort(r->items, r->n, sizeof(*r->items), item_cmp);
    for (size_t i = 0; i < r->n; i++) {
        struct af__spot_item *it = &r->items[i];
        double price;

        if (af_parse_decimal(it->price, 0, AF_PRICE_MAX_USD_HR, &price) || price <= 0)
            continue;
        fn(ud, AF_PRICE_SPOT, it->zone, it->type, price, it->ts);
        emitted++;
    }
    af_index_release(&r->ix);   /* the order changed: the index is no longer valid */
    r->ix_cap = 0;
    return emitted;
}

void af__aws_spot_release(struct af__spot_read *r)
{
    af_free(r->items);
    af_index_release(&r->ix);
    af_free(r->next);
    memset(r, 0, sizeof(*r));
}

static char *spot_request(CURL *h, const char *const *types, const char *next)
{
    char now[AF_RFC3339_LEN], *e, *form;
    struct af_buf b = AF_BUF_INIT(0);

    af_format_rfc3339(af_wall_time(), now, sizeof(now));
    e = curl_easy_escape(h, now, 0);
    af_assert(af_buf_printf(&b, "Action=DescribeSpotPriceHistory&Version=2016-11-15"
                                "&ProductDescription.1=Linux%%2FUNIX&StartTime=%s"
                                "&MaxResults=1000",
                            e) == 0);
    curl_free(e);
    for (size_t i = 0; types && types[i]; i++) {
        e = curl_easy_escape(h, types[i], 0);
        af_assert(af_buf_printf(&b, "&InstanceType.%zu=%s", i + 1, e) == 0);
        curl_free(e);
    }
    if (next) {
        e = curl_easy_escape(h, next, 0);
        af_assert(af_buf_printf(&b, "&NextToken=%s", e) == 0);
        curl_free(e);
    }
    form = af_buf_detach(&b, NULL);
    return form;
}

/*
 * One EC2 Query API read, page after page, within the bounds of every read (internal.h):
 * `form` builds a page's request from the last page's next token (NULL for the first), and
 * `page` takes a page's answer and gives its next token (NULL after the last; owned by ud).
 */
typedef char *(*ec2_form_fn)(void *ud, CURL *h, const char *next);
typedef int (*ec2_page_fn)(void *ud, const char *what, const char *doc, size_t len,
                           const char **next, char *err, size_t errlen);

static int ec2_read(struct af__aws *c, const char *region, const char *what, ec2_form_fn form,
                    ec2_page_fn page, void *ud, char *err, size_t errlen)
{
    struct af_buf body = AF_BUF_INIT(AF__AWS_MAX_BODY);
    char *url = af__aws_url(c, AF__AWS_EC2, region);
    const char *next = NULL;
    uint64_t t0 = af_now_ns();
    int rc = 0, pages = 0;

    do {
        char *req = form(ud, c->curl, next);

        rc = af__aws_call(c,
                          &(struct af__aws_req){.what = what, .service = AF__AWS_EC2,
                                                .region = region, .url = url, .body = req,
                                                .content_type =
                                                    "application/x-www-form-urlencoded; "
                                                    "charset=utf-8"},
                          &body, err, errlen);
        af_free(req);
        if (rc)
            break;
        pages++;
        rc = page(ud, what, body.buf, body.len, &next, err, errlen);
        if (rc)
            break;
        if (next && pages >= AF__AWS_MAX_PAGES)
            rc = too_many_pages(what, err, errlen);
        else if (next)
            past_deadline(c, t0, what, pages, &rc, err, errlen);
    } while (!rc && next);
    af_free(url);
    af_buf_release(&body);
    return rc;
}

static char *spot_form(void *ud, CURL *h, const char *next)
{
    return spot_request(h, ((struct af__spot_read *)ud)->types, next);
}

static int spot_page(void *ud, const char *what, const char *doc, size_t len, const char **next,
                     char *err, size_t errlen)
{
    struct af__spot_read *r = ud;
    int rc = af__aws_spot_page(r, what, doc, len, err, errlen);

    *next = r->next;
    return rc;
}

int af__aws_read_spot(struct af__aws *c, const char *region, const char *const *types,
                      af_aws_price_fn fn, void *ud, char *err, size_t errlen)
{
    char *what = af_xasprintf("ec2 DescribeSpotPriceHistory %s", region);
    struct af__spot_read r = {.types = types};
    int rc = ec2_read(c, region, what, spot_form, spot_page, &r, err, errlen);

    if (!rc && af__aws_spot_emit(&r, fn, ud) == 0)
        rc = af__aws_fail(err, errlen, AF_ENOENT, "%s: no spot prices", what);
    af__aws_spot_release(&r);
    af_free(what);
    return rc;
}

struct resv_read {
    const char *region;
    struct af_prices *book;
    size_t *n;
    char *next;
};

static char *resv_form(void *ud, CURL *h, const char *next)
{
    struct af_buf form = AF_BUF_INIT(0);
    char *e = next ? curl_easy_escape(h, next, 0) : NULL;

    (void)ud;
    af_assert(af_buf_printf(&form, "Action=DescribeCapacityReservations&Version=2016-11-15"
                                   "&MaxResults=1000&Filter.1.Name=state"
                                   "&Filter.1.Value.1=active%s%s",
                            e ? "&NextToken=" : "", e ? e : "") == 0);
    curl_free(e);
    return af_buf_detach(&form, NULL);
}

static int resv_page(void *ud, const char *what, const char *doc, size_t len, const char **next,
                     char *err, size_t errlen)
{
    struct resv_read *r = ud;
    int rc;

    af_free(r->next);
    r->next = NULL;
    rc = af__aws_reservations_page(what, doc, len, r->region, r->book, r->n, &r->next, err,
                                   errlen);
    *next = r->next;
    return rc;
}

int af__aws_read_reservations(struct af__aws *c, const char *region, struct af_prices *book,
                              size_t *n, char *err, size_t errlen)
{
    char *what = af_xasprintf("ec2 DescribeCapacityReservations %s", region);
    struct resv_read r = {.region = region, .book = book, .n = n};
    int rc;

    *n = 0;
    rc = ec2_read(c, region, what, resv_form, resv_page, &r, err, errlen);
    af_free(r.next);
    af_free(what);
    return rc;
}

/* ---- one-shot ---------------------------------------------------------------------------------- */

int af_aws_read(const struct af_aws_options *opt, const char *region, unsigned what,
                af_aws_price_fn fn, void *ud, char *err, size_t errlen)
{
    struct af__aws c;
    int rc = 0;

    af__aws_init(&c, opt, NULL);
    if (!region || !*region)
        region = c.region;
    if (!*region)
        rc = af__aws_fail(err, errlen, AF_EINVAL,
                          "no region: pass one or set AWS_REGION or AWS_DEFAULT_REGION");
    if (!rc && (what & AF_AWS_ON_DEMAND))
        rc = af__aws_read_on_demand(&c, region, opt->instance_types, fn, ud, err, errlen);
    if (!rc && (what & AF_AWS_SPOT))
        rc = af__aws_read_spot(&c, region, opt->instance_types, fn, ud, err, errlen);
    af__aws_release(&c);
    return rc;
}

struct book_sink {
    struct af_prices *book;
    size_t n[AF_PRICE__KINDS];
};

static void book_add(void *ud, enum af_price_kind kind, const char *where, const char *type,
                     double usd_hr, double as_of)
{
    struct book_sink *s = ud;

    if (af_prices_set(s->book, kind, where, type, usd_hr, as_of) == 0)
        s->n[kind]++;
}

int af_aws_read_into(struct af_prices *book, const struct af_aws_options *opt,
                     const char *region, unsigned what, char *err, size_t errlen)
{
    struct book_sink s = {book, {0}};
    struct af__aws c;
    int first = 0;

    af__aws_init(&c, opt, NULL);   /* one client: credentials are got once for both kinds */
    if (!region || !*region)
        region = c.region;
    if (!*region) {
        af__aws_release(&c);
        return af__aws_fail(err, errlen, AF_EINVAL,
                            "no region: pass one or set AWS_REGION or AWS_DEFAULT_REGION");
    }
    for (int k = 0; k < AF_PRICE__KINDS; k++) {
        struct af_price_source src = {.kind = k};
        char e[sizeof(src.error)] = "";
        int rc;

        if (!(what & (k == AF_PRICE_ON_DEMAND ? AF_AWS_ON_DEMAND
                      : k == AF_PRICE_SPOT    ? AF_AWS_SPOT
                                              : AF_AWS_RESERVATIONS)))
            continue;
        if (k == AF_PRICE_RESERVATIONS)
            rc = af__aws_read_reservations(&c, region, book, &s.n[k], e, sizeof(e));
        else
            rc = k == AF_PRICE_ON_DEMAND
                     ? af__aws_read_on_demand(&c, region, opt->instance_types, book_add, &s, e,
                                              sizeof(e))
                     : af__aws_read_spot(&c, region, opt->instance_types, book_add, &s, e,
                                         sizeof(e));
        snprintf(src.region, sizeof(src.region), "%s", region);
        src.tried_at = af_wall_time();
        if (rc) {
            snprintf(src.error, sizeof(src.error), "%s", e);
            if (!first) {
                first = rc;
                snprintf(err, errlen, "%s", e);
            }
        } else {
            src.read_at = src.tried_at;
            src.n_prices = s.n[k];
        }
        af_prices_set_source(book, &src);
    }
    af__aws_release(&c);
    return first;
}

int af_aws_read_book(struct af_prices **out, const struct af_aws_options *opt, const char *region,
                     unsigned what, char *err, size_t errlen)
{
    struct af_prices *book = af_prices_new();
    int rc = af_aws_read_into(book, opt, region, what, err, errlen);

    *out = NULL;
    if (rc) {
        af_prices_unref(book);
        return rc;
    }
    af_prices_freeze(book);
    *out = book;
    return 0;
}
