/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What manifests/monitoring ships, read as a test reads it: every PromQL expression of the
 * rules (accelfit.rules.yaml) and of the Grafana dashboard (accelfit-dashboard.json), with
 * where it comes from, and the metric names an expression reads. Shared by
 * tests/check_monitoring.c (promtool) and tests/e2e (a real Prometheus scraping accelfit).
 */
#ifndef AF_TEST_MONITORING_H
#define AF_TEST_MONITORING_H

#include <jansson.h>

#define AF_TEST_RULES "manifests/monitoring/accelfit.rules.yaml"
#define AF_TEST_DASHBOARD "manifests/monitoring/accelfit-dashboard.json"

/* A file of the source tree as JSON (YAML or JSON; a YAML stream's first document). Aborts
 * the test when it does not parse. New reference. */
json_t *af_test_load_doc(const char *relpath);

/*
 * Every expression: an array of {"kind": "alert"|"record"|"panel", "name": alert or record
 * name, or panel title, "expr": PromQL, "ref": the target's refId (panels)}. New reference.
 */
json_t *af_test_monitoring_queries(void);

/* The metric names `expr` reads (accelfit_*, apiserver_*, and up), once each, in order.
 * New reference: an array of strings. */
json_t *af_test_metric_names(const char *expr);

#endif
