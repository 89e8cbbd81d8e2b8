/* SPDX-License-Identifier: Apache-2.0 */
/* accelfit command line: global flags and dispatch to the subcommands. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "accelfit/banned.h"

static const char usage[] =
    "usage: accelfit <command> [options]\n"
    "\n"
    "Puts each pod on the right hardware in EKS clusters that mix NVIDIA GPU,\n"
    "AWS Trainium, AWS Inferentia and CPU nodes: a kube-scheduler extender.\n"
    "\n"
    "commands:\n"
    "  serve          run the extender (filter, prioritize, explain, metrics) over HTTP\n"
    "  recommend      rank hardware for a workload, with instance types, counts and prices\n"
    "  check-policy   validate a policy (and catalog) file and print what it holds\n"
    "  costs          what running pods cost per hour, by tenant, namespace and class\n"
    "  simulate       replay a trace of pods: what accelfit would cost against kube-scheduler\n"
    "  prices         read EC2 on-demand and spot prices from AWS now\n"
    "\n"
    "options:\n"
    "  -h, --help     show this help (also: accelfit <command> --help)\n"
    "  --version      print the version\n";

static const struct {
    const char *name;
    int (*fn)(int, char **);
} commands[] = {
    {"serve", af_cmd_serve},
    {"recommend", af_cmd_recommend},
    {"check-policy", af_cmd_check_policy},
    {"costs", af_cmd_costs},
    {"simulate", af_cmd_simulate},
    {"prices", af_cmd_prices},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")) {
        printf("accelfit %s\n", AF_VERSION);
        return 0;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        fputs(usage, stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "accelfit: unknown command '%s' (see accelfit --help)\n", argv[1]);
    return 2;
}
