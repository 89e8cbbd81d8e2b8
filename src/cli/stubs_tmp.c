/* Temporary until the subcommands land. */
#include <stdio.h>
#include "cli/cli.h"
int af_cmd_recommend(int argc, char **argv) { (void)argc; (void)argv; fputs("accelfit: recommend not built yet\n", stderr); return 1; }
int af_cmd_serve(int argc, char **argv) { (void)argc; (void)argv; fputs("accelfit: serve not built yet\n", stderr); return 1; }
int af_cmd_check_policy(int argc, char **argv) { (void)argc; (void)argv; fputs("accelfit: check-policy not built yet\n", stderr); return 1; }
