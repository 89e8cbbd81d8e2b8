/* SPDX-License-Identifier: Apache-2.0 */
/*
 * model: the value types the selection core computes on.
 *
 * Everything here is transparent and immutable once built: hardware classes,
 * instance types, the catalog, resource vectors, workload profiles, and the
 * node and pod records the cluster cache keeps (only what decisions need,
 * never the whole Kubernetes object).
 */
#ifndef AF_MODEL_H
#define AF_MODEL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- hardware classes ----------------------------------------------------- */

#define AF_CLASS_MAP(XX)                                  \
    XX(NVIDIA_T4, "nvidia-t4", GPU, "T4")                 \
    XX(NVIDIA_A10G, "nvidia-a10g", GPU, "A10G")           \
    XX(NVIDIA_L4, "nvidia-l4", GPU, "L4")                 \
    XX(NVIDIA_L40S, "nvidia-l40s", GPU, "L40S")           \
    XX(NVIDIA_V100, "nvidia-v100", GPU, "V100")           \
    XX(NVIDIA_A100, "nvidia-a100", GPU, "A100")           \
    XX(NVIDIA_H100, "nvidia-h100", GPU, "H100")           \
    XX(NVIDIA_H200, "nvidia-h200", GPU, "H200")           \
    XX(NVIDIA_B200, "nvidia-b200", GPU, "B200")           \
    XX(TRAINIUM1, "trainium1", NEURON, "Trainium")        \
    XX(TRAINIUM2, "trainium2", NEURON, "Trainium2")       \
    XX(INFERENTIA1, "inferentia1", NEURON, "Inferentia")  \
    XX(INFERENTIA2, "inferentia2", NEURON, "Inferentia2") \
    XX(AMD_GPU, "amd-gpu", AMD, "")                       \
    XX(CPU, "cpu", NONE, "")

enum af_class {
    AF_CLASS_UNKNOWN = -1,
#define XX(id, name, kind, accel) AF_CLASS_##id,
    AF_CLASS_MAP(XX)
#undef XX
    AF_CLASS__COUNT
};

/* What a pod's requests can use: NVIDIA GPUs (whole, MIG slices or shared), AWS
 * Neuron devices, AMD GPUs (amd.com/gpu), or none of them. */
enum af_accel_kind { AF_ACCEL_NONE = 0, AF_ACCEL_GPU, AF_ACCEL_NEURON, AF_ACCEL_AMD };

const char *af_accel_kind_name(enum af_accel_kind k);   /* "NVIDIA GPU", ... Static. */

/* Canonical name ("nvidia-a100"); "unknown" for AF_CLASS_UNKNOWN. Cannot fail. */
const char *af_class_name(enum af_class c);
/* "nvidia-t4, nvidia-a10g, ..., cpu": every canonical name, for error messages. Static. */
const char *af_class_names_list(void);
/* "nvidia-a10g, nvidia-l4": the names of the classes in `mask` (bit 1u << class), in class
 * order, into `out` (`n` bytes, cut short when it does not fit; "" for none). */
void af_class_mask_names(uint32_t mask, char *out, size_t n);
/* Exact canonical name to class; AF_CLASS_UNKNOWN when not one. */
enum af_class af_class_parse(const char *s);
enum af_accel_kind af_class_kind(enum af_class c);
/*
 * Maps an accelerator name as clouds and device plugins spell it ("A100",
 * "a100", "NVIDIA-A100-SXM4-40GB", "Inferentia2", "inferentia", "trainium2",
 * "aws-trainium", "nvidia-l40s", "Tesla-T4") to a class. AF_CLASS_UNKNOWN when
 * nothing matches.
 */
enum af_class af_class_from_accel_name(const char *s);
/* NeuronCore generation a Neuron class runs (1 for inf1, 2 for inf2/trn1,
 * 3 for trn2); 0 for non-Neuron classes. */
int af_class_neuron_core_version(enum af_class c);
/* NeuronCores per Neuron device of a class (4 inf1, 2 inf2/trn1, 8 trn2); 0 otherwise. */
int af_class_neuron_cores_per_device(enum af_class c);
/*
 * Class of an EC2 instance type by its family ("g6e.2xlarge" -> nvidia-l40s,
 * "p5en.48xlarge" -> nvidia-h200, "inf1.xlarge" -> inferentia1, "c7i.large" -> cpu
 * for the CPU families accelfit knows). AF_CLASS_UNKNOWN for families it does not
 * know: a new type is never guessed to be CPU.
 */
enum af_class af_class_from_instance_family(const char *instance_type);

/* ---- instance catalog ------------------------------------------------------ */

/*
 * The highest hourly price accelfit takes, from the catalog, a node's
 * accelfit.io/hourly-price annotation or a tenant's budget: a million dollars an hour,
 * far above any instance, so that every sum of prices over any cluster and any span
 * of time it is asked about stays a finite number that prints.
 */
#define AF_PRICE_MAX_USD_HR 1e6

/* The CPU architecture of an instance type; UNKNOWN when its catalog entry does not say. */
enum af_arch { AF_ARCH_UNKNOWN = 0, AF_ARCH_AMD64, AF_ARCH_ARM64 };

/*
 * One instance type. `cls` is AF_CLASS_UNKNOWN only for a type whose catalog entry says
 * `class: unclassified`: an accelerator accelfit has no class for (Qualcomm AI100, B300,
 * RTX PRO) or a fraction of a GPU (g6f; accel_count 0). Such a type is priced but never
 * sized: no tier's class matches it.
 */
struct af_instance_type {
    char *name;          /* "p4d.24xlarge" */
    char *family;        /* "p4d" */
    enum af_class cls;
    enum af_arch arch;
    int vcpus;
    double memory_gib;
    enum af_accel_kind accel_kind;
    char *accel_maker;   /* NULL when no accelerator */
    char *accel_name;
    int accel_count;                     /* 0 for a fraction of a GPU */
    double accel_memory_gib_per_device;  /* 0 when the source gives none */
    int neuron_cores;
    double network_gbps;
    bool efa;
    double price_usd_hr;       /* on-demand; < 0 when unknown, else <= AF_PRICE_MAX_USD_HR */
    double spot_discount_pct;  /* < 0 when unknown */
};

/* Immutable after load. Types are sorted by name. */
struct af_catalog {
    struct af_instance_type *types;
    size_t n_types;
    char *source;              /* file name or "<embedded>" */
    /* The region its prices are of (`region:`, "us-east-1" when absent) and when they were
     * read (`prices_as_of:`, unix time; 0 when the catalog does not say). */
    char *price_region;
    double prices_as_of;
    /* The types of each class, in name order: indexes into types, class c's at
     * by_class[class_start[c + 1]] up to by_class[class_start[c + 2]] (slot 0 is
     * AF_CLASS_UNKNOWN's; af_catalog_index). A
     * filter or prioritize call sizes each tier of the pod's rule among its class's types
     * only; scanning the whole catalog (1,368 types) for every tier was most of the call.
     * NULL when not built (a catalog written as a literal): the types are all looked at. */
    uint32_t *by_class;
    uint32_t class_start[AF_CLASS__COUNT + 2];
};

/* Builds c->by_class (once; the loader calls it). */
void af_catalog_index(struct af_catalog *c);

/* Total accelerator memory of one instance (devices x memory per device). */
double af_instance_accel_memory_gib(const struct af_instance_type *t);
/* Binary search by name; NULL when absent. Borrowed. */
const struct af_instance_type *af_catalog_find(const struct af_catalog *c, const char *name);

/* ---- resources ------------------------------------------------------------- */

#define AF_RES_MAP(XX)                                  \
    XX(CPU, "cpu")                                      \
    XX(MEMORY, "memory")                                \
    XX(GPU, "nvidia.com/gpu")                           \
    XX(NEURON, "aws.amazon.com/neuron")                 \
    XX(NEURONDEVICE, "aws.amazon.com/neurondevice")     \
    XX(NEURONCORE, "aws.amazon.com/neuroncore")         \
    XX(GPU_SHARED, "nvidia.com/gpu.shared")             \
    XX(MIG, "nvidia.com/mig-*")                         \
    XX(AMD_GPU, "amd.com/gpu")                          \
    XX(PODS, "pods")

enum af_res {
#define XX(id, name) AF_RES_##id,
    AF_RES_MAP(XX)
#undef XX
    AF_RES__COUNT
};

/* cpu in millicores, memory in bytes, everything else in units. */
struct af_resources {
    int64_t v[AF_RES__COUNT];
};

const char *af_res_name(enum af_res r);
/* Resource name to index, -1 when not tracked. Every "nvidia.com/mig-<profile>"
 * maps to AF_RES_MIG (slices of all profiles, summed). */
int af_res_parse(const char *name);

/* A MIG profile, "1g.5gb": compute slices and memory in GB (10^9 bytes). */
struct af_mig_profile {
    uint16_t g;
    uint16_t gb;
};
/* Parses "nvidia.com/mig-1g.5gb" (or "1g.5gb", "MIG-1g.10gb", "...-MIG-3g.40gb" as a
 * product label ends); false when no profile is there. "+me" suffixes are accepted. */
bool af_mig_profile_parse(const char *s, struct af_mig_profile *out);
bool af_res_fits(const struct af_resources *req, const struct af_resources *alloc,
                 const struct af_resources *used, enum af_res *first_short);
/* Formats an amount of `r` exactly, as a Kubernetes quantity (what kubectl prints, and
 * what a manifest may say): cpu in whole cores or millicores ("4", "95710m"), memory with
 * the largest binary suffix that divides it ("16Gi", "1150Gi", "1536Mi"), else the
 * largest decimal one ("1500M"), else bytes; other resources as integers. Never rounded:
 * two different amounts never print alike. Every resource amount a person reads goes
 * through here. Cannot fail. */
void af_res_format(enum af_res r, int64_t v, char *out, size_t n);
/* The accelerator kind a request (or a node's allocatable) names, NONE for none. */
enum af_accel_kind af_res_accel_kind(const struct af_resources *req);
/* Devices of that kind in the vector: GPUs + shared GPUs + MIG slices, Neuron
 * devices (neuron, neurondevice), AMD GPUs. NeuronCores are not counted here
 * (af_costs_devices, accelfit/costs.h, counts a node's devices they hold). */
int64_t af_res_devices(const struct af_resources *r);

/* ---- workload profile ------------------------------------------------------- */

#define AF_WORKLOAD_MAP(XX)                  \
    XX(TRAINING, "training")                 \
    XX(INFERENCE, "inference")               \
    XX(BATCH_INFERENCE, "batch-inference")   \
    XX(PREPROCESSING, "preprocessing")       \
    XX(CLASSICAL_ML, "classical-ml")         \
    XX(DEVELOPMENT, "development")

enum af_workload {
    AF_WORKLOAD_UNKNOWN = -1,
#define XX(id, name) AF_WORKLOAD_##id,
    AF_WORKLOAD_MAP(XX)
#undef XX
    AF_WORKLOAD__COUNT
};

#define AF_OBJECTIVE_MAP(XX)       \
    XX(BALANCED, "balanced")       \
    XX(COST, "cost")               \
    XX(PERFORMANCE, "performance") \
    XX(LATENCY, "latency")

enum af_objective {
#define XX(id, name) AF_OBJECTIVE_##id,
    AF_OBJECTIVE_MAP(XX)
#undef XX
    AF_OBJECTIVE__COUNT
};

#define AF_FRAMEWORK_MAP(XX)     \
    XX(PYTORCH, "pytorch")       \
    XX(TENSORFLOW, "tensorflow") \
    XX(JAX, "jax")               \
    XX(OTHER, "other")

enum af_framework {
    AF_FRAMEWORK_UNKNOWN = -1,
#define XX(id, name) AF_FRAMEWORK_##id,
    AF_FRAMEWORK_MAP(XX)
#undef XX
    AF_FRAMEWORK__COUNT
};

#define AF_PRECISION_MAP(XX) \
    XX(FP32, "fp32", 4)      \
    XX(BF16, "bf16", 2)      \
    XX(FP16, "fp16", 2)      \
    XX(INT8, "int8", 1)      \
    XX(FP8, "fp8", 1)

enum af_precision {
    AF_PRECISION_DEFAULT = -1,
#define XX(id, name, bytes) AF_PRECISION_##id,
    AF_PRECISION_MAP(XX)
#undef XX
    AF_PRECISION__COUNT
};

/* Names for the enums above; parse returns the *_UNKNOWN/-1 value on failure. */
const char *af_workload_name(enum af_workload w);
int af_workload_parse(const char *s);
const char *af_objective_name(enum af_objective o);
int af_objective_parse(const char *s);
const char *af_framework_name(enum af_framework f);
int af_framework_parse(const char *s);
const char *af_precision_name(enum af_precision p);
int af_precision_parse(const char *s);
int af_precision_bytes(enum af_precision p);   /* 0 for DEFAULT */

struct af_profile {
    enum af_workload workload;
    double model_params;       /* 0 = unknown */
    enum af_objective objective;
    int latency_slo_ms;        /* 0 = none */
    enum af_framework framework;
    bool neuron_ready;
    enum af_precision precision;
    int devices;               /* devices a pod requests (whole GPUs or Neuron devices); 0 = none stated */
    /* Instances the job may span, the model split across them (accelfit.io/instances,
     * recommend --instances); 0 = the policy's memory.max_instances for the workload. */
    int instances;
};

/* A count as people write it: "70B", "1.5B", "350M", "12k", "1.2T", "950" (never an
 * exponent, at most three significant digits). Cannot fail. */
void af_format_count(double v, char *out, size_t n);

/* workload unknown, objective balanced, everything else unset. */
void af_profile_init(struct af_profile *p);

/* ---- cluster records ---------------------------------------------------------- */

enum af_kind { AF_KIND_NODE = 0, AF_KIND_POD = 1 };

/* Prepaid capacity a node runs on (af_node_info.prepaid). */
enum af_prepaid {
    AF_PREPAID_NONE = 0,
    AF_PREPAID_ODCR,           /* an On-Demand Capacity Reservation (reservation type default) */
    AF_PREPAID_BLOCK,          /* an EC2 Capacity Block for ML (reservation type capacity-block) */
    AF_PREPAID_RESERVED,       /* reserved, of a type no label or annotation names */
};
/* "odcr", "capacity-block", "reserved"; "" for none. Cannot fail. */
const char *af_prepaid_name(enum af_prepaid p);

/*
 * A node as decisions need it. Immutable after it is built; shared between
 * snapshots by reference count (af_node_info_ref/unref).
 */
#define AF_NODE_MIG_MAX 4

struct af_node_info {
    atomic_int refcnt;
    char *name;
    char *instance_type;       /* may be NULL */
    char *family;              /* "g5", from the instance type or instance-family label; may be NULL */
    enum af_class cls;
    enum af_accel_kind kind;   /* from the class, else from allocatable: known even when cls is not */
    const char *class_source;  /* static string: the label or resource that decided */
    /* Memory of one accelerator device (one MIG slice on a single-strategy MIG
     * node), in GiB: exact when lo == hi, a range when only the class is known,
     * 0/0 when unknown. */
    double dev_mem_gib_lo, dev_mem_gib_hi;
    const char *dev_mem_source;   /* static: "catalog", "label nvidia.com/gpu.memory", ... */
    bool gpu_shared;           /* time-sliced or MPS GPUs (replicas > 1 or gpu.shared) */
    /* MIG profiles the node advertises (mixed strategy), with their allocatable count. */
    struct af_mig_profile mig[AF_NODE_MIG_MAX];
    int64_t mig_count[AF_NODE_MIG_MAX];
    int n_mig;
    bool price_annotation_bad; /* accelfit.io/hourly-price was set but is not a price */
    bool spot;
    bool capacity_known;       /* a capacity-type label says spot or on-demand */
    bool unschedulable;
    /* Where the node runs: topology.kubernetes.io/{region,zone} (or their beta
     * failure-domain labels); NULL when unlabelled. */
    char *region;
    char *zone;
    double annotated_usd;      /* accelfit.io/hourly-price when it is a price, else -1 */
    /* The price (af_node_price): its source, and the unix time it was read (the
     * catalog's prices_as_of for list prices; 0 when not known). */
    bool price_known;
    double hourly_usd;
    const char *price_source;  /* static: one of the AF_PRICE_SOURCE_* names (decide.h) */
    double price_as_of;
    /* A list price of another region stands in: the node runs in `region`, the price is
     * the catalog's (af_catalog.price_region) because no price of its own region is known. */
    bool price_other_region;
    struct af_resources allocatable;
    /* The node group: eks.amazonaws.com/nodegroup, karpenter.sh/nodepool or
     * alpha.eksctl.io/nodegroup-name (the first present); NULL when none. */
    char *node_group;
    /* Every label, packed "key\0value\0...\0\0" (NULL: none; af_node_label): what a
     * pod's nodeSelector and required node affinity (accelfit/placement.h) and Karpenter
     * NodeOverlay requirements (when prices are applied again) are matched against. */
    char *labels;
    /* Prepaid capacity (docs/pricing.md#prepaid-capacity): a Capacity Reservation (ODCR)
     * or a Capacity Block, from Karpenter's or EKS's labels or accelfit's annotations. */
    enum af_prepaid prepaid;
    const char *prepaid_source;      /* static: the label or annotation that said so */
    char *reservation_id;            /* "cr-0123..."; NULL when not known */
    /* When the reservation ends (unix time; 0: not known or open-ended), and who said so:
     * AWS (DescribeCapacityReservations) or the accelfit.io/capacity-reservation-end
     * annotation, which classification keeps in annotated_end. */
    double reservation_end;
    const char *reservation_end_source;   /* static: "aws", "annotation"; NULL */
    double annotated_end;
    /* What the node costs by the hour whether a pod runs there or not: its price before the
     * prepaid step (for a prepaid node, the amortized rate of the reservation), and where
     * that came from (an AF_PRICE_SOURCE_* name). Reports use it; decisions use hourly_usd. */
    bool rate_known;
    double rate_usd_hr;
    const char *rate_source;
    /* The NodeOverlay or policy discount that set or adjusted the price, and the price
     * before it; NULL and 0 when none did. */
    char *price_by;
    double price_before_usd;
    const char *base_source;         /* static: the source before overlays, discounts, prepaid */
    /* DRA (accelfit/dra.h): the accelerator devices its ResourceSlices publish, by resource,
     * and the part of `allocatable` they are (zero when the device plugin already advertises
     * that kind: dra_both says so, and they are not counted twice); the driver that
     * publishes them (owned; NULL when none). */
    struct af_resources dra_devices;
    struct af_resources dra_added;
    bool dra_both;
    char *dra_driver;
};

/* The pod's declared intent, as annotation strings (NULL when absent). */
struct af_pod_annotations {
    char *workload;
    char *model_params;
    char *objective;
    char *latency_slo_ms;
    char *framework;
    char *neuron_ready;
    char *precision;
    char *neuron_core_version;   /* "2": the NeuronCore generation the artifact was compiled for */
    char *instances;             /* "4": instances (pods) one job spans; the model is split across them */
};

/* The annotations one at a time, in the order above (i < AF_POD_ANNOTATIONS_N): for code that
 * treats them alike (the cache's briefs, the plan memo). */
#define AF_POD_ANNOTATIONS_N 9
char **af_pod_annotation_at(struct af_pod_annotations *a, size_t i);
const char *af_pod_annotation(const struct af_pod_annotations *a, size_t i);

/* A pod as decisions need it. Immutable after it is built; shared by refcount. */
struct af_placement;

/* One entry of a pod's spec.resourceClaims (Dynamic Resource Allocation, accelfit/dra.h):
 * the pod's name for it, the ResourceClaim it names or the template it is made from, and
 * the claim made from that template (status.resourceClaimStatuses); NULL when not said. */
struct af_pod_claim_ref {
    char *name;
    char *claim;
    char *tmpl;
    char *generated;
};

/* An extended resource a pod's containers request that accelfit does not know by name
 * (example.com/gpu, deviceclass.resource.kubernetes.io/gpu.nvidia.com): a DeviceClass whose
 * extendedResourceName it is (or the class it names) serves it with DRA devices, Kubernetes
 * 1.34+ (accelfit/dra.h). */
struct af_pod_ext_req {
    char *name;
    int64_t count;
};

#define AF_POD_EXT_MAX 4

struct af_pod_info {
    atomic_int refcnt;
    char *ns;
    char *name;
    char *uid;
    char *node_name;           /* NULL when unbound */
    char *tenant;              /* accelfit.io/tenant label, else NULL */
    char *owner_kind;          /* first controller ownerReference, may be NULL */
    char *owner_name;
    char *generate_name;       /* metadata.generateName, may be NULL; a pod at admission may
                                * have only that (its name is then "") */
    bool terminal;             /* phase Succeeded or Failed */
    /* The resourceVersion of the watch event it came from, when numeric (0: unknown, as
     * for a listed pod); orders the events of the two pod watches (accelfit/cache.h). */
    uint64_t rv;
    bool system;               /* DaemonSet pod or mirror (static) pod: does not make a node busy */
    /* Rollouts (accelfit/rollout.h) steer only pods labelled accelfit.io/managed: "true";
     * for those the cache keeps what selectors and the brake read. */
    bool managed;
    char *labels;              /* managed pods: "key\0value\0...\0\0", else NULL */
    char *job_name;            /* controller Job, or label scheduling.x-k8s.io/pod-group */
    char *rollout_side;        /* annotation accelfit.io/rollout-side, NULL when absent */
    char *rollout_claim;       /* annotation accelfit.io/rollout-claim (the ledger entry of
                                * its unit's side), NULL when absent */
    bool ready;                /* condition Ready is True */
    bool failed;               /* phase Failed */
    int restarts;              /* restarts summed over container statuses */
    double started_unix;       /* status.startTime, 0 when unknown */
    struct af_mig_profile mig; /* the MIG profile requested, when requests.v[AF_RES_MIG] > 0 */
    /* How long the pod is expected to run, in seconds (0: not known): its
     * accelfit.io/expected-duration annotation, else its spec.activeDeadlineSeconds (an
     * upper bound). A pod that cannot finish before a Capacity Block ends ranks below
     * nodes where it can (docs/pricing.md#capacity-blocks-end). */
    double expected_s;
    const char *expected_source;   /* static: the annotation or field that said so; NULL */
    bool expected_bad;             /* the annotation was set but is not a duration */
    struct af_pod_annotations ann;
    struct af_resources requests;  /* effective requests (docs/extender-protocol.md §3) */
    /* Managed pods: nodeName, nodeSelector and required node affinity (accelfit/placement.h),
     * NULL when it says none; owned. */
    struct af_placement *placement;
    /* DRA: spec.resourceClaims (at most AF_POD_CLAIMS_MAX kept; owned), and the part of
     * `requests` that is the devices its allocated claims hold (added by the cache,
     * accelfit/dra.h; zero when none). */
    struct af_pod_claim_ref *claims;
    int n_claims;
    struct af_resources dra;
    /* DRA extended resources: what the containers request by names accelfit does not track
     * (at most AF_POD_EXT_MAX; owned), and whether status.extendedResourceClaimStatus names
     * the claim kube-scheduler made for them (a claim ref then, named AF_POD_EXT_CLAIM_REF;
     * the requests of the names it maps that accelfit tracks are left to that claim). */
    struct af_pod_ext_req *ext;
    int n_ext;
    bool ext_claim;
};

#define AF_POD_EXT_CLAIM_REF "(extended resources)"

#define AF_POD_CLAIMS_MAX 8

struct af_node_info *af_node_info_new(void);           /* refcnt 1, zeroed, cls UNKNOWN */
/* A new record (refcnt 1) with every field and string of `n`: to change one that is shared. */
struct af_node_info *af_node_info_copy(const struct af_node_info *n);
struct af_node_info *af_node_info_ref(struct af_node_info *n);
void af_node_info_unref(struct af_node_info *n);       /* NULL is fine */
/* The value of a node's label (NULL when absent). */
const char *af_node_label(const struct af_node_info *n, const char *key);
/* The value of a label of a managed pod (NULL when absent or not kept). */
const char *af_pod_label(const struct af_pod_info *p, const char *key);
struct af_pod_info *af_pod_info_new(void);
/* A new record (refcnt 1) with every field, string and placement of `p`: to change one that is
 * shared (the DRA devices of its claims, af_cache_set_dra). Whoever adds an owned field to
 * af_pod_info copies it here and frees it in af_pod_info_unref; any field, owned or not,
 * also goes into af_pod_info_plain or af_pod_brief (a cached pod's brief must not lose it). */
struct af_pod_info *af_pod_info_copy(const struct af_pod_info *p);
struct af_pod_info *af_pod_info_ref(struct af_pod_info *p);
void af_pod_info_unref(struct af_pod_info *p);         /* NULL is fine */

/*
 * A pod the cache keeps (af_snapshot.pods): what accelfit reads of a pod it does not
 * schedule, and no more. Its namespace, node, tenant and owner, its phase, its intent
 * annotations and its effective requests (the nonzero ones only); what the cluster
 * repeats (namespace, node, tenant, owner kind and name, generateName, annotations) is
 * shared (accelfit/strtab.h), one copy for all pods naming it; its own name and uid are
 * in the same allocation. A plain pod costs about 170 bytes instead of the 700 of an
 * af_pod_info and its strings.
 *
 * A pod with more to say than that (labelled accelfit.io/managed, with DRA claims, an
 * expected duration or a MIG profile) keeps its whole record in
 * `full` as well, so af_pod_brief_info gives back the very record that was decoded.
 * Immutable after it is built; shared by refcount.
 */
struct af_pod_brief {
    atomic_int refcnt;
    uint16_t req_mask;         /* nonzero requests: bit (1u << enum af_res), in `req` in order */
    bool terminal : 1;         /* the af_pod_info fields of the same names */
    bool system : 1;
    bool managed : 1;
    bool has_uid : 1;          /* the tail holds a uid after the name */
    bool uid_bin : 1;          /* ... as the 16 bytes of a canonical UUID */
    bool name_split : 1;       /* the name is generate_name and the tail's suffix */
    const char *ns;            /* shared strings, as in af_pod_info (NULL when absent) */
    const char *node_name;
    const char *tenant;
    const char *owner_kind;
    const char *owner_name;
    const char *generate_name;
    /* The intent annotations (af_pod_annotations), shared like the strings: a blob of
     * two bytes, the mask of those present (bit i: the i-th member), then their values,
     * each NUL-terminated; NULL for none. */
    const char *ann;
    uint64_t rv;
    struct af_pod_info *full;  /* holds a ref; NULL for a plain pod */
    int64_t req[];             /* one value a bit of req_mask; then the name (or what follows
                                * generate_name in it) and the uid (af_pod_brief_name, _uid) */
};

/* Room for a brief's name or uid spelled out (af_pod_brief_name, af_pod_brief_uid). */
#define AF_POD_TEXT_MAX 256
/* A cached pod as an af_pod_info, with room for its name and uid (af_pod_brief_info). */
struct af_pod_kept {
    struct af_pod_info info;
    char name[AF_POD_TEXT_MAX];
    char uid[AF_POD_TEXT_MAX];
};

struct af_strtab;
/* True when `p` has nothing beyond what a brief keeps (above). */
bool af_pod_info_plain(const struct af_pod_info *p);
/*
 * The brief of `p` (refcnt 1; steals the reference to `p`, which it keeps in `full`
 * unless `p` is plain). Its shared strings come from `tab` (NULL: a new one each).
 * NULL for NULL. Cannot fail.
 */
struct af_pod_brief *af_pod_brief_new(struct af_pod_info *p, struct af_strtab *tab);
/* Its name and uid (NULL when it has none): in the brief, or spelled out into `buf`
 * (AF_POD_TEXT_MAX bytes); valid while both are. Cannot fail. */
const char *af_pod_brief_name(const struct af_pod_brief *b, char *buf);
const char *af_pod_brief_uid(const struct af_pod_brief *b, char *buf);
/* True when its name is `name` (NULL reads as ""). */
bool af_pod_brief_name_is(const struct af_pod_brief *b, const char *name);
struct af_pod_brief *af_pod_brief_ref(struct af_pod_brief *b);
void af_pod_brief_unref(struct af_pod_brief *b);     /* NULL is fine */
/* Its effective requests, whole. Cannot fail. */
void af_pod_brief_requests(const struct af_pod_brief *b, struct af_resources *out);
/*
 * The pod as an af_pod_info: `full` when it has one, else `tmp->info` filled from the
 * brief. Borrowed: valid while the brief and `tmp` are; never pass it to
 * af_pod_info_unref. NULL for NULL.
 */
const struct af_pod_info *af_pod_brief_info(const struct af_pod_brief *b,
                                            struct af_pod_kept *tmp);

/* A node with its current allocation, as one snapshot sees it. */
struct af_node_view {
    const struct af_node_info *info;
    struct af_resources used;  /* sum of effective requests of non-terminal pods on it */
    int npods;
    int nsystem;               /* of which DaemonSet and mirror pods */
};

#endif
