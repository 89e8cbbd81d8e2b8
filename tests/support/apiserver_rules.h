/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What a kube-apiserver (v1.26) does with a mutating webhook's answer, written
 * apart from accelfit's codec so a test can hold the codec to it: decode
 * response.patch (standard padded base64), apply the JSONPatch to the object
 * exactly as received (RFC 6902, strictly: an add under a missing parent, a
 * remove or replace of something missing, a bad index all refuse the patch,
 * as tests/fixtures/admission/ recorded), then validate the pod. Validation
 * covers the fields a webhook rewrites, by the API server's rules:
 *
 *   - resource names are qualified names; an extended resource (a name with a
 *     domain outside kubernetes.io) is a whole number, and when requested has
 *     a limit equal to the request ("must be equal to ... limit");
 *   - every container has an image, without surrounding white space;
 *   - env names are C identifiers extended with '-' and '.' (IsEnvVarName);
 *   - tolerations: operator Exists or Equal, no value with Exists, a key
 *     (a qualified name) unless Exists, an effect among NoSchedule,
 *     PreferNoSchedule and NoExecute (or none), tolerationSeconds only with
 *     NoExecute;
 *   - annotation keys are qualified names, values strings, 256 KiB in all.
 */
#ifndef AF_TEST_APISERVER_RULES_H
#define AF_TEST_APISERVER_RULES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Standard base64 with padding. Returns a new NUL-terminated buffer, or NULL when invalid. */
char *af_test_base64_decode(const char *s, size_t *len);

/*
 * A patched deep copy of `doc` (new reference), or NULL with `why` filled when an
 * operation does not apply. Only add, remove and replace are accepted.
 */
json_t *af_test_jsonpatch_apply(json_t *doc, json_t *patch, char *why, size_t n);

/* True when `pod` passes the rules above; otherwise false with `why` naming the field. */
bool af_test_pod_valid(json_t *pod, char *why, size_t n);

#endif
