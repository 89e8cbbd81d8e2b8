/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the codec's files, each defined in one file and used by the
 * files above it: scan.c (JSON text before it is parsed) is used by objects.c and
 * list_stream.c; objects.c (values, Nodes, Pods, list items) by list_stream.c,
 * extender.c and the other decoders; list_stream.c by no file here. Private to
 * src/codec: json_t never leaves this directory.
 */
#ifndef AF_CODEC_INTERNAL_H
#define AF_CODEC_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "accelfit/codec.h"

/* Why af__codec_parse refused a text: what, and the byte it was found at. */
struct af__codec_perr {
    char text[96];
    size_t offset;
};
/* JSON text to a jansson tree, as json_loadb(text, len, flags) with flags of
 * JSON_ALLOW_NUL and JSON_DECODE_ANY builds it, several times faster (codec/parse.c).
 * NULL with *err filled when the text is not JSON. */
json_t *af__codec_parse(const char *text, size_t len, size_t flags, struct af__codec_perr *err);
/* A flag of af__codec_parse beside jansson's: the object and array values of members the
 * decoders never read (af__codec_unread_key) are passed over unread and become null. */
#define AF__PARSE_SKIP_UNREAD 0x1000u
/* Another: the same members' object and array values are read and checked as any other
 * (what is refused is refused), but not built, and become null; "affinity" is built. For a
 * request's Pod, which must be refused where jansson would refuse it. */
#define AF__PARSE_CHECK_UNREAD 0x2000u
/* Line and column (from 1) of byte `offset` of `text`, for messages. */
void af__codec_line_col(const char *text, size_t offset, int *line, int *col);

/* jansson allocates from `a` on this thread until leave (which resets `a`): for trees
 * that live for one item (codec/arena.c). Enter returns what to pass to leave. */
struct af_arena *af__codec_arena_enter(struct af_arena *a);
void af__codec_arena_leave(struct af_arena *a, struct af_arena *prev);

/* "object", "array", "string", ... for error messages. Static. */
const char *af__codec_type_name(const json_t *v);
/* A Node / Pod object to a new record; `where` names it in errors ("items[3]"). */
int af__codec_node_from_json(const struct af_config *cfg, json_t *obj, const char *where,
                             struct af_node_info **out, struct af_error *err);
int af__codec_pod_from_json(json_t *obj, const char *where, struct af_pod_info **out,
                            struct af_error *err);
/* One item of a List: decoded by its kind (or `def_kind` when it has none) and passed to
 * `cb`; items of other kinds are ignored (0). Used by lists whole and streamed. */
/* The kind a misspelled one was likely meant to be ("Nodee" -> "Node"), or NULL. */
const char *af__codec_kind_hint(const char *kind);
/* A NodeOverlay object (src/codec/overlay.c) into *out; 0 or an error naming it. */
struct af_overlay;
int af__codec_overlay_from_json(json_t *obj, const char *where, struct af_overlay *out,
                                struct af_error *err);
/* dra.c: a DRA object of `kind` into *out (zeroed first); a pod's spec.resourceClaims and
 * status.resourceClaimStatuses into p->claims. */
struct af_dra_obj;
int af__codec_dra_from_json(enum af_dra_kind kind, json_t *obj, const char *where,
                            struct af_dra_obj *out, struct af_error *err);
void af__codec_pod_claims(json_t *spec, json_t *status, struct af_pod_info *p);
/* The pod's DRA extended resources (af_pod_info.ext) and the claim kube-scheduler made for
 * them (status.extendedResourceClaimStatus); after af__codec_pod_claims and the requests. */
void af__codec_pod_ext(json_t *spec, json_t *status, struct af_pod_info *p);
/* objects.c: a cluster file's text to its tree (JSON or YAML, the top's shape checked). */
int af__codec_cluster_root(const char *name, const char *text, size_t len, json_t **out,
                           struct af_error *err);
/* The NodeOverlays among the items of a cluster file's root (objects.c); *out NULL when
 * there are none. 0, or the first bad overlay's error. */
struct af_overlays;
int af__codec_file_overlays(json_t *root, struct af_overlays **out, struct af_error *err);
int af__codec_list_item(const struct af_config *cfg, json_t *it, const char *where,
                        const char *def_kind, af_item_cb cb, void *ud, struct af_error *err);
/* A List's `kind`: 0 with *def_kind "Node" (NodeList), "Pod" (PodList) or NULL (List, a
 * lone Node or Pod, no kind); an error for a Status (AF_EEXPIRED for 410) or another kind. */
int af__codec_list_kind(json_t *root, const char **def_kind, struct af_error *err);
/* ---- proto.c: lists in Kubernetes' protobuf encoding ------------------------------------- */

/* An item (a Pod or Node message) to the tree its JSON would parse to, with the members the
 * decoders read and a "kind"; a Status too. NULL with *why when the bytes are not one. */
json_t *af__codec_pb_tree(const char *kind, const uint8_t *p, size_t len, const char **why);
/* A List's body ("k8s\0", runtime.Unknown) cut into items as it arrives: `fn` gets each item
 * with the List's kind ("PodList"); a nonzero return stops the feed and is returned. */
typedef int (*af__codec_pb_item_fn)(void *ud, const char *kind, const uint8_t *item,
                                    size_t len);
struct af__codec_pb_list;
struct af__codec_pb_list *af__codec_pb_list_new(af__codec_pb_item_fn fn, void *ud);
int af__codec_pb_list_feed(struct af__codec_pb_list *l, const uint8_t *data, size_t len);
/* The end: 0 with the ListMeta's *rv and *cont (NULL when empty; the caller frees) and
 * *object, {"kind": the List's kind} or, for a body that is not a List (a Status), its tree
 * with "kind"; AF_EPARSE when cut short. af__codec_pb_list_error says what was wrong. */
int af__codec_pb_list_finish(struct af__codec_pb_list *l, char **rv, char **cont,
                             json_t **object);
const char *af__codec_pb_list_error(const struct af__codec_pb_list *l);
void af__codec_pb_list_free(struct af__codec_pb_list *l);   /* NULL is fine */

/* ---- scan.c: JSON text looked at byte by byte ---------------------------------------------- */

/* Whether a member named k[0..n) is one the decoders never read (managedFields, env,
 * volumes, images, ...), whose object or array value AF__PARSE_SKIP_UNREAD passes over. */
bool af__codec_unread_key(const char *k, size_t n);

/* "where.field" ("field" when `where` is empty) and "where[i]" into out[cap], cut short as
 * snprintf would: the paths messages name, built for every object decoded, so without
 * snprintf's cost (a third of the decoding of a pod's fields). */
void af__codec_path(char *out, size_t cap, const char *where, const char *field);
void af__codec_path_index(char *out, size_t cap, const char *where, size_t i);

/* Where an object or array stands while its bytes go by: nesting depth, and whether in a
 * string and just after a backslash there. */
struct af__codec_nest {
    int depth;
    bool in_str, esc;
};

/*
 * Scans text[at..len) of an object or array from the state `*n`, up to and including the
 * byte that closes it (strings skipped). Returns the index after the last byte scanned;
 * *closed when the container ended there.
 */
size_t af__codec_nest_scan(struct af__codec_nest *n, const char *text, size_t at, size_t len,
                           bool *closed);

/*
 * Block-at-a-time scanning: the length of the prefix of s[0..len) with no byte that a
 * JSON string writer or a strict reader must look at (< 0x20, '"', '\\', >= 0x80), give
 * or take the last partial block, which the caller's byte loop handles. `lenient`: only
 * '"' and '\\' count. Strings are most of the bytes of a request or an object. 16 bytes
 * a step in the compiler's generic vectors (SSE2 on x86-64, NEON on arm64, plain words
 * elsewhere), then one 8-byte word.
 */
typedef unsigned char af__codec_v16 __attribute__((vector_size(16)));
typedef uint64_t af__codec_v2x64 __attribute__((vector_size(16)));

static inline size_t af__codec_plain_prefix(const char *s, size_t len, bool lenient)
{
    const uint64_t ones = 0x0101010101010101ull, high = 0x8080808080808080ull;
    size_t i = 0;

    for (; i + 16 <= len; i += 16) {
        af__codec_v16 x, bad;
        af__codec_v2x64 any;
        memcpy(&x, s + i, 16);
        bad = (af__codec_v16)((x == '"') | (x == '\\'));
        if (!lenient)
            bad |= (af__codec_v16)((x < 0x20) | (x >= 0x80));
        any = (af__codec_v2x64)bad;
        if (any[0] | any[1])
            return i;
    }
    if (i + 8 <= len) {
        uint64_t x, q, b, t;
        memcpy(&x, s + i, 8);
        q = x ^ (ones * '"');
        b = x ^ (ones * '\\');
        t = ((q - ones) & ~q & high) | ((b - ones) & ~b & high);   /* a '"' or a '\\' */
        if (!lenient)
            t |= ((x - ones * 0x20) & ~x & high) | (x & high);     /* < 0x20, >= 0x80 */
        if (!t)
            i += 8;
    }
    return i;
}

/* JSON's white space. */
static inline bool af__codec_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* ---- objects.c, extender.c: values -------------------------------------------------------- */
/* A request body (ExtenderArgs, preemption, /recommend, AdmissionReview): like
 * af__codec_load, but "\u0000" anywhere is refused with a message saying so, since a
 * name a C string would cut short must not stand for another. */
int af__codec_load_request(const char *body, size_t len, json_t **out, struct af_error *err);
/* af__codec_load_request, and the body must be an object ("request body: expected an object
 * (WHAT), got array"); *out is NULL on any error. */
int af__codec_load_request_object(const char *body, size_t len, const char *what, json_t **out,
                                  struct af_error *err);
/* Parses `text` with jansson; on failure `err` says "<what> is not JSON: ... at line L column C". */
int af__codec_load(const char *text, size_t len, const char *what, json_t **out,
                   struct af_error *err);
/* The same with af__codec_parse's flags (JSON_ALLOW_NUL, JSON_DECODE_ANY,
 * AF__PARSE_SKIP_UNREAD). */
int af__codec_load_flags(const char *text, size_t len, size_t flags, const char *what,
                         json_t **out, struct af_error *err) AF_MUST_CHECK;

/*
 * The two halves of af_codec_decode_args, apart for tests and the fuzz harness
 * (tests/fuzz/fuzz_args.c), which check that the fast path accepts only what jansson
 * does and decodes it as the general path would. af__codec_args_fast returns 1 with
 * *out set when it decoded the body, 0 when it declined (the general path decides);
 * af__codec_args_general is af_codec_decode_args without the fast path.
 */
struct af_ext_args;
int af__codec_args_fast(const char *body, size_t len, struct af_ext_args **out);
int af__codec_args_general(const struct af_config *cfg, const char *body, size_t len,
                           struct af_ext_args **out, struct af_error *err);

/* Member `key` of an object (NULL when obj is not one, or lacks it); a string's text, NULL
 * when not a string or when it holds a NUL; both at once. */
json_t *af__codec_get(json_t *obj, const char *key);
const char *af__codec_str(json_t *v);
const char *af__codec_get_str(json_t *obj, const char *key);

#endif
