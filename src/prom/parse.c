/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Prometheus HTTP API answers into a utilization snapshot, read in place by a pull parser
 * (never as a tree). An instant query answers
 * {"status":"success","data":{"resultType":"vector","result":[{"metric":{...},
 * "value":[<unix time>,"<value>"]}]}}; a range query the same with "matrix" and
 * "values". Each series is mapped to a Kubernetes node by the first of the policy's
 * node labels it carries (an "instance" loses its ":port"), to a device by the device
 * labels it carries, and to "held by a pod" by the pod labels. A series no label maps
 * is counted and dropped; a value that is not a number drops that series only, and one
 * out of its metric's range or timestamped in the future is dropped and counted. The
 * snapshot keeps, per node, the last value and timestamp of each series, sorted by
 * node name for af_utilization_find, all in one arena.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/prom.h"
#include "accelfit/utilization.h"
#include "accelfit/banned.h"

struct pending {
    char *node;                /* arena */
    struct af_utilization_sample s;
};

struct af_prom_build {
    struct af_arena arena;     /* node names; handed to the snapshot */
    struct pending *v;
    size_t n, cap;
    size_t unmapped;
    double now;                /* 0: no check of future timestamps */
    size_t discarded[AF_UTILIZATION_DISCARD__COUNT];
};

struct af_prom_build *af_prom_build_new(void)
{
    return af_xcalloc(1, sizeof(struct af_prom_build));
}

void af_prom_build_set_now(struct af_prom_build *b, double now)
{
    b->now = now;
}

/* ---- a pull parser over the answer's bytes ------------------------------------------------ */

/*
 * The answer is read where it lies, never as a tree: a tree of a 64 MiB answer (a
 * json_t, a hash table and an allocation per value) took over 1 GiB. Each series is
 * decoded into fixed buffers on the stack and kept as one struct pending, and only the
 * first AF_UTILIZATION_MAX_SERIES series of a round are kept. The grammar is JSON's (RFC 8259),
 * checked whole: an answer that is not JSON is refused with the line and column, as
 * before.
 */
#define MAX_DEPTH 64
#define LABEL_MAX 256

struct jp {
    const char *p, *end, *start;
    int depth;
    char err[120];
    const char *err_at;
};

static bool fail(struct jp *j, const char *what)
{
    if (!j->err[0]) {
        snprintf(j->err, sizeof(j->err), "%s", what);
        j->err_at = j->p;
    }
    return false;
}

static void ws(struct jp *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

/* Consumes `c` after blanks. */
static bool eat(struct jp *j, char c)
{
    ws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return true;
    }
    return false;
}

static bool peek(struct jp *j, char c)
{
    ws(j);
    return j->p < j->end && *j->p == c;
}

static int hex4(const char *s)
{
    int v = 0;

    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= c - '0';
        else if (c >= 'a' && c <= 'f')
            v |= c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v |= c - 'A' + 10;
        else
            return -1;
    }
    return v;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | (cp >> 12 & 0x3F));
    o[2] = (char)(0x80 | (cp >> 6 & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/*
 * A string (at its opening quote after blanks), decoded into `out` (n bytes, may be
 * NULL to only check it). *fit is false when the text did not fit (out then holds "").
 * A NUL in the text never fits: label values are C strings.
 */
static bool string(struct jp *j, char *out, size_t n, bool *fit)
{
    size_t o = 0;
    bool ok = true;

    if (!eat(j, '"'))
        return fail(j, "expected a string");
    for (;;) {
        char tmp[4];
        size_t k = 0;
        unsigned char c;
        if (j->p >= j->end)
            return fail(j, "unterminated string");
        c = (unsigned char)*j->p;
        if (c == '"') {
            j->p++;
            break;
        }
        if (c < 0x20)
            return fail(j, "control character in a string");
        if (c == '\\') {
            if (j->end - j->p < 2)
                return fail(j, "unterminated string");
            switch (j->p[1]) {
            case '"': tmp[k++] = '"'; break;
            case '\\': tmp[k++] = '\\'; break;
            case '/': tmp[k++] = '/'; break;
            case 'b': tmp[k++] = '\b'; break;
            case 'f': tmp[k++] = '\f'; break;
            case 'n': tmp[k++] = '\n'; break;
            case 'r': tmp[k++] = '\r'; break;
            case 't': tmp[k++] = '\t'; break;
            case 'u': {
                int cp, lo;
                if (j->end - j->p < 6 || (cp = hex4(j->p + 2)) < 0)
                    return fail(j, "invalid \\u escape");
                j->p += 6;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' ||
                        (lo = hex4(j->p + 2)) < 0xDC00 || lo > 0xDFFF)
                        return fail(j, "invalid \\u surrogate pair");
                    j->p += 6;
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                    return fail(j, "invalid \\u surrogate pair");
                }
                if (cp == 0)
                    ok = false;
                k = put_utf8(tmp, (unsigned)cp);
                j->p -= 2;   /* the common step below */
                break;
            }
            default:
                return fail(j, "invalid escape");
            }
            j->p += 2;
        } else {
            tmp[k++] = (char)c;
            j->p++;
        }
        if (out && ok) {
            if (o + k < n) {
                memcpy(out + o, tmp, k);
                o += k;
            } else {
                ok = false;
            }
        }
    }
    if (out) {
        out[ok ? o : 0] = '\0';
        if (fit)
            *fit = ok;
    }
    return true;
}

/* A number as JSON spells it; *out its value. */
static bool number(struct jp *j, double *out)
{
    const char *s;
    char buf[64], *end;
    size_t len;

    ws(j);
    s = j->p;
    if (j->p < j->end && *j->p == '-')
        j->p++;
    if (j->p < j->end && *j->p == '0') {
        j->p++;
    } else if (j->p < j->end && *j->p >= '1' && *j->p <= '9') {
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++;
    } else {
        return fail(j, "invalid value");
    }
    if (j->p < j->end && *j->p == '.') {
        j->p++;
        if (j->p >= j->end || *j->p < '0' || *j->p > '9')
            return fail(j, "invalid number");
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++;
    }
    if (j->p < j->end && (*j->p == 'e' || *j->p == 'E')) {
        j->p++;
        if (j->p < j->end && (*j->p == '+' || *j->p == '-'))
            j->p++;
        if (j->p >= j->end || *j->p < '0' || *j->p > '9')
            return fail(j, "invalid number");
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++;
    }
    if (out) {
        len = (size_t)(j->p - s);
        if (len >= sizeof(buf)) {
            *out = NAN;   /* longer than any timestamp: not one */
        } else {
            memcpy(buf, s, len);
            buf[len] = '\0';
            *out = strtod(buf, &end);
        }
    }
    return true;
}

static bool literal(struct jp *j, const char *word)
{
    size_t n = strlen(word);

    ws(j);
    if ((size_t)(j->end - j->p) < n || memcmp(j->p, word, n))
        return fail(j, "invalid value");
    j->p += n;
    return true;
}

static bool value(struct jp *j);

/* Iterates an object: each call reads the next key into `key` (n bytes); false at the
 * closing brace (or on an error: check j->err). `first` is true on the first call. */
static bool next_key(struct jp *j, bool *first, char *key, size_t n, bool *fit)
{
    if (*first) {
        *first = false;
        if (!eat(j, '{'))
            return fail(j, "expected an object");
        if (++j->depth > MAX_DEPTH)
            return fail(j, "nested too deep");
        if (eat(j, '}')) {
            j->depth--;
            return false;
        }
    } else if (eat(j, '}')) {
        j->depth--;
        return false;
    } else if (!eat(j, ',')) {
        return fail(j, "expected ',' or '}'");
    }
    if (!string(j, key, n, fit))
        return false;
    if (!eat(j, ':'))
        return fail(j, "expected ':'");
    return true;
}

/* Iterates an array: true before each item, false at the closing bracket or on error. */
static bool next_item(struct jp *j, bool *first)
{
    if (*first) {
        *first = false;
        if (!eat(j, '['))
            return fail(j, "expected an array");
        if (++j->depth > MAX_DEPTH)
            return fail(j, "nested too deep");
        if (eat(j, ']')) {
            j->depth--;
            return false;
        }
        return true;
    }
    if (eat(j, ']')) {
        j->depth--;
        return false;
    }
    if (!eat(j, ','))
        return fail(j, "expected ',' or ']'");
    return true;
}

/* Any value, checked and skipped. */
static bool value(struct jp *j)
{
    bool first = true;

    ws(j);
    if (j->p >= j->end)
        return fail(j, "unexpected end of input");
    switch (*j->p) {
    case '{':
        while (next_key(j, &first, NULL, 0, NULL))
            if (!value(j))
                return false;
        return !j->err[0];
    case '[':
        while (next_item(j, &first))
            if (!value(j))
                return false;
        return !j->err[0];
    case '"':
        return string(j, NULL, 0, NULL);
    case 't':
        return literal(j, "true");
    case 'f':
        return literal(j, "false");
    case 'n':
        return literal(j, "null");
    default:
        return number(j, NULL);
    }
}

/* A value's bytes, skipped and checked: [*s, *e). */
static bool span(struct jp *j, const char **s, const char **e)
{
    ws(j);
    *s = j->p;
    if (!value(j))
        return false;
    *e = j->p;
    return true;
}

/* A string value, or any other value skipped (*is_str false). */
static bool string_or_skip(struct jp *j, char *out, size_t n, bool *is_str, bool *fit)
{
    *is_str = peek(j, '"');
    if (*is_str)
        return string(j, out, n, fit);
    return value(j);
}

/* ---- one series --------------------------------------------------------------------------- */

struct series {
    char node[AF_UTILIZATION_MAX_LABELS][LABEL_MAX];     /* the node labels' values ("": absent) */
    char device[AF_UTILIZATION_MAX_LABELS][40];
    bool pod;                                     /* a pod label is set */
    bool metric;                                  /* "metric" was an object */
    bool point;                                   /* the value (or last of values) is valid */
    double ts, value, idle_since;
    int bad;                                      /* enum af_utilization_discard + 1 of the last point */
};

static int label_index(const char (*labels)[AF_UTILIZATION_LABEL_MAX], int n, const char *key)
{
    for (int i = 0; i < n; i++)
        if (!strcmp(labels[i], key))
            return i;
    return -1;
}

static bool metric_object(struct jp *j, const struct af_utilization_policy *up, struct series *se)
{
    bool first = true, fit, is_str;
    char key[AF_UTILIZATION_LABEL_MAX + 1], val[LABEL_MAX];

    if (!peek(j, '{'))
        return value(j);   /* not an object: the series is skipped */
    se->metric = true;
    while (next_key(j, &first, key, sizeof(key), &fit)) {
        int ni = fit ? label_index(up->node_labels, up->n_node_labels, key) : -1;
        int di = fit ? label_index(up->device_labels, up->n_device_labels, key) : -1;
        int pi = fit ? label_index(up->pod_labels, up->n_pod_labels, key) : -1;
        bool vfit = true;
        if (!string_or_skip(j, val, sizeof(val), &is_str, &vfit))
            return false;
        if (!is_str || !vfit)
            continue;
        if (ni >= 0)
            snprintf(se->node[ni], sizeof(se->node[ni]), "%s", val);
        if (di >= 0) {
            /* the device name is at most 39 bytes in all: a longer value is cut */
            size_t l = strnlen(val, sizeof(se->device[di]) - 1);
            memcpy(se->device[di], val, l);
            se->device[di][l] = '\0';
        }
        if (pi >= 0 && val[0])
            se->pod = true;
    }
    return !j->err[0];
}

/*
 * One [<time>, "<value>"] point, scaled and checked for metric `m`: a utilization is a
 * fraction, clamped to [0, 1] within 0.05 of it (rate() rounding) and dropped beyond;
 * memory is from 0 to 2^60 bytes; a time more than AF_UTILIZATION_FUTURE_SKEW_S after `now`
 * (when known) is dropped. Returns true for a point kept; *bad says why one was not
 * (0: not a point at all).
 */
static bool point(struct jp *j, enum af_utilization_metric m, double scale, double now, double *ts,
                  double *v, int *bad, bool *ok)
{
    bool first = true, fit = false, is_str = false;
    char text[64];
    int n = 0;
    double t = NAN, x = NAN;
    char *end;

    *ok = false;
    *bad = 0;
    if (!peek(j, '['))
        return value(j);
    while (next_item(j, &first)) {
        if (n == 0 && !peek(j, '"') && !peek(j, '[') && !peek(j, '{') && !peek(j, 't') &&
            !peek(j, 'f') && !peek(j, 'n')) {
            if (!number(j, &t))
                return false;
        } else if (n == 1) {
            if (!string_or_skip(j, text, sizeof(text), &is_str, &fit))
                return false;
        } else if (!value(j)) {
            return false;
        }
        n++;
    }
    if (j->err[0])
        return false;
    if (n != 2 || !is_str || !fit || !isfinite(t) || !(t > 0))
        return true;
    x = strtod(text, &end);
    if (end == text || *end)
        return true;
    x *= scale;
    if (!isfinite(x))
        return true;
    if (m == AF_UM_GPU_UTIL || m == AF_UM_NEURONCORE_UTIL || m == AF_UM_CPU_UTIL) {
        if (x < -0.05 || x > 1.05) {
            *bad = AF_UTILIZATION_DISCARD_RANGE + 1;
            return true;
        }
        x = x < 0 ? 0 : x > 1 ? 1 : x;
    } else if (x < 0 || x > 1152921504606846976.0) {
        *bad = AF_UTILIZATION_DISCARD_RANGE + 1;
        return true;
    }
    if (now > 0 && t > now + AF_UTILIZATION_FUTURE_SKEW_S) {
        *bad = AF_UTILIZATION_DISCARD_FUTURE + 1;
        return true;
    }
    *ts = t;
    *v = x;
    *ok = true;
    return true;
}

static bool series_object(struct jp *j, struct af_prom_build *b, const struct af_utilization_policy *up,
                          enum af_utilization_metric m, bool matrix, struct series *se)
{
    double scale = up->q[m].scale > 0 ? up->q[m].scale : 1;
    bool first = true, fit, seen_metric = false, seen_value = false;
    char key[16];

    memset(se, 0, sizeof(*se));
    if (!peek(j, '{'))
        return value(j);
    while (next_key(j, &first, key, sizeof(key), &fit)) {
        if (fit && !strcmp(key, "metric")) {
            if (seen_metric)
                return fail(j, "duplicate key 'metric'");
            seen_metric = true;
            if (!metric_object(j, up, se))
                return false;
        } else if (fit && !strcmp(key, matrix ? "values" : "value")) {
            if (seen_value)
                return fail(j, "duplicate key 'value'");
            seen_value = true;
            if (!matrix) {
                if (!point(j, m, scale, b->now, &se->ts, &se->value, &se->bad, &se->point))
                    return false;
            } else {
                /* the last point is the value; the trailing run below idle_below, the
                 * idle time: read forward, the run restarts at each point that breaks it */
                bool ifirst = true, run = false;
                if (!peek(j, '[')) {
                    if (!value(j))
                        return false;
                    continue;   /* not a list of points: no value */
                }
                while (next_item(j, &ifirst)) {
                    double t = 0, x = 0;
                    bool ok;
                    if (!point(j, m, scale, b->now, &t, &x, &se->bad, &ok))
                        return false;
                    se->point = ok;
                    if (ok) {
                        se->ts = t;
                        se->value = x;
                    }
                    if (ok && x < up->idle_below) {
                        if (!run)
                            se->idle_since = t;
                        run = true;
                    } else {
                        run = false;
                        se->idle_since = 0;
                    }
                }
                if (j->err[0])
                    return false;
            }
        } else if (!value(j)) {
            return false;
        }
    }
    return !j->err[0];
}

/* The node a series belongs to, or NULL. */
static const char *series_node(const struct af_utilization_policy *up, const struct series *se,
                               char *buf, size_t n)
{
    for (int i = 0; i < up->n_node_labels; i++) {
        const char *v = se->node[i];
        size_t len;
        if (!*v)
            continue;
        len = strlen(v);
        if (!strcmp(up->node_labels[i], "instance")) {
            /* "10.0.1.10:9100" -> "10.0.1.10"; "[fd00::1]:9100" -> "fd00::1" */
            const char *colon = strrchr(v, ':');
            if (v[0] == '[' && colon && colon > v && colon[-1] == ']') {
                v++;
                len = (size_t)(colon - 1 - v);
            } else if (colon && !strchr(v, ']') && colon == strchr(v, ':') &&
                       strspn(colon + 1, "0123456789") == strlen(colon + 1)) {
                len = (size_t)(colon - v);
            }
        }
        if (len == 0 || len >= n)
            continue;
        memcpy(buf, v, len);
        buf[len] = '\0';
        return buf;
    }
    return NULL;
}

static void series_device(const struct af_utilization_policy *up, const struct series *se, char *out,
                          size_t n)
{
    size_t used = 0;

    out[0] = '\0';
    for (int i = 0; i < up->n_device_labels && used < n; i++)
        if (se->device[i][0])
            used += (size_t)snprintf(out + used, n - used, "%s%s", used ? "/" : "",
                                     se->device[i]);
}

static void keep(struct af_prom_build *b, const struct af_utilization_policy *up, enum af_utilization_metric m,
                 const struct series *se)
{
    char node[LABEL_MAX];
    struct pending *p;

    if (!se->metric)
        return;
    if (!se->point) {
        if (se->bad)
            b->discarded[se->bad - 1]++;
        return;
    }
    if (!series_node(up, se, node, sizeof(node))) {
        b->unmapped++;
        return;
    }
    if (b->n >= AF_UTILIZATION_MAX_SERIES) {
        b->discarded[AF_UTILIZATION_DISCARD_OVER_LIMIT]++;
        return;
    }
    AF_GROW(b->v, b->cap, b->n + 1);
    p = &b->v[b->n++];
    memset(p, 0, sizeof(*p));
    p->node = af_arena_strdup(&b->arena, node);
    p->s.metric = (uint8_t)m;
    /* neuron-monitor has a NeuronCore series only while a runtime holds the core */
    p->s.held = m == AF_UM_NEURONCORE_UTIL || se->pod;
    series_device(up, se, p->s.device, sizeof(p->s.device));
    p->s.value = se->value;
    p->s.ts = se->ts;
    p->s.idle_since = se->idle_since;
}

/* Line and column (1-based) of `at` in the answer. */
static void position(const struct jp *j, const char *at, int *line, int *column)
{
    *line = 1;
    *column = 1;
    for (const char *q = j->start; q < at && q < j->end; q++) {
        if (*q == '\n') {
            (*line)++;
            *column = 1;
        } else {
            (*column)++;
        }
    }
}

static int not_json(const struct jp *j, char *why, size_t whylen)
{
    int line, column;

    position(j, j->err_at ? j->err_at : j->p, &line, &column);
    snprintf(why, whylen, "not JSON: %s (line %d, column %d)", j->err, line, column);
    return AF_EPARSE;
}

int af_prom_build_add(struct af_prom_build *b, const struct af_utilization_policy *up,
                      enum af_utilization_metric m, const char *body, size_t len, char *why,
                      size_t whylen)
{
    struct jp j = {body, body + len, body, 0, "", NULL};
    const char *data_s = NULL, *data_e = NULL, *res_s = NULL, *res_e = NULL;
    char key[16], status[24] = "", type[24] = "", etype[48] = "", etext[208] = "";
    bool first = true, fit, is_str, have_status = false, matrix;
    struct series se;
    size_t kept0 = b->n, unmapped0 = b->unmapped, disc0[AF_UTILIZATION_DISCARD__COUNT];

    memcpy(disc0, b->discarded, sizeof(disc0));
    /* the answer: status, data (read after the whole answer is checked), errorType, error */
    if (!peek(&j, '{')) {
        if (!value(&j))
            return not_json(&j, why, whylen);
    } else {
        while (next_key(&j, &first, key, sizeof(key), &fit)) {
            bool ok = true;
            if (fit && !strcmp(key, "status")) {
                if (have_status)
                    return fail(&j, "duplicate key 'status'"), not_json(&j, why, whylen);
                have_status = true;
                ok = string_or_skip(&j, status, sizeof(status), &is_str, &fit);
                if (ok && !is_str)
                    status[0] = '\0';
            } else if (fit && !strcmp(key, "data")) {
                if (data_s)
                    return fail(&j, "duplicate key 'data'"), not_json(&j, why, whylen);
                ok = span(&j, &data_s, &data_e);
            } else if (fit && !strcmp(key, "errorType")) {
                ok = string_or_skip(&j, etype, sizeof(etype), &is_str, &fit);
            } else if (fit && !strcmp(key, "error")) {
                ok = string_or_skip(&j, etext, sizeof(etext), &is_str, &fit);
            } else {
                ok = value(&j);
            }
            if (!ok)
                return not_json(&j, why, whylen);
        }
        if (j.err[0])
            return not_json(&j, why, whylen);
    }
    ws(&j);
    if (j.p != j.end) {
        fail(&j, "end of file expected");
        return not_json(&j, why, whylen);
    }
    if (!have_status || strcmp(status, "success")) {
        snprintf(why, whylen, "status %.20s: %.40s: %.200s", have_status ? status : "missing",
                 etype[0] ? etype : "?", etext[0] ? etext : "no error text");
        return AF_EPARSE;
    }
    /* data: resultType and the result's span */
    if (data_s && *data_s == '{') {
        struct jp d = {data_s, data_e, body, 0, "", NULL};
        first = true;
        while (next_key(&d, &first, key, sizeof(key), &fit)) {
            bool ok;
            if (fit && !strcmp(key, "resultType"))
                ok = string_or_skip(&d, type, sizeof(type), &is_str, &fit);
            else if (fit && !strcmp(key, "result"))
                ok = span(&d, &res_s, &res_e);
            else
                ok = value(&d);
            if (!ok)
                break;
        }
    }
    if (!type[0] || !res_s || *res_s != '[' || (strcmp(type, "vector") && strcmp(type, "matrix"))) {
        snprintf(why, whylen, "expected data.resultType vector or matrix with a result array%s%s",
                 type[0] ? ", got " : "", type);
        return AF_EPARSE;
    }
    matrix = !strcmp(type, "matrix");
    {
        struct jp r = {res_s, res_e, body, 0, "", NULL};
        first = true;
        while (next_item(&r, &first)) {
            if (!series_object(&r, b, up, m, matrix, &se))
                break;
            keep(b, up, m, &se);
        }
        if (r.err[0]) {
            /* cannot happen: the span was checked; undo this answer's series anyway */
            b->n = kept0;
            b->unmapped = unmapped0;
            memcpy(b->discarded, disc0, sizeof(disc0));
            return not_json(&r, why, whylen);
        }
    }
    return 0;
}

int af__prom_build_add_file(struct af_prom_build *b, const struct af_utilization_policy *up,
                            const char *body, size_t len, char *why, size_t whylen)
{
    struct jp j = {body, body + len, body, 0, "", NULL};
    bool first = true, fit, seen = false;
    char key[32], what[300];
    const char *qs, *qe;

    if (!peek(&j, '{')) {
        if (!value(&j))
            return not_json(&j, why, whylen);
    } else {
        while (next_key(&j, &first, key, sizeof(key), &fit)) {
            if (!(fit && !strcmp(key, "queries"))) {
                if (!value(&j))
                    return not_json(&j, why, whylen);
                continue;
            }
            if (seen) {
                fail(&j, "duplicate key 'queries'");
                return not_json(&j, why, whylen);
            }
            seen = true;
            if (!span(&j, &qs, &qe))
                return not_json(&j, why, whylen);
        }
        if (j.err[0])
            return not_json(&j, why, whylen);
    }
    ws(&j);
    if (j.p != j.end) {
        fail(&j, "end of file expected");
        return not_json(&j, why, whylen);
    }
    if (!seen || *qs != '{') {
        snprintf(why, whylen, "expected an object with \"queries\": {\"gpu_util\": <answer>, ...}");
        return AF_EINVAL;
    }
    {
        struct jp q = {qs, qe, body, 0, "", NULL};
        first = true;
        while (next_key(&q, &first, key, sizeof(key), &fit)) {
            int m = fit ? af_utilization_metric_parse(key) : -1;
            const char *as, *ae;
            int rc;
            if (m < 0) {
                snprintf(why, whylen, "unknown query '%s'", fit ? key : "(too long)");
                return AF_EINVAL;
            }
            if (!span(&q, &as, &ae))
                return not_json(&q, why, whylen);
            rc = af_prom_build_add(b, up, (enum af_utilization_metric)m, as, (size_t)(ae - as), what,
                                   sizeof(what));
            if (rc) {
                snprintf(why, whylen, "queries.%s: %s", key, what);
                return AF_EINVAL;
            }
        }
        if (q.err[0])
            return not_json(&q, why, whylen);
    }
    return 0;
}

void af__prom_answer_error(const char *body, size_t len, char *out, size_t n)
{
    struct jp j = {body, body + len, body, 0, "", NULL};
    bool first = true, fit, is_str;
    char key[16];

    out[0] = '\0';
    if (!peek(&j, '{'))
        return;
    while (next_key(&j, &first, key, sizeof(key), &fit)) {
        if (fit && !strcmp(key, "error")) {
            if (!string_or_skip(&j, out, n, &is_str, &fit) || !is_str)
                out[0] = '\0';
            return;
        }
        if (!value(&j))
            return;
    }
}

static int cmp_pending(const void *a, const void *b)
{
    const struct pending *x = a, *y = b;
    int c = strcmp(x->node, y->node);

    if (c)
        return c;
    if (x->s.metric != y->s.metric)
        return x->s.metric < y->s.metric ? -1 : 1;
    return strcmp(x->s.device, y->s.device);
}

/* The same series in the previous snapshot, or NULL. */
static const struct af_utilization_sample *previous(const struct af_utilization_snapshot *prev,
                                             const char *node, const struct af_utilization_sample *s)
{
    const struct af_utilization_node *pn = af_utilization_find(prev, node);

    for (size_t i = 0; pn && i < pn->n; i++)
        if (pn->samples[i].metric == s->metric && !strcmp(pn->samples[i].device, s->device))
            return &pn->samples[i];
    return NULL;
}

struct af_utilization_snapshot *af_prom_build_finish(struct af_prom_build *b,
                                              const struct af_utilization_snapshot *prev,
                                              double idle_below)
{
    struct af_utilization_snapshot *s = af_xcalloc(1, sizeof(*s));
    size_t nodes = 0;

    atomic_init(&s->refcnt, 1);
    s->ok = true;
    s->unmapped = b->unmapped;
    memcpy(s->discarded, b->discarded, sizeof(s->discarded));
    if (b->n)
        qsort(b->v, b->n, sizeof(*b->v), cmp_pending);
    for (size_t i = 0; i < b->n; i++)
        nodes += i == 0 || strcmp(b->v[i].node, b->v[i - 1].node);
    s->nodes = af_arena_alloc(&b->arena, (nodes + 1) * sizeof(*s->nodes));
    for (size_t i = 0; i < b->n;) {
        struct af_utilization_node *n = &s->nodes[s->n_nodes++];
        size_t j = i;
        while (j < b->n && !strcmp(b->v[j].node, b->v[i].node))
            j++;
        n->name = b->v[i].node;
        n->n = j - i;
        n->samples = af_arena_alloc(&b->arena, n->n * sizeof(*n->samples));
        for (size_t k = 0; k < n->n; k++) {
            struct af_utilization_sample *smp = &n->samples[k];
            const struct af_utilization_sample *old;
            struct af_utilization_agg *a;
            *smp = b->v[i + k].s;
            a = &n->agg[smp->metric];
            if (a->devices < UINT16_MAX) {
                bool idle = smp->value < idle_below;
                a->devices++;
                a->idle += idle;
                a->held += smp->held;
                a->busy_unheld += !idle && !smp->held;
                a->sum += smp->value;
                if (a->devices == 1 || smp->value > a->max)
                    a->max = smp->value;
                if (a->oldest_ts == 0 || smp->ts < a->oldest_ts)
                    a->oldest_ts = smp->ts;
            }
            if (!(smp->value < idle_below)) {
                smp->idle_since = 0;
                continue;
            }
            /* Idle now: idle since the earlier of what this answer shows and what the last
             * round saw, if that one was idle too. */
            old = previous(prev, n->name, smp);
            if (old && old->idle_since > 0 &&
                (smp->idle_since == 0 || old->idle_since < smp->idle_since))
                smp->idle_since = old->idle_since;
            if (smp->idle_since == 0)
                smp->idle_since = smp->ts;
        }
        i = j;
    }
    af_index_init(&s->index, s->n_nodes, &b->arena);
    for (size_t i = 0; i < s->n_nodes; i++)
        af_index_add(&s->index, af_hash_str(AF_HASH_INIT, s->nodes[i].name), i);
    s->arena = b->arena;
    af_free(b->v);
    af_free(b);
    return s;
}
