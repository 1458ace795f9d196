// Package bench compares floodgate with the libraries its users run today, side by
// side in one run, so results are ratios on the same machine. It is a separate
// module so that peer libraries never appear in floodgate's own go.mod.
//
// Run everything (the Redis meter benchmarks need REDIS_ADDR; the distsem ones
// start their own redis-server, REDIS_SERVER or from PATH; `make test`
// smoke-runs them all):
//
//	cd bench && go test -run='^$' -bench=. -benchmem -count=10 | tee new.txt
//	benchstat new.txt
package bench
