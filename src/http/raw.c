/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The raw-protocol fallback: what libwebsockets could not parse as HTTP. lws
 * 4.1.6 answers a request it cannot parse with its own 403 HTML page or by closing
 * the connection; where it offers a way out, accelfit takes it. An unknown method
 * (or CONNECT) or a line that is not HTTP at all makes lws hand the raw bytes to the
 * "accelfit-raw" protocol (the vhost's listen-accept fallback, make_vhost in
 * server.c), which answers 400 with the JSON every other error uses and closes.
 * Test: test_malformed_request_is_400_json (tests/check_http.c), and the raw-socket
 * fuzzer (tests/fuzz/net_fuzz.c).
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "http/internal.h"
#include "accelfit/banned.h"

/* A token character (RFC 9110): a method, an Upgrade value. */
bool af__http_is_tchar(unsigned char c)
{
    return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/*
 * lws gave up on these bytes (an unknown method, a line that is not HTTP) or
 * was asked to CONNECT: say which, in the JSON every other error uses. The
 * method is a token (RFC 9110), so it needs no JSON escaping.
 */
static size_t malformed_answer(const unsigned char *in, size_t len, char *out, size_t outlen)
{
    char msg[160], body[256];
    size_t n = 0;
    int blen;

    while (n < len && n < 32 && af__http_is_tchar(in[n]))
        n++;
    if (n > 0 && n < len && in[n] == ' ')
        snprintf(msg, sizeof(msg), "unsupported method '%.*s': accelfit answers GET, HEAD and POST",
                 (int)n, (const char *)in);
    else
        snprintf(msg, sizeof(msg), "malformed request line: expected METHOD /path HTTP/1.1");
    AF_LOG(AF_LOG_INFO, "request", "verb", "other", "status", "400", "error", msg, NULL);
    blen = snprintf(body, sizeof(body), "{\"error\":\"%s\"}\n", msg);
    return (size_t)snprintf(out, outlen,
                            "HTTP/1.1 400 Bad Request\r\nContent-Type: application/json\r\n"
                            "Content-Length: %d\r\nConnection: close\r\n\r\n%s",
                            blen, body);
}

int af__http_raw_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                        size_t len)
{
    struct rawss *r = user;

    switch (reason) {
    case LWS_CALLBACK_RAW_RX:
        /* The first bytes decide; anything after them is never read (the answer closes). */
        if (r && !r->len && in && len) {
            r->len = malformed_answer(in, len, (char *)r->out + LWS_PRE, sizeof(r->out) - LWS_PRE);
            lws_callback_on_writable(wsi);
        }
        return 0;
    case LWS_CALLBACK_RAW_WRITEABLE:
        if (!r || !r->len)
            return 0;
        if (lws_write(wsi, r->out + LWS_PRE, r->len, LWS_WRITE_RAW) < 0)
            return -1;
        return -1;   /* close: the rest of the input is not HTTP we can follow */
    default:
        break;
    }
    return 0;
}
