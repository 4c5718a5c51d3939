"""Several processes sharing one environment; a writer killed mid-transaction."""
import multiprocessing as mp
import os
import signal
import time


import cairn

PER_WORKER = 200
WORKERS = 4


def _worker(path, n):
    env = cairn.open(path)
    for i in range(PER_WORKER):
        with env.begin(write=True) as t:
            t.put(b"w%d-%04d" % (n, i), b"%d" % os.getpid())
            cur = int(t.get(b"counter", b"0"))
            t.put(b"counter", b"%d" % (cur + 1))
        with env.begin() as r:
            assert r.get(b"w%d-%04d" % (n, i)) is not None
    env.close()


def test_workers_share_one_environment(tmp_path):
    path = str(tmp_path / "mp")
    cairn.open(path).close()
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_worker, args=(path, n)) for n in range(WORKERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with cairn.open(path) as env:
        t = env.begin()
        assert int(t.get(b"counter")) == WORKERS * PER_WORKER
        assert t.stat()["entries"] == WORKERS * PER_WORKER + 1


def _killed_writer(path, ready):
    env = cairn.open(path)
    with env.begin(write=True) as t:
        t.put(b"committed", b"yes")
    t = env.begin(write=True)
    for i in range(100000):
        t.put(b"uncommitted-%06d" % i, b"x" * 100)
        if i == 1000:
            ready.set()
    time.sleep(60)


def test_child_killed_mid_write_loses_nothing_committed(tmp_path):
    path = str(tmp_path / "kill")
    with cairn.open(path) as env:
        with env.begin(write=True) as t:
            for i in range(1000):
                t.put(b"base-%04d" % i, b"v")
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    p = ctx.Process(target=_killed_writer, args=(path, ready))
    p.start()
    assert ready.wait(60)
    os.kill(p.pid, signal.SIGKILL)
    p.join()
    with cairn.open(path) as env:
        t = env.begin()
        assert t.get(b"committed") == b"yes"
        assert t.get(b"uncommitted-000000") is None
        assert t.stat()["entries"] == 1001
        t.abort()
        with env.begin(write=True) as w:  # the dead writer's lock is gone
            w.put(b"after", b"1")
        assert env.begin().get(b"after") == b"1"
