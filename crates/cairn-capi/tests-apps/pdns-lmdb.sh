#!/bin/bash
# PowerDNS's LMDB backend (pdns-backend-lmdb): zones made and edited with pdnsutil (records,
# a zone's metadata, a TSIG key, zones deleted), listed back, then served by pdns_server.
APP=pdns-lmdb
. "$(dirname "$0")/common.sh"
DNS=15321

scenario() {
	expect_lib "$1" /usr/lib/$ARCH/pdns/liblmdbbackend.so
	cat > pdns.conf <<CONF
launch=lmdb
lmdb-filename=$W/pdns.lmdb
lmdb-shards=2
local-address=127.0.0.1
local-port=$DNS
socket-dir=$W
guardian=no
daemon=no
disable-syslog=yes
security-poll-suffix=
webserver=no
CONF
	local u="$RUN pdnsutil --config-dir=$W"
	$u create-zone example.test ns1.example.test > /dev/null || fail "pdnsutil create-zone failed"
	$u create-zone other.test ns1.other.test > /dev/null || fail "pdnsutil create-zone failed"
	for i in $(seq 1 30); do
		$u add-record example.test host$i A 300 192.0.2.$i > /dev/null || fail "pdnsutil add-record failed"
	done
	$u add-record example.test www CNAME 300 host1.example.test > /dev/null
	$u add-record example.test @ MX 300 "10 mail.example.test" > /dev/null
	$u add-record example.test @ TXT 300 '"hello from lmdb"' > /dev/null
	$u replace-rrset example.test host2 A 600 192.0.2.200 > /dev/null || fail "pdnsutil replace-rrset failed"
	$u delete-rrset example.test host3 A > /dev/null || fail "pdnsutil delete-rrset failed"
	$u set-meta other.test ALSO-NOTIFY 192.0.2.53 > /dev/null || fail "pdnsutil set-meta failed"
	$u set-kind other.test secondary > /dev/null
	$u import-tsig-key mykey hmac-sha256 'c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0' > /dev/null || fail "pdnsutil import-tsig-key failed"
	$u delete-zone other.test > /dev/null || fail "pdnsutil delete-zone failed"
	$u create-zone third.test > /dev/null || fail "pdnsutil create-zone failed"
	echo "--- list-all-zones"
	$u list-all-zones | sort
	echo "--- list-zone example.test"
	$u list-zone example.test | sort || fail "pdnsutil list-zone failed"
	echo "--- list-tsig-keys"
	$u list-tsig-keys
	echo "--- check-all-zones"
	$u check-all-zones 2>&1 | sed 's/[0-9.]* seconds//'
	daemon pdns $RUN pdns_server --config-dir="$W"
	wait_port $DNS 20 || fail "pdns_server did not start: $(tail -3 pdns.log)"
	expect_pid_lib "$1" "$(daemon_pid)"
	local q="dig +time=2 +tries=2 -p $DNS @127.0.0.1"
	for n in host1 host2 host3 host30 www; do
		echo "dig $n: $($q +short $n.example.test A | tr '\n' ' ') $($q $n.example.test A | grep -o 'status: [A-Z]*')"
	done
	echo "dig MX: $($q +short example.test MX) TXT: $($q +short example.test TXT)"
	echo "dig other.test: $($q other.test SOA | grep -o 'status: [A-Z]*')"
}
run_both
