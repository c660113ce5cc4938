package natsembed

import (
	"fmt"
	"log/slog"
)

// logAdapter turns the server's printf logging into slog records. It also
// catches Fatalf, which the server uses for start-up failures such as a port
// in use: an embedded server must report those to Start, not exit.
type logAdapter struct {
	log   *slog.Logger
	fatal chan string // first fatal message; buffered, later ones dropped
}

func newLogAdapter(l *slog.Logger) *logAdapter {
	return &logAdapter{log: l.With("component", "nats-server"), fatal: make(chan string, 1)}
}

func (a *logAdapter) Noticef(format string, v ...any) { a.log.Info(fmt.Sprintf(format, v...)) }
func (a *logAdapter) Warnf(format string, v ...any)   { a.log.Warn(fmt.Sprintf(format, v...)) }
func (a *logAdapter) Errorf(format string, v ...any)  { a.log.Error(fmt.Sprintf(format, v...)) }
func (a *logAdapter) Debugf(format string, v ...any)  { a.log.Debug(fmt.Sprintf(format, v...)) }
func (a *logAdapter) Tracef(format string, v ...any)  { a.log.Debug(fmt.Sprintf(format, v...)) }

func (a *logAdapter) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	a.log.Error(msg, "fatal", true)
	select {
	case a.fatal <- msg:
	default:
	}
}
