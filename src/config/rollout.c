/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loads the `rollouts:` section of a policy into struct af_rollout
 * (accelfit/rollout.h): which pods a rollout takes (namespace, matchLabels,
 * owner), the classes it moves them from and to, the share of units on the
 * target (one number or stages that rise over time), what a unit does when the
 * target is full, how the pod is rewritten for the target (the variant), and
 * the brake. A rollout moves real workloads between accelerators, so the
 * loader is stricter than it is anywhere else: two rollouts that could take
 * the same pod, a variant whose resources the target classes do not offer, a
 * variant on a rollout whose two sides run the same pod, and stages that go
 * down or back in time are errors, each at the line and column of the text at
 * fault. The checks that need the catalog (a variant's amount fits some
 * target instance) run when the policy and the catalog are loaded together.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/rollout.h"
#include "accelfit/banned.h"

#define MAX_ROLLOUTS 1000
#define MAX_STAGES 100
/* Durations and stage times stay within ten years: anything longer is a typo. */

/* The brake when a rollout does not set one (docs/rollouts.md). */
#define BRAKE_NOT_READY_S 600
#define BRAKE_RESTARTS 3

static const char *const rollout_keys[] = {"name",   "selector", "source",  "target", "share",
                                           "stages", "fallback", "variant", "brake",  NULL};
static const char *const selector_keys[] = {"namespace", "matchLabels", "owner", NULL};
static const char *const owner_keys[] = {"kind", "name", NULL};
static const char *const stage_keys[] = {"share", "after", "start", NULL};
static const char *const variant_keys[] = {"images",      "resources",      "env",
                                           "tolerations", "annotations",    "claimTemplates",
                                           NULL};
static const char *const toleration_keys[] = {"key", "operator", "value", "effect", NULL};
static const char *const brake_keys[] = {"not_ready_for", "restarts", "failed", NULL};
static const char *const owner_kinds[] = {"Deployment", "StatefulSet", "ReplicaSet", "Job", NULL};

/* ---- release ---------------------------------------------------------------------------- */

static void pairs_free(struct af_pair *p, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        af_free(p[i].key);
        af_free(p[i].value);
    }
    af_free(p);
}

static void variant_free(struct af_variant *v)
{
    if (!v)
        return;
    pairs_free(v->images, v->n_images);
    pairs_free(v->resources, v->n_resources);
    pairs_free(v->claim_templates, v->n_claim_templates);
    pairs_free(v->env, v->n_env);
    for (size_t i = 0; i < v->n_tolerations; i++) {
        af_free(v->tolerations[i].key);
        af_free(v->tolerations[i].op);
        af_free(v->tolerations[i].value);
        af_free(v->tolerations[i].effect);
    }
    af_free(v->tolerations);
    pairs_free(v->annotations, v->n_annotations);
    af_free(v->resource_pos);
    af_free(v);
}

void af__rollouts_free(struct af_rollout *r, size_t n)
{
    if (!r)
        return;
    for (size_t i = 0; i < n; i++) {
        af_free(r[i].name);
        af_free(r[i].ns);
        pairs_free(r[i].match_labels, r[i].n_match_labels);
        af_free(r[i].owner_kind);
        af_free(r[i].owner_name);
        af_free(r[i].stages);
        variant_free(r[i].variant);
    }
    af_free(r);
}

/* ---- Kubernetes names: accelfit/util.h (af_k8s_*), one set for the policy and the webhook -- */

/* ---- durations and times ------------------------------------------------------------------ */

/*
 * A duration: one or more whole numbers each followed by a unit, s, m, h or d ("90s",
 * "10m", "24h", "2d", "1h30m"); "0" alone is zero. At most ten years. Returns 0 or -1.
 */
/* ---- typed readers ------------------------------------------------------------------------ */

static int load_duration(struct af__ydoc *d, yaml_node_t *v, const char *what, bool allow_zero,
                         double *out)
{
    const char *s;
    int rc = af__ynode_string(d, v, what, &s);

    if (rc)
        return rc;
    if (af_parse_duration(s, 0, AF_DURATION_MAX_S, out))
        return af__ydoc_err(d, v, AF_EINVAL,
                            "'%s' must be a duration such as 90s, 10m, 24h, 2d or 1h30m (whole "
                            "numbers, each with a unit; at most 3650d), not '%s'",
                            what, s);
    if (!allow_zero && *out == 0)
        return af__ydoc_err(d, v, AF_EINVAL, "'%s' must be longer than 0", what);
    return 0;
}

static int load_time(struct af__ydoc *d, yaml_node_t *v, const char *what, double *out)
{
    const char *s;
    int rc = af__ynode_string(d, v, what, &s);

    if (rc)
        return rc;
    if ((*out = af_parse_rfc3339(s)) <= 0)
        return af__ydoc_err(d, v, AF_EINVAL,
                            "'%s' must be an RFC 3339 time such as \"2026-12-01T00:00:00Z\" "
                            "(UTC, or with an offset such as +02:00), not '%s'",
                            what, s);
    return 0;
}

static int load_share(struct af__ydoc *d, yaml_node_t *v, const char *what, double *out)
{
    int rc = af__ynode_double(d, v, what, -INFINITY, INFINITY, out);

    if (rc)
        return rc;
    if (*out >= 2 && *out <= 100)
        return af__ydoc_err(d, v, AF_EINVAL,
                            "'%s' must be between 0 and 1, a fraction (write %g for %g%%), "
                            "not %g", what, *out / 100, *out, *out);
    if (!(*out >= 0 && *out <= 1))
        return af__ydoc_err(d, v, AF_EINVAL, "'%s' must be between 0 and 1, not '%s'", what,
                            af__ynode_str(v));
    return 0;
}

/* A scalar value of a string map (numbers and booleans are taken as written). */
static int load_value(struct af__ydoc *d, yaml_node_t *v, const char *what, const char **out)
{
    return af__ynode_string(d, v, what, out);
}

/*
 * A mapping of names to scalars into owned pairs, in file order. `key_ok` says whether a
 * key is acceptable; `key_rule` describes acceptable keys for the message. When `pos` is
 * not NULL it gets where each value is written.
 */
static int load_pairs(struct af__ydoc *d, yaml_node_t *m, const char *what,
                      bool (*key_ok)(const char *), const char *key_rule, struct af_pair **out,
                      size_t *n_out, struct af_src_pos **pos)
{
    size_t n;
    int rc = af__ynode_expect(d, m, YAML_MAPPING_NODE, what);

    if (!rc)
        rc = af__ymap_check_dups(d, m);
    if (rc)
        return rc;
    n = (size_t)(m->data.mapping.pairs.top - m->data.mapping.pairs.start);
    if (!n)
        return af__ydoc_err(d, m, AF_EINVAL, "'%s' must not be empty (leave it out instead)",
                            what);
    *out = af_xcalloc(n, sizeof(**out));
    if (pos)
        *pos = af_xcalloc(n, sizeof(**pos));
    for (size_t i = 0; i < n; i++) {
        yaml_node_pair_t *pp = &m->data.mapping.pairs.start[i];
        yaml_node_t *k = af__ydoc_node(d, pp->key), *v = af__ydoc_node(d, pp->value);
        const char *ks = af__ynode_str(k), *vs;
        if (key_ok && !key_ok(ks))
            return af__ydoc_err(d, k, AF_EINVAL, "'%s' in %s is not %s", ks, what, key_rule);
        rc = load_value(d, v, ks, &vs);
        if (rc)
            return rc;
        (*out)[i].key = af_xstrdup(ks);
        (*out)[i].value = af_xstrdup(vs);
        (*n_out)++;
        if (pos) {
            (*pos)[i].line = (int)v->start_mark.line + 1;
            (*pos)[i].column = (int)v->start_mark.column + 1;
        }
    }
    return 0;
}

/* ---- classes ------------------------------------------------------------------------------ */

/* The accelerator a class runs and, for Neuron, its NeuronCore generation: two classes of
 * one platform run the same pod (A10G and L4; inf2 and trn1), two of different platforms
 * need different pods (A10G and inf2; inf1 and inf2). */
static int platform(enum af_class c)
{
    return (int)af_class_kind(c) * 16 + af_class_neuron_core_version(c);
}

static void platform_name(enum af_class c, char *out, size_t n)
{
    int v = af_class_neuron_core_version(c);

    if (v)
        snprintf(out, n, "%s, NeuronCore-v%d", af_accel_kind_name(af_class_kind(c)), v);
    else
        snprintf(out, n, "%s", af_accel_kind_name(af_class_kind(c)));
}

static int first_class(uint32_t mask)
{
    for (int c = 0; c < AF_CLASS__COUNT; c++)
        if (mask & (1u << c))
            return c;
    return AF_CLASS_UNKNOWN;
}

/* ---- selector ----------------------------------------------------------------------------- */

static bool label_key_ok(const char *s)
{
    return af_k8s_qualified_name(s);
}

static int load_selector(struct af__ydoc *d, yaml_node_t *m, struct af_rollout *r)
{
    yaml_node_t *v;
    const char *s;
    int rc = af__ymap_expect(d, m, "selector", selector_keys);

    if (rc)
        return rc;
    v = af__ymap_get(d, m, "namespace");
    if (v) {
        rc = af__ynode_string(d, v, "selector.namespace", &s);
        if (rc)
            return rc;
        if (!af_k8s_dns_label(s, strlen(s)))
            return af__ydoc_err(d, v, AF_EINVAL,
                                "'%s' is not a namespace name (lower-case letters, digits and "
                                "'-', at most 63)",
                                s);
        r->ns = af_xstrdup(s);
    }
    v = af__ymap_get(d, m, "matchLabels");
    if (v) {
        rc = load_pairs(d, v, "selector.matchLabels", label_key_ok,
                        "a label key ([prefix/]name: letters, digits, '-', '_', '.')",
                        &r->match_labels, &r->n_match_labels, NULL);
        if (rc)
            return rc;
        for (size_t i = 0; i < r->n_match_labels; i++) {
            const struct af_pair *l = &r->match_labels[i];
            yaml_node_t *vn = af__ydoc_node(d, v->data.mapping.pairs.start[i].value);
            if (!af_k8s_label_value(l->value))
                return af__ydoc_err(d, vn, AF_EINVAL,
                                    "'%s' is not a label value (at most 63 letters, digits, '-', "
                                    "'_' and '.', starting and ending with a letter or digit)",
                                    l->value);
            if (!strcmp(l->key, AF_MANAGED_LABEL) && strcmp(l->value, "true"))
                return af__ydoc_err(d, vn, AF_EINVAL,
                                    "'%s: %s' can never match: only pods labelled %s: \"true\" "
                                    "take part in rollouts",
                                    l->key, l->value, AF_MANAGED_LABEL);
        }
    }
    v = af__ymap_get(d, m, "owner");
    if (v) {
        yaml_node_t *k, *nm;
        rc = af__ymap_expect(d, v, "selector.owner", owner_keys);
        if (rc)
            return rc;
        k = af__ymap_get(d, v, "kind");
        nm = af__ymap_get(d, v, "name");
        if (!k)
            return af__ydoc_err(d, v, AF_EINVAL,
                                "'selector.owner' needs a 'kind' (Deployment, StatefulSet, "
                                "ReplicaSet or Job)");
        rc = af__ynode_string(d, k, "selector.owner.kind", &s);
        if (rc)
            return rc;
        {
            bool known = false;
            for (size_t i = 0; owner_kinds[i]; i++)
                known |= !strcmp(s, owner_kinds[i]);
            if (!known)
                return af__ydoc_err(d, k, AF_EINVAL,
                                    "unknown owner kind '%s' (known: Deployment, StatefulSet, "
                                    "ReplicaSet, Job)",
                                    s);
        }
        r->owner_kind = af_xstrdup(s);
        if (nm) {
            rc = af__ynode_string(d, nm, "selector.owner.name", &s);
            if (rc)
                return rc;
            if (!af_k8s_dns_subdomain(s, strlen(s)))
                return af__ydoc_err(d, nm, AF_EINVAL,
                                    "'%s' is not an object name (lower-case letters, digits, '-' "
                                    "and '.')",
                                    s);
            r->owner_name = af_xstrdup(s);
        }
    }
    return 0;
}

/* ---- share and stages --------------------------------------------------------------------- */

static int load_stages(struct af__ydoc *d, yaml_node_t *list, struct af_rollout *r)
{
    size_t n;
    double last_start = 0;
    size_t last_start_stage = 0;
    int rc = af__ynode_expect(d, list, YAML_SEQUENCE_NODE, "stages");

    if (rc)
        return rc;
    n = af__yseq_len(list);
    if (!n)
        return af__ydoc_err(d, list, AF_EINVAL,
                            "'stages' of rollout '%s' must list at least one stage", r->name);
    if (n > MAX_STAGES)
        return af__ydoc_err(d, list, AF_EINVAL, "rollout '%s' has %zu stages; at most %d",
                            r->name, n, MAX_STAGES);
    r->stages = af_xcalloc(n, sizeof(r->stages[0]));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *e = af__ydoc_node(d, list->data.sequence.items.start[i]), *v;
        struct af_rollout_stage *st = &r->stages[i];
        r->n_stages++;
        rc = af__ymap_expect(d, e, "a stage", stage_keys);
        if (rc)
            return rc;
        v = af__ymap_get(d, e, "share");
        if (!v)
            return af__ydoc_err(d, e, AF_EINVAL, "stage %zu of rollout '%s' has no 'share'", i + 1,
                                r->name);
        rc = load_share(d, v, "share", &st->share);
        if (rc)
            return rc;
        if (i && st->share < r->stages[i - 1].share)
            return af__ydoc_err(d, v, AF_EINVAL,
                                "stage %zu of rollout '%s' has share %g, below stage %zu's %g: "
                                "the shares of stages must not decrease",
                                i + 1, r->name, st->share, i, r->stages[i - 1].share);
        v = af__ymap_get(d, e, "after");
        if (v) {
            if (!i)
                return af__ydoc_err(d, v, AF_EINVAL,
                                    "the first stage begins with the rollout, so it has no "
                                    "previous stage to come 'after' (give it a 'start' time to "
                                    "begin later)");
            rc = load_duration(d, v, "after", false, &r->stages[i - 1].min_duration_s);
            if (rc)
                return rc;
        }
        v = af__ymap_get(d, e, "start");
        if (v) {
            rc = load_time(d, v, "start", &st->start_unix);
            if (rc)
                return rc;
            if (last_start > 0 && st->start_unix <= last_start) {
                char a[64], b[64];
                af_format_rfc3339(st->start_unix, a, sizeof(a));
                af_format_rfc3339(last_start, b, sizeof(b));
                return af__ydoc_err(d, v, AF_EINVAL,
                                    "stage %zu of rollout '%s' starts at %s, not after stage %zu "
                                    "(%s): stage times must go forward",
                                    i + 1, r->name, a, last_start_stage + 1, b);
            }
            last_start = st->start_unix;
            last_start_stage = i;
        }
    }
    /* The share in force when the rollout begins; stages are what count. */
    r->share = r->stages[0].share;
    return 0;
}

/* ---- variant ------------------------------------------------------------------------------ */

static bool container_ok(const char *s)
{
    return !strcmp(s, "*") || af_k8s_dns_label(s, strlen(s));
}

/* The accelerator kind of a resource a variant may ask for, or AF_ACCEL_NONE. */
static enum af_accel_kind resource_kind(const char *s)
{
    if (!strcmp(s, "nvidia.com/gpu"))
        return AF_ACCEL_GPU;
    if (!strcmp(s, "aws.amazon.com/neuron") || !strcmp(s, "aws.amazon.com/neurondevice") ||
        !strcmp(s, "aws.amazon.com/neuroncore"))
        return AF_ACCEL_NEURON;
    if (!strcmp(s, "amd.com/gpu"))
        return AF_ACCEL_AMD;
    return AF_ACCEL_NONE;
}

static const char *kind_resources(enum af_accel_kind k)
{
    switch (k) {
    case AF_ACCEL_GPU:
        return "nvidia.com/gpu";
    case AF_ACCEL_NEURON:
        return "aws.amazon.com/neuron, aws.amazon.com/neurondevice or aws.amazon.com/neuroncore";
    case AF_ACCEL_AMD:
        return "amd.com/gpu";
    default:
        return "none";
    }
}

/* Parses a resource amount: a whole, positive Kubernetes quantity. Returns 0 or -1. */
static int resource_amount(const char *s, int64_t *out)
{
    int64_t milli;

    if (af_parse_quantity(s, 1000, &milli) || milli <= 0 || milli % 1000)
        return -1;
    *out = milli / 1000;
    return 0;
}

static int load_resources(struct af__ydoc *d, yaml_node_t *m, const struct af_rollout *r,
                          struct af_variant *vt)
{
    enum af_accel_kind want = af_class_kind((enum af_class)first_class(r->target));
    char targets[256];
    int neuron_at = -1;
    int rc = load_pairs(d, m, "variant.resources", NULL, NULL, &vt->resources, &vt->n_resources,
                        &vt->resource_pos);

    if (rc)
        return rc;
    af_class_mask_names(r->target, targets, sizeof(targets));
    for (size_t i = 0; i < vt->n_resources; i++) {
        const char *name = vt->resources[i].key;
        yaml_node_t *k = af__ydoc_node(d, m->data.mapping.pairs.start[i].key);
        yaml_node_t *v = af__ydoc_node(d, m->data.mapping.pairs.start[i].value);
        enum af_accel_kind kind;
        int64_t amount;
        if (!af_k8s_qualified_name(name))
            return af__ydoc_err(d, k, AF_EINVAL,
                                "'%s' is not a valid Kubernetes resource name (a domain prefix, "
                                "'/', and a name of letters, digits, '-', '_' and '.', such as "
                                "aws.amazon.com/neuron)",
                                name);
        kind = resource_kind(name);
        if (kind == AF_ACCEL_NONE)
            return af__ydoc_err(d, k, AF_EINVAL,
                                "'%s' is not an accelerator resource: a variant's resources "
                                "replace the accelerator requests of the pod; for the target "
                                "classes (%s) write %s",
                                name, targets, kind_resources(want));
        if (kind != want)
            return af__ydoc_err(d, k, AF_EINVAL,
                                "'%s' is an %s resource, but the target classes (%s) are %s: "
                                "write %s",
                                name, af_accel_kind_name(kind), targets, af_accel_kind_name(want),
                                kind_resources(want));
        if (kind == AF_ACCEL_NEURON) {
            if (neuron_at >= 0)
                return af__ydoc_err(d, k, AF_EINVAL,
                                    "'%s' and '%s' both ask for Neuron hardware; a pod asks for "
                                    "Neuron devices or NeuronCores with one resource",
                                    vt->resources[neuron_at].key, name);
            neuron_at = (int)i;
        }
        if (resource_amount(vt->resources[i].value, &amount))
            return af__ydoc_err(d, v, AF_EINVAL,
                                "'%s' must be a whole number of at least 1 (extended resources "
                                "are not split), not '%s'",
                                name, vt->resources[i].value);
    }
    return 0;
}

static int load_tolerations(struct af__ydoc *d, yaml_node_t *list, struct af_variant *vt)
{
    size_t n;
    int rc = af__ynode_expect(d, list, YAML_SEQUENCE_NODE, "variant.tolerations");

    if (rc)
        return rc;
    n = af__yseq_len(list);
    if (!n)
        return af__ydoc_err(d, list, AF_EINVAL,
                            "'variant.tolerations' must not be empty (leave it out instead)");
    vt->tolerations = af_xcalloc(n, sizeof(vt->tolerations[0]));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *e = af__ydoc_node(d, list->data.sequence.items.start[i]), *v;
        struct af_toleration *t = &vt->tolerations[i];
        const char *s;
        vt->n_tolerations++;
        rc = af__ymap_expect(d, e, "a toleration", toleration_keys);
        if (rc)
            return rc;
        v = af__ymap_get(d, e, "key");
        if (v) {
            rc = af__ynode_string(d, v, "key", &s);
            if (rc)
                return rc;
            if (!af_k8s_qualified_name(s))
                return af__ydoc_err(d, v, AF_EINVAL,
                                    "'%s' is not a taint key ([prefix/]name: letters, digits, "
                                    "'-', '_', '.')",
                                    s);
            t->key = af_xstrdup(s);
        }
        v = af__ymap_get(d, e, "operator");
        s = "Equal";   /* the API server's default */
        if (v) {
            rc = af__ynode_string(d, v, "operator", &s);
            if (rc)
                return rc;
            if (strcmp(s, "Exists") && strcmp(s, "Equal"))
                return af__ydoc_err(d, v, AF_EINVAL,
                                    "unknown toleration operator '%s' (known: Exists, Equal)", s);
        }
        t->op = af_xstrdup(s);
        v = af__ymap_get(d, e, "value");
        if (v) {
            rc = af__ynode_string(d, v, "value", &s);
            if (rc)
                return rc;
            if (!strcmp(t->op, "Exists"))
                return af__ydoc_err(d, v, AF_EINVAL,
                                    "a toleration with operator Exists takes no 'value'");
            if (!af_k8s_label_value(s))
                return af__ydoc_err(d, v, AF_EINVAL, "'%s' is not a taint value", s);
            t->value = af_xstrdup(s);
        }
        if (!t->key && strcmp(t->op, "Exists"))
            return af__ydoc_err(d, e, AF_EINVAL,
                                "a toleration without a 'key' must have operator Exists");
        v = af__ymap_get(d, e, "effect");
        if (v) {
            rc = af__ynode_string(d, v, "effect", &s);
            if (rc)
                return rc;
            if (strcmp(s, "NoSchedule") && strcmp(s, "PreferNoSchedule") && strcmp(s, "NoExecute"))
                return af__ydoc_err(d, v, AF_EINVAL,
                                    "unknown taint effect '%s' (known: NoSchedule, "
                                    "PreferNoSchedule, NoExecute)",
                                    s);
            t->effect = af_xstrdup(s);
        }
    }
    return 0;
}

static bool annotation_key_ok(const char *s)
{
    return af_k8s_qualified_name(s) && strcmp(s, AF_ROLLOUT_ANNOTATION) &&
           strcmp(s, AF_ROLLOUT_SIDE_ANNOTATION);
}

/* A ResourceClaimTemplate's name, as the API server accepts it (metadata.name). */
static bool template_ok(const char *s)
{
    return s && af_k8s_dns_subdomain(s, strlen(s));
}

static int load_variant(struct af__ydoc *d, yaml_node_t *m, struct af_rollout *r)
{
    struct af_variant *vt;
    yaml_node_t *v;
    int rc = af__ymap_expect(d, m, "variant", variant_keys);

    if (rc)
        return rc;
    vt = r->variant = af_xcalloc(1, sizeof(*vt));
    v = af__ymap_get(d, m, "images");
    if (v) {
        rc = load_pairs(d, v, "variant.images", container_ok,
                        "a container name (lower-case letters, digits and '-'), or \"*\" for "
                        "every container",
                        &vt->images, &vt->n_images, NULL);
        if (rc)
            return rc;
        for (size_t i = 0; i < vt->n_images; i++)
            if (!*vt->images[i].value || strpbrk(vt->images[i].value, " \t\r\n"))
                return af__ydoc_err(d, af__ydoc_node(d, v->data.mapping.pairs.start[i].value),
                                    AF_EINVAL, "'%s' is not a container image reference",
                                    vt->images[i].value);
    }
    v = af__ymap_get(d, m, "claimTemplates");
    if (v) {
        rc = load_pairs(d, v, "variant.claimTemplates", template_ok,
                        "a ResourceClaimTemplate name (a DNS subdomain: lower-case letters, "
                        "digits, '-' and '.')",
                        &vt->claim_templates, &vt->n_claim_templates, NULL);
        if (rc)
            return rc;
        for (size_t i = 0; i < vt->n_claim_templates; i++) {
            yaml_node_t *val = af__ydoc_node(d, v->data.mapping.pairs.start[i].value);
            if (!template_ok(vt->claim_templates[i].value))
                return af__ydoc_err(d, val, AF_EINVAL,
                                    "'%s' is not a ResourceClaimTemplate name (a DNS subdomain: "
                                    "lower-case letters, digits, '-' and '.')",
                                    vt->claim_templates[i].value);
            if (!strcmp(vt->claim_templates[i].key, vt->claim_templates[i].value))
                return af__ydoc_err(d, val, AF_EINVAL,
                                    "claim template '%s' is swapped for itself",
                                    vt->claim_templates[i].value);
        }
    }
    v = af__ymap_get(d, m, "resources");
    if (!v && !vt->n_claim_templates)
        return af__ydoc_err(d, m, AF_EINVAL,
                            "the variant of rollout '%s' has no 'resources' (the accelerator "
                            "requests that replace the source's, such as "
                            "{aws.amazon.com/neuron: 1}) and no 'claimTemplates' (the DRA "
                            "claim templates that replace the source's)",
                            r->name);
    if (v) {
        rc = load_resources(d, v, r, vt);
        if (rc)
            return rc;
    }
    v = af__ymap_get(d, m, "env");
    if (v) {
        rc = load_pairs(d, v, "variant.env", af_k8s_env_name,
                        "an environment variable name (letters, digits, '_', '-' and '.', not "
                        "starting with a digit)",
                        &vt->env, &vt->n_env, NULL);
        if (rc)
            return rc;
    }
    v = af__ymap_get(d, m, "tolerations");
    if (v) {
        rc = load_tolerations(d, v, vt);
        if (rc)
            return rc;
    }
    v = af__ymap_get(d, m, "annotations");
    if (v) {
        rc = load_pairs(d, v, "variant.annotations", annotation_key_ok,
                        "an annotation key you may set ([prefix/]name; " AF_ROLLOUT_ANNOTATION
                        " and " AF_ROLLOUT_SIDE_ANNOTATION " are set by accelfit)",
                        &vt->annotations, &vt->n_annotations, NULL);
        if (rc)
            return rc;
    }
    return 0;
}

/*
 * Placement or variant: classes of one platform run the same pod, so a rollout between
 * them needs no variant; classes of different platforms need the pod rewritten.
 * `variant` is the variant node or NULL; `target` the target node, for positions.
 */
static int check_sides(struct af__ydoc *d, const struct af_rollout *r, yaml_node_t *variant,
                       yaml_node_t *target)
{
    char a[64], b[64];

    for (int s = 0; s < AF_CLASS__COUNT; s++) {
        if (!(r->source & (1u << s)))
            continue;
        for (int t = 0; t < AF_CLASS__COUNT; t++) {
            if (!(r->target & (1u << t)))
                continue;
            platform_name((enum af_class)s, a, sizeof(a));
            platform_name((enum af_class)t, b, sizeof(b));
            if (!variant && platform((enum af_class)s) != platform((enum af_class)t))
                return af__ydoc_err(d, target, AF_EINVAL,
                                    "source %s (%s) and target %s (%s) of rollout '%s' need "
                                    "different pods: add a 'variant' that rewrites the pod for "
                                    "the target",
                                    af_class_name((enum af_class)s), a,
                                    af_class_name((enum af_class)t), b, r->name);
            if (variant && platform((enum af_class)s) == platform((enum af_class)t))
                return af__ydoc_err(d, variant, AF_EINVAL,
                                    "source %s and target %s of rollout '%s' are the same kind "
                                    "(%s) and run the same pod: that is a placement rollout, "
                                    "which needs no variant; remove 'variant'%s",
                                    af_class_name((enum af_class)s),
                                    af_class_name((enum af_class)t), r->name, a,
                                    r->source != (1u << s)
                                        ? " (or move that source class to a placement rollout)"
                                        : "");
        }
    }
    if (!variant)
        return 0;
    for (int s = 0; s < AF_CLASS__COUNT; s++)
        if ((r->source & (1u << s)) && af_class_kind((enum af_class)s) == AF_ACCEL_NONE)
            return af__ydoc_err(d, variant, AF_EINVAL,
                                "rollout '%s' has a variant, which replaces the accelerator "
                                "requests of a pod, but source class %s requests none",
                                r->name, af_class_name((enum af_class)s));
    {
        enum af_accel_kind k = af_class_kind((enum af_class)first_class(r->target));
        for (int t = 0; t < AF_CLASS__COUNT; t++) {
            if (!(r->target & (1u << t)))
                continue;
            if (af_class_kind((enum af_class)t) == AF_ACCEL_NONE)
                return af__ydoc_err(d, target, AF_EINVAL,
                                    "target class %s of variant rollout '%s' has no accelerator "
                                    "for the variant's resources",
                                    af_class_name((enum af_class)t), r->name);
            if (af_class_kind((enum af_class)t) != k)
                return af__ydoc_err(d, target, AF_EINVAL,
                                    "the target classes of variant rollout '%s' must be of one "
                                    "accelerator kind, since one variant's resources must fit "
                                    "them all: %s is %s, %s is %s",
                                    r->name,
                                    af_class_name((enum af_class)first_class(r->target)),
                                    af_accel_kind_name(k), af_class_name((enum af_class)t),
                                    af_accel_kind_name(af_class_kind((enum af_class)t)));
        }
    }
    return 0;
}

/* ---- brake -------------------------------------------------------------------------------- */

static int load_brake(struct af__ydoc *d, yaml_node_t *m, struct af_rollout *r)
{
    yaml_node_t *v;
    int rc = af__ymap_expect(d, m, "brake", brake_keys);

    if (rc)
        return rc;
    v = af__ymap_get(d, m, "not_ready_for");
    if (v) {
        double s;
        rc = load_duration(d, v, "brake.not_ready_for", true, &s);
        if (rc)
            return rc;
        r->brake_not_ready_s = (int)s;
    }
    v = af__ymap_get(d, m, "restarts");
    if (v) {
        rc = af__ynode_int(d, v, "brake.restarts", 0, 1000000, &r->brake_restarts);
        if (rc)
            return rc;
    }
    v = af__ymap_get(d, m, "failed");
    if (v) {
        rc = af__ynode_bool(d, v, "brake.failed", &r->brake_on_failed);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- one rollout -------------------------------------------------------------------------- */

static bool lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A rollout's name: what a ConfigMap key and a metric label take, lower-case. */
static bool rollout_name_ok(const char *s)
{
    size_t n = strlen(s);

    if (n == 0 || n > 63 || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!lower_alnum(s[i]) && s[i] != '-' && s[i] != '.')
            return false;
    return true;
}

static int load_rollout(struct af__ydoc *d, yaml_node_t *n, struct af_rollout *r)
{
    yaml_node_t *v, *share, *stages, *target, *variant;
    const char *s;
    int rc;

    r->line = (int)n->start_mark.line + 1;
    r->fallback = AF_FALLBACK_SOURCE;
    r->brake_not_ready_s = BRAKE_NOT_READY_S;
    r->brake_restarts = BRAKE_RESTARTS;
    r->brake_on_failed = true;
    rc = af__ymap_expect(d, n, "a rollout", rollout_keys);
    if (rc)
        return rc;

    v = af__ymap_get(d, n, "name");
    if (!v)
        return af__ydoc_err(d, n, AF_EINVAL, "rollout has no 'name'");
    rc = af__ynode_string(d, v, "name", &s);
    if (rc)
        return rc;
    if (!rollout_name_ok(s))
        return af__ydoc_err(d, v, AF_EINVAL,
                            "rollout name '%s' must be lower-case letters, digits, '-' and '.', "
                            "at most 63, starting and ending with a letter or digit (it goes into "
                            "annotations, metrics and URLs)",
                            s);
    r->name = af_xstrdup(s);

    v = af__ymap_get(d, n, "selector");
    if (!v)
        return af__ydoc_err(d, n, AF_EINVAL,
                            "rollout '%s' has no 'selector' (write 'selector: {}' to take every "
                            "managed pod)",
                            r->name);
    rc = load_selector(d, v, r);
    if (rc)
        return rc;

    v = af__ymap_get(d, n, "source");
    if (!v)
        return af__ydoc_err(d, n, AF_EINVAL, "rollout '%s' has no 'source' classes", r->name);
    rc = af__ynode_classes(d, v, "source", "rollout", r->name, true, 0, &r->source);
    if (rc)
        return rc;
    target = af__ymap_get(d, n, "target");
    if (!target)
        return af__ydoc_err(d, n, AF_EINVAL, "rollout '%s' has no 'target' classes", r->name);
    rc = af__ynode_classes(d, target, "target", "rollout", r->name, true, r->source,
                           &r->target);
    if (rc)
        return rc;

    share = af__ymap_get(d, n, "share");
    stages = af__ymap_get(d, n, "stages");
    if (share && stages)
        return af__ydoc_err(d, af__ymap_get(d, n, "stages"), AF_EINVAL,
                            "rollout '%s' has both 'share' and 'stages'; give one", r->name);
    if (!share && !stages)
        return af__ydoc_err(d, n, AF_EINVAL,
                            "rollout '%s' has no 'share' (0 to 1) or 'stages'", r->name);
    if (share)
        rc = load_share(d, share, "share", &r->share);
    else
        rc = load_stages(d, stages, r);
    if (rc)
        return rc;

    v = af__ymap_get(d, n, "fallback");
    if (v) {
        rc = af__ynode_string(d, v, "fallback", &s);
        if (rc)
            return rc;
        if (!strcmp(s, "source"))
            r->fallback = AF_FALLBACK_SOURCE;
        else if (!strcmp(s, "wait"))
            r->fallback = AF_FALLBACK_WAIT;
        else
            return af__ydoc_err(d, v, AF_EINVAL, "unknown fallback '%s' (known: source, wait)", s);
    }

    variant = af__ymap_get(d, n, "variant");
    rc = check_sides(d, r, variant, target);
    if (rc)
        return rc;
    if (variant) {
        rc = load_variant(d, variant, r);
        if (rc)
            return rc;
    }

    v = af__ymap_get(d, n, "brake");
    if (v) {
        rc = load_brake(d, v, r);
        if (rc)
            return rc;
    }
    return 0;
}

/* ---- selectors that overlap --------------------------------------------------------------- */

/* True when a Deployment named `deploy` may own (through its ReplicaSet) pods of the
 * ReplicaSet named `rs`, which the Deployment controller names "<deploy>-<hash>". */
static bool deployment_may_own(const char *deploy, const char *rs)
{
    size_t n = strlen(deploy);

    return !strncmp(deploy, rs, n) && rs[n] == '-';
}

/* True when one pod could have owners matching both selectors' owner fields. */
static bool owners_meet(const struct af_rollout *a, const struct af_rollout *b)
{
    if (!a->owner_kind || !b->owner_kind)
        return true;
    if (!strcmp(a->owner_kind, b->owner_kind))
        return !a->owner_name || !b->owner_name || !strcmp(a->owner_name, b->owner_name);
    if (!strcmp(a->owner_kind, "ReplicaSet") && !strcmp(b->owner_kind, "Deployment"))
        return !a->owner_name || !b->owner_name || deployment_may_own(b->owner_name, a->owner_name);
    if (!strcmp(a->owner_kind, "Deployment") && !strcmp(b->owner_kind, "ReplicaSet"))
        return !a->owner_name || !b->owner_name || deployment_may_own(a->owner_name, b->owner_name);
    return false;
}

static int pair_cmp(const void *x, const void *y)
{
    const struct af_pair *const *a = x, *const *b = y;

    return strcmp((*a)->key, (*b)->key);
}

/* Label keys of every rollout, sorted, so two selectors are compared in one merge. */
struct sorted_labels {
    const struct af_pair **v;
    size_t n;
};

static void sort_labels(const struct af_rollout *r, struct sorted_labels *out)
{
    out->n = r->n_match_labels;
    out->v = af_xcalloc(out->n ? out->n : 1, sizeof(out->v[0]));
    for (size_t i = 0; i < out->n; i++)
        out->v[i] = &r->match_labels[i];
    qsort(out->v, out->n, sizeof(out->v[0]), pair_cmp);
}

/* The first label key both selectors require with different values, or NULL: then one
 * pod can carry both sets of labels. */
static const struct af_pair *labels_contradict(const struct sorted_labels *a,
                                               const struct sorted_labels *b,
                                               const struct af_pair **other)
{
    size_t i = 0, j = 0;

    while (i < a->n && j < b->n) {
        int c = strcmp(a->v[i]->key, b->v[j]->key);
        if (c < 0) {
            i++;
        } else if (c > 0) {
            j++;
        } else {
            if (strcmp(a->v[i]->value, b->v[j]->value)) {
                *other = b->v[j];
                return a->v[i];
            }
            i++;
            j++;
        }
    }
    return NULL;
}

static void describe_owner(const struct af_rollout *r, char *out, size_t n)
{
    if (!r->owner_kind)
        snprintf(out, n, "any owner");
    else if (!r->owner_name)
        snprintf(out, n, "any %s", r->owner_kind);
    else
        snprintf(out, n, "%s/%s", r->owner_kind, r->owner_name);
}

/*
 * Two rollouts overlap when one pod could match both selectors: the same namespace (or
 * either any), matchLabels that do not require one key with two values, and owners that
 * can be the same (either any, or one kind and name; a Deployment and the ReplicaSets it
 * names). A pod belongs to the first rollout that matches it, so the later one would
 * quietly never see those pods; that is an error at the later selector.
 */
static int check_overlaps(struct af__ydoc *d, const struct af_policy *p, yaml_node_t **selectors)
{
    struct sorted_labels *sl = af_xcalloc(p->n_rollouts ? p->n_rollouts : 1, sizeof(*sl));
    int rc = 0;

    for (size_t i = 0; i < p->n_rollouts; i++)
        sort_labels(&p->rollouts[i], &sl[i]);
    for (size_t j = 1; j < p->n_rollouts && !rc; j++) {
        const struct af_rollout *b = &p->rollouts[j];
        for (size_t i = 0; i < j && !rc; i++) {
            const struct af_rollout *a = &p->rollouts[i];
            const struct af_pair *other;
            char ns[96], ow_a[160], ow_b[160];
            if (a->ns && b->ns && strcmp(a->ns, b->ns))
                continue;
            if (labels_contradict(&sl[i], &sl[j], &other))
                continue;
            if (!owners_meet(a, b))
                continue;
            if (a->ns || b->ns)
                snprintf(ns, sizeof(ns), "namespace %s", a->ns ? a->ns : b->ns);
            else
                snprintf(ns, sizeof(ns), "any namespace");
            describe_owner(a, ow_a, sizeof(ow_a));
            describe_owner(b, ow_b, sizeof(ow_b));
            rc = af__ydoc_err(d, selectors[j], AF_EINVAL,
                              "rollouts '%s' (line %d) and '%s' (line %d) can select the same "
                              "pods (%s; matchLabels that do not contradict; %s%s%s): a pod "
                              "belongs to the first rollout that matches, so '%s' would never "
                              "get them; make the selectors disjoint (another namespace, a label "
                              "with another value, or another owner)",
                              a->name, a->line, b->name, b->line, ns, ow_a,
                              strcmp(ow_a, ow_b) ? " and " : "", strcmp(ow_a, ow_b) ? ow_b : "",
                              b->name);
        }
    }
    for (size_t i = 0; i < p->n_rollouts; i++)
        af_free(sl[i].v);
    af_free(sl);
    return rc;
}

/* ---- the section -------------------------------------------------------------------------- */

int af__rollouts_load(struct af__ydoc *d, yaml_node_t *list, struct af_policy *p)
{
    struct af__strset names;
    yaml_node_t **selectors;
    size_t n, first;
    int rc = af__ynode_expect(d, list, YAML_SEQUENCE_NODE, "rollouts");

    if (rc)
        return rc;
    n = af__yseq_len(list);
    if (!n)
        return 0;
    if (n > MAX_ROLLOUTS)
        return af__ydoc_err(d, list, AF_EINVAL, "the policy has %zu rollouts; at most %d", n,
                            MAX_ROLLOUTS);
    p->rollouts = af_xcalloc(n, sizeof(p->rollouts[0]));
    selectors = af_xcalloc(n, sizeof(selectors[0]));
    af__strset_init(&names, n);
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *e = af__ydoc_node(d, list->data.sequence.items.start[i]);
        p->n_rollouts++;
        rc = load_rollout(d, e, &p->rollouts[i]);
        if (rc)
            break;
        selectors[i] = af__ymap_get(d, e, "selector");
        if (!af__strset_add(&names, p->rollouts[i].name, i, &first)) {
            rc = af__ydoc_err(d, af__ymap_get(d, e, "name"), AF_EINVAL,
                              "duplicate rollout name '%s' (first at line %d)",
                              p->rollouts[i].name, p->rollouts[first].line);
            break;
        }
    }
    af__strset_release(&names);
    if (!rc)
        rc = check_overlaps(d, p, selectors);
    af_free(selectors);
    return rc;
}

/* ---- against the catalog ------------------------------------------------------------------ */

/* Devices (or NeuronCores, when `cores`) of one instance type. */
static int64_t instance_capacity(const struct af_instance_type *t, bool cores)
{
    if (!cores)
        return t->accel_count;
    if (t->neuron_cores > 0)
        return t->neuron_cores;
    return (int64_t)t->accel_count * af_class_neuron_cores_per_device(t->cls);
}

/* What one unit of a variant resource is, for messages. */
static const char *resource_unit(const char *res)
{
    if (!strcmp(res, "aws.amazon.com/neuroncore"))
        return "NeuronCores";
    if (!strcmp(res, "nvidia.com/gpu"))
        return "GPUs";
    if (!strcmp(res, "amd.com/gpu"))
        return "AMD GPUs";
    return "Neuron devices";
}

int af__rollouts_check_catalog(const struct af_policy *p, const struct af_catalog *c,
                               struct af_error *err)
{
    /* The largest instance of each class, by devices and by NeuronCores: one pass over
     * the catalog, whatever the number of rollouts. */
    const struct af_instance_type *largest[AF_CLASS__COUNT][2];

    memset(largest, 0, sizeof(largest));
    for (size_t t = 0; p->n_rollouts && t < c->n_types; t++) {
        const struct af_instance_type *it = &c->types[t];
        if (it->cls <= AF_CLASS_UNKNOWN || it->cls >= AF_CLASS__COUNT)
            continue;
        for (int cores = 0; cores < 2; cores++)
            if (!largest[it->cls][cores] ||
                instance_capacity(it, cores) > instance_capacity(largest[it->cls][cores], cores))
                largest[it->cls][cores] = it;
    }
    for (size_t i = 0; i < p->n_rollouts; i++) {
        const struct af_rollout *r = &p->rollouts[i];
        const struct af_variant *vt = r->variant;
        if (!vt)
            continue;
        for (size_t k = 0; k < vt->n_resources; k++) {
            const char *res = vt->resources[k].key;
            bool cores = !strcmp(res, "aws.amazon.com/neuroncore");
            char why[400];
            size_t used = 0;
            int64_t amount;
            bool fits = false;
            if (resource_amount(vt->resources[k].value, &amount))
                continue;   /* the loader refused it already */
            why[0] = '\0';
            for (int cls = 0; cls < AF_CLASS__COUNT && !fits; cls++) {
                const struct af_instance_type *best = largest[cls][cores];
                if (!(r->target & (1u << cls)))
                    continue;
                if (best && amount <= instance_capacity(best, cores))
                    fits = true;
                else if (used < sizeof(why) && best)
                    used += (size_t)snprintf(why + used, sizeof(why) - used,
                                             "%sthe largest %s instance (%s) has %lld",
                                             used ? "; " : "", af_class_name((enum af_class)cls),
                                             best->name, (long long)instance_capacity(best, cores));
                else if (used < sizeof(why))
                    used += (size_t)snprintf(why + used, sizeof(why) - used,
                                             "%sthe catalog has no %s instance type",
                                             used ? "; " : "", af_class_name((enum af_class)cls));
            }
            if (!fits) {
                int line = vt->resource_pos ? vt->resource_pos[k].line : r->line;
                int col = vt->resource_pos ? vt->resource_pos[k].column : 0;
                return af_error_set(err, AF_EINVAL, p->source, line, col,
                                    "the variant of rollout '%s' asks for %lld %s (%s) per "
                                    "container, more than any instance of its target classes "
                                    "has: %s (catalog %s)",
                                    r->name, (long long)amount, resource_unit(res), res, why,
                                    c->source);
            }
        }
    }
    return 0;
}

