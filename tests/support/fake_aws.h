/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/aws/fake_aws.py as a child process: the Pricing, EC2, STS and Pod Identity
 * endpoints on loopback HTTPS with a throw-away CA, checking every SigV4 signature, and
 * its plain-HTTP control channel (credentials, prices, faults, the requests it saw).
 */
#ifndef AF_TEST_FAKE_AWS_H
#define AF_TEST_FAKE_AWS_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

#include "accelfit/util.h"

struct af_test_fake_aws {
    pid_t pid;
    int port;              /* HTTPS: every endpoint */
    int admin_port;        /* plain HTTP: the control channel */
    int in_fd;             /* the server exits when this closes */
    char dir[128];         /* its certificates (ca.crt), and files tests write */
    char url[64];          /* "https://127.0.0.1:PORT" */
};

/*
 * Starts it and points this process's environment at it: AWS_ENDPOINT_URL is its URL,
 * AWS_CA_BUNDLE its CA, AWS_REGION eu-west-1, and no credential variable is set. Returns
 * false, with nothing started, when python3 or openssl is missing.
 */
bool af_test_fake_aws_start(struct af_test_fake_aws *f);
/* Stops it and removes its directory. Twice is fine. */
void af_test_fake_aws_stop(struct af_test_fake_aws *f);

/* POSTs the printf-formatted JSON to control command `cmd`; returns the answer (caller
 * decrefs). Aborts the test unless it answers 200. */
json_t *af_test_fake_aws_admin(const struct af_test_fake_aws *f, const char *cmd,
                               const char *fmt, ...) AF_PRINTF(3, 4);
/* The same for a command whose answer does not matter. */
void af_test_fake_aws_do(const struct af_test_fake_aws *f, const char *cmd, const char *fmt,
                         ...) AF_PRINTF(3, 4);

/* Sets static credentials the fake accepts (AWS_ACCESS_KEY_ID ...; no session token). */
void af_test_fake_aws_static_keys(const struct af_test_fake_aws *f);

#endif
