/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Replays a fuzz corpus without libFuzzer: each argument is a file or a
 * directory of files, and every file is fed once to the harness's
 * LLVMFuzzerTestOneInput. ctest runs it over tests/fuzz/corpus/<harness> with
 * whatever compiler built the project (under ASan and UBSan in build-san), so
 * the corpora are replayed even where clang is not installed. Finding no
 * input at all is a failure, not a silent pass.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void run_file(const char *path, size_t *n)
{
    struct af_buf b = AF_BUF_INIT(64u << 20);
    size_t len;
    char *data;

    if (af_buf_read_file(&b, path) != 0) {
        fprintf(stderr, "replay: cannot read '%s'\n", path);
        exit(2);
    }
    data = af_buf_detach(&b, &len);
    /* An exact-size copy, so that ASan sees a read past the input's end. */
    {
        uint8_t *copy = af_xmalloc(len);
        memcpy(copy, data, len);
        LLVMFuzzerTestOneInput(copy, len);
        af_free(copy);
    }
    af_free(data);
    (*n)++;
}

/* Every regular file in `dir` (not dotfiles), in name order. */
static void run_dir(const char *dir, size_t *n)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t count = 0, cap = 0;

    if (!d) {
        fprintf(stderr, "replay: cannot open '%s'\n", dir);
        exit(2);
    }
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        AF_GROW(names, cap, count + 1);
        names[count++] = af_xasprintf("%s/%s", dir, e->d_name);
    }
    closedir(d);
    qsort(names, count, sizeof(*names), cmp);
    for (size_t i = 0; i < count; i++) {
        struct stat st;
        if (stat(names[i], &st) == 0 && S_ISREG(st.st_mode))
            run_file(names[i], n);
        af_free(names[i]);
    }
    af_free(names);
}

int main(int argc, char **argv)
{
    size_t n = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) != 0) {
            fprintf(stderr, "replay: no such file or directory '%s'\n", argv[i]);
            return 2;
        }
        if (S_ISDIR(st.st_mode))
            run_dir(argv[i], &n);
        else
            run_file(argv[i], &n);
    }
    if (!n) {
        fprintf(stderr, "replay: no inputs found in %s%s\n", argv[1], argc > 2 ? " ..." : "");
        return 1;
    }
    printf("replay: %zu inputs, no failure\n", n);
    return 0;
}
