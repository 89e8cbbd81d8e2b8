# SPDX-License-Identifier: Apache-2.0
"""Synthetic EKS-like Nodes and Pods for fake_apiserver.py --synthetic (benchmarks).

Objects are generated from their index, not stored: the server can list 5,000 Nodes and
150,000 Pods without holding them. They are shaped like what a real EKS cluster's
kube-apiserver v1.26 returns, so that decoding costs what it costs there:

  Node (~5.3 KB)  the EKS label set (~20 labels: instance type, zone, nodegroup, capacity
                  type, AMI, NVIDIA GPU-feature-discovery labels on GPU nodes), kubelet
                  annotations, managedFields of kubelet and the node controller, taints on
                  accelerator nodes, capacity/allocatable, five conditions, addresses,
                  nodeInfo and a list of cached container images
  Pod (~3.8 KB)   Deployment-owned (ownerReferences to a ReplicaSet), labels, annotations,
                  managedFields, one container with env, resources, volume mounts, the
                  projected service-account volume, tolerations, status with conditions
                  and a container status

Instance types cycle over g5.2xlarge, p4d.24xlarge, trn1.32xlarge, inf2.xlarge and
c6i.4xlarge. Pod i is bound to node i % nodes (names sort in index order).
"""
import json

TYPES = [
    # type, family, cpu, memory, allocatable cpu, allocatable memory, extended resources
    ("g5.2xlarge", "g5", "8", "32386096Ki", "7910m", "31369264Ki", {"nvidia.com/gpu": "1"}),
    ("p4d.24xlarge", "p4d", "96", "1176466116Ki", "95690m", "1157298596Ki",
     {"nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "4"}),
    ("trn1.32xlarge", "trn1", "128", "527952592Ki", "127610m", "518365904Ki",
     {"aws.amazon.com/neuron": "16", "aws.amazon.com/neuroncore": "32",
      "aws.amazon.com/neurondevice": "16", "vpc.amazonaws.com/efa": "8"}),
    ("inf2.xlarge", "inf2", "4", "16106436Ki", "3920m", "15089604Ki",
     {"aws.amazon.com/neuron": "1", "aws.amazon.com/neuroncore": "2",
      "aws.amazon.com/neurondevice": "1"}),
    ("c6i.4xlarge", "c6i", "16", "32386096Ki", "15890m", "31369264Ki", {}),
]
GPU_PRODUCT = {"g5": "NVIDIA-A10G", "p4d": "NVIDIA-A100-SXM4-40GB"}
ZONES = ["us-west-2a", "us-west-2b", "us-west-2c", "us-west-2d"]
IMAGES = [
    (["602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni@sha256:7c11c2b1e0c2d7a84cb6e0ad20d0e2dfb1c2cbd5fd10d4e1e1b4e4f3b16b1d93",
      "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni:v1.12.6-eksbuild.2"], 40574880),
    (["602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni-init@sha256:ebd04f38ad35c3e4a6e1fbb6b2a4b2d3b5f1f24ad6cd16d3e56b0a6b8e1b4c1a",
      "602401143452.dkr.ecr.us-west-2.amazonaws.com/amazon-k8s-cni-init:v1.12.6-eksbuild.2"], 6962466),
    (["602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/kube-proxy@sha256:1a5a3a5f3ee0b6d4f8c8d9c1c7d2f8b8c0d1d6a7e8b2c3d4e5f6a7b8c9d0e1f2",
      "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/kube-proxy:v1.26.4-minimal-eksbuild.1"], 26363244),
    (["nvcr.io/nvidia/k8s-device-plugin@sha256:7d7e4cb0e11dbb6c3b5ef1b2ee58e8a4c0b5b6f1a6c0a1bde52e3a1d4f1e2b3c",
      "nvcr.io/nvidia/k8s-device-plugin:v0.14.1"], 126580322),
    (["nvcr.io/nvidia/cuda@sha256:2d913b09e6be8387e1a10976933642c73c840c0b735f0bf3c28d97fc9bc422e0",
      "nvcr.io/nvidia/cuda:12.2.0-base-ubuntu22.04"], 87431265),
    (["public.ecr.aws/neuron/neuron-device-plugin@sha256:5a3b4c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b",
      "public.ecr.aws/neuron/neuron-device-plugin:2.16.18.0"], 24823611),
    (["602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-ebs-csi-driver@sha256:0e1e2f3a4b5c6d7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e",
      "602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/aws-ebs-csi-driver:v1.19.0"], 29983234),
    (["602401143452.dkr.ecr.us-west-2.amazonaws.com/eks/pause:3.5"], 298689),
]
NAMESPACES = ["default", "ml-training", "ml-inference", "batch", "data", "platform",
              "monitoring", "team-a", "team-b", "team-c"]


def node_name(i):
    return "ip-10-%d-%d-%d.us-west-2.compute.internal" % (i // 65536, (i // 256) % 256, i % 256)


def pod_key(i):
    return NAMESPACES[i % len(NAMESPACES)], "worker-%07d" % i


def _fields(keys):
    return {"f:" + k: {} for k in keys}


def node_obj(i, rv):
    t, fam, cpu, mem, acpu, amem, ext = TYPES[i % len(TYPES)]
    name = node_name(i)
    zone = ZONES[i % len(ZONES)]
    ip = "10.%d.%d.%d" % (i // 65536, (i // 256) % 256, i % 256)
    spot = i % 4 == 0
    labels = {
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/instance-type": t,
        "beta.kubernetes.io/os": "linux",
        "eks.amazonaws.com/capacityType": "SPOT" if spot else "ON_DEMAND",
        "eks.amazonaws.com/nodegroup": "ng-%s-%d" % (fam, i % 3),
        "eks.amazonaws.com/nodegroup-image": "ami-0a1b2c3d4e5f6%05d" % (i % 7),
        "eks.amazonaws.com/sourceLaunchTemplateId": "lt-0123456789abcd%03d" % (i % 3),
        "failure-domain.beta.kubernetes.io/region": "us-west-2",
        "failure-domain.beta.kubernetes.io/zone": zone,
        "k8s.io/cloud-provider-aws": "0123456789abcdef0123456789abcdef",
        "kubernetes.io/arch": "amd64", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": t, "topology.ebs.csi.aws.com/zone": zone,
        "topology.kubernetes.io/region": "us-west-2", "topology.kubernetes.io/zone": zone,
        "topology.k8s.aws/zone-id": "usw2-az%d" % (1 + i % 4),
        "vpc.amazonaws.com/has-trunk-attached": "false",
    }
    if fam in GPU_PRODUCT:
        labels.update({"nvidia.com/gpu.present": "true", "nvidia.com/gpu.product": GPU_PRODUCT[fam],
                       "nvidia.com/gpu.count": ext["nvidia.com/gpu"], "nvidia.com/cuda.driver.major": "535"})
    capacity = {"attachable-volumes-aws-ebs": "25", "cpu": cpu, "ephemeral-storage": "104845292Ki",
                "hugepages-1Gi": "0", "hugepages-2Mi": "0", "memory": mem, "pods": "110"}
    capacity.update(ext)
    alloc = dict(capacity, cpu=acpu, memory=amem, **{"ephemeral-storage": "95551679124"})
    conds = [(c, "False", r, m) for c, r, m in (
        ("MemoryPressure", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
        ("DiskPressure", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
        ("PIDPressure", "KubeletHasSufficientPID", "kubelet has sufficient PID available"))]
    conds.append(("Ready", "True", "KubeletReady", "kubelet is posting ready status"))
    taints = []
    if "nvidia.com/gpu" in ext:
        taints.append({"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"})
    if "aws.amazon.com/neuron" in ext:
        taints.append({"key": "aws.amazon.com/neuron", "value": "true", "effect": "NoSchedule"})
    return {
        "metadata": {
            "name": name, "uid": "9a1f%04x-%04x-4c1e-8a2b-%012x" % (i % 65536, (i >> 16) & 0xffff, i),
            "resourceVersion": str(rv), "creationTimestamp": "2026-11-20T08:%02d:%02dZ" % (i % 60, i % 59),
            "labels": labels,
            "annotations": {"alpha.kubernetes.io/provided-node-ip": ip,
                            "csi.volume.kubernetes.io/nodeid": '{"ebs.csi.aws.com":"i-0%015x"}' % i,
                            "node.alpha.kubernetes.io/ttl": "0",
                            "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
            "managedFields": [
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-11-20T08:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:annotations": dict({".": {}}, **_fields(
                     ["alpha.kubernetes.io/provided-node-ip", "node.alpha.kubernetes.io/ttl",
                      "volumes.kubernetes.io/controller-managed-attach-detach"])),
                     "f:labels": dict({".": {}}, **_fields(sorted(labels)))},
                     "f:spec": {"f:providerID": {}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-11-20T09:00:00Z", "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {"f:allocatable": {}, "f:capacity": {},
                                           "f:conditions": {'k:{"type":"%s"}' % c[0]: {
                                               "f:lastHeartbeatTime": {}} for c in conds},
                                           "f:images": {}}}},
            ]},
        "spec": {"providerID": "aws:///%s/i-0%015x" % (zone, i), **({"taints": taints} if taints else {})},
        "status": {
            "capacity": capacity, "allocatable": alloc,
            "conditions": [{"type": c, "status": s, "lastHeartbeatTime": "2026-11-20T09:00:00Z",
                            "lastTransitionTime": "2026-11-20T08:00:00Z", "reason": r, "message": m}
                           for c, s, r, m in conds],
            "addresses": [{"type": "InternalIP", "address": ip},
                          {"type": "InternalDNS", "address": name}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "ec2%029x" % i, "systemUUID": "ec2%05x-f972-35ab-4e50-d92664be996f" % (i % 0xfffff),
                         "bootID": "04e80d3e-f972-45ab-8e50-%012x" % i,
                         "kernelVersion": "5.10.178-162.673.amzn2.x86_64", "osImage": "Amazon Linux 2",
                         "containerRuntimeVersion": "containerd://1.6.19",
                         "kubeletVersion": "v1.26.4-eks-0a21954", "kubeProxyVersion": "v1.26.4-eks-0a21954",
                         "operatingSystem": "linux", "architecture": "amd64"},
            "images": [{"names": n, "sizeBytes": s} for n, s in IMAGES[:3]],
        },
    }


def pod_obj(i, rv, nodes, node=None):
    ns, name = pod_key(i)
    n = i % nodes if node is None else node
    fam = TYPES[n % len(TYPES)][1]
    app = "svc-%03d" % (i % 200)
    req = {"cpu": "250m", "memory": "512Mi"}
    lim = {"memory": "1Gi"}
    if fam == "p4d" and i % 2 == 0:
        req["nvidia.com/gpu"] = lim["nvidia.com/gpu"] = "1"
    tol = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 300},
           {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
            "tolerationSeconds": 300}]
    vol = "kube-api-access-%05x" % (i % 0xfffff)
    return {
        "metadata": {
            "name": name, "generateName": name[:-7], "namespace": ns,
            "uid": "5c0d%04x-%04x-4f6e-9b1a-%012x" % (i % 65536, (i >> 16) & 0xffff, i),
            "resourceVersion": str(rv), "creationTimestamp": "2026-11-21T10:%02d:%02dZ" % (i % 60, i % 59),
            "labels": {"app": app, "app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "platform",
                       "pod-template-hash": "7d9f%05x" % (i % 97), "team": "team-%d" % (i % 7)},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-11-21T10:00:00Z",
                            "prometheus.io/scrape": "true"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "%s-7d9f%05x" % (app, i % 97),
                                 "uid": "1b2c3d4e-5f60-4a1b-8c2d-%012x" % (i % 200), "controller": True,
                                 "blockOwnerDeletion": True}],
            "managedFields": [
                {"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
                 "time": "2026-11-21T10:00:00Z", "fieldsType": "FieldsV1",
                 "fieldsV1": {"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:team": {}, "f:pod-template-hash": {}},
                                             "f:ownerReferences": {".": {}, 'k:{"uid":"1b2c3d4e"}': {}}},
                              "f:spec": {"f:containers": {'k:{"name":"main"}': {".": {}, "f:env": {}, "f:image": {}, "f:name": {},
                                                                                 "f:ports": {}, "f:resources": {}}},
                                         "f:dnsPolicy": {}, "f:restartPolicy": {}, "f:schedulerName": {}}}},
                {"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": "2026-11-21T10:00:05Z",
                 "fieldsType": "FieldsV1", "subresource": "status",
                 "fieldsV1": {"f:status": {"f:conditions": {'k:{"type":"Ready"}': {".": {}, "f:status": {}}},
                                           "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {},
                                           "f:podIPs": {}, "f:startTime": {}}}},
            ]},
        "spec": {
            "volumes": [{"name": vol, "projected": {"sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}],
                "defaultMode": 420}}],
            "containers": [{"name": "main", "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/%s:v1.%d" % (app, i % 9),
                            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                            "env": [{"name": "APP", "value": app}, {"name": "LOG_LEVEL", "value": "info"},
                                    ],
                            "resources": {"limits": lim, "requests": req},
                            "volumeMounts": [{"name": vol, "readOnly": True,
                                              "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
                            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
                            "imagePullPolicy": "IfNotPresent"}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default", "nodeName": node_name(n),
            "securityContext": {}, "schedulerName": "default-scheduler", "tolerations": tol,
            "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority"},
        "status": {
            "phase": "Running",
            "conditions": [{"type": t, "status": "True", "lastProbeTime": None,
                            "lastTransitionTime": "2026-11-21T10:00:0%dZ" % k}
                           for k, t in enumerate(("Initialized", "Ready", "ContainersReady", "PodScheduled"))],
            "hostIP": "10.%d.%d.%d" % (n // 65536, (n // 256) % 256, n % 256),
            "podIP": "10.%d.%d.%d" % (100 + i // 65536, (i // 256) % 256, i % 256),
            "startTime": "2026-11-21T10:00:00Z",
            "containerStatuses": [{"name": "main", "state": {"running": {"startedAt": "2026-11-21T10:00:04Z"}},
                                   "lastState": {}, "ready": True, "restartCount": 0,
                                   "image": "123456789012.dkr.ecr.us-west-2.amazonaws.com/%s:v1.%d" % (app, i % 9),
                                   "imageID": "123456789012.dkr.ecr.us-west-2.amazonaws.com/%s@sha256:%064x" % (app, i % 9),
                                   "containerID": "containerd://%064x" % i, "started": True}],
            "qosClass": "Burstable"},
    }


def dumps(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


if __name__ == "__main__":
    print(len(dumps(node_obj(1, 1000))), len(dumps(pod_obj(1, 1000, 5000))))
