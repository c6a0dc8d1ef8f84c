// Writes texts.json: the inputs of the tokenizer fixtures (Brown corpus lines plus hand-made
// edge cases). Run once; texts.json is committed, so rerunning is only needed to change it.
//   node make_texts.mjs /work/shared/data/text/brown-test.txt
import fs from "node:fs";

const brownPath = process.argv[2] ?? "../../../shared/data/text/brown-test.txt";
const lines = fs.readFileSync(brownPath, "utf8").split("\n").filter((l) => l.trim().length > 0);
// Every 2nd non-empty line, capped in length so the fixtures stay small.
const brown = lines.filter((_, i) => i % 2 === 0).slice(0, 200).map((l) => l.slice(0, 400));

const handmade = [
  "", " ", "  ", "   ", "\n", "\n\n", "\n\n\n", "\t", "\t\t", " \n ", "\r\n", "a\r\nb", "x\n\n\ny",
  "   x", "x   ", "x \n", "hello world", "Hello world", " Hello world", "Hello  world",
  "Hello   world  ", "trailing spaces   ", "\tindented\ttabs\t", "line1\nline2\n", "a\n \nb",
  "I'm", "I'M", "you're", "YOU'RE", "it's", "IT'S", "don't", "DON'T", "we've", "WE'VE", "she'll",
  "SHE'LL", "he'd", "HE'D", "'s 't 're 've 'm 'll 'd", "rock 'n' roll", "O'Neil's", "''quoted''",
  "0", "7", "42", "123", "1234", "12345", "3.14159", "1,000,000", "2026-12-02", "12:30pm",
  "9876543210123456789", "v1.2.3", "0x1F4A9", "1e-10", "½ ¾ ² ³", "٣٤٥ ١٢",
  "café", "naïve résumé", "Crème brûlée", "Ångström", "cafe\u0301", "e\u0301\u0301", "ﬁ ligature",
  "Übergrößenträger", "señor niño", "Ελληνικά γράμματα", "Привет, мир!", "Здравствуйте",
  "עברית", "العربية", "हिन्दी भाषा", "ไทย", "한국어 텍스트", "日本語のテキスト", "カタカナ",
  "中文文本", "你好，世界！", "我爱北京天安门。", "混合English和中文", "한글과English",
  "😀", "😀😃😄", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "❤️", "I ❤️ NY", "emoji🙂inside", "🇮🇸🇫🇷",
  "\u00a0nbsp\u00a0", "zero\u200bwidth", "\ufeffBOM", "\u3000ideographic space", "a\u2028b",
  "\u000bvt\u000cff", "tab\there", "mixed \t \n whitespace",
  "def foo(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
  "#include <stdio.h>\nint main() { printf(\"hi\\n\"); }", "if (a && b || !c) { x->y = z; }",
  "const f = (a, b) => a ?? b;", "SELECT * FROM users WHERE id = 42;", "<div class=\"x\">hi</div>",
  "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}", "path/to/file.txt", "C:\\Windows\\System32",
  "https://example.com/a?b=c&d=e#f", "user@example.com", "$HOME && echo ${PATH}", "a_b_c snake_case",
  "CamelCaseIdentifier", "x+=1;y-=2;", "    indented code", "!!!", "???", "...", "---", "***",
  "(((nested)))", "[brackets] {braces}", "@#$%^&*", "~`|\\", "a.b.c", "end.", "Wait... what?!",
  "<s>", "</s>", "<unk>", "<s>hi</s>", "<s> hi </s>", "text<s>more", "<s><s>", "< s >", "<s",
  "<|begin_of_text|>", "<|begin_of_text|>x<|eot_id|>", "<|end_of_text|>",
  "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>", "<|im_start|>user\nhi<|im_end|>",
  "<|endoftext|>", "<think>\nreasoning\n</think>\n\nanswer", "<tool_call>{}</tool_call>",
  "<bos>", "<eos>", "<start_of_turn>user\nHello<end_of_turn>\n", "<pad><mask>", "<unused0>",
  "<table><tr><td>1</td></tr></table>", "<b>bold</b> and <i>it</i>", "<|fake_token|>", "<|",
  "▁", "▁▁", "hello▁world", "▁leading", "<0x41>", "<0xFF>",
  "\u0000", "\u0001\u0002", "\u007f", "\u0085", "\u00ad soft hyphen", "\ud7ff", "\ue000 private",
  "\u{10FFFF}", "\u{1F600}\u{1F601}", "a\u0300\u0301\u0302", "\u1100\u1161\u11a8", "Å Å",
  "ǅ ǈ ǋ", "ﬀ ﬃ", "Ⅻ ⅻ", "①②③", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "𝟘𝟙𝟚", "ᴬᴮᶜ",
  "A", "a", "Z", "The", " the", "THE", "tHe", "supercalifragilisticexpialidocious",
  "antidisestablishmentarianism", "pneumonoultramicroscopicsilicovolcanoconiosis",
  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
  "ababababababababababababababababab", "           many spaces           ",
  "\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n\n",
  "\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t",
  "=================================================================",
  "1234567890".repeat(8), "a".repeat(300), "ab ".repeat(60), "😀".repeat(20),
  "The quick brown fox jumps over the lazy dog.", "THE QUICK BROWN FOX JUMPS OVER THE LAZY DOG!",
  "Mr. Smith's car isn't here; it's Dr. Jones's.", "\"Quoted,\" she said, 'and single'.",
  "Hello , world . How are you ? Fine !", "He said : \" no \" .", "don 't", "can n't", "I 'm here",
  "they 're", "we 've", "it 's", "a ' b", "x ' y ' z", " . , ! ?",
];

const texts = [...handmade, ...brown];
fs.writeFileSync("texts.json", JSON.stringify(texts, null, 0).replace(/","/g, "\",\n\"") + "\n");
console.log(`texts.json: ${texts.length} texts (${handmade.length} hand-made, ${brown.length} Brown)`);
