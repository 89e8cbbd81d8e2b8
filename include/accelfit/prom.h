/* SPDX-License-Identifier: Apache-2.0 */
/*
 * prom: the Prometheus reader (src/prom/). A thread asks the policy's utilization queries
 * every interval and builds, from the answers read in place, the immutable snapshots of
 * accelfit/utilization.h, published by pointer swap like the cluster snapshot; or a
 * recorded file is loaded once and published frozen.
 */
#ifndef AF_PROM_H
#define AF_PROM_H

#include "accelfit/utilization.h"

struct af_config_holder;
struct af_prom;

struct af_prom_options {
    const char *url;               /* Prometheus base URL ("http://prometheus:9090", or with a
                                    * path prefix); NULL with metrics_file */
    const char *bearer_token_file; /* re-read every round (rotated tokens) */
    const char *basic_auth_file;   /* one line "user:password" */
    const char *ca_file;           /* PEM bundle to verify an https URL */
    double interval_s;             /* > 0: overrides utilization.interval */
    const char *metrics_file;      /* a recorded snapshot (docs/utilization.md) instead */
};

/*
 * Starts the source: with a URL, a thread that runs the policy's queries (read from
 * `cfg` every round, so a reload applies) every interval, publishing a snapshot after
 * each round (ok, or degraded with the reason; failed rounds back off up to
 * utilization.retry_max); with metrics_file, loads the file once and publishes it
 * frozen. Returns 0, or AF_EINVAL with one line in `why` (an unreadable auth or CA file,
 * a bad URL, a metrics file that is not a recording).
 */
int af_prom_start(struct af_prom **out, const struct af_prom_options *o,
                  struct af_config_holder *cfg, char *why, size_t whylen) AF_MUST_CHECK;
/* Stops the thread and frees everything. NULL is fine. */
void af_prom_stop(struct af_prom *p);
/* New reference to the current snapshot, or NULL before the first round ends. Takes a
 * mutex for a pointer read; never waits for a query. */
struct af_utilization_snapshot *af_prom_acquire(struct af_prom *p);

/*
 * Building a snapshot from answers (exposed for tests and fuzzing). af_prom_build_add
 * parses one Prometheus HTTP API answer for metric `m`: /api/v1/query (vector), or
 * /api/v1/query_range (matrix: the last point is the value, the trailing run below
 * idle_below gives idle_since). Series no node label names are counted, not kept, and
 * so are samples dropped by the bounds above. The answer is read in place (never as a
 * tree), so its memory is its bytes and AF_UTILIZATION_MAX_SERIES kept series at most.
 * Returns 0, or AF_EPARSE with `why` filled (an error answer says its errorType and error).
 */
struct af_prom_build;
struct af_prom_build *af_prom_build_new(void);
/* The reader's clock: samples timestamped more than AF_UTILIZATION_FUTURE_SKEW_S after `now` are
 * dropped. Without it (a recorded file, a test) no timestamp is in the future. */
void af_prom_build_set_now(struct af_prom_build *b, double now);
int af_prom_build_add(struct af_prom_build *b, const struct af_utilization_policy *up,
                      enum af_utilization_metric m, const char *body, size_t len, char *why,
                      size_t whylen) AF_MUST_CHECK;
/* Internal to the reader: a recorded file ({"queries": {"gpu_util": <answer>, ...}}),
 * each answer added as af_prom_build_add does, in place; and the "error" text of an error
 * answer ("" when it has none), without building it either. */
int af__prom_build_add_file(struct af_prom_build *b, const struct af_utilization_policy *up,
                            const char *body, size_t len, char *why, size_t whylen) AF_MUST_CHECK;
void af__prom_answer_error(const char *body, size_t len, char *out, size_t n);
/* Finishes the build (frees `b`): a new snapshot (refcnt 1), ok, with `prev`'s idle runs
 * carried over. Cannot fail. */
struct af_utilization_snapshot *af_prom_build_finish(struct af_prom_build *b,
                                              const struct af_utilization_snapshot *prev,
                                              double idle_below);

#endif
