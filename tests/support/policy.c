/* SPDX-License-Identifier: Apache-2.0 */
/* The built-in policy with a test's own section appended (policy.h). */
#include "support/policy.h"

#include <stdio.h>
#include <string.h>

#include "support/support.h"

int af_test_policy_lines(void)
{
    int n = 0;

    for (size_t i = 0; i < af_embedded_policy_yaml_len; i++)
        n += af_embedded_policy_yaml[i] == '\n';
    return n;
}

static void policy_text(struct af_buf *b, const char *extra)
{
    ck_assert_int_eq(af_buf_add(b, af_embedded_policy_yaml, af_embedded_policy_yaml_len), 0);
    ck_assert_int_eq(af_buf_puts(b, extra), 0);
}

int af_test_policy_load_with(const char *extra, struct af_policy **out, struct af_error *err)
{
    struct af_buf b = AF_BUF_INIT(0);
    int rc;

    policy_text(&b, extra);
    memset(err, 0, sizeof(*err));
    rc = af_policy_load_mem(out, "p.yaml", b.buf, b.len, err);
    af_buf_release(&b);
    return rc;
}

char *af_test_policy_file(const char *extra)
{
    static int made;
    struct af_buf b = AF_BUF_INIT(0);
    char *path = af_test_temp_path("policy-%d.yaml", ++made);
    FILE *f = fopen(path, "w");

    ck_assert_msg(f != NULL, "cannot write %s", path);
    policy_text(&b, extra);
    ck_assert_uint_eq(fwrite(b.buf, 1, b.len, f), b.len);
    ck_assert_int_eq(fclose(f), 0);
    af_buf_release(&b);
    return path;
}
