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

// wakeTrail is thread's wake-ups, for a failure's trails.
func (h *harness) wakeTrail(thread string) string {
	w := h.wakes.of(thread)
	if len(w) == 0 {
		return "    wake-ups: none handed to a runner\n"
	}
	return "    wake-ups: " + strings.Join(w[max(0, len(w)-8):], "; ") + "\n"
}

// workQueueInfo is the shared work queue's state on the server, for a
// failure's trails: what it delivered, what waits for an ack.
func (h *harness) workQueueInfo() string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	js, err := jetstream.New(h.adminNC)
	if err != nil {
		return fmt.Sprintf("  work queue: %v\n", err)
	}
	c, err := js.Consumer(ctx, natsstore.DefaultStream, natsstore.DefaultWorkQueue)
	if err != nil {
		return fmt.Sprintf("  work queue: %v\n", err)
	}
	i, err := c.Info(ctx)
	if err != nil {
		return fmt.Sprintf("  work queue: %v\n", err)
	}
	return fmt.Sprintf("  work queue: delivered stream seq %d, ack floor %d, ack pending %d, redelivered %d, waiting pulls %d, pending %d\n",
		i.Delivered.Stream, i.AckFloor.Stream, i.NumAckPending, i.NumRedelivered, i.NumWaiting, i.NumPending)
}
