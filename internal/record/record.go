// Package record defines the annotations the controller writes on
// workloads, and reads them: the applied checksums, the template record,
// the rollout record of the last restart and the hold. They are the state
// that must survive a crash, so they live on the objects. Each is read in
// one place per use (decision.ReadWorkload), and a value that does not
// parse is an error the caller turns into a reason, never dropped.
package record

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/resourceversion"

	"github.com/restart-controller/restart-controller/internal/rollout"
)

// Absent is the applied checksum of a source that did not exist when it was
// recorded; its later creation is a change only for optional references.
const Absent = ""

// Pending is recorded for a source whose data may have changed under pods of
// a new workload or template that were starting: written after the template
// was set, or, when that order is unknown, updated moments before the
// template was first seen. The workload restarts once the update's grace
// period ends. Being on the workload, it survives a crash of the controller.
const Pending = "pending"

// ParseApplied reads an applied-checksums annotation: a JSON object of
// strings, "KIND/NAMESPACE/NAME" to checksum.
func ParseApplied(raw string) (map[string]string, error) {
	applied := map[string]string{}
	if err := json.Unmarshal([]byte(raw), &applied); err != nil {
		return nil, fmt.Errorf("applied checksums annotation is not a JSON object of strings: %w", err)
	}
	return applied, nil
}

// EncodeApplied renders an applied-checksums annotation (keys sorted).
func EncodeApplied(applied map[string]string) string {
	raw, err := json.Marshal(applied)
	if err != nil {
		// A map of strings always encodes.
		panic(err)
	}
	return string(raw)
}

// Template is the value of the applied-template-hash annotation: the
// digest of the pod template the checksums were recorded against and, when
// known, when that template was set:
//
//	"<hash>"              the order of writes is not known (also the format
//	                      of earlier releases)
//	"<hash>@<rv>@<uid>"   the template was set by the write at resourceVersion
//	                      rv (the workload's creation or a template change)
//	                      of the workload with that UID
//
// The UID keeps a record copied to another object (a backup restored into
// another cluster, whose resourceVersions mean nothing here) from being used.
type Template struct{ Hash, RV, UID string }

// ParseTemplate reads an applied-template-hash annotation; an unreadable
// one reads as no record at all (an empty Hash).
func ParseTemplate(s string) Template {
	hash, rest, ordered := strings.Cut(s, "@")
	if !ordered {
		return Template{Hash: s}
	}
	rv, uid, ok := strings.Cut(rest, "@")
	if !ok || hash == "" || uid == "" || strings.Contains(uid, "@") {
		return Template{}
	}
	if _, err := resourceversion.CompareResourceVersion(rv, rv); err != nil {
		return Template{}
	}
	return Template{Hash: hash, RV: rv, UID: uid}
}

func (t Template) String() string {
	if t.RV == "" {
		return t.Hash
	}
	return t.Hash + "@" + t.RV + "@" + t.UID
}

// LastRestart is the rollout annotation a restart writes on the workload, in the
// same patch as the new pod template: what the restart delivered and, once the
// workload's own controller has finished, how it ended.
type LastRestart struct {
	// At is when the restart was written; the rollout's deadline runs from it.
	At time.Time `json:"at"`
	// Sources maps each source whose new data the restart delivered
	// ("configmap/NS/NAME") to the change it delivered (Change of its data).
	Sources map[string]string `json:"sources,omitempty"`
	// Result is empty while the rollout is followed; then complete, failed or
	// not-rolling.
	Result rollout.Result `json:"result,omitempty"`
	// Reason and Message explain the result (e.g. ProgressDeadlineExceeded).
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// Done is when the result was recorded.
	Done *time.Time `json:"done,omitempty"`
	// Restarts are the times of this controller's recent restarts of the
	// workload, oldest first, this one included: the breaker counts them.
	Restarts []time.Time `json:"restarts,omitempty"`
	// Job names the Job a runNow restart started, in the workload's
	// namespace: its conditions, not the workload's status, end the rollout.
	Job string `json:"job,omitempty"`
	// Unpaced: every change the restart delivered reached few enough
	// workloads to restart them all at once (waves' unpacedUpTo), when it
	// was decided. maxInFlight does not count it, and its completion is not
	// written, saving a write per restart: the workload's status tells it
	// (Outcome). A change it delivered that became paced later counts it in
	// flight until that status says complete, and the process following it
	// wakes that change's waiting readers then. A failure is written all
	// the same: it is reported, followed until it recovers, and shown.
	Unpaced bool `json:"unpaced,omitempty"`
}

// InFlight reports a restart whose rollout has no result recorded.
func (r *LastRestart) InFlight() bool { return r != nil && r.Result == rollout.ResultPending }

// EndUnwritten reports a record whose completion is read from the
// workload's status rather than written (Unpaced, and no Job: a Job's
// conditions are read from the API server, so its end is written).
func (r *LastRestart) EndUnwritten() bool { return r != nil && r.Unpaced && r.Job == "" }

// CountedInFlight reports a restart whose rollout the cap on rollouts in
// flight counts: one with no result, whose end is written.
func (r *LastRestart) CountedInFlight() bool { return r.InFlight() && !r.EndUnwritten() }

// Outcome is the rollout's result: the one recorded or, for a record whose
// completion goes unwritten (EndUnwritten), the one its workload's status
// shows, phase (rollout.NotRolling where the workload rolls no pods by
// itself). The record and the template change it restarted are one write,
// so a status complete for the object that carries the record is the
// completion of that restart's rollout.
func (r *LastRestart) Outcome(phase rollout.Phase) rollout.Result {
	switch {
	case r == nil:
		return rollout.ResultPending
	case !r.InFlight() || !r.EndUnwritten():
		return r.Result
	case phase == rollout.Complete:
		return rollout.ResultComplete
	case phase == rollout.NotRolling:
		return rollout.ResultNotRolling
	}
	return rollout.ResultPending
}

// Delivered reports whether the restart delivered change of source.
func (r *LastRestart) Delivered(source, change string) bool {
	return r != nil && change != "" && r.Sources[source] == change
}

// HoldKind says why a restart is held.
type HoldKind string

const (
	// HoldWave: a rollout of the same change of the source failed, which
	// halts the workloads of that change not restarted yet.
	HoldWave HoldKind = "wave"
	// HoldBreaker: the workload was restarted more than its budget of times
	// within the breaker's window; it waits until its sources stay still.
	HoldBreaker HoldKind = "breaker"
)

// Hold is the hold annotation on a held workload. It is written once, when
// the hold starts, and removed by the restart that ends it.
type Hold struct {
	Kind HoldKind `json:"kind"`
	// Source and Change name the halted change (wave holds).
	Source string `json:"source,omitempty"`
	Change string `json:"change,omitempty"`
	// Cause names the workload whose rollout failed and why (wave holds), or
	// the restarts counted (breaker holds).
	Cause string    `json:"cause,omitempty"`
	Since time.Time `json:"since"`
}

// HoldsChange reports a wave hold for this change of the source.
func (h *Hold) HoldsChange(source, change string) bool {
	return h != nil && h.Kind == HoldWave && h.Source == source && h.Change == change
}

// Same reports whether two holds hold for the same reason (Since aside).
func (h *Hold) Same(o *Hold) bool {
	return h != nil && o != nil && h.Kind == o.Kind && h.Source == o.Source && h.Change == o.Change && h.Cause == o.Cause
}

// FailedWorkload names the workload whose failed rollout a wave hold's
// cause reports: the reader's name before the first ": " (the waves write
// causes so).
func FailedWorkload(cause string) string {
	key, _, _ := strings.Cut(cause, ": ")
	return key
}

// ParseLastRestart reads a rollout annotation; an absent one (raw "") is nil.
func ParseLastRestart(raw string) (*LastRestart, error) {
	if raw == "" {
		return nil, nil
	}
	var r LastRestart
	if err := json.Unmarshal([]byte(raw), &r); err != nil {
		return nil, fmt.Errorf("rollout annotation is not a rollout record: %w", err)
	}
	if r.At.IsZero() {
		return nil, errors.New("rollout annotation has no restart time")
	}
	switch r.Result {
	case rollout.ResultPending, rollout.ResultComplete, rollout.ResultFailed, rollout.ResultNotRolling:
	default:
		return nil, fmt.Errorf("rollout annotation has an unknown result %q", r.Result)
	}
	return &r, nil
}

// ParseHold reads a hold annotation; an absent one (raw "") is nil.
func ParseHold(raw string) (*Hold, error) {
	if raw == "" {
		return nil, nil
	}
	var h Hold
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		return nil, fmt.Errorf("hold annotation is not a hold: %w", err)
	}
	switch h.Kind {
	case HoldWave:
		if h.Source == "" || h.Change == "" {
			return nil, errors.New("wave hold without source or change")
		}
	case HoldBreaker:
	default:
		return nil, fmt.Errorf("hold annotation has an unknown kind %q", h.Kind)
	}
	return &h, nil
}

// Encode renders a record or a hold as its annotation's value; nil encodes
// as "".
func Encode[T LastRestart | Hold](v *T) string {
	if v == nil {
		return ""
	}
	raw, err := json.Marshal(v)
	if err != nil {
		// Only maps of strings, strings and times: cannot fail.
		panic(err)
	}
	return string(raw)
}

// maxHistory bounds the restart history kept on a workload whatever the
// breaker's budget: the annotation stays small.
const maxHistory = 100

// NewLastRestart is the record of a restart at now delivering sources, with
// the history of the previous record (if any) trimmed to window and bound.
func NewLastRestart(previous *LastRestart, sources map[string]string, now time.Time, window time.Duration) *LastRestart {
	r := &LastRestart{At: now, Sources: sources}
	if previous != nil {
		for _, t := range previous.Restarts {
			if now.Sub(t) < window && t.Before(now) {
				r.Restarts = append(r.Restarts, t)
			}
		}
	}
	r.Restarts = append(r.Restarts, now)
	if len(r.Restarts) > maxHistory {
		r.Restarts = r.Restarts[len(r.Restarts)-maxHistory:]
	}
	return r
}

// WithResult is the record with the rollout's verdict recorded at now.
func (r LastRestart) WithResult(v rollout.Verdict, now time.Time) *LastRestart {
	r.Result, r.Reason, r.Message = v.Result, v.Reason, v.Message
	r.Done = &now
	return &r
}
