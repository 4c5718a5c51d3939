#!/bin/bash
# PHP's dba extension with its lmdb handler (php8.2-dba): dba_open 'c'/'w'/'r', dba_insert,
# dba_replace, dba_fetch, dba_exists, dba_delete, and a dba_firstkey/dba_nextkey walk of the
# whole file (which must end).
APP=php-dba
. "$(dirname "$0")/common.sh"
PHP_DBA_SO=$(php -r 'echo ini_get("extension_dir");' 2>/dev/null)/dba.so

scenario() {
	expect_lib "$1" "$PHP_DBA_SO"
	cat > t.php <<'PHP'
<?php
echo "handler: ", (array_key_exists('lmdb', dba_handlers(true)) ? "lmdb" : "none"), "\n";
$db = dba_open('t.lmdb', 'c', 'lmdb') or die("dba_open c failed\n");
for ($i = 1; $i <= 300; $i++) dba_insert(sprintf("key%03d", $i), str_repeat("v", $i), $db);
echo "insert existing: ", var_export(dba_insert("key001", "again", $db), true), "\n";
dba_replace("key002", "replaced", $db);
dba_delete("key003", $db);
dba_close($db);
$db = dba_open('t.lmdb', 'w', 'lmdb') or die("dba_open w failed\n");
dba_replace("new", "one", $db);
echo "fetch key002: ", dba_fetch("key002", $db), " exists key003: ", var_export(dba_exists("key003", $db), true), "\n";
dba_close($db);
$db = dba_open('t.lmdb', 'r', 'lmdb') or die("dba_open r failed\n");
$n = 0; $bytes = 0; $first = null; $last = null;
for ($k = dba_firstkey($db); $k !== false; $k = dba_nextkey($db)) {
	if ($first === null) $first = $k;
	$last = $k; $n++; $bytes += strlen(dba_fetch($k, $db));
	if ($n > 1000) { echo "walk does not end: $n keys, last $k\n"; break; }
}
echo "walk: $n keys, $bytes value bytes, first $first, last $last\n";
dba_close($db);
PHP
	local out
	out=$($RUN timeout 60 php -d memory_limit=256M t.php 2>&1) || fail "php: $(echo "$out" | tail -2 | tr '\n' ' ' | cut -c1-300)"
	echo "$out"
}
run_both
