package catalog

import (
	"fmt"

	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

// reduceStrategy keeps what decisions need of the workload's restart
// strategy: which of its kind's strategies its annotation picks, and for a
// timestampAt strategy the time at its field. Where the strategy names a
// done field, a restart the workload's controller has not finished yet (the
// done field differs from the time written) is still progressing, whatever
// the kind's rule says: an Argo Rollout stays healthy while its restart
// replaces the pods one by one.
func reduceStrategy(state *WorkloadState, kind config.WorkloadKind, cfg *config.Config, annotations map[string]string, obj map[string]interface{}) {
	value := annotations[cfg.Annotations.RestartStrategy]
	if _, ok := kind.Restart.ByAnnotation[value]; ok {
		if state.Picks == nil {
			state.Picks = &Picks{}
		}
		state.Picks.Strategy = value
	}
	s := kind.Restart.StrategyOf(state.Picked().Strategy)
	if s.Name != config.TimestampAt {
		return
	}
	mark, _ := s.Field.Value(obj)
	state.RestartMark, _ = mark.(string)
	if state.RestartMark == "" || s.DoneField.String() == "" || state.Rollout.Phase == rollout.NotRolling || state.Rollout.Phase == rollout.Failed {
		return
	}
	if done, _ := s.DoneField.Value(obj); done != state.RestartMark {
		state.Rollout = rollout.Status{Phase: rollout.Progressing, Reason: "RestartInProgress",
			Message: fmt.Sprintf("%s is not %s yet", s.DoneField, state.RestartMark)}
	}
}
