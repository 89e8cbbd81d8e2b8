/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to the config module: the `utilization:` section of a policy
 * (src/config/utilization.c, docs/utilization.md). policy.c sets the defaults, calls
 * the loader for the section and releases it with the policy.
 */
#ifndef AF_CONFIG_UTILIZATION_H
#define AF_CONFIG_UTILIZATION_H

#include <yaml.h>

#include "accelfit/config.h"
#include "config/yamlnode.h"

/*
 * Loads the `utilization:` mapping `map` into p->util (over the defaults) and checks
 * keys, durations, percentages, label lists and queries. Returns 0, or
 * AF_ETYPE/AF_EINVAL with the error filled at the offending node.
 */
int af__utilization_load(struct af__ydoc *d, yaml_node_t *map, struct af_policy *p) AF_MUST_CHECK;

#endif
