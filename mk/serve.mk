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
BENCH_PEERS ?= cairn,cairn-nogroup,flask,postgres
BENCH_PEERS_ARGS ?= --seconds 5 --conns 1,100,1000,4000 --repeat 3 --mix
SERVE_VENV := target/bench-serve-venv
.PHONY: bench-serve-peers
bench-serve-peers:
	$(CARGO) build --release -p cairn-cli
	$(CARGO) build --release -p cairn-bench-serve-pg
	@test -x $(OHA) || $(CARGO) install oha --locked --root target/tools
	@test -x $(SERVE_VENV)/bin/gunicorn || { python3 -m venv $(SERVE_VENV) && \
	  $(SERVE_VENV)/bin/pip install -q flask gunicorn lmdb matplotlib; }
	@command -v initdb >/dev/null || ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get install -y postgresql || { $$SUDO apt-get update && $$SUDO apt-get install -y postgresql; }; }
	rm -rf docs/bench/serve/peers
	python3 bench/serve/run.py --cairn target/release/cairn --oha $(OHA) \
	  --serve-pg target/release/cairn-bench-serve-pg --out docs/bench/serve \
	  --peers $(BENCH_PEERS) $(BENCH_PEERS_ARGS)
	$(SERVE_VENV)/bin/python bench/serve/report.py docs/bench/serve/peers
