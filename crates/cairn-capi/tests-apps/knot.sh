#!/bin/bash
# Knot DNS: knotd serves a zone whose changes (made through knotc's zone transactions) go to its
# LMDB journal; kjournalprint then lists the journal's zones (-z) and prints the changes, and
# knotd restarted from the journal serves the changed zone.
APP=knot
. "$(dirname "$0")/common.sh"
DNS=15331

scenario() {
	expect_lib "$1" /usr/sbin/knotd
	expect_lib "$1" /usr/sbin/kjournalprint
	cat > knot.conf <<CONF
server:
    rundir: "$W"
    listen: 127.0.0.1@$DNS
log:
  - target: stderr
    any: info
database:
    storage: "$W/db"
control:
    listen: "$W/knot.sock"
template:
  - id: default
    storage: "$W"
    journal-content: changes
    zonefile-sync: -1
    zonefile-load: whole
zone:
  - domain: example.test
  - domain: other.test
CONF
	for z in example other; do
		cat > $z.test.zone <<ZONE
\$ORIGIN $z.test.
\$TTL 300
@ SOA ns.$z.test. admin.$z.test. 1 3600 600 86400 300
@ NS ns
ns A 127.0.0.1
www A 192.0.2.1
ZONE
	done
	mkdir -p db
	local c="knotc -c $W/knot.conf -s $W/knot.sock"
	start() {
		daemon knotd $RUN knotd -c "$W/knot.conf"
		wait_port $DNS 20 || fail "knotd did not start: $(tail -3 knotd.log)"
		expect_pid_lib "$1" "$(daemon_pid)"
		for _ in $(seq 50); do [ -S knot.sock ] && $c status > /dev/null 2>&1 && break; sleep 0.1; done
		for _ in $(seq 50); do
			$c zone-status example.test 2>/dev/null | grep -q 'serial: [1-9]' && break; sleep 0.1
		done
	}
	start "$1"
	local q="dig +time=2 +tries=2 -p $DNS @127.0.0.1"
	for i in 1 2 3; do
		$c zone-begin example.test > /dev/null || fail "knotc zone-begin failed"
		$c zone-set example.test host$i 300 A 192.0.2.1$i > /dev/null || fail "knotc zone-set failed"
		[ $i = 2 ] && $c zone-unset example.test www A > /dev/null
		$c zone-commit example.test > /dev/null || fail "knotc zone-commit failed"
	done
	$c zone-begin other.test > /dev/null && $c zone-set other.test mail 300 A 192.0.2.25 > /dev/null &&
		$c zone-commit other.test > /dev/null || fail "knotc changes to other.test failed"
	echo "serial: $($q +short example.test SOA | awk '{ print $3 }') host3: $($q +short host3.example.test A) www: [$($q +short www.example.test A)]"
	$c stop > /dev/null
	for _ in $(seq 50); do [ -S knot.sock ] || break; sleep 0.1; done
	kill_daemons
	echo "--- kjournalprint -z"
	local out
	out=$($RUN kjournalprint -c "$W/knot.conf" -z 2>&1) || fail "kjournalprint -z: $out"
	echo "$out"
	echo "--- kjournalprint example.test"
	out=$($RUN kjournalprint -c "$W/knot.conf" example.test 2>&1) || fail "kjournalprint: $out"
	echo "$out"
	echo "--- kjournalprint -d other.test"
	$RUN kjournalprint -c "$W/knot.conf" -d other.test | sed 's/[0-9]* KiB/N KiB/'
	start "$1"
	echo "after restart: serial $($q +short example.test SOA | awk '{ print $3 }') host2: $($q +short host2.example.test A) mail.other: $($q +short mail.other.test A)"
	$c stop > /dev/null
}
run_both
