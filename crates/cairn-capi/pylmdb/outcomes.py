"""pytest plugin of run_suite.py: writes each test's outcome (`nodeid passed|failed|skipped`)
to the file named by CAIRN_PYLMDB_OUTCOMES. A test fails if any of its phases (setup, call,
teardown) failed. Only the process that started the session writes: py-lmdb's
txn_test.py::test_cached_txn_across_fork forks a child that runs the rest of the session
itself before the parent goes on."""

import os

_outcomes = {}
_pid = os.getpid()


def pytest_runtest_logreport(report):
    prev = _outcomes.get(report.nodeid)
    if report.failed:
        _outcomes[report.nodeid] = "failed"
    elif prev == "failed":
        pass
    elif report.skipped:
        _outcomes[report.nodeid] = "skipped"
    elif report.when == "call":
        _outcomes[report.nodeid] = "passed"


def pytest_sessionfinish(session, exitstatus):
    path = os.environ.get("CAIRN_PYLMDB_OUTCOMES")
    if not path or os.getpid() != _pid:
        return
    with open(path, "w") as f:
        for nodeid, outcome in _outcomes.items():
            f.write(f"{nodeid} {outcome}\n")
