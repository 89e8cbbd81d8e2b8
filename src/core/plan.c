/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A pod's plan: its intent read from the accelfit.io annotations (a
 * malformed value is not guessed at: the key is treated as absent and a note
 * says so), the workload inferred when it is not stated, the ranked tiers from
 * the selection core restricted to what the pod's requests can use, and then
 * the tiers the rule did not name: a rule's tiers are preferences, so every
 * other class the requests allow comes last (unless the rule is strict). A
 * filter cannot change requests: a pod asking for nvidia.com/gpu only ever
 * runs on NVIDIA classes, a Neuron pod on Neuron classes (of its stated
 * NeuronCore generation, when it states one), a CPU-only pod on CPU nodes
 * (and on accelerator nodes last when the policy allows backfill). A caller
 * may then restrict the plan to some classes as explicit policy
 * (af_plan_restrict: a rollout steering the pod's unit to one side); nodes of
 * other classes then have no tier.
 *
 * Pure: no I/O, no allocation; the plan has a fixed size.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "accelfit/decide.h"
#include "accelfit/banned.h"

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

static const char *const annotations[AF_PLAN_ANNOTATIONS] = {
    "accelfit.io/workload",       "accelfit.io/model-params", "accelfit.io/objective",
    "accelfit.io/latency-slo-ms", "accelfit.io/framework",    "accelfit.io/neuron-ready",
    "accelfit.io/precision",      "accelfit.io/neuron-core-version",
    "accelfit.io/instances",
};

const char *af_plan_annotation(int i)
{
    return i >= 0 && i < AF_PLAN_ANNOTATIONS ? annotations[i] : NULL;
}

/* A malformed annotation: its bit, and the note that says why (read_intent notes first). */
#define BAD_NOTE(key, ...)                                                                         \
    do {                                                                                           \
        p->bad_annotations |= 1u << (key);                                                         \
        note(p, __VA_ARGS__);                                                                      \
        p->n_bad_notes = p->n_notes;                                                               \
    } while (0)

static void read_intent(const struct af_pod_info *pod, struct af_plan *p)
{
    const struct af_pod_annotations *a = &pod->ann;
    struct af_profile *pr = &p->profile;

    if (a->workload) {
        int w = af_workload_parse(a->workload);
        if (w < 0)
            BAD_NOTE(0, BAD "is not a workload (training, inference, batch-inference, "
                        "preprocessing, classical-ml, development); ignored",
                 "workload", a->workload);
        else
            pr->workload = (enum af_workload)w;
    }
    if (a->model_params) {
        double v = 0;
        char why[200];
        if (af_model_params_parse(a->model_params, &v, why, sizeof(why)) != 0)
            BAD_NOTE(1, "annotation accelfit.io/model-params: %s; ignored", why);
        else
            pr->model_params = v;
    }
    if (a->objective) {
        int o = af_objective_parse(a->objective);
        if (o < 0)
            BAD_NOTE(2, BAD "is not an objective (cost, performance, balanced, latency); ignored",
                 "objective", a->objective);
        else
            pr->objective = (enum af_objective)o;
    }
    if (a->latency_slo_ms) {
        int64_t v;
        if (af_parse_int64(a->latency_slo_ms, 1, 86400000, &v))
            BAD_NOTE(3, BAD "is not a positive integer of milliseconds; ignored", "latency-slo-ms",
                 a->latency_slo_ms);
        else
            pr->latency_slo_ms = (int)v;
    }
    if (a->framework) {
        int f = af_framework_parse(a->framework);
        if (f < 0)
            BAD_NOTE(4, BAD "is not a framework (pytorch, tensorflow, jax, other); ignored",
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
            BAD_NOTE(5, BAD "is not true or false; ignored", "neuron-ready", a->neuron_ready);
    }
    if (a->precision) {
        int v = af_precision_parse(a->precision);
        if (v < 0)
            BAD_NOTE(6, BAD "is not a precision (fp32, bf16, fp16, int8, fp8); ignored", "precision",
                 a->precision);
        else
            pr->precision = (enum af_precision)v;
    }
    if (a->neuron_core_version) {
        const char *v = a->neuron_core_version;
        int64_t g;
        if ((v[0] == 'v' || v[0] == 'V') && v[1])
            v++;
        if (af_parse_int64(v, 1, 3, &g))
            BAD_NOTE(7, BAD "is not a NeuronCore generation (1, 2 or 3); ignored",
                 "neuron-core-version", a->neuron_core_version);
        else {
            p->neuron_gen = (int)g;
            p->neuron_gen_stated = true;
        }
    }
    if (a->instances) {
        int64_t v;
        if (af_parse_int64(a->instances, 1, 4096, &v))
            BAD_NOTE(8, BAD "is not a number of instances (1-4096); ignored", "instances",
                 a->instances);
        else {
            p->instances = (int)v;
            p->instances_stated = true;
            pr->instances = (int)v;   /* the tiers are sized for it, as recommend --instances */
        }
    }
}

/* The accelerator resource the pod asks for, by name, for notes and reasons. */
static const char *accel_resource(const struct af_pod_info *pod)
{
    static const enum af_res order[] = {AF_RES_GPU,        AF_RES_GPU_SHARED, AF_RES_MIG,
                                        AF_RES_NEURON,     AF_RES_NEURONDEVICE,
                                        AF_RES_NEURONCORE, AF_RES_AMD_GPU};
    for (size_t i = 0; i < AF_ARRAY_SIZE(order); i++)
        if (pod->requests.v[order[i]] > 0)
            return order[i] == AF_RES_MIG ? "nvidia.com/mig-*" : af_res_name(order[i]);
    return "no accelerator";
}

/* Whole devices (GPUs, Neuron devices) the pod requests, which it pays its share of a node's
 * price for (objective cost compares that share); 0 when none or beyond any instance. */
static int whole_devices(const struct af_resources *r)
{
    static const enum af_res whole[] = {AF_RES_GPU, AF_RES_NEURON, AF_RES_NEURONDEVICE};
    int64_t n = 0;

    for (size_t i = 0; i < AF_ARRAY_SIZE(whole); i++) {
        if (r->v[whole[i]] <= 0)
            continue;
        if (r->v[whole[i]] > 4096)
            return 0;
        n += r->v[whole[i]];
    }
    return n <= 4096 ? (int)n : 0;
}

/* Whether a node of class `cls` can serve the pod's requests at all. */
static bool kind_fits(const struct af_plan *p, enum af_class cls)
{
    return af_class_kind(cls) == p->requested;
}

/* Appends a tier that stands for a group of classes (cls UNKNOWN); its index. */
static int add_group_tier(struct af_plan *p, const char *group, const char *fmt, ...)
    AF_PRINTF(3, 4);

static int add_group_tier(struct af_plan *p, const char *group, const char *fmt, ...)
{
    struct af_tier *t;
    va_list ap;

    if (p->sel.n_tiers >= AF_ARRAY_SIZE(p->sel.tiers))
        return -1;
    t = &p->sel.tiers[p->sel.n_tiers];
    memset(t, 0, sizeof(*t));
    t->cls = AF_CLASS_UNKNOWN;
    t->group = group;
    t->instances = 1;
    t->n_reasons = 2;          /* reasons[0] is the role, written by af_selection_label */
    va_start(ap, fmt);
    vsnprintf(t->reasons[1], AF_REASON_MAX, fmt, ap);
    va_end(ap);
    return (int)p->sel.n_tiers++;
}

/* The added tiers' names by kind: "any other NVIDIA GPU class", ... */
static const char *other_group(enum af_accel_kind k)
{
    switch (k) {
    case AF_ACCEL_GPU:
        return "any other NVIDIA GPU class";
    case AF_ACCEL_NEURON:
        return "any other Neuron class";
    case AF_ACCEL_AMD:
        return "AMD GPU nodes";
    default:
        return "any other CPU node";
    }
}

/*
 * Keeps the rule's tiers the requests can use (and, with a NeuronCore generation
 * stated, that generation); a class the requests cannot use is dropped with the
 * reason. Returns the generation of the first Neuron tier kept, 0 when none.
 */
static int keep_usable_tiers(struct af_plan *out, const struct af_pod_info *pod)
{
    struct af_selection *sel = &out->sel;
    struct af_tier kept[AF_ARRAY_SIZE(sel->tiers)];
    size_t n_kept = 0;
    int first_gen = 0;

    for (size_t i = 0; i < sel->n_tiers; i++) {
        enum af_class c = sel->tiers[i].cls;
        int gen = af_class_neuron_core_version(c);
        if (!kind_fits(out, c)) {
            if (out->requested == AF_ACCEL_NONE)
                drop(sel, c, "CPU-only pod (no accelerator requested): %s is an accelerator "
                             "class",
                     af_class_name(c));
            else
                drop(sel, c, "the pod requests %s, which %s nodes do not have",
                     accel_resource(pod), af_class_name(c));
            continue;
        }
        if (out->neuron_gen_stated && gen && gen != out->neuron_gen) {
            drop(sel, c,
                 "%s runs NeuronCore-v%d; the pod's artifact is compiled for NeuronCore-v%d "
                 "(accelfit.io/neuron-core-version)",
                 af_class_name(c), gen, out->neuron_gen);
            continue;
        }
        if (!first_gen && gen)
            first_gen = gen;
        /* A Neuron pod whose generation is not stated stays on the generation of the
         * rule's first Neuron tier; other generations come after every class of it. */
        if (!out->neuron_gen_stated && first_gen && gen && gen != first_gen)
            continue;
        kept[n_kept++] = sel->tiers[i];
    }
    memcpy(sel->tiers, kept, n_kept * sizeof(kept[0]));
    sel->n_tiers = n_kept;
    return first_gen;
}

/* Points every class `want` accepts at tier t, where no better tier has it. */
static void map_group(struct af_plan *p, int t, bool (*want)(const struct af_plan *, enum af_class))
{
    for (int c = 0; c < AF_CLASS__COUNT && t >= 0; c++) {
        if (!want(p, (enum af_class)c))
            continue;
        if (p->other_of[c] < 0)
            p->other_of[c] = t;
        if (p->tier_of[c] < 0)
            p->tier_of[c] = t;
    }
}

static bool same_gen(const struct af_plan *p, enum af_class c)
{
    int gen = af_class_neuron_core_version(c);
    return kind_fits(p, c) && (!gen || !p->neuron_gen || gen == p->neuron_gen);
}

static bool other_gen(const struct af_plan *p, enum af_class c)
{
    return kind_fits(p, c) && !same_gen(p, c);
}

static bool accelerator(const struct af_plan *p, enum af_class c)
{
    return af_class_kind(c) != AF_ACCEL_NONE;
}

/* The added tiers: the rest of the pod's kind, other Neuron generations, backfill. */
static void add_other_tiers(const struct af_policy *pol, struct af_plan *out)
{
    struct af_selection *sel = &out->sel;
    int t;

    if (sel->strict && out->stated) {
        note(out, "rule %s is strict: no class outside its tiers", sel->rule);
    } else {
        t = add_group_tier(out, other_group(out->requested),
                           "the rule's tiers are preferences: every other class the pod's "
                           "requests allow comes last, where its model fits");
        map_group(out, t, same_gen);
        out->unknown_tier = t;
        if (out->requested == AF_ACCEL_NEURON && !out->neuron_gen_stated) {
            t = add_group_tier(out, "other NeuronCore generations",
                               "an artifact runs only on the NeuronCore generation it was "
                               "compiled for, and the pod does not say which "
                               "(accelfit.io/neuron-core-version): v%d first, others last",
                               out->neuron_gen);
            map_group(out, t, other_gen);
        }
    }

    /* A CPU-only pod may take spare room on accelerator nodes last, when the policy says so,
     * or when it does not state its workload (knowledge narrows, guesses rank): that it is
     * CPU work kept off accelerators is a guess, so accelerator nodes only rank last. */
    if (out->requested == AF_ACCEL_NONE && pol && pol->cpu_backfill == AF_CPU_BACKFILL_ON) {
        t = add_group_tier(out, "backfill onto accelerator nodes",
                           "backfill: policy filter.cpu_backfill lets CPU-only pods use spare "
                           "room on accelerator nodes when no CPU node has room");
        map_group(out, t, accelerator);
        out->backfill = t >= 0;
    } else if (out->requested == AF_ACCEL_NONE && !out->stated &&
               (!pol || pol->cpu_backfill == AF_CPU_BACKFILL_OFF)) {
        t = add_group_tier(out, "accelerator nodes, last",
                           "the pod requests no accelerator and does not state its workload: "
                           "accelerator nodes rank last (keeping them for accelerator work), "
                           "never refused; filter.cpu_backfill: never refuses them");
        map_group(out, t, accelerator);
        out->backfill = t >= 0;
    }
}

void af_plan_pod(const struct af_policy *pol, const struct af_catalog *cat,
                 const struct af_pod_info *pod, struct af_plan *out)
{
    struct af_selection *sel = &out->sel;
    int pref_gen;

    memset(out, 0, sizeof(*out));
    af_profile_init(&out->profile);
    for (int c = 0; c < AF_CLASS__COUNT; c++)
        out->tier_of[c] = out->other_of[c] = -1;
    out->unknown_tier = -1;

    read_intent(pod, out);
    out->requested = af_res_accel_kind(&pod->requests);
    out->devices = af_res_devices(&pod->requests);
    out->neuron_cores = pod->requests.v[AF_RES_NEURONCORE];
    out->profile.devices = whole_devices(&pod->requests);
    out->stated = out->profile.workload != AF_WORKLOAD_UNKNOWN;
    if (!out->stated) {
        out->workload_inferred = true;
        if (out->requested != AF_ACCEL_NONE) {
            out->profile.workload = AF_WORKLOAD_INFERENCE;
            note(out, "workload not annotated: inferred inference from the %s request; "
                      "tiers only rank nodes, they do not filter",
                 accel_resource(pod));
        } else {
            out->profile.workload = AF_WORKLOAD_PREPROCESSING;
            note(out, "workload not annotated: inferred preprocessing (no accelerator "
                      "requested); tiers only rank nodes, they do not filter");
        }
    }
    /* A malformed neuron-ready is treated as absent (read_intent noted it). */
    if (out->requested == AF_ACCEL_NEURON &&
        (!pod->ann.neuron_ready || (strcasecmp(pod->ann.neuron_ready, "true") &&
                                    strcasecmp(pod->ann.neuron_ready, "false")))) {
        out->profile.neuron_ready = true;
        note(out, "the pod requests %s without accelfit.io/neuron-ready: taken as Neuron-ready",
             accel_resource(pod));
    }
    if (out->requested != AF_ACCEL_NEURON && out->neuron_gen_stated) {
        out->neuron_gen_stated = false;
        out->neuron_gen = 0;
    }

    if (pol)
        af_select(pol, cat, &out->profile, out->requested == AF_ACCEL_NEURON, sel);
    else
        memset(sel, 0, sizeof(*sel));
    out->need_gib = sel->memory_needed_gib;
    /* How many instances the model may be split across: stated, else what the
     * policy allows the workload (any workload's maximum when it is only inferred). */
    if (!out->instances_stated) {
        int maxi = 1;
        for (int w = 0; pol && w < AF_WORKLOAD__COUNT; w++)
            if ((out->stated ? w == (int)out->profile.workload : true) && pol->max_instances[w] > maxi)
                maxi = pol->max_instances[w];
        out->instances = maxi;
    }

    pref_gen = keep_usable_tiers(out, pod);
    if (out->requested == AF_ACCEL_NEURON && !out->neuron_gen_stated) {
        /* No stated generation: prefer the rule's first Neuron tier's (v2 without one). */
        out->neuron_gen = pref_gen ? pref_gen : 2;
    }
    if (!sel->n_tiers)
        note(out, "no tier of rule %s can serve a pod that requests %s", sel->rule ? sel->rule : "(none matched)",
             accel_resource(pod));
    for (size_t i = 0; i < sel->n_tiers; i++)
        if (out->tier_of[sel->tiers[i].cls] < 0)
            out->tier_of[sel->tiers[i].cls] = (int)i;
    add_other_tiers(pol, out);
    af_selection_label(sel);
}

void af_plan_restrict(struct af_plan *plan, uint32_t classes, const char *why)
{
    plan->allowed = plan->restricted ? plan->allowed & classes : classes;
    plan->restricted = true;
    snprintf(plan->restrict_why, sizeof(plan->restrict_why), "%s", why ? why : "");
    if (plan->n_restrictions >= 0 && plan->n_restrictions < AF_PLAN_RESTRICTIONS) {
        struct af_plan_restriction *r = &plan->restrictions[plan->n_restrictions++];
        r->classes = classes;
        snprintf(r->why, sizeof(r->why), "%s", why ? why : "");
    }
}

const char *af_plan_restrict_why(const struct af_plan *plan, enum af_class cls)
{
    bool known = cls > AF_CLASS_UNKNOWN && cls < AF_CLASS__COUNT;

    if (!plan->restricted || (known && (plan->allowed & (1u << cls))))
        return NULL;
    for (int i = 0; i < plan->n_restrictions && i < AF_PLAN_RESTRICTIONS; i++)
        if (!known || !(plan->restrictions[i].classes & (1u << cls)))
            return plan->restrictions[i].why;
    /* excluded by a restriction beyond the ones kept */
    return plan->restrict_why;
}

void af_plan_limit_cost(struct af_plan *plan, uint32_t classes, double usd_hr, const char *why)
{
    plan->limit_classes = classes;
    plan->limit_usd_hr = usd_hr;
    snprintf(plan->limit_why, sizeof(plan->limit_why), "%s", why ? why : "");
}

void af_plan_require_spot(struct af_plan *plan, const char *why)
{
    plan->spot_only = true;
    snprintf(plan->spot_why, sizeof(plan->spot_why), "%s", why ? why : "");
}

/* Outside an explicit restriction (af_plan_restrict); an unknown class is outside any. */
static bool excluded(const struct af_plan *plan, enum af_class c)
{
    return af_plan_restrict_why(plan, c) != NULL;
}

int af_plan_node_tier(const struct af_plan *plan, const struct af_node_info *node)
{
    enum af_class c = node->cls;
    int t;

    if (excluded(plan, c))
        return -1;
    if (c <= AF_CLASS_UNKNOWN || c >= AF_CLASS__COUNT) {
        /* An accelerator of unknown model: the pods that request its kind may use it,
         * last; so may backfilled CPU-only pods. */
        if (node->kind == plan->requested && node->kind != AF_ACCEL_NONE)
            return plan->unknown_tier;
        if (plan->requested == AF_ACCEL_NONE && plan->backfill && node->kind != AF_ACCEL_NONE)
            return (int)plan->sel.n_tiers - 1;
        return -1;
    }
    t = plan->tier_of[c];
    if (t >= 0 && plan->sel.tiers[t].spec && plan->sel.tiers[t].spec->n_families) {
        const struct af_tier_spec *ts = plan->sel.tiers[t].spec;
        bool ok = false;
        for (size_t i = 0; node->family && i < ts->n_families && !ok; i++)
            ok = !strcmp(ts->families[i], node->family);
        if (!ok)
            t = plan->other_of[c];
    }
    return t;
}

const char *af_plan_tier_name(const struct af_plan *plan, int tier)
{
    const struct af_tier *t;

    if (tier < 0 || (size_t)tier >= plan->sel.n_tiers)
        return "none";
    t = &plan->sel.tiers[tier];
    return t->group ? t->group : af_class_name(t->cls);
}
