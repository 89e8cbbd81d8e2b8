/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Lists decoded as they arrive (af_list_stream): fed in pieces of every size, a list
 * decodes exactly as it does whole, whatever the strings hold; the side members
 * (kind, metadata) may come before or after the items; what is not JSON fails.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "accelfit/codec.h"
#include "accelfit/config.h"
#include "accelfit/placement.h"
#include "accelfit/util.h"
#include "codec/internal.h"
#include "support/support.h"

static struct af_config *cfg;

static void setup(void)
{
    struct af_error err = {0};
    ck_assert_int_eq(af_config_load(&cfg, NULL, NULL, &err), 0);
}

static void teardown(void)
{
    af_config_unref(cfg);
}

/* "node:NAME:GPUS" and "pod:NS/NAME:NODE:CPU" lines, in order. */
static void record(void *ud, struct af_node_info *n, struct af_pod_info *p)
{
    struct af_buf *b = ud;
    int rc = n ? af_buf_printf(b, "node:%s:%lld\n", n->name,
                               (long long)n->allocatable.v[AF_RES_GPU])
               : af_buf_printf(b, "pod:%s/%s:%s:%lld\n", p->ns, p->name,
                               p->node_name ? p->node_name : "-",
                               (long long)p->requests.v[AF_RES_CPU]);
    ck_assert_int_eq(rc, 0);
    af_node_info_unref(n);
    af_pod_info_unref(p);
}

struct outcome {
    int rc;
    struct af_buf items;
    char *rv, *cont;
    size_t skipped;
    char err[512];
};

static void decode_in_pieces(const char *text, size_t piece, struct outcome *o)
{
    struct af_error err = {0};
    size_t len = strlen(text);
    memset(o, 0, sizeof(*o));
    af_buf_init(&o->items, 0);
    struct af_list_stream *s = af_list_stream_new(cfg, true, record, &o->items);
    for (size_t at = 0; at < len; at += piece)
        (void)af_list_stream_feed(s, text + at, len - at < piece ? len - at : piece);
    o->rc = af_list_stream_finish(s, &o->rv, &o->cont, &o->skipped, &err);
    snprintf(o->err, sizeof(o->err), "%s", err.text);
    af_list_stream_free(s);
}

static void outcome_free(struct outcome *o)
{
    af_buf_release(&o->items);
    free(o->rv);
    free(o->cont);
}

static const char *const lists[] = {
    /* a NodeList as the API server writes it: kind first, items without kind */
    "{\"kind\":\"NodeList\",\"apiVersion\":\"v1\",\"metadata\":{\"resourceVersion\":\"42\","
    "\"continue\":\"eyJ2IjoxfQ==\"},\"items\":[{\"metadata\":{\"name\":\"a\",\"labels\":{"
    "\"x\":\"}]{[\\\"\\\\\"}},\"status\":{\"allocatable\":{\"nvidia.com/gpu\":\"8\"}}},"
    "{\"metadata\":{\"name\":\"b \\u00e9\\\"q\\\"\"}}]}",
    /* pods, pretty-printed, with a bad item in the middle (skipped) */
    "{\n  \"kind\" : \"PodList\",\n  \"metadata\" : { \"resourceVersion\" : \"7\" },\n"
    "  \"items\" : [\n    { \"metadata\" : { \"name\" : \"p1\", \"namespace\" : \"ns\" },\n"
    "      \"spec\" : { \"nodeName\" : \"a\", \"containers\" : [ { \"name\" : \"c\",\n"
    "        \"resources\" : { \"requests\" : { \"cpu\" : \"250m\" } } } ] } } ,\n"
    "    { \"metadata\" : { \"name\" : \"bad\" }, \"spec\" : { \"containers\" : [ { \"name\" : "
    "\"c\", \"resources\" : { \"requests\" : { \"cpu\" : \"lots\" } } } ] } },\n"
    "    { \"metadata\" : { \"name\" : \"p2\", \"namespace\" : \"ns\" } }\n  ]\n}\n",
    /* kind: List with mixed kinds, other kinds and literals among the items */
    "{\"apiVersion\":\"v1\",\"kind\":\"List\",\"items\":[{\"kind\":\"Service\",\"metadata\":"
    "{\"name\":\"s\"}},null,17,true,{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\","
    "\"namespace\":\"d\"}},{\"kind\":\"Node\",\"metadata\":{\"name\":\"n\"}}]}",
    /* items before kind and metadata (an order the API server never sends) */
    "{\"items\":[{\"metadata\":{\"name\":\"late\"}}],\"metadata\":{\"resourceVersion\":\"9\"},"
    "\"kind\":\"NodeList\"}",
    /* a bare array, and a single object */
    "[{\"kind\":\"Node\",\"metadata\":{\"name\":\"x\"}},{\"kind\":\"Pod\",\"metadata\":"
    "{\"name\":\"y\",\"namespace\":\"z\"}}]",
    "{\"kind\":\"Node\",\"metadata\":{\"name\":\"solo\"},\"status\":{\"allocatable\":"
    "{\"nvidia.com/gpu\":\"1\"}}}",
    /* managedFields and images are cut before parsing; look-alikes inside strings stay */
    "{\"kind\":\"NodeList\",\"items\":[{\"metadata\":{\"name\":\"a,\\\"images\\\":[1,2]\","
    "\"managedFields\":[{\"manager\":\"x\",\"fieldsV1\":{\"f:metadata\":{\"}\":{}}}}]},"
    "\"status\":{\"images\" : [{\"names\":[\"i]\"]}],\"allocatable\":{\"nvidia.com/gpu\":\"2\"}}}]}",
    /* unread members cut (env, ports, volumes, tolerations), short ones and strings kept */
    "{\"kind\":\"PodList\",\"items\":[{\"metadata\":{\"name\":\"p\",\"namespace\":\"n\","
    "\"labels\":{\"env\":\"prod\",\"volumes\":\"[x]\"}},\"spec\":{\"nodeName\":\"a\","
    "\"volumes\":[{\"name\":\"v\",\"emptyDir\":{}}],\"containers\":[{\"name\":\"c\","
    "\"env\" :\n [{\"name\":\"A\",\"value\":\"}]\\\\\"}],\"ports\":[],\"resources\":{"
    "\"requests\":{\"cpu\":\"2\"}}}],\"tolerations\":[{\"key\":\"k\"}]}}]}",
    /* errors: a Status, a wrong kind, items not an array, not JSON, cut short, trailing */
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"status\":\"Failure\",\"message\":\"too old\","
    "\"reason\":\"Expired\",\"code\":410}",
    "{\"kind\":\"ConfigMapList\",\"items\":[{\"metadata\":{\"name\":\"cm\"}}]}",
    "{\"kind\":\"NodeList\",\"items\":{}}",
    "{\"kind\":\"NodeList\",\"items\":[{\"metadata\":{\"name\":\"a\"}},{\"metadata\":}]}",
    "{\"kind\":\"NodeList\",\"items\":[{\"metadata\":{\"name\":\"a\"}},",
    "{\"kind\":\"NodeList\",\"items\":[]} x",
    "{\"kind\":\"NodeList\",\"items\":[{\"metadata\":{\"name\":\"a\"}},]}",
    "\"just a string\"",
};

static const struct {
    int rc;
    const char *items;
    const char *rv;
    size_t skipped;
    const char *err;
} want[] = {
    {0, "node:a:8\nnode:b \xc3\xa9\"q\":0\n", "42", 0, NULL},
    {0, "pod:ns/p1:a:250\npod:ns/p2:-:0\n", "7", 1, "items[1]"},
    {0, "pod:d/p:-:0\nnode:n:0\n", NULL, 0, NULL},
    {0, "node:late:0\n", "9", 0, NULL},
    {0, "node:x:0\npod:z/y:-:0\n", NULL, 0, NULL},
    {0, "node:solo:1\n", NULL, 0, NULL},
    {0, "node:a,\"images\":[1,2]:2\n", NULL, 0, NULL},
    {0, "pod:n/p:a:2000\n", NULL, 0, NULL},
    {AF_EEXPIRED, "", NULL, 0, "Status 410 Expired: too old"},
    {AF_EINVAL, "", NULL, 0, "kind: expected NodeList, PodList or List, got 'ConfigMapList'"},
    {AF_ETYPE, "", NULL, 0, "items: expected an array, got object"},
    {AF_EPARSE, NULL, NULL, 0, "items[1]"},
    {AF_EPARSE, NULL, NULL, 0, "ends early"},
    {AF_EPARSE, NULL, NULL, 0, "not JSON"},
    {AF_EPARSE, NULL, NULL, 0, "not JSON"},
    {AF_ETYPE, "", NULL, 0, "expected an object"},
};

/* Every piece size gives the same result as the whole text at once. */
START_TEST(test_pieces_of_every_size_decode_alike)
{
    const char *text = lists[_i];
    size_t len = strlen(text);
    for (size_t piece = 1; piece <= len; piece++) {
        struct outcome o;
        decode_in_pieces(text, piece, &o);
        ck_assert_msg(o.rc == want[_i].rc, "list %d piece %zu: rc %d (%s)", _i, piece, o.rc,
                      o.err);
        if (want[_i].items)
            ck_assert_msg(!strcmp(o.items.buf ? o.items.buf : "", want[_i].items),
                          "list %d piece %zu: got\n%s", _i, piece, o.items.buf);
        if (want[_i].rv)
            ck_assert_msg(o.rv && !strcmp(o.rv, want[_i].rv), "list %d: rv %s", _i, o.rv);
        else if (o.rc == 0 && _i != 0)
            ck_assert_ptr_null(o.rv);
        ck_assert_uint_eq(o.skipped, want[_i].skipped);
        if (want[_i].err)
            ck_assert_msg(strstr(o.err, want[_i].err), "list %d piece %zu: error '%s'", _i,
                          piece, o.err);
        if (_i == 0)
            ck_assert_str_eq(o.cont, "eyJ2IjoxfQ==");
        outcome_free(&o);
    }
}
END_TEST

/* The API server's recorded lists decode as they do whole. */
START_TEST(test_recorded_lists_stream_like_whole)
{
    const char *files[] = {"tests/fixtures/apiserver/nodes-list.json",
                           "tests/fixtures/apiserver/pods-list.json",
                           "tests/fixtures/apiserver/nodes-list-limit2.json"};
    for (size_t f = 0; f < AF_ARRAY_SIZE(files); f++) {
        size_t len;
        char *text = af_test_read(files[f], &len);
        struct af_buf whole = AF_BUF_INIT(0);
        struct af_error err = {0};
        char *rv = NULL, *cont = NULL;
        size_t skipped = 0;
        ck_assert_int_eq(af_codec_decode_list_skip(cfg, text, len, record, &whole, &rv, &cont,
                                                   &skipped, &err),
                         0);
        ck_assert_ptr_nonnull(whole.buf);
        for (size_t piece = 1; piece < 4096; piece = piece * 3 + 1) {
            struct outcome o;
            decode_in_pieces(text, piece, &o);
            ck_assert_int_eq(o.rc, 0);
            ck_assert_str_eq(o.items.buf, whole.buf);
            ck_assert_str_eq(o.rv, rv);
            if (cont)
                ck_assert_str_eq(o.cont, cont);
            outcome_free(&o);
        }
        af_buf_release(&whole);
        free(rv);
        free(cont);
        free(text);
    }
}
END_TEST

/* Exactly the unread members' object and array values become null; nothing else changes. */
static const struct {
    const char *in, *out;
} cuts[] = {
    {"{\"a\":1}", "{\"a\":1}"},
    {"{\"env\":[{\"name\":\"A\"}],\"resources\":{\"requests\":{\"cpu\":\"1\"}}}",
     "{\"env\":null,\"resources\":{\"requests\":{\"cpu\":\"1\"}}}"},
    {"{\"volumes\":[{\"x\":\"]\"}],\"env\" : [1,2,3],\"resources\":{\"limits\":{}},"
     "\"ports\":[{\"p\":80}],\"name\":\"c\"}",
     "{\"volumes\":null,\"env\":null,\"resources\":{\"limits\":{}},\"ports\":null,\"name\":\"c\"}"},
    /* strings: a label named env, a value naming a key, escaped quotes and backslashes */
    {"{\"labels\":{\"env\":\"prod\",\"x\":\"\\\"env\\\":[1,2,3]\",\"y\":\"a\\\\\"},"
     "\"managedFields\":[{\"f:\\\"q\":{}}]}",
     "{\"labels\":{\"env\":\"prod\",\"x\":\"\\\"env\\\":[1,2,3]\",\"y\":\"a\\\\\"},"
     "\"managedFields\":null}"},
    /* nested anywhere; empty containers too; not a container: kept */
    {"{\"spec\":{\"containers\":[{\"env\":[],\"ports\":{},\"name\":\"m\"}]},\"images\":null,"
     "\"volumes\":\"v\"}",
     "{\"spec\":{\"containers\":[{\"env\":null,\"ports\":null,\"name\":\"m\"}]},\"images\":null,"
     "\"volumes\":\"v\"}"},
    /* not balanced, not closed: not JSON */
    {"{\"env\":[1,2,3", NULL},
    {"{\"env", NULL},
    {"{\"env\":[1,2]", NULL},
};

START_TEST(test_unread_members_are_passed_over)
{
    struct af__codec_perr perr;
    json_t *got = af__codec_parse(cuts[_i].in, strlen(cuts[_i].in),
                                  JSON_ALLOW_NUL | AF__PARSE_SKIP_UNREAD, &perr);
    if (!cuts[_i].out) {
        ck_assert_ptr_null(got);
        ck_assert_str_ne(perr.text, "");
        return;
    }
    json_t *exp = json_loads(cuts[_i].out, 0, NULL);
    ck_assert_msg(got && json_equal(got, exp), "%s: %s", cuts[_i].in, got ? "differs" : perr.text);
    json_decref(got);
    json_decref(exp);
}
END_TEST

/* The reader takes and refuses what json_loadb does, and builds the same tree. */
static const char *const texts[] = {
    "{}", "[]", " {\"a\" : [1, -2, 3.5, -0, -0.0, 1e3, 1E-2, 2.5e+10, true, false, null]} ",
    "{\"a\":1,\"a\":2}", "{\"k\":{\"n\":{\"m\":[[],[{}]]}}}", "\"s\"", "12", "-7", "true", "null",
    "{\"e\":\"\\\" \\\\ \\/ \\b \\f \\n \\r \\t\"}", "{\"u\":\"\\u00e9\\u4e2d\\uD834\\uDD1E\"}",
    "{\"u\":\"\\uD834\"}", "{\"u\":\"\\uDD1E\"}", "{\"u\":\"\\uD834\\u0041\"}", "{\"u\":\"\\u12G4\"}",
    "{\"nul\":\"a\\u0000b\"}", "{\"a\\u0000b\":1}", "{\"q\":\"\\x\"}",
    "{\"utf8\":\"\xc3\xa9\xe4\xb8\xad\xf0\x9d\x84\x9e\"}", "{\"bad\":\"\xc3\"}", "{\"bad\":\"\xc0\xaf\"}",
    "{\"bad\":\"\xe0\x80\xaf\"}", "{\"bad\":\"\xed\xa0\x80\"}", "{\"bad\":\"\xf4\x90\x80\x80\"}",
    "{\"bad\":\"\xff\"}", "{\"ctl\":\"a\tb\"}", "{\"del\":\"\x7f\"}",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "1e308", "1e309", "-1e309", "1e-400", "01", "1.", ".5", "-", "+1", "1e", "1e+", "0x10",
    "tru", "truex", "nul", "[1,]", "[,1]", "{\"a\":1,}", "{\"a\" 1}", "{a:1}", "{\"a\":1",
    "[1", "[1 2]", "{} {}", "", "   ", "\"unterminated", "[\"a\"]x", "{\"a\":1}\n\t ",
};

START_TEST(test_reader_agrees_with_jansson)
{
    static const size_t flags[] = {0, JSON_ALLOW_NUL, JSON_DECODE_ANY,
                                   JSON_ALLOW_NUL | JSON_DECODE_ANY};
    const char *t = texts[_i];

    for (size_t f = 0; f < AF_ARRAY_SIZE(flags); f++) {
        json_error_t je;
        struct af__codec_perr pe;
        json_t *exp = json_loadb(t, strlen(t), flags[f], &je);
        json_t *got = af__codec_parse(t, strlen(t), flags[f], &pe);
        ck_assert_msg(!exp == !got, "'%s' flags %zx: jansson %s, reader %s", t, flags[f],
                      exp ? "takes it" : je.text, got ? "takes it" : pe.text);
        ck_assert_msg(!exp || json_equal(exp, got), "'%s': trees differ", t);
        ck_assert_msg(got || pe.text[0], "'%s': refused without a reason", t);
        json_decref(exp);
        json_decref(got);
    }
}
END_TEST

/* Nesting: jansson's limit (2048 deep), no deeper, and no stack to exhaust. */
START_TEST(test_reader_nesting_limit)
{
    for (int depth = 2047; depth <= 2049; depth++) {
        struct af_buf b = AF_BUF_INIT(0);
        for (int i = 0; i < depth; i++)
            ck_assert_int_eq(af_buf_add(&b, "[", 1), 0);
        for (int i = 0; i < depth; i++)
            ck_assert_int_eq(af_buf_add(&b, "]", 1), 0);
        json_error_t je;
        struct af__codec_perr pe;
        json_t *exp = json_loadb(b.buf, b.len, 0, &je);
        json_t *got = af__codec_parse(b.buf, b.len, 0, &pe);
        ck_assert_msg(!exp == !got, "depth %d", depth);
        ck_assert_int_eq(got != NULL, depth <= 2048);
        json_decref(exp);
        json_decref(got);
        af_buf_release(&b);
    }
}
END_TEST

/* ---- protobuf (codec/proto.c) ------------------------------------------------------------- */

static const char *s_(const char *s)
{
    return s ? s : "-";
}

static void packed(struct af_buf *b, const char *kv)
{
    for (const char *k = kv; k && *k; k += strlen(k) + 1) {
        const char *v = k + strlen(k) + 1;
        ck_assert_int_eq(af_buf_printf(b, " %s=%s", k, v), 0);
        k = v;
    }
}

/* Every field of a record that a listed object can set, one line each. */
static void full_record(void *ud, struct af_node_info *n, struct af_pod_info *p)
{
    struct af_buf *b = ud;
    int rc = 0;

    if (n) {
        rc |= af_buf_printf(b, "node %s type=%s family=%s cls=%d kind=%d src=%s mem=%g-%g "
                               "unsched=%d region=%s zone=%s group=%s spot=%d price=%d:%g",
                            n->name, s_(n->instance_type), s_(n->family), (int)n->cls,
                            (int)n->kind, s_(n->class_source), n->dev_mem_gib_lo,
                            n->dev_mem_gib_hi, n->unschedulable, s_(n->region), s_(n->zone),
                            s_(n->node_group), n->spot, n->price_known, n->hourly_usd);
        for (int i = 0; i < AF_RES__COUNT; i++)
            rc |= af_buf_printf(b, " r%d=%lld", i, (long long)n->allocatable.v[i]);
        packed(b, n->labels);
    } else {
        rc |= af_buf_printf(b, "pod %s/%s uid=%s gen=%s node=%s tenant=%s owner=%s/%s term=%d "
                               "sys=%d managed=%d job=%s side=%s claim=%s ready=%d failed=%d "
                               "restarts=%d started=%.0f expected=%g:%s bad=%d ext=%d/%d",
                            p->ns, p->name, s_(p->uid), s_(p->generate_name), s_(p->node_name),
                            s_(p->tenant), s_(p->owner_kind), s_(p->owner_name), p->terminal,
                            p->system, p->managed, s_(p->job_name), s_(p->rollout_side),
                            s_(p->rollout_claim), p->ready, p->failed, p->restarts,
                            p->started_unix, p->expected_s, s_(p->expected_source),
                            p->expected_bad, p->n_ext, p->ext_claim);
        for (int i = 0; i < AF_RES__COUNT; i++)
            rc |= af_buf_printf(b, " r%d=%lld", i, (long long)p->requests.v[i]);
        for (size_t i = 0; i < AF_POD_ANNOTATIONS_N; i++)
            rc |= af_buf_printf(b, " a%zu=%s", i, s_(*af_pod_annotation_at(&p->ann, i)));
        for (int i = 0; i < p->n_ext; i++)
            rc |= af_buf_printf(b, " ext:%s=%lld", p->ext[i].name, (long long)p->ext[i].count);
        for (int i = 0; i < p->n_claims; i++)
            rc |= af_buf_printf(b, " claim:%s:%s:%s:%s", p->claims[i].name, s_(p->claims[i].claim),
                                s_(p->claims[i].tmpl), s_(p->claims[i].generated));
        if (p->placement)
            rc |= af_buf_printf(b, " place:%s:%zu:%d:%zu", s_(p->placement->node_name),
                                p->placement->n_selector, p->placement->has_required,
                                p->placement->n_terms);
        packed(b, p->labels);
    }
    rc |= af_buf_puts(b, "\n");
    ck_assert_int_eq(rc, 0);
    af_node_info_unref(n);
    af_pod_info_unref(p);
}

static int cmp_line(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The lines of `text`, sorted, in place (a real API server's list order is its watch cache's
 * and differs between two lists). */
static void sort_lines(char *text)
{
    char *lines[64], *copy = af_xstrdup(text), *save = NULL;
    size_t n = 0;

    for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        ck_assert_uint_lt(n, AF_ARRAY_SIZE(lines));
        lines[n++] = l;
    }
    qsort(lines, n, sizeof(*lines), cmp_line);
    for (size_t i = 0, at = 0; i < n; i++) {
        size_t len = strlen(lines[i]);
        memcpy(text + at, lines[i], len);
        text[at + len] = '\n';
        at += len + 1;
    }
    free(copy);
}

/* The same lines in any order (a whole dump would be too long for a failure's message). */
static void same_lines(char *a, char *b)
{
    sort_lines(a);
    sort_lines(b);
    while (*a || *b) {
        size_t na = strcspn(a, "\n"), nb = strcspn(b, "\n");
        ck_assert_msg(na == nb && !memcmp(a, b, na), "protobuf:\n%.*s\njson:\n%.*s", (int)na, a,
                      (int)nb, b);
        a += na + (a[na] != 0);
        b += nb + (b[nb] != 0);
    }
}

/* A body fed in pieces of `piece` bytes: the records, rv, and the error. */
static int feed_pieces(const char *body, size_t len, size_t piece, struct af_buf *out, char **rv,
                       char *errtext, size_t errn, size_t *skipped)
{
    struct af_error err = {0};
    char *cont = NULL;
    struct af_list_stream *s = af_list_stream_new(cfg, true, full_record, out);
    int rc;

    for (size_t at = 0; at < len; at += piece)
        (void)af_list_stream_feed(s, body + at, len - at < piece ? len - at : piece);
    *skipped = 0;
    rc = af_list_stream_finish(s, rv, &cont, skipped, &err);
    af_list_stream_free(s);
    free(cont);
    snprintf(errtext, errn, "%.200s", err.text);
    return rc;
}

/* The same pods and nodes a real kube-apiserver listed as JSON and as protobuf
 * (tests/fixtures/apiserver-protobuf): the same records, field for field, fed whole or in
 * pieces of any size. */
START_TEST(test_protobuf_lists_decode_as_json)
{
    static const char *const kinds[] = {"pods", "nodes"};
    for (size_t k = 0; k < AF_ARRAY_SIZE(kinds); k++) {
        char path[128], errtext[256];
        size_t jlen, plen, skipped;
        snprintf(path, sizeof(path), "tests/fixtures/apiserver-protobuf/%s-list.json", kinds[k]);
        char *json = af_test_read(path, &jlen);
        snprintf(path, sizeof(path), "tests/fixtures/apiserver-protobuf/%s-list.pb", kinds[k]);
        char *pb = af_test_read(path, &plen);
        struct af_buf expect = AF_BUF_INIT(0);
        char *want_rv = NULL;

        ck_assert_int_eq(feed_pieces(json, jlen, jlen, &expect, &want_rv, errtext,
                                     sizeof(errtext), &skipped), 0);
        ck_assert_uint_eq(skipped, 0);
        ck_assert_ptr_nonnull(want_rv);
        for (size_t piece = 1; piece < 2 * plen; piece = piece * 5 + 2) {
            struct af_buf got = AF_BUF_INIT(0);
            char *rv = NULL;
            ck_assert_msg(feed_pieces(pb, plen, piece, &got, &rv, errtext, sizeof(errtext),
                                      &skipped) == 0 && !skipped,
                          "%s in pieces of %zu: %s", kinds[k], piece, errtext);
            same_lines(got.buf, expect.buf);
            ck_assert_str_eq(rv, want_rv);
            af_buf_release(&got);
            free(rv);
        }
        if (k == 0) {
            /* what the fixture's pods are there for */
            ck_assert_ptr_nonnull(strstr(expect.buf, "pod default/kata-pod "));
            ck_assert_ptr_nonnull(strstr(expect.buf, " sys=1 ")); /* DaemonSet and mirror */
            ck_assert_ptr_nonnull(strstr(expect.buf, "ready=1 failed=0 restarts=3 started=1795860000"));
            ck_assert_ptr_nonnull(strstr(expect.buf, "owner=Job/pretrain term=1 sys=0 managed=1 "
                                                   "job=pretrain side=source"));
            ck_assert_ptr_nonnull(strstr(expect.buf, "expected=7200:spec.activeDeadlineSeconds bad=1"));
            ck_assert_ptr_nonnull(strstr(expect.buf, "ext:example.com/fpga=2"));
            ck_assert_ptr_nonnull(strstr(expect.buf, "tenant=team-a"));
        } else {
            ck_assert_ptr_nonnull(strstr(expect.buf, "unsched=1"));
        }
        af_buf_release(&expect);
        free(want_rv);
        free(json);
        free(pb);
    }
}
END_TEST

/* A protobuf body cut short anywhere, or with a byte changed anywhere, fails with a message
 * or decodes: never a crash, never a read past its end (the sanitizers watch). */
START_TEST(test_protobuf_cut_or_changed)
{
    size_t plen;
    char *pb = af_test_read("tests/fixtures/apiserver-protobuf/pods-list.pb", &plen);
    char errtext[256];
    size_t skipped;

    for (size_t cut = 0; cut < plen; cut += cut < 64 ? 1 : 97) {
        struct af_buf got = AF_BUF_INIT(0);
        char *rv = NULL;
        int rc = feed_pieces(pb, cut, 4096, &got, &rv, errtext, sizeof(errtext), &skipped);
        ck_assert_msg(rc != 0, "cut at %zu decoded", cut);
        ck_assert_msg(strstr(errtext, "protobuf") || strstr(errtext, "list"), "%s", errtext);
        af_buf_release(&got);
        free(rv);
    }
    for (size_t at = 4; at < plen; at += 13) {
        char *copy = af_xmalloc(plen);
        memcpy(copy, pb, plen);
        struct af_buf got = AF_BUF_INIT(0);
        char *rv = NULL;
        copy[at] = (char)(copy[at] ^ 0x5a);
        (void)feed_pieces(copy, plen, 1000, &got, &rv, errtext, sizeof(errtext), &skipped);
        af_buf_release(&got);
        free(rv);
        free(copy);
    }
    free(pb);
}
END_TEST

/* An error the API server answered in protobuf (a Status) is an error naming it. */
START_TEST(test_protobuf_status)
{
    size_t plen;
    char *pb = af_test_read("tests/fixtures/apiserver-protobuf/status-404.pb", &plen);
    struct af_buf got = AF_BUF_INIT(0);
    char errtext[256], *rv = NULL;
    size_t skipped;

    ck_assert_int_ne(feed_pieces(pb, plen, 7, &got, &rv, errtext, sizeof(errtext), &skipped), 0);
    ck_assert_msg(strstr(errtext, "not found"), "%s", errtext);
    ck_assert_ptr_null(got.buf);
    af_buf_release(&got);
    free(pb);
}
END_TEST

/* A protobuf writer, for what a v1.26 API server cannot send (newer fields, errors). */
static void pbw_varint(struct af_buf *b, uint64_t v)
{
    do {
        uint8_t c = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v)
            c |= 0x80;
        ck_assert_int_eq(af_buf_add(b, &c, 1), 0);
    } while (v);
}

static void pbw_bytes(struct af_buf *b, unsigned no, const void *p, size_t n)
{
    pbw_varint(b, (uint64_t)no << 3 | 2);
    pbw_varint(b, n);
    ck_assert_int_eq(af_buf_add(b, p ? p : "", n), 0);
}

static void pbw_str(struct af_buf *b, unsigned no, const char *str)
{
    pbw_bytes(b, no, str, strlen(str));
}

/* Field `no` holding message `m`, which is released. */
static void pbw_msg(struct af_buf *b, unsigned no, struct af_buf *m)
{
    pbw_bytes(b, no, m->buf, m->len);
    af_buf_release(m);
}

/* A map entry {1: k, 2: v}; v a Quantity {1: v} when `qty`. */
static void pbw_entry(struct af_buf *b, unsigned no, const char *k, const char *v, bool qty)
{
    struct af_buf e = AF_BUF_INIT(0), q = AF_BUF_INIT(0);
    pbw_str(&e, 1, k);
    if (qty) {
        pbw_str(&q, 1, v);
        pbw_msg(&e, 2, &q);
    } else {
        pbw_str(&e, 2, v);
    }
    pbw_msg(b, no, &e);
}

/* "k8s\0" + runtime.Unknown{typeMeta{v1, kind}, raw} */
static void pbw_envelope(struct af_buf *out, const char *kind, struct af_buf *raw)
{
    struct af_buf tm = AF_BUF_INIT(0);
    ck_assert_int_eq(af_buf_add(out, "k8s\0", 4), 0);
    pbw_str(&tm, 1, "v1");
    pbw_str(&tm, 2, kind);
    pbw_msg(out, 1, &tm);
    pbw_msg(out, 2, raw);
    pbw_str(out, 3, "");
    pbw_str(out, 4, "application/vnd.kubernetes.protobuf");
}

/* The fields of newer API servers (v1.28-1.34: a sidecar's restartPolicy, pod-level
 * resources, claims by name, the extended resources' claim), unknown fields of every wire
 * type, a long continue token and bad UTF-8 decode as their JSON does. */
START_TEST(test_protobuf_newer_fields)
{
    struct af_buf body = AF_BUF_INIT(0), list = AF_BUF_INIT(0), lm = AF_BUF_INIT(0);
    struct af_buf pod = AF_BUF_INIT(0), meta = AF_BUF_INIT(0), spec = AF_BUF_INIT(0);
    struct af_buf st = AF_BUF_INIT(0), c = AF_BUF_INIT(0), res = AF_BUF_INIT(0), x = AF_BUF_INIT(0);
    struct af_buf y = AF_BUF_INIT(0), got = AF_BUF_INIT(0), expect = AF_BUF_INIT(0);
    char cont[601], errtext[256], *rv = NULL, *json;
    size_t skipped;
    uint8_t fixed[8] = {1, 2, 3, 4, 5, 6, 7, 8};

    memset(cont, 'c', 600);
    cont[600] = 0;
    pbw_str(&meta, 1, "p");
    pbw_str(&meta, 3, "ns");
    pbw_entry(&meta, 11, "accelfit.io/managed", "true", false);
    pbw_entry(&meta, 12, "accelfit.io/workload", "infer\xff", false);
    pbw_str(&meta, 17, "managedFields are passed over");
    /* containers[0]: requests cpu 1, limits example.com/gpu 2 */
    pbw_entry(&res, 2, "cpu", "1", true);
    pbw_entry(&res, 1, "example.com/gpu", "2", true);
    pbw_str(&c, 1, "c");
    pbw_msg(&c, 8, &res);
    pbw_msg(&spec, 2, &c);
    /* initContainers[0]: a sidecar (restartPolicy Always) with 2 cpu */
    pbw_entry(&res, 2, "cpu", "2", true);
    pbw_str(&c, 1, "i");
    pbw_msg(&c, 8, &res);
    pbw_str(&c, 24, "Always");
    pbw_msg(&spec, 20, &c);
    pbw_str(&spec, 10, "n1");
    pbw_varint(&spec, 5 << 3 | 0);   /* activeDeadlineSeconds */
    pbw_varint(&spec, 3600);
    pbw_varint(&spec, 98 << 3 | 5);   /* unknown fixed32 */
    ck_assert_int_eq(af_buf_add(&spec, fixed, 4), 0);
    pbw_varint(&spec, 99 << 3 | 1);   /* unknown fixed64 */
    ck_assert_int_eq(af_buf_add(&spec, fixed, 8), 0);
    pbw_varint(&spec, 97 << 3 | 0);   /* unknown varint */
    pbw_varint(&spec, 1u << 30);
    pbw_str(&x, 1, "gpu");
    pbw_str(&x, 4, "tmpl");
    pbw_msg(&spec, 39, &x);
    pbw_entry(&res, 2, "memory", "1Gi", true);
    pbw_msg(&spec, 40, &res);
    pbw_str(&st, 1, "Running");
    pbw_str(&x, 1, "gpu");
    pbw_str(&x, 2, "gen-1");
    pbw_msg(&st, 15, &x);
    pbw_str(&y, 1, "c");
    pbw_str(&y, 2, "nvidia.com/gpu");
    pbw_str(&y, 3, "r");
    pbw_msg(&x, 1, &y);
    pbw_str(&x, 2, "ext-1");
    pbw_msg(&st, 18, &x);
    pbw_msg(&pod, 1, &meta);
    pbw_msg(&pod, 2, &spec);
    pbw_msg(&pod, 3, &st);
    pbw_str(&lm, 2, "5");
    pbw_str(&lm, 3, cont);
    pbw_msg(&list, 1, &lm);
    pbw_msg(&list, 2, &pod);
    pbw_envelope(&body, "PodList", &list);

    json = af_xasprintf(
        "{\"kind\":\"PodList\",\"metadata\":{\"resourceVersion\":\"5\",\"continue\":\"%s\"},"
        "\"items\":[{\"metadata\":{\"name\":\"p\",\"namespace\":\"ns\",\"labels\":{"
        "\"accelfit.io/managed\":\"true\"},\"annotations\":{\"accelfit.io/workload\":"
        "\"infer\\ufffd\"}},\"spec\":{\"containers\":[{\"name\":\"c\",\"resources\":{"
        "\"requests\":{\"cpu\":\"1\"},\"limits\":{\"example.com/gpu\":\"2\"}}}],"
        "\"initContainers\":[{\"name\":\"i\",\"resources\":{\"requests\":{\"cpu\":\"2\"}},"
        "\"restartPolicy\":\"Always\"}],\"nodeName\":\"n1\",\"activeDeadlineSeconds\":3600,"
        "\"resourceClaims\":[{\"name\":\"gpu\",\"resourceClaimTemplateName\":\"tmpl\"}],"
        "\"resources\":{\"requests\":{\"memory\":\"1Gi\"}}},\"status\":{\"phase\":\"Running\","
        "\"resourceClaimStatuses\":[{\"name\":\"gpu\",\"resourceClaimName\":\"gen-1\"}],"
        "\"extendedResourceClaimStatus\":{\"requestMappings\":[{\"containerName\":\"c\","
        "\"resourceName\":\"nvidia.com/gpu\",\"requestName\":\"r\"}],\"resourceClaimName\":"
        "\"ext-1\"}}}]}",
        cont);
    ck_assert_int_eq(feed_pieces(json, strlen(json), 1 << 20, &expect, &rv, errtext,
                                 sizeof(errtext), &skipped), 0);
    free(rv);
    rv = NULL;
    ck_assert_ptr_nonnull(strstr(expect.buf, "claim:gpu:-:tmpl:gen-1"));
    ck_assert_ptr_nonnull(strstr(expect.buf, "a0=infer\xef\xbf\xbd"));
    for (size_t piece = 1; piece < body.len * 2; piece = piece * 3 + 1) {
        struct af_error err = {0};
        char *c_out = NULL;
        struct af_list_stream *ls = af_list_stream_new(cfg, true, full_record, &got);
        for (size_t at = 0; at < body.len; at += piece)
            (void)af_list_stream_feed(ls, body.buf + at,
                                      body.len - at < piece ? body.len - at : piece);
        ck_assert_msg(af_list_stream_finish(ls, &rv, &c_out, &skipped, &err) == 0, "%s", err.text);
        ck_assert(af_list_stream_protobuf(ls));
        af_list_stream_free(ls);
        same_lines(got.buf, expect.buf);
        ck_assert_str_eq(rv, "5");
        ck_assert_str_eq(c_out, cont);
        free(rv);
        free(c_out);
        rv = NULL;
        af_buf_reset(&got);
    }
    af_buf_release(&got);
    af_buf_release(&expect);
    af_buf_release(&body);
    free(json);
}
END_TEST

/* Errors in protobuf: a Status 410 is Expired (the reflector lists again), a list of another
 * kind is refused by name, an item that runs past its list is refused. */
START_TEST(test_protobuf_errors)
{
    struct af_buf body = AF_BUF_INIT(0), raw = AF_BUF_INIT(0), got = AF_BUF_INIT(0);
    struct af_buf lm = AF_BUF_INIT(0);
    char errtext[256], *rv = NULL;
    size_t skipped;

    pbw_str(&raw, 2, "Failure");
    pbw_str(&raw, 3, "too old resource version: 1 (2)");
    pbw_str(&raw, 4, "Expired");
    pbw_varint(&raw, 6 << 3 | 0);
    pbw_varint(&raw, 410);
    pbw_envelope(&body, "Status", &raw);
    ck_assert_int_eq(feed_pieces(body.buf, body.len, 3, &got, &rv, errtext, sizeof(errtext),
                                 &skipped), AF_EEXPIRED);
    ck_assert_msg(strstr(errtext, "too old"), "%s", errtext);
    af_buf_reset(&body);

    pbw_str(&lm, 2, "7");
    pbw_msg(&raw, 1, &lm);
    pbw_envelope(&body, "ConfigMapList", &raw);
    ck_assert_int_ne(feed_pieces(body.buf, body.len, 5, &got, &rv, errtext, sizeof(errtext),
                                 &skipped), 0);
    ck_assert_msg(strstr(errtext, "ConfigMapList"), "%s", errtext);
    af_buf_reset(&body);

    /* a List whose item says it is longer than the List */
    ck_assert_int_eq(af_buf_add(&raw, "\x12\x7f", 2), 0);
    ck_assert_int_eq(af_buf_add(&raw, "\x0a\x01p", 3), 0);
    pbw_envelope(&body, "PodList", &raw);
    ck_assert_int_ne(feed_pieces(body.buf, body.len, 64, &got, &rv, errtext, sizeof(errtext),
                                 &skipped), 0);
    ck_assert_msg(strstr(errtext, "runs past its list"), "%s", errtext);
    ck_assert_ptr_null(got.buf);
    af_buf_release(&body);
    af_buf_release(&got);
}
END_TEST

/* The paths messages name are built without snprintf, and read as snprintf writes them,
 * cut short at every size of buffer. */
/*
 * The plain-text scan (16 bytes a step, then 8) never passes a byte a string reader must
 * look at, wherever it sits in a block, and leaves less than a word to the caller's byte
 * loop when there is none: every length up to 48, every position, every kind of byte.
 */
START_TEST(test_plain_prefix_stops_before_every_special_byte)
{
    static const unsigned char special[] = {'"', '\\', 0x00, 0x1f, 0x80, 0xc3, 0xff};
    char text[64];

    for (size_t len = 0; len <= 48; len++) {
        memset(text, 'a', sizeof(text));
        for (int lenient = 0; lenient < 2; lenient++)
            ck_assert_uint_ge(af__codec_plain_prefix(text, len, lenient) + 7, len);
        for (size_t at = 0; at < len; at++)
            for (size_t k = 0; k < sizeof(special); k++) {
                bool counts = special[k] == '"' || special[k] == '\\';
                memset(text, 'a', sizeof(text));
                text[at] = (char)special[k];
                ck_assert_uint_le(af__codec_plain_prefix(text, len, false), at);
                if (counts)
                    ck_assert_uint_le(af__codec_plain_prefix(text, len, true), at);
                else   /* lenient: only '"' and '\\' stop it */
                    ck_assert_uint_ge(af__codec_plain_prefix(text, len, true) + 7, len);
            }
    }
}
END_TEST

START_TEST(test_paths_read_as_snprintf_writes_them)
{
    static const struct {
        const char *where, *field;
        size_t i;
    } cases[] = {
        {"items[3]", "spec.containers", 0},
        {"", "metadata.name", 7},
        {NULL, "status.allocatable", 12345678901ull},
        {"Nodes.items", "x", 18446744073709551615ull},
    };

    for (size_t k = 0; k < AF_ARRAY_SIZE(cases); k++)
        for (size_t cap = 1; cap < 48; cap++) {
            char got[48], expect[48];
            const char *w = cases[k].where;
            memset(got, 'x', sizeof(got));
            af__codec_path(got, cap, w, cases[k].field);
            if (w && *w)
                snprintf(expect, cap, "%s.%s", w, cases[k].field);
            else
                snprintf(expect, cap, "%s", cases[k].field);
            ck_assert_str_eq(got, expect);
            if (!w)
                continue;
            af__codec_path_index(got, cap, w, cases[k].i);
            snprintf(expect, cap, "%s[%zu]", w, cases[k].i);
            ck_assert_str_eq(got, expect);
        }
}
END_TEST

Suite *af_list_stream_suite(void);
Suite *af_list_stream_suite(void)
{
    Suite *s = suite_create("list_stream");
    TCase *tc = tcase_create("stream");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_loop_test(tc, test_pieces_of_every_size_decode_alike, 0, (int)AF_ARRAY_SIZE(lists));
    tcase_add_test(tc, test_recorded_lists_stream_like_whole);
    tcase_add_loop_test(tc, test_unread_members_are_passed_over, 0, (int)AF_ARRAY_SIZE(cuts));
    tcase_add_loop_test(tc, test_reader_agrees_with_jansson, 0, (int)AF_ARRAY_SIZE(texts));
    tcase_add_test(tc, test_reader_nesting_limit);
    tcase_add_test(tc, test_protobuf_lists_decode_as_json);
    tcase_add_test(tc, test_protobuf_cut_or_changed);
    tcase_add_test(tc, test_protobuf_status);
    tcase_add_test(tc, test_protobuf_newer_fields);
    tcase_add_test(tc, test_protobuf_errors);
    tcase_add_test(tc, test_paths_read_as_snprintf_writes_them);
    tcase_add_test(tc, test_plain_prefix_stops_before_every_special_byte);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_list_stream_suite());
}
