// Package trend is the machine-readable history of `make bench`
// (BENCHMARKS.json beside BENCHMARKS.md) and its plot (BENCHMARKS.svg):
// every run appends its headline figures, and the plot is redrawn from the
// whole file.
package trend

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// File is the whole history.
type File struct {
	About string `json:"about"`
	Runs  []Run  `json:"runs"`
}

const about = "Headline figures of every `make bench` run, appended by hack/bench; BENCHMARKS.md says how each is measured. Peak RSS is VmHWM over the program's whole run; CPU to ready is utime+stime from start to caches synced; p50/p99 are from a source update issued to the pod-template change seen, per simultaneous-change phase (grace 0)."

// Run is one run: which controller, when, where, and its figures.
type Run struct {
	Commit  string   `json:"commit"` // the controller's --version (git describe at `make build`)
	Date    string   `json:"date"`   // start of the run, RFC 3339, UTC
	Machine string   `json:"machine"`
	Clean   bool     `json:"clean"` // no foreign heavy process seen during the run
	Results []Result `json:"results"`
}

// Result is one program's headline figures in one scenario at one
// scale.
type Result struct {
	Scenario          string    `json:"scenario"`
	Scale             int       `json:"scale"`
	Program           string    `json:"program"`
	PeakRSSMiB        float64   `json:"peakRSSMiB"`
	CPUToReadySeconds float64   `json:"cpuToReadySeconds"`
	ReadySeconds      float64   `json:"readySeconds"`
	FanOut            []Latency `json:"fanOut,omitempty"`
}

// Latency is one simultaneous-change phase.
type Latency struct {
	Changes    int     `json:"changes"`
	P50Seconds float64 `json:"p50Seconds"`
	P99Seconds float64 `json:"p99Seconds"`
	Missing    int     `json:"missing"`
	// The controller's p99 over the zero-logic patcher's: the median of
	// every comparison on one cluster (pairs on fresh clusters, or the
	// patcher before and after the controller), and their range.
	Comparisons    int     `json:"comparisons,omitempty"`
	P99RatioMedian float64 `json:"p99RatioMedian,omitempty"`
	P99RatioMin    float64 `json:"p99RatioMin,omitempty"`
	P99RatioMax    float64 `json:"p99RatioMax,omitempty"`
}

// Read reads the trend file; a missing file is an empty history.
func Read(file string) (File, error) {
	tf := File{About: about}
	b, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return tf, nil
	}
	if err != nil {
		return tf, err
	}
	if err := json.Unmarshal(b, &tf); err != nil {
		return tf, fmt.Errorf("%s: %w", file, err)
	}
	tf.About = about
	return tf, nil
}

// Append adds a run to the file, keeping every earlier one.
func Append(file string, run Run) (File, error) {
	tf, err := Read(file)
	if err != nil {
		return tf, err
	}
	tf.Runs = append(tf.Runs, run)
	b, err := json.MarshalIndent(tf, "", "  ")
	if err != nil {
		return tf, err
	}
	return tf, os.WriteFile(file, append(b, '\n'), 0o644)
}
