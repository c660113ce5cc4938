package natsstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// DefaultFirstPostBucket is the bucket of the first-post index
// ([events.FirstPosts]): one entry <thread>.<message id> per id, naming the
// sequence of the thread's first post of it, written once.
const DefaultFirstPostBucket = "message_firsts"

// FirstPostBucketOf is the default first-post bucket of stream:
// DefaultFirstPostBucket for DefaultStream, message_firsts_<stream> for
// any other, as the sequences are the stream's.
func FirstPostBucketOf(stream string) string {
	if stream == DefaultStream {
		return DefaultFirstPostBucket
	}
	return DefaultFirstPostBucket + "_" + stream
}

// firstPosts is the first-post bucket's state, checked on first use.
type firstPosts struct {
	mu sync.Mutex // protects the fields below
	// ok: the bucket's stream is there; missing: it was not when last
	// looked for (each use looks again), and the warning was logged once.
	ok, missing bool
	// direct: the stream has one replica and direct gets, so its one
	// server answers a direct get with every write acked before it: a
	// lookup costs a direct get, not a JetStream API request.
	direct bool
	// denied: the user may not read or write the index (a roles file from
	// before it); the store answers 0, "cannot say", as with no bucket.
	denied bool
}

// firstDenied reports whether err, a failed request to subject, was refused
// for want of permission; the store then stops using the index, and says
// so once.
func (s *Store) firstDenied(subject string, err error) bool {
	derr := s.publishDenied(subject)
	if derr == nil {
		return false
	}
	s.firsts.mu.Lock()
	defer s.firsts.mu.Unlock()
	if !s.firsts.denied {
		s.firsts.denied = true
		s.cfg.Logger.Warn("natsstore: the user may not use the first-post index; runners remember every message id of the threads they hold (regenerate the roles: artifactr serve --auth, examples/nats/roles.conf)",
			"bucket", s.cfg.FirstPostBucket, "err", derr, "request_err", err)
	}
	return true
}

// firstUsable reports whether the index may be used: its stream is there
// and the user may use it.
func (s *Store) firstUsable(ctx context.Context) (bool, error) {
	s.firsts.mu.Lock()
	denied := s.firsts.denied
	s.firsts.mu.Unlock()
	if denied {
		return false, nil
	}
	return s.ensureFirstPosts(ctx, false)
}

// firstStream is the first-post bucket's stream: KV_<bucket>, so that KV
// tools can list it.
func (s *Store) firstStream() string { return "KV_" + s.cfg.FirstPostBucket }

// firstSubject is the subject of (thread, id)'s entry.
func (s *Store) firstSubject(thread, id string) string {
	return s.api.kvPublish(s.cfg.FirstPostBucket) + thread + "." + id
}

// firstPostConfig is the bucket's stream: one message per subject, and the
// server refuses a second (DiscardNewPerSubject), a delete marker, a purge
// or a rollup, whoever sends it. An entry is written once, forever.
func (s *Store) firstPostConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:                 s.firstStream(),
		Description:          "artifactr first posts: one entry per (thread, message id) naming its first post, written once",
		Subjects:             []string{"$KV." + s.cfg.FirstPostBucket + ".>"},
		Storage:              jetstream.FileStorage,
		Replicas:             s.cfg.Replicas,
		MaxMsgsPerSubject:    1,
		Discard:              jetstream.DiscardNew,
		DiscardNewPerSubject: true,
		DenyDelete:           true,
		DenyPurge:            true,
		AllowRollup:          false,
		AllowDirect:          true,
		MaxMsgs:              -1,
		MaxBytes:             -1,
		MaxMsgSize:           256, // a sequence, and the check's header
	}
}

// ensureFirstPosts creates the first-post bucket's stream when create is
// set and it is missing. It reports whether the stream is there.
func (s *Store) ensureFirstPosts(ctx context.Context, create bool) (bool, error) {
	s.firsts.mu.Lock()
	defer s.firsts.mu.Unlock()
	if s.firsts.ok {
		return true, nil
	}
	st, err := s.js.Stream(ctx, s.firstStream())
	if errors.Is(err, jetstream.ErrStreamNotFound) && create {
		st, err = s.js.CreateStream(ctx, s.firstPostConfig())
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			st, err = s.js.Stream(ctx, s.firstStream())
		}
	}
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		if !s.firsts.missing {
			s.firsts.missing = true
			s.cfg.Logger.Warn("natsstore: no first-post bucket; runners remember every message id of the threads they hold (run artifactr init)",
				"bucket", s.cfg.FirstPostBucket)
		}
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c := st.CachedInfo().Config
	s.firsts.ok, s.firsts.direct = true, c.Replicas <= 1 && c.AllowDirect
	return true, nil
}

// firstEntry reads (thread, id)'s entry: its value, or found false.
func (s *Store) firstEntry(ctx context.Context, thread, id string) (value []byte, found bool, err error) {
	subj := s.firstSubject(thread, id)
	s.firsts.mu.Lock()
	direct := s.firsts.direct
	s.firsts.mu.Unlock()
	if !direct {
		e, err := s.getMsg(ctx, s.firstStream(), msgGetRequest{LastFor: subj})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return nil, false, nil
		}
		if err != nil && s.firstDenied(s.api.subject("STREAM.MSG.GET."+s.firstStream()), err) {
			return nil, false, fmt.Errorf("%w: %w", ErrPermissionDenied, err)
		}
		if err != nil {
			return nil, false, err
		}
		return e.Data, true, nil
	}
	get := s.api.subject("DIRECT.GET." + s.firstStream() + "." + subj)
	m, err := s.nc.RequestWithContext(ctx, get, nil)
	if err != nil && s.firstDenied(get, err) {
		return nil, false, fmt.Errorf("%w: %w", ErrPermissionDenied, err)
	}
	if err != nil {
		return nil, false, err
	}
	switch code := m.Header.Get(hdrStatus); {
	case code == "404":
		return nil, false, nil
	case code != "":
		return nil, false, fmt.Errorf("direct get from %s: status %s %s", s.firstStream(), code, m.Header.Get(hdrDescr))
	}
	return m.Data, true, nil
}

var _ events.FirstPosts = (*Store)(nil)

// FirstPost implements [events.FirstPosts]. The entry is created first,
// expecting none on its subject: one write for a new id, the common case.
// Only when there is one is it read, from the stream's leader, and an
// entry that names another post is believed only when the log has a post
// of the id there. With no bucket (a deployment from before it, or a role
// that may not read it) it answers 0.
func (s *Store) FirstPost(ctx context.Context, thread, id string, seq uint64) (uint64, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return 0, err
	}
	if err := events.ValidateMessageID(id); err != nil {
		return 0, err
	}
	if err := s.checkOpen(); err != nil {
		return 0, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if ok, err := s.firstUsable(ctx); err != nil || !ok {
		if err != nil && !s.firstDenied(s.api.subject("STREAM.INFO."+s.firstStream()), err) {
			return 0, unavailable("open the first-post bucket", err)
		}
		return 0, nil
	}
	subj := s.firstSubject(thread, id)
	m := nats.NewMsg(subj)
	m.Data = strconv.AppendUint(nil, seq, 10)
	_, err := s.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(0))
	if err == nil {
		return seq, nil
	}
	if c := apiCode(err); c != jetstream.JSErrCodeStreamWrongLastSequence && c != jetstream.JSErrCodeStreamWrongLastSequenceConstant {
		if s.firstDenied(subj, err) {
			return 0, nil
		}
		return 0, unavailable(fmt.Sprintf("create the first-post entry of %s %s", thread, id), err)
	}
	value, found, err := s.firstEntry(ctx, thread, id)
	if err == nil && !found {
		err = errors.New("no entry, though its create was refused")
	}
	if errors.Is(err, ErrPermissionDenied) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable(fmt.Sprintf("read the first-post entry of %s %s", thread, id), err)
	}
	return s.checkFirstPost(ctx, thread, id, seq, value)
}

var _ events.FirstPostLookup = (*Store)(nil)

// LookupFirstPost implements [events.FirstPostLookup]: one read from the
// stream's leader, and a second to check an entry naming another post.
func (s *Store) LookupFirstPost(ctx context.Context, thread, id string, seq uint64) (uint64, bool, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return 0, false, err
	}
	if err := events.ValidateMessageID(id); err != nil {
		return 0, false, err
	}
	if err := s.checkOpen(); err != nil {
		return 0, false, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if ok, err := s.firstUsable(ctx); err != nil || !ok {
		if err != nil && !s.firstDenied(s.api.subject("STREAM.INFO."+s.firstStream()), err) {
			return 0, false, unavailable("open the first-post bucket", err)
		}
		return 0, true, nil // no index: it cannot say, and nothing is to be written
	}
	value, found, err := s.firstEntry(ctx, thread, id)
	if errors.Is(err, ErrPermissionDenied) {
		return 0, true, nil
	}
	if err != nil {
		return 0, false, unavailable(fmt.Sprintf("read the first-post entry of %s %s", thread, id), err)
	}
	if !found {
		return 0, false, nil
	}
	first, err := s.checkFirstPost(ctx, thread, id, seq, value)
	return first, err == nil, err
}

// checkFirstPost answers for seq, a post of id on thread, from the value of
// its entry: seq when it names seq; the post it names when that is an
// earlier post of id in the log; else 0.
func (s *Store) checkFirstPost(ctx context.Context, thread, id string, seq uint64, value []byte) (uint64, error) {
	named, perr := strconv.ParseUint(string(value), 10, 64)
	switch {
	case perr != nil || named == 0 || named > seq:
		return 0, nil // not written by the protocol, or naming a later post
	case named == seq:
		return seq, nil
	}
	raw, err := s.getMsg(ctx, s.threadStream(thread), msgGetRequest{Seq: named})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, unavailable(fmt.Sprintf("read %s's post at %d", thread, named), err)
	}
	if env := s.decodeRaw(raw); events.IsFirstPostOf(&env, thread, id) {
		return named, nil
	}
	return 0, nil
}
