#!/usr/bin/env python3
"""Writes the tokenizer conformance corpus: raw byte lines, one per \\n.

usage: make_corpus.py OUT [--lines N] [--seed S]

The lines are what the C++ tokenizer and Hugging Face `tokenizers` must
agree on: ASCII prose and code, accented Latin (precomposed and
decomposed), CJK, emoji with ZWJ sequences, skin tones and flags, Arabic,
Hindi and Thai, runs of every kind of whitespace (tabs, \\v, \\f, \\r, NEL,
NBSP, U+3000, trailing spaces), digit runs in several scripts, contractions
in any case, punctuation runs, the added tokens of train_tokenizers.py in
and around words, and lines of random bytes that are not UTF-8. Lines never
contain \\n. The same seed always gives the same bytes, so the corpus is
regenerated at test time instead of being checked in.
"""
import argparse
import random

WORDS = """the of and to in is was for on that with as by at from his her it
an were are which this be or has had not but also first new one their after
who its two been they more have other all time year some into only she most
over would when during can three world later while between city then under
about state such may people part both these made used many could known before
american since national through where university well school war university
Python compiler tensor kernel shard pipeline gradient token model layer
attention embedding softmax matrix vector parallel device memory""".split()

CODE = [
    "def f(x):\treturn x + 1",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }",
    "if x == None: raise ValueError('bad')",
    "    return std::make_unique<Foo>(std::move(bar));",
    "#include <vector>  // std::vector<int64_t>",
    '{"key": [1, 2, 3], "nested": {"a": null, "b": true}}',
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name;",
    "x = np.zeros((3, 4), dtype=np.float32)  # shape (3,4)",
    "fn main() -> Result<(), Box<dyn Error>> { Ok(()) }",
    "$ ls -la /usr/lib | grep -i 'llvm' && echo \"done\"",
    "<div class=\"row\"><span>&nbsp;&amp;</span></div>",
    "lambda x, y: (x ** 2 + y ** 2) ** 0.5",
    "arr[i][j] += 0x1F & ~mask | (1 << 31);",
    "\t\tself.assertEqual(a, b, msg=f\"{a!r} != {b!r}\")",
    "a<=b>=c!=d===e!==f&&g||h",
]

LATIN = ["café", "naïve", "Zürich", "São Paulo", "Łódź", "İstanbul",
         "straße", "ÆØÅ æøå", "Ñandú", "Crème brûlée", "Kraków", "Dvořák",
         "œuvre", "façade", "jalapeño", "ﬁnancial ﬂow", "Ǆemal", "ǅ ǆ",
         "cafe\u0301", "n\u0303", "A\u030a", "e\u0301\u0302\u0323",
         "Ω Ω Å K", "ſ ß ẞ", "ΣΊΣΥΦΟΣ", "Москва", "Ελληνικά", "ĳsselmeer"]

CJK = ["中文分词测试", "我爱北京天安门", "東京都渋谷区", "ひらがなとカタカナ",
       "日本語のテキストです。", "한국어 문장입니다", "\u1100\u1161\u11a8",
       "漢字仮名交じり文", "中华人民共和国", "ｶﾀｶﾅ ＡＢＣ", "「引用」『二重』",
       "今日は、世界！", "𠀀𠀁𪚥", "㐀㐁", "〇一二三"]

EMOJI = ["😀", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇩🇪🇫🇷", "1️⃣", "❤️", "🧑🏿‍💻",
         "👩🏻‍🤝‍👨🏾", "🤷‍♂️", "🐈‍⬛", "✨", "🫠", "©️", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"]

OTHER = ["مرحبا بالعالم", "السلام عليكم ورحمة الله", "नमस्ते दुनिया",
         "हिन्दी में लिखा गया वाक्य", "สวัสดีครับ", "ภาษาไทยไม่มีช่องว่าง",
         "שלום עולם", "Γειά σου Κόσμε", "Привет, мир!", "ሰላም ልዑል",
         "ক্ষ", "தமிழ்", "ᜃᜓᜎᜒ"]

SPACES = [" ", "  ", "   ", "\t", "\t\t", " \t ", "\v", "\f", "\r", "\x85",
          "\u00a0", "\u3000", "\u2000", "\u2009", "\u200a", "\u202f",
          "\u205f", "\u1680", "\u2028", "\u2029", "\u200b", " \u00a0 ",
          "\r\r", "\u00a0\u00a0"]

DIGITS = ["0", "7", "42", "123", "2024", "31415926535", "1,000,000",
          "3.14159", "-17", "1e-9", "٣٤٥", "१२३", "１２３", "²³", "Ⅻ",
          "½", "0x7f", "2001:db8::1", "10%", "$19.99", "৪৫", "๑๒๓"]

CONTRACTIONS = ["don't", "I'LL", "we've", "She'S", "you'RE", "it'd",
                "I'm", "they'Ve", "y'all", "it’s", "'s", "'t", "O'Neil",
                "'ſ", "'ll've", "ROCK'N'ROLL", "can't've", "'Ll"]

PUNCT = ["!!!", "???", "...", "---", "«»", "“”", "<<<>>>", "@#$%^&*()",
         "!?", "?!.", ";;", "::", "~~~", "'''", '"""', "()[]{}", "--->",
         "…", "、。", "‼️", "¡¿", "•", "§¶"]

# Added tokens of train_tokenizers.py, and near misses, so that their
# splitting (lstrip, rstrip, single_word, normalized) is exercised.
ADDED = ["<|endoftext|>", "<s>", "</s>", "<unk>", "<pad>", "<mask>",
         "<code>", "[MASK]", "<|im_start|>", "<|im_end|>", "<|eot_id|>",
         "<|begin_of_text|>", "Café", "Cafe\u0301", "<|endoftext", "<s >",
         "< s>", "<mask", "<|im_start|>user", "</s></s>", "<s><s>"]


def word(rng):
    w = rng.choice(WORDS)
    r = rng.random()
    if r < 0.1:
        return w.upper()
    if r < 0.25:
        return w.capitalize()
    return w


def prose(rng):
    out = []
    for i in range(rng.randint(1, 25)):
        out.append(word(rng))
        if rng.random() < 0.15:
            out[-1] += rng.choice([",", ".", ";", ":", "!", "?"])
    s = " ".join(out)
    return s[0].upper() + s[1:] + rng.choice(["", ".", "!", "?", " "])


def pick(rng, pool):
    return rng.choice(pool)


CATEGORIES = {
    "prose": lambda rng: prose(rng),
    "code": lambda rng: pick(rng, CODE),
    "latin": lambda rng: " ".join(pick(rng, LATIN)
                                  for _ in range(rng.randint(1, 6))),
    "cjk": lambda rng: "".join(pick(rng, CJK)
                               for _ in range(rng.randint(1, 4))),
    "emoji": lambda rng: rng.choice(["", " "]).join(
        pick(rng, EMOJI) for _ in range(rng.randint(1, 6))),
    "other": lambda rng: " ".join(pick(rng, OTHER)
                                  for _ in range(rng.randint(1, 3))),
    "spaces": lambda rng: "".join(
        pick(rng, SPACES) + (word(rng) if rng.random() < 0.5 else "")
        for _ in range(rng.randint(1, 8))),
    "digits": lambda rng: " ".join(pick(rng, DIGITS)
                                   for _ in range(rng.randint(1, 6))),
    "contractions": lambda rng: " ".join(
        pick(rng, CONTRACTIONS + WORDS[:20])
        for _ in range(rng.randint(1, 8))),
    "punct": lambda rng: "".join(pick(rng, PUNCT + [" ", "a", "1"])
                                 for _ in range(rng.randint(1, 10))),
    "added": lambda rng: "".join(
        pick(rng, ADDED + SPACES[:6] + WORDS[:30] + ["x", "é", "1"])
        for _ in range(rng.randint(1, 10))),
}


def mixed(rng):
    """A line joining pieces of every category, the most adversarial kind."""
    names = sorted(CATEGORIES)
    parts = [CATEGORIES[rng.choice(names)](rng)
             for _ in range(rng.randint(2, 6))]
    return "".join(p + pick(rng, SPACES + [""] * 8) for p in parts)


def random_bytes(rng):
    """Bytes that are mostly not UTF-8: stray continuation bytes, truncated
    and overlong sequences, surrogates, and bytes above U+10FFFF, with some
    valid text in between."""
    fragments = [b"\x80", b"\xbf", b"\xc0\xaf", b"\xc3", b"\xe2\x82",
                 b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\xf4\x90\x80\x80",
                 b"\xff", b"\xfe", b"\xf8\x88\x80\x80\x80", b"\xe0\x80\x80",
                 "é".encode(), "€".encode(), "😀".encode(), b"abc", b" ",
                 b"\t", b"<s>", b"\xc3<s>"]
    out = bytearray()
    for _ in range(rng.randint(1, 20)):
        if rng.random() < 0.5:
            out += rng.choice(fragments)
        else:
            out += bytes(rng.choice([b for b in range(256) if b != 10])
                         for _ in range(rng.randint(1, 6)))
    return bytes(out)


def lines(n, seed):
    rng = random.Random(seed)
    names = sorted(CATEGORIES)
    yield b""
    for i in range(n - 1):
        r = rng.random()
        if r < 0.12:
            line = random_bytes(rng)
        elif r < 0.40:
            line = mixed(rng).encode()
        elif r < 0.41:
            # A long line, so that long words and long runs are covered.
            line = " ".join(mixed(rng) for _ in range(40)).encode()
        elif r < 0.415:
            line = (pick(rng, SPACES) * rng.randint(50, 300)).encode()
        else:
            line = CATEGORIES[rng.choice(names)](rng).encode()
        if rng.random() < 0.1:
            line += pick(rng, [" ", "  ", "\t", " \u3000"]).encode()
        yield line.replace(b"\n", b" ")


def training_text(n, seed):
    """Valid UTF-8 text for train_tokenizers.py, from the same generators."""
    return "\n".join(l.decode("utf-8", "replace")
                     for l in lines(n, seed)) + "\n"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--lines", type=int, default=12000)
    ap.add_argument("--seed", type=int, default=20240611)
    args = ap.parse_args()
    with open(args.out, "wb") as f:
        for line in lines(args.lines, args.seed):
            f.write(line + b"\n")
    print(f"make_corpus: wrote {args.lines} lines to {args.out}")


if __name__ == "__main__":
    main()
