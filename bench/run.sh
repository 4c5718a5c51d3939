#!/usr/bin/env bash
# Runs the Cairn benchmark harness: installs what it needs, builds in release mode, runs.
#
#   bench/run.sh quick [extra args]   # 200k records, a subset of workloads (a few minutes)
#   bench/run.sh full  [extra args]   # 1M records, every workload
#
# Extra arguments go to the harness, e.g. `bench/run.sh full --records 10000000`,
# `bench/run.sh quick --engines cairn,lmdb`, `--dir /mnt/ssd/bench`, `--repeat 3`.
# See bench/README.md. Environment: CAIRN_BENCH_NO_APT=1 skips the package check;
# CAIRN_BENCH_NO_CAPI=1 skips building the capi suite's programs.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
cd "$root"

set_name="${1:-quick}"
case "$set_name" in
    quick | full) shift || true ;;
    -h | --help)
        sed -n '2,10p' "$0"
        exit 0
        ;;
    *)
        echo "usage: bench/run.sh quick|full [harness args...]" >&2
        exit 2
        ;;
esac

# --- System packages --------------------------------------------------------------------------
# librocksdb-dev: RocksDB's shared library and C header (linked, not built from source).
# libclang-dev:   bindgen, which mdbx-sys runs at build time, needs libclang.
# fonts-dejavu-core: a TrueType font for the PNG plots.
# liblmdb-dev:    the capi suite's C program is linked against Debian's LMDB too.
packages=(librocksdb-dev libclang-dev fonts-dejavu-core liblmdb-dev)
missing=()
if [[ "${CAIRN_BENCH_NO_APT:-0}" != 1 ]] && command -v dpkg-query > /dev/null; then
    for p in "${packages[@]}"; do
        if ! dpkg-query -W -f='${Status}' "$p" 2> /dev/null | grep -q 'install ok installed'; then
            missing+=("$p")
        fi
    done
fi
if ((${#missing[@]})); then
    echo "run.sh: installing ${missing[*]}" >&2
    sudo=()
    if [[ $(id -u) != 0 ]] && command -v sudo > /dev/null; then sudo=(sudo); fi
    if ! { "${sudo[@]}" apt-get update -qq &&
        DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq "${missing[@]}"; }; then
        echo "run.sh: WARNING: could not install ${missing[*]}; continuing without them" >&2
    fi
fi

# --- Features ---------------------------------------------------------------------------------
features=()
if ! cargo check -q -p cairn 2> /dev/null; then
    echo "run.sh: WARNING: the Cairn engine (crates/cairn) does not compile; benchmarking the" \
        "peers only (feature \`cairn\` off)" >&2
    features=(--no-default-features)
    if [[ -e /usr/include/rocksdb/c.h || -n "${ROCKSDB_LIB_DIR:-}" ]]; then
        features+=(--features rocksdb)
    fi
elif [[ ! -e /usr/include/rocksdb/c.h && -z "${ROCKSDB_LIB_DIR:-}" ]]; then
    echo "run.sh: WARNING: no RocksDB library found; benchmarking without RocksDB" >&2
    features=(--no-default-features --features cairn)
fi

# --- Build and run ----------------------------------------------------------------------------
echo "run.sh: cargo build --release -p cairn-bench ${features[*]}" >&2
cargo build --release -p cairn-bench "${features[@]}"
# The capi suite's programs (bench/src/capi.rs): Cairn's C library, the C program built against
# it and against LMDB, and the Rust twin. A failure here fails that suite only.
# CAIRN_BENCH_NO_CAPI=1 skips them, for runs that leave that suite out (make bench-group).
if [[ "${CAIRN_BENCH_NO_CAPI:-0}" != 1 ]]; then
    echo "run.sh: make capi-bench-programs" >&2
    if ! make -s capi-bench-programs >&2; then
        echo "run.sh: WARNING: the capi suite's programs did not build; that suite will fail" >&2
    fi
fi
target_dir="${CARGO_TARGET_DIR:-$root/target}"
export CAIRN_BENCH_COMMAND="bench/run.sh $set_name${*:+ $*}"
exec "$target_dir/release/cairn-bench" "$set_name" "$@"
