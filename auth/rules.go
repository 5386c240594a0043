package auth

import (
	"errors"
	"fmt"
	"strconv"
	"sync"

	"cel.dev/cel-go/cel"
	"cel.dev/cel-go/ext"

	"github.com/mcpedge/mcpedge/handlers"
)

// Authorization rules narrow what each caller sees and may use: allow and
// deny rules on tools, prompts and resources, by name or URI pattern, for
// the callers whose token a CEL condition selects (docs/authorization.md).
//
// A caller's rules are evaluated once per verified token, never per
// request: which rules' conditions hold for it is its policy Class,
// computed when its token is verified (or rechecked after a reload) and
// kept with its Info. The engine serves its lists, and checks the items
// its requests name, against the registry's view for that class
// (handlers.Class): sets of items and pages encoded once per class and
// registry change.

// Limits of rules, which CompileRules enforces.
const (
	// MaxRules is the most rules a policy holds.
	MaxRules = 256
	// MaxRuleExpr bounds a rule's When, in bytes.
	MaxRuleExpr = 4 << 10
	// MaxRulePatterns bounds the patterns of a rule, and MaxPatternLen
	// each one, in bytes.
	MaxRulePatterns = 1024
	MaxPatternLen   = 1 << 10
	// RuleCostLimit bounds the evaluation of a rule's When on one token
	// (CEL's cost units, about one per operation and element visited): an
	// expression that would cost more fails, on that token (Rule.When).
	RuleCostLimit = 100_000
	// DefaultMaxClasses is the number of policy classes kept when
	// CompileRules is given none.
	DefaultMaxClasses = handlers.DefaultMaxClasses
)

// ErrRules wraps every error of CompileRules.
var ErrRules = errors.New("auth: rules")

// Rule is an authorization rule, as configured. The rules of a policy are
// read in order: the first whose items include an item and whose
// condition holds for a caller decides whether that caller may see and
// use it; an item no rule decides is allowed. A policy that allows only
// what its rules allow ends with a rule denying everything
// (Tools, Prompts and Resources ["*"], no When).
type Rule struct {
	// Effect is "allow" or "deny".
	Effect string
	// Tools and Prompts are patterns of the names of the tools and
	// prompts the rule is about; Resources of the URIs of resources and
	// the URI templates of resource templates. In a pattern * matches
	// any run of characters, / included, and any other character
	// itself. A rule names at least one pattern.
	Tools, Prompts, Resources []string
	// When is a CEL expression of type bool about the caller: subject
	// (string: the token's sub, static:N for a static token), client_id
	// (string), scopes (list of strings: those the token grants) and
	// claims (map: every claim of a JWT, every member of an
	// introspection answer, none for a static token). The rule applies
	// to the callers for whom it is true; empty, to every caller. An
	// expression that fails on a caller's token (a claim it lacks,
	// more than RuleCostLimit) applies a deny rule and not an allow
	// rule: a failure never widens what a caller may use.
	When string
}

// Rules is a compiled policy: rules whose conditions are compiled once,
// and the classes of callers met so far. A Config carries it
// (Config.Rules); a Verifier applies the Rules of its configuration.
// Safe for concurrent use; immutable but for its classes.
type Rules struct {
	rules      []rule
	maxClasses int

	mu      sync.Mutex
	classes map[classBits]*Class // interned, at most maxClasses; under mu
}

// rule is a compiled Rule.
type rule struct {
	allow     bool
	tools     []string
	prompts   []string
	resources []string
	when      cel.Program // nil: every caller
}

type classBits [MaxRules / 64]uint64

// ruleEnv is the CEL environment of When: its variables and the
// standard library with the strings and sets extensions.
var ruleEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable("subject", cel.StringType),
		cel.Variable("client_id", cel.StringType),
		cel.Variable("scopes", cel.ListType(cel.StringType)),
		cel.Variable("claims", cel.MapType(cel.StringType, cel.DynType)),
		ext.Strings(),
		ext.Sets(),
		cel.ParserExpressionSizeLimit(MaxRuleExpr),
		cel.ParserRecursionLimit(64),
	)
})

// CompileRules compiles rules into a policy that keeps at most
// maxClasses classes of callers (<= 0: DefaultMaxClasses; past it a
// class is computed for each token, still right but shared by no one).
// No rules is a nil policy. Each error wraps ErrRules and names the rule
// (its position, from 1) and what is wrong: an effect other than allow
// or deny, no pattern, a pattern too long, an expression that does not
// compile or is not of type bool.
func CompileRules(rules []Rule, maxClasses int) (*Rules, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	if len(rules) > MaxRules {
		return nil, fmt.Errorf("%w: %d rules, at most %d", ErrRules, len(rules), MaxRules)
	}
	if maxClasses <= 0 {
		maxClasses = DefaultMaxClasses
	}
	env, err := ruleEnv()
	if err != nil {
		return nil, fmt.Errorf("%w: CEL environment: %w", ErrRules, err)
	}
	p := &Rules{rules: make([]rule, len(rules)), maxClasses: maxClasses, classes: map[classBits]*Class{}}
	for i, r := range rules {
		c, err := compileRule(env, &r)
		if err != nil {
			return nil, fmt.Errorf("%w: rule %d: %w", ErrRules, i+1, err)
		}
		p.rules[i] = c
	}
	return p, nil
}

func compileRule(env *cel.Env, r *Rule) (rule, error) {
	var c rule
	switch r.Effect {
	case "allow":
		c.allow = true
	case "deny":
	default:
		return c, fmt.Errorf("effect %q: allow or deny", r.Effect)
	}
	n := len(r.Tools) + len(r.Prompts) + len(r.Resources)
	if n == 0 {
		return c, errors.New("no tools, prompts or resources: name at least one pattern (\"*\" for all)")
	}
	if n > MaxRulePatterns {
		return c, fmt.Errorf("%d patterns, at most %d", n, MaxRulePatterns)
	}
	for _, list := range [][]string{r.Tools, r.Prompts, r.Resources} {
		for _, p := range list {
			if p == "" || len(p) > MaxPatternLen {
				return c, fmt.Errorf("pattern %q: empty or longer than %d bytes", truncate(p, 64), MaxPatternLen)
			}
		}
	}
	c.tools, c.prompts, c.resources = r.Tools, r.Prompts, r.Resources
	if r.When == "" {
		return c, nil
	}
	if len(r.When) > MaxRuleExpr {
		return c, fmt.Errorf("when: longer than %d bytes", MaxRuleExpr)
	}
	ast, iss := env.Compile(r.When)
	if iss.Err() != nil {
		return c, fmt.Errorf("when: %w", iss.Err())
	}
	if !ast.OutputType().IsExactType(cel.BoolType) {
		return c, fmt.Errorf("when: of type %s, not bool", ast.OutputType())
	}
	prg, err := env.Program(ast, cel.CostLimit(RuleCostLimit), cel.EvalOptions(cel.OptOptimize))
	if err != nil {
		return c, fmt.Errorf("when: %w", err)
	}
	c.when = prg
	return c, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// Len returns the number of rules (0 for nil).
func (p *Rules) Len() int {
	if p == nil {
		return 0
	}
	return len(p.rules)
}

// classOf evaluates every rule's condition for info and returns its
// class: the one interned for the same outcomes, or a new one when
// maxClasses are interned already. nil for a nil policy.
func (p *Rules) classOf(info *Info) *Class {
	if p == nil {
		return nil
	}
	var bits classBits
	var vars map[string]any
	for i := range p.rules {
		r := &p.rules[i]
		applies := true
		if r.when != nil {
			if vars == nil {
				vars = ruleVars(info)
			}
			out, _, err := r.when.Eval(vars)
			if err != nil {
				applies = !r.allow // a failure never widens access
			} else {
				b, ok := out.Value().(bool)
				applies = ok && b || !ok && !r.allow
			}
		}
		if applies {
			bits[i/64] |= 1 << (i % 64)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.classes[bits]; ok {
		return c
	}
	c := &Class{rules: p, bits: bits}
	if len(p.classes) < p.maxClasses {
		p.classes[bits] = c
	}
	return c
}

// ruleVars are the variables of When for info.
func ruleVars(info *Info) map[string]any {
	scopes := info.Scopes
	if scopes == nil {
		scopes = []string{}
	}
	claims := info.Claims()
	if claims == nil {
		claims = map[string]any{}
	}
	return map[string]any{"subject": info.Subject, "client_id": info.ClientID, "scopes": scopes, "claims": claims}
}

// A Class is a policy class: the callers for whom the same rules'
// conditions hold, who may therefore see and use the same items. It is
// the handlers.Class of its callers' requests (Verifier.Class).
type Class struct {
	rules *Rules
	bits  classBits
}

var _ handlers.Class = (*Class)(nil)

// Allows implements handlers.Class: the first rule that includes the
// item and applies to the class decides; an item no rule decides is
// allowed.
func (c *Class) Allows(list handlers.ListName, key string) bool {
	for i := range c.rules.rules {
		if c.bits[i/64]&(1<<(i%64)) == 0 {
			continue
		}
		r := &c.rules.rules[i]
		var pats []string
		switch list {
		case handlers.ListNameTools:
			pats = r.tools
		case handlers.ListNamePrompts:
			pats = r.prompts
		case handlers.ListNameResources, handlers.ListNameTemplates:
			pats = r.resources
		}
		for _, p := range pats {
			if Glob(p, key) {
				return r.allow
			}
		}
	}
	return true
}

// String describes the class by the rules that apply to it, for logs and
// tests: "rules 1,3".
func (c *Class) String() string {
	b := []byte("rules ")
	n := 0
	for i := range c.rules.rules {
		if c.bits[i/64]&(1<<(i%64)) != 0 {
			if n > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(i+1), 10)
			n++
		}
	}
	if n == 0 {
		b = append(b, "none"...)
	}
	return string(b)
}

// Glob reports whether name matches pattern, in which * matches any run
// of bytes (none included, / included) and every other byte itself. Its
// time is at most proportional to len(pattern) times len(name).
func Glob(pattern, name string) bool {
	px, nx := 0, 0
	// Where to restart after a mismatch: after the last *, one byte
	// further into name.
	nextPx, nextNx := 0, 0
	for px < len(pattern) || nx < len(name) {
		if px < len(pattern) {
			c := pattern[px]
			if c == '*' {
				nextPx, nextNx = px, nx+1
				px++
				continue
			}
			if nx < len(name) && name[nx] == c {
				px++
				nx++
				continue
			}
		}
		if 0 < nextNx && nextNx <= len(name) {
			px, nx = nextPx, nextNx
			continue
		}
		return false
	}
	return true
}
