/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared by the fuzz harnesses (tests/fuzz/fuzz_*.c). Each harness defines
 * LLVMFuzzerTestOneInput and is linked either with libFuzzer (clang
 * -fsanitize=fuzzer, `./run.sh fuzz`) or with replay.c, which feeds it every
 * file of its corpus (ctest, any compiler). A harness says what must hold with
 * FUZZ_CHECK; a failed check aborts, which both drivers report as a failure.
 */
#ifndef AF_FUZZ_H
#define AF_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/config.h"
#include "accelfit/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_CHECK(cond, ...)                                                    \
    do {                                                                         \
        if (!(cond)) {                                                           \
            fprintf(stderr, "fuzz check failed: %s (%s:%d): ", #cond, __FILE__,  \
                    __LINE__);                                                   \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
            abort();                                                             \
        }                                                                        \
    } while (0)

/* The embedded catalog and policy, loaded once; logging off (decoders log skipped
 * objects, which would drown the fuzzer's own output). Never NULL. */
static inline const struct af_config *fuzz_config(void)
{
    static struct af_config *cfg;

    if (!cfg) {
        struct af_error err = {0};
        af_log_level = AF_LOG_OFF;
        FUZZ_CHECK(af_config_load(&cfg, NULL, NULL, &err) == 0, "embedded config: %s",
                   err.text);
    }
    return cfg;
}

/* The input as a C string (cut at its first NUL). Caller frees with af_free. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    return af_xstrndup((const char *)data, size);
}

#endif
