/* SPDX-License-Identifier: Apache-2.0 */
/*
 * GET /rollouts and POST /rollouts/NAME/ack: the rollouts' state as the
 * rollouts room renders it, and the acknowledgment that lets a halted rollout
 * go on (its brake evaluated first, so the acknowledgment covers what is
 * failing right now).
 */
#include "accelfit/service.h"

#include <stdio.h>
#include <string.h>

#include "accelfit/rollout_state.h"
#include "service/internal.h"

#include "service/handlers.h"
#include "accelfit/banned.h"

/* ---- GET /rollouts, POST /rollouts/NAME/ack ------------------------------------------------- */

int af_service_rollouts(struct af_service *svc, struct af_buf *out)
{
    size_t base = out->len;
    struct af_config *cfg = af_config_holder_get(svc->config);
    struct af_snapshot *snap = af_publisher_acquire(svc->pub);
    int status = 200;

    if (!svc->rollouts) {
        af_service_error_body(out, base, "accelfit: this server keeps no rollout state");
        status = 503;
    } else if (af_rollouts_render(svc->rollouts, cfg, snap, af_wall_time(), out) != 0) {
        af_service_error_body(out, base, "accelfit: the rollouts are too large to render");
        status = 500;
    }
    af_snapshot_unref(snap);
    af_config_unref(cfg);
    return status;
}

int af_service_rollout_ack(struct af_service *svc, const char *name, struct af_buf *out)
{
    size_t base = out->len;
    struct af_config *cfg = af_config_holder_get(svc->config);
    struct af_snapshot *snap = NULL;
    struct af_rollout_status st;
    struct af_jw w = AF_JW_INIT(out);
    size_t i, n = cfg->policy ? cfg->policy->n_rollouts : 0;
    int status = 200;

    for (i = 0; name && i < n; i++)
        if (!strcmp(cfg->policy->rollouts[i].name, name))
            break;
    if (!name || i == n) {
        char text[200];
        snprintf(text, sizeof(text), "accelfit: no rollout '%.100s' in the policy",
                 name ? name : "");
        af_service_error_body(out, base, text);
        status = 404;
        goto done;
    }
    if (!svc->rollouts) {
        af_service_error_body(out, base, "accelfit: this server keeps no rollout state");
        status = 503;
        goto done;
    }
    /* Evaluate the brake first, so the acknowledgment covers what is failing right now. */
    snap = af_publisher_acquire(svc->pub);
    af_rollouts_status(svc->rollouts, cfg, snap, af_wall_time(), i, &st);
    if (af_rollouts_ack(svc->rollouts, name) != 0)
        AF_LOG(AF_LOG_ERROR, "cannot acknowledge rollout", "rollout", name, NULL);
    af_jw_open(&w, NULL, '{');
    af_jw_str(&w, "rollout", name);
    af_jw_bool(&w, "acknowledged", true);
    af_jw_bool(&w, "was_halted", st.halted);
    af_jw_str(&w, "halt_reason", st.halted ? st.halt_reason : NULL);
    af_jw_close(&w, '}');
    if (af_jw_end(&w)) {
        af_service_error_body(out, base, "accelfit: response too large");
        status = 500;
    }
done:
    af_snapshot_unref(snap);
    af_config_unref(cfg);
    return status;
}

int af_service_rollout_ack_query(struct af_service *svc, const char *query, struct af_buf *out)
{
    static const char *const known[] = {"name", NULL};
    size_t base = out->len;
    struct af_query q;
    char err[400];
    const char *v;
    int status;

    if (af_query_parse(&q, query, "POST /rollouts/ack", known, err, sizeof(err)) != 0)
        return af__service_bad_query(out, base, err);
    v = af_query_get(&q, "name");
    if (!v || !*v) {
        af_query_release(&q);
        return af__service_bad_query(out, base,
                         "POST /rollouts/ack: the query names no rollout; expected "
                         "?name=ROLLOUT (GET /rollouts lists them)");
    }
    status = af_service_rollout_ack(svc, v, out);
    af_query_release(&q);
    return status;
}
