/* SPDX-License-Identifier: Apache-2.0 */
/* Fake servers as child processes (child.h). */
#include "support/child.h"

#include <check.h>
#include <curl/curl.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/http_client.h"
#include "support/support.h"

pid_t af_test_child_spawn(const char *const *argv, int *in_fd, char *line, size_t len)
{
    int out[2], in[2];
    size_t n = 0;
    pid_t pid;

    /* Close-on-exec, so no other child holds the server's stdin open. */
    ck_assert_int_eq(pipe2(out, O_CLOEXEC), 0);
    ck_assert_int_eq(pipe2(in, O_CLOEXEC), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(in[0], 0);
        dup2(out[1], 1);
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(out[1]);
    close(in[0]);
    *in_fd = in[1];
    while (n + 1 < len) {
        ssize_t r = read(out[0], line + n, 1);
        if (r <= 0 || line[n] == '\n')
            break;
        n++;
    }
    line[n] = '\0';
    close(out[0]);
    return pid;
}

void af_test_child_stop(pid_t *pid, int in_fd)
{
    if (*pid <= 0)
        return;
    close(in_fd);
    kill(*pid, SIGTERM);
    waitpid(*pid, NULL, 0);
    *pid = 0;
}

void af_test_child_cert_dir(char *dir, size_t len, const char *name)
{
    char *cmd;

    snprintf(dir, len, "/tmp/af-%s-%d", name, (int)getpid());
    cmd = af_xasprintf("rm -rf '%1$s' && mkdir -p '%1$s'", dir);
    ck_assert_msg(system(cmd) == 0, "cannot make %s", dir);
    af_free(cmd);
    af_test_make_cert(dir, "srv", "IP:127.0.0.1,DNS:localhost");
}

void af_test_child_rm_dir(char *dir)
{
    char *cmd;

    if (!dir[0])
        return;
    cmd = af_xasprintf("rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", dir);
    af_free(cmd);
    dir[0] = '\0';
}

json_t *af_test_child_admin(int port, const char *cmd, const char *json)
{
    CURL *c = curl_easy_init();
    struct af_test_resp r;
    char url[128];
    json_t *j;

    if (!json)
        json = "{}";
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/%s", port, cmd);
    ck_assert_int_eq(af_test_http(c, "POST", url, json, strlen(json), NULL, &r), CURLE_OK);
    ck_assert_msg(r.status == 200, "%s %s: %ld %s", cmd, json, r.status, r.body);
    j = json_loadb(r.body, r.len, 0, NULL);
    ck_assert_msg(j != NULL, "%s %s: not JSON: %s", cmd, json, r.body);
    af_test_resp_free(&r);
    curl_easy_cleanup(c);
    return j;
}
