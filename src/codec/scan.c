/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON text looked at byte by byte: the members the Node and Pod decoders never read
 * (the reader passes their values over: a third of a Node, a fifth of a Pod), the
 * scanner of nesting (objects and arrays, strings skipped) the list streamer copies
 * values with and the reader skips them with, and the count of values a body holds.
 * A leaf of the codec: parse.c and list_stream.c use it (codec/internal.h), and it uses
 * neither.
 */
#include <string.h>

#include "accelfit/codec.h"
#include "codec/internal.h"
#include "accelfit/banned.h"

/* ---- what the decoders never read ---------------------------------------------------- */

/*
 * Members the Node and Pod decoders (objects.c) never read, big enough to be worth not
 * parsing: list items and watch events are parsed with the object and array values of
 * these passed over (AF__PARSE_SKIP_UNREAD, parse.c). A decoder that starts reading one
 * of them must take it off this list. Only object and array values are cut, so a label
 * or annotation with one of these names (a string) is kept; none of these names is a key
 * with an object or array value anywhere the decoders read (resources, ownerReferences,
 * conditions, containerStatuses).
 */
bool af__codec_unread_key(const char *k, size_t n)
{
#define K(s) {s, sizeof(s) - 1}
    static const struct {
        const char *s;
        size_t n;
    } keys[] = {
        K("managedFields"), K("images"),        K("addresses"),      K("nodeInfo"),
        K("volumes"),       K("volumeMounts"),  K("env"),            K("envFrom"),
        K("ports"),         K("tolerations"),   K("affinity"),       K("livenessProbe"),
        K("readinessProbe"), K("startupProbe"), K("topologySpreadConstraints"),
    };
#undef K
    for (size_t i = 0; i < AF_ARRAY_SIZE(keys); i++)
        if (keys[i].n == n && !memcmp(keys[i].s, k, n))
            return true;
    return false;
}

/* ---- paths in messages --------------------------------------------------------------------- */

/* n bytes of s at out + *at, as much as fits before the last byte of out[cap]. */
static void put(char *out, size_t cap, size_t *at, const char *s, size_t n)
{
    if (*at + 1 >= cap)
        return;
    if (n > cap - 1 - *at)
        n = cap - 1 - *at;
    memcpy(out + *at, s, n);
    *at += n;
}

void af__codec_path(char *out, size_t cap, const char *where, const char *field)
{
    size_t at = 0;

    if (!cap)
        return;
    if (where && *where) {
        put(out, cap, &at, where, strlen(where));
        put(out, cap, &at, ".", 1);
    }
    put(out, cap, &at, field, strlen(field));
    out[at] = '\0';
}

void af__codec_path_index(char *out, size_t cap, const char *where, size_t i)
{
    char digits[24], *d = digits + sizeof(digits);
    size_t at = 0;

    if (!cap)
        return;
    do
        *--d = (char)('0' + i % 10);
    while ((i /= 10) != 0);
    put(out, cap, &at, where, strlen(where));
    put(out, cap, &at, "[", 1);
    put(out, cap, &at, d, (size_t)(digits + sizeof(digits) - d));
    put(out, cap, &at, "]", 1);
    out[at] = '\0';
}

/* ---- scanning ---------------------------------------------------------------------------- */

/*
 * Scans text[at..len) of an object or array from the state `*n`, up to and including the
 * byte that closes it (strings skipped). Returns the index after the last byte scanned;
 * *closed when the container ended there.
 */
size_t af__codec_nest_scan(struct af__codec_nest *n, const char *text, size_t at, size_t len,
                           bool *closed)
{
    /* locals, not *n: a char read could alias it, and this loop sees every byte of a list */
    bool in_str = n->in_str, esc = n->esc;
    int depth = n->depth;
    size_t j = at;

    *closed = false;
    while (j < len) {
        if (in_str) {
            /* strings are most of the bytes: jump from quote to quote (memchr); a quote
             * after an odd run of backslashes (counted from j, where no escape is open)
             * is escaped */
            if (esc) {
                esc = false;
                j++;
                continue;
            }
            const char *q = memchr(text + j, '"', len - j);
            size_t end = q ? (size_t)(q - text) : len, run = 0;
            while (end - run > j && text[end - run - 1] == '\\')
                run++;
            if (!q) {
                esc = run % 2 == 1;     /* the chunk ends inside an escape */
                j = len;
                break;
            }
            j = end + 1;
            if (run % 2 == 0)
                in_str = false;
            continue;
        }
        char c = text[j++];
        if (c == '"') {
            in_str = true;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if ((c == '}' || c == ']') && --depth == 0) {
            *closed = true;
            break;
        }
    }
    n->in_str = in_str;
    n->esc = esc;
    n->depth = depth;
    return j;
}

/* ---- counting values ------------------------------------------------------------------ */

size_t af_codec_json_values(const char *text, size_t len)
{
    size_t n = 1, i = 0;

    while (i < len) {
        char c = text[i++];

        if (c == '{' || c == '[' || c == ',') {
            n++;
        } else if (c == '"') {
            /* Strings are most of a body: jump from quote to quote (memchr), and end at the
             * first one not escaped, i.e. not after an odd run of backslashes (the run
             * stops at the opening quote at the latest). Every request pays this. */
            for (;;) {
                const char *q = memchr(text + i, '"', len - i);
                size_t k, run = 0;

                if (!q)
                    return n;
                k = (size_t)(q - text);
                while (text[k - 1 - run] == '\\')
                    run++;
                i = k + 1;
                if (run % 2 == 0)
                    break;
            }
        }
    }
    return n;
}
