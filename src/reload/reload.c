/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reloader (include/accelfit/reload.h): one thread that sleeps in poll(2)
 * on an eventfd (reload requests from the SIGHUP handler, and stop) and, when
 * watching, an inotify descriptor on the directories of the policy and
 * catalog files. The directory, not the file, is watched because a ConfigMap
 * volume never writes the file: the kubelet writes a new timestamped
 * directory and renames a `..data` symlink onto the old one, and the file is
 * a symlink through `..data`; editors likewise often write a new file and
 * rename it over the old one, which a watch on the file would lose. Events
 * on the watched names and on names starting with ".." (the kubelet's) arm a
 * short debounce; a reload whose files hash as the current config's swaps
 * nothing and counts as "unchanged".
 *
 * A swap is one af_config_holder_set: requests hold the config they took, so
 * nothing here has to wait for them.
 */
#include "accelfit/reload.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "accelfit/metrics.h"
#include "accelfit/banned.h"

#define DEFAULT_DEBOUNCE_MS 200
#define REWATCH_MS 1000   /* a watched directory went away: try again this often */

/* One watched directory and the file names in it that matter. */
struct watched {
    char *dir;
    const char *names[2];   /* basenames (borrowed from the reloader's paths), NULL-padded */
    int wd;                 /* -1 while not watched */
    bool warned;            /* the failure to watch it was logged (once until it works) */
};

struct af_reload {
    struct af_config_holder *holder;
    char *catalog_path;       /* NULL: embedded */
    char *policy_path;
    void (*swapped)(void *ud, struct af_config *cfg);
    void *ud;
    int debounce_ms;

    int evfd;                 /* requests and stop */
    int inofd;                /* -1 when not watching */
    struct watched dirs[2];
    size_t n_dirs;
    pthread_t thread;
    atomic_bool stop;

    pthread_mutex_t lock;     /* one reload at a time */
    atomic_uint_fast64_t counts[3];
    atomic_bool last_ok;
};

/* ---- one reload ---------------------------------------------------------------------------- */

/* Counted before a swap becomes visible, so whoever sees the new generation (a scrape, a
 * test polling /metrics) also sees the reload that made it counted and successful. */
static void count(struct af_reload *r, enum af_reload_result res)
{
    atomic_fetch_add(&r->counts[res], 1);
    atomic_store(&r->last_ok, res != AF_RELOAD_ERROR);
}

/* `asked`: a person asked (SIGHUP), so the outcome is logged at info whatever it is. */
static enum af_reload_result reload_locked(struct af_reload *r, bool asked)
{
    struct af_config *cur = af_config_holder_get(r->holder), *next = NULL;
    enum af_reload_result res;
    struct af_error err;
    char gen[24];
    int rc;

    af_assert_held(&r->lock);
    memset(&err, 0, sizeof(err));
    rc = af_config_load(&next, r->catalog_path, r->policy_path, &err);
    if (rc) {
        char msg[1024];
        af_error_format(&err, msg, sizeof(msg));
        snprintf(gen, sizeof(gen), "%llu", (unsigned long long)(cur ? cur->generation : 0));
        AF_LOG(AF_LOG_ERROR, "policy reload rejected; the previous policy keeps serving", "error",
               msg[0] ? msg : af_strerror(rc), "generation", gen, NULL);
        res = AF_RELOAD_ERROR;
        count(r, res);
    } else if (cur && !strcmp(next->policy_sha256, cur->policy_sha256) &&
               !strcmp(next->catalog_sha256, cur->catalog_sha256)) {
        snprintf(gen, sizeof(gen), "%llu", (unsigned long long)cur->generation);
        if (!atomic_load(&r->last_ok))   /* the last line said rejected: say it is over */
            AF_LOG(AF_LOG_INFO, "policy accepted: the files hold the running policy again "
                   "(the rejected edit is gone); nothing swapped", "policy", cur->policy->source,
                   "catalog", cur->catalog->source, "generation", gen, "policy_hash",
                   cur->policy_sha256, NULL);
        else if (asked)
            AF_LOG(AF_LOG_INFO, "policy unchanged: the files hold the running policy; nothing "
                   "swapped", "policy", cur->policy->source, "catalog", cur->catalog->source,
                   "generation", gen, "policy_hash", cur->policy_sha256, NULL);
        else
            AF_LOG(AF_LOG_DEBUG, "policy unchanged: not swapped", "policy_hash",
                   cur->policy_sha256, NULL);
        res = AF_RELOAD_UNCHANGED;
        count(r, res);
    } else {
        next->generation = (cur ? cur->generation : 0) + 1;
        snprintf(gen, sizeof(gen), "%llu", (unsigned long long)next->generation);
        res = AF_RELOAD_OK;
        count(r, res);
        af_config_holder_set(r->holder, af_config_ref(next));
        AF_LOG(AF_LOG_INFO, "policy reloaded", "policy", next->policy->source, "catalog",
               next->catalog->source, "generation", gen, "policy_hash", next->policy_sha256,
               NULL);
        if (r->swapped)
            r->swapped(r->ud, next);
    }
    af_config_unref(next);
    af_config_unref(cur);
    return res;
}

static enum af_reload_result reload(struct af_reload *r, bool asked)
{
    enum af_reload_result res;

    if (!r->catalog_path && !r->policy_path) {
        AF_LOG(AF_LOG_INFO, "nothing to reload: the policy and catalog are the embedded ones "
               "(--policy FILE, --catalog FILE)", NULL);
        return AF_RELOAD_NOTHING;
    }
    pthread_mutex_lock(&r->lock);
    res = reload_locked(r, asked);
    pthread_mutex_unlock(&r->lock);
    return res;
}

enum af_reload_result af_reload_now(struct af_reload *r)
{
    return reload(r, true);
}

/* ---- watching ------------------------------------------------------------------------------- */

static void watch_dir(struct af_reload *r, struct watched *w)
{
    uint32_t mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE |
                    IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

    w->wd = inotify_add_watch(r->inofd, w->dir, mask);
    if (w->wd >= 0) {
        if (w->warned)
            AF_LOG(AF_LOG_INFO, "watching the policy directory again", "dir", w->dir, NULL);
        w->warned = false;
    } else if (!w->warned) {
        AF_LOG(AF_LOG_WARN, "cannot watch the policy directory; retrying every second "
               "(SIGHUP reloads)", "dir", w->dir, "error", strerror(errno), NULL);
        w->warned = true;
    }
}

/* Adds `path`'s directory to the watch list, or its name to a directory already there. */
static void add_path(struct af_reload *r, const char *path)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    char *dir = slash ? af_xstrndup(path, slash == path ? 1 : (size_t)(slash - path))
                      : af_xstrdup(".");

    for (size_t i = 0; i < r->n_dirs; i++)
        if (!strcmp(r->dirs[i].dir, dir)) {
            r->dirs[i].names[1] = base;
            af_free(dir);
            return;
        }
    r->dirs[r->n_dirs].dir = dir;
    r->dirs[r->n_dirs].names[0] = base;
    r->dirs[r->n_dirs].wd = -1;
    r->n_dirs++;
}

static bool matters(const struct watched *w, const struct inotify_event *ev)
{
    if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_Q_OVERFLOW))
        return true;
    if (!ev->len)
        return false;
    if (!strncmp(ev->name, "..", 2))   /* the kubelet's ..data and timestamped directories */
        return true;
    for (size_t i = 0; i < AF_ARRAY_SIZE(w->names); i++)
        if (w->names[i] && !strcmp(w->names[i], ev->name))
            return true;
    return false;
}

/* Reads what inotify has; true when something that matters changed. */
static bool drain_inotify(struct af_reload *r)
{
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    bool changed = false;

    for (;;) {
        ssize_t n = read(r->inofd, buf, sizeof(buf));
        if (n <= 0)
            break;
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            p += sizeof(*ev) + ev->len;
            if (ev->mask & IN_Q_OVERFLOW) {
                changed = true;
                continue;
            }
            for (size_t i = 0; i < r->n_dirs; i++) {
                struct watched *w = &r->dirs[i];
                if (w->wd != ev->wd)
                    continue;
                changed |= matters(w, ev);
                if (ev->mask & IN_MOVE_SELF)   /* its path names another directory now */
                    inotify_rm_watch(r->inofd, w->wd);
                if (ev->mask & (IN_IGNORED | IN_MOVE_SELF))
                    w->wd = -1;   /* watched again, by its path, when it is back */
            }
        }
    }
    return changed;
}

static void *reload_main(void *arg)
{
    struct af_reload *r = arg;
    uint64_t due = 0;   /* af_now_ns() when a watched change is reloaded; 0: none pending */

    while (!atomic_load(&r->stop)) {
        struct pollfd p[2] = {{.fd = r->evfd, .events = POLLIN}, {.fd = r->inofd, .events = POLLIN}};
        bool lost = false;
        int timeout = -1;

        for (size_t i = 0; r->inofd >= 0 && i < r->n_dirs; i++)
            lost |= r->dirs[i].wd < 0;
        if (due) {
            uint64_t now = af_now_ns();
            timeout = now >= due ? 0 : (int)((due - now) / 1000000 + 1);
        }
        if (lost && (timeout < 0 || timeout > REWATCH_MS))
            timeout = REWATCH_MS;
        if (poll(p, r->inofd >= 0 ? 2 : 1, timeout) < 0 && errno != EINTR)
            break;
        if (p[0].revents & POLLIN) {
            uint64_t v;
            if (read(r->evfd, &v, sizeof(v)) == (ssize_t)sizeof(v) && !atomic_load(&r->stop)) {
                AF_LOG(AF_LOG_INFO, "reload requested (SIGHUP)", NULL);
                reload(r, true);
            }
        }
        if (r->inofd >= 0 && (p[1].revents & POLLIN) && drain_inotify(r))
            due = af_now_ns() + (uint64_t)r->debounce_ms * 1000000u;
        for (size_t i = 0; lost && i < r->n_dirs; i++)
            if (r->dirs[i].wd < 0) {
                watch_dir(r, &r->dirs[i]);
                if (r->dirs[i].wd >= 0)   /* back, perhaps with new files */
                    due = af_now_ns();
            }
        if (due && af_now_ns() >= due && !atomic_load(&r->stop)) {
            due = 0;
            reload(r, false);
        }
    }
    return NULL;
}

/* ---- lifecycle ------------------------------------------------------------------------------ */

/* Closes and frees what af_reload_start made (the thread is not running). */
static void reload_free(struct af_reload *r)
{
    if (r->inofd >= 0)
        close(r->inofd);
    if (r->evfd >= 0)
        close(r->evfd);
    for (size_t i = 0; i < r->n_dirs; i++)
        af_free(r->dirs[i].dir);
    pthread_mutex_destroy(&r->lock);
    af_free(r->catalog_path);
    af_free(r->policy_path);
    af_free(r);
}

int af_reload_start(struct af_reload **out, struct af_config_holder *holder,
                    const struct af_reload_options *opt)
{
    struct af_reload *r = af_xcalloc(1, sizeof(*r));
    int rc;

    *out = NULL;
    r->holder = holder;
    r->catalog_path = af_xstrdup(opt->catalog_path);
    r->policy_path = af_xstrdup(opt->policy_path);
    r->swapped = opt->swapped;
    r->ud = opt->ud;
    r->debounce_ms = opt->debounce_ms > 0 ? opt->debounce_ms : DEFAULT_DEBOUNCE_MS;
    r->inofd = -1;
    atomic_init(&r->stop, false);
    atomic_init(&r->last_ok, true);
    for (size_t i = 0; i < AF_ARRAY_SIZE(r->counts); i++)
        atomic_init(&r->counts[i], 0);
    pthread_mutex_init(&r->lock, NULL);
    r->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->evfd < 0) {
        rc = AF_EIO;
        goto fail;
    }
    if (opt->watch && (r->policy_path || r->catalog_path)) {
        if (r->policy_path)
            add_path(r, r->policy_path);
        if (r->catalog_path)
            add_path(r, r->catalog_path);
        r->inofd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (r->inofd < 0)
            AF_LOG(AF_LOG_WARN, "cannot watch the policy files; SIGHUP reloads them", "error",
                   strerror(errno), NULL);
        for (size_t i = 0; r->inofd >= 0 && i < r->n_dirs; i++)
            watch_dir(r, &r->dirs[i]);
    }
    if (pthread_create(&r->thread, NULL, reload_main, r) != 0) {
        rc = AF_EIO;
        goto fail;
    }
    *out = r;
    return 0;

fail:
    reload_free(r);
    return rc;
}

void af_reload_request(struct af_reload *r)
{
    uint64_t one = 1;

    if (r && write(r->evfd, &one, sizeof(one)) < 0) {
        /* The counter is full: a reload is pending anyway. */
    }
}

void af_reload_stop(struct af_reload *r)
{
    if (!r)
        return;
    atomic_store(&r->stop, true);
    af_reload_request(r);
    pthread_join(r->thread, NULL);
    reload_free(r);
}

/* ---- metrics -------------------------------------------------------------------------------- */

static void reload_counts(struct af_reload *r, uint64_t counts[3])
{
    for (size_t i = 0; i < 3; i++)
        counts[i] = r ? atomic_load(&(r)->counts[i]) : 0;
}

int af_reload_render_metrics(struct af_reload *r, const struct af_config *cfg,
                             struct af_buf *out)
{
    static const char *results[] = {"ok", "unchanged", "error"};
    uint64_t counts[3];
    int rc;

    reload_counts(r, counts);
    rc = af_metrics_header(out, "accelfit_policy_generation", "gauge",
                           "Generation of the policy and catalog answering requests "
                           "(1 at start, one more per reload that swapped them).");
    if (!rc)
        rc = af_buf_printf(out, "accelfit_policy_generation %llu\n",
                           (unsigned long long)(cfg ? cfg->generation : 0));
    if (!rc && cfg) {
        rc = af_metrics_header(out, "accelfit_policy_info", "gauge",
                               "The policy and catalog answering requests: their sources and "
                               "the SHA-256 of their bytes.");
        if (!rc)
            rc = af_buf_puts(out, "accelfit_policy_info{source=\"");
        if (!rc)
            rc = af_metrics_label(out, cfg->policy ? cfg->policy->source : "");
        if (!rc)
            rc = af_buf_printf(out, "\",hash=\"%s\",catalog_source=\"", cfg->policy_sha256);
        if (!rc)
            rc = af_metrics_label(out, cfg->catalog ? cfg->catalog->source : "");
        if (!rc)
            rc = af_buf_printf(out, "\",catalog_hash=\"%s\"} 1\n", cfg->catalog_sha256);
    }
    if (!rc)
        rc = af_metrics_header(out, "accelfit_policy_reloads_total", "counter",
                               "Policy reloads by result: ok (swapped in), unchanged (the same "
                               "bytes), error (rejected; the previous policy kept serving).");
    for (size_t i = 0; i < AF_ARRAY_SIZE(results) && !rc; i++)
        rc = af_buf_printf(out, "accelfit_policy_reloads_total{result=\"%s\"} %llu\n", results[i],
                           (unsigned long long)counts[i]);
    if (!rc)
        rc = af_metrics_header(out, "accelfit_policy_last_reload_success", "gauge",
                               "0 when the last reload was rejected, else 1.");
    if (!rc)
        rc = af_buf_printf(out, "accelfit_policy_last_reload_success %d\n",
                           !r || atomic_load(&(r)->last_ok) ? 1 : 0);
    return rc;
}
