package summaries

import (
	"encoding/json"
	"maps"

	"github.com/artifactr/artifactr/events"
)

// SetMetadata implements [projections.State].
func (f summaryFold) SetMetadata(_ *events.Envelope, keys map[string]json.RawMessage, _ bool) {
	if f.s.Metadata == nil {
		f.s.Metadata = make(map[string]json.RawMessage, len(keys))
	}
	maps.Copy(f.s.Metadata, keys)
}

// Delete implements [projections.State].
func (f summaryFold) Delete(env *events.Envelope) {
	if f.s.DeletedSeq == 0 {
		f.s.DeletedSeq = env.Seq
	}
}
