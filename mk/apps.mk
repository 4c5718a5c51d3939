# Debian applications that link liblmdb.so.0, run on Cairn's library through LD_LIBRARY_PATH
# (crates/cairn-capi/tests-apps): each scenario runs the program's own commands on Debian's
# liblmdb and on Cairn's, checks which library was loaded (ldd, /proc/PID/maps) and compares
# the outputs. Apps that still fail on Cairn are listed with their cause in
# tests-apps/expected-failures; an unlisted failure or a listed pass fails the target.
APPS_PKGS := bind9 bind9-utils bind9-dnsutils dnsdist ldb-tools pdns-server pdns-backend-lmdb \
  postfix postfix-lmdb knot knot-dnsutils knot-resolver liblmdb-file-perl php8.2-cli php8.2-dba \
  python3-lmdb liblmdb0 lmdb-utils
COMPAT_TESTS += test-apps
.PHONY: test-apps apps-deps

# Installed only when missing (sudo only when not root); the daemons' own services are not
# started (policy-rc.d, where there is none, for the time of the install).
apps-deps:
	@missing=; for p in $(APPS_PKGS); do \
	  dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q 'ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  echo "postfix postfix/main_mailer_type select No configuration" | $$SUDO debconf-set-selections; \
	  rc=; if [ ! -e /usr/sbin/policy-rc.d ]; then \
	    printf '#!/bin/sh\nexit 101\n' | $$SUDO tee /usr/sbin/policy-rc.d > /dev/null; \
	    $$SUDO chmod +x /usr/sbin/policy-rc.d; rc=1; fi; \
	  inst="$$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends"; \
	  $$inst $$missing || { $$SUDO apt-get update && $$inst $$missing; }; st=$$?; \
	  [ -z "$$rc" ] || $$SUDO rm -f /usr/sbin/policy-rc.d; \
	  exit $$st; \
	fi

test-apps: apps-deps capi
	bash crates/cairn-capi/tests-apps/run.sh
