package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/semaphore"
)

// classedBulkhead is one global layer over a semaphore of limit, with the
// classes critical (Reserved 1), default and sheddable (never waits).
func classedBulkhead(limit int64) (*bulkhead.Bulkhead, *semaphore.Weighted) {
	g := semaphore.New(limit, semaphore.Config{})
	return bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{
		Name: "global", Gate: g,
		Classes: []bulkhead.Criticality{
			{Name: "critical", Reserved: 1},
			{Name: "default", MaxWait: time.Second},
			{Name: "sheddable", MaxWait: -1},
		},
	}}}), g
}

func as(class string) context.Context {
	return bulkhead.WithIdentity(context.Background(), bulkhead.Identity{Tenant: "t", Criticality: class})
}

// hold runs a request of class through b that holds the gate until release
// is closed; started reports its admission (nil) or refusal.
func hold(b *bulkhead.Bulkhead, class string, release <-chan struct{}) <-chan error {
	started := make(chan error, 1)
	go func() {
		err := b.Do(as(class), bulkhead.Request{}, func(context.Context) error {
			started <- nil
			<-release
			return nil
		})
		if err != nil {
			started <- err
		}
	}()
	return started
}

// TestShedLeastCriticalFirst: with the gate full, the least critical class
// is refused at once with ErrShed (503, a Retry-After), the reserved slot
// stays for the critical class, and a queued critical request is served
// before a queued default one that came first.
func TestShedLeastCriticalFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, _ := classedBulkhead(4)
		release := make(chan struct{})
		// Sheddable fills what is not reserved: 3 of 4.
		for i := range 3 {
			if err := <-hold(b, "sheddable", release); err != nil {
				t.Fatalf("sheddable %d: %v", i, err)
			}
		}
		err := <-hold(b, "sheddable", release)
		re, ok := errors.AsType[*bulkhead.RejectError](err)
		if !ok || !errors.Is(err, bulkhead.ErrShed) || re.Reason != floodgate.ReasonShed || re.Status != http.StatusServiceUnavailable || re.RetryAfter() <= 0 {
			t.Fatalf("4th sheddable: %v (%+v), want ErrShed, 503, a RetryAfter", err, re)
		}
		// The reserved slot is the critical class's.
		if err := <-hold(b, "critical", release); err != nil {
			t.Fatalf("critical into its reservation: %v", err)
		}
		// Now full: a default request waits, then a critical one.
		def := hold(b, "default", release)
		synctest.Wait()
		crit := hold(b, "critical", release)
		synctest.Wait()
		st := b.Stats().Layers[0]
		if st.Classes[1].Waiting != 1 || st.Classes[0].Waiting != 1 {
			t.Fatalf("waiting = %+v", st.Classes)
		}
		close(release) // every holder ends; the waiters then run and end too
		if err := <-crit; err != nil {
			t.Errorf("queued critical: %v", err)
		}
		if err := <-def; err != nil {
			t.Errorf("queued default: %v", err)
		}
		synctest.Wait()
		st = b.Stats().Layers[0]
		if st.Shed != 1 || st.Classes[2].Shed != 1 || st.InFlight != 0 {
			t.Errorf("stats %+v", st)
		}
	})
}

// TestShedPriorityOrder: requests queued in every class are served most
// critical first, FIFO within a class.
func TestShedPriorityOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := semaphore.New(1, semaphore.Config{})
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{
			Name: "global", Gate: g,
			Classes: []bulkhead.Criticality{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		}}})
		release := make(chan struct{})
		if err := <-hold(b, "c", release); err != nil {
			t.Fatal(err)
		}
		var order []string
		done := make(chan struct{})
		for _, name := range []string{"c1", "b1", "c2", "a1", "b2", "a2"} {
			go func() {
				b.Do(as(name[:1]), bulkhead.Request{}, func(context.Context) error {
					order = append(order, name) // one at a time: the gate's limit is 1
					return nil
				})
				done <- struct{}{}
			}()
			synctest.Wait()
		}
		close(release)
		for range 6 {
			<-done
		}
		if got, want := fmt.Sprint(order), "[a1 a2 b1 b2 c1 c2]"; got != want {
			t.Errorf("order %s, want %s", got, want)
		}
		if g.Stats().InUse != 0 {
			t.Errorf("gate still held: %+v", g.Stats())
		}
	})
}

// TestClassedAllocs: a request admitted at once through a layer with
// classes, and through a shadow layer, allocates no more than one through a
// plain layer.
func TestClassedAllocs(t *testing.T) {
	plain := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "global", Gate: semaphore.New(64, semaphore.Config{})}}})
	classed, _ := classedBulkhead(64)
	shadow := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{{Name: "global", Gate: semaphore.New(64, semaphore.Config{}), Shadow: true}}})
	ctx := as("default")
	fn := func(context.Context) error { return nil }
	base := testing.AllocsPerRun(500, func() { plain.Do(ctx, bulkhead.Request{}, fn) })
	for name, b := range map[string]*bulkhead.Bulkhead{"classes": classed, "shadow": shadow} {
		if a := testing.AllocsPerRun(500, func() { b.Do(ctx, bulkhead.Request{}, fn) }); a > base {
			t.Errorf("%s: %v allocs per request, a plain layer %v", name, a, base)
		}
	}
}

// TestClassesConfigPanics: New refuses classes that cannot work.
func TestClassesConfigPanics(t *testing.T) {
	g := semaphore.New(4, semaphore.Config{})
	for _, tc := range []struct {
		name, want string
		l          bulkhead.Layer
	}{
		{"keyed gate", "bulkhead: layer l: Classes without a Gate (a KeyedGate's keys have no one limit to shed for)",
			bulkhead.Layer{Name: "l", KeyedGate: semaphore.NewKeyed(4, semaphore.KeyedConfig{}), Classes: []bulkhead.Criticality{{Name: "a"}}}},
		{"no name", "bulkhead: layer l: a class without a Name", bulkhead.Layer{Name: "l", Gate: g, Classes: []bulkhead.Criticality{{}}}},
		{"duplicate", "bulkhead: layer l: duplicate class a", bulkhead.Layer{Name: "l", Gate: g, Classes: []bulkhead.Criticality{{Name: "a"}, {Name: "a"}}}},
		{"negative", "bulkhead: layer l: class a: negative Reserved", bulkhead.Layer{Name: "l", Gate: g, Classes: []bulkhead.Criticality{{Name: "a", Reserved: -1}}}},
		{"too much", "bulkhead: layer l: Reserved adds up to more than limit (4)", bulkhead.Layer{Name: "l", Gate: g, Classes: []bulkhead.Criticality{{Name: "a", Reserved: 3}, {Name: "b", Reserved: 2}}}},
		{"no room", "bulkhead: layer l: class b: the Reserved of the other classes take the whole limit (4)", bulkhead.Layer{Name: "l", Gate: g, Classes: []bulkhead.Criticality{{Name: "a", Reserved: 4}, {Name: "b"}}}},
		{"weight", "bulkhead: layer l: class b: the Reserved of the other classes take the whole limit (4)", bulkhead.Layer{Name: "l", Gate: g, N: 2, Classes: []bulkhead.Criticality{{Name: "a", Reserved: 3}, {Name: "b"}}}},
	} {
		func() {
			defer func() {
				if got := fmt.Sprint(recover()); got != tc.want {
					t.Errorf("%s: panic %q, want %q", tc.name, got, tc.want)
				}
			}()
			bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{tc.l}})
		}()
	}
}

// TestCriticalityFrom: a request's class comes from Config.Criticality, or
// the identity's, a trusted header only when configured, and an unknown
// class is the least critical.
func TestCriticalityFrom(t *testing.T) {
	var got []string
	obs := floodgate.ObserverFunc(func(e floodgate.Event) {
		if e.Kind == floodgate.KindAdmit {
			got = append(got, e.Class)
		}
	})
	layer := bulkhead.Layer{Name: "g", Gate: semaphore.New(4, semaphore.Config{}), Classes: []bulkhead.Criticality{{Name: "critical"}, {Name: "low"}}}
	for _, tc := range []struct {
		name   string
		cfg    bulkhead.Config
		id     string
		header string
		want   string
	}{
		{"identity", bulkhead.Config{}, "critical", "", "critical"},
		{"unknown is the least", bulkhead.Config{}, "vip", "", "low"},
		{"none is the least", bulkhead.Config{}, "", "", "low"},
		{"header not trusted", bulkhead.Config{}, "", "critical", "low"},
		{"header trusted", bulkhead.Config{CriticalityHeader: "X-Criticality"}, "low", "critical", "critical"},
		{"func", bulkhead.Config{Criticality: func(bulkhead.Identity, bulkhead.Request) string { return "critical" }}, "low", "", "critical"},
	} {
		got = nil
		tc.cfg.Layers = []bulkhead.Layer{layer}
		tc.cfg.Observer = obs
		b := bulkhead.New(tc.cfg)
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set("X-Criticality", tc.header)
		}
		r = r.WithContext(bulkhead.WithIdentity(r.Context(), bulkhead.Identity{Tenant: "t", Criticality: tc.id}))
		b.Handler(http.NotFoundHandler()).ServeHTTP(httptest.NewRecorder(), r)
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: classes %q, want [%s]", tc.name, got, tc.want)
		}
	}
}

// TestShedCancelReturnsEverything: requests that leave the queue (their
// context cancelled, their MaxWait passed) hold nothing afterwards, the
// dispatcher stops waiting for the gate once no one waits (the bubble ends
// with no goroutine left), and the gate is whole again.
func TestShedCancelReturnsEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, g := classedBulkhead(2)
		release := make(chan struct{})
		for range 2 {
			if err := <-hold(b, "critical", release); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(as("critical"))
		errs := make(chan error, 8)
		for i := range 8 {
			c := ctx
			if i%2 == 1 {
				c = as("default") // MaxWait 1s
			}
			go func() {
				errs <- b.Do(c, bulkhead.Request{}, func(context.Context) error { return errors.New("ran") })
			}()
		}
		synctest.Wait()
		if st := b.Stats().Layers[0]; st.Classes[0].Waiting != 4 || st.Classes[1].Waiting != 4 || st.Waiting != 8 {
			t.Fatalf("waiting %+v", st)
		}
		cancel()
		time.Sleep(time.Second) // the default class's MaxWait passes (synctest's clock)
		var canceled, shed int
		for range 8 {
			switch err := <-errs; {
			case errors.Is(err, context.Canceled):
				canceled++
			case errors.Is(err, bulkhead.ErrShed) && errors.Is(err, bulkhead.ErrMaxWait):
				shed++
			default:
				t.Errorf("queued request: %v", err)
			}
		}
		st := b.Stats().Layers[0]
		if canceled != 4 || shed != 4 || st.Classes[0].Canceled != 4 || st.Classes[1].Shed != 4 || st.Waiting != 0 || st.Waits != 8 {
			t.Errorf("canceled %d, shed %d, stats %+v", canceled, shed, st)
		}
		close(release)
		synctest.Wait()
		if s := g.Stats(); s.InUse != 0 || s.Waiting != 0 {
			t.Errorf("gate %+v after every request ended", s)
		}
	})
}
