package tour

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// queuedAfter is the wait from which a call counts as queued rather than
// admitted at once (a Redis round trip stays below it).
const queuedAfter = 5 * time.Millisecond

// column counts one way of running a job (one backend) over all pods.
type column struct {
	name     string
	admitted []atomic.Int64 // per pod
	queued   atomic.Int64
	rejected atomic.Int64
	peak     gauge

	mu     sync.Mutex
	waits  []time.Duration
	starts []time.Time
}

func newColumn(name string, pods int) *column {
	return &column{name: name, admitted: make([]atomic.Int64, pods)}
}

// started records an admitted call that waited d before it started.
func (c *column) started(pod int, d time.Duration) {
	c.admitted[pod].Add(1)
	if d >= queuedAfter {
		c.queued.Add(1)
	}
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.starts = append(c.starts, time.Now())
	c.mu.Unlock()
}

func (c *column) total() int64 {
	var n int64
	for i := range c.admitted {
		n += c.admitted[i].Load()
	}
	return n
}

// percentile returns the p-th percentile (0..1) of the waits.
func (c *column) percentile(p float64) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.waits) == 0 {
		return 0
	}
	w := slices.Clone(c.waits)
	slices.Sort(w)
	return w[min(len(w)-1, int(p*float64(len(w))))]
}

// startRate returns the starts per second between the first and the last start.
func (c *column) startRate() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.starts) < 2 {
		return 0
	}
	s := slices.Clone(c.starts)
	slices.SortFunc(s, func(a, b time.Time) int { return a.Compare(b) })
	return float64(len(s)-1) / s[len(s)-1].Sub(s[0]).Seconds()
}

// gauge tracks how many run at once and the most seen.
type gauge struct{ cur, max atomic.Int64 }

func (g *gauge) enter() {
	n := g.cur.Add(1)
	for {
		m := g.max.Load()
		if n <= m || g.max.CompareAndSwap(m, n) {
			return
		}
	}
}

func (g *gauge) leave() { g.cur.Add(-1) }

// table is a report section: a label column, then one column per backend.
// Cells are separated by at least two spaces and never contain two spaces in
// a row, so the report can be read back (the test does).
type table struct {
	note    string     // one line above the rows
	rows    [][]string // label, then a cell per column
	trailer []string   // lines below the rows
}

func (t *table) add(label string, cells ...string) {
	t.rows = append(t.rows, append([]string{label}, cells...))
}

// addCols adds a row with f applied to each column.
func (t *table) addCols(label string, cols []*column, f func(*column) string) {
	t.addEach(label, cols, func(_ int, c *column) string { return f(c) })
}

// addEach adds a row with f applied to each column and its index.
func (t *table) addEach(label string, cols []*column, f func(int, *column) string) {
	cells := make([]string, len(cols))
	for i, c := range cols {
		cells[i] = f(i, c)
	}
	t.add(label, cells...)
}

// standard adds the rows every job reports.
func (t *table) standard(cols []*column, peakCap int64) {
	t.addCols("limiters", cols, func(c *column) string { return c.name })
	if len(cols[0].admitted) > 1 {
		for p := range cols[0].admitted {
			t.addCols(fmt.Sprintf("  pod %d admitted", p+1), cols, func(c *column) string { return fmt.Sprint(c.admitted[p].Load()) })
		}
	}
	t.addCols("admitted", cols, func(c *column) string { return fmt.Sprint(c.total()) })
	t.addCols("queued", cols, func(c *column) string { return fmt.Sprint(c.queued.Load()) })
	t.addCols("rejected", cols, func(c *column) string { return fmt.Sprint(c.rejected.Load()) })
	t.addCols("peak concurrency", cols, func(c *column) string { return fmt.Sprintf("%d / cap %d", c.peak.max.Load(), peakCap) })
	t.addCols("wait p50 / p99", cols, func(c *column) string {
		return fmt.Sprintf("%s / %s", ms(c.percentile(0.50)), ms(c.percentile(0.99)))
	})
}

func (t *table) write(w io.Writer) {
	if t.note != "" {
		fmt.Fprintln(w, "   "+t.note)
	}
	width := make([]int, 0)
	for _, r := range t.rows {
		for i, c := range r {
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len(c))
		}
	}
	for _, r := range t.rows {
		var b strings.Builder
		b.WriteString("   ")
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			fmt.Fprintf(&b, "%-*s  ", width[i], c)
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	for _, l := range t.trailer {
		fmt.Fprintln(w, strings.TrimRight("   "+l, " "))
	}
}

func ms(d time.Duration) string {
	if d < time.Millisecond {
		return "0ms"
	}
	return d.Round(time.Millisecond).String()
}

// progress prints one status line while a job runs.
type progress struct {
	cfg  Config
	n    int
	name string
	t0   time.Time
	cols atomic.Pointer[[]*column]
	done chan struct{}
	wg   sync.WaitGroup
}

func startProgress(cfg Config, n int, name string) *progress {
	p := &progress{cfg: cfg, n: n, name: name, t0: time.Now(), done: make(chan struct{})}
	if cfg.Progress == nil {
		return p
	}
	every := time.Second
	if cfg.TTY {
		every = 100 * time.Millisecond
	}
	p.wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-p.done:
				if cfg.TTY {
					fmt.Fprint(cfg.Progress, "\r\033[K")
				}
				return
			case <-tick.C:
				p.print()
			}
		}
	})
	return p
}

// watch makes the progress line show these columns' counts.
func (p *progress) watch(cols []*column) { p.cols.Store(&cols) }

func (p *progress) print() {
	line := fmt.Sprintf("[%d/%d] %s  %.1fs", p.n, p.cfg.sections(), strings.SplitN(p.name, ":", 2)[0], time.Since(p.t0).Seconds())
	if cols := p.cols.Load(); cols != nil {
		for _, c := range *cols {
			line += fmt.Sprintf("  %s: admitted %d rejected %d", c.name, c.total(), c.rejected.Load())
		}
	}
	if p.cfg.TTY {
		fmt.Fprint(p.cfg.Progress, "\r\033[K"+line)
	} else {
		fmt.Fprintln(p.cfg.Progress, line)
	}
}

func (p *progress) stop() {
	close(p.done)
	p.wg.Wait()
}
