/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A workload profile from named values: the one reading of "workload",
 * "model-params", "objective", ... that `accelfit recommend` flags and the
 * server's /recommend share, so both accept and refuse exactly the same input
 * with the same words.
 *
 * Pure: no I/O, no allocation.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "accelfit/select.h"
#include "accelfit/banned.h"

static int bad(char *err, size_t n, const char *fmt, ...) AF_PRINTF(3, 4);

static int bad(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return AF_EINVAL;
}

/* "model_params" and "model-params" are the same key. */
static bool key_is(const char *key, const char *want)
{
    for (; *key && *want; key++, want++)
        if (*key != *want && !(*key == '_' && *want == '-'))
            return false;
    return !*key && !*want;
}

int af_model_params_parse(const char *s, double *out, char *err, size_t n)
{
    double v = 0;
    int rc = af_parse_count(s, &v);

    if (rc == AF_EINVAL && s && s[0] == '-' && af_parse_count(s + 1, &v) != AF_EINVAL)
        rc = AF_ERANGE;   /* "-5": a count, only negative */
    if (rc == AF_EINVAL) {
        snprintf(err, n,
                 "cannot parse model size '%.60s': write a parameter count as 70B, 350M, 1.5T, "
                 "13e9 or 7000000000 (from 1 to 1000T)",
                 s ? s : "");
        return AF_EINVAL;
    }
    if (rc || !(v >= 1) || !(v <= AF_MODEL_PARAMS_MAX)) {
        snprintf(err, n,
                 "model size '%.60s' is out of range: a model has from 1 to 1000T (1e15) "
                 "parameters; write e.g. 70B, 350M or 13e9",
                 s ? s : "");
        return AF_ERANGE;
    }
    *out = v;
    return 0;
}

int af_profile_set(struct af_profile *p, const char *key, const char *value, char *err, size_t n)
{
    if (!value)
        return bad(err, n, "%s needs a value", key);
    if (key_is(key, "workload")) {
        int w = af_workload_parse(value);
        if (w < 0)
            return bad(err, n,
                       "unknown workload '%.60s' (known: training, inference, batch-inference, "
                       "preprocessing, classical-ml, development)",
                       value);
        p->workload = (enum af_workload)w;
    } else if (key_is(key, "model-params")) {
        double v = 0;
        int rc = af_model_params_parse(value, &v, err, n);
        if (rc)
            return rc;
        p->model_params = v;
    } else if (key_is(key, "objective")) {
        int o = af_objective_parse(value);
        if (o < 0)
            return bad(err, n,
                       "unknown objective '%.60s' (known: cost, performance, balanced, latency)",
                       value);
        p->objective = (enum af_objective)o;
    } else if (key_is(key, "latency-slo-ms")) {
        int64_t v;
        if (af_parse_int64(value, 1, 86400000, &v) != 0)
            return bad(err, n,
                       "latency SLO '%.60s' must be a positive whole number of milliseconds",
                       value);
        p->latency_slo_ms = (int)v;
    } else if (key_is(key, "framework")) {
        int f = af_framework_parse(value);
        if (f < 0)
            return bad(err, n,
                       "unknown framework '%.60s' (known: pytorch, tensorflow, jax, other)",
                       value);
        p->framework = (enum af_framework)f;
    } else if (key_is(key, "precision")) {
        int pr = af_precision_parse(value);
        if (pr < 0)
            return bad(err, n, "unknown precision '%.60s' (known: fp32, bf16, fp16, int8, fp8)",
                       value);
        p->precision = (enum af_precision)pr;
    } else if (key_is(key, "instances")) {
        int64_t v;
        if (af_parse_int64(value, 1, 4096, &v) != 0)
            return bad(err, n,
                       "instances '%.60s' must be a whole number from 1 to 4096 (the instances "
                       "one job spans, the model split across them)",
                       value);
        p->instances = (int)v;
    } else if (key_is(key, "neuron-ready")) {
        if (!strcasecmp(value, "true") || !strcmp(value, "1") || !*value)
            p->neuron_ready = true;
        else if (!strcasecmp(value, "false") || !strcmp(value, "0"))
            p->neuron_ready = false;
        else
            return bad(err, n, "neuron-ready '%.60s' must be true or false", value);
    } else {
        return bad(err, n,
                   "unknown parameter '%.60s' (known: workload, model-params, objective, "
                   "latency-slo-ms, framework, neuron-ready, precision, instances)",
                   key);
    }
    return 0;
}

int af_profile_check(const struct af_profile *p, char *err, size_t n)
{
    if (p->workload < 0 || p->workload >= AF_WORKLOAD__COUNT)
        return bad(err, n,
                   "workload is required (training, inference, batch-inference, preprocessing, "
                   "classical-ml or development)");
    return 0;
}
