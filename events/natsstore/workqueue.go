package natsstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/sys"
)

// DefaultWorkQueue is the durable name runners share by default.
const DefaultWorkQueue = "artifactr-runners"

// Bounds of a work queue's pulls.
const (
	// workWait is how long one pull request waits on the server before the
	// subscription renews it.
	workWait = 5 * time.Second
	// workAckWait is how long a delivered post waits for its ack before the
	// server hands it to another runner: the runner acks once a claim holds
	// the thread, so a runner that dies first costs the post this long.
	workAckWait = 30 * time.Second
	// workBatch is the most posts a runner holds delivered and not yet
	// handed to it.
	workBatch = 64
	// workRetryMax bounds the pause between pulls that fail.
	workRetryMax = 2 * time.Second
	// releaseDelay is when a post Release hands back is delivered again:
	// past the life of the queue's last pull request.
	releaseDelay = workWait + time.Second
)

// WorkQueue is a durable pull consumer on <prefix>.*.posted shared by every
// runner that opens it by the same name: each post is delivered to one of
// them, so a post wakes one runner rather than all. It has the method set of
// runner.WorkSource.
//
// Delivery is at least once: a runner acks a post once a claim that read
// it holds its thread, so one that dies before such a claim gets the post
// redelivered to another runner after 30s. A runner that is handed a thread
// another runner holds keeps the post unacked until that claim ends, since
// its holder may release the thread and die before it claims it again;
// threads whose holder died holding them are found through the runners'
// watch of lapsed sessions.
//
// The consumer is created with DeliverNewPolicy the first time a name is
// used; after that it keeps its position, so posts made while no runner runs
// are delivered when one starts. It is safe for concurrent use.
//
// With partitions there is one such consumer, of the same name, on each
// partition's stream (a consumer reads one stream), and the queue takes
// posts from all of them. One per partition is also what partition
// ownership needs: a runner will open only the partitions it owns.
type WorkQueue struct {
	s       *Store
	name    string
	ackWait time.Duration
	p       int // the partition whose stream the consumer is on

	// parts are the partitions' queues, when there are several; this
	// queue then has no consumer of its own and takes posts from theirs.
	parts    []*WorkQueue
	fanOnce  sync.Once
	fanStop  context.CancelFunc
	fanned   chan fanned   // posts the parts' goroutines took
	fanDead  chan struct{} // closed when a part's goroutine ended for good
	fanErr   error         // why; set before fanDead is closed
	fanEnded sync.Once

	mu   sync.Mutex // protects cons, it, held and nextID
	cons jetstream.Consumer
	it   jetstream.MessagesContext // the pull subscription; nil until a Next
	// held are the posts handed out and not acknowledged, for Release.
	held   map[uint64]jetstream.Msg
	nextID uint64

	stop     chan struct{}
	stopOnce sync.Once
}

// WorkQueue opens, creating it if need be, the shared work queue called name
// ([DefaultWorkQueue] when empty). It returns an error wrapping
// [events.ErrUnavailable] when the server cannot be reached, and one naming
// the conflict when a consumer of that name exists with another filter.
func (s *Store) WorkQueue(ctx context.Context, name string) (*WorkQueue, error) {
	return s.openWorkQueue(ctx, name, workAckWait)
}

func (s *Store) openWorkQueue(ctx context.Context, name string, ackWait time.Duration) (*WorkQueue, error) {
	if name == "" {
		name = DefaultWorkQueue
	}
	if !isToken(name) {
		return nil, fmt.Errorf("natsstore: work queue name %q is not [A-Za-z0-9_-]+", name)
	}
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	q := &WorkQueue{s: s, name: name, ackWait: ackWait, stop: make(chan struct{})}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if s.subj.Partitioned() {
		q.fanned, q.fanDead = make(chan fanned), make(chan struct{})
		for p := range s.cfg.Partitions {
			part := &WorkQueue{s: s, name: name, ackWait: ackWait, p: p, stop: make(chan struct{})}
			if err := part.open(ctx); err != nil {
				q.Stop()
				return nil, err
			}
			q.parts = append(q.parts, part)
		}
		return q, nil
	}
	if err := q.open(ctx); err != nil {
		return nil, err
	}
	return q, nil
}

// fanned is a post one partition's queue took.
type fanned struct {
	thread string
	ack    func()
}

// fanIn starts one goroutine per partition, each taking posts from its
// partition's queue for Next. They end on Stop.
func (q *WorkQueue) fanIn() {
	ctx, cancel := context.WithCancel(context.Background())
	q.fanStop = cancel
	for _, part := range q.parts {
		go func() {
			for {
				thread, ack, err := part.Next(ctx)
				if err != nil {
					if ctx.Err() == nil {
						q.fanEnded.Do(func() { q.fanErr = err; close(q.fanDead) })
					}
					return
				}
				select {
				case q.fanned <- fanned{thread, ack}:
				case <-ctx.Done():
					return // unacked: Release hands it back, or the ack wait does
				}
			}
		}()
	}
}

// nextFanned is Next with partitions.
func (q *WorkQueue) nextFanned(ctx context.Context) (string, func(), error) {
	if err := q.ended(ctx); err != nil {
		return "", nil, err
	}
	q.mu.Lock()
	q.fanOnce.Do(q.fanIn)
	q.mu.Unlock()
	select {
	case f := <-q.fanned:
		return f.thread, f.ack, nil
	case <-q.fanDead:
		return "", nil, q.fanErr
	case <-q.stop:
		return "", nil, fmt.Errorf("natsstore: work queue %s: %w", q.name, events.ErrClosed)
	case <-ctx.Done():
		return "", nil, ctx.Err()
	}
}

func (q *WorkQueue) config() jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:       q.name,
		Description:   "artifactr runners' shared work queue: each post wakes one runner",
		FilterSubject: q.s.subj.PartitionAllOf(q.p, events.KindPosted),
		DeliverPolicy: jetstream.DeliverNewPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       q.ackWait,
		MaxDeliver:    -1,
		// A runner keeps a post unacknowledged while another claim holds
		// its thread, until that claim ends.
		MaxAckPending: 1 << 20,
		// Many runners each keep one pull waiting.
		MaxWaiting: 512,
	}
}

// open creates the consumer, or opens the existing one as it stands.
func (q *WorkQueue) open(ctx context.Context) error {
	cons, err := openDurable(ctx, q.s.streams[q.p], q.config())
	if err != nil {
		return unavailable("open work queue "+q.name, err)
	}
	q.mu.Lock()
	q.cons = cons
	q.mu.Unlock()
	return nil
}

// openDurable creates the durable consumer cfg, or opens an existing one of
// that name without changing its position. An existing consumer with another
// filter is an error: it would deliver other events.
func openDurable(ctx context.Context, st jetstream.Stream, cfg jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	cons, err := st.Consumer(ctx, cfg.Durable)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		cons, err = st.CreateConsumer(ctx, cfg)
		if errors.Is(err, jetstream.ErrConsumerExists) {
			cons, err = st.Consumer(ctx, cfg.Durable) // created meanwhile
		}
	}
	if err != nil {
		return nil, err
	}
	got := cons.CachedInfo().Config
	if got.FilterSubject != cfg.FilterSubject || got.AckPolicy != cfg.AckPolicy {
		return nil, fmt.Errorf("%w: consumer %s exists with filter %q and ack policy %s, want %q and %s; delete it to recreate it",
			events.ErrUnsafeConfig, cfg.Durable, got.FilterSubject, got.AckPolicy, cfg.FilterSubject, cfg.AckPolicy)
	}
	return cons, nil
}

// Next blocks until a post is delivered to this runner and returns its
// thread and the function that acks the post. Until that is called, the post
// is this runner's for 30s, then goes to another: call it once the thread is
// taken care of (a claim holds it). It retries failed pulls (a restarting server, a consumer
// deleted by hand, which it recreates) until ctx ends, when it returns
// ctx's error, or the queue is stopped or the store closed, when it returns
// an error wrapping [events.ErrClosed].
//
// Posts come from one long-lived pull subscription that keeps up to
// workBatch of them buffered: a Next that ends (its ctx done) leaves what
// was delivered for the next one. Only the connection's loss, or the
// queue's stop, drops a delivered post, which then comes back after the
// ack wait. A pull of its own per call, as nats.go's Fetch makes, drops a
// post the server sent as the call gave up, and a post dropped twice in a
// row waits two ack waits (issue 21).
func (q *WorkQueue) Next(ctx context.Context) (string, func(), error) {
	if q.parts != nil {
		return q.nextFanned(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-q.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	failures := 0
	for {
		if err := q.ended(ctx); err != nil {
			return "", nil, err
		}
		thread, ack, err := q.pull(ctx)
		switch {
		case err == nil && thread != "":
			return thread, ack, nil
		case err == nil:
			failures = 0 // garbage, acked
			continue
		}
		if e := q.ended(ctx); e != nil {
			return "", nil, e
		}
		failures++
		q.s.cfg.Logger.Warn("natsstore: work queue pull failed; retrying", "queue", q.name, "err", err)
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrConsumerDeleted) {
			octx, ocancel := q.s.bound(ctx)
			_ = q.open(octx)
			ocancel()
		}
		sys.Sleep(ctx, min(backoffBase<<min(failures, 8), workRetryMax)) // an end is reported at the top
	}
}

// ended returns why Next must stop, or nil.
func (q *WorkQueue) ended(ctx context.Context) error {
	select {
	case <-q.stop:
		return fmt.Errorf("natsstore: work queue %s: %w", q.name, events.ErrClosed)
	default:
	}
	if q.s.closed.Load() {
		return fmt.Errorf("natsstore: work queue %s: %w", q.name, events.ErrClosed)
	}
	return ctx.Err()
}

// pull takes one delivered post and returns its thread and the post's ack.
// It returns "" and no error when the message was not a post of a valid
// thread (acked: it is no work).
func (q *WorkQueue) pull(ctx context.Context) (string, func(), error) {
	it, err := q.iterator()
	if err != nil {
		return "", nil, err
	}
	m, err := it.Next(jetstream.NextContext(ctx))
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, jetstream.ErrNoHeartbeat) {
			// Closed by the server or the connection: a new one next time.
			q.dropIterator(it)
		}
		return "", nil, err
	}
	q.mu.Lock()
	q.nextID++
	id := q.nextID
	if q.held == nil {
		q.held = map[uint64]jetstream.Msg{}
	}
	q.held[id] = m
	q.mu.Unlock()
	ack := func() {
		q.mu.Lock()
		_, ok := q.held[id]
		delete(q.held, id)
		q.mu.Unlock()
		if !ok {
			return // acknowledged before, or handed back by Release
		}
		if err := m.Ack(); err != nil {
			q.s.cfg.Logger.Debug("natsstore: work queue ack failed; the post will be redelivered", "queue", q.name, "err", err)
		}
	}
	thread, kind, ok := q.s.subj.Parse(m.Subject())
	if !ok || kind != events.KindPosted {
		ack()
		return "", nil, nil
	}
	return thread, ack, nil
}

// iterator returns the queue's pull subscription, starting it if need be.
func (q *WorkQueue) iterator() (jetstream.MessagesContext, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.it != nil {
		return q.it, nil
	}
	select {
	case <-q.stop:
		return nil, fmt.Errorf("natsstore: work queue %s: %w", q.name, events.ErrClosed)
	default:
	}
	it, err := q.cons.Messages(jetstream.PullMaxMessages(workBatch), jetstream.PullExpiry(workWait))
	if err != nil {
		return nil, err
	}
	q.it = it
	return it, nil
}

// dropIterator stops it and forgets it, if it is still the queue's.
func (q *WorkQueue) dropIterator(it jetstream.MessagesContext) {
	it.Stop()
	q.mu.Lock()
	if q.it == it {
		q.it = nil
	}
	q.mu.Unlock()
}

// Stop ends the queue for this runner: a blocked Next returns. The durable
// consumer stays on the server for the other runners and for restarts.
// Stop is safe to call more than once.
func (q *WorkQueue) Stop() {
	q.stopOnce.Do(func() {
		close(q.stop)
		q.mu.Lock()
		q.fanOnce.Do(func() {}) // no fan-in after a stop
		stopFan := q.fanStop
		q.mu.Unlock()
		if stopFan != nil {
			stopFan()
		}
		for _, part := range q.parts {
			part.Stop()
		}
		q.mu.Lock()
		it := q.it
		q.it = nil
		q.mu.Unlock()
		if it != nil {
			it.Stop() // what it holds unacked comes back after the ack wait
		}
	})
}

// Release stops the queue, as Stop does, and hands every post it gave out
// and that was not acknowledged back to the server (a negative
// acknowledgement), so that the other runners get them in releaseDelay
// (6 s) rather than after the ack wait (30 s). A runner calls it on a graceful stop, once it has
// given its claims up; a crash cannot, and its posts wait out the ack wait.
// Posts buffered and not yet handed out still wait it out.
func (q *WorkQueue) Release() {
	q.Stop()
	for _, part := range q.parts {
		part.Release()
	}
	q.mu.Lock()
	held := q.held
	q.held = nil
	q.mu.Unlock()
	for _, m := range held {
		// After this queue's last pull request has expired on the server:
		// handed back sooner, a post could go to that request, whose inbox
		// is gone, and wait out the ack wait after all.
		if err := m.NakWithDelay(releaseDelay); err != nil {
			q.s.cfg.Logger.Debug("natsstore: work queue could not hand a post back; it will be redelivered after the ack wait", "queue", q.name, "err", err)
		}
	}
}

// Name returns the durable consumer's name.
func (q *WorkQueue) Name() string { return q.name }

// AckWait returns how long a delivered post waits for its ack before the
// server hands it to another runner.
func (q *WorkQueue) AckWait() time.Duration { return q.ackWait }

// WorkAckWait is the AckWait of the queues [Store.WorkQueue] opens.
const WorkAckWait = workAckWait

// OpenPartition opens the work queue of partition p alone: the consumer of
// this queue's name on p's stream. A runner that owns some partitions
// (issue 29) pulls only theirs, so a post wakes the runner that owns its
// thread's partition, and releases the queue when the partition moves.
// Its result has the method set of runner.WorkReleaser, spelled out so
// that this package need not import the runner's.
func (q *WorkQueue) OpenPartition(ctx context.Context, p int) (interface {
	Next(context.Context) (string, func(), error)
	Stop()
	Release()
}, error) {
	if p < 0 || p >= q.s.subj.PartitionCount() {
		return nil, fmt.Errorf("natsstore: work queue %s: no partition %d of %d", q.name, p, q.s.subj.PartitionCount())
	}
	part := &WorkQueue{s: q.s, name: q.name, ackWait: q.ackWait, p: p, stop: make(chan struct{})}
	ctx, cancel := q.s.bound(ctx)
	defer cancel()
	if err := part.open(ctx); err != nil {
		return nil, err
	}
	return part, nil
}
