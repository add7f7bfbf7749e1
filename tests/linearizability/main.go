// Command linearizability records a history of strong reads and writes against a
// hotledger cluster and checks it with Porcupine (a linearizability checker).
//
// Clients spread over the nodes each loop on a few registers (rows of `reg`): a write sets
// a register to a value no other write uses; a read returns what it holds. Every
// operation's invocation and response time is recorded. A write that certainly did not
// apply (40001) is left out; one whose outcome is unknown (40003, a broken connection, a
// timeout) may have applied at any time after its invocation, so it is kept with no
// response (Porcupine may place it anywhere after its call, or last). A read that failed
// says nothing and is left out. The history is then checked against a register per key.
//
// Usage: linearizability --ports 5001,5002,5003 --seconds 10 [--clients 6] [--keys 4]
//
//	linearizability --self-test   (the checker accepts a linearizable history and
//	                               refuses one with a stale read)
//
// Exit status: 0 linearizable, 1 not linearizable, 2 the run itself failed.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

type input struct {
	write bool
	key   int
	value int64
}

type output struct {
	value int64
}

var model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[int][]porcupine.Operation{}
		for _, op := range history {
			key := op.Input.(input).key
			byKey[key] = append(byKey[key], op)
		}
		var parts [][]porcupine.Operation
		for _, ops := range byKey {
			parts = append(parts, ops)
		}
		return parts
	},
	Init: func() interface{} { return int64(0) },
	Step: func(state, in, out interface{}) (bool, interface{}) {
		i := in.(input)
		if i.write {
			return true, i.value
		}
		return out.(output).value == state.(int64), state
	},
	DescribeOperation: func(in, out interface{}) string {
		i := in.(input)
		if i.write {
			return fmt.Sprintf("write(%d, %d)", i.key, i.value)
		}
		return fmt.Sprintf("read(%d) -> %d", i.key, out.(output).value)
	},
}

type recorder struct {
	mu    sync.Mutex
	ops   []porcupine.Operation
	start time.Time
}

func (r *recorder) now() int64 { return time.Since(r.start).Nanoseconds() }

func (r *recorder) add(op porcupine.Operation) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// sqlstate is the error's SQLSTATE, or "" for an error without one (a broken connection).
func sqlstate(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func connect(ctx context.Context, port string, password string) (*pgx.Conn, error) {
	url := fmt.Sprintf("postgres://ledger:%s@127.0.0.1:%s/ledger?connect_timeout=2", password, port)
	return pgx.Connect(ctx, url)
}

func client(id int, ports []string, password string, keys int, until time.Time, rec *recorder, counts *sync.Map) {
	rng := rand.New(rand.NewSource(int64(id) + 1))
	node := id % len(ports)
	var conn *pgx.Conn
	n := int64(0)
	for time.Now().Before(until) {
		if conn == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			c, err := connect(ctx, ports[node], password)
			cancel()
			if err != nil {
				node = (node + 1) % len(ports)
				time.Sleep(50 * time.Millisecond)
				continue
			}
			conn = c
		}
		key := rng.Intn(keys)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if rng.Intn(2) == 0 {
			n++
			value := int64(id+1)*1_000_000 + n
			call := rec.now()
			_, err := conn.Exec(ctx, "UPDATE reg SET v = $2 WHERE k = $1", key, value)
			ret := rec.now()
			in := input{write: true, key: key, value: value}
			switch {
			case err == nil:
				rec.add(porcupine.Operation{ClientId: id, Input: in, Call: call, Output: output{}, Return: ret})
				count(counts, "write ok")
			case sqlstate(err) == "40001":
				count(counts, "write refused (40001)")
			default:
				// Outcome unknown: it may apply at any time after its call.
				rec.add(porcupine.Operation{ClientId: id, Input: in, Call: call, Output: output{}, Return: math.MaxInt64})
				count(counts, "write unknown")
			}
		} else {
			call := rec.now()
			var v int64
			err := conn.QueryRow(ctx, "SELECT v FROM reg WHERE k = $1", key).Scan(&v)
			ret := rec.now()
			if err == nil {
				rec.add(porcupine.Operation{ClientId: id, Input: input{key: key}, Call: call, Output: output{value: v}, Return: ret})
				count(counts, "read ok")
			} else {
				count(counts, "read failed")
			}
		}
		cancel()
		if conn.IsClosed() {
			conn = nil
			node = (node + 1) % len(ports)
		}
	}
	if conn != nil {
		conn.Close(context.Background())
	}
}

func count(counts *sync.Map, what string) {
	v, _ := counts.LoadOrStore(what, new(int64))
	p := v.(*int64)
	// One client per goroutine counts; a lost increment only blurs the summary.
	*p++
}

// An unknown write's return is "never": Porcupine needs every return after every call, so
// it becomes the end of the history.
func closeUnknown(ops []porcupine.Operation) {
	var end int64
	for _, op := range ops {
		if op.Return != math.MaxInt64 && op.Return > end {
			end = op.Return
		}
		if op.Call > end {
			end = op.Call
		}
	}
	for i := range ops {
		if ops[i].Return == math.MaxInt64 {
			ops[i].Return = end + 1
		}
	}
}

func selfTest() int {
	write := func(c int, v int64, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: input{write: true, value: v}, Call: call, Output: output{}, Return: ret}
	}
	read := func(c int, v int64, call, ret int64) porcupine.Operation {
		return porcupine.Operation{ClientId: c, Input: input{}, Call: call, Output: output{value: v}, Return: ret}
	}
	good := []porcupine.Operation{write(0, 1, 0, 10), read(1, 1, 20, 30), read(2, 0, 5, 8)}
	stale := []porcupine.Operation{write(0, 1, 0, 10), read(1, 1, 20, 30), read(2, 0, 40, 50)}
	unknown := []porcupine.Operation{write(0, 1, 0, math.MaxInt64), read(1, 0, 20, 30), read(2, 1, 40, 50)}
	closeUnknown(unknown)
	if !porcupine.CheckOperations(model, good) {
		fmt.Println("self-test: a linearizable history was refused")
		return 1
	}
	if porcupine.CheckOperations(model, stale) {
		fmt.Println("self-test: a stale read was accepted")
		return 1
	}
	if !porcupine.CheckOperations(model, unknown) {
		fmt.Println("self-test: a write of unknown outcome seen late was refused")
		return 1
	}
	fmt.Println("self-test: ok")
	return 0
}

func main() {
	ports := flag.String("ports", "", "the nodes' client ports, comma-separated")
	seconds := flag.Int("seconds", 10, "how long to run")
	clients := flag.Int("clients", 6, "concurrent clients")
	keys := flag.Int("keys", 4, "registers (rows of reg, k = 0 .. keys-1)")
	viz := flag.String("viz", "", "write Porcupine's visualization of a failure here")
	self := flag.Bool("self-test", false, "check the checker on known histories")
	flag.Parse()
	if *self {
		os.Exit(selfTest())
	}
	password := os.Getenv("PGPASSWORD")
	list := strings.Split(*ports, ",")
	if *ports == "" {
		fmt.Fprintln(os.Stderr, "--ports is required")
		os.Exit(2)
	}
	rec := &recorder{start: time.Now()}
	until := time.Now().Add(time.Duration(*seconds) * time.Second)
	var counts sync.Map
	var wg sync.WaitGroup
	for c := 0; c < *clients; c++ {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			var mine sync.Map
			client(c, list, password, *keys, until, rec, &mine)
			mine.Range(func(k, v any) bool {
				total, _ := counts.LoadOrStore(k, new(int64))
				rec.mu.Lock()
				*total.(*int64) += *v.(*int64)
				rec.mu.Unlock()
				return true
			})
		}(c)
	}
	wg.Wait()
	counts.Range(func(k, v any) bool {
		fmt.Printf("%s: %d\n", k, *v.(*int64))
		return true
	})
	closeUnknown(rec.ops)
	fmt.Printf("checking %d operations\n", len(rec.ops))
	result, info := porcupine.CheckOperationsVerbose(model, rec.ops, 60*time.Second)
	fmt.Printf("result: %s\n", result)
	switch result {
	case porcupine.Ok:
		os.Exit(0)
	case porcupine.Illegal:
		if *viz != "" {
			if err := porcupine.VisualizePath(model, info, *viz); err == nil {
				fmt.Printf("visualization: %s\n", *viz)
			}
		}
		os.Exit(1)
	default:
		os.Exit(2)
	}
}
