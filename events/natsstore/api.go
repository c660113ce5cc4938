package natsstore

import (
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// api names the subjects natsstore addresses JetStream on, outside what the
// jetstream client sends itself: direct and leader gets, consumer deletes,
// and KV writes with per-message TTLs. Under a JetStream domain they all move
// under $JS.<domain>.API., the way nats.go's own KV does it (kv.go:
// useJSPfx), so a client of a hub reaches a leaf node's JetStream; without
// one they are the defaults, $JS.API. and $KV.
type api struct {
	prefix string // $JS.API. or $JS.<domain>.API.
	domain string
}

func newAPI(domain string) api {
	if domain == "" {
		return api{prefix: jetstream.DefaultAPIPrefix}
	}
	return api{prefix: "$JS." + domain + ".API.", domain: domain}
}

// subject returns the API subject of op, such as DIRECT.GET.<stream>.
func (a api) subject(op string) string { return a.prefix + op }

// kvStored is the prefix of bucket's keys as stored: $KV.<bucket>., whatever
// the domain. Filters and read-backs use it.
func kvStored(bucket string) string { return "$KV." + bucket + "." }

// kvPublish is the prefix a write to bucket's keys is published to: the
// stored one without a domain, $JS.<domain>.API.$KV.<bucket>. with one,
// which the server maps back to the stored subject.
func (a api) kvPublish(bucket string) string {
	if a.domain == "" {
		return kvStored(bucket)
	}
	return a.prefix + kvStored(bucket)
}

// newJetStream returns the jetstream client of the store's domain.
func (a api) newJetStream(nc *nats.Conn) (jetstream.JetStream, error) {
	if a.domain == "" {
		return jetstream.New(nc)
	}
	return jetstream.NewWithDomain(nc, a.domain)
}
