/* SPDX-License-Identifier: Apache-2.0 */
/*
 * select: the selection core. A workload profile goes in; an ordered list of
 * hardware tiers comes out, each with a concrete instance type, how many
 * instances the model needs, what that costs per hour, and why.
 *
 * Pure: no I/O, no allocation, no clock, no globals. The rules are data
 * (struct af_policy); this file only matches them and does the arithmetic.
 */
#ifndef AF_SELECT_H
#define AF_SELECT_H

#include "accelfit/config.h"
#include "accelfit/model.h"

#define AF_REASON_MAX 240
#define AF_TIER_REASONS 8

/* snprintf into a reason buffer of AF_REASON_MAX; a reason cut short is still a reason. */
void af_reasonf(char *r, const char *fmt, ...) AF_PRINTF(2, 3);

struct af_tier {
    int rank;                                  /* 1 = best */
    enum af_class cls;
    const struct af_tier_spec *spec;           /* the rule's tier (families); NULL for added tiers */
    const char *group;                         /* added tiers (cls UNKNOWN): what they hold; static */
    const struct af_instance_type *instance;   /* borrowed from the catalog; NULL if none */
    int instances;                             /* >= 1 */
    int devices;                               /* accelerators per instance the model needs (0: all/none) */
    bool price_known;
    double hourly_usd;                         /* instances x price, when known */
    double workload_usd;                       /* what the workload pays per hour, when known: its
                                                  devices' share of hourly_usd, or all of it */
    double accel_memory_gib;                   /* instances x accelerator memory per instance */
    double memory_needed_gib;                  /* 0 when the model size is unknown */
    char reasons[AF_TIER_REASONS][AF_REASON_MAX];
    int n_reasons;
};

/* A class the rules named but that was left out, and why. */
struct af_dropped {
    enum af_class cls;
    char reason[AF_REASON_MAX];
};

/* A class outside the rule that would hold the model (when none of the rule's does). */
struct af_outside {
    enum af_class cls;
    const struct af_instance_type *instance;   /* borrowed from the catalog */
    int instances;
    bool price_known;
    double hourly_usd;                         /* instances x price */
    double workload_usd;                       /* what the workload pays (its devices' share) */
    double accel_memory_gib;
};

struct af_selection {
    const char *rule;                          /* name of the rule that matched; borrowed */
    const char *rule_reason;                   /* its reason; borrowed */
    bool strict;                               /* the rule's tiers are the only classes allowed */
    bool price_ordered;                        /* objective cost: tiers ordered by price within a kind */
    bool rule_priced;                          /* ... because the rule says order: price */
    bool reordered;                            /* ... and the rule's first tier is not rank 1 */
    enum af_class rule_first;                  /* the rule's first tier's class (when reordered) */
    /* The class the rule lists first (af_select sets it, `listed`): rank 1 gets the rule's
     * reason only when it is that class; otherwise its reason says why that class is not
     * rank 1 (dropped, or ruled out by the pod's requests). */
    bool listed;
    enum af_class listed_first;
    struct af_tier tiers[AF_CLASS__COUNT];
    size_t n_tiers;
    struct af_dropped dropped[AF_CLASS__COUNT];
    size_t n_dropped;
    double memory_needed_gib;
    /* When the model is too large for every class of the rule: the catalog's classes that
     * hold it (within memory.max_instances, Neuron classes only when the profile can use
     * them), cheapest for the workload first. Empty otherwise. */
    struct af_outside outside[AF_CLASS__COUNT];
    size_t n_outside;
};

/*
 * Ranks hardware for `profile`. Never fails: with no matching rule the
 * result has n_tiers == 0 and `rule` NULL. Neuron classes are dropped unless
 * the profile is Neuron-ready and its framework is one the Neuron SDK
 * supports (or unknown, when `neuron_requested` says the pod already asks for
 * Neuron devices).
 */
void af_select(const struct af_policy *pol, const struct af_catalog *cat,
               const struct af_profile *profile, bool neuron_requested, struct af_selection *out);

/*
 * Writes each tier's rank and first reason (the rule's reason for rank 1, "fallback
 * N of rule R" below it). af_select calls it; so does whoever reorders or adds tiers.
 * reasons[0] of every tier is reserved for it.
 */
void af_selection_label(struct af_selection *sel);

/*
 * Sets one named field of a profile from text: "workload", "model-params",
 * "objective", "latency-slo-ms", "framework", "neuron-ready" ("true"/"false"),
 * "precision" ('_' may stand for '-'). Returns 0, or AF_EINVAL with a message
 * for people in `err` (the value quoted, the accepted values listed).
 */
/* The most parameters a model size may state (1000T); the least is 1. */
#define AF_MODEL_PARAMS_MAX 1e15
/*
 * A model size as the CLI, /recommend and the accelfit.io/model-params annotation take it
 * (af_parse_count's form), from 1 to AF_MODEL_PARAMS_MAX parameters. 0, or AF_EINVAL /
 * AF_ERANGE with `err` saying what is wrong and the form and range allowed.
 */
int af_model_params_parse(const char *s, double *out, char *err, size_t n) AF_MUST_CHECK;
int af_profile_set(struct af_profile *p, const char *key, const char *value, char *err,
                   size_t n) AF_MUST_CHECK;
/* The profile has what a recommendation needs (a workload). 0 or AF_EINVAL + message. */
int af_profile_check(const struct af_profile *p, char *err, size_t n) AF_MUST_CHECK;

/*
 * What a workload pays per hour on `instances` x `t` when it gets `devices` devices of each
 * (a pod gets the devices it requests, not the instance): devices x price / devices per
 * instance, the share rule of af_pod_share_usd; the whole price when `devices` is 0 or
 * covers the instance, and for a type without accelerators. af_select passes 0 when nothing
 * says how many devices the workload gets and for a model split across instances (it has
 * them to itself); objective cost orders tiers by the result. Negative when the price is
 * unknown.
 */
double af_select_workload_usd(const struct af_instance_type *t, int instances, int devices);

/* Memory the model needs in GiB for this profile under `pol` (0 when unknown). */
double af_select_memory_needed_gib(const struct af_policy *pol, const struct af_profile *profile);

#endif
