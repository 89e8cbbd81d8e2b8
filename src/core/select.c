/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The selection core: a workload profile in, ranked hardware out. The first
 * policy rule that matches the profile names the classes in order; this file
 * drops the classes the workload cannot use (Neuron without a Neuron-compiled
 * PyTorch or TensorFlow artifact, classes whose largest instances cannot hold
 * the model), and sizes each remaining class with the instance type of the
 * catalog that holds the model in at most max_instances instances where the
 * workload pays least (a pod pays its devices' share of an instance).
 * Every tier and every dropped class carries its reason in plain words, since
 * people act on these answers and need to see the arithmetic.
 *
 * Pure: no I/O, no allocation, no logging; the output has a fixed size.
 */
#include "accelfit/select.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include "accelfit/banned.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

double af_select_memory_needed_gib(const struct af_policy *pol, const struct af_profile *p)
{
    enum af_precision prec;
    double bytes;

    if (!(p->model_params > 0))
        return 0;
    if (p->workload == AF_WORKLOAD_TRAINING)
        return p->model_params * pol->training_bytes_per_param / GIB;
    prec = p->precision >= 0 && p->precision < AF_PRECISION__COUNT ? p->precision
                                                                   : pol->inference_precision;
    bytes = pol->bytes_per_param[prec];
    return p->model_params * bytes * pol->inference_headroom / GIB;
}

static bool rule_matches(const struct af_rule *r, const struct af_profile *p)
{
    unsigned fw = p->framework >= 0 && p->framework < AF_FRAMEWORK__COUNT
                      ? (unsigned)p->framework
                      : (unsigned)AF_FRAMEWORK__COUNT;

    /* Out-of-range enums (never produced by the parsers) match no condition on them. */
    if (r->workloads && (p->workload < 0 || p->workload >= AF_WORKLOAD__COUNT ||
                         !(r->workloads & (1u << p->workload))))
        return false;
    if (r->objectives && ((unsigned)p->objective >= AF_OBJECTIVE__COUNT ||
                          !(r->objectives & (1u << p->objective))))
        return false;
    if (r->frameworks && !(r->frameworks & (1u << fw)))
        return false;
    if (r->neuron_ready >= 0 && (r->neuron_ready == 1) != p->neuron_ready)
        return false;
    if (r->min_params >= 0 || r->max_params >= 0) {
        /* A bounded rule says nothing about a model of unknown size. */
        if (!(p->model_params > 0))
            return false;
        if (r->min_params >= 0 && p->model_params < r->min_params)
            return false;
        if (r->max_params >= 0 && p->model_params >= r->max_params)
            return false;
    }
    if (r->max_latency_slo_ms > 0 &&
        (p->latency_slo_ms <= 0 || p->latency_slo_ms > r->max_latency_slo_ms))
        return false;
    return true;
}


/* GiB with one decimal below 10, whole numbers above. */
static void fmt_gib(char *out, size_t n, double v)
{
    if (v < 10)
        snprintf(out, n, "%.1f", v);
    else
        snprintf(out, n, "%.0f", v);
}

static void fmt_usd(char *out, size_t n, double v)
{
    if (v < 1)
        snprintf(out, n, "$%.3f", v);
    else
        snprintf(out, n, "$%.2f", v);
}

/* Why a Neuron class cannot run this workload, or NULL when it can. */
static const char *neuron_block(const struct af_policy *pol, const struct af_profile *p,
                                bool neuron_requested, char *buf, size_t n)
{
    char list[64] = "";
    size_t used = 0;

    if (!p->neuron_ready)
        return "no Neuron-compiled artifact (neuron-ready is false or not given): Trainium and Inferentia "
               "run only models compiled with the AWS Neuron SDK";
    for (int f = 0; f < AF_FRAMEWORK__COUNT; f++)
        if (pol->neuron_frameworks & (1u << f))
            used += (size_t)snprintf(list + used, used < sizeof(list) ? sizeof(list) - used : 0,
                                     "%s%s", used ? ", " : "", af_framework_name(f));
    if (p->framework < 0 || p->framework >= AF_FRAMEWORK__COUNT) {
        if (neuron_requested)
            return NULL;
        snprintf(buf, n,
                 "framework unknown: the AWS Neuron SDK takes only %s; state it "
                 "(--framework pytorch, or annotation accelfit.io/framework)",
                 list);
        return buf;
    }
    if (!(pol->neuron_frameworks & (1u << p->framework))) {
        snprintf(buf, n, "framework %s is not supported by the AWS Neuron SDK (supported: %s)",
                 af_framework_name(p->framework), list);
        return buf;
    }
    return NULL;
}

/*
 * Whether a tier may size on an instance type: one of its families when it lists
 * families; otherwise any type of its class except arm64 ones (Graviton hosts such as
 * g5g's T4G), which need images built for arm64 and so are used only where a rule
 * names their family.
 */
static bool family_allowed(const struct af_tier_spec *ts, const struct af_instance_type *t)
{
    if (!ts->n_families)
        return t->arch != AF_ARCH_ARM64;
    for (size_t i = 0; i < ts->n_families; i++)
        if (!strcmp(ts->families[i], t->family))
            return true;
    return false;
}

/* Memory one instance offers to the model: accelerator memory, or host memory for CPU. */
static double capacity_gib(const struct af_instance_type *t)
{
    return t->cls == AF_CLASS_CPU ? t->memory_gib : af_instance_accel_memory_gib(t);
}

struct pick {
    const struct af_instance_type *t;
    int n;
    double total;
    double pays;               /* what the workload pays (af_select_workload_usd) */
};

/* Devices of each of n instances of t that hold `needed` GiB: 0 when unknown or no devices. */
static int devices_needed(const struct af_instance_type *t, int n, double needed)
{
    double per;
    int d;

    if (!(needed > 0) || t->accel_count <= 0 || !(t->accel_memory_gib_per_device > 0))
        return 0;
    per = needed / n / t->accel_memory_gib_per_device;
    d = (int)ceil(per - 1e-9);
    return d < 1 ? 1 : d > t->accel_count ? t->accel_count : d;
}

/* Devices of its instance the workload pays for, 0 when it pays for whole instances: a pod
 * gets the devices it requests (stated, else the `model` devices the model needs), but a
 * model split across instances runs over their EFA interconnect and has them to itself. */
static int paid_devices(const struct af_profile *p, const struct af_instance_type *t, int n,
                        int model)
{
    int d = p->devices > 0 ? p->devices : model;

    if (n > 1 || t->accel_count <= 0 || t->accel_kind == AF_ACCEL_NONE || d <= 0 ||
        d >= t->accel_count)
        return 0;
    return d;
}

/* True when candidate (t, n) is a better choice than `best`. */
static bool better(const struct af_instance_type *t, int n, double pays, const struct pick *best)
{
    bool priced = t->price_usd_hr >= 0, best_priced;
    double total = n * t->price_usd_hr;

    if (!best->t)
        return true;
    /* A model split across instances runs at the pace of the network between them:
     * fewer, larger instances first (15 single-GPU p5.4xlarge are not a p5.48xlarge
     * pair, however the prices add up); price decides among equal counts. */
    if ((n > 1 || best->n > 1) && n != best->n)
        return n < best->n;
    best_priced = best->t->price_usd_hr >= 0;
    if (priced != best_priced)
        return priced;
    /* What the workload pays first (its devices' share), then the smaller instance. */
    if (priced && pays != best->pays)
        return pays < best->pays;
    if (priced && total != best->total)
        return total < best->total;
    if (n != best->n)
        return n < best->n;
    if (!priced && capacity_gib(t) != capacity_gib(best->t))
        return capacity_gib(t) < capacity_gib(best->t);
    return strcmp(t->name, best->t->name) < 0;
}

void af_reasonf(char *r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(r, AF_REASON_MAX, fmt, ap);
    va_end(ap);
}

static void add_reason(struct af_tier *t, const char *fmt, ...) AF_PRINTF(2, 3);

static void add_reason(struct af_tier *t, const char *fmt, ...)
{
    va_list ap;

    if (t->n_reasons == 0)
        t->n_reasons = 1;      /* reasons[0] is the tier's role (af_selection_label) */
    if (t->n_reasons >= AF_TIER_REASONS)
        return;
    va_start(ap, fmt);
    vsnprintf(t->reasons[t->n_reasons], AF_REASON_MAX, fmt, ap);
    va_end(ap);
    t->n_reasons++;
}

static void drop(struct af_selection *out, enum af_class cls, const char *fmt, ...) AF_PRINTF(3, 4);

static void drop(struct af_selection *out, enum af_class cls, const char *fmt, ...)
{
    va_list ap;
    struct af_dropped *d;

    if (out->n_dropped >= AF_ARRAY_SIZE(out->dropped))
        return;
    d = &out->dropped[out->n_dropped++];
    d->cls = cls;
    va_start(ap, fmt);
    vsnprintf(d->reason, sizeof(d->reason), fmt, ap);
    va_end(ap);
}

static const char *price_where(const struct af_catalog *cat)
{
    const char *slash;

    if (!cat->source || !strcmp(cat->source, "<embedded>"))
        return "us-east-1";
    slash = strrchr(cat->source, '/');
    return slash ? slash + 1 : cat->source;
}

/* Describes the memory arithmetic for a sized tier. */
static void arithmetic_reason(const struct af_policy *pol, const struct af_profile *p,
                              struct af_tier *tier)
{
    const struct af_instance_type *t = tier->instance;
    const char *mem = t->cls == AF_CLASS_CPU ? "host" : "accelerator";
    char params[32], need[32], have[32], per[32];
    double cap = capacity_gib(t);

    fmt_gib(have, sizeof(have), tier->instances * cap);
    fmt_gib(per, sizeof(per), cap);
    if (!(p->model_params > 0)) {
        add_reason(tier, "model size unknown: the smallest %s instance, %s (%s GiB %s memory)",
                   af_class_name(t->cls), t->name, per, mem);
        return;
    }
    af_format_count(p->model_params, params, sizeof(params));
    fmt_gib(need, sizeof(need), tier->memory_needed_gib);
    if (p->workload == AF_WORKLOAD_TRAINING) {
        add_reason(tier,
                   "needs %s GiB %s memory (%s params x %g bytes for weights, gradients and "
                   "Adam state); %d x %s hold%s %s GiB",
                   need, mem, params, pol->training_bytes_per_param, tier->instances, t->name,
                   tier->instances == 1 ? "s" : "", have);
        if (tier->instances > 1)
            add_reason(tier, "the model is split across %d instances over EFA (%g Gbps each)",
                       tier->instances, t->network_gbps);
    } else {
        enum af_precision prec = p->precision >= 0 && p->precision < AF_PRECISION__COUNT
                                     ? p->precision
                                     : pol->inference_precision;
        add_reason(tier,
                   "needs %s GiB %s memory (%s params x %g bytes %s x %g headroom); %d x %s "
                   "hold%s %s GiB",
                   need, mem, params, pol->bytes_per_param[prec], af_precision_name(prec),
                   pol->inference_headroom, tier->instances, t->name,
                   tier->instances == 1 ? "s" : "", have);
        if (tier->instances > 1)
            add_reason(tier, "the model is split across %d instances over EFA (%g Gbps each)",
                       tier->instances, t->network_gbps);
    }
    if (tier->devices > 0 && t->accel_count > 0 && t->accel_kind != AF_ACCEL_NONE) {
        char dev[32];
        fmt_gib(dev, sizeof(dev), t->accel_memory_gib_per_device);
        add_reason(tier,
                   "a pod gets the devices it requests, not the instance: it needs %d of the %d "
                   "devices (%s GiB each)%s",
                   tier->devices, t->accel_count, dev,
                   tier->instances > 1 ? " on each instance" : "");
    }
}

/* "2 x p4de.24xlarge, $54.89/h", or a share: "1 of the 8 devices of a p4d.24xlarge, $2.74/h". */
static void describe_paid(const struct af_profile *p, const struct af_tier *tier, char *out,
                          size_t n)
{
    int d = paid_devices(p, tier->instance, tier->instances, tier->devices);
    char usd[32];

    fmt_usd(usd, sizeof(usd), tier->workload_usd);
    if (d)
        snprintf(out, n, "%d of the %d devices of a %s, %s/h", d, tier->instance->accel_count,
                 tier->instance->name, usd);
    else
        snprintf(out, n, "%d x %s, %s/h", tier->instances, tier->instance->name, usd);
}

static void price_reason(const struct af_catalog *cat, const struct af_profile *p,
                         struct af_tier *tier)
{
    const struct af_instance_type *t = tier->instance;
    int paid = paid_devices(p, t, tier->instances, tier->devices);
    char total[32], each[32];

    if (!tier->price_known) {
        add_reason(tier,
                   "price unknown: the catalog has no on-demand price for %s (no priced %s "
                   "type holds the model)",
                   t->name, af_class_name(t->cls));
        return;
    }
    fmt_usd(total, sizeof(total), tier->hourly_usd);
    fmt_usd(each, sizeof(each), t->price_usd_hr);
    if (tier->instances > 1)
        add_reason(tier, "%s/h on-demand, %s (%d x %s)", total, price_where(cat), tier->instances,
                   each);
    else
        add_reason(tier, "%s/h on-demand, %s", total, price_where(cat));
    if (paid) {
        fmt_usd(total, sizeof(total), tier->workload_usd);
        add_reason(tier,
                   "the workload pays for the devices it gets, %d of %d: %s/h (what objective "
                   "cost compares)",
                   paid, t->accel_count, total);
    }
}

/* Sizes one tier; returns false (with a dropped entry) when the class cannot hold the model. */
static bool size_tier(const struct af_policy *pol, const struct af_catalog *cat,
                      const struct af_profile *p, const struct af_tier_spec *ts, double needed,
                      struct af_selection *out, struct af_tier *tier)
{
    int maxi = p->instances > 0 ? p->instances
               : p->workload >= 0 && p->workload < AF_WORKLOAD__COUNT
                   ? pol->max_instances[p->workload]
                   : 1;
    const struct af_instance_type *largest = NULL;
    struct pick best = {NULL, 0, 0, 0};
    size_t candidates = 0, no_efa = 0, from = 0, to = cat->n_types;

    if (maxi < 1)
        maxi = 1;
    /* the class's own types when the catalog is indexed (in the same name order) */
    if (cat->by_class && ts->cls >= AF_CLASS_UNKNOWN && ts->cls < AF_CLASS__COUNT) {
        from = cat->class_start[ts->cls + 1];
        to = cat->class_start[ts->cls + 2];
    }
    for (size_t k = from; k < to; k++) {
        const struct af_instance_type *t = &cat->types[cat->by_class ? cat->by_class[k] : k];
        double cap, pays;
        int n = 1;

        if (t->cls != ts->cls || !family_allowed(ts, t))
            continue;
        cap = capacity_gib(t);
        candidates++;
        if (!largest || cap > capacity_gib(largest))
            largest = t;
        if (needed > 0) {
            double want;
            if (!(cap > 0))
                continue;
            want = ceil(needed / cap - 1e-9);
            if (want > maxi)
                continue;
            n = want < 1 ? 1 : (int)want;
            /* A model split across instances trains or serves over the network;
             * without EFA the interconnect, not the accelerators, sets the pace. */
            if (n > 1 && !t->efa) {
                no_efa++;
                continue;
            }
        }
        pays = af_select_workload_usd(t, n, paid_devices(p, t, n, devices_needed(t, n, needed)));
        if (better(t, n, pays, &best)) {
            best.t = t;
            best.n = n;
            best.total = n * t->price_usd_hr;
            best.pays = pays;
        }
    }

    if (!candidates) {
        drop(out, ts->cls, "the catalog has no %s instance type%s", af_class_name(ts->cls),
             ts->n_families ? " of the families this rule allows" : "");
        return false;
    }
    if (!best.t) {
        char params[32], need[32], have[32];
        const char *mem = ts->cls == AF_CLASS_CPU ? "host" : "accelerator";
        af_format_count(p->model_params, params, sizeof(params));
        fmt_gib(need, sizeof(need), needed);
        fmt_gib(have, sizeof(have), maxi * capacity_gib(largest));
        if (no_efa && largest->efa == false)
            drop(out, ts->cls,
                 "%s %s needs %s GiB %s memory, more than one %s instance holds, "
                 "and a model split across instances needs EFA, which no %s "
                 "type in the catalog has",
                 params, af_workload_name(p->workload), need, mem, af_class_name(ts->cls),
                 af_class_name(ts->cls));
        else if (maxi == 1)
            drop(out, ts->cls,
                 "%s %s needs %s GiB %s memory; the largest %s instance (%s) "
                 "holds %s GiB",
                 params, af_workload_name(p->workload), need, mem, af_class_name(ts->cls),
                 largest->name, have);
        else if (p->instances > 0)
            drop(out, ts->cls,
                 "%s %s needs %s GiB %s memory; %d x %s, the largest %s "
                 "instance, hold %s GiB (the %d instances stated)",
                 params, af_workload_name(p->workload), need, mem, maxi, largest->name,
                 af_class_name(ts->cls), have, maxi);
        else
            drop(out, ts->cls,
                 "%s %s needs %s GiB %s memory; %d x %s, the largest %s "
                 "instance, hold %s GiB (memory.max_instances.%s is %d)",
                 params, af_workload_name(p->workload), need, mem, maxi, largest->name,
                 af_class_name(ts->cls), have, af_workload_name(p->workload), maxi);
        return false;
    }

    tier->cls = ts->cls;
    tier->spec = ts;
    tier->instance = best.t;
    tier->instances = best.n;
    /* Devices each instance must give the workload: a pod gets the devices it
     * requests, not the instance, so the tier says how many to request. */
    tier->devices = devices_needed(best.t, best.n, needed);
    tier->price_known = best.t->price_usd_hr >= 0;
    tier->hourly_usd = tier->price_known ? best.total : 0;
    tier->workload_usd = tier->price_known ? best.pays : 0;
    tier->accel_memory_gib = best.n * af_instance_accel_memory_gib(best.t);
    tier->memory_needed_gib = needed;
    return true;
}

double af_select_workload_usd(const struct af_instance_type *t, int instances, int devices)
{
    double whole = instances * t->price_usd_hr;

    if (t->price_usd_hr < 0)
        return -1;
    if (devices <= 0 || t->accel_count <= 0 || t->accel_kind == AF_ACCEL_NONE ||
        devices >= t->accel_count)
        return whole;
    return whole * devices / t->accel_count;
}

/* True when the workload pays less per hour on tier a than on b; unpriced tiers cost
 * "more" than any price. */
static bool cheaper(const struct af_tier *a, const struct af_tier *b)
{
    if (a->price_known != b->price_known)
        return a->price_known;
    return a->price_known && a->workload_usd < b->workload_usd;
}

/*
 * Objective cost: the tiers of one accelerator kind go cheapest first, by what the
 * workload pays (af_select_workload_usd): a 1-GPU pod pays an eighth of a p4d.24xlarge,
 * less than a whole p5.4xlarge, however the instances' prices compare; a model that
 * needs whole instances pays for them. Kinds keep the rule's order: a pod's requests fix
 * its kind, so for a pod this is plain price order; across kinds (recommend) per-hour
 * prices compare different work per hour (a Neuron rule exists because the model is
 * compiled for Neuron), so the rule decides and compare_kinds says what the other kind
 * would cost. Stable.
 */
static void order_by_price(struct af_selection *sel)
{
    for (size_t i = 1; i < sel->n_tiers; i++) {
        struct af_tier t = sel->tiers[i];
        size_t j = i;
        while (j > 0 && af_class_kind(sel->tiers[j - 1].cls) == af_class_kind(t.cls) &&
               cheaper(&t, &sel->tiers[j - 1])) {
            sel->tiers[j] = sel->tiers[j - 1];
            j--;
        }
        sel->tiers[j] = t;
    }
}

/* States, with the arithmetic, how what the workload pays on tier 1 compares with the
 * cheapest tier of another accelerator kind; a saving is quoted only when the numbers show
 * one. */
static void compare_kinds(struct af_selection *sel, const struct af_profile *p)
{
    struct af_tier *first = sel->n_tiers ? &sel->tiers[0] : NULL;
    const struct af_tier *other = NULL;
    char a[32], b[AF_REASON_MAX / 2];
    double pct;

    if (!first || !first->price_known)
        return;
    for (size_t i = 1; i < sel->n_tiers; i++) {
        const struct af_tier *t = &sel->tiers[i];
        if (af_class_kind(t->cls) != af_class_kind(first->cls) && t->price_known &&
            (!other || t->workload_usd < other->workload_usd))
            other = t;
    }
    if (!other || !(other->workload_usd > 0))
        return;
    fmt_usd(a, sizeof(a), first->workload_usd);
    describe_paid(p, other, b, sizeof(b));
    pct = 100.0 * (other->workload_usd - first->workload_usd) / other->workload_usd;
    if (pct >= 0.5)
        add_reason(first, "%.0f%% cheaper per hour than the cheapest %s tier that holds the model "
                          "(%s, %s)",
                   pct, af_accel_kind_name(af_class_kind(other->cls)), af_class_name(other->cls),
                   b);
    else
        add_reason(first,
                   "%s/h is %.0f%% more per hour than %s (%s); the rule ranks %s "
                   "first for this workload, since per-hour prices across accelerator kinds "
                   "do not compare work done per hour",
                   a, -pct, af_class_name(other->cls), b,
                   af_accel_kind_name(af_class_kind(first->cls)));
}

void af_selection_label(struct af_selection *sel)
{
    for (size_t i = 0; i < sel->n_tiers; i++) {
        struct af_tier *t = &sel->tiers[i];
        char pays[32];
        t->rank = (int)i + 1;
        if (t->n_reasons == 0)
            t->n_reasons = 1;
        fmt_usd(pays, sizeof(pays), t->workload_usd);
        /* objective cost moved the rule's first choice down: say so on both tiers, so no
         * reason of rank 1 speaks of another class */
        if (sel->reordered && i == 0) {
            size_t k = 1;
            while (k < sel->n_tiers && sel->tiers[k].cls != sel->rule_first)
                k++;
            snprintf(t->reasons[0], AF_REASON_MAX,
                     "%s: of the tiers of rule %s, the workload pays least here "
                     "(%s/h); the rule's first choice, %s, is rank %zu",
                     sel->rule_priced ? "the rule orders by price" : "objective cost",
                     sel->rule ? sel->rule : "none", pays, af_class_name(sel->rule_first),
                     k + 1);
        } else if (sel->reordered && t->cls == sel->rule_first) {
            snprintf(t->reasons[0], AF_REASON_MAX,
                     "the first choice of rule %s; %s ranks it %zu: the workload "
                     "pays %s/h here, more than on the tiers above",
                     sel->rule ? sel->rule : "none",
                     sel->rule_priced ? "its order: price" : "objective cost", i + 1, pays);
        } else if (i == 0 && sel->listed && t->cls != sel->listed_first) {
            const char *why = NULL;
            for (size_t d = 0; d < sel->n_dropped && !why; d++)
                if (sel->dropped[d].cls == sel->listed_first)
                    why = sel->dropped[d].reason;
            if (why)
                af_reasonf(t->reasons[0], "rule %.50s's first choice, %s, is out: %s",
                         sel->rule ? sel->rule : "none", af_class_name(sel->listed_first), why);
            else
                snprintf(t->reasons[0], AF_REASON_MAX,
                         "rule %.60s lists %s (%s) first, which the pod's accelerator request "
                         "rules out; this is its first tier the pod can use",
                         sel->rule ? sel->rule : "none", af_class_name(sel->listed_first),
                         af_accel_kind_name(af_class_kind(sel->listed_first)));
        } else if (i == 0 && sel->rule_reason)
            snprintf(t->reasons[0], AF_REASON_MAX, "%s", sel->rule_reason);
        else if (i == 0)
            snprintf(t->reasons[0], AF_REASON_MAX, "first choice");
        else if (sel->price_ordered)
            snprintf(t->reasons[0], AF_REASON_MAX,
                     "fallback %zu of rule %s (%s cheapest first within an "
                     "accelerator kind): used when the tiers above have no room",
                     i, sel->rule ? sel->rule : "none",
                     sel->rule_priced ? "order: price," : "objective cost:");
        else
            snprintf(t->reasons[0], AF_REASON_MAX,
                     "fallback %zu of rule %s: used when the tiers above have no room", i,
                     sel->rule ? sel->rule : "none");
    }
}

/*
 * No class of the rule holds the model: which classes of the catalog would, sized the same
 * way (size_tier), cheapest for the workload first, so the answer is never only "nothing".
 */
static void find_outside(const struct af_policy *pol, const struct af_catalog *cat,
                         const struct af_profile *profile, bool neuron_requested, double needed,
                         struct af_selection *out)
{
    struct af_selection *scratch = af_xmalloc(sizeof(*scratch));   /* its drops go nowhere */
    char why[AF_REASON_MAX];

    for (int c = 0; c < AF_CLASS__COUNT && out->n_outside < AF_ARRAY_SIZE(out->outside); c++) {
        struct af_tier_spec ts = {(enum af_class)c, NULL, 0};
        struct af_tier t;
        struct af_outside *o;
        if (af_class_kind((enum af_class)c) == AF_ACCEL_NONE)
            continue;
        if (af_class_kind((enum af_class)c) == AF_ACCEL_NEURON &&
            neuron_block(pol, profile, neuron_requested, why, sizeof(why)))
            continue;
        memset(scratch, 0, sizeof(*scratch));
        memset(&t, 0, sizeof(t));
        if (!size_tier(pol, cat, profile, &ts, needed, scratch, &t))
            continue;
        o = &out->outside[out->n_outside];
        *o = (struct af_outside){t.cls, t.instance, t.instances, t.price_known, t.hourly_usd,
                                 t.workload_usd, t.accel_memory_gib};
        /* cheapest for the workload first; unpriced last */
        for (size_t k = out->n_outside; k > 0; k--) {
            struct af_outside *a = &out->outside[k - 1], *b = &out->outside[k], tmp;
            if (a->price_known && (!b->price_known || a->workload_usd <= b->workload_usd))
                break;
            tmp = *a;
            *a = *b;
            *b = tmp;
        }
        out->n_outside++;
    }
    af_free(scratch);
}

void af_select(const struct af_policy *pol, const struct af_catalog *cat,
               const struct af_profile *profile, bool neuron_requested, struct af_selection *out)
{
    const struct af_rule *rule = NULL;
    double needed;

    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < pol->n_rules && !rule; i++)
        if (rule_matches(&pol->rules[i], profile))
            rule = &pol->rules[i];
    needed = af_select_memory_needed_gib(pol, profile);
    out->memory_needed_gib = needed;
    if (!rule)
        return;
    out->rule = rule->name;
    out->rule_reason = rule->reason;
    out->strict = rule->strict;
    if (rule->n_tiers) {
        out->listed = true;
        out->listed_first = rule->tiers[0].cls;
    }

    for (size_t i = 0; i < rule->n_tiers && out->n_tiers < AF_ARRAY_SIZE(out->tiers); i++) {
        const struct af_tier_spec *ts = &rule->tiers[i];
        struct af_tier *tier = &out->tiers[out->n_tiers];
        char why[AF_REASON_MAX];

        if (af_class_kind(ts->cls) == AF_ACCEL_NEURON) {
            const char *block = neuron_block(pol, profile, neuron_requested, why, sizeof(why));
            if (block) {
                drop(out, ts->cls, "%s", block);
                continue;
            }
        }
        memset(tier, 0, sizeof(*tier));
        if (!size_tier(pol, cat, profile, ts, needed, out, tier))
            continue;
        arithmetic_reason(pol, profile, tier);
        price_reason(cat, profile, tier);
        if (af_class_kind(ts->cls) == AF_ACCEL_NEURON)
            add_reason(tier,
                       "runs the Neuron-compiled %s model on NeuronCore-v%d (inf2 and trn1 "
                       "share v2; inf1 needs its own build)",
                       profile->framework >= 0 ? af_framework_name(profile->framework) : "Neuron",
                       af_class_neuron_core_version(ts->cls));
        out->n_tiers++;
    }
    if (!out->n_tiers && needed > 0)
        find_outside(pol, cat, profile, neuron_requested, needed, out);
    if (profile->objective == AF_OBJECTIVE_COST || rule->order_by_price) {
        enum af_class before = out->n_tiers ? out->tiers[0].cls : AF_CLASS_UNKNOWN;
        order_by_price(out);
        out->price_ordered = true;
        out->rule_priced = profile->objective != AF_OBJECTIVE_COST;
        out->reordered = out->n_tiers && out->tiers[0].cls != before;
        out->rule_first = before;
        compare_kinds(out, profile);
    }
    af_selection_label(out);
}
