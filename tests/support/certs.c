/* SPDX-License-Identifier: Apache-2.0 */
/* Throw-away certificates for TLS tests (support.h). */
#include <stdio.h>
#include <stdlib.h>

#include "support/support.h"

void af_test_make_cert(const char *dir, const char *prefix, const char *san)
{
    char *cmd = af_xasprintf(
        "cd '%1$s' && { [ -f ca.crt ] || openssl req -x509 -newkey ec -pkeyopt "
        "ec_paramgen_curve:prime256v1 -nodes -keyout ca.key -out ca.crt -days 2 "
        "-subj /CN=accelfit-test-ca >/dev/null 2>&1; } && "
        "openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "
        "'%2$s.key' -out '%2$s.csr' -subj '/CN=%2$s' >/dev/null 2>&1 && "
        "printf 'subjectAltName=%3$s\\n' > '%2$s.ext' && "
        "openssl x509 -req -in '%2$s.csr' -CA ca.crt -CAkey ca.key -CAcreateserial "
        "-out '%2$s.crt' -days 2 -extfile '%2$s.ext' >/dev/null 2>&1",
        dir, prefix, san);
    int rc = system(cmd);

    ck_assert_msg(rc == 0, "openssl could not make %s/%s.crt (%d)", dir, prefix, rc);
    af_free(cmd);
}
