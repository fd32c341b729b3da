// Command promcheck parses a node_exporter textfile with Prometheus' own text parser and prints
// every sample as one line, `name{label="value",…} value`, sorted, for the systemd suite to assert
// on. A file that does not parse, or holds no sample, exits 1 with the parser's error.
//
//	promcheck FILE
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: promcheck FILE")
		os.Exit(2)
	}
	lines, err := samples(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "promcheck:", err)
		os.Exit(1)
	}
	fmt.Print(strings.Join(lines, "\n") + "\n")
}

func samples(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(f)
	if err != nil {
		return nil, fmt.Errorf("%s does not parse: %w", path, err)
	}
	var out []string
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			out = append(out, name+labels(m)+" "+value(mf.GetType(), m))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no sample", path)
	}
	sort.Strings(out)
	return out, nil
}

func labels(m *dto.Metric) string {
	if len(m.GetLabel()) == 0 {
		return ""
	}
	var ls []string
	for _, l := range m.GetLabel() {
		ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
	}
	sort.Strings(ls)
	return "{" + strings.Join(ls, ",") + "}"
}

func value(t dto.MetricType, m *dto.Metric) string {
	switch t {
	case dto.MetricType_COUNTER:
		return fmt.Sprint(m.GetCounter().GetValue())
	case dto.MetricType_GAUGE:
		return fmt.Sprint(m.GetGauge().GetValue())
	default:
		return fmt.Sprint(m.GetUntyped().GetValue())
	}
}
