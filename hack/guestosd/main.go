// Command guestosd is the worker disk's operating system stand-in (internal/sim/guestos): the
// worker disk's init (hack/tools/images/guest-init) runs it once the guest's network is up.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/cozystack/cozy-e2e/internal/sim/guestos"
)

func main() {
	o := guestos.Options{Console: os.Stdout}
	flag.StringVar(&o.ConfigDrive, "config-drive", "/config", "where the config drive is mounted")
	flag.StringVar(&o.Kubelets, "kubelets", "/usr/local/lib/kubelet", "the kubelets, <dir>/<version>/kubelet")
	flag.StringVar(&o.Interface, "interface", "eth0", "the interface whose address is the Node's")
	flag.StringVar(&o.Logs, "logs", "/var/log", "where the services' output goes")
	flag.Parse()
	if err := guestos.Run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, "guestos:", err)
		os.Exit(1)
	}
}
