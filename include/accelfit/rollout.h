/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rollout: moving a workload from one hardware class to another a share at a
 * time — A10G to L4 with the same pods (a placement rollout), or GPU to
 * Inferentia/Trainium with a rewritten pod (a variant rollout, applied by the
 * mutating admission webhook).
 *
 *   policy       rollouts: entries (selector, source and target classes, share
 *                or stages, fallback, variants, brake), loaded by src/config
 *   membership   a pod belongs to the first rollout whose selector matches it;
 *                its *unit* is its Job (or pod group) when it has one, else itself:
 *                every pod of one unit gets the same variant and the same side
 *   steering     each new unit goes to the side (target or source) furthest below
 *                its share, counting the units the cache shows plus the units
 *                decided and not yet seen; deterministic
 *   fallback     a unit sent to the target when no target node has room takes
 *                the source (counted, said in the reason) unless fallback: wait
 *   brake        target pods not Ready for too long, restarting, or Failed halt
 *                the rollout: no new units to the target until acknowledged or
 *                the policy changes; nothing is ever evicted
 *
 * The decision functions here are pure (no I/O, no clock: `now` is passed in).
 */
#ifndef AF_ROLLOUT_H
#define AF_ROLLOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accelfit/model.h"

/* ---- policy ------------------------------------------------------------------------------- */

/* An owned key/value pair (labels, env, images by container). */
struct af_pair {
    char *key;
    char *value;
};

struct af_toleration {
    char *key;                 /* may be NULL (matches every key with operator Exists) */
    char *op;                  /* "Exists" or "Equal" */
    char *value;               /* may be NULL */
    char *effect;              /* "NoSchedule", "PreferNoSchedule", "NoExecute" or NULL */
};

/* A place in the policy file (1-based line and column; 0 when not from a file), kept
 * for the checks that need the catalog and so run after loading. */
struct af_src_pos {
    int line;
    int column;
};

/*
 * How a pod is rewritten for the target side of a variant rollout. Resources
 * replace the source's accelerator resources in every container that requests
 * one (requests and limits both, equal, as the API server requires of extended
 * resources); claim templates replace the template a DRA claim of the pod is made
 * from (its containers name the claim, not the template, and stay as they are);
 * images are by container name ("*" for every container). A variant has resources,
 * claim templates or both.
 */
struct af_variant {
    struct af_pair *images;
    size_t n_images;
    struct af_pair *resources;     /* "aws.amazon.com/neuron" -> "1"; may be empty when
                                    * claim_templates is not */
    size_t n_resources;
    /* DRA (accelfit/dra.h): the ResourceClaimTemplate a pod's claim is made from, source
     * name -> target name ("a10g-one" -> "trn2-device"), swapped in spec.resourceClaims; a
     * template is looked up in the pod's namespace */
    struct af_pair *claim_templates;
    size_t n_claim_templates;
    struct af_pair *env;           /* added (or replaced) in every rewritten container */
    size_t n_env;
    struct af_toleration *tolerations;   /* added to the pod */
    size_t n_tolerations;
    struct af_pair *annotations;   /* added to the pod (accelfit.io/neuron-ready: "true") */
    size_t n_annotations;
    /* Where each resource amount is written (n_resources entries), for the catalog check
     * (a variant must fit an instance of a target class). NULL when not from a file. */
    struct af_src_pos *resource_pos;
};

struct af_rollout_stage {
    double share;              /* 0..1 */
    double start_unix;         /* the stage begins at this time (0: right after the previous) */
    double min_duration_s;     /* it lasts at least this long before the next may begin */
};

enum af_rollout_fallback {
    AF_FALLBACK_SOURCE = 0,    /* target full: the unit takes the source, counted */
    AF_FALLBACK_WAIT,          /* target full: the unit waits for target room */
};

struct af_rollout {
    char *name;
    int line;                  /* where it starts in the policy file */
    /* selector: every field that is set must hold */
    char *ns;                  /* namespace, NULL = any */
    struct af_pair *match_labels;
    size_t n_match_labels;
    char *owner_kind;          /* "Deployment", "StatefulSet", "ReplicaSet", "Job", NULL = any */
    char *owner_name;
    /* the two sides, as sets of classes (bit (1u << class)) */
    uint32_t source;
    uint32_t target;
    /* share of units on the target: stages when n_stages > 0, else `share` */
    double share;
    struct af_rollout_stage *stages;
    size_t n_stages;
    enum af_rollout_fallback fallback;
    struct af_variant *variant;    /* NULL: placement rollout (same pod on both sides) */
    /* the brake; 0 disables a condition */
    int brake_not_ready_s;         /* a target pod not Ready this long after it started */
    int brake_restarts;            /* a target pod's containers restarted this often */
    bool brake_on_failed;          /* a target pod ended Failed */
};

/* ---- membership and steering (pure) ------------------------------------------------------- */

/*
 * Only pods that opt in take part in rollouts: label accelfit.io/managed: "true"
 * (the same label the webhook's objectSelector sends). The cache keeps the labels
 * of those pods (struct af_pod_info.labels) and their status, for selectors and the
 * brake, and lists them in the snapshot (af_snapshot.managed), Failed ones included.
 */
#define AF_MANAGED_LABEL "accelfit.io/managed"
/* Annotations the webhook (or, for placement rollouts, nobody: the node's class tells)
 * puts on a pod whose side it decided. */
#define AF_ROLLOUT_ANNOTATION "accelfit.io/rollout"            /* the rollout's name */
#define AF_ROLLOUT_SIDE_ANNOTATION "accelfit.io/rollout-side"  /* "target" or "source" */
/* The claim ledger's entry for the unit's side (docs/rollouts.md): what settles the entry when
 * the pod reaches a replica's cache, named or not. */
#define AF_ROLLOUT_CLAIM_ANNOTATION "accelfit.io/rollout-claim"

enum af_rollout_side { AF_SIDE_NONE = 0, AF_SIDE_SOURCE, AF_SIDE_TARGET };

const char *af_rollout_side_name(enum af_rollout_side s);   /* "none", "source", "target" */

struct af_policy;
struct af_pod_info;

/* The rollout a pod belongs to: an index into pol->rollouts, or -1. Pure. */
int af_rollout_match(const struct af_policy *pol, const struct af_pod_info *pod);

/* The pod's unit: "Job/NAME" (all pods of one Job, indexed or not), "PodGroup/NAME"
 * (label scheduling.x-k8s.io/pod-group), else "Pod/NAME"; a pod not named yet (at
 * admission, with only generateName) as it will be known and by its owner:
 * "Pod/web-5d8f-* of ReplicaSet/web-5d8f". Pure. */
void af_rollout_unit(const struct af_pod_info *pod, char *out, size_t n);

/* The target share at `now` for a rollout that began at `began_unix` (stages advance
 * by start time and minimum duration); *stage (may be NULL) gets the 0-based stage
 * index: -1 without stages, and also before the first stage begins (share 0 then). Pure. */
double af_rollout_share(const struct af_rollout *r, double began_unix, double now, int *stage);
/* When stage `stage` begins (or began) for a rollout that began at `began_unix`: the first
 * at max(began, its start), each next one at max(previous + the previous stage's
 * min_duration_s, its start). 0 without stages or for an index out of range. Pure. */
double af_rollout_stage_start(const struct af_rollout *r, double began_unix, int stage);

/* Units per side, as counted for one decision. */
struct af_rollout_count {
    int target;                /* units on (or decided for) the target side */
    int source;
    int fallbacks;             /* target-decided units that took the source for lack of room */
};

/*
 * The side for a new unit: the target when its share after adding the unit stays
 * closest to `share` (ties go to the source, so a 0.25 rollout over four units
 * sends exactly one to the target). Deterministic. Pure.
 */
enum af_rollout_side af_rollout_choose(double share, const struct af_rollout_count *c);

/* ---- a rollout's state, as replicas share it (src/kube/state.c keeps it in the API server) -- */

#define AF_ROLLOUT_FORGIVEN_MAX 32
#define AF_ROLLOUT_TEXT_MAX 240

/* A target pod an acknowledgement forgave, with its container restarts then. */
struct af_rollout_forgiven {
    char pod[256];                      /* "namespace/name" */
    int restarts;
};

/*
 * What every replica must agree on about one rollout: the policy generation it belongs to
 * (a hash of the rollout's fields), when it began (each stage's start follows from it), its
 * last halt and last acknowledgement (halted while halted_at > acked_at) and the pods the
 * acknowledgements forgave. The stage fields are derived at `now` for people reading the
 * state object; af_rollout_record_merge ignores them.
 */
struct af_rollout_record {
    char name[64];
    uint64_t generation;
    double began;                       /* unix seconds */
    double halted_at;                   /* 0: never halted */
    double acked_at;                    /* 0: never acknowledged */
    char halt_reason[AF_ROLLOUT_TEXT_MAX];
    char halt_pod[256];
    size_t n_forgiven;
    struct af_rollout_forgiven forgiven[AF_ROLLOUT_FORGIVEN_MAX];
    /* derived, written for people and never read back */
    int stage;                          /* -1 without stages */
    double share, stage_began, next_stage;   /* next_stage 0: none */
};

/*
 * One entry of the claim ledger (AF_ROLLOUT_CLAIMS_OBJECT): a side a replica gave a new unit,
 * written to the API server before the webhook answered (docs/rollouts.md).
 */
struct af_rollout_claim {
    char id[48];                        /* unique: the replica's id and a sequence number */
    char rollout[64];
    uint64_t generation;                /* the rollout's generation when decided */
    char unit[320];                     /* "namespace/Job/NAME", ...; "" for an anonymous unit */
    enum af_rollout_side side;          /* AF_SIDE_NONE: a reserve given back (released) */
    double at;                          /* unix seconds */
    /* A reserve: a side claimed ahead for the next new unit a replica admits, before any
     * pod asks for it, so that the pod is answered without waiting for a write. Counted by
     * every replica as a unit decided and not yet seen; the pod that takes it names it. */
    bool reserve;
    bool released;                      /* a reserve given back unused: no longer counted */
};

/*
 * Merges two records of one rollout into `out` (which may be `a` or `b`), the same whichever
 * replica merges them in whichever order. Of two generations, the record that began later
 * wins whole (the newer policy; ties: the larger generation). Of one generation: the earliest
 * began, the latest halt (with its reason and pod), the latest acknowledgement, and the
 * union of the forgiven pods (the most restarts; at most AF_ROLLOUT_FORGIVEN_MAX, `a`'s
 * first). The derived fields are the winner's (`b`'s within one generation). Pure; cannot
 * fail.
 */
void af_rollout_record_merge(const struct af_rollout_record *a, const struct af_rollout_record *b,
                             struct af_rollout_record *out);

/* Whether merging `b` into `a` would change `a`'s shared fields (not the derived ones). Pure. */
bool af_rollout_record_differs(const struct af_rollout_record *a,
                               const struct af_rollout_record *b);

#endif
