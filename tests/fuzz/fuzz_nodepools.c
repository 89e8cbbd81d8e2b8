/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Karpenter NodePools for `accelfit simulate --autoscale` (docs/simulate.md,
 * "Autoscaling") on arbitrary bytes: af_sim_nodepools_load must accept or refuse each
 * (never crash), a refusal must say why and keep nothing, and accepted pools must be what
 * the provisioner relies on: named, unique, weights 0..100 heaviest first, requirement
 * values present for In and NotIn, taints with a key and a known effect.
 */
#include "accelfit/simulate.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct af_sim_nodepools np;
    struct af_error err;
    int rc;

    memset(&np, 0, sizeof(np));
    memset(&err, 0, sizeof(err));
    (void)fuzz_config();   /* logging off */
    rc = af_sim_nodepools_load("fuzz", (const char *)data, size, &np, &err);
    if (rc != 0) {
        FUZZ_CHECK(rc < 0 && err.text[0], "rc %d without a reason", rc);
        FUZZ_CHECK(np.n == 0 && np.pools == NULL, "a refused file kept %zu pools", np.n);
        return 0;
    }
    FUZZ_CHECK(np.n > 0, "accepted without a NodePool");
    for (size_t i = 0; i < np.n; i++) {
        const struct af_sim_nodepool *p = &np.pools[i];
        FUZZ_CHECK(p->name && p->name[0], "pool %zu has no name", i);
        FUZZ_CHECK(p->weight >= 0 && p->weight <= 100, "pool %s weight %d", p->name, p->weight);
        FUZZ_CHECK(i == 0 || np.pools[i - 1].weight >= p->weight, "pool %s out of order",
                   p->name);
        for (size_t j = 0; j < i; j++)
            FUZZ_CHECK(strcmp(np.pools[j].name, p->name), "pool %s twice", p->name);
        for (size_t k = 0; k < p->n_reqs; k++)
            for (size_t v = 0; v < p->reqs[k].n_values; v++)
                FUZZ_CHECK(p->reqs[k].values[v] != NULL, "pool %s: a NULL value", p->name);
        for (size_t k = 0; k < p->n_taints; k++)
            FUZZ_CHECK(p->taints[k].key && p->taints[k].effect &&
                           (!strcmp(p->taints[k].effect, "NoSchedule") ||
                            !strcmp(p->taints[k].effect, "PreferNoSchedule") ||
                            !strcmp(p->taints[k].effect, "NoExecute")),
                       "pool %s: taint %zu", p->name, k);
    }
    af_sim_nodepools_release(&np);
    return 0;
}
