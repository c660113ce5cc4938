// Package natsembedtest starts in-process nats-servers for tests: one per
// test with [RunForTest], a hub and a leaf node with [StartLeaf], or a small
// cluster with [StartCluster] to exercise replicated streams and leader
// changes.
//
// It is apart from [natsembed] so that nothing here is linked into a
// production binary (cmd/artifactr's deps test checks). It does not import
// package testing: [testkit.TB] is the part of testing.TB it uses.
//
// # Usage
//
//	s := natsembedtest.RunForTest(t)
//	nc, err := nats.Connect(s.ClientURL())
package natsembedtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/artifactr/artifactr/internal/natsembed"
	"github.com/artifactr/artifactr/internal/testkit"
)

// RunForTest starts a server for t on a free loopback port, with JetStream
// in a temporary directory and fsync off (test data need not survive power
// loss). It is shut down when t ends. Failing to start fails t: tests never
// skip for want of a server.
func RunForTest(t testkit.TB) *natsembed.Server {
	t.Helper()
	s, err := natsembed.Start(natsembed.Config{
		DataDir: t.TempDir(),
		Listen:  "127.0.0.1:-1",
		NoSync:  true,
		Logger:  newTestLogger(t, slog.LevelError),
	})
	if err != nil {
		t.Fatalf("natsembedtest.RunForTest: %v", err)
	}
	t.Cleanup(s.Shutdown)
	return s
}

// StartLeaf starts two servers for t, each with JetStream in its own
// domain: a hub in hubDomain, and a leaf node of it in leafDomain, the way
// an edge site runs its own JetStream. It returns once the leaf is
// connected. A client of the hub reaches the hub's JetStream as $JS.API
// (or $JS.<hubDomain>.API) and the leaf's only as $JS.<leafDomain>.API:
// code that hard-codes $JS.API or $KV talks to the wrong JetStream. Both
// are shut down when t ends.
func StartLeaf(t testkit.TB, hubDomain, leafDomain string) (hub, leaf *natsembed.Server) {
	t.Helper()
	ports := freePorts(t, 1)
	logger := newTestLogger(t, slog.LevelError)
	leafAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	hub, err := natsembed.Start(natsembed.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", NoSync: true, ServerName: "hub",
		JetStreamDomain: hubDomain, LeafListen: leafAddr, Logger: logger.With("node", "hub")})
	if err != nil {
		t.Fatalf("natsembedtest.StartLeaf: hub: %v", err)
	}
	t.Cleanup(hub.Shutdown)
	leaf, err = natsembed.Start(natsembed.Config{DataDir: t.TempDir(), Listen: "127.0.0.1:-1", NoSync: true, ServerName: "leaf",
		JetStreamDomain: leafDomain, LeafRemotes: []string{"nats-leaf://" + leafAddr}, Logger: logger.With("node", "leaf")})
	if err != nil {
		t.Fatalf("natsembedtest.StartLeaf: leaf: %v", err)
	}
	t.Cleanup(leaf.Shutdown)
	// Connected is not enough: the hub learns the leaf's interest in
	// $JS.<leafDomain>.API after; until then a request gets no responders.
	nc, err := nats.Connect(hub.ClientURL())
	if err != nil {
		t.Fatalf("natsembedtest.StartLeaf: %v", err)
	}
	defer nc.Close()
	err = testkit.Poll(30*time.Second, func() error {
		if hub.NATS().NumLeafNodes() != 1 || leaf.NATS().NumLeafNodes() != 1 {
			return errors.New("leaf node not connected")
		}
		_, err := nc.Request("$JS."+leafDomain+".API.INFO", nil, time.Second)
		return err
	})
	if err != nil {
		t.Fatalf("natsembedtest.StartLeaf: the leaf's JetStream is not reachable from the hub: %v", err)
	}
	return hub, leaf
}

// Cluster is an in-process JetStream cluster on loopback, for fault tests:
// every node has a fixed client and route port and its own data directory,
// so a node can be stopped and restarted as the same member.
type Cluster struct {
	t     testkit.TB
	Nodes []*natsembed.Server // nil while a node is stopped
	cfgs  []natsembed.Config
}

// StartCluster starts an n-node cluster for t and waits until its JetStream
// meta leader exists and knows every peer. It is shut down when t ends.
func StartCluster(t testkit.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("natsembedtest.StartCluster: n = %d", n)
	}
	ports := freePorts(t, 2*n)
	routes := make([]string, n)
	for i := range n {
		routes[i] = "127.0.0.1:" + strconv.Itoa(ports[n+i])
	}
	c := &Cluster{t: t, Nodes: make([]*natsembed.Server, n), cfgs: make([]natsembed.Config, n)}
	logger := newTestLogger(t, slog.LevelError)
	for i := range n {
		c.cfgs[i] = natsembed.Config{
			DataDir:       t.TempDir(),
			Listen:        "127.0.0.1:" + strconv.Itoa(ports[i]),
			NoSync:        true,
			Logger:        logger.With("node", i),
			ServerName:    fmt.Sprintf("n%d", i+1),
			ClusterName:   "artifactr-test",
			ClusterListen: routes[i],
			Routes:        routes,
		}
	}
	t.Cleanup(c.Shutdown)
	// Start the nodes concurrently: each waits to listen, not for peers.
	errs := make(chan error, n)
	for i := range n {
		go func() {
			s, err := natsembed.Start(c.cfgs[i])
			c.Nodes[i] = s
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatalf("natsembedtest.StartCluster: %v", err)
		}
	}
	c.WaitForRoutes(30 * time.Second)
	c.WaitForMetaLeader(30 * time.Second)
	return c
}

// WaitForRoutes waits up to d until every running node has its full set of
// route connections to every other node, failing the test otherwise.
// Interest (a stream leader's subscriptions) propagates over these routes;
// using the cluster before they settle can leave a node deaf to a stream.
func (c *Cluster) WaitForRoutes(d time.Duration) {
	c.t.Helper()
	var running []*natsembed.Server
	for _, n := range c.Nodes {
		if n != nil {
			running = append(running, n)
		}
	}
	// natsembed.RoutePoolSize routes, plus the system account's own, per peer.
	want := (len(running) - 1) * (natsembed.RoutePoolSize + 1)
	err := testkit.Poll(d, func() error {
		for _, n := range running {
			if got := n.NATS().NumRoutes(); got != want {
				return fmt.Errorf("%s has %d routes, want %d", n.Name(), got, want)
			}
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("natsembedtest: cluster not formed after %s: %v", d, err)
	}
}

// freePorts reserves k distinct loopback ports by listening on :0 and
// releasing them. Another process could take one in between; in tests on
// loopback that is rare enough.
func freePorts(t testkit.TB, k int) []int {
	t.Helper()
	ls := make([]net.Listener, k)
	ports := make([]int, k)
	for i := range k {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("natsembedtest: reserve a port: %v", err)
		}
		ls[i] = l
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

// ClientURLs returns the running nodes' client URLs, for nats.Connect.
func (c *Cluster) ClientURLs() string {
	var s string
	for i, n := range c.Nodes {
		if n == nil {
			continue
		}
		if s != "" {
			s += ","
		}
		s += "nats://" + c.cfgs[i].Listen
	}
	return s
}

// Shutdown stops every running node. It is safe to call more than once.
func (c *Cluster) Shutdown() {
	for i, n := range c.Nodes {
		if n != nil {
			n.Shutdown()
			c.Nodes[i] = nil
		}
	}
}

// Stop stops node i, keeping its data directory and ports.
func (c *Cluster) Stop(i int) {
	if n := c.Nodes[i]; n != nil {
		n.Shutdown()
		c.Nodes[i] = nil
	}
}

// Restart stops node i if it runs and starts it again with the same data
// directory and ports, so it rejoins as the same member.
func (c *Cluster) Restart(i int) *natsembed.Server {
	c.t.Helper()
	c.Stop(i)
	s, err := natsembed.Start(c.cfgs[i])
	if err != nil {
		c.t.Fatalf("natsembedtest: restart node %d: %v", i, err)
	}
	c.Nodes[i] = s
	c.WaitForRoutes(30 * time.Second)
	return s
}

// MetaLeader returns the node that leads the JetStream meta group, or nil.
func (c *Cluster) MetaLeader() *natsembed.Server {
	for _, n := range c.Nodes {
		if n != nil && n.NATS().JetStreamIsLeader() {
			return n
		}
	}
	return nil
}

// WaitForMetaLeader waits up to d for a meta leader that knows all of the
// cluster's peers, failing the test otherwise.
func (c *Cluster) WaitForMetaLeader(d time.Duration) *natsembed.Server {
	c.t.Helper()
	var l *natsembed.Server
	err := testkit.Poll(d, func() error {
		if l = c.MetaLeader(); l == nil || len(l.NATS().JetStreamClusterPeers()) != len(c.Nodes) {
			return errors.New("no meta leader with every peer")
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("natsembedtest: no JetStream meta leader with %d peers after %s", len(c.Nodes), d)
	}
	return l
}

// StreamLeader returns the node leading stream (in the global account), or
// nil.
func (c *Cluster) StreamLeader(stream string) *natsembed.Server {
	for _, n := range c.Nodes {
		if n != nil && n.NATS().JetStreamIsStreamLeader("$G", stream) {
			return n
		}
	}
	return nil
}

// WaitForStreamLeader waits up to d for stream to have a leader, failing the
// test otherwise.
func (c *Cluster) WaitForStreamLeader(stream string, d time.Duration) *natsembed.Server {
	c.t.Helper()
	var l *natsembed.Server
	err := testkit.Poll(d, func() error {
		if l = c.StreamLeader(stream); l == nil {
			return errors.New("no stream leader")
		}
		return nil
	})
	if err != nil {
		c.t.Fatalf("natsembedtest: stream %s has no leader after %s", stream, d)
	}
	return l
}

// StepDownStream asks stream's leader to step down through the JetStream
// API ($JS.API.STREAM.LEADER.STEPDOWN.<stream>), as an operator would, and
// returns once the request is accepted. A new leader is elected shortly
// after; wait for it with [Cluster.WaitForStreamLeader].
func StepDownStream(ctx context.Context, nc *nats.Conn, stream string) error {
	resp, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+stream, nil)
	if err != nil {
		return fmt.Errorf("natsembedtest: step down stream %s: %w", stream, err)
	}
	var r struct {
		Success bool `json:"success"`
		Error   *struct {
			Code        int    `json:"code"`
			ErrCode     int    `json:"err_code"`
			Description string `json:"description"`
		} `json:"error"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return fmt.Errorf("natsembedtest: step down stream %s: bad response %q: %w", stream, resp.Data, err)
	}
	if r.Error != nil {
		return fmt.Errorf("natsembedtest: step down stream %s: %s (code %d)", stream, r.Error.Description, r.Error.ErrCode)
	}
	if !r.Success {
		return fmt.Errorf("natsembedtest: step down stream %s: not accepted: %s", stream, resp.Data)
	}
	return nil
}
