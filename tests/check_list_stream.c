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
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_list_stream_suite());
}
