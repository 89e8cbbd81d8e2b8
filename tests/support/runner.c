/* SPDX-License-Identifier: Apache-2.0 */
/* Shared test plumbing: suite runner, temporary files, fixture reader, child-process runner. */
#include "support/support.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "accelfit/util.h"

/* ---- temporary files ------------------------------------------------------------------------ */

/*
 * Check runs each test in a child process (CK_FORK, the default) that calls exit() when the
 * test passes and _exit() when it fails, so an atexit handler in that child removes the files
 * of a passing test and leaves those of a failing one. Without fork (CK_FORK=no) every test
 * runs in the runner, which keeps all the files when any test failed.
 */
#define MAX_TEMPS 256

static struct {
    pid_t owner;        /* the process that asked for it (the test) */
    char path[512];
} temps[MAX_TEMPS];
static size_t n_temps;
static pid_t runner_pid;
static bool keep_temps;

static const char *tmp_dir(void)
{
    const char *t = getenv("TMPDIR");

    return t && *t ? t : "/tmp";
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void remove_temps(void)
{
    pid_t self = getpid();

    if (keep_temps)
        return;
    for (size_t i = 0; i < n_temps; i++)
        if (temps[i].owner == self)
            nftw(temps[i].path, remove_one, 16, FTW_DEPTH | FTW_PHYS);   /* a file or a tree */
}

char *af_test_temp_path(const char *fmt, ...)
{
    static bool registered;   /* inherited by forked tests, as the handler is */
    char what[256], test[64];
    va_list ap;
    char *path;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    /* The test's name (a file name's characters) and process make the path its own. */
    snprintf(test, sizeof(test), "%s", tcase_name() ? tcase_name() : "test");
    for (char *q = test; *q; q++)
        if (!((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9') ||
              *q == '-' || *q == '_'))
            *q = '-';
    path = af_xasprintf("%s/af-test-%d-%s-%d-%s", tmp_dir(),
                        (int)(runner_pid ? runner_pid : getpid()), test, (int)getpid(), what);
    ck_assert_msg(n_temps < MAX_TEMPS, "more than %d temporary files", MAX_TEMPS);
    ck_assert_msg(strlen(path) < sizeof(temps[0].path), "temporary path too long: %s", path);
    if (!registered) {
        ck_assert_int_eq(atexit(remove_temps), 0);
        registered = true;
    }
    temps[n_temps].owner = getpid();
    snprintf(temps[n_temps].path, sizeof(temps[0].path), "%s", path);
    n_temps++;
    return path;
}

/* After a failed run: where the files the failing tests left are. */
static void report_kept_temps(void)
{
    char prefix[64];
    DIR *d = opendir(tmp_dir());
    struct dirent *e;

    if (!d)
        return;
    snprintf(prefix, sizeof(prefix), "af-test-%d-", (int)runner_pid);
    for (e = readdir(d); e; e = readdir(d))
        if (!strncmp(e->d_name, prefix, strlen(prefix)))
            fprintf(stderr, "kept for a failing test: %s/%s\n", tmp_dir(), e->d_name);
    closedir(d);
}

/* ---- the runner ------------------------------------------------------------------------------ */

int af_test_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    int failed;

    runner_pid = getpid();
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (failed) {
        keep_temps = true;
        report_kept_temps();
    }
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
    /* A child that died by a signal (a sanitizer's report ends in abort) says why here,
     * whatever the test does with its stderr. */
    if (WIFSIGNALED(status) && be.len)
        fprintf(stderr, "%s died by signal %d; its stderr:\n%.*s\n", argv[0],
                WTERMSIG(status), (int)be.len, be.buf);
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
