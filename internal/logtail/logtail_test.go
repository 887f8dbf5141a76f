package logtail

import "testing"

func TestBuffer(t *testing.T) {
	w := &Buffer{Max: 8}
	if s, full := w.Tail(); s != "" || full {
		t.Errorf("empty: %q, %v", s, full)
	}
	w.Write([]byte("abc"))
	if s, full := w.Tail(); s != "abc" || full {
		t.Errorf("after abc: %q, %v; want abc, not full", s, full)
	}
	w.Write([]byte("defghijk"))
	if s, full := w.Tail(); s != "defghijk" || !full {
		t.Errorf("after 11 bytes: %q, %v; want the last 8, full", s, full)
	}
}
