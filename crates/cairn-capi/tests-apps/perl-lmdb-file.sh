#!/bin/bash
# Perl's LMDB_File (liblmdb-file-perl): its tie interface (tie %hash, 'LMDB_File', $path) on a
# new environment: stores, reads, each/keys/values/exists/delete, untie and tie again; then the
# object interface: named databases in one environment, a cursor walk, stat.
APP=perl-lmdb-file
. "$(dirname "$0")/common.sh"
PERL_SO=$(ls /usr/lib/$ARCH/perl5/*/auto/LMDB_File/LMDB_File.so 2>/dev/null | head -1)

scenario() {
	expect_lib "$1" "$PERL_SO"
	mkdir env1 env2
	cat > t.pl <<'PERL'
use strict; use warnings;
use LMDB_File qw(:flags :cursor_op);
my %h;
my $db = tie %h, 'LMDB_File', 'env1' or die "tie: $!";
$h{"k$_"} = "v$_" for 1 .. 200;
print "k42=$h{k42} exists k7=", (exists $h{k7} ? 1 : 0), " exists nope=", (exists $h{nope} ? 1 : 0), "\n";
delete $h{"k$_"} for 100 .. 150;
my @k = sort keys %h;
print "keys: ", scalar(@k), " first $k[0] last $k[-1]\n";
my $n = 0; while (my ($k, $v) = each %h) { $n++ } print "each: $n\n";
print "values: ", scalar(values %h), "\n";
undef $db; untie %h;
tie %h, 'LMDB_File', 'env1' or die "tie again: $!";
print "after re-tie: k199=$h{k199} keys ", scalar(keys %h), "\n";
untie %h;
my $env = LMDB::Env->new('env2', { mapsize => 64 << 20, maxdbs => 4 });
my $txn = $env->BeginTxn;
for my $name (qw(alpha beta)) {
	my $d = $txn->OpenDB({ dbname => $name, flags => MDB_CREATE });
	$d->put("$name-$_", "x" x $_) for 1 .. 50;
}
$txn->commit;
$txn = $env->BeginTxn(MDB_RDONLY);
my $d = $txn->OpenDB('beta');
my $c = $d->Cursor;
my ($key, $val, $cnt) = ('', '', 0);
$c->get($key, $val, MDB_FIRST); $cnt++;
eval { while (1) { $c->get($key, $val, MDB_NEXT); $cnt++ } };
print "cursor walk of beta: $cnt records, last $key (", length($val), " bytes); end: ", ($@ =~ /MDB_NOTFOUND/ ? "MDB_NOTFOUND" : $@), "\n";
print "beta entries: ", $d->stat->{entries}, "\n";
PERL
	local out
	out=$($RUN perl t.pl 2>&1) || fail "perl: $(echo "$out" | tail -2 | tr '\n' ' ')"
	echo "$out"
}
run_both
