package spec

// forgetAnswered renumbers a normalized state's ghost variables: answered
// requests are forgotten as consumed messages are (asked becomes the open
// requests, answered 0, which keeps AnswerOnce's sum), and so are the
// messages posted under reject, whose record RejectOnlyIdle checks only
// at the post.
func forgetAnswered(t *ThreadState) {
	t.asked, t.answered = t.reqs, [maxMsgs + 1]uint8{}
	t.rejectPosts = 0
}
