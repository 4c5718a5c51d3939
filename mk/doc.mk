# cairn-doc (crates/cairn-doc): JSON document collections with secondary indexes and a change
# feed over Cairn (docs/doc.md). Its tests: the model test against brute force across reopen,
# power cuts through the simulator, unique constraints under concurrent grouped writers, the
# feed across reopen and its trimmed-history error (about 10 s in release).
COMPAT_TESTS += test-doc
.PHONY: test-doc

test-doc:
	$(CARGO) test -p cairn-doc --release
