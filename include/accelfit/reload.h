/* SPDX-License-Identifier: Apache-2.0 */
/*
 * reload: the policy and catalog swapped in while accelfit serves, without a
 * restart (docs/policy.md, "Reloading the policy").
 *
 * A reloader owns one thread. It reloads when asked (af_reload_request, which
 * `serve` calls from its SIGHUP handler) and, when watching, when something
 * changes in the directory of the policy or catalog file (inotify): a plain
 * write, an editor's rename, or a ConfigMap volume swapping its `..data`
 * symlink, which never writes the file itself. Changes are debounced: the
 * reload runs once the directory has been quiet for a moment.
 *
 * A reload loads and validates the files with the loader `serve` starts with
 * (af_config_load). When their bytes hash as the current config's, nothing is
 * swapped ("unchanged"); otherwise the new config goes into the holder with
 * the next generation. A
 * request holds the config it took for its whole life, so each answer comes
 * from one config, old or new, never a mix. A config that does not load is
 * logged at error level with file:line:column and counted, and the old one
 * keeps serving. The embedded defaults (no file) are never reloaded.
 */
#ifndef AF_RELOAD_H
#define AF_RELOAD_H

#include "accelfit/config.h"
#include "accelfit/util.h"

struct af_reload;

enum af_reload_result {
    AF_RELOAD_OK = 0,        /* a new config was swapped in */
    AF_RELOAD_UNCHANGED,     /* the files hold the bytes already serving */
    AF_RELOAD_ERROR,         /* unreadable or invalid: the old config keeps serving */
    AF_RELOAD_NOTHING,       /* policy and catalog are both the embedded ones */
};

struct af_reload_options {
    const char *catalog_path;   /* NULL: the embedded catalog */
    const char *policy_path;    /* NULL: the embedded policy */
    bool watch;                 /* watch the files' directories (inotify) */
    int debounce_ms;            /* quiet time before a watched change is reloaded; 0: 200 */
    /*
     * Called on the reloader's thread after each swap with the new config (borrowed),
     * e.g. to decode a static cluster file again under the new catalog. May be NULL.
     */
    void (*swapped)(void *ud, struct af_config *cfg);
    void *ud;
};

/*
 * Starts the reloader of `holder` (borrowed; it must outlive the reloader). The
 * paths of `opt` are copied. Watching that cannot be set up (inotify limits) is
 * logged and the reloader goes on with requests only. Returns 0 with *out, or a
 * negative AF_E* when the thread cannot be started.
 */
int af_reload_start(struct af_reload **out, struct af_config_holder *holder,
                    const struct af_reload_options *opt) AF_MUST_CHECK;
/* Stops and joins the thread, frees. NULL is fine. */
void af_reload_stop(struct af_reload *r);

/* Asks the thread to reload now. Async-signal-safe (one write(2)); NULL is fine. */
void af_reload_request(struct af_reload *r);

/*
 * Reloads on the calling thread, exactly as the reloader's thread does (one at a
 * time), and returns what happened. Counted and logged like any reload.
 */
enum af_reload_result af_reload_now(struct af_reload *r);

/*
 * The policy gauges for GET /metrics, of `cfg` (the config the scrape took;
 * borrowed) and the counts of `r` (NULL: none yet): accelfit_policy_generation,
 * accelfit_policy_info{source,hash,catalog_source,catalog_hash} 1,
 * accelfit_policy_reloads_total{result="ok|unchanged|error"} and
 * accelfit_policy_last_reload_success (1 until a reload fails, 0 until one
 * succeeds again). Returns 0 or AF_ETOOBIG from `out`.
 */
int af_reload_render_metrics(struct af_reload *r, const struct af_config *cfg,
                             struct af_buf *out) AF_MUST_CHECK;

#endif
