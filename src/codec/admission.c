/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The mutating admission webhook on the wire: an AdmissionReview
 * (admission.k8s.io/v1) request in, the Pod it carries out as a
 * struct af_pod_info, a JSONPatch (RFC 6902) that rewrites the Pod for a
 * rollout's variant, and the AdmissionReview response.
 *
 * A patch that does not apply fails the pod's creation even under
 * failurePolicy: Ignore, and so does a patched pod the API server finds
 * invalid (an extended resource in requests but not in limits, or unequal). So
 * every patch is built from the object exactly as received: a parent that is
 * absent is created with one `add` of the whole object or array, members are
 * set with `add` (which replaces an existing member), `replace` and `remove`
 * are used only on what is there, and map keys are escaped (~0, ~1). The patch
 * is then applied to a copy of the object by the RFC 6902 apply below and the
 * result checked for what the API server would refuse; when anything is
 * doubtful nothing is patched and a warning says why (the pod is created as
 * written, which is always allowed).
 */
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/prefer.h"
#include "accelfit/rollout.h"

#include "codec/internal.h"
#include "accelfit/banned.h"

#define ADMISSION_API "admission.k8s.io/v1"

struct af_admission {
    json_t *root;              /* the whole request */
    json_t *object;            /* request.object, borrowed from root; NULL when unsupported */
    char *uid;
    char *generate_name;       /* metadata.generateName of a pod without a name, else NULL */
    char *ns;                  /* the pod's namespace */
    bool dry_run;
    struct af_pod_info *pod;   /* NULL when unsupported */
};

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

/* ---- small helpers ------------------------------------------------------------------------- */


/* Absent or JSON null: what Go's encoder writes for an unset field. */
static bool unset(json_t *v)
{
    return !v || json_is_null(v);
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

    if (unset(v))
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
static int pod_from_object(json_t *obj, const char *ns, const char *where,
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
    return pod_from_object(a->object, a->ns, "request.object", &a->pod, err);
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
        rc = af_error_set(err, unset(req) ? AF_EINVAL : AF_ETYPE, "", 0, 0,
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
    if (!unset(v) && !json_is_boolean(v)) {
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
        rc = af_error_set(err, unset(obj) ? AF_EINVAL : AF_ETYPE, "", 0, 0,
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

/* ---- JSON Pointer and the RFC 6902 apply ---------------------------------------------------- */

/* Appends "/" and `token` escaped as RFC 6901 wants ('~' as ~0, '/' as ~1). */
static void ptr_push(struct af_buf *b, const char *token)
{
    int rc = af_buf_add(b, "/", 1);

    for (const char *p = token; !rc && *p; p++) {
        if (*p == '~')
            rc = af_buf_add(b, "~0", 2);
        else if (*p == '/')
            rc = af_buf_add(b, "~1", 2);
        else
            rc = af_buf_add(b, p, 1);
    }
    af_assert(!rc);
}

/* "/spec/containers/0" and the like, plus escaped keys: a new string. */
static char *ptr_join(const char *base, const char *key)
{
    struct af_buf b = AF_BUF_INIT(0);

    if (af_buf_puts(&b, base))
        af_assert(!"unbounded buffer refused output");
    ptr_push(&b, key);
    return af_buf_detach(&b, NULL);
}

/* The next reference token of `*p` (after its '/'), unescaped, in `tok`; false when malformed. */
static bool ptr_next(const char **p, struct af_buf *tok)
{
    const char *s = *p;

    af_buf_reset(tok);
    if (*s != '/')
        return false;
    s++;
    while (*s && *s != '/') {
        char c = *s++;
        if (c == '~') {
            if (*s == '0')
                c = '~';
            else if (*s == '1')
                c = '/';
            else
                return false;
            s++;
        }
        if (af_buf_add(tok, &c, 1))
            return false;
    }
    if (af_buf_add(tok, "", 0))
        return false;
    *p = s;
    return true;
}

/* An array index as RFC 6901 spells it (no sign, no leading zero); -1 when not one. */
static long ptr_index(const char *t)
{
    long v = 0;

    if (!*t || (t[0] == '0' && t[1]) || strlen(t) > 9)
        return -1;
    for (const char *p = t; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
    }
    return v;
}

/*
 * Applies one operation (add, replace or remove) to `doc` in place, with RFC 6902's
 * rules: the parent must exist; add on an object sets the member, on an array inserts
 * at an index <= size or appends at "-"; replace and remove need the target to exist.
 * Returns 0 or AF_EINVAL with `why` filled.
 */
static int apply_op(json_t *doc, json_t *op, char *why, size_t whylen)
{
    const char *name = af__codec_get_str(op, "op"), *path = af__codec_get_str(op, "path"), *p;
    json_t *value = af__codec_get(op, "value"), *cur = doc;
    struct af_buf tok = AF_BUF_INIT(4096);
    const char *t;
    int rc = AF_EINVAL;

    if (!name || !path || !*path) {
        snprintf(why, whylen, "operation without op or path");
        goto out;
    }
    if (strcmp(name, "remove") && !value) {
        snprintf(why, whylen, "%s %s: no value", name, path);
        goto out;
    }
    if (strcmp(name, "add") && strcmp(name, "replace") && strcmp(name, "remove")) {
        snprintf(why, whylen, "unsupported op %s", name);
        goto out;
    }
    p = path;
    for (;;) {
        json_t *next;
        long idx;
        bool last;
        if (!ptr_next(&p, &tok)) {
            snprintf(why, whylen, "%s %s: malformed pointer", name, path);
            goto out;
        }
        last = *p == '\0';
        t = tok.buf ? tok.buf : "";
        if (json_is_object(cur)) {
            next = json_object_get(cur, t);
            if (last) {
                if (!next && strcmp(name, "add")) {
                    snprintf(why, whylen, "%s %s: no such member", name, path);
                    goto out;
                }
                if (!strcmp(name, "remove"))
                    json_object_del(cur, t);
                else
                    json_object_set_new(cur, t, json_deep_copy(value));
                rc = 0;
                goto out;
            }
        } else if (json_is_array(cur)) {
            size_t size = json_array_size(cur);
            idx = ptr_index(t);
            if (last && !strcmp(name, "add") && !strcmp(t, "-")) {
                json_array_append_new(cur, json_deep_copy(value));
                rc = 0;
                goto out;
            }
            if (idx < 0 || (size_t)idx > size ||
                ((size_t)idx == size && !(last && !strcmp(name, "add")))) {
                snprintf(why, whylen, "%s %s: no element '%.20s'", name, path, t);
                goto out;
            }
            if (last) {
                if (!strcmp(name, "add"))
                    json_array_insert_new(cur, (size_t)idx, json_deep_copy(value));
                else if (!strcmp(name, "replace"))
                    json_array_set_new(cur, (size_t)idx, json_deep_copy(value));
                else
                    json_array_remove(cur, (size_t)idx);
                rc = 0;
                goto out;
            }
            next = json_array_get(cur, (size_t)idx);
        } else {
            snprintf(why, whylen, "%s %s: parent is not an object or array", name, path);
            goto out;
        }
        if (!next) {
            snprintf(why, whylen, "%s %s: parent path missing", name, path);
            goto out;
        }
        cur = next;
    }
out:
    af_buf_release(&tok);
    return rc;
}

/* ---- what a variant changes ------------------------------------------------------------------ */

/* The accelerator kind of one tracked resource, or NONE (cpu, memory, pods). */
static enum af_accel_kind res_kind(int r)
{
    switch (r) {
    case AF_RES_GPU:
    case AF_RES_GPU_SHARED:
    case AF_RES_MIG:
        return AF_ACCEL_GPU;
    case AF_RES_NEURON:
    case AF_RES_NEURONDEVICE:
    case AF_RES_NEURONCORE:
        return AF_ACCEL_NEURON;
    case AF_RES_AMD_GPU:
        return AF_ACCEL_AMD;
    default:
        return AF_ACCEL_NONE;
    }
}

/* Accelerator kinds (bit 1u << kind) of a set of classes. */
static unsigned kinds_of(uint32_t classes)
{
    unsigned k = 0;

    for (int c = 0; c < AF_CLASS__COUNT; c++)
        if ((classes & (1u << c)) && af_class_kind((enum af_class)c) != AF_ACCEL_NONE)
            k |= 1u << af_class_kind((enum af_class)c);
    return k;
}

static bool is_source_key(const char *key, unsigned kinds)
{
    int r = af_res_parse(key);
    enum af_accel_kind k = r < 0 ? AF_ACCEL_NONE : res_kind(r);

    return k != AF_ACCEL_NONE && (kinds & (1u << k));
}

/* A quantity that asks for something: a string or number above zero. */
static bool positive(json_t *v)
{
    int64_t q;

    if (json_is_integer(v))
        return json_integer_value(v) > 0;
    if (json_is_real(v))
        return json_real_value(v) > 0;
    return af__codec_str(v) && !af_parse_quantity(af__codec_str(v), 1, &q) && q > 0;
}

/* The variant's amount of `key`, or NULL. */
static const char *variant_res(const struct af_variant *v, const char *key)
{
    for (size_t i = 0; i < v->n_resources; i++)
        if (!strcmp(v->resources[i].key, key))
            return v->resources[i].value;
    return NULL;
}

/* True when container `c` requests (or limits) a source accelerator resource. */
static bool requests_source(json_t *c, unsigned kinds)
{
    static const char *const maps[] = {"requests", "limits"};
    json_t *res = af__codec_get(c, "resources");

    for (size_t m = 0; m < AF_ARRAY_SIZE(maps); m++) {
        const char *key;
        json_t *v;
        json_t *map = af__codec_get(res, maps[m]);
        if (!json_is_object(map))
            continue;
        json_object_foreach(map, key, v) {
            if (is_source_key(key, kinds) && positive(v))
                return true;
        }
    }
    return false;
}

/* A string jansson can hold (valid UTF-8); a NULL `s` is fine. */
static bool utf8_ok(const char *s)
{
    json_t *j;

    if (!s)
        return true;
    j = json_string(s);
    json_decref(j);
    return j != NULL;
}

/* A toleration the API server accepts: operator Exists or Equal (the default); a key unless
 * Exists (which then tolerates every taint); no value with Exists; a known effect or none. */
static bool toleration_ok(const struct af_toleration *t)
{
    bool exists = t->op && !strcmp(t->op, "Exists");

    if (t->op && !exists && strcmp(t->op, "Equal"))
        return false;
    if (t->key ? !af_k8s_qualified_name(t->key) : !exists)
        return false;
    if (exists && t->value && *t->value)
        return false;
    if (t->effect && *t->effect && strcmp(t->effect, "NoSchedule") &&
        strcmp(t->effect, "PreferNoSchedule") && strcmp(t->effect, "NoExecute"))
        return false;
    return utf8_ok(t->value);
}

/* The template the variant swaps `tmpl` for, or NULL. */
static const char *variant_template(const struct af_variant *v, const char *tmpl)
{
    for (size_t i = 0; tmpl && i < v->n_claim_templates; i++)
        if (!strcmp(v->claim_templates[i].key, tmpl))
            return v->claim_templates[i].value;
    return NULL;
}

/* Checks a variant before any of it is used. Returns 0, or AF_EINVAL with `why`. */
static int check_variant(const struct af_variant *v, char *why, size_t whylen)
{
    if (v->n_resources == 0 && v->n_claim_templates == 0) {
        snprintf(why, whylen, "the variant names no resources and no claim templates");
        return AF_EINVAL;
    }
    for (size_t i = 0; i < v->n_claim_templates; i++) {
        const char *k = v->claim_templates[i].key, *val = v->claim_templates[i].value;
        if (!k || !val || !af_k8s_dns_subdomain(k, strlen(k)) ||
            !af_k8s_dns_subdomain(val, strlen(val))) {
            snprintf(why, whylen, "the variant's claim template '%.80s' is not a template name",
                     val ? val : "");
            return AF_EINVAL;
        }
    }
    for (size_t i = 0; i < v->n_resources; i++) {
        const char *k = v->resources[i].key, *val = v->resources[i].value;
        int r = k ? af_res_parse(k) : -1;
        int64_t n;
        if (r < 0 || res_kind(r) == AF_ACCEL_NONE || r == AF_RES_MIG) {
            snprintf(why, whylen, "the variant's resource '%.80s' is not an accelerator resource "
                     "accelfit knows", k ? k : "");
            return AF_EINVAL;
        }
        if (!val || af_parse_int64(val, 1, 1000000, &n)) {
            snprintf(why, whylen, "the variant's amount of %.80s, '%.40s', is not a whole number "
                     "of at least 1", k, val ? val : "");
            return AF_EINVAL;
        }
    }
    for (size_t i = 0; i < v->n_images; i++) {
        const char *img = v->images[i].value;
        if (!v->images[i].key || !*v->images[i].key || !img || !*img ||
            strpbrk(img, " \t\r\n") || !utf8_ok(img) || !utf8_ok(v->images[i].key)) {
            snprintf(why, whylen, "the variant's image for container '%.60s' is not an image",
                     v->images[i].key ? v->images[i].key : "");
            return AF_EINVAL;
        }
    }
    for (size_t i = 0; i < v->n_env; i++)
        if (!af_k8s_env_name(v->env[i].key) || !v->env[i].value || !utf8_ok(v->env[i].value)) {
            snprintf(why, whylen, "the variant's env '%.60s' is not a valid variable",
                     v->env[i].key ? v->env[i].key : "");
            return AF_EINVAL;
        }
    for (size_t i = 0; i < v->n_tolerations; i++)
        if (!toleration_ok(&v->tolerations[i])) {
            snprintf(why, whylen, "the variant's toleration %zu (key '%.60s') is not valid", i + 1,
                     v->tolerations[i].key ? v->tolerations[i].key : "");
            return AF_EINVAL;
        }
    for (size_t i = 0; i < v->n_annotations; i++)
        if (!af_k8s_qualified_name(v->annotations[i].key) || !v->annotations[i].value ||
            !utf8_ok(v->annotations[i].value)) {
            snprintf(why, whylen, "the variant's annotation '%.60s' is not valid",
                     v->annotations[i].key ? v->annotations[i].key : "");
            return AF_EINVAL;
        }
    return 0;
}

static json_t *toleration_json(const struct af_toleration *t)
{
    json_t *o = json_object();

    if (t->key)
        json_object_set_new(o, "key", json_string(t->key));
    json_object_set_new(o, "operator", json_string(t->op ? t->op : "Equal"));
    if (t->value)
        json_object_set_new(o, "value", json_string(t->value));
    if (t->effect && *t->effect)
        json_object_set_new(o, "effect", json_string(t->effect));
    return o;
}

/* Whether `have` (from the pod) tolerates exactly what `t` does. */
static bool toleration_same(json_t *have, const struct af_toleration *t)
{
    const char *k = af__codec_get_str(have, "key"), *op = af__codec_get_str(have, "operator"),
               *v = af__codec_get_str(have, "value"), *e = af__codec_get_str(have, "effect");
    const char *top = t->op ? t->op : "Equal";

    return !strcmp(k ? k : "", t->key ? t->key : "") && !strcmp(op && *op ? op : "Equal", top) &&
           !strcmp(v ? v : "", t->value ? t->value : "") &&
           !strcmp(e ? e : "", t->effect ? t->effect : "") && unset(af__codec_get(have, "tolerationSeconds"));
}

/* ---- building the patch ---------------------------------------------------------------------- */

struct builder {
    json_t *obj;                       /* the object as received (borrowed) */
    const struct af_mutation *m;
    unsigned kinds;                    /* accelerator kinds of the source classes */
    json_t *ops;
    /* DRA claims whose template was swapped: the pod's name for the claim -> the target
     * template (an object used as a set) */
    json_t *swapped;
    /* What the check looks for afterwards. Per container list: which were rewritten (RW_*)
     * and which image each was given. */
    unsigned char *rewritten[2];
    const char **image[2];
    size_t n[2];
    bool *image_used;                  /* per variant image */
};

static const char *const lists[2] = {"containers", "initContainers"};

/* Why a container is rewritten: it requests a source accelerator resource (replaced by the
 * variant's), it names a claim whose template is swapped (its resources stay), or both. */
enum { RW_RES = 1 << 0, RW_CLAIM = 1 << 1 };

static void op_add(json_t *ops, const char *op, const char *path, json_t *value)
{
    json_t *o = json_object();

    json_object_set_new(o, "op", json_string(op));
    json_object_set_new(o, "path", json_string(path));
    if (value)
        json_object_set_new(o, "value", value);
    json_array_append_new(ops, o);
}

/* The image the variant gives container `name`: its own entry, else "*" when `star` applies. */
static const char *image_for(struct builder *b, const char *name, bool star)
{
    const struct af_variant *v = b->m->variant;
    const char *any = NULL;

    for (size_t i = 0; i < v->n_images; i++) {
        if (!strcmp(v->images[i].key, name)) {
            b->image_used[i] = true;
            return v->images[i].value;
        }
        if (!strcmp(v->images[i].key, "*")) {
            if (star)
                b->image_used[i] = true;
            any = v->images[i].value;
        }
    }
    return star ? any : NULL;
}

/* Resource maps of a rewritten container: the source's accelerator keys out, the variant's in. */
static void patch_resources(struct builder *b, json_t *c, const char *base)
{
    static const char *const maps[] = {"requests", "limits"};
    const struct af_variant *v = b->m->variant;
    json_t *res = af__codec_get(c, "resources");
    char *rbase = af_xasprintf("%s/resources", base);

    for (size_t m = 0; m < AF_ARRAY_SIZE(maps); m++) {
        json_t *map = af__codec_get(res, maps[m]);
        char *mpath = ptr_join(rbase, maps[m]);
        if (json_is_object(map)) {
            const char *key;
            json_t *val;
            json_object_foreach(map, key, val) {
                if (is_source_key(key, b->kinds) && !variant_res(v, key)) {
                    char *p = ptr_join(mpath, key);
                    op_add(b->ops, "remove", p, NULL);
                    af_free(p);
                }
            }
            for (size_t i = 0; i < v->n_resources; i++) {
                char *p = ptr_join(mpath, v->resources[i].key);
                json_t *have = json_object_get(map, v->resources[i].key);
                op_add(b->ops, have ? "replace" : "add", p, json_string(v->resources[i].value));
                af_free(p);
            }
        } else {
            /* No map (or null): one add of the whole map. `resources` is an object, since
             * the container requests an accelerator in it. */
            json_t *nm = json_object();
            for (size_t i = 0; i < v->n_resources; i++)
                json_object_set_new(nm, v->resources[i].key, json_string(v->resources[i].value));
            op_add(b->ops, "add", mpath, nm);
        }
        af_free(mpath);
    }
    af_free(rbase);
}

static void patch_env(struct builder *b, json_t *c, const char *base)
{
    const struct af_variant *v = b->m->variant;
    json_t *env = af__codec_get(c, "env");
    char *epath = af_xasprintf("%s/env", base);

    if (v->n_env == 0)
        goto out;
    if (!json_is_array(env)) {
        json_t *arr = json_array();
        for (size_t i = 0; i < v->n_env; i++) {
            json_t *e = json_object();
            json_object_set_new(e, "name", json_string(v->env[i].key));
            json_object_set_new(e, "value", json_string(v->env[i].value));
            json_array_append_new(arr, e);
        }
        op_add(b->ops, "add", epath, arr);
        goto out;
    }
    for (size_t i = 0; i < v->n_env; i++) {
        bool found = false;
        size_t k;
        json_t *e;
        json_array_foreach(env, k, e) {
            const char *name = af__codec_get_str(e, "name");
            if (name && !strcmp(name, v->env[i].key)) {
                char *p = af_xasprintf("%s/%zu", epath, k);
                json_t *ne = json_object();
                json_object_set_new(ne, "name", json_string(v->env[i].key));
                json_object_set_new(ne, "value", json_string(v->env[i].value));
                op_add(b->ops, "replace", p, ne);
                af_free(p);
                found = true;
            }
        }
        if (!found) {
            char *p = af_xasprintf("%s/-", epath);
            json_t *ne = json_object();
            json_object_set_new(ne, "name", json_string(v->env[i].key));
            json_object_set_new(ne, "value", json_string(v->env[i].value));
            op_add(b->ops, "add", p, ne);
            af_free(p);
        }
    }
out:
    af_free(epath);
}

/*
 * spec.resourceClaims: a claim made from a template the variant swaps is made from the
 * variant's template instead (resourceClaimTemplateName, or source.resourceClaimTemplateName
 * in the v1alpha2 shape of 1.26 and 1.27). The pod's name for the claim stays, so the
 * containers that name it (resources.claims) are left as they are. Returns 0 or AF_EINVAL.
 */
static int patch_claims(struct builder *b, json_t *spec, char *why, size_t whylen)
{
    const struct af_variant *v = b->m->variant;
    json_t *arr = af__codec_get(spec, "resourceClaims"), *x;
    size_t i;

    if (!v->n_claim_templates || unset(arr))
        return 0;
    if (!json_is_array(arr)) {
        snprintf(why, whylen, "spec.resourceClaims is not an array");
        return AF_EINVAL;
    }
    json_array_foreach(arr, i, x) {
        json_t *src = af__codec_get(x, "source");
        json_t *holder = json_is_object(src) ? src : x;
        const char *name = af__codec_get_str(x, "name");
        const char *tmpl = af__codec_get_str(holder, "resourceClaimTemplateName"), *to;
        char *p;
        if (!json_is_object(x) || !name || !*name) {
            snprintf(why, whylen, "spec.resourceClaims[%zu] has no name", i);
            return AF_EINVAL;
        }
        to = variant_template(v, tmpl);
        if (!to)
            continue;
        p = af_xasprintf("/spec/resourceClaims/%zu%s/resourceClaimTemplateName", i,
                         holder == src ? "/source" : "");
        op_add(b->ops, "replace", p, json_string(to));
        af_free(p);
        json_object_set_new(b->swapped, name, json_string(to));
    }
    return 0;
}

/* True when container `c` names (resources.claims) a claim whose template is swapped. */
static bool names_swapped(struct builder *b, json_t *c)
{
    json_t *claims = af__codec_get(af__codec_get(c, "resources"), "claims"), *x;
    size_t i;

    json_array_foreach(json_is_array(claims) ? claims : NULL, i, x) {
        const char *name = af__codec_get_str(x, "name");
        if (name && json_object_get(b->swapped, name))
            return true;
    }
    return false;
}

/* Containers and init containers: images, resources, env. Returns 0 or AF_EINVAL (`why`). */
static int patch_containers(struct builder *b, json_t *spec, char *why, size_t whylen)
{
    const struct af_variant *v = b->m->variant;
    size_t rewritten = 0;

    if (!json_is_array(af__codec_get(spec, "containers")) || !json_array_size(af__codec_get(spec, "containers"))) {
        snprintf(why, whylen, "the pod has no containers");
        return AF_EINVAL;
    }
    for (int l = 0; l < 2; l++) {
        json_t *arr = af__codec_get(spec, lists[l]), *c;
        size_t i;
        if (unset(arr))
            continue;
        if (!json_is_array(arr)) {
            snprintf(why, whylen, "spec.%s is not an array", lists[l]);
            return AF_EINVAL;
        }
        b->n[l] = json_array_size(arr);
        b->rewritten[l] = af_xcalloc(b->n[l] + 1, sizeof(**b->rewritten));
        b->image[l] = af_xcalloc(b->n[l] + 1, sizeof(char *));
        json_array_foreach(arr, i, c) {
            const char *name = af__codec_get_str(c, "name"), *img;
            char *base;
            unsigned rw;
            if (!json_is_object(c) || !name || !*name) {
                snprintf(why, whylen, "spec.%s[%zu] has no name", lists[l], i);
                return AF_EINVAL;
            }
            /* a variant without resources (claim templates only) leaves device-plugin
             * requests alone: it has nothing to put in their place */
            rw = (v->n_resources && requests_source(c, b->kinds) ? RW_RES : 0) |
                 (names_swapped(b, c) ? RW_CLAIM : 0);
            /* "*" means every app container, and the init containers that are rewritten
             * (a model-download init container keeps its image). */
            img = image_for(b, name, l == 0 || rw);
            base = af_xasprintf("/spec/%s/%zu", lists[l], i);
            if (img) {
                const char *have = af__codec_get_str(c, "image");
                b->image[l][i] = img;
                if (!have || strcmp(have, img)) {
                    char *p = af_xasprintf("%s/image", base);
                    op_add(b->ops, json_object_get(c, "image") ? "replace" : "add", p,
                           json_string(img));
                    af_free(p);
                }
            }
            if (rw) {
                b->rewritten[l][i] = (unsigned char)rw;
                rewritten++;
                if (rw & RW_RES)
                    patch_resources(b, c, base);
                patch_env(b, c, base);
            }
            af_free(base);
        }
    }
    if (!rewritten && !json_object_size(b->swapped)) {
        snprintf(why, whylen, "%s",
                 !v->n_claim_templates
                     ? "no container requests an accelerator of the rollout's source classes, "
                       "so there is nothing for the variant to replace"
                 : !v->n_resources
                     ? "no claim of the pod is made from a template the variant swaps, so "
                       "there is nothing for the variant to replace"
                     : "no container requests an accelerator of the rollout's source classes "
                       "and no claim of the pod is made from a template the variant swaps, so "
                       "there is nothing for the variant to replace");
        return AF_EINVAL;
    }
    for (size_t i = 0; i < v->n_images; i++)
        if (!b->image_used[i] && strcmp(v->images[i].key, "*")) {
            snprintf(why, whylen, "the variant has an image for container '%.60s', which the pod "
                     "does not have", v->images[i].key);
            return AF_EINVAL;
        }
    return 0;
}

static void patch_tolerations(struct builder *b, json_t *spec)
{
    const struct af_variant *v = b->m->variant;
    json_t *tol = af__codec_get(spec, "tolerations"), *fresh = NULL;

    for (size_t i = 0; i < v->n_tolerations; i++) {
        bool have = false;
        size_t k;
        json_t *t;
        json_array_foreach(json_is_array(tol) ? tol : NULL, k, t) {
            if (toleration_same(t, &v->tolerations[i]))
                have = true;
        }
        if (have)
            continue;
        if (json_is_array(tol)) {
            op_add(b->ops, "add", "/spec/tolerations/-", toleration_json(&v->tolerations[i]));
        } else {
            if (!fresh)
                fresh = json_array();
            json_array_append_new(fresh, toleration_json(&v->tolerations[i]));
        }
    }
    if (fresh)
        op_add(b->ops, "add", "/spec/tolerations", fresh);
}

static const char *side_name(enum af_rollout_side s)
{
    return s == AF_SIDE_TARGET ? "target" : s == AF_SIDE_SOURCE ? "source" : "none";
}

static bool ours(const char *key)
{
    return !strcmp(key, AF_ROLLOUT_ANNOTATION) || !strcmp(key, AF_ROLLOUT_SIDE_ANNOTATION) ||
           !strcmp(key, AF_ROLLOUT_CLAIM_ANNOTATION);
}

static void patch_annotations(struct builder *b, json_t *meta)
{
    const struct af_variant *v = b->m->variant;
    json_t *anns = af__codec_get(meta, "annotations");
    json_t *want = json_object();
    const char *key;
    json_t *val;

    for (size_t i = 0; v && i < v->n_annotations; i++)
        if (!ours(v->annotations[i].key))
            json_object_set_new(want, v->annotations[i].key, json_string(v->annotations[i].value));
    json_object_set_new(want, AF_ROLLOUT_ANNOTATION, json_string(b->m->rollout));
    json_object_set_new(want, AF_ROLLOUT_SIDE_ANNOTATION,
                        json_string(side_name(b->m->side)));
    if (b->m->claim)
        json_object_set_new(want, AF_ROLLOUT_CLAIM_ANNOTATION, json_string(b->m->claim));
    if (!json_is_object(anns)) {
        op_add(b->ops, "add", "/metadata/annotations", want);
        return;
    }
    json_object_foreach(want, key, val) {
        const char *have = af__codec_get_str(anns, key);
        char *p;
        if (have && !strcmp(have, json_string_value(val)))
            continue;
        p = ptr_join("/metadata/annotations", key);
        op_add(b->ops, json_object_get(anns, key) ? "replace" : "add", p, json_incref(val));
        af_free(p);
    }
    json_decref(want);
}

/* ---- checking the result --------------------------------------------------------------------- */

/* An extended resource, as the API server tells them from native ones (a name with a '/'
 * that does not hold "kubernetes.io/"): it must be in limits, and requests equal limits. */
static bool extended(const char *key)
{
    return strchr(key, '/') && !strstr(key, "kubernetes.io/");
}

static bool same_quantity(json_t *a, json_t *b)
{
    int64_t qa, qb;

    if (af__codec_str(a) && af__codec_str(b)) {
        if (!strcmp(af__codec_str(a), af__codec_str(b)))
            return true;
        return !af_parse_quantity(af__codec_str(a), 1000, &qa) &&
               !af_parse_quantity(af__codec_str(b), 1000, &qb) && qa == qb;
    }
    return json_equal(a, b);
}

/* What the API server checks of the resources we touch, on every container. */
static int check_container(struct builder *b, json_t *c, int l, size_t i, char *why,
                           size_t whylen)
{
    const struct af_variant *v = b->m->variant;
    json_t *res = af__codec_get(c, "resources");
    json_t *req = af__codec_get(res, "requests"), *lim = af__codec_get(res, "limits");
    const char *key, *name = af__codec_get_str(c, "name");
    json_t *val;

    json_object_foreach(json_is_object(req) ? req : NULL, key, val) {
        if (!extended(key))
            continue;
        if (!json_object_get(json_is_object(lim) ? lim : NULL, key)) {
            snprintf(why, whylen, "container '%.40s' would request %.60s without a limit", name,
                     key);
            return AF_EINVAL;
        }
        if (!same_quantity(val, json_object_get(lim, key))) {
            snprintf(why, whylen, "container '%.40s' would request %.60s unequal to its limit",
                     name, key);
            return AF_EINVAL;
        }
    }
    if (b->image[l] && b->image[l][i] &&
        (!af__codec_get_str(c, "image") || strcmp(af__codec_get_str(c, "image"), b->image[l][i]))) {
        snprintf(why, whylen, "container '%.40s' did not get its image", name);
        return AF_EINVAL;
    }
    if (!b->rewritten[l] || !b->rewritten[l][i])
        return 0;
    for (int mi = 0; (b->rewritten[l][i] & RW_RES) && mi < 2; mi++) {
        json_t *map = mi ? lim : req;
        json_object_foreach(json_is_object(map) ? map : NULL, key, val) {
            if (is_source_key(key, b->kinds) && !variant_res(v, key)) {
                snprintf(why, whylen, "container '%.40s' would keep %.60s", name, key);
                return AF_EINVAL;
            }
        }
    }
    for (size_t k = 0; (b->rewritten[l][i] & RW_RES) && k < v->n_resources; k++) {
        const char *want = v->resources[k].value;
        const char *r = af__codec_get_str(req, v->resources[k].key), *li = af__codec_get_str(lim, v->resources[k].key);
        if (!r || !li || strcmp(r, want) || strcmp(li, want)) {
            snprintf(why, whylen, "container '%.40s' would not get %.60s: %.20s in requests and "
                     "limits", name, v->resources[k].key, want);
            return AF_EINVAL;
        }
    }
    for (size_t k = 0; k < v->n_env; k++) {
        size_t e;
        json_t *ev;
        bool ok = false;
        json_array_foreach(json_is_array(af__codec_get(c, "env")) ? af__codec_get(c, "env") : NULL, e, ev) {
            const char *n = af__codec_get_str(ev, "name"), *vv = af__codec_get_str(ev, "value");
            if (n && !strcmp(n, v->env[k].key))
                ok = vv && !strcmp(vv, v->env[k].value) && unset(af__codec_get(ev, "valueFrom"));
        }
        if (!ok) {
            snprintf(why, whylen, "container '%.40s' would not get env %.60s", name,
                     v->env[k].key);
            return AF_EINVAL;
        }
    }
    return 0;
}

/* Every swapped claim is made from its target template, and no claim came or went. */
static int check_claims(struct builder *b, json_t *before, json_t *after, char *why,
                        size_t whylen)
{
    json_t *arr = af__codec_get(after, "resourceClaims"), *x;
    size_t i, swapped = 0;

    if (json_array_size(arr) != json_array_size(af__codec_get(before, "resourceClaims"))) {
        snprintf(why, whylen, "spec.resourceClaims would change length");
        return AF_EINVAL;
    }
    json_array_foreach(json_is_array(arr) ? arr : NULL, i, x) {
        json_t *src = af__codec_get(x, "source");
        const char *name = af__codec_get_str(x, "name");
        const char *want = name ? af__codec_str(json_object_get(b->swapped, name)) : NULL;
        const char *have = af__codec_get_str(json_is_object(src) ? src : x,
                                             "resourceClaimTemplateName");
        if (!want)
            continue;
        if (!have || strcmp(have, want)) {
            snprintf(why, whylen, "claim '%.60s' would not be made from template '%.100s'",
                     name, want);
            return AF_EINVAL;
        }
        swapped++;
    }
    if (swapped != json_object_size(b->swapped)) {
        snprintf(why, whylen, "a swapped claim would be missing");
        return AF_EINVAL;
    }
    return 0;
}

static int check_result(struct builder *b, json_t *doc, char *why, size_t whylen)
{
    const struct af_variant *v = b->m->variant;
    json_t *meta = af__codec_get(doc, "metadata"), *spec = af__codec_get(doc, "spec");
    const char *r = af__codec_get_str(af__codec_get(meta, "annotations"), AF_ROLLOUT_ANNOTATION);
    const char *s = af__codec_get_str(af__codec_get(meta, "annotations"), AF_ROLLOUT_SIDE_ANNOTATION);
    int rc;

    if (!r || strcmp(r, b->m->rollout) || !s || strcmp(s, side_name(b->m->side))) {
        snprintf(why, whylen, "the rollout annotations would be missing");
        return AF_EINVAL;
    }
    if (v) {
        rc = check_claims(b, af__codec_get(b->obj, "spec"), spec, why, whylen);
        if (rc)
            return rc;
    }
    for (int l = 0; l < 2; l++) {
        json_t *arr = af__codec_get(spec, lists[l]), *c;
        size_t i;
        if (v && json_array_size(arr) != b->n[l]) {
            snprintf(why, whylen, "spec.%s would change length", lists[l]);
            return AF_EINVAL;
        }
        json_array_foreach(json_is_array(arr) ? arr : NULL, i, c) {
            rc = check_container(b, c, l, i, why, whylen);
            if (rc)
                return rc;
        }
    }
    for (size_t i = 0; v && i < v->n_tolerations; i++) {
        size_t k;
        json_t *t;
        bool have = false;
        json_array_foreach(json_is_array(af__codec_get(spec, "tolerations")) ? af__codec_get(spec, "tolerations")
                                                                   : NULL,
                           k, t) {
            if (toleration_same(t, &v->tolerations[i]))
                have = true;
        }
        if (!have) {
            snprintf(why, whylen, "toleration %zu would be missing", i + 1);
            return AF_EINVAL;
        }
    }
    {
        /* The API server's limit on all annotations of an object together. */
        size_t total = 0;
        const char *key;
        json_t *val;
        json_object_foreach(af__codec_get(meta, "annotations"), key, val) {
            total += strlen(key) + (json_is_string(val) ? json_string_length(val) : 0);
        }
        if (total > 256 * 1024) {
            snprintf(why, whylen, "the annotations would pass the API server's 256 KiB limit");
            return AF_EINVAL;
        }
    }
    for (size_t i = 0; v && i < v->n_annotations; i++) {
        const char *have = af__codec_get_str(af__codec_get(meta, "annotations"), v->annotations[i].key);
        if (!ours(v->annotations[i].key) && (!have || strcmp(have, v->annotations[i].value))) {
            snprintf(why, whylen, "annotation %.60s would be missing", v->annotations[i].key);
            return AF_EINVAL;
        }
    }
    return 0;
}

/* Notes what a rewrite keeps that may hold the pod to the source's nodes. */
static void warn_kept(json_t *spec, const struct af_mutation *m, struct af_warnings *w)
{
    json_t *ns = af__codec_get(spec, "nodeSelector");
    json_t *req = af__codec_get(af__codec_get(af__codec_get(spec, "affinity"), "nodeAffinity"),
                      "requiredDuringSchedulingIgnoredDuringExecution");

    if ((json_is_object(ns) && json_object_size(ns)) || !unset(req))
        af_warnings_add(w, "accelfit: rollout %.63s kept the pod's %s; it must admit the "
                        "target's nodes",
                        m->rollout, !unset(req) ? "required node affinity" : "nodeSelector");
}

static int dump_cb(const char *buffer, size_t size, void *data)
{
    return af_buf_add(data, buffer, size) ? -1 : 0;
}

static void builder_release(struct builder *b)
{
    for (int l = 0; l < 2; l++) {
        af_free(b->rewritten[l]);
        af_free((void *)b->image[l]);
    }
    af_free(b->image_used);
    json_decref(b->swapped);
    json_decref(b->ops);
}

int af_codec_admission_patch(const struct af_admission *a, const struct af_mutation *m,
                             struct af_buf *patch, struct af_resources *requests,
                             struct af_warnings *w)
{
    struct builder b;
    json_t *spec, *meta, *doc = NULL, *op;
    char why[300] = "";
    size_t i;
    int rc = AF_EINVAL;

    memset(&b, 0, sizeof(b));
    if (!a || !a->object || !m || !m->rollout || !*m->rollout ||
        (m->side != AF_SIDE_SOURCE && m->side != AF_SIDE_TARGET)) {
        snprintf(why, sizeof(why), "nothing to decide from");
        goto refuse;
    }
    if (!utf8_ok(m->rollout)) {
        snprintf(why, sizeof(why), "the rollout's name is not text");
        goto refuse;
    }
    b.obj = a->object;
    b.m = m;
    b.ops = json_array();
    spec = af__codec_get(a->object, "spec");
    meta = af__codec_get(a->object, "metadata");
    if (!json_is_object(spec) || !json_is_object(meta)) {
        snprintf(why, sizeof(why), "the pod has no spec or metadata");
        goto refuse;
    }
    if (m->variant) {
        rc = check_variant(m->variant, why, sizeof(why));
        if (rc)
            goto refuse;
        if (af__codec_get_str(spec, "nodeName") && *af__codec_get_str(spec, "nodeName")) {
            /* Bound at creation, past any scheduler: it cannot go to a target node. */
            snprintf(why, sizeof(why), "the pod names its node (spec.nodeName %.63s)",
                     af__codec_get_str(spec, "nodeName"));
            goto refuse;
        }
        b.kinds = kinds_of(m->source);
        if (!b.kinds) {
            rc = AF_EINVAL;
            snprintf(why, sizeof(why), "the rollout's source classes use no accelerator");
            goto refuse;
        }
        b.image_used = af_xcalloc(m->variant->n_images + 1, sizeof(bool));
        b.swapped = json_object();
        rc = patch_claims(&b, spec, why, sizeof(why));
        if (!rc)
            rc = patch_containers(&b, spec, why, sizeof(why));
        if (rc)
            goto refuse;
        patch_tolerations(&b, spec);
    }
    patch_annotations(&b, meta);

    /* Apply to a copy of the object as received, and check the pod that results. */
    doc = json_deep_copy(a->object);
    af_assert(doc);
    json_array_foreach(b.ops, i, op) {
        rc = apply_op(doc, op, why, sizeof(why));
        if (rc) {
            AF_LOG(AF_LOG_ERROR, "admission patch does not apply", "why", why, NULL);
            goto refuse;
        }
    }
    rc = check_result(&b, doc, why, sizeof(why));
    if (rc)
        goto refuse;
    if (requests) {
        struct af_pod_info *p = NULL;
        struct af_error err;
        memset(&err, 0, sizeof(err));
        rc = pod_from_object(doc, a->ns, "the patched pod", &p, &err);
        if (rc) {
            snprintf(why, sizeof(why), "%.200s", err.text);
            goto refuse;
        }
        *requests = p->requests;
        af_pod_info_unref(p);
    }
    if (m->variant)
        warn_kept(spec, m, w);
    rc = 0;
    if (json_array_size(b.ops)) {
        size_t start = patch->len;
        if (json_dump_callback(b.ops, dump_cb, patch, JSON_COMPACT)) {
            patch->len = start;
            if (patch->buf)
                patch->buf[start] = '\0';
            /* said, not dropped in silence: kubectl shows the warning, the log the why */
            af_warnings_add(w, "accelfit: pod created as written, not %s for rollout %.63s: "
                            "its patch (%zu operations) would exceed %zu KiB, the limit of a "
                            "patch",
                            m->variant ? "rewritten" : "annotated", m->rollout,
                            json_array_size(b.ops), patch->cap >> 10);
            rc = AF_ETOOBIG;
        }
    }
    goto out;

refuse:
    rc = AF_EINVAL;
    af_warnings_add(w, "accelfit: pod created as written, not %s for rollout %.63s: %s",
                    m && m->variant ? "rewritten" : "annotated",
                    m && m->rollout && utf8_ok(m->rollout) ? m->rollout : "?", why);
out:
    json_decref(doc);
    builder_release(&b);
    return rc;
}

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
    bool ok = utf8_ok(p->key);

    for (size_t i = 0; ok && i < p->n_terms; i++)
        for (size_t k = 0; ok && k < p->terms[i].n_values; k++)
            ok = utf8_ok(p->terms[i].values[k]);
    for (size_t i = 0; ok && i < p->n_not_in; i++)
        ok = utf8_ok(p->not_in[i]);
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
    if (unset(aff) || (json_is_object(aff) && unset(af__codec_get(aff, "nodeAffinity")))) {
        json_t *v = json_object();
        if (json_array_size(pref))
            json_object_set(v, "preferredDuringSchedulingIgnoredDuringExecution", pref);
        if (req)
            json_object_set_new(v, "requiredDuringSchedulingIgnoredDuringExecution",
                                json_pack("{s:[{s:[O]}]}", "nodeSelectorTerms",
                                          "matchExpressions", req));
        if (unset(aff))
            op_add(ops, "add", "/spec/affinity", json_pack("{s:o}", "nodeAffinity", v));
        else
            op_add(ops, "add", na_path, v);
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
        if (unset(have)) {
            op_add(ops, "add", "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnoredDuring"
                               "Execution", json_incref(pref));
        } else if (json_is_array(have)) {
            json_array_foreach(pref, i, term)
                op_add(ops, "add", "/spec/affinity/nodeAffinity/preferredDuringSchedulingIgnored"
                                   "DuringExecution/-", json_incref(term));
        } else {
            snprintf(why, whylen, "the pod's preferred node affinity is not a list");
            return AF_EINVAL;
        }
    }
    if (!req)
        return 0;
    /* Required: terms are ORed, so the expression is ANDed into every one of them. */
    have = af__codec_get(na, "requiredDuringSchedulingIgnoredDuringExecution");
    if (unset(have)) {
        op_add(ops, "add", "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuring"
                           "Execution", json_pack("{s:[{s:[O]}]}", "nodeSelectorTerms",
                                                  "matchExpressions", req));
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
        if (!json_is_object(term) || (!unset(me) && !json_is_array(me))) {
            snprintf(why, whylen, "a term of the pod's required node affinity is malformed");
            return AF_EINVAL;
        }
        if (unset(me)) {
            p = af_xasprintf("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuring"
                             "Execution/nodeSelectorTerms/%zu/matchExpressions", i);
            op_add(ops, "add", p, json_pack("[O]", req));
        } else {
            p = af_xasprintf("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuring"
                             "Execution/nodeSelectorTerms/%zu/matchExpressions/-", i);
            op_add(ops, "add", p, json_incref(req));
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
            !(unset(t0) && unset(t1))) {
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
        if (apply_op(doc, op, why, sizeof(why))) {
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
        if (json_dump_callback(ops, dump_cb, patch, JSON_COMPACT)) {
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

/* ---- the response ---------------------------------------------------------------------------- */

int af_codec_encode_admission(const char *uid, const char *patch, size_t patch_len,
                              const struct af_warnings *w, struct af_buf *out)
{
    size_t start = out->len;
    int rc;

    rc = af_buf_puts(out, "{\"apiVersion\":\"" ADMISSION_API "\",\"kind\":\"AdmissionReview\","
                          "\"response\":{\"uid\":");
    if (!rc)
        rc = af_buf_json_str(out, uid ? uid : "");
    if (!rc)
        rc = af_buf_puts(out, ",\"allowed\":true");
    if (!rc && patch && patch_len) {
        rc = af_buf_puts(out, ",\"patchType\":\"JSONPatch\",\"patch\":\"");
        if (!rc)
            rc = af_buf_base64(out, patch, patch_len);
        if (!rc)
            rc = af_buf_puts(out, "\"");
    }
    if (!rc && w && w->n) {
        rc = af_buf_puts(out, ",\"warnings\":[");
        for (size_t i = 0; !rc && i < w->n && i < AF_WARNINGS_MAX; i++) {
            if (i)
                rc = af_buf_puts(out, ",");
            if (!rc)
                rc = af_buf_json_str(out, w->text[i]);
        }
        if (!rc)
            rc = af_buf_puts(out, "]");
    }
    if (!rc)
        rc = af_buf_puts(out, "}}");
    if (rc) {
        /* Leave nothing half-written. */
        out->len = start;
        if (out->buf)
            out->buf[start] = '\0';
    }
    return rc;
}
