package watch

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/restart-controller/restart-controller/internal/catalog"
	"github.com/restart-controller/restart-controller/internal/config"
)

// A workload read as protobuf must reduce to exactly the state its JSON
// reduces to: the template hash is persisted on the workload, so a
// difference would re-record (or restart) every workload once after an
// upgrade. Both paths start where the API server does, from the object
// as decoded from storage's protobuf; the JSON path is what the API server
// then encodes and the lean dynamic client decodes.
func TestProtobufWorkloadsReduceAsJSON(t *testing.T) {
	cfg := exampleConfig(t)
	var fromFile appsv1.Deployment
	data, err := os.ReadFile("testdata/deployment-managed-fields.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &fromFile); err != nil {
		t.Fatal(err)
	}
	template := richTemplate()
	objects := []runtime.Object{
		&fromFile,
		&appsv1.StatefulSet{ObjectMeta: optedIn("db"), Spec: appsv1.StatefulSetSpec{Template: template, ServiceName: "db"},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 1, CurrentRevision: "db-1", UpdateRevision: "db-2"}},
		&appsv1.DaemonSet{ObjectMeta: optedIn("agent"), Spec: appsv1.DaemonSetSpec{Template: template},
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 1, DesiredNumberScheduled: 3, UpdatedNumberScheduled: 3, NumberAvailable: 2}},
		&batchv1.CronJob{ObjectMeta: optedIn("nightly"), Spec: batchv1.CronJobSpec{Schedule: "0 3 * * *",
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: template}}}},
	}
	for _, obj := range objects {
		gvks, _, err := scheme.Scheme.ObjectKinds(obj)
		if err != nil {
			t.Fatal(err)
		}
		gvk := gvks[0]
		t.Run(gvk.Kind, func(t *testing.T) {
			kind := workloadKindOf(t, cfg, gvk)
			stored := throughProtobuf(t, obj, gvk)
			stored.GetObjectKind().SetGroupVersionKind(gvk) // as the API server encodes it
			body, err := json.Marshal(stored)
			if err != nil {
				t.Fatal(err)
			}
			decoded, _, err := unstructured.UnstructuredJSONScheme.Decode(cutManagedFields(body), nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			fromJSON, err := catalog.ReduceWorkload(kind, cfg)(decoded)
			if err != nil {
				t.Fatal(err)
			}
			fromProtobuf, err := asUnstructured(stored, gvk, catalog.ReduceWorkload(kind, cfg))(throughProtobuf(t, obj, gvk))
			if err != nil {
				t.Fatal(err)
			}
			j, p := fromJSON.(*catalog.WorkloadState), fromProtobuf.(*catalog.WorkloadState)
			if p.TemplateHash == "" || !p.OptedIn {
				t.Fatalf("the protobuf path reduced to no template or no opt-in: %+v", p)
			}
			if !reflect.DeepEqual(j, p) {
				t.Fatalf("reduced differently:\n JSON     %+v\n protobuf %+v", j, p)
			}
		})
	}

	// A state the informer already holds passes through unchanged.
	state := &catalog.WorkloadState{}
	if out, err := asUnstructured(&appsv1.Deployment{}, appsv1.SchemeGroupVersion.WithKind("Deployment"),
		catalog.ReduceWorkload(workloadKindOf(t, cfg, appsv1.SchemeGroupVersion.WithKind("Deployment")), cfg))(state); err != nil || out != state {
		t.Fatalf("a reduced state came out as %v, %v", out, err)
	}
}

// throughProtobuf encodes obj as the API server stores it and decodes a
// fresh copy, as the informer's protobuf client does.
func throughProtobuf(t *testing.T, obj runtime.Object, gvk schema.GroupVersionKind) runtime.Object {
	t.Helper()
	info := protobufInfo()
	body, err := runtime.Encode(scheme.Codecs.EncoderForVersion(info.Serializer, gvk.GroupVersion()), obj)
	if err != nil {
		t.Fatal(err)
	}
	out, err := scheme.Scheme.New(gvk)
	if err != nil {
		t.Fatal(err)
	}
	// The client's decoder, which clears the kind of a typed object.
	decoder := scheme.Codecs.WithoutConversion().DecoderToVersion(info.Serializer, gvk.GroupVersion())
	if _, _, err := decoder.Decode(body, nil, out); err != nil {
		t.Fatal(err)
	}
	return out
}

func workloadKindOf(t *testing.T, cfg *config.Config, gvk schema.GroupVersionKind) config.WorkloadKind {
	t.Helper()
	for _, k := range cfg.Workloads {
		if k.GVR.GroupVersion() == gvk.GroupVersion() && k.GVR.Resource == map[string]string{
			"Deployment": "deployments", "StatefulSet": "statefulsets", "DaemonSet": "daemonsets", "CronJob": "cronjobs"}[gvk.Kind] {
			return k
		}
	}
	t.Fatalf("examples/config.yaml has no kind for %s", gvk)
	return config.WorkloadKind{}
}

func optedIn(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: "shop", UID: types.UID("uid-" + name), ResourceVersion: "7", Generation: 3,
		Annotations: map[string]string{"com.xing.deployment-restart": "enabled"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply,
			APIVersion: "apps/v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{}}`)}}}}
}

// richTemplate reads sources every way a pod can, with the fields whose
// encodings differ most between Go values and JSON: quantities, int-or-
// strings, empty and nil lists, booleans and timestamps.
func richTemplate() corev1.PodTemplateSpec {
	yes, mode := true, int32(0o440)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"},
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-29T00:00:00Z"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "app:1", Args: []string{},
				Env: []corev1.EnvVar{
					{Name: "A", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, Key: "a", Optional: &yes}}},
					{Name: "B", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
						LocalObjectReference: corev1.LocalObjectReference{Name: "app-secret"}, Key: "b"}}},
					{Name: "C", Value: ""},
				},
				EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "env"}}}},
				Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
					corev1.ResourceCPU: apiresource.MustParse("1500m"), corev1.ResourceMemory: apiresource.MustParse("1Gi")}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/", Port: intstr.FromString("http")}},
					PeriodSeconds: 5},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			}},
			Volumes: []corev1.Volume{
				{Name: "files", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "files"}, DefaultMode: &mode,
					Items: []corev1.KeyToPath{{Key: "f", Path: "f.txt"}}}}},
				{Name: "both", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "tls"}}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}}}}}},
			},
			Tolerations:                   []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			TerminationGracePeriodSeconds: new(int64(30)),
		},
	}
}
