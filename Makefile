# idem — developer tasks. `make test` is the README's test command and what CI runs.
GO ?= go
PKGS := ./...

.PHONY: test test-short lint bench bench-e2e fuzz run mutate

## test: every test, with the race detector (PostgreSQL tests need a server; see README)
test:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## test-short: the quick subset
test-short:
	$(GO) test -short -count=1 $(PKGS)

## lint: gofmt, go vet and golangci-lint when installed (config in .golangci.yml)
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || (gofmt -l $$(git ls-files '*.go'); exit 1)
	$(GO) vet $(PKGS)
	@if command -v golangci-lint >/dev/null; then golangci-lint run; else echo "golangci-lint not installed; ran gofmt and vet"; fi

## bench: the Go benchmarks of the stores and the key package
bench:
	$(GO) test -run '^$$' -bench . -benchtime 2s ./key/ ./store/...

## bench-e2e: end-to-end throughput with `idem bench`
bench-e2e:
	$(GO) run ./cmd/idem bench

## fuzz: a short run of each fuzz target
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzCanonicalize -fuzztime 30s ./key/

## mutate: mutation testing with go-gremlins (pinned), one package at a time, each
## bounded by MUTATE_BUDGET (docs/testing.md: packages, budget, last scores)
GREMLINS_VERSION ?= v0.5.0
MUTATE_PKGS ?= ./internal/executor ./key ./internal/producer ./internal/completer ./store/sqlitestore ./store/pgstore
MUTATE_BUDGET ?= 25m
mutate:
	$(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)
	@for p in $(MUTATE_PKGS); do \
		echo "== gremlins $$p (budget $(MUTATE_BUDGET))"; \
		timeout $(MUTATE_BUDGET) $$($(GO) env GOPATH)/bin/gremlins unleash --workers 1 --test-cpu 1 \
			--timeout-coefficient 4 $$p || echo "$$p: stopped (budget or threshold)"; \
	done

## run: the server on ./idem.db (the README's run command)
run:
	$(GO) run ./cmd/idem serve
