/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to the config module: the `tenants:` section of a policy
 * (src/config/tenant.c). policy.c calls the loader once per policy, with or
 * without the section, and af_policy_free the release.
 */
#ifndef AF_CONFIG_TENANT_H
#define AF_CONFIG_TENANT_H

#include <yaml.h>

#include "accelfit/config.h"
#include "config/yamlnode.h"

/*
 * Loads the `tenants:` sequence `list` (NULL when the policy has none) into
 * p->tenants, always ending with the default tenant, and builds p->tenant_ns. Checks
 * keys, names, namespaces (a namespace claimed twice is an error), budgets, classes and
 * the over-budget mode. Returns 0, or AF_ETYPE/AF_EINVAL with the error filled at the
 * offending node. On failure what was loaded stays in `p` for af_policy_free.
 */
int af__tenants_load(struct af__ydoc *d, yaml_node_t *list, struct af_policy *p) AF_MUST_CHECK;

/* Frees p->tenants and p->tenant_ns. */
void af__tenants_free(struct af_policy *p);

#endif
