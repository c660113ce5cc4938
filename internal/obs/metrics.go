package obs

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Turn outcomes: the values of artifactr_turns_total's outcome label and of
// the turn span's artifactr.outcome attribute.
const (
	OutcomeCompleted = "completed" // run_completed landed
	OutcomeFailed    = "failed"    // run_failed landed
	OutcomeAbandoned = "abandoned" // this runner's run_abandoned landed: a newer claim gave up an older claim's run
	OutcomeRefused   = "refused"   // run_started refused by the fence (10071): a failed turn that consumed nothing
	// OutcomeLost ends a turn span whose claim ended before the run's end
	// was written; the next holder counts that turn as abandoned. Spans
	// only: it is never a turns_total label.
	OutcomeLost = "lost"
)

// Metrics are the runner's Prometheus collectors. Every name is in the
// README's observability table.
type Metrics struct {
	Turns                *prometheus.CounterVec // artifactr_turns_total{outcome}
	RunStartLatency      prometheus.Histogram   // artifactr_run_start_latency_seconds
	TurnDuration         prometheus.Histogram   // artifactr_turn_duration_seconds
	FencedRefusals       prometheus.Counter     // artifactr_fenced_refusals_total
	Claims               prometheus.Counter     // artifactr_claims_total
	Takeovers            prometheus.Counter     // artifactr_takeovers_total
	ClaimedThreads       prometheus.Gauge       // artifactr_claimed_threads
	AppendErrors         *prometheus.CounterVec // artifactr_append_errors_total{code}
	LeaseRenewals        prometheus.Counter     // artifactr_lease_renewals_total
	LeaseRenewalFailures prometheus.Counter     // artifactr_lease_renewal_failures_total
	StrandedThreads      prometheus.Counter     // artifactr_stranded_threads
	LeasesReclaimed      prometheus.Counter     // artifactr_leases_reclaimed_total
	SnapshotFailures     prometheus.Counter     // artifactr_snapshot_failures_total
	SnapshotBytes        prometheus.Histogram   // artifactr_snapshot_bytes
}

// NewMetrics makes the collectors and registers them with reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Turns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "artifactr_turns_total",
			Help: "Turns ended by this runner, by outcome: completed, failed, abandoned (a newer claim gave up an older claim's run), refused (run_started refused by the fence).",
		}, []string{"outcome"}),
		RunStartLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "artifactr_run_start_latency_seconds",
			Help:    "Time from a message's post (its stored time) to its run_started being acknowledged.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16), // 1ms .. 33s
		}),
		TurnDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "artifactr_turn_duration_seconds",
			Help:    "Time from a message's post to the acknowledged end of the turn it prompted, whatever its outcome.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 17), // 5ms .. 5.5min
		}),
		FencedRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "artifactr_fenced_refusals_total",
			Help: "Fenced writes (run_started, answer_given, steering_given, run_abandoned) refused because a newer claim exists (JetStream 10071), counted where the append's result is seen, whether or not the thread actor still lives.",
		}),
		Claims: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "artifactr_claims_total",
			Help: "Claims acquired: thread actors started.",
		}),
		Takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "artifactr_takeovers_total",
			Help: "Claims acquired on a thread whose previous claim was never released: its holder died, stalled or was cut off, and its lease lapsed.",
		}),
		ClaimedThreads: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "artifactr_claimed_threads",
			Help: "Threads this runner holds a claim on now.",
		}),
		AppendErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "artifactr_append_errors_total",
			Help: "Appends of claim and run events that failed, by code: the JetStream API error code (10071: a refused check) or, without one, thread_busy, conflict, unavailable, timeout, canceled, invalid, too_large or unknown.",
		}, []string{"code"}),
		LeaseRenewals: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "artifactr_lease_renewals_total",
			Help: "Lease renewals attempted (each result, success or not).",
		}),
		LeaseRenewalFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "artifactr_lease_renewal_failures_total",
			Help: "Lease renewals that failed: the lease was lost, or the store could not be reached.",
		}),
		StrandedThreads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "artifactr_stranded_threads",
			Help: "Stranded threads this serve's projector found, each then claimed by its runner: a message pending, no run and no claim for longer than the runners' bound (work-queue AckWait + 3 claim TTLs + 8s). Counted again for each further bound a thread stays stranded.",
		}),
		LeasesReclaimed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "artifactr_leases_reclaimed_total",
			Help: "Claims that took a thread whose lease no live session explained (a session that does not exist, no session and no server-side TTL, an expiry beyond the lease protocol's, a malformed value), once it was older than the store's unexplained-lease TTL.",
		}),
		SnapshotFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "artifactr_snapshot_failures_total",
			Help: "Snapshots encoded at a release that the store could not save (too large, or unreachable): the next claim replays more.",
		}),
		SnapshotBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "artifactr_snapshot_bytes",
			Help:    "Size of each snapshot encoded at a release, saved or not.",
			Buckets: prometheus.ExponentialBuckets(256, 4, 10), // 256 B .. 64 MiB
		}),
	}
	// Every outcome shows from the first scrape, so rate() and dashboards
	// see a zero rather than no series.
	for _, o := range []string{OutcomeCompleted, OutcomeFailed, OutcomeAbandoned, OutcomeRefused} {
		m.Turns.WithLabelValues(o)
	}
	var errs []error
	for _, c := range []prometheus.Collector{
		m.Turns, m.RunStartLatency, m.TurnDuration, m.FencedRefusals, m.Claims, m.Takeovers,
		m.ClaimedThreads, m.AppendErrors, m.LeaseRenewals, m.LeaseRenewalFailures, m.StrandedThreads, m.LeasesReclaimed,
		m.SnapshotFailures, m.SnapshotBytes,
	} {
		errs = append(errs, reg.Register(c))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("obs: register metrics: %w", err)
	}
	return m, nil
}

// Counters returns the counters' and gauges' current values by metric
// name, labels in braces: what the console's runners page shows.
func (m *Metrics) Counters() map[string]float64 {
	out := map[string]float64{}
	read := func(name string, c prometheus.Metric) {
		var d dto.Metric
		if c.Write(&d) != nil {
			return
		}
		for _, l := range d.GetLabel() {
			name += "{" + l.GetName() + "=" + l.GetValue() + "}"
		}
		switch {
		case d.Counter != nil:
			out[name] = d.GetCounter().GetValue()
		case d.Gauge != nil:
			out[name] = d.GetGauge().GetValue()
		}
	}
	for name, c := range map[string]prometheus.Collector{
		"artifactr_turns_total": m.Turns, "artifactr_fenced_refusals_total": m.FencedRefusals,
		"artifactr_claims_total": m.Claims, "artifactr_takeovers_total": m.Takeovers,
		"artifactr_claimed_threads": m.ClaimedThreads, "artifactr_append_errors_total": m.AppendErrors,
		"artifactr_lease_renewal_failures_total": m.LeaseRenewalFailures,
	} {
		ch := make(chan prometheus.Metric, 64)
		go func() { c.Collect(ch); close(ch) }()
		for pm := range ch {
			read(name, pm)
		}
	}
	return out
}
