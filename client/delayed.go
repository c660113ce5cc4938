package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/artifactr/artifactr/events"
)

// DefaultDelayedBucket is the KV bucket of delayed posts ([Client.PostLater]).
const DefaultDelayedBucket = "delayed_posts"

// DelayedMessage is one message of a [Delayed] post, with what it is posted
// with.
type DelayedMessage struct {
	ID        string `json:"id"`
	Text      string `json:"text"`
	Author    string `json:"author,omitempty"`
	Strategy  string `json:"strategy,omitempty"`
	Assistant string `json:"assistant,omitempty"`
	Webhook   string `json:"webhook,omitempty"`
}

// Delayed is a run's messages held back until Due. It is kept in a KV
// bucket, one key per thread and run, so that it outlives the process that
// will post it: any client draining the bucket ([Client.PostDue]) posts it
// once it is due. Its messages carry their ids, so a post made twice (two
// drainers, or a drainer that died after the post and before it marked
// the key) is one message.
type Delayed struct {
	Thread string `json:"thread"`
	// Run names the delayed run: its last message's id.
	Run      string           `json:"run"`
	Created  time.Time        `json:"created"`
	Due      time.Time        `json:"due"`
	Messages []DelayedMessage `json:"messages"`
	// Meta is the caller's own, kept as is (the HTTP API keeps the run's
	// assistant and strategy there).
	Meta json.RawMessage `json:"meta,omitempty"`

	// Posted is the last message's sequence once the messages are posted;
	// Failed is why they could not be (a definite refusal, such as a
	// reject post that found a run active, or Cancelled). A key with
	// either is done: drainers skip it.
	Posted uint64 `json:"posted,omitempty"`
	Failed string `json:"failed,omitempty"`

	rev uint64 // the key's revision when read: the next write's check
}

// Cancelled is the Failed reason of a delayed post cancelled before it was
// made ([Client.CancelDelayed]).
const Cancelled = "cancelled"

// Pending reports whether d is not posted, failed or cancelled yet.
func (d Delayed) Pending() bool { return d.Posted == 0 && d.Failed == "" }

func (d Delayed) key() string { return d.Thread + "." + d.Run }

// same reports whether d and e post the same messages.
func (d Delayed) same(e Delayed) bool {
	return d.Thread == e.Thread && d.Run == e.Run && slices.Equal(d.Messages, e.Messages)
}

func (d Delayed) validate() error {
	if err := events.ValidateThreadID(d.Thread); err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if len(d.Messages) == 0 {
		return errors.New("client: a delayed post needs a message")
	}
	for _, m := range d.Messages {
		if err := events.ValidateMessageID(m.ID); err != nil {
			return fmt.Errorf("client: a delayed post's messages need ids: %w", err)
		}
		if _, err := events.ParseStrategy(m.Strategy); err != nil {
			return fmt.Errorf("client: %w", err)
		}
	}
	if d.Run != d.Messages[len(d.Messages)-1].ID {
		return fmt.Errorf("client: delayed run %q is not its last message's id %q", d.Run, d.Messages[len(d.Messages)-1].ID)
	}
	return nil
}

// delayedBucket opens bucket, creating it if missing and create is set (a
// role that may not create it gets an error: serve --auth creates it as
// admin). Without create a missing bucket is an error wrapping
// events.ErrNotFound.
func (c *Client) delayedBucket(ctx context.Context, bucket string, create bool) (delayedKV, error) {
	c.mu.Lock()
	b, ok := c.buckets[bucket]
	c.mu.Unlock()
	if ok {
		return b, nil
	}
	kv, err := c.store.OpenBucket(ctx, bucket, create)
	if err != nil {
		return delayedKV{}, fmt.Errorf("client: delayed posts: %w", err)
	}
	b = delayedKV{KVBucket: kv, name: bucket}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.buckets == nil {
		c.buckets = map[string]delayedKV{}
	}
	c.buckets[bucket] = b
	return b, nil
}

// delayedKV is an open bucket of delayed posts, with its name for errors.
type delayedKV struct {
	events.KVBucket
	name string
}

// PostLater stores d in bucket ("" for [DefaultDelayedBucket]), to be posted
// at d.Due by whoever drains the bucket. Nothing is posted now. A key for
// the same thread and run that exists already is returned with created
// false when it holds the same messages (a retried call), and is an error
// wrapping events.ErrConflict otherwise. An error wrapping
// events.ErrUnavailable means the outcome is unknown: call again.
func (c *Client) PostLater(ctx context.Context, bucket string, d Delayed) (stored Delayed, created bool, err error) {
	if err := d.validate(); err != nil {
		return Delayed{}, false, err
	}
	b, err := c.delayedBucket(ctx, cmpOr(bucket, DefaultDelayedBucket), true)
	if err != nil {
		return Delayed{}, false, err
	}
	d.Posted, d.Failed = 0, ""
	val, err := json.Marshal(d)
	if err != nil {
		return Delayed{}, false, err
	}
	rev, err := b.Put(ctx, d.key(), val, 0)
	if err == nil {
		d.rev = rev
		return d, true, nil
	}
	if !errors.Is(err, events.ErrConflict) {
		return Delayed{}, false, fmt.Errorf("client: delay a post to %s: %w", d.Thread, err)
	}
	old, found, err := c.readDelayed(ctx, b, d.key())
	switch {
	case err != nil:
		return Delayed{}, false, err
	case !found:
		return Delayed{}, false, fmt.Errorf("client: delay a post to %s: %w: key %s was written and then removed", d.Thread, events.ErrConflict, d.key())
	case !old.same(d):
		return Delayed{}, false, fmt.Errorf("client: delay a post to %s: %w: run %s is delayed already with other messages", d.Thread, events.ErrConflict, d.Run)
	}
	return old, false, nil
}

// DelayedPost returns the delayed post of run in thread from bucket ("" for
// [DefaultDelayedBucket]), and false when there is none.
func (c *Client) DelayedPost(ctx context.Context, bucket, thread, run string) (Delayed, bool, error) {
	if events.ValidateThreadID(thread) != nil || events.ValidateMessageID(run) != nil {
		return Delayed{}, false, nil // no such key can exist
	}
	b, err := c.delayedBucket(ctx, cmpOr(bucket, DefaultDelayedBucket), false)
	if errors.Is(err, events.ErrNotFound) {
		return Delayed{}, false, nil // no bucket: nothing was ever delayed
	}
	if err != nil {
		return Delayed{}, false, err
	}
	return c.readDelayed(ctx, b, thread+"."+run)
}

// DelayedPosts returns thread's delayed posts in bucket ("" for
// [DefaultDelayedBucket]) that are not posted: pending, failed or
// cancelled, oldest created first.
func (c *Client) DelayedPosts(ctx context.Context, bucket, thread string) ([]Delayed, error) {
	if err := events.ValidateThreadID(thread); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	b, err := c.delayedBucket(ctx, cmpOr(bucket, DefaultDelayedBucket), false)
	if errors.Is(err, events.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Delayed
	err = b.Scan(ctx, thread+".*", func(e events.KVEntry) error {
		var d Delayed
		if json.Unmarshal(e.Value, &d) == nil && d.Posted == 0 {
			d.rev = e.Revision
			out = append(out, d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("client: delayed posts of %s: %w", thread, err)
	}
	slices.SortFunc(out, func(a, b Delayed) int { return a.Created.Compare(b.Created) })
	return out, nil
}

func (c *Client) readDelayed(ctx context.Context, b delayedKV, key string) (Delayed, bool, error) {
	e, found, err := b.Get(ctx, key)
	if err != nil || !found {
		return Delayed{}, false, err
	}
	var d Delayed
	if err := json.Unmarshal(e.Value, &d); err != nil {
		return Delayed{}, false, fmt.Errorf("client: delayed post %s in %s is malformed: %w", key, b.name, err)
	}
	d.rev = e.Revision
	return d, true, nil
}

// CancelDelayed marks run's delayed post in thread cancelled, if it is
// still pending, and returns it as it stands: pending no more, or posted
// already (the caller cancels the run then).
func (c *Client) CancelDelayed(ctx context.Context, bucket, thread, run string) (Delayed, bool, error) {
	b, err := c.delayedBucket(ctx, cmpOr(bucket, DefaultDelayedBucket), true)
	if err != nil {
		return Delayed{}, false, err
	}
	for {
		d, found, err := c.readDelayed(ctx, b, thread+"."+run)
		if err != nil || !found || !d.Pending() {
			return d, found, err
		}
		d.Failed = Cancelled
		if err := c.markDelayed(ctx, b, &d); !errors.Is(err, events.ErrConflict) {
			return d, true, err
		}
		// A drainer marked it meanwhile: read what it did.
	}
}

// markDelayed writes d back at the revision it was read at.
func (c *Client) markDelayed(ctx context.Context, b delayedKV, d *Delayed) error {
	val, err := json.Marshal(d)
	if err != nil {
		return err
	}
	rev, err := b.Put(ctx, d.key(), val, d.rev)
	if err != nil {
		return fmt.Errorf("client: mark delayed post %s: %w", d.key(), err)
	}
	d.rev = rev
	return nil
}

// PostDue posts every pending delayed post in bucket ("" for
// [DefaultDelayedBucket]) due at now, oldest due first, and marks each
// posted (or failed, on a definite refusal) with a compare-and-set, so a
// key another drainer marked meanwhile is left to it. It returns the
// earliest due time of the posts still pending (zero when none), for the
// caller's next call, and the posts it made or failed.
//
// A post is made with its messages' ids: two drainers posting one key, or
// one that dies between its post and its mark, make one message. An error
// (NATS unavailable) leaves the rest for the next call.
func (c *Client) PostDue(ctx context.Context, bucket string, now time.Time) (next time.Time, done []Delayed, err error) {
	b, err := c.delayedBucket(ctx, cmpOr(bucket, DefaultDelayedBucket), true)
	if err != nil {
		return time.Time{}, nil, err
	}
	var due []Delayed
	err = b.Scan(ctx, ">", func(e events.KVEntry) error {
		var d Delayed
		if json.Unmarshal(e.Value, &d) != nil || !d.Pending() {
			return nil // malformed keys are left alone: the API reads them as errors
		}
		d.rev = e.Revision
		if d.Due.After(now) {
			if next.IsZero() || d.Due.Before(next) {
				next = d.Due
			}
			return nil
		}
		due = append(due, d)
		return nil
	})
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("client: scan delayed posts: %w", err)
	}
	slices.SortFunc(due, func(a, b Delayed) int { return a.Due.Compare(b.Due) })
	for _, d := range due {
		if err := c.postDelayed(ctx, b, &d); err != nil {
			return next, done, err
		}
		done = append(done, d)
	}
	return next, done, nil
}

// postDelayed posts d's messages and marks d posted, or failed when a post
// is refused for good.
func (c *Client) postDelayed(ctx context.Context, b delayedKV, d *Delayed) error {
	for _, m := range d.Messages {
		opts := []PostOption{WithMessageID(m.ID), WithAuthor(m.Author), WithAssistant(m.Assistant), WithWebhook(m.Webhook)}
		if m.Strategy != "" {
			opts = append(opts, WithStrategy(m.Strategy))
		}
		p, err := c.Post(ctx, d.Thread, m.Text, opts...)
		if err != nil && refusedForGood(err) {
			d.Failed = err.Error()
			break
		}
		if err != nil {
			return err
		}
		d.Posted = p.Seq
	}
	if err := c.markDelayed(ctx, b, d); err != nil && !errors.Is(err, events.ErrConflict) {
		return err
	}
	// A conflict: another drainer (or a cancel) marked it first; the
	// posts were idempotent, so nothing is left to do.
	return nil
}

// refusedForGood reports whether a post's error means it was not written
// and never will be, whoever tries again.
func refusedForGood(err error) bool {
	return errors.Is(err, events.ErrThreadBusy) || errors.Is(err, events.ErrConflict) ||
		errors.Is(err, events.ErrInvalidEvent) || errors.Is(err, events.ErrTooLarge) || errors.Is(err, events.ErrInvalidThreadID)
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
