/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One GET /version with the transport of every request (credentials, TLS, the server's
 * address as configured), for a command that lists once and exits (accelfit costs): like
 * kubectl, it says at once, in one line, why the API server cannot be used — connection
 * refused, a TLS failure, 401 or 403 — naming the server, instead of retrying with backoff
 * as a long-running reflector must.
 */
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/kube.h"
#include "accelfit/util.h"

#include "kube/internal.h"
#include "accelfit/banned.h"

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

int af_kube_probe(struct af_kube *k, long timeout_ms, char *why, size_t n)
{
    CURL *h = curl_easy_init();
    char errbuf[CURL_ERROR_SIZE] = "";
    const char *server = k && k->conn && k->conn->server ? k->conn->server : "?";
    int rc = AF_ECONN;

    if (n)
        why[0] = '\0';
    if (!h) {
        snprintf(why, n, "cannot reach the API server %s: out of memory", server);
        return AF_ECONN;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        struct creds c;
        struct curl_slist *hdr;
        char *url = NULL;
        long status = 0;
        CURLcode cc;

        af__kube_creds_get(k, &c);
        hdr = af__kube_http_setup(k, h, "/version", &c, &url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms > 0 ? timeout_ms : 1L);
        cc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(hdr);
        af_free(url);
        if (cc == CURLE_OK && status == 401 && attempt == 0) {
            af__kube_creds_invalidate(k, c.gen);   /* a token due for refresh: once more */
            af__kube_creds_clear(&c);
            continue;
        }
        af__kube_creds_clear(&c);
        if (cc != CURLE_OK)
            snprintf(why, n, "cannot reach the API server %s: %s", server,
                     errbuf[0] ? errbuf : curl_easy_strerror(cc));
        else if (status == 401)
            snprintf(why, n, "the API server %s refused the credentials (401 Unauthorized)",
                     server);
        else if (status == 403)
            snprintf(why, n, "the API server %s forbids this user (403 Forbidden) even "
                             "/version", server);
        else
            rc = 0;   /* any other answer is the API server's: listing will say more */
        break;
    }
    curl_easy_cleanup(h);
    return rc;
}
