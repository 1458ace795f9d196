// Package examplekit holds what the example programs share that needs only the
// standard library: flag defaults from the environment and a go-redis logger
// that keeps a missing server to one message. The /metrics endpoint is in
// examplemetrics, so that a program without it (the tour) does not build
// OpenTelemetry and Prometheus.
package examplekit

import (
	"context"
	"os"
	"time"
)

// EnvOr returns the environment variable k, or def if it is unset or empty.
func EnvOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// Quiet is a go-redis logger that drops go-redis's own log lines, so that a
// missing server is reported once, by the program.
type Quiet struct{}

// Printf does nothing.
func (Quiet) Printf(context.Context, string, ...any) {}

// Sleep waits d or until ctx ends.
func Sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
