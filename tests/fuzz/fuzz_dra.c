/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DRA decoders (src/codec/dra.c) and the index (src/core/dra.c) on arbitrary bytes: a list
 * and a watch event of each kind, a cluster file's DRA objects, the input as a CEL expression;
 * then whatever decoded is indexed and a pod naming claims of every kind is judged on every
 * node. Each must decode or fail with a message; none may crash or leak, and a node's devices
 * in use never exceed its devices.
 */
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/dra.h"
#include "fuzz.h"

#define KEEP 64

struct kept {
    struct af_dra_slice *slices[KEEP];
    struct af_dra_claim *claims[KEEP], *templates[KEEP];
    struct af_dra_class *classes[KEEP];
    size_t n[AF_DRA_KINDS];
};

static void keep(void *ud, struct af_dra_obj *o)
{
    struct kept *k = ud;

    if (k->n[o->kind] == KEEP) {
        af_dra_obj_clear(o);
        return;
    }
    if (o->kind == AF_DRA_SLICE)
        k->slices[k->n[o->kind]++] = o->slice;
    else if (o->kind == AF_DRA_CLAIM)
        k->claims[k->n[o->kind]++] = o->claim;
    else if (o->kind == AF_DRA_TEMPLATE)
        k->templates[k->n[o->kind]++] = o->claim;
    else
        k->classes[k->n[o->kind]++] = o->cls;
    memset(o, 0, sizeof(*o));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *json = (const char *)data;
    struct kept k;
    struct af_error err;
    struct af_dra *d;
    char *text = af_xstrndup(json, size);
    int rc;

    memset(&k, 0, sizeof(k));
    for (int kind = 0; kind < AF_DRA_KINDS; kind++) {
        char *rv = NULL, *cont = NULL;
        size_t skipped = 0;
        struct af_dra_event ev;

        memset(&err, 0, sizeof(err));
        rc = af_codec_decode_dra_list((enum af_dra_kind)kind, json, size, keep, &k, &rv, &cont,
                                      &skipped, &err);
        FUZZ_CHECK(rc == 0 || err.text[0], "list: rc %d without a message", rc);
        af_free(rv);
        af_free(cont);
        memset(&err, 0, sizeof(err));
        rc = af_codec_decode_dra_event((enum af_dra_kind)kind, json, size, &ev, &err);
        FUZZ_CHECK(rc == 0 || err.text[0], "event: rc %d without a message", rc);
        if (!rc && (ev.type == AF_DRA_EV_UPSERT || ev.type == AF_DRA_EV_DELETED))
            keep(&k, &ev.obj);
        af_dra_obj_clear(&ev.obj);
    }
    memset(&err, 0, sizeof(err));
    rc = af_codec_decode_cluster_dra("fuzz.yaml", json, size, keep, &k, &err);
    FUZZ_CHECK(rc == 0 || err.text[0], "cluster: rc %d without a message", rc);
    {
        struct af_dra_selector sel;
        memset(&sel, 0, sizeof(sel));
        af_dra_selector_parse(&sel, text);
        af_dra_selector_clear(&sel);
    }

    d = af_dra_build(k.slices, k.n[AF_DRA_SLICE], k.claims, k.n[AF_DRA_CLAIM], k.templates,
                     k.n[AF_DRA_TEMPLATE], k.classes, k.n[AF_DRA_CLASS]);
    {
        /* a pod naming every claim and template that decoded, judged on every node */
        struct af_pod_info *pod = af_pod_info_new();
        struct af_dra_demand dm;
        size_t n = 0;

        pod->ns = af_xstrdup(d->n_claims ? d->claims[0]->ns : d->n_templates ? d->templates[0]->ns
                                                                             : "default");
        pod->name = af_xstrdup("p");
        pod->uid = af_xstrdup("u");
        pod->claims = af_xcalloc(AF_POD_CLAIMS_MAX, sizeof(*pod->claims));
        for (size_t i = 0; i < d->n_claims && n < AF_POD_CLAIMS_MAX; i++) {
            pod->claims[n].name = af_xstrdup("c");
            pod->claims[n++].claim = af_xstrdup(d->claims[i]->name);
        }
        for (size_t i = 0; i < d->n_templates && n < AF_POD_CLAIMS_MAX; i++) {
            pod->claims[n].name = af_xstrdup("t");
            pod->claims[n++].tmpl = af_xstrdup(d->templates[i]->name);
        }
        pod->n_claims = (int)n;
        af_dra_pod_demand(d, pod, &dm);
        for (size_t i = 0; i < d->n_nodes; i++) {
            char why[256];
            const struct af_dra_node *dn = &d->nodes[i];
            (void)af_dra_node_fits(d, &dm, dn->name, why, sizeof(why));
            FUZZ_CHECK(af_dra_find_node(d, dn->name) == dn, "node %zu not found by name", i);
            for (int r = 0; r < AF_RES__COUNT; r++)
                FUZZ_CHECK(dn->allocated.v[r] <= dn->devices.v[r], "more in use than there are");
        }
        af_pod_info_unref(pod);
    }
    af_dra_unref(d);
    for (size_t i = 0; i < k.n[AF_DRA_SLICE]; i++)
        af_dra_slice_unref(k.slices[i]);
    for (size_t i = 0; i < k.n[AF_DRA_CLAIM]; i++)
        af_dra_claim_unref(k.claims[i]);
    for (size_t i = 0; i < k.n[AF_DRA_TEMPLATE]; i++)
        af_dra_claim_unref(k.templates[i]);
    for (size_t i = 0; i < k.n[AF_DRA_CLASS]; i++)
        af_dra_class_unref(k.classes[i]);
    af_free(text);
    return 0;
}
