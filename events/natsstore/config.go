package natsstore

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/artifactr/artifactr/events"
)

// Defaults for [Config].
const (
	DefaultStream          = "ARTIFACTR"
	DefaultBucket          = "claims"
	DefaultTimeout         = 5 * time.Second
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultReplicas        = 1
)

// headerRoom is what an event's headers may take of the server's max
// payload: ids, type, schema and the expected-sequence pair come to a few
// hundred bytes.
const headerRoom = 4 << 10

// Config configures a [Store]. Set exactly one of URL and Conn.
type Config struct {
	// URL is the NATS server to connect to. The store owns the connection
	// and closes it on Close.
	URL string
	// Conn is an existing connection. The store does not close it.
	Conn *nats.Conn
	// ConnectOptions are added to the store's own when it dials URL:
	// credentials (nats.Nkey, nats.UserCredentials), TLS (nats.RootCAs,
	// nats.ClientCert) or an in-process connection. Ignored with Conn.
	ConnectOptions []nats.Option

	// Stream is the JetStream stream holding the threads. Default
	// DefaultStream.
	Stream string
	// Prefix is the first subject token, as in <prefix>.T.posted. Default
	// events.DefaultPrefix.
	Prefix string
	// Partitions is the number of partitions, each a stream of its own
	// (see [PartitionStream]) with its own leader on a cluster; a thread
	// lives in partition events.Partition(thread, Partitions). Default 1:
	// one stream named Stream with subjects <prefix>.T.<kind>, the layout
	// before partitions. The count is recorded in each stream's metadata,
	// and New refuses a deployment made with another.
	Partitions int
	// Domain is the JetStream domain the stream and buckets live in, as
	// a leaf node's JetStream is reached from its hub: every API request
	// and KV write then goes to $JS.<Domain>.API. "" (the default) is the
	// JetStream of the server the store is connected to.
	Domain string
	// Bucket is the KV bucket holding the leases. Default DefaultBucket.
	Bucket string
	// SnapshotBucket is the KV bucket of thread snapshots, created on the
	// first save. Default DefaultSnapshotBucket.
	SnapshotBucket string
	// MessageIDBucket is the KV bucket of message ids (one key per
	// thread and message id), created by New unless NoCreate. Default
	// [MessageIDBucketOf] the stream: the ids are the stream's, so two
	// streams on one server must not share a bucket.
	MessageIDBucket string
	// FirstPostBucket is the bucket of the first-post index
	// ([events.FirstPosts]), created by New unless NoCreate. Default
	// [FirstPostBucketOf] the stream.
	FirstPostBucket string
	// Replicas is the replica count of the stream and the bucket when New
	// creates them. Default 1; use 3 on a cluster.
	Replicas int
	// MaxEventBytes limits an encoded event. Default
	// events.DefaultMaxEventBytes, lowered to what the server accepts.
	MaxEventBytes int
	// Timeout bounds each call, retries included, when ctx has no earlier
	// deadline. Default DefaultTimeout.
	Timeout time.Duration
	// Now is the store's clock: it stamps posts and decides when a lease has
	// lapsed. Default time.Now. Tests inject skewed clocks.
	Now func() time.Time
	// Logger receives warnings. Default discards.
	Logger *slog.Logger
	// DuplicateWindow is the stream's deduplication window for Nats-Msg-Id
	// when New creates it. Default DefaultDuplicateWindow.
	DuplicateWindow time.Duration
	// NoCreate opens an existing stream and lease bucket only: New creates
	// nothing, and returns an error wrapping [ErrNoStream] when either is
	// missing. Commands that only read set it, so that pointing one at the
	// wrong server or stream never creates a stream that cannot be deleted.
	NoCreate bool
	// UnexplainedLeaseTTL is how long a lease that no live session
	// explains holds its thread, from when it was written: a lease naming
	// a session that does not exist, one with no session and no
	// server-side TTL, one expiring beyond what the lease protocol writes,
	// or a value that does not decode. No runner writes one; a writer with
	// runner credentials could, to starve the thread. After it, the lease
	// is taken like a lapsed one, and the taking is logged and reported
	// (events.Lease.Reclaimed). Default DefaultUnexplainedLeaseTTL.
	UnexplainedLeaseTTL time.Duration
	// Guard says whether guarded consuming appends write their guard: a
	// second message, in one atomic batch with the event, that refuses the
	// event if the run subject moved since the writer read it, which closes
	// the window in which a writer with runner credentials can make an
	// honest runner write an I1 or I3 violation. Default GuardAuto: on for
	// a replicated or memory stream, off for a single-replica file stream,
	// where nats-server syncs a temporary file per batch (see [GuardMode]).
	Guard GuardMode
	// Fence is the stream's fence layout (see [FenceLayout]): "" takes
	// what the stream records and makes a new stream in the claim layout;
	// FenceClaim or FenceRun ask for one, make a new stream in it, and
	// refuse (an error wrapping [events.ErrLayout]) a stream that records
	// the other. Under FenceRun a guarded consuming append is one
	// compare-and-set on the run subject, whatever Guard says.
	Fence FenceLayout
	// NewFence is the layout of a stream this store makes when Fence is
	// "": an existing stream keeps what it records. The CLI makes new
	// streams in FenceRun this way, while it goes on serving the streams
	// older versions made. Default FenceClaim.
	NewFence FenceLayout
}

// DefaultUnexplainedLeaseTTL is the default of Config.UnexplainedLeaseTTL.
const DefaultUnexplainedLeaseTTL = time.Minute

func (c *Config) setDefaults() {
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.Prefix == "" {
		c.Prefix = events.DefaultPrefix
	}
	if c.Partitions == 0 {
		c.Partitions = 1
	}
	if c.Bucket == "" {
		c.Bucket = DefaultBucket
	}
	if c.SnapshotBucket == "" {
		c.SnapshotBucket = DefaultSnapshotBucket
	}
	if c.MessageIDBucket == "" {
		c.MessageIDBucket = MessageIDBucketOf(c.Stream)
	}
	if c.FirstPostBucket == "" {
		c.FirstPostBucket = FirstPostBucketOf(c.Stream)
	}
	if c.Replicas == 0 {
		c.Replicas = DefaultReplicas
	}
	if c.MaxEventBytes == 0 {
		c.MaxEventBytes = events.DefaultMaxEventBytes
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	if c.Guard == "" {
		c.Guard = GuardAuto
	}
	if c.UnexplainedLeaseTTL == 0 {
		c.UnexplainedLeaseTTL = DefaultUnexplainedLeaseTTL
	}
}

func (c *Config) validate() error {
	switch {
	case c.URL == "" && c.Conn == nil:
		return errors.New("natsstore: Config needs URL or Conn")
	case c.URL != "" && c.Conn != nil:
		return errors.New("natsstore: Config has both URL and Conn; set one")
	case !isToken(c.Stream):
		return fmt.Errorf("natsstore: Config.Stream %q is not a valid stream name", c.Stream)
	case !isToken(c.Prefix):
		return fmt.Errorf("natsstore: Config.Prefix %q is not a single subject token", c.Prefix)
	case c.Partitions < 1 || c.Partitions > events.MaxPartitions:
		return fmt.Errorf("natsstore: Config.Partitions %d is not 1 to %d", c.Partitions, events.MaxPartitions)
	case c.Domain != "" && !isToken(c.Domain):
		return fmt.Errorf("natsstore: Config.Domain %q is not a single subject token", c.Domain)
	case !isToken(c.Bucket):
		return fmt.Errorf("natsstore: Config.Bucket %q is not a valid bucket name", c.Bucket)
	case !isToken(c.SnapshotBucket):
		return fmt.Errorf("natsstore: Config.SnapshotBucket %q is not a valid bucket name", c.SnapshotBucket)
	case !isToken(c.MessageIDBucket):
		return fmt.Errorf("natsstore: Config.MessageIDBucket %q is not a valid bucket name", c.MessageIDBucket)
	case !isToken(c.FirstPostBucket):
		return fmt.Errorf("natsstore: Config.FirstPostBucket %q is not a valid bucket name", c.FirstPostBucket)
	case c.Replicas < 1 || c.Replicas > 5:
		return fmt.Errorf("natsstore: Config.Replicas %d is not 1 to 5", c.Replicas)
	case c.MaxEventBytes < 0:
		return fmt.Errorf("natsstore: Config.MaxEventBytes %d is negative", c.MaxEventBytes)
	case c.Timeout < 0:
		return fmt.Errorf("natsstore: Config.Timeout %s is negative", c.Timeout)
	case c.UnexplainedLeaseTTL < 0:
		return fmt.Errorf("natsstore: Config.UnexplainedLeaseTTL %s is negative", c.UnexplainedLeaseTTL)
	case c.Guard != GuardAuto && c.Guard != GuardOn && c.Guard != GuardOff:
		return fmt.Errorf("natsstore: Config.Guard %q: want auto, on or off", c.Guard)
	case c.Fence != "" && c.Fence != FenceClaim && c.Fence != FenceRun:
		return fmt.Errorf("natsstore: Config.Fence %q: want claim, run or empty", c.Fence)
	case c.NewFence != "" && c.NewFence != FenceClaim && c.NewFence != FenceRun:
		return fmt.Errorf("natsstore: Config.NewFence %q: want claim, run or empty", c.NewFence)
	case c.DuplicateWindow < 0:
		return fmt.Errorf("natsstore: Config.DuplicateWindow %s is negative", c.DuplicateWindow)
	}
	return nil
}

// isToken reports whether s is usable as one subject token and as a stream
// or bucket name: [A-Za-z0-9_-]+.
func isToken(s string) bool {
	return s != "" && events.ValidateThreadID(s) == nil
}
