package projections

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
	"github.com/artifactr/artifactr/internal/eventgen"
)

// decisions is what a holder decides from: the state a compact Thread must
// share with the whole fold of the same log.
type decisions struct {
	LastSeq, Taken                             uint64
	NumMessages                                int
	Pending                                    []Message
	Claim                                      Claim
	LastClaim, LastRun, LastPosted, DeletedSeq uint64
	Strategy                                   events.Strategy
	Active                                     *Run
	Open                                       []Request
	LastRunID                                  string
	LastRunStatus                              RunStatus
	LastRunEnd                                 uint64
	Metadata                                   string
}

func decisionsOf(t *Thread) decisions {
	d := decisions{
		LastSeq: t.LastSeq, Taken: t.Taken, NumMessages: t.NumMessages(), Pending: t.Pending(), Claim: t.Claim,
		LastClaim: t.LastClaimSubjectSeq, LastRun: t.LastRunSubjectSeq, LastPosted: t.LastPostedSubjectSeq,
		DeletedSeq: t.DeletedSeq, Strategy: t.Strategy, Metadata: fmt.Sprint(t.Metadata),
	}
	if r := t.ActiveRun; r != nil {
		c := *r
		c.Outputs, c.Output, c.Steering = nil, "", nil // texts no decision reads
		// Metrics' only, and a compact view knows it only for a prompt it
		// still held: not one a start took from behind the taken cursor.
		c.PromptPosted, c.PromptTraceParent = time.Time{}, ""
		d.Active = &c
	}
	for _, q := range t.OpenRequests() {
		d.Open = append(d.Open, *q)
	}
	if n := len(t.Runs); n > 0 {
		r := t.Runs[n-1]
		d.LastRunID, d.LastRunStatus, d.LastRunEnd = r.ID, r.Status, r.EndSeq
	}
	return d
}

// withReposts returns envs with some posts given the id of an earlier post
// of the same thread, and some consuming events pointed at such a repost, as
// a hostile client and a forger would write them.
func withReposts(rng *rand.Rand, envs []events.Envelope) []events.Envelope {
	out := make([]events.Envelope, len(envs))
	ids := map[string][]string{}
	reposts := map[string][]uint64{}
	for i, env := range envs {
		out[i] = env
		ev := env.Event
		if ev == nil {
			continue
		}
		switch b := ev.Body.(type) {
		case *eventspb.Event_MessagePosted:
			if prev := ids[env.Thread]; len(prev) > 0 && rng.IntN(8) == 0 {
				c := proto.Clone(ev).(*eventspb.Event)
				c.GetMessagePosted().MessageId = prev[rng.IntN(len(prev))]
				out[i].Event = c
				reposts[env.Thread] = append(reposts[env.Thread], env.Seq)
				continue
			}
			ids[env.Thread] = append(ids[env.Thread], b.MessagePosted.GetMessageId())
		case *eventspb.Event_RunStarted:
			if rp := reposts[env.Thread]; len(rp) > 0 && rng.IntN(6) == 0 {
				c := proto.Clone(ev).(*eventspb.Event)
				c.GetRunStarted().PromptSeq = rp[rng.IntN(len(rp))]
				out[i].Event = c
			}
		}
	}
	return out
}

// A compact Thread, compacted after every event and sometimes saved as a
// snapshot and read back, decides as the whole fold of the same log at
// every event: the same taken cursor, pending messages, message count,
// active run, open requests, claim and subject sequences. Logs with
// faults, chaos and reposts.
func TestThread_Compact_decidesAsTheWholeFold(t *testing.T) {
	for seed := range uint64(16) {
		rng := rand.New(rand.NewPCG(seed, 7))
		cfg := eventgen.Config{Threads: 2, Events: 800, Faults: float64(seed%4) / 8, Chaos: seed%2 == 1}
		envs := withReposts(rng, randomLog(seed, cfg))
		for id, tenvs := range byThread(envs) {
			whole, compact := New(id), New(id)
			for i, env := range tenvs {
				whole.Apply(env)
				compact.Apply(env)
				compact.Compact()
				if rng.IntN(50) == 0 {
					data, err := compact.EncodeSnapshot()
					if err != nil {
						t.Fatalf("seed %d %s: encode: %v", seed, id, err)
					}
					if compact, err = DecodeSnapshot(id, data); err != nil {
						t.Fatalf("seed %d %s: decode: %v", seed, id, err)
					}
				}
				if w, c := decisionsOf(whole), decisionsOf(compact); !reflect.DeepEqual(w, c) {
					t.Fatalf("seed %d thread %s after event %d (seq %d, %s):\nwhole   %+v\ncompact %+v", seed, id, i, env.Seq, env.Type, w, c)
				}
			}
			if want := whole.RecentBefore(whole.LastSeq+1, RecentWindow); !reflect.DeepEqual(compact.RecentBefore(whole.LastSeq+1, RecentWindow), want) {
				t.Fatalf("seed %d thread %s: recent %v, want %v", seed, id, compact.RecentBefore(whole.LastSeq+1, RecentWindow), want)
			}
		}
	}
}

// A compact Thread's memory does not grow with consumed messages and ended
// runs: what grows is 16 bytes of fingerprint a message id.
func TestThread_Compact_holdsNoHistory(t *testing.T) {
	th := New("long")
	var seq uint64
	next := func() uint64 { seq++; return seq }
	c := events.Claim{Thread: "long", Holder: "h", Seq: next()}
	th.Apply(events.Envelope{Thread: "long", Seq: c.Seq, Kind: events.KindClaim, Event: &eventspb.Event{Thread: "long", ClaimSeq: 0, Holder: "h",
		Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: "h", LeaseRevision: 1}}}})
	for i := range 5000 {
		post := next()
		th.Apply(events.Envelope{Thread: "long", Seq: post, Kind: events.KindPosted, Event: &eventspb.Event{Thread: "long",
			Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: fmt.Sprintf("m%d", i), Author: "a", Text: "some text"}}}})
		run := fmt.Sprintf("r%d", i)
		th.Apply(events.Envelope{Thread: "long", Seq: next(), Kind: events.KindRun, Event: events.NewRunStarted(c, time.Time{}, run, post, "echo")})
		th.Apply(events.Envelope{Thread: "long", Seq: next(), Kind: events.KindRun, Event: events.NewRunOutput(c, time.Time{}, run, "echo: some text")})
		th.Apply(events.Envelope{Thread: "long", Seq: next(), Kind: events.KindRun, Event: events.NewRunCompleted(c, time.Time{}, run, "echo: some text")})
		th.Compact()
	}
	if len(th.Messages) != 0 || len(th.Runs) != 1 || len(th.Recent) > 2*RecentWindow || th.NumMessages() != 5000 || th.compact.ids.len() != 5000 {
		t.Fatalf("%d messages, %d runs, %d recent, %d counted, %d ids", len(th.Messages), len(th.Runs), len(th.Recent), th.NumMessages(), th.compact.ids.len())
	}
	data, err := th.EncodeSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	// 16 bytes a fingerprint, base64 in JSON: about 22 bytes a message.
	if per := len(data) / 5000; per > 24 {
		t.Fatalf("snapshot of %d bytes: %d bytes a message", len(data), per)
	}
	// A repost of the first message's id, long consumed, is no message.
	th.Apply(events.Envelope{Thread: "long", Seq: next(), Kind: events.KindPosted, Event: &eventspb.Event{Thread: "long",
		Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: "m0", Author: "a", Text: "again"}}}})
	if p := th.Pending(); len(p) != 0 {
		t.Fatalf("a repost of a consumed id is pending: %+v", p)
	}
}

// resolveFirsts sets each post's FirstPost as the store's index would
// (events.FirstPosts): the thread's first post of its id, with some ids'
// entries forged first to name a post of another id, for which the index
// says 0 ("cannot say").
func resolveFirsts(rng *rand.Rand, envs []events.Envelope) []events.Envelope {
	out := slices.Clone(envs)
	first := map[string]uint64{}
	forged := map[string]bool{}
	for i := range out {
		env := &out[i]
		if !events.NeedsFirstPost(env) {
			continue
		}
		key := env.Thread + "." + env.Event.GetMessagePosted().GetMessageId()
		if _, seen := first[key]; !seen {
			first[key] = env.Seq
			forged[key] = rng.IntN(10) == 0
		}
		if !forged[key] {
			env.FirstPost = first[key]
		}
	}
	return out
}

// With the index, a compact Thread decides as the whole fold of the same
// log (unresolved: every id in memory), and remembers only the ids of the
// forged entries.
func TestThread_Compact_decidesAsTheWholeFold_resolved(t *testing.T) {
	for seed := range uint64(16) {
		rng := rand.New(rand.NewPCG(seed, 11))
		cfg := eventgen.Config{Threads: 2, Events: 800, Faults: float64(seed%4) / 8, Chaos: seed%2 == 1}
		envs := withReposts(rng, randomLog(seed, cfg))
		resolved := resolveFirsts(rng, envs)
		for id, tenvs := range byThread(envs) {
			renvs := byThread(resolved)[id]
			whole, compact := New(id), New(id)
			forged := map[string]bool{}
			for i, env := range tenvs {
				whole.Apply(env)
				compact.Apply(renvs[i])
				compact.Compact()
				if events.NeedsFirstPost(&env) && renvs[i].FirstPost == 0 {
					forged[env.Event.GetMessagePosted().GetMessageId()] = true
				}
				if rng.IntN(50) == 0 {
					data, err := compact.EncodeSnapshot()
					if err != nil {
						t.Fatalf("seed %d %s: encode: %v", seed, id, err)
					}
					if compact, err = DecodeSnapshot(id, data); err != nil {
						t.Fatalf("seed %d %s: decode: %v", seed, id, err)
					}
				}
				if w, c := decisionsOf(whole), decisionsOf(compact); !reflect.DeepEqual(w, c) {
					t.Fatalf("seed %d thread %s after event %d (seq %d, %s):\nwhole   %+v\ncompact %+v", seed, id, i, env.Seq, env.Type, w, c)
				}
			}
			if got := compact.compact.ids.len(); got != len(forged) {
				t.Fatalf("seed %d thread %s: the compact view keeps %d ids, want the %d of forged entries", seed, id, got, len(forged))
			}
		}
	}
}

// With the index, a compact Thread's memory and snapshot do not grow with
// the thread's messages at all.
func TestThread_Compact_holdsNoHistory_resolved(t *testing.T) {
	th := New("long")
	var seq uint64
	next := func() uint64 { seq++; return seq }
	c := events.Claim{Thread: "long", Holder: "h", Seq: next()}
	th.Apply(events.Envelope{Thread: "long", Seq: c.Seq, Kind: events.KindClaim, Event: &eventspb.Event{Thread: "long", Holder: "h",
		Body: &eventspb.Event_ThreadClaimed{ThreadClaimed: &eventspb.ThreadClaimed{Holder: "h", LeaseRevision: 1}}}})
	first := uint64(0)
	var sizes []int
	for i := range 5000 {
		post := next()
		if i == 0 {
			first = post
		}
		th.Apply(events.Envelope{Thread: "long", Seq: post, Kind: events.KindPosted, FirstPost: post, Event: &eventspb.Event{Thread: "long",
			Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: fmt.Sprintf("m%d", i), Author: "a", Text: "some text"}}}})
		run := fmt.Sprintf("r%d", i)
		th.Apply(events.Envelope{Thread: "long", Seq: next(), Kind: events.KindRun, Event: events.NewRunStarted(c, time.Time{}, run, post, "echo")})
		th.Apply(events.Envelope{Thread: "long", Seq: next(), Kind: events.KindRun, Event: events.NewRunCompleted(c, time.Time{}, run, "echo: some text")})
		th.Compact()
		if i == 999 || i == 4999 {
			data, err := th.EncodeSnapshot()
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(data))
		}
	}
	if th.compact.ids.len() != 0 || th.NumMessages() != 5000 {
		t.Fatalf("%d ids kept, %d messages counted; want 0 and 5000", th.compact.ids.len(), th.NumMessages())
	}
	// Its size is its newest messages' sequences (Recent) and its last
	// run, whatever the length: 2 to 8 KiB, not 22 bytes a message.
	if sizes[0] > 8<<10 || sizes[1] > 8<<10 {
		t.Fatalf("the snapshot is %d bytes at 1,000 messages and %d at 5,000, over 8 KiB", sizes[0], sizes[1])
	}
	// A repost of the first message's id, resolved to it, is no message.
	th.Apply(events.Envelope{Thread: "long", Seq: next(), Kind: events.KindPosted, FirstPost: first, Event: &eventspb.Event{Thread: "long",
		Body: &eventspb.Event_MessagePosted{MessagePosted: &eventspb.MessagePosted{MessageId: "m0", Author: "a", Text: "again"}}}})
	if p := th.Pending(); len(p) != 0 {
		t.Fatalf("a repost of a consumed id is pending: %+v", p)
	}
}
