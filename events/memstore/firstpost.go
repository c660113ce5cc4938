package memstore

import (
	"context"

	"github.com/artifactr/artifactr/events"
)

var _ events.FirstPosts = (*Store)(nil)

// FirstPost implements [events.FirstPosts] as natsstore does: the entry is
// written once, and one that names another post is checked against the
// log.
func (s *Store) FirstPost(ctx context.Context, thread, id string, seq uint64) (uint64, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	l := s.log
	l.mu.Lock()
	key := thread + ":" + id
	named, ok := l.firsts[key]
	if !ok {
		l.firsts[key] = seq
	}
	l.mu.Unlock()
	if !ok || named == seq {
		return seq, nil
	}
	if named > seq {
		return 0, nil // a later post, or none: the index cannot say
	}
	recs := l.recs(s.threadKey(thread))
	if named == 0 || named > uint64(len(recs)) {
		return 0, nil
	}
	env := s.decode(recs[named-1])
	if !events.IsFirstPostOf(&env, thread, id) {
		return 0, nil
	}
	return named, nil
}

var _ events.FirstPostLookup = (*Store)(nil)

// LookupFirstPost implements [events.FirstPostLookup].
func (s *Store) LookupFirstPost(ctx context.Context, thread, id string, seq uint64) (uint64, bool, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return 0, false, err
	}
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	s.log.mu.Lock()
	_, ok := s.log.firsts[thread+":"+id]
	s.log.mu.Unlock()
	if !ok {
		return 0, false, nil
	}
	first, err := s.FirstPost(ctx, thread, id, seq)
	return first, true, err
}

// ForgeFirstPost writes the first-post entry of (thread, id) naming seq,
// unless there is one, as a writer with a runner's credentials could. It
// reports whether it wrote it.
func (l *Log) ForgeFirstPost(thread, id string, seq uint64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := thread + ":" + id
	if _, ok := l.firsts[key]; ok {
		return false
	}
	l.firsts[key] = seq
	return true
}
