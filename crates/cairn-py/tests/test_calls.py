"""Argument handling of the methods installed as plain CPython entry points
(Transaction.get, Transaction.put, the cursor iterator's __next__): positional and keyword
arguments as in py-lmdb, TypeErrors for bad calls, signatures visible to inspect."""
import inspect
from collections.abc import Iterator

import pytest

import cairn


def test_get_arguments_by_position_and_keyword(filled):
    db = filled.open_db(b"other")
    with filled.begin(write=True) as t:
        t.put(b"k0", b"other", db=db)
    with filled.begin() as t:
        assert t.get(b"k0") == b"v0"
        assert t.get(key=b"k0") == b"v0"
        assert t.get(b"zz", 7) == 7
        assert t.get(b"zz", default=7) == 7
        assert t.get(b"zz", None) is None
        assert t.get(b"k0", None, db) == b"other"
        assert t.get(b"k0", db=db) == b"other"
        assert t.get(db=db, key=b"k0") == b"other"
        assert t.get(b"k0", db=None) == b"v0"


def test_put_arguments_by_position_and_keyword(env):
    db = env.open_db(b"other")
    with env.begin(write=True) as t:
        assert t.put(b"a", b"1") is True
        assert t.put(key=b"b", value=b"2") is True
        assert t.put(b"a", b"x", True, False) is False
        assert t.put(b"a", b"x", overwrite=False) is False
        assert t.put(b"a", b"y", overwrite=True) is True
        assert t.put(b"0", b"x", append=True) is False
        assert t.put(b"z", b"x", True, True, True) is True
        assert t.put(b"a", b"other", db=db) is True
        assert t.put(b"c", b"3", True, True, False, db) is True
        assert t.get(b"a") == b"y"
        assert t.get(b"a", db=db) == b"other"
        assert t.get(b"c", db=db) == b"3"


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda t: t.get(), "missing 1 required positional argument: 'key'"),
        (lambda t: t.get(b"a", None, None, 1), "takes from 1 to 3 positional arguments"),
        (lambda t: t.get(b"a", key=b"b"), "multiple values for argument 'key'"),
        (lambda t: t.get(b"a", nope=1), "unexpected keyword argument 'nope'"),
        (lambda t: t.get(b"a", db=3), "argument 'db'"),
        (lambda t: t.get("text"), "Unicode"),
        (lambda t: t.put(b"a"), "missing 1 required positional argument: 'value'"),
        (lambda t: t.put(b"a", b"1", True, True, False, None, 1), "takes from 2 to 6"),
        (lambda t: t.put(b"a", b"1", overwrite="no"), "argument 'overwrite'"),
        (lambda t: t.put(b"a", "text"), "Unicode"),
    ],
)
def test_bad_calls_raise_type_error(env, call, message):
    with env.begin(write=True) as t:
        with pytest.raises(TypeError, match=message):
            call(t)
        # The transaction is still usable after the error.
        assert t.put(b"ok", b"1") is True


def test_errors_of_the_engine_keep_their_class(env):
    t = env.begin(write=True)
    t.commit()
    with pytest.raises(cairn.Error):
        t.get(b"a")
    with pytest.raises(cairn.Error):
        t.put(b"a", b"1")
    with env.begin() as r:
        with pytest.raises(cairn.ReadonlyError):
            r.put(b"a", b"1")


def test_signatures_and_docs():
    get = inspect.signature(cairn.Transaction.get)
    assert list(get.parameters) == ["self", "key", "default", "db"]
    put = inspect.signature(cairn.Transaction.put)
    assert list(put.parameters) == ["self", "key", "value", "dupdata", "overwrite", "append", "db"]
    assert put.parameters["append"].default is False
    assert "default" in cairn.Transaction.get.__doc__
    assert cairn.Transaction.get.__name__ == "get"


def test_iterator_protocol(filled):
    with filled.begin() as t:
        it = iter(t.cursor())
        assert isinstance(it, Iterator)
        assert next(it) == (b"k0", b"v0")
        assert it.__next__() == (b"k1", b"v1")  # the method and the slot share one position
        assert next(it) == (b"k2", b"v2")
        assert len(list(it)) == 7
        with pytest.raises(StopIteration):
            next(it)
        assert next(it, "end") == "end"


def test_iterator_of_ended_transaction_raises(filled):
    t = filled.begin()
    it = t.cursor().iternext()
    assert next(it) == (b"k0", b"v0")
    t.abort()
    with pytest.raises(cairn.Error):
        next(it)


def test_methods_are_bound_once_and_reused(filled):
    # A bound method kept across many calls (as hot loops do) stays valid.
    with filled.begin() as t:
        g = t.get
        assert [g(b"k%d" % i) for i in range(10)] == [b"v%d" % i for i in range(10)]


def test_iterator_without_keys_or_values_yields_keys(filled):
    # py-lmdb yields keys when both are False.
    with filled.begin() as t:
        assert list(t.cursor().iternext(keys=False, values=False))[:2] == [b"k0", b"k1"]
        assert list(t.cursor().iternext(keys=False, values=True))[:2] == [b"v0", b"v1"]
        assert list(t.cursor().iternext(keys=True, values=False))[:2] == [b"k0", b"k1"]


def test_cursor_entry_points(filled):
    with filled.begin() as t:
        c = t.cursor()
        assert c.key() == b"" and c.value() == b"" and c.item() == (b"", b"")
        assert c.set_key(key=b"k3") and c.item() == (b"k3", b"v3")
        assert c.set_range(b"k35") and c.key() == b"k4"
        assert c.get(b"k5") == b"v5" and c.key() == b"k5"
        assert c.get(b"nope") is None and c.get(b"nope", default=1) == 1
        assert c.first() and c.key() == b"k0" and c.last() and c.key() == b"k9"
        assert c.prev() and c.value() == b"v8"
        assert c.next_nodup() and c.key() == b"k9" and not c.next_nodup()
        assert c.key() == b""  # past the end: unpositioned
        with pytest.raises(TypeError, match="takes no arguments"):
            c.next(1)
        with pytest.raises(TypeError, match="missing 1 required positional argument: 'key'"):
            c.set_key()
        with pytest.raises(TypeError, match="unexpected keyword argument 'k'"):
            c.get(k=b"x")
        with pytest.raises(TypeError, match="Unicode"):
            c.set_range("text")
    assert list(inspect.signature(cairn.Cursor.get).parameters) == ["self", "key", "default"]
    assert list(inspect.signature(cairn.Cursor.next).parameters) == ["self"]
    t = filled.begin()
    c = t.cursor()
    t.abort()
    for call in (c.next, c.key, lambda: c.set_key(b"k1"), lambda: c.get(b"k1")):
        with pytest.raises(cairn.Error):
            call()


def test_cursor_buffers_entry_points(filled):
    with filled.begin(buffers=True) as t:
        c = t.cursor()
        assert c.set_key(b"k2")
        k, v = c.item()
        assert isinstance(k, memoryview) and bytes(k) == b"k2" and bytes(v) == b"v2"
        assert bytes(c.get(b"k7")) == b"v7" and bytes(c.key()) == b"k7"
    with pytest.raises(ValueError):
        bytes(v)


def test_delete_and_cursor_put_arguments(env):
    dups = env.open_db(b"dups", dupsort=True)
    with env.begin(write=True) as t:
        t.put(b"a", b"1")
        assert t.delete(b"a") is True and t.delete(key=b"a") is False
        assert t.put(b"d", b"1", db=dups) and t.put(b"d", b"2", db=dups)
        assert t.delete(b"d", b"1", db=dups) is True
        assert t.get(b"d", db=dups) == b"2"
        assert t.delete(b"d", value=None, db=dups) is True
        assert t.get(b"d", db=dups) is None
        c = t.cursor()
        assert c.put(b"k", b"v") is True and c.item() == (b"k", b"v")
        assert c.put(key=b"k", val=b"w", overwrite=False) is False
        assert c.put(b"z", b"1", True, True, True) is True and c.key() == b"z"
        assert c.put(b"a", b"1", append=True) is False
        with pytest.raises(TypeError, match="missing 1 required positional argument: 'val'"):
            c.put(b"k")
        with pytest.raises(TypeError, match="argument 'append'"):
            c.put(b"k", b"v", append=None)
        with pytest.raises(TypeError, match="unexpected keyword argument 'nope'"):
            t.delete(b"k", nope=1)
    with env.begin() as r:
        with pytest.raises(cairn.ReadonlyError):
            r.delete(b"k")
        with pytest.raises(cairn.ReadonlyError):
            r.cursor().put(b"k", b"v")
