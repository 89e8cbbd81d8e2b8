/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kube claims: the rollouts' claim ledger, ConfigMap accelfit-rollout-claims beside the
 * state object (docs/rollouts.md, "One share, whichever replica answers"). Each key is one
 * entry (its id), its value the entry as one line of JSON: the side a replica gave a new
 * unit, written before the webhook answers, so that every decision, on whichever replica,
 * counts every earlier one.
 *
 * A commit runs on its caller's thread (the service's claim worker, never the HTTP
 * thread): the ledger as last known (read, or as this replica last wrote it) goes to
 * ops.next, which decides and returns the ledger to write; it is PUT with the
 * resourceVersion it was decided from (POSTed when it does not exist). A 409 Conflict (or
 * 404: deleted meanwhile) means another replica wrote first: ops.undo forgets what was
 * decided, the ledger is read again, and the decisions are made again, until the write
 * succeeds or the deadline passes. So the writes are serialized by the API server and
 * each decision sees every one committed before it.
 */
#include <curl/curl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/kube.h"
#include "accelfit/rollout.h"
#include "accelfit/rollout_state.h"
#include "accelfit/util.h"

#include "kube/internal.h"
#include "accelfit/banned.h"

struct af_kube_claims {
    struct af_kube *k;
    char *ns, *name, *obj_path, *coll_path;
    CURL *h;
    /* the ledger as last known (the caller's thread only: commits do not overlap) */
    bool known, exists;
    char *rv;
    struct af_rollout_claim *v;
    size_t n;
};

static const char *side_text(const struct af_rollout_claim *c)
{
    if (c->released)
        return "released";
    return c->side == AF_SIDE_TARGET ? "target" : "source";
}

static bool claim_parse(const char *key, const char *text, struct af_rollout_claim *c)
{
    json_t *o = json_loads(text, 0, NULL);
    const char *rollout = json_string_value(json_object_get(o, "rollout"));
    const char *gen = json_string_value(json_object_get(o, "generation"));
    const char *unit = json_string_value(json_object_get(o, "unit"));
    const char *side = json_string_value(json_object_get(o, "side"));
    bool ok = false;

    memset(c, 0, sizeof(*c));
    if (!rollout || !gen || !side || strlen(key) >= sizeof(c->id) ||
        strlen(rollout) >= sizeof(c->rollout) || (unit && strlen(unit) >= sizeof(c->unit)))
        goto out;
    snprintf(c->id, sizeof(c->id), "%s", key);
    snprintf(c->rollout, sizeof(c->rollout), "%s", rollout);
    snprintf(c->unit, sizeof(c->unit), "%s", unit ? unit : "");
    c->generation = strtoull(gen, NULL, 16);
    c->side = !strcmp(side, "target") ? AF_SIDE_TARGET
              : !strcmp(side, "source") ? AF_SIDE_SOURCE
                                        : AF_SIDE_NONE;
    c->at = json_number_value(json_object_get(o, "at"));
    c->reserve = json_is_true(json_object_get(o, "reserve"));
    c->released = c->reserve && !strcmp(side, "released");
    ok = (c->side != AF_SIDE_NONE || c->released) && isfinite(c->at);
out:
    json_decref(o);
    return ok;
}

static int claim_cmp_at(const void *a, const void *b)
{
    const struct af_rollout_claim *x = a, *y = b;

    return (x->at > y->at) - (x->at < y->at);
}

/*
 * Takes what the API server says the ledger is (obj NULL: it does not exist). Whoever may
 * write ConfigMaps in the namespace may write the ledger: an entry's time is taken as at
 * most AF_ROLLOUT_CLAIM_SKEW_S ahead of this clock (so that it expires), and of more than
 * AF_ROLLOUT_CLAIMS_MAX entries the newest are kept, the others logged and dropped.
 */
static void learn(struct af_kube_claims *c, json_t *obj)
{
    json_t *data = json_object_get(obj, "data"), *val;
    const char *rv = json_string_value(json_object_get(json_object_get(obj, "metadata"),
                                                       "resourceVersion"));
    double limit = af_wall_time() + AF_ROLLOUT_CLAIM_SKEW_S;
    const char *key;

    af_free(c->v);
    af_free(c->rv);
    c->v = af_xcalloc(json_object_size(data) + 1, sizeof(*c->v));
    c->n = 0;
    json_object_foreach(data, key, val) {
        struct af_rollout_claim *e = &c->v[c->n];

        if (!json_is_string(val) || !claim_parse(key, json_string_value(val), e))
            continue;
        if (e->at > limit)
            e->at = limit;
        c->n++;
    }
    if (c->n > AF_ROLLOUT_CLAIMS_MAX) {
        char n[24];

        snprintf(n, sizeof(n), "%zu", c->n);
        AF_LOG(AF_LOG_WARN, "rollout claim ledger has too many entries, reading the newest",
               "configmap", c->name, "entries", n, NULL);
        qsort(c->v, c->n, sizeof(*c->v), claim_cmp_at);
        memmove(c->v, c->v + (c->n - AF_ROLLOUT_CLAIMS_MAX),
                AF_ROLLOUT_CLAIMS_MAX * sizeof(*c->v));
        c->n = AF_ROLLOUT_CLAIMS_MAX;
    }
    c->rv = rv ? af_xstrdup(rv) : NULL;
    c->exists = obj != NULL;
    c->known = true;
}

static char *ledger_text(const struct af_kube_claims *c, const struct af_rollout_claim *v,
                         size_t n)
{
    json_t *data = json_object();
    json_t *obj = af__kube_configmap_json(c->ns, c->name,
                                          "sides given to new units of accelfit's rollouts, not "
                                          "yet seen by every replica, one key per decision "
                                          "(docs/rollouts.md); written by accelfit");
    char *text;

    for (size_t i = 0; i < n; i++) {
        char gen[24];
        json_t *e;
        char *line;

        snprintf(gen, sizeof(gen), "%016llx", (unsigned long long)v[i].generation);
        e = json_pack("{s:s,s:s,s:s,s:s,s:f}", "rollout", v[i].rollout, "generation", gen,
                      "unit", v[i].unit, "side", side_text(&v[i]), "at", v[i].at);
        if (v[i].reserve)
            json_object_set_new(e, "reserve", json_true());
        line = json_dumps(e, JSON_COMPACT | JSON_PRESERVE_ORDER);
        json_object_set_new(data, v[i].id, json_string(line));
        af_free(line);
        json_decref(e);
    }
    json_object_set_new(obj, "data", data);
    if (c->exists && c->rv)
        json_object_set_new(json_object_get(obj, "metadata"), "resourceVersion",
                            json_string(c->rv));
    text = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    return text;
}

static long remaining_ms(uint64_t deadline)
{
    uint64_t now = af_now_ns();

    return now >= deadline ? 0 : (long)((deadline - now) / 1000000ull);
}

int af_kube_claims_new(struct af_kube_claims **out, struct af_kube *k, const char *ns,
                       const char *name)
{
    struct af_kube_claims *c;

    *out = NULL;
    if (!k || !ns || !*ns || !name || !*name)
        return AF_EINVAL;
    c = af_xcalloc(1, sizeof(*c));
    c->k = k;
    c->ns = af_xstrdup(ns);
    c->name = af_xstrdup(name);
    c->h = curl_easy_init();
    af_assert(c->h);
    af__kube_configmap_paths(c->h, ns, name, &c->coll_path, &c->obj_path);
    *out = c;
    AF_LOG(AF_LOG_INFO, "rollout claims kept in the API server", "namespace", ns, "configmap",
           name, NULL);
    return 0;
}

void af_kube_claims_free(struct af_kube_claims *c)
{
    if (!c)
        return;
    curl_easy_cleanup(c->h);
    af_free(c->v);
    af_free(c->rv);
    af_free(c->ns);
    af_free(c->name);
    af_free(c->obj_path);
    af_free(c->coll_path);
    af_free(c);
}

int af_kube_claims_commit(struct af_kube_claims *c, const struct af_kube_claims_ops *ops,
                          double timeout_s)
{
    uint64_t deadline = af_now_ns() + (uint64_t)(timeout_s * 1e9);
    int rc = AF_ETIMEDOUT;

    while (remaining_ms(deadline) > 0) {
        struct af_rollout_claim *next = NULL;
        json_t *ans = NULL;
        long status = 0;
        size_t n_next;
        char *text;

        if (!c->known) {
            rc = af__kube_request(c->k, c->h, "GET", c->obj_path, NULL, remaining_ms(deadline),
                                  &status, &ans);
            if (rc)
                break;
            if (status != 200 && status != 404) {
                json_decref(ans);
                rc = AF_EHTTP;
                break;
            }
            learn(c, status == 200 ? ans : NULL);
            json_decref(ans);
            ans = NULL;
        }
        n_next = ops->next(ops->ud, c->v, c->n, &next);
        text = ledger_text(c, next, n_next);
        af_free(next);
        rc = af__kube_request(c->k, c->h, c->exists ? "PUT" : "POST",
                              c->exists ? c->obj_path : c->coll_path, text,
                              remaining_ms(deadline), &status, &ans);
        af_free(text);
        if (rc) {
            c->known = false;   /* the write may or may not have happened */
            break;
        }
        if (status == 200 || status == 201) {
            learn(c, ans);
            json_decref(ans);
            return 0;
        }
        json_decref(ans);
        c->known = false;
        if (status != 409 && status != 404) {
            char st[16];
            snprintf(st, sizeof(st), "%ld", status);
            AF_LOG(AF_LOG_WARN, "cannot write the rollout claims", "status", st, NULL);
            rc = AF_EHTTP;
            break;
        }
        ops->undo(ops->ud);   /* another replica wrote first: decide again from its ledger */
        rc = AF_ETIMEDOUT;
    }
    return rc;
}
