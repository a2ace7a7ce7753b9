# Steward. `make test` is the command CI runs (.ci/run).
GO        ?= go
BIN       ?= steward
PKGS      ?= ./...
export CGO_ENABLED ?= 0
# Stamped into the binary: `steward version`, the report footers.
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS   := -X github.com/steward-evals/steward/internal/version.Version=$(VERSION) -X github.com/steward-evals/steward/internal/version.Commit=$(COMMIT)
IMAGE     ?= steward-action:$(VERSION)
# staticcheck, pinned; run through the module proxy (nothing to install).
STATICCHECK ?= $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2
# Packages whose tests also run under the race detector (needs cgo and a C
# compiler). The others drive Docker or real processes, and report's tests
# (a headless browser, 10 000-row renders) took 266 s under -race: too long
# for what little concurrency it has (see docs/benchmarks.md).
# How many parallel tests of one package run at once (cmd/steward's are mostly waiting).
TEST_PARALLEL ?= 4
LEFTOVERS := $(shell mktemp -u /tmp/steward-leftovers.XXXXXXXX)
# The supervisor (issue 26 item 6) under the race detector too, but for its
# Docker tests, which wait on the daemon and the race step would only slow.
RACE_RUN_SKIP ?= Docker
RACE_PKGS ?= ./internal/attempt/... ./internal/egress/... ./internal/worker/... ./internal/tend/... ./internal/eventlog/... ./internal/account/... ./internal/testlock/... ./internal/sched/... ./internal/ramp/... ./internal/shard/... ./internal/plan/... ./internal/record/... ./internal/gateway/... ./internal/evalset/...

.PHONY: build test bench lint quickstart clean release-dry-run

# The developer build compiles as `go run`, `make quickstart` and `go test` do,
# so it reuses their build cache (after the quickstart only the link is
# redone). -trimpath enters every package's cache key: only the release
# builds (release-dry-run, Dockerfile) use it, for reproducible binaries.
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/steward

# The release's image, built locally and not pushed: the versioned binary on
# the action's final stage (Dockerfile.prebuilt, nothing pulled; needs
# Debian's busybox-static at /bin/busybox), then checked by running
# `steward version` in it. The release workflow builds the same stage from
# Dockerfile for linux/amd64 and linux/arm64 and pushes it.
release-dry-run:
	@ctx=$$(mktemp -d) && trap 'rm -rf "$$ctx"' EXIT && \
	$(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o "$$ctx/steward" ./cmd/steward && \
	cp /etc/ssl/certs/ca-certificates.crt /bin/busybox "$$ctx/" && \
	DOCKER_BUILDKIT=0 docker build --pull=false -q -f Dockerfile.prebuilt \
	  --build-arg VERSION=$(VERSION) --build-arg COMMIT=$(COMMIT) -t $(IMAGE) "$$ctx" >/dev/null && \
	out=$$(docker run --rm --network none $(IMAGE) version) && echo "$$out" && \
	case "$$out" in *"$(VERSION)"*) ;; *) echo "release-dry-run: the image says $$out, want $(VERSION)"; exit 1;; esac && \
	echo "release-dry-run: built $(IMAGE) (not pushed)"

# The full suite, Docker tests included (they fail, not skip, when CI=true and no daemon answers),
# after lint; then the race detector on the pure and in-process packages, and the
# SDK compatibility module (sdkcheck/, its own module so the SDKs stay out of the build).
# Packages run side by side (go test's default -p, the number of CPUs) and
# cmd/steward's tests in parallel (-parallel $(TEST_PARALLEL): most of them wait
# on processes, containers or a rate limit, not on the CPU). Their Docker and
# kubernetes tests share one daemon and one cluster: each holds a cross-process
# lock shared (internal/testlock, taken by dockertest.Client and kubetest.Get),
# and the few that disturb the daemon or the cluster on purpose (the
# address-pool preflight fills every pool) hold it exclusively and run alone.
# Those run in a step of their own after the suite, when they wait for nobody
# (in the suite, one would wait for every running Docker test and hold up
# every new one meanwhile).
ALONE_TESTS ?= ^TestPreflightAgainstDaemon$$
ALONE_PKGS  ?= ./internal/sandbox/docker
# Afterwards nothing of Steward's may be left in Docker (.ci/leftovers.sh:
# containers, networks, volumes and images labelled as Steward's that were
# not there before).
test: lint
	@.ci/leftovers.sh snapshot $(LEFTOVERS)
	$(GO) test -count=1 -parallel $(TEST_PARALLEL) -timeout 50m -skip '$(ALONE_TESTS)' $(PKGS)
	$(GO) test -count=1 -timeout 10m -run '$(ALONE_TESTS)' $(ALONE_PKGS)
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 20m $(RACE_PKGS)
	CGO_ENABLED=1 $(GO) test -race -count=1 -timeout 20m -skip '$(RACE_RUN_SKIP)' ./internal/run
	cd sdkcheck && $(GO) test -count=1 ./...
	@.ci/leftovers.sh check $(LEFTOVERS)

# Benchmarks report ratios against baselines run side by side (see docs/benchmarks.md).
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m $(PKGS)

# gofmt everywhere; go vet and staticcheck on this module; go vet on sdkcheck/
# (staticcheck there would type-check the SDKs from source once more).
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)
	$(STATICCHECK) $(PKGS)
	cd sdkcheck && $(GO) vet ./...

# The quickstart on the embedded defaults (local sandboxes, the mock model, the SQLite record).
quickstart:
	$(GO) run ./cmd/steward launch examples/quickstart/steward.yaml

clean:
	rm -f $(BIN)
