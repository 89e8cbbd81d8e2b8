/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fake servers of the black-box tests (tests/apiserver, tests/aws) as child processes:
 * started with a pipe on stdin that makes them exit when the test goes away, ready once
 * they print one line ("READY <port> <admin port>"), steered by JSON POSTed to their
 * plain-HTTP control channel.
 */
#ifndef AF_TEST_CHILD_H
#define AF_TEST_CHILD_H

#include <jansson.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Runs argv (argv[0] found on PATH) with stdin from a pipe and stdout read up to its first
 * line, which goes into `line`. Returns the pid; *in_fd is the pipe's end to close to make
 * the child exit. It also gets SIGTERM when the test process dies. Aborts the test when
 * it cannot start.
 */
pid_t af_test_child_spawn(const char *const *argv, int *in_fd, char *line, size_t len);
/* Closes in_fd, sends SIGTERM and waits. *pid <= 0 does nothing; sets *pid to 0. */
void af_test_child_stop(pid_t *pid, int in_fd);

/*
 * Makes the directory "/tmp/af-NAME-PID" afresh, with srv.crt and srv.key for 127.0.0.1 and
 * localhost signed by its ca.crt (af_test_make_cert), and puts its path in `dir`.
 */
void af_test_child_cert_dir(char *dir, size_t len, const char *name);
/* Removes `dir` and what it holds, then empties it; an empty `dir` does nothing. */
void af_test_child_rm_dir(char *dir);

/* POSTs `json` (NULL: "{}") to http://127.0.0.1:PORT/CMD and returns its JSON answer
 * (caller decrefs); aborts the test unless it answers 200 with JSON. */
json_t *af_test_child_admin(int port, const char *cmd, const char *json);

#endif
