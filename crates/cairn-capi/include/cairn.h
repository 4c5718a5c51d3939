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

/* Group commit: writers of one process that arrive while a commit is in flight share the
 * next one (one flush for the whole group in the durable mode).
 *
 * cairn_write_grouped runs fn(txn, ctx) with a write transaction txn and returns:
 *   - fn's return value when it is not 0: fn's changes are rolled back, and only fn's (the
 *     other callbacks of the group still commit);
 *   - 0 once the group's commit is done: durable in the durable mode (no MDB_NOSYNC,
 *     MDB_MAPASYNC or MDB_NOMETASYNC), committed in the lazy ones;
 *   - else the commit's error (MDB_MAP_FULL, an errno value such as EIO), or MDB_BAD_TXN when
 *     fn returned 0 after a failed write left txn unusable (fn's changes are rolled back);
 *   - EINVAL for a NULL env or fn, or when called inside a grouped callback of env; EACCES
 *     for a read-only env.
 * A thread that holds a write transaction of env must not call it (it would wait for that
 * transaction forever, as a second mdb_txn_begin would).
 *
 * !!! fn MAY RUN ON ANOTHER THREAD than the caller's: one caller, the group's leader, runs
 * the queued callbacks one after another (in the order they were queued), each in a nested
 * transaction of its own, then commits once and wakes every caller. ctx is handed to fn on
 * whichever thread runs it, so whatever fn touches must be safe to use from another thread
 * (no thread-local state; no locks the caller holds across the call, or the leader waits for
 * them forever). The caller blocks until its callback ran and the group committed.
 *
 * Inside fn, txn works with mdb_get, mdb_put, mdb_del, cursors, mdb_dbi_open (MDB_CREATE
 * too), mdb_stat, mdb_drop and nested transactions (mdb_txn_begin with txn as the parent).
 * mdb_txn_commit(txn) returns EINVAL and mdb_txn_abort(txn) does nothing: the group commits
 * txn (return 0 to keep the changes, nonzero to roll them back). Beginning another write
 * transaction of env inside fn (mdb_txn_begin without parent, cairn_write_grouped) returns
 * EINVAL instead of deadlocking; read-only transactions are fine.
 *
 * txn is valid only during the call. When fn returns, a nested transaction it left open is
 * aborted and the cursors it opened on txn are freed (as at a commit): neither txn nor those
 * cursors may be used afterwards. A database handle opened in txn becomes usable by other
 * transactions once the group committed (it is closed if fn's changes were rolled back or
 * the commit failed), as a handle opened in a committed transaction. */
int cairn_write_grouped(MDB_env *env, int (*fn)(MDB_txn *txn, void *ctx), void *ctx);

/* Before mdb_env_open: the bounds of a group (cairn_write_grouped). A group carries at most
 * max_writes callbacks, and keeps taking callbacks that queue while it runs for at most
 * max_time_us microseconds from its start (those it took still run). 0 keeps the default
 * (1,024 callbacks, 10,000 microseconds). EINVAL after mdb_env_open. */
int cairn_env_set_group_limits(MDB_env *env, size_t max_writes, unsigned int max_time_us);

#ifdef __cplusplus
}
#endif
#endif /* CAIRN_H */
