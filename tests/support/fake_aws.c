/* SPDX-License-Identifier: Apache-2.0 */
/* The fake AWS endpoints as a child process (fake_aws.h). */
#include "support/fake_aws.h"

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "support/child.h"
#include "support/fake_api.h"
#include "support/support.h"

static const char *const cred_vars[] = {
    "AWS_ROLE_ARN", "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_SESSION_NAME",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE",
    "AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_PRICING", "AWS_ENDPOINT_URL_EC2",
    "AWS_ENDPOINT_URL_STS", "AWS_DEFAULT_REGION", "AWS_PROFILE"};

bool af_test_fake_aws_start(struct af_test_fake_aws *f)
{
    char crt[192], key[192], line[128], ca[192];

    memset(f, 0, sizeof(*f));
    if (!af_test_fake_api_available() || system("openssl version >/dev/null 2>&1") != 0)
        return false;
    af_test_child_cert_dir(f->dir, sizeof(f->dir), "fake-aws");
    snprintf(crt, sizeof(crt), "%s/srv.crt", f->dir);
    snprintf(key, sizeof(key), "%s/srv.key", f->dir);
    f->pid = af_test_child_spawn(
        (const char *const[]){"python3", af_test_path("tests/aws/fake_aws.py"), "--cert", crt,
                              "--key", key, NULL},
        &f->in_fd, line, sizeof(line));
    ck_assert_msg(sscanf(line, "READY %d %d", &f->port, &f->admin_port) == 2,
                  "fake aws did not start: '%s'", line);
    snprintf(f->url, sizeof(f->url), "https://127.0.0.1:%d", f->port);
    snprintf(ca, sizeof(ca), "%s/ca.crt", f->dir);
    for (size_t i = 0; i < AF_ARRAY_SIZE(cred_vars); i++)
        unsetenv(cred_vars[i]);
    setenv("AWS_ENDPOINT_URL", f->url, 1);
    setenv("AWS_CA_BUNDLE", ca, 1);
    setenv("AWS_REGION", "eu-west-1", 1);
    /* a workstation's ~/.aws/credentials is not the test's */
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/aws-credentials", 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent/aws-config", 1);
    return true;
}

void af_test_fake_aws_stop(struct af_test_fake_aws *f)
{
    af_test_child_stop(&f->pid, f->in_fd);
    af_test_child_rm_dir(f->dir);
}

static json_t *vadmin(const struct af_test_fake_aws *f, const char *cmd, const char *fmt,
                      va_list ap)
{
    char *body = fmt ? af_xvasprintf(fmt, ap) : NULL;
    json_t *j = af_test_child_admin(f->admin_port, cmd, body);

    af_free(body);
    return j;
}

json_t *af_test_fake_aws_admin(const struct af_test_fake_aws *f, const char *cmd,
                               const char *fmt, ...)
{
    va_list ap;
    json_t *j;

    va_start(ap, fmt);
    j = vadmin(f, cmd, fmt, ap);
    va_end(ap);
    return j;
}

void af_test_fake_aws_do(const struct af_test_fake_aws *f, const char *cmd, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    json_decref(vadmin(f, cmd, fmt, ap));
    va_end(ap);
}

void af_test_fake_aws_static_keys(const struct af_test_fake_aws *f)
{
    af_test_fake_aws_do(f, "credentials", "{\"akid\": \"AKIAFAKESTATIC\", \"secret\": "
                                          "\"static/secret+key\"}");
    setenv("AWS_ACCESS_KEY_ID", "AKIAFAKESTATIC", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "static/secret+key", 1);
}
