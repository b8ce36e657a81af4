// Command vemu-test-apiserver runs the Kubernetes API server and etcd, built from
// their released Go modules (k8s.io/kubernetes, go.etcd.io/etcd), for the test of
// vemu's operator (crates/vemu/tests/machines.rs): `vemu-test-apiserver etcd ARGS`
// and `vemu-test-apiserver apiserver ARGS`, with the flags of `etcd` and
// `kube-apiserver`. No kubelet, scheduler or controller manager: the test stands in
// for the kubelet of the agents' pods. scripts/test.sh builds it into target/.
package main

import (
	"fmt"
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: vemu-test-apiserver etcd|apiserver ARGS...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "etcd":
		etcdmain.Main(append([]string{"etcd"}, os.Args[2:]...))
	case "apiserver":
		cmd := app.NewAPIServerCommand()
		cmd.SetArgs(os.Args[2:])
		os.Exit(cli.Run(cmd))
	default:
		fmt.Fprintf(os.Stderr, "vemu-test-apiserver: unknown command %q (etcd or apiserver)\n", os.Args[1])
		os.Exit(2)
	}
}
