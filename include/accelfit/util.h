/* SPDX-License-Identifier: Apache-2.0 */
/*
 * util: the few things every module needs.
 *
 * - allocation that aborts on out-of-memory (af_xmalloc and friends): the
 *   process is restarted by its supervisor, so error paths only handle real
 *   failures;
 * - one list of error codes (AF_ERRNO_MAP) with af_strerror();
 * - struct af_error, filled by parsers with file, line, column and text;
 * - struct af_buf, a growable byte buffer with a hard cap;
 * - struct af_arena, a bump allocator for per-request temporaries;
 * - AF_LOG, one key=value (or JSON) line per event on stderr.
 */
#ifndef AF_UTIL_H
#define AF_UTIL_H

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__)
#define AF_MUST_CHECK __attribute__((warn_unused_result))
#define AF_PRINTF(f, a) __attribute__((format(printf, f, a)))
#define AF_NORETURN __attribute__((noreturn))
#else
#define AF_MUST_CHECK
#define AF_PRINTF(f, a)
#define AF_NORETURN
#endif

/* 1 when built with AddressSanitizer (GCC defines __SANITIZE_ADDRESS__, clang has the feature). */
#if defined(__SANITIZE_ADDRESS__)
#define AF_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define AF_SANITIZED 1
#endif
#endif
#ifndef AF_SANITIZED
#define AF_SANITIZED 0
#endif

#define AF_ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ---- errors ------------------------------------------------------------ */

#define AF_ERRNO_MAP(XX)                                              \
    XX(EINVAL, "invalid argument")                                    \
    XX(ERANGE, "value out of range")                                  \
    XX(ENOENT, "no such file")                                        \
    XX(EIO, "input/output error")                                     \
    XX(EPARSE, "cannot parse input")                                  \
    XX(ETYPE, "value has the wrong type")                             \
    XX(ETOOBIG, "input exceeds limit")                                \
    XX(ENOTSYNCED, "cache not synced")                                \
    XX(EEXPIRED, "resource version expired")                          \
    XX(EUNAUTH, "unauthorized")                                       \
    XX(EHTTP, "unexpected HTTP status")                               \
    XX(ECONN, "connection failed")                                    \
    XX(EUNSUPPORTED, "unsupported feature")                           \
    XX(ECANCELED, "operation canceled")                               \
    XX(ETIMEDOUT, "deadline passed")                                  \
    XX(ENOTREG, "not a regular file")

enum af_errno {
    AF_OK = 0,
#define XX(code, _) AF_##code,
    AF__ERRNO_FIRST = -100,
    AF_ERRNO_MAP(XX)
#undef XX
};

/*
 * A system call's errno, kept: ENOENT is AF_ENOENT, any other errno `e` is AF_ESYS(e),
 * below every code of the list above, so "permission denied", "is a directory, not a
 * file" and "too many levels of symbolic links" reach the message instead of one
 * "input/output error". af_errno_sys() gives the errno back (0 when `err` is not one).
 */
#define AF__ESYS_BASE (-1000)
#define AF_ESYS(e) (AF__ESYS_BASE - (e))
int af_errno_from_sys(int e);
int af_errno_sys(int err);

/* Returns a static description of `err` (0, a negative AF_E* code or an AF_ESYS). */
const char *af_strerror(int err);

/* Parser diagnostics. `line` and `column` are 1-based; 0 means unknown. */
struct af_error {
    char file[256];
    int line;
    int column;
    char text[512];
};

/* Fills `err` (may be NULL) and returns `code`. */
int af_error_set(struct af_error *err, int code, const char *file, int line, int column,
                 const char *fmt, ...) AF_PRINTF(6, 7);

/* Formats "file:line:column: text" (parts that are unknown are left out). */
void af_error_format(const struct af_error *err, char *out, size_t outlen);

/* ---- memory ------------------------------------------------------------- */

void *af_xmalloc(size_t n);
void *af_xcalloc(size_t nmemb, size_t size);
void *af_xrealloc(void *p, size_t n);
char *af_xstrdup(const char *s);          /* NULL in, NULL out */
char *af_xstrndup(const char *s, size_t n);
char *af_xasprintf(const char *fmt, ...) AF_PRINTF(1, 2);
char *af_xvasprintf(const char *fmt, va_list ap) AF_PRINTF(1, 0);
void af_free(void *p);                    /* NULL is fine */

/* Grows *arr (of *cap elements of `elem` bytes) so it holds at least `need`. */
void af_grow(void **arr, size_t *cap, size_t need, size_t elem);
#define AF_GROW(arr, cap, need) af_grow((void **)&(arr), &(cap), (need), sizeof(*(arr)))

/* ---- bounded buffer ------------------------------------------------------ */

/*
 * Invariants: `len < alloc` whenever `buf` is not NULL, and buf[len] == '\0';
 * `len` never exceeds `cap` (0 = unbounded).
 */
struct af_buf {
    char *buf;
    size_t len;
    size_t alloc;
    size_t cap;
};
#define AF_BUF_INIT(maxlen) {NULL, 0, 0, (maxlen)}

void af_buf_init(struct af_buf *b, size_t cap);
void af_buf_release(struct af_buf *b);
void af_buf_reset(struct af_buf *b);
/* Returns 0, or AF_ETOOBIG (and appends nothing) when the cap would be passed. */
int af_buf_add(struct af_buf *b, const void *data, size_t len) AF_MUST_CHECK;
int af_buf_puts(struct af_buf *b, const char *s) AF_MUST_CHECK;
int af_buf_printf(struct af_buf *b, const char *fmt, ...) AF_PRINTF(2, 3) AF_MUST_CHECK;
/* Appends `s` as a JSON string literal (with quotes). */
int af_buf_json_str(struct af_buf *b, const char *s) AF_MUST_CHECK;
/*
 * The one writer of numbers into JSON, which every JSON output uses: `v` with `digits`
 * significant digits (%.*g), or with `decimals` digits after the point (%.*f); -0 is
 * written 0, and a value that is not finite is written null, JSON having no inf or nan.
 * af_fmt_json_num is the same into `out` (at least AF_JSON_NUM_MAX bytes).
 */
#define AF_JSON_NUM_MAX 48
int af_buf_json_num(struct af_buf *b, double v, int digits) AF_MUST_CHECK;
int af_buf_json_fixed(struct af_buf *b, double v, int decimals) AF_MUST_CHECK;
const char *af_fmt_json_num(char *out, double v, int digits);
/* Makes room for `extra` more bytes at once (a size known ahead: no growing by halves). The
 * cap is not checked here; af_buf_add checks it. */
void af_buf_reserve(struct af_buf *b, size_t extra);
/* Caller owns the result; the buffer is left empty. */
char *af_buf_detach(struct af_buf *b, size_t *len);
/*
 * Reads a whole regular file. It is opened without blocking and refused, with
 * AF_ENOTREG, when it is anything else (a FIFO, a socket, a device: reading one could
 * wait forever), and AF_ESYS(EISDIR) when it is a directory. Returns 0, AF_ENOENT (no
 * such file), AF_ENOTREG, AF_ETOOBIG, or the AF_ESYS of what open(2) or read(2) said
 * (AF_ESYS(EACCES), AF_ESYS(ELOOP), ...); af_strerror says which.
 */
int af_buf_read_file(struct af_buf *b, const char *path) AF_MUST_CHECK;

/* ---- arena --------------------------------------------------------------- */

struct af_arena_chunk;
struct af_arena {
    struct af_arena_chunk *head;
    size_t used;     /* bytes handed out in total */
};
#define AF_ARENA_INIT {NULL, 0}

void *af_arena_alloc(struct af_arena *a, size_t n);   /* zeroed, 16-aligned, cannot fail */
void *af_arena_alloc_uninit(struct af_arena *a, size_t n);   /* the same, not zeroed */
char *af_arena_strdup(struct af_arena *a, const char *s);
char *af_arena_printf(struct af_arena *a, const char *fmt, ...) AF_PRINTF(2, 3);
void af_arena_release(struct af_arena *a);
/* Whether p points into memory `a` handed out. Chunks double in size, so few are walked. */
bool af_arena_owns(const struct af_arena *a, const void *p);
/* Forgets everything handed out, keeping the largest chunk (up to 1 MiB) for what comes next. */
void af_arena_reset(struct af_arena *a);
/*
 * The calling thread's arena for one kind of use, kept between uses (af_arena_reset after
 * each), so that a thread serving requests stops calling malloc for their temporaries once
 * its chunk is large enough. Released when the thread exits. Two kinds, so that a use of
 * one may happen inside a use of the other: a request, and a tree jansson builds.
 */
enum af_arena_use { AF_ARENA_REQUEST, AF_ARENA_TREE, AF_ARENA__USES };
struct af_arena *af_arena_of_thread(enum af_arena_use use);

/* ---- parsing helpers ------------------------------------------------------ */

/*
 * The number parsers take the whole string and accept only their grammar: no
 * blanks, no hex, no "inf" or "nan", nothing after the number. Each returns 0
 * with *out set, or AF_EINVAL leaving *out alone; callers put the rejected
 * text in their own message ("cannot parse model size '1e300B'").
 */

/* A model size: a plain decimal ("7000000000", "1.5"), an exponent ("13e9") or
 * one suffix k/K, m/M (10^6), b/B, g/G (10^9), t/T ("70B", "350M", "1.5k"),
 * unsigned, below 2^63 once the suffix is applied. AF_EINVAL when `s` is not of that
 * form, AF_ERANGE when it is but the value is 2^63 or more ("1e400", "9e18B"). */
int af_parse_count(const char *s, double *out) AF_MUST_CHECK;
/* A Kubernetes resource.Quantity ("500m", "16Gi", "1", "2e3", "1Ei", "1n")
 * times `scale`, a power of ten (1000 for milli-units of cpu, 1 for bytes and
 * counts), rounded up away from zero as Quantity.Value()/MilliValue() do; the
 * result must fit int64 (its magnitude at most INT64_MAX). */
int af_parse_quantity(const char *s, int64_t scale, int64_t *out) AF_MUST_CHECK;
/* A plain decimal ("32.77", "-0.5", "1e3", ".5") within [min, max]. For prices
 * and other values strtod would read too generously. */
int af_parse_decimal(const char *s, double min, double max, double *out) AF_MUST_CHECK;
/* True when `s` is a number exactly as JSON spells it (-?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?). */
bool af_is_json_number(const char *s);
/* Strict decimal integer with range check. */
int af_parse_int64(const char *s, int64_t min, int64_t max, int64_t *out) AF_MUST_CHECK;

/* ---- logging -------------------------------------------------------------- */

enum af_log_level { AF_LOG_DEBUG = 0, AF_LOG_INFO, AF_LOG_WARN, AF_LOG_ERROR, AF_LOG_OFF };
enum af_log_format { AF_LOG_TEXT = 0, AF_LOG_JSON };

extern int af_log_level;
extern int af_log_format;

/*
 * One line per event. `msg` is a short lower-case phrase; the varargs are
 * key/value string pairs terminated by NULL:
 *   AF_LOG(AF_LOG_INFO, "request", "verb", "filter", "status", "200", NULL);
 */
#define AF_LOG(lvl, ...)                                \
    do {                                                \
        if ((int)(lvl) >= af_log_level)                 \
            af__log((lvl), __VA_ARGS__);                \
    } while (0)
void af__log(int level, const char *msg, ...);
int af_log_parse_level(const char *s);   /* -1 when unknown */

/* A function named *_locked begins with this: its mutex is held. pthreads does not say by
 * which thread, so this catches a lock not taken at all, which is the mistake that happens
 * (a trylock that succeeds means nobody held it: the assertion aborts). */
#define af_assert_held(m) af_assert(pthread_mutex_trylock(m) == EBUSY)

/* Stays on in release builds. */
#define af_assert(e) ((e) ? (void)0 : af__assert_fail(#e, __FILE__, __LINE__))
AF_NORETURN void af__assert_fail(const char *expr, const char *file, int line);

/*
 * A JSON writer for output off the hot path (/explain, /costs, reports): values go into
 * `b` with the commas between them; the first error sticks and every later call does
 * nothing, so a renderer writes straight through and asks af_jw_error once at the end.
 * `key` names the value inside an object; NULL inside an array (or for the top value).
 * Keys and strings are escaped. (The extender's answers have their own measured encoder,
 * src/codec/extender.c.)
 */
struct af_jw {
    struct af_buf *b;
    int err;
    bool comma;   /* a value was written at this level: the next one needs a ',' */
};
#define AF_JW_INIT(buf) {(buf), 0, false}
void af_jw_open(struct af_jw *w, const char *key, char brace);   /* '{' or '[' */
void af_jw_close(struct af_jw *w, char brace);
void af_jw_str(struct af_jw *w, const char *key, const char *v);   /* NULL: null */
void af_jw_int(struct af_jw *w, const char *key, long long v);
/* `v` with up to `digits` significant digits (af_buf_json_num); not finite: null. */
void af_jw_num(struct af_jw *w, const char *key, double v, int digits);
/* `v` with exactly `decimals` after the point (af_buf_json_fixed). */
void af_jw_fixed(struct af_jw *w, const char *key, double v, int decimals);
void af_jw_bool(struct af_jw *w, const char *key, bool v);
void af_jw_null(struct af_jw *w, const char *key);
/* A value that is JSON already ("null", a number formatted elsewhere). */
void af_jw_raw(struct af_jw *w, const char *key, const char *json);
/* For one value another writer appends: the buffer to append it to, after the key; that
 * writer's result goes to af_jw_done. NULL after an error (then append nothing). */
struct af_buf *af_jw_value(struct af_jw *w, const char *key);
void af_jw_done(struct af_jw *w, int rc);
/* Ends the document with a newline; returns the first error (0 when all went in). */
int af_jw_end(struct af_jw *w);
/* The first error (0 when every value went in). */
static inline int af_jw_error(const struct af_jw *w)
{
    return w->err;
}

/*
 * The house's two hashes. af_hash_str keys its open-addressing tables (af_index, the
 * cache's): 8 bytes a step and a final mix, so a 45-byte node name costs six multiplies
 * where FNV-1a's byte chain took 45, on every candidate of every request. Chain fields by
 * seeding the next with the last: af_hash_str(af_hash_str(AF_HASH_INIT, ns), name). NULL
 * hashes as "". The values are for this process's tables only (they depend on the byte
 * order). FNV-1a (64 bit) makes fingerprints. The inputs are names from the API server or
 * the policy, which cannot choose their hashes' collisions to any effect beyond longer
 * probes in a table sized 2x.
 */
#define AF_HASH_INIT 0x2545f491u
#define AF_FNV64_INIT 14695981039346656037ull
static inline uint32_t af_hash_bytes(uint32_t seed, const void *p, size_t n)
{
    const unsigned char *b = p;
    uint64_t h = ((uint64_t)seed << 32 | seed) ^ (n * 0x9e3779b97f4a7c15ull), w;

    for (; n >= 8; b += 8, n -= 8) {
        memcpy(&w, b, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
    }
    w = 0;
    for (size_t i = 0; i < n; i++)
        w |= (uint64_t)b[i] << (8 * i);
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return (uint32_t)(h ^ h >> 32);
}
static inline uint32_t af_hash_str(uint32_t seed, const char *s)
{
    return s ? af_hash_bytes(seed, s, strlen(s)) : af_hash_bytes(seed, "", 0);
}
static inline uint64_t af_fnv64(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;

    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}
/* Base64 (RFC 4648): appends `len` bytes of `data`, standard alphabet, padded; decodes the
 * standard or URL-safe alphabet (whitespace ignored, padding optional) into a NUL-terminated
 * copy (its length in *outlen when not NULL), or NULL when `s` holds another byte. */
int af_buf_base64(struct af_buf *out, const void *data, size_t len) AF_MUST_CHECK;
char *af_base64_decode(const char *s, size_t *outlen);
/* An open-addressing table's size for `n` entries: a power of two, at least 16 and 2n (the
 * size of an af_index, and of the cache's own tables, which also remove). */
size_t af_table_size(size_t n);

/*
 * The one open-addressing table of the house: an index over an array the caller keeps.
 * Each entry holds a key's hash (af_hash_str) and the key's position in that array, so a
 * probe compares hashes in the table and reads the caller's key only when they agree; the
 * caller compares keys itself, with no callback:
 *
 *     uint32_t h = af_hash_str(AF_HASH_INIT, name), i;
 *     size_t walk = af_index_start(&ix, h);
 *     while (af_index_next(&ix, h, &walk, &i))
 *         if (!strcmp(nodes[i].name, name))
 *             return &nodes[i];
 *     return NULL;
 *
 * Linear probing in af_table_size(n) entries of 8 bytes (hash << 32 | position + 1; 0 is
 * empty), built for at most `n` entries and never grown nor shrunk, so there is no removal:
 * the indexes of immutable snapshots and of one computation's temporaries. Positions are
 * below `n`, which is below UINT32_MAX. A zeroed struct af_index is an empty index.
 */
struct af_index {
    uint64_t *t;
    size_t mask;   /* entries - 1 */
};
/* Sized for `n` entries, taken from `arena` (released with it) or, when NULL, the heap
 * (released by af_index_release). */
void af_index_init(struct af_index *ix, size_t n, struct af_arena *arena);
void af_index_release(struct af_index *ix);
static inline size_t af_index_bytes(const struct af_index *ix)
{
    return ix->t ? (ix->mask + 1) * sizeof(*ix->t) : 0;
}
/* Adds position `i` (below the `n` of af_index_init) under `hash`; a key already there is
 * not looked for: the caller asks af_index_next first when keys may repeat. */
static inline void af_index_add(struct af_index *ix, uint32_t hash, size_t i)
{
    size_t pos = hash & ix->mask;

    while (ix->t[pos])
        pos = (pos + 1) & ix->mask;
    ix->t[pos] = (uint64_t)hash << 32 | (uint64_t)(i + 1);
}
/* The positions added under `hash`, one per call into *i, then false: `walk` starts at
 * af_index_start(ix, hash) and carries the probe from call to call. */
static inline size_t af_index_start(const struct af_index *ix, uint32_t hash)
{
    return hash & ix->mask;
}
static inline bool af_index_next(const struct af_index *ix, uint32_t hash, size_t *walk,
                                 uint32_t *i)
{
    if (!ix->t)
        return false;
    for (;;) {
        uint64_t e = ix->t[*walk];
        *walk = (*walk + 1) & ix->mask;
        if (!e)
            return false;
        if ((uint32_t)(e >> 32) == hash) {
            *i = (uint32_t)e - 1;
            return true;
        }
    }
}
/* Loads the first entry `hash` probes, for a batch of lookups (an empty index: t + 0, which
 * a prefetch may name: it never faults). */
static inline void af_index_prefetch(const struct af_index *ix, uint32_t hash)
{
    __builtin_prefetch(ix->t + (hash & ix->mask));
}

/* Monotonic clock in nanoseconds and wall clock in seconds (not for the core). */
uint64_t af_now_ns(void);
/* RFC 3339's date-time ("2026-11-22T04:00:00Z", "...T04:00:00.123+02:00"), strictly, to
 * Unix seconds; < 0 when not one (or before 1970). The one reader of times in the house. */
double af_parse_rfc3339(const char *s);
/* Unix seconds as "2026-11-22T04:00:00Z" (UTC, whole seconds); `n` >= 21. */
#define AF_RFC3339_LEN 21
void af_format_rfc3339(double t, char *out, size_t n);
/* Kubernetes names, as the API server validates them (one set for the policy loader and the
 * webhook): a DNS-1123 label ([a-z0-9]([-a-z0-9]*[a-z0-9])?, <= 63) of the `n` characters at
 * `s`; a DNS-1123 subdomain (labels joined by '.', <= 253); a qualified name (label and
 * annotation keys: [DNS-subdomain/]name, the name [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?,
 * <= 63); a label value (empty, or such a name); an environment variable's name
 * ([-._a-zA-Z][-._a-zA-Z0-9]*). */
bool af_k8s_dns_label(const char *s, size_t n);
bool af_k8s_dns_subdomain(const char *s, size_t n);
bool af_k8s_qualified_name(const char *s);
bool af_k8s_label_value(const char *s);
bool af_k8s_env_name(const char *s);
/* The value of `key` in labels packed "key\0value\0...\0\0" (NULL is fine), or NULL. */
const char *af_packed_get(const char *packed, const char *key);
/*
 * Durations, one grammar for the policy, the annotations and the simulator:
 *
 *     duration = "0" | term { term } | number      (the last only with AF_DURATION_SECONDS)
 *     term     = number unit                       unit = "s" | "m" | "h" | "d"
 *     number   = digit { digit } [ "." digit { digit } ]   (the fraction only with
 *                                                           AF_DURATION_FRACTIONS)
 *
 * Terms are summed ("1h30m" is 5400); no sign, blanks or exponent. A bare number is seconds
 * and stands alone ("90", not "1h30"). The policy and annotations take whole numbers, each with
 * its unit ("90s", "10m", "24h", "2d", "1d12h"; a bare "24" could mean hours), within
 * AF_DURATION_MAX_S (ten years); the simulator's files also take "90" and "1.5h"
 * (af_sim_parse_duration). Returns 0 with *out in seconds, or AF_EINVAL when `s` is not of
 * that form or is longer than `max` seconds, leaving *out alone.
 */
#define AF_DURATION_MAX_S (3650.0 * 86400)
enum {
    AF_DURATION_SECONDS = 1 << 0,     /* a bare number alone is seconds */
    AF_DURATION_FRACTIONS = 1 << 1,   /* numbers may have a fraction */
};
int af_parse_duration(const char *s, unsigned flags, double max, double *out) AF_MUST_CHECK;
/* How long `secs` is, for people: "12 s", "4 min", "3 h", "5 days" (negative: "0 s"). */
void af_format_age(double secs, char *buf, size_t len);
double af_wall_time(void);

#endif
