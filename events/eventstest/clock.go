package eventstest

import (
	"slices"
	"sync"
	"time"
)

// Clock is a settable clock for tests. The zero value reads a fixed epoch.
type Clock struct {
	mu  sync.Mutex // protects now
	now time.Time
}

// Epoch is the time a new Clock reads.
var Epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// NewClock returns a clock reading Epoch plus skew.
func NewClock(skew time.Duration) *Clock { return &Clock{now: Epoch.Add(skew)} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		c.now = Epoch
	}
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now.IsZero() {
		c.now = Epoch
	}
	c.now = c.now.Add(d)
}

// Timers are a simulated store's server-side timers (memstore's session and
// lease expiry, given as its LogConfig.AfterFunc), fired in simulated time
// as a simulation moves Clock on. They are not safe for concurrent use: a
// simulation's one goroutine owns them.
type Timers struct {
	Clock *Clock
	list  []timer
	seq   int
}

type timer struct {
	at  time.Time
	seq int
	f   func()
}

// AfterFunc queues f to run once the clock reaches now plus d.
func (t *Timers) AfterFunc(d time.Duration, f func()) {
	t.seq++
	t.list = append(t.list, timer{at: t.Clock.Now().Add(d), seq: t.seq, f: f})
}

// AdvanceTo moves the clock to at, running the timers due on the way in
// time order (those due at one time in the order queued), each with the
// clock at its time.
func (t *Timers) AdvanceTo(at time.Time) {
	for {
		slices.SortFunc(t.list, func(a, b timer) int {
			if c := a.at.Compare(b.at); c != 0 {
				return c
			}
			return a.seq - b.seq
		})
		if len(t.list) == 0 || t.list[0].at.After(at) {
			break
		}
		tm := t.list[0]
		t.list = t.list[1:]
		if now := t.Clock.Now(); tm.at.After(now) {
			t.Clock.Advance(tm.at.Sub(now))
		}
		tm.f()
	}
	if now := t.Clock.Now(); at.After(now) {
		t.Clock.Advance(at.Sub(now))
	}
}

// Due returns the times the queued timers are due at, in no set order.
func (t *Timers) Due() []time.Time {
	out := make([]time.Time, len(t.list))
	for i, tm := range t.list {
		out[i] = tm.at
	}
	return out
}
