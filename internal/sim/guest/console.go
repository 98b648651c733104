package guest

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/cozystack/cozy-e2e/internal/sim/simenv"
)

// console is a guest's serial console, each line stamped with the guest's time since power-on
// as a kernel would. It goes to the VMI's serial port (whoever holds its console subresource
// reads it) and, when the VM logs its serial console, to the launcher's guest-console-log
// container log: KubeVirt feeds that log from the console's log file, whether or not anyone
// is connected.
type console struct {
	mu    sync.Mutex
	path  string // "" when the VM logs no serial console
	start time.Time
	now   func() time.Time
	// port is the VMI's serial port: ns, name and UID on ports (nil: a real VM's, whose
	// console is its own).
	ports        *simenv.SerialPorts
	ns, vmi, uid string
}

// say writes lines, each prefixed with the guest-relative stamp.
func (c *console) say(lines ...string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	at := c.now()
	rel := at.Sub(c.start).Seconds()
	out := make([]string, len(lines))
	var serial strings.Builder
	for i, l := range lines {
		out[i] = fmt.Sprintf("[%12.6f] %s", rel, l)
		serial.WriteString(out[i] + "\r\n")
	}
	if c.ports != nil {
		c.ports.Write(c.ns, c.vmi, c.uid, []byte(serial.String()))
	}
	if c.path != "" {
		_ = simenv.WriteContainerLog(c.path, at, out...)
	}
}
