package sched

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/artifactr/artifactr/events"
)

// shellModel is a faithful loop around a scheduler: it carries out each
// Ready at once, with I/O ending in an order a seeded PRNG picks, and
// checks the loop's contract and the scheduler's invariants after every
// step.
type shellModel struct {
	t        *testing.T
	s        *Scheduler
	rng      *rand.Rand
	now      time.Time
	session  string
	nextSess int
	seq      uint64
	peeks    map[string]bool
	claims   map[string]Claim
	held     map[string]string // thread -> claim's session
	acked    map[int]int       // ack id -> times run
	nextAck  int
	draining bool
	done     bool
}

func (m *shellModel) step(ev Event) {
	m.t.Helper()
	rd := m.s.Step(Input{Now: m.now, Event: ev})
	m.carryOut(ev, rd)
}

func (m *shellModel) carryOut(ev Event, rd Ready) {
	m.t.Helper()
	if rd.Forward {
		if env := ev.(Routed).Env; m.held[env.Thread] == "" {
			m.t.Fatalf("forwarded %s, not held", env.Thread)
		}
	}
	for _, th := range rd.Peeks {
		m.start(th)
		m.peeks[th] = true
	}
	for _, c := range rd.Claims {
		m.start(c.Thread)
		if c.Session.ID == "" || c.Session.ID != m.session {
			m.t.Fatalf("claim of %s under %q, session %q", c.Thread, c.Session.ID, m.session)
		}
		m.claims[c.Thread] = c
	}
	if n := len(m.peeks) + len(m.claims); n > m.s.cfg.MaxClaiming {
		m.t.Fatalf("%d in flight, MaxClaiming %d", n, m.s.cfg.MaxClaiming)
	}
	for _, a := range rd.Acks {
		a()
	}
	for _, th := range append(rd.SessionGone, rd.Drain...) {
		if m.held[th] == "" {
			m.t.Fatalf("told %s's actor, not held", th)
		}
	}
	if rd.Done {
		if !m.draining || len(m.held)+len(m.peeks)+len(m.claims) != 0 {
			m.t.Fatalf("done with held %v, in flight %v %v, draining %v", m.held, m.peeks, m.claims, m.draining)
		}
		m.done = true
	}
	if !rd.Wake.IsZero() && rd.Wake.Before(m.now) && !isTick(ev) {
		m.t.Fatalf("Wake %v is past after a step at %v", rd.Wake, m.now)
	}
	if rd.Spawn != nil {
		sp := *rd.Spawn
		if m.draining {
			m.t.Fatal("spawned while draining")
		}
		var err error
		if m.rng.IntN(20) == 0 {
			err = errors.New("spawn failed")
		} else {
			m.held[sp.Thread] = sp.Claim.Lease.Session
		}
		m.carryOut(nil, m.s.Step(Input{Now: m.now, Event: Spawned{Spawn: sp, Err: err}}))
	}
}

func isTick(ev Event) bool { _, ok := ev.(Tick); return ok }

func (m *shellModel) start(th string) {
	m.t.Helper()
	if m.draining {
		m.t.Fatalf("started %s while draining", th)
	}
	if m.peeks[th] || m.claims[th].Thread != "" || m.held[th] != "" {
		m.t.Fatalf("started %s again: peek %v claim %v held %q", th, m.peeks[th], m.claims[th].Thread != "", m.held[th])
	}
}

func pick[V any](rng *rand.Rand, mp map[string]V) (string, bool) {
	if len(mp) == 0 {
		return "", false
	}
	i := rng.IntN(len(mp))
	for k := range mp {
		if i == 0 {
			return k, true
		}
		i--
	}
	panic("unreachable")
}

// one feeds the scheduler one input the PRNG picks.
func (m *shellModel) one() {
	th := fmt.Sprintf("t%d", m.rng.IntN(8))
	sess := []string{m.session, "other", "dead"}[m.rng.IntN(3)]
	switch m.rng.IntN(14) {
	case 0:
		m.seq++
		m.step(Routed{events.Envelope{Seq: m.seq, Thread: th, Kind: events.KindPosted, Type: events.TypeMessagePosted}})
	case 1:
		id := m.nextAck
		m.nextAck++
		m.step(Woken{Thread: th, Ack: func() {
			m.acked[id]++
			if m.acked[id] > 1 {
				m.t.Fatalf("ack %d run twice", id)
			}
		}})
	case 2:
		m.step(LookAt{Thread: th})
	case 3:
		if th, ok := pick(m.rng, m.peeks); ok {
			delete(m.peeks, th)
			m.step(PeekDone{Thread: th, Work: m.rng.IntN(2) == 0})
		}
	case 4, 5:
		if th, ok := pick(m.rng, m.claims); ok {
			c := m.claims[th]
			delete(m.claims, th)
			var err error
			switch m.rng.IntN(4) {
			case 0:
				err = events.ErrThreadBusy
			case 1:
				err = errors.New("unreachable")
			}
			m.seq++
			cl := events.Claim{Thread: th, Seq: m.seq, Lease: events.Lease{Session: c.Session.ID}}
			m.step(ClaimDone{Thread: th, Claim: cl, Err: err})
		}
	case 6:
		if th, ok := pick(m.rng, m.held); ok {
			delete(m.held, th)
			m.step(Terminated{Thread: th, Clean: m.rng.IntN(4) != 0, Rework: m.rng.IntN(3) == 0, Released: m.rng.IntN(2) == 0})
		}
	case 7:
		m.step(LeaseChanged{events.LeaseUpdate{Thread: th, Session: sess, Present: m.rng.IntN(2) == 0}})
	case 8:
		m.step(LeaseChanged{events.LeaseUpdate{Session: sess, Present: m.rng.IntN(2) == 0}})
	case 9:
		m.step(LeaseChanged{events.LeaseUpdate{CaughtUp: true}})
	case 10:
		if m.session != "" && m.rng.IntN(4) == 0 {
			lost := m.session
			m.session = ""
			m.step(SessionLost{ID: lost})
		} else if m.session == "" {
			m.nextSess++
			m.session = fmt.Sprintf("s%d", m.nextSess)
			m.step(SessionOpened{Session: events.Session{ID: m.session}})
		}
	case 11, 12:
		m.now = m.now.Add(time.Duration(m.rng.Int64N(int64(3 * ttl))))
		m.step(Tick{})
	case 13:
		if m.rng.IntN(30) == 0 {
			m.draining = true
			m.step(Drain{})
		}
	}
}

// Property: whatever happens in whatever order, the scheduler starts no
// second claim or peek of a thread in flight or held, keeps MaxClaiming,
// runs no ack twice, claims only under its live session, starts nothing
// while draining, and says Done only when nothing is held or in flight.
// After a drain, every held thread terminating ends it.
func TestScheduler_Step_properties(t *testing.T) {
	for seed := range uint64(300) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			m := &shellModel{
				t: t, rng: rng, now: t0, session: "s0",
				peeks: map[string]bool{}, claims: map[string]Claim{}, held: map[string]string{}, acked: map[int]int{},
			}
			m.s = New(Config{ClaimTTL: ttl, MaxClaiming: 3, Work: seed%2 == 0, Seed: seed, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, events.Session{ID: "s0"})
			for range 400 {
				m.one()
			}
			if !m.draining {
				m.draining = true
				m.step(Drain{})
			}
			for th := range m.peeks {
				delete(m.peeks, th)
				m.step(PeekDone{Thread: th})
			}
			for th := range m.claims {
				delete(m.claims, th)
				m.step(ClaimDone{Thread: th, Err: errors.New("x")})
			}
			for th := range m.held {
				delete(m.held, th)
				m.step(Terminated{Thread: th, Clean: true, Released: true})
			}
			if !m.done {
				t.Fatal("the drain never ended")
			}
		})
	}
}
