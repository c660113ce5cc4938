package runner

import (
	"context"
	"slices"
	"time"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/thread"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/internal/sys"
	"github.com/artifactr/artifactr/projections"
)

// readHistory reads the run's history window from the log, once: the
// thread's core keeps no conversation (DESIGN §10), so a turn reads what
// its agent asks for, from the window's first message to the prompt. A
// failed read is retried until the run ends: an agent must not answer from
// a history that silently lacks messages.
func (h *runHandle) readHistory() {
	h.histOnce.Do(func() {
		from := thread.HistoryStart(h.start)
		if from == 0 {
			return
		}
		b := sys.NewBackoff(10*time.Millisecond, time.Second)
		for {
			envs, err := loadRange(h.ctx, h.a.env.store, h.a.claim.Thread, from, h.start.StartSeq-1)
			if err == nil && from == 1 {
				// A fork by reference: its history starts with its source's.
				err = projections.ResolveFirst(h.ctx, h.a.env.store, envs)
			}
			if err == nil {
				h.hist, h.conv = thread.HistoryFrom(h.a.claim.Thread, h.start, envs)
				return
			}
			h.a.log().Warn("history not read; retrying", "run", h.id, "err", err)
			if !b.Wait(h.ctx) {
				return
			}
		}
	})
}

// loadRange returns thread's events from from to upTo (stored already).
func loadRange(ctx context.Context, s events.Reader, th string, from, upTo uint64) ([]events.Envelope, error) {
	if from > upTo {
		return nil, nil
	}
	if b, ok := s.(events.BoundedLoader); ok {
		return b.LoadUpTo(ctx, th, from, upTo)
	}
	envs, err := s.Load(ctx, th, from)
	if err != nil {
		return nil, err
	}
	i, _ := slices.BinarySearchFunc(envs, upTo+1, func(e events.Envelope, seq uint64) int {
		switch {
		case e.Seq < seq:
			return -1
		case e.Seq > seq:
			return 1
		}
		return 0
	})
	return envs[:i], nil
}

// maxPage is the most messages one MessagesBefore returns.
const maxPage = 1024

// MessagesBefore implements [agent.Pager]: it reads the log backwards from
// seq, in spans that grow fourfold, until it has n messages or reaches the
// thread's start. A post whose message id an earlier post outside the
// spans read had is shown as a message: only the holder's view knows every
// id, and paging back is for reading, never for consuming.
func (h *runHandle) MessagesBefore(ctx context.Context, seq uint64, n int) ([]agent.Message, error) {
	n = min(n, maxPage)
	if n <= 0 || seq <= 1 {
		return nil, nil
	}
	th := h.a.claim.Thread
	for span := uint64(16 * n); ; span *= 4 {
		lo := uint64(1)
		if seq > span {
			lo = seq - span
		}
		envs, err := loadRange(ctx, h.a.env.store, th, lo, seq-1)
		if err != nil {
			return nil, err
		}
		v := projections.New(th)
		for _, env := range envs {
			v.Apply(env)
		}
		var out []agent.Message
		for _, m := range v.Messages {
			out = append(out, agent.Message{Seq: m.Seq, ID: m.MessageID, Author: m.Author, Text: m.Text, Assistant: m.Assistant})
		}
		if len(out) >= n || lo == 1 {
			return out[max(0, len(out)-n):], nil
		}
	}
}
