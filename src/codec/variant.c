/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The JSONPatch (RFC 6902) that rewrites a Pod for a rollout's variant.
 *
 * A patch that does not apply fails the pod's creation even under
 * failurePolicy: Ignore, and so does a patched pod the API server finds
 * invalid (an extended resource in requests but not in limits, or unequal). So
 * every patch is built from the object exactly as received: a parent that is
 * absent is created with one `add` of the whole object or array, members are
 * set with `add` (which replaces an existing member), `replace` and `remove`
 * are used only on what is there, and map keys are escaped (~0, ~1). The patch
 * is then applied to a copy of the object by the RFC 6902 apply (jsonpatch.c)
 * and the result checked for what the API server would refuse; when anything is
 * doubtful nothing is patched and a warning says why (the pod is created as
 * written, which is always allowed).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/rollout.h"

#include "codec/admission.h"
#include "codec/internal.h"
#include "accelfit/banned.h"

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
bool af__codec_utf8_ok(const char *s)
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
    return af__codec_utf8_ok(t->value);
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
        if (!v->images[i].key || !*v->images[i].key || !img || !*img || strpbrk(img, " \t\r\n") ||
            !af__codec_utf8_ok(img) || !af__codec_utf8_ok(v->images[i].key)) {
            snprintf(why, whylen, "the variant's image for container '%.60s' is not an image",
                     v->images[i].key ? v->images[i].key : "");
            return AF_EINVAL;
        }
    }
    for (size_t i = 0; i < v->n_env; i++)
        if (!af_k8s_env_name(v->env[i].key) || !v->env[i].value ||
            !af__codec_utf8_ok(v->env[i].value)) {
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
            !af__codec_utf8_ok(v->annotations[i].value)) {
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
           !strcmp(e ? e : "", t->effect ? t->effect : "") &&
           af__codec_unset(af__codec_get(have, "tolerationSeconds"));
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
        char *mpath = af__codec_ptr_join(rbase, maps[m]);
        if (json_is_object(map)) {
            const char *key;
            json_t *val;
            json_object_foreach(map, key, val) {
                if (is_source_key(key, b->kinds) && !variant_res(v, key)) {
                    char *p = af__codec_ptr_join(mpath, key);
                    af__codec_patch_op(b->ops, "remove", p, NULL);
                    af_free(p);
                }
            }
            for (size_t i = 0; i < v->n_resources; i++) {
                char *p = af__codec_ptr_join(mpath, v->resources[i].key);
                json_t *have = json_object_get(map, v->resources[i].key);
                af__codec_patch_op(b->ops, have ? "replace" : "add", p,
                                   json_string(v->resources[i].value));
                af_free(p);
            }
        } else {
            /* No map (or null): one add of the whole map. `resources` is an object, since
             * the container requests an accelerator in it. */
            json_t *nm = json_object();
            for (size_t i = 0; i < v->n_resources; i++)
                json_object_set_new(nm, v->resources[i].key, json_string(v->resources[i].value));
            af__codec_patch_op(b->ops, "add", mpath, nm);
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
        af__codec_patch_op(b->ops, "add", epath, arr);
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
                af__codec_patch_op(b->ops, "replace", p, ne);
                af_free(p);
                found = true;
            }
        }
        if (!found) {
            char *p = af_xasprintf("%s/-", epath);
            json_t *ne = json_object();
            json_object_set_new(ne, "name", json_string(v->env[i].key));
            json_object_set_new(ne, "value", json_string(v->env[i].value));
            af__codec_patch_op(b->ops, "add", p, ne);
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

    if (!v->n_claim_templates || af__codec_unset(arr))
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
        af__codec_patch_op(b->ops, "replace", p, json_string(to));
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
        if (af__codec_unset(arr))
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
                    af__codec_patch_op(b->ops, json_object_get(c, "image") ? "replace" : "add", p,
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
            af__codec_patch_op(b->ops, "add", "/spec/tolerations/-",
                               toleration_json(&v->tolerations[i]));
        } else {
            if (!fresh)
                fresh = json_array();
            json_array_append_new(fresh, toleration_json(&v->tolerations[i]));
        }
    }
    if (fresh)
        af__codec_patch_op(b->ops, "add", "/spec/tolerations", fresh);
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
        af__codec_patch_op(b->ops, "add", "/metadata/annotations", want);
        return;
    }
    json_object_foreach(want, key, val) {
        const char *have = af__codec_get_str(anns, key);
        char *p;
        if (have && !strcmp(have, json_string_value(val)))
            continue;
        p = af__codec_ptr_join("/metadata/annotations", key);
        af__codec_patch_op(b->ops, json_object_get(anns, key) ? "replace" : "add", p,
                           json_incref(val));
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
                ok = vv && !strcmp(vv, v->env[k].value) &&
                     af__codec_unset(af__codec_get(ev, "valueFrom"));
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

    if ((json_is_object(ns) && json_object_size(ns)) || !af__codec_unset(req))
        af_warnings_add(w,
                        "accelfit: rollout %.63s kept the pod's %s; it must admit the "
                        "target's nodes",
                        m->rollout,
                        !af__codec_unset(req) ? "required node affinity" : "nodeSelector");
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
    if (!af__codec_utf8_ok(m->rollout)) {
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
        rc = af__codec_patch_apply(doc, op, why, sizeof(why));
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
        rc = af__codec_admission_pod(doc, a->ns, "the patched pod", &p, &err);
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
        if (json_dump_callback(b.ops, af__codec_patch_dump, patch, JSON_COMPACT)) {
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
                    m && m->rollout && af__codec_utf8_ok(m->rollout) ? m->rollout : "?", why);
out:
    json_decref(doc);
    builder_release(&b);
    return rc;
}
