/* SPDX-License-Identifier: Apache-2.0 */
/*
 * /recommend: a workload profile from the query or a POSTed body, the
 * selection the core makes for it under the current config, and the
 * recommendation as codec/recommend.c writes it.
 */
#include "accelfit/service.h"

#include <stdio.h>
#include <string.h>

#include "accelfit/codec.h"

#include "service/handlers.h"
#include "accelfit/banned.h"

/* ---- recommend ---------------------------------------------------------------------------------- */

struct recommend_in {
    struct af_profile profile;
    char err[320];
};

static int recommend_param(void *ud, const char *key, const char *value)
{
    struct recommend_in *in = ud;

    return af_profile_set(&in->profile, key, value, in->err, sizeof(in->err));
}

/* The query's parameters through recommend_param; a bare name is a switch: ?neuron-ready. */
static int recommend_query(struct recommend_in *in, const char *query)
{
    struct af_query q;
    int rc = af_query_parse(&q, query, "GET /recommend", NULL, in->err, sizeof(in->err));

    for (size_t i = 0; !rc && i < q.n; i++)
        rc = recommend_param(in, q.p[i].key, q.p[i].bare ? "true" : q.p[i].value);
    af_query_release(&q);   /* nothing to release after a parse error; harmless */
    return rc;
}

/* True when `query` holds at least one parameter (empty pieces do not count). */
static bool has_query(const char *query)
{
    for (; query && *query; query++)
        if (*query != '&')
            return true;
    return false;
}

int af_service_recommend(struct af_service *svc, const char *query, const char *body, size_t len,
                         struct af_buf *out)
{
    size_t base = out->len;
    struct af_config *cfg = af_config_holder_get(svc->config);
    struct af_selection *sel = NULL;
    struct recommend_in in;
    struct af_buf json = AF_BUF_INIT(0);
    struct af_error err;
    int rc, status = 200;

    memset(&in, 0, sizeof(in));
    memset(&err, 0, sizeof(err));
    af_profile_init(&in.profile);
    if (body && len && has_query(query)) {
        snprintf(in.err, sizeof(in.err),
                 "POST /recommend has parameters both in its query ('%.80s') and in its body; "
                 "send them in one place",
                 query);
        rc = AF_EINVAL;
    } else if (body && len) {
        rc = af_codec_decode_params(body, len, recommend_param, &in, &err);
        if (rc && !in.err[0])
            af_error_format(&err, in.err, sizeof(in.err));
    } else {
        rc = recommend_query(&in, query);
    }
    if (!rc)
        rc = af_profile_check(&in.profile, in.err, sizeof(in.err));
    if (rc) {
        char text[400];
        snprintf(text, sizeof(text), "accelfit: %s", in.err);
        af_service_error_body(out, base, text);
        status = 400;
        goto done;
    }
    sel = af_xmalloc(sizeof(*sel));
    af_select(cfg->policy, cfg->catalog, &in.profile, false, sel);
    af_recommend_json(&in.profile, cfg, sel, &json);
    if (af_buf_add(out, json.buf, json.len)) {
        af_service_error_body(out, base, "accelfit: the recommendation is too large");
        status = 500;
    }
done:
    af_buf_release(&json);
    af_free(sel);
    af_config_unref(cfg);
    return status;
}
