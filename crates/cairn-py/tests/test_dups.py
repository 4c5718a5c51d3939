"""Sorted duplicates (dupsort): py-lmdb's behaviour, pending engine support."""
import pytest

import cairn

pytestmark = pytest.mark.xfail(
    reason="dupsort databases are not wired into cairn-py yet (engine support is on branch dups)",
    strict=False,
)


def test_dupsort_put_and_iterate(env):
    db = env.open_db(b"d", dupsort=True)
    with env.begin(write=True, db=db) as t:
        for v in (b"c", b"a", b"b"):
            t.put(b"k", v)
        assert t.put(b"k", b"a", dupdata=False) is False
        c = t.cursor()
        assert c.set_key(b"k") and c.count() == 3
        assert [bytes(v) for v in c.iternext_dup()] == [b"a", b"b", b"c"]
        assert c.last_dup() and c.value() == b"c"
        assert c.first_dup() and c.value() == b"a"
        assert c.set_key_dup(b"k", b"b")
        assert c.delete() and c.value() == b"c"
        assert t.delete(b"k", b"a")
        assert c.getmulti([b"k"], dupdata=True) == [(b"k", b"c")]
