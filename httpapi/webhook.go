package httpapi

func (s *Server) maybeWebhook(p *runPlan, run runJSON) {}
