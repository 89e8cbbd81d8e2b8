#!/usr/bin/env bash
# One entry point for people and CI.
#   ./run.sh          install dependencies, build, and run the demo: a few
#                     recommendations, then the extender serving the embedded
#                     demo cluster on 127.0.0.1:8888
#   ./run.sh test     install dependencies, build, and run every test suite,
#                     then again under AddressSanitizer + UndefinedBehaviorSanitizer
#   ./run.sh bench    build optimized and run the benchmarks
set -euo pipefail
cd "$(dirname "$0")"

jobs=$(nproc 2>/dev/null || echo 2)
werror=OFF
[ "${CI:-}" = "true" ] && werror=ON

build() {   # build DIR [cmake options...]; $target limits what is built
    local dir=$1; shift
    cmake -S . -B "$dir" -DAF_WERROR="$werror" "$@" >/dev/null
    cmake --build "$dir" -j"$jobs" ${target:+--target "$target"} >/dev/null
}

./scripts/install-deps.sh

case "${1:-demo}" in
demo)
    target=accelfit build build
    echo "== accelfit recommend --workload training --model-params 70B --objective cost --framework pytorch --neuron-ready"
    ./build/accelfit recommend --workload training --model-params 70B --objective cost \
        --framework pytorch --neuron-ready
    echo
    echo "== accelfit recommend --workload inference --model-params 7B --latency-slo-ms 8 --framework pytorch"
    ./build/accelfit recommend --workload inference --model-params 7B --latency-slo-ms 8 --framework pytorch
    echo
    echo "== accelfit serve --demo --listen 127.0.0.1:8888   (Ctrl-C to stop)"
    echo "   try: curl -s -XPOST 127.0.0.1:8888/filter -d @tests/fixtures/kube-scheduler/filter-nodecache-true.json"
    exec ./build/accelfit serve --demo --listen 127.0.0.1:8888
    ;;
test)
    build build
    (cd build && ctest --output-on-failure -j"$jobs")
    build build-san -DAF_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
    (cd build-san && ctest --output-on-failure -j"$jobs")
    ;;
bench)
    build build-bench -DCMAKE_BUILD_TYPE=Release -DAF_TESTS=OFF
    for b in build-bench/bench_*; do [ -x "$b" ] && "$b"; done
    ;;
*)
    echo "usage: ./run.sh [demo|test|bench]" >&2
    exit 2
    ;;
esac
