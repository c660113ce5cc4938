package natsstore

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// replyMux sends this store's requests and gathers their replies on one
// subscription. Unlike nats.go's requests it needs no context with a
// deadline: a request waits for its reply, its caller's context and a
// pooled timer, so the hot paths (an append, a load) allocate no context
// per call. It also takes requests answered by several messages, ending
// with a status message (a batched direct get): a subscription per such
// request would cost a 64k-slot channel each.
type replyMux struct {
	nc     *nats.Conn
	prefix string
	sub    *nats.Subscription

	mu      sync.Mutex // protects the fields below
	next    uint64
	pending map[string]*call
}

// call is one request waiting for its replies.
type call struct {
	multi bool // replies up to and with the first status message
	msgs  []*nats.Msg
	done  chan struct{} // closed with mu held once msgs is complete
}

// mux returns the store's reply mux, subscribing on first use.
func (s *Store) mux() (*replyMux, error) {
	s.muxOnce.Do(func() {
		g := &replyMux{nc: s.nc, prefix: s.nc.NewRespInbox() + ".", pending: map[string]*call{}}
		g.sub, s.muxErr = s.nc.Subscribe(g.prefix+"*", g.deliver)
		if s.muxErr == nil {
			// A batch is read in one go; never drop replies as a slow
			// consumer while the reader is between requests.
			s.muxErr = g.sub.SetPendingLimits(-1, -1)
		}
		s.rmux = g
	})
	return s.rmux, s.muxErr
}

func (g *replyMux) deliver(m *nats.Msg) {
	token := m.Subject[len(g.prefix):]
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.pending[token]
	if c == nil {
		return // a reply to a request that gave up
	}
	c.msgs = append(c.msgs, m)
	if !c.multi || isStatus(m) {
		delete(g.pending, token)
		close(c.done)
	}
}

// isStatus reports whether m is a status message: no payload and a Status
// header (no responders, end of batch, not found).
func isStatus(m *nats.Msg) bool {
	return len(m.Data) == 0 && m.Header.Get(hdrStatus) != ""
}

// request publishes m with a reply subject of its own and waits up to
// timeout, or until ctx ends, for its replies: the first one, or with multi
// every one up to and with the first status message. A timeout returns
// context.DeadlineExceeded, as a request bounded by its context would, and
// a no-responders status nats.ErrNoResponders.
func (g *replyMux) request(ctx context.Context, m *nats.Msg, timeout time.Duration, multi bool) ([]*nats.Msg, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &call{multi: multi, done: make(chan struct{})}
	var reconnects uint64
	if multi {
		reconnects = g.nc.Stats().Reconnects
	}
	g.mu.Lock()
	g.next++
	token := strconv.FormatUint(g.next, 36)
	g.pending[token] = c
	g.mu.Unlock()
	m.Reply = g.prefix + token
	if err := g.nc.PublishMsg(m); err != nil {
		g.drop(token)
		return nil, err
	}
	t := getTimer(timeout)
	defer putTimer(t)
	select {
	case <-c.done:
	case <-ctx.Done():
		g.drop(token)
		return nil, ctx.Err()
	case <-t.C:
		g.drop(token)
		return nil, context.DeadlineExceeded
	}
	if first := c.msgs[0]; isStatus(first) && first.Header.Get(hdrStatus) == "503" {
		return nil, nats.ErrNoResponders
	}
	if multi && g.nc.Stats().Reconnects != reconnects {
		return nil, errReconnected
	}
	return c.msgs, nil
}

// errReconnected fails a request of several replies during which the
// connection was made again: replies the server sent while the client was
// away are lost, and the rest, the end-of-batch status among them, reach
// the new connection, so what came looks complete and is not. The caller
// reads again.
var errReconnected = errors.New("natsstore: the connection was made again during a batched read; replies may be missing")

func (g *replyMux) drop(token string) {
	g.mu.Lock()
	delete(g.pending, token)
	g.mu.Unlock()
}

// timers are reused: a request's timer almost never fires, and a new one
// per request was a measurable share of an append's garbage.
var timers sync.Pool

func getTimer(d time.Duration) *time.Timer {
	if t, ok := timers.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// putTimer stops t and pools it. Since Go 1.23 a stopped timer's channel
// holds no stale tick, so its next Reset starts clean.
func putTimer(t *time.Timer) {
	t.Stop()
	timers.Put(t)
}

// deadline is when an operation started now under ctx must end: ctx's
// deadline, or the store's Timeout from now if that is sooner.
func (s *Store) deadline(ctx context.Context) time.Time {
	d := time.Now().Add(s.cfg.Timeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		return cd
	}
	return d
}
