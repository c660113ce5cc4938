package natsstore

import (
	"context"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"google.golang.org/protobuf/proto"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventspb"
)

// Sessions returns the runner sessions whose keys are in the lease bucket
// now: one per live runner, plus any that lapsed and whose key the server
// has not yet expired. It reads only the session keys (one filtered watch,
// stopped once caught up), so its cost grows with runners, not threads.
func (s *Store) Sessions(ctx context.Context) ([]events.Session, error) {
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	kv, err := s.js.KeyValue(ctx, s.cfg.Bucket)
	if err != nil {
		return nil, unavailable("open lease bucket "+s.cfg.Bucket, err)
	}
	w, err := kv.Watch(ctx, sessionPrefix+"*", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, unavailable("watch sessions", err)
	}
	defer func() { _ = w.Stop() }()
	var out []events.Session
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok || e == nil {
				return out, nil
			}
			var v eventspb.Lease
			if proto.Unmarshal(e.Value(), &v) != nil {
				continue
			}
			id, _ := strings.CutPrefix(e.Key(), sessionPrefix)
			out = append(out, events.Session{
				ID: id, Owner: v.GetHolder(), Revision: e.Revision(),
				TTL: time.Duration(v.GetTtlMs()) * time.Millisecond, Expires: time.Unix(0, v.GetExpiresUnixNano()),
			})
		case <-ctx.Done():
			return nil, unavailable("watch sessions", ctx.Err())
		}
	}
}
