// Package examplemetrics serves the example programs' GET /metrics endpoint:
// OpenTelemetry's Prometheus exporter over otelfloodgate (docs/metrics.md).
package examplemetrics

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	floodgate "github.com/floodgate-go/floodgate"

	"github.com/floodgate-go/floodgate/otelfloodgate"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Serve serves GET /metrics on addr (OpenTelemetry's Prometheus
// exporter) until stop is called, and returns the Metrics to attach limiters
// to. If addr is empty, it returns nil Metrics and a no-op stop.
func Serve(addr string, log io.Writer) (m *otelfloodgate.Metrics, stop func(), err error) {
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

// Observer returns m.Observer(name), or nil (no observation) when m is nil:
// the programs run without -metrics too.
func Observer(m *otelfloodgate.Metrics, name string) floodgate.Observer {
	if m == nil {
		return nil
	}
	return m.Observer(name)
}
