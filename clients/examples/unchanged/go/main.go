// Command payouts pays alice 10, bob 20 and carol 30 from the current
// directory, surviving crashes: the Go payouts example with its crash
// points removed, swept unchanged with `crashsweep --io-points`. Go makes
// raw system calls (no libc): the tracer sees them all the same.
//
//	go build -o payouts .   # in clients/examples/unchanged/go
//	./payouts           # the buggy version: a crash can pay twice
//	./payouts --fixed   # the fixed version: payments carry a key
//
// state.json ({"next": k}) is the durable progress, saved crash-safely (temp
// file, fsync, rename, fsync of the directory). ledger.txt is the outside
// world, a payment service: one line "payee amount" per payment. The buggy
// version pays, then saves; a crash between the two repays on restart. The
// fixed version writes "payee amount key=<payee>-<index>" and, like a
// service that honours idempotency keys, does not pay a key the ledger
// already has.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
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
		fmt.Fprintln(os.Stderr, "payouts:", err)
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
	fixed := false
	for _, arg := range os.Args[1:] {
		if arg == "--fixed" {
			fixed = true
		}
	}
	for i := load(); i < len(payees); {
		p := payees[i]
		if !fixed {
			pay(fmt.Sprintf("%s %d", p.name, p.amount))
		} else if key := fmt.Sprintf("%s-%d", p.name, i); !alreadyPaid(key) {
			pay(fmt.Sprintf("%s %d key=%s", p.name, p.amount, key))
		}
		i++
		save(i)
	}
	fmt.Println("done")
}
