package mcp_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcpedge/mcpedge/codec"
	"github.com/mcpedge/mcpedge/mcp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The encoders of this package are written by hand. These tests hold them
// to the wire format as encoding/json writes it from a plain model of the
// spec's shapes (refContent, refResult, refResourceContents below): the
// two outputs must decode to the same value. Byte equality is not the
// contract (encoding/json escapes <, > and &; codec.AppendString does
// not), validity and meaning are.

// refContent is the spec's shape of a content block, for encoding/json.
func refContent(c *mcp.Content) map[string]any {
	m := map[string]any{"type": c.Type}
	opt := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	switch c.Type {
	case mcp.ContentText:
		m["text"] = c.Text
	case mcp.ContentImage, mcp.ContentAudio:
		m["data"] = c.Data
		m["mimeType"] = c.MimeType
	case mcp.ContentResource:
		m["resource"] = refResourceContents(c.Resource)
	case mcp.ContentResourceLink:
		m["uri"] = c.URI
		m["name"] = c.Name
		opt("title", c.Title)
		opt("description", c.Description)
		opt("mimeType", c.MimeType)
		if c.Size != nil {
			m["size"] = *c.Size
		}
		if len(c.Icons) > 0 {
			m["icons"] = c.Icons
		}
	case mcp.ContentToolUse:
		m["id"] = c.ID
		m["name"] = c.Name
		m["input"] = json.RawMessage("{}")
		if len(c.Input) > 0 {
			m["input"] = json.RawMessage(c.Input)
		}
	case mcp.ContentToolResult:
		m["toolUseId"] = c.ToolUseID
		m["content"] = refContents(c.Content)
		if len(c.StructuredContent) > 0 {
			m["structuredContent"] = json.RawMessage(c.StructuredContent)
		}
		if c.IsError {
			m["isError"] = true
		}
	}
	if c.Annotations != nil {
		m["annotations"] = c.Annotations
	}
	if len(c.Meta) > 0 {
		m["_meta"] = json.RawMessage(c.Meta)
	}
	return m
}

func refContents(cs []mcp.Content) []any {
	out := []any{} // nil is written []
	for i := range cs {
		out = append(out, refContent(&cs[i]))
	}
	return out
}

func refResult(r *mcp.CallToolResult) map[string]any {
	m := map[string]any{"content": refContents(r.Content)}
	if len(r.StructuredContent) > 0 {
		m["structuredContent"] = json.RawMessage(r.StructuredContent)
	}
	if r.IsError {
		m["isError"] = true
	}
	if len(r.Meta) > 0 {
		m["_meta"] = json.RawMessage(r.Meta)
	}
	return m
}

// refResourceContents: "text" (even empty) for text contents, "blob" for
// blob contents, never both.
func refResourceContents(r *mcp.ResourceContents) map[string]any {
	m := map[string]any{"uri": r.URI}
	if r.MimeType != "" {
		m["mimeType"] = r.MimeType
	}
	if r.Blob != "" {
		m["blob"] = r.Blob
	} else {
		m["text"] = r.Text
	}
	if len(r.Meta) > 0 {
		m["_meta"] = json.RawMessage(r.Meta)
	}
	return m
}

// requireSameJSON checks that got is valid JSON, valid UTF-8, free of raw
// line breaks (newline and SSE framing carry it as it is), and equal in
// meaning to encoding/json's encoding of ref.
//
// Where every string went through codec.AppendString (no annotations or
// icons), U+2028 and U+2029 are escaped too, so that the output is also a
// JavaScript literal. The nested fields that go through codec.Marshal
// leave them raw: valid JSON, and no line break to the framings, so only
// the hand-written paths are held to it.
func requireSameJSON(t testing.TB, ref any, got []byte) {
	t.Helper()
	want, err := json.Marshal(ref)
	require.NoError(t, err)
	require.True(t, json.Valid(got), "not JSON: %q", got)
	require.True(t, utf8.Valid(got), "not UTF-8: %q", got)
	require.False(t, bytes.ContainsAny(got, "\n\r"), "a raw line break: %q", got)
	if !bytes.Contains(got, []byte(`"annotations":`)) && !bytes.Contains(got, []byte(`"icons":`)) {
		require.False(t, bytes.ContainsAny(got, "\u2028\u2029"), "a raw U+2028 or U+2029: %q", got)
	}
	var w, g any
	require.NoError(t, json.Unmarshal(want, &w))
	require.NoError(t, json.Unmarshal(got, &g))
	require.Equal(t, w, g, "\n got: %s\nwant: %s", got, want)
}

// hardStrings need escaping, or are easy to get wrong.
var hardStrings = []string{
	"",
	"plain",
	`"quoted" and \backslashed\`,
	"\x00\x01\x07\b\f\n\r\t\x1f\x7f",
	"line\u2028para\u2029end",
	"<script>&amp;</script>",
	"héllo wörld, 日本語, 🚀",
	"\xff",                 // an invalid byte
	"a\xe2\x80b",           // a truncated sequence
	"\xed\xa0\x80",         // an encoded surrogate
	"\xc0\xaf",             // an overlong encoding
	"ok\xf4\x90\x80\x80ok", // past U+10FFFF
	"\ufffd",
	`\u0041 is not unescaped`,
	strings.Repeat("\"\\\n", 1000),
}

func ptr[T any](v T) *T { return &v }

// contentCases returns one or more blocks of every type, with and without
// the optional fields, and nested tool results.
func contentCases() map[string]mcp.Content {
	annotations := &mcp.Annotations{Audience: []string{"user", "assistant"}, Priority: ptr(0.5), LastModified: "2025-01-02T03:04:05Z"}
	meta := mcp.Meta(`{"k":[1,"two",{"three":null}]}`)
	cases := map[string]mcp.Content{
		"text":                {Type: mcp.ContentText, Text: "hello"},
		"text empty":          {Type: mcp.ContentText},
		"text annotated":      {Type: mcp.ContentText, Text: "x", Annotations: annotations, Meta: meta},
		"text empty annot":    {Type: mcp.ContentText, Text: "x", Annotations: &mcp.Annotations{}},
		"image":               {Type: mcp.ContentImage, Data: "iVBORw0KGgo=", MimeType: "image/png"},
		"image empty":         {Type: mcp.ContentImage},
		"audio":               {Type: mcp.ContentAudio, Data: "UklGRg==", MimeType: "audio/wav", Meta: meta},
		"resource text":       {Type: mcp.ContentResource, Resource: &mcp.ResourceContents{URI: "mem://a", MimeType: "text/plain", Text: "body"}},
		"resource empty text": {Type: mcp.ContentResource, Resource: &mcp.ResourceContents{URI: "mem://a"}},
		"resource blob":       {Type: mcp.ContentResource, Resource: &mcp.ResourceContents{URI: "mem://b", Blob: "AAEC", Text: "ignored", Meta: meta}, Annotations: annotations},
		"resource_link":       {Type: mcp.ContentResourceLink, URI: "file:///x", Name: "x"},
		"resource_link full": {Type: mcp.ContentResourceLink, URI: "file:///x", Name: "x", Title: "X", Description: "the x",
			MimeType: "text/x", Size: ptr(int64(1 << 40)), Icons: []mcp.Icon{{Src: "https://i/x.png", MimeType: "image/png", Sizes: []string{"48x48"}, Theme: "dark"}, {Src: "data:,"}},
			Annotations: annotations, Meta: meta},
		"resource_link size 0": {Type: mcp.ContentResourceLink, URI: "u", Name: "n", Size: ptr(int64(0))},
		"resource_link ignores": {Type: mcp.ContentResourceLink, URI: "u", Name: "n", Text: "not written", Data: "nor this",
			ID: "nor", Input: codec.RawJSON(`{"a":1}`), IsError: true},
		"tool_use":          {Type: mcp.ContentToolUse, ID: "tu-1", Name: "search", Input: codec.RawJSON(`{"q":"x","n":[1,2.5e3,true,null]}`)},
		"tool_use no input": {Type: mcp.ContentToolUse, ID: "tu-2", Name: "noop"},
		"tool_result":       {Type: mcp.ContentToolResult, ToolUseID: "tu-1"},
		"tool_result full": {Type: mcp.ContentToolResult, ToolUseID: "tu-1", IsError: true, StructuredContent: codec.RawJSON(`{"n":1}`),
			Content: []mcp.Content{
				{Type: mcp.ContentText, Text: "t"},
				{Type: mcp.ContentImage, Data: "AA==", MimeType: "image/gif"},
				{Type: mcp.ContentAudio, Data: "AA==", MimeType: "audio/ogg"},
				{Type: mcp.ContentResource, Resource: &mcp.ResourceContents{URI: "mem://r", Text: "r"}},
				{Type: mcp.ContentResourceLink, URI: "mem://l", Name: "l"},
				{Type: mcp.ContentToolUse, ID: "i", Name: "n"},
				{Type: mcp.ContentToolResult, ToolUseID: "inner", Content: []mcp.Content{{Type: mcp.ContentText, Text: "deeper"}}},
			},
			Annotations: annotations, Meta: meta},
	}
	for i, s := range hardStrings {
		cases[fmt.Sprintf("hard %d text", i)] = mcp.Content{Type: mcp.ContentText, Text: s, Meta: meta}
		cases[fmt.Sprintf("hard %d image", i)] = mcp.Content{Type: mcp.ContentImage, Data: s, MimeType: s}
		cases[fmt.Sprintf("hard %d resource", i)] = mcp.Content{Type: mcp.ContentResource, Resource: &mcp.ResourceContents{URI: s, MimeType: s, Text: s}}
		cases[fmt.Sprintf("hard %d blob", i)] = mcp.Content{Type: mcp.ContentResource, Resource: &mcp.ResourceContents{URI: s, Blob: s + "x"}}
		cases[fmt.Sprintf("hard %d resource_link", i)] = mcp.Content{Type: mcp.ContentResourceLink, URI: s, Name: s, Title: s, Description: s, MimeType: s,
			Icons: []mcp.Icon{{Src: s, Sizes: []string{s}}}, Annotations: &mcp.Annotations{Audience: []string{s}, LastModified: s}}
		cases[fmt.Sprintf("hard %d tool_use", i)] = mcp.Content{Type: mcp.ContentToolUse, ID: s, Name: s}
		cases[fmt.Sprintf("hard %d tool_result", i)] = mcp.Content{Type: mcp.ContentToolResult, ToolUseID: s,
			Content: []mcp.Content{{Type: mcp.ContentText, Text: s}, {Type: mcp.ContentResourceLink, URI: s, Name: s}}}
	}
	// Large: a 1 MiB text, a result nested 64 deep.
	cases["large text"] = mcp.Content{Type: mcp.ContentText, Text: strings.Repeat("0123456789\"\n\u2028é", 1<<16)}
	deep := mcp.Content{Type: mcp.ContentText, Text: "bottom"}
	for i := range 64 {
		deep = mcp.Content{Type: mcp.ContentToolResult, ToolUseID: fmt.Sprint(i), Content: []mcp.Content{deep, {Type: mcp.ContentText, Text: "side"}}}
	}
	cases["deep"] = deep
	return cases
}

func TestContentAppendJSON(t *testing.T) {
	for name, c := range contentCases() {
		t.Run(name, func(t *testing.T) {
			got, err := c.AppendJSON(nil)
			require.NoError(t, err)
			requireSameJSON(t, refContent(&c), got)

			// MarshalJSON, as encoding/json calls it (it checks the output
			// too), and AppendJSON after other bytes write the same.
			viaJSON, err := json.Marshal(c)
			require.NoError(t, err)
			requireSameJSON(t, refContent(&c), viaJSON)
			prefixed, err := c.AppendJSON([]byte("prefix"))
			require.NoError(t, err)
			assert.Equal(t, "prefix"+string(got), string(prefixed))

			// What the encoder writes, the decoder reads back: a second
			// round gives the same bytes.
			var back mcp.Content
			require.NoError(t, json.Unmarshal(got, &back))
			again, err := back.AppendJSON(nil)
			require.NoError(t, err)
			requireSameJSON(t, refContent(&c), again)
		})
	}
}

func TestContentAppendJSONErrors(t *testing.T) {
	for name, c := range map[string]mcp.Content{
		"zero value":                  {},
		"unknown type":                {Type: "video", Text: "x"},
		"type in the wrong case":      {Type: "Text", Text: "x"},
		"resource without resource":   {Type: mcp.ContentResource},
		"bad block in a tool result":  {Type: mcp.ContentToolResult, Content: []mcp.Content{{Type: mcp.ContentText}, {Type: "nope"}}},
		"bad block two results below": {Type: mcp.ContentToolResult, Content: []mcp.Content{{Type: mcp.ContentToolResult, Content: []mcp.Content{{Type: mcp.ContentResource}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := c.AppendJSON(nil)
			require.Error(t, err)
			_, err = json.Marshal(c)
			require.Error(t, err, "encoding/json passes the error on")
			_, err = (&mcp.CallToolResult{Content: []mcp.Content{{Type: mcp.ContentText}, c}}).AppendJSON(nil)
			require.Error(t, err, "a result holding the block fails too")
		})
	}
	_, err := (&mcp.Content{Type: "video"}).AppendJSON(nil)
	assert.ErrorIs(t, err, mcp.ErrContentType)
}

func TestAppendContents(t *testing.T) {
	got, err := mcp.AppendContents(nil, nil)
	require.NoError(t, err)
	assert.Equal(t, "[]", string(got), "nil is written []")
	got, err = mcp.AppendContents(nil, []mcp.Content{})
	require.NoError(t, err)
	assert.Equal(t, "[]", string(got))

	var all []mcp.Content
	for _, c := range contentCases() {
		all = append(all, c)
	}
	got, err = mcp.AppendContents([]byte("x"), all)
	require.NoError(t, err)
	require.Equal(t, byte('x'), got[0])
	requireSameJSON(t, refContents(all), got[1:])
}

func TestCallToolResultAppendJSON(t *testing.T) {
	meta := mcp.Meta(`{"progressToken":"p","n":1}`)
	cases := map[string]*mcp.CallToolResult{
		"zero value":       {},
		"empty content":    {Content: []mcp.Content{}},
		"TextResult":       mcp.TextResult("hi"),
		"ErrorResult":      mcp.ErrorResult("boom"),
		"structured":       {Content: []mcp.Content{{Type: mcp.ContentText, Text: `{"a":1}`}}, StructuredContent: codec.RawJSON(`{"a":1}`)},
		"structured array": {StructuredContent: codec.RawJSON(`[1,{"b":[]}]`)},
		"meta":             {Meta: meta},
		"everything":       {Content: []mcp.Content{{Type: mcp.ContentText, Text: "t"}}, StructuredContent: codec.RawJSON(`{}`), IsError: true, Meta: meta},
	}
	var blocks []mcp.Content
	for name, c := range contentCases() {
		if strings.HasPrefix(name, "hard ") {
			cases[name] = &mcp.CallToolResult{Content: []mcp.Content{c}}
		}
		blocks = append(blocks, c)
	}
	cases["every block"] = &mcp.CallToolResult{Content: blocks, IsError: true}
	many := make([]mcp.Content, 10000)
	for i := range many {
		many[i] = mcp.Content{Type: mcp.ContentText, Text: fmt.Sprintf("block %d \"%c\"", i, rune(i))}
	}
	cases["10000 blocks"] = &mcp.CallToolResult{Content: many}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := r.AppendJSON(nil)
			require.NoError(t, err)
			requireSameJSON(t, refResult(r), got)
			viaJSON, err := json.Marshal(r)
			require.NoError(t, err)
			requireSameJSON(t, refResult(r), viaJSON)
			viaValue, err := json.Marshal(*r)
			require.NoError(t, err)
			assert.Equal(t, string(viaJSON), string(viaValue))

			var back mcp.CallToolResult
			require.NoError(t, json.Unmarshal(got, &back))
			again, err := back.AppendJSON(nil)
			require.NoError(t, err)
			requireSameJSON(t, refResult(r), again)
		})
	}
}

func TestResourceContentsMarshalJSON(t *testing.T) {
	cases := map[string]mcp.ResourceContents{
		"zero value":       {},
		"text":             {URI: "mem://a", MimeType: "text/plain", Text: "a"},
		"empty text":       {URI: "mem://a"},
		"blob":             {URI: "mem://b", MimeType: "application/octet-stream", Blob: "AAEC"},
		"blob wins":        {URI: "mem://b", Blob: "AAEC", Text: "not written"},
		"meta":             {URI: "mem://m", Text: "m", Meta: mcp.Meta(`{"a":[]}`)},
		"large":            {URI: "mem://large", Text: strings.Repeat("x\"\\\u2029", 1<<18)},
		"large blob":       {URI: "mem://large", Blob: strings.Repeat("QUJD", 1<<18)},
		"long uri, no cap": {URI: strings.Repeat("u", 1000), MimeType: strings.Repeat("m", 1000)},
	}
	for i, s := range hardStrings {
		cases[fmt.Sprintf("hard %d", i)] = mcp.ResourceContents{URI: s, MimeType: s, Text: s}
		cases[fmt.Sprintf("hard %d blob", i)] = mcp.ResourceContents{URI: s, Blob: s + "="}
	}
	for name, r := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := r.MarshalJSON()
			require.NoError(t, err)
			requireSameJSON(t, refResourceContents(&r), got)
			viaJSON, err := json.Marshal(mcp.ReadResourceResult{Contents: []mcp.ResourceContents{r, r}})
			require.NoError(t, err)
			ref := refResourceContents(&r)
			requireSameJSON(t, map[string]any{"contents": []any{ref, ref}}, viaJSON)
		})
	}
}

// The encoders allocate only to grow dst (Content.AppendJSON says so),
// except for the nested fields that go through the codec's marshaller
// (annotations, icons, embedded resources).
func TestEncodersAllocations(t *testing.T) {
	meta := mcp.Meta(`{"a":1}`)
	blocks := map[string]mcp.Content{
		"text":          {Type: mcp.ContentText, Text: "hello \"world\"\n\u2028\xff", Meta: meta},
		"image":         {Type: mcp.ContentImage, Data: "AAAA", MimeType: "image/png"},
		"audio":         {Type: mcp.ContentAudio, Data: "AAAA", MimeType: "audio/wav"},
		"resource_link": {Type: mcp.ContentResourceLink, URI: "mem://x", Name: "x", Title: "X", Description: "d", MimeType: "m", Size: ptr(int64(42))},
		"tool_use":      {Type: mcp.ContentToolUse, ID: "i", Name: "n", Input: codec.RawJSON(`{"q":1}`)},
		"tool_result": {Type: mcp.ContentToolResult, ToolUseID: "i", StructuredContent: codec.RawJSON(`{}`), IsError: true,
			Content: []mcp.Content{{Type: mcp.ContentText, Text: "t"}, {Type: mcp.ContentToolUse, ID: "i", Name: "n"}}},
	}
	dst := make([]byte, 0, 4096)
	for name, c := range blocks {
		allocs := testing.AllocsPerRun(100, func() {
			var err error
			if dst, err = c.AppendJSON(dst[:0]); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, "%s: Content.AppendJSON into a large enough dst", name)
	}
	all := make([]mcp.Content, 0, len(blocks))
	for _, c := range blocks {
		all = append(all, c)
	}
	results := map[string]*mcp.CallToolResult{
		"TextResult":  mcp.TextResult("some text"),
		"every block": {Content: all, StructuredContent: codec.RawJSON(`{"x":1}`), IsError: true, Meta: meta},
	}
	for name, r := range results {
		allocs := testing.AllocsPerRun(100, func() {
			var err error
			if dst, err = r.AppendJSON(dst[:0]); err != nil {
				t.Fatal(err)
			}
		})
		assert.Zero(t, allocs, "%s: CallToolResult.AppendJSON into a large enough dst", name)
	}
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		if dst, err = mcp.AppendContents(dst[:0], all); err != nil {
			t.Fatal(err)
		}
	})
	assert.Zero(t, allocs, "AppendContents into a large enough dst")

	// ResourceContents.MarshalJSON returns a new slice, sized up front:
	// one allocation when nothing needs escaping.
	rc := mcp.ResourceContents{URI: "mem://x", MimeType: "text/plain", Text: strings.Repeat("t", 1000), Meta: meta}
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := rc.MarshalJSON(); err != nil {
			t.Fatal(err)
		}
	})
	assert.Equal(t, 1.0, allocs, "ResourceContents.MarshalJSON")
}

// FuzzCallToolResultStrings encodes random strings in every string field
// of a result's blocks and checks the output is valid JSON, equal in
// meaning to encoding/json's.
func FuzzCallToolResultStrings(f *testing.F) {
	for _, s := range hardStrings {
		f.Add(s, "x")
	}
	f.Add("\x00", "\u2028")
	f.Add("\xf0\x9f\x9a", "\"")
	f.Fuzz(func(t *testing.T, a, b string) {
		r := &mcp.CallToolResult{
			Content: []mcp.Content{
				{Type: mcp.ContentText, Text: a},
				{Type: mcp.ContentImage, Data: a, MimeType: b},
				{Type: mcp.ContentResource, Resource: &mcp.ResourceContents{URI: a, MimeType: b, Text: a + b}},
				{Type: mcp.ContentResourceLink, URI: a, Name: b, Title: a, Description: b, MimeType: a},
				{Type: mcp.ContentToolUse, ID: a, Name: b},
				{Type: mcp.ContentToolResult, ToolUseID: b, Content: []mcp.Content{{Type: mcp.ContentText, Text: b + a}}},
			},
		}
		got, err := r.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		requireSameJSON(t, refResult(r), got)
		// Valid UTF-8 comes back as it went in.
		var back mcp.CallToolResult
		require.NoError(t, json.Unmarshal(got, &back))
		if utf8.ValidString(a) {
			require.Equal(t, a, back.Content[0].Text)
		}
	})
}
