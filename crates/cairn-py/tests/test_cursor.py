"""Cursor: positioning, reading, writing, iteration."""
import pytest

import cairn


def keys(it):
    return [bytes(k) for k in it]


def test_unpositioned(filled):
    c = filled.begin().cursor()
    assert c.key() == b"" and c.value() == b"" and c.item() == (b"", b"")
    assert c.next() and c.key() == b"k0"  # next from unpositioned: first


def test_first_last_next_prev(filled):
    c = filled.begin().cursor()
    assert c.first() and c.item() == (b"k0", b"v0")
    assert c.next() and c.key() == b"k1"
    assert c.prev() and c.key() == b"k0"
    assert not c.prev() and c.key() == b""
    assert c.last() and c.key() == b"k9"
    assert not c.next()
    c2 = filled.begin().cursor()
    assert c2.prev() and c2.key() == b"k9"  # prev from unpositioned: last


def test_empty_db(env):
    c = env.begin().cursor()
    assert not c.first() and not c.last() and not c.next() and list(c) == []


def test_set_key_set_range_get(filled):
    c = filled.begin().cursor()
    assert c.set_key(b"k5") and c.value() == b"v5"
    assert not c.set_key(b"k55") and c.key() == b""
    assert c.set_range(b"k55") and c.key() == b"k6"
    assert not c.set_range(b"zz")
    assert c.get(b"k3") == b"v3" and c.key() == b"k3"
    assert c.get(b"nope") is None and c.get(b"nope", b"d") == b"d"


def test_dup_methods_on_plain_db(filled):
    c = filled.begin().cursor()
    with pytest.raises(cairn.Error):
        c.first_dup()  # unpositioned
    c.set_key(b"k2")
    with pytest.raises(cairn.IncompatibleError):
        c.count()  # LMDB's answer outside dupsort databases
    with pytest.raises(cairn.IncompatibleError):
        c.first_dup()
    with pytest.raises(cairn.IncompatibleError):
        c.last_dup()
    # LMDB's answers outside dupsort databases (checked against py-lmdb): the _dup steps are
    # plain steps, the _dup positionings incompatible.
    c.set_key(b"k2")
    assert c.next_dup() and c.key() == b"k3"
    c.set_key(b"k2")
    assert c.prev_dup() and c.key() == b"k1"
    c.set_key(b"k2")
    assert c.next_nodup() and c.key() == b"k3"
    assert c.prev_nodup() and c.key() == b"k2"
    with pytest.raises(cairn.IncompatibleError):
        c.set_key_dup(b"k4", b"v4")
    assert c.key() == b""
    with pytest.raises(cairn.IncompatibleError):
        c.set_range_dup(b"k4", b"v3")
    c.set_key(b"k7")
    assert [bytes(v) for v in c.iternext_dup()] == [b"v7", b"v8", b"v9"]
    c.set_key(b"k1")
    assert [bytes(v) for v in c.iterprev_dup()] == [b"v1", b"v0"]
    c2 = filled.begin().cursor()
    with pytest.raises(cairn.Error):
        c2.count()


def test_iterators(filled):
    t = filled.begin()
    c = t.cursor()
    assert [k for k, _ in c] == [b"k%d" % i for i in range(10)]
    c.set_key(b"k7")
    assert keys(c.iternext(values=False)) == [b"k7", b"k8", b"k9"]
    assert keys(t.cursor().iterprev(values=False))[:2] == [b"k9", b"k8"]
    c.set_key(b"k2")
    assert list(c.iterprev(keys=False)) == [b"v2", b"v1", b"v0"]
    assert keys(t.cursor().iternext_nodup()) == [b"k%d" % i for i in range(10)]
    assert keys(t.cursor().iterprev_nodup())[0] == b"k9"
    assert list(t.cursor().iternext(keys=False, values=True))[0] == b"v0"
    it = t.cursor().iternext()
    assert iter(it) is it


def test_iteration_stops_at_break_position(filled):
    c = filled.begin().cursor()
    for k, _ in c:
        if k == b"k4":
            break
    assert c.key() == b"k4"


def test_cursor_put_replace_pop_delete(env):
    with env.begin(write=True) as t:
        c = t.cursor()
        assert c.put(b"b", b"2") and c.key() == b"b"
        assert c.put(b"a", b"1") and c.item() == (b"a", b"1")
        assert c.put(b"a", b"x", overwrite=False) is False
        assert c.put(b"z", b"26", append=True) is True
        assert c.put(b"c", b"3", append=True) is False
        assert c.replace(b"b", b"two") == b"2" and c.value() == b"two"
        assert c.replace(b"n", b"new") is None
        assert c.pop(b"n") == b"new"
        assert c.pop(b"n") is None
        c.first()
        assert c.delete() and c.key() == b"b"  # moved to the next entry
        assert [k for k, _ in t.cursor()] == [b"b", b"z"]
    c2 = env.begin().cursor()
    assert not c2.delete()


def test_cursor_sees_txn_writes_and_resumes(env):
    with env.begin(write=True) as t:
        for i in range(0, 20, 2):
            t.put(b"%02d" % i, b"")
        c = t.cursor()
        c.set_key(b"04")
        t.put(b"05", b"")  # a change through the transaction
        assert c.key() == b"04"
        assert c.next() and c.key() == b"05"
        t.delete(b"06")
        assert c.next() and c.key() == b"08"


def test_putmulti(env):
    with env.begin(write=True) as t:
        c = t.cursor()
        assert c.putmulti([(b"a", b"1"), (b"b", b"2")]) == (2, 2)
        assert c.putmulti(iter([(b"a", b"x"), (b"c", b"3")]), overwrite=False) == (2, 1)
        assert t.get(b"a") == b"1"
        gen = ((b"z%05d" % i, b"v") for i in range(5000))
        assert c.putmulti(gen, append=True) == (5000, 5000)
        assert t.stat()["entries"] == 5003
    with pytest.raises(cairn.ReadonlyError):
        env.begin().cursor().putmulti([(b"a", b"b")])


def test_getmulti(filled):
    c = filled.begin().cursor()
    assert c.getmulti([b"k1", b"nope", b"k3"]) == [(b"k1", b"v1"), (b"k3", b"v3")]
    assert c.getmulti([b"k2"], values=False) == [b"k2"]
    mv = c.getmulti([b"k1", b"k2"], dupdata=True, dupfixed_bytes=2, keyfixed=True)
    assert isinstance(mv, memoryview) and bytes(mv) == b"k1v1k2v2"
    # py-lmdb's argument checks, with its class (TypeError).
    with pytest.raises(TypeError):
        c.getmulti([b"k1"], dupdata=True, keyfixed=True)
    with pytest.raises(TypeError):
        c.getmulti([b"k1"], dupfixed_bytes=2, keyfixed=True)
    with pytest.raises(TypeError):
        c.getmulti([b"k1"], dupdata=True, values=False)


def test_close_and_context_manager(filled):
    t = filled.begin()
    with t.cursor() as c:
        c.first()
    with pytest.raises(cairn.Error):
        c.next()
    c2 = cairn.Cursor(filled.open_db(None), t)
    assert c2.first() and c2.txn is t and c2.db.flags()["dupsort"] is False
    c2.close()
    c2.close()
    t.abort()


def test_cursor_of_ended_txn(filled):
    t = filled.begin()
    c = t.cursor()
    it = c.iternext()
    t.commit()
    with pytest.raises(cairn.Error):
        c.first()
    with pytest.raises(cairn.Error):
        next(it)


def test_child_cursor_closed_with_child(env):
    p = env.begin(write=True)
    ch = env.begin(write=True, parent=p)
    ch.put(b"a", b"1")
    c = ch.cursor()
    c.first()
    ch.commit()
    with pytest.raises(cairn.Error):
        c.key()
    assert p.cursor().first()
    p.abort()


def test_putmulti_list_and_tuple_shapes(env):
    class Pair(tuple):
        pass

    with env.begin(write=True) as t:
        c = t.cursor()
        items = [
            (b"a", b"1"),
            (bytearray(b"b"), b"2"),  # converted apart, then the run goes on
            (b"c", memoryview(b"3")),
            Pair((b"d", b"4")),
            (b"e", b"5"),
        ]
        assert c.putmulti(items) == (5, 5)
        assert c.putmulti(tuple((b"t%d" % i, b"x") for i in range(3))) == (3, 3)
        assert c.putmulti([]) == (0, 0)
        assert c.putmulti(()) == (0, 0)
        assert dict(t.cursor()) == {
            b"a": b"1", b"b": b"2", b"c": b"3", b"d": b"4", b"e": b"5",
            b"t0": b"x", b"t1": b"x", b"t2": b"x",
        }


def test_putmulti_leaves_cursor_at_last_stored(env):
    with env.begin(write=True) as t:
        c = t.cursor()
        assert c.putmulti([(b"m", b"1"), (b"b", b"2")]) == (2, 2)
        assert c.item() == (b"b", b"2")
        # The last item exists already: the cursor stays on the last one stored.
        assert c.putmulti([(b"x", b"9"), (b"m", b"0")], overwrite=False) == (2, 1)
        assert c.item() == (b"x", b"9")
        assert c.prev() and c.key() == b"m" and c.value() == b"1"
        # Nothing stored: the cursor does not move.
        c.set_key(b"b")
        assert c.putmulti([(b"m", b"0")], overwrite=False) == (1, 0)
        assert c.key() == b"b"
        # A run broken by an item converted apart still ends on the last one stored.
        assert c.putmulti([(b"p", b"1"), (bytearray(b"q"), b"2")]) == (2, 2)
        assert c.item() == (b"q", b"2")
        assert c.putmulti([(bytearray(b"r"), b"3"), (b"s", b"4")]) == (2, 2)
        assert c.item() == (b"s", b"4")


def test_putmulti_bad_item_keeps_earlier_ones(env):
    with env.begin(write=True) as t:
        c = t.cursor()
        with pytest.raises(TypeError):
            c.putmulti([(b"a", b"1"), ("text", b"2"), (b"c", b"3")])
        with pytest.raises((TypeError, ValueError)):
            c.putmulti([(b"b", b"1"), (b"x", b"2", b"3")])
        with pytest.raises(TypeError):
            c.putmulti([(b"d", b"1"), 7])
        assert [k for k, _ in t.cursor()] == [b"a", b"b", b"d"]
        # The transaction and the cursor are still usable.
        assert c.putmulti([(b"e", b"5")]) == (1, 1)
        assert c.key() == b"e"


def test_putmulti_in_sorted_order_is_one_run(env):
    items = [(b"k%06d" % i, b"v%d" % i) for i in range(20000)]
    with env.begin(write=True) as t:
        assert t.cursor().putmulti(items) == (20000, 20000)
        assert t.cursor().putmulti(items, overwrite=False) == (20000, 0)
        assert t.cursor().putmulti(items[::-1]) == (20000, 20000)
    with env.begin() as t:
        assert list(t.cursor()) == items


def test_cursor_reads_see_writes_made_after_its_move(env):
    # key()/value()/item() read the entry the last move returned, until the transaction
    # changes: then they read the changed data.
    with env.begin(write=True) as t:
        for i in range(50):
            t.put(b"k%02d" % i, b"v%02d" % i)
        c = t.cursor()
        assert c.set_key(b"k10") and c.value() == b"v10"
        t.put(b"k10", b"changed" * 100)  # grows: the leaf is rewritten
        assert c.key() == b"k10" and c.value() == b"changed" * 100
        assert c.next() and c.item() == (b"k11", b"v11")
        other = t.cursor()
        assert other.set_key(b"k11")
        other.delete()
        assert c.key() == b"k12" and c.value() == b"v12"  # its entry went: now on the next
        for i in range(50, 400):
            t.put(b"k%03d" % i, b"x" * 50)  # splits pages under the cursor
        assert c.item() == (b"k12", b"v12")
        with t.cursor() as d:
            assert d.first() and d.item() == (b"k00", b"v00")
            d.put(b"k00", b"new")
            assert d.item() == (b"k00", b"new")
            assert d.next() and d.key() == b"k01"


def test_cursor_reads_after_nested_transaction(env):
    with env.begin(write=True) as t:
        t.put(b"a", b"1")
        t.put(b"b", b"2")
        c = t.cursor()
        assert c.set_key(b"a") and c.value() == b"1"
        with env.begin(write=True, parent=t) as child:
            child.put(b"a", b"from child")
        assert c.value() == b"from child"
        child = env.begin(write=True, parent=t)
        child.put(b"a", b"aborted")
        child.abort()
        assert c.item() == (b"a", b"from child")
