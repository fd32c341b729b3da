// Command phases runs two commands alternately, each many times, with MONKY_DEPLOYD_TRACE set
// to the time it started them, and prints the medians of the phases both print (internal/phase)
// side by side, with each run's wall time, CPU and peak RSS as the kernel counted them. It is
// how `make bench` shows where a heartbeat tick spends its time against the floor program.
//
//	phases [-runs 30] [-json FILE] -a 'agent command' -b 'floor command'
//
// Commands are split on spaces. A run that exits non-zero stops the program.
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type sample struct {
	phases map[string]float64 // ms
	wall   float64            // ms, from before the fork to after the wait
	cpu    float64            // ms, user+sys
	rssKiB float64
	mem    map[string]float64 // kB, as the program saw itself at its end
}

func main() {
	runs := flag.Int("runs", 30, "runs of each command")
	a := flag.String("a", "", "first command (the agent)")
	b := flag.String("b", "", "second command (the floor)")
	out := flag.String("json", "", "also write the medians to FILE as JSON")
	flag.Parse()
	if *a == "" || *b == "" {
		fmt.Fprintln(os.Stderr, "phases: -a and -b are required")
		os.Exit(2)
	}
	var sa, sb []sample
	var order []string
	seen := map[string]bool{}
	for i := 0; i < *runs+2; i++ { // the first two of each are a warm-up
		for k, cmd := range []string{*a, *b} {
			s, names, err := once(cmd)
			if err != nil {
				fmt.Fprintln(os.Stderr, "phases:", err)
				os.Exit(1)
			}
			for _, n := range names {
				if !seen[n] {
					seen[n] = true
					order = append(order, n)
				}
			}
			if i < 2 {
				continue
			}
			if k == 0 {
				sa = append(sa, s)
			} else {
				sb = append(sb, s)
			}
		}
	}
	res := map[string]map[string]float64{"a": summary(sa, order), "b": summary(sb, order)}
	fmt.Printf("%-12s %10s %10s   (medians of %d runs each, interleaved; ms)\n", "phase", "agent", "floor", *runs)
	for _, n := range append(order, "teardown", "", "wall", "cpu", "rss_mib", "anon_mib", "file_mib") {
		if n == "" {
			fmt.Println(strings.Repeat("-", 36))
			continue
		}
		fmt.Printf("%-12s %10s %10s\n", n, cell(res["a"], n), cell(res["b"], n))
	}
	fmt.Printf("ratio a/b: wall %.2fx, cpu %.2fx, peak RSS %.2fx\n",
		res["a"]["wall"]/res["b"]["wall"], res["a"]["cpu"]/res["b"]["cpu"], res["a"]["rss_mib"]/res["b"]["rss_mib"])
	if *out != "" {
		raw, _ := json.MarshalIndent(map[string]any{"order": order, "a": res["a"], "b": res["b"], "runs": *runs}, "", "  ")
		if err := os.WriteFile(*out, raw, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "phases:", err)
			os.Exit(1)
		}
	}
}

func cell(m map[string]float64, k string) string {
	v, ok := m[k]
	if !ok {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}

func once(command string) (sample, []string, error) {
	f := strings.Fields(command)
	cmd := exec.Command(f[0], f[1:]...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	start := time.Now()
	cmd.Env = append(os.Environ(), "MONKY_DEPLOYD_TRACE="+strconv.FormatInt(start.UnixNano(), 10))
	if err := cmd.Run(); err != nil {
		return sample{}, nil, fmt.Errorf("%s: %v: %s", f[0], err, errb.String())
	}
	wall := time.Since(start)
	ru, _ := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	s := sample{phases: map[string]float64{}, mem: map[string]float64{}, wall: ms(wall)}
	if ru != nil {
		s.cpu = ms(tv(ru.Utime) + tv(ru.Stime))
		s.rssKiB = float64(ru.Maxrss)
	}
	var names []string
	sc := bufio.NewScanner(&errb)
	for sc.Scan() {
		p := strings.Fields(sc.Text())
		if len(p) == 3 && p[0] == "memory" {
			s.mem[p[1]], _ = strconv.ParseFloat(p[2], 64)
			continue
		}
		if len(p) != 4 || p[0] != "phase" {
			continue
		}
		d, err := strconv.ParseInt(p[3], 10, 64)
		if err != nil {
			continue
		}
		s.phases[p[1]] += float64(d) / 1e6
		names = append(names, p[1])
	}
	if len(names) == 0 {
		return s, nil, fmt.Errorf("%s printed no phases (is MONKY_DEPLOYD_TRACE honoured?)", f[0])
	}
	return s, names, nil
}

func summary(ss []sample, order []string) map[string]float64 {
	m := map[string]float64{}
	for _, n := range order {
		var v []float64
		for _, s := range ss {
			if x, ok := s.phases[n]; ok {
				v = append(v, x)
			}
		}
		if len(v) > 0 {
			m[n] = median(v)
		}
	}
	pick := func(f func(sample) float64) float64 {
		v := make([]float64, len(ss))
		for i, s := range ss {
			v[i] = f(s)
		}
		return median(v)
	}
	// after the last mark: os.Exit, the kernel tearing the process down, the parent's wait
	m["teardown"] = pick(func(s sample) float64 {
		sum := 0.0
		for _, v := range s.phases {
			sum += v
		}
		return s.wall - sum
	})
	m["wall"] = pick(func(s sample) float64 { return s.wall })
	m["cpu"] = pick(func(s sample) float64 { return s.cpu })
	m["rss_mib"] = pick(func(s sample) float64 { return s.rssKiB / 1024 })
	m["anon_mib"] = pick(func(s sample) float64 { return s.mem["RssAnon"] / 1024 })
	m["file_mib"] = pick(func(s sample) float64 { return (s.mem["RssFile"] + s.mem["RssShmem"]) / 1024 })
	return m
}

func median(v []float64) float64 {
	sort.Float64s(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

func ms(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

func tv(t syscall.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}
