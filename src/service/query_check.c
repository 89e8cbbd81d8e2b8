/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The routes that take no query parameters (af_service_check_query): their query is
 * read with the one parser (query.c) and anything in it is answered 400 with the
 * error body every handler uses (service.c), so a request is never answered for a
 * question it did not ask.
 */
#include "accelfit/service.h"

#include <stdio.h>
#include "accelfit/banned.h"

int af_service_check_query(const char *route, const char *query, struct af_buf *out)
{
    static const char *const none[] = {NULL};
    struct af_query q;
    char err[400];

    if (af_query_parse(&q, query, route, none, err, sizeof(err)) != 0) {
        char text[420];
        snprintf(text, sizeof(text), "accelfit: %s", err);
        af_service_error_body(out, out->len, text);
        return 400;
    }
    af_query_release(&q);
    return 0;
}
