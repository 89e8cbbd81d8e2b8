/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Kubernetes Events the verbs post on a pod: every candidate rejected,
 * a fallback to a lower tier, and annotations that could not be read (once per
 * pod). The kube room queues and posts them; nothing here waits on the API
 * server.
 */
#include "accelfit/metrics.h"
#include "accelfit/service.h"

#include <stdio.h>
#include <string.h>

#include "accelfit/kube.h"
#include "accelfit/rollout_state.h"
#include "service/internal.h"

#include "service/handlers.h"
#include "accelfit/banned.h"

/* ---- events ------------------------------------------------------------------------------------ */

void af__service_post_all_rejected(struct af_service *svc, const struct af_pod_info *pod,
                                   const struct af_node_decision *d, size_t n)
{
    char msg[1024];
    size_t used = 0;
    const char *distinct[3];
    int counts[3] = {0, 0, 0};
    size_t nd = 0, others = 0;

    if (!svc->kube || !pod || !pod->name || n == 0)
        return;
    for (size_t i = 0; i < n; i++) {
        size_t j;
        for (j = 0; j < nd; j++)
            if (!strcmp(distinct[j], d[i].reason))
                break;
        if (j < nd) {
            counts[j]++;
        } else if (nd < AF_ARRAY_SIZE(distinct)) {
            distinct[nd] = d[i].reason;
            counts[nd++] = 1;
        } else {
            others++;
        }
    }
    used = (size_t)snprintf(msg, sizeof(msg), "0/%zu nodes passed accelfit:", n);
    for (size_t j = 0; j < nd && used < sizeof(msg); j++)
        used += (size_t)snprintf(msg + used, sizeof(msg) - used, "%s %d x %s", j ? ";" : "",
                                 counts[j], distinct[j]);
    if (others && used < sizeof(msg))
        snprintf(msg + used, sizeof(msg) - used, "; %zu more", others);
    af_kube_post_event(svc->kube, pod->ns, pod->name, pod->uid, "Warning",
                       "AccelfitNoSuitableNode", msg);
}

/*
 * A pod whose accelfit annotations could not be read is placed as if they were absent; its
 * owner learns it from a Warning Event on the pod, once per pod, and the count goes to
 * accelfit_malformed_annotations_total (af_metrics_first_bad_annotations).
 */
void af__service_warn_bad_annotations(struct af_service *svc, const struct af_pod_info *pod,
                                      const struct af_plan *plan)
{
    char msg[1024], key[600];
    size_t used = 0;

    if (!pod || !pod->name || !plan->bad_annotations)
        return;
    snprintf(key, sizeof(key), "%s", pod->uid && *pod->uid ? pod->uid : "");
    if (!key[0])
        snprintf(key, sizeof(key), "%s/%s", pod->ns ? pod->ns : "", pod->name);
    if (!af_metrics_first_bad_annotations(svc->metrics, key, plan->bad_annotations) ||
        !svc->kube)
        return;
    for (int i = 0; i < plan->n_bad_notes && used < sizeof(msg); i++)
        used += (size_t)snprintf(msg + used, sizeof(msg) - used, "%s%s", i ? "; " : "",
                                 plan->notes[i]);
    if (used < sizeof(msg))
        snprintf(msg + used, sizeof(msg) - used,
                 ". accelfit places the pod as if the annotation were absent; correct the "
                 "value in the pod template");
    af_kube_post_event(svc->kube, pod->ns, pod->name, pod->uid, "Warning",
                       "AccelfitBadAnnotation", msg);
}

/* A tier's name for people: its class, or what an added tier stands for. */
const char *af__service_tier_name(const struct af_plan *plan, int tier)
{
    return af_plan_tier_name(plan, tier);
}

void af__service_post_fallback(struct af_service *svc, const struct af_pod_info *pod,
                               const struct af_plan *plan, const struct af_filter_summary *sum)
{
    char msg[512];

    if (!svc->kube || !pod || !pod->name || sum->best_tier <= 0 ||
        (size_t)sum->best_tier >= plan->sel.n_tiers)
        return;
    snprintf(msg, sizeof(msg), "no candidate of tier 1 (%s) has room; falling back to tier %d (%s)",
             af__service_tier_name(plan, 0), sum->best_tier + 1,
             af__service_tier_name(plan, sum->best_tier));
    af_kube_post_event(svc->kube, pod->ns, pod->name, pod->uid, "Normal", "AccelfitFallback",
                       msg);
}
