/* SPDX-License-Identifier: Apache-2.0 */
/* The policy loader (af_policy_load_mem) on arbitrary YAML: it loads or says where not. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct af_policy *p = NULL;
    struct af_error err = {0};
    int rc;

    af_log_level = AF_LOG_OFF;
    rc = af_policy_load_mem(&p, "fuzz.yaml", (const char *)data, size, &err);
    FUZZ_CHECK(rc == 0 ? p != NULL : (p == NULL && err.text[0]), "rc %d", rc);
    af_policy_free(p);
    return 0;
}
