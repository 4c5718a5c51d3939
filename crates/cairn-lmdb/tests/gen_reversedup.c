/* Writes an LMDB environment with the flags py-lmdb cannot ask for (MDB_REVERSEDUP), through
 * LMDB's C API: `gen_reversedup DIR SEED`. Databases: "rdup" (DUPSORT|REVERSEDUP), "rdupfix"
 * (DUPSORT|DUPFIXED|REVERSEDUP), "rkrd" (REVERSEKEY|DUPSORT|REVERSEDUP), with keys holding a
 * few values (a sub-page) and hundreds (a sub-tree). */
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHECK(x) do { int rc_ = (x); if (rc_) { fprintf(stderr, "%s: %s\n", #x, mdb_strerror(rc_)); exit(1); } } while (0)

static unsigned long long state;
static unsigned next(void) { state = state * 6364136223846793005ULL + 1442695040888963407ULL; return (unsigned)(state >> 33); }

int main(int argc, char **argv) {
    if (argc != 3) return 2;
    state = strtoull(argv[2], 0, 10);
    MDB_env *env; MDB_txn *txn;
    CHECK(mdb_env_create(&env));
    CHECK(mdb_env_set_maxdbs(env, 8));
    CHECK(mdb_env_set_mapsize(env, 1 << 28));
    CHECK(mdb_env_open(env, argv[1], 0, 0644));
    CHECK(mdb_txn_begin(env, NULL, 0, &txn));
    const char *names[3] = {"rdup", "rdupfix", "rkrd"};
    unsigned flags[3] = {MDB_DUPSORT | MDB_REVERSEDUP, MDB_DUPSORT | MDB_DUPFIXED | MDB_REVERSEDUP,
                         MDB_REVERSEKEY | MDB_DUPSORT | MDB_REVERSEDUP};
    for (int d = 0; d < 3; d++) {
        MDB_dbi dbi;
        CHECK(mdb_dbi_open(txn, names[d], flags[d] | MDB_CREATE, &dbi));
        for (int i = 0; i < 300; i++) {
            char k[16], v[32];
            int kl = 1 + next() % 12, n = (next() % 20 == 0) ? 200 + next() % 400 : 1 + next() % 4;
            for (int j = 0; j < kl; j++) k[j] = (char)next();
            for (int j = 0; j < n; j++) {
                int vl = (flags[d] & MDB_DUPFIXED) ? 10 : 1 + next() % 30;
                for (int b = 0; b < vl; b++) v[b] = (char)next();
                MDB_val key = {kl, k}, val = {vl, v};
                int rc = mdb_put(txn, dbi, &key, &val, MDB_NODUPDATA);
                if (rc && rc != MDB_KEYEXIST) CHECK(rc);
            }
        }
    }
    CHECK(mdb_txn_commit(txn));
    mdb_env_close(env);
    return 0;
}
