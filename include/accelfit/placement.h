/* SPDX-License-Identifier: Apache-2.0 */
/*
 * placement: what a pod says about the nodes it may run on, as kube-scheduler reads it —
 * spec.nodeName, spec.nodeSelector and the required node affinity
 * (requiredDuringSchedulingIgnoredDuringExecution: any of its nodeSelectorTerms, each the
 * AND of its matchExpressions and matchFields). Preferred node affinity is a preference and
 * admits every node; it is not kept.
 *
 * The codec keeps it for pods that rollouts steer (label accelfit.io/managed: "true"), so a
 * variant rollout does not rewrite a pod into one no target node can take (docs/rollouts.md,
 * "A pod pinned to the source"). Pure: no I/O.
 */
#ifndef AF_PLACEMENT_H
#define AF_PLACEMENT_H

#include <stdbool.h>
#include <stddef.h>

#include "accelfit/model.h"

enum af_match_op {
    AF_MATCH_IN,
    AF_MATCH_NOT_IN,
    AF_MATCH_EXISTS,
    AF_MATCH_DOES_NOT_EXIST,
    AF_MATCH_GT,
    AF_MATCH_LT,
    AF_MATCH_UNKNOWN,        /* an operator the API server would not accept: matches nothing */
};

/* One requirement: a node label (or, `field`, the node's metadata.name) against values. */
struct af_match_expr {
    char *key;
    enum af_match_op op;
    char **values;
    size_t n_values;
    bool field;              /* from matchFields: the key is metadata.name */
};

/* The AND of its requirements; a term with none matches no node (as the API server's). */
struct af_match_term {
    struct af_match_expr *exprs;
    size_t n_exprs;
};

struct af_placement {
    char *node_name;                 /* spec.nodeName, or NULL */
    struct af_match_expr *selector;  /* spec.nodeSelector, one In requirement per key */
    size_t n_selector;
    bool has_required;               /* required node affinity is set: one term must match */
    struct af_match_term *terms;
    size_t n_terms;
};

/* True when the placement says anything (NULL is fine: says nothing). Cannot fail. */
bool af_placement_constrains(const struct af_placement *p);

/* True when node `n` satisfies nodeName, nodeSelector and the required node affinity of
 * `p` (NULL admits every node). Cannot fail. */
bool af_placement_admits(const struct af_placement *p, const struct af_node_info *n);

/* A short description of what `p` asks for, for reasons ("nodeSelector
 * node.kubernetes.io/instance-type=g5.xlarge"), into `out`. Cannot fail. */
void af_placement_describe(const struct af_placement *p, char *out, size_t n);

/* A deep copy of `p` (new; NULL for NULL). Cannot fail. */
struct af_placement *af_placement_copy(const struct af_placement *p);
void af_placement_free(struct af_placement *p);   /* NULL is fine */

#endif
