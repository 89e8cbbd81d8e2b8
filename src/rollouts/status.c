/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A rollout's status (share, stage, units per side, halt) and GET /rollouts,
 * the status of every rollout of the policy as JSON.
 */
#include <math.h>
#include <pthread.h>
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

/* A time as RFC 3339 text; null when there is none. */
static void render_time(struct af_jw *w, const char *key, double t)
{
    char text[AF_RFC3339_LEN];

    if (!(t > 0)) {
        af_jw_null(w, key);
        return;
    }
    af_format_rfc3339(t, text, sizeof(text));
    af_jw_str(w, key, text);
}

static void render_classes(struct af_jw *w, const char *key, uint32_t mask)
{
    af_jw_open(w, key, '[');
    for (int c = 0; c < AF_CLASS__COUNT; c++)
        if (mask & (1u << c))
            af_jw_str(w, NULL, af_class_name((enum af_class)c));
    af_jw_close(w, ']');
}

static void render_selector(struct af_jw *w, const struct af_rollout *r)
{
    af_jw_open(w, "selector", '{');
    af_jw_str(w, "namespace", r->ns);
    af_jw_open(w, "matchLabels", '{');
    for (size_t i = 0; i < r->n_match_labels; i++)
        af_jw_str(w, r->match_labels[i].key, r->match_labels[i].value);
    af_jw_close(w, '}');
    if (r->owner_kind) {
        af_jw_open(w, "owner", '{');
        af_jw_str(w, "kind", r->owner_kind);
        af_jw_str(w, "name", r->owner_name);
        af_jw_close(w, '}');
    } else {
        af_jw_null(w, "owner");
    }
    af_jw_close(w, '}');
}

static double finite_or_0(double v)
{
    return isfinite(v) ? v : 0;
}

/* Rollout `r`, its status `st`. */
static void render_rollout(struct af_jw *w, const struct af_rollout *r,
                           const struct af_rollout_status *st)
{
    af_jw_open(w, NULL, '{');
    af_jw_str(w, "name", r->name);
    af_jw_str(w, "kind", r->variant ? "variant" : "placement");
    render_selector(w, r);
    render_classes(w, "source", r->source);
    render_classes(w, "target", r->target);
    af_jw_str(w, "fallback", r->fallback == AF_FALLBACK_WAIT ? "wait" : "source");
    af_jw_open(w, "share", '{');
    af_jw_num(w, "target", finite_or_0(st->share), 6);
    af_jw_num(w, "achieved", finite_or_0(st->achieved), 6);
    if (st->stage >= 0) {
        af_jw_int(w, "stage", st->stage);
        render_time(w, "stage_began", st->stage_began);
    } else {
        af_jw_null(w, "stage");
        af_jw_null(w, "stage_began");
    }
    af_jw_close(w, '}');
    af_jw_open(w, "units", '{');
    af_jw_int(w, "target", st->target);
    af_jw_int(w, "source", st->source);
    af_jw_int(w, "pending", st->pending);
    af_jw_close(w, '}');
    af_jw_int(w, "fallbacks", (long long)st->fallbacks);
    af_jw_bool(w, "halted", st->halted);
    af_jw_str(w, "halt_reason", st->halted ? st->halt_reason : NULL);
    render_time(w, "began", st->began);
    af_jw_open(w, "brake", '{');
    af_jw_int(w, "not_ready_for_s", r->brake_not_ready_s);
    af_jw_int(w, "restarts", r->brake_restarts);
    af_jw_bool(w, "failed", r->brake_on_failed);
    af_jw_close(w, '}');
    af_jw_close(w, '}');
}

int af_rollouts_render(struct af_rollouts *rs, const struct af_config *cfg,
                       const struct af_snapshot *snap, double now, struct af_buf *out)
{
    size_t base = out->len, n = cfg && cfg->policy ? cfg->policy->n_rollouts : 0;
    struct af_jw w = AF_JW_INIT(out);
    int rc;

    af_jw_open(&w, NULL, '{');
    af_jw_open(&w, "rollouts", '[');
    for (size_t i = 0; i < n && !af_jw_error(&w); i++) {
        struct af_rollout_status st;

        af_rollouts_status(rs, cfg, snap, now, i, &st);
        render_rollout(&w, &cfg->policy->rollouts[i], &st);
    }
    af_jw_close(&w, ']');
    af_jw_close(&w, '}');
    rc = af_jw_end(&w);
    if (rc) {
        out->len = base;
        if (out->buf)
            out->buf[base] = '\0';
    }
    return rc;
}
