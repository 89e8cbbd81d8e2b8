/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The caps on a request's URL, header values and body (per route, and in JSON values per
 * byte, so that no body builds a tree much larger than itself). libwebsockets 4.1.6 keeps a
 * request's URL and header lines in one area per connection (HEAD_AREA, server.c)
 * and closes, without an answer, a connection whose request overflows it. Every
 * token is capped one byte over its limit (token limits), where lws stops storing
 * it and skips the rest of the line rather than fail: a value longer than the limit
 * shows up as one of exactly limit + 1 bytes, and the request is answered 414 (the
 * URL, AF_HTTP_MAX_URI) or 431 (a header, AF_HTTP_MAX_FIELD) with JSON naming it,
 * and the connection closed. What is left (a header block larger than HEAD_AREA) is
 * in docs/http-api.md, Known limitations. Tests: test_long_url_is_414,
 * test_oversized_header_is_431 and
 * test_header_block_beyond_libwebsockets_area_is_closed (tests/check_http.c).
 */
#include <stdio.h>
#include <string.h>

#include "http/internal.h"
#include "accelfit/banned.h"

/* The URI tokens lws may have stored the request target in (one per method). */
static const enum lws_token_indexes uri_tokens[] = {
    WSI_TOKEN_GET_URI,    WSI_TOKEN_POST_URI,   WSI_TOKEN_OPTIONS_URI,
    WSI_TOKEN_PUT_URI,    WSI_TOKEN_PATCH_URI,  WSI_TOKEN_DELETE_URI,
    WSI_TOKEN_HEAD_URI,   WSI_TOKEN_HTTP_COLON_PATH, WSI_TOKEN_HTTP_URI_ARGS,
};

static bool is_uri_token(int t)
{
    for (size_t i = 0; i < AF_ARRAY_SIZE(uri_tokens); i++)
        if ((int)uri_tokens[i] == t)
            return true;
    return false;
}

/*
 * Every token is capped one byte over the limit (token_limits), where lws
 * stops storing it and skips the rest of the line rather than fail: a value
 * longer than the limit shows up here as one of exactly limit + 1 bytes.
 */
void af__http_init_limits(struct lws_token_limits *l)
{
    for (int t = 0; t < WSI_TOKEN_COUNT; t++)
        l->token_limit[t] = (unsigned short)((is_uri_token(t) ? AF_HTTP_MAX_URI
                                                              : AF_HTTP_MAX_FIELD) + 1);
}

/* The request target (path and query, as lws decoded them) is longer than AF_HTTP_MAX_URI. */
bool af__http_uri_too_long(struct lws *wsi)
{
    int total = 0;

    for (size_t i = 0; i < AF_ARRAY_SIZE(uri_tokens); i++)
        total += lws_hdr_total_length(wsi, uri_tokens[i]);
    return total > AF_HTTP_MAX_URI;
}

/* The first header (all lines of one name, as lws joins them) over AF_HTTP_MAX_FIELD, or -1. */
int af__http_field_too_long(struct lws *wsi)
{
    for (int t = 0; t < (int)_WSI_TOKEN_CLIENT_SENT_PROTOCOLS; t++)
        if (!is_uri_token(t) && t != WSI_TOKEN_HTTP &&
            lws_hdr_total_length(wsi, (enum lws_token_indexes)t) > AF_HTTP_MAX_FIELD)
            return t;
    return -1;
}

/* "user-agent:" -> "user-agent", for an error message. */
void af__http_token_name(int t, char *out, size_t outlen)
{
    const unsigned char *n = lws_token_to_string((enum lws_token_indexes)t);
    size_t len = n ? strcspn((const char *)n, ":") : 0;

    snprintf(out, outlen, "%.*s", (int)len, n ? (const char *)n : "");
}

size_t af__http_route_max_body(const struct server *s, enum route r)
{
    size_t cap;

    switch (r) {
    case R_FILTER:
    case R_PRIORITIZE:
    case R_PREEMPT:
    case R_EXPLAIN:
        return s->max_body;
    case R_MUTATE:
        cap = HTTP_MAX_ADMISSION_BODY;
        break;
    default:
        cap = HTTP_MAX_SMALL_BODY;
        break;
    }
    return cap < s->max_body ? cap : s->max_body;
}

size_t af__http_max_values(size_t len)
{
    return len / HTTP_BODY_BYTES_PER_VALUE + HTTP_BODY_FREE_VALUES;
}
