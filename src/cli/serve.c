/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `accelfit serve`: the extender daemon. Loads the catalog and policy, fills
 * the cluster cache from a static file (--cluster, --demo) or from the API
 * server (--kubeconfig, --in-cluster, through the kube reflector), then runs
 * the HTTP server on the calling thread until SIGINT or SIGTERM. The policy
 * and catalog files are reloaded on SIGHUP and when they change (reload.h).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accelfit/aws.h"
#include "accelfit/budget.h"
#include "accelfit/cache.h"
#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/http.h"
#include "accelfit/metrics.h"
#include "accelfit/service.h"
#include "accelfit/webhook.h"
#include "accelfit/kube.h"
#include "accelfit/prices.h"
#include "accelfit/reload.h"
#include "accelfit/rollout_state.h"
#include "accelfit/prom.h"
#include "accelfit/utilization.h"
#include "accelfit/util.h"
#include "cli/cli.h"
#include "accelfit/banned.h"

static const char usage[] =
    "usage: accelfit serve [options] [--cluster FILE | --demo | --kubeconfig FILE | --in-cluster]\n"
    "\n"
    "Runs the kube-scheduler extender over HTTP: POST /filter, /prioritize, /preempt\n"
    "and /explain (also under --url-prefix), GET or HEAD /healthz, /readyz, /metrics\n"
    "and /explain?pod=NAMESPACE/NAME; /recommend; GET /costs; GET /rollouts, POST\n"
    "/rollouts/ack and the admission webhook POST /mutate (docs/http-api.md).\n"
    "\n"
    "cluster source (at most one; with none, the API server is found as kubectl finds it:\n"
    "$KUBECONFIG (a merged colon-separated list), else in-cluster when the service-account\n"
    "token is mounted, else ~/.kube/config):\n"
    "  --cluster FILE          serve a static cluster: a JSON or YAML List of Nodes and Pods\n"
    "                          (as `kubectl get nodes,pods -A -o json` prints)\n"
    "  --demo                  serve the embedded demo cluster (manifests/demo-cluster.yaml)\n"
    "  --kubeconfig FILE       list/watch Nodes and Pods from the API server of FILE\n"
    "  --context NAME          kubeconfig context to use (default: current-context); also\n"
    "                          applies to $KUBECONFIG and ~/.kube/config\n"
    "  --in-cluster            use the pod's service account (KUBERNETES_SERVICE_HOST/PORT)\n"
    "  --state-namespace NS    keep the rollouts' state (stage, halt, acknowledgement) in\n"
    "                          ConfigMap accelfit-rollouts of NS, shared by every replica\n"
    "                          and kept across restarts (default in-cluster: the pod's\n"
    "                          namespace; from a kubeconfig without it, and with --cluster\n"
    "                          or --demo, the state lives in memory; docs/rollouts.md)\n"
    "  --kube-api-content-type T  how Nodes and Pods are listed:\n"
    "                          application/vnd.kubernetes.protobuf (default: the API server\n"
    "                          writes it faster and smaller; JSON where it has none) or\n"
    "                          application/json (docs/cluster.md)\n"
    "\n"
    "options:\n"
    "  --listen ADDR:PORT      address to listen on: 127.0.0.1:8888, localhost:8888,\n"
    "                          [::1]:8888, :8888 (every interface); default 127.0.0.1:8888,\n"
    "                          loopback only (/mutate and /rollouts/ack take no\n"
    "                          authentication: give :8888, with TLS, to serve others); a numeric\n"
    "                          address or localhost, no other name is looked up\n"
    "  --health-listen ADDR:PORT  also serve /healthz, /readyz and /metrics (only those)\n"
    "                          over plain HTTP on this address, e.g. for kubelet probes\n"
    "                          and Prometheus when --client-ca-file locks --listen\n"
    "  --url-prefix P          also serve the verbs under P (kube-scheduler calls\n"
    "                          urlPrefix + \"/\" + verb), e.g. /accelfit\n"
    "  --policy FILE           policy YAML (default: the embedded policies/default.yaml)\n"
    "  --catalog FILE          instance catalog YAML (default: the embedded policies/catalog.yaml)\n"
    "                          The policy and catalog files are reloaded on SIGHUP and when\n"
    "                          their directory changes (a write, a rename, a ConfigMap's\n"
    "                          ..data swap); a file that does not load is logged with\n"
    "                          file:line:column and the running policy kept.\n"
    "  --no-watch-policy       reload the policy and catalog on SIGHUP only\n"
    "  --max-body BYTES        largest request body (/mutate and the small routes cap lower);\n"
    "                          413 beyond (default 16Mi; 1Mi, 64Mi, ...)\n"
    "  --read-timeout S        drop a client that has not sent its whole request S seconds\n"
    "                          after its headers (default 10)\n"
    "  --tls-cert-file F       serve HTTPS with this certificate (PEM; needs the key too);\n"
    "                          ALPN selects http/1.1 (clients offering h2 get HTTP/1.1)\n"
    "  --tls-private-key-file F  private key of --tls-cert-file (PEM, unencrypted)\n"
    "  --client-ca-file F      require client certificates signed by this CA (PEM)\n"
    "                          The three files are checked every 2 s and reloaded when\n"
    "                          they change (new connections get the new certificate);\n"
    "                          a set that cannot be used is logged and the old one kept.\n"
    "  --when-not-ready MODE   filter answer while the cache is not synced or stale:\n"
    "                          reject (default: every candidate in FailedNodes, so the pod is\n"
    "                          retried on the next cluster event), error (answer Error: the\n"
    "                          scheduler parks the pod for ~5 minutes), allow-all\n"
    "  --max-staleness S       not ready once the watch has been down for S seconds\n"
    "                          (default 30; 0 = never stale)\n"
    "\n"
    "live utilization (docs/utilization.md; without these, scoring is on allocation only):\n"
    "  --prometheus URL        read GPU, NeuronCore and CPU utilization from this Prometheus\n"
    "                          (the queries, mapping and scoring are the policy's utilization:)\n"
    "  --prometheus-bearer-token-file F  send 'Authorization: Bearer <first line of F>'\n"
    "                          (re-read every round)\n"
    "  --prometheus-basic-auth-file F  basic auth from one line 'user:password'\n"
    "  --prometheus-ca-file F  verify an https Prometheus with this CA bundle (PEM)\n"
    "  --prometheus-interval S seconds between query rounds (default: utilization.interval)\n"
    "  --metrics-file F        a recorded utilization snapshot instead of Prometheus\n"
    "                          (tests/fixtures/metrics/demo-snapshot.json for --demo)\n"
    "\n"
    "prices from AWS (docs/pricing.md; without --aws-pricing, nodes are charged the catalog's\n"
    "us-east-1 on-demand list prices):\n"
    "  --aws-pricing           read on-demand prices of the nodes' regions (Pricing API) and\n"
    "                          spot prices of their zones (DescribeSpotPriceHistory), on a\n"
    "                          thread of their own; credentials from IRSA, EKS Pod Identity or\n"
    "                          AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY; needs an API server\n"
    "  --aws-region R          the region to price before any node names one (default\n"
    "                          $AWS_REGION, $AWS_DEFAULT_REGION)\n"
    "  --aws-on-demand-refresh S  seconds between reads of a region's on-demand prices\n"
    "                          (default 86400)\n"
    "  --aws-spot-refresh S    seconds between reads of a region's spot prices (default 300)\n"
    "\n"
    "  --log-level LEVEL       debug, info (default), warn, error; debug logs every request\n"
    "  --log-format FORMAT     text (key=value, default) or json\n"
    "  -h, --help              show this help\n"
    "\n"
    "examples:\n"
    "  accelfit serve --demo --listen 127.0.0.1:8888\n"
    "  curl -s -XPOST 127.0.0.1:8888/filter -d @tests/fixtures/kube-scheduler/filter-nodecache-true.json\n"
    "  accelfit serve --cluster cluster.yaml --listen :8888 --url-prefix /accelfit --log-level debug\n"
    "  accelfit serve --in-cluster --listen :8443 --tls-cert-file tls.crt \\\n"
    "      --tls-private-key-file tls.key --client-ca-file ca.crt --health-listen :8080\n"
    "  accelfit serve --kubeconfig ~/.kube/config --context prod --when-not-ready reject\n"
    "  accelfit serve --context prod --listen :8888     # $KUBECONFIG or ~/.kube/config\n"
    "\n"
    "exit status: 0 after SIGINT/SIGTERM; 2 on bad flags, bad input, TLS or kubeconfig\n"
    "files, or an address that cannot be listened on (in use, not local); 1 when the\n"
    "server cannot start for another reason (the cluster watch or the event loop).\n"
    "An API server that cannot be reached is not an exit: accelfit keeps serving and\n"
    "retrying with backoff, /readyz answers 503 and filter follows --when-not-ready\n"
    "until the first list succeeds (and again once the watch is down --max-staleness).\n";

static volatile sig_atomic_t stop_flag;
static struct af_reload *reloader;   /* set before SIGHUP is handled */

static void on_hup(int sig)
{
    (void)sig;
    af_reload_request(reloader);
}

static void on_signal(int sig)
{
    (void)sig;
    stop_flag = 1;
    /*
     * Bounded shutdown: if the HTTP loop has not returned within 10 s (a
     * connection wedged inside libwebsockets) and every thread stopped (a
     * Prometheus query in flight, the watch), SIGALRM's default action ends the
     * process. Cancelled once everything has stopped.
     */
    alarm(10);
}

struct serve_opts {
    struct af_http_options http;
    const char *policy;
    const char *catalog;
    const char *cluster;
    bool demo;
    const char *kubeconfig;
    const char *context;
    bool in_cluster;
    const char *state_namespace;
    bool kube_json;
    bool no_watch_policy;
    enum af_not_ready_mode when_not_ready;
    int64_t max_staleness_s;
    struct af_prom_options prom;
    bool aws_pricing;
    struct af_aws_options aws;
};

static int bad(const char *fmt, const char *a)
{
    fputs("accelfit serve: ", stderr);
    fprintf(stderr, fmt, a);
    fputs(" (see accelfit serve --help)\n", stderr);
    return 2;
}

/* "--flag value" or "--flag=value". Returns the value or NULL (and *err set). */
static const char *take(int argc, char **argv, int *i, const char *flag, bool *matched, bool *err)
{
    size_t n = strlen(flag);
    const char *a = argv[*i];

    *matched = false;
    if (strncmp(a, flag, n) != 0)
        return NULL;
    if (a[n] == '=') {
        *matched = true;
        return a + n + 1;
    }
    if (a[n] != '\0')
        return NULL;
    *matched = true;
    if (*i + 1 >= argc) {
        *err = true;
        return NULL;
    }
    return argv[++*i];
}

static int parse_seconds(const char *s, int64_t min, int64_t max, int64_t *out)
{
    char tmp[32];
    size_t n = strlen(s);

    if (n == 0 || n >= sizeof(tmp))
        return AF_EINVAL;
    memcpy(tmp, s, n + 1);
    if (tmp[n - 1] == 's')
        tmp[n - 1] = '\0';
    return af_parse_int64(tmp, min, max, out);
}

static int parse_args(int argc, char **argv, struct serve_opts *o)
{
    static const char *value_flags[] = {
        "--listen",         "--health-listen",        "--url-prefix",     "--policy",
        "--catalog",
        "--cluster",        "--kubeconfig",           "--context",        "--max-body",
        "--read-timeout",   "--tls-cert-file",        "--tls-private-key-file",
        "--client-ca-file", "--when-not-ready",       "--max-staleness",  "--log-level",
        "--log-format",
        "--prometheus",     "--prometheus-bearer-token-file", "--prometheus-basic-auth-file",
        "--prometheus-ca-file", "--prometheus-interval", "--metrics-file",
        "--state-namespace",
        "--aws-region",     "--aws-on-demand-refresh", "--aws-spot-refresh",
        "--kube-api-content-type",
    };
    int sources = 0;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL, *flag = NULL;
        bool matched = false, err = false;

        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(usage, stdout);
            return 1;
        }
        if (!strcmp(a, "--demo")) {
            o->demo = true;
            sources++;
            continue;
        }
        if (!strcmp(a, "--no-watch-policy")) {
            o->no_watch_policy = true;
            continue;
        }
        if (!strcmp(a, "--aws-pricing")) {
            o->aws_pricing = true;
            continue;
        }
        if (!strcmp(a, "--in-cluster")) {
            o->in_cluster = true;
            sources++;
            continue;
        }
        for (size_t f = 0; f < AF_ARRAY_SIZE(value_flags) && !matched; f++) {
            v = take(argc, argv, &i, value_flags[f], &matched, &err);
            flag = value_flags[f];
        }
        if (!matched)
            return bad("unknown option '%s'", a);
        if (err || !v)
            return bad("option '%s' needs a value", flag);
        if (!strcmp(flag, "--listen")) {
            char host[128], why[200];
            int port;
            bool v6;
            if (af_http_parse_listen(v, host, sizeof(host), &port, &v6, why, sizeof(why)) != 0)
            {
                char msg[400];
                snprintf(msg, sizeof(msg), "--listen '%s': %s", v, why);
                return bad("%s", msg);
            }
            o->http.listen = v;
        } else if (!strcmp(flag, "--health-listen")) {
            char host[128], why[200];
            int port;
            bool v6;
            if (af_http_parse_listen(v, host, sizeof(host), &port, &v6, why, sizeof(why)) != 0)
            {
                char msg[400];
                snprintf(msg, sizeof(msg), "--health-listen '%s': %s", v, why);
                return bad("%s", msg);
            }
            o->http.health_listen = v;
        } else if (!strcmp(flag, "--url-prefix")) {
            if (*v && v[0] != '/')
                return bad("--url-prefix must start with '/': '%s'", v);
            o->http.url_prefix = v;
        } else if (!strcmp(flag, "--policy")) {
            o->policy = v;
        } else if (!strcmp(flag, "--catalog")) {
            o->catalog = v;
        } else if (!strcmp(flag, "--cluster")) {
            o->cluster = v;
            sources++;
        } else if (!strcmp(flag, "--kubeconfig")) {
            o->kubeconfig = v;
            sources++;
        } else if (!strcmp(flag, "--context")) {
            o->context = v;
        } else if (!strcmp(flag, "--state-namespace")) {
            if (!*v || strlen(v) > 63 || strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-") !=
                                             strlen(v) || v[0] == '-' || v[strlen(v) - 1] == '-')
                return bad("--state-namespace must be a namespace name (lower-case letters, "
                           "digits and '-', at most 63): '%s'", v);
            o->state_namespace = v;
        } else if (!strcmp(flag, "--kube-api-content-type")) {
            if (strcmp(v, "application/vnd.kubernetes.protobuf") && strcmp(v, "application/json"))
                return bad("--kube-api-content-type must be application/vnd.kubernetes.protobuf "
                           "or application/json: '%s'", v);
            o->kube_json = !strcmp(v, "application/json");
        } else if (!strcmp(flag, "--max-body")) {
            int64_t n;
            if (af_parse_quantity(v, 1, &n) != 0 || n < 1024 || n > ((int64_t)1 << 30))
                return bad("--max-body must be between 1Ki and 1Gi bytes: '%s'", v);
            o->http.max_body = (size_t)n;
        } else if (!strcmp(flag, "--read-timeout")) {
            int64_t n;
            if (parse_seconds(v, 1, 3600, &n) != 0)
                return bad("--read-timeout must be 1..3600 seconds: '%s'", v);
            o->http.read_timeout_s = (int)n;
        } else if (!strcmp(flag, "--tls-cert-file")) {
            o->http.tls_cert_file = v;
        } else if (!strcmp(flag, "--tls-private-key-file")) {
            o->http.tls_key_file = v;
        } else if (!strcmp(flag, "--client-ca-file")) {
            o->http.client_ca_file = v;
        } else if (!strcmp(flag, "--when-not-ready")) {
            if (!strcmp(v, "reject"))
                o->when_not_ready = AF_NOT_READY_REJECT;
            else if (!strcmp(v, "error"))
                o->when_not_ready = AF_NOT_READY_ERROR;
            else if (!strcmp(v, "allow-all"))
                o->when_not_ready = AF_NOT_READY_ALLOW_ALL;
            else
                return bad("--when-not-ready must be reject, error or allow-all: '%s'", v);
        } else if (!strcmp(flag, "--max-staleness")) {
            if (parse_seconds(v, 0, 86400 * 7, &o->max_staleness_s) != 0)
                return bad("--max-staleness must be 0..604800 seconds: '%s'", v);
        } else if (!strcmp(flag, "--prometheus")) {
            o->prom.url = v;
        } else if (!strcmp(flag, "--prometheus-bearer-token-file")) {
            o->prom.bearer_token_file = v;
        } else if (!strcmp(flag, "--prometheus-basic-auth-file")) {
            o->prom.basic_auth_file = v;
        } else if (!strcmp(flag, "--prometheus-ca-file")) {
            o->prom.ca_file = v;
        } else if (!strcmp(flag, "--prometheus-interval")) {
            int64_t n;
            if (parse_seconds(v, 1, 3600, &n) != 0)
                return bad("--prometheus-interval must be 1..3600 seconds: '%s'", v);
            o->prom.interval_s = (double)n;
        } else if (!strcmp(flag, "--aws-region")) {
            o->aws.region = v;
        } else if (!strcmp(flag, "--aws-on-demand-refresh") ||
                   !strcmp(flag, "--aws-spot-refresh")) {
            int64_t n;
            if (parse_seconds(v, 60, 7 * 86400, &n) != 0)
                return bad(!strcmp(flag, "--aws-spot-refresh")
                               ? "--aws-spot-refresh must be 60..604800 seconds: '%s'"
                               : "--aws-on-demand-refresh must be 60..604800 seconds: '%s'",
                           v);
            if (!strcmp(flag, "--aws-spot-refresh"))
                o->aws.spot_refresh_s = (double)n;
            else
                o->aws.on_demand_refresh_s = (double)n;
        } else if (!strcmp(flag, "--metrics-file")) {
            o->prom.metrics_file = v;
        } else if (!strcmp(flag, "--log-level")) {
            int l = af_log_parse_level(v);
            if (l < 0)
                return bad("--log-level must be debug, info, warn or error: '%s'", v);
            af_log_level = l;
        } else if (!strcmp(flag, "--log-format")) {
            if (!strcmp(v, "text"))
                af_log_format = AF_LOG_TEXT;
            else if (!strcmp(v, "json"))
                af_log_format = AF_LOG_JSON;
            else
                return bad("--log-format must be text or json: '%s'", v);
        }
    }
    if (sources > 1)
        return bad("%s", "--cluster, --demo, --kubeconfig and --in-cluster exclude each other");
    if (o->state_namespace && (o->cluster || o->demo))
        return bad("%s", "--state-namespace needs an API server: --cluster and --demo keep the "
                         "rollouts' state in memory");
    if (o->context && (o->in_cluster || o->cluster || o->demo))
        return bad("%s", "--context names a kubeconfig context: it goes with --kubeconfig, "
                         "$KUBECONFIG or ~/.kube/config");
    if (!o->http.tls_cert_file != !o->http.tls_key_file)
        return bad("%s", "--tls-cert-file and --tls-private-key-file go together");
    if (o->http.client_ca_file && !o->http.tls_cert_file)
        return bad("%s", "--client-ca-file needs --tls-cert-file and --tls-private-key-file");
    if (o->prom.url && o->prom.metrics_file)
        return bad("%s", "--prometheus and --metrics-file exclude each other");
    if (!o->prom.url && (o->prom.bearer_token_file || o->prom.basic_auth_file ||
                         o->prom.ca_file || o->prom.interval_s > 0))
        return bad("%s", "the --prometheus-* options need --prometheus URL");
    if (o->prom.bearer_token_file && o->prom.basic_auth_file)
        return bad("%s", "--prometheus-bearer-token-file and --prometheus-basic-auth-file "
                         "exclude each other");
    if (!o->aws_pricing && (o->aws.region || o->aws.spot_refresh_s || o->aws.on_demand_refresh_s))
        return bad("%s", "the --aws-* options need --aws-pricing");
    if (o->aws_pricing && (o->cluster || o->demo))
        return bad("%s", "--aws-pricing prices the nodes of a live cluster (an API server); "
                         "`accelfit prices` reads AWS's prices once");
    if (o->http.health_listen && !strcmp(o->http.health_listen, o->http.listen))
        return bad("--health-listen must differ from --listen: '%s'", o->http.listen);
    return 0;
}

/* --cluster FILE / --demo: one snapshot, published once, marked synced. */
static int load_static(const struct serve_opts *o, struct af_config *cfg, struct af_publisher *pub)
{
    struct af_cache *cache = af_cli_load_cluster("serve", cfg, o->demo ? NULL : o->cluster);
    struct af_snapshot *snap, *prev;
    const char *name = o->demo ? "<embedded demo cluster>" : o->cluster;
    char nodes[32], pods[32];

    if (!cache)
        return 2;
    snprintf(nodes, sizeof(nodes), "%zu", af_cache_node_count(cache));
    snprintf(pods, sizeof(pods), "%zu", af_cache_pod_count(cache));
    snap = af_cache_snapshot(cache);
    prev = af_publisher_acquire(pub);
    if (prev)   /* decoded again after a reload: a new generation, as /explain and /costs say */
        snap->generation = prev->generation + 1;
    af_snapshot_unref(prev);
    af_publisher_publish(pub, snap);
    af_cache_free(cache);
    AF_LOG(AF_LOG_INFO, "static cluster loaded", "source", name, "nodes", nodes, "pods", pods,
           NULL);
    return 0;
}

/* A static cluster after a reload: decoded again, so its nodes are classified and
 * priced by the new catalog and policy (a watched cluster's nodes are listed again:
 * reload_live). */
struct restatic {
    const struct serve_opts *o;
    struct af_publisher *pub;
};

static void reload_static(void *ud, struct af_config *cfg)
{
    struct restatic *rs = ud;

    if (load_static(rs->o, cfg, rs->pub) != 0)
        AF_LOG(AF_LOG_WARN, "cluster not decoded again after the reload; its nodes keep how "
               "the previous policy read them", NULL);
}

/* Each snapshot's tenant costs are computed on the publishing thread before requests
 * get it (af_costs_memo_warm) when the policy has a budget, which filter and prioritize
 * then read; otherwise only /costs, /explain and /metrics ask, and compute them then. */
static void warm_costs(void *ud, struct af_snapshot *snap)
{
    struct af_service *svc = ud;
    struct af_config *cfg = af_config_holder_get(svc->config);
    bool budgets = false;

    for (size_t i = 0; i < cfg->policy->n_tenants && !budgets; i++)
        budgets = cfg->policy->tenants[i].has_budget;
    if (budgets)
        af_costs_memo_warm(svc->costs, cfg, snap);
    af_config_unref(cfg);
}

/* A watched cluster after a reload: its nodes are listed again and read under the new
 * config, on the reflector's thread (af_kube_reclassify_nodes). */
static void reload_live(void *ud, struct af_config *cfg)
{
    (void)cfg;
    af_kube_reclassify_nodes(ud);
    af_kube_state_notify(ud);   /* a rollout added or changed: its record, written now */
}

/* The rollouts' shared state (src/kube/state.c) and the service's rollouts, joined. */
static size_t state_export(void *ud, double now, struct af_rollout_record **out)
{
    struct af_service *svc = ud;
    struct af_config *c = af_config_holder_get(svc->config);
    size_t n = af_rollouts_export(svc->rollouts, c, now, out);

    af_config_unref(c);
    return n;
}

static void state_absorb(void *ud, const struct af_rollout_record *v, size_t n)
{
    struct af_service *svc = ud;

    af_rollouts_absorb(svc->rollouts, v, n);
}

static void state_changed(void *ud)
{
    af_kube_state_notify(ud);
}

static int start_kube(const struct serve_opts *o, struct af_config_holder *holder,
                      struct af_prices_holder *prices, struct af_publisher *pub,
                      struct af_cache_status *st, struct af_kube **kube, char **state_ns)
{
    struct af_kube_conn *conn = NULL;
    struct af_kube_options kopt;
    struct af_error err;
    int rc;

    struct af_kube_source src = {o->kubeconfig, o->context, o->in_cluster};

    memset(&err, 0, sizeof(err));
    rc = af_kube_conn_resolve(&conn, &src, &err);
    if (rc != 0) {
        char msg[1024];
        af_error_format(&err, msg, sizeof(msg));
        fprintf(stderr, "accelfit serve: %s: %s\n",
                o->in_cluster   ? "cannot configure in-cluster access"
                : o->kubeconfig ? "cannot load kubeconfig"
                                : "no cluster to connect to (--cluster FILE and --demo serve "
                                  "without one)",
                msg[0] ? msg : af_strerror(rc));
        return 2;
    }
    AF_LOG(AF_LOG_INFO, "cluster connection", "from", conn->origin ? conn->origin : "",
           "context", conn->context ? conn->context : "", "server", conn->server, NULL);
    af_kube_options_default(&kopt);
    kopt.prices = prices;
    kopt.protobuf = !o->kube_json;
    *state_ns = o->state_namespace ? af_xstrdup(o->state_namespace)
                : conn->ns         ? af_xstrdup(conn->ns)
                                   : NULL;
    rc = af_kube_start(kube, conn, &kopt, holder, pub, st);
    if (rc != 0) {
        fprintf(stderr, "accelfit serve: cannot start the cluster watch: %s\n", af_strerror(rc));
        return 1;
    }
    return 0;
}

/* The regions the cluster's nodes are in (their topology.kubernetes.io/region labels), for
 * the AWS price reader; called on its thread. */
static size_t cluster_regions(void *ud, char (*out)[32], size_t max)
{
    struct af_snapshot *snap = af_publisher_acquire(ud);
    size_t n = af_cli_snapshot_regions(snap, out, max);

    af_snapshot_unref(snap);
    return n;
}

/* A new price book was swapped in: price the cached nodes with it. */
static void prices_read(void *ud, struct af_prices *book)
{
    (void)book;
    (void)af_kube_reprice(ud);
}

int af_cmd_serve(int argc, char **argv)
{
    struct serve_opts o;
    struct af_config *cfg = NULL;
    struct af_config_holder holder;
    struct af_publisher pub;
    struct af_cache_status status;
    struct af_service svc;
    struct af_kube *kube = NULL;
    struct af_reload_options ropt;
    struct af_prices_holder prices;
    struct af_aws_pricing *aws = NULL;
    struct restatic restatic;
    struct af_error err;
    struct sigaction sa;
    char why[600];
    char *state_ns = NULL;
    int rc;

    memset(&o, 0, sizeof(o));
    /* Loopback unless told: /mutate and /rollouts/ack take no authentication, so serving
     * every interface is a choice (the manifests make it, with --listen=:8888). */
    o.http.listen = "127.0.0.1:8888";
    o.http.max_body = 16u << 20;
    o.http.read_timeout_s = 10;
    o.when_not_ready = AF_NOT_READY_REJECT;
    o.max_staleness_s = 30;
    rc = parse_args(argc, argv, &o);
    if (rc == 1)
        return 0;   /* --help */
    if (rc != 0)
        return rc;
    /* Unusable TLS files are a configuration error like any other: one line, before any work. */
    if (af_http_check_tls(&o.http, why, sizeof(why)) != 0) {
        fprintf(stderr, "accelfit serve: %s\n", why);
        return 2;
    }

    memset(&err, 0, sizeof(err));
    rc = af_config_load(&cfg, o.catalog, o.policy, &err);
    if (rc != 0) {
        char msg[1024];
        af_error_format(&err, msg, sizeof(msg));
        fprintf(stderr, "accelfit serve: cannot load configuration: %s\n",
                msg[0] ? msg : af_strerror(rc));
        return 2;
    }
    af_config_holder_init(&holder, cfg);
    af_publisher_init(&pub);
    memset(&status, 0, sizeof(status));
    memset(&svc, 0, sizeof(svc));
    svc.config = &holder;
    svc.pub = &pub;
    svc.metrics = af_metrics_new();
    svc.rollouts = af_rollouts_new();   /* decisions not yet seen, the brake */
    svc.costs = af_costs_memo_new();    /* spend and idle cost, once per snapshot */
    svc.plans = af_plan_memo_new();     /* a pod's plan, once for its filter and prioritize */
    pub.on_publish = warm_costs;         /* ... computed before requests get the snapshot */
    pub.on_publish_ud = &svc;
    svc.when_not_ready = o.when_not_ready;
    if (o.aws_pricing) {
        af_prices_holder_init(&prices);
        svc.prices = &prices;
    }
    svc.max_staleness_ns = (uint64_t)o.max_staleness_s * 1000000000ull;

    if (o.prom.interval_s > 0 && cfg->policy && o.prom.interval_s > cfg->policy->util.staleness_s) {
        /* Every sample would be stale before the next round came: scoring would silently
         * fall back to allocation most of the time. */
        fprintf(stderr,
                "accelfit serve: --prometheus-interval %gs is longer than utilization.staleness "
                "(%gs) of %s: samples would go stale between rounds; lower the interval or "
                "raise the staleness\n",
                o.prom.interval_s, cfg->policy->util.staleness_s, cfg->policy->source);
        rc = 2;
        goto out;
    }
    if (o.prom.url || o.prom.metrics_file) {
        /* Live utilization: its own thread (or a recording); requests only read it. */
        rc = af_prom_start(&svc.util, &o.prom, &holder, why, sizeof(why));
        if (rc != 0) {
            fprintf(stderr, "accelfit serve: %s\n", why);
            rc = 2;
            goto out;
        }
    }
    if (o.cluster || o.demo) {
        struct af_config *c = af_config_holder_get(&holder);
        rc = load_static(&o, c, &pub);
        af_config_unref(c);
    } else {
        svc.status = &status;
        rc = start_kube(&o, &holder, svc.prices, &pub, &status, &kube, &state_ns);
        svc.kube = kube;
        if (rc == 0 && state_ns) {
            struct af_kube_state_ops ops = {&svc, state_export, state_absorb};
            struct af_kube_claims *kc = NULL;
            rc = af_kube_state_start(kube, state_ns, AF_ROLLOUT_STATE_OBJECT, &ops);
            if (rc == 0)
                af_rollouts_set_observer(svc.rollouts, state_changed, kube);
            /* one share whichever replica answers: new units claimed in the API server */
            if (rc == 0)
                rc = af_kube_claims_new(&kc, kube, state_ns, AF_ROLLOUT_CLAIMS_OBJECT);
            if (rc == 0)
                svc.claims = af_claims_start(&svc, kc, AF_CLAIM_TIMEOUT_S);
            rc = rc ? 1 : 0;
        } else if (rc == 0) {
            AF_LOG(AF_LOG_INFO, "rollout state kept in memory only (no --state-namespace, not "
                   "in a cluster): a restart begins every rollout again", NULL);
        }
    }
    if (rc == 0 && o.aws_pricing) {
        /* Prices from AWS: their own thread; a new book re-prices the cached nodes. */
        rc = af_aws_pricing_start(&aws, &o.aws, &prices, cluster_regions, &pub, prices_read,
                                  kube);
        if (rc != 0)
            fprintf(stderr, "accelfit serve: cannot start the AWS price reader: %s\n",
                    af_strerror(rc));
        rc = rc ? 1 : 0;
    }
    if (rc != 0)
        goto out;

    memset(&ropt, 0, sizeof(ropt));
    ropt.policy_path = o.policy;
    ropt.catalog_path = o.catalog;
    ropt.watch = !o.no_watch_policy;
    if (o.cluster || o.demo) {
        restatic.o = &o;
        restatic.pub = &pub;
        ropt.swapped = reload_static;
        ropt.ud = &restatic;
    } else {
        ropt.swapped = reload_live;
        ropt.ud = kube;
    }
    if (af_reload_start(&reloader, &holder, &ropt) != 0)
        AF_LOG(AF_LOG_WARN, "cannot start the policy reloader: the policy is not reloaded", NULL);
    svc.reload = reloader;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_hup;
    sa.sa_flags = SA_RESTART;   /* a reload request should not disturb the server's calls */
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);

    why[0] = '\0';
    o.http.error = why;
    o.http.error_len = sizeof(why);
    rc = af_http_run(&o.http, &svc, &stop_flag);
    if (rc != 0) {
        if (why[0])
            fprintf(stderr, "accelfit serve: %s\n", why);
        else
            fprintf(stderr, "accelfit serve: cannot serve on '%s': %s\n", o.http.listen,
                    af_strerror(rc));
        rc = rc == AF_EINVAL ? 2 : 1;
    }
out:
    signal(SIGHUP, SIG_IGN);
    af_reload_stop(reloader);
    reloader = NULL;
    af_prom_stop(svc.util);
    af_claims_stop(svc.claims);   /* before the API server client it uses */
    af_aws_pricing_stop(aws);   /* before the watch: a new book re-prices its cache */
    af_kube_stop(kube);
    af_rollouts_free(svc.rollouts);
    af_free(state_ns);
    af_costs_memo_free(svc.costs);
    af_plan_memo_free(svc.plans);
    af_metrics_free(svc.metrics);
    af_publisher_destroy(&pub);
    af_config_holder_destroy(&holder);
    if (svc.prices)
        af_prices_holder_destroy(svc.prices);
    alarm(0);   /* everything stopped in time */
    return rc;
}
