/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Subcommands of the accelfit binary. Each takes the arguments after its own
 * name (argv[0] is the subcommand name) and returns the process exit status:
 * 0 success, 1 runtime failure, 2 bad usage or bad input (one-line message on
 * stderr, nothing on stdout).
 */
#ifndef AF_CLI_H
#define AF_CLI_H

int af_cmd_recommend(int argc, char **argv);
int af_cmd_serve(int argc, char **argv);
int af_cmd_check_policy(int argc, char **argv);
int af_cmd_costs(int argc, char **argv);
int af_cmd_simulate(int argc, char **argv);

#endif
