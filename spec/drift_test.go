package spec

import (
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The drift tests hold the Go transcription to the .tla and .cfg files:
// the same actions, invariants, variables and constants, so that a change
// to one that is not made to the other fails here, not in a review.

var (
	blockComment = regexp.MustCompile(`(?s)\(\*.*?\*\)`)
	lineComment  = regexp.MustCompile(`\\\*.*`)
	definition   = regexp.MustCompile(`(?m)^([A-Za-z_]\w*)\s*(\([^)]*\))?\s*==`)
	identifier   = regexp.MustCompile(`[A-Za-z_]\w*`)
	varList      = regexp.MustCompile(`\bVARIABLES?\s+([A-Za-z_]\w*(?:\s*,\s*[A-Za-z_]\w*)*)`)
)

// readSpec returns a file of spec/ with its comments removed.
func readSpec(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return lineComment.ReplaceAllString(blockComment.ReplaceAllString(string(b), ""), "")
}

// tlaActions returns the operators that Next's body uses, in order: the
// disjuncts of Next.
func tlaActions(t *testing.T, tla string) []string {
	t.Helper()
	defined := map[string]bool{}
	for _, m := range definition.FindAllStringSubmatch(tla, -1) {
		defined[m[1]] = true
	}
	start := regexp.MustCompile(`(?m)^Next\s*==`).FindStringIndex(tla)
	if start == nil {
		t.Fatal("no Next == in the .tla")
	}
	body := tla[start[1]:]
	// The body ends where the next definition or a separator begins.
	if end := regexp.MustCompile(`(?m)^(\S+\s*(\([^)]*\))?\s*==|-{4,}|={4,})`).FindStringIndex(body); end != nil {
		body = body[:end[0]]
	}
	var names []string
	for _, id := range identifier.FindAllString(body, -1) {
		if defined[id] && !slices.Contains(names, id) {
			names = append(names, id)
		}
	}
	return names
}

// cfgSections splits a .cfg into its keyword sections, each a list of
// the lines that follow the keyword (the rest of the keyword's line
// included).
func cfgSections(t *testing.T, cfg string) map[string][]string {
	t.Helper()
	keyword := regexp.MustCompile(`^(CONSTANTS?|INIT|NEXT|SPECIFICATION|INVARIANTS?|PROPERT(Y|IES)|CONSTRAINTS?|ACTION_CONSTRAINTS?|SYMMETRY|VIEW|ALIAS|POSTCONDITION|CHECK_DEADLOCK)\b(.*)$`)
	sections := map[string][]string{}
	cur := ""
	for _, line := range strings.Split(cfg, "\n") {
		line = strings.TrimSpace(line)
		if m := keyword.FindStringSubmatch(line); m != nil {
			cur = strings.TrimSuffix(m[1], "S")
			if cur == "PROPERTIE" {
				cur = "PROPERTY"
			}
			line = strings.TrimSpace(m[3])
		}
		if line != "" && cur != "" {
			sections[cur] = append(sections[cur], line)
		}
	}
	return sections
}

func cfgInvariants(t *testing.T, cfg string) []string {
	t.Helper()
	var names []string
	for _, line := range cfgSections(t, cfg)["INVARIANT"] {
		names = append(names, strings.Fields(line)...)
	}
	return names
}

func cfgProperties(t *testing.T, cfg string) []string {
	t.Helper()
	var names []string
	for _, line := range cfgSections(t, cfg)["PROPERTY"] {
		names = append(names, strings.Fields(line)...)
	}
	return names
}

func cfgConstants(t *testing.T, cfg string) map[string]string {
	t.Helper()
	consts := map[string]string{}
	assign := regexp.MustCompile(`^([A-Za-z_]\w*)\s*(=|<-)\s*(.+)$`)
	for _, line := range cfgSections(t, cfg)["CONSTANT"] {
		m := assign.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("cfg constant line %q: not Name = Value", line)
		}
		consts[m[1]] = strings.TrimSpace(m[3])
	}
	return consts
}

// cfgConfig reads the constants of a .cfg as a [Config].
func cfgConfig(t *testing.T, cfg string) Config {
	t.Helper()
	consts := cfgConstants(t, cfg)
	num := func(name string) int {
		t.Helper()
		n, err := strconv.Atoi(consts[name])
		if err != nil {
			t.Fatalf("cfg %s = %q: %v", name, consts[name], err)
		}
		return n
	}
	procs := strings.Split(strings.Trim(consts["Procs"], "{} "), ",")
	for i, p := range procs {
		if got, want := strings.TrimSpace(p), procName(i); got != want {
			t.Errorf("cfg Procs[%d] = %q, want %q as the Go model names it", i, got, want)
		}
	}
	boolean := func(name string) bool {
		t.Helper()
		v, ok := map[string]bool{"TRUE": true, "FALSE": false}[consts[name]]
		if !ok {
			t.Fatalf("cfg %s = %q, want TRUE or FALSE", name, consts[name])
		}
		return v
	}
	fence, leaseFence := boolean("FENCE"), boolean("LEASEFENCE")
	forger, guard, runFence := boolean("FORGER"), boolean("GUARD"), boolean("RUNFENCE")
	var old uint8
	for _, p := range strings.Split(strings.Trim(consts["OLD"], "{} "), ",") {
		if p = strings.TrimSpace(p); p != "" {
			i := procIndex(p)
			if i < 0 {
				t.Fatalf("cfg OLD names %q, no process", p)
			}
			old |= 1 << i
		}
	}
	if consts["NoProc"] != "NoProc" {
		t.Errorf("cfg NoProc = %q, want the model value NoProc", consts["NoProc"])
	}
	return Config{Procs: len(procs), NumMsgs: num("NumMsgs"), MaxClaims: num("MaxClaims"), MaxOpen: num("MaxOpen"), Fence: fence, LeaseFence: leaseFence,
		Forger: forger, Guard: guard, RunFence: runFence, Old: old}
}

func TestDrift_tla_actionsAreNextDisjuncts(t *testing.T) {
	m := model(t, true)
	got := tlaActions(t, readSpec(t, "ThreadClaimLapse.tla"))
	if want := m.ActionNames(); !slices.Equal(got, want) {
		t.Errorf("Next's actions in the .tla = %v\nGo ActionNames = %v", got, want)
	}
}

func TestDrift_tla_variablesAreStateFields(t *testing.T) {
	m := varList.FindStringSubmatch(readSpec(t, "ThreadClaimLapse.tla"))
	if m == nil {
		t.Fatal("no VARIABLES in the .tla")
	}
	var got []string
	for _, v := range strings.Split(m[1], ",") {
		got = append(got, strings.TrimSpace(v))
	}
	var want []string
	typ := reflect.TypeFor[ThreadState]()
	for i := range typ.NumField() {
		want = append(want, typ.Field(i).Name)
	}
	if !slices.Equal(got, want) {
		t.Errorf("VARIABLES in the .tla = %v\nThreadState fields = %v", got, want)
	}
}

// cfgFiles are the .cfg files, with the Go configuration each states and
// whether it checks the properties.
var cfgFiles = []struct {
	file  string
	cfg   func() Config
	props bool
}{
	{"ThreadClaimLapse.cfg", DefaultConfig, true},
	{"ThreadClaimLapse_large.cfg", LargeConfig, true},
	{"ThreadClaimLapse_nofence.cfg", func() Config { c := DefaultConfig(); c.Fence = false; return c }, false},
	{"ThreadClaimLapse_leasefence.cfg", LeaseFenceConfig, false},
	{"ThreadClaimLapse_window.cfg", WindowConfig, false},
	{"ThreadClaimLapse_guard.cfg", GuardConfig, true},
	{"ThreadClaimLapse_runfence.cfg", RunFenceConfig, true},
	{"ThreadClaimLapse_runfence_forger.cfg", RunFenceForgerConfig, true},
	{"ThreadClaimLapse_mixed.cfg", MixedConfig, false},
}

func TestDrift_cfg_invariantsMatch(t *testing.T) {
	tla := readSpec(t, "ThreadClaimLapse.tla")
	for _, f := range cfgFiles {
		// The forger's configs check HonestI1 and HonestI3 for I1 and I3.
		m, err := ThreadClaimLapse(f.cfg())
		if err != nil {
			t.Fatal(err)
		}
		cfg := readSpec(t, f.file)
		got := cfgInvariants(t, cfg)
		if want := m.InvariantNames(); !slices.Equal(got, want) {
			t.Errorf("%s INVARIANTS = %v\nGo InvariantNames = %v", f.file, got, want)
		}
		props := cfgProperties(t, cfg)
		want := m.PropertyNames()
		if !f.props {
			want = nil
		}
		if !slices.Equal(props, want) {
			t.Errorf("%s PROPERTIES = %v\nwant %v", f.file, props, want)
		}
		for _, name := range append(got, props...) {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\s*==`).MatchString(tla) {
				t.Errorf("%s checks %s, which the .tla does not define", f.file, name)
			}
		}
	}
}

// Every property the Go model checks is an action property in the .tla,
// [][...]_vars, as TLC's PROPERTY needs.
func TestDrift_tla_propertiesAreActionProperties(t *testing.T) {
	tla := readSpec(t, "ThreadClaimLapse.tla")
	for _, name := range model(t, true).PropertyNames() {
		re := regexp.MustCompile(`(?ms)^` + regexp.QuoteMeta(name) + `\s*==\s*\[\]\[.*?\]_vars`)
		if !re.MatchString(tla) {
			t.Errorf("%s is not defined in the .tla as [][...]_vars", name)
		}
	}
}

func TestDrift_cfg_constantsMatchConfig(t *testing.T) {
	for _, f := range cfgFiles {
		if got, want := cfgConfig(t, readSpec(t, f.file)), f.cfg(); got != want {
			t.Errorf("%s = %+v, want %+v", f.file, got, want)
		}
	}
}

// The parsers must see a rename, or the drift tests above prove nothing.
func TestDrift_tla_renameIsSeen(t *testing.T) {
	tla := strings.ReplaceAll(readSpec(t, "ThreadClaimLapse.tla"), "ReplyFenced", "AnswerFenced")
	got := tlaActions(t, tla)
	if slices.Contains(got, "ReplyFenced") || !slices.Contains(got, "AnswerFenced") {
		t.Errorf("actions after a rename = %v", got)
	}
}

// RunnerFair in the .tla names the actions the Go liveness check takes
// with weak fairness, and StalledStep those and Output (a run need not
// output, but a stalled holder outputs finitely often).
func TestDrift_tla_fairnessIsLiveFair(t *testing.T) {
	tla := readSpec(t, "ThreadClaimLapse.tla")
	body := func(name string) string {
		t.Helper()
		loc := regexp.MustCompile(`(?ms)^` + name + `\(p\)\s*==(.*?)\n\n`).FindStringSubmatch(tla)
		if loc == nil {
			t.Fatalf("no %s(p) == in the .tla", name)
		}
		return loc[1]
	}
	var fair, stalled []string
	for a := range liveFair {
		fair = append(fair, a)
	}
	for a := range stalledSteps {
		stalled = append(stalled, a)
	}
	slices.Sort(fair)
	slices.Sort(stalled)
	for name, re := range map[string]*regexp.Regexp{
		"RunnerFair":  regexp.MustCompile(`WF_vars\((\w+)\(p\)\)`),
		"StalledStep": regexp.MustCompile(`(\w+)\(p\)`),
	} {
		want := fair
		if name == "StalledStep" {
			want = stalled
		}
		var got []string
		for _, m := range re.FindAllStringSubmatch(body(name), -1) {
			got = append(got, m[1])
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s's actions in the .tla = %v\nGo liveFair (stalledSteps for StalledStep) = %v", name, got, want)
		}
	}
}
