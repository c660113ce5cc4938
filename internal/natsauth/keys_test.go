package natsauth_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/artifactr/artifactr/internal/natsauth"
)

// Seeds are created once with mode 0600 in a 0700 directory and reused.
func TestLoadOrCreate_createsThenReuses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "auth")
	first, err := natsauth.LoadOrCreate(dir, natsauth.Client, natsauth.Admin)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("auth dir: %v, mode %v; want 0700", err, st.Mode().Perm())
	}
	for _, k := range first {
		st, err := os.Stat(k.Path)
		if err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, mode %v; want 0600", k.Path, err, st.Mode().Perm())
		}
		if !strings.HasPrefix(k.Public, "U") || filepath.Base(k.Path) != natsauth.SeedFile(k.Role) {
			t.Errorf("key %+v", k)
		}
	}
	again, err := natsauth.LoadOrCreate(dir, natsauth.Client, natsauth.Admin)
	if err != nil {
		t.Fatal(err)
	}
	for i := range first {
		if again[i].Public != first[i].Public || again[i].Role != first[i].Role {
			t.Errorf("second load made a new key for %s: %s, was %s", first[i].Role, again[i].Public, first[i].Public)
		}
	}
	if first[0].Public == first[1].Public {
		t.Error("two roles share a key")
	}
}

func TestReadSeedFile_refusesLooseOrBad(t *testing.T) {
	dir := t.TempDir()
	keys, err := natsauth.LoadOrCreate(dir, natsauth.Client)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(keys[0].Path, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := natsauth.ReadSeedFile(keys[0].Path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("group-readable seed: %v", err)
	}
	if _, err := natsauth.LoadOrCreate(dir, natsauth.Client); err == nil {
		t.Error("LoadOrCreate accepted a group-readable seed")
	}
	bad := filepath.Join(dir, "bad.nk")
	if err := os.WriteFile(bad, []byte("not a seed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := natsauth.ReadSeedFile(bad); err == nil {
		t.Error("accepted a file that is not a seed")
	}
	if _, err := natsauth.ParseRole("root"); err == nil {
		t.Error("ParseRole accepted root")
	}
}

func TestNames_Validate(t *testing.T) {
	n := natsauth.DefaultNames()
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	n.Stream = "A.B"
	if err := n.Validate(); err == nil {
		t.Error("a stream name with a dot passed")
	}
}
