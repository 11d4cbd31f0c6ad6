// Package notify delivers notifications (a workload restarted, a restart
// held, a rollout failed or recovered) to chat and webhook sinks: Slack,
// Microsoft Teams, Google Chat, and a versioned JSON webhook.
//
// Delivery is best effort and never holds the controller up: Notify only
// puts the message in each sink's bounded queue, or drops it (counted) when
// that queue is full. Each sink has its own goroutine that sends at its
// rate limit, retries with exponential backoff (honouring Retry-After), and
// gives up after a few attempts. A message is sent at most once per sink.
// The sink's URL is a credential: it is read from a Secret, and appears in
// no log line, error or metric, only the sink's name does.
package notify

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/metrics"
)

// Kind is what a notification tells; the same words as a sink's `on`.
type Kind string

// The kinds of notifications.
const (
	Restart          Kind = config.NotifyRestart
	Hold             Kind = config.NotifyHold
	RolloutFailed    Kind = config.NotifyRolloutFailed
	RolloutRecovered Kind = config.NotifyRolloutRecovered
)

// Workload names the workload a notification is about.
type Workload struct {
	Group     string `json:"group"`
	Resource  string `json:"resource"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// What a Source's Keys are.
const (
	// KeysChanged: the keys that changed, among those the workload reads.
	KeysChanged = "changed"
	// KeysRead: which keys changed is not known (after a controller
	// restart, or for a source too large to keep key by key); these are
	// the keys the workload reads.
	KeysRead = "read"
	// KeysAll: which keys changed is not known, and the workload reads
	// every key.
	KeysAll = "all"
)

// Source is a source a notification concerns: for a restart, one whose
// change caused it, with the keys (never values).
type Source struct {
	// ID is "kind/namespace/name", e.g. "configmap/shop/app".
	ID string `json:"id"`
	// Keys, and KeysAre (changed, read or all), for restarts only.
	Keys    []string `json:"keys,omitempty"`
	KeysAre string   `json:"keysAre,omitempty"`
}

// Message is one notification.
type Message struct {
	Kind     Kind
	Workload Workload
	Sources  []Source
	// Outcome is restarted, held, failed or recovered.
	Outcome string
	// Reason says why, for people: the cause of a hold, the rollout's
	// status, or why a restart replaces no pods.
	Reason string
	Time   time.Time
}

// Options configure a Notifier. Zero values take the defaults.
type Options struct {
	// Instance names this controller replica in every message.
	Instance string
	// ReadURL reads key of the Secret named secret in the controller's
	// namespace.
	ReadURL  func(ctx context.Context, secret, key string) (string, error)
	Counters metrics.NotifyCounters
	Log      hclog.Logger
	Client   *http.Client
	// Backoff spaces the attempts; MaxAttempts bounds them.
	Backoff     wait.Backoff
	MaxAttempts int
	// MaxRetryAfter caps how long a sink's Retry-After is honoured.
	MaxRetryAfter time.Duration
	// Drain bounds how long Run delivers what is queued once its context
	// ends.
	Drain time.Duration
	// Reread is the least time between two reads of a sink's URL after a
	// failure; Refresh the most time between two reads at all (the URL may
	// be rotated, and get by name cannot watch).
	Reread, Refresh time.Duration
}

func (o *Options) setDefaults() {
	if o.Backoff.Duration == 0 {
		o.Backoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 10, Cap: 30 * time.Second}
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 5
	}
	if o.MaxRetryAfter == 0 {
		o.MaxRetryAfter = time.Minute
	}
	if o.Drain == 0 {
		o.Drain = 5 * time.Second
	}
	if o.Reread == 0 {
		o.Reread = 10 * time.Second
	}
	if o.Refresh == 0 {
		o.Refresh = 5 * time.Minute
	}
	if o.Client == nil {
		o.Client = NewHTTPClient()
	}
	if o.Log == nil {
		o.Log = hclog.NewNullLogger()
	}
}

// Notifier hands messages to the sinks that want them.
type Notifier struct {
	sinks []*sink
	opts  Options
	// mu orders Notify's enqueues before the stop that ends them, so every
	// message is either delivered, failed or dropped, and counted.
	mu       sync.RWMutex
	stopped  bool
	stopping chan struct{}
}

// New builds a Notifier for the configured sinks; Run starts their senders.
func New(sinks []config.Sink, o Options) *Notifier {
	o.setDefaults()
	n := &Notifier{opts: o, stopping: make(chan struct{})}
	for _, c := range sinks {
		n.sinks = append(n.sinks, &sink{
			cfg:     c,
			format:  formatOf(c.Type),
			queue:   make(chan Message, c.QueueSize),
			limiter: rate.NewLimiter(rate.Limit(c.RatePerSecond), c.Burst),
			opts:    &n.opts,
			log:     o.Log.With("sink", c.Name),
			sent:    o.Counters.Sent.WithLabelValues(c.Name),
			failed:  o.Counters.Failed.WithLabelValues(c.Name),
			dropped: o.Counters.Dropped.WithLabelValues(c.Name),
		})
	}
	return n
}

// Notify queues m for every sink that wants its kind, without ever
// blocking: a sink whose queue is full drops m, and counts it.
func (n *Notifier) Notify(m Message) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, s := range n.sinks {
		if !s.cfg.Wants(string(m.Kind)) {
			continue
		}
		if n.stopped {
			s.dropped.Inc()
			continue
		}
		s.enqueue(m)
	}
}

// Run sends until ctx ends, then delivers what is queued for at most the
// drain time, and returns once every sender has stopped. Messages still
// queued then are dropped.
func (n *Notifier) Run(ctx context.Context) {
	sendCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	var wg sync.WaitGroup
	for _, s := range n.sinks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.run(sendCtx, n.stopping)
		}()
	}
	<-ctx.Done()
	n.mu.Lock()
	n.stopped = true
	n.mu.Unlock()
	close(n.stopping)
	drained := time.AfterFunc(n.opts.Drain, cancel)
	defer drained.Stop()
	wg.Wait()
}
