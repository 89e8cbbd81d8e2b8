/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `accelfit prices`: reads EC2 prices from AWS once, with the credentials and endpoints
 * `accelfit serve` would use (docs/pricing.md), and prints them: the on-demand price of
 * each instance type in the region and, with --spot, the current spot price per zone. A
 * way to check the IAM setup from a pod, and to see what the live prices are.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accelfit/aws.h"
#include "accelfit/util.h"
#include "cli/cli.h"
#include "accelfit/banned.h"

static const char usage[] =
    "usage: accelfit prices [--region R] [--spot] [--type T]... [--output table|json]\n"
    "\n"
    "Reads EC2 prices from AWS now and prints them: the on-demand price of each instance\n"
    "type in the region (AWS Pricing API, GetProducts) and, with --spot, the current spot\n"
    "price per availability zone (EC2 DescribeSpotPriceHistory). Credentials as accelfit\n"
    "serve finds them: IRSA (AWS_ROLE_ARN, AWS_WEB_IDENTITY_TOKEN_FILE), EKS Pod Identity\n"
    "(AWS_CONTAINER_CREDENTIALS_FULL_URI), AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or\n"
    "a profile of ~/.aws/credentials or ~/.aws/config (AWS_PROFILE, AWS_SHARED_CREDENTIALS_FILE).\n"
    "\n"
    "options:\n"
    "  --region R     the region (default: $AWS_REGION, then $AWS_DEFAULT_REGION)\n"
    "  --spot         also read spot prices\n"
    "  --type T       only instance type T (repeat for more)\n"
    "  --output FORMAT  table (default) or json; --json is short for --output json, as\n"
    "                 for every command that prints\n"
    "  -h, --help     show this help\n"
    "\n"
    "Exit status: 0, 1 when AWS cannot be read (unreachable, no or invalid credentials,\n"
    "an error answer), 2 on bad usage.\n";

struct row {
    enum af_price_kind kind;
    char where[32];
    char type[64];
    double usd_hr, as_of;
};

struct rows {
    struct row *v;
    size_t n, cap;
};

static void add_row(void *ud, enum af_price_kind kind, const char *where, const char *type,
                    double usd_hr, double as_of)
{
    struct rows *r = ud;
    struct row *x;

    AF_GROW(r->v, r->cap, r->n + 1);
    x = &r->v[r->n++];
    memset(x, 0, sizeof(*x));
    x->kind = kind;
    snprintf(x->where, sizeof(x->where), "%s", where);
    snprintf(x->type, sizeof(x->type), "%s", type);
    x->usd_hr = usd_hr;
    x->as_of = as_of;
}

static int row_cmp(const void *a, const void *b)
{
    const struct row *x = a, *y = b;
    int c = strcmp(x->type, y->type);

    if (!c)
        c = (int)x->kind - (int)y->kind;
    if (!c)
        c = strcmp(x->where, y->where);
    return c;
}

static const char *when(double t, char *buf, size_t len)
{
    af_format_rfc3339(t, buf, len);
    return buf;
}

static const char *kind_name(enum af_price_kind k)
{
    return af_price_kind_name(k);
}

static int print_json(const struct rows *r, const char *region)
{
    struct af_buf b = AF_BUF_INIT(0);
    char t[32];
    int rc = af_buf_puts(&b, "{\"region\":") | af_buf_json_str(&b, region) |
             af_buf_puts(&b, ",\"prices\":[");

    for (size_t i = 0; i < r->n; i++) {
        const struct row *x = &r->v[i];
        rc |= af_buf_puts(&b, i ? ",{\"instance_type\":" : "{\"instance_type\":") |
              af_buf_json_str(&b, x->type) | af_buf_puts(&b, ",\"where\":") |
              af_buf_json_str(&b, x->where) | af_buf_puts(&b, ",\"usd_hr\":") |
              af_buf_json_num(&b, x->usd_hr, 10) | af_buf_puts(&b, ",\"source\":") |
              af_buf_json_str(&b, kind_name(x->kind)) | af_buf_puts(&b, ",\"read_at\":") |
              af_buf_json_str(&b, when(x->as_of, t, sizeof(t))) | af_buf_puts(&b, "}");
    }
    rc |= af_buf_puts(&b, "]}\n");
    af_assert(rc == 0);
    fputs(b.buf, stdout);
    af_buf_release(&b);
    return 0;
}

static void print_table(const struct rows *r)
{
    char t[32];

    printf("%-24s %-16s %12s  %-10s %s\n", "TYPE", "WHERE", "USD/H", "SOURCE", "READ AT");
    for (size_t i = 0; i < r->n; i++) {
        const struct row *x = &r->v[i];
        printf("%-24s %-16s %12.4f  %-10s %s\n", x->type, x->where, x->usd_hr,
               kind_name(x->kind), when(x->as_of, t, sizeof(t)));
    }
}

int af_cmd_prices(int argc, char **argv)
{
    const char **types = af_xcalloc((size_t)argc + 1, sizeof(*types));
    struct af_aws_options opt = {0};
    struct rows rows = {0};
    const char *region = NULL, *v;
    unsigned what = AF_AWS_ON_DEMAND;
    size_t n_types = 0;
    bool json = false;
    char err[512];
    int rc = 0;

    for (int i = 1; i < argc && rc == 0; i++) {
        int m;

        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(usage, stdout);
            goto out;
        } else if (!strcmp(argv[i], "--spot")) {
            what |= AF_AWS_SPOT;
        } else if (!strcmp(argv[i], "--json")) {   /* --output json */
            json = true;
        } else if ((m = af_cli_flag(argc, argv, &i, "--output", &v)) != 0) {
            if (m < 0 || (strcmp(v, "table") && strcmp(v, "json")))
                rc = af_cli_fail("prices", "--output must be table or json, not '%s' (see "
                                           "accelfit prices --help)", m < 0 ? "" : v);
            else
                json = !strcmp(v, "json");
        } else if ((m = af_cli_flag(argc, argv, &i, "--region", &region)) != 0) {
            if (m < 0 || !*region)
                rc = af_cli_fail("prices", "--region needs a region (see accelfit prices --help)");
        } else if ((m = af_cli_flag(argc, argv, &i, "--type", &v)) != 0) {
            if (m < 0 || !*v)
                rc = af_cli_fail("prices", "--type needs an instance type (see accelfit prices "
                                           "--help)");
            else
                types[n_types++] = v;
        } else {
            rc = af_cli_fail("prices", "unknown option '%s' (see accelfit prices --help)",
                             argv[i]);
        }
    }
    if (rc)
        goto out;
    opt.region = region;
    opt.instance_types = n_types ? types : NULL;
    rc = af_aws_read(&opt, region, what, add_row, &rows, err, sizeof(err));
    if (rc == AF_EINVAL) {
        rc = af_cli_fail("prices", "%s (see accelfit prices --help)", err);
        goto out;
    }
    if (rc) {
        af_cli_fail("prices", "%s", err);
        rc = 1;
        goto out;
    }
    if (rows.n)
        qsort(rows.v, rows.n, sizeof(*rows.v), row_cmp);
    if (!region)
        region = getenv("AWS_REGION") && *getenv("AWS_REGION") ? getenv("AWS_REGION")
                                                              : getenv("AWS_DEFAULT_REGION");
    if (json)
        print_json(&rows, region);
    else
        print_table(&rows);
out:
    af_free(rows.v);
    af_free(types);
    return rc;
}
