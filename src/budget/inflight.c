/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Spend committed and not yet seen (accelfit/inflight.h): a small mutex-guarded
 * list of per-pod charges. Charges are few (the pods of hard-budget tenants
 * between filter and the snapshot that shows them bound), so lookups are linear;
 * settling against a snapshot is done once per snapshot generation.
 */
#include "accelfit/inflight.h"

#include <pthread.h>
#include <string.h>

#include "accelfit/util.h"
#include "accelfit/banned.h"

struct charge {
    char *tenant;
    char *ns, *name;
    char *uid;                  /* NULL when the request had none */
    double usd_hr;
    double at;                  /* `now` when charged */
};

struct af_inflight {
    pthread_mutex_t lock;
    /* everything below is protected by ->lock */
    struct charge *v;
    size_t n, cap;
    uint64_t settled_gen;       /* the newest snapshot generation settled against */
};

struct af_inflight *af_inflight_new(void)
{
    struct af_inflight *f = af_xcalloc(1, sizeof(*f));

    pthread_mutex_init(&f->lock, NULL);
    return f;
}

static void drop(struct af_inflight *f, size_t i)
{
    af_free(f->v[i].tenant);
    af_free(f->v[i].ns);
    af_free(f->v[i].name);
    af_free(f->v[i].uid);
    f->v[i] = f->v[--f->n];
}

void af_inflight_free(struct af_inflight *f)
{
    if (!f)
        return;
    while (f->n)
        drop(f, f->n - 1);
    af_free(f->v);
    pthread_mutex_destroy(&f->lock);
    af_free(f);
}

/* Both uids known and different: another pod that took the name. */
static bool other_uid(const char *a, const char *b)
{
    return a && *a && b && *b && strcmp(a, b) != 0;
}

static bool same_pod(const struct charge *c, const struct af_pod_info *pod)
{
    return pod && pod->ns && pod->name && !strcmp(c->ns, pod->ns) && !strcmp(c->name, pod->name) &&
           !other_uid(c->uid, pod->uid);
}

/* Ends the charges of pods `snap` shows bound or finished, and those past the TTL. */
static void settle(struct af_inflight *f, const struct af_snapshot *snap, double now)
{
    bool fresh = snap && snap->generation > f->settled_gen;

    if (fresh)
        f->settled_gen = snap->generation;
    for (size_t i = f->n; i-- > 0;) {
        const struct charge *c = &f->v[i];
        const struct af_pod_brief *p = fresh ? af_snapshot_find_pod(snap, c->ns, c->name) : NULL;
        char uid[AF_POD_TEXT_MAX];

        if (now - c->at > AF_INFLIGHT_TTL_S ||
            (p && (p->node_name || p->terminal) && !other_uid(c->uid, af_pod_brief_uid(p, uid))))
            drop(f, i);
    }
}

double af_inflight_sum(struct af_inflight *f, const struct af_snapshot *snap, const char *tenant,
                       const struct af_pod_info *pod, double now)
{
    double sum = 0;

    if (!f || !tenant)
        return 0;
    pthread_mutex_lock(&f->lock);
    settle(f, snap, now);
    for (size_t i = 0; i < f->n; i++)
        if (!strcmp(f->v[i].tenant, tenant) && !same_pod(&f->v[i], pod))
            sum += f->v[i].usd_hr;
    pthread_mutex_unlock(&f->lock);
    return sum;
}

void af_inflight_charge(struct af_inflight *f, const char *tenant, const struct af_pod_info *pod,
                        double usd_hr, double now)
{
    struct charge *c;
    double first = now;

    if (!f || !tenant || !pod || !pod->ns || !pod->name)
        return;
    pthread_mutex_lock(&f->lock);
    /* the pod's earlier charge, and any under its name from a pod since replaced; the same
     * pod filtered again keeps its first time, so a pod the scheduler keeps retrying and
     * never binds (another plugin refuses it) stops holding the budget after the TTL */
    for (size_t i = f->n; i-- > 0;)
        if (!strcmp(f->v[i].ns, pod->ns) && !strcmp(f->v[i].name, pod->name)) {
            if (f->v[i].uid && pod->uid && !strcmp(f->v[i].uid, pod->uid) && f->v[i].at < first)
                first = f->v[i].at;
            drop(f, i);
        }
    if (usd_hr > 0) {
        if (f->n >= AF_INFLIGHT_MAX) {
            size_t oldest = 0;
            for (size_t i = 1; i < f->n; i++)
                if (f->v[i].at < f->v[oldest].at)
                    oldest = i;
            drop(f, oldest);
        }
        AF_GROW(f->v, f->cap, f->n + 1);
        c = &f->v[f->n++];
        c->tenant = af_xstrdup(tenant);
        c->ns = af_xstrdup(pod->ns);
        c->name = af_xstrdup(pod->name);
        c->uid = pod->uid && *pod->uid ? af_xstrdup(pod->uid) : NULL;
        c->usd_hr = usd_hr;
        c->at = first;
    }
    pthread_mutex_unlock(&f->lock);
}

size_t af_inflight_count(struct af_inflight *f)
{
    size_t n;

    if (!f)
        return 0;
    pthread_mutex_lock(&f->lock);
    n = f->n;
    pthread_mutex_unlock(&f->lock);
    return n;
}
