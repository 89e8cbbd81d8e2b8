/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Node classification: one canonical hardware class per node, from whatever
 * labels the cluster carries (instance type looked up in the catalog, then the
 * accelerator-name labels of Karpenter, EKS Auto Mode, NVIDIA GPU feature
 * discovery and older conventions), and finally from the extended resources
 * the node advertises. Also the capacity type (spot or on-demand) and the
 * hourly price. Pure: labels in, fields of struct af_node_info out.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "accelfit/decide.h"
#include "accelfit/util.h"

static const char *kv_get(const struct af_kv *kv, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (kv[i].key && kv[i].value && !strcmp(kv[i].key, key))
            return kv[i].value;
    return NULL;
}

/* Label keys that name an accelerator, in the order they are trusted. */
static const char *const accel_labels[] = {
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-accelerator-name",
    "eks.amazonaws.com/instance-gpu-name",
    "nvidia.com/gpu.product",
    "k8s.amazonaws.com/accelerator",
    "accelerator",
    "hardware-type",
};

/*
 * "inferentia" and "trainium" without a generation say too little: Karpenter
 * labels inf1 and inf2 alike. The instance family (Karpenter's or EKS's
 * label, or the prefix of an instance type the catalog lacks) settles the
 * generation. Failing that, the source documents' own labels (`accelerator`,
 * `hardware-type`: aws-inferentia) are read as they use them, on inf2 node
 * groups.
 */
static enum af_class refine_neuron(enum af_class c, const char *value, const char *key,
                                   const struct af_kv *labels, size_t n_labels)
{
    static const char *const family_labels[] = {
        "karpenter.k8s.aws/instance-family",
        "eks.amazonaws.com/instance-family",
        "node.kubernetes.io/instance-type",
        "beta.kubernetes.io/instance-type",
    };
    const char *last;
    size_t len;

    if (af_class_kind(c) != AF_ACCEL_NEURON)
        return c;
    len = strlen(value);
    last = len ? value + len - 1 : value;
    if (*last >= '0' && *last <= '9')
        return c; /* the value names a generation itself */
    for (size_t i = 0; i < AF_ARRAY_SIZE(family_labels); i++) {
        const char *fam = kv_get(labels, n_labels, family_labels[i]);
        enum af_class fc = fam ? af_class_from_accel_name(fam) : AF_CLASS_UNKNOWN;
        if (af_class_kind(fc) == AF_ACCEL_NEURON)
            return fc;
    }
    if (c == AF_CLASS_INFERENTIA1 && (!strcmp(key, "accelerator") || !strcmp(key, "hardware-type")))
        return AF_CLASS_INFERENTIA2;
    return c;
}

static bool is_spot(const struct af_kv *labels, size_t n_labels)
{
    const char *k = kv_get(labels, n_labels, "karpenter.sh/capacity-type");
    const char *e = kv_get(labels, n_labels, "eks.amazonaws.com/capacityType");

    return (k && !strcasecmp(k, "spot")) || (e && !strcasecmp(e, "spot"));
}

/* A decimal price such as "32.77" or "0.5"; false when malformed or negative. */
static bool parse_price(const char *s, double *out)
{
    char *end;
    double v;

    if (!s || !*s)
        return false;
    v = strtod(s, &end);
    while (*end == ' ')
        end++;
    if (end == s || *end || !isfinite(v) || v < 0 || v > 1e6)
        return false;
    *out = v;
    return true;
}

void af_node_classify(const struct af_catalog *cat, const struct af_policy *pol,
                      const struct af_kv *labels, size_t n_labels,
                      const struct af_kv *annotations, size_t n_annotations,
                      struct af_node_info *out)
{
    const struct af_instance_type *t = NULL;
    const char *itype, *itype_key = "node.kubernetes.io/instance-type";
    const char *ann_price;
    double price;

    out->cls = AF_CLASS_UNKNOWN;
    out->class_source = NULL;
    out->price_known = false;
    out->hourly_usd = 0;
    out->price_source = "unknown";

    /* 1. The instance type, looked up in the catalog. */
    itype = kv_get(labels, n_labels, itype_key);
    if (!itype) {
        itype_key = "beta.kubernetes.io/instance-type";
        itype = kv_get(labels, n_labels, itype_key);
    }
    if (itype && *itype) {
        if (!out->instance_type)
            out->instance_type = af_xstrdup(itype);
        t = af_catalog_find(cat, itype);
        if (t && t->cls != AF_CLASS_UNKNOWN) {
            out->cls = t->cls;
            out->class_source = itype_key;
        }
    }

    /* 2. Labels that name the accelerator. */
    for (size_t i = 0; out->cls == AF_CLASS_UNKNOWN && i < AF_ARRAY_SIZE(accel_labels); i++) {
        const char *v = kv_get(labels, n_labels, accel_labels[i]);
        enum af_class c;
        if (!v)
            continue;
        c = af_class_from_accel_name(v);
        if (c == AF_CLASS_UNKNOWN)
            continue;
        out->cls = refine_neuron(c, v, accel_labels[i], labels, n_labels);
        out->class_source = accel_labels[i];
    }

    /* 3. The extended resources it advertises: an accelerator of unknown model
     *    is not guessed at; a node with none is a CPU node. */
    if (out->cls == AF_CLASS_UNKNOWN) {
        const struct af_resources *a = &out->allocatable;
        if (a->v[AF_RES_GPU] > 0) {
            out->class_source = "allocatable nvidia.com/gpu (model unknown)";
        } else if (a->v[AF_RES_NEURON] > 0 || a->v[AF_RES_NEURONDEVICE] > 0 ||
                   a->v[AF_RES_NEURONCORE] > 0) {
            out->class_source = "allocatable aws.amazon.com/neuron* (generation unknown)";
        } else {
            out->cls = AF_CLASS_CPU;
            out->class_source = "no accelerator label or resource";
        }
    }

    /* Capacity type and price. */
    out->spot = is_spot(labels, n_labels);
    ann_price = kv_get(annotations, n_annotations, "accelfit.io/hourly-price");
    if (ann_price && parse_price(ann_price, &price)) {
        out->price_known = true;
        out->hourly_usd = price;
        out->price_source = "annotation";
    } else if (t && t->price_usd_hr >= 0) {
        out->price_known = true;
        out->hourly_usd = t->price_usd_hr;
        out->price_source = "catalog";
        if (out->spot) {
            double d = -1;
            if (t->spot_discount_pct >= 0) {
                d = t->spot_discount_pct;
                out->price_source = "catalog-spot";
            } else if (pol && pol->default_spot_discount_pct >= 0) {
                d = pol->default_spot_discount_pct;
                out->price_source = "policy";
            }
            if (d > 100)
                d = 100;
            if (d > 0)
                out->hourly_usd = t->price_usd_hr * (1.0 - d / 100.0);
        }
    }
}
