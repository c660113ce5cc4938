package events

import (
	"context"
	"errors"
	"time"
)

// This file holds the ports of read models (projections/summaries): what a
// read model needs of a store, so that it depends on these interfaces and
// not on an adapter. natsstore's Store and memstore's implement
// [ReadModelStore]; the contract suite is eventstest.RunReadModel.

// ErrNotFound is returned (wrapped) by [ReadModelStore] and [KVBucket] when
// a durable consumer or a bucket asked for does not exist.
var ErrNotFound = errors.New("events: not found")

// ErrUnsafeConfig is returned (wrapped) by [ReadModelStore.OpenDurable] when
// a durable consumer of that name exists with another configuration, which
// reading from it would misread. A store's constructor returns it too when
// what it would use exists with a configuration that would break the log or
// the leases (natsstore.New: a stream that allows deletes, say).
var ErrUnsafeConfig = errors.New("events: unsafe existing config")

// LogReader reads the whole log, across threads, and single threads.
type LogReader interface {
	// Subjects names the stream's subjects.
	Subjects() Subjects
	// LastStreamSeq returns the sequence of the last event in the stream, 0
	// when it is empty.
	LastStreamSeq(ctx context.Context) (uint64, error)
	// NextSeq returns the sequence of the first event stored at or after
	// from, and false when there is none.
	NextSeq(ctx context.Context, from uint64) (uint64, bool, error)
	// LastPartitionSeq is LastStreamSeq of partition p's stream: with
	// partitions each stream has its own sequences. p is 0 with one.
	LastPartitionSeq(ctx context.Context, p int) (uint64, error)
	// NextPartitionSeq is NextSeq within partition p's stream.
	NextPartitionSeq(ctx context.Context, p int, from uint64) (uint64, bool, error)
	// Load returns thread's events from sequence from on, in order.
	Load(ctx context.Context, thread string, from uint64) ([]Envelope, error)
	// Replay calls fn with every event on subjects matching filter from
	// sequence from on, in order, and returns the last sequence read. A
	// malformed event comes with Envelope.Err set; an error from fn stops it
	// and is returned.
	Replay(ctx context.Context, filter string, from uint64, fn func(Envelope) error) (uint64, error)
}

// ReadModelStore is what a read model needs of a store: the log to fold, a
// durable consumer to follow it, and key-value buckets to keep its state
// and checkpoint in.
type ReadModelStore interface {
	LogReader
	// OpenDurable opens the durable consumer cfg.Name, creating it if need
	// be; an existing one keeps its position, and its AckWait and
	// MaxAckPending. It returns an error wrapping ErrUnsafeConfig when one
	// of that name exists with another filter or acknowledgement policy.
	OpenDurable(ctx context.Context, cfg DurableConfig) (DurableConsumer, error)
	// DurableState returns the state of the durable consumer name, or an
	// error wrapping ErrNotFound. With partitions, of the first partition's
	// stream that has one of that name.
	DurableState(ctx context.Context, name string) (DurableInfo, error)
	// DeleteDurable deletes the durable consumer name; deleting one that
	// does not exist is no error. With partitions, from every partition's
	// stream.
	DeleteDurable(ctx context.Context, name string) error
	// PartitionDurableState is DurableState of the durable consumer name
	// on partition p's stream: with partitions each stream has consumers of
	// its own, and a read model may name its consumer the same on each.
	PartitionDurableState(ctx context.Context, p int, name string) (DurableInfo, error)
	// DeletePartitionDurable is DeleteDurable on partition p's stream
	// alone.
	DeletePartitionDurable(ctx context.Context, p int, name string) error
	// OpenBucket opens the bucket name; with create it creates it when
	// missing, and without a missing one returns an error wrapping
	// ErrNotFound.
	OpenBucket(ctx context.Context, name string, create bool) (KVBucket, error)
}

// DurableConfig configures a durable consumer.
type DurableConfig struct {
	// Name is the durable name. Required: [A-Za-z0-9_-]+.
	Name string
	// Filter is the subject filter. Default every event.
	Filter string
	// AckWait is how long a delivery waits for its ack before it is
	// delivered again. Default the store's.
	AckWait time.Duration
	// MaxAckPending bounds the deliveries awaiting an ack. Default the
	// store's.
	MaxAckPending int
}

// DurableInfo is a durable consumer's state.
type DurableInfo struct {
	Name string
	// NumPending is the number of events not yet delivered.
	NumPending uint64
	// NumAckPending is the number of events delivered and not yet acked.
	NumAckPending int
	// AckFloor is the stream sequence up to which every event is acked.
	AckFloor uint64
	// Delivered is the stream sequence of the last event delivered.
	Delivered uint64
}

// DurableConsumer is a durable consumer whose position survives its
// readers: deliveries come in stream order, an ack acknowledges every
// delivery before it too, and unacked ones come again after the ack wait,
// behind newer ones.
type DurableConsumer interface {
	// Fetch waits up to wait for a first event, then returns it with
	// whatever else is ready, at most max.
	Fetch(ctx context.Context, max int, wait time.Duration) ([]Delivery, error)
	// Ack acknowledges d and every delivery before it.
	Ack(ctx context.Context, d Delivery) error
	// Reset makes deliveries start again from stream sequence seq.
	Reset(ctx context.Context, seq uint64) error
}

// Delivery is one event delivered by a [DurableConsumer].
type Delivery struct {
	Env Envelope
	// Delivered is how many times it was delivered: above 1 for a
	// redelivery.
	Delivered uint64
	// Token is the store's own handle on the delivery, for Ack.
	Token any
}

// KVEntry is a key's last value and its revision, the compare-and-set token
// of the next write. A key never written has Revision 0.
type KVEntry struct {
	Key      string
	Value    []byte // nil when the key has no value
	Revision uint64
}

// KVPut is one compare-and-set write: Value lands only if Revision is still
// the key's last revision (0: never written).
type KVPut struct {
	Key      string
	Value    []byte
	Revision uint64
}

// KVBucket is a key-value bucket of a read model, with compare-and-set
// writes.
type KVBucket interface {
	// Get returns key's entry, and false when it has none.
	Get(ctx context.Context, key string) (e KVEntry, found bool, err error)
	// GetMany is Get of several keys at once.
	GetMany(ctx context.Context, keys []string) ([]KVEntry, []bool, error)
	// Put writes value if rev is still key's last revision, and returns the
	// new revision; otherwise an error wrapping ErrConflict.
	Put(ctx context.Context, key string, value []byte, rev uint64) (uint64, error)
	// PutMany is Put of several writes at once: a revision or an error each.
	PutMany(ctx context.Context, puts []KVPut) ([]uint64, []error)
	// Scan calls fn with every key matching filter that has a value.
	Scan(ctx context.Context, filter string, fn func(KVEntry) error) error
	// Purge removes every key matching filter.
	Purge(ctx context.Context, filter string) error
}

// ValidKVKey reports whether k may be a key of a [KVBucket]:
// [-/_=.A-Za-z0-9]+, not starting or ending with a dot.
func ValidKVKey(k string) bool {
	if k == "" || k[0] == '.' || k[len(k)-1] == '.' {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '-' || c == '/' || c == '_' || c == '=' || c == '.'
		if !ok {
			return false
		}
	}
	return true
}
