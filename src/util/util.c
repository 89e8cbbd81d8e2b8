/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation that aborts on out-of-memory, error codes, parser diagnostics,
 * the bounded buffer, the arena, number and quantity parsing, and clocks.
 */
#include "accelfit/util.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- errors ------------------------------------------------------------ */

const char *af_strerror(int err)
{
    switch (err) {
    case AF_OK:
        return "success";
#define XX(code, text) \
    case AF_##code:    \
        return text;
        AF_ERRNO_MAP(XX)
#undef XX
    default:
        return "unknown error";
    }
}

int af_error_set(struct af_error *err, int code, const char *file, int line, int column,
                 const char *fmt, ...)
{
    va_list ap;

    if (!err)
        return code;
    snprintf(err->file, sizeof(err->file), "%s", file ? file : "");
    err->line = line;
    err->column = column;
    va_start(ap, fmt);
    vsnprintf(err->text, sizeof(err->text), fmt, ap);
    va_end(ap);
    return code;
}

void af_error_format(const struct af_error *err, char *out, size_t outlen)
{
    if (err->file[0] && err->line > 0 && err->column > 0)
        snprintf(out, outlen, "%s:%d:%d: %s", err->file, err->line, err->column, err->text);
    else if (err->file[0] && err->line > 0)
        snprintf(out, outlen, "%s:%d: %s", err->file, err->line, err->text);
    else if (err->file[0])
        snprintf(out, outlen, "%s: %s", err->file, err->text);
    else
        snprintf(out, outlen, "%s", err->text);
}

/* ---- memory ------------------------------------------------------------- */

static AF_NORETURN void oom(size_t n)
{
    fprintf(stderr, "fatal: out of memory allocating %zu bytes\n", n);
    abort();
}

void *af_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *af_xcalloc(size_t nmemb, size_t size)
{
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);
    if (!p)
        oom(nmemb * size);
    return p;
}

void *af_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

char *af_xstrdup(const char *s)
{
    return s ? af_xstrndup(s, strlen(s)) : NULL;
}

char *af_xstrndup(const char *s, size_t n)
{
    char *p;

    if (!s)
        return NULL;
    p = af_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

char *af_xasprintf(const char *fmt, ...)
{
    va_list ap;
    int n;
    char *p;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    af_assert(n >= 0);
    p = af_xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

void af_free(void *p)
{
    free(p);
}

void af_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    size_t n;

    if (need <= *cap)
        return;
    n = *cap ? *cap : 8;
    while (n < need)
        n = n * 2;
    *arr = af_xrealloc(*arr, n * elem);
    *cap = n;
}

/* ---- bounded buffer ------------------------------------------------------ */

void af_buf_init(struct af_buf *b, size_t cap)
{
    b->buf = NULL;
    b->len = 0;
    b->alloc = 0;
    b->cap = cap;
}

void af_buf_release(struct af_buf *b)
{
    free(b->buf);
    b->buf = NULL;
    b->len = 0;
    b->alloc = 0;
}

void af_buf_reset(struct af_buf *b)
{
    b->len = 0;
    if (b->buf)
        b->buf[0] = '\0';
}

static void buf_reserve(struct af_buf *b, size_t extra)
{
    size_t need = b->len + extra + 1;
    size_t n;

    if (need <= b->alloc)
        return;
    n = b->alloc ? b->alloc : 256;
    while (n < need)
        n *= 2;
    b->buf = af_xrealloc(b->buf, n);
    b->alloc = n;
}

int af_buf_add(struct af_buf *b, const void *data, size_t len)
{
    if (b->cap && (len > b->cap || b->len > b->cap - len))
        return AF_ETOOBIG;
    buf_reserve(b, len);
    if (len)
        memcpy(b->buf + b->len, data, len);
    b->len += len;
    b->buf[b->len] = '\0';
    return 0;
}

int af_buf_puts(struct af_buf *b, const char *s)
{
    return af_buf_add(b, s, strlen(s));
}

int af_buf_printf(struct af_buf *b, const char *fmt, ...)
{
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return AF_EINVAL;
    if (b->cap && ((size_t)n > b->cap || b->len > b->cap - (size_t)n))
        return AF_ETOOBIG;
    buf_reserve(b, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
    return 0;
}

int af_buf_json_str(struct af_buf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s;
    int err = af_buf_add(b, "\"", 1);

    for (; !err && *p; p++) {
        char esc[7];
        switch (*p) {
        case '"':
            err = af_buf_add(b, "\\\"", 2);
            break;
        case '\\':
            err = af_buf_add(b, "\\\\", 2);
            break;
        case '\n':
            err = af_buf_add(b, "\\n", 2);
            break;
        case '\r':
            err = af_buf_add(b, "\\r", 2);
            break;
        case '\t':
            err = af_buf_add(b, "\\t", 2);
            break;
        default:
            if (*p < 0x20) {
                memcpy(esc, "\\u00", 4);
                esc[4] = hex[*p >> 4];
                esc[5] = hex[*p & 15];
                err = af_buf_add(b, esc, 6);
            } else {
                err = af_buf_add(b, p, 1);
            }
        }
    }
    if (!err)
        err = af_buf_add(b, "\"", 1);
    return err;
}

char *af_buf_detach(struct af_buf *b, size_t *len)
{
    char *p;

    if (!b->buf)
        buf_reserve(b, 0), b->buf[0] = '\0';
    p = b->buf;
    if (len)
        *len = b->len;
    b->buf = NULL;
    b->len = 0;
    b->alloc = 0;
    return p;
}

int af_buf_read_file(struct af_buf *b, const char *path)
{
    char chunk[65536];
    FILE *f = fopen(path, "rb");
    int err = 0;

    if (!f)
        return errno == ENOENT ? AF_ENOENT : AF_EIO;
    for (;;) {
        size_t n = fread(chunk, 1, sizeof(chunk), f);
        if (n > 0) {
            err = af_buf_add(b, chunk, n);
            if (err)
                break;
        }
        if (n < sizeof(chunk)) {
            if (ferror(f))
                err = AF_EIO;
            break;
        }
    }
    fclose(f);
    if (!err && !b->buf)
        buf_reserve(b, 0), b->buf[0] = '\0';
    return err;
}

/* ---- arena --------------------------------------------------------------- */

struct af_arena_chunk {
    struct af_arena_chunk *next;
    size_t size;
    size_t used;
    _Alignas(16) unsigned char data[];
};

#define ARENA_CHUNK 16384

void *af_arena_alloc(struct af_arena *a, size_t n)
{
    struct af_arena_chunk *c = a->head;
    void *p;

    n = (n + 15) & ~(size_t)15;
    if (!c || c->size - c->used < n) {
        size_t size = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        c = af_xmalloc(sizeof(*c) + size);
        c->size = size;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    p = c->data + c->used;
    c->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

char *af_arena_strdup(struct af_arena *a, const char *s)
{
    size_t n = strlen(s);
    char *p = af_arena_alloc(a, n + 1);
    memcpy(p, s, n);
    return p;
}

char *af_arena_printf(struct af_arena *a, const char *fmt, ...)
{
    va_list ap;
    int n;
    char *p;

    va_start(ap, fmt);
    n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    af_assert(n >= 0);
    p = af_arena_alloc(a, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return p;
}

void af_arena_release(struct af_arena *a)
{
    struct af_arena_chunk *c = a->head;

    while (c) {
        struct af_arena_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->used = 0;
}

/* ---- parsing helpers ------------------------------------------------------ */

int af_parse_count(const char *s, double *out)
{
    char *end;
    double v, mult = 1;

    if (!s || !*s)
        return AF_EINVAL;
    errno = 0;
    v = strtod(s, &end);
    if (end == s || errno == ERANGE || !isfinite(v) || v < 0)
        return AF_EINVAL;
    if (*end) {
        switch (*end) {
        case 'k':
        case 'K':
            mult = 1e3;
            break;
        case 'm':
        case 'M':
            mult = 1e6;
            break;
        case 'b':
        case 'B':
        case 'g':
        case 'G':
            mult = 1e9;
            break;
        case 't':
        case 'T':
            mult = 1e12;
            break;
        default:
            return AF_EINVAL;
        }
        if (end[1])
            return AF_EINVAL;
    }
    *out = v * mult;
    return 0;
}

int af_parse_int64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end;
    long long v;

    if (!s || !*s)
        return AF_EINVAL;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE || v < min || v > max)
        return AF_EINVAL;
    *out = v;
    return 0;
}

/*
 * Kubernetes quantities: a signed decimal number with an optional suffix,
 * binary (Ki Mi Gi Ti Pi Ei), decimal (n u m "" k M G T P E) or an exponent
 * (e3, E-2). Computed in long double and rounded up, as the scheduler rounds
 * requests up to whole milli-units.
 */
int af_parse_quantity(const char *s, int64_t scale, int64_t *out)
{
    const char *p = s;
    long double num = 0, frac = 0.1L, mult = 1;
    bool digits = false, neg = false;

    if (!s || !*s)
        return AF_EINVAL;
    if (*p == '+' || *p == '-')
        neg = (*p++ == '-');
    while (*p >= '0' && *p <= '9')
        num = num * 10 + (*p++ - '0'), digits = true;
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9')
            num += (*p++ - '0') * frac, frac /= 10, digits = true;
    }
    if (!digits)
        return AF_EINVAL;
    if (*p == 'e' || *p == 'E') {
        char *end;
        long e;
        errno = 0;
        e = strtol(p + 1, &end, 10);
        if (end == p + 1 || *end || errno || e > 30 || e < -30)
            return AF_EINVAL;
        mult = powl(10, (long double)e);
    } else if (*p) {
        static const struct {
            const char *suffix;
            long double mult;
        } sfx[] = {
            {"Ki", 1024.0L}, {"Mi", 1048576.0L}, {"Gi", 1073741824.0L},
            {"Ti", 1099511627776.0L}, {"Pi", 1125899906842624.0L},
            {"Ei", 1152921504606846976.0L}, {"n", 1e-9L}, {"u", 1e-6L}, {"m", 1e-3L},
            {"k", 1e3L}, {"M", 1e6L}, {"G", 1e9L}, {"T", 1e12L}, {"P", 1e15L}, {"E", 1e18L},
        };
        size_t i;
        for (i = 0; i < AF_ARRAY_SIZE(sfx); i++)
            if (!strcmp(p, sfx[i].suffix))
                break;
        if (i == AF_ARRAY_SIZE(sfx))
            return AF_EINVAL;
        mult = sfx[i].mult;
    }
    num = num * mult * (long double)scale;
    if (num > (long double)INT64_MAX / 2)
        return AF_EINVAL;
    /* Round up, tolerating the binary representation of decimal fractions. */
    {
        long double fl = floorl(num);
        int64_t v = (int64_t)fl;
        if (num - fl > 1e-6L)
            v++;
        *out = neg ? -v : v;
    }
    return 0;
}

/* ---- clocks --------------------------------------------------------------- */

uint64_t af_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

double af_wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void af__assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "fatal: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}
