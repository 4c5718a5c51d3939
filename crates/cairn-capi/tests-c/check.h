/* Shared helpers of the C tests: CHECK(rc) fails the test with the call and the code's text. */
#ifndef CAIRN_TEST_CHECK_H
#define CAIRN_TEST_CHECK_H
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "lmdb.h"

#define CHECK(call) do { int rc_ = (call); if (rc_ != 0) { \
	fprintf(stderr, "%s:%d: %s: %d (%s)\n", __FILE__, __LINE__, #call, rc_, mdb_strerror(rc_)); \
	exit(1); } } while (0)
#define EXPECT(call, want) do { int rc_ = (call); if (rc_ != (want)) { \
	fprintf(stderr, "%s:%d: %s: got %d (%s), want %d\n", __FILE__, __LINE__, #call, rc_, \
		mdb_strerror(rc_), (want)); exit(1); } } while (0)
#define TRUE(cond) do { if (!(cond)) { \
	fprintf(stderr, "%s:%d: not true: %s\n", __FILE__, __LINE__, #cond); exit(1); } } while (0)

static inline MDB_val sv(const char *s) { MDB_val v = { strlen(s), (void *)s }; return v; }
static inline int veq(MDB_val v, const char *s) {
	return v.mv_size == strlen(s) && memcmp(v.mv_data, s, v.mv_size) == 0;
}

/* A fresh empty directory under TMPDIR (removed by the Makefile afterwards). */
static inline const char *fresh_dir(const char *name) {
	static char buf[4096];
	const char *base = getenv("CAIRN_CTEST_DIR");
	snprintf(buf, sizeof buf, "%s/%s", base ? base : "/tmp", name);
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", buf);
	if (system(cmd) != 0) exit(2);
	if (mkdir(buf, 0755) != 0) { perror(buf); exit(2); }
	return buf;
}

static inline MDB_env *open_env(const char *name, unsigned flags, MDB_dbi maxdbs) {
	MDB_env *env;
	CHECK(mdb_env_create(&env));
	CHECK(mdb_env_set_maxdbs(env, maxdbs));
	CHECK(mdb_env_open(env, fresh_dir(name), flags, 0664));
	return env;
}
#endif
