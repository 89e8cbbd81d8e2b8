/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSONPatch that adds a tenant's node preferences (accelfit/prefer.h) to a
 * Pod's node affinity, built from the object as received and applied to a copy
 * (jsonpatch.c) and checked before it is sent, as the variant's patch is
 * (variant.c): when anything is doubtful the pod is created as written and a
 * warning says why.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/prefer.h"

#include "codec/admission.h"
#include "codec/internal.h"
#include "accelfit/banned.h"

/* ---- preferences: node affinity (accelfit/prefer.h) ------------------------------------------ */

static json_t *strings_json(const char *const *v, size_t n)
{
    json_t *a = json_array();

    for (size_t i = 0; i < n; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *expr_json(const char *key, const char *op, json_t *values)
{
    return json_pack("{s:s, s:s, s:o}", "key", key, "operator", op, "values", values);
}

/* The preferred terms, heaviest first (new). */
static json_t *preferred_json(const struct af_preferences *p)
{
    json_t *terms = json_array();

    for (size_t i = 0; i < p->n_terms; i++) {
        const struct af_prefer_term *t = &p->terms[i];
        json_t *exprs = json_array();
        json_array_append_new(exprs, expr_json(p->key, "In", strings_json(t->values, t->n_values)));
        if (p->spot)
            json_array_append_new(exprs, expr_json(AF_PREFER_LABEL_CAPACITY, "In",
                                                   json_pack("[s]", "spot")));
        json_array_append_new(terms, json_pack("{s:i, s:{s:o}}", "weight", t->weight,
                                               "preference", "matchExpressions", exprs));
    }
    return terms;
}

/* The required expression (new), or NULL. */
static json_t *required_json(const struct af_preferences *p)
{
    if (!p->n_not_in)
        return NULL;
    return expr_json(p->key, "NotIn", strings_json(p->not_in, p->n_not_in));
}

static bool utf8_all(const struct af_preferences *p)
{
    bool ok = af__codec_utf8_ok(p->key);

    for (size_t i = 0; ok && i < p->n_terms; i++)
        for (size_t k = 0; ok && k < p->terms[i].n_values; k++)
            ok = af__codec_utf8_ok(p->terms[i].values[k]);
    for (size_t i = 0; ok && i < p->n_not_in; i++)
        ok = af__codec_utf8_ok(p->not_in[i]);
    return ok;
}

/*
 * The ops that add `pref` (an array of terms, may be empty) and `req` (an expression, may
 * be NULL) to the pod's node affinity, whatever of it the pod has. Returns 0, or AF_EINVAL
 * with `why` (a field of the wrong type: the pod is created as written). `req_skipped`
 * tells that the pod's required affinity has no terms to narrow (left as it is).
 */
static int affinity_ops(json_t *ops, json_t *spec, json_t *pref, json_t *req, bool *req_skipped,
                        char *why, size_t whylen)
{
    static const char na_path[] = "/spec/affinity/nodeAffinity";
    json_t *aff = af__codec_get(spec, "affinity"), *na, *have, *terms, *term;
    size_t i;

    *req_skipped = false;
    if (af__codec_unset(aff) ||
        (json_is_object(aff) && af__codec_unset(af__codec_get(aff, "nodeAffinity")))) {
        json_t *v = json_object();
        if (json_array_size(pref))
            json_object_set(v, "preferredDuringSchedulingIgnoredDuringExecution", pref);
        if (req)
            json_object_set_new(v, "requiredDuringSchedulingIgnoredDuringExecution",
                                json_pack("{s:[{s:[O]}]}", "nodeSelectorTerms",
                                          "matchExpressions", req));
        if (af__codec_unset(aff))
            af__codec_patch_op(ops, "add", "/spec/affinity", json_pack("{s:o}", "nodeAffinity", v));
        else
            af__codec_patch_op(ops, "add", na_path, v);
        return 0;
    }
    if (!json_is_object(aff)) {
        snprintf(why, whylen, "spec.affinity is not an object");
        return AF_EINVAL;
    }
    na = af__codec_get(aff, "nodeAffinity");
    if (!json_is_object(na)) {
        snprintf(why, whylen, "spec.affinity.nodeAffinity is not an object");
        return AF_EINVAL;
    }
    /* Preferred: the pod's terms stay, with their weights; ours are appended. */
    have = af__codec_get(na, "preferredDuringSchedulingIgnoredDuringExecution");
    if (json_array_size(pref)) {
        if (af__codec_unset(have)) {
            af__codec_patch_op(ops, "add",
                               "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuring"
                               "Execution",
                               json_incref(pref));
        } else if (json_is_array(have)) {
            json_array_foreach(pref, i, term)
                af__codec_patch_op(ops, "add",
                                   "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnored"
                                   "DuringExecution/-",
                                   json_incref(term));
        } else {
            snprintf(why, whylen, "the pod's preferred node affinity is not a list");
            return AF_EINVAL;
        }
    }
    if (!req)
        return 0;
    /* Required: terms are ORed, so the expression is ANDed into every one of them. */
    have = af__codec_get(na, "requiredDuringSchedulingIgnoredDuringExecution");
    if (af__codec_unset(have)) {
        af__codec_patch_op(
            ops, "add",
            "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuring"
            "Execution",
            json_pack("{s:[{s:[O]}]}", "nodeSelectorTerms", "matchExpressions", req));
        return 0;
    }
    terms = af__codec_get(have, "nodeSelectorTerms");
    if (!json_is_object(have) || !json_is_array(terms) || !json_array_size(terms)) {
        *req_skipped = true;   /* the API server refuses such a pod anyway */
        return 0;
    }
    json_array_foreach(terms, i, term) {
        json_t *me = af__codec_get(term, "matchExpressions");
        char *p;
        if (!json_is_object(term) || (!af__codec_unset(me) && !json_is_array(me))) {
            snprintf(why, whylen, "a term of the pod's required node affinity is malformed");
            return AF_EINVAL;
        }
        if (af__codec_unset(me)) {
            p = af_xasprintf("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuring"
                             "Execution/nodeSelectorTerms/%zu/matchExpressions", i);
            af__codec_patch_op(ops, "add", p, json_pack("[O]", req));
        } else {
            p = af_xasprintf("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuring"
                             "Execution/nodeSelectorTerms/%zu/matchExpressions/-", i);
            af__codec_patch_op(ops, "add", p, json_incref(req));
        }
        af_free(p);
    }
    return 0;
}

/* The patched pod keeps every term the pod had and holds ours; nothing else changed. */
static int check_affinity(json_t *before, json_t *after, json_t *pref, json_t *req,
                          bool req_skipped, char *why, size_t whylen)
{
    static const char pk[] = "preferredDuringSchedulingIgnoredDuringExecution";
    static const char rk[] = "requiredDuringSchedulingIgnoredDuringExecution";
    json_t *na0 = af__codec_get(af__codec_get(before, "affinity"), "nodeAffinity");
    json_t *na1 = af__codec_get(af__codec_get(after, "affinity"), "nodeAffinity");
    json_t *p0 = af__codec_get(na0, pk), *p1 = af__codec_get(na1, pk), *t0, *t1;
    size_t n0 = json_is_array(p0) ? json_array_size(p0) : 0, npref = json_array_size(pref);
    size_t nt0;

    if (!json_is_object(na1)) {
        snprintf(why, whylen, "the pod would have no node affinity");
        return AF_EINVAL;
    }
    if (json_array_size(p1) != n0 + npref) {
        snprintf(why, whylen, "the preferred node affinity would not hold exactly the pod's "
                              "terms and accelfit's");
        return AF_EINVAL;
    }
    for (size_t i = 0; i < n0 + npref; i++)
        if (!json_equal(json_array_get(p1, i),
                        i < n0 ? json_array_get(p0, i) : json_array_get(pref, i - n0))) {
            snprintf(why, whylen, "preferred node affinity term %zu would change", i + 1);
            return AF_EINVAL;
        }
    t0 = af__codec_get(af__codec_get(na0, rk), "nodeSelectorTerms");
    t1 = af__codec_get(af__codec_get(na1, rk), "nodeSelectorTerms");
    nt0 = json_is_array(t0) ? json_array_size(t0) : 0;
    if (!req || req_skipped) {
        if (!json_equal(t0 ? t0 : json_null(), t1 ? t1 : json_null()) &&
            !(af__codec_unset(t0) && af__codec_unset(t1))) {
            snprintf(why, whylen, "the required node affinity would change");
            return AF_EINVAL;
        }
        return 0;
    }
    if (json_array_size(t1) != (nt0 ? nt0 : 1)) {
        snprintf(why, whylen, "the required node affinity would change its terms");
        return AF_EINVAL;
    }
    for (size_t i = 0; i < json_array_size(t1); i++) {
        json_t *a = json_array_get(t0, i), *b = json_array_get(t1, i);
        json_t *ma = af__codec_get(a, "matchExpressions"), *mb = af__codec_get(b, "matchExpressions");
        size_t na = json_is_array(ma) ? json_array_size(ma) : 0;
        const char *key;
        json_t *v;
        bool same = json_array_size(mb) == na + 1 && json_equal(json_array_get(mb, na), req);
        for (size_t k = 0; same && k < na; k++)
            same = json_equal(json_array_get(ma, k), json_array_get(mb, k));
        json_object_foreach(json_is_object(b) ? b : NULL, key, v) {
            if (same && strcmp(key, "matchExpressions"))
                same = json_equal(v, af__codec_get(a, key));
        }
        if (!same) {
            snprintf(why, whylen, "required node affinity term %zu would change beyond "
                                  "accelfit's expression", i + 1);
            return AF_EINVAL;
        }
    }
    return 0;
}

int af_codec_admission_affinity(const struct af_admission *a, const struct af_preferences *p,
                                struct af_buf *patch, struct af_warnings *w)
{
    json_t *spec, *ops = json_array(), *pref = NULL, *req = NULL, *doc = NULL, *op;
    const char *node;
    char why[300] = "";
    bool skipped = false;
    size_t i;
    int rc;

    if (!a || !a->object || !p || !p->key) {
        snprintf(why, sizeof(why), "nothing to decide from");
        goto refuse;
    }
    if (!p->n_terms && !p->n_not_in) {
        rc = 0;
        goto out;
    }
    if (!utf8_all(p)) {
        snprintf(why, sizeof(why), "a value is not text");
        goto refuse;
    }
    spec = af__codec_get(a->object, "spec");
    if (!json_is_object(spec)) {
        snprintf(why, sizeof(why), "the pod has no spec");
        goto refuse;
    }
    node = af__codec_get_str(spec, "nodeName");
    if (node && *node) {
        snprintf(why, sizeof(why), "the pod names its node (spec.nodeName %.63s)", node);
        goto refuse;
    }
    pref = preferred_json(p);
    req = required_json(p);
    if (affinity_ops(ops, spec, pref, req, &skipped, why, sizeof(why)))
        goto refuse;
    if (skipped)
        af_warnings_add(w, "accelfit: the pod's required node affinity has no terms to narrow; "
                           "accelfit's required affinity was not added");
    doc = json_deep_copy(a->object);
    af_assert(doc);
    json_array_foreach(ops, i, op) {
        if (af__codec_patch_apply(doc, op, why, sizeof(why))) {
            AF_LOG(AF_LOG_ERROR, "admission patch does not apply", "why", why, NULL);
            goto refuse;
        }
    }
    if (check_affinity(spec, af__codec_get(doc, "spec"), pref, skipped ? NULL : req, skipped,
                       why, sizeof(why)))
        goto refuse;
    rc = 0;
    if (json_array_size(ops)) {
        size_t start = patch->len;
        if (json_dump_callback(ops, af__codec_patch_dump, patch, JSON_COMPACT)) {
            patch->len = start;
            if (patch->buf)
                patch->buf[start] = '\0';
            rc = AF_ETOOBIG;
        }
    }
    goto out;

refuse:
    rc = AF_EINVAL;
    af_warnings_add(w, "accelfit: pod created without node preferences: %s", why);
out:
    json_decref(doc);
    json_decref(pref);
    json_decref(req);
    json_decref(ops);
    return rc;
}
