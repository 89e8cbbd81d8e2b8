/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lists in Kubernetes' protobuf encoding (application/vnd.kubernetes.protobuf), the
 * encoding kube-scheduler and every client-go informer ask for. A kube-apiserver writes a
 * list of 150,000 pods as protobuf 4-6 times faster than as JSON, and a third the size;
 * most of a pod (managedFields, images, probes, env) is then passed over by its length
 * without being read.
 *
 * The body is the magic "k8s\0" and a runtime.Unknown {typeMeta, raw, contentEncoding,
 * contentType}; `raw` is the List {metadata (ListMeta), items}. af__codec_pb_list cuts it
 * into items as the bytes arrive, never holding more than one item, and af__codec_pb_tree
 * turns an item into the jansson tree its JSON would parse to, with only the members the
 * decoders read (objects.c, dra.c): one decoder for both encodings. The members are named
 * by field number in the tables below, from k8s.io/api's generated.proto (numbers there
 * never change; fields this file does not name are skipped whatever their number).
 *
 * What proto3 leaves out, JSON's `omitempty` does too: empty strings, zeros and false are
 * not written into the tree, as the API server would not have written them in JSON.
 * Strings that are not UTF-8 get U+FFFD in place of each bad byte, as Go's JSON encoder
 * writes them.
 */
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/util.h"

#include "codec/internal.h"
#include "accelfit/banned.h"

/* ---- what is read: the schema ---------------------------------------------------------- */

enum pb_type {
    PB_STRING,
    PB_INT,       /* int32 / int64 varint */
    PB_BOOL,
    PB_MESSAGE,   /* ->msg */
    PB_MAP,       /* map<string, string>: entries {1: key, 2: value} */
    PB_MAP_QTY,   /* map<string, Quantity>: the value is {1: string} */
    PB_TIME,      /* metav1.Time {1: seconds, 2: nanos}, as RFC 3339 */
};

struct pb_msg;
struct pb_field {
    uint32_t no;
    uint8_t type;
    bool repeated;   /* a JSON array */
    const char *name;
    const struct pb_msg *msg;
};
struct pb_msg {
    const struct pb_field *f;
    size_t n;
};
#define PB_MSG(fields) {fields, AF_ARRAY_SIZE(fields)}

/* metav1.ObjectMeta (apimachinery meta/v1) */
static const struct pb_field owner_ref_f[] = {
    {1, PB_STRING, false, "kind", NULL},
    {3, PB_STRING, false, "name", NULL},
    {4, PB_STRING, false, "uid", NULL},
    {5, PB_STRING, false, "apiVersion", NULL},
    {6, PB_BOOL, false, "controller", NULL},
};
static const struct pb_msg owner_ref = PB_MSG(owner_ref_f);
static const struct pb_field object_meta_f[] = {
    {1, PB_STRING, false, "name", NULL},
    {2, PB_STRING, false, "generateName", NULL},
    {3, PB_STRING, false, "namespace", NULL},
    {5, PB_STRING, false, "uid", NULL},
    {6, PB_STRING, false, "resourceVersion", NULL},
    {9, PB_TIME, false, "deletionTimestamp", NULL},
    {11, PB_MAP, false, "labels", NULL},
    {12, PB_MAP, false, "annotations", NULL},
    {13, PB_MESSAGE, true, "ownerReferences", &owner_ref},
};
static const struct pb_msg object_meta = PB_MSG(object_meta_f);

/* core/v1 */
static const struct pb_field requirements_f[] = {
    {1, PB_MAP_QTY, false, "limits", NULL},
    {2, PB_MAP_QTY, false, "requests", NULL},
};
static const struct pb_msg requirements = PB_MSG(requirements_f);
static const struct pb_field container_f[] = {
    {1, PB_STRING, false, "name", NULL},
    {8, PB_MESSAGE, false, "resources", &requirements},
    {24, PB_STRING, false, "restartPolicy", NULL},
};
static const struct pb_msg container = PB_MSG(container_f);
static const struct pb_field claim_source_f[] = {   /* v1.26-1.27: PodResourceClaim.source */
    {1, PB_STRING, false, "resourceClaimName", NULL},
    {2, PB_STRING, false, "resourceClaimTemplateName", NULL},
};
static const struct pb_msg claim_source = PB_MSG(claim_source_f);
static const struct pb_field pod_claim_f[] = {
    {1, PB_STRING, false, "name", NULL},
    {2, PB_MESSAGE, false, "source", &claim_source},
    {3, PB_STRING, false, "resourceClaimName", NULL},
    {4, PB_STRING, false, "resourceClaimTemplateName", NULL},
};
static const struct pb_msg pod_claim = PB_MSG(pod_claim_f);
static const struct pb_field pod_spec_f[] = {
    {2, PB_MESSAGE, true, "containers", &container},
    {5, PB_INT, false, "activeDeadlineSeconds", NULL},
    {7, PB_MAP, false, "nodeSelector", NULL},
    {10, PB_STRING, false, "nodeName", NULL},
    {20, PB_MESSAGE, true, "initContainers", &container},
    {32, PB_MAP_QTY, false, "overhead", NULL},
    {39, PB_MESSAGE, true, "resourceClaims", &pod_claim},
    {40, PB_MESSAGE, false, "resources", &requirements},
};
static const struct pb_msg pod_spec = PB_MSG(pod_spec_f);
static const struct pb_field condition_f[] = {
    {1, PB_STRING, false, "type", NULL},
    {2, PB_STRING, false, "status", NULL},
};
static const struct pb_msg condition = PB_MSG(condition_f);
static const struct pb_field container_status_f[] = {
    {1, PB_STRING, false, "name", NULL},
    {5, PB_INT, false, "restartCount", NULL},
};
static const struct pb_msg container_status = PB_MSG(container_status_f);
static const struct pb_field claim_status_f[] = {
    {1, PB_STRING, false, "name", NULL},
    {2, PB_STRING, false, "resourceClaimName", NULL},
};
static const struct pb_msg claim_status = PB_MSG(claim_status_f);
static const struct pb_field ext_mapping_f[] = {
    {1, PB_STRING, false, "containerName", NULL},
    {2, PB_STRING, false, "resourceName", NULL},
    {3, PB_STRING, false, "requestName", NULL},
};
static const struct pb_msg ext_mapping = PB_MSG(ext_mapping_f);
static const struct pb_field ext_status_f[] = {
    {1, PB_MESSAGE, true, "requestMappings", &ext_mapping},
    {2, PB_STRING, false, "resourceClaimName", NULL},
};
static const struct pb_msg ext_status = PB_MSG(ext_status_f);
static const struct pb_field pod_status_f[] = {
    {1, PB_STRING, false, "phase", NULL},
    {2, PB_MESSAGE, true, "conditions", &condition},
    {7, PB_TIME, false, "startTime", NULL},
    {8, PB_MESSAGE, true, "containerStatuses", &container_status},
    {15, PB_MESSAGE, true, "resourceClaimStatuses", &claim_status},
    {18, PB_MESSAGE, false, "extendedResourceClaimStatus", &ext_status},
};
static const struct pb_msg pod_status = PB_MSG(pod_status_f);
static const struct pb_field pod_f[] = {
    {1, PB_MESSAGE, false, "metadata", &object_meta},
    {2, PB_MESSAGE, false, "spec", &pod_spec},
    {3, PB_MESSAGE, false, "status", &pod_status},
};
static const struct pb_msg pod = PB_MSG(pod_f);

static const struct pb_field node_spec_f[] = {
    {4, PB_BOOL, false, "unschedulable", NULL},
};
static const struct pb_msg node_spec = PB_MSG(node_spec_f);
static const struct pb_field node_status_f[] = {
    {1, PB_MAP_QTY, false, "capacity", NULL},
    {2, PB_MAP_QTY, false, "allocatable", NULL},
};
static const struct pb_msg node_status = PB_MSG(node_status_f);
static const struct pb_field node_f[] = {
    {1, PB_MESSAGE, false, "metadata", &object_meta},
    {2, PB_MESSAGE, false, "spec", &node_spec},
    {3, PB_MESSAGE, false, "status", &node_status},
};
static const struct pb_msg node = PB_MSG(node_f);

/* metav1.Status, for an error answered in protobuf */
static const struct pb_field status_f[] = {
    {2, PB_STRING, false, "status", NULL},
    {3, PB_STRING, false, "message", NULL},
    {4, PB_STRING, false, "reason", NULL},
    {6, PB_INT, false, "code", NULL},
};
static const struct pb_msg status = PB_MSG(status_f);

/* ---- the wire format ----------------------------------------------------------------------- */

struct pb_in {
    const uint8_t *p, *end;
};

/* A base-128 varint; false when cut short or longer than 10 bytes. */
static bool varint(struct pb_in *in, uint64_t *v)
{
    uint64_t r = 0;

    for (int shift = 0; shift < 70 && in->p < in->end; shift += 7) {
        uint8_t b = *in->p++;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (b < 0x80) {
            *v = r;
            return true;
        }
    }
    return false;
}

/* Passes over a value of wire type `wt`; false when it does not fit or the type is unknown
 * (groups, 3 and 4, are not in Kubernetes' messages). */
static bool skip(struct pb_in *in, int wt)
{
    uint64_t v;

    switch (wt) {
    case 0:
        return varint(in, &v);
    case 1:
        if (in->end - in->p < 8)
            return false;
        in->p += 8;
        return true;
    case 2:
        if (!varint(in, &v) || v > (uint64_t)(in->end - in->p))
            return false;
        in->p += v;
        return true;
    case 5:
        if (in->end - in->p < 4)
            return false;
        in->p += 4;
        return true;
    default:
        return false;
    }
}

/* A string value as JSON would hold it: bad UTF-8 bytes become U+FFFD. */
static json_t *string(const uint8_t *p, size_t n)
{
    json_t *s = json_stringn((const char *)p, n);
    struct af_buf b;

    if (s)
        return s;
    af_buf_init(&b, 0);
    for (size_t i = 0; i < n;) {
        size_t len = 1;
        uint8_t c = p[i];
        /* the length of a well-formed sequence at i, or 0 */
        if (c < 0x80)
            len = 1;
        else if (c >= 0xc2 && c < 0xe0)
            len = 2;
        else if (c >= 0xe0 && c < 0xf0)
            len = 3;
        else if (c >= 0xf0 && c < 0xf5)
            len = 4;
        else
            len = 0;
        if (len && i + len <= n) {
            json_t *t = json_stringn((const char *)p + i, len);
            if (!t)
                len = 0;
            json_decref(t);
        } else {
            len = 0;
        }
        if (len) {
            af_assert(!af_buf_add(&b, p + i, len));
            i += len;
        } else {
            af_assert(!af_buf_add(&b, "\xef\xbf\xbd", 3));
            i++;
        }
    }
    s = json_stringn(b.buf ? b.buf : "", b.len);
    af_buf_release(&b);
    return s;
}

static const struct pb_field *field(const struct pb_msg *m, uint32_t no)
{
    for (size_t i = 0; i < m->n; i++)
        if (m->f[i].no == no)
            return &m->f[i];
    return NULL;
}

static json_t *message(struct pb_in *in, size_t len, const struct pb_msg *m, const char **why);

/* Field 1 of a Quantity or a map entry's key; field 2 of an entry. Empty when absent. */
static bool entry(struct pb_in *in, size_t len, const uint8_t **k, size_t *kn,
                  const uint8_t **v, size_t *vn, bool value_msg)
{
    struct pb_in e = {in->p, in->p + len};
    static const uint8_t none[1];

    *k = *v = none;
    *kn = *vn = 0;
    while (e.p < e.end) {
        uint64_t key, n;
        if (!varint(&e, &key))
            return false;
        if ((key >> 3) < 1 || (key >> 3) > 2 || (key & 7) != 2) {
            if (!skip(&e, (int)(key & 7)))
                return false;
            continue;
        }
        if (!varint(&e, &n) || n > (uint64_t)(e.end - e.p))
            return false;
        if ((key >> 3) == 1) {
            *k = e.p;
            *kn = (size_t)n;
        } else if (value_msg) {
            /* a Quantity: {1: string} */
            struct pb_in q = {e.p, e.p + n};
            const uint8_t *s, *unused;
            size_t sn, un;
            if (!entry(&q, (size_t)n, &s, &sn, &unused, &un, false))
                return false;
            *v = s;
            *vn = sn;
        } else {
            *v = e.p;
            *vn = (size_t)n;
        }
        e.p += n;
    }
    in->p = e.end;
    return true;
}

/* One field's value (the key is read); NULL with *why when the bytes are not what `f` says. */
static json_t *value(struct pb_in *in, const struct pb_field *f, int wt, const char **why)
{
    uint64_t v;

    if (f->type == PB_INT || f->type == PB_BOOL) {
        if (wt != 0 || !varint(in, &v)) {
            *why = "a number expected";
            return NULL;
        }
        if (f->type == PB_BOOL)
            return v ? json_true() : json_null();
        return (int64_t)v ? json_integer((json_int_t)(int64_t)v) : json_null();
    }
    if (wt != 2 || !varint(in, &v) || v > (uint64_t)(in->end - in->p)) {
        *why = wt != 2 ? "a length-delimited value expected" : "a value runs past its message";
        return NULL;
    }
    switch (f->type) {
    case PB_STRING: {
        json_t *s = v ? string(in->p, (size_t)v) : json_null();
        in->p += v;
        return s;
    }
    case PB_TIME: {
        struct pb_in t = {in->p, in->p + v};
        uint64_t key, secs = 0;
        char buf[AF_RFC3339_LEN + 8];
        in->p += v;
        while (t.p < t.end) {
            if (!varint(&t, &key) || ((key >> 3) == 1 && (key & 7) == 0 ? !varint(&t, &secs)
                                                                         : !skip(&t, (int)(key & 7)))) {
                *why = "a bad timestamp";
                return NULL;
            }
        }
        af_format_rfc3339((double)(int64_t)secs, buf, sizeof(buf));
        return json_string(buf);
    }
    case PB_MESSAGE:
        return message(in, (size_t)v, f->msg, why);
    default:
        *why = "internal: no such type";
        return NULL;
    }
}

/* `len` bytes at in->p as the object `m` describes; in->p moves past them. */
static json_t *message(struct pb_in *in, size_t len, const struct pb_msg *m, const char **why)
{
    struct pb_in b = {in->p, in->p + len};
    json_t *obj = json_object();

    in->p += len;
    while (b.p < b.end) {
        const struct pb_field *f;
        uint64_t key;
        json_t *v;
        if (!varint(&b, &key)) {
            *why = "a field key runs past its message";
            goto bad;
        }
        f = field(m, (uint32_t)(key >> 3));
        if (!f) {
            if (!skip(&b, (int)(key & 7))) {
                *why = "a field runs past its message";
                goto bad;
            }
            continue;
        }
        if (f->type == PB_MAP || f->type == PB_MAP_QTY) {
            const uint8_t *k, *val;
            size_t kn, vn;
            uint64_t n;
            json_t *map = json_object_get(obj, f->name);
            if ((key & 7) != 2 || !varint(&b, &n) || n > (uint64_t)(b.end - b.p) ||
                !entry(&b, (size_t)n, &k, &kn, &val, &vn, f->type == PB_MAP_QTY)) {
                *why = "a bad map entry";
                goto bad;
            }
            if (!map) {
                map = json_object();
                json_object_set_new_nocheck(obj, f->name, map);
            }
            {
                char *ks = af_xstrndup((const char *)k, kn);
                json_t *s = string(val, vn);
                if (strlen(ks) == kn && s)   /* a key with a NUL: not a name */
                    json_object_set_new(map, ks, s);
                else
                    json_decref(s);
                af_free(ks);
            }
            continue;
        }
        v = value(&b, f, (int)(key & 7), why);
        if (!v)
            goto bad;
        if (json_is_null(v))
            continue;
        if (f->repeated) {
            json_t *arr = json_object_get(obj, f->name);
            if (!arr) {
                arr = json_array();
                json_object_set_new_nocheck(obj, f->name, arr);
            }
            json_array_append_new(arr, v);
        } else {
            json_object_set_new_nocheck(obj, f->name, v);
        }
    }
    return obj;
bad:
    json_decref(obj);
    return NULL;
}

json_t *af__codec_pb_tree(const char *kind, const uint8_t *p, size_t len, const char **why)
{
    const struct pb_msg *m = !strcmp(kind, "Pod")      ? &pod
                             : !strcmp(kind, "Node")   ? &node
                             : !strcmp(kind, "Status") ? &status
                                                       : NULL;
    struct pb_in in = {p, p + len};
    json_t *obj;

    *why = "no such kind";
    if (!m)
        return NULL;
    obj = message(&in, len, m, why);
    if (obj)
        json_object_set_new_nocheck(obj, "kind", json_string(kind));
    return obj;
}

/* ---- a List's framing, fed in pieces ----------------------------------------------------- */

enum frame_state {
    F_MAGIC,   /* "k8s\0" */
    F_KEY,     /* a field's key (varint) */
    F_LEN,     /* a length-delimited field's length (varint) */
    F_VARINT,  /* a varint value passed over */
    F_FIXED,   /* a fixed-size value passed over */
    F_BODY,    /* a length-delimited body, kept or passed over */
    F_DONE,
};

/* What a kept body is. */
enum frame_body {
    B_SKIP,
    B_TYPEMETA,   /* Unknown.typeMeta {1: apiVersion, 2: kind} */
    B_ENCODING,   /* Unknown.contentEncoding: must be empty */
    B_LISTMETA,   /* List.metadata {2: resourceVersion, 3: continue} */
    B_ITEM,       /* List.items[i] */
    B_OBJECT,     /* Unknown.raw of what is not a List (a Status): kept whole */
};

struct af__codec_pb_list {
    enum frame_state state;
    int level;                 /* 0: the Unknown; 1: inside its raw (the List) */
    uint64_t level_left;       /* bytes of raw not yet read, at level 1 */
    uint64_t acc;              /* the varint being read */
    int shift;
    uint32_t no;
    int wt;
    uint64_t body_left;
    enum frame_body body_kind;
    struct af_buf body;
    size_t magic_seen;
    size_t offset;             /* bytes fed so far, for messages */
    char kind[64];
    bool is_list;
    bool raw_done;             /* Unknown.raw was read to its end */
    af__codec_pb_item_fn fn;
    void *ud;
    char *rv, *cont;
    json_t *object;            /* a Status, as a tree */
    char err[160];
};

struct af__codec_pb_list *af__codec_pb_list_new(af__codec_pb_item_fn fn, void *ud)
{
    struct af__codec_pb_list *l = af_xcalloc(1, sizeof(*l));
    l->fn = fn;
    l->ud = ud;
    af_buf_init(&l->body, AF_LIST_ITEM_MAX);
    return l;
}

void af__codec_pb_list_free(struct af__codec_pb_list *l)
{
    if (!l)
        return;
    af_buf_release(&l->body);
    af_free(l->rv);
    af_free(l->cont);
    json_decref(l->object);
    af_free(l);
}

static int frame_fail(struct af__codec_pb_list *l, const char *what)
{
    snprintf(l->err, sizeof(l->err), "list is not Kubernetes protobuf: %s at byte %zu", what,
             l->offset);
    l->state = F_DONE;
    return AF_EPARSE;
}

/* String field `no` of a small message (TypeMeta, ListMeta), whole (a continue token can be
 * long): a new string, "" when absent, NULL when the message is not protobuf. */
static char *small_string(const struct af_buf *b, uint64_t no)
{
    struct pb_in in = {(const uint8_t *)b->buf, (const uint8_t *)b->buf + b->len};
    char *out = af_xstrdup("");

    while (in.p < in.end) {
        uint64_t key, n;
        if (!varint(&in, &key))
            goto bad;
        if ((key >> 3) != no || (key & 7) != 2) {
            if (!skip(&in, (int)(key & 7)))
                goto bad;
            continue;
        }
        if (!varint(&in, &n) || n > (uint64_t)(in.end - in.p))
            goto bad;
        af_free(out);
        out = af_xstrndup((const char *)in.p, (size_t)n);
        in.p += n;
    }
    return out;
bad:
    af_free(out);
    return NULL;
}

/* A kept body is complete. */
static int body_done(struct af__codec_pb_list *l)
{
    char *kind, *rv, *cont;
    int rc = 0;

    switch (l->body_kind) {
    case B_TYPEMETA:
        if (!(kind = small_string(&l->body, 2)))
            return frame_fail(l, "a bad typeMeta");
        snprintf(l->kind, sizeof(l->kind), "%.63s", kind);
        af_free(kind);
        l->is_list = strlen(l->kind) > 4 && !strcmp(l->kind + strlen(l->kind) - 4, "List");
        break;
    case B_ENCODING:
        if (l->body.len)
            return frame_fail(l, "a content encoding (not read)");
        break;
    case B_LISTMETA:
        rv = small_string(&l->body, 2);
        cont = small_string(&l->body, 3);
        if (!rv || !cont) {
            af_free(rv);
            af_free(cont);
            return frame_fail(l, "a bad list metadata");
        }
        af_free(l->rv);
        af_free(l->cont);
        l->rv = rv;
        l->cont = cont;
        break;
    case B_ITEM:
        rc = l->fn(l->ud, l->kind, (const uint8_t *)l->body.buf, l->body.len);
        break;
    case B_OBJECT: {
        const char *why;
        l->raw_done = true;
        json_decref(l->object);
        l->object = af__codec_pb_tree(l->kind, (const uint8_t *)l->body.buf, l->body.len, &why);
        if (!l->object && strcmp(why, "no such kind"))
            return frame_fail(l, why);
        break;
    }
    case B_SKIP:
        break;
    }
    af_buf_reset(&l->body);
    return rc;
}

/* A field's key and (for wire type 2) length are read: what to do with its body. */
static int field_start(struct af__codec_pb_list *l)
{
    l->body_kind = B_SKIP;
    if (l->wt != 2)
        return 0;
    if (l->level == 0) {
        if (l->no == 1)
            l->body_kind = B_TYPEMETA;
        else if (l->no == 3)
            l->body_kind = B_ENCODING;
        else if (l->no == 2 && l->is_list) {
            /* the List itself: go inside */
            l->level = 1;
            l->level_left = l->body_left;
            l->state = F_KEY;
            return 0;
        } else if (l->no == 2) {
            l->body_kind = B_OBJECT;
        }
    } else if (l->no == 1) {
        l->body_kind = B_LISTMETA;
    } else if (l->no == 2) {
        l->body_kind = B_ITEM;
    }
    if (l->body_kind != B_SKIP && l->body_left > AF_LIST_ITEM_MAX) {
        snprintf(l->err, sizeof(l->err), "list: an item of %llu bytes (at most %u)",
                 (unsigned long long)l->body_left, AF_LIST_ITEM_MAX);
        l->state = F_DONE;
        return AF_ETOOBIG;
    }
    return 0;
}

int af__codec_pb_list_feed(struct af__codec_pb_list *l, const uint8_t *data, size_t len)
{
    static const uint8_t magic[4] = {'k', '8', 's', 0};
    size_t i = 0;
    int rc = 0;

    while (i < len && !rc && l->state != F_DONE) {
        size_t used = 1;
        uint8_t c = data[i];
        int level;

        if (l->level == 1 && l->level_left == 0) {
            l->level = 0;   /* the List ended: back in the Unknown */
            l->raw_done = true;
        }
        level = l->level;
        switch (l->state) {
        case F_MAGIC:
            if (c != magic[l->magic_seen])
                return frame_fail(l, "no \"k8s\\0\" at the start");
            if (++l->magic_seen == 4)
                l->state = F_KEY;
            break;
        case F_KEY:
        case F_LEN:
        case F_VARINT:
            if (l->shift >= 64)
                return frame_fail(l, "a varint longer than 10 bytes");
            l->acc |= (uint64_t)(c & 0x7f) << l->shift;
            l->shift += 7;
            if (c & 0x80)
                break;
            if (l->state == F_KEY) {
                l->no = (uint32_t)(l->acc >> 3);
                l->wt = (int)(l->acc & 7);
                if (l->wt == 0)
                    l->state = F_VARINT;
                else if (l->wt == 2)
                    l->state = F_LEN;
                else if (l->wt == 1 || l->wt == 5)
                    l->state = F_FIXED;
                else
                    return frame_fail(l, "an unknown wire type");
                l->body_left = l->wt == 1 ? 8 : 4;
            } else if (l->state == F_LEN) {
                l->body_left = l->acc;
                l->state = F_BODY;
                rc = field_start(l);
                if (!rc && l->body_left == 0 && l->state == F_BODY) {
                    rc = body_done(l);
                    l->state = F_KEY;
                }
            } else {
                l->state = F_KEY;
            }
            l->acc = 0;
            l->shift = 0;
            break;
        case F_FIXED:
        case F_BODY: {
            size_t n = len - i < l->body_left ? len - i : (size_t)l->body_left;
            if (l->state == F_BODY && l->body_kind != B_SKIP && af_buf_add(&l->body, data + i, n)) {
                snprintf(l->err, sizeof(l->err), "list: an item too large");
                l->state = F_DONE;
                return AF_ETOOBIG;
            }
            used = n;
            l->body_left -= n;
            if (l->body_left == 0) {
                if (l->state == F_BODY)
                    rc = body_done(l);
                l->state = F_KEY;
            }
            break;
        }
        case F_DONE:
            break;
        }
        /* inside the List every byte counts against its length; a field that would run
         * past it is refused (the length that opened it was read at level 0) */
        if (level == 1 && !rc) {
            if (used > l->level_left)
                return frame_fail(l, "a field runs past its list");
            l->level_left -= used;
            if (((l->state == F_BODY || l->state == F_FIXED) && l->body_left > l->level_left) ||
                (l->level_left == 0 && l->state != F_KEY))
                return frame_fail(l, "a field runs past its list");
        }
        i += used;
        l->offset += used;
    }
    return rc ? rc : (l->state == F_DONE && *l->err ? AF_EPARSE : 0);
}

int af__codec_pb_list_finish(struct af__codec_pb_list *l, char **rv, char **cont,
                             json_t **object)
{
    *rv = *cont = NULL;
    *object = NULL;
    if (l->state == F_DONE)
        return *l->err ? AF_EPARSE : 0;
    if (l->level == 1 && !l->level_left)
        l->raw_done = true;
    if (l->state != F_KEY || !l->raw_done || !*l->kind)
        return frame_fail(l, "it ends early");
    if (l->rv && *l->rv) {
        *rv = l->rv;
        l->rv = NULL;
    }
    if (l->cont && *l->cont) {
        *cont = l->cont;
        l->cont = NULL;
    }
    *object = l->object && !l->is_list ? l->object : json_object();
    if (*object == l->object)
        l->object = NULL;
    json_object_set_new(*object, "kind", json_string(l->kind));
    return 0;
}

const char *af__codec_pb_list_error(const struct af__codec_pb_list *l)
{
    return l->err;
}
