package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// holdingWebhook is a validating admission webhook that holds, inside the
// API server, every update of a Deployment that changes the restart
// timestamp of its pod template, until released; dry-run probes pass at once.
type holdingWebhook struct {
	srv       *httptest.Server
	caPEM     []byte
	timestamp string
	arrived   chan struct{} // closed when a restart is held
	release   chan struct{} // closed to let it through
	probed    chan struct{} // closed when a dry-run probe came through
	once      sync.Once
	probeOnce sync.Once
}

func startHoldingWebhook(t *testing.T, timestampKey string) *holdingWebhook {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	w := &holdingWebhook{timestamp: timestampKey, arrived: make(chan struct{}), release: make(chan struct{}), probed: make(chan struct{}),
		caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	w.srv = httptest.NewUnstartedServer(http.HandlerFunc(w.serve))
	w.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}}
	w.srv.StartTLS()
	t.Cleanup(func() {
		w.letGo()
		w.srv.Close()
	})
	return w
}

func (w *holdingWebhook) letGo() {
	select {
	case <-w.release:
	default:
		close(w.release)
	}
}

func (w *holdingWebhook) serve(rw http.ResponseWriter, r *http.Request) {
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
		http.Error(rw, "not an AdmissionReview", http.StatusBadRequest)
		return
	}
	req := review.Request
	stamp := func(raw []byte) string {
		u := &unstructured.Unstructured{}
		if len(raw) == 0 || u.UnmarshalJSON(raw) != nil {
			return ""
		}
		s, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "annotations", w.timestamp)
		return s
	}
	if newStamp := stamp(req.Object.Raw); newStamp != stamp(req.OldObject.Raw) {
		if req.DryRun != nil && *req.DryRun {
			w.probeOnce.Do(func() { close(w.probed) })
		} else {
			w.once.Do(func() { close(w.arrived) })
			select {
			case <-w.release:
			case <-time.After(60 * time.Second):
			}
		}
	}
	review.Response = &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	review.Request = nil
	_ = json.NewEncoder(rw).Encode(&review)
}

// register installs the webhook for the namespace's Deployments and waits
// until the API server calls it.
func (w *holdingWebhook) register(t *testing.T, ns, deployment string) {
	t.Helper()
	ctx := ctxFor(t)
	none := admissionregistrationv1.SideEffectClassNone
	fail := admissionregistrationv1.Fail
	timeout := int32(30)
	url := w.srv.URL + "/validate"
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "hold-restarts-" + ns},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "hold-restarts.e2e.example",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: w.caPEM},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			SideEffects:             &none,
			FailurePolicy:           &fail,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if _, err := env.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.Background(), cfg.Name, metav1.DeleteOptions{})
	})
	probe := []byte(`{"spec":{"template":{"metadata":{"annotations":{"` + w.timestamp + `":"probe-` + time.Now().Format(time.RFC3339Nano) + `"}}}}}`)
	waitFor(t, "the API server calls the webhook", func() (bool, error) {
		_, err := env.kube.AppsV1().Deployments(ns).Patch(ctx, deployment, types.MergePatchType, probe,
			metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return false, err
		}
		select {
		case <-w.probed:
			return true, nil
		default:
			return false, nil
		}
	})
}

// A reconcile under way when SIGTERM arrives finishes: the restart's patch,
// held inside the real API server by a webhook until the controller has
// begun to stop, lands, and the process exits cleanly after it. (Writes
// that a stop cancelled would leave the pods on the old data until the next
// leader found the change.)
func TestSIGTERMFinishesReconcilesUnderWay(t *testing.T) {
	t.Parallel()
	ns := newNamespace(t)
	keys := keysFor("drain")
	createConfigMap(t, ns, "app", map[string]string{"v": "1"})
	createDeployment(t, ns, "web", podSpec(t, `
containers:
- name: app
  image: app
  envFrom: [{configMapRef: {name: app}}]
`), workloadOptions{})
	// A merge patch, not a read and an update: kube-controller-manager
	// writes the Deployment's status meanwhile, and an update would conflict.
	optIn := []byte(`{"metadata":{"annotations":{"` + keys.optIn + `":"enabled"}}}`)
	if _, err := env.kube.AppsV1().Deployments(ns).Patch(ctxFor(t), "web", types.MergePatchType, optIn, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err := env.startController(ctxFor(t), "drain", isolatedConfig(t, "drain", ns, keys, withoutBreaker),
		"--restart-grace-period", "1s", "--restart-check-period", "100")
	if err != nil {
		t.Fatal(err)
	}
	logTailOnFailure(t, "drain", &p)
	defer p.Kill()
	waitFor(t, "the workload recorded", func() (bool, error) {
		d, err := env.kube.AppsV1().Deployments(ns).Get(ctxFor(t), "web", metav1.GetOptions{})
		return err == nil && d.Annotations[keys.applied] != "", err
	})
	// The record raised the Deployment's generation, and
	// kube-controller-manager answers with a status write. Made while the
	// restart's patch is held, that write would turn the patch into a
	// conflict (optimistic concurrency, retried at the next start), which is
	// not what this test is about: wait for the status to catch up first.
	waitFor(t, "the Deployment's status caught up with the record", func() (bool, error) {
		d, err := env.kube.AppsV1().Deployments(ns).Get(ctxFor(t), "web", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == d.Generation, err
	})

	hook := startHoldingWebhook(t, keys.timestamp)
	hook.register(t, ns, "web")
	setConfigMapKey(t, ns, "app", "v", "2")
	select {
	case <-hook.arrived:
	case <-time.After(60 * time.Second):
		t.Fatal("the restart's patch never reached the API server")
	}
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the controller stopping", func() (bool, error) {
		raw, err := os.ReadFile(p.logPath)
		return strings.Contains(string(raw), "stopping: finishing reconciles under way"), err
	})
	hook.letGo()
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the controller did not exit after SIGTERM")
	}
	if code := p.ExitCode(); code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", code)
	}
	d, err := env.kube.AppsV1().Deployments(ns).Get(ctxFor(t), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if d.Spec.Template.Annotations[keys.timestamp] == "" {
		t.Fatal("the restart under way when SIGTERM arrived did not land: no restart timestamp in the pod template")
	}
	waitFor(t, "the restart rolled (a second ReplicaSet)", func() (bool, error) {
		rss, err := env.kube.AppsV1().ReplicaSets(ns).List(ctxFor(t), metav1.ListOptions{LabelSelector: "app=web"})
		return err == nil && len(rss.Items) == 2, err
	})
}
