/* One C benchmark of lmdb.h, built twice by `make bench-capi`: against Debian's liblmdb and
 * against Cairn's (crates/cairn-capi). Usage: bench_capi DIR N. Prints one line per phase:
 * "<phase> <CPU ns per operation>" (best of 3 runs), the phases mirroring
 * crates/cairn-capi/examples/bench_rust.rs (the same work through Cairn's Rust API). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <lmdb.h>

#define E(call) do { int rc_ = (call); if (rc_) { \
	fprintf(stderr, "%s: %s\n", #call, mdb_strerror(rc_)); exit(1); } } while (0)

static double now(void) {
	struct timespec t;
	/* CPU time of the process (user and system): on a shared machine it is far steadier than
	 * wall time, and every phase here is CPU-bound (MDB_NOSYNC, data in the page cache). */
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* The i-th key of a permutation of 0..n-1 (n a power of two: an odd multiplier is a bijection). */
static uint64_t perm(uint64_t i, uint64_t n) { return (i * 0x9E3779B97F4A7C15ull) & (n - 1); }

/* 16 zero-padded decimal digits, written as bench_rust.rs writes them. */
static void key_of(char *buf, uint64_t x) {
	for (int i = 15; i >= 0; i--) buf[i] = (char)('0' + x % 10), x /= 10;
}

int main(int argc, char **argv) {
	if (argc < 3) { fprintf(stderr, "usage: bench_capi DIR N(power of two)\n"); return 2; }
	const char *dir = argv[1];
	uint64_t n = strtoull(argv[2], NULL, 10);
	if (n == 0 || (n & (n - 1))) { fprintf(stderr, "N must be a power of two\n"); return 2; }
	double best[4] = { 1e30, 1e30, 1e30, 1e30 };
	const char *names[4] = { "put_random", "get_random", "scan", "read_txn_get" };
	static char val[100];
	memset(val, 'v', sizeof val);
	for (int run = 0; run < 3; run++) {
		char cmd[4200];
		snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
		if (system(cmd)) return 1;
		MDB_env *env;
		MDB_txn *txn;
		MDB_dbi dbi;
		MDB_cursor *c;
		MDB_val k, v;
		char kb[17];
		E(mdb_env_create(&env));
		E(mdb_env_set_mapsize(env, (size_t)4 << 30));
		E(mdb_env_open(env, dir, MDB_NOSYNC, 0644));
		double t0 = now();
		for (uint64_t i = 0; i < n; i += 1000) {
			E(mdb_txn_begin(env, NULL, 0, &txn));
			if (i == 0) E(mdb_dbi_open(txn, NULL, 0, &dbi));
			for (uint64_t j = i; j < i + 1000 && j < n; j++) {
				key_of(kb, perm(j, n));
				k.mv_size = 16, k.mv_data = kb, v.mv_size = sizeof val, v.mv_data = val;
				E(mdb_put(txn, dbi, &k, &v, 0));
			}
			E(mdb_txn_commit(txn));
		}
		double t1 = now();
		uint64_t sum = 0;
		E(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
		for (uint64_t j = 0; j < n; j++) {
			key_of(kb, perm(j * 7 + 3, n));
			k.mv_size = 16, k.mv_data = kb;
			E(mdb_get(txn, dbi, &k, &v));
			sum += v.mv_size;
		}
		double t2 = now();
		E(mdb_cursor_open(txn, dbi, &c));
		uint64_t seen = 0;
		while (mdb_cursor_get(c, &k, &v, MDB_NEXT) == 0) seen++, sum += ((char *)v.mv_data)[0];
		mdb_cursor_close(c);
		mdb_txn_abort(txn);
		double t3 = now();
		uint64_t m = n / 4;
		for (uint64_t j = 0; j < m; j++) {
			E(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
			key_of(kb, perm(j * 5 + 1, n));
			k.mv_size = 16, k.mv_data = kb;
			E(mdb_get(txn, dbi, &k, &v));
			sum += v.mv_size;
			mdb_txn_abort(txn);
		}
		double t4 = now();
		if (seen != n || sum == 0) { fprintf(stderr, "wrong count %llu\n", (unsigned long long)seen); return 1; }
		double r[4] = { (t1 - t0) / n, (t2 - t1) / n, (t3 - t2) / n, (t4 - t3) / m };
		for (int i = 0; i < 4; i++) if (r[i] < best[i]) best[i] = r[i];
		mdb_env_close(env);
	}
	for (int i = 0; i < 4; i++) printf("%s %.1f\n", names[i], best[i]);
	return 0;
}
