/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The documentation against the repository and the real program. README.md,
 * BENCHMARKS.md and the Markdown files in docs/ are read as Markdown (fenced code blocks, code
 * spans, ATX headings), and:
 *
 *   - every relative link resolves to a file or directory inside the
 *     repository, and a `#anchor` to a heading of the Markdown file it points
 *     at (GitHub's slugs: lower case, spaces to '-', punctuation other than
 *     '-' and '_' dropped, "-1", "-2" ... for repeats);
 *   - a code span that names a repository path (`tests/...`, `docs/x.md`)
 *     names one that exists, and nothing names "../shared";
 *   - every ```console block whose first line starts with "$ accelfit " is
 *     run, each "$ " command with the built binary from the source tree, and
 *     every output line the block shows must appear, in order, as part of a
 *     line of the real output (stdout, then stderr); a line that is "..." or
 *     ends with "..." marks an elision and is skipped;
 *   - every `curl` to 127.0.0.1:8888 or localhost:8888 in a ```sh block is
 *     sent to `accelfit serve --demo` (method from -X, path, body from -d
 *     TEXT or -d @FILE; a `# comment` is ignored) and must answer 200; a
 *     one-line `for I in A B C; do curl ...; done` sends it once per word. An
 *     HTML comment `<!-- serve: ARGS -->` on its own line right before the
 *     block sends its curls to `accelfit serve --demo ARGS` instead, e.g.
 *     `<!-- serve: --policy policies/examples/inf2-inference-rollout.yaml -->`.
 *     Each document gets its own servers, one per distinct ARGS (one for the
 *     unmarked blocks), which take its blocks with those ARGS in order, so a
 *     walk-through's state carries from one block to the next;
 *   - when the block is followed by a ```json or ```text block before the
 *     next heading, that block shows the answer to the block's first request
 *     whose answer is shown (not sent with `-o FILE` or `> FILE`). JSON: the
 *     answer must hold every key path shown, with the same strings, numbers,
 *     booleans and nulls; a string "..." stands for any value, a string
 *     ending in "..." for any string that starts with the part before it.
 *     Text: every line shown must be a line of the answer (of its lines
 *     holding X, for `| grep X`, or starting with X for `| grep '^X'`), in
 *     order; "..." and a trailing "..." elide as in console blocks.
 *
 * A failure names the document and line, so the fix is to the doc (paste the
 * real output), unless the program is what is wrong.
 */
#include <dirent.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accelfit/util.h"
#include "support/http_client.h"
#include "support/support.h"

/* ---- the documents -------------------------------------------------------------------------- */

struct block {
    char info[32];     /* the fence's info string ("console", "sh", "json", "") */
    size_t fence;      /* index of the opening fence line */
    size_t first, end; /* content lines [first, end) */
};

struct heading {
    size_t line;
    char base[256]; /* the slug of its text */
    char slug[256]; /* the anchor: base, or base-N for the N-th repeat */
};

struct doc {
    char rel[256];  /* path from the repository root */
    char dir[256];  /* its directory, "" for the root */
    char *text;     /* the file, split into lines in place */
    char **lines;
    size_t n_lines;
    struct block *blocks;
    size_t n_blocks;
    struct heading *headings;
    size_t n_headings;
    bool *in_code;  /* per line: inside a fenced block (fences included) */
};

/* True when `s` (after up to three spaces) opens or closes a fence; sets its char and length. */
static bool fence_line(const char *s, char *ch, size_t *len)
{
    size_t i = 0, n = 0;

    while (i < 3 && s[i] == ' ')
        i++;
    if (s[i] != '`' && s[i] != '~')
        return false;
    while (s[i + n] == s[i])
        n++;
    if (n < 3)
        return false;
    *ch = s[i];
    *len = n;
    return true;
}

/* Code point of the UTF-8 sequence at *p (advancing *p); invalid bytes read as themselves. */
static unsigned utf8_next(const unsigned char **p)
{
    const unsigned char *s = *p;
    unsigned c = s[0], n = 0, cp;

    if (c < 0x80) {
        *p = s + 1;
        return c;
    }
    if ((c & 0xE0) == 0xC0)
        n = 1, cp = c & 0x1F;
    else if ((c & 0xF0) == 0xE0)
        n = 2, cp = c & 0x0F;
    else if ((c & 0xF8) == 0xF0)
        n = 3, cp = c & 0x07;
    else {
        *p = s + 1;
        return c;
    }
    for (unsigned i = 1; i <= n; i++) {
        if ((s[i] & 0xC0) != 0x80) {
            *p = s + 1;
            return c;
        }
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    *p = s + n + 1;
    return cp;
}

/* Non-ASCII punctuation and symbols GitHub drops from slugs (the ones prose uses). */
static bool unicode_punct(unsigned cp)
{
    return (cp >= 0x2000 && cp <= 0x206F) ||  /* general punctuation: dashes, quotes, … */
           (cp >= 0x2190 && cp <= 0x22FF) ||  /* arrows, mathematical operators */
           (cp >= 0x2500 && cp <= 0x25FF) ||  /* box drawing, shapes */
           cp == 0xA7 || cp == 0xAB || cp == 0xB6 || cp == 0xB7 || cp == 0xBB || cp == 0xD7 ||
           cp == 0xF7;
}

/*
 * GitHub's heading anchor: lower case; letters, digits, '-', '_' kept; a space becomes
 * '-'; everything else dropped (so `code` marks and punctuation vanish).
 */
static void slugify(const char *text, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)text;
    size_t n = 0;

    while (*p && n + 5 < cap) {
        const unsigned char *start = p;
        unsigned cp = utf8_next(&p);
        if (cp < 0x80) {
            if (cp >= 'A' && cp <= 'Z')
                out[n++] = (char)(cp - 'A' + 'a');
            else if ((cp >= 'a' && cp <= 'z') || (cp >= '0' && cp <= '9') || cp == '-' ||
                     cp == '_')
                out[n++] = (char)cp;
            else if (cp == ' ')
                out[n++] = '-';
        } else if (!unicode_punct(cp)) {
            memcpy(out + n, start, (size_t)(p - start));
            n += (size_t)(p - start);
        }
    }
    out[n] = '\0';
}

/* The heading text of an ATX heading line, or NULL. Writes into `buf`. */
static const char *atx_heading(const char *s, char *buf, size_t cap)
{
    size_t i = 0, level = 0, len;

    while (i < 3 && s[i] == ' ')
        i++;
    while (s[i + level] == '#')
        level++;
    if (level < 1 || level > 6 || (s[i + level] && s[i + level] != ' ' && s[i + level] != '\t'))
        return NULL;
    s += i + level;
    while (*s == ' ' || *s == '\t')
        s++;
    snprintf(buf, cap, "%s", s);
    len = strlen(buf);
    while (len && (buf[len - 1] == ' ' || buf[len - 1] == '\t'))
        buf[--len] = '\0';
    /* An optional closing sequence of '#'s, preceded by a space. */
    {
        size_t j = len;
        while (j && buf[j - 1] == '#')
            j--;
        if (j < len && (j == 0 || buf[j - 1] == ' ')) {
            buf[j] = '\0';
            len = j;
            while (len && buf[len - 1] == ' ')
                buf[--len] = '\0';
        }
    }
    return buf;
}

static void doc_load(struct doc *d, const char *rel)
{
    size_t len, cap_lines = 64, cap_blocks = 0, cap_heads = 0;
    bool open = false;
    char open_ch = 0;
    size_t open_len = 0;
    const char *slash;
    char *p;

    memset(d, 0, sizeof(*d));
    snprintf(d->rel, sizeof(d->rel), "%s", rel);
    slash = strrchr(rel, '/');
    snprintf(d->dir, sizeof(d->dir), "%.*s", slash ? (int)(slash - rel) : 0, rel);
    d->text = af_test_read(rel, &len);
    d->lines = af_xcalloc(cap_lines, sizeof(char *));
    for (p = d->text; *p;) {
        char *nl = strchr(p, '\n');
        AF_GROW(d->lines, cap_lines, d->n_lines + 1);
        d->lines[d->n_lines++] = p;
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    d->in_code = af_xcalloc(d->n_lines + 1, sizeof(bool));
    for (size_t i = 0; i < d->n_lines; i++) {
        const char *s = d->lines[i];
        char ch;
        size_t flen;
        if (fence_line(s, &ch, &flen)) {
            if (!open) {
                struct block *b;
                const char *info = s;
                AF_GROW(d->blocks, cap_blocks, d->n_blocks + 1);
                b = &d->blocks[d->n_blocks++];
                memset(b, 0, sizeof(*b));
                while (*info == ' ')
                    info++;
                info += flen;
                while (*info == ' ')
                    info++;
                snprintf(b->info, sizeof(b->info), "%.*s", (int)strcspn(info, " \t{"), info);
                b->fence = i;
                b->first = i + 1;
                open = true;
                open_ch = ch;
                open_len = flen;
                d->in_code[i] = true;
                continue;
            }
            if (ch == open_ch && flen >= open_len) {
                d->blocks[d->n_blocks - 1].end = i;
                open = false;
                d->in_code[i] = true;
                continue;
            }
        }
        d->in_code[i] = open;
        if (!open) {
            char buf[512];
            const char *h = atx_heading(s, buf, sizeof(buf));
            if (h) {
                struct heading *hd;
                int same = 0;
                AF_GROW(d->headings, cap_heads, d->n_headings + 1);
                hd = &d->headings[d->n_headings];
                hd->line = i;
                slugify(h, hd->base, sizeof(hd->base));
                for (size_t k = 0; k < d->n_headings; k++)
                    same += !strcmp(d->headings[k].base, hd->base);
                if (same)
                    snprintf(hd->slug, sizeof(hd->slug), "%.240s-%d", hd->base, same);
                else
                    snprintf(hd->slug, sizeof(hd->slug), "%s", hd->base);
                d->n_headings++;
            }
        }
    }
    ck_assert_msg(!open, "%s: a fenced code block is never closed", rel);
}

static void doc_release(struct doc *d)
{
    af_free(d->text);
    af_free(d->lines);
    af_free(d->blocks);
    af_free(d->headings);
    af_free(d->in_code);
    memset(d, 0, sizeof(*d));
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* README.md, BENCHMARKS.md and docs/NAME.md (sorted). Caller frees each and the array. */
static char **doc_list(size_t *n)
{
    char **v = NULL;
    size_t cap = 0, k = 0, first_doc;
    DIR *dir = opendir(af_test_path("docs"));
    struct dirent *e;

    ck_assert_msg(dir != NULL, "cannot open docs/");
    AF_GROW(v, cap, 2);
    v[k++] = af_xstrdup("README.md");
    v[k++] = af_xstrdup("BENCHMARKS.md");
    first_doc = k;
    for (;;) {
        size_t l;
        e = readdir(dir);
        if (!e)
            break;
        l = strlen(e->d_name);
        if (l > 3 && !strcmp(e->d_name + l - 3, ".md") && e->d_name[0] != '.') {
            AF_GROW(v, cap, k + 1);
            v[k++] = af_xasprintf("docs/%s", e->d_name);
        }
    }
    closedir(dir);
    qsort(v + first_doc, k - first_doc, sizeof(char *), cmp_str);
    *n = k;
    return v;
}

static void doc_list_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        af_free(v[i]);
    af_free(v);
}

/* ---- inline text: code spans and links ------------------------------------------------------- */

/* A code span or a link target, and the 1-based line it starts on. */
struct inline_item {
    bool code;             /* a code span (else a link target) */
    char text[1024];
    size_t line;
};

typedef void (*inline_fn)(const struct doc *d, const struct inline_item *it, void *ud);

static void scan_paragraph(const struct doc *d, size_t from, size_t to, inline_fn fn, void *ud)
{
    struct af_buf para = AF_BUF_INIT(0);
    size_t *line_of;
    const char *s;
    size_t n;

    for (size_t i = from; i < to; i++) {
        ck_assert_int_eq(af_buf_puts(&para, d->lines[i]), 0);
        ck_assert_int_eq(af_buf_puts(&para, "\n"), 0);
    }
    s = para.buf;
    n = para.len;
    line_of = af_xcalloc(n + 1, sizeof(size_t));
    for (size_t i = 0, ln = from + 1; i <= n; i++) {
        line_of[i] = ln;
        if (i < n && s[i] == '\n')
            ln++;
    }
    for (size_t i = 0; i < n;) {
        if (s[i] == '\\' && i + 1 < n) {
            i += 2;
            continue;
        }
        if (s[i] == '`') {
            size_t run = 0, j;
            while (i + run < n && s[i + run] == '`')
                run++;
            /* The closing run of the same length, if any; otherwise the run is literal. */
            for (j = i + run; j < n; j++) {
                size_t r2 = 0;
                if (s[j] != '`')
                    continue;
                while (j + r2 < n && s[j + r2] == '`')
                    r2++;
                if (r2 == run)
                    break;
                j += r2 - 1;
            }
            if (j < n) {
                struct inline_item it = {true, "", line_of[i]};
                size_t a = i + run, b = j;
                for (size_t k = a, w = 0; k < b && w + 1 < sizeof(it.text); k++)
                    it.text[w++] = s[k] == '\n' ? ' ' : s[k];
                fn(d, &it, ud);
                i = j + run;
            } else {
                i += run;
            }
            continue;
        }
        if (s[i] == ']' && i + 1 < n && s[i + 1] == '(') {
            struct inline_item it = {false, "", line_of[i]};
            size_t a = i + 2, b = a, depth = 0;
            if (a < n && s[a] == '<') {
                a++;
                b = a;
                while (b < n && s[b] != '>')
                    b++;
            } else {
                while (b < n && s[b] != ' ' && s[b] != '\n' && (s[b] != ')' || depth)) {
                    if (s[b] == '(')
                        depth++;
                    else if (s[b] == ')')
                        depth--;
                    b++;
                }
            }
            snprintf(it.text, sizeof(it.text), "%.*s", (int)(b - a), s + a);
            fn(d, &it, ud);
            i = b;
            continue;
        }
        i++;
    }
    /* Reference definitions: "[label]: target" at the start of a line. */
    for (size_t i = from; i < to; i++) {
        const char *l = d->lines[i], *c;
        while (*l == ' ')
            l++;
        c = *l == '[' ? strstr(l, "]:") : NULL;
        if (c && !memchr(l, '`', (size_t)(c - l))) {
            struct inline_item it = {false, "", i + 1};
            c += 2;
            while (*c == ' ')
                c++;
            snprintf(it.text, sizeof(it.text), "%.*s", (int)strcspn(c, " \t"), c);
            fn(d, &it, ud);
        }
    }
    af_free(line_of);
    af_buf_release(&para);
}

/*
 * Calls `fn` for each code span and each link target in the paragraphs of `d`
 * (runs of non-blank lines outside fenced blocks; a code span may cross a line
 * end, so a paragraph is scanned as one text).
 */
static void scan_inline(const struct doc *d, inline_fn fn, void *ud)
{
    size_t i = 0;

    while (i < d->n_lines) {
        size_t j;
        if (d->in_code[i] || !d->lines[i][0]) {
            i++;
            continue;
        }
        for (j = i; j < d->n_lines && !d->in_code[j] && d->lines[j][0]; j++)
            ;
        scan_paragraph(d, i, j, fn, ud);
        i = j;
    }
}

/* ---- links ----------------------------------------------------------------------------------- */

struct problems {
    struct af_buf text;
    int count;
};

static void problem(struct problems *pr, const char *fmt, ...) AF_PRINTF(2, 3);
static void problem(struct problems *pr, const char *fmt, ...)
{
    char line[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(line, sizeof(line), fmt, ap);
    va_end(ap);
    pr->count++;
    if (pr->count <= 40)
        ck_assert_int_eq(af_buf_printf(&pr->text, "\n  %s", line), 0);
}

static void problems_check(struct problems *pr, const char *what)
{
    ck_assert_msg(pr->count == 0, "%d %s:%s%s", pr->count, what, pr->text.buf ? pr->text.buf : "",
                  pr->count > 40 ? "\n  ..." : "");
    af_buf_release(&pr->text);
}

/* The repository root, resolved. */
static const char *root_real(void)
{
    static char root[PATH_MAX];

    if (!root[0])
        ck_assert_msg(realpath(AF_SOURCE_DIR, root) != NULL, "cannot resolve %s", AF_SOURCE_DIR);
    return root;
}

/* Resolves `rel` (from the repository root); true when it exists inside the repository. */
static bool in_repo(const char *rel, char *resolved)
{
    char path[PATH_MAX * 2];
    const char *root = root_real();
    size_t rl = strlen(root);

    snprintf(path, sizeof(path), "%s/%s", AF_SOURCE_DIR, rel);
    if (!realpath(path, resolved))
        return false;
    return !strncmp(resolved, root, rl) && (resolved[rl] == '/' || resolved[rl] == '\0');
}

static bool has_heading(const char *rel_md, const char *anchor)
{
    struct doc t;
    bool found = false;

    doc_load(&t, rel_md);
    for (size_t i = 0; i < t.n_headings && !found; i++)
        found = !strcmp(t.headings[i].slug, anchor);
    doc_release(&t);
    return found;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);

    return a >= b && !strcmp(s + a - b, suffix);
}

static void check_link(const struct doc *d, const struct inline_item *it, void *ud)
{
    struct problems *pr = ud;
    char target[1024], rel[2048], resolved[PATH_MAX];
    const char *hash, *anchor = NULL;

    if (it->code)
        return;
    snprintf(target, sizeof(target), "%s", it->text);
    if (!target[0] || strstr(target, "://") || !strncmp(target, "mailto:", 7))
        return;
    hash = strchr(target, '#');
    if (hash) {
        anchor = hash + 1;
        target[hash - target] = '\0';
    }
    if (!target[0]) {
        snprintf(rel, sizeof(rel), "%s", d->rel);   /* "#anchor": this file */
    } else if (target[0] == '/') {
        problem(pr, "%s:%zu: link '%s' is absolute; use a path relative to the file", d->rel,
                it->line, it->text);
        return;
    } else {
        snprintf(rel, sizeof(rel), "%s%s%s", d->dir, d->dir[0] ? "/" : "", target);
    }
    if (!in_repo(rel, resolved)) {
        problem(pr, "%s:%zu: link '%s' does not resolve to a file in the repository", d->rel,
                it->line, it->text);
        return;
    }
    if (!anchor)
        return;
    if (ends_with(rel, ".md")) {
        const char *rel_md = resolved + strlen(root_real()) + 1;
        if (!has_heading(rel_md, anchor))
            problem(pr, "%s:%zu: link '%s': %s has no heading with the anchor '#%s'", d->rel,
                    it->line, it->text, rel_md, anchor);
    } else if (!(anchor[0] == 'L' && strspn(anchor + 1, "0123456789-L") == strlen(anchor + 1))) {
        problem(pr, "%s:%zu: link '%s': only Markdown files have heading anchors", d->rel,
                it->line, it->text);
    }
}

START_TEST(test_doc_links_resolve_in_the_repository)
{
    struct problems pr = {AF_BUF_INIT(0), 0};
    size_t n;
    char **files = doc_list(&n);

    for (size_t i = 0; i < n; i++) {
        struct doc d;
        doc_load(&d, files[i]);
        scan_inline(&d, check_link, &pr);
        doc_release(&d);
    }
    doc_list_free(files, n);
    problems_check(&pr, "broken links");
}
END_TEST

/* ---- paths named in code spans --------------------------------------------------------------- */

static const char *const top_dirs[] = {"bench/",    "cmake/",   "docs/", "include/", "manifests/",
                                       "policies/", "scripts/", "src/",  "tests/",   NULL};

static void check_named_path(const struct doc *d, const struct inline_item *it, void *ud)
{
    struct problems *pr = ud;
    const char *s = it->text;
    char resolved[PATH_MAX], rel[1100];
    bool path_like = false;

    if (strstr(s, "../shared") || (it->code && !strncmp(s, "../", 3))) {
        problem(pr, "%s:%zu: '%s' names a path outside the repository", d->rel, it->line, s);
        return;
    }
    if (!it->code || strspn(s, "abcdefghijklmnopqrstuvwxyz"
                               "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._/-") != strlen(s))
        return;
    for (size_t i = 0; top_dirs[i]; i++)
        path_like |= !strncmp(s, top_dirs[i], strlen(top_dirs[i]));
    if (path_like) {
        if (!in_repo(s, resolved))
            problem(pr, "%s:%zu: `%s` is not in the repository", d->rel, it->line, s);
        return;
    }
    /* A bare Markdown file name: at the root or in docs/. */
    if (ends_with(s, ".md") && !strchr(s, '/')) {
        snprintf(rel, sizeof(rel), "docs/%s", s);
        if (!in_repo(s, resolved) && !in_repo(rel, resolved))
            problem(pr, "%s:%zu: `%s` is neither at the root nor in docs/", d->rel, it->line, s);
    }
}

START_TEST(test_docs_name_only_files_in_the_repository)
{
    struct problems pr = {AF_BUF_INIT(0), 0};
    size_t n;
    char **files = doc_list(&n);

    for (size_t i = 0; i < n; i++) {
        struct doc d;
        doc_load(&d, files[i]);
        scan_inline(&d, check_named_path, &pr);
        /* Anywhere at all, code blocks included. */
        for (size_t l = 0; l < d.n_lines; l++)
            if (strstr(d.lines[l], "../shared"))
                problem(&pr, "%s:%zu: names ../shared, which is not in the repository", d.rel,
                        l + 1);
        doc_release(&d);
    }
    doc_list_free(files, n);
    problems_check(&pr, "paths outside the repository");
}
END_TEST

/* ---- commands -------------------------------------------------------------------------------- */

/* Splits a shell-like command line into words ('...' and "..." quoting, backslash escapes). */
static size_t split_words(const char *s, char ***out)
{
    char **v = NULL;
    size_t cap = 0, n = 0;

    for (;;) {
        struct af_buf w = AF_BUF_INIT(0);
        bool any = false;
        while (*s == ' ' || *s == '\t')
            s++;
        if (!*s)
            break;
        while (*s && *s != ' ' && *s != '\t') {
            char q = *s;
            any = true;
            if (q == '\'' || q == '"') {
                const char *e = strchr(s + 1, q);
                ck_assert_msg(e != NULL, "unbalanced quote in '%s'", s);
                ck_assert_int_eq(af_buf_add(&w, s + 1, (size_t)(e - s - 1)), 0);
                s = e + 1;
            } else if (q == '\\' && s[1]) {
                ck_assert_int_eq(af_buf_add(&w, s + 1, 1), 0);
                s += 2;
            } else {
                ck_assert_int_eq(af_buf_add(&w, s, 1), 0);
                s++;
            }
        }
        AF_GROW(v, cap, n + 2);
        v[n++] = any && w.buf ? af_buf_detach(&w, NULL) : af_xstrdup("");
        af_buf_release(&w);
    }
    AF_GROW(v, cap, n + 1);
    v[n] = NULL;
    *out = v;
    return n;
}

static void free_words(char **v)
{
    for (size_t i = 0; v && v[i]; i++)
        af_free(v[i]);
    af_free(v);
}

/* Lines [*i, end) of a block joined while they end in '\'; advances *i past them. */
static char *joined_command(const struct doc *d, size_t *i, size_t end)
{
    struct af_buf b = AF_BUF_INIT(0);

    for (; *i < end; (*i)++) {
        const char *l = d->lines[*i];
        size_t len = strlen(l);
        bool more = len && l[len - 1] == '\\';
        ck_assert_int_eq(af_buf_add(&b, l, more ? len - 1 : len), 0);
        if (!more) {
            (*i)++;
            break;
        }
        ck_assert_int_eq(af_buf_puts(&b, " "), 0);
    }
    return b.buf ? af_buf_detach(&b, NULL) : af_xstrdup("");
}

static char *trim_right(char *s)
{
    size_t n = strlen(s);

    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

/* Runs one "$ accelfit ..." command and checks the output lines the doc shows. */
static void run_console_command(const struct doc *d, size_t cmd_line, const char *cmd,
                                const char *const *shown, const size_t *shown_at, size_t n_shown,
                                struct problems *pr)
{
    char **argv, *out = NULL, *err = NULL, **real;
    size_t n_real = 0, cap_real = 0, next = 0;
    struct af_buf all = AF_BUF_INIT(0);
    int status;

    split_words(cmd, &argv);
    ck_assert_msg(argv[0] && !strcmp(argv[0], "accelfit"), "%s:%zu: not an accelfit command",
                  d->rel, cmd_line);
    ck_assert_msg(chdir(AF_SOURCE_DIR) == 0, "cannot chdir to %s", AF_SOURCE_DIR);
    status = af_test_exec((const char *const *)argv, NULL, &out, &err);
    if (status >= 128)
        problem(pr, "%s:%zu: `%s` died with signal %d", d->rel, cmd_line, cmd, status - 128);
    ck_assert_int_eq(af_buf_puts(&all, out ? out : ""), 0);
    if (all.len && all.buf[all.len - 1] != '\n')
        ck_assert_int_eq(af_buf_puts(&all, "\n"), 0);
    ck_assert_int_eq(af_buf_puts(&all, err ? err : ""), 0);
    real = NULL;
    for (char *p = all.buf; p && *p;) {
        char *nl = strchr(p, '\n');
        AF_GROW(real, cap_real, n_real + 1);
        real[n_real++] = p;
        if (!nl)
            break;
        *nl = '\0';
        p = nl + 1;
    }
    for (size_t k = 0; k < n_shown; k++) {
        const char *want = shown[k];
        size_t lead = strspn(want, " \t");
        size_t j;
        if (!want[lead] || !strcmp(want + lead, "...") || ends_with(want, "..."))
            continue;
        for (j = next; j < n_real && !strstr(real[j], want); j++)
            ;
        if (j == n_real) {
            problem(pr, "%s:%zu: `%s` does not print, at this point of its output: '%s'"
                        " (exit status %d; output begins '%.200s')",
                    d->rel, shown_at[k] + 1, cmd, want, status, n_real ? real[0] : "");
            break;
        }
        next = j + 1;
    }
    af_free(real);
    af_buf_release(&all);
    af_free(out);
    af_free(err);
    free_words(argv);
}

/* Runs the commands of a console block that starts with "$ accelfit "; returns how many. */
static size_t check_console_block(const struct doc *d, const struct block *b,
                                  struct problems *pr)
{
    size_t i = b->first, ran = 0;

    if (strcmp(b->info, "console") || b->first >= b->end ||
        strncmp(d->lines[b->first], "$ accelfit ", 11))
        return 0;
    while (i < b->end) {
        size_t cmd_line = i + 1, n_shown = 0;
        const char *shown[512];
        size_t shown_at[512];
        char *cmd;
        ck_assert_msg(!strncmp(d->lines[i], "$ ", 2), "%s:%zu: expected a '$ ' command", d->rel,
                      i + 1);
        cmd = joined_command(d, &i, b->end);
        while (i < b->end && strncmp(d->lines[i], "$ ", 2)) {
            ck_assert_uint_lt(n_shown, AF_ARRAY_SIZE(shown));
            shown_at[n_shown] = i;
            shown[n_shown++] = trim_right(d->lines[i]);
            i++;
        }
        run_console_command(d, cmd_line, cmd + 2, shown, shown_at, n_shown, pr);
        af_free(cmd);
        ran++;
    }
    return ran;
}

START_TEST(test_console_examples_match_the_program)
{
    struct problems pr = {AF_BUF_INIT(0), 0};
    size_t n, ran = 0;
    char **files = doc_list(&n);

    for (size_t i = 0; i < n; i++) {
        struct doc d;
        doc_load(&d, files[i]);
        for (size_t k = 0; k < d.n_blocks; k++)
            ran += check_console_block(&d, &d.blocks[k], &pr);
        doc_release(&d);
    }
    doc_list_free(files, n);
    problems_check(&pr, "console examples differ from the program");
    ck_assert_msg(ran > 0, "no console example found");
}
END_TEST

/* ---- HTTP examples --------------------------------------------------------------------------- */

/* Compares what the doc shows with the real answer; `path` names the place for messages. */
static void json_shows(const json_t *want, const json_t *got, const char *path, const char *where,
                       struct problems *pr)
{
    char sub[1024];

    switch (json_typeof(want)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *v;
        if (!json_is_object(got)) {
            problem(pr, "%s: %s is not an object in the real answer", where, path);
            return;
        }
        json_object_foreach((json_t *)want, k, v) {
            json_t *g = json_object_get(got, k);
            snprintf(sub, sizeof(sub), "%s.%s", path, k);
            if (!g)
                problem(pr, "%s: the real answer has no %s", where, sub);
            else
                json_shows(v, g, sub, where, pr);
        }
        return;
    }
    case JSON_ARRAY: {
        size_t i;
        json_t *v;
        if (!json_is_array(got)) {
            problem(pr, "%s: %s is not an array in the real answer", where, path);
            return;
        }
        json_array_foreach((json_t *)want, i, v) {
            snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
            if (i >= json_array_size(got))
                problem(pr, "%s: the real answer has no %s", where, sub);
            else
                json_shows(v, json_array_get(got, i), sub, where, pr);
        }
        return;
    }
    case JSON_STRING: {
        const char *w = json_string_value(want);
        size_t wl = strlen(w);
        if (!strcmp(w, "..."))
            return;
        if (!json_is_string(got)) {
            problem(pr, "%s: %s is \"%s\" in the doc, not a string in the real answer", where, path,
                    w);
            return;
        }
        if (ends_with(w, "...") ? strncmp(json_string_value(got), w, wl - 3)
                                : strcmp(json_string_value(got), w))
            problem(pr, "%s: %s is \"%s\" in the doc, \"%s\" in the real answer", where, path, w,
                    json_string_value(got));
        return;
    }
    case JSON_INTEGER:
    case JSON_REAL:
        if (!json_is_number(got) || json_number_value(got) != json_number_value(want))
            problem(pr, "%s: %s is %g in the doc, %s%g in the real answer", where, path,
                    json_number_value(want), json_is_number(got) ? "" : "not a number: ",
                    json_is_number(got) ? json_number_value(got) : 0.0);
        return;
    case JSON_TRUE:
    case JSON_FALSE:
    case JSON_NULL:
        if (json_typeof(got) != json_typeof(want))
            problem(pr, "%s: %s is %s in the doc, not in the real answer", where, path,
                    json_is_null(want) ? "null" : json_is_true(want) ? "true" : "false");
        return;
    }
}

struct http_example {
    char method[16];
    char path[1024];
    char *body;          /* owned, NULL for none */
    size_t body_len;
    char grep[256];      /* "| grep X": a line of the answer must hold X (start with it: ^X) */
    bool hidden;         /* "-o FILE" or "> FILE": the doc does not show the answer */
};

/* curl options whose value is the next word (so that word is not the URL). */
static const char *const curl_valued[] = {
    "-H", "--header", "-o", "--output", "-w", "--write-out", "-u", "--user", "-A", "--user-agent",
    "-m", "--max-time", "--connect-timeout", "-E", "--cert", "--key", "--cacert", "-e",
    "--referer", "-b", "--cookie", "--retry", NULL};

static bool curl_takes_value(const char *opt)
{
    for (size_t i = 0; curl_valued[i]; i++)
        if (!strcmp(opt, curl_valued[i]))
            return true;
    return false;
}

/*
 * Parses a curl command line: -X/--request METHOD, -d/--data/--data-binary BODY or @FILE,
 * -o FILE or "> FILE" (the answer is not shown), "| grep X", a trailing "# comment".
 * Returns false when it does not go to the demo port.
 */
static bool parse_curl(const char *line, struct http_example *ex)
{
    char *cmd = af_xstrdup(line), *pipe_at = strstr(cmd, " | "), **w;
    const char *url = NULL;
    size_t n;

    memset(ex, 0, sizeof(*ex));
    if (pipe_at) {
        char **pw;
        *pipe_at = '\0';
        if (split_words(pipe_at + 3, &pw) >= 2 && !strcmp(pw[0], "grep"))
            for (size_t i = 1; pw[i] && !ex->grep[0]; i++)
                if (pw[i][0] != '-')
                    snprintf(ex->grep, sizeof(ex->grep), "%s", pw[i]);
        free_words(pw);
    }
    n = split_words(cmd, &w);
    for (size_t i = 1; i < n; i++) {
        const char *a = w[i];
        if (a[0] == '#')
            break;
        if (a[0] == '>') {
            ex->hidden = true;
            break;
        }
        if (!strncmp(a, "-X", 2) || !strcmp(a, "--request")) {
            const char *m = a[1] == 'X' && a[2] ? a + 2 : (i + 1 < n ? w[++i] : "");
            snprintf(ex->method, sizeof(ex->method), "%s", m);
        } else if (!strcmp(a, "-d") || !strcmp(a, "--data") || !strcmp(a, "--data-binary")) {
            const char *v = i + 1 < n ? w[++i] : "";
            af_free(ex->body);
            if (v[0] == '@') {
                ex->body = af_test_read(v + 1, &ex->body_len);
            } else {
                ex->body = af_xstrdup(v);
                ex->body_len = strlen(v);
            }
        } else if (curl_takes_value(a)) {
            ex->hidden |= !strcmp(a, "-o") || !strcmp(a, "--output");
            i++;
        } else if (a[0] != '-') {
            url = a;
        }
    }
    if (url) {
        const char *p = url;
        if (!strncmp(p, "http://", 7))
            p += 7;
        if (!strncmp(p, "127.0.0.1:8888", 14) || !strncmp(p, "localhost:8888", 14)) {
            p += 14;
            snprintf(ex->path, sizeof(ex->path), "%s%s", *p == '/' ? "" : "/", p);
        } else {
            url = NULL;
        }
    }
    if (!ex->method[0] && ex->body)
        snprintf(ex->method, sizeof(ex->method), "POST");
    free_words(w);
    af_free(cmd);
    if (!url) {
        af_free(ex->body);
        ex->body = NULL;
    }
    return url != NULL;
}

/* The next fenced block after block k, when it is ```json or ```text and no heading comes between. */
static const struct block *answer_after(const struct doc *d, size_t k)
{
    const struct block *b = &d->blocks[k], *next;

    if (k + 1 >= d->n_blocks)
        return NULL;
    next = &d->blocks[k + 1];
    if (strcmp(next->info, "json") && strcmp(next->info, "text"))
        return NULL;
    for (size_t h = 0; h < d->n_headings; h++)
        if (d->headings[h].line > b->end && d->headings[h].line < next->fence)
            return NULL;
    return next;
}

/* True when `line` (up to its end or a newline) matches grep pattern `pat`: a fixed string, or
 * with a leading '^' a fixed string the line starts with. */
static bool grep_line(const char *line, const char *pat)
{
    size_t len = strcspn(line, "\n");

    if (pat[0] == '^')
        return !strncmp(line, pat + 1, strlen(pat + 1)) && strlen(pat + 1) <= len;
    for (size_t i = 0; i + strlen(pat) <= len; i++)
        if (!strncmp(line + i, pat, strlen(pat)))
            return true;
    return false;
}

/* True when some line of `text` matches `pat`. */
static bool grep_any(const char *text, const char *pat)
{
    for (const char *p = text; p;) {
        const char *nl = strchr(p, '\n');
        if (grep_line(p, pat))
            return true;
        p = nl ? nl + 1 : NULL;
    }
    return false;
}

/*
 * A ```text answer: each of its lines must be a line of the real answer (of the lines holding
 * the grep string, when the request is piped to grep), in order; "..." lines are skipped and a
 * line ending in "..." matches any line that starts with the part before it.
 */
static void text_shows(const struct doc *d, const struct block *tb, const char *answer,
                       const char *grep, struct problems *pr)
{
    char *copy = af_xstrdup(answer), **real = NULL, *p;
    size_t n_real = 0, cap = 0, next = 0;

    for (p = copy; *p;) {
        char *nl = strchr(p, '\n');
        if (nl)
            *nl = '\0';
        if (!grep[0] || grep_line(p, grep)) {
            AF_GROW(real, cap, n_real + 1);
            real[n_real++] = p;
        }
        if (!nl)
            break;
        p = nl + 1;
    }
    for (size_t l = tb->first; l < tb->end; l++) {
        char want[1024];
        size_t wl, j;
        bool prefix;
        snprintf(want, sizeof(want), "%s", d->lines[l]);
        trim_right(want);
        wl = strlen(want);
        if (!wl || !strcmp(want, "..."))
            continue;
        prefix = ends_with(want, "...");
        for (j = next; j < n_real; j++)
            if (prefix ? !strncmp(real[j], want, wl - 3) : !strcmp(real[j], want))
                break;
        if (j == n_real) {
            problem(pr, "%s:%zu: the real answer has no line '%s' at this point", d->rel, l + 1,
                    want);
            break;
        }
        next = j + 1;
    }
    af_free(real);
    af_free(copy);
}

/* ---- the servers the HTTP examples go to ----------------------------------------------------- */

#define SERVE_MARK "<!-- serve:"

/*
 * True when line `s` is a serve marker; `args` gets what it holds between "serve:" and
 * "-->" (trimmed), `closed` whether "-->" ends the line.
 */
static bool serve_marker(const char *s, char *args, size_t cap, bool *closed)
{
    const char *e;
    size_t n;

    s += strspn(s, " ");
    if (strncmp(s, SERVE_MARK, strlen(SERVE_MARK)))
        return false;
    s += strlen(SERVE_MARK);
    s += strspn(s, " \t");
    e = strstr(s, "-->");
    *closed = e && !e[3 + strspn(e + 3, " \t\r")];
    n = e ? (size_t)(e - s) : strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    snprintf(args, cap, "%.*s", (int)n, s);
    return true;
}

/* The ARGS of the serve marker right before block k (blank lines may come between), or "". */
static void block_serve_args(const struct doc *d, size_t k, char *args, size_t cap)
{
    size_t i = d->blocks[k].fence;
    bool closed;

    while (i > 0 && !d->in_code[i - 1] && !d->lines[i - 1][strspn(d->lines[i - 1], " \t\r")])
        i--;
    if (i == 0 || d->in_code[i - 1] || !serve_marker(d->lines[i - 1], args, cap, &closed))
        args[0] = '\0';
}

/* Every serve marker is one line, names arguments, and comes right before a ```sh block. */
static void check_serve_markers(const struct doc *d, struct problems *pr)
{
    for (size_t i = 0; i < d->n_lines; i++) {
        char args[512];
        bool closed, before_sh = false;
        size_t j;
        if (d->in_code[i] || !serve_marker(d->lines[i], args, sizeof(args), &closed))
            continue;
        if (!closed || !args[0]) {
            problem(pr, "%s:%zu: a serve marker is one line, '<!-- serve: ARGS -->'", d->rel,
                    i + 1);
            continue;
        }
        for (j = i + 1; j < d->n_lines && !d->in_code[j] &&
                        !d->lines[j][strspn(d->lines[j], " \t\r")];
             j++)
            ;
        for (size_t k = 0; k < d->n_blocks && !before_sh; k++)
            before_sh = d->blocks[k].fence == j &&
                        (!strcmp(d->blocks[k].info, "sh") || !strcmp(d->blocks[k].info, "bash") ||
                         !strcmp(d->blocks[k].info, "shell"));
        if (!before_sh)
            problem(pr, "%s:%zu: a serve marker must come right before a ```sh block", d->rel,
                    i + 1);
    }
}

#define MAX_SERVERS 8

/* One `accelfit serve --demo ARGS` per distinct ARGS ("" for the plain demo), started on use. */
struct servers {
    size_t n;
    char args[MAX_SERVERS][512];
    struct af_test_server srv[MAX_SERVERS];
};

static const struct af_test_server *server_for(struct servers *sv, const char *args,
                                               const char *where)
{
    const char *argv[64];
    char **w;
    size_t nw, k = 0;

    for (size_t i = 0; i < sv->n; i++)
        if (!strcmp(sv->args[i], args))
            return &sv->srv[i];
    ck_assert_msg(sv->n < MAX_SERVERS, "%s: more than %d different serve markers", where,
                  MAX_SERVERS);
    nw = split_words(args, &w);
    ck_assert_msg(nw + 2 < AF_ARRAY_SIZE(argv), "%s: too many serve arguments", where);
    argv[k++] = "--demo";
    for (size_t i = 0; i < nw; i++)
        argv[k++] = w[i];
    argv[k] = NULL;
    af_test_server_start(&sv->srv[sv->n], argv, false, NULL, NULL);
    free_words(w);
    snprintf(sv->args[sv->n], sizeof(sv->args[0]), "%s", args);
    return &sv->srv[sv->n++];
}

static void servers_stop(struct servers *sv)
{
    for (size_t i = 0; i < sv->n; i++)
        af_test_server_stop(&sv->srv[i]);
    sv->n = 0;
}

/*
 * The commands of a one-line loop "for NAME in WORD...; do COMMAND; done": COMMAND once per
 * WORD, with $NAME and ${NAME} replaced by it. Returns how many (0: not such a loop); the
 * caller frees them with free_words.
 */
static size_t expand_for(const char *s, char ***out)
{
    char name[64], **words = NULL, **v = NULL;
    const char *in, *semi, *body, *end;
    size_t n = 0, nw, cap = 0;

    *out = NULL;
    if (strncmp(s, "for ", 4) || !(in = strstr(s, " in ")) || !(semi = strstr(in, "; do ")) ||
        !(end = strstr(semi, "; done")) || end[6 + strspn(end + 6, " \t")] ||
        (size_t)(in - (s + 4)) >= sizeof(name))
        return 0;
    snprintf(name, sizeof(name), "%.*s", (int)(in - (s + 4)), s + 4);
    body = semi + 5;
    {
        char *list = af_xasprintf("%.*s", (int)(semi - (in + 4)), in + 4);
        nw = split_words(list, &words);
        af_free(list);
    }
    for (size_t w = 0; w < nw; w++) {
        struct af_buf cmd = AF_BUF_INIT(0);
        char plain[80], braced[80];
        snprintf(plain, sizeof(plain), "$%s", name);
        snprintf(braced, sizeof(braced), "${%s}", name);
        for (const char *p = body; p < end;) {
            if (!strncmp(p, braced, strlen(braced))) {
                ck_assert_int_eq(af_buf_puts(&cmd, words[w]), 0);
                p += strlen(braced);
            } else if (!strncmp(p, plain, strlen(plain))) {
                ck_assert_int_eq(af_buf_puts(&cmd, words[w]), 0);
                p += strlen(plain);
            } else {
                ck_assert_int_eq(af_buf_add(&cmd, p, 1), 0);
                p++;
            }
        }
        AF_GROW(v, cap, n + 2);
        v[n++] = cmd.buf ? af_buf_detach(&cmd, NULL) : af_xstrdup("");
        v[n] = NULL;
    }
    free_words(words);
    *out = v;
    return n;
}

/* The answer the block after an sh block shows: its first request not sent with -o or >. */
struct shown {
    bool have;
    struct af_test_resp resp;
    char grep[256];
};

/* Sends one curl command of a block (nothing for other commands). */
static void run_curl(const struct doc *d, size_t at, const char *s, const char *args,
                     struct servers *sv, CURL *c, struct problems *pr, size_t *ran,
                     struct shown *first)
{
    const struct af_test_server *srv;
    struct http_example ex;
    struct af_test_resp r;
    char where[512];
    char *u;

    snprintf(where, sizeof(where), "%s:%zu", d->rel, at);
    if (strncmp(s, "curl ", 5) || !parse_curl(s, &ex))
        return;
    srv = server_for(sv, args, where);
    u = af_xasprintf("%s%s", srv->base, ex.path);
    memset(&r, 0, sizeof(r));
    af_test_http(c, ex.method[0] ? ex.method : NULL, u, ex.body, ex.body_len, NULL, &r);
    (*ran)++;
    if (r.curl_rc != CURLE_OK || r.status != 200)
        problem(pr, "%s: `%s` answers %ld (curl %d): %.300s", where, s, r.status, r.curl_rc,
                r.body ? r.body : "");
    else if (ex.grep[0] && !grep_any(r.body ? r.body : "", ex.grep))
        problem(pr, "%s: the answer to `%s` has no '%s'", where, s, ex.grep);
    if (first->have || ex.hidden) {
        af_test_resp_free(&r);
    } else {
        first->resp = r;
        first->have = true;
        snprintf(first->grep, sizeof(first->grep), "%s", ex.grep);
    }
    af_free(u);
    af_free(ex.body);
}

static void check_sh_block(const struct doc *d, size_t k, struct servers *sv, CURL *c,
                           struct problems *pr, size_t *ran)
{
    const struct block *b = &d->blocks[k], *ab;
    struct shown shown;   /* the answer the block after shows */
    const char *answer;
    char where[512], args[512];
    size_t i = b->first;

    if (strcmp(b->info, "sh") && strcmp(b->info, "bash") && strcmp(b->info, "shell"))
        return;
    block_serve_args(d, k, args, sizeof(args));
    memset(&shown, 0, sizeof(shown));
    while (i < b->end) {
        size_t at = i + 1;
        char *cmd = joined_command(d, &i, b->end), **loop;
        const char *s = cmd + strspn(cmd, " \t");
        size_t n = expand_for(s, &loop);
        for (size_t l = 0; l < n; l++)
            run_curl(d, at, loop[l], args, sv, c, pr, ran, &shown);
        if (!n)
            run_curl(d, at, s, args, sv, c, pr, ran, &shown);
        free_words(loop);
        af_free(cmd);
    }
    answer = shown.have && shown.resp.body ? shown.resp.body : "";
    ab = answer_after(d, k);
    if (ab && shown.have && !strcmp(ab->info, "text")) {
        text_shows(d, ab, answer, shown.grep, pr);
    } else if (ab && shown.have) {
        struct af_buf text = AF_BUF_INIT(0);
        json_error_t je;
        json_t *want, *got;
        for (size_t l = ab->first; l < ab->end; l++) {
            ck_assert_int_eq(af_buf_puts(&text, d->lines[l]), 0);
            ck_assert_int_eq(af_buf_puts(&text, "\n"), 0);
        }
        snprintf(where, sizeof(where), "%s:%zu", d->rel, ab->fence + 1);
        want = json_loads(text.buf ? text.buf : "", 0, &je);
        got = json_loads(answer, 0, NULL);
        if (!want)
            problem(pr, "%s: the JSON shown is not JSON: %s (line %d)", where, je.text,
                    je.line + (int)ab->first);
        else if (!got)
            problem(pr, "%s: the real answer is not JSON: %.200s", where, answer);
        else
            json_shows(want, got, "$", where, pr);
        json_decref(want);
        json_decref(got);
        af_buf_release(&text);
    }
    if (shown.have)
        af_test_resp_free(&shown.resp);
}

START_TEST(test_http_examples_match_the_demo)
{
    struct problems pr = {AF_BUF_INIT(0), 0};
    struct servers sv;
    size_t n, ran = 0;
    char **files = doc_list(&n);
    CURL *c;

    memset(&sv, 0, sizeof(sv));
    ck_assert_msg(chdir(AF_SOURCE_DIR) == 0, "cannot chdir to %s", AF_SOURCE_DIR);
    c = curl_easy_init();
    ck_assert_ptr_nonnull(c);
    for (size_t i = 0; i < n; i++) {
        struct doc d;
        doc_load(&d, files[i]);
        check_serve_markers(&d, &pr);
        for (size_t k = 0; k < d.n_blocks; k++)
            check_sh_block(&d, k, &sv, c, &pr, &ran);
        servers_stop(&sv);   /* each document begins with fresh servers */
        doc_release(&d);
    }
    curl_easy_cleanup(c);
    doc_list_free(files, n);
    problems_check(&pr, "HTTP examples differ from the demo");
    ck_assert_msg(ran > 0, "no HTTP example found");
}
END_TEST

/* ---- the checker itself ---------------------------------------------------------------------- */

static const struct {
    const char *heading;
    const char *slug;
} slugs[] = {
    {"## Quick start", "quick-start"},
    {"## Deciding before you deploy: `accelfit recommend`",
     "deciding-before-you-deploy-accelfit-recommend"},
    {"### POST /explain, GET /explain?pod=NS/NAME", "post-explain-get-explainpodnsname"},
    {"## 6. Large clusters: `percentageOfNodesToScore`",
     "6-large-clusters-percentageofnodestoscore"},
    {"### `memory`: how much memory a model needs", "memory-how-much-memory-a-model-needs"},
    {"## bench_http — filter and prioritize over HTTP",
     "bench_http--filter-and-prioritize-over-http"},
    {"# Title #", "title"},
};

START_TEST(test_heading_slugs_follow_github)
{
    char buf[512], slug[256];
    const char *h = atx_heading(slugs[_i].heading, buf, sizeof(buf));

    ck_assert_ptr_nonnull(h);
    slugify(h, slug, sizeof(slug));
    ck_assert_str_eq(slug, slugs[_i].slug);
}
END_TEST

static const struct {
    const char *line;
    bool demo;   /* goes to the demo port */
    const char *method, *path, *body, *grep;
    bool hidden;
} curls[] = {
    {"curl -s 127.0.0.1:8888/rollouts", true, "", "/rollouts", NULL, "", false},
    {"curl -s -XPOST '127.0.0.1:8888/rollouts/ack?name=llm-infer-to-inf2'", true, "POST",
     "/rollouts/ack?name=llm-infer-to-inf2", NULL, "", false},
    {"curl -s -X DELETE http://localhost:8888/x", true, "DELETE", "/x", NULL, "", false},
    {"curl -s --request PUT localhost:8888/x -d '{\"a\": 1}'", true, "PUT", "/x", "{\"a\": 1}",
     "", false},
    {"curl -s -o /dev/null -d '{}' 127.0.0.1:8888/mutate", true, "POST", "/mutate", "{}", "",
     true},
    {"curl -s -d '{}' 127.0.0.1:8888/mutate > /dev/null", true, "POST", "/mutate", "{}", "", true},
    {"curl -s -H 'Content-Type: application/json' 127.0.0.1:8888/metrics | grep -F accelfit_x",
     true, "", "/metrics", NULL, "accelfit_x", false},
    {"curl -s 127.0.0.1:8888/metrics | grep '^accelfit_rollout_'", true, "", "/metrics", NULL,
     "^accelfit_rollout_", false},
    {"curl -s 127.0.0.1:8888/healthz   # the process is up", true, "", "/healthz", NULL, "",
     false},
    {"curl -s -w '%{http_code}' 127.0.0.1:8888/readyz", true, "", "/readyz", NULL, "", false},
    {"curl -s https://example.com:8888/filter", false, "", "", NULL, "", false},
};

START_TEST(test_curl_lines_parse)
{
    struct http_example ex;
    bool demo = parse_curl(curls[_i].line, &ex);

    ck_assert_msg(demo == curls[_i].demo, "'%s'", curls[_i].line);
    if (demo) {
        ck_assert_str_eq(ex.method, curls[_i].method);
        ck_assert_str_eq(ex.path, curls[_i].path);
        ck_assert_str_eq(ex.grep, curls[_i].grep);
        ck_assert(ex.hidden == curls[_i].hidden);
        if (curls[_i].body)
            ck_assert_str_eq(ex.body, curls[_i].body);
        else
            ck_assert_ptr_null(ex.body);
    }
    af_free(ex.body);
}
END_TEST

START_TEST(test_one_line_for_loops_expand)
{
    char **v;

    ck_assert_uint_eq(expand_for("for i in 1 2 3; do curl -s 127.0.0.1:8888/x?n=$i; done", &v),
                      3);
    ck_assert_str_eq(v[0], "curl -s 127.0.0.1:8888/x?n=1");
    ck_assert_str_eq(v[2], "curl -s 127.0.0.1:8888/x?n=3");
    free_words(v);
    ck_assert_uint_eq(expand_for("for f in a b; do curl -d @${f}.json x; done  ", &v), 2);
    ck_assert_str_eq(v[1], "curl -d @b.json x");
    free_words(v);
    ck_assert_uint_eq(expand_for("for i in 1 2; do curl x; done; echo", &v), 0);
    ck_assert_uint_eq(expand_for("curl -s 127.0.0.1:8888/for in", &v), 0);
}
END_TEST

START_TEST(test_serve_markers_read_their_arguments)
{
    char args[512];
    bool closed;

    ck_assert(serve_marker("<!-- serve: --policy p.yaml -->", args, sizeof(args), &closed));
    ck_assert_str_eq(args, "--policy p.yaml");
    ck_assert(closed);
    ck_assert(serve_marker("<!-- serve:--policy p.yaml", args, sizeof(args), &closed));
    ck_assert(!closed);
    ck_assert(serve_marker("<!-- serve: a --> b", args, sizeof(args), &closed));
    ck_assert(!closed);
    ck_assert(!serve_marker("<!-- served -->", args, sizeof(args), &closed));
    ck_assert(!serve_marker("text <!-- serve: a -->", args, sizeof(args), &closed));
}
END_TEST

static Suite *af_docs_suite(void)
{
    Suite *s = suite_create("docs");
    TCase *tc = tcase_create("links");

    tcase_add_loop_test(tc, test_heading_slugs_follow_github, 0, (int)AF_ARRAY_SIZE(slugs));
    tcase_add_test(tc, test_doc_links_resolve_in_the_repository);
    tcase_add_test(tc, test_docs_name_only_files_in_the_repository);
    tcase_add_loop_test(tc, test_curl_lines_parse, 0, (int)AF_ARRAY_SIZE(curls));
    tcase_add_test(tc, test_serve_markers_read_their_arguments);
    tcase_add_test(tc, test_one_line_for_loops_expand);
    suite_add_tcase(s, tc);

    tc = tcase_create("examples");
    tcase_add_test(tc, test_console_examples_match_the_program);
    tcase_add_test(tc, test_http_examples_match_the_demo);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_docs_suite());
}
