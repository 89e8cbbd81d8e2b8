/* SPDX-License-Identifier: Apache-2.0 */
/* The prices: section's prepaid and discount keys (src/config/pricing.c, docs/policy.md). */
#ifndef AF_CONFIG_PRICING_H
#define AF_CONFIG_PRICING_H

#include "accelfit/config.h"
#include "config/yamlnode.h"

/* Reads prepaid, capacity_block_end_margin, keep_prepaid_whole and discounts of the
 * mapping `prices` (its keys already checked) into `p`. 0, or an error at the node. */
int af__pricing_load(struct af__ydoc *d, yaml_node_t *prices, struct af_policy *p) AF_MUST_CHECK;
void af__pricing_free(struct af_policy *p);

#endif
