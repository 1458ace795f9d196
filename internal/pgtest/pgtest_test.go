package pgtest_test

import (
	"testing"

	"github.com/floodgate-go/floodgate/internal/pgtest"
)

func TestPoolReachesServerInItsOwnSchema(t *testing.T) {
	pool := pgtest.Pool(t, 4)
	ctx := t.Context()
	var one int
	if err := pool.QueryRow(ctx, "SELECT 1").Scan(&one); err != nil || one != 1 {
		t.Fatalf("SELECT 1 = %d, %v", one, err)
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE t (x int)"); err != nil {
		t.Fatalf("CREATE TABLE: %v", err)
	}
	var schema string
	if err := pool.QueryRow(ctx, "SELECT table_schema FROM information_schema.tables WHERE table_name = 't'").Scan(&schema); err != nil {
		t.Fatalf("find table: %v", err)
	}
	if len(schema) < 4 || schema[:3] != "ft_" {
		t.Fatalf("table created in schema %q, want the test's own ft_ schema", schema)
	}
}
