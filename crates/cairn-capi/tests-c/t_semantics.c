/* LMDB's documented answers where Cairn's own differ (issue 19, through the C library), each
 * checked against Debian's LMDB too: no key is empty (MDB_BAD_VALSIZE, the cursor left where
 * it was); transaction ids count from 0, an empty environment, so the first write
 * transaction is 1; a size limit below the space in use is that space (a write past it is
 * MDB_MAP_FULL, the open succeeds); without DUPSORT mdb_cursor_count is MDB_INCOMPATIBLE
 * and MDB_NEXT_DUP / MDB_PREV_DUP step to the next / previous key; a copy onto an existing
 * file is EEXIST; a handle opened by a transaction is private to it until it commits, and
 * closed if it aborts, which frees its place in the count of mdb_env_set_maxdbs as
 * mdb_dbi_close does; mdb_reader_list lists a reset read transaction with "-" for its
 * txnid until it is renewed or ends; a path that is not a directory is ENOENT when missing,
 * ENOTDIR when a file; a read transaction whose snapshot spans more than the handle's map size
 * (another process grew it) is MDB_MAP_RESIZED until mdb_env_set_mapsize(env, 0). */
#include <sys/wait.h>
#include <unistd.h>
#include "check.h"

static void empty_keys(void) {
	MDB_env *env = open_env("t_semantics_empty", 0, 2);
	MDB_txn *txn;
	MDB_dbi dbi, dups;
	MDB_cursor *cur, *dcur;
	MDB_val empty = { 0, (void *)"" }, null_empty = { 0, NULL };
	MDB_val k = sv("k"), v = sv("v"), out, ko;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, "plain", MDB_CREATE, &dbi));
	CHECK(mdb_dbi_open(txn, "dups", MDB_CREATE | MDB_DUPSORT, &dups));
	EXPECT(mdb_put(txn, dbi, &empty, &v, 0), MDB_BAD_VALSIZE);
	EXPECT(mdb_put(txn, dbi, &null_empty, &v, 0), MDB_BAD_VALSIZE);
	EXPECT(mdb_put(txn, dbi, &empty, &v, MDB_NOOVERWRITE), MDB_BAD_VALSIZE);
	EXPECT(mdb_put(txn, dups, &empty, &v, MDB_NODUPDATA), MDB_BAD_VALSIZE);
	/* the transaction is still usable */
	CHECK(mdb_put(txn, dbi, &k, &v, 0));
	CHECK(mdb_put(txn, dups, &k, &v, 0));
	EXPECT(mdb_get(txn, dbi, &empty, &out), MDB_BAD_VALSIZE);
	EXPECT(mdb_del(txn, dbi, &empty, NULL), MDB_BAD_VALSIZE);
	EXPECT(mdb_del(txn, dups, &empty, &v), MDB_BAD_VALSIZE);
	CHECK(mdb_cursor_open(txn, dbi, &cur));
	CHECK(mdb_cursor_open(txn, dups, &dcur));
	EXPECT(mdb_cursor_put(cur, &empty, &v, 0), MDB_BAD_VALSIZE);
	CHECK(mdb_cursor_get(cur, &ko, &out, MDB_FIRST));
	int ops[] = { MDB_SET, MDB_SET_KEY, MDB_SET_RANGE };
	for (unsigned i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		ko = empty;
		EXPECT(mdb_cursor_get(cur, &ko, &out, ops[i]), MDB_BAD_VALSIZE);
		/* still on its pair */
		CHECK(mdb_cursor_get(cur, &ko, &out, MDB_GET_CURRENT));
		TRUE(veq(ko, "k") && veq(out, "v"));
	}
	int dops[] = { MDB_SET, MDB_SET_KEY, MDB_SET_RANGE, MDB_GET_BOTH, MDB_GET_BOTH_RANGE };
	for (unsigned i = 0; i < sizeof dops / sizeof dops[0]; i++) {
		ko = empty;
		out = v;
		EXPECT(mdb_cursor_get(dcur, &ko, &out, dops[i]), MDB_BAD_VALSIZE);
	}
	mdb_cursor_close(cur);
	mdb_cursor_close(dcur);
	CHECK(mdb_txn_commit(txn));
	/* a read transaction, through the read path */
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	EXPECT(mdb_get(txn, dbi, &empty, &out), MDB_BAD_VALSIZE);
	CHECK(mdb_cursor_open(txn, dbi, &cur));
	for (unsigned i = 0; i < sizeof ops / sizeof ops[0]; i++) {
		ko = empty;
		EXPECT(mdb_cursor_get(cur, &ko, &out, ops[i]), MDB_BAD_VALSIZE);
		/* the fast path, on a live cursor */
		CHECK(mdb_cursor_get(cur, &ko, &out, MDB_FIRST));
		ko = empty;
		EXPECT(mdb_cursor_get(cur, &ko, &out, ops[i]), MDB_BAD_VALSIZE);
		CHECK(mdb_cursor_get(cur, &ko, &out, MDB_GET_CURRENT));
		TRUE(veq(ko, "k"));
	}
	mdb_cursor_close(cur);
	mdb_txn_abort(txn);
	mdb_env_close(env);
}

static int reader_line(const char *msg, void *ctx) {
	/* "pid thread txnid": the txnid of the one reader */
	unsigned long long pid, id;
	char thread[64];
	if (sscanf(msg, "%llu %63s %llu", &pid, thread, &id) == 3)
		*(unsigned long long *)ctx = id;
	return 0;
}

static void txn_ids(void) {
	MDB_env *env = open_env("t_semantics_ids", 0, 0);
	MDB_envinfo info;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k = sv("k"), v = sv("v");
	CHECK(mdb_env_info(env, &info));
	TRUE(info.me_last_txnid == 0);
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	TRUE(mdb_txn_id(txn) == 0);
	mdb_txn_abort(txn);
	for (size_t i = 1; i <= 3; i++) {
		CHECK(mdb_txn_begin(env, NULL, 0, &txn));
		TRUE(mdb_txn_id(txn) == i);
		CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
		CHECK(mdb_put(txn, dbi, &k, &v, 0));
		CHECK(mdb_txn_commit(txn));
		CHECK(mdb_env_info(env, &info));
		TRUE(info.me_last_txnid == i);
	}
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	TRUE(mdb_txn_id(txn) == 3);
	unsigned long long listed = 0;
	CHECK(mdb_reader_list(env, reader_line, &listed));
	TRUE(listed == 3);
	mdb_txn_abort(txn);
	/* an aborted write transaction uses no number */
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	TRUE(mdb_txn_id(txn) == 4);
	mdb_txn_abort(txn);
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	TRUE(mdb_txn_id(txn) == 4);
	mdb_txn_abort(txn);
	mdb_env_close(env);
}

static void tiny_map(void) {
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k = sv("a"), v = sv("a");
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_set_mapsize(env, 10));
	CHECK(mdb_env_open(env, fresh_dir("t_semantics_tiny"), 0, 0664));
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	int rc = mdb_put(txn, dbi, &k, &v, 0);
	if (rc == 0) {
		EXPECT(mdb_txn_commit(txn), MDB_MAP_FULL);
	} else {
		EXPECT(rc, MDB_MAP_FULL);
		mdb_txn_abort(txn);
	}
	mdb_env_close(env);
}

static void single_values(void) {
	MDB_env *env = open_env("t_semantics_single", 0, 2);
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_cursor *c;
	MDB_val k, v, ck, cv;
	size_t n = 99;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, "plain", MDB_CREATE, &dbi));
	const char *ks[] = { "a", "b", "c" };
	for (int i = 0; i < 3; i++) {
		k = sv(ks[i]);
		v = sv("v");
		CHECK(mdb_put(txn, dbi, &k, &v, 0));
	}
	CHECK(mdb_cursor_open(txn, dbi, &c));
	EXPECT(mdb_cursor_count(c, &n), MDB_INCOMPATIBLE);
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_GET_MULTIPLE), EINVAL);
	CHECK(mdb_cursor_get(c, &k, &v, MDB_FIRST));
	EXPECT(mdb_cursor_count(c, &n), MDB_INCOMPATIBLE);
	TRUE(n == 99);
	struct { int op; const char *to; } steps[] = {
		{ MDB_NEXT_DUP, "c" }, { MDB_PREV_DUP, "a" }, { MDB_NEXT_NODUP, "c" }, { MDB_PREV_NODUP, "a" },
	};
	for (unsigned i = 0; i < sizeof steps / sizeof steps[0]; i++) {
		k = sv("b");
		CHECK(mdb_cursor_get(c, &k, &v, MDB_SET));
		k.mv_size = 0;
		k.mv_data = NULL;
		CHECK(mdb_cursor_get(c, &k, &v, steps[i].op));
		TRUE(veq(k, steps[i].to) && veq(v, "v"));
		CHECK(mdb_cursor_get(c, &ck, &cv, MDB_GET_CURRENT));
		TRUE(veq(ck, steps[i].to));
	}
	/* past either end: MDB_NOTFOUND */
	k = sv("c");
	CHECK(mdb_cursor_get(c, &k, &v, MDB_SET));
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_NEXT_DUP), MDB_NOTFOUND);
	k = sv("a");
	CHECK(mdb_cursor_get(c, &k, &v, MDB_SET));
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_PREV_DUP), MDB_NOTFOUND);
	/* the operations on a key's values alone */
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_FIRST_DUP), MDB_INCOMPATIBLE);
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_LAST_DUP), MDB_INCOMPATIBLE);
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_GET_MULTIPLE), MDB_INCOMPATIBLE);
	EXPECT(mdb_cursor_get(c, &k, &v, MDB_NEXT_MULTIPLE), MDB_INCOMPATIBLE);
	mdb_cursor_close(c);
	CHECK(mdb_txn_commit(txn));

	/* a copy onto an existing environment */
	char dst[4200];
	snprintf(dst, sizeof dst, "%s", fresh_dir("t_semantics_copy"));
	CHECK(mdb_env_copy(env, dst));
	EXPECT(mdb_env_copy(env, dst), EEXIST);
	EXPECT(mdb_env_copy2(env, dst, MDB_CP_COMPACT), EEXIST);
	mdb_env_close(env);
}

static void private_handles(void) {
	MDB_env *env = open_env("t_semantics_dbis", 0, 4);
	MDB_txn *w, *r, *child;
	MDB_dbi x, y, z, ro;
	MDB_cursor *c;
	MDB_val k = sv("k"), v = sv("v"), out;
	CHECK(mdb_txn_begin(env, NULL, 0, &w));
	CHECK(mdb_dbi_open(w, "x", MDB_CREATE, &x));
	CHECK(mdb_put(w, x, &k, &v, 0));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	EXPECT(mdb_get(r, x, &k, &out), EINVAL);
	EXPECT(mdb_cursor_open(r, x, &c), EINVAL);
	mdb_txn_abort(r);
	CHECK(mdb_txn_commit(w));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	CHECK(mdb_get(r, x, &k, &out));
	TRUE(veq(out, "v"));
	mdb_txn_abort(r);

	/* an abort closes the handles the transaction opened */
	CHECK(mdb_txn_begin(env, NULL, 0, &w));
	CHECK(mdb_dbi_open(w, "y", MDB_CREATE, &y));
	mdb_txn_abort(w);
	CHECK(mdb_txn_begin(env, NULL, 0, &w));
	EXPECT(mdb_put(w, y, &k, &v, 0), EINVAL);
	/* a child's handle goes to its parent when it commits, and with it */
	CHECK(mdb_txn_begin(env, w, 0, &child));
	CHECK(mdb_dbi_open(child, "z", MDB_CREATE, &z));
	CHECK(mdb_put(child, z, &k, &v, 0));
	CHECK(mdb_txn_commit(child));
	CHECK(mdb_get(w, z, &k, &out));
	mdb_txn_abort(w);
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	EXPECT(mdb_get(r, z, &k, &out), EINVAL);
	mdb_txn_abort(r);

	/* the handles open count against mdb_env_set_maxdbs, the closed ones no more */
	MDB_env *one = open_env("t_semantics_maxdbs", 0, 1);
	MDB_dbi a, b;
	CHECK(mdb_txn_begin(one, NULL, 0, &w));
	CHECK(mdb_dbi_open(w, "a", MDB_CREATE, &a));
	mdb_txn_abort(w);
	CHECK(mdb_txn_begin(one, NULL, 0, &w));
	CHECK(mdb_dbi_open(w, "b", MDB_CREATE, &b));
	CHECK(mdb_txn_commit(w));
	CHECK(mdb_txn_begin(one, NULL, 0, &w));
	EXPECT(mdb_dbi_open(w, "a", MDB_CREATE, &a), MDB_DBS_FULL);
	CHECK(mdb_dbi_open(w, "b", 0, &b));
	mdb_txn_abort(w);
	mdb_dbi_close(one, b);
	CHECK(mdb_txn_begin(one, NULL, 0, &w));
	CHECK(mdb_dbi_open(w, "a", MDB_CREATE, &a));
	CHECK(mdb_txn_commit(w));
	mdb_env_close(one);

	/* a read transaction's handle: private until it commits too (a handle new to this
	 * environment handle: "x" is open in the last one) */
	MDB_txn *r2;
	char path[4096];
	const char *p;
	CHECK(mdb_env_get_path(env, &p));
	snprintf(path, sizeof path, "%s", p);
	mdb_env_close(env);
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_set_maxdbs(env, 4));
	CHECK(mdb_env_open(env, path, MDB_NOTLS, 0664));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	CHECK(mdb_dbi_open(r, "x", 0, &ro));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r2));
	EXPECT(mdb_cursor_open(r2, ro, &c), EINVAL);
	mdb_txn_abort(r2);
	CHECK(mdb_txn_commit(r));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r2));
	CHECK(mdb_cursor_open(r2, ro, &c));
	mdb_cursor_close(c);
	mdb_txn_abort(r2);
	mdb_env_close(env);
}

struct listing { int readers, reset; };

static int count_line(const char *msg, void *ctx) {
	struct listing *l = ctx;
	unsigned long long pid;
	char thread[64], id[64];
	if (sscanf(msg, "%llu %63s %63s", &pid, thread, id) == 3) {
		l->readers++;
		l->reset += strcmp(id, "-") == 0;
	}
	return 0;
}

static struct listing listing(MDB_env *env) {
	struct listing l = { 0, 0 };
	CHECK(mdb_reader_list(env, count_line, &l));
	return l;
}

static void reset_readers(void) {
	MDB_env *env = open_env("t_semantics_resets", MDB_NOTLS, 0);
	MDB_txn *r1, *r2;
	struct listing l;
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r1));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r2));
	l = listing(env);
	TRUE(l.readers == 2 && l.reset == 0);
	mdb_txn_reset(r1);
	l = listing(env);
	TRUE(l.readers == 2 && l.reset == 1);
	mdb_txn_abort(r2);
	l = listing(env);
	TRUE(l.readers == 1 && l.reset == 1);
	CHECK(mdb_txn_renew(r1));
	l = listing(env);
	TRUE(l.readers == 1 && l.reset == 0);
	mdb_txn_reset(r1);
	mdb_txn_abort(r1);
	l = listing(env);
	TRUE(l.readers == 0);
	mdb_env_close(env);
}

static void paths(void) {
	MDB_env *env;
	char f[4200];
	snprintf(f, sizeof f, "%s/file", fresh_dir("t_semantics_paths"));
	FILE *fp = fopen(f, "w");
	TRUE(fp != NULL);
	fputs("x", fp);
	fclose(fp);
	CHECK(mdb_env_create(&env));
	EXPECT(mdb_env_open(env, f, 0, 0644), ENOTDIR);
	mdb_env_close(env);
	strcat(f, "-missing");
	CHECK(mdb_env_create(&env));
	EXPECT(mdb_env_open(env, f, 0, 0644), ENOENT);
	mdb_env_close(env);
}

/* Run as "t_semantics grow DIR" (a process of its own: LMDB's environments do not survive a
 * fork): with a larger map size, grows the file past the 1 MiB the test's handle has. */
static int grow(const char *dir) {
	MDB_env *big;
	MDB_txn *txn;
	MDB_dbi dbi;
	static char value[4000];
	int ok = mdb_env_create(&big) == 0 && mdb_env_set_mapsize(big, 64 << 20) == 0 &&
		 mdb_env_open(big, dir, 0, 0664) == 0 && mdb_txn_begin(big, NULL, 0, &txn) == 0 &&
		 mdb_dbi_open(txn, NULL, 0, &dbi) == 0;
	for (unsigned i = 0; ok && i < 1000; i++) {
		char key[16];
		MDB_val bk = { (size_t)snprintf(key, sizeof key, "%08u", i), key };
		MDB_val bv = { sizeof value, value };
		ok = mdb_put(txn, dbi, &bk, &bv, 0) == 0;
	}
	ok = ok && mdb_txn_commit(txn) == 0;
	mdb_env_close(big);
	return ok ? 0 : 1;
}

static void map_resized(const char *self) {
	const char *dir = fresh_dir("t_semantics_resized");
	MDB_env *env;
	MDB_txn *txn;
	MDB_dbi dbi;
	MDB_val k = sv("k"), v = sv("v");
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_set_mapsize(env, 1 << 20));
	CHECK(mdb_env_open(env, dir, 0, 0664));
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	CHECK(mdb_put(txn, dbi, &k, &v, 0));
	CHECK(mdb_txn_commit(txn));
	pid_t pid = fork();
	TRUE(pid >= 0);
	if (pid == 0) {
		execl(self, self, "grow", dir, (char *)NULL);
		_exit(127);
	}
	int status;
	TRUE(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
	EXPECT(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), MDB_MAP_RESIZED);
	CHECK(mdb_env_set_mapsize(env, 0));
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
	MDB_val out;
	CHECK(mdb_get(txn, dbi, &k, &out));
	TRUE(veq(out, "v"));
	mdb_txn_abort(txn);
	mdb_env_close(env);
}

int main(int argc, char **argv) {
	if (argc == 3 && strcmp(argv[1], "grow") == 0)
		return grow(argv[2]);
	empty_keys();
	txn_ids();
	tiny_map();
	single_values();
	private_handles();
	reset_readers();
	paths();
	map_resized(argv[0]);
	printf("t_semantics: ok\n");
	return 0;
}
