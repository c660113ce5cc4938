package events

import (
	"strconv"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/artifactr/artifactr/events/eventspb"
)

// NewThreadForked builds thread_forked, the first event of thread, copying
// the history in b. Like a post it carries no claim: it is appended to
// threads.T.posted with [ExpectLast](0), so it lands only on a thread with no
// posts, and with the message id [ForkMsgID].
func NewThreadForked(thread string, now time.Time, b *eventspb.ThreadForked) *eventspb.Event {
	return &eventspb.Event{Thread: thread, Time: timestamppb.New(now), Body: &eventspb.Event_ThreadForked{ThreadForked: b}}
}

// ForkMsgID is the Nats-Msg-Id of the fork of source at seq into thread.
// It is the same for every attempt of one fork, so a retry after an
// unknown outcome is deduplicated, and it has colons, which no message id
// has, so no post's id (thread:message_id) can equal it.
func ForkMsgID(thread, source string, seq uint64) string {
	return thread + ":fork:" + source + ":" + strconv.FormatUint(seq, 10)
}
