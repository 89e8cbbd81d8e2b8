/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lists decoded as they arrive. A LIST answer is split into its items by a small
 * byte scanner (strings, escapes and nesting; nothing else of JSON's grammar), and
 * each item is parsed with jansson on its own, decoded to a record, and dropped.
 * Memory is one item's text and tree at a time, never the whole page: a v1.26
 * kube-apiserver answers the first `resourceVersion=0` list from its watch cache in
 * one piece (150,000 pods are ~600 MB of JSON), and a parsed jansson tree is several
 * times its text.
 *
 * The other members of the top-level object (kind, apiVersion, metadata; small) are
 * copied into a side buffer and parsed at the end, or when the first item arrives and
 * its default kind (NodeList -> Node) is needed. Items that arrive before `kind` is
 * known (an order the API server never sends) are kept as text until the end.
 * Whatever the scanner lets through, jansson still checks: an item or side buffer that
 * is not JSON fails the list, like a page that is not JSON.
 *
 * A body that starts "k8s\0" is Kubernetes' protobuf (what the reflector asks for first):
 * codec/proto.c cuts it into items and turns each into the tree its JSON would parse to,
 * and from there an item goes the same way (item_tree).
 *
 * A list in one piece (af_codec_decode_list) is fed through the same streamer. Each
 * item is decoded by objects.c (af__codec_list_item) and scanned with scan.c; neither
 * calls back into this file.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/codec.h"

#include "codec/internal.h"
#include "accelfit/banned.h"

enum scan_state {
    S_START,       /* before the root value */
    S_KEY_WAIT,    /* root object: a key or '}' */
    S_KEY,         /* inside a key string */
    S_COLON,
    S_VAL_WAIT,    /* a member's value starts */
    S_VAL,         /* inside a member's value (copied to ->rest) */
    S_AFTER_VAL,   /* ',' or '}' */
    S_ITEM_WAIT,   /* items array: an element or ']' */
    S_ITEM,        /* inside an element (copied to ->item) */
    S_AFTER_ITEM,  /* ',' or ']' */
    S_END,         /* after the root value: only white space */
};

struct af_list_stream {
    const struct af_config *cfg;
    af_item_cb cb;
    void *ud;
    bool skip_bad;
    enum scan_state state;
    bool root_array;            /* `[item, ...]` rather than a List object */
    bool need_elem;             /* after ',' in items: another element must follow */
    bool need_key;              /* after ',' in the root object: another key must follow */
    bool kind_known;            /* ->def_kind is decided */
    const char *def_kind;       /* "Node" for a NodeList, "Pod" for a PodList, else NULL */
    struct af__codec_nest nest;           /* the value being copied: nesting and string state */
    char first;                 /* and its first byte */
    struct af_buf key;          /* the current root key, with its quotes */
    struct af_buf rest;         /* "k":v,... of the root members other than items */
    struct af_buf item;         /* the current element */
    struct af_buf pending;      /* elements seen before kind: each NUL-terminated */
    size_t n_items;
    size_t skipped;
    int rc;                     /* first error: the list fails */
    struct af_error err;        /* the list's error, or the first skipped item's */
    struct af_error item_err;   /* scratch for items after the first skipped one */
    struct af_arena arena;      /* the current item's tree (codec/arena.c) */
    struct af__codec_pb_list *pb;   /* a protobuf body (codec/proto.c), NULL for JSON */
};

struct af_list_stream *af_list_stream_new(const struct af_config *cfg, bool skip_bad,
                                          af_item_cb cb, void *ud)
{
    struct af_list_stream *s = af_xcalloc(1, sizeof(*s));
    s->cfg = cfg;
    s->skip_bad = skip_bad;
    s->cb = cb;
    s->ud = ud;
    af_buf_init(&s->key, 1 << 20);
    af_buf_init(&s->rest, 16u << 20);
    af_buf_init(&s->item, AF_LIST_ITEM_MAX);
    af_buf_init(&s->pending, SIZE_MAX);
    return s;
}

void af_list_stream_free(struct af_list_stream *s)
{
    if (!s)
        return;
    af_buf_release(&s->key);
    af_buf_release(&s->rest);
    af_buf_release(&s->item);
    af_buf_release(&s->pending);
    af_arena_release(&s->arena);
    af__codec_pb_list_free(s->pb);
    af_free(s);
}

static int fail(struct af_list_stream *s, int rc)
{
    if (!s->rc)
        s->rc = rc;
    return s->rc;
}

static int syntax(struct af_list_stream *s, char c, const char *expected)
{
    if (s->rc)
        return s->rc;
    return fail(s, af_error_set(&s->err, AF_EPARSE, "", 0, 0,
                                "list is not JSON: %s expected, got '%c' after item %zu",
                                expected, c, s->n_items));
}

/* The side buffer as an object ("{...}"); NULL when it is not JSON (err set). */
static json_t *rest_object(struct af_list_stream *s)
{
    struct af_buf b = AF_BUF_INIT(0);
    json_t *root = NULL;
    int rc = af_buf_add(&b, "{", 1);
    if (!rc && s->rest.len)
        rc = af_buf_add(&b, s->rest.buf, s->rest.len);
    if (!rc)
        rc = af_buf_add(&b, "}", 1);
    if (!rc)
        rc = af__codec_load(b.buf, b.len, "list", &root, &s->err);
    if (rc)
        fail(s, rc);
    af_buf_release(&b);
    return root;
}

/* What kind of list this is, from the members seen so far: sets ->def_kind, or fails. */
static int decide_kind(struct af_list_stream *s, json_t *root)
{
    int rc = af__codec_list_kind(root, &s->def_kind, &s->err);
    if (rc)
        return fail(s, rc);
    s->kind_known = af__codec_get_str(root, "kind") != NULL;
    return 0;
}

/* One element's tree (`it`, stolen; in s->arena, entered at `prev`): decode, hand over (or
 * count as skipped), free. */
static int item_tree(struct af_list_stream *s, json_t *it, struct af_arena *prev)
{
    char where[48];
    int rc;

    snprintf(where, sizeof(where), "items[%zu]", s->n_items);
    s->n_items++;
    rc = af__codec_list_item(s->cfg, it, where, s->def_kind, s->cb, s->ud,
                             s->skipped ? &s->item_err : &s->err);
    json_decref(it);
    af__codec_arena_leave(&s->arena, prev);
    if (rc && !s->skip_bad)
        return fail(s, rc);
    if (rc)
        s->skipped++;
    return 0;
}

/* One element's text: parse, then item_tree. */
static int decode_item(struct af_list_stream *s, char *text, size_t len)
{
    struct af_arena *prev;
    struct af__codec_perr perr;
    json_t *it;
    int line, col;

    prev = af__codec_arena_enter(&s->arena);
    /* as af__codec_load, but an item may be any value (null and literals are ignored),
     * and what the decoders never read is passed over */
    it = af__codec_parse(text, len, JSON_ALLOW_NUL | JSON_DECODE_ANY | AF__PARSE_SKIP_UNREAD,
                         &perr);
    if (!it) {
        af__codec_arena_leave(&s->arena, prev);
        af__codec_line_col(text, perr.offset, &line, &col);
        return fail(s, af_error_set(&s->err, AF_EPARSE, "", 0, 0,
                                    "list is not JSON: items[%zu]: %s at column %d", s->n_items,
                                    perr.text, col));
    }
    return item_tree(s, it, prev);
}

/* One item of a protobuf List (codec/proto.c): its tree, then item_tree. */
static int pb_item(void *ud, const char *kind, const uint8_t *item, size_t len)
{
    struct af_list_stream *s = ud;
    struct af_arena *prev;
    const char *why;
    json_t *it;

    if (!s->kind_known) {
        json_t *root = json_pack("{s:s}", "kind", kind);
        int rc = decide_kind(s, root);
        json_decref(root);
        if (rc)
            return rc;
        s->kind_known = true;
    }
    if (!s->def_kind) {
        s->n_items++;   /* a List of other kinds: nothing accelfit reads */
        return 0;
    }
    prev = af__codec_arena_enter(&s->arena);
    it = af__codec_pb_tree(s->def_kind, item, len, &why);
    if (!it) {
        af__codec_arena_leave(&s->arena, prev);
        return fail(s, af_error_set(&s->err, AF_EPARSE, "", 0, 0,
                                    "list is not Kubernetes protobuf: items[%zu]: %s",
                                    s->n_items, why));
    }
    return item_tree(s, it, prev);
}

/* An element is complete. */
static int item_done(struct af_list_stream *s)
{
    int rc = 0;
    if (!s->kind_known && !s->root_array && !s->n_items && !s->pending.len) {
        /* first item: the kind is normally known by now */
        json_t *root = rest_object(s);
        if (!root)
            return s->rc;
        rc = decide_kind(s, root);
        json_decref(root);
        if (rc)
            return rc;
    }
    if (s->kind_known || s->root_array) {
        rc = decode_item(s, s->item.buf, s->item.len);
    } else if (af_buf_add(&s->pending, s->item.buf, s->item.len) ||
               af_buf_add(&s->pending, "", 1)) {
        rc = fail(s, af_error_set(&s->err, AF_ETOOBIG, "", 0, 0, "list: too large"));
    }
    af_buf_reset(&s->item);
    return rc;
}

/*
 * Copies byte `c` of a value into `b`, tracking strings and nesting. Returns true when
 * `c` ended the value (for a bare literal: when `c` is the byte after it, which is not
 * copied and must be looked at again).
 */
static bool value_byte(struct af_list_stream *s, struct af_buf *b, char c, bool *again, int *rc)
{
    *again = false;
    if (s->first != '{' && s->first != '[' && s->first != '"') {
        /* a literal: true, false, null, a number */
        if (af__codec_ws(c) || c == ',' || c == '}' || c == ']') {
            *again = true;
            return true;
        }
        if (af_buf_add(b, &c, 1))
            *rc = fail(s, af_error_set(&s->err, AF_ETOOBIG, "", 0, 0,
                                       "list: an item exceeds %zu bytes", b->cap));
        return false;
    }
    if (af_buf_add(b, &c, 1)) {
        *rc = fail(s, af_error_set(&s->err, AF_ETOOBIG, "", 0, 0,
                                   "list: an item exceeds %zu bytes", b->cap));
        return false;
    }
    if (s->nest.in_str) {
        if (s->nest.esc)
            s->nest.esc = false;
        else if (c == '\\')
            s->nest.esc = true;
        else if (c == '"') {
            s->nest.in_str = false;
            return s->nest.depth == 0;   /* a string value ends here */
        }
        return false;
    }
    if (c == '"') {
        s->nest.in_str = true;
    } else if (c == '{' || c == '[') {
        s->nest.depth++;
    } else if (c == '}' || c == ']') {
        s->nest.depth--;
        return s->nest.depth == 0;
    }
    return false;
}

/*
 * The fast path of value_byte for an object or array already begun: copies the run of
 * data[at..len) that belongs to it in one piece. Returns the index after the run; *done
 * when the value ended there.
 */
static size_t container_run(struct af_list_stream *s, struct af_buf *b, const char *data,
                           size_t at, size_t len, bool *done, int *rc)
{
    size_t j = af__codec_nest_scan(&s->nest, data, at, len, done);

    if (af_buf_add(b, data + at, j - at))
        *rc = fail(s, af_error_set(&s->err, AF_ETOOBIG, "", 0, 0,
                                   "list: an item exceeds %zu bytes", b->cap));
    return j;
}

/* Starts copying a value whose first byte is `c`. */
static void value_start(struct af_list_stream *s, char c)
{
    s->first = c;
    s->nest = (struct af__codec_nest){0, false, false};
}

static int pb_feed(struct af_list_stream *s, const char *data, size_t len)
{
    int rc;

    if (s->rc)
        return s->rc;
    rc = af__codec_pb_list_feed(s->pb, (const uint8_t *)data, len);
    if (rc && !s->rc)   /* the framing's error (an item's is set already) */
        fail(s, af_error_set(&s->err, rc, "", 0, 0, "%s", af__codec_pb_list_error(s->pb)));
    return s->rc;
}

/* af_list_stream_finish of a protobuf body. */
static int pb_finish(struct af_list_stream *s, char **rv, char **cont)
{
    char *r = NULL, *c = NULL;
    json_t *obj = NULL;
    int rc;

    if (s->rc)
        return s->rc;
    rc = af__codec_pb_list_finish(s->pb, &r, &c, &obj);
    if (rc)
        return fail(s, af_error_set(&s->err, rc, "", 0, 0, "%s",
                                    af__codec_pb_list_error(s->pb)));
    /* a List without items, a Status (410 Expired, ...) or another kind: its kind decides,
     * as in JSON */
    rc = s->kind_known ? 0 : decide_kind(s, obj);
    json_decref(obj);
    if (rc) {
        af_free(r);
        af_free(c);
        return rc;
    }
    if (rv)
        *rv = r;
    else
        af_free(r);
    if (cont)
        *cont = c;
    else
        af_free(c);
    return 0;
}

int af_list_stream_feed(struct af_list_stream *s, const char *data, size_t len)
{
    int rc = 0;

    if (s->pb)
        return pb_feed(s, data, len);
    for (size_t i = 0; i < len && !s->rc; i++) {
        char c = data[i];
        bool again = false;

        switch (s->state) {
        case S_START:
            if (af__codec_ws(c))
                break;
            if (c == 'k') {
                /* "k8s\0": Kubernetes' protobuf (codec/proto.c) */
                s->pb = af__codec_pb_list_new(pb_item, s);
                return pb_feed(s, data + i, len - i);
            }
            if (c == '{') {
                s->state = S_KEY_WAIT;
            } else if (c == '[') {
                s->root_array = true;
                s->kind_known = true;
                s->state = S_ITEM_WAIT;
            } else {
                rc = fail(s, af_error_set(&s->err, AF_ETYPE, "", 0, 0,
                                          "list: expected an object, got '%c'", c));
            }
            break;
        case S_KEY_WAIT:
            if (af__codec_ws(c))
                break;
            if (c == '"') {
                af_buf_reset(&s->key);
                value_start(s, c);
                s->nest.in_str = true;
                if (af_buf_add(&s->key, &c, 1))
                    rc = fail(s, AF_ETOOBIG);
                s->state = S_KEY;
            } else if (c == '}' && !s->need_key) {
                s->state = S_END;
            } else {
                rc = syntax(s, c, "a key");
            }
            s->need_key = false;
            break;
        case S_KEY:
            if (value_byte(s, &s->key, c, &again, &rc))
                s->state = S_COLON;
            break;
        case S_COLON:
            if (af__codec_ws(c))
                break;
            if (c != ':')
                rc = syntax(s, c, "':'");
            else
                s->state = S_VAL_WAIT;
            break;
        case S_VAL_WAIT:
            if (af__codec_ws(c))
                break;
            if (c == '[' && s->key.len == 7 && !memcmp(s->key.buf, "\"items\"", 7)) {
                s->state = S_ITEM_WAIT;
                break;
            }
            if ((s->rest.len && af_buf_add(&s->rest, ",", 1)) ||
                af_buf_add(&s->rest, s->key.buf, s->key.len) || af_buf_add(&s->rest, ":", 1)) {
                rc = fail(s, af_error_set(&s->err, AF_ETOOBIG, "", 0, 0, "list: too large"));
                break;
            }
            value_start(s, c);
            s->state = S_VAL;
            if (value_byte(s, &s->rest, c, &again, &rc))
                s->state = S_AFTER_VAL;
            break;
        case S_VAL:
            if (s->first == '{' || s->first == '[') {
                bool done;
                i = container_run(s, &s->rest, data, i, len, &done, &rc) - 1;
                if (done)
                    s->state = S_AFTER_VAL;
                break;
            }
            if (value_byte(s, &s->rest, c, &again, &rc)) {
                s->state = S_AFTER_VAL;
                if (again)
                    i--;
            }
            break;
        case S_AFTER_VAL:
            if (af__codec_ws(c))
                break;
            if (c == ',') {
                s->state = S_KEY_WAIT;
                s->need_key = true;
            } else if (c == '}') {
                s->state = S_END;
            } else {
                rc = syntax(s, c, "',' or '}'");
            }
            break;
        case S_ITEM_WAIT:
            if (af__codec_ws(c))
                break;
            if (c == ']' && !s->need_elem) {
                s->state = s->root_array ? S_END : S_AFTER_VAL;
                break;
            }
            s->need_elem = false;
            af_buf_reset(&s->item);
            value_start(s, c);
            s->state = S_ITEM;
            if (value_byte(s, &s->item, c, &again, &rc)) {
                s->state = S_AFTER_ITEM;
                rc = item_done(s);
            }
            break;
        case S_ITEM:
            if (s->first == '{' || s->first == '[') {
                bool done;
                i = container_run(s, &s->item, data, i, len, &done, &rc) - 1;
                if (done && !s->rc) {
                    s->state = S_AFTER_ITEM;
                    rc = item_done(s);
                }
                break;
            }
            if (value_byte(s, &s->item, c, &again, &rc)) {
                s->state = S_AFTER_ITEM;
                if (again)
                    i--;
                rc = item_done(s);
            }
            break;
        case S_AFTER_ITEM:
            if (af__codec_ws(c))
                break;
            if (c == ',') {
                s->state = S_ITEM_WAIT;
                s->need_elem = true;
            } else if (c == ']') {
                s->state = s->root_array ? S_END : S_AFTER_VAL;
            } else {
                rc = syntax(s, c, "',' or ']'");
            }
            break;
        case S_END:
            if (!af__codec_ws(c))
                rc = syntax(s, c, "the end");
            break;
        }
    }
    (void)rc;
    return s->rc;
}

int af_list_stream_finish(struct af_list_stream *s, char **rv, char **cont, size_t *skipped,
                          struct af_error *err)
{
    json_t *root = NULL;

    if (rv)
        *rv = NULL;
    if (cont)
        *cont = NULL;
    if (s->pb) {
        (void)pb_finish(s, rv, cont);
        goto out;
    }
    if (!s->rc && s->state != S_END)
        fail(s, af_error_set(&s->err, AF_EPARSE, "", 0, 0,
                             "list is not JSON: it ends early (after item %zu)", s->n_items));
    if (!s->rc && !s->root_array) {
        root = rest_object(s);
        if (root && !s->kind_known)
            (void)decide_kind(s, root);
    }
    if (!s->rc && root) {
        json_t *items = af__codec_get(root, "items");   /* there only when not an array */
        if (items && !json_is_null(items))
            fail(s, af_error_set(&s->err, AF_ETYPE, "", 0, 0, "items: expected an array, got %s",
                                 af__codec_type_name(items)));
    }
    if (!s->rc && root) {
        const char *kind = af__codec_get_str(root, "kind");
        if (kind && (!strcmp(kind, "Node") || !strcmp(kind, "Pod")) && !s->n_items) {
            /* a single object rather than a list */
            int rc = af__codec_list_item(s->cfg, root, "items[0]", NULL, s->cb, s->ud, &s->err);
            if (rc && !s->skip_bad)
                fail(s, rc);
            else if (rc)
                s->skipped++;
        }
        /* items that came before kind */
        for (size_t at = 0; !s->rc && at < s->pending.len;) {
            size_t n = strlen(s->pending.buf + at);
            (void)decode_item(s, s->pending.buf + at, n);
            at += n + 1;
        }
        json_t *meta = af__codec_get(root, "metadata");
        const char *r = af__codec_get_str(meta, "resourceVersion");
        const char *c = af__codec_get_str(meta, "continue");
        if (!s->rc && rv)
            *rv = r && *r ? af_xstrdup(r) : NULL;
        if (!s->rc && cont)
            *cont = c && *c ? af_xstrdup(c) : NULL;
    }
out:
    json_decref(root);
    if (skipped)
        *skipped = s->skipped;
    if (err && (s->rc || s->skipped))
        *err = s->err;
    return s->rc;
}

bool af_list_stream_protobuf(const struct af_list_stream *s)
{
    return s->pb != NULL;
}

/* ---- whole lists -------------------------------------------------------------------- */

int af_codec_decode_list(const struct af_config *cfg, const char *json, size_t len,
                         af_item_cb cb, void *ud, char **rv, char **cont, struct af_error *err)
{
    return af_codec_decode_list_skip(cfg, json, len, cb, ud, rv, cont, NULL, err);
}

int af_codec_decode_list_skip(const struct af_config *cfg, const char *json, size_t len,
                              af_item_cb cb, void *ud, char **rv, char **cont, size_t *skipped,
                              struct af_error *err)
{
    struct af_list_stream *s;
    int rc;

    if (rv)
        *rv = NULL;
    if (cont)
        *cont = NULL;
    if (!json)
        return af_error_set(err, AF_EINVAL, "", 0, 0, "list: no input");
    s = af_list_stream_new(cfg, skipped != NULL, cb, ud);
    (void)af_list_stream_feed(s, json, len);
    rc = af_list_stream_finish(s, rv, cont, skipped, err);
    af_list_stream_free(s);
    return rc;
}
