/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node affinity of preferences on admission (accelfit/prefer.h): which pods,
 * whether the cluster has room for them already, and the preferred terms (one
 * per tier of the plan, heaviest first) and required NotIn values (what is known)
 * built from the catalog. A catalog type "holds" the pod when it has the devices
 * the pod requests and filter's physics (af_plan_model_fits) passes on a node of
 * that type, so a preference never names hardware filter would refuse.
 *
 * Pure: no I/O, no allocation.
 */
#include "accelfit/prefer.h"

#include <stdio.h>
#include <string.h>

#include "accelfit/tenant.h"
#include "accelfit/banned.h"

static bool listed(char *const *list, size_t n, const char *s)
{
    for (size_t i = 0; s && i < n; i++)
        if (!strcmp(list[i], s))
            return true;
    return false;
}

bool af_prefer_selects(const struct af_policy *pol, const struct af_pod_info *pod)
{
    const struct af_prefer_policy *p;
    int t;

    if (!pol || !pod || !pol->prefer.enabled || !pod->managed)
        return false;
    p = &pol->prefer;
    if (!p->n_namespaces && !p->n_tenants)
        return true;
    if (listed(p->namespaces, p->n_namespaces, pod->ns))
        return true;
    t = af_tenant_of(pol, pod, NULL);
    return t >= 0 && listed(p->tenants, p->n_tenants, pol->tenants[t].name);
}

long af_prefer_room(const struct af_policy *pol, const struct af_plan *plan,
                    const struct af_pod_info *pod, const struct af_node_view *nodes, size_t n,
                    struct af_node_decision *scratch)
{
    if (!n)
        return -1;
    af_filter(pol, plan, pod, nodes, NULL, n, scratch, NULL);
    for (size_t i = 0; i < n; i++)
        if (scratch[i].verdict == AF_VERDICT_PASS && scratch[i].has_room)
            return (long)i;
    return -1;
}

void af_prefer_type_allocatable(const struct af_instance_type *t, struct af_resources *out)
{
    enum af_accel_kind kind = af_class_kind(t->cls);

    memset(out, 0, sizeof(*out));
    out->v[AF_RES_CPU] = (int64_t)t->vcpus * 1000;
    out->v[AF_RES_MEMORY] = (int64_t)(t->memory_gib * 1024.0 * 1024.0 * 1024.0);
    if (kind == AF_ACCEL_GPU)
        out->v[AF_RES_GPU] = t->accel_count;
    if (kind == AF_ACCEL_NEURON) {
        out->v[AF_RES_NEURON] = out->v[AF_RES_NEURONDEVICE] = t->accel_count;
        out->v[AF_RES_NEURONCORE] = t->neuron_cores;
    }
}

long af_prefer_for(const struct af_policy *pol, const struct af_catalog *cat,
                   const struct af_plan *plan, const struct af_pod_info *pod,
                   const struct af_node_view *nodes, size_t n, struct af_node_decision *scratch,
                   struct af_preferences *out)
{
    long at = -1;

    if (pol && pol->prefer.when == AF_PREFER_WHEN_NO_ROOM)
        at = af_prefer_room(pol, plan, pod, nodes, n, scratch);
    af_prefer_build(pol, cat, plan, pod, at >= 0 ? nodes[at].info->name : NULL, out);
    return at;
}

/* A node of catalog type `t`, as filter would see one: class, device memory, allocatable. */
static void node_of_type(const struct af_instance_type *t, struct af_node_info *n)
{
    memset(n, 0, sizeof(*n));
    n->name = t->name;
    n->instance_type = t->name;
    n->family = t->family;
    n->cls = t->cls;
    n->kind = af_class_kind(t->cls);
    n->dev_mem_gib_lo = n->dev_mem_gib_hi = t->accel_memory_gib_per_device;
    n->dev_mem_source = "catalog";
    af_prefer_type_allocatable(t, &n->allocatable);
}

/* Whether an instance of type `t` can hold the pod: its devices and, where the model's size
 * is known, filter's physics. */
static bool holds(const struct af_plan *plan, const struct af_pod_info *pod,
                  const struct af_instance_type *t)
{
    struct af_node_info n;

    node_of_type(t, &n);
    if (plan->requested != AF_ACCEL_NONE && n.kind == plan->requested) {
        if (pod->requests.v[AF_RES_GPU] > n.allocatable.v[AF_RES_GPU] && n.kind == AF_ACCEL_GPU)
            return false;
        if (n.kind == AF_ACCEL_NEURON &&
            (pod->requests.v[AF_RES_NEURON] + pod->requests.v[AF_RES_NEURONDEVICE] >
                 n.allocatable.v[AF_RES_NEURON] ||
             pod->requests.v[AF_RES_NEURONCORE] > n.allocatable.v[AF_RES_NEURONCORE]))
            return false;
    }
    return af_plan_model_fits(plan, pod, &n);
}

static const char *value_of(enum af_prefer_key key, const struct af_instance_type *t)
{
    return key == AF_PREFER_KEY_TYPE ? t->name : t->family;
}

static bool have(const char *const *v, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(v[i], s))
            return true;
    return false;
}

/* Whether `t` is of tier `tier` of the plan: its class, and one of the tier's families
 * when the rule lists some. */
static bool in_tier(const struct af_plan *plan, int tier, const struct af_instance_type *t)
{
    const struct af_tier *tt = &plan->sel.tiers[tier];

    if (t->cls != tt->cls || !t->family)
        return false;
    if (!tt->spec || !tt->spec->n_families)
        return true;
    for (size_t i = 0; i < tt->spec->n_families; i++)
        if (!strcmp(tt->spec->families[i], t->family))
            return true;
    return false;
}

static void build_terms(const struct af_policy *pol, const struct af_catalog *cat,
                        const struct af_plan *plan, const struct af_pod_info *pod,
                        struct af_preferences *out)
{
    for (size_t k = 0; k < plan->sel.n_tiers && out->n_terms < AF_PREFER_TERMS; k++) {
        const struct af_tier *tt = &plan->sel.tiers[k];
        struct af_prefer_term *term = &out->terms[out->n_terms];
        int w;

        /* Added tiers ("any other NVIDIA GPU class") rank what is left: no preference. */
        if (tt->cls <= AF_CLASS_UNKNOWN || tt->cls >= AF_CLASS__COUNT)
            continue;
        if (af_plan_restrict_why(plan, tt->cls))
            continue;   /* explicit policy refuses the class: never preferred */
        memset(term, 0, sizeof(*term));
        for (size_t i = 0; cat && i < cat->n_types && term->n_values < AF_PREFER_VALUES; i++) {
            const struct af_instance_type *t = &cat->types[i];
            const char *v = value_of(pol->prefer.key, t);
            if (!v || !in_tier(plan, (int)k, t) || !holds(plan, pod, t) ||
                have(term->values, term->n_values, v))
                continue;
            term->values[term->n_values++] = v;
        }
        if (!term->n_values)
            continue;
        w = AF_PREFER_WEIGHT_TOP - 10 * (int)out->n_terms;
        term->weight = w < 10 ? 10 : w;
        term->tier = (int)k;
        term->cls = tt->cls;
        out->n_terms++;
    }
}

/*
 * What is known about a catalog type for this pod, as a reason to refuse it: devices that
 * cannot hold the model, a NeuronCore generation the stated artifact does not run on, a
 * class explicit policy (the tenant's classes) refuses. Only types of the kind the pod
 * requests are considered: the requests already keep it off the others.
 */
static bool known_unusable(const struct af_plan *plan, const struct af_pod_info *pod,
                           const struct af_instance_type *t)
{
    int gen;

    if (af_class_kind(t->cls) != plan->requested)
        return false;
    if (!holds(plan, pod, t))
        return true;
    gen = af_class_neuron_core_version(t->cls);
    if (plan->neuron_gen_stated && gen && gen != plan->neuron_gen)
        return true;
    /* A CPU-only pod's classes only rank (it does not reach filter): not required. */
    return plan->requested != AF_ACCEL_NONE && af_plan_restrict_why(plan, t->cls) != NULL;
}

static void build_required(const struct af_policy *pol, const struct af_catalog *cat,
                           const struct af_plan *plan, const struct af_pod_info *pod,
                           struct af_preferences *out)
{
    for (size_t i = 0; cat && i < cat->n_types && out->n_not_in < AF_PREFER_NOT_IN; i++) {
        const struct af_instance_type *t = &cat->types[i];
        const char *v = value_of(pol->prefer.key, t);
        bool all = true;

        if (!v || !known_unusable(plan, pod, t) || have(out->not_in, out->n_not_in, v))
            continue;
        /* A family is refused only when none of its types can be used. */
        for (size_t j = 0; pol->prefer.key == AF_PREFER_KEY_FAMILY && j < cat->n_types && all;
             j++)
            if (cat->types[j].family && !strcmp(cat->types[j].family, v))
                all = known_unusable(plan, pod, &cat->types[j]);
        if (all)
            out->not_in[out->n_not_in++] = v;
    }
}

void af_prefer_build(const struct af_policy *pol, const struct af_catalog *cat,
                     const struct af_plan *plan, const struct af_pod_info *pod, const char *room,
                     struct af_preferences *out)
{
    memset(out, 0, sizeof(*out));
    if (!pol)
        return;
    out->key = pol->prefer.key == AF_PREFER_KEY_TYPE ? AF_PREFER_LABEL_TYPE
                                                       : AF_PREFER_LABEL_FAMILY;
    out->spot = plan->spot_only;
    if (pol->prefer.required)
        build_required(pol, cat, plan, pod, out);
    if (room && pol->prefer.when == AF_PREFER_WHEN_NO_ROOM) {
        snprintf(out->why, sizeof(out->why),
                 "node %.100s has room for the pod in a tier filter accepts: no preference "
                 "(when: no-room)",
                 room);
        return;
    }
    build_terms(pol, cat, plan, pod, out);
    if (!out->n_terms)
        snprintf(out->why, sizeof(out->why), "no instance type of the plan's tiers (rule %.80s) "
                 "holds the pod", plan->sel.rule ? plan->sel.rule : "none");
}
