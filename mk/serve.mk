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
