# cairn-server (`cairn serve`, docs/server.md): its HTTP tests against a server on a loopback
# port, the SIGKILL-under-load test (a server process killed and restarted three times) and
# the request decoder's replay of hostile inputs. About 10 s once built.
COMPAT_TESTS += test-serve
.PHONY: test-serve

test-serve:
	$(CARGO) test -p cairn-server --release

# Load test (not part of `make test`): oha drives POST and GET of the load test's document at
# 1, 100 and 1,000 connections against `cairn serve`, server and oha pinned to different
# cores; results in docs/bench/serve/durable (lazy/ with --lazy); docs/bench/serve/README.md
# says how to read them. oha is installed from crates.io into target/tools the first time.
# BENCH_SERVE_ARGS: e.g. "--lazy", "--seconds 30", "--conns 1,100,1000,4000", "--rate 20000"
# (fixed rate, latency-corrected).
OHA ?= target/tools/bin/oha
BENCH_SERVE_ARGS ?=
.PHONY: bench-serve
bench-serve:
	$(CARGO) build --release -p cairn-cli
	@test -x $(OHA) || $(CARGO) install oha --locked --root target/tools
	python3 bench/serve/run.py --cairn target/release/cairn --oha $(OHA) \
	  --out docs/bench/serve $(BENCH_SERVE_ARGS)

# The issue's peers in one run (docs/bench/serve/README.md, "Peers"): `cairn serve` (group
# commit), `cairn serve --no-group`, Flask + py-lmdb under gunicorn (venv target/bench-serve-venv,
# from PyPI) and PostgreSQL with a JSONB table behind bench/serve-pg (a throwaway cluster under
# target/bench-serve-pg; Debian's postgresql is installed when missing). POST, GET and a 90/10
# mix at each connection count, BENCH_PEERS_REPEAT rounds; results.md and peers.png from
# bench/serve/report.py.
# Installs the Debian packages $(1) with apt-get (through sudo unless root), updating the
# package lists and trying again if the first try fails.
define apt_install
if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
  $$SUDO apt-get install -y $(1) || { $$SUDO apt-get update && $$SUDO apt-get install -y $(1); }
endef
# PostgreSQL for the peers (Debian's package, installed when missing).
define need_postgres
@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
  $(call apt_install,postgresql); }
endef

BENCH_PEERS ?= cairn,cairn-nogroup,flask,postgres
BENCH_PEERS_ARGS ?= --seconds 5 --conns 1,100,1000,4000 --repeat 3 --mix
SERVE_VENV := target/bench-serve-venv
# What the peer runs share: the server, the PostgreSQL peer's HTTP layer, oha (crates.io) and
# the Flask peer's venv (it also holds matplotlib for report.py's plot).
.PHONY: serve-peer-tools
serve-peer-tools:
	$(CARGO) build --release -p cairn-cli
	$(CARGO) build --release -p cairn-bench-serve-pg
	@test -x $(OHA) || $(CARGO) install oha --locked --root target/tools
	@test -x $(SERVE_VENV)/bin/gunicorn || { python3 -m venv $(SERVE_VENV) && \
	  $(SERVE_VENV)/bin/pip install -q flask gunicorn lmdb matplotlib; }
.PHONY: bench-serve-peers
bench-serve-peers: serve-peer-tools
	$(need_postgres)
	rm -rf docs/bench/serve/peers
	python3 bench/serve/run.py --cairn target/release/cairn --oha $(OHA) \
	  --serve-pg target/release/cairn-bench-serve-pg --out docs/bench/serve \
	  --peers $(BENCH_PEERS) $(BENCH_PEERS_ARGS)
	$(SERVE_VENV)/bin/python bench/serve/report.py docs/bench/serve/peers

# Closed-loop GETs driven by wrk (Debian's package, installed when missing) instead of oha, the
# POSTs still by oha: Cairn and PostgreSQL (docs/bench/serve/README.md, "The load generator's
# ceiling"). At 1,000 connections oha spends its whole core near 32,000 GETs/s, so a faster
# server cannot show there; wrk's Lua script (bench/serve/wrk_get.lua) asks for the same random
# preloaded ids and reports in oha's JSON shape. Results in docs/bench/serve/reads-wrk.
# --paired: both servers up at once, each run of one right beside the same run of the other
# (the machine's speed drifts over minutes; docs/bench/serve/README.md, "Session 18"), 6 rounds.
BENCH_READS_ARGS ?= --seconds 5 --conns 100,1000,4000 --repeat 6 --paired
define need_wrk
@command -v wrk >/dev/null || { $(call apt_install,wrk); }
endef
.PHONY: bench-serve-reads
bench-serve-reads: serve-peer-tools
	$(need_wrk)
	$(need_postgres)
	rm -rf docs/bench/serve/reads-wrk
	python3 bench/serve/run.py --cairn target/release/cairn --oha $(OHA) \
	  --serve-pg target/release/cairn-bench-serve-pg --out docs/bench/serve/reads-wrk \
	  --peers cairn,postgres --get-generator wrk $(BENCH_READS_ARGS)
	$(SERVE_VENV)/bin/python bench/serve/report.py docs/bench/serve/reads-wrk/peers

# Latency at a fixed rate (issue 23's read p99 at 4,000 connections; not part of `make test`;
# docs/bench/serve/README.md "Fixed rate"): Cairn and PostgreSQL, GETs offered at fixed rates
# over 4,000 connections, latency-corrected, 30 s a run; results in
# docs/bench/serve/fixed-rate. BENCH_RATE_ARGS: e.g. "--rates 5000,10000 --repeat 1",
# "--kinds get,post". About 4 minutes a round.
BENCH_RATE_ARGS ?=
.PHONY: bench-serve-rate
bench-serve-rate:
	$(CARGO) build --release -p cairn-cli
	$(CARGO) build --release -p cairn-bench-serve-pg
	@test -x $(OHA) || $(CARGO) install oha --locked --root target/tools
	$(need_postgres)
	rm -rf docs/bench/serve/fixed-rate
	python3 bench/serve/fixed_rate.py --cairn target/release/cairn --oha $(OHA) \
	  --serve-pg target/release/cairn-bench-serve-pg --out docs/bench/serve/fixed-rate \
	  $(BENCH_RATE_ARGS)

# Issue 24 against PostgreSQL (not part of `make test`; docs/bench/index/README.md): `cairn
# serve` and PostgreSQL JSONB behind bench/serve-pg, each with 0, 1 and 4 indexes on a fresh
# store of 10,000 documents: a 100-document range query (closed loop), POSTs at a fixed rate
# (latency-corrected) for the write p99, and the SSE feed lag under those writes
# (crates/cairn-server/examples/feed_probe.rs). BENCH_INDEX_ARGS: e.g. "--repeat 1",
# "--rate 4000", "--range-conns 10,100,1000". About 2 minutes a round.
BENCH_INDEX_ARGS ?= --seconds 10 --repeat 3
.PHONY: bench-index-peers
bench-index-peers:
	$(CARGO) build --release -p cairn-cli
	$(CARGO) build --release -p cairn-bench-serve-pg
	$(CARGO) build --release -p cairn-server --example feed_probe
	@test -x $(OHA) || $(CARGO) install oha --locked --root target/tools
	$(need_postgres)
	rm -rf docs/bench/index/runs
	python3 bench/serve/index_peers.py --cairn target/release/cairn --oha $(OHA) \
	  --serve-pg target/release/cairn-bench-serve-pg --probe target/release/examples/feed_probe \
	  --out docs/bench/index/runs $(BENCH_INDEX_ARGS)
	python3 bench/serve/index_report.py docs/bench/index/runs
