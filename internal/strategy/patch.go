package strategy

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/record"
)

// BuildPatch returns the one merge patch that carries a plan: the applied
// checksums and template hash in the workload's annotations and, for a
// restart, a new timestamp in the pod template's annotations.
//
// The patch names the cached resourceVersion, so the API server rejects it
// with a conflict when the cache is behind; the retry then decides again on
// fresh state instead of restarting twice on a stale view.
func BuildPatch(templateFields []string, annotations config.Annotations, w *catalog.WorkloadState, plan decision.Plan, now time.Time) ([]byte, error) {
	body, err := json.Marshal(buildPatch(templateFields, annotations, w, plan, now))
	if err != nil {
		return nil, fmt.Errorf("encoding patch: %w", err)
	}
	return body, nil
}

// buildPatch is BuildPatch's patch before it is encoded, for the strategies
// that add to it (envVar).
func buildPatch(templateFields []string, annotations config.Annotations, w *catalog.WorkloadState, plan decision.Plan, now time.Time) map[string]interface{} {
	patch := map[string]interface{}{
		"metadata": map[string]interface{}{
			"resourceVersion": w.ResourceVersion,
			"annotations":     recordAnnotations(annotations, w, plan),
		},
	}
	// runNow, recreate and envVar restart by other writes (strategy.go):
	// this patch records what they delivered.
	switch {
	case plan.Restart && plan.Strategy.Name == config.TimestampAt:
		fields, _ := plan.Strategy.Field.Fields()
		nest(patch, fields[:len(fields)-1], map[string]interface{}{fields[len(fields)-1]: Time(now, w.RestartMark)})
	case plan.Restart && !OtherWrites(plan):
		nest(patch, templateFields, timestampLeaf(annotations, now))
	}
	return patch
}

// recordAnnotations are the workload annotations a plan records: the
// applied checksums, the template record and the plan's Extra (nil removes
// one).
func recordAnnotations(annotations config.Annotations, w *catalog.WorkloadState, plan decision.Plan) map[string]interface{} {
	ann := map[string]interface{}{
		annotations.AppliedChecksums:    record.EncodeApplied(plan.Applied),
		annotations.AppliedTemplateHash: templateRecordOf(w, plan),
	}
	maps.Copy(ann, plan.Extra)
	return ann
}

// timestampLeaf is the pod template's restart timestamp, below the template.
// RFC 3339 with nanoseconds: two restarts within one second must still
// change the template, or the second would roll nothing.
func timestampLeaf(annotations config.Annotations, now time.Time) map[string]interface{} {
	return map[string]interface{}{
		"metadata": map[string]interface{}{
			"annotations": map[string]interface{}{
				annotations.RestartTimestamp: now.UTC().Format(time.RFC3339Nano),
			},
		},
	}
}

// templateRecordOf is the plan's template record; a plan built by hand
// without one records the bare template hash.
func templateRecordOf(w *catalog.WorkloadState, plan decision.Plan) string {
	if plan.TemplateRecord != "" {
		return plan.TemplateRecord
	}
	return w.TemplateHash
}

// nest places leaf at the path of fields below root, merging with maps
// already there.
func nest(root map[string]interface{}, fields []string, leaf map[string]interface{}) {
	node := root
	for _, f := range fields {
		next, ok := node[f].(map[string]interface{})
		if !ok {
			next = map[string]interface{}{}
			node[f] = next
		}
		node = next
	}
	maps.Copy(node, leaf)
}
