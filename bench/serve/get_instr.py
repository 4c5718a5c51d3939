#!/usr/bin/env python3
"""Instructions the server runs per GET by id, counted by callgrind: a number that does not
move with the machine's load, for comparing builds of the server's read path
(docs/bench/serve/README.md, "The guard"). Counts user-space instructions only: the kernel's
TCP work and cache misses, which the timed runs (get_ab.py) include, are not in it.

For each `cairn` binary: `cairn serve` under `valgrind --tool=callgrind` (its map reserve
made small enough for valgrind), run.py's 10,000 preloaded documents, then N1 and then N2
GETs of random ids over 20 connections (oha, closed loop) in two separate runs; per GET =
(instructions of the N2 run - those of the N1 run) / (N2 - N1), so start-up, preload and
shutdown cancel out.

Usage: get_instr.py CAIRN [CAIRN...]   (N1, N2 = 2,000, 22,000; GET_INSTR_N="2000,22000")
GET_INSTR_CONNS (default 20) sets oha's connections. GET_INSTR_KEEP=DIR keeps each run's
callgrind output there (NAME-GETS.out) for callgrind_annotate.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import run  # noqa: E402

N1, N2 = (int(n) for n in os.environ.get("GET_INSTR_N", "2000,22000").split(","))


def instructions(cairn, gets):
    """Total instructions of a server run that served `gets` GETs."""
    d = tempfile.mkdtemp(prefix="cairn-get-instr-")
    out = os.path.join(d, "callgrind.out")
    p = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                          cairn, "serve", os.path.join(d, "env"), "--listen", "127.0.0.1:0",
                          "--map-reserve", str(8 << 30)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = p.stdout.readline()
        if "listening on " not in line:
            sys.exit(f"server did not start under valgrind: {line!r}")
        addr = line.split("listening on ", 1)[1].strip()
        run.preload(addr)
        _, get = run.requests(addr)
        conns = os.environ.get("GET_INSTR_CONNS", "20")
        r = subprocess.run([os.path.join(run.TARGET, "tools", "bin", "oha"), "--no-tui",
                            "--output-format", "json", "-n", str(gets), "-c", conns] + get,
                           capture_output=True, text=True, check=True)
        codes = json.loads(r.stdout).get("statusCodeDistribution", {})
        if codes != {"200": gets}:
            sys.exit(f"{cairn}: not every GET answered 200: {codes}")
    finally:
        p.terminate()
        p.wait()
    keep = os.environ.get("GET_INSTR_KEEP")
    if keep:
        os.makedirs(keep, exist_ok=True)
        shutil.copy(out, os.path.join(keep, f"{os.path.basename(cairn)}-{gets}.out"))
    try:
        for ln in open(out):
            if ln.startswith(("summary:", "totals:")):
                return int(ln.split()[1])
        sys.exit(f"no totals in {out}")
    finally:
        shutil.rmtree(d, ignore_errors=True)


def main():
    bins = sys.argv[1:]
    if not bins:
        sys.exit(__doc__)
    for cairn in bins:
        a, b = instructions(cairn, N1), instructions(cairn, N2)
        print(f"{cairn}: {(b - a) / (N2 - N1):,.0f} instructions a GET "
              f"({a:,} for {N1} GETs, {b:,} for {N2})", flush=True)


if __name__ == "__main__":
    main()
