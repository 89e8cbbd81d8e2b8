/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to the config module: the `rollouts:` section of a policy
 * (src/config/rollout.c). policy.c calls the loader for the section, config.c
 * the checks that need the catalog, and af_policy_free the release.
 */
#ifndef AF_CONFIG_ROLLOUT_H
#define AF_CONFIG_ROLLOUT_H

#include <stdbool.h>
#include <stddef.h>

#include <yaml.h>

#include "accelfit/config.h"
#include "accelfit/rollout.h"
#include "config/yamlnode.h"

/*
 * Loads the `rollouts:` sequence `list` into p->rollouts and p->n_rollouts and checks
 * everything that needs only the policy: keys, classes, shares and stages, durations and
 * times, the variant against the target classes' accelerator kind, and selectors that
 * could match the same pod. Returns 0, or AF_ETYPE/AF_EINVAL with the error filled at
 * the offending node. On failure what was loaded stays in `p` for af_policy_free.
 */
int af__rollouts_load(struct af__ydoc *d, yaml_node_t *list, struct af_policy *p) AF_MUST_CHECK;

/*
 * Checks each variant against the catalog: every resource amount must fit the largest
 * instance of at least one target class (devices, or NeuronCores for
 * aws.amazon.com/neuroncore). Returns 0, or AF_EINVAL with `err` filled at the amount's
 * line and column in p->source.
 */
int af__rollouts_check_catalog(const struct af_policy *p, const struct af_catalog *c,
                               struct af_error *err) AF_MUST_CHECK;

/* Frees the `n` rollouts of `r` and `r` itself. NULL is fine. */
void af__rollouts_free(struct af_rollout *r, size_t n);

#endif
