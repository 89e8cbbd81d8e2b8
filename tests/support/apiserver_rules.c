/* SPDX-License-Identifier: Apache-2.0 */
/* What the API server does with a webhook's answer: base64, RFC 6902, pod validation. */
#include "support/apiserver_rules.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/util.h"

/* ---- RFC 6902 apply, written apart from the codec's ---------------------------------------- */

/* Splits `path` into unescaped reference tokens (~1 is '/', then ~0 is '~'). */
static json_t *pointer_tokens(const char *path)
{
    json_t *toks = json_array();
    const char *p = path;

    if (*p != '/') {
        json_decref(toks);
        return NULL;
    }
    while (*p == '/') {
        const char *end = strchr(p + 1, '/');
        size_t n = end ? (size_t)(end - p - 1) : strlen(p + 1);
        char *t = af_xmalloc(n + 1);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            char ch = p[1 + i];
            if (ch == '~') {
                char nx = i + 1 < n ? p[2 + i] : 0;
                if (nx != '0' && nx != '1') {
                    af_free(t);
                    json_decref(toks);
                    return NULL;
                }
                ch = nx == '1' ? '/' : '~';
                i++;
            }
            t[k++] = ch;
        }
        t[k] = 0;
        json_array_append_new(toks, json_string(t));
        af_free(t);
        p += 1 + n;
    }
    return toks;
}

static bool array_index(const char *t, size_t *out)
{
    char *end;
    unsigned long v;

    if (!*t || (t[0] == '0' && t[1]) || t[0] < '0' || t[0] > '9')
        return false;
    v = strtoul(t, &end, 10);
    if (*end)
        return false;
    *out = v;
    return true;
}

/* One operation on `doc`, strictly: false (with `why`) when it does not apply. */
static bool apply_one(json_t *doc, json_t *op, char *why, size_t n)
{
    const char *name = json_string_value(json_object_get(op, "op"));
    const char *path = json_string_value(json_object_get(op, "path"));
    json_t *value = json_object_get(op, "value"), *toks, *cur = doc;
    size_t nt, i;
    bool ok = false;

    if (!name || !path) {
        snprintf(why, n, "op or path missing");
        return false;
    }
    toks = pointer_tokens(path);
    if (!toks || !(nt = json_array_size(toks))) {
        snprintf(why, n, "%s: bad pointer", path);
        json_decref(toks);
        return false;
    }
    for (i = 0; i + 1 < nt; i++) {
        const char *t = json_string_value(json_array_get(toks, i));
        size_t idx;
        if (json_is_object(cur))
            cur = json_object_get(cur, t);
        else if (json_is_array(cur) && array_index(t, &idx))
            cur = json_array_get(cur, idx);
        else
            cur = NULL;
        if (!cur) {
            snprintf(why, n, "%s %s: doc is missing path", name, path);
            goto out;
        }
    }
    {
        const char *t = json_string_value(json_array_get(toks, nt - 1));
        size_t idx;
        if (!strcmp(name, "add") && value) {
            if (json_is_object(cur))
                ok = !json_object_set(cur, t, value);
            else if (json_is_array(cur) && !strcmp(t, "-"))
                ok = !json_array_append(cur, value);
            else if (json_is_array(cur) && array_index(t, &idx) && idx <= json_array_size(cur))
                ok = !json_array_insert(cur, idx, value);
        } else if (!strcmp(name, "replace") && value) {
            if (json_is_object(cur) && json_object_get(cur, t))
                ok = !json_object_set(cur, t, value);
            else if (json_is_array(cur) && array_index(t, &idx) && idx < json_array_size(cur))
                ok = !json_array_set(cur, idx, value);
        } else if (!strcmp(name, "remove")) {
            if (json_is_object(cur) && json_object_get(cur, t))
                ok = !json_object_del(cur, t);
            else if (json_is_array(cur) && array_index(t, &idx) && idx < json_array_size(cur))
                ok = !json_array_remove(cur, idx);
        }
        if (!ok)
            snprintf(why, n, "%s %s: does not apply", name, path);
    }
out:
    json_decref(toks);
    return ok;
}

json_t *af_test_jsonpatch_apply(json_t *doc, json_t *patch, char *why, size_t n)
{
    json_t *copy = json_deep_copy(doc), *op;
    size_t i;

    if (!json_is_array(patch)) {
        snprintf(why, n, "the patch is not an array");
        json_decref(copy);
        return NULL;
    }
    json_array_foreach(patch, i, op) {
        json_t *own = json_deep_copy(op);
        bool ok = json_is_object(own) && apply_one(copy, own, why, n);
        json_decref(own);
        if (!ok) {
            json_decref(copy);
            return NULL;
        }
    }
    return copy;
}

/* ---- base64 (standard, padded, as the API server decodes response.patch) ------------------- */

static int b64val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

char *af_test_base64_decode(const char *s, size_t *outlen)
{
    size_t n = strlen(s), k = 0;
    char *out;

    if (n % 4)
        return NULL;
    out = af_xmalloc(n / 4 * 3 + 1);
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        for (int j = 0; j < 4; j++) {
            v[j] = s[i + j] == '=' && i + 4 == n && j >= 2 ? 0 : b64val(s[i + j]);
            if (v[j] < 0) {
                af_free(out);
                return NULL;
            }
        }
        out[k++] = (char)((v[0] << 2) | (v[1] >> 4));
        if (s[i + 2] != '=')
            out[k++] = (char)(((v[1] & 15) << 4) | (v[2] >> 2));
        if (s[i + 3] != '=')
            out[k++] = (char)(((v[2] & 3) << 6) | v[3]);
    }
    out[k] = 0;
    *outlen = k;
    return out;
}

/* ---- validation ------------------------------------------------------------------------------ */

static bool fail(char *why, size_t n, const char *fmt, ...) AF_PRINTF(3, 4);
static bool fail(char *why, size_t n, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(why, n, fmt, ap);
    va_end(ap);
    return false;
}

static bool alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

/* A DNS-1123 subdomain: lower-case alphanumerics, '-' and '.', alphanumeric at both ends. */
static bool dns_subdomain(const char *s, size_t len)
{
    if (len < 1 || len > 253 || !alnum(s[0]) || !alnum(s[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-' ||
              s[i] == '.'))
            return false;
    return true;
}

/* IsQualifiedName: [prefix/]name, name 1-63 of [-A-Za-z0-9_.] with alphanumeric ends. */
static bool qualified_name(const char *s)
{
    const char *slash = strchr(s, '/'), *name = slash ? slash + 1 : s;
    size_t len = strlen(name);

    if (slash && (strchr(name, '/') || !dns_subdomain(s, (size_t)(slash - s))))
        return false;
    if (len < 1 || len > 63 || !alnum(name[0]) || !alnum(name[len - 1]))
        return false;
    for (size_t i = 0; i < len; i++)
        if (!alnum(name[i]) && name[i] != '-' && name[i] != '_' && name[i] != '.')
            return false;
    return true;
}

/* A container resource name: a standard one, or a qualified name with a domain. */
static bool resource_name(const char *s)
{
    if (!strchr(s, '/'))
        return !strcmp(s, "cpu") || !strcmp(s, "memory") || !strcmp(s, "ephemeral-storage") ||
               !strncmp(s, "hugepages-", 10);
    return qualified_name(s);
}

/* IsExtendedResourceName, for a valid name: a domain, and not kubernetes.io's. */
static bool extended_resource(const char *s)
{
    return strchr(s, '/') && !strstr(s, "kubernetes.io/");
}

/* A whole number of an extended resource ("1", or 1 as a JSON number); -1 when not one. */
static long long whole_quantity(json_t *v)
{
    const char *s = json_string_value(v);
    char *end;
    long long q;

    if (json_is_integer(v))
        return json_integer_value(v) >= 0 ? json_integer_value(v) : -1;
    if (!s || !*s || strspn(s, "0123456789") != strlen(s) || strlen(s) > 15)
        return -1;
    q = strtoll(s, &end, 10);
    return *end ? -1 : q;
}

/* IsEnvVarName: [-._a-zA-Z][-._a-zA-Z0-9]*. */
static bool env_name(const char *s)
{
    if (!s || !*s || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (; *s; s++)
        if (!alnum(*s) && *s != '-' && *s != '.' && *s != '_')
            return false;
    return true;
}

static bool container_valid(json_t *c, const char *where, char *why, size_t n)
{
    json_t *res = json_object_get(c, "resources"), *req = json_object_get(res, "requests");
    json_t *lim = json_object_get(res, "limits"), *v, *e;
    const char *image = json_string_value(json_object_get(c, "image")), *key;
    size_t i;

    if (!image || !*image)
        return fail(why, n, "%s.image: Required value", where);
    if (strchr(" \t\n", image[0]) || strchr(" \t\n", image[strlen(image) - 1]))
        return fail(why, n, "%s.image: must not have leading or trailing whitespace", where);
    json_object_foreach(lim, key, v) {
        if (!resource_name(key))
            return fail(why, n, "%s.resources.limits[%s]: Invalid value", where, key);
        if (extended_resource(key) && whole_quantity(v) < 0)
            return fail(why, n, "%s.resources.limits[%s]: must be an integer", where, key);
    }
    json_object_foreach(req, key, v) {
        json_t *l = json_object_get(lim, key);
        if (!resource_name(key))
            return fail(why, n, "%s.resources.requests[%s]: Invalid value", where, key);
        if (!extended_resource(key))
            continue;
        if (whole_quantity(v) < 0)
            return fail(why, n, "%s.resources.requests[%s]: must be an integer", where, key);
        if (!l)
            return fail(why, n, "%s.resources.limits: Required value: Limit must be set for "
                                "non overcommitable resources (%s)", where, key);
        if (whole_quantity(v) != whole_quantity(l))
            return fail(why, n, "%s.resources.requests[%s]: must be equal to %s limit", where,
                        key, key);
    }
    json_array_foreach(json_object_get(c, "env"), i, e) {
        if (!env_name(json_string_value(json_object_get(e, "name"))))
            return fail(why, n, "%s.env[%zu].name: Invalid value", where, i);
        if (json_object_get(e, "value") && !json_is_string(json_object_get(e, "value")))
            return fail(why, n, "%s.env[%zu].value: not a string", where, i);
    }
    return true;
}

static bool toleration_valid(json_t *t, size_t i, char *why, size_t n)
{
    const char *key = json_string_value(json_object_get(t, "key"));
    const char *op = json_string_value(json_object_get(t, "operator"));
    const char *value = json_string_value(json_object_get(t, "value"));
    const char *effect = json_string_value(json_object_get(t, "effect"));

    if (key && *key && !qualified_name(key))
        return fail(why, n, "spec.tolerations[%zu].key: Invalid value", i);
    if ((!key || !*key) && (!op || strcmp(op, "Exists")))
        return fail(why, n, "spec.tolerations[%zu].operator: operator must be Exists when "
                            "`key` is empty", i);
    if (json_object_get(t, "tolerationSeconds") && (!effect || strcmp(effect, "NoExecute")))
        return fail(why, n, "spec.tolerations[%zu].effect: effect must be 'NoExecute' when "
                            "`tolerationSeconds` is set", i);
    if (op && !strcmp(op, "Exists")) {
        if (value && *value)
            return fail(why, n, "spec.tolerations[%zu].operator: value must be empty when "
                                "`operator` is 'Exists'", i);
    } else if (op && *op && strcmp(op, "Equal")) {
        return fail(why, n, "spec.tolerations[%zu].operator: Unsupported value: \"%s\"", i, op);
    }
    if (effect && *effect && strcmp(effect, "NoSchedule") && strcmp(effect, "PreferNoSchedule") &&
        strcmp(effect, "NoExecute"))
        return fail(why, n, "spec.tolerations[%zu].effect: Unsupported value: \"%s\"", i, effect);
    return true;
}

bool af_test_pod_valid(json_t *pod, char *why, size_t n)
{
    static const char *const lists[] = {"containers", "initContainers"};
    json_t *spec = json_object_get(pod, "spec"), *v;
    json_t *ann = json_object_get(json_object_get(pod, "metadata"), "annotations");
    const char *key;
    size_t i, total = 0;

    for (size_t l = 0; l < AF_ARRAY_SIZE(lists); l++) {
        json_t *c;
        json_array_foreach(json_object_get(spec, lists[l]), i, c) {
            char where[64];
            snprintf(where, sizeof(where), "spec.%s[%zu]", lists[l], i);
            if (!container_valid(c, where, why, n))
                return false;
        }
    }
    if (!json_array_size(json_object_get(spec, "containers")))
        return fail(why, n, "spec.containers: Required value");
    json_array_foreach(json_object_get(spec, "tolerations"), i, v) {
        if (!toleration_valid(v, i, why, n))
            return false;
    }
    json_object_foreach(ann, key, v) {
        if (!qualified_name(key))
            return fail(why, n, "metadata.annotations: Invalid value: \"%s\"", key);
        if (!json_is_string(v))
            return fail(why, n, "metadata.annotations[%s]: not a string", key);
        total += strlen(key) + json_string_length(v);
    }
    if (total > 256u * 1024u)
        return fail(why, n, "metadata.annotations: Too long: must have at most 262144 bytes");
    return true;
}
