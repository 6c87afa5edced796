package draconvert

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
)

// separator matches a character that separates the tokens of a lower-cased model name: one
// that is neither an ASCII letter nor a digit.
const separator = "[^a-z0-9]"

// ModelSelector is the CEL device selector that accepts exactly the cards whose model
// attribute (AttributeModel, in driver's domain) gpumem accepts for a pod restricted to
// models: one entry's alphanumeric tokens, lower-cased, appear as a contiguous run of the
// model's tokens (gpumem.ModelMatches). It is "" when models is empty (any card).
//
// gpumem lower-cases with Go's unicode.ToLower, which maps two non-ASCII runes to ASCII
// letters (U+0130 to "i", the Kelvin sign U+212A to "k"); every other non-ASCII rune stays a
// separator. The selector lower-cases with CEL's lowerAscii and replaces those two runes, so
// both read the same tokens. Entries without a token match no card and are left out; a list
// of nothing else is refused, as is a selector longer than the API server accepts.
func ModelSelector(driver string, models []string) (string, error) {
	if len(models) == 0 {
		return "", nil
	}
	var alts []string
	for _, m := range models {
		tokens := strings.FieldsFunc(strings.ToLower(m), func(r rune) bool { return !isLowerAlnum(r) })
		if len(tokens) == 0 {
			continue
		}
		// Tokens hold only [a-z0-9]: nothing in them needs quoting in the regular
		// expression or in the CEL string around it.
		if alt := strings.Join(tokens, separator+"+"); !slices.Contains(alts, alt) {
			alts = append(alts, alt)
		}
	}
	if len(alts) == 0 {
		return "", fmt.Errorf("%w: the model list %.80q names no model a card could match (an entry needs a letter or digit)",
			ErrNotExpressible, strings.Join(models, "|"))
	}
	re := "(?:^|" + separator + ")(?:" + strings.Join(alts, "|") + ")(?:" + separator + "|$)"
	lowered := "a." + AttributeModel + ".lowerAscii()"
	for _, f := range asciiFolds() {
		lowered += ".replace(" + strconv.QuoteToASCII(string(f.from)) + ", " + strconv.Quote(string(f.to)) + ")"
	}
	expr := "cel.bind(a, device.attributes[" + strconv.Quote(driver) + "], " +
		strconv.Quote(AttributeModel) + " in a && " + lowered + ".matches(" + strconv.Quote(re) + "))"
	if len(expr) > resourcev1.CELSelectorExpressionMaxLength {
		return "", fmt.Errorf("%w: the model list %.80q makes a device selector of %d bytes; the API server accepts at most %d",
			ErrNotExpressible, strings.Join(models, "|"), len(expr), resourcev1.CELSelectorExpressionMaxLength)
	}
	return expr, nil
}

// fold is a non-ASCII rune that Go's unicode.ToLower maps to an ASCII letter.
type fold struct{ from, to rune }

// asciiFolds lists every non-ASCII rune that unicode.ToLower maps to an ASCII letter or digit
// (a test enumerates all runes to prove the list complete).
func asciiFolds() []fold {
	return []fold{{from: '\u0130', to: 'i'}, {from: '\u212a', to: 'k'}}
}

// isLowerAlnum reports whether r is an ASCII lowercase letter or digit: a token character of a
// lower-cased model name, as gpumem reads it.
func isLowerAlnum(r rune) bool { return r >= 'a' && r <= 'z' || r >= '0' && r <= '9' }
