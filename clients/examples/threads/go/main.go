// Command writer pays alice 10, bob 20 and carol 30 from the current
// directory, with its progress saved by a writer goroutine while the main
// goroutine pays on. Go makes raw system calls (no libc) and moves
// goroutines between threads, so the two goroutines' calls interleave
// differently from run to run. Swept unchanged with `crashsweep --io-points`.
//
//	go build -o writer .   # in clients/examples/threads/go
//	./writer           # the buggy version: a crash can pay twice
//	./writer --fixed   # the fixed version: payments carry a key
//	./writer --payees=1   # alice alone (a shorter run)
//
// The main goroutine pays (one line "payee amount" appended to ledger.txt
// and synced), then hands the new progress to the writer goroutine. The
// writer saves each progress crash-safely to state.json (temp file, fsync,
// rename, fsync of the directory). A restart resumes from state.json: the
// buggy version pays again every payee whose progress was not saved yet;
// the fixed version writes "payee amount key=<payee>-<index>" and does not
// pay a key the ledger already has.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
)

type payee struct {
	name   string
	amount int
}

var payees = []payee{{"alice", 10}, {"bob", 20}, {"carol", 30}}

type state struct {
	Next int `json:"next"`
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "writer:", err)
		os.Exit(1)
	}
}

func load() int {
	data, err := os.ReadFile("state.json")
	if errors.Is(err, fs.ErrNotExist) {
		return 0
	}
	check(err)
	var s state
	check(json.Unmarshal(data, &s))
	return s.Next
}

func save(next int) {
	data, err := json.Marshal(state{Next: next})
	check(err)
	f, err := os.Create("state.json.tmp")
	check(err)
	_, err = f.Write(data)
	check(err)
	check(f.Sync())
	check(f.Close())
	check(os.Rename("state.json.tmp", "state.json"))
	d, err := os.Open(".")
	check(err)
	check(d.Sync())
	check(d.Close())
}

// writer saves each progress it is handed until the channel closes.
func writer(progress <-chan int, done chan<- struct{}) {
	for n := range progress {
		save(n)
	}
	close(done)
}

func alreadyPaid(key string) bool {
	data, err := os.ReadFile("ledger.txt")
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	check(err)
	for _, line := range strings.Split(string(data), "\n") {
		for _, field := range strings.Fields(line) {
			if field == "key="+key {
				return true
			}
		}
	}
	return false
}

func pay(line string) {
	f, err := os.OpenFile("ledger.txt", os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	check(err)
	_, err = f.WriteString(line + "\n")
	check(err)
	check(f.Sync())
	check(f.Close())
}

func main() {
	// Two threads run Go code at once, whatever the machine.
	runtime.GOMAXPROCS(2)
	fixed := false
	for _, arg := range os.Args[1:] {
		if arg == "--fixed" {
			fixed = true
		}
		if strings.HasPrefix(arg, "--payees=") {
			k, err := strconv.Atoi(strings.TrimPrefix(arg, "--payees="))
			check(err)
			payees = payees[:k]
		}
	}
	progress := make(chan int, len(payees))
	done := make(chan struct{})
	go writer(progress, done)
	for i := load(); i < len(payees); {
		p := payees[i]
		if !fixed {
			pay(fmt.Sprintf("%s %d", p.name, p.amount))
		} else if key := fmt.Sprintf("%s-%d", p.name, i); !alreadyPaid(key) {
			pay(fmt.Sprintf("%s %d key=%s", p.name, p.amount, key))
		}
		i++
		progress <- i
	}
	close(progress)
	<-done
	fmt.Println("done")
}
