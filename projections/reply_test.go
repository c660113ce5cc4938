package projections

import "testing"

// The one rule for a run's reply: run_completed's output when not empty,
// else the outputs joined.
func TestRun_Reply(t *testing.T) {
	for _, tc := range []struct {
		r    Run
		want string
	}{
		{Run{Outputs: []string{"thinking"}, Output: "answer"}, "answer"},
		{Run{Outputs: []string{"stre", "amed"}}, "streamed"},
		{Run{Output: "only"}, "only"},
		{Run{}, ""},
	} {
		if got := tc.r.Reply(); got != tc.want {
			t.Errorf("%+v: Reply %q, want %q", tc.r, got, tc.want)
		}
	}
}
