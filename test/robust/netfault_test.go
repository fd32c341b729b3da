package robust

// The network fault table: a TCP proxy between the agent and tenancy that reads each HTTP
// request and, when a rule matches, answers it with a fault instead of (or while) passing it
// on. Every faulted tick must end within its bound with the right exit code and leave the
// state, `current` and the releases as they were.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tikali/monky-deployd/store"
)

type faultKind string

const (
	fLatency   faultKind = "latency 300ms"
	fReset     faultKind = "connection reset"
	fSilent    faultKind = "timeout, no answer"
	fTruncated faultKind = "truncated body"
	fSlow      faultKind = "1 byte/s body"
	f429Secs   faultKind = "429 Retry-After seconds"
	f429Date   faultKind = "429 Retry-After HTTP date"
	f429Huge   faultKind = "429 Retry-After past the cap"
	f503       faultKind = "503"
)

// faultProxy forwards to upstream; requests whose path contains match get fault.
type faultProxy struct {
	ln       net.Listener
	upstream string
	mu       sync.Mutex
	match    string
	fault    faultKind
	hits     int
	wg       sync.WaitGroup
	conns    map[net.Conn]bool
	// seen, when set, gets every request as it arrived (head and body): the soak scans them
	seen func(dump []byte)
}

func newProxy(t testing.TB, upstream string) *faultProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{ln: ln, upstream: upstream, conns: map[net.Conn]bool{}}
	go p.serve()
	t.Cleanup(p.close)
	return p
}

func (p *faultProxy) set(match string, f faultKind) {
	p.mu.Lock()
	p.match, p.fault, p.hits = match, f, 0
	p.mu.Unlock()
}

func (p *faultProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	for c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *faultProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns[c] = true
		p.mu.Unlock()
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(c)
			c.Close()
			p.mu.Lock()
			delete(p.conns, c)
			p.mu.Unlock()
		}()
	}
}

func (p *faultProxy) handle(c net.Conn) {
	br := bufio.NewReader(c)
	for {
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		body, _ := io.ReadAll(req.Body)
		req.Body.Close()
		p.mu.Lock()
		if p.seen != nil {
			head, _ := httputil.DumpRequest(req, false)
			p.seen(append(head, body...))
		}
		fault := faultKind("")
		if p.match != "" && strings.Contains(req.URL.Path, p.match) {
			fault = p.fault
			p.hits++
		}
		p.mu.Unlock()
		switch fault {
		case fReset:
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0)
			}
			return
		case fSilent:
			_, _ = io.Copy(io.Discard, c) // never answer; the agent's timeout must end it
			return
		case f429Secs, f429Date, f429Huge, f503:
			code, ra := http.StatusTooManyRequests, "120"
			switch fault {
			case f429Date:
				ra = time.Now().Add(150 * time.Second).UTC().Format(http.TimeFormat)
			case f429Huge:
				ra = "86400"
			case f503:
				code, ra = http.StatusServiceUnavailable, ""
			}
			msg := `{"error":"injected"}`
			hdr := fmt.Sprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n", code, http.StatusText(code), len(msg))
			if ra != "" {
				hdr += "Retry-After: " + ra + "\r\n"
			}
			if _, err := io.WriteString(c, hdr+"\r\n"+msg); err != nil {
				return
			}
			continue
		}
		if fault == fLatency {
			time.Sleep(300 * time.Millisecond)
		}
		resp, err := p.forward(req, body)
		if err != nil {
			return
		}
		switch fault {
		case fTruncated:
			_, _ = c.Write(resp[:len(resp)-len(resp)/3])
			return
		case fSlow:
			for i := range resp {
				if _, err := c.Write(resp[i : i+1]); err != nil {
					return
				}
				time.Sleep(time.Second)
			}
			return
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

// forward sends one request upstream on a fresh connection and returns the raw response.
func (p *faultProxy) forward(req *http.Request, body []byte) ([]byte, error) {
	up, err := net.DialTimeout("tcp", p.upstream, 5*time.Second)
	if err != nil {
		return nil, err
	}
	defer up.Close()
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.Close = true
	if err := req.Write(up); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(up), req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return httputil.DumpResponse(resp, true)
}

// proxied points the box's tenancy at a fault proxy with a 2 s call timeout.
func proxied(t *testing.T, b *box) *faultProxy {
	raw, err := os.ReadFile(b.Config())
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`(?m)^  base_url: "http://([^"]+)"$`)
	m := re.FindSubmatch(raw)
	if m == nil {
		t.Fatalf("no tenancy base_url in the kit config:\n%s", raw)
	}
	p := newProxy(t, string(m[1]))
	cfg := re.ReplaceAll(raw, []byte(`  base_url: "http://`+p.ln.Addr().String()+`"`+"\n  timeout_s: 2"))
	cfg = append(cfg, []byte("\n")...)
	cfg = regexp.MustCompile(`(?m)^bao:$`).ReplaceAll(cfg, []byte("bao:\n  timeout_s: 2"))
	if err := os.WriteFile(b.Config(), cfg, 0o640); err != nil {
		t.Fatal(err)
	}
	return p
}

// snapshot is what a faulted tick may not change.
type snapshot struct {
	applied, current string
	releases         []string
}

func (b *box) snap() snapshot {
	cur, _ := os.Readlink(filepath.Join(b.deployDir(), "current"))
	rels, _ := filepath.Glob(filepath.Join(b.deployDir(), "releases", "*"))
	for i := range rels {
		rels[i] = filepath.Base(rels[i])
	}
	s := snapshot{current: cur, releases: rels}
	if _, err := os.Stat(filepath.Join(b.StateDir, "state.db")); err == nil {
		s.applied = b.status().AppliedSha
	}
	return s
}

func (b *box) leaseRetryAfter(t *testing.T) time.Time {
	db, err := store.OpenBolt(filepath.Join(b.StateDir, "state.db"), store.BoltOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	var at time.Time
	if err := db.View(func(tx store.Tx) error {
		r, err := tx.Record()
		at = r.LeaseRetryAfter
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return at
}

func TestNetworkFaults(t *testing.T) {
	const bound = 12 * time.Second // 2 s call timeouts; a tick makes a handful of calls
	cases := []struct {
		match  string // the path the faults hit
		faults []faultKind
		first  bool // on a fresh box (the lease happens only there)
		exit   int  // a refused lease is not fatal: the apply goes on with the bootstrap token
	}{
		{"/v1/agent/", []faultKind{fLatency}, false, 0},
		{"/v1/agent/checkin", []faultKind{fReset, fSilent, f503}, false, 75},
		{"/bundle", []faultKind{fReset, fTruncated, fSlow, fSilent, f503}, false, 75},
		{"/v1/agent/lease", []faultKind{f429Secs, f429Date, f429Huge}, true, 0},
	}
	tried := 0
	for _, tc := range cases {
		for _, fault := range tc.faults {
			t.Run(strings.ReplaceAll(string(fault)+" on "+tc.match, "/", "_"), func(t *testing.T) {
				b := startBox(t)
				p := proxied(t, b)
				b.Desire("v1")
				if !tc.first {
					if r := b.tick(); r.Code != 0 {
						t.Fatalf("setup tick: exit %d: %s", r.Code, r.Stderr)
					}
					b.Desire("v2")
				}
				before := b.snap()
				leasesBefore := b.Counts().Leases
				p.set(tc.match, fault)
				start := time.Now()
				r := b.tick()
				took := time.Since(start)
				p.mu.Lock()
				hits := p.hits
				p.mu.Unlock()
				p.set("", "")
				tried++
				if took > bound {
					t.Errorf("tick took %v, bound %v", took, bound)
				}
				if r.Code != tc.exit {
					t.Errorf("exit %d, want %d; stderr:\n%s", r.Code, tc.exit, r.Stderr)
				}
				if tc.exit != 0 {
					if after := b.snap(); fmt.Sprint(after) != fmt.Sprint(before) {
						t.Errorf("a faulted tick changed the box: %+v → %+v", before, after)
					}
					if len(before.releases) == 1 && tc.match == "/bundle" {
						if rels, _ := filepath.Glob(filepath.Join(b.deployDir(), "releases", "*")); len(rels) != 1 {
							t.Errorf("a partial download was promoted: %v", rels)
						}
					}
				}
				if strings.HasPrefix(string(fault), "429") {
					ra := b.leaseRetryAfter(t)
					wait := ra.Sub(start)
					want := map[faultKind][2]time.Duration{
						f429Secs: {110 * time.Second, 130 * time.Second},
						f429Date: {130 * time.Second, 160 * time.Second},
						f429Huge: {59 * time.Minute, 61 * time.Minute}, // the cap: one lease window
					}[fault]
					if wait < want[0] || wait > want[1] {
						t.Errorf("lease retry-after %v from now, want within %v", wait.Round(time.Second), want)
					}
					// honoured: the next apply, inside Retry-After, asks tenancy for no lease
					b.Desire("v2")
					r := b.tick()
					if got := b.Counts().Leases; got != leasesBefore {
						t.Errorf("leases %d → %d: a lease was asked inside Retry-After", leasesBefore, got)
					}
					if r.Code != 0 {
						t.Errorf("the apply inside Retry-After: exit %d, want 0 (the current token serves): %s", r.Code, r.Stderr)
					}
				}
				// and once the network heals the apply completes
				if tc.exit != 0 && !strings.HasPrefix(string(fault), "429") {
					if r := b.tick(); r.Code != 0 {
						t.Errorf("healed tick: exit %d: %s", r.Code, r.Stderr)
					}
					if st := b.status(); st.State != "Reported" || st.AppliedSha == before.applied {
						t.Errorf("after healing: state %q applied %.12s", st.State, st.AppliedSha)
					}
				}
				if hits == 0 {
					t.Errorf("the fault never fired: no request matched %s", tc.match)
				}
			})
		}
	}
	t.Logf("network faults tried: %d", tried)
}
