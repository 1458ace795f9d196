# make test: the whole suite, every module, with real redis-server and
# PostgreSQL (see scripts/test.sh).
.PHONY: test bench bench-pkg stress faults
test:
	./scripts/test.sh

# The repository's modules but bench/ (the root first), as scripts/test.sh
# finds them; each is tested as its own go.mod says (GOWORK=off).
MODULES = $(shell git ls-files --cached --others --exclude-standard go.mod '*/go.mod' | xargs -n 1 dirname | grep -v '^bench$$' | sort -u)

# Cancellation, race, stress, FIFO and over-release regressions, many times
# over, in every module (no servers needed; tests that need one skip).
stress:
	for m in $(MODULES); do (cd $$m && GOWORK=off go test -race -count=50 -run 'Cancel|Race|Stress|FIFO|OverRelease' ./...) || exit 1; done

# The benchmark report: floodgate beside its peers (bench/), written to
# bench/RESULTS.md. Starts its own redis-server unless REDIS_ADDR is set; the
# pgx rows need DATABASE_URL. About 15 minutes (4 of them the adaptive
# concurrency simulator); QUICK=1 for a short look.
bench:
	cd bench && go run ./report $(if $(QUICK),-quick)

# The fleet's limits under Redis faults (frozen, restarted empty, failover,
# a partitioned process, slow) beside redis_rate and throttled, written to
# bench/FAULTS.md. Starts its own redis-servers; about 13 minutes.
faults:
	cd bench && go run ./faults

# Every module's in-package benchmarks, beside their local baselines.
bench-pkg:
	for m in $(MODULES); do (cd $$m && GOWORK=off go test -run='^$$' -bench=. -benchmem ./...) || exit 1; done
