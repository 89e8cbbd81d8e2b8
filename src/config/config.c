/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The config bundle: one catalog and one policy, loaded together (from files
 * or from the copies compiled into the binary), cross-checked, and shared by
 * reference count, with the SHA-256 of the bytes each was parsed from (libcrypto).
 * The holder lets a reload swap the bundle while requests that started earlier
 * keep the one they took.
 */
#include <stdlib.h>
#include <string.h>

#include <openssl/sha.h>

#include "accelfit/config.h"
#include "config/rollout.h"
#include "config/yamlnode.h"
#include "accelfit/banned.h"

static atomic_uint_fast64_t next_serial;   /* af_config.serial: 1, 2, ... */

/* Every family a tier names must exist in the catalog with the tier's class;
 * otherwise the tier could never be sized and the typo would go unnoticed. The
 * catalog's families and the classes each holds are gathered once (a hash set of
 * family names), so the check is linear in the catalog plus the policy. */
static int check_families(const struct af_policy *p, const struct af_catalog *c,
                          struct af_error *err)
{
    struct af__strset fams;
    uint32_t *classes = af_xcalloc(c->n_types ? c->n_types : 1, sizeof(*classes));
    size_t n_fams = 0, k;
    int rc = 0;

    af__strset_init(&fams, c->n_types);
    for (size_t i = 0; i < c->n_types; i++) {
        const struct af_instance_type *t = &c->types[i];
        if (af__strset_add(&fams, t->family, n_fams, &k))
            k = n_fams++;
        if (t->cls > AF_CLASS_UNKNOWN && t->cls < AF_CLASS__COUNT)
            classes[k] |= 1u << t->cls;
    }
    for (size_t r = 0; r < p->n_rules && !rc; r++) {
        const struct af_rule *rule = &p->rules[r];
        for (size_t t = 0; t < rule->n_tiers && !rc; t++) {
            const struct af_tier_spec *ts = &rule->tiers[t];
            for (size_t f = 0; f < ts->n_families && !rc; f++) {
                if (af__strset_find(&fams, ts->families[f], &k) && (classes[k] & (1u << ts->cls)))
                    continue;
                rc = af_error_set(err, AF_EINVAL, p->source, rule->line, 0,
                                  "rule '%s': the catalog (%s) has no %s instance type "
                                  "of family '%s'",
                                  rule->name, c->source, af_class_name(ts->cls), ts->families[f]);
            }
        }
    }
    af__strset_release(&fams);
    af_free(classes);
    return rc;
}

int af_config_load_mem(struct af_config **out, const char *catalog_name, const char *catalog_yaml,
                       size_t catalog_len, const char *policy_name, const char *policy_yaml,
                       size_t policy_len, struct af_error *err)
{
    struct af_catalog *cat = NULL;
    struct af_policy *pol = NULL;
    struct af_config *c;
    int rc;

    *out = NULL;
    rc = af_catalog_load_mem(&cat, catalog_name, catalog_yaml, catalog_len, err);
    if (rc)
        goto fail_catalog;
    rc = af_policy_load_mem(&pol, policy_name, policy_yaml, policy_len, err);
    if (rc)
        goto fail_policy;
    rc = check_families(pol, cat, err);
    if (!rc)
        rc = af__rollouts_check_catalog(pol, cat, err);   /* variants fit a target instance */
    if (rc)
        goto fail_check;

    c = af_xcalloc(1, sizeof(*c));
    atomic_init(&c->refcnt, 1);
    c->catalog = cat;
    c->policy = pol;
    c->generation = 1;
    c->serial = atomic_fetch_add(&next_serial, 1) + 1;
    af_sha256_hex(policy_yaml, policy_len, c->policy_sha256);
    af_sha256_hex(catalog_yaml, catalog_len, c->catalog_sha256);
    *out = c;
    return 0;

fail_check:
    af_policy_free(pol);
fail_policy:
    af_catalog_free(cat);
fail_catalog:
    return rc;
}

/* The bytes of `path` (`what` is "catalog" or "policy", for the error). */
static int read_source(struct af_buf *b, const char *path, const char *what, struct af_error *err)
{
    int rc = af_buf_read_file(b, path);

    if (rc)
        return af_error_set(err, rc, path, 0, 0, "cannot read %s: %s", what, af_strerror(rc));
    return 0;
}

int af_config_load(struct af_config **out, const char *catalog_path, const char *policy_path,
                   struct af_error *err)
{
    /* The caps of af_catalog_load_file and af_policy_load_file. */
    struct af_buf cat = AF_BUF_INIT(64u << 20), pol = AF_BUF_INIT(16u << 20);
    int rc = 0;

    *out = NULL;
    if (catalog_path)
        rc = read_source(&cat, catalog_path, "catalog", err);
    if (!rc && policy_path)
        rc = read_source(&pol, policy_path, "policy", err);
    if (!rc)
        rc = af_config_load_mem(
            out, catalog_path ? catalog_path : "<embedded>",
            catalog_path ? (cat.buf ? cat.buf : "") : af_embedded_catalog_yaml,
            catalog_path ? cat.len : af_embedded_catalog_yaml_len,
            policy_path ? policy_path : "<embedded>",
            policy_path ? (pol.buf ? pol.buf : "") : af_embedded_policy_yaml,
            policy_path ? pol.len : af_embedded_policy_yaml_len, err);
    af_buf_release(&cat);
    af_buf_release(&pol);
    return rc;
}

void af_sha256_hex(const void *data, size_t len, char hex[65])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[SHA256_DIGEST_LENGTH];

    SHA256(data, len, md);
    for (size_t i = 0; i < sizeof(md); i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 15];
    }
    hex[64] = '\0';
}

struct af_config *af_config_ref(struct af_config *c)
{
    if (c)
        atomic_fetch_add_explicit(&c->refcnt, 1, memory_order_relaxed);
    return c;
}

void af_config_unref(struct af_config *c)
{
    if (!c || atomic_fetch_sub_explicit(&c->refcnt, 1, memory_order_acq_rel) != 1)
        return;
    af_catalog_free(c->catalog);
    af_policy_free(c->policy);
    af_free(c);
}

void af_config_holder_init(struct af_config_holder *h, struct af_config *c)
{
    pthread_mutex_init(&h->lock, NULL);
    h->current = c;
}

void af_config_holder_destroy(struct af_config_holder *h)
{
    af_config_unref(h->current);
    h->current = NULL;
    pthread_mutex_destroy(&h->lock);
}

struct af_config *af_config_holder_get(struct af_config_holder *h)
{
    struct af_config *c;

    pthread_mutex_lock(&h->lock);
    c = af_config_ref(h->current);
    pthread_mutex_unlock(&h->lock);
    return c;
}

void af_config_holder_set(struct af_config_holder *h, struct af_config *c)
{
    struct af_config *old;

    pthread_mutex_lock(&h->lock);
    old = h->current;
    h->current = c;
    pthread_mutex_unlock(&h->lock);
    /* Freed here only if no request still holds it. */
    af_config_unref(old);
}
