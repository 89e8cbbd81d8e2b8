/* SPDX-License-Identifier: Apache-2.0 */
/*
 * config: the instance catalog and the policy, loaded from YAML (libyaml) into
 * immutable structs, with line/column errors. The shipped files
 * policies/catalog.yaml and policies/default.yaml are compiled into the binary
 * as the defaults, so accelfit runs with no files around.
 *
 * A `struct af_config` bundles one catalog and one policy. It is reference
 * counted so a reload can swap it while requests still hold the old one.
 */
#ifndef AF_CONFIG_H
#define AF_CONFIG_H

#include <pthread.h>

#include "accelfit/model.h"
#include "accelfit/rollout.h"
#include "accelfit/tenant.h"
#include "accelfit/utilization.h"
#include "accelfit/util.h"

/* ---- policy ------------------------------------------------------------------ */

/* One ranked tier of a rule: a class, optionally limited to instance families. */
struct af_tier_spec {
    enum af_class cls;
    char **families;           /* NULL-terminated or NULL = any family of the class */
    size_t n_families;
};

/*
 * A decision rule. A rule matches a profile when every condition it sets
 * holds; the first matching rule (in file order) gives the ranked tiers.
 * Bitmasks are (1u << enum value); 0 means "any".
 */
struct af_rule {
    char *name;
    uint32_t workloads;
    uint32_t objectives;
    uint32_t frameworks;       /* bit AF_FRAMEWORK__COUNT stands for "unknown" */
    double min_params;         /* < 0: no lower bound; bounded rules never match unknown size */
    double max_params;         /* < 0: no upper bound (exclusive) */
    int max_latency_slo_ms;    /* > 0: matches only when the SLO is set and <= this */
    int neuron_ready;          /* -1 any, 0 must be false, 1 must be true */
    struct af_tier_spec *tiers;
    size_t n_tiers;
    /* Strict: the tiers are the only classes a pod the rule matches may use. Otherwise
     * (the default) they are preferences, and every other class the pod's requests and
     * physics allow is a last tier, so no pod waits while a node that fits sits idle. */
    bool strict;
    /* order: price — the tiers go by what the workload pays within an accelerator kind, as
     * objective cost orders every rule; false (order: rule): as listed. */
    bool order_by_price;
    char *reason;              /* why, in plain words (docs/decision-framework.md) */
    int line;                  /* where the rule starts in its file */
};

enum af_strategy { AF_STRATEGY_BINPACK = 0, AF_STRATEGY_SPREAD };

/* Preferences on admission (accelfit/prefer.h, docs/policy.md#preferences): node affinity
 * the webhook writes so that an autoscaler launches the hardware accelfit would choose. */
enum af_prefer_when { AF_PREFER_WHEN_NO_ROOM = 0, AF_PREFER_WHEN_ALWAYS };
enum af_prefer_key { AF_PREFER_KEY_FAMILY = 0, AF_PREFER_KEY_TYPE };

struct af_prefer_policy {
    bool enabled;              /* off by default */
    enum af_prefer_when when;  /* no-room: only when no node filter accepts has room */
    enum af_prefer_key key;    /* the label the terms name: instance family or type */
    bool required;             /* what is known also as required affinity (NotIn) */
    char **namespaces;         /* only pods of these namespaces or tenants; none: every pod */
    size_t n_namespaces;
    char **tenants;
    size_t n_tenants;
};

/*
 * filter.cpu_backfill: may a CPU-only pod (one that requests no accelerator) use an
 * accelerator node? Knowledge narrows, guesses rank: a pod that states its workload
 * (accelfit.io/workload) is known to be CPU work; one that does not is only guessed to be,
 * so by default it passes accelerator nodes (kube-scheduler alone would put it there) and
 * they rank last.
 */
enum af_cpu_backfill {
    AF_CPU_BACKFILL_OFF = 0,   /* false (default): stated CPU work stays off accelerator
                                * nodes; un-annotated pods rank them last */
    AF_CPU_BACKFILL_ON,        /* true: every CPU-only pod may use them, as a last tier */
    AF_CPU_BACKFILL_NEVER,     /* never: no CPU-only pod on them, stated or not */
};

/* How a prepaid node (an ODCR or a Capacity Block) is priced (prices.prepaid). */
enum af_prepaid_mode {
    AF_PREPAID_MARGINAL = 0,   /* at what a pod adds: nothing, the reservation is paid anyway */
    AF_PREPAID_AMORTIZED,      /* at the reservation's rate, as if it were bought by the hour */
};

/*
 * A Savings Plan or negotiated discount on on-demand usage (prices.discounts): `pct` off
 * the on-demand price of the nodes whose family is in `families` or whose class is in
 * `classes`; with neither, of every on-demand node (a Compute Savings Plan). The first
 * that matches a node applies.
 */
struct af_discount {
    char *name;
    double pct;                /* in [0, 100) */
    char **families;
    size_t n_families;
    uint32_t classes;          /* bit (1u << class) */
    int line;
};

struct af_policy {
    char *source;              /* file name or "<embedded>" */
    struct af_rule *rules;
    size_t n_rules;

    /* Memory arithmetic. */
    double bytes_per_param[AF_PRECISION__COUNT];
    enum af_precision inference_precision;   /* default when the profile has none */
    enum af_precision training_precision;
    double inference_headroom;               /* x weights, for activations and KV cache */
    double training_bytes_per_param;         /* weights + gradients + optimizer state */
    int max_instances[AF_WORKLOAD__COUNT];   /* beyond this a class cannot hold the model */

    /* Which frameworks the Neuron SDK supports (bitmask of af_framework). */
    uint32_t neuron_frameworks;

    /* Scoring. Weights are relative; they are normalized to sum to 1. */
    enum af_strategy strategy;
    double w_tier;
    double w_util;
    double w_cost;

    /* Filter. */
    enum af_cpu_backfill cpu_backfill;   /* filter.cpu_backfill */

    /* Prices (docs/pricing.md, src/config/pricing.c). */
    double default_spot_discount_pct;        /* when the catalog has none */
    enum af_prepaid_mode prepaid;            /* prices.prepaid */
    double block_end_margin_s;               /* prices.capacity_block_end_margin */
    double keep_prepaid_whole;               /* prices.keep_prepaid_whole, a fraction */
    struct af_discount *discounts;           /* prices.discounts, in file order */
    size_t n_discounts;

    /* Rollouts (accelfit/rollout.h), in file order: a pod belongs to the first that
     * matches it. */
    struct af_rollout *rollouts;
    size_t n_rollouts;

    /* Tenants (accelfit/tenant.h, src/config/tenant.c): the default tenant is the last. */
    struct af_tenant *tenants;
    size_t n_tenants;
    struct af_tenant_ns *tenant_ns;          /* sorted by namespace */
    size_t n_tenant_ns;
    /* Live utilization from Prometheus (accelfit/utilization.h, docs/utilization.md). */
    struct af_utilization_policy util;
    /* Preferences on admission (accelfit/prefer.h). */
    struct af_prefer_policy prefer;
};

/* ---- loading ------------------------------------------------------------------ */

/* Each returns 0 or a negative AF_E* code with `err` filled (file, line, column). */
int af_catalog_load_file(struct af_catalog **out, const char *path, struct af_error *err) AF_MUST_CHECK;
int af_catalog_load_mem(struct af_catalog **out, const char *name, const char *yaml, size_t len,
                        struct af_error *err) AF_MUST_CHECK;
void af_catalog_free(struct af_catalog *c);   /* NULL is fine */

/* Policies are validated on their own (unknown classes and keys, bad weights);
 * af_config_load also checks every tier's families against the catalog. */
int af_policy_load_file(struct af_policy **out, const char *path, struct af_error *err) AF_MUST_CHECK;
int af_policy_load_mem(struct af_policy **out, const char *name, const char *yaml, size_t len,
                       struct af_error *err) AF_MUST_CHECK;
void af_policy_free(struct af_policy *p);     /* NULL is fine */

/* The embedded defaults (policies/catalog.yaml, policies/default.yaml). Static. */
extern const char af_embedded_catalog_yaml[];
extern const size_t af_embedded_catalog_yaml_len;
extern const char af_embedded_policy_yaml[];
extern const size_t af_embedded_policy_yaml_len;
extern const char af_embedded_demo_cluster_yaml[];
extern const size_t af_embedded_demo_cluster_yaml_len;

/* ---- the bundle ------------------------------------------------------------------ */

struct af_config {
    atomic_int refcnt;
    struct af_catalog *catalog;   /* owned */
    struct af_policy *policy;     /* owned */
    /* Which config this is: 1 when loaded; a reload (accelfit/reload.h) gives the
     * config it swaps in the generation after the current one's. */
    uint64_t generation;
    /* This config among all loaded in the process (1, 2, ...; never reused, unlike its
     * address), so what is kept per config (the service's plan memo) is never taken for
     * another's. 0 for a config not made by the loader. */
    uint64_t serial;
    char policy_sha256[65];       /* lowercase hex SHA-256 of the policy bytes as loaded */
    char catalog_sha256[65];      /* the same for the catalog */
};

/*
 * Loads catalog and policy from the given files, or the embedded defaults when
 * a path is NULL. Returns 0 with *out (refcnt 1) or an error with `err` filled.
 */
int af_config_load(struct af_config **out, const char *catalog_path, const char *policy_path,
                   struct af_error *err) AF_MUST_CHECK;
/*
 * The same from YAML text already read (`policy_name` and `catalog_name` name it in
 * errors and become the sources): af_config_load reads the files and calls this, so
 * the hashes are of exactly the bytes parsed. Returns 0 with *out (refcnt 1,
 * generation 1) or an error with `err` filled.
 */
int af_config_load_mem(struct af_config **out, const char *catalog_name, const char *catalog_yaml,
                       size_t catalog_len, const char *policy_name, const char *policy_yaml,
                       size_t policy_len, struct af_error *err) AF_MUST_CHECK;
/* Lowercase hex SHA-256 of `len` bytes into `hex` (65 bytes with the NUL). Cannot fail. */
void af_sha256_hex(const void *data, size_t len, char hex[65]);
struct af_config *af_config_ref(struct af_config *c);
void af_config_unref(struct af_config *c);    /* NULL is fine */

/*
 * The current config, swappable at run time (hot reload). A reader takes a
 * reference for the length of one request.
 */
struct af_config_holder {
    pthread_mutex_t lock;
    struct af_config *current;    /* protected by ->lock */
};

void af_config_holder_init(struct af_config_holder *h, struct af_config *c);   /* steals c */
void af_config_holder_destroy(struct af_config_holder *h);
struct af_config *af_config_holder_get(struct af_config_holder *h);              /* new ref */
void af_config_holder_set(struct af_config_holder *h, struct af_config *c);     /* steals c */

/*
 * Converts a YAML document (libyaml) to JSON text, keeping scalars that look
 * like numbers, booleans or null as such unless quoted. Used to accept YAML
 * cluster files. A stream of several documents becomes one
 * {"apiVersion":"v1","kind":"List","items":[...]} object; an empty stream
 * becomes null. The JSON is appended to `out` only on success; give `out` a
 * cap, since aliases can expand a small input. Returns 0, AF_EPARSE
 * (malformed YAML, a non-scalar key) or AF_ETOOBIG (the cap, or nesting
 * deeper than 128), with `err` filled (line, column).
 */
int af_yaml_to_json(const char *name, const char *yaml, size_t len, struct af_buf *out,
                    struct af_error *err) AF_MUST_CHECK;
/*
 * Where `path` ("pods[3].requests", "end") is in the first document of `yaml` (YAML or
 * JSON): the line and column (from 1) of the mapping key that names its last step, or of
 * the element for an index. Lets a decoder that works on the JSON tree name line:column
 * in its messages. Returns 0, AF_ENOENT (no such path), AF_EPARSE or AF_EINVAL.
 */
int af_yaml_locate(const char *yaml, size_t len, const char *path, int *line, int *column);

#endif
