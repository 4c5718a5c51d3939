# Cairn: the two set-up commands are `make demo` and `make test`; each installs what it needs.
CARGO ?= cargo
export CARGO_TERM_COLOR := never

.PHONY: demo test test-rust test-kill test-cli test-py py-venv bench-py lmdb-utils lint bench bench-full bench-group torture torture-kill asan doc fuzz miri capi capi-deps test-capi install-capi bench-capi capi-bench-programs

# Suites kept in mk/*.mk (the LMDB drop-in checks: py-lmdb's own suite, Debian's programs);
# each appends its test target to COMPAT_TESTS, which `make test` runs after the others.
COMPAT_TESTS :=
.DEFAULT_GOAL := demo
include $(wildcard mk/*.mk)

demo:
	$(CARGO) run --release -p cairn --example demo

test: test-rust test-kill test-cli test-py test-capi $(COMPAT_TESTS)

test-rust:
	$(CARGO) test -p cairn --release

# The `cairn` command; its interop tests run LMDB's own mdb_dump/mdb_load/mdb_stat/mdb_copy, and
# its LMDB-environment tests (lmdb_env.rs) write environments with py-lmdb from the venv.
test-cli: lmdb-utils py-venv
	$(CARGO) test -p cairn-cli --release

# Debian's lmdb-utils, installed only when a tool is missing (sudo only when not root). Without
# apt-get the interop tests say loudly that they were skipped.
lmdb-utils:
	@if command -v mdb_dump >/dev/null && command -v mdb_load >/dev/null && \
	    command -v mdb_stat >/dev/null && command -v mdb_copy >/dev/null; then :; \
	elif command -v apt-get >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get install -y lmdb-utils || \
	    { $$SUDO apt-get update && $$SUDO apt-get install -y lmdb-utils; }; \
	else echo "WARNING: no apt-get: LMDB interop tests will be skipped"; fi

# LMDB's C API (crates/cairn-capi): liblmdb.so.0 / liblmdb.a with lmdb.h, cairn.h and lmdb.pc,
# staged under target/capi. Its C tests run under valgrind and AddressSanitizer; example
# programs built against Debian's liblmdb and against Cairn must print the same; Debian's
# python3-lmdb and postfix's postmap run on Cairn's library through LD_LIBRARY_PATH.
CAPI_PKGS := liblmdb-dev python3-lmdb postfix-lmdb valgrind pkg-config gcc
# CAPI_PROFILE: the Cargo profile of the library staged, tested and installed: Cargo.toml's
# [profile.release-capi] (fat LTO, no debug info, panic=abort; docs/capi.md, "Size and build
# profile"). `make bench-capi CAPI_PROFILE=release` measures a release build instead.
CAPI_PROFILE ?= release-capi
capi:
	$(CARGO) build -p cairn-capi --profile $(CAPI_PROFILE)
	$(MAKE) -C crates/cairn-capi/tests-c stage PROFILE=$(CAPI_PROFILE)

capi-deps:
	@missing=; for p in $(CAPI_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  echo "postfix postfix/main_mailer_type select No configuration" | $$SUDO debconf-set-selections; \
	  $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing || \
	    { $$SUDO apt-get update && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y $$missing; }; \
	fi

test-capi: capi-deps capi
	$(CARGO) test -p cairn-capi --release
	$(MAKE) -C crates/cairn-capi/tests-c test

# The programs of the benchmark harness's `capi` suite (bench/src/capi.rs): one C program,
# bench/capi/bench_capi.c, linked against Debian's liblmdb (by path, as the examples are) and
# against Cairn's staged liblmdb.so.0, and its Rust twin (crates/cairn-capi/examples).
CAPI_BENCH := target/capi-bench
capi-bench-programs: capi
	$(CARGO) build -p cairn-capi --release --example bench_rust
	mkdir -p $(CAPI_BENCH)
	$(CC) -O2 -g -Wall -I/usr/include bench/capi/bench_capi.c -o $(CAPI_BENCH)/bench_lmdb \
	  /usr/lib/$$($(CC) -print-multiarch)/liblmdb.so
	$(CC) -O2 -g -Wall -Itarget/capi/include bench/capi/bench_capi.c -o $(CAPI_BENCH)/bench_cairn \
	  -Ltarget/capi/lib -llmdb

# The harness's capi suite alone: LMDB C, Cairn C and Cairn Rust in one run, with the ratios
# (Cairn C / Cairn Rust is the C layer's cost). BENCH_N: records (rounded up to a power of
# two). The report goes to target/capi-bench/report, not docs/bench.
BENCH_N ?= 262144
bench-capi: capi-deps
	bench/run.sh quick --suites capi --records $(BENCH_N) --out $(CAPI_BENCH)/report --no-plots

# Copies the staged library, headers and pkg-config file under PREFIX (default /usr/local).
PREFIX ?= /usr/local
install-capi: capi
	mkdir -p $(PREFIX)/lib/pkgconfig $(PREFIX)/include
	cp -P target/capi/lib/liblmdb.so.0 target/capi/lib/liblmdb.so target/capi/lib/liblmdb.a $(PREFIX)/lib/
	cp target/capi/include/lmdb.h target/capi/include/cairn.h $(PREFIX)/include/
	sed 's|^prefix=.*|prefix=$(PREFIX)|' target/capi/lib/pkgconfig/lmdb.pc > $(PREFIX)/lib/pkgconfig/lmdb.pc

# The Python package (crates/cairn-py): a venv under .venv with maturin, pytest and py-lmdb
# (the reference it is compared with), the extension built into it, then its pytest suite.
VENV := $(CURDIR)/.venv
VPY := $(VENV)/bin/python

py-venv:
	@if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1 && command -v apt-get >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get install -y python3-venv || \
	    { $$SUDO apt-get update && $$SUDO apt-get install -y python3-venv; }; fi
	@[ -x $(VPY) ] || python3 -m venv $(VENV)
	@$(VPY) -c 'import maturin, pytest, lmdb' >/dev/null 2>&1 || \
	  $(VPY) -m pip install -q maturin pytest 'lmdb>=2,<3'

test-py: py-venv
	cd crates/cairn-py && VIRTUAL_ENV=$(VENV) PATH=$(VENV)/bin:$$PATH maturin develop --release -q
	cd crates/cairn-py && $(VPY) -m pytest -q tests

# Cairn's Python layer side by side with py-lmdb (get, put, cursor iteration, putmulti).
bench-py: py-venv
	cd crates/cairn-py && VIRTUAL_ENV=$(VENV) PATH=$(VENV)/bin:$$PATH maturin develop --release -q
	$(VPY) crates/cairn-py/bench/bench_vs_lmdb.py $${N:-200000}

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy -p cairn -p cairn-cli -p cairn-lmdb -p cairn-py -p cairn-capi -p cairn-doc -p cairn-raft -p cairn-server -p cairn-bench-serve-pg -p cairn-bench-replication --all-targets -- -D warnings

bench:
	bench/run.sh quick

bench-full:
	bench/run.sh full

# The group-commit suite alone (bench/src/group.rs): durable one-put commits from GROUP_THREADS
# threads of one process, GROUP_SECS seconds each, on every engine's durable configuration and
# Cairn's grouped commit; figures are the median of GROUP_REPEAT runs. Tables and plots go to
# docs/bench/group/.
GROUP_SECS ?= 3
GROUP_THREADS ?= 1,4,16,64,256
GROUP_REPEAT ?= 1
bench-group:
	CAIRN_BENCH_NO_CAPI=1 bench/run.sh quick --suites group --group-secs $(GROUP_SECS) \
	  --group-threads $(GROUP_THREADS) --repeat $(GROUP_REPEAT) --out docs/bench/group

# Logged commits (Durability::Logged, docs/design.md "Logged commits") against Cairn's durable
# commits, RocksDB's synced WAL and LMDB's durable mode, in one run: the durable db_bench rows
# (docs/bench/logged/dbbench) and the group suite (docs/bench/logged/group), LOGGED_REPEAT runs
# each (median). docs/bench/logged/README.md says how to read them.
LOGGED_REPEAT ?= 3
LOGGED_CONFIGS := cairn-durable,cairn-logged,rocksdb-sync,lmdb-durable
LOGGED_GROUP_CONFIGS := cairn-durable,cairn-logged,cairn-grouped,cairn-logged-grouped,rocksdb-sync
.PHONY: bench-logged
bench-logged:
	CAIRN_BENCH_NO_CAPI=1 bench/run.sh quick --suites dbbench --configs $(LOGGED_CONFIGS) \
	  --repeat $(LOGGED_REPEAT) --out docs/bench/logged/dbbench
	CAIRN_BENCH_NO_CAPI=1 bench/run.sh quick --suites group --configs $(LOGGED_GROUP_CONFIGS) \
	  --group-secs $(GROUP_SECS) --group-threads 1,16,64 --repeat $(LOGGED_REPEAT) \
	  --out docs/bench/logged/group

torture:
	CAIRN_CRASHES=$${CAIRN_CRASHES:-100000} $(CARGO) test -p cairn --release --test crash -- --nocapture

# Real crashes (tests/kill_loop.rs): writer and reader processes SIGKILLed at random moments and,
# through the test-only `failpoints` feature, at each named point of the commit protocol; every
# reopen is checked against the acknowledged commits and by the checker. `make test` runs 40
# kills; `make torture-kill` runs KILLS (default 1000) and requires every failpoint to fire.
# KILL_SEED replays a run's decisions (timing still varies).
KILLS ?= 1000
test-kill:
	CAIRN_KILLS=$${CAIRN_KILLS:-40} $(CARGO) test -p cairn --release --features failpoints --test kill_loop -- --nocapture
	$(CARGO) test -p cairn --release --features failpoints --test group_kill -- --nocapture
torture-kill:
	CAIRN_KILLS=$(KILLS) $(if $(KILL_SEED),CAIRN_KILL_SEED=$(KILL_SEED)) \
	  $(CARGO) test -p cairn --release --features failpoints --test kill_loop -- --nocapture

# AddressSanitizer over the engine's test suite (library and integration tests, the kill loop
# included): nightly with the standard library rebuilt instrumented, release code with debug
# assertions on, the slow tests scaled down through their variables. Not in `make test` (the
# first run builds the standard library: minutes).
ASAN_TARGET ?= x86_64-unknown-linux-gnu
asan:
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@rustup component list --toolchain nightly --installed | grep -q '^rust-src' || \
	  rustup component add --toolchain nightly rust-src
	RUSTFLAGS=-Zsanitizer=address CARGO_PROFILE_RELEASE_DEBUG_ASSERTIONS=true \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	CAIRN_CRASHES=$${CAIRN_CRASHES:-300} CAIRN_CONCURRENCY_TXNS=$${CAIRN_CONCURRENCY_TXNS:-300} \
	CAIRN_FUZZ_CASES=$${CAIRN_FUZZ_CASES:-500} CAIRN_HOSTILE_CASES=$${CAIRN_HOSTILE_CASES:-100} \
	CAIRN_DUP_DAMAGE=$${CAIRN_DUP_DAMAGE:-100} CAIRN_MP_ROUNDS=$${CAIRN_MP_ROUNDS:-6} \
	CAIRN_KILLS=$${CAIRN_KILLS:-20} \
	  $(CARGO) +nightly test -p cairn --release --features failpoints -Zbuild-std \
	  --target $(ASAN_TARGET) --target-dir target/asan --lib --tests

# Fuzzing (long; not part of `make test`, which replays fuzz/regressions and a few thousand
# random inputs through tests/fuzz_replay.rs). Installs nightly and cargo-fuzz if missing and
# runs each target for FUZZ_SECONDS. A crash lands in fuzz/artifacts/<target>/: copy it into
# fuzz/regressions/<target>/ so `make test` replays it for good.
FUZZ_SECONDS ?= 300
FUZZ_TARGETS ?= open_walk replay_log decode_pages ops_model lmdb_reader server_decode
fuzz:
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	cd fuzz && for t in $(FUZZ_TARGETS); do \
	  mkdir -p corpus/$$t && cp regressions/$$t/* corpus/$$t/ 2>/dev/null; \
	  $(CARGO) +nightly fuzz run --sanitizer none $$t corpus/$$t -- \
	    -max_total_time=$(FUZZ_SECONDS) -len_control=0 -timeout=30 -rss_limit_mb=4096 || exit 1; \
	done

# miri over the unit tests of the code it can run: format (every decoder), alloc (free runs).
# The map-backed code (os.rs, storage, environments) needs mmap flags miri lacks. Not in
# `make test`: the first run installs nightly, miri and builds its sysroot (minutes).
miri:
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@rustup component list --toolchain nightly --installed | grep -q '^miri' || \
	  rustup component add --toolchain nightly miri rust-src
	$(CARGO) +nightly miri test -p cairn --lib -- --skip inspect::
