package status

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/restart-controller/restart-controller/internal/explain"
)

// Controller is the controller's leader, from its leader-election Lease,
// and its health, from its metrics when they can be reached.
type Controller struct {
	// LeaderElection is the config's: off, one instance runs without a
	// Lease.
	LeaderElection bool `json:"leaderElection"`
	// Lease is "NAMESPACE/NAME"; Holder its holder's identity (the pod's
	// name, in the manifests and the chart), renewed at RenewTime, holding
	// it since AcquireTime. Expired: not renewed within its duration, so no
	// replica leads now.
	Lease       string     `json:"lease,omitempty"`
	Holder      string     `json:"holder,omitempty"`
	RenewTime   *time.Time `json:"renewTime,omitempty"`
	AcquireTime *time.Time `json:"acquireTime,omitempty"`
	Expired     bool       `json:"expired"`
	LeaseError  string     `json:"leaseError,omitempty"`
	// Metrics are what its metrics endpoint says, when reached;
	// MetricsError why it was not.
	Metrics      *Metrics `json:"metrics,omitempty"`
	MetricsError string   `json:"metricsError,omitempty"`
}

// Metrics are the health gauges of one controller instance.
type Metrics struct {
	// From says where they were read: the leader's pod or the metrics
	// Service through the API server's proxy, or a URL.
	From   string `json:"from"`
	Ready  *bool  `json:"ready,omitempty"`
	Leader *bool  `json:"leader,omitempty"`
	// Degraded are the kinds it cannot watch or patch:
	// "RESOURCE[ in NAMESPACE]: REASON".
	Degraded []string `json:"degraded,omitempty"`
	// Held and Waiting count the restarts it holds and that wait, by
	// reason, as it counts them.
	Held    map[string]float64 `json:"held,omitempty"`
	Waiting map[string]float64 `json:"waiting,omitempty"`
}

// metricsTimeout bounds each attempt to reach the metrics: an unreachable
// endpoint must not hold up the answer.
const metricsTimeout = 5 * time.Second

// ReadController reads the leader from the Lease the config names and the
// health from the metrics: metricsURL when given (a port-forward, say),
// else the leader's pod and then the Service named service, through the
// API server's proxy. What cannot be read is said, never fatal.
func ReadController(ctx context.Context, cl *explain.Cluster, cfg *explain.Config, service, metricsURL string, now time.Time) *Controller {
	s := cfg.Settings
	c := &Controller{LeaderElection: s.LeaderElect}
	if s.LeaderElect && cl.Kube != nil {
		c.Lease = s.LeaseNamespace + "/" + s.LeaseName
		lease, err := cl.Kube.CoordinationV1().Leases(s.LeaseNamespace).Get(ctx, s.LeaseName, metav1.GetOptions{})
		if err != nil {
			c.LeaseError = fmt.Sprintf("reading the Lease %s: %v", c.Lease, err)
		} else {
			spec := lease.Spec
			if spec.HolderIdentity != nil {
				c.Holder = *spec.HolderIdentity
			}
			if spec.AcquireTime != nil {
				t := spec.AcquireTime.UTC()
				c.AcquireTime = &t
			}
			if spec.RenewTime != nil {
				t := spec.RenewTime.UTC()
				c.RenewTime = &t
				if spec.LeaseDurationSeconds != nil {
					c.Expired = now.After(t.Add(time.Duration(*spec.LeaseDurationSeconds) * time.Second))
				}
			}
			c.Expired = c.Expired || c.Holder == ""
		}
	}
	c.Metrics, c.MetricsError = readMetrics(ctx, cl, cfg, c.Holder, service, metricsURL)
	return c
}

// readMetrics reads the health gauges from the first endpoint that answers.
func readMetrics(ctx context.Context, cl *explain.Cluster, cfg *explain.Config, holder, service, metricsURL string) (*Metrics, string) {
	type source struct {
		from string
		get  func(context.Context) ([]byte, error)
	}
	var sources []source
	ns := cfg.Settings.LeaseNamespace
	switch {
	case metricsURL != "":
		sources = append(sources, source{metricsURL, func(ctx context.Context) ([]byte, error) { return httpGet(ctx, metricsURL) }})
	case cl.Kube != nil:
		_, port, err := net.SplitHostPort(cfg.Settings.MetricsAddress)
		if holder != "" && err == nil {
			sources = append(sources, source{"pod " + ns + "/" + holder + " (the leader) through the API server's proxy", func(ctx context.Context) ([]byte, error) {
				return cl.Kube.CoreV1().Pods(ns).ProxyGet("http", holder, port, "metrics", nil).DoRaw(ctx)
			}})
		}
		if service != "" {
			sources = append(sources, source{"service " + ns + "/" + service + " through the API server's proxy", func(ctx context.Context) ([]byte, error) {
				return cl.Kube.CoreV1().Services(ns).ProxyGet("http", service, "metrics", "metrics", nil).DoRaw(ctx)
			}})
		}
	}
	if len(sources) == 0 {
		return nil, "no metrics endpoint to read (give --metrics-url)"
	}
	var failed []string
	for _, src := range sources {
		actx, cancel := context.WithTimeout(ctx, metricsTimeout)
		body, err := src.get(actx)
		cancel()
		if err == nil {
			var m *Metrics
			if m, err = ParseMetrics(bytes.NewReader(body)); err == nil {
				m.From = src.from
				return m, ""
			}
		}
		failed = append(failed, fmt.Sprintf("%s: %v", src.from, err))
	}
	return nil, strings.Join(failed, "; ")
}

func httpGet(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return io.ReadAll(io.LimitReader(resp.Body, 16<<20))
}

// ParseMetrics reads the health gauges from the Prometheus text format.
func ParseMetrics(r io.Reader) (*Metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing the metrics: %w", err)
	}
	if _, ok := families["restart_controller_ready"]; !ok {
		return nil, fmt.Errorf("not restart-controller's metrics: no restart_controller_ready")
	}
	m := &Metrics{}
	gauge := func(name string) *bool {
		f, ok := families[name]
		if !ok || len(f.GetMetric()) == 0 {
			return nil
		}
		v := f.GetMetric()[0].GetGauge().GetValue() == 1
		return &v
	}
	byLabel := func(name, label string) map[string]float64 {
		out := map[string]float64{}
		for _, metric := range families[name].GetMetric() {
			for _, lp := range metric.GetLabel() {
				if lp.GetName() == label {
					out[lp.GetValue()] += metric.GetGauge().GetValue()
				}
			}
		}
		return out
	}
	m.Ready, m.Leader = gauge("restart_controller_ready"), gauge("restart_controller_leader")
	m.Held = byLabel("restart_controller_restarts_held", "reason")
	m.Waiting = byLabel("restart_controller_restarts_waiting", "reason")
	for _, metric := range families["restart_controller_kind_degraded"].GetMetric() {
		if metric.GetGauge().GetValue() != 1 {
			continue
		}
		labels := map[string]string{}
		for _, lp := range metric.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		m.Degraded = append(m.Degraded, labels["resource"]+in(labels["namespace"])+": "+labels["reason"])
	}
	slices.Sort(m.Degraded)
	return m, nil
}
