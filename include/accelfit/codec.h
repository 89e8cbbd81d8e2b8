/* SPDX-License-Identifier: Apache-2.0 */
/*
 * codec: JSON (jansson) to and from the extender/v1 wire types and the
 * Kubernetes Node, Pod, List and watch-event objects. json_t never leaves this
 * module: what comes out are the core's records (struct af_node_info,
 * struct af_pod_info) and plain C values.
 *
 * Field names of extender/v1 are matched case-insensitively and `null` is
 * accepted wherever the Go encoder may send it; output uses PascalCase.
 */
#ifndef AF_CODEC_H
#define AF_CODEC_H

#include "accelfit/config.h"
#include "accelfit/decide.h"
#include "accelfit/model.h"
#include "accelfit/util.h"

/* ---- Kubernetes objects ---------------------------------------------------------------- */

/* Decoded from JSON text holding one Node / Pod object. New reference, or an error. */
int af_codec_decode_node(const struct af_config *cfg, const char *json, size_t len,
                         struct af_node_info **out, struct af_error *err) AF_MUST_CHECK;
int af_codec_decode_pod(const char *json, size_t len, struct af_pod_info **out,
                        struct af_error *err) AF_MUST_CHECK;

/*
 * A List (NodeList, PodList, or a kind: List of mixed Node and Pod objects, as
 * `kubectl get nodes,pods -A -o json` prints). Each item is passed to the
 * callback, which steals the reference it is given (exactly one of node, pod
 * is set). Items of other kinds are skipped. `rv` and `cont` (may be NULL)
 * receive new strings with metadata.resourceVersion and metadata.continue
 * (NULL when absent).
 */
typedef void (*af_item_cb)(void *ud, struct af_node_info *node, struct af_pod_info *pod);
int af_codec_decode_list(const struct af_config *cfg, const char *json, size_t len,
                         af_item_cb cb, void *ud, char **rv, char **cont,
                         struct af_error *err) AF_MUST_CHECK;
/*
 * The same, but an item that cannot be decoded is skipped and counted in
 * *skipped (which must start at 0) instead of failing the list; `err` then
 * describes the first skipped item. For API server lists, where one odd object
 * must not keep the cache from syncing.
 */
int af_codec_decode_list_skip(const struct af_config *cfg, const char *json, size_t len,
                              af_item_cb cb, void *ud, char **rv, char **cont, size_t *skipped,
                              struct af_error *err) AF_MUST_CHECK;

/*
 * The same, decoded as the bytes arrive: a LIST answer is fed in pieces of any size
 * and each item is decoded and handed to `cb` as soon as it is complete, so memory is
 * one item at a time, never the page (a v1.26 API server sends the first list whole).
 * With `skip_bad` an undecodable item is skipped and counted (as
 * af_codec_decode_list_skip), else it fails the list. feed returns the list's error
 * (then further input is ignored); finish checks the end, and gives what
 * af_codec_decode_list_skip gives: rv, cont, *skipped (may be NULL), err.
 */
#define AF_LIST_ITEM_MAX (16u << 20)    /* one item's JSON */
struct af_list_stream;
struct af_list_stream *af_list_stream_new(const struct af_config *cfg, bool skip_bad,
                                          af_item_cb cb, void *ud);
int af_list_stream_feed(struct af_list_stream *s, const char *data, size_t len);
int af_list_stream_finish(struct af_list_stream *s, char **rv, char **cont, size_t *skipped,
                          struct af_error *err) AF_MUST_CHECK;
void af_list_stream_free(struct af_list_stream *s);   /* NULL is fine */
/* Whether the body fed so far is Kubernetes' protobuf ("k8s\0"; docs/cluster.md), not JSON. */
bool af_list_stream_protobuf(const struct af_list_stream *s);

enum af_watch_type {
    AF_WATCH_ADDED = 0,
    AF_WATCH_MODIFIED,
    AF_WATCH_DELETED,
    AF_WATCH_BOOKMARK,
    AF_WATCH_ERROR,
};

struct af_watch_event {
    enum af_watch_type type;
    struct af_node_info *node;         /* new ref, for node events (not BOOKMARK/ERROR) */
    struct af_pod_info *pod;           /* new ref, for pod events */
    char *rv;                          /* new string: the object's resourceVersion, may be NULL */
    int status_code;                   /* ERROR: Status.code (410 for Expired) */
    char *status_reason;               /* ERROR: new string, e.g. "Expired" */
    char *status_message;              /* ERROR: new string */
};

/* One watch event `{"type":..,"object":..}` of the given kind. */
int af_codec_decode_watch_event(const struct af_config *cfg, enum af_kind kind, const char *json, size_t len, struct af_watch_event *ev,
                                struct af_error *err) AF_MUST_CHECK;
void af_watch_event_clear(struct af_watch_event *ev);

/*
 * A cluster file: JSON or YAML (detected by its first non-space byte: '{' or
 * '[' means JSON). Same callback contract as af_codec_decode_list.
 */
int af_codec_decode_cluster(const struct af_config *cfg, const char *name, const char *text,
                            size_t len, af_item_cb cb, void *ud, struct af_error *err) AF_MUST_CHECK;
/*
 * Reads and decodes the cluster file at `path`. Every error names the file and
 * says what was expected and what was found: no such file, a directory, an
 * empty file, malformed JSON or YAML (with line and column), a document that is
 * not a List, Node or Pod (with the kind found). At most AF_CLUSTER_FILE_MAX bytes.
 */
#define AF_CLUSTER_FILE_MAX ((size_t)1 << 30)
int af_codec_load_cluster_file(const struct af_config *cfg, const char *path, af_item_cb cb,
                               void *ud, struct af_error *err) AF_MUST_CHECK;

/* ---- extender/v1 ------------------------------------------------------------------------ */

/* A decoded ExtenderArgs. Opaque: it keeps the request's Node objects to echo back. */
struct af_ext_args;

/*
 * Decodes ExtenderArgs. Errors (AF_EPARSE, AF_ETYPE, AF_EINVAL) fill `err`
 * with a message that names the field, e.g. "Pod: expected an object".
 * In `Nodes` mode each Node is classified with `cfg`.
 */
int af_codec_decode_args(const struct af_config *cfg, const char *body, size_t len,
                         struct af_ext_args **out, struct af_error *err) AF_MUST_CHECK;
void af_ext_args_free(struct af_ext_args *a);            /* NULL is fine */

const struct af_pod_info *af_ext_args_pod(const struct af_ext_args *a);   /* borrowed */
bool af_ext_args_nodes_mode(const struct af_ext_args *a);  /* full Nodes given (cache-incapable) */
size_t af_ext_args_count(const struct af_ext_args *a);
const char *af_ext_args_name(const struct af_ext_args *a, size_t i);       /* borrowed */
/* The node decoded from the request (Nodes mode), else NULL. Borrowed. */
const struct af_node_info *af_ext_args_node(const struct af_ext_args *a, size_t i);

/*
 * ExtenderFilterResult. Passing nodes go to NodeNames (names mode) or Nodes
 * (the request's own Node objects, Nodes mode); FailedNodes and
 * FailedAndUnresolvableNodes carry the reasons. `error` NULL or "" for none.
 * With args == NULL (undecodable request) only Error is set meaningfully.
 */
int af_codec_encode_filter(const struct af_ext_args *args, const struct af_node_decision *d,
                           size_t n, const char *error, struct af_buf *out) AF_MUST_CHECK;
/* HostPriorityList: [{"Host":..,"Score":..},...] in input order. `args` (may be NULL) is the
 * request the decisions answer: its names are known to need no escape. */
int af_codec_encode_priorities(const struct af_ext_args *args, const struct af_node_decision *d,
                               size_t n, struct af_buf *out) AF_MUST_CHECK;

/*
 * A decoded ExtenderPreemptionArgs: the pod and each candidate node with its
 * victims reduced to UIDs and NumPDBViolations (what the answer repeats).
 * Opaque.
 */
struct af_preempt_args;

/*
 * Decodes ExtenderPreemptionArgs. The victims come from NodeNameToMetaVictims
 * ({"Pods":[{"UID":..}],"NumPDBViolations":n}, nodeCacheCapable: true) or
 * NodeNameToVictims (full Pods, of which metadata.uid is kept; false); the one
 * not used is null (an empty map counts as null, both set is AF_EINVAL).
 * Neither set means no candidates. Errors (AF_EPARSE, AF_ETYPE, AF_EINVAL)
 * fill `err` with a message that names the field.
 */
int af_codec_decode_preempt_args(const char *body, size_t len, struct af_preempt_args **out,
                                 struct af_error *err) AF_MUST_CHECK;
void af_preempt_args_free(struct af_preempt_args *a);     /* NULL is fine */

const struct af_pod_info *af_preempt_args_pod(const struct af_preempt_args *a);  /* borrowed */
bool af_preempt_args_meta(const struct af_preempt_args *a);  /* NodeNameToMetaVictims given */
size_t af_preempt_args_count(const struct af_preempt_args *a);                  /* candidates */
const char *af_preempt_args_name(const struct af_preempt_args *a, size_t i);   /* borrowed */
size_t af_preempt_args_victims(const struct af_preempt_args *a, size_t i);     /* victim pods */

/*
 * ExtenderPreemptionResult: {"NodeNameToMetaVictims":{..}} with the candidates
 * i for which keep[i] (af_preempt_args_count entries) is true, in request
 * order, each with its victims as given. args NULL or nothing kept gives an
 * empty map. Returns 0 or AF_ETOOBIG.
 */
int af_codec_encode_preempt(const struct af_preempt_args *args, const bool *keep,
                            struct af_buf *out) AF_MUST_CHECK;

/* ---- recommendations ---------------------------------------------------------------------- */

/*
 * Appends the recommendation for `p` (the selection `s` made under `cfg`) as one
 * JSON object and a newline: profile, rule, memory_needed_gib, tiers, dropped,
 * catalog, policy. `b` must be unbounded (max 0). Cannot fail.
 */
void af_recommend_json(const struct af_profile *p, const struct af_config *cfg,
                       const struct af_selection *s, struct af_buf *b);

/*
 * The parameters of a POST /recommend body, {"workload":"training","model_params":"70B",
 * "neuron_ready":true, ...}: each member's name and its scalar as text (numbers as
 * written, booleans as true/false). Calls `cb` once per member, in order; stops at the
 * first non-zero return and returns it. Errors (not JSON, not an object, a member that
 * is not a scalar) are AF_EPARSE/AF_ETYPE with `err` naming the member.
 */
typedef int (*af_param_cb)(void *ud, const char *key, const char *value);
int af_codec_decode_params(const char *body, size_t len, af_param_cb cb, void *ud,
                           struct af_error *err) AF_MUST_CHECK;

/* ---- admission (the mutating webhook for variant rollouts) ---------------------------------- */

/*
 * A decoded AdmissionReview (admission.k8s.io/v1) request. Opaque: it keeps the Pod object
 * exactly as received, which every patch is built from and checked against.
 */
struct af_admission;

/*
 * Decodes an AdmissionReview request body: strict about what it is (kind AdmissionReview,
 * apiVersion admission.k8s.io/v1, request.uid, request.object a v1 Pod, request.namespace or
 * the Pod's own, a name or generateName), lenient about fields it does not read. Returns
 *   0                with *out set (free it with af_admission_free);
 *   AF_EUNSUPPORTED  a well-formed review that is not a Pod CREATE (another kind, resource,
 *                    operation, or a subresource): *out is still set, holding the uid only
 *                    (af_admission_pod is NULL), so that it can be answered allowed;
 *   AF_EPARSE, AF_ETYPE, AF_EINVAL  not such a review; *out is NULL.
 * `err` says what, naming the field ("request.uid: missing").
 */
int af_codec_decode_admission(const char *body, size_t len, struct af_admission **out,
                              struct af_error *err) AF_MUST_CHECK;

/*
 * How many JSON values `len` bytes of text hold at most, counted without parsing (objects,
 * arrays, and one more per ',' outside strings), so that a body can be refused before a
 * tree of it is built (docs/http-api.md, "Limits"). Pure; cannot fail.
 */
size_t af_codec_json_values(const char *text, size_t len);
void af_admission_free(struct af_admission *a);                  /* NULL is fine */

const char *af_admission_uid(const struct af_admission *a);      /* borrowed */
bool af_admission_dry_run(const struct af_admission *a);         /* request.dryRun */
/*
 * The Pod (borrowed; NULL for AF_EUNSUPPORTED). Its namespace is request.namespace when the
 * object names none. A generateName pod has no name until after admission: its name is ""
 * (rollout_state's anonymous unit, one of its own unless it has a Job or pod group), and
 * af_admission_generate_name gives the prefix (NULL for a pod with a name).
 */
const struct af_pod_info *af_admission_pod(const struct af_admission *a);
const char *af_admission_generate_name(const struct af_admission *a);   /* borrowed */

/* Warnings for the AdmissionReview response (kubectl prints them): short lines. */
#define AF_WARNINGS_MAX 8
#define AF_WARNING_LEN 256
struct af_warnings {
    size_t n;
    char text[AF_WARNINGS_MAX][AF_WARNING_LEN];
};
/* Adds one (cut to AF_WARNING_LEN; dropped beyond AF_WARNINGS_MAX). Cannot fail. */
void af_warnings_add(struct af_warnings *w, const char *fmt, ...) AF_PRINTF(2, 3);

/* How to change the pod. */
struct af_mutation {
    const char *rollout;               /* its name: annotation accelfit.io/rollout */
    enum af_rollout_side side;         /* SOURCE or TARGET: annotation accelfit.io/rollout-side */
    const struct af_variant *variant;  /* rewrite with it (the target of a variant rollout), or
                                        * NULL: the two annotations only */
    uint32_t source;                   /* the rollout's source classes: the accelerator
                                        * resources of their kinds are what the variant replaces */
    const char *claim;                 /* the claim ledger's entry (annotation
                                        * accelfit.io/rollout-claim), or NULL: none */
};

/*
 * Builds the JSONPatch (RFC 6902) that applies `m` to the Pod as received. With a variant,
 * every container and init container that requests a source accelerator resource gets the
 * variant's resources instead, in requests and limits alike (the source's keys removed), and
 * the variant's env (added, or replacing a variable of the same name); images go by container
 * name, "*" standing for every container and every rewritten init container; tolerations
 * not already there are appended. A DRA claim (spec.resourceClaims) made from a template the
 * variant's claim_templates name is made from the target template instead, and a container
 * that names such a claim is rewritten too (image, env; its resources stay: the claim holds
 * its devices). A variant without resources leaves device-plugin requests as they are. Annotations (the variant's, then accelfit.io/rollout and
 * accelfit.io/rollout-side) are set. Missing parents are created with one `add`, and keys
 * are escaped (~0, ~1).
 *
 * The patch is then applied to a copy of the object and the result checked as the API
 * server would (extended resources in limits and equal in requests, no source accelerator
 * left in a rewritten container, every image, env, toleration and annotation in place).
 * Returns 0 with the patch (a JSON array) appended to `patch`, or nothing appended when
 * nothing changes, and `requests` (may be NULL) set to the effective requests of the
 * patched pod (what rollout_state's room check wants for the target side); AF_EINVAL when
 * the pod cannot be changed safely (a variant with a resource accelfit does not know, no
 * container requesting a source accelerator and no claim template to swap, an image for a
 * container the pod lacks...):
 * nothing appended and one warning in `w` saying why; AF_ETOOBIG when `patch` is full
 * (nothing appended). Notes on what a rewrite kept (a nodeSelector) go to `w` too.
 */
int af_codec_admission_patch(const struct af_admission *a, const struct af_mutation *m,
                             struct af_buf *patch, struct af_resources *requests,
                             struct af_warnings *w) AF_MUST_CHECK;

struct af_preferences;

/*
 * Builds the JSONPatch that adds preferences (accelfit/prefer.h) to the pod's node affinity,
 * merged with whatever affinity the pod has: its preferred terms stay, with their weights,
 * and the preferred terms are appended after them; the required NotIn expression (when
 * there is one) is ANDed into every term of the pod's required node affinity (terms are
 * ORed), or becomes its only term. Nothing the pod states is removed or loosened. Missing
 * parents are created with one `add`; the patch is applied to a copy of the pod and checked.
 * Returns 0 with the patch appended (nothing when there is nothing to add); AF_EINVAL when
 * the pod cannot take it safely (affinity of the wrong type, spec.nodeName set): nothing
 * appended and one warning in `w`; AF_ETOOBIG when `patch` is full (nothing appended). A pod
 * whose required node affinity has no terms keeps it unchanged, with a warning.
 */
int af_codec_admission_affinity(const struct af_admission *a, const struct af_preferences *p,
                                struct af_buf *patch, struct af_warnings *w) AF_MUST_CHECK;

/*
 * Appends the AdmissionReview response: apiVersion admission.k8s.io/v1, kind
 * AdmissionReview, response.uid = `uid`, allowed true, and when `patch_len` > 0 patchType
 * JSONPatch with the patch in base64; `w` (may be NULL) as response.warnings. Returns 0, or
 * AF_ETOOBIG with nothing appended.
 */
int af_codec_encode_admission(const char *uid, const char *patch, size_t patch_len,
                              const struct af_warnings *w, struct af_buf *out) AF_MUST_CHECK;

/*
 * A NodeOverlayList (the API server's list of karpenter.sh/v1alpha1 NodeOverlays, or a JSON
 * array of them) into a new set of overlays (accelfit/prices.h). An overlay whose price
 * fields are malformed is logged and left out; the others stand. 0, or AF_EPARSE/AF_ETYPE
 * when the text is not such a list.
 */
struct af_overlays;
int af_codec_decode_overlays(const char *json, size_t len, struct af_overlays **out,
                             struct af_error *err) AF_MUST_CHECK;

/* ---- DRA objects (resource.k8s.io/v1; accelfit/dra.h) --------------------------------- */

enum af_dra_kind { AF_DRA_SLICE = 0, AF_DRA_CLAIM, AF_DRA_TEMPLATE, AF_DRA_CLASS };
#define AF_DRA_KINDS 4
/* "ResourceSlice", "ResourceClaim", "ResourceClaimTemplate", "DeviceClass". Static. */
const char *af_dra_kind_name(enum af_dra_kind k);
int af_dra_kind_parse(const char *s);   /* -1 when not one */

/* One decoded object: the record of its kind (owned; the others NULL). */
struct af_dra_slice;
struct af_dra_claim;
struct af_dra_class;
struct af_dra_obj {
    enum af_dra_kind kind;
    struct af_dra_slice *slice;
    struct af_dra_claim *claim;   /* a claim or a template */
    struct af_dra_class *cls;
};
void af_dra_obj_clear(struct af_dra_obj *o);              /* drops the record it holds */
const char *af_dra_obj_name(const struct af_dra_obj *o);  /* borrowed; NULL when empty */
const char *af_dra_obj_ns(const struct af_dra_obj *o);    /* claims and templates; else NULL */

/* Called with each decoded item; the callee owns `o`'s record (may steal it and zero it). */
typedef void (*af_dra_item_cb)(void *ud, struct af_dra_obj *o);
/*
 * A List of `kind` (one page): each item to `cb`; an item that is not one (no name, not an
 * object) is counted in *skipped (may be NULL) and left out. *rv and *cont (may be NULL)
 * get the list's resourceVersion and continue token (new; NULL when absent). 0, or
 * AF_EPARSE/AF_ETYPE when the text is not such a list.
 */
int af_codec_decode_dra_list(enum af_dra_kind kind, const char *json, size_t len,
                             af_dra_item_cb cb, void *ud, char **rv, char **cont,
                             size_t *skipped, struct af_error *err) AF_MUST_CHECK;

enum af_dra_event_type { AF_DRA_EV_UPSERT = 0, AF_DRA_EV_DELETED, AF_DRA_EV_BOOKMARK,
                         AF_DRA_EV_ERROR };
struct af_dra_event {
    enum af_dra_event_type type;
    struct af_dra_obj obj;       /* UPSERT, DELETED; clear with af_dra_obj_clear */
    int code;                    /* ERROR: the Status code (410: expired) */
    char rv[64];                 /* the object's resourceVersion, "" when none */
};
/*
 * The DRA objects of a cluster file (af_codec_decode_cluster reads its Nodes and Pods and
 * passes over these): each ResourceSlice, ResourceClaim, ResourceClaimTemplate and
 * DeviceClass item to `cb`. An item of those kinds that is not one (no name) is an error
 * naming its place. 0, or the file's error.
 */
int af_codec_decode_cluster_dra(const char *name, const char *text, size_t len,
                                af_dra_item_cb cb, void *ud, struct af_error *err) AF_MUST_CHECK;
struct af_dra;
/*
 * The DRA objects of a cluster file as one index (af_dra_build), for the commands that read a
 * file instead of watching (simulate, costs, recommend): *out gets a new index (refcnt 1), or
 * NULL when the file has none. 0, or the file's error (*out NULL).
 */
int af_codec_cluster_dra(const char *name, const char *text, size_t len, struct af_dra **out,
                         struct af_error *err) AF_MUST_CHECK;
/* One watch event line of `kind`. 0, or an error naming what is wrong (ev->obj empty). */
int af_codec_decode_dra_event(enum af_dra_kind kind, const char *json, size_t len,
                              struct af_dra_event *ev, struct af_error *err) AF_MUST_CHECK;

/* ---- the simulator's files (src/codec/simulate.c; their types in accelfit/simulate.h) ---- */

struct af_sim_cluster;
struct af_sim_trace;

/*
 * A cluster file (JSON or YAML: a List of Nodes and Pods, as `kubectl get nodes,pods -A
 * -o json` prints) into *out. Pods bound to a node of the file that are not terminal go
 * to out->bound; others are ignored. With `trace` not NULL, the file's pods become that
 * trace instead (--workload-from-cluster): arrival is metadata.creationTimestamp (t = 0
 * at the earliest), duration runs from status.startTime to the latest
 * containerStatuses[].state.terminated.finishedAt, or to the end for a pod still
 * running; the end is the latest time the file shows. A pod without a creationTimestamp
 * arrives at 0; a finished pod without a finishedAt is left out. DaemonSet and mirror pods
 * stay bound where they are (they run on every node). Returns 0, or AF_EPARSE / AF_ETYPE /
 * AF_EINVAL with `err` naming the item ("items[3]: ...").
 */
int af_codec_decode_sim_cluster(const struct af_config *cfg, const char *name, const char *text,
                                size_t len, struct af_sim_cluster *out, struct af_sim_trace *trace,
                                struct af_error *err) AF_MUST_CHECK;

/*
 * A trace file (docs/simulate.md): a YAML or JSON document with `pods:` (and optional
 * `start:`, `end:`), or JSON Lines, one pod entry per line. Returns 0, or an error
 * with `err` naming the entry ("pods[2] (web): duration: ...", or line L for JSON
 * Lines and YAML syntax).
 */
int af_codec_decode_trace(const char *name, const char *text, size_t len,
                          struct af_sim_trace *out, struct af_error *err) AF_MUST_CHECK;

#endif
