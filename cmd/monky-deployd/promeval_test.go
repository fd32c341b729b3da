package main

// A small PromQL evaluator for the alert-rule tests: instant vectors over one scrape, the
// operators and functions the shipped rules use (selectors, number literals, time(),
// arithmetic, comparisons and and/or/unless with on(…)), over expressions parsed by
// Prometheus' own parser. Anything else is an error, so a rule that grows beyond it fails
// the test instead of passing untested. (promql's own engine needs its TSDB test storage,
// which brings most of Prometheus' dependency tree with it.)

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/prometheus/prometheus/promql/parser"
)

type promSample struct {
	labels map[string]string // with __name__
	v      float64
}

type promValue struct {
	scalar *float64
	vec    []promSample
}

func evalPromQL(e parser.Expr, db []promSample, now float64) (promValue, error) {
	switch e := e.(type) {
	case *parser.ParenExpr:
		return evalPromQL(e.Expr, db, now)
	case *parser.NumberLiteral:
		v := e.Val
		return promValue{scalar: &v}, nil
	case *parser.Call:
		if e.Func.Name == "time" && len(e.Args) == 0 {
			return promValue{scalar: &now}, nil
		}
		return promValue{}, fmt.Errorf("function %s is not supported here", e.Func.Name)
	case *parser.VectorSelector:
		var out []promSample
		for _, s := range db {
			ok := true
			for _, m := range e.LabelMatchers {
				if !m.Matches(s.labels[m.Name]) {
					ok = false
					break
				}
			}
			if ok {
				out = append(out, s)
			}
		}
		return promValue{vec: out}, nil
	case *parser.BinaryExpr:
		l, err := evalPromQL(e.LHS, db, now)
		if err != nil {
			return l, err
		}
		r, err := evalPromQL(e.RHS, db, now)
		if err != nil {
			return r, err
		}
		if e.ReturnBool {
			return promValue{}, fmt.Errorf("bool modifier is not supported here")
		}
		return evalBinary(e, l, r)
	}
	return promValue{}, fmt.Errorf("%T (%s) is not supported here", e, e)
}

func evalBinary(e *parser.BinaryExpr, l, r promValue) (promValue, error) {
	arith := map[parser.ItemType]func(a, b float64) float64{
		parser.ADD: func(a, b float64) float64 { return a + b },
		parser.SUB: func(a, b float64) float64 { return a - b },
		parser.MUL: func(a, b float64) float64 { return a * b },
		parser.DIV: func(a, b float64) float64 { return a / b },
	}
	cmp := map[parser.ItemType]func(a, b float64) bool{
		parser.EQLC: func(a, b float64) bool { return a == b },
		parser.NEQ:  func(a, b float64) bool { return a != b },
		parser.GTR:  func(a, b float64) bool { return a > b },
		parser.LSS:  func(a, b float64) bool { return a < b },
		parser.GTE:  func(a, b float64) bool { return a >= b },
		parser.LTE:  func(a, b float64) bool { return a <= b },
	}
	op := e.Op
	switch {
	case l.scalar != nil && r.scalar != nil:
		if f, ok := arith[op]; ok {
			v := f(*l.scalar, *r.scalar)
			return promValue{scalar: &v}, nil
		}
		return promValue{}, fmt.Errorf("scalar %s scalar is not supported here", op)
	case l.scalar != nil || r.scalar != nil:
		vec, sc, vecLeft := l.vec, r.scalar, true
		if l.scalar != nil {
			vec, sc, vecLeft = r.vec, l.scalar, false
		}
		var out []promSample
		for _, s := range vec {
			a, b := s.v, *sc
			if !vecLeft {
				a, b = b, a
			}
			if f, ok := arith[op]; ok {
				out = append(out, promSample{labels: dropName(s.labels), v: f(a, b)})
			} else if f, ok := cmp[op]; ok {
				if f(a, b) {
					out = append(out, s)
				}
			} else {
				return promValue{}, fmt.Errorf("vector %s scalar is not supported here", op)
			}
		}
		return promValue{vec: out}, nil
	}
	sig := func(s promSample) string {
		var keys []string
		if m := e.VectorMatching; m != nil && m.On {
			keys = m.MatchingLabels
		} else {
			if m != nil && len(m.MatchingLabels) > 0 {
				return "" // ignoring(…) is not used by the rules
			}
			for k := range s.labels {
				if k != "__name__" {
					keys = append(keys, k)
				}
			}
		}
		sort.Strings(keys)
		var b strings.Builder
		for _, k := range keys {
			fmt.Fprintf(&b, "%s=%q,", k, s.labels[k])
		}
		return b.String()
	}
	if m := e.VectorMatching; m != nil && !m.On && len(m.MatchingLabels) > 0 {
		return promValue{}, fmt.Errorf("ignoring(…) is not supported here")
	}
	right := map[string]promSample{}
	for _, s := range r.vec {
		right[sig(s)] = s
	}
	var out []promSample
	switch op {
	case parser.LAND, parser.LUNLESS:
		for _, s := range l.vec {
			if _, ok := right[sig(s)]; ok == (op == parser.LAND) {
				out = append(out, s)
			}
		}
		return promValue{vec: out}, nil
	case parser.LOR:
		out = append(out, l.vec...)
		left := map[string]bool{}
		for _, s := range l.vec {
			left[sig(s)] = true
		}
		for _, s := range r.vec {
			if !left[sig(s)] {
				out = append(out, s)
			}
		}
		return promValue{vec: out}, nil
	}
	if m := e.VectorMatching; m != nil && m.Card != parser.CardOneToOne {
		return promValue{}, fmt.Errorf("group_left/right is not supported here")
	}
	for _, s := range l.vec {
		rs, ok := right[sig(s)]
		if !ok {
			continue
		}
		if f, ok := arith[op]; ok {
			out = append(out, promSample{labels: dropName(s.labels), v: f(s.v, rs.v)})
		} else if f, ok := cmp[op]; ok {
			if f(s.v, rs.v) && !math.IsNaN(s.v) {
				out = append(out, s)
			}
		} else {
			return promValue{}, fmt.Errorf("vector %s vector is not supported here", op)
		}
	}
	return promValue{vec: out}, nil
}

func dropName(l map[string]string) map[string]string {
	out := make(map[string]string, len(l))
	for k, v := range l {
		if k != "__name__" {
			out[k] = v
		}
	}
	return out
}
