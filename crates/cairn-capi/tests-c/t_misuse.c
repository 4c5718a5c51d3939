/* Misuse returns LMDB's codes instead of crashing: NULL handles, unknown dbi, writes in a
 * read-only transaction, a busy parent, a transaction after MDB_MAP_FULL. */
#include "check.h"

int main(void) {
	MDB_val k = sv("k"), v = sv("v");
	MDB_dbi dbi = 0;
	MDB_stat st;
	size_t n;
	EXPECT(mdb_env_create(NULL), EINVAL);
	EXPECT(mdb_env_open(NULL, "/tmp", 0, 0644), EINVAL);
	EXPECT(mdb_env_stat(NULL, &st), EINVAL);
	EXPECT(mdb_txn_begin(NULL, NULL, 0, NULL), EINVAL);
	EXPECT(mdb_txn_begin(NULL, NULL, MDB_RDONLY, NULL), EINVAL);
	EXPECT(mdb_txn_commit(NULL), EINVAL);
	mdb_txn_abort(NULL);
	mdb_env_close(NULL);
	mdb_cursor_close(NULL);
	EXPECT(mdb_get(NULL, 0, &k, &v), EINVAL);
	EXPECT(mdb_put(NULL, 0, &k, &v, 0), EINVAL);
	EXPECT(mdb_del(NULL, 0, &k, NULL), EINVAL);
	EXPECT(mdb_cursor_get(NULL, &k, &v, MDB_FIRST), EINVAL);
	EXPECT(mdb_cursor_count(NULL, &n), EINVAL);
	EXPECT(mdb_dbi_open(NULL, NULL, 0, &dbi), EINVAL);

	/* an environment that is not open */
	MDB_env *env;
	MDB_txn *txn, *child;
	CHECK(mdb_env_create(&env));
	EXPECT(mdb_txn_begin(env, NULL, 0, &txn), EINVAL);
	EXPECT(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), EINVAL);
	mdb_env_close(env);

	env = open_env("t_misuse", 0, 0);
	CHECK(mdb_env_set_mapsize(env, 1 << 20));
	EXPECT(mdb_txn_begin(env, NULL, MDB_RDONLY, NULL), EINVAL);
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	EXPECT(mdb_put(txn, dbi, &k, &v, 0), EACCES);
	EXPECT(mdb_del(txn, dbi, &k, NULL), EACCES);
	EXPECT(mdb_drop(txn, dbi, 0), EACCES);
	EXPECT(mdb_get(txn, 77, &k, &v), EINVAL);
	EXPECT(mdb_put(txn, dbi, NULL, &v, 0), EINVAL);
	EXPECT(mdb_txn_begin(env, txn, 0, &child), EINVAL);
	/* named databases need mdb_env_set_maxdbs */
	EXPECT(mdb_dbi_open(txn, "named", MDB_CREATE, &dbi), MDB_DBS_FULL);
	mdb_txn_abort(txn);

	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	EXPECT(mdb_dbi_open(txn, NULL, 0x80000000u, &dbi), EINVAL);
	EXPECT(mdb_put(txn, dbi, &k, &v, MDB_MULTIPLE), EINVAL);
	k.mv_size = 4000;
	k.mv_data = calloc(1, 4000);
	EXPECT(mdb_put(txn, dbi, &k, &v, 0), MDB_BAD_VALSIZE);
	free(k.mv_data);
	k = sv("k");
	MDB_cursor *cur;
	CHECK(mdb_cursor_open(txn, dbi, &cur));
	EXPECT(mdb_cursor_get(cur, &k, &v, MDB_GET_CURRENT), EINVAL);
	EXPECT(mdb_cursor_del(cur, 0), EINVAL);
	EXPECT(mdb_cursor_get(cur, NULL, &v, MDB_SET), EINVAL);
	mdb_cursor_close(cur);
	CHECK(mdb_txn_begin(env, txn, 0, &child));
	EXPECT(mdb_txn_begin(env, txn, 0, &child), MDB_BAD_TXN);
	EXPECT(mdb_get(txn, dbi, &k, &v), MDB_BAD_TXN);
	mdb_txn_abort(child);
	/* the size limit: MDB_MAP_FULL, after which the transaction only aborts */
	static char big[100000];
	char kb[32];
	int rc = 0;
	for (int i = 0; i < 1000 && rc == 0; i++) {
		snprintf(kb, sizeof kb, "big%d", i);
		MDB_val bk = sv(kb), bv = { sizeof big, big };
		rc = mdb_put(txn, dbi, &bk, &bv, 0);
	}
	EXPECT(rc, MDB_MAP_FULL);
	EXPECT(mdb_put(txn, dbi, &k, &v, 0), MDB_BAD_TXN);
	EXPECT(mdb_txn_commit(txn), MDB_BAD_TXN);
	/* the environment is still fine */
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_put(txn, dbi, &k, &v, 0));
	CHECK(mdb_txn_commit(txn));
	/* closing with a live transaction does not free what it uses */
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	mdb_env_close(env);
	CHECK(mdb_get(txn, dbi, &k, &v));
	TRUE(veq(v, "v"));
	mdb_txn_abort(txn);
	/* ... nor with a finished handle parked for reuse beside the live one (valgrind and ASan
	 * check that the last abort frees both handles and the environment, once) */
	env = open_env("t_misuse2", 0, 0);
	MDB_txn *other;
	v = sv("v"); /* the old v pointed into the map of the environment freed above */
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_put(txn, dbi, &k, &v, 0));
	CHECK(mdb_txn_commit(txn));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &other));
	mdb_txn_abort(other);
	mdb_env_close(env);
	mdb_env_close(env); /* closing twice changes nothing while a transaction holds it */
	CHECK(mdb_get(txn, dbi, &k, &v));
	TRUE(veq(v, "v"));
	mdb_txn_abort(txn);
	printf("t_misuse ok\n");
	return 0;
}
