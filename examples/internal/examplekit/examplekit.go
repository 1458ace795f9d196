// Package examplekit holds what the example programs share: flag defaults from
// the environment, a go-redis logger that keeps a missing server to one
// message, and the /metrics endpoint.
package examplekit

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/floodgate-go/floodgate/otelfloodgate"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
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

// ServeMetrics serves GET /metrics on addr (OpenTelemetry's Prometheus
// exporter) until stop is called, and returns the Metrics to attach limiters
// to. If addr is empty, it returns nil Metrics and a no-op stop.
func ServeMetrics(addr string, log io.Writer) (m *otelfloodgate.Metrics, stop func(), err error) {
	if addr == "" {
		return nil, func() {}, nil
	}
	reg := prometheus.NewRegistry()
	exp, err := otelprom.New(otelprom.WithRegisterer(reg))
	if err != nil {
		return nil, nil, err
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(exp))
	if m, err = otelfloodgate.New(mp); err != nil {
		return nil, nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ln) }()
	fmt.Fprintf(log, "metrics on http://%s/metrics\n", ln.Addr())
	return m, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
		mp.Shutdown(ctx)
	}, nil
}
