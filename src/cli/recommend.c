/* SPDX-License-Identifier: Apache-2.0 */
/*
 * `accelfit recommend` and `accelfit check-policy`: the selection core on the
 * command line, for people deciding on hardware before they deploy, and a
 * validator for hand-edited policies. Bad input is answered with one line on
 * stderr and exit status 2, never with a half-printed answer on stdout.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/select.h"
#include "accelfit/util.h"
#include "cli/cli.h"
#include "accelfit/banned.h"

static const char recommend_usage[] =
    "usage: accelfit recommend --workload KIND [options]\n"
    "\n"
    "Ranks hardware for a workload: the first rule of the policy that matches picks the\n"
    "classes in order, and each class is sized with the instance type of the catalog whose\n"
    "accelerator memory holds the model where the workload pays least (a pod pays its\n"
    "devices' share of an instance). Every tier comes with its reasons, the\n"
    "instance count and the on-demand price; classes left out are listed with why.\n"
    "\n"
    "options:\n"
    "  --workload KIND          training, inference, batch-inference, preprocessing,\n"
    "                           classical-ml or development (required)\n"
    "  --model-params N         model size: 70B, 350M, 13e9, 7000000000 (default: unknown)\n"
    "  --objective OBJ          cost, performance, balanced or latency (default: balanced)\n"
    "  --latency-slo-ms MS      latency target in milliseconds, a positive integer\n"
    "  --framework FW           pytorch, tensorflow, jax or other (default: unknown)\n"
    "  --neuron-ready           a Neuron-compiled artifact exists (Trainium/Inferentia allowed)\n"
    "  --precision P            fp32, bf16, fp16, int8 or fp8 (inference weights; default: policy)\n"
    "  --instances N            the job spans up to N instances, the model split across them\n"
    "                           (annotation accelfit.io/instances; default: the policy's\n"
    "                           memory.max_instances for the workload)\n"
    "  --output FORMAT          table (default) or json; --json is short for --output json\n"
    "  --catalog FILE           instance catalog YAML (default: the built-in catalog)\n"
    "  --policy FILE            policy YAML (default: the built-in policy)\n"
    "  -h, --help               show this help\n"
    "\n"
    "examples:\n"
    "  accelfit recommend --workload training --model-params 70B --objective cost \\\n"
    "      --framework pytorch --neuron-ready\n"
    "  accelfit recommend --workload inference --model-params 7B --latency-slo-ms 8\n"
    "  accelfit recommend --workload inference --model-params 70B --objective performance "
    "--output json\n"
    "  accelfit recommend --workload classical-ml\n"
    "\n"
    "exit status: 0 answered, 2 bad usage or bad input (one line on stderr), 3 nothing fits:\n"
    "no rule matches, or every class the rule names was dropped (the reasons say why).\n";

static const char check_usage[] =
    "usage: accelfit check-policy [--policy FILE] [--catalog FILE] [--output table|json]\n"
    "\n"
    "Loads and validates a policy against a catalog (the built-in ones by default) and\n"
    "prints what it holds: rules, instance types, weights, rollouts. On an error prints\n"
    "FILE:LINE:COLUMN: message and exits with status 2.\n"
    "\n"
    "options:\n"
    "  --policy FILE     policy YAML (default: the built-in policy)\n"
    "  --catalog FILE    instance catalog YAML (default: the built-in catalog)\n"
    "  --output FORMAT   table (default) or json (--json for short): one object on stdout,\n"
    "                    {\"ok\": true, \"policy\", \"rules\", ...} or, exit status 2,\n"
    "                    {\"ok\": false, \"error\": {\"file\", \"line\", \"column\", \"message\"}}\n"
    "  -h, --help        show this help\n";

/* Output buffers are unbounded, so appending cannot fail; these wrappers say so once. */
static void outf(struct af_buf *b, const char *fmt, ...) AF_PRINTF(2, 3);

static void outf(struct af_buf *b, const char *fmt, ...)
{
    char line[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    if (af_buf_puts(b, line))
        af_assert(!"unbounded buffer refused output");
}

static void put(struct af_buf *b, const char *s)
{
    if (af_buf_puts(b, s))
        af_assert(!"unbounded buffer refused output");
}

static void print_table(const struct af_profile *p, const struct af_config *cfg,
                        const struct af_selection *s, struct af_buf *b)
{
    char params[32] = "unknown size";
    int iw = 15;

    if (p->model_params > 0) {
        char count[24];
        af_format_count(p->model_params, count, sizeof(count));
        snprintf(params, sizeof(params), "%s params", count);
    }
    outf(b, "%s, %s, objective %s", af_workload_name(p->workload), params,
         af_objective_name(p->objective));
    if (p->latency_slo_ms > 0)
        outf(b, ", latency SLO %d ms", p->latency_slo_ms);
    if (p->framework >= 0)
        outf(b, ", %s", af_framework_name(p->framework));
    if (p->neuron_ready)
        put(b, ", Neuron-ready");
    if (p->precision >= 0)
        outf(b, ", %s", af_precision_name(p->precision));
    if (p->instances > 0)
        outf(b, ", up to %d instance%s", p->instances, p->instances == 1 ? "" : "s");
    put(b, "\n");
    if (!s->rule) {
        outf(b, "no rule of policy %s matches this workload\n", cfg->policy->source);
        return;
    }
    outf(b, "rule: %s", s->rule);
    if (s->memory_needed_gib > 0)
        outf(b, "; the model needs %.1f GiB (%s)", s->memory_needed_gib,
             p->workload == AF_WORKLOAD_TRAINING ? "weights, gradients and optimizer state"
                                                 : "weights and headroom");
    put(b, "\n\n");
    /* $/HOUR: what the instances cost; PAYS $/H: what the workload pays, its devices' share,
     * the figure objective cost orders by */
    /* the INSTANCE column as wide as its longest name (p6-b200.48xlarge), 15 at least */
    for (size_t i = 0; i < s->n_tiers; i++)
        if (s->tiers[i].instance && (int)strlen(s->tiers[i].instance->name) > iw)
            iw = (int)strlen(s->tiers[i].instance->name);
    for (size_t i = 0; i < s->n_outside; i++)
        if (s->outside[i].instance && (int)strlen(s->outside[i].instance->name) > iw)
            iw = (int)strlen(s->outside[i].instance->name);
    outf(b, "%4s  %-12s %-*s %5s %10s %10s %15s\n", "RANK", "CLASS", iw, "INSTANCE", "COUNT",
         "$/HOUR", "PAYS $/H", "MEMORY");
    for (size_t i = 0; i < s->n_tiers; i++) {
        const struct af_tier *t = &s->tiers[i];
        char price[32] = "unknown", pays[32] = "unknown", mem[48];
        if (t->price_known) {
            snprintf(price, sizeof(price), t->hourly_usd < 1 ? "%.3f" : "%.2f", t->hourly_usd);
            snprintf(pays, sizeof(pays), t->workload_usd < 1 ? "%.3f" : "%.2f", t->workload_usd);
        }
        if (t->accel_memory_gib > 0)
            snprintf(mem, sizeof(mem), "%.0f GiB accel", t->accel_memory_gib);
        else
            snprintf(mem, sizeof(mem), "%.0f GiB host", t->instances * t->instance->memory_gib);
        outf(b, "%4d  %-12s %-*s %5d %10s %10s %15s\n", t->rank, af_class_name(t->cls), iw,
             t->instance->name, t->instances, price, pays, mem);
        for (int j = 0; j < t->n_reasons; j++)
            outf(b, "      - %s\n", t->reasons[j]);
    }
    if (!s->n_tiers)
        put(b, "      (every class the rule names was dropped: see below)\n");
    if (s->n_outside) {
        outf(b, "\noutside rule %s, these classes of the catalog hold the model (the rule does "
                "not rank them; a rule of your policy can):\n",
             s->rule);
        outf(b, "%4s  %-12s %-*s %5s %10s %10s %15s\n", "", "CLASS", iw, "INSTANCE", "COUNT",
             "$/HOUR", "PAYS $/H", "MEMORY");
        for (size_t i = 0; i < s->n_outside; i++) {
            const struct af_outside *o = &s->outside[i];
            char price[32] = "unknown", pays[32] = "unknown", mem[48];
            if (o->price_known) {
                snprintf(price, sizeof(price), o->hourly_usd < 1 ? "%.3f" : "%.2f",
                         o->hourly_usd);
                snprintf(pays, sizeof(pays), o->workload_usd < 1 ? "%.3f" : "%.2f",
                         o->workload_usd);
            }
            snprintf(mem, sizeof(mem), "%.0f GiB accel", o->accel_memory_gib);
            outf(b, "%4s  %-12s %-*s %5d %10s %10s %15s\n", "", af_class_name(o->cls), iw,
                 o->instance->name, o->instances, price, pays, mem);
        }
    }
    if (s->n_dropped) {
        put(b, "\ndropped:\n");
        for (size_t i = 0; i < s->n_dropped; i++)
            outf(b, "  %-12s %s\n", af_class_name(s->dropped[i].cls), s->dropped[i].reason);
    }
}

int af_cmd_recommend(int argc, char **argv)
{
    const char *cmd = "recommend";
    const char *workload = NULL, *params = NULL, *objective = NULL, *slo = NULL;
    const char *framework = NULL, *precision = NULL, *output = "table", *instances = NULL;
    const char *catalog = NULL, *policy = NULL;
    struct af_selection *sel = NULL;
    struct af_config *cfg = NULL;
    struct af_buf b = AF_BUF_INIT(0);
    struct af_profile p;
    bool json;
    int rc = 0;

    af_profile_init(&p);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(recommend_usage, stdout);
            return 0;
        }
        if (af_cli_flag(argc, argv, &i, "--json", NULL) == 1) {   /* --output json */
            output = "json";
            continue;
        }
        if (af_cli_flag(argc, argv, &i, "--neuron-ready", NULL) == 1) {
            p.neuron_ready = true;
            continue;
        }
#define VALUE_FLAG(name, var)                                                                      \
    m = af_cli_flag(argc, argv, &i, name, &var);                                                   \
    if (m < 0)                                                                                     \
        return af_cli_fail(cmd, "%s needs a value (see accelfit recommend --help)", name);         \
    if (m > 0)                                                                                     \
        continue;
        VALUE_FLAG("--workload", workload)
        VALUE_FLAG("--model-params", params)
        VALUE_FLAG("--objective", objective)
        VALUE_FLAG("--latency-slo-ms", slo)
        VALUE_FLAG("--framework", framework)
        VALUE_FLAG("--precision", precision)
        VALUE_FLAG("--instances", instances)
        VALUE_FLAG("--output", output)
        VALUE_FLAG("--catalog", catalog)
        VALUE_FLAG("--policy", policy)
#undef VALUE_FLAG
        if (a[0] == '-')
            return af_cli_fail(cmd, "unknown option '%s' (see accelfit recommend --help)", a);
        return af_cli_fail(cmd, "unexpected argument '%s' (see accelfit recommend --help)", a);
    }

    {
        /* The same reading as the server's /recommend (af_profile_set). */
        static const char *const keys[] = {"workload",  "model-params", "objective",
                                           "latency-slo-ms", "framework", "precision",
                                           "instances"};
        const char *vals[] = {workload, params, objective, slo, framework, precision, instances};
        char msg[300];
        for (size_t k = 0; k < AF_ARRAY_SIZE(keys); k++)
            if (vals[k] && af_profile_set(&p, keys[k], vals[k], msg, sizeof(msg)))
                return af_cli_fail(cmd, "%s", msg);
        if (af_profile_check(&p, msg, sizeof(msg)))
            return af_cli_fail(cmd, "--%s", msg);
    }
    if (!strcmp(output, "json"))
        json = true;
    else if (!strcmp(output, "table"))
        json = false;
    else
        return af_cli_fail(cmd, "unknown output format '%s' (known: table, json)", output);

    rc = af_cli_load_config(cmd, catalog, policy, &cfg);
    if (rc)
        return rc;
    sel = af_xmalloc(sizeof(*sel));
    af_select(cfg->policy, cfg->catalog, &p, false, sel);
    if (json)
        af_recommend_json(&p, cfg, sel, &b);
    else
        print_table(&p, cfg, sel, &b);
    fwrite(b.buf, 1, b.len, stdout);
    if (fflush(stdout) != 0)
        rc = 1;
    else if (!sel->n_tiers)
        rc = 3;   /* nothing fits: said on stdout, told by the status */
    af_buf_release(&b);
    af_free(sel);
    af_config_unref(cfg);
    return rc;
}

/* Appends "prefix 7B" (or 350M, 12k). */
static void put_params(struct af_buf *b, const char *prefix, double v)
{
    char count[32];

    af_format_count(v, count, sizeof(count));
    outf(b, "%s%s", prefix, count);
}

/* Appends the profile conditions of `r` in a compact, readable form. */
static void describe_match(const struct af_rule *r, struct af_buf *b)
{
    bool any = false;

#define SEP() put(b, any ? ", " : ""), any = true
    if (r->workloads) {
        SEP();
        for (int w = 0, n = 0; w < AF_WORKLOAD__COUNT; w++)
            if (r->workloads & (1u << w)) {
                put(b, n++ ? "|" : "");
                put(b, af_workload_name(w));
            }
    }
    if (r->objectives) {
        SEP();
        put(b, "objective ");
        for (int o = 0, n = 0; o < AF_OBJECTIVE__COUNT; o++)
            if (r->objectives & (1u << o)) {
                put(b, n++ ? "|" : "");
                put(b, af_objective_name(o));
            }
    }
    if (r->frameworks) {
        SEP();
        put(b, "framework ");
        for (int f = 0, n = 0; f <= AF_FRAMEWORK__COUNT; f++)
            if (r->frameworks & (1u << f)) {
                put(b, n++ ? "|" : "");
                put(b, f == AF_FRAMEWORK__COUNT ? "unknown" : af_framework_name(f));
            }
    }
    if (r->neuron_ready >= 0) {
        SEP();
        put(b, r->neuron_ready ? "neuron-ready" : "not neuron-ready");
    }
    if (r->min_params >= 0) {
        SEP();
        put_params(b, "params >= ", r->min_params);
    }
    if (r->max_params >= 0) {
        SEP();
        put_params(b, "params < ", r->max_params);
    }
    if (r->max_latency_slo_ms > 0) {
        SEP();
        outf(b, "SLO <= %d ms", r->max_latency_slo_ms);
    }
    if (!any)
        put(b, "anything");
#undef SEP
}

/* Appends a duration the way policies write it: "10m", "1d", "1h30m". */
static void put_duration(struct af_buf *b, double secs)
{
    static const struct {
        int s;
        char u;
    } units[] = {{86400, 'd'}, {3600, 'h'}, {60, 'm'}, {1, 's'}};
    long long left = (long long)secs;

    if (left <= 0) {
        put(b, "0s");
        return;
    }
    /* Days only from two on, so 24h and 36h read as written. */
    for (size_t i = (left >= 2 * 86400 && left % 86400 == 0) ? 0 : 1; i < AF_ARRAY_SIZE(units); i++)
        if (left >= units[i].s) {
            outf(b, "%lld%c", left / units[i].s, units[i].u);
            left %= units[i].s;
        }
}

/* Appends a time in RFC 3339, UTC. */
static void put_time(struct af_buf *b, double t)
{
    char s[AF_RFC3339_LEN];

    af_format_rfc3339(t, s, sizeof(s));
    put(b, s);
}

/* Appends "k=v, k=v". */
static void put_pairs(struct af_buf *b, const struct af_pair *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        outf(b, "%s%s=%s", i ? ", " : "", p[i].key, p[i].value);
}

static void put_classes(struct af_buf *b, uint32_t mask)
{
    char names[512];   /* every class name, with separators, fits */

    af_class_mask_names(mask, names, sizeof(names));
    put(b, names);
}

/* The rollout as check-policy shows it: one line per part, under its name. */
static void describe_rollout(size_t i, const struct af_rollout *r, struct af_buf *b)
{
    const struct af_variant *v = r->variant;

    outf(b, "  %3zu %-32s line %d\n", i + 1, r->name, r->line);
    put(b, "        selector  ");
    if (!r->ns && !r->n_match_labels && !r->owner_kind)
        put(b, "every managed pod");
    else {
        outf(b, "namespace %s", r->ns ? r->ns : "any");
        if (r->n_match_labels) {
            put(b, ", labels ");
            put_pairs(b, r->match_labels, r->n_match_labels);
        }
        if (r->owner_kind)
            outf(b, ", owner %s%s%s", r->owner_kind, r->owner_name ? "/" : "",
                 r->owner_name ? r->owner_name : "");
    }
    put(b, " (pods labelled " AF_MANAGED_LABEL "=true)\n        classes   ");
    put_classes(b, r->source);
    put(b, " -> ");
    put_classes(b, r->target);
    put(b, "\n        share     ");
    if (!r->n_stages)
        outf(b, "%g%% of units on the target", r->share * 100);
    for (size_t s = 0; s < r->n_stages; s++) {
        const struct af_rollout_stage *st = &r->stages[s];
        bool after = s && r->stages[s - 1].min_duration_s > 0;
        outf(b, "%s%g%%", s ? " -> " : "stages ", st->share * 100);
        if (after || st->start_unix > 0) {
            put(b, " (");
            if (after) {
                put(b, "after ");
                put_duration(b, r->stages[s - 1].min_duration_s);
            }
            if (st->start_unix > 0) {
                put(b, after ? ", from " : "from ");
                put_time(b, st->start_unix);
            }
            put(b, ")");
        }
    }
    outf(b, "\n        fallback  %s\n",
         r->fallback == AF_FALLBACK_WAIT
             ? "wait (a unit the target has no room for waits for target room)"
             : "source (a unit the target has no room for takes the source, counted)");
    if (!v) {
        put(b, "        placement the same pod on both sides\n");
    } else {
        put(b, "        variant   ");
        if (v->n_resources) {
            put(b, "resources ");
            put_pairs(b, v->resources, v->n_resources);
        }
        if (v->n_claim_templates) {
            put(b, v->n_resources ? "\n                  claim templates " : "claim templates ");
            for (size_t t = 0; t < v->n_claim_templates; t++)
                outf(b, "%s%s -> %s", t ? ", " : "", v->claim_templates[t].key,
                     v->claim_templates[t].value);
        }
        if (v->n_images) {
            put(b, "\n                  images ");
            put_pairs(b, v->images, v->n_images);
        }
        if (v->n_env) {
            put(b, "\n                  env ");
            put_pairs(b, v->env, v->n_env);
        }
        if (v->n_tolerations) {
            put(b, "\n                  tolerations ");
            for (size_t t = 0; t < v->n_tolerations; t++) {
                const struct af_toleration *to = &v->tolerations[t];
                outf(b, "%s%s %s%s%s%s%s", t ? "; " : "", to->key ? to->key : "(every key)",
                     to->op, to->value ? " " : "", to->value ? to->value : "",
                     to->effect ? " " : "", to->effect ? to->effect : "");
            }
        }
        if (v->n_annotations) {
            put(b, "\n                  annotations ");
            put_pairs(b, v->annotations, v->n_annotations);
        }
        put(b, "\n");
    }
    put(b, "        brake     ");
    if (!r->brake_not_ready_s && !r->brake_restarts && !r->brake_on_failed)
        put(b, "off");
    else {
        int n = 0;
        put(b, "a target pod ");
        if (r->brake_not_ready_s) {
            put(b, "not Ready for ");
            put_duration(b, r->brake_not_ready_s);
            n++;
        }
        if (r->brake_restarts)
            outf(b, "%srestarted %d time%s", n++ ? ", " : "", r->brake_restarts,
                 r->brake_restarts == 1 ? "" : "s");
        if (r->brake_on_failed)
            outf(b, "%sFailed", n++ ? " or " : "");
        put(b, " halts new target units");
    }
    put(b, "\n");
}

/* check-policy --output json: what CI reads, the policy or where it is wrong. */
static int check_policy_json(const char *catalog, const char *policy)
{
    struct af_config *cfg = NULL;
    struct af_error err;
    struct af_buf b = AF_BUF_INIT(0);
    struct af_selection *sel;
    const struct af_policy *pol;
    int rc, bad = 0;

    memset(&err, 0, sizeof(err));
    rc = af_config_load(&cfg, catalog, policy, &err);
    if (rc) {
        char msg[1024];
        af_error_format(&err, msg, sizeof(msg));
        bad |= af_buf_puts(&b, "{\"ok\":false,\"error\":{\"file\":");
        bad |= err.file[0] ? af_buf_json_str(&b, err.file) : af_buf_puts(&b, "null");
        bad |= af_buf_printf(&b, ",\"line\":%d,\"column\":%d,\"message\":", err.line,
                             err.column);
        bad |= af_buf_json_str(&b, err.text[0] ? err.text : af_strerror(rc));
        bad |= af_buf_puts(&b, ",\"formatted\":");
        bad |= af_buf_json_str(&b, msg);
        bad |= af_buf_puts(&b, "}}\n");
        af_assert(!bad);
        fwrite(b.buf, 1, b.len, stdout);
        af_buf_release(&b);
        return 2;
    }
    pol = cfg->policy;
    bad |= af_buf_puts(&b, "{\"ok\":true,\"policy\":");
    bad |= af_buf_json_str(&b, pol->source);
    bad |= af_buf_puts(&b, ",\"policy_sha256\":");
    bad |= af_buf_json_str(&b, cfg->policy_sha256);
    bad |= af_buf_puts(&b, ",\"catalog\":");
    bad |= af_buf_json_str(&b, cfg->catalog->source);
    bad |= af_buf_printf(&b, ",\"instance_types\":%zu,\"rules\":[", cfg->catalog->n_types);
    for (size_t i = 0; i < pol->n_rules; i++) {
        const struct af_rule *r = &pol->rules[i];
        bad |= af_buf_puts(&b, i ? ",{\"name\":" : "{\"name\":");
        bad |= af_buf_json_str(&b, r->name);
        bad |= af_buf_printf(&b, ",\"line\":%d,\"strict\":%s,\"order\":\"%s\",\"tiers\":[",
                             r->line, r->strict ? "true" : "false",
                             r->order_by_price ? "price" : "rule");
        for (size_t t = 0; t < r->n_tiers; t++) {
            bad |= af_buf_puts(&b, t ? "," : "");
            bad |= af_buf_json_str(&b, af_class_name(r->tiers[t].cls));
        }
        bad |= af_buf_puts(&b, "]}");
    }
    bad |= af_buf_puts(&b, "],\"rollouts\":[");
    for (size_t i = 0; i < pol->n_rollouts; i++) {
        bad |= af_buf_puts(&b, i ? "," : "");
        bad |= af_buf_json_str(&b, pol->rollouts[i].name);
    }
    bad |= af_buf_puts(&b, "],\"tenants\":[");
    for (size_t i = 0; i < pol->n_tenants; i++) {
        const struct af_tenant *t = &pol->tenants[i];
        bad |= af_buf_puts(&b, i ? ",{\"name\":" : "{\"name\":");
        bad |= af_buf_json_str(&b, t->name);
        if (t->has_budget)
            bad |= af_buf_printf(&b, ",\"budget_usd_per_hour\":%.4f}", t->budget_usd_hr);
        else
            bad |= af_buf_puts(&b, ",\"budget_usd_per_hour\":null}");
    }
    bad |= af_buf_puts(&b, "],\"warnings\":[");
    sel = af_xmalloc(sizeof(*sel));
    for (int w = 0, n = 0; w < AF_WORKLOAD__COUNT; w++) {
        struct af_profile p;
        char text[200] = "";
        af_profile_init(&p);
        p.workload = (enum af_workload)w;
        af_select(pol, cfg->catalog, &p, false, sel);
        if (!sel->rule)
            snprintf(text, sizeof(text), "no rule matches %s when only the workload is known",
                     af_workload_name(w));
        else if (!sel->n_tiers)
            snprintf(text, sizeof(text), "rule %.60s leaves %s with no usable tier", sel->rule,
                     af_workload_name(w));
        if (text[0]) {
            bad |= af_buf_puts(&b, n++ ? "," : "");
            bad |= af_buf_json_str(&b, text);
        }
    }
    af_free(sel);
    bad |= af_buf_puts(&b, "]}\n");
    af_assert(!bad);
    fwrite(b.buf, 1, b.len, stdout);
    af_buf_release(&b);
    af_config_unref(cfg);
    return 0;
}

int af_cmd_check_policy(int argc, char **argv)
{
    const char *cmd = "check-policy";
    const char *catalog = NULL, *policy = NULL, *output = "table";
    struct af_config *cfg = NULL;
    struct af_selection *sel;
    struct af_buf b = AF_BUF_INIT(0);
    const struct af_policy *pol;
    int rc;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int m;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(check_usage, stdout);
            return 0;
        }
        if (!strcmp(a, "--json")) {
            output = "json";
            continue;
        }
        m = af_cli_flag(argc, argv, &i, "--policy", &policy);
        if (m == 0)
            m = af_cli_flag(argc, argv, &i, "--catalog", &catalog);
        if (m == 0)
            m = af_cli_flag(argc, argv, &i, "--output", &output);
        if (m < 0)
            return af_cli_fail(cmd, "%s needs a value (see accelfit check-policy --help)", a);
        if (m > 0)
            continue;
        return af_cli_fail(cmd, "unknown %s '%s' (see accelfit check-policy --help)",
                    a[0] == '-' ? "option" : "argument", a);
    }
    if (strcmp(output, "table") && strcmp(output, "json"))
        return af_cli_fail(cmd, "--output must be table or json, not '%s'", output);
    if (!strcmp(output, "json"))
        return check_policy_json(catalog, policy);
    rc = af_cli_load_config(cmd, catalog, policy, &cfg);
    if (rc)
        return rc;
    pol = cfg->policy;

    outf(&b, "policy %s: ok\n", pol->source);
    outf(&b, "  %zu rule%s, %zu instance type%s (catalog %s)\n", pol->n_rules,
         pol->n_rules == 1 ? "" : "s", cfg->catalog->n_types,
         cfg->catalog->n_types == 1 ? "" : "s", cfg->catalog->source);
    outf(&b, "  scoring: %s, weights tier %.2f, utilization %.2f, cost %.2f (normalized)\n",
         pol->strategy == AF_STRATEGY_SPREAD ? "spread" : "binpack", pol->w_tier, pol->w_util,
         pol->w_cost);
    outf(&b, "  memory: inference %s x %g headroom, training %g bytes/param; neuron frameworks:",
         af_precision_name(pol->inference_precision), pol->inference_headroom,
         pol->training_bytes_per_param);
    for (int f = 0; f < AF_FRAMEWORK__COUNT; f++)
        if (pol->neuron_frameworks & (1u << f))
            outf(&b, " %s", af_framework_name(f));
    outf(&b, "\n  cpu backfill: %s; default spot discount %g%%\n",
         pol->cpu_backfill == AF_CPU_BACKFILL_ON      ? "on"
         : pol->cpu_backfill == AF_CPU_BACKFILL_NEVER ? "never"
                                                      : "off for pods that state their workload",
         pol->default_spot_discount_pct);
    if (pol->util.present) {   /* docs/utilization.md */
        static const char *const modes[] = {"off", "strategy", "prefer-idle", "trust-free"};
        outf(&b, "  live utilization: scoring %s, weight %.2f; every %gs, stale after %gs; ",
             modes[pol->util.mode], pol->util.weight, pol->util.interval_s, pol->util.staleness_s);
        if (pol->util.max_gpu_util >= 0)
            outf(&b, "filter max_gpu_util %g%%; ", pol->util.max_gpu_util * 100);
        outf(&b, "waste below %g%% for %gs\n", pol->util.idle_below * 100,
             pol->util.waste_window_s);
    }
    put(&b, "  rules:\n");
    for (size_t i = 0; i < pol->n_rules; i++) {
        const struct af_rule *r = &pol->rules[i];
        outf(&b, "  %3zu %-32s line %-4d ", i + 1, r->name, r->line);
        describe_match(r, &b);
        put(&b, " ->");
        for (size_t t = 0; t < r->n_tiers; t++) {
            outf(&b, " %s", af_class_name(r->tiers[t].cls));
            if (r->tiers[t].n_families) {
                put(&b, "(");
                for (size_t f = 0; f < r->tiers[t].n_families; f++) {
                    put(&b, f ? "," : "");
                    put(&b, r->tiers[t].families[f]);
                }
                put(&b, ")");
            }
        }
        put(&b, "\n");
    }
    if (!pol->n_rollouts)
        put(&b, "  rollouts: none\n");
    else
        put(&b, "  rollouts (docs/rollouts.md):\n");
    for (size_t i = 0; i < pol->n_rollouts; i++)
        describe_rollout(i, &pol->rollouts[i], &b);
    put(&b, "  tenants (docs/policy.md#tenants):\n");
    for (size_t i = 0; i < pol->n_tenants; i++) {
        const struct af_tenant *t = &pol->tenants[i];
        outf(&b, "  %3zu %-20s ", i + 1, t->name);
        if (t->has_budget)
            outf(&b, "$%.2f/h %s", t->budget_usd_hr, af_over_budget_name(t->over_budget));
        else
            put(&b, "no budget");
        for (size_t n = 0; n < t->n_namespaces; n++)
            outf(&b, "%s%s", n ? ", " : "; namespaces ", t->namespaces[n]);
        if (t->spot_only)
            put(&b, "; spot only");
        if (i + 1 == pol->n_tenants)
            put(&b, " (the pods no other tenant takes)");
        put(&b, "\n");
    }

    /* Every workload should have an answer when nothing but its kind is known. */
    sel = af_xmalloc(sizeof(*sel));
    for (int w = 0; w < AF_WORKLOAD__COUNT; w++) {
        struct af_profile p;
        af_profile_init(&p);
        p.workload = (enum af_workload)w;
        af_select(pol, cfg->catalog, &p, false, sel);
        if (!sel->rule)
            outf(&b, "  warning: no rule matches %s when only the workload is known\n",
                 af_workload_name(w));
        else if (!sel->n_tiers)
            outf(&b, "  warning: rule %s leaves %s with no usable tier\n", sel->rule,
                 af_workload_name(w));
    }
    af_free(sel);
    fwrite(b.buf, 1, b.len, stdout);
    af_buf_release(&b);
    af_config_unref(cfg);
    return 0;
}
