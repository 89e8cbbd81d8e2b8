/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loads the `tenants:` section of a policy into struct af_tenant
 * (accelfit/tenant.h): each tenant's name, the namespaces it owns, its budget
 * in dollars per hour, what happens over budget, the classes it may use, the
 * classes that are premium for it, and whether it runs on spot capacity only.
 * Budgets steer real workloads, so mistakes are errors at their line and
 * column: an unknown class, a negative budget, a namespace two tenants claim,
 * an over-budget mode without a budget, a premium class the tenant may not use.
 * The default tenant (unmatched pods) is always present, last; the file may
 * list it by name to give it a budget. Which tenant a pod belongs to is src/core/tenant.c.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "config/rollout.h"
#include "config/tenant.h"
#include "accelfit/banned.h"

/* Budgets above this are typos (a million dollars an hour). */
#define MAX_BUDGET AF_PRICE_MAX_USD_HR

static const char *const tenant_keys[] = {"name",          "namespaces",      "budget_usd_per_hour",
                                          "over_budget",   "classes",         "premium_classes",
                                          "capacity",      NULL};

/* ---- release ------------------------------------------------------------------------------ */

static void tenant_release(struct af_tenant *t)
{
    af_free(t->name);
    for (size_t i = 0; i < t->n_namespaces; i++)
        af_free(t->namespaces[i]);
    af_free(t->namespaces);
}

void af__tenants_free(struct af_policy *p)
{
    for (size_t i = 0; i < p->n_tenants; i++)
        tenant_release(&p->tenants[i]);
    af_free(p->tenants);
    af_free(p->tenant_ns);
    p->tenants = NULL;
    p->tenant_ns = NULL;
    p->n_tenants = p->n_tenant_ns = 0;
}

/* ---- readers ------------------------------------------------------------------------------ */

static int load_namespaces(struct af__ydoc *d, yaml_node_t *v, struct af_tenant *t,
                           struct af__strset *claimed, const struct af_policy *p)
{
    size_t n, prev;
    int rc = af__ynode_expect(d, v, YAML_SEQUENCE_NODE, "namespaces");

    if (rc)
        return rc;
    n = af__yseq_len(v);
    t->namespaces = af_xcalloc(n + 1, sizeof(*t->namespaces));
    for (size_t i = 0; i < n; i++) {
        yaml_node_t *e = af__ydoc_node(d, v->data.sequence.items.start[i]);
        const char *s;
        rc = af__ynode_string(d, e, "namespaces", &s);
        if (rc)
            return rc;
        if (!af_k8s_dns_label(s, strlen(s)))
            return af__ydoc_err(d, e, AF_EINVAL,
                                "namespace '%s' of tenant '%s' is not a namespace name "
                                "(lowercase letters, digits and '-', at most 63 characters)",
                                s, t->name);
        t->namespaces[t->n_namespaces] = af_xstrdup(s);
        if (!af__strset_add(claimed, t->namespaces[t->n_namespaces], (size_t)(t - p->tenants),
                            &prev)) {
            af_free(t->namespaces[t->n_namespaces]);
            t->namespaces[t->n_namespaces] = NULL;
            if (&p->tenants[prev] == t)
                return af__ydoc_err(d, e, AF_EINVAL,
                                    "namespace '%s' appears twice in tenant '%s'", s, t->name);
            return af__ydoc_err(d, e, AF_EINVAL,
                                "namespace '%s' is claimed by tenants '%s' and '%s': a namespace "
                                "belongs to one tenant",
                                s, p->tenants[prev].name, t->name);
        }
        t->n_namespaces++;
    }
    return 0;
}

static int load_tenant(struct af__ydoc *d, yaml_node_t *e, struct af_policy *p, struct af_tenant *t,
                       struct af__strset *names, struct af__strset *claimed)
{
    yaml_node_t *v, *mode_node;
    const char *s;
    int rc;

    rc = af__ynode_expect(d, e, YAML_MAPPING_NODE, "tenants[]");
    if (!rc)
        rc = af__ymap_check_keys(d, e, "tenant", tenant_keys);
    if (rc)
        return rc;
    t->line = (int)e->start_mark.line + 1;
    v = af__ymap_get(d, e, "name");
    if (!v)
        return af__ydoc_err(d, e, AF_EINVAL, "a tenant needs a 'name'");
    rc = af__ynode_string(d, v, "name", &s);
    if (rc)
        return rc;
    if (!af_k8s_dns_label(s, strlen(s)))
        return af__ydoc_err(d, v, AF_EINVAL,
                            "tenant name '%s' must be lowercase letters, digits and '-', at most "
                            "63 characters (it is also a value of the accelfit.io/tenant label)",
                            s);
    t->name = af_xstrdup(s);
    if (!af__strset_add(names, t->name, 0, NULL))
        return af__ydoc_err(d, v, AF_EINVAL, "tenant '%s' is listed twice", s);

    v = af__ymap_get(d, e, "namespaces");
    if (v && !strcmp(t->name, AF_TENANT_DEFAULT))
        return af__ydoc_err(d, v, AF_EINVAL,
                            "the default tenant takes the pods no other tenant matches; it "
                            "cannot claim namespaces");
    if (v) {
        rc = load_namespaces(d, v, t, claimed, p);
        if (rc)
            return rc;
    }

    v = af__ymap_get(d, e, "budget_usd_per_hour");
    if (v) {
        rc = af__ynode_double(d, v, "budget_usd_per_hour", 0, MAX_BUDGET, &t->budget_usd_hr);
        /* out of range: said with the tenant and the unit (a value too close to 0 for a
         * double, 1e-400, keeps the message that says so) */
        if (rc == AF_ERANGE && !(fabs(strtod(af__ynode_str(v), NULL)) < 1e-300))
            return af__ydoc_err(d, v, AF_ERANGE,
                                "'budget_usd_per_hour' of tenant '%s' is out of range: it must be "
                                "between 0 and %.0f dollars per hour, not '%s'",
                                t->name, MAX_BUDGET, af__ynode_str(v));
        if (rc)
            return rc;
        t->has_budget = true;
    }
    mode_node = af__ymap_get(d, e, "over_budget");
    if (mode_node) {
        rc = af__ynode_string(d, mode_node, "over_budget", &s);
        if (rc)
            return rc;
        if (!strcmp(s, "hard"))
            t->over_budget = AF_OVER_BUDGET_HARD;
        else if (strcmp(s, "soft"))
            return af__ydoc_err(d, mode_node, AF_EINVAL,
                                "'over_budget' must be soft (premium nodes rank lower) or hard "
                                "(premium nodes are refused), not '%s'",
                                s);
        if (!t->has_budget)
            return af__ydoc_err(d, mode_node, AF_EINVAL,
                                "tenant '%s' sets 'over_budget' but no 'budget_usd_per_hour'",
                                t->name);
    }

    v = af__ymap_get(d, e, "classes");
    if (v) {
        rc = af__ynode_classes(d, v, "classes", "tenant", t->name, false, 0, &t->classes);
        if (rc)
            return rc;
    }
    v = af__ymap_get(d, e, "premium_classes");
    if (v) {
        rc = af__ynode_classes(d, v, "premium_classes", "tenant", t->name, false, 0,
                               &t->premium);
        if (rc)
            return rc;
        if (t->classes && (t->premium & ~t->classes)) {
            for (int c = 0; c < AF_CLASS__COUNT; c++)
                if ((t->premium & ~t->classes) & (1u << c))
                    return af__ydoc_err(d, v, AF_EINVAL,
                                        "premium class '%s' of tenant '%s' is not among its "
                                        "'classes'",
                                        af_class_name((enum af_class)c), t->name);
        }
    } else {
        t->premium = ((1u << AF_CLASS__COUNT) - 1) & ~(1u << AF_CLASS_CPU);
    }
    v = af__ymap_get(d, e, "capacity");
    if (v) {
        rc = af__ynode_string(d, v, "capacity", &s);
        if (rc)
            return rc;
        if (!strcmp(s, "spot"))
            t->spot_only = true;
        else if (strcmp(s, "any"))
            return af__ydoc_err(d, v, AF_EINVAL,
                                "'capacity' must be spot (spot nodes only) or any, not '%s'", s);
    }
    return 0;
}

static int cmp_ns(const void *a, const void *b)
{
    return strcmp(((const struct af_tenant_ns *)a)->ns, ((const struct af_tenant_ns *)b)->ns);
}

int af__tenants_load(struct af__ydoc *d, yaml_node_t *list, struct af_policy *p)
{
    struct af__strset names, claimed;
    size_t n = 0, def = (size_t)-1, k = 0;
    int rc = 0;

    if (list) {
        rc = af__ynode_expect(d, list, YAML_SEQUENCE_NODE, "tenants");
        if (rc)
            return rc;
        n = af__yseq_len(list);
        if (n > AF_TENANTS_MAX)
            return af__ydoc_err(d, list, AF_EINVAL,
                                "at most %d tenants, the default tenant included, not %zu",
                                AF_TENANTS_MAX, n);
    }
    /* one more slot for a default tenant the file does not list */
    p->tenants = af_xcalloc(n + 1, sizeof(*p->tenants));
    af__strset_init(&names, n + 1);
    af__strset_init(&claimed, 16);
    for (size_t i = 0; i < n && !rc; i++) {
        struct af_tenant *t = &p->tenants[p->n_tenants++];
        rc = load_tenant(d, af__ydoc_node(d, list->data.sequence.items.start[i]), p, t, &names,
                         &claimed);
        if (!rc && !strcmp(t->name, AF_TENANT_DEFAULT))
            def = i;
    }
    af__strset_release(&names);
    af__strset_release(&claimed);
    if (rc)
        return rc;
    if (def == (size_t)-1) {
        struct af_tenant *t = &p->tenants[p->n_tenants++];
        t->name = af_xstrdup(AF_TENANT_DEFAULT);
        t->premium = ((1u << AF_CLASS__COUNT) - 1) & ~(1u << AF_CLASS_CPU);
        if (p->n_tenants > AF_TENANTS_MAX)
            return af__ydoc_err(d, list, AF_EINVAL,
                                "at most %d tenants, the default tenant included, not %zu",
                                AF_TENANTS_MAX, p->n_tenants);
    } else if (def != p->n_tenants - 1) {
        /* the default goes last; the others keep their file order */
        struct af_tenant t = p->tenants[def];
        memmove(&p->tenants[def], &p->tenants[def + 1],
                (p->n_tenants - 1 - def) * sizeof(*p->tenants));
        p->tenants[p->n_tenants - 1] = t;
    }
    for (size_t i = 0; i < p->n_tenants; i++)
        p->n_tenant_ns += p->tenants[i].n_namespaces;
    p->tenant_ns = af_xcalloc(p->n_tenant_ns + 1, sizeof(*p->tenant_ns));
    for (size_t i = 0; i < p->n_tenants; i++)
        for (size_t j = 0; j < p->tenants[i].n_namespaces; j++) {
            p->tenant_ns[k].ns = p->tenants[i].namespaces[j];
            p->tenant_ns[k++].tenant = i;
        }
    qsort(p->tenant_ns, p->n_tenant_ns, sizeof(*p->tenant_ns), cmp_ns);
    return 0;
}
