package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/internal/sys"
)

// Delivery is what the server delivered per event stored during a run,
// from its own counters (issue 29 item 4).
//
// The figure that matters is PerEvent: the messages the partition streams'
// consumers delivered to the runners (their follows, and the work queue
// when there is one), per event stored, from consumer info (each
// consumer's delivered count). It is taken per consumer, not from Varz,
// because out_msgs also counts what is no delivery: publish acks (one per
// append), API replies, direct gets, the lease watch's updates, and the
// bench's own follow, which plays the read models' part. OutMsgsPerEvent
// is given too, whole.
type Delivery struct {
	Events           uint64  `json:"events"`
	PerEvent         float64 `json:"deliveries_per_event"`
	FollowPerEvent   float64 `json:"follow_deliveries_per_event"`
	WorkPerEvent     float64 `json:"work_deliveries_per_event"`
	ObserverPerEvent float64 `json:"observer_deliveries_per_event"` // the bench's own follow
	OutMsgsPerEvent  float64 `json:"out_msgs_per_event"`
}

// deliveryCounts are the server's counters at one moment.
type deliveryCounts struct {
	outMsgs  int64
	stored   uint64
	durable  map[string]uint64 // work queue consumers: delivered
	follows  map[string]uint64 // ordered consumers (follows): delivered
	caughtUp int               // follows at their stream's last sequence
}

// consumerDeliveries returns the consumers of the partition streams there
// are now, with what they delivered.
func consumerDeliveries(ctx context.Context, ts *Temp) (map[string]uint64, error) {
	c, err := readDelivery(ctx, ts)
	if err != nil {
		return nil, err
	}
	return c.follows, nil
}

func readDelivery(ctx context.Context, ts *Temp) (deliveryCounts, error) {
	v, err := ts.Srv.NATS().Varz(&server.VarzOptions{})
	if err != nil {
		return deliveryCounts{}, err
	}
	c := deliveryCounts{outMsgs: v.OutMsgs, durable: map[string]uint64{}, follows: map[string]uint64{}}
	js, err := jetstream.New(ts.Store.Conn())
	if err != nil {
		return deliveryCounts{}, err
	}
	for _, name := range ts.Store.StreamNames() {
		st, err := js.Stream(ctx, name)
		if err != nil {
			return deliveryCounts{}, err
		}
		info, err := st.Info(ctx)
		if err != nil {
			return deliveryCounts{}, err
		}
		c.stored += info.State.LastSeq
		cl := st.ListConsumers(ctx)
		for ci := range cl.Info() {
			key := name + "/" + ci.Name
			if ci.Config.Durable != "" {
				c.durable[key] = ci.Delivered.Consumer
				continue
			}
			c.follows[key] = ci.Delivered.Consumer
			if ci.Delivered.Stream >= info.State.LastSeq {
				c.caughtUp++
			}
		}
		if err := cl.Err(); err != nil {
			return deliveryCounts{}, err
		}
	}
	return c, nil
}

// readDeliveryCaughtUp reads the counters once the follows delivered the
// last event of their streams: the bench's own one per partition, and the
// runners' (one per partition with partitions, one each without).
func readDeliveryCaughtUp(ctx context.Context, ts *Temp, partitions, runners int) (deliveryCounts, error) {
	want := 2 * partitions // the bench's and the owner's
	if partitions == 1 {
		want = 1 + runners
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := readDelivery(ctx, ts)
		if err != nil || c.caughtUp >= want || time.Now().After(deadline) {
			return c, err
		}
		if !sys.Sleep(ctx, 20*time.Millisecond) {
			return c, ctx.Err()
		}
	}
}

// since returns the deliveries from c0 to c, telling the bench's own
// follows (own) apart from the runners'.
func (c deliveryCounts) since(c0 deliveryCounts, own map[string]uint64) *Delivery {
	d := &Delivery{Events: c.stored - c0.stored}
	if d.Events == 0 {
		return d
	}
	var follow, work, obs uint64
	for k, n := range c.follows {
		if _, ok := own[k]; ok {
			obs += n - c0.follows[k]
		} else {
			follow += n - c0.follows[k]
		}
	}
	for k, n := range c.durable {
		work += n - c0.durable[k]
	}
	ev := float64(d.Events)
	d.FollowPerEvent, d.WorkPerEvent, d.ObserverPerEvent = float64(follow)/ev, float64(work)/ev, float64(obs)/ev
	d.PerEvent = d.FollowPerEvent + d.WorkPerEvent
	d.OutMsgsPerEvent = float64(c.outMsgs-c0.outMsgs) / ev
	return d
}

// waitOwned waits until the runners divide the partitions, each owned by
// one of them; with one partition, until they see each other's sessions.
func waitOwned(ctx context.Context, partitions int, rs []*runner.Runner) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		why := owned(partitions, rs)
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: runners did not settle: %s", why)
		}
		if !sys.Sleep(ctx, 20*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// owned says why the runners have not settled, or "".
func owned(partitions int, rs []*runner.Runner) string {
	if partitions == 1 {
		for _, r := range rs {
			if n := r.Stats().LiveSessions; n != int64(len(rs)) {
				return fmt.Sprintf("%s sees %d sessions", r.ID(), n)
			}
		}
		return ""
	}
	seen := make([]string, partitions)
	for _, r := range rs {
		o, f := r.Partitions()
		if !slices.Equal(o, f) {
			return fmt.Sprintf("%s owns %v, follows %v", r.ID(), o, f)
		}
		for _, p := range o {
			if seen[p] != "" {
				return fmt.Sprintf("partition %d owned twice", p)
			}
			seen[p] = r.ID()
		}
	}
	if i := slices.Index(seen, ""); i >= 0 {
		return fmt.Sprintf("partition %d has no owner", i)
	}
	return ""
}
