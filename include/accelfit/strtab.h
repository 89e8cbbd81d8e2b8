/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared strings: one copy of a string that many records name (a namespace, a node's
 * name, an owner), with a reference count, so 150,000 pods of a few hundred owners on a
 * few thousand nodes hold a few thousand strings, not a million.
 *
 * An af_rcstr is an ordinary NUL-terminated `const char *` to its readers. Each holder
 * owns one reference and gives it back with af_rcstr_unref, from any thread (the count
 * is atomic; no lock). A `struct af_strtab` finds the copy already made of a string;
 * it belongs to one thread (the cache's writer), keeps a reference to each string in
 * it, and drops the strings no one else holds any more as it grows (af_strtab_get).
 */
#ifndef AF_STRTAB_H
#define AF_STRTAB_H

#include <stddef.h>

/* A new shared string with the text of `s` (one reference); NULL for NULL. Cannot fail. */
const char *af_rcstr_new(const char *s);
/* A new shared blob of the `n` bytes at `s` (NULs included). Cannot fail. */
const char *af_rcstr_new_bytes(const char *s, size_t n);
/* Bytes of a shared string (its NUL included; n for af_strtab_get_bytes); 0 for NULL. */
size_t af_rcstr_len(const char *s);
/* Another reference to `s` (an af_rcstr; NULL is fine). Returns `s`. */
const char *af_rcstr_ref(const char *s);
/* Gives back a reference; the string is freed with the last one. NULL is fine. */
void af_rcstr_unref(const char *s);

struct af_strtab;

struct af_strtab *af_strtab_new(void);
/* Gives back the table's references: strings still held elsewhere live on. NULL is fine. */
void af_strtab_free(struct af_strtab *t);
/*
 * The shared copy of `s`: a new reference to the one in the table, or a new string put
 * there. NULL for NULL. Cannot fail. Writer thread only.
 */
const char *af_strtab_get(struct af_strtab *t, const char *s);
/* As af_strtab_get, for `n` bytes of any value (NULs included): a shared blob. */
const char *af_strtab_get_bytes(struct af_strtab *t, const char *s, size_t n);
/* Strings in the table (for tests and metrics). */
size_t af_strtab_count(const struct af_strtab *t);

#endif
