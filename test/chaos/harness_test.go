package chaos

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/artifactr/artifactr/actors/agent"
	"github.com/artifactr/artifactr/actors/runner"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/natsstore"
	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/server"
)

// harness is one chaos run: the server(s), the runner slots, the posters
// and the counters.
type harness struct {
	t   *testing.T
	cfg config
	rng *faultRand
	log *slog.Logger
	lc  *logCounter

	single  *natsembed.Server      // the server, or nil on a cluster
	cluster *natsembedtest.Cluster // the cluster, or nil

	admin    *natsstore.Store // the test's own store: checks, step-downs
	adminNC  *nats.Conn
	poster   *natsstore.Store // the posters' store; its connection is kicked too
	posterNC *nats.Conn
	threads  []string
	slots    []*slot

	faultsOn atomic.Bool // stalls are injected only while set
	// guarded: a store opened guards consuming writes (Config.Guard), or
	// the layout is RUNFENCE, where every consuming write is one
	// compare-and-set on the run subject: the holder's window is closed.
	guarded  atomic.Bool
	faults   counters // faults injected, by kind
	stats    counters // store outcomes (chaosStore) and post outcomes
	runStats runner.Stats
	statsMu  sync.Mutex // protects runStats

	posts       postLog
	fronts      []*front          // the HTTP API servers (startFronts), if any
	web         *http.Client      // the HTTP posters' client
	viewsMu     sync.Mutex        // protects views and starts
	views       []viewRec         // each consuming write's view (viewCheck)
	starts      map[string]string // each claim's start, by holder (viewCheck)
	stopPosters func()            // set by startPosters
	start       time.Time
	calm        time.Time // when the faults stopped: the drain's start
	wakes       wakeLog   // the work queue's wake-ups, by thread
	owners      ownerLog  // partitions' owners as the runners say (P > 1)
	// forged are the forger's events by sequence (TestChaos_forger): the
	// consumption checks exempt the posts they took.
	forged map[uint64]forgedEvent
	// releases are the releases the store refused (checkReleases).
	releases releaseLog
}

func newHarness(t *testing.T, cfg config) *harness {
	lc := &logCounter{}
	h := &harness{t: t, cfg: cfg, rng: newFaultRand(cfg.seed), lc: lc, log: slog.New(lc), start: time.Now()}
	for i := range cfg.threads {
		h.threads = append(h.threads, fmt.Sprintf("t%02d", i))
	}
	h.posts.acked = map[string]map[string]uint64{}
	h.starts = map[string]string{}
	h.posts.refused = map[string]map[string]bool{}
	return h
}

func (h *harness) replicas() int {
	if h.cluster != nil {
		return 3
	}
	return 1
}

// subjects are the log's subjects (its partitions), as the test's store
// names them.
func (h *harness) subjects() events.Subjects {
	return events.Subjects{Partitions: max(h.cfg.partitions, 1), RunFence: h.cfg.runFenced()}
}

// streams are the partition streams, in partition order: one at P = 1.
func (h *harness) streams() []string {
	n := max(h.cfg.partitions, 1)
	out := make([]string, n)
	for p := range out {
		out[p] = natsstore.PartitionStream(natsstore.DefaultStream, p, n)
	}
	return out
}

// urls are the client URLs of the running servers.
func (h *harness) urls() string {
	if h.cluster != nil {
		return h.cluster.ClientURLs()
	}
	return h.single.ClientURL()
}

// servers are the running servers.
func (h *harness) servers() []*natsembed.Server {
	if h.cluster == nil {
		return []*natsembed.Server{h.single}
	}
	var out []*natsembed.Server
	for _, n := range h.cluster.Nodes {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}

// connect dials the servers. Reconnects are fast and endless: dropped
// connections are a fault the stores must ride out.
func (h *harness) connect(name string) (*nats.Conn, error) {
	return nats.Connect(h.urls(),
		nats.Name(name),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(50*time.Millisecond),
		nats.ReconnectJitter(50*time.Millisecond, 0),
		nats.Timeout(5*time.Second),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			h.stats.add("nats_async_error", 1) // slow consumers, writes on a dropped socket
		}),
	)
}

// openStore connects and opens a store, retrying while a cluster settles.
func (h *harness) openStore(name string, now func() time.Time) (*nats.Conn, *natsstore.Store, error) {
	var err error
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		var nc *nats.Conn
		if nc, err = h.connect(name); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			var s *natsstore.Store
			s, err = natsstore.New(ctx, natsstore.Config{Conn: nc, Replicas: h.replicas(), Now: now, Timeout: 5 * time.Second, Logger: h.log,
				UnexplainedLeaseTTL: h.cfg.unexplainedLease, Guard: h.cfg.guard, Partitions: h.cfg.partitions, Fence: h.cfg.fence})
			cancel()
			if err == nil && s.Subjects().RunFence != h.cfg.runFenced() {
				s.Close()
				nc.Close()
				return nil, nil, fmt.Errorf("open store %s: Config.Fence %q, yet the store's layout has RunFence=%v", name, h.cfg.fence, s.Subjects().RunFence)
			}
			if err == nil {
				if s.Guarded() || s.Subjects().RunFence {
					h.guarded.Store(true)
				}
				return nc, s, nil
			}
			nc.Close()
		}
		time.Sleep(200 * time.Millisecond) // back off before the next dial
	}
	return nil, nil, fmt.Errorf("open store %s: %w", name, err)
}

// kick drops nc server-side, as a network fault would; nc reconnects.
func (h *harness) kick(nc *nats.Conn) bool {
	if nc == nil || !nc.IsConnected() {
		return false
	}
	cid, err := nc.GetClientID()
	if err != nil {
		return false
	}
	sid := nc.ConnectedServerId()
	for _, s := range h.servers() {
		if s.NATS().ID() == sid {
			return s.NATS().DisconnectClientByID(cid) == nil
		}
	}
	return false
}

func (h *harness) addRunStats(s runner.Stats) {
	h.statsMu.Lock()
	defer h.statsMu.Unlock()
	h.runStats.Claims += s.Claims
	h.runStats.Abandoned += s.Abandoned
	h.runStats.Fenced += s.Fenced
	h.runStats.Completed += s.Completed
	h.runStats.Failed += s.Failed
	h.runStats.KeptParked += s.KeptParked
	h.runStats.LeasesReclaimed += s.LeasesReclaimed
}

// slot is one runner position: a runner with its own connection, store and
// clock, killed and restarted as the faults say.
type slot struct {
	h    *harness
	idx  int
	skew atomic.Int64 // the clock's offset, ns

	mu  sync.Mutex // protects the fields below
	gen int
	id  string
	nc  *nats.Conn
	ns  *natsstore.Store
	cs  *chaosStore
	srv *server.Server
	r   *runner.Runner // srv's
}

func (sl *slot) now() time.Time { return time.Now().Add(time.Duration(sl.skew.Load())) }

func (sl *slot) up() bool {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.r != nil
}

func (sl *slot) conn() *nats.Conn {
	sl.mu.Lock()
	defer sl.mu.Unlock()
	return sl.nc
}

// startRunner starts a runner in the slot with id (a new id when empty).
// It runs on the test goroutine.
func (sl *slot) startRunner(id string) {
	h := sl.h
	h.t.Helper()
	sl.mu.Lock()
	sl.gen++
	if id == "" {
		id = fmt.Sprintf("r%d.%d", sl.idx, sl.gen)
	}
	sl.mu.Unlock()
	nc, ns, err := h.openStore("runner-"+id, sl.now)
	if err != nil {
		h.t.Fatal(err)
	}
	var base events.Store = ns
	if h.cfg.unfenced {
		base = eventstest.Unfenced(ns) // the mutation: no fence on consuming writes
	}
	cs := newChaosStore(base, &h.stats)
	cs.releases = &h.releases
	// The runner is wired by package server, as serve's is; the faults
	// come in through its config: the store, the clock, the append hook.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	srv, err := server.Start(ctx, server.Config{
		Store: ns,
		Runner: runner.Config{
			Store:         cs.forRunner(),
			Agent:         agent.Echo{Delay: h.cfg.delay, Steer: true},
			ID:            id,
			ClaimTTL:      h.cfg.ttl,
			IdleTimeout:   4 * h.cfg.ttl,
			ShutdownGrace: 2 * time.Second,
			Now:           sl.now,
			BeforeAppend:  h.stallHook(cs),
			Observer:      h.viewObserver(id),
		},
		WrapWork: h.wrapWork(id),
		Logger:   h.log,
	})
	cancel()
	if err != nil {
		ns.Close()
		nc.Close()
		h.t.Fatalf("start runner %s: %v", id, err)
	}
	sl.mu.Lock()
	sl.id, sl.nc, sl.ns, sl.cs, sl.srv, sl.r = id, nc, ns, cs, srv, srv.Runner()
	sl.mu.Unlock()
}

// kill crashes the slot's runner: no release, no run end; its connection
// goes with it.
func (sl *slot) kill() {
	sl.mu.Lock()
	srv, ns, nc := sl.srv, sl.ns, sl.nc
	sl.srv, sl.r, sl.ns, sl.nc, sl.cs = nil, nil, nil, nil, nil
	sl.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Kill()
	sl.h.addRunStats(srv.Stats())
	ns.Close()
	nc.Close()
}

// stop stops the slot's runner gracefully, killing it if ctx ends first.
func (sl *slot) stop(ctx context.Context) error {
	sl.mu.Lock()
	srv, ns, nc := sl.srv, sl.ns, sl.nc
	sl.srv, sl.r, sl.ns, sl.nc, sl.cs = nil, nil, nil, nil, nil
	sl.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Stop(ctx)
	if err != nil {
		srv.Kill() // Stop already shut the system down; Kill is a no-op then
	}
	sl.h.addRunStats(srv.Stats())
	ns.Close()
	nc.Close()
	return err
}

// stopAll stops every runner at once, then closes the test's own store.
func (h *harness) stopAll(d time.Duration) []error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	errs := make([]error, len(h.slots))
	var wg sync.WaitGroup
	for i, sl := range h.slots {
		wg.Go(func() { errs[i] = sl.stop(ctx) })
	}
	wg.Wait()
	return errs
}

// closeClients closes the test's own stores.
func (h *harness) closeClients() {
	for _, s := range []*natsstore.Store{h.admin, h.poster} {
		if s != nil {
			s.Close()
		}
	}
	for _, nc := range []*nats.Conn{h.adminNC, h.posterNC} {
		if nc != nil {
			nc.Close()
		}
	}
	h.admin, h.poster, h.adminNC, h.posterNC = nil, nil, nil, nil
}
