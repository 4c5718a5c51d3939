# py-lmdb 2.3.0's own test suite through Cairn's C library: py-lmdb's C extension built from
# its PyPI sdist with LMDB_FORCE_SYSTEM=1 against the staged lmdb.h and liblmdb.so (rpath to
# target/capi/lib), in a venv of its own; the run checks the extension maps Cairn's library,
# then runs py-lmdb's tests/ (cve_test.py left out; the mdb_layout tests that py-lmdb's pytest
# options deselect included; LMDB_FORCE_SYSTEM set, so the tests that need py-lmdb's patched
# LMDB stay skipped: 383 pass on Debian's LMDB) against a ratchet of the tests still expected
# to fail (crates/cairn-capi/pylmdb/expected-failures.txt, one reason each): any other failure
# fails, and so does a listed test that passes. Everything py-lmdb's is cached under
# target/pylmdb-capi (the sdist is downloaded once); none of it is in the repository.
# `make test-pylmdb-capi-reference` runs the same suite on Debian's liblmdb (the reference
# count; not part of `make test`).
PYLMDB_CAPI_VERSION := 2.3.0
PYLMDB_CAPI_WORK := $(CURDIR)/target/pylmdb-capi
PYLMDB_CAPI_STAGE := $(CURDIR)/target/capi
PYLMDB_CAPI_RUN := python3 crates/cairn-capi/pylmdb/run_suite.py --version $(PYLMDB_CAPI_VERSION) \
  --work $(PYLMDB_CAPI_WORK)

COMPAT_TESTS += test-pylmdb-capi
.PHONY: test-pylmdb-capi test-pylmdb-capi-reference pylmdb-capi-deps

# python3's venv and headers, installed only when missing (sudo only when not root).
pylmdb-capi-deps:
	@if ! python3 -c 'import ensurepip, venv, sysconfig, os; \
	    assert os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h"))' \
	    >/dev/null 2>&1 && command -v apt-get >/dev/null; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get install -y python3-venv python3-dev || \
	    { $$SUDO apt-get update && $$SUDO apt-get install -y python3-venv python3-dev; }; fi

test-pylmdb-capi: capi-deps capi pylmdb-capi-deps
	$(PYLMDB_CAPI_RUN) --name cairn --label Cairn \
	  --include $(PYLMDB_CAPI_STAGE)/include --libdir $(PYLMDB_CAPI_STAGE)/lib \
	  --expect crates/cairn-capi/pylmdb/expected-failures.txt

test-pylmdb-capi-reference: capi-deps pylmdb-capi-deps
	$(PYLMDB_CAPI_RUN) --name debian --label "Debian's LMDB" \
	  --include /usr/include --libdir /usr/lib/$$($(CC) -print-multiarch)
