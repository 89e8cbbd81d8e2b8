/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Cluster files (af_codec_decode_cluster: YAML through af_yaml_to_json, or
 * JSON), and af_yaml_to_json on its own: what it writes must be JSON that
 * jansson reads back, and it must stay within its output limits however the
 * input uses aliases.
 */
#include <jansson.h>

#include "accelfit/codec.h"
#include "fuzz.h"

static void drop(void *ud, struct af_node_info *node, struct af_pod_info *pod)
{
    (void)ud;
    af_node_info_unref(node);
    af_pod_info_unref(pod);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const struct af_config *cfg = fuzz_config();
    const char *text = (const char *)data;
    struct af_buf out = AF_BUF_INIT(0);
    struct af_error err = {0};
    int rc;

    rc = af_yaml_to_json("fuzz.yaml", text, size, &out, &err);
    if (rc == 0) {
        json_error_t jerr;
        json_t *j = json_loadb(out.buf, out.len, JSON_DECODE_ANY | JSON_ALLOW_NUL, &jerr);
        FUZZ_CHECK(j, "af_yaml_to_json wrote what is not JSON: %s: %.200s", jerr.text, out.buf);
        json_decref(j);
    } else {
        FUZZ_CHECK(out.len == 0 && err.text[0], "rc %d, %zu bytes written", rc, out.len);
    }
    af_buf_release(&out);

    memset(&err, 0, sizeof(err));
    rc = af_codec_decode_cluster(cfg, "fuzz.yaml", text, size, drop, NULL, &err);
    FUZZ_CHECK(rc == 0 || err.text[0], "cluster: rc %d without a message", rc);
    return 0;
}
