/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The number parsers on arbitrary text: af_parse_quantity (at scale 1 and
 * 1000), af_parse_count, af_parse_decimal and af_parse_int64. Besides not
 * crashing, the answers must agree with one another: a quantity read in
 * milli-units rounds up to the same whole units, and a plain decimal is also
 * a quantity and a count.
 */
#include <math.h>

#include "fuzz.h"

static uint64_t magnitude(int64_t v)
{
    return v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
}

static bool has_suffix_letter(const char *s)
{
    for (; *s; s++)
        if ((*s >= 'a' && *s <= 'z' && *s != 'e') || (*s >= 'A' && *s <= 'Z' && *s != 'E'))
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = fuzz_cstr(data, size < 256 ? size : 256);
    int64_t q1 = 0, q1000 = 0, i64 = 0;
    double count = -1, dec = 0;
    int rc1 = af_parse_quantity(s, 1, &q1);
    int rc1000 = af_parse_quantity(s, 1000, &q1000);
    int rcc = af_parse_count(s, &count);
    int rcd = af_parse_decimal(s, -1e300, 1e300, &dec);
    int rci = af_parse_int64(s, INT64_MIN, INT64_MAX, &i64);

    FUZZ_CHECK(rc1 == 0 || rc1 == AF_EINVAL, "quantity rc %d", rc1);
    /* ceil(ceil(1000 x) / 1000) == ceil(x), on magnitudes (rounding is away from zero). */
    if (rc1 == 0 && rc1000 == 0) {
        uint64_t m1 = magnitude(q1), m1000 = magnitude(q1000);
        FUZZ_CHECK(m1 == m1000 / 1000 + (m1000 % 1000 != 0), "'%s': %lld vs %lldm", s,
                   (long long)q1, (long long)q1000);
        FUZZ_CHECK((q1 < 0) == (q1000 < 0), "'%s': signs differ", s);
    }
    /* Scale 1000 can overflow where scale 1 does not, never the other way round. */
    FUZZ_CHECK(!(rc1000 == 0 && rc1 != 0), "'%s': fits in milli-units, not in units", s);
    if (rcc == 0)
        FUZZ_CHECK(isfinite(count) && count >= 0 && count < 9223372036854775808.0,
                   "'%s': count %g", s, count);
    if (rcd == 0) {
        FUZZ_CHECK(isfinite(dec), "'%s': decimal %g", s, dec);
        /* A decimal is a quantity unless it is too big for one. */
        FUZZ_CHECK(rc1 == 0 || fabs(dec) >= 9.2e18, "'%s': decimal %g, not a quantity", s,
                   dec);
        if (rc1 == 0 && fabs(dec) < 1e15)
            FUZZ_CHECK(fabs((double)magnitude(q1) - ceil(fabs(dec))) <= 1, "'%s': %lld vs %g",
                       s, (long long)q1, dec);
        /* Unsigned, without a suffix: a count too, unless too big. */
        if (s[0] != '-' && s[0] != '+')
            FUZZ_CHECK(rcc == 0 || dec >= 9.2e18, "'%s': decimal %g, not a count", s, dec);
    }
    if (rcc == 0 && !has_suffix_letter(s))
        FUZZ_CHECK(rcd == 0 && dec == count, "'%s': count %g, decimal %d", s, count, rcd);
    if (rci == 0 && i64 != INT64_MIN)
        FUZZ_CHECK(rc1 == 0 && q1 == i64, "'%s': int64 %lld, quantity %d", s, (long long)i64,
                   rc1);
    af_free(s);
    return 0;
}
