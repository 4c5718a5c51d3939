# Cairn: the two set-up commands are `make demo` and `make test`; each installs what it needs.
CARGO ?= cargo
export CARGO_TERM_COLOR := never

.PHONY: demo test test-rust lint bench bench-full torture doc

demo:
	$(CARGO) run --release -p cairn --example demo

test: test-rust

test-rust:
	$(CARGO) test -p cairn --release

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy -p cairn --all-targets -- -D warnings

bench:
	bench/run.sh quick

bench-full:
	bench/run.sh full

torture:
	CAIRN_CRASHES=$${CAIRN_CRASHES:-100000} $(CARGO) test -p cairn --release --test crash -- --nocapture
