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

// permBytes is the size of role r's subjects under n: what they add to a
// user JWT.
func permBytes(n natsauth.Names, r natsauth.Role) int {
	p, _ := n.Permissions(r)
	size := 0
	for _, l := range [][]string{p.PubAllow, p.PubDeny, p.SubAllow, p.SubDeny} {
		for _, s := range l {
			size += len(s) + 3 // quotes and a comma, as in the JWT's JSON
		}
	}
	return size
}

// With partitions a role's permissions do not grow with the partition
// count, and stay no larger than with one stream: each user's JWT fits
// under the server's control line whatever P (the operator-mode test,
// cmd/artifactr TestRun_credsOperatorMode, runs the one-stream JWTs).
func TestNames_Permissions_partitionsDoNotGrow(t *testing.T) {
	one := natsauth.DefaultNames()
	for _, r := range []natsauth.Role{natsauth.Runner, natsauth.Client, natsauth.Auditor} {
		base := permBytes(one, r)
		var at4 int
		for _, parts := range []int{2, 4, 64, 1024} {
			n := natsauth.DefaultNames()
			n.Partitions = parts
			got := permBytes(n, r)
			if got > base {
				t.Errorf("%s with %d partitions: %d bytes of permissions, more than %d with one stream", r, parts, got, base)
			}
			if parts == 4 {
				at4 = got
			} else if parts > 4 && got != at4 {
				t.Errorf("%s: %d bytes with %d partitions, %d with 4: the permissions grow with P", r, got, parts, at4)
			}
		}
	}
}
