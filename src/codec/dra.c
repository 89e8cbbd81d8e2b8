/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DRA objects (resource.k8s.io/v1) to the compact records of accelfit/dra.h: ResourceSlices
 * (driver, pool, node, devices with the attributes and memory accelfit reads),
 * ResourceClaims (requests, exactly and firstAvailable; allocation results, nodeSelector and
 * reservedFor), ResourceClaimTemplates (spec.spec) and DeviceClasses (selectors,
 * extendedResourceName); and a pod's spec.resourceClaims with its
 * status.resourceClaimStatuses. Nothing of the JSON is kept. A field of the wrong type is
 * read as absent, except the names an object is known by, whose absence is an error naming
 * the object.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/dra.h"
#include "accelfit/util.h"

#include "codec/internal.h"
#include "accelfit/banned.h"

#define DRA_MAX_DEVICES 4096u     /* devices read of one slice (the API allows 128) */
#define DRA_MAX_REQUESTS 32u
#define DRA_MAX_CHOICES 8u
#define DRA_MAX_SELECTORS 32u
#define DRA_MAX_RESULTS 1024u
#define DRA_MAX_RESERVED 256u

static char *dup_str(json_t *obj, const char *key)
{
    const char *s = af__codec_get_str(obj, key);
    return s ? af_xstrdup(s) : NULL;
}

/* A quantity ("40Gi", "40448Mi", "80G", "1073741824") in MiB; 0 when it is not one. */
static uint32_t quantity_mib(json_t *v)
{
    static const struct {
        const char *sfx;
        double mult;
    } units[] = {{"Ki", 1024.0},        {"Mi", 1048576.0},     {"Gi", 1073741824.0},
                 {"Ti", 1099511627776.0}, {"k", 1e3},            {"M", 1e6},
                 {"G", 1e9},            {"T", 1e12},            {"", 1.0}};
    const char *s = json_string_value(v);
    char *end;
    double x, mib;

    if (json_is_integer(v))
        x = (double)json_integer_value(v);
    else if (!s || !*s || !(isdigit((unsigned char)*s) || *s == '.'))
        return 0;
    else {
        x = strtod(s, &end);
        for (size_t i = 0; i < AF_ARRAY_SIZE(units); i++)
            if (!strcmp(end, units[i].sfx)) {
                x *= units[i].mult;
                goto done;
            }
        return 0;
    }
done:
    mib = x / 1048576.0;
    if (!(mib > 0) || mib > 4e9)
        return 0;
    return (uint32_t)(mib + 0.5);
}

/* A device attribute's value as text (string, int, bool or version); NULL when absent. */
static const char *attr_text(json_t *attrs, const char *driver, const char *name, char *buf,
                             size_t n)
{
    json_t *a = af__codec_get(attrs, name), *v;

    if (!a && driver) {
        /* a fully qualified name ("gpu.nvidia.com/productName") is the same attribute */
        char q[160];
        snprintf(q, sizeof(q), "%s/%s", driver, name);
        a = af__codec_get(attrs, q);
    }
    if (!json_is_object(a))
        return NULL;
    if ((v = af__codec_get(a, "string")) && json_is_string(v))
        return json_string_value(v);
    if ((v = af__codec_get(a, "version")) && json_is_string(v))
        return json_string_value(v);
    if ((v = af__codec_get(a, "int")) && json_is_integer(v)) {
        snprintf(buf, n, "%lld", (long long)json_integer_value(v));
        return buf;
    }
    if ((v = af__codec_get(a, "bool")) && json_is_boolean(v))
        return json_is_true(v) ? "true" : "false";
    return NULL;
}

/* Appends `s` (with its NUL) to the slice's string block, reusing an equal earlier value
 * among the last few; its offset. */
static uint32_t intern(struct af_buf *b, const char *s, uint32_t *recent, size_t n_recent)
{
    size_t len = strlen(s);
    uint32_t off;

    if (!len)
        return 0;
    for (size_t i = 0; i < n_recent; i++)
        if (recent[i] && !strcmp(b->buf + recent[i], s))
            return recent[i];
    off = (uint32_t)b->len;
    af_assert(af_buf_add(b, s, len + 1) == 0);
    return off;
}

static int slice_from_json(json_t *obj, const char *where, struct af_dra_slice **out,
                           struct af_error *err)
{
    json_t *meta = af__codec_get(obj, "metadata"), *spec = af__codec_get(obj, "spec");
    json_t *pool = af__codec_get(spec, "pool"), *devs = af__codec_get(spec, "devices"), *dv;
    const char *name = af__codec_get_str(meta, "name");
    struct af_dra_slice *s;
    struct af_buf b = AF_BUF_INIT(0);   /* as long as the slice's own strings */
    uint32_t recent[AF_DRA_ATTR__COUNT] = {0};
    size_t i, n;

    if (!name || !*name)
        return af_error_set(err, AF_EINVAL, "", 0, 0, "%s: ResourceSlice without metadata.name",
                            where);
    s = af_dra_slice_new();
    s->name = af_xstrdup(name);
    s->driver = dup_str(spec, "driver");
    s->pool = dup_str(pool, "name");
    {
        const char *node = af__codec_get_str(spec, "nodeName");
        s->node = node && *node ? af_xstrdup(node) : NULL;
    }
    if (json_is_integer(af__codec_get(pool, "generation")))
        s->generation = json_integer_value(af__codec_get(pool, "generation"));
    n = json_is_array(devs) ? json_array_size(devs) : 0;
    if (n > DRA_MAX_DEVICES)
        n = DRA_MAX_DEVICES;
    s->devices = af_xcalloc(n + 1, sizeof(*s->devices));
    af_assert(af_buf_add(&b, "", 1) == 0);   /* offset 0 is "" */
    for (i = 0; i < n; i++) {
        struct af_dra_device *d = &s->devices[s->n_devices];
        json_t *attrs, *cap;
        const char *dn, *v[AF_DRA_ATTR__COUNT];
        char bufs[AF_DRA_ATTR__COUNT][24];
        static const char *const names[AF_DRA_ATTR__COUNT] = {
            "type", "productName", "profile", "instanceType", "resourceType"};
        int cls = -1;

        dv = json_array_get(devs, i);
        dn = af__codec_get_str(dv, "name");
        if (!dn || !*dn)
            continue;
        /* v1beta1 wrapped a device's fields in `basic`; v1 has them on the device */
        attrs = af__codec_get(dv, "attributes");
        cap = af__codec_get(dv, "capacity");
        if (!attrs && json_is_object(af__codec_get(dv, "basic"))) {
            attrs = af__codec_get(af__codec_get(dv, "basic"), "attributes");
            cap = af__codec_get(af__codec_get(dv, "basic"), "capacity");
        }
        for (int a = 0; a < AF_DRA_ATTR__COUNT; a++)
            v[a] = attr_text(attrs, s->driver, names[a], bufs[a], sizeof(bufs[a]));
        d->name = intern(&b, dn, NULL, 0);
        for (int a = 0; a < AF_DRA_ATTR__COUNT; a++) {
            d->attr[a] = v[a] ? intern(&b, v[a], &recent[a], 1) : 0;
            if (d->attr[a])
                recent[a] = d->attr[a];
        }
        d->res = (int8_t)af_dra_device_res(s->driver, v[AF_DRA_ATTR_TYPE],
                                           v[AF_DRA_ATTR_RESOURCE_TYPE]);
        if (v[AF_DRA_ATTR_PRODUCT])
            cls = af_class_from_accel_name(v[AF_DRA_ATTR_PRODUCT]);
        if (cls < 0 && v[AF_DRA_ATTR_INSTANCE_TYPE])
            cls = af_class_from_instance_family(v[AF_DRA_ATTR_INSTANCE_TYPE]);
        if (cls == AF_CLASS_CPU)
            cls = -1;
        d->cls = (int8_t)cls;
        {
            json_t *mem = af__codec_get(cap, "memory");
            d->mem_mib = quantity_mib(json_is_object(mem) ? af__codec_get(mem, "value") : mem);
        }
        s->n_devices++;
    }
    s->strings_len = b.len;
    s->strings = af_buf_detach(&b, NULL);
    *out = s;
    return 0;
}

static void selectors(json_t *arr, struct af_dra_selector *sel)
{
    size_t i;
    json_t *x;

    json_array_foreach(json_is_array(arr) ? arr : NULL, i, x) {
        const char *e = af__codec_get_str(af__codec_get(x, "cel"), "expression");
        if (i >= DRA_MAX_SELECTORS)
            break;
        if (e)
            af_dra_selector_parse(sel, e);
        else
            sel->unknown++;
    }
}

static void choice_from_json(json_t *x, const char *name, struct af_dra_choice *c)
{
    const char *mode = af__codec_get_str(x, "allocationMode");
    json_t *count = af__codec_get(x, "count");

    c->name = af_xstrdup(name);
    c->device_class = dup_str(x, "deviceClassName");
    if (!c->device_class)
        c->device_class = af_xstrdup("");
    c->all = mode && !strcmp(mode, "All");
    c->count = json_is_integer(count) && json_integer_value(count) > 0
                   ? json_integer_value(count)
                   : 1;
    if (c->count > 4096)
        c->count = 4096;
    selectors(af__codec_get(x, "selectors"), &c->sel);
}

/* spec.devices.requests of a claim (or of a template's spec.spec) into `c`. */
static void claim_requests(json_t *spec, struct af_dra_claim *c)
{
    json_t *reqs = af__codec_get(af__codec_get(spec, "devices"), "requests"), *r;
    size_t i, n = json_is_array(reqs) ? json_array_size(reqs) : 0;

    if (n > DRA_MAX_REQUESTS)
        n = DRA_MAX_REQUESTS;
    c->requests = af_xcalloc(n + 1, sizeof(*c->requests));
    for (i = 0; i < n; i++) {
        struct af_dra_request *q = &c->requests[c->n_requests];
        json_t *exactly, *first;
        const char *rn;
        r = json_array_get(reqs, i);
        rn = af__codec_get_str(r, "name");
        exactly = af__codec_get(r, "exactly");
        first = af__codec_get(r, "firstAvailable");
        q->name = af_xstrdup(rn ? rn : "");
        if (json_is_array(first) && json_array_size(first)) {
            size_t m = json_array_size(first);
            if (m > DRA_MAX_CHOICES)
                m = DRA_MAX_CHOICES;
            q->first_available = true;
            q->choices = af_xcalloc(m, sizeof(*q->choices));
            for (size_t j = 0; j < m; j++) {
                json_t *sub = json_array_get(first, j);
                const char *sn = af__codec_get_str(sub, "name");
                choice_from_json(sub, sn ? sn : "", &q->choices[q->n_choices++]);
            }
        } else {
            /* v1 `exactly`; v1beta1 had the fields on the request itself */
            q->choices = af_xcalloc(1, sizeof(*q->choices));
            choice_from_json(json_is_object(exactly) ? exactly : r, q->name, &q->choices[0]);
            q->n_choices = 1;
        }
        c->n_requests++;
    }
}

/* allocation.nodeSelector: the node a matchFields metadata.name In [one] term names. */
static char *selector_node(json_t *ns)
{
    json_t *terms = af__codec_get(ns, "nodeSelectorTerms"), *t, *f;
    size_t i, j;

    json_array_foreach(json_is_array(terms) ? terms : NULL, i, t) {
        json_t *mf = af__codec_get(t, "matchFields");
        json_array_foreach(json_is_array(mf) ? mf : NULL, j, f) {
            json_t *vals = af__codec_get(f, "values");
            const char *key = af__codec_get_str(f, "key"), *op = af__codec_get_str(f, "operator");
            if (key && op && !strcmp(key, "metadata.name") && !strcmp(op, "In") &&
                json_is_array(vals) && json_array_size(vals) == 1 &&
                json_is_string(json_array_get(vals, 0)))
                return af_xstrdup(json_string_value(json_array_get(vals, 0)));
        }
    }
    return NULL;
}

static int claim_from_json(json_t *obj, const char *where, bool tmpl, struct af_dra_claim **out,
                           struct af_error *err)
{
    json_t *meta = af__codec_get(obj, "metadata"), *spec = af__codec_get(obj, "spec");
    json_t *status = af__codec_get(obj, "status"), *alloc, *results, *x;
    const char *name = af__codec_get_str(meta, "name"), *ns = af__codec_get_str(meta, "namespace");
    struct af_dra_claim *c;
    size_t i;

    if (!name || !*name)
        return af_error_set(err, AF_EINVAL, "", 0, 0, "%s: %s without metadata.name", where,
                            tmpl ? "ResourceClaimTemplate" : "ResourceClaim");
    c = af_dra_claim_new();
    c->name = af_xstrdup(name);
    c->ns = af_xstrdup(ns && *ns ? ns : "default");
    c->uid = dup_str(meta, "uid");
    claim_requests(tmpl ? af__codec_get(spec, "spec") : spec, c);
    *out = c;
    if (tmpl)
        return 0;
    alloc = af__codec_get(status, "allocation");
    if (!json_is_object(alloc))
        return 0;
    c->allocated = true;
    results = af__codec_get(af__codec_get(alloc, "devices"), "results");
    c->results = af_xcalloc(json_is_array(results) ? json_array_size(results) + 1 : 1,
                            sizeof(*c->results));
    json_array_foreach(json_is_array(results) ? results : NULL, i, x) {
        struct af_dra_result *r;
        if (i >= DRA_MAX_RESULTS)
            break;
        r = &c->results[c->n_results++];
        r->driver = dup_str(x, "driver");
        r->pool = dup_str(x, "pool");
        r->device = dup_str(x, "device");
        r->request = dup_str(x, "request");
    }
    c->alloc_node = selector_node(af__codec_get(alloc, "nodeSelector"));
    x = af__codec_get(status, "reservedFor");
    if (json_is_array(x) && json_array_size(x)) {
        size_t n = json_array_size(x) < DRA_MAX_RESERVED ? json_array_size(x) : DRA_MAX_RESERVED;
        c->reserved_uids = af_xcalloc(n, sizeof(*c->reserved_uids));
        for (i = 0; i < n; i++) {
            const char *uid = af__codec_get_str(json_array_get(x, i), "uid");
            c->reserved_uids[c->n_reserved++] = af_xstrdup(uid ? uid : "");
        }
    }
    return 0;
}

static int class_from_json(json_t *obj, const char *where, struct af_dra_class **out,
                           struct af_error *err)
{
    json_t *meta = af__codec_get(obj, "metadata"), *spec = af__codec_get(obj, "spec");
    const char *name = af__codec_get_str(meta, "name");
    struct af_dra_class *c;

    if (!name || !*name)
        return af_error_set(err, AF_EINVAL, "", 0, 0, "%s: DeviceClass without metadata.name",
                            where);
    c = af_dra_class_new();
    c->name = af_xstrdup(name);
    c->extended_resource = dup_str(spec, "extendedResourceName");
    selectors(af__codec_get(spec, "selectors"), &c->sel);
    *out = c;
    return 0;
}

static const char *const kind_names[] = {
    [AF_DRA_SLICE] = "ResourceSlice",
    [AF_DRA_CLAIM] = "ResourceClaim",
    [AF_DRA_TEMPLATE] = "ResourceClaimTemplate",
    [AF_DRA_CLASS] = "DeviceClass",
};

const char *af_dra_kind_name(enum af_dra_kind k)
{
    return (unsigned)k < AF_ARRAY_SIZE(kind_names) ? kind_names[k] : "?";
}

int af_dra_kind_parse(const char *s)
{
    for (size_t i = 0; s && i < AF_ARRAY_SIZE(kind_names); i++)
        if (!strcmp(s, kind_names[i]))
            return (int)i;
    return -1;
}

void af_dra_obj_clear(struct af_dra_obj *o)
{
    af_dra_slice_unref(o->slice);
    af_dra_claim_unref(o->claim);
    af_dra_class_unref(o->cls);
    memset(o, 0, sizeof(*o));
}

int af__codec_dra_from_json(enum af_dra_kind kind, json_t *obj, const char *where,
                            struct af_dra_obj *out, struct af_error *err)
{
    memset(out, 0, sizeof(*out));
    out->kind = kind;
    if (!json_is_object(obj))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "%s: expected an object, got %s", where,
                            af__codec_type_name(obj));
    switch (kind) {
    case AF_DRA_SLICE:
        return slice_from_json(obj, where, &out->slice, err);
    case AF_DRA_CLAIM:
    case AF_DRA_TEMPLATE:
        return claim_from_json(obj, where, kind == AF_DRA_TEMPLATE, &out->claim, err);
    case AF_DRA_CLASS:
        return class_from_json(obj, where, &out->cls, err);
    }
    return AF_EINVAL;
}

const char *af_dra_obj_name(const struct af_dra_obj *o)
{
    return o->slice ? o->slice->name : o->claim ? o->claim->name : o->cls ? o->cls->name : NULL;
}

const char *af_dra_obj_ns(const struct af_dra_obj *o)
{
    return o->claim ? o->claim->ns : NULL;
}

int af_codec_decode_dra_list(enum af_dra_kind kind, const char *json, size_t len,
                             af_dra_item_cb cb, void *ud, char **rv, char **cont,
                             size_t *skipped, struct af_error *err)
{
    json_t *root = NULL, *items, *it;
    size_t i;
    int rc = af__codec_load(json, len, af_dra_kind_name(kind), &root, err);

    if (rv)
        *rv = NULL;
    if (cont)
        *cont = NULL;
    if (rc)
        return rc;
    items = af__codec_get(root, "items");
    if (!json_is_array(items)) {
        rc = af_error_set(err, AF_ETYPE, "", 0, 0, "%sList: items: expected an array, got %s",
                          af_dra_kind_name(kind), af__codec_type_name(items));
        goto out;
    }
    json_array_foreach(items, i, it) {
        struct af_dra_obj o;
        char at[48];
        struct af_error e;
        af__codec_path_index(at, sizeof(at), "items", i);
        if (af__codec_dra_from_json(kind, it, at, &o, &e)) {
            if (skipped)
                (*skipped)++;
            continue;
        }
        cb(ud, &o);
    }
    {
        json_t *meta = af__codec_get(root, "metadata");
        const char *r = af__codec_get_str(meta, "resourceVersion");
        const char *c = af__codec_get_str(meta, "continue");
        if (rv && r)
            *rv = af_xstrdup(r);
        if (cont && c && *c)
            *cont = af_xstrdup(c);
    }
out:
    json_decref(root);
    return rc;
}

int af_codec_decode_dra_event(enum af_dra_kind kind, const char *json, size_t len,
                              struct af_dra_event *ev, struct af_error *err)
{
    json_t *root = NULL, *obj;
    const char *type, *rv;
    int rc;

    memset(ev, 0, sizeof(*ev));
    rc = af__codec_load(json, len, "watch event", &root, err);
    if (rc)
        return rc;
    type = af__codec_get_str(root, "type");
    obj = af__codec_get(root, "object");
    rv = af__codec_get_str(af__codec_get(obj, "metadata"), "resourceVersion");
    if (rv)
        snprintf(ev->rv, sizeof(ev->rv), "%s", rv);
    if (!type) {
        rc = af_error_set(err, AF_EINVAL, "", 0, 0, "watch event: no type");
    } else if (!strcmp(type, "BOOKMARK")) {
        ev->type = AF_DRA_EV_BOOKMARK;
    } else if (!strcmp(type, "ERROR")) {
        json_t *code = af__codec_get(obj, "code");
        ev->type = AF_DRA_EV_ERROR;
        ev->code = json_is_integer(code) ? (int)json_integer_value(code) : 0;
    } else {
        ev->type = !strcmp(type, "DELETED") ? AF_DRA_EV_DELETED : AF_DRA_EV_UPSERT;
        rc = af__codec_dra_from_json(kind, obj, "watch event object", &ev->obj, err);
    }
    json_decref(root);
    return rc;
}

void af__codec_pod_claims(json_t *spec, json_t *status, struct af_pod_info *p)
{
    json_t *arr = af__codec_get(spec, "resourceClaims"), *x;
    json_t *st = af__codec_get(status, "resourceClaimStatuses");
    size_t i, j;

    if (!json_is_array(arr) || !json_array_size(arr))
        return;
    p->claims = af_xcalloc(AF_POD_CLAIMS_MAX, sizeof(*p->claims));
    json_array_foreach(arr, i, x) {
        struct af_pod_claim_ref *r;
        json_t *src = af__codec_get(x, "source");   /* the v1alpha2-era shape (1.26-1.27) */
        const char *name = af__codec_get_str(x, "name");
        if (p->n_claims == AF_POD_CLAIMS_MAX || !name)
            continue;
        r = &p->claims[p->n_claims++];
        r->name = af_xstrdup(name);
        r->claim = dup_str(json_is_object(src) ? src : x, "resourceClaimName");
        r->tmpl = dup_str(json_is_object(src) ? src : x, "resourceClaimTemplateName");
        json_array_foreach(json_is_array(st) ? st : NULL, j, src) {
            const char *sn = af__codec_get_str(src, "name");
            if (sn && !strcmp(sn, name)) {
                r->generated = dup_str(src, "resourceClaimName");
                break;
            }
        }
    }
}

/* An extended resource name accelfit does not track (docs/decisions.md §8): a name with a
 * domain, not kubernetes.io's own (but deviceclass.resource.kubernetes.io/<class>). */
static bool ext_name(const char *key)
{
    return strchr(key, '/') && af_res_parse(key) < 0 &&
           (!strstr(key, "kubernetes.io/") ||
            !strncmp(key, AF_DRA_CLASS_RESOURCE_PREFIX, strlen(AF_DRA_CLASS_RESOURCE_PREFIX)));
}

/* A whole count of at least 1, or 0. */
static int64_t ext_count(json_t *v)
{
    int64_t q = 0;

    if (json_is_integer(v))
        return json_integer_value(v) > 0 && json_integer_value(v) < 1000000
                   ? (int64_t)json_integer_value(v)
                   : 0;
    if (!af__codec_str(v) || af_parse_quantity(af__codec_str(v), 1, &q) || q < 0 || q > 1000000)
        return 0;
    return q;
}

/* The pod's entry for extended resource `name` (added when there is room), or NULL. */
static struct af_pod_ext_req *ext_slot(struct af_pod_info *p, const char *name)
{
    for (int i = 0; i < p->n_ext; i++)
        if (!strcmp(p->ext[i].name, name))
            return &p->ext[i];
    if (p->n_ext == AF_POD_EXT_MAX)
        return NULL;
    if (!p->ext)
        p->ext = af_xcalloc(AF_POD_EXT_MAX, sizeof(*p->ext));
    p->ext[p->n_ext].name = af_xstrdup(name);
    return &p->ext[p->n_ext++];
}

void af__codec_pod_ext(json_t *spec, json_t *status, struct af_pod_info *p)
{
    static const char *const lists[] = {"containers", "initContainers"};
    json_t *st = af__codec_get(status, "extendedResourceClaimStatus"), *x;
    const char *claim = af__codec_get_str(st, "resourceClaimName");
    size_t i;

    /* app containers add up; an init container runs alone (the larger counts) */
    for (size_t l = 0; l < AF_ARRAY_SIZE(lists); l++) {
        json_array_foreach(json_is_array(af__codec_get(spec, lists[l]))
                               ? af__codec_get(spec, lists[l])
                               : NULL,
                           i, x) {
            json_t *res = af__codec_get(x, "resources"), *map = af__codec_get(res, "requests");
            const char *key;
            json_t *v;
            if (!json_is_object(map))
                map = af__codec_get(res, "limits");   /* requests default to limits */
            json_object_foreach(json_is_object(map) ? map : NULL, key, v) {
                int64_t n = ext_name(key) ? ext_count(v) : 0;
                struct af_pod_ext_req *e = n ? ext_slot(p, key) : NULL;
                if (e && l == 0)
                    e->count += n;
                else if (e && n > e->count)
                    e->count = n;
            }
        }
    }
    if (!claim || !*claim)
        return;
    /* kube-scheduler made a claim for them and allocated it: its devices are what the pod
     * holds, so the names it maps that accelfit tracks leave the requests (counted once) */
    if (!p->claims)
        p->claims = af_xcalloc(AF_POD_CLAIMS_MAX, sizeof(*p->claims));
    if (p->n_claims < AF_POD_CLAIMS_MAX) {
        struct af_pod_claim_ref *r = &p->claims[p->n_claims++];
        r->name = af_xstrdup(AF_POD_EXT_CLAIM_REF);
        r->claim = af_xstrdup(claim);
        p->ext_claim = true;
    }
    json_array_foreach(json_is_array(af__codec_get(st, "requestMappings"))
                           ? af__codec_get(st, "requestMappings")
                           : NULL,
                       i, x) {
        const char *rn = af__codec_get_str(x, "resourceName");
        int r = rn ? af_res_parse(rn) : -1;
        if (r >= 0 && r != AF_RES_CPU && r != AF_RES_MEMORY && r != AF_RES_PODS)
            p->requests.v[r] = 0;
    }
}

int af_codec_decode_cluster_dra(const char *name, const char *text, size_t len,
                                af_dra_item_cb cb, void *ud, struct af_error *err)
{
    json_t *root = NULL, *items, *it;
    size_t i;
    int rc;

    if (!name)
        name = "cluster";
    rc = af__codec_cluster_root(name, text, len, &root, err);
    if (rc)
        return rc;
    items = json_is_array(root) ? root : af__codec_get(root, "items");
    json_array_foreach(json_is_array(items) ? items : NULL, i, it) {
        int kind = af_dra_kind_parse(af__codec_get_str(it, "kind"));
        struct af_dra_obj o;
        char at[48];
        if (kind < 0)
            continue;
        af__codec_path_index(at, sizeof(at), "items", i);
        rc = af__codec_dra_from_json((enum af_dra_kind)kind, it, at, &o, err);
        if (rc) {
            if (err && !err->file[0])
                snprintf(err->file, sizeof(err->file), "%s", name);
            break;
        }
        cb(ud, &o);
        af_dra_obj_clear(&o);
    }
    json_decref(root);
    return rc;
}

/* The records of a cluster file, by kind, for one index. */
struct gather {
    struct af_dra_slice **slices;
    struct af_dra_claim **claims, **templates;
    struct af_dra_class **classes;
    size_t n[AF_DRA_KINDS], cap[AF_DRA_KINDS];
};

static void gather(void *ud, struct af_dra_obj *o)
{
    struct gather *g = ud;
    void **arr[AF_DRA_KINDS] = {(void **)&g->slices, (void **)&g->claims,
                                (void **)&g->templates, (void **)&g->classes};
    void *rec = o->slice ? (void *)o->slice : o->claim ? (void *)o->claim : (void *)o->cls;

    af_grow(arr[o->kind], &g->cap[o->kind], g->n[o->kind] + 1, sizeof(void *));
    ((void **)*arr[o->kind])[g->n[o->kind]++] = rec;
    memset(o, 0, sizeof(*o));   /* taken */
}

int af_codec_cluster_dra(const char *name, const char *text, size_t len, struct af_dra **out,
                         struct af_error *err)
{
    struct gather g;
    int rc;

    memset(&g, 0, sizeof(g));
    *out = NULL;
    rc = af_codec_decode_cluster_dra(name, text, len, gather, &g, err);
    if (!rc && (g.n[AF_DRA_SLICE] || g.n[AF_DRA_CLAIM] || g.n[AF_DRA_TEMPLATE] ||
                g.n[AF_DRA_CLASS]))
        *out = af_dra_build(g.slices, g.n[AF_DRA_SLICE], g.claims, g.n[AF_DRA_CLAIM],
                            g.templates, g.n[AF_DRA_TEMPLATE], g.classes, g.n[AF_DRA_CLASS]);
    for (size_t i = 0; i < g.n[AF_DRA_SLICE]; i++)
        af_dra_slice_unref(g.slices[i]);
    for (size_t i = 0; i < g.n[AF_DRA_CLAIM]; i++)
        af_dra_claim_unref(g.claims[i]);
    for (size_t i = 0; i < g.n[AF_DRA_TEMPLATE]; i++)
        af_dra_claim_unref(g.templates[i]);
    for (size_t i = 0; i < g.n[AF_DRA_CLASS]; i++)
        af_dra_class_unref(g.classes[i]);
    af_free(g.slices);
    af_free(g.claims);
    af_free(g.templates);
    af_free(g.classes);
    return rc;
}
