/* SPDX-License-Identifier: Apache-2.0 */
/*
 * prefer: the node affinity the admission webhook writes so that an autoscaler
 * (Karpenter) launches the hardware accelfit would choose (docs/policy.md,
 * "preferences"). Built from the pod's plan, the one filter and prioritize use
 * (af_plan_pod, then the tenant's restrictions), so a node launched for a
 * preference is one filter then accepts first.
 *
 * Knowledge narrows, guesses rank. Every tier of the plan becomes a preferred
 * term (the instance families, or types, of its class whose devices hold the
 * model), the first tier with the highest weight; a tenant with `capacity: spot`
 * adds the spot capacity type to each term. Only what is known may become
 * required affinity, and only behind preferences.required: the families whose
 * devices cannot hold the model (physics), the NeuronCore generations the pod's
 * stated artifact does not run on, the classes a tenant may not use, as NotIn
 * (a node without the label still matches, so a cluster without Karpenter's
 * labels is never narrowed further than filter narrows it).
 *
 * When: a preference can make Karpenter launch a node beside an idle one that
 * accelfit would accept (Karpenter treats preferences as required first). So by
 * default (`when: no-room`) preferences are written only when no node of the
 * cluster that filter would pass for the pod has room in accelfit's cache: then
 * the pod is waiting for a new node anyway, and the preference says which.
 *
 * Pure: no I/O, no allocation; values are borrowed from the catalog.
 */
#ifndef AF_PREFER_H
#define AF_PREFER_H

#include "accelfit/config.h"
#include "accelfit/decide.h"

#define AF_PREFER_TERMS 8          /* preferred terms written at most (the first tiers) */
#define AF_PREFER_VALUES 64        /* values of one term at most (more are left out) */
#define AF_PREFER_NOT_IN 128       /* values of the required NotIn at most (more: left out) */
#define AF_PREFER_WEIGHT_TOP 100   /* tier 1's weight; each next tier 10 less, at least 10 */

/* The label keys a preference names. */
#define AF_PREFER_LABEL_FAMILY "karpenter.k8s.aws/instance-family"
#define AF_PREFER_LABEL_TYPE "node.kubernetes.io/instance-type"
#define AF_PREFER_LABEL_CAPACITY "karpenter.sh/capacity-type"

struct af_prefer_term {
    int weight;                            /* 1..100 */
    int tier;                              /* index into plan->sel.tiers */
    enum af_class cls;
    const char *values[AF_PREFER_VALUES];  /* families or types, borrowed from the catalog */
    size_t n_values;
};

struct af_preferences {
    const char *key;                       /* AF_PREFER_LABEL_FAMILY or _TYPE; static */
    bool spot;                             /* each term also asks for capacity type spot */
    struct af_prefer_term terms[AF_PREFER_TERMS];
    size_t n_terms;
    /* Required affinity (preferences.required only): key NotIn these values. */
    const char *not_in[AF_PREFER_NOT_IN];
    size_t n_not_in;
    /* Why there are no terms (the `when` rule, nothing usable), for logs; "" otherwise. */
    char why[AF_REASON_MAX];
};

/*
 * Whether the policy's preferences apply to `pod`: enabled, the pod labelled
 * accelfit.io/managed "true" (the webhook's objectSelector), and in one of the listed
 * namespaces or tenants (every pod when neither list is given). Cannot fail.
 */
bool af_prefer_selects(const struct af_policy *pol, const struct af_pod_info *pod);

/*
 * The index of a node of `nodes` where filter would pass the pod and the cache shows room
 * (the node not cordoned), or -1 when there is none. `scratch` holds n decisions (filled).
 * Cannot fail.
 */
long af_prefer_room(const struct af_policy *pol, const struct af_plan *plan,
                    const struct af_pod_info *pod, const struct af_node_view *nodes, size_t n,
                    struct af_node_decision *scratch);

/*
 * Builds the preferences for a pod from its plan. `room` is a node with room (or NULL,
 * af_prefer_room): under `when: no-room` there are then no preferred terms, and `why` says
 * so; required values are built (with preferences.required) either way. Cannot fail.
 */
void af_prefer_build(const struct af_policy *pol, const struct af_catalog *cat,
                     const struct af_plan *plan, const struct af_pod_info *pod, const char *room,
                     struct af_preferences *out);

/*
 * What the webhook does for a selected pod, in one call: under `when: no-room`,
 * af_prefer_room over `nodes` (the cluster as the cache shows it), then af_prefer_build
 * with the node found. Returns that node's index, -1 when none (or not looked for).
 * `scratch` holds n decisions. Cannot fail. The simulator's autoscaler calls the same.
 */
long af_prefer_for(const struct af_policy *pol, const struct af_catalog *cat,
                   const struct af_plan *plan, const struct af_pod_info *pod,
                   const struct af_node_view *nodes, size_t n, struct af_node_decision *scratch,
                   struct af_preferences *out);

/* What a node of catalog type `t` allocates as the model counts it: its vCPUs, memory and
 * devices (NeuronCores for Neuron), nothing reserved. Cannot fail. */
void af_prefer_type_allocatable(const struct af_instance_type *t, struct af_resources *out);

#endif
