# Past RAM (issue 22; bench/src/pastram.rs, docs/bench/pastram/README.md): random inserts of
# PASTRAM_RECORDS db_bench pairs, then random reads, for Cairn's, LMDB's and RocksDB's modes,
# each phase in a fresh memory cgroup of PASTRAM_MEM (page cache included, no swap), page cache
# dropped between phases, each phase capped at PASTRAM_CAP seconds (a capped phase reports the
# rate it reached). Needs root (cgroups, drop_caches) and RocksDB's library (bench/run.sh
# installs it: librocksdb-dev). Not part of `make test`: with the defaults it takes up to ~30
# minutes. The build runs at nice 19, the benchmark at normal priority.
# PASTRAM_ARGS: e.g. "--configs cairn-lazy,lmdb-nosync,rocksdb-nosync" or "--dir /mnt/ssd".
PASTRAM_RECORDS ?= 3000000
PASTRAM_MEM ?= 384M
PASTRAM_CAP ?= 120
PASTRAM_ARGS ?=
PASTRAM_CMD = --suites pastram --records $(PASTRAM_RECORDS) --cgroup-mem $(PASTRAM_MEM) \
  --phase-cap $(PASTRAM_CAP) --out docs/bench/pastram $(PASTRAM_ARGS)
.PHONY: bench-pastram
bench-pastram:
	nice -n 19 $(CARGO) build --release -p cairn-bench
	CAIRN_BENCH_COMMAND="make bench-pastram: cairn-bench $(PASTRAM_CMD)" \
	  target/release/cairn-bench $(PASTRAM_CMD)
