#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A small fake kube-apiserver for accelfit's reflector tests (Python 3 stdlib only).

Serves, over HTTPS with bearer-token auth:
  GET  /api/v1/nodes, /api/v1/pods         lists (limit/continue, fieldSelector on
                                            status.phase, resourceVersion) and watches
                                            (?watch=true&resourceVersion=..&allowWatchBookmarks)
  POST /api/v1/namespaces/{ns}/events       recorded
  ConfigMaps, as the API server serves them: GET /api/v1/namespaces/{ns}/configmaps/{name},
  POST .../configmaps (409 AlreadyExists), PUT .../configmaps/{name} (409 Conflict when
  metadata.resourceVersion is not the stored one, 404 when absent), and
  GET .../configmaps?watch=true (fieldSelector metadata.name=; without a resourceVersion, or
  with "0", the objects as they are come first as ADDED)
Objects are built from the recorded fixtures (tests/fixtures/apiserver/*.json); the
initial state is nodes-list.json + pods-list.json. resourceVersion is a global counter
(like the etcd revision); watches replay history after the given RV, or answer 200 with
one in-band ERROR 410 Expired Status when the RV is older than the kept window. Every answer is
JSON, whatever the Accept header asks: what a real API server does for a type it has no
protobuf for (CRDs, aggregated APIs), and accelfit's lists must read it; protobuf lists are
tested with the bytes of a real API server (tests/fixtures/apiserver-protobuf) and on the
real control plane (tests/e2e). Watch
streams are chunked, one event + "\\n" per chunk, with the response headers in the order
a real kube-apiserver v1.26 sends them.

A plain-HTTP control channel on 127.0.0.1 (--admin-port) takes POST /<command> with a
JSON body:
  add_node {name, instance_type?, gpus?, cpu?, labels?, annotations?}
  modify_node {name, gpus?, unschedulable?, labels?, annotations?}
  delete_node {name}
  add_pod {ns, name, node?, cpu?, memory?, gpus?, phase?}   modify_pod (same)
  delete_pod {ns, name}
  close_watches {mid_object: true}   drop every open watch, halfway through an event
  expire_watches                     open watches get ERROR 410 Expired in-band and end
  fail {status, count}               the next `count` API requests answer `status`
  expire_continue {count}            the next `count` lists with a continue token get
                                     HTTP 410 Expired (the client must list again in full)
  stall {seconds}                    open watches go silent (no events, no bookmarks)
  slow_configmaps {seconds, count}   the next `count` ConfigMap requests (not watches) wait
                                     `seconds` before they are answered
  fragment {on}                      watch bytes go out in random 1-300 byte chunks, so
                                     objects span chunks and chunks hold several objects
  token {token}                      the accepted bearer token (others get 401)
  restart                            drop all watches, jump the RV, forget history
  compact                            forget history (older RVs get 410) without dropping
  dump                               {rv, nodes:[...], pods:[...], used:{node:{res:n}}}
  configmap {ns, name}               the stored ConfigMap, or {} when there is none
  put_configmap {object}             stored as another client's write (a new resourceVersion)
  delete_configmap {ns, name}        deleted (watches see DELETED)
  put_nodeoverlay {object}           (with --nodeoverlays) a NodeOverlay created or replaced
  delete_nodeoverlay {name}          (with --nodeoverlays) deleted
  put_dra {object}                   (with --dra) a ResourceSlice, ResourceClaim,
                                     ResourceClaimTemplate or DeviceClass (by its kind) of
                                     resource.k8s.io/v1 created or replaced
  delete_dra {kind, name, ns?}       (with --dra) deleted; kind as the object's
  events                             the Events POSTed so far
  stats                              request counters
  requests                           every API request so far: [{method, path}] (path with
                                     its query), e.g. to compare with an RBAC role
  churn {rate}                       (with --synthetic-*) `rate` pod events per second
                                     until rate 0: a running pod is deleted, a new one
                                     bound to a random node is added, in turn

With --synthetic-nodes N --synthetic-pods M (benchmarks) the initial state is N Nodes and
M Pods shaped like a real EKS cluster's (tests/apiserver/synthetic.py), rendered once at
start and listed from the rendered bytes; admin changes overlay them. `dump` then reports
counts only.
On start it prints one line "READY <https port> <admin port>" on stdout.
"""
import argparse
import base64
import bisect
import copy
import datetime
import json
import math
import os
import random
import socket
import ssl
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, urlparse

import synthetic

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
import fake_server  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures", "apiserver")

SUFFIX = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "k": 1000, "M": 10**6,
          "G": 10**9, "T": 10**12, "m": 0.001, "": 1}


def quantity(s, scale=1):
    s = str(s)
    for suf in ("Ki", "Mi", "Gi", "Ti", "k", "M", "G", "T", "m"):
        if s.endswith(suf):
            return math.ceil(float(s[: -len(suf)]) * SUFFIX[suf] * scale - 1e-9)
    return math.ceil(float(s) * scale - 1e-9)


TRACKED = {"cpu": 1000, "memory": 1, "nvidia.com/gpu": 1, "aws.amazon.com/neuron": 1,
           "aws.amazon.com/neuroncore": 1, "aws.amazon.com/neurondevice": 1}


def pod_requests(pod):
    spec = pod.get("spec", {})
    apps = {}
    for c in spec.get("containers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            if k in TRACKED:
                apps[k] = apps.get(k, 0) + quantity(v, TRACKED[k])
    eff = dict(apps)
    for c in spec.get("initContainers") or []:
        for k, v in ((c.get("resources") or {}).get("requests") or {}).items():
            if k in TRACKED:
                eff[k] = max(eff.get(k, 0), quantity(v, TRACKED[k]))
    for k, v in (spec.get("overhead") or {}).items():
        if k in TRACKED:
            eff[k] = eff.get(k, 0) + quantity(v, TRACKED[k])
    return eff


def terminal(pod):
    return pod.get("status", {}).get("phase") in ("Succeeded", "Failed")


def now_rfc3339():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


class State:
    def __init__(self, token):
        self.cond = threading.Condition()
        self.token = token
        self.rv = 1000
        self.history_start = self.rv    # watches from an RV below this get 410
        self.history = []               # (rv, kind, type, obj, old)
        self.objs = {"nodes": {}, "pods": {}, "configmaps": {}, "nodeoverlays": {}}
        for k in DRA_KINDS:
            self.objs[k] = {}
        self.fail_status = 0
        self.fail_count = 0
        self.slow_cm_seconds = 0.0
        self.slow_cm_count = 0
        self.expire_continue = 0        # next N lists with a continue token get HTTP 410
        self.fragment = False           # watch bytes in random small chunks, not one per event
        self.stall_until = 0.0
        self.epoch = 0                  # bumped by restart: open watches die
        self.close_mid = 0              # bumped: open watches drop mid-object
        self.expire = 0                 # bumped: open watches get ERROR 410
        self.events = []
        self.requests = []
        self.stats = {"prefixed": 0, "unprefixed": 0, "list": 0, "watch": 0, "unauthorized": 0,
                      "failed": 0, "events": 0, "continue_expired": 0, "conflicts": 0}
        with open(os.path.join(FIXTURES, "nodes-list.json")) as f:
            nodes = json.load(f)["items"]
        with open(os.path.join(FIXTURES, "pods-list.json")) as f:
            pods = json.load(f)["items"]
        self.node_tmpl = copy.deepcopy(nodes[0])
        self.pod_tmpl = copy.deepcopy(pods[0])
        self.synth = None               # {kind: [bytes]} in synthetic mode
        self.churn_rate = 0.0
        if ARGS.synthetic_nodes or ARGS.synthetic_pods:
            self._synthesize(ARGS.synthetic_nodes, ARGS.synthetic_pods)
            nodes, pods = [], []
        for n in nodes:
            self._put("nodes", n, record=False)
        for p in pods:
            self._put("pods", p, record=False)
        self.history_start = self.rv

    def _synthesize(self, n_nodes, n_pods):
        rv = self.rv
        self.synth_nodes = max(n_nodes, 1)
        self.synth = {"nodes": [synthetic.dumps(synthetic.node_obj(i, rv)) for i in range(n_nodes)],
                      "pods": [synthetic.dumps(synthetic.pod_obj(i, rv, self.synth_nodes))
                               for i in range(n_pods)]}
        self.synth_keys = {"nodes": [synthetic.node_name(i) for i in range(n_nodes)],
                           "pods": ["%s/%s" % synthetic.pod_key(i) for i in range(n_pods)]}
        self.synth_index = {k: {key: i for i, key in enumerate(v)} for k, v in self.synth_keys.items()}
        self.synth_gone = {"nodes": set(), "pods": set()}   # replaced or deleted by the overlay
        self.synth_next = n_pods                            # index of the next churned-in pod

    def get(self, kind, key):
        """The current object (a dict) under `key`, synthetic or not; KeyError when absent."""
        if key in self.objs[kind]:
            return self.objs[kind][key]
        if self.synth is not None and key in self.synth_index[kind] and key not in self.synth_gone[kind]:
            return json.loads(self.synth[kind][self.synth_index[kind][key]])
        raise KeyError(key)

    def churn_step(self, n):
        """One churn event (under cond): delete a live pod (even n) or add a bound one (odd n)."""
        if n % 2 == 0:
            live = [k for k in self.objs["pods"]]
            if not live or random.random() < 0.5:
                i = random.randrange(len(self.synth_keys["pods"]))
                key = self.synth_keys["pods"][i]
                if key in self.synth_gone["pods"]:
                    return
            else:
                key = random.choice(live)
            self._put("pods", self.get("pods", key), delete=True)
        else:
            i = self.synth_next
            self.synth_next += 1
            node = random.randrange(len(self.synth_keys["nodes"]))
            self._put("pods", synthetic.pod_obj(i, self.rv, self.synth_nodes, node))

    @staticmethod
    def key(kind, obj):
        m = obj["metadata"]
        return m["name"] if kind in ("nodes", "nodeoverlays", "resourceslices", "deviceclasses") \
            else m.get("namespace", "default") + "/" + m["name"]

    def cm_put(self, ns, name, obj, create):
        """A ConfigMap written as the API server writes it: (code, reason, object or message)."""
        key = ns + "/" + name
        old = self.objs["configmaps"].get(key)
        md = obj.setdefault("metadata", {})
        if md.get("name", name) != name or md.get("namespace", ns) != ns:
            return 400, "BadRequest", "the name or namespace of the object does not match the request"
        size = sum(len(k.encode()) + len(v.encode()) for k, v in (obj.get("data") or {}).items()
                   if isinstance(v, str))
        if size > 1048576:
            # as the API server refuses it (ValidateConfigMap: data and binaryData together)
            return 422, "Invalid", ('ConfigMap "%s" is invalid: []: Too long: must have at most '
                                    '1048576 bytes' % name)
        if create:
            if old is not None:
                return 409, "AlreadyExists", 'configmaps "%s" already exists' % name
            md["uid"] = str(uuid.uuid4())
            md["creationTimestamp"] = now_rfc3339()
        else:
            if old is None:
                return 404, "NotFound", 'configmaps "%s" not found' % name
            if md.get("resourceVersion") and md["resourceVersion"] != old["metadata"]["resourceVersion"]:
                self.stats["conflicts"] += 1
                return 409, "Conflict", ('Operation cannot be fulfilled on configmaps "%s": the object has '
                                         'been modified; please apply your changes to the latest version '
                                         'and try again' % name)
            md["uid"] = old["metadata"]["uid"]
            md["creationTimestamp"] = old["metadata"]["creationTimestamp"]
        md["name"], md["namespace"] = name, ns
        obj["apiVersion"], obj["kind"] = "v1", "ConfigMap"
        return (201 if create else 200), "Created" if create else "OK", self._put("configmaps", obj)

    def _put(self, kind, obj, record=True, delete=False):
        self.rv += 1
        obj = copy.deepcopy(obj)
        obj["metadata"]["resourceVersion"] = str(self.rv)
        k = self.key(kind, obj)
        old = self.objs[kind].get(k)
        if self.synth is not None and k in self.synth_index[kind] and k not in self.synth_gone[kind]:
            old = json.loads(self.synth[kind][self.synth_index[kind][k]])
            self.synth_gone[kind].add(k)
        if delete:
            self.objs[kind].pop(k, None)
            typ = "DELETED"
        else:
            self.objs[kind][k] = obj
            typ = "MODIFIED" if old is not None else "ADDED"
        if record:
            self.history.append((self.rv, kind, typ, obj, old))
            self.cond.notify_all()
        return obj

    # -- builders from fixture templates --
    def make_node(self, a, base=None):
        n = copy.deepcopy(base if base is not None else self.node_tmpl)
        md = n["metadata"]
        if base is None:
            md["name"] = a["name"]
            md["uid"] = str(uuid.uuid4())
            md["creationTimestamp"] = now_rfc3339()
            md["labels"]["kubernetes.io/hostname"] = a["name"]
        if "instance_type" in a:
            md["labels"]["node.kubernetes.io/instance-type"] = a["instance_type"]
            md["labels"]["beta.kubernetes.io/instance-type"] = a["instance_type"]
        for field in ("allocatable", "capacity"):
            res = n["status"].setdefault(field, {})
            if "gpus" in a:
                res["nvidia.com/gpu"] = str(a["gpus"])
            if "cpu" in a:
                res["cpu"] = str(a["cpu"])
        if "unschedulable" in a:
            n["spec"]["unschedulable"] = bool(a["unschedulable"])
        md["labels"].update(a.get("labels", {}))   # e.g. karpenter.sh/capacity-type: spot
        if a.get("annotations"):
            md.setdefault("annotations", {}).update(a["annotations"])
        return n

    def make_pod(self, a):
        key = a.get("ns", "default") + "/" + a["name"]
        old = self.objs["pods"].get(key)
        p = copy.deepcopy(old if old is not None else self.pod_tmpl)
        md = p["metadata"]
        if old is None:
            md["name"] = a["name"]
            md["namespace"] = a.get("ns", "default")
            md["uid"] = str(uuid.uuid4())
            md["creationTimestamp"] = now_rfc3339()
            p["spec"].pop("nodeName", None)
        req = p["spec"]["containers"][0].setdefault("resources", {}).setdefault("requests", {})
        lim = p["spec"]["containers"][0]["resources"].setdefault("limits", {})
        if "cpu" in a:
            req["cpu"] = str(a["cpu"])
        if "memory" in a:
            req["memory"] = str(a["memory"])
        if "gpus" in a:
            if a["gpus"]:
                req["nvidia.com/gpu"] = lim["nvidia.com/gpu"] = str(a["gpus"])
            else:
                req.pop("nvidia.com/gpu", None)
                lim.pop("nvidia.com/gpu", None)
        if a.get("node"):
            p["spec"]["nodeName"] = a["node"]
        if "phase" in a:
            p["status"]["phase"] = a["phase"]
        return p

    def dump(self):
        if self.synth is not None:
            return {"rv": str(self.rv),
                    "nodes": len(self.synth["nodes"]) - len(self.synth_gone["nodes"]) + len(self.objs["nodes"]),
                    "pods": len(self.synth["pods"]) - len(self.synth_gone["pods"]) + len(self.objs["pods"])}
        used = {}
        for n in self.objs["nodes"]:
            used[n] = {}
        pods = []
        for p in self.objs["pods"].values():
            if terminal(p):
                continue
            node = p["spec"].get("nodeName")
            pods.append({"ns": p["metadata"].get("namespace", "default"),
                         "name": p["metadata"]["name"], "node": node})
            if node:
                u = used.setdefault(node, {})
                for k, v in pod_requests(p).items():
                    u[k] = u.get(k, 0) + v
        pods.sort(key=lambda x: (x["ns"], x["name"]))
        return {"rv": str(self.rv), "nodes": sorted(self.objs["nodes"]), "pods": pods,
                "used": used}


STATE = None
ARGS = None


def status_body(code, reason, message):
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


def labels_ok(sel, obj):
    """A labelSelector of equality terms as the API server reads them: key=value
    (key==value), key!=value (also true without the key), key, !key."""
    labels = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, sel.split(",")):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.replace("==", "=").split("=", 1)
            if labels.get(k) != v:
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


# resource.k8s.io/v1 (Kubernetes 1.34+), served with --dra: resource -> (kind, namespaced)
DRA_KINDS = {"resourceslices": ("ResourceSlice", False), "resourceclaims": ("ResourceClaim", True),
             "resourceclaimtemplates": ("ResourceClaimTemplate", True),
             "deviceclasses": ("DeviceClass", False)}
DRA_GV = "resource.k8s.io/v1"


def selector_ok(kind, sel, obj, labelsel=""):
    if obj is None:
        return True
    if labelsel and not labels_ok(labelsel, obj):
        return False
    if kind == "configmaps":
        for term in filter(None, sel.split(",")):
            if term.startswith("metadata.name=") and obj["metadata"]["name"] != term[len("metadata.name="):]:
                return False
        return True
    if kind != "pods" or not sel:
        return True
    phase = obj.get("status", {}).get("phase", "")
    for term in sel.split(","):
        if term.startswith("status.phase!="):
            if phase == term[len("status.phase!="):]:
                return False
        elif term.startswith("status.phase="):
            if phase != term[len("status.phase="):]:
                return False
    return True


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        if ARGS.verbose:
            sys.stderr.write("fake-apiserver: " + (fmt % args) + "\n")

    # -- raw response writing with the recorded header order --
    def start(self, code, reason, chunked=True, length=0):
        h = ["HTTP/1.1 %d %s" % (code, reason),
             "Audit-Id: " + str(uuid.uuid4()),
             "Cache-Control: no-cache, private",
             "Content-Type: application/json",
             "X-Kubernetes-Pf-Flowschema-Uid: 24365e83-4fa5-4785-ac12-831b0c9d4c3d",
             "X-Kubernetes-Pf-Prioritylevel-Uid: d57df790-718f-4475-936d-c1778dadf070",
             "Date: " + self.date_time_string()]
        h.append("Transfer-Encoding: chunked" if chunked else "Content-Length: %d" % length)
        self.wfile.write(("\r\n".join(h) + "\r\n\r\n").encode())

    def chunk(self, data):
        self.wfile.write(b"%x\r\n" % len(data) + data + b"\r\n")
        self.wfile.flush()

    def end_chunks(self):
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def send_status(self, code, reason, message):
        body = (json.dumps(status_body(code, reason, message), separators=(",", ":")) + "\n").encode()
        self.start(code, {400: "Bad Request", 401: "Unauthorized", 404: "Not Found", 409: "Conflict",
                          410: "Gone", 429:
                          "Too Many Requests", 500: "Internal Server Error",
                          503: "Service Unavailable"}.get(code, "Error"), chunked=False,
                   length=len(body))
        self.wfile.write(body)
        self.wfile.flush()

    def gate(self):
        with STATE.cond:
            STATE.requests.append({"method": self.command, "path": self.path})
            if self.headers.get("Authorization") != "Bearer " + STATE.token:
                STATE.stats["unauthorized"] += 1
                bad = True
            else:
                bad = False
            fail = 0
            slow = 0.0
            if ("/configmaps" in self.path and "watch=true" not in self.path
                    and STATE.slow_cm_count > 0):
                STATE.slow_cm_count -= 1
                slow = STATE.slow_cm_seconds
            if not bad and STATE.fail_count > 0:
                STATE.fail_count -= 1
                fail = STATE.fail_status
                STATE.stats["failed"] += 1
        if slow:
            time.sleep(slow)
        if bad:
            self.send_status(401, "Unauthorized", "Unauthorized")
            return False
        if fail:
            if fail == 429:
                self.send_status(429, "TooManyRequests", "Too many requests, please try again later.")
            else:
                self.send_status(fail, "InternalError", "Internal error occurred: injected")
            return False
        return True

    def send_obj(self, code, reason, obj):
        out = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
        self.start(code, reason, chunked=False, length=len(out))
        self.wfile.write(out)
        self.wfile.flush()

    def write_configmap(self, ns, name, body, create):
        try:
            obj = json.loads(body)
            assert isinstance(obj, dict)
        except (ValueError, AssertionError):
            self.send_status(400, "BadRequest", "bad json")
            return
        if create:
            name = (obj.get("metadata") or {}).get("name", "")
        with STATE.cond:
            code, reason, res = STATE.cm_put(ns, name, obj, create)
        if code >= 400:
            self.send_status(code, reason, res)
        else:
            self.send_obj(code, reason, res)

    def do_PUT(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if not self.gate():
            return
        parts = urlparse(strip_proxy_prefix(self.path)).path.strip("/").split("/")
        if len(parts) == 6 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "configmaps":
            self.write_configmap(parts[3], parts[5], body, False)
            return
        self.send_status(404, "NotFound", "the server could not find the requested resource")

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if not self.gate():
            return
        parts = urlparse(strip_proxy_prefix(self.path)).path.strip("/").split("/")
        if len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "configmaps":
            self.write_configmap(parts[3], None, body, True)
            return
        if len(parts) == 5 and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "events":
            try:
                ev = json.loads(body)
            except ValueError:
                self.send_status(400, "BadRequest", "bad json")
                return
            with STATE.cond:
                STATE.events.append({"namespace": parts[3], "event": ev})
                STATE.stats["events"] += 1
            out = (json.dumps(ev) + "\n").encode()
            self.start(201, "Created", chunked=False, length=len(out))
            self.wfile.write(out)
            self.wfile.flush()
            return
        self.send_status(404, "NotFound", "the server could not find the requested resource")

    # Other methods are recorded (requests) and answered 404: nothing here serves them.
    def do_other(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n:
            self.rfile.read(n)
        if self.gate():
            self.send_status(404, "NotFound", "the server could not find the requested resource")

    do_PATCH = do_DELETE = do_other

    def do_GET(self):
        u = urlparse(strip_proxy_prefix(self.path))
        q = {k: v[-1] for k, v in parse_qs(u.query, keep_blank_values=True).items()}
        kind = {"/api/v1/nodes": "nodes", "/api/v1/pods": "pods"}.get(u.path)
        if not self.gate():
            return
        parts = u.path.strip("/").split("/")
        # Karpenter's NodeOverlays, as the API server serves a CRD (--nodeoverlays)
        if ARGS.nodeoverlays and u.path == "/apis/karpenter.sh/v1alpha1":
            self.send_obj(200, "OK", {
                "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "karpenter.sh/v1alpha1",
                "resources": [{"name": "nodeoverlays", "singularName": "nodeoverlay", "namespaced": False,
                               "kind": "NodeOverlay", "shortNames": ["overlays"],
                               "verbs": ["delete", "deletecollection", "get", "list", "patch",
                                         "create", "update", "watch"]},
                              {"name": "nodeoverlays/status", "singularName": "", "namespaced": False,
                               "kind": "NodeOverlay", "verbs": ["get", "patch", "update"]}]})
            return
        if ARGS.nodeoverlays and u.path == "/apis/karpenter.sh/v1alpha1/nodeoverlays":
            kind = "nodeoverlays"
        # Dynamic Resource Allocation, as a 1.34+ API server serves it (--dra)
        if ARGS.dra and u.path == "/apis/" + DRA_GV:
            self.send_obj(200, "OK", {
                "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": DRA_GV,
                "resources": [{"name": r, "singularName": k.lower(), "namespaced": ns, "kind": k,
                               "verbs": ["create", "delete", "deletecollection", "get", "list",
                                         "patch", "update", "watch"]}
                              for r, (k, ns) in sorted(DRA_KINDS.items())]})
            return
        if ARGS.dra and len(parts) == 4 and parts[:3] == ["apis", "resource.k8s.io", "v1"] \
                and parts[3] in DRA_KINDS:
            kind = parts[3]
        if len(parts) in (5, 6) and parts[:3] == ["api", "v1", "namespaces"] and parts[4] == "configmaps":
            if len(parts) == 6:
                with STATE.cond:
                    obj = copy.deepcopy(STATE.objs["configmaps"].get(parts[3] + "/" + parts[5]))
                if obj is None:
                    self.send_status(404, "NotFound", 'configmaps "%s" not found' % parts[5])
                else:
                    self.send_obj(200, "OK", obj)
                return
            if q.get("watch") in ("true", "1"):
                self.watch("configmaps", q, ns=parts[3])
                return
            kind = None
        if not kind:
            self.send_status(404, "NotFound", "the server could not find the requested resource")
            return
        if q.get("watch") in ("true", "1"):
            self.watch(kind, q)
        else:
            self.list(kind, q)

    def list_synthetic(self, kind, q):
        """Lists the rendered synthetic objects, then the overlay; continue = a position."""
        limit = int(q.get("limit") or 0)
        cont = q.get("continue")
        if ARGS.rv0_ignores_limit and q.get("resourceVersion") == "0" and not cont:
            limit = 0   # kube-apiserver < 1.27 answers rv=0 from its watch cache, whole
        with STATE.cond:
            STATE.stats["list"] += 1
            list_rv, pos = STATE.rv, 0
            if cont:
                tok = json.loads(base64.b64decode(cont))
                list_rv, pos = tok["rv"], tok["start"]
            rendered, keys, gone = STATE.synth[kind], STATE.synth_keys[kind], STATE.synth_gone[kind]
            # Synthetic pods carry no accelfit label and run: a label selector is judged
            # on an object without labels, the field selector passes them.
            if not labels_ok(q.get("labelSelector", ""), {"metadata": {}}):
                rendered, keys = [], []
            overlay = sorted(k for k, o in STATE.objs[kind].items()
                             if selector_ok(kind, q.get("fieldSelector", ""), o,
                                            q.get("labelSelector", "")))
            total = len(rendered) + len(overlay)
            items = []
            while pos < total and not (limit and len(items) >= limit):
                if pos < len(rendered):
                    if keys[pos] not in gone:
                        items.append(rendered[pos])
                else:
                    items.append(synthetic.dumps(STATE.objs[kind][overlay[pos - len(rendered)]]))
                pos += 1
            meta = {"resourceVersion": str(list_rv)}
            if pos < total:
                meta["continue"] = base64.b64encode(json.dumps({"rv": list_rv, "start": pos}).encode()).decode()
                meta["remainingItemCount"] = total - pos
        head = ('{"kind":"%s","apiVersion":"v1","metadata":%s,"items":[' % (
            "NodeList" if kind == "nodes" else "PodList", json.dumps(meta, separators=(",", ":")))).encode()
        self.start(200, "OK")
        buf = [head]
        size = len(head)
        for n, it in enumerate(items):
            if n:
                buf.append(b",")
            buf.append(it)
            size += len(it) + 1
            if size >= 65536:
                self.chunk(b"".join(buf))
                buf, size = [], 0
        buf.append(b"]}\n")
        self.chunk(b"".join(buf))
        self.end_chunks()

    def list(self, kind, q):
        if STATE.synth is not None:
            self.list_synthetic(kind, q)
            return
        sel = q.get("fieldSelector", "")
        labelsel = q.get("labelSelector", "")
        limit = int(q.get("limit") or 0)
        cont = q.get("continue")
        with STATE.cond:
            STATE.stats["list"] += 1
            if cont:
                try:
                    tok = json.loads(base64.b64decode(cont))
                except ValueError:
                    self.send_status(400, "BadRequest", "invalid continue token")
                    return
                if STATE.expire_continue > 0:
                    STATE.expire_continue -= 1
                    STATE.stats["continue_expired"] += 1
                    tok["rv"] = -1
                if tok["rv"] < STATE.history_start:
                    self.send_status(410, "Expired", "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
                    return
                list_rv, start = tok["rv"], tok["start"]
            else:
                list_rv, start = STATE.rv, ""
            keys = sorted(k for k in STATE.objs[kind] if k > start)
            items = []
            nxt = None
            for k in keys:
                o = STATE.objs[kind][k]
                if not selector_ok(kind, sel, o, labelsel):
                    continue
                if limit and len(items) >= limit:
                    nxt = items[-1]
                    break
                items.append(o)
            meta = {"resourceVersion": str(list_rv)}
            if nxt is not None:
                meta["continue"] = base64.b64encode(json.dumps(
                    {"rv": list_rv, "start": State.key(kind, nxt)}).encode()).decode()
                meta["remainingItemCount"] = len(keys) - len(items)
            body = {"kind": {"nodes": "NodeList", "nodeoverlays": "NodeOverlayList"}.get(
                        kind, DRA_KINDS[kind][0] + "List" if kind in DRA_KINDS else "PodList"),
                    "apiVersion": "karpenter.sh/v1alpha1" if kind == "nodeoverlays"
                    else DRA_GV if kind in DRA_KINDS else "v1",
                    "metadata": meta, "items": items}
            data = (json.dumps(body, separators=(",", ":")) + "\n").encode()
        self.start(200, "OK")
        for i in range(0, len(data), 65536):
            self.chunk(data[i:i + 65536])
        self.end_chunks()

    def event_line(self, typ, obj):
        return (json.dumps({"type": typ, "object": obj}, separators=(",", ":")) + "\n").encode()

    def watch(self, kind, q, ns=None):
        sel = q.get("fieldSelector", "")
        labelsel = q.get("labelSelector", "")
        timeout = float(q.get("timeoutSeconds") or 1800)
        deadline = time.time() + timeout
        bookmarks = q.get("allowWatchBookmarks") == "true"
        rvs = q.get("resourceVersion", "")
        with STATE.cond:
            STATE.stats["watch"] += 1
            rv = int(rvs) if rvs not in ("", "0") else STATE.rv
            epoch, close_mid, expire = STATE.epoch, STATE.close_mid, STATE.expire
            too_old = rv < STATE.history_start
            oldest = STATE.history_start
            initial = []
            if kind == "configmaps" and rvs in ("", "0"):
                # as the API server does without a resourceVersion: the objects as they are
                initial = [o for k, o in sorted(STATE.objs[kind].items())
                           if k.startswith(ns + "/") and selector_ok(kind, sel, o, labelsel)]
        self.start(200, "OK")
        for obj in initial:
            self.chunk(self.event_line("ADDED", obj))
        if too_old:
            self.chunk(self.event_line("ERROR", status_body(
                410, "Expired", "too old resource version: %d (%d)" % (rv, oldest))))
            self.end_chunks()
            return
        last_bookmark = time.time()
        try:
            while True:
                out = []
                with STATE.cond:
                    if STATE.epoch != epoch:
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if STATE.close_mid != close_mid:
                        pending = [h for h in STATE.history if h[0] > rv and h[1] == kind]
                        obj = pending[0][3] if pending else STATE.node_tmpl
                        line = self.event_line("MODIFIED", obj)
                        self.chunk(line[: len(line) // 2])
                        self.close_connection = True
                        self.connection.shutdown(socket.SHUT_RDWR)
                        return
                    if STATE.expire != expire:
                        out = None
                    elif time.time() < STATE.stall_until:
                        pass
                    else:
                        if rv < STATE.history_start:
                            out = None
                        first = bisect.bisect_right(STATE.history, rv, key=lambda h: h[0])
                        for (hrv, hkind, typ, obj, old) in STATE.history[first:]:
                            if out is None:
                                break
                            if hrv <= rv or hkind != kind:
                                continue
                            if ns is not None and obj["metadata"].get("namespace") != ns:
                                continue
                            was = selector_ok(kind, sel, old, labelsel)
                            now = selector_ok(kind, sel, obj, labelsel)
                            if typ == "DELETED":
                                if was:
                                    out.append(("DELETED", obj))
                            elif was and now and old is not None:
                                out.append(("MODIFIED", obj))
                            elif now:
                                out.append(("ADDED", obj))
                            elif was and old is not None:
                                # as the API server's watch cache does: the object as it
                                # last matched, at the event's resourceVersion
                                gone = copy.deepcopy(old)
                                gone["metadata"]["resourceVersion"] = str(hrv)
                                out.append(("DELETED", gone))
                        if out is not None and STATE.history and STATE.history[-1][0] > rv:
                            rv = max(rv, STATE.history[-1][0])
                        if out == [] and bookmarks and time.time() - last_bookmark >= ARGS.bookmark_interval:
                            bm = copy.deepcopy(STATE.node_tmpl if kind == "nodes" else STATE.pod_tmpl)
                            bm = {"kind": bm["kind"] if "kind" in bm else ("Node" if kind == "nodes" else "Pod"),
                                  "apiVersion": "v1",
                                  "metadata": {"resourceVersion": str(STATE.rv), "creationTimestamp": None},
                                  "spec": {} if kind == "nodes" else {"containers": None}, "status": {}}
                            if kind == "nodeoverlays":
                                bm = {"kind": "NodeOverlay", "apiVersion": "karpenter.sh/v1alpha1",
                                      "metadata": {"resourceVersion": str(STATE.rv),
                                                   "creationTimestamp": None}}
                            if kind in DRA_KINDS:
                                bm = {"kind": DRA_KINDS[kind][0], "apiVersion": DRA_GV,
                                      "metadata": {"resourceVersion": str(STATE.rv),
                                                   "creationTimestamp": None}}
                            if kind == "configmaps":
                                bm = {"kind": "ConfigMap", "apiVersion": "v1",
                                      "metadata": {"resourceVersion": str(STATE.rv),
                                                   "creationTimestamp": None}}
                            rv = max(rv, STATE.rv)
                            out.append(("BOOKMARK", bm))
                            last_bookmark = time.time()
                    if out == []:
                        STATE.cond.wait(0.2)
                if out is None:
                    self.chunk(self.event_line("ERROR", status_body(
                        410, "Expired", "too old resource version: %d (%d)" % (rv, STATE.history_start))))
                    self.end_chunks()
                    return
                if STATE.fragment and out:
                    # objects span chunks and chunks hold several objects
                    data = b"".join(self.event_line(t, o) for t, o in out)
                    i = 0
                    while i < len(data):
                        n = random.randint(1, 300)
                        self.chunk(data[i:i + n])
                        i += n
                else:
                    for typ, obj in out:
                        self.chunk(self.event_line(typ, obj))
                if time.time() >= deadline:
                    self.end_chunks()
                    return
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, OSError):
            self.close_connection = True
            return


class AdminHandler(fake_server.AdminHandler):
    def do_GET(self):
        self.do_POST()

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        a = json.loads(self.rfile.read(n) or b"{}") if n else {}
        cmd = self.path.strip("/")
        s = STATE
        with s.cond:
            if cmd == "add_node":
                s._put("nodes", s.make_node(a))
            elif cmd == "modify_node":
                s._put("nodes", s.make_node(a, s.get("nodes", a["name"])))
            elif cmd == "delete_node":
                s._put("nodes", s.get("nodes", a["name"]), delete=True)
            elif cmd in ("add_pod", "modify_pod"):
                s._put("pods", s.make_pod(a))
            elif cmd == "delete_pod":
                s._put("pods", s.get("pods", a.get("ns", "default") + "/" + a["name"]), delete=True)
            elif cmd == "churn":
                running = s.churn_rate > 0
                s.churn_rate = float(a.get("rate", 0))
                if s.churn_rate > 0 and not running and s.synth is not None:
                    threading.Thread(target=churn_loop, daemon=True).start()
            elif cmd == "close_watches":
                s.close_mid += 1
            elif cmd == "expire_watches":
                s.expire += 1
            elif cmd == "slow_configmaps":
                s.slow_cm_seconds = float(a.get("seconds", 1))
                s.slow_cm_count = int(a.get("count", 1))
            elif cmd == "fail":
                s.fail_status, s.fail_count = int(a.get("status", 500)), int(a.get("count", 1))
            elif cmd == "fragment":
                s.fragment = bool(a.get("on", True))
            elif cmd == "expire_continue":
                s.expire_continue = int(a.get("count", 1))
            elif cmd == "stall":
                s.stall_until = time.time() + float(a.get("seconds", 5))
            elif cmd == "token":
                s.token = a["token"]
            elif cmd == "restart":
                s.epoch += 1
                s.rv += 1000
                s.history = []
                s.history_start = s.rv
            elif cmd == "compact":
                s.history = []
                s.history_start = s.rv
            elif cmd == "dump":
                self.reply(s.dump())
                return
            elif cmd == "configmap":
                self.reply(s.objs["configmaps"].get(a.get("ns", "default") + "/" + a["name"]) or {})
                return
            elif cmd == "put_configmap":
                md = a["object"]["metadata"]
                md.pop("resourceVersion", None)
                create = md.get("namespace", "default") + "/" + md["name"] not in s.objs["configmaps"]
                s.cm_put(md.get("namespace", "default"), md["name"], a["object"], create)
            elif cmd == "put_nodeoverlay":
                obj = a["object"]
                obj.setdefault("apiVersion", "karpenter.sh/v1alpha1")
                obj.setdefault("kind", "NodeOverlay")
                s._put("nodeoverlays", obj)
            elif cmd == "delete_nodeoverlay":
                if a["name"] in s.objs["nodeoverlays"]:
                    s._put("nodeoverlays", s.objs["nodeoverlays"][a["name"]], delete=True)
            elif cmd == "put_dra":
                obj = a["object"]
                obj.setdefault("apiVersion", DRA_GV)
                kind = [r for r, (k, _) in DRA_KINDS.items() if k == obj["kind"]][0]
                s._put(kind, obj)
            elif cmd == "delete_dra":
                kind = [r for r, (k, _) in DRA_KINDS.items() if k == a["kind"]][0]
                key = (a["ns"] + "/" if DRA_KINDS[kind][1] else "") + a["name"]
                if key in s.objs[kind]:
                    s._put(kind, s.objs[kind][key], delete=True)
            elif cmd == "delete_configmap":
                key = a.get("ns", "default") + "/" + a["name"]
                if key in s.objs["configmaps"]:
                    s._put("configmaps", s.objs["configmaps"][key], delete=True)
            elif cmd == "events":
                self.reply(s.events)
                return
            elif cmd == "stats":
                self.reply(s.stats)
                return
            elif cmd == "requests":
                self.reply(s.requests)
                return
            else:
                self.reply({"error": "unknown command " + cmd}, 404)
                return
            s.cond.notify_all()
            rv = s.rv
        self.reply({"ok": True, "rv": str(rv)})


def churn_loop():
    """Pod events at STATE.churn_rate per second until the rate is set to 0."""
    n = 0
    t = time.time()
    while True:
        with STATE.cond:
            rate = STATE.churn_rate
            if rate <= 0:
                return
            STATE.churn_step(n)
            STATE.cond.notify_all()
        n += 1
        t += 1.0 / rate
        time.sleep(max(0.0, t - time.time()))


# API servers behind a proxy (Rancher, some gateways) live under a path; clients keep it as
# a prefix of every request. The fake server answers both with and without this one.
PROXY_PREFIX = "/k8s/clusters/c-1"


def strip_proxy_prefix(path):
    prefixed = path.startswith(PROXY_PREFIX + "/")
    with STATE.cond:
        STATE.stats["prefixed" if prefixed else "unprefixed"] += 1
    return path[len(PROXY_PREFIX):] if prefixed else path


def main():
    global STATE, ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--admin-port", type=int, default=0)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("--token", default="test-token")
    ap.add_argument("--bookmark-interval", type=float, default=1.0)
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--nodeoverlays", action="store_true",
                    help="serve karpenter.sh/v1alpha1 NodeOverlays (as with Karpenter's CRD)")
    ap.add_argument("--dra", action="store_true",
                    help="serve resource.k8s.io/v1 (ResourceSlices, ResourceClaims, templates, "
                         "DeviceClasses), as a Kubernetes 1.34+ API server does")
    ap.add_argument("--synthetic-nodes", type=int, default=0)
    ap.add_argument("--synthetic-pods", type=int, default=0)
    ap.add_argument("--rv0-ignores-limit", action="store_true",
                    help="(synthetic) answer resourceVersion=0 lists whole, as a v1.26 "
                         "kube-apiserver's watch cache does")
    ARGS = ap.parse_args()
    STATE = State(ARGS.token)

    fake_server.serve(Handler, AdminHandler, ARGS.cert, ARGS.key, ARGS.port, ARGS.admin_port)

if __name__ == "__main__":
    main()
