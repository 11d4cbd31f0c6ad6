package main

import (
	"strconv"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// metricSum adds up the samples of the metric name in Prometheus text
// (read with Prometheus' own parser) whose labels include every
// `key="value"` given, an absent label reading as ""; a histogram's or
// summary's name_sum and name_count are read from its family. found is
// false when no sample matches; text that does not parse is logged and
// matches nothing.
func metricSum(text, name string, labels ...string) (total float64, found bool) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		logf("warning: metrics do not parse, reading %s as absent: %v", name, err)
		return 0, false
	}
	want := map[string]string{}
	for _, l := range labels {
		key, quoted, _ := strings.Cut(l, "=")
		value, err := strconv.Unquote(quoted)
		if err != nil {
			logf("warning: label %s of %s is not key=\"value\", reading it as absent: %v", l, name, err)
			return 0, false
		}
		want[key] = value
	}
	family, part := families[name], ""
	for _, suffix := range []string{"_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && family == nil {
			family, part = families[base], suffix
		}
	}
	for _, m := range family.GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		found = true
		switch part {
		case "_sum":
			total += m.GetHistogram().GetSampleSum() + m.GetSummary().GetSampleSum()
		case "_count":
			total += float64(m.GetHistogram().GetSampleCount() + m.GetSummary().GetSampleCount())
		default:
			total += m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
		}
	}
	return total, found
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	have := map[string]string{}
	for _, l := range m.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
