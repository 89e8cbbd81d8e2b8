/* SPDX-License-Identifier: Apache-2.0 */
/* accelfit command line: dispatches to the subcommands. */
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        printf("accelfit %s\n", AF_VERSION);
        return 0;
    }
    fprintf(stderr, "usage: accelfit <command> [options]\n");
    return 2;
}
