// Command failover-load sends hot-account transfers (CALL transfer) from many clients
// spread over a cluster's nodes and counts the acknowledged ones per 100 ms, for the
// throughput-across-a-leader-kill chart (tools/bench/failover). A client whose connection
// breaks moves to the next node; a statement that fails is counted as failed and the
// client goes on with the next transfer id.
//
// Usage: failover-load --ports 5001,5002,5003 --seconds 20 [--clients 32] [--accounts 100]
//
// Output: one line per 100 ms tick, "tick_ms,acknowledged,failed".
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

const tick = 100 * time.Millisecond

func main() {
	ports := flag.String("ports", "", "the nodes' client ports, comma-separated")
	seconds := flag.Int("seconds", 20, "how long to run")
	clients := flag.Int("clients", 32, "concurrent clients")
	accounts := flag.Int("accounts", 100, "accounts the debits are drawn from (account 1 takes every credit)")
	flag.Parse()
	list := strings.Split(*ports, ",")
	if *ports == "" {
		fmt.Fprintln(os.Stderr, "--ports is required")
		os.Exit(2)
	}
	ticks := *seconds * int(time.Second/tick)
	acknowledged := make([]atomic.Int64, ticks+1)
	failed := make([]atomic.Int64, ticks+1)
	start := time.Now()
	until := start.Add(time.Duration(*seconds) * time.Second)
	slot := func() int {
		s := int(time.Since(start) / tick)
		if s > ticks {
			s = ticks
		}
		return s
	}
	password := os.Getenv("PGPASSWORD")
	var wg sync.WaitGroup
	for c := 0; c < *clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(c) + 1))
			node := c % len(list)
			var conn *pgx.Conn
			n := int64(0)
			for time.Now().Before(until) {
				if conn == nil {
					ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
					url := fmt.Sprintf("postgres://ledger:%s@127.0.0.1:%s/ledger?connect_timeout=2", password, list[node])
					connected, err := pgx.Connect(ctx, url)
					cancel()
					if err != nil {
						node = (node + 1) % len(list)
						time.Sleep(20 * time.Millisecond)
						continue
					}
					conn = connected
				}
				n++
				id := int64(c+1)*100_000_000 + n
				debit := 2 + rng.Intn(*accounts-1)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				_, err := conn.Exec(ctx, fmt.Sprintf("CALL transfer(%d, %d, 1, 1, 1, 1)", id, debit), pgx.QueryExecModeSimpleProtocol)
				cancel()
				if err == nil {
					acknowledged[slot()].Add(1)
				} else {
					failed[slot()].Add(1)
				}
				if conn.IsClosed() {
					conn = nil
					node = (node + 1) % len(list)
				}
			}
			if conn != nil {
				conn.Close(context.Background())
			}
		}(c)
	}
	wg.Wait()
	for t := 0; t < ticks; t++ {
		fmt.Printf("%d,%d,%d\n", t*int(tick/time.Millisecond), acknowledged[t].Load(), failed[t].Load())
	}
}
