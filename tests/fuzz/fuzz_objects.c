/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Kubernetes object decoders on arbitrary bytes: one Node, one Pod, a List (strict and
 * skipping; JSON, or Kubernetes' protobuf when the bytes start "k8s\0"), and a watch event of
 * either kind. Each must either decode or fail with a message; none may crash or leak. And
 * the codec's JSON reader must take and refuse what jansson does, building the same tree.
 */
#include <jansson.h>

#include "accelfit/codec.h"
#include "codec/internal.h"
#include "fuzz.h"

static void drop(void *ud, struct af_node_info *node, struct af_pod_info *pod)
{
    size_t *n = ud;

    (*n)++;
    af_node_info_unref(node);
    af_pod_info_unref(pod);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct af_config *cfg = fuzz_config();
    const char *json = (const char *)data;
    struct af_node_info *node = NULL;
    struct af_pod_info *pod = NULL;
    struct af_error err = {0};
    char *rv = NULL, *cont = NULL;
    size_t n = 0, skipped = 0;
    int rc;

    rc = af_codec_decode_node(cfg, json, size, &node, &err);
    FUZZ_CHECK(rc == 0 ? node != NULL : err.text[0] != 0, "node: rc %d", rc);
    af_node_info_unref(node);

    memset(&err, 0, sizeof(err));
    rc = af_codec_decode_pod(json, size, &pod, &err);
    FUZZ_CHECK(rc == 0 ? pod != NULL : err.text[0] != 0, "pod: rc %d", rc);
    af_pod_info_unref(pod);

    memset(&err, 0, sizeof(err));
    rc = af_codec_decode_list(cfg, json, size, drop, &n, &rv, &cont, &err);
    FUZZ_CHECK(rc == 0 || err.text[0], "list: rc %d without a message", rc);
    af_free(rv);
    af_free(cont);
    rv = cont = NULL;

    memset(&err, 0, sizeof(err));
    rc = af_codec_decode_list_skip(cfg, json, size, drop, &n, &rv, &cont, &skipped, &err);
    FUZZ_CHECK(rc == 0 || err.text[0], "list_skip: rc %d without a message", rc);
    af_free(rv);
    af_free(cont);

    static const size_t parse_flags[] = {0, JSON_DECODE_ANY, JSON_ALLOW_NUL,
                                         JSON_ALLOW_NUL | JSON_DECODE_ANY};
    for (size_t f = 0; f < AF_ARRAY_SIZE(parse_flags); f++) {
        size_t flags = parse_flags[f];
        json_error_t je;
        struct af__codec_perr pe;
        json_t *want = json_loadb(json, size, flags, &je);
        json_t *got = af__codec_parse(json, size, flags, &pe);
        FUZZ_CHECK(!want == !got, "reader and jansson disagree (flags %zx): %s / %s", flags,
                   want ? "taken" : je.text, got ? "taken" : pe.text);
        FUZZ_CHECK(!want || json_equal(want, got), "reader and jansson build different trees");
        json_decref(want);
        json_decref(got);
    }

    for (int kind = AF_KIND_NODE; kind <= AF_KIND_POD; kind++) {
        struct af_watch_event ev;
        memset(&ev, 0, sizeof(ev));
        memset(&err, 0, sizeof(err));
        rc = af_codec_decode_watch_event(cfg, (enum af_kind)kind, json, size, &ev, &err);
        FUZZ_CHECK(rc == 0 || err.text[0], "watch event: rc %d without a message", rc);
        af_watch_event_clear(&ev);
    }
    return 0;
}
