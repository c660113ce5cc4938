package summaries

import (
	"cmp"
	"context"
	"errors"
	"iter"
	"slices"
	"sync"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/sys"
)

// Follow yields every partition's events from sequence from[p] on in
// partition p's stream (one entry per partition), each partition's in
// order, live, until ctx ends: what client.Client.WatchAll(from) does.
type Follow func(ctx context.Context, from []uint64) iter.Seq2[events.Envelope, error]

// Index is every thread's summary in memory, kept live: one [Read] of the
// bucket, then the stream's events after it folded in as they are stored.
// It serves pages of a filtered, sorted list without reading the bucket per
// request, which is what a console over 100,000 threads needs. It costs one
// follow of the stream and one Summary per thread (a few hundred bytes), in
// the process that asks for it; nothing is written.
type Index struct {
	store  events.ReadModelStore
	subj   events.Subjects
	bucket string
	follow Follow

	once  sync.Once
	ready chan struct{} // closed when the first Read is in

	mu   sync.RWMutex
	byID map[string]*Summary
	seqs []uint64 // the sequence the index is exact at, per partition
	err  error    // the last failure to read or follow, nil once caught up
	subs map[chan struct{}]struct{}
}

// NewIndex returns an index of bucket's summaries that follows the stream
// with follow. It starts reading on its first use, in a goroutine that ends
// with ctx.
func NewIndex(store events.ReadModelStore, bucket string, follow Follow) *Index {
	return &Index{
		store: store, subj: store.Subjects(), bucket: cmp.Or(bucket, DefaultBucket), follow: follow,
		seqs:  make([]uint64, store.Subjects().PartitionCount()),
		ready: make(chan struct{}), byID: map[string]*Summary{}, subs: map[chan struct{}]struct{}{},
	}
}

// Start starts the index's reader, once; later calls do nothing.
func (ix *Index) Start(ctx context.Context) {
	ix.once.Do(func() { go ix.run(ctx) })
}

// run reads the bucket, then folds the stream's tail into it, and starts
// again from a fresh read after a failure.
func (ix *Index) run(ctx context.Context) {
	b := sys.NewBackoff(100*time.Millisecond, 5*time.Second)
	first := true
	for ctx.Err() == nil {
		err := ix.readAndFollow(ctx, &first)
		if ctx.Err() != nil {
			break
		}
		ix.mu.Lock()
		ix.err = err
		ix.mu.Unlock()
		if first {
			// Never ready yet: say why to whoever waits.
			ix.notify()
		}
		if !b.Wait(ctx) {
			break
		}
	}
	if first {
		ix.mu.Lock()
		ix.err = cmp.Or(ix.err, ctx.Err())
		ix.mu.Unlock()
		close(ix.ready)
	}
}

func (ix *Index) readAndFollow(ctx context.Context, first *bool) error {
	snap, err := Read(ctx, ix.store, ix.bucket)
	seqs := make([]uint64, ix.subj.PartitionCount())
	byID := map[string]*Summary{}
	switch {
	case errors.Is(err, ErrNoReadModel):
		// No projector ran yet: fold the stream from its start.
	case err != nil:
		return err
	default:
		for i := range snap.Summaries {
			s := snap.Summaries[i]
			byID[s.Thread] = &s
		}
		copy(seqs, snap.LastSeqs)
	}
	from := make([]uint64, len(seqs))
	for p := range seqs {
		from[p] = seqs[p] + 1
	}
	ix.mu.Lock()
	ix.byID, ix.seqs, ix.err = byID, seqs, nil
	ix.mu.Unlock()
	if *first {
		*first = false
		close(ix.ready)
	}
	ix.notify()
	for env, err := range ix.follow(ctx, from) {
		if err != nil {
			return err
		}
		ix.apply(env)
	}
	return ctx.Err()
}

func (ix *Index) apply(env events.Envelope) {
	p, ok := ix.subj.FilterPartition(env.Subject)
	ix.mu.Lock()
	if !ok || env.Seq <= ix.seqs[p] {
		ix.mu.Unlock()
		return
	}
	ix.seqs[p] = env.Seq
	if events.ValidateThreadID(env.Thread) == nil {
		s, ok := ix.byID[env.Thread]
		if !ok {
			e := Empty(env.Thread)
			s = &e
			ix.byID[env.Thread] = s
		}
		*s = Apply(*s, env)
	}
	ix.mu.Unlock()
	ix.notify()
}

// notify wakes every subscriber, never blocking: a subscriber that has not
// yet taken the last wake-up gets one for both.
func (ix *Index) notify() {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	for c := range ix.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

// Wait waits until the index has read the bucket once, or ctx ends. It
// returns the index's last failure when it could not.
func (ix *Index) Wait(ctx context.Context) error {
	select {
	case <-ix.ready:
	case <-ctx.Done():
		ix.mu.RLock()
		defer ix.mu.RUnlock()
		return cmp.Or(ix.err, ctx.Err())
	}
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if len(ix.byID) == 0 && sum(ix.seqs) == 0 && ix.err != nil {
		return ix.err
	}
	return nil
}

// Subscribe returns a channel that receives a value after the index
// changes (coalesced), and a func that unsubscribes.
func (ix *Index) Subscribe() (<-chan struct{}, func()) {
	c := make(chan struct{}, 1)
	ix.mu.Lock()
	ix.subs[c] = struct{}{}
	ix.mu.Unlock()
	return c, func() {
		ix.mu.Lock()
		delete(ix.subs, c)
		ix.mu.Unlock()
	}
}

// Get returns thread's summary, and false when the index has no event of
// it.
func (ix *Index) Get(thread string) (Summary, bool) {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	s, ok := ix.byID[thread]
	if !ok {
		return Summary{}, false
	}
	return s.Clone(), true
}

// Seq returns the stream sequence the index is exact at. With partitions
// it is the sum of each partition's ([Index.Seqs]): it grows with every
// event applied, but names no one stream's sequence.
func (ix *Index) Seq() uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return sum(ix.seqs)
}

// Seqs returns the sequence the index is exact at in each partition.
func (ix *Index) Seqs() []uint64 {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	return slices.Clone(ix.seqs)
}

func sum(xs []uint64) uint64 {
	var n uint64
	for _, x := range xs {
		n += x
	}
	return n
}

// Query selects and orders summaries.
type Query struct {
	// Keep selects the summaries to list; nil keeps all.
	Keep func(*Summary) bool
	// Less orders them (a cmp-style compare); nil orders by thread id. Ties
	// are broken by thread id, so pages are stable.
	Compare func(a, b *Summary) int
	// Desc reverses the order.
	Desc bool
	// Offset and Limit choose the page; Limit 0 means every match.
	Offset, Limit int
}

// Page is one page of a [Query], exact as of stream sequence Seq (see
// [Index.Seq] for partitions).
type Page struct {
	Summaries []Summary
	Total     int // matches in all
	Seq       uint64
}

// Query returns the page of summaries q selects, copied.
func (ix *Index) Query(q Query) Page {
	ix.mu.RLock()
	match := make([]*Summary, 0, len(ix.byID))
	for _, s := range ix.byID {
		if q.Keep == nil || q.Keep(s) {
			match = append(match, s)
		}
	}
	seq := sum(ix.seqs)
	compare := q.Compare
	if compare == nil {
		compare = func(a, b *Summary) int { return 0 }
	}
	slices.SortFunc(match, func(a, b *Summary) int {
		c := cmp.Or(compare(a, b), cmp.Compare(a.Thread, b.Thread))
		if q.Desc {
			c = -c
		}
		return c
	})
	lo := min(max(q.Offset, 0), len(match))
	hi := len(match)
	if q.Limit > 0 {
		hi = min(lo+q.Limit, hi)
	}
	out := make([]Summary, 0, hi-lo)
	for _, s := range match[lo:hi] {
		out = append(out, s.Clone())
	}
	ix.mu.RUnlock()
	return Page{Summaries: out, Total: len(match), Seq: seq}
}
