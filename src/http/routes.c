/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The routes of the transport: which path is which route (after --url-prefix; the
 * health listener serves only /healthz, /readyz and /metrics, since it asks for no
 * client certificate), and how log lines and metrics name each. A leaf: no
 * libwebsockets call is made here.
 */
#include <string.h>

#include "http/internal.h"
#include "accelfit/banned.h"

const char *af__http_route_verb_name(enum route r)
{
    switch (r) {
    case R_FILTER:
        return "filter";
    case R_PRIORITIZE:
        return "prioritize";
    case R_EXPLAIN:
        return "explain";
    case R_PREEMPT:
        return "preempt";
    case R_RECOMMEND:
        return "recommend";
    case R_ROLLOUTS:
    case R_ROLLOUT_ACK:
        return "rollouts";
    case R_MUTATE:
        return "mutate";
    case R_COSTS:
        return "costs";
    case R_HEALTHZ:
        return "healthz";
    case R_READYZ:
        return "readyz";
    case R_METRICS:
        return "metrics";
    case R_NONE:
        break;
    }
    return "other";
}

int af__http_route_verb(enum route r)
{
    switch (r) {
    case R_FILTER:
        return AF_VERB_FILTER;
    case R_PRIORITIZE:
        return AF_VERB_PRIORITIZE;
    case R_EXPLAIN:
        return AF_VERB_EXPLAIN;
    case R_PREEMPT:
        return AF_VERB_PREEMPT;
    case R_MUTATE:
        return AF_VERB_MUTATE;
    default:
        return -1;
    }
}

enum route af__http_match_route(struct server *s, const char *path, bool health)
{
    static const struct {
        const char *path;
        enum route r;
    } table[] = {
        {"/filter", R_FILTER},   {"/prioritize", R_PRIORITIZE}, {"/explain", R_EXPLAIN},
        {"/preempt", R_PREEMPT}, {"/healthz", R_HEALTHZ},       {"/readyz", R_READYZ},
        {"/metrics", R_METRICS}, {"/recommend", R_RECOMMEND},   {"/rollouts", R_ROLLOUTS},
        {"/rollouts/ack", R_ROLLOUT_ACK}, {"/mutate", R_MUTATE}, {"/costs", R_COSTS},
    };

    if (s->prefix_len && !strncmp(path, s->prefix, s->prefix_len) && path[s->prefix_len] == '/')
        path += s->prefix_len;
    for (size_t i = 0; i < AF_ARRAY_SIZE(table); i++) {
        if (strcmp(path, table[i].path))
            continue;
        /* The health listener has no client certificates: probes and scrapes only. */
        if (health && table[i].r != R_HEALTHZ && table[i].r != R_READYZ &&
            table[i].r != R_METRICS)
            return R_NONE;
        return table[i].r;
    }
    return R_NONE;
}
