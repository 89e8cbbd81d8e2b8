# accelfit's container image: `accelfit serve` on Debian bookworm.
#
#   docker build -t accelfit:0.1.0 .
#   docker run --rm -p 8888:8888 -p 8080:8080 accelfit:0.1.0            # the demo cluster
#
# The build stage compiles accelfit as scripts/install-deps.sh and the README describe; the
# runtime stage is bookworm-slim plus exactly the shared libraries the binary links, as Debian
# packages (tests/check_manifests.c compares this list with `ldd accelfit`). The default
# policy, the instance catalog and the demo cluster are compiled into the binary; the YAML
# files are also installed under /usr/share/accelfit for `accelfit check-policy` and as the
# starting point of your own policy. manifests/base/accelfit.yaml runs this image.
FROM debian:bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential cmake pkg-config \
        libwebsockets-dev libjansson-dev libcurl4-openssl-dev libyaml-dev libssl-dev libexpat1-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what the accelfit target needs: sources, headers, the embedded YAML and the CMake
# scripts; tests, benchmarks and docs are not needed.
COPY CMakeLists.txt ./
COPY cmake/ cmake/
COPY include/ include/
COPY src/ src/
COPY policies/ policies/
COPY manifests/demo-cluster.yaml manifests/demo-cluster.yaml
RUN cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DAF_TESTS=OFF -DAF_WERROR=ON \
 && cmake --build build -j"$(nproc)" --target accelfit \
 && strip build/accelfit \
 && build/accelfit check-policy

FROM debian:bookworm-slim
# The libraries build/accelfit links (libcurl4 brings its own dependencies). No
# ca-certificates: the API server's CA comes from the service account, Prometheus's from
# --prometheus-ca-file.
RUN apt-get update \
 && apt-get install -y --no-install-recommends libcurl4 libexpat1 libjansson4 libssl3 libwebsockets17 \
        libyaml-0-2 \
 && rm -rf /var/lib/apt/lists/*
# A fixed non-root user; manifests/base/accelfit.yaml runs as the same uid with
# runAsNonRoot, a read-only root filesystem and no privilege escalation (accelfit writes no
# files).
RUN groupadd --system --gid 10001 accelfit \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin accelfit
COPY --from=build /src/build/accelfit /usr/local/bin/accelfit
COPY --from=build /src/policies/ /usr/share/accelfit/policies/
USER 10001:10001
# 8888: the extender verbs, /explain, /mutate; 8080: /healthz, /readyz, /metrics.
EXPOSE 8888 8080
ENTRYPOINT ["/usr/local/bin/accelfit", "serve"]
CMD ["--demo", "--listen=:8888", "--health-listen=:8080"]
