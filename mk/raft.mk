# Replication (crates/cairn-raft, docs/replication.md): openraft's own storage test suite on
# Cairn's log store and state machine, and the crate's tests. About a minute at most.
COMPAT_TESTS += test-raft
.PHONY: test-raft

test-raft:
	$(CARGO) test -p cairn-raft --release

# Benchmark (not part of `make test`; docs/bench/replication/README.md): durable puts of
# 16-byte keys and 100-byte values from 1, 16 and 64 clients against 3 `cairn-cluster node`
# processes and 3 etcd 3.4 members (Debian's etcd-server, installed when missing), all on
# loopback, from one load generator (bench/replication); 3 rounds, medians, ratios.
# BENCH_REPLICATION_ARGS: e.g. "--seconds 20", "--clients 1,16,64,256", "--repeat 5",
# "--systems cairn", "--no-report"; BENCH_REPLICATION_OUT: where results.md and runs.json go.
ETCD ?= /usr/bin/etcd
BENCH_REPLICATION_OUT ?= docs/bench/replication
BENCH_REPLICATION_ARGS ?=
.PHONY: bench-replication
bench-replication:
	$(CARGO) build --release -p cairn-raft -p cairn-bench-replication --bins
	@test -x $(ETCD) || { \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get install -y etcd-server || { $$SUDO apt-get update && $$SUDO apt-get install -y etcd-server; }; }
	target/release/cairn-bench-replication --cairn target/release/cairn-cluster --etcd $(ETCD) \
	  --work target/bench-replication --out $(BENCH_REPLICATION_OUT) $(BENCH_REPLICATION_ARGS)

# A follower rebuilt from a snapshot of 1M keys (issue 25; not part of `make test`;
# docs/bench/replication/README.md "Rebuild"): bench/replication/rebuild.py loads a one-node
# cluster, then times an empty learner's catch-up by snapshot and checks its keys.
# BENCH_REBUILD_ARGS: e.g. "--keys 2000000", "--repeat 1".
BENCH_REBUILD_ARGS ?=
.PHONY: bench-replication-rebuild
bench-replication-rebuild:
	$(CARGO) build --release -p cairn-raft --bins
	python3 bench/replication/rebuild.py --cluster target/release/cairn-cluster \
	  --out docs/bench/replication/rebuild.md $(BENCH_REBUILD_ARGS)
