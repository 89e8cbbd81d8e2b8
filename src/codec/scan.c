/* SPDX-License-Identifier: Apache-2.0 */
/*
 * JSON text looked at byte by byte, before jansson parses it: the members the Node
 * and Pod decoders never read and the cutter that takes their values out of an item
 * or a watch event (a third of a Node, a fifth of a Pod), and the scanner of nesting
 * (objects and arrays, strings skipped) the list streamer copies values with. A leaf
 * of the codec: list_stream.c and objects.c both use it (codec/internal.h), and it
 * uses neither.
 */
#include <string.h>

#include "accelfit/codec.h"
#include "codec/internal.h"
#include "accelfit/banned.h"

/* ---- what the decoders never read ---------------------------------------------------- */

/*
 * Members the Node and Pod decoders (objects.c) never read, big enough to be worth not
 * parsing: list items and watch events are parsed with the object and array values of
 * these cut out (af__codec_cut_unread, below). A decoder that starts reading one
 * of them must take it off this list. Only object and array values are cut, so a label
 * or annotation with one of these names (a string) is kept; none of these names is a key
 * with an object or array value anywhere the decoders read (resources, ownerReferences,
 * conditions, containerStatuses).
 */
bool af__codec_unread_key(const char *k, size_t n)
{
    static const char *const keys[] = {
        "managedFields", "images",        "addresses",      "nodeInfo",
        "volumes",       "volumeMounts",  "env",            "envFrom",
        "ports",         "tolerations",   "affinity",       "livenessProbe",
        "readinessProbe", "startupProbe", "topologySpreadConstraints",
    };
    for (size_t i = 0; i < AF_ARRAY_SIZE(keys); i++)
        if (strlen(keys[i]) == n && !memcmp(keys[i], k, n))
            return true;
    return false;
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
        char c = text[j++];
        if (in_str) {
            if (esc)
                esc = false;
            else if (c == '\\')
                esc = true;
            else if (c == '"')
                in_str = false;
        } else if (c == '"') {
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

/* The end of the object or array starting at text[at] (balanced, strings skipped), or 0. */
static size_t container_end(const char *text, size_t at, size_t len)
{
    struct af__codec_nest n = {0, false, false};
    bool closed;
    size_t end = af__codec_nest_scan(&n, text, at, len, &closed);

    return closed ? end : 0;
}

/* The index of the quote that closes the string whose opening quote is text[open]; 0
 * when it is not closed. A quote is escaped when an odd number of backslashes precede it. */
static size_t string_end(const char *text, size_t open, size_t len)
{
    size_t at = open + 1;
    for (;;) {
        const char *q = at < len ? memchr(text + at, '"', len - at) : NULL;
        if (!q)
            return 0;
        size_t i = (size_t)(q - text), bs = 0;
        while (i - bs > open + 1 && text[i - bs - 1] == '\\')
            bs++;
        if (bs % 2 == 0)
            return i;
        at = i + 1;
    }
}

/*
 * Replaces the object and array values of members the decoders never read
 * (af__codec_unread_key, above) by null, in place, in one pass over the item.
 * Returns the new length. If the text is not JSON, jansson still says so afterwards.
 */
size_t af__codec_cut_unread(char *text, size_t len)
{
    size_t r = 0, w = 0;

    /* Outside strings only a quote matters (it starts a string, perhaps a key); strings
     * are skipped with memchr. Bytes are moved down only once something was cut, and
     * each string is looked at where it is, before it moves. */
    while (r < len) {
        const char *q = memchr(text + r, '"', len - r);
        size_t open = q ? (size_t)(q - text) : len;
        size_t close = q ? string_end(text, open, len) : 0;
        size_t upto = close ? close + 1 : len, end = 0;

        if (close && af__codec_unread_key(text + open + 1, close - open - 1)) {
            /* a key (followed by ':') whose value is an object or array */
            size_t v = upto;
            while (v < len && af__codec_ws(text[v]))
                v++;
            if (v < len && text[v] == ':') {
                v++;
                while (v < len && af__codec_ws(text[v]))
                    v++;
                if (v < len && (text[v] == '[' || text[v] == '{'))
                    end = container_end(text, v, len);
            }
            if (end && end - upto < 5)
                end = 0;                /* ":[]" is shorter than ":null" */
        }
        if (w != r)
            memmove(text + w, text + r, upto - r);
        w += upto - r;
        r = upto;
        if (end) {
            memcpy(text + w, ":null", 5);   /* w <= r, so this stays in text[..end) */
            w += 5;
            r = end;
        }
    }
    return w;
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
