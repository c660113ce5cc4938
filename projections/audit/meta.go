package audit

import (
	"encoding/json"

	"github.com/artifactr/artifactr/events"
)

// SetMetadata implements [projections.State]: metadata is no business of
// the audit's checks.
func (f *auditFold) SetMetadata(*events.Envelope, map[string]json.RawMessage, bool) {}

// Delete implements [projections.State]: a tombstone erases nothing, and
// the audit checks the thread's log as it is.
func (f *auditFold) Delete(*events.Envelope) {}
