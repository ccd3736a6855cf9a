package main

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// property is one key=value pair of a properties file, in file order.
type property struct {
	Key, Value string
}

// parseProperties reads a Java-style .properties file: lines "key=value",
// "key: value" or "key value"; '#' and '!' start comment lines; a line that
// ends with an odd number of backslashes continues on the next line; the
// escapes \t \n \r \f \\ \uXXXX and an escaped separator are decoded. A key
// given twice keeps its last value (like java.util.Properties) but the pair
// list keeps first-seen order.
func parseProperties(r io.Reader) ([]property, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	var (
		out     []property
		index   = map[string]int{}
		logical strings.Builder
		lineNo  int
		startNo int
	)
	flush := func() error {
		line := logical.String()
		logical.Reset()
		k, v, err := splitProperty(line)
		if err != nil {
			return fmt.Errorf("line %d: %w", startNo, err)
		}
		if k == "" {
			return fmt.Errorf("line %d: empty key", startNo)
		}
		if i, ok := index[k]; ok {
			out[i].Value = v
			return nil
		}
		index[k] = len(out)
		out = append(out, property{Key: k, Value: v})
		return nil
	}
	continuing := false
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		if continuing {
			line = strings.TrimLeft(line, " \t\f")
		} else {
			trimmed := strings.TrimLeft(line, " \t\f")
			if trimmed == "" || trimmed[0] == '#' || trimmed[0] == '!' {
				continue
			}
			line = trimmed
			startNo = lineNo
		}
		if trailingBackslashes(line)%2 == 1 {
			logical.WriteString(line[:len(line)-1])
			continuing = true
			continue
		}
		logical.WriteString(line)
		continuing = false
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if continuing {
		if err := flush(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func trailingBackslashes(s string) int {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n
}

// splitProperty splits one logical line at the first unescaped '=', ':' or
// whitespace and decodes both halves.
func splitProperty(line string) (key, value string, err error) {
	sep := len(line)
	for i := 0; i < len(line); i++ {
		c := line[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '=' || c == ':' || c == ' ' || c == '\t' || c == '\f' {
			sep = i
			break
		}
	}
	rawKey := line[:sep]
	rest := line[sep:]
	rest = strings.TrimLeft(rest, " \t\f")
	if rest != "" && (rest[0] == '=' || rest[0] == ':') {
		rest = strings.TrimLeft(rest[1:], " \t\f")
	}
	if key, err = unescapeProperty(rawKey); err != nil {
		return "", "", err
	}
	if value, err = unescapeProperty(rest); err != nil {
		return "", "", err
	}
	return key, value, nil
}

func unescapeProperty(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			break
		}
		switch s[i] {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			if i+5 > len(s) {
				return "", fmt.Errorf("truncated \\u escape in %q", s)
			}
			n, err := strconv.ParseUint(s[i+1:i+5], 16, 16)
			if err != nil {
				return "", fmt.Errorf("bad \\u escape in %q", s)
			}
			b.WriteRune(rune(n))
			i += 4
		default:
			b.WriteByte(s[i])
		}
	}
	return b.String(), nil
}
