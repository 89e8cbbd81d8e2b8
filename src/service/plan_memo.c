/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The plans of the last few distinct pods (decision step 1, af_plan_pod), kept per service.
 *
 * kube-scheduler sends filter and then prioritize for each pod, and the pods it schedules
 * in a row are mostly replicas of one spec: the same requests, the same accelfit.io
 * annotations. A plan depends on nothing else (the policy, the catalog and those two; no
 * name, no clock, no node), yet sizing it — the rule's tiers, their prices and every reason
 * text — was about half of a filter call's instructions. So a plan is computed once per
 * distinct (config, requests, annotations) and copied after: the copy is the plan
 * af_plan_pod would have made, byte for byte. Entries are keyed by the config's serial
 * (never reused, unlike a freed config's address), so a reload's new policy or catalog
 * plans afresh and no plan is taken for another config's.
 */
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "accelfit/config.h"
#include "accelfit/decide.h"
#include "accelfit/rollout_state.h"
#include "accelfit/service.h"
#include "accelfit/util.h"
#include "service/internal.h"
#include "accelfit/banned.h"

#define MEMO_ENTRIES 8
/* Longer annotations are planned every time: a key stays small, a hostile pod cannot
 * make the memo hold much. */
#define MEMO_ANN_MAX 256

#define N_ANN AF_POD_ANNOTATIONS_N

struct memo_entry {
    bool used;
    uint64_t serial;             /* the config's (af_config.serial) */
    const struct af_policy *pol;
    const struct af_catalog *cat;
    struct af_resources requests;
    char *ann[N_ANN];            /* copies; NULL where the pod has none */
    struct af_plan plan;
};

struct af_plan_memo {
    pthread_mutex_t mu;
    size_t next;                 /* the entry replaced next (oldest first) */
    struct memo_entry e[MEMO_ENTRIES];
};

struct af_plan_memo *af_plan_memo_new(void)
{
    struct af_plan_memo *m = af_xcalloc(1, sizeof(*m));

    af_assert(pthread_mutex_init(&m->mu, NULL) == 0);
    return m;
}

static void entry_clear(struct memo_entry *e)
{
    for (size_t i = 0; i < N_ANN; i++) {
        af_free(e->ann[i]);
        e->ann[i] = NULL;
    }
    e->used = false;
}

void af_plan_memo_free(struct af_plan_memo *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < MEMO_ENTRIES; i++)
        entry_clear(&m->e[i]);
    pthread_mutex_destroy(&m->mu);
    af_free(m);
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

static bool matches(const struct memo_entry *e, const struct af_config *cfg,
                    const struct af_policy *pol, const struct af_catalog *cat,
                    const struct af_pod_info *pod)
{
    if (!e->used || e->serial != cfg->serial || e->pol != pol ||
        e->cat != cat || memcmp(&e->requests, &pod->requests, sizeof(e->requests)) != 0)
        return false;
    for (size_t i = 0; i < N_ANN; i++)
        if (!same_str(e->ann[i], af_pod_annotation(&pod->ann, i)))
            return false;
    return true;
}

void af__plan_memo_plan(struct af_plan_memo *m, const struct af_config *cfg,
                        const struct af_policy *pol, const struct af_catalog *cat,
                        const struct af_pod_info *pod, struct af_plan *out)
{
    struct memo_entry *e;

    for (size_t i = 0; m && i < N_ANN; i++) {
        const char *a = af_pod_annotation(&pod->ann, i);
        if (a && strlen(a) > MEMO_ANN_MAX)
            m = NULL;
    }
    if (!m || !cfg || !cfg->serial) {
        af_plan_pod(pol, cat, pod, out);
        return;
    }
    pthread_mutex_lock(&m->mu);
    for (size_t i = 0; i < MEMO_ENTRIES; i++)
        if (matches(&m->e[i], cfg, pol, cat, pod)) {
            memcpy(out, &m->e[i].plan, sizeof(*out));
            pthread_mutex_unlock(&m->mu);
            return;
        }
    pthread_mutex_unlock(&m->mu);

    af_plan_pod(pol, cat, pod, out);   /* outside the lock: the slow part */

    pthread_mutex_lock(&m->mu);
    e = &m->e[m->next];
    m->next = (m->next + 1) % MEMO_ENTRIES;
    entry_clear(e);
    e->serial = cfg->serial;
    e->pol = pol;
    e->cat = cat;
    e->requests = pod->requests;
    for (size_t i = 0; i < N_ANN; i++) {
        const char *a = af_pod_annotation(&pod->ann, i);
        e->ann[i] = a ? af_xstrdup(a) : NULL;
    }
    memcpy(&e->plan, out, sizeof(*out));
    e->used = true;
    pthread_mutex_unlock(&m->mu);
}
