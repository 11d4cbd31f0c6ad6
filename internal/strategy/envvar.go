package strategy

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/decision"
	"github.com/restart-controller/restart-controller/internal/refs"
)

// envVar sets, in the containers that read each source this restart
// delivers, Reloader's variable for it (config.EnvVarName) to the checksum
// recorded for it: the keyed checksum of the applied-checksums annotation,
// never a digest of the data, so the pod template says nothing about a
// Secret's value that the annotation beside it does not. A deleted source's
// variable is set empty (its record is absent, "").
//
// The cache keeps a reduced workload, so the containers come from obj, the
// whole workload read just before at the resourceVersion decided on; the
// merge patch replaces the containers list whole and names that
// resourceVersion, so the API server refuses it (a conflict: decided again
// on fresh state) if anything changed the containers since. The same patch
// carries the checksums and the rollout record, as for templateAnnotation:
// one write, so a crash never leaves the variables set without their record
// or the other way round.
func (wr Writer) envVar(ctx context.Context, key catalog.WorkloadKey, w decision.Workload, v decision.Verdict, obj *unstructured.Unstructured) error {
	patch := buildPatch(nil, wr.Annotations, w.State, v.Plan, v.At)
	template, ok, _ := unstructured.NestedMap(obj.Object, wr.TemplateFields...)
	if !ok {
		return fmt.Errorf("no pod template at %v", wr.TemplateFields)
	}
	podSpec, _ := template["spec"].(map[string]interface{})
	containers, _ := podSpec["containers"].([]interface{})
	if len(containers) == 0 {
		return fmt.Errorf("setting %s variables: the pod template has no containers", config.EnvVarPrefix)
	}
	vars := EnvVars(wr.Sources, wr.Extractors, podSpec, key.Namespace, delivered(w, v.Plan), v.Plan.Applied)
	updated, changed := setEnvVars(containers, vars)
	leaf := map[string]interface{}{"spec": map[string]interface{}{"containers": updated}}
	if !changed {
		// Every variable holds its value already (set by hand, or a
		// GitOps tool re-applied them): the template would not change
		// and no pod would restart, so the restart timestamp changes it.
		maps.Copy(leaf, timestampLeaf(wr.Annotations, v.At))
	}
	nest(patch, wr.TemplateFields, leaf)
	body, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encoding patch: %w", err)
	}
	return wr.Patch(ctx, key, body)
}

// delivered lists the sources a restart delivers: the changes that caused
// it, and those still in their grace period that ride along (their
// checksums move too), in the order of the workload's references.
func delivered(w decision.Workload, plan decision.Plan) []catalog.SourceID {
	var out []catalog.SourceID
	for _, ref := range w.State.References {
		id := ref.ID.String()
		moved := plan.Applied[id] != w.Applied[id]
		if _, recorded := plan.Applied[id]; recorded && (moved || slices.Contains(plan.Changed, ref.ID)) {
			out = append(out, ref.ID)
		}
	}
	for _, id := range plan.Changed {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// EnvVar is a variable to set in a container (spec.containers[Container]).
type EnvVar struct {
	Container   int
	Name, Value string
}

// EnvVars says which variables an envVar restart sets: for each source, its
// config.EnvVarName in each container that reads it (Readers), holding the
// source's recorded checksum (applied, by the source's ID). A source of a
// kind the config does not know is skipped: it names no variable.
func EnvVars(kinds []config.SourceKind, extractors []*refs.Extractor, podSpec map[string]interface{}, namespace string,
	sources []catalog.SourceID, applied map[string]string) []EnvVar {
	var out []EnvVar
	for _, id := range sources {
		i := slices.IndexFunc(kinds, func(k config.SourceKind) bool { return k.Name == id.Kind })
		if i < 0 {
			continue
		}
		name := config.EnvVarName(kinds[i], id.Namespace, id.Name, namespace)
		for _, c := range Readers(extractors, podSpec, namespace, id) {
			out = append(out, EnvVar{Container: c, Name: name, Value: applied[id.String()]})
		}
	}
	return out
}

// Readers returns the indexes, in spec.containers, of the containers that
// get a source's variable. Reloader's rule (its getContainerUsingResource)
// picks one container; here every container that reads the source gets it,
// and otherwise the first, as in Reloader:
//
//  1. the containers that read it: that mount a volume naming it, or name
//     it themselves (env, envFrom), as the configured references find them
//     in a view of the pod spec holding that container and the volumes it
//     mounts;
//  2. if only init containers read it, the first container (an init
//     container's variable would roll the pods too, but Reloader keeps its
//     variables in the containers proper);
//  3. if no container reads it (a listed source the pod spec does not name,
//     a volume no container mounts, a source of another namespace), the
//     first container: the workload is restarted for it all the same.
//     Reloader restarts nothing there for an auto-reloaded source.
func Readers(extractors []*refs.Extractor, podSpec map[string]interface{}, namespace string, id catalog.SourceID) []int {
	containers, _ := podSpec["containers"].([]interface{})
	if len(containers) == 0 {
		return nil
	}
	var out []int
	if id.Namespace == namespace {
		for i, c := range containers {
			if reads(extractors, containerView(podSpec, "containers", c), id) {
				out = append(out, i)
			}
		}
	}
	if len(out) == 0 {
		out = []int{0}
	}
	return out
}

// containerView is the pod spec as one container sees it: that container,
// under field (containers or initContainers), and the volumes it mounts.
func containerView(podSpec map[string]interface{}, field string, container interface{}) map[string]interface{} {
	view := map[string]interface{}{field: []interface{}{container}}
	c, _ := container.(map[string]interface{})
	mounts, _ := c["volumeMounts"].([]interface{})
	var mounted []string
	for _, m := range mounts {
		if mm, ok := m.(map[string]interface{}); ok {
			if name, ok := mm["name"].(string); ok {
				mounted = append(mounted, name)
			}
		}
	}
	var volumes []interface{}
	all, _ := podSpec["volumes"].([]interface{})
	for _, v := range all {
		if vm, ok := v.(map[string]interface{}); ok {
			if name, ok := vm["name"].(string); ok && slices.Contains(mounted, name) {
				volumes = append(volumes, v)
			}
		}
	}
	if len(volumes) > 0 {
		view["volumes"] = volumes
	}
	return view
}

// reads reports whether the configured references find the source in view.
func reads(extractors []*refs.Extractor, view map[string]interface{}, id catalog.SourceID) bool {
	for _, e := range extractors {
		if e.Source() != id.Kind {
			continue
		}
		for _, r := range e.Extract(view, nil) {
			if r.Name == id.Name {
				return true
			}
		}
	}
	return false
}

// setEnvVars returns a copy of containers with the variables set (appended
// where a container has none of that name, as Reloader appends them; one
// of that name read from elsewhere is replaced), and whether any changed.
// containers belong to the object read, so they are copied, not edited.
func setEnvVars(containers []interface{}, vars []EnvVar) ([]interface{}, bool) {
	out := runtime.DeepCopyJSONValue(containers).([]interface{})
	changed := false
	for _, v := range vars {
		c, ok := out[v.Container].(map[string]interface{})
		if !ok {
			continue
		}
		env, _ := c["env"].([]interface{})
		entry := map[string]interface{}{"name": v.Name, "value": v.Value}
		i := slices.IndexFunc(env, func(e interface{}) bool {
			m, ok := e.(map[string]interface{})
			return ok && m["name"] == v.Name
		})
		switch {
		case i < 0:
			env = append(env, entry)
		case sameValue(env[i], v.Value):
			continue
		default:
			env[i] = entry
		}
		c["env"] = env
		changed = true
	}
	return out, changed
}

// sameValue: the entry holds value, and nothing read from elsewhere. The
// API server drops an empty value, so a missing one is "".
func sameValue(entry interface{}, value string) bool {
	m, _ := entry.(map[string]interface{})
	got, _ := m["value"].(string)
	return m["valueFrom"] == nil && got == value
}
