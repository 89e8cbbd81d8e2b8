/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Policies for tests that add a section to the built-in one: the embedded
 * default policy followed by the test's own text, loaded in memory or written
 * to a temporary file for the config loader and the accelfit binary.
 */
#ifndef AF_TEST_POLICY_H
#define AF_TEST_POLICY_H

#include "accelfit/config.h"

/* Lines of the embedded default policy: text appended to it starts on the line after. */
int af_test_policy_lines(void);

/* The embedded default policy with `extra` appended, loaded as "p.yaml"; returns
 * af_policy_load_mem's result with *err filled on failure. */
int af_test_policy_load_with(const char *extra, struct af_policy **out, struct af_error *err);

/* The embedded default policy with `extra` appended, written to a new temporary file
 * (af_test_temp_path: kept only when the test fails). Returns its path; caller frees. */
char *af_test_policy_file(const char *extra);

#endif
