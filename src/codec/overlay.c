/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Karpenter NodeOverlays (karpenter.sh/v1alpha1) into accelfit/prices.h's af_overlay: the
 * fields prices read, metadata.name, spec.weight, spec.requirements, spec.price and
 * spec.priceAdjustment, checked as Karpenter's CRD validates them; spec.capacity is not
 * about prices and is not read.
 */
#include <stdio.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/prices.h"
#include "codec/internal.h"
#include "accelfit/banned.h"

#define OVERLAY_REQS_MAX 100      /* the CRD's MaxItems */
#define OVERLAY_VALUES_MAX 256

static const struct {
    const char *name;
    enum af_overlay_op op;
} ops[] = {
    {"In", AF_OVERLAY_IN},   {"NotIn", AF_OVERLAY_NOT_IN}, {"Exists", AF_OVERLAY_EXISTS},
    {"DoesNotExist", AF_OVERLAY_DOES_NOT_EXIST},           {"Gt", AF_OVERLAY_GT},
    {"Lt", AF_OVERLAY_LT},   {"Gte", AF_OVERLAY_GTE},      {"Lte", AF_OVERLAY_LTE},
};

int af__codec_overlay_from_json(json_t *obj, const char *where, struct af_overlay *out,
                                struct af_error *err)
{
    json_t *spec = af__codec_get(obj, "spec"), *reqs, *w, *r;
    const char *name = af__codec_get_str(af__codec_get(obj, "metadata"), "name");
    const char *price = af__codec_get_str(spec, "price");
    const char *adj = af__codec_get_str(spec, "priceAdjustment");
    size_t i;

    memset(out, 0, sizeof(*out));
    if (!name || !*name)
        return af_error_set(err, AF_EINVAL, "", 0, 0, "%s.metadata.name: missing", where);
    if (!json_is_object(spec))
        return af_error_set(err, AF_EINVAL, "", 0, 0, "NodeOverlay %.63s: no spec", name);
    out->name = af_xstrdup(name);
    w = af__codec_get(spec, "weight");
    if (w && !json_is_null(w)) {
        if (!json_is_integer(w) || json_integer_value(w) < 0 || json_integer_value(w) > 10000) {
            af_overlay_release(out);
            return af_error_set(err, AF_EINVAL, "", 0, 0,
                                "NodeOverlay %.63s: spec.weight must be an integer from 1 to "
                                "10000", name);
        }
        out->weight = (int)json_integer_value(w);
    }
    if (price && adj) {
        af_overlay_release(out);
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "NodeOverlay %.63s: cannot set both 'price' and 'priceAdjustment'",
                            name);
    }
    if (price) {
        out->mode = AF_OVERLAY_PRICE;
        if (af_overlay_parse_price(price, &out->value)) {
            af_overlay_release(out);
            return af_error_set(err, AF_EINVAL, "", 0, 0,
                                "NodeOverlay %.63s: spec.price '%.40s' is not a price (digits, "
                                "an optional fraction)", name, price);
        }
    } else if (adj && af_overlay_parse_adjustment(adj, &out->mode, &out->value)) {
        af_overlay_release(out);
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "NodeOverlay %.63s: spec.priceAdjustment '%.40s' is not one "
                            "(+10%%, -15%%, +0.5, -0.50)", name, adj);
    }
    reqs = af__codec_get(spec, "requirements");
    if (reqs && !json_is_array(reqs)) {
        af_overlay_release(out);
        return af_error_set(err, AF_ETYPE, "", 0, 0,
                            "NodeOverlay %.63s: spec.requirements must be a list", name);
    }
    if (json_array_size(reqs) > OVERLAY_REQS_MAX) {
        af_overlay_release(out);
        return af_error_set(err, AF_EINVAL, "", 0, 0,
                            "NodeOverlay %.63s: more than %d requirements", name,
                            OVERLAY_REQS_MAX);
    }
    out->reqs = af_xcalloc(json_array_size(reqs) + 1, sizeof(*out->reqs));
    json_array_foreach(json_is_array(reqs) ? reqs : NULL, i, r) {
        struct af_overlay_req *q = &out->reqs[out->n_reqs];
        const char *key = af__codec_get_str(r, "key"), *op = af__codec_get_str(r, "operator");
        json_t *vals = af__codec_get(r, "values"), *v;
        size_t k, o;
        for (o = 0; op && o < AF_ARRAY_SIZE(ops); o++)
            if (!strcmp(op, ops[o].name))
                break;
        if (!key || !*key || !op || o == AF_ARRAY_SIZE(ops) ||
            (vals && !json_is_array(vals)) || json_array_size(vals) > OVERLAY_VALUES_MAX) {
            af_overlay_release(out);
            return af_error_set(err, AF_EINVAL, "", 0, 0,
                                "NodeOverlay %.63s: spec.requirements[%zu] needs a key, an "
                                "operator (In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte, Lte) "
                                "and a list of at most %d values",
                                name, i, OVERLAY_VALUES_MAX);
        }
        q->key = af_xstrdup(key);
        q->op = ops[o].op;
        out->n_reqs++;
        q->values = af_xcalloc(json_array_size(vals) + 1, sizeof(*q->values));
        json_array_foreach(json_is_array(vals) ? vals : NULL, k, v) {
            if (json_is_string(v))
                q->values[q->n_values++] = af_xstrdup(json_string_value(v));
        }
    }
    return 0;
}

int af_codec_decode_overlays(const char *json, size_t len, struct af_overlays **out,
                             struct af_error *err)
{
    json_t *root = NULL, *items, *it;
    struct af_overlay *v;
    size_t i, n = 0;
    int rc;

    *out = NULL;
    rc = af__codec_load(json, len, "NodeOverlay list", &root, err);
    if (rc)
        return rc;
    items = json_is_array(root) ? root : af__codec_get(root, "items");
    if (!json_is_array(items)) {
        json_decref(root);
        return af_error_set(err, AF_ETYPE, "", 0, 0, "expected a NodeOverlayList (items)");
    }
    v = af_xcalloc(json_array_size(items) + 1, sizeof(*v));
    json_array_foreach(items, i, it) {
        char at[32];
        struct af_error e;
        af__codec_path_index(at, sizeof(at), "items", i);
        if (af__codec_overlay_from_json(it, at, &v[n], &e)) {
            /* one bad overlay is reported and skipped: the others still price */
            AF_LOG(AF_LOG_WARN, "NodeOverlay skipped", "error", e.text, NULL);
            continue;
        }
        n++;
    }
    json_decref(root);
    *out = af_overlays_new(v, n);
    return 0;
}
