package client

import (
	"context"
	"fmt"
	"time"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
	"github.com/artifactr/artifactr/projections/summaries"
)

// CreateThread writes thread's first thread_metadata, marked created, with
// metadata (a JSON object; "" is {}). It is deduplicated by its message id
// (thread:created), so a retry within the stream's window returns the first
// one's sequence with duplicate set; whether the thread had events before
// is the caller's to check, as the HTTP API's POST /threads does.
func (c *Client) CreateThread(ctx context.Context, thread, metadataJSON string) (seq uint64, duplicate bool, err error) {
	if metadataJSON == "" {
		metadataJSON = "{}"
	}
	ev := events.NewThreadMetadata(thread, time.Now(), metadataJSON, true)
	ack, err := c.store.Append(ctx, ev, events.Check{}, events.WithMsgID(thread+":created"))
	if err != nil {
		return 0, false, fmt.Errorf("client: create %s: %w", thread, err)
	}
	return ack.Seq, ack.Duplicate, nil
}

// SetMetadata merges metadata, a JSON object, into thread's metadata with a
// thread_metadata event. requestID makes it idempotent; "" picks a fresh
// one.
func (c *Client) SetMetadata(ctx context.Context, thread, metadataJSON, requestID string) (uint64, error) {
	var opts []events.AppendOption
	if requestID != "" {
		opts = append(opts, events.WithMsgID(thread+":metadata:"+requestID))
	}
	ack, err := c.store.Append(ctx, events.NewThreadMetadata(thread, time.Now(), metadataJSON, false), events.Check{}, opts...)
	if err != nil {
		return 0, fmt.Errorf("client: set metadata of %s: %w", thread, err)
	}
	return ack.Seq, nil
}

// DeleteThread writes a thread_deleted tombstone: thread reads as deleted
// from then on. It erases nothing: the thread's events stay in the stream,
// which is the audit log (DenyDelete, DenyPurge).
func (c *Client) DeleteThread(ctx context.Context, thread string) (uint64, error) {
	ack, err := c.store.Append(ctx, events.NewThreadDeleted(thread, time.Now(), "deleted"), events.Check{}, events.WithMsgID(thread+":deleted"))
	if err != nil {
		return 0, fmt.Errorf("client: delete %s: %w", thread, err)
	}
	return ack.Seq, nil
}

// Summaries reads every thread's summary from the thread-summaries read
// model in bucket (see summaries.Read): exact as of the stream's last
// sequence.
func (c *Client) Summaries(ctx context.Context, bucket string) (summaries.Snapshot, error) {
	snap, err := summaries.Read(ctx, c.store, bucket)
	if err != nil {
		return summaries.Snapshot{}, fmt.Errorf("client: read summaries: %w", err)
	}
	return snap, nil
}

// Events returns every event of thread, in stream order: what
// [Client.Thread] folds, for a reader that folds it its own way (the HTTP
// API's history). A thread with no events is an error wrapping
// [ErrNoEvents].
func (c *Client) Events(ctx context.Context, thread string) ([]events.Envelope, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	envs, err := c.load(ctx, thread)
	if err != nil {
		return nil, err
	}
	if err := projections.ResolveFirst(ctx, c.store, envs); err != nil {
		return nil, fmt.Errorf("client: load %s: %w", thread, err)
	}
	return envs, nil
}

// ResolveFork gives env, when it is a thread_forked by reference, the
// history it names, read from the source's events (see
// projections.ResolveFork): an envelope from [Client.Watch] folds then as
// one from [Client.Events] does.
func (c *Client) ResolveFork(ctx context.Context, env *events.Envelope) error {
	return projections.ResolveFork(ctx, c.store, env)
}

// LastSeqs returns each partition stream's last sequence, in partition
// order: a follow of every thread from the ones after them
// ([Client.WatchAll]) misses nothing stored later. One with one partition.
func (c *Client) LastSeqs(ctx context.Context) ([]uint64, error) {
	seqs := make([]uint64, c.store.Subjects().PartitionCount())
	for p := range seqs {
		n, err := c.store.LastPartitionSeq(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("client: read partition %d's last sequence: %w", p, err)
		}
		seqs[p] = n
	}
	return seqs, nil
}

// LastSeq returns the stream's last sequence: a follow of every thread
// from the one after it (Watch("", seq+1)) misses nothing stored later.
// With partitions it fails: use [Client.LastSeqs].
func (c *Client) LastSeq(ctx context.Context) (uint64, error) {
	n, err := c.store.LastStreamSeq(ctx)
	if err != nil {
		return 0, fmt.Errorf("client: read the stream's last sequence: %w", err)
	}
	return n, nil
}

// Subjects names the subjects of the client's store: the layout, with its
// partition count.
func (c *Client) Subjects() events.Subjects { return c.store.Subjects() }
