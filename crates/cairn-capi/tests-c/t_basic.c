/* Environment, transactions, get/put/del, cursors over a plain database. */
#include "check.h"

int main(void) {
	MDB_env *env = open_env("t_basic", 0, 4);
	MDB_txn *txn;
	MDB_dbi dbi;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	char kb[32], vb[32];
	for (int i = 0; i < 1000; i++) {
		snprintf(kb, sizeof kb, "key%05d", i);
		snprintf(vb, sizeof vb, "value%d", i * 7);
		MDB_val k = sv(kb), v = sv(vb);
		CHECK(mdb_put(txn, dbi, &k, &v, 0));
	}
	MDB_val k = sv("key00005"), v;
	CHECK(mdb_get(txn, dbi, &k, &v));
	TRUE(veq(v, "value35"));
	CHECK(mdb_txn_commit(txn));

	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	MDB_stat st;
	CHECK(mdb_stat(txn, dbi, &st));
	TRUE(st.ms_entries == 1000);
	MDB_cursor *cur;
	CHECK(mdb_cursor_open(txn, dbi, &cur));
	int n = 0;
	MDB_val ck, cv;
	while (mdb_cursor_get(cur, &ck, &cv, MDB_NEXT) == 0) n++;
	TRUE(n == 1000);
	k = sv("key00500");
	CHECK(mdb_cursor_get(cur, &k, &cv, MDB_SET_RANGE));
	TRUE(veq(k, "key00500") && veq(cv, "value3500"));
	CHECK(mdb_cursor_get(cur, &ck, &cv, MDB_PREV));
	TRUE(veq(ck, "key00499"));
	EXPECT(mdb_cursor_get(cur, &ck, &cv, 99), EINVAL);
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);

	/* delete through a cursor in a write transaction, then NEXT lands on the successor */
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_cursor_open(txn, dbi, &cur));
	k = sv("key00010");
	CHECK(mdb_cursor_get(cur, &k, &cv, MDB_SET));
	CHECK(mdb_cursor_del(cur, 0));
	CHECK(mdb_cursor_get(cur, &ck, &cv, MDB_NEXT));
	TRUE(veq(ck, "key00011"));
	k = sv("key00011");
	EXPECT(mdb_del(txn, dbi, &k, NULL), 0);
	EXPECT(mdb_del(txn, dbi, &k, NULL), MDB_NOTFOUND);
	v = sv("x");
	k = sv("key00012");
	EXPECT(mdb_put(txn, dbi, &k, &v, MDB_NOOVERWRITE), MDB_KEYEXIST);
	TRUE(veq(v, "value84"));
	CHECK(mdb_txn_commit(txn));
	CHECK(mdb_env_stat(env, &st));
	TRUE(st.ms_entries == 998);

	/* A cursor keeps its place while the same transaction writes elsewhere: walk every key,
	 * rewriting each visited value and adding a key that sorts before the cursor. */
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_cursor_open(txn, dbi, &cur));
	n = 0;
	int rc;
	while ((rc = mdb_cursor_get(cur, &ck, &cv, MDB_NEXT)) == 0) {
		TRUE(ck.mv_size == 8 && memcmp(ck.mv_data, "key", 3) == 0);
		char kcopy[16];
		memcpy(kcopy, ck.mv_data, 8);
		kcopy[8] = 0;
		MDB_val nk = sv(kcopy), nv = sv("rewritten");
		CHECK(mdb_put(txn, dbi, &nk, &nv, 0));
		snprintf(kb, sizeof kb, "a%05d", n);
		nk = sv(kb), nv = sv("early");
		CHECK(mdb_put(txn, dbi, &nk, &nv, 0));
		n++;
	}
	EXPECT(rc, MDB_NOTFOUND);
	TRUE(n == 998);
	mdb_cursor_close(cur);
	CHECK(mdb_txn_commit(txn));
	CHECK(mdb_env_stat(env, &st));
	TRUE(st.ms_entries == 2 * 998);
	mdb_env_close(env);
	printf("t_basic ok\n");
	return 0;
}
