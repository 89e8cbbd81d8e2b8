/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Node classification: one canonical hardware class per node, from whatever
 * labels the cluster carries (instance type looked up in the catalog, then the
 * accelerator-name labels of Karpenter, EKS Auto Mode, NVIDIA GPU feature
 * discovery and older conventions), and finally from the extended resources
 * the node advertises. Also the capacity type (spot or on-demand) and the
 * hourly price. Pure: labels in, fields of struct af_node_info out.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "accelfit/decide.h"
#include "accelfit/prices.h"
#include "accelfit/util.h"
#include "accelfit/banned.h"

static const char *kv_get(const struct af_kv *kv, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (kv[i].key && kv[i].value && !strcmp(kv[i].key, key))
            return kv[i].value;
    return NULL;
}

/* The first of `keys` (NULL-terminated) the labels hold, or NULL. */
static const char *kv_first(const struct af_kv *kv, size_t n, const char *const *keys)
{
    const char *v = NULL;
    for (; *keys && !v; keys++)
        v = kv_get(kv, n, *keys);
    return v;
}

/* Where a node runs: the well-known topology labels, then their deprecated beta forms. */
static const char *const region_labels[] = {"topology.kubernetes.io/region",
                                            "failure-domain.beta.kubernetes.io/region", NULL};
static const char *const zone_labels[] = {"topology.kubernetes.io/zone",
                                          "failure-domain.beta.kubernetes.io/zone", NULL};

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
 * generation. Failing that, the labels of AWS's example node groups (`accelerator`,
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

/* Spot or not from the capacity-type labels; *known false when neither is set. */
static bool is_spot(const struct af_kv *labels, size_t n_labels, bool *known)
{
    const char *k = kv_get(labels, n_labels, "karpenter.sh/capacity-type");
    const char *e = kv_get(labels, n_labels, "eks.amazonaws.com/capacityType");

    *known = k || e;
    return (k && !strcasecmp(k, "spot")) || (e && !strcasecmp(e, "spot"));
}

/*
 * Prepaid capacity from the labels Karpenter and EKS give such nodes, else accelfit's
 * annotations (docs/pricing.md#prepaid-capacity):
 *   karpenter.sh/capacity-type: reserved, with karpenter.k8s.aws/capacity-reservation-type
 *     default (an ODCR) or capacity-block, and karpenter.k8s.aws/capacity-reservation-id;
 *   eks.amazonaws.com/capacityType: CAPACITY_BLOCK (a managed node group on a block);
 *   accelfit.io/capacity-reservation-id and accelfit.io/capacity-reservation-type (the
 *     same two values) on any node, and accelfit.io/capacity-reservation-end (RFC 3339).
 */
static void prepaid(const struct af_kv *labels, size_t n_labels, const struct af_kv *anns,
                    size_t n_anns, struct af_node_info *out)
{
    const char *k = kv_get(labels, n_labels, "karpenter.sh/capacity-type");
    const char *e = kv_get(labels, n_labels, "eks.amazonaws.com/capacityType");
    const char *type = kv_get(labels, n_labels, "karpenter.k8s.aws/capacity-reservation-type");
    const char *id = kv_get(labels, n_labels, "karpenter.k8s.aws/capacity-reservation-id");
    const char *a_type = kv_get(anns, n_anns, "accelfit.io/capacity-reservation-type");
    const char *a_id = kv_get(anns, n_anns, "accelfit.io/capacity-reservation-id");
    const char *a_end = kv_get(anns, n_anns, "accelfit.io/capacity-reservation-end");

    out->prepaid = AF_PREPAID_NONE;
    out->prepaid_source = NULL;
    if (k && !strcmp(k, "reserved")) {
        out->prepaid = AF_PREPAID_RESERVED;
        out->prepaid_source = "label karpenter.sh/capacity-type=reserved";
    } else if (e && !strcmp(e, "CAPACITY_BLOCK")) {
        out->prepaid = AF_PREPAID_BLOCK;
        out->prepaid_source = "label eks.amazonaws.com/capacityType=CAPACITY_BLOCK";
    } else if (a_id || a_type) {
        out->prepaid = AF_PREPAID_RESERVED;
        out->prepaid_source = a_id ? "annotation accelfit.io/capacity-reservation-id"
                                   : "annotation accelfit.io/capacity-reservation-type";
    } else {
        return;
    }
    if (!type)
        type = a_type;
    if (type && !strcmp(type, "capacity-block"))
        out->prepaid = AF_PREPAID_BLOCK;
    else if (type && !strcmp(type, "default") && out->prepaid == AF_PREPAID_RESERVED)
        out->prepaid = AF_PREPAID_ODCR;
    if (!out->reservation_id)
        out->reservation_id = af_xstrdup(id ? id : a_id);
    out->annotated_end = 0;
    if (a_end) {
        double t = af_parse_rfc3339(a_end);
        if (t > 0)
            out->annotated_end = t;
    }
}

/* A decimal price such as "32.77" or "0.5"; false when malformed, negative or absurd. */
static bool parse_price(const char *s, double *out)
{
    return s && af_parse_decimal(s, 0, AF_PRICE_MAX_USD_HR, out) == 0;
}

/* A label holding a whole number of MiB ("23028"); 0 when absent or malformed. */
static double label_mib_as_gib(const struct af_kv *labels, size_t n, const char *key)
{
    const char *v = kv_get(labels, n, key);
    char *end;
    unsigned long long mib;

    if (!v || !isdigit((unsigned char)v[0]))
        return 0;
    mib = strtoull(v, &end, 10);
    if (*end || mib == 0 || mib > (1ull << 24))
        return 0;
    return (double)mib / 1024.0;
}

/* "NVIDIA-A100-SXM4-80GB", "Tesla-V100-SXM2-32GB", "NVIDIA-H100-80GB-HBM3": the NNGB token. */
static double product_gib(const char *product)
{
    for (const char *p = product; p && *p; p++) {
        char *end;
        unsigned long gb;
        if (!isdigit((unsigned char)*p) || (p > product && isalnum((unsigned char)p[-1])))
            continue;
        gb = strtoul(p, &end, 10);
        if ((end[0] == 'G' || end[0] == 'g') && (end[1] == 'B' || end[1] == 'b') &&
            !isalnum((unsigned char)end[2]) && gb >= 4 && gb <= 1024)
            return (double)gb * 1e9 / (1024.0 * 1024.0 * 1024.0);
    }
    return 0;
}

/* Smallest and largest device memory of the catalog's types of one class. */
static void class_dev_range(const struct af_catalog *cat, enum af_class cls, double *lo, double *hi)
{
    *lo = *hi = 0;
    for (size_t i = 0; cat && i < cat->n_types; i++) {
        double m = cat->types[i].accel_memory_gib_per_device;
        if (cat->types[i].cls != cls || !(m > 0))
            continue;
        if (*lo == 0 || m < *lo)
            *lo = m;
        if (m > *hi)
            *hi = m;
    }
}

/* Memory of one device the node hands out, from the most specific source there is. */
static void device_memory(const struct af_catalog *cat, const struct af_instance_type *t,
                          const struct af_kv *labels, size_t n_labels, struct af_node_info *out)
{
    const char *product = kv_get(labels, n_labels, "nvidia.com/gpu.product");
    const char *strategy = kv_get(labels, n_labels, "nvidia.com/mig.strategy");
    struct af_mig_profile mig;
    double gib = 0;

    if (out->kind == AF_ACCEL_NONE)
        return;
    /* Single-strategy MIG: every nvidia.com/gpu is one slice of this profile. */
    if (product && (strstr(product, "MIG") || (strategy && !strcmp(strategy, "single"))) &&
        af_mig_profile_parse(product, &mig)) {
        gib = (double)mig.gb * 1e9 / (1024.0 * 1024.0 * 1024.0);
        out->dev_mem_source = "MIG profile in nvidia.com/gpu.product";
    } else if (t && t->accel_memory_gib_per_device > 0 && t->cls == out->cls) {
        gib = t->accel_memory_gib_per_device;
        out->dev_mem_source = "catalog";
    } else if ((gib = label_mib_as_gib(labels, n_labels, "nvidia.com/gpu.memory")) > 0) {
        out->dev_mem_source = "label nvidia.com/gpu.memory";
    } else if ((gib = label_mib_as_gib(labels, n_labels, "karpenter.k8s.aws/instance-gpu-memory")) >
               0) {
        out->dev_mem_source = "label karpenter.k8s.aws/instance-gpu-memory";
    } else if ((gib = product_gib(product)) > 0) {
        out->dev_mem_source = "nvidia.com/gpu.product";
    }
    if (gib > 0) {
        out->dev_mem_gib_lo = out->dev_mem_gib_hi = gib;
        return;
    }
    if (out->cls > AF_CLASS_UNKNOWN && out->cls < AF_CLASS__COUNT) {
        class_dev_range(cat, out->cls, &out->dev_mem_gib_lo, &out->dev_mem_gib_hi);
        if (out->dev_mem_gib_hi > 0)
            out->dev_mem_source = "range of the class in the catalog";
    }
}

static bool gpu_shared(const struct af_kv *labels, size_t n_labels, const struct af_resources *a)
{
    const char *replicas = kv_get(labels, n_labels, "nvidia.com/gpu.replicas");
    const char *strategy = kv_get(labels, n_labels, "nvidia.com/gpu.sharing-strategy");

    if (a->v[AF_RES_GPU_SHARED] > 0)
        return true;
    if (strategy && (!strcmp(strategy, "time-slicing") || !strcmp(strategy, "mps")))
        return true;
    int64_t n;

    return replicas && af_parse_int64(replicas, 0, INT64_MAX, &n) == 0 && n > 1;
}

/* "key\0value\0...\0\0" of the pairs; NULL for none. */
static char *pack_kv(const struct af_kv *kv, size_t n)
{
    size_t len = 1;
    char *out, *w;

    if (!n)
        return NULL;
    for (size_t i = 0; i < n; i++)
        len += strlen(kv[i].key) + strlen(kv[i].value) + 2;
    out = w = af_xmalloc(len);
    for (size_t i = 0; i < n; i++) {
        size_t a = strlen(kv[i].key) + 1, b = strlen(kv[i].value) + 1;
        memcpy(w, kv[i].key, a);
        memcpy(w + a, kv[i].value, b);
        w += a + b;
    }
    *w = '\0';
    return out;
}

void af_node_classify(const struct af_catalog *cat, const struct af_policy *pol,
                      const struct af_kv *labels, size_t n_labels,
                      const struct af_kv *annotations, size_t n_annotations,
                      struct af_node_info *out)
{
    const struct af_instance_type *t = NULL;
    const char *itype, *itype_key = "node.kubernetes.io/instance-type";
    const char *fam_label, *ann_price;
    enum af_accel_kind advertised = af_res_accel_kind(&out->allocatable);

    out->cls = AF_CLASS_UNKNOWN;
    out->class_source = NULL;
    out->price_known = false;
    out->hourly_usd = 0;
    out->price_source = "unknown";
    out->price_annotation_bad = false;
    out->dev_mem_gib_lo = out->dev_mem_gib_hi = 0;
    out->dev_mem_source = NULL;
    if (!out->node_group) {
        static const char *const group_labels[] = {
            "eks.amazonaws.com/nodegroup", "karpenter.sh/nodepool", "alpha.eksctl.io/nodegroup-name"};
        for (size_t i = 0; i < AF_ARRAY_SIZE(group_labels) && !out->node_group; i++)
            out->node_group = af_xstrdup(kv_get(labels, n_labels, group_labels[i]));
    }

    /* 1. The instance type, looked up in the catalog. Karpenter's family and size
     *    labels spell it too when the well-known label is missing. */
    itype = kv_get(labels, n_labels, itype_key);
    if (!itype) {
        itype_key = "beta.kubernetes.io/instance-type";
        itype = kv_get(labels, n_labels, itype_key);
    }
    fam_label = kv_get(labels, n_labels, "karpenter.k8s.aws/instance-family");
    if (!fam_label)
        fam_label = kv_get(labels, n_labels, "eks.amazonaws.com/instance-family");
    if ((!itype || !*itype) && fam_label) {
        const char *size = kv_get(labels, n_labels, "karpenter.k8s.aws/instance-size");
        if (size && !out->instance_type)
            out->instance_type = af_xasprintf("%s.%s", fam_label, size);
        itype = out->instance_type;
        itype_key = "karpenter.k8s.aws/instance-family and instance-size";
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
    if (!out->family) {
        const char *dot = itype ? strchr(itype, '.') : NULL;
        if (fam_label && *fam_label)
            out->family = af_xstrdup(fam_label);
        else if (dot && dot > itype)
            out->family = af_xstrndup(itype, (size_t)(dot - itype));
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

    /* 3. The instance family, for a type the catalog does not have yet (g6e.2xlarge is
     *    an L40S whatever its size). A type the catalog has unclassified (g6f, a fraction
     *    of an L4) is not classed by its family. */
    if (out->cls == AF_CLASS_UNKNOWN && out->family && !t) {
        char probe[64];
        snprintf(probe, sizeof(probe), "%s.x", out->family);
        out->cls = af_class_from_instance_family(probe);
        if (out->cls != AF_CLASS_UNKNOWN)
            out->class_source = "instance family (type not in the catalog)";
    }

    /* 4. What the node advertises overrules a class without accelerators: a node with
     *    nvidia.com/gpu is not a CPU node, whatever its labels say. An accelerator of
     *    unknown model keeps its kind, so the pods that request it can still use it. */
    if (advertised != AF_ACCEL_NONE && af_class_kind(out->cls) != advertised &&
        out->cls != AF_CLASS_UNKNOWN) {
        out->cls = AF_CLASS_UNKNOWN;
        out->class_source = NULL;
    }
    if (out->cls == AF_CLASS_UNKNOWN) {
        switch (advertised) {
        case AF_ACCEL_GPU:
            out->class_source = "allocatable nvidia.com/gpu (model unknown)";
            break;
        case AF_ACCEL_NEURON:
            out->class_source = "allocatable aws.amazon.com/neuron* (generation unknown)";
            break;
        case AF_ACCEL_AMD:
            out->cls = AF_CLASS_AMD_GPU;
            out->class_source = "allocatable amd.com/gpu";
            break;
        default:
            out->cls = AF_CLASS_CPU;
            out->class_source =
                t && t->accel_name
                    ? "catalog: unclassified accelerator (no accelfit class) and no "
                      "accelerator resource"
                    : "no accelerator label or resource";
            break;
        }
    }
    out->kind = out->cls != AF_CLASS_UNKNOWN ? af_class_kind(out->cls) : advertised;
    out->gpu_shared = out->kind == AF_ACCEL_GPU && gpu_shared(labels, n_labels, &out->allocatable);
    device_memory(cat, t, labels, n_labels, out);

    /* Capacity type, place and price. */
    out->spot = is_spot(labels, n_labels, &out->capacity_known);
    prepaid(labels, n_labels, annotations, n_annotations, out);
    if (out->prepaid != AF_PREPAID_NONE)
        out->capacity_known = true;
    if (!out->labels)
        out->labels = pack_kv(labels, n_labels);
    if (!out->region)
        out->region = af_xstrdup(kv_first(labels, n_labels, region_labels));
    if (!out->zone)
        out->zone = af_xstrdup(kv_first(labels, n_labels, zone_labels));
    ann_price = kv_get(annotations, n_annotations, "accelfit.io/hourly-price");
    out->annotated_usd = -1;
    if (ann_price && !parse_price(ann_price, &out->annotated_usd)) {
        out->price_annotation_bad = true;
        out->annotated_usd = -1;
    }
    af_node_price(cat, pol, NULL, out);
}

/* The spot discount of type `t` in percent: the catalog's, else the policy's default; the
 * source it names (AF_PRICE_SOURCE_*), or NULL when neither knows one. */
static const char *spot_discount(const struct af_instance_type *t, const struct af_policy *pol,
                                 double *pct)
{
    const char *src = NULL;
    if (t && t->spot_discount_pct >= 0) {
        *pct = t->spot_discount_pct;
        src = "catalog";
    } else if (pol && pol->default_spot_discount_pct >= 0) {
        *pct = pol->default_spot_discount_pct;
        src = "policy";
    }
    if (src && *pct > 100)
        *pct = 100;
    return src;
}

/* The price before overlays, discounts and prepaid capacity: the sources of decide.h in
 * their order, annotation to catalog. */
static void base_price(const struct af_catalog *cat, const struct af_policy *pol,
                       const struct af_prices *live, struct af_node_info *n)
{
    const struct af_instance_type *t = n->instance_type ? af_catalog_find(cat, n->instance_type)
                                                        : NULL;
    double usd, as_of, pct;
    const char *disc;

    n->price_known = false;
    n->hourly_usd = 0;
    n->price_source = AF_PRICE_SOURCE_UNKNOWN;
    n->price_as_of = 0;
    n->price_other_region = false;
    if (n->annotated_usd >= 0) {
        n->price_known = true;
        n->hourly_usd = n->annotated_usd;
        n->price_source = AF_PRICE_SOURCE_ANNOTATION;
        return;
    }
    if (!n->instance_type)
        return;
    /* 1. On spot, the zone's own spot price. */
    if (n->spot && n->zone &&
        af_prices_get(live, AF_PRICE_SPOT, n->zone, n->instance_type, &usd, &as_of)) {
        n->price_known = true;
        n->hourly_usd = usd;
        n->price_source = AF_PRICE_SOURCE_AWS_SPOT;
        n->price_as_of = as_of;
        return;
    }
    /* 2. The on-demand price: the region's own, else the catalog's list price (of its
     *    region, which may not be the node's). */
    if (n->region &&
        af_prices_get(live, AF_PRICE_ON_DEMAND, n->region, n->instance_type, &usd, &as_of)) {
        n->price_source = AF_PRICE_SOURCE_AWS;
    } else if (t && t->price_usd_hr >= 0) {
        usd = t->price_usd_hr;
        as_of = cat->prices_as_of;
        n->price_source = AF_PRICE_SOURCE_CATALOG;
        n->price_other_region = n->region && cat->price_region &&
                                strcmp(n->region, cat->price_region) != 0;
    } else {
        return;
    }
    n->price_known = true;
    n->hourly_usd = usd;
    n->price_as_of = as_of;
    /* 3. On spot without a spot price of its zone: that less the spot discount. */
    if (n->spot && (disc = spot_discount(t, pol, &pct)) != NULL) {
        n->hourly_usd = usd * (1.0 - pct / 100.0);
        bool aws = !strcmp(n->price_source, AF_PRICE_SOURCE_AWS);
        n->price_source = !strcmp(disc, "catalog")
                              ? (aws ? AF_PRICE_SOURCE_AWS_CATALOG_SPOT : AF_PRICE_SOURCE_CATALOG_SPOT)
                              : (aws ? AF_PRICE_SOURCE_AWS_POLICY_SPOT : AF_PRICE_SOURCE_POLICY_SPOT);
    }
}

/* The first discount of the policy that covers the node: its family, or its class, or
 * every on-demand node when it names neither. */
static const struct af_discount *discount_for(const struct af_policy *pol,
                                              const struct af_node_info *n)
{
    for (size_t i = 0; pol && i < pol->n_discounts; i++) {
        const struct af_discount *d = &pol->discounts[i];
        bool any = !d->n_families && !d->classes;
        bool cls = n->cls >= 0 && n->cls < AF_CLASS__COUNT && (d->classes & (1u << n->cls));
        bool fam = false;
        for (size_t k = 0; n->family && k < d->n_families && !fam; k++)
            fam = !strcmp(d->families[k], n->family);
        if (any || cls || fam)
            return d;
    }
    return NULL;
}

void af_node_price(const struct af_catalog *cat, const struct af_policy *pol,
                   const struct af_price_inputs *in, struct af_node_info *n)
{
    const struct af_overlay *ov;
    const struct af_discount *d;

    base_price(cat, pol, in ? in->live : NULL, n);
    n->base_source = n->price_source;
    af_free(n->price_by);
    n->price_by = NULL;
    n->price_before_usd = 0;
    /* What the cluster really pays by the hour, where it says so: a NodeOverlay (as
     * Karpenter prices the type), else a discount on on-demand usage. An annotated price
     * is taken as it is. */
    ov = in && strcmp(n->price_source, AF_PRICE_SOURCE_ANNOTATION)
             ? af_overlays_match(in->overlays, n->labels)
             : NULL;
    if (ov && (n->price_known || ov->mode == AF_OVERLAY_PRICE)) {
        n->price_before_usd = n->price_known ? n->hourly_usd : 0;
        n->hourly_usd = af_overlay_apply(ov, n->hourly_usd);
        n->price_known = true;
        n->price_source = AF_PRICE_SOURCE_OVERLAY;
        n->price_by = af_xstrdup(ov->name);
    } else if (n->price_known && !n->spot && n->prepaid != AF_PREPAID_BLOCK &&
               strcmp(n->price_source, AF_PRICE_SOURCE_ANNOTATION) &&
               (d = discount_for(pol, n)) != NULL) {
        n->price_before_usd = n->hourly_usd;
        n->hourly_usd *= 1.0 - d->pct / 100.0;
        n->price_source = AF_PRICE_SOURCE_SAVINGS_PLAN;
        n->price_by = af_xstrdup(d->name);
    }
    n->rate_known = n->price_known;
    n->rate_usd_hr = n->hourly_usd;
    n->rate_source = n->price_source;
    n->reservation_end = 0;
    n->reservation_end_source = NULL;
    if (n->prepaid == AF_PREPAID_NONE)
        return;
    /* When it ends: AWS's record of the reservation (the node's id, else the only active
     * reservation of its type in its zone), else the node's annotation. */
    {
        const struct af_prices *live = in ? in->live : NULL;
        const struct af_reservation *r =
            n->reservation_id ? af_prices_reservation(live, n->reservation_id)
                              : af_prices_reservation_in(live, n->zone, n->instance_type);
        if (r) {
            if (!n->reservation_id)
                n->reservation_id = af_xstrdup(r->id);
            if (r->block)
                n->prepaid = AF_PREPAID_BLOCK;
            else if (n->prepaid == AF_PREPAID_RESERVED)
                n->prepaid = AF_PREPAID_ODCR;
            n->reservation_end = r->end;
            n->reservation_end_source = r->end > 0 ? "aws" : NULL;
        } else if (n->annotated_end > 0) {
            n->reservation_end = n->annotated_end;
            n->reservation_end_source = "annotation";
        }
    }
    /* Prepaid: the reservation is paid whether a pod runs here or not, so what a pod adds
     * is nothing (marginal, the default); amortized keeps the reservation's rate. */
    n->price_source = AF_PRICE_SOURCE_PREPAID;
    if (!pol || pol->prepaid == AF_PREPAID_MARGINAL) {
        n->price_known = true;
        n->hourly_usd = 0;
    }
}

/* "of 2026-07-20, 129 days old" for a list price read at `as_of` (nothing when unknown). */
static void fmt_list_date(double as_of, double now, char *buf, size_t len)
{
    time_t t = (time_t)as_of;
    struct tm tm;
    char age[24];

    buf[0] = '\0';
    if (as_of <= 0 || !gmtime_r(&t, &tm))
        return;
    af_format_age(now - as_of, age, sizeof(age));
    snprintf(buf, len, " of %04d-%02d-%02d, %s old", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, age);
}

/* Where the base price came from (the sources annotation to catalog). */
static void base_reason(const struct af_node_info *n, const struct af_catalog *cat,
                        const struct af_policy *pol, double now, char *buf, size_t len)
{
    const struct af_instance_type *t = n->instance_type ? af_catalog_find(cat, n->instance_type)
                                                        : NULL;
    const char *src = n->base_source ? n->base_source
                      : n->price_source ? n->price_source : AF_PRICE_SOURCE_UNKNOWN;
    const char *list_region = cat && cat->price_region ? cat->price_region : "us-east-1";
    char age[24], date[96], disc[128] = "";
    double pct = -1;

    af_format_age(now - n->price_as_of, age, sizeof(age));
    fmt_list_date(n->price_as_of, now, date, sizeof(date));
    if (spot_discount(t, pol, &pct) && (!strcmp(src, AF_PRICE_SOURCE_AWS_CATALOG_SPOT) ||
                                         !strcmp(src, AF_PRICE_SOURCE_CATALOG_SPOT) ||
                                         !strcmp(src, AF_PRICE_SOURCE_AWS_POLICY_SPOT) ||
                                         !strcmp(src, AF_PRICE_SOURCE_POLICY_SPOT)))
        snprintf(disc, sizeof(disc), " less the %s %g%% spot discount of %s",
                 strstr(src, "policy") ? "policy's default" : "catalog's", pct,
                 n->instance_type);
    if (!strcmp(src, AF_PRICE_SOURCE_ANNOTATION)) {
        snprintf(buf, len, "accelfit.io/hourly-price on the node");
    } else if (!strcmp(src, AF_PRICE_SOURCE_AWS_SPOT)) {
        snprintf(buf, len, "spot price of %s in %s from AWS, read %s ago", n->instance_type,
                 n->zone, age);
    } else if (!strncmp(src, "aws", 3)) {
        snprintf(buf, len, "on-demand price of %s in %s from AWS, read %s ago%s%s",
                 n->instance_type, n->region, age, disc,
                 n->spot && !disc[0] ? "; a spot node, but no spot price or discount is known"
                                     : "");
    } else if (n->price_known) {
        char where[160] = "";
        if (n->price_other_region)
            snprintf(where, sizeof(where), "; the node runs in %s, whose price is not known",
                     n->region);
        snprintf(buf, len, "%s on-demand list price of %s in the catalog%s%s%s%s", list_region,
                 n->instance_type, date, disc, where,
                 n->spot && !disc[0] ? "; a spot node, but no spot price or discount is known"
                                     : "");
    } else if (n->price_annotation_bad) {
        snprintf(buf, len, "no price: accelfit.io/hourly-price on the node is not a price");
    } else if (!n->instance_type) {
        snprintf(buf, len, "no price: the node names no instance type "
                           "(node.kubernetes.io/instance-type) and has no "
                           "accelfit.io/hourly-price");
    } else if (!t) {
        snprintf(buf, len, "no price: %s is not in the catalog, AWS gave none and the node "
                           "has no accelfit.io/hourly-price", n->instance_type);
    } else {
        snprintf(buf, len, "no price: the catalog has no price of %s, AWS gave none and the "
                           "node has no accelfit.io/hourly-price", n->instance_type);
    }
}

/* "1h50m", "3 days": time left, for people. */
static void fmt_left(double secs, char *buf, size_t len)
{
    if (secs <= 0)
        snprintf(buf, len, "has ended");
    else if (secs < 48 * 3600)
        snprintf(buf, len, "ends in %dh%02dm", (int)(secs / 3600), (int)(secs / 60) % 60);
    else
        snprintf(buf, len, "ends in %d days", (int)(secs / 86400));
}

void af_node_price_reason(const struct af_node_info *n, const struct af_catalog *cat,
                          const struct af_policy *pol, double now, char *buf, size_t len)
{
    char base[320], adj[448], left[48] = "", end[96] = "";
    const char *src = n->price_source ? n->price_source : AF_PRICE_SOURCE_UNKNOWN;

    base_reason(n, cat, pol, now, base, sizeof(base));
    if (n->price_by && n->rate_source && !strcmp(n->rate_source, AF_PRICE_SOURCE_OVERLAY))
        snprintf(adj, sizeof(adj), "NodeOverlay %s: %.4g $/h, on %s", n->price_by,
                 n->rate_usd_hr, base);
    else if (n->price_by)
        snprintf(adj, sizeof(adj), "discount %s: %.4g $/h, %.4g before it, on %s", n->price_by,
                 n->rate_usd_hr, n->price_before_usd, base);
    else
        snprintf(adj, sizeof(adj), "%s", base);
    if (strcmp(src, AF_PRICE_SOURCE_PREPAID)) {
        snprintf(buf, len, "%s", adj);
        return;
    }
    if (n->reservation_end > 0) {
        fmt_left(n->reservation_end - now, left, sizeof(left));
        snprintf(end, sizeof(end), ", %s (%s)", left,
                 n->reservation_end_source ? n->reservation_end_source : "?");
    }
    snprintf(buf, len, "prepaid %s%s%s (%s)%s: %s; its rate %s",
             af_prepaid_name(n->prepaid), n->reservation_id ? " " : "",
             n->reservation_id ? n->reservation_id : "", n->prepaid_source ? n->prepaid_source : "",
             end,
             !pol || pol->prepaid == AF_PREPAID_MARGINAL
                 ? "a pod adds nothing here, the reservation is paid whether it runs or not "
                   "(prices.prepaid: marginal)"
                 : "priced at the reservation's rate (prices.prepaid: amortized)",
             adj);
}
