package spec

import "github.com/artifactr/artifactr/projections/audit"

// One rule set (issue 27): the plain audit (projections/audit) and the
// trace validator judge a log by the same rules, the audit's, and the
// validator steps the model besides. auditRules says, for each of the
// audit's checks, what the spec has for it (an invariant, a property, or
// an action's guard), and what it checks that the model cannot see: the
// headers each append carried, and which message, request, run or holder
// an event names (the model counts and orders them; the log names them).
// rules_test.go holds the table to the audit's checks and to the model's
// names, and shows, rule by rule, a log the rule flags that the model
// refuses too, and one the model cannot see, where there is one.
var auditRules = map[string]auditRule{
	audit.CheckI1: {[]string{"I1_ConsumedAtMostOnce"}, "",
		"which message a consuming event names: a fresh write that names a consumed message while another is pending"},
	audit.CheckI3: {[]string{"I3_OneActiveRun"}, "", ""},
	audit.CheckFence: {[]string{"FenceNewestClaim"}, "",
		"the fence headers (Nats-Expected-Last-Subject-Sequence and -Subject; under RUNFENCE the run subject's compare-and-set) and the holder an event names"},
	audit.CheckClaimChain:        {[]string{"ClaimChain"}, "", "the expected-sequence header of each marker's append (on the claim subject, or the run subject under RUNFENCE)"},
	audit.CheckNoEndAfterAbandon: {[]string{"NoEndAfterAbandon"}, "", ""},
	audit.CheckAnswerOnce: {[]string{"AnswerOnce"}, "",
		"which request an answer names, and request ids opened twice by a run"},
	audit.CheckRunChain: {nil, "",
		"the expected-sequence header of each run-subject append: DESIGN §3's compare-and-set on threads.T.run, which the model's Ask and RunEnd take as given"},
	audit.CheckRejectOnlyIdle: {[]string{"RejectOnlyIdle"}, "", ""},
	audit.CheckNoneSkipped: {[]string{"NoneSkipped"}, "",
		"which message a consuming event names: the model consumes the oldest pending message whatever the event names"},
	audit.CheckRunByHolder: {[]string{"Ask", "RunEnd"}, "pc[p] = running: the holder's steps for its own run",
		"which run an event names, and the holder it names beside its claim_seq"},
	audit.CheckReleaseByHolder: {[]string{"Release"}, "Newest(p)", "the holder a release names beside its claim_seq"},
	audit.CheckGivenToActive: {[]string{"Reply", "Steer"}, "an open request of p's run; pc[p] = running",
		"which request and which run an answer or steering names"},
	audit.CheckAbandonOnlyOlder: {[]string{"AbandonOnlyOlder"}, "",
		"which run an abandon names, and its started_claim_seq"},
}

// auditRule is what the spec has for one of the audit's checks.
type auditRule struct {
	// spec names the invariants, properties or actions that state the
	// rule; none when the rule is a header check only.
	spec []string
	// guard is the actions' guard that states it, when spec names actions.
	guard string
	// outside is what the rule checks that the model cannot see, "" when
	// nothing.
	outside string
}
