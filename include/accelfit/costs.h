/* SPDX-License-Identifier: Apache-2.0 */
/*
 * costs: what the cluster's running pods cost per hour, by tenant, namespace
 * and class, and what the cluster pays for accelerators nobody requested.
 *
 * Spend. A running pod (bound to a node whose price is known) costs its share
 * of the node's hourly price, af_pod_share_usd: price x the largest fraction it
 * requests of any resource the node offers. Unlike prioritize's marginal cost,
 * the first pod on an empty node does not pay for the whole node: spend counts
 * what pods take, and what nobody takes is idle cost, so no dollar is counted
 * twice. A tenant's spend is the sum over its running pods; spot prices and
 * prices from the accelfit.io/hourly-price annotation count like any other.
 *
 * Idle cost. On a priced accelerator node, the accelerators no pod requested
 * times their share of the node's price: price x (allocatable - requested) /
 * allocatable of the node's accelerator resource (nvidia.com/gpu, MIG slices,
 * shared GPUs, aws.amazon.com/neuron*, amd.com/gpu), but never more than the
 * node's price less its pods' spend (a pod that takes most of a node's CPU pays
 * for most of the node, idle accelerators or not), so spend plus idle cost never
 * exceeds what the nodes cost. CPU nodes have no idle accelerators. Summed per
 * class and per (node group, class).
 *
 * Prepaid capacity (docs/pricing.md#prepaid-capacity: an ODCR or a Capacity Block) is paid
 * by the hour whether pods run there or not. Spend stays what decisions charge: a pod on a
 * prepaid node pays its share of the node's price, which is 0 under `prices.prepaid:
 * marginal` (the default) and the amortized rate under `amortized`, so a tenant's spend and
 * its budget agree with what filter and prioritize saw. Beside it, each tenant's
 * `prepaid_usd_hr` is its pods' share of the prepaid nodes' rate, whatever the mode (under
 * `amortized` it is part of spend, under `marginal` it is not). A node's price in the totals,
 * and its idle cost, are at its rate (af_node_info.rate_usd_hr) for a prepaid node: what the
 * cluster really pays, not what a pod adds. Per reservation (one row per prepaid node, sorted
 * by reservation then node), devices held and idle, and the rate split between them by
 * devices, as /metrics' accelfit_prepaid_* gauges do (a node without accelerators counts one
 * device, held when a pod other than a DaemonSet or mirror pod runs there).
 *
 * af_costs_compute is pure (core): no I/O, no locks, no clock. A computed
 * struct af_costs is immutable and reference counted, so the HTTP side keeps
 * one per (snapshot, config) and hands it to any number of requests
 * (src/budget/memo.c: af_costs_memo).
 */
#ifndef AF_COSTS_H
#define AF_COSTS_H

#include <stdatomic.h>

#include "accelfit/config.h"
#include "accelfit/model.h"

#define AF_COSTS_CLASSES (AF_CLASS__COUNT + 1)   /* the last slot: unknown class */

struct af_cost_tenant {
    double spend_usd_hr;
    int pods;                                    /* running pods counted */
    double by_class[AF_COSTS_CLASSES];           /* spend by the class of the pod's node */
    double prepaid_usd_hr;                       /* share of prepaid nodes' rate its pods take */
    int prepaid_pods;                            /* of its pods, those on prepaid nodes */
};

struct af_cost_ns {
    const char *ns;                              /* borrowed from a pod of the snapshot */
    int tenant;                                  /* its owner, else the default tenant; -1 none
                                                    (pods of an unowned namespace go by label) */
    bool owned;                                  /* a tenant's `namespaces` hold it */
    double spend_usd_hr;                         /* of its pods, whatever their tenants */
    int pods;
};

struct af_cost_class {
    int nodes;
    int priced_nodes;
    double price_usd_hr;                         /* sum of the priced nodes' prices */
    double spend_usd_hr;
    double idle_usd_hr;
    int64_t devices;                             /* allocatable accelerators (priced nodes) */
    int64_t idle_devices;
};

struct af_cost_group {
    const char *group;                           /* borrowed from a node; NULL: no group */
    int cls;                                     /* enum af_class, AF_CLASS__COUNT unknown */
    int nodes;
    int64_t devices;
    int64_t idle_devices;
    double idle_usd_hr;
};

/* A prepaid node: what its reservation's rate buys and what of it sits idle. */
struct af_cost_prepaid {
    const char *node;                            /* borrowed from the node */
    const char *reservation;                     /* borrowed; NULL when not known */
    enum af_prepaid type;
    int cls;                                     /* enum af_class, AF_CLASS__COUNT unknown */
    bool rate_known;
    double rate_usd_hr;                          /* the node's rate (0 when not known) */
    int64_t devices;                             /* accelerators; 1 for a node without */
    int64_t idle_devices;
    double used_usd_hr;                          /* rate x held / devices */
    double idle_usd_hr;                          /* rate x idle / devices */
    double end;                                  /* unix time the reservation ends; 0 unknown */
};

struct af_costs {
    atomic_int refcnt;
    size_t n_tenants;                            /* as the policy's; 0 for a policy without */
    struct af_cost_tenant *tenants;
    size_t n_ns;
    struct af_cost_ns *ns;                       /* sorted by namespace */
    struct af_cost_class classes[AF_COSTS_CLASSES];
    size_t n_groups;
    struct af_cost_group *groups;                /* accelerator nodes, by group then class */
    double price_usd_hr;                         /* every priced node */
    double spend_usd_hr;
    double idle_usd_hr;
    int unpriced_nodes;
    int pods_counted;                            /* running pods on priced nodes */
    int pods_unpriced;                           /* running pods on nodes of unknown price */
    size_t n_prepaid;
    struct af_cost_prepaid *prepaid;             /* prepaid nodes, by reservation then node */
    double prepaid_usd_hr;                       /* their rates (those known) */
    double prepaid_used_usd_hr;
    double prepaid_idle_usd_hr;
    int64_t prepaid_devices;
    int64_t prepaid_idle_devices;
};

/*
 * Computes the costs of `pods` on `nodes` (as a snapshot holds them) for
 * the tenants of `pol` (may be NULL: no tenants). Pods not bound, or bound to a node not
 * in `nodes`, cost nothing. Strings are borrowed from the nodes and pods: the result is
 * valid while they are. Returns a new reference (refcnt 1). Cannot fail. O(pods + nodes +
 * namespaces x log namespaces), with a hash index of the nodes built per call.
 */
struct af_costs *af_costs_compute(const struct af_policy *pol, const struct af_node_view *nodes,
                                  size_t n_nodes, struct af_pod_brief *const *pods, size_t n_pods);
struct af_costs *af_costs_ref(struct af_costs *c);
void af_costs_unref(struct af_costs *c);         /* NULL is fine */

/* The accelerator resource of a node (what idle cost counts), AF_RES_PODS when it has none. */
enum af_res af_costs_accel_resource(const struct af_node_info *node);

/*
 * The accelerator devices of `node` (its allocatable af_costs_accel_resource; 0 when it
 * has none) and in `*in_use` how many of them the allocation `used` holds, at most all of
 * them: what idle cost (here) and `accelfit simulate` count. Neuron pods ask for whole
 * devices (aws.amazon.com/neuron or neurondevice, one set of devices under two names) or
 * for NeuronCores; cores count as the devices they sit on, af_class_neuron_cores_per_device
 * of the node's class to a device (2 on inf2 and trn1), rounded up: at least that many
 * devices have a core in use. On a node that offers only NeuronCores, devices are its
 * cores and a whole device held counts as its cores. Cannot fail.
 */
int64_t af_costs_devices(const struct af_node_info *node, const struct af_resources *used,
                         int64_t *in_use);

#endif
