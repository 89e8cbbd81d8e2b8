/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A burst of admission reviews split between two accelfit replicas, as the API server sends
 * them when a ReplicaSet scales up with the webhook behind a Service of two pods: the sides
 * the answers gave, whether any was decided without the claim ledger, and the latency of
 * each answer (docs/rollouts.md, "One share, whichever replica answers").
 */
#ifndef AF_TEST_BURST_H
#define AF_TEST_BURST_H

#include <stdbool.h>
#include <stddef.h>

#include "accelfit/rollout.h"
#include "support/http_client.h"

#define AF_TEST_BURST_CLIENTS 4   /* two keep-alive clients on each replica */
#define AF_TEST_BURST_MAX 100     /* reviews per client at most */

struct af_test_burst_client {
    const struct af_test_server *s;
    const char *body;
    int n;
    /* what came back */
    int target, source;
    int local;                    /* answers warning that the side was decided locally */
    int failed;                   /* no answer, not 200, or no side */
    double ms[AF_TEST_BURST_MAX];
};

/*
 * POSTs `n` copies of the AdmissionReview `body` to /mutate, split evenly between `a` and
 * `b`, from AF_TEST_BURST_CLIENTS threads at once (TLS certificates are not verified), and
 * waits for every answer. out[] has AF_TEST_BURST_CLIENTS entries.
 */
void af_test_burst(const struct af_test_server *a, const struct af_test_server *b,
                   const char *body, int n, struct af_test_burst_client *out);

/* What the bursts of a test gave, added up. */
#define AF_TEST_BURST_TOTAL_MAX 1000
struct af_test_burst_sum {
    int target, source, local, failed;
    size_t n_ms;
    double ms[AF_TEST_BURST_TOTAL_MAX];
};
/* Adds one burst's AF_TEST_BURST_CLIENTS clients to `sum` (zeroed first). */
void af_test_burst_add(struct af_test_burst_sum *sum, const struct af_test_burst_client *cl);

/* The side an AdmissionReview answer gave (its patch's accelfit.io/rollout-side), or NONE;
 * *local: a warning says the side was decided without the ledger. */
enum af_rollout_side af_test_answered_side(const char *answer, size_t len, bool *local);

/* What one replica alone gives `n` new units at `share`, from none (af_rollout_choose). */
int af_test_single_replica_target(double share, int n);

/* The p-th percentile (0..100) of `v` (sorted in place). */
double af_test_percentile(double *v, size_t n, double p);

#endif
