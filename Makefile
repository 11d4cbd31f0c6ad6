# restart-controller: the two commands a newcomer needs are `make demo` and `make test`.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
# Expanded once, not at each use: a commit during a long build (make dist)
# must not give its steps different versions.
VERSION := $(VERSION)
BIN := bin/restart-controller
PLUGIN := bin/kubectl-restart_controller
# Release flags for both binaries: no build paths, no symbol table or DWARF
# (-s -w), static (CGO_ENABLED=0). With cgo on, a dependency that imports Go's
# plugin package forces external linking and keeps every exported method, so
# CGO_ENABLED=0 is part of keeping the binaries small, not only of "static".
RELEASE_FLAGS := -trimpath -ldflags "-s -w -X main.version=$(VERSION)"
DEMO_DIR ?= $(CURDIR)/.demo

.PHONY: all build test unit e2e vet fmt-check repo-check fuzz demo demo-down cluster-bins bench image image-test monitoring-check helm plugin dist FORCE clean

all: build

## build: the controller and the operator CLI (a kubectl plugin), two binaries.
build: plugin
	CGO_ENABLED=0 $(GO) build $(RELEASE_FLAGS) -o $(BIN) ./cmd/restart-controller

## test: every test, unit and end-to-end on a local control plane (built on first run).
test: repo-check vet fmt-check unit image-test monitoring-check e2e

vet:
	$(GO) vet ./...
	$(GO) -C hack/image vet ./...
	$(GO) -C hack/monitoring-check vet ./...
	$(GO) -C hack/bench vet ./...

# No binary or file over 1 MiB may be tracked (build outputs belong in .gitignore).
repo-check:
	@hack/check-tracked-files.sh

fmt-check:
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

unit: helm
	$(GO) test -race -short -count=1 ./...
	$(GO) -C hack/bench test -race -count=1 ./...

e2e: cluster-bins helm
	$(GO) test -count=1 -timeout 40m -v ./internal/testcluster/ ./cmd/restart-controller/ ./test/e2e/

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

## bench: hack/bench is a module of its own (the root's `go list ./...` is the product);
## built into bin/ and run from the root, so its default paths are the root's: each run
## appends its headline figures to BENCHMARKS.json and redraws BENCHMARKS.svg (commit both).
bench: build cluster-bins
	CGO_ENABLED=0 $(GO) build $(RELEASE_FLAGS) -o bin/floor ./test/floor
	$(GO) -C hack/bench build -o $(CURDIR)/bin/bench .
	bin/bench --controller $(BIN) --floor bin/floor $(BENCH_ARGS)

## image: OCI image without a Docker engine (bin/image, bin/restart-controller-image.tar); prints the digest.
image:
	$(GO) -C hack/image run . -version $(VERSION)

## image-test: build the image, check its config and run its binary; the Dockerfile must agree.
image-test:
	$(GO) -C hack/image test -count=1 ./...

## monitoring-check: alerts and dashboard parsed by Prometheus, naming only exported metrics.
monitoring-check:
	$(GO) -C hack/monitoring-check test -count=1 ./...

## helm: build helm from its Go module once (cached like the cluster binaries).
helm:
	@hack/build-helm.sh >/dev/null

## plugin: the operator CLI, a kubectl plugin of its own (kubectl restart-controller explain|check ...);
## put bin/ on PATH. It is not part of the controller binary, which stays lean (BENCHMARKS.md).
plugin:
	CGO_ENABLED=0 $(GO) build $(RELEASE_FLAGS) -o $(PLUGIN) ./cmd/kubectl-restart_controller

## dist: the plugin's release for krew: dist/ holds a tar.gz per platform (the binary built as
## by `make plugin`), SHA256SUMS, and the krew manifest dist/plugins/restart-controller.yaml, its
## uris under DIST_URL_BASE; hack/dist writes them and checks them against krew's rules.
DIST_PLATFORMS := linux/amd64 linux/arm64 darwin/amd64 darwin/arm64
DIST_URL_BASE ?= https://github.com/restart-controller/restart-controller/releases/download/$(VERSION)
DIST_BINS := $(foreach p,$(DIST_PLATFORMS),bin/dist/$(subst /,_,$(p))/kubectl-restart_controller)
dist: $(DIST_BINS)
	$(GO) run ./hack/dist -version "$(VERSION)" -url-base "$(DIST_URL_BASE)" -platforms "$(DIST_PLATFORMS)" -bins bin/dist -out dist

# One binary per platform (bin/dist/OS_ARCH/...); FORCE, since VERSION may differ from the last build's.
bin/dist/%/kubectl-restart_controller: FORCE
	CGO_ENABLED=0 GOOS=$(word 1,$(subst _, ,$*)) GOARCH=$(word 2,$(subst _, ,$*)) $(GO) build $(RELEASE_FLAGS) -o $@ ./cmd/kubectl-restart_controller

FORCE:

clean:
	rm -rf bin dist .e2e.log
