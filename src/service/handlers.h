/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the extender's handlers share (not a public interface):
 *   service.c           the candidates of a request, error answers, and the service's
 *                       hooks of the decision order
 *   readiness.c         whether a snapshot can be decided on; /readyz
 *   verbs.c             the entry point; filter, prioritize and preempt
 *   explain.c           /explain
 *   events.c            the Events the verbs post
 *   service_rollouts.c  GET /rollouts, POST /rollouts/NAME/ack
 *   recommend.c         /recommend
 * verbs.c has the entry point, which hands /explain to explain.c; both use service.c for
 * the candidates and the error answers. src/service only.
 */
#ifndef AF_SERVICE_HANDLERS_H
#define AF_SERVICE_HANDLERS_H

#include <stdbool.h>
#include <stddef.h>

#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/service.h"

/* ---- readiness.c ------------------------------------------------------------------------- */

/* Whether `snap` (may be NULL) can be decided on; *why (may be NULL) says why not, or "ready". */
bool af__service_snapshot_ready(struct af_service *svc, const struct af_snapshot *snap,
                                const char **why);

/* ---- service.c --------------------------------------------------------------------------- */

/* "pass", "failed" or "unresolvable". */
const char *af__service_verdict_name(enum af_verdict v);
/* A 400 whose message is `err`, prefixed as every accelfit error is. */
int af__service_bad_query(struct af_buf *out, size_t base, const char *err);

/* The candidates of a decoded request as the core wants them (arena memory). */
struct af__candidates {
    size_t n;
    struct af_node_view *views;
    const char **names;
};

/* The candidates of `args` with what `snap` (may be NULL) knows of them, in `ar`. */
void af__service_candidates(struct af_arena *ar, const struct af_ext_args *args,
                            const struct af_snapshot *snap, struct af__candidates *c);
/* "accelfit: WHAT: why" of a request that could not be decoded, into errbuf. */
void af__service_request_error(struct af_buf *errbuf, const char *what,
                               const struct af_error *err, int rc, size_t len);

/* ---- explain.c: POST /explain (status returned; the answer appended to out) -------------- */

int af__service_explain(struct af_service *svc, struct af_config *cfg, const char *body,
                        size_t len, struct af_buf *out, struct af_request_stats *st);

/* ---- events.c ---------------------------------------------------------------------------- */

/* A Warning Event on the pod: no candidate of the `n` decisions passed, the commonest
 * reasons counted. */
void af__service_post_all_rejected(struct af_service *svc, const struct af_pod_info *pod,
                                   const struct af_node_decision *d, size_t n);
/* A Warning Event, once per pod, when its accelfit annotations could not be read. */
void af__service_warn_bad_annotations(struct af_service *svc, const struct af_pod_info *pod,
                                      const struct af_plan *plan);
/* A Normal Event when filter fell back past the first tier. */
void af__service_post_fallback(struct af_service *svc, const struct af_pod_info *pod,
                               const struct af_plan *plan, const struct af_filter_summary *sum);
/* A tier's name for people: its class, or what an added tier stands for. */
const char *af__service_tier_name(const struct af_plan *plan, int tier);

#endif
