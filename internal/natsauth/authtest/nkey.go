package authtest

import (
	"testing"

	"github.com/nats-io/nkeys"
)

func mustPublic(t testing.TB, seed []byte) string {
	t.Helper()
	kp, err := nkeys.FromSeed(seed)
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		t.Fatalf("seed: %v", err)
	}
	return pub
}

func signer(seed []byte) func([]byte) ([]byte, error) {
	return func(nonce []byte) ([]byte, error) {
		kp, err := nkeys.FromSeed(seed)
		if err != nil {
			return nil, err
		}
		defer kp.Wipe()
		return kp.Sign(nonce)
	}
}
