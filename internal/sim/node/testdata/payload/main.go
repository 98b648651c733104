// Command payload is the test's container: a static binary that says it runs, with its
// arguments, then waits for SIGTERM, as a long-running workload does.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	host, _ := os.Hostname()
	fmt.Printf("payload running on %s: %s\n", host, strings.Join(os.Args[1:], " "))
	<-sig
	fmt.Println("payload: terminated")
}
