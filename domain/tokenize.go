package domain

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokenize splits text into the terms the lexical intent resolver indexes
// and matches, in order, repeats kept:
//
//   - Full-width forms (ＰＤＦ, the ideographic space) fold to ASCII, and
//     everything is lower-cased.
//   - Words of spaced scripts (Latin, Cyrillic, Greek, Arabic, Devanagari …:
//     letters and digits with their combining marks) are terms; English
//     stop words ("the", "my", "please") are dropped and English words are
//     stemmed lightly (Stem), so "parcels" meets "parcel" and "summarise"
//     meets "summarization".
//   - Scripts written without spaces (Han, Hiragana, Katakana, Hangul, Thai,
//     Lao, Khmer, Myanmar) have no words to split, so each run of them gives
//     its characters (each with its combining marks) and every pair of
//     neighbours: "包裹在哪" gives 包 裹 在 哪 and 包裹 裹在 在哪. Common
//     function characters (的, 了, 吗 …) break a run; pronouns and particles
//     such as 我 or 在 are kept only inside pairs.
//
// Everything else (punctuation, symbols, spaces) separates terms. The same
// text always gives the same terms.
func Tokenize(s string) []string {
	var (
		out   []string
		word  []rune // the current word of a spaced script
		units []string
		unit  []rune // the current character of an unspaced run, with its marks
		inRun bool   // the current token is an unspaced run
	)
	flushUnit := func() {
		if len(unit) > 0 {
			units = append(units, string(unit))
			unit = unit[:0]
		}
	}
	flushRun := func() {
		flushUnit()
		out = appendRunTerms(out, units)
		units = units[:0]
	}
	flushWord := func() {
		if len(word) > 0 {
			if w := string(word); !englishStop[w] {
				out = append(out, Stem(w))
			}
			word = word[:0]
		}
	}
	for _, r := range s {
		r = foldWidth(r)
		switch {
		case unicode.Is(unicode.Mn, r) || unicode.Is(unicode.Mc, r):
			// A combining mark belongs to what it follows.
			if inRun && len(unit) > 0 {
				unit = append(unit, r)
			} else if len(word) > 0 {
				word = append(word, r)
			}
		case unspaced(r):
			flushWord()
			if cjkBreak[r] {
				flushRun()
				inRun = false
				continue
			}
			inRun = true
			flushUnit()
			unit = append(unit, r)
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			if inRun {
				flushRun()
				inRun = false
			}
			word = append(word, unicode.ToLower(r))
		default:
			flushWord()
			if inRun {
				flushRun()
				inRun = false
			}
		}
	}
	flushWord()
	if inRun {
		flushRun()
	}
	return out
}

// appendRunTerms appends the terms of one unspaced run: each character
// (but the common ones) and each pair of neighbours.
func appendRunTerms(out, units []string) []string {
	for i, u := range units {
		r, _ := utf8.DecodeRuneInString(u)
		if !cjkCommon[r] {
			out = append(out, u)
		}
		if i+1 < len(units) {
			out = append(out, u+units[i+1])
		}
	}
	return out
}

// foldWidth maps the full-width forms of ASCII (U+FF01-FF5E) and the
// ideographic space to their ASCII equivalents: what NFKC would do for the
// characters a Chinese or Japanese keyboard types.
func foldWidth(r rune) rune {
	switch {
	case r >= 0xFF01 && r <= 0xFF5E:
		return r - 0xFEE0
	case r == 0x3000:
		return ' '
	}
	return r
}

// unspaced reports whether r belongs to a script written without spaces
// between words.
func unspaced(r rune) bool {
	if r < 0x0E00 {
		return false
	}
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul,
		unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar) || r == 0x30FC // the prolonged sound mark
}

// cjkBreak are function characters that end a run: what stands on either
// side is read as separate runs ("我的包裹" is 我 and 包裹).
var cjkBreak = runeSet("的了吗呢吧啊呀嘛")

// cjkCommon are characters too common to mean anything alone: they are
// kept only inside pairs.
var cjkCommon = runeSet("我你您他她它们在是有个一这那请帮给把要想能会和与及也都就还么哪")

func runeSet(s string) map[rune]bool {
	m := map[rune]bool{}
	for _, r := range s {
		m[r] = true
	}
	return m
}

// englishStop are English words that say nothing about what a caller
// wants. Question words (where, what, how) are kept: "where is" and "how
// much" tell intents apart.
var englishStop = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a an the and or but if then so of to in on at by for from with without into onto
		about as is are was were be been being am do does did done have has had i me my mine myself you your yours we us our
		ours they them their he him his she her it its this that these those there here some any all can could would should
		will shall may might must please pls kindly just also too very really want wants wanted need needs like would let lets
		get got s t d ll m re ve hi hello hey thanks thank`) {
		m[w] = true
	}
	return m
}()

// Stem reduces an English word to a stem so that its inflections and
// British or American spellings meet: "parcels", "tracking", "tracked" and
// "summarise", "summarized", "summarization" each share one. It is a small
// rule list in the spirit of Porter's, not a dictionary: the stem is not
// always a word ("pars" for "parse" and "parsing"), but the same word
// always gives the same stem. Words of fewer than four letters, and words
// not in ASCII, are returned as they are.
func Stem(w string) string {
	if len(w) < 4 || !asciiLower(w) {
		return w
	}
	for _, r := range britishEndings {
		if s, ok := strings.CutSuffix(w, r[0]); ok && len(s) >= 3 {
			w = s + r[1]
			break
		}
	}
	for _, r := range suffixRules {
		s, ok := strings.CutSuffix(w, r.suffix)
		if !ok || len(s) < r.min || (r.after != "" && !strings.ContainsRune(r.after, rune(s[len(s)-1]))) ||
			(r.notAfter != "" && strings.ContainsRune(r.notAfter, rune(s[len(s)-1]))) {
			continue
		}
		w = s + r.repl
		break
	}
	if s, ok := strings.CutSuffix(w, "e"); ok && len(s) >= 3 {
		w = s
	}
	if n := len(w); n >= 4 && w[n-1] == w[n-2] && !strings.ContainsRune("aeiouslz", rune(w[n-1])) {
		w = w[:n-1] // shipping, shipped → ship
	}
	return w
}

func asciiLower(w string) bool {
	for i := 0; i < len(w); i++ {
		if c := w[i]; c < 'a' || c > 'z' {
			return false
		}
	}
	return true
}

// britishEndings spell the British forms the American way first.
var britishEndings = [][2]string{{"isations", "izations"}, {"isation", "ization"}, {"ising", "izing"},
	{"ised", "ized"}, {"ises", "izes"}, {"ise", "ize"}, {"ysing", "yzing"}, {"ysed", "yzed"}, {"yse", "yze"}}

// suffixRules are tried in order; the first that fits is applied. min is
// the least length of what stays; after and notAfter constrain the letter
// before the suffix.
var suffixRules = []struct {
	suffix, repl    string
	min             int
	after, notAfter string
}{
	{suffix: "izations", repl: "ize", min: 3},
	{suffix: "ization", repl: "ize", min: 3},
	{suffix: "ations", repl: "ate", min: 3},
	{suffix: "ation", repl: "ate", min: 3},
	{suffix: "ings", min: 3},
	{suffix: "ing", min: 3},
	{suffix: "edly", min: 3},
	{suffix: "ied", repl: "y", min: 2},
	{suffix: "ies", repl: "y", min: 2},
	{suffix: "sses", repl: "ss", min: 2},
	{suffix: "ed", min: 3},
	{suffix: "ches", repl: "ch", min: 1},
	{suffix: "shes", repl: "sh", min: 1},
	{suffix: "xes", repl: "x", min: 1},
	{suffix: "s", min: 3, notAfter: "sui"},
}
