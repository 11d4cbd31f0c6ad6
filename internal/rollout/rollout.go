// Package rollout reads how the rollout of a workload's pod template is going,
// from the workload's own status and by its kind's own contract: the rules of
// `kubectl rollout status` for Deployments, StatefulSets and DaemonSets,
// Argo CD's health rules for Argo Rollouts, and for any other kind the
// generic rules of kstatus (sigs.k8s.io/cli-utils/pkg/kstatus): the latest
// generation observed, then a Ready-like condition.
//
// Everything here is a pure function of the object (and, for deadlines, of
// the time given), so the informer transform can evaluate a workload as it
// enters the cache and keep only the small Status, and the same object always
// gives the same answer.
package rollout

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Phase is where a rollout stands.
type Phase string

const (
	// Progressing: the workload's controller has not finished rolling the
	// current pod template out, or has not observed it yet.
	Progressing Phase = "Progressing"
	// Complete: every pod the workload wants runs the current template and is
	// available by the kind's own measure.
	Complete Phase = "Complete"
	// Failed: the workload's controller itself reports that the rollout
	// cannot finish (a progress deadline exceeded, an invalid spec, a
	// degraded or stalled state).
	Failed Phase = "Failed"
	// NotRolling: the workload's controller will not roll the pods by itself
	// (a paused Deployment or Rollout, the OnDelete update strategy, a kind
	// configured with status "none", an object being deleted). There is
	// nothing to follow, so it neither proves a change healthy nor fails it.
	NotRolling Phase = "NotRolling"
)

// Status is what the catalog keeps of a workload's rollout: the verdict of its
// kind's rule, a CamelCase reason and a short human message. It is all that
// later decisions need, so the rest of the object's status can be dropped.
type Status struct {
	Phase   Phase  `json:"phase,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// String renders the status for logs and Events.
func (s Status) String() string {
	switch {
	case s.Message != "" && s.Reason != "":
		return fmt.Sprintf("%s (%s: %s)", s.Phase, s.Reason, s.Message)
	case s.Reason != "":
		return fmt.Sprintf("%s (%s)", s.Phase, s.Reason)
	}
	return string(s.Phase)
}

// Kind names the rule that reads a workload kind's status.
type Kind string

const (
	KindDeployment  Kind = "deployment"
	KindStatefulSet Kind = "statefulset"
	KindDaemonSet   Kind = "daemonset"
	KindArgoRollout Kind = "argo-rollout"
	// KindDeploymentConfig reads OpenShift DeploymentConfigs
	// (apps.openshift.io) as `oc rollout status` does.
	KindDeploymentConfig Kind = "deploymentconfig"
	// KindConditions is the generic rule for kinds added by configuration.
	KindConditions Kind = "conditions"
	// KindNone follows nothing: every restart counts as NotRolling. For kinds
	// whose restart rolls no pods at once, e.g. CronJobs.
	KindNone Kind = "none"
	// KindJob reads a Job's Complete and Failed conditions: the rollout of
	// a restart that runs a Job is the Job (job.go).
	KindJob Kind = "job"
)

// Kinds lists every rule name, for validation and error messages.
var Kinds = []Kind{KindDeployment, KindStatefulSet, KindDaemonSet, KindArgoRollout, KindDeploymentConfig, KindConditions, KindNone, KindJob}

// DefaultReadyConditions are the condition types the generic rule reads when
// a kind does not name its own: the first of them the object carries decides.
var DefaultReadyConditions = []string{"Ready", "Available"}

// DefaultDeadline is how long a rollout may take before it counts as failed,
// when a kind does not say: the default progressDeadlineSeconds of a
// Deployment.
const DefaultDeadline = 10 * time.Minute

// Rule reads the status of one workload kind.
type Rule struct {
	Kind Kind
	// ReadyConditions are read by KindConditions; empty means
	// DefaultReadyConditions.
	ReadyConditions []string
	// Deadline bounds a rollout from its restart; zero means DefaultDeadline.
	Deadline time.Duration
}

// BuiltinKind returns the rule a workload resource gets when its
// configuration names none: the built-in one of the four kinds the default
// configuration watches and of OpenShift's DeploymentConfigs, the generic
// one for any other.
func BuiltinKind(gvr schema.GroupVersionResource) Kind {
	switch gvr.GroupResource() {
	case schema.GroupResource{Group: "apps", Resource: "deployments"}:
		return KindDeployment
	case schema.GroupResource{Group: "apps", Resource: "statefulsets"}:
		return KindStatefulSet
	case schema.GroupResource{Group: "apps", Resource: "daemonsets"}:
		return KindDaemonSet
	case schema.GroupResource{Group: "argoproj.io", Resource: "rollouts"}:
		return KindArgoRollout
	case schema.GroupResource{Group: "apps.openshift.io", Resource: "deploymentconfigs"}:
		return KindDeploymentConfig
	}
	return KindConditions
}

// Evaluate reads obj, a workload as the API server returns it, by the rule.
func (r Rule) Evaluate(obj map[string]interface{}) Status {
	o := object(obj)
	if s, ok := o.str("metadata", "deletionTimestamp"); ok && s != "" {
		return Status{Phase: NotRolling, Reason: "Terminating", Message: "the object is being deleted"}
	}
	var s Status
	switch r.Kind {
	case KindDeployment:
		s = deployment(o)
	case KindStatefulSet:
		s = statefulSet(o)
	case KindDaemonSet:
		s = daemonSet(o)
	case KindArgoRollout:
		s = argoRollout(o)
	case KindDeploymentConfig:
		s = deploymentConfig(o)
	case KindJob:
		s = job(o)
	case KindNone:
		s = Status{Phase: NotRolling, Reason: "NotFollowed", Message: "this kind's status is not followed"}
	default:
		conditions := r.ReadyConditions
		if len(conditions) == 0 {
			conditions = DefaultReadyConditions
		}
		s = generic(o, conditions)
	}
	if len(s.Message) > maxMessage {
		s.Message = s.Message[:maxMessage-3] + "..."
	}
	return s
}

// maxMessage bounds the message kept per cached workload; conditions may
// carry long texts.
const maxMessage = 200

// Result is the outcome of a rollout the controller started.
type Result string

const (
	// ResultPending: still progressing inside its deadline.
	ResultPending Result = ""
	// ResultComplete: the rollout completed.
	ResultComplete Result = "complete"
	// ResultFailed: failed by the workload's own account, or out of time.
	ResultFailed Result = "failed"
	// ResultNotRolling: its controller does not roll it (see NotRolling).
	ResultNotRolling Result = "not-rolling"
)

// Verdict judges a rollout started at started.
type Verdict struct {
	Result Result
	// Reason and Message explain a failure (the workload's own, or
	// DeadlineExceeded) or what a pending rollout waits for.
	Reason, Message string
	// Wait is how long until the deadline, while ResultPending.
	Wait time.Duration
}

// ReasonDeadlineExceeded is the reason of a rollout judged failed because
// it was not complete by its deadline: it may still complete.
const ReasonDeadlineExceeded = "DeadlineExceeded"

// DeadlineOrDefault is how long after its restart a rollout of the rule's
// kind counts as failed.
func (r Rule) DeadlineOrDefault() time.Duration {
	if r.Deadline > 0 {
		return r.Deadline
	}
	return DefaultDeadline
}

// Judge turns the status of a rollout started at started into its outcome
// at now: a progressing rollout fails once the rule's deadline has passed.
func (r Rule) Judge(s Status, started, now time.Time) Verdict {
	deadline := r.DeadlineOrDefault()
	switch s.Phase {
	case Complete:
		return Verdict{Result: ResultComplete, Reason: s.Reason, Message: s.Message}
	case Failed:
		return Verdict{Result: ResultFailed, Reason: s.Reason, Message: s.Message}
	case NotRolling:
		return Verdict{Result: ResultNotRolling, Reason: s.Reason, Message: s.Message}
	}
	end := started.Add(deadline)
	if !now.Before(end) {
		msg := fmt.Sprintf("not complete %s after the restart", deadline)
		if s.Message != "" {
			msg += ": " + s.Message
		} else if s.Reason != "" {
			msg += ": " + s.Reason
		}
		return Verdict{Result: ResultFailed, Reason: ReasonDeadlineExceeded, Message: msg}
	}
	return Verdict{Result: ResultPending, Reason: s.Reason, Message: s.Message, Wait: end.Sub(now)}
}
