/* SPDX-License-Identifier: Apache-2.0 */
/* Placeholder until `accelfit recommend` lands. */
#include <stdio.h>

#include "cli/cli.h"

int af_cmd_recommend(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("accelfit: recommend is not available in this build\n", stderr);
    return 1;
}

int af_cmd_check_policy(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fputs("accelfit: check-policy is not available in this build\n", stderr);
    return 1;
}
