package memstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// Fault is what an injected fault does to one write.
type Fault uint8

// The faults a [Config.Fault] hook can inject.
const (
	// NoFault lets the write through.
	NoFault Fault = iota
	// FailBefore refuses the write with an unavailable error; nothing is
	// written.
	FailBefore
	// LoseAck writes, then returns an unavailable error: the outcome is
	// unknown to the caller, as with a publish whose reply timed out.
	LoseAck
)

// Config configures a [Store] handle.
type Config struct {
	// Subjects names the stream's subjects; the zero value is threads.*.
	// Its RunFence chooses the RUNFENCE layout (markers on the run subject);
	// like a stream's layout it is the log's, so every handle on a [Log]
	// must say the same.
	Subjects events.Subjects
	// Now is this handle's clock, used for lease expiry and event times.
	// Handles with different clocks model skewed processes. Default time.Now.
	Now func() time.Time
	// MaxEventBytes limits an encoded event. Default events.DefaultMaxEventBytes.
	MaxEventBytes int
	// Fault, if set, is asked before each append, post and lease write.
	// op is "post", "append" or "lease"; subject is the written subject.
	Fault func(op, subject string) Fault
}

type record struct {
	seq     uint64
	subject string
	hdr     events.Header
	data    []byte
	stored  time.Time
}

type lease struct {
	value   *eventspb.Lease
	rev     uint64
	deleted bool
}

// Mode says in which order a [Log] applies a write's deduplication and its
// expected-sequence check. JetStream's order depends on the stream's
// replicas (NATS-NOTES, "Deduplication"); the two modes let tests run
// against either.
type Mode uint8

// The modes.
const (
	// Replicated deduplicates before it checks, as an R3 stream does: a
	// retry of a write that landed gets a duplicate ack, whatever its check
	// says now. It is the zero value.
	Replicated Mode = iota
	// Single checks before it deduplicates, as a single-server (R1) stream
	// does: a retry of a write that landed, whose check no longer holds, is
	// refused like a new write. Append then reads the subject back, as
	// natsstore does, and reports the write landed if its message id is on
	// the subject after the check's sequence.
	Single
)

func (m Mode) String() string {
	if m == Single {
		return "R1 (check, then dedupe)"
	}
	return "R3 (dedupe, then check)"
}

// DefaultDuplicateWindow is how long a [Log] remembers a message id by
// default: JetStream's default Duplicates.
const DefaultDuplicateWindow = 2 * time.Minute

// LogConfig configures a [Log].
type LogConfig struct {
	// Mode orders deduplication and checks. Default Replicated.
	Mode Mode
	// DuplicateWindow is how long a message id is remembered, counted from
	// when its write was stored, by Now; a repeat does not extend it.
	// Default DefaultDuplicateWindow; negative remembers ids for ever.
	DuplicateWindow time.Duration
	// Now is the log's clock, the server's: it stamps stored times, ages
	// message ids and times durable consumers' ack waits. Default time.Now.
	Now func() time.Time
	// AfterFunc runs f after d, for the server's expiry of a session not
	// renewed in time. Default time.AfterFunc; a simulation on a simulated
	// clock passes its own, so that sessions lapse in simulated time.
	AfterFunc func(d time.Duration, f func())
	// SessionID, if set, draws the random part of each new session's id
	// (a random hex string by default), so that a simulation that hashes
	// session ids replays exactly.
	SessionID func() string
}

// Log is an in-memory set of streams shared by any number of [Store]
// handles, as JetStream streams are shared by connections. It keeps
// everything forever.
//
// Each handle's partitions are the log's streams, named by their subject
// prefix: threads for one partition, threads.0 to threads.3 for four, as
// natsstore's streams hold threads.> and threads.<p>.>. A subject is in
// the stream of its longest such prefix (others in a stream named ""),
// and each stream numbers its records from 1, so with partitions sequences
// are per partition, as in natsstore.
type Log struct {
	cfg     LogConfig
	mu      sync.Mutex         // protects the fields below
	streams map[string]*stream // by subject prefix
	n       int                // records in every stream
	msgIDs  map[msgKey]msgIDAt // Nats-Msg-Id -> where and when it was stored
	// postIDs are the message ids Post stored, <thread>:<message id> ->
	// seq, forever: a message id is one message in its thread whatever the
	// window (natsstore keeps them in a bucket).
	postIDs map[string]uint64
	// firsts is the first-post index (events.FirstPosts), <thread>:<message
	// id> -> the sequence its entry names, written once.
	firsts   map[string]uint64
	leases   map[string]*lease
	parts    map[int]*lease // partition leases, apart from the watched keys
	leaseRev uint64
	feed     leaseFeed     // lease changes, for watches
	notify   chan struct{} // closed and replaced on every write
	rm       readModels    // durable consumers, buckets and snapshots
	now      func() time.Time
}

// stream is one stream of a [Log].
type stream struct {
	recs []record
	last map[string]uint64 // subject -> last seq
}

// msgKey is a message id in its stream: JetStream deduplicates per stream.
type msgKey struct{ stream, id string }

// streamOfLocked is the stream subject is stored in: its longest prefix
// that names a stream.
func (l *Log) streamOfLocked(subject string) string {
	for i := strings.LastIndexByte(subject, '.'); i > 0; i = strings.LastIndexByte(subject[:i], '.') {
		if _, ok := l.streams[subject[:i]]; ok {
			return subject[:i]
		}
	}
	return ""
}

// streamLocked returns stream key, made on first use.
func (l *Log) streamLocked(key string) *stream {
	st := l.streams[key]
	if st == nil {
		st = &stream{last: make(map[string]uint64)}
		l.streams[key] = st
	}
	return st
}

// msgIDAt is a stored write's sequence and time, for deduplication.
type msgIDAt struct {
	seq    uint64
	stored time.Time
}

// NewLog returns an empty log that deduplicates before it checks, with the
// default window, and stamps stored times by time.Now.
func NewLog() *Log { return NewLogWith(LogConfig{}) }

// NewLogWith returns an empty log configured by cfg.
func NewLogWith(cfg LogConfig) *Log {
	if cfg.DuplicateWindow == 0 {
		cfg.DuplicateWindow = DefaultDuplicateWindow
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.AfterFunc == nil {
		cfg.AfterFunc = func(d time.Duration, f func()) { time.AfterFunc(d, f) }
	}
	return &Log{
		cfg:     cfg,
		streams: make(map[string]*stream),
		msgIDs:  make(map[msgKey]msgIDAt),
		postIDs: make(map[string]uint64),
		firsts:  make(map[string]uint64),
		leases:  make(map[string]*lease),
		notify:  make(chan struct{}),
		now:     cfg.Now,
	}
}

// Mode returns the log's mode.
func (l *Log) Mode() Mode { return l.cfg.Mode }

// duplicateLocked returns the sequence of the write stored with message id
// id within the window, if there is one.
func (l *Log) duplicateLocked(key string, id string) (uint64, bool) {
	if id == "" {
		return 0, false
	}
	k := msgKey{key, id}
	at, ok := l.msgIDs[k]
	if !ok {
		return 0, false
	}
	if w := l.cfg.DuplicateWindow; w > 0 && l.now().Sub(at.stored) >= w {
		delete(l.msgIDs, k) // the window passed: the id is forgotten
		return 0, false
	}
	return at.seq, true
}

// Store is a handle on a [Log] with its own clock and faults. It implements
// [events.Store] with the same fence semantics as the JetStream store.
type Store struct {
	log *Log
	cfg Config
}

var _ events.Store = (*Store)(nil)

// Open returns a handle on l.
func (l *Log) Open(cfg Config) *Store {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxEventBytes <= 0 {
		cfg.MaxEventBytes = events.DefaultMaxEventBytes
	}
	s := &Store{log: l, cfg: cfg}
	l.mu.Lock()
	for p := range cfg.Subjects.PartitionCount() {
		l.streamLocked(s.partKey(p))
	}
	l.mu.Unlock()
	return s
}

// New returns a handle on a fresh log.
func New(cfg Config) *Store { return NewLog().Open(cfg) }

// MaxEventBytes returns the limit on an encoded event this handle enforces.
func (s *Store) MaxEventBytes() int { return s.cfg.MaxEventBytes }

// Subjects returns the subjects the handle writes, from its Config.
func (s *Store) Subjects() events.Subjects { return s.cfg.Subjects }

// Log returns the log the handle writes to.
func (s *Store) Log() *Log { return s.log }

// PublishRaw appends data to subject with no checks, as a buggy or forged
// writer would, and returns its sequence.
func (l *Log) PublishRaw(subject string, h events.Header, data []byte) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.appendLocked(subject, h, data)
}

// Len returns the number of records in the log, in every stream: with one
// partition, its last sequence.
func (l *Log) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n
}

// recs returns stream key's records. Appends never change the records up
// to the returned length, so they can be read without the lock.
func (l *Log) recs(key string) []record {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.streamLocked(key).recs
}

func (l *Log) appendLocked(subject string, h events.Header, data []byte) uint64 {
	key := l.streamOfLocked(subject)
	st := l.streamLocked(key)
	seq := uint64(len(st.recs)) + 1
	now := l.now()
	st.recs = append(st.recs, record{seq: seq, subject: subject, hdr: h, data: data, stored: now})
	st.last[subject] = seq
	l.n++
	if id := h.Get(events.HeaderMsgID); id != "" {
		l.msgIDs[msgKey{key, id}] = msgIDAt{seq: seq, stored: now}
	}
	close(l.notify)
	l.notify = make(chan struct{})
	return seq
}

func (s *Store) fault(op, subject string) Fault {
	if s.cfg.Fault == nil {
		return NoFault
	}
	return s.cfg.Fault(op, subject)
}

func unavailable(op string, f Fault) error {
	if f == LoseAck {
		return fmt.Errorf("%w: memstore: %s ack lost (injected); outcome unknown", events.ErrUnavailable, op)
	}
	return fmt.Errorf("%w: memstore: %s failed (injected); nothing written", events.ErrUnavailable, op)
}

// Post implements [events.Poster].
func (s *Store) Post(ctx context.Context, thread string, m *eventspb.MessagePosted, opts ...events.PostOption) (events.Ack, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return events.Ack{}, err
	}
	if m == nil {
		return events.Ack{}, fmt.Errorf("%w: memstore: nil message", events.ErrInvalidEvent)
	}
	if id := m.GetMessageId(); id != "" {
		if err := events.ValidateMessageID(id); err != nil {
			return events.Ack{}, err
		}
	}
	po, err := events.ApplyPostOptions(opts)
	if err != nil {
		return events.Ack{}, err
	}
	if _, err := events.ParseStrategy(m.GetStrategy()); err != nil {
		return events.Ack{}, err
	}
	if err := ctx.Err(); err != nil {
		return events.Ack{}, err
	}
	m = proto.Clone(m).(*eventspb.MessagePosted)
	if m.MessageId == "" {
		m.MessageId = newID()
	}
	ev := &eventspb.Event{Thread: thread, Time: timestamppb.New(s.cfg.Now()), Body: &eventspb.Event_MessagePosted{MessagePosted: m}}
	data, h, err := s.encode(ev)
	if err != nil {
		return events.Ack{}, err
	}
	po.SetHeaders(h)
	id := thread + ":" + m.MessageId
	h[events.HeaderMsgID] = []string{id}
	subject := s.cfg.Subjects.Thread(thread, events.KindPosted)
	var checkSubj string
	if po.ExpectRun {
		checkSubj = s.cfg.Subjects.Thread(thread, events.KindRun)
		h[events.HeaderExpectSeq] = []string{fmt.Sprint(po.ExpectRunSeq)}
		h[events.HeaderExpectSubj] = []string{checkSubj}
	}
	ack, err := s.write(opPost, subject, h, data, check{subject: checkSubj, want: po.ExpectRunSeq})
	if err != nil && isRefusal(err) {
		// An earlier Post of this id may have landed (R1: the check
		// comes before deduplication).
		if seq, ok := s.log.landed(subject, id, 0); ok {
			ack, err = events.Ack{Seq: seq, Duplicate: true}, nil
		} else {
			return events.Ack{}, fmt.Errorf("%w: %w", err, events.ErrConflict)
		}
	}
	if err == nil && ack.Duplicate {
		if err := s.checkRepost(thread, m, ack.Seq); err != nil {
			return events.Ack{}, err
		}
	}
	return ack, err
}

// Append implements [events.Appender].
//
// Under the RUNFENCE layout (Config.Subjects.RunFence) it follows
// natsstore: markers and releases go to the run subject, a guarded fence
// is one compare-and-set on the run subject expecting RunSeq, refused with
// [events.ErrThreadBusy] when a marker landed after RunSeq and with
// [events.ErrRunMoved] and [events.ErrConflict] otherwise, and an
// unguarded fence is refused with [events.ErrInvalidEvent].
func (s *Store) Append(ctx context.Context, ev *eventspb.Event, chk events.Check, opts ...events.AppendOption) (events.Ack, error) {
	o, err := s.cfg.Subjects.CheckAppend(ev, chk, opts)
	if err != nil {
		return events.Ack{}, err
	}
	if err := ctx.Err(); err != nil {
		return events.Ack{}, err
	}
	if ev.Time == nil {
		ev = proto.Clone(ev).(*eventspb.Event)
		ev.Time = timestamppb.New(s.cfg.Now())
	}
	data, h, err := s.encode(ev)
	if err != nil {
		return events.Ack{}, err
	}
	id := o.MsgID
	if id == "" {
		id = ev.GetThread() + ":" + newID()
	}
	h[events.HeaderMsgID] = []string{id}
	subject := s.cfg.Subjects.Thread(ev.GetThread(), s.cfg.Subjects.KindOf(events.TypeOf(ev)))
	if chk.Mode == events.CheckFence && s.cfg.Subjects.RunFence {
		return s.appendRunFenced(ev, subject, h, data, chk.RunSeq, id, o.MsgID != "")
	}
	var checkSubj string
	switch chk.Mode {
	case events.CheckSubject:
		checkSubj = subject
		h[events.HeaderExpectSeq] = []string{fmt.Sprint(chk.Seq)}
	case events.CheckFence:
		checkSubj = s.cfg.Subjects.Thread(ev.GetThread(), events.KindClaim)
		h[events.HeaderExpectSeq] = []string{fmt.Sprint(chk.Seq)}
		h[events.HeaderExpectSubj] = []string{checkSubj}
	}
	c := check{subject: checkSubj, want: chk.Seq}
	if chk.Guarded {
		// memstore always guards: under its lock the run subject's
		// compare is as cheap as the fence's (natsstore: GuardMode).
		c.guard, c.guardWant = subject, chk.RunSeq
	}
	ack, err := s.write("append", subject, h, data, c)
	if err != nil && isRefusal(err) && o.MsgID != "" {
		// The caller's id may have landed before (a retry after a lost
		// ack): read the subject back, as natsstore does.
		if seq, ok := s.log.landed(subject, id, chk.Seq); ok {
			return events.Ack{Seq: seq, Duplicate: true}, nil
		}
	}
	if err != nil && isRefusal(err) && err.(*errWrongLast).subject == c.guard {
		// The fence held; the run subject moved (see events.ErrRunMoved).
		return ack, fmt.Errorf("%w: %w: %w", err, events.ErrConflict, events.ErrRunMoved)
	}
	if err != nil && checkSubj != "" && isRefusal(err) && chk.Mode == events.CheckFence {
		return ack, fmt.Errorf("%w: %w", err, events.ErrThreadBusy)
	}
	if err != nil && isRefusal(err) {
		return ack, fmt.Errorf("%w: %w", err, events.ErrConflict)
	}
	return ack, err
}

// appendRunFenced writes a consuming event under RUNFENCE: one
// compare-and-set on its run subject expecting k, the holder's K.
func (s *Store) appendRunFenced(ev *eventspb.Event, subject string, h events.Header, data []byte, k uint64, id string, callersID bool) (events.Ack, error) {
	h[events.HeaderExpectSeq] = []string{fmt.Sprint(k)}
	ack, err := s.write("append", subject, h, data, check{subject: subject, want: k})
	if err == nil || !isRefusal(err) {
		return ack, err
	}
	if callersID {
		// A retry after a lost ack: read the subject back, as natsstore.
		if seq, ok := s.log.landed(subject, id, k); ok {
			return events.Ack{Seq: seq, Duplicate: true}, nil
		}
	}
	if seq, ok := s.log.markerAfter(subject, k); ok {
		return events.Ack{}, fmt.Errorf("%w: a claim marker or release landed at %d: %w", err, seq, events.ErrThreadBusy)
	}
	return events.Ack{}, fmt.Errorf("%w: %w: %w", err, events.ErrConflict, events.ErrRunMoved)
}

// markerAfter returns the sequence of the first thread_claimed or
// thread_released on subject after sequence after, if there is one. A
// record whose type header or body says marker counts, as in natsstore:
// busy is the safe answer, as the holder then stops writing.
func (l *Log) markerAfter(subject string, after uint64) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	recs := l.streamLocked(l.streamOfLocked(subject)).recs
	for i := after; i < uint64(len(recs)); i++ {
		r := recs[i]
		if r.subject != subject {
			continue
		}
		if events.Type(r.hdr.Get(events.HeaderType)).Marker() {
			return r.seq, true
		}
		var ev eventspb.Event
		if proto.Unmarshal(r.data, &ev) == nil && events.TypeOf(&ev).Marker() {
			return r.seq, true
		}
	}
	return 0, false
}

// landed returns the sequence of the write with message id id on subject
// after sequence after, if there is one.
func (l *Log) landed(subject, id string, after uint64) (uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	recs := l.streamLocked(l.streamOfLocked(subject)).recs
	for i := after; i < uint64(len(recs)); i++ {
		if r := recs[i]; r.subject == subject && r.hdr.Get(events.HeaderMsgID) == id {
			return r.seq, true
		}
	}
	return 0, false
}

// errWrongLast mirrors JetStream's 10071: the check failed, nothing written.
type errWrongLast struct {
	subject   string
	want, got uint64
}

func (e *errWrongLast) Error() string {
	return fmt.Sprintf("memstore: wrong last sequence on %s: %d (expected %d)", e.subject, e.got, e.want)
}

func isRefusal(err error) bool {
	_, ok := err.(*errWrongLast)
	return ok
}

// opPost is the op of a Post's write.
const opPost = "post"

// check is what a write expects: the last sequence of subject is want
// (no check when subject is ""), and, for a guarded append, the last
// sequence of guard is guardWant. The fence is checked first, so a write
// both checks refuse is refused by the fence, as natsstore reports it.
type check struct {
	subject   string
	want      uint64
	guard     string
	guardWant uint64
}

func (s *Store) write(op, subject string, h events.Header, data []byte, c check) (events.Ack, error) {
	f := s.fault(op, subject)
	if f == FailBefore {
		return events.Ack{}, unavailable(op, f)
	}
	l := s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	id := h.Get(events.HeaderMsgID)
	key := l.streamOfLocked(subject)
	st := l.streamLocked(key)
	if op == opPost {
		// A post's id is looked up first and forever, as natsstore's id
		// key is read before it publishes.
		if seq, ok := l.postIDs[id]; ok {
			return events.Ack{Seq: seq, Duplicate: true}, nil
		}
	}
	// A message id stored within the window means the write landed before;
	// the check it carried then held, so this is the same write, not a new
	// one. A replicated stream looks for it first, a single server only
	// once the check passed.
	if l.cfg.Mode == Replicated {
		if seq, ok := l.duplicateLocked(key, id); ok {
			return events.Ack{Seq: seq, Duplicate: true}, nil
		}
	}
	if c.subject != "" {
		if got := st.last[c.subject]; got != c.want {
			return events.Ack{}, &errWrongLast{subject: c.subject, want: c.want, got: got}
		}
	}
	if c.guard != "" {
		if got := st.last[c.guard]; got != c.guardWant {
			return events.Ack{}, &errWrongLast{subject: c.guard, want: c.guardWant, got: got}
		}
	}
	if seq, ok := l.duplicateLocked(key, id); ok {
		return events.Ack{Seq: seq, Duplicate: true}, nil
	}
	seq := l.appendLocked(subject, h, data)
	if op == opPost {
		l.postIDs[id] = seq
	}
	if f == LoseAck {
		return events.Ack{}, unavailable(op, f)
	}
	return events.Ack{Seq: seq}, nil
}

func (s *Store) encode(ev *eventspb.Event) ([]byte, events.Header, error) {
	data, h, err := events.Encode(ev)
	if err != nil {
		return nil, nil, err
	}
	if len(data) > s.cfg.MaxEventBytes {
		return nil, nil, fmt.Errorf("%w: %s event of %d bytes exceeds the %d-byte limit", events.ErrTooLarge, events.TypeOf(ev), len(data), s.cfg.MaxEventBytes)
	}
	return data, h, nil
}

// Load implements [events.Reader].
func (s *Store) Load(ctx context.Context, thread string, from uint64) ([]events.Envelope, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	filter := s.cfg.Subjects.ThreadAll(thread)
	recs := s.log.recs(s.threadKey(thread))
	var out []events.Envelope
	if from == 0 {
		from = 1
	}
	for i := from - 1; i < uint64(len(recs)); i++ {
		if r := recs[i]; subjectMatch(filter, r.subject) {
			out = append(out, s.decode(r))
		}
	}
	return out, nil
}

func (s *Store) decode(r record) events.Envelope {
	return events.Decode(s.cfg.Subjects, r.subject, r.seq, r.stored, r.hdr, r.data)
}

// LastSeq implements [events.Reader].
func (s *Store) LastSeq(ctx context.Context, thread string, k events.Kind) (uint64, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	subj := s.cfg.Subjects.Thread(thread, k)
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	return s.log.streamLocked(s.log.streamOfLocked(subj)).last[subj], nil
}

// Threads implements [events.Reader].
func (s *Store) Threads(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	var out []string
	for p := range s.cfg.Subjects.PartitionCount() {
		for subj := range s.log.streamLocked(s.partKey(p)).last {
			if t, k, ok := s.cfg.Subjects.Parse(subj); ok && k == events.KindPosted {
				out = append(out, t)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// PartitionThreads implements [events.PartitionReader].
func (s *Store) PartitionThreads(ctx context.Context, p int) ([]string, error) {
	if err := s.checkPartition(ctx, p); err != nil {
		return nil, err
	}
	s.log.mu.Lock()
	defer s.log.mu.Unlock()
	var out []string
	for subj := range s.log.streamLocked(s.partKey(p)).last {
		if t, k, ok := s.cfg.Subjects.Parse(subj); ok && k == events.KindPosted {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (s *Store) checkPartition(ctx context.Context, p int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if n := s.cfg.Subjects.PartitionCount(); p < 0 || p >= n {
		return fmt.Errorf("memstore: %w: no partition %d of %d", events.ErrLayout, p, n)
	}
	return nil
}

// Tail implements [events.Reader]. With partitions, filter must lie within
// one partition, as in natsstore.
func (s *Store) Tail(ctx context.Context, filter string, from uint64) (events.Tail, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key, err := s.filterKey("tail", filter)
	if err != nil {
		return nil, err
	}
	next := from
	if next == 0 {
		next = uint64(len(s.log.recs(key))) + 1
	}
	return &tail{s: s, key: key, filter: filter, next: next, stop: make(chan struct{})}, nil
}

type tail struct {
	s        *Store
	key      string // the stream filter is in
	filter   string
	next     uint64
	stopOnce sync.Once
	stop     chan struct{}
}

func (t *tail) Next(ctx context.Context) (events.Envelope, error) {
	l := t.s.log
	for {
		l.mu.Lock()
		recs := l.streamLocked(t.key).recs
		for t.next <= uint64(len(recs)) {
			r := recs[t.next-1]
			t.next++
			if subjectMatch(t.filter, r.subject) {
				l.mu.Unlock()
				return t.s.decode(r), nil
			}
		}
		wait := l.notify
		l.mu.Unlock()
		select {
		case <-wait:
		case <-t.stop:
			return events.Envelope{}, events.ErrClosed
		case <-ctx.Done():
			return events.Envelope{}, ctx.Err()
		}
	}
}

func (t *tail) Stop() { t.stopOnce.Do(func() { close(t.stop) }) }

// Close implements [events.Store]. The log stays readable by other handles.
func (s *Store) Close() error { return nil }

// subjectMatch reports whether subject matches a NATS filter with * and >.
func subjectMatch(filter, subject string) bool {
	for {
		ft, frest, fmore := strings.Cut(filter, ".")
		st, srest, smore := strings.Cut(subject, ".")
		switch {
		case ft == ">":
			return true
		case ft != "*" && ft != st:
			return false
		case !fmore || !smore:
			return fmore == smore
		}
		filter, subject = frest, srest
	}
}

// checkRepost returns an error wrapping [events.ErrConflict] when the post
// stored at seq, which m's id duplicates, has another text or author, as
// natsstore does.
func (s *Store) checkRepost(thread string, m *eventspb.MessagePosted, seq uint64) error {
	r := s.log.recs(s.threadKey(thread))[seq-1]
	var ev eventspb.Event
	if err := proto.Unmarshal(r.data, &ev); err == nil {
		if old := ev.GetMessagePosted(); old != nil && old.GetText() == m.GetText() && old.GetAuthor() == m.GetAuthor() {
			return nil
		}
	}
	return fmt.Errorf("%w: message id %q was posted before (seq %d) with another text or author; the new one was not written",
		events.ErrConflict, m.GetMessageId(), seq)
}

// partKey is partition p's stream.
func (s *Store) partKey(p int) string {
	return strings.TrimSuffix(s.cfg.Subjects.PartitionAll(p), ".>")
}

// threadKey is the stream of thread's partition.
func (s *Store) threadKey(thread string) string {
	return s.partKey(s.cfg.Subjects.PartitionOf(thread))
}

// filterKey is the stream filter is in, or an error wrapping
// [events.ErrLayout] when it spans several partitions, as in natsstore.
func (s *Store) filterKey(what, filter string) (string, error) {
	p, ok := s.cfg.Subjects.FilterPartition(filter)
	if !ok {
		return "", fmt.Errorf("memstore: %s: %w: filter %q is not within one of the %d partitions; read each partition's filter (events.Subjects.PartitionAll)",
			what, events.ErrLayout, filter, s.cfg.Subjects.PartitionCount())
	}
	return s.partKey(p), nil
}

// onePartition refuses a whole-log call that has no meaning across
// partitions, each with its own sequences.
func (s *Store) onePartition(what string) error {
	if s.cfg.Subjects.Partitioned() {
		return fmt.Errorf("memstore: %s: %w: the log has %d partitions, each with its own sequences; ask one (LastPartitionSeq)",
			what, events.ErrLayout, s.cfg.Subjects.PartitionCount())
	}
	return nil
}
