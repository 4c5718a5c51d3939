"""One fixed-rate POST run (2,000/s, 100 connections, 10 s) on a fresh `cairn serve` without
indexes, started DELAY seconds after the server: shows what the logged mode's first timed flush
(30 s after start) does to a write run that meets it (docs/bench/index/README.md).
Usage: python3 bench/serve/write_delay.py DELAY logged|durable"""
import json
import os
import sys
import tempfile
import time
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import index_peers as ip, run
delay = float(sys.argv[1]); logged = sys.argv[2] == "logged"  # durable: --flush-pages
tmp = os.path.join(tempfile.mkdtemp(prefix="write-delay-"), "bodies.txt")
with open(tmp, "w") as f:
    f.writelines(json.dumps(ip.doc(i)) + "\n" for i in range(ip.PRELOAD, 3 * ip.PRELOAD))
srv = ip.Cairn("target/release/cairn", 0, logged=logged, pages=not logged)
addr = srv.start()
try:
    time.sleep(delay)
    post = ["-m", "POST", "-H", "content-type: application/json", "-Z", tmp, f"http://{addr}/bench"]
    r = run.oha("target/tools/bin/oha", post, 100, 10, 2000)
    print(f"delay {delay} logged {logged}:", run.row("POST", 100, r), flush=True)
finally:
    srv.stop()
