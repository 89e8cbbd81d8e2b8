/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Readiness: whether the current snapshot can be decided on (synced, and not
 * stale past --max-staleness), which the verbs' when-not-ready modes and
 * /readyz both read, and the /readyz answer with the live-utilization and
 * price lines.
 */
#include "accelfit/service.h"

#include <stdio.h>

#include "accelfit/rollout_state.h"
#include "service/internal.h"

#include "service/handlers.h"
#include "accelfit/banned.h"

/* ---- readiness ------------------------------------------------------------------------------ */

bool af__service_snapshot_ready(struct af_service *svc, const struct af_snapshot *snap,
                                const char **why)
{
    const char *reason = NULL;

    if (!snap) {
        reason = "no cluster snapshot published yet";
    } else if (!snap->synced) {
        reason = "cache not synced: the first full list has not been applied";
    } else if (svc->status) {
        if (!atomic_load(&svc->status->synced)) {
            reason = "cache not synced: the first full list has not been applied";
        } else if (svc->max_staleness_ns && !atomic_load(&svc->status->watch_up)) {
            uint64_t since = atomic_load(&svc->status->down_since_ns);
            uint64_t now = af_now_ns();
            if (since && now > since && now - since > svc->max_staleness_ns)
                reason = "cache stale: the watch has been down longer than --max-staleness";
        }
    }
    if (why)
        *why = reason ? reason : "ready";
    return reason == NULL;
}

bool af_service_ready(struct af_service *svc, const char **why)
{
    struct af_snapshot *snap = af_publisher_acquire(svc->pub);
    bool ok = af__service_snapshot_ready(svc, snap, why);

    af_snapshot_unref(snap);
    return ok;
}

int af_service_readyz(struct af_service *svc, struct af_buf *out)
{
    const char *why = NULL;
    char live[500], prices[1500];
    struct af_config *cfg = af_config_holder_get(svc->config);
    bool ok = af_service_ready(svc, &why);

    if (ok && cfg && cfg->policy && cfg->policy->n_rollouts &&
        af_rollouts_state_unread(svc->rollouts, af_wall_time())) {
        ok = false;
        why = AF_ROLLOUT_STATE_UNREAD;
    }
    af_service_utilization_status(svc, live, sizeof(live));
    af_service_prices_status(svc, cfg ? cfg->catalog : NULL, prices, sizeof(prices));
    af_config_unref(cfg);
    if (af_buf_printf(out, "%s%s\n%s%s", ok ? "ok" : "not ready: ", ok ? "" : why ? why : "",
                      live, prices) != 0)
        AF_LOG(AF_LOG_ERROR, "cannot build the /readyz answer", NULL);
    return ok ? 200 : 503;
}
