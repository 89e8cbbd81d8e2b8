/* SPDX-License-Identifier: Apache-2.0 */
/* Shared test plumbing: suite runner, fixture reader, child-process runner. */
#include "support/support.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accelfit/util.h"

int af_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

const char *af_test_path(const char *relpath)
{
    static char bufs[8][4096];
    static int next;
    char *b = bufs[next++ % 8];

    snprintf(b, sizeof(bufs[0]), "%s/%s", AF_SOURCE_DIR, relpath);
    return b;
}

char *af_test_read(const char *relpath, size_t *len)
{
    struct af_buf b = AF_BUF_INIT(0);
    const char *path = af_test_path(relpath);

    if (af_buf_read_file(&b, path) != 0)
        ck_abort_msg("cannot read fixture '%s'", path);
    return af_buf_detach(&b, len);
}

static void drain(int fd, struct af_buf *b, bool *open_)
{
    char chunk[8192];
    ssize_t n = read(fd, chunk, sizeof(chunk));

    if (n > 0) {
        if (af_buf_add(b, chunk, (size_t)n) != 0)
            ck_abort_msg("child output too large");
    } else {
        *open_ = false;
    }
}

int af_test_exec(const char *const *argv, const char *stdin_text, char **out, char **err)
{
    int pin[2], pout[2], perr[2], status = 0;
    struct af_buf bo = AF_BUF_INIT(64u << 20), be = AF_BUF_INIT(64u << 20);
    bool oo = true, eo = true;
    pid_t pid;

    ck_assert(pipe(pin) == 0 && pipe(pout) == 0 && pipe(perr) == 0);
    pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        dup2(pin[0], 0);
        dup2(pout[1], 1);
        dup2(perr[1], 2);
        close(pin[1]);
        close(pout[0]);
        close(perr[0]);
        execv(AF_BINARY, (char *const *)argv);
        _exit(127);
    }
    close(pin[0]);
    close(pout[1]);
    close(perr[1]);
    signal(SIGPIPE, SIG_IGN);
    if (stdin_text) {
        size_t left = strlen(stdin_text);
        while (left) {
            ssize_t n = write(pin[1], stdin_text, left);
            if (n <= 0)
                break;
            stdin_text += n;
            left -= (size_t)n;
        }
    }
    close(pin[1]);
    while (oo || eo) {
        struct pollfd p[2] = {{pout[0], POLLIN, 0}, {perr[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0)
            break;
        if (oo && (p[0].revents & (POLLIN | POLLHUP)))
            drain(pout[0], &bo, &oo);
        if (eo && (p[1].revents & (POLLIN | POLLHUP)))
            drain(perr[0], &be, &eo);
        if (!oo)
            p[0].fd = -1;
        if (!eo)
            p[1].fd = -1;
    }
    close(pout[0]);
    close(perr[0]);
    waitpid(pid, &status, 0);
    if (out)
        *out = af_buf_detach(&bo, NULL);
    else
        af_buf_release(&bo);
    if (err)
        *err = af_buf_detach(&be, NULL);
    else
        af_buf_release(&be);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
