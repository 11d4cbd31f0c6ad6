// Command metricnames prints, as JSON, every metric family restart-controller
// serves on /metrics, with its type and label names: the controller's own
// (internal/metrics), client-go's workqueue_* for the "workloads" queue
// (created the way internal/restart creates it), and the Go and process
// collectors'. hack/monitoring-check runs it to check the alerts and the
// dashboard name only metrics that exist.
//
//	go run ./hack/metricnames
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"k8s.io/client-go/util/workqueue"

	"github.com/restart-controller/restart-controller/internal/metrics"
)

// Family is one metric family.
type Family struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"` // counter, gauge, histogram, summary, untyped
	Help   string   `json:"help"`
	Labels []string `json:"labels"`
	// ConstLabels are labels with one fixed value, e.g. workqueue's name="workloads".
	ConstLabels map[string]string `json:"constLabels,omitempty"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "metricnames:", err)
		os.Exit(1)
	}
}

func run() error {
	m := metrics.New(func() (int, int) { return 0, 0 })
	q := workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "workloads", MetricsProvider: m.QueueMetrics()})
	defer q.ShutDown()

	families := map[string]*Family{}
	for _, d := range m.Docs() {
		families[d.Name] = &Family{Name: d.Name, Type: d.Type, Help: d.Help, Labels: append([]string{}, d.Labels...)}
	}
	gathered, err := m.Registry.Gather()
	if err != nil {
		return err
	}
	for _, mf := range gathered {
		f, ok := families[mf.GetName()]
		if !ok {
			f = &Family{Name: mf.GetName(), Type: strings.ToLower(mf.GetType().String()), Help: mf.GetHelp(), Labels: []string{}}
			families[f.Name] = f
		}
		values := map[string]map[string]bool{}
		for _, metric := range mf.GetMetric() {
			for _, lp := range metric.GetLabel() {
				if values[lp.GetName()] == nil {
					values[lp.GetName()] = map[string]bool{}
				}
				values[lp.GetName()][lp.GetValue()] = true
			}
		}
		for name, vals := range values {
			if !contains(f.Labels, name) {
				f.Labels = append(f.Labels, name)
			}
			if len(vals) == 1 && len(mf.GetMetric()) == 1 && !contains(docLabels(m, f.Name), name) {
				for v := range vals {
					if f.ConstLabels == nil {
						f.ConstLabels = map[string]string{}
					}
					f.ConstLabels[name] = v
				}
			}
		}
	}
	out := make([]*Family, 0, len(families))
	for _, f := range families {
		sort.Strings(f.Labels)
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func docLabels(m *metrics.Metrics, name string) []string {
	for _, d := range m.Docs() {
		if d.Name == name {
			return d.Labels
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
