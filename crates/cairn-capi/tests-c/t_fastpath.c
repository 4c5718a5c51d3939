/* The short paths of mdb_cursor_get (a live cursor's MDB_NEXT, MDB_PREV, MDB_SET, MDB_SET_KEY,
 * MDB_SET_RANGE, MDB_GET_CURRENT), mdb_get (a read transaction, a cached handle), mdb_put (a
 * plain put in a usable write transaction without cursors) and the read transaction's
 * recycled handle, at their edges: both ends of a database, a miss, a write or a delete under
 * the cursor, reset and renew, a DUPSORT database, NULL out-parameters, a busy or failed
 * transaction. Written against lmdb.h only: the same file built against Debian's liblmdb
 * passes too (the expectations are LMDB's; NULL handles, which crash LMDB, are t_misuse.c's). */
#include "check.h"

static MDB_env *env;

/* Keys "k0".."k4" with values "v0".."v4" in the main database. */
static MDB_dbi fill(void) {
	MDB_txn *txn;
	MDB_dbi dbi;
	char kb[8], vb[8];
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	for (int i = 0; i < 5; i++) {
		snprintf(kb, sizeof kb, "k%d", i);
		snprintf(vb, sizeof vb, "v%d", i);
		MDB_val k = sv(kb), v = sv(vb);
		CHECK(mdb_put(txn, dbi, &k, &v, 0));
	}
	CHECK(mdb_txn_commit(txn));
	return dbi;
}

static void ends(MDB_dbi dbi) {
	MDB_txn *r;
	MDB_cursor *c;
	MDB_val k, v;
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	CHECK(mdb_cursor_open(r, dbi, &c));
	/* an unpositioned cursor's MDB_NEXT is MDB_FIRST */
	CHECK(mdb_cursor_get(c, &k, &v, MDB_NEXT));
	TRUE(veq(k, "k0") && veq(v, "v0"));
	/* at the first pair MDB_PREV finds nothing and stays: MDB_NEXT gives the second */
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_PREV), MDB_NOTFOUND);
	CHECK(mdb_cursor_get(c, &k, &v, MDB_NEXT));
	TRUE(veq(k, "k1"));
	/* NULL out-parameters are allowed: the cursor still moves */
	CHECK(mdb_cursor_get(c, NULL, NULL, MDB_NEXT));
	CHECK(mdb_cursor_get(c, NULL, &v, MDB_NEXT));
	TRUE(veq(v, "v3"));
	CHECK(mdb_cursor_get(c, &k, NULL, MDB_NEXT));
	TRUE(veq(k, "k4"));
	/* past the last pair: MDB_NOTFOUND, again and again, and the cursor stays on the last */
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_NEXT), MDB_NOTFOUND);
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_NEXT), MDB_NOTFOUND);
	CHECK(mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT));
	TRUE(veq(k, "k4") && veq(v, "v4"));
	CHECK(mdb_cursor_get(c, &k, &v, MDB_PREV));
	TRUE(veq(k, "k3") && veq(v, "v3"));
	/* MDB_SET_KEY hit, then steps from there */
	k = sv("k2");
	CHECK(mdb_cursor_get(c, &k, &v, MDB_SET_KEY));
	TRUE(veq(k, "k2") && veq(v, "v2"));
	CHECK(mdb_cursor_get(c, &k, &v, MDB_PREV));
	TRUE(veq(k, "k1"));
	/* MDB_SET hit: the value; the key is the caller's */
	k = sv("k3");
	CHECK(mdb_cursor_get(c, &k, &v, MDB_SET));
	TRUE(veq(v, "v3"));
	/* a miss between keys: MDB_NOTFOUND; the cursor stands where the key would go */
	k = sv("k25");
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_SET_KEY), MDB_NOTFOUND);
	CHECK(mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT));
	TRUE(veq(k, "k3"));
	CHECK(mdb_cursor_get(c, &k, &v, MDB_NEXT));
	TRUE(veq(k, "k4"));
	/* a miss above every key: nothing current, nothing next, MDB_PREV gives the last */
	k = sv("z");
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_SET), MDB_NOTFOUND);
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_NEXT), MDB_NOTFOUND);
	CHECK(mdb_cursor_get(c, &k, &v, MDB_PREV));
	TRUE(veq(k, "k4"));
	/* MDB_SET_RANGE */
	k = sv("k05");
	CHECK(mdb_cursor_get(c, &k, &v, MDB_SET_RANGE));
	TRUE(veq(k, "k1") && veq(v, "v1"));
	k = sv("z");
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_SET_RANGE), MDB_NOTFOUND);
	/* a NULL key for an operation that reads one */
	EXPECT(mdb_cursor_get(c, NULL, &v, MDB_SET_KEY), EINVAL);
	EXPECT(mdb_cursor_get(c, NULL, &v, MDB_SET_RANGE), EINVAL);
	/* backwards from the end to before the first */
	CHECK(mdb_cursor_get(c, &k, &v, MDB_LAST));
	int n = 1;
	while (mdb_cursor_get(c, &k, &v, MDB_PREV) == 0) n++;
	TRUE(n == 5 && veq(k, "k0"));
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_PREV), MDB_NOTFOUND);
	CHECK(mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT));
	TRUE(veq(k, "k0"));

	/* reset: the cursor's transaction is refused; renewed, both start afresh */
	mdb_txn_reset(r);
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_NEXT), MDB_BAD_TXN);
	k = sv("k1");
	/* refused (LMDB checks the handle first, which a reset transaction no longer vouches
	 * for: EINVAL; Cairn: MDB_BAD_TXN) */
	int rc = mdb_get(r, dbi, &k, &v);
	TRUE(rc == MDB_BAD_TXN || rc == EINVAL);
	CHECK(mdb_txn_renew(r));
	CHECK(mdb_cursor_renew(r, c));
	CHECK(mdb_cursor_get(c, &k, &v, MDB_NEXT));
	TRUE(veq(k, "k0"));
	CHECK(mdb_cursor_get(c, &k, &v, MDB_NEXT));
	TRUE(veq(k, "k1"));
	k = sv("k4");
	CHECK(mdb_get(r, dbi, &k, &v));
	TRUE(veq(v, "v4"));
	/* mdb_get's argument checks */
	EXPECT(mdb_get(r, dbi, NULL, &v), EINVAL);
	EXPECT(mdb_get(r, dbi, &k, NULL), EINVAL);
	EXPECT(mdb_get(r, 77, &k, &v), EINVAL);
	k = sv("nope");
	EXPECT(mdb_get(r, dbi, &k, &v), MDB_NOTFOUND);
	mdb_cursor_close(c);
	mdb_txn_abort(r);
}

/* Writes under a cursor of the same write transaction. */
static void writes(MDB_dbi dbi) {
	MDB_txn *txn;
	MDB_cursor *c;
	MDB_val k, v;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_cursor_open(txn, dbi, &c));
	k = sv("k1");
	CHECK(mdb_cursor_get(c, &k, &v, MDB_SET_KEY));
	/* a put elsewhere: the cursor keeps its place */
	k = sv("k15"), v = sv("v15");
	CHECK(mdb_put(txn, dbi, &k, &v, 0));
	CHECK(mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT));
	TRUE(veq(k, "k1") && veq(v, "v1"));
	CHECK(mdb_cursor_get(c, &k, &v, MDB_NEXT));
	TRUE(veq(k, "k15") && veq(v, "v15"));
	/* the pair under the cursor deleted: MDB_NEXT gives its successor, not the one after */
	CHECK(mdb_cursor_del(c, 0));
	CHECK(mdb_cursor_get(c, &k, &v, MDB_NEXT));
	TRUE(veq(k, "k2"));
	/* deleted by mdb_del, then MDB_PREV gives the predecessor */
	k = sv("k2");
	CHECK(mdb_del(txn, dbi, &k, NULL));
	CHECK(mdb_cursor_get(c, &k, &v, MDB_PREV));
	TRUE(veq(k, "k1"));
	/* the last pair deleted under the cursor: MDB_NEXT finds nothing */
	CHECK(mdb_cursor_get(c, &k, &v, MDB_LAST));
	CHECK(mdb_cursor_del(c, 0));
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_NEXT), MDB_NOTFOUND);
	/* a value replaced under the cursor */
	k = sv("k1");
	CHECK(mdb_cursor_get(c, &k, &v, MDB_SET));
	k = sv("k1"), v = sv("new");
	CHECK(mdb_put(txn, dbi, &k, &v, 0));
	CHECK(mdb_cursor_get(c, &k, &v, MDB_GET_CURRENT));
	TRUE(veq(k, "k1") && veq(v, "new"));
	/* MDB_NOOVERWRITE hands back the value there */
	k = sv("k1"), v = sv("other");
	EXPECT(mdb_put(txn, dbi, &k, &v, MDB_NOOVERWRITE), MDB_KEYEXIST);
	TRUE(veq(v, "new"));
	mdb_cursor_close(c);
	/* without a cursor (the short path) too */
	k = sv("k0"), v = sv("other");
	EXPECT(mdb_put(txn, dbi, &k, &v, MDB_NOOVERWRITE), MDB_KEYEXIST);
	TRUE(veq(v, "v0"));
	/* flags the short path does not take, and NULL arguments */
	k = sv("k9"), v = sv("v9");
	EXPECT(mdb_put(txn, dbi, &k, &v, 0x40000000u), EINVAL);
	EXPECT(mdb_put(txn, dbi, NULL, &v, 0), EINVAL);
	EXPECT(mdb_put(txn, dbi, &k, NULL, 0), EINVAL);
	EXPECT(mdb_put(txn, 77, &k, &v, 0), EINVAL);
	/* a parent with a live child refuses puts and gets */
	MDB_txn *child;
	CHECK(mdb_txn_begin(env, txn, 0, &child));
	EXPECT(mdb_put(txn, dbi, &k, &v, 0), MDB_BAD_TXN);
	EXPECT(mdb_get(txn, dbi, &k, &v), MDB_BAD_TXN);
	CHECK(mdb_put(child, dbi, &k, &v, 0));
	CHECK(mdb_txn_commit(child));
	CHECK(mdb_get(txn, dbi, &k, &v));
	TRUE(veq(v, "v9"));
	CHECK(mdb_txn_commit(txn));

	/* what the read side sees now: k0 k1(new) k3 k9 */
	MDB_txn *r;
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	CHECK(mdb_cursor_open(r, dbi, &c));
	const char *want[] = { "k0", "k1", "k3", "k9" };
	int n = 0;
	while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0) TRUE(n < 4 && veq(k, want[n++]));
	TRUE(n == 4);
	mdb_cursor_close(c);
	mdb_txn_abort(r);
}

/* A DUPSORT database: steps walk the values of a key; a miss stands on the next key. */
static void dups(void) {
	MDB_txn *txn;
	MDB_dbi d;
	MDB_cursor *c;
	MDB_val k, v;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, "dups", MDB_CREATE | MDB_DUPSORT, &d));
	const char *pairs[][2] = { { "a", "1" }, { "a", "2" }, { "a", "3" }, { "c", "1" }, { "c", "2" } };
	for (int i = 0; i < 5; i++) {
		k = sv(pairs[i][0]), v = sv(pairs[i][1]);
		CHECK(mdb_put(txn, d, &k, &v, 0));
	}
	CHECK(mdb_txn_commit(txn));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	CHECK(mdb_cursor_open(txn, d, &c));
	for (int i = 0; i < 5; i++) {
		CHECK(mdb_cursor_get(c, &k, &v, MDB_NEXT));
		TRUE(veq(k, pairs[i][0]) && veq(v, pairs[i][1]));
	}
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_NEXT), MDB_NOTFOUND);
	for (int i = 3; i >= 0; i--) {
		CHECK(mdb_cursor_get(c, &k, &v, MDB_PREV));
		TRUE(veq(k, pairs[i][0]) && veq(v, pairs[i][1]));
	}
	/* MDB_SET_KEY gives a key's first value */
	k = sv("c");
	CHECK(mdb_cursor_get(c, &k, &v, MDB_SET_KEY));
	TRUE(veq(k, "c") && veq(v, "1"));
	/* a miss: on the next key with no value chosen; MDB_NEXT gives its first value */
	k = sv("b");
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_SET_KEY), MDB_NOTFOUND);
	CHECK(mdb_cursor_get(c, &k, &v, MDB_NEXT));
	TRUE(veq(k, "c") && veq(v, "1"));
	/* ... and MDB_PREV its last (LMDB's cursor is on that key, no value chosen) */
	k = sv("b");
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_SET), MDB_NOTFOUND);
	CHECK(mdb_cursor_get(c, &k, &v, MDB_PREV));
	TRUE(veq(k, "c") && veq(v, "2"));
	CHECK(mdb_cursor_get(c, &k, &v, MDB_PREV));
	TRUE(veq(k, "c") && veq(v, "1"));
	CHECK(mdb_cursor_get(c, &k, &v, MDB_PREV));
	TRUE(veq(k, "a") && veq(v, "3"));
	mdb_cursor_close(c);
	mdb_txn_abort(txn);
}

/* Read transactions one after another reuse a handle: each sees the latest commit and the
 * handles opened since. */
static void recycled(MDB_dbi dbi) {
	MDB_txn *r, *w;
	MDB_val k, v;
	for (int i = 0; i < 3; i++) {
		char vb[8];
		snprintf(vb, sizeof vb, "r%d", i);
		CHECK(mdb_txn_begin(env, NULL, 0, &w));
		k = sv("k0"), v = sv(vb);
		CHECK(mdb_put(w, dbi, &k, &v, 0));
		CHECK(mdb_txn_commit(w));
		CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
		k = sv("k0");
		CHECK(mdb_get(r, dbi, &k, &v));
		TRUE(veq(v, vb));
		mdb_txn_abort(r);
	}
	/* a handle opened between two read transactions */
	MDB_dbi other;
	CHECK(mdb_txn_begin(env, NULL, 0, &w));
	CHECK(mdb_dbi_open(w, "other", MDB_CREATE, &other));
	k = sv("x"), v = sv("y");
	CHECK(mdb_put(w, other, &k, &v, 0));
	CHECK(mdb_txn_commit(w));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	CHECK(mdb_get(r, other, &k, &v));
	TRUE(veq(v, "y"));
	/* committing a read transaction ends it as an abort does */
	CHECK(mdb_txn_commit(r));
	/* two read transactions at once: the second cannot take the first's handle */
	MDB_txn *r2;
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r2));
	TRUE(r != r2);
	k = sv("k0");
	CHECK(mdb_get(r, dbi, &k, &v));
	CHECK(mdb_get(r2, dbi, &k, &v));
	mdb_txn_abort(r);
	mdb_txn_abort(r2);
	/* a read transaction with a parent is refused */
	CHECK(mdb_txn_begin(env, NULL, 0, &w));
	EXPECT(mdb_txn_begin(env, w, MDB_RDONLY, &r), MDB_BAD_TXN);
	mdb_txn_abort(w);
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r2));
	EXPECT(mdb_txn_begin(env, r2, MDB_RDONLY, &r), EINVAL);
	mdb_txn_abort(r2);
}

int main(void) {
	/* MDB_NOTLS: two read transactions of one thread at once (recycled) */
	env = open_env("t_fastpath", MDB_NOTLS, 4);
	MDB_dbi dbi = fill();
	ends(dbi);
	writes(dbi);
	dups();
	recycled(dbi);
	mdb_env_close(env);
	return 0;
}
