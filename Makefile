# make test: the whole suite with real redis-server and PostgreSQL (see scripts/test.sh).
.PHONY: test bench bench-pkg stress
test:
	./scripts/test.sh

# Cancellation, race, stress, FIFO and over-release regressions, many times
# over (no servers needed; tests that need one skip).
stress:
	go test -race -count=50 -run 'Cancel|Race|Stress|FIFO|OverRelease' ./...

# The benchmark report: floodgate beside its peers (bench/), written to
# bench/RESULTS.md. Starts its own redis-server unless REDIS_ADDR is set; the
# pgx rows need DATABASE_URL. About 10 minutes; QUICK=1 for a short look.
bench:
	cd bench && go run ./report $(if $(QUICK),-quick)

# The root module's in-package benchmarks, beside their local baselines.
bench-pkg:
	go test -run='^$$' -bench=. -benchmem ./...
