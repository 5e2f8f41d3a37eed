// Command state is state.py in Go: a job of three steps that saves its
// state after each with write-temp-and-rename, then acknowledges the step
// on its standard output (the logs live outside the world). Go makes raw
// system calls (no libc): the tracer records them all the same.
//
//	go build -o state .   # in clients/examples/power/go
//	./state nosync        # no fsync at all
//	./state file          # the file synced, not its directory
//	./state full          # the file and its directory synced
//
// The judge is ../judge.py: acknowledged steps done again are work a
// power cut lost.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
)

const steps = 3

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "state:", err)
		os.Exit(1)
	}
}

func load() int {
	data, err := os.ReadFile("state")
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	check(err)
	n, err := strconv.Atoi(string(data))
	if err != nil {
		// A torn or empty file: start over (and say so).
		fmt.Fprintf(os.Stderr, "state unreadable (%q): starting over\n", data)
		return 0
	}
	return n
}

func save(n int, mode string) {
	f, err := os.Create("state.tmp")
	check(err)
	_, err = f.Write([]byte(strconv.Itoa(n)))
	check(err)
	if mode != "nosync" {
		check(f.Sync())
	}
	check(f.Close())
	check(os.Rename("state.tmp", "state"))
	if mode == "full" {
		d, err := os.Open(".")
		check(err)
		check(d.Sync())
		check(d.Close())
	}
}

func main() {
	mode := "full"
	if len(os.Args) > 1 {
		mode = os.Args[1]
	}
	if mode != "nosync" && mode != "file" && mode != "full" {
		fmt.Fprintf(os.Stderr, "unknown mode %q: nosync, file or full\n", mode)
		os.Exit(2)
	}
	for n := load(); n < steps; {
		n++
		save(n, mode)
		fmt.Printf("acked %d\n", n)
	}
}
