package projections

import (
	"encoding/json"
	"maps"

	"github.com/artifactr/artifactr/events"
)

// SetMetadata implements [State].
func (t threadFold) SetMetadata(_ *events.Envelope, keys map[string]json.RawMessage, _ bool) {
	if t.Metadata == nil {
		t.Metadata = make(map[string]json.RawMessage, len(keys))
	}
	maps.Copy(t.Metadata, keys)
}

// Delete implements [State].
func (t threadFold) Delete(env *events.Envelope) {
	if t.DeletedSeq == 0 {
		t.DeletedSeq = env.Seq
	}
}
