package controlplane

import "testing"

// Ports are found free, released and bound later by a child process, so the same port must
// never be handed out twice: a controller once got one port for both its health probe and its
// metrics server and exited with "address already in use".
func TestFreePortsAreNeverHandedOutTwice(t *testing.T) {
	seen := map[int]bool{}
	high := ephemeralLow()
	for i := range 500 {
		var ports []int
		if i%2 == 0 {
			p, err := FreePort()
			if err != nil {
				t.Fatal(err)
			}
			ports = []int{p}
		} else {
			var err error
			if ports, err = FreePorts(3); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range ports {
			if seen[p] {
				t.Fatalf("ask %d: port %d handed out a second time", i, p)
			}
			seen[p] = true
			if high-portsLow >= portsMinSpan && (p < portsLow || p >= high) {
				t.Fatalf("port %d is outside [%d, %d), where no bind(\":0\") of another process lands", p, portsLow, high)
			}
		}
	}
}
