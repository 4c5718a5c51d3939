"""Sorted duplicates (dupsort=True, dupfixed=True, integerdup=True) as py-lmdb exposes them."""
import struct

import pytest

import cairn


@pytest.fixture
def dups(env):
    db = env.open_db(b"d", dupsort=True)
    with env.begin(write=True, db=db) as t:
        for k, vs in ((b"a", [b"3", b"1", b"2"]), (b"b", [b"x"]), (b"c", [b"q", b"p"])):
            for v in vs:
                t.put(k, v)
    return env, db


def items(it):
    return [(bytes(k), bytes(v)) for k, v in it]


def test_flags(env):
    assert env.open_db(b"s", dupsort=True).flags()["dupsort"]
    f = env.open_db(b"f", dupfixed=True).flags()
    assert f["dupsort"] and f["dupfixed"] and not f["integerdup"]
    i = env.open_db(b"i", integerdup=True).flags()
    assert i["dupsort"] and i["dupfixed"] and i["integerdup"]
    assert env.open_db(b"plain").flags()["dupsort"] is False


def test_flags_persist_across_reopen(tmp_path):
    p = str(tmp_path / "re")
    with cairn.open(p, max_dbs=2) as env:
        env.open_db(b"d", dupsort=True)
    with cairn.open(p, max_dbs=2) as env:
        db = env.open_db(b"d")
        assert db.flags()["dupsort"]
        with env.begin(write=True, db=db) as t:
            t.put(b"k", b"1")
            t.put(b"k", b"2")
            c = t.cursor()
            assert c.set_key(b"k") and c.count() == 2


def test_values_sorted_and_get_first(dups):
    env, db = dups
    t = env.begin(db=db)
    assert items(t.cursor()) == [(b"a", b"1"), (b"a", b"2"), (b"a", b"3"), (b"b", b"x"),
                                 (b"c", b"p"), (b"c", b"q")]
    assert t.get(b"a") == b"1"
    assert t.stat(db)["entries"] == 6


def test_put_dupdata_and_overwrite(dups):
    env, db = dups
    with env.begin(write=True, db=db) as t:
        assert t.put(b"a", b"2", dupdata=False) is False
        assert t.put(b"a", b"4", dupdata=False) is True
        assert t.put(b"a", b"9", overwrite=False) is False
        assert t.put(b"a", b"1") is True  # an existing pair: nothing changes
        assert [bytes(v) for v in t.cursor().iternext_dup()] == []  # unpositioned
        c = t.cursor()
        c.set_key(b"a")
        assert [bytes(v) for v in c.iternext_dup()] == [b"1", b"2", b"3", b"4"]


def test_cursor_dup_moves(dups):
    env, db = dups
    c = env.begin(db=db).cursor()
    assert c.set_key(b"a") and c.value() == b"1" and c.count() == 3
    assert c.next_dup() and c.value() == b"2"
    assert c.last_dup() and c.value() == b"3"
    assert not c.next_dup()
    assert c.set_key(b"a") and c.last_dup()
    assert c.prev_dup() and c.value() == b"2"
    assert c.first_dup() and c.value() == b"1"
    assert not c.prev_dup()
    assert c.set_key(b"a") and c.next_nodup() and c.item() == (b"b", b"x")
    assert c.next_nodup() and c.item() == (b"c", b"p")
    assert c.prev_nodup() and c.item() == (b"b", b"x")
    assert c.prev_nodup() and c.item() == (b"a", b"3")
    assert c.set_key_dup(b"c", b"q") and c.value() == b"q"
    assert not c.set_key_dup(b"c", b"z")
    assert c.set_range_dup(b"a", b"15") and c.value() == b"2"
    assert not c.set_range_dup(b"a", b"4")
    assert c.last() and c.item() == (b"c", b"q")


def test_dup_iterators(dups):
    env, db = dups
    t = env.begin(db=db)
    c = t.cursor()
    assert [bytes(k) for k in c.iternext_nodup()] == [b"a", b"b", b"c"]
    assert [bytes(k) for k in t.cursor().iterprev_nodup()] == [b"c", b"b", b"a"]
    c = t.cursor()
    c.set_key(b"a")
    assert items(c.iternext_dup(keys=True)) == [(b"a", b"1"), (b"a", b"2"), (b"a", b"3")]
    c.set_key(b"c")
    c.last_dup()
    assert [bytes(v) for v in c.iterprev_dup()] == [b"q", b"p"]
    assert items(t.cursor().iterprev())[0] == (b"c", b"q")


def test_delete_pair_and_all(dups):
    env, db = dups
    with env.begin(write=True, db=db) as t:
        assert t.delete(b"a", b"2") is True
        assert t.delete(b"a", b"2") is False
        c = t.cursor()
        c.set_key(b"a")
        assert c.count() == 2
        assert t.delete(b"c") is True  # every value
        assert t.get(b"c") is None
        assert items(t.cursor()) == [(b"a", b"1"), (b"a", b"3"), (b"b", b"x")]


def test_cursor_delete(dups):
    env, db = dups
    with env.begin(write=True, db=db) as t:
        c = t.cursor()
        c.set_key_dup(b"a", b"2")
        assert c.delete() and c.item() == (b"a", b"3")
        c.set_key(b"c")
        assert c.delete(dupdata=True)
        assert not c.key()  # nothing after c
        assert items(t.cursor()) == [(b"a", b"1"), (b"a", b"3"), (b"b", b"x")]


def test_pop_and_replace(dups):
    env, db = dups
    with env.begin(write=True, db=db) as t:
        assert t.pop(b"a") == b"1"  # the first value only
        c = t.cursor()
        c.set_key(b"a")
        assert c.count() == 2
        assert t.replace(b"c", b"new") == b"p"  # every value replaced
        c.set_key(b"c")
        assert c.count() == 1 and c.value() == b"new"
        assert c.replace(b"a", b"z") == b"2"
        assert c.item() == (b"a", b"z") and c.count() == 1
        assert c.pop(b"b") == b"x" and t.get(b"b") is None


def test_cursor_put_positions_on_pair(dups):
    env, db = dups
    with env.begin(write=True, db=db) as t:
        c = t.cursor()
        assert c.put(b"a", b"25")
        assert c.item() == (b"a", b"25")
        assert c.next_dup() and c.value() == b"3"
        assert c.put(b"a", b"25", dupdata=False) is False


def test_putmulti_getmulti(env):
    db = env.open_db(b"m", dupsort=True)
    with env.begin(write=True, db=db) as t:
        c = t.cursor()
        assert c.putmulti([(b"k", b"1"), (b"k", b"2"), (b"j", b"0")]) == (3, 3)
        assert c.putmulti([(b"k", b"1"), (b"k", b"3")], dupdata=False) == (2, 1)
        assert c.getmulti([b"k", b"j"], dupdata=True) == [
            (b"k", b"1"), (b"k", b"2"), (b"k", b"3"), (b"j", b"0")]
        assert c.getmulti([b"k"]) == [(b"k", b"1")]


def test_dupfixed_getmulti_keyfixed(env):
    db = env.open_db(b"fx", dupfixed=True)
    with env.begin(write=True, db=db) as t:
        for k in (b"k1", b"k2"):
            for v in (b"aa", b"bb"):
                t.put(k, v)
        mv = t.cursor().getmulti([b"k1", b"k2"], dupdata=True, dupfixed_bytes=2,
                                 keyfixed=True)
        assert bytes(mv) == b"k1aak1bbk2aak2bb"


def test_integerdup_order(env):
    db = env.open_db(b"id", integerdup=True)
    with env.begin(write=True, db=db) as t:
        for n in (300, 2, 70000):
            t.put(b"k", struct.pack("=Q", n))
        with pytest.raises(cairn.BadValsizeError):
            t.put(b"k", b"abc")
        c = t.cursor()
        c.set_key(b"k")
        assert [struct.unpack("=Q", v)[0] for v in c.iternext_dup()] == [2, 300, 70000]


def test_cursor_resumes_after_txn_change(dups):
    env, db = dups
    with env.begin(write=True, db=db) as t:
        c = t.cursor()
        c.set_key_dup(b"a", b"2")
        t.put(b"a", b"25")
        assert c.item() == (b"a", b"2")
        assert c.next() and c.item() == (b"a", b"25")
        t.delete(b"a", b"3")
        assert c.next() and c.item() == (b"b", b"x")
