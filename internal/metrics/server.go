package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Server serves /metrics and the probes:
//
//   - /livez, liveness: the process serves and every Live check holds (the
//     agent loop has not stopped). A wiring burst, a stuck batch or an
//     outage of the broker or the server is not death: restarting the
//     agent would not cure them.
//   - /readyz, readiness: alive, in sync (SetInSync) and every Ready check
//     holds (connections up, the loop not stuck).
//   - /healthz: /readyz, as before the split: 200 "ok" when ready, else 503
//     and why, "not in sync" first when that is one reason.
type Server struct {
	ln  net.Listener
	srv *http.Server

	mu          sync.Mutex
	live, ready []Check
}

// Check is one condition of liveness or readiness: nil when it holds, else
// why not (one line).
type Check func() error

// Up is a Check of a connection: "<name>: not connected" while up() is false.
func Up(name string, up func() bool) Check {
	return func() error {
		if !up() {
			return fmt.Errorf("%s: not connected", name)
		}
		return nil
	}
}

// Listen binds addr (host:port; "127.0.0.1:0" picks a free port) and
// returns a server ready to Serve. Extra handlers (e.g. /explain/) can be
// mounted with Handle before Serve.
func Listen(addr string, m *Metrics) (*Server, error) {
	if m == nil {
		return nil, errors.New("metrics: listen: nil metrics")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: listen %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, _ *http.Request) {
		// Built whole, then written: a scrape is ~20 KB, and a response
		// buffer the size of the exposition is all a scrape keeps alive.
		b := m.AppendText(make([]byte, 0, 32<<10))
		w.Header().Set("Content-Type", contentType)
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		if _, err := w.Write(b); err != nil {
			m.handlerErrors.with("encoding", "").inc()
		}
	})
	t := serverTimeouts
	s := &Server{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: t.readHeader, ReadTimeout: t.read,
		WriteTimeout: t.write, IdleTimeout: t.idle, MaxHeaderBytes: 16 << 10}}
	mux.HandleFunc("/livez", func(w http.ResponseWriter, _ *http.Request) { answerProbe(w, s.failing(nil, false)) })
	ready := func(w http.ResponseWriter, _ *http.Request) {
		var why []string
		if !m.InSync() {
			why = append(why, "not in sync")
		}
		answerProbe(w, s.failing(why, true))
	}
	mux.HandleFunc("/readyz", ready)
	mux.HandleFunc("/healthz", ready)
	return s, nil
}

// Live adds a liveness check (readiness includes it); call before Serve.
func (s *Server) Live(c Check) {
	s.mu.Lock()
	s.live = append(s.live, c)
	s.mu.Unlock()
}

// Ready adds a readiness check; call before Serve.
func (s *Server) Ready(c Check) {
	s.mu.Lock()
	s.ready = append(s.ready, c)
	s.mu.Unlock()
}

// failing appends to why the reasons of the liveness checks that fail, and
// with ready those of the readiness checks.
func (s *Server) failing(why []string, ready bool) []string {
	s.mu.Lock()
	checks := append([]Check(nil), s.live...)
	if ready {
		checks = append(checks, s.ready...)
	}
	s.mu.Unlock()
	for _, c := range checks {
		if err := c(); err != nil {
			why = append(why, err.Error())
		}
	}
	return why
}

// answerProbe answers 200 "ok", or 503 with one reason a line.
func answerProbe(w http.ResponseWriter, why []string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	if len(why) == 0 {
		w.WriteHeader(http.StatusOK)
		fmt.Fprintln(w, "ok")
		return
	}
	w.WriteHeader(http.StatusServiceUnavailable)
	fmt.Fprintln(w, strings.Join(why, "\n"))
}

// serverTimeouts bound what one client can hold (a goroutine and a
// descriptor): a request sent slowly, an answer never read, a connection
// kept open idle. The write timeout lets debug_pprof's CPU profile run its
// default 30 s. A variable so that tests can shorten them.
var serverTimeouts = struct{ readHeader, read, write, idle time.Duration }{
	readHeader: 5 * time.Second, read: 10 * time.Second, write: 45 * time.Second, idle: 60 * time.Second,
}

// Handle mounts an extra handler; call before Serve.
func (s *Server) Handle(pattern string, h http.Handler) {
	s.srv.Handler.(*http.ServeMux).Handle(pattern, h)
}

// Addr is the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Serve serves until ctx is done, then shuts down (waiting at most 2 s for
// requests in flight).
func (s *Server) Serve(ctx context.Context, log *slog.Logger) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics: serve %s: %w", s.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil && log != nil {
		log.Warn("metrics: shutdown", "err", err)
	}
	<-errc
	return nil
}
