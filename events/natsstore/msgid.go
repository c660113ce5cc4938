package natsstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// DefaultMessageIDBucket is the KV bucket of message ids: one create-only
// key <thread>.<message id> per message, so that a message id is one
// message in its thread forever, not only within the stream's
// deduplication window.
const DefaultMessageIDBucket = "message_ids"

// MessageIDBucketOf is the default message-id bucket of stream:
// DefaultMessageIDBucket for DefaultStream, message_ids_<stream> for any
// other.
func MessageIDBucketOf(stream string) string {
	if stream == DefaultStream {
		return DefaultMessageIDBucket
	}
	return DefaultMessageIDBucket + "_" + stream
}

// staleSlack is how much earlier than its id key's creation a post is
// looked for: the key and the post are stamped by server clocks, which
// may differ a little on a cluster.
const staleSlack = 10 * time.Second

// idRecord is an id key's value: a digest of the post's author and text,
// and the post's sequence once it is known (0 while the post is in flight,
// or when its poster died between the key and the post).
type idRecord struct {
	Digest string `json:"h"`
	Seq    uint64 `json:"seq,omitempty"`
}

// msgIDs is the message-id bucket, opened (or created) on first use.
type msgIDs struct {
	mu sync.Mutex // protects the fields below
	kv jetstream.KeyValue
	// missing: the bucket was not there (or not readable); the store
	// posts without it until it is reopened, and said so once.
	missing bool
}

// idKV opens the message-id bucket, creating it when create is set. It
// returns nil and no error when the bucket is missing and create is false.
func (s *Store) idKV(ctx context.Context, create bool) (jetstream.KeyValue, error) {
	s.ids.mu.Lock()
	defer s.ids.mu.Unlock()
	if s.ids.kv != nil {
		return s.ids.kv, nil
	}
	kv, err := s.js.KeyValue(ctx, s.cfg.MessageIDBucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		if !create {
			return nil, nil
		}
		kv, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:       s.cfg.MessageIDBucket,
			Description:  "artifactr message ids: one create-only key per (thread, message id), so a repost is never a second message",
			History:      1,
			Storage:      jetstream.FileStorage,
			Replicas:     s.cfg.Replicas,
			MaxBytes:     -1,
			MaxValueSize: 256, // a digest and a sequence
		})
		if errors.Is(err, jetstream.ErrBucketExists) {
			kv, err = s.js.KeyValue(ctx, s.cfg.MessageIDBucket)
		}
	}
	if err != nil {
		return nil, err
	}
	s.ids.kv = kv
	return kv, nil
}

// postIDs returns the message-id bucket for a post, or nil when there is
// none: the post is then idempotent within the deduplication window only,
// which the store says once, and the fold rule still makes a late repost
// no message (projections.Rules).
func (s *Store) postIDs(ctx context.Context) jetstream.KeyValue {
	s.ids.mu.Lock()
	kv, missing := s.ids.kv, s.ids.missing
	s.ids.mu.Unlock()
	if kv != nil || missing {
		return kv
	}
	kv, err := s.idKV(ctx, false)
	if kv != nil {
		return kv
	}
	s.ids.mu.Lock()
	defer s.ids.mu.Unlock()
	if !s.ids.missing {
		s.ids.missing = true
		s.cfg.Logger.Warn("natsstore: no message-id bucket; posts are idempotent within the deduplication window only (run artifactr init)",
			"bucket", s.cfg.MessageIDBucket, "err", err)
	}
	return nil
}

func postDigest(m *eventspb.MessagePosted) string {
	h := sha256.New()
	h.Write([]byte(m.GetAuthor()))
	h.Write([]byte{0})
	h.Write([]byte(m.GetText()))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// idClaim is what reserving a post's id found.
type idClaim struct {
	key string
	rec idRecord
	rev uint64 // the key's revision when this post is to be published
	// created: this post made the key (it was not there).
	created bool
	// done: the id is taken already; ack or err is the post's answer.
	done bool
	ack  events.Ack
	err  error
}

// reserveID makes the id key of m in thread before m is published: it
// creates <thread>.<id> with m's digest. A key that exists decides the post
// at once when it names a sequence: the original (a duplicate ack) or,
// with another digest, a conflict. A key without a sequence is a post in
// flight or one whose poster died before it recorded the sequence: this
// post is published again under the same Nats-Msg-Id, which the stream
// deduplicates within its window; past the window, the original is first
// looked for on the thread's posted subject from the key's creation on.
func (s *Store) reserveID(ctx context.Context, kv jetstream.KeyValue, w *write, thread string, m *eventspb.MessagePosted) idClaim {
	c := idClaim{key: thread + "." + m.GetMessageId(), rec: idRecord{Digest: postDigest(m)}}
	val, _ := json.Marshal(c.rec)
	for range 3 {
		rev, err := kv.Create(ctx, c.key, val)
		if err == nil {
			c.rev, c.created = rev, true
			return c
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			if derr := s.publishDenied(s.kvPutSubject(c.key)); derr != nil {
				return c.fail(fmt.Errorf("natsstore: post to %s: its message id key: %w", w.subject, derr))
			}
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && isNoStorage(apiErr.ErrorCode) {
				return c.fail(fmt.Errorf("natsstore: create message id key %s; nothing posted: %w: %w", c.key, events.ErrNoStorage, err))
			}
			return c.fail(unavailable("create message id key "+c.key+"; nothing posted", err))
		}
		e, err := kv.Get(ctx, c.key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue // a refused post let it go meanwhile
		}
		if err != nil {
			return c.fail(unavailable("read message id key "+c.key, err))
		}
		var got idRecord
		if err := json.Unmarshal(e.Value(), &got); err != nil {
			return c.fail(fmt.Errorf("%w: message id %q: its key holds %q, not an id record; nothing written", events.ErrConflict, m.GetMessageId(), e.Value()))
		}
		if got.Digest != c.rec.Digest {
			return c.fail(fmt.Errorf("%w: message id %q was posted before with another text or author; the new one was not written",
				events.ErrConflict, m.GetMessageId()))
		}
		c.rev = e.Revision()
		if got.Seq != 0 {
			return c.original(s.checkRepost(ctx, w.stream, w.subject, m, got.Seq), got.Seq)
		}
		if s.cfg.Now().Sub(e.Created()) < s.dupWindow/2 {
			return c // the stream still knows the Nats-Msg-Id
		}
		ack, found, err := s.findPostSince(ctx, *w, e.Created().Add(-staleSlack))
		if err != nil {
			return c.fail(unavailable("look for the post of message id key "+c.key, err))
		}
		if found {
			s.recordID(ctx, kv, c, ack.Seq)
			return c.original(nil, ack.Seq)
		}
		return c
	}
	return c.fail(fmt.Errorf("natsstore: message id key %s keeps changing: %w", c.key, events.ErrUnavailable))
}

func (c idClaim) fail(err error) idClaim {
	c.done, c.err = true, err
	return c
}

func (c idClaim) original(err error, seq uint64) idClaim {
	c.done = true
	if err != nil {
		c.err = err
		return c
	}
	c.ack = events.Ack{Seq: seq, Duplicate: true}
	return c
}

// recordID writes the post's sequence into its id key, by compare-and-set
// on the revision the post reserved or found: a repost then finds the
// original without the stream's window. It is published without waiting
// for its ack, so it costs the post no round trip: if it is lost, a later
// repost finds the key without a sequence and republishes under the same
// Nats-Msg-Id, or past the window looks on the posted subject.
func (s *Store) recordID(_ context.Context, _ jetstream.KeyValue, c idClaim, seq uint64) {
	c.rec.Seq = seq
	val, _ := json.Marshal(c.rec)
	m := nats.NewMsg(s.kvPutSubject(c.key))
	m.Data = val
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(c.rev, 10))
	if err := s.nc.PublishMsg(m); err != nil {
		s.cfg.Logger.Warn("natsstore: could not record a post's sequence in its message id key", "key", c.key, "seq", seq, "err", err)
	}
}

// releaseID deletes the key of a post that was refused (nothing written),
// so the id is free again, with another text too.
func (s *Store) releaseID(ctx context.Context, kv jetstream.KeyValue, c idClaim) {
	if err := kv.Delete(ctx, c.key, jetstream.LastRevision(c.rev)); err != nil {
		s.cfg.Logger.Warn("natsstore: could not free the message id key of a refused post", "key", c.key, "err", err)
	}
}

// findPostSince looks for w's msg id on w.subject among the messages
// stored from since on.
func (s *Store) findPostSince(ctx context.Context, w write, since time.Time) (events.Ack, bool, error) {
	first, err := s.getMsg(ctx, w.stream, msgGetRequest{StartTime: &since, NextFor: w.subject})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return events.Ack{}, false, nil
	}
	if err != nil {
		return events.Ack{}, false, err
	}
	if first.Header.Get(jetstream.MsgIDHeader) == w.msgID {
		return events.Ack{Seq: first.Sequence, Duplicate: true}, true, nil
	}
	w.after = first.Sequence
	return s.findLanded(ctx, w)
}

// kvPutSubject is the subject a write of key in the message-id bucket is
// published to.
func (s *Store) kvPutSubject(key string) string {
	return s.api.kvPublish(s.cfg.MessageIDBucket) + key
}
