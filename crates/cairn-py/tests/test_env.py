"""Environment: open options, methods, close, and module-level API."""
import os
import threading

import pytest

import cairn


def test_module_api():
    assert cairn.open is cairn.Environment
    assert isinstance(cairn.version(), tuple) and len(cairn.version()) == 3
    assert len(cairn.version(subpatch=True)) == 4
    for name in cairn.__all__:
        assert hasattr(cairn, name), name
    cairn.enable_drop_gil()


EXC = [
    "KeyExistsError", "NotFoundError", "PageNotFoundError", "CorruptedError", "PanicError",
    "VersionMismatchError", "InvalidError", "MapFullError", "DbsFullError", "ReadersFullError",
    "TlsFullError", "TxnFullError", "CursorFullError", "PageFullError", "MapResizedError",
    "IncompatibleError", "BadDbiError", "BadRslotError", "BadTxnError", "BadValsizeError",
    "ReadonlyError", "InvalidParameterError", "LockError", "MemoryError", "DiskError",
]


@pytest.mark.parametrize("name", EXC)
def test_exception_hierarchy(name):
    cls = getattr(cairn, name)
    assert issubclass(cls, cairn.Error) and cls is not cairn.Error
    assert issubclass(cairn.Error, Exception)
    assert cls.MDB_NAME
    assert name in cairn.__all__


def test_open_creates_directory_and_reopens(tmp_path):
    p = str(tmp_path / "x")
    with cairn.open(p) as env:
        assert os.path.isdir(p)
        assert env.path() == p
        with env.begin(write=True) as t:
            t.put(b"a", b"1")
    with cairn.Environment(p) as env:
        assert env.begin().get(b"a") == b"1"


def test_open_pathlike_and_bytes(tmp_path):
    with cairn.open(tmp_path / "pl") as env:
        env.begin().get(b"x")
    with cairn.open(os.fsencode(str(tmp_path / "b"))) as env:
        env.begin().get(b"x")


def test_create_false_missing_dir(tmp_path):
    with pytest.raises(cairn.Error):
        cairn.open(str(tmp_path / "missing"), create=False)


def test_subdir_false(tmp_path):
    p = str(tmp_path / "file.db")
    with cairn.open(p, subdir=False) as env:
        with env.begin(write=True) as t:
            t.put(b"a", b"b")
        assert env.flags()["subdir"] is False
    assert os.path.isfile(p)


def test_mode_applies_to_new_file(tmp_path):
    p = tmp_path / "m"
    with cairn.open(str(p), mode=0o700):
        pass
    # LMDB's file names (data.mdb, lock.mdb), both with the mode less the execute bits.
    assert (os.stat(p / "data.mdb").st_mode & 0o777) == 0o600
    assert (os.stat(p / "lock.mdb").st_mode & 0o777) == 0o600
    assert not (p / "data.cairn").exists()


def test_lock_false_creates_no_lock_file(tmp_path):
    p = tmp_path / "nolock"
    with cairn.open(str(p), lock=False) as env:
        with env.begin(write=True) as t:
            t.put(b"k", b"v")
        with env.begin() as t:
            assert t.get(b"k") == b"v"
    assert (p / "data.mdb").is_file()
    assert not (p / "lock.mdb").exists()


def test_txn_ids_count_as_lmdb(tmp_path):
    with cairn.open(str(tmp_path / "ids")) as env:
        assert env.info()["last_txnid"] == 0
        with env.begin(write=True) as t:
            assert t.id() == 1
            t.put(b"k", b"v")
        assert env.info()["last_txnid"] == 1
        with env.begin() as t:
            assert t.id() == 1


def test_readonly(tmp_path):
    p = str(tmp_path / "ro")
    with cairn.open(p) as env:
        with env.begin(write=True) as t:
            t.put(b"k", b"v")
    with cairn.open(p, readonly=True) as env:
        assert env.readonly and env.flags()["readonly"]
        assert env.begin().get(b"k") == b"v"
        with pytest.raises(cairn.ReadonlyError):
            env.begin(write=True)
        with pytest.raises(cairn.Error):
            env.open_db(b"nope")


def test_readonly_missing(tmp_path):
    with pytest.raises(cairn.Error):
        cairn.open(str(tmp_path / "none"), readonly=True)


def test_double_open_refused(tmp_path):
    p = str(tmp_path / "d")
    with cairn.open(p):
        with pytest.raises(cairn.Error):
            cairn.open(p)
    cairn.open(p).close()


def test_dropped_environment_closes(tmp_path):
    import gc

    p = str(tmp_path / "drop")
    env = cairn.open(p)
    t = env.begin(write=True)
    t.put(b"a", b"1")
    del env, t
    gc.collect()
    with cairn.open(p) as env2:
        assert env2.begin().get(b"a") is None
        with env2.begin(write=True) as t:
            t.put(b"b", b"2")


def test_close_while_a_writer_waits(tmp_path):
    env = cairn.open(str(tmp_path / "cw"))
    first = env.begin(write=True)
    out = []

    def waiter():
        try:
            env.begin(write=True)
            out.append("began")
        except cairn.Error as e:
            out.append(type(e))

    th = threading.Thread(target=waiter)
    th.start()
    th.join(0.3)
    env.close()  # aborts `first`, which lets the waiter's begin proceed on a closed env
    th.join(10)
    assert out == [cairn.Error]
    with pytest.raises(cairn.Error):
        first.put(b"a", b"b")


def test_flags_reports_options(tmp_path):
    with cairn.open(str(tmp_path / "f"), sync=False, metasync=False, writemap=True,
                    map_async=True, readahead=False, meminit=False, lock=True) as env:
        f = env.flags()
        assert f == {"subdir": True, "readonly": False, "metasync": False, "sync": False,
                     "map_async": True, "readahead": False, "writemap": True,
                     "meminit": False, "lock": True}


def test_stat_info_sizes(filled):
    s = filled.stat()
    assert s["entries"] == 10 and s["psize"] == 4096 and s["depth"] >= 1
    assert set(s) == {"psize", "depth", "branch_pages", "leaf_pages", "overflow_pages",
                      "entries"}
    i = filled.info()
    assert set(i) == {"map_addr", "map_size", "last_pgno", "last_txnid", "max_readers",
                      "num_readers"}
    assert i["last_txnid"] >= 1 and i["max_readers"] == 126
    assert filled.max_key_size() > 400
    assert filled.max_readers() == 126


def test_readers_and_reader_check(env):
    t = env.begin()
    t.get(b"x")
    text = env.readers()
    assert text.splitlines()[0].split() == ["pid", "thread", "txnid"]
    assert str(os.getpid()) in text
    assert env.reader_check() == 0
    t.abort()


def test_map_size_limit_and_set_mapsize(tmp_path):
    with cairn.open(str(tmp_path / "full"), map_size=1 << 20) as env:
        assert env.info()["map_size"] == 1 << 20
        val = b"x" * 4000
        with pytest.raises(cairn.MapFullError):
            for i in range(1000):
                with env.begin(write=True) as t:
                    t.put(b"%06d" % i, val)
        n = env.stat()["entries"]
        assert 0 < n < 1000
        env.set_mapsize(16 << 20)
        assert env.info()["map_size"] == 16 << 20
        with env.begin(write=True) as t:
            for i in range(n, n + 1000):
                t.put(b"%06d" % i, val)
        assert env.stat()["entries"] == n + 1000


def test_set_mapsize_refused_with_active_writer(env):
    t = env.begin(write=True)
    with pytest.raises(cairn.Error):
        env.set_mapsize(1 << 30)
    t.abort()
    env.set_mapsize(1 << 30)


def test_sync(tmp_path):
    with cairn.open(str(tmp_path / "s"), sync=False) as env:
        with env.begin(write=True) as t:
            t.put(b"a", b"b")
        env.sync()
        env.sync(True)


def test_copy_and_compact_copy(filled, tmp_path):
    for compact in (False, True):
        dest = tmp_path / ("copy%d" % compact)
        dest.mkdir()
        filled.copy(str(dest), compact=compact)
        with cairn.open(str(dest), readonly=True) as c:
            assert c.begin().get(b"k3") == b"v3"
            assert c.stat()["entries"] == 10


def test_copy_from_txn(filled, tmp_path):
    t = filled.begin()
    with filled.begin(write=True) as w:
        w.put(b"later", b"x")
    dest = tmp_path / "ct"
    dest.mkdir()
    filled.copy(str(dest), compact=True, txn=t)
    with cairn.open(str(dest), readonly=True) as c:
        assert c.begin().get(b"later") is None
        assert c.begin().get(b"k1") == b"v1"


def test_copy_missing_dir(filled, tmp_path):
    with pytest.raises(cairn.Error):
        filled.copy(str(tmp_path / "nope"))


def test_copyfd(filled, tmp_path):
    out = tmp_path / "fdcopy"
    out.mkdir()
    fd = os.open(str(out / "data.cairn"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        filled.copyfd(fd)
    finally:
        os.close(fd)
    with cairn.open(str(out), readonly=True) as c:
        assert c.begin().get(b"k9") == b"v9"


def test_copyfd_bad_descriptor(filled, tmp_path):
    with pytest.raises(cairn.Error):
        filled.copyfd(-1)
    r, w = os.pipe()
    os.close(w)
    with pytest.raises(cairn.Error):
        filled.copyfd(w)  # closed
    os.close(r)


def test_close_aborts_transactions(tmp_path):
    env = cairn.open(str(tmp_path / "c"))
    w = env.begin(write=True)
    w.put(b"a", b"1")
    r = env.begin()
    cur = r.cursor()
    env.close()
    env.close()
    for f in (lambda: w.put(b"b", b"2"), lambda: r.get(b"a"), lambda: cur.first(),
              lambda: env.begin(), lambda: env.stat()):
        with pytest.raises(cairn.Error):
            f()
    with cairn.open(str(tmp_path / "c")) as env2:
        assert env2.begin().get(b"a") is None


def test_context_manager_closes(tmp_path):
    with cairn.open(str(tmp_path / "cm")) as env:
        pass
    with pytest.raises(cairn.Error):
        env.begin()


def test_open_db(env):
    db = env.open_db(b"one")
    assert env.open_db(b"one") is db
    assert db.flags() == {"reverse_key": False, "dupsort": False, "integerkey": False,
                          "integerdup": False, "dupfixed": False}
    with pytest.raises(cairn.NotFoundError):
        env.open_db(b"two", create=False)
    with pytest.raises(TypeError):
        env.open_db("str-name")


def test_dbs(env):
    assert env.dbs() == []
    env.open_db(b"b")
    env.open_db(b"a")
    assert env.dbs() == [b"a", b"b"]
    r = env.begin()
    with env.begin(write=True) as t:
        env.open_db(b"c", txn=t)
    assert env.dbs() == [b"a", b"b", b"c"]
    assert env.dbs(txn=r) == [b"a", b"b"]


def test_open_db_needs_max_dbs(tmp_path):
    with cairn.open(str(tmp_path / "nodbs")) as env:
        with pytest.raises(cairn.DbsFullError):
            env.open_db(b"named")


def test_open_db_in_txn(env):
    with env.begin(write=True) as t:
        db = env.open_db(b"t", txn=t)
        t.put(b"a", b"b", db=db)
    assert env.begin(db=db).get(b"a") == b"b"


def test_open_db_flags_persist(env, tmp_path):
    db = env.open_db(b"rev", reverse_key=True)
    assert db.flags()["reverse_key"]
    with env.begin(write=True, db=db) as t:
        for k in (b"ab", b"ba", b"ca"):
            t.put(k, b"")
    # Reverse order compares from the last byte: "ba", "ca" (end in a) before "ab".
    assert [k for k, _ in env.begin(db=db).cursor()] == [b"ba", b"ca", b"ab"]


def test_integerkey_db(env):
    db = env.open_db(b"ints", integerkey=True)
    assert db.flags()["integerkey"]
    with env.begin(write=True, db=db) as t:
        for n in (300, 2, 70000, 1):
            t.put(n.to_bytes(8, "little"), b"%d" % n)
        with pytest.raises(cairn.BadValsizeError):
            t.put(b"abc", b"x")
    with env.begin(db=db) as t:
        assert [int.from_bytes(k, "little") for k in t.cursor().iternext(values=False)] == [
            1, 2, 300, 70000]


def test_begin_threads_wait_for_writer(env):
    w = env.begin(write=True)
    w.put(b"x", b"1")
    got = []

    def other():
        with env.begin(write=True) as t:
            got.append(t.get(b"x"))
            t.put(b"x", b"2")

    th = threading.Thread(target=other)
    th.start()
    th.join(0.3)
    assert th.is_alive()  # waiting for the writer, without holding the GIL
    w.commit()
    th.join(10)
    assert got == [b"1"]
    assert env.begin().get(b"x") == b"2"


def test_second_write_same_thread_refused(env):
    w = env.begin(write=True)
    with pytest.raises(cairn.Error):
        env.begin(write=True)
    w.abort()
    env.begin(write=True).abort()


def test_stubs_cover_the_api():
    import ast
    import pathlib

    pkg = pathlib.Path(cairn.__file__).parent
    assert (pkg / "py.typed").exists()
    tree = ast.parse((pkg / "__init__.pyi").read_text())
    names = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    names |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets}
    assert set(cairn.__all__) <= names
    for cls in (cairn.Environment, cairn.Transaction, cairn.Cursor):
        stub = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
        declared = {f.name for f in stub.body if isinstance(f, ast.FunctionDef)}
        public = {m for m in dir(cls) if not m.startswith("_")}
        assert public - {"readonly", "env", "db", "txn"} <= declared, cls


def test_docstrings():
    for cls in (cairn.Environment, cairn.Transaction, cairn.Cursor):
        assert cls.__doc__
        for m in dir(cls):
            if not m.startswith("_"):
                assert getattr(cls, m).__doc__, f"{cls.__name__}.{m}"


def _progress_during(fn, tmp_path):
    """How many times another Python thread ran while `fn` ran (0 if `fn` held the GIL)."""
    ticks = [0]
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks[0] += 1

    th = threading.Thread(target=spin)
    th.start()
    try:
        while ticks[0] == 0:
            pass
        before = ticks[0]
        fn()
        return ticks[0] - before
    finally:
        stop.set()
        th.join()


def test_gil_released_during_commit_and_copy(tmp_path):
    import sys

    sys.setswitchinterval(1.0)  # the spinning thread runs only where the GIL is released
    try:
        with cairn.open(str(tmp_path / "gil")) as env:
            t = env.begin(write=True)
            for i in range(100000):
                t.put(b"%08d" % i, b"x" * 200)
            assert _progress_during(t.commit, tmp_path) > 0
            dest = tmp_path / "gilcopy"
            dest.mkdir()
            assert _progress_during(lambda: env.copy(str(dest), compact=True), tmp_path) > 0
            # A call that holds the GIL shows no progress: the measure can fail.
            assert _progress_during(lambda: sum(range(2_000_000)), tmp_path) == 0
    finally:
        sys.setswitchinterval(0.005)


def test_copy_from_txn_while_another_thread_uses_it(tmp_path):
    # The copy holds the transaction with the GIL released; a thread using the same
    # transaction meanwhile waits for it (without the GIL), then reads what it should.
    with cairn.open(str(tmp_path / "src")) as env:
        with env.begin(write=True) as w:
            for i in range(100000):
                w.put(b"%08d" % i, b"x" * 200)
        t = env.begin()
        seen, errors = [], []

        def reader():
            try:
                for i in range(0, 100000, 997):
                    seen.append(t.get(b"%08d" % i))
            except Exception as e:  # pragma: no cover - reported below
                errors.append(e)

        dest = tmp_path / "dest"
        dest.mkdir()
        th = threading.Thread(target=reader)
        progress = _progress_during(
            lambda: (th.start(), env.copy(str(dest), compact=True, txn=t)), tmp_path
        )
        th.join()
        assert progress > 0
        assert not errors and len(seen) == 101 and all(v == b"x" * 200 for v in seen)
        t.abort()
        with cairn.open(str(dest), readonly=True) as c:
            assert c.stat()["entries"] == 100000


def test_an_lmdb_environment_is_refused_naming_cairn_migrate(tmp_path):
    # The first page of LMDB's data file: a meta page (flags 0x08) with LMDB's magic.
    head = bytearray(8192)
    head[10:12] = (0x08).to_bytes(2, "little")
    head[16:20] = (0xBEEFC0DE).to_bytes(4, "little")
    head[20:24] = (1).to_bytes(4, "little")
    (tmp_path / "data.mdb").write_bytes(bytes(head))
    with pytest.raises(cairn.InvalidError) as e:
        cairn.open(str(tmp_path))
    assert "cairn migrate" in str(e.value)
    assert not (tmp_path / "lock.mdb").exists()


def _real_lmdb_env(path):
    """An environment written by py-lmdb itself (the venv has it; skipped without it)."""
    lmdb = pytest.importorskip("lmdb")
    e = lmdb.open(str(path), max_dbs=4)
    d = e.open_db(b"dups", dupsort=True)
    with e.begin(write=True) as t:
        t.put(b"a", b"1")
        t.put(b"big", b"x" * 10000)
        for i in range(600):
            t.put(b"k", b"%05d" % i, db=d)
    e.close()


def _check_migrated(e):
    with e.begin() as t:
        assert t.get(b"a") == b"1" and t.get(b"big") == b"x" * 10000
        d = e.open_db(b"dups", txn=t, create=False)
        c = t.cursor(d)
        assert c.set_key(b"k") and c.count() == 600


def test_migrate_lmdb_keyword_converts_in_place(tmp_path):
    p = tmp_path / "db"
    _real_lmdb_env(p)
    e = cairn.open(str(p), max_dbs=4, migrate_lmdb=True)
    _check_migrated(e)
    e.close()
    assert (p / "data.mdb.lmdb-backup").exists()
    # Opened again without the keyword: it is Cairn's now.
    e = cairn.open(str(p), max_dbs=4)
    _check_migrated(e)
    e.close()


def test_cairn_migrate_on_open_environment_variable(tmp_path):
    import subprocess
    import sys
    p = tmp_path / "db"
    _real_lmdb_env(p)
    code = "import cairn; e = cairn.open(%r, max_dbs=4); print(e.stat()['entries'])" % str(p)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env=dict(os.environ, CAIRN_MIGRATE_ON_OPEN="1"))
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"
    assert (p / "data.mdb.lmdb-backup").exists()
