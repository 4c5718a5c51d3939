"""py-lmdb's object model and argument rules, as its own test suite holds them (issue 19):
each test here fails without the change it names."""
import gc
import os
import weakref

import pytest

import cairn


def test_all_is_pylmdbs_list():
    assert sorted(cairn.__all__) == sorted(
        ["Cursor", "Environment", "Transaction", "_Database", "enable_drop_gil", "version"]
        + [n for n in dir(cairn) if n.endswith("Error")]
    )
    assert "open" not in cairn.__all__ and cairn.open is cairn.Environment


def test_version_subpatch_says_txn_copy_works():
    assert cairn.version(subpatch=True)[3] == 1


def test_environment_weakref(tmp_path):
    env = cairn.open(str(tmp_path / "e"))
    called = []
    r = weakref.ref(env, lambda _: called.append(1))
    assert r() is env
    env.close()
    del env
    gc.collect()
    assert r() is None and called == [1]


def test_closed_environment_raises(tmp_path):
    env = cairn.open(str(tmp_path / "e"))
    txn = env.begin()
    env.close()
    for f in (env.path, env.flags, env.info, env.stat, env.begin, txn.commit):
        with pytest.raises(cairn.Error):
            f()
    txn.abort()  # abort stays harmless


def test_finished_transaction_commit_raises(env):
    for write in (False, True):
        t = env.begin(write=write)
        t.commit()
        with pytest.raises(cairn.Error):
            t.commit()
        t.abort()
        t = env.begin(write=write)
        t.abort()
        with pytest.raises(cairn.Error):
            t.commit()
    # Ended inside a `with`: leaving the block is a no-op (py-lmdb's CFFI implementation; its
    # C one raises there).
    with env.begin(write=True) as t:
        t.put(b"a", b"1")
        t.commit()
    assert env.begin().get(b"a") == b"1"


def test_readers_when_none(tmp_path):
    env = cairn.open(str(tmp_path / "e"))
    assert env.readers() == "(no active readers)\n"
    t = env.begin()
    assert env.readers() != "(no active readers)\n"
    t.abort()
    env.close()


def test_database_flags_takes_txn(env):
    db = env.open_db(b"d", dupsort=True)
    with env.begin() as t:
        assert db.flags(t)["dupsort"] and db.flags(None)["dupsort"] and db.flags()["dupsort"]
    with pytest.raises(TypeError):
        db.flags(1, 2, 3)


def test_main_db_flags_refused_with_value_error(env):
    with pytest.raises(ValueError):
        env.open_db(None, dupsort=True)


def test_open_db_create_where_read_only_raises_readonly(tmp_path):
    p = str(tmp_path / "e")
    cairn.open(p, max_dbs=4).close()
    env = cairn.open(p, max_dbs=4, readonly=True)
    with pytest.raises(cairn.ReadonlyError):
        env.open_db(b"missing", create=True)
    with pytest.raises(cairn.NotFoundError):
        env.open_db(b"missing", create=False)
    env.close()
    env = cairn.open(p, max_dbs=4)
    with env.begin() as t:
        with pytest.raises(cairn.ReadonlyError):
            env.open_db(b"missing", txn=t)
    env.close()


def test_dropped_database_handle_is_closed(env):
    db = env.open_db(b"d")
    t = env.begin(write=True, db=db)
    t.put(b"a", b"1", db=db)
    t.drop(db)
    with pytest.raises(cairn.InvalidParameterError):
        t.get(b"a", db=db)
    with pytest.raises(cairn.InvalidParameterError):
        t.drop(db)
    with pytest.raises(cairn.InvalidParameterError):
        t.get(b"a")  # the transaction's own database
    t.abort()


def test_empty_keys_refused(env):
    with env.begin(write=True) as t:
        for f in (lambda: t.get(b""), lambda: t.put(b"", b"v"), lambda: t.delete(b""),
                  lambda: t.replace(b"", b"v"), lambda: t.pop(b"")):
            with pytest.raises(cairn.BadValsizeError):
                f()
        c = t.cursor()
        t.put(b"a", b"1")
        for f in (lambda: c.set_key(b""), lambda: c.get(b""), lambda: c.put(b"", b"v"),
                  lambda: c.putmulti([(b"", b"v")]), lambda: c.getmulti([b""])):
            with pytest.raises(cairn.BadValsizeError):
                f()
        # py-lmdb's set_range(b"") starts from the first key.
        assert c.set_range(b"") and c.key() == b"a"


def test_regular_file_is_not_an_environment_directory(tmp_path):
    f = tmp_path / "file"
    f.write_bytes(b"")
    with pytest.raises(cairn.Error):
        cairn.open(str(f))


def test_set_mapsize_ends_open_transactions(tmp_path):
    env = cairn.open(str(tmp_path / "e"), map_size=1 << 20)
    t = env.begin()
    c = t.cursor()
    env.set_mapsize(2 << 20)
    with pytest.raises(cairn.Error):
        t.get(b"a")
    with pytest.raises(cairn.Error):
        c.first()
    env.close()


def test_copy_from_txn_needs_compact(filled, tmp_path):
    with filled.begin() as t:
        with pytest.raises(TypeError):
            filled.copy(str(tmp_path), txn=t)
        fd = os.open(str(tmp_path / "f"), os.O_WRONLY | os.O_CREAT)
        try:
            with pytest.raises(TypeError):
                filled.copyfd(fd, txn=t)
        finally:
            os.close(fd)


def test_cffi_private_attributes_for_aio(filled):
    # py-lmdb's CFFI implementation has them (its C one does not); lmdb.aio's test reads them.
    t = filled.begin()
    c = t.cursor()
    assert t._pyenv is filled and c._pytxn is t and c._pydb is c.db


# Several cursors of one write transaction (issue 19, item 6): LMDB's answers, checked
# against py-lmdb 2.3.0.


def _abcde(env):
    t = env.begin(write=True)
    for k in (b"a", b"b", b"c", b"d", b"e"):
        t.put(k, b"v")
    return t


def test_sibling_cursor_waits_in_the_gap_of_a_deleted_pair(env):
    t = _abcde(env)
    c1, c2 = t.cursor(), t.cursor()
    it = c1.iternext(values=False)
    assert next(it) == b"a" and next(it) == b"b"
    assert c2.set_key(b"b") and c2.delete()
    assert next(it) == b"c"  # not skipped
    assert next(it) == b"d"
    c1.set_key(b"c")
    t.delete(b"c")
    assert c1.next() and c1.key() == b"d"
    c1.set_key(b"d")
    t.delete(b"d")
    assert c1.prev() and c1.key() == b"a"
    # Reading the key ends the wait: the next step moves on.
    c1.set_key(b"a")
    t.delete(b"a")
    assert c1.key() == b"e" and not c1.next()
    t.abort()


def test_deleting_cursor_moves_on_and_waits_at_the_end(env):
    t = _abcde(env)
    c, c2 = t.cursor(), t.cursor()
    assert c.set_key(b"b") and c.delete()
    assert c.key() == b"c" and c.next() and c.key() == b"d"
    assert c2.set_key(b"e")
    t.delete(b"e")
    t.put(b"f", b"v")
    assert c2.key() == b"" and not c2.next()
    t.abort()


def test_reput_key_stays_behind_the_waiting_cursor(env):
    t = _abcde(env)
    c = t.cursor()
    assert c.set_key(b"b")
    t.delete(b"b")
    t.put(b"b", b"w")
    assert c.key() == b"c"
    t.abort()


def test_delete_through_txn_while_iterating(env):
    with env.begin(write=True) as t:
        keys = [b"%06x" % i for i in range(2000)]
        for k in keys:
            t.put(k, b"x" * 100)
        deleted = 0
        for k in t.cursor().iternext(values=False):
            assert t.delete(k)
            deleted += 1
        assert deleted == len(keys)


def test_dup_siblings_and_nodup_after_delete_put(env):
    db = env.open_db(b"d", dupsort=True)
    t = env.begin(write=True, db=db)
    for v in (b"a", b"b", b"c", b"d"):
        t.put(b"k", v)
    c, c2 = t.cursor(), t.cursor()
    assert c.set_key_dup(b"k", b"c") and c2.set_key_dup(b"k", b"c") and c.delete()
    assert c2.next_dup() and c2.item() == (b"k", b"d")
    assert c.set_key_dup(b"k", b"b") and c2.set_key_dup(b"k", b"b") and c.delete()
    assert c2.prev_dup() and c2.item() == (b"k", b"a")
    # py-lmdb issue 388: the re-inserted key is not "previous" / "next".
    c.set_key(b"k")
    c.last()
    t.delete(b"k")
    t.put(b"k", b"1")
    assert not c.prev_nodup()
    c.first()
    t.delete(b"k")
    t.put(b"k", b"1")
    t.put(b"k", b"2")
    assert not c.next_nodup()
    t.abort()


def test_failed_dup_step_keeps_position(env):
    db = env.open_db(b"d", dupsort=True)
    with env.begin(write=True, db=db) as t:
        for v in (b"1", b"2", b"3"):
            t.put(b"k", v)
    with env.begin(db=db) as t:
        c = t.cursor()
        assert c.set_key(b"k")
        while c.next_dup():
            pass
        assert c.key() == b""  # unpositioned, as py-lmdb reports
        assert c.count() == 3
        assert c.last_dup() and c.value() == b"3"
        vals = [c.value()]
        while c.prev_dup():
            vals.append(c.value())
        assert vals == [b"3", b"2", b"1"]
        assert c.first_dup() and c.value() == b"1"


def test_count_outside_dupsort_is_incompatible(filled):
    c = filled.begin().cursor()
    assert c.first()
    with pytest.raises(cairn.IncompatibleError):
        c.count()


def test_weakrefs_to_transaction_and_database(env):
    # py-lmdb: Transaction (and Environment); Cairn also allows them to _Database and Cursor.
    t = env.begin()
    db = env.open_db(b"d")
    refs = [weakref.ref(o) for o in (t, db)]
    assert [r() for r in refs] == [t, db]


def test_open_creates_only_the_last_directory(tmp_path):
    with pytest.raises(Exception):
        cairn.open(str(tmp_path / "missing" / "e"))
    assert not (tmp_path / "missing").exists()
    cairn.open(str(tmp_path / "e")).close()


def test_map_size_below_a_page_is_raised(tmp_path):
    env = cairn.open(str(tmp_path / "e"), map_size=10)
    with pytest.raises(cairn.MapFullError):
        with env.begin(write=True) as t:
            t.put(b"a", b"a" * 10000)
    env.close()


def _reader_lines(env):
    return env.readers().count("\n") - 1


def test_max_spare_txns_counts_as_pylmdb(tmp_path):
    env = cairn.open(str(tmp_path / "a"), max_spare_txns=0)
    assert env.readers() == "(no active readers)\n"
    t1, t2 = env.begin(), env.begin()
    assert _reader_lines(env) == 2
    t1.abort()
    del t1
    assert _reader_lines(env) == 1
    t2.abort()
    del t2
    assert env.readers() == "(no active readers)\n"
    env.close()
    env = cairn.open(str(tmp_path / "b"), max_spare_txns=1)
    t1, t2 = env.begin(), env.begin()
    t1.abort()
    del t1
    assert _reader_lines(env) == 2  # one live, one spare
    t2.abort()
    assert _reader_lines(env) == 2  # an ended one's slot goes with its object
    del t2
    assert _reader_lines(env) == 1  # one spare
    t3 = env.begin()
    assert _reader_lines(env) == 1  # the spare, taken
    t3.abort()
    env.close()


def test_forked_child_leaves_parents_reader(env):
    with env.begin(write=True) as t:
        t.put(b"a", b"1")
    txn = env.begin()
    before = env.readers()
    pid = os.fork()
    if pid == 0:
        try:
            del txn
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert env.readers() == before and txn.get(b"a") == b"1"


def test_handle_opened_in_an_open_txn_is_its_own_until_it_ends(tmp_path):
    p = str(tmp_path / "e")
    env = cairn.open(p, max_dbs=4)
    env.open_db(b"db", dupsort=True)
    env.close()
    env = cairn.open(p, max_dbs=4, readonly=True)
    t1 = env.begin()
    db = env.open_db(b"db", dupsort=True, txn=t1)
    t2 = env.begin()
    assert t1.cursor(db=db).first() is False
    with pytest.raises(cairn.InvalidParameterError):
        t2.cursor(db=db)
    with pytest.raises(cairn.InvalidParameterError):
        t2.get(b"k", db=db)
    t1.abort()
    assert env.begin().get(b"k", db=db) is None
    env.close()


def test_open_db_after_another_process_grew_the_map(tmp_path):
    import subprocess
    import sys

    p = str(tmp_path / "e")
    cairn.open(p, max_dbs=4, map_size=1 << 16).close()
    env = cairn.open(p, max_dbs=4, map_size=1 << 16, readonly=True)
    grow = (
        "import %s as cairn\n"
        "with cairn.open(%r, max_dbs=4, map_size=1 << 20) as e:\n"
        "    with e.begin(write=True) as t:\n"
        "        for i in range(3000):\n"
        "            t.put(b'%%06d' %% i, b'x' * 100)\n" % (cairn.__name__, p)
    )
    subprocess.run([sys.executable, "-c", grow], check=True)
    with pytest.raises(cairn.MapResizedError):
        env.open_db(b"foo", create=False)
    env.set_mapsize(0)  # adopts the size the environment has now
    with pytest.raises(cairn.NotFoundError):
        env.open_db(b"foo", create=False)
    assert env.begin().get(b"000001") == b"x" * 100
    env.close()
    # A map_size below the data already there at open is raised to it (no error).
    env = cairn.open(p, max_dbs=4, map_size=1 << 16, readonly=True)
    with pytest.raises(cairn.NotFoundError):
        env.open_db(b"foo", create=False)
    env.close()


def test_iter_from(filled):
    c = filled.begin().cursor()
    assert [k for k, _ in c._iter_from(b"k7", False)] == [b"k7", b"k8", b"k9"]
    assert [k for k, _ in c._iter_from(b"", False)][:2] == [b"k0", b"k1"]
    assert [k for k, _ in c._iter_from(b"k2", True)] == [b"k2", b"k1", b"k0"]
    assert [k for k, _ in c._iter_from(b"z", True)][:2] == [b"k9", b"k8"]
    assert list(c._iter_from(b"z", False)) == []


def test_failed_step_stays_at_the_edge(filled):
    # LMDB keeps the cursor where a step failed; py-lmdb reports it unpositioned, and the
    # next step moves from that edge (not around from the other end).
    c = filled.begin().cursor()
    assert c.last() and not c.next() and c.key() == b""
    assert not c.next()
    assert c.last() and not c.next() and c.prev() and c.key() == b"k8"
    assert c.first() and not c.prev() and not c.prev()
    assert c.first() and not c.prev() and c.next() and c.key() == b"k1"
    assert c.first() and not c.prev_nodup() and c.next() and c.key() == b"k1"
