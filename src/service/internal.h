/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the webhook (mutate.c) and the claim worker (claims.c) share: a parked admission
 * review and the steps of answering it. src/service only.
 */
#ifndef AF_SERVICE_INTERNAL_H
#define AF_SERVICE_INTERNAL_H

#include "accelfit/decide.h"
#include "accelfit/dra.h"

#include "accelfit/codec.h"
#include "accelfit/service.h"
#include "accelfit/webhook.h"
#include "accelfit/rollout.h"

enum af__claim_phase {
    AF__CLAIM_NONE = 0,
    AF__CLAIM_PROBE,    /* the HTTP thread: does the pod's unit need a claim? (decides nothing) */
    AF__CLAIM_DECIDE,   /* the worker: decide and remember under job->id */
};

/* One admission review waiting for its claim. */
struct af__mutate_job {
    struct af__mutate_job *next;
    enum af__claim_phase phase;
    bool wants;                       /* PROBE: a new unit, to be claimed */
    struct af_admission *a;           /* owned */
    struct af_deferred later;
    uint64_t t0;                      /* monotonic ns of its arrival */
    char id[48];                      /* its ledger entry */
    bool decided, claimed;            /* claimed: *claim is a new entry */
    bool reserved;                    /* PROBE: answered from a reserve (job->id), no wait */
    struct af_rollout_claim claim;
    struct af_buf patch;
    struct af_warnings w;
};

/* Decides the job's pod, remembering a new unit's side under job->id (job->claimed, claim);
 * the patch and warnings into the job. */
void af__mutate_claim_decide(struct af_service *svc, struct af__mutate_job *job);
/* Decides as af_webhook_mutate does, without a claim. */
void af__mutate_local_decide(struct af_service *svc, struct af__mutate_job *job);
/* The AdmissionReview answer (status returned: 200, or 500 when even a bare one does not fit). */
int af__mutate_answer(const struct af_admission *a, const struct af_buf *patch,
                      struct af_warnings *w, struct af_buf *out);
/* Queues the job for the worker, which answers it (steals it). */
void af__claims_enqueue(struct af_claims *c, struct af__mutate_job *job);
/* Decides the job's pod from this replica's reserve of its rollout when there is one and
 * the pod can take it (the patch and warnings into the job); false: it waits for a claim. */
bool af__mutate_try_reserve(struct af_service *svc, struct af__mutate_job *job);
/*
 * This replica's reserve of `rollout` (claims.c): its ledger entry into id and its
 * generation, removed from those held, and true; false when none is held within its lease.
 * Either way the worker is asked to claim the rollout's next reserve.
 */
bool af__claims_take(struct af_claims *c, const char *rollout, char *id, size_t id_size,
                     uint64_t *generation);
/* A unit answered from a reserve (af_claims_stats.ahead). */
void af__claims_count_ahead(struct af_claims *c);
/* A reserve taken that its pod could not use: given back with the next write, with the rest
 * of its block. */
void af__claims_give_back(struct af_claims *c, const char *rollout, const char *id,
                          uint64_t generation);

/* The service's part of the decision order (accelfit/decide.h; service.c): the rollouts'
 * ledger (step 2), the tenants' books (3) and live utilization (4, 5). */
struct af__decide_ctx {
    struct af_service *svc;
    const struct af_config *cfg;
    const struct af_snapshot *snap;
    unsigned rollout_flags;            /* af_rollouts_steer's (AF_ROLLOUTS_PEEK: /explain) */
    unsigned budget_flags;             /* af_budget_steer's */
    struct af_arena *ar;               /* scratch of the live filter */
    struct af_utilization_snapshot *us;       /* for the live score; NULL: none */
    struct af_rollout_decision rd;     /* step 2's decision */
    /* DRA (service/dra.h): the demand of the pod's claims, and the request's own copies of
     * the views, which the check before step 4 marks full where the claims do not fit */
    const struct af_dra_demand *dra;
    struct af_node_view *own_views;
};

/* af_plan_pod's plan, from `m` when it has it (m may be NULL: planned anew). */
void af__plan_memo_plan(struct af_plan_memo *m, const struct af_config *cfg,
                        const struct af_policy *pol, const struct af_catalog *cat,
                        const struct af_pod_info *pod, struct af_plan *out);

/* The hooks over `d`, in `h`, returned. */
const struct af_decide_hooks *af__service_hooks(struct af__decide_ctx *d,
                                                struct af_decide_hooks *h);

#endif
