/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Counters and latency histograms kept with relaxed atomics, so the HTTP
 * thread never takes a lock to count, and rendered as Prometheus text
 * exposition format 0.0.4 on GET /metrics. A leaf: it knows nothing of the
 * service, the cache or the policy. The service reports into it (the counters)
 * and renders its own gauges after it with the helpers below
 * (af_service_render_metrics in service_metrics.c).
 */
#include "accelfit/metrics.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/decide.h"
#include "accelfit/banned.h"


/* Histogram upper bounds in seconds, 50 us to 5 s. */
static const double bucket_le[] = {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025,
                                   0.005,   0.01,   0.025,   0.05,   0.1,   0.25,
                                   0.5,     1.0,    2.5,     5.0};
#define N_BUCKETS (sizeof(bucket_le) / sizeof(bucket_le[0]))

/*
 * Every status code 100..599 is counted under its own label (a 411 for a
 * chunked body, a 414, a 431 are as telling as a 400); a slot per code costs
 * 4 KiB per verb. Anything outside that range would be a bug: "other".
 */
#define CODE_MIN 100
#define CODE_MAX 599
#define N_CODES (CODE_MAX - CODE_MIN + 2)   /* the last slot is "other" */
#define CODE_OTHER (N_CODES - 1)

static const char *verb_names[AF_VERB__COUNT] = {"filter", "prioritize", "explain", "preempt",
                                                  "mutate"};

#define N_VERDICTS 3
static const char *verdict_names[N_VERDICTS] = {"pass", "failed", "unresolvable"};

#define WARNED_SLOTS 4096
#define WARNED_PROBES 8

struct af_metrics {
    uint64_t start_ns;
    double start_wall;
    atomic_uint_least64_t requests[AF_VERB__COUNT][N_CODES];
    atomic_uint_least64_t buckets[AF_VERB__COUNT][N_BUCKETS + 1];   /* last: +Inf only */
    atomic_uint_least64_t sum_ns[AF_VERB__COUNT];
    atomic_uint_least64_t count[AF_VERB__COUNT];
    /* class index AF_CLASS__COUNT stands for "unknown" */
    atomic_uint_least64_t decisions[AF_CLASS__COUNT + 1][N_VERDICTS];
    atomic_uint_least64_t fallbacks;
    atomic_uint_least64_t bad_annotations[AF_PLAN_ANNOTATIONS];
    /* Pods already warned about a malformed annotation (uid hashes, 0: empty): the Warning
     * Event and the counter go once per pod. Open addressing; full, the oldest slot is
     * reused. */
    pthread_mutex_t warned_lock;
    uint64_t warned[WARNED_SLOTS];
    size_t warned_next;
};

struct af_metrics *af_metrics_new(void)
{
    struct af_metrics *m = af_xcalloc(1, sizeof(*m));

    m->start_ns = af_now_ns();
    m->start_wall = af_wall_time();
    pthread_mutex_init(&m->warned_lock, NULL);
    return m;
}

void af_metrics_free(struct af_metrics *m)
{
    if (m)
        pthread_mutex_destroy(&m->warned_lock);
    af_free(m);
}

bool af_metrics_first_bad_annotations(struct af_metrics *m, const char *pod_key, uint32_t bad)
{
    uint64_t h;
    size_t slot, empty = SIZE_MAX;
    bool first = true;

    if (!bad)
        return false;
    if (!m || !pod_key)
        return true;
    h = af_fnv64(AF_FNV64_INIT, pod_key, strlen(pod_key)) | 1;   /* never 0, the empty slot */
    slot = (size_t)(h % WARNED_SLOTS);
    pthread_mutex_lock(&m->warned_lock);
    for (size_t k = 0; k < WARNED_PROBES && first; k++) {
        size_t at = (slot + k) % WARNED_SLOTS;
        if (m->warned[at] == h)
            first = false;
        else if (!m->warned[at] && empty == SIZE_MAX)
            empty = at;
    }
    if (first)   /* a full window forgets one of its pods, in turn */
        m->warned[empty != SIZE_MAX ? empty
                                    : (slot + m->warned_next++ % WARNED_PROBES) % WARNED_SLOTS] = h;
    pthread_mutex_unlock(&m->warned_lock);
    for (int i = 0; first && i < AF_PLAN_ANNOTATIONS; i++)
        if (bad & (1u << i))
            atomic_fetch_add_explicit(&m->bad_annotations[i], 1, memory_order_relaxed);
    return first;
}

static size_t code_index(int status)
{
    if (status < CODE_MIN || status > CODE_MAX)
        return CODE_OTHER;
    return (size_t)(status - CODE_MIN);
}

void af_metrics_observe_request(struct af_metrics *m, enum af_verb verb, int status, uint64_t ns)
{
    double s = (double)ns / 1e9;
    size_t b = 0;

    if (!m || (int)verb < 0 || verb >= AF_VERB__COUNT)
        return;
    atomic_fetch_add_explicit(&m->requests[verb][code_index(status)], 1, memory_order_relaxed);
    while (b < N_BUCKETS && s > bucket_le[b])
        b++;
    atomic_fetch_add_explicit(&m->buckets[verb][b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->sum_ns[verb], ns, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->count[verb], 1, memory_order_relaxed);
}

void af_metrics_count_decision(struct af_metrics *m, const char *cls, const char *verdict)
{
    af_metrics_count_decisions(m, cls, verdict, 1);
}

void af_metrics_count_decisions(struct af_metrics *m, const char *cls, const char *verdict,
                                uint64_t n)
{
    int c, v = -1;

    if (!m || !cls || !verdict || !n)
        return;
    c = af_class_parse(cls);
    if (c < 0 || c >= AF_CLASS__COUNT)
        c = AF_CLASS__COUNT;
    for (int i = 0; i < N_VERDICTS; i++)
        if (!strcmp(verdict, verdict_names[i]))
            v = i;
    if (v < 0)
        return;
    atomic_fetch_add_explicit(&m->decisions[c][v], n, memory_order_relaxed);
}

void af_metrics_count_fallback(struct af_metrics *m)
{
    if (m)
        atomic_fetch_add_explicit(&m->fallbacks, 1, memory_order_relaxed);
}

static uint64_t ld(atomic_uint_least64_t *a)
{
    return atomic_load_explicit(a, memory_order_relaxed);
}

static const char *class_label(int c)
{
    return c == AF_CLASS__COUNT ? "unknown" : af_class_name((enum af_class)c);
}

int af_metrics_header(struct af_buf *o, const char *name, const char *type, const char *help)
{
    return af_buf_printf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static int render_requests(struct af_metrics *m, struct af_buf *o)
{
    int rc = af_metrics_header(o, "accelfit_requests_total", "counter",
                    "Extender HTTP requests by verb and status code.");

    for (int v = 0; v < AF_VERB__COUNT && !rc; v++)
        for (size_t c = 0; c < N_CODES && !rc; c++) {
            uint64_t n = ld(&m->requests[v][c]);
            char code[16];
            /* code="200" always, so every verb has a series from the start */
            if (!n && c != code_index(200))
                continue;
            if (c == CODE_OTHER)
                snprintf(code, sizeof(code), "other");
            else
                snprintf(code, sizeof(code), "%d", (int)c + CODE_MIN);
            rc = af_buf_printf(o, "accelfit_requests_total{verb=\"%s\",code=\"%s\"} %llu\n",
                               verb_names[v], code, (unsigned long long)n);
        }
    if (!rc)
        rc = af_metrics_header(o, "accelfit_request_duration_seconds", "histogram",
                    "Time from the complete request to the response, by verb.");
    for (int v = 0; v < AF_VERB__COUNT && !rc; v++) {
        uint64_t cum = 0;
        for (size_t b = 0; b < N_BUCKETS && !rc; b++) {
            cum += ld(&m->buckets[v][b]);
            rc = af_buf_printf(o, "accelfit_request_duration_seconds_bucket{verb=\"%s\",le=\"%g\"} %llu\n",
                               verb_names[v], bucket_le[b], (unsigned long long)cum);
        }
        cum += ld(&m->buckets[v][N_BUCKETS]);
        if (!rc)
            rc = af_buf_printf(o,
                               "accelfit_request_duration_seconds_bucket{verb=\"%s\",le=\"+Inf\"} %llu\n"
                               "accelfit_request_duration_seconds_sum{verb=\"%s\"} %.9f\n"
                               "accelfit_request_duration_seconds_count{verb=\"%s\"} %llu\n",
                               verb_names[v], (unsigned long long)cum, verb_names[v],
                               (double)ld(&m->sum_ns[v]) / 1e9, verb_names[v],
                               (unsigned long long)ld(&m->count[v]));
    }
    return rc;
}

static int render_decisions(struct af_metrics *m, struct af_buf *o)
{
    int rc = af_metrics_header(o, "accelfit_decisions_total", "counter",
                    "Filter verdicts per candidate node, by node class and verdict.");

    for (int c = 0; c <= AF_CLASS__COUNT && !rc; c++)
        for (int v = 0; v < N_VERDICTS && !rc; v++) {
            uint64_t n = ld(&m->decisions[c][v]);
            if (!n)
                continue;
            rc = af_buf_printf(o, "accelfit_decisions_total{class=\"%s\",verdict=\"%s\"} %llu\n",
                               class_label(c), verdict_names[v], (unsigned long long)n);
        }
    if (!rc)
        rc = af_metrics_header(o, "accelfit_fallbacks_total", "counter",
                    "Filter calls that passed a lower tier because no better tier had room.");
    if (!rc)
        rc = af_buf_printf(o, "accelfit_fallbacks_total %llu\n",
                           (unsigned long long)ld(&m->fallbacks));
    if (!rc)
        rc = af_metrics_header(o, "accelfit_malformed_annotations_total", "counter",
                               "Pods with a malformed accelfit annotation (ignored, and a "
                               "Warning Event posted on the pod), once per pod, by annotation.");
    for (int i = 0; i < AF_PLAN_ANNOTATIONS && !rc; i++)
        rc = af_buf_printf(o, "accelfit_malformed_annotations_total{annotation=\"%s\"} %llu\n",
                           af_plan_annotation(i),
                           (unsigned long long)ld(&m->bad_annotations[i]));
    return rc;
}

/* A label value in the text format: backslash, double quote and newline escaped. */
int af_metrics_label(struct af_buf *o, const char *s)
{
    int rc = 0;

    for (; *s && !rc; s++) {
        if (*s == '\\' || *s == '"')
            rc = af_buf_printf(o, "\\%c", *s);
        else if (*s == '\n')
            rc = af_buf_puts(o, "\\n");
        else
            rc = af_buf_add(o, s, 1);
    }
    return rc;
}

int af_metrics_render(struct af_metrics *m, struct af_buf *out)
{
    int rc = 0;

    if (m)
        rc = render_requests(m, out);
    if (m && !rc)
        rc = render_decisions(m, out);
    if (m && !rc) {
        rc = af_metrics_header(out, "accelfit_process_uptime_seconds", "gauge",
                    "Seconds since the process started serving.");
        if (!rc)
            rc = af_buf_printf(out, "accelfit_process_uptime_seconds %.3f\n",
                               (double)(af_now_ns() - m->start_ns) / 1e9);
        if (!rc)
            rc = af_metrics_header(out, "process_start_time_seconds", "gauge",
                        "Start time of the process since the Unix epoch in seconds.");
        if (!rc)
            rc = af_buf_printf(out, "process_start_time_seconds %.3f\n", m->start_wall);
    }
    if (!rc)
        rc = af_metrics_header(out, "accelfit_build_info", "gauge", "Build information; always 1.");
    if (!rc)
        rc = af_buf_printf(out, "accelfit_build_info{version=\"%s\"} 1\n", AF_VERSION);
    return rc;
}
