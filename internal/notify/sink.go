package notify

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/restart-controller/restart-controller/internal/config"
)

// NewHTTPClient is the client sinks are posted with: every phase of a
// request is bounded, so a sink that hangs holds its own sender for at most
// the timeout per attempt, and redirects are not followed (a 3xx is a
// failure): a redirect's target would be a URL not read from the Secret.
func NewHTTPClient() *http.Client {
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   5 * time.Second,
			ResponseHeaderTimeout: 10 * time.Second,
			IdleConnTimeout:       90 * time.Second,
			MaxIdleConnsPerHost:   2,
			ForceAttemptHTTP2:     true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// sink is one configured sink and its sender's state. Only its sender
// goroutine reads and writes url and readAt.
type sink struct {
	cfg     config.Sink
	format  func(Message, string) ([]byte, error)
	queue   chan Message
	limiter *rate.Limiter
	opts    *Options
	log     hclog.Logger

	sent, failed, dropped prometheus.Counter
	// full is set while the queue is full, so that a streak of drops is
	// logged once.
	full atomic.Bool

	url    string
	readAt time.Time
	stale  bool
}

// enqueue puts m in the queue or, when it is full, drops m. The newest
// message is dropped rather than the oldest: a full queue means the sink
// has been failing or slow for a while, and the first messages of a burst
// say what started it (the failed rollout that halts a wave; the holds
// that follow are its consequences).
func (s *sink) enqueue(m Message) {
	select {
	case s.queue <- m:
		s.full.Store(false)
	default:
		s.dropped.Inc()
		if !s.full.Swap(true) {
			s.log.Warn("notification queue full: dropping new notifications until it drains", "size", cap(s.queue))
		}
	}
}

// run reads the sink's URL once, then delivers each queued message until
// stopping closes; then it delivers what is left, until ctx ends.
func (s *sink) run(ctx context.Context, stopping <-chan struct{}) {
	if _, err := s.currentURL(ctx); err != nil {
		s.log.Warn("cannot read the notification sink's URL; read again before its next notification", "error", err)
	}
	for {
		select {
		case m := <-s.queue:
			s.deliver(ctx, m)
			continue
		case <-stopping:
		}
		for {
			select {
			case m := <-s.queue:
				if ctx.Err() != nil {
					s.dropped.Inc()
					continue
				}
				s.deliver(ctx, m)
			default:
				return
			}
		}
	}
}

// deliver sends m, retrying failures that may pass (network errors, 408,
// 429, 5xx) with exponential backoff, a 429's or 503's Retry-After if
// longer, and counts what became of it.
func (s *sink) deliver(ctx context.Context, m Message) {
	body, err := s.format(m, s.opts.Instance)
	if err != nil {
		s.failed.Inc()
		s.log.Error("cannot encode notification", "kind", m.Kind, "error", err)
		return
	}
	backoff := s.opts.Backoff
	for attempt := 1; ; attempt++ {
		if err := s.limiter.Wait(ctx); err != nil {
			s.gaveUp(m, attempt-1, fmt.Errorf("waiting for the sink's rate limit: %w", err))
			return
		}
		retryAfter, err := s.post(ctx, body)
		if err == nil {
			s.sent.Inc()
			s.log.Debug("notification sent", "kind", m.Kind, "attempts", attempt)
			return
		}
		s.stale = true
		var perm permanentError
		if errors.As(err, &perm) || attempt >= s.opts.MaxAttempts {
			s.gaveUp(m, attempt, err)
			return
		}
		wait := backoff.Step()
		if retryAfter > wait {
			wait = min(retryAfter, s.opts.MaxRetryAfter)
		}
		s.log.Debug("notification attempt failed; retrying", "kind", m.Kind, "attempt", attempt, "in", wait, "error", err)
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			s.gaveUp(m, attempt, err)
			return
		}
	}
}

// gaveUp counts a message not delivered: dropped when never attempted
// (shutdown came first), else failed.
func (s *sink) gaveUp(m Message, attempts int, err error) {
	if attempts == 0 {
		s.dropped.Inc()
	} else {
		s.failed.Inc()
	}
	s.log.Warn("notification not delivered", "kind", m.Kind,
		"workload", m.Workload.Namespace+"/"+m.Workload.Name, "attempts", attempts, "error", err)
}

// permanentError is a failure that another attempt would repeat.
type permanentError struct{ error }

func (e permanentError) Unwrap() error { return e.error }

// post sends one request. Its errors never contain the URL.
func (s *sink) post(ctx context.Context, body []byte) (retryAfter time.Duration, err error) {
	u, err := s.currentURL(ctx)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		return 0, permanentError{scrub(err, u)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "restart-controller")
	resp, err := s.opts.Client.Do(req)
	if err != nil {
		return 0, scrub(err, u)
	}
	// Read a little of the body so the connection can be reused; what
	// the sink says is not logged: it may echo the URL.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch code := resp.StatusCode; {
	case code >= 200 && code < 300:
		return 0, nil
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		return parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()), fmt.Errorf("HTTP %d", code)
	case code == http.StatusRequestTimeout || code >= 500:
		return 0, fmt.Errorf("HTTP %d", code)
	default:
		return 0, permanentError{fmt.Errorf("HTTP %d", code)}
	}
}

// currentURL returns the sink's URL, reading it from its Secret first
// when none is known yet, after a failure (at most once per Reread), or
// when it is older than Refresh.
func (s *sink) currentURL(ctx context.Context) (string, error) {
	since := time.Since(s.readAt)
	if s.url != "" && since < s.opts.Refresh && (!s.stale || since < s.opts.Reread) {
		return s.url, nil
	}
	if s.url == "" && !s.readAt.IsZero() && since < s.opts.Reread {
		return "", errors.New("the sink's URL could not be read; read again soon")
	}
	s.readAt = time.Now()
	raw, err := s.opts.ReadURL(ctx, s.cfg.URLSecret.Name, s.cfg.URLSecret.Key)
	if err == nil {
		err = checkURL(raw)
	}
	if err != nil {
		err = fmt.Errorf("reading the URL from key %s of Secret %s: %w", s.cfg.URLSecret.Key, s.cfg.URLSecret.Name, err)
		if s.url != "" {
			s.log.Warn("cannot read the sink's URL again; using the one read before", "error", err)
			return s.url, nil
		}
		return "", err
	}
	s.url, s.stale = raw, false
	return raw, nil
}

// checkURL accepts absolute http and https URLs; its error never quotes
// the value.
func checkURL(raw string) error {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return errors.New("the value is not an absolute http or https URL")
	}
	return nil
}

// scrub rewrites an error of net/http so that no part of the URL that may
// be secret survives: a *url.Error quotes the whole URL, and inner errors
// may repeat its parts. The result does not wrap err, which holds the URL.
func scrub(err error, raw string) error {
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		msg = ue.Op + " <sink URL>: " + ue.Err.Error()
		if ue.Timeout() {
			msg += " (timeout)"
		}
	}
	secrets := []string{raw}
	if u, perr := url.Parse(raw); perr == nil {
		secrets = append(secrets, u.RawQuery, u.Path, u.EscapedPath(), u.Fragment)
		if u.User != nil {
			secrets = append(secrets, u.User.String())
		}
	}
	for _, part := range secrets {
		if len(part) > 1 {
			msg = strings.ReplaceAll(msg, part, "<redacted>")
		}
	}
	return errors.New(msg)
}

// parseRetryAfter reads a Retry-After header: seconds, or an HTTP date.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if secs, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && secs > 0 {
		return time.Duration(secs) * time.Second
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}
