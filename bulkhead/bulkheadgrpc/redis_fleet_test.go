package bulkheadgrpc_test

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/distsem"
	"github.com/floodgate-go/floodgate/floodgatetest"
	"github.com/floodgate-go/floodgate/internal/redistest"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
	"github.com/floodgate-go/floodgate/shaper/shaperredis"
	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	testgrpc "google.golang.org/grpc/interop/grpc_testing"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// fleet is three gRPC servers, each with its own Bulkhead (a per-tenant
// rate and a global gate on streams, made by mk), and a client of each.
type fleet struct {
	bs      []*bulkhead.Bulkhead
	clients []testgrpc.TestServiceClient
	svcs    []*service
	exited  chan string
}

func newFleet(t *testing.T, mk func(i int) (bulkhead.Rate, floodgate.Gate)) *fleet {
	t.Helper()
	f := &fleet{exited: make(chan string, 64)}
	for i := range 3 {
		rate, gate := mk(i)
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
			{Name: "streams", Route: streamCall, Gate: gate, MaxWait: -1},
			{Name: "tenant", Key: bulkhead.ByTenant, Rate: rate},
		}})
		svc := &service{hold: true, release: make(chan struct{}), entered: make(chan string, 8)}
		f.bs, f.svcs = append(f.bs, b), append(f.svcs, svc)
		f.clients = append(f.clients, dial(t, serve(t, svc, serverConfig{b: b, exited: f.exited}).addr))
	}
	return f
}

// burstAs sends n unary calls at once, spread over the servers, as tenant,
// and returns how many were served and how many refused with
// ResourceExhausted.
func (f *fleet) burstAs(t *testing.T, n int, tenant string) (served, limited int) {
	t.Helper()
	for _, s := range f.svcs {
		close(s.release) // unary calls do not wait
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, err := f.clients[i%3].EmptyCall(as(t.Context(), tenant), &testgrpc.Empty{})
			mu.Lock()
			defer mu.Unlock()
			switch status.Code(err) {
			case codes.OK:
				served++
			case codes.ResourceExhausted:
				limited++
			default:
				t.Errorf("call %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	for range n {
		<-f.exited
	}
	return served, limited
}

// TestRedisFleet: three servers whose Bulkheads have the same Redis-backed
// leaves (a shaperredis meter under one prefix, a distsem semaphore of one
// name) share one quota exactly: 30 concurrent calls of one tenant over the
// three get exactly the burst of 10 served, where three local meters serve
// all 30; and two streams open on two servers fill the fleet's gate of 2,
// so the third server refuses a stream until one ends.
func TestRedisFleet(t *testing.T) {
	db := redistest.Connect(t)
	addr := os.Getenv("REDIS_ADDR")
	// PerHour: nothing comes back during the test, so the count is exact.
	lim := shaper.Limit{Rate: shaper.PerHour(10), Burst: 10}
	f := newFleet(t, func(int) (bulkhead.Rate, floodgate.Gate) {
		rdb := redis.NewClient(redistest.Options(addr))
		t.Cleanup(func() { rdb.Close() })
		sem := distsem.New(rdb, db.Key("streams"), 2, distsem.Config{})
		t.Cleanup(func() { sem.Close() })
		return shaperredis.NewMeter(rdb, lim, shaperredis.Config{Prefix: db.Key("rate:")}), sem
	})

	// Streams first (the services hold them open): one on server 0, one on
	// server 1; server 2 refuses the third.
	req := &testgrpc.StreamingOutputCallRequest{ResponseParameters: []*testgrpc.ResponseParameters{{Size: 1}}}
	var open []func()
	for i := range 2 {
		ctx, cancel := contextWithCancel(t, "acme")
		s, err := f.clients[i].StreamingOutputCall(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Recv(); err != nil {
			t.Fatalf("stream on server %d: %v", i, err)
		}
		open = append(open, cancel)
	}
	// A deadline, so that a stream wrongly admitted ends too.
	ctx, cancel := context.WithTimeout(as(t.Context(), "acme"), 5*time.Second)
	defer cancel()
	s, err := f.clients[2].StreamingOutputCall(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = recvAll(s)
	<-f.exited
	if r := refusalOf(t, err, s.Trailer()); r.code != codes.Unavailable || r.reason != "NO_CAPACITY" || len(r.pushback) != 1 {
		t.Errorf("third stream, on server 2: %+v; want Unavailable, NO_CAPACITY, a pushback", r)
	}
	open[0]() // the client cancels the stream on server 0
	<-f.exited
	// distsem gives the permit back to Redis in the background: poll the
	// store for it (state outside the process, no channel to wait on).
	floodgatetest.Eventually(t, 5*time.Second, "a stream admitted on server 2 after server 0's ended", func() bool {
		ctx, cancel := contextWithCancel(t, "acme")
		defer cancel()
		s, err := f.clients[2].StreamingOutputCall(ctx, req)
		if err != nil {
			return false
		}
		_, err = s.Recv()
		if err == nil {
			cancel()
		}
		<-f.exited
		return err == nil
	})
	open[1]()
	<-f.exited
	// The streams were charged to acme's quota too: the burst is another
	// tenant's.
	tenantBefore := int64(0)
	for _, b := range f.bs {
		tenantBefore += int64(layerStats(t, b, "tenant").Admitted)
	}

	served, limited := f.burstAs(t, 30, "initech")
	if served != 10 || limited != 20 {
		t.Errorf("Redis fleet: %d served, %d limited of 30; want exactly the burst 10 served, 20 limited", served, limited)
	}
	var admitted int64
	for _, b := range f.bs {
		admitted += int64(layerStats(t, b, "tenant").Admitted)
	}
	if admitted-tenantBefore != 10 {
		t.Errorf("tenant layers admitted %d over the fleet, want 10", admitted-tenantBefore)
	}

	// The contrast: local leaves, one quota per server.
	local := newFleet(t, func(int) (bulkhead.Rate, floodgate.Gate) {
		return shaper.NewMeter(lim), semaphore.New(2, semaphore.Config{})
	})
	if served, _ := local.burstAs(t, 30, "initech"); served != 30 {
		t.Errorf("local fleet served %d of 30; want all (three quotas of 10)", served)
	}
}

// contextWithCancel is a cancellable context of the test, as tenant.
func contextWithCancel(t *testing.T, tenant string) (context.Context, context.CancelFunc) {
	return context.WithCancel(as(t.Context(), tenant))
}

// TestStoreOutageUnavailable: a Redis-backed rate whose store cannot be
// reached refuses under FailClosed (its default) with Unavailable and a
// delay, never Internal and never the store's address.
func TestStoreOutageUnavailable(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client()
	m := shaperredis.NewMeter(rdb, shaper.Limit{Rate: shaper.PerSecond(10), Burst: 10}, shaperredis.Config{Prefix: redistest.Prefix(t)})
	b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "tenant", Key: bulkhead.ByTenant, Rate: m}}})
	c := dial(t, serve(t, &service{}, serverConfig{b: b}).addr)
	if _, err := c.EmptyCall(as(t.Context(), "acme"), &testgrpc.Empty{}); err != nil {
		t.Fatalf("with Redis up: %v", err)
	}
	srv.Kill()
	var tr metadata.MD
	_, err := c.EmptyCall(as(t.Context(), "acme"), &testgrpc.Empty{}, grpc.Trailer(&tr))
	r := refusalOf(t, err, tr)
	if r.code != codes.Unavailable || r.reason != "UNAVAILABLE" || r.delay <= 0 || len(r.pushback) != 1 {
		t.Errorf("with Redis down: %+v; want Unavailable, UNAVAILABLE, a delay and a pushback", r)
	}
	if strings.Contains(r.msg, srv.Addr) || strings.Contains(r.msg, "redis") {
		t.Errorf("message %q names the store", r.msg)
	}
}
