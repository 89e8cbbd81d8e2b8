/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Allocation that aborts on out-of-memory, error codes, parser diagnostics,
 * the bounded buffer, the arena, number and quantity parsing, and clocks.
 */
#include "accelfit/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- errors ------------------------------------------------------------ */

int af_errno_from_sys(int e)
{
    if (e == ENOENT)
        return AF_ENOENT;
    return e > 0 && e < 4096 ? AF_ESYS(e) : AF_EIO;
}

int af_errno_sys(int err)
{
    return err <= AF_ESYS(1) && err >= AF_ESYS(4095) ? AF__ESYS_BASE - err : 0;
}

/* The causes a file read meets, in the lower case of every other message. */
static const char *sys_text(int e)
{
    switch (e) {
    case EACCES:
        return "permission denied";
    case EPERM:
        return "operation not permitted";
    case EISDIR:
        return "is a directory, not a file";
    case ENOTDIR:
        return "a component of the path is not a directory";
    case ELOOP:
        return "too many levels of symbolic links";
    case ENAMETOOLONG:
        return "file name too long";
    case EMFILE:
    case ENFILE:
        return "too many open files";
    case ENXIO:
        return "no such device or address";
    case ENODEV:
        return "no such device";
    case EINVAL:
        return "invalid argument";
    case EIO:
        return "input/output error";
    case EOVERFLOW:
        return "value too large for defined data type";
    case ENOMEM:
        return "out of memory";
    default:
        return strerror(e);
    }
}

const char *af_strerror(int err)
{
    if (af_errno_sys(err))
        return sys_text(af_errno_sys(err));
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

char *af_xvasprintf(const char *fmt, va_list ap)
{
    va_list ap2;
    int n;
    char *p;

    va_copy(ap2, ap);
    n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    af_assert(n >= 0);
    p = af_xmalloc((size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    return p;
}

char *af_xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *p;

    va_start(ap, fmt);
    p = af_xvasprintf(fmt, ap);
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

void af_buf_reserve(struct af_buf *b, size_t extra)
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
    b->buf[b->len] = '\0';   /* the invariant, for a buffer allocated here */
}

int af_buf_add(struct af_buf *b, const void *data, size_t len)
{
    if (b->cap && (len > b->cap || b->len > b->cap - len))
        return AF_ETOOBIG;
    af_buf_reserve(b, len);
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
    af_buf_reserve(b, (size_t)n);
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

const char *af_fmt_json_num(char *out, double v, int digits)
{
    if (!isfinite(v))
        snprintf(out, AF_JSON_NUM_MAX, "null");
    else
        snprintf(out, AF_JSON_NUM_MAX, "%.*g", digits < 1 ? 1 : digits > 17 ? 17 : digits,
                 v == 0 ? 0.0 : v);
    return out;
}

int af_buf_json_num(struct af_buf *b, double v, int digits)
{
    char num[AF_JSON_NUM_MAX];

    return af_buf_puts(b, af_fmt_json_num(num, v, digits));
}

int af_buf_json_fixed(struct af_buf *b, double v, int decimals)
{
    char num[AF_JSON_NUM_MAX];
    double scale;

    if (decimals < 0)
        decimals = 0;
    if (decimals > 9)
        decimals = 9;
    scale = pow(10, decimals);
    /* %.*f of a huge value has hundreds of digits: past 2^53 the digits after the point
     * say nothing, so the %g form, which reads back as the same double */
    if (!isfinite(v) || fabs(v) >= 9007199254740992.0)
        return af_buf_json_num(b, v, 17);
    v = round(v * scale) / scale;
    snprintf(num, sizeof(num), "%.*f", decimals, v == 0 ? 0.0 : v);
    if (num[0] == '-' && strspn(num + 1, "0.") == strlen(num + 1))
        return af_buf_puts(b, num + 1);   /* no "-0.00" */
    return af_buf_puts(b, num);
}

char *af_buf_detach(struct af_buf *b, size_t *len)
{
    char *p;

    if (!b->buf)
        af_buf_reserve(b, 0), b->buf[0] = '\0';
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
    struct stat st;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    int err = 0;

    if (fd < 0)
        return af_errno_from_sys(errno);
    if (fstat(fd, &st) != 0) {
        err = af_errno_from_sys(errno);
        goto out;
    }
    if (S_ISDIR(st.st_mode)) {
        err = AF_ESYS(EISDIR);
        goto out;
    }
    if (!S_ISREG(st.st_mode)) {
        err = AF_ENOTREG;
        goto out;
    }
    if (b->cap && (uint64_t)st.st_size > b->cap) {
        err = AF_ETOOBIG;
        goto out;
    }
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof(chunk));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            err = af_errno_from_sys(errno);
            break;
        }
        if (n == 0)
            break;
        err = af_buf_add(b, chunk, (size_t)n);
        if (err)
            break;
    }
out:
    close(fd);
    if (!err && !b->buf)
        af_buf_reserve(b, 0), b->buf[0] = '\0';
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
#define ARENA_CHUNK_MAX (1u << 20)

void *af_arena_alloc(struct af_arena *a, size_t n)
{
    void *p = af_arena_alloc_uninit(a, n);

    memset(p, 0, n);
    return p;
}

void *af_arena_alloc_uninit(struct af_arena *a, size_t n)
{
    struct af_arena_chunk *c = a->head;
    void *p;

    n = (n + 15) & ~(size_t)15;
    if (!c || c->size - c->used < n) {
        /* each chunk twice the last, up to 1 MiB: few chunks, so af_arena_owns stays short */
        size_t size = c && c->size < ARENA_CHUNK_MAX ? 2 * c->size : ARENA_CHUNK;
        if (size < n)
            size = n;
        c = af_xmalloc(sizeof(*c) + size);
        c->size = size;
        c->used = 0;
        c->next = a->head;
        a->head = c;
    }
    p = c->data + c->used;
    c->used += n;
    a->used += n;
    return p;
}

bool af_arena_owns(const struct af_arena *a, const void *p)
{
    const unsigned char *b = p;

    for (const struct af_arena_chunk *c = a->head; c; c = c->next)
        if (b >= c->data && b < c->data + c->size)
            return true;
    return false;
}

void af_arena_reset(struct af_arena *a)
{
    struct af_arena_chunk *c = a->head;

    if (!c)
        return;
    if (c->size > ARENA_CHUNK_MAX) {
        /* one outsized allocation (a request naming thousands of nodes): not kept */
        af_arena_release(a);
        return;
    }
    /* the newest chunk is the largest: keep it for the next round, free the rest */
    af_arena_release(&(struct af_arena){c->next, 0});
    c->next = NULL;
    c->used = 0;
    a->used = 0;
}

/* The threads' arenas: in thread-local storage, released by a key's destructor at exit. */
static _Thread_local struct af_arena thread_arenas[AF_ARENA__USES];
static pthread_key_t thread_arenas_key;
static pthread_once_t thread_arenas_once = PTHREAD_ONCE_INIT;

static void thread_arenas_release(void *unused)
{
    (void)unused;
    for (int i = 0; i < AF_ARENA__USES; i++)
        af_arena_release(&thread_arenas[i]);
}

static void thread_arenas_init(void)
{
    af_assert(pthread_key_create(&thread_arenas_key, thread_arenas_release) == 0);
}

struct af_arena *af_arena_of_thread(enum af_arena_use use)
{
    af_assert(use >= 0 && use < AF_ARENA__USES);
    if (!thread_arenas[use].head) {
        /* a value set, so the destructor runs when the thread exits */
        pthread_once(&thread_arenas_once, thread_arenas_init);
        pthread_setspecific(thread_arenas_key, thread_arenas);
    }
    return &thread_arenas[use];
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

/*
 * The number grammar the three parsers below share, so that none of them goes
 * through strtod's wider one (hex, "inf", "nan", leading blanks, the locale's
 * decimal point): digits with an optional fraction, at least one digit in all
 * ("5", "5.", ".5", "5.25"), optionally after a sign.
 */
struct mantissa {
    bool neg;
    const char *ip;            /* integer digits */
    size_t n_ip;
    const char *fp;            /* fraction digits */
    size_t n_fp;
    const char *end;           /* the first byte after the mantissa */
};

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Digit i of the mantissa's digits taken as one string, integer part then fraction. */
static char mantissa_digit(const struct mantissa *m, size_t i)
{
    return i < m->n_ip ? m->ip[i] : m->fp[i - m->n_ip];
}

static bool scan_mantissa(const char *s, bool sign, struct mantissa *m)
{
    const char *p = s;

    m->neg = false;
    if (sign && (*p == '+' || *p == '-'))
        m->neg = *p++ == '-';
    m->ip = p;
    while (is_digit(*p))
        p++;
    m->n_ip = (size_t)(p - m->ip);
    m->fp = p;
    m->n_fp = 0;
    if (*p == '.') {
        m->fp = ++p;
        while (is_digit(*p))
            p++;
        m->n_fp = (size_t)(p - m->fp);
    }
    m->end = p;
    return m->n_ip + m->n_fp > 0;
}

/*
 * An exponent "e3", "E-2", "e+10" at p, running to the end of the string. Its
 * value saturates at +-EXP_SATURATE: far beyond any exponent that can matter,
 * so that "1e99999999999999999999" is refused as too big, not as malformed.
 */
#define EXP_SATURATE 100000

static bool scan_exponent(const char *p, long *out)
{
    bool neg = false;
    long e = 0;

    if (*p != 'e' && *p != 'E')
        return false;
    p++;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    if (!is_digit(*p))
        return false;
    for (; is_digit(*p); p++)
        if (e < EXP_SATURATE)
            e = e * 10 + (*p - '0');
    if (*p)
        return false;
    *out = neg ? -e : e;
    return true;
}

/* strtod on text already checked against the grammar above, which strtod reads the same
 * way; the check of `end` guards that assumption. */
static bool checked_strtod(const char *s, const char *want_end, double *out)
{
    char *end;
    double v = strtod(s, &end);

    if (end != want_end || !isfinite(v))
        return false;
    *out = v;
    return true;
}

int af_parse_count(const char *s, double *out)
{
    static const struct {
        char suffix;
        double mult;
    } sfx[] = {
        {'k', 1e3},  {'K', 1e3},  {'m', 1e6},  {'M', 1e6},  {'b', 1e9},
        {'B', 1e9},  {'g', 1e9},  {'G', 1e9},  {'t', 1e12}, {'T', 1e12},
    };
    struct mantissa m;
    const char *num_end;
    double v, mult = 1;
    long e;

    if (!s || !scan_mantissa(s, false, &m))
        return AF_EINVAL;
    num_end = m.end;
    if (*m.end == 'e' || *m.end == 'E') {
        /* "13e9": an exponent, then nothing (no "1e3B"). */
        if (!scan_exponent(m.end, &e))
            return AF_EINVAL;
        num_end = m.end + strlen(m.end);
    } else if (*m.end) {
        size_t i;
        for (i = 0; i < AF_ARRAY_SIZE(sfx); i++)
            if (*m.end == sfx[i].suffix)
                break;
        if (i == AF_ARRAY_SIZE(sfx) || m.end[1])
            return AF_EINVAL;
        mult = sfx[i].mult;
    }
    if (!checked_strtod(s, num_end, &v))
        return strtod(s, NULL) > 0 ? AF_ERANGE : AF_EINVAL;   /* "1e400": a number, too big */
    /* The suffix last: "1e300B" is past int64 only once the B is applied. 2^63 is exact. */
    v *= mult;
    if (!(v < 9223372036854775808.0))
        return AF_ERANGE;
    *out = v;
    return 0;
}

int af_parse_decimal(const char *s, double min, double max, double *out)
{
    struct mantissa m;
    const char *num_end;
    double v;
    long e;

    if (!s || !scan_mantissa(s, true, &m))
        return AF_EINVAL;
    num_end = m.end;
    if (*m.end) {
        if (!scan_exponent(m.end, &e))
            return AF_EINVAL;
        num_end = m.end + strlen(m.end);
    }
    if (!checked_strtod(s, num_end, &v) || !(v >= min && v <= max))
        return AF_EINVAL;
    *out = v;
    return 0;
}

int af_parse_int64(const char *s, int64_t min, int64_t max, int64_t *out)
{
    char *end;
    long long v;

    /* strtoll would skip leading blanks; the grammar is a sign and digits only. */
    if (!s || !is_digit(s[*s == '+' || *s == '-']))
        return AF_EINVAL;
    errno = 0;
    v = strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE || v < min || v > max)
        return AF_EINVAL;
    *out = v;
    return 0;
}

/*
 * Kubernetes quantities, exactly as resource.Quantity reads them
 * (k8s.io/apimachinery/pkg/api/resource/quantity.go): a sign, digits with an
 * optional fraction, and one suffix: binary SI (Ki Mi Gi Ti Pi Ei), decimal SI
 * (n u m "" k M G T P E) or a decimal exponent (e3, E-2). "1E" is exa, "1e" is
 * nothing.
 *
 * The value times `scale` is rounded up, away from zero, as Value() and
 * MilliValue() round: "1n" of cpu is 1 millicore, 0.001Ki is 2 bytes. Floating
 * point cannot promise that (1n x 1000 is 1e-6, which a tolerance must either
 * round to 0 or mistake for noise), so the arithmetic is done exactly on the
 * decimal digits: the mantissa is laid out in a fixed window of digit
 * positions, doubled once per power of two of a binary suffix, and the integer
 * part read back with an overflow check.
 *
 * Digits below the window's last position only decide whether there is a
 * fraction: with Q_FRAC >= 60 (the largest binary exponent, Ei), such a tail
 * times 2^k is less than one step of the window's fraction times 2^k, so it
 * cannot carry into the integer part, and the result is floor + 1 either way.
 */
#define Q_INT 40    /* integer positions: below 10^19 (else refused) times 2^60 < 10^38 */
#define Q_FRAC 80   /* fraction positions, >= 60 */

struct qsuffix {
    const char *text;
    int exp10;
    int exp2;
};

static const struct qsuffix qsuffixes[] = {
    {"Ki", 0, 10}, {"Mi", 0, 20}, {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},   {"G", 9, 0},
    {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},
};

/* The suffix at p (possibly empty) as a power of ten and a power of two. */
static bool quantity_suffix(const char *p, long *exp10, int *exp2)
{
    *exp10 = 0;
    *exp2 = 0;
    if (!*p)
        return true;
    /* The tables first, as Kubernetes looks: "E" and "Ei" are suffixes, and only then
     * is "e"/"E" followed by more an exponent. */
    for (size_t i = 0; i < AF_ARRAY_SIZE(qsuffixes); i++) {
        if (!strcmp(p, qsuffixes[i].text)) {
            *exp10 = qsuffixes[i].exp10;
            *exp2 = qsuffixes[i].exp2;
            return true;
        }
    }
    return (*p == 'e' || *p == 'E') && p[1] && scan_exponent(p, exp10);
}

/* The power of ten `scale` is (1 -> 0, 1000 -> 3); -1 when it is not one. */
static int scale_exp10(int64_t scale)
{
    int e = 0;

    while (scale > 1 && scale % 10 == 0) {
        scale /= 10;
        e++;
    }
    return scale == 1 ? e : -1;
}

int af_parse_quantity(const char *s, int64_t scale, int64_t *out)
{
    unsigned char dig[Q_INT + Q_FRAC] = {0};   /* dig[i] is the digit at 10^(Q_INT-1-i) */
    struct mantissa m;
    bool sticky = false, frac = false;
    long exp10, last;
    int exp2, sc = scale_exp10(scale);
    size_t nd, first, lastd;
    uint64_t v = 0;

    af_assert(sc >= 0);
    if (!s || !scan_mantissa(s, true, &m) || !quantity_suffix(m.end, &exp10, &exp2))
        return AF_EINVAL;

    /* The digits as one string ip.fp: find the significant ones. */
    nd = m.n_ip + m.n_fp;
    for (first = 0; first < nd && mantissa_digit(&m, first) == '0'; first++)
        ;
    if (first == nd) {
        *out = 0;   /* zero, whatever its exponent */
        return 0;
    }
    for (lastd = nd - 1; mantissa_digit(&m, lastd) == '0'; lastd--)
        ;
    /* The position (power of ten) of the last significant digit, and of the first. */
    last = exp10 + sc - (long)m.n_fp + (long)(nd - 1 - lastd);
    if (last + (long)(lastd - first) >= 19)
        return AF_EINVAL;   /* at least 10^19, past INT64_MAX before any binary suffix */
    for (size_t i = first; i <= lastd; i++) {
        long pos = last + (long)(lastd - i);
        if (pos < -Q_FRAC)
            sticky |= mantissa_digit(&m, i) != '0';
        else
            dig[Q_INT - 1 - pos] = (unsigned char)(mantissa_digit(&m, i) - '0');
    }

    /* Times 2^exp2, up to 2^20 a pass so that digit * 2^20 + carry fits easily. */
    while (exp2 > 0) {
        int k = exp2 < 20 ? exp2 : 20;
        uint32_t carry = 0;
        for (size_t i = sizeof(dig); i-- > 0;) {
            uint32_t t = ((uint32_t)dig[i] << k) + carry;
            dig[i] = (unsigned char)(t % 10);
            carry = t / 10;
        }
        af_assert(carry == 0);
        exp2 -= k;
    }

    for (size_t i = 0; i < Q_INT; i++) {
        if (v > ((uint64_t)INT64_MAX - dig[i]) / 10)
            return AF_EINVAL;
        v = v * 10 + dig[i];
    }
    for (size_t i = Q_INT; i < sizeof(dig) && !frac; i++)
        frac = dig[i] != 0;
    if (frac || sticky) {
        if (v == (uint64_t)INT64_MAX)
            return AF_EINVAL;
        v++;
    }
    *out = m.neg ? -(int64_t)v : (int64_t)v;
    return 0;
}

size_t af_table_size(size_t n)
{
    size_t size = 16;

    while (size < n * 2)
        size <<= 1;
    return size;
}

void af_index_init(struct af_index *ix, size_t n, struct af_arena *arena)
{
    size_t size = af_table_size(n);

    af_assert(n < UINT32_MAX);
    ix->t = arena ? af_arena_alloc(arena, size * sizeof(*ix->t))
                  : af_xcalloc(size, sizeof(*ix->t));
    ix->mask = size - 1;
}

void af_index_release(struct af_index *ix)
{
    af_free(ix->t);
    ix->t = NULL;
    ix->mask = 0;
}

/* ---- the JSON writer ------------------------------------------------------------------------ */

static void jw_put(struct af_jw *w, const char *s)
{
    if (!w->err)
        w->err = af_buf_puts(w->b, s);
}

/* The comma before a value and its key, if any. */
static void jw_begin(struct af_jw *w, const char *key)
{
    if (w->comma)
        jw_put(w, ",");
    if (key) {
        if (!w->err)
            w->err = af_buf_json_str(w->b, key);
        jw_put(w, ":");
    }
    w->comma = true;
}

void af_jw_open(struct af_jw *w, const char *key, char brace)
{
    jw_begin(w, key);
    jw_put(w, brace == '[' ? "[" : "{");
    w->comma = false;
}

void af_jw_close(struct af_jw *w, char brace)
{
    jw_put(w, brace == ']' ? "]" : "}");
    w->comma = true;
}

void af_jw_str(struct af_jw *w, const char *key, const char *v)
{
    jw_begin(w, key);
    if (!v)
        jw_put(w, "null");
    else if (!w->err)
        w->err = af_buf_json_str(w->b, v);
}

void af_jw_int(struct af_jw *w, const char *key, long long v)
{
    jw_begin(w, key);
    if (!w->err)
        w->err = af_buf_printf(w->b, "%lld", v);
}

void af_jw_num(struct af_jw *w, const char *key, double v, int digits)
{
    jw_begin(w, key);
    if (!w->err)
        w->err = af_buf_json_num(w->b, v, digits);
}

void af_jw_fixed(struct af_jw *w, const char *key, double v, int decimals)
{
    jw_begin(w, key);
    if (!w->err)
        w->err = af_buf_json_fixed(w->b, v, decimals);
}

void af_jw_bool(struct af_jw *w, const char *key, bool v)
{
    jw_begin(w, key);
    jw_put(w, v ? "true" : "false");
}

void af_jw_null(struct af_jw *w, const char *key)
{
    jw_begin(w, key);
    jw_put(w, "null");
}

void af_jw_raw(struct af_jw *w, const char *key, const char *json)
{
    jw_begin(w, key);
    jw_put(w, json);
}

struct af_buf *af_jw_value(struct af_jw *w, const char *key)
{
    jw_begin(w, key);
    return w->err ? NULL : w->b;
}

void af_jw_done(struct af_jw *w, int rc)
{
    if (!w->err)
        w->err = rc;
}

int af_jw_end(struct af_jw *w)
{
    jw_put(w, "\n");
    return w->err;
}

/* ---- base64 (RFC 4648) ------------------------------------------------------------------- */

int af_buf_base64(struct af_buf *out, const void *data, size_t len)
{
    const unsigned char *in = data;
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char q[4];
    int rc = 0;

    for (size_t i = 0; !rc && i < len; i += 3) {
        unsigned v = (unsigned)in[i] << 16;
        size_t n = len - i < 3 ? len - i : 3;
        if (n > 1)
            v |= (unsigned)in[i + 1] << 8;
        if (n > 2)
            v |= in[i + 2];
        q[0] = tbl[(v >> 18) & 63];
        q[1] = tbl[(v >> 12) & 63];
        q[2] = n > 1 ? tbl[(v >> 6) & 63] : '=';
        q[3] = n > 2 ? tbl[v & 63] : '=';
        rc = af_buf_add(out, q, 4);
    }
    return rc;
}

static int b64val(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+' || c == '-')
        return 62;
    if (c == '/' || c == '_')
        return 63;
    return -1;
}

char *af_base64_decode(const char *s, size_t *outlen)
{
    size_t n = strlen(s), o = 0;
    char *out = af_xmalloc(n / 4 * 3 + 4);
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int c = (unsigned char)s[i];
        if (c == '=' || c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        int v = b64val(c);
        if (v < 0) {
            af_free(out);
            return NULL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    out[o] = '\0';
    if (outlen)
        *outlen = o;
    return out;
}

/* ---- clocks --------------------------------------------------------------- */

uint64_t af_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Days from 1970-01-01 to the civil date y-m-d, proleptic Gregorian (Howard Hinnant). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
    int64_t era, yoe, doy, doe;

    y -= m <= 2;
    era = (y >= 0 ? y : y - 399) / 400;
    yoe = y - era * 400;
    doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int digits_at(const char *s, int n, int *out)
{
    int v = 0;

    for (int i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

/*
 * RFC 3339's date-time, exactly: "2026-11-22T04:00:00Z", fractional seconds and a numeric
 * offset allowed ("...T04:00:00.123+02:00"), 't' and 'z' too, nothing after it; a real
 * date (no 31 April), 1970 on. Kubernetes, AWS and the policy all write this grammar, so
 * one reader serves them all.
 */
double af_parse_rfc3339(const char *s)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int y, mo, d, h, mi, sec, oh = 0, om = 0, sign = 0;
    double frac = 0, t;
    const char *p;

    if (!s || strlen(s) < 20 || digits_at(s, 4, &y) || s[4] != '-' || digits_at(s + 5, 2, &mo) ||
        s[7] != '-' || digits_at(s + 8, 2, &d) || (s[10] != 'T' && s[10] != 't') ||
        digits_at(s + 11, 2, &h) || s[13] != ':' || digits_at(s + 14, 2, &mi) || s[16] != ':' ||
        digits_at(s + 17, 2, &sec))
        return -1;
    p = s + 19;
    if (*p == '.') {
        double scale = 0.1;
        if (!(p[1] >= '0' && p[1] <= '9'))
            return -1;
        for (p++; *p >= '0' && *p <= '9'; p++, scale /= 10)
            frac += (*p - '0') * scale;
    }
    if ((*p == 'Z' || *p == 'z') && !p[1]) {
        sign = 0;
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && !digits_at(p + 1, 2, &oh) &&
               p[3] == ':' && !digits_at(p + 4, 2, &om)) {
        sign = *p == '+' ? 1 : -1;
        if (oh > 23 || om > 59)
            return -1;
    } else {
        return -1;
    }
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || h > 23 || mi > 59 || sec > 59)
        return -1;
    if (d > mdays[mo - 1] + (mo == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)))
        return -1;
    t = (double)days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec + frac;
    t -= sign * (oh * 3600 + om * 60);
    return t >= 0 ? t : -1;
}

/* Unix seconds to "2026-11-22T04:00:00Z" (whole seconds, UTC; before 1970 reads as 1970). */
void af_format_rfc3339(double t, char *out, size_t n)
{
    int64_t secs = t > 0 && t < 253402300800.0 ? (int64_t)t : 0;
    int64_t z = secs / 86400 + 719468, era, doe, yoe, y, doy, mp, dd, mm, rem = secs % 86400;

    /* civil_from_days (Howard Hinnant), the inverse of days_from_civil */
    era = z / 146097;
    doe = z - era * 146097;
    yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    y = yoe + era * 400;
    doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    mp = (5 * doy + 2) / 153;
    dd = doy - (153 * mp + 2) / 5 + 1;
    mm = mp < 10 ? mp + 3 : mp - 9;
    y += mm <= 2;
    snprintf(out, n, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lldZ", (long long)y, (long long)mm,
             (long long)dd, (long long)(rem / 3600), (long long)(rem / 60 % 60),
             (long long)(rem % 60));
}

/* "12 s", "4 min", "3 h", "5 days": how long `secs` is, for people. */
void af_format_age(double secs, char *buf, size_t len)
{
    if (!(secs >= 0))
        secs = 0;
    if (secs < 120)
        snprintf(buf, len, "%.0f s", secs);
    else if (secs < 2 * 3600)
        snprintf(buf, len, "%.0f min", secs / 60);
    else if (secs < 2 * 86400)
        snprintf(buf, len, "%.0f h", secs / 3600);
    else
        snprintf(buf, len, "%.0f days", secs / 86400);
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

/* A number exactly as JSON spells it: -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)? */
bool af_is_json_number(const char *s)
{
    if (*s == '-')
        s++;
    if (*s == '0')
        s++;
    else if (*s >= '1' && *s <= '9')
        while (*s >= '0' && *s <= '9')
            s++;
    else
        return false;
    if (*s == '.') {
        s++;
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    if (*s == 'e' || *s == 'E') {
        s++;
        if (*s == '+' || *s == '-')
            s++;
        if (*s < '0' || *s > '9')
            return false;
        while (*s >= '0' && *s <= '9')
            s++;
    }
    return !*s;
}

int af_parse_duration(const char *s, unsigned flags, double max, double *out)
{
    double total = 0;

    if (!s || !*s)
        return AF_EINVAL;
    if (!strcmp(s, "0")) {
        *out = 0;
        return 0;
    }
    for (bool first = true; *s; first = false) {
        const char *p = s;
        char *end;
        double v;

        while (*p >= '0' && *p <= '9')
            p++;
        if (p == s)
            return AF_EINVAL;
        if (*p == '.') {
            if (!(flags & AF_DURATION_FRACTIONS) || p[1] < '0' || p[1] > '9')
                return AF_EINVAL;
            for (p++; *p >= '0' && *p <= '9'; p++)
                ;
        }
        /* the span is digits[.digits]: strtod reads exactly it, as exactly as it can */
        v = strtod(s, &end);
        if (end != p)
            return AF_EINVAL;
        switch (*p) {
        case 'd': v *= 86400; p++; break;
        case 'h': v *= 3600; p++; break;
        case 'm': v *= 60; p++; break;
        case 's': p++; break;
        case '\0':
            if (!first || !(flags & AF_DURATION_SECONDS))
                return AF_EINVAL;   /* "1h30": a bare number only alone */
            break;
        default:
            return AF_EINVAL;
        }
        total += v;
        if (!(total <= max))
            return AF_EINVAL;
        s = p;
    }
    *out = total;
    return 0;
}

const char *af_packed_get(const char *packed, const char *key)
{
    for (const char *k = packed; k && *k;) {
        const char *v = k + strlen(k) + 1;
        if (!strcmp(k, key))
            return v;
        k = v + strlen(v) + 1;
    }
    return NULL;
}

/* ---- Kubernetes names (accelfit/util.h) ---- */

static bool k8s_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

static bool k8s_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* The name part of a qualified name, and a non-empty label value:
 * [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?, at most 63 characters. */
static bool k8s_name_part(const char *s, size_t n)
{
    if (n == 0 || n > 63 || !k8s_alnum(s[0]) || !k8s_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!k8s_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

/* A DNS-1123 label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters. */
bool af_k8s_dns_label(const char *s, size_t n)
{
    if (n == 0 || n > 63 || !k8s_lower_alnum(s[0]) || !k8s_lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!k8s_lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

/* A DNS-1123 subdomain: labels joined by '.', at most 253 characters. */
bool af_k8s_dns_subdomain(const char *s, size_t n)
{
    size_t start = 0;

    if (n == 0 || n > 253)
        return false;
    for (size_t i = 0; i <= n; i++)
        if (i == n || s[i] == '.') {
            if (!af_k8s_dns_label(s + start, i - start))
                return false;
            start = i + 1;
        }
    return true;
}

/* A qualified name (label and annotation keys, resource names): [DNS-subdomain/]name. */
bool af_k8s_qualified_name(const char *s)
{
    const char *slash = s ? strchr(s, '/') : NULL;

    if (!s)
        return false;

    if (!slash)
        return k8s_name_part(s, strlen(s));
    return af_k8s_dns_subdomain(s, (size_t)(slash - s)) && k8s_name_part(slash + 1, strlen(slash + 1));
}

/* A label value: empty, or a name part. */
bool af_k8s_label_value(const char *s)
{
    return !*s || k8s_name_part(s, strlen(s));
}

/* An environment variable name as the API server takes it: [-._a-zA-Z][-._a-zA-Z0-9]*. */
bool af_k8s_env_name(const char *s)
{
    if (!s || !*s || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (; *s; s++)
        if (!k8s_alnum(*s) && *s != '-' && *s != '.' && *s != '_')
            return false;
    return true;
}
