package natsauth

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/nats-io/nkeys"
)

// SeedFile is the name of role's seed file in an auth directory, such as
// client.nk.
func SeedFile(r Role) string { return string(r) + ".nk" }

// Key is one user's nkey.
type Key struct {
	Role   Role
	Public string // the user's public key, U...
	Seed   []byte // its seed, S...; keep it secret
	Path   string // where the seed is kept, "" when only in memory
}

// LoadOrCreate returns the keys of roles, reading each seed from
// dir/<role>.nk or, when the file does not exist, creating a user nkey and
// writing its seed there with mode 0600 (dir is made with mode 0700). A
// seed file readable by group or others is refused: it is a credential.
func LoadOrCreate(dir string, roles ...Role) ([]Key, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("natsauth: auth directory: %w", err)
	}
	keys := make([]Key, 0, len(roles))
	for _, r := range roles {
		path := filepath.Join(dir, SeedFile(r))
		k, err := ReadSeedFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			k, err = createSeed(path)
		}
		if err != nil {
			return nil, err
		}
		k.Role = r
		keys = append(keys, k)
	}
	return keys, nil
}

// NewKey makes a user nkey kept only in memory.
func NewKey(r Role) (Key, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return Key{}, fmt.Errorf("natsauth: create nkey: %w", err)
	}
	return keyOf(kp, r, "")
}

func createSeed(path string) (Key, error) {
	kp, err := nkeys.CreateUser()
	if err != nil {
		return Key{}, fmt.Errorf("natsauth: create nkey: %w", err)
	}
	k, err := keyOf(kp, "", path)
	if err != nil {
		return Key{}, err
	}
	// O_EXCL: two starts racing on one directory never overwrite a seed
	// the other already handed out.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return Key{}, fmt.Errorf("natsauth: write seed: %w", err)
	}
	_, werr := f.Write(append(append([]byte{}, k.Seed...), '\n'))
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		os.Remove(path)
		return Key{}, fmt.Errorf("natsauth: write seed %s: %w", path, werr)
	}
	return k, nil
}

// ReadSeedFile reads a user nkey seed file: the seed on its first line, as
// `nk -gen user` writes it, optionally followed by its public key on the
// second, as `nk -gen user -pubout` writes it (which must then be the
// seed's). It refuses a file that group or others may read.
func ReadSeedFile(path string) (Key, error) {
	st, err := os.Stat(path)
	if err != nil {
		return Key{}, fmt.Errorf("natsauth: seed file: %w", err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return Key{}, fmt.Errorf("natsauth: seed file %s has mode %s: a seed is a credential, make it 0600 (chmod 600 %s)", path, st.Mode().Perm(), path)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return Key{}, fmt.Errorf("natsauth: seed file: %w", err)
	}
	fields := bytes.Fields(data)
	if len(fields) == 0 || len(fields) > 2 {
		return Key{}, fmt.Errorf("natsauth: seed file %s: want the seed on line 1, optionally its public key on line 2 (nk -gen user -pubout); found %d words", path, len(fields))
	}
	kp, err := nkeys.FromSeed(fields[0])
	if err != nil {
		return Key{}, fmt.Errorf("natsauth: seed file %s: line 1: %w", path, err)
	}
	k, err := keyOf(kp, "", path)
	if err != nil {
		return Key{}, err
	}
	if len(fields) == 2 && string(fields[1]) != k.Public {
		return Key{}, fmt.Errorf("natsauth: seed file %s: line 2 is not the public key of the seed on line 1 (which is %s)", path, k.Public)
	}
	return k, nil
}

func keyOf(kp nkeys.KeyPair, r Role, path string) (Key, error) {
	pub, err := kp.PublicKey()
	if err != nil {
		return Key{}, fmt.Errorf("natsauth: nkey: %w", err)
	}
	seed, err := kp.Seed()
	if err != nil {
		return Key{}, fmt.Errorf("natsauth: nkey: %w", err)
	}
	if pub == "" || pub[0] != 'U' {
		return Key{}, fmt.Errorf("natsauth: %s: not a user nkey", path)
	}
	return Key{Role: r, Public: pub, Seed: seed, Path: path}, nil
}
