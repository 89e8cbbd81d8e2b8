/* SPDX-License-Identifier: Apache-2.0 */
/*
 * webhook: the mutating admission webhook (POST /mutate) that steers new pods into their
 * rollout's side, the deferred answers it gives while a unit's side is claimed, and the
 * claim worker that writes the claims to the API server's ledger (docs/rollouts.md).
 * src/service/mutate.c, src/service/claims.c.
 */
#ifndef AF_WEBHOOK_H
#define AF_WEBHOOK_H

#include "accelfit/service.h"
#include "accelfit/util.h"

/*
 * POST /mutate: the mutating admission webhook (manifests/overlays/tls/webhook.yaml). `body` is an
 * AdmissionReview (admission.k8s.io/v1) for a Pod CREATE. The pod's rollout and side come
 * from svc->rollouts (af_rollouts_decide); the target side of a variant rollout is patched
 * with the variant, the source side and placement rollouts get only the annotations
 * accelfit.io/rollout and accelfit.io/rollout-side. A dry run is decided and patched the
 * same way without anything remembered. A pod in no rollout, no rollout state, a cache not
 * ready, a pod the variant cannot be applied to, or any failure is answered allowed with
 * no patch (with a warning where a person should know).
 * Returns 200 with the AdmissionReview response in `out`, or 400 with {"error": ...} for a
 * body that is not an AdmissionReview (the API server then applies the failure policy).
 * A review that is not a Pod CREATE is answered allowed, unchanged. Cannot fail otherwise.
 */
int af_webhook_mutate(struct af_service *svc, const char *body, size_t len, struct af_buf *out);

/*
 * A deferred answer: the transport's mailbox for an answer a worker thread finishes.
 * done(ud, ticket, status, body) is called exactly once, from any thread; it steals *body
 * (af_buf_release is the transport's) and must not block.
 */
struct af_deferred {
    void (*done)(void *ud, uint64_t ticket, int status, struct af_buf *body);
    void *ud;
    uint64_t ticket;
};
#define AF_WEBHOOK_DEFERRED (-1)

/*
 * af_webhook_mutate, except that with svc->claims and `later` a new unit of a rollout is
 * claimed in the API server's ledger first (docs/rollouts.md): then nothing is written to
 * `out`, AF_WEBHOOK_DEFERRED is returned, and the answer goes to later->done once the claim
 * is written or its deadline has passed (then decided locally, with a warning).
 */
int af_webhook_mutate_deferred(struct af_service *svc, const char *body, size_t len, struct af_buf *out,
                         const struct af_deferred *later);

/*
 * The claim worker (src/service/claims.c): one thread that claims new units in the ledger
 * (`kc`, stolen; accelfit/kube.h), in batches, each within `timeout_s` of the request's
 * arrival. Start after svc is filled in; stop (which answers whatever is queued, locally)
 * before svc's parts are freed and before the af_kube of `kc` stops. NULL is fine to stop.
 */
struct af_kube_claims;
/* The claim deadline: below the webhook's timeoutSeconds (5, manifests/overlays/tls). */
#define AF_CLAIM_TIMEOUT_S 3.0
struct af_claims *af_claims_start(struct af_service *svc, struct af_kube_claims *kc,
                                  double timeout_s);
void af_claims_stop(struct af_claims *c);
/* What the worker did since it started, for /metrics. Thread-safe; NULL gives zeros. */
struct af_claims_stats {
    uint64_t written;     /* units whose side was claimed in the ledger before the answer */
    uint64_t local;       /* units decided locally: the ledger could not be written in time */
    uint64_t conflicts;   /* writes refused because another replica wrote first */
    uint64_t writes;      /* ledger writes that succeeded (a batch, a block of reserves) */
    uint64_t reserved;    /* reserves claimed ahead (a side for the next new unit) */
    uint64_t ahead;       /* units answered at once from a reserve (not in written) */
};
void af_claims_stats(struct af_claims *c, struct af_claims_stats *out);

#endif
