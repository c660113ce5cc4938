package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// DefaultAddr is where `serve --http` listens when given no address: port
// 4280, free of the usual development ports (LangGraph's 2024 and 8123,
// NATS's 4222 and 8222, 3000, 5173, 8000, 8080).
const DefaultAddr = "127.0.0.1:4280"

// Token files in the auth directory (DATA/auth), made on first use, mode
// 0600, like the nkey seeds beside them.
const (
	ClientTokenFile  = "http-client.token"
	AuditorTokenFile = "http-auditor.token"
)

// LoadOrCreateTokens reads the API's bearer tokens from dir, making any
// that is missing. A token file readable by group or others is refused.
func LoadOrCreateTokens(dir string) (map[string]Role, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("httpapi: auth directory: %w", err)
	}
	out := map[string]Role{}
	for file, role := range map[string]Role{ClientTokenFile: RoleClient, AuditorTokenFile: RoleAuditor} {
		path := filepath.Join(dir, file)
		tok, err := readToken(path)
		if errors.Is(err, fs.ErrNotExist) {
			tok, err = createToken(path)
		}
		if err != nil {
			return nil, err
		}
		out[tok] = role
	}
	return out, nil
}

func readToken(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if st.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("httpapi: %s is readable by others (mode %v): chmod 600 it", path, st.Mode().Perm())
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("httpapi: %w", err)
	}
	tok := strings.TrimSpace(string(b))
	if len(tok) < 32 {
		return "", fmt.Errorf("httpapi: %s: token too short", path)
	}
	return tok, nil
}

func createToken(path string) (string, error) {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	tok := hex.EncodeToString(b[:])
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("httpapi: create %s: %w", path, err)
	}
	if _, err := f.WriteString(tok + "\n"); err != nil {
		f.Close()
		return "", fmt.Errorf("httpapi: write %s: %w", path, err)
	}
	return tok, f.Close()
}

// NormalizeAddr makes a bare port ("4280") or ":PORT" an address on
// 127.0.0.1: the API is on loopback unless told otherwise.
func NormalizeAddr(addr string) string {
	if addr == "" {
		return ""
	}
	if !strings.Contains(addr, ":") {
		addr = ":" + addr
	}
	if strings.HasPrefix(addr, ":") {
		addr = "127.0.0.1" + addr
	}
	return addr
}

// IsLoopback reports whether addr (host:port) accepts only local clients.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Listening is a running API listener.
type Listening struct {
	URL string
	srv *http.Server
	api *Server
	err chan error
}

// Listen starts serving api on addr, over TLS when certFile is set.
func Listen(api *Server, addr, certFile, keyFile string) (*Listening, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("httpapi: listen on %s: %w", addr, err)
	}
	scheme := "http"
	if certFile != "" {
		scheme = "https"
	}
	l := &Listening{
		URL: scheme + "://" + ln.Addr().String(),
		srv: &http.Server{Handler: api, ReadHeaderTimeout: 10 * time.Second, MaxHeaderBytes: 64 << 10,
			ErrorLog: nil},
		api: api,
		err: make(chan error, 1),
	}
	go func() {
		if certFile != "" {
			l.err <- l.srv.ServeTLS(ln, certFile, keyFile)
		} else {
			l.err <- l.srv.Serve(ln)
		}
	}()
	return l, nil
}

// Close stops accepting, gives open requests until ctx ends, then closes
// them (streams included) and the server's own goroutines.
func (l *Listening) Close(ctx context.Context) error {
	err := l.srv.Shutdown(ctx)
	if err != nil {
		_ = l.srv.Close()
	}
	l.api.Close()
	if e := <-l.err; !errors.Is(e, http.ErrServerClosed) && err == nil {
		err = e
	}
	return err
}
