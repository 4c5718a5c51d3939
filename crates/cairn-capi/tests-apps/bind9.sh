#!/bin/bash
# bind9: named keeps the zones added with `rndc addzone` in an LMDB new-zone database
# (_default.nzd, MDB_NOSUBDIR); named answers for them, `rndc showzone` reads them back,
# `rndc delzone` removes one, a restarted named loads them again, and named-nzd2nzf prints
# the database.
APP=bind9
. "$(dirname "$0")/common.sh"
DNS=15301 CTL=15302

scenario() {
	expect_lib "$1" /usr/sbin/named
	expect_lib "$1" /usr/bin/named-nzd2nzf
	rndc-confgen -a -c rndc.key -k rndc-key > /dev/null 2>&1 || fail "rndc-confgen failed"
	cat > named.conf <<CONF
include "$W/rndc.key";
options {
	directory "$W";
	pid-file "$W/named.pid";
	listen-on port $DNS { 127.0.0.1; };
	listen-on-v6 { none; };
	allow-new-zones yes;
	recursion no;
	dnssec-validation no;
};
controls { inet 127.0.0.1 port $CTL allow { 127.0.0.1; } keys { rndc-key; }; };
CONF
	for z in one two three; do
		cat > $z.test.db <<ZONE
\$TTL 300
@ IN SOA ns.$z.test. admin.$z.test. 1 3600 600 86400 300
@ IN NS ns.$z.test.
ns IN A 127.0.0.1
www IN A 192.0.2.$(( ${#z} ))
ZONE
	done
	printf 'include "%s/rndc.key";\noptions { default-key "rndc-key"; default-server 127.0.0.1; default-port %s; };\n' \
		"$W" $CTL > rndc.conf
	local rndc="rndc -c $W/rndc.conf"
	start() {
		daemon named $RUN named -g -n 1 -c "$W/named.conf"
		wait_port $DNS 20 || fail "named did not start: $(tail -3 named.log)"
		wait_port $CTL 20 || fail "named's control channel did not open"
		expect_pid_lib "$1" "$(daemon_pid)"
	}
	start "$1"
	for z in one two three; do
		$rndc addzone $z.test "{ type primary; file \"$z.test.db\"; };" || fail "rndc addzone $z.test failed"
	done
	$rndc delzone two.test > /dev/null || fail "rndc delzone failed"
	for z in one two three; do
		echo "dig www.$z.test: $(dig +short +time=2 +tries=2 -p $DNS @127.0.0.1 www.$z.test A)"
	done
	echo "showzone one.test: $($rndc showzone one.test)"
	$rndc stop > /dev/null || fail "rndc stop failed"
	for _ in $(seq 50); do [ -e named.pid ] || break; sleep 0.2; done
	kill_daemons
	ls *.nzd > /dev/null 2>&1 || fail "named wrote no .nzd database"
	echo "--- named-nzd2nzf after the first run"
	$RUN named-nzd2nzf _default.nzd || fail "named-nzd2nzf failed"
	start "$1"
	echo "after restart: $(dig +short +time=2 +tries=2 -p $DNS @127.0.0.1 www.three.test A)"
	$rndc addzone two.test '{ type primary; file "two.test.db"; };' || fail "rndc addzone after restart failed"
	echo "after restart: $(dig +short +time=2 +tries=2 -p $DNS @127.0.0.1 www.two.test A)"
	$rndc stop > /dev/null
	for _ in $(seq 50); do [ -e named.pid ] || break; sleep 0.2; done
	kill_daemons
	echo "--- named-nzd2nzf after the restart"
	$RUN named-nzd2nzf _default.nzd || fail "named-nzd2nzf failed"
}
run_both
