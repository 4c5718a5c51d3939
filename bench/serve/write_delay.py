"""One fixed-rate POST run (2,000/s, 100 connections) on a fresh `cairn serve`, started DELAY
seconds after the server: shows what the logged mode's timed flush of the data file (30 s
after the previous one) does to a write run that meets it (docs/bench/index/README.md). A run
of 60 s or more meets one or two of them wherever it starts.
Usage: python3 bench/serve/write_delay.py DELAY logged|durable [SECONDS [INDEXES]]
(durable: `--flush-pages`; INDEXES: 0, 1 or 4 of index_peers.py's paths)"""
import json
import os
import sys
import tempfile
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import index_peers as ip, run
delay = float(sys.argv[1]); logged = sys.argv[2] == "logged"
seconds = int(sys.argv[3]) if len(sys.argv) > 3 else 10
k = int(sys.argv[4]) if len(sys.argv) > 4 else 0
tmp = os.path.join(tempfile.mkdtemp(prefix="write-delay-"), "bodies.txt")
with open(tmp, "w") as f:
    f.writelines(json.dumps(ip.doc(i)) + "\n" for i in range(ip.PRELOAD, 10 * ip.PRELOAD))
srv = ip.Cairn("target/release/cairn", k, logged=logged, pages=not logged)
addr = srv.start()
try:
    time.sleep(delay)
    post = ["-m", "POST", "-H", "content-type: application/json", "-Z", tmp, f"http://{addr}/bench"]
    r = run.oha("target/tools/bin/oha", post, 100, seconds, 2000)
    lat = r["latencyPercentiles"]
    print(f"delay {delay} {'logged' if logged else 'durable'} {seconds}s {k} indexes:",
          run.row("POST", 100, r), f"p99.99 {lat.get('p99.99', 0) * 1000:.2f} ms", flush=True)
finally:
    srv.stop()
