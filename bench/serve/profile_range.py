#!/usr/bin/env python3
"""Profiles `cairn serve` answering issue 24's range query (docs/bench/index/README.md, "What
changed"): the harness's Cairn server with one index on /radius and 10,000 documents
(bench/serve/index_peers.py), oha at 10 connections for 6 s on core 1, `perf record -g` on the
server meanwhile. Prints oha's row; the profile is in /tmp/perf-range.data (`perf report -i
/tmp/perf-range.data --no-children --sort symbol`). Usage: profile_range.py [CONNS]
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import index_peers  # noqa: E402
import run  # noqa: E402

conns = int(sys.argv[1]) if len(sys.argv) > 1 else 10
srv = index_peers.Cairn("target/release/cairn", 1)
addr = srv.start()
urls = "/tmp/profile-range-urls.txt"
with open(urls, "w") as f:
    f.writelines(f"http://{addr}/bench?where=/radius&gte={v}&lt={v + 1}&limit=100\n"
                 for v in range(100))
try:
    perf = subprocess.Popen(["perf", "record", "-g", "-F", "999", "-p", str(srv.p.pid), "-o",
                             "/tmp/perf-range.data", "--", "sleep", "6"],
                            stderr=subprocess.DEVNULL)
    r = run.oha("target/tools/bin/oha", ["--urls-from-file", urls], conns, 6, 0)
    perf.wait()
    print(run.row("RANGE", conns, r), "load average", os.getloadavg()[0])
finally:
    srv.stop()
