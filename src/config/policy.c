/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loads a policy (policies/default.yaml, or a file given with --policy) into
 * an immutable struct af_policy: the memory arithmetic, which frameworks the
 * Neuron SDK takes, scoring weights, filter switches, price defaults and the
 * ordered decision rules. People write policies by hand, so every key is
 * checked (a typo is an error, not a silent default) and every message points
 * at the line and column of the offending text.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/config.h"
#include "accelfit/select.h"
#include "config/pricing.h"
#include "config/rollout.h"
#include "config/tenant.h"
#include "config/utilization.h"
#include "config/yamlnode.h"
#include "accelfit/banned.h"

/* Bound of the policy's factors (bytes per parameter, headroom, weights): far above any
 * sensible value, so products of them stay finite. */
#define MAX_FACTOR 1e6

static const char *const top_keys[] = {"apiVersion", "kind",   "memory", "neuron",   "scoring",
                                       "filter",     "prices", "rules",  "rollouts", "tenants",
                                       "utilization", "preferences", NULL};
static const char *const memory_keys[] = {"bytes_per_param",
                                          "inference_precision",
                                          "training_precision",
                                          "inference_headroom",
                                          "training_bytes_per_param",
                                          "max_instances",
                                          NULL};
static const char *const neuron_keys[] = {"frameworks", NULL};
static const char *const scoring_keys[] = {"strategy", "weights", NULL};
static const char *const weight_keys[] = {"tier", "utilization", "cost", NULL};
static const char *const filter_keys[] = {"cpu_backfill", NULL};
static const char *const prices_keys[] = {"default_spot_discount_pct", "prepaid",
                                          "capacity_block_end_margin", "keep_prepaid_whole",
                                          "discounts", NULL};
static const char *const prefer_keys[] = {"enabled",    "when",    "key", "required",
                                          "namespaces", "tenants", NULL};
static const char *const rule_keys[] = {"name", "match", "tiers", "strict", "order", "reason",
                                        NULL};
static const char *const match_keys[] = {"workload",           "objective",  "framework",
                                         "neuron_ready",       "min_params", "max_params",
                                         "max_latency_slo_ms", NULL};
static const char *const tier_keys[] = {"class", "families", NULL};

static void rule_release(struct af_rule *r)
{
    af_free(r->name);
    af_free(r->reason);
    for (size_t i = 0; i < r->n_tiers; i++) {
        for (size_t j = 0; j < r->tiers[i].n_families; j++)
            af_free(r->tiers[i].families[j]);
        af_free(r->tiers[i].families);
    }
    af_free(r->tiers);
}

void af_policy_free(struct af_policy *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n_rules; i++)
        rule_release(&p->rules[i]);
    af_free(p->rules);
    af__rollouts_free(p->rollouts, p->n_rollouts);
    af__tenants_free(p);
    af_utilization_policy_release(&p->util);
    for (size_t i = 0; i < p->prefer.n_namespaces; i++)
        af_free(p->prefer.namespaces[i]);
    af_free(p->prefer.namespaces);
    for (size_t i = 0; i < p->prefer.n_tenants; i++)
        af_free(p->prefer.tenants[i]);
    af_free(p->prefer.tenants);
    af__pricing_free(p);
    af_free(p->source);
    af_free(p);
}

static void policy_defaults(struct af_policy *p)
{
    for (int i = 0; i < AF_PRECISION__COUNT; i++)
        p->bytes_per_param[i] = af_precision_bytes((enum af_precision)i);
    p->inference_precision = AF_PRECISION_FP16;
    p->training_precision = AF_PRECISION_BF16;
    p->inference_headroom = 1.2;
    p->training_bytes_per_param = 18;
    p->max_instances[AF_WORKLOAD_TRAINING] = 64;
    p->max_instances[AF_WORKLOAD_INFERENCE] = 1;
    p->max_instances[AF_WORKLOAD_BATCH_INFERENCE] = 4;
    p->max_instances[AF_WORKLOAD_PREPROCESSING] = 1;
    p->max_instances[AF_WORKLOAD_CLASSICAL_ML] = 1;
    p->max_instances[AF_WORKLOAD_DEVELOPMENT] = 1;
    p->neuron_frameworks = (1u << AF_FRAMEWORK_PYTORCH) | (1u << AF_FRAMEWORK_TENSORFLOW);
    p->strategy = AF_STRATEGY_BINPACK;
    p->w_tier = 0.5;
    p->w_util = 0.3;
    p->w_cost = 0.2;
    p->cpu_backfill = AF_CPU_BACKFILL_OFF;
    p->default_spot_discount_pct = 60;
    p->prepaid = AF_PREPAID_MARGINAL;
    p->block_end_margin_s = 1800;
    p->keep_prepaid_whole = 0;
    af_utilization_policy_defaults(&p->util);
}

/* Walks the pairs of mapping `map`, setting `k` (key text) and `v` (value node). */
#define FOR_EACH_PAIR(d, map, pp, k, v)                                                            \
    for (yaml_node_pair_t *pp = (map)->data.mapping.pairs.start;                                   \
         pp < (map)->data.mapping.pairs.top && ((k) = af__ynode_str(af__ydoc_node((d), pp->key)),  \
                                               (v) = af__ydoc_node((d), pp->value), 1);            \
         pp++)

static int parse_precision(struct af__ydoc *d, yaml_node_t *v, const char *what,
                           enum af_precision *out)
{
    const char *s;
    int rc = af__ynode_string(d, v, what, &s), p;

    if (rc)
        return rc;
    p = af_precision_parse(s);
    if (p < 0)
        return af__ydoc_err(d, v, AF_EINVAL,
                            "unknown precision '%s' in '%s' (known: fp32, bf16, fp16, int8, fp8)", s,
                            what);
    *out = (enum af_precision)p;
    return 0;
}

static int positive(struct af__ydoc *d, yaml_node_t *v, const char *what, double *out)
{
    return af__ynode_range(d, v, what, 0, true, MAX_FACTOR, false, out);
}

static int load_memory(struct af__ydoc *d, yaml_node_t *m, struct af_policy *p)
{
    const char *k;
    yaml_node_t *v;
    int rc = af__ymap_expect(d, m, "memory", memory_keys);

    if (rc)
        return rc;
    FOR_EACH_PAIR(d, m, op, k, v)
    {
        if (!strcmp(k, "bytes_per_param")) {
            const char *pk;
            yaml_node_t *pv;
            rc = af__ynode_expect(d, v, YAML_MAPPING_NODE, "memory.bytes_per_param");
            if (!rc)
                rc = af__ymap_check_dups(d, v);
            if (rc)
                return rc;
            FOR_EACH_PAIR(d, v, ip, pk, pv)
            {
                int prec = af_precision_parse(pk);
                if (prec < 0)
                    return af__ydoc_err(d, af__ydoc_node(d, ip->key), AF_EINVAL,
                                        "unknown precision '%s' in memory.bytes_per_param "
                                        "(known: fp32, bf16, fp16, int8, fp8)",
                                        pk);
                char path[80];
                snprintf(path, sizeof(path), "memory.bytes_per_param.%s", pk);
                rc = positive(d, pv, path, &p->bytes_per_param[prec]);
                if (rc)
                    return rc;
            }
        } else if (!strcmp(k, "inference_precision")) {
            rc = parse_precision(d, v, "memory.inference_precision", &p->inference_precision);
        } else if (!strcmp(k, "training_precision")) {
            rc = parse_precision(d, v, "memory.training_precision", &p->training_precision);
        } else if (!strcmp(k, "inference_headroom")) {
            rc = af__ynode_range(d, v, "memory.inference_headroom", 1, false, MAX_FACTOR,
                                 false, &p->inference_headroom);   /* it multiplies */
        } else if (!strcmp(k, "training_bytes_per_param")) {
            rc = positive(d, v, "memory.training_bytes_per_param", &p->training_bytes_per_param);
        } else if (!strcmp(k, "max_instances")) {
            const char *wk;
            yaml_node_t *wv;
            rc = af__ynode_expect(d, v, YAML_MAPPING_NODE, "memory.max_instances");
            if (!rc)
                rc = af__ymap_check_dups(d, v);
            if (rc)
                return rc;
            FOR_EACH_PAIR(d, v, ip, wk, wv)
            {
                int w = af_workload_parse(wk);
                if (w < 0)
                    return af__ydoc_err(d, af__ydoc_node(d, ip->key), AF_EINVAL,
                                        "unknown workload '%s' in memory.max_instances (known: "
                                        "training, inference, batch-inference, preprocessing, "
                                        "classical-ml, development)",
                                        wk);
                rc = af__ynode_int(d, wv, wk, 1, 100000, &p->max_instances[w]);
                if (rc)
                    return rc;
            }
        }
        if (rc)
            return rc;
    }
    return 0;
}

/* A framework list: names, plus "unknown" when `allow_unknown`. */
static int parse_frameworks(struct af__ydoc *d, yaml_node_t *v, const char *what,
                            bool allow_unknown, uint32_t *out)
{
    uint32_t mask = 0;
    yaml_node_item_t *it;
    int rc;

    if (v->type != YAML_SEQUENCE_NODE && v->type != YAML_SCALAR_NODE)
        return af__ynode_expect(d, v, YAML_SEQUENCE_NODE, what);
    if (v->type == YAML_SCALAR_NODE) {
        const char *s;
        int f;
        rc = af__ynode_string(d, v, what, &s);
        if (rc)
            return rc;
        f = af_framework_parse(s);
        if (f < 0 && allow_unknown && !strcmp(s, "unknown"))
            f = AF_FRAMEWORK__COUNT;
        if (f < 0)
            return af__ydoc_err(d, v, AF_EINVAL,
                                "unknown framework '%s' in '%s' (known: pytorch, tensorflow, "
                                "jax, other%s)",
                                s, what, allow_unknown ? ", unknown" : "");
        *out = 1u << f;
        return 0;
    }
    for (it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
        yaml_node_t *e = af__ydoc_node(d, *it);
        const char *s;
        int f;
        rc = af__ynode_string(d, e, what, &s);
        if (rc)
            return rc;
        f = af_framework_parse(s);
        if (f < 0 && allow_unknown && !strcmp(s, "unknown"))
            f = AF_FRAMEWORK__COUNT;
        if (f < 0)
            return af__ydoc_err(d, e, AF_EINVAL,
                                "unknown framework '%s' in '%s' (known: pytorch, tensorflow, "
                                "jax, other%s)",
                                s, what, allow_unknown ? ", unknown" : "");
        mask |= 1u << f;
    }
    if (!mask)
        return af__ydoc_err(d, v, AF_EINVAL, "'%s' must not be empty", what);
    *out = mask;
    return 0;
}

/* A workload or objective list (or one name) into a bitmask. */
static int parse_names(struct af__ydoc *d, yaml_node_t *v, const char *what,
                       int (*parse)(const char *), const char *known, uint32_t *out)
{
    uint32_t mask = 0;
    yaml_node_t *one[1];
    yaml_node_t **items = one;
    size_t n = 0;

    if (v->type == YAML_SCALAR_NODE) {
        one[0] = v;
        n = 1;
    } else if (v->type == YAML_SEQUENCE_NODE) {
        n = (size_t)(v->data.sequence.items.top - v->data.sequence.items.start);
        items = NULL;
    } else {
        return af__ynode_expect(d, v, YAML_SEQUENCE_NODE, what);
    }
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *e = items ? items[i] : af__ydoc_node(d, v->data.sequence.items.start[i]);
        const char *s;
        int x, rc = af__ynode_string(d, e, what, &s);
        if (rc)
            return rc;
        x = parse(s);
        if (x < 0)
            return af__ydoc_err(d, e, AF_EINVAL, "unknown %s '%s' (known: %s)", what, s, known);
        mask |= 1u << x;
    }
    if (!mask)
        return af__ydoc_err(d, v, AF_EINVAL, "'%s' must not be empty", what);
    *out = mask;
    return 0;
}

/* A parameter count: 7e9, 7000000000, "7B", 350M. */
static int parse_params(struct af__ydoc *d, yaml_node_t *v, const char *what, double *out)
{
    const char *s = af__ynode_str(v);

    if (!s || af__ynode_is_null(v))
        return af__ydoc_err(d, v, AF_ETYPE, "'%s' must be a parameter count (7e9 or \"7B\")", what);
    if (af_parse_count(s, out) != 0 || !(*out > 0))
        return af__ydoc_err(d, v, AF_EINVAL,
                            "'%s' must be a positive parameter count (7e9, 7000000000 or "
                            "\"7B\"), not '%s'",
                            what, s);
    return 0;
}

static int load_match(struct af__ydoc *d, yaml_node_t *m, struct af_rule *r)
{
    const char *k;
    yaml_node_t *v;
    int rc = af__ymap_expect(d, m, "match", match_keys);

    if (rc)
        return rc;
    FOR_EACH_PAIR(d, m, op, k, v)
    {
        if (!strcmp(k, "workload"))
            rc = parse_names(d, v, "workload", af_workload_parse,
                             "training, inference, batch-inference, preprocessing, "
                             "classical-ml, development",
                             &r->workloads);
        else if (!strcmp(k, "objective"))
            rc = parse_names(d, v, "objective", af_objective_parse,
                             "balanced, cost, performance, latency", &r->objectives);
        else if (!strcmp(k, "framework"))
            rc = parse_frameworks(d, v, "match.framework", true, &r->frameworks);
        else if (!strcmp(k, "neuron_ready")) {
            bool b = false;
            rc = af__ynode_bool(d, v, "match.neuron_ready", &b);
            if (!rc)
                r->neuron_ready = b ? 1 : 0;
        } else if (!strcmp(k, "min_params"))
            rc = parse_params(d, v, "match.min_params", &r->min_params);
        else if (!strcmp(k, "max_params"))
            rc = parse_params(d, v, "match.max_params", &r->max_params);
        else if (!strcmp(k, "max_latency_slo_ms"))
            rc = af__ynode_int(d, v, "match.max_latency_slo_ms", 1, 86400000,
                               &r->max_latency_slo_ms);
        if (rc)
            return rc;
    }
    if (r->min_params >= 0 && r->max_params >= 0 && r->max_params <= r->min_params)
        return af__ydoc_err(d, af__ymap_get(d, m, "max_params"), AF_EINVAL,
                            "'max_params' must be above 'min_params' (the bound is exclusive)");
    return 0;
}

static int load_tier(struct af__ydoc *d, yaml_node_t *n, struct af_tier_spec *t)
{
    const char *s;
    yaml_node_t *cn = n, *fam;
    int rc;

    t->cls = AF_CLASS_UNKNOWN;
    if (n->type == YAML_MAPPING_NODE) {
        rc = af__ymap_check_keys(d, n, "a tier", tier_keys);
        if (rc)
            return rc;
        cn = af__ymap_get(d, n, "class");
        if (!cn)
            return af__ydoc_err(d, n, AF_EINVAL, "tier has no 'class'");
    }
    rc = af__ynode_string(d, cn, "tiers[]", &s);
    if (rc)
        return rc;
    t->cls = af_class_parse(s);
    if (t->cls == AF_CLASS_UNKNOWN)
        return af__ydoc_err(d, cn, AF_EINVAL,
                            "unknown class '%s' in tiers (known: %s)", s,
                            af_class_names_list());
    fam = n->type == YAML_MAPPING_NODE ? af__ymap_get(d, n, "families") : NULL;
    if (!fam)
        return 0;
    rc = af__ynode_expect(d, fam, YAML_SEQUENCE_NODE, "families");
    if (rc)
        return rc;
    t->n_families = (size_t)(fam->data.sequence.items.top - fam->data.sequence.items.start);
    if (!t->n_families)
        return af__ydoc_err(d, fam, AF_EINVAL,
                            "'families' must not be empty (leave it out "
                            "to allow every family of the class)");
    t->families = af_xcalloc(t->n_families + 1, sizeof(char *));
    for (size_t i = 0; i < t->n_families; i++) {
        yaml_node_t *e = af__ydoc_node(d, fam->data.sequence.items.start[i]);
        rc = af__ynode_string(d, e, "families[]", &s);
        if (rc)
            return rc;
        if (!*s || strchr(s, '.'))
            return af__ydoc_err(d, e, AF_EINVAL,
                                "'%s' is not an instance family (write c6i, not c6i.xlarge)", s);
        t->families[i] = af_xstrdup(s);
    }
    return 0;
}

static int load_rule(struct af__ydoc *d, yaml_node_t *n, struct af_rule *r)
{
    yaml_node_t *v, *tiers;
    const char *s;
    int rc;

    r->min_params = -1;
    r->max_params = -1;
    r->neuron_ready = -1;
    r->line = (int)n->start_mark.line + 1;
    rc = af__ymap_expect(d, n, "a rule", rule_keys);
    if (rc)
        return rc;
    v = af__ymap_get(d, n, "name");
    if (!v)
        return af__ydoc_err(d, n, AF_EINVAL, "rule has no 'name'");
    rc = af__ynode_string(d, v, "name", &s);
    if (rc)
        return rc;
    if (!*s)
        return af__ydoc_err(d, v, AF_EINVAL, "rule 'name' must not be empty");
    r->name = af_xstrdup(s);

    v = af__ymap_get(d, n, "match");
    if (v) {
        rc = load_match(d, v, r);
        if (rc)
            return rc;
    }

    tiers = af__ymap_get(d, n, "tiers");
    if (!tiers)
        return af__ydoc_err(d, n, AF_EINVAL, "rule '%s' has no 'tiers'", r->name);
    rc = af__ynode_expect(d, tiers, YAML_SEQUENCE_NODE, "tiers");
    if (rc)
        return rc;
    r->n_tiers = 0;
    {
        size_t n_items =
            (size_t)(tiers->data.sequence.items.top - tiers->data.sequence.items.start);
        if (!n_items)
            return af__ydoc_err(d, tiers, AF_EINVAL, "rule '%s' has an empty 'tiers' list",
                                r->name);
        if (n_items > AF_CLASS__COUNT)
            return af__ydoc_err(d, tiers, AF_EINVAL, "rule '%s' has more tiers than classes",
                                r->name);
        r->tiers = af_xcalloc(n_items, sizeof(r->tiers[0]));
        for (size_t i = 0; i < n_items; i++) {
            yaml_node_t *e = af__ydoc_node(d, tiers->data.sequence.items.start[i]);
            r->n_tiers++;
            rc = load_tier(d, e, &r->tiers[i]);
            if (rc)
                return rc;
            for (size_t j = 0; j < i; j++)
                if (r->tiers[j].cls == r->tiers[i].cls)
                    return af__ydoc_err(d, e, AF_EINVAL,
                                        "class '%s' appears twice in the tiers of rule '%s' "
                                        "(list every family in one tier)",
                                        af_class_name(r->tiers[i].cls), r->name);
        }
    }

    v = af__ymap_get(d, n, "strict");
    if (v) {
        rc = af__ynode_bool(d, v, "strict", &r->strict);
        if (rc)
            return rc;
    }

    v = af__ymap_get(d, n, "order");
    if (v) {
        rc = af__ynode_string(d, v, "order", &s);
        if (rc)
            return rc;
        if (strcmp(s, "rule") && strcmp(s, "price"))
            return af__ydoc_err(d, v, AF_EINVAL,
                                "rules[].order of rule '%s' is '%s'; use rule (as listed) or "
                                "price (what the workload pays, cheapest first)",
                                r->name, s);
        r->order_by_price = !strcmp(s, "price");
    }

    v = af__ymap_get(d, n, "reason");
    if (!v)
        return af__ydoc_err(d, n, AF_EINVAL, "rule '%s' has no 'reason'", r->name);
    rc = af__ynode_string(d, v, "reason", &s);
    if (rc)
        return rc;
    if (!*s)
        return af__ydoc_err(d, v, AF_EINVAL, "rule '%s' has an empty 'reason'", r->name);
    if (strlen(s) >= AF_REASON_MAX)
        return af__ydoc_err(d, v, AF_EINVAL,
                            "the reason of rule '%s' is %zu characters; keep "
                            "it under %d",
                            r->name, strlen(s), AF_REASON_MAX);
    r->reason = af_xstrdup(s);
    return 0;
}

static int load_rules(struct af__ydoc *d, yaml_node_t *list, struct af_policy *p)
{
    struct af__strset names;
    size_t n_items, first;
    int rc = af__ynode_expect(d, list, YAML_SEQUENCE_NODE, "rules");

    if (rc)
        return rc;
    n_items = (size_t)(list->data.sequence.items.top - list->data.sequence.items.start);
    if (!n_items)
        return af__ydoc_err(d, list, AF_EINVAL, "'rules' must list at least one rule");
    p->rules = af_xcalloc(n_items, sizeof(p->rules[0]));
    /* Rule name -> index of the first rule with it; names are borrowed from p->rules. */
    af__strset_init(&names, n_items);
    for (size_t i = 0; i < n_items; i++) {
        yaml_node_t *e = af__ydoc_node(d, list->data.sequence.items.start[i]);
        p->n_rules++;
        rc = load_rule(d, e, &p->rules[i]);
        if (rc)
            break;
        if (!af__strset_add(&names, p->rules[i].name, i, &first)) {
            rc = af__ydoc_err(d, af__ymap_get(d, e, "name"), AF_EINVAL,
                              "duplicate rule name '%s' (first at line %d)", p->rules[i].name,
                              p->rules[first].line);
            break;
        }
    }
    af__strset_release(&names);
    return rc;
}

static int load_scoring(struct af__ydoc *d, yaml_node_t *m, struct af_policy *p)
{
    yaml_node_t *v;
    const char *s;
    int rc = af__ymap_expect(d, m, "scoring", scoring_keys);

    if (rc)
        return rc;
    v = af__ymap_get(d, m, "strategy");
    if (v) {
        rc = af__ynode_string(d, v, "scoring.strategy", &s);
        if (rc)
            return rc;
        if (!strcmp(s, "binpack"))
            p->strategy = AF_STRATEGY_BINPACK;
        else if (!strcmp(s, "spread"))
            p->strategy = AF_STRATEGY_SPREAD;
        else
            return af__ydoc_err(d, v, AF_EINVAL, "unknown strategy '%s' (known: binpack, spread)",
                                s);
    }
    v = af__ymap_get(d, m, "weights");
    if (v) {
        yaml_node_t *w;
        double sum;
        rc = af__ymap_expect(d, v, "scoring.weights", weight_keys);
        if (rc)
            return rc;
        struct {
            const char *key;
            double *dst;
        } ws[] = {{"tier", &p->w_tier}, {"utilization", &p->w_util}, {"cost", &p->w_cost}};
        for (size_t i = 0; i < AF_ARRAY_SIZE(ws); i++) {
            w = af__ymap_get(d, v, ws[i].key);
            if (!w) {
                *ws[i].dst = 0;
                continue;
            }
            char path[64];
            snprintf(path, sizeof(path), "scoring.weights.%s", ws[i].key);
            rc = af__ynode_range(d, w, path, 0, false, MAX_FACTOR, false, ws[i].dst);
            if (rc)
                return rc;
        }
        sum = p->w_tier + p->w_util + p->w_cost;
        if (!(sum > 0))
            return af__ydoc_err(d, v, AF_EINVAL,
                                "scoring weights are all zero; give at least one a positive "
                                "value");
    }
    return 0;
}

/* A list of names (namespaces or tenants) of the preferences section. */
static int load_names(struct af__ydoc *d, yaml_node_t *v, const char *what, char ***out,
                      size_t *n_out)
{
    size_t n;
    int rc = af__ynode_expect(d, v, YAML_SEQUENCE_NODE, what);

    if (rc)
        return rc;
    n = af__yseq_len(v);
    *out = af_xcalloc(n + 1, sizeof(**out));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *e = af__ydoc_node(d, v->data.sequence.items.start[i]);
        const char *s;
        rc = af__ynode_string(d, e, what, &s);
        if (rc)
            return rc;
        if (!af_k8s_dns_label(s, strlen(s)))
            return af__ydoc_err(d, e, AF_EINVAL,
                                "'%s' in %s is not a name (lowercase letters, digits and '-', at "
                                "most 63 characters)",
                                s, what);
        (*out)[(*n_out)++] = af_xstrdup(s);
    }
    return 0;
}

/* preferences: (accelfit/prefer.h, docs/policy.md#preferences). After the tenants. */
static int load_prefer(struct af__ydoc *d, yaml_node_t *v, struct af_policy *p)
{
    struct af_prefer_policy *pr = &p->prefer;
    yaml_node_t *x;
    const char *s;
    int rc = af__ymap_expect(d, v, "preferences", prefer_keys);

    if (rc)
        return rc;
    x = af__ymap_get(d, v, "enabled");
    rc = x ? af__ynode_bool(d, x, "preferences.enabled", &pr->enabled) : 0;
    if (rc)
        return rc;
    x = af__ymap_get(d, v, "required");
    rc = x ? af__ynode_bool(d, x, "preferences.required", &pr->required) : 0;
    if (rc)
        return rc;
    x = af__ymap_get(d, v, "when");
    if (x) {
        rc = af__ynode_string(d, x, "preferences.when", &s);
        if (rc)
            return rc;
        if (!strcmp(s, "no-room"))
            pr->when = AF_PREFER_WHEN_NO_ROOM;
        else if (!strcmp(s, "always"))
            pr->when = AF_PREFER_WHEN_ALWAYS;
        else
            return af__ydoc_err(d, x, AF_EINVAL,
                                "unknown preferences.when '%s' (known: no-room, always)", s);
    }
    x = af__ymap_get(d, v, "key");
    if (x) {
        rc = af__ynode_string(d, x, "preferences.key", &s);
        if (rc)
            return rc;
        if (!strcmp(s, "instance-family"))
            pr->key = AF_PREFER_KEY_FAMILY;
        else if (!strcmp(s, "instance-type"))
            pr->key = AF_PREFER_KEY_TYPE;
        else
            return af__ydoc_err(d, x, AF_EINVAL,
                                "unknown preferences.key '%s' (known: instance-family, "
                                "instance-type)",
                                s);
    }
    x = af__ymap_get(d, v, "namespaces");
    rc = x ? load_names(d, x, "preferences.namespaces", &pr->namespaces, &pr->n_namespaces) : 0;
    if (rc)
        return rc;
    x = af__ymap_get(d, v, "tenants");
    if (x) {
        rc = load_names(d, x, "preferences.tenants", &pr->tenants, &pr->n_tenants);
        if (rc)
            return rc;
        for (size_t i = 0; i < pr->n_tenants; i++) {
            bool known = false;
            for (size_t t = 0; t < p->n_tenants && !known; t++)
                known = !strcmp(p->tenants[t].name, pr->tenants[i]);
            if (!known)
                return af__ydoc_err(d, af__ydoc_node(d, x->data.sequence.items.start[i]),
                                    AF_EINVAL, "preferences.tenants names '%s', which is not a "
                                    "tenant of the policy", pr->tenants[i]);
        }
    }
    return 0;
}

static int load_policy(struct af__ydoc *d, struct af_policy *p)
{
    yaml_node_t *root = af__ydoc_root(d), *v;
    const char *s;
    double sum;
    int rc;

    if (!root)
        return af__ydoc_err(d, NULL, AF_EPARSE, "empty policy (expected kind: Policy)");
    rc = af__ynode_expect(d, root, YAML_MAPPING_NODE, "the policy");
    if (rc)
        return rc;
    v = af__ymap_get(d, root, "apiVersion");
    if (!v)
        return af__ydoc_err(d, root, AF_EINVAL, "the policy has no 'apiVersion: accelfit.io/v1'");
    rc = af__ynode_string(d, v, "apiVersion", &s);
    if (rc)
        return rc;
    if (strcmp(s, "accelfit.io/v1"))
        return af__ydoc_err(d, v, AF_EINVAL, "apiVersion must be 'accelfit.io/v1', not '%s'", s);
    v = af__ymap_get(d, root, "kind");
    if (!v)
        return af__ydoc_err(d, root, AF_EINVAL, "the policy has no 'kind: Policy'");
    rc = af__ynode_string(d, v, "kind", &s);
    if (rc)
        return rc;
    if (strcmp(s, "Policy"))
        return af__ydoc_err(d, v, AF_EINVAL, "kind must be 'Policy', not '%s'", s);
    /* Keys are checked after kind, so a catalog passed as a policy says so. */
    rc = af__ymap_check_keys(d, root, "the policy", top_keys);
    if (rc)
        return rc;

    v = af__ymap_get(d, root, "memory");
    if (v) {
        rc = load_memory(d, v, p);
        if (rc)
            return rc;
    }
    v = af__ymap_get(d, root, "neuron");
    if (v) {
        rc = af__ymap_expect(d, v, "neuron", neuron_keys);
        if (rc)
            return rc;
        if (af__ymap_get(d, v, "frameworks")) {
            rc = parse_frameworks(d, af__ymap_get(d, v, "frameworks"), "neuron.frameworks", false,
                                  &p->neuron_frameworks);
            if (rc)
                return rc;
        }
    }
    v = af__ymap_get(d, root, "scoring");
    if (v) {
        rc = load_scoring(d, v, p);
        if (rc)
            return rc;
    }
    v = af__ymap_get(d, root, "filter");
    if (v) {
        yaml_node_t *b;
        rc = af__ymap_expect(d, v, "filter", filter_keys);
        if (rc)
            return rc;
        b = af__ymap_get(d, v, "cpu_backfill");
        if (b) {
            const char *text = af__ynode_str(b);
            bool on = false;
            if (text && !strcmp(text, "never")) {
                p->cpu_backfill = AF_CPU_BACKFILL_NEVER;
            } else if (af__ynode_bool_quiet(b, &on) == 0) {
                p->cpu_backfill = on ? AF_CPU_BACKFILL_ON : AF_CPU_BACKFILL_OFF;
            } else {
                return af__ydoc_err(d, b, AF_ETYPE,
                                    "'filter.cpu_backfill' must be true, false or never, not "
                                    "'%s' (false keeps CPU pods that state their workload off "
                                    "accelerator nodes; never keeps every CPU-only pod off)",
                                    text ? text : "a collection");
            }
        }
    }
    v = af__ymap_get(d, root, "prices");
    if (v) {
        yaml_node_t *x;
        rc = af__ymap_expect(d, v, "prices", prices_keys);
        if (rc)
            return rc;
        x = af__ymap_get(d, v, "default_spot_discount_pct");
        if (x) {
            rc = af__ynode_range(d, x, "prices.default_spot_discount_pct", 0, false, 100, true,
                                 &p->default_spot_discount_pct);
            if (rc)
                return rc;
        }
        rc = af__pricing_load(d, v, p);   /* src/config/pricing.c */
        if (rc)
            return rc;
    }
    v = af__ymap_get(d, root, "rules");
    if (!v)
        return af__ydoc_err(d, root, AF_EINVAL, "the policy has no 'rules'");
    rc = load_rules(d, v, p);
    if (rc)
        return rc;
    v = af__ymap_get(d, root, "rollouts");   /* src/config/rollout.c, docs/rollouts.md */
    if (v) {
        rc = af__rollouts_load(d, v, p);
        if (rc)
            return rc;
    }
    /* src/config/tenant.c, docs/policy.md#tenants; always: the default tenant exists */
    rc = af__tenants_load(d, af__ymap_get(d, root, "tenants"), p);
    if (rc)
        return rc;
    v = af__ymap_get(d, root, "utilization");   /* src/config/utilization.c, docs/utilization.md */
    if (v) {
        rc = af__utilization_load(d, v, p);
        if (rc)
            return rc;
    }
    v = af__ymap_get(d, root, "preferences");   /* after the tenants it may name */
    if (v) {
        rc = load_prefer(d, v, p);
        if (rc)
            return rc;
    }

    sum = p->w_tier + p->w_util + p->w_cost;
    p->w_tier /= sum;
    p->w_util /= sum;
    p->w_cost /= sum;
    return 0;
}

int af_policy_load_mem(struct af_policy **out, const char *name, const char *yaml, size_t len,
                       struct af_error *err)
{
    struct af__ydoc d;
    struct af_policy *p;
    int rc;

    *out = NULL;
    rc = af__ydoc_load(&d, name, yaml, len, err);
    if (rc)
        return rc;
    p = af_xcalloc(1, sizeof(*p));
    p->source = af_xstrdup(name);
    policy_defaults(p);
    rc = load_policy(&d, p);
    af__ydoc_release(&d);
    if (rc) {
        af_policy_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

int af_policy_load_file(struct af_policy **out, const char *path, struct af_error *err)
{
    struct af_buf b = AF_BUF_INIT(16u << 20);
    int rc;

    *out = NULL;
    rc = af_buf_read_file(&b, path);
    if (rc) {
        af_buf_release(&b);
        return af_error_set(err, rc, path, 0, 0, "cannot read policy: %s", af_strerror(rc));
    }
    rc = af_policy_load_mem(out, path, b.buf ? b.buf : "", b.len, err);
    af_buf_release(&b);
    return rc;
}
