/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loads the instance catalog (policies/catalog.yaml, or the project's shared
 * ec2-catalog.yaml, which has the same shape without `class:`) into a struct
 * af_catalog sorted by name. Prices and sizes drive every tier the selection
 * core prints, so the loader is strict about types and keys: a misspelt
 * `price_on_demand_usd_hr` must fail loudly rather than make a type look free
 * or unpriced. Informational keys (notes, sources, spot quotes) are accepted
 * and not stored. `class: unclassified` marks a type whose accelerator accelfit
 * has no class for (or a fraction of a GPU): it loads with AF_CLASS_UNKNOWN and
 * is priced, never sized.
 */
#include <stdlib.h>
#include <string.h>

#include "accelfit/config.h"
#include "config/yamlnode.h"
#include "accelfit/banned.h"

/* Bounds of the catalog's sizes: far above any instance, so sums of them stay finite. */
#define MAX_GIB 1e7    /* GiB of host or device memory */
#define MAX_GBPS 1e6   /* network bandwidth */

static const char *const top_keys[] = {"apiVersion", "kind", "region", "prices_as_of",
                                       "instances", NULL};
static const char *const type_keys[] = {"name",
                                        "family",
                                        "class",
                                        "arch",
                                        "vcpus",
                                        "memory_gib",
                                        "accelerator",
                                        "neuron_cores",
                                        "network_gbps_baseline",
                                        "efa_supported",
                                        "efa_max_interfaces",
                                        "price_on_demand_usd_hr",
                                        "spot",
                                        "notes",
                                        "facts_source",
                                        NULL};
static const char *const accel_keys[] = {"kind",
                                         "maker",
                                         "name",
                                         "count",
                                         "memory_gib_per_device",
                                         "memory_gib_total",
                                         "marketed_memory_per_device",
                                         NULL};
static const char *const spot_keys[] = {"discount_pct", "est_usd_hr_derived", "interruption_freq",
                                        "source", NULL};

static void type_release(struct af_instance_type *t)
{
    af_free(t->name);
    af_free(t->family);
    af_free(t->accel_maker);
    af_free(t->accel_name);
}

void af_catalog_free(struct af_catalog *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_types; i++)
        type_release(&c->types[i]);
    af_free(c->types);
    af_free(c->by_class);
    af_free(c->source);
    af_free(c->price_region);
    af_free(c);
}

void af_catalog_index(struct af_catalog *c)
{
    uint32_t at[AF_CLASS__COUNT + 2] = {0};

    if (c->by_class)
        return;
    /* a counting sort by slot (class + 1): stable, so each class keeps the name order */
    for (size_t i = 0; i < c->n_types; i++)
        at[c->types[i].cls + 2]++;
    for (int k = 0; k <= AF_CLASS__COUNT; k++)
        at[k + 1] += at[k];
    memcpy(c->class_start, at, sizeof(at));
    c->by_class = af_xcalloc(c->n_types ? c->n_types : 1, sizeof(*c->by_class));
    for (size_t i = 0; i < c->n_types; i++)
        c->by_class[at[c->types[i].cls + 1]++] = (uint32_t)i;
}

static int cmp_type(const void *a, const void *b)
{
    return strcmp(((const struct af_instance_type *)a)->name,
                  ((const struct af_instance_type *)b)->name);
}

/* Reads an optional number: absent or null leaves *out alone. */
static int opt_double(struct af__ydoc *d, const yaml_node_t *map, const char *key, double min,
                      double max, double *out)
{
    yaml_node_t *v = af__ymap_get(d, map, key);

    if (!v || af__ynode_is_null(v))
        return 0;
    return af__ynode_double(d, v, key, min, max, out);
}

static int load_accel(struct af__ydoc *d, yaml_node_t *acc, struct af_instance_type *t)
{
    yaml_node_t *v;
    const char *s;
    int rc;

    if (!acc || af__ynode_is_null(acc))
        return 0;
    rc = af__ynode_expect(d, acc, YAML_MAPPING_NODE, "accelerator");
    if (!rc)
        rc = af__ymap_check_keys(d, acc, "accelerator", accel_keys);
    if (rc)
        return rc;

    v = af__ymap_get(d, acc, "kind");
    if (v) {
        rc = af__ynode_string(d, v, "accelerator.kind", &s);
        if (rc)
            return rc;
        if (!strcmp(s, "gpu"))
            t->accel_kind = AF_ACCEL_GPU;
        else if (!strcmp(s, "neuron"))
            t->accel_kind = AF_ACCEL_NEURON;
        else if (!strcmp(s, "amd"))
            t->accel_kind = AF_ACCEL_AMD;
        else
            return af__ydoc_err(d, v, AF_EINVAL,
                                "unknown accelerator kind '%s' (known: gpu, neuron, amd)", s);
    }
    v = af__ymap_get(d, acc, "maker");
    if (v && !af__ynode_is_null(v)) {
        rc = af__ynode_string(d, v, "accelerator.maker", &s);
        if (rc)
            return rc;
        t->accel_maker = af_xstrdup(s);
    }
    v = af__ymap_get(d, acc, "name");
    if (!v)
        return af__ydoc_err(d, acc, AF_EINVAL, "accelerator of '%s' has no 'name'", t->name);
    rc = af__ynode_string(d, v, "accelerator.name", &s);
    if (rc)
        return rc;
    t->accel_name = af_xstrdup(s);
    v = af__ymap_get(d, acc, "count");
    if (!v)
        return af__ydoc_err(d, acc, AF_EINVAL, "accelerator of '%s' has no 'count'", t->name);
    rc = af__ynode_int(d, v, "accelerator.count", 0, 1024, &t->accel_count);
    if (rc)
        return rc;
    /* Required of a classified type (load_type checks); a fraction of a GPU or an
     * accelerator accelfit has no class for may come without it. */
    v = af__ymap_get(d, acc, "memory_gib_per_device");
    if (v && !af__ynode_is_null(v)) {
        rc = af__ynode_double(d, v, "accelerator.memory_gib_per_device", 0, MAX_GIB,
                              &t->accel_memory_gib_per_device);
        if (rc)
            return rc;
        if (t->accel_memory_gib_per_device <= 0)
            return af__ydoc_err(d, v, AF_EINVAL, "'memory_gib_per_device' must be positive");
    }
    v = af__ymap_get(d, acc, "memory_gib_total");
    if (v && !af__ynode_is_null(v)) {
        double total;
        rc = af__ynode_double(d, v, "accelerator.memory_gib_total", 0, 1024 * MAX_GIB, &total);
        if (rc)
            return rc;
        if (total - t->accel_count * t->accel_memory_gib_per_device > 0.5 ||
            t->accel_count * t->accel_memory_gib_per_device - total > 0.5)
            return af__ydoc_err(d, v, AF_EINVAL,
                                "'memory_gib_total' %g of '%s' is not count x "
                                "memory_gib_per_device (%d x %g)",
                                total, t->name, t->accel_count, t->accel_memory_gib_per_device);
    }
    v = af__ymap_get(d, acc, "marketed_memory_per_device");
    if (v && !af__ynode_is_null(v)) {
        rc = af__ynode_string(d, v, "accelerator.marketed_memory_per_device", &s);
        if (rc)
            return rc;
    }
    return 0;
}

static int load_spot(struct af__ydoc *d, yaml_node_t *spot, struct af_instance_type *t)
{
    int rc;

    if (!spot || af__ynode_is_null(spot))
        return 0;
    rc = af__ynode_expect(d, spot, YAML_MAPPING_NODE, "spot");
    if (!rc)
        rc = af__ymap_check_keys(d, spot, "spot", spot_keys);
    if (!rc)
        rc = opt_double(d, spot, "discount_pct", 0, 100, &t->spot_discount_pct);
    if (rc)
        return rc;
    if (t->spot_discount_pct >= 100)
        return af__ydoc_err(d, af__ymap_get(d, spot, "discount_pct"), AF_EINVAL,
                            "spot 'discount_pct' must be below 100");
    return 0;
}

static int load_type(struct af__ydoc *d, yaml_node_t *n, struct af_instance_type *t)
{
    yaml_node_t *v, *cls_node;
    const char *s;
    double num;
    int rc;

    t->cls = AF_CLASS_UNKNOWN;
    t->price_usd_hr = -1;
    t->spot_discount_pct = -1;
    rc = af__ynode_expect(d, n, YAML_MAPPING_NODE, "instances[]");
    if (!rc)
        rc = af__ymap_check_keys(d, n, "an instance type", type_keys);
    if (rc)
        return rc;

    v = af__ymap_get(d, n, "name");
    if (!v)
        return af__ydoc_err(d, n, AF_EINVAL, "instance type has no 'name'");
    rc = af__ynode_string(d, v, "name", &s);
    if (rc)
        return rc;
    if (!*s || strchr(s, ' '))
        return af__ydoc_err(d, v, AF_EINVAL, "'%s' is not an instance type name", s);
    t->name = af_xstrdup(s);

    v = af__ymap_get(d, n, "family");
    if (v) {
        rc = af__ynode_string(d, v, "family", &s);
        if (rc)
            return rc;
        t->family = af_xstrdup(s);
    } else {
        /* "p4d.24xlarge" -> "p4d". */
        const char *dot = strchr(t->name, '.');
        t->family = dot ? af_xstrndup(t->name, (size_t)(dot - t->name)) : af_xstrdup(t->name);
    }

    v = af__ymap_get(d, n, "arch");
    if (v && !af__ynode_is_null(v)) {
        rc = af__ynode_string(d, v, "arch", &s);
        if (rc)
            return rc;
        if (!strcmp(s, "amd64"))
            t->arch = AF_ARCH_AMD64;
        else if (!strcmp(s, "arm64"))
            t->arch = AF_ARCH_ARM64;
        else
            return af__ydoc_err(d, v, AF_EINVAL, "unknown arch '%s' (known: amd64, arm64)", s);
    }

    v = af__ymap_get(d, n, "vcpus");
    if (!v)
        return af__ydoc_err(d, n, AF_EINVAL, "instance type '%s' has no 'vcpus'", t->name);
    rc = af__ynode_int(d, v, "vcpus", 1, 100000, &t->vcpus);
    if (rc)
        return rc;
    v = af__ymap_get(d, n, "memory_gib");
    if (!v)
        return af__ydoc_err(d, n, AF_EINVAL, "instance type '%s' has no 'memory_gib'", t->name);
    rc = af__ynode_double(d, v, "memory_gib", 0, MAX_GIB, &t->memory_gib);
    if (rc)
        return rc;
    if (t->memory_gib <= 0)
        return af__ydoc_err(d, v, AF_EINVAL, "'memory_gib' must be positive");

    rc = load_accel(d, af__ymap_get(d, n, "accelerator"), t);
    if (rc)
        return rc;

    v = af__ymap_get(d, n, "neuron_cores");
    if (v && !af__ynode_is_null(v)) {
        rc = af__ynode_int(d, v, "neuron_cores", 0, 100000, &t->neuron_cores);
        if (rc)
            return rc;
    }
    rc = opt_double(d, n, "network_gbps_baseline", 0, MAX_GBPS, &t->network_gbps);
    if (rc)
        return rc;
    v = af__ymap_get(d, n, "efa_supported");
    if (v && !af__ynode_is_null(v)) {
        rc = af__ynode_bool(d, v, "efa_supported", &t->efa);
        if (rc)
            return rc;
    }
    v = af__ymap_get(d, n, "efa_max_interfaces");
    if (v && !af__ynode_is_null(v)) {
        int efa_n;
        rc = af__ynode_int(d, v, "efa_max_interfaces", 0, 1024, &efa_n);
        if (rc)
            return rc;
    }
    v = af__ymap_get(d, n, "price_on_demand_usd_hr");
    if (v && !af__ynode_is_null(v)) {
        rc = af__ynode_double(d, v, "price_on_demand_usd_hr", 0, AF_PRICE_MAX_USD_HR, &num);
        if (rc)
            return rc;
        t->price_usd_hr = num;
    }
    rc = load_spot(d, af__ymap_get(d, n, "spot"), t);
    if (rc)
        return rc;
    v = af__ymap_get(d, n, "notes");
    if (v && !af__ynode_is_null(v) && v->type == YAML_MAPPING_NODE)
        return af__ydoc_err(d, v, AF_ETYPE, "'notes' must be a list of strings");

    /* The class: explicit, else derived from the accelerator name, else CPU. */
    cls_node = af__ymap_get(d, n, "class");
    if (cls_node) {
        rc = af__ynode_string(d, cls_node, "class", &s);
        if (rc)
            return rc;
        if (!strcmp(s, "unclassified")) {
            if (!t->accel_name)
                return af__ydoc_err(d, cls_node, AF_EINVAL,
                                    "'%s' is unclassified but has no accelerator (a type "
                                    "without one is class cpu)",
                                    t->name);
            return 0;   /* priced, never sized: no class, whatever its accelerator */
        }
        t->cls = af_class_parse(s);
        if (t->cls == AF_CLASS_UNKNOWN)
            return af__ydoc_err(d, cls_node, AF_EINVAL,
                                "unknown class '%s' for '%s' (known: %s)", s, t->name,
                                af_class_names_list());
    } else if (t->accel_name) {
        t->cls = af_class_from_accel_name(t->accel_name);
        if (t->cls == AF_CLASS_UNKNOWN)
            return af__ydoc_err(d, n, AF_EINVAL,
                                "cannot tell the class of '%s' from accelerator '%s'; "
                                "add 'class:'",
                                t->name, t->accel_name);
    } else {
        t->cls = AF_CLASS_CPU;
    }

    if (t->accel_name && t->accel_count == 0)
        return af__ydoc_err(d, af__ymap_get(d, n, "accelerator"), AF_EINVAL,
                            "accelerator of '%s' has count 0 (a fraction of a device): only "
                            "an unclassified type may",
                            t->name);
    if (t->accel_name && !(t->accel_memory_gib_per_device > 0))
        return af__ydoc_err(d, af__ymap_get(d, n, "accelerator"), AF_EINVAL,
                            "accelerator of '%s' has no 'memory_gib_per_device'", t->name);

    /* The accelerator kind follows the class when the file does not say. */
    if (t->accel_name && t->accel_kind == AF_ACCEL_NONE)
        t->accel_kind = af_class_kind(t->cls);
    if (af_class_kind(t->cls) != t->accel_kind)
        return af__ydoc_err(d, cls_node ? cls_node : n, AF_EINVAL,
                            "class '%s' of '%s' does not match its accelerator (%s)",
                            af_class_name(t->cls), t->name, t->accel_name ? t->accel_name : "none");
    return 0;
}

static int load_catalog(struct af__ydoc *d, struct af_catalog *c)
{
    yaml_node_t *root = af__ydoc_root(d), *v, *list;
    struct af__strset names;
    const char *s;
    size_t cap = 0;
    int rc;

    if (!root)
        return af__ydoc_err(d, NULL, AF_EPARSE, "empty catalog (expected 'instances:')");
    rc = af__ynode_expect(d, root, YAML_MAPPING_NODE, "the catalog");
    if (!rc)
        rc = af__ymap_check_keys(d, root, "the catalog", top_keys);
    if (rc)
        return rc;
    v = af__ymap_get(d, root, "kind");
    if (v) {
        rc = af__ynode_string(d, v, "kind", &s);
        if (rc)
            return rc;
        if (strcmp(s, "Catalog"))
            return af__ydoc_err(d, v, AF_EINVAL, "kind must be 'Catalog', not '%s'", s);
    }
    v = af__ymap_get(d, root, "apiVersion");
    if (v) {
        rc = af__ynode_string(d, v, "apiVersion", &s);
        if (rc)
            return rc;
        if (strcmp(s, "accelfit.io/v1"))
            return af__ydoc_err(d, v, AF_EINVAL, "apiVersion must be 'accelfit.io/v1', not '%s'",
                                s);
    }
    v = af__ymap_get(d, root, "region");
    if (v) {
        rc = af__ynode_string(d, v, "region", &s);
        if (rc)
            return rc;
    }
    c->price_region = af_xstrdup(v ? s : "us-east-1");
    v = af__ymap_get(d, root, "prices_as_of");
    if (v) {
        rc = af__ynode_string(d, v, "prices_as_of", &s);
        if (rc)
            return rc;
        c->prices_as_of = af_parse_rfc3339(s);
        if (c->prices_as_of <= 0)
            return af__ydoc_err(d, v, AF_EINVAL,
                                "prices_as_of must be an RFC 3339 time such as "
                                "2026-07-20T13:44:30Z, not '%s'", s);
    }
    list = af__ymap_get(d, root, "instances");
    if (!list)
        return af__ydoc_err(d, root, AF_EINVAL, "the catalog has no 'instances' list");
    rc = af__ynode_expect(d, list, YAML_SEQUENCE_NODE, "instances");
    if (rc)
        return rc;

    /* Duplicate names are found with a set: a catalog of thousands of types loads in
     * linear time. The names are the types' own strings, which do not move. */
    af__strset_init(&names, (size_t)(list->data.sequence.items.top - list->data.sequence.items.start));
    for (yaml_node_item_t *it = list->data.sequence.items.start; it < list->data.sequence.items.top;
         it++) {
        yaml_node_t *n = af__ydoc_node(d, *it);
        AF_GROW(c->types, cap, c->n_types + 1);
        memset(&c->types[c->n_types], 0, sizeof(c->types[0]));
        c->n_types++;
        rc = load_type(d, n, &c->types[c->n_types - 1]);
        if (rc) {
            af__strset_release(&names);
            return rc;
        }
        if (!af__strset_add(&names, c->types[c->n_types - 1].name, c->n_types - 1, NULL)) {
            af__strset_release(&names);
            return af__ydoc_err(d, af__ymap_get(d, n, "name"), AF_EINVAL,
                                "duplicate instance type '%s'", c->types[c->n_types - 1].name);
        }
    }
    af__strset_release(&names);
    if (!c->n_types)
        return af__ydoc_err(d, list, AF_EINVAL, "the catalog lists no instance types");
    qsort(c->types, c->n_types, sizeof(c->types[0]), cmp_type);
    af_catalog_index(c);
    return 0;
}

int af_catalog_load_mem(struct af_catalog **out, const char *name, const char *yaml, size_t len,
                        struct af_error *err)
{
    struct af__ydoc d;
    struct af_catalog *c;
    int rc;

    *out = NULL;
    rc = af__ydoc_load(&d, name, yaml, len, err);
    if (rc)
        return rc;
    c = af_xcalloc(1, sizeof(*c));
    c->source = af_xstrdup(name);
    rc = load_catalog(&d, c);
    af__ydoc_release(&d);
    if (rc) {
        af_catalog_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

int af_catalog_load_file(struct af_catalog **out, const char *path, struct af_error *err)
{
    struct af_buf b = AF_BUF_INIT(64u << 20);
    int rc;

    *out = NULL;
    rc = af_buf_read_file(&b, path);
    if (rc) {
        af_buf_release(&b);
        return af_error_set(err, rc, path, 0, 0, "cannot read catalog: %s", af_strerror(rc));
    }
    rc = af_catalog_load_mem(out, path, b.buf ? b.buf : "", b.len, err);
    af_buf_release(&b);
    return rc;
}
