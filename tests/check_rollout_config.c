/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rollout_config: the `rollouts:` section of a policy (src/config/rollout.c). Every
 * validation error with its line, column and message; a full rollout loads with every
 * field as written; durations and RFC 3339 times; selectors that can take the same pod
 * are found and disjoint ones are not; the variant checked against the catalog; the two
 * shipped examples load and `accelfit check-policy` prints them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "accelfit/config.h"
#include "accelfit/rollout.h"
#include "config/rollout.h"
#include "support/support.h"

/* Lines 1-7; the first rollout starts on line 8. */
#define HEAD                                                                                       \
    "apiVersion: accelfit.io/v1\nkind: Policy\nrules:\n  - name: r1\n    tiers: [cpu]\n"          \
    "    reason: why\nrollouts:\n"

/* A placement rollout of five lines (A10G to L4), named `n`, in namespace `ns`. */
#define PLACEMENT(n, ns)                                                                           \
    "  - name: " n "\n    selector: {namespace: " ns "}\n    source: [nvidia-a10g]\n"             \
    "    target: [nvidia-l4]\n    share: 0.5\n"

/* The head of a variant rollout (A10G to inf2, lines 8-13 when first): add the variant's
 * keys after it, indented six spaces. */
#define VARIANT_HEAD                                                                               \
    "  - name: v\n    selector: {namespace: ml}\n    source: [nvidia-a10g]\n"                     \
    "    target: [inferentia2]\n    share: 0.25\n    variant:\n"

static void assert_sane_rollouts(const struct af_policy *p)
{
    for (size_t i = 0; i < p->n_rollouts; i++) {
        const struct af_rollout *r = &p->rollouts[i];
        ck_assert_ptr_nonnull(r->name);
        ck_assert_int_gt(r->line, 0);
        ck_assert_uint_ne(r->source, 0);
        ck_assert_uint_ne(r->target, 0);
        ck_assert_uint_eq(r->source & r->target, 0);
        ck_assert(r->share >= 0 && r->share <= 1);
        for (size_t s = 1; s < r->n_stages; s++)
            ck_assert(r->stages[s].share >= r->stages[s - 1].share);
        if (r->variant) {
            ck_assert_uint_gt(r->variant->n_resources + r->variant->n_claim_templates, 0);
            if (r->variant->n_resources)
                ck_assert_ptr_nonnull(r->variant->resource_pos);
        }
    }
}

static struct af_policy *load_ok(const char *yaml)
{
    struct af_policy *p = NULL;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_policy_load_mem(&p, "policy.yaml", yaml, strlen(yaml), &err) == 0,
                  "%d:%d: %s", err.line, err.column, err.text);
    assert_sane_rollouts(p);
    return p;
}

static struct af_catalog *embedded_catalog(void)
{
    struct af_catalog *c = NULL;
    struct af_error err;

    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_catalog_load_mem(&c, "<embedded>", af_embedded_catalog_yaml,
                                         af_embedded_catalog_yaml_len, &err),
                     0);
    return c;
}

/* Loads `yaml` as policy.yaml and checks it against the embedded catalog, as
 * af_config_load does; returns the first error's code with `err` filled. */
static int load_checked(const char *yaml, struct af_error *err)
{
    struct af_policy *p = (struct af_policy *)1;
    struct af_catalog *c;
    int rc;

    memset(err, 0, sizeof(*err));
    rc = af_policy_load_mem(&p, "policy.yaml", yaml, strlen(yaml), err);
    if (rc) {
        ck_assert_ptr_null(p);
        return rc;
    }
    c = embedded_catalog();
    rc = af__rollouts_check_catalog(p, c, err);
    af_catalog_free(c);
    af_policy_free(p);
    return rc;
}

/* ---- every validation error, where it is -------------------------------------------------- */

static const struct {
    const char *yaml;
    int line;
    int column;
    const char *text;
} bad[] = {
    /* shares */
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    share: 1.5\n",
     12, 12, "'share' must be between 0 and 1, not '1.5'"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    share: -0.1\n",
     12, 12, "'share' must be between 0 and 1"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    share: 25\n",
     12, 12, "between 0 and 1, a fraction (write 0.25 for 25%)"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    share: \"0.5\"\n",
     12, 12, "'share' must be a number, not a quoted string"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    share: 0.5\n    stages: [{share: 0.5}]\n",
     13, 13, "both 'share' and 'stages'"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n", 8,
     5, "rollout 'a' has no 'share' (0 to 1) or 'stages'"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    stages:\n      - {share: 0.1}\n      - {after: 1h}\n",
     14, 9, "stage 2 of rollout 'a' has no 'share'"},
    /* stages that go down or back */
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    stages:\n      - {share: 0.5}\n      - {share: 0.25, after: 24h}\n",
     14, 17, "stage 2 of rollout 'a' has share 0.25, below stage 1's 0.5"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    stages:\n      - {share: 0.1, start: \"2026-12-01T00:00:00Z\"}\n"
          "      - {share: 0.2}\n      - {share: 0.3, start: \"2026-11-30T00:00:00Z\"}\n",
     15, 29,
     "stage 3 of rollout 'a' starts at 2026-11-30T00:00:00Z, not after stage 1 "
     "(2026-12-01T00:00:00Z): stage times must go forward"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    stages:\n      - {share: 0.1, start: \"2026-12-01T00:00:00Z\"}\n"
          "      - {share: 0.2, start: \"2026-12-01T02:00:00+02:00\"}\n",
     14, 29, "starts at 2026-12-01T00:00:00Z, not after stage 1"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    stages:\n      - {share: 0.1, after: 1h}\n",
     13, 29, "the first stage begins with the rollout"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    stages:\n      - {share: 0.1}\n      - {share: 0.2, after: 24}\n",
     14, 29, "'after' must be a duration such as 90s, 10m, 24h, 2d or 1h30m"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    stages:\n      - {share: 0.1}\n      - {share: 0.2, after: 0s}\n",
     14, 29, "'after' must be longer than 0"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    stages:\n      - {share: 0.1, start: \"2026-13-01T00:00:00Z\"}\n",
     13, 29, "'start' must be an RFC 3339 time"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    stages: []\n",
     12, 13, "must list at least one stage"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    stages:\n      - {share: 0.1, hold: 1h}\n",
     13, 22, "unknown key 'hold' in a stage (known: share, after, start)"},
    /* classes */
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10x]\n    target: [nvidia-l4]\n"
          "    share: 0.5\n",
     10, 14, "unknown class 'nvidia-a10x' in source (known: nvidia-t4,"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [inferentia3]\n"
          "    share: 0.5\n",
     11, 14, "unknown class 'inferentia3' in target"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g, nvidia-l4]\n"
          "    target: [nvidia-l40s, nvidia-l4]\n    share: 0.5\n",
     11, 27, "class 'nvidia-l4' is both a source and a target of rollout 'a'"},
    {HEAD "  - name: a\n    selector: {}\n    source: nvidia-a10g\n    target: nvidia-a10g\n"
          "    share: 0.5\n",
     11, 13, "class 'nvidia-a10g' is both a source and a target"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g, nvidia-a10g]\n"
          "    target: [nvidia-l4]\n    share: 0.5\n",
     10, 27, "class 'nvidia-a10g' appears twice in source"},
    {HEAD "  - name: a\n    selector: {}\n    source: []\n    target: [nvidia-l4]\n"
          "    share: 0.5\n",
     10, 13, "'source' of rollout 'a' must name at least one class"},
    {HEAD "  - name: a\n    selector: {}\n    target: [nvidia-l4]\n    share: 0.5\n", 8, 5,
     "rollout 'a' has no 'source' classes"},
    /* placement or variant */
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [inferentia2]\n"
          "    share: 0.5\n",
     11, 13,
     "source nvidia-a10g (NVIDIA GPU) and target inferentia2 (AWS Neuron, NeuronCore-v2) of "
     "rollout 'a' need different pods: add a 'variant'"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    share: 0.5\n    variant:\n      resources: {nvidia.com/gpu: 1}\n",
     14, 7,
     "source nvidia-a10g and target nvidia-l4 of rollout 'a' are the same kind (NVIDIA GPU) and "
     "run the same pod: that is a placement rollout, which needs no variant; remove 'variant'"},
    {HEAD "  - name: a\n    selector: {}\n    source: [trainium1]\n    target: [inferentia2]\n"
          "    share: 0.5\n    variant:\n      resources: {aws.amazon.com/neuron: 1}\n",
     14, 7, "same kind (AWS Neuron, NeuronCore-v2) and run the same pod"},
    {HEAD "  - name: a\n    selector: {}\n    source: [cpu]\n    target: [inferentia2]\n"
          "    share: 0.5\n    variant:\n      resources: {aws.amazon.com/neuron: 1}\n",
     14, 7, "but source class cpu requests none"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n"
          "    target: [inferentia2, amd-gpu]\n    share: 0.5\n    variant:\n"
          "      resources: {aws.amazon.com/neuron: 1}\n",
     11, 13, "must be of one accelerator kind"},
    /* the variant's resources */
    {HEAD VARIANT_HEAD "      resources: {nvidia.com/gpu: 1}\n", 14, 19,
     "'nvidia.com/gpu' is an NVIDIA GPU resource, but the target classes (inferentia2) are AWS "
     "Neuron: write aws.amazon.com/neuron, aws.amazon.com/neurondevice or "
     "aws.amazon.com/neuroncore"},
    {HEAD VARIANT_HEAD "      resources: {\"aws.amazon.com/neuron core\": 1}\n", 14, 19,
     "'aws.amazon.com/neuron core' is not a valid Kubernetes resource name"},
    {HEAD VARIANT_HEAD "      resources: {Aws.Amazon.com/neuron: 1}\n", 14, 19,
     "is not a valid Kubernetes resource name"},
    {HEAD VARIANT_HEAD "      resources: {vpc.amazonaws.com/efa: 1}\n", 14, 19,
     "'vpc.amazonaws.com/efa' is not an accelerator resource"},
    {HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neuron: \"0.5\"}\n", 14, 42,
     "'aws.amazon.com/neuron' must be a whole number of at least 1"},
    {HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neuron: 0}\n", 14, 42,
     "must be a whole number of at least 1"},
    {HEAD VARIANT_HEAD
     "      resources: {aws.amazon.com/neuron: 1, aws.amazon.com/neuroncore: 2}\n",
     14, 45, "both ask for Neuron hardware"},
    {HEAD VARIANT_HEAD "      resources: {}\n", 14, 18, "'variant.resources' must not be empty"},
    {HEAD VARIANT_HEAD "      images: {server: x}\n", 14, 7, "the variant of rollout 'v' has no "
                                                             "'resources'"},
    {HEAD VARIANT_HEAD "      image: {server: x}\n", 14, 7,
     "unknown key 'image' in variant (known: images, resources, env, tolerations, annotations, "
     "claimTemplates)"},
    /* DRA claim templates */
    {HEAD VARIANT_HEAD "      claimTemplates: {one-a100: Four_Neurons}\n", 14, 34,
     "'Four_Neurons' is not a ResourceClaimTemplate name"},
    {HEAD VARIANT_HEAD "      claimTemplates: {one-a100: one-a100}\n", 14, 34,
     "claim template 'one-a100' is swapped for itself"},
    {HEAD VARIANT_HEAD "      claimTemplates: {}\n", 14, 23,
     "'variant.claimTemplates' must not be empty"},
    {HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neuron: 1}\n      images: {Server: x}\n",
     15, 16, "'Server' in variant.images is not a container name"},
    {HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neuron: 1}\n      env: {1BAD: x}\n", 15,
     13, "'1BAD' in variant.env is not an environment variable name"},
    {HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neuron: 1}\n"
                       "      tolerations: [{key: k, operator: Exists, value: v}]\n",
     15, 55, "a toleration with operator Exists takes no 'value'"},
    {HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neuron: 1}\n"
                       "      tolerations: [{key: k, effect: NoScheduleNow}]\n",
     15, 38, "unknown taint effect 'NoScheduleNow'"},
    {HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neuron: 1}\n"
                       "      tolerations: [{operator: Equal, value: v}]\n",
     15, 21, "a toleration without a 'key' must have operator Exists"},
    {HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neuron: 1}\n"
                       "      annotations: {accelfit.io/rollout-side: target}\n",
     15, 21, "'accelfit.io/rollout-side' in variant.annotations is not an annotation key you "
             "may set"},
    /* fallback, brake, names, keys */
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    share: 0.5\n    fallback: retry\n",
     13, 15, "unknown fallback 'retry' (known: source, wait)"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    share: 0.5\n    brake: {restarts: -1}\n",
     13, 23, "'brake.restarts' must be between 0 and 1000000"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    share: 0.5\n    brake: {not_ready_for: soon}\n",
     13, 28, "'brake.not_ready_for' must be a duration"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    share: 0.5\n    brake: {failed: yes}\n",
     13, 21, "'brake.failed' must be true or false"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    share: 0.5\n    brake: {on_oom: true}\n",
     13, 13, "unknown key 'on_oom' in brake"},
    {HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
          "    shares: 0.5\n",
     12, 5, "unknown key 'shares' in a rollout"},
    {HEAD "  - name: LLM_infer\n    selector: {}\n    source: [nvidia-a10g]\n"
          "    target: [nvidia-l4]\n    share: 0.5\n",
     8, 11, "rollout name 'LLM_infer' must be lower-case letters"},
    {HEAD "  - selector: {}\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n    share: 0.5\n",
     8, 5, "rollout has no 'name'"},
    {HEAD "  - name: a\n    source: [nvidia-a10g]\n    target: [nvidia-l4]\n    share: 0.5\n", 8, 5,
     "rollout 'a' has no 'selector' (write 'selector: {}' to take every managed pod)"},
    {HEAD PLACEMENT("a", "ml") PLACEMENT("a", "other"), 13, 11,
     "duplicate rollout name 'a' (first at line 8)"},
    {HEAD "  name: a\n", 8, 3, "'rollouts' must be a list, not a mapping"},
    /* selectors */
    {HEAD "  - name: a\n    selector: {matchExpressions: []}\n    source: [nvidia-a10g]\n"
          "    target: [nvidia-l4]\n    share: 0.5\n",
     9, 16, "unknown key 'matchExpressions' in selector (known: namespace, matchLabels, owner)"},
    {HEAD "  - name: a\n    selector: {namespace: ML}\n    source: [nvidia-a10g]\n"
          "    target: [nvidia-l4]\n    share: 0.5\n",
     9, 27, "'ML' is not a namespace name"},
    {HEAD "  - name: a\n    selector: {matchLabels: {\"bad key!\": x}}\n"
          "    source: [nvidia-a10g]\n    target: [nvidia-l4]\n    share: 0.5\n",
     9, 30, "'bad key!' in selector.matchLabels is not a label key"},
    {HEAD "  - name: a\n    selector: {matchLabels: {app: \"-x\"}}\n"
          "    source: [nvidia-a10g]\n    target: [nvidia-l4]\n    share: 0.5\n",
     9, 35, "'-x' is not a label value"},
    {HEAD "  - name: a\n    selector: {matchLabels: {accelfit.io/managed: \"false\"}}\n"
          "    source: [nvidia-a10g]\n    target: [nvidia-l4]\n    share: 0.5\n",
     9, 51, "can never match: only pods labelled accelfit.io/managed: \"true\" take part"},
    {HEAD "  - name: a\n    selector: {owner: {kind: DaemonSet}}\n    source: [nvidia-a10g]\n"
          "    target: [nvidia-l4]\n    share: 0.5\n",
     9, 30, "unknown owner kind 'DaemonSet' (known: Deployment, StatefulSet, ReplicaSet, Job)"},
    {HEAD "  - name: a\n    selector: {owner: {name: x}}\n    source: [nvidia-a10g]\n"
          "    target: [nvidia-l4]\n    share: 0.5\n",
     9, 23, "'selector.owner' needs a 'kind'"},
    /* overlapping selectors: both names and lines, at the later selector */
    {HEAD PLACEMENT("a", "ml") PLACEMENT("b", "ml"), 14, 15,
     "rollouts 'a' (line 8) and 'b' (line 13) can select the same pods (namespace ml;"},
    {HEAD PLACEMENT("a", "ml") "  - name: b\n    selector: {matchLabels: {app: x}}\n"
                               "    source: [nvidia-t4]\n    target: [nvidia-l4]\n"
                               "    share: 0.5\n",
     14, 15, "rollouts 'a' (line 8) and 'b' (line 13) can select the same pods"},
};

START_TEST(test_rollout_errors_name_line_and_column)
{
    struct af_error err;
    char msg[1024];
    int rc = load_checked(bad[_i].yaml, &err);

    af_error_format(&err, msg, sizeof(msg));
    ck_assert_msg(rc < 0, "case %d loaded", _i);
    ck_assert_str_eq(err.file, "policy.yaml");
    ck_assert_msg(strstr(err.text, bad[_i].text), "case %d: got '%s'", _i, msg);
    ck_assert_msg(err.line == bad[_i].line && err.column == bad[_i].column,
                  "case %d: got '%s', want %d:%d", _i, msg, bad[_i].line, bad[_i].column);
}
END_TEST

/* ---- a variant that does not fit its classes (needs the catalog) ------------------------- */

static const struct {
    const char *yaml;
    int line;
    int column;
    const char *text;
} bad_fit[] = {
    {HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neuron: 32}\n", 14, 42,
     "the variant of rollout 'v' asks for 32 Neuron devices (aws.amazon.com/neuron) per "
     "container, more than any instance of its target classes has: the largest inferentia2 "
     "instance (inf2.48xlarge) has 12"},
    {HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neurondevice: 13}\n", 14, 48,
     "asks for 13 Neuron devices (aws.amazon.com/neurondevice)"},
    {HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neuroncore: 32}\n", 14, 46,
     "asks for 32 NeuronCores (aws.amazon.com/neuroncore) per container, more than any instance "
     "of its target classes has: the largest inferentia2 instance (inf2.48xlarge) has 24"},
    {HEAD "  - name: back-to-gpu\n    selector: {}\n    source: [trainium1]\n"
          "    target: [nvidia-a100, nvidia-h100]\n    share: 0.5\n    variant:\n"
          "      resources: {nvidia.com/gpu: 16}\n",
     14, 35,
     "the largest nvidia-a100 instance (p4d.24xlarge) has 8; the largest nvidia-h100 instance "
     "(p5.48xlarge) has 8"},
};

START_TEST(test_variant_that_fits_no_target_instance_is_an_error)
{
    struct af_error err;
    char msg[1024];
    int rc = load_checked(bad_fit[_i].yaml, &err);

    af_error_format(&err, msg, sizeof(msg));
    ck_assert_msg(rc == AF_EINVAL, "case %d: rc %d (%s)", _i, rc, msg);
    ck_assert_str_eq(err.file, "policy.yaml");
    ck_assert_msg(strstr(err.text, bad_fit[_i].text), "case %d: got '%s'", _i, msg);
    ck_assert_msg(err.line == bad_fit[_i].line && err.column == bad_fit[_i].column,
                  "case %d: got '%s', want %d:%d", _i, msg, bad_fit[_i].line, bad_fit[_i].column);
}
END_TEST

/* Variants that fit: some target class has an instance big enough. */
static const char *const good_fit[] = {
    HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neuron: 12}\n",
    HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neuroncore: 24}\n",
    /* 16 devices fit no inf2 instance but do fit trn1.32xlarge. */
    HEAD "  - name: v\n    selector: {}\n    source: [nvidia-a100]\n"
         "    target: [inferentia2, trainium1]\n    share: 0.5\n    variant:\n"
         "      resources: {aws.amazon.com/neuron: \"16\"}\n",
    HEAD "  - name: v\n    selector: {}\n    source: [inferentia1]\n    target: [inferentia2]\n"
         "    share: 0.5\n    variant:\n      resources: {aws.amazon.com/neuron: 1}\n",
};

START_TEST(test_variant_that_fits_a_target_instance_loads)
{
    struct af_error err;
    char msg[1024];
    int rc = load_checked(good_fit[_i], &err);

    af_error_format(&err, msg, sizeof(msg));
    ck_assert_msg(rc == 0, "case %d: %s", _i, msg);
}
END_TEST

START_TEST(test_config_load_checks_variants_against_the_catalog)
{
    static const char pol[] = HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neuron: 32}\n";
    char path[] = "/tmp/af_check_rollout_config_XXXXXX";
    struct af_config *cfg = NULL;
    struct af_error err;
    int fd = mkstemp(path);
    FILE *f;

    ck_assert_int_ge(fd, 0);
    f = fdopen(fd, "w");
    fputs(pol, f);
    fclose(f);
    memset(&err, 0, sizeof(err));
    ck_assert_int_eq(af_config_load(&cfg, NULL, path, &err), AF_EINVAL);
    ck_assert_ptr_null(cfg);
    ck_assert_str_eq(err.file, path);
    ck_assert_int_eq(err.line, 14);
    ck_assert_int_eq(err.column, 42);
    ck_assert_ptr_nonnull(strstr(err.text, "inf2.48xlarge) has 12"));
    unlink(path);
}
END_TEST

/* ---- a full rollout, every field as written ---------------------------------------------- */

static const char full[] =
    HEAD
    "  - name: llm-infer-to-inf2\n"                                               /* 8 */
    "    selector:\n"                                                             /* 9 */
    "      namespace: ml\n"                                                       /* 10 */
    "      matchLabels: {app: llm-infer, tier: \"\"}\n"                           /* 11 */
    "      owner: {kind: Deployment, name: llm-infer}\n"                          /* 12 */
    "    source: [nvidia-l4, nvidia-a10g]\n"                                      /* 13 */
    "    target: inferentia2\n"                                                   /* 14 */
    "    stages:\n"                                                               /* 15 */
    "      - {share: 0.10}\n"                                                     /* 16 */
    "      - {share: 0.25, after: 24h}\n"                                         /* 17 */
    "      - {share: 0.50, start: \"2026-12-01T00:00:00Z\"}\n"                    /* 18 */
    "      - {share: 1.0, after: 1h30m, start: 2026-12-03T12:00:00.5+02:00}\n"    /* 19 */
    "    fallback: wait\n"                                                        /* 20 */
    "    variant:\n"                                                              /* 21 */
    "      images: {server: public.ecr.aws/neuron/tritonserver:2.40-neuronx, \"*\": x:1}\n"
    "      resources: {aws.amazon.com/neuron: \"1\"}\n"                           /* 23 */
    "      env: {NEURON_RT_NUM_CORES: 2, MODE: neuron}\n"
    "      tolerations:\n"
    "        - {key: aws.amazon.com/neuron, operator: Exists, effect: NoSchedule}\n"
    "        - {key: team, value: ml}\n"
    "        - {operator: Exists}\n"
    "      annotations: {accelfit.io/neuron-ready: \"true\"}\n"
    "    brake: {not_ready_for: 10m, restarts: 3, failed: false}\n"
    "  - name: l4-pilot\n"                                                        /* 31 */
    "    selector: {namespace: web}\n"
    "    source: nvidia-t4\n"
    "    target: [nvidia-l4]\n"
    "    share: 0.2\n";

static void assert_pair(const struct af_pair *p, const char *k, const char *v)
{
    ck_assert_str_eq(p->key, k);
    ck_assert_str_eq(p->value, v);
}

START_TEST(test_full_rollout_loads_every_field_as_written)
{
    struct af_policy *p = load_ok(full);
    const struct af_rollout *r = &p->rollouts[0], *q = &p->rollouts[1];
    const struct af_variant *v = r->variant;

    ck_assert_uint_eq(p->n_rollouts, 2);
    ck_assert_str_eq(r->name, "llm-infer-to-inf2");
    ck_assert_int_eq(r->line, 8);
    ck_assert_str_eq(r->ns, "ml");
    ck_assert_uint_eq(r->n_match_labels, 2);
    assert_pair(&r->match_labels[0], "app", "llm-infer");
    assert_pair(&r->match_labels[1], "tier", "");
    ck_assert_str_eq(r->owner_kind, "Deployment");
    ck_assert_str_eq(r->owner_name, "llm-infer");
    ck_assert_uint_eq(r->source, (1u << AF_CLASS_NVIDIA_A10G) | (1u << AF_CLASS_NVIDIA_L4));
    ck_assert_uint_eq(r->target, 1u << AF_CLASS_INFERENTIA2);

    ck_assert_uint_eq(r->n_stages, 4);
    ck_assert_double_eq(r->share, 0.10);
    ck_assert_double_eq(r->stages[0].share, 0.10);
    ck_assert_double_eq(r->stages[0].start_unix, 0);
    ck_assert_double_eq(r->stages[0].min_duration_s, 86400);   /* stage 2's after: 24h */
    ck_assert_double_eq(r->stages[1].share, 0.25);
    ck_assert_double_eq(r->stages[1].min_duration_s, 0);
    ck_assert_double_eq(r->stages[2].share, 0.50);
    ck_assert_double_eq(r->stages[2].start_unix, 1796083200);   /* 2026-12-01T00:00:00Z */
    ck_assert_double_eq(r->stages[2].min_duration_s, 5400);     /* stage 4's after: 1h30m */
    ck_assert_double_eq(r->stages[3].share, 1.0);
    ck_assert_double_eq(r->stages[3].start_unix, 1796083200 + 2 * 86400 + 10 * 3600 + 0.5);
    ck_assert_double_eq(r->stages[3].min_duration_s, 0);
    ck_assert_int_eq(r->fallback, AF_FALLBACK_WAIT);

    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(v->n_images, 2);
    assert_pair(&v->images[0], "server", "public.ecr.aws/neuron/tritonserver:2.40-neuronx");
    assert_pair(&v->images[1], "*", "x:1");
    ck_assert_uint_eq(v->n_resources, 1);
    assert_pair(&v->resources[0], "aws.amazon.com/neuron", "1");
    ck_assert_int_eq(v->resource_pos[0].line, 23);
    ck_assert_int_eq(v->resource_pos[0].column, 42);
    ck_assert_uint_eq(v->n_env, 2);
    assert_pair(&v->env[0], "NEURON_RT_NUM_CORES", "2");
    assert_pair(&v->env[1], "MODE", "neuron");
    ck_assert_uint_eq(v->n_tolerations, 3);
    ck_assert_str_eq(v->tolerations[0].key, "aws.amazon.com/neuron");
    ck_assert_str_eq(v->tolerations[0].op, "Exists");
    ck_assert_ptr_null(v->tolerations[0].value);
    ck_assert_str_eq(v->tolerations[0].effect, "NoSchedule");
    ck_assert_str_eq(v->tolerations[1].key, "team");
    ck_assert_str_eq(v->tolerations[1].op, "Equal");   /* the API server's default */
    ck_assert_str_eq(v->tolerations[1].value, "ml");
    ck_assert_ptr_null(v->tolerations[1].effect);
    ck_assert_ptr_null(v->tolerations[2].key);
    ck_assert_str_eq(v->tolerations[2].op, "Exists");
    ck_assert_uint_eq(v->n_annotations, 1);
    assert_pair(&v->annotations[0], "accelfit.io/neuron-ready", "true");

    ck_assert_int_eq(r->brake_not_ready_s, 600);
    ck_assert_int_eq(r->brake_restarts, 3);
    ck_assert(!r->brake_on_failed);

    /* The second: a placement rollout with every default. */
    ck_assert_str_eq(q->name, "l4-pilot");
    ck_assert_int_eq(q->line, 31);
    ck_assert_str_eq(q->ns, "web");
    ck_assert_uint_eq(q->n_match_labels, 0);
    ck_assert_ptr_null(q->owner_kind);
    ck_assert_ptr_null(q->owner_name);
    ck_assert_uint_eq(q->source, 1u << AF_CLASS_NVIDIA_T4);
    ck_assert_double_eq(q->share, 0.2);
    ck_assert_uint_eq(q->n_stages, 0);
    ck_assert_ptr_null(q->stages);
    ck_assert_int_eq(q->fallback, AF_FALLBACK_SOURCE);
    ck_assert_ptr_null(q->variant);
    ck_assert_int_eq(q->brake_not_ready_s, 600);
    ck_assert_int_eq(q->brake_restarts, 3);
    ck_assert(q->brake_on_failed);
    af_policy_free(p);
}
END_TEST

/* A variant for DRA pods: claim templates, and no resources (the claims hold the devices). */
START_TEST(test_claim_template_variant_loads_without_resources)
{
    struct af_policy *p = load_ok(HEAD VARIANT_HEAD
                                  "      claimTemplates: {one-a10g: two-inf2, a10g-pair: inf2-pair}\n"
                                  "      env: {NEURON_RT_VISIBLE_CORES: \"0-3\"}\n");
    const struct af_variant *v = p->rollouts[0].variant;

    ck_assert_ptr_nonnull(v);
    ck_assert_uint_eq(v->n_resources, 0);
    ck_assert_uint_eq(v->n_claim_templates, 2);
    assert_pair(&v->claim_templates[0], "one-a10g", "two-inf2");
    assert_pair(&v->claim_templates[1], "a10g-pair", "inf2-pair");
    ck_assert_uint_eq(v->n_env, 1);
    af_policy_free(p);
}
END_TEST

START_TEST(test_policy_without_rollouts_has_none)
{
    struct af_policy *p = load_ok(HEAD "  []\n");

    ck_assert_uint_eq(p->n_rollouts, 0);
    ck_assert_ptr_null(p->rollouts);
    af_policy_free(p);
    p = load_ok("apiVersion: accelfit.io/v1\nkind: Policy\nrules:\n  - name: r1\n"
                "    tiers: [cpu]\n    reason: why\n");
    ck_assert_uint_eq(p->n_rollouts, 0);
    af_policy_free(p);
}
END_TEST

/* A brake that is written turns off only the conditions it sets to 0 or false. */
START_TEST(test_brake_keys_left_out_keep_their_defaults)
{
    struct af_policy *p = load_ok(HEAD "  - name: a\n    selector: {namespace: a}\n"
                                       "    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
                                       "    share: 0.5\n    brake: {restarts: 0}\n"
                                       "  - name: b\n    selector: {namespace: b}\n"
                                       "    source: [nvidia-a10g]\n    target: [nvidia-l4]\n"
                                       "    share: 0.5\n"
                                       "    brake: {not_ready_for: 0, restarts: 0, "
                                       "failed: false}\n");

    ck_assert_int_eq(p->rollouts[0].brake_not_ready_s, 600);
    ck_assert_int_eq(p->rollouts[0].brake_restarts, 0);
    ck_assert(p->rollouts[0].brake_on_failed);
    ck_assert_int_eq(p->rollouts[1].brake_not_ready_s, 0);
    ck_assert_int_eq(p->rollouts[1].brake_restarts, 0);
    ck_assert(!p->rollouts[1].brake_on_failed);
    af_policy_free(p);
}
END_TEST

/* ---- durations and times ------------------------------------------------------------------ */

static const struct {
    const char *text;
    int seconds;   /* -1: refused */
} durations[] = {
    {"90s", 90},      {"10m", 600},       {"24h", 86400},   {"2d", 172800},  {"1h30m", 5400},
    {"1d12h", 129600}, {"0", 0},          {"0s", 0},        {"\"45m\"", 2700}, {"10", -1},
    {"1.5h", -1},     {"10 m", -1},       {"-5m", -1},      {"10min", -1},   {"m", -1},
    {"h1", -1},       {"3651d", -1},      {"99999999999s", -1}, {"1w", -1},  {"\"\"", -1},
};

START_TEST(test_durations_parse)
{
    char yaml[512];
    struct af_policy *p = NULL;
    struct af_error err;
    int rc;

    snprintf(yaml, sizeof(yaml),
             HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n"
                  "    target: [nvidia-l4]\n    share: 0.5\n    brake: {not_ready_for: %s}\n",
             durations[_i].text);
    memset(&err, 0, sizeof(err));
    rc = af_policy_load_mem(&p, "policy.yaml", yaml, strlen(yaml), &err);
    if (durations[_i].seconds < 0) {
        ck_assert_msg(rc < 0, "'%s' was taken", durations[_i].text);
        ck_assert_int_eq(err.line, 13);
        ck_assert_int_eq(err.column, 28);
        ck_assert_msg(strstr(err.text, "must be a duration"), "'%s': %s", durations[_i].text,
                      err.text);
        return;
    }
    ck_assert_msg(rc == 0, "'%s': %s", durations[_i].text, err.text);
    ck_assert_int_eq(p->rollouts[0].brake_not_ready_s, durations[_i].seconds);
    af_policy_free(p);
}
END_TEST

static const struct {
    const char *text;
    double unix;   /* < 0: refused */
} times[] = {
    {"\"2026-12-01T00:00:00Z\"", 1796083200},
    {"2026-12-01T00:00:00Z", 1796083200},
    {"2026-12-01t00:00:00z", 1796083200},
    {"2026-12-01T02:00:00+02:00", 1796083200},
    {"2026-11-30T19:30:00-04:30", 1796083200},
    {"2024-02-29T12:00:00.25Z", 1709208000.25},
    {"2000-01-01T00:00:00Z", 946684800},
    {"2026-06-30T23:59:59Z", 1782863999},
    {"2026-02-29T00:00:00Z", -1},
    {"2026-04-31T00:00:00Z", -1},
    {"2026-12-01 00:00:00Z", -1},
    {"2026-12-01T24:00:00Z", -1},
    {"2026-12-01T00:60:00Z", -1},
    {"2026-12-01T00:00:60Z", -1},
    {"2026-12-01T00:00:00", -1},
    {"2026-12-01T00:00:00+2:00", -1},
    {"2026-12-01T00:00:00.Z", -1},
    {"2026-12-01", -1},
    {"1969-12-31T23:59:59Z", -1},
    {"tomorrow", -1},
};

START_TEST(test_times_parse)
{
    char yaml[512];
    struct af_policy *p = NULL;
    struct af_error err;
    int rc;

    snprintf(yaml, sizeof(yaml),
             HEAD "  - name: a\n    selector: {}\n    source: [nvidia-a10g]\n"
                  "    target: [nvidia-l4]\n    stages:\n      - {share: 0.5, start: %s}\n",
             times[_i].text);
    memset(&err, 0, sizeof(err));
    rc = af_policy_load_mem(&p, "policy.yaml", yaml, strlen(yaml), &err);
    if (times[_i].unix < 0) {
        ck_assert_msg(rc < 0, "'%s' was taken", times[_i].text);
        ck_assert_int_eq(err.line, 13);
        ck_assert_int_eq(err.column, 29);
        ck_assert_msg(strstr(err.text, "must be an RFC 3339 time"), "'%s': %s", times[_i].text,
                      err.text);
        return;
    }
    ck_assert_msg(rc == 0, "'%s': %s", times[_i].text, err.text);
    ck_assert_double_eq(p->rollouts[0].stages[0].start_unix, times[_i].unix);
    af_policy_free(p);
}
END_TEST

/* ---- overlapping selectors ---------------------------------------------------------------- */

/* Two selectors (flow mappings) and whether one pod can match both. */
static const struct {
    const char *a;
    const char *b;
    bool overlap;
} selectors[] = {
    {"{namespace: ml}", "{namespace: ml}", true},
    {"{}", "{namespace: ml}", true},
    {"{}", "{}", true},
    {"{namespace: ml}", "{namespace: web}", false},
    {"{matchLabels: {app: x}}", "{matchLabels: {app: y}}", false},
    {"{matchLabels: {app: x}}", "{matchLabels: {app: x, tier: gpu}}", true},
    {"{matchLabels: {app: x, tier: a}}", "{matchLabels: {tier: b, app: x}}", false},
    {"{matchLabels: {app: x}}", "{matchLabels: {team: ml}}", true},
    {"{namespace: ml, matchLabels: {app: x}}", "{matchLabels: {app: x}}", true},
    {"{namespace: ml, matchLabels: {app: x}}", "{namespace: web, matchLabels: {app: x}}", false},
    {"{owner: {kind: Job}}", "{owner: {kind: Job, name: train}}", true},
    {"{owner: {kind: Job, name: a}}", "{owner: {kind: Job, name: b}}", false},
    {"{owner: {kind: Job}}", "{owner: {kind: StatefulSet}}", false},
    {"{owner: {kind: Job}}", "{matchLabels: {app: x}}", true},
    {"{owner: {kind: Deployment, name: web}}", "{owner: {kind: ReplicaSet, name: web-7f9c}}",
     true},
    {"{owner: {kind: ReplicaSet, name: web-7f9c}}", "{owner: {kind: Deployment, name: web}}",
     true},
    {"{owner: {kind: Deployment, name: web}}", "{owner: {kind: ReplicaSet, name: api-7f9c}}",
     false},
    {"{owner: {kind: Deployment, name: web}}", "{owner: {kind: ReplicaSet}}", true},
    {"{owner: {kind: Deployment}}", "{owner: {kind: Job}}", false},
    {"{namespace: ml, owner: {kind: Job, name: a}}", "{namespace: ml, owner: {kind: Job, name: a}, "
                                                     "matchLabels: {app: x}}",
     true},
};

START_TEST(test_overlapping_selectors_are_found_and_disjoint_ones_are_not)
{
    char yaml[1024];
    struct af_policy *p = NULL;
    struct af_error err;
    int rc;

    snprintf(yaml, sizeof(yaml),
             HEAD "  - name: first\n    selector: %s\n    source: [nvidia-a10g]\n"
                  "    target: [nvidia-l4]\n    share: 0.5\n"
                  "  - name: second\n    selector: %s\n    source: [nvidia-t4]\n"
                  "    target: [nvidia-l4]\n    share: 0.5\n",
             selectors[_i].a, selectors[_i].b);
    memset(&err, 0, sizeof(err));
    rc = af_policy_load_mem(&p, "policy.yaml", yaml, strlen(yaml), &err);
    if (!selectors[_i].overlap) {
        ck_assert_msg(rc == 0, "case %d: %d:%d: %s", _i, err.line, err.column, err.text);
        ck_assert_uint_eq(p->n_rollouts, 2);
        af_policy_free(p);
        return;
    }
    ck_assert_msg(rc == AF_EINVAL, "case %d loaded", _i);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(err.line, 14);
    ck_assert_int_eq(err.column, 15);
    ck_assert_msg(strstr(err.text, "rollouts 'first' (line 8) and 'second' (line 13) can select "
                                   "the same pods"),
                  "case %d: %s", _i, err.text);
}
END_TEST

/* ---- the shipped examples ----------------------------------------------------------------- */

static const struct {
    const char *path;
    const char *rollout;
    const char *const shown[6];   /* lines check-policy prints, in order */
} examples[] = {
    {"policies/examples/inf2-inference-rollout.yaml",
     "llm-infer-to-inf2",
     {"llm-infer-to-inf2",
      "selector  namespace ml, labels app=llm-infer, owner Deployment/llm-infer",
      "classes   nvidia-a10g -> inferentia2",
      "share     stages 10% -> 25% (after 24h) -> 50% (after 24h) -> 100% (after 2d)",
      "variant   resources aws.amazon.com/neuron=1",
      "brake     a target pod not Ready for 10m, restarted 3 times or Failed"}},
    {"policies/examples/trainium-pilot.yaml",
     "trainium-pilot",
     {"trainium-pilot", "selector  namespace research, labels criticality=low, owner Job",
      "classes   nvidia-a100 -> trainium1", "share     20% of units on the target",
      "fallback  wait", "brake     a target pod not Ready for 15m, restarted 2 times or Failed"}},
};

START_TEST(test_examples_validate)
{
    char path[4096];
    struct af_config *cfg = NULL;
    struct af_error err;
    const struct af_policy *p;

    snprintf(path, sizeof(path), "%s", af_test_path(examples[_i].path));
    memset(&err, 0, sizeof(err));
    ck_assert_msg(af_config_load(&cfg, NULL, path, &err) == 0, "%s:%d:%d: %s", err.file, err.line,
                  err.column, err.text);
    p = cfg->policy;
    assert_sane_rollouts(p);
    ck_assert_uint_eq(p->n_rollouts, 1);
    ck_assert_str_eq(p->rollouts[0].name, examples[_i].rollout);
    ck_assert_ptr_nonnull(p->rollouts[0].variant);
    /* Complete policies: the default rules, unchanged. */
    ck_assert_uint_eq(p->n_rules, 24);
    af_config_unref(cfg);
}
END_TEST

START_TEST(test_check_policy_prints_the_examples)
{
    char path[4096];
    const char *argv[] = {"accelfit", "check-policy", "--policy", path, NULL};
    char *out = NULL, *err = NULL;
    const char *at;

    snprintf(path, sizeof(path), "%s", af_test_path(examples[_i].path));
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    ck_assert_str_eq(err, "");
    at = strstr(out, "rollouts (docs/rollouts.md):\n");
    ck_assert_msg(at != NULL, "%s", out);
    for (size_t i = 0; i < AF_ARRAY_SIZE(examples[_i].shown); i++) {
        const char *next = strstr(at, examples[_i].shown[i]);
        ck_assert_msg(next != NULL, "'%s' not printed after the last; output:\n%s",
                      examples[_i].shown[i], out);
        at = next;
    }
    ck_assert_ptr_null(strstr(out, "warning"));
    free(out);
    free(err);
}
END_TEST

START_TEST(test_check_policy_reports_a_rollout_error_with_its_position)
{
    char path[] = "/tmp/af_check_rollout_config_XXXXXX";
    const char *argv[] = {"accelfit", "check-policy", "--policy", path, NULL};
    char *out = NULL, *err = NULL, want[256];
    int fd = mkstemp(path);
    FILE *f;

    ck_assert_int_ge(fd, 0);
    f = fdopen(fd, "w");
    fputs(HEAD VARIANT_HEAD "      resources: {aws.amazon.com/neuron: 32}\n", f);
    fclose(f);
    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 2);
    ck_assert_str_eq(out, "");
    snprintf(want, sizeof(want), "accelfit check-policy: %s:14:42: the variant of rollout 'v' ",
             path);
    ck_assert_msg(!strncmp(err, want, strlen(want)), "got '%s'", err);
    unlink(path);
    free(out);
    free(err);
}
END_TEST

START_TEST(test_check_policy_says_when_there_are_no_rollouts)
{
    const char *argv[] = {"accelfit", "check-policy", NULL};
    char *out = NULL, *err = NULL;

    ck_assert_int_eq(af_test_exec(argv, NULL, &out, &err), 0);
    ck_assert_ptr_nonnull(strstr(out, "  rollouts: none\n"));
    free(out);
    free(err);
}
END_TEST

static Suite *af_rollout_config_suite(void)
{
    Suite *s = suite_create("rollout_config");
    TCase *tc = tcase_create("errors");

    tcase_add_loop_test(tc, test_rollout_errors_name_line_and_column, 0, (int)AF_ARRAY_SIZE(bad));
    tcase_add_loop_test(tc, test_variant_that_fits_no_target_instance_is_an_error, 0,
                        (int)AF_ARRAY_SIZE(bad_fit));
    tcase_add_loop_test(tc, test_variant_that_fits_a_target_instance_loads, 0,
                        (int)AF_ARRAY_SIZE(good_fit));
    tcase_add_test(tc, test_config_load_checks_variants_against_the_catalog);
    suite_add_tcase(s, tc);

    tc = tcase_create("fields");
    tcase_add_test(tc, test_full_rollout_loads_every_field_as_written);
    tcase_add_test(tc, test_claim_template_variant_loads_without_resources);
    tcase_add_test(tc, test_policy_without_rollouts_has_none);
    tcase_add_test(tc, test_brake_keys_left_out_keep_their_defaults);
    tcase_add_loop_test(tc, test_durations_parse, 0, (int)AF_ARRAY_SIZE(durations));
    tcase_add_loop_test(tc, test_times_parse, 0, (int)AF_ARRAY_SIZE(times));
    tcase_add_loop_test(tc, test_overlapping_selectors_are_found_and_disjoint_ones_are_not, 0,
                        (int)AF_ARRAY_SIZE(selectors));
    suite_add_tcase(s, tc);

    tc = tcase_create("examples");
    tcase_add_loop_test(tc, test_examples_validate, 0, (int)AF_ARRAY_SIZE(examples));
    tcase_add_loop_test(tc, test_check_policy_prints_the_examples, 0,
                        (int)AF_ARRAY_SIZE(examples));
    tcase_add_test(tc, test_check_policy_reports_a_rollout_error_with_its_position);
    tcase_add_test(tc, test_check_policy_says_when_there_are_no_rollouts);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return af_test_run(af_rollout_config_suite());
}
