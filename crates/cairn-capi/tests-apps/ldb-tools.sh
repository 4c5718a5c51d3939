#!/bin/bash
# Samba's ldb tools (ldb-tools): an mdb:// database (ldb's LMDB backend, MDB_NOSUBDIR) built and
# changed with ldbadd, ldbmodify, ldbrename and ldbdel, with an index, read with ldbsearch.
APP=ldb-tools
. "$(dirname "$0")/common.sh"

scenario() {
	expect_lib "$1" /usr/lib/$ARCH/samba/ldb/mdb.so
	expect_lib "$1" /usr/lib/$ARCH/samba/libldb-mdb-int-samba4.so.0
	local H="-H mdb://$W/test.ldb"
	{
		# ldb's LMDB backend wants GUID index mode: each record has a 16-byte objectUUID.
		printf 'dn: @INDEXLIST\n@IDXATTR: uid\n@IDXATTR: objectClass\n@IDXGUID: objectUUID\n@IDX_DN_GUID: GUID\n\n'
		printf 'dn: @ATTRIBUTES\nuid: CASE_INSENSITIVE\n\n'
		for i in $(seq 1 40); do
			printf 'dn: cn=user%02d,dc=example,dc=test\nobjectUUID: 0123456789abcd%02d\nobjectClass: person\ncn: user%02d\nuid: U%02d\nmail: user%02d@example.test\ndescription: %s\n\n' \
				$i $i $i $i $i "$(printf 'x%.0s' $(seq 1 $((i * 7))))"
		done
		printf 'dn: cn=group1,dc=example,dc=test\nobjectUUID: 0123456789abcdef\nobjectClass: group\ncn: group1\nmember: cn=user01,dc=example,dc=test\n\n'
	} > add.ldif
	$RUN ldbadd $H add.ldif || fail "ldbadd failed"
	printf 'dn: cn=user05,dc=example,dc=test\nchangetype: modify\nreplace: mail\nmail: five@example.test\n-\nadd: telephoneNumber\ntelephoneNumber: 555\n' > mod.ldif
	$RUN ldbmodify $H mod.ldif || fail "ldbmodify failed"
	$RUN ldbrename $H cn=user07,dc=example,dc=test cn=seven,dc=example,dc=test || fail "ldbrename failed"
	$RUN ldbdel $H cn=user09,dc=example,dc=test || fail "ldbdel failed"
	echo "--- one by indexed uid (case-insensitive)"
	$RUN ldbsearch $H '(uid=u05)' cn mail telephoneNumber | grep -v '^#' || fail "ldbsearch failed"
	echo "--- people, sorted"
	$RUN ldbsearch $H -s sub -b dc=example,dc=test --sorted '(objectClass=person)' cn uid || fail "ldbsearch failed"
	echo "--- gone and renamed"
	$RUN ldbsearch $H '(|(cn=user09)(cn=user07)(cn=seven))' dn | grep -v '^#'
	echo "--- the whole database"
	$RUN ldbsearch $H --sorted --show-binary '(objectClass=*)' | grep -v '^# \(returned\|record\)'
}
run_both
