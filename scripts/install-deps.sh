#!/usr/bin/env bash
# Installs what accelfit needs to build and test on Debian/Ubuntu (apt-get).
# Does nothing when everything is already there.
#   scripts/install-deps.sh        what building and testing need
#   scripts/install-deps.sh fuzz   also clang and libFuzzer, for ./run.sh fuzz
set -euo pipefail

pkgs=(build-essential cmake pkg-config libwebsockets-dev libjansson-dev libcurl4-openssl-dev
      libyaml-dev libssl-dev libexpat1-dev check python3 openssl curl ca-certificates
      prometheus    # tests/check_prom.c starts its own on a free port (live utilization)
      etcd-server etcd-client xz-utils)   # the control plane of tests/e2e (tests/e2e/controlplane)
if [ "${1:-}" = fuzz ]; then
    pkgs+=(clang libclang-rt-dev)
fi
# kubectl renders manifests/ in tests/check_manifests.c; any kubectl on PATH will do.
command -v kubectl >/dev/null || pkgs+=(kubernetes-client)

missing=()
for p in "${pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
