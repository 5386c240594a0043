package codec

import (
	"fmt"
	"strings"
	"testing"
	"unsafe"

	"github.com/bytedance/sonic/decoder"
)

func TestScratch(t *testing.T) {
	cases := []string{
		"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"a\x01\"}",
		`{"jsonrpc":"2.0","id":7,"method":5}`,
		`{"jsonrpc":"2.0","id":7,"method":5,"x":[}`,
		`{"jsonrpc":"2.0","id":7,"method":5} x`,
		`{"jsonrpc":"2.0","id":7,"method":5,"jsonrpc":3}`,
	}
	for _, c := range cases {
		var m Message
		d := decoder.NewDecoder(c)
		d.SetOptions(noCopyOpts)
		err := d.Decode(&m)
		t.Logf("%q -> %T %v | %+v", c, err, err, m)
	}
	for _, depth := range []int{100, 1000, 4000, 4095, 4096, 4097, 5000, 10000} {
		c := `{"jsonrpc":"2.0","id":1,"method":"a","params":` + strings.Repeat("[", depth) + strings.Repeat("]", depth) + `}`
		var m Message
		err := Decode([]byte(c), &m)
		t.Logf("depth %d: %v valid=%v", depth, err, validJSON([]byte(c)))
		p := strings.Repeat("[", depth) + strings.Repeat("]", depth)
		var v any
		err = Unmarshal([]byte(p), &v)
		t.Logf("  unmarshal any %d: %v", depth, err)
	}
	_ = fmt.Sprint
	_ = unsafe.Pointer(nil)
}
