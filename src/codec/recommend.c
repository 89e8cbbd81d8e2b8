/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The recommendation as JSON: what `accelfit recommend --output json` prints
 * and what the server's /recommend answers, written by this one function so
 * the two cannot drift apart; and the parameters of a POST /recommend body.
 */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "accelfit/codec.h"
#include "codec/internal.h"
#include "accelfit/banned.h"

/* `v` when `known`, else null. */
static void num_or_null(struct af_jw *w, const char *k, bool known, double v)
{
    if (known)
        af_jw_num(w, k, v, 10);
    else
        af_jw_null(w, k);
}

void af_recommend_json(const struct af_profile *p, const struct af_config *cfg,
                       const struct af_selection *s, struct af_buf *b)
{
    const struct af_policy *pol = cfg->policy;
    enum af_precision prec = p->precision;
    struct af_jw w = AF_JW_INIT(b);

    if (prec < 0)
        prec = p->workload == AF_WORKLOAD_TRAINING ? pol->training_precision
                                                   : pol->inference_precision;

    af_jw_open(&w, NULL, '{');
    af_jw_open(&w, "profile", '{');
    af_jw_str(&w, "workload", af_workload_name(p->workload));
    num_or_null(&w, "model_params", p->model_params > 0, p->model_params);
    af_jw_str(&w, "objective", af_objective_name(p->objective));
    num_or_null(&w, "latency_slo_ms", p->latency_slo_ms > 0, p->latency_slo_ms);
    af_jw_str(&w, "framework", af_framework_name(p->framework));
    af_jw_bool(&w, "neuron_ready", p->neuron_ready);
    af_jw_str(&w, "precision", af_precision_name(prec));
    num_or_null(&w, "instances", p->instances > 0, p->instances);
    af_jw_close(&w, '}');
    af_jw_str(&w, "rule", s->rule);
    num_or_null(&w, "memory_needed_gib", s->memory_needed_gib > 0, s->memory_needed_gib);
    af_jw_open(&w, "tiers", '[');
    for (size_t i = 0; i < s->n_tiers; i++) {
        const struct af_tier *t = &s->tiers[i];

        af_jw_open(&w, NULL, '{');
        af_jw_num(&w, "rank", t->rank, 10);
        af_jw_str(&w, "class", af_class_name(t->cls));
        af_jw_str(&w, "instance_type", t->instance->name);
        af_jw_num(&w, "instances", t->instances, 10);
        num_or_null(&w, "devices_per_instance", t->devices > 0, t->devices);
        num_or_null(&w, "hourly_usd", t->price_known, t->hourly_usd);
        num_or_null(&w, "workload_usd", t->price_known, t->workload_usd);
        num_or_null(&w, "price_per_instance_usd", t->price_known, t->instance->price_usd_hr);
        af_jw_num(&w, "accelerator_memory_gib", t->accel_memory_gib, 10);
        af_jw_num(&w, "accelerator_memory_gib_per_instance",
                  af_instance_accel_memory_gib(t->instance), 10);
        af_jw_open(&w, "reasons", '[');
        for (int j = 0; j < t->n_reasons; j++)
            af_jw_str(&w, NULL, t->reasons[j]);
        af_jw_close(&w, ']');
        af_jw_close(&w, '}');
    }
    af_jw_close(&w, ']');
    af_jw_open(&w, "dropped", '[');
    for (size_t i = 0; i < s->n_dropped; i++) {
        af_jw_open(&w, NULL, '{');
        af_jw_str(&w, "class", af_class_name(s->dropped[i].cls));
        af_jw_str(&w, "reason", s->dropped[i].reason);
        af_jw_close(&w, '}');
    }
    af_jw_close(&w, ']');
    af_jw_open(&w, "outside_rule", '[');
    for (size_t i = 0; i < s->n_outside; i++) {
        const struct af_outside *o = &s->outside[i];

        af_jw_open(&w, NULL, '{');
        af_jw_str(&w, "class", af_class_name(o->cls));
        af_jw_str(&w, "instance_type", o->instance->name);
        af_jw_num(&w, "instances", o->instances, 10);
        num_or_null(&w, "hourly_usd", o->price_known, o->hourly_usd);
        num_or_null(&w, "workload_usd", o->price_known, o->workload_usd);
        af_jw_num(&w, "accelerator_memory_gib", o->accel_memory_gib, 10);
        af_jw_close(&w, '}');
    }
    af_jw_close(&w, ']');
    af_jw_str(&w, "catalog", cfg->catalog->source);
    af_jw_str(&w, "policy", pol->source);
    af_jw_close(&w, '}');
    /* the buffer is unbounded: appending cannot fail */
    if (af_jw_end(&w))
        af_assert(!"unbounded buffer refused output");
}


/* ---- POST /recommend bodies ------------------------------------------------------------------ */

int af_codec_decode_params(const char *body, size_t len, af_param_cb cb, void *ud,
                           struct af_error *err)
{
    json_t *root, *v;
    const char *key;
    int rc;

    rc = af__codec_load_request_object(body, len, NULL, &root, err);
    if (rc)
        return rc;
    json_object_foreach(root, key, v) {
        char num[40];
        const char *text = NULL;
        if (json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v))
            text = json_string_value(v);
        else if (json_is_true(v) || json_is_false(v))
            text = json_is_true(v) ? "true" : "false";
        else if (json_is_integer(v))
            snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v)), text = num;
        else if (json_is_real(v))
            snprintf(num, sizeof(num), "%.17g", json_real_value(v)), text = num;
        if (!text) {
            rc = af_error_set(err, AF_ETYPE, "", 0, 0,
                              "%.60s: expected a string, number or boolean, got %s", key,
                              af__codec_type_name(v));
            break;
        }
        rc = cb(ud, key, text);
        if (rc)
            break;
    }
    json_decref(root);
    return rc;
}
