# Cairn: the two set-up commands are `make demo` and `make test`; each installs what it needs.
CARGO ?= cargo
export CARGO_TERM_COLOR := never

.PHONY: demo test test-rust test-cli lmdb-utils lint bench bench-full torture doc

demo:
	$(CARGO) run --release -p cairn --example demo

test: test-rust test-cli

test-rust:
	$(CARGO) test -p cairn --release

# The `cairn` command; its interop tests run LMDB's own mdb_dump/mdb_load/mdb_stat/mdb_copy.
test-cli: lmdb-utils
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

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy -p cairn -p cairn-cli --all-targets -- -D warnings

bench:
	bench/run.sh quick

bench-full:
	bench/run.sh full

torture:
	CAIRN_CRASHES=$${CAIRN_CRASHES:-100000} $(CARGO) test -p cairn --release --test crash -- --nocapture
