/* SPDX-License-Identifier: Apache-2.0 */
/* The fake API server as a child process, with certificates and a kubeconfig (fake_api.h). */
#include "support/fake_api.h"

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accelfit/util.h"
#include "support/child.h"
#include "support/support.h"

bool af_test_fake_api_available(void)
{
    return system("python3 -c 'import ssl, http.server' >/dev/null 2>&1") == 0;
}

void af_test_fake_api_spawn(struct af_test_fake_api *f, const char *crt, const char *key,
                            const char *token, const char *const *extra)
{
    const char *argv[32] = {"python3", af_test_path("tests/apiserver/fake_apiserver.py"),
                            "--cert", crt, "--key", key, "--token", token,
                            "--bookmark-interval", "0.5"};
    size_t argc = 10;
    char line[128];

    for (size_t i = 0; extra && extra[i]; i++) {
        ck_assert_uint_lt(argc + 1, AF_ARRAY_SIZE(argv) - 1);
        argv[argc++] = extra[i];
    }
    argv[argc] = NULL;
    f->pid = af_test_child_spawn(argv, &f->in_fd, line, sizeof(line));
    ck_assert_msg(sscanf(line, "READY %d %d", &f->port, &f->admin_port) == 2,
                  "fake apiserver did not start: '%s'", line);
}

bool af_test_fake_api_start(struct af_test_fake_api *f)
{
    return af_test_fake_api_start_with(f, NULL);
}

bool af_test_fake_api_start_with(struct af_test_fake_api *f, const char *const *extra)
{
    char crt[192], key[192];
    FILE *fp;

    memset(f, 0, sizeof(*f));
    if (!af_test_fake_api_available() || system("openssl version >/dev/null 2>&1") != 0)
        return false;
    af_test_child_cert_dir(f->dir, sizeof(f->dir), "fake-api");
    snprintf(crt, sizeof(crt), "%s/srv.crt", f->dir);
    snprintf(key, sizeof(key), "%s/srv.key", f->dir);
    af_test_fake_api_spawn(f, crt, key, "token-1", extra);
    snprintf(f->kubeconfig, sizeof(f->kubeconfig), "%s/kubeconfig", f->dir);
    fp = fopen(f->kubeconfig, "w");
    ck_assert_ptr_nonnull(fp);
    fprintf(fp, "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
                "clusters:\n- name: fake\n  cluster:\n    server: https://127.0.0.1:%d\n"
                "    certificate-authority: %s/ca.crt\n"
                "users:\n- name: u\n  user:\n    token: token-1\n"
                "contexts:\n- name: fake\n  context: {cluster: fake, user: u}\n",
            f->port, f->dir);
    fclose(fp);
    return true;
}

void af_test_fake_api_stop(struct af_test_fake_api *f)
{
    if (f->pid <= 0)
        return;
    af_test_child_stop(&f->pid, f->in_fd);
    af_test_child_rm_dir(f->dir);
}

json_t *af_test_fake_api_admin(const struct af_test_fake_api *f, const char *cmd,
                               const char *json)
{
    return af_test_child_admin(f->admin_port, cmd, json);
}

void af_test_fake_api_do(const struct af_test_fake_api *f, const char *cmd, const char *json)
{
    json_decref(af_test_fake_api_admin(f, cmd, json));
}
