#!/bin/bash
# Debian's python3-lmdb (py-lmdb 1.4 built against liblmdb.so.0): an environment with named
# databases (a DUPSORT one among them) next to keys of the main database; the named databases
# listed from the main database (as tools that enumerate databases do) and each opened by the
# name found there; the main database's stat; a put on a database's name refused; env.stat/info; copy with compaction.
APP=python3-lmdb
. "$(dirname "$0")/common.sh"

scenario() {
	expect_lib "$1" "$PY_LMDB_EXT"
	cat > t.py <<'PY'
import lmdb
env = lmdb.open("env", max_dbs=8, map_size=64 << 20)
names = [b"users", b"groups", b"tags"]
dbs = {n: env.open_db(n, dupsort=(n == b"tags")) for n in names}
with env.begin(write=True) as txn:
    for i in range(50):
        txn.put(b"user%02d" % i, b"u" * i, db=dbs[b"users"])
    txn.put(b"admins", b"alice", db=dbs[b"groups"])
    for v in (b"red", b"green", b"blue"):
        txn.put(b"color", v, db=dbs[b"tags"])
with env.begin(write=True) as txn:
    txn.put(b"zz-main-key", b"plain")
txn = env.begin(write=True)
try:
    txn.put(b"users", b"x")
    print("put on a database's name: stored")
except lmdb.Error as e:
    print("put on a database's name:", type(e).__name__)
txn.abort()
with env.begin() as txn:
    found = [k for k, _ in txn.cursor()]
    print("main database keys:", [k.decode() for k in found])
    print("main database entries:", txn.stat()["entries"])
env.close()
env = lmdb.open("env", max_dbs=8, readonly=True)
with env.begin() as txn:
    for k, _ in txn.cursor():
        if k.startswith(b"zz-"):
            continue
        db = env.open_db(k, txn=txn, create=False)
        print("db %s: %d entries, flags %s" % (k.decode(), txn.stat(db)["entries"],
              sorted(f for f, on in db.flags(txn).items() if on)))
    tags = env.open_db(b"tags", txn=txn, create=False)
    c = txn.cursor(db=tags)
    print("tags color:", [v.decode() for v in (c.set_key(b"color") and c.iternext_dup())])
print("env.stat entries:", env.stat()["entries"])
env.close()
PY
	local out
	out=$($RUN /usr/bin/python3 t.py 2>&1) || fail "python3: $(echo "$out" | tail -1)"
	echo "$out"
}
run_both
