// Command packimage packs a root filesystem folder into a one-layer OCI image layout
// (internal/sim/node.PackRootfs), the form in which hack/tools/build-images.sh caches the real
// Node's images and the node's local registry serves them.
//
//	go run ./hack/packimage -root <folder> -out <layout> [-entrypoint /usr/bin/x]... [-cmd arg]... [-user 107] [-env K=V]...
//
// An image of data alone (a container disk) has no entrypoint.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/cozystack/cozy-e2e/internal/sim/node"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, " ") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	root := flag.String("root", "", "the root filesystem folder")
	out := flag.String("out", "", "the OCI image layout to write (replaced)")
	user := flag.String("user", "", "the image's user")
	var entrypoint, cmd, env list
	flag.Var(&entrypoint, "entrypoint", "an element of the entrypoint (repeat)")
	flag.Var(&cmd, "cmd", "an element of the command (repeat)")
	flag.Var(&env, "env", "an environment variable K=V (repeat)")
	flag.Parse()
	if *root == "" || *out == "" {
		fmt.Fprintln(os.Stderr, "packimage: -root and -out are required")
		os.Exit(2)
	}
	cfg := v1.Config{Entrypoint: entrypoint, Cmd: cmd, User: *user, Env: env}
	dig, err := node.PackRootfs(*root, *out, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "packimage:", err)
		os.Exit(1)
	}
	fmt.Println(dig)
}
