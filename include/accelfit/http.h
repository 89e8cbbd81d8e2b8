/* SPDX-License-Identifier: Apache-2.0 */
/*
 * http: what kube-scheduler talks to.
 *
 *   service  transport-free handlers: a verb and a body in, a status and a
 *            body out (decode, acquire snapshot, decide, encode, release).
 *            Thin; tests and benchmarks call it directly. src/service/.
 *   metrics  counters and histograms, rendered as Prometheus text; a leaf the
 *            service reports into (the service renders its own gauges after).
 *            src/metrics/.
 *   server   libwebsockets: HTTP/1.1 keep-alive (and h2 over TLS), body cap,
 *            read timeout, TLS with optional client certificates (reloaded
 *            when the files change), an optional plain-HTTP health listener.
 *            src/http/, the transport alone.
 */
#ifndef AF_HTTP_H
#define AF_HTTP_H

#include <signal.h>

#include "accelfit/cache.h"
#include "accelfit/config.h"
#include "accelfit/util.h"

struct af_kube;
struct af_metrics;
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

enum af_verb {
    AF_VERB_FILTER = 0,
    AF_VERB_PRIORITIZE,
    AF_VERB_EXPLAIN,
    AF_VERB_PREEMPT,
    AF_VERB_MUTATE,   /* counted in the request metrics; af_service_mutate answers it */
    AF_VERB__COUNT
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

/* ---- metrics ------------------------------------------------------------------------------ */

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

/* ---- server -------------------------------------------------------------------------------- */

struct af_http_options {
    const char *listen;            /* "127.0.0.1:8888", ":8888", "[::1]:8888" */
    const char *url_prefix;        /* e.g. "/sched"; NULL or "" for none */
    size_t max_body;               /* 413 beyond; default 16 MiB */
    int read_timeout_s;            /* slow clients are dropped; default 10 */
    const char *tls_cert_file;     /* reloaded when it changes on disk */
    const char *tls_key_file;
    const char *client_ca_file;    /* require and verify client certificates */
    const char *health_listen;     /* NULL, or a second, plain-HTTP listener serving only
                                    * /healthz, /readyz and /metrics (kubelet, Prometheus) */
    char *error;                   /* NULL, or where af_http_run writes one line saying why
                                    * it failed (which address, which file) */
    size_t error_len;
};

/* Longest request target (path and query) and header value accepted: 414 and 431 beyond. */
#define AF_HTTP_MAX_URI 8192
#define AF_HTTP_MAX_FIELD 8192

/*
 * "127.0.0.1:8888", "[::1]:8888", ":8888" (every interface), "localhost:8888" (the one
 * name accepted, as 127.0.0.1; no other name is looked up): numeric host (empty for any)
 * and port. Returns 0, or AF_EINVAL with `why` (may be NULL) saying which part is wrong
 * and how to write it.
 */
int af_http_parse_listen(const char *listen, char *host, size_t hostlen, int *port, bool *v6,
                         char *why, size_t whylen) AF_MUST_CHECK;

/*
 * Loads the TLS files of `opt` as the server will (certificate chain, private
 * key, client CA) and checks that the key matches the certificate. Returns 0
 * (also when TLS is off), or AF_EINVAL with one line in `why` naming the flag,
 * the file and the problem.
 */
int af_http_check_tls(const struct af_http_options *opt, char *why, size_t whylen) AF_MUST_CHECK;

/*
 * Runs until *stop becomes non-zero. Returns 0, AF_EINVAL for a configuration
 * the server cannot use (bad TLS files, an address in use or not local: see
 * opt->error), or another negative AF_E*.
 */
int af_http_run(const struct af_http_options *opt, struct af_service *svc,
                volatile sig_atomic_t *stop) AF_MUST_CHECK;

/* ---- admission webhook (src/service/mutate.c) ------------------------------------------- */

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
int af_service_mutate(struct af_service *svc, const char *body, size_t len, struct af_buf *out);

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
#define AF_SERVICE_DEFERRED (-1)

/*
 * af_service_mutate, except that with svc->claims and `later` a new unit of a rollout is
 * claimed in the API server's ledger first (docs/rollouts.md): then nothing is written to
 * `out`, AF_SERVICE_DEFERRED is returned, and the answer goes to later->done once the claim
 * is written or its deadline has passed (then decided locally, with a warning).
 */
int af_service_mutate_ex(struct af_service *svc, const char *body, size_t len, struct af_buf *out,
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
    uint64_t reserved;    /* reserves claimed ahead (a side for the next new unit) */
    uint64_t ahead;       /* units answered at once from a reserve (not in written) */
};
void af_claims_stats(struct af_claims *c, struct af_claims_stats *out);

#endif
