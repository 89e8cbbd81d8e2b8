/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON text to a jansson tree, for the Kubernetes objects the decoders read.
 *
 * json_loadb reads its input a character at a time through a stream with look-ahead,
 * UTF-8 decoding and position tracking: about 130 instructions a byte, two thirds of a
 * 150,000-pod list's sync (BENCHMARKS.md, "Decoding a pod"). This reader walks the bytes
 * once, skips runs of plain string bytes a word at a time and builds the same tree with
 * jansson's own constructors, so every decoder above it is unchanged.
 *
 * It accepts and refuses what json_loadb(text, len, flags) does, for the flags
 * JSON_ALLOW_NUL and JSON_DECODE_ANY: RFC 8259 JSON, one value, white space around it
 * (an object or array unless JSON_DECODE_ANY); strings
 * valid UTF-8 without control characters, \u escapes paired as UTF-16 (no lone
 * surrogates), "\u0000" only with JSON_ALLOW_NUL and never in a key; duplicate keys
 * allowed, the last one kept; integers that fit json_int_t, other numbers as doubles
 * that do not overflow; nesting at most 2048 deep. fuzz_objects checks the two against
 * each other on every input it makes. Messages say what was wrong at which byte.
 */
#include <jansson.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/util.h"
#include "codec/internal.h"
#include "accelfit/banned.h"

#define PARSE_MAX_DEPTH 2048   /* jansson's JSON_PARSER_MAX_DEPTH */

struct parser {
    const unsigned char *p, *end, *start;
    bool allow_nul;
    bool skip_unread;           /* AF__PARSE_SKIP_UNREAD */
    bool check_unread;          /* AF__PARSE_CHECK_UNREAD */
    int unbuilt;                /* > 0: inside a value that is checked, not built */
    int depth;
    struct af_buf str;          /* a string with escapes, unescaped */
    struct af__codec_perr *err;
};

static json_t *fail(struct parser *ps, const unsigned char *at, const char *fmt, ...)
    AF_PRINTF(3, 4);
static json_t *fail(struct parser *ps, const unsigned char *at, const char *fmt, ...)
{
    va_list ap;

    if (ps->err->text[0])
        return NULL;
    va_start(ap, fmt);
    vsnprintf(ps->err->text, sizeof(ps->err->text), fmt, ap);
    va_end(ap);
    ps->err->offset = (size_t)(at - ps->start);
    return NULL;
}

static void skip_ws(struct parser *ps)
{
    while (ps->p < ps->end &&
           (*ps->p == ' ' || *ps->p == '\n' || *ps->p == '\r' || *ps->p == '\t'))
        ps->p++;
}

/* The length of the valid UTF-8 sequence at s (first byte >= 0x80), or 0. */
static size_t utf8_seq(const unsigned char *s, const unsigned char *end)
{
    unsigned c = s[0];
    size_t n;
    unsigned cp;

    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    if ((size_t)(end - s) < n)
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    /* overlong forms, UTF-16 surrogates and beyond U+10FFFF */
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

static int hex4(const unsigned char *s, const unsigned char *end, unsigned *out)
{
    unsigned v = 0;

    if (end - s < 4)
        return -1;
    for (int i = 0; i < 4; i++) {
        unsigned c = s[i], d;
        if (c >= '0' && c <= '9')
            d = c - '0';
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            d = (c | 0x20) - 'a' + 10;
        else
            return -1;
        v = v << 4 | d;
    }
    *out = v;
    return 0;
}

static void put_utf8(struct af_buf *b, unsigned cp)
{
    char u[4];
    size_t n;

    if (cp < 0x80) {
        u[0] = (char)cp, n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | cp >> 6), u[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | cp >> 12), u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
    } else {
        u[0] = (char)(0xf0 | cp >> 18), u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), u[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
    }
    af_assert(af_buf_add(b, u, n) == 0);
}

/* One escape after a backslash at ps->p (which points past it); appended to ps->str. */
static int escape(struct parser *ps, bool *nul)
{
    const unsigned char *at = ps->p - 1;
    unsigned cp, lo;
    char c;

    if (ps->p >= ps->end)
        return fail(ps, at, "premature end of input in a string"), -1;
    switch (*ps->p++) {
    case '"': c = '"'; break;
    case '\\': c = '\\'; break;
    case '/': c = '/'; break;
    case 'b': c = '\b'; break;
    case 'f': c = '\f'; break;
    case 'n': c = '\n'; break;
    case 'r': c = '\r'; break;
    case 't': c = '\t'; break;
    case 'u':
        if (hex4(ps->p, ps->end, &cp))
            return fail(ps, at, "invalid escape"), -1;
        ps->p += 4;
        if (cp >= 0xd800 && cp <= 0xdbff) {
            /* a high surrogate must be followed by a low one */
            if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' ||
                hex4(ps->p + 2, ps->end, &lo) || lo < 0xdc00 || lo > 0xdfff)
                return fail(ps, at, "invalid Unicode '\\u%04X'", cp), -1;
            ps->p += 6;
            cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
        } else if (cp >= 0xdc00 && cp <= 0xdfff) {
            return fail(ps, at, "invalid Unicode '\\u%04X'", cp), -1;
        } else if (cp == 0) {
            if (!ps->allow_nul)
                return fail(ps, at, "\\u0000 is not allowed without JSON_ALLOW_NUL"), -1;
            *nul = true;
        }
        put_utf8(&ps->str, cp);
        return 0;
    default:
        return fail(ps, at, "invalid escape"), -1;
    }
    af_assert(af_buf_add(&ps->str, &c, 1) == 0);
    return 0;
}

/* The bytes a string holds as they are: printable ASCII but the quote and the backslash. */
#define P16 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1
static const unsigned char plain[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,   /* 0x00: control characters */
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
    1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,   /* 0x20: '"' */
    P16, P16,
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 1, 1, 1,   /* 0x50: '\\' */
    P16, P16,                                         /* 0x60, 0x70; 0x80 on: UTF-8 */
};
#undef P16

/*
 * The string whose opening quote was just passed. Without escapes it is handed back
 * where it lies (*s, *n); with them it is unescaped into ps->str. *nul when it holds
 * a "\u0000".
 */
static int string(struct parser *ps, const char **s, size_t *n, bool *nul)
{
    const unsigned char *run = ps->p;
    bool copied = false;

    *nul = false;
    for (;;) {
        /* plain bytes: printable ASCII other than the quote and the backslash */
        while (ps->p < ps->end && plain[*ps->p])
            ps->p++;
        if (ps->p >= ps->end)
            return fail(ps, ps->p, "premature end of input in a string"), -1;
        unsigned char c = *ps->p;
        if (c == '"') {
            if (copied) {
                af_assert(af_buf_add(&ps->str, run, (size_t)(ps->p - run)) == 0);
                *s = ps->str.buf ? ps->str.buf : "";
                *n = ps->str.len;
            } else {
                *s = (const char *)run;
                *n = (size_t)(ps->p - run);
            }
            ps->p++;
            return 0;
        }
        if (c < 0x20)
            return fail(ps, ps->p, "control character 0x%x", c), -1;
        if (c >= 0x80) {
            size_t k = utf8_seq(ps->p, ps->end);
            if (!k)
                return fail(ps, ps->p, "invalid UTF-8"), -1;
            ps->p += k;
            continue;
        }
        /* a backslash */
        if (!copied) {
            af_buf_reset(&ps->str);
            copied = true;
        }
        af_assert(af_buf_add(&ps->str, run, (size_t)(ps->p - run)) == 0);
        ps->p++;
        if (escape(ps, nul))
            return -1;
        run = ps->p;
    }
}

static json_t *number(struct parser *ps)
{
    const unsigned char *s = ps->p, *q = ps->p;
    bool real = false;
    char tmp[64], *copy = tmp, *endp;
    size_t n;
    json_t *v;

    if (q < ps->end && *q == '-')
        q++;
    if (q < ps->end && *q == '0') {
        q++;
    } else if (q < ps->end && *q >= '1' && *q <= '9') {
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    } else {
        return fail(ps, s, "invalid token");
    }
    if (q < ps->end && *q == '.') {
        real = true;
        q++;
        if (q >= ps->end || *q < '0' || *q > '9')
            return fail(ps, s, "invalid token");
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    if (q < ps->end && (*q == 'e' || *q == 'E')) {
        real = true;
        q++;
        if (q < ps->end && (*q == '+' || *q == '-'))
            q++;
        if (q >= ps->end || *q < '0' || *q > '9')
            return fail(ps, s, "invalid token");
        while (q < ps->end && *q >= '0' && *q <= '9')
            q++;
    }
    n = (size_t)(q - s);
    if (n >= sizeof(tmp))
        copy = af_xmalloc(n + 1);
    memcpy(copy, s, n);
    copy[n] = '\0';
    errno = 0;
    if (!real) {
        json_int_t i = strtoll(copy, &endp, 10);
        if (errno == ERANGE)
            v = fail(ps, s, i < 0 ? "too big negative integer" : "too big integer");
        else
            v = json_integer(i);
    } else {
        double d = strtod(copy, &endp);
        if (errno == ERANGE && isinf(d))
            v = fail(ps, s, "real number overflow");
        else
            v = json_real(d);
    }
    if (copy != tmp)
        af_free(copy);
    ps->p = q;
    if (v && ps->unbuilt) {
        json_decref(v);
        v = json_null();
    }
    return v;
}

static json_t *value(struct parser *ps);

/*
 * The object or array value of a member the decoders never read, passed over without a
 * tree: null. NULL (nothing passed) when the value is anything else, or is not closed,
 * for value() to read or refuse.
 */
static json_t *skipped(struct parser *ps)
{
    struct af__codec_nest nest = {0, false, false};
    const char *text = (const char *)ps->start;
    size_t at, end;
    bool closed;

    skip_ws(ps);
    if (ps->p >= ps->end || (*ps->p != '{' && *ps->p != '['))
        return NULL;
    at = (size_t)(ps->p - ps->start);
    end = af__codec_nest_scan(&nest, text, at, (size_t)(ps->end - ps->start), &closed);
    if (!closed)
        return NULL;
    ps->p = ps->start + end;
    return json_null();
}

/*
 * Whether the value of member `key` is checked, not built (AF__PARSE_CHECK_UNREAD): an
 * object or array no decoder reads, as for AF__PARSE_SKIP_UNREAD, but "affinity" is
 * built: the pod to schedule has its required node affinity read (objects.c).
 */
static bool check_only(const struct parser *ps, const char *key, size_t n)
{
    return ps->check_unread && !ps->unbuilt && ps->p < ps->end &&
           (*ps->p == '{' || *ps->p == '[') && af__codec_unread_key(key, n) &&
           !(n == 8 && !memcmp(key, "affinity", 8));
}

/* AF__PARSE_SKIP_UNREAD: whether the value ahead, of member `key`, is passed over. */
static bool skip_this(const struct parser *ps, const char *key, size_t n)
{
    return ps->skip_unread && ps->p < ps->end && (*ps->p == '{' || *ps->p == '[') &&
           af__codec_unread_key(key, n);
}

static json_t *object(struct parser *ps)
{
    /* unbuilt: json_null(), a static that decref leaves alone, stands for the object */
    json_t *obj = ps->unbuilt ? json_null() : json_object();
    const unsigned char *at;
    char kbuf[128], *key;
    const char *s;
    size_t n;
    bool nul;

    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == '}') {
        ps->p++;
        return obj;
    }
    for (;;) {
        skip_ws(ps);
        at = ps->p;
        if (ps->p >= ps->end || *ps->p != '"')
            goto bad_key;
        ps->p++;
        if (string(ps, &s, &n, &nul))
            goto err;
        if (nul) {
            fail(ps, at, "NUL byte in object key not supported");
            goto err;
        }
        /* the key must outlive ps->str, which the value's strings reuse; a value that is
         * checked, not built, keeps no key (NULL) */
        key = ps->unbuilt ? NULL : n < sizeof(kbuf) ? kbuf : af_xmalloc(n + 1);
        if (key) {
            memcpy(key, s, n);
            key[n] = '\0';
        }
        skip_ws(ps);
        if (ps->p >= ps->end || *ps->p != ':') {
            if (key != kbuf)
                af_free(key);
            fail(ps, ps->p, "':' expected");
            goto err;
        }
        ps->p++;
        skip_ws(ps);
        json_t *v = !ps->unbuilt && skip_this(ps, key, n) ? skipped(ps) : NULL;
        if (!v && check_only(ps, key, n)) {
            ps->unbuilt++;
            v = value(ps);   /* json_null() when the value is well formed */
            ps->unbuilt--;
        } else if (!v) {
            v = value(ps);
        }
        if (!v) {
            if (key != kbuf)
                af_free(key);
            goto err;
        }
        if (ps->unbuilt)
            json_decref(v);
        else
            json_object_set_new_nocheck(obj, key, v);
        if (key != kbuf)
            af_free(key);
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == '}') {
            ps->p++;
            return obj;
        }
        fail(ps, ps->p, ps->p < ps->end ? "'}' expected" : "premature end of input");
        goto err;
    }
bad_key:
    fail(ps, at, ps->p < ps->end ? "string or '}' expected" : "premature end of input");
err:
    json_decref(obj);
    return NULL;
}

static json_t *array(struct parser *ps)
{
    json_t *arr = ps->unbuilt ? json_null() : json_array();

    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == ']') {
        ps->p++;
        return arr;
    }
    for (;;) {
        json_t *v = value(ps);
        if (!v)
            break;
        if (ps->unbuilt)
            json_decref(v);
        else
            json_array_append_new(arr, v);
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == ']') {
            ps->p++;
            return arr;
        }
        fail(ps, ps->p, ps->p < ps->end ? "']' expected" : "premature end of input");
        break;
    }
    json_decref(arr);
    return NULL;
}

static json_t *literal(struct parser *ps, const char *word, json_t *v)
{
    size_t n = strlen(word);

    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n))
        return fail(ps, ps->p, "invalid token");
    ps->p += n;
    return v;
}

static json_t *value(struct parser *ps)
{
    json_t *v;
    const char *s;
    size_t n;
    bool nul;

    skip_ws(ps);
    if (ps->p >= ps->end)
        return fail(ps, ps->p, "premature end of input");
    switch (*ps->p) {
    case '{':
    case '[':
        if (ps->depth >= PARSE_MAX_DEPTH)
            return fail(ps, ps->p, "maximum parsing depth reached");
        ps->depth++;
        v = *ps->p++ == '{' ? object(ps) : array(ps);
        ps->depth--;
        return v;
    case '"':
        ps->p++;
        if (string(ps, &s, &n, &nul))
            return NULL;
        return ps->unbuilt ? json_null() : json_stringn_nocheck(s, n);
    case 't':
        return literal(ps, "true", json_true());
    case 'f':
        return literal(ps, "false", json_false());
    case 'n':
        return literal(ps, "null", json_null());
    default:
        return number(ps);
    }
}

json_t *af__codec_parse(const char *text, size_t len, size_t flags, struct af__codec_perr *err)
{
    struct parser ps = {
        .p = (const unsigned char *)text,
        .end = (const unsigned char *)text + len,
        .start = (const unsigned char *)text,
        .allow_nul = (flags & JSON_ALLOW_NUL) != 0,
        .skip_unread = (flags & AF__PARSE_SKIP_UNREAD) != 0,
        .check_unread = (flags & AF__PARSE_CHECK_UNREAD) != 0,
        .str = AF_BUF_INIT(0),
        .err = err,
    };
    json_t *v;

    err->text[0] = '\0';
    err->offset = 0;
    skip_ws(&ps);
    if (!(flags & JSON_DECODE_ANY) && (ps.p >= ps.end || (*ps.p != '{' && *ps.p != '[')))
        v = fail(&ps, ps.p, "'[' or '{' expected");
    else
        v = value(&ps);
    if (v) {
        skip_ws(&ps);
        if (ps.p < ps.end) {
            json_decref(v);
            v = fail(&ps, ps.p, "end of file expected");
        }
    }
    af_buf_release(&ps.str);
    return v;
}

void af__codec_line_col(const char *text, size_t offset, int *line, int *col)
{
    size_t bol = 0;

    *line = 1;
    for (size_t i = 0; i < offset; i++)
        if (text[i] == '\n')
            (*line)++, bol = i + 1;
    *col = (int)(offset - bol) + 1;
}
