/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Private to the config module: a thin layer over libyaml's document API that
 * the catalog and policy loaders (and the policy's sections) share. Every helper that fails fills the
 * loader's struct af_error with the file name and the 1-based line and column
 * of the offending node, so every message can point at the text.
 *
 * Ownership: a struct af__ydoc owns its yaml_document_t; nodes are borrowed
 * from it and die with af__ydoc_release().
 */
#ifndef AF_CONFIG_YAMLNODE_H
#define AF_CONFIG_YAMLNODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <yaml.h>

#include "accelfit/util.h"

struct af__ydoc {
    yaml_document_t doc;
    bool loaded;
    const char *file;     /* borrowed: the name used in messages */
    struct af_error *err; /* borrowed, may be NULL */
};

/*
 * Aliases make YAML a compression format: nine levels of ten aliases ("billion
 * laughs") are 500 bytes that expand to 10^9 nodes, and 5,000 rules aliasing one
 * list of 100,000 items are 1.3 MB that a loader walks 5 * 10^8 times. A file
 * written by hand needs a few aliases, so every reader of a YAML document in this
 * module counts what aliases make it visit with one struct af__yalias: the aliases
 * followed (nested ones each time their parent is expanded) and the nodes visited
 * because of an alias, each capped, and the depth.
 */
#define AF__YAML_MAX_DEPTH 128
#define AF__YAML_MAX_ALIAS_EXPANSIONS 10000
#define AF__YAML_MAX_ALIAS_NODES 200000

struct af__yalias {
    const yaml_document_t *doc;
    /* For each node, the slot (a sequence item or a mapping pair's key or value) that
     * first led to it: its definition. Reaching it through another slot is an alias. */
    const void **home;
    size_t aliases;   /* aliases followed */
    size_t copies;    /* nodes visited because of an alias */
    const char *file; /* borrowed: the name used in messages */
    struct af_error *err;
};

void af__yalias_init(struct af__yalias *a, const yaml_document_t *doc, const char *file,
                     struct af_error *err);
void af__yalias_release(struct af__yalias *a);
/*
 * Accounts for visiting `n`, reached through `slot`. *copy is true on entry when an
 * ancestor was reached through an alias, and is set when `n` itself is. Returns 0, or
 * AF_ETOOBIG with the error at `n` once a cap is passed.
 */
int af__yalias_follow(struct af__yalias *a, const yaml_node_t *n, const void *slot,
                      bool *copy) AF_MUST_CHECK;
/* AF_ETOOBIG with the error at `n`: nested deeper than AF__YAML_MAX_DEPTH. */
int af__yalias_too_deep(struct af__yalias *a, const yaml_node_t *n);

/*
 * Parses the first document of `yaml`. Returns 0, or AF_EPARSE with the
 * parser's own message and position (also when the input holds no document), or
 * AF_ETOOBIG when its aliases expand past the caps above or it nests too deep: the
 * loaders that walk it then never do more than a bounded amount of work.
 */
int af__ydoc_load(struct af__ydoc *d, const char *file, const char *yaml, size_t len,
                  struct af_error *err) AF_MUST_CHECK;
void af__ydoc_release(struct af__ydoc *d);
/* Every document of a multi-document stream ("---" between them), in order: `cb` gets each
 * loaded one (root not NULL; released after it returns); a non-zero return stops and is
 * returned. Errors as af__ydoc_load's. */
int af__ydoc_each(const char *file, const char *yaml, size_t len, struct af_error *err,
                  int (*cb)(void *ud, struct af__ydoc *d), void *ud) AF_MUST_CHECK;

/* The root node, or NULL for an empty document. Borrowed. */
yaml_node_t *af__ydoc_root(struct af__ydoc *d);
/* Node by id, or NULL. Borrowed. */
yaml_node_t *af__ydoc_node(struct af__ydoc *d, int id);

/* Fills the error at `n`'s start and returns `code`. */
int af__ydoc_err(struct af__ydoc *d, const yaml_node_t *n, int code, const char *fmt, ...)
    AF_PRINTF(4, 5);

/* True for a plain scalar that spells null ("", "~", "null"). */
bool af__ynode_is_null(const yaml_node_t *n);
/* True for a quoted or block scalar (never a number, bool or null). */
bool af__ynode_is_quoted(const yaml_node_t *n);
/* Scalar text, or NULL when `n` is not a scalar. Borrowed. */
const char *af__ynode_str(const yaml_node_t *n);

/* Typed readers. Each returns 0 or AF_ETYPE/AF_EINVAL with the error filled;
 * `what` names the key in the message ("vcpus"). */
int af__ynode_string(struct af__ydoc *d, const yaml_node_t *n, const char *what,
                     const char **out) AF_MUST_CHECK;
/*
 * A number within [min, max]: every number a file gives has a bound, so no sum or
 * product of them later can overflow to inf. AF_ETYPE when it is not a number;
 * AF_ERANGE, with "out of range" and the range in the message, when it is one outside
 * [min, max], also when it is too large for a double (1e400), or so close to 0 that a
 * double cannot hold it (1e-400).
 */
int af__ynode_double(struct af__ydoc *d, const yaml_node_t *n, const char *what, double min,
                     double max, double *out) AF_MUST_CHECK;
/*
 * A number in one range, stated once whatever is wrong with it (below, above, 1e400): from
 * `lo` (excluded when lo_open) to `hi` (excluded when hi_open). `what` is the key's full
 * path. AF_ETYPE when it is not a number, AF_ERANGE outside the range.
 */
int af__ynode_range(struct af__ydoc *d, const yaml_node_t *n, const char *what, double lo,
                    bool lo_open, double hi, bool hi_open, double *out) AF_MUST_CHECK;
int af__ynode_int(struct af__ydoc *d, const yaml_node_t *n, const char *what, long min, long max,
                  int *out) AF_MUST_CHECK;
int af__ynode_bool(struct af__ydoc *d, const yaml_node_t *n, const char *what,
                   bool *out) AF_MUST_CHECK;
/* The same without a message: 0, or AF_ETYPE when `n` is not an unquoted true or false. */
int af__ynode_bool_quiet(const yaml_node_t *n, bool *out) AF_MUST_CHECK;
/* Checks the node kind and fails with "`what` must be a mapping/sequence". */
int af__ynode_expect(struct af__ydoc *d, const yaml_node_t *n, yaml_node_type_t type,
                     const char *what) AF_MUST_CHECK;

/* Checks that `n` is a mapping and that every key is in `known` (and none repeats):
 * af__ynode_expect and af__ymap_check_keys with `what` as the mapping's name. */
int af__ymap_expect(struct af__ydoc *d, const yaml_node_t *n, const char *what,
                    const char *const *known) AF_MUST_CHECK;

/* Number of items of sequence node `seq`. */
size_t af__yseq_len(const yaml_node_t *seq);

/*
 * A list of class names (accelfit/model.h) into a bitmask of 1u << enum af_class; with
 * `one_ok`, one class name alone is a list of one. `what` names the key, and `holder`
 * and `name` what holds it ("tenant", "team-a"), in messages. An empty list, an unknown
 * class and a class named twice are errors at their node, and so is a class in `other`:
 * the other side of a two-sided holder (a rollout's source, when its target is read),
 * on which a unit would count on both sides.
 */
int af__ynode_classes(struct af__ydoc *d, const yaml_node_t *v, const char *what,
                      const char *holder, const char *name, bool one_ok, uint32_t other,
                      uint32_t *out) AF_MUST_CHECK;

/* Finds the first key in any of `keys` that is not in `known` (NULL-terminated)
 * and fails with "unknown key 'x' in <where>"; pass a `hint` list to suggest. */
int af__ymap_check_keys(struct af__ydoc *d, const yaml_node_t *map, const char *where,
                        const char *const *known) AF_MUST_CHECK;
/* Value node of `key` in mapping `map`, or NULL. Borrowed. */
yaml_node_t *af__ymap_get(struct af__ydoc *d, const yaml_node_t *map, const char *key);
/* Fails with "duplicate key" at the second occurrence when a mapping repeats
 * a key, and with "mapping keys must be scalars" at the first key that is not
 * a scalar (whichever comes first). Linear in the number of keys. */
int af__ymap_check_dups(struct af__ydoc *d, const yaml_node_t *map) AF_MUST_CHECK;

/*
 * A set of C strings, each with a value (an index, say), so a loader can find
 * a repeated name in one pass instead of comparing every pair: open
 * addressing with linear probing, kept at most half full, grown by doubling.
 * The strings are borrowed and must outlive the set; they are compared with
 * strcmp. Allocation aborts on out-of-memory, so nothing here can fail.
 */
struct af__strset {
    const char **keys; /* `mask + 1` slots, NULL when empty */
    size_t *vals;
    size_t mask;
    size_t n;
};

/* Sizes the set for `expected` strings (it grows past that if needed). */
void af__strset_init(struct af__strset *s, size_t expected);
void af__strset_release(struct af__strset *s);
/* Adds `key` with `val` and returns true; when `key` is already in the set,
 * leaves the set alone, stores the value it was added with in *prev (may be
 * NULL) and returns false. Cannot fail. */
bool af__strset_add(struct af__strset *s, const char *key, size_t val, size_t *prev);
/* True, with the value `key` was added with in *val, when `key` is in the set. Cannot fail. */
bool af__strset_find(const struct af__strset *s, const char *key, size_t *val);

#endif
