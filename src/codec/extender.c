/* SPDX-License-Identifier: Apache-2.0 */
/*
 * extender/v1 on the wire: ExtenderArgs in, ExtenderFilterResult and
 * HostPriorityList out. The Go types have no JSON tags, so kube-scheduler
 * sends PascalCase names and its decoder matches them case-insensitively; we
 * do the same on input and always emit PascalCase. Unset pointers arrive as
 * `null`. In Nodes mode (nodeCacheCapable: false) the request's Node objects
 * are kept so the passing ones can be echoed back unchanged.
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "accelfit/codec.h"

/* From objects.c. */
const char *af__codec_type_name(const json_t *v);
int af__codec_node_from_json(const struct af_config *cfg, json_t *obj, const char *where,
                             struct af_node_info **out, struct af_error *err);
int af__codec_pod_from_json(json_t *obj, const char *where, struct af_pod_info **out,
                            struct af_error *err);
int af__codec_load(const char *text, size_t len, const char *what, json_t **out,
                   struct af_error *err);

struct af_ext_args {
    json_t *root;                      /* the whole request, owning the items below */
    struct af_pod_info *pod;
    bool nodes_mode;
    size_t n;
    char **names;                      /* owned */
    struct af_node_info **nodes;       /* Nodes mode: owned refs */
    json_t **items;                    /* Nodes mode: borrowed from root */
};

void af_ext_args_free(struct af_ext_args *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n; i++) {
        af_free(a->names[i]);
        if (a->nodes)
            af_node_info_unref(a->nodes[i]);
    }
    af_free(a->names);
    af_free(a->nodes);
    af_free(a->items);
    af_pod_info_unref(a->pod);
    json_decref(a->root);
    af_free(a);
}

const struct af_pod_info *af_ext_args_pod(const struct af_ext_args *a)
{
    return a ? a->pod : NULL;
}

bool af_ext_args_nodes_mode(const struct af_ext_args *a)
{
    return a && a->nodes_mode;
}

size_t af_ext_args_count(const struct af_ext_args *a)
{
    return a ? a->n : 0;
}

const char *af_ext_args_name(const struct af_ext_args *a, size_t i)
{
    return a && i < a->n ? a->names[i] : NULL;
}

const struct af_node_info *af_ext_args_node(const struct af_ext_args *a, size_t i)
{
    return a && a->nodes && i < a->n ? a->nodes[i] : NULL;
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

static int decode_nodes(const struct af_config *cfg, struct af_ext_args *a, json_t *nodes,
                        struct af_error *err)
{
    json_t *items, *it;
    size_t i;

    if (!json_is_object(nodes))
        return af_error_set(err, AF_ETYPE, "", 0, 0,
                            "Nodes: expected an object (NodeList) or null, got %s",
                            af__codec_type_name(nodes));
    items = json_object_get(nodes, "items");
    if (!items || json_is_null(items))
        return 0;
    if (!json_is_array(items))
        return af_error_set(err, AF_ETYPE, "", 0, 0, "Nodes.items: expected an array, got %s",
                            af__codec_type_name(items));
    a->n = json_array_size(items);
    a->names = af_xcalloc(a->n ? a->n : 1, sizeof(*a->names));
    a->nodes = af_xcalloc(a->n ? a->n : 1, sizeof(*a->nodes));
    a->items = af_xcalloc(a->n ? a->n : 1, sizeof(*a->items));
    json_array_foreach(items, i, it) {
        char at[48];
        int rc;
        snprintf(at, sizeof(at), "Nodes.items[%zu]", i);
        rc = af__codec_node_from_json(cfg, it, at, &a->nodes[i], err);
        if (rc) {
            a->n = i; /* only the decoded ones are released */
            return rc;
        }
        a->names[i] = af_xstrdup(a->nodes[i]->name);
        a->items[i] = it;
    }
    return 0;
}

static int decode_names(struct af_ext_args *a, json_t *names, struct af_error *err)
{
    json_t *it;
    size_t i;

    if (!json_is_array(names))
        return af_error_set(err, AF_ETYPE, "", 0, 0,
                            "NodeNames: expected an array of strings or null, got %s",
                            af__codec_type_name(names));
    a->names = af_xcalloc(json_array_size(names) ? json_array_size(names) : 1, sizeof(*a->names));
    json_array_foreach(names, i, it) {
        if (!json_is_string(it) || !*json_string_value(it))
            return af_error_set(err, AF_ETYPE, "", 0, 0, "NodeNames[%zu]: expected a %s, got %s",
                                i, json_is_string(it) ? "non-empty string" : "string",
                                af__codec_type_name(it));
        a->names[i] = af_xstrdup(json_string_value(it));
        a->n = i + 1;
    }
    return 0;
}

int af_codec_decode_args(const struct af_config *cfg, const char *body, size_t len,
                         struct af_ext_args **out, struct af_error *err)
{
    struct af_ext_args *a;
    json_t *pod, *nodes, *names;
    int rc;

    *out = NULL;
    a = af_xcalloc(1, sizeof(*a));
    rc = af__codec_load(body, len, "request body", &a->root, err);
    if (rc)
        goto fail;
    if (!json_is_object(a->root)) {
        rc = af_error_set(err, AF_ETYPE, "", 0, 0,
                          "request body: expected an object (ExtenderArgs), got %s",
                          af__codec_type_name(a->root));
        goto fail;
    }
    pod = get_ci(a->root, "Pod");
    if (!pod || json_is_null(pod)) {
        rc = af_error_set(err, AF_EINVAL, "", 0, 0, "Pod: missing");
        goto fail;
    }
    rc = af__codec_pod_from_json(pod, "Pod", &a->pod, err);
    if (rc)
        goto fail;
    nodes = get_ci(a->root, "Nodes");
    names = get_ci(a->root, "NodeNames");
    if (nodes && !json_is_null(nodes)) {
        a->nodes_mode = true;
        rc = decode_nodes(cfg, a, nodes, err);
    } else if (names && !json_is_null(names)) {
        rc = decode_names(a, names, err);
    }
    if (rc)
        goto fail;
    *out = a;
    return 0;
fail:
    af_ext_args_free(a);
    return rc;
}

/* ---- encoding ------------------------------------------------------------------------- */

/* A JSON string from C text that may have been cut mid-character: bytes that
 * do not form valid UTF-8 become '?'. */
static json_t *jstr(const char *s)
{
    json_t *v;
    char *copy;

    if (!s)
        s = "";
    v = json_string(s);
    if (v)
        return v;
    copy = af_xstrdup(s);
    for (char *p = copy; *p; p++)
        if ((unsigned char)*p >= 0x80)
            *p = '?';
    v = json_string(copy);
    af_free(copy);
    return v ? v : json_string("");
}

static int dump_cb(const char *buffer, size_t size, void *data)
{
    return af_buf_add(data, buffer, size) ? -1 : 0;
}

static int dump(json_t *v, struct af_buf *out)
{
    int rc = json_dump_callback(v, dump_cb, out, JSON_COMPACT) ? AF_ETOOBIG : 0;
    json_decref(v);
    return rc;
}

int af_codec_encode_filter(const struct af_ext_args *args, const struct af_node_decision *d,
                           size_t n, const char *error, struct af_buf *out)
{
    json_t *res = json_object();
    json_t *failed = json_object(), *unres = json_object();
    json_t *kept = NULL, *items = NULL;
    bool nodes_mode = args && args->nodes_mode;

    if (args && n > args->n)
        n = args->n;
    if (error && *error) {
        json_object_set_new(res, "Nodes", json_null());
        json_object_set_new(res, "NodeNames", json_null());
        json_object_set_new(res, "FailedNodes", failed);
        json_object_set_new(res, "FailedAndUnresolvableNodes", unres);
        json_object_set_new(res, "Error", jstr(error));
        return dump(res, out);
    }
    if (nodes_mode)
        items = json_array();
    else
        kept = json_array();
    for (size_t i = 0; d && i < n; i++) {
        const char *name = d[i].name ? d[i].name : (args ? args->names[i] : NULL);
        json_t *key_ok = name ? json_string(name) : NULL;
        if (!key_ok)
            continue; /* a name jansson would not accept cannot come from a request */
        json_decref(key_ok);
        switch (d[i].verdict) {
        case AF_VERDICT_PASS:
            if (nodes_mode)
                json_array_append(items, args->items[i]);
            else
                json_array_append_new(kept, json_string(name));
            break;
        case AF_VERDICT_UNRESOLVABLE:
            json_object_set_new(unres, name, jstr(d[i].reason));
            break;
        default:
            json_object_set_new(failed, name, jstr(d[i].reason));
            break;
        }
    }
    if (nodes_mode) {
        json_t *list = json_object();
        json_object_set_new(list, "metadata", json_object());
        json_object_set_new(list, "items", items);
        json_object_set_new(res, "Nodes", list);
        json_object_set_new(res, "NodeNames", json_null());
    } else {
        json_object_set_new(res, "Nodes", json_null());
        json_object_set_new(res, "NodeNames", kept);
    }
    json_object_set_new(res, "FailedNodes", failed);
    json_object_set_new(res, "FailedAndUnresolvableNodes", unres);
    json_object_set_new(res, "Error", json_string(""));
    return dump(res, out);
}

int af_codec_encode_priorities(const struct af_node_decision *d, size_t n, struct af_buf *out)
{
    int rc = af_buf_add(out, "[", 1);

    for (size_t i = 0; !rc && i < n; i++) {
        rc = af_buf_puts(out, i ? ",{\"Host\":" : "{\"Host\":");
        if (!rc)
            rc = af_buf_json_str(out, d[i].name ? d[i].name : "");
        if (!rc)
            rc = af_buf_printf(out, ",\"Score\":%d}", d[i].score);
    }
    if (!rc)
        rc = af_buf_add(out, "]", 1);
    return rc;
}
