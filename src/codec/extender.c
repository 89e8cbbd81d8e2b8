/* SPDX-License-Identifier: Apache-2.0 */
/*
 * extender/v1 on the wire: ExtenderArgs in, ExtenderFilterResult and
 * HostPriorityList out. The Go types have no JSON tags, so kube-scheduler
 * sends PascalCase names and its decoder matches them case-insensitively; we
 * do the same on input and always emit PascalCase. Unset pointers arrive as
 * `null`. In Nodes mode (nodeCacheCapable: false) the request's Node objects
 * are kept so the passing ones can be echoed back unchanged.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "accelfit/codec.h"

#include "codec/internal.h"
#include "accelfit/banned.h"

struct af_ext_args {
    json_t *root;                      /* the whole request, owning the items below; NULL
                                          when the fast path decoded it */
    struct af_pod_info *pod;
    bool nodes_mode;
    size_t n;
    char **names;                      /* owned; each owned unless names_block is set */
    char *names_block;                 /* fast path: every name, one allocation */
    uint32_t *name_len;                /* fast path: each name's length (and each is plain:
                                          printable ASCII without '"' or '\\') */
    struct af_node_info **nodes;       /* Nodes mode: owned refs */
    json_t **items;                    /* Nodes mode: borrowed from root */
};

void af_ext_args_free(struct af_ext_args *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++) {
        if (!a->names_block)
            af_free(a->names[i]);
        if (a->nodes)
            af_node_info_unref(a->nodes[i]);
    }
    af_free(a->names);
    af_free(a->names_block);
    af_free(a->name_len);
    af_free(a->nodes);
    af_free(a->items);
    af_pod_info_unref(a->pod);
    json_decref(a->root);
    af_free(a);
}

const struct af_pod_info *af_ext_args_pod(const struct af_ext_args *a)
{
    return a ? a->pod : NULL;
}

bool af_ext_args_nodes_mode(const struct af_ext_args *a)
{
    return a && a->nodes_mode;
}

size_t af_ext_args_count(const struct af_ext_args *a)
{
    return a ? a->n : 0;
}

const char *af_ext_args_name(const struct af_ext_args *a, size_t i)
{
    return a && i < a->n ? a->names[i] : NULL;
}

const struct af_node_info *af_ext_args_node(const struct af_ext_args *a, size_t i)
{
    return a && a->nodes && i < a->n ? a->nodes[i] : NULL;
}

/* The value of `key` matched case-insensitively; the last match wins, as in Go. */
static json_t *get_ci(json_t *obj, const char *key)
{
    const char *k;
    json_t *v, *hit = NULL;

    json_object_foreach(obj, k, v) {
        if (!strcasecmp(k, key))
            hit = v;
    }
    return hit;
}

static int decode_nodes(const struct af_config *cfg, struct af_ext_args *a, json_t *nodes,
                        struct af_error *err)
{
    json_t *items, *it;
    size_t i;

    if (!json_is_object(nodes))
        return af_error_set(err, AF_ETYPE, "", 0, 0,
                            "Nodes: expected an object (NodeList) or null, got %s",
                            af__codec_type_name(nodes));
    items = json_object_get(nodes, "items");
    if (!items || json_is_null(items))
        return 0;
    if (!json_is_array(items))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "Nodes.items: expected an array, got %s",
                            af__codec_type_name(items));
    a->n = json_array_size(items);
    a->names = af_xcalloc(a->n ? a->n : 1, sizeof(*a->names));
    a->nodes = af_xcalloc(a->n ? a->n : 1, sizeof(*a->nodes));
    a->items = af_xcalloc(a->n ? a->n : 1, sizeof(*a->items));
    json_array_foreach(items, i, it) {
        char at[48];
        int rc;
        af__codec_path_index(at, sizeof(at), "Nodes.items", i);
        rc = af__codec_node_from_json(cfg, it, at, &a->nodes[i], err);
        if (rc) {
            a->n = i; /* only the decoded ones are released */
            return rc;
        }
        a->names[i] = af_xstrdup(a->nodes[i]->name);
        a->items[i] = it;
    }
    return 0;
}

static int decode_names(struct af_ext_args *a, json_t *names, struct af_error *err)
{
    json_t *it;
    size_t i;

    if (!json_is_array(names))
        return af_error_set(err, AF_ETYPE, "", 0, 0,
                            "NodeNames: expected an array of strings or null, got %s",
                            af__codec_type_name(names));
    a->names = af_xcalloc(json_array_size(names) ? json_array_size(names) : 1, sizeof(*a->names));
    json_array_foreach(names, i, it) {
        if (!json_is_string(it) || !*json_string_value(it))
            return af_error_set(err, AF_ETYPE, "", 0, 0, "NodeNames[%zu]: expected a %s, got %s",
                                i, json_is_string(it) ? "non-empty string" : "string",
                                af__codec_type_name(it));
        a->names[i] = af_xstrdup(json_string_value(it));
        a->n = i + 1;
    }
    return 0;
}

/* ---- the fast path for names mode ------------------------------------------------------ */

/*
 * kube-scheduler with nodeCacheCapable: true sends {"Pod":{...},"Nodes":null,
 * "NodeNames":["...",...]}: hundreds of plain names. Building a json_t per name was
 * most of a filter call, so such a request is scanned here instead: the top level and
 * NodeNames are read directly, and only the Pod's own text is parsed (codec/parse.c),
 * with the members no decoder reads (metadata.managedFields, volumes, env, probes, ...)
 * checked but not built (AF__PARSE_CHECK_UNREAD).
 *
 * The scan is conservative. It accepts a body only when it is certain that jansson
 * accepts the whole body too and that the result is the same as the general path's;
 * anything else (Nodes mode, a number or \u escape or non-ASCII byte outside the Pod, a
 * key given twice, an empty or escaped name, any error at all) makes it decline, and
 * the request takes the general path, which produces the errors and their wording.
 * The Pod's end is found by its brackets and quotes alone (af__codec_nest_scan); the
 * parser then accepts exactly that text as one JSON object, or the body declines.
 */

#define FAST_MAX_DEPTH 512

struct scan {
    const char *p, *end;
};

static void scan_ws(struct scan *s)
{
    while (s->p < s->end && (*s->p == ' ' || *s->p == '\t' || *s->p == '\n' || *s->p == '\r'))
        s->p++;
}

/*
 * An escape that strict mode takes: one of \" \\ \/ \b \f \n \r \t. A switch, not
 * strchr("\"\\/bfnrt", c): strchr finds the list's own terminator when c is NUL, and
 * "\<NUL>" then passed for an escape that jansson refuses.
 */
static bool simple_escape(char c)
{
    switch (c) {
    case '"':
    case '\\':
    case '/':
    case 'b':
    case 'f':
    case 'n':
    case 'r':
    case 't':
        return true;
    default:
        return false;
    }
}

/*
 * A string at s->p (on its opening quote): only ASCII 0x20..0x7f and the escapes \" \\
 * \/ \b \f \n \r \t, which jansson reads the same way whatever the flags.
 */
static bool scan_string(struct scan *s, const char **start, size_t *len)
{
    const char *p = s->p + 1;

    if (s->p >= s->end || *s->p != '"')
        return false;
    for (;;) {
        unsigned char c;
        p += af__codec_plain_prefix(p, (size_t)(s->end - p), false);
        if (p >= s->end)
            return false;
        c = (unsigned char)*p;
        if (c == '"')
            break;
        if (c == '\\') {
            if (p + 1 >= s->end || !simple_escape(p[1]))
                return false;
            p += 2;
            continue;
        }
        if (c < 0x20 || c >= 0x80)
            return false;
        p++;
    }
    if (start)
        *start = s->p + 1;
    if (len)
        *len = (size_t)(p - (s->p + 1));
    s->p = p + 1;
    return true;
}

/* A candidate's name at s->p: printable ASCII without escapes up to its closing quote. */
static bool scan_name(struct scan *s, size_t *len)
{
    const char *p = s->p + 1, *q;

    if (s->p >= s->end || *s->p != '"')
        return false;
    q = memchr(p, '"', (size_t)(s->end - p));
    if (!q)
        return false;
    for (const char *c = p + af__codec_plain_prefix(p, (size_t)(q - p), false); c < q; c++)
        if ((unsigned char)*c < 0x20 || (unsigned char)*c >= 0x80 || *c == '\\')
            return false;
    *len = (size_t)(q - p);
    s->p = q + 1;
    return true;
}

static bool scan_literal(struct scan *s, const char *word)
{
    size_t n = strlen(word);

    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n))
        return false;
    s->p += n;
    /* jansson reads a whole word: "nullx" is one bad token. */
    if (s->p < s->end && ((*s->p >= 'a' && *s->p <= 'z') || (*s->p >= 'A' && *s->p <= 'Z')))
        return false;
    return true;
}

/* A number: short, no exponent, so that jansson can neither overflow nor differ. */
static bool scan_number(struct scan *s)
{
    const char *p = s->p, *start = s->p;
    bool frac = false;

    if (p < s->end && *p == '-')
        p++;
    if (p >= s->end || *p < '0' || *p > '9')
        return false;
    if (*p == '0')
        p++;
    else
        while (p < s->end && *p >= '0' && *p <= '9')
            p++;
    if (p < s->end && *p == '.') {
        frac = true;
        p++;
        if (p >= s->end || *p < '0' || *p > '9')
            return false;
        while (p < s->end && *p >= '0' && *p <= '9')
            p++;
    }
    if (p < s->end && (*p == 'e' || *p == 'E'))
        return false;
    if (p - start > (frac ? 15 : 17))
        return false;
    s->p = p;
    return true;
}

static bool scan_value(struct scan *s, int depth);

/* An object or array at s->p. */
static bool scan_container(struct scan *s, int depth)
{
    char close = *s->p == '{' ? '}' : ']';
    bool first = true;

    if (depth >= FAST_MAX_DEPTH)
        return false;
    s->p++;
    for (;;) {
        scan_ws(s);
        if (s->p >= s->end)
            return false;
        if (*s->p == close) {
            s->p++;
            return true;
        }
        if (!first) {
            if (*s->p != ',')
                return false;
            s->p++;
            scan_ws(s);
        }
        first = false;
        if (close == '}') {
            if (!scan_string(s, NULL, NULL))
                return false;
            scan_ws(s);
            if (s->p >= s->end || *s->p != ':')
                return false;
            s->p++;
            scan_ws(s);
        }
        if (!scan_value(s, depth + 1))
            return false;
    }
}

static bool scan_value(struct scan *s, int depth)
{
    if (s->p >= s->end)
        return false;
    switch (*s->p) {
    case '{':
    case '[':
        return scan_container(s, depth);
    case '"':
        return scan_string(s, NULL, NULL);
    case 't':
        return scan_literal(s, "true");
    case 'f':
        return scan_literal(s, "false");
    case 'n':
        return scan_literal(s, "null");
    default:
        return scan_number(s);
    }
}

/*
 * kube-scheduler sends the same Pod to filter and then to prioritize in one scheduling
 * cycle, so the last Pod decoded on the fast path is kept: its text and the decoded,
 * immutable (refcounted) result, which the same text gets again without parsing.
 * One entry, process-wide, under a lock: the decoding depends on the text alone.
 */
static struct {
    pthread_mutex_t lock;
    char *text;
    size_t len;
    struct af_pod_info *pod;
} last_pod = {PTHREAD_MUTEX_INITIALIZER, NULL, 0, NULL};

static struct af_pod_info *last_pod_get(const char *text, size_t len)
{
    struct af_pod_info *p = NULL;

    pthread_mutex_lock(&last_pod.lock);
    if (last_pod.pod && last_pod.len == len && !memcmp(last_pod.text, text, len))
        p = af_pod_info_ref(last_pod.pod);
    pthread_mutex_unlock(&last_pod.lock);
    return p;
}

static void last_pod_put(const char *text, size_t len, struct af_pod_info *pod)
{
    char *copy = af_xmalloc(len + 1), *old_text;
    struct af_pod_info *old_pod;

    memcpy(copy, text, len);
    pthread_mutex_lock(&last_pod.lock);
    old_text = last_pod.text;
    old_pod = last_pod.pod;
    last_pod.text = copy;
    last_pod.len = len;
    last_pod.pod = af_pod_info_ref(pod);
    pthread_mutex_unlock(&last_pod.lock);
    af_free(old_text);
    af_pod_info_unref(old_pod);
}

/* The Pod from its text [from, to). 0, or -1 to decline. */
static int fast_pod(const char *from, const char *to, struct af_pod_info **out)
{
    struct af_arena *arena = af_arena_of_thread(AF_ARENA_TREE), *prev;
    struct af__codec_perr perr;
    struct af_error err;
    json_t *obj;
    size_t len = (size_t)(to - from);
    int rc;

    if ((*out = last_pod_get(from, len)) != NULL)
        return 0;
    /* without JSON_ALLOW_NUL, as the general path's af__codec_load_request: "\u0000" declines */
    prev = af__codec_arena_enter(arena);
    obj = af__codec_parse(from, len, AF__PARSE_CHECK_UNREAD, &perr);
    if (!obj) {
        af__codec_arena_leave(arena, prev);
        return -1;
    }
    memset(&err, 0, sizeof(err));
    rc = af__codec_pod_from_json(obj, "Pod", out, &err);
    json_decref(obj);
    af__codec_arena_leave(arena, prev);
    if (!rc)
        last_pod_put(from, len, *out);
    return rc ? -1 : 0;
}

/* Returns 1 when it decoded the request into *out, 0 when the general path must. */
static int decode_fast(const char *body, size_t len, struct af_ext_args **out)
{
    struct scan s = {body, body + len};
    const char *pod_from = NULL, *pod_to = NULL;
    int seen_pod = 0, seen_nodes = 0, seen_names = 0;
    bool first = true;
    size_t n = 0, cap = 0, bytes = 0;
    uint32_t *span = NULL;   /* each name's offset in body and length, found by the one scan */
    struct af_ext_args *a;

    scan_ws(&s);
    if (s.p >= s.end || *s.p != '{' || len > UINT32_MAX)   /* spans hold 32-bit offsets */
        return 0;
    s.p++;
    for (;;) {
        const char *k;
        size_t klen;

        scan_ws(&s);
        if (s.p >= s.end)
            goto no;
        if (*s.p == '}') {
            s.p++;
            break;
        }
        if (!first) {
            if (*s.p != ',')
                goto no;
            s.p++;
            scan_ws(&s);
        }
        first = false;
        if (!scan_string(&s, &k, &klen))
            goto no;
        scan_ws(&s);
        if (s.p >= s.end || *s.p != ':')
            goto no;
        s.p++;
        scan_ws(&s);
        if (s.p >= s.end)
            goto no;
        if (klen == 3 && !strncasecmp(k, "Pod", 3)) {
            struct af__codec_nest nest = {0, false, false};
            bool closed;
            if (seen_pod++ || *s.p != '{')
                goto no;
            pod_from = s.p;
            s.p = body + af__codec_nest_scan(&nest, body, (size_t)(s.p - body), len, &closed);
            if (!closed)
                goto no;
            pod_to = s.p;
        } else if (klen == 5 && !strncasecmp(k, "Nodes", 5)) {
            if (seen_nodes++ || !scan_literal(&s, "null"))
                goto no;
        } else if (klen == 9 && !strncasecmp(k, "NodeNames", 9)) {
            if (seen_names++)
                goto no;
            if (*s.p == 'n') {
                if (!scan_literal(&s, "null"))
                    goto no;
                continue;
            }
            if (*s.p != '[')
                goto no;
            s.p++;
            for (;;) {
                size_t nlen;
                scan_ws(&s);
                if (s.p < s.end && *s.p == ']' && n == 0) {
                    s.p++;
                    break;
                }
                if (!scan_name(&s, &nlen) || nlen == 0)
                    goto no;
                if (n == cap) {
                    cap = cap ? 2 * cap : 256;
                    span = af_xrealloc(span, cap * 2 * sizeof(*span));
                }
                span[2 * n] = (uint32_t)(s.p - nlen - 1 - body);
                span[2 * n + 1] = (uint32_t)nlen;
                n++;
                bytes += nlen + 1;
                scan_ws(&s);
                if (s.p < s.end && *s.p == ',') {
                    s.p++;
                    continue;
                }
                if (s.p < s.end && *s.p == ']') {
                    s.p++;
                    break;
                }
                goto no;
            }
        } else if (!scan_value(&s, 1)) {
            goto no;
        }
    }
    scan_ws(&s);
    if (s.p != s.end || !pod_from)
        goto no;

    a = af_xcalloc(1, sizeof(*a));
    if (fast_pod(pod_from, pod_to, &a->pod) != 0) {
        af_free(a);
        goto no;
    }
    a->names = af_xcalloc(n ? n : 1, sizeof(*a->names));
    if (n) {
        /* The spans the scan found: plain strings, copied as they are. */
        char *w = a->names_block = af_xmalloc(bytes);
        a->name_len = af_xmalloc(n * sizeof(*a->name_len));
        for (size_t i = 0; i < n; i++) {
            a->names[i] = w;
            a->name_len[i] = span[2 * i + 1];
            memcpy(w, body + span[2 * i], span[2 * i + 1]);
            w += span[2 * i + 1];
            *w++ = '\0';
        }
    }
    af_free(span);
    a->n = n;
    *out = a;
    return 1;
no:
    af_free(span);
    return 0;
}

/*
 * The body with jansson, flags 0: duplicate keys allowed (the last wins, as in Go) and
 * "\u0000" refused. The Kubernetes object decoders allow "\u0000" (af__codec_load), so
 * that one odd string cannot fail a whole LIST page; a request is one pod and its
 * candidates, and a name that a C string would cut short ("a\u0000b" read as "a") must
 * not stand for another node, so the request is refused, saying why. The fast path
 * accepts only bodies that this accepts.
 */
int af__codec_load_request(const char *body, size_t len, json_t **out, struct af_error *err)
{
    json_error_t jerr;
    const char *what;

    *out = NULL;
    if (!body)
        return af_error_set(err, AF_EINVAL, "", 0, 0, "request body: no input");
    *out = json_loadb(body, len, 0, &jerr);
    if (*out)
        return 0;
    switch (json_error_code(&jerr)) {
    case json_error_null_character:
        what = "a string";
        break;
    case json_error_null_byte_in_key:
        what = "an object key";
        break;
    default:
        return af_error_set(err, AF_EPARSE, "", jerr.line, jerr.column,
                            "request body is not JSON: %s at line %d column %d", jerr.text,
                            jerr.line, jerr.column);
    }
    return af_error_set(err, AF_EPARSE, "", jerr.line, jerr.column,
                        "request body is not JSON accelfit accepts: %s holds \\u0000 (NUL) at "
                        "line %d column %d",
                        what, jerr.line, jerr.column);
}

int af__codec_load_request_object(const char *body, size_t len, const char *what, json_t **out,
                                  struct af_error *err)
{
    int rc = af__codec_load_request(body, len, out, err);

    if (rc || json_is_object(*out))
        return rc;
    rc = af_error_set(err, AF_ETYPE, "", 0, 0, "request body: expected an object%s%s%s, got %s",
                      what ? " (" : "", what ? what : "", what ? ")" : "",
                      af__codec_type_name(*out));
    json_decref(*out);
    *out = NULL;
    return rc;
}

int af__codec_args_fast(const char *body, size_t len, struct af_ext_args **out)
{
    *out = NULL;
    return body ? decode_fast(body, len, out) : 0;
}

int af__codec_args_general(const struct af_config *cfg, const char *body, size_t len,
                           struct af_ext_args **out, struct af_error *err)
{
    struct af_ext_args *a;
    json_t *pod, *nodes, *names;
    int rc;

    *out = NULL;
    a = af_xcalloc(1, sizeof(*a));
    rc = af__codec_load_request_object(body, len, "ExtenderArgs", &a->root, err);
    if (rc)
        goto fail;
    pod = get_ci(a->root, "Pod");
    if (!pod || json_is_null(pod)) {
        rc = af_error_set(err, AF_EINVAL, "", 0, 0, "Pod: missing");
        goto fail;
    }
    rc = af__codec_pod_from_json(pod, "Pod", &a->pod, err);
    if (rc)
        goto fail;
    nodes = get_ci(a->root, "Nodes");
    names = get_ci(a->root, "NodeNames");
    if (nodes && !json_is_null(nodes)) {
        a->nodes_mode = true;
        rc = decode_nodes(cfg, a, nodes, err);
    } else if (names && !json_is_null(names)) {
        rc = decode_names(a, names, err);
    }
    if (rc)
        goto fail;
    *out = a;
    return 0;
fail:
    af_ext_args_free(a);
    return rc;
}

int af_codec_decode_args(const struct af_config *cfg, const char *body, size_t len,
                         struct af_ext_args **out, struct af_error *err)
{
    if (af__codec_args_fast(body, len, out))
        return 0;
    return af__codec_args_general(cfg, body, len, out, err);
}

/* ---- encoding ------------------------------------------------------------------------- */

/*
 * The answers are written straight into the buffer, without a json_t tree: at
 * 500 candidates building and dumping the tree was most of a filter call. The
 * output is byte for byte what json_dump_callback(..., JSON_COMPACT) printed
 * for the tree this file used to build: keys in insertion order, a key set twice
 * keeps its first position and takes the last value, strings escaped as jansson
 * escapes them (\" \\ \b \f \n \r \t, other control bytes as \u00XX uppercase,
 * UTF-8 passed through, '/' not escaped). Both answers escape that one way: the
 * priorities list, written with af_buf_json_str's escapes before (\u0008, lowercase
 * hex: the same strings in other bytes), is what jansson would print for it too.
 */

/* jansson's utf8_check_string: well-formed, no overlong forms, no surrogates. */
static bool utf8_valid(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;

    while (p < end) {
        unsigned u, size, value;
        while (end - p >= 8) {
            uint64_t x;
            memcpy(&x, p, 8);
            if (x & 0x8080808080808080ull)   /* a byte >= 0x80 */
                break;
            p += 8;
        }
        if (p >= end)
            break;
        u = *p;
        if (u < 0x80) {
            p++;
            continue;
        }
        if (u >= 0xC2 && u <= 0xDF)
            size = 2, value = u & 0x1F;
        else if (u >= 0xE0 && u <= 0xEF)
            size = 3, value = u & 0x0F;
        else if (u >= 0xF0 && u <= 0xF4)
            size = 4, value = u & 0x07;
        else
            return false;
        if ((size_t)(end - p) < size)
            return false;
        for (unsigned i = 1; i < size; i++) {
            if (p[i] < 0x80 || p[i] > 0xBF)
                return false;
            value = (value << 6) + (p[i] & 0x3F);
        }
        if (value > 0x10FFFF || (value >= 0xD800 && value <= 0xDFFF) ||
            (size == 2 && value < 0x80) || (size == 3 && value < 0x800) ||
            (size == 4 && value < 0x10000))
            return false;
        p += size;
    }
    return true;
}

/* `s` as a JSON string literal, escaped as jansson's dump_string does (for valid UTF-8). */
static int put_str(struct af_buf *out, const char *s, size_t len)
{
    static const char hex[] = "0123456789ABCDEF";
    const char *run = s, *end = s + len;
    int rc = af_buf_add(out, "\"", 1);

    for (const char *p = s + af__codec_plain_prefix(s, len, false); !rc && p < end; p++) {
        unsigned char c = (unsigned char)*p;
        char esc[6];
        const char *e;
        size_t elen = 2;

        if (c >= 0x20 && c != '"' && c != '\\') {
            /* Skip ahead a word at a time when the rest is clean. */
            if (c < 0x80 && end - p > 16)
                p += af__codec_plain_prefix(p + 1, (size_t)(end - p - 1), false);
            continue;
        }
        switch (c) {
        case '"':
            e = "\\\"";
            break;
        case '\\':
            e = "\\\\";
            break;
        case '\b':
            e = "\\b";
            break;
        case '\f':
            e = "\\f";
            break;
        case '\n':
            e = "\\n";
            break;
        case '\r':
            e = "\\r";
            break;
        case '\t':
            e = "\\t";
            break;
        default:
            memcpy(esc, "\\u00", 4);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            e = esc;
            elen = 6;
            break;
        }
        if (p > run)
            rc = af_buf_add(out, run, (size_t)(p - run));
        if (!rc)
            rc = af_buf_add(out, e, elen);
        run = p + 1;
    }
    if (!rc && end > run)
        rc = af_buf_add(out, run, (size_t)(end - run));
    if (!rc)
        rc = af_buf_add(out, "\"", 1);
    return rc;
}

/*
 * `lead`, then s as a JSON string (jansson's escapes), then `trail`: a name in an answer
 * with the comma before it and the colon after it. A name that needs no escape (all of
 * them, in practice) goes in one piece; `plain` says it is known to need none.
 */
static int put_framed(struct af_buf *out, const char *lead, size_t ll, const char *s,
                      size_t len, bool plain, const char *trail, size_t tl)
{
    size_t i = plain ? len : af__codec_plain_prefix(s, len, false), need = ll + len + tl + 2;
    char *w;
    int rc;

    while (i < len && (unsigned char)s[i] >= 0x20 && s[i] != '"' && s[i] != '\\')
        i++;
    if (i == len) {
        /* written where it goes: no copy through a scratch buffer */
        if (out->cap && (need > out->cap || out->len > out->cap - need))
            return AF_ETOOBIG;
        af_buf_reserve(out, need);
        w = out->buf + out->len;
        memcpy(w, lead, ll);
        w[ll] = '"';
        memcpy(w + ll + 1, s, len);
        w[ll + 1 + len] = '"';
        memcpy(w + ll + len + 2, trail, tl);
        out->len += need;
        out->buf[out->len] = '\0';
        return 0;
    }
    rc = af_buf_add(out, lead, ll);
    if (!rc)
        rc = put_str(out, s, len);
    if (!rc)
        rc = af_buf_add(out, trail, tl);
    return rc;
}

/* What jstr() used to make of C text that may have been cut mid-character: when it is not
 * valid UTF-8, every byte >= 0x80 becomes '?'. */
static int put_text(struct af_buf *out, const char *s)
{
    size_t len;
    char small[AF_REASON_MAX + 16], *copy;
    int rc;

    if (!s)
        s = "";
    len = strlen(s);
    if (utf8_valid(s, len))
        return put_str(out, s, len);
    copy = len < sizeof(small) ? small : af_xmalloc(len + 1);
    memcpy(copy, s, len + 1);
    for (char *p = copy; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    rc = put_str(out, copy, len);
    if (copy != small)
        af_free(copy);
    return rc;
}

static int dump_cb(const char *buffer, size_t size, void *data)
{
    return af_buf_add(data, buffer, size) ? -1 : 0;
}

/*
 * Reasons repeat (one text per cause and class: the filter writes them so), so the
 * escaped form of the last few distinct ones is kept and copied instead of escaped again.
 */
#define REASON_MEMO 8

struct reason_memo {
    const char *text[REASON_MEMO];     /* the decision's reason it was escaped from */
    size_t len[REASON_MEMO];
    char esc[REASON_MEMO][AF_REASON_MAX + 64];
    unsigned next;
};

static int put_reason(struct af_buf *out, const char *s, struct reason_memo *m)
{
    size_t at = out->len, k;
    int rc;

    for (k = 0; k < REASON_MEMO; k++)
        if (m->text[k] && !strcmp(m->text[k], s))
            return af_buf_add(out, m->esc[k], m->len[k]);
    rc = put_text(out, s);
    if (rc || out->len - at > sizeof(m->esc[0]))
        return rc;
    k = m->next++ % REASON_MEMO;
    m->text[k] = s;
    m->len[k] = out->len - at;
    memcpy(m->esc[k], out->buf + at, m->len[k]);
    return 0;
}

/*
 * A decision's name, with its length, and whether it is known plain: the request's own
 * i-th name, decoded by the fast path, which takes only plain names (printable ASCII
 * without '"' or '\\'), so it is neither checked nor escaped again. Any other name is
 * measured here. NULL when the decision has none.
 */
struct ans_name {
    const char *s;
    size_t len;
    bool plain;
};

static struct ans_name ans_name(const struct af_ext_args *a, size_t i, const char *name)
{
    struct ans_name r = {name, 0, false};

    if (name && a && a->name_len && i < a->n && name == a->names[i]) {
        r.len = a->name_len[i];
        r.plain = true;
    } else if (name) {
        r.len = strlen(name);
    }
    return r;
}

/*
 * One of FailedNodes / FailedAndUnresolvableNodes: the entries with verdict `which`, in
 * order of first appearance of each name, each with the reason of its last appearance
 * (what json_object_set_new did when a request named a node twice).
 */
static int put_reasons(struct af_buf *out, const struct af_node_decision *d,
                       const struct ans_name *names, const size_t *first, const size_t *last,
                       size_t n, enum af_verdict which)
{
    bool comma = false;
    struct reason_memo memo;
    int rc = af_buf_add(out, "{", 1);

    memset(memo.text, 0, sizeof(memo.text));
    memo.next = 0;

    for (size_t i = 0; !rc && i < n; i++) {
        if (!names[i].s || d[i].verdict != which || first[i] != i)
            continue;
        rc = put_framed(out, ",", comma ? 1 : 0, names[i].s, names[i].len, names[i].plain, ":",
                        1);
        comma = true;
        if (!rc)
            rc = put_reason(out, d[last[i]].reason, &memo);
    }
    if (!rc)
        rc = af_buf_add(out, "}", 1);
    return rc;
}

/*
 * For the entries that go into FailedNodes or FailedAndUnresolvableNodes: first[i] is
 * the first entry with the same name in the same object (i itself when none), and for
 * such a first entry last[i] is the last one. An index (af_index) keyed by the name and
 * the object keeps this linear.
 */
static void dedup_names(const struct af_node_decision *d, const struct ans_name *names,
                        size_t n, size_t *first, size_t *last)
{
    struct af_index ix;

    af_index_init(&ix, n, NULL);
    for (size_t i = 0; i < n; i++) {
        bool unres = d[i].verdict == AF_VERDICT_UNRESOLVABLE, seen = false;
        uint32_t h, j;
        size_t walk;

        first[i] = last[i] = i;
        if (!names[i].s || d[i].verdict == AF_VERDICT_PASS)
            continue;
        h = af_hash_bytes(AF_HASH_INIT, names[i].s, names[i].len) ^ (unres ? 0x9e3779b9u : 0);
        walk = af_index_start(&ix, h);
        while (!seen && af_index_next(&ix, h, &walk, &j))
            seen = (d[j].verdict == AF_VERDICT_UNRESOLVABLE) == unres &&
                   names[j].len == names[i].len &&
                   !memcmp(names[j].s, names[i].s, names[i].len);
        if (seen) {
            first[i] = j;
            last[j] = i;
        } else {
            af_index_add(&ix, h, i);
        }
    }
    af_index_release(&ix);
}

int af_codec_encode_filter(const struct af_ext_args *args, const struct af_node_decision *d,
                           size_t n, const char *error, struct af_buf *out)
{
    bool nodes_mode = args && args->nodes_mode;
    struct ans_name *names = NULL;
    size_t *first = NULL, *last = NULL;
    int rc;

    if (args && n > args->n)
        n = args->n;
    if (!d)
        n = 0;
    if (error && *error) {
        rc = af_buf_puts(out, "{\"Nodes\":null,\"NodeNames\":null,\"FailedNodes\":{},"
                              "\"FailedAndUnresolvableNodes\":{},\"Error\":");
        if (!rc)
            rc = put_text(out, error);
        if (!rc)
            rc = af_buf_add(out, "}", 1);
        return rc ? AF_ETOOBIG : 0;
    }
    if (n) {
        names = af_xmalloc(n * sizeof(*names));
        first = af_xmalloc(n * sizeof(*first));
        last = af_xmalloc(n * sizeof(*last));
    }
    for (size_t i = 0; i < n; i++) {
        names[i] = ans_name(args, i, d[i].name ? d[i].name : (args ? args->names[i] : NULL));
        /* A name jansson would not take as a key or string cannot come from a request. */
        if (names[i].s && !names[i].plain && !utf8_valid(names[i].s, names[i].len))
            names[i].s = NULL;
    }
    if (n)
        dedup_names(d, names, n, first, last);

    rc = af_buf_puts(out, nodes_mode ? "{\"Nodes\":{\"metadata\":{},\"items\":["
                                     : "{\"Nodes\":null,\"NodeNames\":[");
    {
        bool comma = false;
        for (size_t i = 0; !rc && i < n; i++) {
            if (!names[i].s || d[i].verdict != AF_VERDICT_PASS)
                continue;
            if (!nodes_mode) {
                rc = put_framed(out, ",", comma ? 1 : 0, names[i].s, names[i].len, names[i].plain,
                                "", 0);
                comma = true;
                continue;
            }
            if (comma)
                rc = af_buf_add(out, ",", 1);
            comma = true;
            if (!rc)
                rc = json_dump_callback(args->items[i], dump_cb, out, JSON_COMPACT) ? AF_ETOOBIG
                                                                                   : 0;
        }
    }
    if (!rc)
        rc = af_buf_puts(out, nodes_mode ? "]},\"NodeNames\":null,\"FailedNodes\":"
                                         : "],\"FailedNodes\":");
    if (!rc)
        rc = put_reasons(out, d, names, first, last, n, AF_VERDICT_FAILED);
    if (!rc)
        rc = af_buf_puts(out, ",\"FailedAndUnresolvableNodes\":");
    if (!rc)
        rc = put_reasons(out, d, names, first, last, n, AF_VERDICT_UNRESOLVABLE);
    if (!rc)
        rc = af_buf_puts(out, ",\"Error\":\"\"}");
    af_free(names);
    af_free(first);
    af_free(last);
    return rc ? AF_ETOOBIG : 0;
}

int af_codec_encode_priorities(const struct af_ext_args *args, const struct af_node_decision *d,
                               size_t n, struct af_buf *out)
{
    int rc = af_buf_add(out, "[", 1);

    for (size_t i = 0; !rc && i < n; i++) {
        struct ans_name name = ans_name(args, i, d[i].name ? d[i].name : "");
        /* ,"Score":%d} without printf: the digits are written backwards from the end. */
        char num[32], *w = num + sizeof(num);
        long long v = d[i].score;
        unsigned long long u = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
        *--w = '}';
        do {
            *--w = (char)('0' + u % 10);
            u /= 10;
        } while (u);
        if (v < 0)
            *--w = '-';
        w -= 9;
        memcpy(w, ",\"Score\":", 9);
        rc = put_framed(out, i ? ",{\"Host\":" : "{\"Host\":", i ? 9 : 8, name.s, name.len,
                        name.plain, w, (size_t)(num + sizeof(num) - w));
    }
    if (!rc)
        rc = af_buf_add(out, "]", 1);
    return rc;
}
