package summaries

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/sys"
	"github.com/artifactr/artifactr/projections"
)

// Defaults of [Config].
const (
	DefaultBucket   = "thread_summaries"
	DefaultDurable  = "summaries"
	DefaultLeaseTTL = 15 * time.Second
	DefaultBatch    = 1000
)

// minMaxAckPending is the least MaxAckPending the projector asks of its
// durable consumer: natsstore's default, raised for larger batches.
const minMaxAckPending = 20_000

// Config configures a [Projector].
type Config struct {
	// Store is the store: the log, a durable consumer and buckets. Required.
	Store events.ReadModelStore
	// Bucket is the KV bucket of the summaries. Default DefaultBucket.
	Bucket string
	// Durable names the durable consumer feeding it. Default DefaultDurable.
	// With partitions each partition's projector has a consumer of that
	// name on its partition's stream: one name, so the NATS roles deny it
	// to clients with one subject whatever the partition count.
	Durable string
	// Partition is the partition whose stream the projector follows, from
	// 0 to the store's partition count - 1: 0 with one partition. Each
	// partition's stream has its own sequences, so each has its own
	// projector, checkpoint and durable consumer ([NewProjectors]).
	Partition int
	// Owner names this projector in the checkpoint. Default
	// host-pid-random. Two projectors must not share one.
	Owner string
	// LeaseTTL is how long the projector owns the read model without
	// writing its checkpoint; it writes at least every third of it. Another
	// projector takes over once it lapses. Default DefaultLeaseTTL.
	LeaseTTL time.Duration
	// Batch is the most events fetched and committed at once. Each batch
	// writes each summary it touched once, then the checkpoint. Default
	// DefaultBatch.
	Batch int
	// Logger logs. Default discards.
	Logger *slog.Logger
	// Now is the lease clock. Default time.Now.
	Now func() time.Time
	// Progress, if set, is called after each committed batch, on the
	// projector's goroutine.
	Progress func(Progress)
	// StrandedAfter, when positive, makes the projector report stranded
	// threads: [Summary.Unclaimed] for longer than it. Pass
	// runner.ConsumeBound, the runners' promise. Each is logged as a
	// warning and handed to Stranded, then again every StrandedAfter while
	// it stays so. Default 0: off.
	StrandedAfter time.Duration
	// Stranded, if set, is called with each stranded thread and the stored
	// time since which it has been unclaimed, on the projector's goroutine:
	// it must not block. serve counts it (artifactr_stranded_threads) and
	// has its runner claim the thread.
	Stranded func(thread string, since time.Time)
}

func (c *Config) setDefaults() error {
	if c.Store == nil {
		return errors.New("summaries: Config.Store is required")
	}
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.Durable == "" {
		c.Durable = DefaultDurable
	}
	if n := c.Store.Subjects().PartitionCount(); c.Partition < 0 || c.Partition >= n {
		return fmt.Errorf("summaries: Config.Partition %d is not 0 to %d", c.Partition, n-1)
	}
	if c.Owner == "" {
		c.Owner = sys.ProcessID()
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.Batch == 0 {
		c.Batch = DefaultBatch
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	switch {
	case c.LeaseTTL < 300*time.Millisecond:
		return fmt.Errorf("summaries: Config.LeaseTTL %s is under 300ms", c.LeaseTTL)
	case c.Batch < 1 || c.Batch > 50_000:
		return fmt.Errorf("summaries: Config.Batch %d is not 1 to 50000", c.Batch)
	case c.StrandedAfter < 0:
		return fmt.Errorf("summaries: Config.StrandedAfter %s is negative", c.StrandedAfter)
	}
	return nil
}

// Progress is reported after each committed batch.
type Progress struct {
	Partition  int    // the projector's partition
	Checkpoint uint64 // stream sequence applied up to, in its partition
	Events     uint64 // events applied since the projector started
}

// Stats counts what a projector did.
type Stats struct {
	Events    uint64 // events applied to a summary
	Skipped   uint64 // deliveries already applied: redeliveries, or at or below a summary's LastSeq
	Writes    uint64 // summaries written
	Conflicts uint64 // summary writes refused by compare-and-set, then resolved
	Resets    uint64 // times the consumer was reset: each session's start and each gap
	Batches   uint64 // batches committed
	Stranded  uint64 // stranded threads reported (Config.StrandedAfter)
}

// Projector keeps the thread summaries of one bucket up to date from a
// durable consumer on every event (DESIGN §5). See the package doc for its
// loop and guarantees. Its methods are safe for concurrent use, but a
// projector runs one loop at a time: call Run, CatchUp or Rebuild from one
// goroutine.
type Projector struct {
	cfg   Config
	store events.ReadModelStore
	stats struct {
		events, skipped, writes, conflicts, resets, batches, stranded atomic.Uint64
	}
	// hook, in tests, is called at each stage of a batch; an error ends
	// the session there, as a crash would.
	hook func(stage string) error
}

// Stages of a batch, for tests.
const (
	stageWritten      = "written"      // summaries written, checkpoint not yet
	stageCheckpointed = "checkpointed" // checkpoint written, not yet acked
)

// NewProjector returns a projector. It does no I/O.
func NewProjector(cfg Config) (*Projector, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	return &Projector{cfg: cfg, store: cfg.Store}, nil
}

// NewProjectors returns one projector per partition of cfg.Store, each
// with cfg and its own Partition: one with one partition. cfg.Partition is
// ignored.
func NewProjectors(cfg Config) ([]*Projector, error) {
	n := 1
	if cfg.Store != nil {
		n = cfg.Store.Subjects().PartitionCount()
	}
	ps := make([]*Projector, n)
	for i := range ps {
		c := cfg
		c.Partition = i
		p, err := NewProjector(c)
		if err != nil {
			return nil, err
		}
		ps[i] = p
	}
	return ps, nil
}

// Partition returns the partition the projector follows.
func (p *Projector) Partition() int { return p.cfg.Partition }

// Owner returns the name the projector owns the read model under.
func (p *Projector) Owner() string { return p.cfg.Owner }

// Stats returns the projector's counters.
func (p *Projector) Stats() Stats {
	return Stats{
		Events: p.stats.events.Load(), Skipped: p.stats.skipped.Load(), Writes: p.stats.writes.Load(),
		Conflicts: p.stats.conflicts.Load(), Resets: p.stats.resets.Load(), Batches: p.stats.batches.Load(),
		Stranded: p.stats.stranded.Load(),
	}
}

// Lag reads how far the read model is behind the stream. See [ReadLag].
func (p *Projector) Lag(ctx context.Context) (Lag, error) {
	return ReadPartitionLag(ctx, p.store, p.cfg.Bucket, p.cfg.Durable, p.cfg.Partition)
}

// Run feeds the read model until ctx ends, then releases it and returns
// nil. While another projector owns it, Run stands by and takes over when
// that one releases it or its lease lapses. Failures (a restarting server,
// a lost lease) end the current session; Run logs them and starts a new
// one, which resumes from the checkpoint. Only a configuration it cannot
// work with ends Run early, with an error wrapping
// events.ErrUnsafeConfig.
func (p *Projector) Run(ctx context.Context) error {
	failures := 0
	for {
		err := p.runOnce(ctx, 0, false)
		if ctx.Err() != nil {
			return nil
		}
		wait := p.cfg.LeaseTTL / 3
		switch {
		case errors.Is(err, events.ErrUnsafeConfig):
			return err
		case errors.Is(err, ErrOwned):
			failures = 0
			p.cfg.Logger.Debug("summaries: standing by", "err", err)
		default:
			failures++
			wait = min(100*time.Millisecond<<min(failures, 6), p.cfg.LeaseTTL/3)
			p.cfg.Logger.Warn("summaries: projector session ended; resuming from the checkpoint", "err", err, "retry_in", wait)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
	}
}

// CatchUp feeds the read model until its checkpoint reaches until (the
// last sequence of the projector's partition when 0), then releases it. It returns an error
// wrapping [ErrOwned] when another live projector owns the read model.
func (p *Projector) CatchUp(ctx context.Context, until uint64) error {
	if until == 0 {
		last, err := p.store.LastPartitionSeq(ctx, p.cfg.Partition)
		if err != nil {
			return err
		}
		if until = last; until == 0 {
			return nil
		}
	}
	return p.runOnce(ctx, until, false)
}

// runOnce acquires the read model, runs one session and releases it.
func (p *Projector) runOnce(ctx context.Context, until uint64, force bool) error {
	b, err := p.store.OpenBucket(ctx, p.cfg.Bucket, true)
	if err != nil {
		return err
	}
	own, err := p.acquire(ctx, b, force)
	if err != nil {
		return err
	}
	err = p.session(ctx, own, until)
	if !errors.Is(err, errLost) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		own.release(rctx)
		cancel()
	}
	return err
}

// entry is a cached summary and its revision in the bucket.
type entry struct {
	sum Summary
	rev uint64
}

// session is one owner's run of the loop: it resets the consumer to the
// checkpoint, then fetches, applies, writes and acks batch after batch.
type session struct {
	p       *Projector
	own     *owner
	d       events.DurableConsumer
	b       events.KVBucket
	cache   map[string]*entry // summaries as stored, by thread
	applied uint64            // every event up to it is applied and written
	// appliedAt is the stored time of the event at applied.
	appliedAt time.Time
	// unclaimed are the threads whose summary is Unclaimed, with StrandedAfter
	// set: only those, so a sweep costs what the threads nobody holds cost.
	unclaimed map[string]*unclaimedAt
	swept     time.Time // the last sweep of unclaimed
}

// unclaimedAt is when a thread became unclaimed, by the stored time of the
// event that made it so, and when it was last reported stranded.
type unclaimedAt struct {
	since, reported time.Time
}

// touched is what a batch did to one thread's summary.
type touched struct {
	base uint64            // its LastSeq before the batch
	envs []events.Envelope // the batch's events of the thread, applied
}

func (p *Projector) session(ctx context.Context, own *owner, until uint64) error {
	var filter string // every event: the one stream's, as before partitions
	if subj := p.store.Subjects(); subj.Partitioned() {
		filter = subj.PartitionAll(p.cfg.Partition)
	}
	d, err := p.store.OpenDurable(ctx, events.DurableConfig{
		Name:          p.cfg.Durable,
		Filter:        filter,
		MaxAckPending: max(minMaxAckPending, 2*p.cfg.Batch),
	})
	if err != nil {
		return err
	}
	s := &session{p: p, own: own, d: d, b: own.b, cache: map[string]*entry{}, applied: own.cp.Seq, unclaimed: map[string]*unclaimedAt{}}
	if err := s.reset(ctx); err != nil {
		return err
	}
	s.seedUnclaimed(ctx)
	wait := p.cfg.LeaseTTL / 6
	for until == 0 || s.applied < until {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !own.live() {
			return fmt.Errorf("%w: lease ran out before it was renewed", errLost)
		}
		if own.due() {
			if err := own.write(ctx); err != nil {
				return err
			}
		}
		ds, err := d.Fetch(ctx, p.cfg.Batch, wait)
		if err != nil {
			return err
		}
		if err := s.step(ctx, ds); err != nil {
			return err
		}
		s.sweep(len(ds) < p.cfg.Batch)
	}
	return nil
}

// seedUnclaimed finds the threads already unclaimed when the session
// starts, from the stored summaries: one scan of the bucket per session,
// so that a restart or a takeover does not forget a thread stranded
// before it. Since is their last activity, the latest it can be. A scan
// that fails is logged; the session goes on without it.
func (s *session) seedUnclaimed(ctx context.Context) {
	if s.p.cfg.StrandedAfter <= 0 {
		return
	}
	err := s.b.Scan(ctx, ">", func(e events.KVEntry) error {
		if events.ValidateThreadID(e.Key) != nil {
			return nil // the checkpoint
		}
		var st stored
		if json.Unmarshal(e.Value, &st) != nil || st.Epoch != s.own.cp.Epoch || st.Thread != e.Key {
			return nil
		}
		if st.Summary.Unclaimed() {
			s.unclaimed[e.Key] = &unclaimedAt{since: st.LastActivity}
		}
		return nil
	})
	if err != nil {
		s.p.cfg.Logger.Warn("summaries: cannot read the summaries for unclaimed threads; only those the session applies are watched", "err", err)
	}
}

// track keeps the unclaimed set up to date with sum, env just applied.
func (s *session) track(th string, sum *Summary, env *events.Envelope) {
	if s.p.cfg.StrandedAfter <= 0 {
		return
	}
	if !sum.Unclaimed() {
		delete(s.unclaimed, th)
	} else if s.unclaimed[th] == nil {
		s.unclaimed[th] = &unclaimedAt{since: env.Stored}
	}
}

// sweep reports the threads unclaimed for longer than StrandedAfter. It
// looks at the unclaimed threads only, and at most four times per
// StrandedAfter, so a projector of many threads, nearly all held or idle,
// pays nothing per thread. Once caught up (the last fetch came back short)
// it judges by its clock; while catching up, by the stored time of the last
// event it applied, so that a claim it has not read yet does not make a
// thread look stranded.
func (s *session) sweep(caughtUp bool) {
	after := s.p.cfg.StrandedAfter
	if after <= 0 || len(s.unclaimed) == 0 {
		return
	}
	now := s.p.cfg.Now()
	if now.Sub(s.swept) < after/4 {
		return
	}
	s.swept = now
	horizon := s.appliedAt
	if caughtUp {
		horizon = now
	}
	for th, u := range s.unclaimed {
		if horizon.Sub(u.since) <= after || now.Sub(u.reported) <= after {
			continue
		}
		u.reported = now
		s.p.stats.stranded.Add(1)
		s.p.cfg.Logger.Warn("summaries: thread stranded: a message pending, no run and no claim for longer than the bound; claiming it",
			"thread", th, "since", u.since, "for", horizon.Sub(u.since).Round(time.Millisecond), "bound", after)
		if f := s.p.cfg.Stranded; f != nil {
			f(th, u.since)
		}
	}
}

// reset makes the consumer deliver again from the event after the
// checkpoint: in order, whatever a previous owner left unacked.
func (s *session) reset(ctx context.Context) error {
	s.p.stats.resets.Add(1)
	return s.d.Reset(ctx, s.applied+1)
}

// step commits one fetched batch: the deliveries that continue the
// sequence from s.applied, in order. Older ones are redeliveries and are
// skipped. A gap means deliveries were lost on the way (they would come
// back later, out of order): the batch stops before it and the consumer is
// reset to the event after the last one applied.
func (s *session) step(ctx context.Context, ds []events.Delivery) error {
	var envs []events.Envelope
	next, last, gap := s.applied, -1, false
	for i := range ds {
		seq := ds[i].Env.Seq
		if seq <= next {
			s.p.stats.skipped.Add(1)
			continue
		}
		if seq != next+1 && !(ds[i].Env.GuardBefore && seq == next+2) {
			// A jump that no skipped guard explains (see
			// events.Envelope.GuardBefore).
			real, err := s.realGap(ctx, next+1, seq)
			if err != nil {
				return err
			}
			if !real {
				gap = true
				break
			}
		}
		envs, next, last = append(envs, ds[i].Env), seq, i
	}
	if len(envs) > 0 {
		if err := s.commit(ctx, envs, next); err != nil {
			return err
		}
		if err := s.d.Ack(ctx, ds[last]); err != nil {
			// The checkpoint, not the ack, is where a session resumes.
			s.p.cfg.Logger.Debug("summaries: ack failed", "seq", next, "err", err)
		}
	}
	if gap {
		s.p.cfg.Logger.Debug("summaries: delivery gap; resetting the consumer", "after", s.applied)
		return s.reset(ctx)
	}
	return nil
}

// realGap reports whether the stream has no event between from and seq, so
// that seq rightly follows from-1. The stream denies deletes, so this is
// only for streams with a history from before.
func (s *session) realGap(ctx context.Context, from, seq uint64) (bool, error) {
	first, ok, err := s.p.store.NextPartitionSeq(ctx, s.p.cfg.Partition, from)
	if err != nil {
		return false, err
	}
	return ok && first == seq, nil
}

// commit applies envs, the events after s.applied up to next, writes every
// summary they touched, then the checkpoint.
func (s *session) commit(ctx context.Context, envs []events.Envelope, next uint64) error {
	if err := s.load(ctx, envs); err != nil {
		return err
	}
	batch := map[string]*touched{}
	var order []string
	for i := range envs {
		env := &envs[i]
		if events.ValidateThreadID(env.Thread) != nil {
			s.p.stats.skipped.Add(1) // garbage on a subject of no thread
			continue
		}
		e := s.cache[env.Thread]
		if env.Seq <= e.sum.LastSeq {
			s.p.stats.skipped.Add(1) // applied by a session that ended before its checkpoint
			continue
		}
		t := batch[env.Thread]
		if t == nil {
			t = &touched{base: e.sum.LastSeq}
			batch[env.Thread] = t
			order = append(order, env.Thread)
		}
		// A fork by reference counts its source's history: read it once.
		if err := projections.ResolveFork(ctx, s.p.store, env); err != nil {
			return err
		}
		t.envs = append(t.envs, *env)
		e.sum.apply(env)
		s.track(env.Thread, &e.sum, env)
		s.p.stats.events.Add(1)
	}
	if err := s.write(ctx, batch, order); err != nil {
		return err
	}
	for _, th := range order { // a resolved conflict may have moved a summary on
		if e := s.cache[th]; e != nil && !e.sum.Unclaimed() {
			delete(s.unclaimed, th)
		}
	}
	if err := s.p.maybeHook(stageWritten); err != nil {
		return err
	}
	s.own.cp.Seq = next
	if err := s.own.write(ctx); err != nil {
		return err
	}
	s.applied, s.appliedAt = next, envs[len(envs)-1].Stored
	s.p.stats.batches.Add(1)
	if s.p.cfg.Progress != nil {
		s.p.cfg.Progress(Progress{Partition: s.p.cfg.Partition, Checkpoint: next, Events: s.p.stats.events.Load()})
	}
	return s.p.maybeHook(stageCheckpointed)
}

func (p *Projector) maybeHook(stage string) error {
	if p.hook == nil {
		return nil
	}
	return p.hook(stage)
}

// maxCached bounds the summaries a session keeps in memory. Past it the
// cache starts over: a miss costs one read of the bucket.
const maxCached = 100_000

// load fills the cache with the summaries of the threads of envs, reading
// the missing ones from the bucket concurrently.
func (s *session) load(ctx context.Context, envs []events.Envelope) error {
	if len(s.cache) > maxCached {
		s.cache = map[string]*entry{}
	}
	var miss []string
	seen := map[string]bool{}
	for i := range envs {
		th := envs[i].Thread
		if s.cache[th] == nil && !seen[th] && events.ValidateThreadID(th) == nil {
			seen[th] = true
			miss = append(miss, th)
		}
	}
	if len(miss) == 0 {
		return nil
	}
	got, found, err := s.b.GetMany(ctx, miss)
	if err != nil {
		return err
	}
	for i, th := range miss {
		e, err := s.decode(ctx, th, got[i], found[i])
		if err != nil {
			return err
		}
		s.cache[th] = e
	}
	return nil
}

// errSuperseded ends a session that finds a summary of a newer epoch: the
// read model was rebuilt while it ran, and what it cached is stale.
var errSuperseded = errors.New("summaries: read model rebuilt under this projector")

// decode reads a stored summary. One of an older epoch is a leftover and
// counts as absent; one of a newer epoch ends the session (errSuperseded).
// One that does not decode is folded again from the thread's events up to
// s.applied, which the checkpoint says it covered.
func (s *session) decode(ctx context.Context, th string, e events.KVEntry, found bool) (*entry, error) {
	if !found {
		return &entry{sum: Empty(th), rev: e.Revision}, nil
	}
	var st stored
	if err := json.Unmarshal(e.Value, &st); err != nil || st.Thread != th {
		s.p.cfg.Logger.Warn("summaries: unreadable summary; folding the thread again", "thread", th, "revision", e.Revision, "err", err)
		envs, err := s.p.store.Load(ctx, th, 1)
		if err == nil {
			err = projections.ResolveFirst(ctx, s.p.store, envs)
		}
		if err != nil {
			return nil, err
		}
		sum := Empty(th)
		for i := range envs {
			if envs[i].Seq <= s.applied {
				sum.apply(&envs[i])
			}
		}
		return &entry{sum: sum, rev: e.Revision}, nil
	}
	switch epoch := s.own.cp.Epoch; {
	case st.Epoch > epoch:
		return nil, fmt.Errorf("%w: %s is stored with epoch %d, this session's is %d", errSuperseded, th, st.Epoch, epoch)
	case st.Epoch < epoch:
		return &entry{sum: Empty(th), rev: e.Revision}, nil
	}
	return &entry{sum: st.Summary, rev: e.Revision}, nil
}

// write stores the batch's summaries, each by compare-and-set on its
// revision, and resolves the refused ones.
func (s *session) write(ctx context.Context, batch map[string]*touched, order []string) error {
	puts := make([]events.KVPut, 0, len(order))
	for _, th := range order {
		e := s.cache[th]
		data, err := s.marshal(&e.sum)
		if err != nil {
			return err
		}
		puts = append(puts, events.KVPut{Key: th, Value: data, Revision: e.rev})
	}
	revs, errs := s.b.PutMany(ctx, puts)
	for i, th := range order {
		switch err := errs[i]; {
		case err == nil:
			s.cache[th].rev = revs[i]
			s.p.stats.writes.Add(1)
		case errors.Is(err, events.ErrConflict):
			s.p.stats.conflicts.Add(1)
			if err := s.resolve(ctx, th, batch[th]); err != nil {
				return err
			}
		default:
			// Unknown outcome: the session ends and the next one reloads.
			return err
		}
	}
	return nil
}

func (s *session) marshal(sum *Summary) ([]byte, error) {
	sum.normalize()
	return json.Marshal(stored{Summary: *sum, Epoch: s.own.cp.Epoch})
}

// errRegressed ends a session that finds a summary of its own epoch older
// than the one it cached: only a hand-made write does that.
var errRegressed = errors.New("summaries: stored summary went back")

// resolve settles a refused write: the key moved on since it was read.
//   - Stored by another writer of this epoch: every such summary is the fold
//     of a prefix of the thread's events, so the batch's events after its
//     LastSeq are applied to it and it is written again.
//   - A leftover of an older epoch (a projector that did not know about a
//     rebuild wrote it), or nothing: the cached summary, which is complete,
//     replaces it.
//   - Of a newer epoch: this session is stale (errSuperseded, from decode).
func (s *session) resolve(ctx context.Context, th string, t *touched) error {
	for range 5 {
		got, found, err := s.b.Get(ctx, th)
		if err != nil {
			return err
		}
		cur, err := s.decode(ctx, th, got, found)
		if err != nil {
			return err
		}
		sum := s.cache[th].sum
		if cur.sum.LastSeq != 0 { // a summary of this epoch
			if cur.sum.LastSeq < t.base {
				return fmt.Errorf("%w: %s at seq %d in the bucket, %d here", errRegressed, th, cur.sum.LastSeq, t.base)
			}
			sum = cur.sum.Clone()
			for i := range t.envs {
				sum.apply(&t.envs[i])
			}
			if sum.LastSeq == cur.sum.LastSeq {
				s.cache[th] = cur // the stored one has all of ours
				return nil
			}
		}
		data, err := s.marshal(&sum)
		if err != nil {
			return err
		}
		rev, err := s.b.Put(ctx, th, data, cur.rev)
		if errors.Is(err, events.ErrConflict) {
			s.p.stats.conflicts.Add(1)
			continue
		}
		if err != nil {
			return err
		}
		s.cache[th] = &entry{sum: sum, rev: rev}
		s.p.stats.writes.Add(1)
		return nil
	}
	return fmt.Errorf("summaries: %s: writes kept conflicting; another projector is writing", th)
}
