/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mutating admission webhook on the wire: an AdmissionReview
 * (admission.k8s.io/v1) request in, the Pod it carries out as a
 * struct af_pod_info, and the AdmissionReview response. The JSONPatch that
 * rewrites the Pod for a rollout's variant is built in variant.c, the one that
 * adds node preferences in affinity.c; both are applied to a copy by the
 * RFC 6902 apply of jsonpatch.c before they are sent (codec/admission.h).
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/codec.h"

#include "codec/admission.h"
#include "codec/internal.h"
#include "accelfit/banned.h"

#define ADMISSION_API "admission.k8s.io/v1"

/* ---- warnings ------------------------------------------------------------------------------ */

void af_warnings_add(struct af_warnings *w, const char *fmt, ...)
{
    va_list ap;

    if (!w || w->n >= AF_WARNINGS_MAX)
        return;
    va_start(ap, fmt);
    vsnprintf(w->text[w->n], sizeof(w->text[w->n]), fmt, ap);
    va_end(ap);
    w->n++;
}

/* ---- decoding ------------------------------------------------------------------------------ */

void af_admission_free(struct af_admission *a)
{
    if (!a)
        return;
    af_pod_info_unref(a->pod);
    af_free(a->uid);
    af_free(a->generate_name);
    af_free(a->ns);
    json_decref(a->root);
    af_free(a);
}

const char *af_admission_uid(const struct af_admission *a)
{
    return a ? a->uid : NULL;
}

bool af_admission_dry_run(const struct af_admission *a)
{
    return a && a->dry_run;
}

const struct af_pod_info *af_admission_pod(const struct af_admission *a)
{
    return a ? a->pod : NULL;
}

const char *af_admission_generate_name(const struct af_admission *a)
{
    return a ? a->generate_name : NULL;
}

/* A GroupVersionKind / GroupVersionResource: `field` of `want` (group "" and version "v1"). */
static int check_gv(json_t *req, const char *name, const char *field, const char *want,
                    bool *supported, struct af_error *err)
{
    json_t *v = af__codec_get(req, name);
    const char *group, *version, *what;

    if (af__codec_unset(v))
        return af_error_set(err, AF_EINVAL, "", 0, 0, "request.%s: missing", name);
    if (!json_is_object(v))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "request.%s: expected an object, got %s",
                            name, af__codec_type_name(v));
    group = af__codec_get_str(v, "group");
    version = af__codec_get_str(v, "version");
    what = af__codec_get_str(v, field);
    if (!version || !what)
        return af_error_set(err, AF_EINVAL, "", 0, 0, "request.%s.%s: missing", name,
                            !version ? "version" : field);
    if ((group && *group) || strcmp(version, "v1") || strcmp(what, want)) {
        *supported = false;
        return af_error_set(err, AF_EUNSUPPORTED, "", 0, 0,
                            "request.%s is %.60s%s%.20s/%.60s, not v1/%s: accelfit mutates only "
                            "Pod CREATE requests",
                            name, group ? group : "", group && *group ? "/" : "", version, what,
                            want);
    }
    return 0;
}

/*
 * A Pod object to a record. af__codec_pod_from_json wants a name and takes "default" for a
 * missing namespace: a shallow copy of the object carries request.namespace and a
 * stand-in name (the object itself is not changed), and a pod without a name comes out
 * with the name "" (rollout_state's anonymous unit: one of its own, unless it has a Job
 * or pod group).
 */
int af__codec_admission_pod(json_t *obj, const char *ns, const char *where,
                           struct af_pod_info **out, struct af_error *err)
{
    json_t *meta = af__codec_get(obj, "metadata"), *copy = json_copy(obj), *mcopy = json_copy(meta);
    const char *name = af__codec_get_str(meta, "name"), *have_ns = af__codec_get_str(meta, "namespace");
    bool anonymous = !name || !*name;
    int rc;

    af_assert(copy && mcopy);
    if (anonymous)
        json_object_set_new(mcopy, "name", json_string("anonymous"));
    if ((!have_ns || !*have_ns) && ns)
        json_object_set_new(mcopy, "namespace", json_string(ns));
    json_object_set_new(copy, "metadata", mcopy);
    rc = af__codec_pod_from_json(copy, where, out, err);
    json_decref(copy);
    if (!rc && anonymous) {
        af_free((*out)->name);
        (*out)->name = af_xstrdup("");
    }
    return rc;
}

/*
 * The Pod of the review: its namespace is request.namespace when the object names none; a
 * pod with only generateName (named by the API server after admission) gets the name "".
 */
static int decode_pod(struct af_admission *a, const char *req_ns, const char *req_name,
                      struct af_error *err)
{
    json_t *meta = af__codec_get(a->object, "metadata");
    const char *name, *ns, *gen;

    if (!json_is_object(meta))
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "request.object.metadata: expected an object, got %s",
                            af__codec_type_name(meta));
    name = af__codec_get_str(meta, "name");
    ns = af__codec_get_str(meta, "namespace");
    gen = af__codec_get_str(meta, "generateName");
    if (ns && *ns && req_ns && *req_ns && strcmp(ns, req_ns))
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "request.object.metadata.namespace '%.63s' differs from "
                            "request.namespace '%.63s'",
                            ns, req_ns);
    if ((!ns || !*ns) && (!req_ns || !*req_ns))
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "request.namespace: missing (and the Pod names none)");
    if (name && *name && req_name && *req_name && strcmp(name, req_name))
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "request.object.metadata.name '%.63s' differs from request.name "
                            "'%.63s'",
                            name, req_name);
    if ((!name || !*name) && (!gen || !*gen))
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "request.object.metadata: neither name nor generateName is set");
    if (!name || !*name)
        a->generate_name = af_xstrdup(gen);
    a->ns = af_xstrdup(ns && *ns ? ns : req_ns);
    return af__codec_admission_pod(a->object, a->ns, "request.object", &a->pod, err);
}

int af_codec_decode_admission(const char *body, size_t len, struct af_admission **out,
                              struct af_error *err)
{
    struct af_admission *a;
    json_t *req, *v, *obj;
    const char *api, *kind, *uid, *op, *sub;
    bool supported = true;
    int rc;

    *out = NULL;
    a = af_xcalloc(1, sizeof(*a));
    rc = af__codec_load_request_object(body, len, "AdmissionReview", &a->root, err);
    if (rc)
        goto fail;
    api = af__codec_get_str(a->root, "apiVersion");
    kind = af__codec_get_str(a->root, "kind");
    if (!kind || strcmp(kind, "AdmissionReview")) {
        rc = af_error_set(err, AF_EINVAL, "", 0, 0, "kind: expected AdmissionReview, got %s%.60s%s",
                          kind ? "'" : "", kind ? kind : "nothing", kind ? "'" : "");
        goto fail;
    }
    if (!api || strcmp(api, ADMISSION_API)) {
        rc = af_error_set(err, AF_EINVAL, "", 0, 0,
                          "apiVersion: expected " ADMISSION_API " (admissionReviewVersions: "
                          "[v1]), got %s%.60s%s",
                          api ? "'" : "", api ? api : "nothing", api ? "'" : "");
        goto fail;
    }
    req = af__codec_get(a->root, "request");
    if (!json_is_object(req)) {
        rc = af_error_set(err, af__codec_unset(req) ? AF_EINVAL : AF_ETYPE, "", 0, 0,
                          "request: expected an object, got %s", af__codec_type_name(req));
        goto fail;
    }
    uid = af__codec_get_str(req, "uid");
    if (!uid || !*uid) {
        rc = af_error_set(err, AF_EINVAL, "", 0, 0, "request.uid: missing");
        goto fail;
    }
    if (strlen(uid) > 128) {
        rc = af_error_set(err, AF_EINVAL, "", 0, 0, "request.uid: longer than 128 bytes");
        goto fail;
    }
    a->uid = af_xstrdup(uid);
    v = af__codec_get(req, "dryRun");
    if (!af__codec_unset(v) && !json_is_boolean(v)) {
        rc = af_error_set(err, AF_ETYPE, "", 0, 0, "request.dryRun: expected a boolean, got %s",
                          af__codec_type_name(v));
        goto fail;
    }
    a->dry_run = json_is_true(v);

    /* From here on the review is well formed: what is not a Pod CREATE is answered. */
    rc = check_gv(req, "kind", "kind", "Pod", &supported, err);
    if (!rc)
        rc = check_gv(req, "resource", "resource", "pods", &supported, err);
    if (rc)
        goto fail_or_unsupported;
    sub = af__codec_get_str(req, "subResource");
    if (sub && *sub) {
        supported = false;
        rc = af_error_set(err, AF_EUNSUPPORTED, "", 0, 0,
                          "request.subResource is '%.40s': accelfit mutates only Pod CREATE "
                          "requests",
                          sub);
        goto fail_or_unsupported;
    }
    op = af__codec_get_str(req, "operation");
    if (!op) {
        rc = af_error_set(err, AF_EINVAL, "", 0, 0, "request.operation: missing");
        goto fail;
    }
    if (strcmp(op, "CREATE")) {
        supported = false;
        rc = af_error_set(err, AF_EUNSUPPORTED, "", 0, 0,
                          "request.operation is %.20s: accelfit mutates only Pod CREATE requests",
                          op);
        goto fail_or_unsupported;
    }
    obj = af__codec_get(req, "object");
    if (!json_is_object(obj)) {
        rc = af_error_set(err, af__codec_unset(obj) ? AF_EINVAL : AF_ETYPE, "", 0, 0,
                          "request.object: expected an object (the Pod), got %s",
                          af__codec_type_name(obj));
        goto fail;
    }
    kind = af__codec_get_str(obj, "kind");
    api = af__codec_get_str(obj, "apiVersion");
    if ((kind && strcmp(kind, "Pod")) || (api && strcmp(api, "v1"))) {
        rc = af_error_set(err, AF_EINVAL, "", 0, 0,
                          "request.object: expected a v1 Pod, got %.40s %.40s", api ? api : "-",
                          kind ? kind : "-");
        goto fail;
    }
    a->object = obj;
    rc = decode_pod(a, af__codec_get_str(req, "namespace"), af__codec_get_str(req, "name"), err);
    if (rc)
        goto fail;
    *out = a;
    return 0;

fail_or_unsupported:
    if (!supported && rc == AF_EUNSUPPORTED) {
        a->object = NULL;
        *out = a;
        return rc;
    }
fail:
    af_admission_free(a);
    return rc;
}

/* ---- the response ---------------------------------------------------------------------------- */

int af_codec_encode_admission(const char *uid, const char *patch, size_t patch_len,
                              const struct af_warnings *w, struct af_buf *out)
{
    size_t start = out->len;
    struct af_jw jw = AF_JW_INIT(out);
    int rc;

    af_jw_open(&jw, NULL, '{');
    af_jw_str(&jw, "apiVersion", ADMISSION_API);
    af_jw_str(&jw, "kind", "AdmissionReview");
    af_jw_open(&jw, "response", '{');
    af_jw_str(&jw, "uid", uid ? uid : "");
    af_jw_bool(&jw, "allowed", true);
    if (patch && patch_len) {
        struct af_buf *b;
        af_jw_str(&jw, "patchType", "JSONPatch");
        b = af_jw_value(&jw, "patch");
        if (b) {   /* a string of base64, which needs no escaping */
            rc = af_buf_puts(b, "\"");
            if (!rc)
                rc = af_buf_base64(b, patch, patch_len);
            if (!rc)
                rc = af_buf_puts(b, "\"");
            af_jw_done(&jw, rc);
        }
    }
    if (w && w->n) {
        af_jw_open(&jw, "warnings", '[');
        for (size_t i = 0; i < w->n && i < AF_WARNINGS_MAX; i++)
            af_jw_str(&jw, NULL, w->text[i]);
        af_jw_close(&jw, ']');
    }
    af_jw_close(&jw, '}');
    af_jw_close(&jw, '}');
    rc = af_jw_error(&jw);
    if (rc) {
        /* Leave nothing half-written. */
        out->len = start;
        if (out->buf)
            out->buf[start] = '\0';
    }
    return rc;
}

