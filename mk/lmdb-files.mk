# Issue 20: LMDB's own files. The reader of LMDB's format (crates/cairn-lmdb) against
# environments written by real LMDB (py-lmdb from the venv, or Debian's python3-lmdb; REVERSEDUP
# through liblmdb-dev) and hostile files. The CLI's side (dump == mdb_dump, migrate, kills) is
# in crates/cairn-cli/tests/lmdb_env.rs, run by test-cli.
COMPAT_TESTS += test-lmdb-files
.PHONY: test-lmdb-files

test-lmdb-files: lmdb-utils py-venv
	@command -v cc >/dev/null && [ -f /usr/include/lmdb.h ] || \
	  echo "NOTE: no cc or lmdb.h (apt-get install liblmdb-dev): the REVERSEDUP case will be skipped"
	$(CARGO) test -p cairn-lmdb --release

# `cairn migrate` against `mdb_dump | cairn load` and `mdb_copy -c` on one environment of
# BENCH_MIGRATE_N records (default 10M, ~1.2 GB; written once by py-lmdb and kept under
# target/bench-migrate). Figures: docs/bench/migrate.md.
BENCH_MIGRATE_N ?= 10000000
.PHONY: bench-migrate
bench-migrate: lmdb-utils py-venv
	$(CARGO) build -p cairn-cli --release
	bench/migrate/run.sh target/release/cairn $(VPY) target/bench-migrate $(BENCH_MIGRATE_N)
