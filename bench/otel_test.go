package bench

import (
	"context"
	"testing"

	floodgate "github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/otelfloodgate"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

func otelMetrics(b *testing.B) (*otelfloodgate.Metrics, func()) {
	r := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r))
	m, err := otelfloodgate.New(mp)
	if err != nil {
		b.Fatal(err)
	}
	return m, func() { mp.Shutdown(context.Background()) }
}

// BenchmarkOtelObserve: the cost of otelfloodgate, what one grant and its
// release record through an SDK MeterProvider with a ManualReader (with a
// semaphore's Config.Observer: BenchmarkOtelSemaphore). Target: allocs/op = 0.
func BenchmarkOtelObserve(b *testing.B) {
	m, stop := otelMetrics(b)
	defer stop()
	o := m.Observer("db")
	admit := floodgate.Event{Kind: floodgate.KindAdmit, Component: floodgate.ComponentSemaphore, N: 1}
	release := floodgate.Event{Kind: floodgate.KindRelease, Component: floodgate.ComponentSemaphore, N: 1}
	b.ReportAllocs()
	for b.Loop() {
		o.Observe(admit)
		o.Observe(release)
	}
}
