# redislock: the two commands are `make demo` and `make test`.
SHELL := /bin/bash
CARGO ?= cargo
PREFIX ?= /usr/local

.PHONY: all deps build install test lint test-rust demo bench-core clean

all: build

deps:
	@scripts/deps.sh

build: deps
	$(CARGO) build --release

## make install PREFIX=/usr/local: shared and static library, header, pkg-config file
install: build
	scripts/install.sh "$(PREFIX)" target/release

## make test: everything (lints, unit and integration tests against throwaway redis-servers)
test: deps lint test-rust

lint:
	$(CARGO) fmt --all --check
	$(CARGO) clippy --all-targets -- -D warnings

# The C tests link the cdylib that `cargo build` makes next to the test binaries.
test-rust:
	$(CARGO) build
	$(CARGO) test --all-targets
	$(CARGO) test --doc

## make demo: contending workers on one lock, against a throwaway redis-server
demo: deps
	$(CARGO) run --release --example demo -- --workers 4 --seconds 3

## make bench-core: the Rust core against redis-benchmark on this machine
bench-core: deps
	$(CARGO) run --release --example bench_core -- --seconds 3

clean:
	$(CARGO) clean
