/* One C benchmark of lmdb.h, built twice: against Debian's liblmdb and against Cairn's
 * (crates/cairn-capi). The harness's `capi` suite (bench/src/capi.rs) runs both beside
 * crates/cairn-capi/examples/bench_rust.rs, the same work through Cairn's Rust API.
 *
 * Usage: bench_capi DIR N [RUNS]. N records (a power of two), RUNS rounds (default 3) on a
 * fresh environment each. Prints one line per phase: "<phase> <CPU ns per operation>", the
 * best round. Each phase is a function of its own (never inlined) so that a profiler
 * (valgrind --tool=callgrind) gives its instruction count directly: the Rust twin has the
 * same functions under the same names. */
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
#define NOINLINE __attribute__((noinline))

static double now(void) {
	struct timespec t;
	/* CPU time of the process (user and system): on a shared machine it is far steadier than
	 * wall time, and every phase here is CPU-bound (MDB_NOSYNC, data in the page cache). */
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

/* The i-th key of a permutation of 0..n-1 (n a power of two: an odd multiplier is a bijection). */
static uint64_t perm(uint64_t i, uint64_t n) { return (i * 0x9E3779B97F4A7C15ull) & (n - 1); }

/* 16 zero-padded decimal digits, written as bench_rust.rs writes them. Unrolled as rustc
 * unrolls bench_rust.rs's loop (gcc -O2 keeps the loop, some 10 instructions more per key),
 * so that the phases' own work costs the same in both programs and C / Rust is the layer's. */
static void key_of(char *buf, uint64_t x) {
#pragma GCC unroll 16
	for (int i = 15; i >= 0; i--) buf[i] = (char)('0' + x % 10), x /= 10;
}

static char val[100];

/* n random puts, 1000 per write transaction. */
static NOINLINE void phase_put_random(MDB_env *env, MDB_dbi dbi, uint64_t n) {
	MDB_txn *txn;
	MDB_val k, v;
	char kb[16];
	for (uint64_t i = 0; i < n; i += 1000) {
		E(mdb_txn_begin(env, NULL, 0, &txn));
		for (uint64_t j = i; j < i + 1000 && j < n; j++) {
			key_of(kb, perm(j, n));
			k.mv_size = 16, k.mv_data = kb, v.mv_size = sizeof val, v.mv_data = val;
			E(mdb_put(txn, dbi, &k, &v, 0));
		}
		E(mdb_txn_commit(txn));
	}
}

/* n random gets in one read transaction. */
static NOINLINE uint64_t phase_get_random(MDB_txn *txn, MDB_dbi dbi, uint64_t n) {
	MDB_val k, v;
	char kb[16];
	uint64_t sum = 0;
	for (uint64_t j = 0; j < n; j++) {
		key_of(kb, perm(j * 7 + 3, n));
		k.mv_size = 16, k.mv_data = kb;
		E(mdb_get(txn, dbi, &k, &v));
		sum += v.mv_size;
	}
	return sum;
}

/* A cursor over every pair, forwards (op MDB_NEXT) or backwards (MDB_PREV). */
static NOINLINE uint64_t phase_scan(MDB_txn *txn, MDB_dbi dbi, MDB_cursor_op op) {
	MDB_cursor *c;
	MDB_val k, v;
	uint64_t seen = 0;
	E(mdb_cursor_open(txn, dbi, &c));
	while (mdb_cursor_get(c, &k, &v, op) == 0) seen++, seen += ((char *)v.mv_data)[0] == 0;
	mdb_cursor_close(c);
	return seen;
}

/* n random MDB_SET_KEY seeks through one cursor. */
static NOINLINE uint64_t phase_cursor_seek(MDB_txn *txn, MDB_dbi dbi, uint64_t n) {
	MDB_cursor *c;
	MDB_val k, v;
	char kb[16];
	uint64_t sum = 0;
	E(mdb_cursor_open(txn, dbi, &c));
	for (uint64_t j = 0; j < n; j++) {
		key_of(kb, perm(j * 3 + 2, n));
		k.mv_size = 16, k.mv_data = kb;
		E(mdb_cursor_get(c, &k, &v, MDB_SET_KEY));
		sum += v.mv_size;
	}
	mdb_cursor_close(c);
	return sum;
}

/* m short read transactions of one get each, begun and aborted. */
static NOINLINE uint64_t phase_read_txn_get(MDB_env *env, MDB_dbi dbi, uint64_t m, uint64_t n) {
	MDB_txn *txn;
	MDB_val k, v;
	char kb[16];
	uint64_t sum = 0;
	for (uint64_t j = 0; j < m; j++) {
		E(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
		key_of(kb, perm(j * 5 + 1, n));
		k.mv_size = 16, k.mv_data = kb;
		E(mdb_get(txn, dbi, &k, &v));
		sum += v.mv_size;
		mdb_txn_abort(txn);
	}
	return sum;
}

/* Marks the end of the last phase for a profiler (callgrind --dump-before='*phase_*'). */
static NOINLINE void phase_done(void) { __asm__ volatile(""); }

#define PHASES 6

int main(int argc, char **argv) {
	if (argc < 3) { fprintf(stderr, "usage: bench_capi DIR N(power of two) [RUNS]\n"); return 2; }
	const char *dir = argv[1];
	uint64_t n = strtoull(argv[2], NULL, 10);
	int runs = argc > 3 ? atoi(argv[3]) : 3;
	if (n < 4 || (n & (n - 1))) { fprintf(stderr, "N must be a power of two, 4 or more\n"); return 2; }
	if (runs < 1) { fprintf(stderr, "RUNS must be 1 or more\n"); return 2; }
	double best[PHASES];
	const char *names[PHASES] = { "put_random", "get_random", "scan", "scan_reverse",
		"cursor_seek", "read_txn_get" };
	for (int i = 0; i < PHASES; i++) best[i] = 1e30;
	memset(val, 'v', sizeof val);
	for (int run = 0; run < runs; run++) {
		char cmd[4200];
		snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
		if (system(cmd)) return 1;
		MDB_env *env;
		MDB_txn *txn;
		MDB_dbi dbi;
		E(mdb_env_create(&env));
		E(mdb_env_set_mapsize(env, (size_t)4 << 30));
		E(mdb_env_open(env, dir, MDB_NOSYNC, 0644));
		E(mdb_txn_begin(env, NULL, 0, &txn));
		E(mdb_dbi_open(txn, NULL, 0, &dbi));
		E(mdb_txn_commit(txn));
		uint64_t m = n / 4, ops[PHASES] = { n, n, n, n, n, m };
		double t[PHASES + 1];
		uint64_t sum = 0, seen, back;
		t[0] = now();
		phase_put_random(env, dbi, n);
		t[1] = now();
		E(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn));
		sum += phase_get_random(txn, dbi, n);
		t[2] = now();
		seen = phase_scan(txn, dbi, MDB_NEXT);
		t[3] = now();
		back = phase_scan(txn, dbi, MDB_PREV);
		t[4] = now();
		sum += phase_cursor_seek(txn, dbi, n);
		mdb_txn_abort(txn);
		t[5] = now();
		sum += phase_read_txn_get(env, dbi, m, n);
		t[6] = now();
		phase_done();
		if (seen != n || back != n || sum != (2 * n + m) * sizeof val) {
			fprintf(stderr, "wrong figures: %llu %llu pairs scanned of %llu\n",
				(unsigned long long)seen, (unsigned long long)back, (unsigned long long)n);
			return 1;
		}
		for (int i = 0; i < PHASES; i++) {
			double r = (t[i + 1] - t[i]) / ops[i];
			if (r < best[i]) best[i] = r;
		}
		mdb_env_close(env);
	}
	for (int i = 0; i < PHASES; i++) printf("%s %.1f\n", names[i], best[i]);
	return 0;
}
