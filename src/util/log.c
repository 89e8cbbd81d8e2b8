/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging: one line per event on stderr, key=value or JSON. A line is built
 * in a local buffer and written with one write(2), so lines from different
 * threads do not interleave.
 */
#include "accelfit/util.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "accelfit/banned.h"

int af_log_level = AF_LOG_INFO;
int af_log_format = AF_LOG_TEXT;

static const char *level_names[] = {"debug", "info", "warn", "error"};

int af_log_parse_level(const char *s)
{
    for (size_t i = 0; i < AF_ARRAY_SIZE(level_names); i++)
        if (!strcmp(s, level_names[i]))
            return (int)i;
    return -1;
}

static void put(char *line, size_t *len, size_t cap, const char *s)
{
    for (; *s && *len + 1 < cap; s++)
        line[(*len)++] = *s;
}

static void put_escaped(char *line, size_t *len, size_t cap, const char *s, bool json)
{
    char tmp[8];
    for (; *s && *len < cap - 8; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            line[(*len)++] = '\\';
            line[(*len)++] = (char)c;
        } else if (c == '\n') {
            put(line, len, cap, "\\n");
        } else if (c < 0x20) {
            snprintf(tmp, sizeof(tmp), json ? "\\u%04x" : "\\x%02x", c);
            put(line, len, cap, tmp);
        } else {
            line[(*len)++] = (char)c;
        }
    }
}

static bool needs_quotes(const char *s)
{
    if (!*s)
        return true;
    for (; *s; s++)
        if (*s == ' ' || *s == '"' || *s == '=' || (unsigned char)*s < 0x21)
            return true;
    return false;
}

/*
 * In JSON logs a value that is a number or a boolean is written as one ("status":200,
 * "not_ready":false), so log pipelines can compare and sum it. Names and identifiers stay strings even when they
 * look numeric: a resourceVersion or a node called "42" is not a quantity.
 */
static bool log_as_is(const char *key, const char *v)
{
    static const char *const opaque[] = {"node",  "pod",     "name",   "namespace", "uid",
                                         "rv",    "resource_version",   "error",     "reason",
                                         "why",   "message", "msg",    "file",      "path",
                                         "value", "annotation",         "field",     "command",
                                         "source", "prefix", "kind",   "listen",    "first"};

    for (size_t i = 0; i < sizeof(opaque) / sizeof(opaque[0]); i++)
        if (!strcmp(key, opaque[i]))
            return false;
    return af_is_json_number(v) || !strcmp(v, "true") || !strcmp(v, "false");
}

void af__log(int level, const char *msg, ...)
{
    char line[4096], ts[64];
    size_t len = 0, cap = sizeof(line) - 2;
    struct timespec now;
    struct tm tm;
    bool json = af_log_format == AF_LOG_JSON;
    va_list ap;
    const char *k;

    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    {
        size_t n = strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(ts + n, sizeof(ts) - n, ".%03dZ", (int)(now.tv_nsec / 1000000));
    }
    if (level < 0 || level > AF_LOG_ERROR)
        level = AF_LOG_ERROR;

    if (json) {
        put(line, &len, cap, "{\"ts\":\"");
        put(line, &len, cap, ts);
        put(line, &len, cap, "\",\"level\":\"");
        put(line, &len, cap, level_names[level]);
        put(line, &len, cap, "\",\"msg\":\"");
        put_escaped(line, &len, cap, msg, true);
        put(line, &len, cap, "\"");
    } else {
        put(line, &len, cap, "ts=");
        put(line, &len, cap, ts);
        put(line, &len, cap, " level=");
        put(line, &len, cap, level_names[level]);
        put(line, &len, cap, " msg=\"");
        put_escaped(line, &len, cap, msg, false);
        put(line, &len, cap, "\"");
    }
    va_start(ap, msg);
    while ((k = va_arg(ap, const char *)) != NULL) {
        const char *v = va_arg(ap, const char *);
        if (!v)
            v = "";
        if (json) {
            put(line, &len, cap, ",\"");
            put_escaped(line, &len, cap, k, true);
            if (log_as_is(k, v)) {
                put(line, &len, cap, "\":");
                put(line, &len, cap, v);
            } else {
                put(line, &len, cap, "\":\"");
                put_escaped(line, &len, cap, v, true);
                put(line, &len, cap, "\"");
            }
        } else {
            put(line, &len, cap, " ");
            put(line, &len, cap, k);
            put(line, &len, cap, "=");
            if (needs_quotes(v)) {
                put(line, &len, cap, "\"");
                put_escaped(line, &len, cap, v, false);
                put(line, &len, cap, "\"");
            } else {
                put_escaped(line, &len, cap, v, false);
            }
        }
    }
    va_end(ap);
    if (json)
        put(line, &len, cap, "}");
    line[len++] = '\n';
    if (write(STDERR_FILENO, line, len) < 0) {
        /* Nothing sensible to do when stderr is gone. */
    }
}
