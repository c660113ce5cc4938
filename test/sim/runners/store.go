package runners

import (
	"fmt"

	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/events/eventstest"
	"github.com/artifactr/artifactr/events/memstore"
)

// openStore opens a runner's store handle, whose writes take the fault fs
// holds; nil when it could not (the run has failed).
func (w *world) openStore(fs *faults) events.Store {
	var s events.Store
	if w.nats != nil {
		if s = w.openNATSStore(fs); s == nil {
			return nil
		}
	} else {
		s = w.log.Open(memstore.Config{Now: w.clock.Now, Subjects: w.subj, Fault: fs.hook})
	}
	if w.cfg.Unfenced {
		s = eventstest.Unfenced(s)
	}
	return s
}

// logLen is the log's length now: where a runner that joins starts to
// follow it.
func (w *world) logLen() uint64 {
	if w.nats != nil {
		w.catchUp()
		return uint64(len(w.envs))
	}
	return uint64(w.log.Len())
}

func (w *world) logName() string {
	if w.nats != nil {
		return "natsstore"
	}
	return w.log.Mode().String()
}

// readNew returns the log's events the checker has not read, in order.
func (w *world) readNew() []events.Envelope {
	if w.nats != nil {
		return w.readNATS()
	}
	var out []events.Envelope
	for {
		env, err := w.tail.Next(w.done)
		if err != nil {
			return out
		}
		out = append(out, env)
	}
}

// nameSession gives a session a name for traces, in the order opened.
func (w *world) nameSession(id string) {
	if _, ok := w.names[id]; !ok {
		w.names[id] = fmt.Sprintf("s%d", len(w.names)+1)
	}
}
