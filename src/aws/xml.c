/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bounded reader of the small XML documents EC2 and STS answer with (internal.h): expat
 * in one pass, each element handed to a callback with its path and text when it ends. A
 * DOCTYPE is refused (AWS sends none, and entities are how XML bombs work), and depth,
 * path and text are capped. An element refused for its depth or path is never pushed, so
 * its end must not pop: expat may still call the end handler of an element whose start
 * stopped the parser (an empty one), and those ends are counted off against `refused`.
 */
#include <expat.h>
#include <stdio.h>
#include <string.h>

#include "aws/internal.h"
#include "accelfit/banned.h"

#define MAX_DEPTH 32
#define MAX_PATH 512
#define MAX_TEXT (64u << 10)

struct xml_state {
    XML_Parser parser;
    af__xml_fn fn;
    void *ud;
    char path[MAX_PATH];
    size_t path_len[MAX_DEPTH + 1];
    int depth;
    int refused;               /* starts refused (not pushed) whose end is still to come */
    struct af_buf text;
    const char *failure;
};

static void fail(struct xml_state *st, const char *why)
{
    if (!st->failure)
        st->failure = why;
    XML_StopParser(st->parser, XML_FALSE);
}

static void on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
    struct xml_state *st = ud;
    const char *local = strrchr(name, ':');
    size_t n = strlen(st->path);

    (void)attrs;
    local = local ? local + 1 : name;
    if (st->refused || st->failure) {
        st->refused++;
        return;
    }
    if (st->depth >= MAX_DEPTH) {
        st->refused++;
        fail(st, "elements nested too deep");
        return;
    }
    if (n + 1 + strlen(local) >= sizeof(st->path)) {
        st->refused++;
        fail(st, "element path too long");
        return;
    }
    st->path_len[st->depth++] = n;
    snprintf(st->path + n, sizeof(st->path) - n, "/%s", local);
    af_buf_reset(&st->text);
}

static void on_end(void *ud, const XML_Char *name)
{
    struct xml_state *st = ud;

    (void)name;
    if (st->refused) {   /* the end of an element never pushed */
        st->refused--;
        return;
    }
    if (st->depth <= 0 || st->failure)
        return;
    st->fn(st->ud, st->path, st->text.buf ? st->text.buf : "");
    af_buf_reset(&st->text);
    st->path[st->path_len[--st->depth]] = '\0';
}

static void on_text(void *ud, const XML_Char *s, int len)
{
    struct xml_state *st = ud;

    if (af_buf_add(&st->text, s, (size_t)len) < 0)
        fail(st, "element text too long");
}

static void on_doctype(void *ud, const XML_Char *name, const XML_Char *sys, const XML_Char *pub,
                       int internal)
{
    (void)name, (void)sys, (void)pub, (void)internal;
    fail(ud, "DOCTYPE not allowed");
}

int af__xml_parse(const char *doc, size_t len, af__xml_fn fn, void *ud, char *err, size_t errlen)
{
    struct xml_state st = {.fn = fn, .ud = ud, .text = AF_BUF_INIT(MAX_TEXT)};
    int rc = 0;

    st.parser = XML_ParserCreate("UTF-8");
    af_assert(st.parser != NULL);
    XML_SetUserData(st.parser, &st);
    XML_SetElementHandler(st.parser, on_start, on_end);
    XML_SetCharacterDataHandler(st.parser, on_text);
    XML_SetStartDoctypeDeclHandler(st.parser, on_doctype);
    if (len > (size_t)0x7fffffff ||
        XML_Parse(st.parser, doc, (int)len, XML_TRUE) != XML_STATUS_OK) {
        if (st.failure)
            rc = af__aws_fail(err, errlen, AF_EPARSE, "not the XML expected: %s", st.failure);
        else
            rc = af__aws_fail(err, errlen, AF_EPARSE, "not XML: %s at line %lu",
                              XML_ErrorString(XML_GetErrorCode(st.parser)),
                              (unsigned long)XML_GetCurrentLineNumber(st.parser));
    }
    XML_ParserFree(st.parser);
    af_buf_release(&st.text);
    return rc;
}
