// Command etcd is the etcd server, built from its Go module because distribution
// packages lag the version kube-apiserver needs.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
