/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON Pointer (RFC 6901) and the part of JSON Patch (RFC 6902) the admission
 * webhook uses: operations built as the patch is written, and add, replace and
 * remove applied to a copy of the object as received, with RFC 6902's rules, so
 * that a patch which would not apply is never sent (a patch that does not apply
 * fails the pod's creation even under failurePolicy: Ignore).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "codec/admission.h"
#include "codec/internal.h"
#include "accelfit/banned.h"

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
char *af__codec_ptr_join(const char *base, const char *key)
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
int af__codec_patch_apply(json_t *doc, json_t *op, char *why, size_t whylen)
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

void af__codec_patch_op(json_t *ops, const char *op, const char *path, json_t *value)
{
    json_t *o = json_object();

    json_object_set_new(o, "op", json_string(op));
    json_object_set_new(o, "path", json_string(path));
    if (value)
        json_object_set_new(o, "value", value);
    json_array_append_new(ops, o);
}

int af__codec_patch_dump(const char *buffer, size_t size, void *data)
{
    return af_buf_add(data, buffer, size) ? -1 : 0;
}
