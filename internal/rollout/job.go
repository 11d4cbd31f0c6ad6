package rollout

import "cmp"

// job reads a Job as `kubectl wait --for=condition=complete` does: the
// Complete condition True is done, Failed True has failed (its backoff
// limit or active deadline reached), anything else still runs. A Job
// suspended (spec.suspend) runs nothing until resumed.
func job(o object) Status {
	if c, ok := o.condition("Failed"); ok && c.status == "True" {
		return Status{Phase: Failed, Reason: cmp.Or(c.reason, "Failed"), Message: c.message}
	}
	if c, ok := o.condition("Complete"); ok && c.status == "True" {
		return Status{Phase: Complete, Reason: cmp.Or(c.reason, "Complete"), Message: c.message}
	}
	if suspended, _ := o.boolean("spec", "suspend"); suspended {
		return Status{Phase: NotRolling, Reason: "Suspended", Message: "the Job is suspended"}
	}
	return progressing("Running", "the Job has not completed yet")
}
