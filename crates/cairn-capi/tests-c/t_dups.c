/* Sorted duplicates: DUPSORT cursor operations, DUPFIXED with MDB_MULTIPLE and the *_MULTIPLE
 * reads, counts, pair deletes, and C comparators (mdb_set_compare, mdb_set_dupsort). */
#include "check.h"
#include "cairn.h"
#include <stdint.h>

static int calls;
/* Keys in descending byte order. */
static int desc(const MDB_val *a, const MDB_val *b) {
	calls++;
	size_t n = a->mv_size < b->mv_size ? a->mv_size : b->mv_size;
	int c = memcmp(b->mv_data, a->mv_data, n);
	return c ? c : (int)b->mv_size - (int)a->mv_size;
}
/* Values by length, then bytes. */
static int by_len(const MDB_val *a, const MDB_val *b) {
	calls++;
	if (a->mv_size != b->mv_size) return a->mv_size < b->mv_size ? -1 : 1;
	return memcmp(a->mv_data, b->mv_data, a->mv_size);
}

int main(void) {
	MDB_env *env = open_env("t_dups", 0, 8);
	MDB_txn *txn;
	MDB_dbi d, f, c;
	MDB_cursor *cur;
	MDB_val k, v;
	size_t n;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	/* The main database's order (below, its keys are in it) is set before the named
	 * databases are created: their names are keys of the main database, in its order. */
	MDB_dbi m;
	CHECK(mdb_dbi_open(txn, NULL, 0, &m));
	CHECK(mdb_set_compare(txn, m, desc));
	CHECK(mdb_dbi_open(txn, "dups", MDB_CREATE | MDB_DUPSORT, &d));
	const char *colors[] = { "red", "green", "blue" };
	for (int i = 0; i < 3; i++) {
		k = sv("color"), v = sv(colors[i]);
		CHECK(mdb_put(txn, d, &k, &v, 0));
	}
	k = sv("color"), v = sv("red");
	EXPECT(mdb_put(txn, d, &k, &v, MDB_NODUPDATA), MDB_KEYEXIST);
	k = sv("shape"), v = sv("circle");
	CHECK(mdb_put(txn, d, &k, &v, 0));
	CHECK(mdb_cursor_open(txn, d, &cur));
	k = sv("color");
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_SET));
	TRUE(veq(v, "blue"));
	CHECK(mdb_cursor_count(cur, &n));
	TRUE(n == 3);
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_NEXT_DUP));
	TRUE(veq(v, "green"));
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_LAST_DUP));
	TRUE(veq(v, "red"));
	EXPECT(mdb_cursor_get(cur, &k, &v, MDB_NEXT_DUP), MDB_NOTFOUND);
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_FIRST_DUP));
	TRUE(veq(v, "blue"));
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_NEXT_NODUP));
	TRUE(veq(k, "shape") && veq(v, "circle"));
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_PREV_NODUP));
	TRUE(veq(k, "color") && veq(v, "red"));
	k = sv("color"), v = sv("gr");
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_GET_BOTH_RANGE));
	TRUE(veq(v, "green"));
	k = sv("color"), v = sv("green");
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_GET_BOTH));
	CHECK(mdb_cursor_del(cur, 0));
	k = sv("color");
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_SET));
	CHECK(mdb_cursor_count(cur, &n));
	TRUE(n == 2);
	k = sv("color"), v = sv("blue");
	CHECK(mdb_del(txn, d, &k, &v));
	EXPECT(mdb_del(txn, d, &k, &v), MDB_NOTFOUND);
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_FIRST));
	CHECK(mdb_cursor_del(cur, MDB_NODUPDATA));
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_FIRST));
	TRUE(veq(k, "shape"));
	mdb_cursor_close(cur);

	/* DUPFIXED: MDB_MULTIPLE in, GET_MULTIPLE / NEXT_MULTIPLE out. */
	CHECK(mdb_dbi_open(txn, "fixed", MDB_CREATE | MDB_DUPSORT | MDB_DUPFIXED | MDB_INTEGERDUP, &f));
	uint32_t vals[2000];
	for (int i = 0; i < 2000; i++) vals[i] = (uint32_t)(2000 - i);
	CHECK(mdb_cursor_open(txn, f, &cur));
	MDB_val mv[2] = { { sizeof(uint32_t), vals }, { 2000, NULL } };
	k = sv("nums");
	CHECK(mdb_cursor_put(cur, &k, mv, MDB_MULTIPLE));
	TRUE(mv[1].mv_size == 2000);
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_SET));
	CHECK(mdb_cursor_count(cur, &n));
	TRUE(n == 2000);
	size_t seen = 0;
	uint32_t last = 0;
	int rc = mdb_cursor_get(cur, &k, &v, MDB_GET_MULTIPLE);
	while (rc == 0) {
		TRUE(v.mv_size % 4 == 0 && v.mv_size > 0);
		for (size_t i = 0; i < v.mv_size / 4; i++) {
			uint32_t x;
			memcpy(&x, (char *)v.mv_data + 4 * i, 4);
			TRUE(x > last);
			last = x;
		}
		seen += v.mv_size / 4;
		rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT_MULTIPLE);
	}
	EXPECT(rc, MDB_NOTFOUND);
	TRUE(seen == 2000 && last == 2000);
	mdb_cursor_close(cur);
	CHECK(mdb_cursor_open(txn, d, &cur));
	EXPECT(mdb_cursor_get(cur, &k, &v, MDB_GET_MULTIPLE), EINVAL);
	mdb_cursor_close(cur);

	/* C comparators. */
	CHECK(mdb_dbi_open(txn, "custom", MDB_CREATE | MDB_DUPSORT, &c));
	CHECK(mdb_set_compare(txn, c, desc));
	CHECK(mdb_set_dupsort(txn, c, by_len));
	const char *keys[] = { "b", "a", "c" };
	const char *vs[] = { "ccc", "a", "bb", "z" };
	for (int i = 0; i < 3; i++)
		for (int j = 0; j < 4; j++) {
			k = sv(keys[i]), v = sv(vs[j]);
			CHECK(mdb_put(txn, c, &k, &v, 0));
		}
	TRUE(calls > 0);
	CHECK(mdb_txn_commit(txn));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	CHECK(mdb_cursor_open(txn, c, &cur));
	char order[64] = "";
	while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) {
		strncat(order, k.mv_data, k.mv_size);
		strncat(order, "=", 2);
		strncat(order, v.mv_data, v.mv_size);
		strncat(order, " ", 2);
		if (strlen(order) > 40) break;
	}
	TRUE(strncmp(order, "c=a c=z c=bb c=ccc b=a", 22) == 0);
	MDB_val x = sv("a"), y = sv("b");
	TRUE(mdb_cmp(txn, c, &x, &y) > 0);
	TRUE(mdb_dcmp(txn, c, &x, &y) < 0);
	x = sv("zz");
	TRUE(mdb_dcmp(txn, c, &x, &y) > 0);
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);

	/* More values under "b" of "custom" (a sub-tree) and keys in the main database, both in
	 * the C orders. */
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &m));
	CHECK(mdb_set_compare(txn, m, desc));
	char kb[32], vb[32];
	for (int i = 0; i < 300; i++) {
		snprintf(kb, sizeof kb, "m%03d", i);
		k = sv(kb), v = sv("x");
		CHECK(mdb_put(txn, m, &k, &v, 0));
		snprintf(vb, sizeof vb, "%d", i * 7);
		k = sv("b"), v = sv(vb);
		CHECK(mdb_put(txn, c, &k, &v, 0));
	}
	CHECK(mdb_txn_commit(txn));
	const char *p;
	CHECK(mdb_env_get_path(env, &p));
	char path[4096];
	snprintf(path, sizeof path, "%s", p);
	mdb_env_close(env);

	/* A new handle, as a reader process opens one: the orders are set inside its read
	 * transaction, after it began; lookups, GET_BOTH and GET_BOTH_RANGE use them. */
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_set_maxdbs(env, 8));
	CHECK(mdb_env_open(env, path, 0, 0664));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &m));
	CHECK(mdb_set_compare(txn, m, desc));
	for (int i = 0; i < 300; i++) {
		snprintf(kb, sizeof kb, "m%03d", i);
		k = sv(kb);
		CHECK(mdb_get(txn, m, &k, &v));
		TRUE(veq(v, "x"));
	}
	CHECK(mdb_dbi_open(txn, "custom", 0, &c));
	CHECK(mdb_set_compare(txn, c, desc));
	CHECK(mdb_set_dupsort(txn, c, by_len));
	k = sv("b");
	CHECK(mdb_get(txn, c, &k, &v));
	TRUE(veq(v, "0"));
	CHECK(mdb_cursor_open(txn, c, &cur));
	for (int i = 0; i < 300; i++) {
		snprintf(vb, sizeof vb, "%d", i * 7);
		k = sv("b"), v = sv(vb);
		CHECK(mdb_cursor_get(cur, &k, &v, MDB_GET_BOTH));
		TRUE(veq(v, vb));
	}
	k = sv("b"), v = sv("8");
	EXPECT(mdb_cursor_get(cur, &k, &v, MDB_GET_BOTH), MDB_NOTFOUND);
	/* By length, then bytes: the first two-byte value from "10" is "14"; none from "zz", so
	 * the first three-byte one; nothing from "9999". */
	k = sv("b"), v = sv("10");
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_GET_BOTH_RANGE));
	TRUE(veq(v, "14"));
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_NEXT_DUP));
	TRUE(veq(v, "21"));
	k = sv("b"), v = sv("zz");
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_GET_BOTH_RANGE));
	TRUE(veq(v, "105"));
	CHECK(mdb_cursor_get(cur, &k, &v, MDB_PREV_DUP));
	TRUE(veq(v, "bb"));
	k = sv("b"), v = sv("9999");
	EXPECT(mdb_cursor_get(cur, &k, &v, MDB_GET_BOTH_RANGE), MDB_NOTFOUND);
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	/* The checker verifies the C orders this handle has. */
	size_t problems = 1;
	CHECK(cairn_env_check(env, &problems, NULL, NULL));
	TRUE(problems == 0);
	mdb_env_close(env);

	/* A handle that never set the orders: the file is still sound to its checker, and a
	 * write to a database kept in an order it lacks is refused. */
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_set_maxdbs(env, 8));
	CHECK(mdb_env_open(env, path, 0, 0664));
	problems = 1;
	CHECK(cairn_env_check(env, &problems, NULL, NULL));
	TRUE(problems == 0);
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, "custom", 0, &c));
	k = sv("b"), v = sv("new");
	EXPECT(mdb_put(txn, c, &k, &v, 0), MDB_INCOMPATIBLE);
	mdb_txn_abort(txn);
	mdb_env_close(env);
	printf("t_dups ok\n");
	return 0;
}
