package spec

// mutation is a set of guards removed from the actions of
// ThreadClaimLapse, for the mutation tests (mutation_test.go): each guard
// that matters must, once removed, break an invariant or a property.
type mutation uint32

// The guards that can be removed. The program counter conjuncts (pc[p] =
// ...) are the shape of the protocol, not checks, and are not mutated; nor
// are the bounds that keep the model finite (Post's NumMsgs, Claim's
// MaxClaims, RunStart's NRuns, Ask's MaxOpen).
const (
	mutFenceRunStart mutation = 1 << iota // RunStart: Fenced(p)
	mutFenceReply                         // Reply: Fenced(p)
	mutFenceSteer                         // Steer: Fenced(p)
	mutFenceAbandon                       // Abandon: Fenced(p)
	mutReleaseOwn                         // Release: Newest(p), the compare-and-set on its own marker
	mutReplay                             // Load: the replay (seen[p] = taken, the active run seen)
	mutLoadAbandon                        // Load: plan the abandon of an active run
	mutClaimCAS                           // Claim: the compare-and-set on what ReadClaim read
	mutRetryLease                         // Claim: retry only while the lease is p's
	mutLeaseLive                          // Acquire: only a free or lapsed lease
	mutRenewOther                         // Renew: only p's own lease
	mutAskCAS                             // Ask: the compare-and-set on the run subject (run active)
	mutAnswerOpen                         // Reply: an open request to answer
	mutEndCAS                             // RunEnd: the compare-and-set on the run subject (run active)
	mutPosted                             // RunStart: a message p knows untaken exists
	mutRefuseNewest                       // StartFenced, ReplyFenced: ~Newest(p)
	mutRejectIdle                         // PostIdle: no run active
	mutOldest                             // RunStart: the oldest pending message (cut: the newest)
	mutReplyClose                         // Reply: closes the request it answers
	mutRevive                             // Renew: only a session that has not lapsed
	mutKeepHolding                        // RunEnd: refused, let go (cut: hold on)

	// mutLast is the last guard: the table must cover every guard up to it.
	mutLast = mutKeepHolding
)

// The guards of the fence on the run subject (RUNFENCE, runfence_test.go):
// they change nothing without GUARD or RUNFENCE, so the table above, of
// ThreadClaimLapse.cfg, leaves them out.
const (
	mutLoadNewest   mutation = mutLast << (1 + iota) // Load: p knows the run subject's last sequence only if its marker is the newest
	mutOutputCAS                                     // Output: the compare-and-set on the run subject (cut: unchecked, p takes its ack's sequence)
	mutOutputBlind                                   // Output: the compare-and-set, and p's learning the sequence from its ack
	mutRereadNewest                                  // Reread: only while p's marker is the newest
)
