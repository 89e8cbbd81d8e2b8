/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubeconfig (libyaml) and in-cluster connection configs.
 *
 * Supported: server, certificate-authority(-data), insecure-skip-tls-verify,
 * tls-server-name, client-certificate(-data), client-key(-data), token,
 * tokenFile, exec {command, args, env, apiVersion}. Refused with
 * AF_EUNSUPPORTED naming the feature: auth-provider, username/password,
 * proxy-url, impersonation (as, as-uid, as-groups, as-user-extra).
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <yaml.h>

#include "accelfit/kube.h"
#include "accelfit/util.h"
#include "accelfit/banned.h"

/* ---- YAML document helpers ------------------------------------------------------------------- */

static yaml_node_t *map_get(yaml_document_t *d, yaml_node_t *m, const char *key)
{
    if (!m || m->type != YAML_MAPPING_NODE)
        return NULL;
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(d, p->key);
        if (k && k->type == YAML_SCALAR_NODE && !strcmp((const char *)k->data.scalar.value, key))
            return yaml_document_get_node(d, p->value);
    }
    return NULL;
}

static const char *scalar(yaml_node_t *n)
{
    if (!n || n->type != YAML_SCALAR_NODE)
        return NULL;
    /* `key:` with nothing after it is a null, not "" */
    if (n->data.scalar.length == 0 && n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
        return NULL;
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        (!strcmp((const char *)n->data.scalar.value, "null") ||
         !strcmp((const char *)n->data.scalar.value, "~")))
        return NULL;
    return (const char *)n->data.scalar.value;
}

static const char *map_str(yaml_document_t *d, yaml_node_t *m, const char *key)
{
    return scalar(map_get(d, m, key));
}

static bool map_bool(yaml_document_t *d, yaml_node_t *m, const char *key)
{
    const char *s = map_str(d, m, key);
    return s && (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "TRUE"));
}

/* Finds `name` in a list of {name, <field>} entries and returns <field>. */
static yaml_node_t *named(yaml_document_t *d, yaml_node_t *root, const char *list,
                          const char *field, const char *name)
{
    yaml_node_t *seq = map_get(d, root, list);
    if (!seq || seq->type != YAML_SEQUENCE_NODE)
        return NULL;
    for (yaml_node_item_t *it = seq->data.sequence.items.start; it < seq->data.sequence.items.top;
         it++) {
        yaml_node_t *e = yaml_document_get_node(d, *it);
        const char *n = map_str(d, e, "name");
        if (n && !strcmp(n, name)) {
            yaml_node_t *f = map_get(d, e, field);
            return f ? f : e; /* present but empty */
        }
    }
    return NULL;
}

/* ---- conn ------------------------------------------------------------------------------------- */

static void exec_free(struct af_kube_exec *e)
{
    if (!e)
        return;
    af_free(e->command);
    for (char **a = e->args; a && *a; a++)
        af_free(*a);
    af_free(e->args);
    for (char **a = e->env; a && *a; a++)
        af_free(*a);
    af_free(e->env);
    af_free(e->api_version);
    af_free(e);
}

void af_kube_conn_free(struct af_kube_conn *c)
{
    if (!c)
        return;
    af_free(c->server);
    af_free(c->ca_file);
    af_free(c->ca_pem);
    af_free(c->client_cert_file);
    af_free(c->client_cert_pem);
    af_free(c->client_key_file);
    af_free(c->client_key_pem);
    af_free(c->token);
    af_free(c->token_file);
    af_free(c->tls_server_name);
    exec_free(c->exec);
    af_free(c->context);
    af_free(c->origin);
    af_free(c->ns);
    af_free(c);
}

/* Relative paths in a kubeconfig are relative to the file's directory. */
static char *resolve_path(const char *base, const char *p)
{
    if (!p)
        return NULL;
    if (p[0] == '/' || !base)
        return af_xstrdup(p);
    const char *slash = strrchr(base, '/');
    if (!slash)
        return af_xstrdup(p);
    return af_xasprintf("%.*s/%s", (int)(slash - base), base, p);
}

static int decode_data(const char *file, const char *what, const char *entry, const char *b64,
                       char **out, struct af_error *err)
{
    if (!b64)
        return 0;
    *out = af_base64_decode(b64, NULL);
    if (!*out)
        return af_error_set(err, AF_EPARSE, file, 0, 0, "%s \"%s\": %s is not valid base64",
                            strstr(what, "certificate-authority") ? "cluster" : "user", entry,
                            what);
    return 0;
}

/*
 * The kubeconfig files in effect, in order. kubectl merges a KUBECONFIG list so that
 * the first file to name a cluster, user or context wins, and current-context comes
 * from the first file that sets it; every lookup below walks the files in that order.
 */
struct kc_files {
    size_t n;
    yaml_document_t docs[AF_KUBECONFIG_MAX_FILES];
    const char *files[AF_KUBECONFIG_MAX_FILES];
};

/* An entry found in one of the files: the node and where it came from. */
struct kc_ref {
    yaml_document_t *doc;
    const char *file;
    yaml_node_t *node;
};

static bool kc_named(struct kc_files *k, const char *list, const char *field, const char *name,
                     struct kc_ref *out)
{
    for (size_t i = 0; i < k->n; i++) {
        yaml_node_t *root = yaml_document_get_root_node(&k->docs[i]);
        yaml_node_t *n = named(&k->docs[i], root, list, field, name);
        if (n) {
            out->doc = &k->docs[i];
            out->file = k->files[i];
            out->node = n;
            return true;
        }
    }
    return false;
}

static const char *kc_current_context(struct kc_files *k)
{
    for (size_t i = 0; i < k->n; i++) {
        const char *s = map_str(&k->docs[i], yaml_document_get_root_node(&k->docs[i]),
                                "current-context");
        if (s && *s)
            return s;
    }
    return NULL;
}

static int kc_parse(struct kc_files *k, const char *file, const char *text, size_t len,
                    struct af_error *err)
{
    yaml_parser_t parser;
    yaml_document_t *doc = &k->docs[k->n];
    int rc;

    if (!yaml_parser_initialize(&parser))
        return af_error_set(err, AF_EIO, file, 0, 0, "cannot initialize YAML parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, doc)) {
        rc = af_error_set(err, AF_EPARSE, file, (int)parser.problem_mark.line + 1,
                          (int)parser.problem_mark.column + 1, "%s",
                          parser.problem ? parser.problem : "YAML error");
        yaml_parser_delete(&parser);
        return rc;
    }
    yaml_parser_delete(&parser);
    yaml_node_t *root = yaml_document_get_root_node(doc);
    /* An empty file is an empty config (kubectl accepts it); anything else must be a map. */
    if (root && root->type != YAML_MAPPING_NODE) {
        yaml_document_delete(doc);
        return af_error_set(err, AF_EPARSE, file, (int)root->start_mark.line + 1,
                            (int)root->start_mark.column + 1, "kubeconfig is not a mapping");
    }
    k->files[k->n++] = file;
    return 0;
}

static void kc_free(struct kc_files *k)
{
    for (size_t i = 0; i < k->n; i++)
        yaml_document_delete(&k->docs[i]);
    k->n = 0;
}

static int kc_resolve(struct af_kube_conn **out, struct kc_files *k, const char *want_ctx,
                      struct af_error *err)
{
    struct af_kube_conn *c = NULL;
    struct kc_ref ctx, cl, us = {0};
    const char *first = k->n ? k->files[0] : "";
    yaml_document_t *d;
    const char *file;
    int rc = 0;

    const char *ctxname = want_ctx ? want_ctx : kc_current_context(k);
    if (!ctxname || !*ctxname)
        return af_error_set(err, AF_EINVAL, first, 0, 0,
                            "no current-context set and no context given (--context)");
    if (!kc_named(k, "contexts", "context", ctxname, &ctx))
        return af_error_set(err, AF_ENOENT, first, 0, 0, "context \"%s\" not found", ctxname);
    const char *clname = map_str(ctx.doc, ctx.node, "cluster");
    const char *uname = map_str(ctx.doc, ctx.node, "user");
    if (!clname)
        return af_error_set(err, AF_EINVAL, ctx.file, 0, 0, "context \"%s\" names no cluster",
                            ctxname);
    if (!kc_named(k, "clusters", "cluster", clname, &cl))
        return af_error_set(err, AF_ENOENT, ctx.file, 0, 0,
                            "cluster \"%s\" (of context \"%s\") not found", clname, ctxname);
    if (uname && !kc_named(k, "users", "user", uname, &us))
        return af_error_set(err, AF_ENOENT, ctx.file, 0, 0,
                            "user \"%s\" (of context \"%s\") not found", uname, ctxname);

    c = af_xcalloc(1, sizeof(*c));
    c->context = af_xstrdup(ctxname);
    d = cl.doc;
    file = cl.file;
    const char *server = map_str(d, cl.node, "server");
    if (!server || !*server) {
        rc = af_error_set(err, AF_EINVAL, file, 0, 0, "cluster \"%s\" has no server", clname);
        goto out;
    }
    if (map_str(d, cl.node, "proxy-url")) {
        rc = af_error_set(err, AF_EUNSUPPORTED, file, 0, 0,
                          "cluster \"%s\": proxy-url is not supported", clname);
        goto out;
    }
    c->server = af_xstrdup(server);
    size_t sl = strlen(c->server);
    while (sl > 0 && c->server[sl - 1] == '/')
        c->server[--sl] = '\0';
    c->ca_file = resolve_path(file, map_str(d, cl.node, "certificate-authority"));
    if ((rc = decode_data(file, "certificate-authority-data", clname,
                          map_str(d, cl.node, "certificate-authority-data"), &c->ca_pem, err)))
        goto out;
    c->insecure = map_bool(d, cl.node, "insecure-skip-tls-verify");
    c->tls_server_name = af_xstrdup(map_str(d, cl.node, "tls-server-name"));

    if (us.node) {
        static const char *const unsupported[] = {"auth-provider", "username", "password",
                                                  "as", "as-uid", "as-groups",
                                                  "as-user-extra"};
        d = us.doc;
        file = us.file;
        for (size_t i = 0; i < AF_ARRAY_SIZE(unsupported); i++) {
            yaml_node_t *v = map_get(d, us.node, unsupported[i]);
            if (v && (v->type != YAML_SCALAR_NODE || scalar(v))) {
                const char *what = unsupported[i];
                if (!strcmp(what, "password") || !strcmp(what, "username"))
                    what = "username/password (basic auth)";
                else if (!strncmp(what, "as", 2))
                    what = "impersonation (as, as-groups, as-uid, as-user-extra)";
                rc = af_error_set(err, AF_EUNSUPPORTED, file, 0, 0,
                                  "user \"%s\": %s is not supported%s", uname, what,
                                  !strcmp(unsupported[i], "auth-provider")
                                      ? "; use an exec credential plugin instead"
                                      : "");
                goto out;
            }
        }
        c->client_cert_file = resolve_path(file, map_str(d, us.node, "client-certificate"));
        c->client_key_file = resolve_path(file, map_str(d, us.node, "client-key"));
        if ((rc = decode_data(file, "client-certificate-data", uname,
                              map_str(d, us.node, "client-certificate-data"),
                              &c->client_cert_pem, err)))
            goto out;
        if ((rc = decode_data(file, "client-key-data", uname,
                              map_str(d, us.node, "client-key-data"), &c->client_key_pem, err)))
            goto out;
        c->token = af_xstrdup(map_str(d, us.node, "token"));
        c->token_file = resolve_path(file, map_str(d, us.node, "tokenFile"));
        yaml_node_t *ex = map_get(d, us.node, "exec");
        if (ex && ex->type == YAML_MAPPING_NODE) {
            const char *cmd = map_str(d, ex, "command");
            if (!cmd) {
                rc = af_error_set(err, AF_EINVAL, file, 0, 0, "user \"%s\": exec has no command",
                                  uname);
                goto out;
            }
            struct af_kube_exec *e = af_xcalloc(1, sizeof(*e));
            c->exec = e;
            /* A command with a slash is relative to the kubeconfig's directory. */
            e->command = strchr(cmd, '/') ? resolve_path(file, cmd) : af_xstrdup(cmd);
            e->api_version = af_xstrdup(map_str(d, ex, "apiVersion"));
            yaml_node_t *args = map_get(d, ex, "args");
            size_t na = 0;
            if (args && args->type == YAML_SEQUENCE_NODE)
                na = (size_t)(args->data.sequence.items.top - args->data.sequence.items.start);
            e->args = af_xcalloc(na + 1, sizeof(char *));
            for (size_t i = 0; i < na; i++) {
                const char *a =
                    scalar(yaml_document_get_node(d, args->data.sequence.items.start[i]));
                e->args[i] = af_xstrdup(a ? a : "");
            }
            yaml_node_t *env = map_get(d, ex, "env");
            size_t ne = 0;
            if (env && env->type == YAML_SEQUENCE_NODE)
                ne = (size_t)(env->data.sequence.items.top - env->data.sequence.items.start);
            e->env = af_xcalloc(ne + 1, sizeof(char *));
            size_t j = 0;
            for (size_t i = 0; i < ne; i++) {
                yaml_node_t *en = yaml_document_get_node(d, env->data.sequence.items.start[i]);
                const char *n = map_str(d, en, "name");
                const char *v = map_str(d, en, "value");
                if (n)
                    e->env[j++] = af_xasprintf("%s=%s", n, v ? v : "");
            }
        }
    }
    *out = c;
    c = NULL;
out:
    af_kube_conn_free(c);
    return rc;
}

/*
 * Reads and merges `paths` (n of them). With `skip_missing` a file that does not exist
 * is passed over, as kubectl passes over missing KUBECONFIG entries; at least one must
 * be read.
 */
static int kc_load_files(struct af_kube_conn **out, char **paths, size_t n, bool skip_missing,
                         const char *context, struct af_error *err)
{
    struct kc_files k;
    struct af_buf bufs[AF_KUBECONFIG_MAX_FILES];
    int rc = 0;

    memset(&k, 0, sizeof(k));
    for (size_t i = 0; i < n; i++)
        bufs[i] = (struct af_buf)AF_BUF_INIT(16 << 20);
    for (size_t i = 0; i < n && !rc; i++) {
        rc = af_buf_read_file(&bufs[i], paths[i]);
        if (rc == AF_ENOENT && skip_missing) {
            rc = 0;
            continue;
        }
        if (rc) {
            af_error_set(err, rc, paths[i], 0, 0, "cannot read kubeconfig: %s", af_strerror(rc));
            break;
        }
        rc = kc_parse(&k, paths[i], bufs[i].buf ? bufs[i].buf : "", bufs[i].len, err);
    }
    if (!rc && k.n == 0)
        rc = af_error_set(err, AF_ENOENT, paths[0], 0, 0,
                          "cannot read kubeconfig: %s%s", af_strerror(AF_ENOENT),
                          n > 1 ? " (nor any other file in KUBECONFIG)" : "");
    if (!rc)
        rc = kc_resolve(out, &k, context, err);
    kc_free(&k);
    for (size_t i = 0; i < n; i++)
        af_buf_release(&bufs[i]);
    return rc;
}

/* Splits a KUBECONFIG value on ':' (empty entries dropped). Returns the count. */
static size_t split_list(const char *v, char **out, size_t cap)
{
    size_t n = 0;
    while (*v && n < cap) {
        const char *colon = strchr(v, ':');
        size_t len = colon ? (size_t)(colon - v) : strlen(v);
        if (len)
            out[n++] = af_xstrndup(v, len);
        v += len + (colon ? 1 : 0);
    }
    return n;
}

int af_kubeconfig_load(struct af_kube_conn **out, const char *path, const char *context,
                       struct af_error *err)
{
    char *paths[AF_KUBECONFIG_MAX_FILES];
    size_t n = 0;
    bool from_env = false;
    int rc;

    *out = NULL;
    if (path) {
        paths[n++] = af_xstrdup(path);
    } else {
        const char *kc = getenv("KUBECONFIG");
        if (kc && *kc) {
            n = split_list(kc, paths, AF_ARRAY_SIZE(paths));
            from_env = true;
        }
        if (n == 0) {
            const char *home = getenv("HOME");
            if (!home || !*home)
                return af_error_set(err, AF_ENOENT, "", 0, 0,
                                    "no kubeconfig: KUBECONFIG and HOME are unset");
            paths[n++] = af_xasprintf("%s/.kube/config", home);
            from_env = false;
        }
    }
    rc = kc_load_files(out, paths, n, from_env && n > 1, context, err);
    for (size_t i = 0; i < n; i++)
        af_free(paths[i]);
    return rc;
}

static const char *serviceaccount_dir(void)
{
    const char *dir = getenv("AF_SERVICEACCOUNT_DIR");
    return dir && *dir ? dir : "/var/run/secrets/kubernetes.io/serviceaccount";
}

int af_kube_incluster(struct af_kube_conn **out, struct af_error *err)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    const char *dir = serviceaccount_dir();
    struct af_kube_conn *c;

    *out = NULL;
    if (!host || !*host || !port || !*port)
        return af_error_set(err, AF_ENOENT, "", 0, 0,
                            "not in a cluster: KUBERNETES_SERVICE_HOST/PORT are not set");
    c = af_xcalloc(1, sizeof(*c));
    if (strchr(host, ':'))
        c->server = af_xasprintf("https://[%s]:%s", host, port);
    else
        c->server = af_xasprintf("https://%s:%s", host, port);
    c->token_file = af_xasprintf("%s/token", dir);
    c->ca_file = af_xasprintf("%s/ca.crt", dir);
    c->context = af_xstrdup("in-cluster");
    c->origin = af_xstrdup("in-cluster");
    struct af_buf b = AF_BUF_INIT(1 << 20);
    {
        /* the pod's namespace, where accelfit keeps the state it shares (kube.h) */
        char *nsfile = af_xasprintf("%s/namespace", dir);
        if (af_buf_read_file(&b, nsfile) == 0 && b.len && b.len < 254) {
            size_t n = strcspn(b.buf, " \t\r\n");
            if (n)
                c->ns = af_xstrndup(b.buf, n);
        }
        af_buf_reset(&b);
        af_free(nsfile);
    }
    int rc = af_buf_read_file(&b, c->token_file);
    af_buf_release(&b);
    if (rc) {
        af_error_set(err, rc, c->token_file, 0, 0, "cannot read service-account token: %s",
                     af_strerror(rc));
        af_kube_conn_free(c);
        return rc;
    }
    *out = c;
    return 0;
}

/* In a pod: the API server's address is in the environment and the token is mounted. */
static bool looks_in_cluster(void)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    char *token;
    bool ok;

    if (!host || !*host)
        return false;
    token = af_xasprintf("%s/token", serviceaccount_dir());
    ok = access(token, R_OK) == 0;
    af_free(token);
    return ok;
}

int af_kube_conn_resolve(struct af_kube_conn **out, const struct af_kube_source *src,
                         struct af_error *err)
{
    const char *kc = getenv("KUBECONFIG");
    const char *home = getenv("HOME");
    char *origin;
    int rc;

    *out = NULL;
    if (src->in_cluster)
        return af_kube_incluster(out, err);
    if (src->kubeconfig) {
        origin = af_xasprintf("--kubeconfig %s", src->kubeconfig);
    } else if (kc && *kc) {
        origin = af_xasprintf("KUBECONFIG=%s", kc);
    } else if (!src->context && looks_in_cluster()) {
        return af_kube_incluster(out, err);
    } else if (home && *home) {
        char *path = af_xasprintf("%s/.kube/config", home);
        if (access(path, F_OK) != 0) {
            rc = af_error_set(err, AF_ENOENT, "", 0, 0,
                              "no --kubeconfig, KUBECONFIG is unset, not in a cluster (%s), "
                              "and %s does not exist",
                              getenv("KUBERNETES_SERVICE_HOST")
                                  ? "no service-account token"
                                  : "KUBERNETES_SERVICE_HOST is unset",
                              path);
            af_free(path);
            return rc;
        }
        origin = af_xasprintf("~/.kube/config (%s)", path);
        af_free(path);
    } else {
        return af_error_set(err, AF_ENOENT, "", 0, 0,
                            "no --kubeconfig, and KUBECONFIG, KUBERNETES_SERVICE_HOST and "
                            "HOME are unset");
    }
    rc = af_kubeconfig_load(out, src->kubeconfig, src->context, err);
    if (!rc)
        (*out)->origin = origin;
    else
        af_free(origin);
    return rc;
}
