package e2e

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// scrape reads the controller's /metrics with Prometheus' own text parser.
func (p *controllerProcess) scrape() (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get("http://" + p.metrics + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("reading the controller's metrics: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the controller's metrics: %w", err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return nil, fmt.Errorf("parsing the controller's metrics: %w", err)
	}
	return families, nil
}

// metricSum adds up the samples of the counter, gauge or untyped metric
// name whose labels include every `key="value"` given (an absent label reads
// as ""); found is false when none matches.
func metricSum(families map[string]*dto.MetricFamily, name string, labels ...string) (total float64, found bool, err error) {
	want := map[string]string{}
	for _, l := range labels {
		key, quoted, _ := strings.Cut(l, "=")
		value, err := strconv.Unquote(quoted)
		if err != nil {
			return 0, false, fmt.Errorf("label %s: want key=\"value\": %w", l, err)
		}
		want[key] = value
	}
	for _, m := range families[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		if !containsAll(have, want) {
			continue
		}
		found = true
		total += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
	}
	return total, found, nil
}

func containsAll(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
