/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tests/apiserver/fake_apiserver.py as a child process for black-box tests:
 * the fake API server on loopback HTTPS, and its plain-HTTP control channel to
 * add, change and delete nodes and pods while accelfit watches and to read what
 * it saw (dump, events, requests, stats). af_test_fake_api_start also makes a
 * throw-away CA and server certificate (openssl) and a kubeconfig that points
 * `accelfit serve --kubeconfig` at it; af_test_fake_api_spawn runs it with a
 * certificate, token and arguments of the test's own.
 */
#ifndef AF_TEST_FAKE_API_H
#define AF_TEST_FAKE_API_H

#include <jansson.h>
#include <stdbool.h>
#include <sys/types.h>

struct af_test_fake_api {
    pid_t pid;
    int port;              /* HTTPS, the API */
    int admin_port;        /* plain HTTP, the control channel */
    int in_fd;             /* the server exits when this closes */
    char dir[128];         /* af_test_fake_api_start: certificates and the kubeconfig */
    char kubeconfig[192];  /* af_test_fake_api_start: token auth, the CA of `dir` */
};

/* True when python3 with its ssl and http.server modules is here to run the server. */
bool af_test_fake_api_available(void);

/* Starts it with the recorded initial state (tests/fixtures/apiserver). Returns false, with
 * nothing started, when python3 or openssl is missing; aborts the test on other failures. */
bool af_test_fake_api_start(struct af_test_fake_api *f);
/* The same with more arguments for the fake (NULL-terminated): "--nodeoverlays", ... */
bool af_test_fake_api_start_with(struct af_test_fake_api *f, const char *const *extra);

/*
 * Starts it serving the certificate `crt` with key `key`, taking the bearer token `token`,
 * with the further arguments `extra` (NULL-terminated, may be NULL: "--synthetic-nodes",
 * "60", ...), and waits for it to say which ports it listens on. Fills pid, port,
 * admin_port and in_fd of `f`, which starts zeroed; dir and kubeconfig stay empty. It dies
 * with the test process. Aborts the test when it does not start.
 */
void af_test_fake_api_spawn(struct af_test_fake_api *f, const char *crt, const char *key,
                            const char *token, const char *const *extra);

/* Stops it and waits for it; removes what af_test_fake_api_start made. Twice is fine. */
void af_test_fake_api_stop(struct af_test_fake_api *f);

/* POSTs `json` (NULL: "{}") to the control command `cmd` ("add_pod", "dump", "events", ...)
 * and returns its JSON answer (caller decrefs); aborts the test unless it answers 200. */
json_t *af_test_fake_api_admin(const struct af_test_fake_api *f, const char *cmd,
                               const char *json);
/* af_test_fake_api_admin for a command whose answer does not matter. */
void af_test_fake_api_do(const struct af_test_fake_api *f, const char *cmd, const char *json);

#endif
