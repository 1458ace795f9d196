# make test: the whole suite with real redis-server and PostgreSQL (see scripts/test.sh).
.PHONY: test bench stress
test:
	./scripts/test.sh

# Cancellation and race regressions, many times over (no servers needed).
stress:
	go test -race -count=50 -run 'Cancel|Race' ./...

# Benchmarks of the root module (in-package, beside their local baselines).
bench:
	go test -run='^$$' -bench=. -benchmem ./...
