/* SPDX-License-Identifier: Apache-2.0 */
/*
 * dra: accelerators allocated by Dynamic Resource Allocation (resource.k8s.io/v1,
 * Kubernetes 1.34+), as decisions need them (docs/decisions.md#8-accelerators-allocated-by-dra).
 *
 * On a DRA node the devices are not in node.status.allocatable: a driver publishes them in
 * ResourceSlices, and a pod asks for them through ResourceClaims (named, or made from a
 * ResourceClaimTemplate) whose requests name a DeviceClass. accelfit keeps compact, immutable,
 * reference-counted records of the four kinds (never the JSON), and an index built from a set of
 * them (`struct af_dra`) that says, per node, which accelerator devices it has and which of them
 * allocated claims hold, and, per pod, what its claims ask for.
 *
 * The devices become the resource vector the rest of accelfit computes on: a GPU of the
 * gpu.nvidia.com driver counts as nvidia.com/gpu, a MIG device as a MIG slice, a Neuron device
 * of neuron.aws.com as aws.amazon.com/neurondevice, an AMD GPU as amd.com/gpu. A node that
 * advertises the same kind through a device plugin (allocatable) and through DRA is counted once
 * (the device plugin's number) and reported (af_node_info.dra_both).
 *
 * CEL: accelfit reads the conjunctions (&&) of a selector term by term and evaluates only
 * `device.driver == '<s>'` and `device.attributes['<domain>'].<attr> == '<s>'` for the
 * attributes type, productName, profile, instanceType and resourceType (either quote style).
 * Every other term (||, !=, functions, numbers, capacity) is unknown and is taken as true:
 * unknown never narrows.
 *
 * Pure: no I/O, locks, clock or logging.
 */
#ifndef AF_DRA_H
#define AF_DRA_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "accelfit/model.h"
#include "accelfit/util.h"

/* Attributes of a device accelfit reads (the rest are not kept). */
enum af_dra_attr {
    AF_DRA_ATTR_TYPE = 0,       /* NVIDIA: "gpu", "mig" */
    AF_DRA_ATTR_PRODUCT,        /* NVIDIA: "NVIDIA A100-SXM4-40GB" */
    AF_DRA_ATTR_PROFILE,        /* NVIDIA MIG: "1g.5gb" */
    AF_DRA_ATTR_INSTANCE_TYPE,  /* Neuron: "trn2.48xlarge" */
    AF_DRA_ATTR_RESOURCE_TYPE,  /* Neuron: "neuron_device" */
    AF_DRA_ATTR__COUNT
};

/* One device of a slice: 32 bytes; its strings live in the slice's block. */
struct af_dra_device {
    uint32_t name;              /* offset in af_dra_slice.strings */
    uint32_t attr[AF_DRA_ATTR__COUNT];   /* offsets; 0 = absent (the block starts with "") */
    int8_t res;                 /* enum af_res it counts as; -1: not an accelerator */
    int8_t cls;                 /* enum af_class from productName / instanceType; -1 unknown */
    uint32_t mem_mib;           /* capacity memory in MiB (0: not said) */
};

/* A ResourceSlice. Immutable; shared by reference count. */
struct af_dra_slice {
    atomic_int refcnt;
    char *name;                 /* metadata.name */
    char *driver;
    char *pool;
    char *node;                 /* spec.nodeName; NULL when the pool is not one node's */
    int64_t generation;         /* spec.pool.generation: older generations are ignored */
    uint32_t n_devices;
    struct af_dra_device *devices;
    char *strings;              /* "\0name\0value\0...": device names and attribute values */
    size_t strings_len;
};

/* One CEL term accelfit evaluates: the device's `attr` (or its driver, attr < 0) == value. */
struct af_dra_term {
    int8_t attr;                /* enum af_dra_attr, or -1 for device.driver */
    char *domain;               /* the attribute's domain ("gpu.nvidia.com"); NULL for driver */
    char *value;
};

/* Selectors of a request or a device class: the terms accelfit reads; `unknown` counts the
 * ones it did not (taken as true). */
struct af_dra_selector {
    size_t n_terms;
    struct af_dra_term *terms;
    int unknown;
};

/* One way to satisfy a request: `count` devices of `device_class` matching `sel`. */
struct af_dra_choice {
    char *name;                 /* the subrequest's name, or the request's */
    char *device_class;
    int64_t count;              /* ExactCount */
    bool all;                   /* allocationMode All: every matching device of the node */
    struct af_dra_selector sel;
};

/* A request: exactly one choice, or firstAvailable: the first that fits, in order. */
struct af_dra_request {
    char *name;
    size_t n_choices;
    struct af_dra_choice *choices;
    bool first_available;
};

/* A device an allocated claim holds. */
struct af_dra_result {
    char *driver, *pool, *device;
    char *request;
};

/* A ResourceClaim or (status empty) a ResourceClaimTemplate's spec.spec. Immutable. */
struct af_dra_claim {
    atomic_int refcnt;
    char *ns, *name, *uid;
    size_t n_requests;
    struct af_dra_request *requests;
    bool allocated;
    size_t n_results;
    struct af_dra_result *results;
    char *alloc_node;           /* the node allocation.nodeSelector names, NULL when none */
    size_t n_reserved;          /* status.reservedFor entries */
    char **reserved_uids;       /* their uids, in order */
};

/* A DeviceClass. Immutable. */
struct af_dra_class {
    atomic_int refcnt;
    char *name;
    struct af_dra_selector sel;
    char *extended_resource;    /* spec.extendedResourceName, NULL when none */
};

struct af_dra_slice *af_dra_slice_new(void);        /* refcnt 1, zeroed */
struct af_dra_slice *af_dra_slice_ref(struct af_dra_slice *s);
void af_dra_slice_unref(struct af_dra_slice *s);    /* NULL is fine */
struct af_dra_claim *af_dra_claim_new(void);
struct af_dra_claim *af_dra_claim_ref(struct af_dra_claim *c);
void af_dra_claim_unref(struct af_dra_claim *c);    /* NULL is fine */
struct af_dra_class *af_dra_class_new(void);
struct af_dra_class *af_dra_class_ref(struct af_dra_class *c);
void af_dra_class_unref(struct af_dra_class *c);    /* NULL is fine */
/* Frees the terms of `s` (not `s`). */
void af_dra_selector_clear(struct af_dra_selector *s);

/*
 * Reads one CEL expression into `s` (appends terms; counts what it cannot read in
 * s->unknown). Cannot fail: an expression it does not understand adds no term.
 */
void af_dra_selector_parse(struct af_dra_selector *s, const char *expr);

/* A slice device's string (name or attribute value); "" when absent. Borrowed. */
const char *af_dra_device_str(const struct af_dra_slice *s, uint32_t off);
/* The resource a driver's device counts as (enum af_res), from its driver and `type`
 * attribute; -1 for a driver accelfit does not know (not an accelerator). */
int af_dra_device_res(const char *driver, const char *type, const char *resource_type);

/* ---- the index ------------------------------------------------------------------------ */

/* A node's DRA devices. */
struct af_dra_node {
    const char *name;           /* borrowed from a slice */
    struct af_resources devices;    /* accelerator devices by resource */
    struct af_resources allocated;  /* of which allocated claims hold */
    enum af_class cls;          /* from the devices' productName / instanceType */
    double dev_mem_gib;         /* memory of one device (the smallest said); 0 unknown */
    const char *driver;         /* the first accelerator driver; borrowed */
    struct af_mig_profile mig[AF_NODE_MIG_MAX];  /* MIG profiles (mig devices) */
    int64_t mig_count[AF_NODE_MIG_MAX];
    int n_mig;
    size_t first, n;            /* its devices: af_dra.devs[first .. first + n) */
};

/* One device in the index, with where it is and whether a claim holds it. */
struct af_dra_dev {
    const struct af_dra_slice *slice;
    const struct af_dra_device *d;
    bool allocated;
};

struct af_dra {
    atomic_int refcnt;
    /* the records (each holds a ref), sorted: slices by name, claims and templates by
     * namespace/name, classes by name */
    size_t n_slices, n_claims, n_templates, n_classes;
    struct af_dra_slice **slices;
    struct af_dra_claim **claims;
    struct af_dra_claim **templates;
    struct af_dra_class **classes;
    /* nodes with accelerator devices, sorted by name; devs grouped by node */
    size_t n_nodes;
    struct af_dra_node *nodes;
    struct af_index node_index;   /* the nodes by name (the FNV-1a of the name) */
    size_t n_devs;
    struct af_dra_dev *devs;
    /* per claim (parallel to claims): the node its allocated devices are on (borrowed from a
     * slice, else its allocation's nodeSelector); NULL when not allocated or not known */
    const char **claim_nodes;
    /* counted when built: devices of drivers accelfit does not know, slices of an older
     * pool generation, results that name no device it knows */
    size_t other_devices, stale_slices, unknown_results;
};

/*
 * Builds an index of the given records (takes a new reference to each; the arrays stay the
 * caller's). Cannot fail. The result has refcnt 1.
 */
struct af_dra *af_dra_build(struct af_dra_slice *const *slices, size_t n_slices,
                            struct af_dra_claim *const *claims, size_t n_claims,
                            struct af_dra_claim *const *templates, size_t n_templates,
                            struct af_dra_class *const *classes, size_t n_classes);
struct af_dra *af_dra_ref(struct af_dra *d);
void af_dra_unref(struct af_dra *d);               /* NULL is fine */
/* Approximate bytes the index and its records hold (for the benchmark and /metrics). */
size_t af_dra_bytes(const struct af_dra *d);

/* Lookups; NULL when absent. Borrowed, valid while `d` is held. */
const struct af_dra_node *af_dra_find_node(const struct af_dra *d, const char *node);
const struct af_dra_claim *af_dra_find_claim(const struct af_dra *d, const char *ns,
                                             const char *name);
const struct af_dra_claim *af_dra_find_template(const struct af_dra *d, const char *ns,
                                                const char *name);
const struct af_dra_class *af_dra_find_class(const struct af_dra *d, const char *name);

/* The implicit extended resource name of every DeviceClass: this prefix and its name. */
#define AF_DRA_CLASS_RESOURCE_PREFIX "deviceclass.resource.kubernetes.io/"

/*
 * The DeviceClass that serves extended resource `name` (Kubernetes 1.34+, DRAExtendedResource):
 * the class whose spec.extendedResourceName it is, else the class "deviceclass.resource.
 * kubernetes.io/<class>" names; NULL when none. Borrowed, valid while `d` is held.
 */
const struct af_dra_class *af_dra_ext_class(const struct af_dra *d, const char *name);

/*
 * The resource a device class's devices count as (enum af_res), from its selectors (the
 * driver and type it names) or, when it names none, its own name when that is a driver's
 * ("gpu.nvidia.com", "mig.nvidia.com", "neuron.aws.com"); -1 when not an accelerator class.
 * `cls` may be NULL (a class the cluster does not have: its name alone decides).
 */
int af_dra_class_res(const struct af_dra_class *cls, const char *name);

/*
 * The record of node `n` with its DRA devices per `d` (NULL: none): allocatable gets the
 * devices of each resource its device plugin does not advertise (dra_added), dra_both says
 * when it advertises one DRA also publishes, and a node whose class, device memory or MIG
 * profiles nothing else told gets them from the devices. A new record (refcnt 1), or NULL
 * when `n` already says all that. `n` may carry the DRA fields of an earlier index.
 */
struct af_node_info *af_dra_node_info(const struct af_dra *d, const struct af_node_info *n);

/* ---- a pod's claims ------------------------------------------------------------------- */

#define AF_DRA_POD_CLAIMS 8     /* claims of one pod accelfit reads */

/* What one of the pod's claims is and asks for. */
struct af_dra_pod_claim {
    const char *ref;            /* the pod's name for it (spec.resourceClaims[].name) */
    const struct af_dra_claim *claim;   /* the claim (named or generated), NULL when none yet */
    const struct af_dra_claim *tmpl;    /* the template it is made from, when not yet made */
    const char *claim_name;     /* the claim's name, or the template's */
    bool from_template;
    bool missing;               /* names a claim or template the cluster does not have */
    bool counted;               /* an allocated claim whose devices this pod's usage counts
                                 * (it is the first of reservedFor, or the only user) */
};

struct af_dra_demand {
    size_t n;
    struct af_dra_pod_claim claims[AF_DRA_POD_CLAIMS];
    size_t skipped;             /* claims beyond AF_DRA_POD_CLAIMS */
    /* Devices the pod still needs (unallocated claims, each request's first choice; a
     * firstAvailable request whose alternatives are of different resources is not in it,
     * and is counted in `mixed`: only af_dra_node_fits judges it, per node). */
    struct af_resources need;
    size_t mixed;
    /* Devices its allocated claims hold and this pod counts (see counted). */
    struct af_resources held;
    struct af_mig_profile mig;  /* a MIG profile a request's selector names */
    const char *alloc_node;     /* the node an allocated claim of it is on; NULL none */
    bool conflict;              /* its allocated claims are on different nodes */
    /* extended resources of a pending pod a DeviceClass serves (af_pod_info.ext), in `need` */
    size_t ext_served;
};

/*
 * The demand of `pod`'s claims (af_pod_info.claims) in `d` (NULL: no DRA: nothing), and of
 * the extended resources a DeviceClass serves (af_pod_info.ext, a pending pod's until
 * kube-scheduler has made its claim for them: af_dra_ext_class). Cannot fail: what is missing
 * is said in the claims' `missing`.
 */
void af_dra_pod_demand(const struct af_dra *d, const struct af_pod_info *pod,
                       struct af_dra_demand *out);

/*
 * Whether node `node` can hold the devices `dm` still needs: for each request of each
 * unallocated claim, in order, the first choice with enough free devices of its class that
 * match its selectors (a device taken by one request is not free for the next). `why`
 * (`n` bytes) says what did not fit, or, when it fits, what the pod would get. A pod
 * whose allocated claims are on another node does not fit. Cannot fail.
 */
bool af_dra_node_fits(const struct af_dra *d, const struct af_dra_demand *dm, const char *node,
                      char *why, size_t n);

#endif
