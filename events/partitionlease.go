package events

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// PartitionLeaser keeps the partition leases that runners divide a
// partitioned stream's partitions by (DESIGN §9), as Kafka's consumer
// groups and temporal's shard ownership do: one key per partition in the
// lease bucket, naming the session of the runner that owns it, with a TTL
// of its own so a stalled owner loses it. Like every lease it decides
// liveness only: which runner follows a partition and claims its threads.
// Two runners that both believe they own one are safe, because each
// consuming write carries its thread's claim fence ([Fenced]).
//
// Every method refuses a negative partition with an error wrapping
// [ErrInvalidEvent]. The contract suite is eventstest.RunPartitionLeaser.
type PartitionLeaser interface {
	// AcquirePartition takes partition p for the runner owner under its
	// session, for ttl, if p's lease is free, released, lapsed by this
	// store's clock, or already held under session (an owner that lost
	// track of its own lease, as an ambiguous renewal leaves it). It
	// writes by compare-and-set on the key's last revision. Otherwise it
	// returns an error wrapping [ErrPartitionBusy].
	AcquirePartition(ctx context.Context, p int, session, owner string, ttl time.Duration) (PartitionLease, error)
	// RenewPartition extends l by its TTL by compare-and-set on its
	// revision. It returns [ErrLeaseLost] when the lease moved on.
	RenewPartition(ctx context.Context, l PartitionLease) (PartitionLease, error)
	// ReleasePartition deletes l by compare-and-set on its revision, so
	// another runner can take p at once. It returns [ErrLeaseLost] when
	// the lease moved on.
	ReleasePartition(ctx context.Context, l PartitionLease) error
	// PartitionLeases reads the leases of partitions 0..parts-1, indexed
	// by partition. A partition nobody holds has Session "". Live says
	// whether a lease is held and not lapsed by this store's clock.
	PartitionLeases(ctx context.Context, parts int) ([]PartitionLease, error)
}

// PartitionLease is the lease of one partition. See [PartitionLeaser].
type PartitionLease struct {
	Partition int
	Session   string        // the owning runner's session; "" when free
	Owner     string        // the owning runner, for operators
	Revision  uint64        // the key's revision; compare-and-set token
	TTL       time.Duration // how long it lives without renewal
	Expires   time.Time     // by the writer's clock; liveness only
	// Live is set by a read: the lease is held and has not lapsed by the
	// reader's clock.
	Live bool
}

// ErrPartitionBusy is returned by [PartitionLeaser.AcquirePartition] when
// another session holds the partition's lease and it has not lapsed.
// Nothing was written.
var ErrPartitionBusy = errors.New("events: partition busy")

// PartitionKey is the lease bucket key of partition p. A thread id has no
// dot, so no thread's lease key can take this shape.
func PartitionKey(p int) string { return fmt.Sprintf("_partition.%d", p) }

// CheckPartitionArgs validates the arguments of an acquisition.
func CheckPartitionArgs(p int, session, owner string, ttl time.Duration) error {
	switch {
	case p < 0:
		return fmt.Errorf("%w: partition %d is negative", ErrInvalidEvent, p)
	case session == "" || owner == "":
		return fmt.Errorf("%w: partition lease needs a session and an owner", ErrInvalidEvent)
	case ttl <= 0:
		return fmt.Errorf("%w: partition lease TTL %s is not positive", ErrInvalidEvent, ttl)
	}
	return nil
}
