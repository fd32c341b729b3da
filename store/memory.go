package store

import (
	"bytes"
	"maps"
	"slices"
	"sync"
)

// Memory is a Store kept in memory, for tests of the machine and the commands. It keeps the
// same buckets and JSON values as Bolt, so what a test reads back is what the file would hold.
// An Update runs on a copy that replaces the current state only when fn returns nil.
type Memory struct {
	mu      sync.RWMutex
	buckets map[string]map[string][]byte
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store.
func NewMemory() *Memory {
	m := &Memory{buckets: make(map[string]map[string][]byte, len(allBuckets))}
	for _, name := range allBuckets {
		m.buckets[name] = make(map[string][]byte)
	}
	return m
}

// Update runs fn on a copy of the state and keeps the copy only when fn returns nil.
// A bucket is copied the first time the transaction asks for it.
func (m *Memory) Update(fn func(Tx) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := &memTx{buckets: m.buckets, writable: true, copied: map[string]map[string][]byte{}}
	if err := fn(&tx{kv: t}); err != nil {
		return err
	}
	next := make(map[string]map[string][]byte, len(m.buckets))
	for name, b := range m.buckets {
		next[name] = b
	}
	for name, b := range t.copied {
		next[name] = b
	}
	m.buckets = next
	return nil
}

// View runs fn on the current state; writes fail.
func (m *Memory) View(fn func(Tx) error) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return fn(&tx{kv: &memTx{buckets: m.buckets}})
}

// memTx reads the committed buckets; a writable one works on copies (copied), made on first use.
// Values are never changed in place (put stores a fresh slice), so copying a map is enough.
type memTx struct {
	buckets  map[string]map[string][]byte
	writable bool
	copied   map[string]map[string][]byte
}

func (t *memTx) bucket(name string) kvBucket {
	if !t.writable {
		return memBucket{m: t.buckets[name]} // a nil map reads as empty
	}
	b, ok := t.copied[name]
	if !ok {
		b = make(map[string][]byte, len(t.buckets[name]))
		for k, v := range t.buckets[name] {
			b[k] = v
		}
		t.copied[name] = b
	}
	return memBucket{m: b, writable: true}
}

type memBucket struct {
	m        map[string][]byte
	writable bool
}

func (b memBucket) get(k []byte) []byte {
	v, ok := b.m[string(k)]
	if !ok {
		return nil
	}
	return v
}

func (b memBucket) put(k, v []byte) error {
	if !b.writable {
		return errNotWritable
	}
	b.m[string(k)] = append([]byte{}, v...)
	return nil
}

func (b memBucket) del(k []byte) error {
	if !b.writable {
		return errNotWritable
	}
	delete(b.m, string(k))
	return nil
}

func (b memBucket) ascend(from []byte, fn func(k, v []byte) (bool, error)) error {
	for _, k := range slices.Sorted(maps.Keys(b.m)) {
		if from != nil && bytes.Compare([]byte(k), from) < 0 {
			continue
		}
		more, err := fn([]byte(k), b.m[k])
		if err != nil || !more {
			return err
		}
	}
	return nil
}

func (b memBucket) descend(fn func(k, v []byte) (bool, error)) error {
	keys := slices.Sorted(maps.Keys(b.m))
	for i := len(keys) - 1; i >= 0; i-- {
		more, err := fn([]byte(keys[i]), b.m[keys[i]])
		if err != nil || !more {
			return err
		}
	}
	return nil
}
