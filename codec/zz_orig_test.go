package codec

import (
	"bytes"
	"testing"
)

func decodeOrig(data []byte, m *Message) error {
	*m = Message{}
	i := skipWS(data, 0)
	if i >= len(data) {
		return ErrParse
	}
	if data[i] != '{' {
		if data[i] == '[' || validJSON(data) {
			if validJSON(data) {
				return ErrInvalidRequest
			}
		}
		return ErrParse
	}
	if err := decodeNoCopy(data, m); err != nil {
		if validJSON(data) {
			m.Kind = KindInvalid
			if !validID(m.ID) {
				m.ID = nil
			}
			return ErrInvalidRequest
		}
		*m = Message{}
		return ErrParse
	}
	return m.classifyOrig()
}

func (m *Message) classifyOrig() error {
	if m.JSONRPC != "2.0" {
		if !validID(m.ID) {
			m.ID = nil
		}
		return ErrInvalidRequest
	}
	hasID := m.ID != nil
	if hasID && !validID(m.ID) {
		m.ID = nil
		return ErrInvalidRequest
	}
	switch {
	case m.Method != "":
		if m.Result != nil || m.Error != nil {
			return ErrInvalidRequest
		}
		if len(m.Params) > 0 && m.Params[0] != '{' && m.Params[0] != '[' {
			if !bytes.Equal(m.Params, nullJSON) {
				return ErrInvalidRequest
			}
			m.Params = nil
		}
		if hasID {
			if bytes.Equal(m.ID, nullJSON) {
				return ErrInvalidRequest
			}
			m.Kind = KindRequest
		} else {
			m.Kind = KindNotification
		}
		return nil
	case m.Error != nil:
		if !hasID || m.Result != nil || m.Error[0] != '{' {
			return ErrInvalidRequest
		}
		m.Kind = KindError
		return nil
	case m.Result != nil:
		if !hasID || bytes.Equal(m.ID, nullJSON) {
			return ErrInvalidRequest
		}
		m.Kind = KindResponse
		return nil
	}
	return ErrInvalidRequest
}

func BenchmarkZOrig(b *testing.B) {
	b.ReportAllocs()
	var m Message
	for b.Loop() {
		if err := decodeOrig(benchCall, &m); err != nil {
			b.Fatal(err)
		}
	}
}
func BenchmarkZNew(b *testing.B) {
	b.ReportAllocs()
	var m Message
	for b.Loop() {
		if err := Decode(benchCall, &m); err != nil {
			b.Fatal(err)
		}
	}
}
