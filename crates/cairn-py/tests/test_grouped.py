"""Environment.write_grouped: group commit from many Python threads."""
import random
import threading
import time

import pytest

import cairn


def reopen(path, **kw):
    return cairn.open(path, max_dbs=8, **kw)


def test_returns_value_and_commits(tmp_path):
    path = str(tmp_path / "db")
    env = reopen(path)

    def fn(txn):
        txn.put(b"a", b"1")
        return {"answer": 42}

    assert env.write_grouped(fn) == {"answer": 42}
    assert env.write_grouped(lambda txn: None) is None
    env.close()
    env = reopen(path)
    assert env.begin().get(b"a") == b"1"
    env.close()


@pytest.mark.parametrize(
    "kw", [{}, {"sync": False}, {"logged": True}], ids=["durable", "lazy", "logged"]
)
def test_many_threads_against_a_model(tmp_path, kw):
    """16 threads, each calling write_grouped 40 times; some callables raise, after having
    written. After a reopen every acknowledged call's keys are there, no failed call's key is,
    and no call is half there."""
    path = str(tmp_path / "db")
    env = reopen(path, **kw)
    threads, calls, keys_per_call = 16, 40, 3
    acked = [[] for _ in range(threads)]
    failed = [[] for _ in range(threads)]
    errors = []
    start = threading.Barrier(threads)

    class Refused(Exception):
        pass

    def worker(t):
        rng = random.Random(t)
        start.wait()
        for c in range(calls):
            fail = rng.random() < 0.25
            # Where a failing callable raises: before, between or after its puts.
            raise_at = rng.randrange(keys_per_call + 1)

            def fn(txn):
                for k in range(keys_per_call):
                    if fail and k == raise_at:
                        raise Refused((t, c))
                    txn.put(b"%02d-%03d-%d" % (t, c, k), b"v%d" % c)
                if fail:
                    raise Refused((t, c))
                return (t, c)

            try:
                got = env.write_grouped(fn)
            except Refused as e:
                assert e.args == ((t, c),)
                failed[t].append(c)
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)
            else:
                assert got == (t, c)
                acked[t].append(c)

    ws = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for w in ws:
        w.start()
    for w in ws:
        w.join(120)
        assert not w.is_alive()
    assert errors == []
    env.close()

    env = reopen(path)
    with env.begin() as txn:
        for t in range(threads):
            for c in acked[t]:
                for k in range(keys_per_call):
                    assert txn.get(b"%02d-%03d-%d" % (t, c, k)) == b"v%d" % c
            for c in failed[t]:
                for k in range(keys_per_call):
                    assert txn.get(b"%02d-%03d-%d" % (t, c, k)) is None
        want = sum(len(a) for a in acked) * keys_per_call
        assert txn.stat()["entries"] == want
    assert sum(len(f) for f in failed) > 0
    env.close()


def test_exception_propagates_with_its_type(env):
    class Mine(ValueError):
        pass

    def fn(txn):
        txn.put(b"x", b"1")
        raise Mine("the message", 7)

    with pytest.raises(Mine) as info:
        env.write_grouped(fn)
    assert info.value.args == ("the message", 7)
    # The traceback reaches into the callable.
    assert any(f.name == "fn" for f in info.traceback)
    assert env.begin().get(b"x") is None
    # The environment keeps working.
    env.write_grouped(lambda txn: txn.put(b"y", b"2"))
    assert env.begin().get(b"y") == b"2"


def test_base_exceptions_propagate(env):
    def fn(txn):
        txn.put(b"x", b"1")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        env.write_grouped(fn)
    assert env.begin().get(b"x") is None


def test_txn_and_cursors_unusable_afterwards(env):
    kept = {}

    def fn(txn):
        txn.put(b"a", b"1")
        kept["txn"] = txn
        kept["cursor"] = txn.cursor()
        kept["cursor"].first()
        kept["child"] = env.begin(write=True, parent=txn)
        kept["child"].put(b"c", b"3")

    env.write_grouped(fn)
    txn, cur, child = kept["txn"], kept["cursor"], kept["child"]
    for call in (
        lambda: txn.get(b"a"),
        lambda: txn.put(b"b", b"2"),
        lambda: txn.delete(b"a"),
        lambda: txn.cursor(),
        lambda: txn.stat(),
        lambda: txn.id(),
        lambda: txn.commit(),
        lambda: cur.first(),
        lambda: cur.key(),
        lambda: cur.put(b"b", b"2"),
        lambda: list(cur),
        lambda: child.get(b"c"),
        lambda: child.commit(),
    ):
        with pytest.raises(cairn.Error):
            call()
    # abort of an ended transaction has no effect, as in py-lmdb.
    txn.abort()
    child.abort()
    with env.begin() as r:
        assert r.get(b"a") == b"1"
        # The child was left open: it ended with the callback, uncommitted.
        assert r.get(b"c") is None
    del kept, txn, cur, child


def test_commit_and_abort_refused_inside(env):
    seen = []

    def fn(txn):
        txn.put(b"a", b"1")
        for end in (txn.commit, txn.abort):
            with pytest.raises(cairn.Error, match="committed by its group"):
                end()
        seen.append(txn.get(b"a"))
        return "ok"

    assert env.write_grouped(fn) == "ok"
    assert seen == [b"1"]
    assert env.begin().get(b"a") == b"1"


def test_no_second_write_inside(env):
    def fn(txn):
        txn.put(b"a", b"1")
        for call in (
            lambda: env.begin(write=True),
            lambda: env.write_grouped(lambda t: None),
            lambda: env.sync(),
            lambda: env.open_db(b"new"),
            lambda: env.set_mapsize(1 << 30),
        ):
            with pytest.raises(cairn.Error):
                call()
        # Reads and a named database opened through the transaction are fine.
        assert env.begin().get(b"a") is None
        db = env.open_db(b"named", txn=txn)
        txn.put(b"k", b"v", db=db)

    env.write_grouped(fn)
    db = env.open_db(b"named")
    assert env.begin(db=db).get(b"k") == b"v"
    assert env.begin().get(b"a") == b"1"


def test_nested_inside(env):
    def fn(txn):
        txn.put(b"a", b"1")
        with env.begin(write=True, parent=txn) as child:
            child.put(b"b", b"2")
        child = env.begin(write=True, parent=txn)
        child.put(b"c", b"3")
        child.abort()
        return txn.get(b"b"), txn.get(b"c")

    assert env.write_grouped(fn) == (b"2", None)
    with env.begin() as r:
        assert (r.get(b"a"), r.get(b"b"), r.get(b"c")) == (b"1", b"2", None)

    def rolled_back(txn):
        with env.begin(write=True, parent=txn) as child:
            child.put(b"d", b"4")
        raise RuntimeError("after the child's commit")

    with pytest.raises(RuntimeError):
        env.write_grouped(rolled_back)
    assert env.begin().get(b"d") is None


def test_db_argument(env):
    db = env.open_db(b"named", dupsort=True)

    def fn(txn):
        txn.put(b"k", b"1")
        txn.put(b"k", b"2")
        return txn.stat()["entries"]

    assert env.write_grouped(fn, db=db) == 2
    with env.begin(db=db) as r:
        c = r.cursor()
        assert c.set_key(b"k") and c.count() == 2
    assert env.begin().get(b"k") is None


def test_arguments_checked(env, tmp_path):
    with pytest.raises(TypeError):
        env.write_grouped(b"not callable")
    with pytest.raises(TypeError):
        env.write_grouped()
    env.write_grouped(lambda txn: txn.put(b"a", b"1"))
    env.close()
    with pytest.raises(cairn.Error):
        env.write_grouped(lambda txn: None)
    ro = cairn.open(str(tmp_path / "db"), readonly=True)
    with pytest.raises(cairn.ReadonlyError):
        ro.write_grouped(lambda txn: None)
    ro.close()


def test_while_own_write_txn_open(env):
    with env.begin(write=True) as t:
        t.put(b"a", b"1")
        with pytest.raises(cairn.Error, match="deadlock"):
            env.write_grouped(lambda txn: None)


def test_close_inside_rolls_back(tmp_path):
    path = str(tmp_path / "db")
    env = reopen(path)

    def fn(txn):
        txn.put(b"a", b"1")
        env.close()
        return "closed"

    with pytest.raises(cairn.Error):
        env.write_grouped(fn)
    env = reopen(path)
    assert env.begin().get(b"a") is None
    env.close()


def test_gil_released_while_waiting(env):
    """A write transaction of the main thread holds the writer: a grouped call in another
    thread waits for it without the GIL, so the main thread keeps running Python."""
    done = threading.Event()

    def other():
        env.write_grouped(lambda txn: txn.put(b"g", b"1"))
        done.set()

    t = env.begin(write=True)
    th = threading.Thread(target=other)
    th.start()
    for i in range(200):
        t.put(b"m%d" % i, b"x")
        time.sleep(0.001)
    assert not done.is_set()
    t.commit()
    th.join(30)
    assert done.is_set()
    with env.begin() as r:
        assert r.get(b"g") == b"1" and r.get(b"m0") == b"x"


def test_calls_share_commits(env):
    """Calls queued while a group runs share the next commit (one transaction id)."""
    ids = []
    first_running = threading.Event()
    lock = threading.Lock()
    calling = threading.Semaphore(0)

    def slow(txn):
        first_running.set()
        # Until the eight others are about to queue, and a while longer.
        for _ in range(8):
            assert calling.acquire(timeout=30)
        time.sleep(0.5)
        with lock:
            ids.append(txn.id())
        txn.put(b"slow", b"1")

    def quick(i):
        def fn(txn):
            with lock:
                ids.append(txn.id())
            txn.put(b"q%d" % i, b"1")

        calling.release()
        env.write_grouped(fn)

    lead = threading.Thread(target=env.write_grouped, args=(slow,))
    lead.start()
    assert first_running.wait(30)
    others = [threading.Thread(target=quick, args=(i,)) for i in range(8)]
    for o in others:
        o.start()
    for o in [lead] + others:
        o.join(30)
    assert len(ids) == 9
    # The first group carried the slow call; the eight queued meanwhile share the next one
    # (a thread slowed down between its release and its call may make a third).
    assert len(set(ids)) <= 3
    assert env.stat()["entries"] == 9


def test_blocked_group_holds_later_calls(env):
    """Calls queued while a callable runs wait for it, and then all run."""
    order = []
    gate = threading.Event()
    running = threading.Event()

    def blocker(txn):
        running.set()
        gate.wait(30)
        order.append("blocker")

    def queued(i):
        env.write_grouped(lambda txn: order.append(i))

    b = threading.Thread(target=env.write_grouped, args=(blocker,))
    b.start()
    assert running.wait(30)
    qs = [threading.Thread(target=queued, args=(i,)) for i in range(4)]
    for q in qs:
        q.start()
    time.sleep(0.1)
    assert order == []
    gate.set()
    for t in [b] + qs:
        t.join(30)
    assert order[0] == "blocker" and sorted(order[1:]) == [0, 1, 2, 3]


def test_group_limits(tmp_path):
    """group_max_writes bounds the calls one commit carries; bad limits raise ValueError."""
    with pytest.raises(ValueError):
        cairn.open(str(tmp_path / "a"), group_max_writes=0)
    with pytest.raises(ValueError):
        cairn.open(str(tmp_path / "b"), group_max_time=-1.0)
    env = cairn.open(str(tmp_path / "c"), group_max_writes=2, group_max_time=5.0)
    ids = []
    lock = threading.Lock()
    gate = threading.Event()

    def fn(i):
        def body(txn):
            gate.wait(30)
            with lock:
                ids.append(txn.id())
            txn.put(b"k%d" % i, b"1")

        env.write_grouped(body)

    threads = [threading.Thread(target=fn, args=(i,)) for i in range(9)]
    for t in threads:
        t.start()
    time.sleep(0.3)
    gate.set()
    for t in threads:
        t.join(30)
    assert len(ids) == 9
    per_txn = {i: ids.count(i) for i in ids}
    assert max(per_txn.values()) <= 2, per_txn
    assert env.stat()["entries"] == 9
    env.close()


def test_logged_environment_writes_its_log(tmp_path):
    """logged=True: commits go to data.mdb-log (flushed there), and what they wrote is
    there after a reopen in either mode."""
    path = str(tmp_path / "db")
    env = reopen(path, logged=True)
    for i in range(50):
        with env.begin(write=True) as txn:
            txn.put(b"k%03d" % i, b"v")
    assert (tmp_path / "db" / "data.mdb-log").exists()
    env.close()
    env = reopen(path)
    assert env.stat()["entries"] == 50
    env.close()
