/* Group commit (cairn.h): cairn_write_grouped from 16 threads with failing callbacks, checked
 * after a reopen (durable and MDB_NOSYNC); the callback's transaction (nested transactions,
 * cursors, handles, refused commit/abort/begin); cairn_env_set_group_limits. */
#include "check.h"
#include "cairn.h"
#include <pthread.h>

#define THREADS 16
#define CALLS 40

static MDB_env *env;
static MDB_dbi dbi;

/* One call's keys: "tTT-cCCC-a" and "...-b"; a failing call returns 1000 + c after its
 * first put. */
struct call {
	int t, c, fail;
	pthread_t ran_on;
};

static void key_of(char *buf, int t, int c, char which) {
	snprintf(buf, 32, "t%02d-c%03d-%c", t, c, which);
}

static int put_call(MDB_txn *txn, void *ctx) {
	struct call *k = ctx;
	char key[32], val[32];
	k->ran_on = pthread_self();
	snprintf(val, sizeof val, "v%d", k->c);
	key_of(key, k->t, k->c, 'a');
	MDB_val kv = sv(key), vv = sv(val);
	int rc = mdb_put(txn, dbi, &kv, &vv, 0);
	if (rc) return rc;
	if (k->fail) return 1000 + k->c;
	key_of(key, k->t, k->c, 'b');
	kv = sv(key);
	return mdb_put(txn, dbi, &kv, &vv, 0);
}

static int acked[THREADS][CALLS], failed[THREADS][CALLS], other_thread;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static void *writer(void *arg) {
	int t = (int)(long)arg;
	for (int c = 0; c < CALLS; c++) {
		struct call k = { t, c, (t * 7 + c) % 5 == 0, pthread_self() };
		int rc = cairn_write_grouped(env, put_call, &k);
		if (k.fail) {
			EXPECT(rc, 1000 + c);
			failed[t][c] = 1;
		} else {
			CHECK(rc);
			acked[t][c] = 1;
		}
		if (!pthread_equal(k.ran_on, pthread_self())) {
			pthread_mutex_lock(&mu);
			other_thread++;
			pthread_mutex_unlock(&mu);
		}
	}
	return NULL;
}

static void many_threads(const char *name, unsigned flags) {
	memset(acked, 0, sizeof acked);
	memset(failed, 0, sizeof failed);
	other_thread = 0;
	CHECK(mdb_env_create(&env));
	CHECK(cairn_env_set_group_limits(env, 8, 2000));
	CHECK(mdb_env_open(env, fresh_dir(name), flags, 0664));
	EXPECT(cairn_env_set_group_limits(env, 8, 2000), EINVAL);
	MDB_txn *txn;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	CHECK(mdb_txn_commit(txn));
	pthread_t th[THREADS];
	for (long t = 0; t < THREADS; t++) TRUE(pthread_create(&th[t], NULL, writer, (void *)t) == 0);
	for (int t = 0; t < THREADS; t++) TRUE(pthread_join(th[t], NULL) == 0);
	const char *path;
	CHECK(mdb_env_get_path(env, &path));
	char dir[4096];
	snprintf(dir, sizeof dir, "%s", path);
	mdb_env_close(env);

	/* Every acknowledged call whole, no failed call's key. */
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_open(env, dir, MDB_RDONLY, 0664));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	size_t want = 0;
	for (int t = 0; t < THREADS; t++) {
		for (int c = 0; c < CALLS; c++) {
			TRUE(acked[t][c] != failed[t][c]);
			char key[32], val[32];
			snprintf(val, sizeof val, "v%d", c);
			for (char w = 'a'; w <= 'b'; w++) {
				key_of(key, t, c, w);
				MDB_val kv = sv(key), vv;
				if (acked[t][c]) {
					CHECK(mdb_get(txn, dbi, &kv, &vv));
					TRUE(veq(vv, val));
				} else {
					EXPECT(mdb_get(txn, dbi, &kv, &vv), MDB_NOTFOUND);
				}
			}
			want += acked[t][c] ? 2 : 0;
		}
	}
	MDB_stat st;
	CHECK(mdb_stat(txn, dbi, &st));
	TRUE(st.ms_entries == want);
	TRUE(want > 0 && want < 2 * THREADS * CALLS);
	mdb_txn_abort(txn);
	/* A read-only environment refuses grouped writes. */
	struct call k = { 0, 0, 0, pthread_self() };
	EXPECT(cairn_write_grouped(env, put_call, &k), EACCES);
	mdb_env_close(env);
	printf("%s: %zu entries; %d of %d callbacks ran on another thread\n", name, want,
	       other_thread, THREADS * CALLS);
}

/* What the callback's transaction allows and refuses. */
static MDB_dbi named;
static MDB_txn *kept_txn;

static int inside(MDB_txn *txn, void *ctx) {
	(void)ctx;
	kept_txn = txn;
	MDB_val k = sv("a"), v = sv("1"), out;
	CHECK(mdb_put(txn, dbi, &k, &v, 0));
	EXPECT(mdb_txn_commit(txn), EINVAL);
	mdb_txn_abort(txn); /* no effect */
	CHECK(mdb_get(txn, dbi, &k, &out));
	TRUE(veq(out, "1"));
	/* No second write transaction of the environment; reads are fine. */
	MDB_txn *w, *r;
	EXPECT(mdb_txn_begin(env, NULL, 0, &w), EINVAL);
	struct call c = { 0, 0, 0, pthread_self() };
	EXPECT(cairn_write_grouped(env, put_call, &c), EINVAL);
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	EXPECT(mdb_get(r, dbi, &k, &out), MDB_NOTFOUND);
	mdb_txn_abort(r);
	/* Nested transactions: one committed, one aborted, one left open (aborted at the end). */
	MDB_txn *child;
	CHECK(mdb_txn_begin(env, txn, 0, &child));
	k = sv("b");
	CHECK(mdb_put(child, dbi, &k, &v, 0));
	CHECK(mdb_txn_commit(child));
	CHECK(mdb_txn_begin(env, txn, 0, &child));
	k = sv("c");
	CHECK(mdb_put(child, dbi, &k, &v, 0));
	mdb_txn_abort(child);
	/* A named database created here, and a cursor left open (freed at the end). */
	CHECK(mdb_dbi_open(txn, "named", MDB_CREATE, &named));
	k = sv("n");
	CHECK(mdb_put(txn, named, &k, &v, 0));
	MDB_cursor *cur;
	CHECK(mdb_cursor_open(txn, dbi, &cur));
	CHECK(mdb_cursor_get(cur, &k, &out, MDB_FIRST));
	TRUE(veq(k, "a"));
	CHECK(mdb_txn_begin(env, txn, 0, &child));
	k = sv("d");
	CHECK(mdb_put(child, dbi, &k, &v, 0));
	/* The parent is busy while its child lives, as in LMDB. */
	EXPECT(mdb_put(txn, dbi, &k, &v, 0), MDB_BAD_TXN);
	return 0;
}

static int rolled_back(MDB_txn *txn, void *ctx) {
	MDB_dbi *d = ctx;
	CHECK(mdb_dbi_open(txn, "gone", MDB_CREATE, d));
	MDB_val k = sv("x"), v = sv("1");
	CHECK(mdb_put(txn, *d, &k, &v, 0));
	CHECK(mdb_put(txn, dbi, &k, &v, 0));
	return -5;
}

static int fill(MDB_txn *txn, void *ctx) {
	int *first_error = ctx;
	static char big[64 << 10];
	for (int i = 0; i < 256; i++) {
		char key[16];
		snprintf(key, sizeof key, "big%03d", i);
		MDB_val k = sv(key), v = { sizeof big, big };
		int rc = mdb_put(txn, dbi, &k, &v, 0);
		if (rc) {
			*first_error = rc;
			break;
		}
	}
	return 0; /* ignores the failure: the group refuses to commit it */
}

static int small(MDB_txn *txn, void *ctx) {
	(void)ctx;
	MDB_val k = sv("small"), v = sv("1");
	return mdb_put(txn, dbi, &k, &v, 0);
}

static void the_transaction(void) {
	env = open_env("t_group_txn", 0, 4);
	MDB_txn *txn;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	CHECK(mdb_txn_commit(txn));
	EXPECT(cairn_write_grouped(NULL, inside, NULL), EINVAL);
	EXPECT(cairn_write_grouped(env, NULL, NULL), EINVAL);
	CHECK(cairn_write_grouped(env, inside, NULL));
	TRUE(kept_txn != NULL);
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	const char *want[] = { "a", "b" }, *absent[] = { "c", "d" };
	MDB_val k, v;
	for (int i = 0; i < 2; i++) {
		k = sv(want[i]);
		CHECK(mdb_get(txn, dbi, &k, &v));
		TRUE(veq(v, "1"));
		k = sv(absent[i]);
		EXPECT(mdb_get(txn, dbi, &k, &v), MDB_NOTFOUND);
	}
	/* The handle opened in the callback is everyone's once the group committed. */
	k = sv("n");
	CHECK(mdb_get(txn, named, &k, &v));
	mdb_txn_abort(txn);

	/* A callback's nonzero code: its changes, and the handle it opened, are gone. */
	MDB_dbi gone = 0;
	EXPECT(cairn_write_grouped(env, rolled_back, &gone), -5);
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	k = sv("x");
	EXPECT(mdb_get(txn, dbi, &k, &v), MDB_NOTFOUND);
	EXPECT(mdb_get(txn, gone, &k, &v), EINVAL);
	MDB_dbi again;
	EXPECT(mdb_dbi_open(txn, "gone", 0, &again), MDB_NOTFOUND);
	mdb_txn_abort(txn);
	mdb_env_close(env);

	/* A callback that returns 0 from a transaction a failed write broke: not committed. */
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_set_mapsize(env, 1 << 20));
	CHECK(mdb_env_open(env, fresh_dir("t_group_full"), 0, 0664));
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	CHECK(mdb_txn_commit(txn));
	int first_error = 0;
	int rc = cairn_write_grouped(env, fill, &first_error);
	TRUE(rc != 0);
	TRUE(first_error == MDB_MAP_FULL || rc == MDB_MAP_FULL);
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	k = sv("big000");
	EXPECT(mdb_get(txn, dbi, &k, &v), MDB_NOTFOUND);
	mdb_txn_abort(txn);
	CHECK(cairn_write_grouped(env, small, NULL));
	mdb_env_close(env);
}

int main(void) {
	the_transaction();
	many_threads("t_group_durable", 0);
	many_threads("t_group_nosync", MDB_NOSYNC);
	/* Logged mode (CAIRN_LOGGED=1, cairn.h's switch for programs): the same, and the groups'
	 * records went to data.mdb-log. */
	TRUE(setenv("CAIRN_LOGGED", "1", 1) == 0);
	many_threads("t_group_logged", 0);
	TRUE(unsetenv("CAIRN_LOGGED") == 0);
	const char *base = getenv("CAIRN_CTEST_DIR");
	char log[4096];
	snprintf(log, sizeof log, "%s/t_group_logged/data.mdb-log", base ? base : "/tmp");
	TRUE(access(log, F_OK) == 0);
	printf("t_group: ok\n");
	return 0;
}
