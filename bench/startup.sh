#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# How long `accelfit serve --demo` takes from exec to its first 200 on /readyz (the embedded
# catalog and policy loaded, the demo cluster decoded, the listener up): best and median of
# RUNS starts, in milliseconds. Usage: bench/startup.sh ACCELFIT [RUNS] [PORT]
set -eu
bin=${1:?usage: bench/startup.sh ACCELFIT [RUNS] [PORT]}
runs=${2:-20}
port=${3:-18923}
python3 - "$bin" "$runs" "$port" <<'PY'
import socket, statistics, subprocess, sys, time
binary, runs, port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

def ready():
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
            s.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            return s.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False

times = []
for _ in range(runs):
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "serve", "--demo", "--listen", "127.0.0.1:%d" % port,
                          "--log-level", "error"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    while not ready():
        if p.poll() is not None:
            sys.exit("accelfit exited with %d" % p.returncode)
        time.sleep(0.0005)
    times.append((time.perf_counter() - t0) * 1000)
    p.terminate()
    p.wait()
print("serve --demo to first /readyz 200: best %.1f ms, median %.1f ms (%d runs)"
      % (min(times), statistics.median(times), runs))
PY
