package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestModule_replaceBuild: a module of a user's own requires package client
// by the module path, through a replace directive pointing at this
// checkout, and builds examples/go-client and the CLI from it; the example
// then posts to a serve and prints the run's output (issue 22, item 2: with
// `module artifactr` neither could be fetched). Offline: the dependencies
// come from the module cache, their sums from this repo's go.sum.
func TestModule_replaceBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module: skipped with -short")
	}
	// A directory replace does not check the module line, `go get` does.
	if got := goModLine(t, "module "); got != modulePath {
		t.Fatalf("go.mod declares module %q, want %q", got, modulePath)
	}
	// `go install ...@latest` refuses a module whose go.mod replaces or
	// excludes modules.
	for _, directive := range []string{"replace", "exclude"} {
		if got := goModLine(t, directive+" "); got != "" {
			t.Errorf("go.mod has a %s directive (%s): go install ...@latest would refuse the module", directive, got)
		}
	}
	dir := t.TempDir()
	goVersion := goModLine(t, "go ")
	if goVersion == "" {
		t.Fatal("go.mod has no go directive")
	}
	mod := fmt.Sprintf(`module example.com/userapp

go %s

require %[2]s v0.0.0

replace %[2]s => %[3]s
`, goVersion, modulePath, repoRoot)
	write := func(name string, b []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", []byte(mod))
	sum, err := os.ReadFile(filepath.Join(repoRoot, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write("go.sum", sum)
	src, err := os.ReadFile(filepath.Join(repoRoot, "examples", "go-client", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	write("main.go", src)

	goBuild := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", append([]string{"build"}, args...)...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off", "GOSUMDB=off")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %v in a module requiring github.com/artifactr/artifactr: %v\n%s", args, err, out)
		}
	}
	example := filepath.Join(dir, "go-client")
	goBuild("-o", example, ".")
	goBuild("-o", filepath.Join(dir, "artifactr"), modulePath+"/cmd/artifactr")

	listen := freeListen(t)
	serve(t, "serve-module", "--data", t.TempDir(), "--listen", listen, "--no-sync")
	out, err := exec.Command(example, "-nats", "nats://"+listen, "m1", "hello from a module").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "echo: hello from a module") {
		t.Fatalf("the example: %v\n%s", err, out)
	}
}

// modulePath is what `go install`, `go get` and imports name the repo by.
const modulePath = "github.com/artifactr/artifactr"

// goModLine is the rest of the first line of this repo's go.mod that
// starts with prefix; "" when none does.
func goModLine(t *testing.T, prefix string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
			return v
		}
	}
	return ""
}
