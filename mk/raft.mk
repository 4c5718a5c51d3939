# Replication (crates/cairn-raft, docs/replication.md): openraft's own storage test suite on
# Cairn's log store and state machine, and the crate's tests. About a minute at most.
COMPAT_TESTS += test-raft
.PHONY: test-raft

test-raft:
	$(CARGO) test -p cairn-raft --release
