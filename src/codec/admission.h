/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the admission webhook's files share (not a public interface):
 *   admission.c  the AdmissionReview decoded (struct af_admission) and its response
 *   jsonpatch.c  JSON Pointer and the RFC 6902 apply, and the patch operations
 *   variant.c    the patch that rewrites a Pod for a rollout's variant, checked
 *   affinity.c   the patch that adds node preferences to a Pod, checked
 * variant.c and affinity.c call jsonpatch.c and admission.c; affinity.c also
 * calls variant.c (af__codec_utf8_ok). Private to src/codec: json_t never leaves
 * this directory.
 */
#ifndef AF_CODEC_ADMISSION_H
#define AF_CODEC_ADMISSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "accelfit/codec.h"

struct af_admission {
    json_t *root;              /* the whole request */
    json_t *object;            /* request.object, borrowed from root; NULL when unsupported */
    char *uid;
    char *generate_name;       /* metadata.generateName of a pod without a name, else NULL */
    char *ns;                  /* the pod's namespace */
    bool dry_run;
    struct af_pod_info *pod;   /* NULL when unsupported */
};

/* Absent or JSON null: what Go's encoder writes for an unset field. */
static inline bool af__codec_unset(json_t *v)
{
    return !v || json_is_null(v);
}

/* ---- admission.c ------------------------------------------------------------------------- */

/*
 * A Pod object to a record. af__codec_pod_from_json wants a name and takes "default" for a
 * missing namespace: a shallow copy of the object carries request.namespace and a
 * stand-in name (the object itself is not changed), and a pod without a name comes out
 * with the name "" (rollout_state's anonymous unit: one of its own, unless it has a Job
 * or pod group).
 */
int af__codec_admission_pod(json_t *obj, const char *ns, const char *where,
                            struct af_pod_info **out, struct af_error *err);

/* ---- jsonpatch.c ------------------------------------------------------------------------- */

/* "/spec/containers/0" and the like, plus escaped keys: a new string. */
char *af__codec_ptr_join(const char *base, const char *key);
/*
 * Applies one operation (add, replace or remove) to `doc` in place, with RFC 6902's
 * rules: the parent must exist; add on an object sets the member, on an array inserts
 * at an index <= size or appends at "-"; replace and remove need the target to exist.
 * Returns 0 or AF_EINVAL with `why` filled.
 */
int af__codec_patch_apply(json_t *doc, json_t *op, char *why, size_t whylen);
/* Appends the operation {op, path, value} to `ops`; steals `value` (may be NULL). */
void af__codec_patch_op(json_t *ops, const char *op, const char *path, json_t *value);
/* A json_dump_callback into the struct af_buf `data`: -1 when it is full. */
int af__codec_patch_dump(const char *buffer, size_t size, void *data);

/* ---- variant.c --------------------------------------------------------------------------- */

/* A string jansson can hold (valid UTF-8); a NULL `s` is fine. */
bool af__codec_utf8_ok(const char *s);

#endif
