/*
 * cairn.h: what Cairn's liblmdb offers beyond LMDB's lmdb.h. Include after lmdb.h; a
 * program using these links only with Cairn's library.
 */
#ifndef CAIRN_H
#define CAIRN_H

#include "lmdb.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Before mdb_env_open: in the lazy modes (MDB_NOSYNC, MDB_MAPASYNC, MDB_NOMETASYNC), flush
 * once this many bytes were written since the last flush (0: only mdb_env_sync and
 * mdb_env_close flush). Default: 64 MiB with MDB_NOMETASYNC, 0 with the other two. */
int cairn_env_set_sync_bytes(MDB_env *env, size_t bytes);

/* Checks every invariant of the current snapshot, reading every page of every tree. Returns
 * 0 when sound, MDB_CORRUPTED otherwise; *problems (if not NULL) receives the number of
 * problems and report (if not NULL) is called with each problem's text. */
int cairn_env_check(MDB_env *env, size_t *problems,
                    int (*report)(const char *problem, void *ctx), void *ctx);

#ifdef __cplusplus
}
#endif
#endif /* CAIRN_H */
