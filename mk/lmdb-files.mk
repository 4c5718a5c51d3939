# Issue 20: LMDB's own files. The reader of LMDB's format (crates/cairn-lmdb) against
# environments written by real LMDB (py-lmdb from the venv, or Debian's python3-lmdb; REVERSEDUP
# through liblmdb-dev) and hostile files. The CLI's side (dump == mdb_dump, migrate, kills) is
# in crates/cairn-cli/tests/lmdb_env.rs, run by test-cli.
COMPAT_TESTS += test-lmdb-files
.PHONY: test-lmdb-files

test-lmdb-files: lmdb-utils
	@command -v cc >/dev/null && [ -f /usr/include/lmdb.h ] || \
	  echo "NOTE: no cc or lmdb.h (apt-get install liblmdb-dev): the REVERSEDUP case will be skipped"
	$(CARGO) test -p cairn-lmdb --release
