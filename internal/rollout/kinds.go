package rollout

import (
	"cmp"
	"fmt"
	"strconv"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// deployment follows `kubectl rollout status`: once the latest generation is
// observed, a Progressing condition with reason ProgressDeadlineExceeded is a
// failure; otherwise every replica must be updated, no old one left, and every
// updated one available.
func deployment(o object) Status {
	if paused, _ := o.boolean("spec", "paused"); paused {
		return Status{Phase: NotRolling, Reason: "Paused", Message: "the Deployment is paused"}
	}
	if s, ok := generationNotObserved(o); ok {
		return s
	}
	if c, ok := o.condition("Progressing"); ok && c.reason == "ProgressDeadlineExceeded" {
		return Status{Phase: Failed, Reason: c.reason, Message: c.message}
	}
	want := o.intOr(1, "spec", "replicas")
	return replicasRolled(o, want, Status{Phase: Complete, Message: fmt.Sprintf("%d replicas updated and available", want)})
}

// replicasRolled is what the replica counts of a Deployment or a
// DeploymentConfig say: progressing until every replica is updated, no old
// one is left and every updated one is available; then done.
func replicasRolled(o object, want int64, done Status) Status {
	updated := o.intOr(0, "status", "updatedReplicas")
	total := o.intOr(0, "status", "replicas")
	available := o.intOr(0, "status", "availableReplicas")
	switch {
	case updated < want:
		return progressing("LessUpdated", "updated %d/%d", updated, want)
	case total > updated:
		return progressing("OldReplicasPending", "%d old replicas pending termination", total-updated)
	case available < updated:
		return progressing("LessAvailable", "available %d/%d", available, updated)
	}
	return done
}

// statefulSet follows `kubectl rollout status`: the OnDelete strategy rolls
// nothing by itself; otherwise, once the latest generation is observed, every
// replica must be ready (and available, where the API server reports it), a
// partition must have its share updated, and without one the current
// revision must have become the update revision.
func statefulSet(o object) Status {
	if s, ok := onDeleteOrNotObserved(o); ok {
		return s
	}
	want := o.intOr(1, "spec", "replicas")
	if ready := o.intOr(0, "status", "readyReplicas"); ready < want {
		return progressing("LessReady", "ready %d/%d", ready, want)
	}
	if available, ok := o.integer("status", "availableReplicas"); ok && available < want {
		return progressing("LessAvailable", "available %d/%d", available, want)
	}
	updated := o.intOr(0, "status", "updatedReplicas")
	if partition := o.intOr(0, "spec", "updateStrategy", "rollingUpdate", "partition"); partition > 0 {
		if share := want - partition; updated < share {
			return progressing("PartitionRollout", "updated %d/%d (partition %d)", updated, share, partition)
		}
		return Status{Phase: Complete, Reason: "PartitionRolledOut",
			Message: fmt.Sprintf("%d pods above partition %d updated", max(want-partition, 0), partition)}
	}
	current, _ := o.str("status", "currentRevision")
	update, _ := o.str("status", "updateRevision")
	if current != update {
		return progressing("RevisionMismatch", "updated %d/%d, revision %s not current yet", updated, want, update)
	}
	return Status{Phase: Complete, Message: fmt.Sprintf("%d replicas at revision %s", want, update)}
}

// daemonSet follows `kubectl rollout status`: OnDelete rolls nothing by
// itself; otherwise, once the latest generation is observed, every node that
// should run a pod runs an updated one, and every one is available.
func daemonSet(o object) Status {
	if s, ok := onDeleteOrNotObserved(o); ok {
		return s
	}
	desired := o.intOr(0, "status", "desiredNumberScheduled")
	updated := o.intOr(0, "status", "updatedNumberScheduled")
	available := o.intOr(0, "status", "numberAvailable")
	switch {
	case updated < desired:
		return progressing("LessUpdated", "updated %d/%d", updated, desired)
	case available < desired:
		return progressing("LessAvailable", "available %d/%d", available, desired)
	}
	return Status{Phase: Complete, Message: fmt.Sprintf("%d pods updated and available", desired)}
}

// argoRollout follows Argo CD's health rules for Argo Rollouts: the latest
// generation observed (status.observedGeneration is a string there, a hash in
// old versions, which cannot be compared); an InvalidSpec condition, or a
// Progressing condition saying RolloutAborted or ProgressDeadlineExceeded, is
// a failure; spec.paused means not rolling; then status.phase (Healthy,
// Degraded, Paused, Progressing), or the replica counts and the stable
// ReplicaSet in versions before phase existed.
func argoRollout(o object) Status {
	gen, _ := o.integer("metadata", "generation")
	observed, found := o.get("status", "observedGeneration")
	if !found {
		return progressing("LatestGenerationNotObserved", "the rollout controller has not observed the object yet")
	}
	if og, ok := asInt(observed); ok && og < gen {
		return progressing("LatestGenerationNotObserved", "generation %d not observed yet (observed %d)", gen, og)
	}
	for _, c := range o.conditions() {
		switch {
		case c.typ == "InvalidSpec" && c.status == "True":
			return Status{Phase: Failed, Reason: "InvalidSpec", Message: c.message}
		case c.typ == "Progressing" && (c.reason == "RolloutAborted" || c.reason == "ProgressDeadlineExceeded"):
			return Status{Phase: Failed, Reason: c.reason, Message: c.message}
		}
	}
	if paused, _ := o.boolean("spec", "paused"); paused {
		return Status{Phase: NotRolling, Reason: "Paused", Message: "the Rollout is paused"}
	}
	message, _ := o.str("status", "message")
	switch phase, _ := o.str("status", "phase"); phase {
	case "Healthy":
		return Status{Phase: Complete, Message: message}
	case "Degraded":
		return Status{Phase: Failed, Reason: "Degraded", Message: message}
	case "Paused":
		return Status{Phase: Progressing, Reason: "Paused", Message: message}
	case "":
	default:
		return Status{Phase: Progressing, Reason: phase, Message: message}
	}
	want := o.intOr(1, "spec", "replicas")
	updated := o.intOr(0, "status", "updatedReplicas")
	total := o.intOr(0, "status", "replicas")
	available := o.intOr(0, "status", "availableReplicas")
	hash, _ := o.str("status", "currentPodHash")
	switch {
	case updated < want:
		return progressing("LessUpdated", "updated %d/%d", updated, want)
	case available < updated:
		return progressing("LessAvailable", "available %d/%d", available, updated)
	case len(o.list("status", "pauseConditions")) > 0:
		return progressing("Paused", "paused at a step")
	}
	if _, blueGreen := o.get("spec", "strategy", "blueGreen"); blueGreen {
		if active, _ := o.str("status", "blueGreen", "activeSelector"); active != hash {
			return progressing("ActiveServiceCutover", "the active service does not serve the current pods yet")
		}
	} else {
		if total > updated {
			return progressing("OldReplicasPending", "%d old replicas pending termination", total-updated)
		}
		stable, ok := o.str("status", "stableRS")
		if !ok {
			stable, _ = o.str("status", "canary", "stableRS")
		}
		if stable != hash {
			return progressing("StepsPending", "the canary steps have not finished")
		}
	}
	return Status{Phase: Complete, Message: fmt.Sprintf("%d replicas updated and available", want)}
}

// deploymentConfig follows `oc rollout status` for OpenShift
// DeploymentConfigs: a paused one, or one without a ConfigChange trigger (a
// template change then waits for `oc rollout latest`), is not rolling; once
// the latest generation is observed, the Progressing condition's reason
// decides (NewReplicationControllerAvailable: complete;
// ProgressDeadlineExceeded or RolloutCancelled: failed), else the replica
// counts say what is still waited for. OpenShift's controller writes the
// new replication controller's reason in the same status update that
// observes the generation, so a complete reason is never the previous
// rollout's.
func deploymentConfig(o object) Status {
	if paused, _ := o.boolean("spec", "paused"); paused {
		return Status{Phase: NotRolling, Reason: "Paused", Message: "the DeploymentConfig is paused"}
	}
	if !o.hasElement([]string{"spec", "triggers"}, "type", "ConfigChange") {
		return Status{Phase: NotRolling, Reason: "NoConfigChangeTrigger",
			Message: "no ConfigChange trigger: a template change rolls out only by `oc rollout latest`"}
	}
	if s, ok := generationNotObserved(o); ok {
		return s
	}
	c, _ := o.condition("Progressing")
	switch c.reason {
	case "NewReplicationControllerAvailable":
		return Status{Phase: Complete, Message: c.message}
	case "ProgressDeadlineExceeded", "RolloutCancelled":
		return Status{Phase: Failed, Reason: c.reason, Message: c.message}
	case "DeploymentConfigPaused":
		return Status{Phase: NotRolling, Reason: "Paused", Message: c.message}
	}
	return replicasRolled(o, o.intOr(0, "spec", "replicas"),
		progressing("NotReportedAvailable", "version %d not reported available yet", o.intOr(0, "status", "latestVersion")))
}

// generic follows kstatus for kinds it has no rule for: the latest generation
// observed, where status.observedGeneration exists; a Stalled condition
// that is True is a failure and a Reconciling one means progress; then the
// first of the ready condition types the object carries decides (True is
// complete). An object reporting none of them is taken as complete, as
// kstatus does: there is nothing to wait for.
func generic(o object, readyTypes []string) Status {
	gen, _ := o.integer("metadata", "generation")
	if og, ok := o.integer("status", "observedGeneration"); ok && og < gen {
		return progressing("LatestGenerationNotObserved", "generation %d not observed yet (observed %d)", gen, og)
	}
	for _, c := range o.conditions() {
		if c.status != "True" {
			continue
		}
		switch c.typ {
		case "Stalled":
			return Status{Phase: Failed, Reason: cmp.Or(c.reason, "Stalled"), Message: c.message}
		case "Reconciling":
			return Status{Phase: Progressing, Reason: cmp.Or(c.reason, "Reconciling"), Message: c.message}
		}
	}
	for _, typ := range readyTypes {
		c, ok := o.condition(typ)
		if !ok {
			continue
		}
		if c.observedGeneration > 0 && c.observedGeneration < gen {
			return progressing("StaleCondition", "condition %s describes generation %d, not %d", typ, c.observedGeneration, gen)
		}
		if c.status == "True" {
			return Status{Phase: Complete, Reason: cmp.Or(c.reason, typ), Message: c.message}
		}
		return Status{Phase: Progressing, Reason: cmp.Or(c.reason, "Not"+typ), Message: c.message}
	}
	return Status{Phase: Complete, Reason: "NoConditions", Message: "the object reports no condition to wait for"}
}

// generationNotObserved is the check every built-in kind starts with: its
// controller has not acted on the latest spec yet. A missing
// observedGeneration counts as 0, as `kubectl rollout status` reads it.
func generationNotObserved(o object) (Status, bool) {
	gen, _ := o.integer("metadata", "generation")
	og := o.intOr(0, "status", "observedGeneration")
	if og < gen {
		return progressing("LatestGenerationNotObserved", "generation %d not observed yet (observed %d)", gen, og), true
	}
	return Status{}, false
}

func progressing(reason, format string, args ...interface{}) Status {
	return Status{Phase: Progressing, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// object reads fields of an unstructured object without failing: a field of
// the wrong type reads as missing, as a controller that has not written its
// status yet would leave it.
type object map[string]interface{}

func (o object) get(path ...string) (interface{}, bool) {
	v, found, _ := unstructured.NestedFieldNoCopy(o, path...) // the error: a field of the wrong type on the way
	return v, found && v != nil
}

func (o object) str(path ...string) (string, bool) {
	v, _ := o.get(path...)
	s, ok := v.(string)
	return s, ok
}

func (o object) boolean(path ...string) (bool, bool) {
	v, _ := o.get(path...)
	b, ok := v.(bool)
	return b, ok
}

func (o object) integer(path ...string) (int64, bool) {
	v, _ := o.get(path...)
	return asInt(v)
}

func (o object) intOr(def int64, path ...string) int64 {
	if n, ok := o.integer(path...); ok {
		return n
	}
	return def
}

func (o object) list(path ...string) []interface{} {
	v, _ := o.get(path...)
	l, _ := v.([]interface{})
	return l
}

// asInt reads the number types JSON decoders produce, and numeric strings
// (Argo Rollouts writes observedGeneration as one).
func asInt(v interface{}) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case int:
		return int64(n), true
	case int32:
		return int64(n), true
	case float64:
		return int64(n), n == float64(int64(n))
	case string:
		i, err := strconv.ParseInt(n, 10, 64)
		return i, err == nil
	}
	return 0, false
}

type condition struct {
	typ, status, reason, message string
	observedGeneration           int64
}

func (o object) conditions() []condition {
	var out []condition
	for _, item := range o.list("status", "conditions") {
		m, ok := item.(map[string]interface{})
		if !ok {
			continue
		}
		c := object(m)
		var cond condition
		cond.typ, _ = c.str("type")
		cond.status, _ = c.str("status")
		cond.reason, _ = c.str("reason")
		cond.message, _ = c.str("message")
		cond.observedGeneration, _ = c.integer("observedGeneration")
		out = append(out, cond)
	}
	return out
}

// hasElement reports whether the list at path has a map element whose
// field equals value.
func (o object) hasElement(path []string, field, value string) bool {
	for _, item := range o.list(path...) {
		if m, ok := item.(map[string]interface{}); ok {
			if s, _ := object(m).str(field); s == value {
				return true
			}
		}
	}
	return false
}

func (o object) condition(typ string) (condition, bool) {
	for _, c := range o.conditions() {
		if c.typ == typ {
			return c, true
		}
	}
	return condition{}, false
}

// onDeleteOrNotObserved is what StatefulSets and DaemonSets share before
// their own rules: OnDelete rolls nothing by itself, and a generation not
// observed yet is still progressing.
func onDeleteOrNotObserved(o object) (Status, bool) {
	if t, _ := o.str("spec", "updateStrategy", "type"); t == "OnDelete" {
		return Status{Phase: NotRolling, Reason: "OnDelete", Message: "the OnDelete update strategy replaces pods only when they are deleted"}, true
	}
	return generationNotObserved(o)
}
