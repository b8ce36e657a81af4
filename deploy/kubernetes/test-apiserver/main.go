// Command vemu-test-apiserver runs the parts of a Kubernetes cluster, built from their
// released Go modules (k8s.io/kubernetes, go.etcd.io/etcd), for the tests of vemu's
// operator and agents on Kubernetes (crates/vemu/tests/machines/kubernetes.rs and
// kubelet.rs): `vemu-test-apiserver PART ARGS` with PART one of etcd, apiserver,
// scheduler, controller-manager, kubelet and proxy, and ARGS the flags of etcd,
// kube-apiserver, kube-scheduler, kube-controller-manager, kubelet and kube-proxy.
// One binary: the parts share most of their code, so it is one build and one file.
// scripts/test.sh builds it into target/.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: vemu-test-apiserver etcd|apiserver|scheduler|controller-manager|kubelet|proxy ARGS...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "etcd":
		etcdmain.Main(append([]string{"etcd"}, os.Args[2:]...))
	case "apiserver":
		run(apiserver.NewAPIServerCommand())
	case "scheduler":
		run(scheduler.NewSchedulerCommand())
	case "controller-manager":
		run(controllermanager.NewControllerManagerCommand())
	case "kubelet":
		run(kubelet.NewKubeletCommand(context.Background()))
	case "proxy":
		run(proxy.NewProxyCommand())
	default:
		fmt.Fprintf(os.Stderr, "vemu-test-apiserver: unknown command %q (etcd, apiserver, scheduler, controller-manager, kubelet or proxy)\n", os.Args[1])
		os.Exit(2)
	}
}

func run(cmd *cobra.Command) {
	cmd.SetArgs(os.Args[2:])
	os.Exit(cli.Run(cmd))
}
