/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A pod's plan: its intent read from the accelfit.io annotations (a
 * malformed value is not guessed at: the key is treated as absent and a note
 * says so), the workload inferred when it is not stated, the ranked tiers from
 * the selection core, and then only the tiers the pod's resource requests can
 * actually use. A filter cannot change requests, so a pod asking for
 * nvidia.com/gpu can only ever run on NVIDIA classes, a Neuron pod only on
 * Neuron classes of the NeuronCore generation its artifact was compiled for,
 * and a CPU-only pod on CPU nodes (plus accelerator nodes as a last resort
 * when the policy allows backfill).
 *
 * Pure: no I/O, no allocation; the plan has a fixed size.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "accelfit/decide.h"

static void note(struct af_plan *p, const char *fmt, ...) AF_PRINTF(2, 3);

static void note(struct af_plan *p, const char *fmt, ...)
{
    va_list ap;

    if (p->n_notes >= AF_NOTE_MAX)
        return;
    va_start(ap, fmt);
    vsnprintf(p->notes[p->n_notes], AF_REASON_MAX, fmt, ap);
    va_end(ap);
    p->n_notes++;
}

static void drop(struct af_selection *sel, enum af_class cls, const char *fmt, ...)
    AF_PRINTF(3, 4);

static void drop(struct af_selection *sel, enum af_class cls, const char *fmt, ...)
{
    va_list ap;
    struct af_dropped *d;

    if (sel->n_dropped >= AF_ARRAY_SIZE(sel->dropped))
        return;
    d = &sel->dropped[sel->n_dropped++];
    d->cls = cls;
    va_start(ap, fmt);
    vsnprintf(d->reason, sizeof(d->reason), fmt, ap);
    va_end(ap);
}

/* Bad values are quoted, cut short so a huge annotation cannot crowd the note. */
#define BAD "annotation accelfit.io/%s='%.40s' "

static void read_intent(const struct af_pod_info *pod, struct af_plan *p)
{
    const struct af_pod_annotations *a = &pod->ann;
    struct af_profile *pr = &p->profile;

    if (a->workload) {
        int w = af_workload_parse(a->workload);
        if (w < 0)
            note(p, BAD "is not a workload (training, inference, batch-inference, "
                        "preprocessing, classical-ml, development); ignored",
                 "workload", a->workload);
        else
            pr->workload = (enum af_workload)w;
    }
    if (a->model_params) {
        double v = 0;
        if (af_parse_count(a->model_params, &v) || !(v > 0))
            note(p, BAD "is not a count (e.g. 7B, 350M, 13e9); ignored", "model-params",
                 a->model_params);
        else
            pr->model_params = v;
    }
    if (a->objective) {
        int o = af_objective_parse(a->objective);
        if (o < 0)
            note(p, BAD "is not an objective (cost, performance, balanced, latency); ignored",
                 "objective", a->objective);
        else
            pr->objective = (enum af_objective)o;
    }
    if (a->latency_slo_ms) {
        int64_t v;
        if (af_parse_int64(a->latency_slo_ms, 1, 86400000, &v))
            note(p, BAD "is not a positive integer of milliseconds; ignored", "latency-slo-ms",
                 a->latency_slo_ms);
        else
            pr->latency_slo_ms = (int)v;
    }
    if (a->framework) {
        int f = af_framework_parse(a->framework);
        if (f < 0)
            note(p, BAD "is not a framework (pytorch, tensorflow, jax, other); ignored",
                 "framework", a->framework);
        else
            pr->framework = (enum af_framework)f;
    }
    if (a->neuron_ready) {
        if (!strcasecmp(a->neuron_ready, "true"))
            pr->neuron_ready = true;
        else if (!strcasecmp(a->neuron_ready, "false"))
            pr->neuron_ready = false;
        else
            note(p, BAD "is not true or false; ignored", "neuron-ready", a->neuron_ready);
    }
    if (a->precision) {
        int v = af_precision_parse(a->precision);
        if (v < 0)
            note(p, BAD "is not a precision (fp32, bf16, fp16, int8); ignored", "precision",
                 a->precision);
        else
            pr->precision = (enum af_precision)v;
    }
}

/* The accelerator resource the pod asks for, by name, for notes and reasons. */
static const char *accel_resource(const struct af_resources *r)
{
    static const enum af_res order[] = {AF_RES_GPU, AF_RES_NEURON, AF_RES_NEURONDEVICE,
                                        AF_RES_NEURONCORE};
    for (size_t i = 0; i < AF_ARRAY_SIZE(order); i++)
        if (r->v[order[i]] > 0)
            return af_res_name(order[i]);
    return "no accelerator";
}

/* Cheapest priced instance type of `cls` in the catalog, for a fallback tier. */
static const struct af_instance_type *cheapest(const struct af_catalog *cat, enum af_class cls)
{
    const struct af_instance_type *best = NULL;

    for (size_t i = 0; cat && i < cat->n_types; i++) {
        const struct af_instance_type *t = &cat->types[i];
        if (t->cls != cls)
            continue;
        if (!best || (t->price_usd_hr >= 0 &&
                      (best->price_usd_hr < 0 || t->price_usd_hr < best->price_usd_hr)))
            best = t;
    }
    return best;
}

static void add_fallback_tier(struct af_plan *p, const struct af_catalog *cat, enum af_class cls,
                              const char *why)
{
    struct af_tier *t;

    if (p->sel.n_tiers >= AF_ARRAY_SIZE(p->sel.tiers))
        return;
    t = &p->sel.tiers[p->sel.n_tiers++];
    memset(t, 0, sizeof(*t));
    t->cls = cls;
    t->instances = 1;
    t->instance = cheapest(cat, cls);
    if (t->instance && t->instance->price_usd_hr >= 0) {
        t->price_known = true;
        t->hourly_usd = t->instance->price_usd_hr;
    }
    if (t->instance)
        t->accel_memory_gib = af_instance_accel_memory_gib(t->instance);
    snprintf(t->reasons[0], AF_REASON_MAX, "%s", why);
    t->n_reasons = 1;
}

/* Why tier class `cls` cannot serve this pod's requests, or NULL when it can. */
static const char *unusable(const struct af_plan *p, const struct af_pod_info *pod,
                            enum af_class cls, int neuron_gen, char *buf, size_t n)
{
    enum af_accel_kind kind = af_class_kind(cls);

    switch (p->requested) {
    case AF_ACCEL_GPU:
        if (kind == AF_ACCEL_GPU)
            return NULL;
        snprintf(buf, n, "the pod requests nvidia.com/gpu, which %s nodes do not have",
                 af_class_name(cls));
        return buf;
    case AF_ACCEL_NEURON:
        if (kind != AF_ACCEL_NEURON) {
            snprintf(buf, n, "the pod requests %s, which %s nodes do not have",
                     accel_resource(&pod->requests), af_class_name(cls));
            return buf;
        }
        if (neuron_gen && af_class_neuron_core_version(cls) != neuron_gen) {
            snprintf(buf, n,
                     "%s runs NeuronCore-v%d; the pod's first Neuron tier runs NeuronCore-v%d, "
                     "and a Neuron artifact runs only on the generation it was compiled for",
                     af_class_name(cls), af_class_neuron_core_version(cls), neuron_gen);
            return buf;
        }
        return NULL;
    default:
        if (kind == AF_ACCEL_NONE)
            return NULL;
        snprintf(buf, n, "CPU-only pod (no accelerator requested): kept off %s",
                 af_class_name(cls));
        return buf;
    }
}

void af_plan_pod(const struct af_policy *pol, const struct af_catalog *cat,
                 const struct af_pod_info *pod, struct af_plan *out)
{
    struct af_selection *sel = &out->sel;
    struct af_tier kept[AF_ARRAY_SIZE(sel->tiers)];
    size_t n_kept = 0;
    int neuron_gen = 0;

    memset(out, 0, sizeof(*out));
    af_profile_init(&out->profile);
    for (int c = 0; c < AF_CLASS__COUNT; c++)
        out->tier_of[c] = -1;

    read_intent(pod, out);
    out->requested = af_res_accel_kind(&pod->requests);
    if (out->profile.workload == AF_WORKLOAD_UNKNOWN) {
        out->workload_inferred = true;
        if (out->requested != AF_ACCEL_NONE) {
            out->profile.workload = AF_WORKLOAD_INFERENCE;
            note(out, "workload not annotated: inferred inference from the %s request",
                 accel_resource(&pod->requests));
        } else {
            out->profile.workload = AF_WORKLOAD_PREPROCESSING;
            note(out, "workload not annotated: inferred preprocessing (no accelerator requested)");
        }
    }
    /* A malformed neuron-ready is treated as absent (read_intent noted it). */
    if (out->requested == AF_ACCEL_NEURON &&
        (!pod->ann.neuron_ready || (strcasecmp(pod->ann.neuron_ready, "true") &&
                                    strcasecmp(pod->ann.neuron_ready, "false")))) {
        out->profile.neuron_ready = true;
        note(out, "the pod requests %s without accelfit.io/neuron-ready: taken as Neuron-ready",
             accel_resource(&pod->requests));
    }

    if (pol)
        af_select(pol, cat, &out->profile, out->requested == AF_ACCEL_NEURON, sel);
    else
        memset(sel, 0, sizeof(*sel));

    /* Keep the tiers the requests can use; the rest go to `dropped` with the reason. */
    for (size_t i = 0; i < sel->n_tiers; i++) {
        char why[AF_REASON_MAX];
        const char *no = unusable(out, pod, sel->tiers[i].cls, neuron_gen, why, sizeof(why));
        if (no) {
            drop(sel, sel->tiers[i].cls, "%s", no);
            continue;
        }
        if (!neuron_gen && af_class_kind(sel->tiers[i].cls) == AF_ACCEL_NEURON)
            neuron_gen = af_class_neuron_core_version(sel->tiers[i].cls);
        kept[n_kept++] = sel->tiers[i];
    }
    memcpy(sel->tiers, kept, n_kept * sizeof(kept[0]));
    sel->n_tiers = n_kept;

    if (!sel->n_tiers) {
        const char *rule = sel->rule ? sel->rule : "none matched";
        switch (out->requested) {
        case AF_ACCEL_GPU: {
            static const enum af_class gpus[] = {
                AF_CLASS_NVIDIA_T4,   AF_CLASS_NVIDIA_A10G, AF_CLASS_NVIDIA_L4,
                AF_CLASS_NVIDIA_L40S, AF_CLASS_NVIDIA_V100, AF_CLASS_NVIDIA_A100,
                AF_CLASS_NVIDIA_H100, AF_CLASS_NVIDIA_H200,
            };
            note(out, "no tier of rule %s can serve a nvidia.com/gpu request: any NVIDIA class, "
                      "cheapest first",
                 rule);
            for (size_t i = 0; i < AF_ARRAY_SIZE(gpus); i++)
                add_fallback_tier(out, cat, gpus[i],
                                  "fallback: any NVIDIA GPU class can serve a nvidia.com/gpu "
                                  "request; cheapest first");
            break;
        }
        case AF_ACCEL_NEURON: {
            bool training = out->profile.workload == AF_WORKLOAD_TRAINING;
            note(out, "no tier of rule %s can serve a %s request: Neuron classes for %s", rule,
                 accel_resource(&pod->requests), training ? "training" : "inference");
            add_fallback_tier(out, cat, training ? AF_CLASS_TRAINIUM1 : AF_CLASS_INFERENTIA2,
                              "fallback: the pod requests Neuron devices");
            add_fallback_tier(out, cat, training ? AF_CLASS_TRAINIUM2 : AF_CLASS_TRAINIUM1,
                              "fallback: the pod requests Neuron devices");
            break;
        }
        default:
            note(out, "no tier of rule %s suits a pod that requests no accelerator: cpu", rule);
            add_fallback_tier(out, cat, AF_CLASS_CPU,
                              "fallback: a pod that requests no accelerator runs on CPU nodes");
            break;
        }
    }

    /*
     * A Neuron request fits every class of the same NeuronCore generation (inf2 and trn1
     * share v2), so those classes are added as fallbacks when the rule did not list them.
     */
    if (out->requested == AF_ACCEL_NEURON && neuron_gen) {
        bool training = out->profile.workload == AF_WORKLOAD_TRAINING;
        const enum af_class extra[2] = {
            training ? AF_CLASS_TRAINIUM1 : AF_CLASS_INFERENTIA2,
            training ? AF_CLASS_TRAINIUM2 : AF_CLASS_TRAINIUM1,
        };
        for (size_t k = 0; k < 2; k++) {
            bool have = false;
            char why[AF_REASON_MAX];
            if (af_class_neuron_core_version(extra[k]) != neuron_gen)
                continue;
            for (size_t i = 0; i < sel->n_tiers; i++)
                have = have || sel->tiers[i].cls == extra[k];
            if (have)
                continue;
            snprintf(why, sizeof(why),
                     "fallback: %s runs NeuronCore-v%d like the tiers above, so the pod's Neuron "
                     "request and artifact fit it",
                     af_class_name(extra[k]), neuron_gen);
            add_fallback_tier(out, cat, extra[k], why);
        }
    }

    /* A CPU-only pod may take spare room on accelerator nodes as a last resort. */
    if (out->requested == AF_ACCEL_NONE && pol && pol->cpu_backfill &&
        sel->n_tiers < AF_ARRAY_SIZE(sel->tiers)) {
        struct af_tier *t = &sel->tiers[sel->n_tiers];
        memset(t, 0, sizeof(*t));
        t->cls = AF_CLASS_UNKNOWN;
        t->instances = 1;
        snprintf(t->reasons[0], AF_REASON_MAX,
                 "backfill: policy filter.cpu_backfill lets CPU-only pods use spare room on "
                 "accelerator nodes when no CPU node has room");
        t->n_reasons = 1;
        for (int c = 0; c < AF_CLASS__COUNT; c++)
            if (af_class_kind((enum af_class)c) != AF_ACCEL_NONE)
                out->tier_of[c] = (int)sel->n_tiers;
        sel->n_tiers++;
        out->backfill = true;
    }

    for (size_t i = 0; i < sel->n_tiers; i++) {
        enum af_class c = sel->tiers[i].cls;
        struct af_tier *t = &sel->tiers[i];
        /* Tiers moved up when others were dropped: their first reason said "fallback N". */
        if (t->rank != (int)i + 1 && t->n_reasons > 0 && !strncmp(t->reasons[0], "fallback ", 9)) {
            if (i == 0)
                snprintf(t->reasons[0], AF_REASON_MAX,
                         "first tier of rule %s that the pod's requests can use (the classes "
                         "ranked above it were dropped)",
                         sel->rule ? sel->rule : "?");
            else
                snprintf(t->reasons[0], AF_REASON_MAX,
                         "fallback %zu of rule %s: used when the tiers above have no room", i,
                         sel->rule ? sel->rule : "?");
        }
        t->rank = (int)i + 1;
        if (c >= 0 && c < AF_CLASS__COUNT && out->tier_of[c] < 0)
            out->tier_of[c] = (int)i;
    }
}
