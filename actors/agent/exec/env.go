package exec

import (
	"os"
	"strings"
)

// baseEnv are the variables every exec agent gets from artifactr's own
// environment when set: enough to find programs and read text.
var baseEnv = []string{"PATH", "HOME", "LANG"}

// defaultPath is the agent's PATH when artifactr has none.
const defaultPath = "/usr/local/bin:/usr/bin:/bin"

// Secret reports whether an exec agent may never see the variable name:
// artifactr's own settings (ARTIFACTR_NATS, ARTIFACTR_NKEY,
// ARTIFACTR_CREDS...) and the nats CLI's (NATS_URL, NATS_CREDS, NATS_NKEY...)
// name a server and the keys to it.
func Secret(name string) bool {
	return strings.HasPrefix(name, "ARTIFACTR_") || strings.HasPrefix(name, "NATS_")
}

// env is the program's whole environment: PATH, HOME and LANG, the
// variables named in e.PassEnv, then e.Env; never a [Secret] one. The
// program does not inherit artifactr's environment: an agent, or a tool an
// LLM calls from it, could otherwise read the NATS URL and credentials and
// write to the log as the runner.
func (e Agent) env() []string {
	out := make([]string, 0, len(baseEnv)+len(e.PassEnv)+len(e.Env))
	seen := make(map[string]bool)
	add := func(kv string) {
		name, _, _ := strings.Cut(kv, "=")
		if name == "" || Secret(name) || seen[name] {
			return
		}
		seen[name] = true
		out = append(out, kv)
	}
	// e.Env first: an explicit value wins over a passed-through one.
	for _, kv := range e.Env {
		if strings.Contains(kv, "=") {
			add(kv)
		}
	}
	for _, name := range append(append([]string{}, e.PassEnv...), baseEnv...) {
		if v, ok := os.LookupEnv(name); ok {
			add(name + "=" + v)
		}
	}
	if !seen["PATH"] {
		add("PATH=" + defaultPath)
	}
	return out
}
