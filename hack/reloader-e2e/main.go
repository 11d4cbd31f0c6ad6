// Command reloader-e2e runs stakater/Reloader's own end-to-end suites
// against restart-controller on the local control plane:
//
//	go run ./hack/reloader-e2e [--suites core,annotations] [--workdir DIR] RELOADER_SRC
//
// RELOADER_SRC is a checkout of Reloader (v1.4.21). Its suites install
// Reloader with `helm upgrade --install ... --set reloader.X=Y` and wait for
// the Deployment "<release>-reloader" to be ready. This program puts itself
// on their PATH as `helm`: that shim turns the --set values into our config
// with `migrate` (internal/migrate), starts restart-controller on the host
// against the local cluster in Reloader's place, and creates a stand-in
// Deployment of that name (kwok makes it ready). Neither Argo Rollouts nor
// OpenShift runs here: their CRDs are installed, with stand-ins writing the
// status their controllers would (argo.go, openshift.go), so the suites'
// specs of Rollouts and DeploymentConfigs run. None of Reloader's code is
// copied: its suites run from its own checkout, with `go test -modfile` so
// that its files are not changed. OPENSHIFT_API, when set, is a source
// directory of github.com/openshift/api used through a replace (Reloader
// pins a pseudo-version that some module proxies refuse).
//
// The differences the shim makes, each for a reason stated in
// docs/switching-from-reloader.md: the restart annotation is the one the
// suites wait for (reloader.stakater.com/last-reloaded-from), and the
// config is migrated with Reloader's pace (migrate --reloader-pace: no
// waves or breaker) but a grace period of 4 s, between the suites' reads
// and their deadlines (graceForSuites says why).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	var err error
	if filepath.Base(os.Args[0]) == "helm" {
		err = shim(ctx, os.Args[1:])
	} else {
		err = run(ctx, os.Args[1:])
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "reloader-e2e:", err)
		os.Exit(1)
	}
}
