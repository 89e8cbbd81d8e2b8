/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tenant: the teams that share a cluster, as the policy's `tenants:` section
 * names them (docs/policy.md#tenants), and which tenant a pod belongs to.
 *
 * A tenant has a budget in dollars per hour, the classes it may use, the
 * classes that count as premium for it, and what happens when a pod would take
 * it over budget: `soft` ranks premium nodes lower, `hard` refuses them. A pod
 * belongs to the tenant whose `namespaces` hold its namespace; failing that, to
 * the tenant its `accelfit.io/tenant` label names; failing that, to the default
 * tenant. The namespace wins because who may create pods in a namespace is
 * governed by RBAC, while anyone who can create a pod can write a label: a
 * label must not move a pod out of its namespace's budget.
 *
 * Invariants of a loaded policy: the default tenant (named "default") is always
 * the last entry, whether or not the file lists it; names are unique; each
 * namespace belongs to at most one tenant; `ns_index` is sorted by namespace.
 */
#ifndef AF_TENANT_H
#define AF_TENANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accelfit/model.h"

struct af_policy;

#define AF_TENANT_DEFAULT "default"
/* Most tenants one policy may list (the default included): bounds the metric series. */
#define AF_TENANTS_MAX 200

enum af_over_budget { AF_OVER_BUDGET_SOFT = 0, AF_OVER_BUDGET_HARD };

struct af_tenant {
    char *name;
    char **namespaces;         /* the namespaces it owns (none for the default tenant) */
    size_t n_namespaces;
    bool has_budget;
    double budget_usd_hr;      /* >= 0 when has_budget */
    enum af_over_budget over_budget;
    uint32_t classes;          /* bit (1u << class) it may use; 0: every class */
    uint32_t premium;          /* bit (1u << class): premium for it (default: every
                                  accelerator class, that is every class but cpu) */
    bool spot_only;            /* `capacity: spot`: only spot nodes */
    int line;                  /* where it starts in its file; 0 when synthesized */
};

/* One namespace and the index of the tenant that owns it. */
struct af_tenant_ns {
    const char *ns;            /* borrowed from the tenant's list */
    size_t tenant;
};

/* How a pod was matched to its tenant. */
enum af_tenant_match { AF_TENANT_BY_NAMESPACE = 0, AF_TENANT_BY_LABEL, AF_TENANT_BY_DEFAULT };

const char *af_tenant_match_name(enum af_tenant_match m);   /* "namespace", ... Static. */
const char *af_over_budget_name(enum af_over_budget o);     /* "soft", "hard". Static. */

/*
 * The index (into pol->tenants) of the tenant `pod` belongs to, with how it matched in
 * *how (may be NULL); -1 when the policy has no tenants (a hand-built policy). Cannot
 * fail. O(log namespaces + tenants).
 */
int af_tenant_of(const struct af_policy *pol, const struct af_pod_info *pod,
                 enum af_tenant_match *how);

/*
 * Whether the policy lists tenants (a `tenants:` section with at least one entry, the
 * default tenant included), rather than holding only the default tenant every loaded
 * policy gets. Cannot fail.
 */
bool af_tenants_listed(const struct af_policy *pol);

#endif
