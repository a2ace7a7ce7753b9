# Steward. `make test` is the command CI runs (.ci/run).
GO        ?= go
BIN       ?= steward
PKGS      ?= ./...
export CGO_ENABLED ?= 0

.PHONY: build test bench lint quickstart clean

build:
	$(GO) build -trimpath -o $(BIN) ./cmd/steward

# The full suite, Docker tests included (they fail, not skip, when CI=true and no daemon answers).
# Packages run one at a time (-p 1): their Docker tests share one daemon, and
# some are meant to disturb it (the address-pool preflight fills every pool,
# sweeps remove dead runs' leftovers), so they must not overlap.
test:
	$(GO) vet $(PKGS)
	$(GO) test -p 1 -count=1 -timeout 50m $(PKGS)

# Benchmarks report ratios against baselines run side by side (see docs/benchmarks.md).
bench:
	$(GO) test -run '^$$' -bench . -benchtime 1x -timeout 30m $(PKGS)

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet $(PKGS)

# The quickstart on the embedded defaults (local sandboxes, the mock model, the SQLite record).
quickstart:
	$(GO) run ./cmd/steward launch examples/quickstart/steward.yaml

clean:
	rm -f $(BIN)
