package httpapi

import (
	"context"
	"sync"

	"github.com/artifactr/artifactr/events"
)

// hub is one follow of the whole stream, live from the server's start,
// that hands each event to the waits and streams following its thread: a
// run's wait costs a subscription, not a consumer of its own. A
// subscriber that falls behind is dropped (closed, with lost set) and
// follows its thread by itself from where it got.
type hub struct {
	mu   sync.Mutex // protects subs and down
	subs map[string]map[*sub]struct{}
	down bool // the follow ended: subscribe returns nil
}

// sub is one subscription to a thread's events.
type sub struct {
	thread string
	ch     chan events.Envelope
	lost   bool // set before ch is closed when it fell behind
}

// subBuffer is how far a subscriber may fall behind before it is dropped.
const subBuffer = 512

func newHub() *hub { return &hub{subs: map[string]map[*sub]struct{}{}} }

// run follows the stream until ctx ends or the follow fails; then every
// subscription is closed and later ones follow on their own.
func (h *hub) run(ctx context.Context, watch func(ctx context.Context) func(func(events.Envelope, error) bool)) {
	defer func() {
		h.mu.Lock()
		h.down = true
		for _, m := range h.subs {
			for s := range m {
				s.lost = true
				close(s.ch)
			}
		}
		h.subs = map[string]map[*sub]struct{}{}
		h.mu.Unlock()
	}()
	for env, err := range watch(ctx) {
		if err != nil {
			return
		}
		h.mu.Lock()
		for s := range h.subs[env.Thread] {
			select {
			case s.ch <- env:
			default:
				s.lost = true
				close(s.ch)
				delete(h.subs[env.Thread], s)
			}
		}
		h.mu.Unlock()
	}
}

// subscribe returns a subscription to thread's events stored from now on,
// or nil when the hub is down.
func (h *hub) subscribe(thread string) *sub {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down {
		return nil
	}
	s := &sub{thread: thread, ch: make(chan events.Envelope, subBuffer)}
	m := h.subs[thread]
	if m == nil {
		m = map[*sub]struct{}{}
		h.subs[thread] = m
	}
	m[s] = struct{}{}
	return s
}

func (h *hub) unsubscribe(s *sub) {
	if s == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if m := h.subs[s.thread]; m != nil {
		if _, ok := m[s]; ok {
			delete(m, s)
			close(s.ch)
			if len(m) == 0 {
				delete(h.subs, s.thread)
			}
		}
	}
}
