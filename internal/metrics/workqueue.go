package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// QueueMetrics returns a workqueue metrics provider that registers on this
// registry, so the queue needs no process-global provider.
func (m *Metrics) QueueMetrics() workqueue.MetricsProvider { return queueMetrics{m.Registry} }

type queueMetrics struct{ reg *prometheus.Registry }

func (q queueMetrics) gauge(queue, name, help string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Subsystem: "workqueue", Name: name, Help: help, ConstLabels: prometheus.Labels{"name": queue},
	})
	q.reg.MustRegister(g)
	return g
}

func (q queueMetrics) counter(queue, name, help string) prometheus.Counter {
	c := prometheus.NewCounter(prometheus.CounterOpts{
		Subsystem: "workqueue", Name: name, Help: help, ConstLabels: prometheus.Labels{"name": queue},
	})
	q.reg.MustRegister(c)
	return c
}

func (q queueMetrics) histogram(queue, name, help string) prometheus.Histogram {
	h := prometheus.NewHistogram(prometheus.HistogramOpts{
		Subsystem: "workqueue", Name: name, Help: help, ConstLabels: prometheus.Labels{"name": queue},
		Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
	})
	q.reg.MustRegister(h)
	return h
}

func (q queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return q.gauge(name, "depth", "Current depth of the workqueue.")
}

func (q queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return q.counter(name, "adds_total", "Adds handled by the workqueue.")
}

func (q queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return q.histogram(name, "queue_duration_seconds", "Seconds an item stays in the workqueue before being requested.")
}

func (q queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return q.histogram(name, "work_duration_seconds", "Seconds processing an item from the workqueue takes.")
}

func (q queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.gauge(name, "unfinished_work_seconds", "Seconds of work in progress not yet observed by work_duration.")
}

func (q queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return q.gauge(name, "longest_running_processor_seconds", "Seconds the longest running processor has been running.")
}

func (q queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return q.counter(name, "retries_total", "Retries handled by the workqueue.")
}
