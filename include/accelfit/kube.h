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
};

/*
 * Loads `path` (NULL: $KUBECONFIG, then ~/.kube/config) and resolves
 * `context` (NULL: current-context). Unsupported features (auth-provider,
 * username/password, proxy-url) are an AF_EUNSUPPORTED error naming them.
 */
int af_kubeconfig_load(struct af_kube_conn **out, const char *path, const char *context,
                       struct af_error *err) AF_MUST_CHECK;
/* In-cluster: KUBERNETES_SERVICE_HOST/PORT, the service-account token and CA. */
int af_kube_incluster(struct af_kube_conn **out, struct af_error *err) AF_MUST_CHECK;
void af_kube_conn_free(struct af_kube_conn *c);     /* NULL is fine */

struct af_kube_options {
    int page_size;               /* LIST limit, default 500 */
    int watch_timeout_min_s;     /* timeoutSeconds is random in [min, 2*min], default 300 */
    double backoff_initial_s;    /* 0.8 */
    double backoff_max_s;        /* 30 */
    double publish_interval_s;   /* coalesce events for this long before publishing, 0.05 */
    int events_per_minute;       /* Event posting budget, default 60 */
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
 * Queues an Event on a pod (type "Normal" or "Warning"). Never blocks; drops
 * (and counts) when the queue is full or the budget is spent; repeated
 * (pod, reason, message) within a window only bump the count. Thread-safe.
 */
void af_kube_post_event(struct af_kube *k, const char *ns, const char *pod, const char *uid,
                        const char *type, const char *reason, const char *message);

#endif
