/* Cursors over a plain database: every positioning operation, put and delete through a
 * cursor, MDB_CURRENT, and iteration after deletes. */
#include "ex_common.h"

/* A seek, then one move from where the seek left the cursor. */
static void seek_then(MDB_cursor *c, const char *key, MDB_cursor_op seek, MDB_cursor_op then,
		      const char *what) {
	MDB_val k = S(key), v;
	char label[64];
	snprintf(label, sizeof label, "ro %s %s", seek == MDB_SET ? "set" : "set_key", key);
	show(label, mdb_cursor_get(c, &k, &v, seek), &k, &v);
	snprintf(label, sizeof label, "  then %s", what);
	show(label, mdb_cursor_get(c, &k, &v, then), &k, &v);
}

int main(int argc, char **argv) {
	MDB_env *env = ex_open(argc > 1 ? argv[1] : "ex2", 2);
	MDB_txn *txn;
	MDB_dbi db;
	MDB_cursor *c;
	MDB_val k, v;
	char kb[16], vb[16];
	E(mdb_txn_begin(env, NULL, 0, &txn));
	E(mdb_dbi_open(txn, "nums", MDB_CREATE, &db));
	E(mdb_cursor_open(txn, db, &c));
	for (int i = 0; i < 200; i += 2) {
		snprintf(kb, sizeof kb, "k%03d", i);
		snprintf(vb, sizeof vb, "v%d", i * i);
		k = S(kb), v = S(vb);
		E(mdb_cursor_put(c, &k, &v, 0));
	}
	show("first", mdb_cursor_get(c, &k, &v, MDB_FIRST), &k, &v);
	show("next", mdb_cursor_get(c, &k, &v, MDB_NEXT), &k, &v);
	show("last", mdb_cursor_get(c, &k, &v, MDB_LAST), &k, &v);
	show("next at end", mdb_cursor_get(c, &k, &v, MDB_NEXT), &k, &v);
	show("prev", mdb_cursor_get(c, &k, &v, MDB_PREV), &k, &v);
	k = S("k051");
	show("set_range k051", mdb_cursor_get(c, &k, &v, MDB_SET_RANGE), &k, &v);
	show("current", mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT), &k, &v);
	k = S("k100");
	show("set_key k100", mdb_cursor_get(c, &k, &v, MDB_SET_KEY), &k, &v);
	v = S("v_new!"); /* same size: LMDB replaces it in place */
	E(mdb_cursor_put(c, &k, &v, MDB_CURRENT));
	show("current after put", mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT), &k, &v);
	E(mdb_cursor_del(c, 0));
	show("next after del", mdb_cursor_get(c, &k, &v, MDB_NEXT), &k, &v);
	show("prev", mdb_cursor_get(c, &k, &v, MDB_PREV), &k, &v);
	k = S("k001");
	show("set k001", mdb_cursor_get(c, &k, &v, MDB_SET), &k, &v);
	k = S("zzz");
	show("set_range zzz", mdb_cursor_get(c, &k, &v, MDB_SET_RANGE), &k, &v);
	/* delete every third pair while walking */
	int i = 0, left = 0;
	int rc = mdb_cursor_get(c, &k, &v, MDB_FIRST);
	while (rc == 0) {
		if (i++ % 3 == 0) E(mdb_cursor_del(c, 0));
		rc = mdb_cursor_get(c, &k, &v, MDB_NEXT);
	}
	mdb_cursor_close(c);
	E(mdb_txn_commit(txn));
	E(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	E(mdb_cursor_open(txn, db, &c));
	while (mdb_cursor_get(c, &k, &v, MDB_PREV) == 0) {
		if (left++ < 5) show("  backwards", 0, &k, &v);
	}
	printf("left: %d\n", left);
	/* seeks on a cursor that no write parks, hits and misses (in the middle, past the last
	 * key, before the first), each followed by one move from where it left the cursor */
	static const char *const probe[] = { "k050", "k051", "k052", "zzz", "a" };
	for (size_t j = 0; j < sizeof probe / sizeof *probe; j++) {
		seek_then(c, probe[j], MDB_SET, MDB_GET_CURRENT, "current");
		seek_then(c, probe[j], MDB_SET, MDB_NEXT, "next");
		seek_then(c, probe[j], MDB_SET_KEY, MDB_PREV, "prev");
	}
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
	mdb_env_close(env);
	return 0;
}
