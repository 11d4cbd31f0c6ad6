package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// What the control plane did during a phase, beside the program measured:
// the API server's writes by verb and resource with their mean durations
// (apiserver_request_total, apiserver_request_duration_seconds), etcd's
// request latency (etcd_request_duration_seconds), and the CPU seconds of
// etcd, kube-apiserver and kube-controller-manager, which share the two
// cores with the program. A fan-out is a race for those cores: a program
// that makes the API server write more makes its own patches wait.

// apiSnapshot is the cumulative figures at one moment.
type apiSnapshot struct {
	requests map[string]float64 // "VERB resource[/subresource]" → requests (writes only)
	durSum   map[string]float64 // the same keys → seconds
	durCount map[string]float64
	etcdSum  float64 // every etcd request but reads of lists and watches
	etcdN    float64
	cpu      map[string]float64 // component → CPU seconds
}

// apiLoad is what happened between two snapshots.
type apiLoad struct {
	requests map[string]float64
	meanDur  map[string]float64 // seconds
	etcdMean float64
	etcdN    float64
	cpu      map[string]float64
}

var writeVerbs = map[string]bool{"POST": true, "PUT": true, "PATCH": true, "DELETE": true}

// apiSnapshot reads the API server's /metrics and the components' CPU.
func (e *env) apiSnapshot(ctx context.Context) (*apiSnapshot, error) {
	b, err := e.raw.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("API server metrics: %w", err)
	}
	s := parseAPIMetrics(string(b))
	for name, pid := range clusterPids(e.dir) {
		if cpu, err := cpuSecondsOf(pid); err == nil {
			s.cpu[name] = cpu
		}
	}
	return s, nil
}

// parseAPIMetrics reads the API server's request and etcd figures.
func parseAPIMetrics(text string) *apiSnapshot {
	s := &apiSnapshot{requests: map[string]float64{}, durSum: map[string]float64{}, durCount: map[string]float64{}, cpu: map[string]float64{}}
	key := func(l map[string]string) (string, bool) {
		if !writeVerbs[l["verb"]] {
			return "", false
		}
		k := l["verb"] + " " + l["resource"]
		if l["subresource"] != "" {
			k += "/" + l["subresource"]
		}
		return k, true
	}
	eachSample(text, "apiserver_request_total", func(l map[string]string, v float64) {
		if k, ok := key(l); ok {
			s.requests[k] += v
		}
	})
	eachSample(text, "apiserver_request_duration_seconds_sum", func(l map[string]string, v float64) {
		if k, ok := key(l); ok {
			s.durSum[k] += v
		}
	})
	eachSample(text, "apiserver_request_duration_seconds_count", func(l map[string]string, v float64) {
		if k, ok := key(l); ok {
			s.durCount[k] += v
		}
	})
	etcdWrite := func(l map[string]string) bool {
		op := strings.ToLower(l["operation"])
		return !strings.Contains(op, "list") && !strings.Contains(op, "get") && !strings.Contains(op, "watch")
	}
	eachSample(text, "etcd_request_duration_seconds_sum", func(l map[string]string, v float64) {
		if etcdWrite(l) {
			s.etcdSum += v
		}
	})
	eachSample(text, "etcd_request_duration_seconds_count", func(l map[string]string, v float64) {
		if etcdWrite(l) {
			s.etcdN += v
		}
	})
	return s
}

// since is the load between an earlier snapshot and this one.
func (s *apiSnapshot) since(before *apiSnapshot) *apiLoad {
	l := &apiLoad{requests: map[string]float64{}, meanDur: map[string]float64{}, cpu: map[string]float64{}}
	for k, v := range s.requests {
		if d := v - before.requests[k]; d > 0 {
			l.requests[k] = d
		}
	}
	for k, n := range s.durCount {
		if d := n - before.durCount[k]; d > 0 {
			l.meanDur[k] = (s.durSum[k] - before.durSum[k]) / d
		}
	}
	if l.etcdN = s.etcdN - before.etcdN; l.etcdN > 0 {
		l.etcdMean = (s.etcdSum - before.etcdSum) / l.etcdN
	}
	for k, v := range s.cpu {
		l.cpu[k] = v - before.cpu[k]
	}
	return l
}

// writes lists the writes, most first: "PATCH deployments 200 (12 ms)".
func (l *apiLoad) writes(top int) string {
	keys := make([]string, 0, len(l.requests))
	for k := range l.requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if l.requests[keys[i]] != l.requests[keys[j]] {
			return l.requests[keys[i]] > l.requests[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var parts []string
	for i, k := range keys {
		if i == top {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.0f (%.0f ms)", k, l.requests[k], 1000*l.meanDur[k]))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func (l *apiLoad) total() float64 {
	var n float64
	for _, v := range l.requests {
		n += v
	}
	return n
}

// cpuLine is "kube-apiserver 1.20 s, etcd 0.30 s, kube-controller-manager 0.40 s".
func (l *apiLoad) cpuLine() string {
	var parts []string
	for _, name := range []string{"kube-apiserver", "etcd", "kube-controller-manager"} {
		if v, ok := l.cpu[name]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f s", name, v))
		}
	}
	return strings.Join(parts, ", ")
}

var labelRE = regexp.MustCompile(`(\w+)="((?:[^"\\]|\\.)*)"`)

// eachSample calls f with the labels and value of every sample of the
// named metric in Prometheus text.
func eachSample(text, name string, f func(labels map[string]string, v float64)) {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		labels := map[string]string{}
		switch {
		case strings.HasPrefix(rest, "{"):
			end := strings.LastIndexByte(rest, '}')
			if end < 0 {
				continue
			}
			for _, m := range labelRE.FindAllStringSubmatch(rest[:end], -1) {
				labels[m[1]] = m[2]
			}
			rest = rest[end+1:]
		case strings.HasPrefix(rest, " "):
		default:
			continue // a longer name
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		if v, err := strconv.ParseFloat(fields[0], 64); err == nil {
			f(labels, v)
		}
	}
}

// clusterPids reads the pids the test cluster wrote (name=pid lines).
func clusterPids(dir string) map[string]int {
	out := map[string]int{}
	data, err := os.ReadFile(filepath.Join(dir, "cluster", "pids"))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		name, v, ok := strings.Cut(strings.TrimSpace(line), "=")
		if pid, err := strconv.Atoi(v); ok && err == nil {
			out[name] = pid
		}
	}
	return out
}

func cpuSecondsOf(pid int) (float64, error) {
	return (&controllerProc{pid: pid}).cpuSeconds()
}

// sumOf adds up the samples of the named metric whose labels have the given
// values (name=value pairs).
func sumOf(text, name string, match ...string) float64 {
	var total float64
	eachSample(text, name, func(l map[string]string, v float64) {
		for i := 0; i+1 < len(match); i += 2 {
			if l[match[i]] != match[i+1] {
				return
			}
		}
		total += v
	})
	return total
}

// ctrlSnapshot is the controller's own view of a phase: how long items
// waited in its work queue, how long its PATCHes took, and how long from a
// change seen to its restart.
type ctrlSnapshot struct {
	queueSum, queueN, patchSum, patchN, c2rSum, c2rN float64
}

func (e *env) ctrlSnapshot() (ctrlSnapshot, error) {
	if e.proc == nil || e.proc.addr == "" {
		return ctrlSnapshot{}, nil // the floor
	}
	m, err := e.proc.metrics()
	if err != nil {
		return ctrlSnapshot{}, err
	}
	if !e.recording {
		// The patcher: from its change seen (OnUpdate) to its worker.
		return ctrlSnapshot{
			queueSum: sumOf(m, "zerologic_queue_wait_seconds_sum"), queueN: sumOf(m, "zerologic_queue_wait_seconds_count"),
			patchSum: sumOf(m, "zerologic_patch_duration_seconds_sum"), patchN: sumOf(m, "zerologic_patch_duration_seconds_count"),
		}, nil
	}
	return ctrlSnapshot{
		queueSum: sumOf(m, "workqueue_queue_duration_seconds_sum"), queueN: sumOf(m, "workqueue_queue_duration_seconds_count"),
		patchSum: sumOf(m, "restart_controller_patch_duration_seconds_sum"), patchN: sumOf(m, "restart_controller_patch_duration_seconds_count"),
		c2rSum: sumOf(m, "restart_controller_change_to_restart_seconds_sum"), c2rN: sumOf(m, "restart_controller_change_to_restart_seconds_count"),
	}, nil
}

// ctrlMeans are the mean queue wait, PATCH duration and change-to-restart
// time between two snapshots.
type ctrlMeans struct{ queue, patch, changeToRestart float64 }

func (s ctrlSnapshot) since(b ctrlSnapshot) ctrlMeans {
	mean := func(sum, n float64) float64 {
		if n <= 0 {
			return 0
		}
		return sum / n
	}
	return ctrlMeans{mean(s.queueSum-b.queueSum, s.queueN-b.queueN), mean(s.patchSum-b.patchSum, s.patchN-b.patchN),
		mean(s.c2rSum-b.c2rSum, s.c2rN-b.c2rN)}
}
