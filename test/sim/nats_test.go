package sim_test

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/projections/audit"
	"github.com/artifactr/artifactr/test/sim"
)

// flagNATS is how many seeds TestSim_nats runs on natsstore.
var flagNATS = flag.Int("sim.nats", envInt("SIM_NATS", 0), "sim: seeds run on natsstore with an embedded server (default 30; 2 with -race or -short)")

func natsSeeds() int {
	switch {
	case *flagNATS > 0:
		return *flagNATS
	case raceOn || testing.Short():
		return 2
	}
	return 30
}

// One embedded server per test binary, started by the first test that
// needs it and shut down by TestMain.
var server struct {
	once sync.Once
	srv  *natsembed.Server
	dir  string
	err  error
	// env is shared by every test, so its seed counter, which names the
	// seeds' streams, never starts again at SIM1 on the same server.
	env *sim.NATS
}

func TestMain(m *testing.M) {
	code := m.Run()
	if server.srv != nil {
		server.srv.Shutdown()
	}
	if server.dir != "" {
		os.RemoveAll(server.dir)
	}
	os.Exit(code)
}

// keepStreamsDir makes a stream that lives as long as the server. When the
// account's last stream is deleted, nats-server removes the account's
// now empty streams directory in a goroutine of its own, which can race a
// stream being created meanwhile ("error creating store for stream", about
// once in a hundred runs of TestSim_natsReplays, whose seeds each delete
// all they made). With this stream the directory is never empty.
func keepStreamsDir(url string) error {
	nc, err := nats.Connect(url)
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = js.CreateStream(ctx, jetstream.StreamConfig{Name: "SIMKEEP", Subjects: []string{"simkeep.>"}})
	return err
}

// natsEnv returns the binary's server, starting it on first use.
func natsEnv(t *testing.T) *sim.NATS {
	t.Helper()
	server.once.Do(func() {
		server.dir, server.err = os.MkdirTemp("", "artifactr-sim-nats-")
		if server.err != nil {
			return
		}
		server.srv, server.err = natsembed.Start(natsembed.Config{
			DataDir: server.dir,
			Listen:  "127.0.0.1:-1",
			NoSync:  true, // test data need not survive power loss
			Logger:  slog.New(slog.DiscardHandler),
		})
		if server.err == nil {
			server.err = keepStreamsDir(server.srv.ClientURL())
		}
		if server.err == nil {
			server.env = &sim.NATS{URL: server.srv.ClientURL()}
		}
	})
	if server.err != nil {
		t.Fatalf("sim: embedded nats-server: %v", server.err)
	}
	return server.env
}

// TestSim_nats runs a share of the seeds on natsstore against one embedded
// server, every check fatal, with memstore's faults injected around and
// inside the real store, and requires that the faults made natsstore settle
// unknown outcomes by reading the subject back: a count of 0 would mean its
// read-back path went untested.
func TestSim_nats(t *testing.T) {
	env := natsEnv(t)
	cfg := sim.Config{Steps: *flagSteps, NATS: env, Layout: layout(t)}
	if *flagSeed != "" {
		seed, err := strconv.ParseUint(*flagSeed, 10, 64)
		if err != nil {
			t.Fatalf("-sim.seed %q: %v", *flagSeed, err)
		}
		cfg.Trace = true
		r := sim.Run(seed, cfg)
		t.Logf("seed %d on natsstore, fence on the run subject %v: %d steps, %d events, stats %+v, natsstore %+v\n%s", seed, r.RunFence, r.Steps, r.Events, r.Stats, r.NATS, r.FormatTrace())
		if r.Failed() {
			t.Fatalf("seed %d on natsstore: %s: %s", seed, r.Check, r.Failure)
		}
		return
	}
	base, n := baseSeed(t), natsSeeds()
	t.Logf("natsstore: base seed %d: seeds %d..%d, %d steps each (set -sim.base=%d to rerun these seeds)", base, base, base+uint64(n)-1, cfg.Steps, base)
	var (
		total     sim.Stats
		nats      sim.NATSStats
		evs       int
		runFenced int
	)
	ran, d, shards := runSeeds(t, base, n, cfg, func(_ uint64, r sim.Result) {
		evs += r.Events
		if r.RunFence {
			runFenced++
		}
		add(&total, r.Stats)
		nats.Add(r.NATS)
	}, func(t *testing.T, seed uint64, r sim.Result) { reportNATS(t, seed, cfg, r) })
	t.Logf("natsstore: %d seeds in %s (%.1f seeds/s on %d shards), %d on the run subject's layout: %d events", ran, d.Round(time.Millisecond), float64(ran)/d.Seconds(), shards, runFenced, evs)
	t.Logf("exercised: %+v", total)
	t.Logf("natsstore settled: %+v", nats)
	if t.Failed() || ran < n {
		return
	}
	// Faults come a few times a seed, read-backs that find the write
	// about once in three seeds: below minReadBackSeeds a run may miss
	// them by chance (TestSim_natsReadBack requires them on fixed seeds).
	if nats.SendFaults == 0 || ran >= minReadBackSeeds && nats.ReadBackLanded == 0 {
		t.Fatalf("over %d seeds, %d attempts faulted inside natsstore and %d calls were settled as written by reading back: the read-back path went unexercised", ran, nats.SendFaults, nats.ReadBackLanded)
	}
}

// minReadBackSeeds is the fewest random seeds over which TestSim_nats
// requires a read-back that found its write: at about 0.4 a seed, 20
// seeds miss by chance about once in 3,000 runs.
const minReadBackSeeds = 20

// reportNATS replays a seed that failed on natsstore with its trace and
// fails t with it and the command that replays it. The replay need not
// fail the same way: a real server's timing can differ (see nats.go).
func reportNATS(t *testing.T, seed uint64, cfg sim.Config, r sim.Result) {
	t.Helper()
	cfg.Trace = true
	again := sim.Run(seed, cfg)
	note := ""
	if again.Check != r.Check || again.Steps != r.Steps {
		note = fmt.Sprintf("\n(the replay below ran otherwise: %s: %s; natsstore runs replay exactly only when the server answers alike)", again.Check, again.Failure)
	}
	t.Fatalf("seed %d on natsstore failed at step %d: %s: %s%s\ntrace:\n%s\nreplay: %s",
		seed, r.Steps, r.Check, r.Failure, note, again.FormatTrace(), replayCmd("TestSim_nats", seed, cfg.Steps, fenceArg(r)))
}

// TestSim_natsReplays runs one seed twice on natsstore: the traces must
// match, unless the server timed out for real in either run, which the
// simulation does not control.
func TestSim_natsReplays(t *testing.T) {
	cfg := sim.Config{Steps: min(*flagSteps, 150), Trace: true, NATS: natsEnv(t)}
	const seed = 7
	a, b := sim.Run(seed, cfg), sim.Run(seed, cfg)
	if a.Failed() || b.Failed() {
		t.Fatalf("seed %d on natsstore failed: %s: %s / %s: %s", seed, a.Check, a.Failure, b.Check, b.Failure)
	}
	if a.NATS.RealTimeouts+b.NATS.RealTimeouts > 0 {
		t.Logf("seed %d: the server timed out for real (%d, %d times); traces not compared", seed, a.NATS.RealTimeouts, b.NATS.RealTimeouts)
		return
	}
	if a.FormatTrace() != b.FormatTrace() {
		t.Fatalf("seed %d ran two ways on natsstore:\n%s\n---\n%s", seed, a.FormatTrace(), b.FormatTrace())
	}
	t.Logf("seed %d on natsstore: %d trace lines, twice alike; natsstore %+v", seed, len(a.Trace), a.NATS)
}

// TestSim_natsReadBack runs fixed seeds on natsstore and requires that the
// injected faults made natsstore settle unknown outcomes in each way:
// reading the subject back and finding the write (ReadBackLanded), also
// past a newer write by another process (ReadBackScanned), reading it back
// and finding nothing (ReadBackRefused), and a duplicate ack (DupSettled). The seeds are fixed, so the counts are too (unless the
// server times out for real): a read-back that stopped settling, or faults
// that stopped reaching it, fail here rather than by chance.
func TestSim_natsReadBack(t *testing.T) {
	cfg := sim.Config{Steps: *flagSteps, NATS: natsEnv(t)}
	var (
		mu    sync.Mutex // protects total
		total sim.NATSStats
		n     = natsReadBackSeeds()
	)
	t.Run("seeds", func(t *testing.T) {
		for seed := uint64(1); seed <= n; seed++ {
			t.Run(fmt.Sprint(seed), func(t *testing.T) {
				t.Parallel()
				r := sim.Run(seed, cfg)
				if r.Failed() {
					reportNATS(t, seed, cfg, r)
				}
				t.Logf("seed %d: natsstore %+v", seed, r.NATS)
				mu.Lock()
				total.Add(r.NATS)
				mu.Unlock()
			})
		}
	})
	if t.Failed() {
		return
	}
	t.Logf("seeds 1..%d: natsstore settled %+v", n, total)
	if total.ReadBackLanded == 0 || total.ReadBackScanned == 0 || total.ReadBackRefused == 0 || total.DupSettled == 0 {
		t.Fatalf("seeds 1..%d: read back and found %d (of which past a newer write %d), read back and found nothing %d, duplicate acks %d: each must be > 0, or natsstore's settling of unknown outcomes went unexercised",
			n, total.ReadBackLanded, total.ReadBackScanned, total.ReadBackRefused, total.DupSettled)
	}
}

// natsReadBackSeeds is how many fixed seeds TestSim_natsReadBack runs.
// The scan past a newer write comes about once in eight seeds, the other
// outcomes about twice a seed or more, so 24 seeds make a miss by chance
// unlikely should the simulation's draws change; -race runs the first 8,
// which cover all four today (seed 7 the scan).
func natsReadBackSeeds() uint64 {
	if raceOn || testing.Short() {
		return 8
	}
	return 24
}

// TestSim_natsUnfencedControl is TestSim_unfencedControl on natsstore: with
// the fence switched off, some seed of a fixed range must break
// I1_ConsumedAtMostOnce or I3_OneActiveRun, or the natsstore share could
// not fail.
func TestSim_natsUnfencedControl(t *testing.T) {
	for _, l := range []eventstest.Layout{eventstest.LayoutClaim, eventstest.LayoutRun} {
		t.Run(l.String(), func(t *testing.T) {
			cfg := sim.Config{Steps: *flagSteps, Unfenced: true, NATS: natsEnv(t), Layout: l, Fatal: func(c string) bool {
				return c == audit.CheckI1 || c == audit.CheckI3
			}}
			const n = 20
			for seed := uint64(1); seed <= n; seed++ {
				r := sim.Run(seed, cfg)
				if r.Check == sim.CheckStore {
					t.Fatalf("seed %d unfenced on natsstore: %s", seed, r.Failure)
				}
				if r.Failed() {
					t.Logf("without the fence on natsstore, on the %s layout, seed %d breaks %s at step %d: %s", l, seed, r.Check, r.Steps, r.Failure)
					return
				}
			}
			t.Fatalf("without the fence on natsstore, on the %s layout, no seed in 1..%d broke I1 or I3: the natsstore share cannot fail", l, n)
		})
	}
}
