package docker

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/tikali/monky-deployd/effects"
)

func TestParsePSShapes(t *testing.T) {
	want := []effects.Container{
		{Name: "monky-env-qa-02-api-1", Service: "api", State: "running", Health: "healthy", ID: "1"},
		{Name: "monky-env-qa-02-worker-1", Service: "worker", State: "exited", Health: "", ExitCode: 1, ID: "2"},
	}
	array := `[{"ID":"1","Name":"monky-env-qa-02-api-1","Service":"api","State":"running","Health":"healthy","Publishers":[]},` +
		`{"ID":"2","Name":"monky-env-qa-02-worker-1","Service":"worker","State":"exited","Health":"","ExitCode":1}]` + "\n"
	ndjson := `{"ID":"1","Name":"monky-env-qa-02-api-1","Service":"api","State":"running","Health":"healthy","Publishers":[]}` + "\n" +
		`{"ID":"2","Name":"monky-env-qa-02-worker-1","Service":"worker","State":"exited","Health":"","ExitCode":1}` + "\n"
	for name, in := range map[string]string{"array": array, "ndjson": ndjson, "ndjson crlf": strings.ReplaceAll(ndjson, "\n", "\r\n")} {
		got, err := ParsePS([]byte(in))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, %v", name, got, err)
		}
	}
	for _, empty := range []string{"", "\n", "  \n", "[]", "[]\n"} {
		got, err := ParsePS([]byte(empty))
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("%q: got %#v, %v", empty, got, err)
		}
	}
	for _, bad := range []string{"not json", `[{"Name":1}]`, `{"Name":"a"`, `{"Name":"a"} garbage`} {
		if _, err := ParsePS([]byte(bad)); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// The same containers printed both ways parse equal.
func TestParsePSFormsAgree(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	words := []string{"", "api", "worker", "running", "exited", "healthy", "unhealthy", "starting", "ü-ñ", `quote"d`, "new\nline"}
	pick := func() string { return words[rng.Intn(len(words))] }
	for i := 0; i < 200; i++ {
		n := rng.Intn(6)
		cs := make([]effects.Container, n)
		for j := range cs {
			cs[j] = effects.Container{Name: pick(), Service: pick(), State: pick(), Health: pick(), ID: pick()}
		}
		arr, nd := render(t, cs)
		a, errA := ParsePS(arr)
		b, errB := ParsePS(nd)
		if errA != nil || errB != nil || !reflect.DeepEqual(a, b) || !reflect.DeepEqual(a, cs) {
			t.Fatalf("containers %+v: array %+v (%v), ndjson %+v (%v)", cs, a, errA, b, errB)
		}
	}
}

func render(t testing.TB, cs []effects.Container) (array, ndjson []byte) {
	rows := make([]psRow, len(cs))
	for i, c := range cs {
		rows[i] = psRow{Name: c.Name, Service: c.Service, State: c.State, Health: c.Health, ExitCode: c.ExitCode, Status: c.Status, ID: c.ID}
	}
	array, err := json.Marshal(rows)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		b, _ := json.Marshal(r)
		ndjson = append(append(ndjson, b...), '\n')
	}
	return array, ndjson
}

func FuzzParsePS(f *testing.F) {
	f.Add([]byte(`[{"Name":"a","Service":"api","State":"running","Health":"healthy"}]`))
	f.Add([]byte("{\"Name\":\"a\",\"Service\":\"api\",\"State\":\"running\"}\n{\"Name\":\"b\"}\n"))
	f.Add([]byte(""))
	f.Add([]byte("null"))
	f.Fuzz(func(t *testing.T, out []byte) {
		cs, err := ParsePS(out)
		if err != nil {
			return
		}
		arr, nd := render(t, cs)
		a, errA := ParsePS(arr)
		b, errB := ParsePS(nd)
		if errA != nil || errB != nil || !reflect.DeepEqual(a, cs) || !reflect.DeepEqual(b, cs) {
			t.Fatalf("re-rendered %+v: array %+v (%v), ndjson %+v (%v)", cs, a, errA, b, errB)
		}
	})
}
