package chaos

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events/natsstore"
)

// wakeLog records, by thread, each wake-up the work queue handed a runner
// and each that runner acknowledged, so that a post left unclaimed says
// where its wake-up went.
type wakeLog struct {
	mu  sync.Mutex
	log map[string][]string
}

func (w *wakeLog) add(thread, what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.log == nil {
		w.log = map[string][]string{}
	}
	w.log[thread] = append(w.log[thread], what)
}

func (w *wakeLog) of(thread string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.log[thread]...)
}

// recordWakes wraps a runner's work source so that its deliveries and acks
// go to h.wakes.
type recordWakes struct {
	runner.WorkSource
	h  *harness
	id string
}

func (r recordWakes) Next(ctx context.Context) (string, func(), error) {
	th, ack, err := r.WorkSource.Next(ctx)
	if err != nil {
		return th, ack, err
	}
	at := time.Since(r.h.start).Round(time.Millisecond)
	r.h.wakes.add(th, fmt.Sprintf("%s to %s", at, r.id))
	return th, func() {
		r.h.wakes.add(th, fmt.Sprintf("%s acked by %s (delivered %s)", time.Since(r.h.start).Round(time.Millisecond), r.id, at))
		ack()
	}, nil
}

// partitionSource is a work queue split by partition (natsstore's
// WorkQueue.OpenPartition), as the runner pulls it when it owns partitions.
type partitionSource interface {
	OpenPartition(ctx context.Context, p int) (interface {
		Next(context.Context) (string, func(), error)
		Stop()
		Release()
	}, error)
}

// recordPartitionWakes is recordWakes for a work queue split by partition:
// it keeps OpenPartition, which the runner looks for, and records each
// partition's wake-ups.
type recordPartitionWakes struct {
	recordWakes
	parts partitionSource
}

func (r recordPartitionWakes) OpenPartition(ctx context.Context, p int) (interface {
	Next(context.Context) (string, func(), error)
	Stop()
	Release()
}, error) {
	w, err := r.parts.OpenPartition(ctx, p)
	if err != nil {
		return nil, err
	}
	return recordedPartition{w: w, rec: recordWakes{WorkSource: w, h: r.h, id: r.id}}, nil
}

// recordedPartition is one partition's work source, its wake-ups recorded.
type recordedPartition struct {
	w interface {
		Next(context.Context) (string, func(), error)
		Stop()
		Release()
	}
	rec recordWakes
}

func (r recordedPartition) Next(ctx context.Context) (string, func(), error) { return r.rec.Next(ctx) }
func (r recordedPartition) Stop()                                            { r.w.Stop() }
func (r recordedPartition) Release()                                         { r.w.Release() }

// wrapWork is the runners' WrapWork: their wake-ups are recorded.
func (h *harness) wrapWork(id string) func(runner.WorkSource) runner.WorkSource {
	return func(w runner.WorkSource) runner.WorkSource {
		rec := recordWakes{WorkSource: w, h: h, id: id}
		if ps, ok := w.(partitionSource); ok {
			return recordPartitionWakes{recordWakes: rec, parts: ps}
		}
		return rec
	}
}

// wakeTrail is thread's wake-ups, for a failure's trails.
func (h *harness) wakeTrail(thread string) string {
	w := h.wakes.of(thread)
	if len(w) == 0 {
		return "    wake-ups: none handed to a runner\n"
	}
	return "    wake-ups: " + strings.Join(w[max(0, len(w)-8):], "; ") + "\n"
}

// workQueueInfo is the shared work queue's state on the server, for a
// failure's trails: what it delivered, what waits for an ack, per
// partition stream.
func (h *harness) workQueueInfo() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js, err := jetstream.New(h.adminNC)
	if err != nil {
		return fmt.Sprintf("  work queue: %v\n", err)
	}
	var b strings.Builder
	for _, stream := range h.streams() {
		c, err := js.Consumer(ctx, stream, natsstore.DefaultWorkQueue)
		if err != nil {
			fmt.Fprintf(&b, "  work queue of %s: %v\n", stream, err)
			continue
		}
		i, err := c.Info(ctx)
		if err != nil {
			fmt.Fprintf(&b, "  work queue of %s: %v\n", stream, err)
			continue
		}
		fmt.Fprintf(&b, "  work queue of %s: delivered stream seq %d, ack floor %d, ack pending %d, redelivered %d, waiting pulls %d, pending %d\n",
			stream, i.Delivered.Stream, i.AckFloor.Stream, i.NumAckPending, i.NumRedelivered, i.NumWaiting, i.NumPending)
	}
	return b.String()
}
