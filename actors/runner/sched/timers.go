package sched

import (
	"container/heap"
	"time"
)

// arm arms t to fire after d, and records it in the Ready.
func (s *Scheduler) arm(t Timer, d time.Duration) {
	t.At = s.now.Add(d)
	s.timers.seq++
	heap.Push(&s.timers, timerEntry{Timer: t, seq: s.timers.seq})
	s.rd.Timers = append(s.rd.Timers, t)
}

// jitter spreads d over [d/2, d) so that retries do not come in waves.
func (s *Scheduler) jitter(d time.Duration) time.Duration {
	return d/2 + time.Duration(s.rng.Int64N(int64(d/2)+1))
}

// fire runs the timers due, in the order of their times (of arming, for
// equal times), each followed by a pump as if it had come alone.
func (s *Scheduler) fire() {
	for len(s.timers.h) > 0 && !s.timers.h[0].At.After(s.now) {
		t := heap.Pop(&s.timers).(timerEntry).Timer
		switch t.Kind {
		case TimerRecheck:
			s.rechecked(t.Thread)
		case TimerOrphan:
			// Still under the lapsed session: the runner it fell to did
			// not take it. Claim it.
			if s.leases[t.Thread] == t.Dead {
				s.enqueue(workItem{thread: t.Thread, want: WantProbe})
			}
		case TimerRetry:
			s.enqueue(workItem{thread: t.Thread, want: t.Want})
		case TimerHandover:
			s.enqueue(workItem{thread: t.Thread, want: WantClaim})
		}
		s.pump()
	}
}

type timerEntry struct {
	Timer
	seq uint64 // arming order, so that equal times fire in it
}

// timerHeap is the pending timers, the earliest first.
type timerHeap struct {
	h   []timerEntry
	seq uint64
}

func (t *timerHeap) Len() int { return len(t.h) }
func (t *timerHeap) Less(i, j int) bool {
	a, b := t.h[i], t.h[j]
	if !a.At.Equal(b.At) {
		return a.At.Before(b.At)
	}
	return a.seq < b.seq
}
func (t *timerHeap) Swap(i, j int) { t.h[i], t.h[j] = t.h[j], t.h[i] }
func (t *timerHeap) Push(x any)    { t.h = append(t.h, x.(timerEntry)) }
func (t *timerHeap) Pop() any {
	n := len(t.h) - 1
	e := t.h[n]
	t.h[n] = timerEntry{}
	t.h = t.h[:n]
	return e
}

// next is when the earliest timer is due; zero when none is pending.
func (t *timerHeap) next() time.Time {
	if len(t.h) == 0 {
		return time.Time{}
	}
	return t.h[0].At
}
