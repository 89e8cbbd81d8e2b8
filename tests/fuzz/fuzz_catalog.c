/* SPDX-License-Identifier: Apache-2.0 */
/* The catalog loader (af_catalog_load_mem) on arbitrary YAML: it loads or says where not. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct af_catalog *c = NULL;
    struct af_error err = {0};
    int rc;

    af_log_level = AF_LOG_OFF;
    rc = af_catalog_load_mem(&c, "fuzz.yaml", (const char *)data, size, &err);
    FUZZ_CHECK(rc == 0 ? c != NULL : (c == NULL && err.text[0]), "rc %d", rc);
    af_catalog_free(c);
    return 0;
}
