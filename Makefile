# restart-controller: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
BIN := bin/restart-controller
DEMO_DIR ?= $(CURDIR)/.demo

.PHONY: all build test unit e2e vet fmt-check repo-check fuzz demo demo-down cluster-bins bench image clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION)" -o $(BIN) ./cmd/restart-controller

## test: every test, unit and end-to-end on a local control plane (built on first run).
test: repo-check vet fmt-check unit e2e

vet:
	$(GO) vet ./...

# No binary or file over 1 MiB may be tracked (build outputs belong in .gitignore).
repo-check:
	@hack/check-tracked-files.sh

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

unit:
	$(GO) test -race -short -count=1 ./...

e2e: cluster-bins
	$(GO) test -count=1 -timeout 40m -v ./internal/testcluster/ ./test/e2e/

## fuzz: every fuzz target for FUZZTIME each (seed corpora run in `make unit` too).
FUZZTIME ?= 30s
fuzz:
	@set -e; for pkg in $$($(GO) list ./internal/...); do \
	  for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
	    echo "== $$pkg $$target"; \
	    $(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg; \
	  done; \
	done

cluster-bins:
	@hack/build-cluster-bins.sh >/dev/null

## demo: local cluster + controller + a sample app whose config changes and rolls.
demo: build cluster-bins
	hack/demo.sh "$(DEMO_DIR)"

demo-down:
	$(GO) run ./hack/localcluster down --dir "$(DEMO_DIR)/cluster"
	-@[ -f "$(DEMO_DIR)/controller.pid" ] && kill $$(cat "$(DEMO_DIR)/controller.pid") 2>/dev/null; rm -f "$(DEMO_DIR)/controller.pid"

bench: build cluster-bins
	$(GO) run ./hack/bench --controller $(BIN) $(BENCH_ARGS)

image:
	docker build -t restart-controller:$(VERSION) .

clean:
	rm -rf bin .e2e.log
