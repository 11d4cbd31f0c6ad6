package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

func TestEndpoints(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "restart_controller_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Inc()
	var synced, degraded atomic.Bool
	ready := func() (string, error) {
		if !synced.Load() {
			return "", errors.New("caches not synced yet")
		}
		if degraded.Load() {
			return "degraded: 1\n  workload kind daemonsets: forbidden", nil
		}
		return "", nil
	}
	for _, profiling := range []bool{false, true} {
		srv, err := Listen("127.0.0.1:0", reg, ready, profiling)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- srv.Run(ctx) }()
		base := "http://" + srv.listener.Addr().String()

		synced.Store(false)
		if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "not synced") {
			t.Fatalf("readyz before sync: %d %q", code, body)
		}
		synced.Store(true)
		if code, body := get(t, base+"/readyz"); code != http.StatusOK || body != "ok\n" {
			t.Fatalf("readyz after sync: %d %q", code, body)
		}
		// Ready but degraded: still 200, the note names what is degraded.
		degraded.Store(true)
		if code, body := get(t, base+"/readyz"); code != http.StatusOK || body != "ok\ndegraded: 1\n  workload kind daemonsets: forbidden\n" {
			t.Fatalf("readyz while degraded: %d %q", code, body)
		}
		degraded.Store(false)
		if code, _ := get(t, base+"/healthz"); code != http.StatusOK {
			t.Fatalf("healthz: %d", code)
		}
		if _, body := get(t, base+"/metrics"); !strings.Contains(body, "restart_controller_test_total 1") {
			t.Fatalf("metrics: %q", body)
		}
		code, _ := get(t, base+"/debug/pprof/")
		if (code == http.StatusOK) != profiling {
			t.Fatalf("pprof with profiling=%v answered %d", profiling, code)
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("shutdown: %v", err)
		}
	}
}

func TestListenFailsOnBusyPort(t *testing.T) {
	first, err := Listen("127.0.0.1:0", prometheus.NewRegistry(), func() (string, error) { return "", nil }, false)
	if err != nil {
		t.Fatal(err)
	}
	defer first.listener.Close()
	if _, err := Listen(first.listener.Addr().String(), prometheus.NewRegistry(), func() (string, error) { return "", nil }, false); err == nil ||
		!strings.Contains(err.Error(), first.listener.Addr().String()) {
		t.Fatalf("want an error naming the address, got %v", err)
	}
}

// A client that connects and sends nothing (or stalls mid-request) must not
// hold a connection forever.
func TestSilentConnectionsAreClosed(t *testing.T) {
	short := timeouts{readHeader: 100 * time.Millisecond, read: 200 * time.Millisecond, write: time.Second, idle: 200 * time.Millisecond}
	s, err := listen("127.0.0.1:0", prometheus.NewRegistry(), func() (string, error) { return "", nil }, false, short)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = s.Run(ctx) }()
	for _, partial := range []string{"", "GET /metrics HTTP/1.1\r\nHost: x\r\n"} {
		conn, err := net.Dial("tcp", s.listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.Write([]byte(partial)); err != nil {
			t.Fatal(err)
		}
		// The deadline only bounds the test; the server must close first.
		_ = conn.SetReadDeadline(time.Now().Add(30 * time.Second))
		_, err = io.ReadAll(conn)
		var netErr net.Error
		if errors.As(err, &netErr) && netErr.Timeout() {
			t.Fatalf("server kept a stalled connection (%q sent) open", partial)
		}
		conn.Close()
	}
}

func TestDefaultTimeoutsAreSet(t *testing.T) {
	for _, profiling := range []bool{false, true} {
		s, err := Listen("127.0.0.1:0", prometheus.NewRegistry(), func() (string, error) { return "", nil }, profiling)
		if err != nil {
			t.Fatal(err)
		}
		h := s.http
		if h.ReadHeaderTimeout == 0 || h.ReadTimeout == 0 || h.IdleTimeout == 0 || (h.WriteTimeout == 0) != profiling {
			t.Errorf("profiling=%v: timeouts %v %v %v %v", profiling, h.ReadHeaderTimeout, h.ReadTimeout, h.WriteTimeout, h.IdleTimeout)
		}
		s.listener.Close()
	}
}
