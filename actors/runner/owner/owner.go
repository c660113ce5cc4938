package owner

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/artifactr/artifactr/events"
)

// Config configures a [Core].
type Config struct {
	// Partitions is the number of partitions, P.
	Partitions int
	// TTL is the partition leases' TTL. Leases are renewed, and read, every
	// TTL/3, as the runner's session is.
	TTL time.Duration
}

// phase is where a partition is, as this runner sees it.
type phase uint8

const (
	free      phase = iota // not this runner's
	acquiring              // an acquisition in flight
	owned                  // held: followed, its threads claimed
	draining               // held, its threads being handed over
	releasing              // drained; the release in flight
)

func (p phase) String() string {
	return [...]string{"free", "acquiring", "owned", "draining", "releasing"}[p]
}

type part struct {
	phase    phase
	lease    events.PartitionLease // in owned, draining and releasing
	renewing bool                  // a renewal in flight
	// lost says the lease is known not to be this runner's any more (a
	// renewal refused, or its expiry passed): a drain ends without a
	// release.
	lost bool
	// drained says the drain ended while a renewal was in flight: release
	// once it reports, with the revision it brings.
	drained bool
	// waitRead says an acquisition was refused: try again only after a
	// new read of the leases, not at every step.
	waitRead bool
}

// Stats counts what the core decided.
type Stats struct {
	Acquired int64 // partitions taken
	Released int64 // partitions given back after a drain
	Lost     int64 // partitions lost: a renewal refused
	Lapsed   int64 // partitions given up as their lease expired unrenewed (a stall)
	Drains   int64 // drains started
	Refused  int64 // acquisitions refused (held by another)
}

// Core decides which partitions a runner owns: which to acquire, renew,
// drain and release, and which to follow. It does no I/O and reads no
// clock: each [Input] carries the time, and each [Ready] says what to do.
// It is not safe for concurrent use; one loop owns it.
type Core struct {
	cfg  Config
	now  time.Time
	rd   Ready
	me   string   // the runner's session; "" while it has none
	live []string // the live sessions, as Members said
	// known says Members came: until the lease watch caught up, the
	// runner would think itself alone and take partitions others hold.
	known  bool
	target []string // Assign(P, live + me), kept until they change
	parts  []part
	// seen is the last read of the partition leases; nil before the first.
	seen    []events.PartitionLease
	reading bool
	leaving bool
	tickAt  time.Time // when the next renewal and read are due
	stats   Stats
}

// New returns a core for a runner that has no session yet.
func New(cfg Config) *Core {
	if cfg.Partitions <= 0 || cfg.TTL <= 0 {
		panic(fmt.Sprintf("owner: config %+v needs partitions and a TTL", cfg))
	}
	return &Core{cfg: cfg, parts: make([]part, cfg.Partitions)}
}

// Step takes one input and returns what to do about it.
func (c *Core) Step(in Input) Ready {
	c.rd = Ready{}
	c.now = in.Now
	if c.tickAt.IsZero() {
		c.tickAt = c.now.Add(c.period())
	}
	switch ev := in.Event.(type) {
	case SessionOpened:
		c.me = ev.ID
		c.retarget()
	case SessionLost:
		c.me = ""
		c.retarget()
	case Members:
		c.live = slices.Clone(ev.Live)
		c.known = true
		c.retarget()
		c.maybeRead()
	case Leases:
		c.reading = false
		if ev.Err == nil && len(ev.Leases) == c.cfg.Partitions {
			c.seen = ev.Leases
			for p := range c.parts {
				c.parts[p].waitRead = false
			}
		}
	case Acquired:
		c.acquired(ev)
	case Renewed:
		c.renewed(ev)
	case Released:
		c.released(ev)
	case Drained:
		c.drained(ev.Partition)
	case Leave:
		c.leaving = true
	case Tick:
		if !c.now.Before(c.tickAt) {
			c.tickAt = c.now.Add(c.period())
			c.renewAll()
			c.maybeRead()
		}
	default:
		panic(fmt.Sprintf("owner: unknown event %T", in.Event))
	}
	if c.seen == nil {
		c.maybeRead()
	}
	c.plan()
	c.rd.Wake = c.wake()
	c.rd.Done = c.leaving && c.idle()
	return c.rd
}

func (c *Core) period() time.Duration { return c.cfg.TTL / 3 }

// retarget computes the assignment for the live sessions and this one.
func (c *Core) retarget() {
	ss := c.live
	if c.me != "" && !slices.Contains(ss, c.me) {
		ss = append(slices.Clone(ss), c.me)
	}
	c.target = Assign(c.cfg.Partitions, ss)
}

func (c *Core) maybeRead() {
	if !c.reading && c.me != "" && !c.leaving {
		c.reading = true
		c.rd.Read = true
	}
}

// mine reports whether p falls to this runner now.
func (c *Core) mine(p int) bool {
	return c.me != "" && !c.leaving && c.known && c.target[p] == c.me
}

// plan drains what is no longer this runner's, or whose lease lapsed, and
// acquires what falls to it and is free.
func (c *Core) plan() {
	for p := range c.parts {
		pt := &c.parts[p]
		switch pt.phase {
		case owned:
			if !c.now.Before(pt.lease.Expires) {
				// Not renewed in time (a stall): another runner may
				// hold it already. Its fence keeps both safe; stop
				// claiming there at once all the same.
				pt.lost = true
				c.stats.Lapsed++
				c.becomeDraining(p)
			} else if !c.mine(p) || pt.lease.Session != c.me {
				// Not this runner's now, or acquired under a session
				// since lost (the acquisition was in flight): its lease
				// names a session no renewal revives, so hand it over,
				// and take it again under this one.
				c.becomeDraining(p)
			}
		case free:
			if c.mine(p) && c.takeable(p) {
				pt.phase = acquiring
				c.rd.Acquire = append(c.rd.Acquire, p)
			}
		}
	}
}

// takeable reports whether p's lease, as last read, is free to this
// runner: nobody's, its own session's, or lapsed.
func (c *Core) takeable(p int) bool {
	if c.seen == nil || c.parts[p].waitRead {
		return false
	}
	l := c.seen[p]
	return l.Session == "" || l.Session == c.me || !l.Live || !c.now.Before(l.Expires)
}

func (c *Core) becomeDraining(p int) {
	c.parts[p].phase = draining
	c.stats.Drains++
	c.rd.Drain = append(c.rd.Drain, p)
}

func (c *Core) acquired(m Acquired) {
	pt := c.part(m.Partition)
	if pt == nil || pt.phase != acquiring {
		return
	}
	if m.Err != nil {
		pt.phase = free
		pt.waitRead = true
		if errors.Is(m.Err, events.ErrPartitionBusy) {
			c.stats.Refused++
		}
		return
	}
	*pt = part{phase: owned, lease: m.Lease}
	c.stats.Acquired++
	c.rd.Follow = append(c.rd.Follow, m.Partition)
	// A session lost (the lease names it, not c.me) or a leave
	// meanwhile: plan drains it at once, and the drain of a partition
	// with nothing claimed is quick.
}

func (c *Core) renewed(m Renewed) {
	pt := c.part(m.Partition)
	if pt == nil || !pt.renewing {
		return
	}
	pt.renewing = false
	switch {
	case m.Err == nil:
		if pt.phase == owned || pt.phase == draining {
			pt.lease = m.Lease
		}
	case errors.Is(m.Err, events.ErrLeaseLost):
		if !pt.lost {
			pt.lost = true
			c.stats.Lost++
		}
		if pt.phase == owned {
			c.becomeDraining(m.Partition)
		}
	}
	if pt.drained {
		pt.drained = false
		c.release(m.Partition)
	}
}

func (c *Core) drained(p int) {
	pt := c.part(p)
	if pt == nil || pt.phase != draining {
		return
	}
	c.rd.Unfollow = append(c.rd.Unfollow, p)
	if pt.renewing {
		pt.drained = true // release with the revision the renewal brings
		return
	}
	c.release(p)
}

// release gives back a drained partition's lease, unless it is lost.
func (c *Core) release(p int) {
	pt := &c.parts[p]
	if pt.lost {
		*pt = part{}
		return
	}
	pt.phase = releasing
	c.rd.Release = append(c.rd.Release, pt.lease)
}

func (c *Core) released(m Released) {
	pt := c.part(m.Partition)
	if pt == nil || pt.phase != releasing {
		return
	}
	*pt = part{}
	if m.Err == nil {
		c.stats.Released++
		if c.seen != nil {
			c.seen[m.Partition] = events.PartitionLease{Partition: m.Partition}
		}
	}
}

// renewAll renews every lease held, drained ones included: a drain takes
// time, and a lease that lapsed meanwhile would be a second owner's.
func (c *Core) renewAll() {
	for p := range c.parts {
		pt := &c.parts[p]
		if (pt.phase == owned || pt.phase == draining) && !pt.renewing && !pt.lost {
			pt.renewing = true
			c.rd.Renew = append(c.rd.Renew, pt.lease)
		}
	}
}

func (c *Core) part(p int) *part {
	if p < 0 || p >= len(c.parts) {
		return nil
	}
	return &c.parts[p]
}

// wake is the next tick: the periodic renewal and read, or sooner, the
// expiry of an owned lease.
func (c *Core) wake() time.Time {
	if c.leaving && c.idle() {
		return time.Time{}
	}
	at := c.tickAt
	for _, pt := range c.parts {
		if pt.phase == owned && pt.lease.Expires.Before(at) {
			at = pt.lease.Expires
		}
	}
	return at
}

// idle reports whether nothing is held or in flight.
func (c *Core) idle() bool {
	for _, pt := range c.parts {
		if pt.phase != free || pt.renewing {
			return false
		}
	}
	return !c.reading
}

// Claims reports whether the runner may claim the threads of partition p:
// it owns p and is not handing it over.
func (c *Core) Claims(p int) bool {
	pt := c.part(p)
	return pt != nil && pt.phase == owned
}

// Follows reports whether the runner follows partition p: it owns p, or
// is handing it over.
func (c *Core) Follows(p int) bool {
	pt := c.part(p)
	return pt != nil && (pt.phase == owned || pt.phase == draining)
}

// Owned returns the partitions the runner may claim threads of, in order.
func (c *Core) Owned() []int { return c.inPhase(owned) }

// Following returns the partitions the runner follows: owned, or being
// handed over.
func (c *Core) Following() []int { return c.inPhase(owned, draining) }

func (c *Core) inPhase(ph ...phase) []int {
	var out []int
	for p, pt := range c.parts {
		if slices.Contains(ph, pt.phase) {
			out = append(out, p)
		}
	}
	return out
}

// Target returns the assignment this runner works towards: the session
// each partition falls to among the live sessions it knows.
func (c *Core) Target() []string { return slices.Clone(c.target) }

// Stats returns the core's counters.
func (c *Core) Stats() Stats { return c.stats }

// Describe says where partition p is, for diagnostics.
func (c *Core) Describe(p int) string {
	pt := c.part(p)
	if pt == nil {
		return "no such partition"
	}
	var tgt string
	if c.target != nil {
		tgt = c.target[p]
	}
	return fmt.Sprintf("%s (lease rev %d, lost %v, renewing %v) target %q me %q", pt.phase, pt.lease.Revision, pt.lost, pt.renewing, tgt, c.me)
}
