package redact

import (
	"bytes"
	"encoding/json"
)

// JSON returns the JSON document raw with every string value masked (object keys are the
// writer's own names and stay), its shape and member order unchanged: a masked value never breaks
// the document, whatever escapes the secret takes in it. It returns raw itself when nothing was
// masked; what is not one JSON value (nothing, say) is masked as text.
func (r *Redactor) JSON(raw []byte) []byte {
	if !json.Valid(raw) {
		return r.Bytes(raw)
	}
	var b bytes.Buffer
	if err := r.json(&b, raw); err != nil || bytes.Equal(b.Bytes(), raw) {
		return raw // err: json.Valid said it decodes
	}
	return b.Bytes()
}

func (r *Redactor) json(b *bytes.Buffer, raw json.RawMessage) error {
	raw = bytes.TrimSpace(raw)
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return err
		}
		if m := r.String(s); m != s {
			return encode(b, m)
		}
		b.Write(raw)
	case '[':
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return err
		}
		b.WriteByte('[')
		for i, it := range items {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := r.json(b, it); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case '{':
		dec := json.NewDecoder(bytes.NewReader(raw))
		if _, err := dec.Token(); err != nil {
			return err
		}
		b.WriteByte('{')
		for first := true; dec.More(); first = false {
			k, err := dec.Token()
			if err != nil {
				return err
			}
			var v json.RawMessage
			if err := dec.Decode(&v); err != nil {
				return err
			}
			if !first {
				b.WriteByte(',')
			}
			if err := encode(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := r.json(b, v); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		b.Write(raw) // a number, true, false or null
	}
	return nil
}

// encode writes v as encoding/json marshals it (HTML characters escaped, as json.Marshal does).
func encode(b *bytes.Buffer, v any) error {
	s, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b.Write(s)
	return nil
}
