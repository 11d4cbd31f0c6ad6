// Package server serves /metrics, /healthz and /readyz.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Server is the controller's HTTP endpoint.
type Server struct {
	http     *http.Server
	listener net.Listener
}

// timeouts bound what one client can hold: a connection that sends nothing,
// or sends slowly, or sits idle, is closed rather than kept forever.
type timeouts struct {
	readHeader, read, write, idle time.Duration
}

// defaultTimeouts suit scrapes and probes, which are quick. Profiles stream
// for as long as they are asked to, so with profiling on (off by default)
// writes are not bounded.
var defaultTimeouts = timeouts{readHeader: 10 * time.Second, read: 30 * time.Second, write: time.Minute, idle: 2 * time.Minute}

// Readiness is what /readyz answers: an error while not ready (503, with the
// error as the body), or a note shown after "ok" while ready (200), e.g. the
// kinds that are degraded. An empty note is just "ok".
type Readiness func() (note string, err error)

// Listen binds the address at once, so a port clash fails start-up before the
// controller touches anything.
func Listen(address string, reg *prometheus.Registry, ready Readiness, profiling bool) (*Server, error) {
	return listen(address, reg, ready, profiling, defaultTimeouts)
}

func listen(address string, reg *prometheus.Registry, ready Readiness, profiling bool, t timeouts) (*Server, error) {
	l, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("listening for metrics on %s: %w", address, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	if profiling {
		// net/http/pprof also registers itself on http.DefaultServeMux when
		// imported; this process never serves that mux, only this one.
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		note, err := ready()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		body := "ok\n"
		if note != "" {
			body += note + "\n"
		}
		_, _ = w.Write([]byte(body))
	})
	if profiling {
		t.write = 0
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: t.readHeader, ReadTimeout: t.read, WriteTimeout: t.write, IdleTimeout: t.idle}
	return &Server{http: srv, listener: l}, nil
}

// Run serves until ctx ends, then shuts down gracefully.
func (s *Server) Run(ctx context.Context) error {
	errCh := make(chan error, 1)
	go func() { errCh <- s.http.Serve(s.listener) }()
	select {
	case err := <-errCh:
		return fmt.Errorf("serving metrics: %w", err)
	case <-ctx.Done():
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.http.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("shutting down metrics server: %w", err)
		}
		return nil
	}
}
