#!/bin/bash
# Knot Resolver: kresd resolves names through a local stub upstream (dnsdist answering every
# A query, no LMDB of its own), caching them in its LMDB cache; its control socket reports the
# cache; then kres-cache-gc collects the cache, and a kresd restarted on it still answers.
APP=knot-resolver
. "$(dirname "$0")/common.sh"
DNS=15341 UP=15342

ctl() { # socket command: kresd's control socket, one Lua command
	/usr/bin/python3 - "$@" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(sys.argv[2].encode() + b"\n")
s.settimeout(0.3)
out, end = b"", time.time() + 3
while time.time() < end:
    try:
        c = s.recv(4096)
    except socket.timeout:
        if out.replace(b">", b"").strip():
            break
        continue
    if not c:
        break
    out += c
print(out.decode().replace(">", "").strip())
PY
}

scenario() {
	expect_lib "$1" /usr/sbin/kresd
	expect_lib "$1" /usr/sbin/kres-cache-gc
	cat > up.conf <<CONF
setLocal('127.0.0.1:$UP')
setSecurityPollSuffix('')
addAction(QTypeRule(DNSQType.A), SpoofAction('192.0.2.7', {ttl=3600}))
addAction(AllRule(), RCodeAction(DNSRCode.NXDOMAIN))
CONF
	daemon upstream dnsdist --supervised --disable-syslog -C "$W/up.conf"
	wait_port $UP 20 || fail "the upstream (dnsdist) did not start"
	mkdir cache run
	cat > kresd.conf <<CONF
net.listen('127.0.0.1', $DNS, { kind = 'dns' })
cache.open(20 * MB, 'lmdb://$W/cache')
policy.add(policy.all(policy.STUB('127.0.0.1@$UP')))
CONF
	local q="dig +time=2 +tries=2 -p $DNS @127.0.0.1"
	start() {
		daemon kresd $RUN kresd -n -c "$W/kresd.conf" "$W/run"
		wait_port $DNS 20 || fail "kresd did not start: $(tail -3 kresd.log)"
		KPID=$(daemon_pid)
		expect_pid_lib "$1" "$KPID"
	}
	start "$1"
	for i in $(seq 1 60); do $q +short name$i.example.test A > /dev/null; done
	echo "dig name5: $($q +short name5.example.test A)"
	echo "cache.count: $(ctl run/control/$KPID 'cache.count()')"
	kill_daemons
	daemon upstream dnsdist --supervised --disable-syslog -C "$W/up.conf"
	wait_port $UP 20 || fail "the upstream (dnsdist) did not restart"
	echo "--- kres-cache-gc (dry run)"
	local out
	out=$($RUN kres-cache-gc -c "$W/cache" -n -u 0 -f 50 2>&1) || fail "kres-cache-gc -n failed: $(echo "$out" | tail -2 | tr '\n' ' ')"
	# Usage is the pages in use over the map size, and the formats use different page counts.
	echo "$out" | sed -E 's/[0-9]+(\.[0-9]+)? ?(secs|s|ms|usecs)/T/g; s/^Usage: 0\.[0-9]+%/Usage: under 1%/'
	echo "--- kres-cache-gc"
	out=$($RUN kres-cache-gc -c "$W/cache" -u 0 -f 50 2>&1) || fail "kres-cache-gc failed: $(echo "$out" | tail -2 | tr '\n' ' ')"
	# How many records fall in the deleted categories depends on the seconds that passed.
	echo "$out" | sed -E 's/[0-9]+(\.[0-9]+)? ?(secs|s|ms|usecs)/T/g; s/^[0-9]+ records to be/N records to be/; s/^Deleted [0-9]+/Deleted N/; s/limit category is [0-9]+/limit category is N/; s/^Usage: 0\.[0-9]+%/Usage: under 1%/'
	start "$1"
	local after
	after=$(ctl run/control/$KPID 'cache.count()')
	echo "after gc: cache.count: $([ "$after" -lt 64 ] 2>/dev/null && echo fewer || echo "$after")"
	echo "after gc: dig name5: $($q +short name5.example.test A)"
}
run_both
