/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/apiserver/fake_apiserver.py as a child process for black-box tests:
 * a throw-away CA and server certificate (openssl), the fake API server on
 * loopback HTTPS, a kubeconfig that points `accelfit serve --kubeconfig` at
 * it, and its plain-HTTP control channel to add, change and delete nodes and
 * pods while accelfit watches.
 */
#ifndef AF_TEST_FAKE_API_H
#define AF_TEST_FAKE_API_H

#include <stdbool.h>
#include <sys/types.h>

struct af_test_fake_api {
    pid_t pid;
    int port;              /* HTTPS, the API */
    int admin_port;        /* plain HTTP, the control channel */
    int in_fd;             /* the server exits when this closes */
    char dir[128];         /* certificates and the kubeconfig */
    char kubeconfig[192];  /* token auth, the CA of `dir` */
};

/* Starts it with the recorded initial state (tests/fixtures/apiserver). Returns false, with
 * nothing started, when python3 or openssl is missing; aborts the test on other failures. */
bool af_test_fake_api_start(struct af_test_fake_api *f);
void af_test_fake_api_stop(struct af_test_fake_api *f);

/* POSTs `json` to the control command `cmd` ("add_pod", "delete_pod", ...); aborts the test
 * unless it answers 200. */
void af_test_fake_api_do(const struct af_test_fake_api *f, const char *cmd, const char *json);

#endif
