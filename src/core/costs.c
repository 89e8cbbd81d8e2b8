/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Spend and idle cost (accelfit/costs.h) from one view of the cluster: every
 * running pod's share of its node's price, summed by tenant, namespace and
 * class, and every accelerator node's unrequested devices priced at their share
 * of the node. One pass over the pods (each pod's node through a hash index built
 * once per computation; its namespace through a hash that also remembers the
 * namespace's owner, so the policy is searched once per namespace) and one over
 * the nodes (bench/bench_costs.c: about 20 ms at 150,000 pods). Pure: no I/O, no
 * locks, no clock.
 */
#include <stdlib.h>
#include <string.h>

#include "accelfit/costs.h"
#include "accelfit/decide.h"
#include "accelfit/tenant.h"
#include "accelfit/banned.h"

enum af_res af_costs_accel_resource(const struct af_node_info *node)
{
    static const enum af_res order[] = {AF_RES_GPU,          AF_RES_MIG,        AF_RES_GPU_SHARED,
                                        AF_RES_NEURON,       AF_RES_NEURONDEVICE,
                                        AF_RES_NEURONCORE,   AF_RES_AMD_GPU};

    for (size_t i = 0; i < AF_ARRAY_SIZE(order); i++)
        if (node->allocatable.v[order[i]] > 0)
            return order[i];
    return AF_RES_PODS;
}

static int64_t nonneg(int64_t v)
{
    return v > 0 ? v : 0;
}

int64_t af_costs_devices(const struct af_node_info *node, const struct af_resources *used,
                         int64_t *in_use)
{
    enum af_res r = af_costs_accel_resource(node);
    int64_t cpd = af_class_neuron_cores_per_device(node->cls), alloc, u;
    int64_t whole = nonneg(used->v[AF_RES_NEURON]) + nonneg(used->v[AF_RES_NEURONDEVICE]);
    int64_t cores = nonneg(used->v[AF_RES_NEURONCORE]);

    if (cpd <= 0)
        cpd = 1;   /* a Neuron class not in the table: a core is taken for a device */
    if (r == AF_RES_PODS) {
        *in_use = 0;
        return 0;
    }
    alloc = node->allocatable.v[r];
    if (r == AF_RES_NEURON || r == AF_RES_NEURONDEVICE)
        u = whole + (cores + cpd - 1) / cpd;
    else if (r == AF_RES_NEURONCORE)
        u = cores + whole * cpd;
    else
        u = nonneg(used->v[r]);
    *in_use = u < alloc ? u : alloc;
    return alloc;
}

static int class_slot(const struct af_node_info *n)
{
    return n->cls > AF_CLASS_UNKNOWN && n->cls < AF_CLASS__COUNT ? (int)n->cls : AF_CLASS__COUNT;
}

/* ---- namespaces: open addressing on the name, then sorted --------------------------------- */

struct ns_table {
    struct af_cost_ns *slots;
    size_t mask;
    size_t n;
};

static uint64_t hash_str(const char *s)
{
    return af_fnv64(AF_FNV64_INIT, s, strlen(s));
}

static void ns_grow(struct ns_table *t);

/* ---- nodes by name: an index built once per computation ------------------------------------- */

static void node_index_build(struct af_index *x, const struct af_node_view *nodes, size_t n)
{
    af_index_init(x, n, NULL);
    for (size_t i = 0; i < n; i++)
        af_index_add(x, af_hash_str(AF_HASH_INIT, nodes[i].info->name), i);
}

static const struct af_node_view *find_node(const struct af_index *x,
                                            const struct af_node_view *nodes, const char *name)
{
    uint32_t h = af_hash_str(AF_HASH_INIT, name), i;
    size_t walk = af_index_start(x, h);

    while (af_index_next(x, h, &walk, &i))
        if (!strcmp(nodes[i].info->name, name))
            return &nodes[i];
    return NULL;
}

static struct af_cost_ns *ns_get(struct ns_table *t, const char *ns, int tenant, bool *added)
{
    size_t pos;

    if ((t->n + 1) * 2 > t->mask + 1)
        ns_grow(t);
    for (pos = hash_str(ns) & t->mask;; pos = (pos + 1) & t->mask) {
        struct af_cost_ns *e = &t->slots[pos];
        if (!e->ns) {
            e->ns = ns;
            e->tenant = tenant;
            t->n++;
            if (added)
                *added = true;
            return e;
        }
        if (!strcmp(e->ns, ns))
            return e;
    }
}

static void ns_grow(struct ns_table *t)
{
    struct ns_table old = *t;

    t->mask = old.slots ? old.mask * 2 + 1 : 63;
    t->slots = af_xcalloc(t->mask + 1, sizeof(*t->slots));
    t->n = 0;
    for (size_t i = 0; old.slots && i <= old.mask; i++)
        if (old.slots[i].ns)
            *ns_get(t, old.slots[i].ns, old.slots[i].tenant, NULL) = old.slots[i];
    af_free(old.slots);
}

static int cmp_ns(const void *a, const void *b)
{
    return strcmp(((const struct af_cost_ns *)a)->ns, ((const struct af_cost_ns *)b)->ns);
}

/* ---- node groups ---------------------------------------------------------------------------- */

static int cmp_group(const void *a, const void *b)
{
    const struct af_cost_group *x = a, *y = b;
    int c;

    if (!x->group || !y->group)
        c = (x->group == NULL) - (y->group == NULL);   /* nodes without a group last */
    else
        c = strcmp(x->group, y->group);
    return c ? c : x->cls - y->cls;
}

static void add_idle(struct af_costs *c, size_t *cap, const struct af_node_info *n, int64_t devices,
                     int64_t idle, double usd)
{
    struct af_cost_group *g = NULL;
    int cls = class_slot(n);

    /* groups are few: a linear search over them stays cheap */
    for (size_t i = 0; i < c->n_groups && !g; i++)
        if (c->groups[i].cls == cls &&
            (c->groups[i].group == n->node_group ||
             (c->groups[i].group && n->node_group && !strcmp(c->groups[i].group, n->node_group))))
            g = &c->groups[i];
    if (!g) {
        af_grow((void **)&c->groups, cap, c->n_groups + 1, sizeof(*c->groups));
        g = &c->groups[c->n_groups++];
        memset(g, 0, sizeof(*g));
        g->group = n->node_group;
        g->cls = cls;
    }
    g->nodes++;
    g->devices += devices;
    g->idle_devices += idle;
    g->idle_usd_hr += usd;
}

/* ---- prepaid capacity ------------------------------------------------------------------------ */

/* The largest fraction of any resource of `node` that `req` asks for, in [0, 1]: the share
 * rule of af_pod_share_usd, for a price other than the node's hourly_usd. */
static double share_of(const struct af_resources *req, const struct af_node_info *node)
{
    double share = 0;

    for (int r = 0; r < AF_RES__COUNT; r++) {
        double f;
        if (r == AF_RES_PODS || req->v[r] <= 0)
            continue;
        f = node->allocatable.v[r] > 0 ? (double)req->v[r] / (double)node->allocatable.v[r] : 1.0;
        if (f > share)
            share = f;
    }
    return share < 1 ? share : 1;
}

static bool is_prepaid(const struct af_node_info *n)
{
    return n->prepaid != AF_PREPAID_NONE;
}

/* What a node costs by the hour whether used or not: a prepaid node's rate when known (its
 * price may be 0 for decisions), else its price. */
static double node_rate(const struct af_node_info *n)
{
    return is_prepaid(n) && n->rate_known ? n->rate_usd_hr : n->hourly_usd;
}

static int cmp_prepaid(const void *a, const void *b)
{
    const struct af_cost_prepaid *x = a, *y = b;
    int c;

    if (!x->reservation || !y->reservation)
        c = (x->reservation == NULL) - (y->reservation == NULL);   /* unknown id last */
    else
        c = strcmp(x->reservation, y->reservation);
    return c ? c : strcmp(x->node, y->node);
}

static void add_prepaid(struct af_costs *c, size_t *cap, const struct af_node_view *v)
{
    const struct af_node_info *n = v->info;
    struct af_cost_prepaid *r;
    int64_t held, dev = af_costs_devices(n, &v->used, &held);

    if (dev <= 0) {   /* a node without accelerators: one device, held while a pod runs */
        dev = 1;
        held = v->npods - v->nsystem > 0;
    }
    af_grow((void **)&c->prepaid, cap, c->n_prepaid + 1, sizeof(*c->prepaid));
    r = &c->prepaid[c->n_prepaid++];
    memset(r, 0, sizeof(*r));
    r->node = n->name;
    r->reservation = n->reservation_id;
    r->type = n->prepaid;
    r->cls = class_slot(n);
    r->rate_known = n->rate_known;
    r->rate_usd_hr = n->rate_known ? n->rate_usd_hr : 0;
    r->devices = dev;
    r->idle_devices = dev - held;
    r->used_usd_hr = r->rate_usd_hr * (double)held / (double)dev;
    r->idle_usd_hr = r->rate_usd_hr * (double)(dev - held) / (double)dev;
    r->end = n->reservation_end;
    c->prepaid_usd_hr += r->rate_usd_hr;
    c->prepaid_used_usd_hr += r->used_usd_hr;
    c->prepaid_idle_usd_hr += r->idle_usd_hr;
    c->prepaid_devices += dev;
    c->prepaid_idle_devices += r->idle_devices;
}

/* ---- the computation -------------------------------------------------------------------------- */

struct af_costs *af_costs_compute(const struct af_policy *pol, const struct af_node_view *nodes,
                                  size_t n_nodes, struct af_pod_brief *const *pods, size_t n_pods)
{
    struct af_costs *c = af_xcalloc(1, sizeof(*c));
    struct ns_table t = {NULL, 0, 0};
    struct af_index nx;
    size_t groups_cap = 0, prepaid_cap = 0, k = 0;
    /* what the pods of each node pay, at its rate (its price but for prepaid nodes) */
    double *node_spend = af_xcalloc(n_nodes + 1, sizeof(*node_spend));

    atomic_init(&c->refcnt, 1);
    c->n_tenants = pol ? pol->n_tenants : 0;
    c->tenants = af_xcalloc(c->n_tenants + 1, sizeof(*c->tenants));

    node_index_build(&nx, nodes, n_nodes);
    for (size_t i = 0; i < n_pods; i++) {
        const struct af_pod_brief *p = pods[i];
        struct af_pod_kept tmp;
        struct af_resources req;
        const struct af_node_view *v;
        struct af_cost_ns *e;
        enum af_tenant_match how;
        bool added = false;
        double usd;
        int tenant, slot;

        if (!p->node_name || p->terminal)
            continue;
        v = find_node(&nx, nodes, p->node_name);
        if (!v)
            continue;
        if (!v->info->price_known) {
            c->pods_unpriced++;
            continue;
        }
        /* A namespace a tenant owns decides for all its pods: looked up once per namespace.
         * Pods of other namespaces go by their label (af_tenant_of). */
        e = ns_get(&t, p->ns ? p->ns : "", -1, &added);
        if (added) {
            tenant = af_tenant_of(pol, af_pod_brief_info(p, &tmp), &how);
            e->owned = how == AF_TENANT_BY_NAMESPACE;
            /* unowned: the default tenant (the last), for pods without a label */
            e->tenant = e->owned || tenant < 0 ? tenant : (int)pol->n_tenants - 1;
        }
        tenant = e->owned || !p->tenant ? e->tenant
                                         : af_tenant_of(pol, af_pod_brief_info(p, &tmp), NULL);
        af_pod_brief_requests(p, &req);
        usd = af_pod_share_usd(&req, v->info);
        slot = class_slot(v->info);
        c->pods_counted++;
        if (is_prepaid(v->info)) {
            /* spend is what decisions charge (0 under marginal pricing); the share of the
             * rate is counted apart, whatever the mode */
            double share = node_rate(v->info) * share_of(&req, v->info);
            node_spend[v - nodes] += share;
            if (tenant >= 0) {
                c->tenants[tenant].prepaid_usd_hr += share;
                c->tenants[tenant].prepaid_pods++;
            }
        } else {
            node_spend[v - nodes] += usd;
        }
        c->spend_usd_hr += usd;
        c->classes[slot].spend_usd_hr += usd;
        if (tenant >= 0) {
            c->tenants[tenant].spend_usd_hr += usd;
            c->tenants[tenant].pods++;
            c->tenants[tenant].by_class[slot] += usd;
        }
        e->spend_usd_hr += usd;
        e->pods++;
    }
    af_index_release(&nx);
    c->ns = af_xcalloc(t.n + 1, sizeof(*c->ns));
    for (size_t i = 0; t.slots && i <= t.mask; i++)
        if (t.slots[i].ns)
            c->ns[k++] = t.slots[i];
    c->n_ns = k;
    qsort(c->ns, c->n_ns, sizeof(*c->ns), cmp_ns);
    af_free(t.slots);

    for (size_t i = 0; i < n_nodes; i++) {
        const struct af_node_view *v = &nodes[i];
        const struct af_node_info *n = v->info;
        struct af_cost_class *cl = &c->classes[class_slot(n)];
        int64_t alloc, held, idle;
        double usd, rate;

        cl->nodes++;
        if (is_prepaid(n))
            add_prepaid(c, &prepaid_cap, v);
        if (!n->price_known) {
            c->unpriced_nodes++;
            continue;
        }
        rate = node_rate(n);
        cl->priced_nodes++;
        cl->price_usd_hr += rate;
        c->price_usd_hr += rate;
        alloc = af_costs_devices(n, &v->used, &held);
        if (alloc <= 0)
            continue;
        idle = alloc - held;
        usd = rate * (double)idle / (double)alloc;
        /* A pod's share is its largest fraction of any resource, so pods that take most of
         * a node's CPU while its accelerators sit idle would otherwise be charged the same
         * dollars the idle devices are: idle cost is at most what the pods leave unpaid,
         * and spend plus idle never exceeds the node's price. */
        if (usd > rate - node_spend[i])
            usd = rate - node_spend[i] > 0 ? rate - node_spend[i] : 0;
        cl->devices += alloc;
        cl->idle_devices += idle;
        cl->idle_usd_hr += usd;
        c->idle_usd_hr += usd;
        add_idle(c, &groups_cap, n, alloc, idle, usd);
    }
    af_free(node_spend);
    if (c->n_groups)
        qsort(c->groups, c->n_groups, sizeof(*c->groups), cmp_group);
    if (c->n_prepaid)
        qsort(c->prepaid, c->n_prepaid, sizeof(*c->prepaid), cmp_prepaid);
    return c;
}

struct af_costs *af_costs_ref(struct af_costs *c)
{
    if (c)
        atomic_fetch_add_explicit(&c->refcnt, 1, memory_order_relaxed);
    return c;
}

void af_costs_unref(struct af_costs *c)
{
    if (!c || atomic_fetch_sub_explicit(&c->refcnt, 1, memory_order_acq_rel) != 1)
        return;
    af_free(c->tenants);
    af_free(c->ns);
    af_free(c->groups);
    af_free(c->prepaid);
    af_free(c);
}
