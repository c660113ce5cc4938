package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections"
)

// Webhooks delivers the webhooks of runs: a run created with "webhook" has
// its URL stored in its message_posted, and gets one POST of its run JSON
// when it ends. The log drives it, not memory: a durable consumer of the
// stream (name DefaultWebhookDurable) sees each post with a webhook and each
// run event; a webhook is outstanding from its post until its POST
// succeeded or its retries ran out, and the consumer is acknowledged only
// up to the oldest outstanding post. So a serve that stops with a webhook
// outstanding, or in flight, delivers it after its restart: at least once;
// a POST whose answer was lost may come twice.
//
// Deliveries run beside the runners, never in their way: a slow or failing
// receiver delays only other webhooks, by at most its retries.
type Webhooks struct {
	// Store is the read-model store the durable consumer lives in.
	Store events.ReadModelStore
	// Client reads threads, to build the run JSON.
	Client *client.Client
	// Server maps the fold to the run JSON; it may be nil for tests that
	// need no assistant ids.
	Server *Server
	// Durable is the consumer's name. Default DefaultWebhookDurable.
	Durable string
	// Attempts bounds the POSTs of one webhook; Backoff is the wait after
	// the first failure, doubled after each. Defaults 6 and 500 ms
	// (the last wait 8 s).
	Attempts int
	Backoff  time.Duration
	// HTTP sends the POSTs. Default a client with a 10 s timeout.
	HTTP   *http.Client
	Logger *slog.Logger
}

// DefaultWebhookDurable is the durable consumer of [Webhooks].
const DefaultWebhookDurable = "httpapi-webhooks"

// outstanding is a post with a webhook whose delivery is not over.
type outstanding struct {
	thread, msgID, url string
	seq                uint64
	inflight           bool
}

// Run delivers webhooks until ctx ends. With partitions it runs one loop
// per partition, each with a durable consumer of its own on its
// partition's stream (Durable-p<p>): each stream has its own sequences.
func (wh *Webhooks) Run(ctx context.Context) error {
	if wh.Durable == "" {
		wh.Durable = DefaultWebhookDurable
	}
	if wh.Attempts <= 0 {
		wh.Attempts = 6
	}
	if wh.Backoff <= 0 {
		wh.Backoff = 500 * time.Millisecond
	}
	if wh.HTTP == nil {
		wh.HTTP = &http.Client{Timeout: 10 * time.Second}
	}
	if wh.Logger == nil {
		wh.Logger = slog.New(slog.DiscardHandler)
	}
	subj := wh.Store.Subjects()
	if !subj.Partitioned() {
		return wh.run(ctx, wh.Durable, subj.All())
	}
	errs := make([]error, subj.PartitionCount())
	var wg sync.WaitGroup
	for p := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[p] = wh.run(ctx, fmt.Sprintf("%s-p%d", wh.Durable, p), subj.PartitionAll(p))
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// run delivers the webhooks of the posts on filter, one stream's, through
// the durable consumer name.
func (wh *Webhooks) run(ctx context.Context, name, filter string) error {
	d, err := wh.Store.OpenDurable(ctx, events.DurableConfig{Name: name, Filter: filter, AckWait: 5 * time.Minute, MaxAckPending: 10_000})
	if err != nil {
		return fmt.Errorf("httpapi: webhooks: %w", err)
	}
	// Deliveries left unacked by an earlier serve come again at once, not
	// after the ack wait.
	if info, err := wh.Store.DurableState(ctx, name); err == nil && info.AckFloor > 0 {
		if err := d.Reset(ctx, info.AckFloor+1); err != nil {
			return fmt.Errorf("httpapi: webhooks: %w", err)
		}
	}
	var mu sync.Mutex // protects out
	out := map[uint64]*outstanding{}
	var wg sync.WaitGroup
	defer wg.Wait()
	var held []events.Delivery // delivered and not yet acked, in order
	for ctx.Err() == nil {
		ds, err := d.Fetch(ctx, 256, 2*time.Second)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			wh.Logger.Warn("webhooks: fetch failed", "err", err)
			time.Sleep(time.Second)
			continue
		}
		for _, dl := range ds {
			env := dl.Env
			if b := env.Event.GetMessagePosted(); b != nil && b.GetWebhook() != "" {
				mu.Lock()
				if out[env.Seq] == nil {
					out[env.Seq] = &outstanding{thread: env.Thread, msgID: b.GetMessageId(), url: b.GetWebhook(), seq: env.Seq}
				}
				mu.Unlock()
			}
			if !runEnding(env.Type) {
				continue
			}
			mu.Lock()
			var due []*outstanding
			for _, o := range out {
				if o.thread == env.Thread && !o.inflight {
					due = append(due, o)
				}
			}
			mu.Unlock()
			if len(due) > 0 {
				wh.check(ctx, env.Thread, due, &mu, out, &wg)
			}
		}
		held = append(held, ds...)
		held = wh.ack(ctx, d, held, &mu, out)
	}
	return nil
}

// runEnding reports whether an event of type t can end a LangGraph run.
func runEnding(t events.Type) bool {
	switch t {
	case events.TypeRunCompleted, events.TypeRunFailed, events.TypeRunAbandoned, events.TypeRequestOpened:
		return true
	}
	return false
}

// check reads thread and delivers, each in its own goroutine, the webhooks
// of due whose runs are over.
func (wh *Webhooks) check(ctx context.Context, thread string, due []*outstanding, mu *sync.Mutex, out map[uint64]*outstanding, wg *sync.WaitGroup) {
	t, err := wh.Client.Thread(ctx, thread)
	if err != nil {
		wh.Logger.Warn("webhooks: read thread failed", "thread", thread, "err", err)
		return
	}
	for _, o := range due {
		var m *projections.Message
		for i := range t.Messages {
			if t.Messages[i].Seq == o.seq {
				m = &t.Messages[i]
			}
		}
		if m == nil {
			continue
		}
		lr := runOf(t, m)
		if !lr.Final() {
			continue
		}
		body := wh.body(t, m, lr)
		mu.Lock()
		o.inflight = true
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok := wh.deliver(ctx, o.url, body)
			if ctx.Err() != nil && !ok {
				mu.Lock()
				o.inflight = false // redone by the next serve
				mu.Unlock()
				return
			}
			mu.Lock()
			delete(out, o.seq)
			mu.Unlock()
		}()
	}
}

func (wh *Webhooks) body(t *projections.Thread, m *projections.Message, lr lgRun) []byte {
	var j runJSON
	if wh.Server != nil {
		j = wh.Server.runJSONOf(t, m, lr)
	} else {
		j = runJSON{RunID: m.MessageID, ThreadID: t.ID, Status: lr.Status, CreatedAt: isoTime(m.Posted), UpdatedAt: isoTime(m.Posted)}
	}
	now := isoTime(time.Now())
	b, _ := json.Marshal(struct {
		runJSON
		RunStartedAt  string         `json:"run_started_at"`
		RunEndedAt    string         `json:"run_ended_at"`
		WebhookSentAt string         `json:"webhook_sent_at"`
		Values        map[string]any `json:"values"`
	}{j, isoTime(m.Posted), isoTime(t.LastActivity), now, outputOf(t, lr)})
	return b
}

// deliver POSTs body to url until a 2xx, a final refusal (4xx other than
// 408 and 429) or the attempts run out. It reports whether it is done.
func (wh *Webhooks) deliver(ctx context.Context, url string, body []byte) bool {
	wait := wh.Backoff
	for attempt := 1; ; attempt++ {
		code, err := wh.post(ctx, url, body)
		switch {
		case err == nil && code/100 == 2:
			return true
		case err == nil && code/100 == 4 && code != 408 && code != 429:
			wh.Logger.Warn("webhook refused; not retried", "url", url, "status", code)
			return true
		case attempt >= wh.Attempts:
			wh.Logger.Warn("webhook failed; giving up", "url", url, "attempts", attempt, "status", code, "err", err)
			return true
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return false
		case <-t.C:
		}
		wait *= 2
	}
}

func (wh *Webhooks) post(ctx context.Context, url string, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := wh.HTTP.Do(req)
	if err != nil {
		return 0, err
	}
	res.Body.Close()
	return res.StatusCode, nil
}

// ack acknowledges the held deliveries below the oldest outstanding post,
// and returns those still held.
func (wh *Webhooks) ack(ctx context.Context, d events.DurableConsumer, held []events.Delivery, mu *sync.Mutex, out map[uint64]*outstanding) []events.Delivery {
	mu.Lock()
	floor := ^uint64(0)
	for seq := range out {
		floor = min(floor, seq)
	}
	mu.Unlock()
	i := slices.IndexFunc(held, func(dl events.Delivery) bool { return dl.Env.Seq >= floor })
	if i < 0 {
		i = len(held)
	}
	if i == 0 {
		return held
	}
	if err := d.Ack(ctx, held[i-1]); err != nil && !errors.Is(err, context.Canceled) {
		wh.Logger.Warn("webhooks: ack failed", "err", err)
		return held
	}
	return compact(slices.Delete(held, 0, i), out, mu)
}

// compact keeps of held only the deliveries a later ack can use: the last
// before each outstanding post, and the newest. So a webhook that stays
// outstanding (its run never ends) holds a few deliveries, not every one
// after it.
func compact(held []events.Delivery, out map[uint64]*outstanding, mu *sync.Mutex) []events.Delivery {
	if len(held) < 2 {
		return held
	}
	mu.Lock()
	var seqs []uint64
	for seq := range out {
		seqs = append(seqs, seq)
	}
	mu.Unlock()
	slices.Sort(seqs)
	kept := held[:0]
	for i, dl := range held {
		last := i == len(held)-1
		if !last {
			next := held[i+1].Env.Seq
			j, _ := slices.BinarySearch(seqs, dl.Env.Seq+1)
			// dl is the last before an outstanding post when one lies in (dl, next].
			if j < len(seqs) && seqs[j] <= next {
				last = true
			}
		}
		if last {
			kept = append(kept, dl)
		}
	}
	return kept
}

// RunWebhooks delivers the webhooks of the API's runs until ctx ends (see
// [Webhooks]); store is the read-model store its durable consumer lives in.
func (s *Server) RunWebhooks(ctx context.Context, store events.ReadModelStore) error {
	wh := &Webhooks{Store: store, Client: s.c, Server: s, Logger: s.log}
	return wh.Run(ctx)
}
