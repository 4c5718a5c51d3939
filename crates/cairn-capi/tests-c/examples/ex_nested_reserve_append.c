/* Nested transactions, MDB_RESERVE, MDB_APPEND / MDB_APPENDDUP, DUPFIXED with MDB_MULTIPLE. */
#include "ex_common.h"
#include <stdint.h>

static void dump(MDB_txn *txn, MDB_dbi db, const char *title) {
	MDB_cursor *c;
	MDB_val k, v;
	printf("%s:", title);
	E(mdb_cursor_open(txn, db, &c));
	while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0)
		printf(" %.*s=%.*s", (int)k.mv_size, (char *)k.mv_data, (int)v.mv_size, (char *)v.mv_data);
	printf("\n");
	mdb_cursor_close(c);
}

int main(int argc, char **argv) {
	MDB_env *env = ex_open(argc > 1 ? argv[1] : "ex3", 4);
	MDB_txn *txn, *child, *grand;
	MDB_dbi db, log, fixed;
	MDB_val k, v;
	E(mdb_txn_begin(env, NULL, 0, &txn));
	E(mdb_dbi_open(txn, "main", MDB_CREATE, &db));
	k = S("a"), v = S("1");
	E(mdb_put(txn, db, &k, &v, 0));
	E(mdb_txn_begin(env, txn, 0, &child));
	k = S("b"), v = S("2");
	E(mdb_put(child, db, &k, &v, 0));
	E(mdb_txn_begin(env, child, 0, &grand));
	k = S("c"), v = S("3");
	E(mdb_put(grand, db, &k, &v, 0));
	dump(grand, db, "in grandchild");
	mdb_txn_abort(grand);
	dump(child, db, "child after abort of grandchild");
	E(mdb_txn_commit(child));
	dump(txn, db, "parent after child commit");
	E(mdb_txn_begin(env, txn, 0, &child));
	k = S("a");
	E(mdb_del(child, db, &k, NULL));
	mdb_txn_abort(child);
	dump(txn, db, "parent after child abort");

	k = S("r"), v.mv_size = 6, v.mv_data = NULL;
	E(mdb_put(txn, db, &k, &v, MDB_RESERVE));
	memcpy(v.mv_data, "filled", 6);
	E(mdb_txn_commit(txn));

	E(mdb_txn_begin(env, NULL, 0, &txn));
	E(mdb_dbi_open(txn, "log", MDB_CREATE | MDB_DUPSORT, &log));
	char kb[16], vb[16];
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 3; j++) {
			snprintf(kb, sizeof kb, "day%02d", i);
			snprintf(vb, sizeof vb, "ev%d", j);
			k = S(kb), v = S(vb);
			E(mdb_put(txn, log, &k, &v, j ? MDB_APPENDDUP : MDB_APPEND));
		}
	k = S("day00"), v = S("ev9");
	printf("append out of order: rc %d\n", mdb_put(txn, log, &k, &v, MDB_APPEND));
	k = S("day04"), v = S("ev0");
	printf("appenddup out of order: rc %d\n", mdb_put(txn, log, &k, &v, MDB_APPENDDUP));
	E(mdb_dbi_open(txn, "fixed", MDB_CREATE | MDB_DUPSORT | MDB_DUPFIXED, &fixed));
	MDB_cursor *c;
	E(mdb_cursor_open(txn, fixed, &c));
	char items[10][4];
	for (int i = 0; i < 10; i++) memcpy(items[i], "it", 2), items[i][2] = (char)('9' - i), items[i][3] = '!';
	MDB_val mv[2] = { { 4, items }, { 10, NULL } };
	k = S("set");
	E(mdb_cursor_put(c, &k, mv, MDB_MULTIPLE));
	printf("multiple stored: %zu\n", mv[1].mv_size);
	k = S("set");
	E(mdb_cursor_get(c, &k, &v, MDB_SET));
	E(mdb_cursor_get(c, &k, &v, MDB_GET_MULTIPLE));
	printf("get_multiple: %.*s\n", (int)v.mv_size, (char *)v.mv_data);
	printf("next_multiple: rc %d\n", mdb_cursor_get(c, &k, &v, MDB_NEXT_MULTIPLE));
	mdb_cursor_close(c);
	E(mdb_txn_commit(txn));

	E(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	dump(txn, db, "final main");
	dump(txn, log, "final log");
	mdb_txn_abort(txn);
	mdb_env_close(env);
	return 0;
}
