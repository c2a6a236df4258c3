"""Real text → the sentences a model translates → the same text in the target language: paragraphs split into
sentences and rejoined, marks (HTML's inline tags, a document's runs) placed on the words they were on, and the
file formats people send (text, HTML, subtitles, Word documents)."""
