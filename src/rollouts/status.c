/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A rollout's status (share, stage, units per side, halt) and GET /rollouts,
 * the status of every rollout of the policy as JSON.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "rollouts/internal.h"
#include "accelfit/banned.h"

/* ---- status and rendering ------------------------------------------------------------------- */

static void status_locked(struct af_rollouts *rs, const struct af_config *cfg,
                          const struct af_snapshot *snap, double now, size_t i,
                          struct af_rollout_status *out, struct census *old)
{
    const struct af_rollout *r = &cfg->policy->rollouts[i];
    struct af_rollout_count c;
    struct track *t;
    int all;

    af_assert_held(&rs->lock);
    af__rollouts_census_ensure(rs, cfg, snap, now, old);
    af__rollouts_pending_expire(rs, now);
    af__rollouts_forgiven_prune(rs, i);
    af__rollouts_brake(rs, i, now);
    t = rs->census.r[i].track;
    out->pending = af__rollouts_count_units(rs, i, NULL, &c);
    out->target = c.target;
    out->source = c.source;
    all = c.target + c.source;
    out->achieved = all ? (double)c.target / all : 0;
    out->share = af_rollout_share(r, t->began, now, &out->stage);
    out->stage_began = af_rollout_stage_start(r, t->began, out->stage);
    out->fallbacks = t->fallbacks;
    out->halted = t->halted;
    memcpy(out->halt_reason, t->halt_reason, sizeof(out->halt_reason));
    out->began = t->began;
}

void af_rollouts_status(struct af_rollouts *rs, const struct af_config *cfg,
                        const struct af_snapshot *snap, double now, size_t i,
                        struct af_rollout_status *out)
{
    struct census old;

    memset(out, 0, sizeof(*out));
    memset(&old, 0, sizeof(old));
    out->stage = -1;
    if (!rs || !cfg || !cfg->policy || i >= cfg->policy->n_rollouts)
        return;
    pthread_mutex_lock(&rs->lock);
    status_locked(rs, cfg, snap, now, i, out, &old);
    pthread_mutex_unlock(&rs->lock);
    af__rollouts_census_release(&old);
}

/* A JSON writer with a sticky error (first failure wins). */
struct out {
    struct af_buf *b;
    int err;
};

static void put(struct out *o, const char *s)
{
    if (!o->err)
        o->err = af_buf_puts(o->b, s);
}

static void put_str(struct out *o, const char *s)
{
    if (!o->err)
        o->err = s ? af_buf_json_str(o->b, s) : af_buf_puts(o->b, "null");
}

static void put_fmt(struct out *o, const char *fmt, ...) AF_PRINTF(2, 3);

static void put_fmt(struct out *o, const char *fmt, ...)
{
    char text[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    put(o, text);
}

static void put_time(struct out *o, double t)
{
    char text[AF_RFC3339_LEN];

    if (!(t > 0)) {
        put(o, "null");
        return;
    }
    af_format_rfc3339(t, text, sizeof(text));
    put_str(o, text);
}

static void put_classes(struct out *o, uint32_t mask)
{
    bool first = true;

    put(o, "[");
    for (int c = 0; c < AF_CLASS__COUNT; c++) {
        if (!(mask & (1u << c)))
            continue;
        if (!first)
            put(o, ",");
        put_str(o, af_class_name((enum af_class)c));
        first = false;
    }
    put(o, "]");
}

static void put_selector(struct out *o, const struct af_rollout *r)
{
    put(o, "{\"namespace\":");
    put_str(o, r->ns);
    put(o, ",\"matchLabels\":{");
    for (size_t i = 0; i < r->n_match_labels; i++) {
        if (i)
            put(o, ",");
        put_str(o, r->match_labels[i].key);
        put(o, ":");
        put_str(o, r->match_labels[i].value);
    }
    put(o, "},\"owner\":");
    if (r->owner_kind) {
        put(o, "{\"kind\":");
        put_str(o, r->owner_kind);
        put(o, ",\"name\":");
        put_str(o, r->owner_name);
        put(o, "}");
    } else {
        put(o, "null");
    }
    put(o, "}");
}

static double finite_or_0(double v)
{
    return isfinite(v) ? v : 0;
}

int af_rollouts_render(struct af_rollouts *rs, const struct af_config *cfg,
                       const struct af_snapshot *snap, double now, struct af_buf *out)
{
    size_t base = out->len, n = cfg && cfg->policy ? cfg->policy->n_rollouts : 0;
    struct out o = {out, 0};

    put(&o, "{\"rollouts\":[");
    for (size_t i = 0; i < n && !o.err; i++) {
        const struct af_rollout *r = &cfg->policy->rollouts[i];
        struct af_rollout_status st;

        af_rollouts_status(rs, cfg, snap, now, i, &st);
        put(&o, i ? ",{\"name\":" : "{\"name\":");
        put_str(&o, r->name);
        put(&o, ",\"kind\":");
        put_str(&o, r->variant ? "variant" : "placement");
        put(&o, ",\"selector\":");
        put_selector(&o, r);
        put(&o, ",\"source\":");
        put_classes(&o, r->source);
        put(&o, ",\"target\":");
        put_classes(&o, r->target);
        put(&o, ",\"fallback\":");
        put_str(&o, r->fallback == AF_FALLBACK_WAIT ? "wait" : "source");
        {
            char a[AF_JSON_NUM_MAX], b[AF_JSON_NUM_MAX];
            put_fmt(&o, ",\"share\":{\"target\":%s,\"achieved\":%s,\"stage\":",
                    af_fmt_json_num(a, finite_or_0(st.share), 6),
                    af_fmt_json_num(b, finite_or_0(st.achieved), 6));
        }
        if (st.stage >= 0) {
            put_fmt(&o, "%d,\"stage_began\":", st.stage);
            put_time(&o, st.stage_began);
        } else {
            put(&o, "null,\"stage_began\":null");
        }
        put_fmt(&o, "},\"units\":{\"target\":%d,\"source\":%d,\"pending\":%d},\"fallbacks\":%llu,"
                    "\"halted\":%s,\"halt_reason\":",
                st.target, st.source, st.pending, (unsigned long long)st.fallbacks,
                st.halted ? "true" : "false");
        put_str(&o, st.halted ? st.halt_reason : NULL);
        put(&o, ",\"began\":");
        put_time(&o, st.began);
        put_fmt(&o, ",\"brake\":{\"not_ready_for_s\":%d,\"restarts\":%d,\"failed\":%s}}",
                r->brake_not_ready_s, r->brake_restarts, r->brake_on_failed ? "true" : "false");
    }
    put(&o, "]}\n");
    if (o.err) {
        out->len = base;
        if (out->buf)
            out->buf[base] = '\0';
    }
    return o.err;
}
