/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Live AWS prices (accelfit/aws.h) against tests/aws/fake_aws.py, which checks the SigV4
 * signature of every Pricing and EC2 request as AWS does: static keys, IRSA and Pod
 * Identity credentials, their renewal before expiry and after an expired-token answer,
 * paging, throttling, malformed answers, hanging endpoints, the refresh thread, and
 * `accelfit prices` (including every `accelfit prices` command of docs/pricing.md).
 */
#include <check.h>
#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accelfit/aws.h"
#include "accelfit/config.h"
#include "accelfit/service.h"
#include "accelfit/prices.h"
#include "support/fake_api.h"
#include "support/fake_aws.h"
#include "support/http_client.h"
#include "support/support.h"

#include "aws/internal.h"

static struct af_test_fake_aws fake;
static bool have_fake;

static void setup(void)
{
    have_fake = af_test_fake_aws_start(&fake);
    if (!have_fake)
        fprintf(stderr, "SKIP: python3 or openssl missing; AWS tests skipped\n");
}

static void teardown(void)
{
    af_test_fake_aws_stop(&fake);
}

#define NEED_FAKE()                                                                         \
    do {                                                                                    \
        if (!have_fake)                                                                     \
            return;                                                                         \
    } while (0)

/* Fast retries, and a request timeout long enough for a loaded machine. */
static const struct af_aws_options quick = {.backoff_s = 0.01, .timeout_s = 60};

/* ---- what the fake saw ---------------------------------------------------------------------- */

static json_t *requests(void)
{
    return af_test_fake_aws_admin(&fake, "requests", NULL);
}

/* Requests to `service`, and how many of them the fake accepted. */
static size_t count(const char *service, size_t *ok)
{
    json_t *all = requests(), *r;
    size_t i, n = 0;

    if (ok)
        *ok = 0;
    json_array_foreach(all, i, r) {
        /* a request the fake could not place is logged with "service": null */
        const char *sv = json_string_value(json_object_get(r, "service"));
        if (!sv || strcmp(sv, service))
            continue;
        n++;
        if (ok && json_is_true(json_object_get(r, "ok")))
            (*ok)++;
    }
    json_decref(all);
    return n;
}

/* Every signed request the fake saw was accepted (its signature checked out). */
static void assert_all_signed_ok(void)
{
    json_t *all = requests(), *r;
    size_t i;

    json_array_foreach(all, i, r) {
        const char *svc = json_string_value(json_object_get(r, "service"));
        if (strcmp(svc, "pricing") && strcmp(svc, "ec2"))
            continue;
        ck_assert_msg(json_is_true(json_object_get(r, "ok")) ||
                          strstr(json_string_value(json_object_get(r, "error")), "Signature") ==
                              NULL,
                      "request %zu refused: %s", i,
                      json_string_value(json_object_get(r, "error")));
    }
    json_decref(all);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static struct af_prices *read_book(const struct af_aws_options *o, unsigned what, char *err,
                                   size_t len, int *rc)
{
    struct af_prices *p = NULL;

    *rc = af_aws_read_book(&p, o, NULL, what, err, len);
    return p;
}

static void assert_price(const struct af_prices *p, enum af_price_kind k, const char *where,
                         const char *type, double want)
{
    double usd = 0;

    ck_assert_msg(af_prices_get(p, k, where, type, &usd, NULL), "no price for %s in %s", type,
                  where);
    ck_assert_double_eq_tol(usd, want, 1e-9);
}

/* ---- static keys: both reads, paged, signed ------------------------------------------------- */

START_TEST(test_aws_static_keys_read_on_demand_and_spot_paged)
{
    struct af_prices *p;
    char err[512] = "";
    size_t ok, n;
    int rc;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    p = read_book(&quick, AF_AWS_ON_DEMAND | AF_AWS_SPOT, err, sizeof(err), &rc);
    ck_assert_msg(rc == 0, "%s", err);
    assert_price(p, AF_PRICE_ON_DEMAND, "eu-west-1", "g5.xlarge", 1.123);
    assert_price(p, AF_PRICE_ON_DEMAND, "eu-west-1", "p4d.24xlarge", 35.39);
    /* The newest of two spot prices for one zone and type. */
    assert_price(p, AF_PRICE_SPOT, "eu-west-1a", "g5.xlarge", 0.4321);
    assert_price(p, AF_PRICE_SPOT, "eu-west-1b", "p4d.24xlarge", 12.1);
    ck_assert_uint_eq(af_prices_count(p), 5 + 4);
    /* Five products two a page, five spot items two a page: three pages each. */
    n = count("pricing", &ok);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(ok, 3);
    n = count("ec2", &ok);
    ck_assert_uint_eq(n, 3);
    ck_assert_uint_eq(ok, 3);
    af_prices_unref(p);
}
END_TEST

START_TEST(test_aws_get_products_sends_karpenters_filters)
{
    json_t *all, *f;
    char err[512] = "";
    struct af_prices *p;
    int rc;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    p = read_book(&(struct af_aws_options){.region = "us-east-1", .timeout_s = 60},
                  AF_AWS_ON_DEMAND, err, sizeof(err), &rc);
    ck_assert_msg(rc == 0, "%s", err);
    assert_price(p, AF_PRICE_ON_DEMAND, "us-east-1", "m5.large", 0.096);
    all = requests();
    f = json_object_get(json_array_get(all, 0), "filters");
    ck_assert_str_eq(json_string_value(json_object_get(f, "regionCode")), "us-east-1");
    ck_assert_str_eq(json_string_value(json_object_get(f, "tenancy")), "Shared");
    ck_assert_str_eq(json_string_value(json_object_get(f, "operatingSystem")), "Linux");
    ck_assert_str_eq(json_string_value(json_object_get(f, "preInstalledSw")), "NA");
    ck_assert_str_eq(json_string_value(json_object_get(f, "capacitystatus")), "Used");
    ck_assert_str_eq(json_string_value(json_object_get(f, "productFamily")), "Compute Instance");
    json_decref(all);
    af_prices_unref(p);
}
END_TEST

static const struct sig_case {
    unsigned what;
    const char *want;
} sig_cases[] = {
    {AF_AWS_ON_DEMAND, "pricing GetProducts eu-west-1: InvalidSignatureException: The request "
                       "signature we calculated does not match"},
    {AF_AWS_SPOT, "ec2 DescribeSpotPriceHistory eu-west-1: SignatureDoesNotMatch: The request "
                  "signature we calculated does not match"},
};

START_TEST(test_aws_wrong_secret_is_refused_with_awss_message)
{
    const struct sig_case *c = &sig_cases[_i];
    char err[512] = "";
    int rc;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    setenv("AWS_SECRET_ACCESS_KEY", "not/the+secret", 1);
    ck_assert_ptr_null(read_book(&quick, c->what, err, sizeof(err), &rc));
    ck_assert_int_eq(rc, AF_EUNAUTH);
    ck_assert_msg(strstr(err, c->want) && strstr(err, "(HTTP 403)"), "%s", err);
}
END_TEST

START_TEST(test_aws_no_credentials_says_what_to_set)
{
    char err[512] = "";
    int rc;

    NEED_FAKE();
    ck_assert_ptr_null(read_book(&quick, AF_AWS_ON_DEMAND, err, sizeof(err), &rc));
    ck_assert_int_eq(rc, AF_EUNAUTH);
    ck_assert_msg(strstr(err, "no AWS credentials: set AWS_ROLE_ARN"), "%s", err);
    ck_assert_uint_eq(count("pricing", NULL), 0);
}
END_TEST

/*
 * A workstation's credentials, as the AWS SDKs find them: profile AWS_PROFILE (else
 * default) of AWS_SHARED_CREDENTIALS_FILE (else ~/.aws/credentials), then of the config
 * file ([profile NAME]); a profile that only runs credential_process says so.
 */
START_TEST(test_aws_shared_credentials_file_and_profiles)
{
    char *creds = af_test_temp_path("credentials"), *config = af_test_temp_path("config");
    struct af_prices *p;
    char err[600] = "";
    int rc;

    NEED_FAKE();
    af_test_fake_aws_do(&fake, "credentials", "{\"akid\": \"AKIAFAKESTATIC\", \"secret\": "
                                              "\"static/secret+key\"}");
    write_file(creds, "[default]\naws_access_key_id = AKIAWRONG\naws_secret_access_key = no\n"
                      "\n# the one in use\n[work]\naws_access_key_id = AKIAFAKESTATIC\n"
                      "aws_secret_access_key = static/secret+key\n");
    setenv("AWS_SHARED_CREDENTIALS_FILE", creds, 1);
    setenv("AWS_PROFILE", "work", 1);
    p = read_book(&quick, AF_AWS_ON_DEMAND, err, sizeof(err), &rc);
    ck_assert_msg(rc == 0, "%s", err);
    assert_price(p, AF_PRICE_ON_DEMAND, "eu-west-1", "g5.xlarge", 1.123);
    af_prices_unref(p);

    /* the config file's [profile NAME] holds keys too */
    write_file(config, "[profile ci]\nregion = eu-west-1\naws_access_key_id = AKIAFAKESTATIC\n"
                       "aws_secret_access_key = static/secret+key\n"
                       "[profile sso]\ncredential_process = /usr/bin/fetch-creds\n");
    setenv("AWS_CONFIG_FILE", config, 1);
    setenv("AWS_PROFILE", "ci", 1);
    p = read_book(&quick, AF_AWS_ON_DEMAND, err, sizeof(err), &rc);
    ck_assert_msg(rc == 0, "%s", err);
    af_prices_unref(p);

    setenv("AWS_PROFILE", "sso", 1);
    ck_assert_ptr_null(read_book(&quick, AF_AWS_ON_DEMAND, err, sizeof(err), &rc));
    ck_assert_int_eq(rc, AF_EUNAUTH);
    ck_assert_msg(strstr(err, "profile sso uses credential_process, which accelfit does not run"),
                  "%s", err);
    unsetenv("AWS_PROFILE");
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials", 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config", 1);
    af_free(creds);
    af_free(config);
}
END_TEST

/* No credentials at all fails both reads alike: accelfit costs says it once. */
START_TEST(test_costs_without_credentials_says_so_once)
{
    const char *argv[] = {"accelfit", "costs", "--demo", "--aws-pricing", NULL};
    char *out = NULL, *err = NULL, *first;

    NEED_FAKE();
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    first = strstr(err, "no AWS credentials");
    ck_assert_msg(first && !strstr(first + 1, "no AWS credentials"), "%s", err);
    af_free(out);
    af_free(err);
}
END_TEST

START_TEST(test_aws_service_endpoint_variable_wins)
{
    char err[512] = "";
    struct af_prices *p;
    int rc;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    setenv("AWS_ENDPOINT_URL_PRICING", fake.url, 1);
    setenv("AWS_ENDPOINT_URL", "https://127.0.0.1:1", 1);
    p = read_book(&quick, AF_AWS_ON_DEMAND, err, sizeof(err), &rc);
    ck_assert_msg(rc == 0, "%s", err);
    af_prices_unref(p);
    ck_assert_ptr_null(read_book(&quick, AF_AWS_SPOT, err, sizeof(err), &rc));
    ck_assert_int_eq(rc, AF_ECONN);
    ck_assert_msg(strstr(err, "ec2 DescribeSpotPriceHistory eu-west-1: cannot reach "
                              "https://127.0.0.1:1/"),
                  "%s", err);
}
END_TEST

/* ---- IRSA and Pod Identity ------------------------------------------------------------------ */

/* IRSA with a token file holding `token` and a line break, as the kubelet writes it. */
static void irsa(const char *token)
{
    char *path = af_xasprintf("%s/web-identity-token", fake.dir);
    char *text = af_xasprintf("%s\n", token);

    write_file(path, text);
    af_free(text);
    af_test_fake_aws_do(&fake, "web_token", "{\"token\": \"%s\", \"role_arn\": "
                                            "\"arn:aws:iam::123456789012:role/accelfit\"}",
                        token);
    setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/accelfit", 1);
    setenv("AWS_WEB_IDENTITY_TOKEN_FILE", path, 1);
    af_free(path);
}

/* The STS exchanges and the signed requests, each signed with the key issued last. */
START_TEST(test_aws_irsa_exchanges_token_and_signs_with_session_token)
{
    json_t *all, *r;
    const char *issued = NULL;
    struct af_prices *p;
    char err[512] = "";
    size_t i, sts = 0, ok;
    int rc;

    NEED_FAKE();
    irsa("eyJhbGciOiJSUzI1NiJ9.first");
    setenv("AWS_ROLE_SESSION_NAME", "accelfit-test", 1);
    p = read_book(&quick, AF_AWS_ON_DEMAND | AF_AWS_SPOT, err, sizeof(err), &rc);
    ck_assert_msg(rc == 0, "%s", err);
    assert_price(p, AF_PRICE_SPOT, "eu-west-1b", "g5.xlarge", 0.441);
    all = requests();
    json_array_foreach(all, i, r) {
        const char *svc = json_string_value(json_object_get(r, "service"));
        if (!strcmp(svc, "sts")) {
            sts++;
            issued = json_string_value(json_object_get(r, "issued"));
            /* The token file's text without its line break, unsigned. */
            ck_assert_str_eq(json_string_value(json_object_get(r, "web_token")),
                             "eyJhbGciOiJSUzI1NiJ9.first");
            ck_assert_str_eq(json_string_value(json_object_get(r, "session_name")),
                             "accelfit-test");
            ck_assert(json_is_null(json_object_get(r, "authorization")));
        } else {
            ck_assert_ptr_nonnull(issued);
            ck_assert_str_eq(json_string_value(json_object_get(r, "akid")), issued);
            ck_assert_ptr_nonnull(json_string_value(json_object_get(r, "token")));
        }
    }
    json_decref(all);
    /* Credentials valid for an hour serve every request. */
    ck_assert_uint_eq(sts, 1);
    count("pricing", &ok);
    ck_assert_uint_eq(ok, 3);
    count("ec2", &ok);
    ck_assert_uint_eq(ok, 3);
    af_prices_unref(p);
}
END_TEST

START_TEST(test_aws_credentials_renewed_before_expiry)
{
    struct af_prices *p;
    char err[512] = "";
    size_t ok;
    int rc;

    NEED_FAKE();
    irsa("token-a");
    /* Issued for 200 s, renewed 300 s before they expire: before every request. */
    af_test_fake_aws_do(&fake, "duration", "{\"seconds\": 200}");
    p = read_book(&quick, AF_AWS_ON_DEMAND, err, sizeof(err), &rc);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_uint_eq(count("sts", NULL), 3);
    ck_assert_uint_eq(count("pricing", &ok), 3);
    ck_assert_uint_eq(ok, 3);
    af_prices_unref(p);
    /* With a margin below their life they last. */
    af_test_fake_aws_do(&fake, "clear", NULL);
    p = read_book(&(struct af_aws_options){.credentials_margin_s = 100, .timeout_s = 60},
                  AF_AWS_ON_DEMAND, err, sizeof(err), &rc);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_uint_eq(count("sts", NULL), 1);
    af_prices_unref(p);
}
END_TEST

START_TEST(test_aws_irsa_bad_token_gives_sts_error)
{
    char err[512] = "";
    int rc;

    NEED_FAKE();
    irsa("good");
    write_file(getenv("AWS_WEB_IDENTITY_TOKEN_FILE"), "stale");
    ck_assert_ptr_null(read_book(&quick, AF_AWS_ON_DEMAND, err, sizeof(err), &rc));
    ck_assert_msg(strstr(err, "sts AssumeRoleWithWebIdentity eu-west-1: InvalidIdentityToken: "
                              "The web identity token that was passed could not be validated"),
                  "%s", err);
    ck_assert_uint_eq(count("pricing", NULL), 0);
    setenv("AWS_WEB_IDENTITY_TOKEN_FILE", "/nonexistent/token", 1);
    ck_assert_ptr_null(read_book(&quick, AF_AWS_ON_DEMAND, err, sizeof(err), &rc));
    ck_assert_msg(strstr(err, "cannot read token file '/nonexistent/token'"), "%s", err);
}
END_TEST

START_TEST(test_aws_pod_identity_sends_token_file_and_signs)
{
    char *uri = af_xasprintf("%s/v1/credentials", fake.url);
    char *path = af_xasprintf("%s/eks-pod-identity-token", fake.dir);
    json_t *all, *r;
    struct af_prices *p;
    char err[512] = "";
    size_t i, pods = 0;
    int rc;

    NEED_FAKE();
    write_file(path, "pod-identity-jwt");
    af_test_fake_aws_do(&fake, "pod_token", "{\"token\": \"pod-identity-jwt\"}");
    setenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", uri, 1);
    setenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", path, 1);
    p = read_book(&quick, AF_AWS_ON_DEMAND | AF_AWS_SPOT, err, sizeof(err), &rc);
    ck_assert_msg(rc == 0, "%s", err);
    assert_price(p, AF_PRICE_ON_DEMAND, "eu-west-1", "inf2.xlarge", 0.8484);
    all = requests();
    json_array_foreach(all, i, r) {
        if (!strcmp(json_string_value(json_object_get(r, "service")), "pod")) {
            pods++;
            ck_assert_str_eq(json_string_value(json_object_get(r, "pod_token")),
                             "pod-identity-jwt");
        } else {
            ck_assert(json_is_true(json_object_get(r, "ok")));
            ck_assert_ptr_nonnull(json_string_value(json_object_get(r, "token")));
        }
    }
    ck_assert_uint_eq(pods, 1);
    json_decref(all);
    af_prices_unref(p);
    /* A token the agent refuses. */
    write_file(path, "someone-else");
    ck_assert_ptr_null(read_book(&quick, AF_AWS_ON_DEMAND, err, sizeof(err), &rc));
    ck_assert_msg(strstr(err, "eks pod identity credentials: AccessDeniedException: invalid "
                              "authorization token (HTTP 401)"),
                  "%s", err);
    af_free(uri);
    af_free(path);
}
END_TEST

/* ---- throttling, malformed answers, hangs ------------------------------------------------- */

START_TEST(test_aws_throttled_then_succeeds)
{
    struct af_prices *p;
    char err[512] = "";
    size_t ok;
    int rc;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    af_test_fake_aws_do(&fake, "fault", "{\"kind\": \"throttle\", \"service\": \"pricing\", "
                                        "\"count\": 2}");
    af_test_fake_aws_do(&fake, "fault", "{\"kind\": \"throttle\", \"service\": \"ec2\", "
                                        "\"count\": 2}");
    p = read_book(&quick, AF_AWS_ON_DEMAND | AF_AWS_SPOT, err, sizeof(err), &rc);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_uint_eq(count("pricing", &ok), 5);
    ck_assert_uint_eq(ok, 3);
    ck_assert_uint_eq(count("ec2", &ok), 5);
    ck_assert_uint_eq(ok, 3);
    af_prices_unref(p);
}
END_TEST

START_TEST(test_aws_throttled_too_often_names_the_error)
{
    struct af_aws_options o = quick;
    char err[512] = "";
    int rc;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    o.max_retries = 2;
    af_test_fake_aws_do(&fake, "fault", "{\"kind\": \"throttle\", \"service\": \"pricing\", "
                                        "\"count\": 10}");
    ck_assert_ptr_null(read_book(&o, AF_AWS_ON_DEMAND, err, sizeof(err), &rc));
    ck_assert_str_eq(err, "pricing GetProducts eu-west-1: ThrottlingException: Rate exceeded "
                          "(HTTP 400)");
    ck_assert_uint_eq(count("pricing", NULL), 3);
}
END_TEST

static const struct malformed_case {
    const char *service;
    unsigned what;
    const char *want;
} malformed_cases[] = {
    {"pricing", AF_AWS_ON_DEMAND,
     "pricing GetProducts eu-west-1: PriceList[0] is not a price document"},
    {"ec2", AF_AWS_SPOT, "ec2 DescribeSpotPriceHistory eu-west-1: not XML: "},
    {"pricing", AF_AWS_ON_DEMAND, "pricing GetProducts eu-west-1: InvalidParameterException: "
                                  "injected (HTTP 400)"},
    {"ec2", AF_AWS_SPOT, "ec2 DescribeSpotPriceHistory eu-west-1: InvalidParameterValue: "
                         "injected (HTTP 400)"},
};

START_TEST(test_aws_malformed_or_error_answer_gives_clear_error)
{
    const struct malformed_case *c = &malformed_cases[_i];
    char err[512] = "";
    int rc;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    if (_i < 2)
        af_test_fake_aws_do(&fake, "fault", "{\"kind\": \"malformed\", \"service\": \"%s\"}",
                            c->service);
    else
        af_test_fake_aws_do(&fake, "fault", "{\"kind\": \"error\", \"service\": \"%s\", "
                                            "\"status\": 400, \"code\": \"%s\"}",
                            c->service,
                            _i == 2 ? "InvalidParameterException" : "InvalidParameterValue");
    ck_assert_ptr_null(read_book(&quick, c->what, err, sizeof(err), &rc));
    ck_assert_msg(!strncmp(err, c->want, strlen(c->want)), "%s", err);
}
END_TEST

START_TEST(test_aws_hanging_endpoint_times_out)
{
    struct af_aws_options o = quick;
    char err[512] = "";
    int rc;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    o.timeout_s = 1;
    af_test_fake_aws_do(&fake, "fault", "{\"kind\": \"hang\", \"service\": \"ec2\"}");
    ck_assert_ptr_null(read_book(&o, AF_AWS_SPOT, err, sizeof(err), &rc));
    ck_assert_int_eq(rc, AF_ECONN);
    ck_assert_msg(strstr(err, "ec2 DescribeSpotPriceHistory eu-west-1: no answer from "
                              "https://127.0.0.1:") &&
                      strstr(err, "within 1 s"),
                  "%s", err);
    af_test_fake_aws_do(&fake, "release", NULL);
}
END_TEST

/* ---- hostile answers: bounded in memory and time (docs/pricing.md, "Bounds") -------------- */

struct xml_seen {
    int calls, bad_paths;
};

static void xml_count(void *ud, const char *path, const char *text)
{
    struct xml_seen *x = ud;

    (void)text;
    x->calls++;
    x->bad_paths += path[0] != '/';
}

/* The XML reader refuses an element past its depth or path limit without pushing it, and so
 * never pops it either: the callback never sees an empty path. */
START_TEST(test_aws_xml_reader_never_pops_an_element_it_refused)
{
    struct af_buf doc = AF_BUF_INIT(0);
    struct xml_seen x = {0};
    char err[256] = "";

    /* an empty root element whose name alone is longer than the path limit */
    af_assert(af_buf_add(&doc, "<", 1) == 0);
    for (int i = 0; i < 600; i++)
        af_assert(af_buf_add(&doc, "a", 1) == 0);
    af_assert(af_buf_add(&doc, "/>", 2) == 0);
    ck_assert_int_eq(af__xml_parse(doc.buf, doc.len, xml_count, &x, err, sizeof(err)),
                     AF_EPARSE);
    ck_assert_msg(strstr(err, "element path too long"), "%s", err);
    ck_assert_int_eq(x.bad_paths, 0);
    ck_assert_int_eq(x.calls, 0);
    /* an empty element one level deeper than the depth limit */
    af_buf_reset(&doc);
    for (int i = 0; i < 32; i++)
        af_assert(af_buf_add(&doc, "<a>", 3) == 0);
    af_assert(af_buf_add(&doc, "<b/>", 4) == 0);
    for (int i = 0; i < 32; i++)
        af_assert(af_buf_add(&doc, "</a>", 4) == 0);
    x = (struct xml_seen){0};
    ck_assert_int_eq(af__xml_parse(doc.buf, doc.len, xml_count, &x, err, sizeof(err)),
                     AF_EPARSE);
    ck_assert_msg(strstr(err, "nested too deep"), "%s", err);
    ck_assert_int_eq(x.bad_paths, 0);
    ck_assert_int_eq(x.calls, 0);
    af_buf_release(&doc);
}
END_TEST

struct endless_case {
    const char *service;
    unsigned what;
    const char *body;
};

static const struct endless_case endless_cases[] = {
    {"pricing", AF_AWS_ON_DEMAND, "{\"FormatVersion\":\"aws_v1\",\"PriceList\":[],"
                                  "\"NextToken\":\"again\"}"},
    {"ec2", AF_AWS_SPOT, "<DescribeSpotPriceHistoryResponse><spotPriceHistorySet/>"
                         "<nextToken>again</nextToken></DescribeSpotPriceHistoryResponse>"},
};

/* An endpoint whose every page names a next one: the read stops at the page cap and fails;
 * what it read is not taken as complete. */
START_TEST(test_aws_endless_next_token_fails_at_the_page_cap)
{
    const struct endless_case *c = &endless_cases[_i];
    json_t *head = json_string(c->body);
    char err[512] = "", *body = json_dumps(head, JSON_ENCODE_ANY);
    size_t n;
    int rc;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    af_test_fake_aws_do(&fake, "fault",
                        "{\"kind\": \"raw\", \"service\": \"%s\", \"count\": 100000, "
                        "\"content_type\": \"%s\", \"head\": %s}",
                        c->service, _i == 0 ? "application/x-amz-json-1.1" : "text/xml", body);
    ck_assert_ptr_null(read_book(&quick, c->what, err, sizeof(err), &rc));
    ck_assert_int_eq(rc, AF_ETOOBIG);
    ck_assert_msg(strstr(err, "more than 100 pages"), "%s", err);
    n = count(c->service, NULL);
    ck_assert_uint_eq(n, 100);
    free(body);
    json_decref(head);
}
END_TEST

/* A slow endpoint that never stops paging: the read ends at its deadline (five page
 * timeouts), long before the page cap. */
START_TEST(test_aws_read_has_a_deadline)
{
    struct af_aws_options o = quick;
    char err[512] = "";
    size_t n;
    int rc;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    o.timeout_s = 2;
    af_test_fake_aws_do(&fake, "fault",
                        "{\"kind\": \"raw\", \"service\": \"ec2\", \"count\": 100000, "
                        "\"delay\": 0.3, \"head\": \"<DescribeSpotPriceHistoryResponse>"
                        "<spotPriceHistorySet/><nextToken>again</nextToken>"
                        "</DescribeSpotPriceHistoryResponse>\"}");
    ck_assert_ptr_null(read_book(&o, AF_AWS_SPOT, err, sizeof(err), &rc));
    /* on a machine too slow to answer one page within 2 s, the page timeout ends it first */
    ck_assert_msg((rc == AF_ETIMEDOUT && strstr(err, "not finished within 10 s")) ||
                      rc == AF_ECONN,
                  "%d %s", rc, err);
    n = count("ec2", NULL);
    ck_assert_uint_lt(n, 100);
}
END_TEST

/* One page with more (zone, type) pairs than any region has: refused, not kept. And the same
 * pair a great many times is kept once (the newest). */
START_TEST(test_aws_spot_items_bounded_and_deduplicated)
{
    struct af_prices *p;
    struct af_buf items = AF_BUF_INIT(0);
    char err[512] = "", *body;
    int rc;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    for (int i = 0; i <= AF__AWS_MAX_SPOT_PAIRS; i++)
        af_assert(af_buf_printf(&items, "<item><availabilityZone>eu-west-1a</availabilityZone>"
                                        "<instanceType>t%d.x</instanceType><spotPrice>0.5"
                                        "</spotPrice><timestamp>2026-01-01T00:00:00.000Z"
                                        "</timestamp></item>",
                                i) == 0);
    body = af_xasprintf("{\"kind\": \"raw\", \"service\": \"ec2\", \"head\": "
                        "\"<DescribeSpotPriceHistoryResponse><spotPriceHistorySet>%s"
                        "</spotPriceHistorySet><nextToken/></DescribeSpotPriceHistoryResponse>\"}",
                        items.buf);
    af_test_fake_aws_do(&fake, "fault", "%s", body);
    ck_assert_ptr_null(read_book(&quick, AF_AWS_SPOT, err, sizeof(err), &rc));
    ck_assert_int_eq(rc, AF_ETOOBIG);
    ck_assert_msg(strstr(err, "more than 20000 zone and instance type pairs"), "%s", err);
    af_free(body);
    af_buf_release(&items);

    /* 50,000 items of one pair over two pages: one price, the newest */
    af_test_fake_aws_do(&fake, "fault",
                        "{\"kind\": \"raw\", \"service\": \"ec2\", \"count\": 1, \"head\": "
                        "\"<DescribeSpotPriceHistoryResponse><spotPriceHistorySet>\", \"item\": "
                        "\"<item><availabilityZone>eu-west-1a</availabilityZone><instanceType>"
                        "g5.xlarge</instanceType><spotPrice>0.5</spotPrice><timestamp>"
                        "2026-01-01T00:00:00.000Z</timestamp></item>\", \"repeat\": 25000, "
                        "\"tail\": \"<item><availabilityZone>eu-west-1a</availabilityZone>"
                        "<instanceType>g5.xlarge</instanceType><spotPrice>0.7</spotPrice>"
                        "<timestamp>2026-01-02T00:00:00.000Z</timestamp></item>"
                        "</spotPriceHistorySet><nextToken>2</nextToken>"
                        "</DescribeSpotPriceHistoryResponse>\"}");
    af_test_fake_aws_do(&fake, "fault",
                        "{\"kind\": \"raw\", \"service\": \"ec2\", \"count\": 1, \"head\": "
                        "\"<DescribeSpotPriceHistoryResponse><spotPriceHistorySet>\", \"item\": "
                        "\"<item><availabilityZone>eu-west-1a</availabilityZone><instanceType>"
                        "g5.xlarge</instanceType><spotPrice>0.5</spotPrice><timestamp>"
                        "2026-01-01T00:00:00.000Z</timestamp></item>\", \"repeat\": 25000, "
                        "\"tail\": \"</spotPriceHistorySet><nextToken/>"
                        "</DescribeSpotPriceHistoryResponse>\"}");
    p = read_book(&quick, AF_AWS_SPOT, err, sizeof(err), &rc);
    ck_assert_msg(rc == 0, "%s", err);
    ck_assert_uint_eq(af_prices_count(p), 1);
    assert_price(p, AF_PRICE_SPOT, "eu-west-1a", "g5.xlarge", 0.7);
    af_prices_unref(p);
}
END_TEST

/* ---- the refresh thread -------------------------------------------------------------------- */

struct watch {
    pthread_mutex_t lock;
    char regions[4][32];
    size_t n_regions;
    int updates;
};

static size_t regions_of(void *ud, char (*out)[32], size_t max)
{
    struct watch *w = ud;
    size_t n;

    pthread_mutex_lock(&w->lock);
    for (n = 0; n < w->n_regions && n < max; n++)
        memcpy(out[n], w->regions[n], 32);
    pthread_mutex_unlock(&w->lock);
    return n;
}

static void updated(void *ud, struct af_prices *book)
{
    struct watch *w = ud;

    ck_assert_ptr_nonnull(book);
    pthread_mutex_lock(&w->lock);
    w->updates++;
    pthread_mutex_unlock(&w->lock);
}

static bool has_price(struct af_prices_holder *h, enum af_price_kind k, const char *where,
                      const char *type, double *usd)
{
    struct af_prices *p = af_prices_holder_get(h);
    bool ok = af_prices_get(p, k, where, type, usd, NULL);

    af_prices_unref(p);
    return ok;
}

/* The source record of (kind, region) in the holder's book. */
static void updated_quiet(void *ud, struct af_prices *book)
{
    (void)ud;
    ck_assert_ptr_nonnull(book);
}

static bool source(struct af_prices_holder *h, enum af_price_kind k, const char *region,
                   struct af_price_source *out)
{
    struct af_prices *p = af_prices_holder_get(h);
    const struct af_price_source *s;
    size_t n;
    bool found = false;

    s = af_prices_sources(p, &n);
    for (size_t i = 0; i < n; i++)
        if (s[i].kind == k && !strcmp(s[i].region, region)) {
            *out = s[i];
            found = true;
        }
    af_prices_unref(p);
    return found;
}

static bool spot_error(struct af_prices_holder *h, const char *text)
{
    struct af_price_source s;

    return source(h, AF_PRICE_SPOT, "eu-west-1", &s) && strstr(s.error, text);
}

static bool spot_read_after(struct af_prices_holder *h, double t)
{
    struct af_price_source s;

    return source(h, AF_PRICE_SPOT, "eu-west-1", &s) && s.read_at > t && !s.error[0];
}

/* DescribeCapacityReservations as EC2 answers it (tests/fixtures/aws): the active
 * reservation's type, zone, kind and end; a reservation without an id is refused. */
START_TEST(test_aws_reservations_page)
{
    size_t len = 0, n = 0;
    char *doc = af_test_read("tests/fixtures/aws/describe-capacity-reservations-response.xml",
                             &len);
    struct af_prices *book = af_prices_new();
    const struct af_reservation *r;
    char err[256], *next = NULL;

    ck_assert_int_eq(af__aws_reservations_page("ec2 t", doc, len, "us-east-1", book, &n, &next,
                                               err, sizeof(err)),
                     0);
    ck_assert_uint_eq(n, 1);
    ck_assert_ptr_null(next);
    r = af_prices_reservation(book, "cr-1234abcd56EXAMPLE");
    ck_assert_ptr_nonnull(r);
    ck_assert(r->block);
    ck_assert_str_eq(r->zone, "us-east-1a");
    ck_assert_str_eq(r->instance_type, "p5.48xlarge");
    ck_assert_str_eq(r->region, "us-east-1");
    ck_assert_double_eq(r->end, af_parse_rfc3339("2026-11-29T11:30:00Z"));
    ck_assert_ptr_eq(af_prices_reservation_in(book, "us-east-1a", "p5.48xlarge"), r);
    ck_assert_ptr_null(af_prices_reservation_in(book, "us-east-1b", "p5.48xlarge"));
    af_free(doc);
    {
        static const char bad[] =
            "<DescribeCapacityReservationsResponse><capacityReservationSet><item>"
            "<state>active</state><availabilityZone>us-east-1a</availabilityZone></item>"
            "</capacityReservationSet></DescribeCapacityReservationsResponse>";
        ck_assert_int_eq(af__aws_reservations_page("ec2 t", bad, strlen(bad), "us-east-1", book,
                                                   &n, &next, err, sizeof(err)),
                         AF_EPARSE);
        ck_assert_msg(strstr(err, "ec2 t: a reservation without an id or zone"), "%s", err);
    }
    af_prices_unref(book);
}
END_TEST

START_TEST(test_aws_refresh_keeps_last_prices_when_a_read_fails)
{
    struct af_aws_options o = quick;
    struct watch w = {PTHREAD_MUTEX_INITIALIZER, {{0}}, 0, 0};
    struct af_prices_holder h;
    struct af_aws_pricing *ap;
    struct af_price_source od, sp;
    double usd = 0;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    af_prices_holder_init(&h);
    o.spot_refresh_s = 0.2;
    o.retry_s = 0.2;
    ck_assert_int_eq(af_aws_pricing_start(&ap, &o, &h, regions_of, &w, updated, &w), 0);
    ck_assert(AF_TEST_WAIT_FOR(60, has_price(&h, AF_PRICE_SPOT, "eu-west-1a", "g5.xlarge", &usd)
                                       && has_price(&h, AF_PRICE_ON_DEMAND, "eu-west-1",
                                                    "g5.xlarge", &usd)));
    ck_assert(source(&h, AF_PRICE_ON_DEMAND, "eu-west-1", &od));
    ck_assert_uint_eq(od.n_prices, 5);
    ck_assert_str_eq(od.error, "");
    /* Every spot read from here on gets a broken answer. */
    af_test_fake_aws_do(&fake, "fault", "{\"kind\": \"malformed\", \"service\": \"ec2\", "
                                        "\"count\": 1000000}");
    ck_assert(AF_TEST_WAIT_FOR(60, spot_error(&h, "ec2 DescribeSpotPriceHistory eu-west-1: not")));
    ck_assert(has_price(&h, AF_PRICE_SPOT, "eu-west-1a", "g5.xlarge", &usd));
    ck_assert_double_eq_tol(usd, 0.4321, 1e-9);
    ck_assert(source(&h, AF_PRICE_SPOT, "eu-west-1", &sp));
    ck_assert(sp.read_at > 0 && sp.tried_at > sp.read_at);
    ck_assert_uint_eq(sp.n_prices, 4);
    /* New prices once AWS answers again. */
    af_test_fake_aws_do(&fake, "clear", NULL);
    af_test_fake_aws_do(&fake, "spot", "{\"region\": \"eu-west-1\", \"items\": [{\"zone\": "
                                       "\"eu-west-1a\", \"type\": \"g5.xlarge\", \"price\": "
                                       "\"0.61\", \"ago\": 5}]}");
    ck_assert(AF_TEST_WAIT_FOR(60, spot_read_after(&h, sp.tried_at)));
    ck_assert(has_price(&h, AF_PRICE_SPOT, "eu-west-1a", "g5.xlarge", &usd));
    ck_assert_double_eq_tol(usd, 0.61, 1e-9);
    ck_assert(!has_price(&h, AF_PRICE_SPOT, "eu-west-1b", "g5.xlarge", &usd));
    ck_assert(has_price(&h, AF_PRICE_ON_DEMAND, "eu-west-1", "g5.xlarge", &usd));
    af_aws_pricing_stop(ap);
    pthread_mutex_lock(&w.lock);
    ck_assert_int_ge(w.updates, 3);
    pthread_mutex_unlock(&w.lock);
    af_prices_holder_destroy(&h);
}
END_TEST

static bool rereads_done(void)
{
    json_t *all = requests(), *r;
    bool renewed = false, expired = false, ok_after = false;
    size_t i;

    json_array_foreach(all, i, r) {
        const char *svc = json_string_value(json_object_get(r, "service"));
        const char *e = json_string_value(json_object_get(r, "error"));
        if (!strcmp(svc, "ec2") && e && strstr(e, "ExpiredToken"))
            expired = true;
        else if (expired && !strcmp(svc, "sts") &&
                 !strcmp(json_string_value(json_object_get(r, "web_token")), "token-2"))
            renewed = true;
        else if (renewed && !strcmp(svc, "ec2") && json_is_true(json_object_get(r, "ok")))
            ok_after = true;
    }
    json_decref(all);
    return ok_after;
}

START_TEST(test_aws_expired_token_renews_with_rotated_token_file)
{
    struct af_aws_options o = quick;
    struct af_prices_holder h;
    struct af_aws_pricing *ap;
    struct af_price_source sp;
    double usd;

    NEED_FAKE();
    irsa("token-1");
    af_prices_holder_init(&h);
    o.spot_refresh_s = 0.2;
    ck_assert_int_eq(af_aws_pricing_start(&ap, &o, &h, NULL, NULL, NULL, NULL), 0);
    ck_assert(AF_TEST_WAIT_FOR(60, has_price(&h, AF_PRICE_SPOT, "eu-west-1a", "g5.xlarge", &usd)));
    /* The kubelet rotates the token; AWS says the credentials have expired. */
    irsa("token-2");
    af_test_fake_aws_do(&fake, "expire_credentials", NULL);
    ck_assert(AF_TEST_WAIT_FOR(60, rereads_done()));
    af_aws_pricing_stop(ap);
    /* No read failed: the expired answer was retried once with new credentials. */
    ck_assert(source(&h, AF_PRICE_SPOT, "eu-west-1", &sp));
    ck_assert_str_eq(sp.error, "");
    assert_all_signed_ok();
    af_prices_holder_destroy(&h);
}
END_TEST

START_TEST(test_aws_new_region_read_when_kicked)
{
    struct watch w = {PTHREAD_MUTEX_INITIALIZER, {"eu-west-1"}, 1, 0};
    struct af_aws_options o = quick;
    struct af_prices_holder h;
    struct af_aws_pricing *ap;
    double usd;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    af_prices_holder_init(&h);
    ck_assert_int_eq(af_aws_pricing_start(&ap, &o, &h, regions_of, &w, updated, &w), 0);
    ck_assert(AF_TEST_WAIT_FOR(60, has_price(&h, AF_PRICE_ON_DEMAND, "eu-west-1", "m5.large",
                                             &usd)));
    pthread_mutex_lock(&w.lock);
    snprintf(w.regions[1], sizeof(w.regions[1]), "us-east-1");
    w.n_regions = 2;
    pthread_mutex_unlock(&w.lock);
    af_aws_pricing_kick(ap);
    /* Read at once, not at the next minute's look at the regions. */
    ck_assert(AF_TEST_WAIT_FOR(30, has_price(&h, AF_PRICE_ON_DEMAND, "us-east-1", "m5.large",
                                             &usd)));
    ck_assert_double_eq_tol(usd, 0.096, 1e-9);
    ck_assert(has_price(&h, AF_PRICE_ON_DEMAND, "eu-west-1", "m5.large", &usd));
    af_aws_pricing_stop(ap);
    af_prices_holder_destroy(&h);
}
END_TEST

static bool fake_saw_hang(void)
{
    json_t *all = requests(), *r;
    bool hung = false;
    size_t i;

    json_array_foreach(all, i, r) {
        const char *e = json_string_value(json_object_get(r, "error"));
        hung |= e && !strcmp(e, "hang");
    }
    json_decref(all);
    return hung;
}

/* Node regions a relabelling node could make up: many, and some not regions at all. */
struct many {
    pthread_mutex_t lock;
    bool made_up;
};

static size_t many_regions(void *ud, char (*out)[32], size_t max)
{
    static const char *const junk[] = {"not a region", "../../etc/passwd", "EU-WEST-1",
                                       "eu-west-1a", "eu-west-123", "x-west-1"};
    struct many *m = ud;
    size_t n = 0;

    snprintf(out[n++], 32, "eu-west-1");
    pthread_mutex_lock(&m->lock);
    for (size_t i = 0; m->made_up && i < AF_ARRAY_SIZE(junk) && n < max; i++)
        snprintf(out[n++], 32, "%s", junk[i]);
    for (int i = 1; m->made_up && i <= 60 && n < max; i++)
        snprintf(out[n++], 32, "zz-made-up-%d", i);
    pthread_mutex_unlock(&m->lock);
    return n;
}

/* Sources in the book of regions other than eu-west-1 (and all sources). */
static size_t other_sources(struct af_prices_holder *h, size_t *all)
{
    struct af_prices *p = af_prices_holder_get(h);
    const struct af_price_source *s = af_prices_sources(p, all);
    size_t n = 0;

    for (size_t i = 0; i < *all; i++)
        n += strcmp(s[i].region, "eu-west-1") != 0;
    af_prices_unref(p);
    return n;
}

/* Requests the fake saw that named a region other than eu-west-1 (ec2 is per region). */
static size_t other_region_requests(void)
{
    json_t *all = requests(), *r;
    size_t i, n = 0;

    json_array_foreach(all, i, r) {
        const char *region = json_string_value(json_object_get(r, "region"));
        n += region && strcmp(region, "eu-west-1") && strcmp(json_string_value(json_object_get(r, "service")), "pricing");
    }
    json_decref(all);
    return n;
}

/*
 * Node labels name regions: what is not an AWS region's name is never asked about, at most
 * 32 regions are read, and a region no node names any more is forgotten after three spot
 * refresh intervals: no more requests, and its prices and sources leave the book.
 */
START_TEST(test_aws_regions_are_checked_capped_and_forgotten)
{
    struct many m = {PTHREAD_MUTEX_INITIALIZER, true};
    struct af_aws_options o = quick;
    struct af_prices_holder h;
    struct af_aws_pricing *ap;
    size_t all, before;
    double usd;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    af_prices_holder_init(&h);
    o.spot_refresh_s = 1;   /* forgotten after 3 s */
    ck_assert_int_eq(af_aws_pricing_start(&ap, &o, &h, many_regions, &m, updated_quiet, NULL), 0);
    ck_assert(AF_TEST_WAIT_FOR(60, has_price(&h, AF_PRICE_ON_DEMAND, "eu-west-1", "m5.large",
                                             &usd) &&
                                       other_sources(&h, &all) == AF_PRICE__KINDS * 31));
    ck_assert_uint_eq(all, AF_PRICE__KINDS * 32);
    /* the nodes leave the made-up regions */
    pthread_mutex_lock(&m.lock);
    m.made_up = false;
    pthread_mutex_unlock(&m.lock);
    ck_assert_msg(AF_TEST_WAIT_FOR(60, other_sources(&h, &all) == 0), "%zu sources left", all);
    ck_assert(has_price(&h, AF_PRICE_ON_DEMAND, "eu-west-1", "m5.large", &usd));
    before = other_region_requests();
    nanosleep(&(struct timespec){3, 0}, NULL);
    ck_assert_uint_eq(other_region_requests(), before);
    af_aws_pricing_stop(ap);
    af_prices_holder_destroy(&h);
}
END_TEST

/* /readyz's price lines, with more sources than fit: whole lines, and a count of the rest. */
START_TEST(test_readyz_price_lines_stay_whole)
{
    struct af_prices_holder h;
    struct af_prices *book = af_prices_new();
    struct af_service svc = {.prices = &h};
    char out[1500];
    size_t lines = 0;

    af_prices_holder_init(&h);
    for (int i = 0; i < 64; i++) {
        struct af_price_source src = {.kind = i % 2, .tried_at = af_wall_time()};
        snprintf(src.region, sizeof(src.region), "zz-made-up-%d", i / 2);
        snprintf(src.error, sizeof(src.error), "ec2 DescribeSpotPriceHistory zz-made-up-%d: "
                 "no spot prices", i / 2);
        af_prices_set_source(book, &src);
    }
    af_prices_freeze(book);
    af_prices_holder_swap(&h, book);
    af_service_prices_status(&svc, NULL, out, sizeof(out));
    ck_assert_uint_lt(strlen(out), sizeof(out) - 1);
    ck_assert_msg(out[strlen(out) - 1] == '\n', "cut mid-line: %s", out);
    for (const char *p = out; (p = strchr(p, '\n')); p++)
        lines++;
    ck_assert_uint_gt(lines, 2);
    ck_assert_msg(strstr(out, "more sources not shown here\n"), "%s", out);
    af_prices_holder_destroy(&h);
}
END_TEST

START_TEST(test_aws_stop_interrupts_a_hanging_request)
{
    struct af_aws_options o = quick;
    struct af_prices_holder h;
    struct af_aws_pricing *ap;
    uint64_t t0;
    double took;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    af_prices_holder_init(&h);
    o.timeout_s = 600;
    af_test_fake_aws_do(&fake, "fault", "{\"kind\": \"hang\", \"service\": \"pricing\"}");
    ck_assert_int_eq(af_aws_pricing_start(&ap, &o, &h, NULL, NULL, NULL, NULL), 0);
    ck_assert(AF_TEST_WAIT_FOR(60, fake_saw_hang()));
    t0 = af_now_ns();
    af_aws_pricing_stop(ap);
    took = (double)(af_now_ns() - t0) / 1e9;
    /* Far below the 600 s request timeout: the stop, not the timeout, ended it. */
    ck_assert_msg(took < 60, "stop took %.1f s", took);
    af_test_fake_aws_do(&fake, "release", NULL);
    af_prices_holder_destroy(&h);
}
END_TEST

/* ---- accelfit prices ------------------------------------------------------------------------- */

static int run_cli(const char *const *argv, char **out, char **err)
{
    return af_test_exec(argv, NULL, out, err);
}

START_TEST(test_cli_prices_table_json_and_failures)
{
    char *out, *err;
    json_t *j;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    ck_assert_int_eq(run_cli((const char *const[]){"accelfit", "prices", "--spot", "--type",
                                                   "g5.xlarge", NULL},
                             &out, &err),
                     0);
    ck_assert_msg(strstr(out, "TYPE                     WHERE                   USD/H  SOURCE"),
                  "%s", out);
    ck_assert_msg(strstr(out, "g5.xlarge                eu-west-1              1.1230  "
                              "on-demand"),
                  "%s", out);
    ck_assert_msg(strstr(out, "g5.xlarge                eu-west-1a             0.4321  spot"),
                  "%s", out);
    ck_assert_ptr_null(strstr(out, "m5.large"));
    af_free(out);
    af_free(err);

    ck_assert_int_eq(run_cli((const char *const[]){"accelfit", "prices", "--region", "us-east-1",
                                                   "--json", NULL},
                             &out, &err),
                     0);
    j = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_str_eq(json_string_value(json_object_get(j, "region")), "us-east-1");
    ck_assert_uint_eq(json_array_size(json_object_get(j, "prices")), 3);
    ck_assert_str_eq(json_string_value(json_object_get(
                         json_array_get(json_object_get(j, "prices"), 0), "instance_type")),
                     "g5.xlarge");
    json_decref(j);
    af_free(out);
    af_free(err);

    ck_assert_int_eq(run_cli((const char *const[]){"accelfit", "prices", "--help", NULL}, &out,
                             &err),
                     0);
    ck_assert(strstr(out, "usage: accelfit prices"));
    af_free(out);
    af_free(err);
    ck_assert_int_eq(run_cli((const char *const[]){"accelfit", "prices", "--bogus", NULL}, &out,
                             &err),
                     2);
    af_free(out);
    af_free(err);

    /* Unreachable, then without credentials: exit 1, one line saying why. */
    setenv("AWS_ENDPOINT_URL", "https://127.0.0.1:1", 1);
    ck_assert_int_eq(run_cli((const char *const[]){"accelfit", "prices", NULL}, &out, &err), 1);
    ck_assert_msg(strstr(err, "accelfit prices: pricing GetProducts eu-west-1: cannot reach"),
                  "%s", err);
    ck_assert_str_eq(out, "");
    af_free(out);
    af_free(err);
    unsetenv("AWS_ACCESS_KEY_ID");
    ck_assert_int_eq(run_cli((const char *const[]){"accelfit", "prices", NULL}, &out, &err), 1);
    ck_assert_msg(strstr(err, "accelfit prices: no AWS credentials"), "%s", err);
    af_free(out);
    af_free(err);
    unsetenv("AWS_REGION");
    ck_assert_int_eq(run_cli((const char *const[]){"accelfit", "prices", NULL}, &out, &err), 2);
    ck_assert_msg(strstr(err, "no region"), "%s", err);
    af_free(out);
    af_free(err);
}
END_TEST

/* Every `accelfit prices ...` line of a ```sh block in docs/pricing.md runs against the fake
 * (in eu-west-1, with static keys) and succeeds. */
START_TEST(test_cli_prices_docs_commands_run)
{
    char *doc = af_test_read("docs/pricing.md", NULL), *save = NULL, *line;
    bool in_sh = false;
    int ran = 0;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    for (line = strtok_r(doc, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        const char *argv[16] = {"accelfit"};
        char *words, *w, *wsave = NULL, *out, *err;
        int argc = 0, rc;

        if (!strncmp(line, "```", 3)) {
            in_sh = !in_sh && !strcmp(line, "```sh");
            continue;
        }
        if (!in_sh || strncmp(line, "accelfit prices", 15))
            continue;
        words = af_xstrdup(line);
        for (w = strtok_r(words, " ", &wsave); w && argc < 15; w = strtok_r(NULL, " ", &wsave))
            argv[argc++] = w;
        argv[argc] = NULL;
        rc = run_cli(argv, &out, &err);
        ck_assert_msg(rc == 0, "docs/pricing.md: '%s' exited %d: %s", line, rc, err);
        ck_assert_msg(strstr(out, "g5.xlarge") || strstr(out, "usage"), "'%s': %s", line, out);
        ran++;
        af_free(out);
        af_free(err);
        af_free(words);
    }
    ck_assert_int_ge(ran, 2);
    af_free(doc);
}
END_TEST

/* ---- accelfit serve --aws-pricing ---------------------------------------------------------- */

/* GET (body NULL) or POST `path` of the server; the body (caller frees) of a 200 or 503. */
static char *serve_call(CURL *c, const struct af_test_server *s, const char *path,
                        const char *body, long *status)
{
    struct af_test_resp r;
    char url[256], *out;

    snprintf(url, sizeof(url), "%s%s", s->base, path);
    ck_assert_int_eq(af_test_http(c, body ? "POST" : NULL, url, body, body ? strlen(body) : 0,
                                  NULL, &r),
                     CURLE_OK);
    *status = r.status;
    out = af_xstrdup(r.body);
    af_test_resp_free(&r);
    return out;
}

#define EXPLAIN_BODY                                                                         \
    "{\"Pod\": {\"metadata\": {\"name\": \"p\", \"namespace\": \"default\"}, \"spec\": "      \
    "{\"containers\": [{\"name\": \"c\", \"resources\": {\"requests\": {\"cpu\": \"1\"}}}]}}, " \
    "\"NodeNames\": [\"ip-10-0-1-10.us-west-2.compute.internal\", "                          \
    "\"ip-10-0-3-30.us-west-2.compute.internal\", \"spot-1\"]}"

#define RESV_EXPLAIN                                                                         \
    "{\"Pod\": {\"metadata\": {\"name\": \"p\", \"namespace\": \"default\"}, \"spec\": "      \
    "{\"containers\": [{\"name\": \"c\", \"resources\": {\"requests\": {\"cpu\": \"1\"}}}]}}, " \
    "\"NodeNames\": [\"block-1\", \"mng-1\"]}"

/* A string member of `o`, "" when absent or not a string. */
static const char *str_of(const json_t *o, const char *key)
{
    const char *v = json_string_value(json_object_get(o, key));
    return v ? v : "";
}

/* The explained node `name` of /explain's answer (borrowed from `j`), or NULL. */
static json_t *explained(json_t *j, const char *name)
{
    json_t *n;
    size_t i;

    json_array_foreach(json_object_get(j, "nodes"), i, n)
        if (!strcmp(str_of(n, "name"), name))
            return n;
    return NULL;
}

/* True once /explain prices the p4d node from AWS. */
static bool p4d_priced_by_aws(CURL *c, const struct af_test_server *s)
{
    long st;
    char *b = serve_call(c, s, "/explain", EXPLAIN_BODY, &st);
    json_t *j = json_loads(b, 0, NULL), *n = j ? explained(j, "ip-10-0-1-10.us-west-2.compute.internal") : NULL;
    bool ok = n && !strcmp(str_of(n, "price_source"), "aws");

    json_decref(j);
    af_free(b);
    return ok;
}

/*
 * The daemon with --aws-pricing against an API server and the fake AWS: nodes of us-west-2
 * are charged that region's on-demand prices, a spot node its zone's spot price, a type AWS
 * gave no price for keeps the catalog's and says it is another region's; /explain, /readyz
 * and /metrics say where each price comes from and how old it is.
 */
START_TEST(test_serve_prices_nodes_from_aws_and_says_so)
{
    struct af_test_fake_api api;
    struct af_test_server s;
    CURL *c;
    long st;
    char *b;
    json_t *j, *n;

    NEED_FAKE();
    if (!af_test_fake_api_start(&api))
        return;
    af_test_fake_aws_static_keys(&fake);
    af_test_fake_aws_do(&fake, "on_demand",
                        "{\"region\": \"us-west-2\", \"prices\": {\"p4d.24xlarge\": "
                        "\"33.5000000000\", \"g5.2xlarge\": \"1.2120000000\", \"c6i.4xlarge\": "
                        "\"0.6800000000\", \"m7g.large\": \"0.0816000000\"}}");
    af_test_fake_aws_do(&fake, "spot",
                        "{\"region\": \"us-west-2\", \"items\": [{\"zone\": \"us-west-2b\", "
                        "\"type\": \"m7g.large\", \"price\": \"0.0301\", \"ago\": 60}]}");
    af_test_fake_api_do(&api, "add_node",
                        "{\"name\": \"spot-1\", \"instance_type\": \"m7g.large\", \"labels\": "
                        "{\"karpenter.sh/capacity-type\": \"spot\", "
                        "\"topology.kubernetes.io/region\": \"us-west-2\", "
                        "\"topology.kubernetes.io/zone\": \"us-west-2b\"}}");
    {
        const char *const args[] = {"--kubeconfig", api.kubeconfig, "--aws-pricing", NULL};
        af_test_server_start(&s, args, false, NULL, NULL);
    }
    c = curl_easy_init();
    ck_assert(AF_TEST_WAIT_FOR(120, p4d_priced_by_aws(c, &s)));

    b = serve_call(c, &s, "/explain", EXPLAIN_BODY, &st);
    j = json_loads(b, 0, NULL);
    ck_assert_msg(j, "%s", b);
    n = explained(j, "ip-10-0-1-10.us-west-2.compute.internal");
    ck_assert_double_eq(json_number_value(json_object_get(n, "node_hourly_usd")), 33.5);
    ck_assert_str_eq(str_of(n, "region"), "us-west-2");
    ck_assert_msg(!strncmp(str_of(n, "price_reason"),
                           "on-demand price of p4d.24xlarge in us-west-2 from AWS, read ", 60),
                  "%s", str_of(n, "price_reason"));
    ck_assert_int_ge(json_integer_value(json_object_get(n, "price_age_s")), 0);
    /* spot: the zone's spot price */
    n = explained(j, "spot-1");
    ck_assert_str_eq(str_of(n, "price_source"), "aws-spot");
    ck_assert_double_eq(json_number_value(json_object_get(n, "node_hourly_usd")), 0.0301);
    /* inf2.xlarge: AWS gave no price, the catalog's us-east-1 list price stands, and says so */
    n = explained(j, "ip-10-0-3-30.us-west-2.compute.internal");
    ck_assert_str_eq(str_of(n, "price_source"), "catalog");
    ck_assert_msg(strstr(str_of(n, "price_reason"),
                         "us-east-1 on-demand list price of inf2.xlarge in the catalog of "
                         "2026-07-20") &&
                      strstr(str_of(n, "price_reason"),
                             "the node runs in us-west-2, whose price is not known"),
                  "%s", str_of(n, "price_reason"));
    json_decref(j);
    af_free(b);

    b = serve_call(c, &s, "/readyz", NULL, &st);
    ck_assert_int_eq(st, 200);
    ck_assert_msg(strstr(b, "prices: catalog us-east-1 on-demand list prices, ") &&
                      strstr(b, "prices: aws on-demand us-west-2: 4 prices, read ") &&
                      strstr(b, "prices: aws spot us-west-2: 1 prices, read "),
                  "%s", b);
    af_free(b);
    b = serve_call(c, &s, "/metrics", NULL, &st);
    ck_assert_msg(strstr(b, "accelfit_nodes_by_price_source{source=\"aws\"} 3\n") &&
                      strstr(b, "accelfit_nodes_by_price_source{source=\"aws-spot\"} 1\n") &&
                      strstr(b, "accelfit_nodes_by_price_source{source=\"catalog\"} 2\n") &&
                      strstr(b, "accelfit_nodes_priced_from_other_region 2\n") &&
                      strstr(b, "accelfit_aws_prices{kind=\"on-demand\",region=\"us-west-2\"} 4\n") &&
                      strstr(b, "accelfit_aws_prices_up{kind=\"spot\",region=\"us-west-2\"} 1\n"),
                  "%s", b);
    af_free(b);
    curl_easy_cleanup(c);
    ck_assert_int_eq(af_test_server_stop(&s), 0);
    af_test_fake_api_stop(&api);
}
END_TEST

/* True when /readyz answers with `want` in its body, left in *body (freed first). */
static bool readyz_has(CURL *c, const struct af_test_server *s, const char *want, char **body,
                       long *status)
{
    af_free(*body);
    *body = serve_call(c, s, "/readyz", NULL, status);
    return strstr(*body, want) != NULL;
}

/* True once /explain says `want` of node `name`'s price. */
static bool reason_has(CURL *c, const struct af_test_server *s, const char *name,
                       const char *want)
{
    long st;
    char *b = serve_call(c, s, "/explain", RESV_EXPLAIN, &st);
    json_t *j = json_loads(b, 0, NULL);
    json_t *n = explained(j, name);
    bool yes = n && strstr(str_of(n, "price_reason"), want) != NULL;

    json_decref(j);
    af_free(b);
    return yes;
}

/* A prepaid node's reservation from EC2 DescribeCapacityReservations: its type and when it
 * ends, by its id or, when its labels name none, as the only reservation of its type in its
 * zone; without the IAM permission the annotation's end stands and /readyz says why. */
START_TEST(test_reservations_from_aws)
{
    struct af_test_fake_api api;
    struct af_test_server s;
    CURL *c;
    long st;
    char *b;

    NEED_FAKE();
    if (!af_test_fake_api_start(&api))
        return;
    af_test_fake_aws_static_keys(&fake);
    af_test_fake_aws_do(&fake, "reservations",
                        "{\"region\": \"us-west-2\", \"items\": ["
                        "{\"id\": \"cr-0b10c000000000001\", \"type\": \"p4d.24xlarge\", "
                        "\"zone\": \"us-west-2a\", \"block\": true, \"end_in\": 7200},"
                        "{\"id\": \"cr-0aa0000000000000a\", \"type\": \"g5.12xlarge\", "
                        "\"zone\": \"us-west-2b\", \"end_in\": 90000},"
                        "{\"id\": \"cr-0ffff00000000000f\", \"type\": \"g5.12xlarge\", "
                        "\"zone\": \"us-west-2c\", \"state\": \"expired\"}]}");
    af_test_fake_api_do(&api, "add_node",
                        "{\"name\": \"block-1\", \"instance_type\": \"p4d.24xlarge\", "
                        "\"gpus\": 8, \"labels\": {\"karpenter.sh/capacity-type\": \"reserved\", "
                        "\"karpenter.k8s.aws/capacity-reservation-id\": \"cr-0b10c000000000001\", "
                        "\"topology.kubernetes.io/region\": \"us-west-2\", "
                        "\"topology.kubernetes.io/zone\": \"us-west-2a\"}}");
    af_test_fake_api_do(&api, "add_node",
                        "{\"name\": \"mng-1\", \"instance_type\": \"g5.12xlarge\", "
                        "\"gpus\": 4, \"labels\": {\"eks.amazonaws.com/capacityType\": "
                        "\"CAPACITY_BLOCK\", \"topology.kubernetes.io/region\": \"us-west-2\", "
                        "\"topology.kubernetes.io/zone\": \"us-west-2b\"}}");
    {
        const char *const args[] = {"--kubeconfig", api.kubeconfig, "--aws-pricing", NULL};
        af_test_server_start(&s, args, false, NULL, NULL);
    }
    c = curl_easy_init();
    /* the label says reserved; AWS says a Capacity Block, ending in two hours */
    ck_assert_msg(AF_TEST_WAIT_FOR(120, reason_has(c, &s, "block-1",
                                                   "prepaid capacity-block cr-0b10c000000000001 "
                                                   "(label karpenter.sh/capacity-type=reserved), "
                                                   "ends in ")),
                  "never priced from AWS's reservation");
    ck_assert(reason_has(c, &s, "block-1", " (aws): a pod adds nothing here"));
    ck_assert(reason_has(c, &s, "block-1", "ends in 1h5") || reason_has(c, &s, "block-1", "ends in 2h00m"));
    /* no id on the managed node group's node: the only reservation of its type in its zone */
    ck_assert(reason_has(c, &s, "mng-1", "prepaid capacity-block cr-0aa0000000000000a "
                                         "(label eks.amazonaws.com/capacityType=CAPACITY_BLOCK), "
                                         "ends in 25h00m (aws)") ||
              reason_has(c, &s, "mng-1", "ends in 24h59m (aws)"));
    b = serve_call(c, &s, "/readyz", NULL, &st);
    ck_assert_msg(strstr(b, "prices: aws reservations us-west-2: 2 reservations, read "), "%s", b);
    af_free(b);
    b = NULL;
    curl_easy_cleanup(c);
    ck_assert_int_eq(af_test_server_stop(&s), 0);

    /* without ec2:DescribeCapacityReservations: the annotation's end, and /readyz says why */
    af_test_fake_aws_do(&fake, "reservations", "{\"region\": \"us-west-2\", \"items\": [], "
                                               "\"denied\": true}");
    af_test_fake_api_do(&api, "modify_node",
                        "{\"name\": \"block-1\", \"annotations\": "
                        "{\"accelfit.io/capacity-reservation-end\": \"2099-01-01T00:00:00Z\"}}");
    {
        const char *const args[] = {"--kubeconfig", api.kubeconfig, "--aws-pricing", NULL};
        af_test_server_start(&s, args, false, NULL, NULL);
    }
    c = curl_easy_init();
    ck_assert_msg(AF_TEST_WAIT_FOR(120, readyz_has(c, &s, "prices: aws reservations us-west-2: "
                                                          "degraded: ec2 DescribeCapacityReservations "
                                                          "us-west-2: UnauthorizedOperation",
                                                   &b, &st)),
                  "%s", b);
    ck_assert_msg(strstr(b, "prepaid nodes keep the ends their annotations give"), "%s", b);
    af_free(b);
    ck_assert(AF_TEST_WAIT_FOR(30, reason_has(c, &s, "block-1", "(annotation)")));
    curl_easy_cleanup(c);
    ck_assert_int_eq(af_test_server_stop(&s), 0);
    af_test_fake_api_stop(&api);
}
END_TEST

/* Without credentials AWS says nothing: nodes keep the catalog's prices and /readyz says why,
 * still ready. */
START_TEST(test_serve_without_credentials_keeps_catalog_prices_and_says_why)
{
    struct af_test_fake_api api;
    struct af_test_server s;
    CURL *c;
    long st;
    char *b = NULL;

    NEED_FAKE();
    if (!af_test_fake_api_start(&api))
        return;
    {
        const char *const args[] = {"--kubeconfig", api.kubeconfig, "--aws-pricing", NULL};
        af_test_server_start(&s, args, false, NULL, NULL);
    }
    c = curl_easy_init();
    ck_assert_msg(AF_TEST_WAIT_FOR(120, readyz_has(c, &s, "prices: aws on-demand us-west-2: degraded: ",
                                                  &b, &st)),
                  "%s", b);
    ck_assert_int_eq(st, 200);
    /* the error every source shares is said in full once, the others point to it */
    ck_assert_msg(strstr(b, ": degraded: no AWS credentials") &&
                      strstr(b, "prices: aws on-demand us-west-2: degraded: ") &&
                      strstr(b, "never read; nodes keep the catalog's prices"),
                  "%s", b);
    af_free(b);
    b = serve_call(c, &s, "/metrics", NULL, &st);
    ck_assert_msg(strstr(b, "accelfit_nodes_by_price_source{source=\"catalog\"} 5\n") &&
                      strstr(b, "accelfit_aws_prices_up{kind=\"on-demand\",region=\"us-west-2\"} 0\n"),
                  "%s", b);
    af_free(b);
    curl_easy_cleanup(c);
    ck_assert_int_eq(af_test_server_stop(&s), 0);
    af_test_fake_api_stop(&api);
}
END_TEST

/* `accelfit costs --aws-pricing`: a cluster file's nodes, and a listed cluster's, charged
 * AWS's prices, read once; the table says how many nodes are at which prices. */
START_TEST(test_costs_with_aws_prices)
{
    struct af_test_fake_api api;
    struct af_config *cfg = NULL;
    struct af_error err;
    char *out = NULL, *errs = NULL, want[160];
    double trn1, inf2;

    NEED_FAKE();
    af_test_fake_aws_static_keys(&fake);
    af_test_fake_aws_do(&fake, "on_demand",
                        "{\"region\": \"us-east-1\", \"prices\": {\"c6i.8xlarge\": \"1.5\", "
                        "\"m7i.2xlarge\": \"0.45\", \"m7g.xlarge\": \"0.18\", \"c7g.2xlarge\": "
                        "\"0.31\"}}");
    /* the file's four nodes: on-demand from AWS, the spot m7g.xlarge at AWS's on-demand
     * price less the policy's 60% (no zone, so no spot price): 1.5 + 0.45 + 0.072 + 0.31 */
    {
        const char *const argv[] = {"accelfit", "costs", "--cluster",
                                    AF_SOURCE_DIR "/docs/examples/cpu-mix-cluster.yaml",
                                    "--aws-pricing", NULL};
        ck_assert_int_eq(af_test_exec(argv, NULL, &out, &errs), 0);
        ck_assert_msg(strstr(out, "cluster: 4 nodes cost $2.33/h;") &&
                          strstr(out, "prices: 4 nodes at AWS's prices, 0 at the catalog's list "
                                      "prices, 0 annotated, 0 unknown"),
                      "%s\n%s", out, errs);
        af_free(out);
        af_free(errs);
    }

    /* a listed cluster in us-west-2: three types priced by AWS, two keep the catalog's */
    if (!af_test_fake_api_start(&api))
        return;
    af_test_fake_aws_do(&fake, "on_demand",
                        "{\"region\": \"us-west-2\", \"prices\": {\"p4d.24xlarge\": \"33.5\", "
                        "\"g5.2xlarge\": \"1.212\", \"c6i.4xlarge\": \"0.68\"}}");
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&cfg, NULL, NULL, &err), 0);
    trn1 = af_catalog_find(cfg->catalog, "trn1.32xlarge")->price_usd_hr;
    inf2 = af_catalog_find(cfg->catalog, "inf2.xlarge")->price_usd_hr;
    af_config_unref(cfg);
    snprintf(want, sizeof(want), "cluster: 5 nodes cost $%.2f/h;",
             33.5 + 1.212 + 0.68 + trn1 + inf2);
    {
        const char *const argv[] = {"accelfit", "costs", "--kubeconfig", api.kubeconfig,
                                    "--aws-pricing", NULL};
        ck_assert_int_eq(af_test_exec(argv, NULL, &out, &errs), 0);
        ck_assert_msg(strstr(out, want) &&
                          strstr(out, "prices: 3 nodes at AWS's prices, 2 at the catalog's list "
                                      "prices, 0 annotated, 0 unknown"),
                      "want '%s':\n%s\n%s", want, out, errs);
        /* us-west-2 has no spot prices here: said, and the nodes keep what they had */
        ck_assert_msg(strstr(errs, "accelfit costs: ec2 DescribeSpotPriceHistory us-west-2: "),
                      "%s", errs);
        af_free(out);
        af_free(errs);
    }
    af_test_fake_api_stop(&api);
}
END_TEST

Suite *af_aws_suite(void);
Suite *af_aws_suite(void)
{
    Suite *s = suite_create("aws");
    TCase *tc = tcase_create("reads");
    TCase *th = tcase_create("thread");
    TCase *cli = tcase_create("cli");
    TCase *serve = tcase_create("serve");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_aws_static_keys_read_on_demand_and_spot_paged);
    tcase_add_test(tc, test_aws_get_products_sends_karpenters_filters);
    tcase_add_loop_test(tc, test_aws_wrong_secret_is_refused_with_awss_message, 0,
                        (int)AF_ARRAY_SIZE(sig_cases));
    tcase_add_test(tc, test_aws_no_credentials_says_what_to_set);
    tcase_add_test(tc, test_aws_shared_credentials_file_and_profiles);
    tcase_add_test(tc, test_costs_without_credentials_says_so_once);
    tcase_add_test(tc, test_aws_service_endpoint_variable_wins);
    tcase_add_test(tc, test_aws_irsa_exchanges_token_and_signs_with_session_token);
    tcase_add_test(tc, test_aws_credentials_renewed_before_expiry);
    tcase_add_test(tc, test_aws_irsa_bad_token_gives_sts_error);
    tcase_add_test(tc, test_aws_pod_identity_sends_token_file_and_signs);
    tcase_add_test(tc, test_aws_throttled_then_succeeds);
    tcase_add_test(tc, test_aws_throttled_too_often_names_the_error);
    tcase_add_loop_test(tc, test_aws_malformed_or_error_answer_gives_clear_error, 0,
                        (int)AF_ARRAY_SIZE(malformed_cases));
    tcase_add_test(tc, test_aws_hanging_endpoint_times_out);
    tcase_add_test(tc, test_aws_xml_reader_never_pops_an_element_it_refused);
    tcase_add_loop_test(tc, test_aws_endless_next_token_fails_at_the_page_cap, 0,
                        (int)AF_ARRAY_SIZE(endless_cases));
    tcase_add_test(tc, test_aws_read_has_a_deadline);
    tcase_add_test(tc, test_aws_spot_items_bounded_and_deduplicated);
    suite_add_tcase(s, tc);

    tcase_add_checked_fixture(th, setup, teardown);
    tcase_set_timeout(th, 300);
    tcase_add_test(th, test_aws_refresh_keeps_last_prices_when_a_read_fails);
    tcase_add_test(th, test_aws_expired_token_renews_with_rotated_token_file);
    tcase_add_test(th, test_aws_new_region_read_when_kicked);
    tcase_add_test(th, test_aws_regions_are_checked_capped_and_forgotten);
    tcase_add_test(th, test_readyz_price_lines_stay_whole);
    tcase_add_test(th, test_aws_stop_interrupts_a_hanging_request);
    suite_add_tcase(s, th);

    tcase_add_checked_fixture(cli, setup, teardown);
    tcase_set_timeout(cli, 300);
    tcase_add_test(cli, test_cli_prices_table_json_and_failures);
    tcase_add_test(cli, test_cli_prices_docs_commands_run);
    suite_add_tcase(s, cli);

    tcase_add_checked_fixture(serve, setup, teardown);
    tcase_set_timeout(serve, 300);
    tcase_add_test(serve, test_serve_prices_nodes_from_aws_and_says_so);
    tcase_add_test(serve, test_serve_without_credentials_keeps_catalog_prices_and_says_why);
    tcase_add_test(serve, test_costs_with_aws_prices);
    tcase_add_test(serve, test_reservations_from_aws);
    tcase_add_test(serve, test_aws_reservations_page);
    suite_add_tcase(s, serve);
    return s;
}

int main(void)
{
    return af_test_run(af_aws_suite());
}
