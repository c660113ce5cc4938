package natsauth

import (
	"fmt"
	"slices"
	"strings"
)

// Role is one of the four kinds of NATS user artifactr expects.
type Role string

// The roles (DESIGN §9, issue 10). Writers are trusted by their NATS
// permissions, not by their manners.
const (
	// Runner claims threads and writes their run events, the leases, the
	// sessions and the read models; it creates the durable consumers it
	// reads through.
	Runner Role = "runner"
	// Client posts messages and reads threads and summaries. Agents'
	// backends and people use it.
	Client Role = "client"
	// Auditor reads everything and writes nothing.
	Auditor Role = "auditor"
	// Admin creates, updates and deletes the stream and the buckets. No
	// other role can.
	Admin Role = "admin"
)

// Roles lists every role, in the order of the generated configuration.
var Roles = []Role{Runner, Client, Auditor, Admin}

// ParseRole returns the role named s.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if !slices.Contains(Roles, r) {
		return "", fmt.Errorf("natsauth: unknown role %q (want runner, client, auditor or admin)", s)
	}
	return r, nil
}

// Defaults of [Names]: the names artifactr uses when none is configured.
const (
	DefaultAccount          = "ARTIFACTR"
	DefaultPrefix           = "threads"
	DefaultStream           = "ARTIFACTR"
	DefaultClaims           = "claims"
	DefaultSummaries        = "thread_summaries"
	DefaultSnapshots        = "thread_snapshots"
	DefaultMessageIDs       = "message_ids"
	DefaultFirstPosts       = "message_firsts"
	DefaultDelayed          = "delayed_posts"
	DefaultWorkQueue        = "artifactr-runners"
	DefaultSummariesDurable = "summaries"
)

// Names are the JetStream names the permissions are written for. Every
// field must be one subject token.
type Names struct {
	Account   string // the NATS account holding the stream
	Prefix    string // first subject token of the stream, as in threads.T.run
	Stream    string // the thread stream
	Claims    string // KV bucket of leases and runner sessions
	Summaries string // KV bucket of the thread-summaries read model
	Snapshots string // KV bucket of thread snapshots
	// MessageIDs is the KV bucket of message ids, which posters write;
	// "" means the store's default for Stream: DefaultMessageIDs, or
	// message_ids_<stream> for another stream than DefaultStream.
	MessageIDs string
	// FirstPosts is the bucket of the first-post index, which runners
	// write once per entry and every role reads; "" means the store's
	// default for Stream: DefaultFirstPosts, or message_firsts_<stream>.
	FirstPosts string
	// Delayed is the KV bucket of delayed posts (the HTTP API's
	// after_seconds), which clients write and drain.
	Delayed string
	// Durables are the durable consumers only runners may create, read,
	// acknowledge or delete: the work queue and the summaries projector's.
	// With partitions each has one of its name on every partition's
	// stream.
	Durables []string
	// Partitions is the layout's partition count (0 means 1). With more
	// than one, a thread's subjects are <prefix>.<p>.T.<kind> and the
	// thread streams are <Stream>-p<p> (docs/partitions.md); see
	// [Names.Permissions].
	Partitions int
}

// DefaultNames returns the names artifactr uses by default.
func DefaultNames() Names {
	return Names{
		Account:    DefaultAccount,
		Prefix:     DefaultPrefix,
		Stream:     DefaultStream,
		Claims:     DefaultClaims,
		Summaries:  DefaultSummaries,
		Snapshots:  DefaultSnapshots,
		MessageIDs: DefaultMessageIDs,
		FirstPosts: DefaultFirstPosts,
		Delayed:    DefaultDelayed,
		Durables:   []string{DefaultWorkQueue, DefaultSummariesDurable},
	}
}

// Validate reports a name that is not one subject token.
func (n Names) Validate() error {
	check := func(what, v string) error {
		if v == "" || strings.ContainsAny(v, ".*> \t\r\n\"'$") {
			return fmt.Errorf("natsauth: %s %q is not a single subject token", what, v)
		}
		return nil
	}
	for _, f := range []struct{ what, v string }{
		{"account", n.Account}, {"prefix", n.Prefix}, {"stream", n.Stream},
		{"claims bucket", n.Claims}, {"summaries bucket", n.Summaries}, {"snapshots bucket", n.Snapshots},
		{"message ids bucket", n.messageIDs()}, {"first posts bucket", n.firstPosts()},
		{"delayed posts bucket", n.delayed()},
	} {
		if err := check(f.what, f.v); err != nil {
			return err
		}
	}
	for _, d := range n.Durables {
		if err := check("durable", d); err != nil {
			return err
		}
	}
	return nil
}

// Perm is one role's permissions as subject lists, the shape of a
// nats-server "permissions" block.
type Perm struct {
	PubAllow, PubDeny []string
	SubAllow, SubDeny []string
}

// partitioned reports whether the layout has more than one partition.
func (n Names) partitioned() bool { return n.Partitions > 1 }

// threads returns the wildcard subject of every thread's events of kind k:
// <prefix>.*.k, or <prefix>.*.*.k with partitions, whatever their count.
func (n Names) threads(k string) string {
	if n.partitioned() {
		return n.Prefix + ".*.*." + k
	}
	return n.Prefix + ".*." + k
}

// threadStream is the stream token of the thread streams' API subjects:
// the stream's name, or with partitions a wildcard. NATS wildcards match
// whole tokens only (nats-server sublist.go: a '*' inside a token, as in
// ARTIFACTR-p*, is a literal character), so the P streams <Stream>-p<p>
// could only be named one by one, ten subjects each in every user's JWT;
// the wildcard keeps the JWT's size whatever P. It lets every role read
// (never write) every stream of the account, which holds artifactr's
// alone; what writes and which consumers a role may use stay as narrow as
// with one stream.
func (n Names) threadStream() string {
	if n.partitioned() {
		return "*"
	}
	return n.Stream
}

// streams returns the JetStream streams every role reads: the thread
// stream and the streams behind the buckets it scans. The delayed posts'
// bucket is the clients' alone (streamAPI): each stream costs every user
// JWT ten subjects, and a runner's JWT must stay under the server's control
// line.
func (n Names) streams() []string {
	if n.partitioned() {
		return []string{n.threadStream()} // every stream, the buckets' too
	}
	return []string{n.Stream, "KV_" + n.Claims, "KV_" + n.Summaries, "KV_" + n.Snapshots}
}

func (n Names) delayed() string {
	if n.Delayed == "" {
		return DefaultDelayed
	}
	return n.Delayed
}

func (n Names) firstPosts() string {
	if n.FirstPosts == "" && n.Stream != DefaultStream {
		return DefaultFirstPosts + "_" + n.Stream
	}
	if n.FirstPosts == "" {
		return DefaultFirstPosts
	}
	return n.FirstPosts
}

func (n Names) messageIDs() string {
	if n.MessageIDs == "" && n.Stream != DefaultStream {
		return DefaultMessageIDs + "_" + n.Stream
	}
	if n.MessageIDs == "" {
		return DefaultMessageIDs
	}
	return n.MessageIDs
}

// readAPI are the JetStream API requests of a reader: stream and consumer
// info, direct and stored message gets, and its own ordered or ephemeral
// pull consumers (created by name, fed by MSG.NEXT, deleted when done).
func (n Names) readAPI() []string {
	s := []string{
		"$JS.API.INFO",
		"$SYS.REQ.USER.INFO", // lets a user see its own permissions
	}
	// The message-id bucket is read by key only: no consumers, which
	// keeps the user JWTs under the server's control line.
	ids := "KV_" + n.messageIDs()
	s = append(s, "$JS.API.STREAM.INFO."+ids, "$JS.API.STREAM.MSG.GET."+ids, "$JS.API.DIRECT.GET."+ids, "$JS.API.DIRECT.GET."+ids+".>")
	// The first-post index is read by subject: a direct get on a single
	// replica, else from its stream's leader.
	if !n.partitioned() { // else the streams' wildcard covers it
		firsts := "KV_" + n.firstPosts()
		s = append(s, "$JS.API.STREAM.INFO."+firsts, "$JS.API.STREAM.MSG.GET."+firsts, "$JS.API.DIRECT.GET."+firsts+".>")
	}
	for _, st := range n.streams() {
		s = append(s, streamAPI(st)...)
	}
	return s
}

// streamAPI is what reading and scanning stream st takes.
func streamAPI(st string) []string {
	return []string{
		"$JS.API.STREAM.INFO." + st,
		"$JS.API.STREAM.MSG.GET." + st,
		"$JS.API.DIRECT.GET." + st,
		"$JS.API.DIRECT.GET." + st + ".>",
		"$JS.API.CONSUMER.CREATE." + st + ".>",
		"$JS.API.CONSUMER.INFO." + st + ".*",
		"$JS.API.CONSUMER.NAMES." + st,
		"$JS.API.CONSUMER.LIST." + st,
		"$JS.API.CONSUMER.DELETE." + st + ".*",
		"$JS.API.CONSUMER.MSG.NEXT." + st + ".*",
	}
}

// durableDeny keeps non-runners off the runners' durable consumers: a
// client that pulled from the work queue, acknowledged its messages or
// deleted it would starve the runners.
func (n Names) durableDeny() []string {
	var s []string
	st := n.threadStream()
	for _, d := range n.Durables {
		s = append(s,
			"$JS.API.CONSUMER.CREATE."+st+"."+d,
			"$JS.API.CONSUMER.CREATE."+st+"."+d+".>",
			"$JS.API.CONSUMER.DELETE."+st+"."+d,
			"$JS.API.CONSUMER.MSG.NEXT."+st+"."+d,
			"$JS.ACK."+st+"."+d+".>",
		)
	}
	return s
}

// Permissions returns role's permissions for names. Admin has none: it may
// do anything in the account.
//
// With partitions, the thread subjects take a wildcard for the partition
// token (threads.*.*.posted: no list of partitions) and the thread
// streams' API subjects one for the stream token (see threadStream), so a
// user's permissions, and its JWT, do not grow with the partition count.
func (n Names) Permissions(r Role) (Perm, bool) {
	sub := []string{"_INBOX.>", n.Prefix + ".>"}
	st := n.threadStream()
	switch r {
	case Runner:
		pub := []string{
			n.threads("claim"),
			n.threads("run"),
			// The guard of a guarded consuming write (natsstore.GuardMode):
			// only writers of the run subject may write it.
			n.threads("guard"),
			"$KV." + n.Claims + ".>",
			"$KV." + n.Summaries + ".>",
			"$KV." + n.Snapshots + ".>",
			"$KV." + n.messageIDs() + ".>",
			// The first-post index: an entry is written once, and the
			// stream refuses any change to it (natsstore.FirstPost).
			"$KV." + n.firstPosts() + ".>",
			"$JS.API.CONSUMER.DURABLE.CREATE." + st + ".*",
			// The summaries projector moves its durable back to its
			// checkpoint at each start and on a gap.
			"$JS.API.CONSUMER.RESET." + st + ".*",
			"$JS.ACK." + st + ".>",
		}
		return Perm{PubAllow: append(pub, n.readAPI()...), SubAllow: sub}, true
	case Client:
		// A post writes its message id's key first (natsstore); the HTTP
		// API keeps its delayed posts in a bucket of their own.
		pub := append([]string{n.threads("posted"), "$KV." + n.messageIDs() + ".>", "$KV." + n.delayed() + ".>"}, n.readAPI()...)
		if !n.partitioned() { // else readAPI's wildcard covers it
			pub = append(pub, streamAPI("KV_"+n.delayed())...)
		}
		return Perm{PubAllow: pub, PubDeny: n.durableDeny(), SubAllow: sub}, true
	case Auditor:
		return Perm{PubAllow: n.readAPI(), PubDeny: n.durableDeny(), SubAllow: sub}, true
	}
	return Perm{}, false
}
