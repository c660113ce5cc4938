package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"

	"github.com/artifactr/artifactr/client"
	"github.com/artifactr/artifactr/events"
	"github.com/artifactr/artifactr/projections/summaries"
)

// apiError is an error with the HTTP status it is answered with, as
// {"detail": Detail}, LangGraph's error body.
type apiError struct {
	Status int
	Detail string
}

func (e *apiError) Error() string { return e.Detail }

func errorf(status int, format string, args ...any) *apiError {
	return &apiError{Status: status, Detail: fmt.Sprintf(format, args...)}
}

// statusOf maps an error of package client or events to its HTTP status.
func statusOf(err error) int {
	var ae *apiError
	var mbe *http.MaxBytesError
	var hs interface{ HTTPStatus() int }
	switch {
	case errors.As(err, &ae):
		return ae.Status
	case errors.As(err, &hs):
		return hs.HTTPStatus()
	case errors.As(err, &mbe), errors.Is(err, events.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, events.ErrInvalidThreadID), errors.Is(err, events.ErrInvalidEvent):
		return http.StatusUnprocessableEntity
	case errors.Is(err, events.ErrThreadBusy), errors.Is(err, events.ErrConflict), errors.Is(err, client.ErrThreadExists):
		return http.StatusConflict
	case errors.Is(err, client.ErrNoEvents), errors.Is(err, client.ErrNoSuchEvent):
		return http.StatusNotFound
	case errors.Is(err, events.ErrUnavailable), errors.Is(err, summaries.ErrNoReadModel):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded):
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError
}

// writeError answers err as {"detail": ...} with its status.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	if code >= 500 {
		s.log.Warn("http request failed", "method", r.Method, "path", r.URL.Path, "status", code, "err", err)
	}
	detail := err.Error()
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		detail = fmt.Sprintf("request body over the %d-byte limit", mbe.Limit)
	}
	writeJSON(w, code, map[string]string{"detail": detail})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"detail":"response does not encode"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// decode reads r's JSON body into v: unknown fields, trailing data and a
// body over the limit are errors; an empty body is {} when empty is true.
func decode(r *http.Request, v any, empty bool) error {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return errorf(http.StatusBadRequest, "reading the request body: %v", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		if empty {
			return nil
		}
		return errorf(http.StatusUnprocessableEntity, "request body: want a JSON object")
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusUnprocessableEntity, "request body: %v", err)
	}
	if dec.More() {
		return errorf(http.StatusUnprocessableEntity, "request body: data after the JSON value")
	}
	return nil
}

// logRecover turns a panic in a handler into a 500: bad input never stops
// serve.
func (s *Server) logRecover(w http.ResponseWriter, r *http.Request) {
	if p := recover(); p != nil {
		if p == http.ErrAbortHandler {
			panic(p)
		}
		s.log.Error("http handler panicked", "method", r.Method, "path", r.URL.Path, "panic", p)
		writeJSON(w, http.StatusInternalServerError, map[string]string{"detail": "internal error"})
	}
}

var _ = slog.LevelInfo
