/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Which tenant a pod belongs to (accelfit/tenant.h): the owner of its namespace,
 * else the tenant its accelfit.io/tenant label names, else the default tenant.
 * The namespace wins because RBAC governs who creates pods in a namespace, while
 * anyone who creates a pod writes its labels. Pure: the policy's sorted
 * namespace index is searched, nothing is allocated.
 */
#include <stdlib.h>
#include <string.h>

#include "accelfit/config.h"
#include "accelfit/tenant.h"
#include "accelfit/banned.h"

const char *af_tenant_match_name(enum af_tenant_match m)
{
    switch (m) {
    case AF_TENANT_BY_NAMESPACE:
        return "namespace";
    case AF_TENANT_BY_LABEL:
        return "label";
    case AF_TENANT_BY_DEFAULT:
        break;
    }
    return "default";
}

const char *af_over_budget_name(enum af_over_budget o)
{
    return o == AF_OVER_BUDGET_HARD ? "hard" : "soft";
}

static int cmp_ns(const void *a, const void *b)
{
    return strcmp(((const struct af_tenant_ns *)a)->ns, ((const struct af_tenant_ns *)b)->ns);
}

int af_tenant_of(const struct af_policy *pol, const struct af_pod_info *pod,
                 enum af_tenant_match *how)
{
    enum af_tenant_match m = AF_TENANT_BY_DEFAULT;
    int found;

    if (!pol || !pol->n_tenants)
        return -1;
    found = (int)pol->n_tenants - 1;
    if (pod && pod->ns) {
        struct af_tenant_ns key = {pod->ns, 0};
        const struct af_tenant_ns *hit =
            bsearch(&key, pol->tenant_ns, pol->n_tenant_ns, sizeof(key), cmp_ns);
        if (hit) {
            found = (int)hit->tenant;
            m = AF_TENANT_BY_NAMESPACE;
        }
    }
    if (m == AF_TENANT_BY_DEFAULT && pod && pod->tenant) {
        for (size_t i = 0; i < pol->n_tenants; i++)
            if (!strcmp(pol->tenants[i].name, pod->tenant)) {
                found = (int)i;
                m = AF_TENANT_BY_LABEL;
                break;
            }
    }
    if (how)
        *how = m;
    return found;
}

bool af_tenants_listed(const struct af_policy *pol)
{
    /* the synthesized default is the only tenant without a line in its file */
    return pol && (pol->n_tenants > 1 || (pol->n_tenants == 1 && pol->tenants[0].line > 0));
}
