#!/bin/bash
# Postfix's postmap (postfix-lmdb's dictionary plugin): a lookup table built, queried, listed,
# changed key by key and rebuilt; postalias for an aliases database.
APP=postmap
. "$(dirname "$0")/common.sh"

scenario() {
	expect_lib "$1" /usr/lib/postfix/postfix-lmdb.so
	mkdir etc && touch etc/main.cf
	local p="$RUN postmap -c $W/etc"
	{
		printf 'alice@example.com ok\nbob@example.com REJECT\ncarol relay:[mx.example.net]\n'
		for i in $(seq 1 300); do printf 'user%03d@example.com DISCARD %s\n' $i "$(printf 'y%.0s' $(seq 1 $i))"; done
	} > map
	$p lmdb:map || fail "postmap failed"
	echo "query bob: $($p -q bob@example.com lmdb:map)"
	echo "query missing: [$($p -q nobody@example.com lmdb:map)] exit $?"
	echo "query user150: $($p -q user150@example.com lmdb:map | wc -c)"
	echo "--- -s"
	$p -s lmdb:map | sort | cut -c1-60 || fail "postmap -s failed"
	$p -d carol lmdb:map || fail "postmap -d failed"
	$p -d user007@example.com lmdb:map
	printf 'dave@example.com OK\nalice@example.com HOLD\n' | $p -i lmdb:map || fail "postmap -i failed"
	echo "--- -s after -d / -i"
	$p -s lmdb:map | sort | cut -c1-60
	echo "query alice: $($p -q alice@example.com lmdb:map)"
	echo "--- rebuilt from a shorter source"
	printf 'only@example.com OK\n' > map
	$p lmdb:map || fail "postmap rebuild failed"
	$p -s lmdb:map
	printf 'postmaster: root\nabuse: root, ops@example.com\n' > aliases
	$RUN postalias -c $W/etc lmdb:aliases || fail "postalias failed"
	echo "alias abuse: $($RUN postalias -c $W/etc -q abuse lmdb:aliases)"
}
run_both
