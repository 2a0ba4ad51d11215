# idem — developer tasks. `make test` is the README's test command and what CI runs.
GO ?= go
PKGS := ./...
# TEST_PKGS is every package, the longest-running tests first: go test runs
# test binaries in the order given, -p (GOMAXPROCS) at a time, so the long
# ones no longer start last and set the end (pgstore, which mostly waits
# on PostgreSQL, started after ten of CI's nineteen minutes and ran seven).
# (-p 3 was tried: 18.3 minutes of go test instead of 17.1; the machine's
# two cores are busy throughout.)
TEST_PKGS := ./store/pgstore/ . ./idemhttp/ ./store/sqlitestore/ ./cmd/idem/ ./ui/ ./internal/cli/ ./...

.PHONY: test test-short lint bench bench-e2e fuzz run mutate mutate-stores

## test: every test, with the race detector (PostgreSQL tests need a server; see README)
test:
	$(GO) test -race -count=1 -timeout 15m $(TEST_PKGS)

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
## The HTTP targets start a server per input: with the default minimization
## (60 s per new input) they spend their time minimizing, not fuzzing.
HTTP_FUZZ_TARGETS = FuzzDecodeEnqueue FuzzListQuery FuzzClaim FuzzWriteBodies FuzzPathSegment FuzzOtherQueries FuzzHeaders FuzzTokenBodies
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzCanonicalize -fuzztime 30s ./key/
	for t in $(HTTP_FUZZ_TARGETS); do \
		$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime 30s -fuzzminimizetime 1x ./idemhttp/ || exit 1; \
	done

## mutate: mutation testing with go-gremlins (pinned), one package at a time, each
## bounded by MUTATE_BUDGET (docs/testing.md: packages, budget, last scores).
## GOFLAGS=-count=1: a cached coverage run would make every mutant time out.
## No --test-cpu: gremlins v0.5.0 passes it as the single argument "-cpu 1",
## which the test binary rejects, so every mutant is reported KILLED.
GREMLINS_VERSION ?= v0.5.0
## The stores are mutated by mutate-stores, over their claim, finish and record
## files only (scripts/mutate-files.sh); pgstore runs only the conformance
## cases of those paths (MUTATE_PG_RUN), as its whole suite takes 80 s a mutant.
MUTATE_PKGS ?= ./internal/executor ./internal/producer ./internal/completer ./internal/recordlease ./key
MUTATE_BUDGET ?= 25m
MUTATE_PG_RUN ?= ^TestConformance$$/^(JobClaim|JobFinishMany|JobHeartbeatMany|JobRescue|JobRetryMany|JobReleaseMany|Records|Record[A-Za-z]*|Limits|Fairness|Race)$$
mutate:
	$(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)
	@for p in $(MUTATE_PKGS); do \
		echo "== gremlins $$p (budget $(MUTATE_BUDGET))"; \
		GOFLAGS=-count=1 timeout $(MUTATE_BUDGET) $$($(GO) env GOPATH)/bin/gremlins unleash --workers 1 \
			--timeout-coefficient 4 $$p || echo "$$p: stopped (budget or threshold)"; \
	done
	$(MAKE) mutate-stores

mutate-stores:
	$(GO) install github.com/go-gremlins/gremlins/cmd/gremlins@$(GREMLINS_VERSION)
	-IDEM_REQUIRE_POSTGRES=1 GOFLAGS=-failfast nice -n 10 scripts/mutate-files.sh $(MUTATE_BUDGET) store/sqlitestore claim.go finish.go finish_batch.go records.go
	-IDEM_REQUIRE_POSTGRES=1 GOFLAGS=-failfast MUTATE_RUN='$(MUTATE_PG_RUN)' nice -n 10 scripts/mutate-files.sh $(MUTATE_BUDGET) store/pgstore claim.go finish.go records.go

## run: the server on ./idem.db (the README's run command)
run:
	$(GO) run ./cmd/idem serve
