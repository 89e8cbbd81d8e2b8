/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The provisioner of `simulate --autoscale`: what Karpenter would launch for a pod
 * that fits no node (accelfit/simulate.h, docs/simulate.md "Autoscaling"). Offerings
 * are the nodes each NodePool could create from the catalog; a launch is the first
 * pool, by weight, with an offering the pod fits on an empty node of it (the
 * kube-scheduler model's own filter, af_ks_filter: requests, nodeSelector, taints
 * and tolerations), the cheapest such, with the pod's preferred terms required first
 * and relaxed one at a time (the lightest first, as Karpenter's docs say; or as its
 * code does, enum af_sim_relax).
 */
#include "accelfit/simulate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/decide.h"
#include "accelfit/prefer.h"
#include "accelfit/banned.h"

#define LABEL_NODEPOOL "karpenter.sh/nodepool"
#define LABEL_CATEGORY "karpenter.k8s.aws/instance-category"
#define LABEL_GENERATION "karpenter.k8s.aws/instance-generation"

/* "g" and "5" of "g5", "inf" and "2" of "inf2", "p" and "4" of "p4de". */
static void split_family(const char *family, char *cat, size_t ncat, char *gen, size_t ngen)
{
    size_t i = 0, j = 0, k = 0;

    while (family[i] && (family[i] < '0' || family[i] > '9')) {
        if (j + 1 < ncat)
            cat[j++] = family[i];
        i++;
    }
    while (family[i] >= '0' && family[i] <= '9') {
        if (k + 1 < ngen)
            gen[k++] = family[i];
        i++;
    }
    cat[j] = gen[k] = '\0';
}

static bool listed(char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], s))
            return true;
    return false;
}

/* Whether the pool's requirements allow type `t` at capacity `cap`. */
static bool allows(const struct af_sim_nodepool *p, const struct af_instance_type *t,
                   const char *cap)
{
    char cat[16], gen[16];
    bool capacity = false;

    split_family(t->family ? t->family : "", cat, sizeof(cat), gen, sizeof(gen));
    for (size_t i = 0; i < p->n_reqs; i++)
        capacity |= p->reqs[i].key == AF_SIM_REQ_CAPACITY;
    /* Without a capacity-type requirement Karpenter launches on-demand only. */
    if (!capacity && strcmp(cap, "on-demand"))
        return false;
    for (size_t i = 0; i < p->n_reqs; i++) {
        const struct af_sim_requirement *r = &p->reqs[i];
        const char *v;
        switch (r->key) {
        case AF_SIM_REQ_FAMILY: v = t->family ? t->family : ""; break;
        case AF_SIM_REQ_TYPE: v = t->name; break;
        case AF_SIM_REQ_CAPACITY: v = cap; break;
        case AF_SIM_REQ_CATEGORY: v = cat; break;
        case AF_SIM_REQ_GENERATION: v = gen; break;
        case AF_SIM_REQ_ARCH: v = "amd64"; break;
        case AF_SIM_REQ_OS: v = "linux"; break;
        default: continue;   /* zones: every offering is in every zone */
        }
        if (listed(r->values, r->n_values, v) == r->not_in)
            return false;
    }
    return true;
}

static void add_label(struct af_sim_node *n, size_t *cap, const char *k, const char *v)
{
    for (size_t i = 0; i < n->n_labels; i++)
        if (!strcmp(n->labels[i].key, k))
            return;   /* the well-known labels first: the template cannot override them */
    AF_GROW(n->labels, *cap, n->n_labels + 1);
    n->labels[n->n_labels].key = af_xstrdup(k);
    n->labels[n->n_labels++].value = af_xstrdup(v);
}

struct af_node_info *af_sim_offering_node(const struct af_config *cfg,
                                          const struct af_sim_offering *o, const char *name)
{
    struct af_node_info *n = af_node_info_new();
    struct af_kv *kv = af_xcalloc(o->node.n_labels + 1, sizeof(*kv));

    for (size_t i = 0; i < o->node.n_labels; i++) {
        kv[i].key = o->node.labels[i].key;
        kv[i].value = o->node.labels[i].value;
    }
    n->name = af_xstrdup(name);
    af_prefer_type_allocatable(o->type, &n->allocatable);
    n->allocatable.v[AF_RES_PODS] = 110;
    af_node_classify(cfg->catalog, cfg->policy, kv, o->node.n_labels, NULL, 0, n);
    af_free(kv);
    return n;
}

static int by_pool_price(const void *a, const void *b)
{
    const struct af_sim_offering *x = a, *y = b;
    double px = x->node.info->hourly_usd, py = y->node.info->hourly_usd;

    if (x->pool != y->pool)
        return x->pool < y->pool ? -1 : 1;
    if (px != py)
        return px < py ? -1 : 1;
    if (x->spot != y->spot)
        return x->spot ? -1 : 1;
    return strcmp(x->type->name, y->type->name);
}

void af_sim_offerings_build(const struct af_config *cfg, const struct af_sim_nodepools *np,
                            struct af_sim_offerings *out)
{
    static const char *const caps[] = {"on-demand", "spot"};
    size_t cap = 0;

    memset(out, 0, sizeof(*out));
    out->pools = np;
    for (size_t p = 0; p < np->n && cfg->catalog; p++) {
        const struct af_sim_nodepool *pool = &np->pools[p];
        for (size_t i = 0; i < cfg->catalog->n_types; i++) {
            const struct af_instance_type *t = &cfg->catalog->types[i];
            for (int c = 0; c < 2; c++) {
                struct af_sim_offering *o;
                size_t lcap = 0;
                char cat[16], gen[16], name[200];
                if (!t->family || t->price_usd_hr < 0 || !allows(pool, t, caps[c]))
                    continue;
                AF_GROW(out->v, cap, out->n + 1);
                o = &out->v[out->n];
                memset(o, 0, sizeof(*o));
                o->pool = p;
                o->type = t;
                o->spot = c == 1;
                split_family(t->family, cat, sizeof(cat), gen, sizeof(gen));
                add_label(&o->node, &lcap, "node.kubernetes.io/instance-type", t->name);
                add_label(&o->node, &lcap, AF_PREFER_LABEL_FAMILY, t->family);
                add_label(&o->node, &lcap, LABEL_CATEGORY, cat);
                add_label(&o->node, &lcap, LABEL_GENERATION, gen);
                add_label(&o->node, &lcap, AF_PREFER_LABEL_CAPACITY, caps[c]);
                add_label(&o->node, &lcap, LABEL_NODEPOOL, pool->name);
                add_label(&o->node, &lcap, "kubernetes.io/arch", "amd64");
                add_label(&o->node, &lcap, "kubernetes.io/os", "linux");
                for (size_t l = 0; l < pool->n_labels; l++)
                    add_label(&o->node, &lcap, pool->labels[l].key, pool->labels[l].value);
                o->node.taints = af_xcalloc(pool->n_taints + 1, sizeof(*o->node.taints));
                for (size_t k = 0; k < pool->n_taints; k++) {
                    o->node.taints[k].key = af_xstrdup(pool->taints[k].key);
                    o->node.taints[k].value =
                        pool->taints[k].value ? af_xstrdup(pool->taints[k].value) : NULL;
                    o->node.taints[k].effect = af_xstrdup(pool->taints[k].effect);
                }
                o->node.n_taints = pool->n_taints;
                snprintf(name, sizeof(name), "%s-%s-%s", pool->name, t->name, caps[c]);
                o->node.info = af_sim_offering_node(cfg, o, name);
                if (!o->node.info->price_known) {
                    af_sim_node_release(&o->node);
                    continue;
                }
                out->n++;
            }
        }
    }
    if (out->n)
        qsort(out->v, out->n, sizeof(*out->v), by_pool_price);
}

void af_sim_offerings_release(struct af_sim_offerings *o)
{
    for (size_t i = 0; i < o->n; i++)
        af_sim_node_release(&o->v[i].node);
    af_free(o->v);
    memset(o, 0, sizeof(*o));
}

static const char *node_label(const struct af_sim_node *n, const char *key)
{
    for (size_t i = 0; i < n->n_labels; i++)
        if (!strcmp(n->labels[i].key, key))
            return n->labels[i].value;
    return NULL;
}

static bool in_values(const char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; s && i < n; i++)
        if (!strcmp(v[i], s))
            return true;
    return false;
}

/* The preferences' required NotIn and terms [from, to) (each: In its values, and capacity
 * type spot when the preferences ask for it), on the node's labels. */
static bool meets(const struct af_sim_node *n, const struct af_preferences *prefs, size_t from,
                  size_t to)
{
    const char *v, *c;

    if (!prefs)
        return true;
    v = node_label(n, prefs->key);
    if (v && in_values(prefs->not_in, prefs->n_not_in, v))
        return false;
    if (from >= to)
        return true;
    for (size_t k = from; k < to; k++)
        if (!in_values(prefs->terms[k].values, prefs->terms[k].n_values, v))
            return false;
    c = node_label(n, AF_PREFER_LABEL_CAPACITY);
    return !prefs->spot || (c && !strcmp(c, "spot"));
}

/* Whether launching `of` keeps its pool within spec.limits. */
static bool within_limits(const struct af_sim_offerings *o, const struct af_sim_offering *of,
                          const struct af_resources *pool_used)
{
    const struct af_sim_nodepool *p = &o->pools->pools[of->pool];

    for (int r = 0; r < AF_RES__COUNT && pool_used; r++)
        if ((p->limited & (1u << r)) &&
            pool_used[of->pool].v[r] + of->node.info->allocatable.v[r] > p->limits.v[r])
            return false;
    return true;
}

bool af_sim_offering_holds(const struct af_sim_offerings *o, size_t i,
                           const struct af_sim_pod *pod, const struct af_resources *pool_used)
{
    const struct af_sim_offering *of = &o->v[i];
    struct af_node_view empty;
    struct af_ks_node ks = {&of->node, &empty, 0, 0};

    if (!within_limits(o, of, pool_used))   /* the cheap test first */
        return false;
    memset(&empty, 0, sizeof(empty));
    empty.info = of->node.info;
    return af_ks_filter(pod, &ks) == AF_KS_FIT;
}

long af_sim_provision(const struct af_sim_offerings *o, const struct af_sim_pod *pod,
                      const struct af_preferences *prefs, const struct af_resources *pool_used,
                      int *relaxed)
{
    size_t n_terms = prefs ? prefs->n_terms : 0;

    for (size_t k = 0; k <= n_terms; k++) {
        /* Terms are heaviest first (af_prefer_build). k terms relaxed: the k lightest (the
         * docs), or the k heaviest with the next one the only requirement (the code). */
        size_t from = 0, to = n_terms - k;
        if (o->relax == AF_SIM_RELAX_HEAVIEST_FIRST) {
            from = k;
            to = k < n_terms ? k + 1 : k;
        }
        for (size_t i = 0; i < o->n; i++) {
            if (!meets(&o->v[i].node, prefs, from, to) ||
                !af_sim_offering_holds(o, i, pod, pool_used))
                continue;
            /* Offerings are by pool, then price: the first hit is the heaviest pool's
             * cheapest. */
            if (relaxed)
                *relaxed = (int)k;
            return (long)i;
        }
    }
    return -1;
}
