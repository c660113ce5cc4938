package openai

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"
)

// DefaultProbeTimeout bounds [Agent.Probe] when its context has no sooner
// deadline.
const DefaultProbeTimeout = 3 * time.Second

// Probe checks that BaseURL answers, as serve does at start: it asks for
// GET {BaseURL}/models, which OpenAI, Ollama, vLLM and llama.cpp serve. It
// returns an error when the server does not answer, refuses the API key, or
// answers with a list of models that lacks Model. Any other answer counts
// as an answer: some servers have no /models. A run needs none of this; it
// only tells an operator early that runs will fail.
func (a *Agent) Probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, DefaultProbeTimeout)
	defer cancel()
	url := a.cfg.BaseURL + "/models"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("openai: %w", err)
	}
	if a.cfg.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+a.cfg.APIKey)
	}
	resp, err := a.cfg.HTTPClient.Do(req)
	if err != nil {
		return fmt.Errorf("openai: %s does not answer: %w", a.cfg.BaseURL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20)) // a long list of models
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("openai: GET %s: %s: %s (check OPENAI_API_KEY)", url, resp.Status, errorMessage(body))
	case resp.StatusCode != http.StatusOK:
		return nil
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if json.Unmarshal(body, &list) != nil || len(list.Data) == 0 {
		return nil
	}
	ids := make([]string, 0, len(list.Data))
	for _, m := range list.Data {
		ids = append(ids, m.ID)
	}
	if !slices.Contains(ids, a.cfg.Model) {
		if len(ids) > 10 {
			ids = append(ids[:10], "...")
		}
		return fmt.Errorf("openai: %s lists no model %q (it has %v)", a.cfg.BaseURL, a.cfg.Model, ids)
	}
	return nil
}
