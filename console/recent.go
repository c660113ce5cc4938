package console

import (
	"sync"
	"time"
)

// Refusal is one write of this process's runner that JetStream refused:
// the fence (a newer claim marker) or a run-subject compare-and-set.
type Refusal struct {
	Time     time.Time `json:"time"`
	Thread   string    `json:"thread"`
	Holder   string    `json:"holder"`
	ClaimSeq uint64    `json:"claim_seq"`
	Type     string    `json:"type"`   // the refused event's type
	Reason   string    `json:"reason"` // what refused it
}

// Recent keeps the last refusals of this process's runner, for the
// console: a fixed-size ring, so its cost does not grow with threads or
// time. The log itself never holds a refused write.
type Recent struct {
	mu   sync.Mutex
	ring []Refusal
	next int
	full bool
	subs map[chan struct{}]struct{}
}

// NewRecent returns a ring of the last n refusals.
func NewRecent(n int) *Recent {
	return &Recent{ring: make([]Refusal, max(n, 1)), subs: map[chan struct{}]struct{}{}}
}

// Add records r and wakes the subscribers. It never blocks.
func (rc *Recent) Add(r Refusal) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.ring[rc.next] = r
	rc.next = (rc.next + 1) % len(rc.ring)
	rc.full = rc.full || rc.next == 0
	for c := range rc.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// All returns the refusals kept, oldest first.
func (rc *Recent) All() []Refusal {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !rc.full {
		return append([]Refusal(nil), rc.ring[:rc.next]...)
	}
	return append(append([]Refusal(nil), rc.ring[rc.next:]...), rc.ring[:rc.next]...)
}

// Of returns the refusals kept of thread, oldest first.
func (rc *Recent) Of(thread string) []Refusal {
	var out []Refusal
	for _, r := range rc.All() {
		if r.Thread == thread {
			out = append(out, r)
		}
	}
	return out
}

// Subscribe returns a channel woken after each Add (coalesced), and a func
// that unsubscribes.
func (rc *Recent) Subscribe() (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	rc.mu.Lock()
	rc.subs[c] = struct{}{}
	rc.mu.Unlock()
	return c, func() {
		rc.mu.Lock()
		delete(rc.subs, c)
		rc.mu.Unlock()
	}
}
