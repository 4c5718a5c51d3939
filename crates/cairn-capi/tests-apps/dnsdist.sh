#!/bin/bash
# dnsdist: its LMDB key-value store (newLMDBKVStore, a named database of a MDB_NOSUBDIR file)
# drives the answers: a KeyValueStoreLookupAction tags a query with the value stored under its
# name and a Lua action spoofs that address. The store is written through python3-lmdb (kv.py,
# same library), also while dnsdist has it open; dnsdist's console looks keys up directly.
APP=dnsdist
. "$(dirname "$0")/common.sh"
DNS=15311 CON=15312

scenario() {
	expect_lib "$1" /usr/bin/dnsdist
	expect_lib "$1" "$PY_LMDB_EXT"
	kv load kv.mdb names www.example.test=192.0.2.10 example.test=192.0.2.12 \
		mail.example.test=192.0.2.25 || fail "writing the store failed"
	cat > dnsdist.conf <<CONF
setLocal('127.0.0.1:$DNS')
controlSocket('127.0.0.1:$CON')
setKey("MXNeLFWHUe4363BBKrY06cAsH8NWNb+Se2eXU5+Bb74=")
setSecurityPollSuffix('')
kvs = newLMDBKVStore('$W/kv.mdb', 'names')
addAction(AllRule(), KeyValueStoreLookupAction(kvs, KeyValueLookupKeyQName(false), 'ip'))
addAction(AllRule(), LuaAction(function(dq)
	local ip = dq:getTag('ip')
	if ip ~= nil and ip ~= '' then return DNSAction.Spoof, ip end
	return DNSAction.Nxdomain
end))
CONF
	daemon dnsdist $RUN dnsdist --supervised --disable-syslog -C "$W/dnsdist.conf"
	wait_port $CON 20 || fail "dnsdist did not start: $(tail -3 dnsdist.log)"
	expect_pid_lib "$1" "$(daemon_pid)"
	local q="dig +time=2 +tries=2 -p $DNS @127.0.0.1"
	for n in www.example.test mail.example.test example.test nope.example.test; do
		echo "dig $n: $($q +short $n A) $($q $n A | grep -o 'status: [A-Z]*')"
	done
	local c="dnsdist -C $W/dnsdist.conf -c -e"
	echo "lookup: $($c 'kvs:lookup("mail.example.test")')"
	echo "lookup missing: [$($c 'kvs:lookup("zzz")')]"
	echo "lookupSuffix: $($c 'kvs:lookupSuffix(newDNSName("a.b.example.test"), 1, false)')"
	# A writer while dnsdist reads, then dnsdist's reload.
	kv load kv.mdb names new.example.test=192.0.2.99 || fail "writing the open store failed"
	$c 'kvs:reload()' > /dev/null
	echo "after reload: $($q +short new.example.test A) $($q +short www.example.test A)"
	kill_daemons
	echo "--- the store"
	kv dump kv.mdb names || fail "reading the store failed"
}
run_both
