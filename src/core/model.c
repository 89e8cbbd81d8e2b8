/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Names and small helpers for the core's value types: hardware classes,
 * resources, workload enums, and the reference-counted node and pod records.
 */
#include "accelfit/model.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "accelfit/placement.h"
#include "accelfit/strtab.h"
#include "accelfit/util.h"
#include "accelfit/banned.h"

/* ---- classes --------------------------------------------------------------- */

static const struct {
    const char *name;
    enum af_accel_kind kind;
    const char *accel;
} classes[] = {
#define XX(id, name, kind, accel) {name, AF_ACCEL_##kind, accel},
    AF_CLASS_MAP(XX)
#undef XX
};

const char *af_class_name(enum af_class c)
{
    if (c < 0 || c >= AF_CLASS__COUNT)
        return "unknown";
    return classes[c].name;
}

enum af_class af_class_parse(const char *s)
{
    if (!s)
        return AF_CLASS_UNKNOWN;
    for (int i = 0; i < AF_CLASS__COUNT; i++)
        if (!strcmp(s, classes[i].name))
            return (enum af_class)i;
    return AF_CLASS_UNKNOWN;
}

enum af_accel_kind af_class_kind(enum af_class c)
{
    if (c < 0 || c >= AF_CLASS__COUNT)
        return AF_ACCEL_NONE;
    return classes[c].kind;
}

const char *af_class_names_list(void)
{
    static const char list[] =
#define XX(id, name, kind, accel) ", " name
        AF_CLASS_MAP(XX)
#undef XX
        ;
    return list + 2;   /* past the first ", " */
}

void af_class_mask_names(uint32_t mask, char *out, size_t n)
{
    size_t used = 0;

    out[0] = '\0';
    for (int c = 0; c < AF_CLASS__COUNT && used < n; c++)
        if (mask & (1u << c))
            used += (size_t)snprintf(out + used, n - used, "%s%s", used ? ", " : "",
                                     af_class_name((enum af_class)c));
}

const char *af_accel_kind_name(enum af_accel_kind k)
{
    switch (k) {
    case AF_ACCEL_GPU:
        return "NVIDIA GPU";
    case AF_ACCEL_NEURON:
        return "AWS Neuron";
    case AF_ACCEL_AMD:
        return "AMD GPU";
    default:
        return "no accelerator";
    }
}

int af_class_neuron_cores_per_device(enum af_class c)
{
    switch (c) {
    case AF_CLASS_INFERENTIA1:
        return 4;
    case AF_CLASS_INFERENTIA2:
    case AF_CLASS_TRAINIUM1:
        return 2;
    case AF_CLASS_TRAINIUM2:
        return 8;
    default:
        return 0;
    }
}

enum af_class af_class_from_instance_family(const char *itype)
{
    /* EC2 families by accelerator (longest prefix first where one is the start of another). */
    static const struct {
        const char *family;
        enum af_class cls;
    } families[] = {
        {"g4dn", AF_CLASS_NVIDIA_T4},     {"g5g", AF_CLASS_NVIDIA_T4},
        {"g5", AF_CLASS_NVIDIA_A10G},     {"g6e", AF_CLASS_NVIDIA_L40S},
        {"g6f", AF_CLASS_NVIDIA_L4},      {"gr6", AF_CLASS_NVIDIA_L4},
        {"g6", AF_CLASS_NVIDIA_L4},       {"g4ad", AF_CLASS_AMD_GPU},
        {"p3dn", AF_CLASS_NVIDIA_V100},   {"p3", AF_CLASS_NVIDIA_V100},
        {"p4d", AF_CLASS_NVIDIA_A100},    {"p4de", AF_CLASS_NVIDIA_A100},
        {"p5e", AF_CLASS_NVIDIA_H200},    {"p5en", AF_CLASS_NVIDIA_H200},
        {"p5", AF_CLASS_NVIDIA_H100},     {"p6-b200", AF_CLASS_NVIDIA_B200},
        {"p6e-gb200", AF_CLASS_NVIDIA_B200},
        {"trn1", AF_CLASS_TRAINIUM1},     {"trn1n", AF_CLASS_TRAINIUM1},
        {"trn2", AF_CLASS_TRAINIUM2},     {"trn2u", AF_CLASS_TRAINIUM2},
        {"inf1", AF_CLASS_INFERENTIA1},   {"inf2", AF_CLASS_INFERENTIA2},
    };
    /* General-purpose, compute- and memory-optimized families: no accelerator. */
    static const char cpu_letters[] = "cmrtxz";
    const char *dot;
    size_t flen;

    if (!itype || !(dot = strchr(itype, '.')) || dot == itype)
        return AF_CLASS_UNKNOWN;
    flen = (size_t)(dot - itype);
    for (size_t i = 0; i < AF_ARRAY_SIZE(families); i++)
        if (strlen(families[i].family) == flen && !strncmp(itype, families[i].family, flen))
            return families[i].cls;
    /* "c7i", "m6g", "r5", "t3a", "x2idn": a CPU letter, a generation digit, then
     * lowercase options. Anything else (a family EC2 adds tomorrow) stays unknown. */
    if (flen >= 2 && strchr(cpu_letters, itype[0]) && isdigit((unsigned char)itype[1])) {
        for (size_t i = 2; i < flen; i++)
            if (!islower((unsigned char)itype[i]) && !isdigit((unsigned char)itype[i]) &&
                itype[i] != '-')
                return AF_CLASS_UNKNOWN;
        return AF_CLASS_CPU;
    }
    return AF_CLASS_UNKNOWN;
}

int af_class_neuron_core_version(enum af_class c)
{
    switch (c) {
    case AF_CLASS_INFERENTIA1:
        return 1;
    case AF_CLASS_INFERENTIA2:
    case AF_CLASS_TRAINIUM1:
        return 2;
    case AF_CLASS_TRAINIUM2:
        return 3;
    default:
        return 0;
    }
}

/* Lower-cases and keeps only letters and digits: "NVIDIA-A100-SXM4" -> "nvidiaa100sxm4". */
static void squash(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; *s && n + 1 < cap; s++)
        if (isalnum((unsigned char)*s))
            out[n++] = (char)tolower((unsigned char)*s);
    out[n] = '\0';
}

enum af_class af_class_from_accel_name(const char *s)
{
    /* Longest, most specific tokens first: "l40s" before "l4", "inferentia2"
     * before "inferentia", "trainium2"/"trn2" before "trainium". */
    static const struct {
        const char *token;
        enum af_class cls;
    } tokens[] = {
        {"inferentia2", AF_CLASS_INFERENTIA2}, {"inferentia1", AF_CLASS_INFERENTIA1},
        {"inferentia", AF_CLASS_INFERENTIA1},  {"inf2", AF_CLASS_INFERENTIA2},
        {"inf1", AF_CLASS_INFERENTIA1},        {"trainium2", AF_CLASS_TRAINIUM2},
        {"trainium1", AF_CLASS_TRAINIUM1},     {"trainium", AF_CLASS_TRAINIUM1},
        {"trn2", AF_CLASS_TRAINIUM2},          {"trn1", AF_CLASS_TRAINIUM1},
        {"l40s", AF_CLASS_NVIDIA_L40S},        {"a10g", AF_CLASS_NVIDIA_A10G},
        {"a100", AF_CLASS_NVIDIA_A100},        {"h100", AF_CLASS_NVIDIA_H100},
        {"h200", AF_CLASS_NVIDIA_H200},        {"v100", AF_CLASS_NVIDIA_V100},
        {"b200", AF_CLASS_NVIDIA_B200},
        {"t4", AF_CLASS_NVIDIA_T4},            {"l4", AF_CLASS_NVIDIA_L4},
    };
    char sq[128];

    if (!s || !*s)
        return AF_CLASS_UNKNOWN;
    squash(s, sq, sizeof(sq));
    if (!strcmp(sq, "cpu") || !strcmp(sq, "none"))
        return AF_CLASS_CPU;
    for (size_t i = 0; i < AF_ARRAY_SIZE(tokens); i++) {
        const char *hit = strstr(sq, tokens[i].token);
        size_t tl = strlen(tokens[i].token);
        if (!hit)
            continue;
        /* "t4" and "l4" must not be the tail of a longer model number ("a10g4"
         * never occurs, but "l40" would contain "l4"): require no digit after. */
        if (isdigit((unsigned char)hit[tl]) && tl <= 2)
            continue;
        return tokens[i].cls;
    }
    return AF_CLASS_UNKNOWN;
}

/* ---- catalog ------------------------------------------------------------------ */

double af_instance_accel_memory_gib(const struct af_instance_type *t)
{
    return t->accel_count * t->accel_memory_gib_per_device;
}

const struct af_instance_type *af_catalog_find(const struct af_catalog *c, const char *name)
{
    size_t lo = 0, hi;

    if (!c || !name)
        return NULL;
    hi = c->n_types;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int cmp = strcmp(name, c->types[mid].name);
        if (!cmp)
            return &c->types[mid];
        if (cmp < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    return NULL;
}

/* ---- resources ------------------------------------------------------------------ */

static const char *res_names[] = {
#define XX(id, name) name,
    AF_RES_MAP(XX)
#undef XX
};

const char *af_res_name(enum af_res r)
{
    return (r >= 0 && r < AF_RES__COUNT) ? res_names[r] : "unknown";
}

int af_res_parse(const char *name)
{
    static const char mig[] = "nvidia.com/mig-";

    for (int i = 0; i < AF_RES__COUNT; i++)
        if (i != AF_RES_MIG && !strcmp(name, res_names[i]))
            return i;
    if (!strncmp(name, mig, sizeof(mig) - 1))
        return AF_RES_MIG;
    return -1;
}

bool af_mig_profile_parse(const char *s, struct af_mig_profile *out)
{
    /* The profile is the last "<g>g.<gb>gb" in the string, case-insensitively. */
    const char *p = s ? s + strlen(s) : NULL;

    while (p && p > s) {
        unsigned long g, gb;
        char *end;
        p--;
        if (!isdigit((unsigned char)*p) || (p > s && isdigit((unsigned char)p[-1])))
            continue;
        g = strtoul(p, &end, 10);
        if (tolower((unsigned char)end[0]) != 'g' || end[1] != '.' ||
            !isdigit((unsigned char)end[2]))
            continue;
        gb = strtoul(end + 2, &end, 10);
        if (tolower((unsigned char)end[0]) != 'g' || tolower((unsigned char)end[1]) != 'b')
            continue;
        if (g < 1 || g > 8 || gb < 1 || gb > 1024)
            return false;
        out->g = (uint16_t)g;
        out->gb = (uint16_t)gb;
        return true;
    }
    return false;
}

bool af_res_fits(const struct af_resources *req, const struct af_resources *alloc,
                 const struct af_resources *used, enum af_res *first_short)
{
    for (int i = 0; i < AF_RES__COUNT; i++) {
        if (i == AF_RES_PODS || req->v[i] <= 0)
            continue;
        /* free = alloc - used without overflow: a usage sum that wrapped (absurd requests)
         * or exceeds the allocatable leaves no room. */
        if (used->v[i] < 0 || used->v[i] > alloc->v[i] || req->v[i] > alloc->v[i] - used->v[i]) {
            if (first_short)
                *first_short = (enum af_res)i;
            return false;
        }
    }
    return true;
}

void af_res_format(enum af_res r, int64_t v, char *out, size_t n)
{
    static const char *const bin[] = {"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    static const char *const dec[] = {"k", "M", "G", "T", "P", "E"};
    const char *sign = v < 0 ? "-" : "";
    uint64_t m = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    int b = -1, d = -1;

    if (r == AF_RES_CPU) {
        /* millicores: whole cores as "4", the rest as "95710m", as kubectl prints them */
        if (m % 1000)
            snprintf(out, n, "%s%llum", sign, (unsigned long long)m);
        else
            snprintf(out, n, "%s%llu", sign, (unsigned long long)(m / 1000));
        return;
    }
    if (r != AF_RES_MEMORY || m == 0) {
        snprintf(out, n, "%s%llu", sign, (unsigned long long)m);
        return;
    }
    /* bytes: the largest binary suffix that divides exactly, else the largest decimal one,
     * else plain bytes; never rounded */
    while (b + 1 < 6 && m % (1ULL << (10 * (b + 2))) == 0)
        b++;
    if (b >= 0) {
        snprintf(out, n, "%s%llu%s", sign, (unsigned long long)(m >> (10 * (b + 1))), bin[b]);
        return;
    }
    for (uint64_t p = 1000; d + 1 < 6 && m % p == 0; p *= 1000)
        d++;
    if (d >= 0) {
        uint64_t p = 1;
        for (int i = 0; i <= d; i++)
            p *= 1000;
        snprintf(out, n, "%s%llu%s", sign, (unsigned long long)(m / p), dec[d]);
        return;
    }
    snprintf(out, n, "%s%llu", sign, (unsigned long long)m);
}

enum af_accel_kind af_res_accel_kind(const struct af_resources *req)
{
    if (req->v[AF_RES_GPU] > 0 || req->v[AF_RES_GPU_SHARED] > 0 || req->v[AF_RES_MIG] > 0)
        return AF_ACCEL_GPU;
    if (req->v[AF_RES_NEURON] > 0 || req->v[AF_RES_NEURONDEVICE] > 0 ||
        req->v[AF_RES_NEURONCORE] > 0)
        return AF_ACCEL_NEURON;
    if (req->v[AF_RES_AMD_GPU] > 0)
        return AF_ACCEL_AMD;
    return AF_ACCEL_NONE;
}

int64_t af_res_devices(const struct af_resources *r)
{
    static const enum af_res devs[] = {AF_RES_GPU, AF_RES_GPU_SHARED, AF_RES_MIG,
                                       AF_RES_NEURON, AF_RES_NEURONDEVICE, AF_RES_AMD_GPU};
    int64_t n = 0;

    for (size_t i = 0; i < AF_ARRAY_SIZE(devs); i++)
        if (r->v[devs[i]] > 0)
            n = n > INT64_MAX - r->v[devs[i]] ? INT64_MAX : n + r->v[devs[i]];
    return n;
}

void af_format_count(double v, char *out, size_t n)
{
    static const struct {
        double scale;
        const char *unit;
    } units[] = {{1e12, "T"}, {1e9, "B"}, {1e6, "M"}, {1e3, "k"}, {1, ""}};
    size_t u = 0;
    double x;
    int decimals;
    char *dot, *end;
    size_t len;

    if (!(v >= 0) || !isfinite(v)) {
        snprintf(out, n, "?");
        return;
    }
    while (u + 1 < AF_ARRAY_SIZE(units) && v < units[u].scale)
        u++;
    x = v / units[u].scale;
    decimals = x < 10 ? 2 : x < 100 ? 1 : 0;
    if (!units[u].unit[0])
        decimals = 0;
    snprintf(out, n, "%.*f", decimals, x);
    /* "1.50" -> "1.5", "7.00" -> "7" */
    if ((dot = strchr(out, '.')) != NULL) {
        end = out + strlen(out);
        while (end > dot + 1 && end[-1] == '0')
            *--end = '\0';
        if (end == dot + 1)
            *dot = '\0';
    }
    len = strlen(out);
    if (len + strlen(units[u].unit) < n)
        snprintf(out + len, n - len, "%s", units[u].unit);
}

/* ---- workload enums ------------------------------------------------------------------ */

static const char *workload_names[] = {
#define XX(id, name) name,
    AF_WORKLOAD_MAP(XX)
#undef XX
};
static const char *objective_names[] = {
#define XX(id, name) name,
    AF_OBJECTIVE_MAP(XX)
#undef XX
};
static const char *framework_names[] = {
#define XX(id, name) name,
    AF_FRAMEWORK_MAP(XX)
#undef XX
};
static const struct {
    const char *name;
    int bytes;
} precisions[] = {
#define XX(id, name, bytes) {name, bytes},
    AF_PRECISION_MAP(XX)
#undef XX
};

static int lookup(const char *const *names, int n, const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < n; i++)
        if (!strcasecmp(s, names[i]))
            return i;
    return -1;
}

const char *af_workload_name(enum af_workload w)
{
    return (w >= 0 && w < AF_WORKLOAD__COUNT) ? workload_names[w] : "unknown";
}

int af_workload_parse(const char *s)
{
    return lookup(workload_names, AF_WORKLOAD__COUNT, s);
}

const char *af_objective_name(enum af_objective o)
{
    return (o >= 0 && o < AF_OBJECTIVE__COUNT) ? objective_names[o] : "unknown";
}

int af_objective_parse(const char *s)
{
    return lookup(objective_names, AF_OBJECTIVE__COUNT, s);
}

const char *af_framework_name(enum af_framework f)
{
    return (f >= 0 && f < AF_FRAMEWORK__COUNT) ? framework_names[f] : "unknown";
}

int af_framework_parse(const char *s)
{
    return lookup(framework_names, AF_FRAMEWORK__COUNT, s);
}

const char *af_precision_name(enum af_precision p)
{
    return (p >= 0 && p < AF_PRECISION__COUNT) ? precisions[p].name : "default";
}

int af_precision_parse(const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < AF_PRECISION__COUNT; i++)
        if (!strcasecmp(s, precisions[i].name))
            return i;
    return -1;
}

int af_precision_bytes(enum af_precision p)
{
    return (p >= 0 && p < AF_PRECISION__COUNT) ? precisions[p].bytes : 0;
}

void af_profile_init(struct af_profile *p)
{
    memset(p, 0, sizeof(*p));
    p->workload = AF_WORKLOAD_UNKNOWN;
    p->objective = AF_OBJECTIVE_BALANCED;
    p->framework = AF_FRAMEWORK_UNKNOWN;
    p->precision = AF_PRECISION_DEFAULT;
}

/* ---- records ---------------------------------------------------------------------- */

static char *packed_dup(const char *packed);

struct af_node_info *af_node_info_new(void)
{
    struct af_node_info *n = af_xcalloc(1, sizeof(*n));
    atomic_init(&n->refcnt, 1);
    n->cls = AF_CLASS_UNKNOWN;
    n->annotated_usd = -1;
    return n;
}

struct af_node_info *af_node_info_copy(const struct af_node_info *n)
{
    struct af_node_info *c = af_xmalloc(sizeof(*c));
    *c = *n;
    atomic_init(&c->refcnt, 1);
    c->name = af_xstrdup(n->name);
    c->instance_type = af_xstrdup(n->instance_type);
    c->family = af_xstrdup(n->family);
    c->node_group = af_xstrdup(n->node_group);
    c->region = af_xstrdup(n->region);
    c->zone = af_xstrdup(n->zone);
    c->labels = packed_dup(n->labels);
    c->reservation_id = af_xstrdup(n->reservation_id);
    c->price_by = af_xstrdup(n->price_by);
    c->dra_driver = af_xstrdup(n->dra_driver);
    return c;
}

struct af_node_info *af_node_info_ref(struct af_node_info *n)
{
    if (n)
        atomic_fetch_add_explicit(&n->refcnt, 1, memory_order_relaxed);
    return n;
}

void af_node_info_unref(struct af_node_info *n)
{
    if (!n || atomic_fetch_sub_explicit(&n->refcnt, 1, memory_order_acq_rel) != 1)
        return;
    af_free(n->name);
    af_free(n->instance_type);
    af_free(n->family);
    af_free(n->node_group);
    af_free(n->region);
    af_free(n->zone);
    af_free(n->labels);
    af_free(n->reservation_id);
    af_free(n->price_by);
    af_free(n->dra_driver);
    af_free(n);
}

const char *af_prepaid_name(enum af_prepaid p)
{
    switch (p) {
    case AF_PREPAID_ODCR: return "odcr";
    case AF_PREPAID_BLOCK: return "capacity-block";
    case AF_PREPAID_RESERVED: return "reserved";
    default: return "";
    }
}

const char *af_node_label(const struct af_node_info *n, const char *key)
{
    return af_packed_get(n ? n->labels : NULL, key);
}

const char *af_pod_label(const struct af_pod_info *p, const char *key)
{
    return af_packed_get(p ? p->labels : NULL, key);
}

/* A copy of a packed "k\0v\0...\0\0" string (NULL stays NULL). */
static char *packed_dup(const char *packed)
{
    const char *k = packed;
    if (!k)
        return NULL;
    while (*k)
        k += strlen(k) + 1, k += strlen(k) + 1;
    {
        size_t len = (size_t)(k - packed) + 1;
        char *c = af_xmalloc(len);
        memcpy(c, packed, len);
        return c;
    }
}


struct af_pod_info *af_pod_info_new(void)
{
    struct af_pod_info *p = af_xcalloc(1, sizeof(*p));
    atomic_init(&p->refcnt, 1);
    return p;
}

struct af_pod_info *af_pod_info_copy(const struct af_pod_info *p)
{
    struct af_pod_info *c = af_xmalloc(sizeof(*c));

    *c = *p;
    atomic_init(&c->refcnt, 1);
    c->ns = af_xstrdup(p->ns);
    c->name = af_xstrdup(p->name);
    c->uid = af_xstrdup(p->uid);
    c->node_name = af_xstrdup(p->node_name);
    c->tenant = af_xstrdup(p->tenant);
    c->owner_kind = af_xstrdup(p->owner_kind);
    c->owner_name = af_xstrdup(p->owner_name);
    c->generate_name = af_xstrdup(p->generate_name);
    c->ann.workload = af_xstrdup(p->ann.workload);
    c->ann.model_params = af_xstrdup(p->ann.model_params);
    c->ann.objective = af_xstrdup(p->ann.objective);
    c->ann.latency_slo_ms = af_xstrdup(p->ann.latency_slo_ms);
    c->ann.framework = af_xstrdup(p->ann.framework);
    c->ann.neuron_ready = af_xstrdup(p->ann.neuron_ready);
    c->ann.precision = af_xstrdup(p->ann.precision);
    c->ann.neuron_core_version = af_xstrdup(p->ann.neuron_core_version);
    c->ann.instances = af_xstrdup(p->ann.instances);
    c->labels = packed_dup(p->labels);
    c->job_name = af_xstrdup(p->job_name);
    c->rollout_side = af_xstrdup(p->rollout_side);
    c->rollout_claim = af_xstrdup(p->rollout_claim);
    c->placement = af_placement_copy(p->placement);
    c->claims = p->n_claims ? af_xcalloc((size_t)p->n_claims, sizeof(*c->claims)) : NULL;
    for (int i = 0; i < p->n_claims; i++) {
        c->claims[i].name = af_xstrdup(p->claims[i].name);
        c->claims[i].claim = af_xstrdup(p->claims[i].claim);
        c->claims[i].tmpl = af_xstrdup(p->claims[i].tmpl);
        c->claims[i].generated = af_xstrdup(p->claims[i].generated);
    }
    c->ext = p->n_ext ? af_xcalloc((size_t)p->n_ext, sizeof(*c->ext)) : NULL;
    for (int i = 0; i < p->n_ext; i++) {
        c->ext[i].name = af_xstrdup(p->ext[i].name);
        c->ext[i].count = p->ext[i].count;
    }
    return c;
}

struct af_pod_info *af_pod_info_ref(struct af_pod_info *p)
{
    if (p)
        atomic_fetch_add_explicit(&p->refcnt, 1, memory_order_relaxed);
    return p;
}

void af_pod_info_unref(struct af_pod_info *p)
{
    if (!p || atomic_fetch_sub_explicit(&p->refcnt, 1, memory_order_acq_rel) != 1)
        return;
    af_free(p->ns);
    af_free(p->name);
    af_free(p->uid);
    af_free(p->node_name);
    af_free(p->tenant);
    af_free(p->owner_kind);
    af_free(p->owner_name);
    af_free(p->generate_name);
    af_free(p->ann.workload);
    af_free(p->ann.model_params);
    af_free(p->ann.objective);
    af_free(p->ann.latency_slo_ms);
    af_free(p->ann.framework);
    af_free(p->ann.neuron_ready);
    af_free(p->ann.precision);
    af_free(p->labels);
    af_free(p->job_name);
    af_free(p->rollout_side);
    af_free(p->rollout_claim);
    af_free(p->ann.neuron_core_version);
    af_free(p->ann.instances);
    af_placement_free(p->placement);
    for (int i = 0; i < p->n_claims; i++) {
        af_free(p->claims[i].name);
        af_free(p->claims[i].claim);
        af_free(p->claims[i].tmpl);
        af_free(p->claims[i].generated);
    }
    af_free(p->claims);
    for (int i = 0; i < p->n_ext; i++)
        af_free(p->ext[i].name);
    af_free(p->ext);
    af_free(p);
}

/* ---- briefs ------------------------------------------------------------------------------ */

_Static_assert(AF_RES__COUNT <= 16, "af_pod_brief.req_mask has 16 bits");

/* The members of af_pod_annotations, in their order (also that of a brief's `ann` mask). */
static const size_t ann_members[] = {
    offsetof(struct af_pod_annotations, workload),
    offsetof(struct af_pod_annotations, model_params),
    offsetof(struct af_pod_annotations, objective),
    offsetof(struct af_pod_annotations, latency_slo_ms),
    offsetof(struct af_pod_annotations, framework),
    offsetof(struct af_pod_annotations, neuron_ready),
    offsetof(struct af_pod_annotations, precision),
    offsetof(struct af_pod_annotations, neuron_core_version),
    offsetof(struct af_pod_annotations, instances),
};
_Static_assert(AF_ARRAY_SIZE(ann_members) == AF_POD_ANNOTATIONS_N &&
                   AF_POD_ANNOTATIONS_N * sizeof(char *) == sizeof(struct af_pod_annotations),
               "every annotation has its place in ann_members");

char **af_pod_annotation_at(struct af_pod_annotations *a, size_t i)
{
    return (char **)(void *)((char *)a + ann_members[i]);
}

const char *af_pod_annotation(const struct af_pod_annotations *a, size_t i)
{
    return *(char *const *)(const void *)((const char *)a + ann_members[i]);
}

/* A field added to af_pod_info is either kept by a brief or makes a pod not plain: say
 * which here (and in af_pod_brief_info), then the size below. */
_Static_assert(sizeof(void *) != 8 || sizeof(struct af_pod_info) == 448,
               "af_pod_info changed: af_pod_info_plain and af_pod_brief_info must know the field");

bool af_pod_info_plain(const struct af_pod_info *p)
{
    static const struct af_resources zero;

    return !p->managed && !p->labels && !p->job_name && !p->rollout_side && !p->rollout_claim &&
           !p->ready && !p->failed && !p->restarts && !p->started_unix && !p->placement &&
           !p->n_claims && !p->claims && !p->mig.g && !p->mig.gb && !p->expected_s &&
           !p->expected_source && !p->expected_bad && !memcmp(&p->dra, &zero, sizeof(zero)) &&
           !p->ext && !p->n_ext && !p->ext_claim;
}

/* The brief's `ann` blob of `a`: NULL when none is set. */
static const char *ann_blob(struct af_strtab *tab, const struct af_pod_annotations *a)
{
    struct af_pod_annotations copy = *a;
    struct af_buf b = AF_BUF_INIT(0);
    unsigned mask = 0;
    const char *out;

    for (size_t i = 0; i < AF_POD_ANNOTATIONS_N; i++)
        if (*af_pod_annotation_at(&copy, i))
            mask |= 1u << i;
    if (!mask)
        return NULL;
    af_assert(!af_buf_add(&b, (char[2]){(char)(mask & 0xff), (char)(mask >> 8)}, 2));
    for (size_t i = 0; i < AF_POD_ANNOTATIONS_N; i++)
        if (*af_pod_annotation_at(&copy, i))
            af_assert(!af_buf_add(&b, *af_pod_annotation_at(&copy, i), strlen(*af_pod_annotation_at(&copy, i)) + 1));
    out = tab ? af_strtab_get_bytes(tab, b.buf, b.len) : af_rcstr_new_bytes(b.buf, b.len);
    af_buf_release(&b);
    return out;
}

static const char *shared(struct af_strtab *tab, const char *s)
{
    return tab ? af_strtab_get(tab, s) : af_rcstr_new(s);
}

/* The 16 bytes of a canonical (lowercase) UUID, "8-4-4-4-12" hex digits; false otherwise. */
static bool uuid_bytes(const char *s, unsigned char out[16])
{
    static const char hex[] = "0123456789abcdef";
    int k = 0;

    if (!s || strlen(s) != 36)
        return false;
    for (int i = 0; i < 36; i++) {
        const char *d;
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return false;
            continue;
        }
        if (!s[i] || !(d = strchr(hex, s[i])))
            return false;
        if (k % 2 == 0)
            out[k / 2] = (unsigned char)((d - hex) << 4);
        else
            out[k / 2] |= (unsigned char)(d - hex);
        k++;
    }
    return true;
}

struct af_pod_brief *af_pod_brief_new(struct af_pod_info *p, struct af_strtab *tab)
{
    size_t n_req = 0, name_len, uid_len, skip = 0;
    unsigned char uuid[16];
    bool bin;
    struct af_pod_brief *b;
    uint16_t mask = 0;
    char *tail;

    if (!p)
        return NULL;
    for (int i = 0; i < AF_RES__COUNT; i++)
        if (p->requests.v[i]) {
            mask |= (uint16_t)(1u << i);
            n_req++;
        }
    name_len = strlen(p->name ? p->name : "") + 1;
    /* a ReplicaSet's or Job's pod is named generateName plus a few characters: keep those */
    if (p->generate_name && *p->generate_name && name_len <= AF_POD_TEXT_MAX &&
        !strncmp(p->name, p->generate_name, strlen(p->generate_name)))
        skip = strlen(p->generate_name);
    bin = uuid_bytes(p->uid, uuid);
    uid_len = bin ? sizeof(uuid) : p->uid ? strlen(p->uid) + 1 : 0;
    b = af_xmalloc(sizeof(*b) + n_req * sizeof(int64_t) + name_len - skip + uid_len);
    atomic_init(&b->refcnt, 1);
    b->req_mask = mask;
    b->terminal = p->terminal;
    b->system = p->system;
    b->managed = p->managed;
    for (int i = 0, k = 0; i < AF_RES__COUNT; i++)
        if (p->requests.v[i])
            b->req[k++] = p->requests.v[i];
    tail = (char *)&b->req[n_req];
    memcpy(tail, (p->name ? p->name : "") + skip, name_len - skip);
    b->name_split = skip > 0;
    b->has_uid = p->uid != NULL;
    b->uid_bin = bin;
    if (p->uid)
        memcpy(tail + name_len - skip, bin ? (const char *)uuid : p->uid, uid_len);
    b->ns = shared(tab, p->ns);
    b->node_name = shared(tab, p->node_name);
    b->tenant = shared(tab, p->tenant);
    b->owner_kind = shared(tab, p->owner_kind);
    b->owner_name = shared(tab, p->owner_name);
    b->generate_name = shared(tab, p->generate_name);
    b->ann = ann_blob(tab, &p->ann);
    b->rv = p->rv;
    if (af_pod_info_plain(p)) {
        b->full = NULL;
        af_pod_info_unref(p);
    } else {
        b->full = p;
    }
    return b;
}

struct af_pod_brief *af_pod_brief_ref(struct af_pod_brief *b)
{
    if (b)
        atomic_fetch_add_explicit(&b->refcnt, 1, memory_order_relaxed);
    return b;
}

void af_pod_brief_unref(struct af_pod_brief *b)
{
    if (!b || atomic_fetch_sub_explicit(&b->refcnt, 1, memory_order_acq_rel) != 1)
        return;
    af_rcstr_unref(b->ns);
    af_rcstr_unref(b->node_name);
    af_rcstr_unref(b->tenant);
    af_rcstr_unref(b->owner_kind);
    af_rcstr_unref(b->owner_name);
    af_rcstr_unref(b->generate_name);
    af_rcstr_unref(b->ann);
    af_pod_info_unref(b->full);
    af_free(b);
}

static const char *brief_tail(const struct af_pod_brief *b)
{
    return (const char *)&b->req[__builtin_popcount(b->req_mask)];
}

const char *af_pod_brief_name(const struct af_pod_brief *b, char *buf)
{
    if (!b->name_split)
        return brief_tail(b);
    snprintf(buf, AF_POD_TEXT_MAX, "%s%s", b->generate_name, brief_tail(b));
    return buf;
}

bool af_pod_brief_name_is(const struct af_pod_brief *b, const char *name)
{
    size_t n;

    if (!name)
        name = "";
    if (!b->name_split)
        return !strcmp(brief_tail(b), name);
    n = strlen(b->generate_name);
    return !strncmp(name, b->generate_name, n) && !strcmp(name + n, brief_tail(b));
}

const char *af_pod_brief_uid(const struct af_pod_brief *b, char *buf)
{
    const char *u = brief_tail(b);
    const unsigned char *x;

    if (!b->has_uid)
        return NULL;
    u += strlen(u) + 1;
    if (!b->uid_bin)
        return u;
    x = (const unsigned char *)u;
    snprintf(buf, AF_POD_TEXT_MAX,
             "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", x[0], x[1],
             x[2], x[3], x[4], x[5], x[6], x[7], x[8], x[9], x[10], x[11], x[12], x[13], x[14],
             x[15]);
    return buf;
}

void af_pod_brief_requests(const struct af_pod_brief *b, struct af_resources *out)
{
    for (int i = 0, k = 0; i < AF_RES__COUNT; i++)
        out->v[i] = b->req_mask & (1u << i) ? b->req[k++] : 0;
}

const struct af_pod_info *af_pod_brief_info(const struct af_pod_brief *b,
                                            struct af_pod_kept *kept)
{
    struct af_pod_info *tmp = &kept->info;

    if (!b)
        return NULL;
    if (b->full)
        return b->full;
    /* a plain pod: every other field of af_pod_info is zero (af_pod_info_plain) */
    memset(tmp, 0, sizeof(*tmp));
    atomic_init(&tmp->refcnt, 1);
    tmp->ns = (char *)b->ns;
    tmp->name = (char *)af_pod_brief_name(b, kept->name);
    tmp->uid = (char *)af_pod_brief_uid(b, kept->uid);
    tmp->node_name = (char *)b->node_name;
    tmp->tenant = (char *)b->tenant;
    tmp->owner_kind = (char *)b->owner_kind;
    tmp->owner_name = (char *)b->owner_name;
    tmp->generate_name = (char *)b->generate_name;
    tmp->terminal = b->terminal;
    tmp->system = b->system;
    tmp->rv = b->rv;
    if (b->ann) {
        const char *v = b->ann + 2;
        unsigned mask = (unsigned char)b->ann[0] | (unsigned)(unsigned char)b->ann[1] << 8;
        for (size_t i = 0; i < AF_POD_ANNOTATIONS_N; i++)
            if (mask & (1u << i)) {
                *af_pod_annotation_at(&tmp->ann, i) = (char *)v;
                v += strlen(v) + 1;
            }
    }
    af_pod_brief_requests(b, &tmp->requests);
    return tmp;
}
