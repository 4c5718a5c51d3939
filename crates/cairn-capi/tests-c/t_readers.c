/* Readers: read transactions in several threads beside a writer (MDB_NOTLS and without),
 * and mdb_reader_check clearing the slot of a process that died inside a read transaction. */
#include "check.h"
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

static MDB_env *env;
static MDB_dbi dbi;

static void *reader(void *arg) {
	(void)arg;
	for (int i = 0; i < 200; i++) {
		MDB_txn *r;
		MDB_val k = sv("counter"), v;
		CHECK(mdb_txn_begin(env, NULL, MDB_RDONLY, &r));
		int rc = mdb_get(r, dbi, &k, &v);
		TRUE(rc == 0 || rc == MDB_NOTFOUND);
		if (rc == 0) TRUE(v.mv_size == 8);
		mdb_txn_abort(r);
	}
	return NULL;
}

static int lines;
static int count(const char *msg, void *ctx) { (void)msg; (void)ctx; lines++; return 0; }

int main(void) {
	env = open_env("t_readers", MDB_NOTLS, 0);
	MDB_txn *txn;
	CHECK(mdb_txn_begin(env, NULL, 0, &txn));
	CHECK(mdb_dbi_open(txn, NULL, 0, &dbi));
	CHECK(mdb_txn_commit(txn));
	pthread_t th[4];
	for (int i = 0; i < 4; i++) TRUE(pthread_create(&th[i], NULL, reader, NULL) == 0);
	for (long i = 0; i < 100; i++) {
		CHECK(mdb_txn_begin(env, NULL, 0, &txn));
		MDB_val k = sv("counter"), v = { 8, &i };
		CHECK(mdb_put(txn, dbi, &k, &v, 0));
		CHECK(mdb_txn_commit(txn));
	}
	for (int i = 0; i < 4; i++) TRUE(pthread_join(th[i], NULL) == 0);

	/* A process that dies holding a read transaction leaves a slot; reader_check clears it.
	 * The child is killed from here with SIGKILL once its transaction is open, as a crashed
	 * reader would die: no exit processing at all. That matters under valgrind, which runs
	 * its leak check at every other end, even a SIGKILL the process sends itself: memcheck
	 * scans every readable and writable file mapping, the never-closed environment still maps
	 * the data file writable with address space reserved far past the file's end, each word
	 * read there raises SIGBUS and memcheck steps over one 8-byte word per fault
	 * (mc_leakcheck.c, lc_scan_memory), so the scan of gigabytes of reservation never ends. */
	const char *path = NULL;
	CHECK(mdb_env_get_path(env, &path));
	int ready[2];
	TRUE(pipe(ready) == 0);
	pid_t pid = fork();
	TRUE(pid >= 0);
	if (pid == 0) {
		MDB_env *e2;
		MDB_txn *r;
		close(ready[0]);
		if (mdb_env_create(&e2) || mdb_env_open(e2, path, 0, 0644) ||
		    mdb_txn_begin(e2, NULL, MDB_RDONLY, &r) || write(ready[1], "r", 1) != 1)
			_exit(3);
		for (;;) pause(); /* no abort, no close: the slot stays taken */
	}
	close(ready[1]);
	char byte;
	TRUE(read(ready[0], &byte, 1) == 1); /* EOF instead: the child failed (exit 3) */
	close(ready[0]);
	TRUE(kill(pid, SIGKILL) == 0);
	int status;
	TRUE(waitpid(pid, &status, 0) == pid && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	lines = 0;
	CHECK(mdb_reader_list(env, count, NULL));
	TRUE(lines == 2); /* header + the dead reader */
	int dead = 0;
	CHECK(mdb_reader_check(env, &dead));
	TRUE(dead == 1);
	lines = 0;
	CHECK(mdb_reader_list(env, count, NULL));
	TRUE(lines == 1); /* "(no active readers)" */
	mdb_env_close(env);
	printf("t_readers ok\n");
	return 0;
}
