#!/usr/bin/env bash
# bench/webhook.sh: pod creates through accelfit's webhook on the real kube-apiserver v1.26,
# two replicas, a rollout active (docs/rollouts.md, "One share, whichever replica answers").
#
# It starts the control plane of tests/e2e (AF_E2E_K8S, default build/k8s: ./run.sh test
# prepares it), taking the same lock as the e2e suite ($TMPDIR/accelfit-e2e.lock), and
# registers two webhooks, one per replica, each admitting half the pods (label
# bench-half=a|b, as a Service spreads the calls), over TLS with a throwaway CA. Both
# replicas share the rollout's state and claim ledger in namespace accelfit. Then it creates
# PODS pods (generateName, as a ReplicaSet does) at RATE a second, open loop, through the
# API server, and prints the create latency (POST to its answer, p50 p99 max), the sides the
# webhook gave against what one replica alone gives, and how each new unit's side was
# claimed (accelfit_rollout_claims_total: ahead = from a reserve, written = waited), and the
# webhook calls as the API server timed them (apiserver_admission_webhook_admission_duration_seconds)
# and /mutate as the replicas timed it (accelfit_request_duration_seconds), from the buckets
# of the two histograms.
#
# Usage: bench/webhook.sh [PODS [RATE [SHARE]]]   (default 1000 100 0.25)
#        ACCELFIT=path/to/accelfit (default build-bench/accelfit, else build/accelfit)
# Stops the control plane at the end.
set -euo pipefail
cd "$(dirname "$0")/.."

pods=${1:-1000}
rate=${2:-100}
share=${3:-0.25}
k8s=${AF_E2E_K8S:-$PWD/build/k8s}
acc=${ACCELFIT:-}
[ -n "$acc" ] || { [ -x build-bench/accelfit ] && acc=build-bench/accelfit || acc=build/accelfit; }
acc=$(cd "$(dirname "$acc")" && pwd)/$(basename "$acc")

if [ ! -x "$k8s/bin/kube-apiserver" ] || [ ! -x "$k8s/up.sh" ] || ! command -v etcd >/dev/null ||
   ! command -v python3 >/dev/null; then
    echo "== bench/webhook.sh: skipped: no control plane in $k8s (./run.sh test prepares it" \
         "from \$KUBE_BIN_DIR or the project's bundle), no etcd or no python3"
    exit 0
fi

lock=${TMPDIR:-/tmp}/accelfit-e2e.lock
exec 9>>"$lock"
if ! flock -n 9; then
    echo "bench/webhook.sh: another run holds $lock; waiting for it"
    flock 9
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/af-bench-webhook-XXXXXX")
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    "$k8s/down.sh" --clean >>"$work/cp.log" 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

kc=$k8s/admin.kubeconfig
kubectl() { "$k8s/bin/kubectl" --kubeconfig "$kc" "$@"; }

"$k8s/down.sh" --clean >"$work/cp.log" 2>&1 || true
"$k8s/up.sh" >>"$work/cp.log" 2>&1
"$k8s/nodes.sh" create >>"$work/cp.log" 2>&1
kubectl create namespace accelfit >/dev/null
kubectl create namespace ml >/dev/null

# the serving certificate the webhook's caBundle trusts
openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=bench-ca -keyout "$work/ca.key" \
    -out "$work/ca.crt" 2>/dev/null
openssl req -newkey rsa:2048 -nodes -subj /CN=accelfit -keyout "$work/tls.key" \
    -out "$work/tls.csr" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' >"$work/san.ext"
openssl x509 -req -in "$work/tls.csr" -CA "$work/ca.crt" -CAkey "$work/ca.key" \
    -CAcreateserial -days 1 -extfile "$work/san.ext" -out "$work/tls.crt" 2>/dev/null

# the shipped policy with one rollout appended
{ cat policies/default.yaml; cat <<POLICY
rollouts:
  - name: bench
    selector: {namespace: ml}
    source: [nvidia-a10g]
    target: [nvidia-a100]
    share: $share
POLICY
} >"$work/policy.yaml"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ports=()
for half in a b; do
    port=$(free_port)
    ports+=("$port")
    "$acc" serve --kubeconfig "$kc" --state-namespace accelfit --policy "$work/policy.yaml" \
        --listen "127.0.0.1:$port" --tls-cert-file "$work/tls.crt" \
        --tls-private-key-file "$work/tls.key" --log-level warn >"$work/accelfit-$half.log" 2>&1 &
    pids+=("$!")
done
for port in "${ports[@]}"; do
    for _ in $(seq 300); do
        curl -skf "https://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
        sleep 0.1
    done
    curl -skf "https://127.0.0.1:$port/readyz" >/dev/null ||
        { echo "bench/webhook.sh: a replica never became ready"; cat "$work"/accelfit-*.log; exit 1; }
done

ca=$(base64 -w0 "$work/ca.crt")
webhook() {   # half port
    cat <<HOOK
  - name: $1.bench.accelfit.io
    clientConfig: {url: "https://127.0.0.1:$2/mutate", caBundle: "$ca"}
    rules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
    objectSelector: {matchLabels: {accelfit.io/managed: "true", bench-half: "$1"}}
    failurePolicy: Fail
    sideEffects: None
    admissionReviewVersions: [v1]
    timeoutSeconds: 5
HOOK
}
{
    printf 'apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingWebhookConfiguration\n'
    printf 'metadata: {name: accelfit-bench}\nwebhooks:\n'
    webhook a "${ports[0]}"
    webhook b "${ports[1]}"
} | kubectl apply -f - >/dev/null

python3 - "$k8s" "$pods" "$rate" "$share" "${ports[@]}" "${pids[@]}" <<'PY'
import http.client, json, os, queue, ssl, sys, threading, time, urllib.request

k8s, pods, rate, share = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
ports, pids = sys.argv[5:7], sys.argv[7:9]
def cpu_s():
    """the replicas' CPU time (user + system), in seconds"""
    total = 0.0
    for pid in pids:
        f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
        total += (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")
    return total
token = open(f"{k8s}/run/admin.token").read().strip()
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE

def pod(i, prefix, managed=True):
    labels = {"accelfit.io/managed": "true", "bench-half": "ab"[i % 2]} if managed else {}
    return json.dumps({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": f"{prefix}-", "namespace": "ml", "labels": labels},
        "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9",
                 "resources": {"requests": {"cpu": "10m"}}}]}})

def create(conn, body):
    t0 = time.perf_counter()
    conn.request("POST", "/api/v1/namespaces/ml/pods", body,
                 {"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    r = conn.getresponse()
    data = r.read()
    ms = (time.perf_counter() - t0) * 1e3
    side, warn = None, r.getheader("Warning") or ""
    if r.status == 201:
        side = json.loads(data)["metadata"].get("annotations", {}).get("accelfit.io/rollout-side")
    why = data[:400].decode(errors="replace") if r.status != 201 else warn
    return r.status, side, "drift" in warn, ms, why

def connect():
    return http.client.HTTPSConnection("127.0.0.1", 6443, context=ctx, timeout=30)

# the webhooks are in force once a pod comes back annotated
c = connect()
for _ in range(200):
    st, side, _, _, _ = create(c, pod(0, "warmup"))
    if side:
        break
    time.sleep(0.1)
else:
    sys.exit("bench/webhook.sh: the webhooks never answered")
c.close()
# the warm-up pods count for the share like any: one replica alone starts from them too
for half in (0, 1):
    c = connect()
    create(c, pod(half, "warmup"))
    c.close()
warm = json.loads(urllib.request.urlopen(urllib.request.Request(
    "https://127.0.0.1:6443/api/v1/namespaces/ml/pods",
    headers={"Authorization": f"Bearer {token}"}), context=ctx).read())["items"]
time.sleep(2)   # the replicas' caches see the warm-up pods

def load(prefix, managed):
    """pods creates at rate, open loop: one every 1/rate s, whatever the answers take"""
    jobs, results, lock = queue.Queue(), [], threading.Lock()
    def worker():
        conn = connect()
        while True:
            j = jobs.get()
            if j is None:
                return
            r = create(conn, pod(j, prefix, managed))
            with lock:
                results.append(r)
    threads = [threading.Thread(target=worker) for _ in range(16)]
    for t in threads:
        t.start()
    start = time.perf_counter()
    for i in range(pods):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        jobs.put(i)
    for _ in threads:
        jobs.put(None)
    for t in threads:
        t.join()
    return results, time.perf_counter() - start

def pct(ms, p):
    return ms[min(len(ms) - 1, int(round(p / 100 * (len(ms) - 1))))]

def histogram(url, name, keep, headers=None):
    """{le: cumulative count} of histogram `name`, summed over the series whose labels hold
    every string of `keep`"""
    text = urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}),
                                  context=ctx).read().decode()
    out = {}
    for line in text.splitlines():
        if line.startswith(name + "_bucket{") and all(k in line for k in keep):
            le = line.split('le="')[1].split('"')[0]
            le = float("inf") if le == "+Inf" else float(le)
            out[le] = out.get(le, 0) + float(line.split()[-1])
    return out

def webhook_times():
    """the webhook calls as the API server timed them (TLS, network, accelfit), and the
    /mutate answers as the replicas timed them (request read to answer written)"""
    api = histogram("https://127.0.0.1:6443/metrics",
                    "apiserver_admission_webhook_admission_duration_seconds",
                    ['bench.accelfit.io"', 'type="admit"'], {"Authorization": f"Bearer {token}"})
    own = {}
    for port in ports:
        for le, n in histogram(f"https://127.0.0.1:{port}/metrics",
                               "accelfit_request_duration_seconds", ['verb="mutate"']).items():
            own[le] = own.get(le, 0) + n
    return api, own

def bound(after, before, p):
    """the upper bound of the bucket that holds percentile p of what was added"""
    total = after.get(float("inf"), 0) - before.get(float("inf"), 0)
    for le in sorted(after):
        if total and after[le] - before.get(le, 0) >= p / 100 * total:
            return le * 1e3
    return float("nan")

# the floor: the same creates of pods no webhook is called for
results, elapsed = load("floor", False)
ms = sorted(r[3] for r in results)
print(f"webhook: floor, {pods} creates at {rate:g}/s of pods no webhook is called for: "
      f"p50 {pct(ms, 50):.2f} ms, p99 {pct(ms, 99):.2f} ms, max {ms[-1]:.2f} ms")
cpu0 = cpu_s()
times0 = webhook_times()
results, elapsed = load("bench", True)
cpu = cpu_s() - cpu0
times1 = webhook_times()
ms = sorted(r[3] for r in results)
failed = sum(1 for r in results if r[0] != 201 or r[1] not in ("target", "source"))
for r in [r for r in results if r[0] != 201 or r[1] not in ("target", "source")][:3]:
    print(f"webhook: a create that failed or has no side: HTTP {r[0]}, side {r[1]}: {r[4]}")
target = sum(1 for r in results if r[1] == "target")
local = sum(1 for r in results if r[2])
before_t = sum(1 for p in warm if p["metadata"].get("annotations", {}).get("accelfit.io/rollout-side") == "target")
n0 = len(warm)
t = before_t   # one replica alone, from the same warm-up pods
for _ in range(pods):
    if min(max(share, 0), 1) * (n0 + 1) > t + 0.5 + 1e-9:
        t += 1
    n0 += 1
alone = t - before_t
counts = {}
for port in ports:
    text = urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", context=ctx).read().decode()
    for line in text.splitlines():
        if line.startswith("accelfit_rollout_claims_total{"):
            k = line.split('"')[1]
            counts[k] = counts.get(k, 0) + int(float(line.split()[-1]))
        elif line.startswith("accelfit_rollout_claim_conflicts_total "):
            counts["conflicts"] = counts.get("conflicts", 0) + int(float(line.split()[-1]))
print(f"webhook: {pods} pod creates at {rate:g}/s ({pods / elapsed:.1f}/s achieved) through "
      f"the real kube-apiserver, two replicas, share {share:g}: create latency p50 {pct(ms, 50):.2f} ms, "
      f"p99 {pct(ms, 99):.2f} ms, max {ms[-1]:.2f} ms; {target} target, {pods - target - failed} "
      f"source (one replica alone: {alone} target); {failed} failed, {local} decided without "
      f"the ledger; claims: {counts.get('ahead', 0)} ahead (a reserve), "
      f"{counts.get('written', 0)} waited for a write, {counts.get('local', 0)} local; "
      f"{counts.get('conflicts', 0)} ledger writes refused (409); the replicas' CPU "
      f"{cpu * 1e3 / pods:.2f} ms a create")
print(f"webhook: the calls as the API server timed them (its histogram's buckets): p50 <= "
      f"{bound(times1[0], times0[0], 50):g} ms, p99 <= {bound(times1[0], times0[0], 99):g} ms; "
      f"/mutate as the replicas timed it: p50 <= {bound(times1[1], times0[1], 50):g} ms, "
      f"p99 <= {bound(times1[1], times0[1], 99):g} ms")
PY
