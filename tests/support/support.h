/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test support shared by the Check suites: running a suite, reading fixtures
 * relative to the source tree, temporary files that outlive only a failing
 * test, and running the built accelfit binary.
 */
#ifndef AF_TEST_SUPPORT_H
#define AF_TEST_SUPPORT_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#include "accelfit/util.h"

/*
 * Runs `s` with CK_NORMAL output; returns the process exit status (0 = all passed).
 * When a test failed, prints the path of each temporary file kept for it (see
 * af_test_temp_path).
 */
int af_test_run(Suite *s);

/*
 * A new path for a temporary file: "$TMPDIR/af-test-RUNNER-TEST-PID-WHAT" (TMPDIR defaults
 * to /tmp; RUNNER is the pid of the process running the suite, TEST the running test's name,
 * PID its process; WHAT is printf-formatted). The file
 * (or directory, with what it holds), once created, is deleted when the test that asked for
 * it passes (its process exits normally) and kept when the test fails, when af_test_run
 * prints where it is; asked for in an unchecked fixture, it lives until the suite ends.
 * The caller frees the path.
 */
char *af_test_temp_path(const char *fmt, ...) AF_PRINTF(1, 2);

/* Reads AF_SOURCE_DIR "/" relpath; aborts the test when missing. Caller frees. */
char *af_test_read(const char *relpath, size_t *len);
/* Absolute path of a file in the source tree (static buffer rotation of 8). */
const char *af_test_path(const char *relpath);

/*
 * A certificate for `san` (an openssl subjectAltName list: "IP:127.0.0.1,DNS:localhost"),
 * with an EC P-256 key, as PREFIX.crt and PREFIX.key in the existing directory `dir`,
 * signed by the test CA there (ca.crt and ca.key, made on the first call). Aborts the test
 * when openssl fails or is missing.
 */
void af_test_make_cert(const char *dir, const char *prefix, const char *san);

/*
 * Runs the accelfit binary with argv (argv[0] is ignored; NULL-terminated),
 * optional stdin text, and captures stdout and stderr (caller frees).
 * Returns the exit status, or 128+signal.
 */
int af_test_exec(const char *const *argv, const char *stdin_text, char **out, char **err);

/*
 * Evaluates `cond` every 100 ms until it holds or `seconds` pass; true when it held. The
 * time is a deadline for a broken build, never a timing assertion: pick it generous.
 */
#define AF_TEST_WAIT_FOR(seconds, cond)                                                     \
    ({                                                                                      \
        bool ok_ = false;                                                                   \
        for (int i_ = 0; i_ < (seconds) * 10 && !(ok_ = (cond)); i_++)                      \
            nanosleep(&(struct timespec){0, 100000000L}, NULL);                             \
        ok_;                                                                                \
    })

#endif
