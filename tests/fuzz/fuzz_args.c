/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The extender request decoder (af_codec_decode_args) on arbitrary bytes, and
 * a differential check of its names-mode fast path: the fast path may decline
 * anything, but what it accepts jansson (flags 0, as the general path loads)
 * must accept too, and the general path must decode it to the same request.
 */
#include <jansson.h>

#include "accelfit/codec.h"
#include "codec/internal.h"
#include "fuzz.h"

static bool same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

/* The fields of the decoded Pod that the two paths both fill. */
static void check_same_pod(const struct af_pod_info *f, const struct af_pod_info *g)
{
    FUZZ_CHECK(same_str(f->ns, g->ns), "namespace '%s' vs '%s'", f->ns, g->ns);
    FUZZ_CHECK(same_str(f->name, g->name), "name '%s' vs '%s'", f->name, g->name);
    FUZZ_CHECK(same_str(f->uid, g->uid), "uid '%s' vs '%s'", f->uid, g->uid);
    FUZZ_CHECK(same_str(f->node_name, g->node_name), "nodeName '%s' vs '%s'", f->node_name,
               g->node_name);
    FUZZ_CHECK(f->terminal == g->terminal && f->system == g->system, "pod flags differ");
    FUZZ_CHECK(!memcmp(&f->requests, &g->requests, sizeof(f->requests)), "requests differ");
}

static void check_same_args(const struct af_ext_args *f, const struct af_ext_args *g)
{
    size_t n = af_ext_args_count(f);

    FUZZ_CHECK(!af_ext_args_nodes_mode(f) && !af_ext_args_nodes_mode(g), "fast path took Nodes");
    FUZZ_CHECK(n == af_ext_args_count(g), "%zu names vs %zu", n, af_ext_args_count(g));
    for (size_t i = 0; i < n; i++)
        FUZZ_CHECK(!strcmp(af_ext_args_name(f, i), af_ext_args_name(g, i)),
                   "name %zu: '%s' vs '%s'", i, af_ext_args_name(f, i), af_ext_args_name(g, i));
    check_same_pod(af_ext_args_pod(f), af_ext_args_pod(g));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct af_config *cfg = fuzz_config();
    const char *body = (const char *)data;
    struct af_ext_args *fast = NULL, *general = NULL, *both = NULL;
    struct af_error gerr = {0}, err = {0};
    json_t *j = json_loadb(body, size, 0, NULL);
    int took_fast = af__codec_args_fast(body, size, &fast);
    int grc = af__codec_args_general(cfg, body, size, &general, &gerr);
    int rc = af_codec_decode_args(cfg, body, size, &both, &err);

    FUZZ_CHECK(!took_fast || j, "the fast path accepted a body jansson refuses");
    FUZZ_CHECK(grc != 0 || j, "the general path accepted a body jansson refuses");
    FUZZ_CHECK((grc == 0) == (general != NULL), "general: rc %d but out %p", grc,
               (void *)general);
    FUZZ_CHECK(grc == 0 || gerr.text[0], "general path failed (%d) without a message", grc);
    if (took_fast) {
        FUZZ_CHECK(fast, "fast path took the body but gave no result");
        FUZZ_CHECK(grc == 0, "fast path accepted, general path refused: %s", gerr.text);
        check_same_args(fast, general);
    }
    FUZZ_CHECK((rc == 0) == (took_fast || grc == 0), "decode_args %d, fast %d, general %d", rc,
               took_fast, grc);
    af_ext_args_free(fast);
    af_ext_args_free(general);
    af_ext_args_free(both);
    json_decref(j);
    return 0;
}
