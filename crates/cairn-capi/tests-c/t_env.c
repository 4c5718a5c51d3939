/* Environment functions: open flags, info, stat, flags, path, fd, limits, user context,
 * copies (plain, compact, to a descriptor), sync, reader table, strerror, version. */
#include "check.h"
#include "cairn.h"
#include <fcntl.h>

static int lines;
static int count_lines(const char *msg, void *ctx) {
	(void)ctx;
	TRUE(msg[0] != 0 && msg[strlen(msg) - 1] == '\n');
	lines++;
	return 0;
}

static void fill(MDB_env *env, int n) {
	MDB_txn *txn;
	MDB_dbi dbi;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	char kb[32];
	for (int i = 0; i < n; i++) {
		snprintf(kb, sizeof kb, "k%06d", i);
		MDB_val k = sv(kb), v = sv("some value");
		CHECK(mdb_put(txn, dbi, &k, &v, 0));
	}
	CHECK(mdb_txn_commit(txn));
}

static size_t entries_at(const char *path, unsigned flags) {
	MDB_env *env;
	MDB_stat st;
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_open(env, path, flags | MDB_RDONLY, 0644));
	CHECK(mdb_env_stat(env, &st));
	mdb_env_close(env);
	return st.ms_entries;
}

int main(void) {
	int maj, min, pat;
	char *ver = mdb_version(&maj, &min, &pat);
	TRUE(ver != NULL && maj == 0 && min == 9);
	for (int c = MDB_KEYEXIST; c <= MDB_LAST_ERRCODE; c++)
		TRUE(mdb_strerror(c) != NULL && strlen(mdb_strerror(c)) > 5);
	TRUE(strlen(mdb_strerror(0)) > 0 && strlen(mdb_strerror(ENOENT)) > 0);

	MDB_env *env;
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_set_mapsize(env, 64 << 20));
	CHECK(mdb_env_set_maxreaders(env, 50));
	CHECK(mdb_env_set_maxdbs(env, 2));
	int ctx = 7;
	CHECK(mdb_env_set_userctx(env, &ctx));
	TRUE(mdb_env_get_userctx(env) == &ctx);
	const char *dir = fresh_dir("t_env");
	char path[4096];
	snprintf(path, sizeof path, "%s", dir);
	/* A missing directory is not created (ENOENT), as in LMDB. */
	char missing[4200];
	snprintf(missing, sizeof missing, "%s/nope", path);
	MDB_env *e2;
	CHECK(mdb_env_create(&e2));
	EXPECT(mdb_env_open(e2, missing, 0, 0644), ENOENT);
	mdb_env_close(e2);

	CHECK(cairn_env_set_sync_bytes(env, 1 << 20));
	CHECK(mdb_env_open(env, path, MDB_NOSYNC | MDB_NOTLS, 0600));
	EXPECT(cairn_env_set_sync_bytes(env, 0), EINVAL);
	const char *got;
	CHECK(mdb_env_get_path(env, &got));
	TRUE(strcmp(got, path) == 0);
	unsigned fl;
	CHECK(mdb_env_get_flags(env, &fl));
	TRUE(fl & MDB_NOSYNC);
	/* The durability mode is fixed at open. */
	EXPECT(mdb_env_set_flags(env, MDB_NOSYNC, 0), EINVAL);
	CHECK(mdb_env_set_flags(env, MDB_NOMEMINIT, 1));
	int fd = -1;
	CHECK(mdb_env_get_fd(env, &fd));
	struct stat sb;
	TRUE(fd >= 0 && fstat(fd, &sb) == 0);
	unsigned mr;
	CHECK(mdb_env_get_maxreaders(env, &mr));
	TRUE(mr == 50);
	TRUE(mdb_env_get_maxkeysize(env) >= 400);
	fill(env, 5000);
	CHECK(mdb_env_sync(env, 1));
	MDB_envinfo info;
	CHECK(mdb_env_info(env, &info));
	TRUE(info.me_mapsize == 64 << 20 && info.me_last_txnid >= 1 && info.me_maxreaders == 50);
	MDB_stat st;
	CHECK(mdb_env_stat(env, &st));
	TRUE(st.ms_entries == 5000 && st.ms_psize >= 4096 && st.ms_depth >= 1);
	size_t problems = 99;
	CHECK(cairn_env_check(env, &problems, NULL, NULL));
	TRUE(problems == 0);

	/* Reader table: one live reader is listed. */
	MDB_txn *r;
	CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
	lines = 0;
	CHECK(mdb_reader_list(env, count_lines, NULL));
	TRUE(lines == 2);
	CHECK(mdb_env_info(env, &info));
	TRUE(info.me_numreaders >= 1);
	mdb_txn_abort(r);
	int dead = -1;
	CHECK(mdb_reader_check(env, &dead));
	TRUE(dead == 0);

	/* Copies: into a directory, compacted, and through a descriptor. */
	char c1[4200], c2[4200], c3[4200];
	snprintf(c1, sizeof c1, "%s/copy1", path);
	snprintf(c2, sizeof c2, "%s/copy2", path);
	snprintf(c3, sizeof c3, "%s/copy3.db", path);
	TRUE(mkdir(c1, 0755) == 0 && mkdir(c2, 0755) == 0);
	CHECK(mdb_env_copy(env, c1));
	CHECK(mdb_env_copy2(env, c2, MDB_CP_COMPACT));
	int out = open(c3, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	TRUE(out >= 0);
	CHECK(mdb_env_copyfd2(env, out, MDB_CP_COMPACT));
	close(out);
	TRUE(entries_at(c1, 0) == 5000);
	TRUE(entries_at(c2, 0) == 5000);
	TRUE(entries_at(c3, MDB_NOSUBDIR) == 5000);
	mdb_env_close(env);

	/* A read-only environment refuses write transactions. */
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_open(env, path, MDB_RDONLY, 0644));
	MDB_txn *w;
	EXPECT(mdb_txn_begin(env, NULL, 0, &w), EACCES);
	EXPECT(mdb_env_sync(env, 1), EACCES);
	mdb_env_close(env);

	/* MDB_NOSUBDIR: the path is the data file. */
	char file[4200];
	snprintf(file, sizeof file, "%s/single.db", path);
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_open(env, file, MDB_NOSUBDIR, 0644));
	fill(env, 10);
	mdb_env_close(env);
	TRUE(stat(file, &sb) == 0 && S_ISREG(sb.st_mode));
	TRUE(entries_at(file, MDB_NOSUBDIR) == 10);

	/* LMDB's own data file (a meta page with LMDB's magic): MDB_INVALID, whose text names
	 * `cairn migrate`, and the lock file an LMDB process may be using is not touched. */
	const char *ldir = fresh_dir("t_env_lmdb");
	char lpath[4200], lockp[4200];
	snprintf(lpath, sizeof lpath, "%s/data.mdb", ldir);
	snprintf(lockp, sizeof lockp, "%s/lock.mdb", ldir);
	unsigned char head[8192] = {0};
	head[10] = 0x08;
	head[16] = 0xde; head[17] = 0xc0; head[18] = 0xef; head[19] = 0xbe;
	head[20] = 1;
	FILE *hf = fopen(lpath, "wb");
	TRUE(hf && fwrite(head, 1, sizeof head, hf) == sizeof head && fclose(hf) == 0);
	CHECK(mdb_env_create(&env));
	EXPECT(mdb_env_open(env, ldir, 0, 0644), MDB_INVALID);
	mdb_env_close(env);
	TRUE(strstr(mdb_strerror(MDB_INVALID), "cairn migrate") != NULL);
	TRUE(stat(lockp, &sb) != 0);
	printf("t_env ok\n");
	return 0;
}
