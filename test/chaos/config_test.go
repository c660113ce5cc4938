package chaos

import (
	"flag"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/artifactr/artifactr/events/natsstore"
)

// Flags, each with an environment variable for CI (the flag wins).
var (
	flagSeed     = flag.String("chaos.seed", os.Getenv("CHAOS_SEED"), "chaos: PRNG seed of the fault schedule (default: random for the soaks, fixed for the mutation check; printed)")
	flagSoak     = flag.String("chaos.soak", os.Getenv("SOAK"), "chaos: fault phase of the single-server soak, such as 10m (default 55s)")
	flagCluster  = flag.String("chaos.cluster", os.Getenv("SOAK_CLUSTER"), "chaos: fault phase of the cluster soak (default 45s)")
	flagMany     = flag.String("chaos.many", os.Getenv("SOAK_MANY"), "chaos: fault phase of the 5,000-thread soak (default 25s)")
	flagPClu     = flag.String("chaos.pcluster", os.Getenv("SOAK_PCLUSTER"), "chaos: fault phase of the partitioned cluster soak, P = 6 (default 18s)")
	flagRunFence = flag.String("chaos.runfence", os.Getenv("SOAK_RUNFENCE"), "chaos: fault phase of the RUNFENCE soak, such as 10m (default 18s)")
	flagHTTP     = flag.String("chaos.http", os.Getenv("SOAK_HTTP"), "chaos: fault phase of the soak through the HTTP API (default 12s)")
	flagGuard    = flag.String("chaos.guard", os.Getenv("CHAOS_GUARD"), "chaos: the runners' stores' guard of consuming writes, auto, on or off (natsstore.Config.Guard; default auto: on on the cluster, off on one server)")
	flagFence    = flag.String("chaos.fence", os.Getenv("CHAOS_FENCE"), "chaos: the stream's fence layout, claim or run (natsstore.Config.Fence; run is RUNFENCE, issue 23: markers on the run subject; default claim); the *RunFence cases use run whatever it says")
)

// mutationSeed is the mutation check's default seed: the check must fail the
// unfenced run for it every time (it does for any seed; see mutationConfig).
const mutationSeed = 20260101

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// seed returns the -chaos.seed value, or def, or a random seed when def is 0.
func seed(t *testing.T, def uint64) uint64 {
	t.Helper()
	if *flagSeed != "" {
		s, err := strconv.ParseUint(*flagSeed, 10, 64)
		if err != nil {
			t.Fatalf("-chaos.seed / CHAOS_SEED %q: %v", *flagSeed, err)
		}
		return s
	}
	if def != 0 {
		return def
	}
	return rand.Uint64() & (1<<40 - 1) // short enough to type back
}

func duration(t *testing.T, v, what string, def time.Duration) time.Duration {
	t.Helper()
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("%s %q: want a positive duration such as 10m", what, v)
	}
	return d
}

// config is one chaos run.
type config struct {
	name     string
	seed     uint64
	runners  int
	threads  int
	posters  int
	postGap  [2]time.Duration // pause between one poster's posts, min and max
	ttl      time.Duration    // runner ClaimTTL
	delay    time.Duration    // echo agent delay: runs overlap later posts
	faults   time.Duration    // the fault phase
	drain    time.Duration    // deadline of the drain
	tick     [2]time.Duration // gap between timed faults, min and max
	cluster  bool             // 3 nodes, R3
	unfenced bool             // the mutation: every runner's store is eventstest.Unfenced

	// partitions is the layout's partition count (natsstore.Config.Partitions;
	// 0 is 1): with more, the runners own partitions (issue 29).
	partitions int

	// Stalls before appends (BeforeAppend): the chance per append, by kind.
	pStallStart   float64 // run_started
	pStallFenced  float64 // answer_given, steering_given
	pStallAbandon float64 // run_abandoned
	pStallEnd     float64 // run_completed, run_failed
	pPause        float64 // a stall also pauses the thread's lease renewals
	stall         [2]float64

	// Weights of the timed faults; 0 turns a kind off.
	wKill, wKick, wSkew, wStepDown float64
	wLeave                         float64       // a graceful stop (its partitions handed over), then a join
	minLive                        int           // kills keep at least this many runners up
	nodeRestart                    bool          // cluster: restart one node at mid-run
	skews                          []float64     // skew choices, in TTLs
	pDupPost, pRetryPost           float64       // per acknowledged post
	stopOnViolation                bool          // mutation: end the fault phase at the first violation
	minFaults                      time.Duration // with stopOnViolation: run at least this long

	// HTTP API fronts (httpapi.Server, as serve --http) and the posters
	// that create runs through them.
	fronts, httpPosters int

	// The runner-credential forger (forger_test.go), and how long the
	// stores let a lease no session explains hold its thread (0: the
	// store's default).
	forge            *forgeConfig
	unexplainedLease time.Duration
	// guard is the stores' natsstore.Config.Guard (-chaos.guard).
	guard natsstore.GuardMode
	// fence is the stream's layout, every store's natsstore.Config.Fence
	// (-chaos.fence): FenceClaim or FenceRun (RUNFENCE, issue 23).
	fence natsstore.FenceLayout
}

// runFenced reports whether the run is in the RUNFENCE layout.
func (c config) runFenced() bool { return c.fence == natsstore.FenceRun }

// fenceLayout returns the -chaos.fence value: claim (the default) or run.
func fenceLayout(t *testing.T) natsstore.FenceLayout {
	t.Helper()
	switch v := natsstore.FenceLayout(*flagFence); v {
	case "", natsstore.FenceClaim:
		return natsstore.FenceClaim
	case natsstore.FenceRun:
		return v
	default:
		t.Fatalf("-chaos.fence / CHAOS_FENCE %q: want claim or run", *flagFence)
		return ""
	}
}

// guardMode returns the -chaos.guard value.
func guardMode(t *testing.T) natsstore.GuardMode {
	t.Helper()
	g, err := natsstore.ParseGuardMode(*flagGuard)
	if err != nil {
		t.Fatalf("-chaos.guard / CHAOS_GUARD: %v", err)
	}
	return g
}

func soakConfig(t *testing.T) config {
	return config{
		name:    "soak",
		seed:    seed(t, 0),
		runners: 4, threads: 24, posters: 2,
		postGap: [2]time.Duration{20 * time.Millisecond, 120 * time.Millisecond},
		ttl:     time.Second,
		delay:   150 * time.Millisecond,
		faults:  duration(t, *flagSoak, "-chaos.soak / SOAK", 55*time.Second),
		drain:   90 * time.Second,
		tick:    [2]time.Duration{200 * time.Millisecond, 900 * time.Millisecond},

		pStallStart: 0.04, pStallFenced: 0.08, pStallAbandon: 0.3, pStallEnd: 0.04,
		pPause: 0.5, stall: [2]float64{1.3, 3},

		wKill: 1, wKick: 2, wSkew: 1.5,
		minLive:  2,
		skews:    []float64{-2, -1.2, 0, 0, 0, 1.2, 2},
		pDupPost: 0.1, pRetryPost: 0.05,
		guard: guardMode(t),
		fence: fenceLayout(t),
	}
}

// soakRunFenceConfig is the soak in the RUNFENCE layout (issue 23), short
// enough for `go test -race ./...` (SOAK_RUNFENCE or -chaos.runfence makes
// it longer).
func soakRunFenceConfig(t *testing.T) config {
	c := soakConfig(t)
	c.name = "soak-runfence"
	c.fence = natsstore.FenceRun
	c.faults = duration(t, *flagRunFence, "-chaos.runfence / SOAK_RUNFENCE", 18*time.Second)
	c.drain = 60 * time.Second
	return c
}

// httpConfig is the soak through the HTTP API, short enough for
// `go test -race ./...` (SOAK_HTTP or -chaos.http makes it longer): two
// fronts, three posters through them and none direct, and most stalls
// freezing their runner past the TTL.
func httpConfig(t *testing.T) config {
	c := soakConfig(t)
	c.name = "http"
	c.runners, c.threads = 3, 12
	c.posters, c.fronts, c.httpPosters = 0, 2, 3
	c.postGap = [2]time.Duration{30 * time.Millisecond, 150 * time.Millisecond}
	c.faults = duration(t, *flagHTTP, "-chaos.http / SOAK_HTTP", 12*time.Second)
	c.drain = 60 * time.Second
	c.pPause = 0.7
	return c
}

// manyConfig is the soak over 5,000 threads: most get a post or two while
// runners freeze past the TTL (their sessions lapse and the others take
// every thread they held), are killed, and lose their connections.
func manyConfig(t *testing.T) config {
	c := soakConfig(t)
	c.name = "many"
	c.threads = 5000
	c.posters = 4
	c.postGap = [2]time.Duration{10 * time.Millisecond, 40 * time.Millisecond}
	c.ttl = 2 * time.Second
	c.faults = duration(t, *flagMany, "-chaos.many / SOAK_MANY", 25*time.Second)
	c.drain = 240 * time.Second
	c.pPause = 0.8
	return c
}

func clusterConfig(t *testing.T) config {
	c := soakConfig(t)
	c.name = "cluster"
	c.cluster = true
	c.faults = duration(t, *flagCluster, "-chaos.cluster / SOAK_CLUSTER", 45*time.Second)
	c.drain = 120 * time.Second
	c.postGap = [2]time.Duration{40 * time.Millisecond, 200 * time.Millisecond}
	c.wStepDown = 1
	c.nodeRestart = true
	return c
}

// clusterPartitionedConfig is the cluster soak on P = 6 partition streams
// (issue 29), short enough for `go test -race ./...` (SOAK_PCLUSTER or
// -chaos.pcluster makes it longer): more posters (the cluster soak's 24
// threads are 4 in each partition), and runners that leave gracefully and
// join again besides those killed, so partitions move.
func clusterPartitionedConfig(t *testing.T) config {
	c := clusterConfig(t)
	c.name = "cluster-p6"
	c.partitions = 6
	c.posters = 3
	c.postGap = [2]time.Duration{30 * time.Millisecond, 150 * time.Millisecond}
	c.faults = duration(t, *flagPClu, "-chaos.pcluster / SOAK_PCLUSTER", 18*time.Second)
	c.wLeave = 1
	return c
}

// mutationConfig makes stale writes certain: a third of the run_started
// appends stall for two to three TTLs with their runner frozen, so its
// session lapses and the other runners take its threads over during the
// stall; the stale write then lands unfenced.
func mutationConfig(t *testing.T) config {
	return config{
		name:    "mutation",
		seed:    seed(t, mutationSeed),
		runners: 3, threads: 12, posters: 1,
		postGap: [2]time.Duration{20 * time.Millisecond, 80 * time.Millisecond},
		ttl:     time.Second,
		delay:   100 * time.Millisecond,
		faults:  40 * time.Second,
		drain:   0, // no drain: the log is broken on purpose
		tick:    [2]time.Duration{300 * time.Millisecond, 600 * time.Millisecond},

		unfenced:    true,
		pStallStart: 0.33, pStallFenced: 0.33, pStallAbandon: 0.33,
		pPause: 1, stall: [2]float64{2, 3},

		skews:           []float64{0},
		stopOnViolation: true,
		minFaults:       6 * time.Second,
		fence:           fenceLayout(t),
	}
}

// faultRand is the one seeded source of every fault decision. The seed fixes
// the fault schedule's draws; which goroutine draws next is up to the
// scheduler, so a replay follows the same plan with its own interleaving.
type faultRand struct {
	mu sync.Mutex // protects r
	r  *rand.Rand
}

func newFaultRand(seed uint64) *faultRand {
	return &faultRand{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (f *faultRand) float() float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.r.Float64()
}

func (f *faultRand) intN(n int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.r.IntN(n)
}

func (f *faultRand) chance(p float64) bool { return p > 0 && f.float() < p }

func (f *faultRand) dur(r [2]time.Duration) time.Duration {
	return r[0] + time.Duration(f.float()*float64(r[1]-r[0]))
}

// scaled returns d times a factor drawn from r.
func (f *faultRand) scaled(d time.Duration, r [2]float64) time.Duration {
	return time.Duration(float64(d) * (r[0] + f.float()*(r[1]-r[0])))
}

// pick returns an index drawn with the given weights, or -1 when all are 0.
func (f *faultRand) pick(weights ...float64) int {
	var sum float64
	for _, w := range weights {
		sum += w
	}
	if sum == 0 {
		return -1
	}
	x := f.float() * sum
	for i, w := range weights {
		if x < w {
			return i
		}
		x -= w
	}
	return len(weights) - 1
}
