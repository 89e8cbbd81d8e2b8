/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the subcommands share (cli.h): flags, the one-line failure, the
 * configuration and a static cluster (--cluster FILE or --demo), so that each
 * command reads its input and words its errors as the others do.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/aws.h"
#include "accelfit/codec.h"
#include "accelfit/dra.h"
#include "accelfit/prices.h"
#include "cli/cli.h"
#include "accelfit/banned.h"

int af_cli_fail(const char *cmd, const char *fmt, ...)
{
    char msg[1200];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    for (char *c = msg; *c; c++)
        if (*c == '\n' || *c == '\r')
            *c = ' ';
    fprintf(stderr, "accelfit %s: %s\n", cmd, msg);
    return 2;
}

int af_cli_flag(int argc, char **argv, int *i, const char *name, const char **val)
{
    const char *a = argv[*i];
    size_t n = strlen(name);

    if (strncmp(a, name, n))
        return 0;
    if (!val)
        return a[n] == '\0';
    if (a[n] == '=') {
        *val = a + n + 1;
        return 1;
    }
    if (a[n] != '\0')
        return 0;
    if (*i + 1 >= argc)
        return -1;
    *val = argv[++*i];
    return 1;
}

int af_cli_load_config(const char *cmd, const char *catalog, const char *policy,
                       struct af_config **out)
{
    struct af_error err;
    char msg[1024];

    memset(&err, 0, sizeof(err));
    if (af_config_load(out, catalog, policy, &err) == 0)
        return 0;
    af_error_format(&err, msg, sizeof(msg));
    return af_cli_fail(cmd, "%s", msg);
}

/* A cluster file names each node once; a second one replaces the first, and says so. */
static void upsert_item(void *ud, struct af_node_info *node, struct af_pod_info *pod)
{
    struct af_cache *cache = ud;

    if (node) {
        size_t before = af_cache_node_count(cache);
        if (node->price_annotation_bad)
            AF_LOG(AF_LOG_WARN, "node price annotation ignored", "node", node->name, "annotation",
                   "accelfit.io/hourly-price", "why", "not a decimal price", NULL);
        af_cache_upsert_node(cache, node);
        if (af_cache_node_count(cache) == before)
            AF_LOG(AF_LOG_WARN, "cluster file names a node twice; the later one wins", "node",
                   node->name, NULL);
    }
    if (pod)
        af_cache_upsert_pod(cache, pod);
}

/* Reads the cluster's DRA objects (a file's, or none for the demo) into the cache; 0, or the
 * file's error in `err`. */
static int load_dra(struct af_cache *cache, const char *path, struct af_error *err)
{
    struct af_buf file = AF_BUF_INIT(AF_CLUSTER_FILE_MAX);
    struct af_dra *d = NULL;
    int rc;

    if (!path)
        return 0;
    rc = af_buf_read_file(&file, path);
    if (rc)
        af_error_set(err, rc, path, 0, 0, "%s", af_strerror(rc));
    else
        rc = af_codec_cluster_dra(path, file.buf ? file.buf : "", file.len, &d, err);
    if (d)
        (void)af_cache_set_dra(cache, d);
    af_buf_release(&file);
    return rc;
}

struct af_cache *af_cli_load_cluster(const char *cmd, const struct af_config *cfg,
                                     const char *path)
{
    struct af_error err;
    struct af_cache *cache = af_cache_new();
    int rc;

    memset(&err, 0, sizeof(err));
    if (path)
        rc = af_codec_load_cluster_file(cfg, path, upsert_item, cache, &err);
    else
        rc = af_codec_decode_cluster(cfg, "<embedded demo cluster>", af_embedded_demo_cluster_yaml,
                                     af_embedded_demo_cluster_yaml_len, upsert_item, cache, &err);
    if (rc == 0)
        rc = load_dra(cache, path, &err);   /* ResourceSlices, claims, classes (DRA) */
    if (rc != 0) {
        char msg[1024];
        af_error_format(&err, msg, sizeof(msg));
        af_cli_fail(cmd, "cannot load cluster: %s", msg);
        af_cache_free(cache);
        return NULL;
    }
    af_cache_set_synced(cache, true);
    return cache;
}

size_t af_cli_snapshot_regions(const struct af_snapshot *snap, char (*out)[32], size_t max)
{
    size_t n = 0;

    for (size_t i = 0; snap && i < snap->n_nodes; i++) {
        const char *r = snap->nodes[i].info->region;
        size_t j = 0;
        if (!r || !*r || strlen(r) >= sizeof(out[0]))
            continue;
        while (j < n && strcmp(out[j], r))
            j++;
        if (j == n && n < max)
            snprintf(out[n++], sizeof(out[0]), "%s", r);
    }
    return n;
}

struct af_prices *af_cli_read_prices(const char *cmd, const struct af_snapshot *snap,
                                     const struct af_aws_options *opt)
{
    char regions[64][32], err[256];
    size_t n = af_cli_snapshot_regions(snap, regions, 64), n_src;
    struct af_prices *book = af_prices_new();
    const struct af_price_source *src;

    for (size_t i = 0; i < (n ? n : 1); i++)
        if (af_aws_read_into(book, opt, n ? regions[i] : NULL,
                             AF_AWS_ON_DEMAND | AF_AWS_SPOT | AF_AWS_RESERVATIONS, err,
                             sizeof(err)) != 0 &&
            !af_prices_sources(book, &n_src))
            fprintf(stderr, "accelfit %s: %s\n", cmd, err);   /* not even a region */
    src = af_prices_sources(book, &n_src);
    for (size_t i = 0; i < n_src; i++) {
        bool said = false;   /* no credentials fails every kind alike: said once */
        for (size_t j = 0; j < i && !said; j++)
            said = !strcmp(src[j].error, src[i].error);
        if (src[i].error[0] && !said)
            fprintf(stderr, "accelfit %s: %s; %s\n", cmd, src[i].error,
                    src[i].kind == AF_PRICE_RESERVATIONS
                        ? "prepaid nodes keep the ends their annotations give"
                        : "its nodes keep the catalog's prices");
    }
    af_prices_freeze(book);
    return book;
}
