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

/* The buffer is unbounded, so appending cannot fail; these wrappers say so once. */
static void put(struct af_buf *b, const char *s)
{
    if (af_buf_puts(b, s))
        af_assert(!"unbounded buffer refused output");
}

static void json_num(struct af_buf *b, double v)
{
    if (af_buf_json_num(b, v, 10))
        af_assert(!"unbounded buffer refused output");
}

static void json_str(struct af_buf *b, const char *s)
{
    if (af_buf_json_str(b, s))
        af_assert(!"unbounded buffer refused output");
}

void af_recommend_json(const struct af_profile *p, const struct af_config *cfg,
                       const struct af_selection *s, struct af_buf *b)
{
    const struct af_policy *pol = cfg->policy;
    enum af_precision prec = p->precision;

    if (prec < 0)
        prec = p->workload == AF_WORKLOAD_TRAINING ? pol->training_precision
                                                   : pol->inference_precision;

    put(b, "{\"profile\":{\"workload\":");
    json_str(b, af_workload_name(p->workload));
    put(b, ",\"model_params\":");
    if (p->model_params > 0)
        json_num(b, p->model_params);
    else
        put(b, "null");
    put(b, ",\"objective\":");
    json_str(b, af_objective_name(p->objective));
    put(b, ",\"latency_slo_ms\":");
    if (p->latency_slo_ms > 0)
        json_num(b, p->latency_slo_ms);
    else
        put(b, "null");
    put(b, ",\"framework\":");
    json_str(b, af_framework_name(p->framework));
    put(b, p->neuron_ready ? ",\"neuron_ready\":true" : ",\"neuron_ready\":false");
    put(b, ",\"precision\":");
    json_str(b, af_precision_name(prec));
    put(b, ",\"instances\":");
    if (p->instances > 0)
        json_num(b, p->instances);
    else
        put(b, "null");
    put(b, "},\"rule\":");
    if (s->rule)
        json_str(b, s->rule);
    else
        put(b, "null");
    put(b, ",\"memory_needed_gib\":");
    if (s->memory_needed_gib > 0)
        json_num(b, s->memory_needed_gib);
    else
        put(b, "null");
    put(b, ",\"tiers\":[");
    for (size_t i = 0; i < s->n_tiers; i++) {
        const struct af_tier *t = &s->tiers[i];
        if (i)
            put(b, ",");
        put(b, "{\"rank\":");
        json_num(b, t->rank);
        put(b, ",\"class\":");
        json_str(b, af_class_name(t->cls));
        put(b, ",\"instance_type\":");
        json_str(b, t->instance->name);
        put(b, ",\"instances\":");
        json_num(b, t->instances);
        put(b, ",\"devices_per_instance\":");
        if (t->devices > 0)
            json_num(b, t->devices);
        else
            put(b, "null");
        put(b, ",\"hourly_usd\":");
        if (t->price_known)
            json_num(b, t->hourly_usd);
        else
            put(b, "null");
        put(b, ",\"workload_usd\":");
        if (t->price_known)
            json_num(b, t->workload_usd);
        else
            put(b, "null");
        put(b, ",\"price_per_instance_usd\":");
        if (t->price_known)
            json_num(b, t->instance->price_usd_hr);
        else
            put(b, "null");
        put(b, ",\"accelerator_memory_gib\":");
        json_num(b, t->accel_memory_gib);
        put(b, ",\"accelerator_memory_gib_per_instance\":");
        json_num(b, af_instance_accel_memory_gib(t->instance));
        put(b, ",\"reasons\":[");
        for (int j = 0; j < t->n_reasons; j++) {
            if (j)
                put(b, ",");
            json_str(b, t->reasons[j]);
        }
        put(b, "]}");
    }
    put(b, "],\"dropped\":[");
    for (size_t i = 0; i < s->n_dropped; i++) {
        if (i)
            put(b, ",");
        put(b, "{\"class\":");
        json_str(b, af_class_name(s->dropped[i].cls));
        put(b, ",\"reason\":");
        json_str(b, s->dropped[i].reason);
        put(b, "}");
    }
    put(b, "],\"outside_rule\":[");
    for (size_t i = 0; i < s->n_outside; i++) {
        const struct af_outside *o = &s->outside[i];
        if (i)
            put(b, ",");
        put(b, "{\"class\":");
        json_str(b, af_class_name(o->cls));
        put(b, ",\"instance_type\":");
        json_str(b, o->instance->name);
        put(b, ",\"instances\":");
        json_num(b, o->instances);
        put(b, ",\"hourly_usd\":");
        if (o->price_known)
            json_num(b, o->hourly_usd);
        else
            put(b, "null");
        put(b, ",\"workload_usd\":");
        if (o->price_known)
            json_num(b, o->workload_usd);
        else
            put(b, "null");
        put(b, ",\"accelerator_memory_gib\":");
        json_num(b, o->accel_memory_gib);
        put(b, "}");
    }
    put(b, "],\"catalog\":");
    json_str(b, cfg->catalog->source);
    put(b, ",\"policy\":");
    json_str(b, pol->source);
    put(b, "}\n");
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
