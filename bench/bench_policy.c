/* SPDX-License-Identifier: Apache-2.0 */
/*
 * bench_policy: how long a big policy takes to load, and how much memory.
 *
 * Generates policies in memory and loads each with af_policy_load_mem, the
 * loader behind --policy and check-policy, in a child process of its own, so
 * that each case's peak memory is its own:
 *   - rules: a policy of about `mb` MB (default 15.7) made of short rules
 *     (about 106,000 at the default size), which must load;
 *   - keys: one rule whose match mapping has 100,000 keys, the last of which
 *     repeats the first, which must fail with "duplicate key";
 *   - keys-unique: the same without the repeat, which must fail with
 *     "unknown key" once every key has been checked for repeats.
 * For each case it prints the size of the text, the load time (best of
 * `runs`, default 3), VmRSS before the load and VmHWM (peak) during it, both
 * from /proc/self/status; the peak is reset after the text is generated
 * (/proc/self/clear_refs), so it counts the text plus what loading adds.
 * Usage: bench_policy [mb] [runs]
 *        bench_policy --write DIR [mb]   (writes DIR/rules.yaml, keys.yaml and
 *        keys-unique.yaml, to time `accelfit check-policy --policy FILE` on them)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "accelfit/config.h"
#include "accelfit/util.h"

#define N_KEYS 100000

static const char *const tiers[] = {"nvidia-a10g", "nvidia-l4", "nvidia-t4", "nvidia-a100",
                                    "nvidia-h100"};

static void mem_kib(long *rss, long *hwm)
{
    char line[256];
    FILE *f = fopen("/proc/self/status", "r");

    *rss = *hwm = -1;
    if (!f)
        return;
    while (fgets(line, sizeof(line), f)) {
        sscanf(line, "VmRSS: %ld", rss);
        sscanf(line, "VmHWM: %ld", hwm);
    }
    fclose(f);
}

/* Resets VmHWM to the current RSS (Linux 4.0+); false when not allowed. */
static bool reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    bool ok;

    if (!f)
        return false;
    ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void gen_rules(struct af_buf *b, size_t bytes)
{
    int rc = af_buf_puts(b, "apiVersion: accelfit.io/v1\nkind: Policy\nrules:\n");

    af_assert(rc == 0);
    for (int i = 0; b->len < bytes; i++) {
        rc = af_buf_printf(b,
                           "  - name: rule-%06d\n"
                           "    match: {workload: [inference], min_params: %d}\n"
                           "    tiers: [%s, %s]\n"
                           "    reason: \"generated rule %d\"\n",
                           i, i + 1, tiers[i % 5], tiers[(i + 1) % 5], i);
        af_assert(rc == 0);
    }
}

static void gen_keys(struct af_buf *b, bool repeat)
{
    int rc = af_buf_puts(b, "apiVersion: accelfit.io/v1\nkind: Policy\nrules:\n"
                            "  - name: big\n    tiers: [cpu]\n    reason: x\n    match:\n");

    af_assert(rc == 0);
    for (int k = 0; k < N_KEYS; k++) {
        rc = af_buf_printf(b, "      k%06d: 1\n", repeat && k == N_KEYS - 1 ? 0 : k);
        af_assert(rc == 0);
    }
}

static void generate(struct af_buf *b, const char *name, double mb)
{
    if (!strcmp(name, "rules"))
        gen_rules(b, (size_t)(mb * 1e6));
    else
        gen_keys(b, !strcmp(name, "keys"));
}

/* Runs in the child: generate, load `runs` times, print one line. */
static int run_case(const char *name, double mb, int runs)
{
    struct af_buf b = AF_BUF_INIT(0);
    struct af_policy *p = NULL;
    struct af_error err;
    double best = 1e30;
    long rss0, hwm0, rss1 = -1, hwm1 = -1;
    char msg[768] = "ok";
    bool peak_reset;

    generate(&b, name, mb);
    mem_kib(&rss0, &hwm0);
    peak_reset = reset_peak();
    for (int r = 0; r < runs; r++) {
        double t0, t;
        int rc;

        memset(&err, 0, sizeof(err));
        t0 = now_s();
        rc = af_policy_load_mem(&p, "bench.yaml", b.buf, b.len, &err);
        t = now_s() - t0;
        af_assert((rc == 0) == (p != NULL));
        if (t < best)
            best = t;
        if (r == 0)
            mem_kib(&rss1, &hwm1);   /* the first load's peak */
        if (p)
            snprintf(msg, sizeof(msg), "ok, %zu rules", p->n_rules);
        else
            af_error_format(&err, msg, sizeof(msg));
        af_policy_free(p);
        p = NULL;
    }
    if (strlen(msg) > 72)
        memcpy(msg + 69, "...", 4);
    printf("%-12s %8.2f MB %10.3f s %9.1f MiB %9.1f MiB%s  %s\n", name, (double)b.len / 1e6,
           best, (double)rss0 / 1024, (double)hwm1 / 1024, peak_reset ? "" : "*", msg);
    af_buf_release(&b);
    return 0;
}

static const char *const cases[] = {"rules", "keys", "keys-unique"};

/* Writes each case's policy to DIR/<case>.yaml. */
static int write_cases(const char *dir, double mb)
{
    for (size_t i = 0; i < AF_ARRAY_SIZE(cases); i++) {
        struct af_buf b = AF_BUF_INIT(0);
        char *path = af_xasprintf("%s/%s.yaml", dir, cases[i]);
        FILE *f = fopen(path, "w");
        bool ok;

        generate(&b, cases[i], mb);
        ok = f && fwrite(b.buf, 1, b.len, f) == b.len;
        if (f && fclose(f) != 0)
            ok = false;
        if (ok)
            printf("%s: %.2f MB\n", path, (double)b.len / 1e6);
        else
            perror(path);
        af_buf_release(&b);
        af_free(path);
        if (!ok)
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    double mb = argc > 1 ? atof(argv[1]) : 15.7;
    int runs = argc > 2 ? atoi(argv[2]) : 3;

    if (argc > 2 && !strcmp(argv[1], "--write"))
        return write_cases(argv[2], argc > 3 ? atof(argv[3]) : 15.7);
    if (!(mb > 0) || runs < 1) {
        fprintf(stderr, "usage: bench_policy [mb] [runs] | bench_policy --write DIR [mb]\n");
        return 2;
    }
    printf("bench_policy: af_policy_load_mem, best of %d run%s; memory of the first run\n", runs,
           runs == 1 ? "" : "s");
    printf("%-12s %11s %12s %13s %13s  %s\n", "case", "text", "load", "rss before", "peak rss",
           "result");
    fflush(stdout);
    for (size_t i = 0; i < AF_ARRAY_SIZE(cases); i++) {
        int status;
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            int rc = run_case(cases[i], mb, runs);
            fflush(stdout);
            _exit(rc);
        }
        if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "bench_policy: case %s failed\n", cases[i]);
            return 1;
        }
    }
    printf("(a * after the peak: /proc/self/clear_refs was refused, so it includes generating "
           "the text)\n");
    return 0;
}
