package world

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// controllerLogger writes the in-process controllers' log lines to path (not an artifact: it
// may name Secrets). A file that cannot be opened discards them.
func controllerLogger(path string) logr.Logger {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return logr.Discard()
	}
	var mu sync.Mutex
	return funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(f, "%s %s %s\n", time.Now().UTC().Format(time.RFC3339Nano), prefix, args)
	}, funcr.Options{Verbosity: 1})
}
