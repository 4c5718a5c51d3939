"""pytest plugin for run.py: checks that `lmdb` is Cairn, records each test's outcome in the
file named by CAIRN_PYLMDB_RESULTS as it happens, and deselects the tests named in
CAIRN_PYLMDB_DONE (already run before a hang restarted the session)."""

import os
import sys

_PID = os.getpid()


def _out(*fields):
    # A forked child (txn_test's fork tests) goes on running tests; only this process counts.
    if os.getpid() != _PID:
        return
    with open(os.environ["CAIRN_PYLMDB_RESULTS"], "a") as f:
        f.write("\t".join(fields) + "\n")


def pytest_configure(config):
    import cairn
    import cairn._cairn
    import lmdb

    assert lmdb is cairn, "lmdb is %r, not cairn" % (lmdb,)
    assert lmdb.Environment is cairn._cairn.Environment
    pkg = os.path.dirname(os.path.abspath(lmdb.__file__))
    assert os.path.basename(pkg) == "cairn", "lmdb comes from %s" % pkg
    _out("lmdb", lmdb.__file__, repr(lmdb.Environment))


def pytest_collection_modifyitems(session, config, items):
    done_file = os.environ.get("CAIRN_PYLMDB_DONE")
    if not done_file or not os.path.exists(done_file):
        return
    with open(done_file) as f:
        done = {line.rstrip("\n") for line in f}
    keep = [i for i in items if i.nodeid not in done]
    dropped = [i for i in items if i.nodeid in done]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep


def pytest_collectreport(report):
    if report.failed:
        _out("collect-error", report.nodeid or "?")


def pytest_runtest_logstart(nodeid, location):
    _out("start", nodeid)


def pytest_runtest_logreport(report):
    if report.failed:
        _out("failed", report.nodeid, report.when)
    elif report.skipped:
        _out("skipped", report.nodeid, report.when)
    elif report.when == "call":
        _out("passed", report.nodeid, report.when)


def pytest_runtest_logfinish(nodeid, location):
    _out("finish", nodeid)
    sys.stdout.flush()
