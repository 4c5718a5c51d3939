/* Environment, named databases and sorted duplicates. */
#include "ex_common.h"

int main(int argc, char **argv) {
	MDB_env *env = ex_open(argc > 1 ? argv[1] : "ex1", 4);
	MDB_txn *txn;
	MDB_dbi fruit, tags;
	MDB_cursor *c;
	MDB_val k, v;
	E(mdb_txn_begin(env, NULL, 0, &txn));
	E(mdb_dbi_open(txn, "fruit", MDB_CREATE, &fruit));
	E(mdb_dbi_open(txn, "tags", MDB_CREATE | MDB_DUPSORT, &tags));
	const char *names[] = { "pear", "apple", "fig", "kiwi", "banana" };
	const char *cols[] = { "green", "red", "purple", "brown", "yellow" };
	for (int i = 0; i < 5; i++) {
		k = S(names[i]), v = S(cols[i]);
		E(mdb_put(txn, fruit, &k, &v, 0));
		v = S("fruit");
		E(mdb_put(txn, tags, &k, &v, 0));
		v = S(i % 2 ? "sweet" : "sour");
		E(mdb_put(txn, tags, &k, &v, 0));
	}
	k = S("apple"), v = S("tart");
	E(mdb_put(txn, tags, &k, &v, 0));
	k = S("apple"), v = S("x");
	printf("nooverwrite: rc %d\n", mdb_put(txn, fruit, &k, &v, MDB_NOOVERWRITE));
	printf("existing value: %.*s\n", (int)v.mv_size, (char *)v.mv_data);
	k = S("apple"), v = S("tart");
	printf("nodupdata: rc %d\n", mdb_put(txn, tags, &k, &v, MDB_NODUPDATA));
	k = S("apple"), v = S("new");
	printf("dupsort nooverwrite: rc %d\n", mdb_put(txn, tags, &k, &v, MDB_NOOVERWRITE));
	printf("existing first value: %.*s\n", (int)v.mv_size, (char *)v.mv_data);
	E(mdb_txn_commit(txn));

	E(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	unsigned flags;
	E(mdb_dbi_flags(txn, tags, &flags));
	printf("tags flags: %#x\n", flags);
	MDB_stat st;
	E(mdb_stat(txn, fruit, &st));
	printf("fruit entries: %zu depth %u\n", st.ms_entries, st.ms_depth);
	E(mdb_stat(txn, tags, &st));
	printf("tags entries: %zu\n", st.ms_entries);
	E(mdb_cursor_open(txn, tags, &c));
	int rc;
	while ((rc = mdb_cursor_get(c, &k, &v, MDB_NEXT)) == 0) {
		size_t n;
		E(mdb_cursor_count(c, &n));
		printf("  %.*s: %.*s (%zu values)\n", (int)k.mv_size, (char *)k.mv_data,
		       (int)v.mv_size, (char *)v.mv_data, n);
	}
	printf("end: rc %d\n", rc);
	k = S("apple");
	show("set apple", mdb_cursor_get(c, &k, &v, MDB_SET), &k, &v);
	show("next_dup", mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP), &k, &v);
	show("last_dup", mdb_cursor_get(c, &k, &v, MDB_LAST_DUP), &k, &v);
	show("next_dup at end", mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP), &k, &v);
	show("next_nodup", mdb_cursor_get(c, &k, &v, MDB_NEXT_NODUP), &k, &v);
	show("prev_dup", mdb_cursor_get(c, &k, &v, MDB_PREV_DUP), &k, &v);
	show("prev_nodup", mdb_cursor_get(c, &k, &v, MDB_PREV_NODUP), &k, &v);
	k = S("fig"), v = S("s");
	show("get_both_range fig s", mdb_cursor_get(c, &k, &v, MDB_GET_BOTH_RANGE), &k, &v);
	k = S("fig"), v = S("sweet");
	show("get_both fig sweet", mdb_cursor_get(c, &k, &v, MDB_GET_BOTH), &k, &v);
	k = S("zzz");
	show("set zzz", mdb_cursor_get(c, &k, &v, MDB_SET), &k, &v);
	show("current past the end", mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT), &k, &v);
	show("prev from there", mdb_cursor_get(c, &k, &v, MDB_PREV), &k, &v);
	k = S("b");
	show("set b (missing)", mdb_cursor_get(c, &k, &v, MDB_SET_KEY), &k, &v);
	show("current", mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT), &k, &v);
	show("next", mdb_cursor_get(c, &k, &v, MDB_NEXT), &k, &v);
	k = S("b");
	show("set b (missing)", mdb_cursor_get(c, &k, &v, MDB_SET_KEY), &k, &v);
	show("prev", mdb_cursor_get(c, &k, &v, MDB_PREV), &k, &v);
	k = S("b");
	show("set b (missing)", mdb_cursor_get(c, &k, &v, MDB_SET_KEY), &k, &v);
	show("next_nodup", mdb_cursor_get(c, &k, &v, MDB_NEXT_NODUP), &k, &v);
	k = S("b");
	show("set b (missing)", mdb_cursor_get(c, &k, &v, MDB_SET_KEY), &k, &v);
	show("next_dup", mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP), &k, &v);
	mdb_cursor_close(c);
	k = S("kiwi");
	show("get kiwi", mdb_get(txn, fruit, &k, &v), &k, &v);
	k = S("kiwi");
	show("get tags kiwi", mdb_get(txn, tags, &k, &v), &k, &v);
	mdb_txn_abort(txn);

	E(mdb_txn_begin(env, NULL, 0, &txn));
	k = S("banana"), v = S("fruit");
	printf("del pair: rc %d\n", mdb_del(txn, tags, &k, &v));
	printf("del pair again: rc %d\n", mdb_del(txn, tags, &k, &v));
	k = S("pear");
	printf("del key: rc %d\n", mdb_del(txn, tags, &k, NULL));
	E(mdb_stat(txn, tags, &st));
	printf("tags entries: %zu\n", st.ms_entries);
	E(mdb_drop(txn, fruit, 0));
	E(mdb_stat(txn, fruit, &st));
	printf("fruit after drop: %zu\n", st.ms_entries);
	E(mdb_txn_commit(txn));
	mdb_env_close(env);
	return 0;
}
