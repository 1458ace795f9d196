package otelfloodgate_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate/bulkhead/bulkheadpgx"
	"github.com/floodgate-go/floodgate/internal/pgtest"
	"github.com/floodgate-go/floodgate/otelfloodgate"
	"github.com/floodgate-go/floodgate/semaphore"
)

// TestDB drives two bulkheadpgx classes sharing a gate of 1 against a real
// PostgreSQL ("reports" with MaxWait 100ms, "batch" waiting as long as its
// context allows) through a grant at once, a refusal after MaxWait and a
// grant after a wait, and checks every exported point: the wait histogram
// counts only the grant that waited, the hold histogram every grant.
func TestDB(t *testing.T) {
	m, r := newMetrics(t)
	gate := semaphore.New(1, semaphore.Config{})
	db := bulkheadpgx.New(pgtest.Pool(t, 4), m.DBConfig("pg", bulkheadpgx.Config{Classes: []bulkheadpgx.Class{
		{Name: "reports", Gate: gate, MaxWait: 100 * time.Millisecond},
		{Name: "batch", Gate: gate},
	}}))
	if _, err := m.DB("pg", db); err != nil {
		t.Fatal(err)
	}
	reports, batch := db.Class("reports"), db.Class("batch")
	ctx := t.Context()
	tx, err := reports.Begin(ctx) // granted at once; fills the gate
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reports.Exec(ctx, "SELECT 1"); !errors.Is(err, bulkheadpgx.ErrMaxWait) {
		t.Fatalf("Exec with the gate full = %v, want ErrMaxWait", err)
	}
	done := make(chan error)
	go func() {
		dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		_, err := batch.Exec(dctx, "SELECT 1")
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for batch.Stats().Waiting == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no batch call waiting after 5s")
		}
		time.Sleep(time.Millisecond) // polls a counter; the wait itself is the gate's
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("batch Exec after the tx ended = %v", err)
	}
	c := func(class, name string, kv ...string) string {
		return key(name, append([]string{lim, "pg", kind, "db_pool", "floodgate.class", class}, kv...)...)
	}
	want := map[string]int64{}
	for _, x := range []struct {
		class             string
		admitted, maxWait int64
		waits, holds      int64
		limited           bool
	}{
		{"reports", 1, 1, 0, 1, true},
		{"batch", 1, 0, 1, 1, true},
		{"default", 0, 0, 0, 0, false},
	} {
		want[c(x.class, otelfloodgate.NameAdmitted)] = x.admitted
		want[c(x.class, otelfloodgate.NameInUse)] = 0
		want[c(x.class, otelfloodgate.NameWaiting)] = 0
		want[c(x.class, otelfloodgate.NameCanceled)] = 0
		want[c(x.class, otelfloodgate.NameRejected, rsn, "max_wait")] = x.maxWait
		want[c(x.class, otelfloodgate.NameRejected, rsn, "too_large")] = 0
		want[c(x.class, otelfloodgate.NameRejected, rsn, "error")] = 0
		if x.waits > 0 {
			want[c(x.class, otelfloodgate.NameWaitDuration)+"#count"] = x.waits
		}
		if x.holds > 0 {
			want[c(x.class, otelfloodgate.NameHoldDuration)+"#count"] = x.holds
		}
	}
	diff(t, points(t, r), want)
}
