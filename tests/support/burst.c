/* SPDX-License-Identifier: Apache-2.0 */
/* A burst of admission reviews split between two replicas (burst.h). */
#include "support/burst.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/util.h"
#include "support/apiserver_rules.h"

enum af_rollout_side af_test_answered_side(const char *answer, size_t len, bool *local)
{
    json_t *j = json_loadb(answer ? answer : "", len, 0, NULL), *w;
    json_t *resp = json_object_get(j, "response");
    const char *patch = json_string_value(json_object_get(resp, "patch"));
    enum af_rollout_side side = AF_SIDE_NONE;
    size_t n = 0, i;
    char *raw = patch ? af_test_base64_decode(patch, &n) : NULL;

    *local = false;
    json_array_foreach(json_object_get(resp, "warnings"), i, w)
        *local |= json_is_string(w) && strstr(json_string_value(w), "could not be written");
    if (raw && strstr(raw, "rollout-side\",\"value\":\"target\""))
        side = AF_SIDE_TARGET;
    else if (raw && strstr(raw, "rollout-side\",\"value\":\"source\""))
        side = AF_SIDE_SOURCE;
    af_free(raw);
    json_decref(j);
    return side;
}

/* One client's part: no assertion here (another thread); the counts say what happened. */
static void *client_main(void *arg)
{
    struct af_test_burst_client *b = arg;
    CURL *c = curl_easy_init();
    char *u = af_xasprintf("%s/mutate?timeout=5s", b->s->base);
    static const char *const hdrs[] = {"Content-Type: application/json", NULL};

    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
    for (int i = 0; i < b->n; i++) {
        struct af_test_resp r;
        uint64_t t0 = af_now_ns();
        bool local = false;
        enum af_rollout_side side = AF_SIDE_NONE;

        af_test_http(c, "POST", u, b->body, strlen(b->body), hdrs, &r);
        b->ms[i] = (double)(af_now_ns() - t0) / 1e6;
        if (r.curl_rc == CURLE_OK && r.status == 200)
            side = af_test_answered_side(r.body, r.len, &local);
        b->target += side == AF_SIDE_TARGET;
        b->source += side == AF_SIDE_SOURCE;
        b->failed += side == AF_SIDE_NONE;
        b->local += local;
        af_test_resp_free(&r);
    }
    af_free(u);
    curl_easy_cleanup(c);
    return NULL;
}

void af_test_burst(const struct af_test_server *a, const struct af_test_server *b,
                   const char *body, int n, struct af_test_burst_client *out)
{
    pthread_t t[AF_TEST_BURST_CLIENTS];

    for (int i = 0; i < AF_TEST_BURST_CLIENTS; i++) {
        memset(&out[i], 0, sizeof(out[i]));
        out[i].s = i % 2 ? b : a;
        out[i].body = body;
        out[i].n = n / AF_TEST_BURST_CLIENTS + (i < n % AF_TEST_BURST_CLIENTS);
        af_assert(out[i].n <= AF_TEST_BURST_MAX);
        af_assert(pthread_create(&t[i], NULL, client_main, &out[i]) == 0);
    }
    for (int i = 0; i < AF_TEST_BURST_CLIENTS; i++)
        pthread_join(t[i], NULL);
}

void af_test_burst_add(struct af_test_burst_sum *sum, const struct af_test_burst_client *cl)
{
    for (int i = 0; i < AF_TEST_BURST_CLIENTS; i++) {
        sum->target += cl[i].target;
        sum->source += cl[i].source;
        sum->local += cl[i].local;
        sum->failed += cl[i].failed;
        for (int k = 0; k < cl[i].n && sum->n_ms < AF_TEST_BURST_TOTAL_MAX; k++)
            sum->ms[sum->n_ms++] = cl[i].ms[k];
    }
}

int af_test_single_replica_target(double share, int n)
{
    struct af_rollout_count c;

    memset(&c, 0, sizeof(c));
    for (int i = 0; i < n; i++) {
        if (af_rollout_choose(share, &c) == AF_SIDE_TARGET)
            c.target++;
        else
            c.source++;
    }
    return c.target;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return (x > y) - (x < y);
}

double af_test_percentile(double *v, size_t n, double p)
{
    size_t i;

    if (!n)
        return 0;
    qsort(v, n, sizeof(*v), cmp_double);
    i = (size_t)(p / 100.0 * (double)n);
    return v[i < n ? i : n - 1];
}
