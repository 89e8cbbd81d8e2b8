/* SPDX-License-Identifier: Apache-2.0 */
/*
 * metrics: the request counters and histograms of every verb, rendered as Prometheus text;
 * a leaf the service reports into (the service renders its own gauges after, with the
 * text-format helpers below). src/metrics/.
 */
#ifndef AF_METRICS_H
#define AF_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "accelfit/util.h"

struct af_metrics;

enum af_verb {
    AF_VERB_FILTER = 0,
    AF_VERB_PRIORITIZE,
    AF_VERB_EXPLAIN,
    AF_VERB_PREEMPT,
    AF_VERB_MUTATE,   /* counted in the request metrics; af_webhook_mutate answers it */
    AF_VERB__COUNT
};

struct af_metrics *af_metrics_new(void);
void af_metrics_free(struct af_metrics *m);
void af_metrics_observe_request(struct af_metrics *m, enum af_verb verb, int status,
                                uint64_t ns);
void af_metrics_count_decision(struct af_metrics *m, const char *cls, const char *verdict);
/* The same, `n` times. */
void af_metrics_count_decisions(struct af_metrics *m, const char *cls, const char *verdict,
                                uint64_t n);
void af_metrics_count_fallback(struct af_metrics *m);
/*
 * A pod (`pod_key`: its uid, else namespace/name) whose annotations in `bad` (bits of
 * af_plan_annotation) are malformed: true the first time it is seen, when the caller posts
 * the Warning Event; each such annotation is then counted once in
 * accelfit_malformed_annotations_total. False for a pod already seen (a bounded memory:
 * thousands of pods) and when `bad` is 0. With m NULL, true whenever `bad` is not 0.
 */
bool af_metrics_first_bad_annotations(struct af_metrics *m, const char *pod_key, uint32_t bad);
/* Renders the counters and histograms above, the uptime and the build info (m may be NULL). */
int af_metrics_render(struct af_metrics *m, struct af_buf *out) AF_MUST_CHECK;
/* Text-format helpers for modules that render their own gauges after af_metrics_render. */
int af_metrics_header(struct af_buf *o, const char *name, const char *type,
                      const char *help) AF_MUST_CHECK;
int af_metrics_label(struct af_buf *o, const char *value) AF_MUST_CHECK;   /* escaped */


#endif
