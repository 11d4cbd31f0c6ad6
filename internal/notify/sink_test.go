package notify

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/metrics"
)

// recorder is a sink server that answers each request with the next of
// its answers (the last one repeats) and keeps the bodies and times.
type recorder struct {
	mu      sync.Mutex
	answers []func(http.ResponseWriter)
	bodies  []string
	times   []time.Time
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var body bytes.Buffer
	_, _ = body.ReadFrom(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, body.String())
	r.times = append(r.times, time.Now())
	answer := r.answers[min(len(r.bodies), len(r.answers))-1]
	r.mu.Unlock()
	answer(w)
}

func (r *recorder) requests() ([]string, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.bodies...), append([]time.Time(nil), r.times...)
}

func status(code int) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) { w.WriteHeader(code) }
}

// harness runs a Notifier on sinks whose URLs a map holds, with fast
// backoff, and captures its log.
type harness struct {
	n      *Notifier
	m      *metrics.Metrics
	log    *bytes.Buffer
	logMu  sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	urls   map[string]string
}

func newHarness(t *testing.T, sinks []config.Sink, urls map[string]string, tune func(*Options)) *harness {
	t.Helper()
	h := &harness{m: metrics.New(func() (int, int) { return 0, 0 }), log: &bytes.Buffer{}, urls: urls}
	o := Options{
		Instance: "test",
		ReadURL: func(_ context.Context, secret, key string) (string, error) {
			h.mu.Lock()
			defer h.mu.Unlock()
			u, ok := h.urls[secret+"/"+key]
			if !ok {
				return "", errors.New(`secrets "` + secret + `" not found`)
			}
			return u, nil
		},
		Counters:    h.m.Notifications,
		Log:         hclog.New(&hclog.LoggerOptions{Output: lockedWriter{&h.logMu, h.log}, Level: hclog.Debug}),
		Backoff:     wait.Backoff{Duration: time.Millisecond, Factor: 2, Steps: 10},
		MaxAttempts: 3,
		Drain:       time.Second,
		Reread:      time.Nanosecond,
	}
	if tune != nil {
		tune(&o)
	}
	h.n = New(sinks, o)
	return h
}

// webhookHarness serves rec as the webhook sink "a" (sink, when not nil,
// adjusts its configuration) and returns a harness of it, not started.
func webhookHarness(t *testing.T, rec *recorder, sink func(*config.Sink), tune func(*Options)) *harness {
	t.Helper()
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return newHarness(t, []config.Sink{webhookSink("a", sink)}, map[string]string{"notify/a": srv.URL}, tune)
}

// sendOne starts h, notifies one restart and stops h once sink "a" counted
// its outcome.
func (h *harness) sendOne(t *testing.T) {
	t.Helper()
	h.start()
	h.n.Notify(message("web"))
	h.waitCounted(t, "a", 1)
	h.stop(t)
}

func (h *harness) logged() string {
	h.logMu.Lock()
	defer h.logMu.Unlock()
	return h.log.String()
}

func (h *harness) start() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan struct{})
	go func() { defer close(h.done); h.n.Run(ctx) }()
}

func (h *harness) stop(t *testing.T) {
	t.Helper()
	h.cancel()
	select {
	case <-h.done:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

func (h *harness) counts(sink string) (sent, failed, dropped float64) {
	c := h.m.Notifications
	return testutil.ToFloat64(c.Sent.WithLabelValues(sink)), testutil.ToFloat64(c.Failed.WithLabelValues(sink)),
		testutil.ToFloat64(c.Dropped.WithLabelValues(sink))
}

// waitCounted waits until the sink's messages add up to n.
func (h *harness) waitCounted(t *testing.T, sink string, n float64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, f, d := h.counts(sink)
		if s+f+d >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sink %s: sent %v, failed %v, dropped %v; want %v in all", sink, s, f, d, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func webhookSink(name string, tune func(*config.Sink)) config.Sink {
	s := config.Sink{Name: name, Type: "webhook", URLSecret: config.FileSecretKey{Name: "notify", Key: name}, Send: config.NotificationKinds(),
		RatePerSecond: 100, Burst: 100, QueueSize: 10}
	if tune != nil {
		tune(&s)
	}
	return s
}

func message(name string) Message {
	return Message{Kind: Restart, Workload: Workload{Group: "apps", Resource: "deployments", Namespace: "ns", Name: name},
		Outcome: "restarted", Time: at}
}

// A full queue drops the newest messages and counts them; the queued ones
// are delivered, in order. Notify never waits for the sink.
func TestQueueDropsNewestWhenFull(t *testing.T) {
	rec := &recorder{answers: []func(http.ResponseWriter){status(200)}}
	h := webhookHarness(t, rec, func(s *config.Sink) { s.QueueSize = 2 }, nil)
	for _, name := range []string{"first", "second", "third", "fourth", "fifth"} {
		h.n.Notify(message(name)) // no sender runs yet: the queue fills
	}
	if _, _, dropped := h.counts("a"); dropped != 3 {
		t.Errorf("dropped %v, want 3", dropped)
	}
	h.start()
	h.waitCounted(t, "a", 5)
	h.stop(t)
	bodies, _ := rec.requests()
	if len(bodies) != 2 || !strings.Contains(bodies[0], `"name":"first"`) || !strings.Contains(bodies[1], `"name":"second"`) {
		t.Errorf("delivered %q, want first then second", bodies)
	}
	if sent, failed, _ := h.counts("a"); sent != 2 || failed != 0 {
		t.Errorf("sent %v, failed %v; want 2, 0", sent, failed)
	}
}

// A sink is sent only the notifications it is configured for.
func TestSinkGetsOnlyItsKinds(t *testing.T) {
	h := newHarness(t, []config.Sink{webhookSink("a", func(s *config.Sink) { s.Send = []string{config.NotifyHold} })}, nil, nil)
	h.n.Notify(message("restarted"))
	if len(h.n.sinks[0].queue) != 0 {
		t.Error("a restart was queued for a sink configured for holds only")
	}
	h.n.Notify(Message{Kind: Hold})
	if len(h.n.sinks[0].queue) != 1 {
		t.Error("a hold was not queued for a sink configured for holds")
	}
}

// Failures that may pass are retried, with backoff, until one succeeds;
// a 4xx is not; every attempt failing ends in failed.
func TestRetries(t *testing.T) {
	for _, tt := range []struct {
		name         string
		answers      []int
		requests     int
		sent, failed float64
	}{
		{"500 then 502 then 200", []int{500, 502, 200}, 3, 1, 0},
		{"408 then 200", []int{408, 200}, 2, 1, 0},
		{"always 500: three attempts", []int{500}, 3, 0, 1},
		{"400 is not retried", []int{400, 200}, 1, 0, 1},
		{"a redirect is not followed", []int{302, 200}, 1, 0, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rec := &recorder{}
			for _, c := range tt.answers {
				rec.answers = append(rec.answers, status(c))
			}
			h := webhookHarness(t, rec, nil, nil)
			h.sendOne(t)
			if bodies, _ := rec.requests(); len(bodies) != tt.requests {
				t.Errorf("%d requests, want %d", len(bodies), tt.requests)
			}
			if sent, failed, dropped := h.counts("a"); sent != tt.sent || failed != tt.failed || dropped != 0 {
				t.Errorf("sent %v, failed %v, dropped %v; want %v, %v, 0", sent, failed, dropped, tt.sent, tt.failed)
			}
		})
	}
}

// The backoff grows: with a base of 40ms and a factor of 2, three retries
// wait at least 40+80+160ms in all.
func TestBackoffGrows(t *testing.T) {
	rec := &recorder{answers: []func(http.ResponseWriter){status(500), status(500), status(500), status(200)}}
	webhookHarness(t, rec, nil, func(o *Options) {
		o.Backoff = wait.Backoff{Duration: 40 * time.Millisecond, Factor: 2, Steps: 10}
		o.MaxAttempts = 4
	}).sendOne(t)
	_, times := rec.requests()
	if len(times) != 4 {
		t.Fatalf("%d requests, want 4", len(times))
	}
	for i, least := range []time.Duration{40 * time.Millisecond, 80 * time.Millisecond, 160 * time.Millisecond} {
		if gap := times[i+1].Sub(times[i]); gap < least {
			t.Errorf("retry %d came %s after the attempt before, want at least %s", i+1, gap, least)
		}
	}
}

// A 429's Retry-After is waited for even when the backoff is shorter, in
// seconds or as an HTTP date.
func TestRetryAfter(t *testing.T) {
	for _, header := range []string{"1", "HTTP-DATE"} {
		t.Run(header, func(t *testing.T) {
			rec := &recorder{answers: []func(http.ResponseWriter){
				func(w http.ResponseWriter) {
					v := header
					if v == "HTTP-DATE" {
						v = time.Now().Add(2 * time.Second).UTC().Format(http.TimeFormat)
					}
					w.Header().Set("Retry-After", v)
					w.WriteHeader(http.StatusTooManyRequests)
				},
				status(200),
			}}
			h := webhookHarness(t, rec, nil, nil)
			h.sendOne(t)
			_, times := rec.requests()
			if len(times) != 2 {
				t.Fatalf("%d requests, want 2", len(times))
			}
			// An HTTP date has whole seconds: at least one of the two.
			if gap := times[1].Sub(times[0]); gap < 900*time.Millisecond {
				t.Errorf("retried %s after a 429 with Retry-After %s, want at least 1s", gap, header)
			}
			if sent, _, _ := h.counts("a"); sent != 1 {
				t.Errorf("sent %v, want 1", sent)
			}
		})
	}
}

// Retry-After is capped: a sink cannot park its sender for an hour.
func TestRetryAfterIsCapped(t *testing.T) {
	if got := parseRetryAfter("3600", time.Now()); got != time.Hour {
		t.Fatalf("parseRetryAfter(3600) = %s", got)
	}
	rec := &recorder{answers: []func(http.ResponseWriter){
		func(w http.ResponseWriter) { w.Header().Set("Retry-After", "3600"); w.WriteHeader(429) }, status(200)}}
	h := webhookHarness(t, rec, nil, func(o *Options) { o.MaxRetryAfter = 50 * time.Millisecond })
	h.sendOne(t)
	if sent, _, _ := h.counts("a"); sent != 1 {
		t.Errorf("sent %v, want 1 once the capped Retry-After passed", sent)
	}
}

// The rate limit spaces requests: 5 per second with a burst of 1 sends
// four messages over at least 3 × 200ms.
func TestRateLimit(t *testing.T) {
	rec := &recorder{answers: []func(http.ResponseWriter){status(200)}}
	h := webhookHarness(t, rec, func(s *config.Sink) { s.RatePerSecond, s.Burst = 5, 1 }, nil)
	for i := 0; i < 4; i++ {
		h.n.Notify(message("web"))
	}
	h.start()
	h.waitCounted(t, "a", 4)
	h.stop(t)
	_, times := rec.requests()
	if len(times) != 4 {
		t.Fatalf("%d requests, want 4", len(times))
	}
	if span := times[3].Sub(times[0]); span < 550*time.Millisecond {
		t.Errorf("4 requests within %s at 5/s with burst 1, want at least 600ms", span)
	}
}

// No error, log line or metric carries the sink's URL (a credential), for
// every way net/http fails: a refused connection, a timeout, an invalid
// URL.
func TestURLNeverInErrorsOrLogs(t *testing.T) {
	const token = "T0KEN-s3cr3t"
	hang := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	defer hanging.Close()
	defer close(hang)
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close()
	urls := map[string]string{
		"notify/refused": refusedURL + "/services/" + token + "?key=" + token,
		"notify/hanging": hanging.URL + "/hook/" + token,
		"notify/invalid": "https://user:" + token + "@example.com:99999999/" + token,
		"notify/scheme":  "ftp://" + token,
	}
	var sinks []config.Sink
	for _, name := range []string{"refused", "hanging", "invalid", "scheme"} {
		sinks = append(sinks, webhookSink(name, nil))
	}
	client := NewHTTPClient()
	client.Timeout = 100 * time.Millisecond
	h := newHarness(t, sinks, urls, func(o *Options) { o.Client = client })
	h.start()
	h.n.Notify(message("web"))
	for _, s := range sinks {
		h.waitCounted(t, s.Name, 1)
	}
	h.stop(t)
	for _, s := range sinks {
		if _, failed, _ := h.counts(s.Name); failed != 1 {
			t.Errorf("sink %s: failed %v, want 1", s.Name, failed)
		}
	}
	logged := h.logged()
	if strings.Contains(logged, token) || strings.Contains(logged, "127.0.0.1:") && strings.Contains(logged, "/hook/") {
		t.Errorf("the log shows a sink URL:\n%s", logged)
	}
	if !strings.Contains(logged, "sink=refused") || !strings.Contains(logged, "sink=hanging") {
		t.Errorf("the log does not name the failing sinks:\n%s", logged)
	}
	families, err := h.m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.Contains(f.String(), token) {
			t.Errorf("metric %s shows a sink URL", f.GetName())
		}
	}
}

// scrub takes the URL and its parts out of url.Error's message.
func TestScrub(t *testing.T) {
	raw := "https://hooks.example.com/services/AAA/BBB/CCC?token=xyz"
	req, _ := http.NewRequest(http.MethodPost, raw, nil)
	client := &http.Client{Transport: failingTransport{}}
	_, err := client.Do(req)
	if err == nil || !strings.Contains(err.Error(), "AAA/BBB") {
		t.Fatalf("the test needs an error quoting the URL, got %v", err)
	}
	got := scrub(err, raw).Error()
	for _, part := range []string{"AAA", "token=xyz", "/services/"} {
		if strings.Contains(got, part) {
			t.Errorf("scrubbed error %q still contains %q", got, part)
		}
	}
	if !strings.Contains(got, "Post") || !strings.Contains(got, "echo") {
		t.Errorf("scrubbed error %q lost what happened", got)
	}
}

// failingTransport fails with an error that repeats the URL, as some
// dialers' errors do.
type failingTransport struct{}

func (failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return nil, errors.New("echo of " + r.URL.String())
}

// After a failure the URL is read again from the Secret: a rotated
// webhook is used for the next attempt.
func TestURLReadAgainAfterFailure(t *testing.T) {
	gone := httptest.NewServer(http.NotFoundHandler())
	defer gone.Close()
	rec := &recorder{answers: []func(http.ResponseWriter){status(200)}}
	rotated := httptest.NewServer(rec)
	defer rotated.Close()
	h := newHarness(t, []config.Sink{webhookSink("a", nil)}, map[string]string{"notify/a": gone.URL}, nil)
	h.start()
	h.n.Notify(message("one"))
	h.waitCounted(t, "a", 1) // 404: failed, not retried
	h.mu.Lock()
	h.urls["notify/a"] = rotated.URL
	h.mu.Unlock()
	h.n.Notify(message("two"))
	h.waitCounted(t, "a", 2)
	h.stop(t)
	if sent, failed, _ := h.counts("a"); sent != 1 || failed != 1 {
		t.Errorf("sent %v, failed %v; want 1 and 1", sent, failed)
	}
	if bodies, _ := rec.requests(); len(bodies) != 1 || !strings.Contains(bodies[0], `"name":"two"`) {
		t.Errorf("the rotated URL got %q", bodies)
	}
}

// A missing Secret fails the sink's notifications, naming the Secret and
// key, and the URL is read once it exists.
func TestMissingSecret(t *testing.T) {
	rec := &recorder{answers: []func(http.ResponseWriter){status(200)}}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	h := newHarness(t, []config.Sink{webhookSink("a", nil)}, map[string]string{}, nil)
	h.start()
	h.n.Notify(message("one"))
	h.waitCounted(t, "a", 1)
	if !strings.Contains(h.logged(), "key a of Secret notify") {
		t.Errorf("the log does not say which Secret is missing:\n%s", h.logged())
	}
	h.mu.Lock()
	h.urls["notify/a"] = srv.URL
	h.mu.Unlock()
	h.n.Notify(message("two"))
	h.waitCounted(t, "a", 2)
	h.stop(t)
	if sent, failed, _ := h.counts("a"); sent != 1 || failed != 1 {
		t.Errorf("sent %v, failed %v; want 1 and 1", sent, failed)
	}
}

// A hanging sink holds neither Notify nor another sink; at shutdown Run
// returns within the drain time, and what was left is counted.
func TestHangingSinkHoldsNothing(t *testing.T) {
	hang := make(chan struct{})
	hanging := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	defer hanging.Close()
	defer close(hang)
	rec := &recorder{answers: []func(http.ResponseWriter){status(200)}}
	good := httptest.NewServer(rec)
	defer good.Close()
	h := newHarness(t, []config.Sink{webhookSink("hang", nil), webhookSink("good", nil)},
		map[string]string{"notify/hang": hanging.URL, "notify/good": good.URL},
		func(o *Options) {
			o.Drain = 200 * time.Millisecond
			o.Client = &http.Client{} // no timeout: the request hangs until the drain ends
		})
	h.start()
	notified := make(chan struct{})
	go func() {
		defer close(notified)
		for i := 0; i < 20; i++ {
			h.n.Notify(message("web")) // the hanging sink's queue of 10 fills
		}
	}()
	select {
	case <-notified:
	case <-time.After(30 * time.Second):
		t.Fatal("Notify blocked on a sink that hangs")
	}
	h.waitCounted(t, "good", 20)
	if sent, _, _ := h.counts("good"); sent < 10 {
		t.Errorf("good sink: sent %v, want at least its queue's 10", sent)
	}
	if sent, _, _ := h.counts("hang"); sent != 0 {
		t.Errorf("hanging sink: sent %v", sent)
	}
	h.stop(t)
	sent, failed, dropped := h.counts("hang")
	if sent+failed+dropped != 20 || failed < 1 {
		t.Errorf("hanging sink after shutdown: sent %v, failed %v, dropped %v; want 20 in all, the one in flight failed", sent, failed, dropped)
	}
	h.n.Notify(message("late"))
	if _, _, d := h.counts("hang"); d != dropped+1 {
		t.Errorf("a notification after shutdown was not counted dropped")
	}
}

// BenchmarkNotify is the cost on the reconcile path: a queued message, and
// one dropped from a full queue.
func BenchmarkNotify(b *testing.B) {
	m := metrics.New(func() (int, int) { return 0, 0 })
	n := New([]config.Sink{webhookSink("a", func(s *config.Sink) { s.QueueSize = 1 })}, Options{Counters: m.Notifications})
	msg := message("web")
	b.ReportAllocs()
	for b.Loop() {
		n.Notify(msg)
	}
}
