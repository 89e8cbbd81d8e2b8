/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Subcommands of the accelfit binary. Each takes the arguments after its own
 * name (argv[0] is the subcommand name) and returns the process exit status:
 * 0 success, 1 runtime failure, 2 bad usage or bad input (one-line message on
 * stderr, nothing on stdout).
 *
 * Below them, what several subcommands share (src/cli/common.c): reading a
 * flag, the one-line failure, loading the configuration and a static cluster.
 */
#ifndef AF_CLI_H
#define AF_CLI_H

#include "accelfit/cache.h"
#include "accelfit/config.h"
#include "accelfit/util.h"

int af_cmd_recommend(int argc, char **argv);
int af_cmd_serve(int argc, char **argv);
int af_cmd_check_policy(int argc, char **argv);
int af_cmd_costs(int argc, char **argv);
int af_cmd_simulate(int argc, char **argv);
int af_cmd_prices(int argc, char **argv);

/* Prints "accelfit CMD: message" as one line on stderr (line breaks in the message become
 * spaces); returns 2. */
int af_cli_fail(const char *cmd, const char *fmt, ...) AF_PRINTF(2, 3);

/*
 * Matches argv[*i] against --name (a switch when `val` is NULL) or --name VALUE /
 * --name=VALUE, stepping *i past a separate value. Returns 1 when matched, 0 when not,
 * -1 when the value is missing.
 */
int af_cli_flag(int argc, char **argv, int *i, const char *name, const char **val);

/* af_config_load; on failure prints "accelfit CMD: <error>" and returns 2. */
int af_cli_load_config(const char *cmd, const char *catalog, const char *policy,
                       struct af_config **out);

/*
 * The nodes and pods of the cluster file `path` (as `kubectl get nodes,pods -A -o json`
 * writes it), or of the embedded demo cluster when `path` is NULL, decoded for `cfg` into
 * a new cache marked synced (caller frees). A node named twice (the later one wins) and
 * an unreadable price annotation are logged as warnings. On failure prints
 * "accelfit CMD: cannot load cluster: <error>" and returns NULL.
 */
struct af_cache *af_cli_load_cluster(const char *cmd, const struct af_config *cfg,
                                     const char *path);

/* The distinct regions of the snapshot's nodes (topology.kubernetes.io/region), at most
 * `max` names of at most 31 bytes; returns how many. */
size_t af_cli_snapshot_regions(const struct af_snapshot *snap, char (*out)[32], size_t max);

/*
 * Reads AWS's on-demand and spot prices of every region of the snapshot's nodes (NULL, or
 * none: the fallback region of `opt`) once, into one frozen book (caller unrefs) with a
 * source record per kind and region. A region that cannot be read is said on stderr
 * ("accelfit CMD: ...; its nodes keep the catalog's prices") and recorded as failed.
 */
struct af_aws_options;
struct af_prices *af_cli_read_prices(const char *cmd, const struct af_snapshot *snap,
                                     const struct af_aws_options *opt);

#endif
