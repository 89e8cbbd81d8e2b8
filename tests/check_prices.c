/* SPDX-License-Identifier: Apache-2.0 */
/* The price book (accelfit/prices.h): keys, replacement, bounds, copies without one
 * source, source records, sharing and the holder. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/model.h"
#include "accelfit/prices.h"
#include "support/support.h"

/* Every price of `p` is found again with its value (the book stays consistent). */
static void assert_has(const struct af_prices *p, enum af_price_kind kind, const char *where,
                       const char *type, double usd, double as_of)
{
    double u = 0, t = 0;

    ck_assert_msg(af_prices_get(p, kind, where, type, &u, &t), "%s %s missing", where, type);
    ck_assert_double_eq(u, usd);
    ck_assert_double_eq(t, as_of);
}

START_TEST(test_prices_set_get_and_replace)
{
    struct af_prices *p = af_prices_new();

    ck_assert_int_eq(af_prices_set(p, AF_PRICE_ON_DEMAND, "eu-west-1", "g5.xlarge", 1.123, 10), 0);
    ck_assert_int_eq(af_prices_set(p, AF_PRICE_SPOT, "eu-west-1a", "g5.xlarge", 0.43, 11), 0);
    ck_assert_int_eq(af_prices_set(p, AF_PRICE_ON_DEMAND, "eu-west-1", "g5.xlarge", 1.2, 12), 0);
    af_prices_freeze(p);
    ck_assert_uint_eq(af_prices_count(p), 2);
    assert_has(p, AF_PRICE_ON_DEMAND, "eu-west-1", "g5.xlarge", 1.2, 12);
    assert_has(p, AF_PRICE_SPOT, "eu-west-1a", "g5.xlarge", 0.43, 11);
    /* The kind is part of the key. */
    ck_assert(!af_prices_get(p, AF_PRICE_SPOT, "eu-west-1", "g5.xlarge", NULL, NULL));
    ck_assert(!af_prices_get(p, AF_PRICE_ON_DEMAND, "eu-west-1", "g5.2xlarge", NULL, NULL));
    ck_assert(!af_prices_get(NULL, AF_PRICE_ON_DEMAND, "eu-west-1", "g5.xlarge", NULL, NULL));
    ck_assert_uint_eq(af_prices_count(NULL), 0);
    /* A frozen book refuses prices. */
    ck_assert_int_eq(af_prices_set(p, AF_PRICE_SPOT, "eu-west-1b", "g5.xlarge", 0.5, 1), AF_EINVAL);
    af_prices_unref(p);
}
END_TEST

static const struct bad_case {
    int kind;
    const char *where, *type;
    double usd;
} bad_cases[] = {
    {AF_PRICE_ON_DEMAND, "eu-west-1", "g5.xlarge", 0},
    {AF_PRICE_ON_DEMAND, "eu-west-1", "g5.xlarge", -1},
    {AF_PRICE_ON_DEMAND, "eu-west-1", "g5.xlarge", NAN},
    {AF_PRICE_ON_DEMAND, "eu-west-1", "g5.xlarge", INFINITY},
    {AF_PRICE_ON_DEMAND, "eu-west-1", "g5.xlarge", AF_PRICE_MAX_USD_HR * 2},
    {AF_PRICE_ON_DEMAND, "", "g5.xlarge", 1},
    {AF_PRICE_ON_DEMAND, NULL, "g5.xlarge", 1},
    {AF_PRICE_ON_DEMAND, "eu-west-1", "g5 xlarge", 1},
    {AF_PRICE_SPOT, "eu-west-1a", "", 1},
    {AF_PRICE__KINDS, "eu-west-1", "g5.xlarge", 1},
    {AF_PRICE_SPOT, "eu-west-1a",
     "a-type-name-far-longer-than-any-instance-type-that-aws-has-ever-named", 1},
};

START_TEST(test_prices_refuses_bad_price_or_key)
{
    const struct bad_case *c = &bad_cases[_i];
    struct af_prices *p = af_prices_new();

    ck_assert_int_eq(af_prices_set(p, (enum af_price_kind)c->kind, c->where, c->type, c->usd, 1),
                     AF_EINVAL);
    ck_assert_uint_eq(af_prices_count(p), 0);
    af_prices_unref(p);
}
END_TEST

START_TEST(test_prices_copy_drops_only_that_source)
{
    struct af_prices *p = af_prices_new(), *c;
    struct af_price_source s1 = {.kind = AF_PRICE_SPOT, .region = "eu-west-1", .read_at = 5};
    struct af_price_source s2 = {.kind = AF_PRICE_ON_DEMAND, .region = "eu-west-1"};
    const struct af_price_source *src;
    size_t n;

    ck_assert_int_eq(af_prices_set(p, AF_PRICE_ON_DEMAND, "eu-west-1", "m5.large", 0.1, 1), 0);
    ck_assert_int_eq(af_prices_set(p, AF_PRICE_SPOT, "eu-west-1a", "m5.large", 0.04, 1), 0);
    ck_assert_int_eq(af_prices_set(p, AF_PRICE_SPOT, "us-east-1-bos-1a", "m5.large", 0.05, 1), 0);
    ck_assert_int_eq(af_prices_set(p, AF_PRICE_SPOT, "us-east-1b", "m5.large", 0.03, 1), 0);
    ck_assert_int_eq(af_prices_set(p, AF_PRICE_SPOT, "eu-west-10a", "m5.large", 0.02, 1), 0);
    af_prices_set_source(p, &s1);
    af_prices_set_source(p, &s2);
    s1.read_at = 9;
    af_prices_set_source(p, &s1);   /* replaces, keeps its place */
    af_prices_freeze(p);

    c = af_prices_copy(p, AF_PRICE_SPOT, "us-east-1");
    ck_assert_uint_eq(af_prices_count(c), 3);
    ck_assert(!af_prices_get(c, AF_PRICE_SPOT, "us-east-1b", "m5.large", NULL, NULL));
    ck_assert(!af_prices_get(c, AF_PRICE_SPOT, "us-east-1-bos-1a", "m5.large", NULL, NULL));
    assert_has(c, AF_PRICE_SPOT, "eu-west-1a", "m5.large", 0.04, 1);
    af_prices_unref(c);

    c = af_prices_copy(p, AF_PRICE_SPOT, "eu-west-1");
    ck_assert_uint_eq(af_prices_count(c), 4);   /* eu-west-10 is another region */
    assert_has(c, AF_PRICE_SPOT, "eu-west-10a", "m5.large", 0.02, 1);
    assert_has(c, AF_PRICE_ON_DEMAND, "eu-west-1", "m5.large", 0.1, 1);
    src = af_prices_sources(c, &n);
    ck_assert_uint_eq(n, 2);
    ck_assert_int_eq(src[0].kind, AF_PRICE_SPOT);
    ck_assert_double_eq(src[0].read_at, 9);
    ck_assert_int_eq(src[1].kind, AF_PRICE_ON_DEMAND);
    af_prices_unref(c);

    c = af_prices_copy(p, AF_PRICE_ON_DEMAND, NULL);
    ck_assert_uint_eq(af_prices_count(c), af_prices_count(p));
    af_prices_unref(c);
    c = af_prices_copy(NULL, AF_PRICE_ON_DEMAND, "eu-west-1");
    ck_assert_uint_eq(af_prices_count(c), 0);
    ck_assert_ptr_null(af_prices_sources(NULL, &n));
    ck_assert_uint_eq(n, 0);
    af_prices_unref(c);
    af_prices_unref(p);
}
END_TEST

START_TEST(test_prices_many_prices_all_found)
{
    struct af_prices *p = af_prices_new(), *c;
    char zone[32], type[32];

    for (int i = 0; i < 20000; i++) {
        snprintf(zone, sizeof(zone), "eu-west-1%c", 'a' + i % 3);
        snprintf(type, sizeof(type), "t%d.xlarge", i);
        ck_assert_int_eq(af_prices_set(p, AF_PRICE_SPOT, zone, type, 1 + i, i), 0);
    }
    c = af_prices_copy(p, AF_PRICE_ON_DEMAND, "eu-west-1");
    af_prices_freeze(c);
    ck_assert_uint_eq(af_prices_count(c), 20000);
    for (int i = 0; i < 20000; i++) {
        snprintf(zone, sizeof(zone), "eu-west-1%c", 'a' + i % 3);
        snprintf(type, sizeof(type), "t%d.xlarge", i);
        assert_has(c, AF_PRICE_SPOT, zone, type, 1 + i, i);
    }
    af_prices_unref(c);
    af_prices_unref(p);
}
END_TEST

START_TEST(test_prices_holder_shares_books_by_reference)
{
    struct af_prices_holder h;
    struct af_prices *a = af_prices_new(), *b = af_prices_new(), *got;

    af_prices_holder_init(&h);
    ck_assert_ptr_null(af_prices_holder_get(&h));
    ck_assert_int_eq(af_prices_set(a, AF_PRICE_ON_DEMAND, "eu-west-1", "m5.large", 0.1, 1), 0);
    af_prices_holder_swap(&h, a);
    got = af_prices_holder_get(&h);
    ck_assert_ptr_eq(got, a);
    /* A reader keeps its book through a swap. */
    af_prices_holder_swap(&h, b);
    assert_has(got, AF_PRICE_ON_DEMAND, "eu-west-1", "m5.large", 0.1, 1);
    ck_assert_int_eq(af_prices_set(got, AF_PRICE_SPOT, "eu-west-1a", "m5.large", 1, 1), AF_EINVAL);
    af_prices_unref(got);
    got = af_prices_holder_get(&h);
    ck_assert_ptr_eq(got, b);
    ck_assert_ptr_eq(af_prices_ref(got), b);
    af_prices_unref(got);
    af_prices_unref(got);
    af_prices_unref(NULL);
    ck_assert_ptr_null(af_prices_ref(NULL));
    af_prices_holder_destroy(&h);
}
END_TEST

Suite *af_prices_suite(void);
Suite *af_prices_suite(void)
{
    Suite *s = suite_create("prices");
    TCase *tc = tcase_create("book");

    tcase_add_test(tc, test_prices_set_get_and_replace);
    tcase_add_loop_test(tc, test_prices_refuses_bad_price_or_key, 0,
                        (int)AF_ARRAY_SIZE(bad_cases));
    tcase_add_test(tc, test_prices_copy_drops_only_that_source);
    tcase_add_test(tc, test_prices_many_prices_all_found);
    tcase_add_test(tc, test_prices_holder_shares_books_by_reference);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_prices_suite());
}
