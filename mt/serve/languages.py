"""What the server says of languages: their names and codes for /languages, and /detect's evidence."""

from __future__ import annotations

import unicodedata

LANGUAGE_NAMES = {"ar": "Arabic", "de": "German", "en": "English", "es": "Spanish", "fr": "French", "it": "Italian",
                  "ja": "Japanese", "ko": "Korean", "pt": "Portuguese", "ru": "Russian", "zh": "Chinese"}
ALIASES = {"zh": ("zh-Hans", "zh-Hant", "zh-CN", "zh-TW")}  # mt's tokenizer converts either Chinese script
# /detect's evidence: the scripts a language is written in (the start of Unicode's character names); Latin otherwise
SCRIPTS = {"zh": ("CJK UNIFIED", "CJK COMPATIBILITY IDEOGRAPH"), "ja": ("CJK UNIFIED", "HIRAGANA", "KATAKANA"),
           "ko": ("HANGUL",), "ar": ("ARABIC",), "ru": ("CYRILLIC",), "el": ("GREEK",), "he": ("HEBREW",),
           "th": ("THAI",), "hi": ("DEVANAGARI",)}


def confidence(text: str, language: str) -> float:
    """The share of the text's letters written in the language's script, in percent."""
    letters = [c for c in text if c.isalpha()]
    scripts = SCRIPTS.get(language.split("-")[0], ("LATIN",))
    inside = sum(unicodedata.name(c, "").startswith(scripts) for c in letters)
    return round(100 * inside / len(letters), 1) if letters else 0.0
