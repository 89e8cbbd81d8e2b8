/* SPDX-License-Identifier: Apache-2.0 */
/*
 * service: the transport-free handlers kube-scheduler's verbs, /explain, /recommend,
 * /rollouts, /readyz and /metrics reach: a verb and a body in, a status and a body out
 * (decode, acquire snapshot, decide, encode, release). Thin; tests and benchmarks call it
 * directly. src/service/. The admission webhook's handlers are in webhook.h, the
 * transport in http.h.
 */
#ifndef AF_SERVICE_H
#define AF_SERVICE_H

#include "accelfit/cache.h"
#include "accelfit/config.h"
#include "accelfit/metrics.h"
#include "accelfit/util.h"

struct af_kube;
struct af_reload;
struct af_prom;

enum af_not_ready_mode {
    AF_NOT_READY_REJECT = 0,   /* every candidate in FailedNodes: "accelfit: <why not ready>" */
    AF_NOT_READY_ERROR,        /* filter answers Error */
    AF_NOT_READY_ALLOW_ALL,    /* every candidate passes */
};

/* Everything the handlers read. Shared by the server thread; fields are set before start. */
struct af_service {
    struct af_config_holder *config;
    struct af_publisher *pub;
    struct af_cache_status *status;   /* may be NULL in static mode */
    struct af_kube *kube;             /* may be NULL: no Events are posted */
    struct af_metrics *metrics;
    enum af_not_ready_mode when_not_ready;
    uint64_t max_staleness_ns;
    struct af_rollouts *rollouts;     /* may be NULL: rollouts are not steered */
    struct af_reload *reload;         /* may be NULL: the policy is not reloaded */
    struct af_costs_memo *costs;      /* may be NULL: costs are computed per request */
    struct af_prom *util;             /* may be NULL: no live utilization (accelfit/utilization.h) */
    struct af_prices_holder *prices;  /* may be NULL: prices from the catalog only (prices.h) */
    struct af_claims *claims;         /* may be NULL: new units are decided locally */
};

/*
 * Handles one request body for `verb`. Always writes a body to `out` and
 * returns the HTTP status to send (200 for every well-formed extender call,
 * including filter answers carrying Error; 400 for an undecodable prioritize,
 * explain or preempt body; 503 for preempt while not ready in the `error`
 * mode, preempt having no Error field). Cannot fail otherwise.
 */
int af_service_handle(struct af_service *svc, enum af_verb verb, const char *body, size_t len,
                      struct af_buf *out);
/* What one call did, for the server's request log line. */
struct af_request_stats {
    int candidates;        /* nodes in the request; -1 when it could not be decoded */
    int passed;            /* filter: nodes that passed; preempt: nodes kept; -1 otherwise */
    bool not_ready;        /* answered by the when-not-ready mode */
    bool fallback;         /* a lower tier was taken */
    char pod[256];         /* "namespace/name" of the pod it is about; "" when none */
};

/* af_service_handle, also filling `st` (may be NULL). */
int af_service_handle_stats(struct af_service *svc, enum af_verb verb, const char *body,
                            size_t len, struct af_buf *out, struct af_request_stats *st);

/* Most candidates one request may name; beyond, filter answers Error, the others 400. */
#define AF_SERVICE_MAX_CANDIDATES 50000

/* ---- query strings ------------------------------------------------------------------------ */

/*
 * Every route reads its query string with af_query_parse: `raw` is the query as sent
 * after '?' ("a=1&b=2", form-urlencoded: '+' is a space, %XX a byte; NULL or "" is none).
 * Empty pieces are skipped ("a=1&&b=2", "&a=1", "?"); a bare name ("neuron-ready") has the
 * value "" and `bare` set. `route` ("GET /explain") names the route in messages; `known`
 * (NULL-terminated) lists the parameters it takes, '-' and '_' alike, or is NULL when the
 * handler checks names itself. Returns 0 (release q with af_query_release), or AF_EINVAL
 * with `err` naming what was wrong and where: a bad escape, a parameter with no name, one
 * the route does not take (the message lists those it does), one given twice, more than
 * AF_QUERY_MAX_PARAMS. On error q holds nothing.
 */
#define AF_QUERY_MAX_PARAMS 16
struct af_query_param {
    const char *key;     /* decoded; borrowed from the query's store */
    const char *value;   /* decoded; "" for a bare name */
    bool bare;
};
struct af_query {
    size_t n;
    struct af_query_param p[AF_QUERY_MAX_PARAMS];
    char *store;
};
int af_query_parse(struct af_query *q, const char *raw, const char *route,
                   const char *const *known, char *err, size_t errlen) AF_MUST_CHECK;
/* The value of `key` ('-' and '_' alike), "" for a bare name, NULL when absent. Borrowed. */
const char *af_query_get(const struct af_query *q, const char *key);
void af_query_release(struct af_query *q);
/*
 * For routes that take no query parameters: 0 when `query` has none (empty pieces do not
 * count), else 400 with {"error": ...} naming the parameter and `route` appended to out.
 */
int af_service_check_query(const char *route, const char *query, struct af_buf *out);
/* Appends {"error": msg} to out, first cutting it back to `base`. Cannot fail. */
void af_service_error_body(struct af_buf *out, size_t base, const char *msg);

/* GET /explain?pod=NS/NAME against the current snapshot. Returns the HTTP status. */
int af_service_explain_pod(struct af_service *svc, const char *ns, const char *name,
                           struct af_buf *out);
/*
 * GET /explain with its query as sent (af_query_parse; `pod` is the only parameter, and
 * it is required): af_service_explain_pod, or 400 naming what is wrong with the query.
 */
int af_service_explain_query(struct af_service *svc, const char *query, struct af_buf *out);
/*
 * GET /recommend?workload=...&model-params=... (query, as sent) or POST /recommend with a
 * JSON object body: the selection core's answer, exactly what `accelfit recommend --output
 * json` prints. 200, or 400 with {"error": ...} naming the bad parameter, also when a POST
 * carries parameters both in its query and in its body.
 */
int af_service_recommend(struct af_service *svc, const char *query, const char *body, size_t len,
                         struct af_buf *out);
/*
 * GET /rollouts: the state of every rollout of the policy (af_rollouts_render). 200;
 * 503 with {"error": ...} when svc->rollouts is NULL; 500 when the body is too large.
 */
int af_service_rollouts(struct af_service *svc, struct af_buf *out);
/*
 * POST /rollouts/NAME/ack: acknowledges the brake of rollout NAME (af_rollouts_ack), so
 * new units may go to the target again. 200 with {"rollout","acknowledged":true,
 * "was_halted","halt_reason"}; 404 when the policy has no rollout NAME; 503 when
 * svc->rollouts is NULL.
 */
int af_service_rollout_ack(struct af_service *svc, const char *name, struct af_buf *out);
/* POST /rollouts/ack?name=NAME with its query as sent: af_service_rollout_ack, or 400. */
int af_service_rollout_ack_query(struct af_service *svc, const char *query, struct af_buf *out);
/* Ready: synced and not stale. `why` gets a short reason when not. */
bool af_service_ready(struct af_service *svc, const char **why);
/*
 * GET /readyz: "ok" or "not ready: <why>" (af_service_ready), then a line per detail that
 * never makes it not ready: live utilization (af_service_utilization_status) and where
 * prices come from (af_service_prices_status). Returns 200 or 503.
 */
int af_service_readyz(struct af_service *svc, struct af_buf *out);

/*
 * GET /metrics: af_metrics_render(svc->metrics), then the service's own gauges (cache,
 * nodes by class, readiness, rollouts, the policy's generation and reloads) read at
 * scrape time (service_metrics.c), all of one config.
 */
int af_service_render_metrics(struct af_service *svc, struct af_buf *out) AF_MUST_CHECK;

/*
 * Live utilization (src/service/utilization.c). The status writes one line for /readyz
 * ("utilization: live ..." or "utilization: degraded: <why>; scoring on allocation"), ""
 * without a source; degraded never makes the server not ready. The metrics render
 * accelfit_utilization_* and the allocated-but-idle waste gauges (nothing without a source),
 * the waste under `cfg`, the config the whole scrape took (borrowed).
 */
void af_service_utilization_status(struct af_service *svc, char *out, size_t n);
int af_service_render_utilization(struct af_service *svc, struct af_config *cfg,
                                  struct af_buf *out) AF_MUST_CHECK;

/*
 * Prices (src/service/service_prices.c). The status writes a line for /readyz per source: the
 * catalog's list prices and their age, and with prices read from AWS each source (kind,
 * region) with its count and age, or "degraded: <error>" (never a reason to be not ready).
 * The metrics render accelfit_nodes_by_price_source, accelfit_catalog_prices_age_seconds
 * and accelfit_aws_prices* per source.
 */
void af_service_prices_status(struct af_service *svc, const struct af_catalog *cat, char *out,
                              size_t n);
int af_service_render_prices(struct af_service *svc, const struct af_config *cfg,
                             struct af_buf *out) AF_MUST_CHECK;

#endif
