package bulkheadpgx_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/floodgate-go/floodgate/adaptive"
	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Reports are capped at 50 at once in this process and wait at most 2 s;
// everything else is unlimited. For a fleet-wide cap, use a
// distsem.Semaphore as the Gate. It needs a server, so it is compiled, not
// run.
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	db := bulkheadpgx.New(pool, bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
		{Name: "reports", Gate: semaphore.New(50, semaphore.Config{}), MaxWait: 2 * time.Second},
	}})
	reports := db.Class("reports")

	rows, err := reports.Query(ctx, "SELECT region, sum(total) FROM orders GROUP BY region")
	if re, ok := errors.AsType[*bulkheadpgx.RejectError](err); ok {
		fmt.Println("busy, retry in", re.RetryAfter()) // 503 with Retry-After
		return
	} else if err != nil {
		log.Fatal(err)
	}
	defer rows.Close() // gives the report slot back
	for rows.Next() {
		// ...
	}

	// Cheap queries go through the DB itself, in the unlimited default class.
	if _, err := db.Exec(ctx, "UPDATE sessions SET seen = now() WHERE id = $1", 42); err != nil {
		log.Fatal(err)
	}
}

// Code typed to DBTX, as sqlc generates it, runs unchanged on the pool, in
// a class, or inside a transaction.
func ExampleDBTX() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	db := bulkheadpgx.New(pool, bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
		{Name: "reports", Gate: semaphore.New(50, semaphore.Config{}), MaxWait: 2 * time.Second},
	}})
	countOrders := func(ctx context.Context, q bulkheadpgx.DBTX) (n int, err error) {
		err = q.QueryRow(ctx, "SELECT count(*) FROM orders").Scan(&n)
		return n, err
	}
	countOrders(ctx, pool)                // no class
	countOrders(ctx, db.Class("reports")) // capped
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		_, err := countOrders(ctx, tx) // in the default class's transaction
		return err
	})
	if err != nil {
		log.Fatal(err)
	}
}

type tenantCtxKey struct{}

// Report queries are capped per tenant: each tenant runs at most 2 at once,
// whatever the others do. The tenant is read from the call's context, where
// a middleware put it. For the same cap across the fleet, use a
// distsem.Keyed.
func ExampleClass_perTenant() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	db := bulkheadpgx.New(pool, bulkheadpgx.Config{Classes: []bulkheadpgx.Class{{
		Name:      "reports",
		KeyedGate: semaphore.NewKeyed(2, semaphore.KeyedConfig{}),
		Key:       func(ctx context.Context) string { s, _ := ctx.Value(tenantCtxKey{}).(string); return s },
		MaxWait:   time.Second,
	}}})
	reports := db.Class("reports")

	ctx = context.WithValue(ctx, tenantCtxKey{}, "acme")
	rows, err := reports.Query(ctx, "SELECT region, sum(total) FROM orders WHERE tenant = $1 GROUP BY region", "acme")
	if err != nil {
		log.Fatal(err)
	}
	defer rows.Close() // gives acme's slot back
}

// When the number of report queries the replica can take at once is not
// known (it changes with its disk, its data, its neighbours), an adaptive
// gate finds it: its limit, between Min and Max, follows the queries'
// latency, and falls when queries queue in the database or pass their
// deadline. A query that times out counts as a sign of overload; one whose
// caller cancels it counts as nothing. It needs a server, so it is compiled,
// not run.
func ExampleClass_adaptive() {
	ctx := context.Background()
	// More connections than the gate's Max: a wait for a connection would
	// read as the database's latency.
	pool, err := pgxpool.New(ctx, "postgres://localhost/app?pool_max_conns=60")
	if err != nil {
		log.Fatal(err)
	}
	limit := adaptive.New(adaptive.Config{Min: 1, Max: 50}) // never more than 50
	db := bulkheadpgx.New(pool, bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
		{Name: "reports", Gate: limit, MaxWait: 2 * time.Second},
	}})
	reports := db.Class("reports")

	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	rows, err := reports.Query(ctx, "SELECT region, sum(total) FROM orders GROUP BY region")
	if err != nil {
		log.Fatal(err) // a *bulkheadpgx.RejectError when no slot came within 2 s
	}
	defer rows.Close() // the hold ends here: the gate's latency sample
	for rows.Next() {
		// ...
	}

	st := limit.Stats()
	fmt.Println("reports at once:", st.Limit, "no-queue latency:", st.Baseline)
}
