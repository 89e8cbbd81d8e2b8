/* SPDX-License-Identifier: Apache-2.0 */
/* Placeholder until `accelfit serve` lands. */
#include <stdio.h>

#include "cli/cli.h"

int af_cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("accelfit: serve is not available in this build\n", stderr);
    return 1;
}
