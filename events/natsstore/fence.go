package natsstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events"
)

// FenceLayout says where a stream keeps its claim markers (see
// [events.Subjects.RunFence]). It is a property of the stream, recorded in
// its metadata ([MetaFence]) when it is made: old and new protocols must
// never write one stream (spec README, "The migration").
type FenceLayout string

// The fence layouts.
const (
	// FenceClaim keeps markers on <prefix>.T.claim, and fences a consuming
	// write by the claim subject (the layout before issue 23).
	FenceClaim FenceLayout = "claim"
	// FenceRun (RUNFENCE) keeps markers on <prefix>.T.run, so every holder
	// write is one compare-and-set on the run subject.
	FenceRun FenceLayout = "run"
)

// MetaFence is the stream metadata key recording the fence layout: "run"
// for [FenceRun]; absent for [FenceClaim], so the claim layout's streams
// are made as before.
const MetaFence = "artifactr.fence"

// fenceOf returns the fence layout a stream's metadata records.
func fenceOf(c jetstream.StreamConfig) (FenceLayout, error) {
	switch v, ok := c.Metadata[MetaFence]; {
	case !ok:
		return FenceClaim, nil
	case FenceLayout(v) == FenceRun:
		return FenceRun, nil
	default:
		return "", fmt.Errorf("bad %s metadata %q", MetaFence, v)
	}
}

// ParseFenceLayout parses a fence layout's name, run or claim.
func ParseFenceLayout(v string) (FenceLayout, error) {
	switch l := FenceLayout(v); l {
	case FenceRun, FenceClaim:
		return l, nil
	}
	return "", fmt.Errorf("%q: want run or claim", v)
}

// Fence returns the layout the store writes in: the stream's recorded one,
// or the one it was opened with.
func (s *Store) Fence() FenceLayout {
	if s.subj.RunFence {
		return FenceRun
	}
	return FenceClaim
}

// checkFence takes stream p's recorded layout when Config.Fence is "" (from
// partition 0; the others must agree), and otherwise refuses a stream that
// records another layout than the one asked for.
func (s *Store) checkFence(p int, c jetstream.StreamConfig) error {
	got, err := fenceOf(c)
	if err != nil {
		return fmt.Errorf("natsstore: stream %s: %w: %w", c.Name, events.ErrLayout, err)
	}
	if p == 0 && s.cfg.Fence == "" {
		s.subj.RunFence = got == FenceRun
		return nil
	}
	if got != s.Fence() {
		asked := "the " + string(s.Fence()) + " layout"
		if s.cfg.Fence == "" {
			asked = "partition 0's " + string(s.Fence()) + " layout"
		}
		return fmt.Errorf("natsstore: %w: stream %s records the %s fence layout (%s), but the store was opened with %s: open it with Fence %q",
			events.ErrLayout, c.Name, got, MetaFence, asked, got)
	}
	return nil
}

// runFenceRefused maps a refused compare-and-set of a run-fenced consuming
// append ([events.FencedGuarded] under RUNFENCE), which expected w.after on
// the run subject: a marker after it means a newer claim or a release
// ([events.ErrThreadBusy]); else a write the holder has not read landed
// ([events.ErrRunMoved] with [events.ErrConflict]). publish has already
// looked for w's msg id when an earlier attempt may have landed. The read
// runs on a fresh bounded context: the caller's may have ended.
func (s *Store) runFenceRefused(detached context.Context, w write, refusal error) error {
	ctx, cancel := s.settleContext(detached)
	defer cancel()
	marker, err := s.markerAfter(ctx, w)
	switch {
	case err != nil:
		// Nothing was written; why is unknown. A conflict makes the
		// holder read the log, which tells.
		return fmt.Errorf("%w: %s expecting last run seq %d: refused, nothing written; reading the run subject back failed: %w",
			events.ErrConflict, w.what, w.after, errors.Join(refusal, err))
	case marker != 0:
		return fmt.Errorf("%w: %s expecting last run seq %d: a claim marker or release landed at %d, nothing written: %w",
			events.ErrThreadBusy, w.what, w.after, marker, refusal)
	}
	return fmt.Errorf("%w: %w: %s expected last run seq %d: a run event this writer has not read landed, nothing written: %w",
		events.ErrConflict, events.ErrRunMoved, w.what, w.after, refusal)
}

// markerAfter returns the sequence of the first thread_claimed or
// thread_released on w.subject after w.after, 0 when there is none. A
// message whose type header or body says marker counts: busy is the safe
// answer, as the holder then stops writing.
func (s *Store) markerAfter(ctx context.Context, w write) (uint64, error) {
	seq := w.after + 1
	for range maxReadBack {
		m, err := s.getMsg(ctx, w.stream, msgGetRequest{Seq: seq, NextFor: w.subject})
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return 0, nil
		}
		if err != nil {
			return 0, err
		}
		env := s.decodeRaw(m)
		if env.Type.Marker() || events.TypeOf(env.Event).Marker() {
			return m.Sequence, nil
		}
		seq = m.Sequence + 1
	}
	return 0, fmt.Errorf("natsstore: more than %d messages on %s since %d; gave up looking for a marker", maxReadBack, w.subject, w.after)
}
