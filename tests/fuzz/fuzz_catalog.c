/* SPDX-License-Identifier: Apache-2.0 */
/* The catalog loader (af_catalog_load_mem) on arbitrary YAML: it loads or says where not,
 * and what it loads is within its bounds (prices at most AF_PRICE_MAX_USD_HR). */
#include <math.h>

#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct af_catalog *c = NULL;
    struct af_error err = {0};
    int rc;

    af_log_level = AF_LOG_OFF;
    rc = af_catalog_load_mem(&c, "fuzz.yaml", (const char *)data, size, &err);
    FUZZ_CHECK(rc == 0 ? c != NULL : (c == NULL && err.text[0]), "rc %d", rc);
    /* every number within its bound: prices at most AF_PRICE_MAX_USD_HR */
    for (size_t i = 0; c && i < c->n_types; i++) {
        const struct af_instance_type *t = &c->types[i];
        FUZZ_CHECK(t->price_usd_hr <= AF_PRICE_MAX_USD_HR && isfinite(t->memory_gib) &&
                       isfinite(t->accel_memory_gib_per_device) && t->spot_discount_pct < 100,
                   "%s: price %g", t->name, t->price_usd_hr);
    }
    af_catalog_free(c);
    return 0;
}
