# Agent-Reach. `make help` lists the targets.
SHELL := /bin/bash
GO ?= go
PKGS := ./...
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)

.PHONY: help build run preflight screenshots test test-python test-typescript test-short bench bench-micro chaos demo fuzz lint lint-openapi fmt vet tidy clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-12s %s\n", $$1, $$2}'

build: ## build bin/agentreach
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/agentreach ./cmd/agentreach

run: build ## zero-setup dev server: finds or starts PostgreSQL, migrates, serves on 127.0.0.1:8080
	./bin/agentreach dev

# The suite's connection budget on the test server: checked free before
# anything is built, and held to for the whole run (each test reserves its
# connections from it, internal/pgtest/budget.go, and waits while the
# running tests hold too many).
TEST_CONNS ?= 45
export PGTEST_CONNS := $(TEST_CONNS)

preflight: ## one line on what is missing when the test server is unreachable or full
	@$(GO) build -o bin/preflight ./internal/pgtest/preflight && ./bin/preflight -need $(TEST_CONNS)

# Fuzz runs are bounded by executions, not time: with a duration, Go 1.26's
# fuzz coordinator can report a bare "context deadline exceeded" as a
# failure when the deadline races a busy worker (golang/go#75804, fixed in
# Go 1.27).
test: preflight ## every test, against the real PostgreSQL (each test gets its own database), and a short fuzz run
	$(GO) vet $(PKGS)
	$(GO) test -run '^$$' -fuzz FuzzDecodeSubmit -fuzztime 3000x ./httpapi
	$(GO) test -run '^$$' -fuzz FuzzDecodeRegistration -fuzztime 3000x ./httpapi
	$(GO) test -run '^$$' -fuzz FuzzRequests -fuzztime 3000x ./httpapi
	$(GO) test -count=1 -timeout 15m $(PKGS)
	$(MAKE) --no-print-directory test-python
	$(MAKE) --no-print-directory test-typescript

# The Python SDK (sdk/python) runs in a virtual environment under build/,
# made when missing and brought up to date only when its pyproject.toml
# changes. PY_EXTRAS=test,langchain,crewai brings in CrewAI too (about 1 GB).
PYTHON ?= python3
PY_VENV := build/venv
PY_EXTRAS ?= test,langchain
comma := ,
PY_STAMP := $(PY_VENV)/.installed-$(subst $(comma),-,$(PY_EXTRAS))

$(PY_STAMP): sdk/python/pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10))' || { echo "make: the Python SDK needs Python 3.10 or newer as $(PYTHON)"; exit 1; }
	@test -x $(PY_VENV)/bin/python || $(PYTHON) -m venv $(PY_VENV)
	$(PY_VENV)/bin/python -m pip install -q --disable-pip-version-check -e 'sdk/python[$(PY_EXTRAS)]'
	@rm -f $(PY_VENV)/.installed-*
	@touch $@

ha-test: ## the failover drill: a pg_auto_failover formation on loopback, submits through a failover and a postmaster kill (needs pg_autoctl)
	AGENTREACH_HA_DRILL=1 $(GO) test -count=1 -v -timeout 10m -run '^TestFailoverDrill$$' ./cmd/agentreach

test-python: $(PY_STAMP) build ## the Python SDK: mypy --strict, then pytest against the real service
	cd sdk/python && ../../$(PY_VENV)/bin/mypy
	cd sdk/python && AGENTREACH_BIN=$(CURDIR)/bin/agentreach ../../$(PY_VENV)/bin/pytest -q -p no:cacheprovider

# The TypeScript SDK (sdk/typescript): its packages from its lock file
# (npm ci, run again when package.json or the lock file changes), then
# npm test: the OpenAPI types' drift check, tsc --strict, the build, and
# node --test against the real service (a database per test file).
TS_SDK := sdk/typescript
TS_STAMP := $(TS_SDK)/node_modules/.installed

$(TS_STAMP): $(TS_SDK)/package.json $(TS_SDK)/package-lock.json
	cd $(TS_SDK) && npm ci --no-audit --no-fund --loglevel=error
	@touch $@

test-typescript: $(TS_STAMP) build ## the TypeScript SDK: OpenAPI types drift check, tsc --strict, then node --test against the real service
	cd $(TS_SDK) && AGENTREACH_BIN=$(CURDIR)/bin/agentreach npm test

demo: build ## a guided run: dev, a fleet with flaky, slow and dead agents, 2000 jobs, the health table
	./bin/agentreach demo --jobs 2000

chaos: build ## chaos runs: one process, then three, each killed mid-run with a PostgreSQL restart; then verify
	./bin/agentreach chaos --processes 1 --jobs 2000
	./bin/agentreach chaos --processes 3 --jobs 2000

fuzz: ## fuzz the request decoders and every route (paths, queries, bodies), 100,000 executions each
	$(GO) test -run '^$$' -fuzz FuzzDecodeSubmit -fuzztime 100000x ./httpapi
	$(GO) test -run '^$$' -fuzz FuzzDecodeRegistration -fuzztime 100000x ./httpapi
	$(GO) test -run '^$$' -fuzz FuzzRequests -fuzztime 100000x ./httpapi

screenshots: ## copy the dashboard screenshots the browser test took (build/screenshots) into docs/
	@test -d build/screenshots || { echo "make: no build/screenshots: run make test first (it needs chromium)"; exit 1; }
	cp build/screenshots/*.png docs/

test-short: ## quick run without -count=1
	$(GO) test -short $(PKGS)

bench: build ## side-by-side benchmark: submits, end to end, routing, against pgbench and River (a few minutes)
	./bin/agentreach bench --out bench-results.md --png bench-results.png

bench-micro: ## Go microbenchmarks (router, A2A push parsing)
	$(GO) test -run '^$$' -bench . -benchmem $(PKGS)

# The lint tools come from tools/go.mod, built on first use.
bin/staticcheck: tools/go.mod tools/go.sum
	$(GO) build -C tools -o ../bin/ honnef.co/go/tools/cmd/staticcheck

bin/golangci-lint: tools/go.mod tools/go.sum
	$(GO) build -C tools -o ../bin/ github.com/golangci/golangci-lint/v2/cmd/golangci-lint

lint: fmt vet bin/staticcheck bin/golangci-lint lint-openapi ## gofmt, go vet, staticcheck, golangci-lint (.golangci.yml) and the OpenAPI linter; clean, and CI runs it
	./bin/staticcheck ./...
	./bin/golangci-lint run ./...

# The OpenAPI linter, Redocly CLI, pinned by tools/openapi/package-lock.json
# and installed from npm on first use; it runs with its telemetry and update
# check off, so it reaches nothing.
REDOCLY := tools/openapi/node_modules/.bin/redocly
$(REDOCLY): tools/openapi/package.json tools/openapi/package-lock.json
	npm ci --prefix tools/openapi --no-audit --no-fund --loglevel=error
	@touch $@

lint-openapi: $(REDOCLY) ## lint httpapi/openapi.yaml (redocly.yaml: operationIds, summaries, 4xx answers)
	REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true $(REDOCLY) lint --config redocly.yaml httpapi/openapi.yaml

fmt: ## fail if gofmt would change a file
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet: ## go vet
	$(GO) vet $(PKGS)

clean: ## remove build output
	rm -rf bin
