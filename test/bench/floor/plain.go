//go:build !design

package main

// mandates is empty in the plain floor: it does nothing beyond the check-in itself (the design
// floor's is in design.go).
type mandates struct{}

func designFlags() mandates    { return mandates{} }
func (mandates) before() error { return nil }
func (mandates) pin(string)    {}
func (mandates) after() error  { return nil }
