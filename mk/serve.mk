# cairn-server (`cairn serve`, docs/server.md): its HTTP tests against a server on a loopback
# port, the SIGKILL-under-load test (a server process killed and restarted three times) and
# the request decoder's replay of hostile inputs. About 10 s once built.
COMPAT_TESTS += test-serve
.PHONY: test-serve

test-serve:
	$(CARGO) test -p cairn-server --release
