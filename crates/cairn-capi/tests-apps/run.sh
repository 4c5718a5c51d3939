#!/bin/bash
# Runs every scenario of tests-apps (or those named as arguments) and holds the results to
# expected-failures: an app listed there must fail, any other must pass. Exit 1 on an
# unexpected failure or an unexpected pass.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
cd "$HERE"
APPS_WORK=${APPS_WORK:-$(cd ../../.. && pwd)/target/apps}
# One run at a time on this machine: the scenarios share their ports and work directories.
mkdir -p "$APPS_WORK"
exec 9> "$APPS_WORK/.lock"
flock -w 600 9 || { echo "another run of tests-apps holds $APPS_WORK/.lock"; exit 1; }
apps=("$@")
[ ${#apps[@]} -gt 0 ] || apps=($(ls *.sh | grep -v -e '^run.sh$' -e '^common.sh$' | sed 's/\.sh$//'))
expected() { # app: its line of expected-failures (app: reason), if any
	grep -E "^$1:" expected-failures 2>/dev/null | head -1
}
pass=0 xfail=0 bad=0
for a in "${apps[@]}"; do
	start=$(date +%s)
	log=$APPS_WORK/$a.log
	timeout -s KILL 240 bash "./$a.sh" > "$log" 2>&1
	rc=$?
	line=$(grep -E '^(PASS|FAIL) ' "$log" | tail -1)
	[ -n "$line" ] || line="FAIL $a: no verdict (exit $rc)"
	[[ $line == PASS* ]] && [ "$rc" = 0 ] || { [[ $line == FAIL* ]] || line="FAIL $a: exit $rc: $line"; rc=1; }
	t=$(( $(date +%s) - start ))s
	want=$(expected "$a")
	if [ "$rc" = 0 ] && [ -z "$want" ]; then
		echo "$line [$t]"; pass=$((pass + 1))
	elif [ "$rc" = 0 ]; then
		echo "UNEXPECTED PASS $a (listed in expected-failures: ${want#*: }) [$t]"; bad=$((bad + 1))
	elif [ -n "$want" ]; then
		echo "expected $line [$t]"; echo "    known cause: ${want#*: }"; xfail=$((xfail + 1))
	else
		echo "UNEXPECTED $line [$t]"; bad=$((bad + 1))
	fi
done
echo "Debian applications on Cairn's liblmdb.so.0: $pass passed, $xfail expected failures, $bad unexpected"
[ "$bad" = 0 ]
