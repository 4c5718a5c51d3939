# py-lmdb 2.3.0's own test suite with `lmdb` resolving to Cairn's Python package (`import cairn
# as lmdb`): the sdist is downloaded once from PyPI into target/pylmdb and its tests/ unpacked
# there (none of py-lmdb's code is in the repository). crates/cairn-py/pylmdb/run.py puts a
# shim `lmdb` first on PYTHONPATH (it is the `cairn` package itself; py-lmdb's pure-Python
# lmdb.aio and lmdb.tool, which Cairn does not ship, come from the sdist and run over Cairn),
# checks in the run that `lmdb` is Cairn, runs every test but cve_test.py (it crafts files in
# LMDB's byte format; the mdb_layout tests that py-lmdb's own options deselect included), and
# holds the result to a ratchet: crates/cairn-py/pylmdb/expected_failures.txt lists the tests
# still expected to fail, each with its cause; any other failure fails the target, and so does
# a listed test that passes (take it off the list).
PYLMDB_VERSION := 2.3.0
PYLMDB_DIR := $(CURDIR)/target/pylmdb
PYLMDB_SDIST := $(PYLMDB_DIR)/lmdb-$(PYLMDB_VERSION)

COMPAT_TESTS += test-pylmdb
.PHONY: test-pylmdb pylmdb-sdist

pylmdb-sdist: py-venv
	@[ -f $(PYLMDB_SDIST)/tests/testlib.py ] || { \
	  mkdir -p $(PYLMDB_DIR) && \
	  $(VPY) -m pip download -q --no-binary :all: --no-deps lmdb==$(PYLMDB_VERSION) -d $(PYLMDB_DIR) && \
	  tar -xzf $(PYLMDB_DIR)/lmdb-$(PYLMDB_VERSION).tar.gz -C $(PYLMDB_DIR); }

test-pylmdb: py-venv pylmdb-sdist
	cd crates/cairn-py && VIRTUAL_ENV=$(VENV) PATH=$(VENV)/bin:$$PATH maturin develop --release -q
	$(VPY) crates/cairn-py/pylmdb/run.py $(PYLMDB_SDIST)
