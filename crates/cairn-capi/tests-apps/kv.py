"""Writes and reads LMDB files for the scenarios through Debian's python3-lmdb, so through the
liblmdb.so.0 the side loads (lmdb-utils' tools carry a static copy of LMDB):
  kv.py load PATH DB [--subdir] KEY=VALUE...   (DB '-' is the main database)
  kv.py dump PATH DB [--subdir]
"""
import sys

import lmdb

cmd, path, name = sys.argv[1:4]
rest = sys.argv[4:]
subdir = "--subdir" in rest
rest = [a for a in rest if a != "--subdir"]
env = lmdb.open(path, subdir=subdir, max_dbs=8, map_size=64 << 20, readonly=(cmd == "dump"))
db = None if name == "-" else env.open_db(name.encode(), create=(cmd == "load"))
if cmd == "load":
    with env.begin(write=True, db=db) as txn:
        for kv in rest:
            k, v = kv.split("=", 1)
            txn.put(k.encode(), v.encode(), db=db)
else:
    with env.begin(db=db) as txn:
        for k, v in txn.cursor(db=db):
            print("%s=%s" % (k.decode(errors="replace"), v.decode(errors="replace")))
env.close()
