package netlimit

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// fakeHolder holds n bytes until cut; cutting says it was cut already.
type fakeHolder struct {
	name string
	n    int64
	cut  bool
	b    *Budget
	log  *[]string
}

func (h *fakeHolder) Cut() {
	h.cut = true
	*h.log = append(*h.log, h.name)
}

// fakeSource lists its holders as a transport does.
type fakeSource []*fakeHolder

func (s fakeSource) AppendHeld(dst []Held) ([]Held, int64) {
	var cutting int64
	for _, h := range s {
		if h.cut {
			cutting += h.n
			continue
		}
		dst = append(dst, Held{N: h.n, Holder: h})
	}
	return dst, cutting
}

func TestBudgetCutsBiggestFirst(t *testing.T) {
	tests := []struct {
		name  string
		limit int64
		a, b  []int64 // two sources' holders
		cut   []string
	}{
		{"within", 100, []int64{30, 20}, []int64{50}, nil},
		{"the biggest alone", 100, []int64{30, 20}, []int64{60}, []string{"b0"}},
		{"across sources", 100, []int64{70, 40}, []int64{60, 5}, []string{"a0", "b0"}},
		{"no limit", 0, []int64{1000}, []int64{1000}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := NewBudget(tt.limit)
			var log []string
			mk := func(prefix string, ns []int64) fakeSource {
				var s fakeSource
				for i, n := range ns {
					s = append(s, &fakeHolder{name: prefix + string(rune('0'+i)), n: n, b: b, log: &log})
					b.Add(n)
				}
				return s
			}
			b.Attach(mk("a", tt.a))
			b.Attach(mk("b", tt.b))
			assert.Equal(t, len(tt.cut), b.Enforce())
			assert.Equal(t, tt.cut, log)
			assert.Equal(t, int64(len(tt.cut)), b.Cuts())
			// Cut holders have not released their bytes yet: enforcing
			// again cuts no one more.
			assert.Zero(t, b.Enforce())
			assert.Equal(t, tt.cut, log)
		})
	}
}

func TestBudgetWakesWhenOver(t *testing.T) {
	b := NewBudget(10)
	assert.False(t, b.Add(10))
	select {
	case <-b.Wake():
		t.Fatal("woken within the limit")
	default:
	}
	assert.True(t, b.Add(1))
	assert.True(t, b.Over())
	select {
	case <-b.Wake():
	default:
		t.Fatal("not woken over the limit")
	}
	assert.False(t, b.Add(-1), "a release never wakes")
	assert.Equal(t, int64(10), b.Total())
	b.SetLimit(5) // a reload lowers it: the enforcer is woken to cut
	select {
	case <-b.Wake():
	default:
		t.Fatal("not woken by a lower limit")
	}
	assert.True(t, b.Over())
}

func TestBudgetDetach(t *testing.T) {
	b := NewBudget(1)
	var log []string
	detach := b.Attach(fakeSource{{name: "x", n: 5, log: &log}})
	b.Add(5)
	detach()
	assert.Zero(t, b.Enforce(), "a detached source is not asked")
	assert.Empty(t, log)
}

func TestNilBudget(t *testing.T) {
	var b *Budget
	assert.False(t, b.Add(1))
	assert.False(t, b.Over())
	assert.Zero(t, b.Total())
	assert.Zero(t, b.Enforce())
	assert.Nil(t, b.Wake())
	b.SetLimit(1)
	b.Attach(fakeSource{})()
}

func TestDefaultBudgets(t *testing.T) {
	for _, v := range []int64{DefaultMaxBuffered(), DefaultMaxOutboundTotal()} {
		assert.GreaterOrEqual(t, v, int64(64<<20))
		assert.LessOrEqual(t, v, int64(1<<30))
	}
}
