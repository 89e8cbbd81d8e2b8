/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the benchmarks read of a process they started, from /proc: its CPU seconds and its
 * resident memory. Shared by bench_live, bench_apiserver and bench_scheduler.
 */
#ifndef AF_BENCH_PROC_H
#define AF_BENCH_PROC_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

/* CPU seconds (user + system) `pid` has used; 0 when it cannot be read. */
static inline double bench_cpu_s(pid_t pid)
{
    char path[64], buf[2048];
    unsigned long ut = 0, st = 0;
    const char *p;
    size_t n;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if (!(f = fopen(path, "r")))
        return 0;
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* after the command's closing parenthesis: state ppid pgrp session tty tpgid flags
     * minflt cminflt majflt cmajflt utime stime */
    if (!(p = strrchr(buf, ')')) ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* VmRSS and VmHWM of `pid`, in kB (0 when they cannot be read). */
static inline void bench_mem_kb(pid_t pid, long *rss, long *hwm)
{
    char path[64], line[256];
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    *rss = *hwm = 0;
    if (!(f = fopen(path, "r")))
        return;
    while (fgets(line, sizeof(line), f)) {
        if (!strncmp(line, "VmRSS:", 6))
            *rss = atol(line + 6);
        else if (!strncmp(line, "VmHWM:", 6))
            *hwm = atol(line + 6);
    }
    fclose(f);
}

#endif
