// Package crashsweep marks crash points in Go programs: the crashsweep point
// protocol, version 1.
//
// Mark each place a crash may land with crashsweep.Point("mid-save").
//
//   - Run by the crashsweep harness (CRASHSWEEP_FD and CRASHSWEEP_PROTOCOL=1
//     set), a point writes "hit <name>\n" to the inherited descriptor and
//     blocks until the harness answers "go\n". To crash the program there,
//     the harness never answers: it kills the process with SIGKILL.
//   - Run by hand with CRASHSWEEP_DIE_AT=name#n, the program kills itself
//     with SIGKILL at the n-th pass over name.
//   - With neither set, a point does nothing.
//
// Points on every goroutine count; one mutex serialises them. A name must be
// non-empty and hold no newline or carriage return, or Point panics, in every
// mode. The protocol is described in docs/point-protocol.md.
package crashsweep

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Protocol is the version of the point protocol this client speaks.
const Protocol = "1"

const (
	modeOff = iota
	modeHarness
	modeDieAt
)

var (
	once   sync.Once
	mu     sync.Mutex
	mode   int
	conn   *os.File
	dieAt  string // name in die-at mode
	dieN   int    // n in die-at mode
	passes = map[string]int{}
)

func fail(status int, format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "crashsweep: "+format+"\n", args...)
	os.Exit(status)
}

func valid(name string) bool {
	return name != "" && !strings.ContainsAny(name, "\n\r")
}

func digits(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func setup() {
	fdText, fdSet := os.LookupEnv("CRASHSWEEP_FD")
	protocol, protocolSet := os.LookupEnv("CRASHSWEEP_PROTOCOL")
	os.Unsetenv("CRASHSWEEP_FD")
	os.Unsetenv("CRASHSWEEP_PROTOCOL")
	if fdSet {
		if protocol != Protocol {
			asked := strconv.Quote(protocol)
			if !protocolSet {
				asked = "no protocol (CRASHSWEEP_PROTOCOL unset)"
			}
			fail(2, "this client speaks point protocol 1, the harness asked for %s", asked)
		}
		fd, err := strconv.Atoi(fdText)
		if !digits(fdText) || err != nil {
			fail(70, "CRASHSWEEP_FD=%q is not a descriptor number", fdText)
		}
		var st syscall.Stat_t
		if err := syscall.Fstat(fd, &st); err != nil {
			fail(70, "CRASHSWEEP_FD=%q is not a usable descriptor: %v", fdText, err)
		}
		syscall.CloseOnExec(fd)
		conn = os.NewFile(uintptr(fd), "crashsweep")
		mode = modeHarness
		return
	}
	if value, ok := os.LookupEnv("CRASHSWEEP_DIE_AT"); ok {
		i := strings.LastIndex(value, "#")
		n := 0
		if i >= 0 && digits(value[i+1:]) {
			n, _ = strconv.Atoi(value[i+1:])
		}
		if i < 0 || !valid(value[:i]) || n < 1 {
			fail(2, "CRASHSWEEP_DIE_AT=%q is not name#n with a point name and n >= 1", value)
		}
		dieAt, dieN, mode = value[:i], n, modeDieAt
		return
	}
	mode = modeOff
}

func report(name string) {
	if _, err := conn.Write([]byte("hit " + name + "\n")); err != nil {
		fail(70, "point %q: cannot talk to the harness: %v", name, err)
	}
	answer := make([]byte, 0, 16)
	var b [1]byte
	for len(answer) < 16 && (len(answer) == 0 || answer[len(answer)-1] != '\n') {
		n, err := conn.Read(b[:])
		if n == 1 {
			answer = append(answer, b[0])
			continue
		}
		if err == nil || errors.Is(err, io.EOF) {
			fail(70, "point %q: the harness closed the descriptor (end of file)", name)
		}
		fail(70, "point %q: cannot talk to the harness: %v", name, err)
	}
	if string(answer) != "go\n" {
		fail(70, "point %q: the harness answered %q, not \"go\"", name, answer)
	}
}

// Point passes the crash point name: it reports it to the harness and waits
// for its answer, dies here if CRASHSWEEP_DIE_AT names this pass, or does
// nothing. The environment is read once, at the first point.
func Point(name string) {
	if !valid(name) {
		panic(fmt.Sprintf("crashsweep: a point name must be non-empty, without newline or carriage return, not %q", name))
	}
	once.Do(func() {
		mu.Lock()
		defer mu.Unlock()
		setup()
	})
	if mode == modeOff {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	switch mode {
	case modeHarness:
		report(name)
	case modeDieAt:
		passes[name]++
		if n := passes[name]; name == dieAt && n == dieN {
			fmt.Fprintf(os.Stderr, "crashsweep: dying at %s#%d\n", name, n)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			fail(70, "SIGKILL at %s#%d did not kill the process", name, n)
		}
	}
}
