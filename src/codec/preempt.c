/* SPDX-License-Identifier: Apache-2.0 */
/*
 * extender/v1 preemption on the wire: ExtenderPreemptionArgs in,
 * ExtenderPreemptionResult out. kube-scheduler sends the pod and its
 * candidate nodes with their victims, either as full Pods in
 * NodeNameToVictims (nodeCacheCapable: false) or as UIDs in
 * NodeNameToMetaVictims (true), the other field null; the answer is always
 * NodeNameToMetaVictims, keyed by node name, with the victims as UIDs. As for
 * ExtenderArgs, the Go types have no JSON tags: keys are matched
 * case-insensitively and PascalCase is emitted. Only what the answer needs is
 * kept (names, UIDs, NumPDBViolations), so no json_t outlives the decode.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "accelfit/codec.h"

#include "codec/internal.h"
#include "accelfit/banned.h"

/* One candidate node and its victims, as the answer repeats them. */
struct victims {
    char *node;
    char **uids;          /* owned, each owned */
    size_t n_uids;
    long long num_pdb_violations;
};

struct af_preempt_args {
    struct af_pod_info *pod;
    bool meta;            /* the victims came from NodeNameToMetaVictims */
    size_t n;
    struct victims *v;    /* n entries, in request order */
};

void af_preempt_args_free(struct af_preempt_args *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++) {
        for (size_t j = 0; j < a->v[i].n_uids; j++)
            af_free(a->v[i].uids[j]);
        af_free(a->v[i].uids);
        af_free(a->v[i].node);
    }
    af_free(a->v);
    af_pod_info_unref(a->pod);
    af_free(a);
}

const struct af_pod_info *af_preempt_args_pod(const struct af_preempt_args *a)
{
    return a ? a->pod : NULL;
}

bool af_preempt_args_meta(const struct af_preempt_args *a)
{
    return a && a->meta;
}

size_t af_preempt_args_count(const struct af_preempt_args *a)
{
    return a ? a->n : 0;
}

const char *af_preempt_args_name(const struct af_preempt_args *a, size_t i)
{
    return a && i < a->n ? a->v[i].node : NULL;
}

size_t af_preempt_args_victims(const struct af_preempt_args *a, size_t i)
{
    return a && i < a->n ? a->v[i].n_uids : 0;
}

/* The value of `key` matched case-insensitively; the last match wins, as in Go. */
static json_t *get_ci(json_t *obj, const char *key)
{
    const char *k;
    json_t *v, *hit = NULL;

    json_object_foreach(obj, k, v) {
        if (!strcasecmp(k, key))
            hit = v;
    }
    return hit;
}

static bool is_set(json_t *v)
{
    return v && !json_is_null(v);
}

/*
 * A victim's UID: {"UID":".."} in MetaVictims, metadata.uid of a full Pod
 * otherwise (a Kubernetes object: its own lower-camel keys). A missing UID is
 * kept as "" (kube-scheduler copies pod.UID as it is); a UID of the wrong
 * type is an error.
 */
static int victim_uid(json_t *pod, bool meta, const char *where, char **out,
                      struct af_error *err)
{
    json_t *uid;

    if (!json_is_object(pod))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "%s: expected an object, got %s", where,
                            af__codec_type_name(pod));
    if (meta) {
        uid = get_ci(pod, "UID");
    } else {
        json_t *md = json_object_get(pod, "metadata");
        if (is_set(md) && !json_is_object(md))
            return af_error_set(err, AF_ETYPE, "", 0, 0,
                                "%s.metadata: expected an object, got %s", where,
                                af__codec_type_name(md));
        uid = json_is_object(md) ? json_object_get(md, "uid") : NULL;
    }
    if (is_set(uid) && !json_is_string(uid))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "%s.%s: expected a string, got %s", where,
                            meta ? "UID" : "metadata.uid", af__codec_type_name(uid));
    *out = af_xstrdup(is_set(uid) ? json_string_value(uid) : "");
    return 0;
}

/* One Victims / MetaVictims value: {"Pods":[...],"NumPDBViolations":n}, or null (none). */
static int decode_victims(json_t *val, bool meta, const char *field, const char *node,
                          struct victims *out, struct af_error *err)
{
    json_t *pods, *pdb, *it;
    size_t i;
    int rc;

    if (!is_set(val))
        return 0;
    if (!json_is_object(val))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "%s[%s]: expected an object, got %s",
                            field, node, af__codec_type_name(val));
    pdb = get_ci(val, "NumPDBViolations");
    if (is_set(pdb) && !json_is_integer(pdb))
        return af_error_set(err, AF_ETYPE, "", 0, 0,
                            "%s[%s].NumPDBViolations: expected an integer, got %s", field, node,
                            af__codec_type_name(pdb));
    out->num_pdb_violations = is_set(pdb) ? (long long)json_integer_value(pdb) : 0;
    pods = get_ci(val, "Pods");
    if (!is_set(pods))
        return 0;
    if (!json_is_array(pods))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "%s[%s].Pods: expected an array, got %s",
                            field, node, af__codec_type_name(pods));
    out->uids = af_xcalloc(json_array_size(pods) ? json_array_size(pods) : 1, sizeof(*out->uids));
    json_array_foreach(pods, i, it) {
        char where[320];
        snprintf(where, sizeof(where), "%s[%s].Pods[%zu]", field, node, i);
        rc = victim_uid(it, meta, where, &out->uids[i], err);
        if (rc)
            return rc;
        out->n_uids = i + 1;
    }
    return 0;
}

static int decode_map(struct af_preempt_args *a, json_t *map, const char *field,
                      struct af_error *err)
{
    const char *node;
    json_t *val;
    int rc;

    if (!json_is_object(map))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "%s: expected an object or null, got %s",
                            field, af__codec_type_name(map));
    a->v = af_xcalloc(json_object_size(map) ? json_object_size(map) : 1, sizeof(*a->v));
    json_object_foreach(map, node, val) {
        struct victims *v = &a->v[a->n];
        if (!*node)
            return af_error_set(err, AF_EINVAL, "", 0, 0, "%s: empty node name", field);
        v->node = af_xstrdup(node);
        a->n++;   /* counted before decoding, so what was decoded is released */
        rc = decode_victims(val, a->meta, field, node, v, err);
        if (rc)
            return rc;
    }
    return 0;
}

int af_codec_decode_preempt_args(const char *body, size_t len, struct af_preempt_args **out,
                                 struct af_error *err)
{
    struct af_preempt_args *a = af_xcalloc(1, sizeof(*a));
    json_t *root = NULL, *pod, *full, *meta;
    int rc;

    *out = NULL;
    rc = af__codec_load_request_object(body, len, "ExtenderPreemptionArgs", &root, err);
    if (rc)
        goto fail;
    pod = get_ci(root, "Pod");
    if (!is_set(pod)) {
        rc = af_error_set(err, AF_EINVAL, "", 0, 0, "Pod: missing");
        goto fail;
    }
    rc = af__codec_pod_from_json(pod, "Pod", &a->pod, err);
    if (rc)
        goto fail;
    full = get_ci(root, "NodeNameToVictims");
    meta = get_ci(root, "NodeNameToMetaVictims");
    /* kube-scheduler sends one of the two and null for the other; an empty map counts as unset. */
    if (json_is_object(full) && !json_object_size(full))
        full = NULL;
    if (json_is_object(meta) && !json_object_size(meta))
        meta = NULL;
    if (is_set(full) && is_set(meta)) {
        rc = af_error_set(err, AF_EINVAL, "", 0, 0,
                          "NodeNameToVictims and NodeNameToMetaVictims: both set; "
                          "kube-scheduler sends one of them");
        goto fail;
    }
    if (is_set(meta)) {
        a->meta = true;
        rc = decode_map(a, meta, "NodeNameToMetaVictims", err);
    } else if (is_set(full)) {
        rc = decode_map(a, full, "NodeNameToVictims", err);
    }
    if (rc)
        goto fail;
    json_decref(root);
    *out = a;
    return 0;
fail:
    json_decref(root);
    af_preempt_args_free(a);
    return rc;
}

int af_codec_encode_preempt(const struct af_preempt_args *args, const bool *keep,
                            struct af_buf *out)
{
    bool comma = false;
    int rc = af_buf_puts(out, "{\"NodeNameToMetaVictims\":{");

    for (size_t i = 0; !rc && args && i < args->n; i++) {
        const struct victims *v = &args->v[i];
        if (!keep || !keep[i])
            continue;
        if (comma)
            rc = af_buf_add(out, ",", 1);
        comma = true;
        if (!rc)
            rc = af_buf_json_str(out, v->node);
        if (!rc)
            rc = af_buf_puts(out, ":{\"Pods\":[");
        for (size_t j = 0; !rc && j < v->n_uids; j++) {
            rc = af_buf_puts(out, j ? ",{\"UID\":" : "{\"UID\":");
            if (!rc)
                rc = af_buf_json_str(out, v->uids[j]);
            if (!rc)
                rc = af_buf_add(out, "}", 1);
        }
        if (!rc)
            rc = af_buf_printf(out, "],\"NumPDBViolations\":%lld}", v->num_pdb_violations);
    }
    if (!rc)
        rc = af_buf_puts(out, "}}");
    return rc ? AF_ETOOBIG : 0;
}
