// Command year drives a year of ticks through the engine in process: heartbeat ticks one
// injected minute apart, with applies (some refused, some failing health) spread over them,
// against the simulator's handlers and an in-process compose. It prints the state file's size
// and the journal's length as it goes and at the end, checks that the journal still holds the
// last applies, refusal and failure `explain` needs, and times status and explain on the file.
// It is a measurement program: it changes nothing outside -dir.
//
//	go run ./bench/year [-ticks 525600] [-applies 5000] [-dir /dev/shm/monky-year] [-compact-every 0]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/tikali/monky-deployd/machine/explain"
	"github.com/tikali/monky-deployd/store"
	"github.com/tikali/monky-deployd/test/bench/rig"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "year:", err)
		os.Exit(1)
	}
}

func run() error {
	ticks := flag.Int("ticks", 525600, "heartbeat ticks, one injected minute apart")
	applies := flag.Int("applies", 5000, "applies spread evenly over the ticks")
	dir := flag.String("dir", rig.ScratchDir("monky-bench-year"), "the world's directory (removed first); /dev/shm keeps fsync cheap")
	compactEvery := flag.Int("compact-every", 0, "call CompactIfNeeded(0.5) every N ticks (0: never)")
	refuseEvery := flag.Int("refuse-every", 50, "every Nth apply is a release the agent refuses")
	failEvery := flag.Int("fail-every", 50, "every Nth apply (offset by half) turns unhealthy")
	steps := flag.Int("steps", 10, "progress lines")
	flag.Parse()

	if err := os.RemoveAll(*dir); err != nil {
		return err
	}
	if err := os.MkdirAll(*dir, 0o700); err != nil {
		return err
	}
	w, err := rig.NewWorld(rig.Options{Dir: *dir})
	if err != nil {
		return err
	}
	fmt.Printf("year: %d ticks, %d applies, state dir %s (GOMAXPROCS %d)\n", *ticks, *applies, w.Cfg.StateDir, runtime.GOMAXPROCS(0))

	every := *ticks / max(*applies, 1)
	applied, refused, failed := 0, 0, 0
	var lastRefused, lastFailed, lastGood string
	exits := map[int]int{}
	compactions := 0
	var compactTime time.Duration
	start := time.Now()
	var ru0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	for i := 0; i < *ticks; i++ {
		if *applies > 0 && i%every == 0 && applied < *applies {
			n := applied + 1
			name := fmt.Sprintf("r%05d", n)
			switch {
			case *refuseEvery > 0 && n%*refuseEvery == 0:
				name = "refuse-" + name
				refused++
				lastRefused = name
			case *failEvery > 0 && n%*failEvery == *failEvery/2:
				name = "bad-" + name
				failed++
				lastFailed = name
			default:
				lastGood = name
			}
			if _, err := w.Release(name, nil); err != nil {
				return err
			}
			applied++
		}
		res := w.Tick()
		if exits[res.Exit] == 0 && res.Err != nil {
			fmt.Printf("  tick %d: first exit %d: %v\n", i+1, res.Exit, res.Err)
		}
		exits[res.Exit]++
		w.Clock.Advance(time.Minute)
		if *compactEvery > 0 && (i+1)%*compactEvery == 0 {
			t := time.Now()
			ok, err := w.Store.CompactIfNeeded(0.5)
			if err != nil {
				return fmt.Errorf("compact: %w", err)
			}
			compactTime += time.Since(t)
			if ok {
				compactions++
			}
		}
		if *steps > 0 && (i+1)%max(*ticks / *steps, 1) == 0 {
			size, sums, entries, err := measure(w)
			if err != nil {
				return err
			}
			fmt.Printf("  tick %7d  %5.1f%%  state %8d B  ticks kept %5d  entries %6d  %s elapsed\n",
				i+1, 100*float64(i+1)/float64(*ticks), size, sums, entries, time.Since(start).Round(time.Second))
		}
	}
	wall := time.Since(start)
	var ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := tv(ru1.Utime) + tv(ru1.Stime) - tv(ru0.Utime) - tv(ru0.Stime)

	size, sums, entries, err := measure(w)
	if err != nil {
		return err
	}
	fmt.Printf("year: %d ticks in %s (%.0f ticks/s, %.0f µs CPU per tick incl. the simulator), exits %v\n",
		*ticks, wall.Round(time.Second), float64(*ticks)/wall.Seconds(), float64(cpu.Microseconds())/float64(*ticks), exits)
	fmt.Printf("year: applies %d (refused %d, failing %d); compactions %d (%s)\n", applied, refused, failed, compactions, compactTime.Round(time.Millisecond))
	fmt.Printf("year: STATE FILE %d bytes (%.2f MiB; target < 8 MiB); journal: %d tick summaries, %d entries\n",
		size, float64(size)/(1<<20), sums, entries)
	fmt.Printf("year: sim saw %d reports\n", len(w.Sim.Reports(w.Env)))
	if *compactEvery == 0 {
		t := time.Now()
		ok, err := w.Store.CompactIfNeeded(0.5)
		if err != nil {
			return fmt.Errorf("compact: %w", err)
		}
		after, _, _, err := measure(w)
		if err != nil {
			return err
		}
		fmt.Printf("year: one CompactIfNeeded(0.5) at the end: compacted %t in %s, state file %d bytes (%.2f MiB)\n",
			ok, time.Since(t).Round(time.Millisecond), after, float64(after)/(1<<20))
	}

	// What explain needs: the last good apply, the last refusal, the last failure.
	doc, err := explain.Build(w.Store, explain.Options{N: 100000, Now: w.Clock.Now()})
	if err != nil {
		return fmt.Errorf("explain: %w", err)
	}
	var all strings.Builder
	explain.WriteText(&all, doc)
	text := all.String()
	miss := 0
	for _, want := range []struct{ what, name string }{{"last good apply", lastGood}, {"last refusal", lastRefused}, {"last failure", lastFailed}} {
		if want.name == "" {
			continue
		}
		sha, _, ok := w.Sim.Release(w.Env, want.name)
		found := ok && strings.Contains(text, sha[:12])
		if !found {
			miss++
		}
		fmt.Printf("year: explain keeps the %s (%s %s): %t\n", want.what, want.name, short(sha), found)
	}
	// Time status and explain (default 20 ticks) in process on the year's file.
	t := time.Now()
	const reps = 20
	for r := 0; r < reps; r++ {
		ro, err := store.OpenBolt(w.Cfg.StatePath(), store.BoltOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		if _, err := explain.Build(ro, explain.Options{Now: w.Clock.Now()}); err != nil {
			return err
		}
	}
	fmt.Printf("year: explain in process: %.2f ms\n", float64(time.Since(t).Microseconds())/1000/reps)
	t = time.Now()
	for r := 0; r < reps; r++ {
		ro, err := store.OpenBolt(w.Cfg.StatePath(), store.BoltOptions{ReadOnly: true})
		if err != nil {
			return err
		}
		yes := true
		if _, err := explain.BuildStatus(ro, w.Clock.Now(), &yes); err != nil {
			return err
		}
	}
	fmt.Printf("year: status in process: %.2f ms\n", float64(time.Since(t).Microseconds())/1000/reps)
	if miss > 0 {
		return fmt.Errorf("retention lost %d of the ticks explain needs", miss)
	}
	fmt.Printf("year: config for status/explain: %s\n\n", filepath.Join(w.Kit, "config.yaml"))
	return nil
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

func tv(t syscall.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}

// measure is the state file's size, the number of tick summaries and of journal entries.
func measure(w *rig.World) (size int64, sums, entries int, err error) {
	st, err := os.Stat(w.Cfg.StatePath())
	if err != nil {
		return 0, 0, 0, err
	}
	err = w.Store.View(func(tx store.Tx) error {
		ts, err := tx.Ticks(0)
		if err != nil {
			return err
		}
		sums = len(ts)
		return tx.AllEntries(func(store.Entry) error { entries++; return nil })
	})
	return st.Size(), sums, entries, err
}
