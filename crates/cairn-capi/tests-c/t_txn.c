/* Transactions: nested commit/abort, reset/renew, dbi handles across transactions, cursor
 * renew, MDB_RESERVE, MDB_APPEND/APPENDDUP, values valid until the transaction ends. */
#include "check.h"

static int get_is(MDB_txn *txn, MDB_dbi dbi, const char *key, const char *want) {
	MDB_val k = sv(key), v;
	int rc = mdb_get(txn, dbi, &k, &v);
	if (want == NULL) return rc == MDB_NOTFOUND;
	return rc == 0 && veq(v, want);
}

int main(void) {
	MDB_env *env = open_env("t_txn", 0, 4);
	MDB_txn *txn, *child, *grand, *r;
	MDB_dbi dbi, named;
	MDB_val k, v;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, "named", MDB_CREATE, &named));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	k = sv("a"), v = sv("1");
	CHECK(mdb_put(txn, dbi, &k, &v, 0));
	/* nested: the child's changes join the parent on commit, vanish on abort */
	CHECK(mdb_txn_begin(env, txn, 0, &child));
	TRUE(mdb_txn_id(child) == mdb_txn_id(txn));
	k = sv("b"), v = sv("2");
	CHECK(mdb_put(child, dbi, &k, &v, 0));
	/* the parent is unusable while the child lives */
	EXPECT(mdb_put(txn, dbi, &k, &v, 0), MDB_BAD_TXN);
	CHECK(mdb_txn_begin(env, child, 0, &grand));
	k = sv("c"), v = sv("3");
	CHECK(mdb_put(grand, named, &k, &v, 0));
	mdb_txn_abort(grand);
	TRUE(get_is(child, named, "c", NULL));
	CHECK(mdb_txn_commit(child));
	TRUE(get_is(txn, dbi, "b", "2"));
	CHECK(mdb_txn_begin(env, txn, 0, &child));
	k = sv("d"), v = sv("4");
	CHECK(mdb_put(child, dbi, &k, &v, 0));
	mdb_txn_abort(child);
	TRUE(get_is(txn, dbi, "d", NULL));
	/* committing a parent commits its live child */
	CHECK(mdb_txn_begin(env, txn, 0, &child));
	k = sv("e"), v = sv("5");
	CHECK(mdb_put(child, named, &k, &v, 0));
	CHECK(mdb_txn_commit(txn));

	/* dbi handles stay valid in later transactions; values stay valid until the end */
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	TRUE(get_is(r, named, "e", "5") && get_is(r, dbi, "a", "1"));
	k = sv("a");
	MDB_val held;
	CHECK(mdb_get(r, dbi, &k, &held));
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	k = sv("a"), v = sv("changed");
	CHECK(mdb_put(txn, dbi, &k, &v, 0));
	CHECK(mdb_txn_commit(txn));
	TRUE(veq(held, "1"));
	TRUE(get_is(r, dbi, "a", "1"));
	/* reset/renew: the renewed snapshot sees the new commit; cursors renew */
	MDB_cursor *cur;
	CHECK(mdb_cursor_open(r, dbi, &cur));
	mdb_txn_reset(r);
	EXPECT(mdb_get(r, dbi, &k, &v), MDB_BAD_TXN);
	CHECK(mdb_txn_renew(r));
	TRUE(get_is(r, dbi, "a", "changed"));
	CHECK(mdb_cursor_renew(r, cur));
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_FIRST));
	TRUE(veq(k, "a") && veq(v, "changed"));
	TRUE(mdb_cursor_txn(cur) == r && mdb_cursor_dbi(cur) == dbi);
	mdb_txn_abort(r);
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	CHECK(mdb_cursor_renew(r, cur));
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_LAST));
	TRUE(veq(k, "named")); /* a named database's name is a key of the main one, as in LMDB */
	mdb_cursor_close(cur);
	mdb_txn_abort(r);

	/* MDB_RESERVE: fill the returned space; MDB_APPEND: in order, or MDB_KEYEXIST */
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	k = sv("r"), v.mv_size = 5000, v.mv_data = NULL;
	CHECK(mdb_put(txn, named, &k, &v, MDB_RESERVE));
	TRUE(v.mv_data != NULL && v.mv_size == 5000);
	memset(v.mv_data, 'x', 5000);
	CHECK(mdb_cursor_open(txn, named, &cur));
	k = sv("s"), v.mv_size = 3, v.mv_data = NULL;
	CHECK(mdb_cursor_put(cur, &k, &v, MDB_RESERVE));
	memcpy(v.mv_data, "abc", 3);
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_GET_CURRENT));
	TRUE(veq(k, "s") && veq(v, "abc"));
	v = sv("ABC");
	CHECK(mdb_cursor_put(cur, &k, &v, MDB_CURRENT));
	mdb_cursor_close(cur);
	MDB_dbi app;
	CHECK(mdb_dbi_open(txn, "append", MDB_CREATE, &app));
	char kb[16];
	for (int i = 0; i < 3000; i++) {
		snprintf(kb, sizeof kb, "%08d", i);
		k = sv(kb), v = sv(kb);
		CHECK(mdb_put(txn, app, &k, &v, MDB_APPEND));
	}
	k = sv("00000005");
	EXPECT(mdb_put(txn, app, &k, &v, MDB_APPEND), MDB_KEYEXIST);
	CHECK(mdb_txn_commit(txn));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	k = sv("r");
	CHECK(mdb_get(r, named, &k, &v));
	TRUE(v.mv_size == 5000 && ((char *)v.mv_data)[4999] == 'x');
	TRUE(get_is(r, named, "s", "ABC"));
	MDB_stat st;
	CHECK(mdb_stat(r, app, &st));
	TRUE(st.ms_entries == 3000);
	mdb_txn_abort(r);

	/* mdb_drop: empty, then delete */
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_drop(txn, app, 0));
	CHECK(mdb_stat(txn, app, &st));
	TRUE(st.ms_entries == 0);
	CHECK(mdb_drop(txn, app, 1));
	CHECK(mdb_txn_commit(txn));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	EXPECT(mdb_dbi_open(r, "append", 0, &app), MDB_NOTFOUND);
	mdb_txn_abort(r);

	/* Handles are recycled (a finished one is the next begin's): nothing of the old
	 * transaction shows through, neither its state nor handles closed since. */
	MDB_dbi gone;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, "gone", MDB_CREATE, &gone));
	k = sv("g"), v = sv("7");
	CHECK(mdb_put(txn, gone, &k, &v, 0));
	CHECK(mdb_txn_commit(txn));
	for (int i = 0; i < 3; i++) {
		CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
		TRUE(get_is(r, gone, "g", "7") && get_is(r, dbi, "a", "changed"));
		mdb_txn_reset(r);
		EXPECT(mdb_get(r, gone, &k, &v), MDB_BAD_TXN);
		CHECK(mdb_txn_renew(r));
		TRUE(get_is(r, gone, "g", "7"));
		mdb_txn_abort(r);
	}
	mdb_dbi_close(env, gone);
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	k = sv("g");
	EXPECT(mdb_get(r, gone, &k, &v), EINVAL); /* not the handle cached before the close */
	TRUE(mdb_txn_id(r) > 0);
	mdb_txn_abort(r);
	/* a write transaction and its child in turn take the recycled boxes */
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_txn_begin(env, txn, 0, &child));
	k = sv("h"), v = sv("8");
	CHECK(mdb_put(child, dbi, &k, &v, 0));
	CHECK(mdb_txn_commit(child));
	CHECK(mdb_txn_commit(txn));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	TRUE(get_is(r, dbi, "h", "8"));
	EXPECT(mdb_put(r, dbi, &k, &v, 0), EACCES); /* a read handle, whatever the box was */
	mdb_txn_abort(r);
	mdb_env_close(env);
	printf("t_txn ok\n");
	return 0;
}
