"""Transaction: every method, nested transactions, buffers, threads."""
import gc
import threading

import pytest

import cairn


def test_get_put_default(env):
    with env.begin(write=True) as t:
        assert t.put(b"a", b"1") is True
        assert t.get(b"a") == b"1"
        assert t.get(b"zz") is None
        assert t.get(b"zz", b"dflt") == b"dflt"
    assert env.begin().get(b"a") == b"1"


def test_put_overwrite_and_append(env):
    with env.begin(write=True) as t:
        t.put(b"b", b"1")
        assert t.put(b"b", b"2", overwrite=False) is False
        assert t.get(b"b") == b"1"
        assert t.put(b"c", b"3", append=True) is True
        assert t.put(b"a", b"0", append=True) is False


def test_bytes_like_arguments(env):
    with env.begin(write=True) as t:
        t.put(bytearray(b"ba"), memoryview(b"mv"))
        assert t.get(memoryview(b"ba")) == b"mv"
        with pytest.raises(TypeError):
            t.put("str", b"x")
        with pytest.raises(TypeError):
            t.get(12)


def test_key_too_large(env):
    with env.begin(write=True) as t:
        with pytest.raises(cairn.BadValsizeError):
            t.put(b"k" * (env.max_key_size() + 1), b"v")


def test_replace_pop_delete(env):
    with env.begin(write=True) as t:
        assert t.replace(b"r", b"1") is None
        assert t.replace(b"r", b"2") == b"1"
        assert t.get(b"r") == b"2"
        assert t.pop(b"r") == b"2"
        assert t.pop(b"r") is None
        t.put(b"d", b"x")
        assert t.delete(b"d") is True
        assert t.delete(b"d") is False
        assert t.delete(b"d", b"x") is False


def test_write_in_read_txn(filled):
    t = filled.begin()
    for f in (lambda: t.put(b"a", b"b"), lambda: t.delete(b"k1"), lambda: t.pop(b"k1"),
              lambda: t.replace(b"k1", b"x")):
        with pytest.raises(cairn.ReadonlyError):
            f()


def test_commit_abort_and_ended(env):
    t = env.begin(write=True)
    t.put(b"a", b"1")
    t.abort()
    assert env.begin().get(b"a") is None
    with pytest.raises(cairn.Error):
        t.get(b"a")
    t.abort()  # no effect
    t = env.begin(write=True)
    t.put(b"a", b"1")
    t.commit()
    with pytest.raises(cairn.Error):
        t.put(b"b", b"2")
    assert env.begin().get(b"a") == b"1"


def test_context_manager_aborts_on_exception(env):
    with pytest.raises(RuntimeError):
        with env.begin(write=True) as t:
            t.put(b"a", b"1")
            raise RuntimeError
    assert env.begin().get(b"a") is None


def test_dropped_write_txn_aborts(env):
    t = env.begin(write=True)
    t.put(b"gone", b"1")
    del t
    gc.collect()
    with env.begin(write=True) as t:
        assert t.get(b"gone") is None


def test_id_and_snapshot(env):
    r0 = env.begin()
    with env.begin(write=True) as w:
        w.put(b"a", b"1")
        assert w.id() > r0.id()
    r1 = env.begin()
    assert r1.id() > r0.id()
    assert r0.get(b"a") is None and r1.get(b"a") == b"1"


def test_stat(filled):
    t = filled.begin()
    assert t.stat()["entries"] == 10
    db = filled.open_db(b"s")
    with pytest.raises(cairn.BadDbiError):
        t.stat(db)  # created after t's snapshot
    assert filled.begin().stat(db)["entries"] == 0
    with filled.begin(write=True) as w:
        w.put(b"x", b"y", db=db)
        assert w.stat(db)["entries"] == 1


def test_drop(env):
    db = env.open_db(b"dr")
    with env.begin(write=True) as t:
        t.put(b"a", b"1", db=db)
        t.put(b"b", b"2", db=db)
    with env.begin(write=True) as t:
        t.drop(db, delete=False)
        assert t.stat(db)["entries"] == 0
        t.put(b"c", b"3", db=db)
    with env.begin(write=True) as t:
        t.drop(db)
    with pytest.raises(cairn.NotFoundError):
        env.open_db(b"dr", create=False)
    with env.begin(write=True) as t:
        t.put(b"m", b"1")
        t.drop(env.open_db(None), delete=False)
        assert t.get(b"m") is None


def test_db_argument(env):
    a = env.open_db(b"a")
    b = env.open_db(b"b")
    with env.begin(write=True, db=a) as t:
        t.put(b"k", b"in a")
        t.put(b"k", b"in b", db=b)
    assert env.begin(db=a).get(b"k") == b"in a"
    assert env.begin().get(b"k", db=b) == b"in b"
    assert env.begin().get(b"k") is None


def test_transaction_constructor(env):
    t = cairn.Transaction(env, write=True)
    t.put(b"a", b"b")
    t.commit()
    assert cairn.Transaction(env).get(b"a") == b"b"
    assert cairn.Transaction(env).env is env


def test_nested(env):
    with env.begin(write=True) as parent:
        parent.put(b"p", b"1")
        child = env.begin(write=True, parent=parent)
        assert child.get(b"p") == b"1"
        child.put(b"c", b"2")
        with pytest.raises(cairn.BadTxnError):
            parent.get(b"p")  # parent unusable while the child is active
        child.commit()
        assert parent.get(b"c") == b"2"
        child2 = env.begin(write=True, parent=parent)
        child2.put(b"gone", b"x")
        grandchild = cairn.Transaction(env, write=True, parent=child2)
        grandchild.put(b"gg", b"y")
        grandchild.commit()
        assert child2.get(b"gg") == b"y"
        child2.abort()
        assert parent.get(b"gone") is None and parent.get(b"gg") is None
        with pytest.raises(cairn.Error):
            child2.put(b"a", b"b")
        with env.begin(write=True, parent=parent) as c3:
            c3.put(b"ctx", b"1")
        assert parent.get(b"ctx") == b"1"
    r = env.begin()
    assert (r.get(b"p"), r.get(b"c"), r.get(b"gone"), r.get(b"ctx")) == (b"1", b"2", None, b"1")


def test_nested_needs_write(env):
    p = env.begin(write=True)
    with pytest.raises(cairn.Error):
        env.begin(parent=p)
    p.abort()


def test_parent_commit_aborts_child(env):
    p = env.begin(write=True)
    c = env.begin(write=True, parent=p)
    c.put(b"c", b"1")
    p.commit()
    with pytest.raises(cairn.Error):
        c.get(b"c")
    assert env.begin().get(b"c") is None


def test_buffers_read(filled):
    t = filled.begin(buffers=True)
    v = t.get(b"k1")
    assert isinstance(v, memoryview) and v.readonly
    assert bytes(v) == b"v1"
    k, val = next(iter(t.cursor()))
    assert isinstance(k, memoryview) and bytes(k) == b"k0"
    t.abort()
    for mv in (v, k, val):
        with pytest.raises(ValueError):
            bytes(mv)


def test_buffers_write(env):
    with env.begin(write=True, buffers=True) as t:
        t.put(b"a", b"1")
        v = t.get(b"a")
        t.put(b"a", b"2")
        assert bytes(v) == b"1"  # a copy in write transactions
        assert bytes(t.replace(b"a", b"3")) == b"2"
    with pytest.raises(ValueError):
        v.tobytes()


def test_many_buffers_do_not_accumulate(filled):
    t = filled.begin(buffers=True)
    for _ in range(10000):
        t.get(b"k1")
    keep = t.get(b"k2")
    t.abort()
    with pytest.raises(ValueError):
        bytes(keep)


def test_write_txn_used_from_second_thread(env):
    t = env.begin(write=True)
    t.put(b"main", b"1")
    err = []

    def work():
        try:
            t.put(b"thread", b"2")
            assert t.get(b"main") == b"1"
            t.commit()
        except Exception as e:  # pragma: no cover - reported below
            err.append(e)

    th = threading.Thread(target=work)
    th.start()
    th.join()
    assert not err
    r = env.begin()
    assert r.get(b"thread") == b"2" and r.get(b"main") == b"1"
    with env.begin(write=True) as t2:  # the writer was released by the other thread
        t2.put(b"after", b"3")


def test_readers_in_many_threads(filled):
    out = []

    def reader():
        with filled.begin() as t:
            out.append(sum(1 for _ in t.cursor()))

    ths = [threading.Thread(target=reader) for _ in range(8)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert out == [10] * 8


def test_one_write_txn_shared_by_threads(env):
    """Threads sharing a write transaction and its cursors serialise on it: no lost puts."""
    t = env.begin(write=True)
    cursors = [t.cursor() for _ in range(2)]
    errors = []

    def writer(n):
        try:
            for i in range(500):
                t.put(b"t%d-%04d" % (n, i), b"x")
                c = cursors[i % 2]
                c.set_range(b"t")
                c.next()
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ths = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    assert not errors
    assert t.stat()["entries"] == 2000
    assert sum(1 for _ in t.cursor()) == 2000
    t.commit()
    assert env.stat()["entries"] == 2000
