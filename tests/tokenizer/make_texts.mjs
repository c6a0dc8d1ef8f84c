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

// Combining marks (\p{M}) after letters, digits, punctuation and spaces: Qwen3.5's pre-tokenizer
// keeps them with the letters, Qwen3's splits them off. Scripts whose vowel signs, viramas and
// harakat are marks that NFC does not compose away, decomposed Vietnamese and Hangul that NFC
// composes, and emoji with skin tones, variation selectors, ZWJ and keycaps.
const marks = [
  // Devanagari (vowel signs, virama, nukta, anusvara, danda, digits)
  "नमस्ते दुनिया", "हिन्दी में लिखा गया वाक्य।", "क्षत्रिय ज्ञान श्री", "संस्कृतम् ॐ १२३",
  "प्रेम, शांति और सद्भाव!", "ज़िंदगी", "क\u093c\u093f ख\u093c", "अंग्रेज़ी English मिश्रित",
  "रामायण\nमहाभारत", "  द्वितीय  ", "'क्या' \"है\"",
  // Thai (above/below vowels and tone marks)
  "สวัสดีครับ", "ภาษาไทยเป็นภาษาที่สวยงาม", "กรุงเทพมหานคร ๒๕๖๗", "น้ำ ไม้ ที่นี่", "ผู้ใหญ่บ้าน",
  "ประเทศไทย, 2567!",
  // Vietnamese, precomposed and decomposed (NFC composes both orders of stacked marks)
  "Tiếng Việt có dấu", "Xin chào các bạn, tôi là người Việt Nam.", "Phở bò, bánh mì, cà phê sữa đá",
  "Nguyễn Thị Hương", "Tiếng Việt có dấu".normalize("NFD"),
  "Xin chào các bạn, tôi là người Việt Nam.".normalize("NFD"), "Nguyễn Thị Hương".normalize("NFD"),
  "Vie\u0302\u0323t Nam", "Vie\u0323\u0302t Nam", "PHỞ".normalize("NFD"),
  // Hangul: conjoining jamo (composed by NFC), old jamo that do not compose, compatibility jamo
  "\u1112\u1161\u11ab\u1100\u1173\u11af", "한국어 텍스트".normalize("NFD"), "\u1100\u1161 \u1102\u1161\u1103\u1161",
  "\u1112\u119e\u11ab \u1100\u1100\u1161", "ㅎㅏㄴ ㄱㅡㄹ", "대한민국".normalize("NFD") + "!",
  // Latin with combining marks, some without a precomposed form
  "n\u0303o\u0308 q\u0303 x\u0302", "Z\u0361alg\u0337o t\u0336e\u0335x\u0334t", "a\u0301\u0301\u0301b",
  "e\u0301te\u0301 cafe\u0301s", "\u0301leading mark", "word \u0308 spaced mark", "A\u030angstro\u0308m",
  "i\u0307 I\u0307 \u0131\u0307", "m\u0325\u0304 r\u0325\u0304", "!\u0301?", "a  \u0301b", "'\u0301s it'\u0301s",
  "5\u0301 0\u0338 \u00bd\u0301", "x\n\u0301y", "\u20dd\u20de enclosing", "(\u0332u\u0332n\u0332d\u0332e\u0332r\u0332)",
  // Arabic with harakat (and shadda, tanwin, superscript alef, tatweel), Hebrew with niqqud
  "بِسْمِ اللَّهِ الرَّحْمَٰنِ الرَّحِيمِ", "مَرْحَبًا بِكُمْ", "اَلْعَرَبِيَّةُ لُغَةٌ جَمِيلَةٌ", "كَتَبَ ١٢٣ كِتَابًا",
  "عـــربي", "قُلْ: «نَعَمْ»", "שָׁלוֹם עוֹלָם",
  // Other abugidas
  "தமிழ் மொழி", "বাংলা ভাষা", "မြန်မာ", "ಕನ್ನಡ", "සිංහල",
  // Emoji: skin tones, ZWJ sequences, variation selectors (marks), keycaps (an enclosing mark)
  "👋🏻 👋🏼 👋🏽 👋🏾 👋🏿", "👩🏽‍💻 🧑🏿‍🚀", "❤️‍🔥 ☺️ ✌🏼", "👨‍❤️‍👨 family", "🏃‍♀️‍➡️", "text👍🏻text",
  "☝️ ⚠️ ✔️", "1\ufe0f\u20e3 #\ufe0f\u20e3 *\u20e3", "a\ufe0f b\ufe0e", "Hello नमस्ते สวัสดี مرحبا 👋🏽",
];

const texts = [...handmade, ...marks, ...brown];
fs.writeFileSync("texts.json", JSON.stringify(texts, null, 0).replace(/","/g, "\",\n\"") + "\n");
console.log(`texts.json: ${texts.length} texts (${handmade.length + marks.length} hand-made, ${brown.length} Brown)`);
