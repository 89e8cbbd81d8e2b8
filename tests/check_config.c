/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config: the catalog and policy loaders (every shipped instance type with
 * its class, errors that point at file:line:column, strict keys, the embedded
 * defaults), the refcounted holder, and YAML to JSON conversion.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "accelfit/config.h"
#include "accelfit/select.h"
#include "config/yamlnode.h"
#include "support/support.h"

/* The 69 instance types the shared EC2 catalog (55) and scripts/catalog-additions.yaml
 * (14) give, with the class each must load as, its on-demand price (-1 when the source
 * has none) and its total accelerator memory in GiB. The shipped catalog also has every
 * other type of tests/fixtures/ec2-instance-types.yaml: see "sources" below. */
static const struct {
    const char *name;
    enum af_class cls;
    double price;
    double accel_gib;
} types[] = {
    {"c5.4xlarge", AF_CLASS_CPU, 0.68, 0},
    {"c5.xlarge", AF_CLASS_CPU, 0.17, 0},
    {"c6i.4xlarge", AF_CLASS_CPU, 0.68, 0},
    {"c6i.xlarge", AF_CLASS_CPU, 0.17, 0},
    {"c7i.4xlarge", AF_CLASS_CPU, 0.714, 0},
    {"g4dn.12xlarge", AF_CLASS_NVIDIA_T4, 3.912, 64},
    {"g4dn.16xlarge", AF_CLASS_NVIDIA_T4, 4.352, 16},
    {"g4dn.2xlarge", AF_CLASS_NVIDIA_T4, 0.752, 16},
    {"g4dn.4xlarge", AF_CLASS_NVIDIA_T4, 1.204, 16},
    {"g4dn.8xlarge", AF_CLASS_NVIDIA_T4, 2.176, 16},
    {"g4dn.metal", AF_CLASS_NVIDIA_T4, 7.824, 128},
    {"g4dn.xlarge", AF_CLASS_NVIDIA_T4, 0.526, 16},
    {"g5.12xlarge", AF_CLASS_NVIDIA_A10G, 5.672, 89.4},
    {"g5.16xlarge", AF_CLASS_NVIDIA_A10G, 4.096, 22.35},
    {"g5.24xlarge", AF_CLASS_NVIDIA_A10G, 8.144, 89.4},
    {"g5.2xlarge", AF_CLASS_NVIDIA_A10G, 1.212, 22.35},
    {"g5.48xlarge", AF_CLASS_NVIDIA_A10G, 16.288, 178.8},
    {"g5.4xlarge", AF_CLASS_NVIDIA_A10G, 1.624, 22.35},
    {"g5.8xlarge", AF_CLASS_NVIDIA_A10G, 2.448, 22.35},
    {"g5.xlarge", AF_CLASS_NVIDIA_A10G, 1.006, 22.35},
    {"g6.12xlarge", AF_CLASS_NVIDIA_L4, 4.6016, 89.4},
    {"g6.16xlarge", AF_CLASS_NVIDIA_L4, 3.3968, 22.35},
    {"g6.24xlarge", AF_CLASS_NVIDIA_L4, 6.6752, 89.4},
    {"g6.2xlarge", AF_CLASS_NVIDIA_L4, 0.9776, 22.35},
    {"g6.48xlarge", AF_CLASS_NVIDIA_L4, 13.3504, 178.8},
    {"g6.4xlarge", AF_CLASS_NVIDIA_L4, 1.3232, 22.35},
    {"g6.8xlarge", AF_CLASS_NVIDIA_L4, 2.0144, 22.35},
    {"g6.xlarge", AF_CLASS_NVIDIA_L4, 0.8048, 22.35},
    {"g6e.12xlarge", AF_CLASS_NVIDIA_L40S, 10.49264, 178.8},
    {"g6e.16xlarge", AF_CLASS_NVIDIA_L40S, 7.57719, 44.7},
    {"g6e.24xlarge", AF_CLASS_NVIDIA_L40S, 15.06559, 178.8},
    {"g6e.2xlarge", AF_CLASS_NVIDIA_L40S, 2.24208, 44.7},
    {"g6e.48xlarge", AF_CLASS_NVIDIA_L40S, 30.13118, 357.6},
    {"g6e.4xlarge", AF_CLASS_NVIDIA_L40S, 3.00424, 44.7},
    {"g6e.8xlarge", AF_CLASS_NVIDIA_L40S, 4.52856, 44.7},
    {"g6e.xlarge", AF_CLASS_NVIDIA_L40S, 1.861, 44.7},
    {"gr6.4xlarge", AF_CLASS_NVIDIA_L4, 1.5392, 22.35},
    {"gr6.8xlarge", AF_CLASS_NVIDIA_L4, 2.4464, 22.35},
    {"inf1.24xlarge", AF_CLASS_INFERENTIA1, 4.721, 128},
    {"inf1.2xlarge", AF_CLASS_INFERENTIA1, 0.362, 8},
    {"inf1.6xlarge", AF_CLASS_INFERENTIA1, 1.18, 32},
    {"inf1.xlarge", AF_CLASS_INFERENTIA1, 0.228, 8},
    {"inf2.24xlarge", AF_CLASS_INFERENTIA2, 6.49063, 192},
    {"inf2.48xlarge", AF_CLASS_INFERENTIA2, 12.98127, 384},
    {"inf2.8xlarge", AF_CLASS_INFERENTIA2, 1.96786, 32},
    {"inf2.xlarge", AF_CLASS_INFERENTIA2, 0.7582, 32},
    {"m5.4xlarge", AF_CLASS_CPU, 0.768, 0},
    {"m5.large", AF_CLASS_CPU, 0.096, 0},
    {"m5.xlarge", AF_CLASS_CPU, 0.192, 0},
    {"m6i.4xlarge", AF_CLASS_CPU, 0.768, 0},
    {"p3.16xlarge", AF_CLASS_NVIDIA_V100, 24.48, 128},
    {"p3.2xlarge", AF_CLASS_NVIDIA_V100, 3.06, 16},
    {"p3.8xlarge", AF_CLASS_NVIDIA_V100, 12.24, 64},
    {"p3dn.24xlarge", AF_CLASS_NVIDIA_V100, 31.212, 256},
    {"p4d.24xlarge", AF_CLASS_NVIDIA_A100, 21.957642, 320},
    {"p4de.24xlarge", AF_CLASS_NVIDIA_A100, 27.44705, 640},
    {"p5.48xlarge", AF_CLASS_NVIDIA_H100, 55.04, 640},
    {"p5.4xlarge", AF_CLASS_NVIDIA_H100, 6.88, 80},
    {"p5e.48xlarge", AF_CLASS_NVIDIA_H200, -1, 1128},
    {"p5en.48xlarge", AF_CLASS_NVIDIA_H200, 63.296, 1128},
    {"p6-b200.48xlarge", AF_CLASS_NVIDIA_B200, 113.9328, 1432.48},
    {"r5.4xlarge", AF_CLASS_CPU, 1.008, 0},
    {"t3.medium", AF_CLASS_CPU, 0.0416, 0},
    {"trn1.2xlarge", AF_CLASS_TRAINIUM1, 1.34375, 32},
    {"trn1.32xlarge", AF_CLASS_TRAINIUM1, 21.5, 512},
    {"trn1n.32xlarge", AF_CLASS_TRAINIUM1, 24.78, 512},
    {"trn2.3xlarge", AF_CLASS_TRAINIUM2, -1, 96},
    {"trn2.48xlarge", AF_CLASS_TRAINIUM2, -1, 1536},
    {"trn2u.48xlarge", AF_CLASS_TRAINIUM2, -1, 1536},
};

/* Types in the shipped catalog: the 1,363 of tests/fixtures/ec2-instance-types.yaml and
 * the five only the shared catalog or the additions give (p3.2xlarge, p3.8xlarge,
 * p3.16xlarge, trn2.3xlarge, trn2u.48xlarge). */
#define N_SOURCE_TYPES 1363
#define N_SHIPPED_TYPES (N_SOURCE_TYPES + 5)

/* Invariants every loaded catalog keeps. */
static void assert_sane_catalog(const struct af_catalog *c)
{
    ck_assert_ptr_nonnull(c);
    ck_assert_ptr_nonnull(c->source);
    for (size_t i = 0; i < c->n_types; i++) {
        const struct af_instance_type *t = &c->types[i];
        ck_assert_ptr_nonnull(t->name);
        ck_assert_ptr_nonnull(t->family);
        ck_assert_int_lt(t->cls, AF_CLASS__COUNT);
        if (t->cls == AF_CLASS_UNKNOWN)   /* `class: unclassified`: always an accelerator */
            ck_assert_ptr_nonnull(t->accel_name);
        else
            ck_assert(af_class_kind(t->cls) == t->accel_kind);
        if (i)
            ck_assert_int_lt(strcmp(c->types[i - 1].name, t->name), 0);
        ck_assert_ptr_eq(af_catalog_find(c, t->name), t);
    }
}

static struct af_catalog *embedded_catalog(void)
{
    struct af_catalog *c = NULL;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_catalog_load_mem(&c, "<embedded>", af_embedded_catalog_yaml,
                                         af_embedded_catalog_yaml_len, &err),
                     0);
    assert_sane_catalog(c);
    return c;
}

START_TEST(test_catalog_every_type_loads_with_its_class)
{
    struct af_catalog *c = embedded_catalog();
    const struct af_instance_type *t = af_catalog_find(c, types[_i].name);

    ck_assert_msg(t != NULL, "%s missing from the catalog", types[_i].name);
    ck_assert_msg(t->cls == types[_i].cls, "%s loads as %s, want %s", types[_i].name,
                  af_class_name(t->cls), af_class_name(types[_i].cls));
    if (types[_i].price < 0)
        ck_assert(t->price_usd_hr < 0);
    else
        ck_assert_double_eq_tol(t->price_usd_hr, types[_i].price, 1e-9);
    ck_assert_double_eq_tol(af_instance_accel_memory_gib(t), types[_i].accel_gib, 1e-6);
    af_catalog_free(c);
}
END_TEST

START_TEST(test_catalog_has_exactly_the_shared_types)
{
    struct af_catalog *c = embedded_catalog();

    ck_assert_uint_eq(c->n_types, N_SHIPPED_TYPES);
    ck_assert_str_eq(c->source, "<embedded>");
    af_catalog_free(c);
}
END_TEST

/*
 * The project's shared catalog (no `class:` keys: classes are derived from the
 * accelerator names) must load and agree with the shipped one type by type.
 * The source catalog is kept as tests/fixtures/ec2-catalog.yaml; the shipped
 * one also has the 14 types scripts/catalog-additions.yaml adds (its two
 * overrides there only append notes, so every shared type's values match) and
 * every other type of tests/fixtures/ec2-instance-types.yaml.
 */
START_TEST(test_shared_catalog_agrees_with_shipped_catalog)
{
    const char *path = af_test_path("tests/fixtures/ec2-catalog.yaml");
    struct af_catalog *shared = NULL, *c = embedded_catalog();
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_catalog_load_file(&shared, path, &err) == 0, "%s:%d:%d: %s", err.file,
                  err.line, err.column, err.text);
    assert_sane_catalog(shared);
    ck_assert_uint_eq(c->n_types, N_SHIPPED_TYPES);
    ck_assert_uint_eq(shared->n_types, 55);
    for (size_t i = 0; i < shared->n_types; i++) {
        const struct af_instance_type *b = &shared->types[i], *a = af_catalog_find(c, b->name);
        ck_assert_msg(a != NULL, "%s missing from the shipped catalog", b->name);
        ck_assert_msg(a->cls == b->cls, "%s: shipped %s, derived %s", a->name,
                      af_class_name(a->cls), af_class_name(b->cls));
        ck_assert_double_eq(a->price_usd_hr, b->price_usd_hr);
        ck_assert_double_eq(a->spot_discount_pct, b->spot_discount_pct);
        ck_assert_double_eq(a->memory_gib, b->memory_gib);
        ck_assert_int_eq(a->vcpus, b->vcpus);
        ck_assert_int_eq(a->neuron_cores, b->neuron_cores);
        ck_assert(a->efa == b->efa);
    }
    af_catalog_free(shared);
    af_catalog_free(c);
}
END_TEST

START_TEST(test_catalog_fields_are_read)
{
    struct af_catalog *c = embedded_catalog();
    const struct af_instance_type *p5 = af_catalog_find(c, "p5.48xlarge");
    const struct af_instance_type *inf2 = af_catalog_find(c, "inf2.48xlarge");
    const struct af_instance_type *m5 = af_catalog_find(c, "m5.large");

    ck_assert_str_eq(p5->family, "p5");
    ck_assert_int_eq(p5->vcpus, 192);
    ck_assert_str_eq(p5->accel_maker, "NVIDIA");
    ck_assert_str_eq(p5->accel_name, "H100");
    ck_assert_int_eq(p5->accel_count, 8);
    ck_assert(p5->efa);
    ck_assert_double_eq(p5->spot_discount_pct, 57);
    ck_assert_double_eq(p5->network_gbps, 3200);
    ck_assert_int_eq(inf2->neuron_cores, 24);
    ck_assert_int_eq(inf2->accel_kind, AF_ACCEL_NEURON);
    ck_assert_ptr_null(m5->accel_name);
    ck_assert_int_eq(m5->accel_count, 0);
    ck_assert(m5->spot_discount_pct < 0);
    af_catalog_free(c);
}
END_TEST

#define TYPE_HEAD "instances:\n  - name: x1.large\n    vcpus: 4\n    memory_gib: 8\n"

static const struct {
    const char *yaml;
    int line;
    int column;
    const char *text;
} bad_catalogs[] = {
    {"instances:\n  - name: [x\n", 3, 1, "malformed YAML"},
    {"instances:\n\tname: x\n", 2, 1, "malformed YAML"},
    {TYPE_HEAD "    class: nvidia-z9\n", 5, 12, "unknown class 'nvidia-z9'"},
    {TYPE_HEAD "    price_on_demand_usd_hr: cheap\n", 5, 29, "must be a number"},
    {TYPE_HEAD "    price_on_demand_usd_hr: '0.5'\n", 5, 29, "must be a number"},
    {TYPE_HEAD "    price_on_demand_usd_h: 0.5\n", 5, 5, "unknown key 'price_on_demand_usd_h'"},
    /* Every number is bounded at load, so no sum or product of them is inf later. */
    {TYPE_HEAD "    price_on_demand_usd_hr: 1e308\n", 5, 29,
     "'price_on_demand_usd_hr' is out of range: it must be between 0 and 1000000, not '1e308'"},
    {TYPE_HEAD "    price_on_demand_usd_hr: -0.5\n", 5, 29, "must be between 0 and 1000000"},
    {TYPE_HEAD "    spot: {discount_pct: -1e300}\n", 5, 26,
     "'discount_pct' is out of range: it must be between 0 and 100"},
    {TYPE_HEAD "    network_gbps_baseline: 1e300\n", 5, 28, "must be between 0 and"},
    {"instances:\n  - name: x1.large\n    vcpus: 4\n    memory_gib: 1e300\n", 4, 17,
     "'memory_gib' is out of range: it must be between 0 and 10000000"},
    {"instances:\n  - vcpus: 4\n    memory_gib: 8\n", 2, 5, "has no 'name'"},
    {TYPE_HEAD "  - name: x1.large\n    vcpus: 2\n    memory_gib: 4\n", 5, 11,
     "duplicate instance type 'x1.large'"},
    {"instances:\n  - name: x1.large\n    vcpus: four\n    memory_gib: 8\n", 3, 12,
     "must be an integer"},
    {TYPE_HEAD "    accelerator: {kind: gpu, name: Quantum9, count: 1, "
               "memory_gib_per_device: 8}\n",
     2, 5, "cannot tell the class"},
    {TYPE_HEAD "    class: nvidia-a100\n", 5, 12, "does not match its accelerator"},
    {"instances: {}\n", 1, 12, "'instances' must be a list"},
    {"kind: Policy\ninstances: []\n", 1, 7, "kind must be 'Catalog'"},
    {"prices_as_of: last July\ninstances: []\n", 1, 15,
     "prices_as_of must be an RFC 3339 time such as 2026-07-20T13:44:30Z, not 'last July'"},
    {"", 0, 0, "empty catalog"},
};

START_TEST(test_catalog_errors_name_line_and_column)
{
    struct af_catalog *c = (struct af_catalog *)1;
    struct af_error err;
    char msg[1024];
    int rc;

    memset(&err, 0, sizeof(err));
    rc = af_catalog_load_mem(&c, "bad.yaml", bad_catalogs[_i].yaml, strlen(bad_catalogs[_i].yaml),
                             &err);
    af_error_format(&err, msg, sizeof(msg));
    ck_assert_int_lt(rc, 0);
    ck_assert_ptr_null(c);
    ck_assert_str_eq(err.file, "bad.yaml");
    ck_assert_msg(strstr(err.text, bad_catalogs[_i].text), "case %d: got '%s'", _i, msg);
    ck_assert_msg(err.line == bad_catalogs[_i].line && err.column == bad_catalogs[_i].column,
                  "case %d: got '%s', want %d:%d", _i, msg, bad_catalogs[_i].line,
                  bad_catalogs[_i].column);
}
END_TEST

START_TEST(test_catalog_missing_file_is_an_error)
{
    struct af_catalog *c = NULL;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_catalog_load_file(&c, "/nonexistent/catalog.yaml", &err), AF_ENOENT);
    ck_assert_ptr_null(c);
    ck_assert_str_eq(err.file, "/nonexistent/catalog.yaml");
}
END_TEST

/* ---- the catalog against its source files -------------------------------------- */

/*
 * The class each GPU or accelerator name of tests/fixtures/ec2-instance-types.yaml (the
 * values of Karpenter's instance-gpu-name and instance-accelerator-name labels) must load
 * as; AF_CLASS_UNKNOWN for `class: unclassified`, an accelerator accelfit has no class
 * for. Written from the vendors' product names, independently of scripts/gen-catalog.py.
 */
static const struct {
    const char *name;
    enum af_class cls;
} source_accels[] = {
    {"t4", AF_CLASS_NVIDIA_T4},           {"t4g", AF_CLASS_NVIDIA_T4},
    {"a10g", AF_CLASS_NVIDIA_A10G},       {"l4", AF_CLASS_NVIDIA_L4},
    {"l40s", AF_CLASS_NVIDIA_L40S},       {"v100", AF_CLASS_NVIDIA_V100},
    {"a100", AF_CLASS_NVIDIA_A100},       {"h100", AF_CLASS_NVIDIA_H100},
    {"h200", AF_CLASS_NVIDIA_H200},       {"b200", AF_CLASS_NVIDIA_B200},
    {"radeon-pro-v520", AF_CLASS_AMD_GPU}, {"inferentia", AF_CLASS_INFERENTIA1},
    {"inferentia2", AF_CLASS_INFERENTIA2}, {"trainium", AF_CLASS_TRAINIUM1},
    {"trainium2", AF_CLASS_TRAINIUM2},    {"b300", AF_CLASS_UNKNOWN},
    {"rtx-pro-4500", AF_CLASS_UNKNOWN},   {"rtx-pro-server-6000", AF_CLASS_UNKNOWN},
    {"qualcomm-ai100", AF_CLASS_UNKNOWN},
};

/* The types the shipped catalog has from the shared catalog or the additions alone. */
static const char *const not_in_source[] = {"p3.16xlarge", "p3.2xlarge", "p3.8xlarge",
                                            "trn2.3xlarge", "trn2u.48xlarge"};

struct source_file {
    struct af__ydoc d;
    char *text;
    struct af_error err;
};

/* Loads a source file of tests/fixtures and returns its top-level mapping `key`. */
static yaml_node_t *source_load(struct source_file *f, const char *relpath, const char *key)
{
    size_t len = 0;
    yaml_node_t *v;

    memset(f, 0, sizeof(*f));
    f->text = af_test_read(relpath, &len);
    ck_assert_ptr_nonnull(f->text);
    ck_assert_msg(af__ydoc_load(&f->d, relpath, f->text, len, &f->err) == 0, "%s:%d: %s", relpath,
                  f->err.line, f->err.text);
    v = af__ymap_get(&f->d, af__ydoc_root(&f->d), key);
    ck_assert_msg(v && v->type == YAML_MAPPING_NODE, "%s: no '%s' mapping", relpath, key);
    return v;
}

static void source_release(struct source_file *f)
{
    af__ydoc_release(&f->d);
    free(f->text);
}

/* The number under `key` of a source mapping; `dflt` when absent. */
static double source_num(struct source_file *f, const yaml_node_t *map, const char *key,
                         double dflt)
{
    const char *s = map ? af__ynode_str(af__ymap_get(&f->d, map, key)) : NULL;
    char *end;
    double v;

    if (!s)
        return dflt;
    v = strtod(s, &end);
    ck_assert_msg(end != s && !*end, "'%s' of a source type is not a number: '%s'", key, s);
    return v;
}

static bool in_list(const char *const *list, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(list[i], name))
            return true;
    return false;
}

/*
 * Every type of tests/fixtures/ec2-instance-types.yaml is in the shipped catalog with its
 * vCPUs, memory, arch, accelerator count (and device memory), baseline network and EFA,
 * in the class its GPU or accelerator names (cpu without one); a fraction of a GPU
 * (count 0) and an accelerator accelfit has no class for load unclassified. Each carries
 * the us-east-1 price of tests/fixtures/ec2-prices.yaml, or none when that table has
 * none. Only the five types above come from elsewhere, and the priced types left out
 * are exactly those the facts file lacks.
 */
START_TEST(test_catalog_has_every_source_type_with_its_facts_and_price)
{
    struct source_file tf, pf;
    yaml_node_t *facts = source_load(&tf, "tests/fixtures/ec2-instance-types.yaml", "types");
    yaml_node_t *regions = source_load(&pf, "tests/fixtures/ec2-prices.yaml", "regions");
    yaml_node_t *prices = af__ymap_get(&pf.d, regions, "us-east-1");
    struct af_catalog *c = embedded_catalog();
    size_t n = 0, n_arm = 0, n_cpu = 0, n_unclassified = 0, n_priced = 0, n_unfacted = 0;

    ck_assert_ptr_nonnull(prices);
    for (yaml_node_pair_t *p = facts->data.mapping.pairs.start; p < facts->data.mapping.pairs.top;
         p++) {
        const char *name = af__ynode_str(af__ydoc_node(&tf.d, p->key));
        yaml_node_t *f = af__ydoc_node(&tf.d, p->value);
        yaml_node_t *gpu = af__ymap_get(&tf.d, f, "gpu");
        yaml_node_t *acc = gpu ? gpu : af__ymap_get(&tf.d, f, "accelerator");
        yaml_node_t *alloc = af__ymap_get(&tf.d, f, "allocatable");
        yaml_node_t *price = af__ymap_get(&pf.d, prices, name);
        const struct af_instance_type *t = af_catalog_find(c, name);
        const char *arch = af__ynode_str(af__ymap_get(&tf.d, f, "arch"));
        enum af_class want = AF_CLASS_CPU;
        double count = source_num(&tf, acc, "count", 0);

        n++;
        ck_assert_msg(t != NULL, "%s of the facts file is missing from the catalog", name);
        ck_assert_int_eq(t->vcpus, (int)source_num(&tf, f, "vcpu", -1));
        ck_assert_msg(t->memory_gib == source_num(&tf, f, "memory_mib", -1) / 1024,
                      "%s: memory %g GiB", name, t->memory_gib);
        ck_assert_msg(t->arch == (!strcmp(arch, "arm64") ? AF_ARCH_ARM64 : AF_ARCH_AMD64),
                      "%s: arch", name);
        n_arm += t->arch == AF_ARCH_ARM64;
        if (acc) {
            const char *an = af__ynode_str(af__ymap_get(&tf.d, acc, "name"));
            size_t i = 0;
            while (i < AF_ARRAY_SIZE(source_accels) && strcmp(source_accels[i].name, an))
                i++;
            ck_assert_msg(i < AF_ARRAY_SIZE(source_accels), "%s: accelerator '%s' not in the test",
                          name, an);
            want = count > 0 ? source_accels[i].cls : AF_CLASS_UNKNOWN;
            ck_assert_ptr_nonnull(t->accel_name);
            if (gpu && count > 0)   /* per GPU, as the facts file gives it, within rounding */
                ck_assert_msg(fabs(t->accel_memory_gib_per_device -
                                   source_num(&tf, gpu, "memory_mib", 0) / 1024) < 0.5,
                              "%s: %g GiB per GPU", name, t->accel_memory_gib_per_device);
        } else {
            ck_assert_ptr_null(t->accel_name);
        }
        ck_assert_msg(t->cls == want, "%s loads as %s, want %s", name, af_class_name(t->cls),
                      af_class_name(want));
        n_cpu += want == AF_CLASS_CPU;
        n_unclassified += want == AF_CLASS_UNKNOWN;
        ck_assert_int_eq(t->accel_count, (int)count);
        ck_assert_msg(fabs(t->network_gbps - source_num(&tf, f, "network_bandwidth_mbps", 0) /
                                                 1000) < 1e-9,
                      "%s: network %g Gbps", name, t->network_gbps);
        ck_assert_msg(t->efa == (af__ymap_get(&tf.d, alloc, "vpc.amazonaws.com/efa") != NULL),
                      "%s: efa", name);
        if (price) {
            ck_assert_msg(t->price_usd_hr == source_num(&pf, prices, name, -1), "%s: $%g/h", name,
                          t->price_usd_hr);
            n_priced++;
        } else {
            ck_assert_msg(t->price_usd_hr < 0, "%s: priced at $%g/h, the table has none", name,
                          t->price_usd_hr);
        }
    }
    ck_assert_uint_eq(n, N_SOURCE_TYPES);
    /* dl2q.24xlarge, g6f x4 and gr6f.4xlarge (fractions of an L4), g7 x6, g7e x6, p6-b300 */
    ck_assert_uint_eq(n_unclassified, 19);
    ck_assert_uint_gt(n_cpu, 1200);
    ck_assert_uint_gt(n_arm, 300);

    /* The catalog has nothing else but the five facts named above. */
    for (size_t i = 0; i < c->n_types; i++) {
        const char *name = c->types[i].name;
        if (!af__ymap_get(&tf.d, facts, name))
            ck_assert_msg(in_list(not_in_source, AF_ARRAY_SIZE(not_in_source), name),
                          "%s is in the catalog but not in the facts file", name);
    }
    ck_assert_uint_eq(c->n_types, N_SOURCE_TYPES + AF_ARRAY_SIZE(not_in_source));

    /* A priced type is left out only when the facts file has nothing to size it with. */
    for (yaml_node_pair_t *p = prices->data.mapping.pairs.start;
         p < prices->data.mapping.pairs.top; p++) {
        const char *name = af__ynode_str(af__ydoc_node(&pf.d, p->key));
        const struct af_instance_type *t = af_catalog_find(c, name);
        if (!t) {
            ck_assert_ptr_null(af__ymap_get(&tf.d, facts, name));
            n_unfacted++;
        } else if (!af__ymap_get(&tf.d, facts, name)) {
            ck_assert_msg(t->price_usd_hr == source_num(&pf, prices, name, -1), "%s: $%g/h", name,
                          t->price_usd_hr);
        }
    }
    ck_assert_uint_eq(n_unfacted, 19);   /* the catalog's header lists them */
    ck_assert_uint_gt(n_priced, 1300);
    af_catalog_free(c);
    source_release(&tf);
    source_release(&pf);
}
END_TEST

/* ---- policy ------------------------------------------------------------------- */

static struct af_policy *embedded_policy(void)
{
    struct af_policy *p = NULL;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_policy_load_mem(&p, "<embedded>", af_embedded_policy_yaml,
                                     af_embedded_policy_yaml_len, &err) == 0,
                  "%d:%d: %s", err.line, err.column, err.text);
    return p;
}

START_TEST(test_embedded_default_config_loads)
{
    struct af_config *cfg = NULL;
    struct af_error err;
    const struct af_policy *p;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&cfg, NULL, NULL, &err), 0);
    ck_assert_int_eq(atomic_load(&cfg->refcnt), 1);
    p = cfg->policy;
    ck_assert_str_eq(p->source, "<embedded>");
    ck_assert_str_eq(cfg->catalog->source, "<embedded>");
    ck_assert_uint_eq(cfg->catalog->n_types, N_SHIPPED_TYPES);
    /* its list prices say their region and when they were read (the price table's header) */
    ck_assert_str_eq(cfg->catalog->price_region, "us-east-1");
    ck_assert_double_eq(cfg->catalog->prices_as_of, af_parse_rfc3339("2026-07-20T13:44:30Z"));
    ck_assert_uint_ge(p->n_rules, 20);
    ck_assert_double_eq_tol(p->w_tier + p->w_util + p->w_cost, 1.0, 1e-12);
    ck_assert_double_eq_tol(p->w_tier, 0.5, 1e-12);
    ck_assert_int_eq(p->strategy, AF_STRATEGY_BINPACK);
    ck_assert_double_eq(p->inference_headroom, 1.2);
    ck_assert_double_eq(p->training_bytes_per_param, 18);
    ck_assert_int_eq(p->inference_precision, AF_PRECISION_FP16);
    ck_assert_int_eq(p->training_precision, AF_PRECISION_BF16);
    ck_assert_double_eq(p->bytes_per_param[AF_PRECISION_INT8], 1);
    ck_assert_int_eq(p->max_instances[AF_WORKLOAD_TRAINING], 64);
    ck_assert_int_eq(p->max_instances[AF_WORKLOAD_BATCH_INFERENCE], 4);
    ck_assert_uint_eq(p->neuron_frameworks,
                      (1u << AF_FRAMEWORK_PYTORCH) | (1u << AF_FRAMEWORK_TENSORFLOW));
    ck_assert(!p->cpu_backfill);
    ck_assert_double_eq(p->default_spot_discount_pct, 60);
    for (size_t i = 0; i < p->n_rules; i++) {
        const struct af_rule *r = &p->rules[i];
        ck_assert_uint_gt(r->n_tiers, 0);
        ck_assert_int_gt(r->line, 0);
        ck_assert_ptr_nonnull(strstr(r->reason, "decision framework"));
        ck_assert_uint_lt(strlen(r->reason), AF_REASON_MAX);
    }
    ck_assert_ptr_eq(af_config_ref(cfg), cfg);
    ck_assert_int_eq(atomic_load(&cfg->refcnt), 2);
    af_config_unref(cfg);
    af_config_unref(cfg);
    af_config_unref(NULL);
}
END_TEST

START_TEST(test_shipped_files_load_from_disk)
{
    struct af_config *cfg = NULL;
    struct af_error err;
    char cat[4096], pol[4096];

    snprintf(cat, sizeof(cat), "%s", af_test_path("policies/catalog.yaml"));
    snprintf(pol, sizeof(pol), "%s", af_test_path("policies/default.yaml"));
    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_config_load(&cfg, cat, pol, &err) == 0, "%s", err.text);
    ck_assert_str_eq(cfg->catalog->source, cat);
    ck_assert_str_eq(cfg->policy->source, pol);
    af_config_unref(cfg);
}
END_TEST

START_TEST(test_policy_rule_fields)
{
    struct af_policy *p = embedded_policy();
    const struct af_rule *r = &p->rules[0];

    ck_assert_str_eq(r->name, "training-large-cost-neuron");
    ck_assert_uint_eq(r->workloads, 1u << AF_WORKLOAD_TRAINING);
    ck_assert_uint_eq(r->objectives, 1u << AF_OBJECTIVE_COST);
    ck_assert(r->frameworks & (1u << AF_FRAMEWORK__COUNT));
    ck_assert(!(r->frameworks & (1u << AF_FRAMEWORK_JAX)));
    ck_assert_int_eq(r->neuron_ready, 1);
    ck_assert_double_eq(r->min_params, 7e9);
    ck_assert(r->max_params < 0);
    ck_assert_int_eq(r->tiers[0].cls, AF_CLASS_TRAINIUM1);
    for (size_t i = 0; i < p->n_rules; i++)
        if (!strcmp(p->rules[i].name, "classical-ml")) {
            const struct af_tier_spec *t = &p->rules[i].tiers[0];
            ck_assert_int_eq(t->cls, AF_CLASS_CPU);
            ck_assert_uint_ge(t->n_families, 3);
            ck_assert_ptr_null(t->families[t->n_families]);
        }
    af_policy_free(p);
    af_policy_free(NULL);
}
END_TEST

#define POL_HEAD "apiVersion: accelfit.io/v1\nkind: Policy\n"
#define POL_RULE(match, tiers)                                                                     \
    "rules:\n  - name: r1\n    match: " match "\n    tiers: " tiers "\n    reason: why\n"

/* Policies that must load, with one field each test checks. */
static const struct {
    const char *yaml;
    double max_params;
    int slo;
} good_policies[] = {
    {POL_HEAD POL_RULE("{workload: [inference], max_params: \"7B\"}", "[nvidia-t4]"), 7e9, 0},
    {POL_HEAD POL_RULE("{workload: inference, max_params: 7e9}", "[nvidia-t4]"), 7e9, 0},
    {POL_HEAD POL_RULE("{max_params: 350M, max_latency_slo_ms: 10}",
                       "[{class: cpu, families: [c5]}]"),
     350e6, 10},
    {POL_HEAD POL_RULE("{}", "[nvidia-t4, trainium1]"), -1, 0},
};

START_TEST(test_policy_accepts_valid_forms)
{
    struct af_policy *p = NULL;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_policy_load_mem(&p, "p.yaml", good_policies[_i].yaml,
                                     strlen(good_policies[_i].yaml), &err) == 0,
                  "case %d: %d:%d: %s", _i, err.line, err.column, err.text);
    ck_assert_uint_eq(p->n_rules, 1);
    ck_assert_double_eq(p->rules[0].max_params, good_policies[_i].max_params);
    ck_assert_int_eq(p->rules[0].max_latency_slo_ms, good_policies[_i].slo);
    /* Sections left out keep the built-in defaults. */
    ck_assert_double_eq(p->training_bytes_per_param, 18);
    ck_assert_int_eq(p->max_instances[AF_WORKLOAD_TRAINING], 64);
    af_policy_free(p);
}
END_TEST

static const struct {
    const char *yaml;
    int line;
    int column;
    const char *text;
} bad_policies[] = {
    {POL_HEAD POL_RULE("{workload: [training]}", "[nvidia-t5]"), 6, 13,
     "unknown class 'nvidia-t5'"},
    {POL_HEAD POL_RULE("{workload: [training]}", "[{class: cpu, familes: [c5]}]"), 6, 26,
     "unknown key 'familes'"},
    {POL_HEAD POL_RULE("{workload: [trainig]}", "[nvidia-t4]"), 5, 24,
     "unknown workload 'trainig'"},
    {POL_HEAD POL_RULE("{objective: [cheap]}", "[nvidia-t4]"), 5, 25, "unknown objective"},
    {POL_HEAD POL_RULE("{framework: [caffe]}", "[nvidia-t4]"), 5, 25, "unknown framework 'caffe'"},
    {POL_HEAD POL_RULE("{neuron_ready: maybe}", "[nvidia-t4]"), 5, 27, "true or false"},
    {POL_HEAD POL_RULE("{min_params: lots}", "[nvidia-t4]"), 5, 25, "parameter count"},
    {POL_HEAD POL_RULE("{min_params: 7B, max_params: 1B}", "[nvidia-t4]"), 5, 41,
     "above 'min_params'"},
    {POL_HEAD POL_RULE("{max_latency_slo_ms: -3}", "[nvidia-t4]"), 5, 33, "between"},
    {POL_HEAD POL_RULE("{workload: [training]}", "[nvidia-t4, nvidia-t4]"), 6, 24, "appears twice"},
    {POL_HEAD POL_RULE("{workload: [training]}", "[]"), 6, 12, "empty 'tiers'"},
    {POL_HEAD POL_RULE("{wokload: [training]}", "[nvidia-t4]"), 5, 13,
     "unknown key 'wokload' in match"},
    {POL_HEAD "scoring:\n  strategy: roundrobin\n" POL_RULE("{}", "[nvidia-t4]"), 4, 13,
     "unknown strategy 'roundrobin'"},
    {POL_HEAD
     "scoring:\n  weights: {tier: -1, utilization: 1, cost: 1}\n" POL_RULE("{}", "[nvidia-t4]"),
     4, 19, "'scoring.weights.tier' must be between 0 and 1000000, not '-1'"},
    {POL_HEAD
     "scoring:\n  weights: {tier: 0, utilization: 0, cost: 0}\n" POL_RULE("{}", "[nvidia-t4]"),
     4, 12, "all zero"},
    {POL_HEAD
     "scoring:\n  weights: {tier: 1e400, utilization: 1, cost: 1}\n" POL_RULE("{}", "[nvidia-t4]"),
     4, 19, "'scoring.weights.tier' must be between 0 and 1000000, not '1e400'"},
    {POL_HEAD
     "scoring:\n  weights: {tier: 1e-400, utilization: 1, cost: 1}\n" POL_RULE("{}", "[nvidia-t4]"),
     4, 19, "'scoring.weights.tier' is out of range: '1e-400' is too close to 0 to be held; write 0"},
    {POL_HEAD "memory:\n  max_instances: {training: 0}\n" POL_RULE("{}", "[nvidia-t4]"), 4, 29,
     "between 1 and"},
    {POL_HEAD "memory:\n  inference_precision: fp4\n" POL_RULE("{}", "[nvidia-t4]"), 4, 24,
     "unknown precision 'fp4'"},
    {POL_HEAD "memory:\n  bytes_per_param: {fp32: 4, fp4: 0.5}\n" POL_RULE("{}", "[nvidia-t4]"), 4,
     30, "unknown precision 'fp4'"},
    {POL_HEAD "neuron:\n  frameworks: [pytorch, unknown]\n" POL_RULE("{}", "[nvidia-t4]"), 4, 25,
     "unknown framework 'unknown'"},
    {POL_HEAD "filter:\n  cpu_backfill: sometimes\n" POL_RULE("{}", "[nvidia-t4]"), 4, 17,
     "true, false or never"},
    {POL_HEAD "prices:\n  default_spot_discount_pct: 120\n" POL_RULE("{}", "[nvidia-t4]"), 4, 30,
     "'prices.default_spot_discount_pct' must be at least 0 and less than 100, not '120'"},
    {POL_HEAD "prices:\n  default_spot_discount_pct: -5\n" POL_RULE("{}", "[nvidia-t4]"), 4, 30,
     "'prices.default_spot_discount_pct' must be at least 0 and less than 100, not '-5'"},
    {POL_HEAD "memory:\n  inference_headroom: 1e400\n" POL_RULE("{}", "[nvidia-t4]"), 4, 23,
     "'memory.inference_headroom' must be between 1 and 1000000, not '1e400'"},
    {POL_HEAD "memory:\n  inference_headroom: 0.5\n" POL_RULE("{}", "[nvidia-t4]"), 4, 23,
     "'memory.inference_headroom' must be between 1 and 1000000, not '0.5'"},
    {POL_HEAD "memory:\n  training_bytes_per_param: 1e400\n" POL_RULE("{}", "[nvidia-t4]"), 4, 29,
     "'memory.training_bytes_per_param' must be greater than 0 and at most 1000000, not '1e400'"},
    {POL_HEAD "memory:\n  training_bytes_per_param: 0\n" POL_RULE("{}", "[nvidia-t4]"), 4, 29,
     "'memory.training_bytes_per_param' must be greater than 0 and at most 1000000, not '0'"},
    {POL_HEAD
     "scoring:\n  weights: {tier: 1e308, utilization: 1, cost: 1}\n" POL_RULE("{}", "[nvidia-t4]"),
     4, 19, "'scoring.weights.tier' must be between 0 and 1000000, not '1e308'"},
    {POL_HEAD "memory:\n  bytes_per_param: {fp32: 1e308}\n" POL_RULE("{}", "[nvidia-t4]"), 4, 27,
     "'memory.bytes_per_param.fp32' must be greater than 0 and at most 1000000, not '1e308'"},
    {POL_HEAD "rollout: {}\n" POL_RULE("{}", "[nvidia-t4]"), 3, 1, "unknown key 'rollout'"},
    {POL_HEAD "rules:\n  - name: a\n    tiers: [cpu]\n    reason: x\n  - name: a\n    tiers: "
              "[cpu]\n    reason: y\n",
     7, 11, "duplicate rule name 'a'"},
    {POL_HEAD "rules:\n  - name: a\n    tiers: [cpu]\n", 4, 5, "has no 'reason'"},
    {POL_HEAD "rules:\n  - match: {}\n    tiers: [cpu]\n    reason: x\n", 4, 5, "has no 'name'"},
    {POL_HEAD "rules: []\n", 3, 8, "at least one rule"},
    {POL_HEAD "memory: {}\n", 1, 1, "has no 'rules'"},
    {"apiVersion: accelfit.io/v2\nkind: Policy\n" POL_RULE("{}", "[cpu]"), 1, 13,
     "apiVersion must be"},
    {"apiVersion: accelfit.io/v1\nkind: Catalog\ninstances: []\n", 2, 7, "kind must be 'Policy'"},
    {POL_HEAD "rules:\n  - name: a\n    tiers: [cpu]\n    reason: x\n  bad indent: 1\n", 7, 3,
     "malformed YAML"},
    {POL_HEAD "scoring: {strategy: binpack, strategy: spread}\n" POL_RULE("{}", "[cpu]"), 3, 30,
     "duplicate key 'strategy'"},
};

START_TEST(test_policy_errors_name_line_and_column)
{
    struct af_policy *p = (struct af_policy *)1;
    struct af_error err;
    char msg[1024];
    int rc;

    memset(&err, 0, sizeof(err));
    rc = af_policy_load_mem(&p, "policy.yaml", bad_policies[_i].yaml, strlen(bad_policies[_i].yaml),
                            &err);
    af_error_format(&err, msg, sizeof(msg));
    ck_assert_msg(rc < 0, "case %d loaded", _i);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err.file, "policy.yaml");
    ck_assert_msg(strstr(err.text, bad_policies[_i].text), "case %d: got '%s'", _i, msg);
    ck_assert_msg(err.line == bad_policies[_i].line && err.column == bad_policies[_i].column,
                  "case %d: got '%s', want %d:%d", _i, msg, bad_policies[_i].line,
                  bad_policies[_i].column);
}
END_TEST

START_TEST(test_config_rejects_family_missing_from_catalog)
{
    static const char pol[] = POL_HEAD POL_RULE("{}", "[{class: cpu, families: [c9z]}]");
    char path[] = "/tmp/af_check_config_XXXXXX";
    struct af_config *cfg = NULL;
    struct af_error err;
    int fd = mkstemp(path);
    FILE *f;

    ck_assert_int_ge(fd, 0);
    f = fdopen(fd, "w");
    fputs(pol, f);
    fclose(f);
    memset(&err, 0, sizeof(err));
    ck_assert_int_lt(af_config_load(&cfg, NULL, path, &err), 0);
    ck_assert_ptr_null(cfg);
    ck_assert_str_eq(err.file, path);
    ck_assert_int_eq(err.line, 4);
    ck_assert_ptr_nonnull(strstr(err.text, "family 'c9z'"));
    unlink(path);
}
END_TEST

/* ---- holder ------------------------------------------------------------------- */

START_TEST(test_holder_swaps_while_readers_keep_the_old_config)
{
    struct af_config *a = NULL, *b = NULL, *held, *now;
    struct af_config_holder h;
    struct af_error err;

    ck_assert_int_eq(af_config_load(&a, NULL, NULL, &err), 0);
    ck_assert_int_eq(af_config_load(&b, NULL, NULL, &err), 0);
    af_config_holder_init(&h, a);
    held = af_config_holder_get(&h);
    ck_assert_ptr_eq(held, a);
    ck_assert_int_eq(atomic_load(&a->refcnt), 2);
    af_config_holder_set(&h, b);
    ck_assert_int_eq(atomic_load(&a->refcnt), 1);
    /* The reader's copy is still whole. */
    ck_assert_uint_eq(held->catalog->n_types, N_SHIPPED_TYPES);
    now = af_config_holder_get(&h);
    ck_assert_ptr_eq(now, b);
    af_config_unref(now);
    af_config_unref(held);
    af_config_holder_destroy(&h);
}
END_TEST

/* ---- YAML to JSON --------------------------------------------------------------- */

static const struct {
    const char *yaml;
    const char *json;
} y2j_cases[] = {
    {"a: 1\nb: '1'\nc: true\nd: null\ne: ~\nf: 1.5\ng: hello\nh:\n",
     "{\"a\":1,\"b\":\"1\",\"c\":true,\"d\":null,\"e\":null,\"f\":1.5,\"g\":\"hello\",\"h\":null}"},
    {"- 1\n- [a, b]\n- {x: y}\n- -2.5e3\n", "[1,[\"a\",\"b\"],{\"x\":\"y\"},-2.5e3]"},
    {"a: 0755\nb: +1\nc: .5\nd: 1.\ne: .inf\nf: 0x1F\ng: 0\n",
     "{\"a\":\"0755\",\"b\":1,\"c\":0.5,\"d\":1,\"e\":\".inf\",\"f\":\"0x1F\",\"g\":0}"},
    {"a: \"true\"\nb: 'null'\nc: False\nd: yes\n",
     "{\"a\":\"true\",\"b\":\"null\",\"c\":false,\"d\":\"yes\"}"},
    {"s: \"x\\ny\\t\\\"q\\\"\"\nu: caf\xc3\xa9\n",
     "{\"s\":\"x\\ny\\t\\\"q\\\"\",\"u\":\"caf\xc3\xa9\"}"},
    {"lit: |\n  line1\n  line2\n", "{\"lit\":\"line1\\nline2\\n\"}"},
    {"a: &x {b: 1}\nc: *x\n", "{\"a\":{\"b\":1},\"c\":{\"b\":1}}"},
    {"a: 1\n---\nb: 2\n",
     "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{\"a\":1},{\"b\":2}]}"},
    {"apiVersion: v1\nkind: Node\nmetadata:\n  name: n1\n  labels:\n    "
     "node.kubernetes.io/instance-type: p4d.24xlarge\nstatus:\n  allocatable:\n    cpu: \"96\"\n"
     "    memory: 1152Gi\n    nvidia.com/gpu: \"8\"\n",
     "{\"apiVersion\":\"v1\",\"kind\":\"Node\",\"metadata\":{\"name\":\"n1\",\"labels\":{\"node."
     "kubernetes.io/instance-type\":\"p4d.24xlarge\"}},\"status\":{\"allocatable\":{\"cpu\":"
     "\"96\",\"memory\":\"1152Gi\",\"nvidia.com/gpu\":\"8\"}}}"},
    {"1: one\n2.5: two\n", "{\"1\":\"one\",\"2.5\":\"two\"}"},
    {"x: 123456789012345678901234567890\n", "{\"x\":1.2345678901234568e+29}"},
    {"", "null"},
    {"# only a comment\n", "null"},
    {"--- 42\n", "42"},
};

START_TEST(test_yaml_to_json_keeps_scalar_types)
{
    struct af_buf out = AF_BUF_INIT(0);
    struct af_error err;
    json_error_t jerr;
    json_t *j;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(
        af_yaml_to_json("t.yaml", y2j_cases[_i].yaml, strlen(y2j_cases[_i].yaml), &out, &err) == 0,
        "case %d: %s", _i, err.text);
    ck_assert_str_eq(out.buf, y2j_cases[_i].json);
    j = json_loads(out.buf, JSON_DECODE_INT_AS_REAL | JSON_DECODE_ANY, &jerr);
    ck_assert_msg(j != NULL, "case %d: not JSON: %s", _i, jerr.text);
    json_decref(j);
    af_buf_release(&out);
}
END_TEST

static const struct {
    const char *yaml;
    int line;
    int column;
    const char *text;
} y2j_errors[] = {
    {"a: [1, 2\n", 2, 1, "malformed YAML"},
    {"a: b: c\n", 1, 5, "malformed YAML"},
    {"? [a, b]\n: c\n", 1, 3, "mapping keys must be scalars"},
    {"a: &x [*x]\n", 0, 0, "nested deeper"},
};

START_TEST(test_yaml_to_json_errors_have_positions)
{
    struct af_buf out = AF_BUF_INIT(0);
    struct af_error err;
    int rc;

    memset(&err, 0, sizeof(err));
    rc = af_yaml_to_json("t.yaml", y2j_errors[_i].yaml, strlen(y2j_errors[_i].yaml), &out, &err);
    ck_assert_int_lt(rc, 0);
    ck_assert_uint_eq(out.len, 0);
    ck_assert_msg(strstr(err.text, y2j_errors[_i].text), "case %d: got '%s'", _i, err.text);
    if (y2j_errors[_i].line) {
        ck_assert_int_eq(err.line, y2j_errors[_i].line);
        ck_assert_int_eq(err.column, y2j_errors[_i].column);
    }
    af_buf_release(&out);
}
END_TEST

START_TEST(test_yaml_to_json_respects_the_buffer_cap)
{
    struct af_buf out = AF_BUF_INIT(16);
    struct af_error err;
    const char *y = "a: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]\n";

    ck_assert_int_eq(af_yaml_to_json("t.yaml", y, strlen(y), &out, &err), AF_ETOOBIG);
    ck_assert_uint_eq(out.len, 0);
    af_buf_release(&out);
}
END_TEST

/*
 * "Billion laughs": nine levels of ten aliases, under 500 bytes of YAML, would expand
 * to 10^9 strings. The conversion counts alias expansions and stops, with the
 * position and the limit, long before memory runs out, even with no cap on `out`.
 */
static const char billion_laughs[] =
    "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    "b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
    "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    "d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"
    "e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]\n"
    "f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]\n"
    "g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]\n"
    "h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]\n"
    "i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]\n";

START_TEST(test_yaml_to_json_stops_billion_laughs)
{
    struct af_buf out = AF_BUF_INIT(0);
    struct af_error err;
    char msg[800];
    uint64_t t0 = af_now_ns();
    int rc;

    memset(&err, 0, sizeof(err));
    rc = af_yaml_to_json("laughs.yaml", billion_laughs, strlen(billion_laughs), &out, &err);
    ck_assert_int_eq(rc, AF_ETOOBIG);
    ck_assert_uint_eq(out.len, 0);
    ck_assert_msg(af_now_ns() - t0 < 2000000000ull, "took %.1f s",
                  (double)(af_now_ns() - t0) / 1e9);
    af_error_format(&err, msg, sizeof(msg));
    ck_assert_msg(strstr(msg, "laughs.yaml:") && err.line > 0 && err.column > 0 &&
                      strstr(msg, "alias expansions"),
                  "got '%s'", msg);
    af_buf_release(&out);
}
END_TEST

/* Aliases under the expansion limit can still make the JSON far bigger than the YAML:
 * the output has a limit of its own, also with no cap on `out`. */
START_TEST(test_yaml_to_json_caps_alias_output)
{
    struct af_buf yaml = AF_BUF_INIT(0), out = AF_BUF_INIT(0);
    struct af_error err;
    char msg[800];
    int rc;

    /* A 64 KiB string, then 5000 aliases of it: 320 MiB of JSON from 100 KiB of YAML. */
    ck_assert_int_eq(af_buf_puts(&yaml, "s: &s \""), 0);
    for (int i = 0; i < 65536; i++)
        ck_assert_int_eq(af_buf_add(&yaml, "x", 1), 0);
    ck_assert_int_eq(af_buf_puts(&yaml, "\"\nt: ["), 0);
    for (int i = 0; i < 5000; i++)
        ck_assert_int_eq(af_buf_puts(&yaml, i ? ", *s" : "*s"), 0);
    ck_assert_int_eq(af_buf_puts(&yaml, "]\n"), 0);

    memset(&err, 0, sizeof(err));
    rc = af_yaml_to_json("big.yaml", yaml.buf, yaml.len, &out, &err);
    ck_assert_int_eq(rc, AF_ETOOBIG);
    ck_assert_uint_eq(out.len, 0);
    af_error_format(&err, msg, sizeof(msg));
    ck_assert_msg(strstr(msg, "big.yaml:") && err.line > 0 && strstr(msg, "JSON output"),
                  "got '%s'", msg);
    af_buf_release(&yaml);
    af_buf_release(&out);
}
END_TEST

/* Few aliases, each copying a big subtree: the nodes copied are capped too (each
 * becomes a json_t when the cluster file is decoded). */
START_TEST(test_yaml_to_json_caps_nodes_copied_by_aliases)
{
    struct af_buf yaml = AF_BUF_INIT(0), out = AF_BUF_INIT(0);
    struct af_error err;
    char msg[800];
    int rc;

    /* A list of 1000 scalars, then 300 aliases of it: 300,000 nodes from 3 KiB. */
    ck_assert_int_eq(af_buf_puts(&yaml, "s: &s ["), 0);
    for (int i = 0; i < 1000; i++)
        ck_assert_int_eq(af_buf_puts(&yaml, i ? ",a" : "a"), 0);
    ck_assert_int_eq(af_buf_puts(&yaml, "]\nt: ["), 0);
    for (int i = 0; i < 300; i++)
        ck_assert_int_eq(af_buf_puts(&yaml, i ? ", *s" : "*s"), 0);
    ck_assert_int_eq(af_buf_puts(&yaml, "]\n"), 0);

    memset(&err, 0, sizeof(err));
    rc = af_yaml_to_json("wide.yaml", yaml.buf, yaml.len, &out, &err);
    ck_assert_int_eq(rc, AF_ETOOBIG);
    ck_assert_uint_eq(out.len, 0);
    af_error_format(&err, msg, sizeof(msg));
    ck_assert_msg(strstr(msg, "wide.yaml:") && err.line > 0 && strstr(msg, "nodes"),
                  "got '%s'", msg);
    af_buf_release(&yaml);
    af_buf_release(&out);
}
END_TEST

/*
 * Numbers that jansson (as the cluster decoder loads JSON) cannot read: an integer past
 * int64 becomes a float, as Kubernetes' YAML reader makes it; a number past double is
 * a string, as the YAML reader leaves it. Either way the output reads back, so one
 * odd number cannot fail a whole cluster file with a position in text nobody wrote.
 */
static const struct {
    const char *yaml;
    const char *json;
} y2j_numbers[] = {
    {"x: 123456789012345678901234567890\n", "{\"x\":1.2345678901234568e+29}"},
    {"x: -9223372036854775809\n", "{\"x\":-9.223372036854776e+18}"},
    {"x: 9223372036854775807\n", "{\"x\":9223372036854775807}"},
    {"x: -9223372036854775808\n", "{\"x\":-9223372036854775808}"},
    {"x: 1e400\n", "{\"x\":\"1e400\"}"},
    {"x: -1.5e999\n", "{\"x\":\"-1.5e999\"}"},
    {"x: 1e-400\n", "{\"x\":1e-400}"},
    {"x: 2.5E+3\n", "{\"x\":2.5E+3}"},
};

START_TEST(test_yaml_to_json_numbers_read_back)
{
    struct af_buf out = AF_BUF_INIT(0);
    struct af_error err;
    json_error_t jerr;
    json_t *j;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_yaml_to_json("t.yaml", y2j_numbers[_i].yaml, strlen(y2j_numbers[_i].yaml),
                                  &out, &err) == 0,
                  "case %d: %s", _i, err.text);
    ck_assert_str_eq(out.buf, y2j_numbers[_i].json);
    j = json_loadb(out.buf, out.len, 0, &jerr);
    ck_assert_msg(j != NULL, "case %d: jansson cannot read %s: %s", _i, out.buf, jerr.text);
    json_decref(j);
    af_buf_release(&out);
}
END_TEST

/*
 * Large policies: the duplicate-key check of every mapping and the
 * duplicate-rule-name check used to compare every pair (a 100,000-key mapping
 * took minutes). These check the results at that size, not the time: the
 * benchmark for that is bench/bench_policy.c.
 */
#define BIG_RULES 20000
#define BIG_KEYS 100000

/* Appends `n` rules, rule-00000 ... (4 lines each; rule i starts on line
 * first_line + 4 i), naming rule `dup_of`'s name again as the last one when
 * `dup_of` >= 0. */
static void big_rules(struct af_buf *b, int n, int dup_of)
{
    for (int i = 0; i < n; i++)
        ck_assert_int_eq(af_buf_printf(b,
                                       "  - name: rule-%05d\n"
                                       "    match: {workload: [inference], min_params: %d}\n"
                                       "    tiers: [nvidia-a10g, nvidia-l4]\n"
                                       "    reason: generated rule %d\n",
                                       i == n - 1 && dup_of >= 0 ? dup_of : i, i + 1, i),
                         0);
}

/* A rule whose match mapping has BIG_KEYS keys k000000 ...; key `dup_at`
 * (when >= 0) repeats key `dup_of`. The first key is on line first_line + 4. */
static void big_mapping_rule(struct af_buf *b, int dup_at, int dup_of)
{
    ck_assert_int_eq(af_buf_puts(b, "  - name: big\n    tiers: [cpu]\n    reason: x\n    match:\n"),
                     0);
    for (int k = 0; k < BIG_KEYS; k++)
        ck_assert_int_eq(af_buf_printf(b, "      k%06d: 1\n", k == dup_at ? dup_of : k), 0);
}

static int load_big(const struct af_buf *b, struct af_policy **p, struct af_error *err)
{
    memset(err, 0, sizeof(*err));
    return af_policy_load_mem(p, "big.yaml", b->buf, b->len, err);
}

/*
 * The policy loader walks what aliases point at once per alias: rules aliasing one long
 * list would be walked list-length times per rule (5,000 rules on a 100,000-item list
 * took 11.6 s per load). Aliases are capped at load as for cluster files: a policy whose
 * aliases copy more than 200,000 nodes, or follow more than 10,000 aliases, is refused
 * with the position of the alias, and one that shares a list by a few aliases loads.
 */
static const struct {
    int list_len, aliases;
    int rc;
    const char *text;
} policy_alias_cases[] = {
    {1000, 300, AF_ETOOBIG, "aliases copy more than 200000 nodes"},
    {1, 10001, AF_ETOOBIG, "more than 10000 alias expansions"},
    {2, 3, 0, NULL},
};

START_TEST(test_policy_aliases_are_capped_at_load)
{
    struct af_buf b = AF_BUF_INIT(0);
    struct af_policy *p = NULL;
    struct af_error err;
    int rc;

    ck_assert_int_eq(af_buf_puts(&b, POL_HEAD "rules:\n  - name: r0\n    match: {}\n"
                                           "    reason: x\n    tiers: &t ["),
                     0);
    for (int i = 0; i < policy_alias_cases[_i].list_len; i++)
        ck_assert_int_eq(af_buf_puts(&b, i % 2 ? ", nvidia-l4" : (i ? ", nvidia-a10g" : "nvidia-a10g")),
                         0);
    ck_assert_int_eq(af_buf_puts(&b, "]\n"), 0);
    for (int i = 1; i <= policy_alias_cases[_i].aliases; i++)
        ck_assert_int_eq(af_buf_printf(&b, "  - {name: r%d, match: {}, reason: x, tiers: *t}\n", i),
                         0);
    rc = load_big(&b, &p, &err);
    ck_assert_msg(rc == policy_alias_cases[_i].rc, "rc %d: %s:%d:%d: %s", rc, err.file, err.line,
                  err.column, err.text);
    if (policy_alias_cases[_i].text) {
        ck_assert_msg(strstr(err.text, policy_alias_cases[_i].text) && err.line > 4,
                      "got %d: '%s'", err.line, err.text);
        ck_assert_ptr_null(p);
    } else {
        ck_assert_uint_eq(p->n_rules, (size_t)policy_alias_cases[_i].aliases + 1);
    }
    af_policy_free(p);
    af_buf_release(&b);
}
END_TEST

START_TEST(test_policy_with_20000_rules_loads)
{
    struct af_buf b = AF_BUF_INIT(0);
    struct af_policy *p = NULL;
    struct af_error err;
    char name[32];

    ck_assert_int_eq(af_buf_puts(&b, POL_HEAD "rules:\n"), 0);
    big_rules(&b, BIG_RULES, -1);
    ck_assert_msg(load_big(&b, &p, &err) == 0, "%s:%d:%d: %s", err.file, err.line, err.column,
                  err.text);
    ck_assert_uint_eq(p->n_rules, BIG_RULES);
    for (int i = 0; i < BIG_RULES; i += 4999) {
        snprintf(name, sizeof(name), "rule-%05d", i);
        ck_assert_str_eq(p->rules[i].name, name);
        ck_assert_int_eq(p->rules[i].line, 4 + 4 * i);
        ck_assert_double_eq(p->rules[i].min_params, i + 1);
    }
    af_policy_free(p);
    af_buf_release(&b);
}
END_TEST

/* The last of 20,000 rules repeats a name: the error points at the repeat and
 * names the line of the first rule with that name. */
static const struct {
    int dup_of;
    const char *text;
} big_dup_rules[] = {
    {0, "duplicate rule name 'rule-00000' (first at line 4)"},
    {12345, "duplicate rule name 'rule-12345' (first at line 49384)"},
    {BIG_RULES - 2, "duplicate rule name 'rule-19998' (first at line 79996)"},
};

START_TEST(test_policy_with_20000_rules_finds_a_repeated_name)
{
    struct af_buf b = AF_BUF_INIT(0);
    struct af_policy *p = (struct af_policy *)1;
    struct af_error err;
    int rc;

    ck_assert_int_eq(af_buf_puts(&b, POL_HEAD "rules:\n"), 0);
    big_rules(&b, BIG_RULES, big_dup_rules[_i].dup_of);
    rc = load_big(&b, &p, &err);
    ck_assert_int_eq(rc, AF_EINVAL);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err.file, "big.yaml");
    ck_assert_str_eq(err.text, big_dup_rules[_i].text);
    ck_assert_int_eq(err.line, 4 + 4 * (BIG_RULES - 1));
    ck_assert_int_eq(err.column, 11);
    af_buf_release(&b);
}
END_TEST

/* 20,000 rules, then one whose match has 100,000 keys. No policy mapping takes
 * free-form keys, so with no repeat the first key is reported as unknown (after
 * every key was checked for repeats); with one repeat, the repeat is reported
 * at its own line and column. */
static const struct {
    int dup_at, dup_of;
    int key_line; /* the line of key `dup_at` (or of the first key), from the big rule */
    const char *text;
} big_dup_keys[] = {
    {-1, 0, 0,
     "unknown key 'k000000' in match (known: workload, objective, framework, neuron_ready, "
     "min_params, max_params, max_latency_slo_ms)"},
    {1, 0, 1, "duplicate key 'k000000'"},
    {BIG_KEYS - 1, 50000, BIG_KEYS - 1, "duplicate key 'k050000'"},
    {60000, 59999, 60000, "duplicate key 'k059999'"},
};

START_TEST(test_policy_mapping_with_100000_keys)
{
    struct af_buf b = AF_BUF_INIT(0);
    struct af_policy *p = (struct af_policy *)1;
    struct af_error err;
    int rc, first_key_line = 4 + 4 * BIG_RULES + 4;

    ck_assert_int_eq(af_buf_puts(&b, POL_HEAD "rules:\n"), 0);
    big_rules(&b, BIG_RULES, -1);
    big_mapping_rule(&b, big_dup_keys[_i].dup_at, big_dup_keys[_i].dup_of);
    rc = load_big(&b, &p, &err);
    ck_assert_int_eq(rc, AF_EINVAL);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(err.text, big_dup_keys[_i].text);
    ck_assert_int_eq(err.line, first_key_line + big_dup_keys[_i].key_line);
    ck_assert_int_eq(err.column, 7);
    af_buf_release(&b);
}
END_TEST

/* Past a few keys the repeat check uses a hash table; the first problem in
 * key order still wins, whether a key that is not a scalar or a repeat. */
static const struct {
    const char *yaml;
    int line, column;
    const char *text;
} wide_mapping_errors[] = {
    {POL_HEAD POL_RULE("{}", "[cpu]") "scoring:\n"
              "  a: 1\n  b: 1\n  c: 1\n  d: 1\n  e: 1\n  f: 1\n  g: 1\n  h: 1\n  i: 1\n"
              "  ? [x]\n  : 1\n  a: 2\n",
     18, 5, "mapping keys must be scalars"},
    {POL_HEAD POL_RULE("{}", "[cpu]") "scoring:\n"
              "  a: 1\n  b: 1\n  c: 1\n  d: 1\n  e: 1\n  f: 1\n  g: 1\n  h: 1\n  i: 1\n"
              "  a: 2\n  ? [x]\n  : 1\n",
     18, 3, "duplicate key 'a'"},
    {POL_HEAD POL_RULE("{}", "[cpu]") "scoring:\n"
              "  a: 1\n  b: 1\n  c: 1\n  d: 1\n  e: 1\n  f: 1\n  g: 1\n  h: 1\n  i: 1\n",
     9, 3, "unknown key 'a' in scoring"},
};

START_TEST(test_policy_wide_mapping_reports_the_first_problem)
{
    struct af_policy *p = (struct af_policy *)1;
    struct af_error err;
    const char *y = wide_mapping_errors[_i].yaml;

    memset(&err, 0, sizeof(err));
    ck_assert_int_lt(af_policy_load_mem(&p, "policy.yaml", y, strlen(y), &err), 0);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(err.text, wide_mapping_errors[_i].text), "case %d: got '%s'", _i,
                  err.text);
    ck_assert_msg(err.line == wide_mapping_errors[_i].line &&
                      err.column == wide_mapping_errors[_i].column,
                  "case %d: got %d:%d '%s'", _i, err.line, err.column, err.text);
}
END_TEST

static Suite *af_config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("catalog");

    tcase_add_loop_test(tc, test_catalog_every_type_loads_with_its_class, 0,
                        (int)AF_ARRAY_SIZE(types));
    tcase_add_test(tc, test_catalog_has_exactly_the_shared_types);
    tcase_add_test(tc, test_shared_catalog_agrees_with_shipped_catalog);
    tcase_add_test(tc, test_catalog_fields_are_read);
    tcase_add_loop_test(tc, test_catalog_errors_name_line_and_column, 0,
                        (int)AF_ARRAY_SIZE(bad_catalogs));
    tcase_add_test(tc, test_catalog_missing_file_is_an_error);
    tcase_add_test(tc, test_catalog_has_every_source_type_with_its_facts_and_price);
    suite_add_tcase(s, tc);

    tc = tcase_create("policy");
    tcase_add_test(tc, test_embedded_default_config_loads);
    tcase_add_test(tc, test_shipped_files_load_from_disk);
    tcase_add_test(tc, test_policy_rule_fields);
    tcase_add_loop_test(tc, test_policy_accepts_valid_forms, 0, (int)AF_ARRAY_SIZE(good_policies));
    tcase_add_loop_test(tc, test_policy_errors_name_line_and_column, 0,
                        (int)AF_ARRAY_SIZE(bad_policies));
    tcase_add_test(tc, test_config_rejects_family_missing_from_catalog);
    tcase_add_test(tc, test_holder_swaps_while_readers_keep_the_old_config);
    tcase_add_test(tc, test_policy_with_20000_rules_loads);
    tcase_add_loop_test(tc, test_policy_aliases_are_capped_at_load, 0,
                        (int)AF_ARRAY_SIZE(policy_alias_cases));
    tcase_add_loop_test(tc, test_policy_with_20000_rules_finds_a_repeated_name, 0,
                        (int)AF_ARRAY_SIZE(big_dup_rules));
    tcase_add_loop_test(tc, test_policy_mapping_with_100000_keys, 0,
                        (int)AF_ARRAY_SIZE(big_dup_keys));
    tcase_add_loop_test(tc, test_policy_wide_mapping_reports_the_first_problem, 0,
                        (int)AF_ARRAY_SIZE(wide_mapping_errors));
    suite_add_tcase(s, tc);

    tc = tcase_create("yaml_to_json");
    tcase_add_loop_test(tc, test_yaml_to_json_keeps_scalar_types, 0, (int)AF_ARRAY_SIZE(y2j_cases));
    tcase_add_loop_test(tc, test_yaml_to_json_errors_have_positions, 0,
                        (int)AF_ARRAY_SIZE(y2j_errors));
    tcase_add_test(tc, test_yaml_to_json_respects_the_buffer_cap);
    tcase_add_test(tc, test_yaml_to_json_stops_billion_laughs);
    tcase_add_test(tc, test_yaml_to_json_caps_alias_output);
    tcase_add_test(tc, test_yaml_to_json_caps_nodes_copied_by_aliases);
    tcase_add_loop_test(tc, test_yaml_to_json_numbers_read_back, 0,
                        (int)AF_ARRAY_SIZE(y2j_numbers));
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_config_suite());
}
