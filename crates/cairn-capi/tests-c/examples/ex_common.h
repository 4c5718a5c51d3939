/* Helpers of the example programs. They use only lmdb.h and print what they read, so the
 * same source built against LMDB and against Cairn must print the same text. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <lmdb.h>

#define E(call) do { int rc_ = (call); if (rc_) { printf("%s: error %d\n", #call, rc_); exit(1); } } while (0)

static inline MDB_val S(const char *s) { MDB_val v = { strlen(s), (void *)s }; return v; }
static inline void show(const char *what, int rc, MDB_val *k, MDB_val *v) {
	if (rc) { printf("%s -> rc %d\n", what, rc); return; }
	printf("%s -> %.*s = %.*s\n", what, (int)k->mv_size, (char *)k->mv_data,
	       (int)v->mv_size, (char *)v->mv_data);
}
static inline MDB_env *ex_open(const char *dir, unsigned maxdbs) {
	MDB_env *env;
	mkdir(dir, 0755);
	E(mdb_env_create(&env));
	E(mdb_env_set_maxdbs(env, maxdbs));
	E(mdb_env_set_mapsize(env, 64 << 20));
	E(mdb_env_open(env, dir, 0, 0644));
	return env;
}
