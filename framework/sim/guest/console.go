package guest

import (
	"fmt"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/framework/sim/simenv"
)

// console is a guest's serial console: the launcher's guest-console-log container log, each
// line stamped with the guest's time since power-on as a kernel would.
type console struct {
	mu    sync.Mutex
	path  string // "" when the VM logs no serial console
	start time.Time
	now   func() time.Time
}

// say writes lines, each prefixed with the guest-relative stamp.
func (c *console) say(lines ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path == "" {
		return
	}
	at := c.now()
	rel := at.Sub(c.start).Seconds()
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = fmt.Sprintf("[%12.6f] %s", rel, l)
	}
	_ = simenv.WriteContainerLog(c.path, at, out...)
}
