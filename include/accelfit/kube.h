/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube: talking to the Kubernetes API server with libcurl.
 *
 *   connection config  kubeconfig (current-context or a named one; CA, client
 *                      certificates, token, tokenFile, insecure-skip-tls-verify,
 *                      tls-server-name, exec credential plugins) or in-cluster
 *   reflector          paginated LIST then WATCH of Nodes and Pods as client-go's
 *                      Reflector does it, on its own thread, applying events to an
 *                      af_cache and publishing snapshots
 *   events             Kubernetes Events posted on pods, off the request path,
 *                      rate-limited and deduplicated
 */
#ifndef AF_KUBE_H
#define AF_KUBE_H

#include "accelfit/cache.h"
#include "accelfit/config.h"
#include "accelfit/prices.h"
#include "accelfit/util.h"

struct af_kube_exec {
    char *command;
    char **args;               /* NULL-terminated */
    char **env;                /* "NAME=value", NULL-terminated */
    char *api_version;
};

/* Where and how to connect. All strings owned. */
struct af_kube_conn {
    char *server;              /* "https://host:port" */
    char *ca_file;
    char *ca_pem;              /* decoded certificate-authority-data */
    char *client_cert_file;
    char *client_cert_pem;
    char *client_key_file;
    char *client_key_pem;
    char *token;
    char *token_file;          /* re-read at least every minute and on 401 */
    bool insecure;
    char *tls_server_name;
    struct af_kube_exec *exec; /* NULL when not used */
    char *context;             /* the context name used, for messages */
    char *origin;              /* where it came from, for messages: "in-cluster", "KUBECONFIG=a:b",
                                * "--kubeconfig FILE", "~/.kube/config (PATH)"; may be NULL */
    char *ns;                  /* in-cluster: the pod's namespace (the service account's
                                * namespace file); NULL otherwise */
};

/* At most this many files of a KUBECONFIG list are read (the rest are ignored). */
#define AF_KUBECONFIG_MAX_FILES 16

/*
 * Loads `path` (NULL: $KUBECONFIG, then ~/.kube/config) and resolves
 * `context` (NULL: current-context). A KUBECONFIG list ("a:b:c") is merged as
 * kubectl merges it: the first file to name a cluster, user or context wins,
 * current-context comes from the first file that sets it, files that do not
 * exist are passed over (one must exist), and relative paths are relative to
 * the file that holds the entry. Unsupported features (auth-provider,
 * username/password, proxy-url) are an AF_EUNSUPPORTED error naming them.
 */
int af_kubeconfig_load(struct af_kube_conn **out, const char *path, const char *context,
                       struct af_error *err) AF_MUST_CHECK;
/* In-cluster: KUBERNETES_SERVICE_HOST/PORT, the service-account token and CA. */
int af_kube_incluster(struct af_kube_conn **out, struct af_error *err) AF_MUST_CHECK;

/* What the command line said about the cluster connection (NULL/false: not given). */
struct af_kube_source {
    const char *kubeconfig;      /* --kubeconfig */
    const char *context;         /* --context */
    bool in_cluster;             /* --in-cluster */
};

/*
 * The connection kubectl's loading rules give: --in-cluster; else --kubeconfig;
 * else $KUBECONFIG (merged, above); else in-cluster when KUBERNETES_SERVICE_HOST
 * is set and the service-account token exists (not with --context, which names
 * a kubeconfig entry); else ~/.kube/config. The service-account directory is
 * /var/run/secrets/kubernetes.io/serviceaccount unless AF_SERVICEACCOUNT_DIR
 * names another (for tests). Every command that talks to the API server uses
 * this. When nothing is found the error names each place that was tried; an error
 * in a file that was found (or in the in-cluster files) is that file's error.
 */
int af_kube_conn_resolve(struct af_kube_conn **out, const struct af_kube_source *src,
                         struct af_error *err) AF_MUST_CHECK;
void af_kube_conn_free(struct af_kube_conn *c);     /* NULL is fine */

struct af_kube_options {
    int page_size;               /* LIST limit, default 500 */
    int watch_timeout_min_s;     /* timeoutSeconds is random in [min, 2*min], default 300 */
    double backoff_initial_s;    /* 0.8 */
    double backoff_max_s;        /* 30 */
    double publish_interval_s;   /* coalesce events for this long before publishing, 0.05 */
    int events_per_minute;       /* Event posting budget, default 60 */
    /* Prices read from AWS (prices.h), applied to every node as it is cached and, through
     * af_kube_reprice, to every cached node when a new book comes; NULL: none. Borrowed. */
    struct af_prices_holder *prices;
    /* List and watch Karpenter's NodeOverlays when the API server serves them, and price
     * nodes with them (src/kube/overlays.c); default true. */
    bool overlays;
    /* List Nodes and Pods in Kubernetes' protobuf encoding (as client-go does; the API
     * server answers JSON when it cannot), default true; false: JSON only
     * (--kube-api-content-type application/json). Watches are JSON either way. */
    bool protobuf;
};
void af_kube_options_default(struct af_kube_options *o);

struct af_kube;

/*
 * Starts the reflector threads. `conn` is stolen. Snapshots go to `pub`,
 * counters to `st`. The config holder is read for node classification.
 */
int af_kube_start(struct af_kube **out, struct af_kube_conn *conn,
                  const struct af_kube_options *opt, struct af_config_holder *cfg,
                  struct af_publisher *pub, struct af_cache_status *st) AF_MUST_CHECK;
void af_kube_stop(struct af_kube *k);               /* joins the threads, frees; NULL is fine */

/*
 * One GET /version, within `timeout_ms`, as every request is made: 0 when the API server
 * answered (any status but 401 and 403), else AF_ECONN with one line in `why` naming the
 * server and the cause (connection refused, TLS, 401, 403). For commands that list once.
 */
int af_kube_probe(struct af_kube *k, long timeout_ms, char *why, size_t n) AF_MUST_CHECK;

/*
 * Asks for every cached node to be read again under the current config, after a
 * reload swapped the policy or catalog (reload.h): the node reflector ends its
 * watch and lists the nodes again (a consistent, paginated LIST), decoding each
 * with the config then current, so classes, device memory and prices follow the
 * new catalog and policy. A node is classified from all its labels, allocatable
 * and annotations, which the cache does not keep (af_node_info holds only what
 * decisions read), so the API server's copy is the one to read again. Pods are
 * not listed: nothing in a cached pod depends on the config. Never blocks;
 * requests keep being served from the current snapshot meanwhile. Requests that
 * arrive while a list is under way are folded into one more list after it.
 * Thread-safe; NULL is fine.
 */
void af_kube_reclassify_nodes(struct af_kube *k);

/*
 * Prices every cached node again with the current book of opt.prices (af_cache_reprice),
 * after it was swapped, and publishes a snapshot when a price changed. Nodes are not
 * listed again: what pricing reads is kept in the cache. Called on the thread that read
 * the prices; takes the cache's lock for one pass over the nodes. Returns how many nodes'
 * prices changed (0 for NULL).
 */
size_t af_kube_reprice(struct af_kube *k);

/*
 * The rollouts' shared state (docs/rollouts.md): one ConfigMap of namespace `ns` named
 * `name`, one key per rollout holding its record (af_rollout_record) as indented JSON with
 * readable fields (stage, share, next stage, halt, acknowledgement) beside the exact ones.
 * Two threads of this af_kube keep it: one WATCHes the object (fieldSelector metadata.name)
 * and hands every version to ops.absorb; the other, woken by af_kube_state_notify or every
 * 30 s, merges ops.export's records into the object's (af_rollout_record_merge) and writes
 * the result when it changes anything: PUT with the resourceVersion it merged into (a 409
 * Conflict reads it again and merges again) or POST when it does not exist. Neither ever
 * runs on a caller's thread. The requests: get, watch and update of that one object, and
 * create of a ConfigMap in `ns` (manifests/base/accelfit-rbac.yaml). Stopped by
 * af_kube_stop. Returns 0, or AF_EINVAL (bad arguments, or started already).
 */
struct af_rollout_record;
struct af_kube_state_ops {
    void *ud;
    /* This replica's records, at `now`: a new array in *out (af_free), its length returned. */
    size_t (*export)(void *ud, double now, struct af_rollout_record **out);
    /* Every record of the object as the API server holds it (borrowed for the call). */
    void (*absorb)(void *ud, const struct af_rollout_record *v, size_t n);
};
int af_kube_state_start(struct af_kube *k, const char *ns, const char *name,
                        const struct af_kube_state_ops *ops) AF_MUST_CHECK;
/* Something to write: wakes the writer. Never blocks on the network. Thread-safe; NULL and
 * an af_kube without state are fine. */
void af_kube_state_notify(struct af_kube *k);

/*
 * The claim ledger (docs/rollouts.md): one ConfigMap of `ns` named `name` (one key per
 * entry, af_rollout_claim as one line of JSON), written before each new unit's webhook
 * answer. af_kube_claims_new makes the client (no thread, no request yet); it uses `k`'s
 * transport and must be freed before af_kube_stop. Returns 0 or AF_EINVAL.
 */
struct af_kube_claims;
struct af_rollout_claim;
struct af_kube_claims_ops {
    void *ud;
    /* The ledger as read (borrowed): decide, and return the whole ledger to write as a new
     * array in *out (af_free), its length returned. */
    size_t (*next)(void *ud, const struct af_rollout_claim *v, size_t n,
                   struct af_rollout_claim **out);
    /* The write of what `next` returned was refused (another replica wrote first): forget
     * what it decided; `next` is called again with the ledger read again. */
    void (*undo)(void *ud);
};
int af_kube_claims_new(struct af_kube_claims **out, struct af_kube *k, const char *ns,
                       const char *name) AF_MUST_CHECK;
void af_kube_claims_free(struct af_kube_claims *c);   /* NULL is fine */
/*
 * One commit, on the caller's thread (never the HTTP thread; commits of one client must
 * not overlap): ops.next on the ledger as last known, the result written with the
 * resourceVersion it came from; on a conflict ops.undo, read again, again ops.next, until
 * written or `timeout_s` has passed. Returns 0 (written), AF_ETIMEDOUT, AF_ECONN, AF_EHTTP
 * (an answer other than a conflict) or AF_ECANCELED (af_kube_stop began); on an error the
 * last decisions of ops.next are not undone (they may have been written).
 */
int af_kube_claims_commit(struct af_kube_claims *c, const struct af_kube_claims_ops *ops,
                          double timeout_s) AF_MUST_CHECK;

/*
 * Queues an Event on a pod (type "Normal" or "Warning"). Never blocks; drops
 * (and counts) when the queue is full or the budget is spent; repeated
 * (pod, reason, message) within a window only bump the count. Thread-safe.
 */
void af_kube_post_event(struct af_kube *k, const char *ns, const char *pod, const char *uid,
                        const char *type, const char *reason, const char *message);

#endif
