/* SPDX-License-Identifier: Apache-2.0 */
/*
 * DRA records and their index (accelfit/dra.h): ResourceSlices, ResourceClaims, their
 * templates and DeviceClasses as compact immutable records; the index says per node which
 * accelerator devices it has and which allocated claims hold; a pod's demand from its claims;
 * whether a node can give a pod the devices it still needs. Pure: the watch thread (src/kube)
 * and the static loader build the records, the cache and the service read the index.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/dra.h"
#include "accelfit/util.h"
#include "accelfit/banned.h"

/* ---- records ------------------------------------------------------------------------- */

struct af_dra_slice *af_dra_slice_new(void)
{
    struct af_dra_slice *s = af_xcalloc(1, sizeof(*s));
    atomic_init(&s->refcnt, 1);
    return s;
}

struct af_dra_slice *af_dra_slice_ref(struct af_dra_slice *s)
{
    if (s)
        atomic_fetch_add_explicit(&s->refcnt, 1, memory_order_relaxed);
    return s;
}

void af_dra_slice_unref(struct af_dra_slice *s)
{
    if (!s || atomic_fetch_sub_explicit(&s->refcnt, 1, memory_order_acq_rel) != 1)
        return;
    af_free(s->name);
    af_free(s->driver);
    af_free(s->pool);
    af_free(s->node);
    af_free(s->devices);
    af_free(s->strings);
    af_free(s);
}

void af_dra_selector_clear(struct af_dra_selector *s)
{
    for (size_t i = 0; i < s->n_terms; i++) {
        af_free(s->terms[i].domain);
        af_free(s->terms[i].value);
    }
    af_free(s->terms);
    memset(s, 0, sizeof(*s));
}

struct af_dra_claim *af_dra_claim_new(void)
{
    struct af_dra_claim *c = af_xcalloc(1, sizeof(*c));
    atomic_init(&c->refcnt, 1);
    return c;
}

struct af_dra_claim *af_dra_claim_ref(struct af_dra_claim *c)
{
    if (c)
        atomic_fetch_add_explicit(&c->refcnt, 1, memory_order_relaxed);
    return c;
}

void af_dra_claim_unref(struct af_dra_claim *c)
{
    if (!c || atomic_fetch_sub_explicit(&c->refcnt, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < c->n_requests; i++) {
        struct af_dra_request *r = &c->requests[i];
        for (size_t j = 0; j < r->n_choices; j++) {
            af_free(r->choices[j].name);
            af_free(r->choices[j].device_class);
            af_dra_selector_clear(&r->choices[j].sel);
        }
        af_free(r->choices);
        af_free(r->name);
    }
    af_free(c->requests);
    for (size_t i = 0; i < c->n_results; i++) {
        af_free(c->results[i].driver);
        af_free(c->results[i].pool);
        af_free(c->results[i].device);
        af_free(c->results[i].request);
    }
    af_free(c->results);
    for (size_t i = 0; i < c->n_reserved; i++)
        af_free(c->reserved_uids[i]);
    af_free(c->reserved_uids);
    af_free(c->alloc_node);
    af_free(c->ns);
    af_free(c->name);
    af_free(c->uid);
    af_free(c);
}

struct af_dra_class *af_dra_class_new(void)
{
    struct af_dra_class *c = af_xcalloc(1, sizeof(*c));
    atomic_init(&c->refcnt, 1);
    return c;
}

struct af_dra_class *af_dra_class_ref(struct af_dra_class *c)
{
    if (c)
        atomic_fetch_add_explicit(&c->refcnt, 1, memory_order_relaxed);
    return c;
}

void af_dra_class_unref(struct af_dra_class *c)
{
    if (!c || atomic_fetch_sub_explicit(&c->refcnt, 1, memory_order_acq_rel) != 1)
        return;
    af_free(c->name);
    af_free(c->extended_resource);
    af_dra_selector_clear(&c->sel);
    af_free(c);
}

const char *af_dra_device_str(const struct af_dra_slice *s, uint32_t off)
{
    if (!s || !s->strings || off >= s->strings_len)
        return "";
    return s->strings + off;
}

/* ---- CEL terms ------------------------------------------------------------------------ */

static const char *const attr_names[AF_DRA_ATTR__COUNT] = {
    [AF_DRA_ATTR_TYPE] = "type",
    [AF_DRA_ATTR_PRODUCT] = "productName",
    [AF_DRA_ATTR_PROFILE] = "profile",
    [AF_DRA_ATTR_INSTANCE_TYPE] = "instanceType",
    [AF_DRA_ATTR_RESOURCE_TYPE] = "resourceType",
};

static const char *skip_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* A quoted CEL string literal at *pp ('x' or "x", no escapes): new, or NULL. */
static char *literal(const char **pp, const char *end)
{
    const char *p = skip_ws(*pp, end), *q;
    char quote;

    if (p >= end || (*p != '\'' && *p != '"'))
        return NULL;
    quote = *p++;
    for (q = p; q < end && *q != quote; q++)
        if (*q == '\\')
            return NULL;
    if (q >= end)
        return NULL;
    *pp = q + 1;
    return af_xstrndup(p, (size_t)(q - p));
}

static bool eat(const char **pp, const char *end, const char *tok)
{
    const char *p = skip_ws(*pp, end);
    size_t n = strlen(tok);

    if ((size_t)(end - p) < n || memcmp(p, tok, n))
        return false;
    *pp = p + n;
    return true;
}

/* One conjunct [p, end): a term, or false (unknown). Parenthesized terms are read when the
 * parentheses hold one term. */
static bool term(const char *p, const char *end, struct af_dra_term *out)
{
    char *domain = NULL, *value = NULL;
    int attr = -1;

    p = skip_ws(p, end);
    while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n'))
        end--;
    while (end - p >= 2 && *p == '(' && end[-1] == ')') {
        p = skip_ws(p + 1, end);
        end--;
    }
    if (eat(&p, end, "device.driver")) {
        attr = -1;
    } else if (eat(&p, end, "device.attributes[")) {
        size_t i;
        domain = literal(&p, end);
        if (!domain || !eat(&p, end, "]") || !eat(&p, end, "."))
            goto unknown;
        for (i = 0; i < AF_DRA_ATTR__COUNT; i++) {
            size_t n = strlen(attr_names[i]);
            const char *q = skip_ws(p, end);
            if ((size_t)(end - q) > n && !memcmp(q, attr_names[i], n) &&
                (q[n] == ' ' || q[n] == '=')) {
                p = q + n;
                break;
            }
        }
        if (i == AF_DRA_ATTR__COUNT)
            goto unknown;
        attr = (int)i;
    } else {
        goto unknown;
    }
    if (!eat(&p, end, "=="))
        goto unknown;
    value = literal(&p, end);
    if (!value || skip_ws(p, end) != end)
        goto unknown;
    out->attr = (int8_t)attr;
    out->domain = domain;
    out->value = value;
    return true;
unknown:
    af_free(domain);
    af_free(value);
    return false;
}

void af_dra_selector_parse(struct af_dra_selector *s, const char *expr)
{
    const char *p, *end;
    int depth = 0;
    bool quoted = false;
    char q = 0;

    if (!expr)
        return;
    end = expr + strlen(expr);
    /* An expression with || (outside quotes) is a disjunction: nothing of it narrows. */
    for (p = expr; p < end; p++) {
        if (quoted) {
            if (*p == q)
                quoted = false;
        } else if (*p == '\'' || *p == '"') {
            quoted = true;
            q = *p;
        } else if (p + 1 < end && p[0] == '|' && p[1] == '|') {
            s->unknown++;
            return;
        }
    }
    /* Split on && outside quotes and parentheses. */
    quoted = false;
    for (const char *start = p = expr;; p++) {
        bool cut = p >= end;
        if (!cut) {
            if (quoted) {
                if (*p == q)
                    quoted = false;
                continue;
            }
            if (*p == '\'' || *p == '"') {
                quoted = true;
                q = *p;
                continue;
            }
            if (*p == '(')
                depth++;
            else if (*p == ')')
                depth--;
            cut = depth == 0 && p + 1 < end && p[0] == '&' && p[1] == '&';
        }
        if (cut) {
            struct af_dra_term t;
            if (term(start, p, &t)) {
                s->terms = af_xrealloc(s->terms, (s->n_terms + 1) * sizeof(*s->terms));
                s->terms[s->n_terms++] = t;
            } else {
                s->unknown++;
            }
            if (p >= end)
                break;
            start = ++p + 1;
        }
    }
}

/* Whether a device of `slice` meets every term of `sel` (unknown terms were not kept). */
static bool sel_matches(const struct af_dra_selector *sel, const struct af_dra_slice *slice,
                        const struct af_dra_device *d)
{
    for (size_t i = 0; i < sel->n_terms; i++) {
        const struct af_dra_term *t = &sel->terms[i];
        const char *have;
        if (t->attr < 0) {
            have = slice->driver ? slice->driver : "";
        } else {
            if (!t->domain || !slice->driver || strcmp(t->domain, slice->driver))
                return false;   /* an attribute of another driver's domain: the device has none */
            have = af_dra_device_str(slice, d->attr[t->attr]);
        }
        if (strcmp(have, t->value))
            return false;
    }
    return true;
}

/* The value a selector's term says for `attr` (-1: the driver); NULL when none. */
static const char *sel_value(const struct af_dra_selector *sel, int attr)
{
    for (size_t i = 0; sel && i < sel->n_terms; i++)
        if (sel->terms[i].attr == attr)
            return sel->terms[i].value;
    return NULL;
}

/* ---- devices and classes ---------------------------------------------------------------- */

int af_dra_device_res(const char *driver, const char *type, const char *resource_type)
{
    if (!driver)
        return -1;
    if (!strcmp(driver, "gpu.nvidia.com")) {
        if (type && !strcmp(type, "mig"))
            return AF_RES_MIG;
        if (!type || !*type || !strcmp(type, "gpu"))
            return AF_RES_GPU;
        return -1;   /* a channel or daemon of the driver, not a device a pod computes on */
    }
    if (!strcmp(driver, "mig.nvidia.com"))
        return AF_RES_MIG;
    if (!strcmp(driver, "neuron.aws.com"))
        return resource_type && strstr(resource_type, "core") ? AF_RES_NEURONCORE
                                                              : AF_RES_NEURONDEVICE;
    if (!strcmp(driver, "gpu.amd.com"))
        return AF_RES_AMD_GPU;
    return -1;
}

int af_dra_class_res(const struct af_dra_class *cls, const char *name)
{
    const char *driver = cls ? sel_value(&cls->sel, -1) : NULL;

    if (driver)
        return af_dra_device_res(driver, sel_value(&cls->sel, AF_DRA_ATTR_TYPE),
                                 sel_value(&cls->sel, AF_DRA_ATTR_RESOURCE_TYPE));
    /* The drivers ship classes named after themselves (the NVIDIA driver's mig.nvidia.com
     * selects its gpu.nvidia.com devices of type mig). */
    return af_dra_device_res(name, NULL, NULL);
}

/* Whether a device of `slice` is one class `name` (`cls`, may be NULL) selects. */
static bool class_matches(const struct af_dra_class *cls, const char *name,
                          const struct af_dra_slice *slice, const struct af_dra_device *d)
{
    if (cls && sel_value(&cls->sel, -1))
        return sel_matches(&cls->sel, slice, d);
    if (cls && !sel_matches(&cls->sel, slice, d))
        return false;
    /* No driver said: the class's name decides which devices, by the resource they are. */
    return d->res >= 0 && af_dra_class_res(cls, name) == d->res;
}

/* ---- the index -------------------------------------------------------------------------- */

static int cmp_slice(const void *a, const void *b)
{
    const struct af_dra_slice *x = *(struct af_dra_slice *const *)a;
    const struct af_dra_slice *y = *(struct af_dra_slice *const *)b;
    return strcmp(x->name, y->name);
}

static int nsname_cmp(const char *ans, const char *an, const char *bns, const char *bn)
{
    int c = strcmp(ans ? ans : "", bns ? bns : "");
    return c ? c : strcmp(an ? an : "", bn ? bn : "");
}

static int cmp_claim(const void *a, const void *b)
{
    const struct af_dra_claim *x = *(struct af_dra_claim *const *)a;
    const struct af_dra_claim *y = *(struct af_dra_claim *const *)b;
    return nsname_cmp(x->ns, x->name, y->ns, y->name);
}

static int cmp_class(const void *a, const void *b)
{
    const struct af_dra_class *x = *(struct af_dra_class *const *)a;
    const struct af_dra_class *y = *(struct af_dra_class *const *)b;
    return strcmp(x->name, y->name);
}

static int cmp_dev(const void *a, const void *b)
{
    const struct af_dra_dev *x = a, *y = b;
    int c = strcmp(x->slice->node, y->slice->node);
    if (c)
        return c;
    c = strcmp(x->slice->name, y->slice->name);
    if (c)
        return c;
    return (x->d > y->d) - (x->d < y->d);
}

/* Devices by driver, pool and name, for allocation results. */
struct dev_key {
    const char *driver, *pool, *name;
    size_t at;
};

static int cmp_key(const void *a, const void *b)
{
    const struct dev_key *x = a, *y = b;
    int c = strcmp(x->driver, y->driver);
    if (!c)
        c = strcmp(x->pool, y->pool);
    return c ? c : strcmp(x->name, y->name);
}

static int cmp_ptr(const void *a, const void *b)
{
    const void *x = *(void *const *)a, *y = *(void *const *)b;
    return (x > y) - (x < y);
}

static int cmp_pool_gen(const void *a, const void *b)
{
    const struct af_dra_slice *x = *(struct af_dra_slice *const *)a;
    const struct af_dra_slice *y = *(struct af_dra_slice *const *)b;
    int c = strcmp(x->driver ? x->driver : "", y->driver ? y->driver : "");
    if (!c)
        c = strcmp(x->pool ? x->pool : "", y->pool ? y->pool : "");
    if (!c)
        c = (x->generation < y->generation) - (x->generation > y->generation);   /* newest first */
    return c;
}

static void add_mig(struct af_dra_node *n, const char *profile)
{
    struct af_mig_profile mp;

    if (!af_mig_profile_parse(profile, &mp))
        return;
    for (int i = 0; i < n->n_mig; i++)
        if (n->mig[i].g == mp.g && n->mig[i].gb == mp.gb) {
            n->mig_count[i]++;
            return;
        }
    if (n->n_mig < AF_NODE_MIG_MAX) {
        n->mig[n->n_mig] = mp;
        n->mig_count[n->n_mig++] = 1;
    }
}

static void index_nodes(struct af_dra *d);

struct af_dra *af_dra_build(struct af_dra_slice *const *slices, size_t n_slices,
                            struct af_dra_claim *const *claims, size_t n_claims,
                            struct af_dra_claim *const *templates, size_t n_templates,
                            struct af_dra_class *const *classes, size_t n_classes)
{
    struct af_dra *d = af_xcalloc(1, sizeof(*d));
    struct af_dra_slice **byp, **stale;
    struct dev_key *keys;
    size_t ndev = 0, k = 0, n_stale = 0;

    atomic_init(&d->refcnt, 1);
    d->n_slices = n_slices;
    d->slices = af_xmalloc((n_slices + 1) * sizeof(*d->slices));
    for (size_t i = 0; i < n_slices; i++)
        d->slices[i] = af_dra_slice_ref(slices[i]);
    qsort(d->slices, n_slices, sizeof(*d->slices), cmp_slice);
    d->n_claims = n_claims;
    d->claims = af_xmalloc((n_claims + 1) * sizeof(*d->claims));
    for (size_t i = 0; i < n_claims; i++)
        d->claims[i] = af_dra_claim_ref(claims[i]);
    qsort(d->claims, n_claims, sizeof(*d->claims), cmp_claim);
    d->n_templates = n_templates;
    d->templates = af_xmalloc((n_templates + 1) * sizeof(*d->templates));
    for (size_t i = 0; i < n_templates; i++)
        d->templates[i] = af_dra_claim_ref(templates[i]);
    qsort(d->templates, n_templates, sizeof(*d->templates), cmp_claim);
    d->n_classes = n_classes;
    d->classes = af_xmalloc((n_classes + 1) * sizeof(*d->classes));
    for (size_t i = 0; i < n_classes; i++)
        d->classes[i] = af_dra_class_ref(classes[i]);
    qsort(d->classes, n_classes, sizeof(*d->classes), cmp_class);

    /* Stale slices: a pool's slices of a generation older than its newest (the driver is
     * replacing them). */
    byp = af_xmalloc((n_slices + 1) * sizeof(*byp));
    stale = af_xmalloc((n_slices + 1) * sizeof(*stale));
    memcpy(byp, d->slices, n_slices * sizeof(*byp));
    qsort(byp, n_slices, sizeof(*byp), cmp_pool_gen);
    for (size_t i = 0, head = 0; i < n_slices; i++) {
        if (i == 0 || cmp_pool_gen(&byp[i], &byp[head]) != 0) {
            bool same_pool = i > 0 && !strcmp(byp[i]->driver ? byp[i]->driver : "",
                                              byp[head]->driver ? byp[head]->driver : "") &&
                             !strcmp(byp[i]->pool ? byp[i]->pool : "",
                                     byp[head]->pool ? byp[head]->pool : "");
            if (same_pool && byp[i]->generation < byp[head]->generation) {
                stale[n_stale++] = byp[i];
                continue;
            }
            head = i;
        }
    }
    memcpy(byp, stale, n_stale * sizeof(*byp));
    af_free(stale);
    qsort(byp, n_stale, sizeof(*byp), cmp_ptr);   /* byp[0 .. n_stale): the stale slices */
    d->stale_slices = n_stale;
    /* Count devices of current, node-local slices. */
    for (size_t i = 0; i < n_slices; i++) {
        const struct af_dra_slice *s = d->slices[i];
        if (!s->node || (n_stale && bsearch(&s, byp, n_stale, sizeof(*byp), cmp_ptr)))
            continue;
        for (uint32_t j = 0; j < s->n_devices; j++) {
            if (s->devices[j].res < 0)
                d->other_devices++;
            else
                ndev++;
        }
    }
    d->devs = af_xmalloc((ndev + 1) * sizeof(*d->devs));
    for (size_t i = 0; i < n_slices; i++) {
        const struct af_dra_slice *s = d->slices[i];
        if (!s->node || (n_stale && bsearch(&s, byp, n_stale, sizeof(*byp), cmp_ptr)))
            continue;
        for (uint32_t j = 0; j < s->n_devices; j++)
            if (s->devices[j].res >= 0)
                d->devs[k++] = (struct af_dra_dev){.slice = s, .d = &s->devices[j]};
    }
    d->n_devs = k;
    af_free(byp);
    qsort(d->devs, d->n_devs, sizeof(*d->devs), cmp_dev);

    /* Allocated devices. */
    keys = af_xmalloc((d->n_devs + 1) * sizeof(*keys));
    for (size_t i = 0; i < d->n_devs; i++)
        keys[i] = (struct dev_key){d->devs[i].slice->driver ? d->devs[i].slice->driver : "",
                                   d->devs[i].slice->pool ? d->devs[i].slice->pool : "",
                                   af_dra_device_str(d->devs[i].slice, d->devs[i].d->name), i};
    qsort(keys, d->n_devs, sizeof(*keys), cmp_key);
    d->claim_nodes = af_xcalloc(d->n_claims + 1, sizeof(*d->claim_nodes));
    for (size_t i = 0; i < d->n_claims; i++) {
        const struct af_dra_claim *c = d->claims[i];
        if (c->allocated)
            d->claim_nodes[i] = c->alloc_node;
        for (size_t j = 0; c->allocated && j < c->n_results; j++) {
            struct dev_key want = {c->results[j].driver ? c->results[j].driver : "",
                                   c->results[j].pool ? c->results[j].pool : "",
                                   c->results[j].device ? c->results[j].device : "", 0};
            struct dev_key *hit = bsearch(&want, keys, d->n_devs, sizeof(*keys), cmp_key);
            if (hit) {
                d->devs[hit->at].allocated = true;
                d->claim_nodes[i] = d->devs[hit->at].slice->node;
            } else
                d->unknown_results++;
        }
    }
    af_free(keys);

    /* Nodes. */
    d->nodes = af_xcalloc(d->n_devs + 1, sizeof(*d->nodes));
    for (size_t i = 0; i < d->n_devs; i++) {
        const struct af_dra_dev *v = &d->devs[i];
        struct af_dra_node *n;
        int cls;
        if (!d->n_nodes || strcmp(d->nodes[d->n_nodes - 1].name, v->slice->node)) {
            n = &d->nodes[d->n_nodes++];
            n->name = v->slice->node;
            n->cls = AF_CLASS_UNKNOWN;
            n->driver = v->slice->driver;
            n->first = i;
        }
        n = &d->nodes[d->n_nodes - 1];
        n->n++;
        n->devices.v[v->d->res]++;
        if (v->allocated)
            n->allocated.v[v->d->res]++;
        cls = v->d->cls;
        if (n->cls == AF_CLASS_UNKNOWN && cls >= 0)
            n->cls = (enum af_class)cls;
        if (v->d->mem_mib) {
            double gib = v->d->mem_mib / 1024.0;
            if (n->dev_mem_gib <= 0 || gib < n->dev_mem_gib)
                n->dev_mem_gib = gib;
        }
        if (v->d->res == AF_RES_MIG)
            add_mig(n, af_dra_device_str(v->slice, v->d->attr[AF_DRA_ATTR_PROFILE]));
    }
    index_nodes(d);
    return d;
}

static uint32_t name_hash(const char *s)
{
    return af_hash_str(AF_HASH_INIT, s);
}

/* The nodes' hash index: a lookup per candidate node touches one slot and one name. */
static void index_nodes(struct af_dra *d)
{
    af_index_init(&d->node_index, d->n_nodes, NULL);
    for (size_t i = 0; i < d->n_nodes; i++)
        af_index_add(&d->node_index, name_hash(d->nodes[i].name), i);
}

struct af_dra *af_dra_ref(struct af_dra *d)
{
    if (d)
        atomic_fetch_add_explicit(&d->refcnt, 1, memory_order_relaxed);
    return d;
}

void af_dra_unref(struct af_dra *d)
{
    if (!d || atomic_fetch_sub_explicit(&d->refcnt, 1, memory_order_acq_rel) != 1)
        return;
    for (size_t i = 0; i < d->n_slices; i++)
        af_dra_slice_unref(d->slices[i]);
    for (size_t i = 0; i < d->n_claims; i++)
        af_dra_claim_unref(d->claims[i]);
    for (size_t i = 0; i < d->n_templates; i++)
        af_dra_claim_unref(d->templates[i]);
    for (size_t i = 0; i < d->n_classes; i++)
        af_dra_class_unref(d->classes[i]);
    af_free(d->slices);
    af_free(d->claims);
    af_free(d->templates);
    af_free(d->classes);
    af_free(d->nodes);
    af_free(d->devs);
    af_free(d->claim_nodes);
    af_index_release(&d->node_index);
    af_free(d);
}

size_t af_dra_bytes(const struct af_dra *d)
{
    size_t b;

    if (!d)
        return 0;
    b = sizeof(*d) + d->n_nodes * sizeof(*d->nodes) + af_index_bytes(&d->node_index) +
        d->n_devs * sizeof(*d->devs) +
        (d->n_slices + 2 * d->n_claims + d->n_templates + d->n_classes) * sizeof(void *);
    for (size_t i = 0; i < d->n_slices; i++) {
        const struct af_dra_slice *s = d->slices[i];
        b += sizeof(*s) + s->n_devices * sizeof(*s->devices) + s->strings_len +
             (s->name ? strlen(s->name) + 1 : 0) + (s->driver ? strlen(s->driver) + 1 : 0) +
             (s->pool ? strlen(s->pool) + 1 : 0) + (s->node ? strlen(s->node) + 1 : 0);
    }
    for (size_t i = 0; i < d->n_claims; i++) {
        const struct af_dra_claim *c = d->claims[i];
        b += sizeof(*c) + c->n_requests * (sizeof(struct af_dra_request) +
                                           sizeof(struct af_dra_choice) + 64) +
             c->n_results * (sizeof(struct af_dra_result) + 64) + c->n_reserved * 48 + 96;
    }
    return b;
}

const struct af_dra_node *af_dra_find_node(const struct af_dra *d, const char *node)
{
    uint32_t h, i;
    size_t walk;

    if (!d || !node)
        return NULL;
    h = name_hash(node);
    walk = af_index_start(&d->node_index, h);
    while (af_index_next(&d->node_index, h, &walk, &i))
        if (!strcmp(d->nodes[i].name, node))
            return &d->nodes[i];
    return NULL;
}

static const struct af_dra_claim *find_in(struct af_dra_claim *const *arr, size_t n,
                                          const char *ns, const char *name)
{
    size_t lo = 0, hi = n;

    if (!name)
        return NULL;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = nsname_cmp(ns, name, arr[mid]->ns, arr[mid]->name);
        if (!c)
            return arr[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

const struct af_dra_claim *af_dra_find_claim(const struct af_dra *d, const char *ns,
                                             const char *name)
{
    return d ? find_in(d->claims, d->n_claims, ns, name) : NULL;
}

const struct af_dra_claim *af_dra_find_template(const struct af_dra *d, const char *ns,
                                                const char *name)
{
    return d ? find_in(d->templates, d->n_templates, ns, name) : NULL;
}

const struct af_dra_class *af_dra_find_class(const struct af_dra *d, const char *name)
{
    size_t lo = 0, hi;

    if (!d || !name)
        return NULL;
    hi = d->n_classes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(name, d->classes[mid]->name);
        if (!c)
            return d->classes[mid];
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

static bool same_res(const struct af_resources *a, const struct af_resources *b)
{
    return !memcmp(a, b, sizeof(*a));
}

struct af_node_info *af_dra_node_info(const struct af_dra *d, const struct af_node_info *n)
{
    const struct af_dra_node *dn = af_dra_find_node(d, n ? n->name : NULL);
    struct af_resources devs = {{0}};
    struct af_node_info *c;
    const char *driver = dn ? dn->driver : NULL;

    if (!n)
        return NULL;
    if (dn)
        devs = dn->devices;
    if (same_res(&devs, &n->dra_devices) &&
        !strcmp(driver ? driver : "", n->dra_driver ? n->dra_driver : ""))
        return NULL;
    c = af_node_info_copy(n);
    for (int r = 0; r < AF_RES__COUNT; r++)
        c->allocatable.v[r] -= n->dra_added.v[r];
    memset(&c->dra_added, 0, sizeof(c->dra_added));
    c->dra_devices = devs;
    c->dra_both = false;
    af_free(c->dra_driver);
    c->dra_driver = af_xstrdup(driver);
    for (int r = 0; r < AF_RES__COUNT; r++) {
        if (!devs.v[r])
            continue;
        if (c->allocatable.v[r] > 0) {
            c->dra_both = true;   /* the device plugin counts them: not twice */
            continue;
        }
        c->dra_added.v[r] = devs.v[r];
        c->allocatable.v[r] += devs.v[r];
    }
    if (!dn)
        return c;
    if (c->cls == AF_CLASS_UNKNOWN && dn->cls != AF_CLASS_UNKNOWN) {
        c->cls = dn->cls;
        c->class_source = "ResourceSlice";
    }
    if (c->kind == AF_ACCEL_NONE) {
        if (c->cls != AF_CLASS_UNKNOWN)
            c->kind = af_class_kind(c->cls);
        if (c->kind == AF_ACCEL_NONE)
            c->kind = af_res_accel_kind(&devs);
    }
    if (c->dev_mem_gib_hi <= 0 && dn->dev_mem_gib > 0) {
        c->dev_mem_gib_lo = c->dev_mem_gib_hi = dn->dev_mem_gib;
        c->dev_mem_source = "ResourceSlice capacity memory";
    }
    if (c->n_mig == 0 && dn->n_mig) {
        memcpy(c->mig, dn->mig, sizeof(c->mig));
        memcpy(c->mig_count, dn->mig_count, sizeof(c->mig_count));
        c->n_mig = dn->n_mig;
    }
    return c;
}

/* ---- a pod's claims ------------------------------------------------------------------- */

/* The node an allocated claim's devices are on (af_dra.claim_nodes), found by pointer. */
static const char *claim_node(const struct af_dra *d, const struct af_dra_claim *c)
{
    size_t lo = 0, hi = d ? d->n_claims : 0;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int k = nsname_cmp(c->ns, c->name, d->claims[mid]->ns, d->claims[mid]->name);
        if (!k)
            return d->claim_nodes[mid];
        if (k < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return c->alloc_node;
}

void af_dra_pod_demand(const struct af_dra *d, const struct af_pod_info *pod,
                       struct af_dra_demand *out)
{
    memset(out, 0, sizeof(*out));
    if (!pod)
        return;
    for (int i = 0; i < pod->n_claims; i++) {
        const struct af_pod_claim_ref *r = &pod->claims[i];
        struct af_dra_pod_claim *pc;
        const struct af_dra_claim *src;

        if (out->n == AF_DRA_POD_CLAIMS) {
            out->skipped++;
            continue;
        }
        pc = &out->claims[out->n++];
        pc->ref = r->name;
        if (r->claim) {
            pc->claim_name = r->claim;
            pc->claim = af_dra_find_claim(d, pod->ns, r->claim);
        } else if (r->tmpl) {
            pc->from_template = true;
            pc->claim_name = r->tmpl;
            if (r->generated)
                pc->claim = af_dra_find_claim(d, pod->ns, r->generated);
            if (!pc->claim)
                pc->tmpl = af_dra_find_template(d, pod->ns, r->tmpl);
        }
        pc->missing = !pc->claim && !pc->tmpl;
        if (pc->claim && pc->claim->allocated) {
            const struct af_dra_claim *c = pc->claim;
            const char *node = claim_node(d, c);
            if (node && out->alloc_node && strcmp(node, out->alloc_node))
                out->conflict = true;
            if (node && !out->alloc_node)
                out->alloc_node = node;
            pc->counted = c->n_reserved == 0 || (pod->uid && c->reserved_uids[0] &&
                                                 !strcmp(c->reserved_uids[0], pod->uid));
            if (!pc->counted)
                continue;
            for (size_t j = 0; j < c->n_results; j++) {
                for (size_t k = 0; k < c->n_requests; k++) {
                    const struct af_dra_request *q = &c->requests[k];
                    const char *rn = c->results[j].request;
                    bool hit = false;
                    for (size_t m = 0; m < q->n_choices && rn && !hit; m++) {
                        /* a result names "request" or "request/subrequest" */
                        size_t ql = strlen(q->name ? q->name : "");
                        if (!strcmp(rn, q->name ? q->name : "") ||
                            (!strncmp(rn, q->name ? q->name : "", ql) && rn[ql] == '/' &&
                             !strcmp(rn + ql + 1, q->choices[m].name ? q->choices[m].name : ""))) {
                            int res = af_dra_class_res(
                                af_dra_find_class(d, q->choices[m].device_class),
                                q->choices[m].device_class);
                            if (res >= 0)
                                out->held.v[res]++;
                            hit = true;
                        }
                    }
                    if (hit)
                        break;
                }
            }
            continue;
        }
        src = pc->claim ? pc->claim : pc->tmpl;
        for (size_t k = 0; src && k < src->n_requests; k++) {
            const struct af_dra_request *q = &src->requests[k];
            const struct af_dra_choice *ch = q->n_choices ? &q->choices[0] : NULL;
            int res;
            const char *profile;
            if (!ch)
                continue;
            res = af_dra_class_res(af_dra_find_class(d, ch->device_class), ch->device_class);
            if (res < 0)
                continue;
            /* Alternatives of different resources: which one a node gives is judged per node
             * (af_dra_node_fits), and none of them is requested of every node. */
            for (size_t m = 1; m < q->n_choices && res >= 0; m++)
                if (af_dra_class_res(af_dra_find_class(d, q->choices[m].device_class),
                                     q->choices[m].device_class) != res)
                    res = -1;
            if (res < 0) {
                out->mixed++;
                continue;
            }
            out->need.v[res] += ch->all ? 1 : ch->count;
            profile = sel_value(&ch->sel, AF_DRA_ATTR_PROFILE);
            if (res == AF_RES_MIG && profile)
                (void)af_mig_profile_parse(profile, &out->mig);
        }
    }
    /* Extended resources a DeviceClass serves: counted as its devices until kube-scheduler
     * has made the pod's claim for them (then the claim above says what it holds). */
    for (int i = 0; !pod->ext_claim && !pod->node_name && i < pod->n_ext; i++) {
        const struct af_dra_class *cls = af_dra_ext_class(d, pod->ext[i].name);
        int res = cls ? af_dra_class_res(cls, cls->name) : -1;
        if (res < 0)
            continue;
        out->need.v[res] += pod->ext[i].count;
        out->ext_served++;
    }
}

const struct af_dra_class *af_dra_ext_class(const struct af_dra *d, const char *name)
{
    size_t plen = strlen(AF_DRA_CLASS_RESOURCE_PREFIX);

    if (!d || !name)
        return NULL;
    for (size_t i = 0; i < d->n_classes; i++)
        if (d->classes[i]->extended_resource && !strcmp(d->classes[i]->extended_resource, name))
            return d->classes[i];
    if (!strncmp(name, AF_DRA_CLASS_RESOURCE_PREFIX, plen))
        return af_dra_find_class(d, name + plen);
    return NULL;
}

/* Takes up to `want` free matching devices of node `n` for `ch` (all of them for All);
 * how many it took, marking them in `taken`. */
static int64_t take(const struct af_dra *d, const struct af_dra_node *n,
                    const struct af_dra_choice *ch, bool *taken, int64_t want, bool commit)
{
    const struct af_dra_class *cls = af_dra_find_class(d, ch->device_class);
    int64_t got = 0;

    for (size_t i = 0; i < n->n && (ch->all || got < want); i++) {
        const struct af_dra_dev *v = &d->devs[n->first + i];
        if (v->allocated || taken[i] || !class_matches(cls, ch->device_class, v->slice, v->d) ||
            !sel_matches(&ch->sel, v->slice, v->d))
            continue;
        if (commit)
            taken[i] = true;
        got++;
    }
    return got;
}

bool af_dra_node_fits(const struct af_dra *d, const struct af_dra_demand *dm, const char *node,
                      char *why, size_t n)
{
    const struct af_dra_node *dn = af_dra_find_node(d, node);
    bool stack[64], *taken = NULL, ok = true;
    size_t used = 0;

    char scratch[1];

    if (!why || !n) {
        why = scratch;
        n = sizeof(scratch);
    }
    why[0] = '\0';
    if (dm->conflict) {
        snprintf(why, n, "the pod's allocated claims are on different nodes");
        return false;
    }
    if (dm->alloc_node && strcmp(dm->alloc_node, node)) {
        snprintf(why, n, "its allocated claim is on node %s", dm->alloc_node);
        return false;
    }
    if (dn && dn->n <= AF_ARRAY_SIZE(stack)) {
        taken = stack;
        memset(stack, 0, sizeof(stack));
    } else if (dn) {
        taken = af_xcalloc(dn->n + 1, sizeof(*taken));
    }
    for (size_t c = 0; ok && c < dm->n; c++) {
        const struct af_dra_pod_claim *pc = &dm->claims[c];
        const struct af_dra_claim *src = pc->claim && !pc->claim->allocated ? pc->claim : pc->tmpl;
        if (!src)
            continue;
        for (size_t k = 0; ok && k < src->n_requests; k++) {
            const struct af_dra_request *q = &src->requests[k];
            const struct af_dra_choice *got = NULL;
            int64_t have = 0, best = 0;
            bool any_accel = false;
            for (size_t m = 0; m < q->n_choices && !got; m++) {
                const struct af_dra_choice *ch = &q->choices[m];
                if (af_dra_class_res(af_dra_find_class(d, ch->device_class), ch->device_class) < 0)
                    continue;   /* not an accelerator class: kube-scheduler's business */
                any_accel = true;
                have = dn ? take(d, dn, ch, taken, ch->count, false) : 0;
                if (have > best)
                    best = have;
                if ((ch->all && have > 0) || (!ch->all && have >= ch->count)) {
                    (void)take(d, dn, ch, taken, ch->count, true);
                    got = ch;
                }
            }
            if (!any_accel)
                continue;
            if (!got) {
                const struct af_dra_choice *ch = &q->choices[0];
                snprintf(why, n,
                         "claim %s request %s needs %lld %s device%s%s; the node has %lld free "
                         "that match",
                         pc->claim_name ? pc->claim_name : "?", q->name ? q->name : "?",
                         (long long)(ch->all ? 1 : ch->count), ch->device_class,
                         ch->count == 1 && !ch->all ? "" : "s",
                         q->n_choices > 1 ? " (or an alternative)" : "", (long long)best);
                ok = false;
                break;
            }
            if (used + 1 < n) {
                int w = snprintf(why + used, n - used, "%s%s: %lld %s", used ? ", " : "",
                                 pc->claim_name ? pc->claim_name : "?",
                                 (long long)(got->all ? have : got->count), got->device_class);
                if (w > 0)
                    used += (size_t)w < n - used ? (size_t)w : n - used - 1;
            }
        }
    }
    if (taken != stack)
        af_free(taken);
    return ok;
}
