/* What Debian's applications rely on (tests-apps; issue 19), each checked against Debian's LMDB
 * too: the main database's handle is LMDB's MAIN_DBI, 1, and never 0 (Perl's LMDB_File takes
 * a false dbi for a failed open); a read transaction reset and renewed keeps its cursors where
 * they were (PHP's dba lmdb handler walks with MDB_NEXT across mdb_txn_reset/renew without
 * mdb_cursor_renew). */
#include "check.h"

static void dbi_numbers(void) {
	MDB_env *env = open_env("t_apps_dbi", 0, 4);
	MDB_txn *txn;
	MDB_dbi main_dbi, a, b, again;
	MDB_cursor *cur;
	MDB_val k = sv("k"), v = sv("v"), out;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &main_dbi));
	TRUE(main_dbi == 1);
	CHECK(mdb_dbi_open(txn, "a", MDB_CREATE, &a));
	CHECK(mdb_dbi_open(txn, "b", MDB_CREATE, &b));
	TRUE(a >= 2 && b >= 2 && a != b);
	CHECK(mdb_put(txn, main_dbi, &k, &v, 0));
	CHECK(mdb_put(txn, a, &k, &k, 0));
	CHECK(mdb_cursor_open(txn, main_dbi, &cur));
	TRUE(mdb_cursor_dbi(cur) == main_dbi);
	mdb_cursor_close(cur);
	CHECK(mdb_txn_commit(txn));
	/* closing the main database's handle is a no-op in LMDB: it stays usable */
	mdb_dbi_close(env, main_dbi);
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &again));
	TRUE(again == 1);
	CHECK(mdb_get(txn, main_dbi, &k, &out));
	TRUE(veq(out, "v"));
	CHECK(mdb_dbi_open(txn, "a", 0, &again));
	TRUE(again == a);
	CHECK(mdb_get(txn, a, &k, &out));
	TRUE(veq(out, "k"));
	mdb_txn_abort(txn);
	mdb_env_close(env);
}

/* PHP's dba_firstkey / dba_nextkey: MDB_FIRST, then per key mdb_txn_reset, mdb_txn_renew and
 * MDB_NEXT on the same cursor. */
static void walk_across_reset(void) {
	MDB_env *env = open_env("t_apps_reset", 0, 2);
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_cursor *cur;
	MDB_val k, v;
	char buf[16];
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	for (int i = 0; i < 300; i++) {
		snprintf(buf, sizeof buf, "key%03d", i);
		k = sv(buf), v = sv(buf);
		CHECK(mdb_put(txn, dbi, &k, &v, 0));
	}
	CHECK(mdb_txn_commit(txn));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	CHECK(mdb_cursor_open(txn, dbi, &cur));
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_FIRST));
	TRUE(veq(k, "key000"));
	int n = 1, rc;
	for (;;) {
		mdb_txn_reset(txn);
		CHECK(mdb_txn_renew(txn));
		if ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) != 0) break;
		snprintf(buf, sizeof buf, "key%03d", n);
		TRUE(veq(k, buf) && veq(v, buf));
		TRUE(++n <= 300);
	}
	EXPECT(rc, MDB_NOTFOUND);
	TRUE(n == 300);
	/* the position is kept, not the snapshot's pages: GET_CURRENT after a renewal */
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_LAST));
	mdb_txn_reset(txn);
	CHECK(mdb_txn_renew(txn));
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_GET_CURRENT));
	TRUE(veq(k, "key299"));
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_PREV));
	TRUE(veq(k, "key298"));
	/* mdb_cursor_renew still starts the cursor afresh */
	mdb_txn_reset(txn);
	CHECK(mdb_txn_renew(txn));
	CHECK(mdb_cursor_renew(txn, cur));
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_NEXT));
	TRUE(veq(k, "key000"));
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	mdb_env_close(env);
}

int main(void) {
	dbi_numbers();
	walk_across_reset();
	printf("t_apps: ok\n");
	return 0;
}
