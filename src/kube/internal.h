/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube internals shared by its parts (not a public interface):
 *   kube.c       options, start and stop (threads, curl handles, the server URL)
 *   transport.c  credentials (token, token file, exec plugins) and the common
 *                libcurl setup of every request (TLS, auth headers, timeouts)
 *   reflector.c  LIST + WATCH of one kind into the shared cache (410, bookmarks,
 *                backoff) and the publisher thread that snapshots it
 *   events.c     the Event queue (dedup, budget) and its posting thread
 *   state.c      the rollouts' shared state: one ConfigMap, watched and written
 */
#ifndef AF_KUBE_INTERNAL_H
#define AF_KUBE_INTERNAL_H

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "accelfit/kube.h"
#include "accelfit/util.h"

#define MAX_EVENT_BYTES (16u << 20)        /* one watch event */
#define TOKEN_FILE_MAX_AGE_NS (60ull * 1000000000ull)
#define EVENT_QUEUE_MAX 256
#define EVENT_DEDUP_WINDOW_S 600.0
#define EVENT_DEDUP_MAX 4096
#define EXEC_TIMEOUT_NS (60ull * 1000000000ull)

/* ---- pending Events ---------------------------------------------------------------------- */

struct ev_item {
    char *ns, *pod, *uid, *type, *reason, *message;
    int count;
    double first, last;
};

struct ev_seen {
    uint64_t hash;
    double first;
};

struct af_kube;
struct list_items;

struct reflector {
    struct af_kube *k;
    enum af_kind kind;
    enum af_pod_set set;       /* pods: which of the two sets (cache.h) */
    pthread_t thread;
    CURL *h;
    char *rv;                  /* last seen resourceVersion */
    bool listed;               /* a full list of this kind was applied */
    bool protobuf;             /* the last list page came as protobuf (codec/proto.c) */
    bool up;
    atomic_bool relist;        /* list again (af_kube_reclassify_nodes); taken by the loop */
    /* per-transfer state */
    struct af_buf body;        /* the start of an error body, for the log */
    struct af_list_stream *list;   /* the LIST being decoded as it arrives */
    struct list_items *batch;  /* its decoded items not yet applied */
    struct af_buf line;        /* partial watch line */
    bool streaming;            /* 200 watch: parse lines */
    bool expired;              /* in-band ERROR 410 */
    bool failed;               /* other in-band ERROR or oversize event */
    long http_status;
    uint64_t events;           /* events seen on this watch */
};

struct af_kube {
    struct af_kube_conn *conn;
    struct af_kube_options opt;
    struct af_config_holder *cfg;
    struct af_publisher *pub;
    struct af_cache_status *st;
    struct af_cache_status own_st;   /* used when the caller passes no status */
    atomic_bool stop;
    double low_speed_time;
    char *base_url;            /* scheme://host:port[/prefix] used in URLs */
    struct curl_slist *connect_to;

    /* stop / dirty signalling */
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool dirty;                /* protected by ->lock */
    uint64_t dirty_since;      /* protected by ->lock */

    pthread_mutex_t cache_lock;
    struct af_cache *cache;    /* protected by ->cache_lock */
    struct af_prices *live;    /* the book nodes are priced with; protected by ->cache_lock */
    struct af_overlays *overlays;   /* Karpenter NodeOverlays (overlays.c); ->cache_lock */

    /* credentials, protected by ->cred_lock */
    pthread_mutex_t cred_lock;
    unsigned cred_gen;
    char *file_token;
    uint64_t file_token_read_ns;
    bool exec_valid;
    char *exec_token, *exec_cert, *exec_key;
    double exec_expiry;        /* wall seconds; 0 = none given */

    /* [AF_KIND_NODE], [AF_KIND_POD] (pods not managed, while not terminal), and [2]
     * (managed pods, terminal ones included) */
    struct reflector refl[3];
    pthread_t publisher;
    pthread_t overlays_thread;     /* overlays.c */
    struct dra_shared *dra;        /* dra.c: the DRA objects' tables; NULL until started */
    struct dra_watch *dra_watches; /* dra.c: one watch thread per kind */

    /* events, protected by ->ev_lock */
    struct af_kube_state *state;   /* state.c; NULL until af_kube_state_start */

    pthread_t ev_thread;
    pthread_mutex_t ev_lock;
    pthread_cond_t ev_cond;
    struct ev_item queue[EVENT_QUEUE_MAX];
    size_t q_head, q_len;
    struct ev_seen *seen;
    size_t n_seen;
    double tokens;
    double tokens_at;
};

struct creds {
    char *token;
    char *cert_pem;
    char *key_pem;
    unsigned gen;
};

/* transport.c */
/* Current credentials (runs the exec plugin or re-reads the token file when due). */
void af__kube_creds_get(struct af_kube *k, struct creds *c);
void af__kube_creds_clear(struct creds *c);
/* After a 401 with credentials of generation `gen`: force a refresh (once per generation). */
void af__kube_creds_invalidate(struct af_kube *k, unsigned gen);
/* Sets the common options on `h` for `path_query`. Returns the header list to free. */
struct curl_slist *af__kube_http_setup(struct af_kube *k, CURL *h, const char *path_query,
                                       const struct creds *c, char **urlp);
/* The same, asking for `accept` (af__kube_http_setup asks for application/json). */
struct curl_slist *af__kube_http_setup_accept(struct af_kube *k, CURL *h, const char *path_query,
                                              const struct creds *c, char **urlp,
                                              const char *accept);

/* GET `path_query` (stolen) with the current credentials, its body to `cb(ud)` as it arrives
 * (a watch streams until `cb` stops it, an error or its timeout); a 401 invalidates those
 * credentials. Returns the HTTP status (0 when none came). */
long af__kube_get_stream(struct af_kube *k, CURL *h, char *path_query,
                         size_t (*cb)(char *, size_t, size_t, void *), void *ud);

/* reflector.c: thread bodies (arg: struct reflector *, struct af_kube *) */
void *af__kube_reflector_main(void *arg);
void *af__kube_publisher_main(void *arg);

/* reflector.c: the backoff of every loop that talks to the API server: full jitter,
 * doubling from backoff_initial_s to backoff_max_s, back to the start after two minutes
 * without trouble. */
struct af_kube_backoff {
    double next;
    uint64_t last_trouble;
};
void af__kube_backoff_init(struct af_kube_backoff *b, struct af_kube *k);
/* Sleeps the next backoff (waking on stop); false when stop was requested. */
bool af__kube_backoff_sleep(struct af_kube_backoff *b, struct af_kube *k);
double af__kube_rand01(void);   /* uniform in [0, 1), per thread */

/*
 * state.c: one request (`method` GET, PUT or POST, `body` or NULL) with the transport of
 * every request, on `h`, given `timeout_ms`; the answer's status in *status and its body,
 * parsed, in *out (NULL when not JSON; caller decrefs). A 401 refreshes the credentials and
 * tries once more. Returns 0, AF_ECANCELED (stopping) or AF_ECONN.
 */
int af__kube_request(struct af_kube *k, CURL *h, const char *method, const char *path,
                     const char *body, long timeout_ms, long *status, json_t **out);

/* state.c: the paths of ConfigMap `name` of `ns` (*obj) and of its collection (*coll),
 * escaped with `h`; both new. */
void af__kube_configmap_paths(CURL *h, const char *ns, const char *name, char **coll,
                              char **obj);
/* state.c: a ConfigMap `name` of `ns` labelled as accelfit's, annotated accelfit.io/about
 * `about`, without data (new). */
json_t *af__kube_configmap_json(const char *ns, const char *name, const char *about);

/* state.c: stops and frees the state threads (after ->stop is set). */
void af__kube_state_stop(struct af_kube *k);

/* events.c */
void *af__kube_events_main(void *arg);   /* arg: struct af_kube * */
void af__kube_ev_item_free(struct ev_item *e);

/* reflector.c: sleeps `s` seconds or until stop; false when stopping. */
bool af__kube_sleep(struct af_kube *k, double s);
/* reflector.c: takes `o` (NULL: none) as the NodeOverlays nodes are priced with and prices
 * every cached node again; how many changed. */
struct af_overlays;
size_t af__kube_set_overlays(struct af_kube *k, struct af_overlays *o);
/* overlays.c: the NodeOverlay thread. */
void *af__kube_overlays_main(void *arg);
/* reflector.c: takes `d` (steals; NULL: none) as the DRA objects the cache's nodes and
 * snapshots use (af_cache_set_dra) and marks the cache dirty; how many nodes changed. */
struct af_dra;
size_t af__kube_set_dra(struct af_kube *k, struct af_dra *d);
/* dra.c: starts and stops (after ->stop is set) the DRA watch threads. */
struct dra_shared;
struct dra_watch;
void af__kube_dra_start(struct af_kube *k);
void af__kube_dra_stop(struct af_kube *k);

/* state.c: whether the API server serves `resource` in `group_version` (its discovery path,
 * "/apis/karpenter.sh/v1alpha1"): 1 yes, 0 no (404, or not listed), -1 it could not be asked. */
int af__kube_served(struct af_kube *k, CURL *h, const char *group_version,
                    const char *resource, long timeout_ms);

#endif
