package audit

// shortLen is how many bytes a [short] holds inline: enough for the thread
// ids, holders and run ids artifactr makes, such as "r1/9f86d081884c", and
// small enough that a short with its fallback is 40 bytes.
const shortLen = 23

// short is a string whose bytes are kept inline when they fit. The audit's
// per-thread state is cold in cache on a long, interleaved log; comparing a
// plain string field would cost one more cache miss per event for its bytes,
// which live elsewhere. Comparing a short touches only the struct holding it.
type short struct {
	n    uint8 // len when inline; long when not
	b    [shortLen]byte
	long string // the string when it does not fit
}

const notInline = 0xff

// mkShort returns s as a short, fit to be a map key: hashing and comparing
// it reads no bytes outside it when s fits inline.
func mkShort(s string) short {
	var x short
	x.set(s)
	return x
}

// set makes x hold s. Bytes of b past len(s) are left as they were, so only
// a fresh short (mkShort) is fit to be a map key.
func (x *short) set(s string) {
	if len(s) <= shortLen {
		x.n = uint8(len(s))
		copy(x.b[:], s)
		x.long = ""
		return
	}
	x.n, x.long = notInline, s
}

// eq reports whether x holds s. The conversion in the comparison does not
// allocate.
func (x *short) eq(s string) bool {
	if x.n == notInline {
		return x.long == s
	}
	return int(x.n) == len(s) && string(x.b[:x.n]) == s
}

// String returns the string x holds, for messages.
func (x *short) String() string {
	if x.n == notInline {
		return x.long
	}
	return string(x.b[:x.n])
}
