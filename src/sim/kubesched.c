/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A model of kube-scheduler's default profile, for the simulator's side-by-side:
 * the filters that decide where a pod of a trace may go (NodeUnschedulable,
 * NodeAffinity for nodeSelector, TaintToleration, NodeResourcesFit), the scores
 * that rank those nodes (NodeResourcesFit with LeastAllocated over cpu and memory,
 * NodeResourcesBalancedAllocation, TaintToleration's PreferNoSchedule count) and
 * numFeasibleNodesToFind, which caps how many feasible nodes a scheduling cycle
 * looks for. The arithmetic follows upstream (pkg/scheduler/framework/plugins/
 * noderesources, schedule_one.go), integer divisions included. What it leaves out
 * is in docs/simulate.md (affinity terms, topology spread, image locality, ties
 * broken at random upstream and by scan order here).
 */
#include "accelfit/simulate.h"

#include <math.h>
#include <string.h>

#include "accelfit/cache.h"
#include "accelfit/banned.h"

/* ---- filters ------------------------------------------------------------------------------ */

static bool tolerates(const struct af_sim_pod *pod, const char *key, const char *value,
                      const char *effect)
{
    for (size_t i = 0; i < pod->n_tolerations; i++) {
        const struct af_toleration *t = &pod->tolerations[i];
        /* An empty effect matches every effect; an empty key with Exists matches every key. */
        if (t->effect && *t->effect && strcmp(t->effect, effect))
            continue;
        if (t->key && *t->key && strcmp(t->key, key))
            continue;
        if ((!t->key || !*t->key) && strcmp(t->op, "Exists"))
            continue;
        if (!strcmp(t->op, "Exists"))
            return true;
        if (!strcmp(t->value ? t->value : "", value ? value : ""))
            return true;
    }
    return false;
}

static const char *label(const struct af_sim_node *n, const char *key)
{
    for (size_t i = 0; i < n->n_labels; i++)
        if (!strcmp(n->labels[i].key, key))
            return n->labels[i].value;
    return NULL;
}

enum af_ks_fit af_ks_filter(const struct af_sim_pod *pod, const struct af_ks_node *n)
{
    const struct af_node_info *info = n->node->info;
    const struct af_resources *req = &pod->info->requests, *used = &n->view->used;

    if (info->unschedulable &&
        !tolerates(pod, "node.kubernetes.io/unschedulable", NULL, "NoSchedule"))
        return AF_KS_UNSCHEDULABLE;
    for (size_t i = 0; i < pod->n_node_selector; i++) {
        const char *v = label(n->node, pod->node_selector[i].key);
        if (!v || strcmp(v, pod->node_selector[i].value))
            return AF_KS_NODE_SELECTOR;
    }
    for (size_t i = 0; i < n->node->n_taints; i++) {
        const struct af_sim_taint *t = &n->node->taints[i];
        if (strcmp(t->effect, "NoSchedule") && strcmp(t->effect, "NoExecute"))
            continue;
        if (!tolerates(pod, t->key, t->value, t->effect))
            return AF_KS_TAINT;
    }
    /* NodeResourcesFit: one more pod, and every requested resource within what is left. */
    if (info->allocatable.v[AF_RES_PODS] > 0 && n->view->npods + 1 > info->allocatable.v[AF_RES_PODS])
        return AF_KS_RESOURCES;
    for (int r = 0; r < AF_RES__COUNT; r++) {
        if (r == AF_RES_PODS || req->v[r] <= 0)
            continue;
        if (req->v[r] > info->allocatable.v[r] - used->v[r])
            return AF_KS_RESOURCES;
    }
    return AF_KS_FIT;
}

/* ---- scores ------------------------------------------------------------------------------- */

static int64_t nonzero(int64_t v, int64_t dflt)
{
    return v > 0 ? v : dflt;
}

static int64_t least_requested(int64_t requested, int64_t capacity)
{
    if (capacity <= 0 || requested > capacity)
        return 0;
    return (capacity - requested) * AF_KS_MAX_NODE_SCORE / capacity;
}

int64_t af_ks_least_allocated(const struct af_sim_pod *pod, const struct af_ks_node *n)
{
    const struct af_resources *req = &pod->info->requests, *alloc = &n->node->info->allocatable;
    int64_t cpu = n->nonzero_cpu + nonzero(req->v[AF_RES_CPU], AF_KS_DEFAULT_MILLI_CPU);
    int64_t mem = n->nonzero_mem + nonzero(req->v[AF_RES_MEMORY], AF_KS_DEFAULT_MEMORY);

    /* Weighted by each resource's weight (1 and 1), divided by the weights' sum. */
    return (least_requested(cpu, alloc->v[AF_RES_CPU]) +
            least_requested(mem, alloc->v[AF_RES_MEMORY])) /
           2;
}

int64_t af_ks_balanced(const struct af_sim_pod *pod, const struct af_ks_node *n)
{
    const struct af_resources *req = &pod->info->requests, *alloc = &n->node->info->allocatable;
    double f[2];
    int res[2] = {AF_RES_CPU, AF_RES_MEMORY};

    for (int i = 0; i < 2; i++) {
        int r = res[i];
        double want = (double)n->view->used.v[r] + (double)req->v[r];
        f[i] = alloc->v[r] > 0 ? want / (double)alloc->v[r] : 0;
        if (f[i] > 1)
            f[i] = 1;
    }
    /* Two resources: the standard deviation is half their difference. */
    return (int64_t)((1 - fabs(f[0] - f[1]) / 2) * AF_KS_MAX_NODE_SCORE);
}

int af_ks_intolerable_prefer(const struct af_sim_pod *pod, const struct af_ks_node *n)
{
    int count = 0;

    for (size_t i = 0; i < n->node->n_taints; i++) {
        const struct af_sim_taint *t = &n->node->taints[i];
        if (!strcmp(t->effect, "PreferNoSchedule") && !tolerates(pod, t->key, t->value, t->effect))
            count++;
    }
    return count;
}

/* ---- the scan --------------------------------------------------------------------------------- */

#define MIN_FEASIBLE_NODES_TO_FIND 100
#define MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND 5

int af_ks_feasible_to_find(int percentage, int n_nodes)
{
    int n;

    if (n_nodes < MIN_FEASIBLE_NODES_TO_FIND || percentage >= 100)
        return n_nodes;
    if (percentage <= 0) {
        percentage = 50 - n_nodes / 125;
        if (percentage < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
            percentage = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND;
    }
    n = (int)((int64_t)n_nodes * percentage / 100);
    return n < MIN_FEASIBLE_NODES_TO_FIND ? MIN_FEASIBLE_NODES_TO_FIND : n;
}
