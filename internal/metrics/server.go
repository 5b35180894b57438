package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"
)

// Server serves /metrics and /healthz.
type Server struct {
	ln  net.Listener
	srv *http.Server
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
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if m.InSync() {
			w.WriteHeader(http.StatusOK)
			fmt.Fprintln(w, "ok")
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "not in sync")
	})
	t := serverTimeouts
	return &Server{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: t.readHeader, ReadTimeout: t.read,
		WriteTimeout: t.write, IdleTimeout: t.idle, MaxHeaderBytes: 16 << 10}}, nil
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
