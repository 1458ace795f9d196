package bulkhead_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/floodgate-go/floodgate"
	"github.com/floodgate-go/floodgate/bulkhead"
	"github.com/floodgate-go/floodgate/internal/observetest"
	"github.com/floodgate-go/floodgate/semaphore"
	"github.com/floodgate-go/floodgate/shaper"
)

// told is what an event says about a layer's decision, for comparing a
// shadow layer's events with a real one's.
type told struct {
	kind   floodgate.Kind
	reason floodgate.Reason
	part   string
	class  string
}

func (e told) String() string { return fmt.Sprintf("%v %s %s/%s", e.kind, e.reason, e.part, e.class) }

// decisions returns the Admit and Reject events of evs, and whether every
// one of them has Shadow set (want).
func decisions(evs []floodgate.Event, shadow bool) ([]told, bool) {
	var out []told
	ok := true
	for _, e := range evs {
		if e.Kind != floodgate.KindAdmit && e.Kind != floodgate.KindReject {
			continue
		}
		ok = ok && e.Shadow == shadow
		out = append(out, told{e.Kind, e.Reason, e.Part, e.Class})
	}
	return out, ok
}

// refusals returns the Reject events of ds.
func refusals(ds []told) []told {
	return slices.DeleteFunc(slices.Clone(ds), func(d told) bool { return d.kind != floodgate.KindReject })
}

// TestShadowRateDifferential: the same requests, at the same (fake) times,
// through a rate layer and through the same layer in shadow mode. The
// shadow layer refuses none, and counts (LayerStats.Limited), tells
// (Reject events with Shadow set, the same reasons in the same order) and
// describes in the RateLimit fields exactly what the real layer refused.
func TestShadowRateDifferential(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mk := func(shadow bool, rec *observetest.Recorder) *bulkhead.Bulkhead {
			return bulkhead.New(bulkhead.Config{RateLimitFields: true, Observer: rec, Layers: []bulkhead.Layer{{
				Name: "tenant", Key: bulkhead.ByTenant, Shadow: shadow,
				Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(5), Burst: 3}),
			}}})
		}
		var realRec, shadowRec observetest.Recorder
		real, shadow := mk(false, &realRec), mk(true, &shadowRec)
		rng := rand.New(rand.NewPCG(22, 3))
		const requests = 400
		refused := 0
		for i := range requests {
			tenant := []string{"a", "b"}[rng.IntN(2)]
			time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
			rw, sw := serveAs(real, tenant), serveAs(shadow, tenant)
			if sw.Code != http.StatusOK {
				t.Fatalf("request %d: the shadow layer answered %d", i, sw.Code)
			}
			if rw.Code != http.StatusOK {
				refused++
			}
			// The RateLimit fields tell what the layer decided, shadow or
			// not; a refusal's Retry-After is the real layer's only.
			for _, f := range []string{"RateLimit", "RateLimit-Policy"} {
				if r, s := rw.Header().Get(f), sw.Header().Get(f); r != s || s == "" {
					t.Errorf("request %d (real %d): %s %q, shadow %q", i, rw.Code, f, r, s)
				}
			}
			if ra := sw.Header().Get("Retry-After"); ra != "" {
				t.Errorf("request %d: the shadow layer's response has Retry-After %s", i, ra)
			}
		}
		rs, ss := layerStats(t, real, "tenant"), layerStats(t, shadow, "tenant")
		t.Logf("%d requests, %d refused; real %+v; shadow %+v", requests, refused, rs, ss)
		if refused == 0 || refused == requests {
			t.Fatalf("%d of %d refused: the sequence does not test the rate", refused, requests)
		}
		if rs.Limited != uint64(refused) || ss.Limited != rs.Limited {
			t.Errorf("Limited: real %d, shadow %d; %d refused", rs.Limited, ss.Limited, refused)
		}
		if !ss.Shadow || rs.Shadow || ss.Admitted != requests {
			t.Errorf("shadow stats %+v, want Shadow and all %d passed", ss, requests)
		}
		rd, rok := decisions(realRec.Take(), false)
		sd, sok := decisions(shadowRec.Take(), true)
		if !rok || !sok {
			t.Errorf("Event.Shadow: real all unset %v, shadow all set %v", rok, sok)
		}
		if r, s := refusals(rd), refusals(sd); !slices.Equal(r, s) || len(r) != refused {
			t.Errorf("refusals told: real %d, shadow %d, differ %v", len(r), len(s), !slices.Equal(r, s))
		}
	})
}

// gateScript drives b through ops steps of a script made by the PCG rng
// (seeded with the stream): each step either starts a request of a random
// class that holds whatever it was admitted to until released, or releases
// a random one started earlier (a refused one has nothing to give back, so
// the gate's state follows the same path with a real layer and a shadow
// one), after a random pause of up to gap (none if 0). It returns, per
// started request, whether b ran it; the gate's weight in use after each
// step goes to inUse.
func gateScript(b *bulkhead.Bulkhead, g *semaphore.Weighted, classes []string, stream uint64, ops int, gap time.Duration) (ran []bool, inUse []int64) {
	rng := rand.New(rand.NewPCG(22, stream))
	var open []chan struct{}
	for range ops {
		if gap > 0 {
			time.Sleep(time.Duration(rng.IntN(int(gap/time.Millisecond))) * time.Millisecond)
		}
		if len(open) == 0 || rng.IntN(2) == 0 {
			release := make(chan struct{})
			ran = append(ran, <-hold(b, classes[rng.IntN(len(classes))], release) == nil)
			open = append(open, release)
		} else {
			i := rng.IntN(len(open))
			close(open[i])
			open = slices.Delete(open, i, i+1)
		}
		synctest.Wait()
		inUse = append(inUse, g.Stats().InUse)
	}
	for _, release := range open {
		close(release)
	}
	synctest.Wait()
	return ran, inUse
}

// TestShadowGateDifferential: a gate layer in shadow mode and the same
// layer refusing at once (MaxWait < 0: a shadow gate never waits) on the
// same script of holds and releases. The shadow layer runs every request,
// holds the gate for exactly those the real one admitted (the gate's
// weight in use is the same after every step), and counts (NoCapacity)
// and tells (Reject, no_capacity, Shadow set) the real layer's refusals.
func TestShadowGateDifferential(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mk := func(shadow bool, rec *observetest.Recorder) (*bulkhead.Bulkhead, *semaphore.Weighted) {
			g := semaphore.New(3, semaphore.Config{})
			return bulkhead.New(bulkhead.Config{Observer: rec, Layers: []bulkhead.Layer{{
				Name: "global", Gate: g, MaxWait: -1, Shadow: shadow,
			}}}), g
		}
		var realRec, shadowRec observetest.Recorder
		real, rg := mk(false, &realRec)
		shadow, sg := mk(true, &shadowRec)
		const ops = 300
		rran, ruse := gateScript(real, rg, []string{""}, 1, ops, 0)
		sran, suse := gateScript(shadow, sg, []string{""}, 1, ops, 0)
		refused := 0
		for i, ok := range rran {
			if !ok {
				refused++
			}
			if !sran[i] {
				t.Fatalf("request %d: the shadow layer did not run it", i)
			}
		}
		if !slices.Equal(ruse, suse) {
			t.Errorf("gate in use after each step differs:\nreal   %v\nshadow %v", ruse, suse)
		}
		rs, ss := layerStats(t, real, "global"), layerStats(t, shadow, "global")
		t.Logf("%d requests, %d refused; real %+v; shadow %+v", len(rran), refused, rs, ss)
		if refused == 0 || refused == len(rran) {
			t.Fatalf("%d of %d refused: the script does not fill the gate", refused, len(rran))
		}
		if rs.NoCapacity != uint64(refused) || ss.NoCapacity != rs.NoCapacity || ss.InFlight != 0 || rs.InFlight != 0 {
			t.Errorf("NoCapacity: real %d, shadow %d; %d refused", rs.NoCapacity, ss.NoCapacity, refused)
		}
		rd, rok := decisions(realRec.Take(), false)
		sd, sok := decisions(shadowRec.Take(), true)
		if !rok || !sok {
			t.Errorf("Event.Shadow: real all unset %v, shadow all set %v", rok, sok)
		}
		if r, s := refusals(rd), refusals(sd); !slices.Equal(r, s) || len(r) != refused || r[0].reason != floodgate.ReasonNoCapacity {
			t.Errorf("refusals told: real %v, shadow %v", r, s)
		}
	})
}

// TestShadowClassesDifferential: the same with criticality classes (one
// slot of four reserved for critical; every class refused at once in the
// real layer): the shadow layer counts each class's would-be sheds in
// ClassStats.ShadowShed (its Shed stays 0) and its first class's in
// NoCapacity, exactly the real layer's Shed and NoCapacity, and tells them
// with Event.Class and Event.Shadow set.
func TestShadowClassesDifferential(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		classes := []bulkhead.Criticality{
			{Name: "critical", Reserved: 1, MaxWait: -1},
			{Name: "default", MaxWait: -1},
			{Name: "sheddable", MaxWait: -1},
		}
		mk := func(shadow bool, rec *observetest.Recorder) (*bulkhead.Bulkhead, *semaphore.Weighted) {
			g := semaphore.New(4, semaphore.Config{})
			return bulkhead.New(bulkhead.Config{Observer: rec, Layers: []bulkhead.Layer{{
				Name: "global", Gate: g, Shadow: shadow, Classes: classes,
			}}}), g
		}
		var realRec, shadowRec observetest.Recorder
		real, rg := mk(false, &realRec)
		shadow, sg := mk(true, &shadowRec)
		names := []string{"critical", "default", "sheddable", "sheddable"}
		const ops = 400
		rran, ruse := gateScript(real, rg, names, 2, ops, 0)
		sran, suse := gateScript(shadow, sg, names, 2, ops, 0)
		if slices.Contains(sran, false) {
			t.Fatal("the shadow layer refused a request")
		}
		if !slices.Equal(ruse, suse) {
			t.Errorf("gate in use after each step differs:\nreal   %v\nshadow %v", ruse, suse)
		}
		rs, ss := layerStats(t, real, "global"), layerStats(t, shadow, "global")
		t.Logf("%d requests; real %+v; shadow %+v", len(rran), rs, ss)
		for i := range classes {
			r, s := rs.Classes[i], ss.Classes[i]
			if s.ShadowShed != r.Shed || s.Shed != 0 || r.ShadowShed != 0 || s.InFlight != 0 || s.Waiting != 0 {
				t.Errorf("class %s: real %+v, shadow %+v", classes[i].Name, r, s)
			}
		}
		if rs.Classes[1].Shed == 0 || rs.Classes[2].Shed == 0 || rs.NoCapacity == 0 {
			t.Errorf("real %+v: the script sheds no default or sheddable request, or refuses no critical one", rs)
		}
		if ss.Shed != rs.Shed || ss.NoCapacity != rs.NoCapacity {
			t.Errorf("shadow Shed %d NoCapacity %d, real %d %d", ss.Shed, ss.NoCapacity, rs.Shed, rs.NoCapacity)
		}
		rd, rok := decisions(realRec.Take(), false)
		sd, sok := decisions(shadowRec.Take(), true)
		if !rok || !sok {
			t.Errorf("Event.Shadow: real all unset %v, shadow all set %v", rok, sok)
		}
		r, s := refusals(rd), refusals(sd)
		if !slices.Equal(r, s) {
			t.Errorf("refusals told differ: real %d, shadow %d", len(r), len(s))
		}
		for _, d := range s {
			if d.class == "" || (d.class == "critical") != (d.reason == floodgate.ReasonNoCapacity) ||
				d.class != "critical" && d.reason != floodgate.ReasonShed {
				t.Errorf("shadow refusal told %v", d)
				break
			}
		}
	})
}

// TestShadowRefundedByLaterRefusal: a shadow rate layer charges the
// requests it admits, and gives the charge back when a later real layer
// refuses the request, as a real layer would; a request it would have
// refused is not charged at all.
func TestShadowRefundedByLaterRefusal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := semaphore.New(1, semaphore.Config{})
		b := bulkhead.New(bulkhead.Config{Layers: []bulkhead.Layer{
			{Name: "quota", Key: bulkhead.ByTenant, Shadow: true, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerMinute(2)})},
			{Name: "cap", Gate: g, MaxWait: -1},
		}})
		release := make(chan struct{})
		if err := <-hold(b, "", release); err != nil { // quota 1 of 2
			t.Fatal(err)
		}
		err := b.Do(as(""), bulkhead.Request{}, func(context.Context) error { return nil })
		if re, ok := errors.AsType[*bulkhead.RejectError](err); !ok || re.Layer != "cap" {
			t.Fatalf("with the cap full: %v, want cap's refusal", err)
		}
		if q := layerStats(t, b, "quota"); q.Refunds != 1 || q.Limited != 0 {
			t.Fatalf("quota after cap's refusal: %+v, want 1 refund", q)
		}
		close(release)
		synctest.Wait()
		// The refund left quota 2 of 2 for this one; the next is over it.
		for i, wantLimited := range []uint64{0, 1} {
			if err := b.Do(as(""), bulkhead.Request{}, func(context.Context) error { return nil }); err != nil {
				t.Fatalf("request %d: %v (a shadow layer never refuses)", i, err)
			}
			if q := layerStats(t, b, "quota"); q.Limited != wantLimited {
				t.Errorf("request %d: quota Limited %d, want %d: %+v", i, q.Limited, wantLimited, q)
			}
		}
		// Would-be refusals are not charged: more of them stay would-be
		// refusals until the quota returns, and then they pass.
		time.Sleep(30 * time.Second)
		b.Do(as(""), bulkhead.Request{}, func(context.Context) error { return nil })
		if q := layerStats(t, b, "quota"); q.Limited != 1 || q.Refunds != 1 {
			t.Errorf("after 30s (one request's worth): %+v, want no new would-be refusal", q)
		}
	})
}

// TestShadowHTTPNeverRefuses: over HTTP, a Bulkhead whose every layer is in
// shadow mode serves every request with the handler's own response, with
// the shadow rate layer's RateLimit fields when configured.
func TestShadowHTTPNeverRefuses(t *testing.T) {
	g := semaphore.New(1, semaphore.Config{})
	b := bulkhead.New(bulkhead.Config{RateLimitFields: true, Layers: []bulkhead.Layer{
		{Name: "quota", Key: bulkhead.ByTenant, Shadow: true, Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerHour(1)})},
		{Name: "cap", Gate: g, Shadow: true, Classes: []bulkhead.Criticality{{Name: "critical"}, {Name: "other"}}},
	}})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Handler", "yes")
		w.WriteHeader(http.StatusTeapot)
	})
	srv := httptest.NewServer(auth(shedIDs, b.Handler(h)))
	srv.Config.ErrorLog = discardLogger()
	defer srv.Close()
	for i := range 3 {
		rp := mustCall(t, srv.Client(), srv.URL, "GET", "/", "shed")
		if rp.status != http.StatusTeapot || rp.header.Get("X-Handler") != "yes" || rp.retryAfter != -1 {
			t.Errorf("request %d: %d, Retry-After %d, %v", i, rp.status, rp.retryAfter, rp.header)
		}
		if rl := rp.header.Get("RateLimit"); rl == "" || rp.header.Get("RateLimit-Policy") == "" {
			t.Errorf("request %d: no RateLimit fields: %v", i, rp.header)
		}
	}
	if q := layerStats(t, b, "quota"); q.Limited != 2 || q.Admitted != 3 {
		t.Errorf("quota: %+v, want 2 would-be refusals of 3", q)
	}
}

// TestShadowRateAndGateDifferential: a layer with both a rate and a gate, in
// shadow mode and enforcing, on the same script of holds and releases at the
// same (fake) times. A request the shadow rate would refuse does not go on
// to the shadow gate (the real layer stops at its rate), so the gate is held
// for exactly the requests the real layer admitted, and each refusal is
// counted and told once, with the real layer's reason.
func TestShadowRateAndGateDifferential(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mk := func(shadow bool, rec *observetest.Recorder) (*bulkhead.Bulkhead, *semaphore.Weighted) {
			g := semaphore.New(2, semaphore.Config{})
			return bulkhead.New(bulkhead.Config{Observer: rec, Layers: []bulkhead.Layer{{
				Name: "global", Gate: g, MaxWait: -1, Shadow: shadow,
				Rate: shaper.NewMeter(shaper.Limit{Rate: shaper.PerSecond(4), Burst: 3}),
			}}}), g
		}
		var realRec, shadowRec observetest.Recorder
		real, rg := mk(false, &realRec)
		shadow, sg := mk(true, &shadowRec)
		rran, ruse := gateScript(real, rg, []string{""}, 4, 400, 200*time.Millisecond)
		sran, suse := gateScript(shadow, sg, []string{""}, 4, 400, 200*time.Millisecond)
		if !slices.Equal(ruse, suse) {
			t.Errorf("gate in use after each step differs:\nreal   %v\nshadow %v", ruse, suse)
		}
		for i := range sran {
			if !sran[i] {
				t.Fatalf("request %d: the shadow layer did not run it", i)
			}
		}
		rs, ss := layerStats(t, real, "global"), layerStats(t, shadow, "global")
		t.Logf("%d requests; real %+v; shadow %+v", len(rran), rs, ss)
		if rs.Limited == 0 || rs.NoCapacity == 0 {
			t.Fatalf("real layer: %d limited, %d without capacity: the script tests only one part", rs.Limited, rs.NoCapacity)
		}
		if ss.Limited != rs.Limited || ss.NoCapacity != rs.NoCapacity || ss.InFlight != 0 {
			t.Errorf("shadow counts Limited %d, NoCapacity %d; real %d, %d", ss.Limited, ss.NoCapacity, rs.Limited, rs.NoCapacity)
		}
		rd, _ := decisions(realRec.Take(), false)
		sd, _ := decisions(shadowRec.Take(), true)
		if r, s := refusals(rd), refusals(sd); !slices.Equal(r, s) {
			t.Errorf("refusals told differ: real %d %v\nshadow %d %v", len(r), r, len(s), s)
		}
	})
}
