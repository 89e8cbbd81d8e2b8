/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Karpenter v1 NodePools for `simulate --autoscale` (accelfit/simulate.h): the part of
 * each NodePool the provisioner models, read with the loaders' YAML helpers so that a
 * field it cannot read is refused at its line and column. Documents of other kinds (an
 * EC2NodeClass) are skipped; so are NodePool fields the model does not use (disruption,
 * limits, nodeClassRef, expireAfter: docs/simulate.md says which).
 */
#include <stdlib.h>
#include <string.h>

#include "accelfit/simulate.h"
#include "config/yamlnode.h"
#include "accelfit/banned.h"

static const struct {
    const char *label;
    enum af_sim_req_key key;
} req_keys[] = {
    {"karpenter.k8s.aws/instance-family", AF_SIM_REQ_FAMILY},
    {"node.kubernetes.io/instance-type", AF_SIM_REQ_TYPE},
    {"karpenter.sh/capacity-type", AF_SIM_REQ_CAPACITY},
    {"karpenter.k8s.aws/instance-category", AF_SIM_REQ_CATEGORY},
    {"karpenter.k8s.aws/instance-generation", AF_SIM_REQ_GENERATION},
    {"kubernetes.io/arch", AF_SIM_REQ_ARCH},
    {"kubernetes.io/os", AF_SIM_REQ_OS},
    {"topology.kubernetes.io/zone", AF_SIM_REQ_ZONE},
};

struct load {
    struct af_sim_nodepools *out;
    size_t cap;
};

static void pool_release(struct af_sim_nodepool *p)
{
    af_free(p->name);
    for (size_t i = 0; i < p->n_reqs; i++) {
        for (size_t j = 0; j < p->reqs[i].n_values; j++)
            af_free(p->reqs[i].values[j]);
        af_free(p->reqs[i].values);
    }
    af_free(p->reqs);
    for (size_t i = 0; i < p->n_taints; i++) {
        af_free(p->taints[i].key);
        af_free(p->taints[i].value);
        af_free(p->taints[i].effect);
    }
    af_free(p->taints);
    for (size_t i = 0; i < p->n_labels; i++) {
        af_free(p->labels[i].key);
        af_free(p->labels[i].value);
    }
    af_free(p->labels);
    memset(p, 0, sizeof(*p));
}

void af_sim_nodepools_release(struct af_sim_nodepools *np)
{
    for (size_t i = 0; i < np->n; i++)
        pool_release(&np->pools[i]);
    af_free(np->pools);
    memset(np, 0, sizeof(*np));
}

/* A mapping's scalar value `key` as a string (NULL and 0 when absent). */
static int str_at(struct af__ydoc *d, const yaml_node_t *map, const char *key, const char **out)
{
    yaml_node_t *v = af__ymap_get(d, map, key);

    *out = NULL;
    return v ? af__ynode_string(d, v, key, out) : 0;
}

static int requirement(struct af__ydoc *d, const yaml_node_t *n, struct af_sim_requirement *r)
{
    static const char *const known[] = {"key", "operator", "values", "minValues", NULL};
    const char *key, *op;
    yaml_node_t *values;
    size_t k;
    int rc;

    if ((rc = af__ymap_expect(d, n, "a requirement", known)) || (rc = str_at(d, n, "key", &key)) ||
        (rc = str_at(d, n, "operator", &op)))
        return rc;
    if (!key || !op)
        return af__ydoc_err(d, n, AF_EINVAL, "a requirement needs key and operator");
    for (k = 0; k < sizeof(req_keys) / sizeof(req_keys[0]); k++)
        if (!strcmp(req_keys[k].label, key))
            break;
    if (k == sizeof(req_keys) / sizeof(req_keys[0]))
        return af__ydoc_err(d, af__ymap_get(d, n, "key"), AF_EINVAL,
                            "requirement key '%s' is not modelled (instance-family, "
                            "instance-type, capacity-type, instance-category, "
                            "instance-generation, arch, os, zone)",
                            key);
    r->key = req_keys[k].key;
    if (!strcmp(op, "Exists")) {
        r->not_in = true;   /* every offering has every modelled label: NotIn nothing */
        return 0;
    }
    if (strcmp(op, "In") && strcmp(op, "NotIn"))
        return af__ydoc_err(d, af__ymap_get(d, n, "operator"), AF_EINVAL,
                            "operator '%s' is not modelled (In, NotIn, Exists)", op);
    r->not_in = !strcmp(op, "NotIn");
    values = af__ymap_get(d, n, "values");
    if (!values)
        return af__ydoc_err(d, n, AF_EINVAL, "operator %s needs values", op);
    if ((rc = af__ynode_expect(d, values, YAML_SEQUENCE_NODE, "values")))
        return rc;
    r->values = af_xcalloc(af__yseq_len(values) + 1, sizeof(*r->values));
    for (yaml_node_item_t *it = values->data.sequence.items.start;
         it < values->data.sequence.items.top; it++) {
        const char *v;
        if ((rc = af__ynode_string(d, af__ydoc_node(d, *it), "values", &v)))
            return rc;
        r->values[r->n_values++] = af_xstrdup(v);
    }
    return 0;
}

static int taint(struct af__ydoc *d, const yaml_node_t *n, struct af_sim_taint *t)
{
    static const char *const known[] = {"key", "value", "effect", "timeAdded", NULL};
    const char *key, *value, *effect;
    int rc;

    if ((rc = af__ymap_expect(d, n, "a taint", known)) || (rc = str_at(d, n, "key", &key)) ||
        (rc = str_at(d, n, "value", &value)) || (rc = str_at(d, n, "effect", &effect)))
        return rc;
    if (!key || !effect)
        return af__ydoc_err(d, n, AF_EINVAL, "a taint needs key and effect");
    if (strcmp(effect, "NoSchedule") && strcmp(effect, "PreferNoSchedule") &&
        strcmp(effect, "NoExecute"))
        return af__ydoc_err(d, af__ymap_get(d, n, "effect"), AF_EINVAL,
                            "taint effect '%s': expected NoSchedule, PreferNoSchedule or "
                            "NoExecute",
                            effect);
    t->key = af_xstrdup(key);
    t->value = value ? af_xstrdup(value) : NULL;
    t->effect = af_xstrdup(effect);
    return 0;
}

/* spec.limits: resource names accelfit counts (cpu, memory, nvidia.com/gpu, the Neuron
 * resources), each a Kubernetes quantity. */
static int limits(struct af__ydoc *d, const yaml_node_t *map, struct af_sim_nodepool *p)
{
    int rc;

    if ((rc = af__ynode_expect(d, map, YAML_MAPPING_NODE, "limits")))
        return rc;
    for (yaml_node_pair_t *pr = map->data.mapping.pairs.start; pr < map->data.mapping.pairs.top;
         pr++) {
        yaml_node_t *k = af__ydoc_node(d, pr->key), *v = af__ydoc_node(d, pr->value);
        const char *name, *q;
        int r;
        int64_t x;
        if ((rc = af__ynode_string(d, k, "a limit", &name)))
            return rc;
        r = af_res_parse(name);
        if (r < 0 || r == AF_RES_MIG)
            return af__ydoc_err(d, k, AF_EINVAL,
                                "limit '%s' is not modelled (cpu, memory, pods, nvidia.com/gpu, "
                                "aws.amazon.com/neuron, neurondevice, neuroncore)",
                                name);
        if ((rc = af__ynode_string(d, v, name, &q)))
            return rc;
        if (af_parse_quantity(q, r == AF_RES_CPU ? 1000 : 1, &x) || x < 0)
            return af__ydoc_err(d, v, AF_EINVAL, "limit %s: '%s' is not a quantity", name, q);
        p->limits.v[r] = x;
        p->limited |= 1u << r;
    }
    return 0;
}

static int pool(struct af__ydoc *d, const yaml_node_t *root, struct af_sim_nodepool *p)
{
    yaml_node_t *meta = af__ymap_get(d, root, "metadata"), *spec = af__ymap_get(d, root, "spec");
    yaml_node_t *tmpl, *tspec, *tmeta, *seq, *labels, *w;
    const char *name, *api;
    int rc;

    if ((rc = str_at(d, root, "apiVersion", &api)))
        return rc;
    if (!api || strcmp(api, "karpenter.sh/v1"))
        return af__ydoc_err(d, af__ymap_get(d, root, "apiVersion"), AF_EINVAL,
                            "NodePool apiVersion '%s': only karpenter.sh/v1 is read",
                            api ? api : "");
    if (!meta || (rc = af__ynode_expect(d, meta, YAML_MAPPING_NODE, "metadata")))
        return meta ? rc : af__ydoc_err(d, root, AF_EINVAL, "a NodePool needs metadata.name");
    if ((rc = str_at(d, meta, "name", &name)))
        return rc;
    if (!name || !*name)
        return af__ydoc_err(d, meta, AF_EINVAL, "a NodePool needs metadata.name");
    p->name = af_xstrdup(name);
    if (!spec)
        return af__ydoc_err(d, root, AF_EINVAL, "NodePool %s: spec is missing", name);
    if ((rc = af__ynode_expect(d, spec, YAML_MAPPING_NODE, "spec")))
        return rc;
    if ((w = af__ymap_get(d, spec, "weight")) &&
        (rc = af__ynode_int(d, w, "weight", 1, 100, &p->weight)))
        return rc;
    if ((w = af__ymap_get(d, spec, "limits")) && (rc = limits(d, w, p)))
        return rc;
    tmpl = af__ymap_get(d, spec, "template");
    if (!tmpl)
        return af__ydoc_err(d, spec, AF_EINVAL, "NodePool %s: spec.template is missing", name);
    if ((rc = af__ynode_expect(d, tmpl, YAML_MAPPING_NODE, "spec.template")))
        return rc;
    tmeta = af__ymap_get(d, tmpl, "metadata");
    labels = tmeta && tmeta->type == YAML_MAPPING_NODE ? af__ymap_get(d, tmeta, "labels") : NULL;
    if (labels) {
        if ((rc = af__ynode_expect(d, labels, YAML_MAPPING_NODE, "labels")))
            return rc;
        p->labels = af_xcalloc((size_t)(labels->data.mapping.pairs.top -
                                        labels->data.mapping.pairs.start) + 1,
                               sizeof(*p->labels));
        for (yaml_node_pair_t *pr = labels->data.mapping.pairs.start;
             pr < labels->data.mapping.pairs.top; pr++) {
            const char *k, *v;
            if ((rc = af__ynode_string(d, af__ydoc_node(d, pr->key), "a label", &k)) ||
                (rc = af__ynode_string(d, af__ydoc_node(d, pr->value), k, &v)))
                return rc;
            p->labels[p->n_labels].key = af_xstrdup(k);
            p->labels[p->n_labels++].value = af_xstrdup(v);
        }
    }
    tspec = af__ymap_get(d, tmpl, "spec");
    if (!tspec)
        return af__ydoc_err(d, tmpl, AF_EINVAL, "NodePool %s: spec.template.spec is missing",
                            name);
    if ((rc = af__ynode_expect(d, tspec, YAML_MAPPING_NODE, "spec.template.spec")))
        return rc;
    if ((seq = af__ymap_get(d, tspec, "requirements"))) {
        if ((rc = af__ynode_expect(d, seq, YAML_SEQUENCE_NODE, "requirements")))
            return rc;
        p->reqs = af_xcalloc(af__yseq_len(seq) + 1, sizeof(*p->reqs));
        for (yaml_node_item_t *it = seq->data.sequence.items.start;
             it < seq->data.sequence.items.top; it++)
            if ((rc = requirement(d, af__ydoc_node(d, *it), &p->reqs[p->n_reqs++])))
                return rc;
    }
    if ((seq = af__ymap_get(d, tspec, "taints"))) {
        if ((rc = af__ynode_expect(d, seq, YAML_SEQUENCE_NODE, "taints")))
            return rc;
        p->taints = af_xcalloc(af__yseq_len(seq) + 1, sizeof(*p->taints));
        for (yaml_node_item_t *it = seq->data.sequence.items.start;
             it < seq->data.sequence.items.top; it++)
            if ((rc = taint(d, af__ydoc_node(d, *it), &p->taints[p->n_taints++])))
                return rc;
    }
    return 0;
}

static int one_doc(void *ud, struct af__ydoc *d)
{
    struct load *l = ud;
    yaml_node_t *root = af__ydoc_root(d);
    const char *kind;
    int rc;

    if (af__ynode_is_null(root))
        return 0;
    if ((rc = af__ynode_expect(d, root, YAML_MAPPING_NODE, "a document")) ||
        (rc = af__ymap_check_dups(d, root)) || (rc = str_at(d, root, "kind", &kind)))
        return rc;
    if (!kind || strcmp(kind, "NodePool"))
        return 0;
    AF_GROW(l->out->pools, l->cap, l->out->n + 1);
    memset(&l->out->pools[l->out->n], 0, sizeof(l->out->pools[0]));
    rc = pool(d, root, &l->out->pools[l->out->n]);
    l->out->n++;
    if (!rc)
        for (size_t i = 0; i + 1 < l->out->n; i++)
            if (!strcmp(l->out->pools[i].name, l->out->pools[l->out->n - 1].name))
                return af__ydoc_err(d, root, AF_EINVAL, "NodePool %s is given twice",
                                    l->out->pools[i].name);
    return rc;
}

static int by_weight(const void *a, const void *b)
{
    const struct af_sim_nodepool *x = a, *y = b;

    if (x->weight != y->weight)
        return y->weight - x->weight;
    return strcmp(x->name, y->name);
}

int af_sim_nodepools_load(const char *name, const char *text, size_t len,
                          struct af_sim_nodepools *out, struct af_error *err)
{
    struct load l = {out, 0};
    int rc;

    memset(out, 0, sizeof(*out));
    rc = af__ydoc_each(name, text, len, err, one_doc, &l);
    if (!rc && !out->n)
        rc = af_error_set(err, AF_EINVAL, name, 0, 0,
                          "no NodePool (kind: NodePool, apiVersion: karpenter.sh/v1) in the file");
    if (rc) {
        af_sim_nodepools_release(out);
        return rc;
    }
    qsort(out->pools, out->n, sizeof(*out->pools), by_weight);
    return 0;
}
