package restart

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
	"github.com/restart-controller/restart-controller/internal/record"
	"github.com/restart-controller/restart-controller/internal/rollout"
)

var (
	rolloutsGVR = schema.GroupVersionResource{Group: "argoproj.io", Version: "v1alpha1", Resource: "rollouts"}
	jobsGVR     = schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
)

const canaryRollout = `
apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: canary
  namespace: shop
  uid: uid-canary
  resourceVersion: "11"
  annotations: {com.xing.deployment-restart: enabled, com.xing.deployment-restart.strategy: restart}
spec:
  restartAt: "2030-01-02T03:04:05Z"
  template:
    metadata: {labels: {app: canary}}
    spec:
      containers:
      - {name: app, image: shop/canary:1, envFrom: [{configMapRef: {name: app}}]}
status:
  restartedAt: "2030-01-02T03:04:05Z"
`

const reportCronJob = `
apiVersion: batch/v1
kind: CronJob
metadata:
  name: report
  namespace: shop
  uid: uid-report
  resourceVersion: "21"
  annotations: {com.xing.deployment-restart: enabled}
spec:
  schedule: "0 3 * * *"
  jobTemplate:
    metadata:
      labels: {team: books}
      annotations: {note: kept}
    spec:
      backoffLimit: 2
      template:
        spec:
          restartPolicy: Never
          containers:
          - {name: job, image: shop/report:1, envFrom: [{configMapRef: {name: app}}]}
`

const migrateJob = `
apiVersion: batch/v1
kind: Job
metadata:
  name: migrate
  namespace: shop
  uid: uid-migrate
  resourceVersion: "31"
  creationTimestamp: "2030-01-01T00:00:00Z"
  generation: 1
  annotations: {com.xing.deployment-restart: enabled}
  labels: {app: migrate}
spec:
  selector: {matchLabels: {batch.kubernetes.io/controller-uid: uid-migrate}}
  template:
    metadata:
      labels: {app: migrate, batch.kubernetes.io/controller-uid: uid-migrate, batch.kubernetes.io/job-name: migrate}
    spec:
      restartPolicy: Never
      containers:
      - {name: job, image: shop/migrate:1, envFrom: [{configMapRef: {name: app}}]}
status:
  succeeded: 1
`

// strategyHarness is a controller configured as examples/config.yaml, with
// Jobs opted in to recreate, over a fake API server holding objs (and the
// cache holding them too).
type strategyHarness struct {
	*harness
	kinds map[string]schema.GroupVersionResource
}

func newStrategyHarness(t *testing.T, data map[string]string, objs ...*unstructured.Unstructured) *strategyHarness {
	t.Helper()
	return newStrategyHarnessWith(t, nil, data, objs...)
}

// newStrategyHarnessWith is newStrategyHarness with the config changed by
// change before the controller is built.
func newStrategyHarnessWith(t *testing.T, change func(*config.Config), data map[string]string, objs ...*unstructured.Unstructured) *strategyHarness {
	t.Helper()
	cfg := exampleConfig(t)
	extra, err := config.Parse([]byte(`
workloads:
- {group: batch, version: v1, resource: jobs, podTemplatePath: spec.template, rollout: {status: job},
   restart: {strategy: recreate, clearFields: [spec.selector],
             clearTemplateLabels: [controller-uid, batch.kubernetes.io/controller-uid, job-name, batch.kubernetes.io/job-name]}}`))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Workloads = append(cfg.Workloads, extra.Workloads...)
	if change != nil {
		change(cfg)
	}
	h := &harness{t: t, cfg: cfg, sources: cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{}),
		workloads: map[schema.GroupVersionResource]cache.Indexer{}, inAPIOnly: map[catalog.SourceID]bool{}}
	cat := catalog.New()
	cat.AddSourceStore("configmap", h.sources)
	for _, w := range cfg.Workloads {
		store := cat.IndexedStore(w.GVR, cache.NewIndexer(cache.MetaNamespaceKeyFunc, catalog.WorkloadIndexers()))
		h.workloads[w.GVR] = store
		cat.AddWorkloadStore(w.GVR, store)
	}
	h.setSource(data)
	s := &strategyHarness{harness: h, kinds: map[string]schema.GroupVersionResource{
		"Rollout": rolloutsGVR, "CronJob": cronjobsGVR, "Job": jobsGVR, "Deployment": deploymentsGVR}}
	in := make([]runtime.Object, len(objs))
	for i, u := range objs {
		in[i] = u.DeepCopy()
	}
	h.client = fake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		rolloutsGVR: "RolloutList", cronjobsGVR: "CronJobList", jobsGVR: "JobList", deploymentsGVR: "DeploymentList"}, in...)
	h.c = newController(t, cfg, cat, h.client, h.exists)
	for _, u := range objs {
		s.cache(u)
	}
	return s
}

func (s *strategyHarness) reduce(u *unstructured.Unstructured) *catalog.WorkloadState {
	s.t.Helper()
	out, err := catalog.ReduceWorkload(s.kindOf(s.kinds[u.GetKind()]), s.cfg)(u.DeepCopy())
	if err != nil {
		s.t.Fatal(err)
	}
	return out.(*catalog.WorkloadState)
}

func (s *strategyHarness) cache(u *unstructured.Unstructured) {
	s.t.Helper()
	if err := s.workloads[s.kinds[u.GetKind()]].Update(s.reduce(u)); err != nil {
		s.t.Fatal(err)
	}
}

// settled is u as recorded when its pods started on data.
func (s *strategyHarness) settled(u *unstructured.Unstructured, data map[string]string) *unstructured.Unstructured {
	s.t.Helper()
	out := u.DeepCopy()
	w := s.reduce(out)
	ann := out.GetAnnotations()
	ann[appliedKey] = annotation(s.t, map[string]string{cmApp.String(): sourceState(s.t, cmApp, data).Checksum(testSums, nil)})
	ann[templateHashKey] = w.TemplateHash
	out.SetAnnotations(ann)
	return out
}

func (s *strategyHarness) get(gvr schema.GroupVersionResource, name string) *unstructured.Unstructured {
	s.t.Helper()
	u, err := s.client.Resource(gvr).Namespace("shop").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return u
}

func (s *strategyHarness) reconcile(gvr schema.GroupVersionResource, name string) error {
	return s.c.Reconcile(context.Background(), catalog.WorkloadKey{Resource: gvr, Namespace: "shop", Name: name})
}

func (s *strategyHarness) jobs() []unstructured.Unstructured {
	s.t.Helper()
	list, err := s.client.Resource(jobsGVR).Namespace("shop").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		s.t.Fatal(err)
	}
	return list.Items
}

// TestTimestampAtPatch: a Rollout whose annotation picks "restart" gets
// spec.restartAt, in seconds and after the one there, in the one patch that
// records the checksums; its template is not touched.
func TestTimestampAtPatch(t *testing.T) {
	s := newStrategyHarness(t, dataV2)
	u := s.settled(fromYAML(t, canaryRollout), dataV1)
	s = newStrategyHarness(t, dataV2, u)
	if err := s.reconcile(rolloutsGVR, "canary"); err != nil {
		t.Fatal(err)
	}
	patches := s.patches()
	if len(patches) != 1 {
		t.Fatalf("%d patches, want 1", len(patches))
	}
	w := s.reduce(u)
	applied := annotation(t, map[string]string{cmApp.String(): sourceState(t, cmApp, dataV2).Checksum(testSums, nil)})
	// reconcileNow is 03:04:05.000000006, the second already at spec.restartAt:
	// the next second, or Argo Rollouts would restart nothing.
	want := `{"metadata":{"annotations":{"` + appliedKey + `":"` + strings.ReplaceAll(applied, `"`, `\"`) + `",` +
		`"` + templateHashKey + `":"` + w.TemplateHash + `"},"resourceVersion":"11"},"spec":{"restartAt":"2030-01-02T03:04:06Z"}}`
	var body map[string]interface{}
	if err := json.Unmarshal(patches[0].GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	delete(body["metadata"].(map[string]interface{})["annotations"].(map[string]interface{}), rolloutKey)
	if got := jsonOf(t, body); got != want {
		t.Errorf("patch\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(string(patches[0].GetPatch()), rolloutKey) {
		t.Error("the restart carries no rollout record")
	}
	patched := s.get(rolloutsGVR, "canary")
	if !reflect.DeepEqual(patched.Object["spec"].(map[string]interface{})["template"], u.Object["spec"].(map[string]interface{})["template"]) {
		t.Error("the pod template changed")
	}
	// Until status.restartedAt reaches spec.restartAt, the rollout is under way.
	if st := s.reduce(patched).Rollout; st.Reason != "RestartInProgress" {
		t.Errorf("after the patch: %s, want the restart in progress", st)
	}
}

// TestRunNowCreatesOneJobPerChange: a CronJob's change starts the Job
// `kubectl create job --from=cronjob/report` would, named after the change,
// then records it. A crash between the two writes (here: the record's
// patch fails) leaves one Job: the retry finds it and records.
func TestRunNowCreatesOneJobPerChange(t *testing.T) {
	s := newStrategyHarness(t, dataV2)
	u := s.settled(fromYAML(t, reportCronJob), dataV1)
	s = newStrategyHarness(t, dataV2, u)
	failed := false
	s.client.PrependReactor("patch", "cronjobs", func(k8stesting.Action) (bool, runtime.Object, error) {
		if !failed {
			failed = true
			return true, nil, apierrors.NewInternalError(errors.New("the controller dies here"))
		}
		return false, nil, nil
	})
	if err := s.reconcile(cronjobsGVR, "report"); err == nil {
		t.Fatal("the failed record is no error")
	}
	jobs := s.jobs()
	if len(jobs) != 1 {
		t.Fatalf("%d Jobs, want 1", len(jobs))
	}
	name := jobs[0].GetName()
	if !strings.HasPrefix(name, "report-") || len(name) != len("report-")+10 {
		t.Errorf("Job name %q", name)
	}
	yes := true
	want := map[string]interface{}{
		"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]interface{}{
			"name": name, "namespace": "shop",
			"labels":      map[string]interface{}{"team": "books"},
			"annotations": map[string]interface{}{"note": "kept", "cronjob.kubernetes.io/instantiate": "manual"},
			"ownerReferences": []interface{}{map[string]interface{}{"apiVersion": "batch/v1", "kind": "CronJob", "name": "report",
				"uid": "uid-report", "controller": yes, "blockOwnerDeletion": yes}},
		},
		"spec": u.Object["spec"].(map[string]interface{})["jobTemplate"].(map[string]interface{})["spec"],
	}
	got := jobs[0].DeepCopy().Object
	delete(got["metadata"].(map[string]interface{}), "creationTimestamp")
	if !reflect.DeepEqual(jsonOf(t, got), jsonOf(t, want)) {
		t.Errorf("Job\n got %s\nwant %s", jsonOf(t, got), jsonOf(t, want))
	}

	// The retry: the same Job, found; recorded with the checksums.
	if err := s.reconcile(cronjobsGVR, "report"); err != nil {
		t.Fatal(err)
	}
	if n := len(s.jobs()); n != 1 {
		t.Fatalf("%d Jobs after the retry, want 1", n)
	}
	recorded := s.get(cronjobsGVR, "report")
	rec, err := record.ParseLastRestart(recorded.GetAnnotations()[rolloutKey])
	if err != nil || rec == nil || rec.Job != name {
		t.Fatalf("record %+v (%v), want one naming %s", rec, err, name)
	}
	if tmpl := recorded.Object["spec"].(map[string]interface{})["jobTemplate"]; !reflect.DeepEqual(tmpl, u.Object["spec"].(map[string]interface{})["jobTemplate"]) {
		t.Error("the Job template changed")
	}

	// Recorded: nothing more, even with the Job still running.
	s.cache(recorded)
	if err := s.reconcile(cronjobsGVR, "report"); err != nil {
		t.Fatal(err)
	}
	if n := len(s.jobs()); n != 1 {
		t.Fatalf("%d Jobs without a change, want 1", n)
	}

	// The Job completes: so does the rollout.
	job := s.get(jobsGVR, name)
	_ = unstructured.SetNestedSlice(job.Object, []interface{}{map[string]interface{}{"type": "Complete", "status": "True"}}, "status", "conditions")
	if _, err := s.client.Resource(jobsGVR).Namespace("shop").Update(context.Background(), job, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.reconcile(cronjobsGVR, "report"); err != nil {
		t.Fatal(err)
	}
	if rec := s.get(cronjobsGVR, "report").GetAnnotations()[rolloutKey]; !strings.Contains(rec, `"result":"complete"`) {
		t.Errorf("record after the Job completed: %s", rec)
	}

	// The next change: another Job.
	s.cache(s.get(cronjobsGVR, "report"))
	s.setSource(map[string]string{"a": "3"})
	if err := s.reconcile(cronjobsGVR, "report"); err != nil {
		t.Fatal(err)
	}
	if jobs := s.jobs(); len(jobs) != 2 || jobs[0].GetName() == jobs[1].GetName() {
		t.Fatalf("after a second change: %d Jobs", len(jobs))
	}
}

func jsonOf(t *testing.T, v interface{}) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestRecreate: a Job opted in to recreate is deleted, only as decided on,
// and created again without what the API server derived from the old one,
// the record of the restart on it.
func TestRecreate(t *testing.T) {
	s := newStrategyHarness(t, dataV2)
	u := s.settled(fromYAML(t, migrateJob), dataV1)
	s = newStrategyHarness(t, dataV2, u)
	if err := s.reconcile(jobsGVR, "migrate"); err != nil {
		t.Fatal(err)
	}
	var verbs []string
	for _, a := range s.client.Actions() {
		if a.GetResource() == jobsGVR {
			verbs = append(verbs, a.GetVerb())
			if d, ok := a.(k8stesting.DeleteAction); ok {
				pre := d.GetDeleteOptions().Preconditions
				if pre == nil || *pre.UID != "uid-migrate" || *pre.ResourceVersion != "31" {
					t.Errorf("delete without the decided object's preconditions: %+v", pre)
				}
			}
		}
	}
	if want := []string{"get", "delete", "create"}; !reflect.DeepEqual(verbs, want) {
		t.Fatalf("calls %v, want %v", verbs, want)
	}
	got := s.get(jobsGVR, "migrate")
	ann := got.GetAnnotations()
	applied := annotation(t, map[string]string{cmApp.String(): sourceState(t, cmApp, dataV2).Checksum(testSums, nil)})
	if ann[appliedKey] != applied || ann[optInKey] != "enabled" || !strings.Contains(ann[rolloutKey], `"at"`) {
		t.Errorf("annotations %v", ann)
	}
	if ann[templateHashKey] != s.reduce(u).TemplateHash {
		t.Errorf("template record %q: the new object's is the bare hash", ann[templateHashKey])
	}
	want := map[string]interface{}{"apiVersion": "batch/v1", "kind": "Job",
		"metadata": map[string]interface{}{"name": "migrate", "namespace": "shop", "labels": map[string]interface{}{"app": "migrate"}},
		"spec": map[string]interface{}{"template": map[string]interface{}{
			"metadata": map[string]interface{}{"labels": map[string]interface{}{"app": "migrate"}},
			"spec":     u.Object["spec"].(map[string]interface{})["template"].(map[string]interface{})["spec"]}}}
	got = got.DeepCopy()
	delete(got.Object["metadata"].(map[string]interface{}), "annotations")
	if jsonOf(t, got.Object) != jsonOf(t, want) {
		t.Errorf("created\n got %s\nwant %s", jsonOf(t, got.Object), jsonOf(t, want))
	}
}

// A runNow Job still running at its deadline is judged failed, and then
// read until it ends: when it completes after all, its record recovers
// (the changes it halted go on); when it fails, the record stands.
func TestRunNowJobRecoversAfterDeadline(t *testing.T) {
	for _, tt := range []struct {
		end        string
		wantResult string
		wantReason string
	}{
		{"Complete", "complete", "Recovered"},
		{"Failed", "failed", rollout.ReasonDeadlineExceeded},
	} {
		t.Run(tt.end, func(t *testing.T) {
			s := newStrategyHarness(t, dataV2)
			s = newStrategyHarness(t, dataV2, s.settled(fromYAML(t, reportCronJob), dataV1))
			if err := s.reconcile(cronjobsGVR, "report"); err != nil {
				t.Fatal(err)
			}
			record := func() *record.LastRestart {
				t.Helper()
				rec, err := record.ParseLastRestart(s.get(cronjobsGVR, "report").GetAnnotations()[rolloutKey])
				if err != nil || rec == nil {
					t.Fatalf("record %+v (%v)", rec, err)
				}
				return rec
			}
			// Past the deadline with the Job running: failed.
			s.cache(s.get(cronjobsGVR, "report"))
			s.c.Clock = func() time.Time { return reconcileNow.Add(rollout.DefaultDeadline + time.Minute) }
			if err := s.reconcile(cronjobsGVR, "report"); err != nil {
				t.Fatal(err)
			}
			if rec := record(); rec.Result != "failed" || rec.Reason != rollout.ReasonDeadlineExceeded {
				t.Fatalf("record past the deadline %+v, want failed by the deadline", rec)
			}
			// Still running: nothing written.
			s.cache(s.get(cronjobsGVR, "report"))
			rv := s.get(cronjobsGVR, "report").GetResourceVersion()
			if err := s.reconcile(cronjobsGVR, "report"); err != nil {
				t.Fatal(err)
			}
			if got := s.get(cronjobsGVR, "report").GetResourceVersion(); got != rv {
				t.Fatalf("wrote (resourceVersion %s to %s) while the Job runs", rv, got)
			}
			// The Job ends.
			job := s.get(jobsGVR, record().Job)
			_ = unstructured.SetNestedSlice(job.Object, []interface{}{map[string]interface{}{"type": tt.end, "status": "True"}}, "status", "conditions")
			if _, err := s.client.Resource(jobsGVR).Namespace("shop").Update(context.Background(), job, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := s.reconcile(cronjobsGVR, "report"); err != nil {
				t.Fatal(err)
			}
			if rec := record(); string(rec.Result) != tt.wantResult || rec.Reason != tt.wantReason {
				t.Errorf("record once the Job is %s: %+v, want %s (%s)", tt.end, rec, tt.wantResult, tt.wantReason)
			}
		})
	}
}

const envVarDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  uid: uid-web
  resourceVersion: "41"
  annotations: {com.xing.deployment-restart: enabled, com.xing.deployment-restart.strategy: env-vars}
spec:
  replicas: 2
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: shop/web:1, env: [{name: LEVEL, value: debug}], envFrom: [{configMapRef: {name: app}}]}
      - {name: proxy, image: shop/proxy:1}
`

// envVarHarness restarts Deployments whose strategy annotation says
// env-vars by the envVar strategy.
func envVarHarness(t *testing.T, data map[string]string, objs ...*unstructured.Unstructured) *strategyHarness {
	t.Helper()
	return newStrategyHarnessWith(t, func(cfg *config.Config) {
		alt, err := config.Parse([]byte(`
workloads:
- {group: apps, version: v1, resource: deployments, podTemplatePath: spec.template,
   restart: {byAnnotation: [{value: env-vars, strategy: envVar}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		for i := range cfg.Workloads {
			if cfg.Workloads[i].GVR == deploymentsGVR {
				cfg.Workloads[i].Restart = alt.Workloads[0].Restart
			}
		}
	}, data, objs...)
}

// TestEnvVarPatch: a Deployment whose annotation picks envVar gets Reloader's
// variable, holding the keyed checksum recorded for the ConfigMap, in the
// container that reads it and in no other, in the one patch that records
// the checksums, on the resourceVersion it was decided on. The variable is
// no template change for the next decision, which restarts nothing more.
func TestEnvVarPatch(t *testing.T) {
	s := newStrategyHarness(t, dataV2)
	u := s.settled(fromYAML(t, envVarDeployment), dataV1)
	s = envVarHarness(t, dataV2, u)
	if err := s.reconcile(deploymentsGVR, "web"); err != nil {
		t.Fatal(err)
	}
	patches := s.patches()
	if len(patches) != 1 {
		t.Fatalf("%d patches, want 1", len(patches))
	}
	if got := patches[0].GetPatchType(); got != types.MergePatchType {
		t.Errorf("patch type %s", got)
	}
	sum := sourceState(t, cmApp, dataV2).Checksum(testSums, nil)
	if !strings.HasPrefix(sum, "v3.") {
		t.Fatalf("checksum %q is not keyed", sum)
	}
	applied := annotation(t, map[string]string{cmApp.String(): sum})
	w := s.reduce(u)
	want := `{"metadata":{"annotations":{"` + appliedKey + `":"` + strings.ReplaceAll(applied, `"`, `\"`) + `",` +
		`"` + templateHashKey + `":"` + w.TemplateHash + `"},"resourceVersion":"41"},` +
		`"spec":{"template":{"spec":{"containers":[` +
		`{"env":[{"name":"LEVEL","value":"debug"},{"name":"STAKATER_APP_CONFIGMAP","value":"` + sum + `"}],` +
		`"envFrom":[{"configMapRef":{"name":"app"}}],"image":"shop/web:1","name":"web"},` +
		`{"image":"shop/proxy:1","name":"proxy"}]}}}}`
	var body map[string]interface{}
	if err := json.Unmarshal(patches[0].GetPatch(), &body); err != nil {
		t.Fatal(err)
	}
	delete(body["metadata"].(map[string]interface{})["annotations"].(map[string]interface{}), rolloutKey)
	if got := jsonOf(t, body); got != want {
		t.Errorf("patch\n got %s\nwant %s", got, want)
	}
	if !strings.Contains(string(patches[0].GetPatch()), rolloutKey) {
		t.Error("the restart carries no rollout record")
	}
	var gets []string
	for _, a := range s.client.Actions() {
		if a.GetVerb() == "get" {
			gets = append(gets, a.GetResource().Resource)
		}
	}
	if !reflect.DeepEqual(gets, []string{"deployments"}) {
		t.Errorf("reads %v: the strategy reads the whole workload once", gets)
	}

	patched := s.get(deploymentsGVR, "web")
	if got := s.reduce(patched).TemplateHash; got != w.TemplateHash {
		t.Errorf("template hash %s after the restart, %s before: the variable counts as a template change", got, w.TemplateHash)
	}
	if _, found, _ := unstructured.NestedString(patched.Object, "spec", "template", "metadata", "annotations", timestampKey); found {
		t.Error("the restart timestamp was written too")
	}
	s.cache(patched)
	if err := s.reconcile(deploymentsGVR, "web"); err != nil {
		t.Fatal(err)
	}
	if n := len(s.patches()); n != 1 {
		t.Errorf("%d patches after the restart's own write came back, want 1", n)
	}
}

// TestEnvVarCacheBehind: decided on a cached workload older than the API
// server's, the envVar restart writes nothing: a conflict, decided again on
// fresh state.
func TestEnvVarCacheBehind(t *testing.T) {
	s := newStrategyHarness(t, dataV2)
	u := s.settled(fromYAML(t, envVarDeployment), dataV1)
	s = envVarHarness(t, dataV2, u)
	stale := u.DeepCopy()
	stale.SetResourceVersion("40")
	s.cache(stale)
	err := s.reconcile(deploymentsGVR, "web")
	if !apierrors.IsConflict(err) {
		t.Fatalf("reconcile: %v, want a conflict", err)
	}
	if n := len(s.patches()); n != 0 {
		t.Errorf("%d patches on a stale decision", n)
	}
}
