/* SPDX-License-Identifier: Apache-2.0 */
/*
 * AWS answers on arbitrary bytes (src/aws): the first byte picks the parser, the rest is the
 * answer's body. 0: a DescribeSpotPriceHistory page (XML; a second page follows a NUL byte,
 * so de-duplication across pages is reached); 1: an STS AssumeRoleWithWebIdentity answer
 * (XML); 2: an error document (JSON or XML); 3: a GetProducts page (JSON, each PriceList
 * entry a price document in a string); 4: a DescribeCapacityReservations page (XML). Each
 * must accept or refuse (never crash), and what
 * it accepted must hold: spot prices within (0, AF_PRICE_MAX_USD_HR], one per (zone, type),
 * at most AF__AWS_MAX_SPOT_PAIRS; credentials taken complete; error code and message
 * terminated and on one line; on-demand prices within (0, AF_PRICE_MAX_USD_HR], at most
 * AF__AWS_MAX_PRICES + 1 counted; reservations found again by id, at most
 * AF_RESERVATIONS_MAX. A refusal says why, naming what was read.
 */
#include <math.h>
#include <string.h>

#include "aws/internal.h"
#include "fuzz.h"

struct seen {
    size_t n;
    char last_zone[32], last_type[64];
};

static void on_price(void *ud, enum af_price_kind kind, const char *where, const char *type,
                     double usd_hr, double as_of)
{
    struct seen *s = ud;

    FUZZ_CHECK(isfinite(usd_hr) && usd_hr > 0 && usd_hr <= AF_PRICE_MAX_USD_HR, "price %g",
               usd_hr);
    FUZZ_CHECK(where && *where && type && *type, "price without zone or type");
    FUZZ_CHECK(isfinite(as_of), "as_of %g", as_of);
    if (kind == AF_PRICE_SPOT) {
        int c = strcmp(s->last_zone, where);
        /* emitted by zone then type, each pair once */
        FUZZ_CHECK(s->n == 0 || c < 0 || (c == 0 && strcmp(s->last_type, type) < 0),
                   "pair %s %s emitted twice or out of order", where, type);
        snprintf(s->last_zone, sizeof(s->last_zone), "%s", where);
        snprintf(s->last_type, sizeof(s->last_type), "%s", type);
    }
    s->n++;
}

static void spot(const char *d, size_t n)
{
    struct af__spot_read r = {0};
    const char *nul = memchr(d, '\0', n);
    size_t first = nul ? (size_t)(nul - d) : n;
    struct seen s = {0};
    char err[300] = "";
    int rc;

    rc = af__aws_spot_page(&r, "ec2 test", d, first, err, sizeof(err));
    if (rc == 0 && nul)
        rc = af__aws_spot_page(&r, "ec2 test", nul + 1, n - first - 1, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || ((rc == AF_EPARSE || rc == AF_ETOOBIG) && !strncmp(err, "ec2 test: ", 10)),
               "rc %d: %s", rc, err);
    FUZZ_CHECK(r.n <= AF__AWS_MAX_SPOT_PAIRS && r.seen <= AF__AWS_MAX_SPOT_ITEMS + 1,
               "%zu pairs from %zu items", r.n, r.seen);
    if (rc == 0)
        FUZZ_CHECK(af__aws_spot_emit(&r, on_price, &s) == s.n, "emitted count");
    af__aws_spot_release(&r);
}

static void sts(const char *d, size_t n)
{
    struct af__aws c;
    char err[300] = "";
    int rc;

    memset(&c, 0, sizeof(c));
    rc = af__aws_sts_take(&c, "sts test", d, n, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || (rc == AF_EPARSE && !strncmp(err, "sts test: ", 10)), "rc %d: %s", rc,
               err);
    if (rc == 0)
        FUZZ_CHECK(c.creds.valid && *c.creds.akid && *c.creds.secret && *c.creds.token &&
                       isfinite(c.creds.expires),
                   "credentials taken incomplete");
    af__aws_release(&c);
}

static void error_doc(const char *d, size_t n)
{
    char code[128], msg[512];

    memset(code, 'x', sizeof(code));
    memset(msg, 'x', sizeof(msg));
    af__aws_error_parse(d, n, code, sizeof(code), msg, sizeof(msg));
    FUZZ_CHECK(memchr(code, '\0', sizeof(code)) && memchr(msg, '\0', sizeof(msg)),
               "not terminated");
    FUZZ_CHECK(!strchr(msg, '\n') && !strchr(msg, '\r'), "message on two lines");
}

static void products(const char *d, size_t n)
{
    struct seen s = {0};
    size_t count = 0;
    char err[300] = "", *next = NULL;
    int rc;

    rc = af__aws_products_page("pricing test", d, n, "eu-west-1", NULL, 1795414896.0, on_price,
                               &s, &count, &next, err, sizeof(err));
    FUZZ_CHECK(rc == 0 || ((rc == AF_EPARSE || rc == AF_ETOOBIG) &&
                           !strncmp(err, "pricing test: ", 14)),
               "rc %d: %s", rc, err);
    FUZZ_CHECK(count == s.n && count <= AF__AWS_MAX_PRICES + 1, "%zu prices", count);
    FUZZ_CHECK(!next || *next, "empty next token");
    af_free(next);
}

static void reservations(const char *d, size_t n)
{
    struct af_prices *book = af_prices_new();
    size_t count = 0;
    char err[300] = "", *next = NULL;
    int rc;

    rc = af__aws_reservations_page("ec2 test", d, n, "us-east-1", book, &count, &next, err,
                                   sizeof(err));
    FUZZ_CHECK(rc == 0 || ((rc == AF_EPARSE || rc == AF_ETOOBIG) && !strncmp(err, "ec2 test: ", 10)),
               "rc %d: %s", rc, err);
    FUZZ_CHECK(count <= AF_RESERVATIONS_MAX, "%zu reservations", count);
    FUZZ_CHECK(!next || *next, "empty next token");
    af_free(next);
    af_prices_unref(book);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *d = (const char *)data + 1;
    /* the body as AWS's answers reach the parsers: NUL-terminated (af_buf) */
    char *body;

    if (size < 1)
        return 0;
    body = af_xmalloc(size);
    memcpy(body, d, size - 1);
    body[size - 1] = '\0';
    switch (data[0] % 5) {
    case 0:
        spot(body, size - 1);
        break;
    case 1:
        sts(body, size - 1);
        break;
    case 2:
        error_doc(body, size - 1);
        break;
    case 3:
        products(body, size - 1);
        break;
    default:
        reservations(body, size - 1);
        break;
    }
    af_free(body);
    return 0;
}
