package eventstest

import (
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
