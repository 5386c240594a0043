package gateway

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// TestTaskTableBounded: the table of upstream tasks keeps at most
// maxTaskOwners, dropping the oldest; an expired route is dropped when
// looked up.
func TestTaskTableBounded(t *testing.T) {
	g := &Gateway{opts: Options{TaskTTL: time.Hour}}
	u := &upstream{}
	for i := range maxTaskOwners + 10 {
		g.noteTask(strconv.Itoa(i), u, u.stateless, 0, "sub:a")
	}
	assert.LessOrEqual(t, len(g.tasks), maxTaskOwners)
	assert.LessOrEqual(t, len(g.taskOrder), maxTaskOwners)
	_, ok := g.task("0", "sub:a")
	assert.False(t, ok, "the oldest went")
	r, ok := g.task(strconv.Itoa(maxTaskOwners+9), "sub:a")
	assert.True(t, ok)
	assert.Same(t, u, r.u)
	_, ok = g.task(strconv.Itoa(maxTaskOwners+9), "sub:b")
	assert.False(t, ok, "another caller's")

	g.tasks["late"] = taskRoute{u: u, owner: "sub:a", expires: nanotime() - 1}
	_, ok = g.task("late", "sub:a")
	assert.False(t, ok)
	assert.NotContains(t, g.tasks, "late", "dropped when found expired")
}
