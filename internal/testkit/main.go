package testkit

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// Main runs a package's tests, for its TestMain, with controller-runtime's global logger set
// (to discard): the clients' API warnings and the controllers of a manager log through it, and
// unset it prints a stack trace into the test output after 30 s.
func Main(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
