/* SPDX-License-Identifier: Apache-2.0 */
/*
 * AdmissionReview bodies for the /mutate webhook on arbitrary bytes:
 * af_codec_decode_admission must accept, set aside (not a Pod CREATE) or refuse each,
 * never crash, and say why it refused. For an accepted review the annotations-only
 * patch (what every pod of a rollout gets) must build, as a JSON array, or be refused
 * with a warning saying why (a pod accelfit cannot change safely is allowed unchanged).
 */
#include <jansson.h>

#include "accelfit/codec.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct af_admission *a = NULL;
    struct af_mutation m;
    struct af_warnings w;
    struct af_error err;
    struct af_buf patch;
    json_t *j;
    int rc;

    memset(&err, 0, sizeof(err));
    (void)fuzz_config();   /* logging off */
    rc = af_codec_decode_admission((const char *)data, size, &a, &err);
    if (rc == AF_EUNSUPPORTED) {
        FUZZ_CHECK(a && af_admission_uid(a) && !af_admission_pod(a), "set aside without a uid");
        af_admission_free(a);
        return 0;
    }
    if (rc != 0) {
        FUZZ_CHECK(rc < 0 && a == NULL && err.text[0], "rc %d without a reason", rc);
        return 0;
    }
    FUZZ_CHECK(a && af_admission_uid(a) && af_admission_pod(a), "accepted without a pod");
    FUZZ_CHECK(af_admission_pod(a)->ns != NULL, "accepted pod without a namespace");

    memset(&m, 0, sizeof(m));
    memset(&w, 0, sizeof(w));
    m.rollout = "fuzz";
    m.side = AF_SIDE_SOURCE;
    af_buf_init(&patch, 1u << 20);
    rc = af_codec_admission_patch(a, &m, &patch, NULL, &w);
    if (rc == 0 && patch.len) {
        j = json_loadb(patch.buf, patch.len, 0, NULL);
        FUZZ_CHECK(json_is_array(j), "the patch is not a JSON array: %.200s", patch.buf);
        json_decref(j);
    } else if (rc != 0) {
        FUZZ_CHECK(rc == AF_ETOOBIG || (rc == AF_EINVAL && w.n > 0), "rc %d, %zu warnings", rc,
                   w.n);
    }
    af_buf_release(&patch);
    af_admission_free(a);
    return 0;
}
