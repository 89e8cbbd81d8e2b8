#!/usr/bin/env bash
# One entry point for people and CI.
#   ./run.sh          install dependencies, build, and run the demo: a few
#                     recommendations, then the extender serving the embedded
#                     demo cluster (with a recorded utilization snapshot) on
#                     127.0.0.1:8888
#   ./run.sh test     install dependencies, build, and run every test suite,
#                     then again under AddressSanitizer + UndefinedBehaviorSanitizer;
#                     tests/e2e runs on a real kube-apiserver and kube-scheduler from
#                     $KUBE_BIN_DIR (or the project's bundle), and is skipped without them
#   ./run.sh bench    build optimized and run the benchmarks
#   ./run.sh fuzz [SECONDS]
#                     build the libFuzzer harnesses of tests/fuzz with clang and run
#                     each in turn, then the raw-socket fuzzer of the live server
#                     (net_fuzz), SECONDS in all (default 60); new inputs go to
#                     build-fuzz/corpus, crashes to build-fuzz/artifacts
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

# clang with libFuzzer, or a message saying why not (returns 1).
have_libfuzzer() {
    command -v clang >/dev/null || { echo "clang not found"; return 1; }
    local probe
    probe=$(mktemp -d)
    printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
    if ! clang -fsanitize=fuzzer "$probe/p.c" -o "$probe/p" 2>/dev/null; then
        rm -rf "$probe"
        echo "clang cannot link -fsanitize=fuzzer (libFuzzer missing)"
        return 1
    fi
    rm -rf "$probe"
}

# The real control plane tests/e2e runs on: kube-apiserver, kube-scheduler and kubectl in
# build/k8s/bin, from $KUBE_BIN_DIR when set, else unpacked from the project's Kubernetes
# bundle (../shared/k8s) when it is there; the scripts beside them are tests/e2e/controlplane's.
# Without binaries the e2e suite says it was skipped and how to run it.
e2e_prepare() {
    local dir=build/k8s
    mkdir -p "$dir/bin"
    if [ -n "${KUBE_BIN_DIR:-}" ]; then
        for b in kube-apiserver kube-scheduler kubectl; do
            [ -x "$KUBE_BIN_DIR/$b" ] || { echo "run.sh: KUBE_BIN_DIR has no $b" >&2; exit 2; }
            ln -sf "$(cd "$KUBE_BIN_DIR" && pwd)/$b" "$dir/bin/$b"
        done
    elif [ -x ../shared/k8s/install.sh ]; then
        ../shared/k8s/install.sh "$dir" >/dev/null
    fi
    cp tests/e2e/controlplane/*.sh "$dir/"
    export AF_E2E_K8S="$PWD/$dir"
}

fuzz_build() {   # the harnesses, instrumented, in build-fuzz
    CC=clang target=fuzz_harnesses build build-fuzz -DAF_FUZZ=ON -DAF_TESTS=OFF \
        -DCMAKE_BUILD_TYPE=Debug
}

if [ "${1:-demo}" = fuzz ]; then
    ./scripts/install-deps.sh fuzz
else
    ./scripts/install-deps.sh
fi

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
    echo "== accelfit serve --demo --metrics-file tests/fixtures/metrics/demo-snapshot.json --listen 127.0.0.1:8888   (Ctrl-C to stop)"
    echo "   try: curl -s -XPOST 127.0.0.1:8888/filter -d @tests/fixtures/kube-scheduler/filter-nodecache-true.json"
    echo "        curl -s -XPOST 127.0.0.1:8888/explain -d @tests/fixtures/metrics/prioritize-a10g-inference.json"
    echo "        (live utilization from a recorded snapshot: docs/utilization.md)"
    exec ./build/accelfit serve --demo --metrics-file tests/fixtures/metrics/demo-snapshot.json \
        --listen 127.0.0.1:8888
    ;;
test)
    e2e_prepare
    build build
    (cd build && ctest --output-on-failure -j"$jobs")
    build build-san -DAF_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
    (cd build-san && ctest --output-on-failure -j"$jobs")
    # Both runs above replayed the fuzz corpora through replay.c; with clang the
    # libFuzzer builds of the harnesses replay them too.
    if why=$(have_libfuzzer); then
        fuzz_build
        (cd build-fuzz && ctest --output-on-failure -j"$jobs" -R '^fuzz_replay_')
    else
        echo "run.sh: skipping the libFuzzer replay of tests/fuzz/corpus: $why" \
             "(the corpora were replayed without libFuzzer above)"
    fi
    ;;
fuzz)
    seconds=${2:-60}
    case "$seconds" in ''|*[!0-9]*) echo "usage: ./run.sh fuzz [SECONDS]" >&2; exit 2;; esac
    if ! why=$(have_libfuzzer); then
        echo "run.sh fuzz: cannot fuzz: $why" >&2
        exit 1
    fi
    fuzz_build
    harnesses=(args objects policy catalog cluster numbers prom trace admission nodepools aws)
    each=$(( seconds / (${#harnesses[@]} + 1) ))
    [ "$each" -ge 1 ] || each=1
    mkdir -p build-fuzz/artifacts
    for h in "${harnesses[@]}"; do
        # The first directory receives new inputs; the repository's corpus only seeds.
        mkdir -p "build-fuzz/corpus/$h"
        dict=()
        [ -f "tests/fuzz/$h.dict" ] && dict=(-dict="tests/fuzz/$h.dict")
        echo "== fuzz_$h for ${each}s"
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
        UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
            "build-fuzz/fuzz_$h" -max_total_time="$each" -print_final_stats=1 \
            -artifact_prefix="build-fuzz/artifacts/$h-" "${dict[@]}" \
            "build-fuzz/corpus/$h" "tests/fuzz/corpus/$h"
    done
    # The live server over raw sockets (tests/fuzz/net_fuzz.c), built with ASan + UBSan.
    target=net_fuzz build build-san -DAF_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
    echo "== net_fuzz for ${each}s"
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
    UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        build-san/net_fuzz build-san/accelfit . --seconds "$each" --artifacts build-fuzz/artifacts
    ;;
bench)
    build build-bench -DCMAKE_BUILD_TYPE=Release -DAF_TESTS=OFF
    for b in build-bench/bench_*; do [ -x "$b" ] && "$b"; done
    # pod creates through the webhook on the real control plane (skipped without it)
    ACCELFIT=build-bench/accelfit bench/webhook.sh
    ;;
*)
    echo "usage: ./run.sh [demo|test|bench|fuzz [SECONDS]]" >&2
    exit 2
    ;;
esac
