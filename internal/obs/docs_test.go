package obs_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/artifactr/artifactr/internal/obs"
)

// Every metric is documented in the README's table and charted by the
// example dashboard, so neither drifts from the code.
func TestMetrics_documentedAndCharted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := obs.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.AppendErrors.WithLabelValues("10071") // a vec shows once it has a series
	if err := obs.RegisterProjectorLag(reg, func(context.Context) (uint64, error) { return 0, nil }, testLogger()); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile("../../examples/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Targets []struct{ Expr string } `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var exprs strings.Builder
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			exprs.WriteString(tg.Expr + "\n")
		}
	}
	if len(fams) != 15 {
		t.Errorf("%d metric families, want the 15 of the README's table", len(fams))
	}
	for _, f := range fams {
		name := f.GetName()
		if !strings.Contains(string(readme), "`"+name+"`") {
			t.Errorf("README does not document %s", name)
		}
		if !strings.Contains(exprs.String(), name) {
			t.Errorf("the dashboard does not chart %s", name)
		}
	}
}
