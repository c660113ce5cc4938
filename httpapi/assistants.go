package httpapi

import (
	"encoding/json"
	"net/http"
	"time"
)

// assistantsEpoch is the created_at of every assistant: they come from the
// configuration, not from the log.
var assistantsEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// assistant resolves id, an assistant UUID or a graph id.
func (s *Server) assistant(id string) (Assistant, bool) {
	for _, a := range s.cfg.Assistants {
		if a.GraphID == id || a.ID() == id {
			return a, true
		}
	}
	return Assistant{}, false
}

func (s *Server) assistantOr404(id string) (Assistant, error) {
	a, ok := s.assistant(id)
	if !ok {
		return Assistant{}, errorf(http.StatusNotFound, "assistant %q not found: the configured assistants are %s", id, s.assistantNames())
	}
	return a, nil
}

func (s *Server) assistantNames() string {
	var b []byte
	for i, a := range s.cfg.Assistants {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, a.GraphID...)
	}
	return string(b)
}

type assistantJSON struct {
	AssistantID string         `json:"assistant_id"`
	GraphID     string         `json:"graph_id"`
	Config      map[string]any `json:"config"`
	Context     map[string]any `json:"context"`
	CreatedAt   string         `json:"created_at"`
	UpdatedAt   string         `json:"updated_at"`
	Metadata    map[string]any `json:"metadata"`
	Version     int            `json:"version"`
	Name        string         `json:"name"`
	Description *string        `json:"description"`
}

func assistantOf(a Assistant) assistantJSON {
	j := assistantJSON{
		AssistantID: a.ID(), GraphID: a.GraphID, Config: map[string]any{}, Context: map[string]any{},
		CreatedAt: isoTime(assistantsEpoch), UpdatedAt: isoTime(assistantsEpoch),
		Metadata: map[string]any{"created_by": "system", "agent": a.Kind}, Version: 1, Name: a.GraphID,
	}
	if a.Description != "" {
		j.Description = &a.Description
	}
	return j
}

type assistantSearch struct {
	GraphID   string         `json:"graph_id"`
	Name      string         `json:"name"`
	Metadata  map[string]any `json:"metadata"`
	Limit     *int           `json:"limit"`
	Offset    int            `json:"offset"`
	SortBy    string         `json:"sort_by"`
	SortOrder string         `json:"sort_order"`
	Select    []string       `json:"select"`
}

func (s *Server) matchingAssistants(q assistantSearch) []assistantJSON {
	out := []assistantJSON{}
	for _, a := range s.cfg.Assistants {
		j := assistantOf(a)
		if (q.GraphID != "" && q.GraphID != a.GraphID) || (q.Name != "" && q.Name != a.GraphID) || !metadataMatches(j.Metadata, q.Metadata) {
			continue
		}
		out = append(out, j)
	}
	return out
}

func metadataMatches(have map[string]any, want map[string]any) bool {
	for k, v := range want {
		hv, ok := have[k]
		if !ok {
			return false
		}
		a, _ := json.Marshal(hv)
		b, _ := json.Marshal(v)
		if string(a) != string(b) {
			return false
		}
	}
	return true
}

func (s *Server) searchAssistants(w http.ResponseWriter, r *http.Request) error {
	var q assistantSearch
	if err := decode(r, &q, true); err != nil {
		return err
	}
	limit, err := pageLimit(q.Limit, q.Offset)
	if err != nil {
		return err
	}
	all := s.matchingAssistants(q)
	writeJSON(w, http.StatusOK, page(all, q.Offset, limit))
	return nil
}

func (s *Server) countAssistants(w http.ResponseWriter, r *http.Request) error {
	var q assistantSearch
	if err := decode(r, &q, true); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, len(s.matchingAssistants(q)))
	return nil
}

func (s *Server) getAssistant(w http.ResponseWriter, r *http.Request) error {
	a, err := s.assistantOr404(r.PathValue("assistant_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, assistantOf(a))
	return nil
}

// assistantGraph is the graph every assistant has: one node, the agent.
func (s *Server) assistantGraph(w http.ResponseWriter, r *http.Request) error {
	a, err := s.assistantOr404(r.PathValue("assistant_id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"nodes": []map[string]any{
			{"id": "__start__", "type": "schema", "data": "__start__"},
			{"id": "agent", "type": "runnable", "data": map[string]any{"id": []string{"artifactr", a.Kind}, "name": a.GraphID}},
			{"id": "__end__", "type": "schema", "data": "__end__"},
		},
		"edges": []map[string]any{
			{"source": "__start__", "target": "agent"},
			{"source": "agent", "target": "__end__"},
		},
	})
	return nil
}

func (s *Server) assistantSchemas(w http.ResponseWriter, r *http.Request) error {
	a, err := s.assistantOr404(r.PathValue("assistant_id"))
	if err != nil {
		return err
	}
	state := map[string]any{
		"title": a.GraphID, "type": "object",
		"properties": map[string]any{"messages": map[string]any{"type": "array", "items": map[string]any{"type": "object"}}},
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"graph_id": a.GraphID, "input_schema": state, "output_schema": state, "state_schema": state,
		"config_schema":  map[string]any{"type": "object", "properties": map[string]any{}},
		"context_schema": map[string]any{"type": "object", "properties": map[string]any{}},
	})
	return nil
}

func (s *Server) assistantSubgraphs(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.assistantOr404(r.PathValue("assistant_id")); err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, map[string]any{})
	return nil
}

// maxLimit bounds a page.
const maxLimit = 1000

func pageLimit(limit *int, offset int) (int, error) {
	n := 10
	if limit != nil {
		n = *limit
	}
	if n < 1 || n > maxLimit || offset < 0 {
		return 0, errorf(http.StatusUnprocessableEntity, "limit %d, offset %d: want 1 <= limit <= %d and offset >= 0", n, offset, maxLimit)
	}
	return n, nil
}

func page[T any](all []T, offset, limit int) []T {
	if offset >= len(all) {
		return []T{}
	}
	return all[offset:min(len(all), offset+limit)]
}
