package domain_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentreach/agentreach/domain"
)

// fixedCatalogue is the catalogue the lexical resolver's table runs on: a
// shop's agents, described as their registrations and cards would, in
// English and Chinese.
func fixedCatalogue() []domain.CatalogueEntry {
	agents := []domain.CatalogueAgent{
		{ID: "parcels", Capabilities: []string{"parcel.track", "parcel.return"}, Aliases: []string{"shipping"},
			Docs: map[string]domain.CapabilityDoc{
				"parcel.track": {Title: "Track a parcel", Description: "Where a parcel or order is now and when it arrives. 查询快递包裹在哪里、物流状态",
					Examples: []string{"where is my parcel", "has my order shipped", "我的快递到哪了", "包裹什么时候到"}},
				"parcel.return": {Title: "Return a parcel", Description: "Send an item back and get a refund label. 退货、退款",
					Examples: []string{"I want to return my order", "我要退货"}},
			}},
		{ID: "ocr-1", Capabilities: []string{"document:parse:ocr"}, Aliases: []string{"scan"},
			Docs: map[string]domain.CapabilityDoc{"document:parse:ocr": {Title: "Read a scanned document",
				Description: "Extract the text of scanned PDFs and photos of pages (OCR). 识别扫描件、图片中的文字",
				Examples:    []string{"read this scanned pdf", "把这张图片里的文字识别出来"}}}},
		{ID: "sum-1", Capabilities: []string{"text.summarize"},
			Docs: map[string]domain.CapabilityDoc{"text.summarize": {Title: "Summarize a text",
				Description: "Write a short summary of a long text or document. 总结、摘要",
				Examples:    []string{"summarise this article", "帮我总结一下这篇文章"}}}},
		{ID: "tr-1", Capabilities: []string{"text.translate"},
			Docs: map[string]domain.CapabilityDoc{"text.translate": {Title: "Translate a text",
				Description: "Translate text between languages. 翻译成中文或英文",
				Examples:    []string{"translate this into French", "把这段话翻译成英文"}}}},
		{ID: "wx", Capabilities: []string{"weather.forecast"},
			Docs: map[string]domain.CapabilityDoc{"weather.forecast": {Description: "The weather forecast for a city: rain, temperature, wind. 天气预报",
				Examples: []string{"will it rain tomorrow in Paris", "明天北京天气怎么样"}}}},
		{ID: "inv", Capabilities: []string{"invoice.create", "invoice.pay"},
			Docs: map[string]domain.CapabilityDoc{
				"invoice.create": {Description: "Create an invoice for a customer. 开发票", Examples: []string{"make an invoice for ACME"}},
				"invoice.pay":    {Description: "Pay an invoice that is due. 支付发票", Examples: []string{"pay invoice 42"}},
			}},
	}
	return domain.BuildCatalogue("shop", 1, agents, nil).Entries
}

// TestLexicalResolverTable: intents in English and Chinese reach the
// capability they must, confidently; ambiguous or unrelated ones are not
// confident.
func TestLexicalResolverTable(t *testing.T) {
	t.Parallel()
	ix := domain.NewLexicalIndex(fixedCatalogue())
	th := domain.DefaultLexicalThreshold
	for _, tc := range []struct {
		intent string
		want   string // "" = must not be confident
	}{
		{"where is my parcel?", "parcel.track"},
		{"Where is my PARCEL", "parcel.track"},
		{"track my parcels please", "parcel.track"},
		{"has my order shipped yet", "parcel.track"},
		{"我的包裹在哪里", "parcel.track"},
		{"我的快递到哪了？", "parcel.track"},
		{"查一下物流状态", "parcel.track"},
		{"I'd like to return this item and get a refund", "parcel.return"},
		{"我要退货退款", "parcel.return"},
		{"read this scanned PDF", "document:parse:ocr"},
		{"extract the text from a scanned document", "document:parse:ocr"},
		{"识别这张扫描件里的文字", "document:parse:ocr"},
		{"summarise this long article", "text.summarize"},
		{"Summarization of a report", "text.summarize"},
		{"帮我总结这份文档", "text.summarize"},
		{"translate this paragraph into english", "text.translate"},
		{"翻译成英文", "text.translate"},
		{"明天上海的天气", "weather.forecast"},
		{"will it rain in London tomorrow", "weather.forecast"},
		{"pay the invoice", "invoice.pay"},
		{"create an invoice for my customer", "invoice.create"},
		{"parcel.track", "parcel.track"},         // the name itself
		{"Track a parcel", "parcel.track"},       // the title
		{"SHIPPING", ""},                         // an alias both parcel capabilities carry: ambiguous
		{"invoice", ""},                          // two invoice capabilities, equally
		{"hello there", ""},                      // nothing to match
		{"the", ""},                              // stop words only
		{"sing me a song about the sea", ""},     // unrelated
		{"订一张去东京的机票", ""},                        // unrelated, in Chinese
		{"text", ""},                             // summarize and translate share it
		{"order status", ""},                     // both parcel capabilities speak of orders
		{"document parse", "document:parse:ocr"}, // the name's own words
	} {
		r := ix.Rank(tc.intent, 5)
		if tc.want == "" {
			require.False(t, r.Confident(th), "%q: %+v", tc.intent, r)
			continue
		}
		require.True(t, r.Confident(th), "%q must be confident: %+v", tc.intent, r)
		require.Equal(t, tc.want, r.Top(), "%q: %+v", tc.intent, r)
		require.NotEmpty(t, r.Reason)
	}
}

// TestLexicalRankIsExplained: candidates are ranked best first with their
// matched terms, scores stay within 0..1, and the confidence is the gap.
func TestLexicalRankIsExplained(t *testing.T) {
	t.Parallel()
	ix := domain.NewLexicalIndex(fixedCatalogue())
	r := ix.Rank("read this scanned pdf document", 3)
	require.Equal(t, domain.ResolverLexical, r.Resolver)
	require.LessOrEqual(t, len(r.Candidates), 3)
	require.Equal(t, "document:parse:ocr", r.Top())
	require.Contains(t, r.Candidates[0].Matched, "scan")
	for i, c := range r.Candidates {
		require.True(t, c.Score > 0 && c.Score <= 1, "%+v", c)
		if i > 0 {
			require.GreaterOrEqual(t, r.Candidates[i-1].Score, c.Score)
		}
	}
	require.InDelta(t, r.Candidates[0].Score-r.Candidates[1].Score, r.Confidence, 1e-9)
	require.Contains(t, r.Reason, "document:parse:ocr")

	empty := domain.NewLexicalIndex(nil).Rank("where is my parcel", 3)
	require.Empty(t, empty.Candidates)
	require.False(t, empty.Confident(0.01))
}

func TestTokenize(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Where is my parcel?", []string{"wher", "parcel"}},
		{"ＰＤＦ　ファイル", []string{"pdf", "フ", "ファ", "ァ", "ァイ", "イ", "イル", "ル"}},
		{"我的包裹", []string{"包", "包裹", "裹"}}, // 的 breaks the run; 我 alone says nothing
		{"包裹在哪里", []string{"包", "包裹", "裹", "裹在", "在哪", "哪里", "里"}},
		{"pdf文件", []string{"pdf", "文", "文件", "件"}},
		{"document:parse:ocr", []string{"document", "pars", "ocr"}},
		{"e-mail, SMS & fax!", []string{"e", "mail", "sms", "fax"}},
		{"택배 어디", []string{"택", "택배", "배", "어", "어디", "디"}},
		{"the a of", nil},
		{"", nil},
	} {
		require.Equal(t, tc.want, domain.Tokenize(tc.in), tc.in)
	}
}

func TestStem(t *testing.T) {
	t.Parallel()
	for _, group := range [][]string{
		{"parcel", "parcels"},
		{"track", "tracks", "tracking", "tracked"},
		{"summarize", "summarise", "summarized", "summarising", "summarization", "summarisation"},
		{"translate", "translated", "translating", "translation"},
		{"parse", "parsing", "parsed"},
		{"ship", "shipping", "shipped", "ships"},
		{"delivery", "deliveries"},
		{"invoice", "invoices"},
		{"box", "boxes"},
		{"process", "processes"},
	} {
		for _, w := range group[1:] {
			require.Equal(t, domain.Stem(group[0]), domain.Stem(w), "%s and %s", group[0], w)
		}
	}
	for _, w := range []string{"status", "analysis", "pdf", "sms", "go", "3d", "café"} {
		require.Equal(t, w, domain.Stem(w), "%s stays", w)
	}
}
