/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The prices: section's keys beyond the spot discount (docs/policy.md#prices): how prepaid
 * capacity is priced, how long before a Capacity Block ends it stops taking pods that
 * cannot finish, how whole prepaid nodes are kept, and the Savings Plans or negotiated
 * discounts on on-demand usage.
 */
#include <stdio.h>
#include <string.h>

#include "config/pricing.h"
#include "accelfit/banned.h"

static const char *const discount_keys[] = {"name", "percent", "families", "classes", NULL};

static int load_discount(struct af__ydoc *d, yaml_node_t *n, size_t i, struct af_discount *out)
{
    char what[64];
    yaml_node_t *v;
    const char *s;
    int rc;

    snprintf(what, sizeof(what), "prices.discounts[%zu]", i);
    rc = af__ymap_expect(d, n, what, discount_keys);
    if (rc)
        return rc;
    out->line = (int)n->start_mark.line + 1;
    v = af__ymap_get(d, n, "name");
    if (!v)
        return af__ydoc_err(d, n, AF_EINVAL, "'%s' has no 'name' (it is shown as the price's "
                            "source)", what);
    rc = af__ynode_string(d, v, "prices.discounts[].name", &s);
    if (rc)
        return rc;
    if (!*s || strlen(s) > 63)
        return af__ydoc_err(d, v, AF_EINVAL, "'%s.name' must be 1 to 63 characters", what);
    out->name = af_xstrdup(s);
    v = af__ymap_get(d, n, "percent");
    if (!v)
        return af__ydoc_err(d, n, AF_EINVAL, "discount '%s' has no 'percent'", out->name);
    rc = af__ynode_double(d, v, "prices.discounts[].percent", 0, 100, &out->pct);
    if (rc)
        return rc;
    if (out->pct >= 100)
        return af__ydoc_err(d, v, AF_EINVAL, "'prices.discounts[].percent' of '%s' must be in "
                            "[0, 100), not %g", out->name, out->pct);
    v = af__ymap_get(d, n, "families");
    if (v) {
        size_t k = 0, len;
        rc = af__ynode_expect(d, v, YAML_SEQUENCE_NODE, "prices.discounts[].families");
        if (rc)
            return rc;
        len = af__yseq_len(v);
        if (!len)
            return af__ydoc_err(d, v, AF_EINVAL, "'families' of discount '%s' must not be "
                                "empty (leave it out to cover every family)", out->name);
        out->families = af_xcalloc(len, sizeof(*out->families));
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
             it++, k++) {
            rc = af__ynode_string(d, af__ydoc_node(d, *it), "prices.discounts[].families", &s);
            if (rc)
                return rc;
            out->families[k] = af_xstrdup(s);
            out->n_families = k + 1;
        }
    }
    v = af__ymap_get(d, n, "classes");
    if (v) {
        rc = af__ynode_classes(d, v, "classes", "discount", out->name, false, 0, &out->classes);
        if (rc)
            return rc;
    }
    return 0;
}

int af__pricing_load(struct af__ydoc *d, yaml_node_t *prices, struct af_policy *p)
{
    yaml_node_t *v;
    int rc;

    v = af__ymap_get(d, prices, "prepaid");
    if (v) {
        const char *s = af__ynode_str(v);
        if (s && !strcmp(s, "marginal"))
            p->prepaid = AF_PREPAID_MARGINAL;
        else if (s && !strcmp(s, "amortized"))
            p->prepaid = AF_PREPAID_AMORTIZED;
        else
            return af__ydoc_err(d, v, AF_EINVAL, "'prices.prepaid' must be marginal or "
                                "amortized, not '%s' (marginal: a prepaid node costs a pod "
                                "nothing, so prepaid capacity fills first)", s ? s : "a collection");
    }
    v = af__ymap_get(d, prices, "capacity_block_end_margin");
    if (v) {
        const char *s = af__ynode_str(v);
        if (!s || af_parse_duration(s, 0, AF_DURATION_MAX_S, &p->block_end_margin_s))
            return af__ydoc_err(d, v, AF_EINVAL, "'prices.capacity_block_end_margin' must be a "
                                "duration such as 30m or 1h, not '%s'", s ? s : "a collection");
    }
    v = af__ymap_get(d, prices, "keep_prepaid_whole");
    if (v) {
        rc = af__ynode_double(d, v, "prices.keep_prepaid_whole", 0, 1, &p->keep_prepaid_whole);
        if (rc)
            return rc;
    }
    v = af__ymap_get(d, prices, "discounts");
    if (v) {
        size_t len, i = 0;
        rc = af__ynode_expect(d, v, YAML_SEQUENCE_NODE, "prices.discounts");
        if (rc)
            return rc;
        len = af__yseq_len(v);
        if (len > 256)
            return af__ydoc_err(d, v, AF_EINVAL, "'prices.discounts' has %zu entries; at most "
                                "256", len);
        p->discounts = af_xcalloc(len ? len : 1, sizeof(*p->discounts));
        for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
             it++, i++) {
            p->n_discounts = i + 1;
            rc = load_discount(d, af__ydoc_node(d, *it), i, &p->discounts[i]);
            if (rc)
                return rc;
            for (size_t k = 0; k < i; k++)
                if (!strcmp(p->discounts[k].name, p->discounts[i].name))
                    return af__ydoc_err(d, af__ydoc_node(d, *it), AF_EINVAL,
                                        "discount '%s' is named twice (line %d)",
                                        p->discounts[i].name, p->discounts[k].line);
        }
    }
    return 0;
}

void af__pricing_free(struct af_policy *p)
{
    for (size_t i = 0; i < p->n_discounts; i++) {
        struct af_discount *x = &p->discounts[i];
        for (size_t k = 0; k < x->n_families; k++)
            af_free(x->families[k]);
        af_free(x->families);
        af_free(x->name);
    }
    af_free(p->discounts);
}
