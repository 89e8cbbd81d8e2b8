/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The two price reads (internal.h) and the one-shot read of aws.h.
 *
 * On-demand: Pricing GetProducts (JSON 1.1) with Karpenter's filters, 100 products a page,
 * paged by NextToken. Each PriceList entry is a JSON document in a string; its
 * product.attributes.instanceType names the type, and each price dimension of its
 * terms.OnDemand terms gives pricePerUnit.USD (a zero price, which AWS lists for some
 * products, is skipped). Spot: EC2 DescribeSpotPriceHistory (Query API, XML) for Linux/UNIX
 * from now, which gives the price in force per zone and type, paged by nextToken; when a
 * page holds a pair twice the newest timestamp wins. A read that gives no price at all
 * fails: an unknown region reads as empty.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accelfit/model.h"
#include "aws/internal.h"

#define MAX_PAGES 1000

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
    free(s);
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

int af__aws_read_on_demand(struct af__aws *c, const char *region, const char *const *types,
                           af_aws_price_fn fn, void *ud, char *err, size_t errlen)
{
    struct af_buf body = AF_BUF_INIT(AF__AWS_MAX_BODY);
    char *what = af_xasprintf("pricing GetProducts %s", region);
    char *url = af__aws_url(c, AF__AWS_PRICING, "us-east-1"), *next = NULL;
    double now = af_wall_time();
    size_t n = 0;
    int rc = 0, pages = 0;

    do {
        char *req = products_request(region, types, next);
        json_t *j, *list, *v;
        size_t i;

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
        j = json_loadb(body.buf, body.len, 0, NULL);
        list = json_object_get(j, "PriceList");
        if (!json_is_array(list)) {
            rc = af__aws_fail(err, errlen, AF_EPARSE, "%s: answer %s", what,
                              j ? "without a PriceList" : "is not JSON");
            json_decref(j);
            break;
        }
        json_array_foreach(list, i, v) {
            if (!json_is_string(v)) {
                rc = af__aws_fail(err, errlen, AF_EPARSE,
                                  "%s: PriceList[%zu] is not a string", what, i);
                break;
            }
            rc = price_document(what, i, json_string_value(v), region, types, now, fn, ud, &n,
                                err, errlen);
            if (rc)
                break;
        }
        if (json_string_value(json_object_get(j, "NextToken")) &&
            *json_string_value(json_object_get(j, "NextToken")))
            next = af_xstrdup(json_string_value(json_object_get(j, "NextToken")));
        json_decref(j);
    } while (!rc && next && ++pages < MAX_PAGES);
    if (!rc && n == 0)
        rc = af__aws_fail(err, errlen, AF_ENOENT, "%s: no on-demand prices", what);
    af_free(next);
    af_free(url);
    af_free(what);
    af_buf_release(&body);
    return rc;
}

/* ---- spot ------------------------------------------------------------------------------------ */

struct spot_item {
    char zone[32];
    char type[64];
    char price[32];
    double ts;
    bool bad_ts;
};

struct spot_page {
    struct spot_item *items;
    size_t n, cap;
    struct spot_item cur;
    char root[64];
    char *next;
};

static void spot_cb(void *ud, const char *path, const char *text)
{
    static const char item[] = "/DescribeSpotPriceHistoryResponse/spotPriceHistorySet/item";
    struct spot_page *pg = ud;
    const char *leaf = strrchr(path, '/') + 1;

    if (!strchr(path + 1, '/')) {
        snprintf(pg->root, sizeof(pg->root), "%s", path + 1);
    } else if (!strcmp(path, "/DescribeSpotPriceHistoryResponse/nextToken")) {
        af_free(pg->next);
        pg->next = *text ? af_xstrdup(text) : NULL;
    } else if (!strcmp(path, item)) {
        AF_GROW(pg->items, pg->cap, pg->n + 1);
        pg->items[pg->n++] = pg->cur;
        memset(&pg->cur, 0, sizeof(pg->cur));
    } else if (!strncmp(path, item, sizeof(item) - 1) && path[sizeof(item) - 1] == '/') {
        if (!strcmp(leaf, "availabilityZone"))
            snprintf(pg->cur.zone, sizeof(pg->cur.zone), "%s", text);
        else if (!strcmp(leaf, "instanceType"))
            snprintf(pg->cur.type, sizeof(pg->cur.type), "%s", text);
        else if (!strcmp(leaf, "spotPrice"))
            snprintf(pg->cur.price, sizeof(pg->cur.price), "%s", text);
        else if (!strcmp(leaf, "timestamp"))
            pg->cur.bad_ts = af__aws_parse_time(text, &pg->cur.ts) != 0;
    }
}

static int item_cmp(const void *a, const void *b)
{
    const struct spot_item *x = a, *y = b;
    int c = strcmp(x->zone, y->zone);

    if (!c)
        c = strcmp(x->type, y->type);
    if (!c)
        c = (x->ts > y->ts) - (x->ts < y->ts);
    return c;
}

static char *spot_request(CURL *h, const char *const *types, const char *next)
{
    char now[32], *e, *form;
    time_t t = time(NULL);
    struct tm tm;
    struct af_buf b = AF_BUF_INIT(0);

    gmtime_r(&t, &tm);
    strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm);
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

int af__aws_read_spot(struct af__aws *c, const char *region, const char *const *types,
                      af_aws_price_fn fn, void *ud, char *err, size_t errlen)
{
    struct af_buf body = AF_BUF_INIT(AF__AWS_MAX_BODY);
    char *what = af_xasprintf("ec2 DescribeSpotPriceHistory %s", region);
    char *url = af__aws_url(c, AF__AWS_EC2, region);
    struct spot_page pg = {0};
    size_t emitted = 0;
    int rc = 0, pages = 0;

    do {
        char *req = spot_request(c->curl, types, pg.next);

        af_free(pg.next);
        pg.next = NULL;
        pg.root[0] = '\0';
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
        rc = af__xml_parse(body.buf, body.len, spot_cb, &pg, err, errlen);
        if (rc) {
            char why[256];
            snprintf(why, sizeof(why), "%s", err);
            rc = af__aws_fail(err, errlen, rc, "%s: %s", what, why);
            break;
        }
        if (strcmp(pg.root, "DescribeSpotPriceHistoryResponse")) {
            rc = af__aws_fail(err, errlen, AF_EPARSE,
                              "%s: answer is not a DescribeSpotPriceHistoryResponse", what);
            break;
        }
    } while (pg.next && ++pages < MAX_PAGES);
    for (size_t i = 0; !rc && i < pg.n; i++) {
        struct spot_item *it = &pg.items[i];
        double price;

        if (!it->zone[0] || !it->type[0] || it->bad_ts ||
            af_parse_decimal(it->price, 0, AF_PRICE_MAX_USD_HR, &price))
            rc = af__aws_fail(err, errlen, AF_EPARSE,
                              "%s: item %zu (%s %s) has no zone, type, price or timestamp", what,
                              i, it->zone, it->type);
    }
    if (!rc) {
        if (pg.n)   /* an empty page has no array: qsort must not be given NULL */
            qsort(pg.items, pg.n, sizeof(*pg.items), item_cmp);
        for (size_t i = 0; i < pg.n; i++) {
            struct spot_item *it = &pg.items[i], *nx = i + 1 < pg.n ? it + 1 : NULL;
            double price;

            if (nx && !strcmp(nx->zone, it->zone) && !strcmp(nx->type, it->type))
                continue;   /* an older price of the pair */
            if (!wanted(types, it->type) ||
                af_parse_decimal(it->price, 0, AF_PRICE_MAX_USD_HR, &price) || price <= 0)
                continue;
            fn(ud, AF_PRICE_SPOT, it->zone, it->type, price, it->ts);
            emitted++;
        }
        if (emitted == 0)
            rc = af__aws_fail(err, errlen, AF_ENOENT, "%s: no spot prices", what);
    }
    af_free(pg.items);
    af_free(pg.next);
    af_free(url);
    af_free(what);
    af_buf_release(&body);
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

        if (!(what & (k == AF_PRICE_ON_DEMAND ? AF_AWS_ON_DEMAND : AF_AWS_SPOT)))
            continue;
        rc = k == AF_PRICE_ON_DEMAND
                 ? af__aws_read_on_demand(&c, region, opt->instance_types, book_add, &s, e,
                                          sizeof(e))
                 : af__aws_read_spot(&c, region, opt->instance_types, book_add, &s, e, sizeof(e));
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
