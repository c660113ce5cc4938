package main

import (
	"fmt"
	"strings"

	"github.com/artifactr/artifactr/projections"
)

// showStrategy adds the double-texting strategies and cancels to v.
func showStrategy(v *threadView, t *projections.Thread) {
	v.Strategy = string(t.Strategy)
	for i, m := range t.Messages {
		v.Messages[i].Strategy = string(m.Strategy)
	}
	for i, r := range t.Runs {
		rv := &v.Runs[i]
		rv.CancelSeq, rv.InterruptSeq, rv.InterruptedBy, rv.RolledBack = r.CancelSeq, r.InterruptSeq, r.InterruptedBy, r.RolledBack
	}
}

// writeRunStrategy writes a run's cancel request and interrupt, if any.
func writeRunStrategy(b *strings.Builder, r *projections.Run) {
	if r.CancelSeq != 0 {
		fmt.Fprintf(b, "      cancel:  requested at %d\n", r.CancelSeq)
	}
	if r.InterruptSeq != 0 {
		what := "interrupted"
		if r.RolledBack {
			what = "rolled back (left out of later runs' history)"
		}
		fmt.Fprintf(b, "      %s by message %d (at %d)\n", what, r.InterruptedBy, r.InterruptSeq)
	}
}
