# make test: the whole suite with real redis-server and PostgreSQL (see scripts/test.sh).
.PHONY: test bench stress
test:
	./scripts/test.sh

# Cancellation, race, stress, FIFO and over-release regressions, many times
# over (no servers needed; tests that need one skip).
stress:
	go test -race -count=50 -run 'Cancel|Race|Stress|FIFO|OverRelease' ./...

# Benchmarks of the root module (in-package, beside their local baselines).
bench:
	go test -run='^$$' -bench=. -benchmem ./...
