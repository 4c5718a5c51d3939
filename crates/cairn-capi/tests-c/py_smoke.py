"""Debian's python3-lmdb (built against liblmdb.so.0) on Cairn's library through
LD_LIBRARY_PATH: checks that the loaded library is Cairn's, then exercises the module."""
import os
import sys
import tempfile

import lmdb

want = sys.argv[1]  # the directory Cairn's liblmdb.so.0 was staged in
maps = open("/proc/self/maps").read()
loaded = {l.split()[-1] for l in maps.splitlines() if "liblmdb.so" in l}
assert loaded == {os.path.realpath(os.path.join(want, "liblmdb.so.0"))}, loaded
assert lmdb.version()[:2] == (0, 9)

with tempfile.TemporaryDirectory() as d:
    env = lmdb.open(d, max_dbs=4, map_size=64 << 20)
    db = env.open_db(b"things", dupsort=True)
    with env.begin(write=True) as txn:
        for i in range(1000):
            txn.put(b"k%04d" % i, b"v%d" % i)
        for v in (b"x", b"y", b"z"):
            txn.put(b"multi", v, db=db)
        assert txn.put(b"k0001", b"new", overwrite=False) is False
    with env.begin() as txn:
        assert txn.get(b"k0500") == b"v500"
        # The named database's name is a key of the main database, as in LMDB.
        assert txn.stat()["entries"] == 1001
        cur = txn.cursor()
        assert cur.set_range(b"k0998") and cur.key() == b"k0998"
        assert [k for k, _ in cur] == [b"k0998", b"k0999", b"things"]
        dc = txn.cursor(db=db)
        assert dc.set_key(b"multi") and list(dc.iternext_dup()) == [b"x", b"y", b"z"]
        assert dc.set_key(b"multi") and dc.count() == 3
    with env.begin(write=True) as txn:
        assert txn.delete(b"k0000")
        assert txn.pop(b"k0002") == b"v2"
        txn.put(b"r", b"abc")
    try:
        with env.begin(write=True) as txn:
            txn.put(b"gone", b"1")
            raise RuntimeError("abort")
    except RuntimeError:
        pass
    with env.begin() as txn:
        assert txn.get(b"gone") is None and txn.get(b"r") == b"abc"
    info = env.info()
    assert info["last_txnid"] >= 3, info
    os.makedirs(os.path.join(d, "copy"))
    env.copy(os.path.join(d, "copy"), compact=True)
    env.close()
    env2 = lmdb.open(os.path.join(d, "copy"), readonly=True)
    with env2.begin() as txn:
        assert txn.stat()["entries"] == 1000
    env2.close()
print("python3-lmdb on Cairn: ok (%s)" % ", ".join(sorted(loaded)))
