package rollout

import "testing"

// A Job's rollout is the Job itself: Complete and Failed conditions decide.
func TestJobRule(t *testing.T) {
	cond := func(typ, status string) map[string]interface{} {
		return map[string]interface{}{"type": typ, "status": status, "reason": typ + "Reason"}
	}
	job := func(spec map[string]interface{}, conds ...map[string]interface{}) map[string]interface{} {
		list := make([]interface{}, len(conds))
		for i, c := range conds {
			list[i] = c
		}
		return map[string]interface{}{"spec": spec, "status": map[string]interface{}{"conditions": list}}
	}
	for _, tc := range []struct {
		name string
		obj  map[string]interface{}
		want Phase
	}{
		{"running", job(nil), Progressing},
		{"complete", job(nil, cond("Complete", "True")), Complete},
		{"failed", job(nil, cond("Failed", "True")), Failed},
		{"failed wins over a stale complete", job(nil, cond("Complete", "True"), cond("Failed", "True")), Failed},
		{"condition not true yet", job(nil, cond("Complete", "False")), Progressing},
		{"suspended", job(map[string]interface{}{"suspend": true}), NotRolling},
	} {
		if got := (Rule{Kind: KindJob}).Evaluate(tc.obj); got.Phase != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
