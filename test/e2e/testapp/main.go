// Command testapp is the one program of the e2e suite's test images: it serves HTTP on
// $LISTEN (default :8080) with /healthz, and `testapp -health` is the image's HEALTHCHECK,
// asking that endpoint. With UNHEALTHY=1 it answers /healthz with 500 and prints, as a broken
// service might, the DB_PASSWORD it was given: the agent must mask it in a failed report.
//
// Run by `docker exec` inside a running container, it does what a compromised service would try
// (the image has no shell): `testapp -plant <path>` replaces path with a symlink to /, and
// `testapp -ls <dir>` prints the names dir holds, one a line, so a test asserts what a
// container can see and do. `testapp -hog <MiB>` touches that much memory and waits: under a
// mem_limit below it, the kernel kills it (exit 137).
//
// It is built static (CGO_ENABLED=0) into a layer with no base image; it may not dial anything
// but its own port.
package main

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"time"
)

func main() {
	health := flag.Bool("health", false, "ask the running server's /healthz and exit 0 when it answers 200")
	plant := flag.String("plant", "", "replace `path` with a symlink to / and exit")
	ls := flag.String("ls", "", "print the names in `dir`, one a line, and exit")
	hog := flag.Int("hog", 0, "touch `MiB` of memory, then wait: a service its mem_limit has the kernel kill")
	exitAfter := flag.Duration("exit-after", 0, "serve, then exit 1 after `d`: a crash its restart policy brings back, slower than any gate")
	flag.Parse()
	if *exitAfter > 0 {
		time.AfterFunc(*exitAfter, func() {
			fmt.Fprintln(os.Stderr, "exit-after: crashing")
			os.Exit(1)
		})
	}
	switch {
	case *hog > 0:
		held := make([][]byte, 0, *hog)
		for i := 0; i < *hog; i++ {
			b := make([]byte, 1<<20)
			for j := range b {
				b[j] = byte(j)
			}
			held = append(held, b)
		}
		fmt.Printf("holding %d MiB\n", len(held))
		select {}
	case *plant != "":
		if err := os.RemoveAll(*plant); err != nil {
			fmt.Fprintln(os.Stderr, "plant:", err)
			os.Exit(1)
		}
		if err := os.Symlink("/", *plant); err != nil {
			fmt.Fprintln(os.Stderr, "plant:", err)
			os.Exit(1)
		}
		fmt.Printf("planted %s → /\n", *plant)
		return
	case *ls != "":
		entries, err := os.ReadDir(*ls)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ls:", err)
			os.Exit(1)
		}
		for _, e := range entries {
			fmt.Println(e.Name())
		}
		return
	}
	addr := os.Getenv("LISTEN")
	if addr == "" {
		addr = ":8080"
	}
	if *health {
		c := &http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get("http://127.0.0.1" + addr + "/healthz")
		if err != nil {
			fmt.Fprintln(os.Stderr, "health:", err)
			os.Exit(1)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			fmt.Fprintln(os.Stderr, "health: status", resp.StatusCode)
			os.Exit(1)
		}
		return
	}
	unhealthy := os.Getenv("UNHEALTHY") == "1"
	fmt.Printf("testapp %s (role %s) listening on %s\n", os.Getenv("APP_VERSION"), os.Getenv("ROLE"), addr)
	if unhealthy {
		fmt.Printf("cannot reach the database with password %s\n", os.Getenv("DB_PASSWORD"))
	}
	http.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if unhealthy {
			http.Error(w, "database unreachable", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	if err := http.ListenAndServe(addr, nil); err != nil {
		fmt.Fprintln(os.Stderr, "listen:", err)
		os.Exit(1)
	}
}
