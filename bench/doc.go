// Package bench compares floodgate with the libraries its users run today, side by
// side in one run, so results are ratios on the same machine. It is a separate
// module so that peer libraries never appear in floodgate's own go.mod.
//
// The report, bench/RESULTS.md, is written by one command at the repository
// root:
//
//	make bench          # about 15 minutes
//	make bench QUICK=1  # fewer, shorter rounds, for a look
//
// which runs `go run ./report` here. It starts its own redis-server on a free
// loopback port (REDIS_SERVER, else /usr/bin/redis-server, else PATH) unless
// REDIS_ADDR names one, and stops it on exit; the PostgreSQL rows run only
// when DATABASE_URL is set. The report builds the benchmark binary once and
// runs every benchmark function several times over (rounds, -count=1 each);
// within a run all implementations of a row run back to back, so floodgate and
// its peer alternate over the rounds. Each figure is the median over the
// rounds with the lowest and highest, and each floodgate/peer ratio is taken
// within a round, then its median shown. RESULTS.md explains what each row
// measures and which floors (memory latency, a bare EVALSHA) bound it.
//
// Benchmarks follow one naming rule, which the report relies on to pair
// rows: sub-benchmarks are named impl=NAME, with floodgate's own
// implementations named floodgate or floodgate-VARIANT, and any other
// parameters (conc=32, order=hot4k) after it, the same for every impl of a
// row. A new benchmark that follows it appears in the report without
// changes to the report program.
//
// The adaptive concurrency sections are not benchmarks: TestAdaptiveSim
// (adaptive_sim_test.go) runs internal/adaptsim's scenarios through
// floodgate's adaptive gate, failsafe-go's adaptivelimiter and an AIMD
// baseline and writes its tables and charts to the file named by
// ADAPTIVE_SIM_OUT; the report runs it (and the fleet's
// TestAdaptiveFleetReport, ADAPTIVE_FLEET_OUT, and TestShedSim,
// SHED_SIM_OUT: the overload by criticality through bulkhead's Classes
// beside failsafe-go's prioritized limiter and bulkhead) after the
// benchmarks and includes what they wrote. `go run ./report -adaptive-only` reruns just those
// and replaces their sections in RESULTS.md, about 5 minutes.
//
// The fleet under Redis faults is not a benchmark either: `make faults` (`go
// run ./faults`, bench/faults) runs ten processes' limiters through Redis
// frozen, restarted empty, a failover, a partition and a slow Redis, under
// each failure policy and beside redis_rate and throttled, and writes
// FAULTS.md, about 13 minutes.
//
// To run by hand and compare with benchstat:
//
//	cd bench && REDIS_ADDR=127.0.0.1:6379 go test -run='^$' -bench=. -benchmem -count=10 | tee new.txt
//	benchstat new.txt
package bench
