package spec

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/artifactr/artifactr/events"
)

// modelLog writes a behaviour of the model as the log the code would
// write for it: each visible step its event, with fresh holders, run ids
// and request ids, each consuming step naming the message the model
// consumes (under the fence, the oldest pending one).
type modelLog struct {
	l          *tlog
	holder     [maxProcs]string
	runID      [maxMsgs + 1]string
	runBy      [maxMsgs + 1]string // the holder that started each run
	open       [maxMsgs + 1][]string
	posted     []uint64 // the log's sequence of each model message
	lastEnded  int
	nClaims, n int
}

func (w *modelLog) step(m tcl, a string, p int, from, to ThreadState) {
	if !visible(a, from, to) {
		return
	}
	w.n++
	switch a {
	case "Post":
		// Its own strategy: a first post under reject sets the thread's.
		w.posted = append(w.posted, w.l.postWith(events.StrategyEnqueue))
	case "PostIdle":
		w.posted = append(w.posted, w.l.postWith(events.StrategyReject))
	case "Claim":
		w.nClaims++
		w.holder[p] = fmt.Sprintf("%s-%d", procName(p), w.nClaims)
		w.l.claim(w.holder[p])
	case "Release":
		w.l.release(w.holder[p])
	case "RunStart":
		r := to.myRun[p]
		w.runID[r], w.runBy[r] = fmt.Sprintf("r%d", w.n), w.holder[p]
		w.l.start(w.holder[p], w.runID[r], w.msg(from, p))
	case "Ask":
		r := to.myRun[p]
		q := fmt.Sprintf("q%d", w.n)
		w.open[r] = append(w.open[r], q)
		w.l.ask(w.holder[p], w.runID[r], q)
	case "Reply":
		r := to.myRun[p]
		q := w.open[r][0]
		w.open[r] = w.open[r][1:]
		w.l.answer(w.holder[p], w.runID[r], q, w.msg(from, p))
	case "Steer":
		w.l.steer(w.holder[p], w.runID[to.myRun[p]], w.msg(from, p))
	case "Output":
		w.l.output(w.holder[p], w.runID[from.myRun[p]])
	case "RunEnd":
		r := from.myRun[p]
		w.lastEnded = int(r)
		w.l.end(w.holder[p], w.runID[r])
	case "Abandon":
		r := w.lastEnded // the run it planned to abandon ended first
		for i := 1; i <= m.c.NumMsgs; i++ {
			if from.runs[i] == active {
				r = i
			}
		}
		w.l.abandon(w.holder[p], w.runID[r], w.runBy[r])
	}
}

// msg is the log's message that p's consuming step takes: the model's
// seen[p] + 1 (without the fence, one consumed already).
func (w *modelLog) msg(from ThreadState, p int) uint64 { return w.posted[from.seen[p]] }

// walk writes one random behaviour of the model of c, of at most steps
// steps, and returns its log and whether a state on it breaks I1 or I3.
func walk(t *testing.T, c Config, r *rand.Rand, steps int) ([]string, *tlog, bool) {
	t.Helper()
	m, err := ThreadClaimLapse(c)
	if err != nil {
		t.Fatal(err)
	}
	tm := tcl{c}
	w := &modelLog{l: newLog()}
	w.l.runFence = c.RunFence
	s := m.Init[0]
	var trail []string
	broken := false
	for range steps {
		type succ struct {
			a   string
			arg string
			to  ThreadState
		}
		var all []succ
		for _, a := range m.Actions {
			for _, x := range a.Next(s) {
				all = append(all, succ{a.Name, x.Arg, x.State})
			}
		}
		if len(all) == 0 {
			break
		}
		x := all[r.IntN(len(all))]
		w.step(tm, x.a, procIndex(x.arg), s, x.to)
		trail = append(trail, Step[ThreadState]{Action: x.a, Arg: x.arg}.Name())
		s = x.to
		if !tm.I1_ConsumedAtMostOnce(s) || !tm.I3_OneActiveRun(s) {
			broken = true
			break
		}
	}
	return trail, w.l, broken
}

// Issue 27, item 6: the validator checked against the model it validates
// by, on the constants CI checks (ThreadClaimLapse.cfg and the others of
// checkedConfigs): random behaviours of the fenced model, written as logs,
// conform, with one verdict from the
// plain audit and the validator; random behaviours of the model without
// the fence that break I1 or I3 are flagged by both.
func TestTrace_modelBehavioursAsLogs(t *testing.T) {
	r := rand.New(rand.NewPCG(27, 6))
	n := 2000
	if testing.Short() {
		n = 300
	}
	events := 0
	for _, c := range checkedConfigs {
		for i := range n / len(checkedConfigs) {
			trail, l, _ := walk(t, c, r, 60)
			events += len(*l.envs)
			if rep := validate(*l.envs); !rep.OK() {
				t.Fatalf("%+v, walk %d: %s\nsteps: %v", c, i, rep.Nonconforming[0], trail)
			}
			oneVerdict(t, *l.envs)
		}
	}
	unfenced := DefaultConfig()
	unfenced.Fence = false
	flagged := 0
	for i := 0; flagged < 50 && i < 20*n; i++ {
		trail, l, broken := walk(t, unfenced, r, 60)
		if !broken {
			continue
		}
		flagged++
		if got := oneVerdict(t, *l.envs); !got["t"] {
			t.Fatalf("unfenced walk %d breaks I1 or I3, and conforms\nsteps: %v", i, trail)
		}
	}
	if flagged == 0 {
		t.Fatal("no unfenced walk broke I1 or I3")
	}
	t.Logf("%d fenced behaviours (%d events) conform; %d unfenced ones that break I1 or I3 are flagged by both", n, events, flagged)
}
