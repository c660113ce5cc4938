package runners_test

import (
	"context"
	"flag"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/internal/natsembed/natsembedtest"
	"github.com/artifactr/artifactr/test/sim/runners"
)

// flagNATS is how many random seeds TestRunners_nats runs on natsstore.
var flagNATS = flag.Int("runners.nats", envInt("RUNNERS_NATS", 0), "random seeds run on natsstore with an embedded server (default 10; 2 with -race or -short)")

func natsSeeds() int {
	switch {
	case *flagNATS > 0:
		return *flagNATS
	case raceOn || testing.Short():
		return 2
	}
	return 10
}

// natsFixed are seeds every run puts on natsstore, besides the random
// ones: the soak failures' seeds, whose worlds are known to reach the
// windows those fixes closed.
var natsFixed = []uint64{231, 3759, 2380, 208}

// natsEnv starts a server for t.
func natsEnv(t *testing.T) *runners.NATS {
	t.Helper()
	url := natsembedtest.RunForTest(t).ClientURL()
	if err := keepStreamsDir(url); err != nil {
		t.Fatalf("runners: embedded nats-server: %v", err)
	}
	return &runners.NATS{URL: url}
}

// keepStreamsDir makes a stream that lives as long as the server. When the
// account's last stream is deleted (each seed deletes all it made),
// nats-server removes the account's streams directory in a goroutine of its
// own, which can race the next seed's stream being created ("error creating
// store for stream"); test/sim's nats_test.go met it first.
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

// TestRunners_nats runs a share of the seeds on natsstore against an
// embedded server, with every check: the fixed seeds, then random ones
// from a printed base.
func TestRunners_nats(t *testing.T) {
	cfg := runners.Config{Steps: *flagSteps, NATS: natsEnv(t), Layout: layout(t)}
	if replayed(t, cfg, " on natsstore") {
		return
	}
	// The fixed seeds keep the claim layout their worlds were found on
	// (soak_test.go); the random ones take the seed's (-runners.fence).
	fixed := cfg
	fixed.Layout = eventstest.LayoutClaim
	base := baseSeed(t)
	n := natsSeeds()
	seeds := append([]uint64(nil), natsFixed...)
	for i := range n {
		seeds = append(seeds, base+uint64(i))
	}
	t.Logf("natsstore: fixed seeds %v, random seeds %d..%d, %d steps each (-runners.base=%d reruns them)", natsFixed, base, base+uint64(n)-1, cfg.Steps, base)
	start := time.Now()
	var total runners.Stats
	runFenced := 0
	for i, seed := range seeds {
		c := cfg
		if i < len(natsFixed) {
			c = fixed
		}
		r := runners.Run(seed, c)
		add(&total, r.Stats)
		if r.RunFence {
			runFenced++
		}
		if r.Failed() {
			reportNATS(t, seed, c, r)
		}
	}
	t.Logf("natsstore: %d seeds in %s, %d on the run subject's layout; exercised %+v", len(seeds), time.Since(start).Round(time.Millisecond), runFenced, total)
	if total.SimExpiries == 0 || total.Consumed == 0 {
		t.Fatalf("natsstore: %d sessions expired, %d messages consumed after the faults: the share exercised nothing", total.SimExpiries, total.Consumed)
	}
}

// reportNATS replays a seed that failed on natsstore with its trace and
// fails t with it. The replay need not fail alike: natsstore's session ids
// are its own (nats.go in this package).
func reportNATS(t *testing.T, seed uint64, cfg runners.Config, r runners.Result) {
	t.Helper()
	cfg.Trace = true
	again := runners.Run(seed, cfg)
	t.Fatalf("seed %d on natsstore failed at step %d: %s: %s\nreplay (%s: %s) trace:\n%s\nreplay: go test ./test/sim/runners/ -run '^TestRunners_nats$' -runners.seed=%d -runners.steps=%d -runners.fence=%s -v",
		seed, r.Steps, r.Check, r.Failure, again.Check, again.Failure, again.FormatTrace(), seed, cfg.Steps, fenceFlag(r))
}
