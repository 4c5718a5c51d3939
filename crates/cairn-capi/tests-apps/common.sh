# Shared by the scenarios of tests-apps (sourced, bash). A scenario script defines
#   APP        its name (as in expected-failures)
#   scenario   a function run twice, once on Debian's liblmdb ("lmdb") and once on Cairn's
#              ("cairn"): $1 is the side, $W a fresh work directory, $RUN the command prefix that
#              picks the library (env LD_LIBRARY_PATH=... for Cairn, plain env for Debian's). It
#              prints what the program answered (normalized: no paths, times, pids) on stdout;
#              it calls `fail REASON` when a step of the program itself fails.
# and then calls `run_both`, which checks which liblmdb each side loaded, diffs the two outputs
# and prints "PASS app" or "FAIL app: reason" (exit 0 / 1).
set -u
set -o pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../../.." && pwd)
LIB=${CAIRN_LIB:-$ROOT/target/capi/lib}
CAIRN_SO=$(readlink -f "$LIB/liblmdb.so.0")
ARCH=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
DEB_SO=$(readlink -f /usr/lib/$ARCH/liblmdb.so.0)
APPS_WORK=${APPS_WORK:-$ROOT/target/apps}

# The side's command prefix.
run_prefix() {
	if [ "$1" = cairn ]; then echo "env LD_LIBRARY_PATH=$LIB"; else echo "env"; fi
}

# fail REASON: the scenario step that failed (printed by run_both), then stop this side.
fail() {
	echo "$*" | tr '\n' ' ' > "$W/.fail"
	exit 1
}

# The library a binary or plugin resolves liblmdb.so.0 to on this side (ldd).
ldd_lmdb() { # side file
	$(run_prefix "$1") ldd "$2" | awk '$1 == "liblmdb.so.0" { print $3 }' | xargs -r readlink -f
}

# expect_lib SIDE FILE: ldd says FILE loads this side's liblmdb.so.0.
expect_lib() {
	local got want
	got=$(ldd_lmdb "$1" "$2")
	if [ "$1" = cairn ]; then want=$CAIRN_SO; else want=$DEB_SO; fi
	[ "$got" = "$want" ] || fail "$2 loads liblmdb.so.0 from '${got:-nothing}', not $want"
	echo "$1: $2 -> $got" >> "$W/.libs"
}

# expect_pid_lib SIDE PID: the running process has this side's liblmdb.so.0 mapped (and no other).
expect_pid_lib() {
	local got want
	got=$(awk '/liblmdb\.so/ { print $NF }' "/proc/$2/maps" 2>/dev/null | sort -u | xargs -r readlink -f | sort -u)
	if [ "$1" = cairn ]; then want=$CAIRN_SO; else want=$DEB_SO; fi
	[ "$got" = "$want" ] || fail "pid $2 has mapped '${got:-no liblmdb}', not $want"
	echo "$1: pid $2 -> $got" >> "$W/.libs"
}

# wait_port PORT [SECONDS]: until something listens on 127.0.0.1:PORT (TCP).
wait_port() {
	local i
	for i in $(seq $((${2:-15} * 10))); do
		(exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

# Daemons started with `daemon NAME CMD...` (in the background, bounded by timeout) are killed
# when the side ends, by pid.
DAEMONS=()
daemon() { # name cmd...
	local name=$1; shift
	timeout -s KILL 120 "$@" > "$W/$name.log" 2>&1 &
	DAEMONS+=($!)
}
# The pid of the daemon itself (the child of the timeout started last).
daemon_pid() {
	local t=${DAEMONS[-1]} i
	for i in $(seq 50); do
		local c
		c=$(cat /proc/$t/task/$t/children 2>/dev/null | awk '{ print $1 }')
		[ -n "$c" ] && { echo "$c"; return; }
		sleep 0.1
	done
}
kill_daemons() {
	local p
	for p in ${DAEMONS[@]+"${DAEMONS[@]}"}; do
		pkill -TERM -P "$p" 2>/dev/null
		kill -TERM "$p" 2>/dev/null
	done
	for p in ${DAEMONS[@]+"${DAEMONS[@]}"}; do
		for _ in $(seq 30); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		pkill -KILL -P "$p" 2>/dev/null
		kill -KILL "$p" 2>/dev/null
		wait "$p" 2>/dev/null
	done
	DAEMONS=()
}

# One side in a subshell: fresh $W, output to $APPS_WORK/$APP/$side.out.
run_side() {
	local side=$1
	W=$APPS_WORK/$APP/$side
	rm -rf "$W" && mkdir -p "$W"
	(
		RUN=$(run_prefix "$side")
		trap kill_daemons EXIT
		cd "$W"
		scenario "$side"
	) > "$APPS_WORK/$APP/$side.out" 2> "$APPS_WORK/$APP/$side.err"
}

run_both() {
	mkdir -p "$APPS_WORK/$APP"
	local why=
	if ! run_side lmdb; then
		why="on Debian's liblmdb the scenario itself fails: $(cat "$APPS_WORK/$APP/lmdb/.fail" 2>/dev/null || tail -3 "$APPS_WORK/$APP/lmdb.err")"
	elif ! run_side cairn; then
		why=$(cat "$APPS_WORK/$APP/cairn/.fail" 2>/dev/null || tail -3 "$APPS_WORK/$APP/cairn.err")
	elif ! diff -u "$APPS_WORK/$APP/lmdb.out" "$APPS_WORK/$APP/cairn.out" > "$APPS_WORK/$APP/diff"; then
		why="output differs from Debian's liblmdb: $(grep -m3 '^[-+][^-+]' "$APPS_WORK/$APP/diff" | tr '\n' ' ')"
	fi
	[ -n "$why" ] || grep -q . "$APPS_WORK/$APP/cairn/.libs" 2>/dev/null || why="no check of the library loaded"
	if [ -n "$why" ]; then
		why=$(echo "$why" | tr '\n' ' ')
		echo "FAIL $APP: $why"
		return 1
	fi
	echo "PASS $APP ($(wc -l < "$APPS_WORK/$APP/cairn.out") lines as on Debian's liblmdb; $(grep -c . "$APPS_WORK/$APP/cairn/.libs") library checks)"
}

# kv load|dump PATH DB ...: LMDB files written and read through python3-lmdb on this side's
# library (kv.py); check it with `expect_lib SIDE "$PY_LMDB_EXT"`.
PY_LMDB_EXT=$(/usr/bin/python3 -c 'import lmdb.cpython as c; print(c.__file__)' 2>/dev/null)
kv() { $RUN /usr/bin/python3 "$HERE/kv.py" "$@"; }
