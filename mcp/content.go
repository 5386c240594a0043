package mcp

import (
	"errors"

	"github.com/mcpedge/mcpedge/codec"
)

// Content types.
const (
	ContentText         = "text"
	ContentImage        = "image"
	ContentAudio        = "audio"
	ContentResource     = "resource"      // embedded resource
	ContentResourceLink = "resource_link" // link to a resource
	ContentToolUse      = "tool_use"      // sampling with tools
	ContentToolResult   = "tool_result"   // sampling with tools
)

// Content is one content block, discriminated by Type. Which fields are
// written depends on Type: text (Text), image and audio (Data, MimeType),
// resource (Resource), resource_link (URI, Name, Title, Description,
// MimeType, Size, Icons), tool_use (ID, Name, Input), tool_result (ToolUseID,
// Content, StructuredContent, IsError). Annotations and Meta go with all.
type Content struct {
	Type        string
	Text        string
	Data        string // base64
	MimeType    string
	Resource    *ResourceContents
	URI         string
	Name        string
	Title       string
	Description string
	Size        *int64
	Icons       []Icon

	ID                string
	Input             codec.RawJSON
	ToolUseID         string
	Content           []Content
	StructuredContent codec.RawJSON
	IsError           bool

	Annotations *Annotations
	Meta        Meta
}

// ErrContentType reports a content block of unknown type.
var ErrContentType = errors.New("mcp: unknown content type")

// AppendJSON appends c as JSON. It allocates only to grow dst, except for the
// rarely used nested fields (annotations, icons, embedded resources), which
// go through the codec's marshaller.
func (c *Content) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"type":`...)
	dst = codec.AppendString(dst, c.Type)
	var err error
	switch c.Type {
	case ContentText:
		dst = append(dst, `,"text":`...)
		dst = codec.AppendString(dst, c.Text)
	case ContentImage, ContentAudio:
		dst = append(dst, `,"data":`...)
		dst = codec.AppendString(dst, c.Data)
		dst = append(dst, `,"mimeType":`...)
		dst = codec.AppendString(dst, c.MimeType)
	case ContentResource:
		if c.Resource == nil {
			return dst, errors.New("mcp: embedded resource content without resource")
		}
		dst = append(dst, `,"resource":`...)
		if dst, err = appendMarshal(dst, c.Resource); err != nil {
			return dst, err
		}
	case ContentResourceLink:
		dst = append(dst, `,"uri":`...)
		dst = codec.AppendString(dst, c.URI)
		dst = append(dst, `,"name":`...)
		dst = codec.AppendString(dst, c.Name)
		dst = appendOptString(dst, "title", c.Title)
		dst = appendOptString(dst, "description", c.Description)
		dst = appendOptString(dst, "mimeType", c.MimeType)
		if c.Size != nil {
			dst = append(dst, `,"size":`...)
			dst = codec.AppendInt(dst, *c.Size)
		}
		if len(c.Icons) > 0 {
			dst = append(dst, `,"icons":`...)
			if dst, err = appendMarshal(dst, c.Icons); err != nil {
				return dst, err
			}
		}
	case ContentToolUse:
		dst = append(dst, `,"id":`...)
		dst = codec.AppendString(dst, c.ID)
		dst = append(dst, `,"name":`...)
		dst = codec.AppendString(dst, c.Name)
		dst = append(dst, `,"input":`...)
		if len(c.Input) == 0 {
			dst = append(dst, "{}"...)
		} else {
			dst = append(dst, c.Input...)
		}
	case ContentToolResult:
		dst = append(dst, `,"toolUseId":`...)
		dst = codec.AppendString(dst, c.ToolUseID)
		dst = append(dst, `,"content":`...)
		if dst, err = AppendContents(dst, c.Content); err != nil {
			return dst, err
		}
		if len(c.StructuredContent) > 0 {
			dst = append(dst, `,"structuredContent":`...)
			dst = append(dst, c.StructuredContent...)
		}
		if c.IsError {
			dst = append(dst, `,"isError":true`...)
		}
	default:
		return dst, ErrContentType
	}
	if c.Annotations != nil {
		dst = append(dst, `,"annotations":`...)
		if dst, err = appendMarshal(dst, c.Annotations); err != nil {
			return dst, err
		}
	}
	if len(c.Meta) > 0 {
		dst = append(dst, `,"_meta":`...)
		dst = append(dst, c.Meta...)
	}
	return append(dst, '}'), nil
}

// MarshalJSON implements json.Marshaler.
func (c Content) MarshalJSON() ([]byte, error) { return c.AppendJSON(nil) }

// contentWire is the decoding shape of Content.
type contentWire struct {
	Type              string            `json:"type"`
	Text              string            `json:"text"`
	Data              string            `json:"data"`
	MimeType          string            `json:"mimeType"`
	Resource          *ResourceContents `json:"resource"`
	URI               string            `json:"uri"`
	Name              string            `json:"name"`
	Title             string            `json:"title"`
	Description       string            `json:"description"`
	Size              *int64            `json:"size"`
	Icons             []Icon            `json:"icons"`
	ID                string            `json:"id"`
	Input             codec.RawJSON     `json:"input"`
	ToolUseID         string            `json:"toolUseId"`
	Content           []Content         `json:"content"`
	StructuredContent codec.RawJSON     `json:"structuredContent"`
	IsError           bool              `json:"isError"`
	Annotations       *Annotations      `json:"annotations"`
	Meta              Meta              `json:"_meta"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (c *Content) UnmarshalJSON(data []byte) error {
	var w contentWire
	if err := codec.Unmarshal(data, &w); err != nil {
		return err
	}
	*c = Content(w)
	return nil
}

// AppendContents appends a JSON array of content blocks; nil is written [].
func AppendContents(dst []byte, cs []Content) ([]byte, error) {
	dst = append(dst, '[')
	var err error
	for i := range cs {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = cs[i].AppendJSON(dst); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

// AppendJSON appends r as JSON.
func (r *CallToolResult) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"content":`...)
	var err error
	if dst, err = AppendContents(dst, r.Content); err != nil {
		return dst, err
	}
	if len(r.StructuredContent) > 0 {
		dst = append(dst, `,"structuredContent":`...)
		dst = append(dst, r.StructuredContent...)
	}
	if r.IsError {
		dst = append(dst, `,"isError":true`...)
	}
	if len(r.Meta) > 0 {
		dst = append(dst, `,"_meta":`...)
		dst = append(dst, r.Meta...)
	}
	return append(dst, '}'), nil
}

// MarshalJSON implements json.Marshaler.
func (r CallToolResult) MarshalJSON() ([]byte, error) { return r.AppendJSON(nil) }

// callToolResultWire is the decoding shape of CallToolResult.
type callToolResultWire struct {
	Content           []Content     `json:"content"`
	StructuredContent codec.RawJSON `json:"structuredContent"`
	IsError           bool          `json:"isError"`
	Meta              Meta          `json:"_meta"`
}

// UnmarshalJSON implements json.Unmarshaler.
func (r *CallToolResult) UnmarshalJSON(data []byte) error {
	var w callToolResultWire
	if err := codec.Unmarshal(data, &w); err != nil {
		return err
	}
	*r = CallToolResult(w)
	return nil
}

func appendOptString(dst []byte, key, v string) []byte {
	if v == "" {
		return dst
	}
	dst = append(dst, ',', '"')
	dst = append(dst, key...)
	dst = append(dst, '"', ':')
	return codec.AppendString(dst, v)
}

func appendMarshal(dst []byte, v any) ([]byte, error) {
	b, err := codec.Marshal(v)
	if err != nil {
		return dst, err
	}
	return append(dst, b...), nil
}
